//! Which `kfd-preempt` processes hold a preemption or freeze of which
//! target, so that `kfd-preempt resume PID` / `thaw PID` can ask them to
//! release it: one empty file `KIND-TGID-HOLDER` per hold in the run
//! directory (`$KFDP_RUN_DIR`, default `/run/kfd_preempt`).

use std::{
    fs,
    os::unix::fs::DirBuilderExt,
    path::{Path, PathBuf},
    time::Duration,
};

use rustix::{
    event::{poll, PollFd, PollFlags, Timespec},
    process::{pidfd_open, pidfd_send_signal, Pid, PidfdFlags, Signal},
};

use crate::{CliResult, Done};

/// What a holder holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Hold {
    Preempt,
    Freeze,
}

impl Hold {
    fn prefix(self) -> &'static str {
        match self {
            Hold::Preempt => "preempt",
            Hold::Freeze => "freeze",
        }
    }
}

fn run_dir() -> PathBuf {
    std::env::var_os("KFDP_RUN_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/run/kfd_preempt"))
}

/// This process's registration; the file goes when it is dropped.
pub(crate) struct Registration(Option<PathBuf>);

impl Drop for Registration {
    fn drop(&mut self) {
        if let Some(p) = &self.0 {
            let _ = fs::remove_file(p);
        }
    }
}

/// Registers this process as holding `hold` on `tgid`. Failing to register
/// only costs `resume PID` its way to find this holder, so it is a warning.
pub(crate) fn register(hold: Hold, tgid: i32) -> Registration {
    let dir = run_dir();
    let path = dir.join(format!("{}-{tgid}-{}", hold.prefix(), std::process::id()));
    let made = fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&dir)
        .and_then(|()| fs::write(&path, b""));
    match made {
        Ok(()) => Registration(Some(path)),
        Err(e) => {
            eprintln!(
                "kfd-preempt: warning: cannot register in {} ({e}); `kfd-preempt resume` will not find this process, send it SIGTERM instead",
                dir.display()
            );
            Registration(None)
        }
    }
}

/// The holders of `hold` on `tgid` registered in `dir`.
pub(crate) fn holders(dir: &Path, hold: Hold, tgid: i32) -> Vec<(i32, PathBuf)> {
    let prefix = format!("{}-{tgid}-", hold.prefix());
    let Ok(entries) = fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut found: Vec<(i32, PathBuf)> = entries
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            let holder = name.strip_prefix(&prefix)?.parse().ok()?;
            Some((holder, e.path()))
        })
        .collect();
    found.sort();
    found
}

/// `tgid` of `pid` (a thread id works too), or `pid` itself once it exited.
fn tgid_of(pid: i32) -> i32 {
    fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Tgid:"))
                .and_then(|v| v.trim().parse().ok())
        })
        .unwrap_or(pid)
}

/// Signals one holder and waits (up to 10 s) for it to release and exit.
/// `Ok(false)`: the registration was stale.
fn release_one(holder: i32) -> Result<bool, String> {
    let Some(pid) = Pid::from_raw(holder) else {
        return Ok(false);
    };
    let Ok(pidfd) = pidfd_open(pid, PidfdFlags::empty()) else {
        return Ok(false);
    };
    // A recycled pid must not get the signal.
    let comm = fs::read_to_string(format!("/proc/{holder}/comm")).unwrap_or_default();
    if comm.trim() != "kfd-preempt" {
        return Ok(false);
    }
    pidfd_send_signal(&pidfd, Signal::USR1).map_err(|e| format!("signalling {holder}: {e}"))?;
    let mut fds = [PollFd::new(&pidfd, PollFlags::IN)];
    let timeout = Timespec::try_from(Duration::from_secs(10)).ok();
    match poll(&mut fds, timeout.as_ref()) {
        Ok(n) if n > 0 => Ok(true),
        Ok(_) => Err(format!("kfd-preempt {holder} did not exit within 10 s")),
        Err(e) => Err(format!("waiting for {holder}: {e}")),
    }
}

pub(crate) fn release(pid: i32, hold: Hold) -> CliResult {
    let tgid = tgid_of(pid);
    let dir = run_dir();
    let mut released = 0;
    for (holder, path) in holders(&dir, hold, tgid) {
        match release_one(holder)? {
            true => {
                println!(
                    "kfd-preempt {holder} released its {} of {tgid}",
                    hold.prefix()
                );
                released += 1;
            }
            false => {
                let _ = fs::remove_file(path);
            }
        }
    }
    if released == 0 {
        return Err(format!(
            "nothing holds a {} of process {tgid}: a preemption lasts only as long as the kfd-preempt (or scheduler) process that made it, and this one finds only kfd-preempt holders registered in {}",
            hold.prefix(),
            dir.display()
        )
        .into());
    }
    Ok(Done::Ok)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holders_are_found_by_kind_and_target() {
        let dir = std::env::temp_dir().join(format!("kfdp-registry-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        for name in [
            "preempt-10-200",
            "preempt-10-100",
            "freeze-10-300",
            "preempt-11-400",
            "junk",
        ] {
            fs::write(dir.join(name), b"").unwrap();
        }
        let got: Vec<i32> = holders(&dir, Hold::Preempt, 10)
            .iter()
            .map(|h| h.0)
            .collect();
        assert_eq!(got, [100, 200]);
        let got: Vec<i32> = holders(&dir, Hold::Freeze, 10)
            .iter()
            .map(|h| h.0)
            .collect();
        assert_eq!(got, [300]);
        assert!(holders(&dir, Hold::Freeze, 11).is_empty());
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_dead_or_foreign_holder_is_stale_and_not_signalled() {
        // Our own pid: alive, but its comm is the test binary's, not
        // kfd-preempt; pid 0x7ffffff0 does not exist.
        assert_eq!(release_one(std::process::id() as i32), Ok(false));
        assert_eq!(release_one(0x7fff_fff0), Ok(false));
    }

    #[test]
    fn tgid_of_this_process_and_of_a_gone_one() {
        let me = std::process::id() as i32;
        assert_eq!(tgid_of(me), me);
        assert_eq!(tgid_of(0x7fff_fff0), 0x7fff_fff0);
    }
}
