//! `kfd-preempt`: preempt and resume amdkfd queues from the shell, and see
//! what the module and kfd-preemptd are doing. The operator commands only:
//! the developer commands (`bench`, `chart`, `sim-tenant`) are in the
//! unpackaged `kfdp-scenario`.
//!
//! A preemption lives as long as the `kfd-preempt` process that made it:
//! the module undoes everything an owner did when its device file closes,
//! so `preempt`, `freeze` and `watch` hold until the lease ends, a signal
//! arrives, or `kfd-preempt resume`/`thaw` asks them to release.

mod daemon;
mod doctor;
mod hold;
mod list;
mod registry;
mod stats;

use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};
use kfd_preempt::Device;

/// Exit status when the command ran but some queues failed.
const EXIT_PARTIAL: u8 = 3;
/// Exit status of `doctor` when a check failed.
const EXIT_NOT_READY: u8 = 4;

#[derive(Parser)]
#[command(
    name = "kfd-preempt",
    version,
    about = "Take amdkfd user-mode queues off the GPU and put them back (/dev/kfd_preempt)",
    after_help = "Exit status: 0 success; 1 error (the message says what to do); 2 usage; \
                  3 some queues failed (listed); 4 doctor: the host is not ready.\n\
                  A preemption lasts as long as the kfd-preempt process holding it."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// Which queues of the target.
#[derive(Args, Clone, Debug)]
struct Selection {
    /// The target process.
    pid: i32,
    /// A queue id (repeatable); see `kfd-preempt list PID`.
    #[arg(long = "queue", value_name = "ID", conflicts_with = "all")]
    queues: Vec<u32>,
    /// Every queue of the target.
    #[arg(long)]
    all: bool,
    /// Only queues on this GPU (topology gpu_id, e.g. 0x5100).
    #[arg(long, value_parser = parse_u32)]
    gpu: Option<u32>,
}

#[derive(Subcommand)]
enum Command {
    /// What the loaded module implements.
    Info {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// List a process's GPU queues.
    List {
        /// The process.
        pid: i32,
        /// Only this GPU (topology gpu_id).
        #[arg(long, value_parser = parse_u32)]
        gpu: Option<u32>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Preempt queues in one batch and hold them off the GPU until the
    /// lease ends, Ctrl-C/SIGTERM, or `kfd-preempt resume PID`.
    Preempt {
        #[command(flatten)]
        sel: Selection,
        /// The module resumes the queues by itself after MS milliseconds.
        #[arg(long, value_name = "MS")]
        lease: Option<u64>,
    },
    /// Release the queues a `kfd-preempt preempt`/`watch` holds on PID.
    Resume {
        /// The target process.
        pid: i32,
    },
    /// Freeze the whole process (the tenant cannot undo it; new queues stay
    /// off) and hold until Ctrl-C/SIGTERM, `--for`, or `kfd-preempt thaw PID`.
    Freeze {
        /// The target process.
        pid: i32,
        /// Only this GPU (topology gpu_id).
        #[arg(long, value_parser = parse_u32)]
        gpu: Option<u32>,
        /// Thaw by itself after MS milliseconds.
        #[arg(long = "for", value_name = "MS")]
        for_ms: Option<u64>,
    },
    /// Release the freeze a `kfd-preempt freeze` holds on PID.
    Thaw {
        /// The target process.
        pid: i32,
    },
    /// Preempt, show the queues' state (and a simulated tenant's progress)
    /// live, and release at Ctrl-C.
    Watch {
        #[command(flatten)]
        sel: Selection,
        /// Refresh period.
        #[arg(long, value_name = "MS", default_value_t = 500)]
        interval: u64,
    },
    /// The module's statistics (debugfs kfd_preempt/stats): counters,
    /// hardware-phase histograms, and each open file's counters.
    Stats(stats::StatsArgs),
    /// Show what kfd-preemptd is doing, from its statistics file: mode,
    /// counters, tenants and the reaction-latency histogram.
    Daemon(daemon::DaemonArgs),
    /// Whether this host can run kfd_preempt: one line per check (kernel,
    /// its config, headers, compilers, Rust metadata, DKMS, amdgpu, the
    /// layout gate, the module, its device, Secure Boot, the daemon), each
    /// failing one with its fix. Exit status 0 ready, 4 not ready.
    Doctor {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
}

fn parse_u32(s: &str) -> Result<u32, String> {
    let r = match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(hex) => u32::from_str_radix(hex, 16),
        None => s.parse(),
    };
    r.map_err(|e| format!("{s}: {e}"))
}

/// What a command reports besides plain success.
enum Done {
    Ok,
    Partial,
    NotReady,
}

/// A command's result; errors are printed as they are and exit with 1.
type CliResult = Result<Done, Box<dyn std::error::Error>>;

fn info(json: bool) -> CliResult {
    let info = Device::open()?.info()?;
    if json {
        let v = serde_json::json!({
            "abi_major": info.abi_major,
            "abi_minor": info.abi_minor,
            "caps": info.caps.names(),
            "max_batch": info.max_batch,
            "sizeof_queue_ref": info.sizeof_queue_ref,
            "sizeof_queue_info": info.sizeof_queue_info,
            "min_preempt_interval_us": info.min_preempt_interval_us,
        });
        println!("{v:#}");
        return Ok(Done::Ok);
    }
    println!("abi:        {}.{}", info.abi_major, info.abi_minor);
    let caps = info.caps.names();
    println!(
        "caps:       {}",
        if caps.is_empty() {
            "(none)".into()
        } else {
            caps.join(" ")
        }
    );
    println!("max batch:  {}", info.max_batch);
    if info.min_preempt_interval_us != 0 {
        println!(
            "rate limit: one PREEMPT or FREEZE per node every {} us",
            info.min_preempt_interval_us
        );
    }
    println!(
        "structs:    queue_ref {} bytes, queue_info {} bytes",
        info.sizeof_queue_ref, info.sizeof_queue_info
    );
    Ok(Done::Ok)
}

fn run(cli: Cli) -> CliResult {
    match cli.command {
        Command::Info { json } => info(json),
        Command::List { pid, gpu, json } => list::list(pid, gpu, json),
        Command::Preempt { sel, lease } => hold::preempt(&sel, lease, None),
        Command::Watch { sel, interval } => hold::preempt(&sel, None, Some(interval)),
        Command::Resume { pid } => registry::release(pid, registry::Hold::Preempt),
        Command::Freeze { pid, gpu, for_ms } => hold::freeze(pid, gpu, for_ms),
        Command::Thaw { pid } => registry::release(pid, registry::Hold::Freeze),
        Command::Stats(args) => stats::run(&args),
        Command::Daemon(args) => daemon::run(&args),
        Command::Doctor { json } => doctor(json),
    }
}

fn doctor(json: bool) -> CliResult {
    let checks = doctor::run_checks(&doctor::Host::real());
    let ready = doctor::ready(&checks);
    if json {
        let v = serde_json::json!({ "ready": ready, "checks": checks });
        println!("{v:#}");
    } else {
        print!("{}", doctor::render(&checks));
    }
    Ok(if ready { Done::Ok } else { Done::NotReady })
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(Done::Ok) => ExitCode::SUCCESS,
        Ok(Done::Partial) => ExitCode::from(EXIT_PARTIAL),
        Ok(Done::NotReady) => ExitCode::from(EXIT_NOT_READY),
        Err(e) => {
            eprintln!("kfd-preempt: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn cli_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn gpu_ids_parse_in_hex_and_decimal() {
        assert_eq!(parse_u32("0x5100"), Ok(0x5100));
        assert_eq!(parse_u32("20736"), Ok(0x5100));
        assert!(parse_u32("0xzz").is_err());
    }

    #[test]
    fn developer_commands_are_not_in_the_packaged_cli() {
        // bench, chart and sim-tenant are `kfdp-scenario`'s (unpackaged).
        for c in ["bench", "chart", "sim-tenant"] {
            assert!(Cli::try_parse_from(["kfd-preempt", c]).is_err(), "{c}");
        }
        let help = Cli::command().render_help().to_string();
        assert!(
            !help.contains("bench") && !help.contains("sim-tenant"),
            "{help}"
        );
    }

    #[test]
    fn queue_and_all_are_exclusive() {
        let r = Cli::try_parse_from(["kfd-preempt", "preempt", "7", "--queue", "1", "--all"]);
        assert!(r.is_err());
        let ok = Cli::try_parse_from([
            "kfd-preempt",
            "preempt",
            "7",
            "--queue",
            "1",
            "--queue",
            "2",
            "--lease",
            "100",
        ]);
        match ok.map(|c| c.command) {
            Ok(Command::Preempt { sel, lease }) => {
                assert_eq!((sel.pid, sel.queues, lease), (7, vec![1, 2], Some(100)));
            }
            _ => panic!("preempt did not parse"),
        }
    }
}
