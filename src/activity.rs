// SPDX-License-Identifier: GPL-2.0

//! Activity detection (ABI 1.2): KFDP_IOC_WATCH, UNWATCH, SAMPLE and ARM.
//!
//! A queue has work pending when its write index (published by the tenant's
//! runtime) is ahead of its read index (written back by the CP as packets
//! retire). Both live in the tenant's memory, so watching a queue pins the
//! pages that hold them and every later read is one load, with no call into
//! amdkfd and nothing the tenant can see. SAMPLE reads them on demand; ARM
//! starts a high-resolution timer that reads them every period and signals
//! an eventfd, once, when a condition holds, so that a daemon can sleep in
//! `poll(2)` and still react within a period (`Documentation/design.rst`,
//! "Activity detection", has the alternatives and their measured costs).

use kernel::{
    impl_has_hr_timer,
    prelude::*,
    sync::{
        atomic::{
            Atomic,
            Relaxed, //
        },
        Arc, ArcBorrow,
    },
    time::{
        hrtimer::{
            ArcHrTimerHandle,
            HrTimer,
            HrTimerCallback,
            HrTimerCallbackContext,
            HrTimerPointer,
            HrTimerRestart,
            RelativeMode, //
        },
        ClockSource,
        Delta,
        Monotonic, //
    },
    uaccess::{
        UserPtr,
        UserSlice, //
    },
};

use crate::{
    backend::Backend,
    engine::owner::{
        attachment,
        Owner,
        State, //
    },
    ioctl::batch::{
        element,
        read_refs,
        write_refs,
        REF_SIZE, //
    },
    uapi::{
        self,
        kfdp_activity,
        kfdp_arm,
        kfdp_queue_ref,
        kfdp_sample,
        kfdp_watch,
        KFDP_MAX_BATCH,
        KFDP_R_ALREADY, //
    },
    umem::{
        EventFd,
        UserWord, //
    },
};

/// Queues one owner may watch: each pins up to two pages.
pub(crate) const MAX_WATCHES: u32 = 256;
/// Shortest ARM period: below it the timer would cost more than it saves.
pub(crate) const MIN_PERIOD_US: u32 = 10;
const MAX_PERIOD_US: u32 = 1_000_000;
const MAX_IDLE_US: u32 = 10_000_000;

const ACT_SIZE: usize = size_of::<kfdp_activity>();

/// One watched queue: where its indices are, pinned.
pub(crate) struct Watch {
    pub(crate) handle: u32,
    pub(crate) gpu_id: u32,
    pub(crate) queue_id: u32,
    read: UserWord,
    write: UserWord,
}

impl Watch {
    /// (read index, write index), now.
    fn indices(&self) -> (u64, u64) {
        // The write index first: a packet retired between the two loads
        // then shows as pending, never the reverse.
        let w = self.write.read();
        (self.read.read(), w)
    }
}

/// What the watches of an owner, armed, wait for.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Condition {
    AnyBusy,
    AllIdle { idle_ns: i64 },
}

/// An armed sampler: a timer that reads a snapshot of the owner's watches
/// every period, lock free, and signals the eventfd once.
#[pin_data]
pub(crate) struct Armed {
    #[pin]
    timer: HrTimer<Armed>,
    watches: KVec<Arc<Watch>>,
    /// Each watch's write index at the previous sample (at ARM at first).
    last_write: KVec<Atomic<u64>>,
    condition: Condition,
    period: Delta,
    eventfd: Arc<EventFd>,
    /// Time of the last sample that saw work, in ns of CLOCK_MONOTONIC.
    busy_at: Atomic<i64>,
    fired: Atomic<bool>,
}

impl_has_hr_timer! {
    impl HasHrTimer<Self> for Armed {
        mode: RelativeMode<Monotonic>, field: self.timer
    }
}

/// CLOCK_MONOTONIC in nanoseconds, the clock user space reads too.
pub(crate) fn now_ns() -> i64 {
    <Monotonic as ClockSource>::ktime_get()
}

impl Armed {
    /// One sample: whether the condition holds now.
    fn holds(&self) -> bool {
        let mut busy = false;
        for (w, last) in self.watches.iter().zip(self.last_write.iter()) {
            let (r, wr) = w.indices();
            // A moved write index is demand even if it already retired: a
            // short burst can come and go within one period. Always
            // recorded, so that the next sample compares with this one.
            let moved = last.xchg(wr, Relaxed) != wr;
            busy |= wr != r || moved;
        }
        let now = now_ns();
        match self.condition {
            Condition::AnyBusy => busy,
            Condition::AllIdle { idle_ns } => {
                if busy {
                    self.busy_at.store(now, Relaxed);
                    false
                } else {
                    now - self.busy_at.load(Relaxed) >= idle_ns
                }
            }
        }
    }
}

impl HrTimerCallback for Armed {
    type Pointer<'a> = Arc<Self>;

    fn run(this: ArcBorrow<'_, Self>, mut ctx: HrTimerCallbackContext<'_, Self>) -> HrTimerRestart {
        if this.fired.load(Relaxed) {
            return HrTimerRestart::NoRestart;
        }
        if this.holds() {
            this.fired.store(true, Relaxed);
            this.eventfd.signal();
            return HrTimerRestart::NoRestart;
        }
        ctx.forward_now(this.period);
        HrTimerRestart::Restart
    }
}

/// An owner's armed sampler: what it samples, and its timer. Dropping it
/// stops the timer (waiting for a running callback) before the watches it
/// holds can be unpinned.
pub(crate) struct Sampler {
    /// Kept for its drop, which cancels the timer; declared first, so that
    /// it is dropped before `armed` and the watches `armed` holds.
    _timer: ArcHrTimerHandle<Armed>,
    armed: Arc<Armed>,
}

impl Sampler {
    /// Creates and starts a sampler; the first sample is taken at once.
    fn start(
        watches: &[Arc<Watch>],
        condition: Condition,
        period: Delta,
        eventfd: Arc<EventFd>,
        busy_at: i64,
    ) -> Result<Self> {
        let mut held = KVec::with_capacity(watches.len(), GFP_KERNEL)?;
        let mut last_write = KVec::with_capacity(watches.len(), GFP_KERNEL)?;
        for w in watches {
            last_write.push(Atomic::new(w.indices().1), GFP_KERNEL)?;
            held.push(w.clone(), GFP_KERNEL)?;
        }
        let armed = Arc::pin_init(
            pin_init!(Armed {
                timer <- HrTimer::new(),
                watches: held,
                last_write,
                condition,
                period,
                eventfd,
                busy_at: Atomic::new(busy_at),
                fired: Atomic::new(false),
            }),
            GFP_KERNEL,
        )?;
        Ok(Self {
            _timer: armed.clone().start(Delta::from_nanos(0)),
            armed,
        })
    }
}

/// After watches were removed (UNWATCH, DETACH), an armed sampler must not
/// keep sampling them, nor keep them pinned: it is replaced by one over
/// the owner's remaining watches, with the same condition and eventfd and
/// the idle time it had counted. Returns the old sampler, for the caller
/// to drop once it has unlocked. A sampler that already fired is simply
/// ended, as is one that cannot be replaced for want of memory (the
/// caller's eventfd then never fires: the daemon's next ARM restores it).
pub(crate) fn resample<T>(state: &mut State<T>) -> Option<Sampler> {
    let old = state.armed.take()?;
    let a = &old.armed;
    if !a.fired.load(Relaxed) {
        state.armed = Sampler::start(
            &state.watches,
            a.condition,
            a.period,
            a.eventfd.clone(),
            a.busy_at.load(Relaxed),
        )
        .ok();
    }
    Some(old)
}

/// Watches one queue: finds its indices through QUERY's description and
/// pins them in the target's address space.
fn watch_one<B: Backend>(
    owner: &Owner<B>,
    state: &State<B::Target>,
    e: &kfdp_queue_ref,
) -> Result<Watch> {
    let att = attachment(&state.attachments, e.handle).ok_or(EINVAL)?;
    let target = att.target.as_ref().ok_or(ESRCH)?;
    if !owner.backend.gpu_ids(target)?.contains(&e.gpu_id) {
        return Err(EINVAL);
    }
    let total = owner.backend.query(target, e.gpu_id, &mut [])? as usize;
    let mut infos = KVVec::with_capacity(total, GFP_KERNEL)?;
    infos.resize(total, uapi::kfdp_queue_info::default(), GFP_KERNEL)?;
    let n = owner.backend.query(target, e.gpu_id, &mut infos)? as usize;
    let qi = infos[..n.min(total)]
        .iter()
        .find(|q| q.queue_id == e.queue_id)
        .ok_or(ENOENT)?;
    // Only AQL queues have the read/write dispatch ids this reads; PM4 and
    // SDMA queues count other units.
    if qi.queue_type != uapi::KFD_IOC_QUEUE_TYPE_COMPUTE_AQL
        || qi.read_pointer_address == 0
        || qi.write_pointer_address == 0
    {
        return Err(crate::compat::eopnotsupp());
    }
    let read = owner
        .backend
        .pin_user(target, qi.read_pointer_address, false)?;
    let write = owner
        .backend
        .pin_user(target, qi.write_pointer_address, false)?;
    Ok(Watch {
        handle: e.handle,
        gpu_id: e.gpu_id,
        queue_id: e.queue_id,
        read,
        write,
    })
}

fn same_queue(w: &Watch, e: &kfdp_queue_ref) -> bool {
    w.handle == e.handle && w.gpu_id == e.gpu_id && w.queue_id == e.queue_id
}

fn is_watched(watches: &[Arc<Watch>], e: &kfdp_queue_ref) -> bool {
    watches.iter().any(|w| same_queue(w, e))
}

/// Moves the watches `pick` selects out of `state` into `into`, for the
/// caller to drop once it has unlocked (unpinning is not done under the
/// owner's lock; without memory to defer one, it is dropped here, which is
/// correct, only slower). Returns how many it took; the caller then
/// [`resample`]s if any were.
pub(crate) fn take_watches<T>(
    state: &mut State<T>,
    pick: impl Fn(&Watch) -> bool,
    into: &mut KVec<Arc<Watch>>,
) -> usize {
    let mut taken = 0;
    let mut i = 0;
    while i < state.watches.len() {
        if !pick(&state.watches[i]) {
            i += 1;
            continue;
        }
        match state.watches.remove(i) {
            Ok(w) => {
                taken += 1;
                let _ = into.push(w, GFP_KERNEL);
            }
            Err(_) => break,
        }
    }
    taken
}

/// KFDP_IOC_WATCH (`add`) or KFDP_IOC_UNWATCH.
pub(crate) fn watch<B: Backend>(
    owner: &Arc<Owner<B>>,
    add: bool,
    arg: usize,
    size: usize,
) -> Result {
    let header = || UserSlice::new(UserPtr::from_addr(arg), size);
    let mut w: kfdp_watch = header().reader().read()?;
    if w.flags != 0 || w.reserved != 0 {
        return Err(EINVAL);
    }
    if w.num_entries > KFDP_MAX_BATCH {
        return Err(E2BIG);
    }
    if (w.entry_size as usize) < REF_SIZE {
        return Err(EINVAL);
    }
    let mut refs = read_refs(w.entries_ptr, w.num_entries, w.entry_size)?;
    header().writer().write(&w)?;
    write_refs(w.entries_ptr, w.entry_size, &refs)?;

    // Unpinning (and stopping a sampler) is done after unlocking.
    let mut dropped = KVec::new();
    let mut old_sampler = None;
    owner.sweep();
    {
        let mut guard = owner.state.lock();
        let state = &mut *guard;
        let mut removed = 0;
        for e in refs.iter_mut() {
            e.status = if add {
                watch_entry(owner, state, e)
            } else if take_watches(state, |w| same_queue(w, e), &mut dropped) > 0 {
                removed += 1;
                0
            } else {
                KFDP_R_ALREADY as i32
            };
        }
        if removed > 0 {
            old_sampler = resample(state);
        }
    }
    drop(old_sampler);
    drop(dropped);
    w.num_ok = refs.iter().filter(|e| e.status == 0).count() as u32;
    write_refs(w.entries_ptr, w.entry_size, &refs).and_then(|()| header().writer().write(&w))
}

fn watch_entry<B: Backend>(
    owner: &Owner<B>,
    state: &mut State<B::Target>,
    e: &kfdp_queue_ref,
) -> i32 {
    if is_watched(&state.watches, e) {
        return KFDP_R_ALREADY as i32;
    }
    if state.watches.len() >= MAX_WATCHES as usize {
        return ENOSPC.to_errno();
    }
    let watch = match watch_one(owner, state, e).and_then(|w| Ok(Arc::new(w, GFP_KERNEL)?)) {
        Ok(w) => w,
        Err(err) => return err.to_errno(),
    };
    match state.watches.push(watch, GFP_KERNEL) {
        Ok(()) => 0,
        Err(_) => ENOMEM.to_errno(),
    }
}

/// KFDP_IOC_SAMPLE.
pub(crate) fn sample<B: Backend>(owner: &Arc<Owner<B>>, arg: usize, size: usize) -> Result {
    let header = || UserSlice::new(UserPtr::from_addr(arg), size);
    let mut s: kfdp_sample = header().reader().read()?;
    if s.reserved != 0 {
        return Err(EINVAL);
    }
    if s.capacity > 0 && (s.entry_size as usize) < ACT_SIZE {
        return Err(EINVAL);
    }
    header().writer().write(&s)?;

    let cap = s.capacity.min(MAX_WATCHES) as usize;
    let mut out = KVVec::with_capacity(cap, GFP_KERNEL)?;
    let (total, pending) = {
        // No sweep: SAMPLE is the daemon's hot path, and housekeeping notices
        // an exited target within SWEEP_MS anyway (KFDP_ACT_GONE from then).
        let guard = owner.state.lock();
        let state = &*guard;
        s.timestamp_ns = now_ns() as u64;
        let mut pending = 0u32;
        for w in state.watches.iter() {
            let (r, wr) = w.indices();
            let mut flags = 0;
            if r != wr {
                flags |= uapi::KFDP_ACT_PENDING;
                pending += 1;
            }
            let gone = attachment(&state.attachments, w.handle).is_none_or(|a| a.target.is_none());
            if gone {
                flags |= uapi::KFDP_ACT_GONE;
            }
            if out.len() < cap {
                out.push(
                    kfdp_activity {
                        handle: w.handle,
                        gpu_id: w.gpu_id,
                        queue_id: w.queue_id,
                        flags,
                        read_index: r,
                        write_index: wr,
                        reserved: 0,
                    },
                    GFP_KERNEL,
                )?;
            }
        }
        (state.watches.len() as u32, pending)
    };
    for (i, a) in out.iter().enumerate() {
        let ptr = element(s.entries_ptr, i, s.entry_size as usize)?;
        UserSlice::new(ptr, ACT_SIZE).writer().write(a)?;
    }
    s.num_watches = total;
    s.num_pending = pending;
    header().writer().write(&s)
}

/// KFDP_IOC_ARM.
pub(crate) fn arm<B: Backend>(owner: &Arc<Owner<B>>, arg: usize, size: usize) -> Result {
    let a: kfdp_arm = UserSlice::new(UserPtr::from_addr(arg), size)
        .reader()
        .read()?;
    if a.reserved != [0; 2] {
        return Err(EINVAL);
    }
    let condition = match a.condition {
        uapi::KFDP_ARM_OFF => {
            if a.eventfd != -1 || a.period_us != 0 || a.idle_us != 0 {
                return Err(EINVAL);
            }
            let old = owner.state.lock().armed.take();
            // Stops the timer (waiting for a running callback) unlocked.
            drop(old);
            return Ok(());
        }
        uapi::KFDP_ARM_ANY_BUSY if a.idle_us == 0 => Condition::AnyBusy,
        uapi::KFDP_ARM_ALL_IDLE if a.idle_us <= MAX_IDLE_US => Condition::AllIdle {
            idle_ns: i64::from(a.idle_us) * 1000,
        },
        _ => return Err(EINVAL),
    };
    if !(MIN_PERIOD_US..=MAX_PERIOD_US).contains(&a.period_us) {
        return Err(EINVAL);
    }
    let eventfd = Arc::new(EventFd::get(a.eventfd)?, GFP_KERNEL)?;
    let period = Delta::from_micros(i64::from(a.period_us));

    let mut guard = owner.state.lock();
    let state = &mut *guard;
    if state.closed {
        return Err(EBADF);
    }
    // Built before the old one goes: a failure leaves the old one armed.
    let sampler = Sampler::start(&state.watches, condition, period, eventfd, now_ns())?;
    let old = state.armed.replace(sampler);
    drop(guard);
    drop(old);
    Ok(())
}
