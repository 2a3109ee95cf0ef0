// SPDX-License-Identifier: GPL-2.0

//! KFDP_IOC_PREEMPT and KFDP_IOC_RESUME: copying a batch in once, checking
//! what concerns the whole call, and writing the per-entry statuses back.
//! The engine itself is [`Owner::run_batch`].

use kernel::{
    prelude::*,
    sync::Arc,
    uaccess::{
        UserPtr,
        UserSlice, //
    },
};

use crate::{
    backend::{
        Backend,
        Op, //
    },
    engine::owner::{
        Owner,
        MAX_LEASE_MS, //
    },
    ioctl::user_array,
    uapi::{
        kfdp_batch,
        kfdp_queue_ref,
        KFDP_BATCH_ALL_OR_NOTHING,
        KFDP_BATCH_VALIDATE_ONLY,
        KFDP_MAX_BATCH, //
    },
};

/// Size of the kernel's element; larger `entry_size`s carry a tail that must
/// be zero ([`user_array`]).
const REF_SIZE: usize = size_of::<kfdp_queue_ref>();

/// Validates a batch header: everything here fails the whole call.
pub(crate) fn check_header(b: &kfdp_batch, op: Op) -> Result {
    if b.flags & !(KFDP_BATCH_VALIDATE_ONLY | KFDP_BATCH_ALL_OR_NOTHING) != 0 {
        return Err(EINVAL);
    }
    if b.reserved != [0; 2] {
        return Err(EINVAL);
    }
    if b.num_entries > KFDP_MAX_BATCH {
        return Err(E2BIG);
    }
    if (b.entry_size as usize) < REF_SIZE {
        return Err(EINVAL);
    }
    match op {
        Op::Preempt if b.lease_ms > MAX_LEASE_MS => Err(EINVAL),
        Op::Resume if b.lease_ms != 0 => Err(EINVAL),
        _ => Ok(()),
    }
}

/// Batches of up to this many entries are decoded into a buffer on the
/// stack (256 bytes): an allocation and its free were a tenth of a
/// single-entry PREEMPT's cost.
const ENTRIES_ON_STACK: usize = 16;

/// KFDP_IOC_PREEMPT (`op == Op::Preempt`) or KFDP_IOC_RESUME.
pub(crate) fn batch<B: Backend>(owner: &Arc<Owner<B>>, op: Op, arg: usize, size: usize) -> Result {
    let header = || UserSlice::new(UserPtr::from_addr(arg), size);
    let mut b: kfdp_batch = header().reader().read()?;
    check_header(&b, op)?;
    let mut small = [kfdp_queue_ref::default(); ENTRIES_ON_STACK];
    let mut large = KVVec::new();
    let n = b.num_entries as usize;
    let entries: &mut [kfdp_queue_ref] = if n <= ENTRIES_ON_STACK {
        &mut small[..n]
    } else {
        large.resize(n, kfdp_queue_ref::default(), GFP_KERNEL)?;
        &mut large
    };
    user_array::read_into(b.entries_ptr, b.entry_size, entries)?;
    // No new preemption once hibernation has begun (RESUME is always allowed).
    let _activity = if op == Op::Preempt && b.flags & KFDP_BATCH_VALIDATE_ONLY == 0 {
        Some(crate::engine::pm::CallInFlight::begin()?)
    } else {
        None
    };
    // Every output is written once before anything changes, so that a bad
    // pointer is EFAULT with nothing changed.
    header().writer().write(&b)?;
    user_array::write(b.entries_ptr, b.entry_size, entries)?;

    // No sweep here: an exited target's entries fail in the backend (ESRCH)
    // as they would in the engine, and housekeeping drops its pin within
    // SWEEP_MS; a sweep asked every attachment's backend at every batch.
    let applied = {
        let mut state = owner.state.lock();
        owner.run_batch(&mut state, op, b.flags, b.lease_ms, entries)
    };

    b.num_ok = entries.iter().filter(|e| e.status == 0).count() as u32;
    b.num_runlist_updates = applied.runlist_updates;
    b.elapsed_ns = applied.elapsed_ns;
    let res = user_array::write(b.entries_ptr, b.entry_size, entries)
        .and_then(|()| header().writer().write(&b));
    if op == Op::Preempt && b.lease_ms != 0 {
        owner.rearm();
    }
    res
}
