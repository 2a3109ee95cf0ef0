//! Tenants, ring queues and knobs of the module's simulated nodes
//! (`sim_nodes=N`), for tests, demos and benchmarks on machines without an
//! AMD GPU. See the module's `Documentation/simulated-node.rst`.

use std::{
    ffi::c_void,
    fmt,
    fs::{File, OpenOptions},
    mem::offset_of,
    os::fd::{AsFd, BorrowedFd},
    path::{Path, PathBuf},
    ptr::{self, NonNull},
    sync::{
        atomic::{AtomicU32, AtomicU64, Ordering},
        Mutex, PoisonError,
    },
    time::Duration,
};

use rustix::{
    io::Errno,
    mm::{self, MapFlags, ProtFlags},
};

use crate::{ioctl, uapi, Error, QueueState, QueueType};

/// The tenant device of the simulated nodes.
///
/// ```
/// assert_eq!(kfd_preempt::sim::TENANT_PATH, "/dev/kfd_preempt_sim");
/// ```
pub const TENANT_PATH: &str = "/dev/kfd_preempt_sim";

/// Where the simulated nodes' debugfs knobs live.
///
/// ```
/// assert!(kfd_preempt::sim::DEBUGFS_DIR.starts_with("/sys/kernel/debug/"));
/// ```
pub const DEBUGFS_DIR: &str = "/sys/kernel/debug/kfd_preempt/sim";

/// One simulated KFD process: an open of [`TENANT_PATH`]. Its queues go when
/// it is dropped.
///
/// ```no_run
/// use kfd_preempt::{sim::SimTenant, QueueType};
///
/// let tenant = SimTenant::open()?;
/// let q = tenant.create_queue(0, QueueType::ComputeAql, 7)?;
/// println!("queue {} on gpu {:#x}", q.queue_id, q.gpu_id);
/// # Ok::<(), kfd_preempt::Error>(())
/// ```
#[derive(Debug)]
pub struct SimTenant {
    file: File,
}

/// A queue [`SimTenant::create_queue`] made.
///
/// ```no_run
/// # let tenant = kfd_preempt::sim::SimTenant::open()?;
/// let q: kfd_preempt::sim::SimQueue = tenant.create_queue(0, kfd_preempt::QueueType::ComputeAql, 7)?;
/// # Ok::<(), kfd_preempt::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SimQueue {
    /// Its queue id within the tenant.
    pub queue_id: u32,
    /// Its node's `gpu_id`.
    pub gpu_id: u32,
}

/// A simulated queue's progress, as the tenant sees it.
///
/// ```no_run
/// # let tenant = kfd_preempt::sim::SimTenant::open()?;
/// let s: kfd_preempt::sim::SimQueueStatus = tenant.status(0)?;
/// assert!(s.retired > 0 || !s.state.is_active());
/// # Ok::<(), kfd_preempt::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SimQueueStatus {
    /// `KFDP_QS_*` bits.
    pub state: QueueState,
    /// Work units retired so far: grows only while the queue is mapped.
    pub retired: u64,
    /// Dispatched, not retired (kept across a preemption).
    pub in_flight: u64,
}

impl AsFd for SimTenant {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.file.as_fd()
    }
}

fn sim_error(operation: &'static str, errno: Errno) -> Error {
    match errno {
        Errno::NOENT if operation == "open /dev/kfd_preempt_sim" => Error::SimNotEnabled,
        Errno::INVAL => Error::InvalidArgument("no such simulated node, queue type or queue id"),
        errno => Error::Os { operation, errno },
    }
}

impl SimTenant {
    /// Opens [`TENANT_PATH`]: this process becomes a simulated KFD process.
    ///
    /// ```no_run
    /// let tenant = kfd_preempt::sim::SimTenant::open()?;
    /// # Ok::<(), kfd_preempt::Error>(())
    /// ```
    pub fn open() -> Result<Self, Error> {
        OpenOptions::new()
            .read(true)
            .write(true)
            .open(TENANT_PATH)
            .map(|file| SimTenant { file })
            .map_err(|e| {
                sim_error(
                    "open /dev/kfd_preempt_sim",
                    Errno::from_io_error(&e).unwrap_or(Errno::IO),
                )
            })
    }

    /// Takes a copy of process `pid`'s tenant descriptor (with
    /// `pidfd_getfd(2)`) to read its queues' progress from outside.
    ///
    /// ```no_run
    /// let tenant = kfd_preempt::sim::SimTenant::of_pid(4242)?;
    /// println!("{}", tenant.status(0)?.retired);
    /// # Ok::<(), kfd_preempt::Error>(())
    /// ```
    pub fn of_pid(pid: i32) -> Result<Self, Error> {
        let lowest = crate::locate::take_kfd_fds(pid)?.into_iter().next();
        match lowest.ok_or(Error::NotAKfdProcess { pid })? {
            (fd, crate::TargetKind::SimFd) => Ok(SimTenant {
                file: File::from(fd),
            }),
            (_, crate::TargetKind::KfdFd) => Err(Error::InvalidArgument(
                "the process is a real KFD process, not a simulated tenant",
            )),
        }
    }

    /// Creates a queue on simulated node `node` (an index, not a gpu_id).
    ///
    /// ```no_run
    /// # let tenant = kfd_preempt::sim::SimTenant::open()?;
    /// let q = tenant.create_queue(1, kfd_preempt::QueueType::ComputeAql, 0)?;
    /// # Ok::<(), kfd_preempt::Error>(())
    /// ```
    pub fn create_queue(
        &self,
        node: u32,
        queue_type: QueueType,
        priority: u32,
    ) -> Result<SimQueue, Error> {
        let mut c = uapi::kfdp_sim_queue_create {
            node,
            queue_type: queue_type.into(),
            priority,
            ..Default::default()
        };
        // SAFETY: SIM_IOC_CREATE_QUEUE reads and writes a
        // `kfdp_sim_queue_create`, which has no user pointers.
        unsafe { ioctl::update::<{ uapi::SIM_IOC_CREATE_QUEUE }, _>(self, &mut c) }
            .map_err(|errno| sim_error("KFDP_SIM_IOC_CREATE_QUEUE", errno))?;
        Ok(SimQueue {
            queue_id: c.queue_id,
            gpu_id: c.gpu_id,
        })
    }

    /// Destroys queue `queue_id`.
    ///
    /// ```no_run
    /// # let tenant = kfd_preempt::sim::SimTenant::open()?;
    /// tenant.destroy_queue(0)?;
    /// # Ok::<(), kfd_preempt::Error>(())
    /// ```
    pub fn destroy_queue(&self, queue_id: u32) -> Result<(), Error> {
        let d = uapi::kfdp_sim_queue_destroy {
            queue_id,
            ..Default::default()
        };
        // SAFETY: SIM_IOC_DESTROY_QUEUE reads a `kfdp_sim_queue_destroy`,
        // which has no user pointers.
        unsafe { ioctl::set::<{ uapi::SIM_IOC_DESTROY_QUEUE }, _>(self, d) }
            .map_err(|errno| sim_error("KFDP_SIM_IOC_DESTROY_QUEUE", errno))
    }

    /// The progress of queue `queue_id`.
    ///
    /// ```no_run
    /// # let tenant = kfd_preempt::sim::SimTenant::open()?;
    /// let s = tenant.status(0)?;
    /// println!("{} units retired, {}", s.retired, s.state);
    /// # Ok::<(), kfd_preempt::Error>(())
    /// ```
    pub fn status(&self, queue_id: u32) -> Result<SimQueueStatus, Error> {
        let mut s = uapi::kfdp_sim_queue_status {
            queue_id,
            ..Default::default()
        };
        // SAFETY: SIM_IOC_QUEUE_STATUS reads and writes a
        // `kfdp_sim_queue_status`, which has no user pointers.
        unsafe { ioctl::update::<{ uapi::SIM_IOC_QUEUE_STATUS }, _>(self, &mut s) }
            .map_err(|errno| sim_error("KFDP_SIM_IOC_QUEUE_STATUS", errno))?;
        Ok(SimQueueStatus {
            state: QueueState(s.state),
            retired: s.retired,
            in_flight: s.in_flight,
        })
    }
}

impl SimTenant {
    /// Creates a ring queue on simulated node `node` (ABI 1.2,
    /// [`Caps::SIM_RING`](crate::Caps::SIM_RING)): maps a ring of `packets`
    /// 64-byte packets (a power of two, 1 to 1024) and a separate page for
    /// its read and write indices, and hands both to the module. The ring
    /// borrows the tenant; dropping it destroys the queue, then unmaps.
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use kfd_preempt::sim::SimTenant;
    ///
    /// let tenant = SimTenant::open()?;
    /// let ring = tenant.create_ring(0, 9, 64)?;
    /// let first = ring.submit(&[(Duration::from_millis(5), 1), (Duration::from_millis(5), 2)])?;
    /// while ring.read_index() < first + 2 {
    ///     std::thread::sleep(Duration::from_micros(200));
    /// }
    /// let t = ring.times(first + 1);
    /// println!("request took {} ns of node time and queueing", t.end_ns - t.submit_ns);
    /// # Ok::<(), kfd_preempt::Error>(())
    /// ```
    pub fn create_ring(
        &self,
        node: u32,
        priority: u32,
        packets: u32,
    ) -> Result<SimRing<'_>, Error> {
        if !packets.is_power_of_two() || packets > MAX_RING_PACKETS {
            return Err(Error::InvalidArgument(
                "a ring holds a power of two of packets, 1 to 1024",
            ));
        }
        let (ring, indices) = map_ring(packets)?;
        let base = indices.ptr.as_ptr() as u64;
        let mut c = uapi::kfdp_sim_ring_create {
            node,
            priority,
            ring_address: ring.ptr.as_ptr() as u64,
            read_index_address: base + READ_INDEX_OFFSET as u64,
            write_index_address: base + WRITE_INDEX_OFFSET as u64,
            ring_packets: packets,
            ..Default::default()
        };
        // SAFETY: SIM_IOC_CREATE_RING reads and writes a
        // `kfdp_sim_ring_create`. Its addresses point into `ring` (`packets`
        // packets) and `indices` (two u64 a cache line apart), mappings of
        // this process that stay mapped until the queue is destroyed: the
        // SimRing built below owns them and destroys the queue before
        // unmapping; if the call fails they are unmapped with no queue.
        unsafe { ioctl::update::<{ uapi::SIM_IOC_CREATE_RING }, _>(self, &mut c) }.map_err(
            |errno| match errno {
                Errno::INVAL => Error::InvalidArgument(
                    "the module rejected the ring: no such simulated node, or a priority above 15",
                ),
                Errno::NOTTY => Error::NotSupported("KFDP_SIM_IOC_CREATE_RING"),
                errno => Error::Os {
                    operation: "KFDP_SIM_IOC_CREATE_RING",
                    errno,
                },
            },
        )?;
        let queue = SimQueue {
            queue_id: c.queue_id,
            gpu_id: c.gpu_id,
        };
        Ok(SimRing::new(self, queue, packets, ring, indices))
    }
}

/// The largest ring the module takes.
const MAX_RING_PACKETS: u32 = 1024;
/// Size of one `kfdp_sim_packet`.
const PACKET_SIZE: usize = std::mem::size_of::<uapi::kfdp_sim_packet>();
/// Where the read index lives in the index page.
const READ_INDEX_OFFSET: usize = 0;
/// Where the write index lives in the index page: its own cache line.
const WRITE_INDEX_OFFSET: usize = 64;

/// Bytes mapped for a ring of `packets` packets: whole pages.
fn ring_bytes(packets: u32, page: usize) -> usize {
    (packets as usize * PACKET_SIZE).next_multiple_of(page)
}

/// Free slots of a ring of `packets` packets with these indices.
fn free_slots(packets: u32, write_index: u64, read_index: u64) -> u32 {
    let used = write_index.saturating_sub(read_index);
    // At most `packets`: fits.
    u64::from(packets).saturating_sub(used) as u32
}

/// The slot packet `index` occupies.
fn slot(packets: u32, index: u64) -> usize {
    // Less than `packets`: fits.
    (index % u64::from(packets)) as usize
}

/// An anonymous, private, page-aligned mapping, unmapped when dropped.
///
/// # Invariants
///
/// `ptr` is the start of a live mapping of `len` bytes made by `new`.
struct Mapping {
    ptr: NonNull<c_void>,
    len: usize,
}

impl Mapping {
    fn new(len: usize) -> Result<Self, Error> {
        // SAFETY: an anonymous mapping at an address the kernel chooses
        // aliases no Rust object.
        let ptr = unsafe {
            mm::mmap_anonymous(
                ptr::null_mut(),
                len,
                ProtFlags::READ | ProtFlags::WRITE,
                MapFlags::PRIVATE,
            )
        }
        .map_err(|errno| Error::Os {
            operation: "mmap of a simulated ring",
            errno,
        })?;
        let ptr = NonNull::new(ptr).ok_or(Error::Os {
            operation: "mmap of a simulated ring",
            errno: Errno::NOMEM,
        })?;
        // INVARIANT: just mapped, `len` bytes.
        Ok(Mapping { ptr, len })
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: by the invariant this is a live mapping of `len` bytes,
        // and nothing refers to it any more: its owner is being dropped.
        let _ = unsafe { mm::munmap(self.ptr.as_ptr(), self.len) };
    }
}

/// The ring and the index page of a ring of `packets` packets, zeroed.
fn map_ring(packets: u32) -> Result<(Mapping, Mapping), Error> {
    let page = rustix::param::page_size();
    Ok((
        Mapping::new(ring_bytes(packets, page))?,
        Mapping::new(page)?,
    ))
}

/// The times the node wrote into a packet of a [`SimRing`].
///
/// ```
/// let t = kfd_preempt::sim::PacketTimes { submit_ns: 100, start_ns: 150, end_ns: 5_150, tag: 7 };
/// assert_eq!(t.end_ns - t.submit_ns, 5_050); // waiting + running
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PacketTimes {
    /// `CLOCK_MONOTONIC` ns when the node saw the packet (doorbell or map).
    pub submit_ns: u64,
    /// When it first ran.
    pub start_ns: u64,
    /// When it retired.
    pub end_ns: u64,
    /// The tenant's tag, as submitted.
    pub tag: u64,
}

/// A ring queue of a simulated tenant ([`SimTenant::create_ring`]): a ring
/// of 64-byte packets and two indices in this process's memory, as a ROCm
/// process owns its AQL ring and `amd_queue_t`. [`submit`](Self::submit)
/// writes dispatches and rings the doorbell; the node executes them and
/// moves the read index as they retire. Dropping the ring destroys the
/// queue, then unmaps its memory.
///
/// It may be shared between threads: submissions are serialised, and every
/// access to the shared memory is atomic.
///
/// # Invariants
///
/// `ring` holds `packets` packets and `indices` the read index at
/// `READ_INDEX_OFFSET` and the write index at `WRITE_INDEX_OFFSET`; the
/// module knows them as queue `queue.queue_id` of `tenant` until `drop`.
/// Only `submit`, holding `submit_lock`, writes the write index and the
/// packets' input fields.
///
/// ```no_run
/// use std::time::Duration;
/// use kfd_preempt::sim::SimTenant;
///
/// let tenant = SimTenant::open()?;
/// let ring = tenant.create_ring(0, 1, 16)?;
/// println!("queue {} on gpu {:#x}, {} slot(s) free", ring.queue().queue_id, ring.queue().gpu_id, ring.space());
/// # Ok::<(), kfd_preempt::Error>(())
/// ```
pub struct SimRing<'t> {
    tenant: &'t SimTenant,
    queue: SimQueue,
    packets: u32,
    submit_lock: Mutex<()>,
    // Dropped after `Drop::drop` destroyed the queue.
    ring: Mapping,
    indices: Mapping,
}

// SAFETY: the mappings are owned by the ring alone and every access to
// them, from any thread, is atomic; writers are serialised by
// `submit_lock`. `&SimTenant` is Send and Sync because `SimTenant` (a File)
// is Sync.
unsafe impl Send for SimRing<'_> {}
// SAFETY: as for Send: `&self` methods touch the shared memory only through
// atomics, and `submit` holds `submit_lock`.
unsafe impl Sync for SimRing<'_> {}

impl<'t> SimRing<'t> {
    fn new(
        tenant: &'t SimTenant,
        queue: SimQueue,
        packets: u32,
        ring: Mapping,
        indices: Mapping,
    ) -> Self {
        // INVARIANT: the callers pass mappings made by `map_ring(packets)`
        // that the module knows as `queue` of `tenant` (or, in unit tests,
        // a tenant that is not the module).
        SimRing {
            tenant,
            queue,
            packets,
            submit_lock: Mutex::new(()),
            ring,
            indices,
        }
    }

    /// The queue, as the tenant and a scheduler name it.
    ///
    /// ```no_run
    /// # let tenant = kfd_preempt::sim::SimTenant::open()?;
    /// let ring = tenant.create_ring(0, 9, 64)?;
    /// let q = ring.queue();
    /// println!("watch queue {} on gpu {:#x}", q.queue_id, q.gpu_id);
    /// # Ok::<(), kfd_preempt::Error>(())
    /// ```
    pub fn queue(&self) -> SimQueue {
        self.queue
    }

    /// Where its ring is mapped: the `ring_base_address` its queue's
    /// QUERY reports.
    pub fn ring_address(&self) -> u64 {
        self.ring.ptr.as_ptr() as u64
    }

    /// How many packets the ring holds.
    ///
    /// ```no_run
    /// # let tenant = kfd_preempt::sim::SimTenant::open()?;
    /// assert_eq!(tenant.create_ring(0, 9, 64)?.packets(), 64);
    /// # Ok::<(), kfd_preempt::Error>(())
    /// ```
    pub fn packets(&self) -> u32 {
        self.packets
    }

    fn index(&self, offset: usize) -> &AtomicU64 {
        // SAFETY: by the invariant `offset` is 0 or 64 within the live,
        // page-aligned index page, so the pointer is 8-byte aligned and
        // valid for as long as `self`; the page is only accessed
        // atomically (by this process; the module's writes are outside
        // Rust's model).
        unsafe { AtomicU64::from_ptr(self.indices.ptr.as_ptr().cast::<u8>().add(offset).cast()) }
    }

    /// The address of byte `offset` of the packet in slot `slot`.
    fn field_ptr(&self, slot: usize, offset: usize) -> *mut u8 {
        assert!(slot < self.packets as usize && offset < PACKET_SIZE);
        // SAFETY: `slot` < `packets` and `offset` < PACKET_SIZE: the result
        // lies inside the live ring of `packets` packets.
        unsafe {
            self.ring
                .ptr
                .as_ptr()
                .cast::<u8>()
                .add(slot * PACKET_SIZE + offset)
        }
    }

    /// The u64 field at `offset` (a multiple of 8) of the packet in slot
    /// `slot`.
    fn field(&self, slot: usize, offset: usize) -> &AtomicU64 {
        debug_assert!(offset % 8 == 0);
        // SAFETY: inside the live ring (`field_ptr`), which lives as long
        // as `self`; 8-byte aligned because the ring is page aligned,
        // packets are 64 bytes and `offset` is a u64 field's; the ring is
        // only accessed atomically (by this process; the module's writes
        // are outside Rust's model).
        unsafe { AtomicU64::from_ptr(self.field_ptr(slot, offset).cast()) }
    }

    /// The u32 field at `offset` (a multiple of 4) of the packet in slot
    /// `slot`.
    fn field32(&self, slot: usize, offset: usize) -> &AtomicU32 {
        debug_assert!(offset % 4 == 0);
        // SAFETY: as for `field`, with 4-byte alignment.
        unsafe { AtomicU32::from_ptr(self.field_ptr(slot, offset).cast()) }
    }

    /// Packets retired so far: the index the node writes (Acquire, so the
    /// times of every packet below it are visible).
    ///
    /// ```no_run
    /// # let tenant = kfd_preempt::sim::SimTenant::open()?;
    /// # let ring = tenant.create_ring(0, 9, 64)?;
    /// let done = ring.read_index();
    /// # Ok::<(), kfd_preempt::Error>(())
    /// ```
    pub fn read_index(&self) -> u64 {
        self.index(READ_INDEX_OFFSET).load(Ordering::Acquire)
    }

    /// Packets published so far.
    ///
    /// ```no_run
    /// # let tenant = kfd_preempt::sim::SimTenant::open()?;
    /// # let ring = tenant.create_ring(0, 9, 64)?;
    /// let outstanding = ring.write_index() - ring.read_index();
    /// # Ok::<(), kfd_preempt::Error>(())
    /// ```
    pub fn write_index(&self) -> u64 {
        self.index(WRITE_INDEX_OFFSET).load(Ordering::Acquire)
    }

    /// Free packet slots.
    ///
    /// ```no_run
    /// # let tenant = kfd_preempt::sim::SimTenant::open()?;
    /// let ring = tenant.create_ring(0, 9, 64)?;
    /// assert_eq!(ring.space(), 64);
    /// # Ok::<(), kfd_preempt::Error>(())
    /// ```
    pub fn space(&self) -> u32 {
        free_slots(self.packets, self.write_index(), self.read_index())
    }

    /// Writes one DISPATCH packet per element of `work` (node time needed,
    /// tag), publishes the write index (Release), then rings the doorbell
    /// (`KFDP_SIM_IOC_DOORBELL`). Returns the index of the first packet
    /// written; packet `first + i` carries `work[i]`. Fails, writing
    /// nothing, if fewer than `work.len()` slots are free or a work time
    /// exceeds `u64` nanoseconds. If the doorbell fails the packets stay
    /// published: the node sees them at the next doorbell or map.
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// # let tenant = kfd_preempt::sim::SimTenant::open()?;
    /// # let ring = tenant.create_ring(0, 9, 64)?;
    /// // One request of three 5 ms kernels, tagged with the request number.
    /// let first = ring.submit(&[(Duration::from_millis(5), 42); 3])?;
    /// # Ok::<(), kfd_preempt::Error>(())
    /// ```
    pub fn submit(&self, work: &[(Duration, u64)]) -> Result<u64, Error> {
        if work
            .iter()
            .any(|(d, _)| d.as_nanos() > u128::from(u64::MAX))
        {
            return Err(Error::InvalidArgument(
                "a dispatch's work must fit in u64 nanoseconds",
            ));
        }
        let _guard = self
            .submit_lock
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let first = self.write_index();
        if work.len() > free_slots(self.packets, first, self.read_index()) as usize {
            return Err(Error::Os {
                operation:
                    "submit to a simulated ring (not enough free slots; wait for the read index)",
                errno: Errno::AGAIN,
            });
        }
        if work.is_empty() {
            return Ok(first);
        }
        for (index, (work, tag)) in (first..).zip(work) {
            let s = slot(self.packets, index);
            let u64_fields = [
                (
                    offset_of!(uapi::kfdp_sim_packet, work_ns),
                    work.as_nanos() as u64,
                ),
                (offset_of!(uapi::kfdp_sim_packet, tag), *tag),
                (offset_of!(uapi::kfdp_sim_packet, submit_ns), 0),
                (offset_of!(uapi::kfdp_sim_packet, start_ns), 0),
                (offset_of!(uapi::kfdp_sim_packet, end_ns), 0),
                (offset_of!(uapi::kfdp_sim_packet, reserved1), 0),
                (offset_of!(uapi::kfdp_sim_packet, reserved1) + 8, 0),
            ];
            for (offset, value) in u64_fields {
                self.field(s, offset).store(value, Ordering::Relaxed);
            }
            self.field32(s, offset_of!(uapi::kfdp_sim_packet, reserved0))
                .store(0, Ordering::Relaxed);
            self.field32(s, offset_of!(uapi::kfdp_sim_packet, header))
                .store(uapi::KFDP_SIM_PKT_DISPATCH, Ordering::Relaxed);
        }
        self.index(WRITE_INDEX_OFFSET)
            .store(first + work.len() as u64, Ordering::Release);
        self.doorbell()?;
        Ok(first)
    }

    fn doorbell(&self) -> Result<(), Error> {
        let d = uapi::kfdp_sim_doorbell {
            queue_id: self.queue.queue_id,
            ..Default::default()
        };
        // SAFETY: SIM_IOC_DOORBELL reads a `kfdp_sim_doorbell`, which has
        // no user pointers.
        unsafe { ioctl::set::<{ uapi::SIM_IOC_DOORBELL }, _>(self.tenant, d) }.map_err(|errno| {
            match errno {
                Errno::NOTTY => Error::NotSupported("KFDP_SIM_IOC_DOORBELL"),
                errno => sim_error("KFDP_SIM_IOC_DOORBELL", errno),
            }
        })
    }

    /// The times the node wrote into packet `index`: final once
    /// `index < read_index()`, and valid until `packets()` further packets
    /// are submitted (the slot is then reused).
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// # let tenant = kfd_preempt::sim::SimTenant::open()?;
    /// # let ring = tenant.create_ring(0, 9, 64)?;
    /// let i = ring.submit(&[(Duration::from_millis(1), 7)])?;
    /// while ring.read_index() <= i {
    ///     std::thread::sleep(Duration::from_micros(200));
    /// }
    /// let t = ring.times(i);
    /// assert_eq!(t.tag, 7);
    /// println!("waited {} ns, ran {} ns", t.start_ns - t.submit_ns, t.end_ns - t.start_ns);
    /// # Ok::<(), kfd_preempt::Error>(())
    /// ```
    pub fn times(&self, index: u64) -> PacketTimes {
        let s = slot(self.packets, index);
        let get = |offset| self.field(s, offset).load(Ordering::Acquire);
        PacketTimes {
            submit_ns: get(offset_of!(uapi::kfdp_sim_packet, submit_ns)),
            start_ns: get(offset_of!(uapi::kfdp_sim_packet, start_ns)),
            end_ns: get(offset_of!(uapi::kfdp_sim_packet, end_ns)),
            tag: get(offset_of!(uapi::kfdp_sim_packet, tag)),
        }
    }
}

impl fmt::Debug for SimRing<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SimRing")
            .field("queue", &self.queue)
            .field("packets", &self.packets)
            .field("read_index", &self.read_index())
            .field("write_index", &self.write_index())
            .finish()
    }
}

impl Drop for SimRing<'_> {
    fn drop(&mut self) {
        // The module unpins the ring and indices when the queue goes; the
        // mappings are unmapped after this, when the fields drop. An error
        // (the tenant is already gone) leaves nothing to undo.
        let _ = self.tenant.destroy_queue(self.queue.queue_id);
    }
}

/// The debugfs knobs and counters of simulated node `node` (root only).
///
/// ```no_run
/// use kfd_preempt::sim::SimNode;
///
/// let node = SimNode::new(0);
/// node.set("cycle_ns", 100_000)?; // a modelled 100 us per HWS cycle
/// let before = node.get("runlist_updates")?;
/// # Ok::<(), kfd_preempt::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimNode {
    dir: PathBuf,
}

impl SimNode {
    /// Node `node`'s directory under [`DEBUGFS_DIR`].
    ///
    /// ```no_run
    /// let updates = kfd_preempt::sim::SimNode::new(1).get("runlist_updates")?;
    /// # Ok::<(), kfd_preempt::Error>(())
    /// ```
    pub fn new(node: u32) -> Self {
        SimNode {
            dir: Path::new(DEBUGFS_DIR).join(format!("node{node}")),
        }
    }

    fn io_error(e: &std::io::Error) -> Error {
        match Errno::from_io_error(e).unwrap_or(Errno::IO) {
            Errno::NOENT => Error::SimNotEnabled,
            errno => Error::Os {
                operation: "simulated node debugfs (mounted? root?)",
                errno,
            },
        }
    }

    /// Reads the knob or counter `name`.
    ///
    /// ```no_run
    /// let resets = kfd_preempt::sim::SimNode::new(0).get("resets")?;
    /// # Ok::<(), kfd_preempt::Error>(())
    /// ```
    pub fn get(&self, name: &str) -> Result<u64, Error> {
        let text = std::fs::read_to_string(self.dir.join(name)).map_err(|e| Self::io_error(&e))?;
        text.trim()
            .parse()
            .map_err(|_| Error::InvalidArgument("a simulated node's knob did not read as a number"))
    }

    /// Writes the knob `name`.
    ///
    /// ```no_run
    /// kfd_preempt::sim::SimNode::new(1).set("mes_call_ns", 30_000)?;
    /// # Ok::<(), kfd_preempt::Error>(())
    /// ```
    pub fn set(&self, name: &str, value: u64) -> Result<(), Error> {
        std::fs::write(self.dir.join(name), value.to_string()).map_err(|e| Self::io_error(&e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_paths() {
        assert_eq!(
            SimNode::new(3).dir,
            Path::new("/sys/kernel/debug/kfd_preempt/sim/node3")
        );
    }

    #[test]
    fn ring_layout_and_index_arithmetic() {
        assert_eq!(PACKET_SIZE, 64);
        assert_eq!(ring_bytes(1, 4096), 4096);
        assert_eq!(ring_bytes(64, 4096), 4096);
        assert_eq!(ring_bytes(128, 4096), 8192);
        assert_eq!(ring_bytes(1024, 4096), 65536);
        assert_eq!(ring_bytes(1024, 65536), 65536);
        assert_eq!(free_slots(16, 0, 0), 16);
        assert_eq!(free_slots(16, 20, 5), 1);
        assert_eq!(free_slots(16, 21, 5), 0);
        // A read index ahead of the write index (never, from a sane node)
        // is no space taken, not an underflow.
        assert_eq!(free_slots(16, 3, 7), 16);
        assert_eq!(slot(16, 0), 0);
        assert_eq!(slot(16, 17), 1);
        assert_eq!(slot(1, u64::MAX), 0);
        const { assert!(WRITE_INDEX_OFFSET - READ_INDEX_OFFSET >= 64) };
    }

    #[test]
    fn bad_ring_sizes_are_refused_before_the_kernel() {
        let tenant = null_tenant();
        for packets in [0, 3, 2048] {
            assert!(matches!(
                tenant.create_ring(0, 9, packets),
                Err(Error::InvalidArgument(_))
            ));
        }
        // A good size reaches the ioctl: /dev/null answers ENOTTY.
        assert_eq!(
            tenant.create_ring(0, 9, 8).unwrap_err(),
            Error::NotSupported("KFDP_SIM_IOC_CREATE_RING")
        );
    }

    /// A tenant whose ioctls all fail with ENOTTY.
    fn null_tenant() -> SimTenant {
        SimTenant {
            file: File::options()
                .read(true)
                .write(true)
                .open("/dev/null")
                .unwrap(),
        }
    }

    /// A ring the module does not know, over `tenant`.
    fn fake_ring(tenant: &SimTenant, packets: u32) -> SimRing<'_> {
        let (ring, indices) = map_ring(packets).unwrap();
        let queue = SimQueue {
            queue_id: 5,
            gpu_id: 0x5100,
        };
        SimRing::new(tenant, queue, packets, ring, indices)
    }

    /// Plays the node: retires packets up to `upto`, stamping their times.
    fn retire(ring: &SimRing<'_>, upto: u64) {
        for i in ring.read_index()..upto {
            let s = slot(ring.packets, i);
            ring.field(s, offset_of!(uapi::kfdp_sim_packet, submit_ns))
                .store(1000 * i, Ordering::Relaxed);
            ring.field(s, offset_of!(uapi::kfdp_sim_packet, start_ns))
                .store(1000 * i + 10, Ordering::Relaxed);
            ring.field(s, offset_of!(uapi::kfdp_sim_packet, end_ns))
                .store(1000 * i + 500, Ordering::Relaxed);
        }
        ring.index(READ_INDEX_OFFSET).store(upto, Ordering::Release);
    }

    #[test]
    fn submit_writes_packets_and_publishes_the_write_index() {
        let tenant = null_tenant();
        let ring = fake_ring(&tenant, 4);
        assert_eq!(
            (ring.space(), ring.read_index(), ring.write_index()),
            (4, 0, 0)
        );
        let work = [
            (Duration::from_millis(5), 11),
            (Duration::from_micros(7), 12),
            (Duration::from_nanos(3), 13),
        ];
        // The doorbell reaches /dev/null (ENOTTY) after the packets are
        // published.
        assert_eq!(
            ring.submit(&work),
            Err(Error::NotSupported("KFDP_SIM_IOC_DOORBELL"))
        );
        assert_eq!((ring.write_index(), ring.space()), (3, 1));
        for (i, (d, tag)) in work.iter().enumerate() {
            let packet = ring.field_ptr(i, 0).cast::<uapi::kfdp_sim_packet>();
            // SAFETY: slot i < 4 of the live ring; no other thread.
            let p = unsafe { packet.read() };
            assert_eq!(p.header, uapi::KFDP_SIM_PKT_DISPATCH);
            assert_eq!((p.work_ns, p.tag), (d.as_nanos() as u64, *tag));
            assert_eq!(
                (p.submit_ns, p.start_ns, p.end_ns, p.reserved0),
                (0, 0, 0, 0)
            );
        }
        // Two more do not fit: nothing is written.
        assert!(matches!(
            ring.submit(&work[..2]),
            Err(Error::Os {
                errno: Errno::AGAIN,
                ..
            })
        ));
        assert_eq!(ring.write_index(), 3);
        // The node retires two; their times are visible; the ring wraps.
        retire(&ring, 2);
        assert_eq!(ring.space(), 3);
        assert_eq!(
            ring.times(1),
            PacketTimes {
                submit_ns: 1000,
                start_ns: 1010,
                end_ns: 1500,
                tag: 12
            }
        );
        assert!(ring.submit(&work).is_err());
        assert_eq!(ring.write_index(), 6);
        // Packet 5 went to slot 1, its old times cleared.
        assert_eq!(
            ring.times(5),
            PacketTimes {
                tag: 13,
                ..Default::default()
            }
        );
        // Nothing to submit: no doorbell, no error.
        assert_eq!(ring.submit(&[]), Ok(6));
        assert!(matches!(
            ring.submit(&[(Duration::MAX, 0)]),
            Err(Error::InvalidArgument(_))
        ));
        assert!(format!("{ring:?}").contains("write_index: 6"));
    }

    #[test]
    fn a_ring_is_shared_between_threads() {
        fn is_sync_send<T: Sync + Send>() {}
        is_sync_send::<SimRing<'static>>();
        let tenant = null_tenant();
        let ring = fake_ring(&tenant, 64);
        std::thread::scope(|s| {
            for t in 0..4 {
                let ring = &ring;
                s.spawn(move || {
                    for _ in 0..8 {
                        let _ = ring.submit(&[(Duration::from_nanos(1), t)]);
                    }
                });
            }
        });
        assert_eq!(ring.write_index(), 32);
    }

    #[test]
    fn missing_sim_says_how_to_enable_it() {
        // No machine running the unit tests has the module loaded with
        // simulated nodes on node 7 of a fake debugfs path.
        let node = SimNode {
            dir: PathBuf::from("/nonexistent/node7"),
        };
        assert_eq!(node.get("cycle_ns"), Err(Error::SimNotEnabled));
        assert!(Error::SimNotEnabled.to_string().contains("sim_nodes"));
    }
}
