// SPDX-License-Identifier: GPL-2.0

//! LibAFL mutators of [`Program`]s: they add, drop, swap and regenerate
//! calls, change one number, and splice calls in from another program of
//! the corpus, keeping every program within [`MAX_CALLS`].

use std::borrow::Cow;

use libafl::{
    corpus::Corpus,
    mutators::{MutationResult, Mutator},
    state::{HasCorpus, HasRand},
    Error,
};
use libafl_bolts::{rands::Rand, Named};

use crate::{
    generate::{any_call, call_of_kind, for_each_u32, kind_of, tweak_u32},
    program::{Call, Program, MAX_CALLS},
};

/// Declares a mutator of a program as a function of the program and the
/// random source.
macro_rules! program_mutator {
    ($(#[$doc:meta])* $name:ident, |$p:ident, $r:ident| $body:block) => {
        $(#[$doc])*
        pub struct $name;

        impl Named for $name {
            fn name(&self) -> &Cow<'static, str> {
                static NAME: Cow<'static, str> = Cow::Borrowed(stringify!($name));
                &NAME
            }
        }

        impl<S: HasRand> Mutator<Program, S> for $name {
            fn mutate(&mut self, state: &mut S, $p: &mut Program) -> Result<MutationResult, Error> {
                let $r = state.rand_mut();
                Ok($body)
            }

            fn post_exec(&mut self, _: &mut S, _: Option<libafl::corpus::CorpusId>) -> Result<(), Error> {
                Ok(())
            }
        }
    };
}

program_mutator!(
    /// Inserts a new call anywhere.
    InsertCall,
    |p, r| {
        if p.calls.len() >= MAX_CALLS {
            MutationResult::Skipped
        } else {
            let at = r.below_or_zero(p.calls.len() + 1);
            let c = any_call(r, false);
            p.calls.insert(at, c);
            MutationResult::Mutated
        }
    }
);

program_mutator!(
    /// Removes one call.
    DeleteCall,
    |p, r| {
        if p.calls.len() <= 1 {
            MutationResult::Skipped
        } else {
            let at = r.below_or_zero(p.calls.len());
            p.calls.remove(at);
            MutationResult::Mutated
        }
    }
);

program_mutator!(
    /// Replaces one call by a new one of the same kind.
    RegenerateCall,
    |p, r| {
        if p.calls.is_empty() {
            MutationResult::Skipped
        } else {
            let at = r.below_or_zero(p.calls.len());
            let kind = kind_of(&p.calls[at]);
            p.calls[at] = call_of_kind(r, kind);
            MutationResult::Mutated
        }
    }
);

program_mutator!(
    /// Changes one 32-bit number of one call (nested calls included).
    TweakNumber,
    |p, r| {
        let mut fields = 0usize;
        visit_numbers(&mut p.calls, &mut |_| fields += 1);
        if fields == 0 {
            MutationResult::Skipped
        } else {
            let mut target = r.below_or_zero(fields);
            let seed = r.next();
            let mut local = libafl_bolts::rands::StdRand::with_seed(seed);
            visit_numbers(&mut p.calls, &mut |v| {
                if target == 0 {
                    tweak_u32(&mut local, v);
                }
                target = target.wrapping_sub(1);
            });
            MutationResult::Mutated
        }
    }
);

program_mutator!(
    /// Swaps two calls.
    SwapCalls,
    |p, r| {
        if p.calls.len() < 2 {
            MutationResult::Skipped
        } else {
            let a = r.below_or_zero(p.calls.len());
            let b = r.below_or_zero(p.calls.len());
            p.calls.swap(a, b);
            MutationResult::Mutated
        }
    }
);

program_mutator!(
    /// Repeats one call right after itself (a second PREEMPT, a double
    /// close, a THAW twice).
    DuplicateCall,
    |p, r| {
        if p.calls.is_empty() || p.calls.len() >= MAX_CALLS {
            MutationResult::Skipped
        } else {
            let at = r.below_or_zero(p.calls.len());
            let c = p.calls[at].clone();
            p.calls.insert(at + 1, c);
            MutationResult::Mutated
        }
    }
);

/// The call that undoes `c` with the same arguments (RESUME for PREEMPT,
/// THAW for FREEZE, UNWATCH for WATCH, and back), if it has one.
fn inverse(c: &Call) -> Option<Call> {
    let mut c = c.clone();
    match &mut c {
        Call::Batch { resume: b, .. }
        | Call::Freeze { thaw: b, .. }
        | Call::Watch { unwatch: b, .. } => *b = !*b,
        _ => return None,
    }
    Some(c)
}

program_mutator!(
    /// Turns a call into its inverse (PREEMPT into RESUME, ...).
    FlipDirection,
    |p, r| {
        let with: Vec<usize> = (0..p.calls.len())
            .filter(|&i| inverse(&p.calls[i]).is_some())
            .collect();
        if with.is_empty() {
            MutationResult::Skipped
        } else {
            let at = with[r.below_or_zero(with.len())];
            if let Some(c) = inverse(&p.calls[at]) {
                p.calls[at] = c;
            }
            MutationResult::Mutated
        }
    }
);

program_mutator!(
    /// Inserts, somewhere after a call, its inverse with the same
    /// arguments: WATCH then UNWATCH of the same queues, and so on, which
    /// random calls rarely pair.
    InsertInverse,
    |p, r| {
        let with: Vec<usize> = (0..p.calls.len())
            .filter(|&i| inverse(&p.calls[i]).is_some())
            .collect();
        if with.is_empty() || p.calls.len() >= MAX_CALLS {
            MutationResult::Skipped
        } else {
            let from = with[r.below_or_zero(with.len())];
            let at = from + 1 + r.below_or_zero(p.calls.len() - from);
            if let Some(c) = inverse(&p.calls[from]) {
                p.calls.insert(at, c);
            }
            MutationResult::Mutated
        }
    }
);

/// Calls `f` on every number of `calls` and of the calls nested in them.
fn visit_numbers(calls: &mut [Call], f: &mut dyn FnMut(&mut u32)) {
    for c in calls.iter_mut() {
        for_each_u32(c, f);
        if let Call::Fork { calls } | Call::Thread { calls } = c {
            for n in calls.iter_mut() {
                for_each_u32(n, f);
            }
        }
    }
}

/// Splices a run of calls from another program of the corpus.
pub struct SpliceCalls;

impl Named for SpliceCalls {
    fn name(&self) -> &Cow<'static, str> {
        static NAME: Cow<'static, str> = Cow::Borrowed("SpliceCalls");
        &NAME
    }
}

impl<S: HasRand + HasCorpus<Program>> Mutator<Program, S> for SpliceCalls {
    fn mutate(&mut self, state: &mut S, p: &mut Program) -> Result<MutationResult, Error> {
        let n = state.corpus().count();
        if n == 0 || p.calls.len() >= MAX_CALLS {
            return Ok(MutationResult::Skipped);
        }
        let nth = state.rand_mut().below_or_zero(n);
        let id = state.corpus().nth(nth);
        let other = state.corpus().cloned_input_for_id(id)?;
        if other.calls.is_empty() {
            return Ok(MutationResult::Skipped);
        }
        let r = state.rand_mut();
        let from = r.below_or_zero(other.calls.len());
        let len = 1 + r.below_or_zero((other.calls.len() - from).min(MAX_CALLS - p.calls.len()));
        let at = r.below_or_zero(p.calls.len() + 1);
        let run: Vec<Call> = other.calls[from..from + len].to_vec();
        p.calls.splice(at..at, run);
        p.calls.truncate(MAX_CALLS);
        Ok(MutationResult::Mutated)
    }

    fn post_exec(&mut self, _: &mut S, _: Option<libafl::corpus::CorpusId>) -> Result<(), Error> {
        Ok(())
    }
}
