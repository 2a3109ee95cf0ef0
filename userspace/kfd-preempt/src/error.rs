//! Errors that say what happened and what to do about it.

use std::{fmt, io};

use rustix::io::Errno;

/// An error of a whole call to the kfd_preempt device (the outcome of one
/// queue of a batch is an [`Outcome`](crate::Outcome) instead).
///
/// Each message names the cause and, where there is one, the remedy:
///
/// ```
/// use kfd_preempt::Error;
///
/// let e = Error::PidAttachDisabled;
/// assert!(e.to_string().contains("pid_attach=1"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Error {
    /// `/dev/kfd_preempt` does not exist.
    ModuleNotLoaded,
    /// The caller may not open the device: `EPERM` is a missing
    /// `CAP_SYS_NICE`, `EACCES` the file mode.
    PermissionDenied(Errno),
    /// The loaded module does not implement this ioctl.
    NotSupported(&'static str),
    /// The module speaks another major ABI version than this crate.
    AbiMismatch {
        /// The major version the module reports.
        module: u32,
        /// The major version this crate was built for.
        crate_: u32,
    },
    /// There is no process with this pid (or it is exiting).
    NoSuchProcess {
        /// The pid asked for.
        pid: i32,
    },
    /// The process has no `/dev/kfd` (or simulated tenant device) open, so
    /// it has no GPU queues to preempt.
    NotAKfdProcess {
        /// The pid asked for.
        pid: i32,
    },
    /// The kernel refused to let this process take the target's `/dev/kfd`
    /// descriptor (`pidfd_getfd(2)` checks ptrace access).
    PtraceDenied {
        /// The pid asked for.
        pid: i32,
        /// `EPERM` or `EACCES`.
        errno: Errno,
    },
    /// Attach by pid needs the module parameter `pid_attach=1`.
    PidAttachDisabled,
    /// Attach by pid needs `CAP_SYS_ADMIN`.
    PidAttachNeedsAdmin,
    /// A simulated tenant was given, but the module has no simulated nodes.
    SimNotEnabled,
    /// The attached process exited; its queues are gone.
    TargetExited,
    /// The attachment handle is not (or no longer) known to this owner.
    UnknownHandle(u32),
    /// The attachment is known, but the gpu_id named is not one of its
    /// process's nodes. The module answers both with `EINVAL`; the library
    /// tells them apart by asking about the handle alone.
    UnknownGpu {
        /// The attachment handle.
        handle: u32,
        /// The gpu_id named.
        gpu_id: u32,
    },
    /// More entries than the module accepts in one batch.
    BatchTooLarge {
        /// Entries given.
        len: usize,
        /// `KFDP_MAX_BATCH`.
        max: u32,
    },
    /// An argument the module (or this crate, before asking it) rejects.
    InvalidArgument(&'static str),
    /// THAW of something this owner has not frozen.
    NotFrozen,
    /// The GPU work could not be done (a node reset or scheduler hang):
    /// `EIO` from FREEZE/THAW.
    Hardware {
        /// What was being done.
        operation: &'static str,
        /// The error number.
        errno: Errno,
    },
    /// `EAGAIN` from FREEZE: the node was preempted or frozen less than
    /// the module's `min_preempt_interval_us` ago (ABI 1.1); nothing changed.
    TooSoon {
        /// What was being done.
        operation: &'static str,
    },
    /// Any other system error from `operation`.
    Os {
        /// What was being done.
        operation: &'static str,
        /// The error number the kernel returned.
        errno: Errno,
    },
}

/// The C library's description of `errno`.
pub(crate) fn describe(errno: Errno) -> String {
    io::Error::from(errno).to_string()
}

impl Error {
    /// The error number closest to this error, for C callers and exit codes.
    ///
    /// ```
    /// use kfd_preempt::Error;
    ///
    /// assert_eq!(Error::TargetExited.errno(), 3); // ESRCH
    /// ```
    pub fn errno(&self) -> i32 {
        let e = match self {
            Error::ModuleNotLoaded => Errno::NODEV,
            Error::PermissionDenied(e) | Error::PtraceDenied { errno: e, .. } => *e,
            Error::NotSupported(_) => Errno::NOTTY,
            Error::AbiMismatch { .. } => Errno::PROTO,
            Error::NoSuchProcess { .. } | Error::TargetExited => Errno::SRCH,
            Error::NotAKfdProcess { .. } => Errno::NOENT,
            Error::PidAttachDisabled | Error::SimNotEnabled => Errno::OPNOTSUPP,
            Error::PidAttachNeedsAdmin => Errno::PERM,
            Error::UnknownHandle(_)
            | Error::UnknownGpu { .. }
            | Error::InvalidArgument(_)
            | Error::NotFrozen => Errno::INVAL,
            Error::BatchTooLarge { .. } => Errno::TOOBIG,
            Error::TooSoon { .. } => Errno::AGAIN,
            Error::Hardware { errno, .. } | Error::Os { errno, .. } => *errno,
        };
        e.raw_os_error()
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let dev = crate::DEVICE_PATH;
        match self {
            Error::ModuleNotLoaded => write!(
                f,
                "{dev} does not exist: load the module (modprobe kfd_preempt, or insmod kfd_preempt.ko)"
            ),
            Error::PermissionDenied(Errno::PERM) => write!(
                f,
                "opening {dev} needs CAP_SYS_NICE: run as root or grant the capability (setcap cap_sys_nice+ep)"
            ),
            Error::PermissionDenied(e) => write!(
                f,
                "cannot open {dev}: {} (the node is root's unless a udev rule grants a group)",
                describe(*e)
            ),
            Error::NotSupported(what) => write!(
                f,
                "{what} is not implemented by the loaded kfd_preempt module: update the module"
            ),
            Error::AbiMismatch { module, crate_ } => write!(
                f,
                "the module speaks ABI {module}.x, this program was built for {crate_}.x: use matching versions"
            ),
            Error::NoSuchProcess { pid } => write!(f, "no process {pid} (it exited?)"),
            Error::NotAKfdProcess { pid } => write!(
                f,
                "process {pid} has no /dev/kfd open, so it has no GPU queues (is it a ROCm/HIP process that has started?)"
            ),
            Error::PtraceDenied { pid, errno } => write!(
                f,
                "may not take process {pid}'s /dev/kfd descriptor ({}): pidfd_getfd needs ptrace access, i.e. CAP_SYS_PTRACE or the same uid with kernel.yama.ptrace_scope=0",
                describe(*errno)
            ),
            Error::PidAttachDisabled => write!(
                f,
                "attach by pid is off: load the module with pid_attach=1, or let the tenant's /dev/kfd be taken with pidfd_getfd"
            ),
            Error::PidAttachNeedsAdmin => {
                write!(f, "attach by pid needs CAP_SYS_ADMIN: run as root")
            }
            Error::SimNotEnabled => write!(
                f,
                "the module has no simulated nodes: load it with sim_nodes=N to use /dev/kfd_preempt_sim tenants"
            ),
            Error::TargetExited => write!(f, "the target process exited; its queues are gone"),
            Error::UnknownHandle(h) => write!(
                f,
                "attachment handle {h} is not known to this owner (detached already, or from another open of {dev})"
            ),
            Error::UnknownGpu { handle, gpu_id } => write!(
                f,
                "gpu_id {gpu_id:#x} is not a node of the process attached as handle {handle} (kfd-preempt list shows its nodes)"
            ),
            Error::BatchTooLarge { len, max } => write!(
                f,
                "{len} entries in one batch, the module takes at most {max}: split it"
            ),
            Error::InvalidArgument(what) => write!(f, "invalid argument: {what}"),
            Error::NotFrozen => write!(f, "nothing to thaw: this owner has not frozen that target or node"),
            Error::Hardware { operation, errno } => write!(
                f,
                "{operation}: {} (a GPU node reset or scheduler hang; see the kernel log)",
                describe(*errno)
            ),
            Error::TooSoon { operation } => write!(
                f,
                "{operation}: too soon after this node's last preemption; retry after the module's min_preempt_interval_us"
            ),
            Error::Os { operation, errno } => write!(f, "{operation}: {}", describe(*errno)),
        }
    }
}

impl std::error::Error for Error {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_message_is_actionable() {
        let cases = [
            (Error::ModuleNotLoaded, "modprobe"),
            (Error::PermissionDenied(Errno::PERM), "CAP_SYS_NICE"),
            (Error::PermissionDenied(Errno::ACCESS), "udev rule"),
            (Error::NotAKfdProcess { pid: 7 }, "no /dev/kfd open"),
            (
                Error::PtraceDenied {
                    pid: 7,
                    errno: Errno::PERM,
                },
                "CAP_SYS_PTRACE",
            ),
            (Error::PidAttachDisabled, "pid_attach=1"),
            (Error::SimNotEnabled, "sim_nodes="),
            (
                Error::BatchTooLarge {
                    len: 5000,
                    max: 4096,
                },
                "split",
            ),
            (Error::UnknownHandle(3), "handle 3"),
            (
                Error::UnknownGpu {
                    handle: 3,
                    gpu_id: 0x5107,
                },
                "gpu_id 0x5107",
            ),
            (
                Error::TooSoon {
                    operation: "freeze",
                },
                "min_preempt_interval_us",
            ),
        ];
        for (e, needle) in cases {
            assert!(e.to_string().contains(needle), "{e} lacks {needle}");
        }
    }

    #[test]
    fn errno_of_each_error() {
        assert_eq!(Error::TargetExited.errno(), Errno::SRCH.raw_os_error());
        assert_eq!(
            Error::BatchTooLarge { len: 1, max: 0 }.errno(),
            Errno::TOOBIG.raw_os_error()
        );
        assert_eq!(
            Error::Os {
                operation: "x",
                errno: Errno::BUSY
            }
            .errno(),
            Errno::BUSY.raw_os_error()
        );
    }
}
