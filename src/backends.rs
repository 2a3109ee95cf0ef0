// SPDX-License-Identifier: GPL-2.0

//! The backend behind `/dev/kfd_preempt`: amdkfd for KFD targets and, when
//! the module was loaded with `sim_nodes=N`, the simulated nodes for
//! simulated targets. One owner may hold both kinds, even in one batch.

use kernel::prelude::*;

use crate::{
    amdkfd::{
        self,
        AmdKfd, //
    },
    backend::{
        Applied,
        Backend,
        FreezeOutcome,
        Item,
        Op,
        TargetInfo, //
    },
    sim::backend::{
        self as simb,
        SimNodes, //
    },
    uapi, //
};

/// amdkfd, and the simulated nodes if there are any.
pub(crate) struct Backends {
    pub(crate) kfd: AmdKfd,
    pub(crate) sim: Option<SimNodes>,
}

/// A target of either kind.
pub(crate) enum AnyTarget {
    Kfd(amdkfd::Target),
    Sim(simb::Target),
}

/// Runs `apply` of backend `b` on the items `pick` selects, copying the
/// outcomes back.
fn apply_part<'a, B: Backend>(
    b: &B,
    op: Op,
    dry_run: bool,
    items: &mut [Item<'a, AnyTarget>],
    pick: impl Fn(&'a AnyTarget) -> Option<&'a B::Target>,
) -> Applied {
    let mut part = KVec::new();
    let mut index = KVec::new();
    for (i, it) in items.iter().enumerate() {
        let Some(target) = pick(it.target) else {
            continue;
        };
        let sub = Item {
            target,
            gpu_id: it.gpu_id,
            queue_id: it.queue_id,
            owned: it.owned,
            status: 0,
            marked: false,
        };
        if part.push(sub, GFP_KERNEL).is_err() || index.push(i, GFP_KERNEL).is_err() {
            for it in items.iter_mut() {
                it.status = ENOMEM.to_errno();
                it.marked = it.owned;
            }
            return Applied::default();
        }
    }
    if part.is_empty() {
        return Applied::default();
    }
    let applied = b.apply(op, dry_run, &mut part);
    for (sub, &i) in part.iter().zip(index.iter()) {
        items[i].status = sub.status;
        items[i].marked = sub.marked;
    }
    applied
}

impl Backend for Backends {
    type Target = AnyTarget;

    fn caps(&self) -> u64 {
        self.kfd.caps() | self.sim.as_ref().map_or(0, |s| s.caps())
    }

    /// Only amdkfd nodes are rate limited: simulated ones model no firmware cost.
    fn min_preempt_interval_us(&self) -> u32 {
        self.kfd.min_preempt_interval_us()
    }

    fn attach(&self, kind: u32, fd: i32, pid: i32) -> Result<AnyTarget> {
        match kind {
            uapi::KFDP_TARGET_SIM_FD => match &self.sim {
                Some(s) => s.attach(kind, fd, pid).map(AnyTarget::Sim),
                None => Err(EOPNOTSUPP),
            },
            _ => self.kfd.attach(kind, fd, pid).map(AnyTarget::Kfd),
        }
    }

    fn info(&self, t: &AnyTarget) -> TargetInfo {
        match (t, &self.sim) {
            (AnyTarget::Kfd(t), _) => self.kfd.info(t),
            (AnyTarget::Sim(t), Some(s)) => s.info(t),
            (AnyTarget::Sim(_), None) => TargetInfo {
                key: 0,
                tgid: 0,
                num_gpus: 0,
            },
        }
    }

    fn alive(&self, t: &AnyTarget) -> bool {
        match (t, &self.sim) {
            (AnyTarget::Kfd(t), _) => self.kfd.alive(t),
            (AnyTarget::Sim(t), Some(s)) => s.alive(t),
            (AnyTarget::Sim(_), None) => false,
        }
    }

    fn gpu_ids(&self, t: &AnyTarget) -> Result<KVec<u32>> {
        match (t, &self.sim) {
            (AnyTarget::Kfd(t), _) => self.kfd.gpu_ids(t),
            (AnyTarget::Sim(t), Some(s)) => s.gpu_ids(t),
            (AnyTarget::Sim(_), None) => Ok(KVec::new()),
        }
    }

    fn query(&self, t: &AnyTarget, gpu_id: u32, out: &mut [uapi::kfdp_queue_info]) -> Result<u32> {
        match (t, &self.sim) {
            (AnyTarget::Kfd(t), _) => self.kfd.query(t, gpu_id, out),
            (AnyTarget::Sim(t), Some(s)) => s.query(t, gpu_id, out),
            (AnyTarget::Sim(_), None) => Err(ESRCH),
        }
    }

    fn apply(&self, op: Op, dry_run: bool, items: &mut [Item<'_, AnyTarget>]) -> Applied {
        let kfd = apply_part(&self.kfd, op, dry_run, items, |t| match t {
            AnyTarget::Kfd(t) => Some(t),
            AnyTarget::Sim(_) => None,
        });
        let sim = match &self.sim {
            Some(s) => apply_part(s, op, dry_run, items, |t| match t {
                AnyTarget::Sim(t) => Some(t),
                AnyTarget::Kfd(_) => None,
            }),
            None => Applied::default(),
        };
        Applied {
            runlist_updates: kfd.runlist_updates + sim.runlist_updates,
            elapsed_ns: kfd.elapsed_ns + sim.elapsed_ns,
        }
    }

    fn freeze(&self, t: &AnyTarget, gpu_id: u32, thaw: bool) -> FreezeOutcome {
        match (t, &self.sim) {
            (AnyTarget::Kfd(t), _) => self.kfd.freeze(t, gpu_id, thaw),
            (AnyTarget::Sim(t), Some(s)) => s.freeze(t, gpu_id, thaw),
            (AnyTarget::Sim(_), None) => FreezeOutcome {
                status: ESRCH.to_errno(),
                applied: false,
                elapsed_ns: 0,
            },
        }
    }

    fn pin_user(&self, t: &AnyTarget, addr: u64, write: bool) -> Result<crate::umem::UserWord> {
        match (t, &self.sim) {
            (AnyTarget::Kfd(t), _) => self.kfd.pin_user(t, addr, write),
            (AnyTarget::Sim(t), Some(s)) => s.pin_user(t, addr, write),
            (AnyTarget::Sim(_), None) => Err(ESRCH),
        }
    }
}
