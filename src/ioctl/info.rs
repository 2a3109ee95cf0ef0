// SPDX-License-Identifier: GPL-2.0

//! `KFDP_IOC_INFO`: what this module implements, so that callers can check
//! the ABI version and capabilities before relying on them.

use kernel::prelude::*;

use crate::uapi::{
    kfdp_info,
    kfdp_queue_info,
    kfdp_queue_ref,
    KFDP_ABI_MAJOR,
    KFDP_ABI_MINOR,
    KFDP_CAP_PID,
    KFDP_CAP_RATE_LIMIT,
    KFDP_MAX_BATCH, //
};

/// The module configuration that `KFDP_IOC_INFO` reports.
#[derive(Clone, Copy)]
pub(crate) struct Config {
    /// `pid_attach` module parameter: `KFDP_TARGET_PID` is allowed.
    pub(crate) pid_attach: bool,
    /// What the backends provide (`crate::backend::Backend::caps`).
    pub(crate) backend_caps: u64,
    /// The glue's `min_preempt_interval_us` module parameter (0: no limit).
    pub(crate) min_preempt_interval_us: u32,
}

/// Capability bits for `kfdp_info::caps`.
///
/// Only what is implemented is reported: the mechanisms come from the
/// backends, PID attach and the rate limit from the module parameters.
fn caps(config: Config) -> u64 {
    let mut caps = config.backend_caps;
    if config.pid_attach {
        caps |= u64::from(KFDP_CAP_PID);
    }
    if config.min_preempt_interval_us != 0 {
        caps |= u64::from(KFDP_CAP_RATE_LIMIT);
    }
    caps
}

/// The `KFDP_IOC_INFO` answer for `config`; every reserved field is zero.
pub(crate) fn info(config: Config) -> kfdp_info {
    kfdp_info {
        abi_major: KFDP_ABI_MAJOR,
        abi_minor: KFDP_ABI_MINOR,
        caps: caps(config),
        max_batch: KFDP_MAX_BATCH,
        // The element sizes are small compile-time constants (16 and 96,
        // asserted in `uapi`), so the conversions cannot truncate.
        sizeof_queue_ref: size_of::<kfdp_queue_ref>() as u32,
        sizeof_queue_info: size_of::<kfdp_queue_info>() as u32,
        min_preempt_interval_us: config.min_preempt_interval_us,
        max_watches: crate::activity::MAX_WATCHES,
        min_watch_period_us: crate::activity::MIN_PERIOD_US,
        ..Default::default()
    }
}

#[cfg(kfdp_kunit)]
#[kunit_tests(kfdp_info)]
mod tests {
    use super::*;
    use crate::uapi::{
        KFDP_CAP_FREEZE,
        KFDP_CAP_HWS_BATCH,
        KFDP_CAP_MES,
        KFDP_CAP_SIM, //
    };

    #[test]
    fn reports_version_and_sizes() {
        let i = info(Config {
            pid_attach: false,
            backend_caps: 0,
            min_preempt_interval_us: 0,
        });
        assert_eq!(i.abi_major, 1);
        assert_eq!(i.abi_minor, 2);
        assert_eq!(i.max_batch, 4096);
        assert_eq!(i.sizeof_queue_ref, 16);
        assert_eq!(i.sizeof_queue_info, 96);
    }

    #[test]
    fn reserved_fields_are_zero() {
        let i = info(Config {
            pid_attach: true,
            backend_caps: 0,
            min_preempt_interval_us: 0,
        });
        assert_eq!(i.reserved, [0u64; 3]);
    }

    #[test]
    fn pid_cap_follows_parameter() {
        assert_eq!(
            info(Config {
                pid_attach: false,
                backend_caps: 0,
                min_preempt_interval_us: 0,
            })
            .caps,
            0
        );
        assert_eq!(
            info(Config {
                pid_attach: true,
                backend_caps: 0,
                min_preempt_interval_us: 0,
            })
            .caps,
            u64::from(KFDP_CAP_PID)
        );
    }

    #[test]
    fn caps_are_exactly_the_backends_and_pid() {
        let amdkfd = u64::from(KFDP_CAP_HWS_BATCH | KFDP_CAP_MES | KFDP_CAP_FREEZE);
        let c = Config {
            pid_attach: false,
            backend_caps: amdkfd,
            min_preempt_interval_us: 0,
        };
        assert_eq!(info(c).caps, amdkfd);
        assert_eq!(info(c).caps & u64::from(KFDP_CAP_SIM), 0);
        let c = Config {
            pid_attach: true,
            backend_caps: amdkfd,
            min_preempt_interval_us: 0,
        };
        assert_eq!(info(c).caps, amdkfd | u64::from(KFDP_CAP_PID));
    }

    #[test]
    fn rate_limit_is_reported_with_its_interval() {
        let c = Config {
            pid_attach: false,
            backend_caps: 0,
            min_preempt_interval_us: 1000,
        };
        assert_eq!(info(c).caps, u64::from(KFDP_CAP_RATE_LIMIT));
        assert_eq!(info(c).min_preempt_interval_us, 1000);
    }
}
