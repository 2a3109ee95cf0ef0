// SPDX-License-Identifier: GPL-2.0

//! The boundary between the engine (owners, attachments, leases, batching)
//! and whatever actually takes queues off a GPU.
//!
//! The engine never sees amdkfd: it hands a backend whole batches, because
//! only the backend knows which queues share a node and can therefore be
//! preempted with one runlist update.

use kernel::prelude::*;

use crate::{
    uapi::kfdp_queue_info,
    umem::UserWord, //
};

/// What a batch does.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Op {
    /// Take queues off the GPU, keeping their state.
    Preempt,
    /// Put them back.
    Resume,
}

/// One queue of a batch, as the engine hands it to a backend.
pub(crate) struct Item<'a, T> {
    /// The attached process the queue belongs to.
    pub(crate) target: &'a T,
    /// Topology gpu_id of the node.
    pub(crate) gpu_id: u32,
    /// KFD queue id within the process.
    pub(crate) queue_id: u32,
    /// In: the calling owner's mark is on this queue.
    pub(crate) owned: bool,
    /// Out: as `kfdp_queue_ref::status`.
    pub(crate) status: i32,
    /// Out: the calling owner's mark is on the queue after the call.
    pub(crate) marked: bool,
    /// The engine's: which entry of the batch this is (backends ignore it).
    pub(crate) entry: u32,
}

/// What a batch cost on the hardware.
#[derive(Clone, Copy, Default, Debug)]
pub(crate) struct Applied {
    /// Runlist updates (HWS) or per-queue scheduler calls (MES) issued.
    pub(crate) runlist_updates: u32,
    /// Time spent issuing them.
    pub(crate) elapsed_ns: u64,
}

/// What ATTACH learns about a target.
#[derive(Clone, Copy, Debug)]
pub(crate) struct TargetInfo {
    /// Identifies the process across attachments; never shown to user space.
    pub(crate) key: u64,
    /// Target tgid in the caller's pid namespace.
    pub(crate) tgid: i32,
    /// Number of GPU nodes the target uses.
    pub(crate) num_gpus: u32,
}

/// Outcome of one freeze or thaw on one node.
#[derive(Clone, Copy, Debug)]
pub(crate) struct FreezeOutcome {
    /// 0 or a negative errno.
    pub(crate) status: i32,
    /// The node's eviction count changed (and must be paired later).
    pub(crate) applied: bool,
    /// Time spent.
    pub(crate) elapsed_ns: u64,
}

/// Maximum number of GPU nodes of one process (amdkfd's MAX_GPU_INSTANCE).
pub(crate) const MAX_GPUS: usize = 64;

/// A way of preempting queues: amdkfd on a GPU, or a model of it in tests.
pub(crate) trait Backend: Send + Sync + 'static {
    /// A pinned target process. Dropping it unpins the process.
    type Target: Send + Sync;

    /// Capability bits of `kfdp_info::caps` this backend provides.
    fn caps(&self) -> u64;

    /// The minimum time between two PREEMPT or FREEZE (or two RESUME or
    /// THAW) triggers of one of its nodes (`KFDP_CAP_RATE_LIMIT`), in
    /// microseconds; 0: no limit.
    fn min_preempt_interval_us(&self) -> u32 {
        0
    }

    /// Resolves, verifies and pins the target of an ATTACH.
    fn attach(&self, kind: u32, fd: i32, pid: i32) -> Result<Self::Target>;

    /// Facts about an attached target.
    fn info(&self, target: &Self::Target) -> TargetInfo;

    /// Whether the target process still exists.
    fn alive(&self, target: &Self::Target) -> bool;

    /// The target's gpu_ids, in the target's order; ENOMEM rather than a
    /// shorter list, so that a FREEZE of every node cannot freeze some of
    /// them and report success.
    fn gpu_ids(&self, target: &Self::Target) -> Result<KVec<u32>>;

    /// Describes the target's queues on `gpu_id` (0: every node) into
    /// `out`, whose length is the capacity; returns how many queues exist.
    fn query(&self, target: &Self::Target, gpu_id: u32, out: &mut [kfdp_queue_info])
        -> Result<u32>;

    /// Applies `op` to every item, or only checks them if `dry_run`, with one
    /// runlist update per node.
    fn apply(&self, op: Op, dry_run: bool, items: &mut [Item<'_, Self::Target>]) -> Applied;

    /// Freezes (or thaws) the target's queues on one node.
    fn freeze(&self, target: &Self::Target, gpu_id: u32, thaw: bool) -> FreezeOutcome;

    /// Pins the 64-bit word at user address `addr` of the target's memory
    /// (a queue's read or write index, for activity detection).
    fn pin_user(&self, _target: &Self::Target, _addr: u64, _write: bool) -> Result<UserWord> {
        Err(EOPNOTSUPP)
    }
}
