//! The daemon: one owner of `/dev/kfd_preempt`, one loop, one decision per
//! node and priority level.
//!
//! A *decision* ([`decision`]) is the work of one level on one node against
//! every lower level's compute queues on that node, with a policy of its
//! own ([`crate::policy`]): an inference request on node 0 preempts the
//! training queues on node 0 and nothing else. The module arms one
//! condition per file, so each decision watches its queues through a file
//! of its own ([`watcher`]); the main file attaches every tenant and
//! issues every PREEMPT and RESUME, and decisions that act at the same
//! moment share one PREEMPT batch ([`actions`]).
//!
//! The loop polls the decisions' eventfds, the scan thread's and a stop
//! descriptor (SIGTERM/SIGINT), with a timeout at the next deadline among
//! the policies' (lease renewal, minimum share, retries) and the
//! statistics snapshot, which it hands to a report thread ([`reporter`]) to
//! render and write off this SCHED_FIFO loop; its log lines go to the log
//! thread ([`crate::log::writer`]) likewise. An eventfd wakeup is
//! confirmed with a SAMPLE of that decision's file before its policy hears
//! of it, so a stale signal from a replaced ARM cannot resume or preempt
//! anything. Only the decisions that
//! woke or whose deadline came are touched: the cost of a decision does not
//! grow with the number of idle nodes.

mod actions;
mod backend;
pub mod decision;
mod hint_socket;
mod hints;
mod lister;
mod report;
mod reporter;
mod tenants;
#[cfg(test)]
mod tests;
mod watcher;

use std::{
    collections::{BTreeMap, BTreeSet, HashMap, HashSet},
    fmt,
    os::fd::BorrowedFd,
    path::PathBuf,
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use kfd_preempt::{Caps, Info, QueueRef, QueueType};
use rustix::{
    event::{poll, PollFd, PollFlags, Timespec},
    io::Errno,
    process::{getrlimit, setrlimit, Resource, Rlimit},
    time::{clock_gettime, ClockId},
};
use serde_json::{json, Value};

use self::decision::Decision;
use self::reporter::{Outputs, Reporter, Sink};
pub use self::{
    actions::PreemptSummary,
    backend::{Attached, Backend, ModuleFile},
    decision::DecisionKey,
    lister::Lister,
    watcher::{confirm, ArmState, Confirmation},
};
use crate::{
    config::Config,
    discover::{Candidate, Discovery},
    log::{writer::LogWriter, Level, Logger},
    metrics::MetricsServer,
    policy::{Event, PolicyConfig},
};

/// How often the statistics file is rewritten.
const STATS_INTERVAL: Duration = Duration::from_secs(1);

/// How often a process that holds only an inherited KFD descriptor is
/// attached again, to find out whether it opened one of its own: one
/// ATTACH (and DETACH) each, on the main loop, so not at every scan.
const INHERITED_RECHECK: Duration = Duration::from_secs(1);

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

/// An attached tenant.
struct Tenant {
    /// Its attachment on the main file.
    handle: kfd_preempt::Handle,
    comm: String,
    class_name: String,
    /// Its level's rank: 0 is the lowest.
    rank: usize,
    /// Its compute queues on every node (main-file handles).
    queues: Vec<QueueRef>,
    /// Which queue each of `queues` is: its ring's address. amdkfd gives a
    /// new queue the lowest free id, so an id comes back with another ring.
    rings: HashMap<QueueRef, u64>,
    /// Those of `queues` that QUERY found not suspended by this daemon. A
    /// queue destroyed and made again can get its old id and ring address
    /// both: only the module's word that the queue is not suspended by the
    /// daemon tells a held decision that the queue on the node now is
    /// another.
    not_held: HashSet<QueueRef>,
    /// The nodes it has had compute queues on since it was attached: a
    /// decision that keeps its level off such a node queries it also while
    /// it makes its only queue there again (HIP destroys a stream's queue
    /// and makes the next stream's).
    nodes: BTreeSet<u32>,
}

/// The daemon's state.
pub struct Daemon<'c, B: Backend> {
    cfg: &'c Config,
    /// The main file: every attachment, PREEMPT and RESUME.
    dev: B,
    log: Logger,
    pcfg: PolicyConfig,
    discovery: Discovery,
    /// By the tgid ATTACH returned, which is the pid discovery found.
    tenants: BTreeMap<i32, Tenant>,
    /// Pids that hold only a KFD descriptor they inherited (forked children:
    /// it names the parent's KFD process), with what discovery found; tried
    /// again every [`INHERITED_RECHECK`], for when one opens its own.
    inherited: BTreeMap<i32, Candidate>,
    /// When `inherited` is tried again.
    inherited_recheck_at: Duration,
    /// Pids whose attach failed for a lasting reason: not retried until
    /// they exit.
    refused: HashSet<i32>,
    /// The decisions, by node then level; kept (with their counters) when
    /// their level leaves the node.
    decisions: BTreeMap<DecisionKey, Decision<B>>,
    /// Delay before retrying rate-limited entries.
    retry_delay: Duration,
    /// Where the statistics go, and who writes them.
    sink: Sink,
    started: Duration,
    next_scan: Duration,
    /// When the tenants a decision keeps off a node are queried next
    /// (`held_scan_interval_ms`).
    next_held_scan: Duration,
    next_stats: Duration,
    /// Lists processes off the main loop; `None`: the loop lists them
    /// itself (tests, through the backend).
    lister: Option<Lister>,
    /// Where tenants say that work is coming, if `hint_socket` is set.
    hint_socket: Option<hint_socket::HintSocket>,
    hint_counts: hints::HintCounts,
}

impl<'c, B: Backend> Daemon<'c, B> {
    /// Sets up a daemon over an open device whose `info` was read, finding
    /// tenants with `discovery` and logging to `log`.
    pub fn new(
        cfg: &'c Config,
        dev: B,
        info: &Info,
        discovery: Discovery,
        stats_path: Option<PathBuf>,
        log: Logger,
    ) -> Result<Self, Fatal> {
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
        let now = monotonic();
        let retry_delay = Duration::from_micros(info.min_preempt_interval_us.max(1000).into());
        let sink = Sink::Inline(Outputs::new(stats_path, log.clone()));
        Ok(Daemon {
            cfg,
            dev,
            log,
            pcfg,
            discovery,
            tenants: BTreeMap::new(),
            inherited: BTreeMap::new(),
            inherited_recheck_at: now,
            refused: HashSet::new(),
            decisions: BTreeMap::new(),
            retry_delay,
            sink,
            started: now,
            next_scan: now,
            next_held_scan: now,
            next_stats: now + STATS_INTERVAL,
            lister: None,
            hint_socket: None,
            hint_counts: hints::HintCounts::default(),
        })
    }

    /// Serves the metrics from now on, renewed at every statistics write.
    pub fn use_metrics(&mut self, server: MetricsServer) {
        match &mut self.sink {
            Sink::Inline(o) => o.set_metrics(server),
            // The thread owns the outputs: too late to add one.
            Sink::Thread(_) | Sink::Lost => {
                self.warn("metrics", &"set after the report thread started")
            }
        }
    }

    /// Renders and writes the statistics on a thread of their own from now
    /// on (`reporter`), if they go anywhere.
    pub fn use_reporter(&mut self) -> Result<(), Fatal> {
        self.sink = match std::mem::replace(&mut self.sink, Sink::Lost) {
            Sink::Inline(o) if !o.is_empty() => Sink::Thread(Reporter::spawn(o)?),
            other => other,
        };
        Ok(())
    }

    /// Lists processes on a thread of their own from now on.
    pub fn use_lister(&mut self, lister: Lister) {
        self.lister = Some(lister);
    }

    /// The policy tunables of the decisions on node `gpu_id`: `[daemon]`'s,
    /// with the node's `[[node]]` overrides (the sampling period, raised to
    /// the module's least, is every node's).
    fn pcfg_for(&self, gpu_id: u32) -> PolicyConfig {
        match self.cfg.node(gpu_id) {
            Some(n) => PolicyConfig {
                sample_period: self.pcfg.sample_period,
                ..PolicyConfig::from(&self.cfg.daemon.for_node(n))
            },
            None => self.pcfg,
        }
    }

    /// The decisions' keys, by node then level.
    pub fn decisions(&self) -> impl Iterator<Item = DecisionKey> + '_ {
        self.decisions.keys().copied()
    }

    /// The earliest deadline of any active decision. A decision whose
    /// level left its node and that holds nothing has none: its window
    /// catches up at its next event.
    fn next_deadline(&self, now: Duration) -> Duration {
        self.decisions
            .values()
            .filter(|a| a.is_active())
            .map(|a| a.policy.next_deadline(now))
            .min()
            .unwrap_or(now + self.pcfg.min_share_period)
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
            self.tick_due(now);
            if now >= self.next_stats {
                self.write_stats(now);
                self.next_stats = now + STATS_INTERVAL;
            }
            let now = monotonic();
            let held_scan = self.held_scan_due();
            let deadline = self
                .next_stats
                .min(self.next_deadline(now))
                .min(self.next_scan)
                .min(held_scan.unwrap_or(Duration::MAX))
                .min(
                    self.hint_socket
                        .as_ref()
                        .and_then(|h| h.wake_at(now))
                        .unwrap_or(Duration::MAX),
                );
            let timeout = Timespec::try_from(deadline.saturating_sub(now)).unwrap_or(Timespec {
                tv_sec: 1,
                tv_nsec: 0,
            });
            let (woken, listed, hinted) = {
                let keys: Vec<DecisionKey> = self
                    .decisions
                    .iter()
                    .filter(|(_, a)| a.watcher.is_some())
                    .map(|(k, _)| *k)
                    .collect();
                let mut fds = vec![PollFd::from_borrowed_fd(stop, PollFlags::IN)];
                if let Some(l) = &self.lister {
                    fds.push(PollFd::new(&l.wake, PollFlags::IN));
                }
                let first_watcher = fds.len();
                for k in &keys {
                    if let Some(w) = self.decisions.get(k).and_then(|a| a.watcher.as_ref()) {
                        fds.push(PollFd::new(&w.efd, PollFlags::IN));
                    }
                }
                let first_hint = fds.len();
                if let Some(h) = &self.hint_socket {
                    fds.extend(
                        h.poll_fds(now)
                            .map(|fd| PollFd::from_borrowed_fd(fd, PollFlags::IN)),
                    );
                }
                match poll(&mut fds, Some(&timeout)) {
                    Ok(_) | Err(Errno::INTR) => {}
                    Err(e) => return Err(fatal("poll", e)),
                }
                if !fds[0].revents().is_empty() {
                    break;
                }
                let listed = self.lister.is_some() && fds[1].revents().contains(PollFlags::IN);
                let woken: Vec<DecisionKey> = keys
                    .iter()
                    .zip(&fds[first_watcher..first_hint])
                    .filter(|(_, f)| f.revents().contains(PollFlags::IN))
                    .map(|(k, _)| *k)
                    .collect();
                // A closed connection is HUP without IN.
                let hint_fds = &fds[first_hint..];
                let hinted = hint_fds.iter().any(|f| !f.revents().is_empty());
                let listener_ready = self.hint_socket.as_ref().is_some_and(|h| h.accepting(now))
                    && hint_fds.first().is_some_and(|f| !f.revents().is_empty());
                (woken, listed, hinted.then_some(listener_ready))
            };
            // The eventfds first: a busy edge must not wait for the
            // bookkeeping of a scan. A hint next: it is work about to come.
            if !woken.is_empty() {
                self.on_wakeups(&woken);
            }
            if let Some(listener_ready) = hinted {
                self.serve_hints(listener_ready);
            }
            if listed {
                if let Some(listing) = self.lister.as_ref().and_then(Lister::take) {
                    self.apply_listing(listing);
                    // The next listing is due in an interval plus its walk
                    // of /proc: the loop queries on its own only if it is
                    // later than twice that.
                    self.next_scan = monotonic() + 2 * self.cfg.daemon.scan_interval();
                }
            } else if monotonic() >= self.next_scan {
                // Without a listing in time (the scan thread's /proc walk
                // waits for a CPU on a busy host), the known tenants' queues
                // are queried all the same.
                if self.lister.is_none() {
                    self.scan();
                } else {
                    self.refresh_tenants();
                }
                self.next_scan = monotonic() + self.cfg.daemon.scan_interval();
            }
            if let (Some(due), Some(every)) =
                (self.held_scan_due(), self.cfg.daemon.held_scan_interval())
            {
                if monotonic() >= due {
                    self.refresh_held();
                    // From its end: a slow one is not followed at once.
                    self.next_held_scan = monotonic() + every;
                }
            }
        }
        self.shutdown();
        Ok(())
    }

    /// When the tenants under decisions that keep them off a node are to be
    /// queried again: `None` while none does (or `held_scan_interval_ms` is
    /// 0).
    fn held_scan_due(&self) -> Option<Duration> {
        self.cfg.daemon.held_scan_interval()?;
        // Most of the time no decision keeps anything off: that is cheaper
        // to see than that no tenant is below one.
        let due = self.decisions.values().any(|a| a.policy.keeps_be_off())
            && self.held_pids().next().is_some();
        due.then_some(self.next_held_scan)
    }

    /// Delivers a tick to the decisions whose deadline has come.
    fn tick_due(&mut self, now: Duration) {
        let due: Vec<(DecisionKey, Duration, Event)> = self
            .decisions
            .iter()
            .filter(|(_, a)| a.is_active() && a.policy.next_deadline(now) <= now)
            .map(|(k, _)| (*k, now, Event::Tick))
            .collect();
        if !due.is_empty() {
            self.feed(due);
        }
    }

    /// Resumes whatever is held, disarms and writes the statistics.
    pub fn shutdown(&mut self) {
        let now = monotonic();
        let keys: Vec<DecisionKey> = self.decisions.keys().copied().collect();
        for k in keys {
            let actions = match self.decisions.get_mut(&k) {
                Some(a) => a.policy.shutdown(now),
                None => continue,
            };
            // Nothing can follow from these.
            self.carry_out(actions.into_iter().map(|a| (k, a)).collect());
        }
        self.write_final_stats(monotonic());
        let preemptions: u64 = self
            .decisions
            .values()
            .map(|a| a.policy.counters().preemptions)
            .sum();
        self.log.log(
            Level::Info,
            "stop",
            &[
                ("tenants", json!(self.tenants.len())),
                ("decisions", json!(self.decisions.len())),
                ("preemptions", json!(preemptions)),
            ],
        );
    }

    fn warn(&self, what: &str, e: &dyn fmt::Display) {
        self.log.log(
            Level::Warn,
            what,
            &[("outcome", json!("error")), ("error", json!(e.to_string()))],
        );
    }

    fn pid_of(&self, handle: kfd_preempt::Handle) -> Option<i32> {
        self.tenants
            .iter()
            .find(|(_, t)| t.handle == handle)
            .map(|(pid, _)| *pid)
    }
}

/// A decision's name in logs: `gpu_id/level`.
fn decision_name(cfg: &Config, key: DecisionKey) -> String {
    let level = cfg.daemon.levels.get(key.1).map_or("?", String::as_str);
    format!("{:#x}/{level}", key.0)
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

/// Raises the soft limit on open files to the hard one, as a daemon that
/// holds a pidfd for each process it knows should (the soft 1024 exists for
/// `select(2)`, which it does not use). Best effort: discovery keeps within
/// whatever limit there is.
fn raise_nofile_limit() {
    let limit = getrlimit(Resource::Nofile);
    // `None` is unlimited.
    let below = match (limit.current, limit.maximum) {
        (Some(soft), Some(hard)) => soft < hard,
        (Some(_), None) => true,
        (None, _) => false,
    };
    if below {
        let _ = setrlimit(
            Resource::Nofile,
            Rlimit {
                current: limit.maximum,
                maximum: limit.maximum,
            },
        );
    }
}

/// Opens the device and runs the daemon until `stop` is readable.
pub fn run(cfg: &Config, stats_path: Option<PathBuf>, stop: BorrowedFd<'_>) -> Result<(), Fatal> {
    // Before anything logs, and before the loop takes SCHED_FIFO, which
    // the log thread must not inherit. Dropped last: it writes whatever
    // the daemon logged, even on an error.
    let writer =
        LogWriter::spawn(cfg.daemon.log_format).map_err(|e| fatal("starting the log thread", e))?;
    let log = writer.logger().at_least(cfg.daemon.log_level.into());
    raise_nofile_limit();
    let dev = ModuleFile::open(cfg.daemon.device.clone())
        .map_err(|e| fatal(format!("opening {}", cfg.daemon.device.display()), e))?;
    let info = dev.device().info().map_err(|e| fatal("KFDP_IOC_INFO", e))?;
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
            ("levels", json!(cfg.daemon.levels.join(","))),
            (
                "stats_path",
                stats_path
                    .as_ref()
                    .map_or(Value::Null, |p| json!(p.display().to_string())),
            ),
        ],
    );
    let mut d = Daemon::new(cfg, dev, &info, Discovery::default(), stats_path, log)?;
    if let Some(path) = &cfg.daemon.hint_socket {
        d.listen_for_hints(path)
            .map_err(|e| fatal(format!("listening for hints on {}", path.display()), e))?;
    }
    if let Some(addr) = &cfg.daemon.metrics {
        let server = MetricsServer::spawn(addr)
            .map_err(|e| fatal(format!("serving the metrics on {addr}"), e))?;
        d.use_metrics(server);
    }
    // The scan and report threads first: they keep the default policy.
    d.use_lister(Lister::spawn(cfg.daemon.scan_interval())?);
    d.use_reporter()?;
    if cfg.daemon.fifo_priority > 0 {
        set_fifo(cfg.daemon.fifo_priority)
            .map_err(|e| fatal("sched_setscheduler(SCHED_FIFO) (needs CAP_SYS_NICE)", e))?;
    }
    let result = d.run(stop);
    // The report thread's last lines, then the log thread's.
    drop(d);
    writer.finish();
    result
}
