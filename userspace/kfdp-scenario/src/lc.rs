//! The latency-critical tenant: open-loop Poisson arrivals of requests, each
//! a chain of dispatches submitted together, on one high-priority ring. A
//! request's latency runs from its arrival time (when it was due) to the
//! node's `end_ns` of its last dispatch, so neither a late submission nor
//! when this loop notices the completion changes it.
//!
//! With `--gap-ms`, a request is a sequence rather than a chain: each
//! dispatch after the first is submitted that long after the one before it
//! ended (a request that returns to the host between its kernels, as a
//! decode step does), and requests are served one after the other.

use std::{
    collections::VecDeque,
    path::{Path, PathBuf},
    thread::sleep,
    time::Duration,
};

use kfd_preempt::{
    hint::HintClient,
    sim::{PacketTimes, SimRing, SimTenant},
};

use crate::{
    clock::{from_ms, now_ns, ns},
    results::{write_atomically, LcResult},
    rng::Rng,
    stats, Result,
};

/// Ring size: room for 1024 / chain requests outstanding.
const RING_PACKETS: u32 = 1024;
/// Priority of the LC ring.
const PRIORITY: u32 = 9;
/// Poll interval for completions.
// Latency comes from the node's end_ns, not from when this loop notices:
// polling only bounds how late completions are collected, and a tighter
// loop costs the VM's one CPU more than it tells.
const POLL: Duration = Duration::from_millis(1);
/// How long to wait for outstanding requests after the window.
const DRAIN: Duration = Duration::from_secs(10);
/// A submission this much after its arrival time counts as late.
const LATE_NS: u64 = 1_000_000;

/// Parameters of `kfdp-scenario lc`.
#[derive(Debug, Clone, clap::Args)]
pub struct LcArgs {
    /// Simulated node index.
    #[arg(long, default_value_t = 0)]
    pub node: u32,
    /// Mean requests per second.
    #[arg(long, default_value_t = 20.0)]
    pub rate: f64,
    /// Dispatches per request, submitted together.
    #[arg(long, default_value_t = 3)]
    pub chain: u32,
    /// Host time between the dispatches of a request, ms: each is submitted
    /// this long after the previous one ended. 0: a chain submitted at once.
    #[arg(long, default_value_t = 0.0)]
    pub gap_ms: f64,
    /// Node time of one dispatch, ms.
    #[arg(long, default_value_t = 5.0)]
    pub work_ms: f64,
    /// Length of the arrival window, s.
    #[arg(long, default_value_t = 20.0)]
    pub duration_s: f64,
    /// Seed of the arrival process.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Written (pid, queue_id, gpu_id as JSON) once the ring exists.
    #[arg(long)]
    pub ready_file: Option<PathBuf>,
    /// Start the window only once this file exists (after ready_file).
    #[arg(long)]
    pub go_file: Option<PathBuf>,
    /// Host time between a request's arrival and its first dispatch, ms:
    /// the inputs parsed and copied (not with --gap-ms).
    #[arg(long, default_value_t = 0.0)]
    pub prep_ms: f64,
    /// kfd-preemptd's hint socket: at each arrival, say (without waiting
    /// for the answer) that work comes on this ring's node within the
    /// preparation and as long again, or 5 ms more, whichever is longer.
    #[arg(long)]
    pub hint: Option<PathBuf>,
}

/// A request submitted and not yet seen complete.
struct Pending {
    /// When the request was due (its arrival), not when this process got
    /// round to submitting it: a request submitted late was still waiting
    /// (open loop, no coordinated omission).
    arrival_ns: u64,
    /// When this process called to submit it (its clock before writing
    /// the packets).
    called_ns: u64,
    first_index: u64,
    /// The first dispatch's times, read once it retired: its slot may be
    /// reused before the last one retires.
    first: Option<PacketTimes>,
    last_index: u64,
}

/// The completed requests, in arrival order: each one's latency and where
/// its start went (see [`LcResult`]).
#[derive(Default)]
struct Completed {
    latencies_ms: Vec<f64>,
    submit_delay_ms: Vec<f64>,
    doorbell_ms: Vec<f64>,
    node_wait_ms: Vec<f64>,
}

impl Completed {
    /// Records a request that arrived at `arrival_ns` and ended at `end_ns`
    /// (its last dispatch's end); its first dispatch, whose times are
    /// `first`, this process called to submit at `called_ns`. All on the
    /// node's clock (CLOCK_MONOTONIC).
    fn record(&mut self, arrival_ns: u64, called_ns: u64, first: PacketTimes, end_ns: u64) {
        let ms = |from: u64, to: u64| to.saturating_sub(from) as f64 / 1e6;
        self.latencies_ms.push(ms(arrival_ns, end_ns));
        self.submit_delay_ms.push(ms(arrival_ns, first.submit_ns));
        self.doorbell_ms.push(ms(called_ns, first.submit_ns));
        self.node_wait_ms.push(ms(first.submit_ns, first.start_ns));
    }
}

/// Records every request whose last packet retired, oldest first (a ring
/// retires in order). Called before each submit, so the slots read are not
/// reused yet.
fn drain(ring: &SimRing<'_>, outstanding: &mut VecDeque<Pending>, done: &mut Completed) {
    let read = ring.read_index();
    for p in outstanding.iter_mut() {
        if p.first_index >= read {
            break;
        }
        if p.first.is_none() {
            p.first = Some(ring.times(p.first_index));
        }
    }
    while let Some(p) = outstanding.front() {
        if p.last_index >= read {
            break;
        }
        let end = ring.times(p.last_index).end_ns;
        let first = p.first.unwrap_or_else(|| ring.times(p.first_index));
        done.record(p.arrival_ns, p.called_ns, first, end);
        outstanding.pop_front();
    }
}

/// Writes the ready file: who to attach and which queue to watch.
pub fn announce(path: &Path, role: &str, ring: &SimRing<'_>) -> Result<()> {
    let q = ring.queue();
    let text = serde_json::json!({
        "role": role,
        "pid": std::process::id(),
        "queue_id": q.queue_id,
        "gpu_id": q.gpu_id,
    });
    write_atomically(path, &format!("{text}\n"))
}

/// How often a tenant looks for the start signal: twenty tenants looking
/// every 5 ms kept the debug VM's one CPU so busy that the harness took a
/// minute to give the signal. A window that starts up to this late is
/// still the same window within 0.25 % of 20 s, and alike in every mode.
const GO_POLL: Duration = Duration::from_millis(50);
/// How long a tenant waits for the start signal: the harness waits for
/// the daemon to attach every tenant first, which takes tens of seconds in
/// the debug VM.
const GO_TIMEOUT: Duration = Duration::from_secs(300);

/// Waits until `path` exists (the harness's start signal), so that tenants
/// started one after the other measure the same window (within
/// [`GO_POLL`]); at most [`GO_TIMEOUT`].
pub fn await_go(path: &Path) -> Result<()> {
    let deadline = std::time::Instant::now() + GO_TIMEOUT;
    while !path.exists() {
        if std::time::Instant::now() > deadline {
            return Err(format!(
                "{} did not appear within {} s",
                path.display(),
                GO_TIMEOUT.as_secs()
            )
            .into());
        }
        std::thread::sleep(GO_POLL);
    }
    Ok(())
}

/// Runs the LC tenant.
pub fn run(args: &LcArgs) -> Result<LcResult> {
    if !(args.rate.is_finite() && args.rate > 0.0) {
        return Err("--rate must be a positive number of requests per second".into());
    }
    if args.chain == 0 || args.chain > RING_PACKETS {
        return Err(format!("--chain must be 1 to {RING_PACKETS}").into());
    }
    let work = from_ms("--work-ms", args.work_ms)?;
    let gap = from_ms("--gap-ms", args.gap_ms)?;
    let prep = from_ms("--prep-ms", args.prep_ms)?;
    if !gap.is_zero() && (!prep.is_zero() || args.hint.is_some()) {
        return Err("--prep-ms and --hint are for chained requests, not with --gap-ms".into());
    }
    let window = Duration::try_from_secs_f64(args.duration_s)
        .map_err(|_| "--duration-s must be a finite, non-negative number")?;

    let tenant = SimTenant::open()?;
    let ring = tenant.create_ring(args.node, PRIORITY, RING_PACKETS)?;
    if let Some(path) = &args.ready_file {
        announce(path, "lc", &ring)?;
    }
    if let Some(path) = &args.go_file {
        await_go(path)?;
    }

    let hints = match &args.hint {
        Some(path) => Some(Hinter {
            client: HintClient::connect(path)
                .map_err(|e| format!("--hint {}: {e}", path.display()))?,
            within: (2 * prep).max(prep + Duration::from_millis(5)),
            node: ring.queue().gpu_id,
            given_ns: Vec::new(),
            refused: 0,
        }),
        None => None,
    };
    let mut rng = Rng::new(args.seed);
    let Outcome {
        requests,
        late,
        done:
            Completed {
                latencies_ms,
                submit_delay_ms,
                doorbell_ms,
                node_wait_ms,
            },
        incomplete,
        hints,
    } = if gap.is_zero() {
        chained(args, &ring, work, prep, hints, window, &mut rng)?
    } else {
        sequenced(args, &ring, work, gap, window, &mut rng)?
    };
    if incomplete > 0 {
        eprintln!(
            "kfdp-scenario lc: {incomplete} request(s) unfinished {} s after the window; left out of the latencies",
            DRAIN.as_secs()
        );
    }
    if late > 0 {
        eprintln!("kfdp-scenario lc: {late} request(s) submitted more than 1 ms late");
    }

    let (p50_ms, p99_ms, p999_ms) = stats::tail(&latencies_ms);
    let q = ring.queue();
    Ok(LcResult {
        role: "lc".into(),
        requests,
        latencies_ms,
        submit_delay_ms,
        doorbell_ms,
        node_wait_ms,
        p50_ms,
        p99_ms,
        p999_ms,
        work_ms_per_request: f64::from(args.chain) * args.work_ms,
        duration_s: args.duration_s,
        rate: args.rate,
        chain: args.chain,
        gap_ms: args.gap_ms,
        work_ms: args.work_ms,
        seed: args.seed,
        incomplete,
        late_submits: late,
        node: args.node,
        queue_id: q.queue_id,
        gpu_id: q.gpu_id,
        prep_ms: args.prep_ms,
        hints_refused: hints.as_ref().map_or(0, |h| h.refused + h.client.refused()),
        hint_within_ms: hints.as_ref().map_or(0.0, |h| h.within.as_secs_f64() * 1e3),
        hints_ns: hints.map(|h| h.given_ns).unwrap_or_default(),
    })
}

/// The hints a tenant gives at each arrival.
struct Hinter {
    client: HintClient,
    /// How soon the work is said to come.
    within: Duration,
    /// The ring's node.
    node: u32,
    /// When each hint was given, ns.
    given_ns: Vec<u64>,
    /// Hints that could not be sent (the daemon refused others: the
    /// client counts those).
    refused: u64,
}

impl Hinter {
    /// Says that a request's work is coming, without waiting for the
    /// daemon. The hint runs its course: the work that follows spends it,
    /// or its time ends it.
    fn give(&mut self) {
        let at = now_ns();
        match self.client.notify(self.within, &[self.node]) {
            Ok(()) => self.given_ns.push(at),
            Err(e) => {
                if self.refused == 0 {
                    eprintln!("kfdp-scenario lc: a hint could not be given: {e}");
                }
                self.refused += 1;
            }
        }
    }
}

/// The arrival window starting now: its start and end, ns.
fn window_from_now(window: Duration) -> (u64, u64) {
    let start = now_ns();
    (start, start + ns(window))
}

/// The time to the next Poisson arrival at `rate` a second, ns.
fn arrival_gap_ns(rate: f64, rng: &mut Rng) -> u64 {
    (rng.exponential(rate) * 1e9) as u64
}

/// What a run of requests gives.
struct Outcome {
    /// Requests that arrived in the window.
    requests: u64,
    /// Requests submitted more than [`LATE_NS`] late.
    late: u64,
    /// The completed requests.
    done: Completed,
    /// Requests still unfinished after the drain.
    incomplete: u64,
    /// The hints given, if any.
    hints: Option<Hinter>,
}

/// Open-loop requests whose dispatches are submitted together, each
/// `prep` after its arrival (a hint given at the arrival, with `hints`).
fn chained(
    args: &LcArgs,
    ring: &SimRing<'_>,
    work: Duration,
    prep: Duration,
    mut hints: Option<Hinter>,
    window: Duration,
    rng: &mut Rng,
) -> Result<Outcome> {
    let (start, end) = window_from_now(window);
    let mut next_arrival = start + arrival_gap_ns(args.rate, rng);
    let mut outstanding = VecDeque::new();
    // Arrived requests being prepared: each one's arrival.
    let mut preparing: VecDeque<u64> = VecDeque::new();
    let mut done = Completed::default();
    let (mut requests, mut late) = (0u64, 0u64);
    let mut batch = Vec::with_capacity(args.chain as usize);

    while next_arrival < end || !preparing.is_empty() {
        drain(ring, &mut outstanding, &mut done);
        let now = now_ns();
        while next_arrival < end && next_arrival <= now {
            if let Some(h) = hints.as_mut() {
                h.give();
            }
            preparing.push_back(next_arrival);
            // Arrivals follow their own schedule, not the submit times.
            next_arrival += arrival_gap_ns(args.rate, rng);
        }
        let Some(&arrival) = preparing.front() else {
            sleep(POLL.min(Duration::from_nanos(
                next_arrival.saturating_sub(now).max(1),
            )));
            continue;
        };
        let due = arrival + ns(prep);
        if now < due {
            let wake = due.min(next_arrival);
            sleep(POLL.min(Duration::from_nanos(wake.saturating_sub(now).max(1))));
            continue;
        }
        if ring.space() < args.chain {
            // Open loop with a full ring: the request waits for room (and
            // will count as late).
            sleep(POLL);
            continue;
        }
        preparing.pop_front();
        batch.clear();
        batch.resize(args.chain as usize, (work, requests));
        let submitted_ns = now_ns();
        let first = ring.submit(&batch)?;
        if submitted_ns - due > LATE_NS {
            late += 1;
        }
        outstanding.push_back(Pending {
            arrival_ns: arrival,
            called_ns: submitted_ns,
            first_index: first,
            first: None,
            last_index: first + u64::from(args.chain) - 1,
        });
        requests += 1;
    }

    let deadline = now_ns() + ns(DRAIN);
    loop {
        drain(ring, &mut outstanding, &mut done);
        if outstanding.is_empty() || now_ns() >= deadline {
            break;
        }
        sleep(POLL);
    }
    Ok(Outcome {
        requests,
        late,
        done,
        incomplete: outstanding.len() as u64,
        hints,
    })
}

/// The request a sequenced run is serving.
struct Serving {
    /// When it arrived.
    arrival: u64,
    /// Its index: the tag of its dispatches.
    id: u64,
    /// Dispatches it has left to submit.
    left: u32,
    /// The ring index of its first dispatch, once submitted, and when this
    /// process called to submit it.
    first: Option<(u64, u64)>,
    /// The ring index of its dispatch on the node, if one is.
    on_node: Option<u64>,
}

/// Open-loop requests served one after the other, each a sequence of
/// `args.chain` dispatches with `gap` of host time between one's end and
/// the next one's submission.
fn sequenced(
    args: &LcArgs,
    ring: &SimRing<'_>,
    work: Duration,
    gap: Duration,
    window: Duration,
    rng: &mut Rng,
) -> Result<Outcome> {
    let (start, end) = window_from_now(window);
    let drain_end = end.saturating_add(ns(DRAIN));
    // Arrived requests waiting to be served: their arrival and index.
    let mut arrivals: VecDeque<(u64, u64)> = VecDeque::new();
    let mut next_arrival = start + arrival_gap_ns(args.rate, rng);
    let mut done = Completed::default();
    let (mut requests, mut late) = (0u64, 0u64);
    let mut current: Option<Serving> = None;
    // When the next dispatch of `current` may be submitted.
    let mut not_before = 0u64;
    // Since when this tenant has had no request to serve: a request that
    // waited for the one before it is queued, not late.
    let mut free_since = start;
    loop {
        let now = now_ns();
        while next_arrival < end && next_arrival <= now {
            arrivals.push_back((next_arrival, requests));
            requests += 1;
            next_arrival += arrival_gap_ns(args.rate, rng);
        }
        if let Some(c) = current.as_mut() {
            if let Some(index) = c.on_node.filter(|&i| i < ring.read_index()) {
                let ended = ring.times(index).end_ns;
                c.on_node = None;
                if c.left == 0 {
                    // The first dispatch's slot is still intact: one request
                    // is on the ring at a time.
                    // Always set: the submit that set `on_node` set it.
                    if let Some((first_index, called)) = c.first {
                        done.record(c.arrival, called, ring.times(first_index), ended);
                    }
                    current = None;
                    free_since = now;
                } else {
                    not_before = ended.saturating_add(ns(gap));
                }
            }
        }
        if current.is_none() {
            if let Some((arrival, id)) = arrivals.pop_front() {
                if now.saturating_sub(arrival.max(free_since)) > LATE_NS {
                    late += 1;
                }
                current = Some(Serving {
                    arrival,
                    id,
                    left: args.chain,
                    first: None,
                    on_node: None,
                });
                not_before = 0;
            }
        }
        if let Some(c) = current.as_mut().filter(|c| c.on_node.is_none()) {
            if now >= not_before {
                let called = now_ns();
                let index = ring.submit(&[(work, c.id)])?;
                c.left -= 1;
                c.first.get_or_insert((index, called));
                c.on_node = Some(index);
                continue;
            }
        }
        let more_arrivals = next_arrival < end;
        if current.is_none() && arrivals.is_empty() && !more_arrivals {
            break;
        }
        if now >= drain_end {
            break;
        }
        let wake = if current.as_ref().is_some_and(|c| c.on_node.is_none()) {
            not_before
        } else if more_arrivals {
            next_arrival.min(now + ns(POLL))
        } else {
            now + ns(POLL)
        };
        sleep(POLL.min(Duration::from_nanos(wake.saturating_sub(now).max(1))));
    }
    Ok(Outcome {
        requests,
        late,
        done,
        incomplete: arrivals.len() as u64 + u64::from(current.is_some()),
        hints: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_requests_start_splits_into_the_hosts_part_and_the_nodes() {
        let mut done = Completed::default();
        let first = PacketTimes {
            submit_ns: 3_000_000,
            start_ns: 7_500_000,
            end_ns: 9_000_000,
            tag: 0,
        };
        // Arrived at 1 ms, submitted from 2.5 ms, seen by the node at 3 ms,
        // ran from 7.5 ms, the last dispatch ended at 20 ms.
        done.record(1_000_000, 2_500_000, first, 20_000_000);
        assert_eq!(done.latencies_ms, [19.0]);
        assert_eq!(done.submit_delay_ms, [2.0]);
        assert_eq!(done.doorbell_ms, [0.5]);
        assert_eq!(done.node_wait_ms, [4.5]);
    }
}
