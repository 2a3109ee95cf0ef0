// SPDX-License-Identifier: GPL-2.0 OR MIT
//! A tenant of the module's simulated nodes (`/dev/kfd_preempt_sim`): a
//! process that has queues without a GPU, for testing a scheduler.

use std::os::fd::{AsFd, AsRawFd, RawFd};

use kfd_preempt::QueueType;
use pyo3::prelude::*;

use crate::error::{invalid, raise};

/// This process as a tenant of the simulated nodes: it opens
/// ``/dev/kfd_preempt_sim`` (the module loaded with ``sim_nodes=N``).
/// Attach it with ``Device.attach(os.getpid())`` or
/// ``Device.attach_fd(tenant.fileno(), "sim")``.
#[pyclass(frozen, module = "kfd_preempt")]
pub struct SimTenant {
    inner: kfd_preempt::sim::SimTenant,
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
            .map(|inner| SimTenant { inner })
            .map_err(|e| raise(&e))
    }

    /// Creates a queue on simulated node ``node`` (an index, not a
    /// gpu_id); returns ``(queue_id, gpu_id)``.
    #[pyo3(signature = (node, queue_type = "compute-aql", priority = 0))]
    fn create_queue(&self, node: u32, queue_type: &str, priority: u32) -> PyResult<(u32, u32)> {
        let t = self::queue_type(queue_type)?;
        self.inner
            .create_queue(node, t, priority)
            .map(|q| (q.queue_id, q.gpu_id))
            .map_err(|e| raise(&e))
    }

    /// Destroys queue ``queue_id``.
    fn destroy_queue(&self, queue_id: u32) -> PyResult<()> {
        self.inner.destroy_queue(queue_id).map_err(|e| raise(&e))
    }

    /// Queue ``queue_id``'s progress.
    fn status(&self, queue_id: u32) -> PyResult<SimQueueStatus> {
        self.inner
            .status(queue_id)
            .map(|s| SimQueueStatus {
                state: s.state.0,
                active: s.state.is_active(),
                retired: s.retired,
                in_flight: s.in_flight,
            })
            .map_err(|e| raise(&e))
    }

    /// The tenant's descriptor, for ``Device.attach_fd(fd, "sim")``.
    fn fileno(&self) -> RawFd {
        self.inner.as_fd().as_raw_fd()
    }
}
