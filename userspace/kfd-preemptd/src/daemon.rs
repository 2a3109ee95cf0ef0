//! The daemon: one owner of `/dev/kfd_preempt`, one loop.
//!
//! The loop polls the eventfd the module signals when an ARM condition
//! holds, and a stop descriptor (SIGTERM/SIGINT), with a timeout at the
//! next deadline among: the `/proc` scan, the policy's deadlines (lease
//! renewal, minimum share, retries) and the statistics write. An eventfd
//! wakeup is confirmed with a SAMPLE before the policy hears of it, so a
//! stale signal from a replaced ARM cannot resume or preempt anything.

use std::{
    collections::{BTreeMap, HashMap, HashSet},
    fmt,
    os::fd::{AsFd, BorrowedFd, OwnedFd},
    path::{Path, PathBuf},
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use kfd_preempt::{
    ArmCondition, BatchOptions, BatchReport, Caps, Device, EntryError, Handle, Info, Outcome,
    QueueInfo, QueueRef, QueueType, Sample, TargetKind,
};
use rustix::{
    event::{eventfd, poll, EventfdFlags, PollFd, PollFlags, Timespec},
    io::Errno,
    time::{clock_gettime, ClockId},
};
use serde_json::{json, Value};

use crate::{
    config::{Config, Priority},
    discover::{Candidate, Discovery},
    log::{Level, Logger},
    policy::{Action, Class, Event, Policy, PolicyConfig, PreemptReason, ResumeReason},
    stats::{self, Stats, TenantStats},
};

/// How often the statistics file is rewritten.
const STATS_INTERVAL: Duration = Duration::from_secs(1);

/// One listing of the processes with a KFD device open.
type Listing = Result<Vec<(i32, TargetKind)>, kfd_preempt::Error>;

/// Lists the KFD processes on a thread of its own, every scan interval, so
/// that the walk of every process's descriptors in `/proc` (tens of
/// milliseconds on a busy host) never sits between a busy edge and the
/// preemption it calls for. The main loop polls `wake` and takes the
/// newest listing.
pub struct Lister {
    rx: std::sync::mpsc::Receiver<Listing>,
    wake: OwnedFd,
}

impl Lister {
    /// Starts the thread.
    pub fn spawn(interval: Duration) -> Result<Self, Fatal> {
        let wake = eventfd(0, EventfdFlags::CLOEXEC | EventfdFlags::NONBLOCK)
            .map_err(|e| fatal("eventfd", e))?;
        let signal = wake.try_clone().map_err(|e| fatal("dup", e))?;
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::Builder::new()
            .name("kfd-preemptd-scan".into())
            .spawn(move || loop {
                // Ends when the daemon (the receiver) is gone.
                if tx.send(kfd_preempt::kfd_processes()).is_err() {
                    return;
                }
                let _ = rustix::io::write(&signal, &1u64.to_ne_bytes());
                std::thread::sleep(interval);
            })
            .map_err(|e| fatal("starting the scan thread", e))?;
        Ok(Lister { rx, wake })
    }

    /// The newest listing since the last call, if any.
    fn take(&self) -> Option<Listing> {
        let mut buf = [0u8; 8];
        let _ = rustix::io::read(&self.wake, &mut buf);
        let mut newest = None;
        while let Ok(l) = self.rx.try_recv() {
            newest = Some(l);
        }
        newest
    }
}

/// A failure that stops the daemon, with what it was doing.
#[derive(Debug)]
pub struct Fatal {
    /// What was being done.
    pub context: String,
    /// Why it failed.
    pub message: String,
}

impl fmt::Display for Fatal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.context, self.message)
    }
}

impl std::error::Error for Fatal {}

fn fatal(context: impl Into<String>, e: impl fmt::Display) -> Fatal {
    Fatal {
        context: context.into(),
        message: e.to_string(),
    }
}

/// `CLOCK_MONOTONIC` now, the clock of the module's SAMPLE timestamps.
pub fn monotonic() -> Duration {
    let t = clock_gettime(ClockId::Monotonic);
    // The monotonic clock is never negative.
    Duration::new(t.tv_sec.max(0) as u64, t.tv_nsec.max(0) as u32)
}

fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// Whether a queue is one the daemon preempts or watches: compute queues
/// only (SDMA queues cannot be preempted by the module nor watched).
pub fn is_compute(t: QueueType) -> bool {
    matches!(t, QueueType::Compute | QueueType::ComputeAql)
}

/// What the daemon needs of the module: [`Device`] in production, a fake
/// in tests. Attachments are bare handles, detached explicitly when a
/// tenant leaves; closing the device (dropping the backend) undoes the rest.
pub trait Backend {
    /// The processes with a KFD device open ([`kfd_preempt::kfd_processes`]).
    fn processes(&self) -> Result<Vec<(i32, TargetKind)>, kfd_preempt::Error>;
    /// Attaches `pid`: its handle and number of GPUs.
    fn attach(&self, pid: i32) -> Result<(Handle, u32), kfd_preempt::Error>;
    /// Detaches (resuming whatever this owner held of it).
    fn detach(&self, handle: Handle) -> Result<(), kfd_preempt::Error>;
    /// Lists the target's queues on every node.
    fn query(&self, handle: Handle) -> Result<Vec<QueueInfo>, kfd_preempt::Error>;
    /// PREEMPT with a lease.
    fn preempt(
        &self,
        queues: &[QueueRef],
        lease: Duration,
    ) -> Result<BatchReport, kfd_preempt::Error>;
    /// RESUME.
    fn resume(&self, queues: &[QueueRef]) -> Result<BatchReport, kfd_preempt::Error>;
    /// WATCH.
    fn watch(&self, queues: &[QueueRef]) -> Result<BatchReport, kfd_preempt::Error>;
    /// UNWATCH.
    fn unwatch(&self, queues: &[QueueRef]) -> Result<BatchReport, kfd_preempt::Error>;
    /// SAMPLE.
    fn sample(&self) -> Result<Sample, kfd_preempt::Error>;
    /// ARM.
    fn arm(
        &self,
        cond: ArmCondition,
        period: Duration,
        eventfd: BorrowedFd<'_>,
    ) -> Result<(), kfd_preempt::Error>;
    /// ARM off.
    fn disarm(&self) -> Result<(), kfd_preempt::Error>;
}

impl Backend for Device {
    fn processes(&self) -> Result<Vec<(i32, TargetKind)>, kfd_preempt::Error> {
        kfd_preempt::kfd_processes()
    }
    fn attach(&self, pid: i32) -> Result<(Handle, u32), kfd_preempt::Error> {
        let t = Device::attach(self, pid)?;
        let gpus = t.num_gpus();
        Ok((t.into_handle(), gpus))
    }
    fn detach(&self, handle: Handle) -> Result<(), kfd_preempt::Error> {
        Device::detach(self, handle)
    }
    fn query(&self, handle: Handle) -> Result<Vec<QueueInfo>, kfd_preempt::Error> {
        Device::query(self, handle, None)
    }
    fn preempt(
        &self,
        queues: &[QueueRef],
        lease: Duration,
    ) -> Result<BatchReport, kfd_preempt::Error> {
        let opts = BatchOptions {
            lease: Some(lease),
            ..Default::default()
        };
        Device::preempt(self, queues, &opts)
    }
    fn resume(&self, queues: &[QueueRef]) -> Result<BatchReport, kfd_preempt::Error> {
        Device::resume(self, queues)
    }
    fn watch(&self, queues: &[QueueRef]) -> Result<BatchReport, kfd_preempt::Error> {
        Device::watch(self, queues)
    }
    fn unwatch(&self, queues: &[QueueRef]) -> Result<BatchReport, kfd_preempt::Error> {
        Device::unwatch(self, queues)
    }
    fn sample(&self) -> Result<Sample, kfd_preempt::Error> {
        Device::sample(self)
    }
    fn arm(
        &self,
        cond: ArmCondition,
        period: Duration,
        eventfd: BorrowedFd<'_>,
    ) -> Result<(), kfd_preempt::Error> {
        Device::arm(self, cond, period, eventfd)
    }
    fn disarm(&self) -> Result<(), kfd_preempt::Error> {
        Device::disarm(self)
    }
}

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

/// A PREEMPT batch's outcomes, summed up.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PreemptSummary {
    /// Entries now held (done, already, deferred).
    pub ok: usize,
    /// Entries refused by the rate limit (`EAGAIN`): nothing changed.
    pub too_soon: usize,
    /// Entries whose queue or process is gone: the next scan drops them.
    pub gone: usize,
    /// Other failures.
    pub failed: usize,
}

impl PreemptSummary {
    /// Sums up `report`.
    pub fn of(report: &BatchReport) -> Self {
        let mut s = PreemptSummary::default();
        for (_, o) in &report.outcomes {
            match o {
                o if o.is_success() => s.ok += 1,
                Outcome::Failed(EntryError::TooSoon) => s.too_soon += 1,
                Outcome::Failed(EntryError::QueueGone | EntryError::TargetExited) => s.gone += 1,
                _ => s.failed += 1,
            }
        }
        s
    }

    /// The event to feed the policy after a PreemptBe batch: held if any
    /// entry took; retried after `retry_delay` for rate-limited entries,
    /// after `slow_retry` if every entry failed otherwise.
    pub fn feedback(&self, retry_delay: Duration, slow_retry: Duration) -> Event {
        if self.ok > 0 {
            Event::PreemptDone {
                retry_after: (self.too_soon > 0).then_some(retry_delay),
            }
        } else if self.too_soon > 0 {
            Event::PreemptFailed {
                retry_after: retry_delay,
            }
        } else {
            Event::PreemptFailed {
                retry_after: slow_retry,
            }
        }
    }

    fn outcome(&self) -> &'static str {
        match (self.ok, self.too_soon + self.gone + self.failed) {
            (_, 0) => "ok",
            (0, _) => "failed",
            _ => "partial",
        }
    }
}

/// An attached tenant.
struct Tenant {
    handle: Handle,
    comm: String,
    class_name: String,
    class: Class,
    /// BE: its compute queues. LC: its watched compute queues.
    queues: Vec<QueueRef>,
    /// LC queues the module refused to watch (logged once each), and
    /// whether the refusal was for want of room (`ENOSPC`: retried when a
    /// watch is released).
    unwatchable: HashMap<QueueRef, bool>,
}

/// The daemon's state.
pub struct Daemon<'c, B: Backend> {
    cfg: &'c Config,
    dev: B,
    efd: OwnedFd,
    log: Logger,
    policy: Policy,
    discovery: Discovery,
    tenants: BTreeMap<i32, Tenant>,
    /// Pids whose attach failed for a lasting reason: not retried until
    /// they exit.
    refused: HashSet<i32>,
    arm: ArmState,
    /// An ARM that failed, retried at each scan.
    arm_pending: Option<Action>,
    /// The kernel timestamp of the last LcBusy edge, for the log.
    last_edge: Option<Duration>,
    /// Delay before retrying rate-limited entries.
    retry_delay: Duration,
    stats_path: Option<PathBuf>,
    stats_failing: bool,
    started: Duration,
    next_scan: Duration,
    next_stats: Duration,
    /// Lists processes off the main loop; `None`: the loop lists them
    /// itself (tests, through the backend).
    lister: Option<Lister>,
}

impl<'c, B: Backend> Daemon<'c, B> {
    /// Sets up a daemon over an open device whose `info` was read, finding
    /// tenants with `discovery`.
    pub fn new(
        cfg: &'c Config,
        dev: B,
        info: &Info,
        discovery: Discovery,
        stats_path: Option<PathBuf>,
    ) -> Result<Self, Fatal> {
        let log = Logger::new(cfg.daemon.log_format);
        if !info.caps.has(Caps::ACTIVITY) {
            return Err(fatal(
                "checking the module",
                format!(
                    "it has no activity detection (ABI {}.{}; kfd-preemptd needs 1.2 with the \"activity\" capability)",
                    info.abi_major, info.abi_minor
                ),
            ));
        }
        let mut pcfg = PolicyConfig::from(&cfg.daemon);
        if pcfg.sample_period < info.min_watch_period {
            log.log(
                Level::Warn,
                "config",
                &[
                    ("key", json!("daemon.sample_period_us")),
                    ("configured_us", json!(cfg.daemon.sample_period_us)),
                    ("using_us", json!(info.min_watch_period.as_micros() as u64)),
                    ("why", json!("below the module's min_watch_period_us")),
                ],
            );
            pcfg.sample_period = info.min_watch_period;
        }
        let efd = eventfd(0, EventfdFlags::CLOEXEC | EventfdFlags::NONBLOCK)
            .map_err(|e| fatal("eventfd", e))?;
        let now = monotonic();
        let retry_delay = Duration::from_micros(info.min_preempt_interval_us.max(1000).into());
        Ok(Daemon {
            cfg,
            dev,
            efd,
            log,
            policy: Policy::new(pcfg, now),
            discovery,
            tenants: BTreeMap::new(),
            refused: HashSet::new(),
            arm: ArmState::Off,
            arm_pending: None,
            last_edge: None,
            retry_delay,
            stats_path,
            stats_failing: false,
            started: now,
            next_scan: now,
            next_stats: now + STATS_INTERVAL,
            lister: None,
        })
    }

    /// Lists processes on a thread of their own from now on.
    pub fn use_lister(&mut self, lister: Lister) {
        self.lister = Some(lister);
    }

    /// Runs until `stop` becomes readable (a signal arrived), then resumes
    /// everything and writes the statistics.
    pub fn run(&mut self, stop: BorrowedFd<'_>) -> Result<(), Fatal> {
        if self.lister.is_none() {
            self.scan();
        }
        self.next_scan = monotonic() + self.cfg.daemon.scan_interval();
        loop {
            let now = monotonic();
            self.feed(now, Event::Tick);
            if now >= self.next_stats {
                self.write_stats(now);
                self.next_stats = now + STATS_INTERVAL;
            }
            let now = monotonic();
            let mut deadline = self.next_stats.min(self.policy.next_deadline(now));
            if self.lister.is_none() {
                deadline = deadline.min(self.next_scan);
            }
            let timeout = Timespec::try_from(deadline.saturating_sub(now)).unwrap_or(Timespec {
                tv_sec: 1,
                tv_nsec: 0,
            });
            let (woken, listed) = {
                let mut fds = vec![
                    PollFd::new(&self.efd, PollFlags::IN),
                    PollFd::from_borrowed_fd(stop, PollFlags::IN),
                ];
                if let Some(l) = &self.lister {
                    fds.push(PollFd::new(&l.wake, PollFlags::IN));
                }
                match poll(&mut fds, Some(&timeout)) {
                    Ok(_) | Err(Errno::INTR) => {}
                    Err(e) => return Err(fatal("poll", e)),
                }
                if !fds[1].revents().is_empty() {
                    break;
                }
                (
                    fds[0].revents().contains(PollFlags::IN),
                    fds.get(2)
                        .is_some_and(|f| f.revents().contains(PollFlags::IN)),
                )
            };
            // The eventfd first: a busy edge must not wait for the
            // bookkeeping of a scan.
            if woken {
                self.on_wakeup();
            }
            if listed {
                if let Some(listing) = self.lister.as_ref().and_then(Lister::take) {
                    self.apply_listing(listing);
                }
            } else if self.lister.is_none() && monotonic() >= self.next_scan {
                self.scan();
                self.next_scan = monotonic() + self.cfg.daemon.scan_interval();
            }
        }
        self.shutdown();
        Ok(())
    }

    /// Resumes whatever is held, disarms and writes the statistics.
    pub fn shutdown(&mut self) {
        let now = monotonic();
        for a in self.policy.shutdown(now) {
            // Nothing can follow from these two.
            let _ = self.execute(a);
        }
        self.write_stats(monotonic());
        self.log.log(
            Level::Info,
            "stop",
            &[
                ("tenants", json!(self.tenants.len())),
                ("preemptions", json!(self.policy.counters().preemptions)),
            ],
        );
    }

    /// Feeds one event and carries out the actions, with the events they
    /// lead to, until none are left.
    fn feed(&mut self, now: Duration, event: Event) {
        let mut actions: std::collections::VecDeque<Action> = self.policy.handle(now, event).into();
        while let Some(a) = actions.pop_front() {
            if let Some((at, ev)) = self.execute(a) {
                actions.extend(self.policy.handle(at, ev));
            }
        }
    }

    fn be_refs(&self) -> Vec<QueueRef> {
        self.tenants
            .values()
            .filter(|t| t.class == Class::BestEffort)
            .flat_map(|t| t.queues.iter().copied())
            .collect()
    }

    fn count(&self, class: Class) -> usize {
        self.tenants.values().filter(|t| t.class == class).count()
    }

    /// Carries out one action; returns the event it leads to, with the
    /// time it happened (a preemption's return, before it is logged, so
    /// that the latency measured is the reaction's, not the journal's).
    fn execute(&mut self, action: Action) -> Option<(Duration, Event)> {
        match action {
            Action::PreemptBe { lease, reason } => {
                let refs = self.be_refs();
                if refs.is_empty() {
                    // The policy counts queues as the scans report them,
                    // so this does not happen; an empty batch would be no
                    // preemption anyway.
                    let retry_after = self.cfg.daemon.scan_interval();
                    return Some((monotonic(), Event::PreemptFailed { retry_after }));
                }
                let r = self.dev.preempt(&refs, lease);
                let done = monotonic();
                let latency = match reason {
                    PreemptReason::LcBusy | PreemptReason::Retry => {
                        self.last_edge.map(|e| done.saturating_sub(e))
                    }
                    PreemptReason::MinShare | PreemptReason::NewQueues => None,
                };
                let mut fields = vec![
                    ("reason", json!(reason.as_str())),
                    ("tenants", json!(self.count(Class::BestEffort))),
                    ("queues", json!(refs.len())),
                ];
                let event = match &r {
                    Ok(report) => {
                        let s = PreemptSummary::of(report);
                        fields.extend([
                            ("outcome", json!(s.outcome())),
                            ("ok", json!(s.ok)),
                            ("too_soon", json!(s.too_soon)),
                            ("gone", json!(s.gone)),
                            ("failed", json!(s.failed)),
                            ("runlist_updates", json!(report.runlist_updates)),
                            ("elapsed_us", json!(report.elapsed.as_micros() as u64)),
                        ]);
                        self.log_failures("preempt", report);
                        s.feedback(self.retry_delay, self.cfg.daemon.scan_interval())
                    }
                    Err(e) => {
                        fields
                            .extend([("outcome", json!("error")), ("error", json!(e.to_string()))]);
                        let retry = if matches!(e, kfd_preempt::Error::Os { errno, .. } if *errno == Errno::AGAIN)
                        {
                            self.retry_delay
                        } else {
                            self.cfg.daemon.scan_interval()
                        };
                        Event::PreemptFailed { retry_after: retry }
                    }
                };
                let ok = matches!(event, Event::PreemptDone { .. });
                fields.push((
                    "latency_us",
                    if ok {
                        latency.map_or(Value::Null, |l| json!(l.as_micros() as u64))
                    } else {
                        Value::Null
                    },
                ));
                let level = if ok { Level::Info } else { Level::Warn };
                self.log.log(level, "preempt", &fields);
                Some((done, event))
            }
            Action::ResumeBe { reason } => {
                let refs = self.be_refs();
                let mut fields = vec![
                    ("reason", json!(reason.as_str())),
                    ("tenants", json!(self.count(Class::BestEffort))),
                    ("queues", json!(refs.len())),
                ];
                let level = if refs.is_empty() {
                    fields.push(("outcome", json!("nothing-held")));
                    Level::Info
                } else {
                    match self.dev.resume(&refs) {
                        Ok(report) => {
                            let bad = report
                                .outcomes
                                .iter()
                                .filter(|(_, o)| {
                                    !o.is_success()
                                        && !matches!(
                                            o,
                                            Outcome::Failed(
                                                EntryError::QueueGone | EntryError::TargetExited
                                            )
                                        )
                                })
                                .count();
                            fields.extend([
                                ("outcome", json!(if bad == 0 { "ok" } else { "partial" })),
                                ("failed", json!(bad)),
                                ("runlist_updates", json!(report.runlist_updates)),
                                ("elapsed_us", json!(report.elapsed.as_micros() as u64)),
                            ]);
                            self.log_failures("resume", &report);
                            if bad == 0 {
                                Level::Info
                            } else {
                                Level::Warn
                            }
                        }
                        Err(e) => {
                            // The lease ends the hold anyway, and closing
                            // the device at exit resumes everything.
                            fields.extend([
                                ("outcome", json!("error")),
                                ("error", json!(e.to_string())),
                            ]);
                            Level::Warn
                        }
                    }
                };
                if reason != ResumeReason::Shutdown || !refs.is_empty() {
                    self.log.log(level, "resume", &fields);
                }
                None
            }
            Action::RenewLease { lease, reason } => {
                let refs = self.be_refs();
                match self.dev.preempt(&refs, lease) {
                    Ok(report) => {
                        let s = PreemptSummary::of(&report);
                        let newly = report
                            .outcomes
                            .iter()
                            .filter(|(_, o)| *o == Outcome::Done)
                            .count();
                        // Routine renewals answer Already for every queue
                        // and are not logged; anything else is news.
                        if newly > 0 || s.ok < refs.len() {
                            self.log.log(
                                if s.failed > 0 {
                                    Level::Warn
                                } else {
                                    Level::Info
                                },
                                "renew",
                                &[
                                    ("reason", json!(reason.as_str())),
                                    ("queues", json!(refs.len())),
                                    ("newly_preempted", json!(newly)),
                                    ("too_soon", json!(s.too_soon)),
                                    ("gone", json!(s.gone)),
                                    ("failed", json!(s.failed)),
                                ],
                            );
                            self.log_failures("renew", &report);
                        }
                        (s.too_soon > 0).then_some((
                            monotonic(),
                            Event::RenewRefused {
                                retry_after: self.retry_delay,
                            },
                        ))
                    }
                    Err(e) => {
                        self.log.log(
                            Level::Warn,
                            "renew",
                            &[
                                ("reason", json!(reason.as_str())),
                                ("queues", json!(refs.len())),
                                ("outcome", json!("error")),
                                ("error", json!(e.to_string())),
                            ],
                        );
                        Some((
                            monotonic(),
                            Event::RenewRefused {
                                retry_after: self.retry_delay,
                            },
                        ))
                    }
                }
            }
            Action::ArmAnyBusy { period } => {
                self.drain_eventfd();
                // The baseline for "a write index moved": read before the
                // ARM, so a burst in between counts as activity.
                let baseline = match self.dev.sample() {
                    Ok(s) => s.queues.iter().map(|a| (a.queue, a.write_index)).collect(),
                    Err(_) => HashMap::new(),
                };
                let r = self
                    .dev
                    .arm(ArmCondition::AnyBusy, period, self.efd.as_fd());
                self.armed(action, r, ArmState::AnyBusy { baseline });
                None
            }
            Action::ArmAllIdle { period, idle } => {
                self.drain_eventfd();
                let armed_at = monotonic();
                let r = self
                    .dev
                    .arm(ArmCondition::AllIdle { idle }, period, self.efd.as_fd());
                self.armed(action, r, ArmState::AllIdle { idle, armed_at });
                None
            }
            Action::Disarm => {
                if let Err(e) = self.dev.disarm() {
                    self.warn("disarm", &e);
                }
                self.arm = ArmState::Off;
                self.arm_pending = None;
                self.drain_eventfd();
                None
            }
        }
    }

    fn armed(&mut self, action: Action, r: Result<(), kfd_preempt::Error>, state: ArmState) {
        match r {
            Ok(()) => {
                self.arm = state;
                self.arm_pending = None;
            }
            Err(e) => {
                // Without an ARM, LC activity goes unseen: retried at
                // every scan, logged the first time.
                if self.arm_pending.is_none() {
                    self.warn("arm", &e);
                }
                self.arm = ArmState::Off;
                self.arm_pending = Some(action);
            }
        }
    }

    fn drain_eventfd(&self) {
        let mut buf = [0u8; 8];
        // Non-blocking: EAGAIN when nothing is pending.
        let _ = rustix::io::read(&self.efd, &mut buf);
    }

    fn warn(&self, what: &str, e: &dyn fmt::Display) {
        self.log.log(
            Level::Warn,
            what,
            &[("outcome", json!("error")), ("error", json!(e.to_string()))],
        );
    }

    fn log_failures(&self, what: &str, report: &BatchReport) {
        for (q, o) in report.failures() {
            if matches!(
                o,
                Outcome::Failed(
                    EntryError::QueueGone | EntryError::TargetExited | EntryError::TooSoon
                )
            ) {
                continue;
            }
            let pid = self.pid_of(q.handle);
            self.log.log(
                Level::Warn,
                what,
                &[
                    ("pid", json!(pid)),
                    ("queue", json!(q.to_string())),
                    ("outcome", json!(o.to_string())),
                ],
            );
        }
    }

    fn pid_of(&self, handle: Handle) -> Option<i32> {
        self.tenants
            .iter()
            .find(|(_, t)| t.handle == handle)
            .map(|(pid, _)| *pid)
    }

    /// The eventfd fired: confirm with a SAMPLE, then tell the policy.
    fn on_wakeup(&mut self) {
        self.drain_eventfd();
        let sample = match self.dev.sample() {
            Ok(s) => s,
            Err(e) => {
                self.warn("sample", &e);
                self.rearm();
                return;
            }
        };
        let now = monotonic();
        let gone: HashSet<Handle> = sample
            .queues
            .iter()
            .filter(|a| a.gone)
            .map(|a| a.queue.handle)
            .collect();
        let exited: Vec<i32> = self
            .tenants
            .iter()
            .filter(|(_, t)| gone.contains(&t.handle))
            .map(|(pid, _)| *pid)
            .collect();
        for pid in exited {
            self.remove_tenant(pid, "exited");
        }
        match confirm(&self.arm, &sample) {
            Confirmation::Busy => {
                self.last_edge = Some(sample.timestamp);
                self.feed(
                    now,
                    Event::LcBusy {
                        edge: sample.timestamp,
                    },
                );
                // Logged after the reaction, which a slow journal must not
                // delay (the preempt line comes first, reason=lc-busy).
                self.log.log(
                    Level::Info,
                    "lc-busy",
                    &[
                        ("tenants", json!(self.count(Class::LatencyCritical))),
                        ("pending", json!(sample.num_pending)),
                        ("watched", json!(sample.queues.len())),
                    ],
                );
            }
            Confirmation::Idle => {
                self.log.log(
                    Level::Info,
                    "lc-idle",
                    &[
                        ("tenants", json!(self.count(Class::LatencyCritical))),
                        ("watched", json!(sample.queues.len())),
                    ],
                );
                self.feed(now, Event::LcIdle);
            }
            Confirmation::Rearm => self.rearm(),
            Confirmation::Ignore => {}
        }
    }

    /// ARMs again what the policy's mode wants (after a wakeup that did
    /// not hold up, or a failed ARM).
    fn rearm(&mut self) {
        let action = match &self.arm {
            ArmState::Off => self.arm_pending,
            ArmState::AnyBusy { .. } => Some(Action::ArmAnyBusy {
                period: self.policy.config().sample_period,
            }),
            ArmState::AllIdle { idle, .. } => Some(Action::ArmAllIdle {
                period: self.policy.config().sample_period,
                idle: *idle,
            }),
        };
        if let Some(a) = action {
            let _ = self.execute(a);
        }
    }

    /// Finds new and gone tenants, re-queries the queues of every tenant.
    fn scan(&mut self) {
        let listing = self.dev.processes();
        self.apply_listing(listing);
    }

    /// Acts on one listing of the KFD processes.
    fn apply_listing(&mut self, listing: Listing) {
        let result = match listing {
            Ok(listed) => self.discovery.scan_listed(self.cfg, &listed),
            Err(e) => {
                self.warn("scan", &e);
                return;
            }
        };
        for pid in result.gone {
            self.refused.remove(&pid);
            self.remove_tenant(pid, "exited");
        }
        for c in result.added {
            self.add_tenant(c);
        }
        let pids: Vec<i32> = self.tenants.keys().copied().collect();
        for pid in pids {
            self.refresh_queues(pid);
        }
        if self.arm == ArmState::Off && self.arm_pending.is_some() {
            self.rearm();
        }
    }

    fn add_tenant(&mut self, c: Candidate) {
        let pid = c.info.pid;
        let class = match c.priority {
            Priority::LatencyCritical => Class::LatencyCritical,
            Priority::BestEffort => Class::BestEffort,
            Priority::Ignore => {
                self.log.log(
                    Level::Info,
                    "tenant-ignored",
                    &[
                        ("pid", json!(pid)),
                        ("comm", json!(c.info.comm)),
                        ("class", json!(c.class)),
                    ],
                );
                return;
            }
        };
        if self.refused.contains(&pid) {
            return;
        }
        let class_name = c.class.unwrap_or_default();
        match self.dev.attach(pid) {
            Ok((handle, gpus)) => {
                self.log.log(
                    Level::Info,
                    "attach",
                    &[
                        ("pid", json!(pid)),
                        ("comm", json!(c.info.comm)),
                        ("class", json!(class_name)),
                        ("priority", json!(c.priority.as_str())),
                        ("handle", json!(handle.0)),
                        ("gpus", json!(gpus)),
                    ],
                );
                self.tenants.insert(
                    pid,
                    Tenant {
                        handle,
                        comm: c.info.comm,
                        class_name,
                        class,
                        queues: Vec::new(),
                        unwatchable: HashMap::new(),
                    },
                );
                let now = monotonic();
                self.feed(now, Event::TenantAdded { pid, class });
            }
            Err(
                kfd_preempt::Error::NoSuchProcess { .. }
                | kfd_preempt::Error::TargetExited
                | kfd_preempt::Error::NotAKfdProcess { .. },
            ) => {
                // Raced with its exit or with it closing the KFD device:
                // read it afresh if the next scan still lists it.
                self.discovery.forget(pid);
            }
            Err(e) => {
                self.refused.insert(pid);
                self.log.log(
                    Level::Warn,
                    "attach",
                    &[
                        ("pid", json!(pid)),
                        ("comm", json!(c.info.comm)),
                        ("class", json!(class_name)),
                        ("outcome", json!("error")),
                        ("error", json!(e.to_string())),
                    ],
                );
            }
        }
    }

    fn remove_tenant(&mut self, pid: i32, why: &str) {
        let Some(t) = self.tenants.remove(&pid) else {
            return;
        };
        self.log.log(
            Level::Info,
            "detach",
            &[
                ("pid", json!(pid)),
                ("comm", json!(t.comm)),
                ("class", json!(t.class_name)),
                ("why", json!(why)),
                ("queues", json!(t.queues.len())),
            ],
        );
        // The module forgets its watches and releases whatever this owner
        // held of it; an exited target's handle may already be unknown.
        let _ = self.dev.detach(t.handle);
        if t.class == Class::LatencyCritical && !t.queues.is_empty() {
            self.watches_released();
        }
        self.feed(monotonic(), Event::TenantGone { pid });
    }

    /// Watches were released: queues refused for want of room (the
    /// module's `max_watches`) are tried again at the next scan.
    fn watches_released(&mut self) {
        for t in self.tenants.values_mut() {
            t.unwatchable.retain(|_, no_room| !*no_room);
        }
    }

    /// Re-queries one tenant's queues; LC queues are (un)watched to match.
    fn refresh_queues(&mut self, pid: i32) {
        let Some(t) = self.tenants.get_mut(&pid) else {
            return;
        };
        let queues = match self.dev.query(t.handle) {
            Ok(q) => q,
            Err(kfd_preempt::Error::TargetExited | kfd_preempt::Error::UnknownHandle(_)) => {
                self.remove_tenant(pid, "exited");
                return;
            }
            Err(e) => {
                self.warn("query", &e);
                return;
            }
        };
        let compute: Vec<QueueRef> = queues
            .iter()
            .filter(|q| is_compute(q.queue_type))
            .map(|q| q.queue_ref())
            .collect();
        let changed = match t.class {
            Class::BestEffort => {
                let changed = !same_set(&compute, &t.queues);
                t.queues = compute;
                changed
            }
            Class::LatencyCritical => {
                let current: HashSet<QueueRef> = compute.iter().copied().collect();
                let removed: Vec<QueueRef> = t
                    .queues
                    .iter()
                    .copied()
                    .filter(|q| !current.contains(q))
                    .collect();
                let added: Vec<QueueRef> = compute
                    .iter()
                    .copied()
                    .filter(|q| !t.queues.contains(q) && !t.unwatchable.contains_key(q))
                    .collect();
                t.unwatchable.retain(|q, _| current.contains(q));
                if !removed.is_empty() {
                    // The module drops watches of destroyed queues itself;
                    // this only keeps the two lists equal.
                    let _ = self.dev.unwatch(&removed);
                    t.queues.retain(|q| current.contains(q));
                }
                let mut refused = Vec::new();
                let mut watched = 0;
                if !added.is_empty() {
                    match self.dev.watch(&added) {
                        Ok(report) => {
                            for (q, o) in &report.outcomes {
                                if o.is_success() {
                                    t.queues.push(*q);
                                    watched += 1;
                                } else {
                                    let no_room = *o
                                        == Outcome::Failed(EntryError::Other(
                                            Errno::NOSPC.raw_os_error(),
                                        ));
                                    t.unwatchable.insert(*q, no_room);
                                    refused.push((*q, *o));
                                }
                            }
                        }
                        // Tried again at the next scan.
                        Err(e) => self.log.log(
                            Level::Warn,
                            "watch",
                            &[
                                ("pid", json!(pid)),
                                ("queues", json!(added.len())),
                                ("outcome", json!("error")),
                                ("error", json!(e.to_string())),
                            ],
                        ),
                    }
                }
                let changed = !removed.is_empty() || watched > 0;
                if !removed.is_empty() {
                    self.watches_released();
                }
                for (q, o) in refused {
                    self.log.log(
                        Level::Warn,
                        "watch",
                        &[
                            ("pid", json!(pid)),
                            ("queue", json!(q.to_string())),
                            ("outcome", json!(o.to_string())),
                        ],
                    );
                }
                changed
            }
        };
        if changed {
            let n = self.tenants.get(&pid).map_or(0, |t| t.queues.len());
            self.feed(monotonic(), Event::TenantQueues { pid, queues: n });
        }
    }

    fn write_stats(&mut self, now: Duration) {
        let Some(path) = self.stats_path.clone() else {
            return;
        };
        let tenants = self
            .tenants
            .iter()
            .map(|(pid, t)| TenantStats {
                pid: *pid,
                comm: t.comm.clone(),
                class: t.class_name.clone(),
                priority: t.class,
                queues: t.queues.len(),
                held: t.class == Class::BestEffort && self.policy.is_held(),
            })
            .collect();
        let s = Stats::snapshot(
            &self.policy,
            now,
            now.saturating_sub(self.started),
            unix_ms(),
            tenants,
        );
        match write_stats_file(&path, &s) {
            Ok(()) => self.stats_failing = false,
            Err(e) => {
                if !self.stats_failing {
                    self.log.log(
                        Level::Warn,
                        "stats",
                        &[
                            ("path", json!(path.display().to_string())),
                            ("error", json!(e.to_string())),
                        ],
                    );
                }
                self.stats_failing = true;
            }
        }
    }
}

fn write_stats_file(path: &Path, s: &Stats) -> std::io::Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    stats::write_atomic(path, s)
}

fn same_set(a: &[QueueRef], b: &[QueueRef]) -> bool {
    a.len() == b.len() && a.iter().all(|q| b.contains(q))
}

/// Puts the calling thread (only) under SCHED_FIFO at `priority`.
fn set_fifo(priority: u32) -> std::io::Result<()> {
    let param = libc::sched_param {
        sched_priority: priority as libc::c_int,
    };
    // SAFETY: `param` is a valid sched_param for the call; pid 0 is the
    // calling thread.
    if unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) } == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Opens the device and runs the daemon until `stop` is readable.
pub fn run(cfg: &Config, stats_path: Option<PathBuf>, stop: BorrowedFd<'_>) -> Result<(), Fatal> {
    let log = Logger::new(cfg.daemon.log_format);
    let dev = Device::open_path(&cfg.daemon.device)
        .map_err(|e| fatal(format!("opening {}", cfg.daemon.device.display()), e))?;
    let info = dev.info().map_err(|e| fatal("KFDP_IOC_INFO", e))?;
    log.log(
        Level::Info,
        "start",
        &[
            ("version", json!(env!("CARGO_PKG_VERSION"))),
            ("device", json!(cfg.daemon.device.display().to_string())),
            (
                "abi",
                json!(format!("{}.{}", info.abi_major, info.abi_minor)),
            ),
            ("caps", json!(info.caps.names().join(","))),
            ("classes", json!(cfg.classes.len())),
            (
                "stats_path",
                stats_path
                    .as_ref()
                    .map_or(Value::Null, |p| json!(p.display().to_string())),
            ),
        ],
    );
    let mut d = Daemon::new(cfg, dev, &info, Discovery::default(), stats_path)?;
    // The scan thread first: it keeps the default policy.
    d.use_lister(Lister::spawn(cfg.daemon.scan_interval())?);
    if cfg.daemon.fifo_priority > 0 {
        set_fifo(cfg.daemon.fifo_priority)
            .map_err(|e| fatal("sched_setscheduler(SCHED_FIFO) (needs CAP_SYS_NICE)", e))?;
    }
    d.run(stop)
}

#[cfg(test)]
mod tests {
    use super::*;
    use kfd_preempt::Activity;

    fn q(handle: u32, queue_id: u32) -> QueueRef {
        QueueRef {
            handle: Handle(handle),
            gpu_id: 0x1000,
            queue_id,
        }
    }

    fn act(queue: QueueRef, pending: bool, gone: bool, write_index: u64) -> Activity {
        Activity {
            queue,
            pending,
            gone,
            read_index: if pending {
                write_index - 1
            } else {
                write_index
            },
            write_index,
        }
    }

    fn sample(at_us: u64, queues: Vec<Activity>) -> Sample {
        Sample {
            timestamp: Duration::from_micros(at_us),
            num_pending: queues.iter().filter(|a| a.pending).count() as u32,
            queues,
        }
    }

    #[test]
    fn any_busy_is_confirmed_by_pending_work_or_a_moved_write_index() {
        let baseline: HashMap<_, _> = [(q(1, 0), 10), (q(2, 0), 5)].into();
        let arm = ArmState::AnyBusy { baseline };
        let idle = sample(
            100,
            vec![
                act(q(1, 0), false, false, 10),
                act(q(2, 0), false, false, 5),
            ],
        );
        assert_eq!(confirm(&arm, &idle), Confirmation::Rearm);
        let pending = sample(
            100,
            vec![act(q(1, 0), false, false, 10), act(q(2, 0), true, false, 6)],
        );
        assert_eq!(confirm(&arm, &pending), Confirmation::Busy);
        // A burst that retired before the SAMPLE: the write index moved.
        let burst = sample(
            100,
            vec![
                act(q(1, 0), false, false, 12),
                act(q(2, 0), false, false, 5),
            ],
        );
        assert_eq!(confirm(&arm, &burst), Confirmation::Busy);
        // An exited tenant's stale indices do not count.
        let gone = sample(
            100,
            vec![act(q(1, 0), true, true, 99), act(q(2, 0), false, false, 5)],
        );
        assert_eq!(confirm(&arm, &gone), Confirmation::Rearm);
    }

    #[test]
    fn all_idle_needs_no_pending_work_and_the_idle_time_since_the_arm() {
        let arm = ArmState::AllIdle {
            idle: Duration::from_micros(1000),
            armed_at: Duration::from_micros(5000),
        };
        let quiet = |at| sample(at, vec![act(q(1, 0), false, false, 3)]);
        // Too early for this ARM: a stale signal of the one before.
        assert_eq!(confirm(&arm, &quiet(5500)), Confirmation::Rearm);
        assert_eq!(confirm(&arm, &quiet(6000)), Confirmation::Idle);
        // Work came back after the signal: stay busy.
        let back = sample(6100, vec![act(q(1, 0), true, false, 4)]);
        assert_eq!(confirm(&arm, &back), Confirmation::Rearm);
        assert_eq!(confirm(&ArmState::Off, &quiet(9000)), Confirmation::Ignore);
    }

    fn report(outcomes: &[Outcome]) -> BatchReport {
        BatchReport {
            outcomes: outcomes
                .iter()
                .enumerate()
                .map(|(i, o)| (q(1, i as u32), *o))
                .collect(),
            num_ok: 0,
            runlist_updates: 1,
            elapsed: Duration::ZERO,
        }
    }

    #[test]
    fn preempt_outcomes_become_policy_events() {
        let fast = Duration::from_millis(1);
        let slow = Duration::from_millis(200);
        let all = PreemptSummary::of(&report(&[Outcome::Done, Outcome::Already]));
        assert_eq!(all.ok, 2);
        assert_eq!(
            all.feedback(fast, slow),
            Event::PreemptDone { retry_after: None }
        );
        let partial = PreemptSummary::of(&report(&[
            Outcome::Done,
            Outcome::Failed(EntryError::TooSoon),
            Outcome::Failed(EntryError::QueueGone),
        ]));
        assert_eq!((partial.ok, partial.too_soon, partial.gone), (1, 1, 1));
        assert_eq!(
            partial.feedback(fast, slow),
            Event::PreemptDone {
                retry_after: Some(fast)
            }
        );
        let limited = PreemptSummary::of(&report(&[Outcome::Failed(EntryError::TooSoon)]));
        assert_eq!(
            limited.feedback(fast, slow),
            Event::PreemptFailed { retry_after: fast }
        );
        let busy = PreemptSummary::of(&report(&[Outcome::Failed(EntryError::Busy)]));
        assert_eq!(busy.failed, 1);
        assert_eq!(
            busy.feedback(fast, slow),
            Event::PreemptFailed { retry_after: slow }
        );
    }

    #[test]
    fn only_compute_queues_are_taken() {
        assert!(is_compute(QueueType::Compute));
        assert!(is_compute(QueueType::ComputeAql));
        assert!(!is_compute(QueueType::Sdma));
        assert!(!is_compute(QueueType::SdmaXgmi));
        assert!(!is_compute(QueueType::Other(9)));
    }

    // ---- The daemon over a fake module --------------------------------

    use crate::testutil::FakeProc;
    use kfd_preempt::QueueState;
    use std::{cell::RefCell, rc::Rc};

    #[derive(Debug, Clone, PartialEq)]
    enum Call {
        Attach(i32),
        Detach(Handle),
        Preempt(Vec<QueueRef>, Duration),
        Resume(Vec<QueueRef>),
        Watch(Vec<QueueRef>),
        Arm(ArmCondition, Duration),
        Disarm,
    }

    #[derive(Default)]
    struct State {
        processes: Vec<(i32, TargetKind)>,
        refuse_attach: HashSet<i32>,
        handles: HashMap<i32, Handle>,
        queues: HashMap<Handle, Vec<QueueInfo>>,
        watched: Vec<QueueRef>,
        /// LC has work: every watched queue is pending.
        busy: bool,
        writes: u64,
        /// Handles whose process exited (SAMPLE says gone).
        exited: HashSet<Handle>,
        /// Added to the monotonic clock in SAMPLE timestamps.
        skew: Duration,
        /// The most queues WATCH takes (the module's max_watches).
        watch_room: Option<usize>,
        /// ARM signals the eventfd if its condition holds at once.
        signal_on_arm: bool,
        calls: Vec<Call>,
    }

    #[derive(Clone, Default)]
    struct Fake(Rc<RefCell<State>>);

    impl Fake {
        fn calls(&self) -> Vec<Call> {
            std::mem::take(&mut self.0.borrow_mut().calls)
        }
        fn set_busy(&self, busy: bool) {
            let mut s = self.0.borrow_mut();
            s.busy = busy;
            if busy {
                s.writes += 1;
            }
        }
    }

    fn all_done(queues: &[QueueRef]) -> BatchReport {
        BatchReport {
            outcomes: queues.iter().map(|q| (*q, Outcome::Done)).collect(),
            num_ok: queues.len() as u32,
            runlist_updates: 1,
            elapsed: Duration::from_micros(30),
        }
    }

    impl Backend for Fake {
        fn processes(&self) -> Result<Vec<(i32, TargetKind)>, kfd_preempt::Error> {
            Ok(self.0.borrow().processes.clone())
        }
        fn attach(&self, pid: i32) -> Result<(Handle, u32), kfd_preempt::Error> {
            let mut s = self.0.borrow_mut();
            s.calls.push(Call::Attach(pid));
            if s.refuse_attach.contains(&pid) {
                return Err(kfd_preempt::Error::PtraceDenied {
                    pid,
                    errno: Errno::PERM,
                });
            }
            s.handles
                .get(&pid)
                .map(|h| (*h, 1))
                .ok_or(kfd_preempt::Error::NotAKfdProcess { pid })
        }
        fn detach(&self, handle: Handle) -> Result<(), kfd_preempt::Error> {
            let mut s = self.0.borrow_mut();
            s.calls.push(Call::Detach(handle));
            s.watched.retain(|q| q.handle != handle);
            Ok(())
        }
        fn query(&self, handle: Handle) -> Result<Vec<QueueInfo>, kfd_preempt::Error> {
            let s = self.0.borrow();
            if s.exited.contains(&handle) {
                return Err(kfd_preempt::Error::TargetExited);
            }
            Ok(s.queues.get(&handle).cloned().unwrap_or_default())
        }
        fn preempt(
            &self,
            queues: &[QueueRef],
            lease: Duration,
        ) -> Result<BatchReport, kfd_preempt::Error> {
            self.0
                .borrow_mut()
                .calls
                .push(Call::Preempt(queues.to_vec(), lease));
            Ok(all_done(queues))
        }
        fn resume(&self, queues: &[QueueRef]) -> Result<BatchReport, kfd_preempt::Error> {
            self.0
                .borrow_mut()
                .calls
                .push(Call::Resume(queues.to_vec()));
            Ok(all_done(queues))
        }
        fn watch(&self, queues: &[QueueRef]) -> Result<BatchReport, kfd_preempt::Error> {
            let mut s = self.0.borrow_mut();
            s.calls.push(Call::Watch(queues.to_vec()));
            let mut report = all_done(queues);
            for (q, o) in report.outcomes.iter_mut() {
                if s.watch_room.is_some_and(|room| s.watched.len() >= room) {
                    *o = Outcome::Failed(EntryError::Other(Errno::NOSPC.raw_os_error()));
                } else {
                    s.watched.push(*q);
                }
            }
            Ok(report)
        }
        fn unwatch(&self, queues: &[QueueRef]) -> Result<BatchReport, kfd_preempt::Error> {
            self.0.borrow_mut().watched.retain(|q| !queues.contains(q));
            Ok(all_done(queues))
        }
        fn sample(&self) -> Result<Sample, kfd_preempt::Error> {
            let s = self.0.borrow();
            let queues: Vec<Activity> = s
                .watched
                .iter()
                .map(|q| Activity {
                    queue: *q,
                    pending: s.busy,
                    gone: s.exited.contains(&q.handle),
                    read_index: if s.busy { s.writes - 1 } else { s.writes },
                    write_index: s.writes,
                })
                .collect();
            Ok(Sample {
                timestamp: monotonic() + s.skew,
                num_pending: queues.iter().filter(|a| a.pending).count() as u32,
                queues,
            })
        }
        fn arm(
            &self,
            cond: ArmCondition,
            period: Duration,
            eventfd: BorrowedFd<'_>,
        ) -> Result<(), kfd_preempt::Error> {
            let mut s = self.0.borrow_mut();
            s.calls.push(Call::Arm(cond, period));
            // The module checks the condition at once: ANY_BUSY over busy
            // queues signals right away.
            if s.signal_on_arm && s.busy && cond == ArmCondition::AnyBusy {
                let _ = rustix::io::write(eventfd, &1u64.to_ne_bytes());
            }
            Ok(())
        }
        fn disarm(&self) -> Result<(), kfd_preempt::Error> {
            self.0.borrow_mut().calls.push(Call::Disarm);
            Ok(())
        }
    }

    const LC: i32 = 10;
    const BE: i32 = 20;
    const SMI: i32 = 30;
    const OTHER: i32 = 40;

    fn qinfo(handle: Handle, queue_id: u32, queue_type: QueueType) -> QueueInfo {
        QueueInfo {
            handle,
            gpu_id: 0x1000,
            queue_id,
            queue_type,
            state: QueueState(QueueState::ACTIVE),
            ring_base_address: 0,
            ring_size: 0,
            read_pointer_address: 0,
            write_pointer_address: 0,
            ctx_save_restore_address: 0,
            ctx_save_restore_size: 0,
            doorbell_id: 0,
            doorbell_off: 0,
            priority: 7,
            queue_percent: 100,
            gc_ip_version: 0x090403,
        }
    }

    /// A fake /proc with an LC server, a BE trainer, an ignored tool and
    /// an unclassified process, all with a KFD device open, and a module
    /// that knows their queues.
    fn world(name: &str) -> (FakeProc, Fake, Config) {
        let p = FakeProc::new(name);
        p.add(
            LC,
            1,
            0,
            "server",
            "/usr/bin/server",
            "/system.slice/infer.service",
            &[],
        );
        p.add(
            BE,
            2,
            1000,
            "trainer",
            "/usr/bin/python3",
            "/user.slice",
            &["KFD_PREEMPT_CLASS=training"],
        );
        p.add(SMI, 3, 0, "smi", "/usr/bin/smi", "/", &[]);
        p.add(OTHER, 4, 1000, "other", "/usr/bin/other", "/", &[]);
        let fake = Fake::default();
        {
            let mut s = fake.0.borrow_mut();
            s.processes = vec![
                (LC, TargetKind::KfdFd),
                (BE, TargetKind::KfdFd),
                (SMI, TargetKind::KfdFd),
                (OTHER, TargetKind::SimFd),
            ];
            let (hl, hb) = (Handle(1), Handle(2));
            s.handles = [(LC, hl), (BE, hb), (SMI, Handle(3)), (OTHER, Handle(4))].into();
            s.queues.insert(
                hl,
                vec![
                    qinfo(hl, 0, QueueType::ComputeAql),
                    qinfo(hl, 1, QueueType::Sdma),
                ],
            );
            s.queues.insert(
                hb,
                vec![
                    qinfo(hb, 0, QueueType::Compute),
                    qinfo(hb, 1, QueueType::ComputeAql),
                    qinfo(hb, 2, QueueType::Sdma),
                ],
            );
        }
        let stats = p.root.join("stats.json");
        let cfg = Config::parse(&format!(
            r#"
            [daemon]
            tenants = "kfd"
            idle_hysteresis_us = 2000
            stats_path = "{}"
            [[class]]
            name = "inference"
            priority = "latency-critical"
            cgroup = "/system.slice/infer.service"
            [[class]]
            name = "training"
            priority = "best-effort"
            env = "training"
            [[class]]
            name = "quiet"
            priority = "ignore"
            comm = "smi"
            "#,
            stats.display()
        ))
        .unwrap();
        (p, fake, cfg)
    }

    fn info() -> Info {
        Info {
            abi_major: 1,
            abi_minor: 2,
            caps: Caps(Caps::ACTIVITY | Caps::HWS_BATCH),
            max_batch: 4096,
            sizeof_queue_ref: 16,
            sizeof_queue_info: 96,
            min_preempt_interval_us: 1000,
            max_watches: 64,
            min_watch_period: Duration::from_micros(10),
        }
    }

    fn daemon<'c>(p: &FakeProc, fake: &Fake, cfg: &'c Config) -> Daemon<'c, Fake> {
        Daemon::new(
            cfg,
            fake.clone(),
            &info(),
            Discovery::new(p.root.clone()),
            Some(cfg.daemon.stats_path.clone()),
        )
        .unwrap()
    }

    fn be_refs() -> Vec<QueueRef> {
        vec![q(2, 0), q(2, 1)]
    }

    const PERIOD: Duration = Duration::from_micros(50);
    const IDLE: Duration = Duration::from_micros(2000);

    #[test]
    fn a_module_without_activity_detection_is_refused() {
        let (p, fake, cfg) = world("noact");
        let old = Info {
            caps: Caps(Caps::HWS_BATCH),
            abi_minor: 1,
            ..info()
        };
        let e = Daemon::new(&cfg, fake, &old, Discovery::new(p.root.clone()), None)
            .err()
            .unwrap();
        assert!(e.to_string().contains("activity"), "{e}");
    }

    #[test]
    fn too_short_a_period_is_raised_to_the_modules_minimum() {
        let (p, fake, cfg) = world("minperiod");
        let slow = Info {
            min_watch_period: Duration::from_micros(100),
            ..info()
        };
        let mut d = Daemon::new(
            &cfg,
            fake.clone(),
            &slow,
            Discovery::new(p.root.clone()),
            None,
        )
        .unwrap();
        d.scan();
        assert!(fake.calls().contains(&Call::Arm(
            ArmCondition::AnyBusy,
            Duration::from_micros(100)
        )));
    }

    #[test]
    fn busy_preempts_be_idle_after_hysteresis_resumes_shutdown_releases() {
        let (p, fake, cfg) = world("cycle");
        let mut d = daemon(&p, &fake, &cfg);
        d.scan();
        // Attached LC and BE only (the tool is ignored, the sim tenant not
        // looked for); watched the LC compute queue, not its SDMA queue.
        assert_eq!(
            fake.calls(),
            vec![
                Call::Attach(LC),
                Call::Attach(BE),
                Call::Watch(vec![q(1, 0)]),
                Call::Arm(ArmCondition::AnyBusy, PERIOD),
            ]
        );
        // A wakeup with nothing pending is stale: re-armed, nothing else.
        d.on_wakeup();
        assert_eq!(fake.calls(), vec![Call::Arm(ArmCondition::AnyBusy, PERIOD)]);
        // LC busy: every BE compute queue in one batch, then ALL_IDLE.
        fake.set_busy(true);
        d.on_wakeup();
        assert_eq!(
            fake.calls(),
            vec![
                Call::Preempt(be_refs(), Duration::from_millis(200)),
                Call::Arm(ArmCondition::AllIdle { idle: IDLE }, PERIOD),
            ]
        );
        assert!(d.policy.is_held());
        assert_eq!(d.policy.latency().count, 1);
        // Idle, but sooner than the hysteresis after the ARM: a stale
        // signal; BE stays off.
        fake.set_busy(false);
        d.on_wakeup();
        assert_eq!(
            fake.calls(),
            vec![Call::Arm(ArmCondition::AllIdle { idle: IDLE }, PERIOD)]
        );
        // Idle for the hysteresis: resume, then ANY_BUSY.
        fake.0.borrow_mut().skew = Duration::from_millis(10);
        d.on_wakeup();
        assert_eq!(
            fake.calls(),
            vec![
                Call::Resume(be_refs()),
                Call::Arm(ArmCondition::AnyBusy, PERIOD)
            ]
        );
        assert!(!d.policy.is_held());
        // The statistics.
        d.write_stats(monotonic());
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&cfg.daemon.stats_path).unwrap())
                .unwrap();
        assert_eq!(v["version"], 1);
        assert_eq!(v["counters"]["preemptions"], 1);
        assert_eq!(v["counters"]["resumes"], 1);
        assert_eq!(v["tenants"][0]["class"], "inference");
        assert_eq!(v["tenants"][0]["queues"], 1);
        assert_eq!(v["tenants"][1]["class"], "training");
        assert_eq!(v["tenants"][1]["queues"], 2);
        // Busy again, then SIGTERM: resume everything and disarm.
        fake.0.borrow_mut().skew = Duration::ZERO;
        fake.set_busy(true);
        d.on_wakeup();
        fake.calls();
        d.shutdown();
        assert_eq!(fake.calls(), vec![Call::Resume(be_refs()), Call::Disarm]);
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&cfg.daemon.stats_path).unwrap())
                .unwrap();
        assert_eq!(v["counters"]["resumes"], 2);
        assert_eq!(v["be_held"], false);
    }

    #[test]
    fn be_exiting_while_held_is_detached_without_a_resume() {
        let (p, fake, cfg) = world("beexit");
        let mut d = daemon(&p, &fake, &cfg);
        d.scan();
        fake.set_busy(true);
        d.on_wakeup();
        fake.calls();
        fake.0.borrow_mut().processes.retain(|(pid, _)| *pid != BE);
        p.remove(BE);
        d.scan();
        assert_eq!(fake.calls(), vec![Call::Detach(Handle(2))]);
        assert!(!d.policy.is_held());
        assert_eq!(d.policy.counters().resumes, 0);
    }

    #[test]
    fn lc_exit_seen_in_a_sample_resumes_be_and_disarms() {
        let (p, fake, cfg) = world("lcexit");
        let mut d = daemon(&p, &fake, &cfg);
        d.scan();
        fake.set_busy(true);
        d.on_wakeup();
        fake.calls();
        fake.0.borrow_mut().exited.insert(Handle(1));
        d.on_wakeup();
        assert_eq!(
            fake.calls(),
            vec![
                Call::Detach(Handle(1)),
                Call::Resume(be_refs()),
                Call::Disarm
            ]
        );
    }

    #[test]
    fn new_be_queues_while_held_are_preempted_at_the_next_scan() {
        let (p, fake, cfg) = world("newq");
        let mut d = daemon(&p, &fake, &cfg);
        d.scan();
        fake.set_busy(true);
        d.on_wakeup();
        fake.calls();
        fake.0
            .borrow_mut()
            .queues
            .get_mut(&Handle(2))
            .unwrap()
            .push(qinfo(Handle(2), 3, QueueType::ComputeAql));
        d.scan();
        let mut all = be_refs();
        all.push(q(2, 3));
        assert_eq!(
            fake.calls(),
            vec![Call::Preempt(all, Duration::from_millis(200))]
        );
    }

    #[test]
    fn lc_queues_refused_for_want_of_room_are_retried_when_a_watch_is_released() {
        let (p, fake, cfg) = world("nospc");
        fake.0.borrow_mut().watch_room = Some(1);
        fake.0
            .borrow_mut()
            .queues
            .get_mut(&Handle(1))
            .unwrap()
            .push(qinfo(Handle(1), 2, QueueType::ComputeAql));
        let mut d = daemon(&p, &fake, &cfg);
        d.scan();
        assert!(fake.calls().contains(&Call::Watch(vec![q(1, 0), q(1, 2)])));
        // Refused once: not asked again while nothing is released.
        d.scan();
        assert!(!fake.calls().iter().any(|c| matches!(c, Call::Watch(_))));
        // The watched queue is destroyed: room again, the other one is
        // watched at the next scan.
        fake.0
            .borrow_mut()
            .queues
            .get_mut(&Handle(1))
            .unwrap()
            .remove(0);
        d.scan();
        d.scan();
        assert!(fake.calls().contains(&Call::Watch(vec![q(1, 2)])));
        assert_eq!(d.tenants[&LC].queues, vec![q(1, 2)]);
    }

    #[test]
    fn a_refused_attach_is_not_retried_until_the_pid_exits() {
        let (p, fake, cfg) = world("refused");
        fake.0.borrow_mut().refuse_attach.insert(BE);
        let mut d = daemon(&p, &fake, &cfg);
        d.scan();
        assert!(fake.calls().contains(&Call::Attach(BE)));
        d.scan();
        assert!(!fake.calls().contains(&Call::Attach(BE)));
        // LC busy with no BE attached: nothing to preempt.
        fake.set_busy(true);
        d.on_wakeup();
        assert!(!fake.calls().iter().any(|c| matches!(c, Call::Preempt(..))));
    }

    #[test]
    fn the_loop_reacts_renews_and_stops_on_a_signal() {
        let (p, fake, cfg) = world("loop");
        {
            let mut s = fake.0.borrow_mut();
            s.signal_on_arm = true;
            s.busy = true;
            s.writes = 1;
        }
        let mut d = daemon(&p, &fake, &cfg);
        let (stop_rx, mut stop_tx) = std::os::unix::net::UnixStream::pair().unwrap();
        // SIGTERM's stand-in: the byte the signal handler would write.
        let stopper = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(500));
            std::io::Write::write_all(&mut stop_tx, b"x").unwrap();
        });
        d.run(stop_rx.as_fd()).unwrap();
        stopper.join().unwrap();
        let calls = fake.calls();
        let preempts: Vec<_> = calls
            .iter()
            .filter(|c| matches!(c, Call::Preempt(..)))
            .collect();
        // The reaction, then renewals every 100 ms for 500 ms.
        assert!(preempts.len() >= 3, "{calls:?}");
        assert!(preempts
            .iter()
            .all(|c| **c == Call::Preempt(be_refs(), Duration::from_millis(200))));
        assert_eq!(
            calls[calls.len() - 2..],
            [Call::Resume(be_refs()), Call::Disarm]
        );
        assert_eq!(d.policy.counters().preemptions, 1);
        assert!(d.policy.counters().renewals >= 2);
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&cfg.daemon.stats_path).unwrap())
                .unwrap();
        assert_eq!(v["version"], 1);
        assert_eq!(v["be_held"], false);
        assert_eq!(v["counters"]["resumes"], 1);
    }

    #[test]
    fn monotonic_moves_forward() {
        let a = monotonic();
        let b = monotonic();
        assert!(b >= a && a > Duration::ZERO);
    }
}
