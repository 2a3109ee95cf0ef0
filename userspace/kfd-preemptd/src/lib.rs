//! kfd-preemptd: a priority daemon over kfd_preempt.
//!
//! It finds GPU tenant processes, sorts them into latency-critical and
//! best-effort classes ([`config`], [`discover`]), watches the
//! latency-critical queues with the module's activity detection, and takes
//! the best-effort queues off the GPU while latency-critical work is
//! pending ([`policy`], [`daemon`]).

#![deny(missing_docs)]

pub mod config;
pub mod daemon;
pub mod discover;
pub mod log;
pub mod log_writer;
pub mod metrics;
pub mod policy;
pub mod stats;
#[cfg(test)]
mod testutil;
pub mod topology;
