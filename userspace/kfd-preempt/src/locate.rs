//! Finding a tenant's KFD descriptor and taking a copy of it.

use std::{fs, io, os::fd::OwnedFd, path::Path};

use rustix::{
    io::Errno,
    process::{pidfd_getfd, pidfd_open, Pid, PidfdFlags, PidfdGetfdFlags},
};

use crate::{Error, TargetKind};

/// The device a process's KFD file is opened from.
pub(crate) fn kind_of(link: &Path) -> Option<TargetKind> {
    match link.to_str()? {
        "/dev/kfd" => Some(TargetKind::KfdFd),
        "/dev/kfd_preempt_sim" => Some(TargetKind::SimFd),
        _ => None,
    }
}

fn io_errno(e: &io::Error) -> Errno {
    Errno::from_io_error(e).unwrap_or(Errno::IO)
}

/// The lowest fd number of `pid` open on a KFD device, from its
/// `/proc/PID/fd` links.
pub(crate) fn find_kfd_fd(proc_fd_dir: &Path, pid: i32) -> Result<(i32, TargetKind), Error> {
    find_kfd_fds(proc_fd_dir, pid)?
        .first()
        .copied()
        .ok_or(Error::NotAKfdProcess { pid })
}

/// Every fd number of `pid` open on a KFD device, lowest first; never
/// empty. A process holds several after `fork(2)` (the inherited one
/// names its parent's KFD process) or when a profiler opened its own.
pub(crate) fn find_kfd_fds(proc_fd_dir: &Path, pid: i32) -> Result<Vec<(i32, TargetKind)>, Error> {
    let dir = fs::read_dir(proc_fd_dir).map_err(|e| match io_errno(&e) {
        Errno::NOENT => Error::NoSuchProcess { pid },
        errno @ (Errno::PERM | Errno::ACCESS) => Error::PtraceDenied { pid, errno },
        errno => Error::Os {
            operation: "reading /proc/PID/fd",
            errno,
        },
    })?;
    let mut found: Vec<(i32, TargetKind)> = Vec::new();
    for entry in dir.flatten() {
        let Some(fd) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<i32>().ok())
        else {
            continue;
        };
        // A descriptor closed since the directory was read is skipped.
        let Ok(link) = fs::read_link(entry.path()) else {
            continue;
        };
        if let Some(kind) = kind_of(&link) {
            found.push((fd, kind));
        }
    }
    if found.is_empty() {
        return Err(Error::NotAKfdProcess { pid });
    }
    found.sort_unstable_by_key(|(fd, _)| *fd);
    Ok(found)
}

/// Every process with a KFD device open: `/dev/kfd`
/// ([`TargetKind::KfdFd`]) or the simulated tenant device
/// ([`TargetKind::SimFd`]), from the `/proc/PID/fd` links, by pid. A process
/// with both is reported by its lowest such descriptor. Processes that exit
/// during the scan, or whose descriptors this process may not read, are
/// skipped; only an unreadable `/proc` is an error.
///
/// ```
/// for (pid, kind) in kfd_preempt::kfd_processes()? {
///     println!("{pid}: {kind:?}");
/// }
/// # Ok::<(), kfd_preempt::Error>(())
/// ```
pub fn kfd_processes() -> Result<Vec<(i32, TargetKind)>, Error> {
    scan_processes(Path::new("/proc"))
}

/// [`kfd_processes`] over a `/proc`-like directory.
pub(crate) fn scan_processes(proc_dir: &Path) -> Result<Vec<(i32, TargetKind)>, Error> {
    let dir = fs::read_dir(proc_dir).map_err(|e| Error::Os {
        operation: "reading /proc",
        errno: io_errno(&e),
    })?;
    let mut found: Vec<(i32, TargetKind)> = dir
        .flatten()
        .filter_map(|entry| {
            let pid = entry.file_name().to_str()?.parse::<i32>().ok()?;
            if pid <= 0 {
                return None;
            }
            find_kfd_fd(&entry.path().join("fd"), pid)
                .ok()
                .map(|(_, kind)| (pid, kind))
        })
        .collect();
    found.sort_unstable_by_key(|(pid, _)| *pid);
    Ok(found)
}

/// Copies of `pid`'s KFD descriptors, lowest fd first, taken with
/// `pidfd_getfd(2)`; never empty. The caller attaches one and drops them
/// right away: a copy keeps an exited tenant's memory alive.
pub(crate) fn take_kfd_fds(pid: i32) -> Result<Vec<(OwnedFd, TargetKind)>, Error> {
    let Some(p) = Pid::from_raw(pid).filter(|_| pid > 0) else {
        return Err(Error::InvalidArgument("a pid is a positive number"));
    };
    // Opened first, so that the fd found below belongs to this process even
    // if the pid is reused meanwhile.
    let pidfd = pidfd_open(p, PidfdFlags::empty()).map_err(|errno| match errno {
        Errno::SRCH => Error::NoSuchProcess { pid },
        errno => Error::Os {
            operation: "pidfd_open",
            errno,
        },
    })?;
    let mut copies = Vec::new();
    for (fd, kind) in find_kfd_fds(Path::new(&format!("/proc/{pid}/fd")), pid)? {
        match pidfd_getfd(&pidfd, fd, PidfdGetfdFlags::empty()) {
            Ok(copy) => copies.push((copy, kind)),
            // The descriptor was closed after it was found.
            Err(Errno::BADF) => {}
            Err(errno @ (Errno::PERM | Errno::ACCESS)) => {
                return Err(Error::PtraceDenied { pid, errno })
            }
            Err(Errno::SRCH) => return Err(Error::NoSuchProcess { pid }),
            Err(errno) => {
                return Err(Error::Os {
                    operation: "pidfd_getfd",
                    errno,
                })
            }
        }
    }
    if copies.is_empty() {
        return Err(Error::NotAKfdProcess { pid });
    }
    Ok(copies)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    #[test]
    fn kinds_by_device_path() {
        assert_eq!(kind_of(Path::new("/dev/kfd")), Some(TargetKind::KfdFd));
        assert_eq!(
            kind_of(Path::new("/dev/kfd_preempt_sim")),
            Some(TargetKind::SimFd)
        );
        assert_eq!(kind_of(Path::new("/dev/kfd_preempt")), None);
        assert_eq!(kind_of(Path::new("/dev/kfd (deleted)")), None);
    }

    fn fake_fd_dir(links: &[(&str, &str)]) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "kfdp-locate-{}-{}",
            std::process::id(),
            links.len()
        ));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        for (name, target) in links {
            symlink(target, dir.join(name)).unwrap();
        }
        dir
    }

    #[test]
    fn finds_the_lowest_kfd_fd_of_either_kind() {
        let dir = fake_fd_dir(&[
            ("0", "/dev/null"),
            ("9", "/dev/kfd"),
            ("5", "/dev/kfd_preempt_sim"),
            ("7", "socket:[1234]"),
        ]);
        assert_eq!(find_kfd_fd(&dir, 1), Ok((5, TargetKind::SimFd)));
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn lists_every_kfd_fd_lowest_first() {
        // A forked worker: the inherited /dev/kfd (3) and its own (11).
        let dir = fake_fd_dir(&[("11", "/dev/kfd"), ("0", "/dev/null"), ("3", "/dev/kfd")]);
        assert_eq!(
            find_kfd_fds(&dir, 1),
            Ok(vec![(3, TargetKind::KfdFd), (11, TargetKind::KfdFd)])
        );
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_process_without_kfd_is_reported_as_such() {
        let dir = fake_fd_dir(&[("0", "/dev/null"), ("1", "pipe:[5]")]);
        assert_eq!(
            find_kfd_fd(&dir, 42),
            Err(Error::NotAKfdProcess { pid: 42 })
        );
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_missing_process_is_no_such_process() {
        assert_eq!(
            find_kfd_fd(Path::new("/nonexistent/fd"), 7),
            Err(Error::NoSuchProcess { pid: 7 })
        );
        assert_eq!(
            take_kfd_fds(0).unwrap_err(),
            Error::InvalidArgument("a pid is a positive number")
        );
    }

    #[test]
    fn scans_a_fake_proc_skipping_what_is_not_a_kfd_process() {
        let root = std::env::temp_dir().join(format!("kfdp-proc-{}", std::process::id()));
        let _ = fs::remove_dir_all(&root);
        for (pid, links) in [
            ("12", vec![("3", "/dev/kfd")]),
            ("7", vec![("0", "/dev/null"), ("4", "/dev/kfd_preempt_sim")]),
            ("9", vec![("0", "/dev/null")]),
        ] {
            let fd = root.join(pid).join("fd");
            fs::create_dir_all(&fd).unwrap();
            for (name, target) in links {
                symlink(target, fd.join(name)).unwrap();
            }
        }
        // Not processes: no fd directory, or not a number.
        fs::create_dir_all(root.join("31")).unwrap();
        fs::create_dir_all(root.join("self").join("fd")).unwrap();
        fs::write(root.join("uptime"), "1.0 1.0").unwrap();
        assert_eq!(
            scan_processes(&root),
            Ok(vec![(7, TargetKind::SimFd), (12, TargetKind::KfdFd)])
        );
        fs::remove_dir_all(&root).unwrap();
        assert!(matches!(
            scan_processes(Path::new("/nonexistent/proc")),
            Err(Error::Os { .. })
        ));
    }

    #[test]
    fn the_real_proc_scan_works() {
        // The test runner has no KFD device open.
        let me = std::process::id() as i32;
        assert!(kfd_processes().unwrap().iter().all(|(pid, _)| *pid != me));
    }

    #[test]
    fn this_process_has_no_kfd_fd() {
        // A real pidfd_open + /proc scan: the test runner has no /dev/kfd.
        let pid = std::process::id() as i32;
        assert_eq!(
            take_kfd_fds(pid).unwrap_err(),
            Error::NotAKfdProcess { pid }
        );
    }
}
