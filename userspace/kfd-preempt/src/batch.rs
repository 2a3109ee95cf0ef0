//! PREEMPT and RESUME batches: what goes in, what comes out per queue.

use std::{fmt, time::Duration};

use rustix::io::Errno;

use crate::{error::describe, uapi, Error, Handle};

/// One queue, named as a batch names it: attachment, node, queue id.
///
/// ```
/// use kfd_preempt::{Handle, QueueRef};
///
/// let r = QueueRef { handle: Handle(1), gpu_id: 0x5100, queue_id: 0 };
/// assert_eq!(r.to_string(), "1:0x5100:0");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct QueueRef {
    /// The attachment the queue belongs to.
    pub handle: Handle,
    /// Topology `gpu_id` of its node.
    pub gpu_id: u32,
    /// Queue id within the process.
    pub queue_id: u32,
}

impl fmt::Display for QueueRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{:#x}:{}", self.handle.0, self.gpu_id, self.queue_id)
    }
}

/// How a batch is carried out.
///
/// ```
/// use std::time::Duration;
/// use kfd_preempt::BatchOptions;
///
/// // Preempt for at most 200 ms, and only if every queue can be preempted.
/// let opts = BatchOptions { lease: Some(Duration::from_millis(200)), all_or_nothing: true, ..Default::default() };
/// # let _ = opts;
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct BatchOptions {
    /// PREEMPT only: the module resumes the queues itself after this long
    /// (whole milliseconds, 1 ms to one day). `None`: until RESUME, detach
    /// or close.
    pub lease: Option<Duration>,
    /// Check every entry and change nothing.
    pub validate_only: bool,
    /// Change nothing if any entry would fail.
    pub all_or_nothing: bool,
}

/// The longest lease the module takes: one day.
///
/// ```
/// assert_eq!(kfd_preempt::MAX_LEASE.as_secs(), 86_400);
/// ```
pub const MAX_LEASE: Duration = Duration::from_secs(24 * 60 * 60);

impl BatchOptions {
    pub(crate) fn flags(&self) -> u32 {
        let mut flags = 0;
        if self.validate_only {
            flags |= uapi::KFDP_BATCH_VALIDATE_ONLY;
        }
        if self.all_or_nothing {
            flags |= uapi::KFDP_BATCH_ALL_OR_NOTHING;
        }
        flags
    }

    pub(crate) fn lease_ms(&self) -> Result<u32, Error> {
        match self.lease {
            None => Ok(0),
            Some(d) if d.is_zero() || d.as_millis() == 0 => Err(Error::InvalidArgument(
                "a lease must be at least 1 ms (no lease: None)",
            )),
            Some(d) if d > MAX_LEASE => Err(Error::InvalidArgument("a lease is at most one day")),
            // At most 86,400,000 ms: fits.
            Some(d) => Ok(d.as_millis() as u32),
        }
    }
}

/// Why one entry of a batch failed (its negative status).
///
/// ```
/// use kfd_preempt::EntryError;
///
/// assert_eq!(EntryError::from_status(-16), EntryError::Busy);
/// assert!(EntryError::Busy.to_string().contains("another owner"));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryError {
    /// `EINVAL`: bad handle, gpu_id or queue id.
    Invalid,
    /// `ENOENT`: no such queue (destroyed); ownership is dropped.
    QueueGone,
    /// `ESRCH`: the target exited.
    TargetExited,
    /// `EBUSY`: being destroyed, debugged, or owned by another owner.
    Busy,
    /// `EOPNOTSUPP`: not a compute queue, no CWSR, or no HWS.
    Unsupported,
    /// `EIO`: node reset or scheduler hang.
    Hardware,
    /// `ECANCELED`: ALL_OR_NOTHING and another entry failed.
    Cancelled,
    /// `ENOMEM`.
    NoMemory,
    /// `EAGAIN`: the node was preempted or frozen less than
    /// [`crate::Info::min_preempt_interval_us`] ago; nothing changed, retry
    /// later (ABI 1.1, [`crate::Caps::RATE_LIMIT`]).
    TooSoon,
    /// Another error number.
    Other(i32),
}

/// The errno of each [`EntryError`] but `Other`: one table for decoding
/// statuses and for writing them back (the C ABI).
const ENTRY_ERRNOS: [(Errno, EntryError); 9] = [
    (Errno::INVAL, EntryError::Invalid),
    (Errno::NOENT, EntryError::QueueGone),
    (Errno::SRCH, EntryError::TargetExited),
    (Errno::BUSY, EntryError::Busy),
    (Errno::OPNOTSUPP, EntryError::Unsupported),
    (Errno::IO, EntryError::Hardware),
    (Errno::CANCELED, EntryError::Cancelled),
    (Errno::NOMEM, EntryError::NoMemory),
    (Errno::AGAIN, EntryError::TooSoon),
];

impl EntryError {
    /// Decodes a negative status (`-errno`).
    ///
    /// ```
    /// use kfd_preempt::EntryError;
    /// assert_eq!(EntryError::from_status(-5), EntryError::Hardware);
    /// ```
    pub fn from_status(status: i32) -> Self {
        let errno = Errno::from_raw_os_error(status.saturating_neg());
        ENTRY_ERRNOS
            .iter()
            .find(|(e, _)| *e == errno)
            .map_or(EntryError::Other(errno.raw_os_error()), |(_, kind)| *kind)
    }

    /// The positive errno this error stands for.
    ///
    /// ```
    /// use kfd_preempt::EntryError;
    /// assert_eq!(EntryError::Busy.errno(), 16); // EBUSY
    /// ```
    pub fn errno(self) -> i32 {
        match self {
            EntryError::Other(e) => e,
            kind => ENTRY_ERRNOS
                .iter()
                .find(|(_, k)| *k == kind)
                .map_or(0, |(e, _)| e.raw_os_error()),
        }
    }
}

impl fmt::Display for EntryError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            EntryError::Invalid => "invalid handle, gpu_id or queue id",
            EntryError::QueueGone => "no such queue (destroyed)",
            EntryError::TargetExited => "the process exited",
            EntryError::Busy => "busy: being destroyed, debugged, or held by another owner",
            EntryError::Unsupported => "not supported: not a compute queue, no CWSR, or no HWS",
            EntryError::Hardware => "node reset or scheduler hang (see the kernel log)",
            EntryError::Cancelled => "not attempted: another entry failed (all-or-nothing)",
            EntryError::NoMemory => "out of memory",
            EntryError::TooSoon => {
                "too soon after the node's last preemption (min_preempt_interval_us); retry later"
            }
            EntryError::Other(e) => return f.write_str(&describe(Errno::from_raw_os_error(*e))),
        })
    }
}

/// What happened to one entry of a batch.
///
/// ```
/// use kfd_preempt::{EntryError, Outcome};
///
/// assert_eq!(Outcome::from_status(0), Outcome::Done);
/// assert_eq!(Outcome::from_status(1), Outcome::Already);
/// assert_eq!(Outcome::from_status(-2), Outcome::Failed(EntryError::QueueGone));
/// assert!(Outcome::Deferred.is_success() && !Outcome::Failed(EntryError::Busy).is_success());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Done (VALIDATE_ONLY: would be done).
    Done,
    /// Already in the requested state, or a duplicate entry.
    Already,
    /// Recorded; takes effect when the node runs again.
    Deferred,
    /// RESUME: resumed behind this owner's back (the debugger); ownership
    /// dropped.
    External,
    /// Failed.
    Failed(EntryError),
    /// A positive status this crate does not know.
    Unknown(i32),
}

impl Outcome {
    /// Decodes an entry's status.
    ///
    /// ```
    /// use kfd_preempt::Outcome;
    /// assert_eq!(Outcome::from_status(3), Outcome::External);
    /// ```
    pub fn from_status(status: i32) -> Self {
        match status {
            0 => Outcome::Done,
            s if s < 0 => Outcome::Failed(EntryError::from_status(s)),
            s if s == uapi::KFDP_R_ALREADY as i32 => Outcome::Already,
            s if s == uapi::KFDP_R_DEFERRED as i32 => Outcome::Deferred,
            s if s == uapi::KFDP_R_EXTERNAL as i32 => Outcome::External,
            s => Outcome::Unknown(s),
        }
    }

    /// The entry status the uapi gives this outcome: 0, `KFDP_R_*` or
    /// `-errno`.
    ///
    /// ```
    /// use kfd_preempt::Outcome;
    /// for status in [0, 1, 2, 3, -2, -16] {
    ///     assert_eq!(Outcome::from_status(status).status(), status);
    /// }
    /// ```
    pub fn status(self) -> i32 {
        match self {
            Outcome::Done => 0,
            Outcome::Already => uapi::KFDP_R_ALREADY as i32,
            Outcome::Deferred => uapi::KFDP_R_DEFERRED as i32,
            Outcome::External => uapi::KFDP_R_EXTERNAL as i32,
            Outcome::Failed(e) => -e.errno(),
            Outcome::Unknown(s) => s,
        }
    }

    /// The queue is (or will be) in the requested state.
    ///
    /// ```
    /// use kfd_preempt::Outcome;
    /// assert!(Outcome::Already.is_success());
    /// ```
    pub fn is_success(self) -> bool {
        matches!(self, Outcome::Done | Outcome::Already | Outcome::Deferred)
    }
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Outcome::Done => f.write_str("done"),
            Outcome::Already => f.write_str("already"),
            Outcome::Deferred => f.write_str("deferred (node not running)"),
            Outcome::External => f.write_str("resumed externally (debugger)"),
            Outcome::Failed(e) => write!(f, "failed: {e}"),
            Outcome::Unknown(s) => write!(f, "status {s}"),
        }
    }
}

/// The result of a PREEMPT or RESUME batch.
///
/// ```no_run
/// # let dev = kfd_preempt::Device::open()?;
/// # let queues = vec![];
/// let r = dev.preempt(&queues, &Default::default())?;
/// println!("{} ok, {} runlist update(s), {:?}", r.num_ok, r.runlist_updates, r.elapsed);
/// # Ok::<(), kfd_preempt::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BatchReport {
    /// Each entry with its outcome, in the order given.
    pub outcomes: Vec<(QueueRef, Outcome)>,
    /// Entries with status 0.
    pub num_ok: u32,
    /// HWS runlist updates or MES calls the module issued.
    pub runlist_updates: u32,
    /// Time the module spent in the hardware phase.
    pub elapsed: Duration,
}

impl BatchReport {
    /// Whether every entry reached the requested state.
    ///
    /// ```
    /// use std::time::Duration;
    /// use kfd_preempt::{BatchReport, Handle, Outcome, QueueRef};
    ///
    /// let r = QueueRef { handle: Handle(1), gpu_id: 1, queue_id: 0 };
    /// let report = BatchReport { outcomes: vec![(r, Outcome::Already)], num_ok: 0, runlist_updates: 0, elapsed: Duration::ZERO };
    /// assert!(report.all_succeeded());
    /// ```
    pub fn all_succeeded(&self) -> bool {
        self.outcomes.iter().all(|(_, o)| o.is_success())
    }

    /// The entries that did not.
    ///
    /// ```no_run
    /// # let dev = kfd_preempt::Device::open()?;
    /// # let queues = vec![];
    /// for (q, outcome) in dev.preempt(&queues, &Default::default())?.failures() {
    ///     eprintln!("{q}: {outcome}");
    /// }
    /// # Ok::<(), kfd_preempt::Error>(())
    /// ```
    pub fn failures(&self) -> impl Iterator<Item = &(QueueRef, Outcome)> {
        self.outcomes.iter().filter(|(_, o)| !o.is_success())
    }

    pub(crate) fn from_raw(entries: &[uapi::kfdp_queue_ref], b: &uapi::kfdp_batch) -> Self {
        Self::from_entries(
            entries,
            b.num_ok,
            b.num_runlist_updates,
            Duration::from_nanos(b.elapsed_ns),
        )
    }

    /// The report of any call whose entries are `kfdp_queue_ref`s (PREEMPT,
    /// RESUME, WATCH, UNWATCH).
    pub(crate) fn from_entries(
        entries: &[uapi::kfdp_queue_ref],
        num_ok: u32,
        runlist_updates: u32,
        elapsed: Duration,
    ) -> Self {
        BatchReport {
            outcomes: entries
                .iter()
                .map(|e| {
                    (
                        QueueRef {
                            handle: Handle(e.handle),
                            gpu_id: e.gpu_id,
                            queue_id: e.queue_id,
                        },
                        Outcome::from_status(e.status),
                    )
                })
                .collect(),
            num_ok,
            runlist_updates,
            elapsed,
        }
    }
}

/// The entries of a call naming `queues`, statuses zeroed, checked against
/// `KFDP_MAX_BATCH`.
pub(crate) fn raw_entries(queues: &[QueueRef]) -> Result<Vec<uapi::kfdp_queue_ref>, Error> {
    if queues.len() > uapi::KFDP_MAX_BATCH as usize {
        return Err(Error::BatchTooLarge {
            len: queues.len(),
            max: uapi::KFDP_MAX_BATCH,
        });
    }
    Ok(queues
        .iter()
        .map(|q| uapi::kfdp_queue_ref {
            handle: q.handle.0,
            gpu_id: q.gpu_id,
            queue_id: q.queue_id,
            status: 0,
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lease_bounds() {
        let with = |ms| BatchOptions {
            lease: Some(Duration::from_millis(ms)),
            ..Default::default()
        };
        assert_eq!(BatchOptions::default().lease_ms(), Ok(0));
        assert_eq!(with(250).lease_ms(), Ok(250));
        assert_eq!(with(86_400_000).lease_ms(), Ok(86_400_000));
        assert!(with(0).lease_ms().is_err());
        assert!(with(86_400_001).lease_ms().is_err());
        let sub_ms = BatchOptions {
            lease: Some(Duration::from_micros(500)),
            ..Default::default()
        };
        assert!(sub_ms.lease_ms().is_err());
    }

    #[test]
    fn flags_map_to_the_abi_bits() {
        assert_eq!(BatchOptions::default().flags(), 0);
        let both = BatchOptions {
            validate_only: true,
            all_or_nothing: true,
            ..Default::default()
        };
        assert_eq!(
            both.flags(),
            uapi::KFDP_BATCH_VALIDATE_ONLY | uapi::KFDP_BATCH_ALL_OR_NOTHING
        );
    }

    #[test]
    fn every_documented_status_decodes() {
        let cases = [
            (-22, EntryError::Invalid),
            (-2, EntryError::QueueGone),
            (-3, EntryError::TargetExited),
            (-16, EntryError::Busy),
            (-95, EntryError::Unsupported),
            (-5, EntryError::Hardware),
            (-125, EntryError::Cancelled),
            (-12, EntryError::NoMemory),
            (-11, EntryError::TooSoon),
            (-1, EntryError::Other(1)),
        ];
        for (status, e) in cases {
            assert_eq!(Outcome::from_status(status), Outcome::Failed(e));
        }
        assert_eq!(Outcome::from_status(2), Outcome::Deferred);
        assert_eq!(Outcome::from_status(3), Outcome::External);
        assert_eq!(Outcome::from_status(9), Outcome::Unknown(9));
        assert!(!Outcome::External.is_success());
    }

    #[test]
    fn report_keeps_order_and_counters() {
        let raw = [
            uapi::kfdp_queue_ref {
                handle: 1,
                gpu_id: 2,
                queue_id: 3,
                status: 0,
            },
            uapi::kfdp_queue_ref {
                handle: 1,
                gpu_id: 2,
                queue_id: 4,
                status: -2,
            },
        ];
        let b = uapi::kfdp_batch {
            num_ok: 1,
            num_runlist_updates: 1,
            elapsed_ns: 1500,
            ..Default::default()
        };
        let r = BatchReport::from_raw(&raw, &b);
        assert_eq!(r.outcomes[1].0.queue_id, 4);
        assert_eq!(r.outcomes[1].1, Outcome::Failed(EntryError::QueueGone));
        assert_eq!((r.num_ok, r.runlist_updates), (1, 1));
        assert_eq!(r.elapsed, Duration::from_nanos(1500));
        assert!(!r.all_succeeded());
        assert_eq!(r.failures().count(), 1);
    }
}
