//! `detect`: how fast, and at what CPU cost, a scheduler learns that a
//! queue got work, for the alternatives the design considered:
//! * `arm-<P>`: the module samples the watched queues every P µs from a
//!   timer (KFDP_IOC_ARM, ANY_BUSY) and signals an eventfd; the scheduler
//!   blocks in poll(2);
//! * `poll-<P>`: the scheduler calls KFDP_IOC_SAMPLE, then sleeps P µs;
//! * `spin`: the scheduler calls KFDP_IOC_SAMPLE in a tight loop.
//!
//! The work comes from a tenant in another process ([`crate::probe`]),
//! which stamps CLOCK_MONOTONIC just before publishing one short dispatch;
//! the latency is CLOCK_MONOTONIC when this side learns of it minus that
//! stamp. The cost is what waiting costs when no work comes: this
//! process's CPU time, and the whole system's busy time, where the
//! module's timer (interrupt context) shows.

use std::{
    hint::black_box,
    mem::size_of,
    num::NonZeroU64,
    os::fd::{AsFd, OwnedFd},
    thread::sleep,
    time::Duration,
};

use kfd_preempt::{uapi, Activity, ArmCondition, Caps, Device, QueueRef};
use rustix::{
    event::{eventfd, poll, EventfdFlags, PollFd, PollFlags},
    io::Errno,
    thread::{clock_nanosleep_relative, set_current_timer_slack, NanosleepRelativeResult},
    time::ClockId,
};

use crate::{
    clock::{now_ns, ns},
    cpu::{self, CpuTicks},
    detect_table::{CpuCost, DetectReport, IoctlCost, MethodResult, NOTE},
    probe::{timespec, Submit, TenantProc},
    rng::Rng,
    Result,
};

/// Shortest random gap before a submission.
const GAP_MIN: Duration = Duration::from_millis(2);
/// Longest random gap before a submission.
const GAP_MAX: Duration = Duration::from_millis(20);
/// Work not seen this long after its publish is a miss.
const DETECT_TIMEOUT: Duration = Duration::from_secs(1);
/// How long the tenant may take to answer once it submitted.
const REPLY_TIMEOUT: Duration = Duration::from_secs(2);
/// How long a dispatch may take to retire before a trial gives up.
const IDLE_TIMEOUT: Duration = Duration::from_secs(2);
/// Poll interval while waiting for a dispatch to retire (not measured).
const IDLE_POLL: Duration = Duration::from_micros(100);
/// Untimed calls before the ioctl cost loops (caches, lazy paths).
const WARMUP_CALLS: u32 = 1000;
/// The longest period accepted (the module's ARM limit).
const MAX_PERIOD_US: u32 = 1_000_000;

/// A kind of detector, as `--methods` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Kind {
    /// KFDP_IOC_ARM ANY_BUSY on an eventfd, one method per period.
    Arm,
    /// SAMPLE then clock_nanosleep, one method per period.
    Poll,
    /// SAMPLE in a tight loop.
    Spin,
}

/// One detection method.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Detector {
    /// ARM with this period, µs.
    Arm(u32),
    /// SAMPLE every this many µs.
    Poll(u32),
    /// SAMPLE without pause.
    Spin,
}

impl Detector {
    /// `arm-<P>`, `poll-<P>` or `spin`.
    pub fn name(self) -> String {
        match self {
            Detector::Arm(p) => format!("arm-{p}"),
            Detector::Poll(p) => format!("poll-{p}"),
            Detector::Spin => "spin".into(),
        }
    }

    fn kind(self) -> &'static str {
        match self {
            Detector::Arm(_) => "arm",
            Detector::Poll(_) => "poll",
            Detector::Spin => "spin",
        }
    }

    /// The pause between two samples of a sampling detector.
    fn pause(self) -> Option<Duration> {
        match self {
            Detector::Poll(p) => Some(Duration::from_micros(p.into())),
            Detector::Arm(_) | Detector::Spin => None,
        }
    }

    fn period_us(self) -> Option<u32> {
        match self {
            Detector::Arm(p) | Detector::Poll(p) => Some(p),
            Detector::Spin => None,
        }
    }
}

/// The methods `kinds` and `periods_us` select, arm first, then poll,
/// then spin, whatever order they were given in.
pub fn detectors(kinds: &[Kind], periods_us: &[u32]) -> Vec<Detector> {
    let mut out = Vec::new();
    if kinds.contains(&Kind::Arm) {
        out.extend(periods_us.iter().map(|p| Detector::Arm(*p)));
    }
    if kinds.contains(&Kind::Poll) {
        out.extend(periods_us.iter().map(|p| Detector::Poll(*p)));
    }
    if kinds.contains(&Kind::Spin) {
        out.push(Detector::Spin);
    }
    out
}

/// Parameters of `kfdp-scenario detect`.
#[derive(Debug, Clone)]
pub struct DetectArgs {
    /// Simulated node of the tenant's ring.
    pub node: u32,
    /// Trials per method.
    pub trials: u32,
    /// Periods of arm and poll, µs.
    pub periods_us: Vec<u32>,
    /// Which kinds of detector.
    pub kinds: Vec<Kind>,
    /// Length of each no-work CPU measurement.
    pub idle: Duration,
    /// Calls timed per ioctl.
    pub calls: u32,
    /// Node time of each dispatch, µs.
    pub work_us: u64,
    /// Seed of the gaps.
    pub seed: u64,
}

impl DetectArgs {
    fn check(&self) -> Result<()> {
        if self.trials == 0 {
            return Err("--trials must be at least 1".into());
        }
        if let Some(p) = self
            .periods_us
            .iter()
            .find(|p| **p == 0 || **p > MAX_PERIOD_US)
        {
            return Err(format!("--periods-us: {p} is not 1 to {MAX_PERIOD_US}").into());
        }
        if self.calls == 0 {
            return Err("--calls must be at least 1".into());
        }
        if self.idle.is_zero() {
            return Err("--idle-s must be positive".into());
        }
        Ok(())
    }
}

/// What one trial found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    /// Seen this many ns after the publish.
    Seen(u64),
    /// Not seen within [`DETECT_TIMEOUT`] of the publish.
    Miss,
    /// The detector fired before the publish.
    Early,
}

/// Classifies a trial: `seen` is when the detector fired (None: never).
fn classify(seen_ns: Option<u64>, published_ns: u64) -> Outcome {
    match seen_ns {
        None => Outcome::Miss,
        Some(t) if t < published_ns => Outcome::Early,
        Some(t) if t - published_ns > ns(DETECT_TIMEOUT) => Outcome::Miss,
        Some(t) => Outcome::Seen(t - published_ns),
    }
}

/// Whether the queue got work since its write index was `base`: pending
/// now, or a write index that moved (a dispatch that already retired
/// between two samples, which a poller with a long period would otherwise
/// never see; ARM's ANY_BUSY catches it the same way).
fn got_work(a: &Activity, base: u64) -> bool {
    a.pending || a.write_index != base
}

/// Sleeps `d` on CLOCK_MONOTONIC (with this thread's timer slack).
fn nap(d: Duration) -> Result<()> {
    match clock_nanosleep_relative(ClockId::Monotonic, &timespec(d)) {
        NanosleepRelativeResult::Ok | NanosleepRelativeResult::Interrupted(_) => Ok(()),
        NanosleepRelativeResult::Err(e) => Err(format!("clock_nanosleep: {e}").into()),
    }
}

/// KFDP_IOC_SAMPLE straight into a preallocated one-entry buffer: the
/// ioctl alone, without `Device::sample`'s allocation.
fn sample_ioctl(dev: &Device, buf: &mut [uapi::kfdp_activity; 1]) -> Result<()> {
    let mut s = uapi::kfdp_sample {
        entries_ptr: buf.as_mut_ptr() as u64,
        entry_size: size_of::<uapi::kfdp_activity>() as u32,
        capacity: 1,
        ..Default::default()
    };
    // SAFETY: IOC_SAMPLE is KFDP_IOC_SAMPLE, which reads and writes a
    // `kfdp_sample` and writes at most `capacity` (1) `kfdp_activity` at
    // `entries_ptr`, which points to `buf`, live and exclusively borrowed
    // across the call.
    unsafe {
        rustix::ioctl::ioctl(
            dev,
            rustix::ioctl::Updater::<{ uapi::IOC_SAMPLE }, uapi::kfdp_sample>::new(&mut s),
        )
    }
    .map_err(|e| format!("KFDP_IOC_SAMPLE: {e}"))?;
    Ok(())
}

/// Mean ns of one `f()` over `calls` calls, after a warm-up.
fn mean_ns(calls: u32, mut f: impl FnMut() -> Result<()>) -> Result<f64> {
    for _ in 0..WARMUP_CALLS {
        f()?;
    }
    let start = now_ns();
    for _ in 0..calls {
        f()?;
    }
    Ok((now_ns() - start) as f64 / f64::from(calls))
}

/// SAMPLE (one watch) and INFO, `calls` calls each.
fn ioctl_costs(dev: &Device, calls: u32) -> Result<IoctlCost> {
    let mut buf = [uapi::kfdp_activity::default(); 1];
    let sample_ioctl_ns = mean_ns(calls, || sample_ioctl(dev, &mut buf))?;
    let sample_call_ns = mean_ns(calls, || {
        black_box(dev.sample()?);
        Ok(())
    })?;
    let info_ioctl_ns = mean_ns(calls, || {
        black_box(dev.info()?);
        Ok(())
    })?;
    Ok(IoctlCost {
        calls,
        sample_ioctl_ns,
        sample_call_ns,
        info_ioctl_ns,
        sample_over_info: if info_ioctl_ns > 0.0 {
            sample_ioctl_ns / info_ioctl_ns
        } else {
            0.0
        },
    })
}

/// The measuring side: the owner, the one watched queue, the eventfd ARM
/// signals, and the tenant that makes the work.
struct Bench<'d> {
    dev: &'d Device,
    queue: QueueRef,
    efd: OwnedFd,
    tenant: TenantProc,
    rng: Rng,
    clk_tck: u64,
    min_period: Duration,
}

impl Bench<'_> {
    /// The watched queue, as SAMPLE reads it now.
    fn activity(&self) -> Result<Activity> {
        let s = self.dev.sample()?;
        let a = s
            .queues
            .iter()
            .find(|a| a.queue == self.queue)
            .copied()
            .ok_or_else(|| format!("queue {} is no longer watched", self.queue))?;
        if a.gone {
            return Err("the tenant process exited".into());
        }
        Ok(a)
    }

    /// Waits until the queue has nothing pending; returns its write index.
    fn wait_idle(&self) -> Result<u64> {
        let deadline = now_ns() + ns(IDLE_TIMEOUT);
        loop {
            let a = self.activity()?;
            if !a.pending && a.read_index == a.write_index {
                return Ok(a.write_index);
            }
            if now_ns() >= deadline {
                return Err(format!(
                    "queue {} still has {} packet(s) pending after {} s: is the node running?",
                    self.queue,
                    a.write_index.saturating_sub(a.read_index),
                    IDLE_TIMEOUT.as_secs()
                )
                .into());
            }
            sleep(IDLE_POLL);
        }
    }

    /// Resets the eventfd's counter (nothing to read is fine).
    fn drain_eventfd(&self) -> Result<()> {
        let mut buf = [0u8; 8];
        match rustix::io::read(&self.efd, &mut buf[..]) {
            Ok(_) | Err(Errno::AGAIN) => Ok(()),
            Err(e) => Err(format!("reading the eventfd: {e}").into()),
        }
    }

    fn arm(&self, period_us: u32) -> Result<()> {
        self.drain_eventfd()?;
        self.dev.arm(
            ArmCondition::AnyBusy,
            Duration::from_micros(period_us.into()),
            self.efd.as_fd(),
        )?;
        Ok(())
    }

    /// Blocks in poll(2) on the eventfd until it fires (returns when, and
    /// resets it) or `deadline` (CLOCK_MONOTONIC ns) passes.
    fn wait_eventfd(&self, deadline: u64) -> Result<Option<u64>> {
        loop {
            let now = now_ns();
            if now >= deadline {
                return Ok(None);
            }
            let mut fds = [PollFd::new(&self.efd, PollFlags::IN)];
            match poll(
                &mut fds,
                Some(&timespec(Duration::from_nanos(deadline - now))),
            ) {
                Ok(0) | Err(Errno::INTR) => continue,
                Ok(_) => {
                    let seen = now_ns();
                    self.drain_eventfd()?;
                    return Ok(Some(seen));
                }
                Err(e) => return Err(format!("poll on the eventfd: {e}").into()),
            }
        }
    }

    /// Samples (pausing `period` between samples, if any) until the queue
    /// got work since `base` (returns when) or `deadline` passes.
    fn sample_until(
        &self,
        base: u64,
        period: Option<Duration>,
        deadline: u64,
    ) -> Result<Option<u64>> {
        loop {
            let a = self.activity()?;
            let now = now_ns();
            if got_work(&a, base) {
                return Ok(Some(now));
            }
            if now >= deadline {
                return Ok(None);
            }
            if let Some(p) = period {
                nap(p)?;
            }
        }
    }

    /// A gap uniform in [GAP_MIN, GAP_MAX], so that the submission falls
    /// at a uniformly distributed phase of the detector's period.
    fn gap(&mut self) -> Duration {
        GAP_MIN + (GAP_MAX - GAP_MIN).mul_f64(self.rng.uniform())
    }

    /// One trial: the tenant submits one dispatch after `gap`; when does
    /// `d` see it?
    fn trial(&mut self, d: Detector, gap: Duration, tag: u64) -> Result<Outcome> {
        let base = self.wait_idle()?;
        if let Detector::Arm(p) = d {
            self.arm(p)?;
        }
        let sent = now_ns();
        self.tenant.request(Submit { delay: gap, tag })?;
        // Generous: the tenant's sleep may overrun; `classify` applies the
        // timeout to the publish time exactly.
        let deadline = sent + ns(gap) + ns(DETECT_TIMEOUT);
        let seen = match d {
            Detector::Arm(_) => self.wait_eventfd(deadline)?,
            Detector::Poll(_) | Detector::Spin => self.sample_until(base, d.pause(), deadline)?,
        };
        if matches!(d, Detector::Arm(_)) && seen.is_none() {
            self.dev.disarm()?;
        }
        let submitted = self.tenant.reply(REPLY_TIMEOUT)?;
        Ok(classify(seen, submitted.published_ns))
    }

    /// What waiting costs for `window` with no work: `None` is doing
    /// nothing at all (sleeping), the floor of the system's busy time.
    fn idle_cost(&mut self, d: Option<Detector>, window: Duration) -> Result<CpuCost> {
        let base = self.wait_idle()?;
        if let Some(Detector::Arm(p)) = d {
            self.arm(p)?;
        }
        let (cpu0, ticks0, t0) = (cpu::self_cpu()?, CpuTicks::read()?, now_ns());
        let deadline = t0 + ns(window);
        let (mut iterations, mut spurious) = (0u64, 0u64);
        match d {
            None => sleep(window),
            Some(Detector::Arm(p)) => {
                while self.wait_eventfd(deadline)?.is_some() {
                    // Nothing was submitted: count it and keep waiting.
                    iterations += 1;
                    spurious += 1;
                    self.arm(p)?;
                }
            }
            Some(sampler @ (Detector::Poll(_) | Detector::Spin)) => {
                let period = sampler.pause();
                loop {
                    let a = self.activity()?;
                    iterations += 1;
                    if got_work(&a, base) {
                        spurious += 1;
                    }
                    if now_ns() >= deadline {
                        break;
                    }
                    if let Some(p) = period {
                        nap(p)?;
                    }
                }
            }
        }
        let (cpu1, ticks1, t1) = (cpu::self_cpu()?, CpuTicks::read()?, now_ns());
        if let Some(Detector::Arm(_)) = d {
            self.dev.disarm()?;
        }
        let window_s = (t1 - t0) as f64 / 1e9;
        let per_s = |ms: f64| if window_s > 0.0 { ms / window_s } else { 0.0 };
        let busy = ticks1.busy().saturating_sub(ticks0.busy());
        let irq = ticks1.interrupt().saturating_sub(ticks0.interrupt());
        Ok(CpuCost {
            window_s,
            self_cpu_ms_per_s: per_s(cpu1.saturating_sub(cpu0).as_secs_f64() * 1e3),
            system_busy_ms_per_s: per_s(cpu::ticks_ms(busy, self.clk_tck)),
            system_irq_ms_per_s: per_s(cpu::ticks_ms(irq, self.clk_tck)),
            iterations,
            spurious,
        })
    }

    /// Every trial of `d`, then its no-work cost, into `r`.
    fn measure(&mut self, d: Detector, args: &DetectArgs, r: &mut MethodResult) -> Result<()> {
        for tag in 0..args.trials {
            let gap = self.gap();
            r.trials += 1;
            match self.trial(d, gap, tag.into())? {
                Outcome::Seen(latency_ns) => {
                    r.detected += 1;
                    r.latencies_us.push(latency_ns as f64 / 1e3);
                }
                Outcome::Miss => r.misses += 1,
                Outcome::Early => r.early += 1,
            }
        }
        r.idle = Some(self.idle_cost(Some(d), args.idle)?);
        Ok(())
    }

    /// Runs method `d`; failures are recorded in the result, not returned,
    /// so that one broken method does not lose the others.
    fn method(&mut self, d: Detector, args: &DetectArgs) -> MethodResult {
        let mut r = MethodResult::new(d.name(), d.kind(), d.period_us());
        if let Detector::Arm(p) = d {
            if Duration::from_micros(p.into()) < self.min_period {
                r.skipped = Some(format!(
                    "{p} us is below the module's minimum ARM period of {} us",
                    self.min_period.as_micros()
                ));
                return r;
            }
        }
        if !self.tenant.alive() {
            r.error = Some("not run: the tenant process exited".into());
            return r;
        }
        eprintln!("kfdp-scenario detect: {} ...", r.method);
        if let Err(e) = self.measure(d, args, &mut r) {
            r.error = Some(e.to_string());
            // An ARM left behind would fire into the next method.
            let _ = self.dev.disarm();
        }
        r.summarize();
        r
    }
}

/// Runs `detect`. Needs root (CAP_SYS_NICE for the device, ptrace access
/// to attach the tenant) and the module loaded with simulated nodes.
pub fn run(args: &DetectArgs) -> Result<DetectReport> {
    args.check()?;
    // The default 50 µs of timer slack would stretch every 20 µs poll
    // period (and ppoll timeout) far beyond what was asked.
    if let Err(e) = set_current_timer_slack(NonZeroU64::new(1)) {
        eprintln!("kfdp-scenario detect: cannot set the timer slack to 1 ns ({e}); poll periods will run long");
    }
    let kernel = rustix::system::uname()
        .release()
        .to_string_lossy()
        .into_owned();

    let dev = Device::open()?;
    let info = dev.info()?;
    if !info.caps.has(Caps::ACTIVITY | Caps::SIM_RING) {
        return Err(format!(
            "the module (ABI {}.{}, caps {}) lacks activity detection or simulated ring queues: \
             ABI 1.2 loaded with sim_nodes=N is needed",
            info.abi_major,
            info.abi_minor,
            info.caps.names().join(",")
        )
        .into());
    }

    let tenant = TenantProc::spawn(args.node, args.work_us.saturating_mul(1000))?;
    let target = dev.attach(tenant.pid()?)?;
    let queue = target
        .query()?
        .iter()
        .map(|q| q.queue_ref())
        .find(|q| q.queue_id == tenant.queue_id && q.gpu_id == tenant.gpu_id)
        .ok_or_else(|| {
            format!(
                "the tenant's ring (queue {} on gpu {:#x}) is not among its queues",
                tenant.queue_id, tenant.gpu_id
            )
        })?;
    let watched = dev.watch(&[queue])?;
    if let Some((q, outcome)) = watched.failures().next() {
        return Err(format!("cannot watch {q}: {outcome}").into());
    }
    let efd = eventfd(0, EventfdFlags::CLOEXEC | EventfdFlags::NONBLOCK)
        .map_err(|e| format!("eventfd: {e}"))?;

    let mut bench = Bench {
        dev: &dev,
        queue,
        efd,
        tenant,
        rng: Rng::new(args.seed),
        clk_tck: rustix::param::clock_ticks_per_second(),
        min_period: info.min_watch_period,
    };
    eprintln!("kfdp-scenario detect: baseline (nothing) ...");
    let baseline = bench.idle_cost(None, args.idle)?;
    let methods: Vec<MethodResult> = detectors(&args.kinds, &args.periods_us)
        .into_iter()
        .map(|d| bench.method(d, args))
        .collect();
    eprintln!("kfdp-scenario detect: ioctl costs ...");
    let (ioctl, ioctl_error) = match ioctl_costs(&dev, args.calls) {
        Ok(c) => (Some(c), None),
        Err(e) => (None, Some(e.to_string())),
    };

    // Closing the device undoes the watch and any ARM; done explicitly so
    // that the tenant is not watched while it exits.
    let _ = dev.disarm();
    let _ = dev.unwatch(&[queue]);
    drop(target);
    let clk_tck = bench.clk_tck;
    drop(bench);

    Ok(DetectReport {
        role: "detect".into(),
        kernel,
        note: NOTE.into(),
        node: args.node,
        work_us: args.work_us,
        trials: args.trials,
        gap_ms: [GAP_MIN.as_secs_f64() * 1e3, GAP_MAX.as_secs_f64() * 1e3],
        timeout_ms: DETECT_TIMEOUT.as_millis() as u64,
        seed: args.seed,
        clk_tck,
        min_watch_period_us: info.min_watch_period.as_micros() as u64,
        baseline: Some(baseline),
        methods,
        ioctl,
        ioctl_error,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use kfd_preempt::Handle;

    #[test]
    fn methods_come_in_a_fixed_order() {
        let d = detectors(&[Kind::Spin, Kind::Arm], &[20, 1000]);
        assert_eq!(d, [Detector::Arm(20), Detector::Arm(1000), Detector::Spin]);
        let names: Vec<String> = detectors(&[Kind::Poll], &[50])
            .iter()
            .map(|d| d.name())
            .collect();
        assert_eq!(names, ["poll-50"]);
        assert_eq!(Detector::Spin.period_us(), None);
        assert_eq!(Detector::Arm(7).kind(), "arm");
    }

    #[test]
    fn trials_are_classified_against_the_publish_time() {
        assert_eq!(classify(None, 100), Outcome::Miss);
        assert_eq!(classify(Some(99), 100), Outcome::Early);
        assert_eq!(classify(Some(100), 100), Outcome::Seen(0));
        assert_eq!(classify(Some(5_100), 100), Outcome::Seen(5_000));
        assert_eq!(
            classify(Some(100 + 1_000_000_000), 100),
            Outcome::Seen(1_000_000_000)
        );
        assert_eq!(classify(Some(101 + 1_000_000_000), 100), Outcome::Miss);
    }

    #[test]
    fn work_is_a_pending_queue_or_a_moved_write_index() {
        let a = Activity {
            queue: QueueRef {
                handle: Handle(1),
                gpu_id: 1,
                queue_id: 0,
            },
            pending: false,
            gone: false,
            read_index: 4,
            write_index: 4,
        };
        assert!(!got_work(&a, 4));
        // Retired between two samples: only the write index tells.
        assert!(got_work(&a, 3));
        assert!(got_work(
            &Activity {
                pending: true,
                write_index: 5,
                ..a
            },
            4
        ));
    }

    #[test]
    fn arguments_are_checked_before_anything_is_opened() {
        let ok = DetectArgs {
            node: 0,
            trials: 1,
            periods_us: vec![20, 1_000_000],
            kinds: vec![Kind::Arm],
            idle: Duration::from_secs(1),
            calls: 1,
            work_us: 1,
            seed: 1,
        };
        assert!(ok.check().is_ok());
        for bad in [
            DetectArgs {
                trials: 0,
                ..ok.clone()
            },
            DetectArgs {
                periods_us: vec![0],
                ..ok.clone()
            },
            DetectArgs {
                periods_us: vec![1_000_001],
                ..ok.clone()
            },
            DetectArgs {
                calls: 0,
                ..ok.clone()
            },
            DetectArgs {
                idle: Duration::ZERO,
                ..ok.clone()
            },
        ] {
            assert!(bad.check().is_err(), "{bad:?}");
        }
    }

    #[test]
    fn gaps_stay_in_range_and_naps_return() {
        let dev = Device::open_path("/dev/null").unwrap();
        let q = QueueRef {
            handle: Handle(1),
            gpu_id: 1,
            queue_id: 0,
        };
        let mut cmd = std::process::Command::new("sh");
        cmd.args(["-c", "echo ready 0 1; read x"]);
        let mut b = Bench {
            dev: &dev,
            queue: q,
            efd: eventfd(0, EventfdFlags::CLOEXEC | EventfdFlags::NONBLOCK).unwrap(),
            tenant: TenantProc::start(cmd).unwrap(),
            rng: Rng::new(3),
            clk_tck: 100,
            min_period: Duration::from_micros(50),
        };
        for _ in 0..1000 {
            let g = b.gap();
            assert!((GAP_MIN..=GAP_MAX).contains(&g), "{g:?}");
        }
        let t = now_ns();
        nap(Duration::from_micros(200)).unwrap();
        assert!(now_ns() - t >= 200_000);
        // Nothing wrote the eventfd: draining is fine, and a wait times out.
        b.drain_eventfd().unwrap();
        assert_eq!(b.wait_eventfd(now_ns() + 1_000_000).unwrap(), None);
        // A period below the module's minimum is skipped, not an error.
        let args = DetectArgs {
            node: 0,
            trials: 1,
            periods_us: vec![20],
            kinds: vec![Kind::Arm],
            idle: Duration::from_secs(1),
            calls: 1,
            work_us: 1,
            seed: 1,
        };
        let r = b.method(Detector::Arm(20), &args);
        assert!(r.skipped.is_some() && r.error.is_none(), "{r:?}");
        // /dev/null answers SAMPLE with ENOTTY: recorded, not panicked.
        let r = b.method(Detector::Poll(20), &args);
        assert!(r.error.as_deref().unwrap_or("").contains("SAMPLE"), "{r:?}");
        assert_eq!(r.trials, 1);
    }
}
