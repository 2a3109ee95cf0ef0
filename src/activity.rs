// SPDX-License-Identifier: GPL-2.0

//! Activity detection (ABI 1.2): what an owner's watches and its armed
//! sampler are. The ioctls that make them, KFDP_IOC_WATCH, UNWATCH,
//! SAMPLE and ARM, are [`crate::ioctl::activity`].
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
            AbsoluteMode,
            ArcHrTimerHandle,
            HrTimer,
            HrTimerCallback,
            HrTimerCallbackContext,
            HrTimerPointer,
            HrTimerRestart, //
        },
        Delta,
        Instant,
        Monotonic, //
    },
};

use crate::{
    clock::now_ns,
    umem::{
        EventFd,
        UserWord, //
    },
};

/// Queues one owner may watch: each pins up to two pages.
pub(crate) const MAX_WATCHES: u32 = 256;
/// Shortest ARM period: below it the timer would cost more than it saves.
pub(crate) const MIN_PERIOD_US: u32 = 10;
/// Longest ARM period.
pub(crate) const MAX_PERIOD_US: u32 = 1_000_000;
/// Longest idle time an ALL_IDLE ARM waits for.
pub(crate) const MAX_IDLE_US: u32 = 10_000_000;

/// Which instance of a queue id a watch reads: amdkfd gives a new queue
/// the lowest free id, so a destroyed queue's id comes back, with its
/// ring and indices in a new allocation (`Documentation/design.rst`,
/// "Activity detection").
#[derive(Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct QueueInstance {
    pub(crate) ring: u64,
    pub(crate) read_address: u64,
    pub(crate) write_address: u64,
}

/// First wait before a moved watch ([`Watch::moved`]) is tried again after
/// a failed re-pin: housekeeping's own period (`SWEEP_MS`); each further
/// failure doubles it, up to [`REMAKE_BACKOFF_MAX_NS`].
const REMAKE_BACKOFF_MIN_NS: i64 = 100_000_000;
/// Longest wait between two re-pins of a moved watch: what a tenant that
/// unmaps a watched ring and keeps its queue costs its owner (a QUERY and
/// a failed pin a second in housekeeping).
const REMAKE_BACKOFF_MAX_NS: i64 = 1_000_000_000;

/// How long a moved watch waits after its `failures`-th failed re-pin
/// (1 or more): [`REMAKE_BACKOFF_MIN_NS`], doubled with each further
/// failure, at most [`REMAKE_BACKOFF_MAX_NS`].
pub(crate) fn remake_wait_ns(failures: u32) -> i64 {
    // 100 ms << 4 is past the longest wait already.
    (REMAKE_BACKOFF_MIN_NS << failures.saturating_sub(1).min(4)).min(REMAKE_BACKOFF_MAX_NS)
}

/// One watched queue: where its indices are, pinned.
pub(crate) struct Watch {
    pub(crate) handle: u32,
    pub(crate) gpu_id: u32,
    pub(crate) queue_id: u32,
    /// The instance of `queue_id` whose indices `read` and `write` are.
    pub(crate) instance: QueueInstance,
    read: UserWord,
    write: UserWord,
    /// Failed re-pins since the watch moved.
    remake_failures: Atomic<u32>,
    /// When a moved watch is due to be re-pinned (ns of CLOCK_MONOTONIC).
    remake_at: Atomic<i64>,
}

impl Watch {
    /// A watch of the queue (`handle`, `gpu_id`, `queue_id`) of `instance`,
    /// whose read and write indices are the pinned words `read` and `write`.
    pub(crate) fn new(
        handle: u32,
        gpu_id: u32,
        queue_id: u32,
        instance: QueueInstance,
        read: UserWord,
        write: UserWord,
    ) -> Self {
        Self {
            handle,
            gpu_id,
            queue_id,
            instance,
            read,
            write,
            remake_failures: Atomic::new(0),
            remake_at: Atomic::new(0),
        }
    }

    /// Whether the indices' addresses may now map other memory than the
    /// pinned pages: the tenant unmapped them (its queue destroyed, or made
    /// again in memory an allocator handed back at the same addresses).
    /// Its indices then say nothing, and it reads as idle until
    /// housekeeping or a WATCH pins it again
    /// ([`crate::engine::watches::remake_moved`]).
    pub(crate) fn moved(&self) -> bool {
        self.read.unmapped() || self.write.unmapped()
    }

    /// Whether the watch moved and is due to be pinned again at `now`.
    pub(crate) fn remake_due(&self, now: i64) -> bool {
        self.moved() && now >= self.remake_at.load(Relaxed)
    }

    /// Records a failed re-pin at `now`: the next is due after a wait that
    /// doubles with each failure.
    pub(crate) fn remake_failed(&self, now: i64) {
        let failures = self.remake_failures.load(Relaxed).saturating_add(1);
        self.remake_failures.store(failures, Relaxed);
        self.remake_at
            .store(now.saturating_add(remake_wait_ns(failures)), Relaxed);
    }

    /// (read index, write index), now.
    pub(crate) fn indices(&self) -> (u64, u64) {
        // The write index first: a packet retired between the two loads
        // then shows as pending, never the reverse.
        let w = self.write.read();
        (self.read.read(), w)
    }
}

/// What the watches of an owner, armed, wait for.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Condition {
    AnyBusy,
    AllIdle { idle_ns: i64 },
}

/// The first instant after `now` (ns of CLOCK_MONOTONIC) that is a whole
/// number of `period` ns. Every sampler of one period ticks on these
/// instants, whenever it was armed, so that one timer interrupt of a CPU
/// serves all of that CPU's samplers at once: a daemon arms one sampler
/// per decision (a node and a level, up to hundreds on an MI300X host in
/// CPX mode), and with phases of their own each would cost an interrupt
/// of its own every period (`Documentation/design.rst`, "Activity
/// detection").
pub(crate) fn next_tick(now: i64, period: i64) -> i64 {
    let period = period.max(1);
    now.div_euclid(period)
        .saturating_add(1)
        .saturating_mul(period)
}

/// Most time between the two clock reads of [`clock_now`] that it accepts
/// at once.
const CLOCK_READ_GAP_NS: i64 = 10_000;

/// CLOCK_MONOTONIC now, as the timer's instant and in nanoseconds: two
/// reads, retried (twice at most) while the caller was held up between
/// them, which would put a sampler off the shared ticks for its whole life
/// (the kernel crate gives an `Instant`'s nanoseconds to itself only).
fn clock_now() -> (Instant<Monotonic>, i64) {
    let mut at = Instant::<Monotonic>::now();
    for _ in 0..2 {
        let now = now_ns();
        let after = Instant::<Monotonic>::now();
        if (after - at).as_nanos() <= CLOCK_READ_GAP_NS {
            return (at, now);
        }
        at = after;
    }
    (at, now_ns())
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
        mode: AbsoluteMode<Monotonic>, field: self.timer
    }
}

impl Armed {
    /// One sample; if the condition holds, signals the eventfd and
    /// returns true (the sampler is done).
    fn sample(&self) -> bool {
        if !self.holds() {
            return false;
        }
        self.fired.store(true, Relaxed);
        self.eventfd.signal();
        true
    }

    /// Whether the condition holds now.
    fn holds(&self) -> bool {
        let mut busy = false;
        for (w, last) in self.watches.iter().zip(self.last_write.iter()) {
            // A moved watch's pages are no longer the queue's: idle until
            // housekeeping pins it again and replaces this sampler.
            if w.moved() {
                continue;
            }
            let (r, wr) = w.indices();
            // A moved write index is demand even if it already retired: a
            // short burst can come and go within one period. Always
            // recorded, so that the next sample compares with this one.
            let write_moved = last.xchg(wr, Relaxed) != wr;
            busy |= wr != r || write_moved;
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
        if this.fired.load(Relaxed) || this.sample() {
            return HrTimerRestart::NoRestart;
        }
        // Whole periods on from the last expiry: the sampler stays on the
        // shared ticks it started on.
        ctx.forward_now(this.period);
        HrTimerRestart::Restart
    }
}

/// An owner's armed sampler: what it samples, and its timer. Dropping it
/// stops the timer (waiting for a running callback) before the watches it
/// holds can be unpinned.
pub(crate) struct Sampler {
    /// Kept for its drop, which cancels the timer; declared first, so that
    /// it is dropped before `armed` and the watches `armed` holds. `None`:
    /// the condition held at once, and no timer was started.
    _timer: Option<ArcHrTimerHandle<Armed>>,
    armed: Arc<Armed>,
}

impl Sampler {
    /// Creates and starts a sampler; the first sample is taken at once, the
    /// next ones at the [`next_tick`]s of its period.
    pub(crate) fn start(
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
        // The first sample now, in the caller's context: it costs no timer
        // interrupt, and the next one comes at the shared tick.
        let timer = if armed.sample() {
            None
        } else {
            let (at, now) = clock_now();
            let first = at + Delta::from_nanos(next_tick(now, period.as_nanos()) - now);
            Some(armed.clone().start(first))
        };
        Ok(Self {
            _timer: timer,
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
pub(crate) fn resample(watches: &[Arc<Watch>], armed: &mut Option<Sampler>) -> Option<Sampler> {
    let old = armed.take()?;
    let a = &old.armed;
    if !a.fired.load(Relaxed) {
        *armed = Sampler::start(
            watches,
            a.condition,
            a.period,
            a.eventfd.clone(),
            a.busy_at.load(Relaxed),
        )
        .ok();
    }
    Some(old)
}

/// Moves the watches `pick` selects out of `watches` into `into`, for the
/// caller to drop once it has unlocked (unpinning is not done under the
/// owner's lock; without memory to defer one, it is dropped here, which is
/// correct, only slower). Returns how many it took; the caller then
/// [`resample`]s if any were.
pub(crate) fn take_watches(
    watches: &mut KVec<Arc<Watch>>,
    pick: impl Fn(&Watch) -> bool,
    into: &mut KVec<Arc<Watch>>,
) -> usize {
    let mut taken = 0;
    let mut i = 0;
    while i < watches.len() {
        if !pick(&watches[i]) {
            i += 1;
            continue;
        }
        match watches.remove(i) {
            Ok(w) => {
                taken += 1;
                let _ = into.push(w, GFP_KERNEL);
            }
            Err(_) => break,
        }
    }
    taken
}

#[cfg(kfdp_kunit)]
#[kunit_tests(kfdp_activity)]
mod tests {
    use super::*;

    const P: i64 = 200_000;

    #[test]
    fn a_failed_repin_waits_100_ms_doubling_to_1_s() {
        assert_eq!(remake_wait_ns(1), 100_000_000);
        assert_eq!(remake_wait_ns(2), 200_000_000);
        assert_eq!(remake_wait_ns(4), 800_000_000);
        assert_eq!(remake_wait_ns(5), 1_000_000_000);
        assert_eq!(remake_wait_ns(u32::MAX), 1_000_000_000);
        // Called with 0 only by mistake: the shortest wait, not a panic.
        assert_eq!(remake_wait_ns(0), 100_000_000);
    }

    #[test]
    fn a_tick_is_the_next_whole_period_strictly_after_now() {
        assert_eq!(next_tick(0, P), P);
        assert_eq!(next_tick(1, P), P);
        assert_eq!(next_tick(P - 1, P), P);
        // On a tick: the next one, never now (the sample now was taken).
        assert_eq!(next_tick(P, P), 2 * P);
        assert_eq!(next_tick(7 * P + 3, P), 8 * P);
    }

    #[test]
    fn samplers_armed_apart_share_their_ticks() {
        // Armed 1 µs and 199 µs into one period, and from a period of
        // their own, two samplers fire on the same instants from then on.
        let first = next_tick(1_000_000 + 1_000, P);
        let second = next_tick(1_000_000 + 199_000, P);
        assert_eq!(first, second);
        assert_eq!(next_tick(first, P), first + P);
        assert_eq!(first % P, 0);
    }

    #[test]
    fn a_tick_stays_within_one_period_of_now_at_any_scale() {
        for &(now, period) in &[
            (0i64, 10_000i64),
            (123_456_789, 10_000),
            (i64::MAX / 4, 1_000_000_000),
            (999_999_999_999, 999_983),
        ] {
            let t = next_tick(now, period);
            assert!(t > now && t - now <= period && t % period == 0);
        }
        // A zero period (never armed so: ARM refuses it) cannot divide by
        // zero.
        assert_eq!(next_tick(5, 0), 6);
    }
}
