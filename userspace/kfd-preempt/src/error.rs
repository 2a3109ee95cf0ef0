//! Errors that say what happened and what to do about it.

use std::fmt;

use nix::errno::Errno;

/// An error from the kfd_preempt device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// `/dev/kfd_preempt` does not exist.
    ModuleNotLoaded,
    /// The caller may not open the device (file permissions or missing
    /// `CAP_SYS_NICE`).
    PermissionDenied(Errno),
    /// The module does not implement this ioctl (an older module?).
    NotSupported(&'static str),
    /// The module speaks another major ABI version than this crate.
    AbiMismatch {
        /// The major version the module reports.
        module: u32,
        /// The major version this crate was built for.
        crate_: u32,
    },
    /// Any other system error from `operation`.
    Os {
        /// What was being done.
        operation: &'static str,
        /// The error number the kernel returned.
        errno: Errno,
    },
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::ModuleNotLoaded => write!(
                f,
                "{} does not exist: load the module (modprobe kfd_preempt)",
                crate::DEVICE_PATH
            ),
            Error::PermissionDenied(Errno::EPERM) => write!(
                f,
                "opening {} needs CAP_SYS_NICE (run as root or grant the capability)",
                crate::DEVICE_PATH
            ),
            Error::PermissionDenied(e) => write!(
                f,
                "cannot open {}: {} (the node is root's alone unless a udev rule grants a group)",
                crate::DEVICE_PATH,
                e.desc()
            ),
            Error::NotSupported(what) => write!(
                f,
                "{what} is not implemented by the loaded kfd_preempt module; update the module"
            ),
            Error::AbiMismatch { module, crate_ } => write!(
                f,
                "the module speaks ABI {module}.x, this program was built for {crate_}.x"
            ),
            Error::Os { operation, errno } => write!(f, "{operation}: {}", errno.desc()),
        }
    }
}

impl std::error::Error for Error {}
