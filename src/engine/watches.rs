// SPDX-License-Identifier: GPL-2.0

//! Making an owner's watches ([`crate::activity::Watch`]) of its targets'
//! queues: what QUERY says of a queue now, and a watch of it pinned where
//! its indices are. KFDP_IOC_WATCH ([`crate::ioctl::activity`]) makes them
//! at the caller's request, housekeeping again for those whose memory moved.
//! Targets come from the caller (`crate::engine::owner::attached_target`),
//! so that the owner, which calls this, is not imported here.

use kernel::{prelude::*, sync::Arc};

use crate::{
    activity::{
        QueueInstance,
        Watch, //
    },
    backend::Backend,
    uapi::{
        self,
        kfdp_queue_ref, //
    },
};

/// What QUERY says now of the queue `e` names, of `target` (the target
/// `e.handle` names, or why there is none).
pub(crate) fn describe<B: Backend>(
    backend: &B,
    target: Result<&B::Target>,
    e: &kfdp_queue_ref,
) -> Result<uapi::kfdp_queue_info> {
    let target = target?;
    if !backend.gpu_ids(target)?.contains(&e.gpu_id) {
        return Err(EINVAL);
    }
    let total = backend.query(target, e.gpu_id, &mut [])? as usize;
    let mut infos = KVVec::with_capacity(total, GFP_KERNEL)?;
    infos.resize(total, uapi::kfdp_queue_info::default(), GFP_KERNEL)?;
    let n = backend.query(target, e.gpu_id, &mut infos)? as usize;
    infos[..n.min(total)]
        .iter()
        .find(|q| q.queue_id == e.queue_id)
        .copied()
        .ok_or(ENOENT)
}

pub(crate) fn instance_of(q: &uapi::kfdp_queue_info) -> QueueInstance {
    QueueInstance {
        ring: q.ring_base_address,
        read_address: q.read_pointer_address,
        write_address: q.write_pointer_address,
    }
}

/// Watches the queue `qi` describes: pins its indices in `target`'s
/// address space.
pub(crate) fn watch_one<B: Backend>(
    backend: &B,
    target: &B::Target,
    e: &kfdp_queue_ref,
    qi: &uapi::kfdp_queue_info,
) -> Result<Watch> {
    // Only AQL queues have the read/write dispatch ids this reads; PM4 and
    // SDMA queues count other units.
    if qi.queue_type != uapi::KFD_IOC_QUEUE_TYPE_COMPUTE_AQL
        || qi.read_pointer_address == 0
        || qi.write_pointer_address == 0
    {
        return Err(crate::compat::eopnotsupp());
    }
    let read = backend.pin_user(target, qi.read_pointer_address, false)?;
    let write = backend.pin_user(target, qi.write_pointer_address, false)?;
    Ok(Watch::new(
        e.handle,
        e.gpu_id,
        e.queue_id,
        instance_of(qi),
        read,
        write,
    ))
}

/// A new watch of the queue `e` names, of `target`, where QUERY says its
/// indices are.
fn watch_anew<B: Backend>(
    backend: &B,
    target: Result<&B::Target>,
    e: &kfdp_queue_ref,
) -> Result<Arc<Watch>> {
    let target = target?;
    let qi = describe(backend, Ok(target), e)?;
    Ok(Arc::new(watch_one(backend, target, e, &qi)?, GFP_KERNEL)?)
}

/// Pins again the watches that moved ([`Watch::moved`]) and are due, each
/// where QUERY says its queue's indices are now: a queue made again at the
/// addresses of the memory it was given before (an allocator hands a freed
/// range back) looks the same to QUERY but is new memory. Housekeeping
/// calls it at every run. The old watches go into `dropped`, for the
/// caller to drop once it has unlocked, and [`crate::activity::resample`]
/// if any were. A watch that cannot be pinned again (its queue is gone, or
/// its memory not mapped yet) is tried again after a wait. `target_of`
/// gives the target of a handle. Returns how many were replaced.
pub(crate) fn remake_moved<'a, B: Backend>(
    backend: &B,
    watches: &mut KVec<Arc<Watch>>,
    target_of: impl Fn(u32) -> Result<&'a B::Target>,
    now: i64,
    dropped: &mut KVec<Arc<Watch>>,
) -> usize
where
    B::Target: 'a,
{
    let mut replaced = 0;
    for i in 0..watches.len() {
        let w = &watches[i];
        if !w.remake_due(now) {
            continue;
        }
        let e = kfdp_queue_ref {
            handle: w.handle,
            gpu_id: w.gpu_id,
            queue_id: w.queue_id,
            ..Default::default()
        };
        let remade = dropped
            .reserve(1, GFP_KERNEL)
            .map_err(Error::from)
            .and_then(|()| watch_anew(backend, target_of(e.handle), &e));
        match remade {
            Ok(new) => {
                let old = core::mem::replace(&mut watches[i], new);
                // Room reserved above.
                let _ = dropped.push(old, GFP_KERNEL);
                replaced += 1;
            }
            Err(_) => watches[i].remake_failed(now),
        }
    }
    replaced
}
