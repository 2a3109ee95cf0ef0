//! The optional Prometheus endpoint: the statistics ([`Stats`]) in the
//! text exposition format 0.0.4, encoded by the `prometheus-client` crate
//! and served over HTTP by a thread of its own ([`server`]) on a loopback
//! TCP address or a Unix socket ([`MetricsAddr`]).
//!
//! The daemon renders its statistics ([`render`]) each time it writes them
//! and hands the text to the server ([`MetricsServer::publish`]); a scrape
//! gets the latest text. A client can make the server thread wait (for at
//! most [`IO_TIMEOUT`] per read or write, [`REQUEST_DEADLINE`] per
//! request), never the daemon's main loop: `publish` only swaps a string.
//!
//! ```
//! use kfd_preemptd::metrics::MetricsAddr;
//!
//! let tcp: MetricsAddr = "127.0.0.1:9477".parse().unwrap();
//! assert_eq!(tcp, MetricsAddr::Tcp("127.0.0.1:9477".parse().unwrap()));
//! let unix: MetricsAddr = "unix:/run/kfd-preemptd/metrics.sock".parse().unwrap();
//! assert_eq!(unix.to_string(), "unix:/run/kfd-preemptd/metrics.sock");
//! // No authentication, so loopback only.
//! assert!("0.0.0.0:9477".parse::<MetricsAddr>().is_err());
//!
//! // As the `metrics` key of a configuration.
//! #[derive(Debug, serde::Deserialize)]
//! struct Daemon {
//!     metrics: Option<MetricsAddr>,
//! }
//! let d: Daemon = toml::from_str(r#"metrics = "[::1]:9477""#).unwrap();
//! assert_eq!(d.metrics, Some(MetricsAddr::Tcp("[::1]:9477".parse().unwrap())));
//! let e = toml::from_str::<Daemon>(r#"metrics = "192.168.1.2:9477""#).unwrap_err();
//! assert!(e.to_string().contains("not a loopback address"));
//! ```

use std::{collections::HashSet, fmt};

use kfd_preempt::hint::Refusal;

use prometheus_client::{
    collector::Collector,
    encoding::{prometheus_text, DescriptorEncoder, EncodeMetric, MetricEncoder},
    metrics::{counter::ConstCounter, gauge::ConstGauge, MetricType},
    registry::Registry,
};

pub use crate::config::MetricsAddr;
use crate::{
    policy::{Mode, LATENCY_BUCKETS},
    stats::{CounterStats, DecisionStats, LatencyStats, Stats, TenantStats},
};

pub mod server;

pub use server::{MetricsServer, CONTENT_TYPE, IO_TIMEOUT, REQUEST_DEADLINE, RESPONSE_DEADLINE};

/// The prefix of every family, `kfd_preemptd_` once joined.
const PREFIX: &str = "kfd_preemptd";

/// A gauge of one sample per decision: its name, its help, and how its
/// value is read.
type GaugeField = (&'static str, &'static str, fn(&DecisionStats) -> f64);

/// A counter of one sample per decision; the encoder appends `_total` to
/// the name.
type CounterField = (&'static str, &'static str, fn(&CounterStats) -> f64);

const DECISION_GAUGES: [GaugeField; 5] = [
    (
        "held",
        "1 while the decision holds the lower levels' queues off the GPU, else 0.",
        |d| f64::from(u8::from(d.held)),
    ),
    (
        "watched_queues",
        "Compute queues of the level watched on the node.",
        |d| d.watched_queues as f64,
    ),
    (
        "lower_queues",
        "Compute queues of lower levels on the node, which the decision preempts.",
        |d| d.lower_queues as f64,
    ),
    (
        "lower_run_in_window_seconds",
        "Run time of the lower levels in the current minimum-share window, seconds.",
        |d| d.lower_run_in_window_ms / 1e3,
    ),
    (
        "idle_hysteresis_seconds",
        "The idle time the decision waits for before resuming the lower levels, as learnt from the level's gaps, seconds.",
        |d| d.idle_hysteresis_us as f64 / 1e6,
    ),
];

const DECISION_COUNTERS: [CounterField; 7] = [
    (
        "preemptions",
        "Preemptions of the lower levels that took effect.",
        |c| c.preemptions as f64,
    ),
    (
        "preempt_failures",
        "Preemptions that took effect for no queue.",
        |c| c.preempt_failures as f64,
    ),
    (
        "resumes",
        "Resumes of the lower levels, forced ones included.",
        |c| c.resumes as f64,
    ),
    (
        "forced_resumes",
        "Resumes forced by the minimum share while the level was busy.",
        |c| c.forced_resumes as f64,
    ),
    ("lease_renewals", "Renewals of the preemption lease.", |c| {
        c.renewals as f64
    }),
    (
        "held_seconds",
        "Time the lower levels' queues were held off the GPU, seconds.",
        |c| c.held_total_ms / 1e3,
    ),
    (
        "hints_expired",
        "Hints of the level on the node that reached their time with no work come.",
        |c| c.hints_expired as f64,
    ),
];

/// One statistics snapshot as a `prometheus-client` collector: the
/// daemon's figures are kept by the policy and taken as a whole, so the
/// families are written from the snapshot ("const" metrics) rather than
/// kept in the crate's own atomics.
#[derive(Debug)]
struct Snapshot(Stats);

/// A decision's labels, `gpu_id` and `level`.
struct DecisionRow<'a> {
    stats: &'a DecisionStats,
    gpu: String,
}

impl DecisionRow<'_> {
    fn labels(&self) -> [(&str, &str); 2] {
        [("gpu_id", &self.gpu), ("level", &self.stats.level)]
    }
}

/// A tenant's labels, `pid`, `comm`, `class` and `priority`.
struct TenantRow<'a> {
    stats: &'a TenantStats,
    pid: String,
    rank: String,
}

impl TenantRow<'_> {
    fn labels(&self) -> [(&str, &str); 4] {
        let t = self.stats;
        [
            ("pid", &self.pid),
            ("comm", &t.comm),
            ("class", &t.class),
            ("priority", &t.priority),
        ]
    }
}

/// A gauge family: its descriptor, then one sample per `(labels, value)`.
fn gauge_family<'a, L: prometheus_client::encoding::EncodeLabelSet + 'a>(
    e: &mut DescriptorEncoder<'_>,
    name: &str,
    help: &str,
    samples: impl IntoIterator<Item = (L, f64)>,
) -> fmt::Result {
    let mut family = e.encode_descriptor(name, help, None, MetricType::Gauge)?;
    for (labels, value) in samples {
        gauge_value(family.encode_family(&labels)?, value)?;
    }
    Ok(())
}

/// One gauge sample: a whole number as an integer, anything else as a
/// float.
fn gauge_value(sample: MetricEncoder<'_>, value: f64) -> fmt::Result {
    match as_integer(value) {
        Some(n) => ConstGauge::new(n).encode(sample),
        None => ConstGauge::new(value).encode(sample),
    }
}

/// One counter sample, as [`gauge_value`] writes a gauge's.
fn counter_value(sample: MetricEncoder<'_>, value: f64) -> fmt::Result {
    match as_integer(value) {
        Some(n) => ConstCounter::new(n).encode(sample),
        None => ConstCounter::new(value).encode(sample),
    }
}

/// `v` if it is a whole number a `u64` holds: counts and flags are
/// written as integers (`5`, not `5.0`).
fn as_integer(v: f64) -> Option<u64> {
    (v.fract() == 0.0 && (0.0..u64::MAX as f64).contains(&v)).then_some(v as u64)
}

/// A gauge of one sample without labels.
fn single_gauge(e: &mut DescriptorEncoder<'_>, name: &str, help: &str, value: f64) -> fmt::Result {
    gauge_value(
        e.encode_descriptor(name, help, None, MetricType::Gauge)?,
        value,
    )
}

/// The histogram's buckets for the encoder, which sums them up: the count
/// of each finite bucket at its upper bound in seconds, and what is left
/// of the count at `+Inf` (so that `+Inf` always equals `_count`).
fn histogram_buckets(h: &LatencyStats) -> Vec<(f64, u64)> {
    let mut out: Vec<(f64, u64)> = (0..LATENCY_BUCKETS)
        .filter_map(|i| crate::policy::Histogram::bounds(i).1)
        .map(|high| {
            let n = h
                .buckets
                .iter()
                .filter(|b| b.high_us == Some(high))
                .map(|b| b.count)
                .sum();
            (high as f64 / 1e6, n)
        })
        .collect();
    let finite: u64 = out.iter().map(|b| b.1).sum();
    out.push((f64::INFINITY, h.count.saturating_sub(finite)));
    out
}

impl Collector for Snapshot {
    fn encode(&self, mut e: DescriptorEncoder<'_>) -> fmt::Result {
        let stats = &self.0;
        // A decision whose (`gpu_id`, `level`) or a tenant whose `pid` was
        // already rendered is left out, so every series is unique.
        let mut seen = HashSet::new();
        let decisions: Vec<DecisionRow> = stats
            .decisions
            .iter()
            .filter(|d| seen.insert((d.gpu_id, d.level.as_str())))
            .map(|d| DecisionRow {
                stats: d,
                gpu: d.gpu_id.to_string(),
            })
            .collect();
        let mut pids = HashSet::new();
        let tenants: Vec<TenantRow> = stats
            .tenants
            .iter()
            .filter(|t| pids.insert(t.pid))
            .map(|t| TenantRow {
                stats: t,
                pid: t.pid.to_string(),
                rank: t.rank.to_string(),
            })
            .collect();

        gauge_family(
            &mut e,
            "build_info",
            "The daemon's version; always 1.",
            [([("version", env!("CARGO_PKG_VERSION"))], 1.0)],
        )?;
        single_gauge(
            &mut e,
            "uptime_seconds",
            "Seconds since the daemon started.",
            stats.uptime_s,
        )?;
        single_gauge(
            &mut e,
            "stats_written_timestamp_seconds",
            "When these statistics were taken, seconds since the Unix epoch.",
            stats.written_at_unix_ms as f64 / 1e3,
        )?;

        // Per decision: the work of `level` on the node `gpu_id` preempts
        // every lower level's compute queues there.
        gauge_family(
            &mut e,
            "mode",
            "The decision's state: 1 for the current mode (no-lc, lc-idle, lc-busy), 0 for the others.",
            decisions.iter().flat_map(|d| {
                Mode::ALL.map(|m| {
                    let [gpu, level] = d.labels();
                    ([gpu, level, ("mode", m.as_str())], f64::from(u8::from(d.stats.mode == m)))
                })
            }),
        )?;
        for (name, help, value) in DECISION_GAUGES {
            gauge_family(
                &mut e,
                name,
                help,
                decisions.iter().map(|d| (d.labels(), value(d.stats))),
            )?;
        }
        for (name, help, value) in DECISION_COUNTERS {
            let mut family = e.encode_descriptor(name, help, None, MetricType::Counter)?;
            for d in &decisions {
                let labels = d.labels();
                counter_value(family.encode_family(&labels)?, value(&d.stats.counters))?;
            }
        }
        let mut family = e.encode_descriptor(
            "reaction_seconds",
            "Reaction time, busy edge seen by the module to preemption done, seconds. The buckets are powers of two microseconds and exclude their upper bound: le=\"4e-06\" counts reactions below 4 us.",
            None,
            MetricType::Histogram,
        )?;
        for d in &decisions {
            let h = &d.stats.reaction_latency_us;
            let labels = d.labels();
            family
                .encode_family(&labels)?
                .encode_histogram::<[(&str, &str); 0]>(
                    h.sum_us as f64 / 1e6,
                    h.count,
                    &histogram_buckets(h),
                    None,
                )?;
        }

        // The hint socket's requests.
        counter_value(
            e.encode_descriptor(
                "hints_accepted",
                "Hints taken on the hint socket.",
                None,
                MetricType::Counter,
            )?,
            stats.hints.accepted as f64,
        )?;
        let mut family = e.encode_descriptor(
            "hints_refused",
            "Requests on the hint socket refused, by reason.",
            None,
            MetricType::Counter,
        )?;
        for r in Refusal::ALL {
            let n = stats.hints.refused.get(r.as_str()).copied().unwrap_or(0);
            counter_value(family.encode_family(&[("reason", r.as_str())])?, n as f64)?;
        }
        counter_value(
            e.encode_descriptor(
                "hints_ended",
                "Hints their tenant ended before their time.",
                None,
                MetricType::Counter,
            )?,
            stats.hints.ended as f64,
        )?;
        single_gauge(
            &mut e,
            "hint_connections",
            "Connections open on the hint socket.",
            stats.hints.connections as f64,
        )?;

        // Per tenant.
        gauge_family(
            &mut e,
            "tenant_info",
            "An attached tenant process, its class rule, its priority level and the level's rank (0 the lowest); always 1.",
            tenants.iter().map(|t| {
                let [pid, comm, class, priority] = t.labels();
                ([pid, comm, class, priority, ("rank", &t.rank)], 1.0)
            }),
        )?;
        gauge_family(
            &mut e,
            "tenant_queues",
            "The tenant's compute queues on every node.",
            tenants.iter().map(|t| (t.labels(), t.stats.queues as f64)),
        )?;
        gauge_family(
            &mut e,
            "tenant_held_queues",
            "The tenant's compute queues held off the GPU now.",
            tenants
                .iter()
                .map(|t| (t.labels(), t.stats.held_queues as f64)),
        )
    }
}

/// The statistics in the Prometheus text exposition format 0.0.4.
///
/// Families, all named `kfd_preemptd_*`:
///
/// * process: `build_info{version}`, `uptime_seconds`,
///   `stats_written_timestamp_seconds`;
/// * per decision, labels `gpu_id` and `level`: the gauges `mode` (one
///   series per mode, with a `mode` label, 1 for the current one), `held`,
///   `watched_queues`, `lower_queues`, `lower_run_in_window_seconds`,
///   `idle_hysteresis_seconds`; the
///   counters `preemptions_total`, `preempt_failures_total`,
///   `resumes_total`, `forced_resumes_total`, `lease_renewals_total`,
///   `held_seconds_total`, `hints_expired_total`; the histogram
///   `reaction_seconds`;
/// * the hint socket: the counters `hints_accepted_total`,
///   `hints_refused_total{reason}` (every reason, 0 included) and
///   `hints_ended_total`, the gauge `hint_connections`;
/// * per tenant, labels `pid`, `comm`, `class` and `priority`: the gauges
///   `tenant_info` (also `rank`; always 1), `tenant_queues`,
///   `tenant_held_queues`.
///
/// Numbers and `le` bounds are spelled as Prometheus's own Go client
/// spells them (`2e-06`, `+Inf`); label values are escaped.
pub fn render(stats: &Stats) -> String {
    let mut registry = Registry::with_prefix(PREFIX);
    registry.register_collector(Box::new(Snapshot(stats.clone())));
    let mut text = String::with_capacity(4096 + 4096 * stats.decisions.len());
    // Encoding into a String fails only if a collector fails, and ours
    // fails only if the String does.
    let _ = prometheus_text::encode(&mut text, &registry);
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::{BucketStats, ConfigStats, HintStats, ReactionPhases, TenantStats};

    fn latency(buckets: &[(u64, Option<u64>, u64)], sum_us: u64) -> LatencyStats {
        LatencyStats {
            scale: "log2-us".into(),
            count: buckets.iter().map(|b| b.2).sum(),
            sum_us,
            max_us: 0,
            buckets: buckets
                .iter()
                .map(|&(low_us, high_us, count)| BucketStats {
                    low_us,
                    high_us,
                    count,
                })
                .collect(),
        }
    }

    fn counters(preemptions: u64, held_total_ms: f64) -> CounterStats {
        CounterStats {
            preemptions,
            preempt_failures: 1,
            resumes: preemptions,
            forced_resumes: 2,
            renewals: 7,
            held_total_ms,
            hints_expired: 4,
            other: Default::default(),
        }
    }

    fn fixture() -> Stats {
        let d1 = DecisionStats {
            gpu_id: 4242,
            level: "latency-critical".into(),
            rank: 1,
            mode: Mode::LcBusy,
            held: true,
            watched_queues: 2,
            lower_queues: 5,
            lower_run_in_window_ms: 12.5,
            be_run_in_period_ms: 12.5,
            idle_hysteresis_us: 3750,
            counters: counters(3, 1500.0),
            // 0 µs, 3 µs, 300 µs, 300 µs, and one beyond 2^31 µs.
            reaction_latency_us: latency(
                &[
                    (0, Some(2), 1),
                    (2, Some(4), 1),
                    (256, Some(512), 2),
                    (1 << 31, None, 1),
                ],
                3_000_000_603,
            ),
            reaction_phases: (&ReactionPhases::default()).into(),
        };
        let d2 = DecisionStats {
            gpu_id: 7,
            level: "normal".into(),
            rank: 0,
            mode: Mode::NoLc,
            held: false,
            watched_queues: 0,
            lower_queues: 0,
            lower_run_in_window_ms: 1000.0,
            be_run_in_period_ms: 1000.0,
            idle_hysteresis_us: 1000,
            counters: counters(0, 0.25),
            reaction_latency_us: latency(&[], 0),
            reaction_phases: (&ReactionPhases::default()).into(),
        };
        let tenant =
            |pid, comm: &str, class: &str, priority: &str, rank, queues, held| TenantStats {
                pid,
                comm: comm.into(),
                class: class.into(),
                priority: priority.into(),
                rank,
                queues,
                held_queues: held,
                held: held > 0,
                nodes: vec![4242],
            };
        Stats {
            version: crate::stats::STATS_VERSION,
            pid: 99,
            written_at_unix_ms: 1_764_000_000_123,
            uptime_s: 61.5,
            mode: Mode::LcBusy,
            lower_held: true,
            be_held: true,
            lower_run_in_window_ms: 12.5,
            be_run_in_period_ms: 12.5,
            counters: counters(3, 1500.25),
            reaction_latency_us: latency(&[], 0),
            reaction_phases: (&ReactionPhases::default()).into(),
            tenants: vec![
                tenant(10, "serve", "inference", "latency-critical", 1, 2, 0),
                tenant(11, "tr\"ain\\x\ny", "training", "best-effort", 0, 5, 5),
            ],
            config: ConfigStats {
                lease_ms: 200,
                sample_period_us: 50,
                idle_hysteresis_us: 1000,
                idle_hysteresis_max_us: 1000,
                min_share_period_ms: 1000,
                min_share_budget_ms: 100,
            },
            levels: vec!["normal".into(), "latency-critical".into()],
            decisions: vec![d1, d2],
            hints: HintStats {
                enabled: true,
                accepted: 12,
                refused: [
                    ("not-a-tenant".to_string(), 2),
                    ("rate-limited".to_string(), 1),
                ]
                .into(),
                ended: 5,
                connections: 3,
            },
        }
    }

    #[test]
    fn renders_the_hint_sockets_counts_every_reason_included() {
        let text = render(&fixture());
        assert_eq!(
            lines_of(&text, "kfd_preemptd_hints_accepted_total"),
            ["kfd_preemptd_hints_accepted_total 12"]
        );
        assert_eq!(
            lines_of(&text, "kfd_preemptd_hints_ended_total"),
            ["kfd_preemptd_hints_ended_total 5"]
        );
        assert_eq!(
            lines_of(&text, "kfd_preemptd_hints_refused_total"),
            [
                r#"kfd_preemptd_hints_refused_total{reason="malformed"} 0"#,
                r#"kfd_preemptd_hints_refused_total{reason="not-a-tenant"} 2"#,
                r#"kfd_preemptd_hints_refused_total{reason="lowest-level"} 0"#,
                r#"kfd_preemptd_hints_refused_total{reason="no-queues"} 0"#,
                r#"kfd_preemptd_hints_refused_total{reason="rate-limited"} 1"#,
            ]
        );
        assert_eq!(
            lines_of(&text, "kfd_preemptd_hints_expired_total"),
            [
                format!("kfd_preemptd_hints_expired_total{{{LC}}} 4"),
                format!("kfd_preemptd_hints_expired_total{{{N}}} 4"),
            ]
        );
        assert!(text.contains("\nkfd_preemptd_hint_connections 3\n"));
    }

    fn lines_of<'a>(text: &'a str, prefix: &str) -> Vec<&'a str> {
        text.lines().filter(|l| l.starts_with(prefix)).collect()
    }

    const LC: &str = r#"gpu_id="4242",level="latency-critical""#;
    const N: &str = r#"gpu_id="7",level="normal""#;

    #[test]
    fn renders_counters_and_gauges_per_decision() {
        let text = render(&fixture());
        assert_eq!(
            lines_of(&text, "kfd_preemptd_preemptions_total"),
            [
                format!("kfd_preemptd_preemptions_total{{{LC}}} 3"),
                format!("kfd_preemptd_preemptions_total{{{N}}} 0"),
            ]
        );
        assert_eq!(
            lines_of(&text, "kfd_preemptd_held_seconds_total"),
            [
                format!("kfd_preemptd_held_seconds_total{{{LC}}} 1.5"),
                format!("kfd_preemptd_held_seconds_total{{{N}}} 0.00025"),
            ]
        );
        assert_eq!(
            lines_of(&text, "kfd_preemptd_held{"),
            [
                format!("kfd_preemptd_held{{{LC}}} 1"),
                format!("kfd_preemptd_held{{{N}}} 0"),
            ]
        );
        assert_eq!(
            lines_of(&text, "kfd_preemptd_mode{"),
            [
                format!("kfd_preemptd_mode{{{LC},mode=\"no-lc\"}} 0"),
                format!("kfd_preemptd_mode{{{LC},mode=\"lc-idle\"}} 0"),
                format!("kfd_preemptd_mode{{{LC},mode=\"lc-busy\"}} 1"),
                format!("kfd_preemptd_mode{{{N},mode=\"no-lc\"}} 1"),
                format!("kfd_preemptd_mode{{{N},mode=\"lc-idle\"}} 0"),
                format!("kfd_preemptd_mode{{{N},mode=\"lc-busy\"}} 0"),
            ]
        );
        assert_eq!(
            lines_of(&text, "kfd_preemptd_lower_run_in_window_seconds{"),
            [
                format!("kfd_preemptd_lower_run_in_window_seconds{{{LC}}} 0.0125"),
                format!("kfd_preemptd_lower_run_in_window_seconds{{{N}}} 1"),
            ]
        );
        assert_eq!(
            lines_of(&text, "kfd_preemptd_idle_hysteresis_seconds{"),
            [
                format!("kfd_preemptd_idle_hysteresis_seconds{{{LC}}} 0.00375"),
                format!("kfd_preemptd_idle_hysteresis_seconds{{{N}}} 0.001"),
            ]
        );
        assert!(text.contains(&format!("kfd_preemptd_watched_queues{{{LC}}} 2\n")));
        assert!(text.contains(&format!("kfd_preemptd_lower_queues{{{LC}}} 5\n")));
        assert!(text.contains(&format!("kfd_preemptd_lease_renewals_total{{{N}}} 7\n")));
        assert!(text.contains(&format!("kfd_preemptd_forced_resumes_total{{{N}}} 2\n")));
        assert!(text.contains(&format!("kfd_preemptd_preempt_failures_total{{{N}}} 1\n")));
        assert!(text.contains(&format!(
            "kfd_preemptd_build_info{{version=\"{}\"}} 1\n",
            env!("CARGO_PKG_VERSION")
        )));
        assert!(text.contains("\nkfd_preemptd_uptime_seconds 61.5\n"));
        assert!(text.contains("\nkfd_preemptd_stats_written_timestamp_seconds 1764000000.123\n"));
    }

    #[test]
    fn histogram_buckets_are_cumulative_in_seconds() {
        let text = render(&fixture());
        let lc = lines_of(
            &text,
            &format!("kfd_preemptd_reaction_seconds_bucket{{{LC}"),
        );
        // 31 finite bounds (2 µs .. 2^31 µs) and +Inf.
        assert_eq!(lc.len(), LATENCY_BUCKETS);
        let at = |le: &str| {
            let prefix = format!("kfd_preemptd_reaction_seconds_bucket{{{LC},le=\"{le}\"}} ");
            lc.iter()
                .find_map(|l| l.strip_prefix(&prefix))
                .unwrap_or_else(|| panic!("no bucket le={le}"))
                .to_string()
        };
        assert_eq!(at("2e-06"), "1"); // 0 µs (spelled as the Go client does)
        assert_eq!(at("4e-06"), "2"); // and 3 µs
        assert_eq!(at("0.000256"), "2"); // 300 µs is not below 256 µs
        assert_eq!(at("0.000512"), "4");
        assert_eq!(at("1.048576"), "4");
        assert_eq!(at("2147.483648"), "4"); // the last finite bound
        assert_eq!(at("+Inf"), "5");
        let values: Vec<u64> = lc
            .iter()
            .map(|l| l.rsplit(' ').next().unwrap().parse().unwrap())
            .collect();
        assert!(values.windows(2).all(|w| w[0] <= w[1]), "{values:?}");
        assert!(text.contains(&format!(
            "\nkfd_preemptd_reaction_seconds_sum{{{LC}}} 3000.000603\n"
        )));
        assert!(text.contains(&format!(
            "\nkfd_preemptd_reaction_seconds_count{{{LC}}} 5\n"
        )));
        // An empty histogram has every bucket, all zero.
        let n = lines_of(&text, &format!("kfd_preemptd_reaction_seconds_bucket{{{N}"));
        assert_eq!(n.len(), LATENCY_BUCKETS);
        assert!(n.iter().all(|l| l.ends_with(" 0")));
        assert!(text.contains(&format!("\nkfd_preemptd_reaction_seconds_count{{{N}}} 0\n")));
    }

    #[test]
    fn tenants_are_labelled_and_escaped() {
        let text = render(&fixture());
        let odd = r#"pid="11",comm="tr\"ain\\x\ny",class="training",priority="best-effort""#;
        assert_eq!(
            lines_of(&text, "kfd_preemptd_tenant_held_queues{"),
            [
                r#"kfd_preemptd_tenant_held_queues{pid="10",comm="serve",class="inference",priority="latency-critical"} 0"#.to_string(),
                format!("kfd_preemptd_tenant_held_queues{{{odd}}} 5"),
            ]
        );
        assert!(text.contains(&format!("\nkfd_preemptd_tenant_queues{{{odd}}} 5\n")));
        assert!(text.contains(&format!(
            "\nkfd_preemptd_tenant_info{{{odd},rank=\"0\"}} 1\n"
        )));
        // The newline in the comm is escaped, not written.
        assert!(text.lines().all(|l| !l.starts_with('y')));
    }

    #[test]
    fn help_and_type_once_per_family_and_series_unique() {
        let mut s = fixture();
        // Duplicates are left out rather than exposed twice.
        s.decisions.push(s.decisions[0].clone());
        s.tenants.push(s.tenants[0].clone());
        let text = render(&s);
        let mut helps = HashSet::new();
        let mut types = HashSet::new();
        let mut series = HashSet::new();
        for l in text.lines() {
            if let Some(h) = l.strip_prefix("# HELP ") {
                assert!(
                    helps.insert(h.split(' ').next().unwrap().to_string()),
                    "{l}"
                );
            } else if let Some(t) = l.strip_prefix("# TYPE ") {
                let mut w = t.split(' ');
                let (name, kind) = (w.next().unwrap(), w.next().unwrap());
                assert!(name.starts_with(PREFIX), "{l}");
                assert_eq!(kind == "counter", name.ends_with("_total"), "{l}");
                assert!(types.insert(name.to_string()), "{l}");
            } else {
                let (s, _) = l.rsplit_once(' ').unwrap();
                assert!(series.insert(s.to_string()), "duplicate series {s}");
            }
        }
        assert_eq!(helps, types);
        assert_eq!(lines_of(&text, "kfd_preemptd_preemptions_total{").len(), 2);
        assert_eq!(lines_of(&text, "kfd_preemptd_tenant_queues{").len(), 2);
    }

    #[test]
    fn special_floats_are_spelled_as_prometheus_reads_them() {
        let mut s = fixture();
        s.decisions[0].counters.held_total_ms = f64::INFINITY;
        s.decisions[0].lower_run_in_window_ms = f64::NAN;
        s.decisions[1].lower_run_in_window_ms = f64::NEG_INFINITY;
        let text = render(&s);
        assert!(text.contains(&format!("\nkfd_preemptd_held_seconds_total{{{LC}}} +Inf\n")));
        assert!(text.contains(&format!(
            "\nkfd_preemptd_lower_run_in_window_seconds{{{LC}}} NaN\n"
        )));
        assert!(text.contains(&format!(
            "\nkfd_preemptd_lower_run_in_window_seconds{{{N}}} -Inf\n"
        )));
    }
}
