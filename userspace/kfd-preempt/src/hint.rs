//! Hints to kfd-preemptd: a latency-critical service says that work is
//! coming, so that the daemon takes the lower levels' queues off the node
//! before the work's first dispatch instead of reacting to it
//! (`Documentation/userspace.rst`, "HINTS").
//!
//! The daemon listens on a Unix `SOCK_SEQPACKET` socket (its
//! `hint_socket`). It knows the caller by `SO_PEERCRED` and takes a hint
//! only from a process it has classified as a tenant of a level with a
//! level below it, about nodes where that process has queues. Each message
//! is one packet of ASCII, at most [`MAX_MESSAGE`] bytes:
//!
//! | request                         | meaning                                      |
//! |---------------------------------|----------------------------------------------|
//! | `begin MS`                      | work within `MS` ms on every node with my queues |
//! | `begin MS GPU_ID [GPU_ID...]`   | the same on these nodes only                 |
//! | `end`                           | my hint is over (closing the connection too) |
//!
//! and each request gets one reply, `ok N` (the hint holds on `N` nodes) or
//! `refused REASON` ([`Refusal`]). After refusing `not-a-tenant` or
//! `malformed` the daemon closes the connection (which ends its hint);
//! [`HintClient`] connects again at its next request.
//!
//! A hint is over when the work it announced comes and goes (its first
//! busy edge spends it), when its time passes with no work, when it is
//! ended, or when its connection closes. The [`Hint`] guard does not end
//! it when dropped: a service that launches its kernels and lets the guard
//! go leaves the hint to the work's busy edge.
//!
//! ```no_run
//! use std::time::Duration;
//! use kfd_preempt::hint::HintClient;
//!
//! let client = HintClient::connect("/run/kfd-preemptd/hint.sock")?;
//! // A request arrived: parse and copy its inputs while the node clears.
//! let hint = client.begin(Duration::from_millis(20), &[])?;
//! // ... launch the request's kernels: their busy edge spends the hint ...
//! hint.leave(); // what dropping the guard does too
//! // A request cancelled before its kernels: `hint.end()?` instead, and
//! // the lower levels come back at once.
//! # Ok::<(), kfd_preempt::hint::HintError>(())
//! ```

use std::{
    cell::{Cell, Ref, RefCell},
    fmt, io,
    os::fd::OwnedFd,
    path::{Path, PathBuf},
    time::Duration,
};

use rustix::{
    io::Errno,
    net::{
        connect, recv, send, socket_with,
        sockopt::{set_socket_timeout, Timeout},
        AddressFamily, RecvFlags, SendFlags, SocketAddrUnix, SocketFlags, SocketType,
    },
};

/// The longest message either side sends, in bytes.
pub const MAX_MESSAGE: usize = 128;

/// The most nodes one hint may name.
pub const MAX_HINT_NODES: usize = 16;

/// How long [`HintClient::begin`] and [`HintClient::end`] wait for the
/// daemon (to take the request, then to answer) before they fail: it
/// answers within one turn of its loop, so a longer wait is a daemon that
/// is stuck, and a service's request must not wait for it.
pub const REPLY_TIMEOUT: Duration = Duration::from_secs(1);

/// A request to the daemon.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    /// Work is coming within `within` on `nodes` (gpu_ids; empty: every
    /// node where the caller has queues).
    Begin {
        /// How soon, at the latest.
        within: Duration,
        /// The nodes, or none for all of the caller's.
        nodes: Vec<u32>,
    },
    /// The caller's hint is over.
    End,
}

impl Request {
    /// The request as it goes on the socket.
    ///
    /// ```
    /// use std::time::Duration;
    /// use kfd_preempt::hint::Request;
    ///
    /// let r = Request::Begin { within: Duration::from_millis(5), nodes: vec![0x5100] };
    /// assert_eq!(r.encode(), "begin 5 0x5100");
    /// assert_eq!(Request::decode(r.encode().as_bytes()), Some(r));
    /// ```
    pub fn encode(&self) -> String {
        match self {
            Request::Begin { within, nodes } => {
                let mut s = format!("begin {}", within.as_millis());
                for n in nodes {
                    s.push_str(&format!(" {n:#x}"));
                }
                s
            }
            Request::End => "end".to_string(),
        }
    }

    /// Reads a request; `None` for anything that is not one (a gpu_id is
    /// hexadecimal with `0x`, or decimal).
    pub fn decode(msg: &[u8]) -> Option<Request> {
        let text = std::str::from_utf8(msg).ok()?;
        let mut words = text.split_ascii_whitespace();
        let request = match words.next()? {
            "begin" => {
                let ms: u64 = words.next()?.parse().ok()?;
                let nodes = words.map(parse_gpu_id).collect::<Option<Vec<u32>>>()?;
                if nodes.len() > MAX_HINT_NODES {
                    return None;
                }
                Request::Begin {
                    within: Duration::from_millis(ms),
                    nodes,
                }
            }
            "end" if words.next().is_none() => Request::End,
            _ => return None,
        };
        Some(request)
    }
}

fn parse_gpu_id(word: &str) -> Option<u32> {
    match word.strip_prefix("0x") {
        Some(hex) => u32::from_str_radix(hex, 16).ok(),
        None => word.parse().ok(),
    }
}

/// Why the daemon refused a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// Not a request ([`Request::decode`]), or a `begin` of 0 ms or longer
    /// than the daemon's `hint_max_ms`.
    Malformed,
    /// The caller is not a tenant the daemon has classified.
    NotATenant,
    /// The caller's level is the lowest: there is nothing below it to
    /// take off a node.
    LowestLevel,
    /// The caller has no queues on a node it named, or on any node.
    NoQueues,
    /// The caller gave more hints than its rate (`hint_rate`) allows.
    RateLimited,
}

impl Refusal {
    /// Every refusal.
    pub const ALL: [Refusal; 5] = [
        Refusal::Malformed,
        Refusal::NotATenant,
        Refusal::LowestLevel,
        Refusal::NoQueues,
        Refusal::RateLimited,
    ];

    /// The refusal's name, as the reply, the statistics and the metrics
    /// write it.
    pub fn as_str(self) -> &'static str {
        match self {
            Refusal::Malformed => "malformed",
            Refusal::NotATenant => "not-a-tenant",
            Refusal::LowestLevel => "lowest-level",
            Refusal::NoQueues => "no-queues",
            Refusal::RateLimited => "rate-limited",
        }
    }

    /// Whether the daemon closes the connection after this refusal: a
    /// caller that is not a tenant, or does not speak the protocol, has no
    /// use for one.
    pub fn closes_connection(self) -> bool {
        matches!(self, Refusal::NotATenant | Refusal::Malformed)
    }

    /// The errno a C or Python caller sees for it.
    pub fn errno(self) -> Errno {
        match self {
            Refusal::Malformed => Errno::INVAL,
            Refusal::NotATenant | Refusal::LowestLevel => Errno::PERM,
            Refusal::NoQueues => Errno::NOENT,
            Refusal::RateLimited => Errno::AGAIN,
        }
    }
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The daemon's answer to one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reply {
    /// Done: a `begin` holds on this many nodes (an `end`: 0).
    Ok(u32),
    /// Refused.
    Refused(Refusal),
}

impl Reply {
    /// The reply as it goes on the socket.
    ///
    /// ```
    /// use kfd_preempt::hint::{Refusal, Reply};
    ///
    /// assert_eq!(Reply::Ok(2).encode(), "ok 2");
    /// let r = Reply::Refused(Refusal::NotATenant);
    /// assert_eq!(Reply::decode(r.encode().as_bytes()), Some(r));
    /// ```
    pub fn encode(&self) -> String {
        match self {
            Reply::Ok(n) => format!("ok {n}"),
            Reply::Refused(r) => format!("refused {r}"),
        }
    }

    /// Reads a reply; `None` for anything that is not one.
    pub fn decode(msg: &[u8]) -> Option<Reply> {
        let text = std::str::from_utf8(msg).ok()?;
        let (word, rest) = text.split_once(' ')?;
        match word {
            "ok" => rest.parse().ok().map(Reply::Ok),
            "refused" => Refusal::ALL
                .into_iter()
                .find(|r| r.as_str() == rest)
                .map(Reply::Refused),
            _ => None,
        }
    }
}

/// A hint that failed.
#[derive(Debug)]
pub enum HintError {
    /// The socket could not be reached or used (the daemon is not running,
    /// or runs without `hint_socket`).
    Io(io::Error),
    /// The daemon refused the request.
    Refused(Refusal),
    /// The daemon answered something this crate does not understand.
    BadReply,
}

impl HintError {
    /// The errno a C or Python caller sees for it.
    pub fn errno(&self) -> Errno {
        match self {
            HintError::Io(e) => e.raw_os_error().map_or(Errno::IO, Errno::from_raw_os_error),
            HintError::Refused(r) => r.errno(),
            HintError::BadReply => Errno::PROTO,
        }
    }
}

impl fmt::Display for HintError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HintError::Io(e) => write!(
                f,
                "the daemon's hint socket: {e} (is kfd-preemptd running with hint_socket set?)"
            ),
            HintError::Refused(Refusal::NotATenant) => f.write_str(
                "refused: this process is not one of kfd-preemptd's tenants (no GPU queues yet, or no class rule matches it)",
            ),
            HintError::Refused(Refusal::LowestLevel) => {
                f.write_str("refused: this process's level is the lowest; a hint would preempt nothing")
            }
            HintError::Refused(Refusal::NoQueues) => {
                f.write_str("refused: this process has no queues on a node named (or on any node)")
            }
            HintError::Refused(Refusal::RateLimited) => {
                f.write_str("refused: more hints than the daemon's hint_rate allows; try again later")
            }
            HintError::Refused(Refusal::Malformed) => f.write_str(
                "refused: not a hint the daemon takes (0 ms, longer than its hint_max_ms, or too many nodes)",
            ),
            HintError::BadReply => f.write_str("the daemon answered something that is not a reply"),
        }
    }
}

impl std::error::Error for HintError {}

impl From<io::Error> for HintError {
    fn from(e: io::Error) -> Self {
        HintError::Io(e)
    }
}

impl From<Errno> for HintError {
    fn from(e: Errno) -> Self {
        HintError::Io(e.into())
    }
}

/// A connection to the daemon's hint socket. One hint at a time holds on
/// it; closing it (dropping the client) ends that hint.
///
/// The daemon closes the connection after refusing `not-a-tenant` or
/// `malformed` ([`Refusal::closes_connection`]), or when it cannot take a
/// reply; the client then connects again at its next request. Replies
/// come in the order of the requests: the client keeps count of those it
/// has not read, so that each request reads its own, even after a wait
/// for one failed.
#[derive(Debug)]
pub struct HintClient {
    path: PathBuf,
    /// The connection; `None` once the daemon closed it, until the next
    /// request connects again.
    fd: RefCell<Option<OwnedFd>>,
    /// Replies to [`HintClient::notify`] not read yet.
    unread: Cell<u32>,
    /// The reply to a `begin` or `end` that failed waiting for it: it comes
    /// before those of `unread`, and is read and dropped.
    stale: Cell<bool>,
    /// Hints given by `notify` that the daemon refused, as far as read.
    refused: Cell<u64>,
}

/// A connection to the socket `path`, whose blocking sends and receives
/// give up after [`REPLY_TIMEOUT`].
fn open(path: &Path) -> Result<OwnedFd, HintError> {
    let fd = socket_with(
        AddressFamily::UNIX,
        SocketType::SEQPACKET,
        SocketFlags::CLOEXEC,
        None,
    )?;
    set_socket_timeout(&fd, Timeout::Recv, Some(REPLY_TIMEOUT))?;
    set_socket_timeout(&fd, Timeout::Send, Some(REPLY_TIMEOUT))?;
    connect(&fd, &SocketAddrUnix::new(path)?)?;
    Ok(fd)
}

/// A blocking send or receive that gave up ([`REPLY_TIMEOUT`]).
fn timed_out() -> HintError {
    // With the errno, so that C and Python callers see ETIMEDOUT.
    Errno::TIMEDOUT.into()
}

/// Whether `e` says that the connection is gone.
fn is_gone(e: Errno) -> bool {
    matches!(e, Errno::PIPE | Errno::CONNRESET | Errno::NOTCONN)
}

impl HintClient {
    /// Connects to the daemon's `hint_socket`.
    pub fn connect(path: impl AsRef<Path>) -> Result<Self, HintError> {
        let path = path.as_ref();
        let fd = open(path)?;
        Ok(HintClient {
            path: path.to_owned(),
            fd: RefCell::new(Some(fd)),
            unread: Cell::new(0),
            stale: Cell::new(false),
            refused: Cell::new(0),
        })
    }

    /// Says that work is coming, as [`HintClient::begin`] does, without
    /// waiting for the daemon's answer: what a service calls when a request
    /// arrives, so that its preparation is not held up. The hint runs its
    /// course (or a later `end` or `begin` on this client ends or replaces
    /// it). Answers are read later, without waiting: refusals are counted
    /// ([`HintClient::refused`]). Fails only if the request cannot be sent
    /// now (the daemon is gone, or has not read a socket's worth of them).
    pub fn notify(&self, within: Duration, nodes: &[u32]) -> Result<(), HintError> {
        self.read_answers(false)?;
        let request = Request::Begin {
            within,
            nodes: nodes.to_vec(),
        };
        self.send(&request, false)?;
        self.unread.set(self.unread.get() + 1);
        Ok(())
    }

    /// Hints given by [`HintClient::notify`] that the daemon refused, of
    /// the answers read so far (with those whose answer was lost with the
    /// connection: they do not hold).
    pub fn refused(&self) -> u64 {
        // Answers that came meanwhile; an error shows at the next call.
        let _ = self.read_answers(false);
        self.refused.get()
    }

    /// Reads the replies owed that have come (all of them, waiting up to
    /// [`REPLY_TIMEOUT`] for each, if `wait`).
    fn read_answers(&self, wait: bool) -> Result<(), HintError> {
        while self.stale.get() || self.unread.get() > 0 {
            let reply = match self.receive(wait) {
                Ok(Some(reply)) => reply,
                Ok(None) => return Ok(()),
                // The connection is gone (the daemon closed it after a
                // refusal that closes, with more answers owed on it):
                // `lost` counted the answers owed as refused, and the
                // next request connects again.
                Err(HintError::Io(_)) if self.fd.borrow().is_none() => return Ok(()),
                Err(e) => return Err(e),
            };
            // Its caller had its error already.
            if !self.stale.replace(false) {
                self.unread.set(self.unread.get() - 1);
                if matches!(reply, Reply::Refused(_)) {
                    self.refused.set(self.refused.get() + 1);
                }
            }
            self.closed_after(reply);
        }
        Ok(())
    }

    /// Says that work is coming within `within` on `nodes` (gpu_ids; empty:
    /// every node where this process has queues). The hint is over when
    /// the work comes and goes as usual, when `within` passes with no
    /// work, when [`Hint::end`] or [`HintClient::end`] ends it, or when
    /// the connection closes; dropping the returned guard leaves it be.
    /// Waits up to [`REPLY_TIMEOUT`] for the daemon's answer.
    pub fn begin(&self, within: Duration, nodes: &[u32]) -> Result<Hint<'_>, HintError> {
        let n = self.ask(&Request::Begin {
            within,
            nodes: nodes.to_vec(),
        })?;
        Ok(Hint {
            client: self,
            nodes: n,
        })
    }

    /// Ends this connection's hint, if one holds. Waits up to
    /// [`REPLY_TIMEOUT`] for the daemon's answer.
    pub fn end(&self) -> Result<(), HintError> {
        if self.fd.borrow().is_none() {
            // The daemon closed the connection, which ended its hint.
            return Ok(());
        }
        self.ask(&Request::End).map(drop)
    }

    fn ask(&self, request: &Request) -> Result<u32, HintError> {
        // The answers to `notify` come first.
        self.read_answers(true)?;
        self.send(request, true)?;
        // Owed from now on: if the wait fails, the next read drops it.
        self.stale.set(true);
        let reply = self.receive(true)?.ok_or_else(timed_out)?;
        self.stale.set(false);
        self.closed_after(reply);
        match reply {
            Reply::Ok(nodes) => Ok(nodes),
            Reply::Refused(r) => Err(HintError::Refused(r)),
        }
    }

    /// The connection, made again if the daemon closed the last one.
    fn connection(&self) -> Result<Ref<'_, OwnedFd>, HintError> {
        if self.fd.borrow().is_none() {
            let fd = open(&self.path)?;
            *self.fd.borrow_mut() = Some(fd);
        }
        Ref::filter_map(self.fd.borrow(), Option::as_ref)
            .map_err(|_| HintError::from(Errno::NOTCONN))
    }

    /// Sends `request`, waiting up to [`REPLY_TIMEOUT`] for room if `wait`.
    fn send(&self, request: &Request, wait: bool) -> Result<(), HintError> {
        let flags = if wait {
            SendFlags::NOSIGNAL
        } else {
            SendFlags::NOSIGNAL | SendFlags::DONTWAIT
        };
        let sent = {
            let fd = self.connection()?;
            loop {
                // A signal before the packet went leaves nothing sent.
                match send(&*fd, request.encode().as_bytes(), flags) {
                    Err(Errno::INTR) => continue,
                    r => break r,
                }
            }
        };
        match sent {
            Ok(_) => Ok(()),
            Err(Errno::AGAIN) if wait => Err(timed_out()),
            Err(e) if is_gone(e) => {
                self.lost();
                Err(e.into())
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Receives one reply, waiting up to [`REPLY_TIMEOUT`] for it if
    /// `wait`; `None` if none has come. A reply that is not one, or the
    /// end of the connection, drops the connection: what is owed on it is
    /// not coming.
    fn receive(&self, wait: bool) -> Result<Option<Reply>, HintError> {
        let flags = if wait {
            RecvFlags::empty()
        } else {
            RecvFlags::DONTWAIT
        };
        let mut buf = [0u8; MAX_MESSAGE];
        let received = {
            let fd = self.fd.borrow();
            let Some(fd) = fd.as_ref() else {
                return Err(Errno::NOTCONN.into());
            };
            loop {
                // A signal while waiting: the reply is still to come.
                match recv(fd, &mut buf[..], flags) {
                    Err(Errno::INTR) => continue,
                    r => break r,
                }
            }
        };
        let n = match received {
            Ok((n, _)) => n,
            Err(Errno::AGAIN) if wait => return Err(timed_out()),
            Err(Errno::AGAIN) => return Ok(None),
            Err(e) if is_gone(e) => {
                self.lost();
                return Err(e.into());
            }
            Err(e) => return Err(e.into()),
        };
        if n == 0 {
            self.lost();
            // The daemon closed it: ECONNRESET, as a reset would say.
            return Err(Errno::CONNRESET.into());
        }
        match Reply::decode(&buf[..n]) {
            Some(reply) => Ok(Some(reply)),
            None => {
                self.lost();
                Err(HintError::BadReply)
            }
        }
    }

    /// After `reply`: a refusal the daemon closes the connection after
    /// drops it.
    fn closed_after(&self, reply: Reply) {
        if matches!(reply, Reply::Refused(r) if r.closes_connection()) {
            self.lost();
        }
    }

    /// The daemon closed the connection (its hint is over with it) or it
    /// failed: the replies owed on it are not coming, and the next request
    /// connects again.
    fn lost(&self) {
        *self.fd.borrow_mut() = None;
        // Hints of `notify` whose answer did not come do not hold.
        let unanswered = self.unread.replace(0);
        self.refused.set(self.refused.get() + u64::from(unanswered));
        self.stale.set(false);
    }
}

/// A hint given by [`HintClient::begin`]. The guard does not end the hint
/// when dropped: the hint is for work about to be launched, and ending it
/// at the launch would resume the lower levels before the work's busy
/// edge, letting them onto the node again under the work's first
/// dispatch. Dropped (or [`Hint::leave`]), the hint runs its course: the
/// work's busy edge spends it, or its time ends it. [`Hint::end`] ends it
/// at once, for work that is not coming after all (a request cancelled).
#[derive(Debug)]
pub struct Hint<'a> {
    client: &'a HintClient,
    nodes: u32,
}

impl Hint<'_> {
    /// The nodes the hint holds on.
    pub fn nodes(&self) -> u32 {
        self.nodes
    }

    /// Ends the hint now: the work it announced is not coming, and the
    /// lower levels come back at once (once no other hint holds).
    pub fn end(self) -> Result<(), HintError> {
        self.client.end()
    }

    /// Lets the hint run its course without this guard: the work that
    /// comes spends it, or its time ends it. The same as dropping the
    /// guard, said explicitly. (A later `begin` on the same client
    /// replaces it.)
    pub fn leave(self) {}
}

#[cfg(test)]
mod tests {
    use std::os::fd::AsFd;

    use rustix::net::{accept, bind, listen};

    use super::*;

    /// A daemon's listening socket, in a directory of its own.
    struct Server {
        path: PathBuf,
        listener: OwnedFd,
    }

    impl Server {
        fn new(name: &str) -> Self {
            let dir = std::env::temp_dir()
                .join(format!("kfd-preempt-hint-{}-{name}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).unwrap();
            let path = dir.join("hint.sock");
            let listener = socket_with(
                AddressFamily::UNIX,
                SocketType::SEQPACKET,
                SocketFlags::CLOEXEC,
                None,
            )
            .unwrap();
            bind(&listener, &SocketAddrUnix::new(&path).unwrap()).unwrap();
            listen(&listener, 4).unwrap();
            Server { path, listener }
        }

        fn accept(&self) -> OwnedFd {
            accept(&self.listener).unwrap()
        }
    }

    impl Drop for Server {
        fn drop(&mut self) {
            if let Some(dir) = self.path.parent() {
                let _ = std::fs::remove_dir_all(dir);
            }
        }
    }

    fn say(fd: &OwnedFd, msg: &str) {
        send(fd, msg.as_bytes(), SendFlags::empty()).unwrap();
    }

    /// The requests a server's connection has received so far.
    fn heard(fd: &OwnedFd) -> Vec<String> {
        let mut out = Vec::new();
        let mut buf = [0u8; MAX_MESSAGE];
        while let Ok((n, _)) = recv(fd.as_fd(), &mut buf[..], RecvFlags::DONTWAIT) {
            if n == 0 {
                break;
            }
            out.push(String::from_utf8_lossy(&buf[..n]).into_owned());
        }
        out
    }

    #[test]
    fn notify_after_a_refusal_that_closed_the_connection_connects_again() {
        let server = Server::new("notify-closed");
        let client = HintClient::connect(&server.path).unwrap();
        let conn = server.accept();
        let within = Duration::from_millis(20);
        client.notify(within, &[]).unwrap();
        client.notify(within, &[]).unwrap();
        // The daemon refuses the first and closes with requests unread:
        // the kernel resets the connection (ECONNRESET before the reply).
        say(&conn, "refused not-a-tenant");
        drop(conn);
        // The next notify is not an error: both count as refused, and it
        // goes on a new connection.
        client.notify(within, &[]).unwrap();
        let again = server.accept();
        assert_eq!(heard(&again), vec!["begin 20"]);
        assert_eq!(client.refused(), 2);
    }

    #[test]
    fn dropping_the_guard_leaves_the_hint_and_end_ends_it() {
        let server = Server::new("drop");
        let client = HintClient::connect(&server.path).unwrap();
        let conn = server.accept();
        // The answers are queued before the requests: the client reads
        // each after sending its request.
        for reply in ["ok 1", "ok 1", "ok 0"] {
            say(&conn, reply);
        }
        let within = Duration::from_millis(20);
        {
            let hint = client.begin(within, &[]).unwrap();
            assert_eq!(hint.nodes(), 1);
            // The kernels are launched: the guard goes, the hint stays.
        }
        assert_eq!(heard(&conn), vec!["begin 20"]);
        client.begin(within, &[]).unwrap().end().unwrap();
        assert_eq!(heard(&conn), vec!["begin 20", "end"]);
    }

    #[test]
    fn a_reply_that_came_too_late_is_not_taken_for_the_next_ones() {
        let server = Server::new("late");
        let client = HintClient::connect(&server.path).unwrap();
        let conn = server.accept();
        let within = Duration::from_millis(20);
        let e = client.begin(within, &[]).unwrap_err();
        assert!(
            matches!(&e, HintError::Io(io) if io.kind() == io::ErrorKind::TimedOut),
            "{e:?}"
        );
        assert_eq!(e.errno(), Errno::TIMEDOUT, "C and Python see ETIMEDOUT");
        // The late answer, then the next request's.
        say(&conn, "ok 1");
        say(&conn, "refused rate-limited");
        let e = client.begin(within, &[]).unwrap_err();
        assert!(
            matches!(e, HintError::Refused(Refusal::RateLimited)),
            "{e:?}"
        );
        assert_eq!(heard(&conn), vec!["begin 20", "begin 20"]);
        // Neither was a `notify`'s.
        assert_eq!(client.refused(), 0);
    }

    #[test]
    fn after_a_refusal_that_closes_the_connection_the_next_request_connects_again() {
        let server = Server::new("again");
        let client = HintClient::connect(&server.path).unwrap();
        let within = Duration::from_millis(20);
        let first = server.accept();
        say(&first, "refused not-a-tenant");
        let e = client.begin(within, &[]).unwrap_err();
        assert!(
            matches!(e, HintError::Refused(Refusal::NotATenant)),
            "{e:?}"
        );
        drop(first);
        // Nothing to end: the closed connection ended its hint.
        client.end().unwrap();
        std::thread::scope(|s| {
            let daemon = s.spawn(|| {
                let second = server.accept();
                let mut buf = [0u8; MAX_MESSAGE];
                let (n, _) = recv(&second, &mut buf[..], RecvFlags::empty()).unwrap();
                say(&second, "ok 2");
                String::from_utf8_lossy(&buf[..n]).into_owned()
            });
            assert_eq!(client.begin(within, &[]).unwrap().nodes(), 2);
            assert_eq!(daemon.join().unwrap(), "begin 20");
        });
    }

    #[test]
    fn notified_hints_lost_with_the_connection_count_as_refused() {
        let server = Server::new("notify");
        let client = HintClient::connect(&server.path).unwrap();
        let conn = server.accept();
        let within = Duration::from_millis(20);
        client.notify(within, &[]).unwrap();
        client.notify(within, &[]).unwrap();
        say(&conn, "refused malformed");
        drop(conn);
        assert_eq!(client.refused(), 2);
    }

    #[test]
    fn requests_read_back_and_junk_is_refused() {
        let all = Request::Begin {
            within: Duration::from_millis(20),
            nodes: vec![],
        };
        assert_eq!(all.encode(), "begin 20");
        assert_eq!(Request::decode(b"begin 20"), Some(all));
        assert_eq!(
            Request::decode(b"begin 3 20736 0x5101"),
            Some(Request::Begin {
                within: Duration::from_millis(3),
                nodes: vec![0x5100, 0x5101],
            })
        );
        assert_eq!(Request::decode(b"end"), Some(Request::End));
        for junk in [
            &b""[..],
            b"begin",
            b"begin -1",
            b"begin 5 0xzz",
            b"begin 5 99999999999",
            b"end now",
            b"BEGIN 5",
            b"\xff",
        ] {
            assert_eq!(Request::decode(junk), None, "{junk:?}");
        }
        let many: String = (0..=MAX_HINT_NODES).map(|i| format!(" {i}")).collect();
        assert_eq!(Request::decode(format!("begin 5{many}").as_bytes()), None);
    }

    #[test]
    fn every_refusal_reads_back_with_its_errno() {
        for r in Refusal::ALL {
            assert_eq!(
                Reply::decode(Reply::Refused(r).encode().as_bytes()),
                Some(Reply::Refused(r))
            );
            assert_ne!(r.errno(), Errno::IO);
        }
        assert_eq!(Reply::decode(b"ok 3"), Some(Reply::Ok(3)));
        assert_eq!(Reply::decode(b"refused sleepy"), None);
        assert_eq!(
            HintError::Refused(Refusal::RateLimited).errno(),
            Errno::AGAIN
        );
    }
}
