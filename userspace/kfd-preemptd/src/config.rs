//! The TOML configuration: daemon settings and the class rules that sort
//! tenant processes into latency-critical, best-effort and ignored.
//!
//! ```
//! let cfg = kfd_preemptd::config::Config::parse(
//!     r#"
//!     [daemon]
//!     lease_ms = 100
//!
//!     [[class]]
//!     name = "inference"
//!     priority = "latency-critical"
//!     cgroup = "/system.slice/inference.service"
//!     "#,
//! )?;
//! assert_eq!(cfg.daemon.lease_ms, 100);
//! assert_eq!(cfg.classes[0].name, "inference");
//! # Ok::<(), kfd_preemptd::config::ConfigError>(())
//! ```

use std::{
    collections::{BTreeSet, HashSet},
    fmt::{self, Display},
    net::SocketAddr,
    path::Path,
    path::PathBuf,
    str::FromStr,
    time::Duration,
};

use serde::{Deserialize, Deserializer};

use crate::policy::PolicyConfig;

/// Where the daemon reads its configuration unless told otherwise.
pub const DEFAULT_CONFIG_PATH: &str = "/etc/kfd-preemptd.toml";

/// The environment variable a process sets to opt in to an `env` rule.
pub const CLASS_ENV: &str = "KFD_PREEMPT_CLASS";

/// The shortest activity sampling period accepted (the module may ask for
/// more: `kfdp_info.min_watch_period_us`).
pub const MIN_SAMPLE_PERIOD_US: u32 = 10;
/// The longest ARM period the module takes (`KFDP_IOC_ARM`: 1 s).
pub const MAX_SAMPLE_PERIOD_US: u32 = 1_000_000;
/// The longest ARM idle time the module takes (`KFDP_IOC_ARM`: 10 s).
pub const MAX_IDLE_US: u32 = 10_000_000;
/// The longest lease the module takes (one day).
pub const MAX_LEASE_MS: u32 = 86_400_000;
/// The longest a hint may say work is coming within.
pub const MAX_HINT_MS: u32 = 10_000;
/// The most hints a second a tenant may be given the rate of.
pub const MAX_HINT_RATE: u32 = 10_000;
/// `/proc/PID/comm` holds at most this many bytes (`TASK_COMM_LEN` - 1).
pub const MAX_COMM_LEN: usize = 15;

/// Which tenant descriptors make a process a candidate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Tenants {
    /// Processes with `/dev/kfd` open (real GPUs).
    #[default]
    Kfd,
    /// Processes with `/dev/kfd_preempt_sim` open (the simulated node).
    Sim,
    /// Either.
    Both,
}

/// How log lines are written to stderr.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    /// `key=value` pairs.
    #[default]
    Text,
    /// One JSON object per line.
    Json,
}

/// The least level of the log lines written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum LogLevel {
    /// Every line: each decision too.
    #[default]
    Info,
    /// Failures only. (No `error`: what stops the daemon is its exit
    /// status and last message, not a log line.)
    Warn,
}

/// What a class rule makes of the processes it matches: a rank among
/// `daemon.levels` (0 the lowest), or left alone.
///
/// A process's compute queues on a node are preempted while any queue of
/// a higher level on the same node has work; equal levels never preempt
/// each other.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, PartialOrd, Ord)]
pub enum Priority {
    /// Left alone (as are processes that match no rule).
    #[default]
    Ignore,
    /// The level of this rank in `daemon.levels`.
    Level(usize),
}

impl Priority {
    /// `best-effort` with the default levels.
    pub const BEST_EFFORT: Priority = Priority::Level(0);
    /// `latency-critical` with the default levels.
    pub const LATENCY_CRITICAL: Priority = Priority::Level(1);
}

/// The name a class rule gives to leave processes alone.
pub const IGNORE: &str = "ignore";

/// The default `daemon.levels`, lowest first: the two classes of
/// kfd-preemptd before levels existed, whose names every configuration
/// may keep using.
pub const DEFAULT_LEVELS: [&str; 2] = ["best-effort", "latency-critical"];

/// The most levels a configuration may have.
pub const MAX_LEVELS: usize = 16;

/// The `[daemon]` section. Every key has a default.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DaemonConfig {
    /// The kfd_preempt device.
    pub device: PathBuf,
    /// Which tenant descriptors to look for.
    pub tenants: Tenants,
    /// How often `/proc` is scanned for tenants and their queues re-queried.
    pub scan_interval_ms: u32,
    /// While a decision keeps lower levels off a node (it holds them, or
    /// its level is busy), how often the queues of those levels' tenants
    /// on that node are queried, so that a
    /// queue they make meanwhile is taken within this, not within a scan;
    /// 0: at scans only.
    pub held_scan_interval_ms: u32,
    /// How often the module samples the watched queues while armed.
    pub sample_period_us: u32,
    /// How long every latency-critical queue must be idle before
    /// best-effort queues are resumed.
    pub idle_hysteresis_us: u32,
    /// The most the idle hysteresis may grow to when latency-critical work
    /// comes back soon after going idle (gaps between the kernels of one
    /// request); 0, or equal to `idle_hysteresis_us`: a fixed hysteresis.
    /// It bounds what best-effort work can lose per latency-critical
    /// request.
    pub idle_hysteresis_max_us: u32,
    /// The lease of each preemption; renewed at half of it while held, so
    /// that a stalled daemon leaves nothing off for longer than this.
    pub lease_ms: u32,
    /// The window over which best-effort work is guaranteed its budget.
    pub min_share_period_ms: u32,
    /// The least time best-effort queues run in each window, even while
    /// latency-critical work is busy; 0 turns the guarantee off.
    pub min_share_budget_ms: u32,
    /// Where the statistics JSON is written (atomically, every second and
    /// on exit); empty: not written.
    pub stats_path: PathBuf,
    /// Log line format.
    pub log_format: LogFormat,
    /// The least level of the lines written: `warn` leaves out the line
    /// per decision (four a preemption).
    pub log_level: LogLevel,
    /// Where the Prometheus metrics are served (`127.0.0.1:PORT`,
    /// `[::1]:PORT` or `unix:/PATH`); absent: not served.
    pub metrics: Option<MetricsAddr>,
    /// The priority levels, lowest first: work of a level preempts every
    /// lower level's compute queues on the same node.
    pub levels: Vec<String>,
    /// SCHED_FIFO priority of the thread that reacts (1 to 99), so that
    /// busy tenants on every CPU cannot delay a preemption; 0: the default
    /// scheduler. The `/proc` walk and the statistics' rendering run on
    /// threads of their own at the default policy either way.
    pub fifo_priority: u32,
    /// The Unix socket on which tenants say that work is coming (hints,
    /// `Documentation/userspace.rst`, "HINTS"); absent: no hints.
    pub hint_socket: Option<PathBuf>,
    /// The longest a hint may say work is coming within, ms.
    pub hint_max_ms: u32,
    /// Hints a second each tenant may give, on average; up to a second's
    /// worth may come at once.
    pub hint_rate: u32,
}

impl Default for DaemonConfig {
    fn default() -> Self {
        DaemonConfig {
            device: PathBuf::from("/dev/kfd_preempt"),
            tenants: Tenants::Kfd,
            scan_interval_ms: 200,
            held_scan_interval_ms: 20,
            sample_period_us: 50,
            idle_hysteresis_us: 1000,
            idle_hysteresis_max_us: 0,
            lease_ms: 200,
            min_share_period_ms: 1000,
            min_share_budget_ms: 100,
            stats_path: PathBuf::from("/run/kfd-preemptd/stats.json"),
            log_format: LogFormat::Text,
            log_level: LogLevel::Info,
            metrics: None,
            levels: DEFAULT_LEVELS.map(String::from).to_vec(),
            fifo_priority: 0,
            hint_socket: None,
            hint_max_ms: 1000,
            hint_rate: 100,
        }
    }
}

impl DaemonConfig {
    /// `scan_interval_ms` as a duration.
    pub fn scan_interval(&self) -> Duration {
        Duration::from_millis(self.scan_interval_ms.into())
    }
    /// `held_scan_interval_ms` as a duration, at most `scan_interval_ms`
    /// (a configuration that shortened scans keeps them as they were);
    /// `None` if off.
    pub fn held_scan_interval(&self) -> Option<Duration> {
        (self.held_scan_interval_ms > 0).then(|| {
            Duration::from_millis(self.held_scan_interval_ms.min(self.scan_interval_ms).into())
        })
    }
    /// `sample_period_us` as a duration.
    pub fn sample_period(&self) -> Duration {
        Duration::from_micros(self.sample_period_us.into())
    }
    /// `idle_hysteresis_us` as a duration.
    pub fn idle_hysteresis(&self) -> Duration {
        Duration::from_micros(self.idle_hysteresis_us.into())
    }
    /// The most the idle hysteresis may grow to: `idle_hysteresis_max_us`,
    /// or the hysteresis itself if that is 0 (or smaller).
    pub fn idle_hysteresis_max(&self) -> Duration {
        Duration::from_micros(self.idle_hysteresis_max_us.into()).max(self.idle_hysteresis())
    }
    /// These settings with `node`'s overrides.
    pub fn for_node(&self, node: &NodeConfig) -> DaemonConfig {
        DaemonConfig {
            idle_hysteresis_us: node.idle_hysteresis_us.unwrap_or(self.idle_hysteresis_us),
            idle_hysteresis_max_us: node
                .idle_hysteresis_max_us
                .unwrap_or(self.idle_hysteresis_max_us),
            min_share_period_ms: node.min_share_period_ms.unwrap_or(self.min_share_period_ms),
            min_share_budget_ms: node.min_share_budget_ms.unwrap_or(self.min_share_budget_ms),
            ..self.clone()
        }
    }
    /// `lease_ms` as a duration.
    pub fn lease(&self) -> Duration {
        Duration::from_millis(self.lease_ms.into())
    }
    /// `min_share_period_ms` as a duration.
    pub fn min_share_period(&self) -> Duration {
        Duration::from_millis(self.min_share_period_ms.into())
    }
    /// `min_share_budget_ms` as a duration.
    pub fn min_share_budget(&self) -> Duration {
        Duration::from_millis(self.min_share_budget_ms.into())
    }
}

/// One `[[class]]` rule. Every selector given must match; at least one
/// must be given.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClassRule {
    /// Unique name, used in logs and statistics.
    pub name: String,
    /// What matching processes are: the name of one of `daemon.levels`, or
    /// `ignore`.
    pub priority: String,
    /// Real user id (the first field of `Uid:` in `/proc/PID/status`).
    pub uid: Option<u32>,
    /// `/proc/PID/comm`, exactly (at most 15 bytes).
    pub comm: Option<String>,
    /// The target of `/proc/PID/exe`, exactly (an absolute path).
    pub exe: Option<PathBuf>,
    /// A cgroup v2 path prefix, matched at `/` boundaries against the
    /// `0::` line of `/proc/PID/cgroup`.
    pub cgroup: Option<String>,
    /// Opt-in: the process's initial environment has
    /// `KFD_PREEMPT_CLASS=<this value>`.
    pub env: Option<String>,
}

impl ClassRule {
    fn has_selector(&self) -> bool {
        self.uid.is_some()
            || self.comm.is_some()
            || self.exe.is_some()
            || self.cgroup.is_some()
            || self.env.is_some()
    }
}

/// The whole configuration file.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// `[daemon]`.
    #[serde(default)]
    pub daemon: DaemonConfig,
    /// The `[[class]]` rules, in file order: the first match wins.
    #[serde(default, rename = "class")]
    pub classes: Vec<ClassRule>,
    /// The `[[node]]` sections: the policy tunables of one node's
    /// decisions, where they differ from `[daemon]`'s.
    #[serde(default, rename = "node")]
    pub nodes: Vec<NodeConfig>,
}

/// One `[[node]]` section: the tunables of the decisions on one KFD node
/// (every level's there); a key left out keeps `[daemon]`'s value.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeConfig {
    /// The node: its topology gpu_id (`/sys/class/kfd/kfd/topology/nodes/N/gpu_id`).
    pub gpu_id: u32,
    /// As `daemon.idle_hysteresis_us`.
    pub idle_hysteresis_us: Option<u32>,
    /// As `daemon.idle_hysteresis_max_us`.
    pub idle_hysteresis_max_us: Option<u32>,
    /// As `daemon.min_share_period_ms`.
    pub min_share_period_ms: Option<u32>,
    /// As `daemon.min_share_budget_ms`.
    pub min_share_budget_ms: Option<u32>,
}

impl NodeConfig {
    /// Whether the section sets the key that `key` ends with
    /// (`node[0].min_share_budget_ms`, say).
    fn sets(&self, key: &str) -> bool {
        let name = key.rsplit('.').next().unwrap_or(key);
        match name {
            "idle_hysteresis_us" => self.idle_hysteresis_us.is_some(),
            "idle_hysteresis_max_us" => self.idle_hysteresis_max_us.is_some(),
            "min_share_period_ms" => self.min_share_period_ms.is_some(),
            "min_share_budget_ms" => self.min_share_budget_ms.is_some(),
            _ => true,
        }
    }
}

/// Why a configuration was refused. The message names the key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigError {
    /// The file could not be read.
    Read {
        /// The file.
        path: PathBuf,
        /// The system's message.
        message: String,
    },
    /// Not valid TOML, or a key, type or value the schema does not have
    /// (the parser's message names the key and its line).
    Syntax(String),
    /// A value out of range or an inconsistent rule.
    Invalid {
        /// The key, as `daemon.lease_ms` or `class[2].comm`.
        key: String,
        /// What is wrong with it.
        message: String,
    },
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigError::Read { path, message } => {
                write!(f, "cannot read {}: {message}", path.display())
            }
            ConfigError::Syntax(m) => f.write_str(m.trim_end()),
            ConfigError::Invalid { key, message } => write!(f, "{key}: {message}"),
        }
    }
}

impl std::error::Error for ConfigError {}

fn invalid(key: impl Into<String>, message: impl Into<String>) -> ConfigError {
    ConfigError::Invalid {
        key: key.into(),
        message: message.into(),
    }
}

/// Checks the policy tunables that `[daemon]` and each `[[node]]` may set,
/// naming the keys under `prefix` (`daemon.` or `node[N].`).
fn check_tunables(d: &DaemonConfig, prefix: &str) -> Result<(), ConfigError> {
    if d.idle_hysteresis_us == 0 {
        // Zero would resume best-effort work between two kernels of
        // one latency-critical request.
        return Err(invalid(
            format!("{prefix}idle_hysteresis_us"),
            "must be at least 1 (a few sample periods is typical)",
        ));
    }
    if d.idle_hysteresis_us > MAX_IDLE_US {
        return Err(invalid(
            format!("{prefix}idle_hysteresis_us"),
            format!("is above the module's limit of {MAX_IDLE_US} µs"),
        ));
    }
    if d.idle_hysteresis_max_us != 0 && d.idle_hysteresis_max_us < d.idle_hysteresis_us {
        return Err(invalid(
            format!("{prefix}idle_hysteresis_max_us"),
            format!(
                "{} is below {prefix}idle_hysteresis_us ({}); 0 keeps the hysteresis fixed",
                d.idle_hysteresis_max_us, d.idle_hysteresis_us
            ),
        ));
    }
    if d.idle_hysteresis_max_us > MAX_IDLE_US {
        return Err(invalid(
            format!("{prefix}idle_hysteresis_max_us"),
            format!("is above the module's limit of {MAX_IDLE_US} µs"),
        ));
    }
    if d.min_share_period_ms == 0 {
        return Err(invalid(
            format!("{prefix}min_share_period_ms"),
            "must be at least 1",
        ));
    }
    if d.min_share_budget_ms >= d.min_share_period_ms {
        return Err(invalid(
            format!("{prefix}min_share_budget_ms"),
            format!(
                "{} must be less than {prefix}min_share_period_ms ({}); 0 turns the guarantee off",
                d.min_share_budget_ms, d.min_share_period_ms
            ),
        ));
    }
    Ok(())
}

/// Checks the hint settings.
fn check_hints(d: &DaemonConfig) -> Result<(), ConfigError> {
    if d.hint_socket.as_ref().is_some_and(|p| !p.is_absolute()) {
        return Err(invalid("daemon.hint_socket", "must be an absolute path"));
    }
    if d.hint_max_ms == 0 || d.hint_max_ms > MAX_HINT_MS {
        return Err(invalid(
            "daemon.hint_max_ms",
            format!("{} is not 1 to {MAX_HINT_MS} ms", d.hint_max_ms),
        ));
    }
    if d.hint_rate == 0 || d.hint_rate > MAX_HINT_RATE {
        return Err(invalid(
            "daemon.hint_rate",
            format!("{} is not 1 to {MAX_HINT_RATE} a second", d.hint_rate),
        ));
    }
    Ok(())
}

impl Config {
    /// The `[[node]]` section of the node `gpu_id`, if any.
    pub fn node(&self, gpu_id: u32) -> Option<&NodeConfig> {
        self.nodes.iter().find(|n| n.gpu_id == gpu_id)
    }

    /// Checks that every `[[node]]` names a node of this host, given the
    /// gpu_ids it has (an empty set: the host's nodes are not known, and
    /// nothing is checked).
    pub fn check_nodes(&self, host: &BTreeSet<u32>) -> Result<(), ConfigError> {
        if host.is_empty() {
            return Ok(());
        }
        for (i, n) in self.nodes.iter().enumerate() {
            if !host.contains(&n.gpu_id) {
                let known: Vec<String> = host.iter().map(|g| format!("{g:#x}")).collect();
                return Err(invalid(
                    format!("node[{i}].gpu_id"),
                    format!(
                        "{:#x} is not a node of this host (its GPU nodes: {})",
                        n.gpu_id,
                        known.join(", ")
                    ),
                ));
            }
        }
        Ok(())
    }

    /// Reads and validates the file at `path`.
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError::Read {
            path: path.to_owned(),
            message: e.to_string(),
        })?;
        Self::parse(&text)
    }

    /// Parses and validates a configuration text.
    ///
    /// ```
    /// use kfd_preemptd::config::Config;
    /// let e = Config::parse("[daemon]\nlease_ms = 0\n").unwrap_err();
    /// assert!(e.to_string().starts_with("daemon.lease_ms:"));
    /// ```
    pub fn parse(text: &str) -> Result<Self, ConfigError> {
        let cfg: Config = toml::from_str(text).map_err(|e| ConfigError::Syntax(e.to_string()))?;
        cfg.validate()?;
        Ok(cfg)
    }

    /// Checks ranges and rules: everything `parse` checks beyond the schema.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let d = &self.daemon;
        if d.device.as_os_str().is_empty() {
            return Err(invalid("daemon.device", "must not be empty"));
        }
        if d.scan_interval_ms == 0 {
            return Err(invalid("daemon.scan_interval_ms", "must be at least 1"));
        }
        if d.fifo_priority > 99 {
            return Err(invalid(
                "daemon.fifo_priority",
                format!(
                    "{} is not a SCHED_FIFO priority (1 to 99, or 0)",
                    d.fifo_priority
                ),
            ));
        }
        if d.sample_period_us < MIN_SAMPLE_PERIOD_US {
            return Err(invalid(
                "daemon.sample_period_us",
                format!(
                    "{} is below the least period of {MIN_SAMPLE_PERIOD_US} µs",
                    d.sample_period_us
                ),
            ));
        }
        if d.sample_period_us > MAX_SAMPLE_PERIOD_US {
            return Err(invalid(
                "daemon.sample_period_us",
                format!(
                    "{} is above the module's limit of {MAX_SAMPLE_PERIOD_US} µs",
                    d.sample_period_us
                ),
            ));
        }
        if d.lease_ms == 0 {
            // Without a lease a stalled daemon could hold best-effort
            // queues off indefinitely; closing the device is the only other
            // safety net.
            return Err(invalid("daemon.lease_ms", "must be at least 1"));
        }
        if d.lease_ms > MAX_LEASE_MS {
            return Err(invalid(
                "daemon.lease_ms",
                format!("is above the module's limit of {MAX_LEASE_MS} ms (one day)"),
            ));
        }
        check_tunables(d, "daemon.")?;
        check_hints(d)?;
        let mut seen = BTreeSet::new();
        for (i, n) in self.nodes.iter().enumerate() {
            let key = format!("node[{i}]");
            if n.gpu_id == 0 {
                return Err(invalid(
                    format!("{key}.gpu_id"),
                    "0 is not a GPU node (the topology's gpu_id of a GPU is never 0)",
                ));
            }
            if !seen.insert(n.gpu_id) {
                return Err(invalid(
                    format!("{key}.gpu_id"),
                    format!("{:#x} has a [[node]] section already", n.gpu_id),
                ));
            }
            check_tunables(&d.for_node(n), &format!("{key}.")).map_err(|e| match e {
                ConfigError::Invalid { key: k, message } if !n.sets(&k) => ConfigError::Invalid {
                    message: format!("{message} (the section does not set it: [daemon]'s value)"),
                    key: k,
                },
                e => e,
            })?;
        }
        if d.levels.is_empty() || d.levels.len() > MAX_LEVELS {
            return Err(invalid(
                "daemon.levels",
                format!("must name 1 to {MAX_LEVELS} levels, lowest first"),
            ));
        }
        for (i, level) in d.levels.iter().enumerate() {
            if level.is_empty() || level == IGNORE {
                return Err(invalid(
                    format!("daemon.levels[{i}]"),
                    format!("{level:?} cannot name a level"),
                ));
            }
            if d.levels[..i].contains(level) {
                // A level listed twice would rank above and below itself,
                // and preempt its own queues.
                return Err(invalid(
                    format!("daemon.levels[{i}]"),
                    format!("duplicate level {level:?}"),
                ));
            }
        }
        let mut names = HashSet::new();
        for (i, rule) in self.classes.iter().enumerate() {
            let key = |field: &str| format!("class[{i}].{field}");
            if rule.name.is_empty() {
                return Err(invalid(key("name"), "must not be empty"));
            }
            if !names.insert(rule.name.as_str()) {
                return Err(invalid(
                    key("name"),
                    format!("duplicate class name {:?}", rule.name),
                ));
            }
            if rule.priority != IGNORE && !d.levels.contains(&rule.priority) {
                return Err(invalid(
                    key("priority"),
                    format!(
                        "unknown level {:?} (daemon.levels: {}; or \"{IGNORE}\")",
                        rule.priority,
                        d.levels.join(", ")
                    ),
                ));
            }
            if !rule.has_selector() {
                return Err(invalid(
                    format!("class[{i}] ({:?})", rule.name),
                    "has no selector: give at least one of uid, comm, exe, cgroup, env",
                ));
            }
            if let Some(comm) = &rule.comm {
                if comm.is_empty() || comm.len() > MAX_COMM_LEN {
                    return Err(invalid(
                        key("comm"),
                        format!(
                            "{comm:?} can never match: /proc/PID/comm holds 1 to {MAX_COMM_LEN} bytes"
                        ),
                    ));
                }
            }
            if let Some(exe) = &rule.exe {
                if !exe.is_absolute() {
                    return Err(invalid(
                        key("exe"),
                        format!("{} must be an absolute path", exe.display()),
                    ));
                }
            }
            if let Some(cg) = &rule.cgroup {
                if !cg.starts_with('/') {
                    return Err(invalid(
                        key("cgroup"),
                        format!("{cg:?} must start with '/' (a path in the cgroup v2 hierarchy)"),
                    ));
                }
            }
            if let Some(env) = &rule.env {
                if env.is_empty() || env.contains('\0') {
                    return Err(invalid(key("env"), "must be a non-empty value without NUL"));
                }
            }
        }
        Ok(())
    }

    /// The priority `rule` gives (its level's rank).
    ///
    /// ```
    /// use kfd_preemptd::config::{Config, Priority};
    /// let c = Config::parse(
    ///     "[daemon]\nlevels = [\"batch\", \"training\", \"inference\"]\n\
    ///      [[class]]\nname = \"t\"\npriority = \"training\"\nuid = 0\n",
    /// )?;
    /// assert_eq!(c.priority_of(&c.classes[0]), Priority::Level(1));
    /// # Ok::<(), kfd_preemptd::config::ConfigError>(())
    /// ```
    pub fn priority_of(&self, rule: &ClassRule) -> Priority {
        self.daemon
            .levels
            .iter()
            .position(|l| *l == rule.priority)
            .map_or(Priority::Ignore, Priority::Level)
    }

    /// The name of `priority`, as the configuration spells it.
    pub fn priority_name(&self, priority: Priority) -> &str {
        match priority {
            Priority::Ignore => IGNORE,
            Priority::Level(r) => self.daemon.levels.get(r).map_or("?", String::as_str),
        }
    }

    /// Whether some rule needs `/proc/PID/exe`.
    pub fn uses_exe(&self) -> bool {
        self.classes.iter().any(|r| r.exe.is_some())
    }

    /// Whether some rule needs `/proc/PID/environ`, which is read only then.
    pub fn uses_env(&self) -> bool {
        self.classes.iter().any(|r| r.env.is_some())
    }
}

/// Where the endpoint listens: a loopback TCP address or a Unix socket.
///
/// Written `127.0.0.1:9477`, `[::1]:9477` or
/// `unix:/run/kfd-preemptd/metrics.sock`. The endpoint has no
/// authentication and the daemon runs as root, so a TCP address must be a
/// loopback one (`127.0.0.0/8` or `::1`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MetricsAddr {
    /// A loopback TCP address.
    Tcp(SocketAddr),
    /// A Unix socket's path (absolute).
    Unix(PathBuf),
}

/// Why a [`MetricsAddr`] was refused; the message says what to write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetricsAddrError(String);

impl Display for MetricsAddrError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for MetricsAddrError {}

/// The longest Unix socket path `bind(2)` takes (`sun_path` less its NUL).
const UNIX_PATH_MAX: usize = 107;

impl FromStr for MetricsAddr {
    type Err = MetricsAddrError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = |why: &str| Err(MetricsAddrError(format!("{s:?}: {why}")));
        if let Some(path) = s.strip_prefix("unix:") {
            let p = Path::new(path);
            if !p.is_absolute() || p.file_name().is_none() {
                return err("a Unix socket needs an absolute path to a file, e.g. unix:/run/kfd-preemptd/metrics.sock");
            }
            if path.len() > UNIX_PATH_MAX {
                return err(&format!(
                    "a Unix socket path has at most {UNIX_PATH_MAX} bytes"
                ));
            }
            return Ok(MetricsAddr::Unix(p.to_path_buf()));
        }
        let Ok(addr) = s.parse::<SocketAddr>() else {
            return err(
                "not an address: give 127.0.0.1:PORT, [::1]:PORT or unix:/PATH (no host names)",
            );
        };
        if !addr.ip().is_loopback() {
            return err("not a loopback address: the endpoint has no authentication, so it listens on 127.0.0.0/8 or [::1] only (or on a Unix socket)");
        }
        if addr.port() == 0 {
            return err("port 0: give the fixed port the scraper is configured with");
        }
        Ok(MetricsAddr::Tcp(addr))
    }
}

impl Display for MetricsAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MetricsAddr::Tcp(a) => write!(f, "{a}"),
            MetricsAddr::Unix(p) => write!(f, "unix:{}", p.display()),
        }
    }
}

impl<'de> Deserialize<'de> for MetricsAddr {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

impl Default for PolicyConfig {
    fn default() -> Self {
        PolicyConfig::from(&DaemonConfig::default())
    }
}

impl From<&DaemonConfig> for PolicyConfig {
    fn from(d: &DaemonConfig) -> Self {
        PolicyConfig {
            lease: d.lease(),
            sample_period: d.sample_period(),
            idle_hysteresis: d.idle_hysteresis(),
            idle_hysteresis_max: d.idle_hysteresis_max(),
            min_share_period: d.min_share_period(),
            min_share_budget: d.min_share_budget(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(text: &str) -> String {
        Config::parse(text).unwrap_err().to_string()
    }

    const RULE: &str = "[[class]]\nname = \"a\"\npriority = \"best-effort\"\nuid = 1000\n";

    #[test]
    fn empty_file_gives_the_documented_defaults() {
        let c = Config::parse("").unwrap();
        let d = &c.daemon;
        assert_eq!(d.device, Path::new("/dev/kfd_preempt"));
        assert_eq!(d.tenants, Tenants::Kfd);
        assert_eq!(
            (
                d.scan_interval_ms,
                d.sample_period_us,
                d.idle_hysteresis_us,
                d.lease_ms
            ),
            (200, 50, 1000, 200)
        );
        assert_eq!((d.min_share_period_ms, d.min_share_budget_ms), (1000, 100));
        assert_eq!(d.held_scan_interval(), Some(Duration::from_millis(20)));
        // No adaptation by default: the most is the hysteresis itself.
        assert_eq!(d.idle_hysteresis_max_us, 0);
        assert_eq!(d.idle_hysteresis_max(), d.idle_hysteresis());
        assert_eq!(d.stats_path, Path::new("/run/kfd-preemptd/stats.json"));
        assert_eq!(d.log_format, LogFormat::Text);
        assert_eq!(d.log_level, LogLevel::Info);
        assert!(c.classes.is_empty());
    }

    #[test]
    fn full_file_parses() {
        let c = Config::parse(
            r#"
            [daemon]
            device = "/dev/other"
            tenants = "both"
            scan_interval_ms = 50
            sample_period_us = 20
            idle_hysteresis_us = 500
            lease_ms = 80
            min_share_period_ms = 500
            min_share_budget_ms = 0
            stats_path = "/tmp/s.json"
            log_format = "json"
            log_level = "warn"

            [[class]]
            name = "inference"
            priority = "latency-critical"
            cgroup = "/system.slice/inference.service"
            uid = 0
            comm = "server"
            exe = "/usr/bin/server"

            [[class]]
            name = "training"
            priority = "best-effort"
            env = "training"

            [[class]]
            name = "rest"
            priority = "ignore"
            uid = 1000
            "#,
        )
        .unwrap();
        assert_eq!(c.daemon.tenants, Tenants::Both);
        assert_eq!(c.daemon.log_format, LogFormat::Json);
        assert_eq!(c.daemon.log_level, LogLevel::Warn);
        assert_eq!(c.daemon.lease(), Duration::from_millis(80));
        assert_eq!(c.classes.len(), 3);
        assert_eq!(c.priority_of(&c.classes[0]), Priority::LATENCY_CRITICAL);
        assert_eq!(c.priority_of(&c.classes[1]), Priority::BEST_EFFORT);
        assert_eq!(c.classes[1].env.as_deref(), Some("training"));
        assert_eq!(c.priority_of(&c.classes[2]), Priority::Ignore);
        assert_eq!(
            c.priority_name(Priority::LATENCY_CRITICAL),
            "latency-critical"
        );
        assert!(c.uses_env() && c.uses_exe());
    }

    #[test]
    fn unknown_keys_are_named() {
        let e = err("[daemon]\nlease = 5\n");
        assert!(e.contains("unknown field `lease`"), "{e}");
        let e = err(&format!("{RULE}colour = \"red\"\n"));
        assert!(e.contains("unknown field `colour`"), "{e}");
        let e = err("[deamon]\n");
        assert!(e.contains("unknown field `deamon`"), "{e}");
    }

    #[test]
    fn bad_enum_values_are_named() {
        let e = err("[[class]]\nname = \"a\"\npriority = \"urgent\"\nuid = 1\n");
        assert!(e.contains("urgent") && e.contains("priority"), "{e}");
        let e = err("[daemon]\ntenants = \"gpu\"\n");
        assert!(e.contains("gpu") && e.contains("tenants"), "{e}");
        let e = err("[daemon]\nlog_format = \"xml\"\n");
        assert!(e.contains("xml") && e.contains("log_format"), "{e}");
        for level in ["debug", "error"] {
            let e = err(&format!("[daemon]\nlog_level = \"{level}\"\n"));
            assert!(e.contains(level) && e.contains("log_level"), "{e}");
        }
    }

    #[test]
    fn levels_are_ordered_names_and_classes_name_one() {
        let c = Config::parse(
            "[daemon]\nlevels = [\"batch\", \"training\", \"inference\"]\n\
             [[class]]\nname = \"i\"\npriority = \"inference\"\nuid = 0\n\
             [[class]]\nname = \"b\"\npriority = \"batch\"\nuid = 1\n",
        )
        .unwrap();
        assert_eq!(c.priority_of(&c.classes[0]), Priority::Level(2));
        assert_eq!(c.priority_of(&c.classes[1]), Priority::Level(0));
        assert!(Priority::Level(2) > Priority::Level(0));
        assert_eq!(c.priority_name(Priority::Level(1)), "training");
        // The old names are not levels of this configuration.
        let e = err("[daemon]\nlevels = [\"low\", \"high\"]\n\
                     [[class]]\nname = \"x\"\npriority = \"best-effort\"\nuid = 0\n");
        assert!(e.starts_with("class[0].priority:"), "{e}");
        assert!(e.contains("low, high"), "{e}");
    }

    #[test]
    fn hints_are_off_by_default_and_bounded() {
        let d = Config::parse("").unwrap().daemon;
        assert_eq!(
            (d.hint_socket, d.hint_max_ms, d.hint_rate),
            (None, 1000, 100)
        );
        let c = Config::parse("[daemon]\nhint_socket = \"/run/kfd-preemptd/hint.sock\"\n").unwrap();
        assert_eq!(
            c.daemon.hint_socket.as_deref(),
            Some(Path::new("/run/kfd-preemptd/hint.sock"))
        );
        let e = err("[daemon]\nhint_socket = \"hint.sock\"\n");
        assert!(e.starts_with("daemon.hint_socket:"), "{e}");
        for bad in ["hint_max_ms = 0", "hint_max_ms = 10001"] {
            let e = err(&format!("[daemon]\n{bad}\n"));
            assert!(e.starts_with("daemon.hint_max_ms:"), "{e}");
        }
        for bad in ["hint_rate = 0", "hint_rate = 10001"] {
            let e = err(&format!("[daemon]\n{bad}\n"));
            assert!(e.starts_with("daemon.hint_rate:"), "{e}");
        }
    }

    #[test]
    fn metrics_are_off_by_default_and_only_local() {
        assert_eq!(Config::parse("").unwrap().daemon.metrics, None);
        let c =
            Config::parse("[daemon]\nmetrics = \"unix:/run/kfd-preemptd/metrics.sock\"\n").unwrap();
        assert!(matches!(c.daemon.metrics, Some(MetricsAddr::Unix(_))));
        let e = err("[daemon]\nmetrics = \"0.0.0.0:9477\"\n");
        assert!(e.contains("metrics"), "{e}");
    }

    #[test]
    fn bad_levels_are_named() {
        let e = err("[daemon]\nlevels = [\"a\", \"b\", \"a\"]\n");
        assert!(
            e.starts_with("daemon.levels[2]:") && e.contains("duplicate"),
            "{e}"
        );
        let e = err("[daemon]\nlevels = []\n");
        assert!(e.starts_with("daemon.levels:"), "{e}");
        let e = err("[daemon]\nlevels = [\"a\", \"ignore\"]\n");
        assert!(e.starts_with("daemon.levels[1]:"), "{e}");
        let many: Vec<String> = (0..=MAX_LEVELS).map(|i| format!("\"l{i}\"")).collect();
        let e = err(&format!("[daemon]\nlevels = [{}]\n", many.join(", ")));
        assert!(e.starts_with("daemon.levels:"), "{e}");
    }

    #[test]
    fn node_sections_override_the_daemons_tunables_for_their_node() {
        let c = Config::parse(
            "[daemon]\nidle_hysteresis_us = 2000\nmin_share_budget_ms = 50\n\
             [[node]]\ngpu_id = 0x5100\nidle_hysteresis_us = 500\nidle_hysteresis_max_us = 4000\n\
             [[node]]\ngpu_id = 0x5101\nmin_share_period_ms = 200\nmin_share_budget_ms = 0\n",
        )
        .unwrap();
        assert_eq!(c.nodes.len(), 2);
        let n0 = c.daemon.for_node(c.node(0x5100).unwrap());
        assert_eq!(
            (n0.idle_hysteresis_us, n0.idle_hysteresis_max_us),
            (500, 4000)
        );
        assert_eq!((n0.min_share_period_ms, n0.min_share_budget_ms), (1000, 50));
        let n1 = c.daemon.for_node(c.node(0x5101).unwrap());
        assert_eq!(n1.idle_hysteresis_us, 2000);
        assert_eq!((n1.min_share_period_ms, n1.min_share_budget_ms), (200, 0));
        assert!(c.node(0x5102).is_none());
        // Known nodes pass; an unknown one is named; an unknown host is
        // not checked.
        let host = BTreeSet::from([0x5100, 0x5101, 0x5102]);
        assert_eq!(c.check_nodes(&host), Ok(()));
        let e = c
            .check_nodes(&BTreeSet::from([0x5100, 0x5102]))
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("node[1].gpu_id: 0x5101 is not a node of this host")
                && e.contains("0x5100, 0x5102"),
            "{e}"
        );
        assert_eq!(c.check_nodes(&BTreeSet::new()), Ok(()));
    }

    #[test]
    fn bad_node_sections_are_refused_naming_the_key() {
        let e = err("[[node]]\ngpu_id = 7\n[[node]]\ngpu_id = 7\n");
        assert!(
            e.starts_with("node[1].gpu_id:") && e.contains("already"),
            "{e}"
        );
        let e = err("[[node]]\ngpu_id = 0\n");
        assert!(e.starts_with("node[0].gpu_id:"), "{e}");
        // The node's value against the daemon's: the node's key is named.
        let e = err(
            "[daemon]\nmin_share_period_ms = 100\nmin_share_budget_ms = 0\n\
                     [[node]]\ngpu_id = 7\nmin_share_budget_ms = 100\n",
        );
        assert!(
            e.starts_with("node[0].min_share_budget_ms: 100 must be less than node[0].min_share_period_ms (100)"),
            "{e}"
        );
        let e = err("[[node]]\ngpu_id = 7\nidle_hysteresis_us = 0\n");
        assert!(e.starts_with("node[0].idle_hysteresis_us:"), "{e}");
        let e =
            err("[[node]]\ngpu_id = 7\nidle_hysteresis_us = 3000\nidle_hysteresis_max_us = 2000\n");
        assert!(e.starts_with("node[0].idle_hysteresis_max_us:"), "{e}");
        assert!(!e.contains("does not set it"), "{e}");
        // A key the section inherits is named, and said to be inherited.
        let e = err(
            "[daemon]\nidle_hysteresis_max_us = 5000\n[[node]]\ngpu_id = 7\nidle_hysteresis_us = 8000\n",
        );
        assert!(
            e.starts_with(
                "node[0].idle_hysteresis_max_us: 5000 is below node[0].idle_hysteresis_us (8000)"
            ) && e.ends_with("(the section does not set it: [daemon]'s value)"),
            "{e}"
        );
        // Keys a node cannot set, and a node without its gpu_id.
        let e = err("[[node]]\ngpu_id = 7\nlease_ms = 5\n");
        assert!(e.contains("lease_ms"), "{e}");
        let e = err("[[node]]\nidle_hysteresis_us = 5\n");
        assert!(e.contains("gpu_id"), "{e}");
    }

    #[test]
    fn a_rule_without_selector_is_refused() {
        let e = err("[[class]]\nname = \"lonely\"\npriority = \"best-effort\"\n");
        assert!(e.starts_with("class[0] (\"lonely\")"), "{e}");
        assert!(e.contains("no selector"), "{e}");
    }

    #[test]
    fn zero_hysteresis_is_refused() {
        let e = err("[daemon]\nidle_hysteresis_us = 0\n");
        assert!(e.starts_with("daemon.idle_hysteresis_us:"), "{e}");
    }

    #[test]
    fn budget_not_below_period_is_refused() {
        let e = err("[daemon]\nmin_share_period_ms = 100\nmin_share_budget_ms = 100\n");
        assert!(e.starts_with("daemon.min_share_budget_ms:"), "{e}");
        let e = err("[daemon]\nmin_share_budget_ms = 5000\n");
        assert!(e.starts_with("daemon.min_share_budget_ms:"), "{e}");
        assert!(Config::parse("[daemon]\nmin_share_budget_ms = 999\n").is_ok());
    }

    #[test]
    fn fifo_priority_is_a_sched_fifo_priority() {
        let e = err("[daemon]\nfifo_priority = 100\n");
        assert!(e.starts_with("daemon.fifo_priority:"), "{e}");
        assert!(Config::parse("[daemon]\nfifo_priority = 99\n").is_ok());
        assert!(Config::parse("[daemon]\nfifo_priority = 0\n").is_ok());
    }

    #[test]
    fn zero_lease_is_refused() {
        let e = err("[daemon]\nlease_ms = 0\n");
        assert!(e.starts_with("daemon.lease_ms:"), "{e}");
    }

    #[test]
    fn too_short_a_period_is_refused() {
        let e = err("[daemon]\nsample_period_us = 9\n");
        assert!(e.starts_with("daemon.sample_period_us:"), "{e}");
        assert!(Config::parse("[daemon]\nsample_period_us = 10\n").is_ok());
        let e = err("[daemon]\nsample_period_us = 2000000\n");
        assert!(e.starts_with("daemon.sample_period_us:"), "{e}");
    }

    #[test]
    fn duplicate_class_names_are_refused() {
        let e = err(&format!("{RULE}{RULE}"));
        assert!(e.starts_with("class[1].name:"), "{e}");
        assert!(e.contains("duplicate"), "{e}");
    }

    #[test]
    fn other_ranges_are_checked() {
        assert!(err("[daemon]\nscan_interval_ms = 0\n").starts_with("daemon.scan_interval_ms:"));
        // A configuration written before held_scan_interval_ms existed,
        // with scans shorter than its default, still starts.
        let short = Config::parse("[daemon]\nscan_interval_ms = 10\n").unwrap();
        assert_eq!(
            short.daemon.held_scan_interval(),
            Some(Duration::from_millis(10))
        );
        let off = Config::parse("[daemon]\nheld_scan_interval_ms = 0\n").unwrap();
        assert_eq!(off.daemon.held_scan_interval(), None);
        assert!(err("[daemon]\nlease_ms = 86400001\n").starts_with("daemon.lease_ms:"));
        assert!(err("[daemon]\nidle_hysteresis_us = 10000001\n")
            .starts_with("daemon.idle_hysteresis_us:"));
        assert!(err("[daemon]\nidle_hysteresis_max_us = 10000001\n")
            .starts_with("daemon.idle_hysteresis_max_us:"));
        let e = err("[daemon]\nidle_hysteresis_us = 2000\nidle_hysteresis_max_us = 1000\n");
        assert!(
            e.starts_with("daemon.idle_hysteresis_max_us:") && e.contains("below"),
            "{e}"
        );
        assert!(
            err("[daemon]\nmin_share_period_ms = 0\nmin_share_budget_ms = 0\n")
                .starts_with("daemon.min_share_period_ms:")
        );
        assert!(err("[daemon]\nlease_ms = -1\n").contains("lease_ms"));
        let rule = |sel: &str| format!("[[class]]\nname = \"x\"\npriority = \"ignore\"\n{sel}\n");
        assert!(err(&rule("comm = \"a-very-long-command-name\"")).starts_with("class[0].comm:"));
        assert!(err(&rule("exe = \"bin/server\"")).starts_with("class[0].exe:"));
        assert!(err(&rule("cgroup = \"system.slice\"")).starts_with("class[0].cgroup:"));
        assert!(err(&rule("env = \"\"")).starts_with("class[0].env:"));
    }

    #[test]
    fn load_names_a_missing_file() {
        let e = Config::load(Path::new("/nonexistent/kfd-preemptd.toml")).unwrap_err();
        assert!(
            e.to_string().contains("/nonexistent/kfd-preemptd.toml"),
            "{e}"
        );
    }
}
