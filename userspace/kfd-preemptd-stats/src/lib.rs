//! The schema of kfd-preemptd's statistics file (`stats.json`): the types
//! the daemon serializes and the tools (`kfd-preempt daemon`,
//! `kfd-preempt doctor`, `kfdp-scenario`) deserialize, so that a field the
//! daemon renames or retypes fails to build its readers rather than show
//! as a dash.
//!
//! The document is versioned ([`STATS_VERSION`]): fields may be added
//! within a version, and a field removed or redefined bumps it. Reading is
//! forgiving for that reason: every struct takes its default for a field
//! that is missing (a file of an older daemon of the same version) and
//! ignores one it does not know (a newer one), and the counters keep the
//! ones they do not know ([`CounterStats::other`]). A value it cannot
//! take (a mode it does not know, a number that is `null`) is an error
//! that names it: the daemon writes neither, and guessing would show
//! something false. A renamed field is read under both names through
//! [`Stats::lower_held_either`] and its kin.
//!
//! ```
//! use kfd_preemptd_stats::{Mode, Stats, STATS_VERSION};
//!
//! let s = Stats::from_json(
//!     r#"{"version": 1, "mode": "lc-busy", "lower_held": true, "a_later_field": 3}"#,
//! )
//! .unwrap();
//! assert_eq!((s.version, s.mode, s.lower_held), (STATS_VERSION, Mode::LcBusy, true));
//! assert!(s.decisions.is_empty());
//! ```

#![deny(missing_docs)]

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The schema version written as `"version"`.
pub const STATS_VERSION: u32 = 1;

/// A decision's state: whether its level has queues on the node, and
/// whether they have work.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// No queue of the level is watched: nothing armed, the lower levels
    /// run.
    #[default]
    NoLc,
    /// The level is idle, armed `ANY_BUSY`.
    LcIdle,
    /// The level is busy, armed `ALL_IDLE`; the lower levels are held
    /// unless their minimum share runs.
    LcBusy,
}

/// A reminder at build time: a new mode must be added to [`Mode::ALL`].
const _: fn(Mode) = |m| match m {
    Mode::NoLc | Mode::LcIdle | Mode::LcBusy => {}
};

impl Mode {
    /// Every mode, least busy first (the metric `mode` has one series
    /// each).
    pub const ALL: [Mode; 3] = [Mode::NoLc, Mode::LcIdle, Mode::LcBusy];

    /// The mode's name, as logs, statistics and metrics write it.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::NoLc => "no-lc",
            Mode::LcIdle => "lc-idle",
            Mode::LcBusy => "lc-busy",
        }
    }
}

/// One tenant.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct TenantStats {
    /// Its pid.
    pub pid: i32,
    /// Its `comm`.
    pub comm: String,
    /// The name of the class rule that matched it.
    pub class: String,
    /// The name of its priority level (`latency-critical` and
    /// `best-effort` with the default levels).
    pub priority: String,
    /// Its rank among the levels: 0 is the lowest.
    pub rank: usize,
    /// Its compute queues on every node; for a level above the lowest,
    /// those watched.
    pub queues: usize,
    /// How many of them are held off the GPU now.
    pub held_queues: usize,
    /// Whether any of its queues is held off the GPU.
    pub held: bool,
    /// The gpu_ids of the nodes it has compute queues on.
    pub nodes: Vec<u32>,
}

/// One decision of one node: the work of the level `level` on the node
/// `gpu_id` preempts every lower level's compute queues on that node.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct DecisionStats {
    /// The KFD node (topology gpu_id).
    pub gpu_id: u32,
    /// The level whose queues are watched.
    pub level: String,
    /// Its rank: 0 is the lowest.
    pub rank: usize,
    /// The watched level's state on this node.
    pub mode: Mode,
    /// Whether this decision holds the lower levels' queues.
    pub held: bool,
    /// Queues watched (of `level` on this node).
    pub watched_queues: usize,
    /// Queues this decision would preempt (lower levels on this node).
    pub lower_queues: usize,
    /// The lower levels' run time in the current minimum-share window, ms
    /// (the metric `lower_run_in_window_seconds`).
    pub lower_run_in_window_ms: f64,
    /// Deprecated: [`lower_run_in_window_ms`](Self::lower_run_in_window_ms)
    /// under its first name, still written for readers of version 1.
    pub be_run_in_period_ms: f64,
    /// The idle hysteresis it arms `ALL_IDLE` with now, µs: the
    /// configured one, or more as learnt from the level's gaps (up to
    /// `idle_hysteresis_max_us`).
    pub idle_hysteresis_us: u64,
    /// Its counters.
    pub counters: CounterStats,
    /// Its reaction latency (busy edge seen by the module to preemption
    /// done).
    pub reaction_latency_us: LatencyStats,
    /// Where its reactions' time went.
    pub reaction_phases: PhaseStats,
}

/// The counters.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct CounterStats {
    /// Preemptions of the lower levels that took effect.
    pub preemptions: u64,
    /// Preemptions that took effect for no queue.
    pub preempt_failures: u64,
    /// Resumes of the lower levels, forced ones included.
    pub resumes: u64,
    /// Resumes forced by the minimum share.
    pub forced_resumes: u64,
    /// Lease renewals.
    pub renewals: u64,
    /// Total time the lower levels were held, ms.
    pub held_total_ms: f64,
    /// Hints that reached their time with no work come.
    pub hints_expired: u64,
    /// Counters of a newer daemon that this schema does not name, as
    /// read; the daemon writes none.
    #[serde(flatten)]
    pub other: BTreeMap<String, serde_json::Value>,
}

/// One non-empty latency bucket: `[low_us, high_us)`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct BucketStats {
    /// Lower bound, µs, inclusive.
    pub low_us: u64,
    /// Upper bound, µs, exclusive; `null` for the last, open bucket.
    pub high_us: Option<u64>,
    /// Latencies in it.
    pub count: u64,
}

/// The reaction-latency histogram (busy edge to preemption done).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct LatencyStats {
    /// Bucket scale: `"log2-us"`, buckets `[2^i, 2^(i+1))` µs (the first
    /// from 0).
    pub scale: String,
    /// Latencies recorded.
    pub count: u64,
    /// Their sum, µs.
    pub sum_us: u64,
    /// The largest, µs.
    pub max_us: u64,
    /// The non-empty buckets, in increasing order.
    pub buckets: Vec<BucketStats>,
}

impl LatencyStats {
    /// The mean latency, µs; `None` if none was recorded.
    pub fn mean_us(&self) -> Option<u64> {
        self.sum_us.checked_div(self.count)
    }
}

/// Where the reactions' time went: means and maxima, µs.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct PhaseStats {
    /// Reactions recorded.
    pub count: u64,
    /// Mean SAMPLE after the wakeup, µs.
    pub sample_us: f64,
    /// Mean SAMPLE to PREEMPT call, µs.
    pub decision_us: f64,
    /// Mean PREEMPT call outside the hardware phase, µs.
    pub ioctl_us: f64,
    /// Mean hardware phase, µs.
    pub node_us: f64,
    /// Longest SAMPLE after the wakeup, µs.
    pub sample_max_us: f64,
    /// Longest SAMPLE to PREEMPT call, µs.
    pub decision_max_us: f64,
    /// Longest PREEMPT call outside the hardware phase, µs.
    pub ioctl_max_us: f64,
    /// Longest hardware phase, µs.
    pub node_max_us: f64,
}

/// The tunables in effect (after the module's limits were applied).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct ConfigStats {
    /// Lease, ms.
    pub lease_ms: u64,
    /// ARM sampling period, µs.
    pub sample_period_us: u64,
    /// Idle hysteresis, µs: the least.
    pub idle_hysteresis_us: u64,
    /// The most the idle hysteresis grows to, µs.
    pub idle_hysteresis_max_us: u64,
    /// Minimum-share window, ms.
    pub min_share_period_ms: u64,
    /// Minimum-share budget, ms.
    pub min_share_budget_ms: u64,
}

/// The whole document. The top-level state and counters sum up every
/// decision (`decisions`): `mode` is the busiest, `lower_held` whether any
/// decision holds queues.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Stats {
    /// [`STATS_VERSION`] of the daemon that wrote it; 0 if missing.
    pub version: u32,
    /// The daemon's pid.
    pub pid: u32,
    /// When the snapshot was taken (the report thread writes it moments
    /// later), ms since the Unix epoch.
    pub written_at_unix_ms: u64,
    /// Seconds since the daemon started.
    pub uptime_s: f64,
    /// The busiest decision's state.
    pub mode: Mode,
    /// Whether any queues are held off the GPU.
    pub lower_held: bool,
    /// Deprecated: [`lower_held`](Self::lower_held) under its first name,
    /// still written for readers of version 1.
    pub be_held: bool,
    /// The least run time of held queues in their current minimum-share
    /// window, ms, over the decisions that hold queues (the window's
    /// length when none does).
    pub lower_run_in_window_ms: f64,
    /// Deprecated: [`lower_run_in_window_ms`](Self::lower_run_in_window_ms)
    /// under its first name, still written for readers of version 1.
    pub be_run_in_period_ms: f64,
    /// The counters, summed over the decisions.
    pub counters: CounterStats,
    /// The reaction-latency histogram, merged over the decisions.
    pub reaction_latency_us: LatencyStats,
    /// Where the reactions' time went, over the decisions.
    pub reaction_phases: PhaseStats,
    /// The attached tenants, by pid.
    pub tenants: Vec<TenantStats>,
    /// The tunables in effect.
    pub config: ConfigStats,
    /// The priority levels, lowest first.
    pub levels: Vec<String>,
    /// One entry per node and watched level, by gpu_id then rank.
    pub decisions: Vec<DecisionStats>,
    /// What became of the hints given on the hint socket.
    pub hints: HintStats,
}

/// The hints tenants gave (`hint_socket`); every count 0 without one.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct HintStats {
    /// Whether the daemon listens for hints.
    pub enabled: bool,
    /// Hints taken (a `begin` answered `ok`).
    pub accepted: u64,
    /// Requests refused, by reason (`not-a-tenant`, `lowest-level`,
    /// `no-queues`, `rate-limited`, `malformed`).
    pub refused: BTreeMap<String, u64>,
    /// Hints their tenant ended (`end`, or closing the connection).
    pub ended: u64,
    /// Connections open now.
    pub connections: u64,
}

impl Stats {
    /// [`lower_held`](Self::lower_held) of a file written under either
    /// name: a daemon from before the rename wrote only `be_held`.
    pub fn lower_held_either(&self) -> bool {
        self.lower_held || self.be_held
    }

    /// [`lower_run_in_window_ms`](Self::lower_run_in_window_ms) of a file
    /// written under either name (the other is then 0).
    pub fn lower_run_in_window_ms_either(&self) -> f64 {
        self.lower_run_in_window_ms.max(self.be_run_in_period_ms)
    }

    /// Reads a statistics document. Unlike `serde_json::from_str`, which
    /// takes a struct from an array too, it refuses anything but an object.
    pub fn from_json(text: &str) -> serde_json::Result<Stats> {
        if !text.trim_start().starts_with('{') {
            return Err(serde::de::Error::custom("not a JSON object"));
        }
        serde_json::from_str(text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_document_reads_back_as_written() {
        let s = Stats {
            version: STATS_VERSION,
            pid: 7,
            mode: Mode::LcIdle,
            lower_held: true,
            be_held: true,
            decisions: vec![DecisionStats {
                gpu_id: 3,
                level: "latency-critical".into(),
                lower_run_in_window_ms: 2.5,
                be_run_in_period_ms: 2.5,
                reaction_latency_us: LatencyStats {
                    scale: "log2-us".into(),
                    count: 1,
                    sum_us: 9,
                    max_us: 9,
                    buckets: vec![BucketStats {
                        low_us: 8,
                        high_us: Some(16),
                        count: 1,
                    }],
                },
                ..Default::default()
            }],
            ..Default::default()
        };
        let text = serde_json::to_string(&s).unwrap();
        assert_eq!(serde_json::from_str::<Stats>(&text).unwrap(), s);
        // Both names of a renamed field are written, and a file with only
        // the first is read the same.
        let old: Stats =
            Stats::from_json(r#"{"be_held": true, "be_run_in_period_ms": 4.5}"#).unwrap();
        assert!(old.lower_held_either() && !old.lower_held);
        assert_eq!(old.lower_run_in_window_ms_either(), 4.5);
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["be_held"], true);
        assert_eq!(v["decisions"][0]["lower_run_in_window_ms"], 2.5);
        assert_eq!(v["decisions"][0]["be_run_in_period_ms"], 2.5);
        // The counters write no `other` key of their own.
        assert!(v["counters"].get("other").is_none());
    }

    #[test]
    fn missing_fields_default_and_unknown_counters_are_kept() {
        let s: Stats = serde_json::from_str(
            r#"{"counters": {"preemptions": 2, "future_counter": 7},
                "tenants": [{"pid": 5}], "decisions": [{"gpu_id": 9, "mode": "lc-busy"}]}"#,
        )
        .unwrap();
        assert_eq!(s.version, 0);
        assert_eq!(s.counters.preemptions, 2);
        assert_eq!(s.counters.other["future_counter"], 7);
        assert_eq!(s.tenants[0].pid, 5);
        assert!(s.tenants[0].nodes.is_empty());
        assert_eq!(s.decisions[0].mode, Mode::LcBusy);
        assert_eq!(s.decisions[0].reaction_latency_us.mean_us(), None);
        assert!(Stats::from_json("[1]").is_err());
        assert_eq!(Stats::from_json(" {}").unwrap(), Stats::default());
        // A wrong type is an error, not a default.
        assert!(serde_json::from_str::<Stats>(r#"{"pid": "x"}"#).is_err());
        assert!(serde_json::from_str::<Stats>(r#"{"mode": "asleep"}"#).is_err());
    }
}
