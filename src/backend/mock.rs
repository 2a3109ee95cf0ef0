// SPDX-License-Identifier: GPL-2.0

//! A mock backend for the engine's KUnit suite (`kfdp_engine`,
//! `src/engine/kunit.rs`).
//!
//! The mock keeps, per process, one node and its queues with the two bits
//! that matter (suspended by a mark, active in the runlist) and counts one
//! runlist update per node whose active set changed, as HWS does. It lets the
//! suite check the engine (validation, duplicates, owners, leases,
//! VALIDATE_ONLY, ALL_OR_NOTHING, close, statistics) without amdkfd.

use kernel::{
    new_mutex,
    prelude::*,
    sync::{
        Arc,
        Mutex, //
    },
};

use crate::{
    backend::{
        Applied,
        Backend,
        FreezeOp,
        FreezeOutcome,
        Item,
        Op,
        Outcome,
        TargetInfo, //
    },
    uapi,
};

pub(crate) struct MockQueue {
    pub(crate) id: u32,
    pub(crate) suspended: bool,
    pub(crate) active: bool,
}

pub(crate) struct MockProc {
    pub(crate) key: u64,
    pub(crate) alive: bool,
    pub(crate) gpu_id: u32,
    pub(crate) frozen: u32,
    pub(crate) queues: KVec<MockQueue>,
}

pub(crate) struct World {
    pub(crate) procs: KVec<MockProc>,
    pub(crate) runlist_updates: u32,
    /// A node whose FREEZE answers EAGAIN (the glue's rate limit).
    pub(crate) freeze_too_soon: Option<u32>,
    /// RESUMEs fail with EIO and leave the queue preempted (a broken node).
    pub(crate) fail_resumes: bool,
}

/// The mock backend; clones share one world.
#[derive(Clone)]
pub(crate) struct Mock {
    pub(crate) world: Arc<Mutex<World>>,
}

impl Mock {
    pub(crate) fn new() -> Result<Self> {
        let world = Arc::pin_init(
            new_mutex!(World {
                procs: KVec::new(),
                runlist_updates: 0,
                freeze_too_soon: None,
                fail_resumes: false,
            }),
            GFP_KERNEL,
        )?;
        Ok(Self { world })
    }

    /// Adds a process with `nq` active queues on node `gpu_id`; its key is
    /// also the "fd" that attaches it (adding it again on another node gives
    /// it a second GPU). Keys are small, so they never collide with the real
    /// backend's keys in the shared registry.
    pub(crate) fn add_proc(&self, key: u64, gpu_id: u32, nq: u32) -> Result {
        let mut queues = KVec::new();
        for id in 0..nq {
            queues.push(
                MockQueue {
                    id,
                    suspended: false,
                    active: true,
                },
                GFP_KERNEL,
            )?;
        }
        self.world.lock().procs.push(
            MockProc {
                key,
                alive: true,
                gpu_id,
                frozen: 0,
                queues,
            },
            GFP_KERNEL,
        )?;
        Ok(())
    }

    pub(crate) fn active(&self, key: u64) -> usize {
        let w = self.world.lock();
        w.procs
            .iter()
            .filter(|p| p.key == key)
            .flat_map(|p| p.queues.iter())
            .filter(|q| q.active)
            .count()
    }
}

impl Backend for Mock {
    type Target = u64;

    fn caps(&self) -> u64 {
        u64::from(uapi::KFDP_CAP_HWS_BATCH)
    }

    fn attach(&self, kind: u32, fd: i32, pid: i32) -> Result<u64> {
        let id = if kind == uapi::KFDP_TARGET_PID {
            pid
        } else {
            fd
        };
        let key = u64::try_from(id).map_err(|_| EBADF)?;
        let w = self.world.lock();
        w.procs
            .iter()
            .find(|p| p.key == key)
            .map(|p| p.key)
            .ok_or(EBADF)
    }

    fn info(&self, t: &u64) -> TargetInfo {
        TargetInfo {
            key: *t,
            tgid: *t as i32,
            num_gpus: 1,
        }
    }

    fn alive(&self, t: &u64) -> bool {
        self.world
            .lock()
            .procs
            .iter()
            .any(|p| p.key == *t && p.alive)
    }

    fn gpu_ids(&self, t: &u64) -> Result<KVec<u32>> {
        let mut v = KVec::new();
        for p in self.world.lock().procs.iter().filter(|p| p.key == *t) {
            v.push(p.gpu_id, GFP_KERNEL)?;
        }
        Ok(v)
    }

    fn query(&self, _t: &u64, _gpu_id: u32, _out: &mut [uapi::kfdp_queue_info]) -> Result<u32> {
        Ok(0)
    }

    fn apply(&self, op: Op, dry_run: bool, items: &mut [Item<'_, u64>]) -> Applied {
        let mut w = self.world.lock();
        let w_fail_resumes = w.fail_resumes && !dry_run;
        let mut changed_nodes = KVec::<u32>::new();
        for it in items.iter_mut() {
            it.marked = it.owned;
            let Some(p) = w.procs.iter_mut().find(|p| p.key == *it.target) else {
                it.status = Outcome::Failed(ESRCH);
                continue;
            };
            if !p.alive {
                it.status = Outcome::Failed(ESRCH);
                it.marked = false;
                continue;
            }
            if p.gpu_id != it.gpu_id {
                it.status = Outcome::Failed(EINVAL);
                continue;
            }
            let frozen = p.frozen > 0;
            let Some(q) = p.queues.iter_mut().find(|q| q.id == it.queue_id) else {
                it.status = Outcome::Failed(ENOENT);
                it.marked = false;
                continue;
            };
            let was_active = q.active;
            match op {
                Op::Preempt if q.suspended => {
                    it.status = if it.owned {
                        Outcome::Already
                    } else {
                        Outcome::Failed(EBUSY)
                    };
                }
                Op::Preempt => {
                    it.status = Outcome::Done;
                    if !dry_run {
                        q.suspended = true;
                        q.active = false;
                        it.marked = true;
                    }
                }
                Op::Resume if !it.owned => {
                    it.status = if q.suspended {
                        Outcome::Failed(EBUSY)
                    } else {
                        Outcome::Already
                    };
                }
                Op::Resume if !q.suspended => {
                    it.status = Outcome::External;
                    it.marked = false;
                }
                Op::Resume if w_fail_resumes => {
                    it.status = Outcome::Failed(EIO);
                }
                Op::Resume => {
                    it.status = Outcome::Done;
                    if !dry_run {
                        q.suspended = false;
                        q.active = !frozen;
                        it.marked = false;
                        if frozen {
                            it.status = Outcome::Deferred;
                        }
                    }
                }
            }
            if q.active != was_active && !changed_nodes.contains(&it.gpu_id) {
                let _ = changed_nodes.push(it.gpu_id, GFP_KERNEL);
            }
        }
        let n = changed_nodes.len() as u32;
        w.runlist_updates += n;
        Applied {
            runlist_updates: n,
            elapsed_ns: 0,
        }
    }

    fn freeze(&self, t: &u64, gpu_id: u32, op: FreezeOp) -> FreezeOutcome {
        let thaw = op == FreezeOp::Thaw;
        let mut w = self.world.lock();
        if !thaw && w.freeze_too_soon == Some(gpu_id) {
            return FreezeOutcome {
                status: Err(EAGAIN),
                applied: false,
                elapsed_ns: 0,
            };
        }
        let Some(p) = w
            .procs
            .iter_mut()
            .find(|p| p.key == *t && p.gpu_id == gpu_id)
        else {
            return FreezeOutcome {
                status: Err(EINVAL),
                applied: false,
                elapsed_ns: 0,
            };
        };
        if thaw {
            p.frozen -= 1;
        } else {
            p.frozen += 1;
        }
        let frozen = p.frozen > 0;
        for q in p.queues.iter_mut() {
            q.active = !frozen && !q.suspended;
        }
        FreezeOutcome {
            status: Ok(()),
            applied: true,
            elapsed_ns: 0,
        }
    }
}
