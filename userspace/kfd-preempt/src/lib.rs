//! Safe Rust interface to the kfd_preempt kernel module.
//!
//! kfd_preempt lets a scheduler with `CAP_SYS_NICE` take selected amdkfd
//! user-mode queues of other processes off the GPU and put them back,
//! keeping their MQDs and CWSR state, with one runlist update per GPU node
//! however many queues a batch holds. This crate wraps its misc device,
//! `/dev/kfd_preempt`, whose ABI is `uapi/linux/kfd_preempt.h`.
//!
//! The pieces:
//! * [`Device`]: one open of the device, an *owner*. Closing it (dropping)
//!   undoes everything it did.
//! * [`Target`]: an attached process; dropping it detaches.
//! * [`Device::preempt`] / [`Device::resume`]: batches of [`QueueRef`],
//!   answered with one [`Outcome`] per entry in a [`BatchReport`].
//! * [`Target::freeze`] / [`Target::thaw`]: process-level preemption.
//! * [`Device::watch`] / [`Device::sample`] / [`Device::arm`]: activity
//!   detection of watched queues (ABI 1.2), as [`Sample`]s of [`Activity`].
//! * [`kfd_processes`]: the processes that have a KFD device open.
//! * [`sim`]: tenants, ring queues and knobs of the module's simulated nodes.
//! * [`hint`]: a latency-critical service telling kfd-preemptd that work is
//!   coming ([`hint::HintClient`]), which the daemon answers by taking the
//!   lower levels off the node before the work's first dispatch.
//!
//! ```no_run
//! use std::time::Duration;
//! use kfd_preempt::{BatchOptions, Device};
//!
//! let dev = Device::open()?;
//! let training = dev.attach(4242)?;
//! let queues: Vec<_> = training.query()?.iter().map(|q| q.queue_ref()).collect();
//! // Off the GPU for at most 50 ms, even if this scheduler stalls.
//! let opts = BatchOptions { lease: Some(Duration::from_millis(50)), ..Default::default() };
//! let report = dev.preempt(&queues, &opts)?;
//! println!("{}/{} queues off, {} runlist update(s)", report.num_ok, queues.len(), report.runlist_updates);
//! // ... serve the latency-critical request ...
//! dev.resume(&queues)?;
//! # Ok::<(), kfd_preempt::Error>(())
//! ```

#![deny(missing_docs)]

mod activity;
mod batch;
mod bits;
mod device;
mod error;
pub mod hint;
mod ioctl;
mod locate;
mod queue;
#[cfg(feature = "signals")]
pub mod signals;
pub mod sim;
mod target;
pub mod uapi;

pub use activity::{Activity, ArmCondition, Sample};
pub use batch::{BatchOptions, BatchReport, EntryError, Outcome, QueueRef, MAX_LEASE};
pub use device::{Caps, Device, Handle, Info, TargetKind, DEVICE_PATH};
pub use error::Error;
pub use locate::kfd_processes;
pub use queue::{QueueInfo, QueueState, QueueType};
pub use target::Target;
