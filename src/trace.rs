// SPDX-License-Identifier: GPL-2.0

//! kfd_preempt's trace events (`kfd_preempt:*` in tracefs).
//!
//! The events are defined in C (`src/glue/kfdp_trace.h`), as Rust binder
//! defines its own; [`emit`] does what the kernel crate's `declare_trace!`
//! does for in-tree code, over this module's bindings: it tests the
//! tracepoint's static key and only then calls into C, so a disabled event
//! costs one test. Every event carries integers only.

use crate::{
    backend::Op,
    glue, //
};

/// Whether event `$name` (of `kfdp_trace.h`) is enabled: one test of its
/// tracepoint's static key.
macro_rules! enabled {
    ($name:ident) => {{
        kernel::macros::paste! {
            // SAFETY: `__tracepoint_*` is a tracepoint defined in C
            // (kfdp_trace.c); reading its static key is always allowed.
            unsafe {
                kernel::static_branch_unlikely!(
                    glue::[<__tracepoint_ $name>],
                    kernel::bindings::tracepoint,
                    key
                )
            }
        }
    }};
}

/// Emits event `$name` with the given arguments if it is enabled.
macro_rules! emit {
    ($name:ident($($arg:expr),* $(,)?)) => {{
        if enabled!($name) {
            kernel::macros::paste! {
                // SAFETY: The event's function takes integers only and may
                // be called from any context a tracepoint may.
                unsafe { glue::[<rust_do_trace_ $name>]($($arg),*) };
            }
        }
    }};
}

/// Whether `kfdp_batch` is enabled: its fields cost a pass over the batch,
/// which a disabled event must not.
pub(crate) fn batch_enabled() -> bool {
    enabled!(kfdp_batch)
}

/// Whether `kfdp_queue` is enabled, so that a batch is not walked entry by
/// entry for nothing.
pub(crate) fn queue_enabled() -> bool {
    enabled!(kfdp_queue)
}

/// The `op` field of `kfdp_batch` and `kfdp_queue`.
fn op_code(op: Op) -> u32 {
    match op {
        Op::Preempt => glue::KFDP_GLUE_PREEMPT,
        Op::Resume => glue::KFDP_GLUE_RESUME,
    }
}

pub(crate) fn attach(owner: u64, handle: u32, tgid: i32, kind: u32) {
    emit!(kfdp_attach(owner, handle, tgid, kind));
}

pub(crate) fn detach(owner: u64, handle: u32) {
    emit!(kfdp_detach(owner, handle));
}

pub(crate) fn target_exit(owner: u64, handle: u32) {
    emit!(kfdp_target_exit(owner, handle));
}

/// What one batch did, for `kfdp_batch`.
pub(crate) struct BatchEvent {
    pub(crate) owner: u64,
    pub(crate) op: Op,
    pub(crate) flags: u32,
    pub(crate) entries: u32,
    pub(crate) ok: u32,
    pub(crate) nodes: u32,
    pub(crate) runlist_updates: u32,
    pub(crate) elapsed_ns: u64,
}

pub(crate) fn batch(e: &BatchEvent) {
    emit!(kfdp_batch(
        e.owner,
        op_code(e.op),
        e.flags,
        e.entries,
        e.ok,
        e.nodes,
        e.runlist_updates,
        e.elapsed_ns
    ));
}

pub(crate) fn queue(owner: u64, op: Op, r: &crate::uapi::kfdp_queue_ref) {
    emit!(kfdp_queue(
        owner,
        op_code(op),
        r.handle,
        r.gpu_id,
        r.queue_id,
        r.status
    ));
}

pub(crate) fn freeze(owner: u64, handle: u32, gpu_id: u32, thaw: bool, status: i32, ns: u64) {
    emit!(kfdp_freeze(owner, handle, gpu_id, thaw, status, ns));
}

pub(crate) fn lease_expired(owner: u64, queues: u32) {
    emit!(kfdp_lease_expired(owner, queues));
}
