//! The statistics file.

use std::{collections::HashSet, path::Path, time::Duration};

use kfd_preempt::QueueRef;
use serde_json::json;

use super::{unix_ms, Backend, Daemon};
use crate::{
    log::Level,
    metrics,
    stats::{self, DecisionView, Stats, TenantStats},
};

impl<B: Backend> Daemon<'_, B> {
    /// The statistics now.
    pub fn stats(&self, now: Duration) -> Stats {
        let held: HashSet<QueueRef> = self
            .arenas
            .values()
            .filter(|a| a.policy.is_held())
            .flat_map(|a| a.lower.iter().copied())
            .collect();
        let tenants = self
            .tenants
            .iter()
            .map(|(pid, t)| {
                let held_queues = t.queues.iter().filter(|q| held.contains(q)).count();
                // As in version 1: a watched level's tenant counts its
                // watched queues, the lowest level's its compute queues.
                let queues = if t.rank == 0 {
                    t.queues.len()
                } else {
                    self.arenas
                        .iter()
                        .filter(|((_, rank), _)| *rank == t.rank)
                        .filter_map(|(_, a)| a.watcher.as_ref())
                        .filter_map(|w| w.watched.get(pid))
                        .map(Vec::len)
                        .sum()
                };
                let mut nodes: Vec<u32> = t.queues.iter().map(|q| q.gpu_id).collect();
                nodes.sort_unstable();
                nodes.dedup();
                TenantStats {
                    pid: *pid,
                    comm: t.comm.clone(),
                    class: t.class_name.clone(),
                    priority: self
                        .cfg
                        .daemon
                        .levels
                        .get(t.rank)
                        .cloned()
                        .unwrap_or_default(),
                    rank: t.rank,
                    queues,
                    held_queues,
                    held: held_queues > 0,
                    nodes,
                }
            })
            .collect();
        let views: Vec<DecisionView<'_>> = self
            .arenas
            .iter()
            .map(|((gpu_id, rank), a)| DecisionView {
                gpu_id: *gpu_id,
                level: self
                    .cfg
                    .daemon
                    .levels
                    .get(*rank)
                    .map_or("?", String::as_str),
                rank: *rank,
                policy: &a.policy,
                watched_queues: a.watched(),
                lower_queues: a.lower.len(),
                phases: &a.phases,
            })
            .collect();
        Stats::snapshot(
            &self.pcfg,
            &self.cfg.daemon.levels,
            &views,
            now,
            now.saturating_sub(self.started),
            unix_ms(),
            tenants,
        )
    }

    pub(super) fn write_stats(&mut self, now: Duration) {
        if self.stats_path.is_none() && self.metrics.is_none() {
            return;
        }
        let s = self.stats(now);
        if let Some(m) = &self.metrics {
            m.publish(metrics::render(&s));
        }
        let Some(path) = self.stats_path.clone() else {
            return;
        };
        match write_stats_file(&path, &s) {
            Ok(()) => self.stats_failing = false,
            Err(e) => {
                if !self.stats_failing {
                    self.log.log(
                        Level::Warn,
                        "stats",
                        &[
                            ("path", json!(path.display().to_string())),
                            ("error", json!(e.to_string())),
                        ],
                    );
                }
                self.stats_failing = true;
            }
        }
    }
}

fn write_stats_file(path: &Path, s: &Stats) -> std::io::Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    stats::write_atomic(path, s)
}
