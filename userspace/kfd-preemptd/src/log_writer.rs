//! The thread that writes the log lines, so that the SCHED_FIFO loop never
//! waits on stderr.
//!
//! The daemon logs every decision: hundreds of lines a second on a busy
//! host. Under systemd, stderr is a stream socket to journald, and a
//! journal that stops reading (a slow disk, a journald restart) blocks the
//! writer once the socket's buffer is full. Written from the main loop,
//! that would stop the reactions to latency-critical work; written from
//! here, it only fills a bounded queue.
//!
//! The loop formats each line and queues it without waiting: the queue's
//! lock is only tried (the writer holds it to take the whole queue at
//! once), and the writer is woken through an eventfd, whose write never
//! blocks. A line that meets a full queue, or the lock held for longer
//! than a few tries, is dropped and counted; the writer logs the count
//! (`log-dropped`) after the lines it kept, once it has caught up.

use std::{
    io::{self, Write},
    os::fd::OwnedFd,
    sync::{
        atomic::{AtomicBool, AtomicU64, Ordering},
        mpsc, Arc, Mutex, PoisonError, TryLockError,
    },
    thread::JoinHandle,
    time::Duration,
};

use rustix::{
    event::{eventfd, EventfdFlags},
    io::Errno,
};
use serde_json::json;

use crate::{
    config::LogFormat,
    log::{Level, Logger},
};

/// How many lines may wait for the writer: seconds of a busy host's lines.
const QUEUE_LINES: usize = 4096;

/// How often a line tries the queue's lock before it is dropped. The writer
/// holds it for a `mem::take`; only a writer preempted in that moment
/// makes the tries run out.
const LOCK_TRIES: u32 = 64;

/// How long a stop waits for the queued lines to be written: a journal
/// that does not read must not keep the daemon from exiting.
const STOP_DEADLINE: Duration = Duration::from_secs(2);

/// The lines waiting for the writer.
#[derive(Debug, Default)]
struct Pending {
    lines: Vec<String>,
    /// The writer has taken its last lines: later ones go back to their
    /// callers.
    closed: bool,
}

#[derive(Debug)]
struct Shared {
    pending: Mutex<Pending>,
    capacity: usize,
    /// Counts queued lines and stop requests; the writer sleeps reading it.
    wake: OwnedFd,
    /// Lines dropped since the writer last said so.
    dropped: AtomicU64,
    stop: AtomicBool,
}

impl Shared {
    fn wake(&self) {
        // An eventfd write blocks only at a count near 2^64.
        let _ = rustix::io::write(&self.wake, &1u64.to_ne_bytes());
    }
}

/// The sending side, held by every [`Logger`] that writes through the
/// thread.
#[derive(Debug, Clone)]
pub(crate) struct LineQueue(Arc<Shared>);

impl LineQueue {
    /// Hands `line` to the writer without waiting: a full queue, or one
    /// the writer holds for long, drops it (counted). A writer that has
    /// ended (or panicked) gives it back, for the caller to write itself.
    pub(crate) fn push(&self, line: String) -> Result<(), String> {
        for _ in 0..LOCK_TRIES {
            match self.0.pending.try_lock() {
                Ok(mut pending) => {
                    if pending.closed {
                        return Err(line);
                    }
                    if pending.lines.len() >= self.0.capacity {
                        break;
                    }
                    pending.lines.push(line);
                    drop(pending);
                    self.0.wake();
                    return Ok(());
                }
                Err(TryLockError::WouldBlock) => std::hint::spin_loop(),
                Err(TryLockError::Poisoned(_)) => return Err(line),
            }
        }
        self.0.dropped.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
}

/// The log thread (`kfd-preemptd-log`). Dropping it writes every line
/// queued before (for at most a deadline), then ends the thread; lines
/// logged after that are written by their caller.
#[derive(Debug)]
pub struct LogWriter {
    format: LogFormat,
    queue: LineQueue,
    deadline: Duration,
    done: mpsc::Receiver<()>,
    thread: Option<JoinHandle<()>>,
}

impl LogWriter {
    /// Starts the thread, writing to stderr. It takes the calling thread's
    /// scheduling policy: start it before the loop takes SCHED_FIFO.
    pub fn spawn(format: LogFormat) -> io::Result<Self> {
        Self::spawn_to(format, QUEUE_LINES, STOP_DEADLINE, io::stderr())
    }

    /// [`spawn`](Self::spawn) writing to `out`, with room for `capacity`
    /// lines and `deadline` to write them at a stop.
    pub fn spawn_to(
        format: LogFormat,
        capacity: usize,
        deadline: Duration,
        out: impl Write + Send + 'static,
    ) -> io::Result<Self> {
        let shared = Arc::new(Shared {
            pending: Mutex::new(Pending::default()),
            capacity,
            wake: eventfd(0, EventfdFlags::CLOEXEC)?,
            dropped: AtomicU64::new(0),
            stop: AtomicBool::new(false),
        });
        let (done_tx, done) = mpsc::channel();
        let theirs = shared.clone();
        let thread = std::thread::Builder::new()
            .name("kfd-preemptd-log".into())
            .spawn(move || {
                write_lines(&theirs, out, format);
                let _ = done_tx.send(());
            })?;
        Ok(LogWriter {
            format,
            queue: LineQueue(shared),
            deadline,
            done,
            thread: Some(thread),
        })
    }

    /// A logger whose lines this thread writes.
    pub fn logger(&self) -> Logger {
        Logger::queued(self.format, self.queue.clone())
    }

    /// Writes what was queued, and ends the thread.
    pub fn finish(mut self) {
        self.stop();
    }

    fn stop(&mut self) {
        let Some(thread) = self.thread.take() else {
            return;
        };
        self.queue.0.stop.store(true, Ordering::Release);
        self.queue.0.wake();
        match self.done.recv_timeout(self.deadline) {
            Ok(()) | Err(mpsc::RecvTimeoutError::Disconnected) => {
                let _ = thread.join();
            }
            // Stuck on its output: left to the process's exit, with the
            // lines it still holds.
            Err(mpsc::RecvTimeoutError::Timeout) => {}
        }
    }
}

impl Drop for LogWriter {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The thread's body: sleeps until woken, takes every queued line at once,
/// writes them, then the count of lines dropped meanwhile.
fn write_lines(shared: &Shared, mut out: impl Write, format: LogFormat) {
    loop {
        let mut count = [0u8; 8];
        match rustix::io::read(&shared.wake, &mut count) {
            Ok(_) => {}
            Err(Errno::INTR) => continue,
            // Not expected of an eventfd: lines go back to their callers.
            Err(_) => {
                close(shared);
                return;
            }
        }
        let stopping = shared.stop.load(Ordering::Acquire);
        let lines = {
            let mut pending = shared
                .pending
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            pending.closed = stopping;
            std::mem::take(&mut pending.lines)
        };
        for line in &lines {
            write_line(&mut out, line);
        }
        let dropped = shared.dropped.swap(0, Ordering::Relaxed);
        if dropped > 0 {
            let line = Logger::new(format).line(
                Level::Warn,
                "log-dropped",
                &[
                    ("lines", json!(dropped)),
                    ("why", json!("the log writer fell behind")),
                ],
            );
            write_line(&mut out, &line);
        }
        if stopping {
            return;
        }
    }
}

fn close(shared: &Shared) {
    shared
        .pending
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .closed = true;
}

/// One write per line, so that lines from a restart or another writer on
/// the same journal stream do not interleave; a closed stderr is not a
/// reason to stop scheduling.
fn write_line(out: &mut impl Write, line: &str) {
    let _ = out.write_all(format!("{line}\n").as_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::MutexGuard;

    /// A sink the test reads back, and can hold still.
    #[derive(Clone, Default)]
    struct Sink(Arc<Mutex<Vec<u8>>>);

    impl Write for Sink {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    impl Sink {
        /// Each line's event and numbers: `event=x n=3`.
        fn events(&self) -> Vec<String> {
            let text = String::from_utf8(self.0.lock().unwrap().clone()).unwrap();
            text.lines()
                .map(|l| {
                    l.split_whitespace()
                        .filter(|f| ["event=", "n=", "lines="].iter().any(|k| f.starts_with(k)))
                        .collect::<Vec<_>>()
                        .join(" ")
                })
                .collect()
        }
        fn hold(&self) -> MutexGuard<'_, Vec<u8>> {
            self.0.lock().unwrap()
        }
    }

    const LONG: Duration = Duration::from_secs(10);

    /// Runs `f` on another thread: whether it returned within `LONG`.
    fn returns_in_time(f: impl FnOnce() + Send + 'static) -> bool {
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            f();
            let _ = tx.send(());
        });
        rx.recv_timeout(LONG).is_ok()
    }

    #[test]
    fn every_line_is_written_in_order_before_the_writer_ends() {
        let sink = Sink::default();
        // Room for every line: none can be dropped.
        let w = LogWriter::spawn_to(LogFormat::Text, 128, LONG, sink.clone()).unwrap();
        let log = w.logger();
        for n in 0..100 {
            log.log(Level::Info, "x", &[("n", json!(n))]);
        }
        let queue = w.queue.clone();
        w.finish();
        let want: Vec<String> = (0..100).map(|n| format!("event=x n={n}")).collect();
        assert_eq!(sink.events(), want);
        // A line handed over after the writer ended is given back, for
        // its caller to write: not lost.
        assert_eq!(queue.push("late".into()), Err("late".into()));
    }

    #[test]
    fn a_stalled_writer_drops_lines_without_blocking_and_counts_them() {
        let sink = Sink::default();
        let w = LogWriter::spawn_to(LogFormat::Text, 2, LONG, sink.clone()).unwrap();
        let log = w.logger();
        let held = sink.hold();
        assert!(returns_in_time(move || {
            for n in 0..10 {
                log.log(Level::Info, "x", &[("n", json!(n))]);
            }
        }));
        drop(held);
        w.finish();
        let events = sink.events();
        // The writer took at most one batch of two before it stalled, and
        // two more fit the queue; the rest were dropped, and said so where
        // they were dropped: after the lines kept before them.
        let kept: Vec<u64> = events
            .iter()
            .filter_map(|e| e.strip_prefix("event=x n="))
            .map(|n| n.parse().unwrap())
            .collect();
        let dropped: u64 = events
            .iter()
            .filter_map(|e| e.strip_prefix("event=log-dropped lines="))
            .map(|n| n.parse::<u64>().unwrap())
            .sum();
        assert!((2..=4).contains(&kept.len()), "{events:?}");
        assert_eq!(kept.len() as u64 + dropped, 10, "{events:?}");
        assert!(kept.windows(2).all(|w| w[0] < w[1]), "{events:?}");
        assert_eq!(events[0], "event=x n=0");
    }

    #[test]
    fn a_stop_does_not_wait_past_its_deadline_for_a_stuck_output() {
        let sink = Sink::default();
        let w = LogWriter::spawn_to(LogFormat::Text, 8, Duration::from_millis(50), sink.clone())
            .unwrap();
        let log = w.logger();
        let held = sink.hold();
        log.log(Level::Info, "x", &[("n", json!(0))]);
        assert!(returns_in_time(move || w.finish()));
        drop(held);
    }
}
