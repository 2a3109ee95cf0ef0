// SPDX-License-Identifier: GPL-2.0

//! kfdp-fuzz: coverage-guided fuzzing of kfd_preempt's uapi on LibAFL, in
//! the test VM (Documentation/testing.rst, "Fuzzing").
//!
//! ```text
//! kfdp-fuzz fuzz --out DIR [--corpus DIR] [--seconds N] [--seed S] [--stop-on-violation]
//! kfdp-fuzz replay FILE.json
//! kfdp-fuzz c FILE.json      (runs it once and prints it as C)
//! ```
//!
//! Each execution runs one [`program::Program`] of calls (owners, simulated
//! tenants and their rings, every ioctl, eventfds, fault knobs, a thread, a
//! forked child, tenants killed mid-program), closes all it opened, and
//! checks the [`oracle`]s. Coverage is KCOV's, of the module only.

mod campaign;
mod exec;
mod generate;
mod judge;
mod kcov;
mod mem;
mod minimize;
mod mutate;
mod oracle;
mod program;
mod repro;

use std::{io::Write, path::PathBuf, process::ExitCode};

/// LibAFL says why it ends a campaign early (a program that outlived its
/// timeout, a signal in the harness) only through `log`, and then exits
/// without a summary: its warnings and errors go to stderr, so that the
/// VM's console keeps the reason.
struct StderrLog;

impl log::Log for StderrLog {
    fn enabled(&self, m: &log::Metadata<'_>) -> bool {
        m.level() <= log::Level::Warn
    }

    fn log(&self, r: &log::Record<'_>) {
        if self.enabled(r.metadata()) {
            // Formatted on the stack and written with one write(2), not
            // eprintln!: LibAFL logs from its signal handlers, and a signal
            // that came while this thread held stderr's lock, or malloc's,
            // would deadlock on it. A longer line is cut.
            let mut buf = [0u8; 512];
            let mut cur = std::io::Cursor::new(&mut buf[..]);
            let _ = writeln!(cur, "kfdp-fuzz: libafl {}: {}", r.level(), r.args());
            let n = usize::try_from(cur.position()).unwrap_or(0);
            // SAFETY: `buf` is valid for `n` (at most its length) bytes; fd 2
            // is only written to.
            let _ = unsafe { libc::write(2, buf.as_ptr().cast(), n) };
        }
    }

    fn flush(&self) {}
}

/// The command line of `fuzz`.
pub struct Options {
    pub out: PathBuf,
    pub corpus: Option<PathBuf>,
    pub seconds: u64,
    pub seed: u64,
    pub stop_on_violation: bool,
}

fn usage() -> ExitCode {
    eprintln!(
        "usage: kfdp-fuzz fuzz --out DIR [--corpus DIR] [--seconds N] [--seed S] [--stop-on-violation]\n\
         \x20      kfdp-fuzz replay FILE.json\n\
         \x20      kfdp-fuzz c FILE.json"
    );
    ExitCode::from(2)
}

fn parse_fuzz(args: &[String]) -> Option<Options> {
    let mut o = Options {
        out: PathBuf::new(),
        corpus: None,
        seconds: 60,
        seed: 1,
        stop_on_violation: false,
    };
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--out" => o.out = PathBuf::from(it.next()?),
            "--corpus" => o.corpus = Some(PathBuf::from(it.next()?)),
            "--seconds" => o.seconds = it.next()?.parse().ok()?,
            "--seed" => o.seed = it.next()?.parse().ok()?,
            "--stop-on-violation" => o.stop_on_violation = true,
            _ => return None,
        }
    }
    (!o.out.as_os_str().is_empty()).then_some(o)
}

fn main() -> ExitCode {
    if log::set_logger(&StderrLog).is_ok() {
        log::set_max_level(log::LevelFilter::Warn);
    }
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("fuzz") => match parse_fuzz(&args[1..]) {
            Some(o) => campaign::run(&o),
            None => usage(),
        },
        Some("replay") if args.len() == 2 => minimize::replay(&PathBuf::from(&args[1])),
        Some("c") if args.len() == 2 => minimize::print_c(&PathBuf::from(&args[1])),
        _ => usage(),
    }
}
