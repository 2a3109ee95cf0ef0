// SPDX-License-Identifier: GPL-2.0

//! A node's reaction log (debugfs `nodeN/preempt_log`,
//! `Documentation/simulated-node.rst`): one record per runlist cycle or MES
//! call that took queues off the node because a PREEMPT batch asked, with
//! when the oldest dispatch still waiting on a queue that stayed mapped
//! became visible. A scheduler's reaction time to a latency-critical
//! doorbell is then `unmap_ns - doorbell_ns`, measured on the node's clock.
//!
//! The log lives in the model's state, under its lock. Its records are
//! allocated at the node's first preemption, so a node nobody preempts
//! costs only the empty log.

use core::fmt;

use kernel::prelude::*;

/// Records kept per node; older ones are overwritten and counted dropped.
pub(crate) const CAPACITY: usize = 1024;

/// One unmap a PREEMPT caused.
#[derive(Clone, Copy, Default)]
pub(crate) struct Record {
    /// When the unmap took effect: the end of the cycle or MES call
    /// (CLOCK_MONOTONIC ns).
    pub(crate) unmap_ns: i64,
    /// Queues the request took off the node.
    pub(crate) queues: u32,
    /// When the oldest dispatch still pending on a queue that stayed
    /// mapped became visible (its doorbell, or the map that found it); 0
    /// if no such queue had work.
    pub(crate) doorbell_ns: i64,
}

/// The bounded log of one node.
#[derive(Default)]
pub(crate) struct PreemptLog {
    /// Up to [`CAPACITY`] records; once full, a ring whose oldest record is
    /// at `head`.
    records: KVVec<Record>,
    head: usize,
    /// Records overwritten, or lost to a failed allocation, since the last
    /// clear.
    dropped: u64,
}

impl PreemptLog {
    /// Appends `r`, overwriting the oldest record once the log is full.
    pub(crate) fn push(&mut self, r: Record) {
        if self.records.len() < CAPACITY {
            // Grows with use: at most CAPACITY records, allocated under the
            // model's mutex (GFP_KERNEL may sleep there).
            if self.records.push(r, GFP_KERNEL).is_err() {
                self.dropped += 1;
            }
            return;
        }
        if let Some(slot) = self.records.get_mut(self.head) {
            *slot = r;
        }
        self.head = (self.head + 1) % CAPACITY;
        self.dropped += 1;
    }

    /// Forgets every record and the dropped count (keeps the memory).
    pub(crate) fn clear(&mut self) {
        self.records.clear();
        self.head = 0;
        self.dropped = 0;
    }

    /// The debugfs text: `# dropped N`, then one `unmap_ns queues
    /// doorbell_ns` line per record, oldest first.
    pub(crate) fn show(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "# dropped {}", self.dropped)?;
        let (newer, older) = self.records.split_at(self.head.min(self.records.len()));
        for part in [older, newer] {
            for r in part {
                writeln!(f, "{} {} {}", r.unmap_ns, r.queues, r.doorbell_ns)?;
            }
        }
        Ok(())
    }
}
