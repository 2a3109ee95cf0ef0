//! The ABI of `uapi/linux/kfd_preempt.h`, generated from the header at build
//! time, with the sizes, offsets and ioctl numbers of the ABI documentation
//! asserted at compile time.

#![allow(non_camel_case_types, non_upper_case_globals, dead_code, missing_docs)]

include!(concat!(env!("OUT_DIR"), "/uapi.rs"));

use std::mem::{offset_of, size_of};

macro_rules! layout {
    ($t:ident, $size:literal, { $($field:ident: $off:literal),* $(,)? }) => {
        const _: () = {
            assert!(size_of::<$t>() == $size);
            $(assert!(offset_of!($t, $field) == $off);)*
        };
    };
}

layout!(kfdp_info, 64, {
    abi_major: 0, abi_minor: 4, caps: 8, max_batch: 16, sizeof_queue_ref: 20,
    sizeof_queue_info: 24, reserved0: 28, reserved: 32,
});
layout!(kfdp_attach, 40, {
    kind: 0, fd: 4, pid: 8, flags: 12, handle: 16, tgid: 20, num_gpus: 24,
    reserved0: 28, reserved1: 32,
});
layout!(kfdp_detach, 16, { handle: 0, flags: 4, reserved: 8 });
layout!(kfdp_query, 48, {
    handle: 0, gpu_id: 4, entries_ptr: 8, entry_size: 16, capacity: 20,
    num_queues: 24, num_written: 28, reserved: 32,
});
layout!(kfdp_queue_info, 96, {
    gpu_id: 0, queue_id: 4, queue_type: 8, state: 12, ring_base_address: 16,
    ring_size: 24, read_pointer_address: 32, write_pointer_address: 40,
    ctx_save_restore_address: 48, ctx_save_restore_size: 56, doorbell_id: 60,
    doorbell_off: 64, priority: 68, queue_percent: 72, gc_ip_version: 76,
    reserved: 80,
});
layout!(kfdp_queue_ref, 16, { handle: 0, gpu_id: 4, queue_id: 8, status: 12 });
layout!(kfdp_batch, 56, {
    entries_ptr: 0, num_entries: 8, entry_size: 12, flags: 16, num_ok: 20,
    num_runlist_updates: 24, lease_ms: 28, elapsed_ns: 32, reserved: 40,
});
layout!(kfdp_freeze, 24, { handle: 0, gpu_id: 4, flags: 8, status: 12, elapsed_ns: 16 });

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
