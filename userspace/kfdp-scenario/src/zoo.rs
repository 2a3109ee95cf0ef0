//! The tenant zoo: simulated tenants that live as ROCm processes do
//! (`../shared/design/real-tenants.md`; Documentation/simulated-node.rst,
//! "Processes"), for `kfdp-scenario soak`. Each is a process of its own,
//! started by the soak as `kfdp-scenario zoo-tenant`:
//!
//! * a **server** (latency-critical): opens the device, creates its ring only
//!   at its first request, serves requests (now and then a long one), now
//!   and then destroys its ring and makes it again (the same lowest free id
//!   at a new ring), and may exit in the middle of a request;
//! * a **trainer** (best-effort): a pool of two compute rings and an SDMA
//!   queue kept busy; forks workers that hold its descriptor (some open one
//!   of their own and create a queue, as a DataLoader worker that runs HIP;
//!   some exec, which closes the inherited close-on-exec descriptor), and
//!   now and then makes one of its rings again;
//! * a **brief** process: opens the device, creates a queue, is gone within
//!   a few hundred milliseconds.
//!
//! Each writes what it did, one line a change, to the soak's event log:
//! `<CLOCK_MONOTONIC ms> <pid> <event> [detail]`, whole lines in single
//! `O_APPEND` writes.

use std::{
    fs::{File, OpenOptions},
    io::Write,
    path::{Path, PathBuf},
    thread::sleep,
    time::Duration,
};

use clap::{Args, ValueEnum};
use kfd_preempt::{
    sim::{SimRing, SimTenant},
    QueueState, QueueType,
};

use crate::{clock::now_ns, rng::Rng};

/// What a zoo tenant does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Kind {
    /// Latency-critical requests.
    Server,
    /// Best-effort pool that forks workers.
    Trainer,
    /// A process of a few hundred milliseconds.
    Brief,
}

/// `kfdp-scenario zoo-tenant`.
#[derive(Debug, Clone, Args)]
pub struct ZooArgs {
    /// What it does.
    #[arg(long, value_enum)]
    pub kind: Kind,
    /// Simulated node index.
    #[arg(long)]
    pub node: u32,
    /// Its random sequence.
    #[arg(long)]
    pub seed: u64,
    /// How long it lives, ms.
    #[arg(long)]
    pub life_ms: u64,
    /// The soak's event log.
    #[arg(long)]
    pub events: PathBuf,
    /// A queue made again may get its old ring's address back (the
    /// allocator reusing the freed pages); by default it gets another.
    #[arg(long)]
    pub reuse_ring_address: bool,
}

/// One page mapped at a dropped ring's address for the rest of the
/// process's life, so that no ring made later starts there: a queue made
/// again gets a ring at another address, as `Documentation/testing.rst`
/// ("The soak") says the zoo's re-creations do, unless `reuse` lets the
/// allocator hand the old address back.
struct Spacer(*mut std::ffi::c_void);

impl Spacer {
    fn at(address: u64, reuse: bool) -> Option<Self> {
        if reuse {
            return None;
        }
        // SAFETY: MAP_FIXED_NOREPLACE maps only if nothing is mapped at
        // `address` (the ring there was just unmapped), so no Rust object
        // is aliased; nothing else refers to the page.
        unsafe {
            rustix::mm::mmap_anonymous(
                address as *mut std::ffi::c_void,
                rustix::param::page_size(),
                rustix::mm::ProtFlags::empty(),
                rustix::mm::MapFlags::PRIVATE | rustix::mm::MapFlags::FIXED_NOREPLACE,
            )
        }
        .ok()
        .map(Spacer)
    }
}

impl Drop for Spacer {
    fn drop(&mut self) {
        // SAFETY: The page mapped in `at`, unmapped once, here.
        let _ = unsafe { rustix::mm::munmap(self.0, rustix::param::page_size()) };
    }
}

/// The event log, appended to by every zoo process.
pub struct Events(File);

impl Events {
    /// Opens `path` for appending.
    pub fn open(path: &Path) -> crate::Result<Self> {
        Ok(Events(
            OpenOptions::new().create(true).append(true).open(path)?,
        ))
    }

    /// Logs `event` of this process.
    pub fn log(&mut self, event: &str) {
        let line = format!("{} {} {event}\n", now_ns() / 1_000_000, std::process::id());
        // One write: lines of several processes do not interleave. A lost
        // line costs the soak a count, not a check.
        let _ = self.0.write_all(line.as_bytes());
    }
}

/// Priority of every zoo queue (the daemon decides by class, not by it).
const PRIORITY: u32 = 7;
/// Packets of a zoo ring.
const PACKETS: u32 = 64;

fn ms(v: u64) -> Duration {
    Duration::from_millis(v)
}

/// Waits until `ring` retired everything published, at most `limit`.
fn drain(ring: &SimRing<'_>, limit: Duration) -> bool {
    let end = now_ns() + crate::clock::ns(limit);
    while ring.read_index() < ring.write_index() {
        if now_ns() > end {
            return false;
        }
        // A request is milliseconds of node time: looking every 2 ms costs
        // its latency little and the VM's CPU less than every 1 ms.
        sleep(ms(2));
    }
    true
}

/// Runs one zoo tenant until its life ends.
pub fn run(args: &ZooArgs) -> crate::Result<()> {
    let mut ev = Events::open(&args.events)?;
    let mut rng = Rng::new(args.seed);
    let end = now_ns() + args.life_ms * 1_000_000;
    let lived = match args.kind {
        Kind::Server => server(args, end, &mut rng, &mut ev),
        Kind::Trainer => trainer(args, end, &mut rng, &mut ev),
        Kind::Brief => brief(args.node, end, &mut ev),
    };
    // A tenant that fails leaves early, its device closed already: the
    // soak hears why, and takes it for gone.
    if let Err(e) = &lived {
        ev.log(&format!("error {e}"));
    }
    lived
}

/// Latency-critical: see the module documentation.
fn server(args: &ZooArgs, end: u64, rng: &mut Rng, ev: &mut Events) -> crate::Result<()> {
    let node = args.node;
    // The pages that keep re-made rings off their old addresses.
    let mut spacers: Vec<Spacer> = Vec::new();
    let tenant = SimTenant::open()?;
    ev.log("open");
    // No queue until the first request, which comes a while after start.
    sleep(Duration::from_secs_f64(rng.uniform() * 0.5));
    let mut ring: Option<SimRing<'_>> = None;
    while now_ns() < end {
        if ring.is_none() {
            let r = tenant.create_ring(node, PRIORITY, PACKETS)?;
            ev.log(&format!("queue {} {}", node, r.queue().queue_id));
            ring = Some(r);
        }
        let Some(r) = ring.as_ref() else {
            continue;
        };
        // One request in ten is long (forty 40 ms dispatches, 1.6 s of the
        // node alone): work pending without a break for longer than the
        // soak's bound, so that it can judge that best-effort left the node.
        let (n, each) = if rng.uniform() < 0.1 {
            (40, ms(40))
        } else {
            (1 + (rng.next_u64() % 3) as usize, ms(3))
        };
        let work = vec![(each, 0u64); n];
        r.submit(&work)?;
        ev.log(&format!("request {n}"));
        if rng.uniform() < 0.03 {
            // Gone with the request in flight.
            ev.log("exit mid-request");
            std::process::exit(0);
        }
        drain(r, Duration::from_secs(10));
        if rng.uniform() < 0.1 {
            // The stream's queue destroyed and made again at once: the
            // same id, another ring (the old one goes first).
            if let Some(old) = ring.take() {
                let address = old.ring_address();
                drop(old);
                spacers.extend(Spacer::at(address, args.reuse_ring_address));
            }
            let r = tenant.create_ring(node, PRIORITY, PACKETS)?;
            ev.log(&format!("recreate {} {}", node, r.queue().queue_id));
            ring = Some(r);
        }
        sleep(Duration::from_secs_f64(
            rng.exponential(1.0 / 0.15).min(1.0),
        ));
    }
    ev.log("exit");
    Ok(())
}

/// What a forked worker does before it exits.
#[derive(Clone, Copy)]
enum Worker {
    /// Holds the inherited descriptor only.
    Holds,
    /// Opens the device itself and creates a queue (a worker running HIP).
    OwnQueue,
    /// Execs a program: the close-on-exec descriptor goes.
    Execs,
}

/// Best-effort: see the module documentation.
fn trainer(args: &ZooArgs, end: u64, rng: &mut Rng, ev: &mut Events) -> crate::Result<()> {
    let node = args.node;
    // The pages that keep re-made rings off their old addresses.
    let mut spacers: Vec<Spacer> = Vec::new();
    let tenant = SimTenant::open()?;
    ev.log("open");
    let _sdma = tenant.create_queue(node, QueueType::Sdma, PRIORITY)?;
    let mut rings = vec![
        tenant.create_ring(node, PRIORITY, PACKETS)?,
        tenant.create_ring(node, PRIORITY, PACKETS)?,
    ];
    for r in &rings {
        ev.log(&format!("queue {} {}", node, r.queue().queue_id));
    }
    let mut workers: Vec<libc::pid_t> = Vec::new();
    let mut next_fork = now_ns() + secs_ns(rng.exponential(1.0 / 1.5));
    let mut next_recreate = now_ns() + secs_ns(rng.exponential(1.0 / 3.0));
    while now_ns() < end {
        // Two 40 ms dispatches outstanding on each ring.
        for r in &rings {
            while r.write_index().saturating_sub(r.read_index()) < 2 {
                r.submit(&[(ms(40), 0)])?;
            }
        }
        let now = now_ns();
        if now >= next_fork {
            next_fork = now + secs_ns(rng.exponential(1.0 / 1.5));
            let kind = match rng.next_u64() % 10 {
                0..=2 => Worker::OwnQueue,
                3..=4 => Worker::Execs,
                _ => Worker::Holds,
            };
            let hold = Duration::from_secs_f64(0.2 + rng.uniform() * 0.4);
            if let Some(pid) = fork_worker(node, kind, hold, ev) {
                workers.push(pid);
            }
        }
        if now >= next_recreate {
            next_recreate = now + secs_ns(rng.exponential(1.0 / 3.0));
            let i = (rng.next_u64() % rings.len() as u64) as usize;
            // The old ring goes first: the new one gets its id.
            let old = rings.swap_remove(i);
            let address = old.ring_address();
            drop(old);
            spacers.extend(Spacer::at(address, args.reuse_ring_address));
            let made = now_ns();
            let r = tenant.create_ring(node, PRIORITY, PACKETS)?;
            let id = r.queue().queue_id;
            ev.log(&format!("recreate {node} {id}"));
            // Made while the daemon holds the node (the other ring is off
            // it): how long the new one stays on, by the node's own word.
            if !rings.is_empty() && rings.iter().all(|o| suspended(&tenant, o.queue().queue_id)) {
                match time_until_suspended(&tenant, id, made, ms(1000)) {
                    Some(us) => ev.log(&format!("taken {node} {id} {us}")),
                    None => ev.log(&format!("untaken {node} {id}")),
                }
            }
            rings.push(r);
        }
        workers.retain(|&pid| !reaped(pid, ev));
        // Each ring holds 80 ms of work: looking every 50 ms keeps it
        // busy without waking the VM's one CPU more than it must.
        sleep(ms(50));
    }
    for pid in workers {
        // SAFETY: waitpid(2) of a child of this process, blocking.
        unsafe { libc::waitpid(pid, std::ptr::null_mut(), 0) };
        ev.log(&format!("worker-exit {pid}"));
    }
    ev.log("exit");
    Ok(())
}

/// Whether the simulated node has queue `id` of `tenant` off it.
fn suspended(tenant: &SimTenant, id: u32) -> bool {
    tenant
        .status(id)
        .is_ok_and(|s| s.state.0 & QueueState::SUSPENDED != 0)
}

/// Microseconds from `made` until queue `id` is off the node, polled every
/// millisecond for at most `limit`; `None` if it stayed on.
fn time_until_suspended(tenant: &SimTenant, id: u32, made: u64, limit: Duration) -> Option<u64> {
    let end = made + limit.as_nanos() as u64;
    loop {
        if suspended(tenant, id) {
            return Some((now_ns() - made) / 1000);
        }
        if now_ns() >= end {
            return None;
        }
        sleep(ms(1));
    }
}

fn secs_ns(s: f64) -> u64 {
    (s.min(60.0) * 1e9) as u64
}

/// Whether worker `pid` exited (and is reaped now).
fn reaped(pid: libc::pid_t, ev: &mut Events) -> bool {
    // SAFETY: waitpid(2) of a child of this process, without blocking.
    let r = unsafe { libc::waitpid(pid, std::ptr::null_mut(), libc::WNOHANG) };
    if r == pid || r < 0 {
        ev.log(&format!("worker-exit {pid}"));
        true
    } else {
        false
    }
}

/// Forks a worker that does `kind` for `hold`, then exits; its pid.
fn fork_worker(node: u32, kind: Worker, hold: Duration, ev: &mut Events) -> Option<libc::pid_t> {
    // SAFETY: the trainer is single-threaded, so the child may do anything
    // the parent could; it leaves through _exit(2).
    let pid = unsafe { libc::fork() };
    if pid != 0 {
        if pid > 0 {
            let what = match kind {
                Worker::Holds => "holds",
                Worker::OwnQueue => "own",
                Worker::Execs => "execs",
            };
            ev.log(&format!("fork {pid} {what}"));
        }
        return (pid > 0).then_some(pid);
    }
    match kind {
        Worker::Holds => sleep(hold),
        Worker::OwnQueue => {
            // libhsakmt in a forked child: /dev/kfd opened anew.
            if let Ok(own) = SimTenant::open() {
                ev.log("worker-open");
                let q = own.create_queue(node, QueueType::ComputeAql, PRIORITY);
                if let Ok(q) = q {
                    ev.log(&format!("queue {} {}", node, q.queue_id));
                }
                sleep(hold);
            }
        }
        Worker::Execs => {
            let secs = format!("{:.3}\0", hold.as_secs_f64());
            let prog = c"/bin/sleep";
            let argv = [prog.as_ptr(), secs.as_ptr().cast(), std::ptr::null()];
            // SAFETY: NUL-terminated strings and a NULL-terminated argv.
            unsafe { libc::execv(prog.as_ptr(), argv.as_ptr()) };
        }
    }
    // SAFETY: _exit(2) ends the child without running the parent's
    // destructors a second time (its tenant file stays the parent's).
    unsafe { libc::_exit(0) }
}

/// A process of a few hundred milliseconds.
fn brief(node: u32, end: u64, ev: &mut Events) -> crate::Result<()> {
    let tenant = SimTenant::open()?;
    ev.log("open");
    let r = tenant.create_ring(node, PRIORITY, PACKETS)?;
    ev.log(&format!("queue {} {}", node, r.queue().queue_id));
    while now_ns() < end {
        if r.write_index() == r.read_index() {
            r.submit(&[(ms(10), 0)])?;
        }
        sleep(ms(10));
    }
    ev.log("exit");
    Ok(())
}
