// SPDX-License-Identifier: GPL-2.0

//! A fuzzing campaign: LibAFL's in-process executor runs each program, a
//! map of KCOV edges guides it, and an oracle violation is its objective.
//!
//! What it writes in `--out`:
//! * `progress.log`: a line every 10 s (executions, per second, corpus,
//!   edges, module PCs);
//! * `current.json`: the program running now (what a kernel panic leaves);
//! * `violation-N.json`, `.txt`, `.sh`, `.c`: each failing program,
//!   minimized, listed, as a replay script and as a C reproducer;
//! * `pcs.txt`: the module's section addresses and every PC reached, for
//!   scripts/fuzz-coverage.py;
//! * `summary.txt`: totals, and per call kind how often it succeeded.
//!
//! The corpus (`--corpus`) is read at start and written back at the end,
//! one readable JSON program per file.

use std::{
    cell::RefCell,
    collections::HashSet,
    fs,
    io::Write,
    path::Path,
    process::ExitCode,
    ptr::addr_of_mut,
    rc::Rc,
    time::{Duration, Instant},
};

use libafl::{
    corpus::{Corpus, InMemoryCorpus},
    events::SimpleEventManager,
    executors::{inprocess::InProcessExecutor, ExitKind},
    feedbacks::{CrashFeedback, MaxMapFeedback},
    fuzzer::{Evaluator, Fuzzer, StdFuzzer},
    generators::Generator,
    monitors::NopMonitor,
    mutators::HavocScheduledMutator,
    observers::StdMapObserver,
    schedulers::QueueScheduler,
    stages::StdMutationalStage,
    state::{HasCorpus, HasRand, StdState},
    Error,
};
use libafl_bolts::{rands::StdRand, tuples::tuple_list};

use crate::{
    exec::Outcomes,
    generate::{any_program, seeds},
    judge::execute,
    kcov::Kcov,
    mem::read_only_page,
    minimize::{minimize, reproducer, write_violation},
    mutate::{
        DeleteCall, DuplicateCall, FlipDirection, InsertCall, InsertInverse, RegenerateCall,
        SpliceCalls, SwapCalls, TweakNumber,
    },
    oracle::Oracle,
    program::Program,
    Options,
};

/// Edges of the coverage map (a hash of the previous and current PC).
const MAP_SIZE: usize = 1 << 16;
static mut MAP: [u8; MAP_SIZE] = [0; MAP_SIZE];

/// Names of the call kinds, by [`crate::generate::kind_of`].
pub const KIND_NAMES: [&str; 25] = [
    "open-owner",
    "close-owner",
    "open-tenant",
    "close-tenant",
    "create-queue",
    "create-ring",
    "destroy-queue",
    "doorbell",
    "queue-status",
    "INFO",
    "ATTACH",
    "DETACH",
    "QUERY",
    "PREEMPT/RESUME",
    "FREEZE/THAW",
    "WATCH/UNWATCH",
    "SAMPLE",
    "eventfd",
    "ARM",
    "set-knob",
    "sleep",
    "hand-off",
    "fork",
    "thread",
    "kill-children",
];

/// What the harness shares with the campaign loop.
struct Shared {
    oracle: Oracle,
    pcs: HashSet<u64>,
    /// Every edge of the map ever hit (the map itself is cleared before
    /// each execution).
    edges: Vec<bool>,
    found: Vec<(Program, Vec<String>)>,
    /// Violations of a kind already found.
    repeats: u64,
    /// Stop executing (`--stop-on-violation` after one).
    stop: bool,
    outcomes: Outcomes,
}

/// Programs to start from.
struct ProgramGenerator;

impl<S: HasRand> Generator<Program, S> for ProgramGenerator {
    fn generate(&mut self, state: &mut S) -> Result<Program, Error> {
        Ok(any_program(state.rand_mut()))
    }
}

/// What identifies a violation's kind: the counter, or the log line
/// without its numbers.
fn signature(v: &[String]) -> String {
    v.iter()
        .map(|l| {
            if l.starts_with("kernel log:") {
                l.chars().filter(|c| !c.is_ascii_digit()).collect()
            } else {
                l.split_whitespace().next().unwrap_or("").to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("|")
}

fn load_corpus(dir: &Path) -> Vec<Program> {
    let Ok(rd) = fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut paths: Vec<_> = rd.filter_map(|e| e.ok().map(|e| e.path())).collect();
    paths.sort();
    paths
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .filter_map(|p| serde_json::from_slice(&fs::read(p).ok()?).ok())
        .collect()
}

fn save_corpus<C: Corpus<Program>>(dir: &Path, corpus: &C) -> usize {
    if fs::create_dir_all(dir).is_err() {
        return 0;
    }
    let mut n = 0;
    for id in corpus.ids() {
        let Ok(p) = corpus.cloned_input_for_id(id) else {
            continue;
        };
        let Ok(text) = serde_json::to_vec_pretty(&p) else {
            continue;
        };
        let name = format!("{:016x}.json", libafl_bolts::generic_hash_std(&p));
        if fs::write(dir.join(name), text).is_ok() {
            n += 1;
        }
    }
    n
}

/// Module section addresses, for mapping PCs to the .ko.
fn module_sections() -> String {
    let mut s = String::new();
    let Ok(rd) = fs::read_dir("/sys/module/kfd_preempt/sections") else {
        return s;
    };
    for e in rd.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if let Ok(addr) = fs::read_to_string(e.path()) {
            s.push_str(&format!("section {name} {}\n", addr.trim()));
        }
    }
    s
}

/// The campaign; exit status 1 if an oracle failed, 2 if it could not run.
pub fn run(o: &Options) -> ExitCode {
    match campaign(o) {
        Ok(0) => ExitCode::SUCCESS,
        Ok(_) => ExitCode::from(1),
        Err(e) => {
            eprintln!("kfdp-fuzz: {e}");
            ExitCode::from(2)
        }
    }
}

fn campaign(o: &Options) -> Result<usize, Error> {
    fs::create_dir_all(&o.out)?;
    let kcov = Kcov::enable().map_err(|e| {
        Error::illegal_state(format!(
            "KCOV: {e} (the fuzzing kernel has CONFIG_KCOV and debugfs at /sys/kernel/debug)"
        ))
    })?;
    let read_only = read_only_page();
    let shared = Rc::new(RefCell::new(Shared {
        oracle: Oracle::new(),
        pcs: HashSet::new(),
        edges: vec![false; MAP_SIZE],
        found: Vec::new(),
        repeats: 0,
        stop: false,
        outcomes: [(0, 0); 25],
    }));
    let stop_on_violation = o.stop_on_violation;
    let current = o.out.join("current.json");

    let sh = shared.clone();
    let mut harness = |p: &Program| -> ExitKind {
        if sh.borrow().stop {
            return ExitKind::Ok;
        }
        if let Ok(text) = serde_json::to_vec(p) {
            let _ = fs::write(&current, text);
        }
        kcov.reset();
        let mut pcs = Vec::new();
        let mut s = sh.borrow_mut();
        let (outcomes, v) = execute(p, read_only, &mut s.oracle, Some(&kcov), &mut pcs);
        let mut prev = 0u64;
        for &pc in &pcs {
            let edge =
                ((pc ^ (prev >> 1)).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 48) as usize % MAP_SIZE;
            s.edges[edge] = true;
            // SAFETY: Written only here, on this thread, between the
            // observer's reads.
            unsafe {
                let m = &mut *addr_of_mut!(MAP);
                let b = &mut m[edge];
                *b = b.saturating_add(1);
            }
            s.pcs.insert(pc);
            prev = pc;
        }
        for (k, (ok, err)) in outcomes.iter().enumerate() {
            s.outcomes[k].0 += ok;
            s.outcomes[k].1 += err;
        }
        if v.is_empty() {
            return ExitKind::Ok;
        }
        s.oracle.accept_current();
        // One program of each kind of violation is kept and minimized;
        // the others are counted.
        let sig = signature(&v);
        if s.found.iter().any(|(_, old)| signature(old) == sig) {
            s.repeats += 1;
        } else {
            s.found.push((p.clone(), v));
        }
        s.stop = stop_on_violation;
        ExitKind::Crash
    };

    // SAFETY: MAP lives for the whole program and is written only by the
    // harness above, while the observer is not reading it.
    let observer =
        unsafe { StdMapObserver::from_mut_ptr("kcov", addr_of_mut!(MAP).cast::<u8>(), MAP_SIZE) };
    let mut feedback = MaxMapFeedback::new(&observer);
    let mut objective = CrashFeedback::new();
    let mut state = StdState::new(
        StdRand::with_seed(o.seed),
        InMemoryCorpus::<Program>::new(),
        InMemoryCorpus::<Program>::new(),
        &mut feedback,
        &mut objective,
    )?;
    let mut mgr = SimpleEventManager::new(NopMonitor::new());
    let mut fuzzer = StdFuzzer::new(QueueScheduler::new(), feedback, objective);
    let mut executor = InProcessExecutor::builder()
        .timeout(Duration::from_secs(120))
        .harness(&mut harness)
        .observers(tuple_list!(observer))
        .fuzzer(&mut fuzzer)
        .state(&mut state)
        .event_mgr(&mut mgr)
        .build()?;

    let started = Instant::now();
    let mut log = fs::File::create(o.out.join("progress.log"))?;
    let kept = o.corpus.as_deref().map(load_corpus).unwrap_or_default();
    let seeded = kept.len();
    for p in &kept {
        fuzzer.evaluate_input(&mut state, &mut executor, &mut mgr, p)?;
    }
    // The seeds always, random programs only into an empty corpus.
    let fresh = state.corpus().count() == 0;
    for p in seeds() {
        fuzzer.add_input(&mut state, &mut executor, &mut mgr, p)?;
    }
    if fresh {
        state.generate_initial_inputs_forced(
            &mut fuzzer,
            &mut executor,
            &mut ProgramGenerator,
            &mut mgr,
            16,
        )?;
    }
    let line = format!(
        "kfdp-fuzz: seed {}, {} corpus programs read, {} kept, {} s",
        o.seed,
        seeded,
        state.corpus().count(),
        o.seconds
    );
    println!("{line}");
    let _ = writeln!(log, "{line}");

    let mutator = HavocScheduledMutator::new(tuple_list!(
        InsertCall,
        DeleteCall,
        RegenerateCall,
        TweakNumber,
        SwapCalls,
        DuplicateCall,
        FlipDirection,
        InsertInverse,
        SpliceCalls
    ));
    let mut stages = tuple_list!(StdMutationalStage::new(mutator));
    let deadline = started + Duration::from_secs(o.seconds);
    let mut next_report = started + Duration::from_secs(10);
    let mut reported = 0;
    while Instant::now() < deadline {
        fuzzer.fuzz_one(&mut stages, &mut executor, &mut state, &mut mgr)?;
        let (found, stop) = {
            let s = shared.borrow();
            (s.found.len(), s.stop)
        };
        if Instant::now() >= next_report || found > reported {
            next_report = Instant::now() + Duration::from_secs(10);
            let s = shared.borrow();
            let secs = started.elapsed().as_secs_f64();
            let execs = *libafl::state::HasExecutions::executions(&state);
            let line = format!(
                "[{secs:7.1} s] execs {execs} ({:.1}/s) corpus {} edges {} module-pcs {} violations {found}",
                execs as f64 / secs.max(0.001),
                state.corpus().count(),
                s.edges.iter().filter(|&&e| e).count(),
                s.pcs.len()
            );
            println!("{line}");
            let _ = writeln!(log, "{line}");
            reported = found;
        }
        if stop {
            break;
        }
    }
    let execs = *libafl::state::HasExecutions::executions(&state);
    let secs = started.elapsed().as_secs_f64();

    // Minimize and report what failed, outside LibAFL's executor.
    let found = std::mem::take(&mut shared.borrow_mut().found);
    for (i, (p, v)) in found.iter().enumerate() {
        let (small, c) = {
            let mut s = shared.borrow_mut();
            let small = minimize(p, v, read_only, &mut s.oracle);
            let c = reproducer(&small, read_only, &mut s.oracle);
            (small, c)
        };
        write_violation(&o.out, i, p, &small, v, &c);
    }

    let saved = o
        .corpus
        .as_deref()
        .map_or(0, |d| save_corpus(d, state.corpus()));
    let s = shared.borrow();
    let mut pcs: Vec<u64> = s.pcs.iter().copied().collect();
    pcs.sort_unstable();
    let mut text = module_sections();
    for pc in &pcs {
        text.push_str(&format!("pc {pc:#x}\n"));
    }
    fs::write(o.out.join("pcs.txt"), text)?;

    let mut sum = format!(
        "executions {execs}\nseconds {secs:.1}\nexecutions_per_second {:.2}\ncorpus {}\ncorpus_saved {saved}\nedges {}\nmodule_pcs {}\nviolations {}\nviolations_repeated {}\n",
        execs as f64 / secs.max(0.001),
        state.corpus().count(),
        s.edges.iter().filter(|&&e| e).count(),
        pcs.len(),
        found.len(),
        s.repeats
    );
    for (k, (ok, err)) in s.outcomes.iter().enumerate() {
        sum.push_str(&format!("call {} ok {ok} failed {err}\n", KIND_NAMES[k]));
    }
    fs::write(o.out.join("summary.txt"), &sum)?;
    print!("{sum}");
    let _ = fs::remove_file(&current);
    Ok(found.len())
}
