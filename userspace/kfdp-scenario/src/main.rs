//! kfdp-scenario: the workloads and the report of the "LC next to BE on one
//! node" experiment on the module's simulated nodes, and the other
//! developer measurements.
//!
//! * `lc`: a latency-critical tenant, open-loop Poisson requests of chained
//!   dispatches on a priority-9 ring; writes the latency of each.
//! * `be`: a best-effort tenant keeping long dispatches queued on a
//!   priority-1 ring; writes the node time it got done.
//! * `report`: compares alone / together / with the daemon against the
//!   contention model and the criteria (exit status 1 if any fails),
//!   and computes the wider, run-relative checks `make check` judges.
//! * `detect`: how fast and at what CPU cost a scheduler learns that a
//!   queue got work: ARM (the module's timer and an eventfd) vs polling
//!   SAMPLE vs spinning on it, against a tenant in another process.
//! * `bench`: one PREEMPT batch vs K single-entry PREEMPTs vs P FREEZEs
//!   (and, with `--hardware`, the KFD debugger's SUSPEND_QUEUES) on a
//!   simulated node or real queues; `chart` redraws its SVG from its JSON;
//!   `sim-tenant` is a process holding queues on a simulated node (the
//!   bench's tenants, and the VM tests' and the demo's).
//! * `soak`: kfd-preemptd against the tenant zoo (processes that fork,
//!   exec, re-create queues and die), its invariants checked all along.
//! * `hint-probe`: a tenant that gives kfd-preemptd one hint and makes no
//!   work, for the VM test of hints; `hint-report` judges the hint
//!   scenario (short requests prepared on the host, with hints and
//!   without); `two-lc-report` judges the two-tenant scenario (two
//!   latency-critical tenants on one node beside best-effort work).
//!
//! A developer tool, not packaged: the operator's commands are
//! `kfd-preempt`'s.
//!
//! Latencies are end_ns of a request's last packet (stamped by the node with
//! CLOCK_MONOTONIC) minus the request's arrival time (when it was due, so a
//! late submission counts). Numbers from the simulated node reflect its
//! modelled costs, not a GPU's.

mod be;
mod bench;
mod bench_results;
mod chart;
mod clock;
mod contention_replay;
mod cpu;
mod debugger;
mod detect;
mod detect_table;
mod hint_probe;
mod hint_report;
mod host_report;
mod latency_chart;
mod lc;
mod probe;
mod report;
mod results;
mod rng;
mod soak;
mod stats;
mod tenant;
mod two_lc_report;
mod zoo;

use std::{path::PathBuf, process::ExitCode, time::Duration};

use clap::{Parser, Subcommand};
use serde_json::json;

/// Errors end the program with a message.
pub type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

#[derive(Parser)]
#[command(
    name = "kfdp-scenario",
    about = "kfd_preempt developer tool (not packaged): scenario workloads and report, detection latency, the bench",
    version
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Latency-critical tenant: Poisson requests of `chain` dispatches.
    Lc {
        #[command(flatten)]
        args: lc::LcArgs,
        /// Result JSON.
        #[arg(long)]
        out: PathBuf,
    },
    /// Best-effort tenant: keeps `depth` long dispatches outstanding.
    Be {
        #[command(flatten)]
        args: be::BeArgs,
        /// Result JSON.
        #[arg(long)]
        out: PathBuf,
    },
    /// The host scenario's report (tests/vm/host_scenario.sh): judges each
    /// node; exit status 1 if a criterion fails.
    HostReport {
        /// The scenario's directory (its result files).
        #[arg(long)]
        dir: PathBuf,
        /// Nodes 0..N each had a best-effort tenant.
        #[arg(long)]
        nodes: u32,
        /// Nodes with a latency-critical tenant, judged (comma-separated).
        #[arg(long, value_delimiter = ',')]
        lc_nodes: Vec<u32>,
        /// Nodes with the short-request tenant, reported (comma-separated).
        #[arg(long, value_delimiter = ',')]
        short_nodes: Vec<u32>,
        /// Nodes with a tenant whose requests have gaps between their
        /// dispatches (`lc --gap-ms`), reported and judged by the
        /// preemptions a request cost (comma-separated).
        #[arg(long, value_delimiter = ',')]
        seq_nodes: Vec<u32>,
        /// kfd-preemptd's statistics at the end of its run.
        #[arg(long)]
        stats: PathBuf,
        /// Where to write the report's JSON.
        #[arg(long)]
        out_json: Option<PathBuf>,
    },
    /// The hint scenario's report (tests/vm/hint_scenario.sh): exit status
    /// 1 if a criterion fails.
    HintReport {
        /// The scenario's directory (its result files).
        #[arg(long)]
        dir: PathBuf,
        /// Where to write the report's JSON.
        #[arg(long)]
        out_json: Option<PathBuf>,
    },
    /// The two-tenant scenario's report (tests/vm/two_lc_scenario.sh):
    /// exit status 1 if a criterion fails.
    TwoLcReport {
        /// The scenario's directory (its result files).
        #[arg(long)]
        dir: PathBuf,
        /// Where to write the report's JSON.
        #[arg(long)]
        out_json: Option<PathBuf>,
    },
    /// Gives kfd-preemptd one hint from a tenant that makes no work, and
    /// writes the answer (tests/vm/hint_test.sh).
    HintProbe(hint_probe::HintProbeArgs),
    /// Fetches kfd-preemptd's metrics from its Unix socket (the VM has no
    /// HTTP client) and writes the body.
    Scrape {
        /// The daemon's `metrics` socket path.
        #[arg(long)]
        unix: PathBuf,
        /// Where to write the exposition text.
        #[arg(long)]
        out: PathBuf,
    },
    /// Compares the three modes; exit status 1 if a criterion fails.
    Report {
        /// LC result, LC alone on the node.
        #[arg(long)]
        alone_lc: PathBuf,
        /// BE result, BE alone on the node.
        #[arg(long)]
        alone_be: PathBuf,
        /// LC result, both tenants, no daemon.
        #[arg(long)]
        together_lc: PathBuf,
        /// BE result, both tenants, no daemon.
        #[arg(long)]
        together_be: PathBuf,
        /// LC result, both tenants and the daemon.
        #[arg(long)]
        daemon_lc: PathBuf,
        /// BE result, both tenants and the daemon.
        #[arg(long)]
        daemon_be: PathBuf,
        /// Node time of one BE dispatch, ms (the model's D).
        #[arg(long, default_value_t = 250.0)]
        be_work_ms: f64,
        /// Report JSON: every number and the criteria.
        #[arg(long)]
        out_json: Option<PathBuf>,
        /// Chart of the LC latency per mode.
        #[arg(long)]
        out_svg: Option<PathBuf>,
    },
    /// Detection latency and CPU cost of ARM vs polling vs spinning on
    /// SAMPLE (root; module loaded with sim_nodes >= 1). Exit status 1 if
    /// a method failed.
    Detect {
        /// Simulated node index of the tenant's ring.
        #[arg(long, default_value_t = 0)]
        node: u32,
        /// Trials per method.
        #[arg(long, default_value_t = 200)]
        trials: u32,
        /// Periods of the arm and poll methods, µs.
        #[arg(long, value_delimiter = ',', default_values_t = [20u32, 50, 100, 1000])]
        periods_us: Vec<u32>,
        /// Which detectors.
        #[arg(long, value_enum, value_delimiter = ',', default_values = ["arm", "poll", "spin"])]
        methods: Vec<detect::Kind>,
        /// Length of each no-work CPU measurement, s.
        #[arg(long, default_value_t = 1.0)]
        idle_s: f64,
        /// Calls timed for each ioctl's cost.
        #[arg(long, default_value_t = 20_000)]
        calls: u32,
        /// Node time of each dispatch, µs.
        #[arg(long, default_value_t = 1)]
        work_us: u64,
        /// Seed of the random gaps.
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Result JSON.
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// Benchmark batch vs single-entry PREEMPT vs FREEZE on simulated nodes
    /// (or, with --hardware, on real queues).
    Bench(bench::BenchArgs),
    /// Draw the chart of a `bench --json` file as SVG.
    Chart {
        /// The bench's JSON.
        input: PathBuf,
        /// Where to write the SVG.
        #[arg(short, long)]
        output: PathBuf,
    },
    /// Be a simulated tenant: create queues on a simulated node and keep
    /// them until stdin closes or a signal arrives (for the bench, demos and
    /// tests).
    SimTenant(tenant::TenantArgs),
    /// kfd-preemptd (already running) against a random, changing mix of
    /// tenants that fork, exec, re-create their queues and die, on many
    /// simulated nodes, checked all along (exit 1 on a violation).
    Soak(soak::SoakArgs),
    /// A tenant of the soak's zoo (internal).
    #[command(hide = true)]
    ZooTenant(zoo::ZooArgs),
    /// The tenant process `detect` starts (internal).
    #[command(hide = true)]
    DetectTenant {
        /// Simulated node index.
        #[arg(long)]
        node: u32,
        /// Node time of each dispatch, ns.
        #[arg(long)]
        work_ns: u64,
    },
}

/// Runs `report`; Ok(false) if a criterion failed.
fn run_report(
    files: [&PathBuf; 6],
    be_work_ms: f64,
    out_json: Option<&PathBuf>,
    out_svg: Option<&PathBuf>,
) -> Result<bool> {
    let [alone_lc, alone_be, together_lc, together_be, daemon_lc, daemon_be] = files;
    let alone = (results::read_lc(alone_lc)?, results::read_be(alone_be)?);
    let together = (
        results::read_lc(together_lc)?,
        results::read_be(together_be)?,
    );
    let daemon = (results::read_lc(daemon_lc)?, results::read_be(daemon_be)?);
    let inputs = report::inputs(
        (&alone.0, &alone.1),
        (&together.0, &together.1),
        (&daemon.0, &daemon.1),
        be_work_ms,
    );
    let rows = report::rows(&inputs);
    let evaluation = report::evaluate(&inputs);
    print!("{}", report::render(&rows, &evaluation));
    for (mode, lc) in [
        ("alone", &alone.0),
        ("together", &together.0),
        ("daemon", &daemon.0),
    ] {
        if lc.incomplete > 0 || lc.late_submits > 0 {
            eprintln!(
                "note: {mode} LC had {} unfinished and {} late request(s)",
                lc.incomplete, lc.late_submits
            );
        }
    }
    if let Some(path) = out_json {
        let value = json!({
            "note": "simulated node, modelled cost",
            "inputs": inputs,
            "rows": rows,
            "predicted_together_p99_ms": evaluation.predicted_together_p99_ms,
            "criteria": evaluation.criteria,
            "pass": evaluation.all_pass(),
            "checks": evaluation.checks,
        });
        results::write_json(path, &value)?;
    }
    if let Some(path) = out_svg {
        let cdfs = [
            ("alone", alone.0.latencies_ms.as_slice()),
            ("together", together.0.latencies_ms.as_slice()),
            ("daemon", daemon.0.latencies_ms.as_slice()),
        ];
        let svg = latency_chart::chart(&rows, &cdfs, evaluation.predicted_together_p99_ms)?;
        std::fs::write(path, svg).map_err(|e| format!("writing {}: {e}", path.display()))?;
    }
    Ok(evaluation.all_pass())
}

/// One `GET /metrics` over the Unix socket at `path`: the body of a 200.
fn scrape(path: &std::path::Path) -> Result<String> {
    use std::io::{Read, Write};
    let mut c = std::os::unix::net::UnixStream::connect(path)
        .map_err(|e| format!("connecting to {}: {e}", path.display()))?;
    c.write_all(b"GET /metrics HTTP/1.0\r\n\r\n")?;
    let mut reply = String::new();
    c.read_to_string(&mut reply)?;
    let (head, body) = reply
        .split_once("\r\n\r\n")
        .ok_or("the reply has no header end")?;
    if head.split_whitespace().nth(1) != Some("200") {
        let status = head.lines().next().unwrap_or("");
        return Err(format!("the reply is not a 200: {status}").into());
    }
    Ok(body.to_string())
}

fn run(cli: Cli) -> Result<bool> {
    match cli.command {
        Command::HintReport { dir, out_json } => hint_report::run(&dir, out_json.as_deref()),
        Command::TwoLcReport { dir, out_json } => two_lc_report::run(&dir, out_json.as_deref()),
        Command::HintProbe(args) => {
            hint_probe::run(&args)?;
            Ok(true)
        }
        Command::Scrape { unix, out } => {
            let body = scrape(&unix)?;
            std::fs::write(&out, body).map_err(|e| format!("writing {}: {e}", out.display()))?;
            Ok(true)
        }
        Command::HostReport {
            dir,
            nodes,
            lc_nodes,
            short_nodes,
            seq_nodes,
            stats,
            out_json,
        } => {
            let r = host_report::evaluate(&host_report::HostArgs {
                dir,
                nodes,
                lc_nodes,
                short_nodes,
                seq_nodes,
                stats,
            })?;
            print!("{}", r.text);
            if let Some(path) = out_json {
                results::write_json(&path, &r.json)?;
            }
            Ok(r.pass)
        }
        Command::Lc { args, out } => {
            let r = lc::run(&args)?;
            results::write_json(&out, &r)?;
            println!(
                "lc: {} request(s), P50 {:.2} ms, P99 {:.2} ms, P99.9 {:.2} ms",
                r.requests, r.p50_ms, r.p99_ms, r.p999_ms
            );
            Ok(true)
        }
        Command::Be { args, out } => {
            let r = be::run(&args)?;
            results::write_json(&out, &r)?;
            println!(
                "be: {} dispatch(es) completed, {:.0} ms of work, throughput {:.3}",
                r.dispatches_completed, r.work_done_ms, r.throughput
            );
            Ok(true)
        }
        Command::Report {
            alone_lc,
            alone_be,
            together_lc,
            together_be,
            daemon_lc,
            daemon_be,
            be_work_ms,
            out_json,
            out_svg,
        } => run_report(
            [
                &alone_lc,
                &alone_be,
                &together_lc,
                &together_be,
                &daemon_lc,
                &daemon_be,
            ],
            be_work_ms,
            out_json.as_ref(),
            out_svg.as_ref(),
        ),
        Command::Detect {
            node,
            trials,
            periods_us,
            methods,
            idle_s,
            calls,
            work_us,
            seed,
            out,
        } => {
            let idle = Duration::try_from_secs_f64(idle_s)
                .map_err(|_| "--idle-s must be a finite, non-negative number")?;
            let r = detect::run(&detect::DetectArgs {
                node,
                trials,
                periods_us,
                kinds: methods,
                idle,
                calls,
                work_us,
                seed,
            })?;
            print!("{}", detect_table::render(&r));
            if let Some(path) = &out {
                results::write_json(path, &r)?;
            }
            Ok(r.complete())
        }
        Command::Bench(args) => {
            bench::run(&args)?;
            Ok(true)
        }
        Command::Chart { input, output } => {
            chart::from_file(&input, &output)?;
            Ok(true)
        }
        Command::SimTenant(args) => {
            tenant::run(&args)?;
            Ok(true)
        }
        Command::Soak(args) => soak::run(&args),
        Command::ZooTenant(args) => {
            zoo::run(&args)?;
            Ok(true)
        }
        Command::DetectTenant { node, work_ns } => {
            probe::run_tenant(node, work_ns)?;
            Ok(true)
        }
    }
}

fn main() -> ExitCode {
    match run(Cli::parse()) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("kfdp-scenario: {e}");
            ExitCode::from(2)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn cli_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn the_bench_starts_its_tenants_as_sim_tenant() {
        let args = std::iter::once("kfdp-scenario".to_string()).chain(bench::sim_tenant_args(1, 5));
        match Cli::try_parse_from(args).map(|c| c.command) {
            Ok(Command::SimTenant(t)) => {
                assert_eq!((t.node, t.queues, t.priority, t.stdin), (1, 5, 7, true));
            }
            _ => panic!("the bench's tenant command line does not parse"),
        }
    }

    #[test]
    fn bench_and_chart_take_their_options() {
        let cli = Cli::try_parse_from([
            "kfdp-scenario",
            "bench",
            "--queues",
            "1,64",
            "--processes",
            "1",
            "--cost",
            "zero",
            "--json",
            "b.json",
            "--svg",
            "b.svg",
            "--label",
            "x",
        ]);
        assert!(matches!(cli.map(|c| c.command), Ok(Command::Bench(_))));
        let cli = Cli::try_parse_from([
            "kfdp-scenario",
            "bench",
            "--hardware",
            "--workload",
            "kfdp-hw-tenant",
            "--reps",
            "1000",
            "--budget-ms",
            "120000",
        ]);
        assert!(matches!(cli.map(|c| c.command), Ok(Command::Bench(_))));
        assert!(Cli::try_parse_from(["kfdp-scenario", "bench", "--cost", "free"]).is_err());
        match Cli::try_parse_from(["kfdp-scenario", "chart", "in.json", "-o", "out.svg"])
            .map(|c| c.command)
        {
            Ok(Command::Chart { input, output }) => {
                assert_eq!((input, output), ("in.json".into(), "out.svg".into()));
            }
            _ => panic!("chart did not parse"),
        }
        let help = Cli::command().render_help().to_string();
        assert!(["bench", "chart", "sim-tenant"]
            .iter()
            .all(|c| help.contains(c)));
    }

    #[test]
    fn detect_takes_lists_and_has_the_briefs_defaults() {
        let cli = Cli::try_parse_from(["kfdp-scenario", "detect"]).unwrap();
        match cli.command {
            Command::Detect {
                trials,
                periods_us,
                methods,
                idle_s,
                calls,
                work_us,
                out,
                ..
            } => {
                assert_eq!((trials, calls, work_us, idle_s), (200, 20_000, 1, 1.0));
                assert_eq!(periods_us, [20, 50, 100, 1000]);
                assert_eq!(
                    methods,
                    [detect::Kind::Arm, detect::Kind::Poll, detect::Kind::Spin]
                );
                assert_eq!(out, None);
            }
            _ => panic!("detect did not parse"),
        }
        let cli = Cli::try_parse_from([
            "kfdp-scenario",
            "detect",
            "--periods-us",
            "50,200",
            "--methods",
            "spin,arm",
            "--out",
            "d.json",
        ])
        .unwrap();
        match cli.command {
            Command::Detect {
                periods_us,
                methods,
                out,
                ..
            } => {
                assert_eq!(periods_us, [50, 200]);
                assert_eq!(methods, [detect::Kind::Spin, detect::Kind::Arm]);
                assert_eq!(out, Some(PathBuf::from("d.json")));
            }
            _ => panic!("detect did not parse"),
        }
        assert!(Cli::try_parse_from(["kfdp-scenario", "detect", "--methods", "busy"]).is_err());
        // The tenant's subcommand exists but is not advertised.
        let help = Cli::command().render_help().to_string();
        assert!(help.contains("detect") && !help.contains("detect-tenant"));
        assert!(Cli::try_parse_from([
            "kfdp-scenario",
            "detect-tenant",
            "--node",
            "1",
            "--work-ns",
            "1000"
        ])
        .is_ok());
    }
}
