// SPDX-License-Identifier: GPL-2.0 OR MIT
//! `Device` (one open of `/dev/kfd_preempt`, an owner) and `Target` (an
//! attached process).
//!
//! The crate's `Target` borrows its `Device`, which a Python object cannot:
//! here a `Target` keeps its `Device` object alive and names the attachment
//! by handle. `Device.close()` closes the descriptor at once (the kernel
//! then undoes everything this owner did, as when a scheduler dies); a
//! `Target` of a closed device raises `EBADF`.

use std::{
    collections::HashMap,
    os::fd::{BorrowedFd, RawFd},
    sync::{
        atomic::{AtomicBool, Ordering},
        Mutex, RwLock,
    },
    time::Duration,
};

use kfd_preempt::{ArmCondition, BatchOptions, Handle, TargetKind};
use pyo3::prelude::*;
use rustix::io::Errno;

use crate::{
    error::{invalid, raise, KfdPreemptError},
    types::{seconds, BatchReport, Info, QueueInfo, QueueRef, Sample},
};

/// An open ``/dev/kfd_preempt``: one owner. Every preemption, freeze and
/// attachment made through it is undone by the kernel when it is closed
/// (``close()``, the end of a ``with`` block, or garbage collection).
/// Opening needs ``CAP_SYS_NICE``.
#[pyclass(frozen, module = "kfd_preempt")]
pub struct Device {
    /// `None` once closed.
    inner: RwLock<Option<kfd_preempt::Device>>,
    /// How many live `Target`s name each attachment handle: the module
    /// gives one process attached twice the same handle, and DETACH undoes
    /// everything done to it, so only the last `Target` of a handle
    /// detaches.
    targets: Mutex<HashMap<u32, usize>>,
}

impl Device {
    /// Runs `f` on the open device, or raises `EBADF` if it was closed.
    fn with<T>(
        &self,
        f: impl FnOnce(&kfd_preempt::Device) -> Result<T, kfd_preempt::Error>,
    ) -> PyResult<T> {
        // A poisoned lock only means another thread panicked while holding
        // it; the descriptor inside is still valid.
        let guard = self.inner.read().unwrap_or_else(|e| e.into_inner());
        match guard.as_ref() {
            Some(dev) => f(dev).map_err(|e| raise(&e)),
            None => Err(closed()),
        }
    }

    /// The same, without the GIL: for calls that wait on the hardware.
    fn without_gil<T: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&kfd_preempt::Device) -> Result<T, kfd_preempt::Error> + Send,
    ) -> PyResult<T> {
        py.detach(|| {
            let guard = self.inner.read().unwrap_or_else(|e| e.into_inner());
            match guard.as_ref() {
                Some(dev) => Ok(f(dev)),
                None => Err(()),
            }
        })
        .map_err(|()| closed())?
        .map_err(|e| raise(&e))
    }
}

impl Device {
    /// One more `Target` names `handle`.
    fn hold(&self, handle: Handle) {
        let mut targets = self.targets.lock().unwrap_or_else(|e| e.into_inner());
        *targets.entry(handle.0).or_insert(0) += 1;
    }

    /// One `Target` of `handle` is released: the last one detaches.
    fn release(&self, handle: Handle) -> PyResult<()> {
        let last = {
            let mut targets = self.targets.lock().unwrap_or_else(|e| e.into_inner());
            match targets.get_mut(&handle.0) {
                Some(n) if *n > 1 => {
                    *n -= 1;
                    false
                }
                _ => {
                    targets.remove(&handle.0);
                    true
                }
            }
        };
        if last {
            self.with(|d| d.detach(handle))
        } else {
            Ok(())
        }
    }
}

fn closed() -> PyErr {
    KfdPreemptError::new_err((Errno::BADF.raw_os_error(), "the device was closed"))
}

fn refs(queues: Vec<QueueRef>) -> Vec<kfd_preempt::QueueRef> {
    queues.into_iter().map(Into::into).collect()
}

#[pymethods]
impl Device {
    /// Opens the device (``/dev/kfd_preempt`` unless ``path`` names another node of it).
    #[new]
    #[pyo3(signature = (path = None))]
    fn new(path: Option<std::path::PathBuf>) -> PyResult<Self> {
        let dev = match path {
            Some(p) => kfd_preempt::Device::open_path(p),
            None => kfd_preempt::Device::open(),
        }
        .map_err(|e| raise(&e))?;
        Ok(Device {
            inner: RwLock::new(Some(dev)),
            targets: Mutex::new(HashMap::new()),
        })
    }

    /// What the module implements; raises if it speaks another major ABI.
    fn info(&self) -> PyResult<Info> {
        self.with(|d| d.info()).map(Into::into)
    }

    /// Attaches process ``pid`` (its ``/dev/kfd``, taken with
    /// ``pidfd_getfd(2)``, or by pid where the module allows it).
    fn attach(slf: &Bound<'_, Self>, pid: i32) -> PyResult<Target> {
        let dev = slf.get();
        let (handle, tgid, num_gpus) = dev.with(|d| {
            let t = d.attach(pid)?;
            let facts = (t.tgid(), t.num_gpus());
            Ok((t.into_handle(), facts.0, facts.1))
        })?;
        Ok(Target::new(slf, handle, tgid, num_gpus))
    }

    /// Attaches the KFD descriptor ``fd`` (``kind``: ``"kfd"`` for a
    /// ``/dev/kfd``, ``"sim"`` for a simulated tenant's descriptor). The
    /// descriptor is only read during the call.
    #[pyo3(signature = (fd, kind = "kfd"))]
    fn attach_fd(slf: &Bound<'_, Self>, fd: RawFd, kind: &str) -> PyResult<Target> {
        let kind = match kind {
            "kfd" => TargetKind::KfdFd,
            "sim" => TargetKind::SimFd,
            _ => return Err(invalid("kind must be 'kfd' or 'sim'")),
        };
        if fd < 0 {
            return Err(invalid("a file descriptor is not negative"));
        }
        let dev = slf.get();
        let (handle, tgid, num_gpus) = dev.with(|d| {
            // SAFETY: the crate hands only its number (`as_raw_fd`) to the
            // ATTACH ioctl during this call; the kernel looks it up itself,
            // and one that is not open is its EBADF. Nothing here reads,
            // keeps or closes it.
            let fd = unsafe { BorrowedFd::borrow_raw(fd) };
            let t = d.attach_fd(fd, kind)?;
            let facts = (t.tgid(), t.num_gpus());
            Ok((t.into_handle(), facts.0, facts.1))
        })?;
        Ok(Target::new(slf, handle, tgid, num_gpus))
    }

    /// Takes ``queues`` off their nodes, one runlist update per node.
    /// ``lease``: seconds after which the module puts them back itself,
    /// even if this process stalls (whole milliseconds, at most a day).
    #[pyo3(signature = (queues, *, lease = None, validate_only = false, all_or_nothing = false))]
    fn preempt(
        &self,
        py: Python<'_>,
        queues: Vec<QueueRef>,
        lease: Option<f64>,
        validate_only: bool,
        all_or_nothing: bool,
    ) -> PyResult<BatchReport> {
        let lease = lease.map(|s| seconds(s, "lease")).transpose()?;
        let opts = BatchOptions {
            lease,
            validate_only,
            all_or_nothing,
        };
        let queues = refs(queues);
        self.without_gil(py, |d| d.preempt(&queues, &opts))
            .map(Into::into)
    }

    /// Puts ``queues`` back on their nodes.
    fn resume(&self, py: Python<'_>, queues: Vec<QueueRef>) -> PyResult<BatchReport> {
        let queues = refs(queues);
        self.without_gil(py, |d| d.resume(&queues)).map(Into::into)
    }

    /// Adds ``queues`` to this owner's watched set (ABI 1.2).
    fn watch(&self, queues: Vec<QueueRef>) -> PyResult<BatchReport> {
        self.with(|d| d.watch(&refs(queues))).map(Into::into)
    }

    /// Removes ``queues`` from the watched set.
    fn unwatch(&self, queues: Vec<QueueRef>) -> PyResult<BatchReport> {
        self.with(|d| d.unwatch(&refs(queues))).map(Into::into)
    }

    /// The watched queues' activity now.
    fn sample(&self) -> PyResult<Sample> {
        self.with(|d| d.sample()).map(Into::into)
    }

    /// Has the module signal ``eventfd`` (e.g. from ``os.eventfd(0)``)
    /// when ``condition`` holds, checking every ``period`` seconds:
    /// ``"any-busy"`` (some watched queue has work) or ``"all-idle"`` (none
    /// has had any for ``idle`` seconds).
    #[pyo3(signature = (condition, period, eventfd, *, idle = 0.0))]
    fn arm(&self, condition: &str, period: f64, eventfd: RawFd, idle: f64) -> PyResult<()> {
        let cond = match condition {
            "any-busy" => ArmCondition::AnyBusy,
            "all-idle" => ArmCondition::AllIdle {
                idle: seconds(idle, "idle")?,
            },
            _ => return Err(invalid("condition must be 'any-busy' or 'all-idle'")),
        };
        let period = seconds(period, "period")?;
        if eventfd < 0 {
            return Err(invalid("an eventfd is not negative"));
        }
        self.with(|d| {
            // SAFETY: as in attach_fd: the crate hands only the number to
            // the ARM ioctl, which looks the descriptor up itself (EBADF if
            // it is not open) and keeps its own reference; nothing here
            // reads, keeps or closes it.
            let efd = unsafe { BorrowedFd::borrow_raw(eventfd) };
            d.arm(cond, period, efd)
        })
    }

    /// Cancels an ``arm``.
    fn disarm(&self) -> PyResult<()> {
        self.with(|d| d.disarm())
    }

    /// Closes the device: the kernel resumes, thaws and detaches everything
    /// this owner holds. Closing twice is allowed.
    fn close(&self, py: Python<'_>) {
        // Without the GIL: a thread in preempt or resume holds the lock
        // for as long as the module takes.
        py.detach(|| {
            let dev = self.inner.write().unwrap_or_else(|e| e.into_inner()).take();
            drop(dev);
        });
    }

    /// Whether ``close()`` was called.
    #[getter]
    fn closed(&self) -> bool {
        self.inner
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .is_none()
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (*_args))]
    fn __exit__(&self, py: Python<'_>, _args: &Bound<'_, pyo3::types::PyTuple>) -> bool {
        self.close(py);
        false
    }
}

/// A process attached to a :class:`Device`. It stays attached until its
/// device's close, or until ``detach()`` or garbage collection releases
/// it. Attaching one process twice through one device gives two targets
/// of the same ``handle``; the process is detached (and what this owner
/// did to it undone) when the last of them is released.
#[pyclass(frozen, module = "kfd_preempt")]
pub struct Target {
    device: Py<Device>,
    /// The attachment handle.
    #[pyo3(get)]
    handle: u32,
    /// The attached process's thread-group id.
    #[pyo3(get)]
    tgid: i32,
    /// How many GPU nodes it uses.
    #[pyo3(get)]
    num_gpus: u32,
    detached: AtomicBool,
}

impl Target {
    fn new(device: &Bound<'_, Device>, handle: Handle, tgid: i32, num_gpus: u32) -> Self {
        device.get().hold(handle);
        Target {
            device: device.clone().unbind(),
            handle: handle.0,
            tgid,
            num_gpus,
            detached: AtomicBool::new(false),
        }
    }

    fn live(&self) -> PyResult<Handle> {
        if self.detached.load(Ordering::Acquire) {
            Err(KfdPreemptError::new_err((
                Errno::INVAL.raw_os_error(),
                "the target was detached",
            )))
        } else {
            Ok(Handle(self.handle))
        }
    }
}

#[pymethods]
impl Target {
    /// The process's queues, on every node or on ``gpu_id`` only.
    #[pyo3(signature = (gpu_id = None))]
    fn query(&self, gpu_id: Option<u32>) -> PyResult<Vec<QueueInfo>> {
        let handle = self.live()?;
        self.device
            .get()
            .with(|d| d.query(handle, gpu_id))
            .map(|qs| qs.iter().map(Into::into).collect())
    }

    /// The :class:`QueueRef` of queue ``queue_id`` on ``gpu_id``.
    fn queue(&self, gpu_id: u32, queue_id: u32) -> QueueRef {
        QueueRef {
            handle: self.handle,
            gpu_id,
            queue_id,
        }
    }

    /// Takes all the process's queues off (every node, or ``gpu_id``);
    /// returns the hardware's time in seconds.
    #[pyo3(signature = (gpu_id = None))]
    fn freeze(&self, py: Python<'_>, gpu_id: Option<u32>) -> PyResult<f64> {
        let handle = self.live()?;
        self.device
            .get()
            .without_gil(py, |d| d.freeze(handle, gpu_id, false))
            .map(|t: Duration| t.as_secs_f64())
    }

    /// Undoes ``freeze``; returns the hardware's time in seconds.
    #[pyo3(signature = (gpu_id = None))]
    fn thaw(&self, py: Python<'_>, gpu_id: Option<u32>) -> PyResult<f64> {
        let handle = self.live()?;
        self.device
            .get()
            .without_gil(py, |d| d.freeze(handle, gpu_id, true))
            .map(|t: Duration| t.as_secs_f64())
    }

    /// Releases this target; the last of a process's targets detaches it
    /// (the kernel resumes and thaws what this owner held of it).
    fn detach(&self) -> PyResult<()> {
        let handle = self.live()?;
        if self.detached.swap(true, Ordering::AcqRel) {
            // Another thread released it meanwhile.
            return self.live().map(drop);
        }
        self.device.get().release(handle)
    }

    fn __repr__(&self) -> String {
        format!(
            "Target(handle={}, tgid={}, num_gpus={})",
            self.handle, self.tgid, self.num_gpus
        )
    }
}

impl Drop for Target {
    fn drop(&mut self) {
        if !self.detached.swap(true, Ordering::AcqRel) {
            // Nothing to tell: a closed device or a process gone has
            // detached it already.
            let _ = self.device.get().release(Handle(self.handle));
        }
    }
}

/// Every process with a KFD device open, as ``(pid, kind)`` pairs (``kind``
/// ``"kfd"`` or ``"sim"``).
#[pyfunction]
pub fn kfd_processes() -> PyResult<Vec<(i32, &'static str)>> {
    kfd_preempt::kfd_processes()
        .map(|ps| {
            ps.into_iter()
                .map(|(pid, kind)| {
                    (
                        pid,
                        match kind {
                            TargetKind::KfdFd => "kfd",
                            TargetKind::SimFd => "sim",
                        },
                    )
                })
                .collect()
        })
        .map_err(|e| raise(&e))
}
