// SPDX-License-Identifier: GPL-2.0

//! KFDP_IOC_QUERY: the target's queues, with what this owner (and others)
//! hold on them. It replaces scraping runtime logs for queue addresses.

use kernel::{
    prelude::*,
    sync::Arc,
    uaccess::{
        UserPtr,
        UserSlice, //
    },
};

use crate::{
    backend::Backend,
    batch::element,
    owner::{
        attachment,
        Owner, //
    },
    registry::{
        QueueKey,
        REGISTRY, //
    },
    uapi::{
        kfdp_query,
        kfdp_queue_info,
        KFDP_MAX_BATCH,
        KFDP_QS_FROZEN,
        KFDP_QS_OWNED,
        KFDP_QS_OWNED_OTHER, //
    },
};

const INFO_SIZE: usize = size_of::<kfdp_queue_info>();

/// Adds the ownership bits only the engine knows to `qi.state`.
fn ownership<B: Backend>(
    owner: &Owner<B>,
    key: u64,
    handle: u32,
    marks: &[crate::owner::Mark],
    qi: &mut kfdp_queue_info,
) {
    let reg = REGISTRY.lock();
    let q = QueueKey {
        target: key,
        gpu_id: qi.gpu_id,
        queue_id: qi.queue_id,
    };
    if marks
        .iter()
        .any(|m| m.handle == handle && m.gpu_id == qi.gpu_id && m.queue_id == qi.queue_id)
    {
        qi.state |= KFDP_QS_OWNED;
    } else if reg.mark_owner(&q).is_some_and(|o| o != owner.id) {
        qi.state |= KFDP_QS_OWNED_OTHER;
    }
    if reg.frozen(key, qi.gpu_id) {
        qi.state |= KFDP_QS_FROZEN;
    }
}

/// KFDP_IOC_QUERY.
pub(crate) fn query<B: Backend>(owner: &Arc<Owner<B>>, arg: usize, size: usize) -> Result {
    let header = || UserSlice::new(UserPtr::from_addr(arg), size);
    let mut q: kfdp_query = header().reader().read()?;
    if q.reserved != [0; 2] {
        return Err(EINVAL);
    }
    if q.capacity > 0 && (q.entry_size as usize) < INFO_SIZE {
        return Err(EINVAL);
    }
    header().writer().write(&q)?;

    // Bounded: at most KFDP_MAX_BATCH descriptions per call.
    let cap = q.capacity.min(KFDP_MAX_BATCH) as usize;
    let mut buf = KVec::with_capacity(cap, GFP_KERNEL)?;
    buf.resize(cap, kfdp_queue_info::default(), GFP_KERNEL)?;

    let total = {
        let mut guard = owner.state.lock();
        let state = &mut *guard;
        owner.sweep(state);
        let att = attachment(&state.attachments, q.handle).ok_or(EINVAL)?;
        let target = att.target.as_ref().ok_or(ESRCH)?;
        let total = owner.backend.query(target, q.gpu_id, &mut buf)?;
        let written = (total as usize).min(cap);
        for qi in buf[..written].iter_mut() {
            ownership(owner, att.key, att.handle, &state.marks, qi);
        }
        total
    };

    let written = (total as usize).min(cap);
    for (i, qi) in buf[..written].iter().enumerate() {
        let ptr = element(q.entries_ptr, i, q.entry_size as usize)?;
        UserSlice::new(ptr, INFO_SIZE).writer().write(qi)?;
    }
    q.num_queues = total;
    q.num_written = written as u32;
    header().writer().write(&q)
}
