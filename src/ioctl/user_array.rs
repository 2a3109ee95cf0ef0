// SPDX-License-Identifier: GPL-2.0

//! Arrays of fixed-size elements in user memory, as the ABI passes them:
//! a base address, a count, and an `entry_size` that may be larger than the
//! kernel's element (a newer caller's), whose tail must then be zero
//! (`copy_struct_from_user` semantics). PREEMPT, RESUME, WATCH and UNWATCH
//! read and write back `kfdp_queue_ref`s; QUERY and SAMPLE write out.
//!
//! An array in the kernel's own layout (`entry_size` equal to the
//! element's, what every caller of this ABI version passes) is copied in
//! one go: a copy per entry was most of a large batch's decoding time
//! (`Documentation/design.rst`, "Where a batch's time goes").

use kernel::{
    prelude::*,
    transmute::{
        AsBytes,
        FromBytes, //
    },
    uaccess::{
        UserPtr,
        UserSlice, //
    },
};

/// The user address of element `i` of an array at `base` whose elements
/// are `size` bytes apart.
pub(crate) fn element(base: u64, i: usize, size: usize) -> Result<UserPtr> {
    let off = i.checked_mul(size).ok_or(EINVAL)?;
    let base = usize::try_from(base).map_err(|_| EFAULT)?;
    Ok(UserPtr::from_addr(base.checked_add(off).ok_or(EFAULT)?))
}

/// Checks that the `len` bytes at `ptr` are zero: E2BIG otherwise, as
/// `copy_struct_from_user` answers for a non-zero tail.
///
/// `entry_size` is the caller's to choose, up to 4 GiB, so the tails of one
/// call can add up to terabytes of zeroes: every page's worth, the task may
/// be rescheduled, and a fatal signal ends the call (`EINTR`).
pub(crate) fn check_zero_tail(ptr: UserPtr, len: usize) -> Result {
    let mut reader = UserSlice::new(ptr, len).reader();
    let mut buf = [0u8; 256];
    let mut since_yield = 0usize;
    while !reader.is_empty() {
        let n = reader.len().min(buf.len());
        reader.read_slice(&mut buf[..n])?;
        if buf[..n].iter().any(|&b| b != 0) {
            return Err(E2BIG);
        }
        since_yield += n;
        if since_yield >= TAIL_BYTES_PER_YIELD {
            since_yield = 0;
            // SAFETY: Called from an ioctl, in process context, holding no
            // lock (the callers copy in before they lock anything).
            if !unsafe { crate::glue::kfdp_user_copy_continue() } {
                return Err(EINTR);
            }
        }
    }
    Ok(())
}

/// Bytes of zero tail checked between two chances to reschedule.
const TAIL_BYTES_PER_YIELD: usize = 4096;

/// Fills `out` from the array of `out.len()` elements `size` bytes apart at
/// `base`. EINVAL if `size` is smaller than the element.
pub(crate) fn read_into<T: FromBytes + AsBytes>(base: u64, size: u32, out: &mut [T]) -> Result {
    let size = size as usize;
    let elem = size_of::<T>();
    if size < elem {
        return Err(EINVAL);
    }
    if size == elem {
        let len = size_of_val(out);
        return UserSlice::new(element(base, 0, size)?, len)
            .reader()
            .read_slice(AsBytes::as_bytes_mut(out));
    }
    for (i, e) in out.iter_mut().enumerate() {
        let ptr = element(base, i, size)?;
        *e = UserSlice::new(ptr, elem).reader().read()?;
        check_zero_tail(ptr.wrapping_byte_add(elem), size - elem)?;
    }
    Ok(())
}

/// Copies in `n` elements of `size` bytes each from `base`, into memory of
/// the kernel's. The caller bounds `n` (the ABI's maxima), which bounds the
/// allocation.
pub(crate) fn read<T: FromBytes + AsBytes + Default + Clone>(
    base: u64,
    n: u32,
    size: u32,
) -> Result<KVVec<T>> {
    let mut out = KVVec::new();
    out.resize(n as usize, T::default(), GFP_KERNEL)?;
    read_into(base, size, &mut out)?;
    Ok(out)
}

/// Writes `entries` to the array of elements `size` bytes apart at `base`
/// (each element's first bytes; a larger element's tail is left as the
/// caller gave it). EINVAL if `size` is smaller than the element.
pub(crate) fn write<T: AsBytes>(base: u64, size: u32, entries: &[T]) -> Result {
    let size = size as usize;
    let elem = size_of::<T>();
    if entries.is_empty() {
        return Ok(());
    }
    if size < elem {
        return Err(EINVAL);
    }
    if size == elem {
        return UserSlice::new(element(base, 0, size)?, size_of_val(entries))
            .writer()
            .write_slice(AsBytes::as_bytes(entries));
    }
    for (i, e) in entries.iter().enumerate() {
        let ptr = element(base, i, size)?;
        UserSlice::new(ptr, elem).writer().write(e)?;
    }
    Ok(())
}
