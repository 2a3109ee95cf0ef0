//! Activity detection (ABI 1.2, [`Caps::ACTIVITY`](crate::Caps::ACTIVITY)):
//! whether watched queues have work pending, read by the module from the
//! queues' own read and write indices without touching the tenant.
//!
//! [`Device::watch`] names the queues, [`Device::sample`] reads them all at
//! once, and [`Device::arm`] has the module sample them itself and signal an
//! eventfd when a condition holds.

use std::{
    os::fd::{AsRawFd, BorrowedFd},
    time::Duration,
};

use rustix::io::Errno;

use crate::{
    batch::{raw_entries, BatchReport, QueueRef},
    ioctl, uapi, Device, Error, Handle,
};

/// One watched queue as [`Device::sample`] read it.
///
/// ```no_run
/// # let dev = kfd_preempt::Device::open()?;
/// for a in dev.sample()?.queues {
///     let queued = a.write_index - a.read_index;
///     println!("{}: {queued} packet(s) queued{}", a.queue, if a.gone { " (exited)" } else { "" });
/// }
/// # Ok::<(), kfd_preempt::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Activity {
    /// The queue: attachment handle, gpu_id, queue id.
    pub queue: QueueRef,
    /// `KFDP_ACT_PENDING`: its write index differs from its read index.
    pub pending: bool,
    /// `KFDP_ACT_GONE`: its process exited; the indices are stale.
    pub gone: bool,
    /// Packets retired (written by the CP, or the simulated node).
    pub read_index: u64,
    /// Packets published (written by the tenant).
    pub write_index: u64,
}

impl Activity {
    fn from_raw(a: &uapi::kfdp_activity) -> Self {
        Activity {
            queue: QueueRef {
                handle: Handle(a.handle),
                gpu_id: a.gpu_id,
                queue_id: a.queue_id,
            },
            pending: a.flags & uapi::KFDP_ACT_PENDING != 0,
            gone: a.flags & uapi::KFDP_ACT_GONE != 0,
            read_index: a.read_index,
            write_index: a.write_index,
        }
    }
}

/// Every watched queue of this owner, read at one moment
/// (`KFDP_IOC_SAMPLE`).
///
/// ```no_run
/// # let dev = kfd_preempt::Device::open()?;
/// let s = dev.sample()?;
/// println!("at {:?}: {} of {} watched queue(s) busy", s.timestamp, s.num_pending, s.queues.len());
/// # Ok::<(), kfd_preempt::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sample {
    /// `CLOCK_MONOTONIC` time of the reads.
    pub timestamp: Duration,
    /// Watched queues with work pending (counted over every watched queue,
    /// even if more were watched than `queues` holds).
    pub num_pending: u32,
    /// The watched queues, in the order they were watched.
    pub queues: Vec<Activity>,
}

/// When an armed module signals the eventfd ([`Device::arm`]).
///
/// ```
/// use std::time::Duration;
/// use kfd_preempt::ArmCondition;
///
/// // Wake me when the watched queues have been idle for 2 ms.
/// let cond = ArmCondition::AllIdle { idle: Duration::from_millis(2) };
/// assert_ne!(cond, ArmCondition::AnyBusy);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArmCondition {
    /// `KFDP_ARM_ANY_BUSY`: some watched queue has work pending, or its
    /// write index moved since the ARM (a burst that retired within one
    /// period).
    AnyBusy,
    /// `KFDP_ARM_ALL_IDLE`: no watched queue had work pending or a moving
    /// write index for `idle` (whole microseconds, at most 10 s).
    AllIdle {
        /// How long every watched queue must have been idle.
        idle: Duration,
    },
}

/// The most entries [`Device::sample`] asks for.
const MAX_SAMPLE: u32 = 1 << 16;

/// `d` in whole microseconds, if that fits a `u32`.
fn whole_micros(d: Duration) -> Option<u32> {
    u32::try_from(d.as_micros()).ok()
}

/// The `kfdp_arm` of an ARM: durations in whole microseconds (truncated).
fn arm_request(
    cond: ArmCondition,
    period: Duration,
    eventfd: i32,
) -> Result<uapi::kfdp_arm, Error> {
    let period_us = match whole_micros(period) {
        Some(0) => {
            return Err(Error::InvalidArgument(
                "an ARM period must be at least 1 microsecond",
            ))
        }
        Some(us) => us,
        None => {
            return Err(Error::InvalidArgument(
                "an ARM period must fit in u32 microseconds",
            ))
        }
    };
    let (condition, idle_us) = match cond {
        ArmCondition::AnyBusy => (uapi::KFDP_ARM_ANY_BUSY, 0),
        ArmCondition::AllIdle { idle } => (
            uapi::KFDP_ARM_ALL_IDLE,
            whole_micros(idle).ok_or(Error::InvalidArgument(
                "an ARM idle time must fit in u32 microseconds",
            ))?,
        ),
    };
    Ok(uapi::kfdp_arm {
        condition,
        eventfd,
        period_us,
        idle_us,
        ..Default::default()
    })
}

impl Device {
    /// Starts watching `queues` (ABI 1.2): the module pins the pages
    /// holding each queue's two indices until [`unwatch`](Self::unwatch),
    /// detach or close. Each entry gets an [`Outcome`](crate::Outcome):
    /// `Already` if it was watched already; failures are
    /// [`EntryError`](crate::EntryError)s, among them `Other(ENOSPC)` when
    /// the owner already watches [`Info::max_watches`](crate::Info::max_watches)
    /// queues, `Other(EFAULT)` for indices in memory that cannot be pinned,
    /// and `Unsupported` for a queue without AQL indices. The report's
    /// `runlist_updates` and `elapsed` are zero.
    ///
    /// ```no_run
    /// use kfd_preempt::Device;
    ///
    /// let dev = Device::open()?;
    /// let tenant = dev.attach(4242)?;
    /// let queues: Vec<_> = tenant.query()?.iter().map(|q| q.queue_ref()).collect();
    /// let report = dev.watch(&queues)?;
    /// for (q, outcome) in report.failures() {
    ///     eprintln!("cannot watch {q}: {outcome}");
    /// }
    /// # Ok::<(), kfd_preempt::Error>(())
    /// ```
    pub fn watch(&self, queues: &[QueueRef]) -> Result<BatchReport, Error> {
        self.watch_call::<{ uapi::IOC_WATCH }>("KFDP_IOC_WATCH", queues)
    }

    /// Stops watching `queues`: `Already` for a queue that was not watched.
    ///
    /// ```no_run
    /// # let dev = kfd_preempt::Device::open()?;
    /// # let queues = vec![];
    /// dev.unwatch(&queues)?;
    /// # Ok::<(), kfd_preempt::Error>(())
    /// ```
    pub fn unwatch(&self, queues: &[QueueRef]) -> Result<BatchReport, Error> {
        self.watch_call::<{ uapi::IOC_UNWATCH }>("KFDP_IOC_UNWATCH", queues)
    }

    fn watch_call<const OP: rustix::ioctl::Opcode>(
        &self,
        operation: &'static str,
        queues: &[QueueRef],
    ) -> Result<BatchReport, Error> {
        let mut entries = raw_entries(queues)?;
        let mut w = uapi::kfdp_watch {
            entries_ptr: entries.as_mut_ptr() as u64,
            // Bounded by KFDP_MAX_BATCH in raw_entries.
            num_entries: entries.len() as u32,
            entry_size: std::mem::size_of::<uapi::kfdp_queue_ref>() as u32,
            ..Default::default()
        };
        // SAFETY: OP is IOC_WATCH or IOC_UNWATCH (the only callers), which
        // read and write a `kfdp_watch`; `entries_ptr` points to
        // `num_entries` writable `kfdp_queue_ref` in `entries`, alive across
        // the call.
        unsafe { ioctl::update::<OP, _>(self, &mut w) }.map_err(|errno| match errno {
            Errno::TOOBIG => Error::BatchTooLarge {
                len: queues.len(),
                max: uapi::KFDP_MAX_BATCH,
            },
            Errno::INVAL => Error::InvalidArgument("the module rejected the watch call's header"),
            Errno::NOTTY => Error::NotSupported(operation),
            errno => Error::Os { operation, errno },
        })?;
        Ok(BatchReport::from_entries(
            &entries,
            w.num_ok,
            0,
            Duration::ZERO,
        ))
    }

    /// Reads every queue this owner watches, at one moment. The buffer
    /// grows (and the call is retried) if more queues are watched than it
    /// holds.
    ///
    /// ```no_run
    /// # let dev = kfd_preempt::Device::open()?;
    /// let s = dev.sample()?;
    /// let busy: Vec<_> = s.queues.iter().filter(|a| a.pending).map(|a| a.queue).collect();
    /// # Ok::<(), kfd_preempt::Error>(())
    /// ```
    pub fn sample(&self) -> Result<Sample, Error> {
        let mut capacity = 64u32;
        // Queues can be watched between two calls (from another thread):
        // grow and retry a few times, then return what fits.
        for _ in 0..4 {
            let mut buf = vec![uapi::kfdp_activity::default(); capacity as usize];
            let mut s = uapi::kfdp_sample {
                entries_ptr: buf.as_mut_ptr() as u64,
                entry_size: std::mem::size_of::<uapi::kfdp_activity>() as u32,
                capacity,
                ..Default::default()
            };
            // SAFETY: IOC_SAMPLE reads and writes a `kfdp_sample`; its
            // `entries_ptr` points to `capacity` writable `kfdp_activity` in
            // `buf`, which lives across the call.
            unsafe { ioctl::update::<{ uapi::IOC_SAMPLE }, _>(self, &mut s) }.map_err(|errno| {
                match errno {
                    Errno::NOTTY => Error::NotSupported("KFDP_IOC_SAMPLE"),
                    errno => Error::Os {
                        operation: "KFDP_IOC_SAMPLE",
                        errno,
                    },
                }
            })?;
            if s.num_watches <= capacity || capacity >= MAX_SAMPLE {
                buf.truncate(s.num_watches.min(capacity) as usize);
                return Ok(Sample {
                    timestamp: Duration::from_nanos(s.timestamp_ns),
                    num_pending: s.num_pending,
                    queues: buf.iter().map(Activity::from_raw).collect(),
                });
            }
            capacity = s.num_watches.min(MAX_SAMPLE);
        }
        Err(Error::Os {
            operation: "KFDP_IOC_SAMPLE (watches kept being added)",
            errno: Errno::AGAIN,
        })
    }

    /// Has the module sample this owner's watched queues every `period` and
    /// signal `eventfd` once, then disarm, when `cond` holds. A new ARM
    /// replaces the previous one. `period` and the idle time go to the
    /// module in whole microseconds; a period under 1 µs or beyond `u32`
    /// microseconds is refused here, anything else the module checks
    /// (`period` within [`Info::min_watch_period`](crate::Info::min_watch_period)
    /// and 1 s, idle at most 10 s).
    ///
    /// ```no_run
    /// use std::{os::fd::AsFd, time::Duration};
    /// use kfd_preempt::{ArmCondition, Device};
    /// use rustix::event::{eventfd, EventfdFlags};
    ///
    /// let dev = Device::open()?;
    /// let efd = eventfd(0, EventfdFlags::CLOEXEC).unwrap();
    /// dev.arm(ArmCondition::AnyBusy, Duration::from_micros(500), efd.as_fd())?;
    /// // ... poll(2) or read(2) efd: some watched queue has work ...
    /// # Ok::<(), kfd_preempt::Error>(())
    /// ```
    pub fn arm(
        &self,
        cond: ArmCondition,
        period: Duration,
        eventfd: BorrowedFd<'_>,
    ) -> Result<(), Error> {
        let a = arm_request(cond, period, eventfd.as_raw_fd())?;
        self.arm_raw(a)
    }

    /// Cancels an [`arm`](Self::arm) (`KFDP_ARM_OFF`); nothing armed is
    /// not an error.
    ///
    /// ```no_run
    /// # let dev = kfd_preempt::Device::open()?;
    /// dev.disarm()?;
    /// # Ok::<(), kfd_preempt::Error>(())
    /// ```
    pub fn disarm(&self) -> Result<(), Error> {
        self.arm_raw(uapi::kfdp_arm {
            condition: uapi::KFDP_ARM_OFF,
            eventfd: -1,
            ..Default::default()
        })
    }

    fn arm_raw(&self, a: uapi::kfdp_arm) -> Result<(), Error> {
        // SAFETY: IOC_ARM reads a `kfdp_arm`, which has no user pointers.
        unsafe { ioctl::set::<{ uapi::IOC_ARM }, _>(self, a) }.map_err(|errno| match errno {
            Errno::INVAL => Error::InvalidArgument(
                "the module rejected the ARM: period outside [min_watch_period, 1 s] or idle above 10 s",
            ),
            Errno::BADF => Error::InvalidArgument("the descriptor given to ARM is not an eventfd"),
            Errno::NOTTY => Error::NotSupported("KFDP_IOC_ARM"),
            errno => Error::Os {
                operation: "KFDP_IOC_ARM",
                errno,
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::{fs::File, os::fd::AsFd};

    #[test]
    fn arm_durations_go_in_whole_microseconds() {
        let a = arm_request(
            ArmCondition::AllIdle {
                idle: Duration::from_micros(2500),
            },
            Duration::from_nanos(1_999),
            7,
        )
        .unwrap();
        assert_eq!(
            (a.condition, a.eventfd, a.period_us, a.idle_us),
            (uapi::KFDP_ARM_ALL_IDLE, 7, 1, 2500)
        );
        assert_eq!(a.reserved, [0, 0]);
        let busy = arm_request(ArmCondition::AnyBusy, Duration::from_millis(1), 3).unwrap();
        assert_eq!(
            (busy.condition, busy.period_us, busy.idle_us),
            (uapi::KFDP_ARM_ANY_BUSY, 1000, 0)
        );
    }

    #[test]
    fn arm_rejects_periods_that_do_not_convert() {
        for period in [
            Duration::ZERO,
            Duration::from_nanos(999),
            Duration::from_micros(u64::from(u32::MAX) + 1),
            Duration::MAX,
        ] {
            assert!(matches!(
                arm_request(ArmCondition::AnyBusy, period, 0),
                Err(Error::InvalidArgument(_))
            ));
        }
        assert!(arm_request(
            ArmCondition::AnyBusy,
            Duration::from_micros(u32::MAX.into()),
            0
        )
        .is_ok());
        let huge_idle = ArmCondition::AllIdle {
            idle: Duration::from_secs(1 << 40),
        };
        assert!(matches!(
            arm_request(huge_idle, Duration::from_millis(1), 0),
            Err(Error::InvalidArgument(_))
        ));
    }

    #[test]
    fn activity_flags_decode() {
        let raw = uapi::kfdp_activity {
            handle: 2,
            gpu_id: 0x5100,
            queue_id: 4,
            flags: uapi::KFDP_ACT_PENDING | uapi::KFDP_ACT_GONE,
            read_index: 10,
            write_index: 12,
            ..Default::default()
        };
        let a = Activity::from_raw(&raw);
        assert_eq!(
            a.queue,
            QueueRef {
                handle: Handle(2),
                gpu_id: 0x5100,
                queue_id: 4
            }
        );
        assert!(a.pending && a.gone);
        assert_eq!((a.read_index, a.write_index), (10, 12));
        let idle = Activity::from_raw(&uapi::kfdp_activity::default());
        assert!(!idle.pending && !idle.gone);
    }

    fn dev_null() -> Device {
        // /dev/null answers ENOTTY to every ioctl, as an old module would.
        Device::open_path("/dev/null").unwrap()
    }

    #[test]
    fn calls_on_an_old_module_say_not_supported() {
        let dev = dev_null();
        let q = QueueRef {
            handle: Handle(1),
            gpu_id: 1,
            queue_id: 0,
        };
        assert_eq!(dev.watch(&[q]), Err(Error::NotSupported("KFDP_IOC_WATCH")));
        assert_eq!(
            dev.unwatch(&[q]),
            Err(Error::NotSupported("KFDP_IOC_UNWATCH"))
        );
        assert_eq!(dev.sample(), Err(Error::NotSupported("KFDP_IOC_SAMPLE")));
        assert_eq!(dev.disarm(), Err(Error::NotSupported("KFDP_IOC_ARM")));
        let f = File::open("/dev/null").unwrap();
        assert_eq!(
            dev.arm(ArmCondition::AnyBusy, Duration::from_millis(1), f.as_fd()),
            Err(Error::NotSupported("KFDP_IOC_ARM"))
        );
        // Refused before the ioctl: not ENOTTY.
        assert!(matches!(
            dev.arm(ArmCondition::AnyBusy, Duration::ZERO, f.as_fd()),
            Err(Error::InvalidArgument(_))
        ));
        let many = vec![q; uapi::KFDP_MAX_BATCH as usize + 1];
        assert!(matches!(dev.watch(&many), Err(Error::BatchTooLarge { .. })));
    }
}
