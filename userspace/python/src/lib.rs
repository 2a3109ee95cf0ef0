// SPDX-License-Identifier: GPL-2.0 OR MIT
//! `kfd_preempt._native`: the Python package's compiled half
//! (`Documentation/python.rst`). It wraps the `kfd-preempt` crate and adds
//! nothing of its own but the translation: durations become seconds as
//! `float`, errors become `KfdPreemptError` (an `OSError` carrying the
//! errno and the crate's message). The package's Python half
//! (`python/kfd_preempt/__init__.py`) re-exports it and adds the hint's
//! context manager.

use pyo3::prelude::*;

mod device;
mod error;
mod hint;
mod sim;
mod types;

/// The compiled part of the `kfd_preempt` package.
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("KfdPreemptError", py.get_type::<error::KfdPreemptError>())?;
    m.add("HintRefused", py.get_type::<error::HintRefused>())?;
    m.add("DEVICE_PATH", kfd_preempt::DEVICE_PATH)?;
    m.add("SIM_TENANT_PATH", kfd_preempt::sim::TENANT_PATH)?;
    m.add("MAX_LEASE", kfd_preempt::MAX_LEASE.as_secs_f64())?;
    m.add("ABI_MAJOR", kfd_preempt::uapi::KFDP_ABI_MAJOR)?;
    m.add_class::<device::Device>()?;
    m.add_class::<device::Target>()?;
    m.add_class::<types::QueueRef>()?;
    m.add_class::<types::QueueInfo>()?;
    m.add_class::<types::Outcome>()?;
    m.add_class::<types::BatchReport>()?;
    m.add_class::<types::Info>()?;
    m.add_class::<types::Activity>()?;
    m.add_class::<types::Sample>()?;
    m.add_class::<hint::HintClient>()?;
    m.add_class::<sim::SimTenant>()?;
    m.add_class::<sim::SimQueueStatus>()?;
    m.add_function(wrap_pyfunction!(device::kfd_processes, m)?)?;
    Ok(())
}
