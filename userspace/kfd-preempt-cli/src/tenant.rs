//! `kfd-preempt sim-tenant`: a process with queues on a simulated node.

use std::io::{BufRead, Write};

use clap::Args;
use kfd_preempt::{sim::SimTenant, QueueType};

use crate::{CliResult, Done};

#[derive(Args, Debug)]
pub(crate) struct TenantArgs {
    /// Simulated node index (not a gpu_id).
    #[arg(long, default_value_t = 0)]
    node: u32,
    /// How many queues to create.
    #[arg(long, default_value_t = 4)]
    queues: u32,
    /// Their priority (0..15).
    #[arg(long, default_value_t = 7)]
    priority: u32,
}

/// Creates the queues, prints `ready pid=PID queues=ID,ID,...`, and keeps
/// them until stdin reaches end of file (its parent closes the pipe, or
/// Ctrl-D) or the process is killed.
pub(crate) fn run(args: &TenantArgs) -> CliResult {
    let tenant = SimTenant::open()?;
    let mut ids = Vec::new();
    for _ in 0..args.queues {
        ids.push(
            tenant
                .create_queue(args.node, QueueType::ComputeAql, args.priority)?
                .queue_id
                .to_string(),
        );
    }
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "ready pid={} queues={}",
        std::process::id(),
        ids.join(",")
    )?;
    out.flush()?;
    drop(out);
    let mut line = String::new();
    let mut stdin = std::io::stdin().lock();
    while stdin.read_line(&mut line)? != 0 {
        line.clear();
    }
    Ok(Done::Ok)
}
