//! The optional Prometheus endpoint: the statistics ([`Stats`]) in the
//! text exposition format 0.0.4, served over HTTP by a thread of its own
//! on a loopback TCP address or a Unix socket ([`MetricsAddr`]).
//!
//! The daemon renders its statistics ([`render`]) each time it writes them
//! and hands the text to the server ([`MetricsServer::publish`]); a scrape
//! gets the latest text. A client can make the server thread wait (for at
//! most [`IO_TIMEOUT`] per read or write, [`REQUEST_DEADLINE`] per
//! request), never the daemon's main loop: `publish` only swaps a string.
//!
//! ```
//! use kfd_preemptd::metrics::MetricsAddr;
//!
//! let tcp: MetricsAddr = "127.0.0.1:9477".parse().unwrap();
//! assert_eq!(tcp, MetricsAddr::Tcp("127.0.0.1:9477".parse().unwrap()));
//! let unix: MetricsAddr = "unix:/run/kfd-preemptd/metrics.sock".parse().unwrap();
//! assert_eq!(unix.to_string(), "unix:/run/kfd-preemptd/metrics.sock");
//! // No authentication, so loopback only.
//! assert!("0.0.0.0:9477".parse::<MetricsAddr>().is_err());
//!
//! // As the `metrics` key of a configuration.
//! #[derive(Debug, serde::Deserialize)]
//! struct Daemon {
//!     metrics: Option<MetricsAddr>,
//! }
//! let d: Daemon = toml::from_str(r#"metrics = "[::1]:9477""#).unwrap();
//! assert_eq!(d.metrics, Some(MetricsAddr::Tcp("[::1]:9477".parse().unwrap())));
//! let e = toml::from_str::<Daemon>(r#"metrics = "192.168.1.2:9477""#).unwrap_err();
//! assert!(e.to_string().contains("not a loopback address"));
//! ```

use std::{
    collections::HashSet,
    fmt::{self, Display, Write as _},
    fs,
    io::{self, Read, Write},
    net::{TcpListener, TcpStream},
    os::unix::{
        fs::FileTypeExt,
        net::{UnixListener, UnixStream},
    },
    path::Path,
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc, Mutex, MutexGuard,
    },
    thread::{self, JoinHandle},
    time::{Duration, Instant},
};

pub use crate::config::MetricsAddr;
use crate::{
    policy::{Histogram, Mode, LATENCY_BUCKETS},
    stats::{CounterStats, DecisionStats, LatencyStats, Stats},
};

/// Every mode, for the `kfd_preemptd_mode` enum gauge.
const MODES: [Mode; 3] = [Mode::NoLc, Mode::LcIdle, Mode::LcBusy];

/// A compile-time reminder: a new [`Mode`] must be added to [`MODES`].
#[allow(dead_code)]
fn modes_are_complete(m: Mode) {
    match m {
        Mode::NoLc | Mode::LcIdle | Mode::LcBusy => {}
    }
}

/// A Prometheus sample value: integers as they are, floats with `+Inf`,
/// `-Inf` and `NaN` spelled as the format wants.
fn float(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v.is_infinite() {
        if v > 0.0 { "+Inf" } else { "-Inf" }.into()
    } else {
        format!("{v}")
    }
}

/// Escapes a label value: backslash, double quote and line feed.
fn escape(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

/// `{a="x",b="y"}`, escaped; empty for no labels.
fn labels(pairs: &[(&str, &str)]) -> String {
    if pairs.is_empty() {
        return String::new();
    }
    let inner: Vec<String> = pairs
        .iter()
        .map(|(k, v)| format!("{k}=\"{}\"", escape(v)))
        .collect();
    format!("{{{}}}", inner.join(","))
}

/// The text of one exposition, family by family.
struct Exposition(String);

impl Exposition {
    /// `# HELP` and `# TYPE` of a family, once.
    fn family(&mut self, name: &str, kind: &str, help: &str) {
        // Writing to a String cannot fail.
        let _ = writeln!(self.0, "# HELP {name} {help}\n# TYPE {name} {kind}");
    }

    fn sample(&mut self, name: &str, labels: &str, value: impl Display) {
        let _ = writeln!(self.0, "{name}{labels} {value}");
    }
}

/// The `le` bounds (µs, exclusive) of the finite buckets, increasing.
fn bucket_bounds_us() -> impl Iterator<Item = u64> {
    (0..LATENCY_BUCKETS).filter_map(|i| Histogram::bounds(i).1)
}

/// Latencies below `bound_us`: the buckets whose upper bound is at most
/// `bound_us` (the buckets are the histogram's own, so none straddles it).
fn below(h: &LatencyStats, bound_us: u64) -> u64 {
    h.buckets
        .iter()
        .filter(|b| b.high_us.is_some_and(|high| high <= bound_us))
        .map(|b| b.count)
        .sum()
}

const PREFIX: &str = "kfd_preemptd_";

/// A family of one sample per decision: its name's suffix, its help, and
/// how its value is read.
type Field<T> = (&'static str, &'static str, fn(&T) -> String);

/// The statistics in the Prometheus text exposition format 0.0.4.
///
/// Families, all named `kfd_preemptd_*`:
///
/// * process: `build_info{version}`, `uptime_seconds`,
///   `stats_written_timestamp_seconds`;
/// * per decision, labels `gpu_id` and `level`: the gauges `mode` (one
///   series per mode, with a `mode` label, 1 for the current one), `held`,
///   `watched_queues`, `lower_queues`, `lower_run_in_window_seconds`,
///   `idle_hysteresis_seconds`; the
///   counters `preemptions_total`, `preempt_failures_total`,
///   `resumes_total`, `forced_resumes_total`, `lease_renewals_total`,
///   `held_seconds_total`; the histogram `reaction_seconds`;
/// * per tenant, labels `pid`, `comm`, `class` and `priority`: the gauges
///   `tenant_info` (also `rank`; always 1), `tenant_queues`,
///   `tenant_held_queues`.
///
/// A decision whose (`gpu_id`, `level`) or a tenant whose `pid` was
/// already rendered is left out, so every series is unique.
pub fn render(stats: &Stats) -> String {
    let mut seen = HashSet::new();
    let decisions: Vec<_> = stats
        .decisions
        .iter()
        .filter(|d| seen.insert((d.gpu_id, d.level.as_str())))
        .map(|d| {
            let gpu = d.gpu_id.to_string();
            let l = labels(&[("gpu_id", &gpu), ("level", &d.level)]);
            (d, gpu, l)
        })
        .collect();
    let mut pids = HashSet::new();
    let tenants: Vec<_> = stats
        .tenants
        .iter()
        .filter(|t| pids.insert(t.pid))
        .map(|t| {
            let pid = t.pid.to_string();
            let l = labels(&[
                ("pid", &pid),
                ("comm", &t.comm),
                ("class", &t.class),
                ("priority", &t.priority),
            ]);
            (t, pid, l)
        })
        .collect();

    let mut out = Exposition(String::with_capacity(4096 + 4096 * decisions.len()));
    let name = |n: &str| format!("{PREFIX}{n}");

    let n = name("build_info");
    out.family(&n, "gauge", "The daemon's version; always 1.");
    out.sample(&n, &labels(&[("version", env!("CARGO_PKG_VERSION"))]), 1);
    let n = name("uptime_seconds");
    out.family(&n, "gauge", "Seconds since the daemon started.");
    out.sample(&n, "", float(stats.uptime_s));
    let n = name("stats_written_timestamp_seconds");
    out.family(
        &n,
        "gauge",
        "When these statistics were taken, seconds since the Unix epoch.",
    );
    out.sample(&n, "", float(stats.written_at_unix_ms as f64 / 1e3));

    // Per decision: the work of `level` on the node `gpu_id` preempts
    // every lower level's compute queues there.
    let n = name("mode");
    out.family(
        &n,
        "gauge",
        "The decision's state: 1 for the current mode (no-lc, lc-idle, lc-busy), 0 for the others.",
    );
    for (d, gpu, _) in &decisions {
        for m in MODES {
            let l = labels(&[("gpu_id", gpu), ("level", &d.level), ("mode", m.as_str())]);
            out.sample(&n, &l, u8::from(d.mode == m));
        }
    }
    let gauges: [Field<DecisionStats>; 5] = [
        (
            "held",
            "1 while the decision holds the lower levels' queues off the GPU, else 0.",
            |d| u8::from(d.held).to_string(),
        ),
        (
            "watched_queues",
            "Compute queues of the level watched on the node.",
            |d| d.watched_queues.to_string(),
        ),
        (
            "lower_queues",
            "Compute queues of lower levels on the node, which the decision preempts.",
            |d| d.lower_queues.to_string(),
        ),
        (
            "lower_run_in_window_seconds",
            "Run time of the lower levels in the current minimum-share window, seconds.",
            |d| float(d.be_run_in_period_ms / 1e3),
        ),
        (
            "idle_hysteresis_seconds",
            "The idle time the decision waits for before resuming the lower levels, as learnt from the level's gaps, seconds.",
            |d| float(d.idle_hysteresis_us as f64 / 1e6),
        ),
    ];
    for (suffix, help, value) in gauges {
        let n = name(suffix);
        out.family(&n, "gauge", help);
        for (d, _, l) in &decisions {
            out.sample(&n, l, value(d));
        }
    }
    let counters: [Field<CounterStats>; 6] = [
        (
            "preemptions_total",
            "Preemptions of the lower levels that took effect.",
            |c| c.preemptions.to_string(),
        ),
        (
            "preempt_failures_total",
            "Preemptions that took effect for no queue.",
            |c| c.preempt_failures.to_string(),
        ),
        (
            "resumes_total",
            "Resumes of the lower levels, forced ones included.",
            |c| c.resumes.to_string(),
        ),
        (
            "forced_resumes_total",
            "Resumes forced by the minimum share while the level was busy.",
            |c| c.forced_resumes.to_string(),
        ),
        (
            "lease_renewals_total",
            "Renewals of the preemption lease.",
            |c| c.renewals.to_string(),
        ),
        (
            "held_seconds_total",
            "Time the lower levels' queues were held off the GPU, seconds.",
            |c| float(c.held_total_ms / 1e3),
        ),
    ];
    for (suffix, help, value) in counters {
        let n = name(suffix);
        out.family(&n, "counter", help);
        for (d, _, l) in &decisions {
            out.sample(&n, l, value(&d.counters));
        }
    }

    let n = name("reaction_seconds");
    out.family(
        &n,
        "histogram",
        "Reaction time, busy edge seen by the module to preemption done, seconds. The buckets are powers of two microseconds and exclude their upper bound: le=\"0.000004\" counts reactions below 4 us.",
    );
    let bucket = format!("{n}_bucket");
    for (d, gpu, l) in &decisions {
        let h = &d.reaction_latency_us;
        for bound in bucket_bounds_us() {
            let le = float(bound as f64 / 1e6);
            let bl = labels(&[("gpu_id", gpu), ("level", &d.level), ("le", &le)]);
            out.sample(&bucket, &bl, below(h, bound));
        }
        let bl = labels(&[("gpu_id", gpu), ("level", &d.level), ("le", "+Inf")]);
        out.sample(&bucket, &bl, h.count);
        out.sample(&format!("{n}_sum"), l, float(h.sum_us as f64 / 1e6));
        out.sample(&format!("{n}_count"), l, h.count);
    }

    // Per tenant.
    let n = name("tenant_info");
    out.family(
        &n,
        "gauge",
        "An attached tenant process, its class rule, its priority level and the level's rank (0 the lowest); always 1.",
    );
    for (t, pid, _) in &tenants {
        let rank = t.rank.to_string();
        let l = labels(&[
            ("pid", pid),
            ("comm", &t.comm),
            ("class", &t.class),
            ("priority", &t.priority),
            ("rank", &rank),
        ]);
        out.sample(&n, &l, 1);
    }
    let n = name("tenant_queues");
    out.family(&n, "gauge", "The tenant's compute queues on every node.");
    for (t, _, l) in &tenants {
        out.sample(&n, l, t.queues);
    }
    let n = name("tenant_held_queues");
    out.family(
        &n,
        "gauge",
        "The tenant's compute queues held off the GPU now.",
    );
    for (t, _, l) in &tenants {
        out.sample(&n, l, t.held_queues);
    }
    out.0
}

/// The longest a read or a write of one connection may block.
pub const IO_TIMEOUT: Duration = Duration::from_secs(1);

/// The longest one request may take to arrive.
pub const REQUEST_DEADLINE: Duration = Duration::from_secs(2);

/// The longest one response may take to leave: the server has one thread,
/// and a client that reads slowly must not hold it (nor the daemon's
/// shutdown, which joins it) for longer.
pub const RESPONSE_DEADLINE: Duration = Duration::from_secs(2);

/// The most a request's head may hold.
const MAX_REQUEST: usize = 8192;

/// The content type of the text format 0.0.4.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

enum Listener {
    Tcp(TcpListener),
    Unix(UnixListener),
}

/// One accepted connection.
trait Conn: Read + Write {
    fn set_timeouts(&self, read: Option<Duration>, write: Option<Duration>) -> io::Result<()>;
}

impl Conn for TcpStream {
    fn set_timeouts(&self, read: Option<Duration>, write: Option<Duration>) -> io::Result<()> {
        self.set_read_timeout(read)?;
        self.set_write_timeout(write)
    }
}

impl Conn for UnixStream {
    fn set_timeouts(&self, read: Option<Duration>, write: Option<Duration>) -> io::Result<()> {
        self.set_read_timeout(read)?;
        self.set_write_timeout(write)
    }
}

impl Listener {
    fn accept(&self) -> io::Result<Box<dyn Conn>> {
        Ok(match self {
            Listener::Tcp(l) => Box::new(l.accept()?.0),
            Listener::Unix(l) => Box::new(l.accept()?.0),
        })
    }
}

/// The text served; `None` until the first [`MetricsServer::publish`].
type Shared = Arc<Mutex<Option<String>>>;

fn lock(text: &Shared) -> MutexGuard<'_, Option<String>> {
    // A panic elsewhere while holding it leaves a whole string behind.
    text.lock().unwrap_or_else(|e| e.into_inner())
}

/// The HTTP endpoint: a thread named `kfd-preemptd-metrics` that answers
/// `GET /metrics` with the text last published, one request per
/// connection. Dropping it stops the thread and removes its Unix socket.
pub struct MetricsServer {
    addr: MetricsAddr,
    text: Shared,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl fmt::Debug for MetricsServer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MetricsServer")
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

/// Makes room for a Unix socket at `path`: creates its directory, removes
/// a stale socket (one nobody accepts on), and refuses a live socket or
/// anything that is not a socket.
fn prepare_unix_path(path: &Path) -> io::Result<()> {
    if let Some(dir) = path.parent() {
        fs::create_dir_all(dir)?;
    }
    match fs::symlink_metadata(path) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
        Ok(m) if !m.file_type().is_socket() => Err(io::Error::new(
            io::ErrorKind::AlreadyExists,
            format!("{}: exists and is not a socket; left alone", path.display()),
        )),
        Ok(_) => match UnixStream::connect(path) {
            Ok(_) => Err(io::Error::new(
                io::ErrorKind::AddrInUse,
                format!("{}: another process listens on it", path.display()),
            )),
            Err(_) => fs::remove_file(path),
        },
    }
}

impl MetricsServer {
    /// Binds `addr` and starts the server thread. Until the first
    /// [`publish`](Self::publish), `/metrics` answers 503.
    pub fn spawn(addr: &MetricsAddr) -> io::Result<MetricsServer> {
        let (listener, bound) = match addr {
            MetricsAddr::Tcp(a) => {
                let l = TcpListener::bind(a)?;
                let bound = MetricsAddr::Tcp(l.local_addr()?);
                (Listener::Tcp(l), bound)
            }
            MetricsAddr::Unix(p) => {
                prepare_unix_path(p)?;
                (Listener::Unix(UnixListener::bind(p)?), addr.clone())
            }
        };
        let text: Shared = Arc::new(Mutex::new(None));
        let stop = Arc::new(AtomicBool::new(false));
        let spawned = {
            let (text, stop) = (Arc::clone(&text), Arc::clone(&stop));
            thread::Builder::new()
                .name("kfd-preemptd-metrics".into())
                .spawn(move || serve(&listener, &text, &stop))
        };
        let thread = match spawned {
            Ok(t) => t,
            Err(e) => {
                if let MetricsAddr::Unix(p) = addr {
                    let _ = fs::remove_file(p);
                }
                return Err(e);
            }
        };
        Ok(MetricsServer {
            addr: bound,
            text,
            stop,
            thread: Some(thread),
        })
    }

    /// Where it listens (a TCP port 0 resolved to the port bound).
    pub fn addr(&self) -> &MetricsAddr {
        &self.addr
    }

    /// Makes `text` the answer to the next scrapes.
    pub fn publish(&self, text: String) {
        *lock(&self.text) = Some(text);
    }
}

impl Drop for MetricsServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the thread out of accept(); if that fails it is left
        // behind rather than waited for.
        let woken = match &self.addr {
            MetricsAddr::Tcp(a) => TcpStream::connect_timeout(a, IO_TIMEOUT).is_ok(),
            MetricsAddr::Unix(p) => UnixStream::connect(p).is_ok(),
        };
        if let Some(t) = self.thread.take() {
            if woken {
                let _ = t.join();
            }
        }
        if let MetricsAddr::Unix(p) = &self.addr {
            let _ = fs::remove_file(p);
        }
    }
}

fn serve(listener: &Listener, text: &Shared, stop: &AtomicBool) {
    loop {
        let conn = listener.accept();
        if stop.load(Ordering::SeqCst) {
            return;
        }
        match conn {
            // A failed connection concerns its client alone.
            Ok(mut c) => {
                let _ = answer(&mut *c, text);
            }
            // Out of descriptors, say: do not spin.
            Err(_) => thread::sleep(Duration::from_millis(100)),
        }
    }
}

/// Reads one request's head, within [`REQUEST_DEADLINE`]; `None` if the
/// client closed, stalled or sent too much.
fn read_head(c: &mut dyn Conn) -> io::Result<Option<Vec<u8>>> {
    let start = Instant::now();
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    loop {
        let left = REQUEST_DEADLINE.saturating_sub(start.elapsed());
        if left.is_zero() {
            return Ok(None);
        }
        c.set_timeouts(Some(left.min(IO_TIMEOUT)), Some(IO_TIMEOUT))?;
        let n = match c.read(&mut chunk) {
            Ok(0) => return Ok(None),
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        buf.extend_from_slice(&chunk[..n]);
        if buf.windows(4).any(|w| w == b"\r\n\r\n") || buf.windows(2).any(|w| w == b"\n\n") {
            return Ok(Some(buf));
        }
        if buf.len() > MAX_REQUEST {
            return Ok(None);
        }
    }
}

/// The status line and body for a request head.
fn respond(head: &[u8], text: &Shared) -> (&'static str, String) {
    let line = head.split(|b| *b == b'\n').next().unwrap_or_default();
    let line = String::from_utf8_lossy(line);
    let mut words = line.split_whitespace();
    let (method, target) = (words.next(), words.next());
    let path = target.map(|t| t.split('?').next().unwrap_or_default());
    if method == Some("GET") && path == Some("/metrics") {
        match lock(text).clone() {
            Some(body) => ("200 OK", body),
            None => ("503 Service Unavailable", "no statistics yet\n".to_string()),
        }
    } else {
        ("404 Not Found", "not found: GET /metrics\n".to_string())
    }
}

fn answer(c: &mut dyn Conn, text: &Shared) -> io::Result<()> {
    let Some(head) = read_head(c)? else {
        return Ok(());
    };
    let (status, body) = respond(&head, text);
    let content_type = if status.starts_with("200") {
        CONTENT_TYPE
    } else {
        "text/plain; charset=utf-8"
    };
    let mut response = format!(
        "HTTP/1.0 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    response.extend_from_slice(body.as_bytes());
    write_within(c, &response, RESPONSE_DEADLINE)
}

/// Writes all of `bytes` within `deadline`, or gives up (`TimedOut`): each
/// write may block only for what is left of it, so a client that drains a
/// little at a time cannot stretch one response without end.
fn write_within(c: &mut dyn Conn, mut bytes: &[u8], deadline: Duration) -> io::Result<()> {
    let start = Instant::now();
    while !bytes.is_empty() {
        let left = deadline.saturating_sub(start.elapsed());
        if left.is_zero() {
            return Err(io::ErrorKind::TimedOut.into());
        }
        c.set_timeouts(Some(IO_TIMEOUT), Some(left.min(IO_TIMEOUT)))?;
        match c.write(bytes) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => bytes = &bytes[n..],
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    c.flush()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::{BucketStats, ConfigStats, ReactionPhases, TenantStats};

    fn latency(buckets: &[(u64, Option<u64>, u64)], sum_us: u64) -> LatencyStats {
        LatencyStats {
            scale: "log2-us",
            count: buckets.iter().map(|b| b.2).sum(),
            sum_us,
            max_us: 0,
            buckets: buckets
                .iter()
                .map(|&(low_us, high_us, count)| BucketStats {
                    low_us,
                    high_us,
                    count,
                })
                .collect(),
        }
    }

    fn counters(preemptions: u64, held_total_ms: f64) -> CounterStats {
        CounterStats {
            preemptions,
            preempt_failures: 1,
            resumes: preemptions,
            forced_resumes: 2,
            renewals: 7,
            held_total_ms,
        }
    }

    fn fixture() -> Stats {
        let d1 = DecisionStats {
            gpu_id: 4242,
            level: "latency-critical".into(),
            rank: 1,
            mode: Mode::LcBusy,
            held: true,
            watched_queues: 2,
            lower_queues: 5,
            be_run_in_period_ms: 12.5,
            idle_hysteresis_us: 3750,
            counters: counters(3, 1500.0),
            // 0 µs, 3 µs, 300 µs, 300 µs, and one beyond 2^31 µs.
            reaction_latency_us: latency(
                &[
                    (0, Some(2), 1),
                    (2, Some(4), 1),
                    (256, Some(512), 2),
                    (1 << 31, None, 1),
                ],
                3_000_000_603,
            ),
            reaction_phases: (&ReactionPhases::default()).into(),
        };
        let d2 = DecisionStats {
            gpu_id: 7,
            level: "normal".into(),
            rank: 0,
            mode: Mode::NoLc,
            held: false,
            watched_queues: 0,
            lower_queues: 0,
            be_run_in_period_ms: 1000.0,
            idle_hysteresis_us: 1000,
            counters: counters(0, 0.25),
            reaction_latency_us: latency(&[], 0),
            reaction_phases: (&ReactionPhases::default()).into(),
        };
        let tenant =
            |pid, comm: &str, class: &str, priority: &str, rank, queues, held| TenantStats {
                pid,
                comm: comm.into(),
                class: class.into(),
                priority: priority.into(),
                rank,
                queues,
                held_queues: held,
                held: held > 0,
                nodes: vec![4242],
            };
        Stats {
            version: crate::stats::STATS_VERSION,
            pid: 99,
            written_at_unix_ms: 1_764_000_000_123,
            uptime_s: 61.5,
            mode: Mode::LcBusy,
            be_held: true,
            be_run_in_period_ms: 12.5,
            counters: counters(3, 1500.25),
            reaction_latency_us: latency(&[], 0),
            reaction_phases: (&ReactionPhases::default()).into(),
            tenants: vec![
                tenant(10, "serve", "inference", "latency-critical", 1, 2, 0),
                tenant(11, "tr\"ain\\x\ny", "training", "best-effort", 0, 5, 5),
            ],
            config: ConfigStats {
                lease_ms: 200,
                sample_period_us: 50,
                idle_hysteresis_us: 1000,
                idle_hysteresis_max_us: 1000,
                min_share_period_ms: 1000,
                min_share_budget_ms: 100,
            },
            levels: vec!["normal".into(), "latency-critical".into()],
            decisions: vec![d1, d2],
        }
    }

    fn lines_of<'a>(text: &'a str, prefix: &str) -> Vec<&'a str> {
        text.lines().filter(|l| l.starts_with(prefix)).collect()
    }

    const LC: &str = r#"gpu_id="4242",level="latency-critical""#;
    const N: &str = r#"gpu_id="7",level="normal""#;

    #[test]
    fn renders_counters_and_gauges_per_decision() {
        let text = render(&fixture());
        assert_eq!(
            lines_of(&text, "kfd_preemptd_preemptions_total"),
            [
                format!("kfd_preemptd_preemptions_total{{{LC}}} 3"),
                format!("kfd_preemptd_preemptions_total{{{N}}} 0"),
            ]
        );
        assert_eq!(
            lines_of(&text, "kfd_preemptd_held_seconds_total"),
            [
                format!("kfd_preemptd_held_seconds_total{{{LC}}} 1.5"),
                format!("kfd_preemptd_held_seconds_total{{{N}}} 0.00025"),
            ]
        );
        assert_eq!(
            lines_of(&text, "kfd_preemptd_held{"),
            [
                format!("kfd_preemptd_held{{{LC}}} 1"),
                format!("kfd_preemptd_held{{{N}}} 0"),
            ]
        );
        assert_eq!(
            lines_of(&text, "kfd_preemptd_mode{"),
            [
                format!("kfd_preemptd_mode{{{LC},mode=\"no-lc\"}} 0"),
                format!("kfd_preemptd_mode{{{LC},mode=\"lc-idle\"}} 0"),
                format!("kfd_preemptd_mode{{{LC},mode=\"lc-busy\"}} 1"),
                format!("kfd_preemptd_mode{{{N},mode=\"no-lc\"}} 1"),
                format!("kfd_preemptd_mode{{{N},mode=\"lc-idle\"}} 0"),
                format!("kfd_preemptd_mode{{{N},mode=\"lc-busy\"}} 0"),
            ]
        );
        assert_eq!(
            lines_of(&text, "kfd_preemptd_lower_run_in_window_seconds{"),
            [
                format!("kfd_preemptd_lower_run_in_window_seconds{{{LC}}} 0.0125"),
                format!("kfd_preemptd_lower_run_in_window_seconds{{{N}}} 1"),
            ]
        );
        assert_eq!(
            lines_of(&text, "kfd_preemptd_idle_hysteresis_seconds{"),
            [
                format!("kfd_preemptd_idle_hysteresis_seconds{{{LC}}} 0.00375"),
                format!("kfd_preemptd_idle_hysteresis_seconds{{{N}}} 0.001"),
            ]
        );
        assert!(text.contains(&format!("kfd_preemptd_watched_queues{{{LC}}} 2\n")));
        assert!(text.contains(&format!("kfd_preemptd_lower_queues{{{LC}}} 5\n")));
        assert!(text.contains(&format!("kfd_preemptd_lease_renewals_total{{{N}}} 7\n")));
        assert!(text.contains(&format!("kfd_preemptd_forced_resumes_total{{{N}}} 2\n")));
        assert!(text.contains(&format!("kfd_preemptd_preempt_failures_total{{{N}}} 1\n")));
        assert!(text.contains(&format!(
            "kfd_preemptd_build_info{{version=\"{}\"}} 1\n",
            env!("CARGO_PKG_VERSION")
        )));
        assert!(text.contains("\nkfd_preemptd_uptime_seconds 61.5\n"));
        assert!(text.contains("\nkfd_preemptd_stats_written_timestamp_seconds 1764000000.123\n"));
    }

    #[test]
    fn histogram_buckets_are_cumulative_in_seconds() {
        let text = render(&fixture());
        let lc = lines_of(
            &text,
            &format!("kfd_preemptd_reaction_seconds_bucket{{{LC}"),
        );
        // 31 finite bounds (2 µs .. 2^31 µs) and +Inf.
        assert_eq!(lc.len(), LATENCY_BUCKETS);
        let at = |le: &str| {
            let prefix = format!("kfd_preemptd_reaction_seconds_bucket{{{LC},le=\"{le}\"}} ");
            lc.iter()
                .find_map(|l| l.strip_prefix(&prefix))
                .unwrap_or_else(|| panic!("no bucket le={le}"))
                .to_string()
        };
        assert_eq!(at("0.000002"), "1"); // 0 µs
        assert_eq!(at("0.000004"), "2"); // and 3 µs
        assert_eq!(at("0.000256"), "2"); // 300 µs is not below 256 µs
        assert_eq!(at("0.000512"), "4");
        assert_eq!(at("1.048576"), "4");
        assert_eq!(at("2147.483648"), "4"); // the last finite bound
        assert_eq!(at("+Inf"), "5");
        let values: Vec<u64> = lc
            .iter()
            .map(|l| l.rsplit(' ').next().unwrap().parse().unwrap())
            .collect();
        assert!(values.windows(2).all(|w| w[0] <= w[1]), "{values:?}");
        assert!(text.contains(&format!(
            "\nkfd_preemptd_reaction_seconds_sum{{{LC}}} 3000.000603\n"
        )));
        assert!(text.contains(&format!(
            "\nkfd_preemptd_reaction_seconds_count{{{LC}}} 5\n"
        )));
        // An empty histogram has every bucket, all zero.
        let n = lines_of(&text, &format!("kfd_preemptd_reaction_seconds_bucket{{{N}"));
        assert_eq!(n.len(), LATENCY_BUCKETS);
        assert!(n.iter().all(|l| l.ends_with(" 0")));
        assert!(text.contains(&format!("\nkfd_preemptd_reaction_seconds_count{{{N}}} 0\n")));
    }

    #[test]
    fn tenants_are_labelled_and_escaped() {
        let text = render(&fixture());
        let odd = r#"pid="11",comm="tr\"ain\\x\ny",class="training",priority="best-effort""#;
        assert_eq!(
            lines_of(&text, "kfd_preemptd_tenant_held_queues{"),
            [
                r#"kfd_preemptd_tenant_held_queues{pid="10",comm="serve",class="inference",priority="latency-critical"} 0"#.to_string(),
                format!("kfd_preemptd_tenant_held_queues{{{odd}}} 5"),
            ]
        );
        assert!(text.contains(&format!("\nkfd_preemptd_tenant_queues{{{odd}}} 5\n")));
        assert!(text.contains(&format!(
            "\nkfd_preemptd_tenant_info{{{odd},rank=\"0\"}} 1\n"
        )));
        // The newline in the comm is escaped, not written.
        assert!(text.lines().all(|l| !l.starts_with('y')));
    }

    #[test]
    fn help_and_type_once_per_family_and_series_unique() {
        let mut s = fixture();
        // Duplicates are left out rather than exposed twice.
        s.decisions.push(s.decisions[0].clone());
        s.tenants.push(s.tenants[0].clone());
        let text = render(&s);
        let mut helps = HashSet::new();
        let mut types = HashSet::new();
        let mut series = HashSet::new();
        for l in text.lines() {
            if let Some(h) = l.strip_prefix("# HELP ") {
                assert!(
                    helps.insert(h.split(' ').next().unwrap().to_string()),
                    "{l}"
                );
            } else if let Some(t) = l.strip_prefix("# TYPE ") {
                let mut w = t.split(' ');
                let (name, kind) = (w.next().unwrap(), w.next().unwrap());
                assert!(name.starts_with(PREFIX), "{l}");
                assert_eq!(kind == "counter", name.ends_with("_total"), "{l}");
                assert!(types.insert(name.to_string()), "{l}");
            } else {
                let (s, _) = l.rsplit_once(' ').unwrap();
                assert!(series.insert(s.to_string()), "duplicate series {s}");
            }
        }
        assert_eq!(helps, types);
        assert_eq!(lines_of(&text, "kfd_preemptd_preemptions_total{").len(), 2);
        assert_eq!(lines_of(&text, "kfd_preemptd_tenant_queues{").len(), 2);
    }

    #[test]
    fn float_spells_specials() {
        assert_eq!(float(f64::INFINITY), "+Inf");
        assert_eq!(float(f64::NEG_INFINITY), "-Inf");
        assert_eq!(float(f64::NAN), "NaN");
        assert_eq!(float(0.000002), "0.000002");
        assert_eq!(float(3.0), "3");
    }

    #[test]
    fn addresses_parse_or_say_why_not() {
        assert_eq!(
            "127.0.0.2:1".parse::<MetricsAddr>(),
            Ok(MetricsAddr::Tcp("127.0.0.2:1".parse().unwrap()))
        );
        assert_eq!(
            "unix:/run/x/m.sock".parse::<MetricsAddr>(),
            Ok(MetricsAddr::Unix("/run/x/m.sock".into()))
        );
        let why = |s: &str| s.parse::<MetricsAddr>().unwrap_err().to_string();
        assert!(why("0.0.0.0:9477").contains("not a loopback address"));
        assert!(why("[::]:9477").contains("not a loopback address"));
        assert!(why("10.1.2.3:9477").contains("not a loopback address"));
        assert!(why("[::ffff:127.0.0.1]:9477").contains("not a loopback address"));
        assert!(why("localhost:9477").contains("not an address"));
        assert!(why("127.0.0.1").contains("not an address"));
        assert!(why("").contains("not an address"));
        assert!(why("127.0.0.1:0").contains("port 0"));
        assert!(why("unix:run/m.sock").contains("absolute path"));
        assert!(why("unix:").contains("absolute path"));
        assert!(why("unix:/").contains("absolute path"));
        assert!(why(&format!("unix:/{}", "a".repeat(107))).contains("at most 107 bytes"));
        // The message quotes what was given.
        assert!(why("10.1.2.3:9477").starts_with("\"10.1.2.3:9477\": "));
    }

    /// One request over `c`; the response's status line and body.
    fn fetch<S: Read + Write>(mut c: S, request: &str) -> (String, String, String) {
        c.write_all(request.as_bytes()).unwrap();
        let mut raw = String::new();
        c.read_to_string(&mut raw).unwrap();
        let (head, body) = raw.split_once("\r\n\r\n").unwrap();
        let mut lines = head.lines();
        let status = lines.next().unwrap().to_string();
        let ctype = lines
            .find_map(|l| l.strip_prefix("Content-Type: "))
            .unwrap_or_default()
            .to_string();
        (status, ctype, body.to_string())
    }

    fn get(path: &str) -> String {
        format!("GET {path} HTTP/1.1\r\nHost: x\r\nAccept: */*\r\n\r\n")
    }

    #[test]
    fn serves_metrics_over_tcp() {
        let server =
            MetricsServer::spawn(&MetricsAddr::Tcp("127.0.0.1:0".parse().unwrap())).unwrap();
        let MetricsAddr::Tcp(addr) = *server.addr() else {
            panic!("not TCP");
        };
        assert_ne!(addr.port(), 0);
        let conn = || TcpStream::connect(addr).unwrap();
        let (status, _, _) = fetch(conn(), &get("/metrics"));
        assert_eq!(status, "HTTP/1.0 503 Service Unavailable");
        let text = render(&fixture());
        server.publish(text.clone());
        let (status, ctype, body) = fetch(conn(), &get("/metrics"));
        assert_eq!(status, "HTTP/1.0 200 OK");
        assert_eq!(ctype, CONTENT_TYPE);
        assert_eq!(body, text);
        server.publish("kfd_preemptd_uptime_seconds 2\n".into());
        let (_, _, body) = fetch(conn(), &get("/metrics?x=1"));
        assert_eq!(body, "kfd_preemptd_uptime_seconds 2\n");
        for req in [
            get("/"),
            get("/metricsx"),
            get("/metrics/"),
            "POST /metrics HTTP/1.0\r\n\r\n".into(),
            "garbage\r\n\r\n".into(),
        ] {
            let (status, _, _) = fetch(conn(), &req);
            assert_eq!(status, "HTTP/1.0 404 Not Found", "{req:?}");
        }
        // A client that sends nothing does not stop the next one for
        // longer than the deadline.
        let silent = conn();
        let start = Instant::now();
        let (status, _, _) = fetch(conn(), &get("/metrics"));
        assert_eq!(status, "HTTP/1.0 200 OK");
        assert!(start.elapsed() < REQUEST_DEADLINE + Duration::from_millis(1500));
        drop(silent);
        drop(server);
        assert!(
            TcpStream::connect(addr).is_err(),
            "still listening after drop"
        );
    }

    /// A client that reads a large answer a little at a time, each read
    /// well within the write timeout, holds the one server thread no
    /// longer than the response deadline: the next client is served.
    #[test]
    fn a_slow_reader_does_not_hold_the_server() {
        let server =
            MetricsServer::spawn(&MetricsAddr::Tcp("127.0.0.1:0".parse().unwrap())).unwrap();
        let MetricsAddr::Tcp(addr) = *server.addr() else {
            panic!("not TCP");
        };
        server.publish("x".repeat(32 << 20));
        let stop = Arc::new(AtomicBool::new(false));
        let slow = {
            let stop = Arc::clone(&stop);
            thread::spawn(move || {
                let mut c = TcpStream::connect(addr).unwrap();
                c.write_all(get("/metrics").as_bytes()).unwrap();
                // 1.3 MB/s: room in the socket at every write timeout.
                let mut buf = vec![0u8; 64 << 10];
                while !stop.load(Ordering::SeqCst) {
                    match c.read(&mut buf) {
                        Ok(0) | Err(_) => return,
                        Ok(_) => thread::sleep(Duration::from_millis(50)),
                    }
                }
            })
        };
        thread::sleep(Duration::from_millis(200));
        server.publish("kfd_preemptd_uptime_seconds 3\n".into());
        // Served once the slow answer's deadline has passed; without one,
        // only when the slow reader is done, minutes later: the read
        // timeout makes that a failure rather than a hang.
        let next = TcpStream::connect(addr).unwrap();
        next.set_read_timeout(Some(RESPONSE_DEADLINE * 4)).unwrap();
        let (status, _, body) = fetch(next, &get("/metrics"));
        stop.store(true, Ordering::SeqCst);
        assert_eq!(status, "HTTP/1.0 200 OK");
        assert_eq!(body, "kfd_preemptd_uptime_seconds 3\n");
        slow.join().unwrap();
    }

    #[test]
    fn serves_metrics_over_a_unix_socket() {
        let dir = std::env::temp_dir().join(format!("kfd-preemptd-metrics-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        let path = dir.join("sub/metrics.sock");
        // A stale socket from an earlier run is replaced.
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        drop(UnixListener::bind(&path).unwrap());
        assert!(path.exists());
        let addr: MetricsAddr = format!("unix:{}", path.display()).parse().unwrap();
        let server = MetricsServer::spawn(&addr).unwrap();
        // A live one is not.
        let e = MetricsServer::spawn(&addr).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::AddrInUse);
        server.publish("x 1\n".into());
        let (status, ctype, body) = fetch(UnixStream::connect(&path).unwrap(), &get("/metrics"));
        assert_eq!(
            (status.as_str(), ctype.as_str(), body.as_str()),
            ("HTTP/1.0 200 OK", CONTENT_TYPE, "x 1\n")
        );
        let (status, _, _) = fetch(UnixStream::connect(&path).unwrap(), &get("/other"));
        assert_eq!(status, "HTTP/1.0 404 Not Found");
        drop(server);
        assert!(!path.exists(), "socket left behind");
        // Nor is a file that is not a socket.
        fs::write(&path, "keep").unwrap();
        let e = MetricsServer::spawn(&addr).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::AlreadyExists);
        assert_eq!(fs::read_to_string(&path).unwrap(), "keep");
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn server_thread_is_named() {
        // The name shows in /proc/PID/task/*/comm (15 bytes at most).
        let server =
            MetricsServer::spawn(&MetricsAddr::Tcp("127.0.0.1:0".parse().unwrap())).unwrap();
        // The thread names itself once it runs.
        let start = Instant::now();
        let names = loop {
            let names: Vec<String> = fs::read_dir("/proc/self/task")
                .unwrap()
                .filter_map(|t| fs::read_to_string(t.ok()?.path().join("comm")).ok())
                .collect();
            if names.iter().any(|n| n.trim() == "kfd-preemptd-me")
                || start.elapsed() > Duration::from_secs(5)
            {
                break names;
            }
            thread::sleep(Duration::from_millis(10));
        };
        assert!(
            names.iter().any(|n| n.trim() == "kfd-preemptd-me"),
            "{names:?}"
        );
        drop(server);
    }
}
