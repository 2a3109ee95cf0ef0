//! `two-lc-report`: the two-tenant scenario's report
//! (`tests/vm/two_lc_scenario.sh`). Two latency-critical (LC) tenants on
//! one simulated node, one of short requests and one of long chains,
//! first without best-effort (BE) work and without the daemon, then beside
//! a BE tenant under kfd-preemptd (and, for an A/B comparison, under a
//! second daemon binary). It reports each LC tenant's P99 against its own
//! in the first mode, and BE's throughput.
//!
//! Criterion (a benchmark's, judged by `make scenario` on the bench
//! kernel): under the daemon each LC tenant's P99 is at most
//! [`P99_MAX`]× its P99 without BE work: the LC level does not pay for
//! sharing the node with BE, whichever of its tenants has work.

use std::path::Path;

use serde_json::json;

use crate::{
    report::Criterion,
    results::{read_be, read_lc, write_json, BeResult, LcResult},
    stats::percentile,
    Result,
};

/// Each LC tenant's P99 under the daemon, at most this many times its P99
/// without BE work.
pub const P99_MAX: f64 = 1.1;

/// The two LC tenants' names, as in the result files' names.
const TENANTS: [&str; 2] = ["short", "long"];

/// One mode's results: each LC tenant's, and BE's if it ran.
struct Mode {
    name: &'static str,
    lc: [LcResult; 2],
    be: Option<BeResult>,
}

fn read_mode(dir: &Path, name: &'static str, with_be: bool) -> Result<Mode> {
    let lc = |t: &str| read_lc(&dir.join(format!("lc_{t}_{name}.json")));
    Ok(Mode {
        name,
        lc: [lc(TENANTS[0])?, lc(TENANTS[1])?],
        be: if with_be {
            Some(read_be(&dir.join(format!("be_{name}.json")))?)
        } else {
            None
        },
    })
}

/// Judges `daemon` against `lc_only`: one criterion per LC tenant. A
/// tenant with no completed request in either mode has no P99 to compare:
/// its criterion fails and says so.
fn judge(lc_only: &Mode, daemon: &Mode) -> Vec<Criterion> {
    TENANTS
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let (without, with) = (&lc_only.lc[i], &daemon.lc[i]);
            let empty = without.latencies_ms.is_empty() || with.latencies_ms.is_empty();
            let mut rule =
                format!("the {t} LC tenant's P99 under the daemon at most {P99_MAX}x without BE");
            if empty {
                rule.push_str(" (no completed request in a mode: no P99)");
            }
            Criterion::new(
                format!("lc-{t}-p99"),
                rule,
                if empty {
                    f64::NAN
                } else {
                    with.p99_ms / without.p99_ms
                },
                None,
                Some(P99_MAX),
            )
        })
        .collect()
}

/// Prints the report and writes its JSON; `Ok(false)` if a criterion
/// failed. The mode `before` (a second daemon binary) is reported, with its
/// ratios in the JSON, when its files are there; it is not judged.
pub fn run(dir: &Path, out_json: Option<&Path>) -> Result<bool> {
    let lc_only = read_mode(dir, "lc", false)?;
    let be_alone = read_be(&dir.join("be_alone.json"))?;
    let daemon = read_mode(dir, "daemon", true)?;
    let before = if dir.join("be_before.json").exists() {
        Some(read_mode(dir, "before", true)?)
    } else {
        None
    };
    println!(
        "mode     tenant  LC P50 ms  LC P99 ms  P99/no BE  submit delay P99 ms  node wait P99 ms  BE throughput"
    );
    let p = |v: &[f64]| percentile(v, 0.99).unwrap_or(f64::NAN);
    let mut modes = vec![&lc_only, &daemon];
    modes.extend(before.as_ref());
    for m in &modes {
        for (i, t) in TENANTS.iter().enumerate() {
            let lc = &m.lc[i];
            println!(
                "{:<8} {t:<6} {:>10.2}  {:>9.2}  {:>9.2}  {:>19.2}  {:>16.2}  {}",
                m.name,
                lc.p50_ms,
                lc.p99_ms,
                lc.p99_ms / lc_only.lc[i].p99_ms,
                p(&lc.submit_delay_ms),
                p(&lc.node_wait_ms),
                m.be.as_ref().map_or("-".to_string(), |b| format!(
                    "{:.3} ({:.3} of alone)",
                    b.throughput,
                    b.throughput / be_alone.throughput
                )),
            );
        }
    }
    let criteria = judge(&lc_only, &daemon);
    for c in &criteria {
        c.print("criterion");
    }
    let ratios = |m: &Mode| {
        json!({
            "short": m.lc[0].p99_ms / lc_only.lc[0].p99_ms,
            "long": m.lc[1].p99_ms / lc_only.lc[1].p99_ms,
        })
    };
    let report = json!({
        "lc_p99_ms": modes.iter().map(|m| (m.name.to_string(), json!({
            "short": m.lc[0].p99_ms, "long": m.lc[1].p99_ms,
        }))).collect::<serde_json::Map<_, _>>(),
        "p99_over_no_be": {
            "daemon": ratios(&daemon),
            "before": before.as_ref().map(ratios),
        },
        "be_throughput": {
            "alone": be_alone.throughput,
            "daemon": daemon.be.as_ref().map(|b| b.throughput),
            "before": before.as_ref().and_then(|m| m.be.as_ref()).map(|b| b.throughput),
        },
        "criteria": criteria,
    });
    if let Some(path) = out_json {
        write_json(path, &report)?;
    }
    Ok(criteria.iter().all(|c| c.pass))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lc(p99_ms: f64) -> LcResult {
        LcResult {
            p99_ms,
            latencies_ms: vec![p99_ms],
            ..Default::default()
        }
    }

    #[test]
    fn each_tenant_is_judged_against_its_own_p99_without_be() {
        let lc_only = Mode {
            name: "lc",
            lc: [lc(2.0), lc(20.0)],
            be: None,
        };
        let daemon = Mode {
            name: "daemon",
            lc: [lc(2.4), lc(21.0)],
            be: None,
        };
        let c = judge(&lc_only, &daemon);
        assert_eq!(c.len(), 2);
        // 2.4 / 2.0 = 1.2: the short tenant fails; 21 / 20 = 1.05 passes.
        assert!(!c[0].pass && (c[0].value - 1.2).abs() < 1e-9);
        assert!(c[1].pass && (c[1].value - 1.05).abs() < 1e-9);
    }

    #[test]
    fn a_tenant_without_completed_requests_fails_and_says_so() {
        let lc_only = Mode {
            name: "lc",
            lc: [LcResult::default(), lc(20.0)],
            be: None,
        };
        let daemon = Mode {
            name: "daemon",
            lc: [lc(2.0), lc(20.0)],
            be: None,
        };
        let c = judge(&lc_only, &daemon);
        assert!(!c[0].pass && c[0].rule.contains("no P99"));
        assert!(c[1].pass);
    }
}
