// SPDX-License-Identifier: GPL-2.0

//! What differs between the kernel crates of the kernels the module is
//! built for (Documentation/building.rst, "Kernels"), in one place.
//!
//! Kbuild sets `kfdp_rust_7_3` on Linux 7.3 and later, where the kernel
//! crate gained the APIs used below; on 7.2 the same operation is reached
//! through what 7.2's kernel crate has. Nothing here copies kernel code.

use kernel::prelude::*;

/// `EOPNOTSUPP`, named by the kernel crate's `code` module from 7.3 on.
#[cfg(kfdp_rust_7_3)]
pub(crate) fn eopnotsupp() -> Error {
    EOPNOTSUPP
}

/// `EOPNOTSUPP`, named by the kernel crate's `code` module from 7.3 on.
#[cfg(not(kfdp_rust_7_3))]
pub(crate) fn eopnotsupp() -> Error {
    Error::from_errno(-(kernel::bindings::EOPNOTSUPP as i32))
}

/// `ECANCELED`, named by the kernel crate's `code` module from 7.3 on.
#[cfg(kfdp_rust_7_3)]
pub(crate) fn ecanceled() -> Error {
    ECANCELED
}

/// `ECANCELED`, named by the kernel crate's `code` module from 7.3 on.
#[cfg(not(kfdp_rust_7_3))]
pub(crate) fn ecanceled() -> Error {
    Error::from_errno(-(kernel::bindings::ECANCELED as i32))
}

/// Orders this CPU's earlier stores before its later ones, as seen by
/// another CPU (`smp_wmb()`); 7.3 spells it `smp_mb(Write)`.
#[inline]
pub(crate) fn smp_wmb() {
    #[cfg(kfdp_rust_7_3)]
    kernel::sync::barrier::smp_mb(kernel::sync::barrier::Write);
    #[cfg(not(kfdp_rust_7_3))]
    kernel::sync::barrier::smp_wmb();
}

/// Orders this CPU's earlier loads before its later ones (`smp_rmb()`);
/// 7.3 spells it `smp_mb(Read)`.
#[inline]
pub(crate) fn smp_rmb() {
    #[cfg(kfdp_rust_7_3)]
    kernel::sync::barrier::smp_mb(kernel::sync::barrier::Read);
    #[cfg(not(kfdp_rust_7_3))]
    kernel::sync::barrier::smp_rmb();
}

/// An open file's hold on the module, taken in `open` and given back at the
/// end of `release`. From 7.3 on the kernel crate sets the misc device's
/// `file_operations.owner`, and the VFS holds the module while a file is
/// open. 7.2's does not, so an open file would let `rmmod` free the code
/// its release, timers and work still run: there the file holds it here.
///
/// # Invariants
///
/// Before 7.3, a `FileModuleRef` holds one reference on this module.
pub(crate) struct FileModuleRef(());

impl FileModuleRef {
    /// Takes the hold; `ENODEV` if the module is already going away.
    #[cfg(kfdp_rust_7_3)]
    pub(crate) fn new() -> Result<Self> {
        // INVARIANT: from 7.3 on the value holds nothing.
        Ok(Self(()))
    }

    /// Takes the hold; `ENODEV` if the module is already going away.
    #[cfg(not(kfdp_rust_7_3))]
    pub(crate) fn new() -> Result<Self> {
        // SAFETY: no precondition; a reference is taken only on success.
        if unsafe { crate::glue::kfdp_module_get() } {
            // INVARIANT: the reference just taken.
            Ok(Self(()))
        } else {
            Err(ENODEV)
        }
    }
}

impl Drop for FileModuleRef {
    fn drop(&mut self) {
        // SAFETY: by the type invariant this value holds one reference,
        // given back once. The few instructions that follow the put still
        // run in module text, as with any module_put() from within the
        // module (the window that `owner` closes on 7.3).
        #[cfg(not(kfdp_rust_7_3))]
        unsafe {
            crate::glue::kfdp_module_put()
        };
    }
}

/// The `module!` declaration, with the type and default of a flag
/// parameter: `bool` from 7.3 on, a `u8` (0 or 1) before, whose `module!`
/// knows no `bool`. Either way `pid_attach=1` and `pid_attach=0` set it.
macro_rules! kfd_preempt_module {
    ($flag:ident, $off:literal) => {
        module! {
            type: KfdPreemptModule,
            name: "kfd_preempt",
            authors: ["The kfd_preempt developers"],
            description: "Preempt and resume amdkfd user-mode queues from a scheduler",
            license: "GPL",
            params: {
                pid_attach: $flag {
                    default: $off,
                    description: "Allow KFDP_TARGET_PID attach (callers also need CAP_SYS_ADMIN)",
                },
                sim_nodes: u32 {
                    default: 0,
                    description: "Simulated KFD nodes for testing without a GPU (0: none, at most 64)",
                },
                sim_mes_nodes: u64 {
                    default: 0,
                    description: "Bit N makes simulated node N a MES node (default: all HWS)",
                },
            },
        }
    };
}
pub(crate) use kfd_preempt_module;

/// A module parameter's value: 7.3's `value()` returns it, 7.2's a
/// reference to it.
#[cfg(kfdp_rust_7_3)]
macro_rules! param {
    ($name:ident) => {
        crate::module_parameters::$name.value()
    };
}
/// A module parameter's value: 7.3's `value()` returns it, 7.2's a
/// reference to it.
#[cfg(not(kfdp_rust_7_3))]
macro_rules! param {
    ($name:ident) => {
        *crate::module_parameters::$name.value()
    };
}
pub(crate) use param;

/// The `pid_attach` parameter.
#[cfg(kfdp_rust_7_3)]
pub(crate) fn pid_attach() -> bool {
    param!(pid_attach)
}

/// The `pid_attach` parameter: any value but 0 allows it.
#[cfg(not(kfdp_rust_7_3))]
pub(crate) fn pid_attach() -> bool {
    param!(pid_attach) != 0
}
