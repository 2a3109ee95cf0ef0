// SPDX-License-Identifier: GPL-2.0 OR MIT
//! The crate's errors as Python exceptions.

use pyo3::{create_exception, exceptions::PyOSError, PyErr};

create_exception!(
    kfd_preempt,
    KfdPreemptError,
    PyOSError,
    "An error of kfd_preempt: ``errno`` is the error number, ``strerror`` the crate's message (what went wrong and what to do)."
);

create_exception!(
    kfd_preempt,
    HintRefused,
    KfdPreemptError,
    "kfd-preemptd refused a hint: ``reason`` is the daemon's word for why (``not-a-tenant``, ``lowest-level``, ``no-queues``, ``rate-limited``, ``malformed``)."
);

/// `OSError(errno, message)` of the package's own class: Python sets
/// `errno` and `strerror` from the two arguments.
pub(crate) fn raise(e: &kfd_preempt::Error) -> PyErr {
    KfdPreemptError::new_err((e.errno(), e.to_string()))
}

/// An argument this package rejects before asking the module (`EINVAL`).
pub(crate) fn invalid(why: &str) -> PyErr {
    KfdPreemptError::new_err((libc_einval(), why.to_string()))
}

/// `EINVAL`, from the crate's errno type rather than a libc dependency.
pub(crate) fn libc_einval() -> i32 {
    rustix::io::Errno::INVAL.raw_os_error()
}
