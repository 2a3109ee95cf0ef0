//! The signals that end a `sim-tenant` (without `--stdin`): SIGINT
//! (Ctrl-C), SIGTERM, SIGHUP and SIGUSR1, the ones that end a hold of
//! `kfd-preempt` too.

use std::{
    io,
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc,
    },
};

use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM, SIGUSR1};

/// Set once any of the signals arrived.
pub(crate) struct Release(Arc<AtomicBool>);

impl Release {
    pub(crate) fn install() -> io::Result<Self> {
        let flag = Arc::new(AtomicBool::new(false));
        for sig in [SIGINT, SIGTERM, SIGHUP, SIGUSR1] {
            signal_hook::flag::register(sig, Arc::clone(&flag))?;
        }
        Ok(Release(flag))
    }

    pub(crate) fn requested(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sigusr1_requests_release() {
        let r = Release::install().unwrap();
        assert!(!r.requested());
        rustix::process::kill_process(rustix::process::getpid(), rustix::process::Signal::USR1)
            .unwrap();
        // A process-directed signal goes to any thread of the test runner:
        // give it up to a second to arrive.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(1);
        while !r.requested() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert!(r.requested());
    }
}
