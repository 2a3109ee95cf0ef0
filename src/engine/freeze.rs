// SPDX-License-Identifier: GPL-2.0

//! The engine of FREEZE and THAW: one method per step of
//! [`Owner::freeze`].
//!
//! 1. [`freeze_nodes`]: the target's nodes the call names;
//! 2. [`check_counts`]: only what this owner froze can be thawed through
//!    it, and no count may wrap;
//! 3. `Owner::freeze_node`, node by node: the backend's freeze or thaw,
//!    recorded in the registry and in this owner's counts;
//! 4. `Owner::undo_partial_freeze`: a FREEZE that one node refused as
//!    too soon (EAGAIN, which promises that nothing changed) thaws what it
//!    froze on the others.

use kernel::prelude::*;

use crate::{
    backend::{
        Backend,
        FreezeOp, //
    },
    engine::{
        owner::{
            attachment,
            Freeze,
            Owner, //
        },
        registry::REGISTRY,
    },
    trace, uapi,
};

/// The nodes of `all` (a target's) that a call naming `gpu_id` (0: all of
/// them) freezes or thaws; EINVAL if none.
fn freeze_nodes(all: &[u32], gpu_id: u32) -> Result<KVec<u32>> {
    let mut gpus = KVec::new();
    for &g in all {
        if gpu_id == 0 || gpu_id == g {
            gpus.push(g, GFP_KERNEL)?;
        }
    }
    if gpus.is_empty() {
        return Err(EINVAL);
    }
    Ok(gpus)
}

/// Whether this owner's `freezes` allow the call on `handle`'s nodes
/// `gpus`: a THAW needs a freeze of this owner on each; a FREEZE needs every
/// count of `handle` to have room (they stay exactly paired with amdkfd's),
/// and reserves an entry per node, so that recording cannot fail later.
fn check_counts(freezes: &mut KVec<Freeze>, handle: u32, gpus: &[u32], thaw: bool) -> Result {
    if thaw {
        let held = |g: u32| {
            freezes
                .iter()
                .any(|x| x.handle == handle && x.gpu_id == g && x.count > 0)
        };
        if !gpus.iter().all(|&g| held(g)) {
            return Err(EINVAL);
        }
        return Ok(());
    }
    if freezes
        .iter()
        .any(|x| x.handle == handle && x.count == u32::MAX)
    {
        return Err(EOVERFLOW);
    }
    freezes.reserve(gpus.len(), GFP_KERNEL)?;
    Ok(())
}

/// Counts one more (FREEZE) or one less (THAW) freeze of `handle` on node
/// `gpu_id` in `freezes`. A FREEZE's capacity was reserved by
/// [`check_counts`]; a THAW without an entry (none) changes nothing.
fn count(freezes: &mut KVec<Freeze>, handle: u32, gpu_id: u32, thaw: bool) {
    match freezes
        .iter_mut()
        .find(|x| x.handle == handle && x.gpu_id == gpu_id)
    {
        Some(x) if thaw => x.count -= 1,
        Some(x) => x.count += 1,
        None if thaw => {}
        None => {
            let _ = freezes.push(
                Freeze {
                    handle,
                    gpu_id,
                    count: 1,
                },
                GFP_KERNEL,
            );
        }
    }
}

/// One node's outcome.
struct NodeOutcome {
    /// The backend's errno (0 if it went well), for `f.status`.
    status: i32,
    /// Applied, but could not be recorded: undone, and the call's status
    /// is ENOMEM.
    out_of_memory: bool,
    elapsed_ns: u64,
}

impl<B: Backend> Owner<B> {
    /// KFDP_IOC_FREEZE and KFDP_IOC_THAW. Validation errors fail the call;
    /// what the hardware did goes in `f.status`.
    pub(crate) fn freeze(&self, f: &mut uapi::kfdp_freeze, op: FreezeOp) -> Result {
        let thaw = op == FreezeOp::Thaw;
        if f.flags != 0 || f.status != 0 || f.elapsed_ns != 0 {
            return Err(EINVAL);
        }
        // No new freeze once hibernation has begun (THAW is always allowed).
        let _activity = if thaw {
            None
        } else {
            Some(crate::engine::pm::CallInFlight::begin()?)
        };
        self.sweep();
        let mut guard = self.state.lock();
        let state = &mut *guard;
        let att = attachment(&state.attachments, f.handle).ok_or(EINVAL)?;
        let key = att.key;
        let Some(target) = att.target.as_ref() else {
            return Err(ESRCH);
        };
        let gpus = freeze_nodes(&self.backend.gpu_ids(target)?, f.gpu_id)?;
        check_counts(&mut state.freezes, f.handle, &gpus, thaw)?;

        let mut status = 0;
        let mut elapsed = 0u64;
        // Nodes this FREEZE froze, to take back if another one was too soon.
        let mut frozen_now = KVec::new();
        for &g in gpus.iter() {
            let at = Node {
                target,
                key,
                handle: f.handle,
                gpu_id: g,
            };
            let o = self.freeze_node(&at, op, &mut frozen_now, &mut state.freezes);
            elapsed += o.elapsed_ns;
            if status == 0 {
                status = o.status;
            }
            if o.out_of_memory {
                status = ENOMEM.to_errno();
            }
        }
        if !thaw && status == EAGAIN.to_errno() {
            elapsed +=
                self.undo_partial_freeze(target, key, f.handle, &frozen_now, &mut state.freezes);
        }
        state.freezes.retain(|x| x.count > 0);
        f.status = status;
        f.elapsed_ns = elapsed;
        Ok(())
    }

    /// Freezes or thaws node `at`, and records it: in `frozen_now` (a
    /// FREEZE's, for [`Self::undo_partial_freeze`]), in the registry and in
    /// `freezes`. A freeze that cannot be recorded is undone: nothing stays
    /// frozen that no owner holds.
    fn freeze_node(
        &self,
        at: &Node<'_, B::Target>,
        op: FreezeOp,
        frozen_now: &mut KVec<u32>,
        freezes: &mut KVec<Freeze>,
    ) -> NodeOutcome {
        let thaw = op == FreezeOp::Thaw;
        let o = self.backend.freeze(at.target, at.gpu_id, op);
        let status = o.status.err().map_or(0, |e| e.to_errno());
        trace::freeze(self.id, at.handle, at.gpu_id, thaw, status, o.elapsed_ns);
        let mut out = NodeOutcome {
            status,
            out_of_memory: false,
            elapsed_ns: o.elapsed_ns,
        };
        if !o.applied {
            return out;
        }
        if !thaw && frozen_now.push(at.gpu_id, GFP_KERNEL).is_err() {
            // Could not remember it for an undo: undo it now.
            let _ = self.backend.freeze(at.target, at.gpu_id, FreezeOp::Thaw);
            out.out_of_memory = true;
            return out;
        }
        let mut reg = REGISTRY.lock();
        if thaw {
            reg.thaw(at.key, at.gpu_id, self.id);
        } else if reg.freeze(at.key, at.gpu_id, self.id).is_err() {
            // Could not record it: undo rather than leave it unowned.
            drop(reg);
            let _ = self.backend.freeze(at.target, at.gpu_id, FreezeOp::Thaw);
            frozen_now.pop();
            out.out_of_memory = true;
            return out;
        }
        drop(reg);
        count(freezes, at.handle, at.gpu_id, thaw);
        out
    }

    /// Thaws the nodes `frozen` of `target` (attachment `handle`, registry
    /// `key`) that this FREEZE froze a moment ago, taking back their
    /// records. Returns the time the backend took.
    fn undo_partial_freeze(
        &self,
        target: &B::Target,
        key: u64,
        handle: u32,
        frozen: &[u32],
        freezes: &mut KVec<Freeze>,
    ) -> u64 {
        let mut elapsed = 0;
        for &g in frozen {
            let o = self.backend.freeze(target, g, FreezeOp::Thaw);
            let status = o.status.err().map_or(0, |e| e.to_errno());
            trace::freeze(self.id, handle, g, true, status, o.elapsed_ns);
            elapsed += o.elapsed_ns;
            REGISTRY.lock().thaw(key, g, self.id);
            count(freezes, handle, g, true);
        }
        elapsed
    }
}

/// One node of an attached target, as a FREEZE or THAW names it.
struct Node<'a, T> {
    target: &'a T,
    /// The target's registry key.
    key: u64,
    /// Its attachment's handle.
    handle: u32,
    gpu_id: u32,
}
