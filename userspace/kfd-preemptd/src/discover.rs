//! Finding tenant processes and sorting them into classes.
//!
//! Every scan lists the processes with a KFD device open
//! ([`kfd_preempt::kfd_processes`]), reads what the class selectors need
//! from `/proc/PID` for pids not seen before, and reports which appeared
//! and which left. A process can exit at any point of this: whatever was
//! being read about it is then dropped, not an error.
//!
//! A pid seen before is told from a new process under the same pid by a
//! pidfd held for it, which polls readable once the process exits: one
//! `poll` confirms every known process, where reading each one's
//! `/proc/PID/stat` cost the daemon's SCHED_FIFO loop milliseconds a scan.
//! Without a pidfd (a kernel before 5.3, a seccomp filter refusing
//! `pidfd_open`, the budget of descriptors spent) or when `poll` fails, the
//! start time in `/proc/PID/stat` tells them apart, as it did before.

use std::{
    collections::{HashMap, HashSet},
    ffi::{OsStr, OsString},
    io,
    os::fd::OwnedFd,
    path::{Path, PathBuf},
};

use kfd_preempt::TargetKind;
use procfs::{process::Process, ProcError, ProcResult};
use rustix::{
    event::{poll, PollFd, PollFlags, Timespec},
    io::Errno,
    process::{getrlimit, pidfd_open, Pid, PidfdFlags, Resource},
};

use crate::config::{ClassRule, Config, Priority, Tenants, CLASS_ENV};

/// What the class selectors look at, read from `/proc/PID`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ProcInfo {
    /// The pid.
    pub pid: i32,
    /// Start time in clock ticks after boot (`/proc/PID/stat` field 22):
    /// with the pid, it tells a reused pid from the process seen before.
    pub start_time: u64,
    /// Real uid (`Uid:` in `/proc/PID/status`).
    pub uid: Option<u32>,
    /// The command name (`comm` in `/proc/PID/stat`, as `/proc/PID/comm`
    /// shows it).
    pub comm: String,
    /// `/proc/PID/exe`, if read and readable.
    pub exe: Option<PathBuf>,
    /// The cgroup v2 path (the `0::` line of `/proc/PID/cgroup`).
    pub cgroup: Option<String>,
    /// The value of `KFD_PREEMPT_CLASS` in `/proc/PID/environ`, if read,
    /// readable and set.
    pub env_class: Option<String>,
}

/// Whether an error reading `/proc/PID/...` means the process is gone.
fn is_gone(e: &io::Error) -> bool {
    // ENOENT: the directory went away; ESRCH: the task is exiting (reads
    // of some files of a zombie fail so).
    e.kind() == io::ErrorKind::NotFound || e.raw_os_error() == Some(3)
}

/// Reads an optional file: `Ok(None)` if unreadable for a reason other
/// than the process being gone (permissions, a kernel thread's `exe`).
fn optional<T>(r: io::Result<T>) -> io::Result<Option<T>> {
    match r {
        Ok(v) => Ok(Some(v)),
        Err(e) if is_gone(&e) => Err(e),
        Err(_) => Ok(None),
    }
}

/// The value of `KFD_PREEMPT_CLASS` in an environment.
fn env_class(environ: &HashMap<OsString, OsString>) -> Option<String> {
    environ
        .get(OsStr::new(CLASS_ENV))
        .map(|v| v.to_string_lossy().into_owned())
}

/// A `procfs` error as the `io::Error` it stands for: `NotFound` for a
/// process that is gone (ENOENT or ESRCH), as [`is_gone`] reads it.
fn to_io(e: ProcError) -> io::Error {
    let at = |path: Option<PathBuf>| path.map(|p| p.display().to_string()).unwrap_or_default();
    match e {
        ProcError::NotFound(p) => io::Error::new(io::ErrorKind::NotFound, at(p)),
        ProcError::PermissionDenied(p) => io::Error::new(io::ErrorKind::PermissionDenied, at(p)),
        ProcError::Io(e, _) => e,
        ProcError::Incomplete(p) => {
            io::Error::new(io::ErrorKind::InvalidData, format!("{}: incomplete", at(p)))
        }
        e => io::Error::new(io::ErrorKind::InvalidData, e.to_string()),
    }
}

/// The start time of the process under `pid` (`/proc/PID/stat` field 22):
/// with the pid, it tells a reused pid from the process seen before.
fn start_time(proc_root: &Path, pid: i32) -> ProcResult<u64> {
    Ok(Process::new_with_root(proc_root.join(pid.to_string()))?
        .stat()?
        .starttime)
}

/// Reads what the selectors need about `pid` under `proc_root` (normally
/// `/proc`), through `procfs`. `exe` and `environ` are read only if asked
/// for: they need ptrace access. `Ok(None)`: the process is gone.
pub fn read_proc(
    proc_root: &Path,
    pid: i32,
    want_exe: bool,
    want_env: bool,
) -> io::Result<Option<ProcInfo>> {
    match read_proc_inner(proc_root, pid, want_exe, want_env).map_err(to_io) {
        Ok(info) => Ok(Some(info)),
        Err(e) if is_gone(&e) => Ok(None),
        Err(e) => Err(e),
    }
}

fn read_proc_inner(
    proc_root: &Path,
    pid: i32,
    want_exe: bool,
    want_env: bool,
) -> ProcResult<ProcInfo> {
    let process = Process::new_with_root(proc_root.join(pid.to_string()))?;
    let stat = process.stat()?;
    let uid = process.status()?.ruid;
    // A kernel without CONFIG_CGROUPS has no /proc/PID/cgroup at all, so
    // NotFound here does not mean the process is gone (stat said it is not).
    let cgroup = process.cgroups().ok().and_then(|groups| {
        groups
            .into_iter()
            .find(|g| g.hierarchy == 0 && g.controllers.is_empty())
            .map(|g| g.pathname)
    });
    let exe = if want_exe {
        optional(process.exe().map_err(to_io))?
    } else {
        None
    };
    let env_class = if want_env {
        optional(process.environ().map_err(to_io))?.and_then(|e| env_class(&e))
    } else {
        None
    };
    Ok(ProcInfo {
        pid,
        start_time: stat.starttime,
        uid: Some(uid),
        comm: stat.comm,
        exe,
        cgroup,
        env_class,
    })
}

/// Whether the cgroup path `path` is `prefix` or lies below it. The match
/// is made at `/` boundaries, so `/a/b` does not match `/a/bc`.
///
/// ```
/// use kfd_preemptd::discover::cgroup_matches;
/// assert!(cgroup_matches("/system.slice", "/system.slice/x.service"));
/// assert!(!cgroup_matches("/system.slice/x", "/system.slice/x.service"));
/// assert!(cgroup_matches("/", "/user.slice"));
/// ```
pub fn cgroup_matches(prefix: &str, path: &str) -> bool {
    let prefix = prefix.trim_end_matches('/');
    match path.strip_prefix(prefix) {
        Some(rest) => rest.is_empty() || rest.starts_with('/'),
        None => false,
    }
}

/// Whether every selector of `rule` matches `info`.
pub fn rule_matches(rule: &ClassRule, info: &ProcInfo) -> bool {
    rule.uid.is_none_or(|u| info.uid == Some(u))
        && rule.comm.as_ref().is_none_or(|c| *c == info.comm)
        && rule
            .exe
            .as_ref()
            .is_none_or(|e| info.exe.as_ref() == Some(e))
        && rule
            .cgroup
            .as_ref()
            .is_none_or(|c| info.cgroup.as_deref().is_some_and(|p| cgroup_matches(c, p)))
        && rule
            .env
            .as_ref()
            .is_none_or(|v| info.env_class.as_ref() == Some(v))
}

/// The first rule of `cfg` that matches `info`.
pub fn classify<'c>(cfg: &'c Config, info: &ProcInfo) -> Option<&'c ClassRule> {
    cfg.classes.iter().find(|r| rule_matches(r, info))
}

/// Whether a descriptor kind is one the configuration looks for.
pub fn wanted_kind(tenants: Tenants, kind: TargetKind) -> bool {
    matches!(
        (tenants, kind),
        (Tenants::Both, _) | (Tenants::Kfd, TargetKind::KfdFd) | (Tenants::Sim, TargetKind::SimFd)
    )
}

/// A process seen for the first time by a scan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    /// What `/proc` said about it.
    pub info: ProcInfo,
    /// Its KFD descriptor kind.
    pub kind: TargetKind,
    /// The matching rule's name, if any.
    pub class: Option<String>,
    /// The matching rule's priority; `Ignore` if none matched.
    pub priority: Priority,
}

/// What a scan found.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ScanResult {
    /// Processes seen for the first time (ignored ones included).
    pub added: Vec<Candidate>,
    /// Pids seen before that are gone (or reused by another process, which
    /// is then also in `added`).
    pub gone: Vec<i32>,
}

/// At most this many pidfds are held, and at most a quarter of the soft
/// `RLIMIT_NOFILE` (which the daemon raises to the hard limit at start):
/// the descriptors the daemon cannot do without (a file and an eventfd a
/// decision) keep their room. Processes beyond are compared by start time.
const MAX_PIDFDS: usize = 512;

/// A process seen before.
#[derive(Debug)]
struct Known {
    /// Readable once the process has exited; `None` where none could be
    /// opened, and then the start time (`info.start_time`) is compared
    /// instead.
    pidfd: Option<OwnedFd>,
    /// The last listing left it out while it lived: the next one that
    /// does too calls it gone.
    missed: bool,
    /// What it was classified by, its start time included: a process
    /// listed again after a miss may have run `exec` meanwhile (the KFD
    /// descriptor is close-on-exec).
    info: ProcInfo,
}

/// Remembers the processes seen so far, so that each is read and
/// classified once.
#[derive(Debug)]
pub struct Discovery {
    proc_root: PathBuf,
    /// How many pidfds may be held: 0 where known processes are compared
    /// by start time only (a fake `/proc` in tests, whose pids no pidfd
    /// names, or a kernel that refused `pidfd_open`).
    max_pidfds: usize,
    known: HashMap<i32, Known>,
}

impl Default for Discovery {
    fn default() -> Self {
        Self::new(PathBuf::from("/proc")).with_pidfds()
    }
}

/// What opening a pidfd for a pid found.
enum Opened {
    Fd(OwnedFd),
    /// The pid names no process now, or one that has exited and awaits
    /// its parent's wait.
    Gone,
    /// No pidfd (none allowed, none left, or not supported).
    None,
}

/// Whether a pidfd's process has exited; a failed `poll` says no, and the
/// next scan asks again.
fn has_exited(fd: &OwnedFd) -> bool {
    let mut fds = [PollFd::new(fd, PollFlags::IN)];
    poll_now(&mut fds).is_ok() && !fds[0].revents().is_empty()
}

/// `poll` without waiting, again if a signal interrupted it.
fn poll_now(fds: &mut [PollFd<'_>]) -> Result<(), Errno> {
    let now = Timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    loop {
        match poll(fds, Some(&now)) {
            Err(Errno::INTR) => continue,
            r => return r.map(drop),
        }
    }
}

impl Discovery {
    /// A discovery over `proc_root` (`/proc`, or a fake one in tests) that
    /// reads the start time of every known process at each scan.
    pub fn new(proc_root: PathBuf) -> Self {
        Discovery {
            proc_root,
            max_pidfds: 0,
            known: HashMap::new(),
        }
    }

    /// Confirms known processes by pidfd instead, within the descriptor
    /// limit as it is now. The pids must be the system's: `proc_root` is
    /// `/proc` (tests pair a fake one with real children).
    pub fn with_pidfds(mut self) -> Self {
        let soft = getrlimit(Resource::Nofile).current.unwrap_or(u64::MAX);
        self.max_pidfds = MAX_PIDFDS.min(usize::try_from(soft / 4).unwrap_or(usize::MAX));
        self
    }

    #[cfg(test)]
    fn with_max_pidfds(mut self, max: usize) -> Self {
        self.max_pidfds = max;
        self
    }

    /// Lists the KFD processes now and compares with the last scan.
    pub fn scan(&mut self, cfg: &Config) -> Result<ScanResult, kfd_preempt::Error> {
        let listed = kfd_preempt::kfd_processes()?;
        Ok(self.scan_listed(cfg, &listed))
    }

    /// Forgets `pid`, so that the next scan that lists it reads and
    /// classifies it again.
    pub fn forget(&mut self, pid: i32) {
        self.known.remove(&pid);
    }

    /// A pidfd for `pid`, unless `held` are held already.
    fn open_pidfd(&mut self, pid: i32, held: usize) -> Opened {
        if held >= self.max_pidfds {
            return Opened::None;
        }
        let Some(p) = Pid::from_raw(pid) else {
            return Opened::Gone;
        };
        match pidfd_open(p, PidfdFlags::empty()) {
            // A zombie's pidfd opens, and is readable at once.
            Ok(fd) if has_exited(&fd) => Opened::Gone,
            Ok(fd) => Opened::Fd(fd),
            Err(Errno::SRCH) => Opened::Gone,
            // No pidfd_open (before Linux 5.3), or a seccomp filter that
            // refuses it: not tried again.
            Err(Errno::NOSYS | Errno::PERM) => {
                self.max_pidfds = 0;
                Opened::None
            }
            // No descriptor left (EMFILE, ENFILE): this process only.
            Err(_) => Opened::None,
        }
    }

    /// The known pids among `pids` whose pidfd says they exited; `None` if
    /// `poll` failed, and then this scan compares start times.
    fn exited(&self, pids: &HashSet<i32>) -> Option<HashSet<i32>> {
        let mut polled = Vec::new();
        let mut fds = Vec::new();
        for pid in pids {
            if let Some(fd) = self.known.get(pid).and_then(|k| k.pidfd.as_ref()) {
                polled.push(*pid);
                fds.push(PollFd::new(fd, PollFlags::IN));
            }
        }
        if !fds.is_empty() {
            poll_now(&mut fds).ok()?;
        }
        Some(
            polled
                .into_iter()
                .zip(fds)
                .filter(|(_, fd)| !fd.revents().is_empty())
                .map(|(pid, _)| pid)
                .collect(),
        )
    }

    /// Whether a known process is the one listed under its pid now:
    /// `None` if the pid names no process any more.
    fn still_the_same(&self, pid: i32, k: &Known, exited: Option<&HashSet<i32>>) -> Option<bool> {
        if let (Some(_), Some(exited)) = (&k.pidfd, exited) {
            // A reused pid means the process seen before exited, so its
            // pidfd is readable; the pid is then read afresh.
            return Some(!exited.contains(&pid));
        }
        let start_time = start_time(&self.proc_root, pid).ok()?;
        Some(start_time == k.info.start_time)
    }

    /// [`scan`](Self::scan) over a given list of `(pid, kind)`, each pid
    /// once (as [`kfd_preempt::kfd_processes`] lists them).
    pub fn scan_listed(&mut self, cfg: &Config, listed: &[(i32, TargetKind)]) -> ScanResult {
        let want_exe = cfg.uses_exe();
        let want_env = cfg.uses_env();
        let listed: Vec<(i32, TargetKind)> = listed
            .iter()
            .copied()
            .filter(|(_, kind)| wanted_kind(cfg.daemon.tenants, *kind))
            .collect();
        let listed_pids: HashSet<i32> = listed.iter().map(|(pid, _)| *pid).collect();
        let known_pids: HashSet<i32> = self.known.keys().copied().collect();
        let exited = self.exited(&known_pids);
        let mut result = ScanResult::default();
        let mut known = std::mem::take(&mut self.known);
        let mut seen = HashMap::new();
        // Those no longer listed first, so that their pidfds are closed
        // before new ones are opened. One listing can leave out a live
        // tenant whose descriptors could not be read at that moment (an
        // exec in progress, say): a process that has not exited is gone
        // only when two listings in a row leave it out.
        let unlisted: Vec<i32> = known_pids.difference(&listed_pids).copied().collect();
        for (pid, mut k) in unlisted.into_iter().filter_map(|p| known.remove_entry(&p)) {
            if k.missed || self.still_the_same(pid, &k, exited.as_ref()) != Some(true) {
                result.gone.push(pid);
            } else {
                k.missed = true;
                seen.insert(pid, k);
            }
        }
        let mut held = known
            .values()
            .chain(seen.values())
            .filter(|k| k.pidfd.is_some())
            .count();
        for (pid, kind) in listed {
            if let Some(k) = known.remove(&pid) {
                let same = self.still_the_same(pid, &k, exited.as_ref());
                // Listed again after a miss: the same program still, or
                // one it exec'd, to be read and classified afresh.
                let same = match same {
                    Some(true) if k.missed => Some(
                        read_proc(&self.proc_root, pid, want_exe, want_env)
                            .is_ok_and(|i| i.as_ref() == Some(&k.info)),
                    ),
                    other => other,
                };
                match same {
                    Some(true) => {
                        seen.insert(pid, Known { missed: false, ..k });
                        continue;
                    }
                    // Gone since it was listed.
                    None => {
                        result.gone.push(pid);
                        held -= usize::from(k.pidfd.is_some());
                        continue;
                    }
                    // Exited, and perhaps a new process under its pid:
                    // its pidfd is closed here.
                    Some(false) => {
                        result.gone.push(pid);
                        held -= usize::from(k.pidfd.is_some());
                    }
                }
            }
            // Opened before the read: should the pid be reused in between,
            // the pidfd names the process that exited, and the next scan
            // reads the pid again.
            let pidfd = match self.open_pidfd(pid, held) {
                Opened::Fd(fd) => {
                    held += 1;
                    Some(fd)
                }
                Opened::Gone => continue,
                Opened::None => None,
            };
            // Unreadable for another reason than exiting (a /proc mounted
            // with hidepid, say): skipped now, tried again next scan.
            let Ok(Some(info)) = read_proc(&self.proc_root, pid, want_exe, want_env) else {
                continue;
            };
            let rule = classify(cfg, &info);
            seen.insert(
                pid,
                Known {
                    pidfd,
                    missed: false,
                    info: info.clone(),
                },
            );
            result.added.push(Candidate {
                class: rule.map(|r| r.name.clone()),
                priority: rule.map_or(Priority::Ignore, |r| cfg.priority_of(r)),
                info,
                kind,
            });
        }
        result.gone.sort_unstable();
        self.known = seen;
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::FakeProc;

    fn cfg(rules: &str) -> Config {
        Config::parse(rules).unwrap()
    }

    fn class_of(c: &Config, info: &ProcInfo) -> Option<String> {
        classify(c, info).map(|r| r.name.clone())
    }

    #[test]
    fn proc_files_read_back_as_the_kernel_writes_them() {
        let p = FakeProc::new("formats");
        // A comm with spaces and parentheses: fields count from the last ")".
        p.add(
            42,
            987654,
            1000,
            "a (weird) name",
            "/usr/bin/x",
            "/system.slice/a.service",
            &[
                "PATH=/bin",
                "XKFD_PREEMPT_CLASS=no",
                "KFD_PREEMPT_CLASS=training",
            ],
        );
        let info = p.info(42);
        assert_eq!(info.start_time, 987654);
        assert_eq!(info.comm, "a (weird) name");
        assert_eq!(info.uid, Some(1000));
        assert_eq!(info.exe.as_deref(), Some(Path::new("/usr/bin/x")));
        assert_eq!(info.cgroup.as_deref(), Some("/system.slice/a.service"));
        assert_eq!(info.env_class.as_deref(), Some("training"));
        // The v2 line among v1 lines; no v2 line, no cgroup.
        let dir = p.root.join("42");
        std::fs::write(
            dir.join("cgroup"),
            "1:name=systemd:/x\n0::/user.slice/b.scope\n",
        )
        .unwrap();
        assert_eq!(p.info(42).cgroup.as_deref(), Some("/user.slice/b.scope"));
        std::fs::write(dir.join("cgroup"), "1:name=systemd:/x\n").unwrap();
        assert_eq!(p.info(42).cgroup, None);
        // Without the variable, no class from the environment.
        std::fs::write(dir.join("environ"), b"XKFD_PREEMPT_CLASS=no\0").unwrap();
        assert_eq!(p.info(42).env_class, None);
        // A stat cut short is an error, not a process that is gone.
        std::fs::write(dir.join("stat"), "42 (x) S 1").unwrap();
        let e = read_proc(&p.root, 42, false, false).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidData, "{e}");
        p.remove(42);
        assert_eq!(read_proc(&p.root, 42, true, true).unwrap(), None);
    }

    #[test]
    fn this_process_can_be_read() {
        let pid = std::process::id() as i32;
        let info = read_proc(Path::new("/proc"), pid, true, true)
            .unwrap()
            .unwrap();
        assert_eq!(info.pid, pid);
        assert!(info.start_time > 0);
        assert!(info.uid.is_some());
        assert!(!info.comm.is_empty());
        assert!(info.exe.is_some());
        assert_eq!(
            read_proc(Path::new("/proc"), i32::MAX, true, true).unwrap(),
            None
        );
    }

    #[test]
    fn each_selector_kind_matches_and_mismatches() {
        let p = FakeProc::new("selectors");
        p.add(
            10,
            1,
            1000,
            "server",
            "/usr/bin/server",
            "/system.slice/inference.service",
            &["KFD_PREEMPT_CLASS=gold"],
        );
        let info = p.info(10);
        let rule = |sel: &str| {
            cfg(&format!(
                "[[class]]\nname = \"r\"\npriority = \"best-effort\"\n{sel}\n"
            ))
        };
        let cases = [
            ("uid = 1000", true),
            ("uid = 1001", false),
            ("comm = \"server\"", true),
            ("comm = \"serve\"", false),
            ("exe = \"/usr/bin/server\"", true),
            ("exe = \"/usr/bin/serverx\"", false),
            ("cgroup = \"/system.slice\"", true),
            ("cgroup = \"/system.slice/inference.service\"", true),
            ("cgroup = \"/system.slice/inference\"", false),
            ("cgroup = \"/user.slice\"", false),
            ("env = \"gold\"", true),
            ("env = \"silver\"", false),
            // All selectors of a rule must match.
            ("uid = 1000\ncomm = \"server\"", true),
            ("uid = 1000\ncomm = \"other\"", false),
        ];
        for (sel, expect) in cases {
            assert_eq!(
                class_of(&rule(sel), &info).is_some(),
                expect,
                "selector {sel:?}"
            );
        }
    }

    #[test]
    fn first_match_wins() {
        let p = FakeProc::new("first");
        p.add(
            10,
            1,
            1000,
            "trainer",
            "/usr/bin/python3",
            "/user.slice",
            &[],
        );
        let c = cfg(r#"
            [[class]]
            name = "quiet"
            priority = "ignore"
            comm = "trainer"
            [[class]]
            name = "users"
            priority = "best-effort"
            uid = 1000
        "#);
        assert_eq!(
            c.priority_of(classify(&c, &p.info(10)).unwrap()),
            Priority::Ignore
        );
        let reversed = cfg(r#"
            [[class]]
            name = "users"
            priority = "best-effort"
            uid = 1000
            [[class]]
            name = "quiet"
            priority = "ignore"
            comm = "trainer"
        "#);
        assert_eq!(class_of(&reversed, &p.info(10)).as_deref(), Some("users"));
    }

    #[test]
    fn a_kernel_without_cgroups_still_classifies() {
        // No CONFIG_CGROUPS: /proc/PID/cgroup does not exist at all.
        let p = FakeProc::new("nocgroup");
        p.add(
            12,
            1,
            0,
            "trainer",
            "/usr/bin/t",
            "/",
            &["KFD_PREEMPT_CLASS=be"],
        );
        std::fs::remove_file(p.root.join("12/cgroup")).unwrap();
        let info = read_proc(&p.root, 12, false, true).unwrap().unwrap();
        assert_eq!(info.cgroup, None);
        assert_eq!(info.env_class.as_deref(), Some("be"));
    }

    #[test]
    fn env_is_opt_in_and_read_only_when_a_rule_uses_it() {
        let p = FakeProc::new("env");
        p.add(
            10,
            1,
            1000,
            "a",
            "/bin/a",
            "/",
            &["KFD_PREEMPT_CLASS=training"],
        );
        p.add(11, 1, 1000, "b", "/bin/b", "/", &["OTHER=training"]);
        p.add(
            12,
            1,
            1000,
            "c",
            "/bin/c",
            "/",
            &["KFD_PREEMPT_CLASS=inference"],
        );
        let c = cfg("[[class]]\nname = \"t\"\npriority = \"best-effort\"\nenv = \"training\"\n");
        assert_eq!(class_of(&c, &p.info(10)).as_deref(), Some("t"));
        assert_eq!(class_of(&c, &p.info(11)), None);
        assert_eq!(class_of(&c, &p.info(12)), None);
        // Without an env rule the environment is not read at all.
        let info = read_proc(&p.root, 10, false, false).unwrap().unwrap();
        assert_eq!((info.env_class, info.exe), (None, None));
    }

    #[test]
    fn cgroup_prefix_is_matched_at_path_boundaries() {
        assert!(cgroup_matches("/kubepods.slice", "/kubepods.slice"));
        assert!(cgroup_matches("/kubepods.slice/", "/kubepods.slice/pod1/c"));
        assert!(cgroup_matches(
            "/kubepods.slice/kubepods-burstable.slice",
            "/kubepods.slice/kubepods-burstable.slice/pod1.slice/cri.scope"
        ));
        assert!(!cgroup_matches(
            "/kubepods.slice/kubepods",
            "/kubepods.slice/kubepods-burstable.slice"
        ));
        assert!(!cgroup_matches("/a", "/b/a"));
        let p = FakeProc::new("cgroup");
        p.add(10, 1, 0, "a", "/bin/a", "/system.slice/infer.service", &[]);
        let c = cfg("[[class]]\nname = \"i\"\npriority = \"latency-critical\"\ncgroup = \"/system.slice/infer.service\"\n");
        assert_eq!(class_of(&c, &p.info(10)).as_deref(), Some("i"));
    }

    #[test]
    fn processes_matching_nothing_are_ignored() {
        let p = FakeProc::new("nothing");
        p.add(10, 1, 1000, "a", "/bin/a", "/", &[]);
        let c = cfg("[[class]]\nname = \"i\"\npriority = \"latency-critical\"\nuid = 0\n");
        let mut d = Discovery::new(p.root.clone());
        let r = d.scan_listed(&c, &[(10, TargetKind::KfdFd)]);
        assert_eq!(r.added.len(), 1);
        assert_eq!(r.added[0].priority, Priority::Ignore);
        assert_eq!(r.added[0].class, None);
    }

    #[test]
    fn scans_report_new_gone_and_reused_pids_once() {
        let p = FakeProc::new("scan");
        p.add(10, 100, 0, "lc", "/bin/lc", "/", &[]);
        p.add(20, 200, 1000, "be", "/bin/be", "/", &[]);
        let c = cfg(r#"
            [[class]]
            name = "lc"
            priority = "latency-critical"
            uid = 0
            [[class]]
            name = "be"
            priority = "best-effort"
            uid = 1000
        "#);
        let mut d = Discovery::new(p.root.clone());
        let list = [(10, TargetKind::KfdFd), (20, TargetKind::KfdFd)];
        let r = d.scan_listed(&c, &list);
        let added: Vec<_> = r.added.iter().map(|a| (a.info.pid, a.priority)).collect();
        assert_eq!(
            added,
            [
                (10, Priority::LATENCY_CRITICAL),
                (20, Priority::BEST_EFFORT)
            ]
        );
        assert!(r.gone.is_empty());
        // Nothing new on the second scan.
        assert_eq!(d.scan_listed(&c, &list), ScanResult::default());
        // 20 exits but is still listed (raced): gone, not an error.
        p.remove(20);
        let r = d.scan_listed(&c, &list);
        assert_eq!((r.added.len(), r.gone.as_slice()), (0, &[20][..]));
        // 10 is reused by another process: gone and added.
        p.add(10, 999, 1000, "be", "/bin/be", "/", &[]);
        let r = d.scan_listed(&c, &[(10, TargetKind::KfdFd)]);
        assert_eq!(r.gone, [10]);
        assert_eq!(r.added[0].info.start_time, 999);
        assert_eq!(r.added[0].priority, Priority::BEST_EFFORT);
        // 10 is left out of one listing while it lives (its descriptors
        // could not be read then): kept.
        assert_eq!(d.scan_listed(&c, &[]), ScanResult::default());
        // Listed again: nothing new, and the miss is forgotten.
        let listed_10 = [(10, TargetKind::KfdFd)];
        assert_eq!(d.scan_listed(&c, &listed_10), ScanResult::default());
        assert_eq!(d.scan_listed(&c, &[]), ScanResult::default());
        // Listed again after a miss as another program (it ran exec, which
        // closed its KFD file, and the new one opened its own): read and
        // classified afresh.
        p.add(10, 999, 0, "lc", "/bin/lc", "/", &[]);
        let r = d.scan_listed(&c, &listed_10);
        assert_eq!(r.gone, [10]);
        assert_eq!(r.added[0].priority, Priority::LATENCY_CRITICAL);
        assert_eq!(d.scan_listed(&c, &[]), ScanResult::default());
        // 10 closed its KFD file: the second listing in a row without it
        // calls it gone.
        let r = d.scan_listed(&c, &[]);
        assert_eq!((r.added.len(), r.gone.as_slice()), (0, &[10][..]));
        // A process that exited is gone at the first listing without it.
        p.add(30, 300, 0, "lc", "/bin/lc", "/", &[]);
        d.scan_listed(&c, &[(30, TargetKind::KfdFd)]);
        p.remove(30);
        assert_eq!(d.scan_listed(&c, &[]).gone, [30]);
    }

    #[test]
    fn a_process_that_vanished_before_it_was_read_is_skipped() {
        let p = FakeProc::new("vanish");
        let c = cfg("[[class]]\nname = \"i\"\npriority = \"latency-critical\"\nuid = 0\n");
        let mut d = Discovery::new(p.root.clone());
        let r = d.scan_listed(&c, &[(77, TargetKind::KfdFd)]);
        assert_eq!(r, ScanResult::default());
    }

    #[test]
    fn tenant_kinds_filter_the_list() {
        let p = FakeProc::new("kinds");
        p.add(10, 1, 0, "k", "/bin/k", "/", &[]);
        p.add(11, 1, 0, "s", "/bin/s", "/", &[]);
        let list = [(10, TargetKind::KfdFd), (11, TargetKind::SimFd)];
        for (tenants, expect) in [("kfd", vec![10]), ("sim", vec![11]), ("both", vec![10, 11])] {
            let c = cfg(&format!(
                "[daemon]\ntenants = \"{tenants}\"\n[[class]]\nname = \"i\"\npriority = \"latency-critical\"\nuid = 0\n"
            ));
            let mut d = Discovery::new(p.root.clone());
            let pids: Vec<_> = d
                .scan_listed(&c, &list)
                .added
                .iter()
                .map(|a| a.info.pid)
                .collect();
            assert_eq!(pids, expect, "tenants = {tenants}");
        }
    }

    /// A child that lives until killed, for the pidfd tests: their fake
    /// `/proc` entries carry real pids, which the pidfds name.
    struct Child(std::process::Child);

    impl Child {
        fn spawn() -> Self {
            Child(
                std::process::Command::new("sleep")
                    .arg("60")
                    .spawn()
                    .unwrap(),
            )
        }
        fn pid(&self) -> i32 {
            self.0.id() as i32
        }
        /// Exited, but not waited for: a zombie.
        fn kill(&mut self) {
            self.0.kill().unwrap();
            let pid = self.pid();
            // Until the kernel has made it a zombie ('Z' in its stat).
            while !std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .unwrap()
                .contains(") Z ")
            {
                std::thread::yield_now();
            }
        }
        fn kill_and_reap(&mut self) {
            self.0.kill().unwrap();
            self.0.wait().unwrap();
        }
    }

    impl Drop for Child {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }

    /// Whether this system opens pidfds (Linux 5.3, and no seccomp filter
    /// refusing it): the tests that need them pass vacuously otherwise,
    /// and say so.
    fn pidfds_open_here() -> bool {
        let me = Pid::from_raw(std::process::id() as i32).unwrap();
        let ok = pidfd_open(me, PidfdFlags::empty()).is_ok();
        if !ok {
            eprintln!("no pidfd_open here: the pidfd test checks nothing");
        }
        ok
    }

    fn lc_uid0() -> Config {
        cfg("[[class]]\nname = \"i\"\npriority = \"latency-critical\"\nuid = 0\n")
    }

    /// A child under its real pid in a fake `/proc`, seen by a first scan.
    struct Seen {
        p: FakeProc,
        child: Child,
        pid: i32,
        c: Config,
        d: Discovery,
        list: [(i32, TargetKind); 1],
    }

    impl Seen {
        fn new(name: &str, pidfds: bool) -> Self {
            let p = FakeProc::new(name);
            let child = Child::spawn();
            let pid = child.pid();
            p.add(pid, 5, 0, "t", "/bin/t", "/", &[]);
            let c = lc_uid0();
            let d = Discovery::new(p.root.clone());
            let mut d = if pidfds { d.with_pidfds() } else { d };
            let list = [(pid, TargetKind::KfdFd)];
            assert_eq!(d.scan_listed(&c, &list).added.len(), 1);
            Seen {
                p,
                child,
                pid,
                c,
                d,
                list,
            }
        }
        fn scan(&mut self) -> ScanResult {
            self.d.scan_listed(&self.c, &self.list)
        }
    }

    #[test]
    fn a_live_process_is_confirmed_by_its_pidfd_without_reading_proc() {
        if !pidfds_open_here() {
            return;
        }
        let mut t = Seen::new("pidfd-live", true);
        // Its /proc entry is not read again: a scan that needed it would
        // find it missing and report the process gone.
        t.p.remove(t.pid);
        assert_eq!(t.scan(), ScanResult::default());
    }

    #[test]
    fn an_exit_is_seen_by_the_pidfd_even_where_proc_is_unchanged() {
        if !pidfds_open_here() {
            return;
        }
        let mut t = Seen::new("pidfd-exit", true);
        // The fake entry keeps its start time, as a reused pid could: the
        // start-time comparison alone would call it the same process.
        t.child.kill_and_reap();
        let r = t.scan();
        assert_eq!(r.gone, [t.pid]);
        // The pid names no process now, so nothing is read or added.
        assert!(r.added.is_empty());
        assert_eq!(t.scan(), ScanResult::default());
    }

    #[test]
    fn without_pidfds_known_processes_are_compared_by_start_time() {
        let mut t = Seen::new("pidfd-none", false);
        t.p.remove(t.pid);
        assert_eq!(t.scan().gone, [t.pid]);
    }

    #[test]
    fn a_zombie_is_gone_and_not_read_again() {
        if !pidfds_open_here() {
            return;
        }
        let mut t = Seen::new("pidfd-zombie", true);
        // Exited, not yet waited for: its pid still names it, and a listing
        // taken before its exit still has it.
        t.child.kill();
        let r = t.scan();
        assert_eq!((r.gone.as_slice(), r.added.len()), (&[t.pid][..], 0));
        assert_eq!(t.scan(), ScanResult::default());
    }

    #[test]
    fn beyond_the_pidfd_budget_processes_are_compared_by_start_time() {
        if !pidfds_open_here() {
            return;
        }
        let p = FakeProc::new("pidfd-budget");
        let (first, second) = (Child::spawn(), Child::spawn());
        for child in [&first, &second] {
            p.add(child.pid(), 5, 0, "t", "/bin/t", "/", &[]);
        }
        let c = lc_uid0();
        let mut d = Discovery::new(p.root.clone())
            .with_pidfds()
            .with_max_pidfds(1);
        let list = [
            (first.pid(), TargetKind::KfdFd),
            (second.pid(), TargetKind::KfdFd),
        ];
        assert_eq!(d.scan_listed(&c, &list).added.len(), 2);
        // Only the first holds a pidfd: without /proc, the second is gone.
        p.remove(first.pid());
        p.remove(second.pid());
        assert_eq!(d.scan_listed(&c, &list).gone, [second.pid()]);
    }
}
