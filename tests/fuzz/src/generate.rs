// SPDX-License-Identifier: GPL-2.0

//! Random calls and programs, drawn mostly from the values that matter to
//! the uapi: sizes of its structs and one off, its maxima and one past,
//! flags near the defined ones, and the simulated nodes' gpu_ids.

use libafl_bolts::rands::Rand;

use crate::program::{
    Call, Entry, Id, Knob, Program, Ptr, Target, MAX_CALLS, MAX_ENTRIES, MAX_NESTED_CALLS,
};

/// gpu_id of simulated node 0 (`src/backend/sim/mod.rs` GPU_ID_BASE).
pub const SIM_GPU_ID_BASE: u32 = 0x5100;

/// Values worth trying in any 32-bit field.
const INTERESTING: &[u32] = &[
    0,
    1,
    2,
    3,
    4,
    7,
    8,
    15,
    16,
    17,
    39,
    40,
    41,
    63,
    64,
    95,
    96,
    97,
    255,
    256,
    257,
    4095,
    4096,
    4097,
    65535,
    65536,
    86_400_000,
    86_400_001,
    SIM_GPU_ID_BASE,
    SIM_GPU_ID_BASE + 1,
    SIM_GPU_ID_BASE + 63,
    SIM_GPU_ID_BASE + 64,
    0x7fff_ffff,
    0x8000_0000,
    0xffff_fffe,
    0xffff_ffff,
];

fn pick(r: &mut impl Rand, n: usize) -> usize {
    r.below_or_zero(n)
}

fn chance(r: &mut impl Rand, p: f64) -> bool {
    r.coinflip(p)
}

/// Any 32-bit value: an interesting one, a small one, or random bits.
pub fn any_u32(r: &mut impl Rand) -> u32 {
    match pick(r, 4) {
        0 | 1 => INTERESTING[pick(r, INTERESTING.len())],
        2 => pick(r, 8) as u32,
        _ => r.next() as u32,
    }
}

/// Usually `usual`, else anything.
fn mostly(r: &mut impl Rand, usual: u32) -> u32 {
    if chance(r, 0.8) {
        usual
    } else {
        any_u32(r)
    }
}

/// Usually `base` plus something below `n`, else anything.
fn mostly_below(r: &mut impl Rand, base: u32, n: usize) -> u32 {
    let usual = base + pick(r, n) as u32;
    mostly(r, usual)
}

/// Usually zero (a reserved field or unused flags), else anything.
fn mostly_zero(r: &mut impl Rand) -> u32 {
    mostly(r, 0)
}

fn slot(r: &mut impl Rand) -> u8 {
    pick(r, 4) as u8
}

/// Something made earlier, usually.
pub fn any_id(r: &mut impl Rand) -> Id {
    if chance(r, 0.85) {
        Id::Made(pick(r, 8) as u8)
    } else {
        Id::Raw(any_u32(r))
    }
}

/// A pointer, usually good.
pub fn any_ptr(r: &mut impl Rand) -> Ptr {
    if chance(r, 0.8) {
        return Ptr::Good;
    }
    match pick(r, 6) {
        0 => Ptr::Null,
        1 => Ptr::Misaligned(1 + pick(r, 7) as u8),
        2 => Ptr::Unmapped,
        3 => Ptr::Kernel,
        4 => Ptr::ReadOnly,
        _ => Ptr::Short(pick(r, 200) as u16),
    }
}

fn any_entry(r: &mut impl Rand) -> Entry {
    Entry {
        handle: any_id(r),
        queue: any_id(r),
        gpu_id: if chance(r, 0.8) {
            Id::Made(0)
        } else {
            Id::Raw(any_u32(r))
        },
        status: if chance(r, 0.9) { 0 } else { r.next() as i32 },
    }
}

fn any_entries(r: &mut impl Rand) -> Vec<Entry> {
    let n = pick(r, MAX_ENTRIES + 1);
    (0..n).map(|_| any_entry(r)).collect()
}

fn any_target(r: &mut impl Rand) -> Target {
    match pick(r, 10) {
        0..=5 => Target::Tenant(slot(r)),
        6 => Target::OwnPid,
        7 => Target::ChildPid(slot(r)),
        8 => Target::OwnerFd(slot(r)),
        _ => match pick(r, 3) {
            0 => Target::EventFd(slot(r)),
            1 => Target::RawFd(any_u32(r) as i32),
            _ => Target::RawPid(any_u32(r) as i32),
        },
    }
}

fn any_eventfd(r: &mut impl Rand) -> Target {
    if chance(r, 0.85) {
        Target::EventFd(slot(r))
    } else {
        match pick(r, 3) {
            0 => Target::OwnerFd(slot(r)),
            1 => Target::Tenant(slot(r)),
            _ => Target::RawFd(any_u32(r) as i32),
        }
    }
}

/// Kinds of call, for [`call_of_kind`]; the weights favour the calls that
/// make state (tenants, queues, attachments) and the batches.
const KINDS: &[(u8, u32)] = &[
    (0, 4),   // OpenOwner
    (1, 1),   // CloseOwner
    (2, 4),   // OpenTenant
    (3, 1),   // CloseTenant
    (4, 6),   // CreateQueue
    (5, 4),   // CreateRing
    (6, 1),   // DestroyQueue
    (7, 4),   // Doorbell
    (8, 1),   // QueueStatus
    (9, 1),   // Info
    (10, 6),  // Attach
    (11, 2),  // Detach
    (12, 2),  // Query
    (13, 10), // Batch
    (14, 4),  // Freeze
    (15, 4),  // Watch
    (16, 2),  // Sample
    (17, 2),  // MakeEventFd
    (18, 3),  // Arm
    (19, 2),  // SetKnob
    (20, 2),  // Sleep
    (21, 1),  // HandOff
    (22, 1),  // Fork
    (23, 1),  // Thread
    (24, 1),  // KillChildren
];

/// The kind number of `c` (as in [`KINDS`]).
pub fn kind_of(c: &Call) -> u8 {
    match c {
        Call::OpenOwner => 0,
        Call::CloseOwner { .. } => 1,
        Call::OpenTenant => 2,
        Call::CloseTenant { .. } => 3,
        Call::CreateQueue { .. } => 4,
        Call::CreateRing { .. } => 5,
        Call::DestroyQueue { .. } => 6,
        Call::Doorbell { .. } => 7,
        Call::QueueStatus { .. } => 8,
        Call::Info { .. } => 9,
        Call::Attach { .. } => 10,
        Call::Detach { .. } => 11,
        Call::Query { .. } => 12,
        Call::Batch { .. } => 13,
        Call::Freeze { .. } => 14,
        Call::Watch { .. } => 15,
        Call::Sample { .. } => 16,
        Call::MakeEventFd => 17,
        Call::Arm { .. } => 18,
        Call::SetKnob { .. } => 19,
        Call::Sleep { .. } => 20,
        Call::HandOff { .. } => 21,
        Call::Fork { .. } => 22,
        Call::Thread { .. } => 23,
        Call::KillChildren => 24,
    }
}

/// A random call; `nested` forbids forks and threads (inside one).
pub fn any_call(r: &mut impl Rand, nested: bool) -> Call {
    loop {
        let total: u32 = KINDS.iter().map(|k| k.1).sum();
        let mut x = pick(r, total as usize) as u32;
        let mut kind = 0;
        for &(k, w) in KINDS {
            if x < w {
                kind = k;
                break;
            }
            x -= w;
        }
        if nested && matches!(kind, 21..=24) {
            continue;
        }
        return call_of_kind(r, kind);
    }
}

/// A random call of kind `kind`.
pub fn call_of_kind(r: &mut impl Rand, kind: u8) -> Call {
    match kind {
        0 => Call::OpenOwner,
        1 => Call::CloseOwner { owner: slot(r) },
        2 => Call::OpenTenant,
        3 => Call::CloseTenant { tenant: slot(r) },
        4 => Call::CreateQueue {
            tenant: slot(r),
            node: mostly_below(r, 0, 4),
            queue_type: mostly(r, 0),
            priority: mostly_below(r, 0, 16),
            reserved: mostly_zero(r),
        },
        5 => Call::CreateRing {
            tenant: slot(r),
            node: mostly_below(r, 0, 4),
            priority: mostly_below(r, 0, 16),
            packets: {
                let usual = 1 << (2 + pick(r, 5));
                mostly(r, usual)
            },
            ring: any_ptr(r),
            read_index: any_ptr(r),
            write_index: any_ptr(r),
        },
        6 => Call::DestroyQueue {
            tenant: slot(r),
            queue: any_id(r),
        },
        7 => Call::Doorbell {
            tenant: slot(r),
            queue: any_id(r),
            dispatches: pick(r, 4) as u8,
            work_us: pick(r, 3000) as u16,
        },
        8 => Call::QueueStatus {
            tenant: slot(r),
            queue: any_id(r),
        },
        9 => Call::Info {
            owner: slot(r),
            ptr: any_ptr(r),
        },
        10 => Call::Attach {
            owner: slot(r),
            target: any_target(r),
            kind: if chance(r, 0.9) {
                None
            } else {
                Some(any_u32(r))
            },
            flags: mostly_zero(r),
            reserved: u64::from(mostly_zero(r)),
        },
        11 => Call::Detach {
            owner: slot(r),
            handle: any_id(r),
            flags: mostly_zero(r),
        },
        12 => Call::Query {
            owner: slot(r),
            handle: any_id(r),
            gpu_id: if chance(r, 0.5) {
                Id::Raw(0)
            } else {
                any_id(r)
            },
            capacity: mostly(r, 16),
            entry_size: mostly(r, 96),
            ptr: any_ptr(r),
        },
        13 => Call::Batch {
            owner: slot(r),
            resume: chance(r, 0.4),
            entries: any_entries(r),
            extra_count: if chance(r, 0.9) { 0 } else { any_u32(r) },
            entry_size: mostly(r, 16),
            flags: if chance(r, 0.6) {
                0
            } else {
                mostly_below(r, 0, 4)
            },
            lease_ms: if chance(r, 0.5) {
                0
            } else {
                mostly_below(r, 0, 50)
            },
            ptr: any_ptr(r),
            reserved: u64::from(mostly_zero(r)),
        },
        14 => Call::Freeze {
            owner: slot(r),
            thaw: chance(r, 0.5),
            handle: any_id(r),
            gpu_id: if chance(r, 0.4) {
                Id::Raw(0)
            } else {
                any_id(r)
            },
            flags: mostly_zero(r),
        },
        15 => Call::Watch {
            owner: slot(r),
            unwatch: chance(r, 0.3),
            entries: any_entries(r),
            extra_count: if chance(r, 0.9) { 0 } else { any_u32(r) },
            entry_size: mostly(r, 16),
            flags: mostly_zero(r),
            ptr: any_ptr(r),
        },
        16 => Call::Sample {
            owner: slot(r),
            capacity: mostly(r, 16),
            entry_size: mostly(r, 40),
            ptr: any_ptr(r),
        },
        17 => Call::MakeEventFd,
        18 => Call::Arm {
            owner: slot(r),
            condition: mostly_below(r, 0, 3),
            eventfd: any_eventfd(r),
            period_us: mostly_below(r, 1000, 20_000),
            idle_us: if chance(r, 0.5) {
                0
            } else {
                mostly_below(r, 0, 50_000)
            },
            reserved: u64::from(mostly_zero(r)),
        },
        19 => Call::SetKnob {
            node: pick(r, 4) as u8,
            knob: match pick(r, 4) {
                0 => Knob::FailUnmaps,
                1 => Knob::FailMaps,
                2 => Knob::DelayNextUs,
                _ => Knob::FailNodeLists,
            },
            value: pick(r, 3) as u32,
        },
        20 => Call::Sleep {
            us: pick(r, 20_000) as u16,
        },
        21 => Call::HandOff { tenant: slot(r) },
        22 => Call::Fork {
            calls: nested_calls(r),
        },
        23 => Call::Thread {
            calls: nested_calls(r),
        },
        _ => Call::KillChildren,
    }
}

fn nested_calls(r: &mut impl Rand) -> Vec<Call> {
    let n = 1 + pick(r, MAX_NESTED_CALLS);
    (0..n).map(|_| any_call(r, true)).collect()
}

/// A program that starts like a real user of the uapi (an owner, a tenant
/// with queues, an attachment) and goes on at random.
pub fn any_program(r: &mut impl Rand) -> Program {
    let mut calls = vec![
        Call::OpenOwner,
        Call::OpenTenant,
        call_of_kind(r, 4),
        call_of_kind(r, 5),
        Call::Attach {
            owner: 0,
            target: Target::Tenant(0),
            kind: None,
            flags: 0,
            reserved: 0,
        },
    ];
    let n = 2 + pick(r, 14);
    for _ in 0..n {
        calls.push(any_call(r, false));
    }
    calls.truncate(MAX_CALLS);
    Program { calls }
}

/// Calls `f` on every 32-bit number of `c` (not those of nested calls).
pub fn for_each_u32(c: &mut Call, f: &mut dyn FnMut(&mut u32)) {
    let id = |i: &mut Id, f: &mut dyn FnMut(&mut u32)| {
        if let Id::Raw(v) = i {
            f(v)
        }
    };
    match c {
        Call::CreateQueue {
            node,
            queue_type,
            priority,
            reserved,
            ..
        } => {
            f(node);
            f(queue_type);
            f(priority);
            f(reserved);
        }
        Call::CreateRing {
            node,
            priority,
            packets,
            ..
        } => {
            f(node);
            f(priority);
            f(packets);
        }
        Call::DestroyQueue { queue, .. } | Call::QueueStatus { queue, .. } => id(queue, f),
        Call::Doorbell { queue, .. } => id(queue, f),
        Call::Attach { kind, flags, .. } => {
            if let Some(k) = kind {
                f(k);
            }
            f(flags);
        }
        Call::Detach { handle, flags, .. } => {
            id(handle, f);
            f(flags);
        }
        Call::Query {
            handle,
            gpu_id,
            capacity,
            entry_size,
            ..
        } => {
            id(handle, f);
            id(gpu_id, f);
            f(capacity);
            f(entry_size);
        }
        Call::Batch {
            entries,
            extra_count,
            entry_size,
            flags,
            lease_ms,
            ..
        } => {
            for e in entries.iter_mut() {
                id(&mut e.handle, f);
                id(&mut e.queue, f);
                id(&mut e.gpu_id, f);
            }
            f(extra_count);
            f(entry_size);
            f(flags);
            f(lease_ms);
        }
        Call::Freeze {
            handle,
            gpu_id,
            flags,
            ..
        } => {
            id(handle, f);
            id(gpu_id, f);
            f(flags);
        }
        Call::Watch {
            entries,
            extra_count,
            entry_size,
            flags,
            ..
        } => {
            for e in entries.iter_mut() {
                id(&mut e.handle, f);
                id(&mut e.queue, f);
                id(&mut e.gpu_id, f);
            }
            f(extra_count);
            f(entry_size);
            f(flags);
        }
        Call::Sample {
            capacity,
            entry_size,
            ..
        } => {
            f(capacity);
            f(entry_size);
        }
        Call::Arm {
            condition,
            period_us,
            idle_us,
            ..
        } => {
            f(condition);
            f(period_us);
            f(idle_us);
        }
        Call::SetKnob { value, .. } => f(value),
        _ => {}
    }
}

/// A new value for a 32-bit number: interesting, one off, a flipped bit,
/// or anything.
pub fn tweak_u32(r: &mut impl Rand, v: &mut u32) {
    *v = match pick(r, 5) {
        0 => v.wrapping_add(1),
        1 => v.wrapping_sub(1),
        2 => *v ^ (1 << pick(r, 32)),
        _ => any_u32(r),
    };
}

/// An entry naming the n-th queue made, through the n-th handle.
fn made(handle: u8, queue: u8) -> Entry {
    Entry {
        handle: Id::Made(handle),
        queue: Id::Made(queue),
        gpu_id: Id::Made(0),
        status: 0,
    }
}

fn batch(owner: u8, resume: bool, entries: Vec<Entry>, lease_ms: u32) -> Call {
    Call::Batch {
        owner,
        resume,
        entries,
        extra_count: 0,
        entry_size: 16,
        flags: 0,
        lease_ms,
        ptr: Ptr::Good,
        reserved: 0,
    }
}

fn watch(owner: u8, unwatch: bool, entries: Vec<Entry>) -> Call {
    Call::Watch {
        owner,
        unwatch,
        entries,
        extra_count: 0,
        entry_size: 16,
        flags: 0,
        ptr: Ptr::Good,
    }
}

fn ring(node: u32) -> Call {
    Call::CreateRing {
        tenant: 0,
        node,
        priority: 7,
        packets: 16,
        ring: Ptr::Good,
        read_index: Ptr::Good,
        write_index: Ptr::Good,
    }
}

fn attach(owner: u8) -> Call {
    Call::Attach {
        owner,
        target: Target::Tenant(0),
        kind: None,
        flags: 0,
        reserved: 0,
    }
}

/// The seed corpus: each flow of the uapi once, with valid arguments, as a
/// scheduler uses it (so that a defect on a main path is found at once and
/// mutation starts from programs that get past validation).
pub fn seeds() -> Vec<Program> {
    let start = |nodes: &[u32]| {
        let mut c = vec![Call::OpenOwner, Call::OpenTenant];
        c.extend(nodes.iter().map(|&n| ring(n)));
        c.push(attach(0));
        c
    };
    let both = || vec![made(0, 0), made(0, 1)];
    let mut out = Vec::new();
    // PREEMPT and RESUME across an HWS and a MES node, QUERY between.
    let mut c = start(&[0, 1]);
    c.push(batch(0, false, both(), 0));
    c.push(Call::Query {
        owner: 0,
        handle: Id::Made(0),
        gpu_id: Id::Raw(0),
        capacity: 16,
        entry_size: 96,
        ptr: Ptr::Good,
    });
    c.push(batch(0, true, both(), 0));
    out.push(c);
    // FREEZE and THAW of every node of the tenant.
    let mut c = start(&[0, 1]);
    for thaw in [false, true] {
        c.push(Call::Freeze {
            owner: 0,
            thaw,
            handle: Id::Made(0),
            gpu_id: Id::Raw(0),
            flags: 0,
        });
    }
    out.push(c);
    // WATCH, work, SAMPLE, ARM with an eventfd, UNWATCH.
    let mut c = start(&[0]);
    c.push(watch(0, false, vec![made(0, 0)]));
    c.push(Call::Doorbell {
        tenant: 0,
        queue: Id::Made(0),
        dispatches: 2,
        work_us: 500,
    });
    c.push(Call::Sample {
        owner: 0,
        capacity: 16,
        entry_size: 40,
        ptr: Ptr::Good,
    });
    c.push(Call::MakeEventFd);
    c.push(Call::Arm {
        owner: 0,
        condition: 1,
        eventfd: Target::EventFd(0),
        period_us: 1000,
        idle_us: 0,
        reserved: 0,
    });
    c.push(Call::Sleep { us: 3000 });
    c.push(watch(0, true, vec![made(0, 0)]));
    out.push(c);
    // A lease that expires, then DETACH.
    let mut c = start(&[1]);
    c.push(batch(0, false, vec![made(0, 0)], 5));
    c.push(Call::Sleep { us: 15_000 });
    c.push(Call::Detach {
        owner: 0,
        handle: Id::Made(0),
        flags: 0,
    });
    out.push(c);
    // Two owners on one tenant, the first closed while both hold it.
    let mut c = start(&[0]);
    c.insert(1, Call::OpenOwner);
    c.push(attach(1));
    c.push(batch(0, false, vec![made(0, 0)], 0));
    c.push(batch(1, false, vec![made(0, 0)], 0));
    c.push(Call::CloseOwner { owner: 0 });
    out.push(c);
    // A preempted tenant that dies in a child.
    let mut c = start(&[0]);
    c.push(batch(0, false, vec![made(0, 0)], 0));
    c.push(Call::HandOff { tenant: 0 });
    c.push(Call::KillChildren);
    c.push(batch(0, true, vec![made(0, 0)], 0));
    out.push(c);
    out.into_iter().map(|calls| Program { calls }).collect()
}
