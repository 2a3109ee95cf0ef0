//! The statistics file: a self-describing JSON document (`"version": 1`),
//! replaced atomically (write to a temporary file, then rename) every
//! second and on exit.

use std::{
    fs,
    io::{self, Write},
    path::Path,
    time::Duration,
};

use serde::Serialize;

use crate::policy::{Class, Histogram, Mode, Policy, PolicyConfig};

/// The schema version written as `"version"`. Fields may be added within
/// a version; a removed or redefined field bumps it.
pub const STATS_VERSION: u32 = 1;

/// One tenant in the statistics.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TenantStats {
    /// Its pid.
    pub pid: i32,
    /// Its `comm`.
    pub comm: String,
    /// The name of the class rule that matched it.
    pub class: String,
    /// `latency-critical` or `best-effort`.
    pub priority: Class,
    /// Its compute queues (LC: those watched).
    pub queues: usize,
    /// Whether its queues are held off the GPU (BE only).
    pub held: bool,
}

/// The counters.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CounterStats {
    /// Preemptions of BE that took effect.
    pub preemptions: u64,
    /// Preemptions that took effect for no queue.
    pub preempt_failures: u64,
    /// Resumes of BE, forced ones included.
    pub resumes: u64,
    /// Resumes forced by the minimum share.
    pub forced_resumes: u64,
    /// Lease renewals.
    pub renewals: u64,
    /// Total time BE was held, in milliseconds.
    pub held_total_ms: f64,
}

/// One non-empty latency bucket: `[low_us, high_us)`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BucketStats {
    /// Lower bound, µs, inclusive.
    pub low_us: u64,
    /// Upper bound, µs, exclusive; `null` for the last, open bucket.
    pub high_us: Option<u64>,
    /// Latencies in it.
    pub count: u64,
}

/// The reaction-latency histogram (LcBusy edge to preemption done).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LatencyStats {
    /// Bucket scale: `"log2-us"`, buckets `[2^i, 2^(i+1))` µs (the first
    /// from 0).
    pub scale: &'static str,
    /// Latencies recorded.
    pub count: u64,
    /// Their sum, µs.
    pub sum_us: u64,
    /// The largest, µs.
    pub max_us: u64,
    /// The non-empty buckets, in increasing order.
    pub buckets: Vec<BucketStats>,
}

impl From<&Histogram> for LatencyStats {
    fn from(h: &Histogram) -> Self {
        LatencyStats {
            scale: "log2-us",
            count: h.count,
            sum_us: h.sum_us,
            max_us: h.max_us,
            buckets: h
                .buckets
                .iter()
                .enumerate()
                .filter(|(_, c)| **c > 0)
                .map(|(i, c)| {
                    let (low_us, high_us) = Histogram::bounds(i);
                    BucketStats {
                        low_us,
                        high_us,
                        count: *c,
                    }
                })
                .collect(),
        }
    }
}

/// The tunables in effect (after the module's limits were applied).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ConfigStats {
    /// Lease, ms.
    pub lease_ms: u64,
    /// ARM sampling period, µs.
    pub sample_period_us: u64,
    /// Idle hysteresis, µs.
    pub idle_hysteresis_us: u64,
    /// Minimum-share window, ms.
    pub min_share_period_ms: u64,
    /// Minimum-share budget, ms.
    pub min_share_budget_ms: u64,
}

impl From<&PolicyConfig> for ConfigStats {
    fn from(c: &PolicyConfig) -> Self {
        let ms = |d: Duration| d.as_millis() as u64;
        let us = |d: Duration| d.as_micros() as u64;
        ConfigStats {
            lease_ms: ms(c.lease),
            sample_period_us: us(c.sample_period),
            idle_hysteresis_us: us(c.idle_hysteresis),
            min_share_period_ms: ms(c.min_share_period),
            min_share_budget_ms: ms(c.min_share_budget),
        }
    }
}

/// The whole statistics document.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Stats {
    /// [`STATS_VERSION`].
    pub version: u32,
    /// The daemon's pid.
    pub pid: u32,
    /// When written, ms since the Unix epoch.
    pub written_at_unix_ms: u64,
    /// Seconds since the daemon started.
    pub uptime_s: f64,
    /// LC's state: `no-lc`, `lc-idle` or `lc-busy`.
    pub mode: Mode,
    /// Whether BE queues are held off the GPU.
    pub be_held: bool,
    /// BE run time in the current minimum-share window, ms.
    pub be_run_in_period_ms: f64,
    /// The counters.
    pub counters: CounterStats,
    /// The reaction-latency histogram.
    pub reaction_latency_us: LatencyStats,
    /// The attached tenants, by pid.
    pub tenants: Vec<TenantStats>,
    /// The tunables in effect.
    pub config: ConfigStats,
}

impl Stats {
    /// A snapshot of `policy` at `now` (monotonic) with `tenants`.
    pub fn snapshot(
        policy: &Policy,
        now: Duration,
        uptime: Duration,
        written_at_unix_ms: u64,
        mut tenants: Vec<TenantStats>,
    ) -> Self {
        tenants.sort_by_key(|t| t.pid);
        let c = policy.counters();
        Stats {
            version: STATS_VERSION,
            pid: std::process::id(),
            written_at_unix_ms,
            uptime_s: uptime.as_secs_f64(),
            mode: policy.mode(),
            be_held: policy.is_held(),
            be_run_in_period_ms: policy.be_run_in_period(now).as_secs_f64() * 1e3,
            counters: CounterStats {
                preemptions: c.preemptions,
                preempt_failures: c.preempt_failures,
                resumes: c.resumes,
                forced_resumes: c.forced_resumes,
                renewals: c.renewals,
                held_total_ms: policy.held_total(now).as_secs_f64() * 1e3,
            },
            reaction_latency_us: policy.latency().into(),
            tenants,
            config: policy.config().into(),
        }
    }
}

/// Writes `stats` to `path` atomically: a reader sees the old file or the
/// new one, never a partial one.
pub fn write_atomic(path: &Path, stats: &Stats) -> io::Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = Path::new(&tmp);
    let body = serde_json::to_vec_pretty(stats).map_err(io::Error::other)?;
    {
        let mut f = fs::File::create(tmp)?;
        f.write_all(&body)?;
        f.write_all(b"\n")?;
    }
    fs::rename(tmp, path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::Event;

    #[test]
    fn snapshot_is_self_describing_and_complete() {
        let ms = Duration::from_millis;
        let mut p = Policy::new(PolicyConfig::default(), ms(0));
        p.handle(
            ms(0),
            Event::TenantAdded {
                pid: 1,
                class: Class::LatencyCritical,
            },
        );
        p.handle(ms(0), Event::TenantQueues { pid: 1, queues: 1 });
        p.handle(
            ms(0),
            Event::TenantAdded {
                pid: 2,
                class: Class::BestEffort,
            },
        );
        p.handle(ms(0), Event::TenantQueues { pid: 2, queues: 3 });
        p.handle(ms(10), Event::LcBusy { edge: ms(10) });
        p.handle(
            ms(10) + Duration::from_micros(300),
            Event::PreemptDone { retry_after: None },
        );
        let tenants = vec![
            TenantStats {
                pid: 2,
                comm: "train".into(),
                class: "training".into(),
                priority: Class::BestEffort,
                queues: 3,
                held: true,
            },
            TenantStats {
                pid: 1,
                comm: "serve".into(),
                class: "inference".into(),
                priority: Class::LatencyCritical,
                queues: 1,
                held: false,
            },
        ];
        let s = Stats::snapshot(&p, ms(30), ms(30), 1234, tenants);
        let v = serde_json::to_value(&s).unwrap();
        assert_eq!(v["version"], 1);
        assert_eq!(v["mode"], "lc-busy");
        assert_eq!(v["be_held"], true);
        assert_eq!(v["counters"]["preemptions"], 1);
        assert_eq!(v["counters"]["held_total_ms"], 20.0);
        assert_eq!(v["reaction_latency_us"]["scale"], "log2-us");
        assert_eq!(v["reaction_latency_us"]["count"], 1);
        assert_eq!(
            v["reaction_latency_us"]["buckets"][0],
            serde_json::json!({"low_us": 256, "high_us": 512, "count": 1})
        );
        assert_eq!(v["tenants"][0]["pid"], 1);
        assert_eq!(v["tenants"][0]["priority"], "latency-critical");
        assert_eq!(v["tenants"][1]["held"], true);
        assert_eq!(v["config"]["lease_ms"], 200);
        assert_eq!(v["config"]["sample_period_us"], 50);
    }

    #[test]
    fn write_is_atomic_and_leaves_no_temporary() {
        let dir = std::env::temp_dir().join(format!("kfd-preemptd-stats-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let path = dir.join("stats.json");
        let p = Policy::new(PolicyConfig::default(), Duration::ZERO);
        let s = Stats::snapshot(&p, Duration::ZERO, Duration::ZERO, 0, vec![]);
        write_atomic(&path, &s).unwrap();
        write_atomic(&path, &s).unwrap();
        let v: serde_json::Value =
            serde_json::from_str(&fs::read_to_string(&path).unwrap()).unwrap();
        assert_eq!(v["version"], 1);
        assert_eq!(v["mode"], "no-lc");
        assert!(!dir.join("stats.json.tmp").exists());
        fs::remove_dir_all(&dir).unwrap();
    }
}
