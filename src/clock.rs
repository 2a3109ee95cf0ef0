// SPDX-License-Identifier: GPL-2.0

//! The module's one clock: CLOCK_MONOTONIC in nanoseconds, the clock user
//! space reads too (SAMPLE's timestamps, lease ends, the simulated node's
//! dispatch times).

use kernel::time::{
    ClockSource,
    Monotonic, //
};

/// CLOCK_MONOTONIC, now, in nanoseconds.
pub(crate) fn now_ns() -> i64 {
    <Monotonic as ClockSource>::ktime_get()
}
