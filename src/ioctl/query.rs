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
    engine::owner::{
        attachment,
        Mark,
        MarkKey,
        Owner, //
    },
    engine::registry::{
        QueueKey,
        Registry,
        REGISTRY, //
    },
    ioctl::user_array,
    sorted_map::SortedMap,
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
fn ownership(
    owner: u64,
    reg: &Registry,
    key: u64,
    handle: u32,
    marks: &SortedMap<MarkKey, Mark>,
    qi: &mut kfdp_queue_info,
) {
    let q = QueueKey {
        target: key,
        gpu_id: qi.gpu_id,
        queue_id: qi.queue_id,
    };
    if marks.get(&(handle, qi.gpu_id, qi.queue_id)).is_some() {
        qi.state |= KFDP_QS_OWNED;
    } else if reg.mark_owner(&q).is_some_and(|o| o != owner) {
        qi.state |= KFDP_QS_OWNED_OTHER;
    }
    if reg.frozen(key, qi.gpu_id) {
        qi.state |= KFDP_QS_FROZEN;
    }
}

/// How often [`describe`] asks again when queues were created between its
/// count and its copy.
const DESCRIBE_TRIES: u32 = 4;

/// The target's queue descriptions on `gpu_id`, at most `cap` of them, in a
/// buffer sized to the queues that exist rather than to the caller's
/// capacity (up to KFDP_MAX_BATCH descriptions, 384 KiB), and how many
/// exist. The count is asked first; if queues appeared before the copy,
/// the copy is redone with room for them, so that the buffer always holds
/// min(count, cap) descriptions; EAGAIN if they keep appearing.
fn describe<B: Backend>(
    backend: &B,
    target: &B::Target,
    gpu_id: u32,
    cap: usize,
) -> Result<(KVVec<kfdp_queue_info>, u32)> {
    let mut total = backend.query(target, gpu_id, &mut [])?;
    for _ in 0..DESCRIBE_TRIES {
        let want = (total as usize).min(cap);
        let mut buf = KVVec::with_capacity(want, GFP_KERNEL)?;
        buf.resize(want, kfdp_queue_info::default(), GFP_KERNEL)?;
        total = backend.query(target, gpu_id, &mut buf)?;
        if (total as usize).min(cap) <= want {
            buf.truncate((total as usize).min(want));
            return Ok((buf, total));
        }
    }
    Err(EAGAIN)
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

    // At most KFDP_MAX_BATCH descriptions per call.
    let cap = q.capacity.min(KFDP_MAX_BATCH) as usize;
    let (buf, total) = owner.with_swept(|state| -> Result<_> {
        let att = attachment(&state.attachments, q.handle).ok_or(EINVAL)?;
        let target = att.target.as_ref().ok_or(ESRCH)?;
        let (mut buf, total) = describe(&owner.backend, target, q.gpu_id, cap)?;
        let reg = REGISTRY.lock();
        for qi in buf.iter_mut() {
            ownership(owner.id, &reg, att.key, att.handle, &state.marks, qi);
        }
        Ok((buf, total))
    })?;

    user_array::write(q.entries_ptr, q.entry_size, &buf)?;
    q.num_queues = total;
    q.num_written = buf.len() as u32;
    header().writer().write(&q)
}
