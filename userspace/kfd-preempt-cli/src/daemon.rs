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
use serde_json::{Map, Value};

use kfd_preempt::signals::Release;

use crate::{CliResult, Done};

/// Where kfd-preemptd writes its statistics unless configured otherwise.
pub(crate) const DEFAULT_STATS: &str = "/run/kfd-preemptd/stats.json";

/// The schema version this view was written for.
const KNOWN_VERSION: u64 = 1;

/// Width of the longest histogram bar.
const BAR_WIDTH: u64 = 40;

/// Counters shown first, in this order; any others follow, sorted.
const COUNTER_ORDER: [&str; 6] = [
    "preemptions",
    "preempt_failures",
    "resumes",
    "forced_resumes",
    "renewals",
    "held_total_ms",
];

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

/// Parses the statistics text.
fn parse(path: &Path, text: &str) -> Result<Value, String> {
    let v: Value = serde_json::from_str(text).map_err(|e| {
        format!(
            "{} is not valid JSON ({e}): is it kfd-preemptd's statistics file?",
            path.display()
        )
    })?;
    if !v.is_object() {
        return Err(format!("{} does not hold a JSON object", path.display()));
    }
    Ok(v)
}

/// `v` as text for a table cell: strings bare, numbers as written
/// (floats with one decimal), booleans as yes/no, missing or null as `-`.
fn cell(v: Option<&Value>) -> String {
    match v {
        None | Some(Value::Null) => "-".into(),
        Some(Value::String(s)) => s.clone(),
        Some(Value::Bool(b)) => if *b { "yes" } else { "no" }.into(),
        Some(Value::Number(n)) => match (n.as_u64(), n.as_i64(), n.as_f64()) {
            (Some(u), _, _) => u.to_string(),
            (None, Some(i), _) => i.to_string(),
            (None, None, Some(f)) => format!("{f:.1}"),
            _ => n.to_string(),
        },
        Some(other) => other.to_string(),
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

/// The counters, known ones first.
fn render_counters(out: &mut String, counters: &Map<String, Value>) {
    let mut keys: Vec<&str> = COUNTER_ORDER
        .iter()
        .copied()
        .filter(|k| counters.contains_key(*k))
        .collect();
    let mut others: Vec<&str> = counters
        .keys()
        .map(String::as_str)
        .filter(|k| !COUNTER_ORDER.contains(k))
        .collect();
    others.sort_unstable();
    keys.extend(others);
    out.push_str("counters:\n");
    if keys.is_empty() {
        out.push_str("  (none)\n");
    }
    for pair in keys.chunks(2) {
        let cells: Vec<String> = pair
            .iter()
            .map(|k| {
                let (label, unit) = counter_label(k);
                format!("{label:<18} {:>12}{unit:<3}", cell(counters.get(*k)))
            })
            .collect();
        let _ = writeln!(out, "  {}", cells.join("   ").trim_end());
    }
}

/// The per-tenant table.
fn render_tenants(out: &mut String, tenants: Option<&Vec<Value>>) {
    let Some(tenants) = tenants else {
        out.push_str("tenants: -\n");
        return;
    };
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
        let held = match (
            t.get("held_queues").and_then(Value::as_u64),
            t.get("queues").and_then(Value::as_u64),
        ) {
            (Some(h), Some(q)) if h > 0 && h < q => format!("{h}/{q}"),
            _ => cell(t.get("held")),
        };
        let nodes = t.get("nodes").and_then(Value::as_array).map_or_else(
            || "-".to_string(),
            |n| {
                n.iter()
                    .filter_map(Value::as_u64)
                    .map(|g| format!("{g:#x}"))
                    .collect::<Vec<_>>()
                    .join(",")
            },
        );
        let _ = writeln!(
            out,
            "  {:>7}  {:<16} {:<16} {:<17} {:>6}  {:<5}  {}",
            cell(t.get("pid")),
            cell(t.get("comm")),
            cell(t.get("class")),
            cell(t.get("priority")),
            cell(t.get("queues")),
            held,
            nodes
        );
    }
}

/// The per-decision table: one row per node and watched level.
fn render_decisions(out: &mut String, decisions: Option<&Vec<Value>>) {
    let Some(decisions) = decisions.filter(|d| !d.is_empty()) else {
        return;
    };
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
        let gpu = d
            .get("gpu_id")
            .and_then(Value::as_u64)
            .map_or_else(|| "-".to_string(), |g| format!("{g:#x}"));
        let c = d.get("counters");
        let field = |k: &str| c.and_then(|c| c.get(k));
        let held_ms = field("held_total_ms")
            .and_then(Value::as_f64)
            .map_or_else(|| "-".to_string(), |ms| format!("{ms:.1}"));
        let h = d.get("reaction_latency_us");
        let mean = match (
            h.and_then(|h| h.get("count")).and_then(Value::as_u64),
            h.and_then(|h| h.get("sum_us")).and_then(Value::as_u64),
        ) {
            (Some(n), Some(sum)) if n > 0 => (sum / n).to_string(),
            _ => "-".into(),
        };
        let _ = writeln!(
            out,
            "  {:<8} {:<17} {:<8} {:<5} {:>7} {:>5} {:>8} {:>7} {:>12} {:>9} {:>7}",
            gpu,
            cell(d.get("level")),
            cell(d.get("mode")),
            cell(d.get("held")),
            cell(d.get("watched_queues")),
            cell(d.get("lower_queues")),
            cell(field("preemptions")),
            cell(field("resumes")),
            held_ms,
            mean,
            cell(d.get("idle_hysteresis_us"))
        );
    }
    out.push('\n');
}

/// The reaction-latency histogram, one row per non-empty bucket.
fn render_latency(out: &mut String, h: Option<&Value>) {
    let Some(h) = h else {
        out.push_str("reaction latency: -\n");
        return;
    };
    let count = h.get("count").and_then(Value::as_u64);
    let sum = h.get("sum_us").and_then(Value::as_u64);
    let mean = match (count, sum) {
        (Some(c), Some(s)) if c > 0 => format!("{} us", s / c),
        _ => "-".into(),
    };
    let _ = writeln!(
        out,
        "reaction latency (LC busy to BE preempted): {} recorded, mean {mean}, max {} us",
        cell(h.get("count")),
        cell(h.get("max_us"))
    );
    let buckets = h.get("buckets").and_then(Value::as_array);
    let Some(buckets) = buckets.filter(|b| !b.is_empty()) else {
        return;
    };
    let peak = buckets
        .iter()
        .filter_map(|b| b.get("count").and_then(Value::as_u64))
        .max()
        .unwrap_or(0);
    for b in buckets {
        let low = cell(b.get("low_us"));
        // A null (or missing) upper bound is the last, open bucket.
        let range = match b.get("high_us").and_then(Value::as_u64) {
            Some(high) => format!("[{low}, {high})"),
            None => format!(">= {low}"),
        };
        let n = b.get("count").and_then(Value::as_u64);
        let bar = match n {
            Some(n) if peak > 0 => {
                // At least one mark for a non-empty bucket.
                let len = (n * BAR_WIDTH).div_ceil(peak);
                "#".repeat(usize::try_from(len).unwrap_or(0))
            }
            _ => String::new(),
        };
        let _ = writeln!(out, "  {range:>18} us {:>8}  {bar}", cell(b.get("count")));
    }
}

/// The summary of statistics `v`, read at `now_unix_ms` (for the age of
/// the file; `None` leaves it out).
pub(crate) fn render(v: &Value, now_unix_ms: Option<u64>) -> String {
    let mut out = String::new();
    let mut header = format!("kfd-preemptd pid {}", cell(v.get("pid")));
    if let Some(s) = v.get("uptime_s").and_then(Value::as_f64) {
        let _ = write!(header, ", up {}", uptime(s));
    }
    if let (Some(now), Some(at)) = (
        now_unix_ms,
        v.get("written_at_unix_ms").and_then(Value::as_u64),
    ) {
        let age = now.saturating_sub(at) as f64 / 1000.0;
        let _ = write!(header, ", statistics written {age:.1} s ago");
    }
    match v.get("version").and_then(Value::as_u64) {
        Some(KNOWN_VERSION) => {}
        Some(n) => {
            let _ = write!(
                header,
                " (schema version {n}; this kfd-preempt knows {KNOWN_VERSION})"
            );
        }
        None => header.push_str(" (no schema version)"),
    }
    out.push_str(&header);
    out.push('\n');

    let be = match v.get("be_held").and_then(Value::as_bool) {
        Some(true) => "BE held",
        Some(false) => "BE running",
        None => "BE -",
    };
    let _ = write!(out, "mode: {}, {be}", cell(v.get("mode")));
    if v.get("be_run_in_period_ms").is_some() {
        let _ = write!(
            out,
            " (BE ran {} ms in this minimum-share window)",
            cell(v.get("be_run_in_period_ms"))
        );
    }
    out.push_str("\n\n");

    match v.get("counters").and_then(Value::as_object) {
        Some(c) => render_counters(&mut out, c),
        None => out.push_str("counters: -\n"),
    }
    out.push('\n');
    render_tenants(&mut out, v.get("tenants").and_then(Value::as_array));
    out.push('\n');
    render_decisions(&mut out, v.get("decisions").and_then(Value::as_array));
    render_latency(&mut out, v.get("reaction_latency_us"));

    if let Some(c) = v.get("config").and_then(Value::as_object) {
        let _ = writeln!(
            out,
            "\nconfig: lease {} ms, sample period {} us, idle hysteresis {} us, \
             minimum share {} ms every {} ms",
            cell(c.get("lease_ms")),
            cell(c.get("sample_period_us")),
            cell(c.get("idle_hysteresis_us")),
            cell(c.get("min_share_budget_ms")),
            cell(c.get("min_share_period_ms"))
        );
    }
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

    /// What kfd-preemptd writes (its stats.rs), with `config` and one
    /// tenant's `held` left out and an unknown counter added.
    const SAMPLE: &str = r#"{
      "version": 1,
      "pid": 4321,
      "written_at_unix_ms": 1700000000000,
      "uptime_s": 3723.5,
      "mode": "lc-busy",
      "be_held": true,
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

    fn sample() -> Value {
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
            "mode: lc-busy, BE held (BE ran 12.5 ms in this minimum-share window)"
        );
        // Known counters in their order, the unknown one after them.
        let counters = text.find("preemptions").unwrap();
        assert!(counters < text.find("held total").unwrap());
        assert!(text.find("held total").unwrap() < text.find("future counter").unwrap());
        assert!(text.contains("1234.5 ms"), "{text}");
        // Tenants: one row each; the missing `held` is a dash.
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
        assert!(train.trim_end().ends_with("-      -"), "{train:?}");
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
        let v = parse(Path::new("s"), r#"{"version": 2, "mode": "no-lc"}"#).unwrap();
        let text = render(&v, None);
        assert!(text.starts_with("kfd-preemptd pid -"), "{text}");
        assert!(text.contains("schema version 2; this kfd-preempt knows 1"));
        assert!(text.contains("mode: no-lc, BE -"));
        assert!(text.contains("counters: -"));
        assert!(text.contains("tenants: -"));
        assert!(text.contains("reaction latency: -"));
        let empty = parse(
            Path::new("s"),
            r#"{"version": 1, "tenants": [], "counters": {},
                "reaction_latency_us": {"count": 0, "sum_us": 0, "max_us": 0, "buckets": []},
                "config": {"lease_ms": 200}}"#,
        )
        .unwrap();
        let text = render(&empty, None);
        assert!(text.contains("tenants: none attached"), "{text}");
        assert!(text.contains("0 recorded, mean -, max 0 us"), "{text}");
        assert!(
            text.contains("config: lease 200 ms, sample period - us"),
            "{text}"
        );
    }

    #[test]
    fn cells_and_durations() {
        assert_eq!(cell(None), "-");
        assert_eq!(cell(Some(&Value::Null)), "-");
        assert_eq!(cell(Some(&serde_json::json!(true))), "yes");
        assert_eq!(cell(Some(&serde_json::json!(-3))), "-3");
        assert_eq!(cell(Some(&serde_json::json!(2.25))), "2.2");
        assert_eq!(cell(Some(&serde_json::json!([1]))), "[1]");
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
        assert!(e.contains("not valid JSON"), "{e}");
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
