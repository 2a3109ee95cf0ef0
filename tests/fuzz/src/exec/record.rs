// SPDX-License-Identifier: GPL-2.0

//! The C of each call, for [`crate::repro`]: written before the call runs,
//! from the same resolution of slots the call makes, and the values it
//! returned named after it ran.

use super::{knob_path, nth, out_len, Context, KNOB_NODES, OWNER_DEV, TENANT_DEV};
use crate::{
    program::{Call, Entry, Id, Ptr, Target},
    repro::{Kind, Rec},
};

/// What the C before a call left to name once it ran.
pub(super) enum Pending {
    Nothing,
    Owner(String),
    Tenant(String),
    EventFd(String),
    /// A queue's create struct (and its ring variable, for a ring).
    Queue(String, Option<String>),
    /// ATTACH's struct.
    Handle(String),
    /// A child the C forked, as `kids[N]`.
    Kid(usize),
}

impl Context {
    fn fd_c(&self, rec: &Rec, raw: i32) -> String {
        rec.v(Kind::Fd, raw as u32 as u64)
    }

    fn owner_c(&self, rec: &Rec, n: u8) -> String {
        self.fd_c(rec, self.owner(n))
    }

    fn tenant_c(&self, rec: &Rec, n: u8) -> String {
        self.fd_c(rec, nth(&self.tenants, n).map_or(-1, |t| t.fd.raw))
    }

    fn handle_c(&self, rec: &Rec, id: Id) -> String {
        rec.v(Kind::Handle, u64::from(self.handle(id)))
    }

    fn gpu_c(&self, rec: &Rec, id: Id) -> String {
        rec.v(Kind::Gpu, u64::from(self.gpu_id(id)))
    }

    fn queue_c(&self, rec: &Rec, id: Id) -> String {
        rec.v(Kind::Queue, u64::from(self.queue(id).1))
    }

    /// Fills a `struct kfdp_queue_ref` array as [`Context::ref_array`]
    /// does; returns (buffer, pointer, count) as C.
    fn refs_c(
        &self,
        rec: &mut Rec,
        entries: &[Entry],
        extra: u32,
        size: u32,
        ptr: Ptr,
    ) -> (String, String) {
        let count = (entries.len() as u32).wrapping_add(extra);
        let stride = size.clamp(16, 64) as usize;
        let b = rec.buf(entries.len() * stride);
        for (i, e) in entries.iter().enumerate() {
            let r = self.queue_ref(e);
            rec.line(&format!(
                "put_ref({b}, {i}, {stride}, {}, {}, {}, {});",
                rec.v(Kind::Handle, u64::from(r.handle)),
                rec.v(Kind::Gpu, u64::from(r.gpu_id)),
                rec.v(Kind::Queue, u64::from(r.queue_id)),
                r.status
            ));
        }
        (rec.ptr(&b, ptr), format!("{count:#x}"))
    }

    /// Writes the C of `c`, before it runs.
    pub(super) fn record_before(&self, rec: &mut Rec, c: &Call) -> Pending {
        match c {
            Call::OpenOwner => {
                let o = rec.bind(Kind::Fd, u64::MAX, "o");
                rec.line(&format!(
                    "int {o} = done(__LINE__, \"open {OWNER_DEV}\", open(\"{OWNER_DEV}\", O_RDWR));\n(void){o};"
                ));
                return Pending::Owner(o);
            }
            Call::CloseOwner { owner } => {
                let o = self.owner_c(rec, *owner);
                if !self.owners.is_empty() {
                    rec.line(&format!("close({o});"));
                }
            }
            Call::OpenTenant => {
                let t = rec.bind(Kind::Fd, u64::MAX, "t");
                rec.line(&format!(
                    "int {t} = done(__LINE__, \"open {TENANT_DEV}\", open(\"{TENANT_DEV}\", O_RDWR));\n(void){t};"
                ));
                return Pending::Tenant(t);
            }
            Call::CloseTenant { tenant } => {
                let t = self.tenant_c(rec, *tenant);
                if !self.tenants.is_empty() {
                    rec.line(&format!("close({t});"));
                }
            }
            Call::CreateQueue {
                tenant,
                node,
                queue_type,
                priority,
                reserved,
            } => {
                let t = self.tenant_c(rec, *tenant);
                let (a, _) = rec.ioctl(
                    &t,
                    "KFDP_SIM_IOC_CREATE_QUEUE",
                    "kfdp_sim_queue_create",
                    &[
                        ("node", format!("{node}")),
                        ("queue_type", format!("{queue_type}")),
                        ("priority", format!("{priority}")),
                        ("reserved0", format!("{reserved}")),
                    ],
                );
                return Pending::Queue(a, None);
            }
            Call::CreateRing {
                tenant,
                node,
                priority,
                packets,
                ring,
                read_index,
                write_index,
            } => {
                let t = self.tenant_c(rec, *tenant);
                let n = (*packets as usize).min(4096);
                let (bp, br, bw) = (rec.buf(n * 64), rec.buf(8), rec.buf(8));
                let (pp, pr, pw) = (
                    rec.ptr(&bp, *ring),
                    rec.ptr(&br, *read_index),
                    rec.ptr(&bw, *write_index),
                );
                let (a, _) = rec.ioctl(
                    &t,
                    "KFDP_SIM_IOC_CREATE_RING",
                    "kfdp_sim_ring_create",
                    &[
                        ("node", format!("{node}")),
                        ("priority", format!("{priority}")),
                        ("ring_address", pp),
                        ("read_index_address", pr),
                        ("write_index_address", pw),
                        ("ring_packets", format!("{packets}")),
                    ],
                );
                let good = [ring, read_index, write_index]
                    .iter()
                    .all(|p| **p == Ptr::Good);
                let r = good.then(|| {
                    let r = format!("ring_{a}");
                    rec.line(&format!(
                        "struct ring {r} = {{ {bp}, (volatile __u64 *){br}, (volatile __u64 *){bw}, {n}, 0 }};\n(void){r};"
                    ));
                    r
                });
                return Pending::Queue(a, r);
            }
            Call::DestroyQueue { tenant, queue } => {
                let (t, q) = (self.tenant_c(rec, *tenant), self.queue_c(rec, *queue));
                rec.ioctl(
                    &t,
                    "KFDP_SIM_IOC_DESTROY_QUEUE",
                    "kfdp_sim_queue_destroy",
                    &[("queue_id", q)],
                );
            }
            Call::Doorbell {
                tenant,
                queue,
                dispatches,
                work_us,
            } => {
                let t = self.tenant_c(rec, *tenant);
                let tq = nth(&self.tenants, *tenant).and_then(|t| match *queue {
                    Id::Made(n) => nth(&t.queues, n),
                    Id::Raw(_) => None,
                });
                let q = match (tq, *queue) {
                    (Some(q), _) => rec.v(Kind::Queue, u64::from(q.queue_id)),
                    (None, Id::Raw(v)) => format!("{v:#x}"),
                    (None, Id::Made(_)) => "0".into(),
                };
                if let Some(r) = tq
                    .filter(|q| q.ring.is_some())
                    .and_then(|q| rec.rings.get(&q.queue_id).cloned())
                {
                    rec.line(&format!(
                        "ring_write(&{r}, {dispatches}, {}ULL);",
                        u64::from(*work_us) * 1000
                    ));
                }
                rec.ioctl(
                    &t,
                    "KFDP_SIM_IOC_DOORBELL",
                    "kfdp_sim_doorbell",
                    &[("queue_id", q)],
                );
            }
            Call::QueueStatus { tenant, queue } => {
                let (t, q) = (self.tenant_c(rec, *tenant), self.queue_c(rec, *queue));
                rec.ioctl(
                    &t,
                    "KFDP_SIM_IOC_QUEUE_STATUS",
                    "kfdp_sim_queue_status",
                    &[("queue_id", q)],
                );
            }
            Call::Info { owner, ptr } => {
                let o = self.owner_c(rec, *owner);
                let b = rec.buf(std::mem::size_of::<kfd_preempt::uapi::kfdp_info>());
                let p = rec.ptr(&b, *ptr);
                rec.line(&format!(
                    "done(__LINE__, \"KFDP_IOC_INFO\", ioctl({o}, KFDP_IOC_INFO, (void *)(unsigned long){p}));"
                ));
            }
            Call::Attach {
                owner,
                target,
                kind,
                flags,
                reserved,
            } => {
                let o = self.owner_c(rec, *owner);
                let (k, fd, pid) = match *target {
                    Target::OwnPid => (
                        "KFDP_TARGET_PID".to_string(),
                        "-1".into(),
                        "getpid()".into(),
                    ),
                    Target::ChildPid(n) => (
                        "KFDP_TARGET_PID".into(),
                        "-1".into(),
                        rec.v(
                            Kind::Pid,
                            nth(&self.children, n).copied().unwrap_or(0) as u64,
                        ),
                    ),
                    Target::RawPid(p) => ("KFDP_TARGET_PID".into(), "-1".into(), format!("{p}")),
                    t => (
                        "KFDP_TARGET_SIM_FD".into(),
                        self.fd_c(rec, self.target_fd(t)),
                        "0".into(),
                    ),
                };
                let (a, _) = rec.ioctl(
                    &o,
                    "KFDP_IOC_ATTACH",
                    "kfdp_attach",
                    &[
                        ("kind", kind.map_or(k, |k| format!("{k:#x}"))),
                        ("fd", fd),
                        ("pid", pid),
                        ("flags", format!("{flags:#x}")),
                        ("reserved1", format!("{reserved:#x}")),
                    ],
                );
                return Pending::Handle(a);
            }
            Call::Detach {
                owner,
                handle,
                flags,
            } => {
                let (o, h) = (self.owner_c(rec, *owner), self.handle_c(rec, *handle));
                rec.ioctl(
                    &o,
                    "KFDP_IOC_DETACH",
                    "kfdp_detach",
                    &[("handle", h), ("flags", format!("{flags:#x}"))],
                );
            }
            Call::Query {
                owner,
                handle,
                gpu_id,
                capacity,
                entry_size,
                ptr,
            } => {
                let (o, h, g) = (
                    self.owner_c(rec, *owner),
                    self.handle_c(rec, *handle),
                    self.gpu_c(rec, *gpu_id),
                );
                let b = rec.buf(out_len(*capacity, *entry_size));
                let p = rec.ptr(&b, *ptr);
                rec.ioctl(
                    &o,
                    "KFDP_IOC_QUERY",
                    "kfdp_query",
                    &[
                        ("handle", h),
                        ("gpu_id", g),
                        ("entries_ptr", p),
                        ("entry_size", format!("{entry_size}")),
                        ("capacity", format!("{capacity}")),
                    ],
                );
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
                let o = self.owner_c(rec, *owner);
                let (p, n) = self.refs_c(rec, entries, *extra_count, *entry_size, *ptr);
                let req = if *resume {
                    "KFDP_IOC_RESUME"
                } else {
                    "KFDP_IOC_PREEMPT"
                };
                rec.ioctl(
                    &o,
                    req,
                    "kfdp_batch",
                    &[
                        ("entries_ptr", p),
                        ("num_entries", n),
                        ("entry_size", format!("{entry_size}")),
                        ("flags", format!("{flags:#x}")),
                        ("lease_ms", format!("{lease_ms}")),
                        ("reserved", format!("{{ {reserved:#x} }}")),
                    ],
                );
            }
            Call::Freeze {
                owner,
                thaw,
                handle,
                gpu_id,
                flags,
            } => {
                let (o, h, g) = (
                    self.owner_c(rec, *owner),
                    self.handle_c(rec, *handle),
                    self.gpu_c(rec, *gpu_id),
                );
                let req = if *thaw {
                    "KFDP_IOC_THAW"
                } else {
                    "KFDP_IOC_FREEZE"
                };
                rec.ioctl(
                    &o,
                    req,
                    "kfdp_freeze",
                    &[
                        ("handle", h),
                        ("gpu_id", g),
                        ("flags", format!("{flags:#x}")),
                    ],
                );
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
                let o = self.owner_c(rec, *owner);
                let (p, n) = self.refs_c(rec, entries, *extra_count, *entry_size, *ptr);
                let req = if *unwatch {
                    "KFDP_IOC_UNWATCH"
                } else {
                    "KFDP_IOC_WATCH"
                };
                rec.ioctl(
                    &o,
                    req,
                    "kfdp_watch",
                    &[
                        ("entries_ptr", p),
                        ("num_entries", n),
                        ("entry_size", format!("{entry_size}")),
                        ("flags", format!("{flags:#x}")),
                    ],
                );
            }
            Call::Sample {
                owner,
                capacity,
                entry_size,
                ptr,
            } => {
                let o = self.owner_c(rec, *owner);
                let b = rec.buf(out_len(*capacity, *entry_size));
                let p = rec.ptr(&b, *ptr);
                rec.ioctl(
                    &o,
                    "KFDP_IOC_SAMPLE",
                    "kfdp_sample",
                    &[
                        ("entries_ptr", p),
                        ("entry_size", format!("{entry_size}")),
                        ("capacity", format!("{capacity}")),
                    ],
                );
            }
            Call::MakeEventFd => {
                let e = rec.bind(Kind::Fd, u64::MAX, "e");
                rec.line(&format!(
                    "int {e} = done(__LINE__, \"eventfd\", eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));\n(void){e};"
                ));
                return Pending::EventFd(e);
            }
            Call::Arm {
                owner,
                condition,
                eventfd,
                period_us,
                idle_us,
                reserved,
            } => {
                let (o, e) = (
                    self.owner_c(rec, *owner),
                    self.fd_c(rec, self.target_fd(*eventfd)),
                );
                rec.ioctl(
                    &o,
                    "KFDP_IOC_ARM",
                    "kfdp_arm",
                    &[
                        ("condition", format!("{condition}")),
                        ("eventfd", e),
                        ("period_us", format!("{period_us}")),
                        ("idle_us", format!("{idle_us}")),
                        ("reserved", format!("{{ {reserved:#x} }}")),
                    ],
                );
            }
            Call::SetKnob { node, knob, value } => {
                let node = *node % KNOB_NODES;
                let path = knob_path(node, *knob);
                rec.line(&format!("knob(\"{path}\", {value});"));
                if !rec.knobs.contains(&path) {
                    rec.knobs.push(path);
                }
            }
            Call::Sleep { us } => rec.line(&format!("usleep({us});")),
            Call::HandOff { tenant } => {
                if !self.nested && !self.tenants.is_empty() {
                    let t = self.tenant_c(rec, *tenant);
                    rec.line(&format!(
                        "/* the tenant {t} now lives in a child only */\n\
                         if (!(kids[nkids++] = fork()))\n\tfor (;;)\n\t\tpause();\nclose({t});"
                    ));
                    rec.kids += 1;
                    return Pending::Kid(rec.kids - 1);
                }
            }
            Call::Fork { calls } | Call::Thread { calls } => {
                let what = if matches!(c, Call::Fork { .. }) {
                    "a forked child"
                } else {
                    "a second thread"
                };
                rec.line(&format!(
                    "/* Here {what} ran these calls (kfdp-fuzz replay runs them):"
                ));
                for n in calls {
                    rec.line(&format!(" *   {n:?}"));
                }
                rec.line(" */");
            }
            Call::KillChildren => {
                rec.line(
                    "for (int i = 0; i < nkids; i++) {\n\tkill(kids[i], SIGKILL);\n\twaitpid(kids[i], NULL, 0);\n}\nnkids = 0;",
                );
                rec.kids = 0;
            }
        }
        Pending::Nothing
    }

    /// Names what the call returned (its new fd, handle or queue).
    pub(super) fn record_after(&self, rec: &mut Rec, p: Pending, before: (usize, usize, usize)) {
        match p {
            Pending::Nothing => {}
            Pending::Kid(k) => {
                if let Some(&pid) = self.children.last() {
                    rec.rename(Kind::Pid, pid as u64, &format!("kids[{k}]"));
                }
            }
            Pending::Owner(o) => {
                if self.owners.len() > before.0 {
                    if let Some(f) = self.owners.last() {
                        rec.rename(Kind::Fd, f.raw as u32 as u64, &o);
                    }
                }
            }
            Pending::Tenant(t) => {
                if let Some(f) = self.tenants.last() {
                    rec.rename(Kind::Fd, f.fd.raw as u32 as u64, &t);
                }
            }
            Pending::EventFd(e) => {
                if let Some(f) = self.eventfds.last() {
                    rec.rename(Kind::Fd, f.raw as u32 as u64, &e);
                }
            }
            Pending::Queue(a, ring) => {
                if self.queues.len() > before.1 {
                    if let Some(&(g, q)) = self.queues.last() {
                        let qn = rec.bind(Kind::Queue, u64::from(q), "q");
                        let gn = rec.bind(Kind::Gpu, u64::from(g), "g");
                        rec.line(&format!("__u32 {qn} = {a}.queue_id, {gn} = {a}.gpu_id;"));
                        if let Some(r) = ring {
                            rec.rings.insert(q, r);
                        }
                    }
                }
            }
            Pending::Handle(a) => {
                if self.handles.len() > before.2 {
                    if let Some(&h) = self.handles.last() {
                        let hn = rec.bind(Kind::Handle, u64::from(h), "h");
                        rec.line(&format!("__u32 {hn} = {a}.handle;"));
                    }
                }
            }
        }
    }
}
