//! The thread that writes the log lines, so that the SCHED_FIFO loop never
//! waits on stderr.
//!
//! The daemon logs every decision: hundreds of lines a second on a busy
//! host. Under systemd, stderr is a stream socket to journald, and a
//! journal that stops reading (a slow disk, a journald restart) blocks the
//! writer once the socket's buffer is full. Written from the main loop,
//! that would stop the reactions to latency-critical work; written from
//! here, it only fills a bounded queue. The loop formats each line and
//! hands it over without waiting: a line that meets a full queue is
//! dropped and counted, and the count is logged (`log-dropped`) when the
//! writer catches up.

use std::{
    io::{self, Write},
    sync::{
        atomic::{AtomicU64, Ordering},
        mpsc::{sync_channel, Receiver, SyncSender, TrySendError},
        Arc,
    },
    thread::JoinHandle,
};

use serde_json::json;

use crate::{
    config::LogFormat,
    log::{Level, Logger},
};

/// How many lines may wait for the writer: seconds of a busy host's lines.
const QUEUE_LINES: usize = 4096;

enum Msg {
    Line(String),
    /// Everything before it is written: the thread ends.
    Stop,
}

/// The sending side, held by every [`Logger`] that writes through the
/// thread.
#[derive(Debug, Clone)]
pub struct LineQueue {
    tx: SyncSender<Msg>,
    dropped: Arc<AtomicU64>,
}

impl LineQueue {
    /// Hands `line` to the writer without waiting. A full queue drops it
    /// (counted); a writer that has ended gives it back, for the caller to
    /// write itself.
    pub fn push(&self, line: String) -> Result<(), String> {
        match self.tx.try_send(Msg::Line(line)) {
            Ok(()) => Ok(()),
            Err(TrySendError::Full(_)) => {
                self.dropped.fetch_add(1, Ordering::Relaxed);
                Ok(())
            }
            Err(TrySendError::Disconnected(Msg::Line(line))) => Err(line),
            Err(TrySendError::Disconnected(Msg::Stop)) => Ok(()),
        }
    }
}

/// The log thread (`kfd-preemptd-log`). Dropping it writes every line
/// handed over before, then ends the thread; lines logged after that are
/// written by their caller.
#[derive(Debug)]
pub struct LogWriter {
    format: LogFormat,
    queue: LineQueue,
    thread: Option<JoinHandle<()>>,
}

impl LogWriter {
    /// Starts the thread, writing to stderr. It takes the calling thread's
    /// scheduling policy: start it before the loop takes SCHED_FIFO.
    pub fn spawn(format: LogFormat) -> io::Result<Self> {
        Self::spawn_to(format, QUEUE_LINES, io::stderr())
    }

    /// [`spawn`](Self::spawn) writing to `out`, with room for `capacity`
    /// lines.
    pub fn spawn_to(
        format: LogFormat,
        capacity: usize,
        out: impl Write + Send + 'static,
    ) -> io::Result<Self> {
        let (tx, rx) = sync_channel(capacity);
        let dropped = Arc::new(AtomicU64::new(0));
        let counted = dropped.clone();
        let thread = std::thread::Builder::new()
            .name("kfd-preemptd-log".into())
            .spawn(move || write_lines(rx, out, format, &counted))?;
        Ok(LogWriter {
            format,
            queue: LineQueue { tx, dropped },
            thread: Some(thread),
        })
    }

    /// A logger whose lines this thread writes.
    pub fn logger(&self) -> Logger {
        Logger::queued(self.format, self.queue.clone())
    }

    /// Writes what was handed over, and ends the thread.
    pub fn finish(self) {}
}

impl Drop for LogWriter {
    fn drop(&mut self) {
        if let Some(thread) = self.thread.take() {
            // Waits for room: the lines before it are written first.
            let _ = self.queue.tx.send(Msg::Stop);
            let _ = thread.join();
        }
    }
}

/// The thread's body: each line in one write, and the count of lines
/// dropped meanwhile after it.
fn write_lines(rx: Receiver<Msg>, mut out: impl Write, format: LogFormat, dropped: &AtomicU64) {
    let report = |out: &mut dyn Write| {
        let n = dropped.swap(0, Ordering::Relaxed);
        if n > 0 {
            let line = Logger::new(format).line(
                Level::Warn,
                "log-dropped",
                &[
                    ("lines", json!(n)),
                    ("why", json!("the log writer fell behind")),
                ],
            );
            write_line(out, &line);
        }
    };
    for msg in rx {
        match msg {
            Msg::Line(line) => {
                write_line(&mut out, &line);
                report(&mut out);
            }
            Msg::Stop => break,
        }
    }
    report(&mut out);
}

/// One write per line, so that lines from a restart or another writer on
/// the same journal stream do not interleave; a closed stderr is not a
/// reason to stop scheduling.
fn write_line(out: &mut dyn Write, line: &str) {
    let _ = out.write_all(format!("{line}\n").as_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Mutex, MutexGuard};

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
        fn lines(&self) -> Vec<String> {
            let text = String::from_utf8(self.0.lock().unwrap().clone()).unwrap();
            text.lines().map(str::to_owned).collect()
        }
        fn hold(&self) -> MutexGuard<'_, Vec<u8>> {
            self.0.lock().unwrap()
        }
    }

    fn events(lines: &[String]) -> Vec<String> {
        lines
            .iter()
            .map(|l| {
                l.split_whitespace()
                    .filter(|f| {
                        f.starts_with("event=") || f.starts_with("n=") || f.starts_with("lines=")
                    })
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .collect()
    }

    #[test]
    fn every_line_is_written_in_order_before_the_writer_ends() {
        let sink = Sink::default();
        // Room for every line: none can be dropped.
        let w = LogWriter::spawn_to(LogFormat::Text, 128, sink.clone()).unwrap();
        let log = w.logger();
        for n in 0..100 {
            log.log(Level::Info, "x", &[("n", json!(n))]);
        }
        let queue = w.queue.clone();
        w.finish();
        let want: Vec<String> = (0..100).map(|n| format!("event=x n={n}")).collect();
        assert_eq!(events(&sink.lines()), want);
        // A line handed over after the writer ended is given back, for
        // its caller to write: not lost.
        assert_eq!(queue.push("late".into()), Err("late".into()));
    }

    #[test]
    fn a_stalled_writer_drops_lines_without_blocking_and_counts_them() {
        let sink = Sink::default();
        let w = LogWriter::spawn_to(LogFormat::Text, 2, sink.clone()).unwrap();
        let log = w.logger();
        let held = sink.hold();
        // The writer takes at most one line and stalls on the sink; the
        // queue holds two; the rest are dropped, and none of this waits.
        for n in 0..10 {
            log.log(Level::Info, "x", &[("n", json!(n))]);
        }
        drop(held);
        w.finish();
        let written = events(&sink.lines());
        let logged: Vec<&String> = written
            .iter()
            .filter(|e| e.starts_with("event=x"))
            .collect();
        let dropped: u64 = written
            .iter()
            .filter_map(|e| e.strip_prefix("event=log-dropped lines="))
            .map(|n| n.parse::<u64>().unwrap())
            .sum();
        assert!((2..=3).contains(&logged.len()), "{written:?}");
        assert_eq!(logged.len() as u64 + dropped, 10, "{written:?}");
        // The first lines are the ones kept.
        assert_eq!(logged[0], "event=x n=0");
    }
}
