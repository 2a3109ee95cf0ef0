//! The `/proc` walk and the classification of what it finds, off the main
//! loop.

use std::os::fd::OwnedFd;
use std::sync::mpsc::{self, Receiver, Sender};
use std::time::Duration;

use rustix::event::{eventfd, EventfdFlags};

use super::{fatal, Fatal};
use crate::{
    config::Config,
    discover::{Discovery, ScanResult},
};

/// What one scan found: the processes with a KFD device open, compared with
/// the scan before.
pub(super) type Listing = Result<ScanResult, kfd_preempt::Error>;

/// Lists and classifies the KFD processes on a thread of its own, every
/// scan interval, so that neither the walk of every process's descriptors
/// in `/proc` nor the `stat` read that tells a known process from a new one
/// under its pid (tens of milliseconds on a busy host, 3 to 11 ms of every
/// second on the bench VM) sits between a busy edge and the preemption it
/// calls for, or takes the tenants' CPU at the main loop's SCHED_FIFO. The
/// main loop polls `wake` and takes the listings in order.
pub struct Lister {
    rx: Receiver<Listing>,
    forget: Sender<i32>,
    pub(super) wake: OwnedFd,
}

impl Lister {
    /// Starts the thread, classifying by `cfg`'s rules with `discovery`.
    pub fn spawn(interval: Duration, cfg: Config, mut discovery: Discovery) -> Result<Self, Fatal> {
        let wake = eventfd(0, EventfdFlags::CLOEXEC | EventfdFlags::NONBLOCK)
            .map_err(|e| fatal("eventfd", e))?;
        let signal = wake.try_clone().map_err(|e| fatal("dup", e))?;
        let (tx, rx) = mpsc::channel();
        let (forget, forgotten) = mpsc::channel::<i32>();
        std::thread::Builder::new()
            .name("kfd-preemptd-scan".into())
            .spawn(move || loop {
                while let Ok(pid) = forgotten.try_recv() {
                    discovery.forget(pid);
                }
                let listing = kfd_preempt::kfd_processes().map(|l| discovery.scan_listed(&cfg, &l));
                // Ends when the daemon (the receiver) is gone.
                if tx.send(listing).is_err() {
                    return;
                }
                let _ = rustix::io::write(&signal, &1u64.to_ne_bytes());
                std::thread::sleep(interval);
            })
            .map_err(|e| fatal("starting the scan thread", e))?;
        Ok(Lister { rx, forget, wake })
    }

    /// Every listing since the last call, oldest first: each reports only
    /// the changes since the one before, so none may be skipped.
    pub(super) fn take(&self) -> Vec<Listing> {
        let mut buf = [0u8; 8];
        let _ = rustix::io::read(&self.wake, &mut buf);
        self.rx.try_iter().collect()
    }

    /// Has the next scan read and classify `pid` afresh if it lists it.
    pub(super) fn forget(&self, pid: i32) {
        // The thread is gone only when the daemon is.
        let _ = self.forget.send(pid);
    }
}
