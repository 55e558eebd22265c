//! The simulator's replicated-log model; see [`ReplicationModel`].

use std::format;
use std::vec;
use std::vec::Vec;

use super::{Cluster, Payload};
use crate::{Fence, FencingToken, Input, Instant, LogPosition, NodeId, Role};
use core::time::Duration;

/// A log position of the model: (term of the last entry, its index).
type End = (u64, u64);

/// A replicated log beside the simulated election
/// ([`Cluster::with_replication`]): the application an embedder would
/// write, reduced to its log ends, so that `log_up_to_date` and a
/// transfer's catch-up run under every random fault schedule.
///
/// - Every `append_every`, each node whose role is leader appends one entry
///   of its term: its log end becomes `(term, index + 1)`.
/// - It replicates its log end to every other node over the simulated
///   network (the same cuts; a lag drawn from `lag`). Each node keeps a
///   [`Fence`] and accepts a copy under the leadership's token only if
///   [`Fence::admit`] takes it against the node's current term (Raft's
///   "reply false if term < currentTerm", and the highest token seen); it
///   then holds the leader's log up to that end. Refusals are counted in
///   [`Report::refused_writes`](super::Report::refused_writes).
/// - Log ends are durable (they survive crashes) and fed to each node as
///   [`Input::LogPosition`] at every change and at every start, as the
///   drivers' `set_position` does.
///
/// An entry is *committed* once a quorum of voters holds it: of every
/// voter set of the membership the newest leader acts on (both sets of a
/// joint one; the configured quorum of the bootstrap voters before any
/// change), so that a removed node, which takes a deposed leader's late
/// copies as long as its node never hears the new term, counts for
/// nothing. The invariant
/// `leader_completeness` (Raft §5.4.1, the election restriction) says
/// every node elected leader holds every entry committed before its
/// election: a node with a shorter log must not win. The invariant
/// `commit_held_by_later_leaders` says the converse for late writes: an
/// entry of an older term that a quorum comes to hold after a newer
/// leader was elected without it would be lost (that leader overwrites
/// it), so no replica may take a deposed leader's late copy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ReplicationModel {
    /// How often a leader appends an entry.
    pub append_every: Duration,
    /// Extra delay before a follower holds a copy (its apply and fsync),
    /// on top of the network's latency.
    pub lag: (Duration, Duration),
}

impl ReplicationModel {
    /// A leader appends every `append_every`; followers store a copy
    /// `lag` after it arrives.
    pub fn new(append_every: Duration, lag: (Duration, Duration)) -> ReplicationModel {
        ReplicationModel { append_every, lag }
    }
}

impl Default for ReplicationModel {
    /// An append every 20 ms; copies stored 1–30 ms after they arrive.
    fn default() -> ReplicationModel {
        ReplicationModel::new(
            Duration::from_millis(20),
            (Duration::from_millis(1), Duration::from_millis(30)),
        )
    }
}

/// The model's state: every node's durable log end and fence.
pub(super) struct Replication<P> {
    model: ReplicationModel,
    /// By node index: the log's durable end.
    logs: Vec<End>,
    /// By node index: the fence of its copy (the highest leadership whose
    /// copy it accepted).
    fences: Vec<Fence>,
    /// By node index: copies refused by the fence.
    refused: Vec<u64>,
    /// The newest election: its term and the leader's log end then.
    elected: Option<(u64, End)>,
    /// By node index: whether it stores no copies ([`Fault::StallReplication`](super::Fault::StallReplication)).
    stalled: Vec<bool>,
    /// The newest entry a quorum of voters holds.
    committed: End,
    /// The voter sets (with their quorums) commits were last counted
    /// against (see `Cluster::voter_sets`).
    voter_sets: Vec<(Vec<NodeId>, usize)>,
    to_position: fn(End) -> P,
    /// An invariant failure not yet reported: when, which, what.
    pending: Option<(Instant, &'static str, String)>,
}

impl Cluster<(u64, u64)> {
    /// A cluster of `Node<(u64, u64)>`s whose log ends come from a
    /// replicated log (see [`ReplicationModel`]): leaders append, followers lag
    /// behind and catch up, positions are fed to every node, and the
    /// invariant `leader_completeness` is checked at every election.
    pub fn with_replication(cfg: super::SimConfig, model: ReplicationModel) -> Self {
        let mut cluster = Cluster::with_positions(cfg);
        let n = cluster.nodes.len();
        cluster.replication = Some(Replication {
            model,
            logs: vec![(0, 0); n],
            fences: vec![Fence::new(); n],
            refused: vec![0; n],
            elected: None,
            stalled: vec![false; n],
            committed: (0, 0),
            voter_sets: Vec::new(),
            to_position: |end| end,
            pending: None,
        });
        cluster.schedule(Instant::ZERO + model.append_every, Payload::Append);
        cluster
    }
}

impl<P: LogPosition> Cluster<P> {
    /// Every leader appends an entry and sends its log end to the others.
    pub(super) fn append_tick(&mut self) {
        let Some(every) = self.replication.as_ref().map(|r| r.model.append_every) else {
            return;
        };
        for i in 0..self.nodes.len() {
            let Some(status) = self.nodes[i].node.as_ref().map(|n| n.status()) else {
                continue;
            };
            // A leader transferring leadership (or handing it back) takes
            // no new writes, as Raft's leader does (thesis §3.10): the
            // target can then catch up.
            if status.role != Role::Leader || status.transferring_to.is_some() {
                continue;
            }
            let Some(r) = self.replication.as_mut() else {
                return;
            };
            if r.logs[i].0 > status.term {
                // Holds a newer leadership's log: a quorum already moved
                // past this term, so this leader is about to learn it.
                continue;
            }
            let end = (status.term, r.logs[i].1 + 1);
            let id = self.nodes[i].id;
            if r.fences[i]
                .admit(
                    FencingToken {
                        term: end.0,
                        leader: id,
                    },
                    status.term,
                )
                .is_err()
            {
                // A newer leadership wrote here: this leader is deposed.
                continue;
            }
            r.logs[i] = end;
            self.log(id, format_args!("append {end:?}"));
            self.feed_log_end(i);
            self.send_log_end(id, end);
        }
        self.recompute_committed();
        self.schedule(self.now + every, Payload::Append);
    }

    fn send_log_end(&mut self, from: NodeId, end: End) {
        let Some(lag) = self.replication.as_ref().map(|r| r.model.lag) else {
            return;
        };
        for to in self.all_ids() {
            if to == from || self.net.cut.contains(&(from, to)) || self.chance(self.net.loss) {
                continue;
            }
            let latency = self
                .cfg
                .links
                .get(&(from, to))
                .map_or(self.cfg.latency, |l| l.latency);
            let at = self.now + self.uniform(latency) + self.uniform(lag);
            self.schedule(at, Payload::Replicated { from, to, end });
        }
    }

    /// Node `to` receives the log end `end` of the leadership of `end.0`.
    pub(super) fn log_end_arrived(&mut self, from: NodeId, to: NodeId, end: End) {
        let Some(i) = self.idx(to) else { return };
        let Some(term) = self.nodes[i].node.as_ref().map(|n| n.status().term) else {
            return; // down: the copy is lost
        };
        let Some(r) = self.replication.as_mut() else {
            return;
        };
        if r.stalled[i] {
            self.log(
                to,
                format_args!("drops log end {end:?} of n{from}: stalled"),
            );
            return;
        }
        let token = FencingToken {
            term: end.0,
            leader: from,
        };
        if let Err(refused) = r.fences[i].admit(token, term) {
            r.refused[i] += 1;
            self.log(
                to,
                format_args!("refuse log end {end:?} of n{from}: {refused}"),
            );
            return;
        }
        // A copy from the same leadership that arrives late must not cut
        // the log back; a newer leadership's log replaces it.
        if end > r.logs[i] {
            r.logs[i] = end;
            self.log(to, format_args!("holds {end:?} (from n{from})"));
            self.feed_log_end(i);
            self.recompute_committed();
        }
    }

    /// Node `id`'s log position once the copies already on their way to it
    /// have landed (they land within a latency and a lag, long before any
    /// campaign), if the cluster replicates and `id` is up: what decides
    /// whether it is caught up when a leader crashes.
    pub(super) fn settled_position(&self, id: NodeId) -> Option<P> {
        let i = self.idx(id)?;
        let r = self.replication.as_ref()?;
        let mut end = r.logs[i];
        if !r.stalled[i] {
            for core::cmp::Reverse(ev) in self.queue.iter() {
                if let Payload::Replicated { to, end: e, .. } = &ev.payload
                    && *to == id
                    && e.0 >= r.fences[i].highest().map_or(0, |t| t.term)
                {
                    end = end.max(*e);
                }
            }
        }
        Some((r.to_position)(end))
    }

    /// Stops or resumes node `id`'s storing of copies.
    pub(super) fn stall_replication(&mut self, id: NodeId, stalled: bool) {
        let Some(i) = self.idx(id) else { return };
        if let Some(r) = self.replication.as_mut() {
            r.stalled[i] = stalled;
        }
    }

    /// Feeds node `i`'s durable log end to it (after a change, at a start).
    pub(super) fn feed_log_end(&mut self, i: usize) {
        let Some(position) = self
            .replication
            .as_ref()
            .map(|r| (r.to_position)(r.logs[i]))
        else {
            return;
        };
        let id = self.nodes[i].id;
        if self.nodes[i].node.is_some() {
            self.input(id, Input::LogPosition(position));
        }
    }

    /// The voter sets an entry must be held by a quorum of (each of them,
    /// with its quorum) to be committed: those of the membership the
    /// leader of the highest term acts on (both sets of a joint one), as
    /// Raft's leader counts; the bootstrap voters and configured quorum
    /// before any membership change. With no leader, the sets last used.
    /// Counting the bootstrap voters after a change would count removed
    /// nodes, which keep taking a deposed leader's copies (their node never
    /// hears the new term) without holding anything for the cluster.
    fn voter_sets(&mut self) -> Vec<(Vec<NodeId>, usize)> {
        let leading = self
            .nodes
            .iter()
            .filter_map(|s| s.node.as_ref())
            .filter(|n| n.status().role == Role::Leader)
            .max_by_key(|n| n.status().term)
            .map(|n| n.membership());
        let sets = match leading {
            Some(m) if m.epoch > 0 => [&m.voters, &m.outgoing]
                .into_iter()
                .filter(|set| !set.is_empty())
                .map(|set| (set.clone(), set.len() / 2 + 1))
                .collect(),
            Some(_) => vec![(self.voters.clone(), self.quorum)],
            None => match self.replication.as_ref() {
                Some(r) if !r.voter_sets.is_empty() => r.voter_sets.clone(),
                _ => vec![(self.voters.clone(), self.quorum)],
            },
        };
        if let Some(r) = self.replication.as_mut() {
            r.voter_sets.clone_from(&sets);
        }
        sets
    }

    fn recompute_committed(&mut self) {
        let sets: Vec<(Vec<usize>, usize)> = self
            .voter_sets()
            .into_iter()
            .map(|(set, quorum)| (set.iter().filter_map(|&v| self.idx(v)).collect(), quorum))
            .collect();
        let Some(r) = self.replication.as_mut() else {
            return;
        };
        // An entry (t, i) is held by each voter whose log ends in term t at
        // or after i (it copied that leader's log that far); it is
        // committed once a quorum of every voter set holds it.
        for (set, _) in &sets {
            for &v in set {
                let candidate = r.logs[v];
                let held = sets.iter().all(|(set, quorum)| {
                    set.iter()
                        .filter(|&&w| r.logs[w].0 == candidate.0 && r.logs[w].1 >= candidate.1)
                        .count()
                        >= *quorum
                });
                if held && candidate > r.committed {
                    r.committed = candidate;
                    if let Some((term, end)) = r.elected
                        && candidate.0 < term
                        && end < candidate
                        && r.pending.is_none()
                    {
                        r.pending = Some((
                            self.now,
                            "commit_held_by_later_leaders",
                            format!(
                                "{candidate:?} became held by a quorum after the leader of term {term} was elected without it (log end {end:?}): a replica took a deposed leader's write"
                            ),
                        ));
                    }
                }
            }
        }
    }

    /// Node `id` was just elected: it must hold every committed entry.
    pub(super) fn check_leader_completeness(&mut self, id: NodeId, term: u64) {
        let Some(i) = self.idx(id) else { return };
        let now = self.now;
        let Some(r) = self.replication.as_mut() else {
            return;
        };
        if r.elected.is_none_or(|(t, _)| term >= t) {
            r.elected = Some((term, r.logs[i]));
        }
        if r.logs[i] < r.committed && r.pending.is_none() {
            r.pending = Some((
                now,
                "leader_completeness",
                format!(
                    "node {id} elected in term {term} with log end {:?}, but {:?} was committed (held by a quorum) before",
                    r.logs[i], r.committed
                ),
            ));
        }
    }

    /// A replicated-log invariant failure, if one was found.
    pub(super) fn replication_violation(&mut self) -> Option<(Instant, &'static str, String)> {
        self.replication.as_mut().and_then(|r| r.pending.take())
    }

    /// Copies each node's fence refused, by node id (empty without
    /// replication).
    pub(super) fn refused_writes(&self) -> Vec<(NodeId, u64)> {
        self.replication.as_ref().map_or_else(Vec::new, |r| {
            self.nodes
                .iter()
                .zip(&r.refused)
                .map(|(n, &count)| (n.id, count))
                .collect()
        })
    }

    /// The newest committed entry, if the cluster replicates.
    pub(super) fn committed(&self) -> Option<End> {
        self.replication.as_ref().map(|r| r.committed)
    }
}
