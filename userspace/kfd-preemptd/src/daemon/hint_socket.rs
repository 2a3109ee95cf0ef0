//! The hint socket (`[daemon] hint_socket`): where tenants say that work is
//! coming ([`kfd_preempt::hint`] has the protocol). This file holds the
//! socket, its connections and each tenant's rate; what a hint does is
//! [`super::hints`].
//!
//! Every operation is non-blocking: the socket is served from the
//! daemon's SCHED_FIFO loop, which must never wait for a client. A client
//! that does not read its replies loses them (a reply that does not fit
//! the socket's buffer is dropped, and the connection with it). Closing a
//! connection is the daemon's ([`super::hints`]): it ends the connection's
//! hint first.

use std::{
    collections::HashMap,
    fs, io,
    os::{
        fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd},
        unix::fs::{FileTypeExt, PermissionsExt},
    },
    path::{Path, PathBuf},
    time::Duration,
};

use kfd_preempt::hint::{Reply, Request, MAX_MESSAGE};
use rustix::{
    io::Errno,
    net::{
        accept_with, bind, connect, listen, recv, send, socket_with, AddressFamily, RecvFlags,
        SendFlags, SocketAddrUnix, SocketFlags, SocketType,
    },
};

use super::decision::DecisionKey;

/// The most connections open at once: one per serving process is the use,
/// and a process that opens more only waits for them.
pub const MAX_CONNECTIONS: usize = 64;

/// The most connections taken per wakeup: a flood of connections costs the
/// loop this much before it goes back to reacting.
const ACCEPTS_PER_WAKE: usize = 8;

/// How long the daemon stops taking connections when it has no descriptor
/// for one (`EMFILE`, `ENFILE`): the connection stays in the backlog, the
/// listener readable, and taking it again at once would spin the loop.
const ACCEPT_PAUSE: Duration = Duration::from_millis(100);

/// One client connection.
pub(super) struct Connection {
    /// Which connection this is, for the daemon to answer it.
    pub id: u64,
    fd: OwnedFd,
    /// The process that connected (`SO_PEERCRED`); 0 if it is not in the
    /// daemon's pid namespace, which no tenant's pid is.
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
    /// No connection is taken before this (`ACCEPT_PAUSE`).
    paused_until: Option<Duration>,
}

impl HintSocket {
    /// Listens on `path`, which any local process may connect to: the
    /// daemon trusts a hint by who sent it, not by who could connect. Its
    /// directory is made if missing; a socket left by an earlier daemon is
    /// replaced, but one a daemon still listens on is an error (a second
    /// daemon would take its socket from it); any other file there is an
    /// error.
    pub fn bind(path: &Path) -> io::Result<Self> {
        if let Some(dir) = path.parent() {
            fs::create_dir_all(dir)?;
        }
        match fs::symlink_metadata(path) {
            Ok(m) if m.file_type().is_socket() => {
                if is_listened_on(path)? {
                    return Err(io::Error::new(
                        io::ErrorKind::AddrInUse,
                        "another process (a kfd-preemptd already running?) listens on it",
                    ));
                }
                fs::remove_file(path)?
            }
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
            paused_until: None,
        })
    }

    /// The descriptors to poll for input at `now`: the listener's first,
    /// unless taking connections is paused ([`HintSocket::accepting`]),
    /// then each connection's.
    pub fn poll_fds(&self, now: Duration) -> impl Iterator<Item = BorrowedFd<'_>> {
        let listener = self.accepting(now).then(|| self.listener.as_fd());
        listener
            .into_iter()
            .chain(self.connections.iter().map(|c| c.fd.as_fd()))
    }

    /// When the loop is to wake up to take connections again, if paused
    /// at `now`.
    pub fn wake_at(&self, now: Duration) -> Option<Duration> {
        self.paused_until.filter(|t| *t > now)
    }

    /// Whether connections are taken at `now` (not paused): then
    /// [`HintSocket::poll_fds`] begins with the listener.
    pub fn accepting(&self, now: Duration) -> bool {
        self.paused_until.is_none_or(|t| now >= t)
    }

    /// Connections open now.
    pub fn connections(&self) -> usize {
        self.connections.len()
    }

    /// Takes the connections waiting at `now` (a few per call), each known
    /// by the pid that made it. Beyond [`MAX_CONNECTIONS`] a connection is
    /// closed at once.
    pub fn accept(&mut self, now: Duration) {
        if !self.accepting(now) {
            return;
        }
        self.paused_until = None;
        for _ in 0..ACCEPTS_PER_WAKE {
            let fd = match accept_with(&self.listener, SocketFlags::NONBLOCK | SocketFlags::CLOEXEC)
            {
                Ok(fd) => fd,
                Err(e) => {
                    self.accept_failed(e, now);
                    return;
                }
            };
            if self.connections.len() >= MAX_CONNECTIONS {
                continue;
            }
            let Ok(pid) = peer_pid(fd.as_fd()) else {
                continue;
            };
            self.next_id += 1;
            self.connections.push(Connection {
                id: self.next_id,
                fd,
                pid,
                hinted: Vec::new(),
            });
        }
    }

    /// After `accept` failed with `e` at `now`: nothing waiting, or an
    /// error of that one connection, end this round; a want of descriptors
    /// or memory leaves the connection waiting, so the listener is left
    /// out of the poll for [`ACCEPT_PAUSE`].
    fn accept_failed(&mut self, e: Errno, now: Duration) {
        if matches!(
            e,
            Errno::MFILE | Errno::NFILE | Errno::NOBUFS | Errno::NOMEM
        ) {
            self.paused_until = Some(now + ACCEPT_PAUSE);
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

    /// Answers connection `id`; false if the client cannot take the reply
    /// now (or is gone): the daemon closes such a connection.
    #[must_use]
    pub fn reply(&mut self, id: u64, reply: Reply) -> bool {
        let Some(c) = self.connections.iter().find(|c| c.id == id) else {
            return false;
        };
        send(
            &c.fd,
            reply.encode().as_bytes(),
            SendFlags::DONTWAIT | SendFlags::NOSIGNAL,
        )
        .is_ok()
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

/// Whether a process listens on the socket `path`: a connection to it is
/// taken (or waits in a full backlog); one left by a daemon that is gone
/// is refused.
fn is_listened_on(path: &Path) -> io::Result<bool> {
    let probe = socket_with(
        AddressFamily::UNIX,
        SocketType::SEQPACKET,
        SocketFlags::NONBLOCK | SocketFlags::CLOEXEC,
        None,
    )?;
    match connect(&probe, &SocketAddrUnix::new(path)?) {
        Ok(()) | Err(Errno::AGAIN | Errno::INPROGRESS) => Ok(true),
        Err(Errno::CONNREFUSED | Errno::NOENT) => Ok(false),
        Err(e) => Err(e.into()),
    }
}

/// The pid of the process at the other end of `fd` (`SO_PEERCRED`), 0 if
/// it is in a pid namespace the daemon cannot see into. Not rustix's
/// `socket_peercred`: it reads the pid into a `Pid`, which cannot be 0.
fn peer_pid(fd: BorrowedFd<'_>) -> io::Result<i32> {
    let mut cred = libc::ucred {
        pid: 0,
        uid: 0,
        gid: 0,
    };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: `fd` is an open socket for the call; `cred` and `len` are
    // valid for writing, and `len` is the size of `cred`, the `ucred` that
    // SO_PEERCRED writes (no more than `len` bytes).
    let r = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut cred as *mut libc::ucred).cast(),
            &mut len,
        )
    };
    if r == 0 {
        Ok(cred.pid)
    } else {
        Err(io::Error::last_os_error())
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

    fn client() -> io::Result<OwnedFd> {
        Ok(socket_with(
            AddressFamily::UNIX,
            SocketType::SEQPACKET,
            SocketFlags::CLOEXEC,
            None,
        )?)
    }

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
        // A socket whose listener is gone: what a daemon killed leaves.
        let old = client().unwrap();
        bind(&old, &SocketAddrUnix::new(&path).unwrap()).unwrap();
        drop(old);
        assert!(path.exists());
        let second = HintSocket::bind(&path).unwrap();
        let mode = fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o666);
        drop(second);
        assert!(!path.exists());
    }

    #[test]
    fn a_socket_a_daemon_listens_on_is_not_taken_from_it() {
        let dir = crate::testutil::TempDir::new("hint-live");
        let path = dir.path().join("h.sock");
        let mut first = HintSocket::bind(&path).unwrap();
        let e = HintSocket::bind(&path).err().unwrap();
        assert_eq!(e.kind(), io::ErrorKind::AddrInUse, "{e}");
        // The first still has its socket, and takes connections on it
        // (the probe's own connection among them).
        let c = client().unwrap();
        connect(&c, &SocketAddrUnix::new(&path).unwrap()).unwrap();
        first.accept(Duration::ZERO);
        assert_eq!(first.connections(), 2);
        // Its peers are known by their pid: this process's.
        let me = std::process::id() as i32;
        assert!(first.connections.iter().all(|c| c.pid == me));
    }

    #[test]
    fn without_descriptors_the_listener_rests_instead_of_spinning() {
        let dir = crate::testutil::TempDir::new("hint-emfile");
        let path = dir.path().join("h.sock");
        let mut s = HintSocket::bind(&path).unwrap();
        let c = client().unwrap();
        connect(&c, &SocketAddrUnix::new(&path).unwrap()).unwrap();
        let ms = Duration::from_millis;
        assert_eq!(s.poll_fds(ms(0)).count(), 1);
        // What `accept` does when it gets EMFILE for the waiting connection.
        s.accept_failed(Errno::MFILE, ms(0));
        assert_eq!(s.poll_fds(ms(1)).count(), 0);
        assert_eq!(s.wake_at(ms(1)), Some(ACCEPT_PAUSE));
        // A loop that wakes at the pause's end is not woken again by it.
        assert_eq!(s.wake_at(ACCEPT_PAUSE), None);
        s.accept(ms(1));
        assert_eq!(s.connections(), 0);
        // Past the pause it is polled and taken again.
        assert_eq!(s.poll_fds(ACCEPT_PAUSE).count(), 1);
        s.accept(ACCEPT_PAUSE);
        assert_eq!((s.connections(), s.paused_until), (1, None));
        // Nothing waiting is no pause.
        s.accept_failed(Errno::AGAIN, ACCEPT_PAUSE);
        assert_eq!(s.paused_until, None);
    }
}
