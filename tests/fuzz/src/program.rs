// SPDX-License-Identifier: GPL-2.0

//! A fuzzing input: a program of calls on `/dev/kfd_preempt`, the simulated
//! tenants' `/dev/kfd_preempt_sim` and the simulated node's fault knobs.
//!
//! Calls name what earlier calls made by slot (the n-th owner file, tenant,
//! attachment handle, queue, eventfd), taken modulo what exists when the
//! call runs, so that almost every mutation stays a meaningful program;
//! [`Id::Raw`] and [`Ptr`] reach the values nobody made (0, maxima, just
//! past the maxima, misaligned, unmapped and kernel addresses).

use libafl::inputs::Input;
use serde::{Deserialize, Serialize};

/// Something an earlier call made, or a raw value.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq, Serialize, Deserialize)]
pub enum Id {
    /// The n-th (modulo how many exist; 0 if none).
    Made(u8),
    /// This value, whatever exists.
    Raw(u32),
}

/// Where a user pointer points.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq, Serialize, Deserialize)]
pub enum Ptr {
    /// A buffer of the size the call needs (for arrays: the entries given).
    Good,
    /// Null.
    Null,
    /// A good buffer moved by 1 to 7 bytes.
    Misaligned(u8),
    /// Mapped nowhere.
    Unmapped,
    /// A kernel address.
    Kernel,
    /// Read-only memory (the call must write it).
    ReadOnly,
    /// A good buffer that ends at an unmapped page after this many bytes.
    Short(u16),
}

/// What ATTACH names.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq, Serialize, Deserialize)]
pub enum Target {
    /// A simulated tenant's file (KFDP_TARGET_SIM_FD).
    Tenant(u8),
    /// A pid (KFDP_TARGET_PID): the fuzzer's own, a child's, or raw.
    OwnPid,
    ChildPid(u8),
    RawPid(i32),
    /// An fd that is no tenant: an owner file, an eventfd, a closed number.
    OwnerFd(u8),
    EventFd(u8),
    RawFd(i32),
}

/// One entry of a PREEMPT, RESUME, WATCH or UNWATCH array.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    pub handle: Id,
    /// A queue made by a tenant (its gpu_id and queue_id), or raw ids.
    pub queue: Id,
    /// With `queue` raw: this gpu_id (with `Made`, the queue's own).
    pub gpu_id: Id,
    /// A value left in `status` (the kernel must overwrite it).
    pub status: i32,
}

/// A simulated node's fault knob (debugfs `kfd_preempt/sim/nodeN/`).
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq, Serialize, Deserialize)]
pub enum Knob {
    FailUnmaps,
    FailMaps,
    DelayNextUs,
    /// The module-wide `sim/fail_node_lists`.
    FailNodeLists,
}

/// One call.
#[derive(Clone, Debug, Hash, PartialEq, Eq, Serialize, Deserialize)]
pub enum Call {
    /// open(/dev/kfd_preempt): a new owner.
    OpenOwner,
    /// close() of an owner's fd.
    CloseOwner { owner: u8 },
    /// open(/dev/kfd_preempt_sim): a new simulated process.
    OpenTenant,
    /// close() of a tenant's fd: the simulated process exits.
    CloseTenant { tenant: u8 },
    /// KFDP_SIM_IOC_CREATE_QUEUE.
    CreateQueue {
        tenant: u8,
        node: u32,
        queue_type: u32,
        priority: u32,
        reserved: u32,
    },
    /// KFDP_SIM_IOC_CREATE_RING, with a ring in the fuzzer's memory.
    CreateRing {
        tenant: u8,
        node: u32,
        priority: u32,
        packets: u32,
        ring: Ptr,
        read_index: Ptr,
        write_index: Ptr,
    },
    /// KFDP_SIM_IOC_DESTROY_QUEUE.
    DestroyQueue { tenant: u8, queue: Id },
    /// Writes dispatches into a ring queue and rings its doorbell.
    Doorbell {
        tenant: u8,
        queue: Id,
        dispatches: u8,
        work_us: u16,
    },
    /// KFDP_SIM_IOC_QUEUE_STATUS.
    QueueStatus { tenant: u8, queue: Id },
    /// KFDP_IOC_INFO, into `ptr`.
    Info { owner: u8, ptr: Ptr },
    /// KFDP_IOC_ATTACH.
    Attach {
        owner: u8,
        target: Target,
        /// Replaces the kind the target implies when set.
        kind: Option<u32>,
        flags: u32,
        reserved: u64,
    },
    /// KFDP_IOC_DETACH.
    Detach { owner: u8, handle: Id, flags: u32 },
    /// KFDP_IOC_QUERY.
    Query {
        owner: u8,
        handle: Id,
        gpu_id: Id,
        capacity: u32,
        entry_size: u32,
        ptr: Ptr,
    },
    /// KFDP_IOC_PREEMPT or KFDP_IOC_RESUME.
    Batch {
        owner: u8,
        resume: bool,
        entries: Vec<Entry>,
        /// Added to the number of entries given (wrapping).
        extra_count: u32,
        entry_size: u32,
        flags: u32,
        lease_ms: u32,
        ptr: Ptr,
        reserved: u64,
    },
    /// KFDP_IOC_FREEZE or KFDP_IOC_THAW.
    Freeze {
        owner: u8,
        thaw: bool,
        handle: Id,
        gpu_id: Id,
        flags: u32,
    },
    /// KFDP_IOC_WATCH or KFDP_IOC_UNWATCH.
    Watch {
        owner: u8,
        unwatch: bool,
        entries: Vec<Entry>,
        extra_count: u32,
        entry_size: u32,
        flags: u32,
        ptr: Ptr,
    },
    /// KFDP_IOC_SAMPLE.
    Sample {
        owner: u8,
        capacity: u32,
        entry_size: u32,
        ptr: Ptr,
    },
    /// eventfd(2), for ARM.
    MakeEventFd,
    /// KFDP_IOC_ARM.
    Arm {
        owner: u8,
        condition: u32,
        eventfd: Target,
        period_us: u32,
        idle_us: u32,
        reserved: u64,
    },
    /// Writes a fault knob of a simulated node.
    SetKnob { node: u8, knob: Knob, value: u32 },
    /// Sleeps, so that leases expire and samplers fire.
    Sleep { us: u16 },
    /// Hands a tenant to a child process that only holds its fd, and
    /// closes the fuzzer's copy: the tenant now dies when the child does.
    HandOff { tenant: u8 },
    /// Runs calls in a forked child, on the owner files it inherits
    /// (another process using them), then the child exits.
    Fork { calls: Vec<Call> },
    /// Runs calls on a second thread, concurrently with what follows.
    Thread { calls: Vec<Call> },
    /// SIGKILL to every child: tenants handed off die now.
    KillChildren,
}

/// A program: its calls in order. Everything it opened is closed, every
/// child killed and every thread joined after the last call.
#[derive(Clone, Debug, Default, Hash, PartialEq, Eq, Serialize, Deserialize)]
pub struct Program {
    pub calls: Vec<Call>,
}

impl Input for Program {}

/// Calls a program may have at most (the mutators keep to it).
pub const MAX_CALLS: usize = 48;
/// Calls a forked child or a thread runs at most.
pub const MAX_NESTED_CALLS: usize = 8;
/// Entries of one generated array at most (counts go beyond through
/// `extra_count`).
pub const MAX_ENTRIES: usize = 8;
