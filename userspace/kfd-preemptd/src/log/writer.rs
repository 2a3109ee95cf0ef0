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
//! The loop formats each line and queues it without waiting and without a
//! lock it could find held by a preempted writer: the queue is a lock-free
//! stack that producers push to and the writer empties with one atomic
//! swap. Nor does the loop wake the writer: the writer looks every 50 ms
//! and writes what it found in writes of up to 4 KiB, so a line costs the
//! loop no system call, and four lines a preemption no thread wakeups. A
//! line that meets a full queue, or that a failed write lost, is dropped
//! and counted; the writer logs the count (`log-dropped`) after the lines
//! it kept, once it has caught up.
//!
//! `tracing-appender`'s non-blocking writer does the same job with a
//! bounded channel whose worker sleeps in `recv`: each line that finds it
//! asleep pays a wakeup on the logging thread. `examples/log_cost.rs`
//! measures both from a thread logging as the loop does (bursts of four
//! lines, 1 ms apart); `Documentation/results/log-cost.rst` holds the last
//! figures. This queue is kept because that wakeup would land on the
//! SCHED_FIFO loop at every preemption.

use std::{
    io::{self, Write},
    os::fd::OwnedFd,
    ptr,
    sync::{
        atomic::{AtomicPtr, AtomicU64, AtomicUsize, Ordering},
        mpsc, Arc,
    },
    thread::JoinHandle,
    time::Duration,
};

use rustix::{
    event::{eventfd, poll, EventfdFlags, PollFd, PollFlags, Timespec},
    io::Errno,
};
use serde_json::json;

use crate::{
    config::LogFormat,
    log::{Level, Logger},
};

/// How the writer works.
#[derive(Debug, Clone, Copy)]
pub struct Tuning {
    /// How many lines may wait for the writer.
    pub capacity: usize,
    /// How often the writer looks for lines: how late a line may reach
    /// the journal.
    pub flush: Duration,
    /// How long a stop waits for the queued lines to be written: a journal
    /// that does not read must not keep the daemon from exiting.
    pub deadline: Duration,
}

impl Default for Tuning {
    fn default() -> Self {
        Tuning {
            // 80 flushes' worth at 1000 lines a second.
            capacity: 4096,
            flush: Duration::from_millis(50),
            deadline: Duration::from_secs(2),
        }
    }
}

/// A queued line, in the stack of those waiting for the writer.
struct Node {
    line: String,
    /// The line queued before it.
    next: *mut Node,
}

/// The `head` of a closed stack: misaligned for a [`Node`], so never one.
const CLOSED: *mut Node = ptr::without_provenance_mut(1);

/// # Invariants
///
/// `head` is null, [`CLOSED`], or the top of a chain of nodes made by
/// `Box::into_raw`, linked by `next` down to null, that only the stack
/// owns: producers only push (a node is theirs until their
/// compare-exchange publishes it), and the writer takes the whole chain
/// with one swap. With pushes and whole takes only, a node's address
/// coming back (ABA) is harmless: a push that sees the same `head` links to
/// the node now there. `head` is only ever changed by read-modify-write
/// operations, so each push's release heads a release sequence that the
/// take's acquire synchronizes with, lines pushed under later ones
/// included. Once `CLOSED`, it stays so.
#[derive(Debug)]
struct Shared {
    head: AtomicPtr<Node>,
    /// Lines in the stack, or being pushed.
    queued: AtomicUsize,
    capacity: usize,
    /// Written once, to stop the writer: it need not wait for its next
    /// look, and the writer knows a stop from a look by it being readable.
    stop: OwnedFd,
    /// Lines dropped since the writer last said so.
    dropped: AtomicU64,
}

impl Shared {
    /// Pushes `line`, or gives it back if the stack is closed.
    fn push(&self, line: String) -> Result<(), String> {
        let node = Box::into_raw(Box::new(Node {
            line,
            next: ptr::null_mut(),
        }));
        let mut head = self.head.load(Ordering::Relaxed);
        loop {
            if head == CLOSED {
                // SAFETY: `node` came from `Box::into_raw` and was never
                // published, so it is still only ours.
                let node = unsafe { Box::from_raw(node) };
                return Err(node.line);
            }
            // SAFETY: `node` is unpublished, so still only ours.
            unsafe { (*node).next = head };
            match self
                .head
                .compare_exchange_weak(head, node, Ordering::Release, Ordering::Relaxed)
            {
                Ok(_) => return Ok(()),
                Err(now) => head = now,
            }
        }
    }

    /// Every queued line, oldest first; with `close`, later pushes are
    /// refused.
    fn take(&self, close: bool) -> Vec<String> {
        let empty = if close { CLOSED } else { ptr::null_mut() };
        let mut node = self.head.swap(empty, Ordering::Acquire);
        let mut lines = Vec::new();
        while !node.is_null() && node != CLOSED {
            // SAFETY: the swap made the whole chain ours, each node came
            // from `Box::into_raw`, and the acquire makes its contents
            // visible (type invariants).
            let owned = unsafe { Box::from_raw(node) };
            node = owned.next;
            lines.push(owned.line);
        }
        self.queued.fetch_sub(lines.len(), Ordering::Relaxed);
        lines.reverse();
        lines
    }

    fn is_closed(&self) -> bool {
        self.head.load(Ordering::Relaxed) == CLOSED
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        // Lines queued after the writer died.
        drop(self.take(true));
    }
}

/// The sending side, held by every [`Logger`] that writes through the
/// thread.
#[derive(Debug, Clone)]
pub(crate) struct LineQueue(Arc<Shared>);

impl LineQueue {
    /// Hands `line` to the writer without waiting: a full queue drops it
    /// (counted). A writer that has ended (or died) gives it back, for the
    /// caller to write itself.
    pub(crate) fn push(&self, line: String) -> Result<(), String> {
        let shared = &self.0;
        if shared.queued.fetch_add(1, Ordering::Relaxed) >= shared.capacity {
            shared.queued.fetch_sub(1, Ordering::Relaxed);
            if shared.is_closed() {
                return Err(line);
            }
            shared.dropped.fetch_add(1, Ordering::Relaxed);
            return Ok(());
        }
        match shared.push(line) {
            Ok(()) => Ok(()),
            Err(line) => {
                shared.queued.fetch_sub(1, Ordering::Relaxed);
                Err(line)
            }
        }
    }
}

/// The log thread (`kfd-preemptd-log`). Dropping it writes every line
/// queued before (for at most a deadline), then ends the thread; lines
/// logged after that are written by their caller.
#[derive(Debug)]
pub struct LogWriter {
    format: LogFormat,
    queue: LineQueue,
    tuning: Tuning,
    done: mpsc::Receiver<()>,
    thread: Option<JoinHandle<()>>,
}

impl LogWriter {
    /// Starts the thread, writing to stderr. It takes the calling thread's
    /// scheduling policy: start it before the loop takes SCHED_FIFO.
    pub fn spawn(format: LogFormat) -> io::Result<Self> {
        Self::spawn_to(format, Tuning::default(), io::stderr())
    }

    /// [`spawn`](Self::spawn) writing to `out`, tuned.
    pub fn spawn_to(
        format: LogFormat,
        tuning: Tuning,
        out: impl Write + Send + 'static,
    ) -> io::Result<Self> {
        let shared = Arc::new(Shared {
            head: AtomicPtr::new(ptr::null_mut()),
            queued: AtomicUsize::new(0),
            capacity: tuning.capacity,
            stop: eventfd(0, EventfdFlags::CLOEXEC)?,
            dropped: AtomicU64::new(0),
        });
        let (done_tx, done) = mpsc::channel();
        let theirs = shared.clone();
        let thread = std::thread::Builder::new()
            .name("kfd-preemptd-log".into())
            .spawn(move || {
                write_lines(&theirs, out, format, tuning.flush);
                let _ = done_tx.send(());
            })?;
        Ok(LogWriter {
            format,
            queue: LineQueue(shared),
            tuning,
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
        // An eventfd write blocks only at a count near 2^64.
        let _ = rustix::io::write(&self.queue.0.stop, &1u64.to_ne_bytes());
        match self.done.recv_timeout(self.tuning.deadline) {
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

/// Closes the queue when the writer ends, by returning or by a panic.
struct CloseOnExit<'a>(&'a Shared);

impl Drop for CloseOnExit<'_> {
    fn drop(&mut self) {
        // Nothing is left after a stop; after a panic, the lines cannot be
        // written.
        drop(self.0.take(true));
    }
}

/// The most bytes written at once: whole lines up to `PIPE_BUF`, which a
/// pipe takes in one piece, so that they do not interleave with another
/// writer's on the same stream (a longer line goes alone).
const WRITE_BYTES: usize = 4096;

/// The thread's body: every `flush`, or at once for a stop, takes every
/// queued line, writes them, then the count of lines dropped meanwhile. The
/// last take, at a stop, closes the queue in the same swap: a line is
/// either in it or given back to its caller.
fn write_lines(shared: &Shared, mut out: impl Write, format: LogFormat, flush: Duration) {
    let _close = CloseOnExit(shared);
    // Zero would spin.
    let flush = flush.max(Duration::from_millis(1));
    let flush = Timespec {
        tv_sec: flush.as_secs().try_into().unwrap_or(i64::MAX),
        tv_nsec: flush.subsec_nanos().into(),
    };
    loop {
        let mut fds = [PollFd::new(&shared.stop, PollFlags::IN)];
        let stopping = match poll(&mut fds, Some(&flush)) {
            // A look, or a stop: the eventfd says which.
            Ok(_) => !fds[0].revents().is_empty(),
            Err(Errno::INTR) => false,
            // Not expected: what is queued is written, later lines go back
            // to their callers.
            Err(_) => true,
        };
        let mut lines = shared.take(stopping);
        let dropped = shared.dropped.swap(0, Ordering::Relaxed);
        if dropped > 0 {
            lines.push(Logger::new(format).line(
                Level::Warn,
                "log-dropped",
                &[
                    ("lines", json!(dropped)),
                    ("why", json!("the log writer fell behind")),
                ],
            ));
        }
        let unwritten = write_batch(&mut out, &lines);
        if unwritten > 0 {
            // Counted as dropped, and said so at the next look; the
            // log-dropped line, last, stands for `dropped` lines.
            let lost = if dropped > 0 {
                dropped + unwritten as u64 - 1
            } else {
                unwritten as u64
            };
            shared.dropped.fetch_add(lost, Ordering::Relaxed);
        }
        if stopping {
            return;
        }
    }
}

/// Writes `lines`, each with its newline, in writes of whole lines of at
/// most [`WRITE_BYTES`]. A failed write (a closed stderr is not a reason to
/// stop scheduling) ends the batch: how many lines were not written.
fn write_batch(out: &mut impl Write, lines: &[String]) -> usize {
    let mut chunk = String::new();
    let (mut written, mut in_chunk) = (0, 0);
    for line in lines {
        if !chunk.is_empty() && chunk.len() + line.len() + 1 > WRITE_BYTES {
            if out.write_all(chunk.as_bytes()).is_err() {
                return lines.len() - written;
            }
            written += in_chunk;
            chunk.clear();
            in_chunk = 0;
        }
        chunk.push_str(line);
        chunk.push('\n');
        in_chunk += 1;
    }
    if !chunk.is_empty() && out.write_all(chunk.as_bytes()).is_err() {
        return lines.len() - written;
    }
    0
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{atomic::AtomicBool, Mutex, MutexGuard};

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

    /// Room for `capacity` lines, `deadline` to stop, and a look every
    /// millisecond, so that the tests do not wait for the writer.
    fn tuned(capacity: usize, deadline: Duration) -> Tuning {
        Tuning {
            capacity,
            flush: Duration::from_millis(1),
            deadline,
        }
    }

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
        let w = LogWriter::spawn_to(LogFormat::Text, tuned(128, LONG), sink.clone()).unwrap();
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
        let w = LogWriter::spawn_to(LogFormat::Text, tuned(2, LONG), sink.clone()).unwrap();
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
        let w = LogWriter::spawn_to(
            LogFormat::Text,
            tuned(8, Duration::from_millis(50)),
            sink.clone(),
        )
        .unwrap();
        let log = w.logger();
        let held = sink.hold();
        log.log(Level::Info, "x", &[("n", json!(0))]);
        assert!(returns_in_time(move || w.finish()));
        drop(held);
    }

    #[test]
    fn lines_from_many_threads_are_all_written_each_in_its_order() {
        let sink = Sink::default();
        let w = LogWriter::spawn_to(LogFormat::Text, tuned(100_000, LONG), sink.clone()).unwrap();
        let threads: Vec<_> = (0..4)
            .map(|t| {
                let log = w.logger();
                std::thread::spawn(move || {
                    for n in 0..2000 {
                        log.log(Level::Info, "x", &[("n", json!(t * 10_000 + n))]);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        w.finish();
        let mut last = [None::<u64>; 4];
        let mut count = 0;
        for e in sink.events() {
            let n: u64 = e.strip_prefix("event=x n=").unwrap().parse().unwrap();
            let t = (n / 10_000) as usize;
            assert!(
                last[t].is_none_or(|l| l < n),
                "thread {t}: {n} after {last:?}"
            );
            last[t] = Some(n);
            count += 1;
        }
        assert_eq!(count, 8000);
    }

    /// Output that fails as a panic would.
    struct Panics;

    impl Write for Panics {
        fn write(&mut self, _: &[u8]) -> io::Result<usize> {
            panic!("the log writer's output panicked (as the test wants)");
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_writer_that_died_gives_lines_back() {
        let w = LogWriter::spawn_to(LogFormat::Text, tuned(8, LONG), Panics).unwrap();
        let queue = w.queue.clone();
        assert_eq!(queue.push("first".into()), Ok(()));
        let start = std::time::Instant::now();
        while !queue.0.is_closed() {
            assert!(start.elapsed() < LONG, "the writer did not end");
            std::thread::yield_now();
        }
        assert_eq!(queue.push("late".into()), Err("late".into()));
        w.finish();
    }

    #[test]
    fn each_batch_written_makes_room_again() {
        let sink = Sink::default();
        let w = LogWriter::spawn_to(LogFormat::Text, tuned(4, LONG), sink.clone()).unwrap();
        let log = w.logger();
        let start = std::time::Instant::now();
        for n in 0..100 {
            log.log(Level::Info, "x", &[("n", json!(n))]);
            while w.queue.0.queued.load(Ordering::Relaxed) > 0 {
                assert!(start.elapsed() < LONG, "line {n} was never taken");
                std::thread::yield_now();
            }
        }
        w.finish();
        let want: Vec<String> = (0..100).map(|n| format!("event=x n={n}")).collect();
        assert_eq!(sink.events(), want);
    }

    #[test]
    fn a_line_pushed_while_the_writer_stops_is_written_or_given_back() {
        let sink = Sink::default();
        let w = LogWriter::spawn_to(LogFormat::Text, tuned(1 << 20, LONG), sink.clone()).unwrap();
        let queue = w.queue.clone();
        let producer = std::thread::spawn(move || {
            let mut accepted = 0u64;
            while queue.push(format!("event=x n={accepted}")).is_ok() {
                accepted += 1;
            }
            accepted
        });
        std::thread::sleep(Duration::from_millis(20));
        w.finish();
        let accepted = producer.join().unwrap();
        assert!(accepted > 0);
        assert_eq!(sink.events().len() as u64, accepted);
    }

    #[test]
    fn lines_below_the_least_level_are_not_written() {
        let sink = Sink::default();
        let w = LogWriter::spawn_to(LogFormat::Text, tuned(8, LONG), sink.clone()).unwrap();
        let log = w.logger().at_least(Level::Warn);
        log.log(Level::Info, "decision", &[]);
        log.log(Level::Warn, "failure", &[]);
        log.log(Level::Error, "fatal", &[]);
        w.finish();
        assert_eq!(sink.events(), ["event=failure", "event=fatal"]);
    }

    #[test]
    fn a_stop_does_not_wait_for_the_writers_next_look() {
        let sink = Sink::default();
        let tuning = Tuning {
            flush: Duration::from_secs(60),
            ..tuned(8, LONG)
        };
        let w = LogWriter::spawn_to(LogFormat::Text, tuning, sink.clone()).unwrap();
        w.logger().log(Level::Info, "x", &[("n", json!(0))]);
        let start = std::time::Instant::now();
        w.finish();
        assert!(start.elapsed() < LONG);
        assert_eq!(sink.events(), ["event=x n=0"]);
    }

    /// Records the size of each write.
    #[derive(Clone, Default)]
    struct Sizes(Arc<std::sync::Mutex<Vec<Vec<u8>>>>);

    impl Write for Sizes {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.0.lock().unwrap().push(buf.to_vec());
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn lines_are_written_whole_in_writes_of_at_most_pipe_buf() {
        let out = Sizes::default();
        let lines: Vec<String> = (0..200).map(|n| format!("{n:0>99}")).collect();
        let mut sink = out.clone();
        assert_eq!(write_batch(&mut sink, &lines), 0);
        let writes = out.0.lock().unwrap().clone();
        assert!(writes.len() > 1 && writes.len() < 200, "{}", writes.len());
        assert!(writes
            .iter()
            .all(|w| w.len() <= WRITE_BYTES && w.ends_with(b"\n")));
        assert_eq!(
            writes.concat(),
            lines
                .join("\n")
                .into_bytes()
                .into_iter()
                .chain([b'\n'])
                .collect::<Vec<u8>>()
        );
        // A line longer than a write goes alone, whole.
        let long = vec!["a".repeat(5000), "b".into()];
        out.0.lock().unwrap().clear();
        assert_eq!(write_batch(&mut sink, &long), 0);
        let sizes: Vec<usize> = out.0.lock().unwrap().iter().map(Vec::len).collect();
        assert_eq!(sizes, [5001, 2]);
    }

    /// Fails its first write, as a stderr that went away and came back.
    #[derive(Clone, Default)]
    struct FailsOnce {
        failed: Arc<AtomicBool>,
        sink: Sink,
    }

    impl Write for FailsOnce {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            if !self.failed.swap(true, Ordering::Relaxed) {
                return Err(io::Error::from(io::ErrorKind::BrokenPipe));
            }
            self.sink.write(buf)
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn lines_a_failed_write_lost_are_counted_as_dropped() {
        let out = FailsOnce::default();
        let w = LogWriter::spawn_to(LogFormat::Text, tuned(8, LONG), out.clone()).unwrap();
        let log = w.logger();
        for n in 0..3 {
            log.log(Level::Info, "x", &[("n", json!(n))]);
        }
        let start = std::time::Instant::now();
        while !out.failed.load(Ordering::Relaxed) {
            assert!(start.elapsed() < LONG, "nothing was written");
            std::thread::yield_now();
        }
        log.log(Level::Info, "x", &[("n", json!(3))]);
        w.finish();
        let events = out.sink.events();
        let kept = events.iter().filter(|e| e.starts_with("event=x")).count() as u64;
        let dropped: u64 = events
            .iter()
            .filter_map(|e| e.strip_prefix("event=log-dropped lines="))
            .map(|n| n.parse::<u64>().unwrap())
            .sum();
        assert!(dropped > 0, "{events:?}");
        assert_eq!(kept + dropped, 4, "{events:?}");
    }
}
