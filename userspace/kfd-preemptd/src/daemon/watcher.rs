//! One decision's watcher file: the latency-critical queues it watches,
//! what it is armed for, and what a wakeup of its eventfd means.

use std::{
    collections::{BTreeMap, HashMap, HashSet},
    os::fd::OwnedFd,
    time::Duration,
};

use kfd_preempt::{EntryError, Handle, Outcome, QueueRef, Sample};
use rustix::{
    event::{eventfd, EventfdFlags},
    io::Errno,
};

use super::backend::Backend;
use crate::policy::Action;

/// What the module is armed for, as far as the daemon knows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ArmState {
    /// Nothing armed (or the last ARM failed).
    Off,
    /// `ANY_BUSY`, with the write indices read just before the ARM.
    AnyBusy {
        /// Write index of each watched queue at ARM time.
        baseline: HashMap<QueueRef, u64>,
    },
    /// `ALL_IDLE`.
    AllIdle {
        /// The idle time asked for.
        idle: Duration,
        /// `CLOCK_MONOTONIC` just before the ARM.
        armed_at: Duration,
    },
}

/// What a SAMPLE after an eventfd wakeup says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Confirmation {
    /// LC has work: feed [`Event::LcBusy`].
    Busy,
    /// LC has been idle for the hysteresis: feed [`Event::LcIdle`].
    Idle,
    /// The wakeup does not hold up (a stale signal, or work that came back
    /// right after ALL_IDLE fired): ARM the same condition again.
    Rearm,
    /// Nothing is armed: ignore.
    Ignore,
}

/// Decides what an eventfd wakeup means from the SAMPLE read after it.
/// Queues of exited tenants (`gone`) do not count.
///
/// `ANY_BUSY` is confirmed by pending work or a write index that moved
/// since the ARM (a burst that retired within one period is still LC
/// activity, and the hysteresis will resume BE if it was all). `ALL_IDLE`
/// is confirmed when nothing is pending and the idle time has passed since
/// the ARM, which no stale signal of an earlier ARM can fake.
pub fn confirm(arm: &ArmState, sample: &Sample) -> Confirmation {
    let live = || sample.queues.iter().filter(|a| !a.gone);
    let pending = live().any(|a| a.pending);
    match arm {
        ArmState::Off => Confirmation::Ignore,
        ArmState::AnyBusy { baseline } => {
            let moved = live().any(|a| baseline.get(&a.queue).is_some_and(|w| *w != a.write_index));
            if pending || moved {
                Confirmation::Busy
            } else {
                Confirmation::Rearm
            }
        }
        ArmState::AllIdle { idle, armed_at } => {
            if !pending && sample.timestamp >= *armed_at + *idle {
                Confirmation::Idle
            } else {
                Confirmation::Rearm
            }
        }
    }
}

/// When a queue the module refused to watch is asked for again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Retry {
    /// Not while it stays the same queue (an SDMA queue, memory that
    /// cannot be pinned).
    Never,
    /// When a watch of this file is released (`ENOSPC`: the module's
    /// `max_watches`; `ENOMEM`: the daemon's `RLIMIT_MEMLOCK`, which the
    /// pins count against).
    WhenRoom,
    /// At the next scan: `EAGAIN` (its indices' page is not resident and
    /// faulting it in could wait on another process, such as a file
    /// mapping's server) or `EINTR`.
    NextScan,
}

impl Retry {
    /// When a WATCH entry that failed with `o` is tried again.
    fn after(o: &Outcome) -> Self {
        match o {
            Outcome::Failed(EntryError::Other(e)) if *e == Errno::NOSPC.raw_os_error() => {
                Retry::WhenRoom
            }
            Outcome::Failed(EntryError::Other(e)) if *e == Errno::INTR.raw_os_error() => {
                Retry::NextScan
            }
            Outcome::Failed(EntryError::NoMemory) => Retry::WhenRoom,
            Outcome::Failed(EntryError::TooSoon) => Retry::NextScan,
            _ => Retry::Never,
        }
    }
}

/// What the log says of a WATCH entry that failed with `o`: `EAGAIN` means
/// something else for WATCH than for PREEMPT, whose wording `Outcome` has.
pub(super) fn watch_refusal(o: &Outcome) -> String {
    match o {
        Outcome::Failed(EntryError::TooSoon) => {
            "EAGAIN: its indices are not resident (asked for again at the next scan)".to_string()
        }
        o => o.to_string(),
    }
}

/// A queue as the tenant knows it: node and queue id, the same through
/// every file that attaches the tenant.
/// And which queue that id is: its ring's address (amdkfd gives a new
/// queue the lowest free id, so an id comes back at another ring).
pub(super) type QueueKey = (u32, u32, u64);

/// The key of `q`, whose ring is at `ring`.
pub(super) fn key_of(q: &QueueRef, ring: u64) -> QueueKey {
    (q.gpu_id, q.queue_id, ring)
}

/// The key of watched queue `q`, by the ring it was watched at.
fn watched_key(rings: &HashMap<QueueRef, u64>, q: &QueueRef) -> QueueKey {
    key_of(q, rings.get(q).copied().unwrap_or(0))
}

/// Whether an attach failed for a reason that will not pass (permission,
/// a target kind the module does not support), rather than a race with
/// the target's exit or a transient failure (`EINTR`, `EAGAIN`,
/// `ENOMEM`).
pub(super) fn lasting(e: &kfd_preempt::Error) -> bool {
    match e {
        kfd_preempt::Error::NoSuchProcess { .. }
        | kfd_preempt::Error::TargetExited
        | kfd_preempt::Error::NotAKfdProcess { .. } => false,
        kfd_preempt::Error::Os { errno, .. } => {
            ![Errno::INTR, Errno::AGAIN, Errno::NOMEM].contains(errno)
        }
        _ => true,
    }
}

/// What changed when a watcher was brought in line with the queues it
/// should watch.
#[derive(Debug, Default)]
pub(super) struct WatchChanges {
    /// Queues the module refused to watch now, with why.
    pub refused: Vec<(i32, QueueRef, Outcome)>,
    /// Tenants that could not be attached through this file.
    pub attach_failed: Vec<(i32, kfd_preempt::Error)>,
    /// WATCH calls that failed as a whole.
    pub watch_failed: Vec<(i32, kfd_preempt::Error)>,
    /// The watches changed (some dropped or made): an ARM of before
    /// samples the old ones.
    pub changed: bool,
}

/// A file of the module that watches one decision's queues and is armed
/// for it, with the eventfd the module signals.
pub(super) struct Watcher<B: Backend> {
    pub file: B,
    pub efd: OwnedFd,
    pub arm: ArmState,
    /// An ARM that failed, retried at each scan.
    pub arm_pending: Option<Action>,
    /// This file's attachment of each watched tenant.
    pub handles: BTreeMap<i32, Handle>,
    /// The watched queues of each tenant (this file's handles).
    pub watched: BTreeMap<i32, Vec<QueueRef>>,
    /// The ring of each watched queue when it was watched.
    pub rings: HashMap<QueueRef, u64>,
    /// Queues the module refused to watch (logged once each), and when
    /// they are asked for again.
    pub unwatchable: HashMap<(i32, QueueKey), Retry>,
    /// Tenants this file could not attach: not retried until they leave.
    pub refused: HashSet<i32>,
    /// The SAMPLE read at this pass's wakeup, after the eventfd was
    /// emptied; `None` outside that pass. An ARM in the same pass takes
    /// its write indices as its `ANY_BUSY` baseline instead of a SAMPLE
    /// of its own (unless a queue was watched since), and does not empty
    /// the eventfd again: the sampler that signalled it has fired, and a
    /// sampler fires once. Two system calls fewer an edge, on the
    /// `SCHED_FIFO` loop. A signal left in the eventfd all the same (from
    /// a sampler replaced before it fired, or one armed during the pass by
    /// a change of the watched queues) costs one more wakeup, which
    /// [`confirm`] takes for what it is.
    pub woken: Option<Sample>,
    /// The packets its queues published, as its SAMPLEs saw them.
    pub published: PublishedCount,
}

/// The packets a watcher's queues published since it opened, counted queue
/// by queue from one SAMPLE to the next: what [`crate::policy::Event::Published`]
/// tells a policy. A queue first seen, gone, or whose write index went back
/// (made again under its id) adds nothing, so that the count grows only
/// when work was submitted, whatever queues come and go.
#[derive(Debug, Default)]
pub(super) struct PublishedCount {
    last: HashMap<QueueRef, u64>,
    total: u64,
}

impl PublishedCount {
    /// Takes `sample` in; the count after it.
    pub fn update(&mut self, sample: &Sample) -> u64 {
        let live = |q: &QueueRef| sample.queues.iter().any(|a| a.queue == *q && !a.gone);
        self.last.retain(|q, _| live(q));
        for a in sample.queues.iter().filter(|a| !a.gone) {
            if let Some(before) = self.last.insert(a.queue, a.write_index) {
                self.total = self
                    .total
                    .saturating_add(a.write_index.saturating_sub(before));
            }
        }
        self.total
    }
}

impl<B: Backend> Watcher<B> {
    /// Opens a watcher file next to `main`.
    pub fn open(main: &B) -> Result<Self, String> {
        let file = main.open_watcher().map_err(|e| e.to_string())?;
        let efd = eventfd(0, EventfdFlags::CLOEXEC | EventfdFlags::NONBLOCK)
            .map_err(|e| format!("eventfd: {e}"))?;
        Ok(Watcher {
            file,
            efd,
            arm: ArmState::Off,
            arm_pending: None,
            handles: BTreeMap::new(),
            watched: BTreeMap::new(),
            rings: HashMap::new(),
            unwatchable: HashMap::new(),
            refused: HashSet::new(),
            woken: None,
            published: PublishedCount::default(),
        })
    }

    /// How many queues are watched.
    pub fn num_watched(&self) -> usize {
        self.watched.values().map(Vec::len).sum()
    }

    /// The tenant a handle of this file belongs to.
    pub fn pid_of(&self, handle: Handle) -> Option<i32> {
        self.handles
            .iter()
            .find(|(_, h)| **h == handle)
            .map(|(pid, _)| *pid)
    }

    /// Empties the eventfd (non-blocking: `EAGAIN` when nothing is
    /// pending).
    pub fn drain(&self) {
        let mut buf = [0u8; 8];
        let _ = rustix::io::read(&self.efd, &mut buf);
    }

    /// Forgets tenant `pid` (detaching it from this file).
    pub fn forget(&mut self, pid: i32) {
        if let Some(h) = self.handles.remove(&pid) {
            // An exited target's handle may already be unknown.
            let _ = self.file.detach(h);
        }
        if let Some(w) = self.watched.remove(&pid) {
            for q in &w {
                self.rings.remove(q);
            }
            if !w.is_empty() {
                self.watches_released();
            }
        }
        self.unwatchable.retain(|(p, _), _| *p != pid);
        self.refused.remove(&pid);
    }

    /// Watches were released: queues refused for want of room (the
    /// module's `max_watches`) are tried again.
    fn watches_released(&mut self) {
        self.unwatchable.retain(|_, r| *r != Retry::WhenRoom);
    }

    /// Watches exactly `want` (each tenant's queues, by node and id):
    /// attaches new tenants, detaches gone ones, unwatches removed
    /// queues, watches added ones.
    pub fn sync(&mut self, want: &BTreeMap<i32, Vec<QueueKey>>) -> WatchChanges {
        let mut changes = WatchChanges::default();
        let gone: Vec<i32> = self
            .handles
            .keys()
            .chain(self.refused.iter())
            .copied()
            .filter(|p| !want.contains_key(p))
            .collect();
        for pid in gone {
            changes.changed |= self.watched.get(&pid).is_some_and(|w| !w.is_empty());
            self.forget(pid);
        }
        for (pid, queues) in want {
            let pid = *pid;
            if self.refused.contains(&pid) {
                continue;
            }
            let handle = match self.handles.get(&pid) {
                Some(h) => *h,
                None => match self.file.attach(pid) {
                    // Only a descriptor the tenant inherited is left: it
                    // names another process, which is not this tenant to
                    // watch. Tried again at the next scan.
                    Ok(a) if a.tgid != pid => {
                        if !self.handles.values().any(|h| *h == a.handle) {
                            let _ = self.file.detach(a.handle);
                        }
                        changes
                            .attach_failed
                            .push((pid, kfd_preempt::Error::NotAKfdProcess { pid }));
                        continue;
                    }
                    Ok(a) => {
                        self.handles.insert(pid, a.handle);
                        a.handle
                    }
                    Err(e) => {
                        // A lasting refusal is not asked again while the
                        // tenant stays; a race with its exit or a
                        // transient failure is, at the next scan.
                        if lasting(&e) {
                            self.refused.insert(pid);
                        }
                        changes.attach_failed.push((pid, e));
                        continue;
                    }
                },
            };
            let watched = self.watched.entry(pid).or_default();
            let rings = &mut self.rings;
            // Destroyed queues, and ids now naming another queue (watched
            // again below): UNWATCH first, so that the WATCH is of the new
            // queue, whatever the module does with a watched id.
            let removed: Vec<QueueRef> = watched
                .iter()
                .copied()
                .filter(|q| !queues.contains(&watched_key(rings, q)))
                .collect();
            if !removed.is_empty() {
                changes.changed = true;
                let _ = self.file.unwatch(&removed);
                watched.retain(|q| !removed.contains(q));
                for q in &removed {
                    rings.remove(q);
                }
            }
            self.unwatchable
                .retain(|(p, k), _| *p != pid || queues.contains(k));
            let added: Vec<(QueueRef, u64)> = queues
                .iter()
                .filter(|k| {
                    !watched.iter().any(|q| watched_key(rings, q) == **k)
                        && self
                            .unwatchable
                            .get(&(pid, **k))
                            .is_none_or(|r| *r == Retry::NextScan)
                })
                .map(|&(gpu_id, queue_id, ring)| {
                    let q = QueueRef {
                        handle,
                        gpu_id,
                        queue_id,
                    };
                    (q, ring)
                })
                .collect();
            if !added.is_empty() {
                let refs: Vec<QueueRef> = added.iter().map(|(q, _)| *q).collect();
                match self.file.watch(&refs) {
                    Ok(report) => {
                        for (q, o) in &report.outcomes {
                            let ring = added
                                .iter()
                                .find(|(a, _)| a == q)
                                .map_or(0, |(_, ring)| *ring);
                            let key = (pid, key_of(q, ring));
                            if o.is_success() {
                                changes.changed = true;
                                watched.push(*q);
                                rings.insert(*q, ring);
                                self.unwatchable.remove(&key);
                            } else if self.unwatchable.insert(key, Retry::after(o)).is_none() {
                                // Logged the first time only.
                                changes.refused.push((pid, *q, *o));
                            }
                        }
                    }
                    // Tried again at the next scan.
                    Err(e) => changes.watch_failed.push((pid, e)),
                }
            }
            if !removed.is_empty() {
                self.watches_released();
            }
        }
        changes
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kfd_preempt::{Activity, Handle};

    fn sample(queues: &[(u32, u64, bool)]) -> Sample {
        Sample {
            timestamp: Duration::ZERO,
            num_pending: 0,
            queues: queues
                .iter()
                .map(|&(id, write_index, gone)| Activity {
                    queue: QueueRef {
                        handle: Handle(1),
                        gpu_id: 0x1000,
                        queue_id: id,
                    },
                    pending: false,
                    gone,
                    read_index: write_index,
                    write_index,
                })
                .collect(),
        }
    }

    #[test]
    fn the_published_count_grows_only_with_work_submitted() {
        let mut c = PublishedCount::default();
        // First seen: their indices so far are not news.
        assert_eq!(c.update(&sample(&[(0, 100, false)])), 0);
        assert_eq!(c.update(&sample(&[(0, 103, false)])), 3);
        // A queue watched since adds nothing at first sight.
        assert_eq!(c.update(&sample(&[(0, 103, false), (1, 50, false)])), 3);
        assert_eq!(c.update(&sample(&[(0, 104, false), (1, 52, false)])), 6);
        // Queue 0 made again under its id (its index back to 0), queue 1's
        // process gone: nothing is taken away, nothing added.
        assert_eq!(c.update(&sample(&[(0, 0, false), (1, 90, true)])), 6);
        assert_eq!(c.update(&sample(&[(0, 2, false), (1, 95, false)])), 8);
    }
}
