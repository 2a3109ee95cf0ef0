// SPDX-License-Identifier: GPL-2.0

//! One run of a program, judged: what the campaign and the minimizer both
//! do with a program.

use crate::{
    exec::{reset_knobs, Context, Outcomes},
    kcov::Kcov,
    oracle::Oracle,
    program::Program,
};

/// Runs `p` once in a fresh context and judges it: the oracles once the
/// owners are closed (while the tenants still run), then once everything
/// is. With `kcov`, appends the PCs of the program (not of the oracles'
/// reads of debugfs) to `pcs`.
pub fn execute(
    p: &Program,
    read_only: u64,
    oracle: &mut Oracle,
    kcov: Option<&Kcov>,
    pcs: &mut Vec<u64>,
) -> (Outcomes, Vec<String>) {
    let mut v = Vec::new();
    let outcomes = Context::new(read_only).run_checked(p, || {
        if let Some(k) = kcov {
            k.drain_into(pcs);
        }
        v = oracle.after_owners_closed();
        if let Some(k) = kcov {
            k.reset();
        }
    });
    if let Some(k) = kcov {
        k.drain_into(pcs);
    }
    reset_knobs();
    v.extend(oracle.violations());
    (outcomes, v)
}
