//! A fixed, realistic set of statistics behind a real metrics endpoint,
//! for tests/metrics/metrics_test.sh: it writes the statistics as the
//! daemon does (`--stats-out`) and serves their rendering (`--listen`)
//! until killed; `--render` prints the rendering and exits.
//!
//! usage: metrics_fixture --listen ADDR [--stats-out FILE] | --render

use std::{error::Error, path::PathBuf, thread, time::Duration};

use kfd_preemptd::{
    metrics::{render, MetricsAddr, MetricsServer},
    policy::{Histogram, Mode},
    stats::{
        write_atomic, ConfigStats, CounterStats, DecisionStats, HintStats, ReactionPhases, Stats,
        TenantStats,
    },
};

fn latency(us: &[u64]) -> Histogram {
    let mut h = Histogram::default();
    for &u in us {
        h.record(Duration::from_micros(u));
    }
    h
}

/// `n` reactions of 40 µs to wake up, 5 µs to decide, 20 µs of ioctl
/// and 150 µs of hardware each.
fn phases(n: usize) -> ReactionPhases {
    let us = Duration::from_micros;
    let mut p = ReactionPhases::default();
    for i in 0..n as u64 {
        let edge = us(1000 * i);
        p.record(edge, edge + us(40), edge + us(45), edge + us(215), us(150));
    }
    p
}

#[allow(clippy::too_many_arguments)]
fn decision(
    gpu_id: u32,
    level: &str,
    rank: usize,
    mode: Mode,
    queues: (usize, usize),
    counts: [u64; 5],
    held_total_ms: f64,
    reactions_us: &[u64],
) -> DecisionStats {
    let [preemptions, preempt_failures, resumes, forced_resumes, renewals] = counts;
    DecisionStats {
        gpu_id,
        level: level.into(),
        rank,
        mode,
        held: mode == Mode::LcBusy,
        watched_queues: queues.0,
        lower_queues: queues.1,
        lower_run_in_window_ms: 37.25,
        be_run_in_period_ms: 37.25,
        idle_hysteresis_us: 2500,
        counters: CounterStats {
            preemptions,
            preempt_failures,
            resumes,
            forced_resumes,
            renewals,
            held_total_ms,
            hints_expired: preemptions / 4,
            other: Default::default(),
        },
        reaction_latency_us: (&latency(reactions_us)).into(),
        reaction_phases: (&phases(reactions_us.len())).into(),
    }
}

fn tenant(
    pid: i32,
    comm: &str,
    class: &str,
    (priority, rank): (&str, usize),
    queues: usize,
    held_queues: usize,
    nodes: &[u32],
) -> TenantStats {
    TenantStats {
        pid,
        comm: comm.into(),
        class: class.into(),
        priority: priority.into(),
        rank,
        queues,
        held_queues,
        held: held_queues > 0,
        nodes: nodes.to_vec(),
    }
}

/// Two nodes; three levels; one decision busy, one idle, one without
/// work; four tenants, one with a `comm` that needs escaping.
fn fixture() -> Stats {
    let (lc, normal, be) = (("latency-critical", 2), ("normal", 1), ("best-effort", 0));
    let decisions = vec![
        decision(
            17068,
            lc.0,
            lc.1,
            Mode::LcBusy,
            (2, 6),
            [41, 1, 40, 3, 118],
            23_456.789,
            &[0, 3, 180, 250, 260, 300, 310, 700, 1200, 5000, 90_000],
        ),
        decision(
            17068,
            normal.0,
            normal.1,
            Mode::LcIdle,
            (1, 4),
            [7, 0, 7, 0, 2],
            1_250.5,
            &[400, 520, 610, 2_000_000, 3_000_000_000],
        ),
        decision(28940, lc.0, lc.1, Mode::NoLc, (0, 2), [0; 5], 0.0, &[]),
    ];
    let tenants = vec![
        tenant(1201, "vllm-serve", "inference", lc, 2, 0, &[17068]),
        tenant(1310, "etl", "batch", normal, 1, 1, &[17068]),
        tenant(2045, "python3", "training", be, 3, 3, &[17068]),
        tenant(
            2046,
            "tr\"ain\\er\nx",
            "training",
            be,
            5,
            3,
            &[17068, 28940],
        ),
    ];
    let mut total = Histogram::default();
    for d in &[
        latency(&[0, 3, 180, 250, 260, 300, 310, 700, 1200, 5000, 90_000]),
        latency(&[400, 520, 610, 2_000_000, 3_000_000_000]),
    ] {
        total.merge(d);
    }
    Stats {
        version: kfd_preemptd::stats::STATS_VERSION,
        pid: std::process::id(),
        written_at_unix_ms: 1_764_000_123_456,
        uptime_s: 3_723.125,
        mode: Mode::LcBusy,
        lower_held: true,
        be_held: true,
        lower_run_in_window_ms: 37.25,
        be_run_in_period_ms: 37.25,
        counters: CounterStats {
            preemptions: 48,
            preempt_failures: 1,
            resumes: 47,
            forced_resumes: 3,
            renewals: 120,
            held_total_ms: 24_707.289,
            hints_expired: 12,
            other: Default::default(),
        },
        reaction_latency_us: (&total).into(),
        reaction_phases: (&phases(16)).into(),
        tenants,
        config: ConfigStats {
            lease_ms: 200,
            sample_period_us: 50,
            idle_hysteresis_us: 1000,
            idle_hysteresis_max_us: 4000,
            min_share_period_ms: 1000,
            min_share_budget_ms: 100,
        },
        levels: vec![be.0.into(), normal.0.into(), lc.0.into()],
        decisions,
        hints: HintStats {
            enabled: true,
            accepted: 31,
            refused: [("not-a-tenant".into(), 4), ("rate-limited".into(), 2)].into(),
            ended: 17,
            connections: 2,
        },
    }
}

const USAGE: &str = "usage: metrics_fixture --listen ADDR [--stats-out FILE] | --render";

fn main() -> Result<(), Box<dyn Error>> {
    let stats = fixture();
    let mut args = std::env::args().skip(1);
    let (mut listen, mut stats_out) = (None, None);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--render" => {
                print!("{}", render(&stats));
                return Ok(());
            }
            "--listen" => listen = Some(args.next().ok_or(USAGE)?.parse::<MetricsAddr>()?),
            "--stats-out" => stats_out = Some(PathBuf::from(args.next().ok_or(USAGE)?)),
            _ => return Err(USAGE.into()),
        }
    }
    let listen = listen.ok_or(USAGE)?;
    if let Some(path) = stats_out {
        write_atomic(&path, &stats)?;
    }
    let server = MetricsServer::spawn(&listen)?;
    server.publish(render(&stats));
    println!("listening on {}", server.addr());
    loop {
        thread::park();
    }
}
