// SPDX-License-Identifier: GPL-2.0 OR MIT
//! A tenant of the module's simulated nodes (`/dev/kfd_preempt_sim`): a
//! process that has queues without a GPU, for testing a scheduler.

use std::{
    os::fd::{AsFd, AsRawFd, RawFd},
    sync::RwLock,
};

use kfd_preempt::QueueType;
use pyo3::prelude::*;

use crate::error::{invalid, raise, KfdPreemptError};

/// This process as a tenant of the simulated nodes: it opens
/// ``/dev/kfd_preempt_sim`` (the module loaded with ``sim_nodes=N``).
/// Attach it with ``Device.attach_fd(tenant.fileno(), "sim")`` (or
/// ``Device.attach(os.getpid())``, which takes this process's lowest such
/// descriptor). ``close()`` (or the end of a ``with`` block) closes its
/// descriptor: the tenant and its queues end when the file is released.
#[pyclass(frozen, module = "kfd_preempt")]
pub struct SimTenant {
    /// `None` once closed.
    inner: RwLock<Option<kfd_preempt::sim::SimTenant>>,
}

impl SimTenant {
    fn with<T>(
        &self,
        f: impl FnOnce(&kfd_preempt::sim::SimTenant) -> Result<T, kfd_preempt::Error>,
    ) -> PyResult<T> {
        let guard = self.inner.read().unwrap_or_else(|e| e.into_inner());
        match guard.as_ref() {
            Some(t) => f(t).map_err(|e| raise(&e)),
            None => Err(KfdPreemptError::new_err((
                rustix::io::Errno::BADF.raw_os_error(),
                "the simulated tenant was closed",
            ))),
        }
    }
}

/// A simulated queue's progress.
#[pyclass(frozen, get_all, module = "kfd_preempt")]
pub struct SimQueueStatus {
    /// The ``KFDP_QS_*`` bits.
    pub state: u32,
    /// Whether the queue is on its node now.
    pub active: bool,
    /// Work units retired so far.
    pub retired: u64,
    /// Dispatched, not retired.
    pub in_flight: u64,
}

fn queue_type(name: &str) -> PyResult<QueueType> {
    Ok(match name {
        "compute" => QueueType::Compute,
        "sdma" => QueueType::Sdma,
        "compute-aql" => QueueType::ComputeAql,
        "sdma-xgmi" => QueueType::SdmaXgmi,
        "sdma-eng" => QueueType::SdmaByEngineId,
        _ => {
            return Err(invalid(
                "queue_type is one of compute, sdma, compute-aql, sdma-xgmi, sdma-eng",
            ))
        }
    })
}

#[pymethods]
impl SimTenant {
    #[new]
    fn new() -> PyResult<Self> {
        kfd_preempt::sim::SimTenant::open()
            .map(|t| SimTenant {
                inner: RwLock::new(Some(t)),
            })
            .map_err(|e| raise(&e))
    }

    /// Creates a queue on simulated node ``node`` (an index, not a
    /// gpu_id); returns ``(queue_id, gpu_id)``.
    #[pyo3(signature = (node, queue_type = "compute-aql", priority = 0))]
    fn create_queue(&self, node: u32, queue_type: &str, priority: u32) -> PyResult<(u32, u32)> {
        let t = self::queue_type(queue_type)?;
        self.with(|i| i.create_queue(node, t, priority))
            .map(|q| (q.queue_id, q.gpu_id))
    }

    /// Destroys queue ``queue_id``.
    fn destroy_queue(&self, queue_id: u32) -> PyResult<()> {
        self.with(|i| i.destroy_queue(queue_id))
    }

    /// Queue ``queue_id``'s progress.
    fn status(&self, queue_id: u32) -> PyResult<SimQueueStatus> {
        self.with(|i| i.status(queue_id)).map(|s| SimQueueStatus {
            state: s.state.0,
            active: s.state.is_active(),
            retired: s.retired,
            in_flight: s.in_flight,
        })
    }

    /// The tenant's descriptor, for ``Device.attach_fd(fd, "sim")``.
    fn fileno(&self) -> PyResult<RawFd> {
        self.with(|i| Ok(i.as_fd().as_raw_fd()))
    }

    /// Closes the tenant's descriptor (its queues end with the file).
    /// Closing twice is allowed.
    fn close(&self) {
        let tenant = self.inner.write().unwrap_or_else(|e| e.into_inner()).take();
        drop(tenant);
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (*_args))]
    fn __exit__(&self, _args: &Bound<'_, pyo3::types::PyTuple>) -> bool {
        self.close();
        false
    }
}
