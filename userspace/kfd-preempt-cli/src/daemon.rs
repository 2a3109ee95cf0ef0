//! `kfd-preempt daemon`: a top-like view of kfd-preemptd's statistics
//! file.
//!
//! The file's schema belongs to the daemon (`"version": 1`, fields may be
//! added within a version), so it is read as a `serde_json::Value` and
//! every field is optional here: a missing one shows as `-`, an unknown
//! counter is listed with the known ones, and a newer version is named in
//! the header rather than refused.

use std::{
    fmt::Write as _,
    fs,
    io::{self, Write as _},
    path::{Path, PathBuf},
    thread::sleep,
    time::{Duration, Instant, SystemTime, UNIX_EPOCH},
};

use clap::Args;
use kfd_preemptd_stats::{
    ConfigStats, CounterStats, DecisionStats, LatencyStats, Stats, TenantStats, STATS_VERSION,
};
use serde_json::Value;

use kfd_preempt::signals::Release;

use crate::{CliResult, Done};

/// Where kfd-preemptd writes its statistics unless configured otherwise.
pub(crate) const DEFAULT_STATS: &str = "/run/kfd-preemptd/stats.json";

/// Width of the longest histogram bar.
const BAR_WIDTH: u64 = 40;

/// How often the watch loop checks for Ctrl-C between refreshes.
const TICK: Duration = Duration::from_millis(50);

/// Arguments of `kfd-preempt daemon`.
#[derive(Args, Clone, Debug)]
pub(crate) struct DaemonArgs {
    /// The daemon's statistics file.
    #[arg(long = "stats", value_name = "PATH", default_value = DEFAULT_STATS)]
    stats: PathBuf,
    /// Refresh every SECS seconds until Ctrl-C.
    #[arg(long, value_name = "SECS", conflicts_with = "json")]
    watch: Option<f64>,
    /// Print the file's JSON unchanged.
    #[arg(long)]
    json: bool,
}

/// Reads the statistics file, saying what to check if it is missing.
fn read(path: &Path) -> Result<String, String> {
    fs::read_to_string(path).map_err(|e| match e.kind() {
        io::ErrorKind::NotFound => {
            format!(
                "{} does not exist: is kfd-preemptd running?",
                path.display()
            )
        }
        _ => format!("cannot read {}: {e}", path.display()),
    })
}

/// Parses the statistics text into the daemon's own schema
/// ([`kfd_preemptd_stats`]): a field missing from an older daemon's file
/// takes its default, one added by a newer daemon is ignored.
fn parse(path: &Path, text: &str) -> Result<Stats, String> {
    Stats::from_json(text).map_err(|e| {
        format!(
            "{} is not kfd-preemptd's statistics ({e}): is it the daemon's statistics file?",
            path.display()
        )
    })
}

/// A JSON value of a counter this schema does not name: numbers as
/// written (floats with one decimal), anything else as JSON.
fn cell(v: &Value) -> String {
    match v {
        Value::Number(n) => match (n.as_u64(), n.as_i64(), n.as_f64()) {
            (Some(u), _, _) => u.to_string(),
            (None, Some(i), _) => i.to_string(),
            (None, None, Some(f)) => format!("{f:.1}"),
            _ => n.to_string(),
        },
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn yes_no(b: bool) -> &'static str {
    if b {
        "yes"
    } else {
        "no"
    }
}

/// A duration in seconds as `1h02m03s`, `4m05s` or `6.7s`.
fn uptime(s: f64) -> String {
    if !s.is_finite() || s < 0.0 {
        return "-".into();
    }
    // Whole seconds: fits, uptimes are far below 2^64 s.
    let whole = s as u64;
    let (h, m, sec) = (whole / 3600, whole / 60 % 60, whole % 60);
    if h > 0 {
        format!("{h}h{m:02}m{sec:02}s")
    } else if m > 0 {
        format!("{m}m{sec:02}s")
    } else {
        format!("{s:.1}s")
    }
}

/// `counter_name_ms` as `counter name` and its unit.
fn counter_label(key: &str) -> (String, &'static str) {
    match key.strip_suffix("_ms") {
        Some(base) => (base.replace('_', " "), " ms"),
        None => (key.replace('_', " "), ""),
    }
}

/// The counters, the schema's first, then any of a newer daemon, sorted.
fn render_counters(out: &mut String, c: &CounterStats) {
    let mut cells: Vec<(String, String)> = vec![
        ("preemptions".into(), c.preemptions.to_string()),
        ("preempt_failures".into(), c.preempt_failures.to_string()),
        ("resumes".into(), c.resumes.to_string()),
        ("forced_resumes".into(), c.forced_resumes.to_string()),
        ("renewals".into(), c.renewals.to_string()),
        ("held_total_ms".into(), format!("{:.1}", c.held_total_ms)),
    ];
    cells.extend(c.other.iter().map(|(k, v)| (k.clone(), cell(v))));
    out.push_str("counters:\n");
    for pair in cells.chunks(2) {
        let cells: Vec<String> = pair
            .iter()
            .map(|(k, v)| {
                let (label, unit) = counter_label(k);
                format!("{label:<18} {v:>12}{unit:<3}")
            })
            .collect();
        let _ = writeln!(out, "  {}", cells.join("   ").trim_end());
    }
}

/// The per-tenant table.
fn render_tenants(out: &mut String, tenants: &[TenantStats]) {
    if tenants.is_empty() {
        out.push_str("tenants: none attached\n");
        return;
    }
    let _ = writeln!(
        out,
        "tenants:\n  {:>7}  {:<16} {:<16} {:<17} {:>6}  {:<5}  NODES",
        "PID", "COMM", "CLASS", "PRIORITY", "QUEUES", "HELD"
    );
    for t in tenants {
        // A tenant held on some nodes only shows how many of its queues.
        let held = if t.held_queues > 0 && t.held_queues < t.queues {
            format!("{}/{}", t.held_queues, t.queues)
        } else {
            yes_no(t.held).to_string()
        };
        let nodes = if t.nodes.is_empty() {
            "-".to_string()
        } else {
            let hex: Vec<String> = t.nodes.iter().map(|g| format!("{g:#x}")).collect();
            hex.join(",")
        };
        let _ = writeln!(
            out,
            "  {:>7}  {:<16} {:<16} {:<17} {:>6}  {:<5}  {}",
            t.pid, t.comm, t.class, t.priority, t.queues, held, nodes
        );
    }
}

/// The mean of `h`, µs, or `-`.
fn mean_us(h: &LatencyStats) -> String {
    h.mean_us().map_or_else(|| "-".into(), |m| m.to_string())
}

/// The per-decision table: one row per node and watched level.
fn render_decisions(out: &mut String, decisions: &[DecisionStats]) {
    if decisions.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "decisions (a level's work on a node against the lower levels there):\n  \
         {:<8} {:<17} {:<8} {:<5} {:>7} {:>5} {:>8} {:>7} {:>12} {:>9} {:>7}",
        "GPU_ID",
        "LEVEL",
        "MODE",
        "HELD",
        "WATCHED",
        "LOWER",
        "PREEMPTS",
        "RESUMES",
        "HELD_MS",
        "MEAN_US",
        "IDLE_US"
    );
    for d in decisions {
        let _ = writeln!(
            out,
            "  {:<8} {:<17} {:<8} {:<5} {:>7} {:>5} {:>8} {:>7} {:>12} {:>9} {:>7}",
            format!("{:#x}", d.gpu_id),
            d.level,
            d.mode.as_str(),
            yes_no(d.held),
            d.watched_queues,
            d.lower_queues,
            d.counters.preemptions,
            d.counters.resumes,
            format!("{:.1}", d.counters.held_total_ms),
            mean_us(&d.reaction_latency_us),
            d.idle_hysteresis_us
        );
    }
    out.push('\n');
}

/// The reaction-latency histogram, one row per non-empty bucket.
fn render_latency(out: &mut String, h: &LatencyStats) {
    let mean = h
        .mean_us()
        .map_or_else(|| "-".into(), |m| format!("{m} us"));
    let _ = writeln!(
        out,
        "reaction latency (busy edge to lower levels preempted): {} recorded, mean {mean}, max {} us",
        h.count, h.max_us
    );
    let peak = h.buckets.iter().map(|b| b.count).max().unwrap_or(0);
    for b in &h.buckets {
        let range = match b.high_us {
            Some(high) => format!("[{}, {high})", b.low_us),
            // The last, open bucket.
            None => format!(">= {}", b.low_us),
        };
        // At least one mark for a non-empty bucket.
        let marks = match peak {
            0 => 0,
            _ => b.count.saturating_mul(BAR_WIDTH).div_ceil(peak),
        };
        let bar = "#".repeat(usize::try_from(marks).unwrap_or(0));
        let _ = writeln!(out, "  {range:>18} us {:>8}  {bar}", b.count);
    }
}

/// The summary of statistics `s`, read at `now_unix_ms` (for the age of
/// the file; `None` leaves it out).
pub(crate) fn render(s: &Stats, now_unix_ms: Option<u64>) -> String {
    let mut out = String::new();
    let _ = write!(out, "kfd-preemptd pid {}, up {}", s.pid, uptime(s.uptime_s));
    // (0: a file without the time)
    if let Some(now) = now_unix_ms.filter(|_| s.written_at_unix_ms > 0) {
        let age = now.saturating_sub(s.written_at_unix_ms) as f64 / 1000.0;
        let _ = write!(out, ", statistics written {age:.1} s ago");
    }
    if s.version == 0 {
        out.push_str(" (no schema version)");
    } else if s.version != STATS_VERSION {
        let _ = write!(
            out,
            " (schema version {}; this kfd-preempt knows {STATS_VERSION})",
            s.version
        );
    }
    out.push('\n');

    let _ = write!(out, "mode: {}, ", s.mode.as_str());
    if s.lower_held_either() {
        let _ = write!(
            out,
            "lower levels held (they ran {:.1} ms in this minimum-share window)",
            s.lower_run_in_window_ms_either()
        );
    } else {
        out.push_str("lower levels running");
    }
    out.push_str("\n\n");

    render_counters(&mut out, &s.counters);
    out.push('\n');
    render_tenants(&mut out, &s.tenants);
    out.push('\n');
    render_decisions(&mut out, &s.decisions);
    render_latency(&mut out, &s.reaction_latency_us);

    // A file without a configuration (an older daemon's) has none to show.
    let c = &s.config;
    if *c == ConfigStats::default() {
        return out;
    }
    let _ = writeln!(
        out,
        "\nconfig: lease {} ms, sample period {} us, idle hysteresis {} us, \
         minimum share {} ms every {} ms",
        c.lease_ms,
        c.sample_period_us,
        c.idle_hysteresis_us,
        c.min_share_budget_ms,
        c.min_share_period_ms
    );
    out
}

fn now_unix_ms() -> Option<u64> {
    let d = SystemTime::now().duration_since(UNIX_EPOCH).ok()?;
    u64::try_from(d.as_millis()).ok()
}

/// One read and render of `path`.
fn snapshot(path: &Path) -> Result<String, String> {
    let text = read(path)?;
    Ok(render(&parse(path, &text)?, now_unix_ms()))
}

/// Copies the file to `out` unchanged, for scripts; a missing file is
/// still an error.
fn copy_json(path: &Path, out: &mut impl io::Write) -> CliResult {
    let text = read(path)?;
    out.write_all(text.as_bytes())?;
    out.flush()?;
    Ok(Done::Ok)
}

/// Runs `kfd-preempt daemon`.
pub(crate) fn run(args: &DaemonArgs) -> CliResult {
    if args.json {
        copy_json(&args.stats, &mut io::stdout().lock())?;
        return Ok(Done::Ok);
    }
    let Some(secs) = args.watch else {
        print!("{}", snapshot(&args.stats)?);
        return Ok(Done::Ok);
    };
    let every = Duration::try_from_secs_f64(secs)
        .ok()
        .filter(|d| !d.is_zero())
        .ok_or("--watch takes a positive number of seconds")?;
    // A file missing from the start is a daemon that is not running: say so
    // and stop. Later, errors are shown in place (the daemon may restart).
    read(&args.stats)?;
    let release = Release::install()?;
    let mut stdout = io::stdout();
    while !release.requested() {
        let body = snapshot(&args.stats).unwrap_or_else(|e| format!("{e}\n"));
        // Home the cursor and clear the screen, then draw.
        write!(
            stdout,
            "\x1b[H\x1b[2J{body}\n(every {secs} s; Ctrl-C to quit)\n"
        )?;
        stdout.flush()?;
        let next = Instant::now() + every;
        while !release.requested() && Instant::now() < next {
            sleep(TICK.min(next.saturating_duration_since(Instant::now())));
        }
    }
    Ok(Done::Ok)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What kfd-preemptd writes (the schema of `kfd-preemptd-stats`), with
    /// `config`, one tenant's `held` and two tenants' `nodes` left out (a
    /// file of an older daemon) and an unknown counter added (a newer one).
    const SAMPLE: &str = r#"{
      "version": 1,
      "pid": 4321,
      "written_at_unix_ms": 1700000000000,
      "uptime_s": 3723.5,
      "mode": "lc-busy",
      "lower_held": true,
      "be_held": true,
      "lower_run_in_window_ms": 12.5,
      "be_run_in_period_ms": 12.5,
      "counters": {
        "preemptions": 12,
        "preempt_failures": 0,
        "resumes": 11,
        "forced_resumes": 1,
        "renewals": 40,
        "held_total_ms": 1234.5,
        "future_counter": 7
      },
      "reaction_latency_us": {
        "scale": "log2-us",
        "count": 5,
        "sum_us": 1700,
        "max_us": 600,
        "buckets": [
          {"low_us": 128, "high_us": 256, "count": 1},
          {"low_us": 256, "high_us": 512, "count": 3},
          {"low_us": 512, "high_us": null, "count": 1}
        ]
      },
      "tenants": [
        {"pid": 100, "comm": "serve", "class": "inference",
         "priority": "latency-critical", "queues": 1, "held": false},
        {"pid": 200, "comm": "train", "class": "training",
         "priority": "best-effort", "queues": 3},
        {"pid": 300, "comm": "batch", "class": "training",
         "priority": "best-effort", "queues": 3, "held_queues": 2,
         "held": true, "nodes": [20736, 20737]}
      ],
      "decisions": [
        {"gpu_id": 20736, "level": "latency-critical", "mode": "lc-busy",
         "held": true, "watched_queues": 1, "lower_queues": 5,
         "idle_hysteresis_us": 3750,
         "counters": {"preemptions": 12, "resumes": 11, "held_total_ms": 1234.5},
         "reaction_latency_us": {"count": 5, "sum_us": 1700}}
      ]
    }"#;

    fn sample() -> Stats {
        parse(Path::new("stats.json"), SAMPLE).unwrap()
    }

    #[test]
    fn the_summary_has_mode_counters_tenants_and_histogram() {
        let text = render(&sample(), Some(1_700_000_002_500));
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[0],
            "kfd-preemptd pid 4321, up 1h02m03s, statistics written 2.5 s ago"
        );
        assert_eq!(
            lines[1],
            "mode: lc-busy, lower levels held (they ran 12.5 ms in this minimum-share window)"
        );
        // Known counters in their order, the unknown one after them.
        let counters = text.find("preemptions").unwrap();
        assert!(counters < text.find("held total").unwrap());
        assert!(text.find("held total").unwrap() < text.find("future counter").unwrap());
        assert!(text.contains("1234.5 ms"), "{text}");
        // Tenants: one row each; a missing `held` is "no", missing
        // `nodes` a dash.
        let serve = lines.iter().find(|l| l.contains("serve")).unwrap();
        let cols: Vec<&str> = serve.split_whitespace().collect();
        assert_eq!(
            cols,
            [
                "100",
                "serve",
                "inference",
                "latency-critical",
                "1",
                "no",
                "-"
            ]
        );
        let train = lines.iter().find(|l| l.contains("train")).unwrap();
        assert!(train.trim_end().ends_with("no     -"), "{train:?}");
        // Held on some of its nodes only: how many of its queues.
        let batch = lines.iter().find(|l| l.contains("batch")).unwrap();
        let cols: Vec<&str> = batch.split_whitespace().collect();
        assert_eq!(cols[5..], ["2/3", "0x5100,0x5101"]);
        // One row per decision.
        let d = lines.iter().find(|l| l.starts_with("  0x5100")).unwrap();
        let cols: Vec<&str> = d.split_whitespace().collect();
        assert_eq!(
            cols,
            [
                "0x5100",
                "latency-critical",
                "lc-busy",
                "yes",
                "1",
                "5",
                "12",
                "11",
                "1234.5",
                "340",
                "3750"
            ]
        );
        // Histogram rows, the fullest bucket with the longest bar.
        assert!(
            text.contains("5 recorded, mean 340 us, max 600 us"),
            "{text}"
        );
        let row = |label: &str| lines.iter().find(|l| l.contains(label)).copied().unwrap();
        assert!(row("[256, 512) us").ends_with(&"#".repeat(40)));
        // 1 of a peak of 3: 40 / 3 marks, rounded up.
        let small = row("[128, 256) us");
        assert!(
            small.ends_with(&format!(" {}", "#".repeat(14))),
            "{small:?}"
        );
        assert!(row(">= 512 us").contains(" 1 "));
        // `config` is missing: no config line, no failure.
        assert!(!text.contains("config:"));
    }

    #[test]
    fn missing_sections_and_newer_versions_render_without_failing() {
        let v = parse(
            Path::new("s"),
            r#"{"version": 2, "mode": "no-lc", "a_field_of_version_2": [1]}"#,
        )
        .unwrap();
        let text = render(&v, None);
        assert!(text.starts_with("kfd-preemptd pid 0, up 0.0s ("), "{text}");
        assert!(text.contains("schema version 2; this kfd-preempt knows 1"));
        assert!(text.contains("mode: no-lc, lower levels running"));
        assert!(text.contains("tenants: none attached"), "{text}");
        assert!(text.contains("0 recorded, mean -, max 0 us"), "{text}");
        // No configuration written: no line of zeros.
        assert!(!text.contains("config:"), "{text}");
        let some = parse(
            Path::new("s"),
            r#"{"version": 1, "config": {"lease_ms": 200}}"#,
        )
        .unwrap();
        let text = render(&some, Some(1_700_000_000_000));
        assert!(!text.contains("schema version"), "{text}");
        // No time in the file: no age.
        assert!(!text.contains("written"), "{text}");
        let none = parse(Path::new("s"), "{}").unwrap();
        assert!(render(&none, None).contains("(no schema version)"));
        // A daemon from before the rename wrote the first names only.
        let old = parse(
            Path::new("s"),
            r#"{"version": 1, "mode": "lc-busy", "be_held": true, "be_run_in_period_ms": 3.0}"#,
        )
        .unwrap();
        assert!(
            render(&old, None).contains(
                "mode: lc-busy, lower levels held (they ran 3.0 ms in this minimum-share window)"
            ),
            "{}",
            render(&old, None)
        );
        assert!(
            text.contains("config: lease 200 ms, sample period 0 us"),
            "{text}"
        );
        // A field of the wrong type is refused, not shown as a default.
        let e = parse(Path::new("s.json"), r#"{"mode": "asleep"}"#).unwrap_err();
        assert!(e.contains("is not kfd-preemptd's statistics"), "{e}");
    }

    #[test]
    fn cells_and_durations() {
        assert_eq!(cell(&Value::Null), "null");
        assert_eq!(cell(&serde_json::json!("x")), "x");
        assert_eq!(cell(&serde_json::json!(-3)), "-3");
        assert_eq!(cell(&serde_json::json!(2.25)), "2.2");
        assert_eq!(cell(&serde_json::json!([1])), "[1]");
        assert_eq!(uptime(5.25), "5.2s");
        assert_eq!(uptime(65.0), "1m05s");
        assert_eq!(uptime(f64::NAN), "-");
        assert_eq!(counter_label("held_total_ms"), ("held total".into(), " ms"));
    }

    #[test]
    fn a_missing_file_asks_whether_the_daemon_runs() {
        let e = read(Path::new("/nonexistent/kfd-preemptd/stats.json")).unwrap_err();
        assert_eq!(
            e,
            "/nonexistent/kfd-preemptd/stats.json does not exist: is kfd-preemptd running?"
        );
        let args = DaemonArgs {
            stats: "/nonexistent/stats.json".into(),
            watch: None,
            json: false,
        };
        assert!(run(&args)
            .err()
            .is_some_and(|e| e.to_string().contains("is kfd-preemptd running?")));
        let e = parse(Path::new("s.json"), "{").unwrap_err();
        assert!(e.contains("is not kfd-preemptd's statistics"), "{e}");
        assert!(parse(Path::new("s.json"), "[1]").is_err());
    }

    #[test]
    fn json_prints_the_file_unchanged() {
        let dir = std::env::temp_dir().join(format!("kfd-preempt-daemon-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let path = dir.join("stats.json");
        fs::write(&path, SAMPLE).unwrap();
        let mut out = Vec::new();
        assert!(copy_json(&path, &mut out).is_ok());
        assert_eq!(out, SAMPLE.as_bytes());
        let mut out = Vec::new();
        let missing = copy_json(&dir.join("missing.json"), &mut out);
        assert!(missing.is_err() && out.is_empty());
        assert!(snapshot(&path).unwrap().contains("mode: lc-busy"));
        fs::remove_dir_all(&dir).unwrap();
    }
}
