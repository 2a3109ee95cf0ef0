//! What the daemon needs of the module: [`ModuleFile`] in production, a
//! fake in tests.

use std::{os::fd::BorrowedFd, path::PathBuf, time::Duration};

use kfd_preempt::{
    ArmCondition, BatchOptions, BatchReport, Device, Handle, QueueInfo, QueueRef, Sample,
    TargetKind,
};

/// One open file of `/dev/kfd_preempt`: an owner in the module's terms.
/// Attachments are bare handles, detached explicitly when a tenant leaves;
/// closing the file (dropping it) undoes the rest.
///
/// The daemon's main file attaches every tenant and issues every PREEMPT
/// and RESUME; each decision that watches queues has a file of its own
/// ([`Backend::open_watcher`]), because the module arms one condition per
/// file, over every queue that file watches.
pub trait Backend: Sized {
    /// Another file of the same device, for one decision's watches.
    fn open_watcher(&self) -> Result<Self, kfd_preempt::Error>;
    /// The processes with a KFD device open ([`kfd_preempt::kfd_processes`]).
    fn processes(&self) -> Result<Vec<(i32, TargetKind)>, kfd_preempt::Error>;
    /// Attaches `pid` ([`kfd_preempt::Device::attach`]).
    fn attach(&self, pid: i32) -> Result<Attached, kfd_preempt::Error>;
    /// Detaches (resuming whatever this owner held of it).
    fn detach(&self, handle: Handle) -> Result<(), kfd_preempt::Error>;
    /// Lists the target's queues on every node.
    fn query(&self, handle: Handle) -> Result<Vec<QueueInfo>, kfd_preempt::Error>;
    /// PREEMPT with a lease.
    fn preempt(
        &self,
        queues: &[QueueRef],
        lease: Duration,
    ) -> Result<BatchReport, kfd_preempt::Error>;
    /// RESUME.
    fn resume(&self, queues: &[QueueRef]) -> Result<BatchReport, kfd_preempt::Error>;
    /// WATCH.
    fn watch(&self, queues: &[QueueRef]) -> Result<BatchReport, kfd_preempt::Error>;
    /// UNWATCH.
    fn unwatch(&self, queues: &[QueueRef]) -> Result<BatchReport, kfd_preempt::Error>;
    /// SAMPLE.
    fn sample(&self) -> Result<Sample, kfd_preempt::Error>;
    /// ARM.
    fn arm(
        &self,
        cond: ArmCondition,
        period: Duration,
        eventfd: BorrowedFd<'_>,
    ) -> Result<(), kfd_preempt::Error>;
    /// ARM off.
    fn disarm(&self) -> Result<(), kfd_preempt::Error>;
}

/// What an ATTACH of a pid gave.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Attached {
    /// The attachment; shared with an earlier ATTACH of the same KFD
    /// process through this file.
    pub handle: Handle,
    /// The target's GPU nodes.
    pub gpus: u32,
    /// The KFD process attached, by its tgid: another than the pid when
    /// the pid holds only a descriptor it inherited (a forked child).
    pub tgid: i32,
}

/// The device opened at a path, which watcher files open again.
pub struct ModuleFile {
    dev: Device,
    path: PathBuf,
}

impl ModuleFile {
    /// Opens the device at `path`.
    pub fn open(path: PathBuf) -> Result<Self, kfd_preempt::Error> {
        Ok(ModuleFile {
            dev: Device::open_path(&path)?,
            path,
        })
    }

    /// The open device.
    pub fn device(&self) -> &Device {
        &self.dev
    }
}

impl Backend for ModuleFile {
    fn open_watcher(&self) -> Result<Self, kfd_preempt::Error> {
        ModuleFile::open(self.path.clone())
    }
    fn processes(&self) -> Result<Vec<(i32, TargetKind)>, kfd_preempt::Error> {
        kfd_preempt::kfd_processes()
    }
    fn attach(&self, pid: i32) -> Result<Attached, kfd_preempt::Error> {
        let t = self.dev.attach(pid)?;
        let (gpus, tgid) = (t.num_gpus(), t.tgid());
        Ok(Attached {
            handle: t.into_handle(),
            gpus,
            tgid,
        })
    }
    fn detach(&self, handle: Handle) -> Result<(), kfd_preempt::Error> {
        self.dev.detach(handle)
    }
    fn query(&self, handle: Handle) -> Result<Vec<QueueInfo>, kfd_preempt::Error> {
        self.dev.query(handle, None)
    }
    fn preempt(
        &self,
        queues: &[QueueRef],
        lease: Duration,
    ) -> Result<BatchReport, kfd_preempt::Error> {
        let opts = BatchOptions {
            lease: Some(lease),
            ..Default::default()
        };
        self.dev.preempt(queues, &opts)
    }
    fn resume(&self, queues: &[QueueRef]) -> Result<BatchReport, kfd_preempt::Error> {
        self.dev.resume(queues)
    }
    fn watch(&self, queues: &[QueueRef]) -> Result<BatchReport, kfd_preempt::Error> {
        self.dev.watch(queues)
    }
    fn unwatch(&self, queues: &[QueueRef]) -> Result<BatchReport, kfd_preempt::Error> {
        self.dev.unwatch(queues)
    }
    fn sample(&self) -> Result<Sample, kfd_preempt::Error> {
        self.dev.sample()
    }
    fn arm(
        &self,
        cond: ArmCondition,
        period: Duration,
        eventfd: BorrowedFd<'_>,
    ) -> Result<(), kfd_preempt::Error> {
        self.dev.arm(cond, period, eventfd)
    }
    fn disarm(&self) -> Result<(), kfd_preempt::Error> {
        self.dev.disarm()
    }
}
