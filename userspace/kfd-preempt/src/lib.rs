//! Safe Rust interface to the kfd_preempt kernel module.
//!
//! kfd_preempt lets a scheduler with `CAP_SYS_NICE` take selected amdkfd
//! user-mode queues of other processes off the GPU and put them back,
//! keeping their MQDs and CWSR state. This crate wraps its misc device,
//! `/dev/kfd_preempt`, whose ABI is `uapi/linux/kfd_preempt.h`.
//!
//! ```no_run
//! let dev = kfd_preempt::Device::open()?;
//! let info = dev.info()?;
//! println!("kfd_preempt ABI {}.{}", info.abi_major, info.abi_minor);
//! # Ok::<(), kfd_preempt::Error>(())
//! ```

#![deny(missing_docs)]

mod device;
mod error;
pub mod uapi;

pub use device::{Caps, Device, Info, DEVICE_PATH};
pub use error::Error;
