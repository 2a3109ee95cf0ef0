//! `kfd-preempt stats`: the module's statistics from debugfs
//! (`/sys/kernel/debug/kfd_preempt/stats`, Documentation/admin-guide.rst,
//! "Statistics and tracing"), as text or JSON.
//!
//! The file is `key value` lines, histograms as `name bound:count ...` and
//! one `owner N tgid P key value ...` line per open file; unknown keys are
//! kept, so a newer module's counters show up here too.

use std::{io::Write as _, path::PathBuf};

use clap::Args;
use serde_json::{json, Map, Value};

use crate::{CliResult, Done};

/// Where the module's debugfs statistics are.
pub(crate) const DEFAULT_STATS: &str = "/sys/kernel/debug/kfd_preempt/stats";

#[derive(Args, Debug)]
pub(crate) struct StatsArgs {
    /// Print JSON: {"counters": {..}, "histograms": {..}, "owners": [..]}.
    #[arg(long)]
    json: bool,
    /// The statistics file (debugfs must be mounted; root only).
    #[arg(long, default_value = DEFAULT_STATS)]
    file: PathBuf,
}

/// The file, parsed.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Stats {
    /// Module-wide counters, in file order.
    pub counters: Vec<(String, u64)>,
    /// Histograms: name, then (bucket upper bound in µs or "inf", count).
    pub histograms: Vec<(String, Vec<(String, u64)>)>,
    /// Open files: their key/value pairs, `owner` and `tgid` first.
    pub owners: Vec<Vec<(String, i64)>>,
}

/// Parses the statistics file; lines it cannot read are errors, so that a
/// format change is noticed rather than shown as zeros.
pub(crate) fn parse(text: &str) -> Result<Stats, String> {
    let mut s = Stats::default();
    for (n, line) in text.lines().enumerate() {
        let words: Vec<&str> = line.split_whitespace().collect();
        let bad = || format!("line {}: cannot read {line:?}", n + 1);
        match words.as_slice() {
            [] => {}
            ["owner", ..] => {
                if words.len() % 2 != 0 {
                    return Err(bad());
                }
                let pairs = words
                    .chunks(2)
                    .map(|kv| Ok((kv[0].to_string(), kv[1].parse::<i64>().map_err(|_| bad())?)))
                    .collect::<Result<Vec<_>, String>>()?;
                s.owners.push(pairs);
            }
            [name, value] if !value.contains(':') => {
                s.counters
                    .push((name.to_string(), value.parse().map_err(|_| bad())?));
            }
            [name, buckets @ ..] => {
                let buckets = buckets
                    .iter()
                    .map(|b| {
                        let (bound, count) = b.split_once(':').ok_or_else(bad)?;
                        Ok((bound.to_string(), count.parse().map_err(|_| bad())?))
                    })
                    .collect::<Result<Vec<_>, String>>()?;
                s.histograms.push((name.to_string(), buckets));
            }
        }
    }
    Ok(s)
}

impl Stats {
    pub(crate) fn to_json(&self) -> Value {
        let counters: Map<String, Value> = self
            .counters
            .iter()
            .map(|(k, v)| (k.clone(), json!(v)))
            .collect();
        let histograms: Map<String, Value> = self
            .histograms
            .iter()
            .map(|(name, b)| {
                let buckets: Vec<Value> = b
                    .iter()
                    .map(|(bound, count)| json!({"le_us": bound, "count": count}))
                    .collect();
                (name.clone(), Value::Array(buckets))
            })
            .collect();
        let owners: Vec<Value> = self
            .owners
            .iter()
            .map(|o| Value::Object(o.iter().map(|(k, v)| (k.clone(), json!(v))).collect()))
            .collect();
        json!({"counters": counters, "histograms": histograms, "owners": owners})
    }

    pub(crate) fn to_text(&self) -> String {
        let mut out = String::new();
        for (k, v) in &self.counters {
            out += &format!("{k:<20} {v}\n");
        }
        for (name, buckets) in &self.histograms {
            let total: u64 = buckets.iter().map(|(_, c)| c).sum();
            out += &format!("{name} ({total} batches):\n");
            for (bound, count) in buckets.iter().filter(|(_, c)| *c > 0) {
                let label = if bound == "inf" {
                    "longer".to_string()
                } else {
                    format!("< {bound} us")
                };
                out += &format!("  {label:>12} {count}\n");
            }
        }
        if self.owners.is_empty() {
            out += "no kfd_preempt file is open\n";
        }
        for o in &self.owners {
            let line: Vec<String> = o.iter().map(|(k, v)| format!("{k} {v}")).collect();
            out += &format!("{}\n", line.join("  "));
        }
        out
    }
}

pub(crate) fn run(args: &StatsArgs) -> CliResult {
    let text = std::fs::read_to_string(&args.file).map_err(|e| {
        format!(
            "{}: {e} (the module must be loaded, debugfs mounted at /sys/kernel/debug, and this run as root)",
            args.file.display()
        )
    })?;
    let stats = parse(&text).map_err(|e| format!("{}: {e}", args.file.display()))?;
    let out = if args.json {
        format!("{:#}\n", stats.to_json())
    } else {
        stats.to_text()
    };
    let mut stdout = std::io::stdout().lock();
    match stdout
        .write_all(out.as_bytes())
        .and_then(|()| stdout.flush())
    {
        // A reader that stopped early (`| head`, `| grep -q`) had what it
        // wanted: not an error, and no panic as print! would.
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(Done::Ok),
        r => {
            r?;
            Ok(Done::Ok)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "preempt_batches 3\nqueues_preempted 12\n\
        preempt_hw_phase_us 1:0 2:1 4:2 inf:0\n\
        owner 4 tgid 311 batches 3 queues_preempted 12\n";

    #[test]
    fn the_file_is_read_field_by_field() {
        let s = parse(SAMPLE).unwrap();
        assert_eq!(
            s.counters,
            [
                ("preempt_batches".into(), 3),
                ("queues_preempted".into(), 12)
            ]
        );
        assert_eq!(s.histograms[0].0, "preempt_hw_phase_us");
        assert_eq!(s.histograms[0].1[2], ("4".to_string(), 2));
        assert_eq!(s.owners[0][0], ("owner".to_string(), 4));
        assert_eq!(s.owners[0][1], ("tgid".to_string(), 311));
        let j = s.to_json();
        assert_eq!(j["counters"]["queues_preempted"], 12);
        assert_eq!(j["histograms"]["preempt_hw_phase_us"][3]["le_us"], "inf");
        assert_eq!(j["owners"][0]["batches"], 3);
        let t = s.to_text();
        assert!(t.contains("preempt_hw_phase_us (3 batches)"), "{t}");
        assert!(t.contains("< 4 us 2"), "{t}");
        assert!(t.contains("owner 4  tgid 311"), "{t}");
    }

    #[test]
    fn a_line_it_cannot_read_is_an_error() {
        assert!(parse("preempt_batches three\n").is_err());
        assert!(parse("owner 4 tgid\n").is_err());
        assert!(parse("h 1:x\n").is_err());
        assert_eq!(parse("").unwrap(), Stats::default());
    }
}
