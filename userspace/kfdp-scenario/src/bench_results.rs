//! The bench's results (`kfd-preempt-bench/1`): what `kfdp-scenario bench`
//! writes as JSON and what its tables and chart are drawn from, here so
//! that the chart reads them without the bench's code.

use serde::{Deserialize, Serialize};

/// The simulated node's cost knobs for one run.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub(crate) struct CostModel {
    pub name: String,
    /// Whether the numbers include a modelled (invented) hardware cost.
    pub modelled: bool,
    pub label: String,
    pub cycle_ns: u64,
    pub per_queue_ns: u64,
    pub mes_call_ns: u64,
}

/// The methods compared.
pub(crate) const BATCH: &str = "batch";
pub(crate) const SINGLES: &str = "singles";
pub(crate) const FREEZE: &str = "freeze";
/// The KFD debugger's SUSPEND_QUEUES, one call per process (--hardware).
pub(crate) const DEBUGGER: &str = "debugger";

/// One (cost model, K, P, method) measurement.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub(crate) struct Row {
    pub cost_model: String,
    pub k: u32,
    pub p: u32,
    /// Processes actually used: min(P, K).
    pub processes: u32,
    pub method: String,
    pub reps: u32,
    /// Wall time to take all K queues off, as the caller sees it.
    pub p50_us: f64,
    pub p99_us: f64,
    #[serde(default)]
    pub max_us: f64,
    /// Wall time to put them back (RESUME of the batch, or THAW).
    #[serde(default)]
    pub resume_p50_us: f64,
    #[serde(default)]
    pub resume_p99_us: f64,
    #[serde(default)]
    pub resume_max_us: f64,
    /// Runlist updates (HWS cycles or MES calls) per repetition, as the
    /// simulated node counted them.
    pub runlist_updates: u64,
    /// Median of the module's own `elapsed_ns` sum per repetition (batch
    /// and singles) or of FREEZE's `elapsed_ns` sum.
    pub module_p50_us: f64,
    #[serde(default)]
    pub module_p99_us: f64,
    #[serde(default)]
    pub module_max_us: f64,
    /// Median of wall time minus the module's `elapsed_ns` per repetition:
    /// the software cost around the hardware phase (decoding, validating,
    /// bookkeeping, the syscall itself).
    #[serde(default)]
    pub overhead_p50_us: f64,
}

/// The null-ioctl floor (KFDP_IOC_INFO), and the batch ioctl's own: a
/// PREEMPT of no entry, which does everything a batch does around its
/// entries (copies, probes, locks, bookkeeping).
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub(crate) struct Floor {
    pub cost_model: String,
    pub samples: u32,
    pub p50_us: f64,
    pub p99_us: f64,
    /// p50 of a PREEMPT of no entry; 0 in results from before it was measured.
    #[serde(default)]
    pub empty_batch_p50_us: f64,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub(crate) struct Results {
    pub schema: String,
    pub environment: String,
    /// What a --hardware run ran on (GPU, firmware, kernel).
    #[serde(default)]
    pub label: String,
    pub node: u32,
    pub node_mode: String,
    pub cost_models: Vec<CostModel>,
    pub floor: Vec<Floor>,
    pub rows: Vec<Row>,
}
