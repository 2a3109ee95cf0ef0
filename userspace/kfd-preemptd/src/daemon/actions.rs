//! Carrying out the policies' actions: one small method per action, and
//! the PREEMPT batch that the decisions acting at the same moment share.

use std::{
    collections::{BTreeSet, HashMap, HashSet, VecDeque},
    os::fd::AsFd,
    time::Duration,
};

use kfd_preempt::{ArmCondition, BatchReport, EntryError, Outcome, QueueRef, Sample};
use rustix::io::Errno;
use serde_json::{json, Value};

use super::{
    decision_name, monotonic,
    watcher::{confirm, ArmState, Confirmation},
    Backend, Daemon, DecisionKey,
};
use crate::{
    log::Level,
    policy::{Action, Event, PreemptReason, RenewReason, ResumeReason},
};

/// A PREEMPT batch's outcomes, summed up.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PreemptSummary {
    /// Entries now held (done, already, deferred).
    pub ok: usize,
    /// Entries refused by the rate limit (`EAGAIN`): nothing changed.
    pub too_soon: usize,
    /// Entries whose queue or process is gone: the next scan drops them.
    pub gone: usize,
    /// Other failures.
    pub failed: usize,
}

impl PreemptSummary {
    /// Sums up `report`.
    pub fn of(report: &BatchReport) -> Self {
        let mut s = PreemptSummary::default();
        for (_, o) in &report.outcomes {
            match o {
                o if o.is_success() => s.ok += 1,
                Outcome::Failed(EntryError::TooSoon) => s.too_soon += 1,
                Outcome::Failed(EntryError::QueueGone | EntryError::TargetExited) => s.gone += 1,
                _ => s.failed += 1,
            }
        }
        s
    }

    /// The event to feed the policy after a PreemptLower batch: held if any
    /// entry took; retried after `retry_delay` for rate-limited entries,
    /// after `slow_retry` if every entry failed otherwise.
    pub fn feedback(&self, retry_delay: Duration, slow_retry: Duration) -> Event {
        if self.ok > 0 {
            Event::PreemptDone {
                retry_after: (self.too_soon > 0).then_some(retry_delay),
            }
        } else if self.too_soon > 0 {
            Event::PreemptFailed {
                retry_after: retry_delay,
            }
        } else {
            Event::PreemptFailed {
                retry_after: slow_retry,
            }
        }
    }

    fn outcome(&self) -> &'static str {
        match (self.ok, self.too_soon + self.gone + self.failed) {
            (_, 0) => "ok",
            (0, _) => "failed",
            _ => "partial",
        }
    }
}

/// What one decision asked of a shared PREEMPT batch.
enum Ask {
    Preempt(PreemptReason),
    Renew(RenewReason),
}

impl<B: Backend> Daemon<'_, B> {
    /// Feeds events to their decisions and carries out the actions, with
    /// the events they lead to, until none are left.
    pub(super) fn feed(&mut self, events: Vec<(DecisionKey, Duration, Event)>) {
        let mut actions = Vec::new();
        for (key, at, event) in events {
            if let Some(a) = self.decisions.get_mut(&key) {
                actions.extend(a.policy.handle(at, event).into_iter().map(|x| (key, x)));
            }
        }
        self.carry_out(actions);
    }

    /// Carries out `actions`, then those of the events they lead to, until
    /// none are left. Each decision's actions are carried out in the order
    /// its policy gave them: one wakeup may bring a decision a resume and
    /// then a preemption (one connection's hint ended, another's given),
    /// and only that order leaves the queues as the policy holds them.
    /// Across decisions the order does not matter (a resume leaves alone
    /// what another decision holds, [`Self::resume`]), so the preemptions
    /// and renewals first in line of every decision go in one PREEMPT
    /// batch, ahead of the other decisions' actions: a reaction waits
    /// neither for a second PREEMPT nor for another decision's ARM.
    pub(super) fn carry_out(&mut self, actions: Vec<(DecisionKey, Action)>) {
        let mut queue: VecDeque<(DecisionKey, Action)> = actions.into();
        while !queue.is_empty() {
            // Each decision's first action in line, if it is a preemption
            // or a renewal.
            let mut seen = HashSet::new();
            let batched: Vec<usize> = (0..queue.len())
                .filter(|&i| seen.insert(queue[i].0) && is_preempt(&queue[i].1))
                .collect();
            let followups = if batched.is_empty() {
                // The first in the queue is first in its decision's line.
                match queue.pop_front() {
                    Some((key, action)) => self.execute(key, action).into_iter().collect(),
                    None => Vec::new(),
                }
            } else {
                // Taken from the back, so that the indices left stay right.
                let mut batch: Vec<_> = batched
                    .iter()
                    .rev()
                    .filter_map(|&i| queue.remove(i))
                    .collect();
                batch.reverse();
                self.preempt_batch(batch)
            };
            for (key, at, event) in followups {
                if let Some(a) = self.decisions.get_mut(&key) {
                    queue.extend(a.policy.handle(at, event).into_iter().map(|x| (key, x)));
                }
            }
        }
    }

    /// Carries out one action other than a preemption or renewal.
    fn execute(
        &mut self,
        key: DecisionKey,
        action: Action,
    ) -> Option<(DecisionKey, Duration, Event)> {
        match action {
            Action::PreemptLower { .. } | Action::RenewLease { .. } => {
                let out = self.preempt_batch(vec![(key, action)]);
                out.into_iter().next()
            }
            Action::ResumeLower { reason } => {
                self.resume(key, reason);
                None
            }
            Action::ArmAnyBusy { period } => {
                self.arm_any_busy(key, period);
                None
            }
            Action::ArmAllIdle { period, idle } => {
                self.arm_all_idle(key, period, idle);
                None
            }
            Action::Disarm => {
                self.disarm(key);
                None
            }
        }
    }

    /// One PREEMPT of the lower queues of every decision in `asks` (each
    /// queue named once), with the lease; each decision then hears of its
    /// own entries' outcomes.
    fn preempt_batch(
        &mut self,
        asks: Vec<(DecisionKey, Action)>,
    ) -> Vec<(DecisionKey, Duration, Event)> {
        let lease = self.pcfg.lease;
        let mut refs: Vec<QueueRef> = Vec::new();
        let mut seen: HashSet<QueueRef> = HashSet::new();
        let mut wanted: Vec<(DecisionKey, Ask, Vec<QueueRef>)> = Vec::new();
        for (key, action) in asks {
            let ask = match action {
                Action::PreemptLower { reason, .. } => Ask::Preempt(reason),
                Action::RenewLease { reason, .. } => Ask::Renew(reason),
                _ => continue,
            };
            let lower = self
                .decisions
                .get(&key)
                .map(|a| a.lower.clone())
                .unwrap_or_default();
            for q in &lower {
                if seen.insert(*q) {
                    refs.push(*q);
                }
            }
            wanted.push((key, ask, lower));
        }
        let issued = monotonic();
        let result = if refs.is_empty() {
            None
        } else {
            Some(self.dev.preempt(&refs, lease))
        };
        let done = monotonic();
        let node_time = match &result {
            Some(Ok(report)) => report.elapsed,
            _ => Duration::ZERO,
        };
        let outcomes: HashMap<QueueRef, Outcome> = match &result {
            Some(Ok(report)) => report.outcomes.iter().copied().collect(),
            _ => HashMap::new(),
        };
        if let Some(Ok(report)) = &result {
            self.log_failures("preempt", report);
        }
        let mut events = Vec::new();
        let mut preempted = Vec::new();
        for (key, ask, lower) in wanted {
            let own = BatchReport {
                outcomes: lower
                    .iter()
                    .filter_map(|q| outcomes.get(q).map(|o| (*q, *o)))
                    .collect(),
                num_ok: 0,
                runlist_updates: 0,
                elapsed: Duration::ZERO,
            };
            let error = match &result {
                Some(Err(e)) => Some(e),
                _ => None,
            };
            match ask {
                Ask::Preempt(reason) => {
                    let event = self.preempt_event(lower.len(), &own, error);
                    if reason == PreemptReason::LcBusy && matches!(event, Event::PreemptDone { .. })
                    {
                        if let Some(a) = self.decisions.get_mut(&key) {
                            if let Some((woke, sampled)) = a.woke_at.take() {
                                a.phases.record(woke, sampled, issued, done, node_time);
                            }
                        }
                    }
                    preempted.push((key, reason, lower.len(), PreemptSummary::of(&own), event));
                    events.push((key, done, event));
                }
                Ask::Renew(reason) => {
                    if let Some(e) = self.renew_event(key, reason, lower.len(), &own, error) {
                        events.push((key, done, e));
                    }
                }
            }
        }
        if !preempted.is_empty() {
            self.log_preempt(done, &preempted, result.as_ref());
        }
        events
    }

    /// What a decision's preemption led to.
    fn preempt_event(
        &self,
        wanted: usize,
        own: &BatchReport,
        error: Option<&kfd_preempt::Error>,
    ) -> Event {
        let scan = self.cfg.daemon.scan_interval();
        if wanted == 0 {
            // The policy counts queues as the scans report them, so this
            // does not happen; an empty batch would be no preemption.
            return Event::PreemptFailed { retry_after: scan };
        }
        match error {
            None => PreemptSummary::of(own).feedback(self.retry_delay, scan),
            Some(e) => {
                let again =
                    matches!(e, kfd_preempt::Error::Os { errno, .. } if *errno == Errno::AGAIN);
                Event::PreemptFailed {
                    retry_after: if again { self.retry_delay } else { scan },
                }
            }
        }
    }

    /// One log line for the preemptions of a batch.
    fn log_preempt(
        &self,
        done: Duration,
        preempted: &[(DecisionKey, PreemptReason, usize, PreemptSummary, Event)],
        result: Option<&Result<BatchReport, kfd_preempt::Error>>,
    ) {
        let mut total = PreemptSummary::default();
        let mut queues = 0;
        let mut latency: Option<Duration> = None;
        let mut ok = false;
        for (key, reason, n, s, event) in preempted {
            queues += n;
            total.ok += s.ok;
            total.too_soon += s.too_soon;
            total.gone += s.gone;
            total.failed += s.failed;
            if matches!(event, Event::PreemptDone { .. }) {
                ok = true;
                if matches!(reason, PreemptReason::LcBusy | PreemptReason::Retry) {
                    if let Some(edge) = self.decisions.get(key).and_then(|a| a.last_edge) {
                        let l = done.saturating_sub(edge);
                        latency = Some(latency.map_or(l, |m| m.max(l)));
                    }
                }
            }
        }
        let decisions: Vec<String> = preempted
            .iter()
            .map(|(k, ..)| decision_name(self.cfg, *k))
            .collect();
        let mut reasons: Vec<&str> = preempted.iter().map(|p| p.1.as_str()).collect();
        reasons.dedup();
        let reason = reasons.join(",");
        let mut fields = vec![
            ("reason", json!(reason)),
            ("decisions", json!(decisions.join(","))),
            ("queues", json!(queues)),
        ];
        match result {
            Some(Ok(report)) => fields.extend([
                ("outcome", json!(total.outcome())),
                ("ok", json!(total.ok)),
                ("too_soon", json!(total.too_soon)),
                ("gone", json!(total.gone)),
                ("failed", json!(total.failed)),
                ("runlist_updates", json!(report.runlist_updates)),
                ("elapsed_us", json!(report.elapsed.as_micros() as u64)),
            ]),
            Some(Err(e)) => {
                fields.extend([("outcome", json!("error")), ("error", json!(e.to_string()))])
            }
            None => fields.push(("outcome", json!("nothing-to-preempt"))),
        }
        fields.push((
            "latency_us",
            latency.map_or(Value::Null, |l| json!(l.as_micros() as u64)),
        ));
        let level = if ok { Level::Info } else { Level::Warn };
        self.log.log(level, "preempt", &fields);
    }

    /// What a decision's renewal led to; renewals that change nothing
    /// (every queue `Already`) are routine and not logged.
    fn renew_event(
        &self,
        key: DecisionKey,
        reason: RenewReason,
        wanted: usize,
        own: &BatchReport,
        error: Option<&kfd_preempt::Error>,
    ) -> Option<Event> {
        let refused = Event::RenewRefused {
            retry_after: self.retry_delay,
        };
        if let Some(e) = error {
            self.log.log(
                Level::Warn,
                "renew",
                &[
                    ("reason", json!(reason.as_str())),
                    ("decision", json!(decision_name(self.cfg, key))),
                    ("queues", json!(wanted)),
                    ("outcome", json!("error")),
                    ("error", json!(e.to_string())),
                ],
            );
            return Some(refused);
        }
        let s = PreemptSummary::of(own);
        let newly = own
            .outcomes
            .iter()
            .filter(|(_, o)| *o == Outcome::Done)
            .count();
        if newly > 0 || s.ok < wanted {
            self.log.log(
                if s.failed > 0 {
                    Level::Warn
                } else {
                    Level::Info
                },
                "renew",
                &[
                    ("reason", json!(reason.as_str())),
                    ("decision", json!(decision_name(self.cfg, key))),
                    ("queues", json!(wanted)),
                    ("newly_preempted", json!(newly)),
                    ("too_soon", json!(s.too_soon)),
                    ("gone", json!(s.gone)),
                    ("failed", json!(s.failed)),
                ],
            );
        }
        (s.too_soon > 0).then_some(refused)
    }

    /// The queues held by decisions other than `key`.
    fn held_by_others(&self, key: DecisionKey) -> HashSet<QueueRef> {
        self.decisions
            .iter()
            .filter(|(k, a)| **k != key && a.policy.is_held())
            .flat_map(|(_, a)| a.lower.iter().copied())
            .collect()
    }

    /// RESUME of a decision's lower queues, but for those another decision
    /// still holds (a higher level busy on the same node).
    fn resume(&mut self, key: DecisionKey, reason: ResumeReason) {
        let others = self.held_by_others(key);
        let all = self
            .decisions
            .get(&key)
            .map(|a| a.lower.clone())
            .unwrap_or_default();
        let refs: Vec<QueueRef> = all
            .iter()
            .copied()
            .filter(|q| !others.contains(q))
            .collect();
        let mut fields = vec![
            ("reason", json!(reason.as_str())),
            ("decision", json!(decision_name(self.cfg, key))),
            ("queues", json!(refs.len())),
        ];
        if refs.len() < all.len() {
            fields.push(("still_held", json!(all.len() - refs.len())));
        }
        let level = if refs.is_empty() {
            fields.push(("outcome", json!("nothing-held")));
            Level::Info
        } else {
            match self.dev.resume(&refs) {
                Ok(report) => {
                    let bad = report
                        .outcomes
                        .iter()
                        .filter(|(_, o)| {
                            !o.is_success()
                                && !matches!(
                                    o,
                                    Outcome::Failed(
                                        EntryError::QueueGone | EntryError::TargetExited
                                    )
                                )
                        })
                        .count();
                    fields.extend([
                        ("outcome", json!(if bad == 0 { "ok" } else { "partial" })),
                        ("failed", json!(bad)),
                        ("runlist_updates", json!(report.runlist_updates)),
                        ("elapsed_us", json!(report.elapsed.as_micros() as u64)),
                    ]);
                    self.log_failures("resume", &report);
                    if bad == 0 {
                        Level::Info
                    } else {
                        Level::Warn
                    }
                }
                Err(e) => {
                    // The lease ends the hold anyway, and closing the
                    // device at exit resumes everything.
                    fields.extend([("outcome", json!("error")), ("error", json!(e.to_string()))]);
                    Level::Warn
                }
            }
        };
        if reason != ResumeReason::Shutdown || !refs.is_empty() {
            self.log.log(level, "resume", &fields);
        }
    }

    fn arm_any_busy(&mut self, key: DecisionKey, period: Duration) {
        let Some(w) = self
            .decisions
            .get_mut(&key)
            .and_then(|a| a.watcher.as_mut())
        else {
            return;
        };
        // The baseline for "a write index moved": read before the ARM, so
        // a burst in between counts as activity; this pass's wakeup read
        // one already.
        let woken = w
            .woken
            .take()
            .map(|s| write_indices(&s))
            .filter(|b| w.watched.values().flatten().all(|q| b.contains_key(q)));
        let baseline = match woken {
            Some(b) => b,
            None => {
                w.drain();
                w.file
                    .sample()
                    .map_or_else(|_| HashMap::new(), |s| write_indices(&s))
            }
        };
        let r = w.file.arm(ArmCondition::AnyBusy, period, w.efd.as_fd());
        self.armed(
            key,
            Action::ArmAnyBusy { period },
            r,
            ArmState::AnyBusy { baseline },
        );
    }

    fn arm_all_idle(&mut self, key: DecisionKey, period: Duration, idle: Duration) {
        let Some(w) = self
            .decisions
            .get_mut(&key)
            .and_then(|a| a.watcher.as_mut())
        else {
            return;
        };
        if w.woken.take().is_none() {
            w.drain();
        }
        let armed_at = monotonic();
        let r = w
            .file
            .arm(ArmCondition::AllIdle { idle }, period, w.efd.as_fd());
        self.armed(
            key,
            Action::ArmAllIdle { period, idle },
            r,
            ArmState::AllIdle { idle, armed_at },
        );
    }

    fn armed(
        &mut self,
        key: DecisionKey,
        action: Action,
        r: Result<(), kfd_preempt::Error>,
        state: ArmState,
    ) {
        let Some(w) = self
            .decisions
            .get_mut(&key)
            .and_then(|a| a.watcher.as_mut())
        else {
            return;
        };
        match r {
            Ok(()) => {
                w.arm = state;
                w.arm_pending = None;
            }
            Err(e) => {
                // Without an ARM, this level's activity goes unseen:
                // retried at every scan, logged the first time.
                let first = w.arm_pending.is_none();
                w.arm = ArmState::Off;
                w.arm_pending = Some(action);
                if first {
                    self.log.log(
                        Level::Warn,
                        "arm",
                        &[
                            ("decision", json!(decision_name(self.cfg, key))),
                            ("outcome", json!("error")),
                            ("error", json!(e.to_string())),
                        ],
                    );
                }
            }
        }
    }

    fn disarm(&mut self, key: DecisionKey) {
        let Some(w) = self
            .decisions
            .get_mut(&key)
            .and_then(|a| a.watcher.as_mut())
        else {
            return;
        };
        let r = w.file.disarm();
        w.arm = ArmState::Off;
        w.arm_pending = None;
        w.drain();
        if let Err(e) = r {
            self.warn("disarm", &e);
        }
    }

    /// ARMs again what a decision's mode wants (after a wakeup that did
    /// not hold up, or a failed ARM).
    pub(super) fn rearm(&mut self, key: DecisionKey) {
        let period = self.pcfg.sample_period;
        let Some(w) = self.decisions.get(&key).and_then(|a| a.watcher.as_ref()) else {
            return;
        };
        let action = match &w.arm {
            ArmState::Off => w.arm_pending,
            ArmState::AnyBusy { .. } => Some(Action::ArmAnyBusy { period }),
            ArmState::AllIdle { idle, .. } => Some(Action::ArmAllIdle {
                period,
                idle: *idle,
            }),
        };
        if let Some(a) = action {
            let _ = self.execute(key, a);
        }
    }

    /// Eventfds fired: each decision's file is SAMPLEd to confirm, then the
    /// policies hear of it together, so that decisions busy at the same
    /// moment share one PREEMPT.
    pub(super) fn on_wakeups(&mut self, keys: &[DecisionKey]) {
        let mut events = Vec::new();
        let mut busy_logs = Vec::new();
        for key in keys {
            let Some(w) = self.decisions.get(key).and_then(|a| a.watcher.as_ref()) else {
                continue;
            };
            let woke = monotonic();
            w.drain();
            let sample = match w.file.sample() {
                Ok(s) => s,
                Err(e) => {
                    self.warn("sample", &e);
                    self.rearm(*key);
                    continue;
                }
            };
            let now = monotonic();
            let exited: BTreeSet<i32> = sample
                .queues
                .iter()
                .filter(|a| a.gone)
                .filter_map(|a| w.pid_of(a.queue.handle))
                .collect();
            // Exited tenants first: their decision may end with them.
            for pid in exited {
                self.remove_exited_tenant(pid);
            }
            let Some(w) = self.decisions.get_mut(key).and_then(|a| a.watcher.as_mut()) else {
                continue;
            };
            let confirmation = confirm(&w.arm, &sample);
            let (edge, pending, watched) =
                (sample.timestamp, sample.num_pending, sample.queues.len());
            let published = Event::Published {
                total: w.published.update(&sample),
            };
            w.woken = Some(sample);
            match confirmation {
                Confirmation::Busy => {
                    if let Some(a) = self.decisions.get_mut(key) {
                        a.last_edge = Some(edge);
                        a.woke_at = Some((woke, now));
                    }
                    events.push((*key, now, published));
                    events.push((*key, now, Event::LcBusy { edge }));
                    busy_logs.push((*key, pending, watched));
                }
                Confirmation::Idle => {
                    self.log.log(
                        Level::Info,
                        "lc-idle",
                        &[
                            ("decision", json!(decision_name(self.cfg, *key))),
                            ("watched", json!(watched)),
                        ],
                    );
                    events.push((*key, now, published));
                    events.push((*key, now, Event::LcIdle { edge }));
                }
                Confirmation::Rearm => self.rearm(*key),
                Confirmation::Ignore => {}
            }
        }
        // Removals above may have fed the policies at a later time than
        // the events were stamped with: a policy's time never goes back.
        let now = monotonic();
        let events = events.into_iter().map(|(k, _, e)| (k, now, e)).collect();
        self.feed(events);
        // A later pass reads its own baseline, and empties the eventfd.
        for key in keys {
            if let Some(w) = self.decisions.get_mut(key).and_then(|a| a.watcher.as_mut()) {
                w.woken = None;
            }
        }
        // Logged after the reaction, which a slow journal must not delay
        // (the preempt line comes first, reason=lc-busy).
        for (key, pending, watched) in busy_logs {
            self.log.log(
                Level::Info,
                "lc-busy",
                &[
                    ("decision", json!(decision_name(self.cfg, key))),
                    ("pending", json!(pending)),
                    ("watched", json!(watched)),
                ],
            );
        }
    }

    fn log_failures(&self, what: &str, report: &BatchReport) {
        for (q, o) in report.failures() {
            if matches!(
                o,
                Outcome::Failed(
                    EntryError::QueueGone | EntryError::TargetExited | EntryError::TooSoon
                )
            ) {
                continue;
            }
            let pid = self.pid_of(q.handle);
            self.log.log(
                Level::Warn,
                what,
                &[
                    ("pid", json!(pid)),
                    ("queue", json!(q.to_string())),
                    ("outcome", json!(o.to_string())),
                ],
            );
        }
    }
}

/// Whether `action` goes in a PREEMPT batch.
fn is_preempt(action: &Action) -> bool {
    matches!(
        action,
        Action::PreemptLower { .. } | Action::RenewLease { .. }
    )
}

/// Each sampled queue's write index: an `ANY_BUSY` ARM's baseline.
fn write_indices(sample: &Sample) -> HashMap<QueueRef, u64> {
    sample
        .queues
        .iter()
        .map(|a| (a.queue, a.write_index))
        .collect()
}
