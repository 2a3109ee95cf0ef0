// SPDX-License-Identifier: GPL-2.0

//! The amdkfd backend: the [`Backend`] of real GPUs, implemented by the C
//! glue in `glue/` (which sees amdkfd's private headers).

use core::ptr::NonNull;

use kernel::prelude::*;

use crate::{
    backend::{
        Applied,
        Backend,
        FreezeOp,
        FreezeOutcome,
        Item,
        Op,
        Outcome,
        TargetInfo,
        MAX_GPUS, //
    },
    glue,
    uapi, //
};

/// The amdkfd backend. It has no state of its own: amdkfd has it all.
pub(crate) struct AmdKfd;

/// A process pinned by the glue.
///
/// # Invariants
///
/// `ptr` was returned by `kfdp_target_from_fd` or `kfdp_target_from_pid`
/// and is released only by [`Drop`].
pub(crate) struct Target {
    ptr: NonNull<glue::kfdp_target>,
}

// SAFETY: The glue's target is a set of references (an mmu_notifier user,
// an mm_count, a module reference) that may be dropped from any thread, and
// every glue function synchronises its accesses with amdkfd's own locks.
unsafe impl Send for Target {}

// SAFETY: As above; shared use only calls glue functions that lock.
unsafe impl Sync for Target {}

impl Drop for Target {
    fn drop(&mut self) {
        // SAFETY: By the type invariant `ptr` is a live glue target, and it
        // is never used again.
        unsafe { glue::kfdp_target_put(self.ptr.as_ptr()) };
    }
}

fn errno(r: i32) -> Result {
    if r < 0 {
        Err(Error::from_errno(r))
    } else {
        Ok(())
    }
}

impl Backend for AmdKfd {
    type Target = Target;

    fn caps(&self) -> u64 {
        u64::from(
            uapi::KFDP_CAP_HWS_BATCH
                | uapi::KFDP_CAP_MES
                | uapi::KFDP_CAP_FREEZE
                | uapi::KFDP_CAP_ACTIVITY,
        )
    }

    fn min_preempt_interval_us(&self) -> u32 {
        // SAFETY: Reads a module parameter; no other state.
        unsafe { glue::kfdp_min_preempt_interval() }
    }

    fn attach(&self, kind: u32, fd: i32, pid: i32) -> Result<Target> {
        // amdgpu may have come (or come back) since the load's check.
        let checked = crate::layout::gate()?;
        let mut ptr: *mut glue::kfdp_target = core::ptr::null_mut();
        let r = match kind {
            // SAFETY: `ptr` is a valid place for the glue's result.
            uapi::KFDP_TARGET_KFD_FD => unsafe { glue::kfdp_target_from_fd(fd, &mut ptr) },
            // SAFETY: As above.
            uapi::KFDP_TARGET_PID => unsafe { glue::kfdp_target_from_pid(pid, &mut ptr) },
            _ => return Err(EINVAL),
        };
        errno(r)?;
        // INVARIANT: On success the glue returned a pinned target.
        let target = NonNull::new(ptr).map(|ptr| Target { ptr }).ok_or(EINVAL)?;
        // The pin holds amdgpu now; if it was reloaded between the gate and
        // the pin, this one was never checked (dropping the target unpins).
        if crate::layout::generation() != checked {
            return Err(EAGAIN);
        }
        Ok(target)
    }

    fn info(&self, t: &Target) -> TargetInfo {
        let mut info = glue::kfdp_glue_target_info::default();
        // SAFETY: `t.ptr` is live (type invariant); `info` is writable.
        unsafe { glue::kfdp_target_info(t.ptr.as_ptr(), &mut info) };
        TargetInfo {
            key: info.key,
            tgid: info.tgid,
            num_gpus: info.num_gpus,
        }
    }

    fn alive(&self, t: &Target) -> bool {
        // SAFETY: `t.ptr` is live (type invariant).
        unsafe { glue::kfdp_target_alive(t.ptr.as_ptr()) }
    }

    fn gpu_ids(&self, t: &Target) -> Result<KVec<u32>> {
        let mut ids = [0u32; MAX_GPUS];
        // SAFETY: `t.ptr` is live; `ids` has room for `MAX_GPUS` entries.
        let n =
            unsafe { glue::kfdp_target_gpu_ids(t.ptr.as_ptr(), ids.as_mut_ptr(), MAX_GPUS as u32) };
        let n = usize::try_from(n).unwrap_or(0).min(MAX_GPUS);
        let mut v = KVec::with_capacity(n, GFP_KERNEL)?;
        for id in &ids[..n] {
            v.push(*id, GFP_KERNEL)?;
        }
        Ok(v)
    }

    fn query(&self, t: &Target, gpu_id: u32, out: &mut [uapi::kfdp_queue_info]) -> Result<u32> {
        let mut total = 0u32;
        let cap = u32::try_from(out.len()).map_err(|_| EINVAL)?;
        // SAFETY: `t.ptr` is live; `out` has room for `cap` entries.
        let r = unsafe {
            glue::kfdp_target_query(t.ptr.as_ptr(), gpu_id, out.as_mut_ptr(), cap, &mut total)
        };
        errno(r)?;
        Ok(total)
    }

    fn apply(&self, op: Op, dry_run: bool, items: &mut [Item<'_, Target>]) -> Applied {
        // One allocation; the pushes below stay within it.
        let Ok(mut raw) = KVVec::with_capacity(items.len(), GFP_KERNEL) else {
            for it in items.iter_mut() {
                it.status = Outcome::Failed(ENOMEM);
                it.marked = it.owned;
            }
            return Applied::default();
        };
        for it in items.iter() {
            let item = glue::kfdp_glue_item {
                target: it.target.ptr.as_ptr(),
                gpu_id: it.gpu_id,
                queue_id: it.queue_id,
                flags: if it.owned {
                    glue::KFDP_GLUE_ITEM_OWNED
                } else {
                    0
                },
                ..Default::default()
            };
            if raw.push(item, GFP_KERNEL).is_err() {
                for it in items.iter_mut() {
                    it.status = Outcome::Failed(ENOMEM);
                    it.marked = it.owned;
                }
                return Applied::default();
            }
        }
        let op = match op {
            Op::Preempt => glue::KFDP_GLUE_PREEMPT,
            Op::Resume => glue::KFDP_GLUE_RESUME,
        };
        let mut res = glue::kfdp_glue_result::default();
        let n = u32::try_from(raw.len()).unwrap_or(0);
        // SAFETY: Every item's target is live (held by `items`), `raw` holds
        // `n` items, and `res` is writable.
        unsafe { glue::kfdp_apply(op, dry_run, raw.as_mut_ptr(), n, &mut res) };
        for (it, r) in items.iter_mut().zip(raw.iter()) {
            it.status = Outcome::from_status(r.status);
            it.marked = r.marked != 0;
        }
        Applied {
            runlist_updates: res.runlist_updates,
            elapsed_ns: res.elapsed_ns,
        }
    }

    fn freeze(&self, t: &Target, gpu_id: u32, op: FreezeOp) -> FreezeOutcome {
        let mut elapsed_ns = 0u64;
        let mut applied = false;
        let thaw = op == FreezeOp::Thaw;
        // SAFETY: `t.ptr` is live; the out parameters are writable.
        let status = unsafe {
            glue::kfdp_freeze(t.ptr.as_ptr(), gpu_id, thaw, &mut elapsed_ns, &mut applied)
        };
        FreezeOutcome {
            status: errno(status),
            applied,
            elapsed_ns,
        }
    }

    fn pin_user(&self, t: &Target, addr: u64, write: bool) -> Result<crate::umem::UserWord> {
        // SAFETY: By the type invariant `t.ptr` is a live glue target.
        let mm = unsafe { glue::kfdp_target_mm(t.ptr.as_ptr()) };
        if mm.is_null() {
            return Err(ESRCH);
        }
        // SAFETY: The target holds an mm_count on `mm` while it lives, and
        // it outlives this call.
        unsafe { crate::umem::UserWord::pin_noticed(mm, addr, write) }
    }
}
