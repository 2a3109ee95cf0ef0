//! The owner device, `/dev/kfd_preempt`.

use std::{
    fs::{File, OpenOptions},
    io,
    os::fd::AsRawFd,
    path::Path,
};

use nix::errno::Errno;

use crate::{uapi, Error};

/// Where the module's misc device lives.
pub const DEVICE_PATH: &str = "/dev/kfd_preempt";

/// An open `/dev/kfd_preempt`: one owner. Everything done through it is
/// undone by the kernel when it is dropped (closed).
#[derive(Debug)]
pub struct Device {
    file: File,
}

/// Capability bits the module reports in [`Info::caps`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Caps(pub u64);

impl Caps {
    /// One runlist update per node per batch (HWS).
    pub const HWS_BATCH: u64 = uapi::KFDP_CAP_HWS_BATCH as u64;
    /// MES nodes are supported (one call per queue).
    pub const MES: u64 = uapi::KFDP_CAP_MES as u64;
    /// FREEZE and THAW are supported.
    pub const FREEZE: u64 = uapi::KFDP_CAP_FREEZE as u64;
    /// Attach by pid is enabled.
    pub const PID: u64 = uapi::KFDP_CAP_PID as u64;
    /// Simulated nodes are present.
    pub const SIM: u64 = uapi::KFDP_CAP_SIM as u64;

    /// The names of the bits set, in ABI order; unknown bits as `0x..`.
    pub fn names(self) -> Vec<String> {
        let known = [
            (Self::HWS_BATCH, "hws-batch"),
            (Self::MES, "mes"),
            (Self::FREEZE, "freeze"),
            (Self::PID, "pid-attach"),
            (Self::SIM, "sim"),
        ];
        let mut rest = self.0;
        let mut names = Vec::new();
        for (bit, name) in known {
            if self.0 & bit != 0 {
                names.push(name.to_string());
                rest &= !bit;
            }
        }
        if rest != 0 {
            names.push(format!("{rest:#x}"));
        }
        names
    }
}

/// What the module implements (`KFDP_IOC_INFO`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Info {
    /// Major ABI version; this crate speaks [`uapi::KFDP_ABI_MAJOR`].
    pub abi_major: u32,
    /// Minor ABI version.
    pub abi_minor: u32,
    /// Capability bits.
    pub caps: Caps,
    /// Most entries one batch may carry.
    pub max_batch: u32,
    /// The kernel's `struct kfdp_queue_ref` size.
    pub sizeof_queue_ref: u32,
    /// The kernel's `struct kfdp_queue_info` size.
    pub sizeof_queue_info: u32,
}

impl From<uapi::kfdp_info> for Info {
    fn from(i: uapi::kfdp_info) -> Self {
        Info {
            abi_major: i.abi_major,
            abi_minor: i.abi_minor,
            caps: Caps(i.caps),
            max_batch: i.max_batch,
            sizeof_queue_ref: i.sizeof_queue_ref,
            sizeof_queue_info: i.sizeof_queue_info,
        }
    }
}

nix::ioctl_read_bad!(ioc_info, uapi::KFDP_IOC_INFO, uapi::kfdp_info);

impl Device {
    /// Opens [`DEVICE_PATH`].
    pub fn open() -> Result<Self, Error> {
        Self::open_path(DEVICE_PATH)
    }

    /// Opens the device at `path` (another node of the same device).
    pub fn open_path(path: impl AsRef<Path>) -> Result<Self, Error> {
        OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .map(|file| Device { file })
            .map_err(|e| open_error(&e))
    }

    /// Asks the module what it implements, and checks that it speaks this
    /// crate's major ABI version.
    pub fn info(&self) -> Result<Info, Error> {
        let mut raw = uapi::kfdp_info::default();
        // SAFETY: `raw` is a valid, writable `kfdp_info`, the type the
        // ioctl number encodes, and outlives the call.
        unsafe { ioc_info(self.file.as_raw_fd(), &mut raw) }.map_err(|errno| match errno {
            Errno::ENOTTY => Error::NotSupported("KFDP_IOC_INFO"),
            errno => Error::Os {
                operation: "KFDP_IOC_INFO",
                errno,
            },
        })?;
        if raw.abi_major != uapi::KFDP_ABI_MAJOR {
            return Err(Error::AbiMismatch {
                module: raw.abi_major,
                crate_: uapi::KFDP_ABI_MAJOR,
            });
        }
        Ok(raw.into())
    }
}

fn open_error(e: &io::Error) -> Error {
    let errno = Errno::from_raw(e.raw_os_error().unwrap_or(0));
    match errno {
        Errno::ENOENT | Errno::ENODEV | Errno::ENXIO => Error::ModuleNotLoaded,
        Errno::EPERM | Errno::EACCES => Error::PermissionDenied(errno),
        errno => Error::Os {
            operation: "open /dev/kfd_preempt",
            errno,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caps_names_known_and_unknown_bits() {
        assert_eq!(Caps(0).names(), Vec::<String>::new());
        assert_eq!(
            Caps(Caps::PID | Caps::HWS_BATCH).names(),
            ["hws-batch", "pid-attach"]
        );
        assert_eq!(Caps(Caps::SIM | 0x100).names(), ["sim", "0x100"]);
    }

    #[test]
    fn info_from_raw_keeps_every_field() {
        let raw = uapi::kfdp_info {
            abi_major: 1,
            abi_minor: 2,
            caps: 0x5,
            max_batch: 4096,
            sizeof_queue_ref: 16,
            sizeof_queue_info: 96,
            ..Default::default()
        };
        let info = Info::from(raw);
        assert_eq!((info.abi_major, info.abi_minor), (1, 2));
        assert_eq!(info.caps, Caps(0x5));
        assert_eq!(
            (
                info.max_batch,
                info.sizeof_queue_ref,
                info.sizeof_queue_info
            ),
            (4096, 16, 96)
        );
    }

    #[test]
    fn open_errors_tell_what_to_do() {
        let missing = open_error(&io::Error::from_raw_os_error(Errno::ENOENT as i32));
        assert_eq!(missing, Error::ModuleNotLoaded);
        assert!(missing.to_string().contains("load the module"));
        let eperm = open_error(&io::Error::from_raw_os_error(Errno::EPERM as i32));
        assert!(eperm.to_string().contains("CAP_SYS_NICE"));
        let eacces = open_error(&io::Error::from_raw_os_error(Errno::EACCES as i32));
        assert!(eacces.to_string().contains("udev rule"));
    }

    #[test]
    fn opening_a_missing_node_is_module_not_loaded() {
        assert_eq!(
            Device::open_path("/nonexistent/kfd_preempt").unwrap_err(),
            Error::ModuleNotLoaded
        );
    }

    #[test]
    fn info_ioctl_on_a_non_kfdp_file_fails_cleanly() {
        // /dev/null answers ENOTTY to every ioctl, as an old module would.
        let dev = Device {
            file: File::open("/dev/null").unwrap(),
        };
        assert_eq!(dev.info(), Err(Error::NotSupported("KFDP_IOC_INFO")));
    }
}
