//! The statistics file: a self-describing JSON document (`"version": 1`),
//! replaced atomically (write to a temporary file, then rename) every
//! second and on exit.

use std::{
    fs,
    io::{self, Write},
    path::Path,
    time::Duration,
};

use crate::policy::{Counters, Histogram, Mode, Policy, PolicyConfig};

pub use kfd_preemptd_stats::{
    BucketStats, ConfigStats, CounterStats, DecisionStats, HintStats, LatencyStats, PhaseStats,
    Stats, TenantStats, STATS_VERSION,
};

impl From<&Histogram> for LatencyStats {
    fn from(h: &Histogram) -> Self {
        LatencyStats {
            scale: "log2-us".into(),
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

/// Where the reactions to busy edges went, summed, from the daemon's
/// wakeup: the SAMPLE that confirms the edge, the decision, the PREEMPT
/// ioctl around the module's hardware phase, and that phase (the node's
/// unmap). What comes before the wakeup (the doorbell to the module's
/// observation, at most one sample period, and the eventfd's wakeup) is
/// the rest of the reaction the node's clock measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ReactionPhases {
    /// Reactions recorded.
    pub count: u64,
    /// The wakeup's SAMPLE, ns.
    pub sample_ns: u64,
    /// SAMPLE to the PREEMPT call, ns.
    pub decision_ns: u64,
    /// The PREEMPT call outside the module's hardware phase, ns.
    pub ioctl_ns: u64,
    /// The module's hardware phase (runlist update or MES calls), ns.
    pub node_ns: u64,
    /// The longest of each phase, ns: a tail is one phase's outlier,
    /// which the means hide.
    pub sample_max_ns: u64,
    /// The longest SAMPLE to PREEMPT call, ns.
    pub decision_max_ns: u64,
    /// The longest PREEMPT call outside the hardware phase, ns.
    pub ioctl_max_ns: u64,
    /// The longest hardware phase, ns.
    pub node_max_ns: u64,
}

impl ReactionPhases {
    /// Records one reaction: daemon `woke`, its SAMPLE returned at
    /// `sampled`, PREEMPT `issued` and `returned`, and the module's `node`
    /// time within it.
    pub fn record(
        &mut self,
        woke: Duration,
        sampled: Duration,
        issued: Duration,
        returned: Duration,
        node: Duration,
    ) {
        let ns = |d: Duration| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        let call = returned.saturating_sub(issued);
        let sample = ns(sampled.saturating_sub(woke));
        let decision = ns(issued.saturating_sub(sampled));
        let ioctl = ns(call.saturating_sub(node));
        let node = ns(node.min(call));
        // One reaction: each phase is its own sum and its own longest.
        self.merge(&ReactionPhases {
            count: 1,
            sample_ns: sample,
            decision_ns: decision,
            ioctl_ns: ioctl,
            node_ns: node,
            sample_max_ns: sample,
            decision_max_ns: decision,
            ioctl_max_ns: ioctl,
            node_max_ns: node,
        });
    }

    /// Adds `other`'s reactions.
    pub fn merge(&mut self, other: &ReactionPhases) {
        self.count += other.count;
        self.sample_ns = self.sample_ns.saturating_add(other.sample_ns);
        self.decision_ns = self.decision_ns.saturating_add(other.decision_ns);
        self.ioctl_ns = self.ioctl_ns.saturating_add(other.ioctl_ns);
        self.node_ns = self.node_ns.saturating_add(other.node_ns);
        self.sample_max_ns = self.sample_max_ns.max(other.sample_max_ns);
        self.decision_max_ns = self.decision_max_ns.max(other.decision_max_ns);
        self.ioctl_max_ns = self.ioctl_max_ns.max(other.ioctl_max_ns);
        self.node_max_ns = self.node_max_ns.max(other.node_max_ns);
    }
}

impl From<&ReactionPhases> for PhaseStats {
    fn from(p: &ReactionPhases) -> Self {
        let mean = |ns: u64| {
            if p.count == 0 {
                0.0
            } else {
                ns as f64 / p.count as f64 / 1e3
            }
        };
        PhaseStats {
            count: p.count,
            sample_us: mean(p.sample_ns),
            decision_us: mean(p.decision_ns),
            ioctl_us: mean(p.ioctl_ns),
            node_us: mean(p.node_ns),
            sample_max_us: p.sample_max_ns as f64 / 1e3,
            decision_max_us: p.decision_max_ns as f64 / 1e3,
            ioctl_max_us: p.ioctl_max_ns as f64 / 1e3,
            node_max_us: p.node_max_ns as f64 / 1e3,
        }
    }
}

impl From<&PolicyConfig> for ConfigStats {
    fn from(c: &PolicyConfig) -> Self {
        let ms = |d: Duration| d.as_millis() as u64;
        let us = |d: Duration| d.as_micros() as u64;
        ConfigStats {
            lease_ms: ms(c.lease),
            sample_period_us: us(c.sample_period),
            idle_hysteresis_us: us(c.idle_hysteresis),
            idle_hysteresis_max_us: us(c.idle_hysteresis_max),
            min_share_period_ms: ms(c.min_share_period),
            min_share_budget_ms: ms(c.min_share_budget),
        }
    }
}

/// What [`snapshot`] reads of one decision.
pub struct DecisionView<'a> {
    /// The node.
    pub gpu_id: u32,
    /// The watched level's name.
    pub level: &'a str,
    /// Its rank.
    pub rank: usize,
    /// The decision's policy.
    pub policy: &'a Policy,
    /// Queues watched.
    pub watched_queues: usize,
    /// Queues of lower levels on the node.
    pub lower_queues: usize,
    /// Its reactions' phases.
    pub phases: &'a ReactionPhases,
}

fn counter_stats(c: &Counters, held_total: Duration) -> CounterStats {
    CounterStats {
        preemptions: c.preemptions,
        preempt_failures: c.preempt_failures,
        resumes: c.resumes,
        forced_resumes: c.forced_resumes,
        renewals: c.renewals,
        held_total_ms: held_total.as_secs_f64() * 1e3,
        hints_expired: c.hints_expired,
        other: Default::default(),
    }
}

/// A snapshot of the `decisions` at `now` (monotonic) with `tenants`.
pub fn snapshot(
    config: &PolicyConfig,
    levels: &[String],
    decisions: &[DecisionView<'_>],
    now: Duration,
    uptime: Duration,
    written_at_unix_ms: u64,
    mut tenants: Vec<TenantStats>,
) -> Stats {
    tenants.sort_by_key(|t| t.pid);
    let mut total = Counters::default();
    let mut held_total = Duration::ZERO;
    let mut latency = Histogram::default();
    let mut phases = ReactionPhases::default();
    let mut mode = Mode::NoLc;
    let mut lower_run = config.min_share_period;
    let mut out = Vec::with_capacity(decisions.len());
    for d in decisions {
        let p = d.policy;
        let c = p.counters();
        total.add(c);
        let held = p.held_total(now);
        held_total += held;
        latency.merge(p.latency());
        phases.merge(d.phases);
        mode = mode.max(p.mode());
        let run = p.lower_run_in_window(now);
        if p.is_held() {
            lower_run = lower_run.min(run);
        }
        out.push(DecisionStats {
            gpu_id: d.gpu_id,
            level: d.level.to_string(),
            rank: d.rank,
            mode: p.mode(),
            held: p.is_held(),
            watched_queues: d.watched_queues,
            lower_queues: d.lower_queues,
            lower_run_in_window_ms: run.as_secs_f64() * 1e3,
            be_run_in_period_ms: run.as_secs_f64() * 1e3,
            idle_hysteresis_us: p.idle_hysteresis().as_micros() as u64,
            counters: counter_stats(c, held),
            reaction_latency_us: p.latency().into(),
            reaction_phases: d.phases.into(),
        });
    }
    out.sort_by_key(|d| (d.gpu_id, d.rank));
    let lower_held = decisions.iter().any(|d| d.policy.is_held());
    Stats {
        version: STATS_VERSION,
        pid: std::process::id(),
        written_at_unix_ms,
        uptime_s: uptime.as_secs_f64(),
        mode,
        lower_held,
        be_held: lower_held,
        lower_run_in_window_ms: lower_run.as_secs_f64() * 1e3,
        be_run_in_period_ms: lower_run.as_secs_f64() * 1e3,
        counters: counter_stats(&total, held_total),
        reaction_latency_us: (&latency).into(),
        reaction_phases: (&phases).into(),
        tenants,
        config: config.into(),
        levels: levels.to_vec(),
        decisions: out,
        // The daemon's, not the decisions': it fills them in.
        hints: HintStats::default(),
    }
}

/// Writes `stats` to `path` atomically: a reader sees the old file or the
/// new one, never a partial one.
///
/// The new file is made beside `path` under a name of this process's and
/// opened with `O_CREAT | O_EXCL`, which follows no symbolic link and takes
/// no file that exists: the daemon runs as root, and whoever may write in
/// the statistics' directory must not make it write elsewhere.
pub fn write_atomic(path: &Path, stats: &Stats) -> io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);

    let body = serde_json::to_vec_pretty(stats).map_err(io::Error::other)?;
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(format!(
        ".tmp.{}.{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    let tmp = Path::new(&tmp);
    let mut f = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o644)
        .open(tmp)?;
    // From here the temporary is this call's: removed if it is not renamed.
    let written = f
        .write_all(&body)
        .and_then(|()| f.write_all(b"\n"))
        .and_then(|()| fs::rename(tmp, path));
    if written.is_err() {
        let _ = fs::remove_file(tmp);
    }
    written
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::{Event, Role};

    fn tenant(pid: i32, class: &str, priority: &str, rank: usize, held: usize) -> TenantStats {
        TenantStats {
            pid,
            comm: format!("c{pid}"),
            class: class.into(),
            priority: priority.into(),
            rank,
            queues: 3,
            held_queues: held,
            held: held > 0,
            nodes: vec![0x5100],
        }
    }

    fn busy_policy(ms: fn(u64) -> Duration, preempt_at: u64) -> Policy {
        let mut p = Policy::new(PolicyConfig::default(), ms(0));
        p.handle(
            ms(0),
            Event::TenantAdded {
                pid: 1,
                role: Role::Watched,
            },
        );
        p.handle(ms(0), Event::TenantQueues { pid: 1, queues: 1 });
        p.handle(
            ms(0),
            Event::TenantAdded {
                pid: 2,
                role: Role::Lower,
            },
        );
        p.handle(ms(0), Event::TenantQueues { pid: 2, queues: 3 });
        p.handle(
            ms(preempt_at),
            Event::LcBusy {
                edge: ms(preempt_at),
            },
        );
        p.handle(
            ms(preempt_at) + Duration::from_micros(300),
            Event::PreemptDone { retry_after: None },
        );
        p
    }

    fn d_count(v: &serde_json::Value, i: usize) -> u64 {
        v["decisions"][i]["reaction_phases"]["count"]
            .as_u64()
            .unwrap_or(0)
    }

    #[test]
    fn phases_keep_each_phase_longest_apart_from_the_means() {
        let us = Duration::from_micros;
        let mut a = ReactionPhases::default();
        // A slow SAMPLE in one reaction, a slow ioctl in the other: each
        // maximum is its own phase's, not one reaction's.
        a.record(us(0), us(900), us(910), us(1010), us(50));
        a.record(us(0), us(100), us(130), us(2130), us(60));
        let mut b = ReactionPhases::default();
        b.record(us(0), us(10), us(20), us(120), us(100));
        a.merge(&b);
        let s = PhaseStats::from(&a);
        assert_eq!(s.count, 3);
        assert_eq!(
            (
                s.sample_max_us,
                s.decision_max_us,
                s.ioctl_max_us,
                s.node_max_us
            ),
            (900.0, 30.0, 1940.0, 100.0)
        );
        assert_eq!(s.sample_us, (900.0 + 100.0 + 10.0) / 3.0);
        assert_eq!(s.ioctl_us, (50.0 + 1940.0 + 0.0) / 3.0);
    }

    #[test]
    fn snapshot_is_self_describing_and_sums_its_decisions() {
        let ms = Duration::from_millis;
        let busy = busy_policy(ms, 10);
        let other = busy_policy(ms, 20);
        let idle = Policy::new(PolicyConfig::default(), ms(0));
        let us = Duration::from_micros;
        let mut phases = ReactionPhases::default();
        // Woke at 0; sampled at 40 µs; PREEMPT from 50 to 250 µs, 150 of
        // them the node's.
        phases.record(us(0), us(40), us(50), us(250), us(150));
        let levels = vec!["best-effort".to_string(), "latency-critical".to_string()];
        let views = [
            DecisionView {
                gpu_id: 0x5101,
                level: "latency-critical",
                rank: 1,
                policy: &other,
                watched_queues: 1,
                lower_queues: 3,
                phases: &phases,
            },
            DecisionView {
                gpu_id: 0x5100,
                level: "latency-critical",
                rank: 1,
                policy: &busy,
                watched_queues: 1,
                lower_queues: 3,
                phases: &phases,
            },
            DecisionView {
                gpu_id: 0x5102,
                level: "latency-critical",
                rank: 1,
                policy: &idle,
                watched_queues: 0,
                lower_queues: 0,
                phases: &ReactionPhases::default(),
            },
        ];
        let tenants = vec![
            tenant(2, "training", "best-effort", 0, 3),
            tenant(1, "inference", "latency-critical", 1, 0),
        ];
        let s = snapshot(
            &PolicyConfig::default(),
            &levels,
            &views,
            ms(30),
            ms(30),
            1234,
            tenants,
        );
        let v = serde_json::to_value(&s).unwrap();
        assert_eq!(v["version"], 1);
        assert_eq!(v["mode"], "lc-busy");
        assert_eq!(v["lower_held"], true);
        // The first names of renamed fields, for version 1 readers.
        assert_eq!(v["be_held"], true);
        assert!(v["lower_run_in_window_ms"].as_f64().is_some());
        assert_eq!(v["be_run_in_period_ms"], v["lower_run_in_window_ms"]);
        for d in v["decisions"].as_array().unwrap() {
            assert!(d["lower_run_in_window_ms"].as_f64().is_some());
            assert_eq!(d["be_run_in_period_ms"], d["lower_run_in_window_ms"]);
        }
        assert_eq!(v["counters"]["preemptions"], 2);
        assert_eq!(v["counters"]["held_total_ms"], 30.0);
        assert_eq!(v["reaction_latency_us"]["scale"], "log2-us");
        assert_eq!(v["reaction_latency_us"]["count"], 2);
        assert_eq!(
            v["reaction_latency_us"]["buckets"][0],
            serde_json::json!({"low_us": 256, "high_us": 512, "count": 2})
        );
        assert_eq!(v["tenants"][0]["pid"], 1);
        assert_eq!(v["tenants"][0]["priority"], "latency-critical");
        assert_eq!(v["tenants"][1]["held"], true);
        assert_eq!(v["tenants"][1]["held_queues"], 3);
        assert_eq!(v["config"]["lease_ms"], 200);
        assert_eq!(v["config"]["sample_period_us"], 50);
        assert_eq!(v["levels"], serde_json::json!(levels));
        assert_eq!(
            v["reaction_phases"],
            serde_json::json!({"count": 2, "sample_us": 40.0, "decision_us": 10.0,
                               "ioctl_us": 50.0, "node_us": 150.0, "sample_max_us": 40.0,
                               "decision_max_us": 10.0, "ioctl_max_us": 50.0,
                               "node_max_us": 150.0})
        );
        assert_eq!(d_count(&v, 0), 1);
        // By node: each decision's own counters.
        let d = &v["decisions"];
        assert_eq!(d[0]["gpu_id"], 0x5100);
        assert_eq!(d[0]["counters"]["held_total_ms"], 20.0);
        assert_eq!(d[1]["gpu_id"], 0x5101);
        assert_eq!(d[1]["counters"]["held_total_ms"], 10.0);
        assert_eq!(d[2]["mode"], "no-lc");
        assert_eq!(d[2]["held"], false);
        assert_eq!(d[2]["counters"]["preemptions"], 0);
    }

    /// The statistics of a daemon with no tenant.
    fn no_tenants() -> Stats {
        snapshot(
            &PolicyConfig::default(),
            &[],
            &[],
            Duration::ZERO,
            Duration::ZERO,
            0,
            vec![],
        )
    }

    #[test]
    fn write_is_atomic_and_leaves_no_temporary() {
        let dir = std::env::temp_dir().join(format!("kfd-preemptd-stats-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let path = dir.join("stats.json");
        let s = no_tenants();
        write_atomic(&path, &s).unwrap();
        write_atomic(&path, &s).unwrap();
        let v: serde_json::Value =
            serde_json::from_str(&fs::read_to_string(&path).unwrap()).unwrap();
        assert_eq!(v["version"], 1);
        assert_eq!(v["mode"], "no-lc");
        let left: Vec<_> = fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .filter(|n| n != "stats.json")
            .collect();
        assert!(left.is_empty(), "left behind: {left:?}");
        fs::remove_dir_all(&dir).unwrap();
    }

    /// A link planted where the old code put its temporary file: the
    /// file it points to stays as it was.
    #[test]
    fn write_follows_no_planted_link() {
        use std::os::unix::fs::symlink;
        let dir = std::env::temp_dir().join(format!("kfd-preemptd-link-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let victim = dir.join("victim");
        fs::write(&victim, "precious\n").unwrap();
        let path = dir.join("stats.json");
        symlink(&victim, dir.join("stats.json.tmp")).unwrap();
        let s = no_tenants();
        write_atomic(&path, &s).unwrap();
        assert_eq!(fs::read_to_string(&victim).unwrap(), "precious\n");
        assert!(fs::symlink_metadata(&path).unwrap().file_type().is_file());
        fs::remove_dir_all(&dir).unwrap();
    }
}
