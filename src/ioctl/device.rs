// SPDX-License-Identifier: GPL-2.0

//! `/dev/kfd_preempt`: the misc device through which schedulers call the
//! module. Each open file is an independent [`Owner`]
//! (`Documentation/uapi.rst`).
//!
//! This file only moves bytes: it copies each ioctl's argument in once,
//! checks the fields that concern the whole call, and hands the decoded
//! request to the owner.

use kernel::{
    fs::File,
    ioctl::_IOC_SIZE,
    miscdevice::{
        MiscDevice,
        MiscDeviceRegistration, //
    },
    prelude::*,
    sync::{
        Arc,
        ArcBorrow, //
    },
    uaccess::{
        UserPtr,
        UserSlice, //
    },
};

use crate::{
    backend::amdkfd::AmdKfd,
    backend::mux::Backends,
    backend::sim::backend::SimNodes,
    backend::{
        Backend,
        FreezeOp,
        Op, //
    },
    engine::owner::Owner,
    glue,
    ioctl::activity,
    ioctl::batch,
    ioctl::info,
    ioctl::query,
    uapi, //
};

#[vtable]
impl MiscDevice for Owner<Backends> {
    type Ptr = Arc<Self>;

    fn open(file: &File, _misc: &MiscDeviceRegistration<Self>) -> Result<Arc<Self>> {
        // SAFETY: `file.as_ptr()` is the file being opened, valid for the
        // whole call; the glue only reads its credentials.
        if !unsafe { glue::kfdp_file_may_preempt(file.as_ptr()) } {
            return Err(EPERM);
        }
        let sim = crate::backend::sim::SIM_SLOT.lock().clone().map(SimNodes);
        let backends = Backends::new(AmdKfd, sim);
        let owner = Owner::new(backends, crate::compat::pid_attach())?;
        // Listed for debugfs (crate::stats) while the file is open.
        crate::stats::OPEN.lock().push(owner.clone(), GFP_KERNEL)?;
        Ok(owner)
    }

    fn release(owner: Arc<Self>, _file: &File) {
        crate::stats::OPEN
            .lock()
            .retain(|o| !Arc::ptr_eq(o, &owner));
        owner.close();
    }

    fn ioctl(owner: ArcBorrow<'_, Self>, _file: &File, cmd: u32, arg: usize) -> Result<isize> {
        let owner: Arc<Self> = owner.into();
        dispatch(&owner, cmd, arg)?;
        Ok(0)
    }
}

/// One ioctl of an owner, whatever its backend.
pub(crate) fn dispatch<B: Backend>(owner: &Arc<Owner<B>>, cmd: u32, arg: usize) -> Result {
    let user = UserSlice::new(UserPtr::from_addr(arg), _IOC_SIZE(cmd));
    match cmd {
        uapi::KFDP_IOC_INFO => {
            let config = info::Config {
                pid_attach: owner.pid_attach,
                backend_caps: owner.backend.caps(),
                min_preempt_interval_us: owner.backend.min_preempt_interval_us(),
            };
            user.writer().write(&info::info(config))
        }
        uapi::KFDP_IOC_ATTACH => {
            let (mut r, mut w) = user.reader_writer();
            let mut a: uapi::kfdp_attach = r.read()?;
            // Probe the output before anything changes (EFAULT changes nothing).
            w.write(&a)?;
            // Asked only where it decides (PID attach): capable() marks the
            // task as having used the privilege (PF_SUPERPRIV) and audits
            // it, which a scheduler's every fd ATTACH must not do.
            // SAFETY: Reads current's credentials, no other state.
            owner.attach(&mut a, || unsafe { glue::kfdp_capable_sys_admin() })?;
            let mut w2 = UserSlice::new(UserPtr::from_addr(arg), _IOC_SIZE(cmd)).writer();
            let res = w2.write(&a);
            owner.rearm();
            res
        }
        uapi::KFDP_IOC_DETACH => {
            let d: uapi::kfdp_detach = user.reader().read()?;
            owner.detach(&d)?;
            owner.rearm();
            Ok(())
        }
        uapi::KFDP_IOC_QUERY => query::query(owner, arg, _IOC_SIZE(cmd)),
        uapi::KFDP_IOC_PREEMPT => batch::batch(owner, Op::Preempt, arg, _IOC_SIZE(cmd)),
        uapi::KFDP_IOC_RESUME => batch::batch(owner, Op::Resume, arg, _IOC_SIZE(cmd)),
        uapi::KFDP_IOC_FREEZE | uapi::KFDP_IOC_THAW => {
            let (mut r, mut w) = user.reader_writer();
            let mut f: uapi::kfdp_freeze = r.read()?;
            w.write(&f)?;
            let op = if cmd == uapi::KFDP_IOC_THAW {
                FreezeOp::Thaw
            } else {
                FreezeOp::Freeze
            };
            owner.freeze(&mut f, op)?;
            UserSlice::new(UserPtr::from_addr(arg), _IOC_SIZE(cmd))
                .writer()
                .write(&f)
        }
        uapi::KFDP_IOC_WATCH => activity::watch(owner, true, arg, _IOC_SIZE(cmd)),
        uapi::KFDP_IOC_UNWATCH => activity::watch(owner, false, arg, _IOC_SIZE(cmd)),
        uapi::KFDP_IOC_SAMPLE => activity::sample(owner, arg, _IOC_SIZE(cmd)),
        uapi::KFDP_IOC_ARM => activity::arm(owner, arg, _IOC_SIZE(cmd)),
        _ => Err(ENOTTY),
    }
}
