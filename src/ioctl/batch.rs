// SPDX-License-Identifier: GPL-2.0

//! KFDP_IOC_PREEMPT and KFDP_IOC_RESUME: copying a batch in once, checking
//! what concerns the whole call, and writing the per-entry statuses back.
//! The engine itself is [`Owner::run_batch`].

use kernel::{
    prelude::*,
    sync::Arc,
    transmute::AsBytes,
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
    uapi::{
        kfdp_batch,
        kfdp_queue_ref,
        KFDP_BATCH_ALL_OR_NOTHING,
        KFDP_BATCH_VALIDATE_ONLY,
        KFDP_MAX_BATCH, //
    },
};

/// Size of the kernel's element; larger `entry_size`s carry a tail that must
/// be zero (`copy_struct_from_user` semantics).
pub(crate) const REF_SIZE: usize = size_of::<kfdp_queue_ref>();

/// The user address of element `i` of an array.
pub(crate) fn element(base: u64, i: usize, size: usize) -> Result<UserPtr> {
    let off = i.checked_mul(size).ok_or(EINVAL)?;
    let base = usize::try_from(base).map_err(|_| EFAULT)?;
    Ok(UserPtr::from_addr(base.checked_add(off).ok_or(EFAULT)?))
}

/// Checks that the `len` bytes at `ptr` are zero: E2BIG otherwise, as
/// `copy_struct_from_user` answers for a non-zero tail.
pub(crate) fn check_zero_tail(ptr: UserPtr, len: usize) -> Result {
    let mut reader = UserSlice::new(ptr, len).reader();
    let mut buf = [0u8; 64];
    while !reader.is_empty() {
        let n = reader.len().min(buf.len());
        reader.read_slice(&mut buf[..n])?;
        if buf[..n].iter().any(|&b| b != 0) {
            return Err(E2BIG);
        }
    }
    Ok(())
}

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

/// Copies in `n` `kfdp_queue_ref` entries of `size` bytes each from `base`
/// (a PREEMPT/RESUME batch, a WATCH/UNWATCH). The caller has checked that
/// `n` is at most KFDP_MAX_BATCH, which bounds the allocation, and that
/// `size` is at least the element's.
pub(crate) fn read_refs(base: u64, n: u32, size: u32) -> Result<KVVec<kfdp_queue_ref>> {
    let mut entries = KVVec::new();
    entries.resize(n as usize, kfdp_queue_ref::default(), GFP_KERNEL)?;
    read_refs_into(base, size, &mut entries)?;
    Ok(entries)
}

/// Fills `entries` from the array of `entries.len()` elements of `size`
/// bytes at `base`. An array in the kernel's own layout (`size` equal to
/// the element's, what every caller of this ABI version passes) is copied
/// in one go: a copy per entry was most of a large batch's decoding time
/// (`Documentation/design.rst`, "Where a batch's time goes").
pub(crate) fn read_refs_into(base: u64, size: u32, entries: &mut [kfdp_queue_ref]) -> Result {
    let size = size as usize;
    if size == REF_SIZE {
        let len = size_of_val(entries);
        return UserSlice::new(element(base, 0, size)?, len)
            .reader()
            .read_slice(AsBytes::as_bytes_mut(entries));
    }
    for (i, e) in entries.iter_mut().enumerate() {
        let ptr = element(base, i, size)?;
        *e = UserSlice::new(ptr, REF_SIZE).reader().read()?;
        check_zero_tail(ptr.wrapping_byte_add(REF_SIZE), size - REF_SIZE)?;
    }
    Ok(())
}

/// Batches up to this size are decoded into a buffer on the stack (256
/// bytes): an allocation and its free were a tenth of a single-entry
/// PREEMPT's cost.
const SMALL_BATCH: usize = 16;

/// Writes `entries` back (their statuses) to the array `read_refs` read,
/// in one copy when it has the kernel's layout.
pub(crate) fn write_refs(base: u64, size: u32, entries: &[kfdp_queue_ref]) -> Result {
    let size = size as usize;
    if size == REF_SIZE {
        return UserSlice::new(element(base, 0, size)?, size_of_val(entries))
            .writer()
            .write_slice(AsBytes::as_bytes(entries));
    }
    for (i, e) in entries.iter().enumerate() {
        let ptr = element(base, i, size)?;
        UserSlice::new(ptr, REF_SIZE).writer().write(e)?;
    }
    Ok(())
}

/// KFDP_IOC_PREEMPT (`op == Op::Preempt`) or KFDP_IOC_RESUME.
pub(crate) fn batch<B: Backend>(owner: &Arc<Owner<B>>, op: Op, arg: usize, size: usize) -> Result {
    let header = || UserSlice::new(UserPtr::from_addr(arg), size);
    let mut b: kfdp_batch = header().reader().read()?;
    check_header(&b, op)?;
    let mut small = [kfdp_queue_ref::default(); SMALL_BATCH];
    let mut large = KVVec::new();
    let n = b.num_entries as usize;
    let entries: &mut [kfdp_queue_ref] = if n <= SMALL_BATCH {
        &mut small[..n]
    } else {
        large.resize(n, kfdp_queue_ref::default(), GFP_KERNEL)?;
        &mut large
    };
    read_refs_into(b.entries_ptr, b.entry_size, entries)?;
    // No new preemption once hibernation has begun (RESUME is always allowed).
    let _activity = if op == Op::Preempt && b.flags & KFDP_BATCH_VALIDATE_ONLY == 0 {
        Some(crate::pm::Activity::begin()?)
    } else {
        None
    };
    // Every output is written once before anything changes, so that a bad
    // pointer is EFAULT with nothing changed.
    header().writer().write(&b)?;
    write_refs(b.entries_ptr, b.entry_size, entries)?;

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
    let res =
        write_refs(b.entries_ptr, b.entry_size, entries).and_then(|()| header().writer().write(&b));
    if op == Op::Preempt && b.lease_ms != 0 {
        owner.rearm();
    }
    res
}
