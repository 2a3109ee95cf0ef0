// SPDX-License-Identifier: GPL-2.0

//! What every owner has marked or frozen, across all open files.
//!
//! Each owner keeps its own marks; this registry only answers the questions
//! one owner cannot answer alone: whether a queue is held by *another*
//! owner (`KFDP_QS_OWNED_OTHER`), whether a node of a process is frozen by
//! any owner (`KFDP_QS_FROZEN`), and the module-wide statistics.
//!
//! Lock order: an owner's state lock, then [`REGISTRY`]. Nothing sleeps on
//! hardware with [`REGISTRY`] held.

use kernel::prelude::*;

use crate::sorted_map::SortedMap;

/// A queue of a process, as the registry keys it.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
pub(crate) struct QueueKey {
    /// [`crate::backend::TargetInfo::key`] of the process.
    pub(crate) target: u64,
    /// Topology gpu_id.
    pub(crate) gpu_id: u32,
    /// Queue id in the process.
    pub(crate) queue_id: u32,
}

/// Buckets of the hardware-phase histograms: bucket 0 counts batches under
/// 1 µs, bucket i (1 ≤ i < 15) those of [2^(i-1), 2^i) µs, the last one
/// everything from 2^14 µs (16 ms) up.
pub(crate) const HIST_BUCKETS: usize = 16;

/// Module-wide counters, shown in debugfs `kfd_preempt/stats`.
#[derive(Clone, Copy, Default, Debug)]
pub(crate) struct Stats {
    /// PREEMPT calls that reached the hardware phase.
    pub(crate) preempt_batches: u64,
    /// RESUME calls (including lease expiries and closes) that did.
    pub(crate) resume_batches: u64,
    /// Queues preempted (status 0).
    pub(crate) queues_preempted: u64,
    /// Queues resumed (status 0).
    pub(crate) queues_resumed: u64,
    /// Runlist updates or MES calls issued.
    pub(crate) runlist_updates: u64,
    /// Leases that ended with the module resuming the queues.
    pub(crate) leases_expired: u64,
    /// Queues found resumed behind the module's back (`KFDP_R_EXTERNAL`).
    pub(crate) external_resumes: u64,
    /// Attachments dropped because their target exited.
    pub(crate) targets_exited: u64,
    /// Watches pinned again by housekeeping after their memory moved
    /// ([`crate::activity::Watch::moved`]).
    pub(crate) watches_remade: u64,
    /// Longest hardware phase of one batch, in nanoseconds.
    pub(crate) max_elapsed_ns: u64,
    /// Hardware phases of PREEMPT (index 0) and RESUME (1) batches that
    /// issued at least one update, by [`HIST_BUCKETS`].
    pub(crate) hw_phase_hist: [[u64; HIST_BUCKETS]; 2],
}

impl Stats {
    /// Counts a batch's hardware phase in the histogram of `op`.
    pub(crate) fn record_hw_phase(&mut self, op: crate::backend::Op, elapsed_ns: u64) {
        let us = elapsed_ns / 1000;
        // Bucket of the highest set bit: 0 for < 1 µs, 1 for 1 µs, ...
        let bucket = (u64::BITS - us.leading_zeros()) as usize;
        let i = match op {
            crate::backend::Op::Preempt => 0,
            crate::backend::Op::Resume => 1,
        };
        self.hw_phase_hist[i][bucket.min(HIST_BUCKETS - 1)] += 1;
    }
}

/// A freeze count's key: which node of which process, and by whom.
type FreezeKey = (u64, u32, u64);

/// See the module documentation.
///
/// Keyed: each question is one binary search, and a batch of n entries
/// costs O(n log m) whatever the m marks all owners hold (a flat list made
/// every lookup a scan of every mark).
pub(crate) struct Registry {
    /// The owner of each marked queue.
    marks: SortedMap<QueueKey, u64>,
    /// How many times each owner froze each node of each process (nested
    /// FREEZEs are one entry with a count, not one entry each).
    freezes: SortedMap<FreezeKey, u32>,
    /// Module-wide statistics.
    pub(crate) stats: Stats,
    /// How many of the next claims fail as if out of memory (KUnit).
    #[cfg(kfdp_kunit)]
    pub(crate) failing_claims: u32,
}

/// The first key of `target` in an order whose first field is the target.
const fn first_queue(target: u64) -> QueueKey {
    QueueKey {
        target,
        gpu_id: 0,
        queue_id: 0,
    }
}

impl Registry {
    /// An empty registry.
    pub(crate) const fn new() -> Self {
        Self {
            marks: SortedMap::new(),
            freezes: SortedMap::new(),
            stats: Stats {
                preempt_batches: 0,
                resume_batches: 0,
                queues_preempted: 0,
                queues_resumed: 0,
                runlist_updates: 0,
                leases_expired: 0,
                external_resumes: 0,
                targets_exited: 0,
                watches_remade: 0,
                max_elapsed_ns: 0,
                hw_phase_hist: [[0; HIST_BUCKETS]; 2],
            },
            #[cfg(kfdp_kunit)]
            failing_claims: 0,
        }
    }

    /// How many marks and freezes all owners hold (a nested freeze counts
    /// once per FREEZE).
    pub(crate) fn held(&self) -> usize {
        let freezes: usize = self.freezes.values().map(|&c| c as usize).sum();
        self.marks.len() + freezes
    }

    /// The owner whose mark is on `q`, if any.
    pub(crate) fn mark_owner(&self, q: &QueueKey) -> Option<u64> {
        self.marks.get(q).copied()
    }

    /// Records that `owner` marked `q`. EBUSY if another owner's mark is
    /// there: the backend, which arbitrates, gave the queue to one owner
    /// only, so that would be a bookkeeping error, and the caller undoes
    /// its mark rather than record two owners.
    pub(crate) fn claim(&mut self, q: QueueKey, owner: u64) -> Result {
        #[cfg(kfdp_kunit)]
        if self.failing_claims > 0 {
            self.failing_claims -= 1;
            return Err(ENOMEM);
        }
        if !self.marks.insert_new(q, owner)? && self.marks.get(&q) != Some(&owner) {
            return Err(EBUSY);
        }
        Ok(())
    }

    /// Forgets `owner`'s mark on `q`.
    pub(crate) fn unclaim(&mut self, q: &QueueKey, owner: u64) {
        if self.marks.get(q) == Some(&owner) {
            self.marks.remove(q);
        }
    }

    /// Forgets `owner`'s marks and freezes on a process that exited; other
    /// owners attached to it forget theirs when they sweep it.
    pub(crate) fn forget_target(&mut self, target: u64, owner: u64) {
        self.marks.remove_in_run(
            &first_queue(target),
            |k| k.target == target,
            |_, &o| o == owner,
        );
        self.freezes
            .remove_in_run(&(target, 0, 0), |k| k.0 == target, |k, _| k.2 == owner);
    }

    /// Records one more freeze of `(target, gpu_id)` by `owner`.
    pub(crate) fn freeze(&mut self, target: u64, gpu_id: u32, owner: u64) -> Result {
        let key = (target, gpu_id, owner);
        match self.freezes.get_mut(&key) {
            Some(count) => *count = count.checked_add(1).ok_or(EOVERFLOW)?,
            None => {
                self.freezes.insert(key, 1)?;
            }
        }
        Ok(())
    }

    /// Forgets one freeze of `(target, gpu_id)` by `owner`.
    pub(crate) fn thaw(&mut self, target: u64, gpu_id: u32, owner: u64) {
        let key = (target, gpu_id, owner);
        if let Some(count) = self.freezes.get_mut(&key) {
            *count -= 1;
            if *count == 0 {
                self.freezes.remove(&key);
            }
        }
    }

    /// Forgets everything (module unload, once no owner exists): a static
    /// is never dropped, so its buffers are freed here.
    pub(crate) fn clear(&mut self) {
        self.marks.clear();
        self.freezes.clear();
    }

    /// Whether any owner holds a freeze of `(target, gpu_id)`.
    pub(crate) fn frozen(&self, target: u64, gpu_id: u32) -> bool {
        self.freezes
            .lower_bound(&(target, gpu_id, 0))
            .is_some_and(|(&(t, g, _), _)| t == target && g == gpu_id)
    }
}

kernel::sync::global_lock! {
    // SAFETY: Initialised in the module initialiser before first use.
    pub(crate) unsafe(uninit) static REGISTRY: Mutex<Registry> = Registry::new();
}
