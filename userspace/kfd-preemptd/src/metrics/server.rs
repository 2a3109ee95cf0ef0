//! The metrics endpoint's HTTP server: one thread that answers `GET
//! /metrics` with the text last published, one request per connection.
//!
//! It is written here rather than taken from a crate because what it must
//! guarantee is what the small synchronous HTTP servers leave out: one
//! thread, however many clients connect; a deadline on every read and
//! write, so a client that stalls or drains slowly holds it for at most
//! [`REQUEST_DEADLINE`] plus [`RESPONSE_DEADLINE`]; and an accept error
//! (out of descriptors) pauses it rather than ending it. `tiny_http` 0.12,
//! for one, starts a thread per connection with no timeout and stops
//! accepting after its first accept error. The request head is parsed by
//! `httparse`, the parser `hyper` uses.

use std::{
    fmt, fs,
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

use crate::config::MetricsAddr;

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
pub const CONTENT_TYPE: &str = prometheus_client::encoding::prometheus_text::CONTENT_TYPE;

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

/// What a request's head asked for.
enum Asked {
    /// `GET /metrics`, with or without a query.
    Metrics,
    /// Another method or path.
    Other,
    /// Not an HTTP/1.x request head (of at most 32 headers).
    NotHttp,
}

/// Reads one request's head, within [`REQUEST_DEADLINE`]; `None` if the
/// client closed, stalled or sent more than [`MAX_REQUEST`] bytes.
fn read_request(c: &mut dyn Conn) -> io::Result<Option<Asked>> {
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
        let mut headers = [httparse::EMPTY_HEADER; 32];
        let mut req = httparse::Request::new(&mut headers);
        match req.parse(&buf) {
            Ok(httparse::Status::Complete(_)) => {
                let path = req.path.and_then(|p| p.split('?').next());
                return Ok(Some(
                    if req.method == Some("GET") && path == Some("/metrics") {
                        Asked::Metrics
                    } else {
                        Asked::Other
                    },
                ));
            }
            Ok(httparse::Status::Partial) if buf.len() <= MAX_REQUEST => {}
            Ok(httparse::Status::Partial) => return Ok(None),
            Err(_) => return Ok(Some(Asked::NotHttp)),
        }
    }
}

/// The status line and body for what a request asked for.
fn respond(asked: Asked, text: &Shared) -> (&'static str, String) {
    match asked {
        Asked::Metrics => match lock(text).clone() {
            Some(body) => ("200 OK", body),
            None => ("503 Service Unavailable", "no statistics yet\n".to_string()),
        },
        Asked::Other => ("404 Not Found", "not found: GET /metrics\n".to_string()),
        Asked::NotHttp => ("400 Bad Request", "not an HTTP request\n".to_string()),
    }
}

fn answer(c: &mut dyn Conn, text: &Shared) -> io::Result<()> {
    let Some(asked) = read_request(c)? else {
        return Ok(());
    };
    let (status, body) = respond(asked, text);
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
        let text = "kfd_preemptd_uptime_seconds 1\n".to_string();
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
        ] {
            let (status, _, _) = fetch(conn(), &req);
            assert_eq!(status, "HTTP/1.0 404 Not Found", "{req:?}");
        }
        for req in [
            "garbage\r\n\r\n",
            "GET /metrics HTTP/1.1\r\nno colon\r\n\r\n",
        ] {
            let (status, _, _) = fetch(conn(), req);
            assert_eq!(status, "HTTP/1.0 400 Bad Request", "{req:?}");
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
