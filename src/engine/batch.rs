// SPDX-License-Identifier: GPL-2.0

//! The engine of PREEMPT and RESUME, once the entries were copied in: one
//! method per phase of [`Owner::run_batch`].
//!
//! 1. [`Owner::resolve`]: duplicates, entry checks, and whose mark each
//!    queue carries (the registry, taken once);
//! 2. [`Owner::would_fail`]: with ALL_OR_NOTHING, a dry run in the backend;
//! 3. the backend's one call, one runlist update per node;
//! 4. [`Owner::record`]: what this owner holds afterwards, and the
//!    counters (the registry, taken once more: never across the backend's
//!    call);
//! 5. the trace events.

use kernel::{
    prelude::*,
    time::{
        Instant,
        Monotonic, //
    },
};

use crate::{
    backend::{
        Applied,
        Backend,
        Item,
        Items,
        Op,
        Outcome,
        MAX_GPUS, //
    },
    engine::owner::{
        attachment,
        target_key,
        Attachment,
        Mark,
        MarkKey,
        Owner,
        OwnerStats,
        State,
        MAX_QUEUE_ID, //
    },
    engine::registry::{
        QueueKey,
        Registry,
        REGISTRY, //
    },
    sorted_map::SortedMap,
    trace, uapi,
};

/// Sets every entry's status to `e`.
fn fail_all(entries: &mut [uapi::kfdp_queue_ref], e: Error) {
    for x in entries.iter_mut() {
        x.status = e.to_errno();
    }
}

/// Batches of up to this many entries find their duplicates with an index
/// buffer on the stack.
const ORDER_ON_STACK: usize = 32;

/// Sets the status of every entry that repeats an earlier one (same
/// handle, gpu_id and queue_id) to `KFDP_R_ALREADY`, and of the others to
/// 0, in O(n log n): the entries' indices are sorted by key, in a buffer on
/// the stack for small batches. ENOMEM (and nothing set) if a large
/// batch's buffer cannot be allocated.
fn mark_duplicates(entries: &mut [uapi::kfdp_queue_ref]) -> Result {
    let n = entries.len();
    if n <= 1 {
        // Nothing to repeat; the single-entry PREEMPT is the common call.
        for e in entries.iter_mut() {
            e.status = 0;
        }
        return Ok(());
    }
    let mut small = [0u32; ORDER_ON_STACK];
    let mut large = KVVec::new();
    let order: &mut [u32] = if n <= ORDER_ON_STACK {
        &mut small[..n]
    } else {
        large.resize(n, 0u32, GFP_KERNEL)?;
        &mut large
    };
    for (i, o) in order.iter_mut().enumerate() {
        *o = i as u32;
    }
    let key = |e: &uapi::kfdp_queue_ref| (e.handle, e.gpu_id, e.queue_id);
    order.sort_unstable_by_key(|&i| (key(&entries[i as usize]), i));
    let mut prev = None;
    for &i in order.iter() {
        let e = &mut entries[i as usize];
        let dup = prev == Some(key(e));
        prev = Some(key(e));
        e.status = if dup { uapi::KFDP_R_ALREADY as i32 } else { 0 };
    }
    Ok(())
}

/// How many nodes the items of a batch are on (at most [`MAX_GPUS`] are
/// told apart; a process has no more).
fn distinct_nodes<T>(items: &[Item<'_, T>]) -> u32 {
    let mut seen = [0u32; MAX_GPUS];
    let mut n = 0;
    for it in items {
        if n < MAX_GPUS && !seen[..n].contains(&it.gpu_id) {
            seen[n] = it.gpu_id;
            n += 1;
        }
    }
    n as u32
}

/// The owner's and the module's counters of one batch.
fn count(
    op: Op,
    s: &mut crate::engine::registry::Stats,
    stats: &mut OwnerStats,
    entries: &[uapi::kfdp_queue_ref],
    applied: Applied,
) {
    let ok = entries.iter().filter(|e| e.status == 0).count() as u64;
    match op {
        Op::Preempt => {
            s.preempt_batches += 1;
            s.queues_preempted += ok;
            stats.queues_preempted += ok;
        }
        Op::Resume => {
            s.resume_batches += 1;
            s.queues_resumed += ok;
            stats.queues_resumed += ok;
        }
    }
    s.runlist_updates += u64::from(applied.runlist_updates);
    s.max_elapsed_ns = s.max_elapsed_ns.max(applied.elapsed_ns);
    if applied.runlist_updates > 0 {
        s.record_hw_phase(op, applied.elapsed_ns);
    }
    stats.batches += 1;
    stats.runlist_updates += u64::from(applied.runlist_updates);
}

/// What a batch asked for and what the backend did: [`Owner::record`]'s
/// input.
struct Asked {
    op: Op,
    lease_ms: u32,
    applied: Applied,
}

/// The parts of an owner's [`State`] a batch's outcome changes, borrowed
/// apart from the attachments' targets, which the items borrow meanwhile.
struct Held<'a, T> {
    attachments: &'a [Attachment<T>],
    marks: &'a mut SortedMap<MarkKey, Mark>,
    stats: &'a mut OwnerStats,
}

impl<B: Backend> Owner<B> {
    /// The engine of PREEMPT and RESUME, after the entries were copied in.
    ///
    /// Validates each entry, drops duplicates, refuses queues held by other
    /// owners, hands the rest to the backend in one call, and records which
    /// marks this owner holds afterwards.
    pub(crate) fn run_batch(
        &self,
        state: &mut State<B::Target>,
        op: Op,
        flags: u32,
        lease_ms: u32,
        entries: &mut [uapi::kfdp_queue_ref],
    ) -> Applied {
        let validate_only = flags & uapi::KFDP_BATCH_VALIDATE_ONLY != 0;
        let all_or_nothing = flags & uapi::KFDP_BATCH_ALL_OR_NOTHING != 0;
        // Disjoint borrows: the items borrow the attachments' targets
        // while the marks and counters change.
        let State {
            attachments,
            marks,
            stats,
            ..
        } = state;

        let Some(mut items) = self.resolve(attachments, entries) else {
            return Applied::default();
        };
        if all_or_nothing && !validate_only && self.would_fail(op, &mut items, entries) {
            self.trace_batch(op, flags, entries, &items, Applied::default());
            return Applied::default();
        }
        let applied = self.backend.apply(op, validate_only, &mut items);
        if validate_only {
            for it in items.iter() {
                entries[it.entry as usize].status = it.status.status();
            }
        } else {
            let asked = Asked {
                op,
                lease_ms,
                applied,
            };
            let mut held = Held {
                attachments,
                marks,
                stats,
            };
            self.record(&asked, &mut held, &items, entries);
        }
        self.trace_batch(op, flags, entries, &items, applied);
        applied
    }

    /// Phase 1: sets every entry's status (duplicates ALREADY, refused
    /// entries their errno, the others 0) and returns the items of the
    /// entries still at 0, for the backend; `None` (every entry ENOMEM) if
    /// they cannot be allocated.
    fn resolve<'a>(
        &self,
        attachments: &'a [Attachment<B::Target>],
        entries: &mut [uapi::kfdp_queue_ref],
    ) -> Option<Items<'a, B::Target>> {
        if mark_duplicates(entries).is_err() {
            fail_all(entries, ENOMEM);
            return None;
        }
        // For the entries that reach the backend: on the stack for a small
        // batch, else one allocation.
        let wanted = entries.iter().filter(|e| e.status == 0).count();
        let Ok(mut items) = Items::with_capacity(wanted, GFP_KERNEL) else {
            fail_all(entries, ENOMEM);
            return None;
        };
        let reg = REGISTRY.lock();
        for (i, e) in entries.iter_mut().enumerate() {
            if e.status != 0 {
                continue;
            }
            let Some(att) = attachment(attachments, e.handle) else {
                e.status = EINVAL.to_errno();
                continue;
            };
            let Some(target) = att.target.as_ref() else {
                e.status = ESRCH.to_errno();
                continue;
            };
            if e.gpu_id == 0 || e.queue_id >= MAX_QUEUE_ID {
                e.status = EINVAL.to_errno();
                continue;
            }
            let key = QueueKey {
                target: att.key,
                gpu_id: e.gpu_id,
                queue_id: e.queue_id,
            };
            let owner = reg.mark_owner(&key);
            if owner.is_some_and(|o| o != self.id) {
                e.status = EBUSY.to_errno();
                continue;
            }
            let item = Item {
                target,
                gpu_id: e.gpu_id,
                queue_id: e.queue_id,
                owned: owner == Some(self.id),
                status: Outcome::Done,
                marked: false,
                entry: i as u32,
            };
            // Capacity for every entry still at 0 was reserved above.
            if items.push(item).is_err() {
                e.status = ENOMEM.to_errno();
            }
        }
        Some(items)
    }

    /// Phase 2, ALL_OR_NOTHING: whether any entry is refused, by the engine
    /// or by the backend's dry run. If so every entry gets its own error or
    /// ECANCELED, and nothing changes.
    fn would_fail(
        &self,
        op: Op,
        items: &mut [Item<'_, B::Target>],
        entries: &mut [uapi::kfdp_queue_ref],
    ) -> bool {
        let _ = self.backend.apply(op, true, items);
        let failed =
            entries.iter().any(|e| e.status < 0) || items.iter().any(|it| it.status.failed());
        if failed {
            for it in items.iter() {
                entries[it.entry as usize].status = it.status.status();
            }
            for e in entries.iter_mut() {
                if e.status >= 0 {
                    e.status = crate::compat::ecanceled().to_errno();
                }
            }
        }
        failed
    }

    /// Phase 4: the items' outcomes into their entries, the marks this
    /// owner holds afterwards, in its own map and in the registry, and the
    /// counters, under the registry's lock; then, with the lock dropped
    /// (never across the backend's call), the queues this batch marked but
    /// could not record are resumed.
    fn record(
        &self,
        asked: &Asked,
        held: &mut Held<'_, B::Target>,
        items: &[Item<'_, B::Target>],
        entries: &mut [uapi::kfdp_queue_ref],
    ) {
        let unrecorded = {
            let mut reg = REGISTRY.lock();
            // Read once, and only by a batch that starts or renews a lease:
            // a clock read is not free under emulation, and a RESUME needs
            // none.
            let mut since = None;
            let mut unrecorded = 0usize;
            for it in items.iter() {
                let e = &mut entries[it.entry as usize];
                if !self.record_one(asked, held, &mut reg, &mut since, it, e) {
                    unrecorded += 1;
                }
            }
            count(asked.op, &mut reg.stats, held.stats, entries, asked.applied);
            unrecorded
        };
        if unrecorded > 0 {
            self.resume_unrecorded(held.marks, items, entries);
        }
    }

    /// One item's outcome into its entry `e` and the marks; `false` if the
    /// item's queue was marked on the hardware but its mark could not be
    /// recorded (no memory): [`resume_unrecorded`](Self::resume_unrecorded)
    /// is then to undo it.
    fn record_one(
        &self,
        asked: &Asked,
        held: &mut Held<'_, B::Target>,
        reg: &mut Registry,
        since: &mut Option<Instant<Monotonic>>,
        it: &Item<'_, B::Target>,
        e: &mut uapi::kfdp_queue_ref,
    ) -> bool {
        e.status = it.status.status();
        if it.status == Outcome::External {
            held.stats.external_resumes += 1;
            reg.stats.external_resumes += 1;
        }
        let (handle, gpu_id, queue_id) = (e.handle, e.gpu_id, e.queue_id);
        let mkey = (handle, gpu_id, queue_id);
        let key = QueueKey {
            target: target_key(held.attachments, handle),
            gpu_id,
            queue_id,
        };
        let lease_ns = i64::from(asked.lease_ms) * 1_000_000;
        // `it.owned` says whether this owner held the mark before the
        // batch: the registry's marks of this owner and the owner's own
        // agree (both are written and removed together, under this
        // owner's lock; a sweep forgets only this owner's), so only a
        // held mark's lease needs a lookup.
        match (it.marked, it.owned) {
            (true, true) => {
                // A refused or failed PREEMPT of a held mark (EAGAIN, EIO)
                // changes nothing, its lease included.
                if asked.op == Op::Preempt && !it.status.failed() {
                    if let Some(m) = held.marks.get_mut(&mkey) {
                        m.since = *since.get_or_insert_with(Instant::<Monotonic>::now);
                        m.lease_ns = lease_ns;
                    }
                }
            }
            (true, false) => {
                let m = Mark {
                    handle,
                    gpu_id,
                    queue_id,
                    since: *since.get_or_insert_with(Instant::<Monotonic>::now),
                    lease_ns,
                };
                // The mark is on the hardware: if it cannot be recorded,
                // undo it rather than leave it without an owner.
                let claimed = match held.marks.insert(mkey, m) {
                    Ok(_) => reg.claim(key, self.id),
                    Err(_) => Err(ENOMEM),
                };
                if claimed == Err(EBUSY) {
                    // Another owner marked that queue id after this batch
                    // looked: the queue this batch marked was destroyed and
                    // its id reused, amdkfd hands out the lowest free id.
                    // The mark went with the old queue; the new one is the
                    // other owner's, and resuming it here would undo their
                    // preemption.
                    held.marks.remove(&mkey);
                    e.status = EBUSY.to_errno();
                } else if claimed.is_err() {
                    held.marks.remove(&mkey);
                    e.status = ENOMEM.to_errno();
                    return false;
                }
            }
            (false, true) => {
                held.marks.remove(&mkey);
                reg.unclaim(&key, self.id);
            }
            (false, false) => {}
        }
        true
    }

    /// Resumes the queues this batch marked on the hardware but could not
    /// record (no memory), rather than leave marks without an owner: the
    /// items it marked that it did not hold before, whose entry says
    /// ENOMEM and which have no mark in `marks`.
    fn resume_unrecorded(
        &self,
        marks: &SortedMap<MarkKey, Mark>,
        items: &[Item<'_, B::Target>],
        entries: &[uapi::kfdp_queue_ref],
    ) {
        for it in items.iter().filter(|it| it.marked && !it.owned) {
            let e = &entries[it.entry as usize];
            if e.status != ENOMEM.to_errno()
                || marks.get(&(e.handle, e.gpu_id, e.queue_id)).is_some()
            {
                continue;
            }
            let mut one = [Item {
                target: it.target,
                gpu_id: it.gpu_id,
                queue_id: it.queue_id,
                owned: true,
                status: Outcome::Done,
                marked: true,
                entry: it.entry,
            }];
            let _ = self.backend.apply(Op::Resume, false, &mut one);
        }
    }

    /// The `kfdp_batch` and `kfdp_queue` events of one batch.
    /// Only what an enabled event needs is computed: this runs on every
    /// batch.
    fn trace_batch(
        &self,
        op: Op,
        flags: u32,
        entries: &[uapi::kfdp_queue_ref],
        items: &[Item<'_, B::Target>],
        applied: Applied,
    ) {
        if trace::batch_enabled() {
            trace::batch(&trace::BatchEvent {
                owner: self.id,
                op,
                flags,
                entries: entries.len() as u32,
                ok: entries.iter().filter(|e| e.status == 0).count() as u32,
                nodes: distinct_nodes(items),
                runlist_updates: applied.runlist_updates,
                elapsed_ns: applied.elapsed_ns,
            });
        }
        if trace::queue_enabled() {
            for e in entries {
                trace::queue(self.id, op, e);
            }
        }
    }
}
