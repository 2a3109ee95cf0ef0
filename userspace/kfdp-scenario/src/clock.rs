//! CLOCK_MONOTONIC in nanoseconds: the clock the simulated node stamps
//! packets with (the kernel's ktime).

use std::time::Duration;

use rustix::time::{clock_gettime, ClockId};

/// Now, CLOCK_MONOTONIC, ns.
pub fn now_ns() -> u64 {
    let t = clock_gettime(ClockId::Monotonic);
    // CLOCK_MONOTONIC is never negative.
    (t.tv_sec as u64) * 1_000_000_000 + t.tv_nsec as u64
}

/// `d` in ns, saturating.
pub fn ns(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// Milliseconds (possibly fractional) as a Duration, refusing what is not
/// a finite, non-negative number.
pub fn from_ms(what: &str, ms: f64) -> crate::Result<Duration> {
    Duration::try_from_secs_f64(ms / 1000.0)
        .map_err(|_| format!("{what} must be a finite, non-negative number of ms, not {ms}").into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_clock_moves_forward_in_ns() {
        let a = now_ns();
        std::thread::sleep(Duration::from_millis(2));
        let b = now_ns();
        assert!(b - a >= 2_000_000, "{a} {b}");
        assert_eq!(from_ms("x", 2.5).unwrap(), Duration::from_micros(2500));
        assert!(from_ms("x", -1.0).is_err());
        assert!(from_ms("x", f64::NAN).is_err());
        assert_eq!(ns(Duration::MAX), u64::MAX);
    }
}
