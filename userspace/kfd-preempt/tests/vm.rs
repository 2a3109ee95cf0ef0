//! Integration tests against the module's simulated nodes. They need
//! `/dev/kfd_preempt` loaded with `sim_nodes=2 sim_mes_nodes=2` (node 0 HWS,
//! node 1 MES) and root, so they are ignored on ordinary hosts; the test VM
//! runs them with `--include-ignored` (tests/vm/crate_vm_test.sh).

use std::{
    io::{BufRead, BufReader},
    os::fd::AsFd,
    process::{Child, Command, Stdio},
    thread::sleep,
    time::Duration,
};

use kfd_preempt::{
    sim::SimTenant, BatchOptions, Caps, Device, EntryError, Error, Handle, Outcome, QueueRef,
    QueueState, QueueType, TargetKind,
};

const HWS_NODE: u32 = 0;
const MES_NODE: u32 = 1;

/// A tenant in this process with `n` queues on `node`.
fn tenant(node: u32, n: u32) -> (SimTenant, Vec<u32>) {
    let t = SimTenant::open().expect("open the tenant device");
    let ids = (0..n)
        .map(|_| {
            t.create_queue(node, QueueType::ComputeAql, 7)
                .unwrap()
                .queue_id
        })
        .collect();
    (t, ids)
}

fn retired(t: &SimTenant, ids: &[u32]) -> u64 {
    ids.iter().map(|q| t.status(*q).unwrap().retired).sum()
}

fn all_refs(dev: &Device, h: Handle) -> Vec<QueueRef> {
    dev.query(h, None)
        .unwrap()
        .iter()
        .map(|q| q.queue_ref())
        .collect()
}

#[test]
#[ignore = "needs kfd_preempt loaded with sim_nodes=2 sim_mes_nodes=2 (the test VM)"]
fn info_reports_the_simulated_nodes() {
    let info = Device::open().unwrap().info().unwrap();
    assert_eq!(info.abi_major, 1);
    assert!(info
        .caps
        .has(Caps::SIM | Caps::FREEZE | Caps::HWS_BATCH | Caps::MES));
    assert_eq!((info.sizeof_queue_ref, info.sizeof_queue_info), (16, 96));
}

/// A `kfdp-scenario sim-tenant` child (the developer tool is on PATH in the
/// VM).
fn child_tenant(queues: u32) -> Child {
    let mut c = Command::new("kfdp-scenario")
        .args(["sim-tenant", "--stdin", "--queues", &queues.to_string()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("kfdp-scenario on PATH");
    let mut line = String::new();
    BufReader::new(c.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert!(line.starts_with("ready "), "{line}");
    c
}

#[test]
#[ignore = "needs kfd_preempt loaded with sim_nodes=2 sim_mes_nodes=2 (the test VM)"]
fn attach_by_pid_finds_another_process_and_lists_its_queues() {
    let mut child = child_tenant(3);
    let dev = Device::open().unwrap();
    let target = dev.attach(child.id() as i32).unwrap();
    assert_eq!(target.tgid(), child.id() as i32);
    let queues = target.query().unwrap();
    assert_eq!(queues.len(), 3);
    for q in &queues {
        assert_eq!(
            (q.gpu_id, q.queue_type, q.gc_ip_version),
            (0x5100, QueueType::ComputeAql, 0x090403)
        );
        assert!(q.state.is_active() && q.ring_base_address != 0);
    }
    let mut rings: Vec<u64> = queues.iter().map(|q| q.ring_base_address).collect();
    rings.dedup();
    assert_eq!(rings.len(), 3);
    drop(child.stdin.take());
    child.wait().unwrap();
    // The tenant exited: its attachment reports it.
    assert_eq!(target.query(), Err(Error::TargetExited));
}

/// `program args` started with this process's tenant file `inherited` as
/// its descriptor 3, below any it opens: a forked child's copy of its
/// parent's `/dev/kfd`, which names the parent's KFD process.
fn with_inherited(inherited: &SimTenant, program: &str, args: &[&str]) -> Child {
    use std::os::{fd::AsRawFd, unix::process::CommandExt};
    let fd = inherited.as_fd().as_raw_fd();
    let mut cmd = Command::new(program);
    cmd.args(args).stdin(Stdio::piped()).stdout(Stdio::piped());
    // SAFETY: only dup2(2) runs between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            if keep_as_3(fd) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    cmd.spawn().expect("start the child")
}

/// Makes `fd` descriptor 3, kept across exec (dup2(2) leaves the copy
/// without FD_CLOEXEC; a descriptor that is 3 already gets it cleared).
fn keep_as_3(fd: i32) -> i32 {
    extern "C" {
        fn dup2(oldfd: i32, newfd: i32) -> i32;
        fn fcntl(fd: i32, cmd: i32, ...) -> i32;
    }
    const F_SETFD: i32 = 2;
    // SAFETY: both take integers; an invalid one is an error return.
    unsafe {
        if fd == 3 {
            fcntl(3, F_SETFD, 0)
        } else {
            dup2(fd, 3)
        }
    }
}

#[test]
#[ignore = "needs kfd_preempt loaded with sim_nodes=2 sim_mes_nodes=2 (the test VM)"]
fn attach_by_pid_takes_the_descriptor_the_process_opened() {
    let (parent, _ids) = tenant(HWS_NODE, 1);
    let me = std::process::id() as i32;
    let dev = Device::open().unwrap();
    // Only the inherited descriptor: attaching the pid attaches its
    // parent, and says so.
    let mut holder = with_inherited(&parent, "sleep", &["30"]);
    let t = dev.attach(holder.id() as i32).unwrap();
    assert_eq!(t.tgid(), me);
    drop(t);
    holder.kill().unwrap();
    holder.wait().unwrap();
    // The inherited descriptor (3) and one of its own, higher: attaching
    // the pid attaches the process itself.
    let mut child = with_inherited(
        &parent,
        "kfdp-scenario",
        &["sim-tenant", "--stdin", "--queues", "2"],
    );
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert!(line.starts_with("ready "), "{line}");
    let t = dev.attach(child.id() as i32).unwrap();
    assert_eq!(t.tgid(), child.id() as i32);
    assert_eq!(t.query().unwrap().len(), 2);
    drop(t);
    drop(child.stdin.take());
    child.wait().unwrap();
    // The scratch file the probe opened is closed: the parent is attached
    // by nobody else, so its queue is untouched and ours to preempt.
    let p = dev.attach_fd(parent.as_fd(), TargetKind::SimFd).unwrap();
    let refs: Vec<QueueRef> = p.query().unwrap().iter().map(|q| q.queue_ref()).collect();
    assert_eq!(
        dev.preempt(&refs, &BatchOptions::default()).unwrap().num_ok,
        1
    );
}

#[test]
#[ignore = "needs kfd_preempt loaded with sim_nodes=2 sim_mes_nodes=2 (the test VM)"]
fn preempt_and_resume_stop_and_restart_progress() {
    let (t, ids) = tenant(HWS_NODE, 4);
    let dev = Device::open().unwrap();
    let target = dev.attach_fd(t.as_fd(), TargetKind::SimFd).unwrap();
    let refs = all_refs(&dev, target.handle());
    sleep(Duration::from_millis(20));
    let r = dev.preempt(&refs, &BatchOptions::default()).unwrap();
    assert!(r.outcomes.iter().all(|(_, o)| *o == Outcome::Done), "{r:?}");
    assert_eq!((r.num_ok, r.runlist_updates), (4, 1));
    let before = retired(&t, &ids);
    sleep(Duration::from_millis(50));
    assert!(before > 0);
    assert_eq!(retired(&t, &ids), before);
    for q in target.query().unwrap() {
        assert_eq!(
            q.state,
            QueueState(QueueState::SUSPENDED | QueueState::OWNED)
        );
    }
    let r = dev.resume(&refs).unwrap();
    assert!(r.all_succeeded() && r.runlist_updates == 1);
    sleep(Duration::from_millis(50));
    assert!(retired(&t, &ids) > before);
}

#[test]
#[ignore = "needs kfd_preempt loaded with sim_nodes=2 sim_mes_nodes=2 (the test VM)"]
fn a_mes_node_costs_one_call_per_queue() {
    let (t, _) = tenant(MES_NODE, 4);
    let dev = Device::open().unwrap();
    let target = dev.attach_fd(t.as_fd(), TargetKind::SimFd).unwrap();
    let refs = all_refs(&dev, target.handle());
    assert_eq!(
        dev.preempt(&refs, &BatchOptions::default())
            .unwrap()
            .runlist_updates,
        4
    );
    assert_eq!(dev.resume(&refs).unwrap().runlist_updates, 4);
}

#[test]
#[ignore = "needs kfd_preempt loaded with sim_nodes=2 sim_mes_nodes=2 (the test VM)"]
fn per_entry_outcomes_are_typed() {
    let (t, ids) = tenant(HWS_NODE, 1);
    let dev = Device::open().unwrap();
    let target = dev.attach_fd(t.as_fd(), TargetKind::SimFd).unwrap();
    let good = target.queue(0x5100, ids[0]);
    let batch = [
        good,
        good,
        target.queue(0x5100, 1000),
        QueueRef {
            handle: Handle(999),
            ..good
        },
    ];
    let r = dev.preempt(&batch, &BatchOptions::default()).unwrap();
    let outcomes: Vec<Outcome> = r.outcomes.iter().map(|(_, o)| *o).collect();
    assert_eq!(
        outcomes,
        [
            Outcome::Done,
            Outcome::Already,
            Outcome::Failed(EntryError::QueueGone),
            Outcome::Failed(EntryError::Invalid)
        ]
    );
    assert_eq!(r.failures().count(), 2);
    dev.resume(&[good]).unwrap();
    // All or nothing: the good entry is cancelled, nothing changes.
    let aon = BatchOptions {
        all_or_nothing: true,
        ..Default::default()
    };
    let r = dev
        .preempt(
            &batch[2..]
                .iter()
                .chain([&good])
                .copied()
                .collect::<Vec<_>>(),
            &aon,
        )
        .unwrap();
    assert_eq!(r.outcomes[2].1, Outcome::Failed(EntryError::Cancelled));
    assert!(target.query().unwrap()[0].state.is_active());
}

#[test]
#[ignore = "needs kfd_preempt loaded with sim_nodes=2 sim_mes_nodes=2 (the test VM)"]
fn validate_only_changes_nothing() {
    let (t, _) = tenant(HWS_NODE, 2);
    let dev = Device::open().unwrap();
    let target = dev.attach_fd(t.as_fd(), TargetKind::SimFd).unwrap();
    let refs = all_refs(&dev, target.handle());
    let check = BatchOptions {
        validate_only: true,
        ..Default::default()
    };
    let r = dev.preempt(&refs, &check).unwrap();
    assert_eq!((r.num_ok, r.runlist_updates), (2, 0));
    assert!(target.query().unwrap().iter().all(|q| q.state.is_active()));
}

#[test]
#[ignore = "needs kfd_preempt loaded with sim_nodes=2 sim_mes_nodes=2 (the test VM)"]
fn a_lease_ends_by_itself() {
    let (t, _) = tenant(HWS_NODE, 2);
    let dev = Device::open().unwrap();
    let target = dev.attach_fd(t.as_fd(), TargetKind::SimFd).unwrap();
    let refs = all_refs(&dev, target.handle());
    let lease = BatchOptions {
        lease: Some(Duration::from_millis(100)),
        ..Default::default()
    };
    assert!(dev.preempt(&refs, &lease).unwrap().all_succeeded());
    assert!(target.query().unwrap().iter().all(|q| q.state.is_owned()));
    sleep(Duration::from_millis(400));
    assert!(target
        .query()
        .unwrap()
        .iter()
        .all(|q| q.state.is_active() && !q.state.is_owned()));
}

#[test]
#[ignore = "needs kfd_preempt loaded with sim_nodes=2 sim_mes_nodes=2 (the test VM)"]
fn freezes_nest_and_thaw_of_nothing_is_an_error() {
    let (t, _) = tenant(HWS_NODE, 1);
    let dev = Device::open().unwrap();
    let target = dev.attach_fd(t.as_fd(), TargetKind::SimFd).unwrap();
    let frozen = |v: bool| {
        target
            .query()
            .unwrap()
            .iter()
            .all(|q| (q.state.0 & QueueState::FROZEN != 0) == v && q.state.is_active() != v)
    };
    target.freeze().unwrap();
    target.freeze().unwrap();
    target.thaw().unwrap();
    assert!(frozen(true));
    target.thaw().unwrap();
    assert!(frozen(false));
    assert_eq!(target.thaw(), Err(Error::NotFrozen));
}

#[test]
#[ignore = "needs kfd_preempt loaded with sim_nodes=2 sim_mes_nodes=2 (the test VM)"]
fn dropping_the_target_or_the_device_resumes() {
    let (t, _) = tenant(HWS_NODE, 2);
    let dev = Device::open().unwrap();
    let active = |dev: &Device| {
        let probe = dev.attach_fd(t.as_fd(), TargetKind::SimFd).unwrap();
        probe.query().unwrap().iter().all(|q| q.state.is_active())
    };
    {
        let target = dev.attach_fd(t.as_fd(), TargetKind::SimFd).unwrap();
        let refs = all_refs(&dev, target.handle());
        dev.preempt(&refs, &BatchOptions::default()).unwrap();
        target.freeze().unwrap();
    }
    assert!(active(&dev));
    let other = Device::open().unwrap();
    let h = other
        .attach_fd(t.as_fd(), TargetKind::SimFd)
        .unwrap()
        .into_handle();
    other
        .preempt(&all_refs(&other, h), &BatchOptions::default())
        .unwrap();
    assert!(!active(&dev));
    drop(other);
    assert!(active(&dev));
}

#[test]
#[ignore = "needs kfd_preempt loaded with sim_nodes=2 sim_mes_nodes=2 (the test VM)"]
fn whole_call_errors_are_typed() {
    let dev = Device::open().unwrap();
    assert_eq!(dev.attach(1).unwrap_err(), Error::NotAKfdProcess { pid: 1 });
    assert_eq!(
        dev.attach(0x3fff_fff0).unwrap_err(),
        Error::NoSuchProcess { pid: 0x3fff_fff0 }
    );
    assert_eq!(dev.detach(Handle(4242)), Err(Error::UnknownHandle(4242)));
    assert_eq!(
        dev.query(Handle(4242), None),
        Err(Error::UnknownHandle(4242))
    );
    // An unknown gpu_id and an unknown handle are both EINVAL to the
    // module; the library says which.
    assert_eq!(
        dev.query(Handle(4242), Some(0x5100)),
        Err(Error::UnknownHandle(4242))
    );
    let (tenant, _) = tenant(0, 1);
    let h = dev
        .attach_fd(tenant.as_fd(), TargetKind::SimFd)
        .unwrap()
        .into_handle();
    let unknown_gpu = Err(Error::UnknownGpu {
        handle: h.0,
        gpu_id: 0x51ff,
    });
    assert_eq!(dev.query(h, Some(0x51ff)).map(|_| ()), unknown_gpu);
    assert_eq!(dev.freeze(h, Some(0x51ff), false).map(|_| ()), unknown_gpu);
    assert_eq!(dev.query(h, Some(0x5100)).map(|q| q.len()), Ok(1));
    let devnull = std::fs::File::open("/dev/null").unwrap();
    assert!(matches!(
        dev.attach_fd(devnull.as_fd(), TargetKind::SimFd),
        Err(Error::InvalidArgument(_))
    ));
}
