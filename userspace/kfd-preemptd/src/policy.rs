//! The decision core: a pure state machine with no I/O and no clock of its
//! own. The daemon keeps one [`Policy`] per decision (one level on one
//! node against the lower levels there, `crate::daemon::decision`), feeds
//! it [`Event`]s stamped with `CLOCK_MONOTONIC` time and carries out the
//! [`Action`]s it returns; tests drive it with a fake clock. In this
//! module "LC" is the decision's level ([`Role::Watched`]), and the levels
//! below it on the node are "the lower levels" ([`Role::Lower`]).
//!
//! The rules:
//!
//! * The LC queues of every tenant of the level on the node are one
//!   watched set: the ARM conditions of the decision's own file cover all
//!   of them, so LC is busy when any of them is, idle when all are.
//! * While LC is idle the module is armed `ANY_BUSY`. On [`Event::LcBusy`]
//!   every lower queue is preempted in one batch (with a lease) and the
//!   module is armed `ALL_IDLE` for the idle hysteresis; the lower levels
//!   are resumed only on [`Event::LcIdle`], so short gaps in LC work are
//!   the kernel's to filter, not ours.
//! * The hysteresis is `idle_hysteresis`, or, with `idle_hysteresis_max`
//!   above it, learnt from LC's gaps: a gap shorter than the most is
//!   covered from then on, a longer one lets it decay back
//!   ([`Policy::idle_hysteresis`]).
//! * Minimum share: within each `min_share_period`, the lower levels must
//!   run for at least `min_share_budget`. If they have been held so long
//!   that the rest of the period is just their missing budget, they are
//!   resumed (a *forced* resume) even though LC is busy, and preempted
//!   again when the period ends. A preemption that would have to be undone
//!   at once is not made.
//! * While held, the lease is renewed at half its length, so a daemon that
//!   stalls leaves nothing off for longer than one lease.
//! * When the last LC queue goes away, the lower levels are resumed and the
//!   module disarmed.
//! * A hint ([`Event::Hint`]) is a tenant of the level saying that work is
//!   coming within a time: it counts as LC's demand at once, so the lower
//!   levels leave the node before the work's first dispatch. The next busy
//!   edge spends every hint given before it (from then on as usual); a
//!   hint given while LC is busy is for the work after, and keeps the
//!   lower levels off when LC goes idle, unless that work was published
//!   before the idle edge ([`Event::Published`]). Each of the daemon's connections
//!   holds a hint of its own. A hint that reaches its time with no work,
//!   that its connection ends first, or whose tenant is gone, is over, and
//!   with no hint left (and LC idle) the lower levels are resumed. A hint
//!   changes nothing while LC has no queues, and obeys the minimum share
//!   like any demand.
//!
//! ```
//! use std::time::Duration;
//! use kfd_preemptd::policy::{Action, Role, Event, Policy, PolicyConfig};
//!
//! let ms = Duration::from_millis;
//! let mut p = Policy::new(PolicyConfig::default(), ms(0));
//! p.handle(ms(0), Event::TenantAdded { pid: 10, role: Role::Watched });
//! p.handle(ms(0), Event::TenantQueues { pid: 10, queues: 1 });
//! p.handle(ms(0), Event::TenantAdded { pid: 20, role: Role::Lower });
//! p.handle(ms(0), Event::TenantQueues { pid: 20, queues: 4 });
//! let actions = p.handle(ms(5), Event::LcBusy { edge: ms(5) });
//! assert!(matches!(actions[0], Action::PreemptLower { .. }));
//! assert!(p.is_held());
//! ```

use std::{collections::BTreeMap, fmt, time::Duration};

use serde::Serialize;

/// The tunables the policy needs. Its default, and the conversion from
/// the configuration's `[daemon]` section, are the configuration's
/// ([`crate::config`]): the policy imports nothing of the daemon.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PolicyConfig {
    /// Lease of each preemption; renewed at half of it while held.
    pub lease: Duration,
    /// The module's sampling period while armed.
    pub sample_period: Duration,
    /// How long LC must be idle before the lower levels are resumed
    /// (`ALL_IDLE`), at least.
    pub idle_hysteresis: Duration,
    /// The most the hysteresis grows to when LC comes back soon after
    /// going idle; `idle_hysteresis` (or less): a fixed hysteresis.
    pub idle_hysteresis_max: Duration,
    /// The minimum-share window.
    pub min_share_period: Duration,
    /// The lower levels' guaranteed run time per window; zero: no guarantee.
    pub min_share_budget: Duration,
}

/// A tenant's role in one decision (not its `[[class]]` rule, which gives
/// it a level): a tenant of the decision's level, whose queues are
/// watched ("LC" in this module), or of a lower level, whose queues are
/// preempted while the level is busy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Role {
    /// Of the decision's level: its queues are watched.
    Watched,
    /// Of a lower level: its queues are preempted while LC is busy.
    Lower,
}

/// An input to the policy. Each is handled at a time `now` given with it
/// to [`Policy::handle`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// Time passed: deadlines (lease renewal, minimum share, retries) are
    /// checked. Deliver one at [`Policy::next_deadline`].
    Tick,
    /// A tenant was attached.
    TenantAdded {
        /// Its pid.
        pid: i32,
        /// Its role.
        role: Role,
    },
    /// A tenant's set of queues changed: for LC the queues now watched,
    /// for the lower levels the compute queues that a preemption would name.
    TenantQueues {
        /// Its pid.
        pid: i32,
        /// How many there are now.
        queues: usize,
    },
    /// A tenant exited (or was dropped).
    TenantGone {
        /// Its pid.
        pid: i32,
    },
    /// `ANY_BUSY` fired and a SAMPLE confirmed LC work.
    LcBusy {
        /// The kernel's timestamp of the busy observation
        /// (`CLOCK_MONOTONIC`), the start of the reaction latency.
        edge: Duration,
    },
    /// `ALL_IDLE` fired and a SAMPLE confirmed it: every LC queue has been
    /// idle for the hysteresis.
    LcIdle {
        /// The kernel's timestamp of the confirming SAMPLE
        /// (`CLOCK_MONOTONIC`): LC went idle about the hysteresis before.
        edge: Duration,
    },
    /// Tenant `pid` of the level says on its connection `conn` to the
    /// daemon that work is coming within `until` (`CLOCK_MONOTONIC`); the
    /// daemon checked that it is a tenant of the level with queues on the
    /// node. A hint is the connection's, not the tenant's: a tenant may
    /// hold several connections (a service's threads), each with a hint
    /// of its own that lives and ends on its own.
    Hint {
        /// The tenant's pid: its hints end with it ([`Event::TenantGone`]).
        pid: i32,
        /// The connection the hint came on.
        conn: u64,
        /// When the hint is over if no work came.
        until: Duration,
    },
    /// A SAMPLE counted `total` packets published on the level's watched
    /// queues on the node (a count that only grows), fed before the
    /// [`Event::LcBusy`] or [`Event::LcIdle`] it confirms, and before a
    /// hint given while LC is busy. Such a hint has no busy edge of its own
    /// to spend it: its work, submitted while the work before it still
    /// runs, is seen as more packets published by the idle edge than when
    /// the hint came. It changes nothing else and leads to no action.
    Published {
        /// Packets published since the daemon began watching the node.
        total: u64,
    },
    /// The hint of connection `conn` ends before its time (the tenant
    /// ended it, or the connection closed).
    HintEnd {
        /// The connection.
        conn: u64,
    },
    /// The preemption asked for by [`Action::PreemptLower`] took effect (for
    /// at least one queue).
    PreemptDone {
        /// Some queues were refused for now (rate limit): retry them (by
        /// renewing the lease) after this long.
        retry_after: Option<Duration>,
    },
    /// A renewal left some lower queues on the GPU for now (rate limit):
    /// renew again after this long.
    RenewRefused {
        /// When to renew again.
        retry_after: Duration,
    },
    /// The preemption asked for took effect for no queue.
    PreemptFailed {
        /// When to try again, if still wanted.
        retry_after: Duration,
    },
}

/// Why the lower levels are preempted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum PreemptReason {
    /// LC became busy.
    LcBusy,
    /// A minimum-share window ended (or allowed it again) while LC is busy.
    MinShare,
    /// A failed preemption is retried.
    Retry,
    /// Lower queues appeared while LC is busy.
    NewQueues,
    /// A tenant of the level says work is coming ([`Event::Hint`]).
    Hint,
}

/// Why the lower levels are resumed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ResumeReason {
    /// LC has been idle for the hysteresis.
    LcIdle,
    /// The lower levels must run now to get their minimum share (a forced
    /// resume).
    MinShare,
    /// No LC queue is left.
    LcGone,
    /// The last hint is over with no work come: it reached its time, or
    /// its tenant ended it.
    HintOver,
    /// The daemon is stopping.
    Shutdown,
}

/// Why the lease is renewed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum RenewReason {
    /// Half the lease has passed.
    Lease,
    /// The lower queue set changed while held: the new queues are preempted by
    /// the same call (held ones answer `Already`).
    NewQueues,
    /// Some queues were refused by the rate limit.
    Retry,
}

macro_rules! reason_names {
    ($($t:ty { $($v:ident => $s:literal),* $(,)? })*) => {$(
        impl $t {
            /// The reason's name, as logs and statistics write it.
            pub fn as_str(self) -> &'static str {
                match self { $(Self::$v => $s),* }
            }
        }
        impl fmt::Display for $t {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }
    )*};
}

reason_names! {
    PreemptReason { LcBusy => "lc-busy", MinShare => "min-share", Retry => "retry", NewQueues => "new-queues", Hint => "hint" }
    ResumeReason { LcIdle => "lc-idle", MinShare => "min-share", LcGone => "lc-gone", HintOver => "hint-over", Shutdown => "shutdown" }
    RenewReason { Lease => "lease", NewQueues => "new-queues", Retry => "retry" }
}

/// What the daemon is to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// PREEMPT every lower queue in one batch with this lease, then report
    /// [`Event::PreemptDone`] or [`Event::PreemptFailed`].
    PreemptLower {
        /// The lease.
        lease: Duration,
        /// Why.
        reason: PreemptReason,
    },
    /// RESUME every lower queue in one batch.
    ResumeLower {
        /// Why.
        reason: ResumeReason,
    },
    /// PREEMPT every lower queue again with this lease: held queues answer
    /// `Already` and get the new lease; queues not yet held are taken off.
    RenewLease {
        /// The lease.
        lease: Duration,
        /// Why.
        reason: RenewReason,
    },
    /// ARM `ANY_BUSY` over the watched LC queues.
    ArmAnyBusy {
        /// Sampling period.
        period: Duration,
    },
    /// ARM `ALL_IDLE` over the watched LC queues.
    ArmAllIdle {
        /// Sampling period.
        period: Duration,
        /// The idle hysteresis.
        idle: Duration,
    },
    /// ARM off.
    Disarm,
}

/// The policy's view of its level: whether it has queues on the node, and
/// whether they have work. It is the statistics' `mode`.
pub use kfd_preemptd_stats::Mode;

/// Number of reaction-latency buckets: bucket `i` counts latencies in
/// `[2^i, 2^(i+1))` µs, bucket 0 also 0 µs, the last one everything above.
pub const LATENCY_BUCKETS: usize = 32;

/// A log2 histogram of reaction latencies in microseconds.
///
/// ```
/// use std::time::Duration;
/// use kfd_preemptd::policy::Histogram;
///
/// let mut h = Histogram::default();
/// h.record(Duration::from_micros(100)); // 64..128 µs
/// assert_eq!(h.buckets[6], 1);
/// assert_eq!((h.count, h.max_us), (1, 100));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Histogram {
    /// Counts per bucket (see [`LATENCY_BUCKETS`]).
    pub buckets: [u64; LATENCY_BUCKETS],
    /// Latencies recorded.
    pub count: u64,
    /// Their sum, in µs.
    pub sum_us: u64,
    /// The largest, in µs.
    pub max_us: u64,
}

impl Histogram {
    /// Records one latency.
    pub fn record(&mut self, d: Duration) {
        let us = u64::try_from(d.as_micros()).unwrap_or(u64::MAX);
        self.buckets[Self::bucket(us)] += 1;
        self.count += 1;
        self.sum_us = self.sum_us.saturating_add(us);
        self.max_us = self.max_us.max(us);
    }

    /// Adds every latency of `other`.
    pub fn merge(&mut self, other: &Histogram) {
        for (a, b) in self.buckets.iter_mut().zip(other.buckets.iter()) {
            *a += b;
        }
        self.count += other.count;
        self.sum_us = self.sum_us.saturating_add(other.sum_us);
        self.max_us = self.max_us.max(other.max_us);
    }

    /// The bucket a latency of `us` microseconds falls in.
    ///
    /// ```
    /// use kfd_preemptd::policy::Histogram;
    /// assert_eq!([0, 1, 2, 3, 4].map(Histogram::bucket), [0, 0, 1, 1, 2]);
    /// ```
    pub fn bucket(us: u64) -> usize {
        let log2 = 63 - us.max(1).leading_zeros() as usize;
        log2.min(LATENCY_BUCKETS - 1)
    }

    /// The `[low, high)` µs range of bucket `i` (`high` is `None` for the
    /// last, open one).
    pub fn bounds(i: usize) -> (u64, Option<u64>) {
        let low = if i == 0 { 0 } else { 1u64 << i };
        let high = (i + 1 < LATENCY_BUCKETS).then(|| 1u64 << (i + 1));
        (low, high)
    }
}

/// What the policy has done so far.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Counters {
    /// Preemptions of the lower levels that took effect.
    pub preemptions: u64,
    /// Preemptions that took effect for no queue.
    pub preempt_failures: u64,
    /// Resumes of the lower levels (forced ones included).
    pub resumes: u64,
    /// Resumes forced by the minimum share while LC was busy.
    pub forced_resumes: u64,
    /// Lease renewals.
    pub renewals: u64,
    /// Time the lower levels were held, over closed holds (see
    /// [`Policy::held_total`]).
    pub held_total: Duration,
    /// Hints that reached their time with no work come.
    pub hints_expired: u64,
}

impl Counters {
    /// Adds `other`'s counts to these.
    pub fn add(&mut self, other: &Counters) {
        self.preemptions += other.preemptions;
        self.preempt_failures += other.preempt_failures;
        self.resumes += other.resumes;
        self.forced_resumes += other.forced_resumes;
        self.renewals += other.renewals;
        self.held_total += other.held_total;
        self.hints_expired += other.hints_expired;
    }
}

#[derive(Debug, Clone, Copy)]
struct TenantState {
    role: Role,
    queues: usize,
}

/// A hint in force.
#[derive(Debug, Clone, Copy)]
struct GivenHint {
    /// The tenant that gave it.
    pid: i32,
    /// When it was given: a busy edge after it does not spend it.
    given: Duration,
    /// When it runs out.
    until: Duration,
    /// Given while LC was busy: the packets published when it came
    /// ([`Event::Published`]); the idle edge spends it if more were
    /// published by then.
    published: Option<u64>,
}

/// The policy state machine.
#[derive(Debug, Clone)]
pub struct Policy {
    cfg: PolicyConfig,
    tenants: BTreeMap<i32, TenantState>,
    mode: Mode,
    held: bool,
    held_since: Duration,
    renew_at: Duration,
    /// The next renewal retries queues the rate limit refused.
    renew_is_retry: bool,
    /// A failed preemption is retried no sooner than this.
    retry_at: Option<Duration>,
    /// The kernel timestamp of the LcBusy edge a pending or held
    /// preemption reacts to, until its latency is recorded.
    pending_edge: Option<Duration>,
    /// A preemption was wanted but the minimum share forbade it.
    min_share_blocked: bool,
    /// The idle hysteresis in use: `cfg.idle_hysteresis` to
    /// `cfg.idle_hysteresis_max`, learnt from LC's gaps.
    idle: Duration,
    /// When LC last went idle (the idle edge less the hysteresis), until
    /// the next busy edge measures the gap.
    idle_from: Option<Duration>,
    period_start: Duration,
    /// Held time of the lower levels within the current period, over closed
    /// holds.
    held_in_period: Duration,
    counters: Counters,
    latency: Histogram,
    /// The hints in force, by the daemon's connection they came on.
    hints: BTreeMap<u64, GivenHint>,
    /// The packets published, by the last [`Event::Published`].
    published: Option<u64>,
}

impl Policy {
    /// A policy that holds nothing and watches nothing, whose first
    /// minimum-share window starts at `now`. A restarted daemon starts
    /// here: closing the device resumed everything the old one held.
    pub fn new(cfg: PolicyConfig, now: Duration) -> Self {
        Policy {
            cfg,
            tenants: BTreeMap::new(),
            mode: Mode::NoLc,
            held: false,
            held_since: now,
            renew_at: now,
            renew_is_retry: false,
            retry_at: None,
            pending_edge: None,
            min_share_blocked: false,
            idle: cfg.idle_hysteresis,
            idle_from: None,
            period_start: now,
            held_in_period: Duration::ZERO,
            counters: Counters::default(),
            latency: Histogram::default(),
            hints: BTreeMap::new(),
            published: None,
        }
    }

    /// The configuration.
    pub fn config(&self) -> &PolicyConfig {
        &self.cfg
    }

    /// LC's state as the policy sees it.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// Whether the lower levels are (meant to be) off the GPU.
    pub fn is_held(&self) -> bool {
        self.held
    }

    /// Whether a lower queue made now is to be taken off the GPU: the lower
    /// levels are held, or LC is busy with no lower queue left to hold (a lower
    /// tenant between destroying its only queue and making the next).
    pub fn keeps_be_off(&self) -> bool {
        self.held || (self.demands() && self.lower_queues() == 0)
    }

    /// Whether a hint is in force (work said to be coming).
    pub fn is_hinted(&self) -> bool {
        !self.hints.is_empty()
    }

    /// Whether LC wants the node: it is busy, or a hint says work is
    /// coming.
    fn demands(&self) -> bool {
        self.mode == Mode::LcBusy || self.is_hinted()
    }

    /// The idle hysteresis the next `ALL_IDLE` asks for.
    pub fn idle_hysteresis(&self) -> Duration {
        self.idle
    }

    /// The counters.
    pub fn counters(&self) -> &Counters {
        &self.counters
    }

    /// The reaction-latency histogram.
    pub fn latency(&self) -> &Histogram {
        &self.latency
    }

    /// Total time the lower levels have been held, the current hold included.
    pub fn held_total(&self, now: Duration) -> Duration {
        let current = if self.held {
            now.saturating_sub(self.held_since)
        } else {
            Duration::ZERO
        };
        self.counters.held_total + current
    }

    /// How long the lower levels have run (not been held) in the current
    /// minimum-share window up to `now`.
    pub fn lower_run_in_window(&self, now: Duration) -> Duration {
        let elapsed = now.saturating_sub(self.period_start);
        elapsed.saturating_sub(self.held_in_period_total(now))
    }

    /// The role of tenant `pid`, if known.
    pub fn role_of(&self, pid: i32) -> Option<Role> {
        self.tenants.get(&pid).map(|t| t.role)
    }

    /// The earliest time at which an [`Event::Tick`] may lead to an
    /// action: lease renewal, a forced resume, the end of the window, a
    /// retry. After an event handled at `now` it is always later than
    /// `now`, so a loop that sleeps until it never spins.
    pub fn next_deadline(&self, now: Duration) -> Duration {
        let mut d = self.period_end();
        if self.held {
            d = d.min(self.renew_at);
            if !self.cfg.min_share_budget.is_zero() {
                d = d.min(self.forced_resume_at(now));
            }
        }
        if let Some(r) = self.retry_at {
            d = d.min(r);
        }
        if let Some(until) = self.hints.values().map(|h| h.until).min() {
            d = d.min(until);
        }
        d
    }

    /// Handles one event at time `now` (`CLOCK_MONOTONIC`, never going
    /// back) and returns what to do, in order. Preemptions and resumes
    /// come before ARMs, so that a reaction is not delayed by one.
    pub fn handle(&mut self, now: Duration, event: Event) -> Vec<Action> {
        // A count for the edge that follows it, and nothing more: taken as
        // an event of its own, the period, hints and lease would be brought
        // in line a moment before that edge, in the mode before it.
        if let Event::Published { total } = event {
            self.published = Some(total);
            return Vec::new();
        }
        self.roll_period(now);
        // Whether the last hint ended during this event: the resume it
        // leads to, if any, is `hint-over` rather than `lc-idle`.
        let mut hint_over = self.expire_hints(now);
        let lc_before = self.watched_queues();
        let mut rearm = false;
        let mut lower_changed = false;
        match event {
            Event::Tick => {}
            Event::TenantAdded { pid, role } => {
                // A pid seen again in another role is a new tenant.
                self.tenants.insert(pid, TenantState { role, queues: 0 });
            }
            Event::TenantQueues { pid, queues } => {
                if let Some(t) = self.tenants.get_mut(&pid) {
                    let grew = queues > t.queues;
                    t.queues = queues;
                    match t.role {
                        Role::Watched => rearm |= grew,
                        Role::Lower => lower_changed = queues > 0,
                    }
                }
            }
            Event::TenantGone { pid } => {
                self.tenants.remove(&pid);
                // A hint is its tenant's word: it goes with the tenant, even
                // while a connection it made stays open (a forked child's).
                hint_over |= self.end_hints(|_, h| h.pid == pid);
            }
            Event::LcBusy { edge } => {
                if self.mode == Mode::LcIdle {
                    if let Some(from) = self.idle_from.take() {
                        self.learn_gap(edge.saturating_sub(from));
                    }
                    self.mode = Mode::LcBusy;
                    // Held already (a hint): no reaction to measure.
                    self.pending_edge = (!self.held).then_some(edge);
                    // The work came: the hints given before it are spent.
                    self.hints.retain(|_, h| h.given > edge);
                    rearm = true;
                }
            }
            Event::Hint { pid, conn, until } => {
                if self.mode != Mode::NoLc && until > now {
                    let until = self.hints.get(&conn).map_or(until, |h| h.until.max(until));
                    let published = if self.mode == Mode::LcBusy {
                        self.published
                    } else {
                        None
                    };
                    self.hints.insert(
                        conn,
                        GivenHint {
                            pid,
                            given: now,
                            until,
                            published,
                        },
                    );
                }
            }
            Event::Published { .. } => {}
            Event::HintEnd { conn } => {
                hint_over |= self.end_hints(|c, _| c == conn);
            }
            Event::LcIdle { edge } => {
                if self.mode == Mode::LcBusy {
                    self.mode = Mode::LcIdle;
                    // The work of a hint given while busy came before LC
                    // went idle: the hint is spent, not left to keep the
                    // lower levels off until its time ends.
                    let now_published = self.published;
                    self.hints.retain(|_, h| {
                        h.published
                            .zip(now_published)
                            .is_none_or(|(then, now)| now <= then)
                    });
                    // The kernel's time, not ours: the daemon's own delay
                    // must not shorten the gaps it learns from.
                    self.idle_from = Some(edge.saturating_sub(self.idle));
                    rearm = true;
                }
            }
            Event::PreemptDone { retry_after } => {
                if self.held {
                    self.counters.preemptions += 1;
                    if let Some(edge) = self.pending_edge.take() {
                        self.latency.record(now.saturating_sub(edge));
                    }
                    if let Some(r) = retry_after {
                        self.renew_at = self.renew_at.min(now + r);
                        self.renew_is_retry = true;
                    }
                }
            }
            Event::RenewRefused { retry_after } => {
                if self.held {
                    self.renew_at = self.renew_at.min(now + retry_after);
                    self.renew_is_retry = true;
                }
            }
            Event::PreemptFailed { retry_after } => {
                if self.held {
                    self.stop_holding(now);
                    self.counters.preempt_failures += 1;
                    self.retry_at = Some(now + retry_after);
                }
            }
        }

        let lc_after = self.watched_queues();
        if lc_after == 0 && self.mode != Mode::NoLc {
            self.mode = Mode::NoLc;
            self.pending_edge = None;
            self.idle_from = None;
            self.hints.clear();
            rearm = true;
        } else if lc_after > 0 && self.mode == Mode::NoLc {
            self.mode = Mode::LcIdle;
            rearm = true;
        } else if lc_after > lc_before {
            // New queues were watched: the kernel's ANY_BUSY baseline or
            // ALL_IDLE timer must start over with them included.
            rearm = true;
        }

        let mut out = Vec::new();
        self.reconcile(now, lower_changed, hint_over, &mut out);
        if rearm {
            out.push(self.arm_action());
        }
        out
    }

    /// What to do when the daemon stops: resume the lower levels if held,
    /// disarm.
    pub fn shutdown(&mut self, now: Duration) -> Vec<Action> {
        let mut out = Vec::new();
        self.hints.clear();
        if self.held {
            self.stop_holding(now);
            self.counters.resumes += 1;
            out.push(Action::ResumeLower {
                reason: ResumeReason::Shutdown,
            });
        }
        if self.mode != Mode::NoLc {
            out.push(Action::Disarm);
        }
        out
    }

    fn arm_action(&self) -> Action {
        match self.mode {
            Mode::NoLc => Action::Disarm,
            Mode::LcIdle => Action::ArmAnyBusy {
                period: self.cfg.sample_period,
            },
            Mode::LcBusy => Action::ArmAllIdle {
                period: self.cfg.sample_period,
                idle: self.idle,
            },
        }
    }

    /// Learns the hysteresis from a gap in LC's work that ended `gap` after LC
    /// went idle. A gap the hysteresis may cover (at most
    /// `idle_hysteresis_max`) is one where resuming the lower levels bought it
    /// little and cost the next LC work a whole reaction: such gaps are covered
    /// from now on, with a quarter more for margin. A longer gap is a resume
    /// that paid; the hysteresis decays by an eighth of its excess towards the
    /// configured one, so that it comes back down once the short gaps end.
    /// (Gaps the hysteresis covers are never seen: the decay is what finds out
    /// whether they are still there.)
    fn learn_gap(&mut self, gap: Duration) {
        let (least, most) = (self.cfg.idle_hysteresis, self.cfg.idle_hysteresis_max);
        if most <= least {
            return;
        }
        if gap <= most {
            self.idle = self.idle.max((gap + gap / 4).min(most));
        } else {
            self.idle = least + self.idle.saturating_sub(least) * 7 / 8;
        }
    }

    fn queues_of(&self, role: Role) -> usize {
        self.tenants
            .values()
            .filter(|t| t.role == role)
            .map(|t| t.queues)
            .sum()
    }

    fn watched_queues(&self) -> usize {
        self.queues_of(Role::Watched)
    }

    fn lower_queues(&self) -> usize {
        self.queues_of(Role::Lower)
    }

    /// Brings "held" in line with what the mode and the minimum share want;
    /// `hint_over`: the last hint ended during this event.
    fn reconcile(
        &mut self,
        now: Duration,
        lower_changed: bool,
        hint_over: bool,
        out: &mut Vec<Action>,
    ) {
        let lower = self.lower_queues();
        let want = self.demands() && lower > 0;
        if !want {
            // Nothing to react to (LC idle, or no lower queue): a preemption
            // made later is not a reaction to this edge.
            self.retry_at = None;
            self.min_share_blocked = false;
            self.pending_edge = None;
        }
        if self.held {
            self.reconcile_held(now, lower, want, lower_changed, hint_over, out);
        } else if want {
            self.maybe_preempt(now, out);
        }
    }

    /// [`Policy::reconcile`] while the lower levels are held: resumes them (no
    /// lower queue left, LC idle or gone, the minimum share due), or renews the
    /// lease (new lower queues, a retry, the lease's half).
    fn reconcile_held(
        &mut self,
        now: Duration,
        lower: usize,
        want: bool,
        lower_changed: bool,
        hint_over: bool,
        out: &mut Vec<Action>,
    ) {
        if lower == 0 {
            // Every lower tenant exited while held: their queues are
            // gone with them, so there is nothing to resume.
            self.stop_holding(now);
            return;
        }
        if !want {
            self.stop_holding(now);
            self.counters.resumes += 1;
            let reason = if self.mode == Mode::NoLc {
                ResumeReason::LcGone
            } else if hint_over {
                ResumeReason::HintOver
            } else {
                ResumeReason::LcIdle
            };
            out.push(Action::ResumeLower { reason });
            return;
        }
        if !self.may_hold(now) {
            self.stop_holding(now);
            self.counters.resumes += 1;
            self.counters.forced_resumes += 1;
            self.min_share_blocked = true;
            out.push(Action::ResumeLower {
                reason: ResumeReason::MinShare,
            });
            return;
        }
        let reason = if lower_changed {
            Some(RenewReason::NewQueues)
        } else if now >= self.renew_at && self.renew_is_retry {
            Some(RenewReason::Retry)
        } else if now >= self.renew_at {
            Some(RenewReason::Lease)
        } else {
            None
        };
        if let Some(reason) = reason {
            self.renew_is_retry = false;
            // A renewal at the lease's half (rather than its end)
            // leaves half a lease for the ioctl and a late wakeup.
            self.renew_at = now + self.cfg.lease / 2;
            self.counters.renewals += 1;
            out.push(Action::RenewLease {
                lease: self.cfg.lease,
                reason,
            });
        }
    }

    /// [`Policy::reconcile`] when LC is busy with lower queues not held:
    /// preempts them, unless the minimum share forbids it or a retry is
    /// not due yet.
    fn maybe_preempt(&mut self, now: Duration, out: &mut Vec<Action>) {
        if !self.may_hold(now) {
            // Preempting now would have to be undone at once; a reaction
            // this late no longer measures anything, and a retry waits for
            // the window's end like everything else.
            self.min_share_blocked = true;
            self.pending_edge = None;
            self.retry_at = None;
            return;
        }
        if self.retry_at.is_some_and(|t| now < t) {
            return;
        }
        let reason = if self.retry_at.take().is_some() {
            PreemptReason::Retry
        } else if self.pending_edge.is_some() {
            PreemptReason::LcBusy
        } else if self.mode == Mode::LcIdle && self.is_hinted() {
            PreemptReason::Hint
        } else if self.min_share_blocked {
            PreemptReason::MinShare
        } else {
            PreemptReason::NewQueues
        };
        self.min_share_blocked = false;
        self.held = true;
        self.held_since = now;
        self.renew_at = now + self.cfg.lease / 2;
        self.renew_is_retry = false;
        out.push(Action::PreemptLower {
            lease: self.cfg.lease,
            reason,
        });
    }

    /// Ends the hints whose time has come (no work came in time); true if
    /// that ended the last one.
    fn expire_hints(&mut self, now: Duration) -> bool {
        let before = self.hints.len();
        self.hints.retain(|_, h| h.until > now);
        let expired = before - self.hints.len();
        self.counters.hints_expired += expired as u64;
        expired > 0 && self.hints.is_empty()
    }

    /// Ends the hints `which` picks (by connection and hint); true if that
    /// ended the last one.
    fn end_hints(&mut self, which: impl Fn(u64, &GivenHint) -> bool) -> bool {
        let before = self.hints.len();
        self.hints.retain(|conn, h| !which(*conn, h));
        before > self.hints.len() && self.hints.is_empty()
    }

    fn stop_holding(&mut self, now: Duration) {
        let from = self.held_since.max(self.period_start);
        self.held_in_period += now.saturating_sub(from);
        self.counters.held_total += now.saturating_sub(self.held_since);
        self.held = false;
    }

    fn period_end(&self) -> Duration {
        self.period_start + self.cfg.min_share_period
    }

    fn roll_period(&mut self, now: Duration) {
        let p = self.cfg.min_share_period;
        if p.is_zero() || now < self.period_end() {
            return;
        }
        // Whole periods only, so that windows stay aligned even after the
        // daemon was not woken for a while.
        let behind = now - self.period_start;
        let whole = behind.as_nanos() / p.as_nanos();
        let skip = u32::try_from(whole).unwrap_or(u32::MAX);
        self.period_start += p.saturating_mul(skip);
        self.held_in_period = Duration::ZERO;
    }

    fn held_in_period_total(&self, now: Duration) -> Duration {
        let current = if self.held {
            now.saturating_sub(self.held_since.max(self.period_start))
        } else {
            Duration::ZERO
        };
        self.held_in_period + current
    }

    /// The lower levels' budget still missing in this window.
    fn needed(&self, now: Duration) -> Duration {
        self.cfg
            .min_share_budget
            .saturating_sub(self.lower_run_in_window(now))
    }

    /// Whether the lower levels may be (or stay) held at `now`: the rest of the
    /// window is longer than the budget they still miss.
    fn may_hold(&self, now: Duration) -> bool {
        if self.cfg.min_share_budget.is_zero() {
            return true;
        }
        let remaining = self.period_end().saturating_sub(now);
        remaining > self.needed(now)
    }

    /// While held, the lower levels' run time is frozen, so the forced resume
    /// falls where the rest of the window equals the missing budget.
    fn forced_resume_at(&self, now: Duration) -> Duration {
        self.period_end().saturating_sub(self.needed(now))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }
    fn us(v: u64) -> Duration {
        Duration::from_micros(v)
    }

    fn cfg() -> PolicyConfig {
        PolicyConfig {
            lease: ms(200),
            sample_period: us(50),
            idle_hysteresis: us(1000),
            idle_hysteresis_max: us(1000),
            min_share_period: ms(1000),
            min_share_budget: ms(100),
        }
    }

    /// The `ALL_IDLE` hysteresis asked for among `a`.
    fn armed_idle(a: &[Action]) -> Option<Duration> {
        a.iter().find_map(|a| match a {
            Action::ArmAllIdle { idle, .. } => Some(*idle),
            _ => None,
        })
    }

    /// One LC burst from `busy` to `idle` (the idle edge as the kernel
    /// reports it, the hysteresis after the work ended), acknowledged at
    /// once.
    fn burst(p: &mut Policy, busy: Duration, idle: Duration) {
        let a = p.handle(busy, Event::LcBusy { edge: busy });
        assert!(has_preempt(&a), "{a:?}");
        p.handle(busy, Event::PreemptDone { retry_after: None });
        let a = p.handle(idle, Event::LcIdle { edge: idle });
        assert!(has_resume(&a), "{a:?}");
    }

    const LC: i32 = 100;
    const LC2: i32 = 101;
    const BE: i32 = 200;
    const BE2: i32 = 201;

    /// A policy with one LC tenant (2 queues) and one BE tenant (4 queues)
    /// set up at time 0.
    fn setup(cfg: PolicyConfig) -> Policy {
        let mut p = Policy::new(cfg, Duration::ZERO);
        let z = Duration::ZERO;
        p.handle(
            z,
            Event::TenantAdded {
                pid: LC,
                role: Role::Watched,
            },
        );
        p.handle(z, Event::TenantQueues { pid: LC, queues: 2 });
        p.handle(
            z,
            Event::TenantAdded {
                pid: BE,
                role: Role::Lower,
            },
        );
        p.handle(z, Event::TenantQueues { pid: BE, queues: 4 });
        p
    }

    fn has_preempt(a: &[Action]) -> bool {
        a.iter().any(|a| matches!(a, Action::PreemptLower { .. }))
    }
    fn has_resume(a: &[Action]) -> bool {
        a.iter().any(|a| matches!(a, Action::ResumeLower { .. }))
    }
    fn has_renew(a: &[Action]) -> bool {
        a.iter().any(|a| matches!(a, Action::RenewLease { .. }))
    }

    #[test]
    fn restart_starts_with_nothing_held_and_arms_any_busy() {
        let mut p = Policy::new(cfg(), ms(7));
        assert!(!p.is_held());
        assert_eq!(p.mode(), Mode::NoLc);
        let a = p.handle(
            ms(7),
            Event::TenantAdded {
                pid: BE,
                role: Role::Lower,
            },
        );
        assert!(a.is_empty(), "{a:?}");
        let a = p.handle(ms(7), Event::TenantQueues { pid: BE, queues: 3 });
        assert!(a.is_empty(), "BE alone is never preempted: {a:?}");
        p.handle(
            ms(7),
            Event::TenantAdded {
                pid: LC,
                role: Role::Watched,
            },
        );
        let a = p.handle(ms(7), Event::TenantQueues { pid: LC, queues: 1 });
        assert_eq!(a, vec![Action::ArmAnyBusy { period: us(50) }]);
        assert!(!p.is_held());
        assert_eq!(p.mode(), Mode::LcIdle);
        assert_eq!(p.counters(), &Counters::default());
    }

    #[test]
    fn busy_preempts_in_one_batch_then_arms_all_idle_with_the_hysteresis() {
        let mut p = setup(cfg());
        let a = p.handle(ms(10), Event::LcBusy { edge: ms(10) });
        assert_eq!(
            a,
            vec![
                Action::PreemptLower {
                    lease: ms(200),
                    reason: PreemptReason::LcBusy
                },
                Action::ArmAllIdle {
                    period: us(50),
                    idle: us(1000)
                },
            ]
        );
        assert!(p.is_held());
        p.handle(ms(10) + us(80), Event::PreemptDone { retry_after: None });
        assert_eq!(p.counters().preemptions, 1);
        assert_eq!(p.latency().count, 1);
        assert_eq!(p.latency().max_us, 80);
        assert_eq!(p.latency().buckets[Histogram::bucket(80)], 1);
    }

    #[test]
    fn hysteresis_is_the_kernels_only_lc_idle_resumes() {
        let mut p = setup(cfg());
        p.handle(ms(10), Event::LcBusy { edge: ms(10) });
        // Long after the hysteresis, ticks alone never resume: a gap in LC
        // work shorter than it is filtered by ALL_IDLE in the kernel.
        for t in (11..90).map(ms) {
            let a = p.handle(t, Event::Tick);
            assert!(!has_resume(&a), "resumed at {t:?} without LcIdle: {a:?}");
        }
        // A spurious LcBusy while busy changes nothing.
        assert!(p.handle(ms(90), Event::LcBusy { edge: ms(90) }).is_empty());
        assert!(p.is_held());
        let a = p.handle(ms(95), Event::LcIdle { edge: ms(95) });
        assert_eq!(
            a,
            vec![
                Action::ResumeLower {
                    reason: ResumeReason::LcIdle
                },
                Action::ArmAnyBusy { period: us(50) },
            ]
        );
        assert!(!p.is_held());
        assert_eq!(p.counters().resumes, 1);
        assert_eq!(p.held_total(ms(200)), ms(85));
        // An LcIdle while idle is stale: nothing to do.
        assert!(p.handle(ms(96), Event::LcIdle { edge: ms(96) }).is_empty());
    }

    #[test]
    fn a_fixed_hysteresis_ignores_short_gaps() {
        let mut p = setup(cfg());
        // LC comes back 2 ms after going idle, again and again.
        let mut t = ms(10);
        for _ in 0..5 {
            let a = p.handle(t, Event::LcBusy { edge: t });
            assert_eq!(armed_idle(&a), Some(us(1000)), "{a:?}");
            p.handle(t, Event::PreemptDone { retry_after: None });
            t += ms(5);
            p.handle(t, Event::LcIdle { edge: t });
            t += ms(1);
        }
        assert_eq!(p.idle_hysteresis(), us(1000));
    }

    #[test]
    fn a_short_gap_grows_the_hysteresis_to_cover_it_up_to_the_most() {
        let mut p = setup(PolicyConfig {
            idle_hysteresis_max: ms(8),
            ..cfg()
        });
        // Busy at 10 ms, idle edge at 16 ms: LC went idle at 15 ms. It is
        // busy again at 18 ms, a 3 ms gap: covered with a quarter more.
        burst(&mut p, ms(10), ms(16));
        let a = p.handle(ms(18), Event::LcBusy { edge: ms(18) });
        assert_eq!(armed_idle(&a), Some(us(3750)), "{a:?}");
        p.handle(ms(18), Event::PreemptDone { retry_after: None });
        // Idle edge at 30 ms: LC went idle 3.75 ms before, and is back
        // 1 ms after the edge: a 4.75 ms gap.
        p.handle(ms(30), Event::LcIdle { edge: ms(30) });
        let a = p.handle(ms(31), Event::LcBusy { edge: ms(31) });
        assert_eq!(
            armed_idle(&a),
            Some(us(5937) + Duration::from_nanos(500)),
            "{a:?}"
        );
        p.handle(ms(31), Event::PreemptDone { retry_after: None });
        // A 7 ms gap would want 8.75 ms: the most is 8 ms.
        p.handle(ms(40), Event::LcIdle { edge: ms(40) });
        let from = ms(40) - us(5937) - Duration::from_nanos(500);
        let a = p.handle(ms(41), Event::LcBusy { edge: from + ms(7) });
        assert_eq!(armed_idle(&a), Some(ms(8)), "{a:?}");
    }

    #[test]
    fn gaps_are_measured_on_the_kernels_clock() {
        let mut p = setup(PolicyConfig {
            idle_hysteresis_max: ms(8),
            ..cfg()
        });
        p.handle(ms(10), Event::LcBusy { edge: ms(10) });
        p.handle(ms(10), Event::PreemptDone { retry_after: None });
        // The SAMPLE confirmed idleness at 16 ms (LC idle since 15 ms);
        // the daemon got round to it only at 19 ms. LC is back at 18 ms:
        // a 3 ms gap, although the daemon saw it busy again before it had
        // even heard of the idleness.
        p.handle(ms(19), Event::LcIdle { edge: ms(16) });
        let a = p.handle(ms(19), Event::LcBusy { edge: ms(18) });
        assert_eq!(armed_idle(&a), Some(us(3750)), "{a:?}");
    }

    #[test]
    fn long_gaps_bring_the_hysteresis_back_down() {
        let mut p = setup(PolicyConfig {
            idle_hysteresis_max: ms(9),
            ..cfg()
        });
        burst(&mut p, ms(10), ms(16));
        // A 7.2 ms gap: 9 ms.
        let a = p.handle(
            ms(22) + us(200),
            Event::LcBusy {
                edge: ms(22) + us(200),
            },
        );
        assert_eq!(armed_idle(&a), Some(ms(9)), "{a:?}");
        p.handle(ms(23), Event::PreemptDone { retry_after: None });
        p.handle(ms(40), Event::LcIdle { edge: ms(40) });
        // Gaps longer than the most: each takes an eighth of the excess
        // over the configured 1 ms off.
        let mut want = ms(9);
        let mut t = ms(100);
        for _ in 0..20 {
            want = us(1000) + (want - us(1000)) * 7 / 8;
            let a = p.handle(t, Event::LcBusy { edge: t });
            assert_eq!(armed_idle(&a), Some(want), "{a:?}");
            p.handle(t, Event::PreemptDone { retry_after: None });
            p.handle(t + ms(5), Event::LcIdle { edge: t + ms(5) });
            t += ms(100);
        }
        assert_eq!(p.idle_hysteresis(), want);
        assert!(want < ms(2), "{want:?}");
    }

    #[test]
    fn hysteresis_value_comes_from_the_configuration() {
        let mut p = setup(PolicyConfig {
            idle_hysteresis: us(2500),
            sample_period: us(20),
            ..cfg()
        });
        let a = p.handle(ms(1), Event::LcBusy { edge: ms(1) });
        assert!(a.contains(&Action::ArmAllIdle {
            period: us(20),
            idle: us(2500)
        }));
    }

    /// Drives a policy with LC busy all the time over `periods` windows,
    /// acknowledging every preemption at once; returns BE's run time per
    /// window (from the actions, not the policy's own accounting).
    fn run_always_busy(cfg: PolicyConfig, periods: u64) -> (Policy, Vec<Duration>) {
        let mut p = setup(cfg);
        let period = cfg.min_share_period;
        let end = period * periods as u32;
        let mut running = true; // BE runs until preempted
        let mut since = Duration::ZERO;
        let mut per_period = vec![Duration::ZERO; periods as usize];
        let credit = |from: Duration, to: Duration, per: &mut Vec<Duration>| {
            let mut t = from;
            while t < to {
                let i = (t.as_nanos() / period.as_nanos()) as usize;
                let boundary = period * (i as u32 + 1);
                let upto = to.min(boundary);
                if i < per.len() {
                    per[i] += upto - t;
                }
                t = upto;
            }
        };
        let mut now = ms(1);
        let mut actions = p.handle(now, Event::LcBusy { edge: now });
        loop {
            for a in actions.clone() {
                match a {
                    Action::PreemptLower { .. } => {
                        assert!(running, "preempted twice");
                        credit(since, now, &mut per_period);
                        running = false;
                        let more = p.handle(now, Event::PreemptDone { retry_after: None });
                        assert!(more.is_empty(), "{more:?}");
                    }
                    Action::ResumeLower { reason } => {
                        assert_eq!(reason, ResumeReason::MinShare);
                        assert!(!running, "resumed twice");
                        since = now;
                        running = true;
                    }
                    _ => {}
                }
            }
            let next = p.next_deadline(now);
            assert!(next > now, "deadline {next:?} not after {now:?}");
            if next >= end {
                break;
            }
            now = next;
            actions = p.handle(now, Event::Tick);
        }
        if running {
            credit(since, end, &mut per_period);
        }
        (p, per_period)
    }

    #[test]
    fn minimum_share_holds_over_ten_periods_with_lc_always_busy() {
        let (p, per) = run_always_busy(cfg(), 10);
        for (i, run) in per.iter().enumerate() {
            assert!(*run >= ms(100), "period {i}: BE ran only {run:?}");
            // ... and not much more: LC keeps the rest.
            assert!(*run <= ms(101), "period {i}: BE ran {run:?}");
        }
        assert_eq!(p.counters().forced_resumes, 10);
        // One LcBusy preemption, then one after each of the 9 windows.
        assert_eq!(p.counters().preemptions, 10);
        assert_eq!(p.latency().count, 1, "only the LcBusy edge is a reaction");
    }

    #[test]
    fn zero_budget_means_no_forced_resume() {
        let (p, per) = run_always_busy(
            PolicyConfig {
                min_share_budget: Duration::ZERO,
                ..cfg()
            },
            10,
        );
        assert_eq!(p.counters().forced_resumes, 0);
        assert_eq!(per[0], ms(1));
        assert!(per[1..].iter().all(|r| r.is_zero()), "{per:?}");
    }

    #[test]
    fn busy_edge_too_late_in_the_window_does_not_preempt() {
        let mut p = setup(cfg());
        // BE held from 1 ms to 960 ms: it has run 1 ms of its 100 ms.
        p.handle(ms(1), Event::LcBusy { edge: ms(1) });
        p.handle(ms(1), Event::PreemptDone { retry_after: None });
        let a = p.handle(ms(901), Event::Tick);
        assert_eq!(
            a,
            vec![Action::ResumeLower {
                reason: ResumeReason::MinShare
            }]
        );
        p.handle(ms(950), Event::LcIdle { edge: ms(950) });
        // A new edge at 960 ms: BE has run 1 + 59 ms, so it still misses
        // 40 ms of its budget, and only 40 ms are left: no preemption.
        let a = p.handle(ms(960), Event::LcBusy { edge: ms(960) });
        assert!(!has_preempt(&a), "{a:?}");
        assert!(a.contains(&Action::ArmAllIdle {
            period: us(50),
            idle: us(1000)
        }));
        // When the window ends, LC still busy: preempt again.
        let a = p.handle(ms(1000), Event::Tick);
        assert_eq!(
            a,
            vec![Action::PreemptLower {
                lease: ms(200),
                reason: PreemptReason::MinShare
            }]
        );
    }

    #[test]
    fn lease_is_renewed_at_half_while_held_and_never_when_not() {
        let mut p = setup(PolicyConfig {
            min_share_budget: Duration::ZERO,
            ..cfg()
        });
        // Not held: no renewals, whatever the time.
        for t in (0..1000).step_by(10).map(ms) {
            let a = p.handle(t, Event::Tick);
            assert!(!has_renew(&a), "{a:?}");
        }
        p.handle(ms(1000), Event::LcBusy { edge: ms(1000) });
        p.handle(ms(1000), Event::PreemptDone { retry_after: None });
        assert_eq!(p.next_deadline(ms(1000)), ms(1100));
        let mut renewals = Vec::new();
        let mut now = ms(1000);
        while now < ms(1500) {
            now = p.next_deadline(now);
            for a in p.handle(now, Event::Tick) {
                if let Action::RenewLease { lease, reason } = a {
                    assert_eq!((lease, reason), (ms(200), RenewReason::Lease));
                    renewals.push(now);
                }
            }
        }
        assert_eq!(
            renewals,
            vec![ms(1100), ms(1200), ms(1300), ms(1400), ms(1500)]
        );
        assert_eq!(p.counters().renewals, 5);
        p.handle(ms(1510), Event::LcIdle { edge: ms(1510) });
        for t in (1511..2500).step_by(7).map(ms) {
            let a = p.handle(t, Event::Tick);
            assert!(!has_renew(&a), "renewed while not held at {t:?}: {a:?}");
        }
        assert!(p.next_deadline(ms(2500)) >= ms(3000), "no renewal deadline");
    }

    #[test]
    fn two_lc_tenants_are_one_set() {
        let mut p = setup(cfg());
        p.handle(
            ms(1),
            Event::TenantAdded {
                pid: LC2,
                role: Role::Watched,
            },
        );
        // A new LC queue is watched: re-arm so the kernel includes it.
        let a = p.handle(
            ms(1),
            Event::TenantQueues {
                pid: LC2,
                queues: 1,
            },
        );
        assert_eq!(a, vec![Action::ArmAnyBusy { period: us(50) }]);
        // Either one busy (the kernel's ANY_BUSY over all watched queues).
        let a = p.handle(ms(5), Event::LcBusy { edge: ms(5) });
        assert!(has_preempt(&a));
        p.handle(ms(5), Event::PreemptDone { retry_after: None });
        // The first LC tenant leaves while the second is still busy: no
        // resume, the ALL_IDLE arm goes on over the queues left.
        let a = p.handle(ms(20), Event::TenantGone { pid: LC });
        assert!(!has_resume(&a), "{a:?}");
        assert!(p.is_held());
        // A burst in a single one while busy changes nothing.
        assert!(p.handle(ms(30), Event::LcBusy { edge: ms(30) }).is_empty());
        // Only ALL_IDLE (both idle) resumes.
        let a = p.handle(ms(40), Event::LcIdle { edge: ms(40) });
        assert!(has_resume(&a));
        assert!(a.contains(&Action::ArmAnyBusy { period: us(50) }));
    }

    #[test]
    fn be_tenant_exiting_while_held_needs_no_resume() {
        let mut p = setup(cfg());
        p.handle(ms(5), Event::LcBusy { edge: ms(5) });
        p.handle(ms(5), Event::PreemptDone { retry_after: None });
        let a = p.handle(ms(50), Event::TenantGone { pid: BE });
        assert!(a.is_empty(), "{a:?}");
        assert!(!p.is_held());
        assert_eq!(p.counters().resumes, 0);
        assert_eq!(p.held_total(ms(60)), ms(45));
        // LC going idle later has nothing to resume either.
        let a = p.handle(ms(60), Event::LcIdle { edge: ms(60) });
        assert_eq!(a, vec![Action::ArmAnyBusy { period: us(50) }]);
        assert_eq!(p.counters().resumes, 0);
    }

    #[test]
    fn one_of_two_be_tenants_exiting_keeps_the_rest_held() {
        let mut p = setup(cfg());
        p.handle(
            ms(0),
            Event::TenantAdded {
                pid: BE2,
                role: Role::Lower,
            },
        );
        p.handle(
            ms(0),
            Event::TenantQueues {
                pid: BE2,
                queues: 1,
            },
        );
        p.handle(ms(5), Event::LcBusy { edge: ms(5) });
        let a = p.handle(ms(50), Event::TenantGone { pid: BE });
        assert!(a.is_empty(), "{a:?}");
        assert!(p.is_held());
    }

    #[test]
    fn last_lc_tenant_leaving_resumes_be_and_disarms() {
        let mut p = setup(cfg());
        p.handle(ms(5), Event::LcBusy { edge: ms(5) });
        p.handle(ms(5), Event::PreemptDone { retry_after: None });
        let a = p.handle(ms(30), Event::TenantGone { pid: LC });
        assert_eq!(
            a,
            vec![
                Action::ResumeLower {
                    reason: ResumeReason::LcGone
                },
                Action::Disarm
            ]
        );
        assert_eq!(p.mode(), Mode::NoLc);
        assert!(!p.is_held());
    }

    #[test]
    fn new_be_queues_while_held_are_taken_off_by_a_renewal() {
        let mut p = setup(cfg());
        p.handle(ms(5), Event::LcBusy { edge: ms(5) });
        p.handle(
            ms(6),
            Event::TenantAdded {
                pid: BE2,
                role: Role::Lower,
            },
        );
        let a = p.handle(
            ms(6),
            Event::TenantQueues {
                pid: BE2,
                queues: 2,
            },
        );
        assert_eq!(
            a,
            vec![Action::RenewLease {
                lease: ms(200),
                reason: RenewReason::NewQueues
            }]
        );
    }

    #[test]
    fn be_appearing_while_lc_busy_is_preempted() {
        let mut p = Policy::new(cfg(), Duration::ZERO);
        p.handle(
            ms(0),
            Event::TenantAdded {
                pid: LC,
                role: Role::Watched,
            },
        );
        p.handle(ms(0), Event::TenantQueues { pid: LC, queues: 1 });
        // No BE queue: nothing to preempt, but LC is tracked as busy.
        let a = p.handle(ms(2), Event::LcBusy { edge: ms(2) });
        assert!(!has_preempt(&a));
        assert_eq!(p.mode(), Mode::LcBusy);
        p.handle(
            ms(3),
            Event::TenantAdded {
                pid: BE,
                role: Role::Lower,
            },
        );
        let a = p.handle(ms(3), Event::TenantQueues { pid: BE, queues: 2 });
        assert_eq!(
            a,
            vec![Action::PreemptLower {
                lease: ms(200),
                reason: PreemptReason::NewQueues
            }]
        );
        // Not a reaction to the edge at 2 ms: no latency recorded.
        p.handle(ms(3), Event::PreemptDone { retry_after: None });
        assert_eq!(p.latency().count, 0);
        assert_eq!(p.counters().preemptions, 1);
    }

    #[test]
    fn failed_preemption_is_retried_after_the_delay_while_wanted() {
        let mut p = setup(cfg());
        p.handle(ms(5), Event::LcBusy { edge: ms(5) });
        let a = p.handle(ms(5), Event::PreemptFailed { retry_after: ms(1) });
        assert!(a.is_empty());
        assert!(!p.is_held());
        assert_eq!(p.counters().preempt_failures, 1);
        assert_eq!(p.next_deadline(ms(5)), ms(6));
        assert!(p.handle(ms(5) + us(500), Event::Tick).is_empty());
        let a = p.handle(ms(6), Event::Tick);
        assert_eq!(
            a,
            vec![Action::PreemptLower {
                lease: ms(200),
                reason: PreemptReason::Retry
            }]
        );
        // The latency runs from the original edge.
        p.handle(ms(6), Event::PreemptDone { retry_after: None });
        assert_eq!(p.latency().max_us, 1000);
        // A failure after which LC goes idle is not retried.
        let mut p = setup(cfg());
        p.handle(ms(5), Event::LcBusy { edge: ms(5) });
        p.handle(ms(5), Event::PreemptFailed { retry_after: ms(1) });
        p.handle(ms(5), Event::LcIdle { edge: ms(5) });
        assert!(!has_preempt(&p.handle(ms(10), Event::Tick)));
    }

    #[test]
    fn a_retry_blocked_by_the_minimum_share_does_not_spin() {
        let mut p = setup(cfg());
        p.handle(ms(1), Event::LcBusy { edge: ms(1) });
        // The failure comes back late (a PREEMPT that took 949 ms): by the
        // retry, BE misses 99 ms of its budget with 49 ms left, so the
        // retry must wait for the window's end instead of staying due.
        p.handle(ms(950), Event::PreemptFailed { retry_after: ms(1) });
        let mut now = ms(951);
        let a = p.handle(now, Event::Tick);
        assert!(!has_preempt(&a), "{a:?}");
        let mut preempted_at = None;
        for _ in 0..10 {
            let next = p.next_deadline(now);
            assert!(next > now, "deadline {next:?} not after {now:?}");
            now = next;
            if has_preempt(&p.handle(now, Event::Tick)) && preempted_at.is_none() {
                preempted_at = Some(now);
            }
        }
        assert_eq!(preempted_at, Some(ms(1000)));
    }

    #[test]
    fn partial_rate_limit_brings_the_renewal_forward() {
        let mut p = setup(cfg());
        p.handle(ms(5), Event::LcBusy { edge: ms(5) });
        p.handle(
            ms(5),
            Event::PreemptDone {
                retry_after: Some(ms(1)),
            },
        );
        assert_eq!(p.next_deadline(ms(5)), ms(6));
        let a = p.handle(ms(6), Event::Tick);
        assert_eq!(
            a,
            vec![Action::RenewLease {
                lease: ms(200),
                reason: RenewReason::Retry
            }]
        );
        assert_eq!(p.next_deadline(ms(6)), ms(106));
        // A renewal refused in part is retried the same way.
        p.handle(ms(7), Event::RenewRefused { retry_after: ms(2) });
        assert_eq!(p.next_deadline(ms(7)), ms(9));
        assert!(has_renew(&p.handle(ms(9), Event::Tick)));
        // ... and not at all once nothing is held.
        p.handle(ms(10), Event::LcIdle { edge: ms(10) });
        p.handle(ms(10), Event::RenewRefused { retry_after: ms(1) });
        assert!(!has_renew(&p.handle(ms(11), Event::Tick)));
    }

    #[test]
    fn shutdown_resumes_what_is_held() {
        let mut p = setup(cfg());
        p.handle(ms(5), Event::LcBusy { edge: ms(5) });
        assert_eq!(
            p.shutdown(ms(9)),
            vec![
                Action::ResumeLower {
                    reason: ResumeReason::Shutdown
                },
                Action::Disarm
            ]
        );
        assert_eq!(p.held_total(ms(20)), ms(4));
        assert!(!p.is_held());
        let mut idle = Policy::new(cfg(), Duration::ZERO);
        assert!(idle.shutdown(ms(1)).is_empty());
    }

    #[test]
    fn histogram_bounds_cover_every_value() {
        assert_eq!(Histogram::bounds(0), (0, Some(2)));
        assert_eq!(Histogram::bounds(5), (32, Some(64)));
        assert_eq!(Histogram::bounds(LATENCY_BUCKETS - 1), (1 << 31, None));
        let mut h = Histogram::default();
        h.record(Duration::from_secs(100_000));
        assert_eq!(h.buckets[LATENCY_BUCKETS - 1], 1);
    }

    /// The connection the LC tenant's hints come on in these tests.
    const CONN: u64 = 1;

    /// A hint from the LC tenant on [`CONN`] at `at`, `within` long.
    fn hint(p: &mut Policy, at: Duration, within: Duration) -> Vec<Action> {
        p.handle(
            at,
            Event::Hint {
                pid: LC,
                conn: CONN,
                until: at + within,
            },
        )
    }

    fn resume_reason(a: &[Action]) -> Option<ResumeReason> {
        a.iter().find_map(|a| match a {
            Action::ResumeLower { reason } => Some(*reason),
            _ => None,
        })
    }

    #[test]
    fn a_hint_takes_the_lower_levels_off_before_any_work() {
        let mut p = setup(cfg());
        let a = hint(&mut p, ms(10), ms(100));
        assert!(
            matches!(
                a.as_slice(),
                [Action::PreemptLower {
                    reason: PreemptReason::Hint,
                    ..
                }]
            ),
            "{a:?}"
        );
        assert!(p.is_held() && p.is_hinted());
        // LC is still idle: ANY_BUSY stays armed to see the work come.
        assert_eq!(p.mode(), Mode::LcIdle);
        p.handle(ms(10), Event::PreemptDone { retry_after: None });
        assert_eq!(p.counters().preemptions, 1);
        // Not a reaction to LC work: the latency histogram is LC's.
        assert_eq!(p.latency().count, 0);
    }

    #[test]
    fn work_after_a_hint_is_held_as_usual() {
        let mut p = setup(cfg());
        hint(&mut p, ms(10), ms(100));
        p.handle(ms(10), Event::PreemptDone { retry_after: None });
        let a = p.handle(ms(12), Event::LcBusy { edge: ms(12) });
        assert!(!has_preempt(&a) && armed_idle(&a).is_some(), "{a:?}");
        assert!(p.is_held() && !p.is_hinted());
        // Past the hint's time the work holds the lower levels.
        let a = p.handle(ms(150), Event::Tick);
        assert!(!has_resume(&a), "{a:?}");
        let a = p.handle(ms(160), Event::LcIdle { edge: ms(160) });
        assert_eq!(resume_reason(&a), Some(ResumeReason::LcIdle));
        assert_eq!(p.counters().hints_expired, 0);
        assert_eq!(p.latency().count, 0);
    }

    #[test]
    fn a_hint_with_no_work_is_over_at_its_time() {
        let mut p = setup(cfg());
        hint(&mut p, ms(10), ms(100));
        p.handle(ms(10), Event::PreemptDone { retry_after: None });
        assert_eq!(p.next_deadline(ms(20)), ms(110));
        let a = p.handle(ms(109), Event::Tick);
        assert!(!has_resume(&a), "{a:?}");
        let a = p.handle(ms(110), Event::Tick);
        assert_eq!(resume_reason(&a), Some(ResumeReason::HintOver));
        assert!(!p.is_held() && !p.is_hinted());
        assert_eq!(p.counters().hints_expired, 1);
    }

    #[test]
    fn a_hint_ended_by_its_tenant_resumes_at_once() {
        let mut p = setup(cfg());
        hint(&mut p, ms(10), ms(100));
        p.handle(ms(10), Event::PreemptDone { retry_after: None });
        let a = p.handle(ms(30), Event::HintEnd { conn: CONN });
        assert_eq!(resume_reason(&a), Some(ResumeReason::HintOver));
        assert_eq!(p.counters().hints_expired, 0);
        // Ending it again changes nothing.
        assert!(p.handle(ms(31), Event::HintEnd { conn: CONN }).is_empty());
    }

    #[test]
    fn each_connection_of_a_tenant_has_a_hint_of_its_own() {
        let mut p = setup(cfg());
        hint(&mut p, ms(10), ms(100));
        p.handle(ms(10), Event::PreemptDone { retry_after: None });
        // The same tenant on a second connection (another thread of it).
        let a = p.handle(
            ms(20),
            Event::Hint {
                pid: LC,
                conn: CONN + 1,
                until: ms(50),
            },
        );
        assert!(a.is_empty(), "{a:?}");
        // The second ending its hint leaves the first's.
        let a = p.handle(ms(30), Event::HintEnd { conn: CONN + 1 });
        assert!(a.is_empty(), "{a:?}");
        assert!(p.is_held() && p.is_hinted());
        let a = p.handle(ms(40), Event::HintEnd { conn: CONN });
        assert_eq!(resume_reason(&a), Some(ResumeReason::HintOver));
    }

    #[test]
    fn a_tenant_gone_takes_its_hints_with_it() {
        let mut p = setup(cfg());
        // Another LC tenant keeps the level on the node.
        p.handle(
            ms(0),
            Event::TenantAdded {
                pid: LC2,
                role: Role::Watched,
            },
        );
        p.handle(
            ms(0),
            Event::TenantQueues {
                pid: LC2,
                queues: 1,
            },
        );
        hint(&mut p, ms(10), ms(500));
        p.handle(
            ms(10),
            Event::Hint {
                pid: LC,
                conn: CONN + 1,
                until: ms(500),
            },
        );
        p.handle(ms(10), Event::PreemptDone { retry_after: None });
        let a = p.handle(ms(20), Event::TenantGone { pid: LC });
        assert_eq!(resume_reason(&a), Some(ResumeReason::HintOver));
        assert!(!p.is_held() && !p.is_hinted());
        assert_eq!(p.counters().hints_expired, 0);
    }

    #[test]
    fn the_lower_levels_stay_off_until_the_last_hint_is_over() {
        let mut p = setup(cfg());
        p.handle(
            ms(0),
            Event::TenantAdded {
                pid: LC2,
                role: Role::Watched,
            },
        );
        p.handle(
            ms(0),
            Event::TenantQueues {
                pid: LC2,
                queues: 1,
            },
        );
        hint(&mut p, ms(10), ms(100));
        p.handle(ms(10), Event::PreemptDone { retry_after: None });
        let a = p.handle(
            ms(20),
            Event::Hint {
                pid: LC2,
                conn: CONN + 1,
                until: ms(300),
            },
        );
        assert!(a.is_empty(), "{a:?}");
        let a = p.handle(ms(30), Event::HintEnd { conn: CONN });
        assert!(a.is_empty(), "{a:?}");
        // The lease is renewed at its half meanwhile, and LC2's hint is
        // over at its time.
        let a = p.handle(ms(110), Event::Tick);
        assert!(has_renew(&a) && !has_resume(&a), "{a:?}");
        let a = p.handle(ms(300), Event::Tick);
        assert_eq!(resume_reason(&a), Some(ResumeReason::HintOver));
        assert_eq!(p.counters().hints_expired, 1);
    }

    #[test]
    fn a_hint_given_while_lc_is_busy_keeps_the_lower_levels_off_for_the_work_after() {
        let mut p = setup(cfg());
        p.handle(ms(5), Event::LcBusy { edge: ms(5) });
        p.handle(ms(5), Event::PreemptDone { retry_after: None });
        // The next request's hint, while this one runs.
        assert!(hint(&mut p, ms(10), ms(100)).is_empty());
        assert!(p.is_hinted());
        // LC idle: the hint holds the lower levels for the work it said.
        let a = p.handle(ms(20), Event::LcIdle { edge: ms(20) });
        assert!(!has_resume(&a), "{a:?}");
        assert!(p.is_held());
        // That work spends it; its own idle edge resumes.
        let a = p.handle(ms(30), Event::LcBusy { edge: ms(30) });
        assert!(!has_preempt(&a) && !p.is_hinted(), "{a:?}");
        let a = p.handle(ms(40), Event::LcIdle { edge: ms(40) });
        assert_eq!(resume_reason(&a), Some(ResumeReason::LcIdle));
        assert_eq!(p.counters().hints_expired, 0);
    }

    #[test]
    fn a_hint_given_while_lc_is_busy_is_spent_by_work_published_before_lc_went_idle() {
        let mut p = setup(cfg());
        p.handle(ms(5), Event::Published { total: 10 });
        p.handle(ms(5), Event::LcBusy { edge: ms(5) });
        p.handle(ms(5), Event::PreemptDone { retry_after: None });
        assert!(hint(&mut p, ms(10), ms(100)).is_empty());
        // The hinted request's packet came while the one before still
        // ran: no busy edge of its own, but one more packet published.
        p.handle(ms(20), Event::Published { total: 11 });
        let a = p.handle(ms(20), Event::LcIdle { edge: ms(20) });
        assert_eq!(resume_reason(&a), Some(ResumeReason::LcIdle));
        assert!(!p.is_held() && !p.is_hinted());
        assert_eq!(p.counters().hints_expired, 0);
    }

    #[test]
    fn a_hint_given_while_lc_is_busy_outlives_an_idle_edge_with_nothing_new_published() {
        let mut p = setup(cfg());
        p.handle(ms(5), Event::Published { total: 10 });
        p.handle(ms(5), Event::LcBusy { edge: ms(5) });
        p.handle(ms(5), Event::PreemptDone { retry_after: None });
        hint(&mut p, ms(10), ms(100));
        p.handle(ms(20), Event::Published { total: 10 });
        let a = p.handle(ms(20), Event::LcIdle { edge: ms(20) });
        assert!(!has_resume(&a), "{a:?}");
        assert!(p.is_held() && p.is_hinted());
    }

    #[test]
    fn a_count_of_packets_published_leads_to_no_action() {
        let mut p = setup(cfg());
        hint(&mut p, ms(10), ms(100));
        p.handle(ms(10), Event::PreemptDone { retry_after: None });
        // The hint's time and the lease's half are both past: the edge that
        // follows the count brings them in line, not the count.
        let a = p.handle(ms(600), Event::Published { total: 3 });
        assert!(a.is_empty(), "{a:?}");
        assert!(p.is_held() && p.is_hinted());
    }

    #[test]
    fn a_busy_edge_spends_only_the_hints_given_before_it() {
        let mut p = setup(cfg());
        hint(&mut p, ms(10), ms(100));
        p.handle(ms(10), Event::PreemptDone { retry_after: None });
        // The daemon heard of the edge at 12 ms after a hint given at 13.
        hint(&mut p, ms(13), ms(100));
        p.handle(ms(14), Event::LcBusy { edge: ms(12) });
        assert!(p.is_hinted());
    }

    #[test]
    fn a_hint_changes_nothing_while_lc_has_no_queue() {
        let mut p = Policy::new(cfg(), ms(0));
        p.handle(
            ms(0),
            Event::TenantAdded {
                pid: BE,
                role: Role::Lower,
            },
        );
        p.handle(ms(0), Event::TenantQueues { pid: BE, queues: 4 });
        assert!(hint(&mut p, ms(10), ms(100)).is_empty());
        assert!(!p.is_held() && !p.is_hinted());
    }

    #[test]
    fn a_hint_obeys_the_minimum_share() {
        let mut p = setup(cfg());
        // Held from 0 to 950 ms: 50 ms of the 100 ms budget would be
        // missing with 50 ms left, so a preemption is not made.
        p.handle(ms(0), Event::LcBusy { edge: ms(0) });
        p.handle(ms(0), Event::PreemptDone { retry_after: None });
        let a = p.handle(ms(900), Event::Tick);
        assert_eq!(resume_reason(&a), Some(ResumeReason::MinShare));
        p.handle(ms(910), Event::LcIdle { edge: ms(910) });
        let a = hint(&mut p, ms(920), ms(50));
        assert!(!has_preempt(&a), "{a:?}");
    }
}
