// SPDX-License-Identifier: GPL-2.0

//! The simulated node as a [`Backend`]: what the amdkfd glue does with
//! kfd_process and dqm, done on the model.

use kernel::{
    fs::file::LocalFile,
    prelude::*,
    sync::{
        aref::ARef,
        Arc, //
    },
    task::Task,
};

use super::{
    model::{
        Liveness,
        Process,
        Req, //
    },
    NodeKnobs,
    Sim,
    GC_VERSION_HWS,
    GC_VERSION_MES,
    GPU_ID_BASE, //
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
    umem::UserWord,
};

/// A simulated process attached by an owner. It does not keep the process
/// alive: once the tenant exits, every operation on it is ESRCH.
pub(crate) struct Target {
    id: u64,
    leader: ARef<Task>,
    /// The process's liveness and address space, for [`Backend::alive`]
    /// without the model's lock; released when the owner's sweep or a
    /// DETACH drops the target.
    life: Arc<Liveness>,
}

/// Batches of up to this many items build their requests on the stack.
const REQS_ON_STACK: usize = 16;

/// The backend of the simulated nodes.
pub(crate) struct SimNodes(pub(crate) Arc<Sim>);

/// Synthetic addresses the sim reports for a queue's ring and pointers:
/// user-space looking, distinct per process and queue, backed by nothing.
fn fake_addr(process: u64, queue_id: u32, offset: u64) -> u64 {
    0x7f00_0000_0000 + ((process & 0xffff) << 24) + (u64::from(queue_id) << 12) + offset
}

impl SimNodes {
    fn describe(&self, p: &Process, qi: usize) -> uapi::kfdp_queue_info {
        let q = &p.queues[qi];
        // A ring queue reports its tenant's real memory, as amdkfd does; a
        // queue without one has no indices to watch.
        let (ring, ring_size, read, write) = match q.ring.as_ref() {
            Some(r) => (
                r.addrs.ring,
                u64::from(r.addrs.packets) * 64,
                r.addrs.read_index,
                r.addrs.write_index,
            ),
            None => (fake_addr(p.id, q.id, 0), 4096, 0, 0),
        };
        uapi::kfdp_queue_info {
            gpu_id: GPU_ID_BASE + q.node,
            queue_id: q.id,
            queue_type: q.qtype,
            state: p.state_bits(q),
            ring_base_address: ring,
            ring_size,
            read_pointer_address: read,
            write_pointer_address: write,
            ctx_save_restore_address: fake_addr(p.id, q.id, 0x80_0000),
            ctx_save_restore_size: 0x1000,
            doorbell_id: q.id,
            doorbell_off: q.id * 8,
            priority: q.priority,
            queue_percent: 100,
            gc_ip_version: if self.0.mes[q.node as usize] {
                GC_VERSION_MES
            } else {
                GC_VERSION_HWS
            },
            ..Default::default()
        }
    }
}

impl Backend for SimNodes {
    type Target = Target;

    fn caps(&self) -> u64 {
        u64::from(
            uapi::KFDP_CAP_HWS_BATCH
                | uapi::KFDP_CAP_MES
                | uapi::KFDP_CAP_FREEZE
                | uapi::KFDP_CAP_SIM
                | uapi::KFDP_CAP_ACTIVITY
                | uapi::KFDP_CAP_SIM_RING,
        )
    }

    fn attach(&self, kind: u32, fd: i32, _pid: i32) -> Result<Target> {
        if kind != uapi::KFDP_TARGET_SIM_FD {
            return Err(EINVAL);
        }
        let fd = u32::try_from(fd).map_err(|_| EBADF)?;
        let file: ARef<LocalFile> = LocalFile::fget(fd)?;
        // The file is held, so its address identifies one tenant file.
        let ident = file.as_ptr() as usize;
        let mut st = self.0.state.lock();
        st.reap(&self.0);
        let p = st.by_file(ident).ok_or(EINVAL)?;
        if !p.alive() {
            return Err(ESRCH);
        }
        let target = Target {
            id: p.id,
            leader: p.leader.clone(),
            life: p.life.clone(),
        };
        drop(st);
        drop(file);
        Ok(target)
    }

    fn info(&self, t: &Target) -> TargetInfo {
        TargetInfo {
            key: t.id,
            tgid: t.leader.tgid_nr_ns(None),
            num_gpus: self.0.nodes(),
        }
    }

    fn alive(&self, t: &Target) -> bool {
        // This process only, and without the model's lock: the engine asks
        // for every attachment at every call (see `Liveness`).
        t.life.running()
    }

    fn gpu_ids(&self, _t: &Target) -> Result<KVec<u32>> {
        // Fault injection: the allocation of this list fails.
        if NodeKnobs::take(&self.0.fail_node_lists) {
            return Err(ENOMEM);
        }
        let mut v = KVec::with_capacity(self.0.nodes() as usize, GFP_KERNEL)?;
        for n in 0..self.0.nodes() {
            v.push(GPU_ID_BASE + n, GFP_KERNEL)?;
        }
        Ok(v)
    }

    fn query(&self, t: &Target, gpu_id: u32, out: &mut [uapi::kfdp_queue_info]) -> Result<u32> {
        let node = match gpu_id {
            0 => None,
            g => Some(self.0.node_of(g).ok_or(EINVAL)?),
        };
        let mut st = self.0.state.lock();
        st.reap(&self.0);
        let pi = st.find(t.id).ok_or(ESRCH)?;
        let p = &st.processes[pi];
        let mut total = 0u32;
        for n in 0..self.0.nodes() {
            if node.is_some_and(|x| x != n) {
                continue;
            }
            for (qi, q) in p.queues.iter().enumerate() {
                if q.node != n {
                    continue;
                }
                if let Some(slot) = out.get_mut(total as usize) {
                    *slot = self.describe(p, qi);
                }
                total += 1;
            }
        }
        Ok(total)
    }

    fn apply(&self, op: Op, dry_run: bool, items: &mut [Item<'_, Target>]) -> Applied {
        // On the stack for small batches, one allocation for the others.
        let mut small = [Req::default(); REQS_ON_STACK];
        let mut large = KVVec::new();
        let reqs: &mut [Req] = if items.len() <= REQS_ON_STACK {
            &mut small[..items.len()]
        } else if large
            .resize(items.len(), Req::default(), GFP_KERNEL)
            .is_ok()
        {
            &mut large
        } else {
            for it in items.iter_mut() {
                it.status = Outcome::Failed(ENOMEM);
                it.marked = it.owned;
            }
            return Applied::default();
        };
        for (r, it) in reqs.iter_mut().zip(items.iter()) {
            *r = Req::new(
                it.target.id,
                self.0.node_of(it.gpu_id),
                it.queue_id,
                it.owned,
            );
        }
        let cost = self.0.state.lock().apply(&self.0, op, dry_run, reqs);
        for (it, r) in items.iter_mut().zip(reqs.iter()) {
            it.status = r.status;
            it.marked = r.marked;
        }
        Applied {
            runlist_updates: cost.runlist_updates,
            elapsed_ns: cost.elapsed_ns,
        }
    }

    fn freeze(&self, t: &Target, gpu_id: u32, op: FreezeOp) -> FreezeOutcome {
        let thaw = op == FreezeOp::Thaw;
        let Some(node) = self.0.node_of(gpu_id) else {
            return FreezeOutcome {
                status: Err(EINVAL),
                applied: false,
                elapsed_ns: 0,
            };
        };
        let (applied, cost, res) = self.0.state.lock().evict(&self.0, t.id, node, thaw);
        FreezeOutcome {
            status: res,
            applied,
            elapsed_ns: cost.elapsed_ns,
        }
    }

    fn pin_user(&self, t: &Target, addr: u64, write: bool) -> Result<UserWord> {
        let mut st = self.0.state.lock();
        st.reap(&self.0);
        let pi = st.find(t.id).ok_or(ESRCH)?;
        let mm = st.processes[pi].life.mm.clone();
        drop(st);
        // SAFETY: `mm` holds an mm_count on the tenant's address space for
        // the whole call.
        unsafe { UserWord::pin_noticed(mm.as_raw().cast(), addr, write) }
    }
}
