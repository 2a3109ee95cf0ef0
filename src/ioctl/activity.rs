// SPDX-License-Identifier: GPL-2.0

//! KFDP_IOC_WATCH, UNWATCH, SAMPLE and ARM (ABI 1.2): copying each call in,
//! checking it, and changing an owner's watches and sampler
//! ([`crate::activity`]). `Documentation/design.rst`, "Activity
//! detection", has the alternatives and their measured costs.

use kernel::{
    prelude::*,
    sync::Arc,
    time::Delta,
    uaccess::{
        UserPtr,
        UserSlice, //
    },
};

use crate::{
    activity::{
        resample,
        take_watches,
        Condition,
        Sampler,
        Watch,
        MAX_IDLE_US,
        MAX_PERIOD_US,
        MAX_WATCHES,
        MIN_PERIOD_US, //
    },
    backend::Backend,
    clock::now_ns,
    engine::{
        owner::{
            attached_target,
            attachment,
            Owner,
            State, //
        },
        watches::{
            describe,
            instance_of,
            watch_one, //
        },
    },
    ioctl::user_array,
    uapi::{
        self,
        kfdp_activity,
        kfdp_arm,
        kfdp_queue_ref,
        kfdp_sample,
        kfdp_watch,
        KFDP_MAX_BATCH,
        KFDP_R_ALREADY, //
    },
    umem::EventFd,
};

const REF_SIZE: usize = size_of::<kfdp_queue_ref>();
const ACT_SIZE: usize = size_of::<kfdp_activity>();

fn same_queue(w: &Watch, e: &kfdp_queue_ref) -> bool {
    w.handle == e.handle && w.gpu_id == e.gpu_id && w.queue_id == e.queue_id
}

/// KFDP_IOC_WATCH (`add`) or KFDP_IOC_UNWATCH.
pub(crate) fn watch<B: Backend>(
    owner: &Arc<Owner<B>>,
    add: bool,
    arg: usize,
    size: usize,
) -> Result {
    let header = || UserSlice::new(UserPtr::from_addr(arg), size);
    let mut w: kfdp_watch = header().reader().read()?;
    if w.flags != 0 || w.reserved != 0 {
        return Err(EINVAL);
    }
    if w.num_entries > KFDP_MAX_BATCH {
        return Err(E2BIG);
    }
    if (w.entry_size as usize) < REF_SIZE {
        return Err(EINVAL);
    }
    let mut refs: KVVec<kfdp_queue_ref> =
        user_array::read(w.entries_ptr, w.num_entries, w.entry_size)?;
    header().writer().write(&w)?;
    user_array::write(w.entries_ptr, w.entry_size, &refs)?;

    // Unpinning (and stopping a sampler) is done after unlocking.
    let mut dropped = KVec::new();
    let mut old_sampler = None;
    owner.sweep();
    {
        let mut guard = owner.state.lock();
        let state = &mut *guard;
        let mut removed = 0;
        for e in refs.iter_mut() {
            e.status = if add {
                let before = dropped.len();
                let status = watch_entry(owner, state, e, &mut dropped);
                // A watch replaced or dropped: the sampler reads the old one.
                if dropped.len() > before {
                    removed += 1;
                }
                status.unwrap_or_else(|err| err.to_errno())
            } else if take_watches(&mut state.watches, |w| same_queue(w, e), &mut dropped) > 0 {
                removed += 1;
                0
            } else {
                KFDP_R_ALREADY as i32
            };
        }
        if removed > 0 {
            old_sampler = resample(&state.watches, &mut state.armed);
        }
    }
    drop(old_sampler);
    drop(dropped);
    w.num_ok = refs.iter().filter(|e| e.status == 0).count() as u32;
    user_array::write(w.entries_ptr, w.entry_size, &refs).and_then(|()| header().writer().write(&w))
}

/// WATCH of one entry. A queue id watched already is `KFDP_R_ALREADY`
/// while it names the same queue; if its queue was destroyed and the id
/// given to a new one, the old watch (reading memory the queue no longer
/// uses) goes into `dropped` and the new queue is watched.
fn watch_entry<B: Backend>(
    owner: &Owner<B>,
    state: &mut State<B::Target>,
    e: &kfdp_queue_ref,
    dropped: &mut KVec<Arc<Watch>>,
) -> Result<i32> {
    let old = state.watches.iter().position(|w| same_queue(w, e));
    let qi = match describe(
        &owner.backend,
        attached_target(&state.attachments, e.handle),
        e,
    ) {
        Ok(qi) => qi,
        // The watched queue was destroyed: its watch goes with it.
        Err(err) if err == ENOENT => {
            if let Some(i) = old {
                // Reserved first: a watch is unpinned only after unlocking.
                dropped.reserve(1, GFP_KERNEL)?;
                let gone = state.watches.remove(i).map_err(|_| EINVAL)?;
                dropped.push(gone, GFP_KERNEL)?;
            }
            return Ok(err.to_errno());
        }
        // Nothing says the watched queue changed (its target exited, or
        // memory ran short): it stays as it was.
        Err(_) if old.is_some() => return Ok(KFDP_R_ALREADY as i32),
        Err(err) => return Ok(err.to_errno()),
    };
    let stale = match old {
        // The same queue, and its memory still what was pinned.
        Some(i) if state.watches[i].instance == instance_of(&qi) && !state.watches[i].moved() => {
            return Ok(KFDP_R_ALREADY as i32)
        }
        Some(i) => Some(i),
        None if state.watches.len() >= MAX_WATCHES as usize => return Ok(ENOSPC.to_errno()),
        None => None,
    };
    // Room for the old watch first: once the new one is in, the old one
    // must be able to go.
    if stale.is_some() {
        dropped.reserve(1, GFP_KERNEL)?;
    }
    let made = attached_target(&state.attachments, e.handle)
        .and_then(|target| watch_one(&owner.backend, target, e, &qi))
        .and_then(|w| Ok(Arc::new(w, GFP_KERNEL)?));
    let watch = match made {
        Ok(w) => w,
        Err(err) => {
            // The old watch reads memory the queue no longer uses: it goes
            // even if the new queue cannot be watched (room reserved above).
            if let Some(i) = stale {
                let gone = state.watches.remove(i).map_err(|_| EINVAL)?;
                dropped.push(gone, GFP_KERNEL)?;
            }
            return Ok(err.to_errno());
        }
    };
    match stale {
        Some(i) => {
            let old = core::mem::replace(&mut state.watches[i], watch);
            dropped.push(old, GFP_KERNEL)?;
        }
        None => state.watches.push(watch, GFP_KERNEL)?,
    }
    Ok(0)
}

/// KFDP_IOC_SAMPLE.
pub(crate) fn sample<B: Backend>(owner: &Arc<Owner<B>>, arg: usize, size: usize) -> Result {
    let header = || UserSlice::new(UserPtr::from_addr(arg), size);
    let mut s: kfdp_sample = header().reader().read()?;
    if s.reserved != 0 {
        return Err(EINVAL);
    }
    if s.capacity > 0 && (s.entry_size as usize) < ACT_SIZE {
        return Err(EINVAL);
    }
    header().writer().write(&s)?;

    let cap = s.capacity.min(MAX_WATCHES) as usize;
    let mut out = KVVec::with_capacity(cap, GFP_KERNEL)?;
    let (total, pending) = {
        // No sweep: SAMPLE is the daemon's hot path, and housekeeping notices
        // an exited target, and pins a moved watch again, within SWEEP_MS.
        let guard = owner.state.lock();
        let state = &*guard;
        s.timestamp_ns = now_ns() as u64;
        let mut pending = 0u32;
        for w in state.watches.iter() {
            let (r, wr) = w.indices();
            let mut flags = 0;
            // A moved watch's pages are no longer its queue's.
            if r != wr && !w.moved() {
                flags |= uapi::KFDP_ACT_PENDING;
                pending += 1;
            }
            let gone = attachment(&state.attachments, w.handle).is_none_or(|a| a.target.is_none());
            if gone {
                flags |= uapi::KFDP_ACT_GONE;
            }
            if out.len() < cap {
                out.push(
                    kfdp_activity {
                        handle: w.handle,
                        gpu_id: w.gpu_id,
                        queue_id: w.queue_id,
                        flags,
                        read_index: r,
                        write_index: wr,
                        reserved: 0,
                    },
                    GFP_KERNEL,
                )?;
            }
        }
        (state.watches.len() as u32, pending)
    };
    user_array::write(s.entries_ptr, s.entry_size, &out)?;
    s.num_watches = total;
    s.num_pending = pending;
    header().writer().write(&s)
}

/// KFDP_IOC_ARM.
pub(crate) fn arm<B: Backend>(owner: &Arc<Owner<B>>, arg: usize, size: usize) -> Result {
    let a: kfdp_arm = UserSlice::new(UserPtr::from_addr(arg), size)
        .reader()
        .read()?;
    if a.reserved != [0; 2] {
        return Err(EINVAL);
    }
    let condition = match a.condition {
        uapi::KFDP_ARM_OFF => {
            if a.eventfd != -1 || a.period_us != 0 || a.idle_us != 0 {
                return Err(EINVAL);
            }
            let old = owner.state.lock().armed.take();
            // Stops the timer (waiting for a running callback) unlocked.
            drop(old);
            return Ok(());
        }
        uapi::KFDP_ARM_ANY_BUSY if a.idle_us == 0 => Condition::AnyBusy,
        uapi::KFDP_ARM_ALL_IDLE if a.idle_us <= MAX_IDLE_US => Condition::AllIdle {
            idle_ns: i64::from(a.idle_us) * 1000,
        },
        _ => return Err(EINVAL),
    };
    if !(MIN_PERIOD_US..=MAX_PERIOD_US).contains(&a.period_us) {
        return Err(EINVAL);
    }
    let eventfd = Arc::new(EventFd::get(a.eventfd)?, GFP_KERNEL)?;
    let period = Delta::from_micros(i64::from(a.period_us));

    let mut guard = owner.state.lock();
    let state = &mut *guard;
    if state.closed {
        return Err(EBADF);
    }
    // Built before the old one goes: a failure leaves the old one armed.
    let sampler = Sampler::start(&state.watches, condition, period, eventfd, now_ns())?;
    let old = state.armed.replace(sampler);
    drop(guard);
    drop(old);
    Ok(())
}
