//! Tenants and their queues: discovery's results attached, their queues
//! re-queried at each scan, and every decision brought in line with them.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use kfd_preempt::{QueueRef, QueueState};

/// A tenant's queues as `refresh_held` compares them.
type QueueSnapshot = (
    Vec<QueueRef>,
    std::collections::HashMap<QueueRef, u64>,
    std::collections::HashSet<QueueRef>,
);
use serde_json::json;

use super::{
    decision::Decision,
    decision_name, is_compute,
    lister::Listing,
    monotonic,
    watcher::Watcher,
    watcher::{key_of, QueueKey},
    ArmState, Attached, Backend, Daemon, DecisionKey, Tenant,
};
use crate::{config::Priority, discover::Candidate, log::Level, policy::Role};

/// Why a tenant was dropped, as its `detach` line says: discovery's
/// listing found the process gone; QUERY or SAMPLE found its KFD process
/// gone (the pid may live on, as after an exec or a close of the device);
/// QUERY did not know the daemon's handle of it any more.
const EXITED: &str = "exited";
const GONE_BY_QUERY: &str = "kfd-gone-query";
const GONE_BY_SAMPLE: &str = "kfd-gone-sample";
const HANDLE_UNKNOWN: &str = "handle-unknown";

/// The queues a decision watches, by pid.
type WatchedQueues = BTreeMap<i32, Vec<QueueKey>>;

/// A decision's members and lower queues, from its watcher and the
/// queues of its node (`rank`: its level): sets `decision`'s lower queues
/// and returns its members (each tenant's role and queue count) and the
/// lower tenants whose queues the policy must hear of again.
///
/// A lower tenant with a queue the decision did not name before (a queue
/// replaced by another, the count unchanged, or its id given to a new
/// queue at another ring) is news to the policy too: while held, the new
/// queue must be taken. So is a queue the decision holds that the module
/// says it does not: its id and ring came back on a new queue.
fn sync_members<B: Backend>(
    decision: &mut Decision<B>,
    node_queues: &[NodeQueue],
    rank: usize,
) -> (BTreeMap<i32, (Role, usize)>, BTreeSet<i32>) {
    let mut members: BTreeMap<i32, (Role, usize)> = BTreeMap::new();
    if let Some(w) = &decision.watcher {
        for (pid, qs) in &w.watched {
            if !qs.is_empty() {
                members.insert(*pid, (Role::Watched, qs.len()));
            }
        }
    }
    let held = decision.policy.is_held();
    let mut renamed: BTreeSet<i32> = BTreeSet::new();
    let mut lower = Vec::new();
    let mut lower_rings = HashMap::new();
    for nq in node_queues.iter().filter(|nq| nq.rank < rank) {
        lower.push(nq.queue);
        lower_rings.insert(nq.queue, nq.ring);
        members.entry(nq.pid).or_insert((Role::Lower, 0)).1 += 1;
        if decision.lower_rings.get(&nq.queue) != Some(&nq.ring) || (held && nq.not_held) {
            renamed.insert(nq.pid);
        }
    }
    decision.lower = lower;
    decision.lower_rings = lower_rings;
    (members, renamed)
}

/// A tenant's compute queue on a node, as the decisions there see it.
struct NodeQueue {
    pid: i32,
    /// Its tenant's level.
    rank: usize,
    queue: QueueRef,
    /// Its ring's address.
    ring: u64,
    /// QUERY found it not held by this daemon.
    not_held: bool,
}

impl<B: Backend> Daemon<'_, B> {
    /// Finds new and gone tenants, re-queries the queues of every tenant.
    pub(super) fn scan(&mut self) {
        let listing = self.dev.processes();
        self.apply_listing(listing);
    }

    /// Acts on one listing of the KFD processes.
    pub(super) fn apply_listing(&mut self, listing: Listing) {
        let result = match listing {
            Ok(listed) => self.discovery.scan_listed(self.cfg, &listed),
            Err(e) => {
                self.warn("scan", &e);
                // The known tenants' queues are queried all the same.
                self.refresh_tenants();
                return;
            }
        };
        for pid in &result.gone {
            self.refused.remove(pid);
            self.inherited.remove(pid);
            self.tenants_remove(*pid, EXITED);
        }
        for c in result.added {
            self.add_tenant(c);
        }
        self.recheck_inherited();
        self.refresh_tenants();
    }

    /// Re-queries every tenant's queues and brings the decisions in line:
    /// after a listing, and on the loop's own clock between listings, so
    /// that a queue made again is found within a scan interval even while
    /// the scan thread waits for a CPU.
    pub(super) fn refresh_tenants(&mut self) {
        let pids: Vec<i32> = self.tenants.keys().copied().collect();
        for (pid, why) in self.query_queues_of(&pids) {
            self.tenant_exited(pid, why);
        }
        self.sync_decisions();
        let pending: Vec<DecisionKey> = self
            .decisions
            .iter()
            .filter(|(_, a)| {
                a.watcher
                    .as_ref()
                    .is_some_and(|w| w.arm == super::ArmState::Off && w.arm_pending.is_some())
            })
            .map(|(k, _)| *k)
            .collect();
        for k in pending {
            self.rearm(k);
        }
    }

    /// Queries the queues of `pids` again; returns those whose KFD
    /// process is gone, with why, for the caller to remove.
    fn query_queues_of(&mut self, pids: &[i32]) -> Vec<(i32, &'static str)> {
        pids.iter()
            .filter_map(|&pid| Some((pid, self.refresh_queues(pid).err()?)))
            .collect()
    }

    /// The tenants below a decision that keeps them off a node, and that
    /// have had queues on that node: those `refresh_held` queries. Lazy, so
    /// that the main loop can ask whether there is one without a list.
    pub(super) fn held_pids(&self) -> impl Iterator<Item = i32> + '_ {
        self.tenants
            .iter()
            .filter(|(_, t)| {
                self.decisions.iter().any(|(&(node, rank), a)| {
                    t.rank < rank && t.nodes.contains(&node) && a.policy.keeps_be_off()
                })
            })
            .map(|(pid, _)| *pid)
    }

    /// Queries again the queues of [`held_pids`](Self::held_pids): a queue
    /// one makes while kept off is taken at once, not at the next scan.
    pub(super) fn refresh_held(&mut self) {
        let pids: Vec<i32> = self.held_pids().collect();
        // Only a change is worth a sync (its watcher retries and logs are
        // the scans'): a tenant gone, or queues other than they were.
        let before: Vec<_> = pids.iter().map(|p| self.tenant_queues(*p)).collect();
        let exited = self.query_queues_of(&pids);
        let changed = pids
            .iter()
            .zip(before)
            .any(|(p, b)| self.tenant_queues(*p) != b);
        if !exited.is_empty() || changed {
            for (pid, why) in exited {
                self.tenant_exited(pid, why);
            }
            self.sync_decisions();
        }
    }

    /// What `refresh_held` compares: a tenant's queues, rings, and those
    /// not held by the daemon.
    fn tenant_queues(&self, pid: i32) -> Option<QueueSnapshot> {
        let t = self.tenants.get(&pid)?;
        Some((t.queues.clone(), t.rings.clone(), t.not_held.clone()))
    }

    fn add_tenant(&mut self, c: Candidate) {
        let pid = c.info.pid;
        let rank = match c.priority {
            Priority::Level(rank) => rank,
            Priority::Ignore => {
                self.log.log(
                    Level::Info,
                    "tenant-ignored",
                    &[
                        ("pid", json!(pid)),
                        ("comm", json!(c.info.comm)),
                        ("class", json!(c.class)),
                    ],
                );
                return;
            }
        };
        if self.refused.contains(&pid) {
            return;
        }
        let class_name = c.class.clone().unwrap_or_default();
        match self.dev.attach(pid) {
            Ok(a) if a.tgid != pid => self.add_inherited(c, a),
            Ok(Attached { handle, gpus, .. }) => {
                self.inherited.remove(&pid);
                self.log.log(
                    Level::Info,
                    "attach",
                    &[
                        ("pid", json!(pid)),
                        ("comm", json!(c.info.comm)),
                        ("class", json!(class_name)),
                        ("priority", json!(self.cfg.priority_name(c.priority))),
                        ("handle", json!(handle.0)),
                        ("gpus", json!(gpus)),
                    ],
                );
                self.tenants.insert(
                    pid,
                    Tenant {
                        handle,
                        comm: c.info.comm,
                        class_name,
                        rank,
                        queues: Vec::new(),
                        rings: HashMap::new(),
                        not_held: HashSet::new(),
                        nodes: BTreeSet::new(),
                    },
                );
            }
            Err(
                kfd_preempt::Error::NoSuchProcess { .. }
                | kfd_preempt::Error::TargetExited
                | kfd_preempt::Error::NotAKfdProcess { .. },
            ) => {
                // Raced with its exit or with it closing the KFD device:
                // read it afresh if the next scan still lists it (a pid
                // forgotten by discovery is never reported gone).
                self.discovery.forget(pid);
                self.inherited.remove(&pid);
            }
            Err(e) => {
                self.refused.insert(pid);
                self.log.log(
                    Level::Warn,
                    "attach",
                    &[
                        ("pid", json!(pid)),
                        ("comm", json!(c.info.comm)),
                        ("class", json!(class_name)),
                        ("outcome", json!("error")),
                        ("error", json!(e.to_string())),
                    ],
                );
            }
        }
    }

    /// `c` holds only a KFD descriptor it inherited, which attached the KFD
    /// process `a.tgid` (its parent's): the child is no tenant. Were it
    /// one, its exit would DETACH the parent's attachment, which is the
    /// same handle when the parent is a tenant, and leave the parent
    /// running unwatched. The handle is kept if a tenant has it, else
    /// detached; the parent is found through its own descriptor.
    fn add_inherited(&mut self, c: Candidate, a: Attached) {
        let pid = c.info.pid;
        if !self.tenants.values().any(|t| t.handle == a.handle) {
            let _ = self.dev.detach(a.handle);
        }
        if self.inherited.insert(pid, c).is_none() {
            self.log.log(
                Level::Info,
                "inherited",
                &[("pid", json!(pid)), ("kfd_process", json!(a.tgid))],
            );
        }
    }

    /// Attaches again, at most every [`super::INHERITED_RECHECK`], the
    /// processes that held only an inherited descriptor: one that opened
    /// `/dev/kfd` itself since (a DataLoader worker that runs HIP) becomes
    /// a tenant.
    fn recheck_inherited(&mut self) {
        let now = monotonic();
        if self.inherited.is_empty() || now < self.inherited_recheck_at {
            return;
        }
        self.inherited_recheck_at = now + super::INHERITED_RECHECK;
        let again: Vec<Candidate> = self.inherited.values().cloned().collect();
        for c in again {
            self.add_tenant(c);
        }
    }

    /// Drops a tenant whose KFD process a SAMPLE saw gone and brings the
    /// decisions in line.
    pub(super) fn remove_exited_tenant(&mut self, pid: i32) {
        if self.tenant_exited(pid, GONE_BY_SAMPLE) {
            self.sync_decisions();
        }
    }

    /// Drops a tenant whose KFD process QUERY or SAMPLE says is gone while
    /// its pid may live on. A process that exec'd and opened the device
    /// again between two listings keeps its pid, start time and pidfd, so
    /// discovery would take it for the process it knows and never list it
    /// again: it is forgotten, and the next listing reads, classifies and
    /// attaches it afresh if it still holds a KFD descriptor.
    fn tenant_exited(&mut self, pid: i32, why: &str) -> bool {
        self.discovery.forget(pid);
        self.tenants_remove(pid, why)
    }

    /// Forgets a tenant: detached from every file. The decisions are
    /// brought in line by the caller.
    fn tenants_remove(&mut self, pid: i32, why: &str) -> bool {
        let Some(t) = self.tenants.remove(&pid) else {
            return false;
        };
        self.log.log(
            Level::Info,
            "detach",
            &[
                ("pid", json!(pid)),
                ("comm", json!(t.comm)),
                ("class", json!(t.class_name)),
                ("why", json!(why)),
                ("queues", json!(t.queues.len())),
            ],
        );
        // The module forgets its watches and releases whatever this owner
        // held of it; an exited target's handle may already be unknown.
        let _ = self.dev.detach(t.handle);
        for a in self.decisions.values_mut() {
            if let Some(w) = a.watcher.as_mut() {
                w.forget(pid);
            }
        }
        true
    }

    /// Re-queries one tenant's compute queues; the reason to drop it if
    /// its KFD process is gone.
    fn refresh_queues(&mut self, pid: i32) -> Result<(), &'static str> {
        let Some(t) = self.tenants.get(&pid) else {
            return Ok(());
        };
        match self.dev.query(t.handle) {
            Ok(queues) => {
                let compute: Vec<&kfd_preempt::QueueInfo> =
                    queues.iter().filter(|q| is_compute(q.queue_type)).collect();
                if let Some(t) = self.tenants.get_mut(&pid) {
                    t.queues = compute.iter().map(|q| q.queue_ref()).collect();
                    t.nodes.extend(compute.iter().map(|q| q.gpu_id));
                    t.rings = compute
                        .iter()
                        .map(|q| (q.queue_ref(), q.ring_base_address))
                        .collect();
                    t.not_held = compute
                        .iter()
                        // The module keeps its mark of a queue id while the
                        // queue is destroyed and made again: the new queue
                        // reads OWNED but not SUSPENDED.
                        .filter(|q| !(q.state.is_owned() && q.state.0 & QueueState::SUSPENDED != 0))
                        .map(|q| q.queue_ref())
                        .collect();
                }
                Ok(())
            }
            Err(kfd_preempt::Error::TargetExited) => Err(GONE_BY_QUERY),
            Err(kfd_preempt::Error::UnknownHandle(_)) => Err(HANDLE_UNKNOWN),
            Err(e) => {
                self.warn("query", &e);
                Ok(())
            }
        }
    }

    /// Brings every decision in line with the tenants' queues: a decision
    /// for each node and level above the lowest that has queues there,
    /// its watcher watching them, its policy told of the tenants on the
    /// node (the level's as [`Role::Watched`], lower levels' as
    /// [`Role::Lower`]), its lower queues listed for preemptions.
    pub(super) fn sync_decisions(&mut self) {
        let (mut watched, on_node) = self.queues_by_level_and_node();
        let keys = self.decisions_to_sync(&watched);
        let now = monotonic();
        let mut events = Vec::new();
        let mut rearm = Vec::new();
        for key in keys {
            let want = watched.remove(&key).unwrap_or_default();
            let pcfg = self.pcfg_for(key.0);
            let decision = self
                .decisions
                .entry(key)
                .or_insert_with(|| Decision::new(pcfg, now));
            if want.is_empty() {
                // The level left the node: its file goes (closing it
                // disarms and releases its watches).
                decision.watcher = None;
            } else if decision.watcher.is_none() {
                match Watcher::open(&self.dev) {
                    Ok(w) => decision.watcher = Some(w),
                    Err(e) => {
                        let name = decision_name(self.cfg, key);
                        self.log.log(
                            Level::Warn,
                            "watcher",
                            &[
                                ("decision", json!(name)),
                                ("outcome", json!("error")),
                                ("error", json!(e)),
                            ],
                        );
                    }
                }
            }
            let changes = decision
                .watcher
                .as_mut()
                .map(|w| w.sync(&want))
                .unwrap_or_default();
            // An ARM samples the watches of its moment
            // (uapi.rst, "Activity detection (ABI 1.2)"): an armed file
            // whose watches changed (a queue made again at another ring is
            // unwatched and watched anew) is armed again, or a busy edge of
            // the new queue would never be signalled.
            if changes.changed
                && decision
                    .watcher
                    .as_ref()
                    .is_some_and(|w| w.arm != ArmState::Off)
            {
                rearm.push(key);
            }
            let node_queues = on_node.get(&key.0).map(Vec::as_slice).unwrap_or(&[]);
            let (members, renamed) = sync_members(decision, node_queues, key.1);
            for e in decision.membership_events(members, &renamed) {
                events.push((key, now, e));
            }
            self.log_watch_changes(key, changes);
        }
        if !events.is_empty() {
            self.feed(events);
        }
        for key in rearm {
            self.rearm(key);
        }
    }

    /// Each level's queues per node (the levels above the lowest, whose
    /// queues decisions watch), by pid; and every queue per node.
    fn queues_by_level_and_node(
        &self,
    ) -> (
        BTreeMap<DecisionKey, WatchedQueues>,
        BTreeMap<u32, Vec<NodeQueue>>,
    ) {
        let mut watched: BTreeMap<DecisionKey, WatchedQueues> = BTreeMap::new();
        let mut on_node: BTreeMap<u32, Vec<NodeQueue>> = BTreeMap::new();
        for (pid, t) in &self.tenants {
            for q in &t.queues {
                let ring = t.rings.get(q).copied().unwrap_or(0);
                on_node.entry(q.gpu_id).or_default().push(NodeQueue {
                    pid: *pid,
                    rank: t.rank,
                    queue: *q,
                    ring,
                    not_held: t.not_held.contains(q),
                });
                if t.rank > 0 {
                    watched
                        .entry((q.gpu_id, t.rank))
                        .or_default()
                        .entry(*pid)
                        .or_default()
                        .push(key_of(q, ring));
                }
            }
        }
        (watched, on_node)
    }

    /// The decisions to bring in line: those with queues to watch, and
    /// those that still watch or have members (whose level left).
    fn decisions_to_sync(
        &self,
        watched: &BTreeMap<DecisionKey, WatchedQueues>,
    ) -> Vec<DecisionKey> {
        watched
            .keys()
            .copied()
            .chain(
                self.decisions
                    .iter()
                    .filter(|(_, d)| d.watcher.is_some() || !d.members.is_empty())
                    .map(|(k, _)| *k),
            )
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect()
    }

    fn log_watch_changes(&self, key: DecisionKey, changes: super::watcher::WatchChanges) {
        let name = decision_name(self.cfg, key);
        for (pid, e) in changes.attach_failed {
            self.log.log(
                Level::Warn,
                "attach",
                &[
                    ("pid", json!(pid)),
                    ("decision", json!(name)),
                    ("outcome", json!("error")),
                    ("error", json!(e.to_string())),
                ],
            );
        }
        for (pid, e) in changes.watch_failed {
            self.log.log(
                Level::Warn,
                "watch",
                &[
                    ("pid", json!(pid)),
                    ("decision", json!(name)),
                    ("outcome", json!("error")),
                    ("error", json!(e.to_string())),
                ],
            );
        }
        for (pid, q, o) in changes.refused {
            self.log.log(
                Level::Warn,
                "watch",
                &[
                    ("pid", json!(pid)),
                    ("decision", json!(name)),
                    ("queue", json!(q.to_string())),
                    ("outcome", json!(super::watcher::watch_refusal(&o))),
                ],
            );
        }
    }
}
