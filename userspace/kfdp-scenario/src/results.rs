//! The JSON each role writes and the report reads.

use std::{fs, path::Path};

use serde::{Deserialize, Serialize};

use crate::Result;

/// What `kfdp-scenario lc` measured.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LcResult {
    /// Always "lc".
    pub role: String,
    /// Requests submitted.
    pub requests: u64,
    /// Latency of each completed request, in arrival order, ms.
    pub latencies_ms: Vec<f64>,
    /// Of each completed request (in the same order), how long after its
    /// arrival the node saw its first dispatch: the host's part (this
    /// process scheduled late, or the request queued behind the one
    /// before it in a sequenced run), ms.
    #[serde(default)]
    pub submit_delay_ms: Vec<f64>,
    /// Of each completed request, the part of `submit_delay_ms` from this
    /// process's call to submit to the node seeing the first dispatch: the
    /// packets' writing and the doorbell's ioctl (with any wait for the
    /// simulated node's lock). The rest is this process woken late, or a
    /// full ring, or the request before it in a sequenced run, ms.
    #[serde(default)]
    pub doorbell_ms: Vec<f64>,
    /// Of each completed request, how long its first dispatch waited on
    /// the node before it ran: behind other LC work, or behind BE work
    /// until BE was preempted, ms.
    #[serde(default)]
    pub node_wait_ms: Vec<f64>,
    /// Nearest-rank percentiles of `latencies_ms`.
    pub p50_ms: f64,
    /// P99.
    pub p99_ms: f64,
    /// P99.9.
    pub p999_ms: f64,
    /// Node time one request needs alone: chain x work_ms.
    pub work_ms_per_request: f64,
    /// Length of the arrival window.
    pub duration_s: f64,
    /// Mean arrival rate, requests per second.
    pub rate: f64,
    /// Dispatches per request.
    #[serde(default)]
    pub chain: u32,
    /// Host time between a request's dispatches, ms (0: a chain
    /// submitted at once).
    #[serde(default)]
    pub gap_ms: f64,
    /// Node time of one dispatch, ms.
    #[serde(default)]
    pub work_ms: f64,
    /// Seed of the arrival process.
    #[serde(default)]
    pub seed: u64,
    /// Requests not finished 10 s after the window (not in the latencies).
    #[serde(default)]
    pub incomplete: u64,
    /// Requests submitted more than 1 ms after their arrival time (a full
    /// ring, or this process not scheduled in time).
    #[serde(default)]
    pub late_submits: u64,
    /// The ring: simulated node index, queue id and gpu_id.
    #[serde(default)]
    pub node: u32,
    /// Queue id of the ring.
    #[serde(default)]
    pub queue_id: u32,
    /// gpu_id of the ring's node.
    #[serde(default)]
    pub gpu_id: u32,
    /// Host time between a request's arrival and its first dispatch, ms
    /// (its inputs prepared).
    #[serde(default)]
    pub prep_ms: f64,
    /// When each hint was given (`CLOCK_MONOTONIC`, ns), in order; empty
    /// without `--hint`.
    #[serde(default)]
    pub hints_ns: Vec<u64>,
    /// Hints the daemon refused.
    #[serde(default)]
    pub hints_refused: u64,
    /// How soon each hint said the work would come, ms.
    #[serde(default)]
    pub hint_within_ms: f64,
}

impl LcResult {
    /// The node time LC asks for per second of wall time, as a fraction.
    pub fn load(&self) -> f64 {
        self.rate * self.work_ms_per_request / 1000.0
    }
}

/// What `kfdp-scenario be` measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BeResult {
    /// Always "be".
    pub role: String,
    /// Dispatches that retired inside the measurement window.
    pub dispatches_completed: u64,
    /// Their work, ms of node time.
    pub work_done_ms: f64,
    /// Length of the measurement window.
    pub duration_s: f64,
    /// work_done_ms / (duration_s x 1000): the node's busy fraction spent
    /// on BE.
    pub throughput: f64,
    /// Node time, ms, inside the window before each counted dispatch
    /// started, since the one before it ended (or the window began): on a
    /// node of its own, how long the tenant left its ring empty.
    #[serde(default)]
    pub idle_between_ms: f64,
    /// Node time of one dispatch, ms.
    #[serde(default)]
    pub work_ms: f64,
    /// Dispatches kept outstanding.
    #[serde(default)]
    pub depth: u32,
    /// Simulated node index.
    #[serde(default)]
    pub node: u32,
    /// Queue id of the ring.
    #[serde(default)]
    pub queue_id: u32,
    /// gpu_id of the ring's node.
    #[serde(default)]
    pub gpu_id: u32,
}

/// Writes `value` as pretty JSON to `path`.
pub fn write_json<T: Serialize>(path: &Path, value: &T) -> Result<()> {
    let mut text = serde_json::to_string_pretty(value)?;
    text.push('\n');
    fs::write(path, text).map_err(|e| format!("writing {}: {e}", path.display()))?;
    Ok(())
}

/// Reads the result of role `role` from `path`, checking the role first so
/// that swapped arguments say so.
fn read_role<T: for<'de> Deserialize<'de>>(path: &Path, role: &str) -> Result<T> {
    let text = fs::read_to_string(path).map_err(|e| format!("reading {}: {e}", path.display()))?;
    let value: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| format!("parsing {}: {e}", path.display()))?;
    match value.get("role").and_then(|r| r.as_str()) {
        Some(r) if r == role => {}
        other => {
            return Err(format!(
                "{}: role {}, expected {role:?}",
                path.display(),
                other.map_or("missing".to_string(), |r| format!("{r:?}"))
            )
            .into())
        }
    }
    Ok(serde_json::from_value(value).map_err(|e| format!("parsing {}: {e}", path.display()))?)
}

/// Reads an `lc` result, refusing any other role.
pub fn read_lc(path: &Path) -> Result<LcResult> {
    read_role(path, "lc")
}

/// Reads a `be` result, refusing any other role.
pub fn read_be(path: &Path) -> Result<BeResult> {
    read_role(path, "be")
}

/// Writes `text` to `path` through a temporary file and a rename, so that a
/// harness polling for `path` never reads it half written.
pub fn write_atomically(path: &Path, text: &str) -> Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    fs::write(&tmp, text).map_err(|e| format!("writing {}: {e}", Path::new(&tmp).display()))?;
    fs::rename(&tmp, path).map_err(|e| format!("renaming to {}: {e}", path.display()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_round_trip_and_roles_are_checked() {
        let dir = std::env::temp_dir().join(format!("kfdp-scenario-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let be = BeResult {
            role: "be".into(),
            dispatches_completed: 79,
            work_done_ms: 19750.0,
            duration_s: 20.0,
            throughput: 0.9875,
            idle_between_ms: 12.5,
            work_ms: 250.0,
            depth: 1,
            node: 0,
            queue_id: 1,
            gpu_id: 0x5100,
        };
        let path = dir.join("be.json");
        write_json(&path, &be).unwrap();
        assert_eq!(read_be(&path).unwrap(), be);
        let err = read_lc(&path).unwrap_err().to_string();
        assert!(err.contains("role \"be\", expected \"lc\""), "{err}");
        // Older files without the optional fields still read.
        fs::write(
            &path,
            r#"{"role":"lc","requests":1,"latencies_ms":[15.2],"p50_ms":15.2,"p99_ms":15.2,
               "p999_ms":15.2,"work_ms_per_request":15,"duration_s":20,"rate":20}"#,
        )
        .unwrap();
        let lc = read_lc(&path).unwrap();
        assert_eq!((lc.chain, lc.incomplete), (0, 0));
        assert!((lc.load() - 0.3).abs() < 1e-12);
        write_atomically(&path, "x").unwrap();
        assert_eq!(fs::read_to_string(&path).unwrap(), "x");
        fs::remove_dir_all(&dir).unwrap();
    }
}
