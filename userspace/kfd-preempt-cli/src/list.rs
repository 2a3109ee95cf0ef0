//! `kfd-preempt list PID`: a table (or JSON) of a process's queues.

use kfd_preempt::{sim::SimTenant, Device, QueueInfo};
use serde::Serialize;

use crate::{CliResult, Done};

/// One row of `list --json`.
#[derive(Serialize, Debug, PartialEq)]
pub(crate) struct QueueRow {
    pub gpu_id: u32,
    pub queue_id: u32,
    #[serde(rename = "type")]
    pub queue_type: String,
    pub state: Vec<String>,
    pub ring_base_address: String,
    pub ring_size: u64,
    pub doorbell_id: u32,
    pub doorbell_off: u32,
    pub priority: u32,
    pub gc_ip_version: String,
    /// Simulated tenants only: work units retired so far.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retired: Option<u64>,
}

impl QueueRow {
    pub(crate) fn new(q: &QueueInfo, retired: Option<u64>) -> Self {
        QueueRow {
            gpu_id: q.gpu_id,
            queue_id: q.queue_id,
            queue_type: q.queue_type.to_string(),
            state: q.state.names(),
            ring_base_address: format!("{:#x}", q.ring_base_address),
            ring_size: q.ring_size,
            doorbell_id: q.doorbell_id,
            doorbell_off: q.doorbell_off,
            priority: q.priority,
            gc_ip_version: format!("{:#08x}", q.gc_ip_version),
            retired,
        }
    }
}

/// The rows of `queues` of process `pid`, with each queue's progress if
/// `pid` is a simulated tenant.
pub(crate) fn rows(pid: i32, queues: &[QueueInfo]) -> Vec<QueueRow> {
    let tenant = SimTenant::of_pid(pid).ok();
    queues
        .iter()
        .map(|q| {
            let retired = tenant.as_ref().and_then(|t| t.status(q.queue_id).ok());
            QueueRow::new(q, retired.map(|s| s.retired))
        })
        .collect()
}

/// Formats `rows` as the table `list` and `watch` print.
pub(crate) fn table(rows: &[QueueRow]) -> String {
    let sim = rows.iter().any(|r| r.retired.is_some());
    let mut out = format!(
        "{:<8} {:>5}  {:<11} {:<24} {:<18} {:>8}  {:<14} {:>4}{}\n",
        "GPU",
        "QUEUE",
        "TYPE",
        "STATE",
        "RING",
        "SIZE",
        "DOORBELL",
        "PRIO",
        if sim { "  RETIRED" } else { "" }
    );
    for r in rows {
        let state = if r.state.is_empty() {
            "inactive".to_string()
        } else {
            r.state.join(",")
        };
        out += &format!(
            "{:<8} {:>5}  {:<11} {:<24} {:<18} {:>8}  {:<14} {:>4}{}\n",
            format!("{:#x}", r.gpu_id),
            r.queue_id,
            r.queue_type,
            state,
            r.ring_base_address,
            r.ring_size,
            format!("{} @{:#x}", r.doorbell_id, r.doorbell_off),
            r.priority,
            r.retired.map(|n| format!("  {n:>7}")).unwrap_or_default()
        );
    }
    out
}

pub(crate) fn list(pid: i32, gpu: Option<u32>, json: bool) -> CliResult {
    let dev = Device::open()?;
    let target = dev.attach(pid)?;
    let queues = match gpu {
        Some(g) => target.query_gpu(g)?,
        None => target.query()?,
    };
    let rows = rows(pid, &queues);
    if json {
        let v = serde_json::json!({ "pid": pid, "tgid": target.tgid(), "queues": rows });
        println!("{v:#}");
    } else if rows.is_empty() {
        println!("process {pid} has no queues");
    } else {
        print!("{}", table(&rows));
    }
    Ok(Done::Ok)
}

#[cfg(test)]
mod tests {
    use super::*;
    use kfd_preempt::{Handle, QueueState, QueueType};

    fn queue(id: u32, state: u32) -> QueueInfo {
        QueueInfo {
            handle: Handle(1),
            gpu_id: 0x5100,
            queue_id: id,
            queue_type: QueueType::ComputeAql,
            state: QueueState(state),
            ring_base_address: 0x7f00_0000_1000,
            ring_size: 4096,
            read_pointer_address: 0,
            write_pointer_address: 0,
            ctx_save_restore_address: 0,
            ctx_save_restore_size: 0,
            doorbell_id: 3,
            doorbell_off: 0x18,
            priority: 7,
            queue_percent: 100,
            gc_ip_version: 0x090403,
        }
    }

    #[test]
    fn table_has_the_columns_operators_need() {
        let rows = [
            QueueRow::new(&queue(0, QueueState::ACTIVE), None),
            QueueRow::new(&queue(1, QueueState::SUSPENDED | QueueState::OWNED), None),
        ];
        let t = table(&rows);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines.len(), 3);
        for col in ["GPU", "QUEUE", "TYPE", "STATE", "RING", "DOORBELL"] {
            assert!(lines[0].contains(col), "{col} missing");
        }
        assert!(!lines[0].contains("RETIRED"));
        assert!(lines[1].contains("0x5100") && lines[1].contains("compute-aql"));
        assert!(lines[1].contains("0x7f0000001000") && lines[1].contains("3 @0x18"));
        assert!(lines[2].contains("suspended,owned"));
    }

    #[test]
    fn simulated_tenants_get_a_progress_column() {
        let t = table(&[QueueRow::new(&queue(0, 0), Some(1234))]);
        assert!(t.lines().next().is_some_and(|h| h.contains("RETIRED")));
        assert!(t.contains("1234") && t.contains("inactive"));
    }

    #[test]
    fn json_rows_are_stable() {
        let v = serde_json::to_value(QueueRow::new(&queue(2, QueueState::ACTIVE), None)).unwrap();
        assert_eq!(v["queue_id"], 2);
        assert_eq!(v["type"], "compute-aql");
        assert_eq!(v["state"][0], "active");
        assert_eq!(v["ring_base_address"], "0x7f0000001000");
        assert_eq!(v["gc_ip_version"], "0x090403");
        assert!(v.get("retired").is_none());
    }
}
