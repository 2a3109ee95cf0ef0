//! The statistics file and the metrics exposition, rendered and written off
//! the main loop.
//!
//! The main loop runs at SCHED_FIFO so that a busy edge is answered before
//! anything else on its CPU. Pretty-printing the JSON of sixteen nodes and
//! rendering their metrics took 5 to 17 ms of every second on the bench
//! VM: at that priority, time taken from the very tenants the daemon
//! protects (their submissions waited for it) and from the next busy edge.
//! The main loop now only takes a snapshot ([`Stats`], well under a
//! millisecond) and hands it to a thread of the default policy.

use std::{
    path::{Path, PathBuf},
    sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError, TryLockError},
    thread::JoinHandle,
};

use serde_json::json;

use super::{fatal, Fatal};
use crate::{
    log::{Level, Logger},
    metrics::{self, MetricsServer},
    stats::{self, Stats},
};

/// Where the statistics go: the file, the metrics endpoint, or both.
pub struct Outputs {
    stats_path: Option<PathBuf>,
    metrics: Option<MetricsServer>,
    /// The last write failed (warned once until one succeeds).
    failing: bool,
    log: Logger,
}

impl Outputs {
    /// Outputs to `stats_path` (if any); no metrics until
    /// [`set_metrics`](Self::set_metrics).
    pub fn new(stats_path: Option<PathBuf>, log: Logger) -> Self {
        Outputs {
            stats_path,
            metrics: None,
            failing: false,
            log,
        }
    }

    /// Serves the metrics from now on.
    pub fn set_metrics(&mut self, server: MetricsServer) {
        self.metrics = Some(server);
    }

    /// Whether anything is written at all.
    pub fn is_empty(&self) -> bool {
        self.stats_path.is_none() && self.metrics.is_none()
    }

    /// Publishes `s` as the metrics and writes it to the file.
    pub fn write(&mut self, s: &Stats) {
        if let Some(m) = &self.metrics {
            m.publish(metrics::render(s));
        }
        let Some(path) = &self.stats_path else {
            return;
        };
        match write_stats_file(path, s) {
            Ok(()) => self.failing = false,
            Err(e) => {
                if !self.failing {
                    self.log.log(
                        Level::Warn,
                        "stats",
                        &[
                            ("path", json!(path.display().to_string())),
                            ("error", json!(e.to_string())),
                        ],
                    );
                }
                self.failing = true;
            }
        }
    }
}

fn write_stats_file(path: &Path, s: &Stats) -> std::io::Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    stats::write_atomic(path, s)
}

/// The snapshot waiting for the thread: only the newest is kept, so a slow
/// disk delays the file, never the loop nor its memory.
#[derive(Default)]
struct Mailbox {
    next: Option<Stats>,
    closed: bool,
}

/// What the loop and the thread share.
#[derive(Default)]
struct Shared {
    mailbox: Mutex<Mailbox>,
    posted: Condvar,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Mailbox> {
        // A panic while holding the lock leaves a whole Mailbox behind.
        self.mailbox.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The thread `kfd-preemptd-report`, which writes each snapshot handed to
/// it.
///
/// # Invariants
///
/// `thread` is `Some` until [`finish`](Self::finish) or `drop` joins it.
pub struct Reporter {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<Outputs>>,
}

impl Reporter {
    /// Starts the thread over `outputs`. Call it before the caller raises
    /// its own scheduling policy: the thread keeps the policy it starts
    /// with.
    pub fn spawn(mut outputs: Outputs) -> Result<Self, Fatal> {
        let shared = Arc::new(Shared::default());
        let theirs = Arc::clone(&shared);
        let thread = std::thread::Builder::new()
            .name("kfd-preemptd-report".into())
            .spawn(move || loop {
                let (next, closed) = {
                    let mut m = theirs.lock();
                    while m.next.is_none() && !m.closed {
                        m = theirs
                            .posted
                            .wait(m)
                            .unwrap_or_else(PoisonError::into_inner);
                    }
                    (m.next.take(), m.closed)
                };
                if let Some(s) = next {
                    outputs.write(&s);
                }
                if closed {
                    return outputs;
                }
            })
            .map_err(|e| fatal("starting the report thread", e))?;
        Ok(Reporter {
            shared,
            thread: Some(thread),
        })
    }

    /// Hands `s` over, replacing a snapshot not written yet. Called from
    /// the SCHED_FIFO loop, it never waits for the thread: if the thread
    /// holds the mailbox (for the moment it takes a snapshot out), `s` is
    /// dropped and the next second's goes instead, rather than the loop
    /// waiting for a thread of the default policy to get a CPU back.
    pub fn submit(&self, s: Stats) {
        let replaced = match self.shared.mailbox.try_lock() {
            Ok(mut m) => m.next.replace(s),
            Err(TryLockError::Poisoned(p)) => p.into_inner().next.replace(s),
            Err(TryLockError::WouldBlock) => return,
        };
        self.shared.posted.notify_one();
        // Freed outside the lock.
        drop(replaced);
    }

    /// Whether the thread has ended (it ends only by panicking, or when
    /// closed).
    pub fn is_dead(&self) -> bool {
        self.thread.as_ref().is_none_or(JoinHandle::is_finished)
    }

    /// Writes `last` and stops the thread; gives the outputs back once
    /// everything handed over is written (`None` if the thread panicked).
    pub fn finish(mut self, last: Stats) -> Option<Outputs> {
        self.close(Some(last))
    }

    fn close(&mut self, last: Option<Stats>) -> Option<Outputs> {
        {
            let mut m = self.shared.lock();
            if last.is_some() {
                m.next = last;
            }
            m.closed = true;
        }
        self.shared.posted.notify_one();
        self.thread.take()?.join().ok()
    }
}

impl Drop for Reporter {
    /// A daemon stopping on an error writes what was handed over, and
    /// drops the outputs (removing the metrics socket) before it exits.
    fn drop(&mut self) {
        drop(self.close(None));
    }
}

/// Where the daemon's statistics write sends a snapshot.
pub enum Sink {
    /// Written by the caller (tests, and before the thread starts).
    Inline(Outputs),
    /// Handed to the report thread.
    Thread(Reporter),
    /// The report thread died (reported once); nothing is written any
    /// more.
    Lost,
}

impl Sink {
    /// Whether a snapshot would go anywhere.
    pub fn is_empty(&self) -> bool {
        match self {
            Sink::Inline(o) => o.is_empty(),
            Sink::Thread(_) => false,
            Sink::Lost => true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{config::LogFormat, policy::PolicyConfig};
    use std::time::Duration;

    fn snapshot(uptime_ms: u64) -> Stats {
        crate::stats::snapshot(
            &PolicyConfig::default(),
            &["best-effort".to_string(), "latency-critical".to_string()],
            &[],
            Duration::from_millis(uptime_ms),
            Duration::from_millis(uptime_ms),
            uptime_ms,
            Vec::new(),
        )
    }

    fn written_at(path: &Path) -> u64 {
        let text = std::fs::read_to_string(path).unwrap();
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        v["written_at_unix_ms"].as_u64().unwrap()
    }

    #[test]
    fn the_thread_writes_what_it_is_handed_and_finish_writes_the_last() {
        let dir = std::env::temp_dir().join(format!("kfd-preemptd-report-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let path = dir.join("sub/stats.json");
        let outputs = Outputs::new(Some(path.clone()), Logger::new(LogFormat::Text));
        let r = Reporter::spawn(outputs).unwrap();
        r.submit(snapshot(1));
        let mut waited = 0;
        while !path.exists() && waited < 500 {
            std::thread::sleep(Duration::from_millis(10));
            waited += 1;
        }
        assert_eq!(written_at(&path), 1);
        r.submit(snapshot(2));
        let back = r.finish(snapshot(3)).expect("the thread ran to its end");
        // The last snapshot is on disk when finish returns, whatever the
        // thread had not got round to.
        assert_eq!(written_at(&path), 3);
        assert!(!back.is_empty());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn dropping_the_reporter_writes_what_it_was_handed_and_ends_the_thread() {
        let dir =
            std::env::temp_dir().join(format!("kfd-preemptd-report-drop-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let path = dir.join("stats.json");
        let r = Reporter::spawn(Outputs::new(
            Some(path.clone()),
            Logger::new(LogFormat::Text),
        ))
        .unwrap();
        r.submit(snapshot(7));
        drop(r);
        assert_eq!(written_at(&path), 7);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_snapshot_not_written_yet_is_replaced() {
        let shared = Arc::new(Shared::default());
        let r = Reporter {
            shared: Arc::clone(&shared),
            // A thread that never reads: what the mailbox holds is what a
            // slow disk would leave there.
            thread: Some(std::thread::spawn(|| {
                Outputs::new(None, Logger::new(LogFormat::Text))
            })),
        };
        r.submit(snapshot(1));
        r.submit(snapshot(2));
        let held = shared.lock().next.as_ref().map(|s| s.written_at_unix_ms);
        assert_eq!(held, Some(2));
        // The loop never waits for the thread: a held mailbox drops the
        // snapshot instead.
        {
            let _held_by_the_thread = shared.lock();
            r.submit(snapshot(3));
        }
        let held = shared.lock().next.as_ref().map(|s| s.written_at_unix_ms);
        assert_eq!(held, Some(2));
    }
}
