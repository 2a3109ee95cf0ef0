// SPDX-License-Identifier: GPL-2.0

//! The engine: what an open file (an owner) holds and does, whatever the
//! backend. It knows the [`crate::backend::Backend`] trait, not amdkfd.
//!
//! * [`owner`]: an open file's attachments, marks, leases and freezes
//!   (its child `housekeeping`: when leases end and exited targets are
//!   swept);
//! * [`batch`]: the phases of a PREEMPT or RESUME batch;
//! * [`freeze`]: the steps of a FREEZE or THAW;
//! * [`registry`]: what all owners hold, and the module's statistics;
//! * [`pm`]: what hibernation must wait for (the marks and freezes held,
//!   the PREEMPT and FREEZE calls in flight);
//! * [`watches`]: an owner's watches of its targets' queues, made and made
//!   again where the queues' indices are;
//! * `kunit`: the engine's KUnit suite, over the mock backend
//!   (`crate::backend::mock`).

pub(crate) mod batch;
pub(crate) mod freeze;
#[cfg(kfdp_kunit)]
mod kunit;
pub(crate) mod owner;
pub(crate) mod pm;
pub(crate) mod registry;
pub(crate) mod watches;
