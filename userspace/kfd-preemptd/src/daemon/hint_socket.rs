//! The hint socket (`[daemon] hint_socket`): where tenants say that work is
//! coming ([`kfd_preempt::hint`] has the protocol). This file holds the
//! socket, its connections and each tenant's rate; what a hint does is
//! [`super::hints`].
//!
//! Every operation is non-blocking: the socket is served from the
//! daemon's SCHED_FIFO loop, which must never wait for a client. A client
//! that does not read its replies loses them (a reply that does not fit
//! the socket's buffer is dropped, and the connection with it).

use std::{
    collections::HashMap,
    fs, io,
    os::{
        fd::{AsFd, BorrowedFd, OwnedFd},
        unix::fs::{FileTypeExt, PermissionsExt},
    },
    path::{Path, PathBuf},
    time::Duration,
};

use kfd_preempt::hint::{Reply, Request, MAX_MESSAGE};
use rustix::{
    io::Errno,
    net::{
        accept_with, bind, listen, recv, send, socket_with, sockopt::socket_peercred,
        AddressFamily, RecvFlags, SendFlags, SocketAddrUnix, SocketFlags, SocketType,
    },
};

use super::decision::DecisionKey;

/// The most connections open at once: one per serving process is the use,
/// and a process that opens more only waits for them.
pub const MAX_CONNECTIONS: usize = 64;

/// The most connections taken per wakeup: a flood of connections costs the
/// loop this much before it goes back to reacting.
const ACCEPTS_PER_WAKE: usize = 8;

/// One client connection.
pub(super) struct Connection {
    /// Which connection this is, for the daemon to answer it.
    pub id: u64,
    fd: OwnedFd,
    /// The process that connected (`SO_PEERCRED`).
    pub pid: i32,
    /// The decisions its hint holds on, until it ends.
    pub hinted: Vec<DecisionKey>,
}

/// What one connection sent.
pub(super) enum Incoming {
    /// A request.
    Request(Request),
    /// Something that is not a request.
    Malformed,
    /// The client closed the connection (or it failed).
    Closed,
}

/// A tenant's allowance of hints: up to `rate` at once, refilled at `rate`
/// a second.
struct Allowance {
    tokens: f64,
    at: Duration,
}

/// The listening socket and its connections.
pub(super) struct HintSocket {
    listener: OwnedFd,
    path: PathBuf,
    connections: Vec<Connection>,
    next_id: u64,
    allowances: HashMap<i32, Allowance>,
}

impl HintSocket {
    /// Listens on `path`, which any local process may connect to: the
    /// daemon trusts a hint by who sent it, not by who could connect. Its
    /// directory is made if missing; a socket left by an earlier daemon is
    /// replaced; any other file there is an error.
    pub fn bind(path: &Path) -> io::Result<Self> {
        if let Some(dir) = path.parent() {
            fs::create_dir_all(dir)?;
        }
        match fs::symlink_metadata(path) {
            Ok(m) if m.file_type().is_socket() => fs::remove_file(path)?,
            Ok(_) => {
                return Err(io::Error::new(
                    io::ErrorKind::AlreadyExists,
                    "a file that is not a socket is in the way",
                ))
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        let listener = socket_with(
            AddressFamily::UNIX,
            SocketType::SEQPACKET,
            SocketFlags::NONBLOCK | SocketFlags::CLOEXEC,
            None,
        )?;
        bind(&listener, &SocketAddrUnix::new(path)?)?;
        fs::set_permissions(path, fs::Permissions::from_mode(0o666))?;
        listen(&listener, MAX_CONNECTIONS as i32)?;
        Ok(HintSocket {
            listener,
            path: path.to_owned(),
            connections: Vec::new(),
            next_id: 0,
            allowances: HashMap::new(),
        })
    }

    /// The descriptors to poll for input: the listener's and each
    /// connection's.
    pub fn poll_fds(&self) -> impl Iterator<Item = BorrowedFd<'_>> {
        std::iter::once(self.listener.as_fd()).chain(self.connections.iter().map(|c| c.fd.as_fd()))
    }

    /// Connections open now.
    pub fn connections(&self) -> usize {
        self.connections.len()
    }

    /// Takes the connections waiting (a few per call), each known by the
    /// pid that made it. Beyond [`MAX_CONNECTIONS`] a connection is closed
    /// at once.
    pub fn accept(&mut self) {
        for _ in 0..ACCEPTS_PER_WAKE {
            let fd = match accept_with(&self.listener, SocketFlags::NONBLOCK | SocketFlags::CLOEXEC)
            {
                Ok(fd) => fd,
                // Nothing waiting, or an error of that one connection.
                Err(_) => return,
            };
            if self.connections.len() >= MAX_CONNECTIONS {
                continue;
            }
            let Ok(cred) = socket_peercred(&fd) else {
                continue;
            };
            self.next_id += 1;
            self.connections.push(Connection {
                id: self.next_id,
                fd,
                pid: cred.pid.as_raw_nonzero().get(),
                hinted: Vec::new(),
            });
        }
    }

    /// Reads what every connection sent (at most one request each), with
    /// its connection's id.
    pub fn receive(&mut self) -> Vec<(u64, Incoming)> {
        let mut out = Vec::new();
        let mut buf = [0u8; MAX_MESSAGE];
        for c in &self.connections {
            // TRUNC: the length of the whole packet, so that a longer one
            // is refused rather than read in part.
            match recv(&c.fd, &mut buf[..], RecvFlags::DONTWAIT | RecvFlags::TRUNC) {
                Ok((_, 0)) => out.push((c.id, Incoming::Closed)),
                Ok((n, whole)) if whole > n => out.push((c.id, Incoming::Malformed)),
                Ok((n, _)) => out.push((
                    c.id,
                    Request::decode(&buf[..n]).map_or(Incoming::Malformed, Incoming::Request),
                )),
                Err(Errno::AGAIN | Errno::INTR) => {}
                Err(_) => out.push((c.id, Incoming::Closed)),
            }
        }
        out
    }

    /// The connection `id`.
    pub fn connection(&mut self, id: u64) -> Option<&mut Connection> {
        self.connections.iter_mut().find(|c| c.id == id)
    }

    /// Answers connection `id`; a client that cannot take the reply now is
    /// closed.
    pub fn reply(&mut self, id: u64, reply: Reply) {
        let Some(c) = self.connections.iter().find(|c| c.id == id) else {
            return;
        };
        let sent = send(
            &c.fd,
            reply.encode().as_bytes(),
            SendFlags::DONTWAIT | SendFlags::NOSIGNAL,
        );
        if sent.is_err() {
            self.close(id);
        }
    }

    /// Closes connection `id`, returning it (its hint is the caller's to
    /// end).
    pub fn close(&mut self, id: u64) -> Option<Connection> {
        let i = self.connections.iter().position(|c| c.id == id)?;
        Some(self.connections.swap_remove(i))
    }

    /// Takes one hint from `pid`'s allowance at `now`, `rate` a second;
    /// false if it has none left.
    pub fn take_allowance(&mut self, pid: i32, now: Duration, rate: u32) -> bool {
        let rate = f64::from(rate);
        let a = self.allowances.entry(pid).or_insert(Allowance {
            tokens: rate,
            at: now,
        });
        a.tokens = (a.tokens + now.saturating_sub(a.at).as_secs_f64() * rate).min(rate);
        a.at = now;
        if a.tokens >= 1.0 {
            a.tokens -= 1.0;
            true
        } else {
            false
        }
    }

    /// Takes the newest connection for one made by `pid`: the tests'
    /// tenants are pids of a fake `/proc`, their peer the test itself.
    #[cfg(test)]
    pub fn pretend_newest_is(&mut self, pid: i32) {
        if let Some(c) = self.connections.iter_mut().max_by_key(|c| c.id) {
            c.pid = pid;
        }
    }

    /// Forgets the allowances of processes that are no longer tenants.
    pub fn forget_allowances(&mut self, tenant: impl Fn(i32) -> bool) {
        self.allowances.retain(|pid, _| tenant(*pid));
    }
}

impl Drop for HintSocket {
    fn drop(&mut self) {
        let _ = fs::remove_file(&self.path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_allowance_is_a_seconds_worth_refilled_at_the_rate() {
        let dir = crate::testutil::TempDir::new("hint-allowance");
        let mut s = HintSocket::bind(&dir.path().join("h.sock")).unwrap();
        let ms = Duration::from_millis;
        let taken = (0..12).filter(|_| s.take_allowance(7, ms(0), 10)).count();
        assert_eq!(taken, 10);
        assert!(!s.take_allowance(7, ms(50), 10));
        assert!(s.take_allowance(7, ms(100), 10));
        assert!(!s.take_allowance(7, ms(100), 10));
        // Another tenant has its own.
        assert!(s.take_allowance(8, ms(100), 10));
        s.forget_allowances(|pid| pid == 8);
        assert!(s.take_allowance(7, ms(100), 10));
    }

    #[test]
    fn a_file_in_the_way_is_not_replaced_but_an_old_socket_is() {
        let dir = crate::testutil::TempDir::new("hint-bind");
        let path = dir.path().join("h.sock");
        fs::write(&path, b"not a socket").unwrap();
        assert!(HintSocket::bind(&path).is_err());
        assert_eq!(fs::read(&path).unwrap(), b"not a socket");
        fs::remove_file(&path).unwrap();
        let first = HintSocket::bind(&path).unwrap();
        std::mem::forget(first);
        let second = HintSocket::bind(&path).unwrap();
        let mode = fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o666);
        drop(second);
        assert!(!path.exists());
    }
}
