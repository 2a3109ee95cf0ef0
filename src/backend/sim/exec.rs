// SPDX-License-Identifier: GPL-2.0

//! The simulated node executing ring queues: the contention model
//! (`Documentation/simulated-node.rst`, "Workloads").
//!
//! * A node runs one dispatch at a time: a dispatch is taken to fill the
//!   node (a best-effort training kernel does), so the others wait.
//! * The next dispatch is the visible head packet, among the node's mapped
//!   ring queues, that became visible first (FIFO across queues: a CP's
//!   dispatcher serves queues in turn, and once a long dispatch holds the
//!   compute units, work behind it waits for it to finish).
//! * A dispatch runs `work_ns` of node time and retires; unmapping its queue
//!   (a preemption, or any runlist cycle) saves the work left, as CWSR
//!   saves wave state, and the dispatch continues from there when its queue
//!   runs again. A runlist cycle leaves the node idle while it lasts.
//!
//! Time is exact: the node is brought up to date (lazily) at every event
//! that can change what runs (doorbell, map, unmap, destroy) and by the
//! driver, which only makes completions visible to the tenants promptly.

use kernel::{
    sync::Arc,
    time::{
        delay::fsleep,
        Delta, //
    },
    workqueue::{
        self,
        impl_has_work,
        WorkItem, //
    },
};

use super::State;
use crate::{
    backend::sim::{
        Sim,
        MAX_NODES, //
    },
    clock::now_ns,
};

/// Longest time the driver sleeps while ring queues exist, unless its
/// passes are slow (`DRIVER_SLEEP_PER_PASS`): the latest a retired
/// dispatch's read index is written back on a host that keeps up.
const DRIVER_PERIOD_NS: i64 = 1_000_000;
/// Least sleep after a pass of the driver, as a multiple of the time it
/// held the model's mutex: at 3 the passes themselves take at most a
/// quarter of a CPU, however slow the host (its wakeups cost more).
const DRIVER_SLEEP_PER_PASS: i64 = 3;
/// Most dispatches one call retires (a tenant can publish rings of empty
/// dispatches): the rest wait for the next call.
const MAX_RETIRE_PER_RUN: u32 = 4096;

/// One node's execution state.
#[derive(Clone, Copy, Default)]
pub(crate) struct NodeExec {
    /// Node time simulated so far (CLOCK_MONOTONIC, ns).
    clock: i64,
    /// The dispatch on the node: its (process id, queue id), and when it
    /// last started running.
    running: Option<(u64, u32)>,
    run_from: i64,
    /// The dispatch a cycle or MES call interrupted: it runs first again if
    /// its queue is still mapped, so that a cycle does not reorder the node.
    interrupted: Option<(u64, u32)>,
    /// Dispatches retired on the node.
    pub(crate) retired: u64,
}

impl State {
    fn locate(&self, process: u64, queue_id: u32) -> Option<(usize, usize)> {
        let pi = self
            .processes
            .iter()
            .position(|p| p.id == process && p.alive())?;
        let qi = self.processes[pi]
            .queues
            .iter()
            .position(|q| q.id == queue_id)?;
        Some((pi, qi))
    }

    /// When queue `qi` of process `pi`'s head packet became visible, if
    /// the queue can run a dispatch now: a mapped ring queue with work.
    fn runnable(&self, pi: usize, qi: usize) -> Option<i64> {
        let q = &self.processes[pi].queues[qi];
        let r = q.ring.as_ref().filter(|r| q.mapped && r.has_work())?;
        Some(r.head_submit_ns())
    }

    /// When the oldest dispatch waiting on `node`'s mapped ring queues that
    /// stay mapped became visible: the order [`Self::pick`] serves,
    /// without the interrupted dispatch's precedence. A queue still mapped
    /// that should not run (the next MES remove of the batch takes it off)
    /// does not count. `None` if none waits.
    pub(super) fn oldest_visible(&self, node: u32) -> Option<i64> {
        let mut oldest: Option<i64> = None;
        for (pi, p) in self.processes.iter().enumerate().filter(|(_, p)| p.alive()) {
            let stays = |q: &super::Queue| q.node == node && p.should_run(q);
            for (qi, _) in p.queues.iter().enumerate().filter(|(_, q)| stays(q)) {
                if let Some(t) = self.runnable(pi, qi) {
                    oldest = Some(oldest.map_or(t, |o| o.min(t)));
                }
            }
        }
        oldest
    }

    /// Where `node`'s clock stands: the end of its last cycle or MES call,
    /// or the last time it was run up to.
    pub(super) fn node_clock(&self, node: u32) -> i64 {
        self.exec[node as usize].clock
    }

    /// The mapped ring queue of `node` whose visible head came first (or
    /// the one a cycle interrupted).
    fn pick(&self, node: u32) -> Option<(usize, usize, i64)> {
        if let Some((pi, qi)) = self.exec[node as usize]
            .interrupted
            .and_then(|(p, q)| self.locate(p, q))
        {
            if let Some(t) = self.runnable(pi, qi) {
                return Some((pi, qi, t));
            }
        }
        let mut best: Option<(usize, usize, i64)> = None;
        for (pi, p) in self.processes.iter().enumerate().filter(|(_, p)| p.alive()) {
            for (qi, _) in p.queues.iter().enumerate().filter(|(_, q)| q.node == node) {
                let Some(t) = self.runnable(pi, qi) else {
                    continue;
                };
                if best.is_none_or(|(_, _, bt)| t < bt) {
                    best = Some((pi, qi, t));
                }
            }
        }
        best
    }

    /// Runs `node` up to `now`; returns when its running dispatch ends.
    pub(crate) fn run_node(&mut self, node: u32, now: i64) -> Option<i64> {
        let n = node as usize;
        for _ in 0..MAX_RETIRE_PER_RUN {
            let ex = self.exec[n];
            let (pi, qi) = match ex.running.and_then(|(p, q)| self.locate(p, q)) {
                Some(at) if self.processes[at.0].queues[at.1].mapped => at,
                _ => {
                    let Some((pi, qi, submitted)) = self.pick(node) else {
                        self.exec[n].running = None;
                        self.idle_until(node, now);
                        return None;
                    };
                    let start = ex.clock.max(submitted);
                    if start > now {
                        return Some(start);
                    }
                    let p = &mut self.processes[pi];
                    let id = (p.id, p.queues[qi].id);
                    if let Some(r) = p.queues[qi].ring.as_mut() {
                        r.start_head(start);
                    }
                    self.exec[n].interrupted = None;
                    self.exec[n].running = Some(id);
                    self.exec[n].run_from = start;
                    (pi, qi)
                }
            };
            let run_from = self.exec[n].run_from;
            let Some(r) = self.processes[pi].queues[qi].ring.as_mut() else {
                self.exec[n].running = None;
                continue;
            };
            let end = run_from.saturating_add(r.remaining_ns.unwrap_or(0) as i64);
            if end > now {
                self.exec[n].clock = now;
                return Some(end);
            }
            r.retire_head(end);
            self.exec[n].retired += 1;
            self.exec[n].running = None;
            self.exec[n].clock = end;
        }
        // Not done: the driver comes back at once.
        Some(now)
    }

    /// Stops `node`'s running dispatch at `now`, keeping the work it has
    /// left (CWSR), before its queues are unmapped.
    pub(crate) fn pause_node(&mut self, node: u32, now: i64) {
        self.run_node(node, now);
        let n = node as usize;
        if let Some((pi, qi)) = self.exec[n].running.and_then(|(p, q)| self.locate(p, q)) {
            let ran = (now - self.exec[n].run_from).max(0) as u64;
            if let Some(r) = self.processes[pi].queues[qi].ring.as_mut() {
                r.remaining_ns = r.remaining_ns.map(|left| left.saturating_sub(ran));
            }
        }
        if self.exec[n].running.is_some() {
            self.exec[n].interrupted = self.exec[n].running;
        }
        self.exec[n].running = None;
    }

    /// The node did nothing until `now` (a runlist cycle was in progress).
    pub(crate) fn idle_until(&mut self, node: u32, now: i64) {
        let n = node as usize;
        self.exec[n].clock = self.exec[n].clock.max(now);
    }

    /// Whether any live process has a ring queue: the driver runs while so.
    pub(crate) fn has_rings(&self) -> bool {
        self.processes
            .iter()
            .any(|p| p.alive() && p.queues.iter().any(|q| q.ring.is_some()))
    }

    /// Runs every node with ring queues up to now; returns the earliest
    /// dispatch end. The others have nothing to run: a node's clock
    /// catches up at its next doorbell, map or cycle, so idle nodes cost
    /// the driver nothing.
    fn run_all(&mut self) -> Option<i64> {
        let now = now_ns();
        let mut busy = 0u64;
        for p in self.processes.iter().filter(|p| p.alive()) {
            for q in p.queues.iter().filter(|q| q.ring.is_some()) {
                if q.node < MAX_NODES {
                    busy |= 1u64 << q.node;
                }
            }
        }
        (0..self.nodes().min(MAX_NODES))
            .filter(|&n| busy & (1u64 << n) != 0)
            .filter_map(|n| self.run_node(n, now))
            .min()
    }
}

impl_has_work! {
    impl HasWork<Sim> for Sim { self.driver }
}

impl WorkItem for Sim {
    type Pointer = Arc<Sim>;

    /// The driver: brings the nodes up to date at each dispatch end (and
    /// every millisecond on a host that keeps up) while ring queues exist,
    /// so that tenants see their read indices move without calling in.
    fn run(this: Arc<Sim>) {
        loop {
            let (began, next) = {
                let mut st = this.state.lock();
                // The pass starts once the mutex is held: a wait for it
                // (a backend call may hold it for a modelled cost) is not
                // the driver's CPU.
                let began = now_ns();
                st.reap(&this);
                if st.driver_stopping || !st.has_rings() {
                    st.driving = false;
                    return;
                }
                (began, st.run_all())
            };
            fsleep(Delta::from_nanos(driver_sleep_ns(began, now_ns(), next)));
        }
    }
}

/// How long the driver sleeps after a pass that held the model's mutex
/// from `began` and ended at `now`, when the next dispatch ends at `next`
/// (if one runs): until then, within [20 µs, `DRIVER_PERIOD_NS`], and at
/// least `DRIVER_SLEEP_PER_PASS` times the pass.
fn driver_sleep_ns(began: i64, now: i64, next: Option<i64>) -> i64 {
    // At nice -20 the driver runs before every tenant: without the floor,
    // a host slow enough that passes cost as much as the time between
    // dispatch ends left user space no CPU (a daemon_test timed out so in
    // CI).
    next.map_or(DRIVER_PERIOD_NS, |t| t.saturating_sub(now))
        .clamp(20_000, DRIVER_PERIOD_NS)
        .max(
            now.saturating_sub(began)
                .saturating_mul(DRIVER_SLEEP_PER_PASS),
        )
}

impl Sim {
    /// Starts the driver if ring queues exist and it is not running.
    pub(crate) fn kick(self: &Arc<Self>, st: &mut State) {
        if !st.driving && !st.driver_stopping && st.has_rings() {
            st.driving = true;
            // The high-priority pool (nice -20): the driver stands for the
            // GPU, which tenants' CPU use does not slow. On the normal pool
            // busy tenants delayed its passes, so retirements were seen
            // late, and a pass preempted while holding the model's mutex
            // held up every ioctl, the scheduler's too. Its sleeps bound
            // its share of the CPU (`DRIVER_SLEEP_PER_PASS`) and let other
            // high-priority work of its CPU run.
            // An error means it is still queued from its last run, which
            // will see the rings.
            let _ = workqueue::system_highpri().enqueue(self.clone());
        }
    }

    /// Stops the driver for good and waits until it returned (module exit).
    pub(crate) fn stop_driver(&self) {
        self.state.lock().driver_stopping = true;
        // SAFETY: `driver` is an initialised work item that lives as long as
        // `self`; flush_work() only waits for a running or pending instance
        // and touches no reference count (the kernel crate has no flush).
        unsafe {
            kernel::bindings::flush_work(workqueue::Work::<Sim>::raw_get(&self.driver));
        }
    }
}

#[cfg(kfdp_kunit)]
#[kernel::prelude::kunit_tests(kfdp_sim_driver)]
mod tests {
    use super::*;

    const MS: i64 = 1_000_000;

    #[test]
    fn a_quick_pass_sleeps_until_the_next_dispatch_ends() {
        // A 5 µs pass (a floor of 15 µs), the next dispatch ending 400 µs
        // after it.
        let (began, now) = (5_000, 10_000);
        assert_eq!(driver_sleep_ns(began, now, Some(410_000)), 400_000);
        // No dispatch running: one period.
        assert_eq!(driver_sleep_ns(began, now, None), DRIVER_PERIOD_NS);
        // Due already, or far off: within [20 µs, one period].
        assert_eq!(driver_sleep_ns(began, now, Some(5_000)), 20_000);
        assert_eq!(driver_sleep_ns(began, now, Some(60 * MS)), DRIVER_PERIOD_NS);
    }

    #[test]
    fn a_slow_pass_leaves_the_cpu_three_times_as_long() {
        // A host so slow that a pass takes 2 ms, with dispatches ending
        // every 100 µs: the driver must still leave 3/4 of a CPU.
        let (began, now) = (50 * MS, 52 * MS);
        let sleep = driver_sleep_ns(began, now, Some(now + 100_000));
        assert_eq!(sleep, 6 * MS);
        assert!(sleep >= DRIVER_SLEEP_PER_PASS * (now - began));
        // Likewise with nothing running, and past the period.
        assert_eq!(driver_sleep_ns(0, 2 * MS, None), 6 * MS);
    }

    #[test]
    fn a_clock_at_its_limits_neither_overflows_nor_sleeps_less_than_20_us() {
        assert_eq!(driver_sleep_ns(0, i64::MAX, Some(i64::MIN)), i64::MAX);
        assert_eq!(driver_sleep_ns(5, 5, Some(i64::MIN)), 20_000);
        assert_eq!(driver_sleep_ns(5, 5, Some(i64::MAX)), DRIVER_PERIOD_NS);
    }
}
