//! `kfd-preempt doctor`: whether this host can run kfd_preempt, one line
//! per check, each failing or doubtful one with what to do
//! (Documentation/admin-guide.rst, "Is this host ready?").
//!
//! Every check reads the host through [`Host`], whose root and command
//! runner the tests replace; nothing here changes the host.

use kfd_preemptd_stats::Stats;
use std::collections::HashMap;
use std::fmt::Write as _;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::process::Command;

use serde::Serialize;

/// Group the package's udev rule gives `/dev/kfd_preempt`.
const GROUP: &str = "gpusched";
/// The EFI variable that says whether Secure Boot is on.
const SECURE_BOOT_VAR: &str =
    "sys/firmware/efi/efivars/SecureBoot-8be4df61-93ca-11d2-aa0d-00e098032b8c";

/// How a check came out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Status {
    /// Fine.
    Ok,
    /// Works, but something an operator should know or do.
    Warn,
    /// kfd_preempt cannot run until this is fixed.
    Fail,
    /// Could not be checked here (the reason says why).
    Skip,
}

/// One check's result.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Check {
    pub(crate) name: &'static str,
    pub(crate) status: Status,
    pub(crate) detail: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) fix: Option<String>,
}

fn check(name: &'static str, status: Status, detail: impl Into<String>) -> Check {
    Check {
        name,
        status,
        detail: detail.into(),
        fix: None,
    }
}

impl Check {
    fn fix(mut self, fix: impl Into<String>) -> Check {
        self.fix = Some(fix.into());
        self
    }
}

/// A command's outcome: whether it succeeded, its stdout and stderr.
pub(crate) struct Ran {
    pub(crate) ok: bool,
    pub(crate) stdout: String,
    pub(crate) stderr: String,
}

/// Runs a program with arguments; `None` if it cannot be started.
pub(crate) type Runner = Box<dyn Fn(&str, &[&str]) -> Option<Ran>>;

/// The host as the checks see it.
pub(crate) struct Host {
    /// Prefix of every path read ("/" on a real host).
    pub(crate) root: PathBuf,
    pub(crate) run: Runner,
    /// The caller's uid and groups (for the device's group).
    pub(crate) uid: u32,
    pub(crate) groups: Vec<u32>,
}

impl Host {
    /// This machine, as the calling user.
    pub(crate) fn real() -> Host {
        let groups = rustix::process::getgroups().unwrap_or_default();
        let mut groups: Vec<u32> = groups.into_iter().map(|g| g.as_raw()).collect();
        groups.push(rustix::process::getegid().as_raw());
        Host {
            root: PathBuf::from("/"),
            run: Box::new(|prog, args| {
                let out = Command::new(prog).args(args).output().ok()?;
                Some(Ran {
                    ok: out.status.success(),
                    stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
                    stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
                })
            }),
            uid: rustix::process::geteuid().as_raw(),
            groups,
        }
    }

    fn path(&self, p: &str) -> PathBuf {
        self.root.join(p.trim_start_matches('/'))
    }

    fn read(&self, p: &str) -> Option<String> {
        std::fs::read_to_string(self.path(p)).ok()
    }

    fn exists(&self, p: &str) -> bool {
        self.path(p).exists()
    }

    /// The first file matching `dir/prefix*suffix`, by name.
    fn glob(&self, dir: &str, prefix: &str, suffix: &str) -> Option<PathBuf> {
        let mut names: Vec<PathBuf> = std::fs::read_dir(self.path(dir))
            .ok()?
            .filter_map(|e| e.ok())
            .map(|e| e.path())
            .filter(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with(prefix) && n.ends_with(suffix))
            })
            .collect();
        // kfd_preempt-0.10.0 after kfd_preempt-0.9.0: numbers compare as
        // numbers.
        let key = |p: &PathBuf| -> Vec<u64> {
            p.to_string_lossy()
                .split(|c: char| !c.is_ascii_digit())
                .filter_map(|n| n.parse().ok())
                .collect()
        };
        names.sort_by_key(key);
        names.pop()
    }
}

/// `CONFIG_X` to its value, from a kernel `.config`.
fn parse_config(text: &str) -> HashMap<&str, &str> {
    text.lines()
        .filter_map(|l| l.split_once('='))
        .filter(|(k, _)| k.starts_with("CONFIG_"))
        .map(|(k, v)| (k, v.trim_matches('"')))
        .collect()
}

/// Major and minor of a release such as `7.3.4+deb13-amd64`.
fn version(release: &str) -> Option<(u32, u32)> {
    let mut it = release.split(|c: char| !c.is_ascii_digit());
    Some((it.next()?.parse().ok()?, it.next()?.parse().ok()?))
}

/// Runs every check.
pub(crate) fn run_checks(h: &Host) -> Vec<Check> {
    let kver = h
        .read("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_default();
    let build = format!("/lib/modules/{kver}/build");
    let config_text = h
        .read(&format!("/boot/config-{kver}"))
        .or_else(|| h.read(&format!("{build}/.config")));
    let config = config_text.as_deref().map(parse_config);
    let module_loaded = h.exists("/sys/module/kfd_preempt");
    vec![
        kernel(&kver),
        kernel_config(&kver, config.as_ref()),
        headers(h, &kver, &build),
        toolchain(h, &kver, &build),
        rust_metadata(h, &kver, &build),
        dkms(h, &kver),
        amdgpu(h, &kver),
        layout(h, module_loaded),
        module(h, module_loaded),
        device(h, module_loaded),
        secure_boot(h, module_loaded),
        daemon(h),
    ]
}

fn kernel(kver: &str) -> Check {
    match version(kver) {
        Some(v) if v >= (7, 2) => check("kernel", Status::Ok, format!("Linux {kver}")),
        Some(_) => check(
            "kernel",
            Status::Fail,
            format!("Linux {kver}: kfd_preempt needs 7.2 or later"),
        )
        .fix("boot a 7.2 or later kernel with Rust (Debian 13: apt install -t trixie-backports linux-image-amd64)"),
        None => check("kernel", Status::Fail, format!("unknown kernel release '{kver}'")),
    }
}

fn kernel_config(kver: &str, config: Option<&HashMap<&str, &str>>) -> Check {
    let Some(config) = config else {
        return check(
            "config",
            Status::Fail,
            format!(
                "no configuration of Linux {kver} (/boot/config-{kver}, or the headers' .config)"
            ),
        )
        .fix(format!("apt install linux-headers-{kver}"));
    };
    let on = |k: &str| config.get(k).is_some_and(|v| *v == "y" || *v == "m");
    match (on("CONFIG_RUST"), on("CONFIG_HSA_AMD")) {
        (true, true) => check("config", Status::Ok, "CONFIG_RUST=y, CONFIG_HSA_AMD=y"),
        (false, _) => check(
            "config",
            Status::Fail,
            "CONFIG_RUST is off: this kernel cannot load a Rust module",
        )
        .fix("boot a kernel built with CONFIG_RUST=y (Debian 13 backports 7.2 or 7.3)"),
        (true, false) => check(
            "config",
            Status::Fail,
            "CONFIG_HSA_AMD is off: amdgpu has no KFD, so no queues to preempt",
        )
        .fix("boot a kernel built with CONFIG_HSA_AMD=y"),
    }
}

fn headers(h: &Host, kver: &str, build: &str) -> Check {
    if h.exists(&format!("{build}/Makefile")) {
        check("headers", Status::Ok, build.to_string())
    } else {
        check(
            "headers",
            Status::Fail,
            format!("no build tree for Linux {kver} ({build})"),
        )
        .fix(format!("apt install linux-headers-{kver}"))
    }
}

/// The DKMS source tree's copy of `scripts/kernel-toolchain.sh`, which is
/// what the build uses: the same check, not a second one.
fn toolchain(h: &Host, kver: &str, build: &str) -> Check {
    let Some(src) = h.glob("/usr/src", "kfd_preempt-", "") else {
        return check(
            "compilers",
            Status::Skip,
            "kfd-preempt-dkms is not installed (its build step checks the compilers)",
        )
        .fix("apt install kfd-preempt-dkms");
    };
    if !h.exists(&format!("{build}/.config")) {
        return check(
            "compilers",
            Status::Skip,
            format!("no build tree for Linux {kver} to read the compilers from"),
        );
    }
    let script = src.join("scripts/kernel-toolchain.sh");
    let kdir = h.path(build);
    let args = [script.to_string_lossy(), kdir.to_string_lossy()];
    let args: Vec<&str> = args.iter().map(|a| a.as_ref()).collect();
    match (h.run)("sh", &args) {
        Some(r) if r.ok => check(
            "compilers",
            Status::Ok,
            format!(
                "the kernel's own are installed: {}",
                r.stdout.split_whitespace().collect::<Vec<_>>().join(" ")
            ),
        ),
        Some(r) => {
            let why = r.stderr.trim().trim_start_matches("kfd_preempt: ");
            let fix = why
                .find("Install ")
                .or_else(|| why.find("install "))
                .map(|i| why[i..].to_string());
            let c = check("compilers", Status::Fail, why.to_string());
            match fix {
                Some(f) => c.fix(f),
                None => c,
            }
        }
        None => check("compilers", Status::Skip, "sh could not be run"),
    }
}

fn rust_metadata(h: &Host, kver: &str, build: &str) -> Check {
    let name = "rust-metadata";
    if h.exists(&format!("{build}/rust/libkernel.rmeta")) {
        return check(name, Status::Ok, "the headers carry it");
    }
    let cached = format!("/var/cache/kfd-preempt/kernels/{kver}/rust/libkernel.rmeta");
    if h.exists(&cached) {
        return check(
            name,
            Status::Ok,
            format!("prepared from the kernel's source ({cached})"),
        );
    }
    let Some((major, minor)) = version(kver) else {
        return check(name, Status::Fail, "unknown kernel release");
    };
    let tarball = format!("/usr/src/linux-source-{major}.{minor}.tar.xz");
    if h.exists(&tarball) {
        check(
            name,
            Status::Ok,
            format!("not built yet: DKMS prepares it from {tarball} (a few minutes, once)"),
        )
    } else {
        check(
            name,
            Status::Fail,
            "the headers carry no Rust metadata and the kernel's source is not installed",
        )
        .fix(format!(
            "apt install linux-source-{major}.{minor} (Debian), or linux-lib-rust-{kver} (Ubuntu)"
        ))
    }
}

fn dkms(h: &Host, kver: &str) -> Check {
    match (h.run)("dkms", &["status", "-k", kver, "kfd_preempt"]) {
        None => check("dkms", Status::Skip, "dkms is not installed"),
        Some(r) if r.stdout.contains(": installed") => check(
            "dkms",
            Status::Ok,
            r.stdout.lines().next().unwrap_or_default().trim().to_string(),
        ),
        Some(r) if r.stdout.trim().is_empty() => {
            check("dkms", Status::Skip, "kfd_preempt is not a DKMS module here")
        }
        Some(r) => check(
            "dkms",
            Status::Fail,
            format!("kfd_preempt is not installed for {kver}: {}", r.stdout.trim()),
        )
        .fix(format!(
            "dkms install kfd_preempt/<version> -k {kver}; its log is /var/lib/dkms/kfd_preempt/<version>/build/make.log"
        )),
    }
}

fn amdgpu(h: &Host, kver: &str) -> Check {
    if !h.exists("/sys/module/amdgpu") {
        return check("amdgpu", Status::Warn, "amdgpu is not loaded")
            .fix("modprobe amdgpu (modprobe kfd_preempt loads it first)");
    }
    let path = (h.run)("modinfo", &["-k", kver, "-n", "amdgpu"])
        .filter(|r| r.ok)
        .map(|r| r.stdout.trim().to_string())
        .unwrap_or_default();
    if path.contains("/updates/") || path.contains("/extra/") {
        check(
            "amdgpu",
            Status::Warn,
            format!("loaded, out of tree ({path}: ROCm's amdgpu-dkms?)"),
        )
        .fix("kfd_preempt must be built as that amdgpu's amdkfd was: DKMS's build step does it from /usr/src/amdgpu-<version> when amdgpu-dkms was installed first (dkms install kfd_preempt/<version> -k $(uname -r) --force; Documentation/building.rst, \"ROCm's amdgpu-dkms\"); the layout check below says whether it matches")
    } else if path.is_empty() {
        check("amdgpu", Status::Ok, "loaded")
    } else {
        check(
            "amdgpu",
            Status::Ok,
            format!("loaded, the kernel's own ({path})"),
        )
    }
}

fn layout(h: &Host, module_loaded: bool) -> Check {
    let btf = h.exists("/sys/kernel/btf/amdgpu");
    if !module_loaded {
        return if btf {
            check(
                "layout",
                Status::Skip,
                "amdgpu has BTF: kfd_preempt compares its fields with it when it loads",
            )
        } else {
            check(
                "layout",
                Status::Warn,
                "no /sys/kernel/btf/amdgpu: kfd_preempt's layout gate will have nothing to compare with",
            )
        };
    }
    match h.read("/sys/kernel/debug/kfd_preempt/layout") {
        None => check(
            "layout",
            Status::Skip,
            "cannot read /sys/kernel/debug/kfd_preempt/layout (run as root, with debugfs mounted)",
        ),
        Some(v) => {
            let v = v.trim();
            if let Some(n) = v.strip_prefix("matches ") {
                check(
                    "layout",
                    Status::Ok,
                    format!("{n} amdkfd fields match amdgpu's BTF"),
                )
            } else if v == "refused" {
                check(
                    "layout",
                    Status::Fail,
                    "the running amdgpu lays out amdkfd's fields otherwise than kfd_preempt was built for: ATTACH is refused (dmesg names the field)",
                )
                .fix("rebuild kfd_preempt against the running amdgpu's source (dkms install --force), then reload it")
            } else {
                check(
                    "layout",
                    Status::Warn,
                    format!("not checked ({v}): the build-time checks stand alone"),
                )
            }
        }
    }
}

fn module(h: &Host, loaded: bool) -> Check {
    if !loaded {
        return check("module", Status::Fail, "kfd_preempt is not loaded")
            .fix("modprobe kfd_preempt (dmesg says why, if it refuses)");
    }
    let version = h
        .read("/sys/module/kfd_preempt/version")
        .map(|v| format!(" {}", v.trim()))
        .unwrap_or_default();
    let mut params: Vec<String> = std::fs::read_dir(h.path("/sys/module/kfd_preempt/parameters"))
        .map(|d| {
            d.filter_map(|e| e.ok())
                .filter_map(|e| {
                    let name = e.file_name().to_string_lossy().into_owned();
                    let v = std::fs::read_to_string(e.path()).ok()?;
                    Some(format!("{name}={}", v.trim()))
                })
                .collect()
        })
        .unwrap_or_default();
    params.sort();
    check(
        "module",
        Status::Ok,
        format!("kfd_preempt{version} loaded; {}", params.join(" ")),
    )
}

/// The gid of `name` in `/etc/group`.
fn group_id(h: &Host, name: &str) -> Option<u32> {
    h.read("/etc/group")?.lines().find_map(|l| {
        let mut f = l.split(':');
        (f.next()? == name).then_some(())?;
        f.nth(1)?.parse().ok()
    })
}

fn device(h: &Host, module_loaded: bool) -> Check {
    let path = h.path("/dev/kfd_preempt");
    let meta = match std::fs::metadata(&path) {
        Ok(m) => m,
        Err(_) if !module_loaded => {
            return check(
                "device",
                Status::Skip,
                "no /dev/kfd_preempt: the module is not loaded",
            )
        }
        Err(e) => return check("device", Status::Fail, format!("/dev/kfd_preempt: {e}")),
    };
    let mode = meta.mode() & 0o777;
    let gid = group_id(h, GROUP);
    if mode != 0o660 || gid != Some(meta.gid()) {
        let group = match gid {
            Some(_) => String::new(),
            None => format!(" (there is no group {GROUP})"),
        };
        return check(
            "device",
            Status::Fail,
            format!(
                "/dev/kfd_preempt is mode {mode:o}, gid {}: not 660 root:{GROUP}{group}",
                meta.gid()
            ),
        )
        .fix(match gid {
            Some(_) => "udevadm trigger --name-match=kfd_preempt (the package's rule, /usr/lib/udev/rules.d/70-kfd-preempt.rules, sets it)".to_string(),
            None => format!("groupadd --system {GROUP} (kfd-preempt-dkms's postinst does), then udevadm trigger --name-match=kfd_preempt"),
        });
    }
    let Some(gid) = gid else {
        return check("device", Status::Fail, format!("no group {GROUP}"));
    };
    if h.uid != 0 && !h.groups.contains(&gid) {
        return check(
            "device",
            Status::Warn,
            format!("660 root:{GROUP}, and you are not in {GROUP}"),
        )
        .fix(format!("usermod -aG {GROUP} <the scheduler's user>"));
    }
    check("device", Status::Ok, format!("660 root:{GROUP}"))
}

fn secure_boot(h: &Host, module_loaded: bool) -> Check {
    // The variable's 4 attribute bytes, then 1 when Secure Boot is on.
    let sb_on = std::fs::read(h.path(SECURE_BOOT_VAR))
        .ok()
        .and_then(|b| b.last().copied())
        == Some(1);
    let lockdown = h
        .read("/sys/kernel/security/lockdown")
        .and_then(|l| {
            let start = l.find('[')?;
            let end = l[start..].find(']')?;
            Some(l[start + 1..start + end].to_string())
        })
        .unwrap_or_else(|| "none".into());
    if !sb_on && lockdown == "none" {
        return check(
            "secure-boot",
            Status::Ok,
            "Secure Boot off, lockdown none: module signatures are not enforced",
        );
    }
    let state = format!(
        "Secure Boot {}, lockdown {lockdown}",
        if sb_on { "on" } else { "off" }
    );
    if module_loaded {
        // Loaded under enforcement: the kernel accepted its signature.
        let unsigned = h
            .read("/sys/module/kfd_preempt/taint")
            .is_some_and(|t| t.contains('E'));
        return if unsigned {
            check(
                "secure-boot",
                Status::Warn,
                format!("{state}, and the loaded kfd_preempt is unsigned (taint E)"),
            )
            .fix("have DKMS sign it (its mok_signing_key) and enrol the key: mokutil --import /var/lib/dkms/mok.pub")
        } else {
            check(
                "secure-boot",
                Status::Ok,
                format!("{state}: kfd_preempt is loaded, its signature accepted"),
            )
        };
    }
    let signer = (h.run)("modinfo", &["-F", "signer", "kfd_preempt"])
        .filter(|r| r.ok)
        .map(|r| r.stdout.trim().to_string())
        .unwrap_or_default();
    if !signer.is_empty() {
        return check(
            "secure-boot",
            Status::Warn,
            format!("{state}: kfd_preempt is signed by {signer}"),
        )
        .fix("if modprobe says 'Key was rejected', enrol DKMS's key: mokutil --import /var/lib/dkms/mok.pub, then reboot");
    }
    check(
        "secure-boot",
        Status::Fail,
        format!("{state}, and kfd_preempt is not signed: the kernel will not load it"),
    )
    .fix("have DKMS sign it (its mok_signing_key) and enrol the key: mokutil --import /var/lib/dkms/mok.pub, reboot, then dkms install --force")
}

fn daemon(h: &Host) -> Check {
    let path = crate::daemon::DEFAULT_STATS;
    let Some(text) = h.read(path) else {
        return check("daemon", Status::Warn, "kfd-preemptd is not running")
            .fix("write /etc/kfd-preemptd.toml (its [[class]] tables), then systemctl enable --now kfd-preemptd");
    };
    let stats = match Stats::from_json(&text) {
        Ok(s) => s,
        Err(e) => {
            return check(
                "daemon",
                Status::Warn,
                format!("{path} is not kfd-preemptd's statistics ({e})"),
            )
            .fix("systemctl restart kfd-preemptd; kfd-preempt daemon --json shows the file")
        }
    };
    let pid = Some(stats.pid).filter(|p| *p > 0);
    let alive = pid.is_some_and(|p| h.exists(&format!("/proc/{p}")));
    let mode = stats.mode.as_str();
    // One decision per node and watched level: say how many hold queues.
    let decisions = if stats.decisions.is_empty() {
        String::new()
    } else {
        let holding = stats.decisions.iter().filter(|d| d.held).count();
        format!(
            ", {} decision(s) on its nodes, {holding} holding queues",
            stats.decisions.len()
        )
    };
    match (pid, alive) {
        (Some(p), true) => check(
            "daemon",
            Status::Ok,
            format!("kfd-preemptd (pid {p}) is running, mode {mode}{decisions}"),
        ),
        _ => check(
            "daemon",
            Status::Warn,
            format!("{path} is left over, but kfd-preemptd is not running"),
        )
        .fix("systemctl restart kfd-preemptd; journalctl -u kfd-preemptd says why it stopped"),
    }
}

/// The report as printed: one line per check, its fix under it, and the
/// conclusion.
pub(crate) fn render(checks: &[Check]) -> String {
    let mut out = String::new();
    for c in checks {
        let tag = match c.status {
            Status::Ok => "ok  ",
            Status::Warn => "warn",
            Status::Fail => "FAIL",
            Status::Skip => "skip",
        };
        let _ = writeln!(out, "{tag} {:<14} {}", c.name, c.detail);
        if let Some(fix) = &c.fix {
            if c.status != Status::Ok {
                let _ = writeln!(out, "     {:<14} fix: {fix}", "");
            }
        }
    }
    let failed = checks.iter().filter(|c| c.status == Status::Fail).count();
    if failed == 0 {
        out.push_str("ready: kfd_preempt can run on this host\n");
    } else {
        let _ = writeln!(out, "not ready: {failed} check(s) failed");
    }
    out
}

/// Whether no check failed.
pub(crate) fn ready(checks: &[Check]) -> bool {
    checks.iter().all(|c| c.status != Status::Fail)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    /// A fake host tree: a Debian 13 system with the module loaded and
    /// everything in order; the tests break one thing each.
    struct Fake {
        dir: PathBuf,
    }

    impl Fake {
        fn new(tag: &str) -> Fake {
            let dir =
                std::env::temp_dir().join(format!("kfdp-doctor-{}-{tag}", std::process::id()));
            let _ = fs::remove_dir_all(&dir);
            let f = Fake { dir };
            f.write("proc/sys/kernel/osrelease", "7.3.4+deb13-amd64\n");
            f.write(
                "boot/config-7.3.4+deb13-amd64",
                "CONFIG_RUST=y\nCONFIG_HSA_AMD=y\nCONFIG_CC_IS_GCC=y\n",
            );
            f.write("lib/modules/7.3.4+deb13-amd64/build/Makefile", "");
            f.write(
                "lib/modules/7.3.4+deb13-amd64/build/.config",
                "CONFIG_RUST=y\n",
            );
            f.write("usr/src/kfd_preempt-0.1.0/scripts/kernel-toolchain.sh", "");
            f.write(
                "var/cache/kfd-preempt/kernels/7.3.4+deb13-amd64/rust/libkernel.rmeta",
                "",
            );
            f.write("sys/module/amdgpu/refcnt", "1\n");
            f.write("sys/kernel/btf/amdgpu", "");
            f.write("sys/module/kfd_preempt/parameters/sim_nodes", "0\n");
            f.write("sys/kernel/debug/kfd_preempt/layout", "matches 66\n");
            f.write("dev/kfd_preempt", "");
            fs::set_permissions(
                f.dir.join("dev/kfd_preempt"),
                std::os::unix::fs::PermissionsExt::from_mode(0o660),
            )
            .unwrap();
            // gpusched is whichever group the file was created with.
            let gid = fs::metadata(f.dir.join("dev/kfd_preempt")).unwrap().gid();
            f.write("etc/group", &format!("root:x:0:\n{GROUP}:x:{gid}:\n"));
            f.write(
                "sys/kernel/security/lockdown",
                "[none] integrity confidentiality\n",
            );
            f.write(
                "run/kfd-preemptd/stats.json",
                &format!("{{\"pid\": {}, \"mode\": \"lc-busy\"}}", std::process::id()),
            );
            f.write(&format!("proc/{}/status", std::process::id()), "");
            f
        }

        fn write(&self, p: &str, text: &str) {
            let p = self.dir.join(p);
            fs::create_dir_all(p.parent().unwrap()).unwrap();
            fs::write(p, text).unwrap();
        }

        fn remove(&self, p: &str) {
            let p = self.dir.join(p);
            let _ = fs::remove_file(&p).or_else(|_| fs::remove_dir_all(&p));
        }

        /// The host, with commands answered as on a good Debian host,
        /// except those `broken` names.
        fn host(&self, broken: &'static [&'static str]) -> Host {
            Host {
                root: self.dir.clone(),
                run: Box::new(move |prog, args| {
                    let ok = |s: &str| Ran {
                        ok: true,
                        stdout: s.into(),
                        stderr: String::new(),
                    };
                    if broken.contains(&prog) {
                        return Some(Ran {
                            ok: false,
                            stdout: String::new(),
                            stderr: "kfd_preempt: Linux 7.3.4+deb13-amd64 was built with 'rustc 1.85.1' ...; found: rustc is 'rustc 1.96.0'. Install rustc 1.85.1 (Debian 13: package rustc)\n".into(),
                        });
                    }
                    Some(match (prog, args.first().copied()) {
                        ("sh", _) => ok("CC=x86_64-linux-gnu-gcc-14\nRUSTC=rustc\n"),
                        ("dkms", _) => ok("kfd_preempt/0.1.0, 7.3.4+deb13-amd64, x86_64: installed\n"),
                        ("modinfo", Some("-k")) => ok("/lib/modules/7.3.4+deb13-amd64/kernel/drivers/gpu/drm/amd/amdgpu/amdgpu.ko.xz\n"),
                        ("modinfo", _) => ok(""),
                        _ => return None,
                    })
                }),
                uid: 0,
                groups: vec![],
            }
        }

        fn status(&self, broken: &'static [&'static str], name: &str) -> (Status, Option<String>) {
            let checks = run_checks(&self.host(broken));
            let c = checks.iter().find(|c| c.name == name).unwrap();
            (c.status, c.fix.clone())
        }
    }

    impl Drop for Fake {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.dir);
        }
    }

    #[test]
    fn a_good_host_is_ready() {
        let f = Fake::new("good");
        let checks = run_checks(&f.host(&[]));
        let text = render(&checks);
        assert!(ready(&checks), "{text}");
        assert!(checks.iter().all(|c| c.status == Status::Ok), "{text}");
        assert!(text.contains("66 amdkfd fields match"), "{text}");
        assert!(
            text.ends_with("ready: kfd_preempt can run on this host\n"),
            "{text}"
        );
        let json = serde_json::to_value(&checks).unwrap();
        assert_eq!(json[0]["name"], "kernel");
        assert_eq!(json[0]["status"], "ok");
    }

    #[test]
    fn each_broken_thing_fails_its_own_check_with_a_fix() {
        let f = Fake::new("broken");
        let (s, fix) = f.status(&["sh"], "compilers");
        assert_eq!(s, Status::Fail);
        assert_eq!(
            fix.as_deref(),
            Some("Install rustc 1.85.1 (Debian 13: package rustc)")
        );

        f.write("sys/kernel/debug/kfd_preempt/layout", "refused\n");
        assert_eq!(f.status(&[], "layout").0, Status::Fail);
        f.write("sys/kernel/debug/kfd_preempt/layout", "unchecked ENOENT\n");
        assert_eq!(f.status(&[], "layout").0, Status::Warn);

        fs::set_permissions(
            f.dir.join("dev/kfd_preempt"),
            std::os::unix::fs::PermissionsExt::from_mode(0o666),
        )
        .unwrap();
        assert_eq!(f.status(&[], "device").0, Status::Fail);
        // Without the group (the test VM has no /etc/group) the mode is
        // still what the message names.
        f.remove("etc/group");
        let c = device(&f.host(&[]), true);
        assert_eq!(c.status, Status::Fail);
        assert!(
            c.detail.contains("mode 666") && c.detail.contains("no group"),
            "{c:?}"
        );

        f.remove("var/cache/kfd-preempt");
        let (s, fix) = f.status(&[], "rust-metadata");
        assert_eq!(s, Status::Fail);
        assert!(fix.unwrap().contains("linux-source-7.3"));
        f.write("usr/src/linux-source-7.3.tar.xz", "");
        assert_eq!(f.status(&[], "rust-metadata").0, Status::Ok);

        f.write("boot/config-7.3.4+deb13-amd64", "CONFIG_RUST=y\n");
        assert_eq!(f.status(&[], "config").0, Status::Fail);

        f.write("proc/sys/kernel/osrelease", "7.1.0\n");
        assert_eq!(f.status(&[], "kernel").0, Status::Fail);
    }

    #[test]
    fn an_unloaded_module_and_a_dkms_amdgpu_are_named() {
        let f = Fake::new("unloaded");
        f.remove("sys/module/kfd_preempt");
        f.remove("dev/kfd_preempt");
        let checks = run_checks(&f.host(&[]));
        assert!(!ready(&checks));
        let by = |n: &str| checks.iter().find(|c| c.name == n).unwrap().status;
        assert_eq!(by("module"), Status::Fail);
        assert_eq!(by("device"), Status::Skip);
        assert_eq!(by("layout"), Status::Skip);
        assert!(render(&checks).contains("not ready: 1 check(s) failed"));

        let mut h = f.host(&[]);
        h.run = Box::new(|prog, _| {
            (prog == "modinfo").then(|| Ran {
                ok: true,
                stdout: "/lib/modules/7.3.4+deb13-amd64/updates/dkms/amdgpu.ko\n".into(),
                stderr: String::new(),
            })
        });
        let c = amdgpu(&h, "7.3.4+deb13-amd64");
        assert_eq!(c.status, Status::Warn);
        assert!(c.detail.contains("amdgpu-dkms"));
    }

    #[test]
    fn secure_boot_with_an_unsigned_module_fails() {
        let f = Fake::new("sb");
        let mut var = vec![7, 0, 0, 0];
        var.push(1);
        fs::create_dir_all(f.dir.join(SECURE_BOOT_VAR).parent().unwrap()).unwrap();
        fs::write(f.dir.join(SECURE_BOOT_VAR), var).unwrap();
        // Loaded: the kernel accepted it.
        assert_eq!(f.status(&[], "secure-boot").0, Status::Ok);
        // Not loaded and unsigned: it will not load.
        assert_eq!(secure_boot(&f.host(&[]), false).status, Status::Fail);
        f.write(
            "sys/kernel/security/lockdown",
            "none [integrity] confidentiality\n",
        );
        let h = f.host(&[]);
        assert!(secure_boot(&h, true).detail.contains("lockdown integrity"));
    }

    #[test]
    fn a_stale_daemon_stats_file_is_not_a_running_daemon() {
        let f = Fake::new("daemon");
        assert_eq!(f.status(&[], "daemon").0, Status::Ok);
        f.write("run/kfd-preemptd/stats.json", "{\"pid\": 999999999}");
        assert_eq!(f.status(&[], "daemon").0, Status::Warn);
        f.write("run/kfd-preemptd/stats.json", "{\"pid\": \"x\"}");
        let (status, fix) = f.status(&[], "daemon");
        assert_eq!(status, Status::Warn);
        assert!(fix.is_some_and(|f| f.contains("kfd-preempt daemon --json")));
        f.remove("run/kfd-preemptd");
        assert_eq!(f.status(&[], "daemon").0, Status::Warn);
    }

    #[test]
    fn the_newest_dkms_tree_is_found_by_number() {
        let f = Fake::new("versions");
        f.write("usr/src/kfd_preempt-0.10.0/x", "");
        f.write("usr/src/kfd_preempt-0.9.0/x", "");
        let p = f.host(&[]).glob("/usr/src", "kfd_preempt-", "").unwrap();
        assert!(p.ends_with("kfd_preempt-0.10.0"), "{p:?}");
    }

    #[test]
    fn versions_and_configs_parse() {
        assert_eq!(version("7.3.4+deb13-amd64"), Some((7, 3)));
        assert_eq!(version("7.10-rc1"), Some((7, 10)));
        assert_eq!(version("x"), None);
        let c = parse_config("# c\nCONFIG_A=y\nCONFIG_B=\"gcc 14\"\nX=1\n");
        assert_eq!(c.get("CONFIG_B"), Some(&"gcc 14"));
        assert_eq!(c.get("X"), None);
    }
}
