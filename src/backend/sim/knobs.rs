// SPDX-License-Identifier: GPL-2.0

//! debugfs files of the simulated node, under
//! `/sys/kernel/debug/kfd_preempt/sim/` (netdevsim-style knobs; each is
//! documented in `Documentation/simulated-node.rst`).
//!
//! * `status`: counters and invariants of the whole model;
//! * `control`: actions a test triggers from outside the tenant (memory
//!   eviction, external resume, tenant exit, queue destroy);
//! * `nodeN/`: the cost model and fault injection of node N, its counters,
//!   and its reaction log (`preempt_log`).

use core::fmt;

use kernel::{
    debugfs::{
        Dir,
        Scope, //
    },
    prelude::*,
    str::CString,
    sync::{
        atomic::Relaxed,
        Arc, //
    },
    uaccess::UserSliceReader,
};

use super::{
    Sim,
    GPU_ID_BASE, //
};

/// What the files of the `sim` directory read and write.
pub(crate) struct Files {
    sim: Arc<Sim>,
    /// One per node, for the files that need the model's lock and the
    /// node's number.
    nodes: KVec<NodeFile>,
}

/// A node's files that live in the model (behind [`Sim::state`]).
struct NodeFile {
    sim: Arc<Sim>,
    node: u32,
}

/// Creates the `sim` directory in `parent`; it lives as long as the scope.
pub(crate) fn files(parent: &Dir, sim: Arc<Sim>) -> impl PinInit<Scope<Files>, Error> + '_ {
    let data = (|| {
        let mut nodes = KVec::with_capacity(sim.nodes() as usize, GFP_KERNEL)?;
        for node in 0..sim.nodes() {
            nodes.push(
                NodeFile {
                    sim: sim.clone(),
                    node,
                },
                GFP_KERNEL,
            )?;
        }
        Ok::<_, Error>(Files { sim, nodes })
    })();
    parent.scope(data, c"sim", |files: &Files, dir| {
        let sim: &Sim = &files.sim;
        dir.read_callback_file(c"status", sim, &status);
        dir.write_only_callback_file(c"control", sim, &control);
        dir.read_write_file(c"fail_node_lists", &sim.fail_node_lists);
        for (nf, k) in files.nodes.iter().zip(sim.knobs.iter()) {
            let n = nf.node;
            let Ok(name) = CString::try_from_fmt(fmt!("node{n}")) else {
                continue;
            };
            let d = dir.dir(&name);
            d.read_write_file(c"cycle_ns", &k.cycle_ns);
            d.read_write_file(c"per_queue_ns", &k.per_queue_ns);
            d.read_write_file(c"mes_call_ns", &k.mes_call_ns);
            d.read_write_file(c"fail_unmaps", &k.fail_unmaps);
            d.read_write_file(c"fail_maps", &k.fail_maps);
            d.read_write_file(c"delay_next_us", &k.delay_next_us);
            d.read_only_file(c"runlist_updates", &k.runlist_updates);
            d.read_only_file(c"resets", &k.resets);
            d.read_only_file(c"suspended_queues", &k.suspended_queues);
            d.read_write_callback_file(c"preempt_log", nf, &preempt_log, &preempt_log_clear);
        }
    })
}

/// `nodeN/preempt_log`: `# dropped N`, then `unmap_ns queues doorbell_ns`
/// per record, oldest first.
fn preempt_log(nf: &NodeFile, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    let st = nf.sim.state.lock();
    match st.preempt_logs.get(nf.node as usize) {
        Some(log) => log.show(f),
        None => Ok(()),
    }
}

/// Writing anything to `nodeN/preempt_log` clears it.
fn preempt_log_clear(nf: &NodeFile, _reader: &mut UserSliceReader) -> Result {
    let mut st = nf.sim.state.lock();
    if let Some(log) = st.preempt_logs.get_mut(nf.node as usize) {
        log.clear();
    }
    Ok(())
}

/// `status`: one `key value` per line, so shell and C tests can parse it.
fn status(sim: &Sim, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    let mut st = sim.state.lock();
    st.reap(sim);
    let broken = st.audit();
    let alive = st.processes.iter().filter(|p| p.alive()).count();
    let queues: usize = st.processes.iter().map(|p| p.queues.len()).sum();
    writeln!(f, "processes {alive}")?;
    writeln!(f, "processes_exited {}", st.processes_exited)?;
    writeln!(f, "queues {queues}")?;
    writeln!(f, "suspended {}", st.suspended())?;
    writeln!(f, "misplaced {}", st.misplaced())?;
    writeln!(
        f,
        "conservation_errors {}",
        st.conservation_errors + broken as u64
    )?;
    for n in 0..sim.nodes() {
        let (all, mapped) = st.node_queues(n);
        let k = &sim.knobs[n as usize];
        writeln!(
            f,
            "node{n} gpu_id {:#x} mode {} queues {all} mapped {mapped} runlist_updates {} resets {}",
            GPU_ID_BASE + n,
            if sim.mes[n as usize] { "mes" } else { "hws" },
            k.runlist_updates.load(Relaxed),
            k.resets.load(Relaxed),
        )?;
    }
    Ok(())
}

/// One `control` command, e.g. `evict 1234 0`.
enum Command {
    /// A memory eviction of the tenant's queues on a node (nests with
    /// FREEZE, as amdkfd's `qpd->evicted`).
    Evict { tgid: i32, node: u32 },
    /// Its restore.
    Restore { tgid: i32, node: u32 },
    /// The tenant clears a suspension itself (KFD debugger attach/detach).
    ExternalResume { tgid: i32, queue_id: u32 },
    /// The tenant's queue is destroyed.
    Destroy { tgid: i32, queue_id: u32 },
    /// The tenant's KFD process is torn down, as at exit.
    Exit { tgid: i32 },
}

fn parse(s: &str) -> Result<Command> {
    let mut w = s.split_whitespace();
    let verb = w.next().ok_or(EINVAL)?;
    let mut num = || -> Result<i64> { w.next().ok_or(EINVAL)?.parse().map_err(|_| EINVAL) };
    let tgid = i32::try_from(num()?).map_err(|_| EINVAL)?;
    let cmd = match verb {
        "exit" => Command::Exit { tgid },
        _ => {
            let arg = u32::try_from(num()?).map_err(|_| EINVAL)?;
            match verb {
                "evict" => Command::Evict { tgid, node: arg },
                "restore" => Command::Restore { tgid, node: arg },
                "external_resume" => Command::ExternalResume {
                    tgid,
                    queue_id: arg,
                },
                "destroy" => Command::Destroy {
                    tgid,
                    queue_id: arg,
                },
                _ => return Err(EINVAL),
            }
        }
    };
    if w.next().is_some() {
        return Err(EINVAL);
    }
    Ok(cmd)
}

/// `control`: applies a command to every live simulated process of `tgid`
/// (in the writer's pid namespace); ESRCH if there is none.
fn control(sim: &Sim, reader: &mut UserSliceReader) -> Result {
    let mut buf = [0u8; 96];
    let len = reader.len();
    if len >= buf.len() {
        return Err(EINVAL);
    }
    reader.read_slice(&mut buf[..len])?;
    let text = core::str::from_utf8(&buf[..len]).map_err(|_| EINVAL)?;
    let cmd = parse(text)?;
    let tgid = match cmd {
        Command::Evict { tgid, .. }
        | Command::Restore { tgid, .. }
        | Command::ExternalResume { tgid, .. }
        | Command::Destroy { tgid, .. }
        | Command::Exit { tgid } => tgid,
    };
    if let Command::Evict { node, .. } | Command::Restore { node, .. } = cmd {
        if node >= sim.nodes() {
            return Err(EINVAL);
        }
    }

    let mut st = sim.state.lock();
    st.reap(sim);
    let mut ids = KVec::new();
    for p in st.processes.iter() {
        if p.alive() && p.leader.tgid_nr_ns(None) == tgid {
            ids.push(p.id, GFP_KERNEL)?;
        }
    }
    if ids.is_empty() {
        return Err(ESRCH);
    }
    for &id in ids.iter() {
        match cmd {
            Command::Evict { node, .. } => st.evict(sim, id, node, false).2?,
            Command::Restore { node, .. } => st.evict(sim, id, node, true).2?,
            Command::ExternalResume { queue_id, .. } => st.external_resume(sim, id, queue_id)?,
            Command::Destroy { queue_id, .. } => st.destroy_queue(sim, id, queue_id)?,
            Command::Exit { .. } => st.destroy_process(sim, id),
        }
    }
    Ok(())
}
