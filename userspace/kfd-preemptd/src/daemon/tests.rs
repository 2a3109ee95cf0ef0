//! The daemon against a fake module with several files, nodes and levels.

use std::{
    cell::RefCell,
    collections::{HashMap, HashSet},
    os::fd::{AsFd, BorrowedFd},
    rc::Rc,
    time::Duration,
};

use kfd_preempt::{
    Activity, ArmCondition, BatchReport, Caps, EntryError, Handle, Info, Outcome, QueueInfo,
    QueueRef, QueueState, QueueType, Sample, TargetKind,
};
use rustix::io::Errno;

use super::*;
use crate::{
    config::Config,
    discover::Discovery,
    policy::{Action, Event, Mode, PreemptReason, ResumeReason},
    testutil::FakeProc,
};

fn q(handle: u32, queue_id: u32) -> QueueRef {
    QueueRef {
        handle: Handle(handle),
        gpu_id: 0x1000,
        queue_id,
    }
}

fn act(queue: QueueRef, pending: bool, gone: bool, write_index: u64) -> Activity {
    Activity {
        queue,
        pending,
        gone,
        read_index: if pending {
            write_index - 1
        } else {
            write_index
        },
        write_index,
    }
}

fn sample(at_us: u64, queues: Vec<Activity>) -> Sample {
    Sample {
        timestamp: Duration::from_micros(at_us),
        num_pending: queues.iter().filter(|a| a.pending).count() as u32,
        queues,
    }
}

#[test]
fn any_busy_is_confirmed_by_pending_work_or_a_moved_write_index() {
    let baseline: HashMap<_, _> = [(q(1, 0), 10), (q(2, 0), 5)].into();
    let arm = ArmState::AnyBusy { baseline };
    let idle = sample(
        100,
        vec![
            act(q(1, 0), false, false, 10),
            act(q(2, 0), false, false, 5),
        ],
    );
    assert_eq!(confirm(&arm, &idle), Confirmation::Rearm);
    let pending = sample(
        100,
        vec![act(q(1, 0), false, false, 10), act(q(2, 0), true, false, 6)],
    );
    assert_eq!(confirm(&arm, &pending), Confirmation::Busy);
    // A burst that retired before the SAMPLE: the write index moved.
    let burst = sample(
        100,
        vec![
            act(q(1, 0), false, false, 12),
            act(q(2, 0), false, false, 5),
        ],
    );
    assert_eq!(confirm(&arm, &burst), Confirmation::Busy);
    // An exited tenant's stale indices do not count.
    let gone = sample(
        100,
        vec![act(q(1, 0), true, true, 99), act(q(2, 0), false, false, 5)],
    );
    assert_eq!(confirm(&arm, &gone), Confirmation::Rearm);
}

#[test]
fn all_idle_needs_no_pending_work_and_the_idle_time_since_the_arm() {
    let arm = ArmState::AllIdle {
        idle: Duration::from_micros(1000),
        armed_at: Duration::from_micros(5000),
    };
    let quiet = |at| sample(at, vec![act(q(1, 0), false, false, 3)]);
    // Too early for this ARM: a stale signal of the one before.
    assert_eq!(confirm(&arm, &quiet(5500)), Confirmation::Rearm);
    assert_eq!(confirm(&arm, &quiet(6000)), Confirmation::Idle);
    // Work came back after the signal: stay busy.
    let back = sample(6100, vec![act(q(1, 0), true, false, 4)]);
    assert_eq!(confirm(&arm, &back), Confirmation::Rearm);
    assert_eq!(confirm(&ArmState::Off, &quiet(9000)), Confirmation::Ignore);
}

fn report(outcomes: &[Outcome]) -> BatchReport {
    BatchReport {
        outcomes: outcomes
            .iter()
            .enumerate()
            .map(|(i, o)| (q(1, i as u32), *o))
            .collect(),
        num_ok: 0,
        runlist_updates: 1,
        elapsed: Duration::ZERO,
    }
}

#[test]
fn preempt_outcomes_become_policy_events() {
    let fast = Duration::from_millis(1);
    let slow = Duration::from_millis(200);
    let all = PreemptSummary::of(&report(&[Outcome::Done, Outcome::Already]));
    assert_eq!(all.ok, 2);
    assert_eq!(
        all.feedback(fast, slow),
        Event::PreemptDone { retry_after: None }
    );
    let partial = PreemptSummary::of(&report(&[
        Outcome::Done,
        Outcome::Failed(EntryError::TooSoon),
        Outcome::Failed(EntryError::QueueGone),
    ]));
    assert_eq!((partial.ok, partial.too_soon, partial.gone), (1, 1, 1));
    assert_eq!(
        partial.feedback(fast, slow),
        Event::PreemptDone {
            retry_after: Some(fast)
        }
    );
    let limited = PreemptSummary::of(&report(&[Outcome::Failed(EntryError::TooSoon)]));
    assert_eq!(
        limited.feedback(fast, slow),
        Event::PreemptFailed { retry_after: fast }
    );
    let busy = PreemptSummary::of(&report(&[Outcome::Failed(EntryError::Busy)]));
    assert_eq!(busy.failed, 1);
    assert_eq!(
        busy.feedback(fast, slow),
        Event::PreemptFailed { retry_after: slow }
    );
}

#[test]
fn only_compute_queues_are_taken() {
    assert!(is_compute(QueueType::Compute));
    assert!(is_compute(QueueType::ComputeAql));
    assert!(!is_compute(QueueType::Sdma));
    assert!(!is_compute(QueueType::SdmaXgmi));
    assert!(!is_compute(QueueType::Other(9)));
}

#[derive(Debug, Clone, PartialEq)]
enum Call {
    Attach(i32),
    Detach(Handle),
    Preempt(Vec<QueueRef>, Duration),
    Resume(Vec<QueueRef>),
    Watch(Vec<QueueRef>),
    Arm(ArmCondition, Duration),
    Disarm,
}

/// The main file is file 0; watcher files are numbered as opened.
#[derive(Default)]
struct State {
    processes: Vec<(i32, TargetKind)>,
    refuse_attach: HashSet<i32>,
    /// Each tenant's queues: node, id, type.
    queues: HashMap<i32, Vec<(u32, u32, QueueType)>>,
    /// Ring addresses of queues (tenant, node, id); 0 if not given.
    rings: HashMap<(i32, u32, u32), u64>,
    /// Forked children holding only their parent's KFD descriptor, with
    /// the parent: attaching one attaches the parent.
    inherited: HashMap<i32, i32>,
    files: usize,
    watched: HashMap<usize, Vec<QueueRef>>,
    /// Nodes whose watched queues have work.
    busy: HashSet<u32>,
    writes: u64,
    /// Tenants that exited (SAMPLE says gone, QUERY fails).
    exited: HashSet<i32>,
    /// Queues preempted and not resumed: QUERY says OWNED through the file
    /// that preempted them, as the module's marks do.
    held: HashSet<QueueRef>,
    /// Held queues destroyed and made again under the same id: the
    /// module's mark stays, so QUERY says OWNED but no longer SUSPENDED,
    /// until a PREEMPT suspends the new queue.
    remade: HashSet<QueueRef>,
    /// Added to the monotonic clock in SAMPLE timestamps.
    skew: Duration,
    /// The most queues WATCH takes per file (the module's max_watches).
    watch_room: Option<usize>,
    /// Queue ids WATCH refuses with `EAGAIN` (indices not resident).
    watch_again: HashSet<u32>,
    /// ARM signals the eventfd if its condition holds at once.
    signal_on_arm: bool,
    calls: Vec<(usize, Call)>,
    /// SAMPLE calls so far, every file's.
    samples: usize,
    /// The tenants QUERY was asked about, in order (taken by `queried`).
    queried: Vec<i32>,
}

#[derive(Clone)]
struct Fake {
    s: Rc<RefCell<State>>,
    file: usize,
}

/// A tenant's handle on file `file` (pids below 1000).
fn handle(file: usize, pid: i32) -> Handle {
    Handle(file as u32 * 1000 + pid as u32)
}

fn pid_of_handle(h: Handle) -> i32 {
    (h.0 % 1000) as i32
}

/// A queue through file `file`.
fn fq(file: usize, pid: i32, gpu_id: u32, queue_id: u32) -> QueueRef {
    QueueRef {
        handle: handle(file, pid),
        gpu_id,
        queue_id,
    }
}

/// A queue through the main file.
fn mq(pid: i32, gpu_id: u32, queue_id: u32) -> QueueRef {
    fq(0, pid, gpu_id, queue_id)
}

impl Fake {
    fn new() -> Self {
        Fake {
            s: Rc::new(RefCell::new(State {
                files: 1,
                ..Default::default()
            })),
            file: 0,
        }
    }
    fn calls(&self) -> Vec<(usize, Call)> {
        std::mem::take(&mut self.s.borrow_mut().calls)
    }
    /// The tenants QUERY was asked about since the last call.
    fn queried(&self) -> Vec<i32> {
        std::mem::take(&mut self.s.borrow_mut().queried)
    }
    /// The calls on the main file.
    fn main_calls(&self) -> Vec<Call> {
        self.calls()
            .into_iter()
            .filter(|(f, _)| *f == 0)
            .map(|(_, c)| c)
            .collect()
    }
    fn set_busy(&self, gpu_id: u32, busy: bool) {
        let mut s = self.s.borrow_mut();
        if busy {
            s.busy.insert(gpu_id);
            s.writes += 1;
        } else {
            s.busy.remove(&gpu_id);
        }
    }
    fn push(&self, call: Call) {
        self.s.borrow_mut().calls.push((self.file, call));
    }
}

fn all_done(queues: &[QueueRef]) -> BatchReport {
    BatchReport {
        outcomes: queues.iter().map(|q| (*q, Outcome::Done)).collect(),
        num_ok: queues.len() as u32,
        runlist_updates: 1,
        elapsed: Duration::from_micros(30),
    }
}

impl Backend for Fake {
    fn open_watcher(&self) -> Result<Self, kfd_preempt::Error> {
        let mut s = self.s.borrow_mut();
        let file = s.files;
        s.files += 1;
        Ok(Fake {
            s: self.s.clone(),
            file,
        })
    }
    fn processes(&self) -> Result<Vec<(i32, TargetKind)>, kfd_preempt::Error> {
        Ok(self.s.borrow().processes.clone())
    }
    fn attach(&self, pid: i32) -> Result<Attached, kfd_preempt::Error> {
        self.push(Call::Attach(pid));
        let s = self.s.borrow();
        if s.refuse_attach.contains(&pid) {
            return Err(kfd_preempt::Error::PtraceDenied {
                pid,
                errno: Errno::PERM,
            });
        }
        // As the module: the descriptor names the process that opened it,
        // and the same process attached twice is one handle.
        let tgid = s.inherited.get(&pid).copied().unwrap_or(pid);
        if !s.queues.contains_key(&tgid) {
            return Err(kfd_preempt::Error::NotAKfdProcess { pid });
        }
        Ok(Attached {
            handle: handle(self.file, tgid),
            gpus: 1,
            tgid,
        })
    }
    fn detach(&self, h: Handle) -> Result<(), kfd_preempt::Error> {
        self.push(Call::Detach(h));
        self.s.borrow_mut().held.retain(|q| q.handle != h);
        if let Some(w) = self.s.borrow_mut().watched.get_mut(&self.file) {
            w.retain(|q| q.handle != h);
        }
        Ok(())
    }
    fn query(&self, h: Handle) -> Result<Vec<QueueInfo>, kfd_preempt::Error> {
        let pid = pid_of_handle(h);
        self.s.borrow_mut().queried.push(pid);
        let s = self.s.borrow();
        if s.exited.contains(&pid) {
            return Err(kfd_preempt::Error::TargetExited);
        }
        Ok(s.queues
            .get(&pid)
            .map(|qs| {
                qs.iter()
                    .map(|(gpu, id, ty)| {
                        let q = QueueRef {
                            handle: h,
                            gpu_id: *gpu,
                            queue_id: *id,
                        };
                        QueueInfo {
                            ring_base_address: s.rings.get(&(pid, *gpu, *id)).copied().unwrap_or(0),
                            state: QueueState(if s.remade.contains(&q) {
                                QueueState::ACTIVE | QueueState::OWNED
                            } else if s.held.contains(&q) {
                                QueueState::SUSPENDED | QueueState::OWNED
                            } else {
                                QueueState::ACTIVE
                            }),
                            ..qinfo(h, *gpu, *id, *ty)
                        }
                    })
                    .collect()
            })
            .unwrap_or_default())
    }
    fn preempt(
        &self,
        queues: &[QueueRef],
        lease: Duration,
    ) -> Result<BatchReport, kfd_preempt::Error> {
        self.push(Call::Preempt(queues.to_vec(), lease));
        let mut s = self.s.borrow_mut();
        s.held.extend(queues.iter().copied());
        s.remade.retain(|q| !queues.contains(q));
        drop(s);
        Ok(all_done(queues))
    }
    fn resume(&self, queues: &[QueueRef]) -> Result<BatchReport, kfd_preempt::Error> {
        self.push(Call::Resume(queues.to_vec()));
        self.s.borrow_mut().held.retain(|q| !queues.contains(q));
        Ok(all_done(queues))
    }
    fn watch(&self, queues: &[QueueRef]) -> Result<BatchReport, kfd_preempt::Error> {
        self.push(Call::Watch(queues.to_vec()));
        let mut s = self.s.borrow_mut();
        let room = s.watch_room;
        let again = s.watch_again.clone();
        let watched = s.watched.entry(self.file).or_default();
        let mut report = all_done(queues);
        for (q, o) in report.outcomes.iter_mut() {
            if room.is_some_and(|room| watched.len() >= room) {
                *o = Outcome::Failed(EntryError::Other(Errno::NOSPC.raw_os_error()));
            } else if again.contains(&q.queue_id) {
                *o = Outcome::Failed(EntryError::TooSoon);
            } else {
                watched.push(*q);
            }
        }
        Ok(report)
    }
    fn unwatch(&self, queues: &[QueueRef]) -> Result<BatchReport, kfd_preempt::Error> {
        if let Some(w) = self.s.borrow_mut().watched.get_mut(&self.file) {
            w.retain(|q| !queues.contains(q));
        }
        Ok(all_done(queues))
    }
    fn sample(&self) -> Result<Sample, kfd_preempt::Error> {
        self.s.borrow_mut().samples += 1;
        let s = self.s.borrow();
        let queues: Vec<Activity> = s
            .watched
            .get(&self.file)
            .map(Vec::as_slice)
            .unwrap_or(&[])
            .iter()
            .map(|q| {
                let busy = s.busy.contains(&q.gpu_id);
                Activity {
                    queue: *q,
                    pending: busy,
                    gone: s.exited.contains(&pid_of_handle(q.handle)),
                    read_index: if busy { s.writes - 1 } else { s.writes },
                    write_index: s.writes,
                }
            })
            .collect();
        Ok(Sample {
            timestamp: monotonic() + s.skew,
            num_pending: queues.iter().filter(|a| a.pending).count() as u32,
            queues,
        })
    }
    fn arm(
        &self,
        cond: ArmCondition,
        period: Duration,
        eventfd: BorrowedFd<'_>,
    ) -> Result<(), kfd_preempt::Error> {
        self.push(Call::Arm(cond, period));
        let s = self.s.borrow();
        // The module checks the condition at once: ANY_BUSY over busy
        // queues signals right away.
        let busy = s
            .watched
            .get(&self.file)
            .is_some_and(|w| w.iter().any(|q| s.busy.contains(&q.gpu_id)));
        if s.signal_on_arm && busy && cond == ArmCondition::AnyBusy {
            let _ = rustix::io::write(eventfd, &1u64.to_ne_bytes());
        }
        Ok(())
    }
    fn disarm(&self) -> Result<(), kfd_preempt::Error> {
        self.push(Call::Disarm);
        Ok(())
    }
}

const LC: i32 = 10;
const BE: i32 = 20;
const SMI: i32 = 30;
const OTHER: i32 = 40;
const MID: i32 = 50;
const LC2: i32 = 60;
/// Nodes A and B.
const A: u32 = 0x1000;
const B: u32 = 0x2000;

fn qinfo(handle: Handle, gpu_id: u32, queue_id: u32, queue_type: QueueType) -> QueueInfo {
    QueueInfo {
        handle,
        gpu_id,
        queue_id,
        queue_type,
        state: QueueState(QueueState::ACTIVE),
        ring_base_address: 0,
        ring_size: 0,
        read_pointer_address: 0,
        write_pointer_address: 0,
        ctx_save_restore_address: 0,
        ctx_save_restore_size: 0,
        doorbell_id: 0,
        doorbell_off: 0,
        priority: 7,
        queue_percent: 100,
        gc_ip_version: 0x090403,
    }
}

/// A fake /proc with an LC server, a BE trainer, an ignored tool and
/// an unclassified process, all with a KFD device open, and a module
/// that knows their queues: LC has a compute and an SDMA queue on node
/// A, BE two compute queues and an SDMA queue on node A.
fn world(name: &str) -> (FakeProc, Fake, Config) {
    world_with(name, "")
}

fn world_with(name: &str, daemon_extra: &str) -> (FakeProc, Fake, Config) {
    let p = FakeProc::new(name);
    p.add(
        LC,
        1,
        0,
        "server",
        "/usr/bin/server",
        "/system.slice/infer.service",
        &[],
    );
    p.add(
        BE,
        2,
        1000,
        "trainer",
        "/usr/bin/python3",
        "/user.slice",
        &["KFD_PREEMPT_CLASS=training"],
    );
    p.add(SMI, 3, 0, "smi", "/usr/bin/smi", "/", &[]);
    p.add(OTHER, 4, 1000, "other", "/usr/bin/other", "/", &[]);
    let fake = Fake::new();
    {
        let mut s = fake.s.borrow_mut();
        s.processes = vec![
            (LC, TargetKind::KfdFd),
            (BE, TargetKind::KfdFd),
            (SMI, TargetKind::KfdFd),
            (OTHER, TargetKind::SimFd),
        ];
        s.queues.insert(
            LC,
            vec![(A, 0, QueueType::ComputeAql), (A, 1, QueueType::Sdma)],
        );
        s.queues.insert(
            BE,
            vec![
                (A, 0, QueueType::Compute),
                (A, 1, QueueType::ComputeAql),
                (A, 2, QueueType::Sdma),
            ],
        );
        s.queues.insert(SMI, vec![]);
        s.queues.insert(OTHER, vec![]);
    }
    let stats = p.root.join("stats.json");
    let cfg = Config::parse(&format!(
        r#"
        [daemon]
        tenants = "kfd"
        idle_hysteresis_us = 2000
        stats_path = "{}"
        {daemon_extra}
        [[class]]
        name = "inference"
        priority = "latency-critical"
        cgroup = "/system.slice/infer.service"
        [[class]]
        name = "training"
        priority = "best-effort"
        env = "training"
        [[class]]
        name = "quiet"
        priority = "ignore"
        comm = "smi"
        "#,
        stats.display()
    ))
    .unwrap();
    (p, fake, cfg)
}

fn info() -> Info {
    Info {
        abi_major: 1,
        abi_minor: 2,
        caps: Caps(Caps::ACTIVITY | Caps::HWS_BATCH),
        max_batch: 4096,
        sizeof_queue_ref: 16,
        sizeof_queue_info: 96,
        min_preempt_interval_us: 1000,
        max_watches: 64,
        min_watch_period: Duration::from_micros(10),
    }
}

fn daemon<'c>(p: &FakeProc, fake: &Fake, cfg: &'c Config) -> Daemon<'c, Fake> {
    Daemon::new(
        cfg,
        fake.clone(),
        &info(),
        Discovery::new(p.root.clone()),
        Some(cfg.daemon.stats_path.clone()),
        Logger::new(cfg.daemon.log_format),
    )
    .unwrap()
}

/// BE's compute queues on node A.
fn be_refs() -> Vec<QueueRef> {
    vec![mq(BE, A, 0), mq(BE, A, 1)]
}

const PERIOD: Duration = Duration::from_micros(50);
const IDLE: Duration = Duration::from_micros(2000);
const LEASE: Duration = Duration::from_millis(200);
/// The decision of latency-critical work on node A (and B).
const LC_A: DecisionKey = (A, 1);
const LC_B: DecisionKey = (B, 1);

fn order(q: &QueueRef) -> (u32, u32, u32) {
    (q.gpu_id, q.handle.0, q.queue_id)
}

fn held(d: &Daemon<'_, Fake>, key: DecisionKey) -> bool {
    d.decisions[&key].policy.is_held()
}

#[test]
fn a_module_without_activity_detection_is_refused() {
    let (p, fake, cfg) = world("noact");
    let old = Info {
        caps: Caps(Caps::HWS_BATCH),
        abi_minor: 1,
        ..info()
    };
    let log = Logger::new(cfg.daemon.log_format);
    let e = Daemon::new(&cfg, fake, &old, Discovery::new(p.root.clone()), None, log)
        .err()
        .unwrap();
    assert!(e.to_string().contains("activity"), "{e}");
}

#[test]
fn too_short_a_period_is_raised_to_the_modules_minimum() {
    let (p, fake, cfg) = world("minperiod");
    let slow = Info {
        min_watch_period: Duration::from_micros(100),
        ..info()
    };
    let mut d = Daemon::new(
        &cfg,
        fake.clone(),
        &slow,
        Discovery::new(p.root.clone()),
        None,
        Logger::new(cfg.daemon.log_format),
    )
    .unwrap();
    d.scan();
    assert!(fake.calls().contains(&(
        1,
        Call::Arm(ArmCondition::AnyBusy, Duration::from_micros(100))
    )));
}

/// SAMPLE calls since the last call of this.
fn samples(fake: &Fake) -> usize {
    std::mem::take(&mut fake.s.borrow_mut().samples)
}

#[test]
fn an_edge_samples_once_and_its_sample_is_the_next_arms_baseline() {
    let (p, fake, cfg) = world("onesample");
    let mut d = daemon(&p, &fake, &cfg);
    // The first ANY_BUSY, outside a wakeup: it reads its own baseline.
    d.scan();
    assert_eq!(samples(&fake), 1);
    // A wakeup's SAMPLE that misses a queue watched since is no baseline:
    // the ARM reads its own. A complete one is.
    let woken = |d: &mut Daemon<'_, Fake>, s: Sample| {
        d.decisions
            .get_mut(&LC_A)
            .unwrap()
            .watcher
            .as_mut()
            .unwrap()
            .woken = Some(s);
    };
    woken(&mut d, sample(0, vec![]));
    d.rearm(LC_A);
    assert_eq!(samples(&fake), 1);
    woken(
        &mut d,
        sample(0, vec![act(fq(1, LC, A, 0), false, false, 0)]),
    );
    d.rearm(LC_A);
    assert_eq!(samples(&fake), 0);
    // A stale wakeup: confirmed by one SAMPLE, re-armed on it.
    d.on_wakeups(&[LC_A]);
    assert_eq!(samples(&fake), 1);
    // Busy, then idle for the hysteresis: one SAMPLE each, the idle one
    // also the baseline of the ANY_BUSY armed after the RESUME.
    fake.set_busy(A, true);
    d.on_wakeups(&[LC_A]);
    assert_eq!(samples(&fake), 1);
    fake.set_busy(A, false);
    fake.s.borrow_mut().skew = Duration::from_millis(10);
    d.on_wakeups(&[LC_A]);
    assert_eq!(samples(&fake), 1);
    assert!(!held(&d, LC_A));
    fake.calls();
    // That baseline catches a burst that came and went before the next
    // wakeup: the write index moved since the idle edge's SAMPLE.
    fake.s.borrow_mut().writes += 1;
    fake.s.borrow_mut().skew = Duration::ZERO;
    d.on_wakeups(&[LC_A]);
    assert!(held(&d, LC_A));
    assert!(fake.main_calls().contains(&Call::Preempt(be_refs(), LEASE)));
}

#[test]
fn busy_preempts_be_idle_after_hysteresis_resumes_shutdown_releases() {
    let (p, fake, cfg) = world("cycle");
    let mut d = daemon(&p, &fake, &cfg);
    d.scan();
    // The main file attached LC and BE only (the tool is ignored, the sim
    // tenant not looked for); node A's watcher (file 1) attached LC and
    // watches its compute queue, not its SDMA queue.
    assert_eq!(
        fake.calls(),
        vec![
            (0, Call::Attach(LC)),
            (0, Call::Attach(BE)),
            (1, Call::Attach(LC)),
            (1, Call::Watch(vec![fq(1, LC, A, 0)])),
            (1, Call::Arm(ArmCondition::AnyBusy, PERIOD)),
        ]
    );
    assert_eq!(d.decisions().collect::<Vec<_>>(), vec![LC_A]);
    // A wakeup with nothing pending is stale: re-armed, nothing else.
    d.on_wakeups(&[LC_A]);
    assert_eq!(
        fake.calls(),
        vec![(1, Call::Arm(ArmCondition::AnyBusy, PERIOD))]
    );
    // LC busy: every BE compute queue in one batch, then ALL_IDLE.
    fake.set_busy(A, true);
    d.on_wakeups(&[LC_A]);
    assert_eq!(
        fake.calls(),
        vec![
            (0, Call::Preempt(be_refs(), LEASE)),
            (1, Call::Arm(ArmCondition::AllIdle { idle: IDLE }, PERIOD)),
        ]
    );
    assert!(held(&d, LC_A));
    assert_eq!(d.decisions[&LC_A].policy.latency().count, 1);
    // Idle, but sooner than the hysteresis after the ARM: a stale
    // signal; BE stays off.
    fake.set_busy(A, false);
    d.on_wakeups(&[LC_A]);
    assert_eq!(
        fake.calls(),
        vec![(1, Call::Arm(ArmCondition::AllIdle { idle: IDLE }, PERIOD))]
    );
    // Idle for the hysteresis: resume, then ANY_BUSY.
    fake.s.borrow_mut().skew = Duration::from_millis(10);
    d.on_wakeups(&[LC_A]);
    assert_eq!(
        fake.calls(),
        vec![
            (0, Call::Resume(be_refs())),
            (1, Call::Arm(ArmCondition::AnyBusy, PERIOD))
        ]
    );
    assert!(!held(&d, LC_A));
    // The statistics: totals, and the one decision.
    d.write_stats(monotonic());
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&cfg.daemon.stats_path).unwrap()).unwrap();
    assert_eq!(v["version"], 1);
    assert_eq!(v["counters"]["preemptions"], 1);
    assert_eq!(v["counters"]["resumes"], 1);
    assert_eq!(v["tenants"][0]["class"], "inference");
    assert_eq!(v["tenants"][0]["priority"], "latency-critical");
    assert_eq!(v["tenants"][0]["queues"], 1);
    assert_eq!(v["tenants"][1]["class"], "training");
    assert_eq!(v["tenants"][1]["queues"], 2);
    assert_eq!(v["tenants"][1]["nodes"], serde_json::json!([A]));
    assert_eq!(v["decisions"][0]["gpu_id"], A);
    assert_eq!(v["decisions"][0]["level"], "latency-critical");
    assert_eq!(v["decisions"][0]["watched_queues"], 1);
    assert_eq!(v["decisions"][0]["lower_queues"], 2);
    assert_eq!(v["decisions"][0]["counters"]["preemptions"], 1);
    // Busy again, then SIGTERM: resume everything and disarm.
    fake.s.borrow_mut().skew = Duration::ZERO;
    fake.set_busy(A, true);
    d.on_wakeups(&[LC_A]);
    fake.calls();
    d.shutdown();
    assert_eq!(
        fake.calls(),
        vec![(0, Call::Resume(be_refs())), (1, Call::Disarm)]
    );
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&cfg.daemon.stats_path).unwrap()).unwrap();
    assert_eq!(v["counters"]["resumes"], 2);
    assert_eq!(v["lower_held"], false);
}

#[test]
fn be_exiting_while_held_is_detached_without_a_resume() {
    let (p, fake, cfg) = world("beexit");
    let mut d = daemon(&p, &fake, &cfg);
    d.scan();
    fake.set_busy(A, true);
    d.on_wakeups(&[LC_A]);
    fake.calls();
    fake.s.borrow_mut().processes.retain(|(pid, _)| *pid != BE);
    p.remove(BE);
    d.scan();
    assert_eq!(fake.main_calls(), vec![Call::Detach(handle(0, BE))]);
    assert!(!held(&d, LC_A));
    assert_eq!(d.decisions[&LC_A].policy.counters().resumes, 0);
}

#[test]
fn lc_exit_seen_in_a_sample_resumes_be_and_disarms() {
    let (p, fake, cfg) = world("lcexit");
    let mut d = daemon(&p, &fake, &cfg);
    d.scan();
    fake.set_busy(A, true);
    d.on_wakeups(&[LC_A]);
    fake.calls();
    fake.s.borrow_mut().exited.insert(LC);
    d.on_wakeups(&[LC_A]);
    assert_eq!(
        fake.calls(),
        vec![
            (0, Call::Detach(handle(0, LC))),
            (1, Call::Detach(handle(1, LC))),
            (0, Call::Resume(be_refs())),
        ]
    );
    // Its watcher file is closed (which disarms it).
    assert!(d.decisions[&LC_A].watcher.is_none());
    assert_eq!(d.decisions[&LC_A].policy.mode(), Mode::NoLc);
}

#[test]
fn a_tenant_that_execs_and_opens_the_device_again_between_listings_is_attached_again() {
    let (p, fake, cfg) = world("exec");
    let mut d = daemon(&p, &fake, &cfg);
    d.scan();
    assert!(d.tenants.contains_key(&BE));
    // The trainer execs a server: its KFD process ends with the old image
    // (QUERY fails), while the same pid, with the same start time, holds a
    // descriptor of a new KFD process by the next listing.
    fake.s.borrow_mut().exited.insert(BE);
    d.scan();
    assert!(!d.tenants.contains_key(&BE));
    fake.s.borrow_mut().exited.remove(&BE);
    p.add(
        BE,
        2,
        1000,
        "server",
        "/usr/bin/server",
        "/system.slice/infer.service",
        &[],
    );
    fake.calls();
    d.scan();
    assert!(fake.main_calls().contains(&Call::Attach(BE)));
    // Classified afresh: the image it exec'd is latency-critical.
    assert_eq!(d.tenants[&BE].class_name, "inference");
}

#[test]
fn new_be_queues_while_held_are_preempted_at_the_next_scan() {
    let (p, fake, cfg) = world("newq");
    let mut d = daemon(&p, &fake, &cfg);
    d.scan();
    fake.set_busy(A, true);
    d.on_wakeups(&[LC_A]);
    fake.calls();
    fake.s
        .borrow_mut()
        .queues
        .get_mut(&BE)
        .unwrap()
        .push((A, 3, QueueType::ComputeAql));
    d.scan();
    let mut all = be_refs();
    all.push(mq(BE, A, 3));
    assert_eq!(fake.main_calls(), vec![Call::Preempt(all, LEASE)]);
}

#[test]
fn new_be_queues_while_held_are_preempted_by_the_held_query_without_a_scan() {
    let (p, fake, cfg) = world("newq-held");
    let mut d = daemon(&p, &fake, &cfg);
    d.scan();
    let new_queue = |fake: &Fake| {
        fake.s
            .borrow_mut()
            .queues
            .get_mut(&BE)
            .unwrap()
            .push((A, 3, QueueType::ComputeAql));
    };
    // Nothing held: nothing asked, and the loop does not wake to ask.
    assert_eq!(d.held_pids().count(), 0);
    assert_eq!(d.held_scan_due(), None);
    fake.calls();
    fake.queried();
    new_queue(&fake);
    d.refresh_held();
    assert!(fake.queried().is_empty());
    assert!(fake.main_calls().is_empty());
    fake.set_busy(A, true);
    d.on_wakeups(&[LC_A]);
    assert!(d.held_scan_due().is_some());
    fake.calls();
    fake.queried();
    d.refresh_held();
    // Only the tenant below the decision is asked, not the one holding it.
    assert_eq!(fake.queried(), vec![BE]);
    // As at a scan: the decision's lower queues, the new one with them
    // (the module answers ALREADY for those it holds).
    let mut all = be_refs();
    all.push(mq(BE, A, 3));
    assert_eq!(fake.main_calls(), vec![Call::Preempt(all, LEASE)]);
}

#[test]
fn a_be_queue_made_again_while_lc_is_busy_is_taken_by_the_held_query() {
    let (p, fake, cfg) = world("remade-held");
    let mut d = daemon(&p, &fake, &cfg);
    d.scan();
    fake.set_busy(A, true);
    d.on_wakeups(&[LC_A]);
    assert!(held(&d, LC_A));
    // The trainer destroys its queues on the node (a stream ends): nothing
    // is held, but LC is still busy ...
    fake.s.borrow_mut().queues.insert(BE, Vec::new());
    d.refresh_held();
    assert!(d.tenants[&BE].queues.is_empty());
    assert!(!held(&d, LC_A));
    assert_eq!(d.held_pids().collect::<Vec<_>>(), vec![BE]);
    // ... and makes one again for its next stream, which the next query
    // finds although the trainer had no queue there at the last one. The
    // module kept its mark of id 0: OWNED, not SUSPENDED.
    {
        let mut s = fake.s.borrow_mut();
        s.queues.insert(BE, vec![(A, 0, QueueType::ComputeAql)]);
        s.remade.insert(mq(BE, A, 0));
    }
    fake.calls();
    fake.queried();
    d.refresh_held();
    assert_eq!(fake.queried(), vec![BE]);
    assert_eq!(
        fake.main_calls(),
        vec![Call::Preempt(vec![mq(BE, A, 0)], LEASE)]
    );
}

#[test]
fn lc_queues_refused_for_want_of_room_are_retried_when_a_watch_is_released() {
    let (p, fake, cfg) = world("nospc");
    fake.s.borrow_mut().watch_room = Some(1);
    fake.s
        .borrow_mut()
        .queues
        .get_mut(&LC)
        .unwrap()
        .push((A, 2, QueueType::ComputeAql));
    let mut d = daemon(&p, &fake, &cfg);
    d.scan();
    assert!(fake
        .calls()
        .contains(&(1, Call::Watch(vec![fq(1, LC, A, 0), fq(1, LC, A, 2)]))));
    // Refused once: not asked again while nothing is released.
    d.scan();
    assert!(!fake
        .calls()
        .iter()
        .any(|(_, c)| matches!(c, Call::Watch(_))));
    // The watched queue is destroyed: room again, the other one is
    // watched at the next scan.
    fake.s.borrow_mut().queues.get_mut(&LC).unwrap().remove(0);
    d.scan();
    d.scan();
    assert!(fake
        .calls()
        .contains(&(1, Call::Watch(vec![fq(1, LC, A, 2)]))));
    let w = d.decisions[&LC_A].watcher.as_ref().unwrap();
    assert_eq!(w.watched[&LC], vec![fq(1, LC, A, 2)]);
}

#[test]
fn an_lc_queue_the_module_cannot_pin_yet_is_asked_for_at_every_scan() {
    let (p, fake, cfg) = world("eagain");
    fake.s.borrow_mut().watch_again.insert(0);
    let mut d = daemon(&p, &fake, &cfg);
    d.scan();
    d.scan();
    let watches = |fake: &Fake| {
        fake.calls()
            .iter()
            .filter(|(_, c)| *c == Call::Watch(vec![fq(1, LC, A, 0)]))
            .count()
    };
    assert_eq!(watches(&fake), 2, "asked for again at the next scan");
    fake.s.borrow_mut().watch_again.clear();
    d.scan();
    assert_eq!(watches(&fake), 1);
    let w = d.decisions[&LC_A].watcher.as_ref().unwrap();
    assert_eq!(w.watched[&LC], vec![fq(1, LC, A, 0)]);
    assert!(w.unwatchable.is_empty());
    d.scan();
    assert_eq!(watches(&fake), 0, "watched: not asked for again");
}

#[test]
fn a_refused_attach_is_not_retried_until_the_pid_exits() {
    let (p, fake, cfg) = world("refused");
    fake.s.borrow_mut().refuse_attach.insert(BE);
    let mut d = daemon(&p, &fake, &cfg);
    d.scan();
    assert!(fake.calls().contains(&(0, Call::Attach(BE))));
    d.scan();
    assert!(!fake.calls().contains(&(0, Call::Attach(BE))));
    // LC busy with no BE attached: nothing to preempt.
    fake.set_busy(A, true);
    d.on_wakeups(&[LC_A]);
    assert!(!fake
        .calls()
        .iter()
        .any(|(_, c)| matches!(c, Call::Preempt(..))));
}

/// LC on node A only; BE on nodes A and B.
fn two_nodes(name: &str) -> (FakeProc, Fake, Config) {
    two_nodes_with(name, "")
}

/// [`two_nodes`] with `extra` configuration after `[daemon]`'s keys.
fn two_nodes_with(name: &str, extra: &str) -> (FakeProc, Fake, Config) {
    let (p, fake, cfg) = world_with(name, extra);
    fake.s
        .borrow_mut()
        .queues
        .get_mut(&BE)
        .unwrap()
        .push((B, 5, QueueType::ComputeAql));
    (p, fake, cfg)
}

#[test]
fn lc_work_on_one_node_preempts_be_on_that_node_only() {
    let (p, fake, cfg) = two_nodes("pernode");
    let mut d = daemon(&p, &fake, &cfg);
    d.scan();
    // No decision on node B: nothing of LC's is there.
    assert_eq!(d.decisions().collect::<Vec<_>>(), vec![LC_A]);
    fake.calls();
    fake.set_busy(A, true);
    d.on_wakeups(&[LC_A]);
    assert_eq!(fake.main_calls(), vec![Call::Preempt(be_refs(), LEASE)]);
    // Node B's queue is not held; the tenant is, in part.
    let s = d.stats(monotonic());
    let be = s.tenants.iter().find(|t| t.pid == BE).unwrap();
    assert_eq!((be.queues, be.held_queues), (3, 2));
    assert_eq!(be.nodes, vec![A, B]);
    // A busy node B alone (work of no watched level) changes nothing.
    fake.set_busy(B, true);
    assert!(d.stats(monotonic()).decisions.len() == 1);
}

#[test]
fn a_node_section_tunes_the_decisions_of_its_node_only() {
    // LC on both nodes; node B's decision waits 7 ms of idle time.
    let (p, fake, cfg) = two_nodes_with(
        "nodecfg",
        &format!("[[node]]\ngpu_id = {B}\nidle_hysteresis_us = 7000\n"),
    );
    add_second_server(&p, &fake, B, 9);
    let mut d = daemon(&p, &fake, &cfg);
    wake_both_nodes_busy(&mut d, &fake);
    let arms: Vec<(usize, Call)> = fake
        .calls()
        .into_iter()
        .filter(|(_, c)| matches!(c, Call::Arm(..)))
        .collect();
    assert_eq!(
        arms,
        vec![
            (1, Call::Arm(ArmCondition::AllIdle { idle: IDLE }, PERIOD)),
            (
                2,
                Call::Arm(
                    ArmCondition::AllIdle {
                        idle: Duration::from_millis(7)
                    },
                    PERIOD
                )
            ),
        ]
    );
}

/// Scans (a decision on each of nodes A and B), then both nodes' LC work
/// wakes the daemon at once; the calls made before are forgotten.
fn wake_both_nodes_busy(d: &mut Daemon<'_, Fake>, fake: &Fake) {
    d.scan();
    assert_eq!(d.decisions().collect::<Vec<_>>(), vec![LC_A, LC_B]);
    fake.calls();
    fake.set_busy(A, true);
    fake.set_busy(B, true);
    d.on_wakeups(&[LC_A, LC_B]);
}

/// A second latency-critical server (pid [`LC2`]) with one queue on
/// `gpu_id`.
fn add_second_server(p: &FakeProc, fake: &Fake, gpu_id: u32, queue_id: u32) {
    p.add(
        LC2,
        6,
        0,
        "server2",
        "/usr/bin/server",
        "/system.slice/infer.service",
        &[],
    );
    let mut s = fake.s.borrow_mut();
    s.processes.push((LC2, TargetKind::KfdFd));
    s.queues
        .insert(LC2, vec![(gpu_id, queue_id, QueueType::ComputeAql)]);
}

#[test]
fn decisions_busy_at_the_same_moment_share_one_preempt() {
    let (p, fake, cfg) = two_nodes("shared");
    add_second_server(&p, &fake, B, 0);
    let mut d = daemon(&p, &fake, &cfg);
    wake_both_nodes_busy(&mut d, &fake);
    let preempts: Vec<Call> = fake
        .main_calls()
        .into_iter()
        .filter(|c| matches!(c, Call::Preempt(..)))
        .collect();
    assert_eq!(
        preempts,
        vec![Call::Preempt(
            vec![mq(BE, A, 0), mq(BE, A, 1), mq(BE, B, 5)],
            LEASE
        )]
    );
    assert!(held(&d, LC_A) && held(&d, LC_B));
    assert_eq!(d.decisions[&LC_A].policy.counters().preemptions, 1);
    assert_eq!(d.decisions[&LC_B].policy.counters().preemptions, 1);
    // Node B goes idle for the hysteresis: only its queue comes back.
    fake.set_busy(B, false);
    fake.s.borrow_mut().skew = Duration::from_millis(10);
    d.on_wakeups(&[LC_B]);
    assert_eq!(fake.main_calls(), vec![Call::Resume(vec![mq(BE, B, 5)])]);
    assert!(held(&d, LC_A) && !held(&d, LC_B));
}

#[test]
fn a_decisions_resume_and_preemption_are_carried_out_in_its_order() {
    let (p, fake, cfg) = two_nodes("in-order");
    let mut d = daemon(&p, &fake, &cfg);
    d.scan();
    fake.calls();
    // What one wakeup gives a decision whose hint ended as another was
    // given: its queues must end up off.
    d.carry_out(vec![
        (
            LC_A,
            Action::ResumeLower {
                reason: ResumeReason::HintOver,
            },
        ),
        (
            LC_A,
            Action::PreemptLower {
                lease: LEASE,
                reason: PreemptReason::Hint,
            },
        ),
    ]);
    assert_eq!(
        fake.main_calls(),
        vec![Call::Resume(be_refs()), Call::Preempt(be_refs(), LEASE)]
    );
}

/// Three levels on node A: LC (top), MID, BE (lowest).
fn three_levels(name: &str) -> (FakeProc, Fake, Config) {
    let (p, fake, _) = world(name);
    p.add(MID, 5, 0, "tuner", "/usr/bin/tuner", "/mid.slice", &[]);
    {
        let mut s = fake.s.borrow_mut();
        s.processes.push((MID, TargetKind::KfdFd));
        s.queues.insert(MID, vec![(A, 0, QueueType::ComputeAql)]);
    }
    let stats = p.root.join("stats.json");
    let cfg = Config::parse(&format!(
        r#"
        [daemon]
        tenants = "kfd"
        idle_hysteresis_us = 2000
        stats_path = "{}"
        levels = ["batch", "tuning", "serving"]
        [[class]]
        name = "inference"
        priority = "serving"
        cgroup = "/system.slice/infer.service"
        [[class]]
        name = "tuner"
        priority = "tuning"
        cgroup = "/mid.slice"
        [[class]]
        name = "training"
        priority = "batch"
        env = "training"
        "#,
        stats.display()
    ))
    .unwrap();
    (p, fake, cfg)
}

#[test]
fn higher_levels_preempt_every_lower_level_and_resume_what_no_other_holds() {
    let (p, fake, cfg) = three_levels("levels");
    let mut d = daemon(&p, &fake, &cfg);
    d.scan();
    let (top, mid) = ((A, 2), (A, 1));
    assert_eq!(d.decisions().collect::<Vec<_>>(), vec![mid, top]);
    assert_eq!(d.decisions[&mid].lower, be_refs());
    let mut under_top = vec![mq(MID, A, 0)];
    under_top.extend(be_refs());
    under_top.sort_by_key(order);
    let mut lower_top = d.decisions[&top].lower.clone();
    lower_top.sort_by_key(order);
    assert_eq!(lower_top, under_top);
    fake.calls();
    // Both busy at once: one batch, each queue named once.
    fake.set_busy(A, true);
    d.on_wakeups(&[mid, top]);
    let calls = fake.main_calls();
    assert_eq!(calls.len(), 1, "{calls:?}");
    let Call::Preempt(refs, _) = &calls[0] else {
        panic!("{calls:?}")
    };
    let mut refs = refs.clone();
    refs.sort_by_key(order);
    assert_eq!(refs, under_top);
    // The top level's hold ends first: MID comes back, BE stays with
    // the middle level's hold.
    fake.s.borrow_mut().skew = Duration::from_millis(10);
    fake.set_busy(A, false);
    {
        // Only the top level's queue went idle: the middle level's
        // decision is not asked.
        d.on_wakeups(&[top]);
    }
    assert_eq!(fake.main_calls(), vec![Call::Resume(vec![mq(MID, A, 0)])]);
    assert!(held(&d, mid) && !held(&d, top));
    d.on_wakeups(&[mid]);
    assert_eq!(fake.main_calls(), vec![Call::Resume(be_refs())]);
}

#[test]
fn equal_levels_never_preempt_each_other() {
    let (p, fake, cfg) = world("equal");
    // A second LC tenant on node A: same level as LC.
    add_second_server(&p, &fake, A, 7);
    let mut d = daemon(&p, &fake, &cfg);
    d.scan();
    assert_eq!(d.decisions[&LC_A].lower, be_refs());
    assert_eq!(d.decisions[&LC_A].watched(), 2);
}

#[test]
fn the_loop_reacts_renews_and_stops_on_a_signal() {
    let (p, fake, cfg) = world("loop");
    {
        let mut s = fake.s.borrow_mut();
        s.signal_on_arm = true;
        s.busy.insert(A);
        s.writes = 1;
    }
    let mut d = daemon(&p, &fake, &cfg);
    let (stop_rx, mut stop_tx) = std::os::unix::net::UnixStream::pair().unwrap();
    // SIGTERM's stand-in: the byte the signal handler would write.
    let stopper = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(500));
        std::io::Write::write_all(&mut stop_tx, b"x").unwrap();
    });
    d.run(stop_rx.as_fd()).unwrap();
    stopper.join().unwrap();
    let calls = fake.main_calls();
    let preempts: Vec<_> = calls
        .iter()
        .filter(|c| matches!(c, Call::Preempt(..)))
        .collect();
    // The reaction, then renewals every 100 ms for 500 ms.
    assert!(preempts.len() >= 3, "{calls:?}");
    assert!(preempts
        .iter()
        .all(|c| **c == Call::Preempt(be_refs(), LEASE)));
    assert_eq!(calls[calls.len() - 1], Call::Resume(be_refs()));
    let counters = d.decisions[&LC_A].policy.counters();
    assert_eq!(counters.preemptions, 1);
    assert!(counters.renewals >= 2);
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&cfg.daemon.stats_path).unwrap()).unwrap();
    assert_eq!(v["version"], 1);
    assert_eq!(v["lower_held"], false);
    assert_eq!(v["counters"]["resumes"], 1);
}

#[test]
fn monotonic_moves_forward() {
    let a = monotonic();
    let b = monotonic();
    assert!(b >= a && a > Duration::ZERO);
}

#[test]
fn each_statistics_write_renews_the_metrics() {
    let (p, fake, cfg) = world("metrics");
    let sock = p.root.join("metrics.sock");
    let server =
        crate::metrics::MetricsServer::spawn(&crate::metrics::MetricsAddr::Unix(sock.clone()))
            .unwrap();
    let mut d = daemon(&p, &fake, &cfg);
    d.use_metrics(server);
    d.scan();
    fake.set_busy(A, true);
    d.on_wakeups(&[LC_A]);
    d.write_stats(monotonic());
    let mut c = std::os::unix::net::UnixStream::connect(&sock).unwrap();
    std::io::Write::write_all(&mut c, b"GET /metrics HTTP/1.0\r\n\r\n").unwrap();
    let mut body = String::new();
    std::io::Read::read_to_string(&mut c, &mut body).unwrap();
    assert!(
        body.starts_with("HTTP/1.0 200") || body.starts_with("HTTP/1.1 200"),
        "{body}"
    );
    assert!(
        body.contains(
            "kfd_preemptd_preemptions_total{gpu_id=\"4096\",level=\"latency-critical\"} 1\n"
        ),
        "{body}"
    );
}

/// `extra` best-effort trainers on nodes 0..`nodes`, one queue each, beside
/// the world's LC server on node A.
fn crowded(name: &str, extra: i32, nodes: u32) -> (FakeProc, Fake, Config) {
    let (p, fake, cfg) = world(name);
    for i in 0..extra {
        let pid = 100 + i;
        p.add(
            pid,
            u64::try_from(pid).unwrap(),
            1000,
            "trainer",
            "/usr/bin/python3",
            "/user.slice",
            &["KFD_PREEMPT_CLASS=training"],
        );
        let node = A + (i as u32 % nodes) * 0x100;
        let mut s = fake.s.borrow_mut();
        s.processes.push((pid, TargetKind::KfdFd));
        s.queues.insert(pid, vec![(node, 0, QueueType::ComputeAql)]);
    }
    (p, fake, cfg)
}

#[test]
fn a_reaction_costs_the_same_on_a_host_of_64_nodes_and_hundreds_of_tenants() {
    let calls_of_a_reaction = |extra: i32, nodes: u32| {
        let (p, fake, cfg) = crowded(&format!("scale{extra}"), extra, nodes);
        let mut d = daemon(&p, &fake, &cfg);
        d.scan();
        // Only node A has latency-critical work: one decision.
        assert_eq!(d.decisions().collect::<Vec<_>>(), vec![LC_A]);
        fake.calls();
        fake.set_busy(A, true);
        d.on_wakeups(&[LC_A]);
        let calls = fake.calls();
        let preempted: usize = calls
            .iter()
            .map(|(_, c)| match c {
                Call::Preempt(refs, _) => {
                    assert!(refs.iter().all(|q| q.gpu_id == A), "{refs:?}");
                    refs.len()
                }
                _ => 0,
            })
            .sum();
        (calls.len(), preempted)
    };
    let (small, small_preempted) = calls_of_a_reaction(0, 1);
    let (large, large_preempted) = calls_of_a_reaction(320, 64);
    // The same calls (one PREEMPT, one ARM); only node A's queues named:
    // the world's two and the 5 of the 320 trainers that landed on A.
    assert_eq!(small, large);
    assert_eq!(small_preempted, 2);
    assert_eq!(large_preempted, 2 + 5);
}

#[test]
fn a_be_queue_replaced_while_held_is_preempted_at_the_next_scan() {
    let (p, fake, cfg) = world("replaced");
    let mut d = daemon(&p, &fake, &cfg);
    d.scan();
    fake.set_busy(A, true);
    d.on_wakeups(&[LC_A]);
    fake.calls();
    // Queue 1 destroyed, queue 5 created: the count is unchanged.
    {
        let mut s = fake.s.borrow_mut();
        let qs = s.queues.get_mut(&BE).unwrap();
        qs.retain(|(_, id, _)| *id != 1);
        qs.push((A, 5, QueueType::ComputeAql));
    }
    d.scan();
    assert_eq!(
        fake.main_calls(),
        vec![Call::Preempt(vec![mq(BE, A, 0), mq(BE, A, 5)], LEASE)]
    );
}

#[test]
fn a_transient_watcher_attach_failure_is_retried_a_refusal_is_not() {
    assert!(!super::watcher::lasting(&kfd_preempt::Error::TargetExited));
    assert!(super::watcher::lasting(&kfd_preempt::Error::PtraceDenied {
        pid: 1,
        errno: Errno::PERM
    }));
}

/// A forked worker of BE (a DataLoader worker) that holds only BE's
/// inherited descriptor, as its parent's class.
const WORKER: i32 = 70;

fn fork_worker(p: &FakeProc, fake: &Fake, pid: i32, parent: i32) {
    p.add(
        pid,
        9,
        1000,
        "pt_data_worker",
        "/usr/bin/python3",
        "/user.slice",
        &["KFD_PREEMPT_CLASS=training"],
    );
    let mut s = fake.s.borrow_mut();
    s.processes.push((pid, TargetKind::KfdFd));
    s.inherited.insert(pid, parent);
}

fn exit_process(p: &FakeProc, fake: &Fake, pid: i32) {
    p.remove(pid);
    let mut s = fake.s.borrow_mut();
    s.processes.retain(|(x, _)| *x != pid);
    s.inherited.remove(&pid);
}

#[test]
fn a_forked_worker_is_no_tenant_and_its_exit_keeps_its_parent() {
    let (p, fake, cfg) = world("worker-exit");
    let mut d = daemon(&p, &fake, &cfg);
    d.scan();
    fork_worker(&p, &fake, WORKER, BE);
    d.scan();
    // The worker's ATTACH gave BE's handle: kept, and no tenant made of it.
    assert!(d.tenants.contains_key(&BE) && !d.tenants.contains_key(&WORKER));
    assert!(!fake.main_calls().contains(&Call::Detach(handle(0, BE))));
    exit_process(&p, &fake, WORKER);
    d.scan();
    assert!(!fake.main_calls().contains(&Call::Detach(handle(0, BE))));
    assert!(d.tenants.contains_key(&BE));
    // And BE is still preempted when LC has work.
    fake.set_busy(A, true);
    d.on_wakeups(&[LC_A]);
    assert_eq!(fake.main_calls(), vec![Call::Preempt(be_refs(), LEASE)]);
}

#[test]
fn a_worker_seen_before_its_parent_leaves_no_attachment() {
    let (p, fake, cfg) = world("worker-first");
    // BE is not listed (say it closed its own descriptor): only the worker
    // names its KFD process.
    fake.s.borrow_mut().processes.retain(|(x, _)| *x != BE);
    fork_worker(&p, &fake, WORKER, BE);
    let mut d = daemon(&p, &fake, &cfg);
    d.scan();
    assert!(!d.tenants.contains_key(&WORKER) && !d.tenants.contains_key(&BE));
    assert!(fake.main_calls().contains(&Call::Detach(handle(0, BE))));
}

#[test]
fn a_worker_that_opens_its_own_kfd_becomes_a_tenant() {
    let (p, fake, cfg) = world("worker-own");
    let mut d = daemon(&p, &fake, &cfg);
    d.scan();
    fork_worker(&p, &fake, WORKER, BE);
    d.scan();
    assert!(!d.tenants.contains_key(&WORKER));
    // It runs HIP itself now: a KFD process of its own, with a queue.
    {
        let mut s = fake.s.borrow_mut();
        s.inherited.remove(&WORKER);
        s.queues.insert(WORKER, vec![(A, 0, QueueType::ComputeAql)]);
    }
    d.inherited_recheck_at = Duration::ZERO;
    d.scan();
    assert!(d.tenants.contains_key(&WORKER) && d.tenants.contains_key(&BE));
    assert_eq!(d.tenants[&WORKER].queues, vec![mq(WORKER, A, 0)]);
}

#[test]
fn an_lc_queue_recreated_at_another_ring_is_watched_anew() {
    let (p, fake, cfg) = world("lc-ring");
    fake.s.borrow_mut().rings.insert((LC, A, 0), 0x1000);
    let mut d = daemon(&p, &fake, &cfg);
    d.scan();
    let watches = |calls: Vec<(usize, Call)>| -> Vec<Call> {
        calls
            .into_iter()
            .filter(|(f, c)| *f != 0 && matches!(c, Call::Watch(_)))
            .map(|(_, c)| c)
            .collect()
    };
    assert_eq!(
        watches(fake.calls()),
        vec![Call::Watch(vec![fq(1, LC, A, 0)])]
    );
    // Destroyed and created again: the same id, another ring.
    fake.s.borrow_mut().rings.insert((LC, A, 0), 0x9000);
    d.scan();
    assert_eq!(
        watches(fake.calls()),
        vec![Call::Watch(vec![fq(1, LC, A, 0)])]
    );
    assert_eq!(fake.s.borrow().watched[&1], vec![fq(1, LC, A, 0)]);
    // Nothing changed: nothing watched again.
    d.scan();
    assert!(watches(fake.calls()).is_empty());
}

#[test]
fn an_armed_file_whose_watches_changed_is_armed_again() {
    let (p, fake, cfg) = world("lc-rearm");
    fake.s.borrow_mut().rings.insert((LC, A, 0), 0x1000);
    let mut d = daemon(&p, &fake, &cfg);
    d.scan();
    let on_watcher = |calls: Vec<(usize, Call)>| -> Vec<Call> {
        calls
            .into_iter()
            .filter(|(f, c)| *f != 0 && matches!(c, Call::Watch(_) | Call::Arm(..)))
            .map(|(_, c)| c)
            .collect()
    };
    let first = on_watcher(fake.calls());
    assert!(matches!(
        first.last(),
        Some(Call::Arm(ArmCondition::AnyBusy, _))
    ));
    // The queue made again at another ring: the ARM of before samples
    // the old watch only, so the new one must be armed again.
    fake.s.borrow_mut().rings.insert((LC, A, 0), 0x9000);
    d.scan();
    let calls = on_watcher(fake.calls());
    assert!(
        matches!(
            calls.as_slice(),
            [Call::Watch(_), Call::Arm(ArmCondition::AnyBusy, _)]
        ),
        "{calls:?}"
    );
    // Nothing changed: no ARM again.
    d.scan();
    assert!(on_watcher(fake.calls()).is_empty());
}

#[test]
fn a_be_queue_recreated_at_the_same_ring_while_held_is_preempted() {
    let (p, fake, cfg) = world("be-same-ring");
    fake.s.borrow_mut().rings.insert((BE, A, 1), 0x1000);
    let mut d = daemon(&p, &fake, &cfg);
    d.scan();
    fake.set_busy(A, true);
    d.on_wakeups(&[LC_A]);
    fake.calls();
    // A scan while held that finds the queues as they were takes nothing.
    d.scan();
    assert_eq!(fake.main_calls(), vec![]);
    // Queue 1 destroyed and made again with its id and, the allocator
    // handing the same pages back, its ring address: the module keeps its
    // mark of the id (OWNED) and says the new queue is not suspended.
    fake.s.borrow_mut().remade.insert(mq(BE, A, 1));
    d.scan();
    assert_eq!(fake.main_calls(), vec![Call::Preempt(be_refs(), LEASE)]);
}

#[test]
fn a_be_queue_recreated_at_another_ring_while_held_is_preempted() {
    let (p, fake, cfg) = world("be-ring");
    fake.s.borrow_mut().rings.insert((BE, A, 1), 0x1000);
    let mut d = daemon(&p, &fake, &cfg);
    d.scan();
    fake.set_busy(A, true);
    d.on_wakeups(&[LC_A]);
    fake.calls();
    // Queue 1 destroyed and its id given to a new queue at another ring,
    // which runs: the hold must take it.
    fake.s.borrow_mut().rings.insert((BE, A, 1), 0x7000);
    d.scan();
    assert_eq!(fake.main_calls(), vec![Call::Preempt(be_refs(), LEASE)]);
}

mod hints;
