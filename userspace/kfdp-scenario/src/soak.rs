//! `kfdp-scenario soak`: kfd-preemptd (started by the caller) against a
//! random, changing mix of zoo tenants ([`crate::zoo`]) on many simulated
//! nodes, checked all along. What is checked (Documentation/testing.rst,
//! "The soak"):
//!
//! * **hold**: on every node, once a latency-critical queue has had work
//!   pending for longer than `bound_ms`, every best-effort compute queue
//!   there that has existed that long is off the node;
//! * **orphan**: no queue is suspended that no owner holds (seen so twice,
//!   100 ms apart, the same ring);
//! * **tenants**: the daemon's tenants (its statistics file) are the live
//!   zoo processes that opened the device themselves, each of its class,
//!   within a few seconds; never a worker that holds only its parent's
//!   descriptor, never a process gone for seconds;
//! * **daemon**: after the last tenant is gone, the daemon holds no more
//!   descriptors than before the first came, and its memory did not grow
//!   without bound.
//!
//! A violation prints the seed and the events around it, which replay the
//! same mix (the timing differs). The kernel log is the caller's to check.

use std::{
    collections::{BTreeMap, HashMap, VecDeque},
    fs,
    io::{BufRead, BufReader, Seek, SeekFrom},
    path::PathBuf,
    process::{Child, Command},
    sync::mpsc,
    thread::{self, sleep},
    time::Duration,
};

use clap::Args;
use kfd_preempt::{Device, Handle, QueueInfo, QueueRef, QueueState, QueueType};
use serde::Serialize;

use crate::{clock::now_ns, rng::Rng, zoo::Kind};

/// `kfdp-scenario soak`.
#[derive(Debug, Clone, Args)]
pub struct SoakArgs {
    /// Simulated nodes to use (0 to N-1).
    #[arg(long, default_value_t = 16)]
    pub nodes: u32,
    /// How long tenants are started, s.
    #[arg(long, default_value_t = 120)]
    pub seconds: u64,
    /// The mix's random sequence.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// The daemon's pid (its descriptors and memory are watched).
    #[arg(long)]
    pub daemon_pid: i32,
    /// The daemon's statistics file.
    #[arg(long)]
    pub daemon_stats: PathBuf,
    /// How long latency-critical work may be pending before best-effort
    /// must be off its node, ms.
    #[arg(long, default_value_t = 500)]
    pub bound_ms: u64,
    /// Queues made again may get their old ring's address back.
    #[arg(long)]
    pub reuse_ring_addresses: bool,
    /// Working directory (the event log).
    #[arg(long, default_value = "/tmp/soak")]
    pub dir: PathBuf,
    /// Result JSON.
    #[arg(long)]
    pub out: Option<PathBuf>,
}

/// What the soak counted and found.
#[derive(Debug, Default, Serialize)]
pub struct SoakReport {
    pub seed: u64,
    pub nodes: u32,
    pub seconds: u64,
    pub bound_ms: u64,
    pub servers: u64,
    pub trainers: u64,
    pub briefs: u64,
    pub forks: u64,
    pub forks_own_queue: u64,
    pub forks_exec: u64,
    pub queue_recreations: u64,
    pub exits_mid_request: u64,
    pub checks: u64,
    /// Statistics files too old to judge the daemon's tenants by, and
    /// those the daemon's tenants were judged by.
    pub stale_stats: u64,
    pub tenants_judged: u64,
    /// The longest one look at every tenant took, ms.
    pub check_ms_max: u64,
    pub preemptions: u64,
    /// Rings a trainer made again while the daemon held its node (its
    /// other ring off the node): how many the node took off within a
    /// second, and after how long, ms (nearest rank, polled by the trainer
    /// every millisecond, from its call to the node's state).
    pub newcomers_taken: u64,
    pub newcomer_taken_ms_p50: Option<f64>,
    pub newcomer_taken_ms_p99: Option<f64>,
    pub newcomer_taken_ms_max: Option<f64>,
    /// Those that stayed on the node for that second.
    pub newcomers_outlived: u64,
    /// The VM's CPUs busy over the run, %.
    pub vm_busy_pct: f64,
    /// CPU time of the soak's own checks, and of the daemon, s.
    pub soak_cpu_s: f64,
    pub daemon_cpu_s: f64,
    pub daemon_fds_before: usize,
    pub daemon_fds_after: usize,
    pub daemon_rss_kib_before: u64,
    pub daemon_rss_kib_after: u64,
    pub violations: BTreeMap<String, u64>,
}

/// The events kept for a reproducer.
const CONTEXT: usize = 40;
/// Violations printed in full (the others are counted).
const PRINTED: u64 = 10;
/// How long the daemon may take to see a tenant come or go, ms.
const TENANT_LAG_MS: u64 = 10_000;

fn kind_name(kind: Kind) -> &'static str {
    match kind {
        Kind::Server => "server",
        Kind::Trainer => "trainer",
        Kind::Brief => "brief",
    }
}

/// A zoo process to start: built on the checking loop, started on the
/// spawner thread, since an exec of this binary takes the TCG VM a few
/// hundred milliseconds that the checks must not wait.
type Order = (Kind, u32, Command);

/// A zoo process started by the soak.
struct Zoo {
    kind: Kind,
    node: u32,
    child: Child,
    handle: Option<Handle>,
}

/// What the event log says of a process.
#[derive(Default, Clone)]
struct Life {
    /// When it opened the device itself, ms.
    opened: Option<u64>,
    /// When it exited, ms.
    exited: Option<u64>,
    /// A forked worker (the trainer's class).
    worker: bool,
    /// The class the daemon must give it.
    lc: bool,
    /// When the daemon's statistics first listed it as a tenant, ms (the
    /// snapshot's time): finding a process is the tenants check's to
    /// judge, within its lag; the hold bound counts from then.
    listed: Option<u64>,
}

/// A latency-critical queue seen with work at every look since `since`.
#[derive(Clone, Copy)]
struct Busy {
    /// The check that first saw this work, ns.
    since: u64,
    /// Its write index then: the work is unfinished while the read index
    /// is below it.
    write_then: u64,
    /// Looks that found the same work unfinished, and the last one's
    /// time (ns) and indices: what a hold violation prints.
    looks: u32,
    last_at: u64,
    last_read: u64,
    last_write: u64,
}

struct Soak<'a> {
    args: &'a SoakArgs,
    dev: Device,
    rng: Rng,
    zoo: HashMap<i32, Zoo>,
    orders: mpsc::Sender<Order>,
    started: mpsc::Receiver<(Kind, u32, std::io::Result<Child>)>,
    /// Ordered, not started yet.
    ordered: Vec<(Kind, u32)>,
    lives: HashMap<i32, Life>,
    events: PathBuf,
    events_at: u64,
    recent: VecDeque<String>,
    report: SoakReport,
    /// Per latency-critical queue (and ring) with work: since when and
    /// its write index then. The queue has had work all along for as
    /// long as its read index stays below that write index.
    busy_since: HashMap<(QueueRef, u64), Busy>,
    /// When each (handle, node, id, ring) was first seen, ns.
    first_seen: HashMap<(QueueRef, u64), u64>,
    /// When each zoo process last made a queue of an id, ns (its events):
    /// a queue made again can get the old one's ring address back, so
    /// `first_seen` alone would take it for the old one.
    made: HashMap<(i32, u32), u64>,
    /// Watched latency-critical queues and their rings.
    watched: HashMap<QueueRef, u64>,
    /// Queues seen suspended without an owner, since when, ns.
    orphans: HashMap<(QueueRef, u64), u64>,
    /// How long each ring a trainer made while its node was held took
    /// to be off the node, ms (its "taken" events).
    newcomer_taken_ms: Vec<f64>,
    /// Wall clock minus CLOCK_MONOTONIC, ms.
    realtime_offset_ms: i64,
}

fn ms_now() -> u64 {
    now_ns() / 1_000_000
}

/// Open descriptors and resident memory (KiB) of `pid`.
fn footprint(pid: i32) -> (usize, u64) {
    let fds = fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count());
    let rss = fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.split_whitespace().next()?.parse().ok())
        })
        .unwrap_or(0);
    (fds, rss)
}

impl<'a> Soak<'a> {
    fn violation(&mut self, what: &str, detail: String) {
        let n = self.report.violations.entry(what.to_string()).or_insert(0);
        *n += 1;
        let total: u64 = self.report.violations.values().sum();
        if total <= PRINTED {
            // Wall-clock seconds, the daemon's `ts=`: where to look in its log.
            let unix = (ms_now() as i64 + self.realtime_offset_ms) as f64 / 1000.0;
            println!(
                "# VIOLATION {what} at {} ms (unix {:.3}): {detail} (kfdp-scenario soak --seed {} --nodes {}); events before it:",
                ms_now(),
                unix,
                self.args.seed,
                self.args.nodes
            );
            for e in &self.recent {
                println!("#   {e}");
            }
        }
    }

    /// Orders a zoo process of `kind` on `node` from the spawner thread.
    fn spawn_on(&mut self, kind: Kind, node: u32) {
        let (life_ms, class) = match kind {
            Kind::Server => (5_000 + self.rng.next_u64() % 25_000, "latency-critical"),
            Kind::Trainer => (10_000 + self.rng.next_u64() % 30_000, "best-effort"),
            Kind::Brief => (50 + self.rng.next_u64() % 250, "best-effort"),
        };
        let exe = std::env::current_exe().unwrap_or_else(|_| PathBuf::from("kfdp-scenario"));
        let seed = self.rng.next_u64();
        let mut cmd = Command::new(exe);
        cmd.args(["zoo-tenant", "--kind", kind_name(kind)])
            .args(["--node", &node.to_string(), "--seed", &seed.to_string()])
            .args(["--life-ms", &life_ms.to_string()])
            .arg("--events")
            .arg(&self.events)
            .env("KFD_PREEMPT_CLASS", class);
        if self.args.reuse_ring_addresses {
            cmd.arg("--reuse-ring-address");
        }
        if self.orders.send((kind, node, cmd)).is_ok() {
            self.ordered.push((kind, node));
        }
    }

    /// Takes in the processes the spawner thread started.
    fn collect_started(&mut self) {
        while let Ok((kind, node, started)) = self.started.try_recv() {
            if let Some(i) = self.ordered.iter().position(|o| *o == (kind, node)) {
                self.ordered.swap_remove(i);
            }
            let Ok(child) = started else {
                continue;
            };
            let pid = child.id() as i32;
            match kind {
                Kind::Server => self.report.servers += 1,
                Kind::Trainer => self.report.trainers += 1,
                Kind::Brief => self.report.briefs += 1,
            }
            self.recent_push(format!(
                "{} {pid} spawned {} node {node}",
                ms_now(),
                kind_name(kind)
            ));
            self.life_of_new(pid).lc = kind == Kind::Server;
            self.zoo.insert(
                pid,
                Zoo {
                    kind,
                    node,
                    child,
                    handle: None,
                },
            );
        }
    }

    /// Whether a process of `kind` runs on `node`, or is being started.
    fn has(&self, kind: Kind, node: u32) -> bool {
        self.ordered.contains(&(kind, node))
            || self.zoo.values().any(|z| z.kind == kind && z.node == node)
    }

    /// The life of a process just started as `pid`: a fresh one if the pid
    /// was an exited process's. (Its own first events may have been read
    /// before its start was: its parent logs the fork after the child ran.)
    fn life_of_new(&mut self, pid: i32) -> &mut Life {
        let life = self.lives.entry(pid).or_default();
        if life.exited.is_some() {
            *life = Life::default();
        }
        life
    }

    fn recent_push(&mut self, line: String) {
        if self.recent.len() == CONTEXT {
            self.recent.pop_front();
        }
        self.recent.push_back(line);
    }

    /// Reads the event log's new lines.
    fn read_events(&mut self) {
        let Ok(mut f) = fs::File::open(&self.events) else {
            return;
        };
        if f.seek(SeekFrom::Start(self.events_at)).is_err() {
            return;
        }
        let mut r = BufReader::new(f);
        let mut line = String::new();
        while r.read_line(&mut line).is_ok_and(|n| n > 0) {
            if !line.ends_with('\n') {
                break;
            }
            self.events_at += line.len() as u64;
            self.event(line.trim_end());
            line.clear();
        }
    }

    fn event(&mut self, line: &str) {
        self.recent_push(line.to_string());
        let mut w = line.split_whitespace();
        let (Some(t), Some(pid), Some(ev)) = (w.next(), w.next(), w.next()) else {
            return;
        };
        let (Ok(t), Ok(pid)) = (t.parse::<u64>(), pid.parse::<i32>()) else {
            return;
        };
        let rest: Vec<&str> = w.collect();
        let arg = rest.first().and_then(|a| a.parse::<i32>().ok());
        match ev {
            "open" | "worker-open" => {
                self.lives.entry(pid).or_default().opened = Some(t);
            }
            "fork" => {
                self.report.forks += 1;
                if let Some(child) = arg {
                    self.life_of_new(child).worker = true;
                }
                match rest.get(1).copied() {
                    Some("own") => self.report.forks_own_queue += 1,
                    Some("execs") => self.report.forks_exec += 1,
                    _ => {}
                }
            }
            "worker-exit" => {
                if let Some(child) = arg {
                    self.lives.entry(child).or_default().exited.get_or_insert(t);
                }
            }
            // A trainer's ring made while its node was held, and how
            // long it stayed on (µs), or that it stayed on for a second.
            "taken" => {
                if let Some(us) = rest.get(2).and_then(|a| a.parse::<f64>().ok()) {
                    self.newcomer_taken_ms.push(us / 1000.0);
                }
            }
            "untaken" => self.report.newcomers_outlived += 1,
            "recreate" | "queue" => {
                if ev == "recreate" {
                    self.report.queue_recreations += 1;
                }
                if let Some(id) = rest.get(1).and_then(|a| a.parse::<u32>().ok()) {
                    self.made.insert((pid, id), t * 1_000_000);
                }
            }
            // A zoo tenant that failed: it closed the device before it said
            // why, and is going. Shown, as nothing should fail.
            "error" => {
                println!("# zoo tenant {pid} failed at {t} ms: {}", rest.join(" "));
                self.lives.entry(pid).or_default().exited.get_or_insert(t);
            }
            // Its own word that it is going: gone from then on, though a
            // zombie keeps its /proc entry until the soak reaps it.
            "exit" => {
                if rest.first() == Some(&"mid-request") {
                    self.report.exits_mid_request += 1;
                }
                self.lives.entry(pid).or_default().exited.get_or_insert(t);
            }
            _ => {}
        }
    }

    /// Reaps exited zoo processes.
    fn reap(&mut self) {
        let mut gone = Vec::new();
        for (pid, z) in self.zoo.iter_mut() {
            if z.child.try_wait().is_ok_and(|s| s.is_some()) {
                gone.push(*pid);
            }
        }
        let now = ms_now();
        for pid in gone {
            if let Some(z) = self.zoo.remove(&pid) {
                if let Some(h) = z.handle {
                    let _ = self.dev.detach(h);
                }
            }
            self.lives.entry(pid).or_default().exited.get_or_insert(now);
            self.recent_push(format!("{now} {pid} reaped"));
        }
    }

    /// One look at every zoo process's queues: the hold and orphan checks.
    fn check(&mut self) {
        self.report.checks += 1;
        let now = now_ns();
        let mut lower: Vec<(QueueInfo, u64, i32, u64)> = Vec::new();
        let mut lc_queues: Vec<(QueueRef, u64)> = Vec::new();
        let mut lc_pids: HashMap<QueueRef, i32> = HashMap::new();
        let pids: Vec<i32> = self.zoo.keys().copied().collect();
        for pid in pids {
            let Some(z) = self.zoo.get_mut(&pid) else {
                continue;
            };
            if z.handle.is_none() {
                z.handle = self.dev.attach(pid).ok().map(|t| t.into_handle());
            }
            let Some(h) = z.handle else {
                continue;
            };
            let kind = z.kind;
            let Ok(queues) = self.dev.query(h, None) else {
                continue;
            };
            let queried_at = now_ns();
            for q in queues {
                let key = (q.queue_ref(), q.ring_base_address);
                let made = self.made.get(&(pid, q.queue_id)).copied().unwrap_or(0);
                let seen = (*self.first_seen.entry(key).or_insert(now)).max(made);
                let compute = matches!(q.queue_type, QueueType::Compute | QueueType::ComputeAql);
                let state = q.state.0;
                let orphan = state & QueueState::SUSPENDED != 0
                    && state & (QueueState::OWNED | QueueState::OWNED_OTHER) == 0;
                if orphan {
                    let since = *self.orphans.entry(key).or_insert(now);
                    if now - since >= 100_000_000 {
                        self.orphans.remove(&key);
                        self.violation(
                            "orphan",
                            format!(
                                "queue {} of pid {pid} on gpu {:#x} suspended, no owner holds it",
                                q.queue_id, q.gpu_id
                            ),
                        );
                    }
                } else {
                    self.orphans.remove(&key);
                }
                if !compute {
                    continue;
                }
                if kind == Kind::Server {
                    lc_queues.push(key);
                    lc_pids.insert(key.0, pid);
                } else {
                    lower.push((q, seen, pid, queried_at));
                }
            }
        }
        self.rewatch(&lc_queues);
        let Ok(sample) = self.dev.sample() else {
            return;
        };
        let sampled_at = now_ns();
        let bound = self.args.bound_ms * 1_000_000;
        let busy_since = self.busy_since(&sample.queues, now);
        // Per node, since when one of its latency-critical queues has had
        // work without a break: its own watch samples only now and then,
        // and an idle gap between two requests, which the daemon rightly
        // answers by resuming, may fall between two looks.
        // Per node: since when, and which queue (pid, id, ring).
        let mut pending_since: HashMap<u32, (Busy, (i32, u32, u64))> = HashMap::new();
        for (key, busy) in busy_since {
            // Demand of a queue known for the bound already, of a process
            // the daemon has listed for as long: a queue younger than that
            // may not be found yet.
            let listed = lc_pids
                .get(&key.0)
                .is_some_and(|pid| self.listed_for(*pid, now, bound));
            let made = lc_pids
                .get(&key.0)
                .and_then(|pid| self.made.get(&(*pid, key.0.queue_id)))
                .copied()
                .unwrap_or(0);
            let known = listed
                && self
                    .first_seen
                    .get(&key)
                    .is_some_and(|&t| now.saturating_sub(t.max(made)) > bound);
            if known {
                let pid = lc_pids.get(&key.0).copied().unwrap_or(0);
                let who = (pid, key.0.queue_id, key.1);
                let at = pending_since.entry(key.0.gpu_id).or_insert((busy, who));
                if busy.since < at.0.since {
                    *at = (busy, who);
                }
            }
        }
        for (q, seen, pid, queried_at) in lower {
            let Some(&(busy, (lc_pid, lc_id, lc_ring))) = pending_since.get(&q.gpu_id) else {
                continue;
            };
            let since = busy.since;
            // A best-effort process is judged, too, from when the daemon
            // listed it.
            let listed = self.listed_for(pid, now, bound);
            let held_long = listed && now - since > bound && now - seen > bound;
            if held_long && q.state.0 & QueueState::ACTIVE != 0 {
                let ms = (now - since) / 1_000_000;
                self.violation(
                    "hold",
                    format!(
                        "gpu {:#x}: latency-critical work pending for {ms} ms (queue {lc_id} of pid {lc_pid}, ring {lc_ring:#x}; first seen at {} ms up to write index {}, {} looks since, the last at {} ms read {} write {}), best-effort queue {} of pid {pid} (handle {}, ring {:#x}, seen {} ms ago, active when queried at {} ms) still on the node; the check began at {} ms, sampled at {} ms",
                        q.gpu_id,
                        busy.since / 1_000_000,
                        busy.write_then,
                        busy.looks,
                        busy.last_at / 1_000_000,
                        busy.last_read,
                        busy.last_write,
                        q.queue_id,
                        q.handle.0,
                        q.ring_base_address,
                        (now - seen) / 1_000_000,
                        queried_at / 1_000_000,
                        now / 1_000_000,
                        sampled_at / 1_000_000,
                    ),
                );
                // Once per episode: the node's queues count from now.
                pending_since.insert(
                    q.gpu_id,
                    (Busy { since: now, ..busy }, (lc_pid, lc_id, lc_ring)),
                );
                for ((lc, _), at) in self.busy_since.iter_mut() {
                    if lc.gpu_id == q.gpu_id {
                        at.since = now;
                    }
                }
            }
        }
    }

    /// Whether the daemon's statistics have listed `pid` for longer than
    /// `bound` ns at `now`.
    fn listed_for(&self, pid: i32, now: u64, bound: u64) -> bool {
        self.lives
            .get(&pid)
            .and_then(|l| l.listed)
            .is_some_and(|at| now.saturating_sub(at * 1_000_000) > bound)
    }

    /// Brings [`Soak::busy_since`] up to `sample`: a queue keeps its start
    /// while the work it had then is unfinished, starts again when that
    /// work is done and it has more, and is dropped when it is idle. Returns
    /// each busy queue's start.
    fn busy_since(
        &mut self,
        sample: &[kfd_preempt::Activity],
        now: u64,
    ) -> Vec<((QueueRef, u64), Busy)> {
        let mut busy = Vec::new();
        let mut kept = HashMap::new();
        for a in sample.iter().filter(|a| a.pending && !a.gone) {
            let key = (a.queue, self.watched.get(&a.queue).copied().unwrap_or(0));
            let mut start = match self.busy_since.get(&key) {
                Some(b) if a.read_index < b.write_then => Busy {
                    looks: b.looks + 1,
                    ..*b
                },
                _ => Busy {
                    since: now,
                    write_then: a.write_index,
                    looks: 1,
                    last_at: now,
                    last_read: a.read_index,
                    last_write: a.write_index,
                },
            };
            start.last_at = now;
            start.last_read = a.read_index;
            start.last_write = a.write_index;
            kept.insert(key, start);
            busy.push((key, start));
        }
        self.busy_since = kept;
        busy
    }

    /// Watches exactly the latency-critical queues `now` (their rings):
    /// a queue made again at another ring is watched anew.
    fn rewatch(&mut self, now: &[(QueueRef, u64)]) {
        let want: HashMap<QueueRef, u64> = now.iter().copied().collect();
        let gone: Vec<QueueRef> = self
            .watched
            .keys()
            .filter(|q| !want.contains_key(q))
            .copied()
            .collect();
        if !gone.is_empty() {
            let _ = self.dev.unwatch(&gone);
            for q in &gone {
                self.watched.remove(q);
            }
        }
        let new: Vec<QueueRef> = want
            .iter()
            .filter(|(q, ring)| self.watched.get(q) != Some(ring))
            .map(|(q, _)| *q)
            .collect();
        if new.is_empty() {
            return;
        }
        if let Ok(report) = self.dev.watch(&new) {
            for (q, o) in report.outcomes {
                if o.is_success() || o == kfd_preempt::Outcome::Already {
                    self.watched.insert(q, want[&q]);
                }
            }
        }
    }

    /// The daemon's tenants against the zoo's processes.
    fn check_tenants(&mut self) {
        let Ok(text) = fs::read_to_string(&self.args.daemon_stats) else {
            return;
        };
        // The events up to now, read after the statistics: a tenant that
        // said "exit" and closed the device before the daemon's snapshot is
        // known to have gone. The loop's own read came before its check of
        // every zoo process's queues, which takes seconds in the debug VM.
        self.read_events();
        let Ok(v) = serde_json::from_str::<serde_json::Value>(&text) else {
            return;
        };
        let Some(written) = v["written_at_unix_ms"].as_i64() else {
            return;
        };
        let at = (written - self.realtime_offset_ms).max(0) as u64;
        // A snapshot the daemon took long ago (its loop starved by the VM)
        // says nothing of now.
        if ms_now().saturating_sub(at) > TENANT_LAG_MS {
            self.report.stale_stats += 1;
            return;
        }
        self.report.tenants_judged += 1;
        let mut listed: HashMap<i32, String> = HashMap::new();
        for t in v["tenants"].as_array().map(Vec::as_slice).unwrap_or(&[]) {
            if let (Some(pid), Some(p)) = (t["pid"].as_i64(), t["priority"].as_str()) {
                listed.insert(pid as i32, p.to_string());
            }
        }
        for pid in listed.keys() {
            if let Some(l) = self.lives.get_mut(pid) {
                l.listed.get_or_insert(at);
            }
        }
        let lives = self.lives.clone();
        for (pid, prio) in &listed {
            let life = lives.get(pid);
            match life {
                None => {}
                Some(l) if l.worker && l.opened.is_none() => self.violation(
                    "tenants",
                    format!("pid {pid} held only its parent's descriptor, and is a tenant"),
                ),
                Some(l) if l.exited.is_some_and(|e| e + TENANT_LAG_MS < at) => self.violation(
                    "tenants",
                    format!(
                        "pid {pid} exited {} ms before the daemon still listed it",
                        at - l.exited.unwrap_or(at)
                    ),
                ),
                Some(l) => {
                    let want = if l.lc {
                        "latency-critical"
                    } else {
                        "best-effort"
                    };
                    if l.opened.is_some() && prio != want {
                        self.violation(
                            "tenants",
                            format!("pid {pid} is {prio}, its class is {want}"),
                        );
                    }
                }
            }
        }
        for (pid, l) in &lives {
            let long_lived =
                l.opened.is_some_and(|o| o + TENANT_LAG_MS < at) && l.exited.is_none_or(|e| e > at);
            if long_lived && !listed.contains_key(pid) && self.alive(*pid) {
                let mut pids: Vec<&i32> = listed.keys().collect();
                pids.sort();
                self.violation(
                    "tenants",
                    format!(
                        "pid {pid} opened the device at {} ms, {} ms before the daemon's statistics of {at} ms (read at {} ms) listed only {pids:?}",
                        l.opened.unwrap_or(at),
                        at - l.opened.unwrap_or(at),
                        ms_now()
                    ),
                );
            }
        }
        if let Some(p) = v["counters"]["preemptions"].as_u64() {
            self.report.preemptions = p;
        }
    }

    /// Whether `pid` runs: a zombie (exited, not reaped by the soak yet)
    /// does not, and the daemon rightly dropped it already (its pidfd).
    fn alive(&self, pid: i32) -> bool {
        let Ok(stat) = fs::read_to_string(format!("/proc/{pid}/stat")) else {
            return false;
        };
        // The state follows the ")" that ends the command name.
        let state = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.trim_start().chars().next());
        if matches!(state, Some('Z' | 'X') | None) {
            return false;
        }
        // Exiting: its address space is gone (exit_mm) before it is a
        // zombie, and with it its KFD process, which the daemon may drop
        // at once (a held tenant is queried every held_scan_interval_ms).
        // /proc/PID/status lists no VmSize then.
        fs::read_to_string(format!("/proc/{pid}/status"))
            .is_ok_and(|s| s.lines().any(|l| l.starts_with("VmSize:")))
    }
}

/// Runs the soak; Ok(false) if it found a violation.
pub fn run(args: &SoakArgs) -> crate::Result<bool> {
    fs::create_dir_all(&args.dir)?;
    let events = args.dir.join("events.log");
    let _ = fs::remove_file(&events);
    let realtime_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_millis() as i64;
    let (orders, ordered_rx) = mpsc::channel::<Order>();
    let (started_tx, started) = mpsc::channel();
    let spawner = thread::Builder::new()
        .name("soak-spawner".into())
        .spawn(move || {
            for (kind, node, mut cmd) in ordered_rx {
                if started_tx.send((kind, node, cmd.spawn())).is_err() {
                    return;
                }
            }
        })?;
    let mut s = Soak {
        args,
        dev: Device::open()?,
        rng: Rng::new(args.seed),
        zoo: HashMap::new(),
        orders,
        started,
        ordered: Vec::new(),
        lives: HashMap::new(),
        events,
        events_at: 0,
        recent: VecDeque::new(),
        report: SoakReport {
            seed: args.seed,
            nodes: args.nodes,
            seconds: args.seconds,
            bound_ms: args.bound_ms,
            ..Default::default()
        },
        busy_since: HashMap::new(),
        first_seen: HashMap::new(),
        made: HashMap::new(),
        watched: HashMap::new(),
        orphans: HashMap::new(),
        newcomer_taken_ms: Vec::new(),
        realtime_offset_ms: realtime_ms - ms_now() as i64,
    };
    (s.report.daemon_fds_before, s.report.daemon_rss_kib_before) = footprint(args.daemon_pid);
    let ticks_before = crate::cpu::CpuTicks::read().ok();
    let start = now_ns();
    let end = start + args.seconds * 1_000_000_000;
    let mut next_brief = start;
    let mut next_tenants = start;
    // Servers wait a moment after one exits: a node without one for a
    // while is part of the mix.
    let mut server_due: HashMap<u32, u64> =
        (0..args.nodes).step_by(2).map(|n| (n, start)).collect();
    while now_ns() < end {
        s.collect_started();
        s.reap();
        let now = now_ns();
        for node in 0..args.nodes {
            let (trainer, server) = (s.has(Kind::Trainer, node), s.has(Kind::Server, node));
            if !trainer {
                s.spawn_on(Kind::Trainer, node);
            }
            if let Some(due) = server_due.get(&node).copied() {
                if server {
                    server_due.insert(node, now + (s.rng.uniform() * 2e9) as u64);
                } else if now >= due {
                    s.spawn_on(Kind::Server, node);
                }
            }
        }
        if now >= next_brief {
            next_brief = now + (s.rng.exponential(1.0) * 1e9) as u64;
            let node = (s.rng.next_u64() % u64::from(args.nodes)) as u32;
            s.spawn_on(Kind::Brief, node);
        }
        s.read_events();
        let began = now_ns();
        s.check();
        s.report.check_ms_max = s.report.check_ms_max.max((now_ns() - began) / 1_000_000);
        if now >= next_tenants {
            next_tenants = now + 1_000_000_000;
            s.check_tenants();
        }
        sleep(Duration::from_millis(25));
    }
    if let (Some(a), Ok(b)) = (ticks_before, crate::cpu::CpuTicks::read()) {
        let total = (b.busy() + b.idle + b.iowait).saturating_sub(a.busy() + a.idle + a.iowait);
        s.report.vm_busy_pct =
            100.0 * b.busy().saturating_sub(a.busy()) as f64 / total.max(1) as f64;
    }
    s.report.soak_cpu_s = crate::cpu::self_cpu().map_or(0.0, |d| d.as_secs_f64());
    s.report.daemon_cpu_s = fs::read_to_string(format!("/proc/{}/stat", args.daemon_pid))
        .ok()
        .and_then(|t| {
            // Fields 14 and 15 (utime, stime), after the parenthesised comm.
            let rest = t.rsplit_once(')')?.1;
            let f: Vec<&str> = rest.split_whitespace().collect();
            Some((f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?) as f64 / 100.0)
        })
        .unwrap_or(0.0);
    // The end: every tenant killed (mid-request, some of them), then the
    // daemon given time to see them go.
    let (closed, _) = mpsc::channel();
    drop(std::mem::replace(&mut s.orders, closed));
    let _ = spawner.join();
    s.collect_started();
    for z in s.zoo.values_mut() {
        let _ = z.child.kill();
    }
    let settle = now_ns() + 5_000_000_000;
    while now_ns() < settle {
        s.reap();
        s.read_events();
        sleep(Duration::from_millis(100));
    }
    s.check_tenants();
    (s.report.daemon_fds_after, s.report.daemon_rss_kib_after) = footprint(args.daemon_pid);
    if s.report.tenants_judged == 0 {
        let d = format!(
            "never judged: all {} statistics files were too old",
            s.report.stale_stats
        );
        s.violation("tenants", d);
    }
    let r = &s.report;
    if r.daemon_fds_after > r.daemon_fds_before + 2 {
        let d = format!(
            "{} descriptors before the first tenant, {} after the last",
            r.daemon_fds_before, r.daemon_fds_after
        );
        s.violation("daemon", d);
    }
    let r = &s.report;
    if r.daemon_rss_kib_after > 2 * r.daemon_rss_kib_before + 16 * 1024 {
        let d = format!(
            "{} KiB resident before, {} KiB after",
            r.daemon_rss_kib_before, r.daemon_rss_kib_after
        );
        s.violation("daemon", d);
    }
    s.report.newcomers_taken = s.newcomer_taken_ms.len() as u64;
    s.report.newcomer_taken_ms_p50 = crate::stats::percentile(&s.newcomer_taken_ms, 0.5);
    s.report.newcomer_taken_ms_p99 = crate::stats::percentile(&s.newcomer_taken_ms, 0.99);
    s.report.newcomer_taken_ms_max = crate::stats::percentile(&s.newcomer_taken_ms, 1.0);
    let r = &s.report;
    let ms = |v: Option<f64>| v.map_or("n/a".to_string(), |v| format!("{v:.0}"));
    println!(
        "# soak: best-effort rings made while their node was held: {} taken off the node after p50 {} ms, p99 {} ms, longest {} ms; {} still on it after 1 s",
        r.newcomers_taken,
        ms(r.newcomer_taken_ms_p50),
        ms(r.newcomer_taken_ms_p99),
        ms(r.newcomer_taken_ms_max),
        r.newcomers_outlived
    );
    println!(
        "# soak: seed {} nodes {} {} s: {} servers, {} trainers, {} brief processes; {} forks ({} with a queue of their own, {} exec), {} queue re-creations, {} exits mid-request; {} preemptions; {} checks (longest {} ms); VM busy {:.0} %, soak {:.1} s CPU, daemon {:.1} s; violations {:?}",
        r.seed, r.nodes, r.seconds, r.servers, r.trainers, r.briefs, r.forks, r.forks_own_queue,
        r.forks_exec, r.queue_recreations, r.exits_mid_request, r.preemptions, r.checks,
        r.check_ms_max, r.vm_busy_pct, r.soak_cpu_s, r.daemon_cpu_s, r.violations
    );
    if let Some(out) = &args.out {
        crate::results::write_json(out, r)?;
    }
    Ok(r.violations.is_empty())
}
