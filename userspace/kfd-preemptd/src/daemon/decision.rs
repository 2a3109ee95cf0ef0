//! One decision: the work of one priority level on one node against every
//! lower level's compute queues on that node.

use std::{
    collections::{BTreeMap, BTreeSet, HashMap},
    time::Duration,
};

use kfd_preempt::QueueRef;

use super::{backend::Backend, watcher::Watcher};
use crate::{
    policy::{Event, Mode, Policy, PolicyConfig, Role},
    stats::ReactionPhases,
};

/// A decision's key: the node's gpu_id and the watched level's rank.
/// Ordered by node, then level.
pub type DecisionKey = (u32, usize);

/// One decision's state.
pub(super) struct Decision<B: Backend> {
    /// Its own policy: hysteresis, lease, minimum share, counters.
    pub policy: Policy,
    /// Its file, while the level has queues on the node.
    pub watcher: Option<Watcher<B>>,
    /// The tenants the policy was told of, with their role and queues.
    pub members: BTreeMap<i32, (Role, usize)>,
    /// The lower levels' compute queues on the node (main-file handles):
    /// what a preemption names.
    pub lower: Vec<QueueRef>,
    /// The ring of each of `lower`: which queue the id named.
    pub lower_rings: HashMap<QueueRef, u64>,
    /// The kernel timestamp of the last busy edge, for the log.
    pub last_edge: Option<Duration>,
    /// When the daemon woke to it, and when its SAMPLE returned.
    pub woke_at: Option<(Duration, Duration)>,
    /// Where its reactions' time went.
    pub phases: ReactionPhases,
}

impl<B: Backend> Decision<B> {
    /// A decision that holds nothing, whose minimum-share window starts at
    /// `now`.
    pub fn new(cfg: PolicyConfig, now: Duration) -> Self {
        Decision {
            policy: Policy::new(cfg, now),
            watcher: None,
            members: BTreeMap::new(),
            lower: Vec::new(),
            lower_rings: HashMap::new(),
            last_edge: None,
            woke_at: None,
            phases: ReactionPhases::default(),
        }
    }

    /// The events that tell the policy of `want` (each member's role and
    /// queue count) after `members`: arrivals, changes, departures; and of
    /// the members in `renamed`, whose queues changed with their count.
    pub fn membership_events(
        &mut self,
        want: BTreeMap<i32, (Role, usize)>,
        renamed: &BTreeSet<i32>,
    ) -> Vec<Event> {
        let mut events = Vec::new();
        for (pid, (role, _)) in &self.members {
            if want.get(pid).is_none_or(|(c, _)| c != role) {
                events.push(Event::TenantGone { pid: *pid });
            }
        }
        for (pid, (role, queues)) in &want {
            match self.members.get(pid) {
                Some((c, n)) if c == role => {
                    if n != queues || renamed.contains(pid) {
                        events.push(Event::TenantQueues {
                            pid: *pid,
                            queues: *queues,
                        });
                    }
                }
                _ => {
                    events.push(Event::TenantAdded {
                        pid: *pid,
                        role: *role,
                    });
                    events.push(Event::TenantQueues {
                        pid: *pid,
                        queues: *queues,
                    });
                }
            }
        }
        self.members = want;
        events
    }

    /// Whether its policy has anything to do at a deadline: its level is
    /// on the node, or it still holds queues.
    pub fn is_active(&self) -> bool {
        self.policy.mode() != Mode::NoLc || self.policy.is_held()
    }

    /// Queues watched.
    pub fn watched(&self) -> usize {
        self.watcher.as_ref().map_or(0, Watcher::num_watched)
    }
}
