//! What a log line costs the thread that logs it: the daemon's own log
//! queue (`log::writer`) against `tracing` with `tracing-subscriber`'s
//! formatter and `tracing-appender`'s non-blocking writer, both writing the
//! same line to `/dev/null` from a thread of their own.
//!
//! The daemon logs from its SCHED_FIFO loop in bursts (four lines a
//! preemption) with the writer idle in between, so that is the pattern
//! measured: bursts of four lines, 1 ms apart. Rounds of the two
//! alternate, so that both see the same machine.
//!
//! usage: cargo run --release -p kfd-preemptd --example log_cost [-- BURSTS]
//! Prints one line per logger: median, p99 and mean nanoseconds per line,
//! and the ratio of the medians. A third line, `tracing` formatting into
//! `io::sink` on the calling thread, tells formatting from hand-over.

use std::{
    fs::File,
    hint::black_box,
    thread,
    time::{Duration, Instant},
};

use kfd_preemptd::{
    config::LogFormat,
    log::{
        writer::{LogWriter, Tuning},
        Level,
    },
};
use serde_json::json;
use tracing_appender::non_blocking::NonBlockingBuilder;

const LINES_PER_BURST: usize = 4;
const ROUNDS: usize = 10;

fn percentile(sorted: &[u64], p: f64) -> u64 {
    let rank = ((p * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

fn report(name: &str, mut ns: Vec<u64>) -> u64 {
    ns.sort_unstable();
    let mean = ns.iter().sum::<u64>() / ns.len().max(1) as u64;
    let p50 = percentile(&ns, 0.5);
    println!(
        "{name:<28} lines {:>6}  p50 {:>6} ns  p99 {:>7} ns  mean {:>6} ns",
        ns.len(),
        p50,
        percentile(&ns, 0.99),
        mean
    );
    p50
}

/// Runs `bursts` bursts of `log` calls, 1 ms apart; the time of each call.
fn bursts(n: usize, mut log: impl FnMut(usize), out: &mut Vec<u64>) {
    for i in 0..n {
        for j in 0..LINES_PER_BURST {
            let t = Instant::now();
            log(i * LINES_PER_BURST + j);
            out.push(t.elapsed().as_nanos() as u64);
        }
        thread::sleep(Duration::from_millis(1));
    }
}

/// The line, through `tracing` to the dispatcher in use.
fn tracing_line(i: usize) {
    tracing::info!(
        event = "preempt",
        gpu_id = 17068,
        queues = black_box(i),
        reason = "lc-busy"
    )
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let total: usize = match std::env::args().nth(1) {
        Some(s) => s.parse()?,
        None => 4000,
    };
    let per_round = total.div_ceil(ROUNDS);

    let ours = LogWriter::spawn_to(
        LogFormat::Text,
        Tuning::default(),
        File::create("/dev/null")?,
    )?;
    let logger = ours.logger();

    let (writer, _guard) = NonBlockingBuilder::default()
        .lossy(true)
        .buffered_lines_limit(Tuning::default().capacity)
        .finish(File::create("/dev/null")?);
    let subscriber = tracing_subscriber::fmt()
        .with_writer(writer)
        .with_ansi(false)
        .with_target(false)
        .finish();
    let dispatch = tracing::Dispatch::new(subscriber);
    // The same formatter writing to nothing, on the calling thread: what
    // of the difference is formatting, and what is the hand-over.
    let format_only = tracing::Dispatch::new(
        tracing_subscriber::fmt()
            .with_writer(std::io::sink)
            .with_ansi(false)
            .with_target(false)
            .finish(),
    );

    let (mut own_ns, mut tracing_ns, mut format_ns) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        bursts(
            per_round,
            |i| {
                logger.log(
                    Level::Info,
                    "preempt",
                    &[
                        ("gpu_id", json!(17068)),
                        ("queues", json!(black_box(i))),
                        ("reason", json!("lc-busy")),
                    ],
                )
            },
            &mut own_ns,
        );
        for (d, out) in [(&dispatch, &mut tracing_ns), (&format_only, &mut format_ns)] {
            tracing::dispatcher::with_default(d, || bursts(per_round, tracing_line, out));
        }
    }
    ours.finish();
    let own = report("log::writer (lock-free)", own_ns);
    let other = report("tracing + tracing-appender", tracing_ns);
    report("tracing, formatted only", format_ns);
    println!(
        "median ratio tracing-appender / log::writer: {:.2}",
        other as f64 / own.max(1) as f64
    );
    Ok(())
}
