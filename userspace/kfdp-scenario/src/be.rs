//! The best-effort tenant: a low-priority ring kept `depth` dispatches deep,
//! and the node time it got done inside a fixed window.

use std::{path::PathBuf, thread::sleep, time::Duration};

use kfd_preempt::sim::{PacketTimes, SimRing, SimTenant};

use crate::{
    clock::{from_ms, now_ns, ns},
    lc::announce,
    results::BeResult,
    Result,
};

/// Priority of the BE ring.
const PRIORITY: u32 = 1;
/// Poll interval.
const POLL: Duration = Duration::from_millis(1);
/// [`POLL`] in ms: the lag from a retirement to the next publication, for
/// the model ([`crate::contention_replay`]).
pub const POLL_MS: f64 = POLL.as_secs_f64() * 1000.0;

/// Parameters of `kfdp-scenario be`.
#[derive(Debug, Clone, clap::Args)]
pub struct BeArgs {
    /// Simulated node index.
    #[arg(long, default_value_t = 0)]
    pub node: u32,
    /// Node time of one dispatch, ms.
    #[arg(long, default_value_t = 250.0)]
    pub work_ms: f64,
    /// Dispatches kept outstanding.
    #[arg(long, default_value_t = 1)]
    pub depth: u32,
    /// How often completions are looked for, ms. With more than one
    /// dispatch outstanding a slower poll loses no node time and spares
    /// the CPU (many tenants in one VM).
    #[arg(long, default_value_t = 1)]
    pub poll_ms: u32,
    /// Length of the measurement window, s.
    #[arg(long, default_value_t = 20.0)]
    pub duration_s: f64,
    /// Written (pid, queue_id, gpu_id as JSON) once the ring exists.
    #[arg(long)]
    pub ready_file: Option<PathBuf>,
    /// Start the window only once this file exists (after ready_file).
    #[arg(long)]
    pub go_file: Option<PathBuf>,
}

/// Dispatches retired and counted so far.
struct Tally {
    /// Next packet index to look at.
    next: u64,
    /// Retired with end_ns inside the window.
    completed: u64,
    /// When the last counted dispatch ended (the window's start before
    /// one was): never before the window, as counted ones end inside it.
    last_end_ns: u64,
    /// Node time, ns, between the counted dispatches (and before the
    /// first): the node did not run this tenant's work.
    idle_ns: u64,
}

/// What the tally reads of a ring: the simulated node's, or a test's.
trait Retired {
    /// Packets retired so far.
    fn read_index(&self) -> u64;
    /// The times the node wrote in packet `index`'s slot.
    fn times(&self, index: u64) -> PacketTimes;
}

impl Retired for SimRing<'_> {
    fn read_index(&self) -> u64 {
        SimRing::read_index(self)
    }
    fn times(&self, index: u64) -> PacketTimes {
        SimRing::times(self, index)
    }
}

impl Tally {
    /// Counts the packets retired since the last call whose end falls in
    /// `[start, end]`; returns the read index it counted up to.
    fn update(&mut self, ring: &impl Retired, start: u64, end: u64) -> u64 {
        let read = ring.read_index();
        while self.next < read {
            let t = ring.times(self.next);
            if in_window(t.end_ns, start, end) {
                self.completed += 1;
                self.idle_ns += idle_before(t.start_ns, self.last_end_ns);
                self.last_end_ns = t.end_ns;
            }
            self.next += 1;
        }
        read
    }

    /// Counts what retired, then says how many dispatches to submit to
    /// keep `depth` outstanding. The refill is reckoned from the read
    /// index just counted, not a newer one: a dispatch that retires in
    /// between is counted at the next look, so its slot must not be
    /// written yet. (Reckoned from a fresh read index, the refill wrote
    /// over such slots, and a loaded VM lost up to a tenth of BE's
    /// dispatches from the count.)
    fn look(&mut self, ring: &impl Retired, written: u64, window: (u64, u64), depth: u32) -> u64 {
        let counted = self.update(ring, window.0, window.1);
        u64::from(depth).saturating_sub(written.saturating_sub(counted))
    }
}

/// Node time between the end of the tenant's previous dispatch (or the
/// window's start) and the start of the next. With the node to itself,
/// the tenant's ring was empty for that long (it had not refilled it in
/// time); otherwise its queue was also off the node, or others' work ran.
/// A dispatch resumed after a preemption starts where it first started,
/// so the time it was off the node is not in here.
fn idle_before(start_ns: u64, after_ns: u64) -> u64 {
    start_ns.saturating_sub(after_ns)
}

/// Whether a dispatch that retired at `end_ns` counts.
fn in_window(end_ns: u64, start: u64, end: u64) -> bool {
    (start..=end).contains(&end_ns)
}

/// Runs the BE tenant. Only dispatches that retired inside the window
/// count, whole; the one running when the window closes counts nothing
/// (no partial credit), so the throughput is low by at most
/// `depth x work_ms / duration`, and the same in every mode compared; or
/// high by the part of the first dispatch that ran before the window
/// opened (the time from its doorbell to reading the clock).
pub fn run(args: &BeArgs) -> Result<BeResult> {
    if args.depth == 0 || args.depth > 1024 {
        return Err("--depth must be 1 to 1024".into());
    }
    let work = from_ms("--work-ms", args.work_ms)?;
    if args.poll_ms == 0 || args.poll_ms > 1000 {
        return Err("--poll-ms must be 1 to 1000".into());
    }
    let poll = Duration::from_millis(args.poll_ms.into());
    let window = Duration::try_from_secs_f64(args.duration_s)
        .map_err(|_| "--duration-s must be a finite, non-negative number")?;
    // The smallest power of two that holds `depth` packets.
    let packets = args.depth.next_power_of_two();

    let tenant = SimTenant::open()?;
    let ring = tenant.create_ring(args.node, PRIORITY, packets)?;
    if let Some(path) = &args.ready_file {
        announce(path, "be", &ring)?;
    }
    if let Some(path) = &args.go_file {
        crate::lc::await_go(path)?;
    }

    // The window opens once the first dispatches are queued, so a tenant
    // the VM deschedules between `go` and queueing its first work (its one
    // CPU serves every tenant and the daemon) is not charged for that
    // delay. Later it loses node time only if its ring runs dry.
    let mut tally = Tally {
        next: ring.write_index(),
        completed: 0,
        last_end_ns: 0,
        idle_ns: 0,
    };
    let mut tag = u64::from(args.depth);
    let first: Vec<_> = (0..tag).map(|t| (work, t)).collect();
    ring.submit(&first)?;
    let start = now_ns();
    let end = start + ns(window);
    tally.last_end_ns = start;
    loop {
        let missing = tally.look(&ring, ring.write_index(), (start, end), args.depth);
        if now_ns() >= end {
            break;
        }
        if missing > 0 {
            let batch: Vec<_> = (tag..tag + missing).map(|t| (work, t)).collect();
            ring.submit(&batch)?;
            tag += missing;
        }
        sleep(poll);
    }
    // A dispatch that retired just before the end may not have been seen
    // yet: one more look after the node had time to publish it.
    sleep(poll);
    tally.update(&ring, start, end);

    let work_done_ms = tally.completed as f64 * args.work_ms;
    let q = ring.queue();
    Ok(BeResult {
        role: "be".into(),
        dispatches_completed: tally.completed,
        work_done_ms,
        duration_s: args.duration_s,
        throughput: if args.duration_s > 0.0 {
            work_done_ms / (args.duration_s * 1000.0)
        } else {
            0.0
        },
        idle_between_ms: tally.idle_ns as f64 / 1e6,
        work_ms: args.work_ms,
        depth: args.depth,
        node: args.node,
        queue_id: q.queue_id,
        gpu_id: q.gpu_id,
    })
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use super::*;

    /// A ring of eight packets whose node retires one more dispatch
    /// every time its read index is looked at (the tenant is always a
    /// little late), each taking `WORK` ns from the one before. A slot
    /// shows the times of the packet last written to it, none until that
    /// packet retired.
    struct LateRing {
        slots: [Cell<u64>; 8],
        read: Cell<u64>,
        written: Cell<u64>,
    }

    const WORK: u64 = 1_000;

    impl LateRing {
        fn new() -> Self {
            Self {
                slots: Default::default(),
                read: Cell::new(0),
                written: Cell::new(0),
            }
        }

        fn submit(&self, n: u64) {
            for _ in 0..n {
                let i = self.written.get();
                self.slots[(i % 8) as usize].set(i);
                self.written.set(i + 1);
            }
        }
    }

    impl Retired for LateRing {
        fn read_index(&self) -> u64 {
            let read = self.read.get();
            self.read.set((read + 1).min(self.written.get()));
            read
        }
        fn times(&self, index: u64) -> PacketTimes {
            let packet = self.slots[(index % 8) as usize].get();
            if packet >= self.read.get() {
                return PacketTimes::default();
            }
            PacketTimes {
                submit_ns: 0,
                start_ns: packet * WORK,
                end_ns: (packet + 1) * WORK,
                tag: packet,
            }
        }
    }

    #[test]
    fn a_dispatch_retired_while_refilling_is_still_counted() {
        let ring = LateRing::new();
        let mut tally = Tally {
            next: 0,
            completed: 0,
            last_end_ns: 0,
            idle_ns: 0,
        };
        ring.submit(8);
        // The window opens at 1 ns: a slot written over before it was
        // counted shows no end (0), which must not count.
        for _ in 0..100 {
            let missing = tally.look(&ring, ring.written.get(), (1, u64::MAX), 8);
            ring.submit(missing);
        }
        tally.update(&ring, 1, u64::MAX);
        // Every dispatch seen retired was counted, back to back.
        assert!(tally.next >= 100);
        assert_eq!(tally.completed, tally.next);
        assert_eq!(tally.idle_ns, 0);
        // And the ring was kept full: no more than 8 outstanding.
        assert!(ring.written.get() - tally.next <= 8);
    }

    #[test]
    fn idle_is_the_gap_before_a_start_and_never_negative() {
        assert_eq!(idle_before(1_300, 1_000), 300);
        assert_eq!(idle_before(1_000, 1_000), 0);
        // A dispatch that started before the window (or the previous
        // end, as a resumed one does) adds nothing.
        assert_eq!(idle_before(900, 1_000), 0);
    }

    #[test]
    fn the_window_is_closed_at_both_ends() {
        assert!(in_window(100, 100, 200));
        assert!(in_window(200, 100, 200));
        assert!(!in_window(99, 100, 200));
        assert!(!in_window(201, 100, 200));
        // Never retired (end_ns 0): not counted.
        assert!(!in_window(0, 100, 200));
    }
}
