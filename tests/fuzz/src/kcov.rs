// SPDX-License-Identifier: GPL-2.0

//! KCOV (Documentation/dev-tools/kcov.rst) for the calling thread: the
//! program counters of the instrumented kernel code that this thread's
//! system calls ran. The fuzzing kernel instruments only kfd_preempt
//! (scripts/vm-kernel-kcov.config), so every PC is one of the module's.

use std::{fs::OpenOptions, io, os::fd::AsRawFd, os::fd::OwnedFd};

/// `KCOV_INIT_TRACE`: `_IOR('c', 1, unsigned long)`.
const KCOV_INIT_TRACE: libc::c_ulong = 0x8008_6301;
/// `KCOV_ENABLE`: `_IO('c', 100)`.
const KCOV_ENABLE: libc::c_ulong = 0x6364;
/// `KCOV_TRACE_PC`.
const KCOV_TRACE_PC: libc::c_ulong = 0;

/// PCs one execution can record; KCOV drops the rest (a campaign's
/// programs reach a few thousand).
pub const AREA_WORDS: usize = 1 << 18;

/// KCOV enabled on the thread that made it.
///
/// # Invariants
///
/// `area` is a shared mapping of `AREA_WORDS` words of `_fd`, alive as long
/// as `self`.
pub struct Kcov {
    _fd: OwnedFd,
    area: *mut u64,
}

impl Kcov {
    /// Enables KCOV for the calling thread; only that thread's system calls
    /// are traced.
    pub fn enable() -> io::Result<Self> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open("/sys/kernel/debug/kcov")?;
        let fd = OwnedFd::from(file);
        // SAFETY: KCOV_INIT_TRACE takes the number of words by value.
        if unsafe { libc::ioctl(fd.as_raw_fd(), KCOV_INIT_TRACE, AREA_WORDS) } != 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: A new shared mapping of the KCOV buffer that was just
        // sized; nothing else maps this address.
        let area = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                AREA_WORDS * 8,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        if area == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: KCOV_ENABLE takes the trace mode by value.
        if unsafe { libc::ioctl(fd.as_raw_fd(), KCOV_ENABLE, KCOV_TRACE_PC) } != 0 {
            let e = io::Error::last_os_error();
            // SAFETY: Mapped just above, not used again.
            unsafe { libc::munmap(area, AREA_WORDS * 8) };
            return Err(e);
        }
        // INVARIANT: mapped above with AREA_WORDS words.
        Ok(Self {
            _fd: fd,
            area: area.cast(),
        })
    }

    /// Starts a new trace.
    pub fn reset(&self) {
        // SAFETY: By the type invariant word 0 (the count) is mapped; the
        // kernel writes it only during this thread's system calls.
        unsafe { std::ptr::write_volatile(self.area, 0) };
    }

    /// Appends the PCs traced since [`Kcov::reset`] to `pcs`, and resets.
    pub fn drain_into(&self, pcs: &mut Vec<u64>) {
        self.for_each_pc(|pc| pcs.push(pc));
        self.reset();
    }

    /// Calls `f` with each PC traced since [`Kcov::reset`].
    pub fn for_each_pc(&self, mut f: impl FnMut(u64)) {
        // SAFETY: As in `reset`.
        let n = unsafe { std::ptr::read_volatile(self.area) } as usize;
        for i in 1..=n.min(AREA_WORDS - 1) {
            // SAFETY: `i` is inside the mapping.
            f(unsafe { std::ptr::read_volatile(self.area.add(i)) });
        }
    }
}

impl Drop for Kcov {
    fn drop(&mut self) {
        // SAFETY: By the type invariant; not used again. (The thread
        // stays traced into the unmapped area's kcov until it exits; no
        // thread makes a second one.)
        unsafe { libc::munmap(self.area.cast(), AREA_WORDS * 8) };
    }
}
