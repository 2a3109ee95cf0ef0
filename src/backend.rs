// SPDX-License-Identifier: GPL-2.0

//! The boundary between the engine (owners, attachments, leases, batching)
//! and whatever actually takes queues off a GPU.
//!
//! The engine never sees amdkfd: it hands a backend whole batches, because
//! only the backend knows which queues share a node and can therefore be
//! preempted with one runlist update.

use kernel::prelude::*;

pub(crate) mod amdkfd;
#[cfg(kfdp_kunit)]
pub(crate) mod mock;
pub(crate) mod mux;
pub(crate) mod sim;

use crate::{
    uapi::{
        self,
        kfdp_queue_info, //
    },
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

/// What became of one entry of a batch: `kfdp_queue_ref::status`, typed.
/// The engine, the simulated node and the mock write these; the C glue
/// writes the ABI's values, converted once by [`Outcome::from_status`].
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub(crate) enum Outcome {
    /// Done as asked (0); what an entry starts as.
    #[default]
    Done,
    /// Already in that state, or a duplicate (`KFDP_R_ALREADY`).
    Already,
    /// RESUME of a queue something else put back (`KFDP_R_EXTERNAL`).
    External,
    /// RESUME recorded; the queue returns when its process's eviction ends
    /// (`KFDP_R_DEFERRED`).
    Deferred,
    /// Refused or failed, with its errno.
    Failed(Error),
}

impl Outcome {
    /// The ABI's status value.
    pub(crate) fn status(self) -> i32 {
        match self {
            Outcome::Done => 0,
            Outcome::Already => uapi::KFDP_R_ALREADY as i32,
            Outcome::External => uapi::KFDP_R_EXTERNAL as i32,
            Outcome::Deferred => uapi::KFDP_R_DEFERRED as i32,
            Outcome::Failed(e) => e.to_errno(),
        }
    }

    /// From a status value, as the C glue and the simulated node's model
    /// write it (the same rules: a negative errno, 0, or a `KFDP_R_*`).
    pub(crate) fn from_status(status: i32) -> Self {
        match status {
            0 => Outcome::Done,
            s if s == uapi::KFDP_R_ALREADY as i32 => Outcome::Already,
            s if s == uapi::KFDP_R_EXTERNAL as i32 => Outcome::External,
            s if s == uapi::KFDP_R_DEFERRED as i32 => Outcome::Deferred,
            s => Outcome::Failed(Error::from_errno(s)),
        }
    }

    /// Whether the entry was refused or failed.
    pub(crate) fn failed(self) -> bool {
        matches!(self, Outcome::Failed(_))
    }
}

/// FREEZE or THAW.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum FreezeOp {
    /// Raise the node's eviction count: every queue of the process leaves.
    Freeze,
    /// Lower it again.
    Thaw,
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
    /// Out: what became of it.
    pub(crate) status: Outcome,
    /// Out: the calling owner's mark is on the queue after the call.
    pub(crate) marked: bool,
    /// The engine's: which entry of the batch this is (backends ignore it).
    pub(crate) entry: u32,
}

/// Batches of up to this many queues keep their items on the stack
/// ([`Items`]): a scheduler's batches, mostly.
pub(crate) const INLINE_ITEMS: usize = 16;

/// A batch's items, as the engine and the mux build them.
pub(crate) type Items<'a, T> = crate::small_vec::SmallVec<Item<'a, T>, INLINE_ITEMS>;

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
    /// Done, or why not.
    pub(crate) status: Result,
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
    fn freeze(&self, target: &Self::Target, gpu_id: u32, op: FreezeOp) -> FreezeOutcome;

    /// Pins the 64-bit word at user address `addr` of the target's memory
    /// (a queue's read or write index, for activity detection), with notice
    /// of the address getting other memory ([`UserWord::unmapped`]).
    fn pin_user(&self, _target: &Self::Target, _addr: u64, _write: bool) -> Result<UserWord> {
        Err(crate::compat::eopnotsupp())
    }
}
