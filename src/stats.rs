// SPDX-License-Identifier: GPL-2.0

//! What an operator can read in debugfs (`Documentation/admin-guide.rst`,
//! "Statistics and tracing"):
//!
//! * `kfd_preempt/stats`: the module's counters, the histograms of the
//!   hardware phase, and each open file's counters;
//! * `kfd_preempt/attachments`: each open file (owner), the processes it
//!   attached, and the queues and nodes it holds on them.
//!
//! One `key value` pair per field, so that shell and C tests parse it.
//! Lock order: [`OPEN`], then an owner's state, then the registry.

use core::fmt;

use kernel::{
    prelude::*,
    sync::{
        atomic::Relaxed,
        Arc, //
    },
};

use crate::{
    backend::mux::Backends,
    backend::Backend,
    engine::owner::{
        Owner,
        OWNERS_ALIVE, //
    },
    engine::registry::{
        HIST_BUCKETS,
        REGISTRY, //
    },
    umem::{
        EVENTFDS_HELD,
        PINNED_PAGES, //
    },
};

kernel::sync::global_lock! {
    // SAFETY: Initialised in the module initialiser, before the device exists.
    pub(crate) unsafe(uninit) static OPEN: Mutex<KVec<Arc<Owner<Backends>>>> = KVec::new();
}

/// Upper bound of histogram bucket `i`, in µs, as its label.
fn bucket_label(i: usize) -> u64 {
    1u64 << i
}

/// `stats`.
pub(crate) fn stats(_: &(), f: &mut fmt::Formatter<'_>) -> fmt::Result {
    let s = REGISTRY.lock().stats;
    writeln!(f, "preempt_batches {}", s.preempt_batches)?;
    writeln!(f, "resume_batches {}", s.resume_batches)?;
    writeln!(f, "queues_preempted {}", s.queues_preempted)?;
    writeln!(f, "queues_resumed {}", s.queues_resumed)?;
    writeln!(f, "runlist_updates {}", s.runlist_updates)?;
    writeln!(f, "leases_expired {}", s.leases_expired)?;
    writeln!(f, "external_resumes {}", s.external_resumes)?;
    writeln!(f, "targets_exited {}", s.targets_exited)?;
    writeln!(f, "watches_remade {}", s.watches_remade)?;
    writeln!(f, "max_elapsed_ns {}", s.max_elapsed_ns)?;
    writeln!(f, "pinned_pages {}", PINNED_PAGES.load(Relaxed))?;
    writeln!(f, "eventfds_held {}", EVENTFDS_HELD.load(Relaxed))?;
    writeln!(f, "owners_alive {}", OWNERS_ALIVE.load(Relaxed))?;
    for (name, hist) in [
        ("preempt", &s.hw_phase_hist[0]),
        ("resume", &s.hw_phase_hist[1]),
    ] {
        // Buckets by their upper bound in µs; the last one is open.
        write!(f, "{name}_hw_phase_us")?;
        for (i, n) in hist.iter().enumerate() {
            if i + 1 == HIST_BUCKETS {
                write!(f, " inf:{n}")?;
            } else {
                write!(f, " {}:{n}", bucket_label(i))?;
            }
        }
        writeln!(f)?;
    }
    let open = OPEN.lock();
    for o in open.iter() {
        let st = o.state.lock().stats;
        writeln!(
            f,
            "owner {} tgid {} batches {} queues_preempted {} queues_resumed {} runlist_updates {} leases_expired {} external_resumes {}",
            o.id,
            o.opener,
            st.batches,
            st.queues_preempted,
            st.queues_resumed,
            st.runlist_updates,
            st.leases_expired,
            st.external_resumes
        )?;
    }
    Ok(())
}

/// `attachments`.
pub(crate) fn attachments(_: &(), f: &mut fmt::Formatter<'_>) -> fmt::Result {
    let open = OPEN.lock();
    for o in open.iter() {
        owner_attachments(o, f)?;
    }
    Ok(())
}

fn owner_attachments<B: Backend>(o: &Owner<B>, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    let st = o.state.lock();
    writeln!(
        f,
        "owner {} tgid {} attachments {} marks {} freezes {} watches {}",
        o.id,
        o.opener,
        st.attachments.len(),
        st.marks.len(),
        st.freezes.len(),
        st.watches.len()
    )?;
    for a in st.attachments.iter() {
        match a.target.as_ref() {
            Some(t) => {
                let info = o.backend.info(t);
                writeln!(
                    f,
                    "  handle {} tgid {} gpus {}",
                    a.handle, info.tgid, info.num_gpus
                )?;
            }
            None => writeln!(f, "  handle {} exited", a.handle)?,
        }
        for m in st.marks.values().filter(|m| m.handle == a.handle) {
            write!(
                f,
                "    queue gpu_id {:#x} queue_id {}",
                m.gpu_id, m.queue_id
            )?;
            match m.lease_left_ns() {
                Some(ns) => writeln!(f, " lease_left_ms {}", ns.max(0) / 1_000_000)?,
                None => writeln!(f, " lease none")?,
            }
        }
        for z in st.freezes.iter().filter(|z| z.handle == a.handle) {
            writeln!(f, "    frozen gpu_id {:#x} count {}", z.gpu_id, z.count)?;
        }
    }
    Ok(())
}
