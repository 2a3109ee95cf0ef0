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
//! `refused REASON` ([`Refusal`]).
//!
//! ```no_run
//! use std::time::Duration;
//! use kfd_preempt::hint::HintClient;
//!
//! let client = HintClient::connect("/run/kfd-preemptd/hint.sock")?;
//! // A request arrived: parse and copy its inputs while the node clears.
//! let hint = client.begin(Duration::from_millis(20), &[])?;
//! // ... launch the request's kernels ...
//! drop(hint); // or hint.end()?: the daemon goes back to watching
//! # Ok::<(), kfd_preempt::hint::HintError>(())
//! ```

use std::{cell::Cell, fmt, io, os::fd::OwnedFd, path::Path, time::Duration};

use rustix::{
    io::Errno,
    net::{
        connect, recv, send, socket_with, AddressFamily, RecvFlags, SendFlags, SocketAddrUnix,
        SocketFlags, SocketType,
    },
};

/// The longest message either side sends, in bytes.
pub const MAX_MESSAGE: usize = 128;

/// The most nodes one hint may name.
pub const MAX_HINT_NODES: usize = 16;

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
#[derive(Debug)]
pub struct HintClient {
    fd: OwnedFd,
    /// Replies to [`HintClient::notify`] not read yet.
    unread: Cell<u32>,
    /// Hints given by `notify` that the daemon refused, as far as read.
    refused: Cell<u64>,
}

impl HintClient {
    /// Connects to the daemon's `hint_socket`.
    pub fn connect(path: impl AsRef<Path>) -> Result<Self, HintError> {
        let fd = socket_with(
            AddressFamily::UNIX,
            SocketType::SEQPACKET,
            SocketFlags::CLOEXEC,
            None,
        )?;
        connect(&fd, &SocketAddrUnix::new(path.as_ref())?)?;
        Ok(HintClient {
            fd,
            unread: Cell::new(0),
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
        send(
            &self.fd,
            request.encode().as_bytes(),
            SendFlags::NOSIGNAL | SendFlags::DONTWAIT,
        )?;
        self.unread.set(self.unread.get() + 1);
        Ok(())
    }

    /// Hints given by [`HintClient::notify`] that the daemon refused, of
    /// the answers read so far.
    pub fn refused(&self) -> u64 {
        // Answers that came meanwhile; an error shows at the next call.
        let _ = self.read_answers(false);
        self.refused.get()
    }

    /// Reads the answers to `notify` that have come (all of them, waiting
    /// for each, if `wait`).
    fn read_answers(&self, wait: bool) -> Result<(), HintError> {
        let flags = if wait {
            RecvFlags::empty()
        } else {
            RecvFlags::DONTWAIT
        };
        while self.unread.get() > 0 {
            let mut buf = [0u8; MAX_MESSAGE];
            let n = match recv(&self.fd, &mut buf[..], flags) {
                Ok((n, _)) => n,
                Err(Errno::AGAIN) => return Ok(()),
                Err(e) => return Err(e.into()),
            };
            self.unread.set(self.unread.get() - 1);
            match Reply::decode(&buf[..n]) {
                Some(Reply::Ok(_)) => {}
                Some(Reply::Refused(_)) => self.refused.set(self.refused.get() + 1),
                None if n == 0 => return Err(HintError::Io(io::ErrorKind::UnexpectedEof.into())),
                None => return Err(HintError::BadReply),
            }
        }
        Ok(())
    }

    /// Says that work is coming within `within` on `nodes` (gpu_ids; empty:
    /// every node where this process has queues). The hint is over when
    /// the work comes and goes as usual, when `within` passes with no
    /// work, or when the returned guard is dropped or ended.
    pub fn begin(&self, within: Duration, nodes: &[u32]) -> Result<Hint<'_>, HintError> {
        let n = self.ask(&Request::Begin {
            within,
            nodes: nodes.to_vec(),
        })?;
        Ok(Hint {
            client: self,
            nodes: n,
            ended: false,
        })
    }

    /// Ends this connection's hint, if one holds.
    pub fn end(&self) -> Result<(), HintError> {
        self.ask(&Request::End).map(drop)
    }

    fn ask(&self, request: &Request) -> Result<u32, HintError> {
        // The answers to `notify` come first.
        self.read_answers(true)?;
        send(&self.fd, request.encode().as_bytes(), SendFlags::NOSIGNAL)?;
        let mut buf = [0u8; MAX_MESSAGE];
        let (n, _) = recv(&self.fd, &mut buf[..], RecvFlags::empty())?;
        match Reply::decode(&buf[..n]) {
            Some(Reply::Ok(nodes)) => Ok(nodes),
            Some(Reply::Refused(r)) => Err(HintError::Refused(r)),
            None if n == 0 => Err(HintError::Io(io::ErrorKind::UnexpectedEof.into())),
            None => Err(HintError::BadReply),
        }
    }
}

/// A hint in force: dropping it ends it ([`Hint::end`] says whether that
/// worked).
#[derive(Debug)]
pub struct Hint<'a> {
    client: &'a HintClient,
    nodes: u32,
    ended: bool,
}

impl Hint<'_> {
    /// The nodes the hint holds on.
    pub fn nodes(&self) -> u32 {
        self.nodes
    }

    /// Ends the hint now.
    pub fn end(mut self) -> Result<(), HintError> {
        self.ended = true;
        self.client.end()
    }

    /// Lets the hint run its course without this guard: the work that
    /// comes spends it, or its time ends it. (A later `begin` on the same
    /// client replaces it.)
    pub fn leave(mut self) {
        self.ended = true;
    }
}

impl Drop for Hint<'_> {
    fn drop(&mut self) {
        if !self.ended {
            // Nothing to tell a caller that dropped it: if the daemon is
            // gone, so is the hint.
            let _ = self.client.end();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
