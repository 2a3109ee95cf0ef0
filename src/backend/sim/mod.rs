// SPDX-License-Identifier: GPL-2.0

//! The simulated node: a software model of KFD nodes, processes and queues,
//! so that the whole uapi can be tested end to end without an AMD GPU
//! (`Documentation/simulated-node.rst`).
//!
//! It exists only when the module is loaded with `sim_nodes=N`, N > 0. It is
//! a second [`crate::backend::Backend`], under the same engine as amdkfd:
//! nothing about owners, leases, validation or statistics lives here.
//!
//! * [`model`]: nodes, processes, queues, progress, runlist cycles, faults;
//! * [`backend`]: the [`crate::backend::Backend`] over the model;
//! * [`tenant`]: `/dev/kfd_preempt_sim`, the tenant side (a ROCm process's
//!   stand-in for /dev/kfd);
//! * [`knobs`]: the debugfs files (cost model, fault injection, actions);
//! * [`ring`] and `model::exec`: ring queues in the tenant's memory and
//!   the node executing their dispatches (the contention model);
//! * [`preempt_log`]: each node's record of the unmaps PREEMPT caused, for
//!   measuring a scheduler's reaction time.

pub(crate) mod backend;
pub(crate) mod knobs;
pub(crate) mod model;
pub(crate) mod preempt_log;
pub(crate) mod ring;
pub(crate) mod tenant;

use kernel::{
    new_mutex,
    prelude::*,
    sync::{
        atomic::{
            Atomic,
            Relaxed, //
        },
        Arc,
        Mutex, //
    },
};

kernel::sync::global_lock! {
    // SAFETY: Initialised in the module initialiser before first use.
    pub(crate) unsafe(uninit) static SIM_SLOT: Mutex<Option<Arc<Sim>>> = None;
}

/// Largest `sim_nodes` accepted: an MI300X host in CPX mode, 8 GPUs of 8
/// partitions each (amdkfd's MAX_GPU_INSTANCE, the most one process sees).
/// Also the width of the `sim_mes_nodes` mask (a u64).
pub(crate) const MAX_NODES: u32 = 64;

/// Topology gpu_id of simulated node 0; node `n` is `GPU_ID_BASE + n`.
/// Real gpu_ids are hashes; these are easy to recognise in logs.
pub(crate) const GPU_ID_BASE: u32 = 0x5100;

/// GC IP version reported by HWS nodes (MI300, gfx942) and MES nodes (gfx11).
pub(crate) const GC_VERSION_HWS: u32 = 0x09_04_03;
pub(crate) const GC_VERSION_MES: u32 = 0x0b_00_00;

/// The tunables and counters of one node, readable and writable through
/// debugfs without taking the model's lock.
pub(crate) struct NodeKnobs {
    /// Cost model: nanoseconds per HWS runlist cycle, per queue unmapped or
    /// mapped in a cycle, and per MES call. Applied as real delays.
    pub(crate) cycle_ns: Atomic<u64>,
    pub(crate) per_queue_ns: Atomic<u64>,
    pub(crate) mes_call_ns: Atomic<u64>,
    /// Fault injection: the next N unmaps time out (the node resets), the
    /// next N maps fail, and the next cycle is delayed by this many µs.
    pub(crate) fail_unmaps: Atomic<u32>,
    pub(crate) fail_maps: Atomic<u32>,
    pub(crate) delay_next_us: Atomic<u32>,
    /// Counters: HWS cycles and MES calls issued, node resets.
    pub(crate) runlist_updates: Atomic<u64>,
    pub(crate) resets: Atomic<u64>,
    /// Queues taken off the hardware by PREEMPT requests (each record of
    /// [`preempt_log`] adds its `queues`, dropped records included).
    pub(crate) suspended_queues: Atomic<u64>,
}

impl NodeKnobs {
    fn new() -> Self {
        Self {
            cycle_ns: Atomic::new(0),
            per_queue_ns: Atomic::new(0),
            mes_call_ns: Atomic::new(0),
            fail_unmaps: Atomic::new(0),
            fail_maps: Atomic::new(0),
            delay_next_us: Atomic::new(0),
            runlist_updates: Atomic::new(0),
            resets: Atomic::new(0),
            suspended_queues: Atomic::new(0),
        }
    }

    /// Consumes one unit of a fault counter; true if there was one.
    pub(crate) fn take(counter: &Atomic<u32>) -> bool {
        let mut cur = counter.load(Relaxed);
        while cur > 0 {
            match counter.cmpxchg(cur, cur - 1, Relaxed) {
                Ok(_) => return true,
                Err(now) => cur = now,
            }
        }
        false
    }
}

/// The simulated nodes of this module instance.
#[pin_data]
pub(crate) struct Sim {
    /// Node `n` uses MES (per-queue calls) rather than an HWS runlist.
    pub(crate) mes: KVec<bool>,
    pub(crate) knobs: KVec<NodeKnobs>,
    /// Fault injection: the next N allocations of a target's node list
    /// (`Backend::gpu_ids`) fail with ENOMEM.
    pub(crate) fail_node_lists: Atomic<u32>,
    #[pin]
    pub(crate) state: Mutex<model::State>,
    /// Makes retired dispatches visible to tenants (`model::exec`).
    #[pin]
    pub(crate) driver: kernel::workqueue::Work<Sim>,
}

impl Sim {
    /// Creates `nodes` simulated nodes; bit `n` of `mes_mask` makes node `n`
    /// a MES node.
    pub(crate) fn new(nodes: u32, mes_mask: u64) -> Result<Arc<Self>> {
        if nodes == 0 || nodes > MAX_NODES {
            return Err(EINVAL);
        }
        let mut mes = KVec::with_capacity(nodes as usize, GFP_KERNEL)?;
        let mut knobs = KVec::with_capacity(nodes as usize, GFP_KERNEL)?;
        for n in 0..nodes {
            mes.push(mes_mask & (1u64 << n) != 0, GFP_KERNEL)?;
            knobs.push(NodeKnobs::new(), GFP_KERNEL)?;
        }
        let state = model::State::new(nodes)?;
        Arc::pin_init(
            pin_init!(Self {
                mes,
                knobs,
                fail_node_lists: Atomic::new(0),
                state <- new_mutex!(state),
                driver <- kernel::new_work!("kfd_preempt::sim_driver"),
            }),
            GFP_KERNEL,
        )
    }

    /// Number of nodes.
    pub(crate) fn nodes(&self) -> u32 {
        self.knobs.len() as u32
    }

    /// The node of `gpu_id`, if it is one of ours.
    pub(crate) fn node_of(&self, gpu_id: u32) -> Option<u32> {
        let n = gpu_id.checked_sub(GPU_ID_BASE)?;
        (n < self.nodes()).then_some(n)
    }
}
