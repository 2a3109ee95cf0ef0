//! `hint-report`: the hint scenario's report (`tests/vm/hint_scenario.sh`).
//! Short latency-critical (LC) requests, each prepared on the host before
//! its first dispatch, beside a best-effort (BE) tenant of long dispatches,
//! on one simulated node: each alone, then under kfd-preemptd without hints
//! and with them, one daemon for both. It reports the LC P99 of each
//! against alone, BE's throughput, how long after a hint the node had BE
//! off (on the node's clock), and how many hints ran out with no work.
//!
//! Criteria (a benchmark's, judged by `make scenario` on the bench kernel):
//! with hints, the LC P99 is at most [`HINT_P99_MAX`]× alone, and BE keeps
//! at least (1 − LC load − [`BE_MARGIN`]) of its throughput alone. Checks
//! (ratios of the run's own numbers, judged by `make check` on the debug
//! kernel): hints at least halve the excess over alone of the P99 of LC's
//! wait on the node, BE keeps at least [`BE_FAIR_HINTED_MIN`] of its fair
//! part (the node time LC neither uses nor claims through its hints), and
//! every hint was taken.

use std::{fs, path::Path};

use kfd_preemptd_stats::Stats;
use serde_json::json;

use crate::{
    host_report::{parse_log, LogRecord},
    report::Criterion,
    results::{read_be, read_lc, write_json, BeResult, LcResult},
    stats::percentile,
    Result,
};

/// The LC P99 with hints, at most this many times alone.
pub const HINT_P99_MAX: f64 = 1.3;
/// BE keeps at least 1 − LC load − this of its throughput alone.
pub const BE_MARGIN: f64 = 0.15;
/// Hints must remove at least this fraction of the node-wait P99 excess
/// that the daemon without hints leaves.
pub const EXCESS_REMOVED_MIN: f64 = 0.5;
/// With hints BE keeps at least this fraction of its fair part.
pub const BE_FAIR_HINTED_MIN: f64 = 0.75;

/// Everything the scenario wrote.
struct Run {
    lc_alone: LcResult,
    be_alone: BeResult,
    lc_daemon: LcResult,
    be_daemon: BeResult,
    lc_hint: LcResult,
    be_hint: BeResult,
    /// The node's preemptions during the hint mode.
    log: Vec<LogRecord>,
    dropped: u64,
    stats: Stats,
}

fn read(dir: &Path) -> Result<Run> {
    let f = |name: &str| dir.join(name);
    let text = fs::read_to_string(f("preempt_log_hint"))
        .map_err(|e| format!("{}: {e}", f("preempt_log_hint").display()))?;
    let (dropped, log) = parse_log(&text)?;
    let stats_text = fs::read_to_string(f("stats_end.json"))
        .map_err(|e| format!("{}: {e}", f("stats_end.json").display()))?;
    Ok(Run {
        lc_alone: read_lc(&f("lc_alone.json"))?,
        be_alone: read_be(&f("be_alone.json"))?,
        lc_daemon: read_lc(&f("lc_daemon.json"))?,
        be_daemon: read_be(&f("be_daemon.json"))?,
        lc_hint: read_lc(&f("lc_hint.json"))?,
        be_hint: read_be(&f("be_hint.json"))?,
        log,
        dropped,
        stats: Stats::from_json(&stats_text).map_err(|e| format!("stats_end.json: {e}"))?,
    })
}

/// For each hint, how long until the node unmapped BE, ms: the first unmap
/// at or after it and before its time (`window_ns`) is over, which is the
/// hint's answer; a hint with BE off already, or answered late, has none.
/// Hints before the log's first record (dropped) are left out; the second
/// value counts the hints the log covers.
fn hint_to_unmap_ms(hints_ns: &[u64], log: &[LogRecord], window_ns: u64) -> (Vec<f64>, usize) {
    let Some(first) = log.first().map(|r| r.unmap_ns) else {
        return (Vec::new(), 0);
    };
    let mut unmaps: Vec<u64> = log.iter().map(|r| r.unmap_ns).collect();
    unmaps.sort_unstable();
    let covered: Vec<u64> = hints_ns.iter().copied().filter(|&h| h >= first).collect();
    let answered = covered
        .iter()
        .filter_map(|&h| {
            let i = unmaps.partition_point(|&u| u < h);
            unmaps
                .get(i)
                .filter(|&&u| u - h < window_ns)
                .map(|&u| (u - h) as f64 / 1e6)
        })
        .collect();
    (answered, covered.len())
}

/// The LC P99's excess over alone, ms.
fn excess(lc: &LcResult, alone: &LcResult) -> f64 {
    lc.p99_ms - alone.p99_ms
}

/// The P99 of how long LC's first dispatches waited on the node (behind BE
/// until it left), ms: the part of a request's latency that a preemption
/// shortens, read on the node's own clock. The rest of the excess is the
/// tenant's process woken late, which a TCG VM's CPU moves by more than
/// the daemon does.
fn node_wait_p99(lc: &LcResult) -> f64 {
    percentile(&lc.node_wait_ms, 0.99).unwrap_or(f64::NAN)
}

/// The fraction of the excess `without` (ms over alone) that `with` no
/// longer has. With no excess to remove, the answer is whether hints add
/// none.
fn removed(without: f64, with: f64) -> f64 {
    if without > 0.0 {
        1.0 - with / without
    } else if with <= 0.0 {
        1.0
    } else {
        0.0
    }
}

/// The node time LC uses or claims with hints, as a fraction: its load, and
/// from each hint on its preparation too, which BE is to lose by design.
fn claimed_with_hints(lc: &LcResult) -> f64 {
    lc.load() + lc.rate * lc.prep_ms / 1000.0
}

/// BE's throughput `be` against its fair part, the node time LC leaves it
/// (`1 - claimed`) of its throughput `alone`; NaN, which fails, if LC
/// leaves it none, for then the check judges nothing.
fn fair_part_kept(be: f64, alone: f64, claimed: f64) -> f64 {
    let fair = (1.0 - claimed) * alone;
    if fair > 0.0 {
        be / fair
    } else {
        f64::NAN
    }
}

/// Judges the run: (criteria, checks).
fn judge(r: &Run) -> (Vec<Criterion>, Vec<Criterion>) {
    let load = r.lc_alone.load();
    let be_floor = 1.0 - load - BE_MARGIN;
    let be_kept = r.be_hint.throughput / r.be_alone.throughput;
    let criteria = vec![
        Criterion::new(
            "lc-p99-hinted",
            format!("LC P99 with hints at most {HINT_P99_MAX}x alone"),
            r.lc_hint.p99_ms / r.lc_alone.p99_ms,
            None,
            Some(HINT_P99_MAX),
        ),
        Criterion::new(
            "be-throughput-hinted",
            format!("BE with hints keeps at least 1 - LC load ({load:.3}) - {BE_MARGIN} of alone"),
            be_kept,
            Some(be_floor),
            None,
        ),
    ];
    let wait_alone = node_wait_p99(&r.lc_alone);
    let without = node_wait_p99(&r.lc_daemon) - wait_alone;
    let with = node_wait_p99(&r.lc_hint) - wait_alone;
    let claimed = claimed_with_hints(&r.lc_hint);
    let checks = vec![
        Criterion::new(
            "hints-halve-the-node-wait-excess",
            format!(
                "hints remove at least {EXCESS_REMOVED_MIN} of the excess over alone of LC's node-wait P99 that the daemon leaves without them ({without:.2} ms; of the whole P99, {:.2} ms without hints and {:.2} ms with them)",
                excess(&r.lc_daemon, &r.lc_alone),
                excess(&r.lc_hint, &r.lc_alone)
            ),
            removed(without, with),
            Some(EXCESS_REMOVED_MIN),
            None,
        ),
        Criterion::new(
            "be-fair-part-hinted",
            format!("BE with hints keeps at least {BE_FAIR_HINTED_MIN} of its fair part, (1 - LC load - the preparation hints cover, {claimed:.3}) x alone"),
            fair_part_kept(r.be_hint.throughput, r.be_alone.throughput, claimed),
            Some(BE_FAIR_HINTED_MIN),
            None,
        ),
        Criterion::new(
            "every-hint-taken",
            "hints refused by the daemon, of those given".into(),
            r.lc_hint.hints_refused as f64,
            None,
            Some(0.0),
        ),
    ];
    (criteria, checks)
}

/// Prints the report and writes its JSON; `Ok(false)` if a criterion
/// failed (the checks are in the JSON, for `make check`).
pub fn run(dir: &Path, out_json: Option<&Path>) -> Result<bool> {
    let r = read(dir)?;
    let (criteria, checks) = judge(&r);
    let window_ns = (r.lc_hint.hint_within_ms * 1e6) as u64;
    let (answers, covered) = hint_to_unmap_ms(&r.lc_hint.hints_ns, &r.log, window_ns);
    let q = |p| percentile(&answers, p).unwrap_or(f64::NAN);
    let accepted = r.stats.hints.accepted;
    let expired = r.stats.counters.hints_expired;
    println!(
        "mode     LC P50 ms  LC P99 ms  P99/alone  BE throughput  submit delay P50/P99 ms  node wait P50/P99 ms"
    );
    for (mode, lc, be) in [
        ("alone", &r.lc_alone, &r.be_alone),
        ("daemon", &r.lc_daemon, &r.be_daemon),
        ("hints", &r.lc_hint, &r.be_hint),
    ] {
        // Where a request's start went: the host (late to submit, or the
        // preparation) and the node (waiting behind BE).
        let p = |v: &[f64], q| percentile(v, q).unwrap_or(f64::NAN);
        println!(
            "{mode:<8} {:>9.2}  {:>9.2}  {:>9.2}  {:>13.3}  {:>10.2} / {:>8.2}     {:>8.2} / {:>8.2}",
            lc.p50_ms,
            lc.p99_ms,
            lc.p99_ms / r.lc_alone.p99_ms,
            be.throughput,
            p(&lc.submit_delay_ms, 0.5),
            p(&lc.submit_delay_ms, 0.99),
            p(&lc.node_wait_ms, 0.5),
            p(&lc.node_wait_ms, 0.99),
        );
    }
    println!(
        "hints: {} given, {} refused; {} answered by an unmap within their {:.1} ms of {} the node's log covers ({} records dropped; the others found BE off already, or were answered late), hint to BE unmapped p50 {:.3} ms, p99 {:.3} ms; {expired} of {accepted} ran out with no work",
        r.lc_hint.hints_ns.len(),
        r.lc_hint.hints_refused,
        answers.len(),
        r.lc_hint.hint_within_ms,
        covered,
        r.dropped,
        q(0.5),
        q(0.99)
    );
    for (kind, list) in [("criterion", &criteria), ("check", &checks)] {
        for c in list {
            c.print(kind);
        }
    }
    let report = json!({
        "lc_p99_ms": {"alone": r.lc_alone.p99_ms, "daemon": r.lc_daemon.p99_ms, "hints": r.lc_hint.p99_ms},
        "be_throughput": {"alone": r.be_alone.throughput, "daemon": r.be_daemon.throughput, "hints": r.be_hint.throughput},
        "lc_load": r.lc_alone.load(),
        "hints_given": r.lc_hint.hints_ns.len(),
        "hints_refused": r.lc_hint.hints_refused,
        "hint_to_unmap_ms": {"p50": q(0.5), "p99": q(0.99), "answered": answers.len(), "covered": covered},
        "hints_accepted": accepted,
        "hints_expired": expired,
        "criteria": criteria,
        "checks": checks,
    });
    if let Some(path) = out_json {
        write_json(path, &report)?;
    }
    Ok(criteria.iter().all(|c| c.pass))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(unmap_ns: u64) -> LogRecord {
        LogRecord {
            unmap_ns,
            queues: 1,
            doorbell_ns: 0,
        }
    }

    #[test]
    fn bes_fair_part_with_hints_leaves_out_lc_load_and_preparation() {
        // 60 requests a second, 2 ms of work and 8 ms of preparation each.
        let lc = LcResult {
            rate: 60.0,
            work_ms_per_request: 2.0,
            prep_ms: 8.0,
            ..LcResult::default()
        };
        let claimed = claimed_with_hints(&lc);
        assert!((claimed - 0.6).abs() < 1e-9, "{claimed}");
        assert!((fair_part_kept(0.3, 1.0, claimed) - 0.75).abs() < 1e-9);
        // Nothing left to BE: nothing to judge, which fails.
        assert!(fair_part_kept(0.3, 1.0, 1.2).is_nan());
    }

    #[test]
    fn the_excess_removed_is_the_part_hints_take_off_what_the_daemon_leaves() {
        assert_eq!(removed(2.0, 0.5), 0.75);
        assert_eq!(removed(2.0, 3.0), -0.5);
        // Nothing to remove: hints must add nothing.
        assert_eq!(removed(0.0, -0.1), 1.0);
        assert_eq!(removed(-0.2, 0.1), 0.0);
    }

    #[test]
    fn a_hint_is_answered_by_the_first_unmap_after_it_within_the_window() {
        let ms = 1_000_000;
        let log = [rec(10 * ms), rec(13 * ms), rec(500 * ms)];
        let hints = [5 * ms, 12 * ms, 20 * ms, 399 * ms];
        let (answers, covered) = hint_to_unmap_ms(&hints, &log, 100 * ms);
        // 5 ms is before the log's first record; 20 ms finds none within
        // 100 ms (the next is at 500 ms), 399 ms finds it 101 ms on: no.
        assert_eq!(covered, 3);
        assert_eq!(answers, [1.0]);
    }
}
