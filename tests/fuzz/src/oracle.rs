// SPDX-License-Identifier: GPL-2.0

//! What must hold after every program, once all it opened is closed: the
//! oracles beyond a crash.
//!
//! * the simulated node: no process, no queue, nothing suspended or
//!   misplaced, no new conservation error (its own audit of the runlists
//!   against the queues);
//! * the module: no owner left, no page pinned and no eventfd held
//!   (debugfs `stats` and `attachments`);
//! * the kernel log: no WARN, BUG, KASAN, UBSAN, lockdep or hung-task line.

use std::{
    collections::HashMap,
    fs,
    io::Read,
    os::unix::fs::OpenOptionsExt,
    time::{Duration, Instant},
};

use crate::exec::SIM_DEBUGFS;

const STATS: &str = "/sys/kernel/debug/kfd_preempt/stats";
const ATTACHMENTS: &str = "/sys/kernel/debug/kfd_preempt/attachments";

/// Kernel log markers of a defect (the kernel's own checkers).
const BAD_LOG: &[&str] = &[
    "WARNING:",
    "BUG:",
    "KASAN",
    "UBSAN",
    "kernel BUG at",
    "Oops",
    "general protection fault",
    "possible circular locking",
    "possible recursive locking",
    "inconsistent lock state",
    "suspicious RCU usage",
    "lock held when returning to user space",
    "refcount_t:",
    "list_add corruption",
    "list_del corruption",
    "INFO: task",
    "rcu_preempt detected stall",
    "soft lockup",
    "panicked at",
];

/// `key value` lines (the first two words of each line).
fn key_values(text: &str) -> HashMap<String, String> {
    text.lines()
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            Some((w.next()?.to_string(), w.next()?.to_string()))
        })
        .collect()
}

fn number(m: &HashMap<String, String>, key: &str) -> Option<u64> {
    m.get(key)?.parse().ok()
}

/// Counters that must be back where they were after a program (each is zero on a
/// module nobody uses; a defect found once raises the baseline, so that
/// later programs are judged on their own).
const COUNTERS: &[&str] = &[
    "processes",
    "queues",
    "suspended",
    "misplaced",
    "conservation_errors",
    "pinned_pages",
    "eventfds_held",
    "owners_alive",
    "owners",
    "vm_pin_kb",
];

/// The counters that must be back at their baseline as soon as every owner
/// file is closed, while the tenants still run: nothing stays suspended or
/// misplaced that no open owner holds.
const AFTER_OWNERS: &[&str] = &[
    "suspended",
    "misplaced",
    "eventfds_held",
    "owners_alive",
    "owners",
];

/// The fuzzer's own `VmPin` (kB, /proc/self/status): the pages pinned and
/// charged to its address space, as the module charges a tenant's pins.
fn vm_pin_kb() -> Option<u64> {
    fs::read_to_string("/proc/self/status")
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix("VmPin:"))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// The counters now.
fn counters() -> HashMap<&'static str, u64> {
    let sim = key_values(&fs::read_to_string(format!("{SIM_DEBUGFS}/status")).unwrap_or_default());
    let stats = key_values(&fs::read_to_string(STATS).unwrap_or_default());
    let owners = fs::read_to_string(ATTACHMENTS)
        .unwrap_or_default()
        .lines()
        .filter(|l| l.starts_with("owner "))
        .count() as u64;
    let mut m = HashMap::new();
    for &k in COUNTERS {
        let v = match k {
            "owners" => Some(owners),
            "vm_pin_kb" => vm_pin_kb(),
            "pinned_pages" | "eventfds_held" | "owners_alive" => number(&stats, k),
            _ => number(&sim, k),
        };
        // A counter that cannot be read counts as risen.
        m.insert(k, v.unwrap_or(u64::MAX));
    }
    m
}

/// The oracles' state: where the kernel log was read up to, and the
/// counters' baseline.
pub struct Oracle {
    kmsg: Option<fs::File>,
    baseline: HashMap<&'static str, u64>,
}

impl Oracle {
    /// Starts reading the kernel log from now, with the counters of now as
    /// the baseline.
    pub fn new() -> Self {
        let kmsg = fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open("/dev/kmsg")
            .ok();
        if let Some(k) = kmsg.as_ref() {
            // SAFETY: lseek(2) on an fd this function owns.
            unsafe { libc::lseek(std::os::fd::AsRawFd::as_raw_fd(k), 0, libc::SEEK_END) };
        }
        Self {
            kmsg,
            baseline: counters(),
        }
    }

    /// Kernel log lines written since the last call.
    pub fn new_log_lines(&mut self) -> Vec<String> {
        let mut lines = Vec::new();
        let Some(k) = self.kmsg.as_mut() else {
            return lines;
        };
        let mut buf = vec![0u8; 8192];
        loop {
            match k.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => {
                    let rec = String::from_utf8_lossy(&buf[..n]);
                    // "prio,seq,time,flags;message"
                    let msg = rec.split_once(';').map_or(&*rec, |(_, m)| m);
                    lines.push(msg.trim_end().to_string());
                }
                // EPIPE: records were overwritten; go on from the next.
                Err(e) if e.raw_os_error() == Some(libc::EPIPE) => continue,
                Err(_) => break,
            }
        }
        lines
    }

    /// What is wrong now that the program is over; empty if every oracle
    /// holds. Waits up to a second for what the module releases
    /// asynchronously.
    pub fn violations(&mut self) -> Vec<String> {
        let mut v = self.settled(COUNTERS, "after every file was closed");
        for l in self.new_log_lines() {
            if BAD_LOG.iter().any(|m| l.contains(m)) {
                v.push(format!("kernel log: {l}"));
            }
        }
        v
    }

    /// What is wrong once the owners are closed and the tenants still run.
    pub fn after_owners_closed(&mut self) -> Vec<String> {
        self.settled(AFTER_OWNERS, "after every owner was closed")
    }

    fn settled(&mut self, keys: &[&'static str], when: &str) -> Vec<String> {
        let deadline = Instant::now() + Duration::from_secs(1);
        loop {
            let v = self.counter_violations(keys, when);
            if v.is_empty() || Instant::now() >= deadline {
                return v;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// The counters of `keys` that rose; one that fell (a leak reported
    /// earlier healed) lowers the baseline instead.
    fn counter_violations(&mut self, keys: &[&'static str], when: &str) -> Vec<String> {
        let now = counters();
        let mut v = Vec::new();
        for &k in keys {
            let (was, is) = (self.baseline.get(k).copied().unwrap_or(0), now[k]);
            if is > was {
                v.push(format!("{k} is {is} {when} (was {was})"));
            } else if is < was {
                self.baseline.insert(k, is);
            }
        }
        v
    }

    /// Takes the counters of now as the baseline, after a violation was
    /// reported, so that each defect is reported by the program that
    /// causes it.
    pub fn accept_current(&mut self) {
        self.baseline = counters();
    }
}
