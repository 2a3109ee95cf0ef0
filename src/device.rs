// SPDX-License-Identifier: GPL-2.0

//! `/dev/kfd_preempt`: the misc device through which schedulers call the
//! module. Each open file is an independent owner (`Documentation/uapi.rst`).

use kernel::{
    fs::File,
    ioctl::_IOC_SIZE,
    miscdevice::{
        MiscDevice,
        MiscDeviceRegistration, //
    },
    prelude::*,
    uaccess::UserSlice,
};

use crate::{
    glue,
    info,
    uapi, //
};

/// The state of one open `/dev/kfd_preempt` file: one owner.
///
/// Owners will hold their attachments, preemptions and freezes; until those
/// ioctls are implemented an owner only answers `KFDP_IOC_INFO`.
pub(crate) struct Owner {
    config: info::Config,
}

#[vtable]
impl MiscDevice for Owner {
    type Ptr = KBox<Self>;

    fn open(file: &File, _misc: &MiscDeviceRegistration<Self>) -> Result<KBox<Self>> {
        // SAFETY: `file.as_ptr()` is the file being opened, valid for the
        // whole call; the glue only reads its credentials.
        if !unsafe { glue::kfdp_file_may_preempt(file.as_ptr()) } {
            return Err(EPERM);
        }
        Ok(KBox::new(
            Owner {
                config: info::Config::from_params(),
            },
            GFP_KERNEL,
        )?)
    }

    fn ioctl(owner: &Owner, _file: &File, cmd: u32, arg: usize) -> Result<isize> {
        let user = UserSlice::new(UserPtr::from_addr(arg), _IOC_SIZE(cmd));
        match cmd {
            uapi::KFDP_IOC_INFO => {
                user.writer().write(&info::info(owner.config))?;
                Ok(0)
            }
            // The rest of v1 is defined in the header but not implemented
            // yet; callers learn that from ENOTTY, as for an unknown number.
            uapi::KFDP_IOC_ATTACH
            | uapi::KFDP_IOC_DETACH
            | uapi::KFDP_IOC_QUERY
            | uapi::KFDP_IOC_PREEMPT
            | uapi::KFDP_IOC_RESUME
            | uapi::KFDP_IOC_FREEZE
            | uapi::KFDP_IOC_THAW => Err(ENOTTY),
            _ => Err(ENOTTY),
        }
    }
}
