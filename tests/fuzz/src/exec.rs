// SPDX-License-Identifier: GPL-2.0

//! Runs a [`Program`]: each call becomes its system calls, with what earlier
//! calls made (files, handles, queues, eventfds, children) kept in a
//! [`Context`]. Errors are outcomes, not failures: the program goes on.

use std::{
    fs,
    os::fd::{FromRawFd, OwnedFd, RawFd},
    thread::JoinHandle,
};

use kfd_preempt::uapi::{self, *};

mod record;

use crate::{
    mem::Buf,
    program::{Call, Entry, Id, Knob, Program, Ptr, Target},
    repro::Rec,
};

/// The module's files.
const OWNER_DEV: &str = "/dev/kfd_preempt";
const TENANT_DEV: &str = "/dev/kfd_preempt_sim";
/// The simulated node's debugfs directory.
pub const SIM_DEBUGFS: &str = "/sys/kernel/debug/kfd_preempt/sim";
/// Simulated nodes whose knobs a program may set (the VM loads at least
/// this many).
pub const KNOB_NODES: u8 = 4;

/// A file descriptor that this context may close, or only use.
struct Fd {
    raw: RawFd,
    owned: bool,
}

impl Fd {
    fn owned(fd: OwnedFd) -> Self {
        Self {
            raw: std::os::fd::IntoRawFd::into_raw_fd(fd),
            owned: true,
        }
    }

    fn borrowed(&self) -> Self {
        Self {
            raw: self.raw,
            owned: false,
        }
    }

    fn close(self) {
        if self.owned {
            // SAFETY: This context opened (or inherited) the fd and closes
            // it once, here.
            drop(unsafe { OwnedFd::from_raw_fd(self.raw) });
        }
    }
}

/// A ring queue's memory: the packets and both indices, in the fuzzer's
/// address space, as a real tenant has them.
struct Ring {
    packets: Buf,
    read_index: Buf,
    write_index: Buf,
    count: u32,
    written: u64,
}

/// A queue some tenant made.
struct Queue {
    gpu_id: u32,
    queue_id: u32,
    ring: Option<Ring>,
}

/// A simulated process: its file and the queues it made.
struct Tenant {
    fd: Fd,
    queues: Vec<Queue>,
}

/// Counts of outcomes per call kind: (succeeded, failed).
pub type Outcomes = [(u64, u64); 25];

/// What one program (or one of its threads or children) has made.
pub struct Context {
    owners: Vec<Fd>,
    tenants: Vec<Tenant>,
    handles: Vec<u32>,
    /// (gpu_id, queue_id) of every queue made, in order.
    queues: Vec<(u32, u32)>,
    eventfds: Vec<Fd>,
    children: Vec<libc::pid_t>,
    threads: Vec<JoinHandle<()>>,
    /// A forked child or a thread: no forks, threads or hand-offs.
    nested: bool,
    read_only: u64,
    pub outcomes: Outcomes,
    /// The C of the calls run so far, when writing a reproducer.
    rec: Option<Rec>,
}

fn ioctl(fd: RawFd, op: u32, arg: u64) -> bool {
    // SAFETY: The kernel checks `arg` as a user pointer: any value is safe
    // to pass, and every buffer this module passes is alive for the call.
    unsafe { libc::ioctl(fd, libc::Ioctl::from(op), arg as usize as *mut libc::c_void) == 0 }
}

fn open(path: &str) -> Option<OwnedFd> {
    fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .ok()
        .map(OwnedFd::from)
}

/// The `n`-th (modulo the length) of `v`.
fn nth<T>(v: &[T], n: u8) -> Option<&T> {
    if v.is_empty() {
        None
    } else {
        v.get(n as usize % v.len())
    }
}

/// Writes a knob of the simulated node (errors ignored: a node may not
/// exist).
pub fn set_knob(node: u8, knob: Knob, value: u32) {
    let _ = fs::write(knob_path(node, knob), format!("{value}\n"));
}

/// The debugfs file of a simulated node's fault knob.
pub fn knob_path(node: u8, knob: Knob) -> String {
    match knob {
        Knob::FailUnmaps => format!("{SIM_DEBUGFS}/node{node}/fail_unmaps"),
        Knob::FailMaps => format!("{SIM_DEBUGFS}/node{node}/fail_maps"),
        Knob::DelayNextUs => format!("{SIM_DEBUGFS}/node{node}/delay_next_us"),
        Knob::FailNodeLists => format!("{SIM_DEBUGFS}/fail_node_lists"),
    }
}

/// The bytes of a QUERY or SAMPLE output array of `capacity` entries of
/// `entry_size` bytes (bounded: a larger claim ends at the guard page).
pub fn out_len(capacity: u32, entry_size: u32) -> usize {
    (capacity as usize).min(64) * (entry_size as usize).clamp(1, 256)
}

/// Sets every knob a program may have set back to zero.
pub fn reset_knobs() {
    for node in 0..KNOB_NODES {
        for knob in [Knob::FailUnmaps, Knob::FailMaps, Knob::DelayNextUs] {
            set_knob(node, knob, 0);
        }
    }
    set_knob(0, Knob::FailNodeLists, 0);
}

impl Context {
    /// An empty context for a program.
    pub fn new(read_only: u64) -> Self {
        Self {
            owners: Vec::new(),
            tenants: Vec::new(),
            handles: Vec::new(),
            queues: Vec::new(),
            eventfds: Vec::new(),
            children: Vec::new(),
            threads: Vec::new(),
            nested: false,
            read_only,
            outcomes: [(0, 0); 25],
            rec: None,
        }
    }

    /// Runs `p` like [`Context::run`], writing each call as C: the
    /// reproducer of [`crate::repro`].
    pub fn run_recorded(mut self, p: &Program) -> String {
        self.rec = Some(Rec::default());
        for c in &p.calls {
            self.call(c);
        }
        let rec = self.rec.take().unwrap_or_default();
        reset_knobs();
        self.finish();
        rec.finish()
    }

    /// A context for a thread: it uses this one's files, and closes only
    /// what it opens itself.
    fn for_thread(&self) -> Self {
        Self {
            owners: self.owners.iter().map(Fd::borrowed).collect(),
            tenants: self
                .tenants
                .iter()
                .map(|t| Tenant {
                    fd: t.fd.borrowed(),
                    queues: t
                        .queues
                        .iter()
                        .map(|q| Queue {
                            gpu_id: q.gpu_id,
                            queue_id: q.queue_id,
                            ring: None,
                        })
                        .collect(),
                })
                .collect(),
            handles: self.handles.clone(),
            queues: self.queues.clone(),
            eventfds: self.eventfds.iter().map(Fd::borrowed).collect(),
            children: Vec::new(),
            threads: Vec::new(),
            nested: true,
            read_only: self.read_only,
            outcomes: [(0, 0); 25],
            rec: None,
        }
    }

    /// Runs every call of `p`, then closes everything as
    /// [`Context::finish`] does, calling `owners_closed` once the owners
    /// are closed and before the tenants are: the moment to check that
    /// nothing stays suspended that no open owner holds.
    pub fn run_checked(mut self, p: &Program, owners_closed: impl FnOnce()) -> Outcomes {
        for c in &p.calls {
            self.call(c);
        }
        // Release is judged without faults (a fault during release is not
        // a leak of the module's).
        reset_knobs();
        self.close_owners();
        owners_closed();
        self.finish()
    }

    /// Joins the threads, kills and reaps the children, and closes the
    /// eventfds and owner files this context owns.
    fn close_owners(&mut self) {
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
        self.kill_children();
        for e in self.eventfds.drain(..) {
            e.close();
        }
        for o in self.owners.drain(..) {
            o.close();
        }
    }

    /// [`Context::close_owners`], then closes the tenants: what a process
    /// exiting does, in a fixed order.
    pub fn finish(mut self) -> Outcomes {
        self.close_owners();
        for t in self.tenants.drain(..) {
            t.fd.close();
        }
        self.outcomes
    }

    fn kill_children(&mut self) {
        for pid in self.children.drain(..) {
            // SAFETY: Plain system calls on a child of this process.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
                libc::waitpid(pid, std::ptr::null_mut(), 0);
            }
        }
    }

    fn owner(&self, n: u8) -> RawFd {
        nth(&self.owners, n).map_or(-1, |f| f.raw)
    }

    fn handle(&self, id: Id) -> u32 {
        match id {
            Id::Made(n) => nth(&self.handles, n).copied().unwrap_or(0),
            Id::Raw(v) => v,
        }
    }

    fn queue(&self, id: Id) -> (u32, u32) {
        match id {
            Id::Made(n) => nth(&self.queues, n).copied().unwrap_or((0, 0)),
            Id::Raw(v) => (0, v),
        }
    }

    fn gpu_id(&self, id: Id) -> u32 {
        match id {
            Id::Made(n) => nth(&self.queues, n).map_or(0, |q| q.0),
            Id::Raw(v) => v,
        }
    }

    fn target_fd(&self, t: Target) -> RawFd {
        match t {
            Target::Tenant(n) => nth(&self.tenants, n).map_or(-1, |t| t.fd.raw),
            Target::OwnerFd(n) => self.owner(n),
            Target::EventFd(n) => nth(&self.eventfds, n).map_or(-1, |f| f.raw),
            Target::RawFd(fd) => fd,
            Target::OwnPid | Target::ChildPid(_) | Target::RawPid(_) => -1,
        }
    }

    /// The `struct kfdp_queue_ref` `e` names now: a queue made takes its own
    /// gpu_id unless the queue or the gpu_id is raw.
    fn queue_ref(&self, e: &Entry) -> kfdp_queue_ref {
        let (mut gpu_id, queue_id) = self.queue(e.queue);
        if let (Id::Raw(_), _) | (_, Id::Raw(_)) = (e.queue, e.gpu_id) {
            gpu_id = self.gpu_id(e.gpu_id);
        }
        kfdp_queue_ref {
            handle: self.handle(e.handle),
            gpu_id,
            queue_id,
            status: e.status,
        }
    }

    /// A `struct kfdp_queue_ref` array of `entries` (with entries of `size`
    /// bytes, clamped to what a buffer holds), its address as `ptr` names
    /// it, and the count to pass.
    fn ref_array(
        &self,
        entries: &[Entry],
        extra: u32,
        size: u32,
        ptr: Ptr,
    ) -> Option<(Buf, u64, u32)> {
        let count = (entries.len() as u32).wrapping_add(extra);
        let stride = size.clamp(16, 64) as usize;
        let buf = Buf::new(entries.len() * stride)?;
        for (i, e) in entries.iter().enumerate() {
            buf.write(i * stride, self.queue_ref(e));
        }
        let p = buf.user_ptr(ptr, self.read_only);
        Some((buf, p, count))
    }

    /// Runs one call.
    pub fn call(&mut self, c: &Call) {
        let recording = self.rec.take().map(|mut r| {
            let p = self.record_before(&mut r, c);
            (r, p)
        });
        let before = (self.owners.len(), self.queues.len(), self.handles.len());
        let ok = self.dispatch(c);
        if let Some((mut r, p)) = recording {
            self.record_after(&mut r, p, before);
            self.rec = Some(r);
        }
        let slot = &mut self.outcomes[crate::generate::kind_of(c) as usize];
        if ok {
            slot.0 += 1;
        } else {
            slot.1 += 1;
        }
    }

    fn dispatch(&mut self, c: &Call) -> bool {
        match c {
            Call::OpenOwner => match open(OWNER_DEV) {
                Some(fd) => {
                    self.owners.push(Fd::owned(fd));
                    true
                }
                None => false,
            },
            Call::CloseOwner { owner } => {
                if self.owners.is_empty() {
                    return false;
                }
                let i = *owner as usize % self.owners.len();
                self.owners.remove(i).close();
                true
            }
            Call::OpenTenant => match open(TENANT_DEV) {
                Some(fd) => {
                    self.tenants.push(Tenant {
                        fd: Fd::owned(fd),
                        queues: Vec::new(),
                    });
                    true
                }
                None => false,
            },
            Call::CloseTenant { tenant } => {
                if self.tenants.is_empty() {
                    return false;
                }
                let i = *tenant as usize % self.tenants.len();
                self.tenants.remove(i).fd.close();
                true
            }
            Call::CreateQueue {
                tenant,
                node,
                queue_type,
                priority,
                reserved,
            } => self.create_queue(*tenant, *node, *queue_type, *priority, *reserved),
            Call::CreateRing {
                tenant,
                node,
                priority,
                packets,
                ring,
                read_index,
                write_index,
            } => self.create_ring(
                *tenant,
                *node,
                *priority,
                *packets,
                [*ring, *read_index, *write_index],
            ),
            Call::DestroyQueue { tenant, queue } => {
                let fd = nth(&self.tenants, *tenant).map_or(-1, |t| t.fd.raw);
                let mut a = kfdp_sim_queue_destroy {
                    queue_id: self.queue(*queue).1,
                    reserved: 0,
                };
                ioctl(fd, uapi::SIM_IOC_DESTROY_QUEUE, &mut a as *mut _ as u64)
            }
            Call::Doorbell {
                tenant,
                queue,
                dispatches,
                work_us,
            } => self.doorbell(*tenant, *queue, *dispatches, *work_us),
            Call::QueueStatus { tenant, queue } => {
                let fd = nth(&self.tenants, *tenant).map_or(-1, |t| t.fd.raw);
                let mut a = kfdp_sim_queue_status {
                    queue_id: self.queue(*queue).1,
                    ..Default::default()
                };
                ioctl(fd, uapi::SIM_IOC_QUEUE_STATUS, &mut a as *mut _ as u64)
            }
            Call::Info { owner, ptr } => {
                let Some(buf) = Buf::new(std::mem::size_of::<kfdp_info>()) else {
                    return false;
                };
                let p = buf.user_ptr(*ptr, self.read_only);
                ioctl(self.owner(*owner), uapi::IOC_INFO, p)
            }
            Call::Attach {
                owner,
                target,
                kind,
                flags,
                reserved,
            } => self.attach(*owner, *target, *kind, *flags, *reserved),
            Call::Detach {
                owner,
                handle,
                flags,
            } => {
                let mut a = kfdp_detach {
                    handle: self.handle(*handle),
                    flags: *flags,
                    reserved: 0,
                };
                ioctl(
                    self.owner(*owner),
                    uapi::IOC_DETACH,
                    &mut a as *mut _ as u64,
                )
            }
            Call::Query {
                owner,
                handle,
                gpu_id,
                capacity,
                entry_size,
                ptr,
            } => {
                let n = out_len(*capacity, *entry_size);
                let Some(buf) = Buf::new(n) else {
                    return false;
                };
                let mut a = kfdp_query {
                    handle: self.handle(*handle),
                    gpu_id: self.gpu_id(*gpu_id),
                    entries_ptr: buf.user_ptr(*ptr, self.read_only),
                    entry_size: *entry_size,
                    capacity: *capacity,
                    ..Default::default()
                };
                ioctl(self.owner(*owner), uapi::IOC_QUERY, &mut a as *mut _ as u64)
            }
            Call::Batch {
                owner,
                resume,
                entries,
                extra_count,
                entry_size,
                flags,
                lease_ms,
                ptr,
                reserved,
            } => {
                let Some((_buf, p, count)) =
                    self.ref_array(entries, *extra_count, *entry_size, *ptr)
                else {
                    return false;
                };
                let mut a = kfdp_batch {
                    entries_ptr: p,
                    num_entries: count,
                    entry_size: *entry_size,
                    flags: *flags,
                    ..Default::default()
                };
                a.lease_ms = *lease_ms;
                a.reserved[0] = *reserved;
                let op = if *resume {
                    uapi::IOC_RESUME
                } else {
                    uapi::IOC_PREEMPT
                };
                ioctl(self.owner(*owner), op, &mut a as *mut _ as u64)
            }
            Call::Freeze {
                owner,
                thaw,
                handle,
                gpu_id,
                flags,
            } => {
                let mut a = kfdp_freeze {
                    handle: self.handle(*handle),
                    gpu_id: self.gpu_id(*gpu_id),
                    flags: *flags,
                    ..Default::default()
                };
                let op = if *thaw {
                    uapi::IOC_THAW
                } else {
                    uapi::IOC_FREEZE
                };
                ioctl(self.owner(*owner), op, &mut a as *mut _ as u64)
            }
            Call::Watch {
                owner,
                unwatch,
                entries,
                extra_count,
                entry_size,
                flags,
                ptr,
            } => {
                let Some((_buf, p, count)) =
                    self.ref_array(entries, *extra_count, *entry_size, *ptr)
                else {
                    return false;
                };
                let mut a = kfdp_watch {
                    entries_ptr: p,
                    num_entries: count,
                    entry_size: *entry_size,
                    flags: *flags,
                    ..Default::default()
                };
                let op = if *unwatch {
                    uapi::IOC_UNWATCH
                } else {
                    uapi::IOC_WATCH
                };
                ioctl(self.owner(*owner), op, &mut a as *mut _ as u64)
            }
            Call::Sample {
                owner,
                capacity,
                entry_size,
                ptr,
            } => {
                let n = out_len(*capacity, *entry_size);
                let Some(buf) = Buf::new(n) else {
                    return false;
                };
                let mut a = kfdp_sample {
                    entries_ptr: buf.user_ptr(*ptr, self.read_only),
                    entry_size: *entry_size,
                    capacity: *capacity,
                    ..Default::default()
                };
                ioctl(
                    self.owner(*owner),
                    uapi::IOC_SAMPLE,
                    &mut a as *mut _ as u64,
                )
            }
            Call::MakeEventFd => {
                // SAFETY: eventfd(2) with valid flags.
                let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
                if fd < 0 {
                    return false;
                }
                // SAFETY: `fd` was just returned to this process.
                self.eventfds
                    .push(Fd::owned(unsafe { OwnedFd::from_raw_fd(fd) }));
                true
            }
            Call::Arm {
                owner,
                condition,
                eventfd,
                period_us,
                idle_us,
                reserved,
            } => {
                let mut a = kfdp_arm {
                    condition: *condition,
                    eventfd: self.target_fd(*eventfd),
                    period_us: *period_us,
                    idle_us: *idle_us,
                    reserved: [*reserved, 0],
                };
                ioctl(self.owner(*owner), uapi::IOC_ARM, &mut a as *mut _ as u64)
            }
            Call::SetKnob { node, knob, value } => {
                set_knob(*node % KNOB_NODES, *knob, *value);
                true
            }
            Call::Sleep { us } => {
                std::thread::sleep(std::time::Duration::from_micros(u64::from(*us)));
                true
            }
            Call::HandOff { tenant } => self.hand_off(*tenant),
            Call::Fork { calls } => self.fork(calls),
            Call::Thread { calls } => {
                if self.nested {
                    return false;
                }
                let ctx = self.for_thread();
                let calls = calls.clone();
                match std::thread::Builder::new().spawn(move || {
                    let mut ctx = ctx;
                    for c in &calls {
                        ctx.call(c);
                    }
                    ctx.finish();
                }) {
                    Ok(t) => {
                        self.threads.push(t);
                        true
                    }
                    Err(_) => false,
                }
            }
            Call::KillChildren => {
                self.kill_children();
                true
            }
        }
    }

    fn create_queue(
        &mut self,
        tenant: u8,
        node: u32,
        queue_type: u32,
        priority: u32,
        reserved: u32,
    ) -> bool {
        if self.tenants.is_empty() {
            return false;
        }
        let i = tenant as usize % self.tenants.len();
        let mut a = kfdp_sim_queue_create {
            node,
            queue_type,
            priority,
            reserved0: reserved,
            ..Default::default()
        };
        if !ioctl(
            self.tenants[i].fd.raw,
            uapi::SIM_IOC_CREATE_QUEUE,
            &mut a as *mut _ as u64,
        ) {
            return false;
        }
        self.tenants[i].queues.push(Queue {
            gpu_id: a.gpu_id,
            queue_id: a.queue_id,
            ring: None,
        });
        self.queues.push((a.gpu_id, a.queue_id));
        true
    }

    fn create_ring(
        &mut self,
        tenant: u8,
        node: u32,
        priority: u32,
        count: u32,
        ptrs: [Ptr; 3],
    ) -> bool {
        if self.tenants.is_empty() {
            return false;
        }
        let i = tenant as usize % self.tenants.len();
        let pkt = std::mem::size_of::<kfdp_sim_packet>();
        let (Some(packets), Some(read_index), Some(write_index)) = (
            Buf::aligned((count as usize).min(4096) * pkt, 64),
            Buf::new(8),
            Buf::new(8),
        ) else {
            return false;
        };
        let mut a = kfdp_sim_ring_create {
            node,
            priority,
            ring_address: packets.user_ptr(ptrs[0], self.read_only),
            read_index_address: read_index.user_ptr(ptrs[1], self.read_only),
            write_index_address: write_index.user_ptr(ptrs[2], self.read_only),
            ring_packets: count,
            ..Default::default()
        };
        if !ioctl(
            self.tenants[i].fd.raw,
            uapi::SIM_IOC_CREATE_RING,
            &mut a as *mut _ as u64,
        ) {
            return false;
        }
        let good = ptrs.iter().all(|p| *p == Ptr::Good);
        self.tenants[i].queues.push(Queue {
            gpu_id: a.gpu_id,
            queue_id: a.queue_id,
            ring: good.then_some(Ring {
                packets,
                read_index,
                write_index,
                count: count.min(4096),
                written: 0,
            }),
        });
        self.queues.push((a.gpu_id, a.queue_id));
        true
    }

    fn doorbell(&mut self, tenant: u8, queue: Id, dispatches: u8, work_us: u16) -> bool {
        if self.tenants.is_empty() {
            return false;
        }
        let ti = tenant as usize % self.tenants.len();
        let t = &mut self.tenants[ti];
        let qi = match queue {
            Id::Made(n) if !t.queues.is_empty() => n as usize % t.queues.len(),
            _ => usize::MAX,
        };
        let queue_id = match (t.queues.get_mut(qi), queue) {
            (Some(q), _) => {
                if let Some(r) = q.ring.as_mut() {
                    let pkt = std::mem::size_of::<kfdp_sim_packet>();
                    let done: u64 = r.read_index.read(0);
                    for _ in 0..dispatches {
                        // A tenant never overruns its ring.
                        // (A read index past the write index, which only
                        // a broken node writes, stops the feeding.)
                        let pending = r.written.checked_sub(done).unwrap_or(u64::MAX);
                        if pending >= u64::from(r.count) {
                            break;
                        }
                        let slot = (r.written % u64::from(r.count)) as usize;
                        let p = kfdp_sim_packet {
                            header: KFDP_SIM_PKT_DISPATCH,
                            work_ns: u64::from(work_us) * 1000,
                            tag: r.written,
                            ..Default::default()
                        };
                        r.packets.write(slot * pkt, p);
                        r.written += 1;
                    }
                    let w = r.written;
                    r.write_index.write(0, w);
                }
                q.queue_id
            }
            (None, Id::Raw(v)) => v,
            (None, Id::Made(_)) => 0,
        };
        let mut a = kfdp_sim_doorbell {
            queue_id,
            reserved: 0,
        };
        ioctl(t.fd.raw, uapi::SIM_IOC_DOORBELL, &mut a as *mut _ as u64)
    }

    fn attach(&mut self, owner: u8, target: Target, kind: Option<u32>, flags: u32, r: u64) -> bool {
        let (k, fd, pid) = match target {
            // SAFETY: getpid(2) has no preconditions.
            Target::OwnPid => (KFDP_TARGET_PID, -1, unsafe { libc::getpid() }),
            Target::ChildPid(n) => (
                KFDP_TARGET_PID,
                -1,
                nth(&self.children, n).copied().unwrap_or(0),
            ),
            Target::RawPid(p) => (KFDP_TARGET_PID, -1, p),
            t => (KFDP_TARGET_SIM_FD, self.target_fd(t), 0),
        };
        let mut a = kfdp_attach {
            kind: kind.unwrap_or(k),
            fd,
            pid,
            flags,
            reserved1: r,
            ..Default::default()
        };
        if !ioctl(self.owner(owner), uapi::IOC_ATTACH, &mut a as *mut _ as u64) {
            return false;
        }
        if !self.handles.contains(&a.handle) {
            self.handles.push(a.handle);
        }
        true
    }

    /// Forks a child that keeps only the tenant's file open, until killed
    /// (or until the fuzzer dies).
    fn hand_off(&mut self, tenant: u8) -> bool {
        if self.nested || self.tenants.is_empty() {
            return false;
        }
        self.join_threads();
        let i = tenant as usize % self.tenants.len();
        let keep = self.tenants[i].fd.raw;
        let others: Vec<RawFd> = self
            .owners
            .iter()
            .chain(self.eventfds.iter())
            .map(|f| f.raw)
            .chain(self.tenants.iter().map(|t| t.fd.raw))
            .filter(|&fd| fd != keep)
            .collect();
        // SAFETY: No other thread runs (joined above), so the child may do
        // anything; it only closes the other files of the program and
        // sleeps until SIGKILL.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            // SAFETY: Plain system calls in the child, on its own copies.
            unsafe {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                for fd in others {
                    libc::close(fd);
                }
                loop {
                    libc::pause();
                }
            }
        }
        if pid < 0 {
            return false;
        }
        self.children.push(pid);
        let t = self.tenants.remove(i);
        t.fd.close();
        // Its queues stay in `queues`: the owner may still name them.
        drop(t.queues);
        true
    }

    /// Runs `calls` in a forked child, which then exits; the parent goes on
    /// at once (the child is reaped at the end of the program).
    fn fork(&mut self, calls: &[Call]) -> bool {
        if self.nested {
            return false;
        }
        self.join_threads();
        // SAFETY: No other thread runs (joined above).
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            // SAFETY: prctl(2) with valid arguments, in the child.
            unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) };
            self.nested = true;
            self.children.clear();
            // A panic must not unwind out of fork() into a second copy of
            // the fuzzer.
            let ok = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                for c in calls {
                    self.call(c);
                }
            }))
            .is_ok();
            // SAFETY: The child ends here without running the parent's
            // destructors or atexit handlers; the kernel closes its files.
            unsafe { libc::_exit(if ok { 0 } else { 1 }) };
        }
        if pid < 0 {
            return false;
        }
        self.children.push(pid);
        true
    }

    fn join_threads(&mut self) {
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}
