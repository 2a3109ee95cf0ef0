//! Hints on the daemon's socket: who may give one, what it preempts, and
//! how it ends.

use std::os::fd::OwnedFd;

use rustix::net::{
    connect, recv, send, shutdown, socket_with, AddressFamily, RecvFlags, SendFlags, Shutdown,
    SocketAddrUnix, SocketFlags, SocketType,
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
    s.accept(monotonic());
    s.pretend_newest_is(pid);
    fd
}

/// Sends `msg`, lets the daemon serve it, and returns its reply.
fn ask(d: &mut Daemon<'_, Fake>, fd: &OwnedFd, msg: &str) -> String {
    send(fd, msg.as_bytes(), SendFlags::empty()).unwrap();
    d.serve_hints(true);
    let mut buf = [0u8; 128];
    let (n, _) = recv(fd, &mut buf[..], RecvFlags::DONTWAIT).unwrap();
    String::from_utf8_lossy(&buf[..n]).into_owned()
}

/// Whether the daemon closed `fd`'s connection (after the replies it
/// sent, read or not).
fn closed_by_daemon(fd: &OwnedFd) -> bool {
    let mut buf = [0u8; 128];
    loop {
        match recv(fd, &mut buf[..], RecvFlags::DONTWAIT) {
            Ok((0, _)) => return true,
            Ok(_) => continue,
            Err(_) => return false,
        }
    }
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
fn connections_are_taken_only_when_the_poll_saw_one_waiting() {
    let (p, fake, cfg) = two_nodes_with("hint-accept", "");
    let mut d = daemon(&p, &fake, &cfg);
    d.listen_for_hints(&socket_path(&p)).unwrap();
    d.scan();
    let waiting = socket_with(
        AddressFamily::UNIX,
        SocketType::SEQPACKET,
        SocketFlags::CLOEXEC,
        None,
    )
    .unwrap();
    connect(&waiting, &SocketAddrUnix::new(socket_path(&p)).unwrap()).unwrap();
    // A wakeup for a request on another connection does not try to accept.
    d.serve_hints(false);
    assert_eq!(d.stats(monotonic()).hints.connections, 0);
    d.serve_hints(true);
    assert_eq!(d.stats(monotonic()).hints.connections, 1);
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
    d.serve_hints(true);
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
    // Not a tenant: an ignored process, one the daemon never saw, and one
    // in a pid namespace it cannot see into (SO_PEERCRED's pid 0). Each is
    // closed after the refusal.
    for pid in [SMI, 12345, 0] {
        let c = peer(&mut d, &socket_path(&p), pid);
        assert_eq!(ask(&mut d, &c, "begin 50"), "refused not-a-tenant");
        assert!(closed_by_daemon(&c), "{pid}");
    }
    assert_eq!(d.stats(monotonic()).hints.connections, 0);
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
    // These refusals leave the connections open.
    assert!(!closed_by_daemon(&be) && !closed_by_daemon(&lc));
    let long = format!("begin 5 {}", "0".repeat(200));
    for msg in [
        "begin 0",
        "begin 101",
        "begin",
        "hurry",
        "end please",
        &long,
    ] {
        // A malformed request closes its connection.
        let c = peer(&mut d, &socket_path(&p), LC);
        assert_eq!(ask(&mut d, &c, msg), "refused malformed", "{msg}");
        assert!(closed_by_daemon(&c), "{msg}");
    }
    assert_eq!(fake.main_calls(), vec![]);
    assert!(!held(&d, LC_A));
    let refused = d.stats(monotonic()).hints.refused;
    let want: BTreeMap<String, u64> = [
        ("not-a-tenant", 3),
        ("lowest-level", 2),
        ("no-queues", 2),
        ("malformed", 6),
    ]
    .into_iter()
    .map(|(r, n)| (r.to_string(), n))
    .collect();
    assert_eq!(refused, want);
    // The connections refused for what they asked stay usable: a good
    // hint after all that is taken.
    assert_eq!(ask(&mut d, &lc, &format!("begin 50 {A:#x}")), "ok 1");
    assert_eq!(d.stats(monotonic()).hints.connections, 2);
}

#[test]
fn a_malformed_request_on_a_hinting_connection_ends_its_hint() {
    let (p, fake, cfg) = two_nodes_with("hint-malformed", "");
    let mut d = daemon(&p, &fake, &cfg);
    d.listen_for_hints(&socket_path(&p)).unwrap();
    d.scan();
    let c = peer(&mut d, &socket_path(&p), LC);
    assert_eq!(ask(&mut d, &c, "begin 500"), "ok 1");
    fake.calls();
    assert_eq!(ask(&mut d, &c, "hurry"), "refused malformed");
    assert!(closed_by_daemon(&c));
    assert_eq!(fake.main_calls(), vec![Call::Resume(be_refs())]);
    assert!(!held(&d, LC_A));
}

#[test]
fn each_connection_of_a_tenant_holds_a_hint_of_its_own() {
    let (p, fake, cfg) = two_nodes_with("hint-two-conns", "");
    let mut d = daemon(&p, &fake, &cfg);
    d.listen_for_hints(&socket_path(&p)).unwrap();
    d.scan();
    // Two threads of one service, each with its connection.
    let first = peer(&mut d, &socket_path(&p), LC);
    let second = peer(&mut d, &socket_path(&p), LC);
    assert_eq!(ask(&mut d, &first, "begin 500"), "ok 1");
    assert_eq!(ask(&mut d, &second, "begin 500"), "ok 1");
    fake.calls();
    // One ending its hint leaves the other's.
    assert_eq!(ask(&mut d, &second, "end"), "ok 0");
    assert_eq!(fake.main_calls(), vec![]);
    assert!(held(&d, LC_A));
    drop(second);
    d.serve_hints(true);
    assert!(held(&d, LC_A));
    assert_eq!(ask(&mut d, &first, "end"), "ok 0");
    assert_eq!(fake.main_calls(), vec![Call::Resume(be_refs())]);
}

#[test]
fn a_hint_ended_as_another_is_given_in_one_wakeup_leaves_be_off() {
    let (p, fake, cfg) = two_nodes_with("hint-handover", "");
    let mut d = daemon(&p, &fake, &cfg);
    d.listen_for_hints(&socket_path(&p)).unwrap();
    d.scan();
    let first = peer(&mut d, &socket_path(&p), LC);
    let second = peer(&mut d, &socket_path(&p), LC);
    assert_eq!(ask(&mut d, &first, "begin 500"), "ok 1");
    fake.calls();
    // Both requests wait for one wakeup: the first's end resumes, the
    // second's begin preempts, in that order.
    send(&first, b"end", SendFlags::empty()).unwrap();
    send(&second, b"begin 500", SendFlags::empty()).unwrap();
    d.serve_hints(true);
    assert_eq!(
        fake.main_calls(),
        vec![Call::Resume(be_refs()), Call::Preempt(be_refs(), LEASE)]
    );
    assert!(held(&d, LC_A));
}

#[test]
fn a_reply_that_cannot_be_sent_closes_the_connection_and_ends_its_hint() {
    let (p, fake, cfg) = two_nodes_with("hint-reply-lost", "");
    let mut d = daemon(&p, &fake, &cfg);
    d.listen_for_hints(&socket_path(&p)).unwrap();
    d.scan();
    let c = peer(&mut d, &socket_path(&p), LC);
    assert_eq!(ask(&mut d, &c, "begin 500"), "ok 1");
    fake.calls();
    // A client that reads no more: the daemon's reply fails (EPIPE).
    shutdown(&c, Shutdown::Read).unwrap();
    send(&c, b"begin 500", SendFlags::empty()).unwrap();
    d.serve_hints(true);
    assert_eq!(fake.main_calls(), vec![Call::Resume(be_refs())]);
    assert!(!held(&d, LC_A));
    let s = d.stats(monotonic());
    assert_eq!((s.hints.connections, s.hints.ended), (0, 1));
}

#[test]
fn a_hint_ends_with_its_tenant_even_while_its_connection_is_open() {
    let (p, fake, cfg) = two_nodes_with("hint-tenant-gone", "");
    // A second server keeps the level on node A after the first exits.
    add_second_server(&p, &fake, A, 7);
    let mut d = daemon(&p, &fake, &cfg);
    d.listen_for_hints(&socket_path(&p)).unwrap();
    d.scan();
    let c = peer(&mut d, &socket_path(&p), LC);
    assert_eq!(ask(&mut d, &c, "begin 500"), "ok 1");
    fake.calls();
    // The connection outlives the process (a child inherited it).
    exit_process(&p, &fake, LC);
    d.scan();
    assert!(fake.main_calls().contains(&Call::Resume(be_refs())));
    assert!(!held(&d, LC_A));
    assert_eq!(d.stats(monotonic()).hints.connections, 1);
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

/// LC busy on node A (BE held), `published_before` more packets of the
/// running request, then LC's hint for the next one on `c`, then
/// `published_after` packets, then LC idle for the hysteresis: whether BE
/// was resumed at that idle edge.
fn resumed_at_idle_after_a_busy_hint(
    name: &str,
    published_before: u64,
    published_after: u64,
) -> bool {
    let (p, fake, cfg) = two_nodes_with(name, "");
    let mut d = daemon(&p, &fake, &cfg);
    d.listen_for_hints(&socket_path(&p)).unwrap();
    d.scan();
    fake.set_busy(A, true);
    d.on_wakeups(&[LC_A]);
    assert!(held(&d, LC_A));
    fake.s.borrow_mut().writes += published_before;
    let c = peer(&mut d, &socket_path(&p), LC);
    assert_eq!(ask(&mut d, &c, "begin 500"), "ok 1");
    fake.s.borrow_mut().writes += published_after;
    fake.calls();
    // Idle for the hysteresis since the ARM, with no busy edge since.
    fake.s.borrow_mut().skew = Duration::from_millis(10);
    fake.set_busy(A, false);
    d.on_wakeups(&[LC_A]);
    let resumed = fake.main_calls().contains(&Call::Resume(be_refs()));
    assert_eq!(resumed, !held(&d, LC_A));
    assert_eq!(d.stats(monotonic()).counters.hints_expired, 0);
    resumed
}

#[test]
fn a_hint_given_while_lc_is_busy_is_spent_by_its_work_before_lc_goes_idle() {
    // The next request's packet came while this one ran: BE comes back at
    // the idle edge, not at the hint's end.
    assert!(resumed_at_idle_after_a_busy_hint("hint-busy", 0, 1));
}

#[test]
fn a_hint_given_while_lc_is_busy_outlives_packets_published_before_it() {
    // The running request's own later packets are not the hinted work: BE
    // stays off for the work the hint said is coming.
    assert!(!resumed_at_idle_after_a_busy_hint("hint-busy-before", 1, 0));
}
