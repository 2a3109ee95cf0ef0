//! The ABI of `uapi/linux/kfd_preempt.h`, generated from the header at build
//! time, with the sizes, offsets and ioctl numbers of the ABI documentation
//! asserted at compile time.

#![allow(non_camel_case_types, non_upper_case_globals, dead_code, missing_docs)]

include!(concat!(env!("OUT_DIR"), "/uapi.rs"));

use std::mem::{offset_of, size_of};

/// Asserts that `$t` is `$size` bytes with each field at its offset.
macro_rules! abi_struct {
    ($t:ident, $size:literal, { $($field:ident: $off:literal),* $(,)? }) => {
        const _: () = {
            assert!(size_of::<$t>() == $size);
            $(assert!(offset_of!($t, $field) == $off);)*
        };
    };
}

include!(concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../uapi/kfd_preempt_layout.rs"
));

/// `_IOC(dir, type, nr, size)` as `<asm-generic/ioctl.h>` computes it.
const fn ioc(dir: u32, nr: u32, size: usize) -> u32 {
    (dir << 30) | ((size as u32) << 16) | (KFDP_IOC_MAGIC << 8) | nr
}
const READ: u32 = 2;
const WRITE: u32 = 1;

/// `KFDP_IOC_INFO`, computed here and checked against the header's macro.
pub const KFDP_IOC_INFO: u32 = ioc(READ, 0x00, size_of::<kfdp_info>());
pub const KFDP_IOC_ATTACH: u32 = ioc(READ | WRITE, 0x01, size_of::<kfdp_attach>());

const _: () = {
    assert!(KFDP_IOC_INFO == KFDP_CHECK_IOC_INFO);
    assert!(KFDP_IOC_ATTACH == KFDP_CHECK_IOC_ATTACH);
    assert!(ioc(WRITE, 0x02, size_of::<kfdp_detach>()) == KFDP_CHECK_IOC_DETACH);
    assert!(ioc(READ | WRITE, 0x04, size_of::<kfdp_batch>()) == KFDP_CHECK_IOC_PREEMPT);
    assert!(ioc(READ | WRITE, 0x07, size_of::<kfdp_freeze>()) == KFDP_CHECK_IOC_THAW);
};
