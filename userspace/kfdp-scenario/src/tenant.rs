//! `kfdp-scenario sim-tenant`: a process with queues on a simulated node,
//! for the bench, the VM's tests and the demo.

use std::io::{Read, Write};

use clap::Args;
use kfd_preempt::{sim::SimTenant, QueueType};

use kfd_preempt::signals::Release;

#[derive(Args, Debug)]
pub(crate) struct TenantArgs {
    /// Simulated node index (not a gpu_id).
    #[arg(long, default_value_t = 0)]
    pub(crate) node: u32,
    /// How many queues to create.
    #[arg(long, default_value_t = 4)]
    pub(crate) queues: u32,
    /// Their priority (0..15).
    #[arg(long, default_value_t = 7)]
    pub(crate) priority: u32,
    /// Also end when stdin reaches end of file (so that a parent holding
    /// the pipe takes the tenant down with it).
    #[arg(long)]
    pub(crate) stdin: bool,
}

/// Creates the queues, prints `ready pid=PID queues=ID,ID,...`, and keeps
/// them until SIGINT, SIGTERM, SIGHUP or SIGUSR1 (or, with `--stdin`, the
/// end of stdin).
pub(crate) fn run(args: &TenantArgs) -> crate::Result<()> {
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
    if args.stdin {
        // Whatever arrives on stdin is ignored; only its end matters.
        let mut buf = [0u8; 512];
        let mut stdin = std::io::stdin().lock();
        while stdin.read(&mut buf)? != 0 {}
    } else {
        let release = Release::install()?;
        while !release.requested() {
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    }
    Ok(())
}
