// SPDX-License-Identifier: GPL-2.0

//! A simulated queue's ring: packets and indices in the tenant's own
//! memory, pinned, as a ROCm queue's AQL ring and `amd_queue_t` are
//! (`Documentation/simulated-node.rst`, "Workloads").
//!
//! The node reads the packets the tenant published and writes back what a
//! CP writes: each packet's times, then the read index. The watch path of
//! activity detection pins the same indices again, through the address
//! space, exactly as it does for a real queue.

use kernel::prelude::*;

use crate::{
    compat::{
        smp_rmb,
        smp_wmb, //
    },
    glue, uapi,
    umem::{
        UserPage,
        UserWord,
        PAGE_SIZE, //
    },
};

/// Largest ring, in packets.
pub(crate) const MAX_PACKETS: u32 = 1024;
/// Longest dispatch: a mistyped work_ns cannot hold a node for hours.
const MAX_WORK_NS: u64 = 10_000_000_000;

const PACKET_SIZE: u64 = size_of::<uapi::kfdp_sim_packet>() as u64;
const OFF_HEADER: usize = core::mem::offset_of!(uapi::kfdp_sim_packet, header);
const OFF_WORK: usize = core::mem::offset_of!(uapi::kfdp_sim_packet, work_ns);
const OFF_SUBMIT: usize = core::mem::offset_of!(uapi::kfdp_sim_packet, submit_ns);
const OFF_START: usize = core::mem::offset_of!(uapi::kfdp_sim_packet, start_ns);
const OFF_END: usize = core::mem::offset_of!(uapi::kfdp_sim_packet, end_ns);

/// Where a ring queue's memory is, as QUERY reports it.
#[derive(Clone, Copy)]
pub(crate) struct RingAddrs {
    pub(crate) ring: u64,
    pub(crate) packets: u32,
    pub(crate) read_index: u64,
    pub(crate) write_index: u64,
}

/// The node's side of one ring queue.
pub(crate) struct Ring {
    pub(crate) addrs: RingAddrs,
    pages: KVec<UserPage>,
    read_index: UserWord,
    write_index: UserWord,
    /// The read index the node last wrote: packets retired.
    pub(crate) retired: u64,
    /// The write index the node has seen (doorbell or map); never behind
    /// `retired`, never more than a ring ahead of it.
    seen: u64,
    /// When each visible packet became visible, by slot: kept here, not in
    /// the tenant's copy (`submit_ns`), which the tenant could rewrite to
    /// jump the queue.
    submitted: KVec<i64>,
    /// Work left of the head dispatch once it started.
    pub(crate) remaining_ns: Option<u64>,
}

fn overlaps(a: u64, a_len: u64, b: u64, b_len: u64) -> bool {
    a < b.saturating_add(b_len) && b < a.saturating_add(a_len)
}

impl Ring {
    /// Checks a KFDP_SIM_IOC_CREATE_RING request and pins its memory in
    /// `mm` (the calling tenant's).
    ///
    /// # Safety
    ///
    /// `mm` must be the caller's address space, whose `mm_count` the caller
    /// holds for the duration of the call.
    pub(crate) unsafe fn pin(mm: *mut glue::mm_struct, addrs: RingAddrs) -> Result<Self> {
        let n = addrs.packets;
        if n == 0 || n > MAX_PACKETS || !n.is_power_of_two() {
            return Err(EINVAL);
        }
        let len = u64::from(n) * PACKET_SIZE;
        if addrs.ring % PACKET_SIZE != 0 || addrs.read_index % 8 != 0 || addrs.write_index % 8 != 0
        {
            return Err(EINVAL);
        }
        if overlaps(addrs.read_index, 8, addrs.write_index, 8)
            || overlaps(addrs.read_index, 8, addrs.ring, len)
            || overlaps(addrs.write_index, 8, addrs.ring, len)
            || addrs.ring.checked_add(len).is_none()
        {
            return Err(EINVAL);
        }
        // From the page holding the ring's start: a ring need only be
        // 64-byte aligned, so it may begin anywhere in its first page.
        let first = addrs.ring & !(PAGE_SIZE as u64 - 1);
        let npages = ((addrs.ring - first) + len).div_ceil(PAGE_SIZE as u64) as usize;
        let mut pages = KVec::with_capacity(npages, GFP_KERNEL)?;
        for i in 0..npages {
            let addr = first + (i * PAGE_SIZE) as u64;
            // SAFETY: The caller's guarantee on `mm` is passed on.
            pages.push(unsafe { UserPage::pin(mm, addr, true)? }, GFP_KERNEL)?;
        }
        // SAFETY: As above.
        let read_index = unsafe { UserWord::pin(mm, addrs.read_index, true)? };
        // SAFETY: As above.
        let write_index = unsafe { UserWord::pin(mm, addrs.write_index, false)? };
        let mut submitted = KVec::with_capacity(n as usize, GFP_KERNEL)?;
        submitted.resize(n as usize, 0, GFP_KERNEL)?;
        // The tenant starts from whatever its indices hold, as ROCr does.
        let start = write_index.read();
        read_index.write(start);
        Ok(Self {
            addrs,
            pages,
            read_index,
            write_index,
            retired: start,
            seen: start,
            submitted,
            remaining_ns: None,
        })
    }

    /// The page and offset of `field` of packet `index`. Packets are 64
    /// bytes, 64-byte aligned, so none straddles a page.
    fn at(&self, index: u64, field: usize) -> Option<(&UserPage, usize)> {
        let slot = index & u64::from(self.addrs.packets - 1);
        let off = (self.addrs.ring % PAGE_SIZE as u64) + slot * PACKET_SIZE;
        let page = self.pages.get((off / PAGE_SIZE as u64) as usize)?;
        Some((page, (off % PAGE_SIZE as u64) as usize + field))
    }

    fn get(&self, index: u64, field: usize) -> u64 {
        self.at(index, field).map_or(0, |(p, o)| p.read(o))
    }

    fn set(&self, index: u64, field: usize, value: u64) {
        if let Some((p, o)) = self.at(index, field) {
            p.write(o, value);
        }
    }

    fn slot(&self, index: u64) -> usize {
        (index & u64::from(self.addrs.packets - 1)) as usize
    }

    /// A packet is visible: published before a doorbell or map the node saw.
    pub(crate) fn has_work(&self) -> bool {
        // `seen` is kept within a ring of `retired` (see `observe`).
        self.seen != self.retired
    }

    /// When the head packet became visible.
    pub(crate) fn head_submit_ns(&self) -> i64 {
        self.submitted
            .get(self.slot(self.retired))
            .copied()
            .unwrap_or(0)
    }

    /// Work of the head dispatch (0 for anything but a dispatch).
    pub(crate) fn head_work_ns(&self) -> u64 {
        // The header is the low half of the first word (little endian).
        let header = self.get(self.retired, OFF_HEADER) as u32;
        if header == uapi::KFDP_SIM_PKT_DISPATCH {
            self.get(self.retired, OFF_WORK).min(MAX_WORK_NS)
        } else {
            0
        }
    }

    /// The head dispatch started running at `now`.
    pub(crate) fn start_head(&mut self, now: i64) {
        if self.remaining_ns.is_none() {
            self.remaining_ns = Some(self.head_work_ns());
            self.set(self.retired, OFF_START, now as u64);
        }
    }

    /// The head dispatch retired at `end`: its end time, then the read
    /// index, as the CP orders its writes.
    pub(crate) fn retire_head(&mut self, end: i64) {
        self.set(self.retired, OFF_END, end as u64);
        smp_wmb();
        self.retired = self.retired.wrapping_add(1);
        self.read_index.write(self.retired);
        self.remaining_ns = None;
    }

    /// Reads the tenant's write index (a doorbell, or the map of the queue)
    /// and stamps the packets that became visible.
    pub(crate) fn observe(&mut self, now: i64) {
        let published = self.write_index.read();
        // The packets are read after the index that published them.
        smp_rmb();
        // A tenant may publish at most a ring ahead of what retired, and
        // cannot take back what the node saw; anything else is a broken
        // tenant, and is ignored.
        let ahead = published.wrapping_sub(self.retired);
        let seen = self.seen.wrapping_sub(self.retired);
        if ahead > u64::from(self.addrs.packets) || ahead <= seen {
            return;
        }
        let mut i = self.seen;
        while i != published {
            let slot = self.slot(i);
            if let Some(t) = self.submitted.get_mut(slot) {
                *t = now;
            }
            self.set(i, OFF_SUBMIT, now as u64);
            i = i.wrapping_add(1);
        }
        self.seen = published;
    }
}
