// SPDX-License-Identifier: GPL-2.0

//! When an owner's housekeeping runs (lease ends, sweeps of exited
//! targets), built from the kernel crate's own pieces: a high-resolution
//! timer decides when, and a work item runs it in process context.
//!
//! Re-arming moves the timer earlier, or starts it if it is not pending:
//! dropping the old timer handle cancels it. It never postpones a pending
//! timer, so that callers re-arming often (a scheduler renewing leases)
//! cannot keep the periodic sweep from running. The work item itself is
//! only ever queued, never
//! cancelled, so nothing here depends on how `kernel::workqueue` holds the
//! owner while a work is pending. The timer's handle lives in the owner's
//! state, and is only started while the owner is open: once `close` has
//! marked it closed and dropped the handle, nothing can queue the work
//! again, and waiting for the work (`flush`) is the last step.

use kernel::{
    sync::{
        Arc,
        ArcBorrow, //
    },
    time::{
        hrtimer::{
            ArcHrTimerHandle,
            HrTimerCallback,
            HrTimerCallbackContext,
            HrTimerPointer,
            HrTimerRestart, //
        },
        Delta,
    },
    workqueue::{
        self,
        Work,
        WorkItem, //
    },
};

use crate::{
    backend::Backend,
    clock::now_ns,
    engine::owner::{
        Owner,
        State, //
    },
};

/// The started timer of an owner's housekeeping, and when it is due;
/// dropping it cancels the timer, waiting for a callback that is running.
pub(crate) struct HousekeepingTimer<B: Backend> {
    _handle: ArcHrTimerHandle<Owner<B>>,
    /// CLOCK_MONOTONIC, in nanoseconds.
    due: i64,
}

impl<B: Backend> HrTimerCallback for Owner<B> {
    type Pointer<'a> = Arc<Self>;

    fn run(this: ArcBorrow<'_, Self>, _ctx: HrTimerCallbackContext<'_, Self>) -> HrTimerRestart {
        // Interrupt context: the work does the rest, on the freezable
        // workqueue so that no lease ends while the system suspends (MQDs
        // across hibernation: Documentation/design.rst, "Named hazards").
        // Queued already: it runs soon, which is what was asked.
        let _ = workqueue::system_freezable().enqueue(Arc::from(this));
        HrTimerRestart::NoRestart
    }
}

impl<B: Backend> WorkItem for Owner<B> {
    type Pointer = Arc<Owner<B>>;

    fn run(this: Arc<Owner<B>>) {
        this.housekeep();
        // The next time is worked out again under the lock that arms it,
        // so that an ioctl's sooner time in between is not overridden.
        this.rearm();
    }
}

impl<B: Backend> Owner<B> {
    /// Waits until the housekeeping work is idle. Only `close`, after the
    /// timer was dropped with the owner closed, calls it: nothing queues
    /// the work any more.
    pub(crate) fn flush_housekeeping(&self) {
        let work = core::ptr::from_ref(&self.housekeeping);
        // SAFETY: `work` is the owner's initialised work item, alive for
        // the whole call (the caller holds the owner); `flush_work` only
        // waits for it to be idle and takes no reference.
        unsafe { kernel::bindings::flush_work(Work::raw_get(work)) };
    }
}

/// Makes `owner`'s timer fire in `ms` milliseconds at the latest, unless
/// `state` (`owner`'s, locked by the caller) says it is closed: a pending
/// timer due sooner is kept, one due later is moved earlier.
pub(crate) fn schedule<B: Backend>(owner: &Arc<Owner<B>>, state: &State<B::Target>, ms: u32) {
    if state.closed {
        return;
    }
    let delay = Delta::from_millis(i64::from(ms));
    let now = now_ns();
    let due = now.saturating_add(delay.as_nanos());
    let mut timer = owner.housekeeping_timer.lock();
    // A timer whose time has passed has fired (or is about to, and the
    // work it queues does what this call asks for): replace it.
    if timer.as_ref().is_some_and(|t| t.due > now && t.due <= due) {
        return;
    }
    // One timer: cancel it before starting it again, or the old handle's
    // drop would cancel the new start. A running callback only queues the
    // work, so waiting for it here cannot deadlock; the handle's reference
    // is not the last one (the caller holds `owner`).
    drop(timer.take());
    *timer = Some(HousekeepingTimer {
        _handle: owner.clone().start(delay),
        due,
    });
}
