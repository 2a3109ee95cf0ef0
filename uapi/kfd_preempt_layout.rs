// SPDX-License-Identifier: GPL-2.0 OR MIT

// The sizes and field offsets that Documentation/uapi.rst makes binding, as
// one table shared by the module (src/uapi.rs) and the userspace crate
// (userspace/kfd-preempt/src/uapi.rs). Each includes this file after defining
// `abi_struct!(type, size, { field: offset, ... })`, which asserts the layout
// of the type bindgen generated from kfd_preempt.h at compile time.

abi_struct!(kfdp_info, 64, {
    abi_major: 0, abi_minor: 4, caps: 8, max_batch: 16, sizeof_queue_ref: 20,
    sizeof_queue_info: 24, min_preempt_interval_us: 28, max_watches: 32,
    min_watch_period_us: 36, reserved: 40,
});
abi_struct!(kfdp_attach, 40, {
    kind: 0, fd: 4, pid: 8, flags: 12, handle: 16, tgid: 20, num_gpus: 24,
    reserved0: 28, reserved1: 32,
});
abi_struct!(kfdp_detach, 16, { handle: 0, flags: 4, reserved: 8 });
abi_struct!(kfdp_query, 48, {
    handle: 0, gpu_id: 4, entries_ptr: 8, entry_size: 16, capacity: 20,
    num_queues: 24, num_written: 28, reserved: 32,
});
abi_struct!(kfdp_queue_info, 96, {
    gpu_id: 0, queue_id: 4, queue_type: 8, state: 12, ring_base_address: 16,
    ring_size: 24, read_pointer_address: 32, write_pointer_address: 40,
    ctx_save_restore_address: 48, ctx_save_restore_size: 56, doorbell_id: 60,
    doorbell_off: 64, priority: 68, queue_percent: 72, gc_ip_version: 76,
    reserved: 80,
});
abi_struct!(kfdp_queue_ref, 16, { handle: 0, gpu_id: 4, queue_id: 8, status: 12 });
abi_struct!(kfdp_batch, 56, {
    entries_ptr: 0, num_entries: 8, entry_size: 12, flags: 16, num_ok: 20,
    num_runlist_updates: 24, lease_ms: 28, elapsed_ns: 32, reserved: 40,
});
abi_struct!(kfdp_freeze, 24, { handle: 0, gpu_id: 4, flags: 8, status: 12, elapsed_ns: 16 });
abi_struct!(kfdp_sim_queue_create, 32, {
    node: 0, queue_type: 4, priority: 8, queue_id: 12, gpu_id: 16, reserved0: 20,
    reserved1: 24,
});
abi_struct!(kfdp_sim_queue_destroy, 8, { queue_id: 0, reserved: 4 });
abi_struct!(kfdp_sim_queue_status, 40, {
    queue_id: 0, state: 4, retired: 8, in_flight: 16, reserved: 24,
});
abi_struct!(kfdp_watch, 32, {
    entries_ptr: 0, num_entries: 8, entry_size: 12, flags: 16, num_ok: 20, reserved: 24,
});
abi_struct!(kfdp_activity, 40, {
    handle: 0, gpu_id: 4, queue_id: 8, flags: 12, read_index: 16, write_index: 24,
    reserved: 32,
});
abi_struct!(kfdp_sample, 40, {
    entries_ptr: 0, entry_size: 8, capacity: 12, num_watches: 16, num_pending: 20,
    timestamp_ns: 24, reserved: 32,
});
abi_struct!(kfdp_arm, 32, { condition: 0, eventfd: 4, period_us: 8, idle_us: 12, reserved: 16 });
abi_struct!(kfdp_sim_packet, 64, {
    header: 0, reserved0: 4, work_ns: 8, tag: 16, submit_ns: 24, start_ns: 32, end_ns: 40,
    reserved1: 48,
});
abi_struct!(kfdp_sim_ring_create, 48, {
    node: 0, priority: 4, ring_address: 8, read_index_address: 16,
    write_index_address: 24, ring_packets: 32, queue_id: 36, gpu_id: 40, reserved: 44,
});
abi_struct!(kfdp_sim_doorbell, 8, { queue_id: 0, reserved: 4 });
