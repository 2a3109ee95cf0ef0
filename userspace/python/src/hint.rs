// SPDX-License-Identifier: GPL-2.0 OR MIT
//! The hint client: a latency-critical service telling kfd-preemptd that
//! work is coming (`Documentation/userspace.rst`, "HINTS").

use std::{sync::Mutex, time::Duration};

use kfd_preempt::hint::{self, HintError};
use pyo3::prelude::*;

use crate::{
    error::{HintRefused, KfdPreemptError},
    types::seconds,
};

fn raise(e: HintError) -> PyErr {
    let errno = e.errno().raw_os_error();
    match e {
        HintError::Refused(r) => {
            let err = HintRefused::new_err((errno, e.to_string()));
            Python::attach(|py| {
                // Setting an attribute of a new exception instance cannot
                // fail but for memory; the errno still tells the reason.
                let _ = err.value(py).setattr("reason", r.as_str());
            });
            err
        }
        e => KfdPreemptError::new_err((errno, e.to_string())),
    }
}

/// A connection to kfd-preemptd's hint socket. One hint at a time holds on
/// it; ``close()`` (or garbage collection) ends that hint. A client may be
/// shared by threads: their requests take turns.
#[pyclass(frozen, module = "kfd_preempt")]
pub struct HintClient {
    /// `None` once closed. The crate's client is not `Sync` (it counts
    /// unread answers in a `Cell`); the mutex gives one caller at a time.
    inner: Mutex<Option<hint::HintClient>>,
}

impl HintClient {
    fn with<T>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&hint::HintClient) -> Result<T, HintError> + Send,
    ) -> PyResult<T>
    where
        T: Send,
    {
        // Without the GIL: `begin` waits for the daemon's answer.
        py.detach(|| {
            let guard = self.inner.lock().unwrap_or_else(|e| e.into_inner());
            guard.as_ref().map(f)
        })
        .ok_or_else(|| {
            KfdPreemptError::new_err((
                rustix::io::Errno::BADF.raw_os_error(),
                "the hint client was closed",
            ))
        })?
        .map_err(raise)
    }
}

fn nodes_of(nodes: Option<Vec<u32>>) -> PyResult<Vec<u32>> {
    let nodes = nodes.unwrap_or_default();
    if nodes.len() > hint::MAX_HINT_NODES {
        return Err(crate::error::invalid(&format!(
            "a hint names at most {} nodes",
            hint::MAX_HINT_NODES
        )));
    }
    Ok(nodes)
}

fn within_of(within: f64) -> PyResult<Duration> {
    let d = seconds(within, "within")?;
    // The protocol counts whole milliseconds.
    if d < Duration::from_millis(1) {
        return Err(crate::error::invalid(
            "within must be at least 0.001 seconds",
        ));
    }
    Ok(d)
}

#[pymethods]
impl HintClient {
    /// Connects to the daemon's ``hint_socket`` (its configuration says where).
    #[new]
    fn new(path: std::path::PathBuf) -> PyResult<Self> {
        hint::HintClient::connect(path)
            .map(|c| HintClient {
                inner: Mutex::new(Some(c)),
            })
            .map_err(raise)
    }

    /// Says that work is coming within ``within`` seconds on ``nodes``
    /// (gpu_ids; ``None``: every node where this process has queues), and
    /// waits for the daemon's answer: the number of nodes the hint holds
    /// on. Raises :class:`HintRefused` if the daemon refuses it.
    #[pyo3(signature = (within, nodes = None))]
    fn begin(&self, py: Python<'_>, within: f64, nodes: Option<Vec<u32>>) -> PyResult<u32> {
        let within = within_of(within)?;
        let nodes = nodes_of(nodes)?;
        self.with(py, |c| {
            c.begin(within, &nodes).map(|h| {
                let n = h.nodes();
                // The hint runs its course; `end` ends it early.
                h.leave();
                n
            })
        })
    }

    /// The same as ``begin`` without waiting for the answer: what a service
    /// calls as a request arrives. Refusals are counted in ``refused``.
    #[pyo3(signature = (within, nodes = None))]
    fn notify(&self, py: Python<'_>, within: f64, nodes: Option<Vec<u32>>) -> PyResult<()> {
        let within = within_of(within)?;
        let nodes = nodes_of(nodes)?;
        self.with(py, |c| c.notify(within, &nodes))
    }

    /// Ends this connection's hint now, if one holds.
    fn end(&self, py: Python<'_>) -> PyResult<()> {
        self.with(py, |c| c.end())
    }

    /// Hints given by ``notify`` that the daemon refused, of the answers read so far.
    #[getter]
    fn refused(&self, py: Python<'_>) -> PyResult<u64> {
        self.with(py, |c| Ok(c.refused()))
    }

    /// Closes the connection; the daemon ends its hint. Closing twice is allowed.
    fn close(&self, py: Python<'_>) {
        // Without the GIL: a thread in `begin` holds the lock while it
        // waits for the daemon.
        py.detach(|| {
            let client = self.inner.lock().unwrap_or_else(|e| e.into_inner()).take();
            drop(client);
        });
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
