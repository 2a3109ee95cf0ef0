// SPDX-License-Identifier: GPL-2.0

//! User buffers for the calls: each one ends at an unmapped guard page, so
//! that a kernel reading one entry too many faults (EFAULT) instead of
//! reading the next buffer, and [`crate::program::Ptr`] can name null,
//! misaligned, unmapped, kernel, read-only and short pointers.

use std::ptr::NonNull;

use crate::program::Ptr;

const PAGE: usize = 4096;

/// An address below `mmap_min_addr`: never mapped.
const UNMAPPED: u64 = 0x1000;
/// The start of x86-64's direct map: a kernel address.
const KERNEL: u64 = 0xffff_8880_0000_0000;

/// `len` bytes (8 more for misaligned use) that end at a guard page.
///
/// # Invariants
///
/// `map` is an anonymous mapping of `map_len` bytes whose last page (at
/// `guard`) is PROT_NONE; `data` is `align`-aligned and at least `len + 8`
/// bytes before that page, at most `len + 8 + align - 1` (8 spare bytes for
/// a misaligned pointer).
pub struct Buf {
    map: NonNull<u8>,
    map_len: usize,
    data: NonNull<u8>,
    guard: u64,
    len: usize,
}

// SAFETY: The buffer is plain anonymous memory owned by this value.
unsafe impl Send for Buf {}

impl Buf {
    /// A zeroed buffer of `len` bytes, 8-byte aligned, 8 bytes before its
    /// guard page (at most 16 MiB: larger requests are cut, the kernel then
    /// faults on the guard page).
    pub fn new(len: usize) -> Option<Self> {
        Self::aligned(len, 8)
    }

    /// As [`Buf::new`], aligned to `align` (a power of two of at most 64; a
    /// ring's packets are 64-byte aligned).
    pub fn aligned(len: usize, align: usize) -> Option<Self> {
        let len = len.min(16 << 20);
        let pages = (len + 72).div_ceil(PAGE) + 1;
        let map_len = pages * PAGE;
        // SAFETY: A new private anonymous mapping; nothing aliases it.
        let map = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if map == libc::MAP_FAILED {
            return None;
        }
        let map = NonNull::new(map.cast::<u8>())?;
        // SAFETY: The last page of the mapping made above.
        let guard = unsafe { map.as_ptr().add(map_len - PAGE) };
        // SAFETY: `guard` is page aligned and inside the mapping.
        unsafe { libc::mprotect(guard.cast(), PAGE, libc::PROT_NONE) };
        // At least `len + 8` bytes before the guard page, rounded down to
        // `align`: inside the mapping, which has `len + 72` bytes or more
        // before its guard page.
        let start = (guard as usize - len - 8) & !(align.clamp(8, 64) - 1);
        let data = NonNull::new(start as *mut u8)?;
        // INVARIANT: as built above.
        Some(Self {
            map,
            map_len,
            data,
            guard: guard as u64,
            len,
        })
    }

    /// Its address.
    pub fn addr(&self) -> u64 {
        self.data.as_ptr() as u64
    }

    /// The address `ptr` names for this buffer.
    pub fn user_ptr(&self, ptr: Ptr, read_only: u64) -> u64 {
        match ptr {
            Ptr::Good => self.addr(),
            Ptr::Null => 0,
            Ptr::Misaligned(k) => self.addr() + u64::from(k.clamp(1, 7)),
            Ptr::Unmapped => UNMAPPED,
            Ptr::Kernel => KERNEL,
            Ptr::ReadOnly => read_only,
            Ptr::Short(n) => self.guard - u64::from(n).min(self.guard - self.addr()),
        }
    }

    /// Reads a plain value the kernel wrote at byte `off` (zero if out of
    /// range). The kernel (or the simulated node) may write the buffer at
    /// any time, so it is only ever read and written through raw pointers.
    pub fn read<T: Copy + Default>(&self, off: usize) -> T {
        if off + std::mem::size_of::<T>() > self.len {
            return T::default();
        }
        // SAFETY: In range, checked above, of the mapping the type
        // invariant keeps alive; through a raw pointer (no reference to
        // memory another agent writes), unaligned as an entry may be.
        unsafe { std::ptr::read_unaligned(self.data.as_ptr().add(off).cast::<T>()) }
    }

    /// Writes a plain value at byte `off` (ignored if out of range).
    pub fn write<T: Copy>(&self, off: usize, v: T) {
        if off + std::mem::size_of::<T>() > self.len {
            return;
        }
        // SAFETY: As in `read`.
        unsafe { std::ptr::write_unaligned(self.data.as_ptr().add(off).cast::<T>(), v) }
    }
}

impl Drop for Buf {
    fn drop(&mut self) {
        // SAFETY: By the type invariant; not used again.
        unsafe { libc::munmap(self.map.as_ptr().cast(), self.map_len) };
    }
}

/// One read-only page, for [`Ptr::ReadOnly`].
pub fn read_only_page() -> u64 {
    // SAFETY: A new private anonymous read-only mapping, kept for the life
    // of the process.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            PAGE,
            libc::PROT_READ,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        UNMAPPED
    } else {
        p as u64
    }
}
