//! The statistics: the snapshot of the daemon's state, and handing it to
//! its outputs ([`super::reporter`]).

use std::{collections::HashSet, time::Duration};

use kfd_preempt::QueueRef;

use super::{unix_ms, Backend, Daemon, Sink};
use crate::stats::{DecisionView, Stats, TenantStats};

impl<B: Backend> Daemon<'_, B> {
    /// The statistics now.
    pub fn stats(&self, now: Duration) -> Stats {
        let held: HashSet<QueueRef> = self
            .decisions
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
                    self.decisions
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
            .decisions
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
        let mut stats = crate::stats::snapshot(
            &self.pcfg,
            &self.cfg.daemon.levels,
            &views,
            now,
            now.saturating_sub(self.started),
            unix_ms(),
            tenants,
        );
        stats.hints = self.hint_stats();
        stats
    }

    pub(super) fn write_stats(&mut self, now: Duration) {
        if self.sink.is_empty() {
            return;
        }
        if matches!(&self.sink, Sink::Thread(r) if r.is_dead()) {
            self.sink = Sink::Lost;
            self.warn(
                "stats",
                &"the report thread died: no statistics nor metrics from now on",
            );
            return;
        }
        let s = self.stats(now);
        match &mut self.sink {
            Sink::Inline(o) => o.write(&s),
            Sink::Thread(r) => r.submit(s),
            Sink::Lost => {}
        }
    }

    /// Writes the last statistics before the daemon stops, and waits until
    /// they are written.
    pub(super) fn write_final_stats(&mut self, now: Duration) {
        if self.sink.is_empty() {
            return;
        }
        let s = self.stats(now);
        self.sink = match std::mem::replace(&mut self.sink, Sink::Lost) {
            Sink::Inline(mut o) => {
                o.write(&s);
                Sink::Inline(o)
            }
            Sink::Thread(r) => match r.finish(s) {
                Some(o) => Sink::Inline(o),
                None => {
                    self.warn(
                        "stats",
                        &"the report thread died: the last statistics are not written",
                    );
                    Sink::Lost
                }
            },
            Sink::Lost => Sink::Lost,
        };
    }
}
