//! kfd-preemptd: a priority daemon over kfd_preempt.
//!
//! It finds GPU tenant processes, sorts them into latency-critical and
//! best-effort classes ([`config`], [`discover`]), watches the
//! latency-critical queues with the module's activity detection, and takes
//! the best-effort queues off the GPU while latency-critical work is
//! pending ([`policy`], [`daemon`]).
//!
//! # Layers
//!
//! Top to bottom. A file imports only from its own layer and those below
//! (a child module from its parent too); test code may import anything.
//! `scripts/import-graph.py` checks it (`make check`'s lint):
//!
//! ```text
//! daemon/                the loop: tenants, decisions, the module's calls,
//!                        the report thread
//! metrics.rs metrics/    the Prometheus endpoint: the statistics rendered,
//!                        and the HTTP server that serves them
//! stats.rs               the statistics the daemon writes
//! log.rs log/            log lines, and the thread that writes them
//! discover.rs topology.rs
//!                        /proc and sysfs: tenant processes, GPU nodes
//! config.rs              the configuration file: parsed and checked, and
//!                        turned into the policy's tunables
//! policy.rs              the decision core: events in, actions out; it
//!                        imports nothing of the daemon
//! ```

#![deny(missing_docs)]

pub mod config;
pub mod daemon;
pub mod discover;
pub mod log;
pub mod metrics;
pub mod policy;
pub mod stats;
#[cfg(test)]
mod testutil;
pub mod topology;
