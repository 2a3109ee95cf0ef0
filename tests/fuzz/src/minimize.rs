// SPDX-License-Identifier: GPL-2.0

//! A failing program made small, and written so that a person can read it
//! and run it again: the program as JSON, a listing of its calls, a shell
//! script that replays it (`kfdp-fuzz replay`), and a C reproducer
//! ([`crate::repro`]).

use std::{
    fs,
    path::Path,
    process::ExitCode,
    time::{Duration, Instant},
};

use crate::{
    exec::{reset_knobs, Context},
    judge::execute,
    mem::read_only_page,
    oracle::Oracle,
    program::{Call, Program},
};

/// Runs to try at most while minimizing, and the time they may take.
const MAX_TRIES: usize = 300;
const MAX_TIME: Duration = Duration::from_secs(120);

/// Does `p` still fail an oracle the same way `v` did (the same kind of
/// violation, by its first word)?
fn still_fails(p: &Program, v: &[String], read_only: u64, oracle: &mut Oracle) -> bool {
    let (_, now) = execute(p, read_only, oracle, None, &mut Vec::new());
    if now.is_empty() {
        return false;
    }
    oracle.accept_current();
    let kind = |s: &String| s.split_whitespace().next().unwrap_or("").to_string();
    now.iter().any(|n| v.iter().any(|o| kind(o) == kind(n)))
}

/// Removes calls (and calls nested in forks and threads, then the entries
/// of PREEMPT, RESUME, WATCH and UNWATCH arrays) one at a time,
/// from the end, keeping each removal after which the program still
/// fails. A violation only the kernel log saw is not minimized: a
/// WARN_ONCE does not fire twice.
pub fn minimize(p: &Program, v: &[String], read_only: u64, oracle: &mut Oracle) -> Program {
    if v.iter().all(|s| s.starts_with("kernel log:")) {
        return p.clone();
    }
    let mut best = p.clone();
    let mut tries = 0;
    let started = Instant::now();
    // A try past the time budget counts as the last.
    let budget = |tries: &mut usize| {
        if started.elapsed() > MAX_TIME {
            *tries = MAX_TRIES;
        }
    };
    let mut changed = true;
    while changed && tries < MAX_TRIES {
        changed = false;
        let mut i = best.calls.len();
        while i > 0 && tries < MAX_TRIES {
            i -= 1;
            let mut cand = best.clone();
            cand.calls.remove(i);
            tries += 1;
            budget(&mut tries);
            if still_fails(&cand, v, read_only, oracle) {
                best = cand;
                changed = true;
                continue;
            }
            // Inside a fork or a thread: one nested call at a time.
            let nested_len = match &best.calls[i] {
                Call::Fork { calls } | Call::Thread { calls } => calls.len(),
                _ => 0,
            };
            let mut j = nested_len;
            while j > 0 && tries < MAX_TRIES {
                j -= 1;
                let mut cand = best.clone();
                if let Call::Fork { calls } | Call::Thread { calls } = &mut cand.calls[i] {
                    calls.remove(j);
                }
                tries += 1;
                budget(&mut tries);
                if still_fails(&cand, v, read_only, oracle) {
                    best = cand;
                    changed = true;
                }
            }
        }
    }
    // Then the entries of each array, one at a time.
    for i in 0..best.calls.len() {
        let mut j = entries(&best.calls[i]).map_or(0, |e| e.len());
        while j > 0 && tries < MAX_TRIES {
            j -= 1;
            let mut cand = best.clone();
            if let Some(e) = entries_mut(&mut cand.calls[i]) {
                e.remove(j);
            }
            tries += 1;
            budget(&mut tries);
            if still_fails(&cand, v, read_only, oracle) {
                best = cand;
            }
        }
    }
    best
}

fn entries(c: &Call) -> Option<&Vec<crate::program::Entry>> {
    match c {
        Call::Batch { entries, .. } | Call::Watch { entries, .. } => Some(entries),
        _ => None,
    }
}

fn entries_mut(c: &mut Call) -> Option<&mut Vec<crate::program::Entry>> {
    match c {
        Call::Batch { entries, .. } | Call::Watch { entries, .. } => Some(entries),
        _ => None,
    }
}

/// One line per call, numbered.
pub fn listing(p: &Program) -> String {
    let mut s = String::new();
    for (i, c) in p.calls.iter().enumerate() {
        s.push_str(&format!("{i:3}: {c:?}\n"));
    }
    s
}

/// Runs `small` once more, writing its C reproducer; the oracles' baseline
/// moves past what it does again.
pub fn reproducer(small: &Program, read_only: u64, oracle: &mut Oracle) -> String {
    let c = Context::new(read_only).run_recorded(small);
    reset_knobs();
    let _ = oracle.after_owners_closed();
    let _ = oracle.violations();
    oracle.accept_current();
    c
}

/// Writes `violation-N.{json,txt,sh,c}` for a failing program.
pub fn write_violation(
    out: &Path,
    n: usize,
    found: &Program,
    small: &Program,
    v: &[String],
    c: &str,
) {
    let base = out.join(format!("violation-{n}"));
    let json = base.with_extension("json");
    if let Ok(mut text) = serde_json::to_vec_pretty(small) {
        text.push(b'\n');
        let _ = fs::write(&json, text);
    }
    let mut txt = String::from("What failed:\n");
    for l in v {
        txt.push_str(&format!("  {l}\n"));
    }
    txt.push_str(&format!(
        "\nThe program, minimized from {} calls to {} (each call names what\n\
         earlier calls made by slot, the n-th modulo how many exist;\n\
         everything is closed after the last call):\n\n",
        found.calls.len(),
        small.calls.len()
    ));
    txt.push_str(&listing(small));
    txt.push_str("\nAs found:\n\n");
    txt.push_str(&listing(found));
    let _ = fs::write(base.with_extension("txt"), &txt);
    let name = json
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let sh = format!(
        "#!/bin/sh\n\
         # Replays {name} on a kernel with kfd_preempt loaded with sim_nodes=4\n\
         # (as root, debugfs mounted); exit status 1 while the defect is there.\n\
         cd \"$(dirname \"$0\")\" && exec kfdp-fuzz replay {name}\n"
    );
    let _ = fs::write(base.with_extension("sh"), sh);
    let _ = fs::write(base.with_extension("c"), c);
    eprintln!("kfdp-fuzz: VIOLATION {n}:\n{txt}");
}

fn read_program(path: &Path) -> Option<Program> {
    match fs::read(path)
        .map_err(|e| e.to_string())
        .and_then(|b| serde_json::from_slice(&b).map_err(|e| e.to_string()))
    {
        Ok(p) => Some(p),
        Err(e) => {
            eprintln!("kfdp-fuzz: {}: {e}", path.display());
            None
        }
    }
}

/// `kfdp-fuzz c FILE.json`: runs the program once, printing it as C.
pub fn print_c(path: &Path) -> ExitCode {
    let Some(p) = read_program(path) else {
        return ExitCode::from(2);
    };
    print!("{}", Context::new(read_only_page()).run_recorded(&p));
    reset_knobs();
    ExitCode::SUCCESS
}

/// `kfdp-fuzz replay FILE.json`: runs the program once and says what the
/// oracles find.
pub fn replay(path: &Path) -> ExitCode {
    let Some(p) = read_program(path) else {
        return ExitCode::from(2);
    };
    let mut oracle = Oracle::new();
    print!("{}", listing(&p));
    let (_, v) = execute(&p, read_only_page(), &mut oracle, None, &mut Vec::new());
    if v.is_empty() {
        println!("kfdp-fuzz: every oracle holds");
        ExitCode::SUCCESS
    } else {
        for l in &v {
            println!("kfdp-fuzz: VIOLATION: {l}");
        }
        ExitCode::from(1)
    }
}
