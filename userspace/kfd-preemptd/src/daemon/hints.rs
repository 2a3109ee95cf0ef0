//! What a hint does: a tenant of a level says that work is coming on its
//! nodes, and each of those nodes' decisions of its level hears of it as
//! [`Event::Hint`] (the policy takes the lower levels off at once). The
//! socket and its connections are [`super::hint_socket`].
//!
//! Who may hint is the daemon's own classification: a process it attached
//! as a tenant, of a level with a level below it, about nodes where it has
//! compute queues. A hint therefore never reaches the hinting tenant's
//! own level or any above it, and a process that is not a tenant preempts
//! nothing (`Documentation/security.rst`, "Hints").

use std::{
    collections::{BTreeMap, BTreeSet},
    path::Path,
    time::Duration,
};

use kfd_preempt::hint::{Refusal, Reply, Request};
use kfd_preemptd_stats::HintStats;

use super::{
    decision::DecisionKey,
    hint_socket::{HintSocket, Incoming},
    monotonic, Backend, Daemon,
};
use crate::policy::{Event, Mode};

/// What became of the requests on the hint socket.
#[derive(Debug, Default)]
pub(super) struct HintCounts {
    accepted: u64,
    refused: BTreeMap<&'static str, u64>,
    ended: u64,
}

impl<B: Backend> Daemon<'_, B> {
    /// Takes new connections if `listener_ready` (the poll found one
    /// waiting) and answers every request waiting on the hint socket, then
    /// carries out what the hints led to. An `accept` with nothing waiting
    /// is not free: the kernel makes and frees a socket and its file for
    /// it, which every hint would pay.
    pub(super) fn serve_hints(&mut self, listener_ready: bool) {
        let now = monotonic();
        let Some(socket) = self.hint_socket.as_mut() else {
            return;
        };
        if listener_ready {
            socket.accept(now);
        }
        let incoming = socket.receive();
        if incoming.is_empty() {
            return;
        }
        let tenants = &self.tenants;
        socket.forget_allowances(|pid| tenants.contains_key(&pid));
        let mut events = Vec::new();
        for (id, what) in incoming {
            match what {
                Incoming::Request(Request::Begin { within, nodes }) => {
                    let (reply, close) = match self.begin_hint(id, within, &nodes, now, &mut events)
                    {
                        Ok(n) => {
                            self.hint_counts.accepted += 1;
                            (Reply::Ok(n), false)
                        }
                        Err(r) => {
                            *self.hint_counts.refused.entry(r.as_str()).or_default() += 1;
                            // A caller that is no tenant, or does not speak
                            // the protocol, has no use for its connection:
                            // closed, it keeps no one else out of the
                            // `MAX_CONNECTIONS`.
                            (Reply::Refused(r), r.closes_connection())
                        }
                    };
                    self.answer_hint(id, reply, close, now, &mut events);
                }
                Incoming::Request(Request::End) => {
                    self.end_hint(id, now, &mut events);
                    self.answer_hint(id, Reply::Ok(0), false, now, &mut events);
                }
                Incoming::Malformed => {
                    *self
                        .hint_counts
                        .refused
                        .entry(Refusal::Malformed.as_str())
                        .or_default() += 1;
                    let r = Refusal::Malformed;
                    let close = r.closes_connection();
                    self.answer_hint(id, Reply::Refused(r), close, now, &mut events);
                }
                Incoming::Closed => self.close_hint_connection(id, now, &mut events),
            }
        }
        if !events.is_empty() {
            self.feed(events);
        }
    }

    /// A `begin` on connection `id`: the decisions it holds on, or why
    /// not. Events for the policies go to `events`.
    fn begin_hint(
        &mut self,
        id: u64,
        within: Duration,
        nodes: &[u32],
        now: Duration,
        events: &mut Vec<(DecisionKey, Duration, Event)>,
    ) -> Result<u32, Refusal> {
        let max = Duration::from_millis(self.cfg.daemon.hint_max_ms.into());
        if within.is_zero() || within > max {
            return Err(Refusal::Malformed);
        }
        let socket = self.hint_socket.as_mut().ok_or(Refusal::Malformed)?;
        let conn = socket.connection(id).ok_or(Refusal::Malformed)?;
        let pid = conn.pid;
        // Pid 0: a peer in a pid namespace the daemon cannot see into,
        // which no tenant is.
        if pid <= 0 {
            return Err(Refusal::NotATenant);
        }
        let tenant = self.tenants.get(&pid).ok_or(Refusal::NotATenant)?;
        if tenant.rank == 0 {
            return Err(Refusal::LowestLevel);
        }
        let has: BTreeSet<u32> = tenant.queues.iter().map(|q| q.gpu_id).collect();
        let named: BTreeSet<u32> = if nodes.is_empty() {
            has.clone()
        } else {
            nodes.iter().copied().collect()
        };
        if named.is_empty() || !named.is_subset(&has) {
            return Err(Refusal::NoQueues);
        }
        let keys: Vec<DecisionKey> = named
            .iter()
            .map(|n| (*n, tenant.rank))
            .filter(|k| self.decisions.contains_key(k))
            .collect();
        if keys.is_empty() {
            return Err(Refusal::NoQueues);
        }
        if !socket.take_allowance(pid, now, self.cfg.daemon.hint_rate) {
            return Err(Refusal::RateLimited);
        }
        let published: Vec<Option<u64>> = keys.iter().map(|k| self.published_if_busy(*k)).collect();
        let conn = self
            .hint_socket
            .as_mut()
            .and_then(|s| s.connection(id))
            .ok_or(Refusal::Malformed)?;
        // A new begin on a connection replaces its hint: nodes it no
        // longer names are ended, the others take the later time.
        for k in conn.hinted.iter().filter(|k| !keys.contains(k)) {
            events.push((*k, now, Event::HintEnd { conn: id }));
        }
        for (k, published) in keys.iter().zip(published) {
            if let Some(total) = published {
                events.push((*k, now, Event::Published { total }));
            }
            events.push((
                *k,
                now,
                Event::Hint {
                    pid,
                    conn: id,
                    until: now + within,
                },
            ));
        }
        conn.hinted = keys;
        Ok(conn.hinted.len() as u32)
    }

    /// The packets published on decision `key`'s queues now, if its level
    /// is busy: a hint given then is spent by its work published before
    /// the idle edge, which is told from what the busy edge's SAMPLE saw
    /// by a SAMPLE of its own (one system call, for hints given while busy
    /// only).
    fn published_if_busy(&mut self, key: DecisionKey) -> Option<u64> {
        let a = self.decisions.get_mut(&key)?;
        if a.policy.mode() != Mode::LcBusy {
            return None;
        }
        let w = a.watcher.as_mut()?;
        match w.file.sample() {
            Ok(sample) => Some(w.published.update(&sample)),
            Err(e) => {
                self.warn("sample", &e);
                None
            }
        }
    }

    /// Ends the hint of connection `id`, if it holds one.
    fn end_hint(
        &mut self,
        id: u64,
        now: Duration,
        events: &mut Vec<(DecisionKey, Duration, Event)>,
    ) {
        let Some(conn) = self.hint_socket.as_mut().and_then(|s| s.connection(id)) else {
            return;
        };
        let keys = std::mem::take(&mut conn.hinted);
        if !keys.is_empty() {
            self.hint_counts.ended += 1;
        }
        events.extend(
            keys.into_iter()
                .map(|k| (k, now, Event::HintEnd { conn: id })),
        );
    }

    /// Sends `reply` on connection `id`, then closes it if `close`, or if
    /// the reply could not be sent.
    fn answer_hint(
        &mut self,
        id: u64,
        reply: Reply,
        close: bool,
        now: Duration,
        events: &mut Vec<(DecisionKey, Duration, Event)>,
    ) {
        let sent = self
            .hint_socket
            .as_mut()
            .is_some_and(|s| s.reply(id, reply));
        if close || !sent {
            self.close_hint_connection(id, now, events);
        }
    }

    /// Closes connection `id`: the only way one is closed, so that no hint
    /// outlives its connection.
    fn close_hint_connection(
        &mut self,
        id: u64,
        now: Duration,
        events: &mut Vec<(DecisionKey, Duration, Event)>,
    ) {
        self.end_hint(id, now, events);
        if let Some(s) = self.hint_socket.as_mut() {
            s.close(id);
        }
    }

    /// The hints' part of the statistics.
    pub(super) fn hint_stats(&self) -> HintStats {
        HintStats {
            enabled: self.hint_socket.is_some(),
            accepted: self.hint_counts.accepted,
            refused: self
                .hint_counts
                .refused
                .iter()
                .map(|(r, n)| (r.to_string(), *n))
                .collect(),
            ended: self.hint_counts.ended,
            connections: self
                .hint_socket
                .as_ref()
                .map_or(0, |s| s.connections() as u64),
        }
    }

    /// Listens for hints on the Unix socket `path` from now on.
    pub fn listen_for_hints(&mut self, path: &Path) -> std::io::Result<()> {
        self.hint_socket = Some(HintSocket::bind(path)?);
        Ok(())
    }
}
