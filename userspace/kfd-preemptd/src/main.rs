//! `kfd-preemptd`: keeps best-effort GPU queues off while latency-critical
//! ones have work. See Documentation/userspace.rst, "kfd-preemptd(8)".

use std::{
    os::{fd::AsFd, unix::net::UnixStream},
    path::PathBuf,
    process::ExitCode,
};

use clap::Parser;
use kfd_preemptd::{
    config::{Config, ConfigError, Priority, DEFAULT_CONFIG_PATH},
    daemon,
    discover::Discovery,
    topology,
};

/// Exit status of a configuration or usage error (clap's, too).
const EXIT_CONFIG: u8 = 2;
/// Exit status of a runtime failure (the device, the system).
const EXIT_FAILURE: u8 = 1;

/// Priority daemon for kfd_preempt: preempts best-effort GPU queues while
/// latency-critical queues have work.
#[derive(Debug, Parser)]
#[command(name = "kfd-preemptd", version)]
struct Cli {
    /// Configuration file.
    #[arg(long, value_name = "FILE", default_value = DEFAULT_CONFIG_PATH)]
    config: PathBuf,

    /// Validate FILE and exit: 0 if valid, 2 if not.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["once", "stats_path"])]
    check_config: Option<PathBuf>,

    /// Scan for tenants once, print how each is classified, and exit
    /// (does not open the device).
    #[arg(long)]
    once: bool,

    /// Write the statistics here instead of `daemon.stats_path`.
    #[arg(long, value_name = "FILE")]
    stats_path: Option<PathBuf>,
}

/// Reads and validates the configuration, and checks that its `[[node]]`
/// sections name nodes of this host.
fn load(path: &std::path::Path) -> Result<Config, ExitCode> {
    Config::load(path)
        .and_then(|c| {
            c.check_nodes(&topology::host_gpu_ids(std::path::Path::new("/sys")))?;
            Ok(c)
        })
        .map_err(|e| {
            match e {
                ConfigError::Read { .. } => eprintln!("kfd-preemptd: {e}"),
                _ => eprintln!("kfd-preemptd: {}: {e}", path.display()),
            }
            ExitCode::from(EXIT_CONFIG)
        })
}

fn once(cfg: &Config) -> ExitCode {
    // One scan: nothing is known before it, so no pidfd would be used.
    let mut d = Discovery::new(PathBuf::from("/proc"));
    let r = match d.scan(cfg) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("kfd-preemptd: scanning /proc: {e}");
            return ExitCode::from(EXIT_FAILURE);
        }
    };
    println!(
        "{:>8}  {:<4}  {:<16}  {:<16}  {:<16}  CGROUP",
        "PID", "KIND", "COMM", "CLASS", "PRIORITY"
    );
    for c in &r.added {
        let kind = match c.kind {
            kfd_preempt::TargetKind::KfdFd => "kfd",
            kfd_preempt::TargetKind::SimFd => "sim",
        };
        println!(
            "{:>8}  {:<4}  {:<16}  {:<16}  {:<16}  {}",
            c.info.pid,
            kind,
            c.info.comm,
            c.class.as_deref().unwrap_or("-"),
            if c.class.is_some() {
                cfg.priority_name(c.priority)
            } else {
                "ignore (no match)"
            },
            c.info.cgroup.as_deref().unwrap_or("-"),
        );
    }
    let n = |p: Priority| r.added.iter().filter(|c| c.priority == p).count();
    // Highest level first: "1 latency-critical, 1 best-effort" with the
    // default levels.
    let mut counts: Vec<String> = (0..cfg.daemon.levels.len())
        .rev()
        .map(|rank| {
            let p = Priority::Level(rank);
            format!("{} {}", n(p), cfg.priority_name(p))
        })
        .collect();
    counts.push(format!("{} ignored", n(Priority::Ignore)));
    println!("{} tenant(s): {}", r.added.len(), counts.join(", "));
    ExitCode::SUCCESS
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Some(path) = &cli.check_config {
        return match load(path) {
            Ok(cfg) => {
                println!(
                    "{}: ok ({} class rule(s))",
                    path.display(),
                    cfg.classes.len()
                );
                ExitCode::SUCCESS
            }
            Err(code) => code,
        };
    }
    // A bad configuration stops the daemon here, before the device is
    // opened: nothing is ever preempted under a half-understood policy.
    let cfg = match load(&cli.config) {
        Ok(c) => c,
        Err(code) => return code,
    };
    if cli.once {
        return once(&cfg);
    }
    let stats_path = cli
        .stats_path
        .or_else(|| Some(cfg.daemon.stats_path.clone()))
        .filter(|p| !p.as_os_str().is_empty());
    // SIGTERM and SIGINT write to this socket pair, which the loop polls:
    // no window in which a signal is missed between a check and poll(2).
    let (stop_rx, stop_tx) = match UnixStream::pair() {
        Ok(p) => p,
        Err(e) => {
            eprintln!("kfd-preemptd: socketpair: {e}");
            return ExitCode::from(EXIT_FAILURE);
        }
    };
    for sig in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
        let tx = match stop_tx.try_clone() {
            Ok(tx) => tx,
            Err(e) => {
                eprintln!("kfd-preemptd: socketpair: {e}");
                return ExitCode::from(EXIT_FAILURE);
            }
        };
        if let Err(e) = signal_hook::low_level::pipe::register(sig, tx) {
            eprintln!("kfd-preemptd: installing a signal handler: {e}");
            return ExitCode::from(EXIT_FAILURE);
        }
    }
    match daemon::run(&cfg, stats_path, stop_rx.as_fd()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("kfd-preemptd: {e}");
            ExitCode::from(EXIT_FAILURE)
        }
    }
}
