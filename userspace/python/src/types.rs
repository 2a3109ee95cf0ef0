// SPDX-License-Identifier: GPL-2.0 OR MIT
//! The crate's plain values as immutable Python objects.

use pyo3::prelude::*;

/// One queue of one attachment: what PREEMPT, RESUME and WATCH take.
#[pyclass(frozen, eq, hash, from_py_object, module = "kfd_preempt")]
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct QueueRef {
    /// The attachment handle (``Target.handle``).
    #[pyo3(get)]
    pub handle: u32,
    /// The node's ``gpu_id``.
    #[pyo3(get)]
    pub gpu_id: u32,
    /// The queue's id within its process.
    #[pyo3(get)]
    pub queue_id: u32,
}

#[pymethods]
impl QueueRef {
    #[new]
    fn new(handle: u32, gpu_id: u32, queue_id: u32) -> Self {
        QueueRef {
            handle,
            gpu_id,
            queue_id,
        }
    }

    fn __repr__(&self) -> String {
        format!(
            "QueueRef(handle={}, gpu_id={}, queue_id={})",
            self.handle, self.gpu_id, self.queue_id
        )
    }
}

impl From<kfd_preempt::QueueRef> for QueueRef {
    fn from(q: kfd_preempt::QueueRef) -> Self {
        QueueRef {
            handle: q.handle.0,
            gpu_id: q.gpu_id,
            queue_id: q.queue_id,
        }
    }
}

impl From<QueueRef> for kfd_preempt::QueueRef {
    fn from(q: QueueRef) -> Self {
        kfd_preempt::QueueRef {
            handle: kfd_preempt::Handle(q.handle),
            gpu_id: q.gpu_id,
            queue_id: q.queue_id,
        }
    }
}

/// A queue of an attached process, as QUERY reports it.
#[pyclass(frozen, get_all, module = "kfd_preempt")]
#[derive(Clone)]
pub struct QueueInfo {
    /// The attachment handle.
    pub handle: u32,
    /// The node's ``gpu_id``.
    pub gpu_id: u32,
    /// The queue's id within its process.
    pub queue_id: u32,
    /// ``compute``, ``sdma``, ``compute-aql``, ``sdma-xgmi``, ``sdma-eng`` or ``type-N``.
    pub queue_type: String,
    /// The ``KFDP_QS_*`` bits.
    pub state: u32,
    /// The state bits' names (``active``, ``suspended``, ``owned``, ...).
    pub state_names: Vec<String>,
    /// Whether the queue is on the hardware now.
    pub active: bool,
    /// Whether this owner holds it preempted.
    pub owned: bool,
    /// The ring's user address (it identifies the queue across a re-creation).
    pub ring_base_address: u64,
    /// The ring's size in bytes.
    pub ring_size: u64,
    /// The queue's priority (0 to 15).
    pub priority: u32,
    /// The queue's percentage.
    pub queue_percent: u32,
    /// The node's GC IP version.
    pub gc_ip_version: u32,
}

#[pymethods]
impl QueueInfo {
    /// The :class:`QueueRef` that names this queue in a batch.
    fn queue_ref(&self) -> QueueRef {
        QueueRef {
            handle: self.handle,
            gpu_id: self.gpu_id,
            queue_id: self.queue_id,
        }
    }

    fn __repr__(&self) -> String {
        format!(
            "QueueInfo(gpu_id={}, queue_id={}, queue_type='{}', state='{}')",
            self.gpu_id,
            self.queue_id,
            self.queue_type,
            self.state_names.join(",")
        )
    }
}

impl From<&kfd_preempt::QueueInfo> for QueueInfo {
    fn from(q: &kfd_preempt::QueueInfo) -> Self {
        QueueInfo {
            handle: q.handle.0,
            gpu_id: q.gpu_id,
            queue_id: q.queue_id,
            queue_type: q.queue_type.to_string(),
            state: q.state.0,
            state_names: q.state.names(),
            active: q.state.is_active(),
            owned: q.state.is_owned(),
            ring_base_address: q.ring_base_address,
            ring_size: q.ring_size,
            priority: q.priority,
            queue_percent: q.queue_percent,
            gc_ip_version: q.gc_ip_version,
        }
    }
}

/// What one entry of a batch came to.
#[pyclass(frozen, get_all, module = "kfd_preempt")]
#[derive(Clone)]
pub struct Outcome {
    /// ``done``, ``already``, ``deferred``, ``external``, ``failed`` or ``unknown``.
    pub name: String,
    /// Whether the entry succeeded (everything but ``failed`` and ``unknown``).
    pub ok: bool,
    /// The entry's status: 0 or a positive ``KFDP_STATUS_*``, or minus an errno.
    pub status: i32,
    /// The error number of a failed entry; 0 otherwise.
    pub errno: i32,
    /// The crate's words for it.
    pub message: String,
}

#[pymethods]
impl Outcome {
    fn __repr__(&self) -> String {
        format!("Outcome('{}')", self.message)
    }
}

impl From<kfd_preempt::Outcome> for Outcome {
    fn from(o: kfd_preempt::Outcome) -> Self {
        use kfd_preempt::Outcome as O;
        let (name, errno) = match o {
            O::Done => ("done", 0),
            O::Already => ("already", 0),
            O::Deferred => ("deferred", 0),
            O::External => ("external", 0),
            O::Failed(e) => ("failed", e.errno()),
            O::Unknown(s) => ("unknown", s.saturating_neg().max(0)),
        };
        Outcome {
            name: name.to_string(),
            ok: o.is_success(),
            status: o.status(),
            errno,
            message: o.to_string(),
        }
    }
}

/// The result of a PREEMPT, RESUME, WATCH or UNWATCH batch.
#[pyclass(frozen, get_all, module = "kfd_preempt")]
pub struct BatchReport {
    /// Each entry with its outcome, in the order given.
    pub outcomes: Vec<(QueueRef, Outcome)>,
    /// Entries that succeeded.
    pub num_ok: u32,
    /// Runlist updates the batch took (at most one per node).
    pub runlist_updates: u32,
    /// The module's time for the batch, in seconds.
    pub elapsed: f64,
}

#[pymethods]
impl BatchReport {
    /// Whether every entry succeeded.
    #[getter]
    fn all_succeeded(&self) -> bool {
        self.outcomes.iter().all(|(_, o)| o.ok)
    }

    /// The entries that did not succeed.
    fn failures(&self) -> Vec<(QueueRef, Outcome)> {
        self.outcomes
            .iter()
            .filter(|(_, o)| !o.ok)
            .cloned()
            .collect()
    }

    fn __repr__(&self) -> String {
        format!(
            "BatchReport(num_ok={}/{}, runlist_updates={}, elapsed={:.6})",
            self.num_ok,
            self.outcomes.len(),
            self.runlist_updates,
            self.elapsed
        )
    }
}

impl From<kfd_preempt::BatchReport> for BatchReport {
    fn from(r: kfd_preempt::BatchReport) -> Self {
        BatchReport {
            outcomes: r
                .outcomes
                .into_iter()
                .map(|(q, o)| (q.into(), o.into()))
                .collect(),
            num_ok: r.num_ok,
            runlist_updates: r.runlist_updates,
            elapsed: r.elapsed.as_secs_f64(),
        }
    }
}

/// What the loaded module implements (INFO).
#[pyclass(frozen, get_all, module = "kfd_preempt")]
pub struct Info {
    /// Major ABI version.
    pub abi_major: u32,
    /// Minor ABI version.
    pub abi_minor: u32,
    /// The capability bits.
    pub caps: u64,
    /// The capability bits' names (``hws-batch``, ``freeze``, ``activity``, ``sim``, ...).
    pub cap_names: Vec<String>,
    /// The most entries one batch may carry.
    pub max_batch: u32,
    /// The least time between two PREEMPT or FREEZE triggers of one node, in microseconds.
    pub min_preempt_interval_us: u32,
    /// The most queues one owner may watch.
    pub max_watches: u32,
    /// The shortest ARM period, in seconds.
    pub min_watch_period: f64,
}

#[pymethods]
impl Info {
    fn __repr__(&self) -> String {
        format!(
            "Info(abi={}.{}, caps=[{}], max_batch={})",
            self.abi_major,
            self.abi_minor,
            self.cap_names.join(","),
            self.max_batch
        )
    }
}

impl From<kfd_preempt::Info> for Info {
    fn from(i: kfd_preempt::Info) -> Self {
        Info {
            abi_major: i.abi_major,
            abi_minor: i.abi_minor,
            caps: i.caps.0,
            cap_names: i.caps.names(),
            max_batch: i.max_batch,
            min_preempt_interval_us: i.min_preempt_interval_us,
            max_watches: i.max_watches,
            min_watch_period: i.min_watch_period.as_secs_f64(),
        }
    }
}

/// One watched queue in a :class:`Sample`.
#[pyclass(frozen, get_all, module = "kfd_preempt")]
#[derive(Clone)]
pub struct Activity {
    /// The queue.
    pub queue: QueueRef,
    /// Whether it has work the hardware has not finished.
    pub pending: bool,
    /// Whether it was destroyed, or its process exited.
    pub gone: bool,
    /// Its read index.
    pub read_index: u64,
    /// Its write index.
    pub write_index: u64,
}

#[pymethods]
impl Activity {
    fn __repr__(&self) -> String {
        format!(
            "Activity(gpu_id={}, queue_id={}, pending={}, gone={})",
            self.queue.gpu_id,
            self.queue.queue_id,
            if self.pending { "True" } else { "False" },
            if self.gone { "True" } else { "False" }
        )
    }
}

/// The watched queues' activity at one moment (SAMPLE).
#[pyclass(frozen, get_all, module = "kfd_preempt")]
pub struct Sample {
    /// The module's clock (``CLOCK_MONOTONIC``) at the sample, in seconds.
    pub timestamp: f64,
    /// How many watched queues have work pending.
    pub num_pending: u32,
    /// Every watched queue.
    pub queues: Vec<Activity>,
}

impl From<kfd_preempt::Sample> for Sample {
    fn from(s: kfd_preempt::Sample) -> Self {
        Sample {
            timestamp: s.timestamp.as_secs_f64(),
            num_pending: s.num_pending,
            queues: s
                .queues
                .into_iter()
                .map(|a| Activity {
                    queue: a.queue.into(),
                    pending: a.pending,
                    gone: a.gone,
                    read_index: a.read_index,
                    write_index: a.write_index,
                })
                .collect(),
        }
    }
}

/// Seconds given by Python as a duration: finite, not negative.
pub(crate) fn seconds(s: f64, what: &str) -> PyResult<std::time::Duration> {
    std::time::Duration::try_from_secs_f64(s).map_err(|_| {
        crate::error::invalid(&format!(
            "{what} must be a finite number of seconds, at least 0"
        ))
    })
}
