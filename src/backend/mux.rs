// SPDX-License-Identifier: GPL-2.0

//! The backend behind `/dev/kfd_preempt`: amdkfd for KFD targets and, when
//! the module was loaded with `sim_nodes=N`, the simulated nodes for
//! simulated targets. One owner may hold both kinds, even in one batch.

use kernel::prelude::*;

use crate::{
    backend::amdkfd::AmdKfd,
    backend::sim::backend::SimNodes,
    backend::{
        Applied,
        Backend,
        FreezeOp,
        FreezeOutcome,
        Item,
        Items,
        Op,
        Outcome,
        TargetInfo, //
    },
    uapi, //
};

/// Two backends behind one `/dev/kfd_preempt`: amdkfd for KFD targets and,
/// if the module has them, the simulated nodes for simulated targets. Generic
/// so that the KUnit suite can put two mock backends behind it.
pub(crate) struct Mux<K, S> {
    pub(crate) kfd: K,
    pub(crate) sim: Option<S>,
    faults: MuxFaults,
}

/// amdkfd, and the simulated nodes if there are any.
pub(crate) type Backends = Mux<AmdKfd, SimNodes>;

impl<K, S> Mux<K, S> {
    pub(crate) fn new(kfd: K, sim: Option<S>) -> Self {
        Self {
            kfd,
            sim,
            faults: MuxFaults::default(),
        }
    }

    /// Makes building the simulated part of every batch fail (KUnit).
    #[cfg(kfdp_kunit)]
    pub(crate) fn fail_sim_part(&self, fail: bool) {
        self.faults
            .fail_sim_part
            .store(fail, kernel::sync::atomic::Relaxed);
    }
}

/// A target of either kind.
pub(crate) enum AnyTarget<K, S> {
    Kfd(K),
    Sim(S),
}

/// Fault injection for the mux's own allocations, set by the KUnit suite;
/// zero-sized and never failing in other builds.
struct MuxFaults {
    #[cfg(kfdp_kunit)]
    fail_sim_part: kernel::sync::atomic::Atomic<bool>,
}

impl Default for MuxFaults {
    fn default() -> Self {
        Self {
            #[cfg(kfdp_kunit)]
            fail_sim_part: kernel::sync::atomic::Atomic::new(false),
        }
    }
}

impl MuxFaults {
    /// Whether building the simulated part of a batch is to run out of memory.
    fn sim_part_fails(&self) -> bool {
        #[cfg(kfdp_kunit)]
        {
            self.fail_sim_part.load(kernel::sync::atomic::Relaxed)
        }
        #[cfg(not(kfdp_kunit))]
        {
            false
        }
    }
}

/// The items of one backend in a batch, in the batch's order.
struct Part<'a, T> {
    items: Items<'a, T>,
}

impl<'a, T> Part<'a, T> {
    /// The items `pick` selects, or ENOMEM (`fail` forces it, for tests).
    fn of<K, S>(
        items: &[Item<'a, AnyTarget<K, S>>],
        pick: impl Fn(&'a AnyTarget<K, S>) -> Option<&'a T>,
        fail: bool,
    ) -> Result<Self> {
        if fail {
            return Err(ENOMEM);
        }
        let n = items.iter().filter(|it| pick(it.target).is_some()).count();
        let mut part = Part {
            items: Items::with_capacity(n, GFP_KERNEL)?,
        };
        for it in items.iter() {
            let Some(target) = pick(it.target) else {
                continue;
            };
            // Room for `n` was made above: this does not allocate.
            part.items
                .push(Item {
                    target,
                    gpu_id: it.gpu_id,
                    queue_id: it.queue_id,
                    owned: it.owned,
                    status: Outcome::Done,
                    marked: false,
                    entry: it.entry,
                })
                .map_err(|_| ENOMEM)?;
        }
        Ok(part)
    }

    /// Runs backend `b` on this part and copies the outcomes back to the
    /// items `pick` selects, which are this part's, in the same order.
    fn apply<B: Backend<Target = T>, K, S>(
        mut self,
        b: &B,
        op: Op,
        dry_run: bool,
        items: &mut [Item<'a, AnyTarget<K, S>>],
        pick: impl Fn(&'a AnyTarget<K, S>) -> Option<&'a T>,
    ) -> Applied {
        if self.items.is_empty() {
            return Applied::default();
        }
        let applied = b.apply(op, dry_run, &mut self.items);
        let mine = items.iter_mut().filter(|it| pick(it.target).is_some());
        for (it, sub) in mine.zip(self.items.iter()) {
            it.status = sub.status;
            it.marked = sub.marked;
        }
        applied
    }
}

/// The amdkfd targets of a batch.
fn kfd_of<K, S>(t: &AnyTarget<K, S>) -> Option<&K> {
    match t {
        AnyTarget::Kfd(t) => Some(t),
        AnyTarget::Sim(_) => None,
    }
}

/// The simulated targets of a batch.
fn sim_of<K, S>(t: &AnyTarget<K, S>) -> Option<&S> {
    match t {
        AnyTarget::Sim(t) => Some(t),
        AnyTarget::Kfd(_) => None,
    }
}

impl<K: Backend, S: Backend> Backend for Mux<K, S> {
    type Target = AnyTarget<K::Target, S::Target>;

    fn caps(&self) -> u64 {
        self.kfd.caps() | self.sim.as_ref().map_or(0, |s| s.caps())
    }

    /// Only amdkfd nodes are rate limited: simulated ones model no firmware cost.
    fn min_preempt_interval_us(&self) -> u32 {
        self.kfd.min_preempt_interval_us()
    }

    fn attach(&self, kind: u32, fd: i32, pid: i32) -> Result<Self::Target> {
        match kind {
            uapi::KFDP_TARGET_SIM_FD => match &self.sim {
                Some(s) => s.attach(kind, fd, pid).map(AnyTarget::Sim),
                None => Err(crate::compat::eopnotsupp()),
            },
            _ => self.kfd.attach(kind, fd, pid).map(AnyTarget::Kfd),
        }
    }

    fn info(&self, t: &Self::Target) -> TargetInfo {
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

    fn alive(&self, t: &Self::Target) -> bool {
        match (t, &self.sim) {
            (AnyTarget::Kfd(t), _) => self.kfd.alive(t),
            (AnyTarget::Sim(t), Some(s)) => s.alive(t),
            (AnyTarget::Sim(_), None) => false,
        }
    }

    fn gpu_ids(&self, t: &Self::Target) -> Result<KVec<u32>> {
        match (t, &self.sim) {
            (AnyTarget::Kfd(t), _) => self.kfd.gpu_ids(t),
            (AnyTarget::Sim(t), Some(s)) => s.gpu_ids(t),
            (AnyTarget::Sim(_), None) => Ok(KVec::new()),
        }
    }

    fn query(
        &self,
        t: &Self::Target,
        gpu_id: u32,
        out: &mut [uapi::kfdp_queue_info],
    ) -> Result<u32> {
        match (t, &self.sim) {
            (AnyTarget::Kfd(t), _) => self.kfd.query(t, gpu_id, out),
            (AnyTarget::Sim(t), Some(s)) => s.query(t, gpu_id, out),
            (AnyTarget::Sim(_), None) => Err(ESRCH),
        }
    }

    fn apply(&self, op: Op, dry_run: bool, items: &mut [Item<'_, Self::Target>]) -> Applied {
        // Both parts are built before either backend is called: running out
        // of memory for the second must not overwrite the outcomes of the
        // first, applied already (its marks would be forgotten while its
        // queues stay off the GPU).
        let kfd = Part::of(items, kfd_of, false);
        let sim = Part::of(items, sim_of, self.faults.sim_part_fails());
        let (Ok(kfd), Ok(sim)) = (kfd, sim) else {
            for it in items.iter_mut() {
                it.status = Outcome::Failed(ENOMEM);
                it.marked = it.owned;
            }
            return Applied::default();
        };
        let a = kfd.apply(&self.kfd, op, dry_run, items, kfd_of);
        let b = match &self.sim {
            Some(s) => sim.apply(s, op, dry_run, items, sim_of),
            None => {
                // No simulated nodes: their targets cannot exist.
                for it in items.iter_mut() {
                    if matches!(it.target, AnyTarget::Sim(_)) {
                        it.status = Outcome::Failed(ESRCH);
                    }
                }
                Applied::default()
            }
        };
        Applied {
            runlist_updates: a.runlist_updates + b.runlist_updates,
            elapsed_ns: a.elapsed_ns + b.elapsed_ns,
        }
    }

    fn freeze(&self, t: &Self::Target, gpu_id: u32, op: FreezeOp) -> FreezeOutcome {
        match (t, &self.sim) {
            (AnyTarget::Kfd(t), _) => self.kfd.freeze(t, gpu_id, op),
            (AnyTarget::Sim(t), Some(s)) => s.freeze(t, gpu_id, op),
            (AnyTarget::Sim(_), None) => FreezeOutcome {
                status: Err(ESRCH),
                applied: false,
                elapsed_ns: 0,
            },
        }
    }

    fn pin_user(&self, t: &Self::Target, addr: u64, write: bool) -> Result<crate::umem::UserWord> {
        match (t, &self.sim) {
            (AnyTarget::Kfd(t), _) => self.kfd.pin_user(t, addr, write),
            (AnyTarget::Sim(t), Some(s)) => s.pin_user(t, addr, write),
            (AnyTarget::Sim(_), None) => Err(ESRCH),
        }
    }
}
