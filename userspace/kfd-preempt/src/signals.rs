//! The signals that end a hold, or a simulated tenant: SIGINT (Ctrl-C),
//! SIGTERM, SIGHUP, and SIGUSR1 (what `kfd-preempt resume`/`thaw` sends).
//! Behind the `signals` feature: the CLI and the developer tool take
//! them, the C ABI's library does not.

use std::{
    io,
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc,
    },
};

use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM, SIGUSR1};

/// Set once any of the signals arrived.
pub struct Release(Arc<AtomicBool>);

impl Release {
    /// Installs the handlers; the flag starts clear.
    pub fn install() -> io::Result<Self> {
        let flag = Arc::new(AtomicBool::new(false));
        for sig in [SIGINT, SIGTERM, SIGHUP, SIGUSR1] {
            signal_hook::flag::register(sig, Arc::clone(&flag))?;
        }
        Ok(Release(flag))
    }

    /// Whether any of the signals arrived.
    pub fn requested(&self) -> bool {
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
