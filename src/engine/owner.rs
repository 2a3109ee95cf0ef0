// SPDX-License-Identifier: GPL-2.0

//! An owner: the state of one open `/dev/kfd_preempt` file.
//!
//! An owner holds its attachments, the marks it put on queues (with their
//! leases) and its freezes. Nothing it did can be seen, resumed or thawed
//! through another owner, and closing it undoes everything
//! (`Documentation/uapi.rst`, "Device, rights and owners").

use kernel::{
    impl_has_hr_timer, new_mutex, new_work,
    prelude::*,
    sync::{
        atomic::{
            Atomic,
            Relaxed, //
        },
        Arc,
        Mutex, //
    },
    time::{
        hrtimer::{
            HrTimer,
            RelativeMode, //
        },
        Instant,
        Monotonic, //
    },
    workqueue::{
        impl_has_work,
        Work, //
    },
};

// A child, as binder's process.rs keeps `freeze`: the owner's timer and
// work item, which only the owner uses, in a file of their own.
#[path = "housekeeping.rs"]
mod housekeeping;

use crate::{
    backend::{
        Backend,
        FreezeOp,
        Op, //
    },
    clock::now_ns,
    engine::registry::{
        QueueKey,
        REGISTRY, //
    },
    sorted_map::SortedMap,
    trace, uapi,
};

/// How often an owner with attachments checks whether their targets exited,
/// so that pins on exited processes are dropped promptly
/// (`Documentation/design.rst`, "Targets and pins").
pub(crate) const SWEEP_MS: u32 = 100;

/// Largest `lease_ms` accepted: one day.
pub(crate) const MAX_LEASE_MS: u32 = 86_400_000;

/// One attached target.
pub(crate) struct Attachment<T> {
    /// Handle given to user space, never 0.
    pub(crate) handle: u32,
    /// [`crate::backend::TargetInfo::key`].
    pub(crate) key: u64,
    /// The pinned target; `None` once it exited (its handle then reports
    /// ESRCH until DETACH).
    pub(crate) target: Option<T>,
}

/// A mark this owner put on a queue.
#[derive(Clone, Copy)]
pub(crate) struct Mark {
    pub(crate) handle: u32,
    pub(crate) gpu_id: u32,
    pub(crate) queue_id: u32,
    /// When the lease started, and how long it lasts (0: no lease).
    pub(crate) since: Instant<Monotonic>,
    pub(crate) lease_ns: i64,
}

impl Mark {
    /// Nanoseconds left on the lease, if there is one.
    pub(crate) fn lease_left_ns(&self) -> Option<i64> {
        (self.lease_ns > 0).then(|| self.lease_ns - self.since.elapsed().as_nanos())
    }
}

/// A freeze count this owner holds on one node of a target.
#[derive(Clone, Copy)]
pub(crate) struct Freeze {
    pub(crate) handle: u32,
    pub(crate) gpu_id: u32,
    pub(crate) count: u32,
}

/// Counters of one owner (and, summed, of the module).
#[derive(Clone, Copy, Default, Debug)]
pub(crate) struct OwnerStats {
    pub(crate) batches: u64,
    pub(crate) queues_preempted: u64,
    pub(crate) queues_resumed: u64,
    pub(crate) runlist_updates: u64,
    pub(crate) leases_expired: u64,
    pub(crate) external_resumes: u64,
}

/// The mutable state of an owner, behind [`Owner::state`].
pub(crate) struct State<T> {
    /// Set at release; no work is queued after it.
    pub(crate) closed: bool,
    pub(crate) next_handle: u32,
    /// In handle order: handles only grow, and ATTACH appends.
    pub(crate) attachments: KVec<Attachment<T>>,
    /// This owner's marks, keyed: a batch finds each entry's mark in
    /// O(log m).
    pub(crate) marks: SortedMap<MarkKey, Mark>,
    pub(crate) freezes: KVec<Freeze>,
    pub(crate) stats: OwnerStats,
    /// Watched queues (activity detection), in the order they were watched.
    pub(crate) watches: KVec<Arc<crate::activity::Watch>>,
    /// The armed sampler, if any.
    pub(crate) armed: Option<crate::activity::Sampler>,
    /// While leases that ended could not be resumed (the backend failed),
    /// how long housekeeping waits before it tries again: doubled at each
    /// failure up to `SWEEP_MS`, 0 once nothing is stuck.
    pub(crate) lease_retry_ms: u32,
}

/// Owners alive (debugfs `stats`: `owners_alive`). An owner lives as long
/// as its file, plus what housekeeping holds while it finishes; one that
/// outlives both (a reference cycle, a leaked reference) is found by the
/// fuzzer (tests/fuzz), which checks it after every program.
pub(crate) static OWNERS_ALIVE: Atomic<u64> = Atomic::new(0);

/// Counts its owner in [`OWNERS_ALIVE`] from creation to drop.
struct Alive(());

impl Alive {
    fn new() -> Self {
        OWNERS_ALIVE.fetch_add(1, Relaxed);
        Self(())
    }
}

impl Drop for Alive {
    fn drop(&mut self) {
        OWNERS_ALIVE.fetch_sub(1, Relaxed);
    }
}

/// One open `/dev/kfd_preempt` file.
#[pin_data]
pub(crate) struct Owner<B: Backend> {
    /// Unique among owners; identifies marks in the registry.
    pub(crate) id: u64,
    /// The process that opened the file (debugfs `attachments`).
    pub(crate) opener: i32,
    pub(crate) backend: B,
    /// `pid_attach` module parameter, as it was at open.
    pub(crate) pid_attach: bool,
    #[pin]
    pub(crate) state: Mutex<State<B::Target>>,
    /// Ends leases and drops pins of exited targets ([`housekeeping`]).
    #[pin]
    pub(crate) housekeeping: Work<Owner<B>>,
    /// When housekeeping is due.
    #[pin]
    timer: HrTimer<Owner<B>>,
    /// The started timer, if any. Taken after `state` (lock order), and
    /// started only while the state says the owner is open.
    #[pin]
    pub(crate) housekeeping_timer: Mutex<Option<housekeeping::HousekeepingTimer<B>>>,
    _alive: Alive,
    /// An owner is an open file: it holds the module (7.2, where the file
    /// does not). Last, so that it is given back after everything else.
    _module: crate::compat::FileModuleRef,
}

impl_has_work! {
    impl{B: Backend} HasWork<Owner<B>> for Owner<B> { self.housekeeping }
}

impl_has_hr_timer! {
    impl{B: Backend} HasHrTimer<Owner<B>> for Owner<B> {
        mode: RelativeMode<Monotonic>, field: self.timer
    }
}

/// amdkfd's KFD_MAX_NUM_OF_QUEUES_PER_PROCESS (asserted in the glue).
pub(crate) const MAX_QUEUE_ID: u32 = 1024;

/// Attachment `handle`, if this owner has it. A free function, not a method
/// of [`State`], so that callers can borrow other fields of the state.
/// A binary search: attachments are kept in handle order (see [`State`]).
pub(crate) fn attachment<T>(attachments: &[Attachment<T>], handle: u32) -> Option<&Attachment<T>> {
    let i = attachments
        .binary_search_by_key(&handle, |a| a.handle)
        .ok()?;
    attachments.get(i)
}

/// The live target of `handle`: EINVAL if no such attachment, ESRCH if its
/// target exited.
pub(crate) fn attached_target<T>(attachments: &[Attachment<T>], handle: u32) -> Result<&T> {
    attachment(attachments, handle)
        .ok_or(EINVAL)?
        .target
        .as_ref()
        .ok_or(ESRCH)
}

/// A mark's key in its owner's tree: handle, gpu_id, queue_id.
pub(crate) type MarkKey = (u32, u32, u32);

/// Marks [`Owner::resume_marks_in_chunks`] resumes in one batch: what
/// the backends hold on the stack (256 bytes of entries here).
const RESUME_CHUNK: usize = crate::backend::INLINE_ITEMS;

fn mark_key(m: &Mark) -> MarkKey {
    (m.handle, m.gpu_id, m.queue_id)
}

fn queue_ref_of(m: &Mark) -> uapi::kfdp_queue_ref {
    uapi::kfdp_queue_ref {
        handle: m.handle,
        gpu_id: m.gpu_id,
        queue_id: m.queue_id,
        status: 0,
    }
}

/// Removes the marks `keep` rejects, calling `gone` on each first.
fn retain_marks(
    marks: &mut SortedMap<MarkKey, Mark>,
    keep: impl Fn(&Mark) -> bool,
    mut gone: impl FnMut(&Mark),
) {
    marks.retain(|_, m| {
        let kept = keep(m);
        if !kept {
            gone(m);
        }
        kept
    });
}

/// The registry key of attachment `handle`'s process (0 if unknown).
pub(crate) fn target_key<T>(attachments: &[Attachment<T>], handle: u32) -> u64 {
    attachment(attachments, handle).map_or(0, |a| a.key)
}

impl<B: Backend> Owner<B> {
    /// Creates the owner of a newly opened file.
    pub(crate) fn new(backend: B, pid_attach: bool) -> Result<Arc<Self>> {
        static NEXT_ID: kernel::sync::atomic::Atomic<u64> = kernel::sync::atomic::Atomic::new(1);
        let id = NEXT_ID.fetch_add(1, kernel::sync::atomic::Relaxed);
        let module = crate::compat::FileModuleRef::new()?;
        Arc::pin_init(
            pin_init!(Self {
                id,
                // The opener's thread group id, as its leader's pid:
                // `Task::tgid` is new in Linux 7.3, and this builds on 7.2.
                opener: kernel::current!().group_leader().pid(),
                backend,
                pid_attach,
                state <- new_mutex!(State {
                    closed: false,
                    next_handle: 1,
                    attachments: KVec::new(),
                    marks: SortedMap::new(),
                    freezes: KVec::new(),
                    stats: OwnerStats::default(),
                    watches: KVec::new(),
                    armed: None,
                    lease_retry_ms: 0,
                }),
                housekeeping <- new_work!("kfd_preempt::housekeeping"),
                timer <- HrTimer::new(),
                housekeeping_timer <- new_mutex!(None),
                _alive: Alive::new(),
                _module: module,
            }),
            GFP_KERNEL,
        )
    }

    /// KFDP_IOC_ATTACH. `sys_admin` is asked, once, only for a PID attach.
    pub(crate) fn attach(
        &self,
        a: &mut uapi::kfdp_attach,
        sys_admin: impl FnOnce() -> bool,
    ) -> Result {
        if a.flags != 0 || a.reserved0 != 0 || a.reserved1 != 0 {
            return Err(EINVAL);
        }
        match a.kind {
            // The backend says whether it has simulated nodes.
            uapi::KFDP_TARGET_KFD_FD | uapi::KFDP_TARGET_SIM_FD => {
                if a.pid != 0 {
                    return Err(EINVAL);
                }
            }
            uapi::KFDP_TARGET_PID => {
                // The header's value for "no descriptor".
                if a.fd != -1 {
                    return Err(EINVAL);
                }
                if !self.pid_attach {
                    return Err(crate::compat::eopnotsupp());
                }
                if !sys_admin() {
                    return Err(EPERM);
                }
            }
            _ => return Err(EINVAL),
        }
        let target = self.backend.attach(a.kind, a.fd, a.pid)?;
        let info = self.backend.info(&target);

        self.sweep();
        let mut state = self.state.lock();
        if let Some(existing) = state
            .attachments
            .iter()
            .find(|x| x.key == info.key && x.target.is_some())
        {
            // The same process twice: one attachment (dropping `target`
            // releases the second pin).
            a.handle = existing.handle;
        } else {
            let handle = state.next_handle;
            state.next_handle = handle.checked_add(1).ok_or(ENOSPC)?;
            state.attachments.push(
                Attachment {
                    handle,
                    key: info.key,
                    target: Some(target),
                },
                GFP_KERNEL,
            )?;
            a.handle = handle;
        }
        a.tgid = info.tgid;
        a.num_gpus = info.num_gpus;
        trace::attach(self.id, a.handle, info.tgid, a.kind);
        Ok(())
    }

    /// KFDP_IOC_DETACH.
    pub(crate) fn detach(&self, d: &uapi::kfdp_detach) -> Result {
        if d.flags != 0 || d.reserved != 0 {
            return Err(EINVAL);
        }
        let mut state = self.state.lock();
        let idx = state
            .attachments
            .iter()
            .position(|a| a.handle == d.handle)
            .ok_or(EINVAL)?;
        self.undo(&mut state, Some(d.handle));
        let gone = state.attachments.remove(idx).map_err(|_| EINVAL)?;
        trace::detach(self.id, d.handle);
        let mut unwatched = KVec::new();
        let st = &mut *state;
        let sampler = if crate::activity::take_watches(
            &mut st.watches,
            |w| w.handle == d.handle,
            &mut unwatched,
        ) == 0
        {
            None
        } else {
            crate::activity::resample(&st.watches, &mut st.armed)
        };
        drop(state);
        // Unpinning happens here, outside our lock: the old sampler (which
        // holds watches too) first.
        drop(sampler);
        drop(gone);
        drop(unwatched);
        Ok(())
    }

    /// Resumes every mark and thaws every freeze of `handle` (all if `None`).
    fn undo(&self, state: &mut State<B::Target>, handle: Option<u32>) {
        self.resume_marks(state, |m| handle.is_none_or(|h| h == m.handle));
        // The backend clears every mark it is asked to resume, so marks left
        // here are only those the batch could not hold; they are given up
        // rather than left to an owner that is going away.
        let mut reg = REGISTRY.lock();
        let atts = &state.attachments;
        retain_marks(
            &mut state.marks,
            |m| handle.is_some_and(|h| h != m.handle),
            |m| {
                let key = QueueKey {
                    target: target_key(atts, m.handle),
                    gpu_id: m.gpu_id,
                    queue_id: m.queue_id,
                };
                reg.unclaim(&key, self.id);
            },
        );
        drop(reg);

        // Thaw every freeze, exactly as many times as it was frozen.
        for f in state.freezes.iter() {
            if handle.is_some_and(|h| h != f.handle) {
                continue;
            }
            let Some(att) = attachment(&state.attachments, f.handle) else {
                continue;
            };
            if let Some(t) = att.target.as_ref() {
                for _ in 0..f.count {
                    let _ = self.backend.freeze(t, f.gpu_id, FreezeOp::Thaw);
                }
            }
            let mut reg = REGISTRY.lock();
            for _ in 0..f.count {
                reg.thaw(att.key, f.gpu_id, self.id);
            }
        }
        state
            .freezes
            .retain(|f| handle.is_some_and(|h| h != f.handle));
    }

    /// Resumes (one batch, one runlist update per node where memory allows)
    /// this owner's marks that `select` picks; returns how many it no longer
    /// holds (resumed, or found resumed already). Every picked mark is
    /// tried: close and DETACH resume everything.
    fn resume_marks(&self, state: &mut State<B::Target>, select: impl Fn(&Mark) -> bool) -> usize {
        let n = state.marks.values().filter(|m| select(m)).count();
        if n == 0 {
            return 0;
        }
        let mut entries = KVVec::new();
        if entries.reserve(n, GFP_KERNEL).is_err() {
            return self.resume_marks_in_chunks(state, select);
        }
        for m in state.marks.values().filter(|m| select(m)) {
            // Within the capacity reserved above: cannot fail.
            let _ = entries.push(queue_ref_of(m), GFP_KERNEL);
        }
        self.run_batch(state, Op::Resume, 0, 0, &mut entries);
        // Resumed, or found resumed already: no longer held.
        entries.iter().filter(|e| e.status >= 0).count()
    }

    /// [`Self::resume_marks`] with no memory for the list of marks: batches
    /// of [`RESUME_CHUNK`] on the stack, in key order, until every picked
    /// mark was tried. More runlist updates, but no mark left behind
    /// without an owner.
    pub(crate) fn resume_marks_in_chunks(
        &self,
        state: &mut State<B::Target>,
        select: impl Fn(&Mark) -> bool,
    ) -> usize {
        let mut done = 0;
        let mut after: Option<MarkKey> = None;
        loop {
            let mut chunk = [uapi::kfdp_queue_ref::default(); RESUME_CHUNK];
            let mut k = 0;
            for m in state
                .marks
                .values()
                .filter(|m| after.is_none_or(|a| mark_key(m) > a) && select(m))
                .take(RESUME_CHUNK)
            {
                chunk[k] = queue_ref_of(m);
                k += 1;
            }
            let Some(last) = k.checked_sub(1).map(|i| chunk[i]) else {
                return done;
            };
            // Marks the batch cannot resume stay; the next chunk starts
            // after them, so each is tried once.
            after = Some((last.handle, last.gpu_id, last.queue_id));
            self.run_batch(state, Op::Resume, 0, 0, &mut chunk[..k]);
            done += chunk[..k].iter().filter(|e| e.status >= 0).count();
        }
    }

    /// Drops the pins and the marks of attachments whose target exited: the
    /// process's queues are gone, and a pin would keep its memory and block
    /// amdgpu's device teardown. The pins are dropped after the state lock
    /// is released: unpinning a process can sleep and take amdkfd's locks.
    pub(crate) fn sweep(&self) {
        self.with_swept(|_| ());
    }

    /// Runs `f` on the state, under one lock, after sweeping it; the pins
    /// of exited targets are dropped once the lock is released.
    pub(crate) fn with_swept<R>(&self, f: impl FnOnce(&mut State<B::Target>) -> R) -> R {
        let (r, gone) = {
            let mut state = self.state.lock();
            let gone = self.take_exited(&mut state);
            (f(&mut state), gone)
        };
        drop(gone);
        r
    }

    /// The part of [`Self::sweep`] done under the state lock: takes the
    /// targets that exited out of their attachments and forgets their marks
    /// and freezes. Without memory for the list the sweep is only later:
    /// the attachments it could not take keep their pins until the next.
    fn take_exited(&self, state: &mut State<B::Target>) -> KVec<B::Target> {
        let mut gone = KVec::new();
        let mut i = 0;
        while i < state.attachments.len() {
            let att = &mut state.attachments[i];
            i += 1;
            if att.target.as_ref().is_none_or(|t| self.backend.alive(t)) {
                continue;
            }
            if gone.reserve(1, GFP_KERNEL).is_err() {
                break;
            }
            let (handle, key) = (att.handle, att.key);
            if let Some(t) = att.target.take() {
                // Capacity was reserved above: this cannot fail.
                let _ = gone.push(t, GFP_KERNEL);
            }
            state.marks.remove_run(&(handle, 0, 0), |k| k.0 == handle);
            state.freezes.retain(|f| f.handle != handle);
            let mut reg = REGISTRY.lock();
            reg.forget_target(key, self.id);
            reg.stats.targets_exited += 1;
            drop(reg);
            trace::target_exit(self.id, handle);
        }
        gone
    }

    /// Ends expired leases, sweeps exited targets and pins again the
    /// watches whose memory moved; returns when to run again
    /// (milliseconds), or `None` if nothing needs watching.
    pub(crate) fn housekeep(&self) -> Option<u32> {
        self.sweep();
        // Unpinning (and stopping a sampler) is done after unlocking.
        let mut remade = KVec::new();
        let mut old_sampler = None;
        let mut state = self.state.lock();
        if state.closed {
            return None;
        }
        let st = &mut *state;
        let attachments = &st.attachments;
        let moved = crate::engine::watches::remake_moved(
            &self.backend,
            &mut st.watches,
            |h| attached_target(attachments, h),
            now_ns(),
            &mut remade,
        );
        if moved > 0 {
            old_sampler = crate::activity::resample(&st.watches, &mut st.armed);
            REGISTRY.lock().stats.watches_remade += moved as u64;
        }
        let ended = |m: &Mark| m.lease_left_ns().is_some_and(|left| left <= 0);
        let expired = self.resume_marks(&mut state, ended) as u64;
        if expired > 0 {
            trace::lease_expired(self.id, expired as u32);
        }
        // Marks whose lease ended and that are still held: the backend
        // could not resume them. Try again later, and later each time,
        // rather than every millisecond while the node is broken.
        state.lease_retry_ms = if state.marks.values().any(ended) {
            (state.lease_retry_ms * 2).clamp(1, SWEEP_MS)
        } else {
            0
        };
        state.stats.leases_expired += expired;
        REGISTRY.lock().stats.leases_expired += expired;
        let next = Self::next_wakeup(&state);
        drop(state);
        drop(old_sampler);
        drop(remade);
        next
    }

    pub(crate) fn next_wakeup(state: &State<B::Target>) -> Option<u32> {
        // A lease that has not ended yet is due when it ends; one that has
        // ended and is still held (its resume failed) is retried after the
        // backoff, which must not delay the others.
        let retry_ns = i64::from(state.lease_retry_ms) * 1_000_000;
        let lease = state
            .marks
            .values()
            .filter_map(|m| m.lease_left_ns())
            .map(|left| if left > 0 { left } else { retry_ns })
            .min();
        let watching = state.attachments.iter().any(|a| a.target.is_some());
        match lease {
            Some(ns) => {
                let ms = u32::try_from((ns.max(0) + 999_999) / 1_000_000).unwrap_or(SWEEP_MS);
                Some(ms.clamp(1, SWEEP_MS))
            }
            None if watching => Some(SWEEP_MS),
            None => None,
        }
    }

    /// Re-arms housekeeping after an ioctl changed leases or attachments.
    pub(crate) fn rearm(self: &Arc<Self>) {
        let state = self.state.lock();
        if let Some(ms) = Self::next_wakeup(&state) {
            housekeeping::schedule(self, &state, ms);
        }
    }

    /// The owner's file is being closed: resume and thaw everything, drop
    /// every attachment, before `release` returns.
    pub(crate) fn close(self: &Arc<Self>) {
        let timer = {
            let mut state = self.state.lock();
            state.closed = true;
            self.housekeeping_timer.lock().take()
        };
        // Cancelled, and nothing starts it again (the owner is closed);
        // then the work it may have queued is waited for.
        drop(timer);
        self.flush_housekeeping();
        self.sweep();
        let mut state = self.state.lock();
        self.undo(&mut state, None);
        let gone = core::mem::take(&mut state.attachments);
        for a in gone.iter() {
            trace::detach(self.id, a.handle);
        }
        let armed = state.armed.take();
        let watches = core::mem::take(&mut state.watches);
        drop(state);
        // The timer first (it reads the watches), then the pins.
        drop(armed);
        drop(watches);
        drop(gone);
    }
}
