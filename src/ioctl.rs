// SPDX-License-Identifier: GPL-2.0

//! The ioctl interface of `/dev/kfd_preempt`: copying each call's argument
//! in once, checking what concerns the whole call, and handing a decoded
//! request to the engine (`Documentation/uapi.rst`).
//!
//! * [`device`]: the misc device (open rights, dispatch);
//! * [`info`]: the INFO ioctl;
//! * [`batch`]: PREEMPT and RESUME decoding;
//! * [`query`]: the QUERY ioctl;
//! * [`activity`]: WATCH, UNWATCH, SAMPLE and ARM;
//! * [`user_array`]: the arrays of fixed-size elements they all copy in
//!   and out.

pub(crate) mod activity;
pub(crate) mod batch;
pub(crate) mod device;
pub(crate) mod info;
pub(crate) mod query;
pub(crate) mod user_array;
