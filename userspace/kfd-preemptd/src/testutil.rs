//! Helpers shared by the unit tests.

use std::{fs, os::unix::fs::symlink, path::PathBuf};

use crate::discover::{read_proc, ProcInfo};

/// A fake `/proc` under the test's temporary directory.
pub struct FakeProc {
    /// The fake `/proc`.
    pub root: PathBuf,
}

impl FakeProc {
    /// An empty fake `/proc` named after the test.
    pub fn new(name: &str) -> Self {
        let root =
            std::env::temp_dir().join(format!("kfd-preemptd-proc-{}-{name}", std::process::id()));
        let _ = fs::remove_dir_all(&root);
        fs::create_dir_all(&root).unwrap();
        FakeProc { root }
    }

    #[allow(clippy::too_many_arguments)]
    /// Adds a process.
    pub fn add(
        &self,
        pid: i32,
        start: u64,
        uid: u32,
        comm: &str,
        exe: &str,
        cgroup: &str,
        env: &[&str],
    ) {
        let d = self.root.join(pid.to_string());
        let _ = fs::remove_dir_all(&d);
        fs::create_dir_all(&d).unwrap();
        let stat = format!(
            "{pid} ({comm}) S 1 {pid} {pid} 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 {start} \
             1000 10 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0 0 0 0 0 0 0 0 0"
        );
        fs::write(d.join("stat"), stat).unwrap();
        fs::write(
            d.join("status"),
            format!(
                "Name:\t{comm}\nState:\tS (sleeping)\nTgid:\t{pid}\nPid:\t{pid}\nPPid:\t1\n\
                 TracerPid:\t0\nUid:\t{uid}\t{uid}\t{uid}\t{uid}\nGid:\t0\t0\t0\t0\n\
                 FDSize:\t64\nGroups:\t\nThreads:\t1\nSigQ:\t0/127431\n\
                 SigPnd:\t0000000000000000\nShdPnd:\t0000000000000000\n\
                 SigBlk:\t0000000000000000\nSigIgn:\t0000000000000000\n\
                 SigCgt:\t0000000000000000\nCapInh:\t0000000000000000\n\
                 CapPrm:\t0000000000000000\nCapEff:\t0000000000000000\n"
            ),
        )
        .unwrap();
        fs::write(d.join("comm"), format!("{comm}\n")).unwrap();
        symlink(exe, d.join("exe")).unwrap();
        fs::write(d.join("cgroup"), format!("0::{cgroup}\n")).unwrap();
        let mut environ = Vec::new();
        for v in env {
            environ.extend_from_slice(v.as_bytes());
            environ.push(0);
        }
        fs::write(d.join("environ"), environ).unwrap();
    }

    /// Removes a process (it exited).
    pub fn remove(&self, pid: i32) {
        fs::remove_dir_all(self.root.join(pid.to_string())).unwrap();
    }

    /// Reads a process back with every field.
    pub fn info(&self, pid: i32) -> ProcInfo {
        read_proc(&self.root, pid, true, true).unwrap().unwrap()
    }
}

impl Drop for FakeProc {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.root);
    }
}

/// A directory of the test's own, removed when dropped.
pub struct TempDir(PathBuf);

impl TempDir {
    /// An empty directory named after the test.
    pub fn new(name: &str) -> Self {
        let p = std::env::temp_dir().join(format!("kfd-preemptd-{}-{name}", std::process::id()));
        let _ = fs::remove_dir_all(&p);
        fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }

    /// Its path.
    pub fn path(&self) -> &std::path::Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}
