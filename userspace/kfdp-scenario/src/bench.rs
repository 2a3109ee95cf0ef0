//! `kfdp-scenario bench`: what one PREEMPT batch buys over K single-entry
//! PREEMPTs and over P FREEZEs, on a simulated node, with the cost model at
//! zero (the software overhead alone) and at a labelled, modelled MI300-like
//! cost. A benchmark: it prints numbers, it does not judge them.
//!
//! With `--hardware` the tenants are external workload processes
//! (`kfdp-hw-tenant` of the hardware kit, tests/hw) whose queues run a
//! spinning GPU kernel; nothing is modelled and the results carry the
//! `--label` saying which GPU, firmware and kernel they ran on
//! (Documentation/hardware-validation.rst).

use std::{
    io::{BufRead, BufReader},
    path::PathBuf,
    process::{Child, ChildStdin, Command, Stdio},
    time::{Duration, Instant},
};

use clap::{Args, ValueEnum};
use kfd_preempt::{sim::SimNode, BatchOptions, Caps, Device, QueueRef, Target};

use crate::{
    bench_results::{CostModel, Floor, Results, Row, BATCH, DEBUGGER, FREEZE, SINGLES},
    chart,
    debugger::Debugger,
};

#[derive(Copy, Clone, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum CostName {
    /// Cost model off: the module's and the simulated node's own overhead.
    Zero,
    /// A modelled MI300-like cost per runlist update (not a measurement).
    Mi300,
}

#[derive(Args, Debug)]
pub(crate) struct BenchArgs {
    /// Simulated node index (node 0 is HWS, as MI300, unless sim_mes_nodes
    /// says otherwise).
    #[arg(long, default_value_t = 0)]
    node: u32,
    /// Queue counts K.
    #[arg(long = "queues", value_delimiter = ',', default_values_t = [1, 4, 16, 64, 256, 1024])]
    k: Vec<u32>,
    /// Process counts P the K queues are spread over.
    #[arg(long = "processes", value_delimiter = ',', default_values_t = [1, 4, 8, 16])]
    p: Vec<u32>,
    /// Repetitions per (K, P, method); fewer once --budget-ms is spent, but
    /// at least 3.
    #[arg(long, default_value_t = 20)]
    reps: u32,
    /// Time budget per (K, P, method) in milliseconds.
    #[arg(long, default_value_t = 1000)]
    budget_ms: u64,
    /// Cost models to run.
    #[arg(long, value_delimiter = ',', default_values = ["zero", "mi300"])]
    cost: Vec<CostName>,
    /// Write the results as JSON here.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Write a chart here (SVG).
    #[arg(long)]
    svg: Option<PathBuf>,
    /// Measure real queues: tenants are --workload processes, no cost
    /// model, no simulated-node counters.
    #[arg(long)]
    hardware: bool,
    /// The tenant program for --hardware, run as `PROGRAM --queues N`; it
    /// prints a line starting "ready " once its queues run.
    #[arg(long, default_value = "kfdp-hw-tenant")]
    workload: PathBuf,
    /// What the numbers ran on (GPU, firmware, kernel), for the JSON and
    /// the chart.
    #[arg(long)]
    label: Option<String>,
}

impl CostModel {
    /// The debugfs knob each field sets.
    fn knobs(&self) -> [(&'static str, u64); 3] {
        [
            ("cycle_ns", self.cycle_ns),
            ("per_queue_ns", self.per_queue_ns),
            ("mes_call_ns", self.mes_call_ns),
        ]
    }

    fn of(name: CostName) -> Self {
        match name {
            CostName::Zero => CostModel {
                name: "zero".into(),
                modelled: false,
                label: "cost model off: software overhead of the module and the simulated node (QEMU TCG)".into(),
                cycle_ns: 0,
                per_queue_ns: 0,
                mes_call_ns: 0,
            },
            CostName::Mi300 => CostModel {
                name: "mi300-like".into(),
                modelled: true,
                label: "MODELLED, not measured: MI300-like runlist update = 150 us + 1 us per queue unmapped or mapped; MES call 40 us".into(),
                cycle_ns: 150_000,
                per_queue_ns: 1_000,
                mes_call_ns: 40_000,
            },
        }
    }
}

/// The nearest-rank percentile of sorted `sorted` (`q` in 0..=1), in
/// microseconds, by the crate's one rule ([`crate::stats::percentile_sorted`]);
/// 0 for no samples.
pub(crate) fn percentile_us(sorted: &[Duration], q: f64) -> f64 {
    let us: Vec<f64> = sorted.iter().map(|d| d.as_secs_f64() * 1e6).collect();
    if us.is_empty() {
        0.0
    } else {
        crate::stats::percentile_sorted(&us, q)
    }
}

/// Spreads `k` queues over `procs` processes as evenly as possible.
pub(crate) fn spread(k: u32, procs: u32) -> Vec<u32> {
    (0..procs)
        .map(|i| k / procs + u32::from(i < k % procs))
        .collect()
}

/// A `kfdp-scenario sim-tenant` (this very program) or `--workload` child;
/// it exits when its stdin closes.
struct Tenant {
    child: Child,
    stdin: Option<ChildStdin>,
    pid: i32,
    /// The workload's queues by ring address, when the tenant says (a GPU
    /// process may have queues of its runtime's own too).
    rings: Option<Vec<u64>>,
}

/// The arguments that make this program a simulated tenant of `queues`
/// queues on `node`, ending with its stdin.
pub(crate) fn sim_tenant_args(node: u32, queues: u32) -> [String; 6] {
    [
        "sim-tenant".into(),
        "--stdin".into(),
        "--node".into(),
        node.to_string(),
        "--queues".into(),
        queues.to_string(),
    ]
}

/// The `rings=0xA,0xB` of a tenant's "ready" line, if any.
fn ready_rings(line: &str) -> Option<Vec<u64>> {
    let list = line
        .split_whitespace()
        .find_map(|w| w.strip_prefix("rings="))?;
    list.split(',')
        .map(|r| u64::from_str_radix(r.trim_start_matches("0x"), 16).ok())
        .collect()
}

impl Tenant {
    /// A simulated tenant on `node`, or with `workload` that program.
    fn spawn(node: u32, queues: u32, workload: Option<&PathBuf>) -> Result<Self, String> {
        let mut command = match workload {
            Some(program) => {
                let mut c = Command::new(program);
                c.args(["--queues", &queues.to_string()]);
                c
            }
            None => {
                let exe = std::env::current_exe().map_err(|e| format!("own executable: {e}"))?;
                let mut c = Command::new(exe);
                c.args(sim_tenant_args(node, queues));
                c
            }
        };
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .map_err(|e| format!("starting a tenant: {e}"))?;
        let stdin = child.stdin.take();
        let mut line = String::new();
        if let Some(out) = child.stdout.take() {
            let _ = BufReader::new(out).read_line(&mut line);
        }
        if !line.starts_with("ready ") {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!(
                "a tenant with {queues} queue(s) did not start (see its error above)"
            ));
        }
        let pid = child.id() as i32;
        Ok(Tenant {
            child,
            stdin,
            pid,
            rings: ready_rings(&line),
        })
    }
}

impl Drop for Tenant {
    fn drop(&mut self) {
        // Closing stdin ends a tenant (and would, were this process killed);
        // the kill makes sure of it.
        self.stdin.take();
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Restores a node's cost knobs when the bench ends, however it ends.
struct KnobGuard {
    node: SimNode,
    saved: Vec<(&'static str, u64)>,
}

impl KnobGuard {
    fn new(node: u32) -> Result<Self, kfd_preempt::Error> {
        let node = SimNode::new(node);
        // Any cost model names the knobs; the values are the node's.
        let saved = CostModel::of(CostName::Zero)
            .knobs()
            .iter()
            .map(|(name, _)| Ok((*name, node.get(name)?)))
            .collect::<Result<_, kfd_preempt::Error>>()?;
        Ok(KnobGuard { node, saved })
    }

    fn apply(&self, c: &CostModel) -> Result<(), kfd_preempt::Error> {
        c.knobs()
            .iter()
            .try_for_each(|(name, value)| self.node.set(name, *value))
    }
}

impl Drop for KnobGuard {
    fn drop(&mut self) {
        for (name, v) in &self.saved {
            let _ = self.node.set(name, *v);
        }
    }
}

/// One repetition: caller-seen time, module time, runlist updates.
/// One repetition: take-off wall time, the module's time, runlist updates,
/// put-back wall time.
type Rep = Result<(Duration, Duration, u64, Duration), String>;

/// Repeats `one` (which returns caller-seen time, module time and runlist
/// updates of one repetition) within the budget.
/// The sorted samples of one measurement.
#[derive(Default)]
struct Samples {
    wall: Vec<Duration>,
    module: Vec<Duration>,
    /// Wall time minus module time, per repetition.
    overhead: Vec<Duration>,
    resume: Vec<Duration>,
    updates: u64,
}

fn measure(reps: u32, budget: Duration, mut one: impl FnMut() -> Rep) -> Result<Samples, String> {
    let start = Instant::now();
    let mut s = Samples::default();
    for i in 0..reps.max(1) {
        if i >= 3 && start.elapsed() > budget {
            break;
        }
        let (w, m, u, r) = one()?;
        s.wall.push(w);
        s.module.push(m);
        s.overhead.push(w.saturating_sub(m));
        s.resume.push(r);
        // Every repetition issues the same work; keep the last count.
        s.updates = u;
    }
    s.wall.sort();
    s.module.sort();
    s.overhead.sort();
    s.resume.sort();
    Ok(s)
}

/// The simulated node's update counter; on hardware there is none.
fn counter(node: Option<&SimNode>) -> Result<Option<u64>, String> {
    node.map(|n| n.get("runlist_updates").map_err(|e| e.to_string()))
        .transpose()
}

/// Updates a repetition issued: as the simulated node counted them, which
/// must agree with what the module reported; on hardware, as reported.
fn updates_between(before: Option<u64>, after: Option<u64>, reported: u64) -> u64 {
    match (before, after) {
        (Some(b), Some(a)) => a - b,
        _ => reported,
    }
}

struct Cell<'a> {
    dev: &'a Device,
    targets: &'a [Target<'a>],
    refs: &'a [QueueRef],
    node: Option<&'a SimNode>,
}

impl Cell<'_> {
    fn resume_all(&self) -> Result<Duration, String> {
        let t = Instant::now();
        let r = self.dev.resume(self.refs).map_err(|e| e.to_string())?;
        let wall = t.elapsed();
        if !r.all_succeeded() {
            return Err(format!(
                "resume after a repetition failed: {:?}",
                r.failures().next()
            ));
        }
        Ok(wall)
    }

    fn batch(&self) -> Rep {
        let before = counter(self.node)?;
        let t = Instant::now();
        let r = self
            .dev
            .preempt(self.refs, &BatchOptions::default())
            .map_err(|e| e.to_string())?;
        let wall = t.elapsed();
        let counted = updates_between(before, counter(self.node)?, r.runlist_updates.into());
        if r.num_ok as usize != self.refs.len() || counted != u64::from(r.runlist_updates) {
            return Err(format!(
                "batch: {} of {} done, {} updates reported, {counted} counted",
                r.num_ok,
                self.refs.len(),
                r.runlist_updates
            ));
        }
        let resume = self.resume_all()?;
        Ok((wall, r.elapsed, counted, resume))
    }

    fn singles(&self) -> Rep {
        let before = counter(self.node)?;
        let (mut module, mut reported) = (Duration::ZERO, 0u64);
        let t = Instant::now();
        for q in self.refs {
            let r = self
                .dev
                .preempt(&[*q], &BatchOptions::default())
                .map_err(|e| e.to_string())?;
            if r.num_ok != 1 {
                return Err(format!("single PREEMPT of {q}: {:?}", r.outcomes));
            }
            module += r.elapsed;
            reported += u64::from(r.runlist_updates);
        }
        let wall = t.elapsed();
        let counted = updates_between(before, counter(self.node)?, reported);
        let resume = self.resume_all()?;
        Ok((wall, module, counted, resume))
    }

    fn freeze(&self) -> Rep {
        let before = counter(self.node)?;
        let mut module = Duration::ZERO;
        let t = Instant::now();
        for target in self.targets {
            module += target.freeze().map_err(|e| e.to_string())?;
        }
        let wall = t.elapsed();
        // FREEZE reports no update count: on hardware, one per target.
        let counted = updates_between(before, counter(self.node)?, self.targets.len() as u64);
        let t = Instant::now();
        for target in self.targets {
            target.thaw().map_err(|e| e.to_string())?;
        }
        Ok((wall, module, counted, t.elapsed()))
    }
}

/// The wall times of `n` calls of `call`, sorted.
fn sorted_timings<T, E: ToString>(
    n: usize,
    mut call: impl FnMut() -> Result<T, E>,
) -> Result<Vec<Duration>, String> {
    let mut samples = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        call().map_err(|e| e.to_string())?;
        samples.push(t.elapsed());
    }
    samples.sort();
    Ok(samples)
}

fn floor(dev: &Device, cost: &CostModel) -> Result<Floor, String> {
    let samples = sorted_timings(500, || dev.info())?;
    let empty = sorted_timings(500, || dev.preempt(&[], &BatchOptions::default()))?;
    Ok(Floor {
        cost_model: cost.name.clone(),
        samples: samples.len() as u32,
        p50_us: percentile_us(&samples, 0.5),
        p99_us: percentile_us(&samples, 0.99),
        empty_batch_p50_us: percentile_us(&empty, 0.5),
    })
}

fn run_cell(
    args: &BenchArgs,
    dev: &Device,
    cost: &CostModel,
    k: u32,
    p: u32,
) -> Result<Vec<Row>, String> {
    let procs = p.min(k).max(1);
    let tenants = spread(k, procs)
        .into_iter()
        .map(|q| Tenant::spawn(args.node, q, args.hardware.then_some(&args.workload)))
        .collect::<Result<Vec<_>, _>>()?;
    let targets = tenants
        .iter()
        .map(|t| dev.attach(t.pid))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| e.to_string())?;
    let mut refs = Vec::new();
    // Each tenant's pid and queue ids, for the debugger method.
    let mut per_tenant = Vec::new();
    for (tenant, t) in tenants.iter().zip(&targets) {
        let mut queues = t.query().map_err(|e| e.to_string())?;
        if let Some(rings) = &tenant.rings {
            queues.retain(|q| rings.contains(&q.ring_base_address));
        }
        per_tenant.push((
            tenant.pid,
            queues.iter().map(|q| q.queue_id).collect::<Vec<_>>(),
        ));
        refs.extend(queues.iter().map(|q| q.queue_ref()));
    }
    if refs.len() != k as usize {
        return Err(format!(
            "expected {k} queues, the tenants have {}",
            refs.len()
        ));
    }
    let node = SimNode::new(args.node);
    let cell = Cell {
        dev,
        targets: &targets,
        refs: &refs,
        node: (!args.hardware).then_some(&node),
    };
    let budget = Duration::from_millis(args.budget_ms);
    let methods: [(&str, &dyn Fn() -> Rep); 3] = [
        (BATCH, &|| cell.batch()),
        (SINGLES, &|| cell.singles()),
        (FREEZE, &|| cell.freeze()),
    ];
    let mut rows = Vec::new();
    let mut results = Vec::new();
    for (method, f) in methods {
        results.push((method, measure(args.reps, budget, f)?));
    }
    // Last: while a process is debug-enabled kfd_preempt refuses it.
    if args.hardware {
        match debugger_cell(&per_tenant, args.reps, budget) {
            Ok(s) => results.push((DEBUGGER, s)),
            Err(e) => eprintln!("bench: K={k} P={p}: no debugger comparison: {e}"),
        }
    }
    for (method, s) in results {
        rows.push(Row {
            cost_model: cost.name.clone(),
            k,
            p,
            processes: procs,
            method: method.into(),
            reps: s.wall.len() as u32,
            p50_us: percentile_us(&s.wall, 0.5),
            p99_us: percentile_us(&s.wall, 0.99),
            max_us: percentile_us(&s.wall, 1.0),
            resume_p50_us: percentile_us(&s.resume, 0.5),
            resume_p99_us: percentile_us(&s.resume, 0.99),
            resume_max_us: percentile_us(&s.resume, 1.0),
            runlist_updates: s.updates,
            module_p50_us: percentile_us(&s.module, 0.5),
            module_p99_us: percentile_us(&s.module, 0.99),
            module_max_us: percentile_us(&s.module, 1.0),
            overhead_p50_us: percentile_us(&s.overhead, 0.5),
        });
    }
    drop(targets);
    drop(tenants);
    Ok(rows)
}

/// The debugger's SUSPEND_QUEUES and RESUME_QUEUES of every tenant's
/// queues, one call per process each way; amdkfd reports no hardware time
/// or update count, so the module columns are 0 and the updates P.
fn debugger_cell(
    per_tenant: &[(i32, Vec<u32>)],
    reps: u32,
    budget: Duration,
) -> Result<Samples, String> {
    let mut dbg = Debugger::new()?;
    for (pid, _) in per_tenant {
        dbg.attach(*pid)?;
    }
    measure(reps, budget, || {
        let mut wall = Duration::ZERO;
        for (pid, ids) in per_tenant {
            wall += dbg.suspend(*pid, ids)?;
        }
        let mut resume = Duration::ZERO;
        for (pid, ids) in per_tenant {
            resume += dbg.resume(*pid, ids)?;
        }
        Ok((wall, Duration::ZERO, per_tenant.len() as u64, resume))
    })
}

/// The text table for one cost model.
pub(crate) fn table(results: &Results, cost: &CostModel) -> String {
    let mut out = format!("cost model {}: {}\n", cost.name, cost.label);
    if let Some(f) = results.floor.iter().find(|f| f.cost_model == cost.name) {
        out += &format!(
            "null ioctl (INFO) floor: p50 {:.1} us, p99 {:.1} us ({} calls)\n",
            f.p50_us, f.p99_us, f.samples
        );
    }
    out += &format!(
        "{:>5} {:>3} {:>3} | {:>29} | {:>29} | {:>29} | {:>8} {:>8}\n",
        "K",
        "P",
        "pr",
        "batch p50/p99 us (updates)",
        "K singles p50/p99 us (upd)",
        "P freezes p50/p99 us (upd)",
        "single/b",
        "freeze/b"
    );
    let mut cells: Vec<(u32, u32)> = results
        .rows
        .iter()
        .filter(|r| r.cost_model == cost.name)
        .map(|r| (r.k, r.p))
        .collect();
    cells.dedup();
    for (k, p) in cells {
        let get = |m: &str| {
            results
                .rows
                .iter()
                .find(|r| r.cost_model == cost.name && r.k == k && r.p == p && r.method == m)
        };
        let (Some(b), Some(s), Some(f)) = (get(BATCH), get(SINGLES), get(FREEZE)) else {
            continue;
        };
        let fmt = |r: &Row| format!("{:.1}/{:.1} ({})", r.p50_us, r.p99_us, r.runlist_updates);
        out += &format!(
            "{k:>5} {p:>3} {:>3} | {:>29} | {:>29} | {:>29} | {:>7.1}x {:>7.1}x\n",
            b.processes,
            fmt(b),
            fmt(s),
            fmt(f),
            s.p50_us / b.p50_us.max(f64::MIN_POSITIVE),
            f.p50_us / b.p50_us.max(f64::MIN_POSITIVE)
        );
    }
    for d in results
        .rows
        .iter()
        .filter(|r| r.cost_model == cost.name && r.method == DEBUGGER)
    {
        out += &format!(
            "{:>5} {:>3} {:>3} | debugger SUSPEND_QUEUES p50/p99/max {:.1}/{:.1}/{:.1} us, RESUME_QUEUES p50 {:.1} us ({} calls)\n",
            d.k, d.p, d.processes, d.p50_us, d.p99_us, d.max_us, d.resume_p50_us, d.runlist_updates
        );
    }
    out
}

/// Goals of issue 14 for the software around the hardware phase, in
/// multiples of the INFO floor measured in the same run.
const SINGLE_GOAL: f64 = 5.0;
const BATCH_OVERHEAD_GOAL: f64 = 10.0;
const BATCH_K: u32 = 64;

/// The software cost of one cost model's run against its INFO floor: a
/// single-entry PREEMPT's wall time, and a 64-entry batch's wall time minus
/// its `elapsed_ns` (with the fewest processes measured). Empty if the run
/// has neither point.
pub(crate) fn software_cost(results: &Results, cost: &CostModel) -> String {
    let Some(floor) = results.floor.iter().find(|f| f.cost_model == cost.name) else {
        return String::new();
    };
    let batch = |k: u32| {
        results
            .rows
            .iter()
            .filter(|r| r.cost_model == cost.name && r.k == k && r.method == BATCH)
            .min_by_key(|r| r.processes)
    };
    let info = floor.p50_us.max(f64::MIN_POSITIVE);
    let mut out = String::new();
    // What any batch costs before its first entry: the goals below are
    // only reachable if they lie above it.
    if floor.empty_batch_p50_us > 0.0 {
        out += &format!(
            "  PREEMPT of no queue, wall p50       {:>9.1} us = {:>5.1}x INFO (the batch ioctl's floor)\n",
            floor.empty_batch_p50_us,
            floor.empty_batch_p50_us / info
        );
    }
    if let Some(one) = batch(1) {
        out += &format!(
            "  PREEMPT of 1 queue, wall p50        {:>9.1} us = {:>5.1}x INFO (goal <= {SINGLE_GOAL}x)\n",
            one.p50_us,
            one.p50_us / info
        );
    }
    if let Some(b) = batch(BATCH_K) {
        out += &format!(
            "  PREEMPT of {BATCH_K} queues, wall - elapsed {:>7.1} us = {:>5.1}x INFO (goal <= {BATCH_OVERHEAD_GOAL}x)\n",
            b.overhead_p50_us,
            b.overhead_p50_us / info
        );
    }
    if out.is_empty() {
        return out;
    }
    format!(
        "software cost, cost model {} ({}), against INFO p50 {:.1} us:\n{out}",
        cost.name,
        if results.label.is_empty() {
            "unlabelled kernel"
        } else {
            &results.label
        },
        floor.p50_us
    )
}

pub(crate) fn run(args: &BenchArgs) -> crate::Result<()> {
    let dev = Device::open()?;
    let info = dev.info()?;
    if !args.hardware && !info.caps.has(Caps::SIM) {
        return Err("bench runs on simulated nodes: load the module with sim_nodes=N (and run as root, for the debugfs knobs), or measure real queues with --hardware".into());
    }
    let guard = if args.hardware {
        None
    } else {
        Some(KnobGuard::new(args.node)?)
    };
    let workload = args.hardware.then_some(&args.workload);
    // The node's mode, from the GC version a tenant's queue reports.
    let node_mode = {
        let t = Tenant::spawn(args.node, 1, workload)?;
        let target = dev.attach(t.pid)?;
        let gc = target
            .query()?
            .first()
            .map(|q| q.gc_ip_version)
            .unwrap_or(0);
        if gc >= 0x0b0000 { "mes" } else { "hws" }.to_string()
    };
    let label = args.label.clone().unwrap_or_default();
    let mut results = if args.hardware {
        Results {
            schema: "kfd-preempt-bench/1".into(),
            environment: format!(
                "real queues of {} processes; wall times measured in the caller; nothing modelled",
                args.workload.display()
            ),
            label: label.clone(),
            node: args.node,
            node_mode,
            cost_models: vec![CostModel {
                name: "measured".into(),
                modelled: false,
                label: if label.is_empty() {
                    "measured".into()
                } else {
                    format!("measured on {label}")
                },
                cycle_ns: 0,
                per_queue_ns: 0,
                mes_call_ns: 0,
            }],
            floor: Vec::new(),
            rows: Vec::new(),
        }
    } else {
        Results {
            schema: "kfd-preempt-bench/1".into(),
            environment: "simulated kfd_preempt node; wall times measured in the caller; in this project's CI that is QEMU TCG, so absolute times are inflated and only ratios and update counts carry over".into(),
            label,
            node: args.node,
            node_mode,
            cost_models: args.cost.iter().map(|c| CostModel::of(*c)).collect(),
            floor: Vec::new(),
            rows: Vec::new(),
        }
    };
    for cost in results.cost_models.clone() {
        if let Some(guard) = &guard {
            guard.apply(&cost)?;
        }
        results.floor.push(floor(&dev, &cost)?);
        for &k in &args.k {
            for &p in &args.p {
                eprintln!("bench: {} K={k} P={p}", cost.name);
                results.rows.extend(run_cell(args, &dev, &cost, k, p)?);
            }
        }
        print!("{}", table(&results, &cost));
    }
    // The goals are about software: a modelled hardware cost is not.
    for cost in results.cost_models.iter().filter(|c| !c.modelled) {
        print!("{}", software_cost(&results, cost));
    }
    drop(guard);
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_string_pretty(&results)? + "\n")?;
    }
    if let Some(path) = &args.svg {
        std::fs::write(path, chart::svg(&results)?)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_are_nearest_rank() {
        let v: Vec<Duration> = (1..=100).map(Duration::from_micros).collect();
        assert_eq!(percentile_us(&v, 0.5), 50.0);
        assert_eq!(percentile_us(&v, 0.99), 99.0);
        assert_eq!(percentile_us(&v[..3], 0.99), 3.0);
        assert_eq!(percentile_us(&[], 0.5), 0.0);
    }

    #[test]
    fn queues_are_spread_evenly() {
        assert_eq!(spread(64, 8), [8; 8]);
        assert_eq!(spread(4, 4), [1; 4]);
        assert_eq!(spread(10, 4), [3, 3, 2, 2]);
        assert_eq!(spread(1024, 16).iter().sum::<u32>(), 1024);
    }

    #[test]
    fn every_modelled_cost_says_so() {
        let m = CostModel::of(CostName::Mi300);
        assert!(m.modelled && m.label.starts_with("MODELLED"));
        let z = CostModel::of(CostName::Zero);
        assert!(!z.modelled && z.cycle_ns == 0 && z.per_queue_ns == 0 && z.mes_call_ns == 0);
    }

    #[test]
    fn ready_lines_name_the_workload_rings() {
        assert_eq!(
            ready_rings("ready pid=7 queues=2 rings=0x7f00,0x7e00"),
            Some(vec![0x7f00, 0x7e00])
        );
        assert_eq!(ready_rings("ready pid=7 queues=2"), None);
        assert_eq!(ready_rings("ready pid=7 rings=0x7f00,zz"), None);
    }

    fn row(k: u32, processes: u32, wall: f64, overhead: f64) -> Row {
        Row {
            cost_model: "zero".into(),
            k,
            p: processes,
            processes,
            method: BATCH.into(),
            reps: 3,
            p50_us: wall,
            p99_us: wall,
            max_us: wall,
            resume_p50_us: 0.0,
            resume_p99_us: 0.0,
            resume_max_us: 0.0,
            runlist_updates: 1,
            module_p50_us: wall - overhead,
            module_p99_us: 0.0,
            module_max_us: 0.0,
            overhead_p50_us: overhead,
        }
    }

    #[test]
    fn software_cost_is_in_multiples_of_info() {
        let zero = CostModel::of(CostName::Zero);
        let mut r = Results {
            schema: "kfd-preempt-bench/1".into(),
            environment: String::new(),
            label: "bench kernel".into(),
            node: 0,
            node_mode: "hws".into(),
            cost_models: vec![zero.clone()],
            floor: vec![Floor {
                cost_model: "zero".into(),
                samples: 10,
                p50_us: 4.0,
                p99_us: 5.0,
                empty_batch_p50_us: 12.0,
            }],
            rows: vec![
                row(1, 1, 20.0, 18.0),
                row(64, 8, 500.0, 80.0),
                row(64, 1, 300.0, 40.0),
            ],
        };
        let text = software_cost(&r, &zero);
        assert!(text.contains("bench kernel"), "{text}");
        assert!(
            text.contains("12.0 us =   3.0x INFO (the batch ioctl's floor)"),
            "{text}"
        );
        assert!(text.contains("20.0 us =   5.0x INFO"), "{text}");
        // The fewest processes: the 64-queue batch of one tenant.
        assert!(text.contains("40.0 us =  10.0x INFO"), "{text}");
        r.floor.clear();
        assert_eq!(software_cost(&r, &zero), "");
    }

    #[test]
    fn hardware_updates_are_as_reported_simulated_ones_as_counted() {
        assert_eq!(updates_between(None, None, 3), 3);
        assert_eq!(updates_between(Some(10), Some(12), 3), 2);
    }

    #[test]
    fn measure_stops_at_the_budget_but_runs_three() {
        let mut calls = 0;
        let s = measure(100, Duration::ZERO, || {
            calls += 1;
            Ok((
                Duration::from_micros(calls),
                Duration::ZERO,
                7,
                Duration::ZERO,
            ))
        })
        .unwrap();
        assert_eq!((s.wall.len(), s.resume.len(), s.updates), (3, 3, 7));
    }
}
