//! The one place that issues ioctls, through [`rustix::ioctl`].

use std::os::fd::AsFd;

use rustix::{
    io::Errno,
    ioctl::{ioctl, Getter, Opcode, Setter, Updater},
};

/// Issues the read-write ioctl `OP` on `value`.
///
/// # Safety
///
/// `OP` must be the ioctl number that reads and writes a `T` (the uapi
/// module's `IOC_*`/`SIM_IOC_*` constant for that struct), and every user
/// pointer inside `value` must point to memory valid for what the kernel
/// reads or writes there for the duration of the call.
pub(crate) unsafe fn update<const OP: Opcode, T>(
    fd: impl AsFd,
    value: &mut T,
) -> Result<(), Errno> {
    // SAFETY: the caller guarantees that `OP` encodes `T` and that the
    // pointers in `value` are valid; `value` is a live, exclusive `T`.
    unsafe { ioctl(fd, Updater::<OP, T>::new(value)) }
}

/// Issues the write-only ioctl `OP` with `value`.
///
/// # Safety
///
/// `OP` must be the ioctl number that reads a `T`, which must contain no
/// user pointers.
pub(crate) unsafe fn set<const OP: Opcode, T>(fd: impl AsFd, value: T) -> Result<(), Errno> {
    // SAFETY: the caller guarantees that `OP` encodes `T`.
    unsafe { ioctl(fd, Setter::<OP, T>::new(value)) }
}

/// Issues the read-only ioctl `OP` and returns the `T` it wrote.
///
/// # Safety
///
/// `OP` must be the ioctl number that writes a whole `T`, and every bit
/// pattern must be a valid `T` (plain integers, as the uapi structs are).
pub(crate) unsafe fn get<const OP: Opcode, T>(fd: impl AsFd) -> Result<T, Errno> {
    // SAFETY: the caller guarantees that `OP` fills a whole `T`.
    unsafe { ioctl(fd, Getter::<OP, T>::new()) }
}
