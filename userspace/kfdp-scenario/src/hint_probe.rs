//! `hint-probe`: a process that gives kfd-preemptd one hint and reports the
//! answer, for the VM test of hints (`tests/vm/hint_test.sh`). It makes a
//! ring on a simulated node (unless `--no-queue`), waits until the daemon
//! has attached it (it is refused `not-a-tenant` until then), says that
//! work is coming, and then submits none: what the daemon did is the
//! hint's alone.

use std::{path::PathBuf, thread::sleep, time::Duration};

use kfd_preempt::{
    hint::{HintClient, HintError, Refusal},
    sim::SimTenant,
};

use crate::{
    clock::{now_ns, ns},
    results::write_atomically,
    Result,
};

/// The probe's options.
#[derive(clap::Args, Debug)]
pub struct HintProbeArgs {
    /// kfd-preemptd's hint socket.
    #[arg(long)]
    pub socket: PathBuf,
    /// Simulated node index of the probe's ring.
    #[arg(long, default_value_t = 0)]
    pub node: u32,
    /// Make no queue: a process that is not a tenant.
    #[arg(long)]
    pub no_queue: bool,
    /// How soon the hint says work is coming, ms.
    #[arg(long, default_value_t = 1000)]
    pub within_ms: u64,
    /// How long to wait to be a tenant, s.
    #[arg(long, default_value_t = 20)]
    pub wait_s: u64,
    /// How long to stay after the answer (connection open), ms.
    #[arg(long, default_value_t = 0)]
    pub hold_ms: u64,
    /// Where to write the answer, `ok N` or `refused REASON`, once it is
    /// known.
    #[arg(long)]
    pub answer_file: PathBuf,
}

/// Gives the hint and writes the daemon's answer.
pub fn run(args: &HintProbeArgs) -> Result<()> {
    let tenant = SimTenant::open()?;
    let _ring = if args.no_queue {
        None
    } else {
        Some(tenant.create_ring(args.node, 9, 64)?)
    };
    let client =
        HintClient::connect(&args.socket).map_err(|e| format!("{}: {e}", args.socket.display()))?;
    let within = Duration::from_millis(args.within_ms);
    let deadline = now_ns() + ns(Duration::from_secs(args.wait_s));
    let answer = loop {
        match client.begin(within, &[]) {
            Ok(hint) => {
                let answer = format!("ok {}", hint.nodes());
                hint.leave();
                break answer;
            }
            // Not attached yet: the daemon scans for new tenants.
            Err(HintError::Refused(Refusal::NotATenant))
                if !args.no_queue && now_ns() < deadline =>
            {
                sleep(Duration::from_millis(100));
            }
            Err(HintError::Refused(r)) => break format!("refused {r}"),
            Err(e) => return Err(e.to_string().into()),
        }
    };
    println!("hint-probe: {answer}");
    write_atomically(&args.answer_file, &format!("{answer}\n"))?;
    sleep(Duration::from_millis(args.hold_ms));
    Ok(())
}
