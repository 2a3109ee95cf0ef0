// SPDX-License-Identifier: GPL-2.0

//! Hibernation (MQDs across hibernation: `Documentation/design.rst`,
//! "Named hazards").
//!
//! MI300 keeps MQDs in VRAM, and at hibernation amdkfd moves only the MQDs
//! of *active* queues out of VRAM (`dqm_evict_mqd_bo`): a queue this module
//! holds preempted, or a process it holds frozen, would come back from S4
//! with a garbage MQD. So hibernation is refused while any owner holds a
//! mark or a freeze, and once it has begun no PREEMPT or FREEZE starts
//! (they fail with `EAGAIN`) until the system is back. The C glue's PM
//! notifier (`glue/kfdp_pm.c`) calls [`kfdp_pm_hibernation_prepare`] and
//! [`kfdp_pm_hibernation_done`].

use kernel::{
    prelude::*,
    sync::atomic::{
        Acquire,
        Atomic,
        Full,
        Release, //
    },
    time::{
        delay::fsleep,
        Delta, //
    },
};

use crate::engine::registry::REGISTRY;

/// Set from `PM_HIBERNATION_PREPARE` until the system is back.
static HIBERNATING: Atomic<bool> = Atomic::new(false);
/// PREEMPT and FREEZE calls between [`CallInFlight::begin`] and its drop.
static IN_FLIGHT: Atomic<u32> = Atomic::new(0);

/// How long hibernation waits for calls in flight (a lost fence on real
/// hardware costs up to `queue_preemption_timeout_ms`, 9 s by default).
const DRAIN_MS: u32 = 10_000;

/// A PREEMPT or FREEZE in progress; hibernation waits for it to end.
pub(crate) struct CallInFlight(());

impl CallInFlight {
    /// Starts one, or `EAGAIN` if hibernation has begun.
    pub(crate) fn begin() -> Result<Self> {
        // A fully ordered RMW on both sides, each followed by a load: either
        // `prepare` sees this call in flight, or this call sees `HIBERNATING`.
        IN_FLIGHT.fetch_add(1, Full);
        if HIBERNATING.load(Acquire) {
            IN_FLIGHT.fetch_sub(1, Full);
            return Err(EAGAIN);
        }
        Ok(CallInFlight(()))
    }
}

impl Drop for CallInFlight {
    fn drop(&mut self) {
        IN_FLIGHT.fetch_sub(1, Full);
    }
}

/// `PM_HIBERNATION_PREPARE`: stop new PREEMPTs and FREEZEs, let those in
/// flight finish, then allow hibernation only if nothing is held.
pub(crate) fn prepare() -> Result {
    HIBERNATING.xchg(true, Full);
    let mut waited = 0;
    while IN_FLIGHT.load(Acquire) != 0 && waited < DRAIN_MS {
        fsleep(Delta::from_millis(1));
        waited += 1;
    }
    let held = if IN_FLIGHT.load(Acquire) != 0 {
        None
    } else {
        Some(REGISTRY.lock().held())
    };
    match held {
        Some(0) => Ok(()),
        held => {
            HIBERNATING.store(false, Release);
            match held {
                Some(n) => pr_warn!(
                    "hibernation refused: {n} preempted queue(s) or frozen node(s) held; resume and thaw them first (their MQDs would not survive S4)\n"
                ),
                None => pr_warn!("hibernation refused: a PREEMPT or FREEZE is still running\n"),
            }
            Err(EBUSY)
        }
    }
}

/// The system is back (or hibernation was aborted).
pub(crate) fn done() {
    HIBERNATING.store(false, Release);
}

/// Called by the glue's PM notifier at `PM_HIBERNATION_PREPARE`: 0, or a
/// negative errno that aborts hibernation.
#[no_mangle]
extern "C" fn kfdp_pm_hibernation_prepare() -> c_int {
    match prepare() {
        Ok(()) => 0,
        Err(e) => e.to_errno(),
    }
}

/// Called by the glue's PM notifier after hibernation or its failure.
#[no_mangle]
extern "C" fn kfdp_pm_hibernation_done() {
    done();
}

#[cfg(kfdp_kunit)]
#[kunit_tests(kfdp_pm)]
mod tests {
    use super::*;
    use crate::engine::registry::QueueKey;
    use kernel::types::ScopeGuard;

    #[test]
    fn hibernation_refused_while_a_mark_is_held() -> Result {
        let q = QueueKey {
            target: 0xfeed,
            gpu_id: 7,
            queue_id: 3,
        };
        REGISTRY.lock().claim(q, 42)?;
        assert_eq!(prepare(), Err(EBUSY));
        // Refused: PREEMPT and FREEZE still work.
        assert!(CallInFlight::begin().is_ok());
        REGISTRY.lock().unclaim(&q, 42);
        Ok(())
    }

    #[test]
    fn hibernation_refused_while_a_freeze_is_held() -> Result {
        REGISTRY.lock().freeze(0xbeef, 7, 42)?;
        assert_eq!(prepare(), Err(EBUSY));
        REGISTRY.lock().thaw(0xbeef, 7, 42);
        Ok(())
    }

    #[test]
    fn nothing_starts_while_hibernating() {
        assert_eq!(REGISTRY.lock().held(), 0);
        assert_eq!(prepare(), Ok(()));
        {
            // Even if an assertion fails, later suites must not find the
            // module hibernating.
            let _back = ScopeGuard::new(done);
            assert!(matches!(CallInFlight::begin(), Err(e) if e == EAGAIN));
        }
        assert!(CallInFlight::begin().is_ok());
    }
}
