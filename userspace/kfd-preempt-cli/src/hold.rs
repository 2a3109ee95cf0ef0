//! `preempt`, `watch` and `freeze`: make a preemption and hold it until it
//! is released, then undo it and say what happened.

use std::{
    thread::sleep,
    time::{Duration, Instant},
};

use kfd_preempt::{
    signals::Release, BatchOptions, BatchReport, Device, Error, QueueInfo, QueueRef, Target,
};

use crate::{
    list::{rows, table},
    registry::{self, Hold},
    CliResult, Done, Selection,
};

/// How often a hold checks for signals and for the target's exit.
const TICK: Duration = Duration::from_millis(20);
const ALIVE_CHECK: Duration = Duration::from_millis(250);

/// The queues of the target that `sel` names, or why there are none.
pub(crate) fn select(target: &Target<'_>, sel: &Selection) -> Result<Vec<QueueInfo>, String> {
    if sel.queues.is_empty() && !sel.all {
        return Err(
            "name the queues with --queue ID (see `kfd-preempt list PID`) or use --all".into(),
        );
    }
    let queues = match sel.gpu {
        Some(g) => target.query_gpu(g),
        None => target.query(),
    }
    .map_err(|e| e.to_string())?;
    if sel.all {
        if queues.is_empty() {
            return Err(format!("process {} has no queues", sel.pid));
        }
        return Ok(queues);
    }
    sel.queues
        .iter()
        .map(|id| {
            queues
                .iter()
                .find(|q| q.queue_id == *id)
                .copied()
                .ok_or_else(|| {
                    format!(
                        "process {} has no queue {id}{} (see `kfd-preempt list {}`)",
                        sel.pid,
                        sel.gpu
                            .map(|g| format!(" on gpu {g:#x}"))
                            .unwrap_or_default(),
                        sel.pid
                    )
                })
        })
        .collect()
}

fn ms(d: Duration) -> String {
    format!("{:.3} ms", d.as_secs_f64() * 1e3)
}

/// Prints a batch's result: a summary, then every entry that failed.
fn print_report(verb: &str, report: &BatchReport) {
    println!(
        "{verb} {}/{} queue(s) in {} runlist update(s), {} in the module",
        report
            .outcomes
            .iter()
            .filter(|(_, o)| o.is_success())
            .count(),
        report.outcomes.len(),
        report.runlist_updates,
        ms(report.elapsed)
    );
    for (q, o) in report.failures() {
        println!("  gpu {:#x} queue {}: {o}", q.gpu_id, q.queue_id);
    }
}

/// Why a hold ended.
enum End {
    Released,
    LeaseEnded,
    TargetExited,
}

/// Waits until a signal, the deadline, or the target's exit; every
/// `refresh`, calls `show`.
fn wait(
    target: &Target<'_>,
    release: &Release,
    deadline: Option<Instant>,
    refresh: Option<Duration>,
    mut show: impl FnMut(Duration),
) -> End {
    let start = Instant::now();
    let mut last_check = start;
    let mut last_show = start;
    loop {
        if release.requested() {
            return End::Released;
        }
        let now = Instant::now();
        if deadline.is_some_and(|d| now >= d) {
            return End::LeaseEnded;
        }
        if now - last_check >= ALIVE_CHECK {
            last_check = now;
            if let Err(Error::TargetExited) = target.query() {
                return End::TargetExited;
            }
        }
        if refresh.is_some_and(|r| now - last_show >= r) {
            last_show = now;
            show(now - start);
        }
        sleep(TICK);
    }
}

fn show_queues(target: &Target<'_>, pid: i32, held: Duration) {
    match target.query() {
        Ok(queues) => {
            println!("--- held {:.1} s ---", held.as_secs_f64());
            print!("{}", table(&rows(pid, &queues)));
        }
        Err(e) => println!("--- held {:.1} s: {e} ---", held.as_secs_f64()),
    }
}

/// `preempt` (`watch == None`) and `watch` (`watch == Some(interval)`).
pub(crate) fn preempt(sel: &Selection, lease_ms: Option<u64>, watch: Option<u64>) -> CliResult {
    let dev = Device::open()?;
    let target = dev.attach(sel.pid)?;
    let selected = select(&target, sel)?;
    let refs: Vec<QueueRef> = selected.iter().map(|q| q.queue_ref()).collect();
    let lease = lease_ms.map(Duration::from_millis);
    // Signals first: a Ctrl-C right after the batch must still resume.
    let release = Release::install()?;
    let opts = BatchOptions {
        lease,
        ..Default::default()
    };
    let start = Instant::now();
    let report = dev.preempt(&refs, &opts)?;
    print_report(&format!("preempted (pid {})", sel.pid), &report);
    let partial = !report.all_succeeded();
    let held: Vec<QueueRef> = report
        .outcomes
        .iter()
        .filter(|(_, o)| o.is_success())
        .map(|(q, _)| *q)
        .collect();
    if held.is_empty() {
        return Ok(Done::Partial);
    }
    let _reg = registry::register(Hold::Preempt, target.tgid());
    println!(
        "holding until {}Ctrl-C, SIGTERM or `kfd-preempt resume {}`",
        lease
            .map(|l| format!("the lease ends ({}), ", ms(l)))
            .unwrap_or_default(),
        sel.pid
    );
    let refresh = watch.map(Duration::from_millis);
    let deadline = lease.map(|l| start + l);
    match wait(&target, &release, deadline, refresh, |t| {
        show_queues(&target, sel.pid, t)
    }) {
        End::Released => {
            let report = dev.resume(&held)?;
            print_report(
                &format!("resumed after {:.3} s", start.elapsed().as_secs_f64()),
                &report,
            );
        }
        End::LeaseEnded => {
            // The module's lease timer fires within a jiffy or two.
            sleep(Duration::from_millis(50));
            let still: Vec<QueueRef> = target
                .query()?
                .iter()
                .filter(|q| q.state.is_owned() && held.contains(&q.queue_ref()))
                .map(|q| q.queue_ref())
                .collect();
            println!(
                "lease ended after {:.3} s: the module resumed {}/{} queue(s)",
                start.elapsed().as_secs_f64(),
                held.len() - still.len(),
                held.len()
            );
            if !still.is_empty() {
                print_report("resumed the rest", &dev.resume(&still)?);
            }
        }
        End::TargetExited => println!("process {} exited; nothing to resume", sel.pid),
    }
    Ok(if partial { Done::Partial } else { Done::Ok })
}

pub(crate) fn freeze(pid: i32, gpu: Option<u32>, for_ms: Option<u64>) -> CliResult {
    let dev = Device::open()?;
    let target = dev.attach(pid)?;
    let release = Release::install()?;
    let start = Instant::now();
    let took = dev.freeze(target.handle(), gpu, false)?;
    let scope = gpu
        .map(|g| format!("gpu {g:#x}"))
        .unwrap_or("all its GPUs".into());
    println!("froze pid {pid} on {scope}, {} in the module", ms(took));
    let _reg = registry::register(Hold::Freeze, target.tgid());
    let limit = for_ms.map(Duration::from_millis);
    println!(
        "holding until {}Ctrl-C, SIGTERM or `kfd-preempt thaw {pid}`",
        limit
            .map(|l| format!("{} have passed, ", ms(l)))
            .unwrap_or_default()
    );
    match wait(&target, &release, limit.map(|l| start + l), None, |_| {}) {
        End::Released | End::LeaseEnded => {
            let took = dev.freeze(target.handle(), gpu, true)?;
            println!(
                "thawed pid {pid} after {:.3} s, {} in the module",
                start.elapsed().as_secs_f64(),
                ms(took)
            );
        }
        End::TargetExited => println!("process {pid} exited; nothing to thaw"),
    }
    Ok(Done::Ok)
}
