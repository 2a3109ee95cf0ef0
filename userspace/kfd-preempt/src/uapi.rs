//! The ABI of `uapi/linux/kfd_preempt.h`, generated from the header by
//! bindgen at build time (see `build.rs`), with the sizes and offsets of the
//! ABI documentation and the ioctl numbers asserted at compile time.
//!
//! The header is the source of truth: a struct that changes size or moves a
//! field, or an ioctl number that the header computes differently from
//! [`rustix::ioctl::opcode`], fails the build of this crate.

#![allow(non_camel_case_types, non_upper_case_globals, dead_code, missing_docs)]

include!(concat!(env!("OUT_DIR"), "/uapi.rs"));

use std::mem::{offset_of, size_of};

use rustix::ioctl::{opcode, Opcode};

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

const MAGIC: u8 = KFDP_IOC_MAGIC as u8;

/// `KFDP_IOC_INFO`.
pub const IOC_INFO: Opcode = opcode::read::<kfdp_info>(MAGIC, 0x00);
/// `KFDP_IOC_ATTACH`.
pub const IOC_ATTACH: Opcode = opcode::read_write::<kfdp_attach>(MAGIC, 0x01);
/// `KFDP_IOC_DETACH`.
pub const IOC_DETACH: Opcode = opcode::write::<kfdp_detach>(MAGIC, 0x02);
/// `KFDP_IOC_QUERY`.
pub const IOC_QUERY: Opcode = opcode::read_write::<kfdp_query>(MAGIC, 0x03);
/// `KFDP_IOC_PREEMPT`.
pub const IOC_PREEMPT: Opcode = opcode::read_write::<kfdp_batch>(MAGIC, 0x04);
/// `KFDP_IOC_RESUME`.
pub const IOC_RESUME: Opcode = opcode::read_write::<kfdp_batch>(MAGIC, 0x05);
/// `KFDP_IOC_FREEZE`.
pub const IOC_FREEZE: Opcode = opcode::read_write::<kfdp_freeze>(MAGIC, 0x06);
/// `KFDP_IOC_THAW`.
pub const IOC_THAW: Opcode = opcode::read_write::<kfdp_freeze>(MAGIC, 0x07);
/// `KFDP_IOC_WATCH` (ABI 1.2).
pub const IOC_WATCH: Opcode = opcode::read_write::<kfdp_watch>(MAGIC, 0x08);
/// `KFDP_IOC_UNWATCH` (ABI 1.2).
pub const IOC_UNWATCH: Opcode = opcode::read_write::<kfdp_watch>(MAGIC, 0x09);
/// `KFDP_IOC_SAMPLE` (ABI 1.2).
pub const IOC_SAMPLE: Opcode = opcode::read_write::<kfdp_sample>(MAGIC, 0x0A);
/// `KFDP_IOC_ARM` (ABI 1.2).
pub const IOC_ARM: Opcode = opcode::write::<kfdp_arm>(MAGIC, 0x0B);
/// `KFDP_SIM_IOC_CREATE_QUEUE`.
pub const SIM_IOC_CREATE_QUEUE: Opcode = opcode::read_write::<kfdp_sim_queue_create>(MAGIC, 0x40);
/// `KFDP_SIM_IOC_DESTROY_QUEUE`.
pub const SIM_IOC_DESTROY_QUEUE: Opcode = opcode::write::<kfdp_sim_queue_destroy>(MAGIC, 0x41);
/// `KFDP_SIM_IOC_QUEUE_STATUS`.
pub const SIM_IOC_QUEUE_STATUS: Opcode = opcode::read_write::<kfdp_sim_queue_status>(MAGIC, 0x42);
/// `KFDP_SIM_IOC_CREATE_RING` (ABI 1.2).
pub const SIM_IOC_CREATE_RING: Opcode = opcode::read_write::<kfdp_sim_ring_create>(MAGIC, 0x43);
/// `KFDP_SIM_IOC_DOORBELL` (ABI 1.2).
pub const SIM_IOC_DOORBELL: Opcode = opcode::write::<kfdp_sim_doorbell>(MAGIC, 0x44);

// The numbers as clang evaluated the header's `_IO*` macros.
const _: () = {
    assert!(IOC_INFO as u64 == KFDP_CHECK_IOC_INFO as u64);
    assert!(IOC_ATTACH as u64 == KFDP_CHECK_IOC_ATTACH as u64);
    assert!(IOC_DETACH as u64 == KFDP_CHECK_IOC_DETACH as u64);
    assert!(IOC_QUERY as u64 == KFDP_CHECK_IOC_QUERY as u64);
    assert!(IOC_PREEMPT as u64 == KFDP_CHECK_IOC_PREEMPT as u64);
    assert!(IOC_RESUME as u64 == KFDP_CHECK_IOC_RESUME as u64);
    assert!(IOC_FREEZE as u64 == KFDP_CHECK_IOC_FREEZE as u64);
    assert!(IOC_THAW as u64 == KFDP_CHECK_IOC_THAW as u64);
    assert!(IOC_WATCH as u64 == KFDP_CHECK_IOC_WATCH as u64);
    assert!(IOC_UNWATCH as u64 == KFDP_CHECK_IOC_UNWATCH as u64);
    assert!(IOC_SAMPLE as u64 == KFDP_CHECK_IOC_SAMPLE as u64);
    assert!(IOC_ARM as u64 == KFDP_CHECK_IOC_ARM as u64);
    assert!(SIM_IOC_CREATE_QUEUE as u64 == KFDP_CHECK_SIM_IOC_CREATE_QUEUE as u64);
    assert!(SIM_IOC_DESTROY_QUEUE as u64 == KFDP_CHECK_SIM_IOC_DESTROY_QUEUE as u64);
    assert!(SIM_IOC_QUEUE_STATUS as u64 == KFDP_CHECK_SIM_IOC_QUEUE_STATUS as u64);
    assert!(SIM_IOC_CREATE_RING as u64 == KFDP_CHECK_SIM_IOC_CREATE_RING as u64);
    assert!(SIM_IOC_DOORBELL as u64 == KFDP_CHECK_SIM_IOC_DOORBELL as u64);
};
