// SPDX-License-Identifier: GPL-2.0

//! The model of simulated KFD nodes: processes, queues that make progress
//! while mapped, HWS runlist cycles and MES calls, eviction nesting, node
//! resets (`Documentation/simulated-node.rst`).
//!
//! Everything here runs under [`super::Sim::state`]. The rules for marking
//! and unmarking queues copy those of the amdkfd glue
//! (`glue/kfdp_queues.c`) line for line, so that the kselftests exercise
//! the same statuses users see on hardware.

use kernel::{
    mm::Mm,
    prelude::*,
    sync::{
        aref::ARef,
        atomic::{
            Atomic,
            Relaxed, //
        },
        Arc,
    },
    task::Task,
    time::{
        delay::fsleep,
        Delta,
        Instant,
        Monotonic, //
    },
};

// A child: what each node executes is part of the model's state, and
// only the model drives it.
#[path = "exec.rs"]
pub(crate) mod exec;

use self::exec::NodeExec;
use super::{
    preempt_log::{
        PreemptLog,
        Record, //
    },
    ring::Ring,
    NodeKnobs,
    Sim,
    MAX_NODES, //
};
use crate::{
    backend::{
        Op,
        Outcome, //
    },
    clock::now_ns,
    uapi, //
};

/// A mapped queue retires its in-flight work and dispatches this many new
/// units every tick.
pub(crate) const WORK_PER_TICK: u64 = 16;
/// Length of a tick.
pub(crate) const TICK_NS: i64 = 1_000_000;
/// Queues per simulated process: amdkfd's KFD_MAX_NUM_OF_QUEUES_PER_PROCESS.
pub(crate) const MAX_QUEUES: usize = 1024;
/// Simulated processes at once (the /dev/kfd_preempt_sim opens).
pub(crate) const MAX_PROCESSES: usize = 64;
/// Highest queue priority (amdkfd's KFD_MAX_QUEUE_PRIORITY).
pub(crate) const MAX_PRIORITY: u32 = 15;
/// Longest delay one cycle or call may add, so a mistyped knob cannot
/// trigger the hung-task detector.
const MAX_DELAY_NS: u64 = 1_000_000_000;

/// KFD_IOC_QUEUE_TYPE_* of include/uapi/linux/kfd_ioctl.h.
pub(crate) use crate::uapi::{
    KFD_IOC_QUEUE_TYPE_COMPUTE as QUEUE_TYPE_COMPUTE,
    KFD_IOC_QUEUE_TYPE_COMPUTE_AQL as QUEUE_TYPE_COMPUTE_AQL,
    KFD_IOC_QUEUE_TYPE_SDMA as QUEUE_TYPE_SDMA, //
};

/// One simulated user-mode queue.
pub(crate) struct Queue {
    pub(crate) id: u32,
    pub(crate) node: u32,
    pub(crate) qtype: u32,
    pub(crate) priority: u32,
    /// The module's mark (amdkfd's `is_suspended`).
    pub(crate) suspended: bool,
    /// Reset with its node: never mapped again.
    pub(crate) reset: bool,
    /// On the hardware (in the runlist, or added to MES).
    pub(crate) mapped: bool,
    /// Work units retired so far.
    pub(crate) retired: u64,
    /// Dispatched and not retired, in the hardware while mapped...
    in_flight: u64,
    /// ...and in the context-save area while unmapped.
    saved: u64,
    /// Every unit ever dispatched, and those lost in a node reset: the
    /// conservation oracle is `retired + in_flight + saved + lost ==
    /// dispatched`.
    dispatched: u64,
    lost: u64,
    /// Start of the current tick while mapped.
    last: Instant<Monotonic>,
    /// A ring queue's memory (`None`: the queue makes unit progress).
    pub(crate) ring: Option<KBox<Ring>>,
}

impl Queue {
    /// Whether the queue belongs on the hardware, given its process's
    /// eviction count on its node.
    fn runs_with(&self, evicted: u32) -> bool {
        !self.suspended && !self.reset && evicted == 0
    }

    fn is_compute(&self) -> bool {
        matches!(self.qtype, QUEUE_TYPE_COMPUTE | QUEUE_TYPE_COMPUTE_AQL)
    }

    /// Brings progress up to `now`: each whole tick while mapped retires
    /// the in-flight units and dispatches new ones.
    fn advance(&mut self, now: Instant<Monotonic>) {
        // A ring queue runs its tenant's dispatches instead ([`exec`]).
        if !self.mapped || self.ring.is_some() {
            self.last = now;
            return;
        }
        let ticks = (now - self.last).as_nanos() / TICK_NS;
        if ticks <= 0 {
            return;
        }
        let t = ticks as u64;
        self.retired += self.in_flight + WORK_PER_TICK * (t - 1);
        self.in_flight = WORK_PER_TICK;
        self.dispatched += WORK_PER_TICK * t;
        self.last = self.last + Delta::from_nanos(ticks * TICK_NS);
    }

    /// Takes the queue off the hardware, saving its in-flight work (CWSR).
    fn unmap(&mut self, now: Instant<Monotonic>) {
        self.advance(now);
        self.saved += self.in_flight;
        self.in_flight = 0;
        self.mapped = false;
    }

    /// Puts it back, restoring the saved work.
    fn map(&mut self, now: Instant<Monotonic>) {
        // Mapping reads the write index from memory: doorbells rung while
        // unmapped were dropped, their packets are found here.
        if let Some(r) = self.ring.as_mut() {
            r.observe(now_ns());
        }
        self.in_flight += self.saved;
        self.saved = 0;
        self.mapped = true;
        self.last = now;
    }

    /// A node reset: the in-flight work is lost, the queue is dead.
    fn reset(&mut self, now: Instant<Monotonic>) {
        self.advance(now);
        self.lost += self.in_flight;
        self.in_flight = 0;
        self.mapped = false;
        self.reset = true;
    }

    fn conserved(&self) -> bool {
        self.retired + self.in_flight + self.saved + self.lost == self.dispatched
    }

    /// Progress as the tenant sees it: (retired, in flight).
    pub(crate) fn progress(&mut self, now: Instant<Monotonic>) -> (u64, u64) {
        self.advance(now);
        (self.retired, self.in_flight + self.saved)
    }
}

/// One simulated KFD process: the state behind one open
/// `/dev/kfd_preempt_sim` file.
pub(crate) struct Process {
    /// Unique, never reused; the engine's key of the target.
    pub(crate) id: u64,
    /// Identity of the tenant's file, to recognise its fd at ATTACH.
    pub(crate) file: usize,
    pub(crate) leader: ARef<Task>,
    /// Its address space and whether it was torn down; the entry itself
    /// lives until the file is released, so that ATTACH of a dead tenant's
    /// fd is ESRCH. Shared with the targets that name the process.
    pub(crate) life: Arc<Liveness>,
    /// Per-node eviction count (amdkfd's `qpd->evicted`): freezes and
    /// simulated memory evictions nest here.
    pub(crate) evicted: [u32; MAX_NODES as usize],
    pub(crate) queues: KVec<Queue>,
}

/// Whether a process is alive, shared with the engine's targets: the
/// engine asks every attachment's target whether it is alive at every
/// call, and asking under the model's lock made a SCHED_FIFO daemon's
/// PREEMPT and SAMPLE wait for whichever tenant or worker held that lock
/// (`Documentation/simulated-node.rst`). A stale `true` is harmless:
/// whatever the caller then does takes the lock and finds the process gone.
pub(crate) struct Liveness {
    /// Cleared when the process is torn down.
    alive: Atomic<bool>,
    /// The opener's address space (an mm_count reference: the `mm_struct`,
    /// not its mappings): the process dies with it, as a KFD process dies
    /// with its mm.
    pub(crate) mm: ARef<Mm>,
}

impl Liveness {
    /// Whether the process has not been torn down.
    pub(crate) fn get(&self) -> bool {
        self.alive.load(Relaxed)
    }

    /// Whether the process is alive for the engine: not torn down, and its
    /// address space not gone (the next reap tears such a process down, as
    /// amdkfd's mmu notifier does).
    pub(crate) fn running(&self) -> bool {
        self.get() && self.mm.mmget_not_zero().is_some()
    }

    /// The process is torn down, for good. Called under the model's lock,
    /// so that a reader holding it sees the process and its flag agree.
    fn clear(&self) {
        self.alive.store(false, Relaxed);
    }
}

impl Process {
    /// Whether the process is alive (not torn down).
    pub(crate) fn alive(&self) -> bool {
        self.life.get()
    }

    fn should_run(&self, q: &Queue) -> bool {
        q.runs_with(self.evicted[q.node as usize])
    }

    /// KFDP_QS_* bits of a queue.
    pub(crate) fn state_bits(&self, q: &Queue) -> u32 {
        let mut s = 0;
        if q.mapped {
            s |= uapi::KFDP_QS_ACTIVE;
        }
        if q.suspended {
            s |= uapi::KFDP_QS_SUSPENDED;
        }
        if self.evicted[q.node as usize] > 0 {
            s |= uapi::KFDP_QS_EVICTED;
        }
        if q.reset {
            s |= uapi::KFDP_QS_RESET;
        }
        s
    }
}

/// A request of a batch, as the model sees it.
#[derive(Clone, Copy, Default)]
pub(crate) struct Req {
    pub(crate) process: u64,
    /// `None`: the gpu_id is not a simulated node.
    pub(crate) node: Option<u32>,
    pub(crate) queue_id: u32,
    pub(crate) owned: bool,
    pub(crate) status: Outcome,
    pub(crate) marked: bool,
    /// The queue's place on the hardware must change: its (process,
    /// queue) indices, which stay valid for the whole batch.
    moves: Option<(usize, usize)>,
}

impl Req {
    pub(crate) fn new(process: u64, node: Option<u32>, queue_id: u32, owned: bool) -> Self {
        Self {
            process,
            node,
            queue_id,
            owned,
            status: Outcome::Done,
            marked: false,
            moves: None,
        }
    }
}

/// What the hardware was asked to do, and how long it took.
#[derive(Default, Clone, Copy)]
pub(crate) struct Cost {
    pub(crate) runlist_updates: u32,
    pub(crate) elapsed_ns: u64,
}

/// The whole model.
pub(crate) struct State {
    nodes: u32,
    next_id: u64,
    pub(crate) processes: KVec<Process>,
    /// Map or unmap that broke conservation; must stay 0.
    pub(crate) conservation_errors: u64,
    /// Processes torn down (file closed or mm gone).
    pub(crate) processes_exited: u64,
    /// What each node is executing ([`exec`]), by node.
    pub(crate) exec: KVec<NodeExec>,
    /// The unmaps PREEMPT caused on each node, by node.
    pub(crate) preempt_logs: KVec<PreemptLog>,
    /// The driver is queued or running; it is told to stop at module exit.
    pub(crate) driving: bool,
    pub(crate) driver_stopping: bool,
}

/// The set of `nodes` as a bit mask ([`MAX_NODES`] is 64).
fn node_mask(nodes: impl Iterator<Item = u32>) -> u64 {
    nodes
        .filter(|&n| n < MAX_NODES)
        .fold(0, |m, n| m | (1u64 << n))
}

fn delay(ns: u64) {
    let ns = ns.min(MAX_DELAY_NS);
    if ns > 0 {
        fsleep(Delta::from_nanos(ns as i64));
    }
}

impl State {
    /// The model of `nodes` nodes (at most [`MAX_NODES`]). A node's state is
    /// its [`NodeExec`] and an empty [`PreemptLog`]: nothing runs for a
    /// node without queues.
    pub(crate) fn new(nodes: u32) -> Result<Self> {
        if nodes > MAX_NODES {
            return Err(EINVAL);
        }
        let n = nodes as usize;
        let mut exec = KVec::with_capacity(n, GFP_KERNEL)?;
        exec.resize(n, NodeExec::default(), GFP_KERNEL)?;
        let mut preempt_logs = KVec::with_capacity(n, GFP_KERNEL)?;
        for _ in 0..n {
            preempt_logs.push(PreemptLog::default(), GFP_KERNEL)?;
        }
        Ok(Self {
            nodes,
            next_id: 1,
            processes: KVec::new(),
            conservation_errors: 0,
            processes_exited: 0,
            exec,
            preempt_logs,
            driving: false,
            driver_stopping: false,
        })
    }

    /// Number of nodes.
    pub(crate) fn nodes(&self) -> u32 {
        self.nodes
    }

    fn check(&mut self, ok: bool) {
        if !ok {
            self.conservation_errors += 1;
        }
    }

    /// Index of live process `id`.
    pub(crate) fn find(&self, id: u64) -> Option<usize> {
        self.processes.iter().position(|p| p.id == id && p.alive())
    }

    /// The process of tenant file `file`, alive or not.
    pub(crate) fn by_file(&self, file: usize) -> Option<&Process> {
        self.processes.iter().find(|p| p.file == file)
    }

    /// Creates the process of a newly opened tenant file.
    pub(crate) fn create_process(
        &mut self,
        file: usize,
        leader: ARef<Task>,
        mm: ARef<Mm>,
    ) -> Result<u64> {
        if self.processes.len() >= MAX_PROCESSES {
            return Err(EMFILE);
        }
        let life = Arc::new(
            Liveness {
                alive: Atomic::new(true),
                mm,
            },
            GFP_KERNEL,
        )?;
        let id = self.next_id;
        self.next_id += 1;
        self.processes.push(
            Process {
                id,
                file,
                leader,
                life,
                evicted: [0; MAX_NODES as usize],
                queues: KVec::new(),
            },
            GFP_KERNEL,
        )?;
        Ok(id)
    }

    /// Tears processes whose address space is gone down, as amdkfd does
    /// from its mmu_notifier `release`.
    pub(crate) fn reap(&mut self, sim: &Sim) {
        for i in 0..self.processes.len() {
            let p = &self.processes[i];
            if p.alive() && !p.life.running() {
                let id = p.id;
                self.destroy_process(sim, id);
            }
        }
    }

    /// Tears process `id` down with all its queues (its mm went away, its
    /// file was closed, or a test asked for it). Dead or unknown ids are
    /// ignored.
    pub(crate) fn destroy_process(&mut self, sim: &Sim, id: u64) {
        let Some(i) = self.find(id) else {
            return;
        };
        let now = now_ns();
        // Only the nodes this process has queues on change; the others
        // (most of a 64-node host) are left alone.
        let on = node_mask(self.processes[i].queues.iter().map(|q| q.node));
        for n in (0..self.nodes).filter(|&n| on & (1u64 << n) != 0) {
            self.pause_node(n, now);
        }
        let p = &mut self.processes[i];
        p.life.clear();
        p.evicted = [0; MAX_NODES as usize];
        let queues = core::mem::take(&mut p.queues);
        for n in (0..self.nodes).filter(|&n| on & (1u64 << n) != 0) {
            let mapped = queues.iter().filter(|q| q.node == n && q.mapped).count();
            if mapped == 0 {
                continue;
            }
            // Gone from the model first, so the cycle unmaps them for good.
            if sim.mes[n as usize] {
                for _ in 0..mapped {
                    self.mes_call_cost(sim, n);
                }
            } else {
                let _ = self.hws_cycle(sim, n);
            }
        }
        self.processes_exited += 1;
    }

    /// The tenant file of process `id` was released: tear it down and
    /// forget it.
    pub(crate) fn release(&mut self, sim: &Sim, id: u64) {
        self.destroy_process(sim, id);
        self.processes.retain(|p| p.id != id);
    }

    /// One HWS runlist cycle on `node`: unmap every mapped user queue
    /// (saving it), then map every queue that should run (restoring it).
    pub(crate) fn hws_cycle(&mut self, sim: &Sim, node: u32) -> Result {
        // The node stops executing for the whole cycle.
        self.pause_node(node, now_ns());
        let k = &sim.knobs[node as usize];
        k.runlist_updates.fetch_add(1, Relaxed);
        let mut resident = 0u64;
        let mut next = 0u64;
        for p in self.processes.iter() {
            for q in p.queues.iter().filter(|q| q.node == node) {
                resident += u64::from(q.mapped);
                next += u64::from(p.should_run(q));
            }
        }
        let extra = u64::from(k.delay_next_us.xchg(0, Relaxed)) * 1000;
        // Saturating: the knobs are whatever root wrote to debugfs.
        let per_queue = k.per_queue_ns.load(Relaxed).saturating_mul(resident + next);
        delay(
            k.cycle_ns
                .load(Relaxed)
                .saturating_add(per_queue)
                .saturating_add(extra),
        );
        let now = Instant::<Monotonic>::now();

        if NodeKnobs::take(&k.fail_unmaps) {
            self.reset_node(sim, node, now);
            return Err(EIO);
        }
        let mut broken = 0;
        for p in self.processes.iter_mut() {
            for q in p.queues.iter_mut().filter(|q| q.node == node && q.mapped) {
                q.unmap(now);
                broken += u32::from(!q.conserved());
            }
        }
        let map_fails = NodeKnobs::take(&k.fail_maps);
        if !map_fails {
            for p in self.processes.iter_mut() {
                let ev = p.evicted[node as usize];
                for q in p.queues.iter_mut().filter(|q| q.node == node) {
                    if q.runs_with(ev) {
                        q.map(now);
                        broken += u32::from(!q.conserved());
                    }
                }
            }
        }
        self.conservation_errors += u64::from(broken);
        self.idle_until(node, now_ns());
        if map_fails {
            // The runlist stays empty until the next cycle succeeds.
            return Err(EIO);
        }
        Ok(())
    }

    /// Cost and count of one MES call on `node`.
    fn mes_call_cost(&self, sim: &Sim, node: u32) {
        let k = &sim.knobs[node as usize];
        k.runlist_updates.fetch_add(1, Relaxed);
        let extra = u64::from(k.delay_next_us.xchg(0, Relaxed)) * 1000;
        delay(k.mes_call_ns.load(Relaxed).saturating_add(extra));
    }

    /// One MES call (remove_queue or add_queue) bringing queue `qi` of
    /// process `pi` where it should be.
    fn mes_call(&mut self, sim: &Sim, pi: usize, qi: usize) -> Result {
        let node = self.processes[pi].queues[qi].node;
        // A MES call stops the node's execution while it lasts, as a
        // runlist cycle does; the running dispatch keeps its progress.
        self.pause_node(node, now_ns());
        self.mes_call_cost(sim, node);
        let k = &sim.knobs[node as usize];
        let now = Instant::<Monotonic>::now();
        let run = self.processes[pi].should_run(&self.processes[pi].queues[qi]);
        let mapped = self.processes[pi].queues[qi].mapped;
        if mapped && !run {
            if NodeKnobs::take(&k.fail_unmaps) {
                self.reset_node(sim, node, now);
                return Err(EIO);
            }
            let q = &mut self.processes[pi].queues[qi];
            q.unmap(now);
            let ok = q.conserved();
            self.check(ok);
        } else if !mapped && run {
            if NodeKnobs::take(&k.fail_maps) {
                return Err(EIO);
            }
            let q = &mut self.processes[pi].queues[qi];
            q.map(now);
            let ok = q.conserved();
            self.check(ok);
        }
        self.idle_until(node, now_ns());
        Ok(())
    }

    /// An unmap timed out: the scheduler hung and the node was reset. Every
    /// user queue on it is reset and never mapped again.
    fn reset_node(&mut self, sim: &Sim, node: u32, now: Instant<Monotonic>) {
        sim.knobs[node as usize].resets.fetch_add(1, Relaxed);
        for p in self.processes.iter_mut() {
            for q in p.queues.iter_mut().filter(|q| q.node == node) {
                q.reset(now);
            }
        }
    }

    /// Brings `node` where its queues should be after a change outside a
    /// batch (queue created or destroyed, eviction, external resume).
    pub(crate) fn sync_node(&mut self, sim: &Sim, node: u32) -> (Cost, Result) {
        let t0 = Instant::<Monotonic>::now();
        let mut cost = Cost::default();
        let mut res = Ok(());
        if sim.mes[node as usize] {
            for pi in 0..self.processes.len() {
                for qi in 0..self.processes[pi].queues.len() {
                    let p = &self.processes[pi];
                    let q = &p.queues[qi];
                    if q.node != node || q.mapped == p.should_run(q) {
                        continue;
                    }
                    cost.runlist_updates += 1;
                    if let Err(e) = self.mes_call(sim, pi, qi) {
                        res = Err(e);
                    }
                }
            }
        } else {
            cost.runlist_updates = 1;
            res = self.hws_cycle(sim, node);
        }
        cost.elapsed_ns = t0.elapsed().as_nanos() as u64;
        (cost, res)
    }

    /// Marks (PREEMPT) or unmarks (RESUME) every request, then changes the
    /// hardware once per node (HWS) or once per queue (MES).
    pub(crate) fn apply(&mut self, sim: &Sim, op: Op, dry_run: bool, reqs: &mut [Req]) -> Cost {
        self.reap(sim);
        // A batch lists a process's queues together: look each process up
        // once per run of its requests, not once per request.
        let mut last: Option<(u64, usize)> = None;
        for r in reqs.iter_mut() {
            r.marked = false;
            r.moves = None;
            let found = match last {
                Some((id, pi)) if id == r.process => Some(pi),
                _ => self.find(r.process),
            };
            let Some(pi) = found else {
                r.status = Outcome::Failed(ESRCH);
                continue;
            };
            last = Some((r.process, pi));
            let Some(node) = r.node else {
                r.status = Outcome::Failed(EINVAL);
                continue;
            };
            let p = &mut self.processes[pi];
            let Some(qi) = p
                .queues
                .iter()
                .position(|q| q.id == r.queue_id && q.node == node)
            else {
                r.status = Outcome::Failed(ENOENT);
                continue;
            };
            let moves = match op {
                Op::Preempt => Self::mark(p, qi, r, dry_run),
                Op::Resume => Self::unmark(p, qi, r, dry_run),
            };
            r.moves = moves.then_some((pi, qi));
        }

        let mut cost = Cost::default();
        let t0 = Instant::<Monotonic>::now();
        for node in 0..self.nodes {
            let moving = |r: &&mut Req| r.moves.is_some() && r.node == Some(node);
            if reqs.iter_mut().find(moving).is_none() {
                continue;
            }
            // A PREEMPT's moves are unmaps (`mark`); what they took off the
            // node is logged once the cycle or call succeeded.
            let preempt = matches!(op, Op::Preempt);
            if sim.mes[node as usize] {
                for r in reqs.iter_mut().filter(moving) {
                    let Some((pi, qi)) = r.moves else {
                        continue;
                    };
                    cost.runlist_updates += 1;
                    if self.mes_call(sim, pi, qi).is_err() {
                        r.status = Outcome::Failed(EIO);
                    } else if preempt {
                        self.log_preempt(sim, node, 1);
                    }
                }
            } else {
                cost.runlist_updates += 1;
                if self.hws_cycle(sim, node).is_err() {
                    for r in reqs.iter_mut().filter(moving) {
                        r.status = Outcome::Failed(EIO);
                    }
                } else if preempt {
                    let queues = reqs.iter_mut().filter(moving).count() as u32;
                    self.log_preempt(sim, node, queues);
                }
            }
        }
        cost.elapsed_ns = t0.elapsed().as_nanos() as u64;
        cost
    }

    /// Logs that a PREEMPT's cycle or MES call just took `queues` queues
    /// off `node` ([`super::preempt_log`]). The unmap took effect at the
    /// end of the cycle or call, which is where the node's clock stands
    /// (`idle_until`); nothing ran since, so the queues that stay mapped
    /// hold exactly the dispatches that waited through the preemption.
    fn log_preempt(&mut self, sim: &Sim, node: u32, queues: u32) {
        let n = node as usize;
        let doorbell_ns = self.oldest_visible(node).unwrap_or(0);
        let unmap_ns = self.node_clock(node);
        sim.knobs[n]
            .suspended_queues
            .fetch_add(u64::from(queues), Relaxed);
        self.preempt_logs[n].push(Record {
            unmap_ns,
            queues,
            doorbell_ns,
        });
    }

    /// As `kfdp_mark()` in the glue. Returns whether the queue must leave
    /// the hardware.
    fn mark(p: &mut Process, qi: usize, r: &mut Req, dry_run: bool) -> bool {
        let q = &p.queues[qi];
        if !q.is_compute() {
            r.status = Outcome::Failed(crate::compat::eopnotsupp());
            return false;
        }
        if q.suspended {
            r.status = if r.owned {
                Outcome::Already
            } else {
                Outcome::Failed(EBUSY)
            };
            r.marked = r.owned;
            return false;
        }
        if q.reset {
            r.status = Outcome::Failed(EIO);
            return false;
        }
        r.status = Outcome::Done;
        if dry_run {
            return false;
        }
        let was_running = p.should_run(q);
        p.queues[qi].suspended = true;
        r.marked = true;
        was_running
    }

    /// As `kfdp_unmark()` in the glue. Returns whether the queue must go
    /// back on the hardware.
    fn unmark(p: &mut Process, qi: usize, r: &mut Req, dry_run: bool) -> bool {
        let q = &p.queues[qi];
        if !r.owned {
            r.status = if q.suspended {
                Outcome::Failed(EBUSY)
            } else {
                Outcome::Already
            };
            return false;
        }
        if !q.suspended {
            r.status = Outcome::External;
            return false;
        }
        r.status = Outcome::Done;
        if dry_run {
            r.marked = true;
            return false;
        }
        p.queues[qi].suspended = false;
        let q = &p.queues[qi];
        if q.reset {
            r.status = Outcome::Failed(EIO);
            return false;
        }
        if p.evicted[q.node as usize] > 0 {
            // Evicted: the restore that ends the eviction maps it.
            r.status = Outcome::Deferred;
            return false;
        }
        true
    }

    /// Raises (or lowers) process `id`'s eviction count on `node`: FREEZE
    /// and THAW, and simulated memory evictions. Returns whether the count
    /// changed, and what the hardware cost.
    pub(crate) fn evict(
        &mut self,
        sim: &Sim,
        id: u64,
        node: u32,
        restore: bool,
    ) -> (bool, Cost, Result) {
        self.reap(sim);
        let Some(pi) = self.find(id) else {
            return (false, Cost::default(), Err(ESRCH));
        };
        let count = &mut self.processes[pi].evicted[node as usize];
        let changes = if restore {
            if *count == 0 {
                return (false, Cost::default(), Err(EINVAL));
            }
            *count -= 1;
            *count == 0
        } else {
            *count = count.checked_add(1).unwrap_or(u32::MAX);
            *count == 1
        };
        let p = &self.processes[pi];
        let affected = p
            .queues
            .iter()
            .any(|q| q.node == node && q.mapped != p.should_run(q));
        if !changes || !affected {
            return (true, Cost::default(), Ok(()));
        }
        let (cost, res) = self.sync_node(sim, node);
        (true, cost, res)
    }

    /// Creates a queue (the tenant's KFDP_SIM_IOC_CREATE_QUEUE); returns
    /// its id. Queues created while evicted are born inactive.
    pub(crate) fn create_queue(
        &mut self,
        sim: &Sim,
        id: u64,
        node: u32,
        qtype: u32,
        priority: u32,
        ring: Option<KBox<Ring>>,
    ) -> Result<u32> {
        self.reap(sim);
        let pi = self.find(id).ok_or(ESRCH)?;
        let p = &mut self.processes[pi];
        if p.queues.len() >= MAX_QUEUES {
            return Err(ENOSPC);
        }
        // amdkfd hands out the lowest free id.
        let mut qid = 0u32;
        while p.queues.iter().any(|q| q.id == qid) {
            qid += 1;
        }
        let q = Queue {
            id: qid,
            node,
            qtype,
            priority,
            suspended: false,
            reset: false,
            mapped: false,
            retired: 0,
            in_flight: 0,
            saved: 0,
            dispatched: 0,
            lost: 0,
            last: Instant::<Monotonic>::now(),
            ring,
        };
        p.queues.push(q, GFP_KERNEL)?;
        if p.evicted[node as usize] == 0 {
            let _ = self.sync_node(sim, node);
        }
        Ok(qid)
    }

    /// Destroys a queue (the tenant's KFDP_SIM_IOC_DESTROY_QUEUE).
    pub(crate) fn destroy_queue(&mut self, sim: &Sim, id: u64, qid: u32) -> Result {
        self.reap(sim);
        let pi = self.find(id).ok_or(ESRCH)?;
        let p = &mut self.processes[pi];
        let qi = p.queues.iter().position(|q| q.id == qid).ok_or(ENOENT)?;
        let node = p.queues[qi].node;
        self.pause_node(node, now_ns());
        let p = &mut self.processes[pi];
        let q = p.queues.remove(qi).map_err(|_| ENOENT)?;
        if q.mapped {
            if sim.mes[q.node as usize] {
                self.mes_call_cost(sim, q.node);
            } else {
                let _ = self.hws_cycle(sim, q.node);
            }
        }
        Ok(())
    }

    /// The tenant rang queue `qid`'s doorbell: a mapped queue's new packets
    /// become visible now; an unmapped queue's doorbell is dropped, as on
    /// hardware, and its packets are found when it is mapped.
    pub(crate) fn doorbell(&mut self, id: u64, qid: u32) -> Result {
        let pi = self.find(id).ok_or(ESRCH)?;
        let qi = self.processes[pi]
            .queues
            .iter()
            .position(|q| q.id == qid)
            .ok_or(ENOENT)?;
        let q = &self.processes[pi].queues[qi];
        if q.ring.is_none() {
            return Err(EINVAL);
        }
        if !q.mapped {
            return Ok(());
        }
        let node = q.node;
        let now = now_ns();
        // Up to now first: the new packets arrive after what ran before.
        self.run_node(node, now);
        if let Some(r) = self.processes[pi].queues[qi].ring.as_mut() {
            r.observe(now);
        }
        self.run_node(node, now);
        Ok(())
    }

    /// Clears queue `qid`'s suspension behind the module's back, as a tenant
    /// attaching the KFD debugger to itself and detaching would.
    pub(crate) fn external_resume(&mut self, sim: &Sim, id: u64, qid: u32) -> Result {
        self.reap(sim);
        let pi = self.find(id).ok_or(ESRCH)?;
        let q = self.processes[pi]
            .queues
            .iter_mut()
            .find(|q| q.id == qid)
            .ok_or(ENOENT)?;
        if !q.suspended {
            return Err(EINVAL);
        }
        q.suspended = false;
        let node = q.node;
        self.sync_node(sim, node).1
    }

    /// Suspended queues of every process (0 once every owner closed).
    pub(crate) fn suspended(&self) -> usize {
        self.processes
            .iter()
            .map(|p| p.queues.iter().filter(|q| q.suspended).count())
            .sum()
    }

    /// Queues that are mapped but should not be, or the reverse while their
    /// node did not fail: each is a bug of the model or of the engine.
    pub(crate) fn misplaced(&self) -> usize {
        self.processes
            .iter()
            .map(|p| {
                p.queues
                    .iter()
                    .filter(|q| q.mapped && !p.should_run(q))
                    .count()
            })
            .sum()
    }

    /// Counts of queues on `node`: (all, mapped).
    pub(crate) fn node_queues(&self, node: u32) -> (usize, usize) {
        let mut all = 0;
        let mut mapped = 0;
        for p in self.processes.iter() {
            for q in p.queues.iter().filter(|q| q.node == node) {
                all += 1;
                mapped += usize::from(q.mapped);
            }
        }
        (all, mapped)
    }

    /// Checks conservation on every queue now.
    pub(crate) fn audit(&mut self) -> usize {
        let now = Instant::<Monotonic>::now();
        let mut broken = 0;
        for p in self.processes.iter_mut() {
            for q in p.queues.iter_mut() {
                q.advance(now);
                broken += usize::from(!q.conserved());
            }
        }
        broken
    }
}
