// SPDX-License-Identifier: GPL-2.0

//! `/dev/kfd_preempt_sim`: the tenant side of the simulated node. Each open
//! file is one simulated KFD process, bound to the opener's address space
//! as amdkfd binds a kfd_process to its mm.

use kernel::{
    fs::File,
    ioctl::_IOC_SIZE,
    miscdevice::{
        MiscDevice,
        MiscDeviceRegistration, //
    },
    prelude::*,
    sync::{
        aref::ARef,
        Arc,
        ArcBorrow, //
    },
    task::Task,
    uaccess::{
        UserPtr,
        UserSlice, //
    },
};

use super::{
    model::{
        MAX_PRIORITY,
        QUEUE_TYPE_COMPUTE,
        QUEUE_TYPE_COMPUTE_AQL,
        QUEUE_TYPE_SDMA, //
    },
    ring::{
        Ring,
        RingAddrs, //
    },
    Sim,
    GPU_ID_BASE,
    SIM_SLOT, //
};
use crate::uapi;

/// One open tenant file: one simulated process.
pub(crate) struct Tenant {
    sim: Arc<Sim>,
    id: u64,
    /// A tenant is an open file: it holds the module (7.2, where the file
    /// does not).
    _module: crate::compat::FileModuleRef,
}

#[vtable]
impl MiscDevice for Tenant {
    type Ptr = Arc<Self>;

    fn open(file: &File, _misc: &MiscDeviceRegistration<Self>) -> Result<Arc<Self>> {
        let module = crate::compat::FileModuleRef::new()?;
        let sim = SIM_SLOT.lock().clone().ok_or(ENODEV)?;
        let task = kernel::current!();
        // Kernel threads have no address space to bind a process to.
        let mm = task.mm().ok_or(EINVAL)?;
        let mm: ARef<kernel::mm::Mm> = ARef::from(&**mm);
        let leader: ARef<Task> = ARef::from(task.group_leader());
        let id = sim
            .state
            .lock()
            .create_process(file.as_ptr() as usize, leader, mm)?;
        let keep = sim.clone();
        Arc::new(
            Tenant {
                sim,
                id,
                _module: module,
            },
            GFP_KERNEL,
        )
        .map_err(|e| {
            keep.state.lock().release(&keep, id);
            e.into()
        })
    }

    fn release(tenant: Arc<Self>, _file: &File) {
        tenant.sim.state.lock().release(&tenant.sim, tenant.id);
    }

    fn ioctl(tenant: ArcBorrow<'_, Self>, _file: &File, cmd: u32, arg: usize) -> Result<isize> {
        // QUEUE_STATUS only reads the simulator's progress counters,
        // which amdkfd does not have: tools read it through a copy of
        // the tenant's file (`kfd-preempt list`, the kselftests).
        if cmd != uapi::KFDP_SIM_IOC_QUEUE_STATUS && !tenant.used_by_opener() {
            return Err(EBADF);
        }
        let user = UserSlice::new(UserPtr::from_addr(arg), _IOC_SIZE(cmd));
        match cmd {
            uapi::KFDP_SIM_IOC_CREATE_QUEUE => {
                let (mut r, mut w) = user.reader_writer();
                let mut c: uapi::kfdp_sim_queue_create = r.read()?;
                w.write(&c)?;
                tenant.create(&mut c)?;
                UserSlice::new(UserPtr::from_addr(arg), _IOC_SIZE(cmd))
                    .writer()
                    .write(&c)?;
            }
            uapi::KFDP_SIM_IOC_DESTROY_QUEUE => {
                let d: uapi::kfdp_sim_queue_destroy = user.reader().read()?;
                if d.reserved != 0 {
                    return Err(EINVAL);
                }
                let sim = &tenant.sim;
                sim.state.lock().destroy_queue(sim, tenant.id, d.queue_id)?;
            }
            uapi::KFDP_SIM_IOC_QUEUE_STATUS => {
                let (mut r, mut w) = user.reader_writer();
                let mut s: uapi::kfdp_sim_queue_status = r.read()?;
                if s.reserved != [0; 2] {
                    return Err(EINVAL);
                }
                w.write(&s)?;
                tenant.status(&mut s)?;
                UserSlice::new(UserPtr::from_addr(arg), _IOC_SIZE(cmd))
                    .writer()
                    .write(&s)?;
            }
            uapi::KFDP_SIM_IOC_CREATE_RING => {
                let (mut r, mut w) = user.reader_writer();
                let mut c: uapi::kfdp_sim_ring_create = r.read()?;
                w.write(&c)?;
                tenant.create_ring(&mut c)?;
                if let Err(e) = UserSlice::new(UserPtr::from_addr(arg), _IOC_SIZE(cmd))
                    .writer()
                    .write(&c)
                {
                    // The probe above succeeded: only a racing munmap gets
                    // here. Nothing is left behind.
                    let sim = &tenant.sim;
                    let _ = sim.state.lock().destroy_queue(sim, tenant.id, c.queue_id);
                    return Err(e);
                }
            }
            uapi::KFDP_SIM_IOC_DOORBELL => {
                let d: uapi::kfdp_sim_doorbell = user.reader().read()?;
                if d.reserved != 0 {
                    return Err(EINVAL);
                }
                let sim = &tenant.sim;
                let mut st = sim.state.lock();
                st.reap(sim);
                st.doorbell(tenant.id, d.queue_id)?;
            }
            _ => return Err(ENOTTY),
        }
        Ok(0)
    }
}

impl Tenant {
    /// Whether the caller is the process that opened this file. amdkfd's
    /// `kfd_ioctl()` refuses every other with `EBADF`: a forked child holds
    /// its parent's descriptor, bound to the parent's process ("Only the
    /// process that opened /dev/kfd can use the file descriptor"). A
    /// process torn down already passes, for its ioctl to say `ESRCH`.
    fn used_by_opener(&self) -> bool {
        let task = kernel::current!();
        let st = self.sim.state.lock();
        st.find(self.id)
            .is_none_or(|pi| core::ptr::eq::<Task>(&*st.processes[pi].leader, task.group_leader()))
    }

    fn create(&self, c: &mut uapi::kfdp_sim_queue_create) -> Result {
        if c.reserved0 != 0 || c.reserved1 != 0 {
            return Err(EINVAL);
        }
        if c.node >= self.sim.nodes() || c.priority > MAX_PRIORITY {
            return Err(EINVAL);
        }
        if !matches!(
            c.queue_type,
            QUEUE_TYPE_COMPUTE | QUEUE_TYPE_SDMA | QUEUE_TYPE_COMPUTE_AQL
        ) {
            return Err(EINVAL);
        }
        let sim = &self.sim;
        let qid =
            sim.state
                .lock()
                .create_queue(sim, self.id, c.node, c.queue_type, c.priority, None)?;
        c.queue_id = qid;
        c.gpu_id = GPU_ID_BASE + c.node;
        Ok(())
    }

    /// KFDP_SIM_IOC_CREATE_RING: an AQL queue whose ring and indices are
    /// in the caller's memory, pinned until the queue is destroyed.
    fn create_ring(&self, c: &mut uapi::kfdp_sim_ring_create) -> Result {
        if c.reserved != 0 || c.queue_id != 0 || c.gpu_id != 0 {
            return Err(EINVAL);
        }
        if c.node >= self.sim.nodes() || c.priority > MAX_PRIORITY {
            return Err(EINVAL);
        }
        let addrs = RingAddrs {
            ring: c.ring_address,
            packets: c.ring_packets,
            read_index: c.read_index_address,
            write_index: c.write_index_address,
        };
        let task = kernel::current!();
        let mm = task.mm().ok_or(EINVAL)?;
        {
            // The ring is pinned in the caller's address space but found
            // through the process's (QUERY, WATCH): they must be one, as
            // amdkfd refuses a /dev/kfd used from another process.
            let st = self.sim.state.lock();
            let pi = st.find(self.id).ok_or(ESRCH)?;
            if st.processes[pi].life.mm.as_raw() != mm.as_raw() {
                return Err(EBADF);
            }
        }
        // SAFETY: `mm` is the calling task's address space, which stays
        // valid (with its mm_count) while this ioctl runs.
        let ring = unsafe { Ring::pin(mm.as_raw().cast(), addrs)? };
        let ring = KBox::new(ring, GFP_KERNEL)?;
        let sim = &self.sim;
        let mut st = sim.state.lock();
        let qid = st.create_queue(
            sim,
            self.id,
            c.node,
            QUEUE_TYPE_COMPUTE_AQL,
            c.priority,
            Some(ring),
        )?;
        sim.kick(&mut st);
        c.queue_id = qid;
        c.gpu_id = GPU_ID_BASE + c.node;
        Ok(())
    }

    fn status(&self, s: &mut uapi::kfdp_sim_queue_status) -> Result {
        let sim = &self.sim;
        let mut st = sim.state.lock();
        st.reap(sim);
        let pi = st.find(self.id).ok_or(ESRCH)?;
        let now = kernel::time::Instant::<kernel::time::Monotonic>::now();
        let p = &mut st.processes[pi];
        let qi = p
            .queues
            .iter()
            .position(|q| q.id == s.queue_id)
            .ok_or(ENOENT)?;
        let (retired, in_flight) = p.queues[qi].progress(now);
        s.state = p.state_bits(&p.queues[qi]);
        s.retired = retired;
        s.in_flight = in_flight;
        Ok(())
    }
}
