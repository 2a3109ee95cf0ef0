//! Hints on the daemon's socket: who may give one, what it preempts, and
//! how it ends.

use std::os::fd::OwnedFd;

use rustix::net::{
    connect, recv, send, socket_with, AddressFamily, RecvFlags, SendFlags, SocketAddrUnix,
    SocketFlags, SocketType,
};

use super::*;

/// A client connected as `pid`.
fn peer(d: &mut Daemon<'_, Fake>, path: &std::path::Path, pid: i32) -> OwnedFd {
    let fd = socket_with(
        AddressFamily::UNIX,
        SocketType::SEQPACKET,
        SocketFlags::CLOEXEC,
        None,
    )
    .unwrap();
    connect(&fd, &SocketAddrUnix::new(path).unwrap()).unwrap();
    let s = d.hint_socket.as_mut().unwrap();
    s.accept();
    s.pretend_newest_is(pid);
    fd
}

/// Sends `msg`, lets the daemon serve it, and returns its reply.
fn ask(d: &mut Daemon<'_, Fake>, fd: &OwnedFd, msg: &str) -> String {
    send(fd, msg.as_bytes(), SendFlags::empty()).unwrap();
    d.serve_hints();
    let mut buf = [0u8; 128];
    let (n, _) = recv(fd, &mut buf[..], RecvFlags::DONTWAIT).unwrap();
    String::from_utf8_lossy(&buf[..n]).into_owned()
}

fn socket_path(p: &FakeProc) -> std::path::PathBuf {
    p.root.join("hint.sock")
}

#[test]
fn an_lc_hint_takes_be_off_before_any_work_and_its_end_resumes_it() {
    let (p, fake, cfg) = two_nodes_with("hint-lc", "");
    let mut d = daemon(&p, &fake, &cfg);
    d.listen_for_hints(&socket_path(&p)).unwrap();
    d.scan();
    fake.calls();
    let c = peer(&mut d, &socket_path(&p), LC);
    assert_eq!(ask(&mut d, &c, "begin 50"), "ok 1");
    // Node A's BE queues only: LC has no queue on node B.
    assert_eq!(fake.main_calls(), vec![Call::Preempt(be_refs(), LEASE)]);
    assert!(held(&d, LC_A));
    assert_eq!(ask(&mut d, &c, "end"), "ok 0");
    assert_eq!(fake.main_calls(), vec![Call::Resume(be_refs())]);
    let s = d.stats(monotonic());
    assert!(s.hints.enabled);
    assert_eq!(
        (s.hints.accepted, s.hints.ended, s.hints.connections),
        (1, 1, 1)
    );
}

#[test]
fn a_hint_with_no_work_is_over_at_its_time() {
    let (p, fake, cfg) = two_nodes_with("hint-expire", "");
    let mut d = daemon(&p, &fake, &cfg);
    d.listen_for_hints(&socket_path(&p)).unwrap();
    d.scan();
    let c = peer(&mut d, &socket_path(&p), LC);
    assert_eq!(ask(&mut d, &c, "begin 1"), "ok 1");
    assert!(held(&d, LC_A));
    fake.calls();
    std::thread::sleep(Duration::from_millis(2));
    d.tick_due(monotonic());
    assert_eq!(fake.main_calls(), vec![Call::Resume(be_refs())]);
    assert_eq!(d.stats(monotonic()).counters.hints_expired, 1);
}

#[test]
fn closing_the_connection_ends_its_hint() {
    let (p, fake, cfg) = two_nodes_with("hint-close", "");
    let mut d = daemon(&p, &fake, &cfg);
    d.listen_for_hints(&socket_path(&p)).unwrap();
    d.scan();
    let c = peer(&mut d, &socket_path(&p), LC);
    assert_eq!(ask(&mut d, &c, "begin 500"), "ok 1");
    fake.calls();
    drop(c);
    d.serve_hints();
    assert_eq!(fake.main_calls(), vec![Call::Resume(be_refs())]);
    assert!(!held(&d, LC_A));
    assert_eq!(d.stats(monotonic()).hints.connections, 0);
}

#[test]
fn hints_that_would_preempt_what_they_may_not_are_refused_and_change_nothing() {
    let (p, fake, cfg) = two_nodes_with("hint-refused", "hint_max_ms = 100");
    let mut d = daemon(&p, &fake, &cfg);
    d.listen_for_hints(&socket_path(&p)).unwrap();
    d.scan();
    fake.calls();
    // Not a tenant: an ignored process, and one the daemon never saw.
    for pid in [SMI, 12345] {
        let c = peer(&mut d, &socket_path(&p), pid);
        assert_eq!(ask(&mut d, &c, "begin 50"), "refused not-a-tenant");
    }
    // A best-effort tenant: nothing is below it.
    let be = peer(&mut d, &socket_path(&p), BE);
    assert_eq!(ask(&mut d, &be, "begin 50"), "refused lowest-level");
    assert_eq!(
        ask(&mut d, &be, &format!("begin 50 {A:#x}")),
        "refused lowest-level"
    );
    // LC about a node where it has no queue, even beside one where it has.
    let lc = peer(&mut d, &socket_path(&p), LC);
    for msg in [
        format!("begin 50 {B:#x}"),
        format!("begin 50 {A:#x} {B:#x}"),
    ] {
        assert_eq!(ask(&mut d, &lc, &msg), "refused no-queues", "{msg}");
    }
    for msg in ["begin 0", "begin 101", "begin", "hurry", "end please"] {
        assert_eq!(ask(&mut d, &lc, msg), "refused malformed", "{msg}");
    }
    let long = format!("begin 5 {}", "0".repeat(200));
    assert_eq!(ask(&mut d, &lc, &long), "refused malformed");
    assert_eq!(fake.main_calls(), vec![]);
    assert!(!held(&d, LC_A));
    let refused = d.stats(monotonic()).hints.refused;
    let want: BTreeMap<String, u64> = [
        ("not-a-tenant", 2),
        ("lowest-level", 2),
        ("no-queues", 2),
        ("malformed", 6),
    ]
    .into_iter()
    .map(|(r, n)| (r.to_string(), n))
    .collect();
    assert_eq!(refused, want);
    // The connections stay usable: a good hint after all that is taken.
    assert_eq!(ask(&mut d, &lc, &format!("begin 50 {A:#x}")), "ok 1");
}

#[test]
fn a_tenant_gives_at_most_its_rate_of_hints() {
    let (p, fake, cfg) = two_nodes_with("hint-rate", "hint_rate = 2");
    let mut d = daemon(&p, &fake, &cfg);
    d.listen_for_hints(&socket_path(&p)).unwrap();
    d.scan();
    let c = peer(&mut d, &socket_path(&p), LC);
    assert_eq!(ask(&mut d, &c, "begin 500"), "ok 1");
    assert_eq!(ask(&mut d, &c, "begin 500"), "ok 1");
    assert_eq!(ask(&mut d, &c, "begin 500"), "refused rate-limited");
    // Refused, its hint before still holds.
    assert!(held(&d, LC_A));
    fake.calls();
}
