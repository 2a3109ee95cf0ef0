//! The KFD debugger's queue suspension (`AMDKFD_IOC_DBG_TRAP`), the only
//! upstream way to take queues off an AMD GPU besides kfd_preempt, driven
//! by `bench --hardware` on the same queues for comparison.
//!
//! A target must be ptrace-attached by the caller (`PTRACE_SEIZE` leaves it
//! running) to be debug-enabled; from then on amdkfd knows the caller as
//! its debugger, so the bench detaches at once (a seized tracee that was
//! never stopped cannot be detached: it is interrupted first). A queue still
//! flagged `EC_QUEUE_NEW` is refused, so attaching takes a queue snapshot
//! that clears that flag.
//! While a process is debug-enabled kfd_preempt refuses to preempt it: the
//! bench runs this method last and drops the [`Debugger`] before the next
//! cell. The layouts are those of Linux's `include/uapi/linux/kfd_ioctl.h`
//! (ABI-stable); `tests/hw/kfd_dbg_abi.c` checks the same numbers against
//! that header at build time.

use std::{
    fs::OpenOptions,
    os::fd::{AsFd, AsRawFd, OwnedFd},
    time::{Duration, Instant},
};

use rustix::{
    event::{eventfd, EventfdFlags},
    ioctl::{ioctl, Opcode, Updater},
};

/// `_IOWR('K', 0x26, struct kfd_ioctl_dbg_trap_args)`, 32 bytes.
pub(crate) const AMDKFD_IOC_DBG_TRAP: Opcode = 0xc020_4b26;
const OP_ENABLE: u32 = 0;
const OP_DISABLE: u32 = 1;
const OP_SUSPEND_QUEUES: u32 = 6;
const OP_RESUME_QUEUES: u32 = 7;
const OP_GET_QUEUE_SNAPSHOT: u32 = 13;
/// `KFD_EC_MASK(EC_QUEUE_NEW)`: EC_QUEUE_NEW is 31.
const EC_QUEUE_NEW_MASK: u64 = 1 << 30;
/// Per-queue error bits SUSPEND/RESUME write back into the id array.
const QUEUE_ERROR_MASK: u32 = 1 << 30;
const QUEUE_INVALID_MASK: u32 = 1 << 31;
/// Room for one `struct kfd_queue_snapshot_entry` (64 bytes today).
const SNAPSHOT_ENTRY: usize = 128;

/// `struct kfd_ioctl_dbg_trap_args`: pid, op, and a 24-byte union whose
/// members the methods below fill as three u64 words (little-endian).
#[repr(C)]
#[derive(Default)]
pub(crate) struct DbgTrapArgs {
    pid: u32,
    op: u32,
    body: [u64; 3],
}

/// Two u32 fields of a union member, as the u64 word they share.
fn pair(low: u32, high: u32) -> u64 {
    u64::from(low) | (u64::from(high) << 32)
}

/// A debugger session over some processes; dropping it disables debugging
/// on each.
pub(crate) struct Debugger {
    kfd: OwnedFd,
    events: OwnedFd,
    pids: Vec<i32>,
}

impl Debugger {
    /// Opens the caller's own `/dev/kfd`, through which amdkfd takes
    /// debugger requests.
    pub(crate) fn new() -> Result<Self, String> {
        let kfd = OpenOptions::new()
            .read(true)
            .write(true)
            .open("/dev/kfd")
            .map_err(|e| format!("/dev/kfd: {e}"))?;
        let events = eventfd(0, EventfdFlags::CLOEXEC).map_err(|e| format!("eventfd: {e}"))?;
        Ok(Debugger {
            kfd: kfd.into(),
            events,
            pids: Vec::new(),
        })
    }

    fn trap(&self, pid: i32, op: u32, body: [u64; 3]) -> Result<i32, String> {
        let mut args = DbgTrapArgs {
            pid: pid as u32,
            op,
            body,
        };
        // SAFETY: AMDKFD_IOC_DBG_TRAP takes a `struct kfd_ioctl_dbg_trap_args`,
        // which `DbgTrapArgs` lays out (32 bytes, checked by a test); every
        // pointer in `body` points at a buffer the caller keeps alive and
        // sized as the op's size field says.
        let r = unsafe {
            ioctl(
                self.kfd.as_fd(),
                Updater::<AMDKFD_IOC_DBG_TRAP, DbgTrapArgs>::new(&mut args),
            )
        };
        r.map(|()| 0)
            .map_err(|e| format!("AMDKFD_IOC_DBG_TRAP op {op} on {pid}: {e}"))
    }

    /// Seizes `pid` with ptrace, enables the debugger on it and clears its
    /// queues' EC_QUEUE_NEW.
    pub(crate) fn attach(&mut self, pid: i32) -> Result<(), String> {
        // SAFETY: PTRACE_SEIZE takes no pointers (addr and data 0).
        let r = unsafe { libc::ptrace(libc::PTRACE_SEIZE, pid, 0usize, 0usize) };
        if r != 0 {
            return Err(format!(
                "ptrace(PTRACE_SEIZE, {pid}): {}",
                std::io::Error::last_os_error()
            ));
        }
        let mut rinfo = [0u64; 2]; // struct kfd_runtime_info, 16 bytes
        let enable = self.trap(
            pid,
            OP_ENABLE,
            [
                0,
                rinfo.as_mut_ptr() as u64,
                pair(16, self.events.as_raw_fd() as u32),
            ],
        );
        if enable.is_ok() {
            self.pids.push(pid);
        }
        let detached = detach(pid);
        enable?;
        detached?;
        let mut snapshot = vec![0u8; SNAPSHOT_ENTRY * 1024];
        self.trap(
            pid,
            OP_GET_QUEUE_SNAPSHOT,
            [
                EC_QUEUE_NEW_MASK,
                snapshot.as_mut_ptr() as u64,
                pair(1024, SNAPSHOT_ENTRY as u32),
            ],
        )?;
        Ok(())
    }

    /// Suspends `ids` of `pid` (no grace period); returns the wall time.
    pub(crate) fn suspend(&self, pid: i32, ids: &[u32]) -> Result<Duration, String> {
        let mut array = ids.to_vec();
        let t = Instant::now();
        self.trap(
            pid,
            OP_SUSPEND_QUEUES,
            [0, array.as_mut_ptr() as u64, pair(array.len() as u32, 0)],
        )?;
        let wall = t.elapsed();
        check(&array, "suspend")?;
        Ok(wall)
    }

    /// Resumes `ids` of `pid`; returns the wall time.
    pub(crate) fn resume(&self, pid: i32, ids: &[u32]) -> Result<Duration, String> {
        let mut array = ids.to_vec();
        let t = Instant::now();
        self.trap(
            pid,
            OP_RESUME_QUEUES,
            [array.as_mut_ptr() as u64, pair(array.len() as u32, 0), 0],
        )?;
        let wall = t.elapsed();
        check(&array, "resume")?;
        Ok(wall)
    }
}

/// Ends the ptrace of a seized, running `pid`: PTRACE_DETACH needs a
/// stopped tracee, so it is interrupted and its stop reaped first.
fn detach(pid: i32) -> Result<(), String> {
    let os_err = |what: &str| format!("{what} {pid}: {}", std::io::Error::last_os_error());
    // SAFETY: PTRACE_INTERRUPT of a tracee we seized; no pointers.
    if unsafe { libc::ptrace(libc::PTRACE_INTERRUPT, pid, 0usize, 0usize) } != 0 {
        return Err(os_err("ptrace(PTRACE_INTERRUPT)"));
    }
    let mut status = 0;
    // SAFETY: `status` is a valid out-pointer for the call's duration.
    if unsafe { libc::waitpid(pid, &mut status, libc::__WALL) } != pid {
        return Err(os_err("waitpid"));
    }
    // SAFETY: PTRACE_DETACH of our stopped tracee; data 0 (no signal).
    if unsafe { libc::ptrace(libc::PTRACE_DETACH, pid, 0usize, 0usize) } != 0 {
        return Err(os_err("ptrace(PTRACE_DETACH)"));
    }
    Ok(())
}

/// The per-queue outcome amdkfd wrote back into the id array.
fn check(array: &[u32], what: &str) -> Result<(), String> {
    match array
        .iter()
        .find(|&&id| id & (QUEUE_ERROR_MASK | QUEUE_INVALID_MASK) != 0)
    {
        Some(id) if id & QUEUE_INVALID_MASK != 0 => Err(format!(
            "debugger {what}: queue {} is invalid (new or being destroyed)",
            id & !(QUEUE_ERROR_MASK | QUEUE_INVALID_MASK)
        )),
        Some(id) => Err(format!(
            "debugger {what}: queue {} failed in the hardware",
            id & !(QUEUE_ERROR_MASK | QUEUE_INVALID_MASK)
        )),
        None => Ok(()),
    }
}

impl Drop for Debugger {
    fn drop(&mut self) {
        for &pid in &self.pids {
            // Disabling also resumes what the debugger left suspended;
            // amdkfd allows it to the process that enabled it.
            if let Err(e) = self.trap(pid, OP_DISABLE, [0; 3]) {
                eprintln!("bench: disabling the debugger on {pid}: {e}");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_is_the_kernels() {
        // sizeof(struct kfd_ioctl_dbg_trap_args), and the size the opcode encodes.
        assert_eq!(std::mem::size_of::<DbgTrapArgs>(), 32);
        assert_eq!((AMDKFD_IOC_DBG_TRAP >> 16) & 0x3fff, 32);
        assert_eq!(AMDKFD_IOC_DBG_TRAP & 0xffff, 0x4b26);
    }

    #[test]
    fn per_queue_errors_are_reported() {
        assert!(check(&[3, 4], "suspend").is_ok());
        let e = check(&[3, 4 | QUEUE_INVALID_MASK], "suspend").unwrap_err();
        assert!(e.contains("queue 4 is invalid"), "{e}");
        let e = check(&[3 | QUEUE_ERROR_MASK], "resume").unwrap_err();
        assert!(e.contains("queue 3 failed"), "{e}");
    }
}
