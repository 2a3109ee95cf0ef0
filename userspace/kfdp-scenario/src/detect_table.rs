//! What `detect` measured: the JSON it writes and the table it prints.

use serde::{Deserialize, Serialize};

use crate::stats;

/// The label every result carries: the simulated node's timings and a TCG
/// VM's are not a GPU's or a real machine's.
pub const NOTE: &str = "simulated node in a QEMU TCG VM: relative numbers only";

/// CPU cost of waiting for work when none comes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CpuCost {
    /// Length of the measured window, s.
    pub window_s: f64,
    /// This process's user + system CPU time, ms per s of window.
    pub self_cpu_ms_per_s: f64,
    /// Whole-system busy time (every CPU, all but idle and iowait), ms per
    /// s of window: includes interrupt-context work such as the module's
    /// sampling timer, and everything else running.
    pub system_busy_ms_per_s: f64,
    /// The irq + softirq part of `system_busy_ms_per_s`.
    pub system_irq_ms_per_s: f64,
    /// SAMPLE calls made (poll, spin) or eventfd wakes (arm).
    pub iterations: u64,
    /// Work seen although nothing was submitted (should be 0).
    pub spurious: u64,
}

/// The ioctl costs, mean of `calls` calls each, ns.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IoctlCost {
    /// Calls timed per ioctl.
    pub calls: u32,
    /// KFDP_IOC_SAMPLE of the one watched queue, issued directly with a
    /// preallocated one-entry buffer.
    pub sample_ioctl_ns: f64,
    /// `Device::sample()`, which also allocates and converts its buffer.
    pub sample_call_ns: f64,
    /// `Device::info()` (KFDP_IOC_INFO, the cheapest ioctl there is).
    pub info_ioctl_ns: f64,
    /// `sample_ioctl_ns / info_ioctl_ns`.
    pub sample_over_info: f64,
}

/// One detection method's results.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MethodResult {
    /// `arm-<P>`, `poll-<P>` or `spin`.
    pub method: String,
    /// `arm`, `poll` or `spin`.
    pub kind: String,
    /// Period, µs (arm, poll).
    pub period_us: Option<u32>,
    /// Trials attempted.
    pub trials: u32,
    /// Trials where the work was seen within the timeout.
    pub detected: u32,
    /// Trials where it was not (within 1 s of the publish).
    pub misses: u32,
    /// Trials where the detector fired before the tenant published: a
    /// detector bug; not counted as detected.
    pub early: u32,
    /// Detection latency of each detected trial, µs, in trial order.
    pub latencies_us: Vec<f64>,
    /// Nearest-rank P50 of `latencies_us`.
    pub p50_us: Option<f64>,
    /// P99.
    pub p99_us: Option<f64>,
    /// Largest.
    pub max_us: Option<f64>,
    /// CPU cost while waiting with no events.
    pub idle: Option<CpuCost>,
    /// Why the method was not run (e.g. a period below the module's
    /// minimum).
    pub skipped: Option<String>,
    /// The error that stopped it.
    pub error: Option<String>,
}

impl MethodResult {
    /// An empty result for `method`.
    pub fn new(method: String, kind: &str, period_us: Option<u32>) -> Self {
        MethodResult {
            method,
            kind: kind.into(),
            period_us,
            trials: 0,
            detected: 0,
            misses: 0,
            early: 0,
            latencies_us: Vec::new(),
            p50_us: None,
            p99_us: None,
            max_us: None,
            idle: None,
            skipped: None,
            error: None,
        }
    }

    /// Fills the percentiles from `latencies_us`.
    pub fn summarize(&mut self) {
        self.p50_us = stats::percentile(&self.latencies_us, 0.50);
        self.p99_us = stats::percentile(&self.latencies_us, 0.99);
        self.max_us = stats::percentile(&self.latencies_us, 1.0);
    }
}

/// The whole `detect` result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DetectReport {
    /// Always "detect".
    pub role: String,
    /// `uname -r` of the machine measured.
    pub kernel: String,
    /// [`NOTE`].
    pub note: String,
    /// Simulated node index of the tenant's ring.
    pub node: u32,
    /// Node time of each dispatch, µs.
    pub work_us: u64,
    /// Trials per method.
    pub trials: u32,
    /// Range of the random gap before each submission, ms.
    pub gap_ms: [f64; 2],
    /// A trial not detected this long after the publish is a miss, ms.
    pub timeout_ms: u64,
    /// Seed of the gaps.
    pub seed: u64,
    /// `sysconf(_SC_CLK_TCK)`: the resolution of the system busy time.
    pub clk_tck: u64,
    /// The module's smallest ARM period, µs.
    pub min_watch_period_us: u64,
    /// Cost of doing nothing for the same window (the floor).
    pub baseline: Option<CpuCost>,
    /// One entry per method.
    pub methods: Vec<MethodResult>,
    /// SAMPLE vs INFO.
    pub ioctl: Option<IoctlCost>,
    /// Why `ioctl` is missing.
    pub ioctl_error: Option<String>,
}

impl DetectReport {
    /// Whether every method ran without an error (skips are fine).
    pub fn complete(&self) -> bool {
        self.methods.iter().all(|m| m.error.is_none()) && self.ioctl_error.is_none()
    }
}

fn opt(v: Option<f64>, width: usize, precision: usize) -> String {
    match v {
        Some(v) => format!("{v:>width$.precision$}"),
        None => format!("{:>width$}", "-"),
    }
}

/// The table `detect` prints.
pub fn render(r: &DetectReport) -> String {
    let mut out = format!("kfdp-scenario detect on Linux {} ({})\n", r.kernel, r.note);
    out.push_str(&format!(
        "node {}, {} trial(s) per method of one {} us dispatch after a random {}-{} ms gap; \
         a miss: not seen within {} ms\n",
        r.node, r.trials, r.work_us, r.gap_ms[0], r.gap_ms[1], r.timeout_ms
    ));
    let window = r
        .baseline
        .as_ref()
        .or_else(|| r.methods.iter().find_map(|m| m.idle.as_ref()))
        .map_or(0.0, |c| c.window_s);
    out.push_str(&format!(
        "CPU while waiting with no work, over {window:.1} s: this process (getrusage), and the \
         whole system (/proc/stat, {} ticks/s; irq part in brackets)\n\n",
        r.clk_tck
    ));
    out.push_str(&format!(
        "{:<10} {:>8} {:>6} {:>9} {:>9} {:>9} {:>12} {:>18} {:>9}\n",
        "method",
        "detected",
        "misses",
        "p50 us",
        "p99 us",
        "max us",
        "self ms/s",
        "system ms/s (irq)",
        "samples/s"
    ));
    let cost_cells = |c: Option<&CpuCost>| match c {
        Some(c) => format!(
            "{:>12.2} {:>11.1} ({:>4.1}) {:>9.0}",
            c.self_cpu_ms_per_s,
            c.system_busy_ms_per_s,
            c.system_irq_ms_per_s,
            if c.window_s > 0.0 {
                c.iterations as f64 / c.window_s
            } else {
                0.0
            }
        ),
        None => format!("{:>12} {:>18} {:>9}", "-", "-", "-"),
    };
    if let Some(b) = &r.baseline {
        out.push_str(&format!(
            "{:<10} {:>8} {:>6} {:>9} {:>9} {:>9} {}\n",
            "(nothing)",
            "-",
            "-",
            "-",
            "-",
            "-",
            cost_cells(Some(b))
        ));
    }
    for m in &r.methods {
        if let Some(why) = &m.skipped {
            out.push_str(&format!("{:<10} skipped: {why}\n", m.method));
            continue;
        }
        out.push_str(&format!(
            "{:<10} {:>8} {:>6} {} {} {} {}\n",
            m.method,
            format!("{}/{}", m.detected, m.trials),
            m.misses,
            opt(m.p50_us, 9, 1),
            opt(m.p99_us, 9, 1),
            opt(m.max_us, 9, 1),
            cost_cells(m.idle.as_ref())
        ));
        if m.early > 0 {
            out.push_str(&format!(
                "{:<10} note: {} trial(s) fired before the tenant published\n",
                "", m.early
            ));
        }
        if let Some(e) = &m.error {
            out.push_str(&format!("{:<10} error: {e}\n", ""));
        }
    }
    out.push_str("(samples/s: SAMPLE calls for poll and spin, eventfd wakes for arm)\n\n");
    match (&r.ioctl, &r.ioctl_error) {
        (Some(c), _) => out.push_str(&format!(
            "SAMPLE ioctl (1 watch) {:.3} us, Device::sample() {:.3} us, INFO ioctl {:.3} us: \
             SAMPLE/INFO {:.2} (mean of {} calls each)\n",
            c.sample_ioctl_ns / 1e3,
            c.sample_call_ns / 1e3,
            c.info_ioctl_ns / 1e3,
            c.sample_over_info,
            c.calls
        )),
        (None, Some(e)) => out.push_str(&format!("ioctl cost: error: {e}\n")),
        (None, None) => {}
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cost(self_ms: f64, sys_ms: f64, iterations: u64) -> CpuCost {
        CpuCost {
            window_s: 1.0,
            self_cpu_ms_per_s: self_ms,
            system_busy_ms_per_s: sys_ms,
            system_irq_ms_per_s: 1.0,
            iterations,
            spurious: 0,
        }
    }

    fn sample_report() -> DetectReport {
        let mut arm = MethodResult::new("arm-50".into(), "arm", Some(50));
        arm.trials = 4;
        arm.detected = 3;
        arm.misses = 1;
        arm.latencies_us = vec![40.0, 10.0, 30.0];
        arm.summarize();
        arm.idle = Some(cost(0.1, 30.0, 0));
        let mut skipped = MethodResult::new("arm-20".into(), "arm", Some(20));
        skipped.skipped = Some("below the module's minimum ARM period of 50 us".into());
        let mut spin = MethodResult::new("spin".into(), "spin", None);
        spin.trials = 2;
        spin.error = Some("the tenant process exited".into());
        spin.early = 1;
        DetectReport {
            role: "detect".into(),
            kernel: "6.8.0-test".into(),
            note: NOTE.into(),
            node: 0,
            work_us: 1,
            trials: 4,
            gap_ms: [2.0, 20.0],
            timeout_ms: 1000,
            seed: 1,
            clk_tck: 100,
            min_watch_period_us: 50,
            baseline: Some(cost(0.0, 10.0, 0)),
            methods: vec![skipped, arm, spin],
            ioctl: Some(IoctlCost {
                calls: 20_000,
                sample_ioctl_ns: 1500.0,
                sample_call_ns: 2500.0,
                info_ioctl_ns: 500.0,
                sample_over_info: 3.0,
            }),
            ioctl_error: None,
        }
    }

    #[test]
    fn percentiles_come_from_the_detected_trials() {
        let r = sample_report();
        let arm = &r.methods[1];
        assert_eq!(
            (arm.p50_us, arm.p99_us, arm.max_us),
            (Some(30.0), Some(40.0), Some(40.0))
        );
        let mut none = MethodResult::new("poll-20".into(), "poll", Some(20));
        none.summarize();
        assert_eq!((none.p50_us, none.max_us), (None, None));
        assert!(!r.complete());
    }

    #[test]
    fn the_table_labels_the_numbers_and_shows_every_method() {
        let text = render(&sample_report());
        assert!(text.contains("Linux 6.8.0-test"), "{text}");
        assert!(text.contains(NOTE), "{text}");
        assert!(text.contains("arm-20     skipped: below"), "{text}");
        let arm = text.lines().find(|l| l.starts_with("arm-50")).unwrap();
        let cells: Vec<&str> = arm.split_whitespace().collect();
        assert_eq!(&cells[..6], ["arm-50", "3/4", "1", "30.0", "40.0", "40.0"]);
        assert!(text.contains("(nothing)"), "{text}");
        assert!(text.contains("error: the tenant process exited"), "{text}");
        assert!(text.contains("1 trial(s) fired before"), "{text}");
        assert!(
            text.contains("SAMPLE/INFO 3.00 (mean of 20000 calls each)"),
            "{text}"
        );
    }

    #[test]
    fn the_json_round_trips() {
        let r = sample_report();
        let text = serde_json::to_string(&r).unwrap();
        let back: DetectReport = serde_json::from_str(&text).unwrap();
        assert_eq!(back, r);
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["note"], NOTE);
        assert_eq!(v["methods"][1]["misses"], 1);
    }
}
