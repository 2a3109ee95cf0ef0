//! The `/proc` walk, off the main loop.

use std::os::fd::OwnedFd;
use std::time::Duration;

use kfd_preempt::TargetKind;
use rustix::event::{eventfd, EventfdFlags};

use super::{fatal, Fatal};

/// One listing of the processes with a KFD device open.
pub(super) type Listing = Result<Vec<(i32, TargetKind)>, kfd_preempt::Error>;

/// Lists the KFD processes on a thread of its own, every scan interval, so
/// that the walk of every process's descriptors in `/proc` (tens of
/// milliseconds on a busy host) never sits between a busy edge and the
/// preemption it calls for. The main loop polls `wake` and takes the
/// newest listing.
pub struct Lister {
    rx: std::sync::mpsc::Receiver<Listing>,
    pub(super) wake: OwnedFd,
}

impl Lister {
    /// Starts the thread.
    pub fn spawn(interval: Duration) -> Result<Self, Fatal> {
        let wake = eventfd(0, EventfdFlags::CLOEXEC | EventfdFlags::NONBLOCK)
            .map_err(|e| fatal("eventfd", e))?;
        let signal = wake.try_clone().map_err(|e| fatal("dup", e))?;
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::Builder::new()
            .name("kfd-preemptd-scan".into())
            .spawn(move || loop {
                // Ends when the daemon (the receiver) is gone.
                if tx.send(kfd_preempt::kfd_processes()).is_err() {
                    return;
                }
                let _ = rustix::io::write(&signal, &1u64.to_ne_bytes());
                std::thread::sleep(interval);
            })
            .map_err(|e| fatal("starting the scan thread", e))?;
        Ok(Lister { rx, wake })
    }

    /// The newest listing since the last call, if any.
    pub(super) fn take(&self) -> Option<Listing> {
        let mut buf = [0u8; 8];
        let _ = rustix::io::read(&self.wake, &mut buf);
        let mut newest = None;
        while let Ok(l) = self.rx.try_recv() {
            newest = Some(l);
        }
        newest
    }
}
