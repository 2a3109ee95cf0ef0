//! The owner device, `/dev/kfd_preempt`.

use std::{
    fs::{File, OpenOptions},
    io,
    os::fd::{AsFd, BorrowedFd, OwnedFd},
    path::Path,
    time::Duration,
};

use rustix::io::Errno;

use crate::{
    batch::{BatchOptions, BatchReport, QueueRef},
    ioctl, locate, uapi, Error, QueueInfo, Target,
};

/// Where the module's misc device lives.
///
/// ```
/// assert_eq!(kfd_preempt::DEVICE_PATH, "/dev/kfd_preempt");
/// ```
pub const DEVICE_PATH: &str = "/dev/kfd_preempt";

/// An attachment handle, naming one attached process within one owner.
///
/// ```
/// let h = kfd_preempt::Handle(1);
/// assert_eq!(h.0, 1);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Handle(pub u32);

/// Capability bits the module reports in [`Info::caps`].
///
/// ```
/// use kfd_preempt::Caps;
///
/// let caps = Caps(Caps::HWS_BATCH | Caps::SIM);
/// assert!(caps.has(Caps::SIM) && !caps.has(Caps::PID));
/// assert_eq!(caps.names(), ["hws-batch", "sim"]);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Caps(pub u64);

impl Caps {
    /// One runlist update per node per batch (HWS).
    pub const HWS_BATCH: u64 = uapi::KFDP_CAP_HWS_BATCH as u64;
    /// MES nodes are supported (one call per queue).
    pub const MES: u64 = uapi::KFDP_CAP_MES as u64;
    /// FREEZE and THAW are supported.
    pub const FREEZE: u64 = uapi::KFDP_CAP_FREEZE as u64;
    /// Attach by pid is enabled.
    pub const PID: u64 = uapi::KFDP_CAP_PID as u64;
    /// Simulated nodes are present.
    pub const SIM: u64 = uapi::KFDP_CAP_SIM as u64;
    /// PREEMPT and FREEZE of a node may fail with `EAGAIN` within
    /// [`Info::min_preempt_interval_us`] of its last one (ABI 1.1).
    pub const RATE_LIMIT: u64 = uapi::KFDP_CAP_RATE_LIMIT as u64;
    /// WATCH, UNWATCH, SAMPLE and ARM: activity detection of watched queues
    /// (ABI 1.2, [`Device::watch`]).
    pub const ACTIVITY: u64 = uapi::KFDP_CAP_ACTIVITY as u64;
    /// Simulated ring queues that execute dispatches (ABI 1.2, with
    /// [`Caps::SIM`]; [`SimTenant::create_ring`](crate::sim::SimTenant::create_ring)).
    pub const SIM_RING: u64 = uapi::KFDP_CAP_SIM_RING as u64;

    /// Whether every bit of `bits` is set.
    ///
    /// ```
    /// use kfd_preempt::Caps;
    /// assert!(Caps(Caps::PID | Caps::SIM).has(Caps::PID));
    /// ```
    pub fn has(self, bits: u64) -> bool {
        self.0 & bits == bits
    }

    /// The names of the bits set, in ABI order; unknown bits as `0x..`.
    ///
    /// ```
    /// use kfd_preempt::Caps;
    /// assert_eq!(Caps(Caps::MES | 0x100).names(), ["mes", "0x100"]);
    /// assert_eq!(Caps(Caps::ACTIVITY | Caps::SIM_RING).names(), ["activity", "sim-ring"]);
    /// ```
    pub fn names(self) -> Vec<String> {
        crate::bits::names(
            self.0,
            &[
                (Self::HWS_BATCH, "hws-batch"),
                (Self::MES, "mes"),
                (Self::FREEZE, "freeze"),
                (Self::PID, "pid-attach"),
                (Self::SIM, "sim"),
                (Self::RATE_LIMIT, "rate-limit"),
                (Self::ACTIVITY, "activity"),
                (Self::SIM_RING, "sim-ring"),
            ],
        )
    }
}

/// What the module implements (`KFDP_IOC_INFO`).
///
/// ```no_run
/// let info = kfd_preempt::Device::open()?.info()?;
/// println!("ABI {}.{}, up to {} queues per batch", info.abi_major, info.abi_minor, info.max_batch);
/// # Ok::<(), kfd_preempt::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Info {
    /// Major ABI version; this crate speaks [`uapi::KFDP_ABI_MAJOR`].
    pub abi_major: u32,
    /// Minor ABI version.
    pub abi_minor: u32,
    /// Capability bits.
    pub caps: Caps,
    /// Most entries one batch may carry.
    pub max_batch: u32,
    /// The kernel's `struct kfdp_queue_ref` size.
    pub sizeof_queue_ref: u32,
    /// The kernel's `struct kfdp_queue_info` size.
    pub sizeof_queue_info: u32,
    /// The least time between two PREEMPT or FREEZE triggers of one node,
    /// in microseconds; 0: no limit, or a module older than ABI 1.1.
    pub min_preempt_interval_us: u32,
    /// The most queues one owner may watch ([`Device::watch`]); 0 before
    /// ABI 1.2.
    pub max_watches: u32,
    /// The shortest period [`Device::arm`] accepts; zero before ABI 1.2.
    pub min_watch_period: Duration,
}

impl From<uapi::kfdp_info> for Info {
    fn from(i: uapi::kfdp_info) -> Self {
        Info {
            abi_major: i.abi_major,
            abi_minor: i.abi_minor,
            caps: Caps(i.caps),
            max_batch: i.max_batch,
            sizeof_queue_ref: i.sizeof_queue_ref,
            sizeof_queue_info: i.sizeof_queue_info,
            min_preempt_interval_us: i.min_preempt_interval_us,
            max_watches: i.max_watches,
            min_watch_period: Duration::from_micros(i.min_watch_period_us.into()),
        }
    }
}

/// What kind of file an ATTACH is given.
///
/// ```no_run
/// use std::os::fd::AsFd;
/// use kfd_preempt::{Device, TargetKind};
///
/// // A tenant's /dev/kfd received from a trusted agent over a Unix socket:
/// # let received = std::fs::File::open("/dev/kfd").unwrap();
/// let dev = Device::open()?;
/// let tenant = dev.attach_fd(received.as_fd(), TargetKind::KfdFd)?;
/// # Ok::<(), kfd_preempt::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TargetKind {
    /// The tenant's `/dev/kfd`.
    KfdFd,
    /// A tenant of the simulated node (`/dev/kfd_preempt_sim`).
    SimFd,
}

/// An open `/dev/kfd_preempt`: one owner. Every preemption, freeze and
/// attachment made through it is undone by the kernel when it is dropped
/// (closed), so a crashed scheduler never leaves a tenant stopped.
///
/// ```no_run
/// use kfd_preempt::{BatchOptions, Device};
///
/// let dev = Device::open()?;
/// let tenant = dev.attach(4242)?;
/// let queues: Vec<_> = tenant.query()?.iter().map(|q| q.queue_ref()).collect();
/// let report = dev.preempt(&queues, &BatchOptions::default())?;
/// println!("{} queues off in {} runlist update(s)", report.num_ok, report.runlist_updates);
/// dev.resume(&queues)?;
/// # Ok::<(), kfd_preempt::Error>(())
/// ```
#[derive(Debug)]
pub struct Device {
    file: File,
}

impl AsFd for Device {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.file.as_fd()
    }
}

impl Device {
    /// Opens [`DEVICE_PATH`]. Needs `CAP_SYS_NICE`.
    ///
    /// ```no_run
    /// match kfd_preempt::Device::open() {
    ///     Ok(_) => println!("ready"),
    ///     Err(e) => eprintln!("{e}"), // e.g. "... load the module ..."
    /// }
    /// ```
    pub fn open() -> Result<Self, Error> {
        Self::open_path(DEVICE_PATH)
    }

    /// Opens the device at `path` (another node of the same device).
    ///
    /// ```no_run
    /// let dev = kfd_preempt::Device::open_path("/dev/kfd_preempt")?;
    /// # Ok::<(), kfd_preempt::Error>(())
    /// ```
    pub fn open_path(path: impl AsRef<Path>) -> Result<Self, Error> {
        OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .map(|file| Device { file })
            .map_err(|e| open_error(&e))
    }

    /// Asks the module what it implements, and checks that it speaks this
    /// crate's major ABI version.
    ///
    /// ```no_run
    /// use kfd_preempt::{Caps, Device};
    ///
    /// let info = Device::open()?.info()?;
    /// if !info.caps.has(Caps::FREEZE) {
    ///     eprintln!("this module cannot freeze");
    /// }
    /// # Ok::<(), kfd_preempt::Error>(())
    /// ```
    pub fn info(&self) -> Result<Info, Error> {
        // SAFETY: IOC_INFO writes a whole `kfdp_info`, a struct of integers.
        let raw = unsafe { ioctl::get::<{ uapi::IOC_INFO }, uapi::kfdp_info>(self) }.map_err(
            |errno| match errno {
                Errno::NOTTY => Error::NotSupported("KFDP_IOC_INFO"),
                errno => Error::Os {
                    operation: "KFDP_IOC_INFO",
                    errno,
                },
            },
        )?;
        if raw.abi_major != uapi::KFDP_ABI_MAJOR {
            return Err(Error::AbiMismatch {
                module: raw.abi_major,
                crate_: uapi::KFDP_ABI_MAJOR,
            });
        }
        Ok(raw.into())
    }

    /// Attaches the process `pid`: finds its `/dev/kfd` (or simulated
    /// tenant) descriptor in `/proc/PID/fd`, takes a copy with
    /// `pidfd_getfd(2)` (the kernel checks ptrace access), attaches it and
    /// closes the copy. If the copy is refused and the module has attach by
    /// pid enabled ([`Caps::PID`]), that is used instead.
    ///
    /// A process holding several KFD descriptors (a forked child holds its
    /// parent's too) is attached through the one it opened itself. One that
    /// holds only its parent's attaches the parent: [`Target::tgid`] then
    /// differs from `pid`.
    ///
    /// ```no_run
    /// let dev = kfd_preempt::Device::open()?;
    /// let tenant = dev.attach(4242)?;
    /// println!("tgid {} on {} GPU(s)", tenant.tgid(), tenant.num_gpus());
    /// # Ok::<(), kfd_preempt::Error>(())
    /// ```
    pub fn attach(&self, pid: i32) -> Result<Target<'_>, Error> {
        match locate::take_kfd_fds(pid) {
            Ok(copies) => self.attach_own(pid, &copies),
            Err(e @ (Error::PtraceDenied { .. } | Error::NotAKfdProcess { .. })) => {
                if self.info().is_ok_and(|i| i.caps.has(Caps::PID)) {
                    self.attach_by_pid(pid)
                } else {
                    Err(e)
                }
            }
            Err(e) => Err(e),
        }
    }

    /// Attaches, of the KFD descriptors `copies` taken from `pid` (lowest fd
    /// first), the one `pid` opened itself. A forked child also holds its
    /// parent's, which names the parent's KFD process: a child that set up
    /// the GPU itself holds both, the inherited one usually lower. With one
    /// descriptor it is attached, whoever it names (the target's tgid says
    /// whom). With several, each is attached first on a scratch file of the
    /// device to learn its tgid: attached here, one naming a process this
    /// owner holds already would return that attachment's handle, which
    /// the [`Target`]'s drop would detach.
    fn attach_own(&self, pid: i32, copies: &[(OwnedFd, TargetKind)]) -> Result<Target<'_>, Error> {
        let Some((lowest, lowest_kind)) = copies.first() else {
            return Err(Error::NotAKfdProcess { pid });
        };
        if copies.len() > 1 {
            use std::os::fd::AsRawFd;
            // The same device opened anew: another owner, closed below.
            // Without one (no descriptor left, say), the lowest is taken,
            // as with one descriptor: the tgid says whom it attached.
            let path = format!("/proc/self/fd/{}", self.file.as_raw_fd());
            let Ok(scratch) = Device::open_path(path) else {
                return self.attach_fd(lowest.as_fd(), *lowest_kind);
            };
            for (fd, kind) in copies {
                if scratch
                    .attach_fd(fd.as_fd(), *kind)
                    .is_ok_and(|t| t.tgid() == pid)
                {
                    return self.attach_fd(fd.as_fd(), *kind);
                }
            }
        }
        self.attach_fd(lowest.as_fd(), *lowest_kind)
    }

    /// Attaches the process whose KFD file `fd` is (a descriptor taken from
    /// it, e.g. with `pidfd_getfd(2)` or passed over a Unix socket).
    ///
    /// ```no_run
    /// use std::os::fd::AsFd;
    /// use kfd_preempt::{Device, TargetKind};
    ///
    /// let dev = Device::open()?;
    /// let tenant_fd = std::fs::File::open("/dev/kfd_preempt_sim").unwrap();
    /// let tenant = dev.attach_fd(tenant_fd.as_fd(), TargetKind::SimFd)?;
    /// # Ok::<(), kfd_preempt::Error>(())
    /// ```
    pub fn attach_fd(&self, fd: BorrowedFd<'_>, kind: TargetKind) -> Result<Target<'_>, Error> {
        use std::os::fd::AsRawFd;
        let mut a = uapi::kfdp_attach {
            kind: match kind {
                TargetKind::KfdFd => uapi::KFDP_TARGET_KFD_FD,
                TargetKind::SimFd => uapi::KFDP_TARGET_SIM_FD,
            },
            fd: fd.as_raw_fd(),
            ..Default::default()
        };
        // SAFETY: IOC_ATTACH reads and writes a `kfdp_attach`, which has no
        // user pointers.
        unsafe { ioctl::update::<{ uapi::IOC_ATTACH }, _>(self, &mut a) }.map_err(
            |errno| match errno {
                Errno::BADF | Errno::INVAL => Error::InvalidArgument(
                    "the descriptor is not a KFD file of the kind given (or not the primary KFD context)",
                ),
                Errno::OPNOTSUPP if kind == TargetKind::SimFd => Error::SimNotEnabled,
                Errno::SRCH => Error::TargetExited,
                errno => Error::Os {
                    operation: "KFDP_IOC_ATTACH",
                    errno,
                },
            },
        )?;
        Ok(Target::new(self, Handle(a.handle), a.tgid, a.num_gpus))
    }

    /// Attaches `pid` by pid alone (`KFDP_TARGET_PID`): needs the module
    /// parameter `pid_attach=1` and `CAP_SYS_ADMIN`.
    ///
    /// ```no_run
    /// let dev = kfd_preempt::Device::open()?;
    /// let tenant = dev.attach_by_pid(4242)?;
    /// # Ok::<(), kfd_preempt::Error>(())
    /// ```
    pub fn attach_by_pid(&self, pid: i32) -> Result<Target<'_>, Error> {
        let mut a = uapi::kfdp_attach {
            kind: uapi::KFDP_TARGET_PID,
            fd: -1,
            pid,
            ..Default::default()
        };
        // SAFETY: IOC_ATTACH reads and writes a `kfdp_attach`, which has no
        // user pointers.
        unsafe { ioctl::update::<{ uapi::IOC_ATTACH }, _>(self, &mut a) }.map_err(|errno| {
            match errno {
                Errno::OPNOTSUPP => Error::PidAttachDisabled,
                Errno::PERM => Error::PidAttachNeedsAdmin,
                Errno::SRCH => Error::NoSuchProcess { pid },
                Errno::NOENT => Error::NotAKfdProcess { pid },
                errno => Error::Os {
                    operation: "KFDP_IOC_ATTACH",
                    errno,
                },
            }
        })?;
        Ok(Target::new(self, Handle(a.handle), a.tgid, a.num_gpus))
    }

    /// Drops the attachment `handle` after resuming and thawing everything
    /// this owner did to it. [`Target`] does this when dropped; this is for
    /// callers that keep bare handles ([`Target::into_handle`]).
    ///
    /// ```no_run
    /// let dev = kfd_preempt::Device::open()?;
    /// let handle = dev.attach(4242)?.into_handle();
    /// dev.detach(handle)?;
    /// # Ok::<(), kfd_preempt::Error>(())
    /// ```
    pub fn detach(&self, handle: Handle) -> Result<(), Error> {
        let d = uapi::kfdp_detach {
            handle: handle.0,
            ..Default::default()
        };
        // SAFETY: IOC_DETACH reads a `kfdp_detach`, which has no pointers.
        unsafe { ioctl::set::<{ uapi::IOC_DETACH }, _>(self, d) }
            .map_err(|errno| handle_error("KFDP_IOC_DETACH", handle, errno))
    }

    /// Lists the queues of the attachment `handle` on `gpu_id` (`None`: all
    /// of its nodes). See [`Target::query`].
    ///
    /// ```no_run
    /// let dev = kfd_preempt::Device::open()?;
    /// let handle = dev.attach(4242)?.into_handle();
    /// let queues = dev.query(handle, None)?;
    /// # Ok::<(), kfd_preempt::Error>(())
    /// ```
    pub fn query(&self, handle: Handle, gpu_id: Option<u32>) -> Result<Vec<QueueInfo>, Error> {
        let mut capacity = 64u32;
        // Queues can be created between two calls: grow and retry a few
        // times, then return what fits.
        for _ in 0..4 {
            let mut buf = vec![uapi::kfdp_queue_info::default(); capacity as usize];
            let mut q = uapi::kfdp_query {
                handle: handle.0,
                gpu_id: gpu_id.unwrap_or(0),
                entries_ptr: buf.as_mut_ptr() as u64,
                entry_size: std::mem::size_of::<uapi::kfdp_queue_info>() as u32,
                capacity,
                ..Default::default()
            };
            // SAFETY: IOC_QUERY reads and writes a `kfdp_query`; its
            // `entries_ptr` points to `capacity` writable `kfdp_queue_info`
            // in `buf`, which lives across the call.
            unsafe { ioctl::update::<{ uapi::IOC_QUERY }, _>(self, &mut q) }.map_err(|errno| {
                self.handle_or_gpu_error("KFDP_IOC_QUERY", handle, gpu_id, errno)
            })?;
            let max = uapi::KFDP_MAX_BATCH;
            if q.num_queues <= q.num_written || capacity >= max {
                buf.truncate(q.num_written.min(capacity) as usize);
                return Ok(buf.iter().map(|r| QueueInfo::from_raw(handle, r)).collect());
            }
            capacity = q.num_queues.min(max);
        }
        Err(Error::Os {
            operation: "KFDP_IOC_QUERY (queues kept being created)",
            errno: Errno::AGAIN,
        })
    }

    /// Takes the queues in `queues` off the GPU in one call: one runlist
    /// update per HWS node however many queues and processes. Each entry
    /// gets an [`Outcome`](crate::Outcome); the call itself fails only for
    /// errors of the whole call.
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use kfd_preempt::{BatchOptions, Device};
    ///
    /// let dev = Device::open()?;
    /// let a = dev.attach(4242)?;
    /// let b = dev.attach(4343)?;
    /// let mut queues: Vec<_> = a.query()?.iter().map(|q| q.queue_ref()).collect();
    /// queues.extend(b.query()?.iter().map(|q| q.queue_ref()));
    /// let opts = BatchOptions { lease: Some(Duration::from_millis(500)), ..Default::default() };
    /// let report = dev.preempt(&queues, &opts)?;
    /// for (q, outcome) in report.failures() {
    ///     eprintln!("{q}: {outcome}");
    /// }
    /// # Ok::<(), kfd_preempt::Error>(())
    /// ```
    pub fn preempt(&self, queues: &[QueueRef], opts: &BatchOptions) -> Result<BatchReport, Error> {
        self.batch::<{ uapi::IOC_PREEMPT }>("KFDP_IOC_PREEMPT", queues, opts)
    }

    /// Puts the queues in `queues` back, in one call.
    ///
    /// ```no_run
    /// # let dev = kfd_preempt::Device::open()?;
    /// # let queues = vec![];
    /// let report = dev.resume(&queues)?;
    /// assert!(report.all_succeeded());
    /// # Ok::<(), kfd_preempt::Error>(())
    /// ```
    pub fn resume(&self, queues: &[QueueRef]) -> Result<BatchReport, Error> {
        self.resume_with(queues, &BatchOptions::default())
    }

    /// [`resume`](Self::resume) with options (`lease` must be `None`).
    ///
    /// ```no_run
    /// # let dev = kfd_preempt::Device::open()?;
    /// # let queues = vec![];
    /// let check = kfd_preempt::BatchOptions { validate_only: true, ..Default::default() };
    /// let report = dev.resume_with(&queues, &check)?;
    /// # Ok::<(), kfd_preempt::Error>(())
    /// ```
    pub fn resume_with(
        &self,
        queues: &[QueueRef],
        opts: &BatchOptions,
    ) -> Result<BatchReport, Error> {
        if opts.lease.is_some() {
            return Err(Error::InvalidArgument("RESUME takes no lease"));
        }
        self.batch::<{ uapi::IOC_RESUME }>("KFDP_IOC_RESUME", queues, opts)
    }

    fn batch<const OP: rustix::ioctl::Opcode>(
        &self,
        operation: &'static str,
        queues: &[QueueRef],
        opts: &BatchOptions,
    ) -> Result<BatchReport, Error> {
        let mut entries = crate::batch::raw_entries(queues)?;
        let mut b = uapi::kfdp_batch {
            entries_ptr: entries.as_mut_ptr() as u64,
            // Bounded by KFDP_MAX_BATCH above.
            num_entries: entries.len() as u32,
            entry_size: std::mem::size_of::<uapi::kfdp_queue_ref>() as u32,
            flags: opts.flags(),
            lease_ms: opts.lease_ms()?,
            ..Default::default()
        };
        // SAFETY: OP is IOC_PREEMPT or IOC_RESUME (the only callers), which
        // read and write a `kfdp_batch`; `entries_ptr` points to
        // `num_entries` writable `kfdp_queue_ref` in `entries`, alive across
        // the call.
        unsafe { ioctl::update::<OP, _>(self, &mut b) }.map_err(|errno| match errno {
            Errno::TOOBIG => Error::BatchTooLarge {
                len: queues.len(),
                max: uapi::KFDP_MAX_BATCH,
            },
            Errno::INVAL => Error::InvalidArgument("the module rejected the batch's header"),
            Errno::NOTTY => Error::NotSupported(operation),
            errno => Error::Os { operation, errno },
        })?;
        Ok(BatchReport::from_raw(&entries, &b))
    }

    /// Freezes (`thaw == false`) or thaws the attachment `handle` on
    /// `gpu_id` (`None`: every node), returning the hardware time. See
    /// [`Target::freeze`].
    ///
    /// ```no_run
    /// # let dev = kfd_preempt::Device::open()?;
    /// # let handle = kfd_preempt::Handle(1);
    /// let took = dev.freeze(handle, None, false)?;
    /// dev.freeze(handle, None, true)?;
    /// # Ok::<(), kfd_preempt::Error>(())
    /// ```
    pub fn freeze(
        &self,
        handle: Handle,
        gpu_id: Option<u32>,
        thaw: bool,
    ) -> Result<Duration, Error> {
        let mut f = uapi::kfdp_freeze {
            handle: handle.0,
            gpu_id: gpu_id.unwrap_or(0),
            ..Default::default()
        };
        let operation = if thaw {
            "KFDP_IOC_THAW"
        } else {
            "KFDP_IOC_FREEZE"
        };
        // SAFETY: IOC_FREEZE and IOC_THAW read and write a `kfdp_freeze`,
        // which has no user pointers.
        let r = unsafe {
            if thaw {
                ioctl::update::<{ uapi::IOC_THAW }, _>(self, &mut f)
            } else {
                ioctl::update::<{ uapi::IOC_FREEZE }, _>(self, &mut f)
            }
        };
        r.map_err(|errno| match errno {
            Errno::INVAL if thaw => Error::NotFrozen,
            errno => self.handle_or_gpu_error(operation, handle, gpu_id, errno),
        })?;
        if f.status < 0 {
            let errno = Errno::from_raw_os_error(-f.status);
            return Err(match errno {
                Errno::SRCH => Error::TargetExited,
                Errno::AGAIN => Error::TooSoon { operation },
                errno => Error::Hardware { operation, errno },
            });
        }
        Ok(Duration::from_nanos(f.elapsed_ns))
    }
}

impl Device {
    /// Maps the errno of a call naming an attachment and maybe a node: the
    /// module's `EINVAL` is the gpu_id's fault if the handle alone still
    /// answers a QUERY of all its nodes, else the handle's.
    fn handle_or_gpu_error(
        &self,
        operation: &'static str,
        handle: Handle,
        gpu_id: Option<u32>,
        errno: Errno,
    ) -> Error {
        match gpu_id {
            Some(gpu_id) if errno == Errno::INVAL && self.handle_answers(handle) => {
                Error::UnknownGpu {
                    handle: handle.0,
                    gpu_id,
                }
            }
            _ => handle_error(operation, handle, errno),
        }
    }

    /// Whether QUERY accepts `handle` (all nodes, no entries wanted).
    fn handle_answers(&self, handle: Handle) -> bool {
        let mut q = uapi::kfdp_query {
            handle: handle.0,
            entry_size: std::mem::size_of::<uapi::kfdp_queue_info>() as u32,
            ..Default::default()
        };
        // SAFETY: IOC_QUERY reads and writes a `kfdp_query`; with capacity 0
        // the module writes no entry, so the null `entries_ptr` is never used.
        unsafe { ioctl::update::<{ uapi::IOC_QUERY }, _>(self, &mut q) }.is_ok()
    }
}

/// Maps the errno of a call naming an attachment.
fn handle_error(operation: &'static str, handle: Handle, errno: Errno) -> Error {
    match errno {
        Errno::INVAL => Error::UnknownHandle(handle.0),
        Errno::SRCH => Error::TargetExited,
        Errno::NOTTY => Error::NotSupported(operation),
        errno => Error::Os { operation, errno },
    }
}

fn open_error(e: &io::Error) -> Error {
    let errno = Errno::from_io_error(e).unwrap_or(Errno::IO);
    match errno {
        Errno::NOENT | Errno::NODEV | Errno::NXIO => Error::ModuleNotLoaded,
        Errno::PERM | Errno::ACCESS => Error::PermissionDenied(errno),
        errno => Error::Os {
            operation: "open /dev/kfd_preempt",
            errno,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caps_names_known_and_unknown_bits() {
        assert_eq!(Caps(0).names(), Vec::<String>::new());
        assert_eq!(
            Caps(Caps::PID | Caps::HWS_BATCH).names(),
            ["hws-batch", "pid-attach"]
        );
        assert_eq!(Caps(Caps::SIM | 0x100).names(), ["sim", "0x100"]);
        assert_eq!(
            Caps(Caps::SIM_RING | Caps::ACTIVITY | Caps::RATE_LIMIT | 0x100).names(),
            ["rate-limit", "activity", "sim-ring", "0x100"]
        );
        assert_eq!((Caps::ACTIVITY, Caps::SIM_RING), (1 << 6, 1 << 7));
    }

    #[test]
    fn info_from_raw_keeps_every_field() {
        let raw = uapi::kfdp_info {
            abi_major: 1,
            abi_minor: 2,
            caps: 0x5,
            max_batch: 4096,
            sizeof_queue_ref: 16,
            sizeof_queue_info: 96,
            min_preempt_interval_us: 1000,
            max_watches: 256,
            min_watch_period_us: 100,
            ..Default::default()
        };
        let info = Info::from(raw);
        assert_eq!(info.min_preempt_interval_us, 1000);
        assert_eq!(info.max_watches, 256);
        assert_eq!(info.min_watch_period, Duration::from_micros(100));
        assert_eq!((info.abi_major, info.abi_minor), (1, 2));
        assert_eq!(info.caps, Caps(0x5));
        assert_eq!(
            (
                info.max_batch,
                info.sizeof_queue_ref,
                info.sizeof_queue_info
            ),
            (4096, 16, 96)
        );
    }

    #[test]
    fn open_errors_tell_what_to_do() {
        let missing = open_error(&io::Error::from_raw_os_error(Errno::NOENT.raw_os_error()));
        assert_eq!(missing, Error::ModuleNotLoaded);
        let eperm = open_error(&io::Error::from_raw_os_error(Errno::PERM.raw_os_error()));
        assert!(eperm.to_string().contains("CAP_SYS_NICE"));
        let eacces = open_error(&io::Error::from_raw_os_error(Errno::ACCESS.raw_os_error()));
        assert!(eacces.to_string().contains("udev rule"));
    }

    #[test]
    fn opening_a_missing_node_is_module_not_loaded() {
        assert_eq!(
            Device::open_path("/nonexistent/kfd_preempt").unwrap_err(),
            Error::ModuleNotLoaded
        );
    }

    fn dev_null() -> Device {
        // /dev/null answers ENOTTY to every ioctl, as an old module would.
        Device {
            file: File::options()
                .read(true)
                .write(true)
                .open("/dev/null")
                .unwrap(),
        }
    }

    #[test]
    fn info_ioctl_on_a_non_kfdp_file_fails_cleanly() {
        assert_eq!(dev_null().info(), Err(Error::NotSupported("KFDP_IOC_INFO")));
    }

    #[test]
    fn handle_calls_on_an_old_module_say_not_supported() {
        let dev = dev_null();
        assert_eq!(
            dev.query(Handle(1), None),
            Err(Error::NotSupported("KFDP_IOC_QUERY"))
        );
        assert_eq!(
            dev.freeze(Handle(1), None, false),
            Err(Error::NotSupported("KFDP_IOC_FREEZE"))
        );
    }

    #[test]
    fn oversized_batches_and_bad_leases_never_reach_the_kernel() {
        // /dev/null would answer ENOTTY: any other error proves that the
        // crate refused before the ioctl.
        let dev = dev_null();
        let q = QueueRef {
            handle: Handle(1),
            gpu_id: 1,
            queue_id: 0,
        };
        let many = vec![q; uapi::KFDP_MAX_BATCH as usize + 1];
        assert_eq!(
            dev.preempt(&many, &BatchOptions::default()),
            Err(Error::BatchTooLarge {
                len: many.len(),
                max: uapi::KFDP_MAX_BATCH
            })
        );
        let lease = BatchOptions {
            lease: Some(Duration::from_millis(5)),
            ..Default::default()
        };
        assert!(matches!(
            dev.resume_with(&[q], &lease),
            Err(Error::InvalidArgument(_))
        ));
        assert_eq!(
            dev.preempt(&[q], &BatchOptions::default()),
            Err(Error::NotSupported("KFDP_IOC_PREEMPT"))
        );
    }
}
