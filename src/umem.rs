// SPDX-License-Identifier: GPL-2.0

//! Pinned pages of a tenant's memory and the eventfds the module signals:
//! the two things activity detection needs that the kernel crate has no
//! abstraction for (the C side is `glue/kfdp_umem.c`).

use core::ptr::NonNull;

use kernel::{
    prelude::*,
    sync::atomic::{
        Atomic,
        Relaxed, //
    },
};

use crate::glue;

pub(crate) use kernel::page::PAGE_SIZE;

/// Pages pinned now (debugfs `stats`: `pinned_pages`): by watches and by the
/// simulated node's rings. Zero whenever neither exists; the fuzzer
/// (tests/fuzz) checks that after every program, so a path that forgets an
/// unpin is found.
pub(crate) static PINNED_PAGES: Atomic<u64> = Atomic::new(0);
/// Eventfd references held now (debugfs `stats`: `eventfds_held`), zero
/// whenever no ARM is in force.
pub(crate) static EVENTFDS_HELD: Atomic<u64> = Atomic::new(0);

/// One page of a user address space, pinned long term and mapped in the
/// kernel, read (and, for the simulated node, written) with single 64-bit
/// accesses from any context.
///
/// # Invariants
///
/// `page` was pinned by `kfdp_umem_pin` and is unpinned only by [`Drop`];
/// `base` is its kernel address (page aligned), valid while it is pinned;
/// `charged` is the mm the pin is charged to (or null), as that call gave it.
/// Each live value is counted once in [`PINNED_PAGES`].
pub(crate) struct UserPage {
    page: NonNull<glue::page>,
    base: NonNull<u8>,
    write: bool,
    charged: *mut glue::mm_struct,
}

// SAFETY: A pinned page may be read, written and unpinned from any thread
// (the charged mm is only an mm_count reference and an atomic counter); the
// accesses below are single aligned 64-bit volatile accesses, as
// READ_ONCE/WRITE_ONCE are.
unsafe impl Send for UserPage {}

// SAFETY: As above.
unsafe impl Sync for UserPage {}

impl UserPage {
    /// Pins the page holding `addr` in `mm`.
    ///
    /// # Safety
    ///
    /// `mm` must point to a `struct mm_struct` whose `mm_count` the caller
    /// holds for the duration of the call.
    pub(crate) unsafe fn pin(mm: *mut glue::mm_struct, addr: u64, write: bool) -> Result<Self> {
        let mut page = core::ptr::null_mut();
        let mut kaddr = core::ptr::null_mut();
        let mut charged = core::ptr::null_mut();
        let start = addr & !(PAGE_SIZE as u64 - 1);
        // SAFETY: The caller keeps `mm` valid; `page`, `kaddr` and `charged`
        // are valid places for the results.
        let r =
            unsafe { glue::kfdp_umem_pin(mm, start, write, &mut page, &mut kaddr, &mut charged) };
        if r < 0 {
            return Err(Error::from_errno(r));
        }
        match (NonNull::new(page), NonNull::new(kaddr.cast::<u8>())) {
            (Some(page), Some(base)) => {
                PINNED_PAGES.fetch_add(1, Relaxed);
                // INVARIANT: `kfdp_umem_pin` pinned `page`, charged it to
                // `charged` and returned the kernel address of its start
                // (`start` is page aligned).
                Ok(Self {
                    page,
                    base,
                    write,
                    charged,
                })
            }
            (Some(page), None) => {
                // SAFETY: Pinned and charged just above; not used again.
                unsafe { glue::kfdp_umem_unpin(page.as_ptr(), false, charged) };
                Err(EFAULT)
            }
            _ => Err(EFAULT),
        }
    }

    /// The 64-bit word at byte `offset` of the page (rounded down to a
    /// multiple of 8, wrapped into the page).
    fn word(&self, offset: usize) -> *mut u64 {
        let off = offset & (PAGE_SIZE - 8);
        // SAFETY: `off` is below PAGE_SIZE, so the result stays in the page.
        unsafe { self.base.as_ptr().add(off) }.cast::<u64>()
    }

    /// Reads the word at `offset`, as READ_ONCE does.
    pub(crate) fn read(&self, offset: usize) -> u64 {
        // SAFETY: By the type invariant the page is pinned and mapped at
        // `base`; `word` gives an aligned address inside it. The tenant (or
        // the GPU) may write it concurrently: a volatile aligned 64-bit load
        // is single-copy atomic on the supported architectures.
        unsafe { core::ptr::read_volatile(self.word(offset)) }
    }

    /// Writes the word at `offset`, as WRITE_ONCE does; ignored on a page
    /// pinned read-only.
    pub(crate) fn write(&self, offset: usize, value: u64) {
        if self.write {
            // SAFETY: As in `read`, and the page was pinned writable.
            unsafe { core::ptr::write_volatile(self.word(offset), value) };
        }
    }
}

impl Drop for UserPage {
    fn drop(&mut self) {
        // SAFETY: By the type invariant `page` is pinned and charged to
        // `charged`; neither is used again.
        unsafe { glue::kfdp_umem_unpin(self.page.as_ptr(), self.write, self.charged) };
        PINNED_PAGES.fetch_sub(1, Relaxed);
    }
}

/// Notice that a user page may no longer be what its address maps: it was
/// unmapped, zapped or moved, or its address space torn down (not on
/// `mprotect` or fork's copy-on-write protection, which leave the address
/// its page). A pin keeps the
/// page, not the address, so a word pinned before that reads memory its
/// owner no longer uses, whatever the address maps now.
///
/// # Invariants
///
/// `notice` was added by `kfdp_umem_notice_add` and is removed only by
/// [`Drop`].
pub(crate) struct UnmapNotice {
    notice: NonNull<glue::kfdp_umem_notice>,
}

// SAFETY: The notice's flag is read with READ_ONCE from any context; its
// removal may run on any thread in process context.
unsafe impl Send for UnmapNotice {}

// SAFETY: As above.
unsafe impl Sync for UnmapNotice {}

impl UnmapNotice {
    /// A notice on the page holding `addr` in `mm`.
    ///
    /// # Safety
    ///
    /// `mm` must point to a `struct mm_struct` whose `mm_count` the caller
    /// holds for the duration of the call.
    unsafe fn add(mm: *mut glue::mm_struct, addr: u64) -> Result<Self> {
        let mut notice = core::ptr::null_mut();
        // SAFETY: The caller keeps `mm` valid; `notice` is a valid place for
        // the result.
        let r = unsafe { glue::kfdp_umem_notice_add(mm, addr, &mut notice) };
        if r < 0 {
            return Err(Error::from_errno(r));
        }
        // INVARIANT: `kfdp_umem_notice_add` succeeded and gave the notice.
        Ok(Self {
            notice: NonNull::new(notice).ok_or(ENOMEM)?,
        })
    }

    /// Whether the page changed since the notice was added.
    pub(crate) fn fired(&self) -> bool {
        // SAFETY: By the type invariant the notice is live.
        unsafe { glue::kfdp_umem_notice_fired(self.notice.as_ptr()) }
    }
}

impl Drop for UnmapNotice {
    fn drop(&mut self) {
        // SAFETY: By the type invariant the notice is live and ours; not
        // used again.
        unsafe { glue::kfdp_umem_notice_remove(self.notice.as_ptr()) };
    }
}

/// A 64-bit word of user memory: its pinned page and its offset there,
/// and, for a word whose address may be given new memory, notice of it.
pub(crate) struct UserWord {
    page: UserPage,
    offset: usize,
    /// Dropped after `page`: no window in which the page is pinned unwatched.
    unmapped: Option<UnmapNotice>,
}

impl UserWord {
    /// Pins the word at `addr` of `mm`; EFAULT unless it is 8-byte aligned.
    ///
    /// # Safety
    ///
    /// As [`UserPage::pin`].
    pub(crate) unsafe fn pin(mm: *mut glue::mm_struct, addr: u64, write: bool) -> Result<Self> {
        if addr == 0 || addr % 8 != 0 {
            return Err(EFAULT);
        }
        // SAFETY: The caller's guarantee is passed on.
        let page = unsafe { UserPage::pin(mm, addr, write)? };
        Ok(Self {
            page,
            offset: (addr as usize) & (PAGE_SIZE - 1),
            unmapped: None,
        })
    }

    /// As [`Self::pin`], with notice of the page's address getting other
    /// memory ([`Self::unmapped`]); the notice is taken first (once any
    /// invalidation under way has ended), so that no change after the pin
    /// goes unnoticed.
    ///
    /// # Safety
    ///
    /// As [`UserPage::pin`].
    pub(crate) unsafe fn pin_noticed(
        mm: *mut glue::mm_struct,
        addr: u64,
        write: bool,
    ) -> Result<Self> {
        if addr == 0 || addr % 8 != 0 {
            return Err(EFAULT);
        }
        // SAFETY: The caller's guarantee is passed on.
        let notice = unsafe { UnmapNotice::add(mm, addr)? };
        // SAFETY: The caller's guarantee is passed on.
        let mut word = unsafe { Self::pin(mm, addr, write)? };
        word.unmapped = Some(notice);
        Ok(word)
    }

    /// Whether the word's address may now map other memory than the pinned
    /// page (false for a word pinned without notice).
    pub(crate) fn unmapped(&self) -> bool {
        self.unmapped.as_ref().is_some_and(UnmapNotice::fired)
    }

    /// Reads it.
    pub(crate) fn read(&self) -> u64 {
        self.page.read(self.offset)
    }

    /// Writes it.
    pub(crate) fn write(&self, value: u64) {
        self.page.write(self.offset, value)
    }
}

/// An eventfd the module signals.
///
/// # Invariants
///
/// `ctx` holds a reference taken by `kfdp_eventfd_get`, dropped by [`Drop`].
/// Each live value is counted once in [`EVENTFDS_HELD`].
pub(crate) struct EventFd {
    ctx: NonNull<glue::eventfd_ctx>,
}

// SAFETY: eventfd contexts are reference counted and may be signalled and
// released from any thread (eventfd_signal takes an irq-safe lock).
unsafe impl Send for EventFd {}

// SAFETY: As above.
unsafe impl Sync for EventFd {}

impl EventFd {
    /// The eventfd of the caller's descriptor `fd`: EBADF if `fd` is not
    /// open, EINVAL if it is not an eventfd.
    pub(crate) fn get(fd: i32) -> Result<Self> {
        let mut ctx = core::ptr::null_mut();
        // SAFETY: `ctx` is a valid place for the result.
        let r = unsafe { glue::kfdp_eventfd_get(fd, &mut ctx) };
        if r < 0 {
            return Err(Error::from_errno(r));
        }
        let ctx = NonNull::new(ctx).ok_or(EBADF)?;
        EVENTFDS_HELD.fetch_add(1, Relaxed);
        // INVARIANT: `kfdp_eventfd_get` succeeded and took a reference.
        Ok(Self { ctx })
    }

    /// Adds one to the eventfd's counter, waking its pollers. Callable from
    /// hardirq context.
    pub(crate) fn signal(&self) {
        // SAFETY: By the type invariant `ctx` is a live context.
        unsafe { glue::kfdp_eventfd_signal(self.ctx.as_ptr()) };
    }
}

impl Drop for EventFd {
    fn drop(&mut self) {
        // SAFETY: By the type invariant the reference is ours; not used again.
        unsafe { glue::kfdp_eventfd_put(self.ctx.as_ptr()) };
        EVENTFDS_HELD.fetch_sub(1, Relaxed);
    }
}
