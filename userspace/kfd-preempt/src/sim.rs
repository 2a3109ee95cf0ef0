//! Tenants and knobs of the module's simulated nodes (`sim_nodes=N`), for
//! tests, demos and benchmarks on machines without an AMD GPU. See the
//! module's `Documentation/simulated-node.rst`.

use std::{
    fs::{File, OpenOptions},
    os::fd::{AsFd, BorrowedFd},
    path::{Path, PathBuf},
};

use rustix::io::Errno;

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
        match crate::locate::take_kfd_fd(pid)? {
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
