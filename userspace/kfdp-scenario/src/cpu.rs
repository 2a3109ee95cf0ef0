//! CPU accounting for `detect`: this process's own CPU time
//! (`getrusage(RUSAGE_SELF)`), and the whole system's busy time from
//! `/proc/stat`, which is where work done in interrupt context (the
//! module's sampling hrtimer) shows up.

use std::{fs, io, time::Duration};

use crate::Result;

/// CPU time this process used so far, user + system, every thread.
pub fn self_cpu() -> Result<Duration> {
    // SAFETY: `rusage` is a struct of integers (and timevals of integers),
    // for which all zeroes is a valid value.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage writes one `rusage` to the pointer, which points to
    // `ru`, live and exclusively borrowed for the call.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) } != 0 {
        return Err(format!("getrusage: {}", io::Error::last_os_error()).into());
    }
    Ok(timeval(ru.ru_utime) + timeval(ru.ru_stime))
}

fn timeval(tv: libc::timeval) -> Duration {
    // Never negative for getrusage; clamped rather than trusted.
    Duration::from_secs(u64::try_from(tv.tv_sec).unwrap_or(0))
        + Duration::from_micros(u64::try_from(tv.tv_usec).unwrap_or(0))
}

/// The aggregate `cpu` line of `/proc/stat`, in clock ticks
/// (`sysconf(_SC_CLK_TCK)`), summed over every CPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CpuTicks {
    /// Time in user mode (guest time included, as the kernel counts it).
    pub user: u64,
    /// Time in user mode at low priority (guest_nice included).
    pub nice: u64,
    /// Time in system mode.
    pub system: u64,
    /// Idle.
    pub idle: u64,
    /// Idle with I/O outstanding.
    pub iowait: u64,
    /// Servicing hard interrupts.
    pub irq: u64,
    /// Servicing softirqs.
    pub softirq: u64,
    /// Stolen by the hypervisor.
    pub steal: u64,
}

impl CpuTicks {
    /// Reads `/proc/stat`.
    pub fn read() -> Result<Self> {
        let text =
            fs::read_to_string("/proc/stat").map_err(|e| format!("reading /proc/stat: {e}"))?;
        Self::parse(&text).ok_or_else(|| "/proc/stat has no readable \"cpu\" line".into())
    }

    /// The `cpu` line of a `/proc/stat` text. Fields a very old kernel does
    /// not have count as 0.
    pub fn parse(text: &str) -> Option<Self> {
        let line = text.lines().find(|l| l.starts_with("cpu "))?;
        let fields: Vec<u64> = line
            .split_whitespace()
            .skip(1)
            .map(|f| f.parse().ok())
            .collect::<Option<_>>()?;
        let at = |i: usize| fields.get(i).copied().unwrap_or(0);
        // At least user, nice, system and idle, or it is not /proc/stat.
        if fields.len() < 4 {
            return None;
        }
        Some(CpuTicks {
            user: at(0),
            nice: at(1),
            system: at(2),
            idle: at(3),
            iowait: at(4),
            irq: at(5),
            softirq: at(6),
            steal: at(7),
        })
    }

    /// Every tick that is neither idle nor iowait. guest and guest_nice
    /// are left out because the kernel already counts them in user and
    /// nice.
    pub fn busy(&self) -> u64 {
        self.user + self.nice + self.system + self.irq + self.softirq + self.steal
    }

    /// Ticks spent in interrupt context (hard and soft).
    pub fn interrupt(&self) -> u64 {
        self.irq + self.softirq
    }
}

/// Clock ticks as milliseconds, at `clk_tck` ticks per second.
pub fn ticks_ms(ticks: u64, clk_tck: u64) -> f64 {
    if clk_tck == 0 {
        return 0.0;
    }
    ticks as f64 * 1000.0 / clk_tck as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_stat_busy_leaves_out_idle_iowait_and_guest() {
        let text = "cpu  100 5 50 1000 7 3 4 2 9 1\ncpu0 50 0 25 500 3 1 2 1 0 0\nintr 1 2 3\n";
        let t = CpuTicks::parse(text).unwrap();
        assert_eq!(
            t,
            CpuTicks {
                user: 100,
                nice: 5,
                system: 50,
                idle: 1000,
                iowait: 7,
                irq: 3,
                softirq: 4,
                steal: 2,
            }
        );
        assert_eq!(t.busy(), 100 + 5 + 50 + 3 + 4 + 2);
        assert_eq!(t.interrupt(), 7);
        // A kernel with only the first four fields.
        let old = CpuTicks::parse("cpu 1 2 3 4\n").unwrap();
        assert_eq!((old.busy(), old.irq), (6, 0));
        assert_eq!(CpuTicks::parse("cpu0 1 2 3 4\n"), None);
        assert_eq!(CpuTicks::parse("cpu 1 2\n"), None);
        assert_eq!(CpuTicks::parse("cpu 1 x 3 4\n"), None);
        assert_eq!(ticks_ms(25, 100), 250.0);
        assert_eq!(ticks_ms(25, 0), 0.0);
    }

    #[test]
    fn this_machine_answers() {
        let before = self_cpu().unwrap();
        // Burn a little CPU so that the clock moves.
        let mut x = 0u64;
        for i in 0..2_000_000u64 {
            x = x.wrapping_add(i * i);
        }
        assert!(x > 0);
        assert!(self_cpu().unwrap() >= before);
        assert!(CpuTicks::read().unwrap().busy() > 0);
    }
}
