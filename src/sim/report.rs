//! What a run reports: the [`Report`] and its measurements (elections,
//! failovers, clean failovers, hand-backs, membership changes), the
//! timeline, the liveness deadlines, [`Violation`] assembly and the run's
//! end.

use std::time::Duration;
use std::vec::Vec;

use super::{Cluster, Handled, NodeChecker, NodeState, Payload, Violation, check, operator};
use crate::{Event, Instant, LogPosition, Membership, Mode, NodeId, Role};

/// What one run produced.
#[derive(Clone, Debug, Default)]
pub struct Report {
    /// The run's seed.
    pub seed: u64,
    /// With [`Cluster::with_replication`]: the newest log entry a quorum
    /// of voters held, `(term, index)`.
    pub committed: Option<(u64, u64)>,
    /// With [`Cluster::with_replication`]: by node id, the copies its
    /// replica refused ([`Fence::admit`](crate::Fence::admit): a deposed
    /// leadership's, or one older than a leadership it took).
    pub refused_writes: Vec<(NodeId, u64)>,
    /// The first invariant violation, if any (the run stopped there).
    pub violation: Option<Violation>,
    /// Number of `BecameLeader` events.
    pub elections: u64,
    /// Highest term reached.
    pub max_term: u64,
    /// Events processed.
    pub events: u64,
    /// Events after which some node held a valid lease (shows that the
    /// lease checks were exercised).
    pub lease_events: u64,
    /// Real instant the run ended.
    pub ended_at: Instant,
    /// Each failover's duration: from a leader crash or isolation to a new
    /// leader known to a quorum.
    pub failovers: Vec<Duration>,
    /// Campaigns (`CampaignStarted`) during each failover.
    pub failover_rounds: Vec<u32>,
    /// Changes of the quorum-known leader not caused by a leader fault
    /// or a hand-back.
    pub spurious_leader_changes: u64,
    /// `HandingBack` events (rule `rank_hand_back`).
    pub hand_backs: u64,
    /// Changes of the quorum-known leader that followed a hand-back.
    pub hand_back_changes: u64,
    /// Clean failovers: the leader known to a quorum crashed while every
    /// other voter ran, with no cut, loss, long tail, stalled disk,
    /// transfer, joint membership or failover in progress.
    pub clean_failovers: Vec<CleanFailover>,
    /// Whether the liveness deadline was checked (and met, if no violation).
    pub liveness_checked: bool,
    /// Time from
    /// [`Scenario::first_leader_from`](super::Scenario::first_leader_from)
    /// to the first leader known to a quorum, if one appeared.
    pub first_election: Option<Duration>,
    /// Messages that took a long-tail delay.
    pub long_tail_messages: u64,
    /// Messages delivered after their sender crashed or restarted (stale
    /// messages of an earlier incarnation).
    pub delivered_after_sender_restart: u64,
    /// Each completed membership change's duration: from
    /// [`Fault::ChangeMembership`](super::Fault::ChangeMembership)
    /// reaching the leader to its `MembershipChangeCompleted`.
    pub membership_changes: Vec<Duration>,
    /// Membership changes that failed (or found no leader for 10 s).
    pub membership_failures: u64,
    /// Operators started ([`Fault::Operate`](super::Fault::Operate)).
    pub operations: u64,
    /// Operators whose goal was met: a membership meeting it was stored
    /// by a majority of each of its voter sets.
    pub operations_completed: u64,
    /// Each completed operator's duration, from its start to the instant
    /// the membership meeting its goal was stored.
    pub operation_times: Vec<Duration>,
    /// Operators that gave up at their bound or were still working when
    /// the run ended.
    pub operations_unfinished: u64,
    /// Operator requests refused at once (not leader, change in progress,
    /// not established, invalid); the operator retries.
    pub change_refusals: u64,
    /// Operator requests accepted that then failed (not caught up, no
    /// quorum, stepped down); the operator retries.
    pub change_attempt_failures: u64,
    /// Elections won while an operator was still working (a change was
    /// in progress or pending): coverage of failovers mid-change.
    pub elected_mid_change: u64,
    /// Elections won by a node acting on a joint membership (it inherits
    /// a change it must finish).
    pub elected_on_joint: u64,
}

/// One clean failover ([`Report::clean_failovers`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CleanFailover {
    /// When the leader crashed (real time).
    pub at: Instant,
    /// The crashed leader.
    pub crashed: NodeId,
    /// The best live caught-up node at the crash: the highest
    /// [`Membership::rank_of`] (under
    /// [`SimConfig::rank_reference`](super::SimConfig::rank_reference) if
    /// set) among the running voters that may lead (mode and rank) whose log
    /// position is at least every other running voter's (with
    /// [`Cluster::with_replication`]: counting the crashed leader's copies
    /// already on their way, which land long before any campaign).
    pub best: NodeId,
    /// The next leader known to a quorum.
    pub winner: NodeId,
    /// From the crash to that leader.
    pub took: Duration,
}

/// What the run tracks to fill the report's leadership, failover and
/// membership change measurements.
pub(super) struct Tracking {
    /// When the membership change in progress was asked for.
    pub(super) change_started: Option<Instant>,
    /// Failover measurement in progress: (start, campaigns so far).
    pub(super) failover: Option<(Instant, u32)>,
    /// The leader known to a quorum, with its term.
    pub(super) quorum_leader: Option<(NodeId, u64)>,
    /// From when a first leader is awaited (`Scenario::first_leader_from`).
    pub(super) first_leader_from: Option<Instant>,
    /// When a leader last started a hand-back (rule `rank_hand_back`): a
    /// deliberate leadership move, which the liveness check waits out as
    /// it waits out a fault.
    pub(super) last_hand_back: Instant,
    /// A clean leader crash being measured: (when, crashed, best node).
    pub(super) clean_crash: Option<(Instant, NodeId, NodeId)>,
    /// A hand-back started and its leader change not yet seen.
    pub(super) hand_back_pending: bool,
}

impl Tracking {
    /// Nothing measured yet.
    pub(super) fn new() -> Tracking {
        Tracking {
            change_started: None,
            failover: None,
            quorum_leader: None,
            first_leader_from: None,
            last_hand_back: Instant::ZERO,
            clean_crash: None,
            hand_back_pending: false,
        }
    }
}

impl<P: LogPosition> Cluster<P> {
    /// Node `i` emitted `event`: logged, recorded, counted in the report
    /// and shown to the checkers.
    pub(super) fn note_event(&mut self, i: usize, event: Event) {
        let id = self.nodes[i].id;
        self.log(id, format_args!("{event:?}"));
        self.note_membership_event(id, &event);
        if let Some(h) = self.history.as_mut() {
            h.events.push((self.now, id, event.clone()));
        }
        if let Event::BecameLeader { term, .. } = event {
            self.report.elections += 1;
            if self.operators.iter().any(operator::OperatorState::working) {
                self.report.elected_mid_change += 1;
            }
            if self.nodes[i]
                .node
                .as_ref()
                .is_some_and(|n| n.membership().is_joint())
            {
                self.report.elected_on_joint += 1;
            }
            self.check_leader_completeness(id, term);
        }
        match event {
            Event::HandingBack { .. } => {
                self.report.hand_backs += 1;
                self.track.hand_back_pending = true;
                self.track.last_hand_back = self.now;
            }
            Event::TransferFailed { .. } => self.track.hand_back_pending = false,
            _ => {}
        }
        if matches!(event, Event::CampaignStarted { .. })
            && let Some((_, rounds)) = self.track.failover.as_mut()
        {
            *rounds += 1;
        }
        self.checker.on_event(id, &event, self.now);
    }

    /// Membership change timing for the report.
    pub(super) fn note_membership_event(&mut self, id: NodeId, event: &Event) {
        match event {
            Event::MembershipChangeCompleted { .. } => {
                if let Some(start) = self.track.change_started.take() {
                    let took = self.now.saturating_duration_since(start);
                    self.report.membership_changes.push(took);
                }
                self.log(id, format_args!("membership change completed"));
            }
            Event::MembershipChangeFailed { .. } => {
                self.report.membership_failures += 1;
                self.track.change_started = None;
            }
            _ => return,
        }
        self.operator_event(id, event);
    }

    /// Records node `i`'s state on the timeline, if one is kept.
    pub(super) fn record_state(&mut self, i: usize) {
        let Some(t) = self.timeline.as_mut() else {
            return;
        };
        let s = &self.nodes[i];
        let state = match s.node.as_ref() {
            None => NodeState::Down,
            Some(n) => {
                let st = n.status();
                NodeState::Up {
                    role: st.role,
                    term: st.term,
                    lease: n.lease(s.clock.local(self.now)).is_some(),
                }
            }
        };
        t.record(self.now, s.id, state);
    }

    /// A fault aimed at the leader known to a quorum: measure the failover
    /// (unless one is being measured already).
    pub(super) fn start_failover(&mut self) {
        if self.track.failover.is_none() && self.track.quorum_leader.is_some() {
            self.track.failover = Some((self.now, 0));
        }
    }

    /// The leader that a quorum of voters (itself included) follows;
    /// observers following it do not count.
    pub fn leader_known_to_quorum(&self) -> Option<(NodeId, u64)> {
        for s in &self.nodes {
            let Some(n) = s.node.as_ref() else { continue };
            let st = n.status();
            if st.role != Role::Leader {
                continue;
            }
            let follows = |id: &NodeId| {
                self.node(*id).is_some_and(|o| {
                    let os = o.status();
                    os.leader == Some(s.id) && os.term == st.term
                })
            };
            // A quorum of every voter set of the leader's membership (the
            // configured quorum for the bootstrap one).
            let m = n.membership();
            let known = [&m.voters, &m.outgoing]
                .into_iter()
                .filter(|set| !set.is_empty())
                .all(|set| {
                    let quorum = if m.epoch == 0 {
                        self.quorum
                    } else {
                        set.len() / 2 + 1
                    };
                    set.iter().filter(|id| follows(id)).count() >= quorum
                });
            if known {
                return Some((s.id, st.term));
            }
        }
        None
    }

    /// Follows the leader known to a quorum: the first election, each
    /// failover and clean failover, hand-backs and spurious changes.
    pub(super) fn track_leadership(&mut self) {
        let Some(now_leader) = self.leader_known_to_quorum() else {
            return;
        };
        if let Some(from) = self.track.first_leader_from
            && self.now >= from
            && self.report.first_election.is_none()
        {
            self.report.first_election = Some(self.now.saturating_duration_since(from));
        }
        if self.track.quorum_leader == Some(now_leader) {
            return;
        }
        let previous = self.track.quorum_leader.replace(now_leader);
        match self.track.failover.take() {
            Some((start, rounds)) => {
                self.report
                    .failovers
                    .push(self.now.saturating_duration_since(start));
                self.report.failover_rounds.push(rounds);
                if let Some((at, crashed, best)) = self.track.clean_crash.take() {
                    self.report.clean_failovers.push(CleanFailover {
                        at,
                        crashed,
                        best,
                        winner: now_leader.0,
                        took: self.now.saturating_duration_since(at),
                    });
                }
            }
            None if previous.is_some() && self.track.hand_back_pending => {
                self.track.hand_back_pending = false;
                self.report.hand_back_changes += 1;
            }
            None if previous.is_some() => self.report.spurious_leader_changes += 1,
            None => {}
        }
    }

    /// The leader known to a quorum, `leader`, is about to crash: if the
    /// crash is clean (see [`Report::clean_failovers`]), remember the best
    /// live caught-up node to compare with the winner.
    pub(super) fn note_leader_crash(&mut self, leader: NodeId) {
        self.track.clean_crash = None;
        let calm = self.track.failover.is_none()
            && self.net.cut.is_empty()
            && self.net.loss == 0.0
            && self.net.long_tail == 0.0
            && !self.track.hand_back_pending;
        let Some(node) = self.node(leader).filter(|_| calm) else {
            return;
        };
        if node.status().transferring_to.is_some() || node.membership().is_joint() {
            return;
        }
        let mut m = node.membership().clone();
        if let Some(policy) = self.cfg.rank_reference {
            m.rank = policy;
        }
        let mut live = Vec::new();
        for v in m.all_voters().into_iter().filter(|&v| v != leader) {
            let Some(s) = self.slot(v) else { return };
            let Some(n) = s.node.as_ref().filter(|_| !s.stalled) else {
                return;
            };
            let position = self
                .settled_position(v)
                .unwrap_or_else(|| n.position().clone());
            live.push((v, n.status().mode, position));
        }
        let best = live
            .iter()
            .filter(|(v, mode, pos)| {
                matches!(mode, Mode::Candidate)
                    && m.rank_allows_leading(*v)
                    && live.iter().all(|(_, _, o)| pos.is_at_least(o))
            })
            .map(|(v, _, _)| *v)
            .max_by_key(|&v| m.rank_of(v));
        self.track.clean_crash = best.map(|b| (self.now, leader, b));
    }

    /// [`Scenario::heal_at`](super::Scenario::heal_at) plus the liveness
    /// bound: a leader known to a quorum must exist by now, unless a late
    /// message or a hand-back postpones the check.
    pub(super) fn liveness_deadline(&mut self) -> Handled {
        // Messages delayed by a long tail before the heal may
        // still arrive after it (a late higher term can depose a
        // leader): liveness is owed a bound after the last one.
        let heal = Instant::ZERO + self.heal_at.unwrap_or_default();
        let owed = self.net.last_long_tail_arrival + self.liveness_bound;
        if self.net.last_long_tail_arrival > heal && owed > self.now {
            self.schedule(owed, Payload::LivenessDeadline);
            return Handled::Skip;
        }
        // A hand-back under way leaves no leader for a moment, as a
        // transfer does: it is owed the bound too, but only when it
        // found no leader (hand-backs are rate-limited, so this
        // cannot postpone the check forever while none is elected).
        let owed = self.track.last_hand_back + self.liveness_bound;
        if self.track.last_hand_back > heal
            && owed > self.now
            && self.leader_known_to_quorum().is_none()
        {
            self.schedule(owed, Payload::LivenessDeadline);
            return Handled::Skip;
        }
        self.report.liveness_checked = true;
        if self.leader_known_to_quorum().is_none() {
            return Handled::Violation(Violation {
                seed: self.cfg.seed,
                at: self.now,
                invariant: "liveness",
                detail: std::format!(
                    "no fault since {:?} (and no delayed message in flight since {:?}), yet no leader known to a quorum of {} voters within {:?} (death timeout + 3 election timeouts + 4 latencies)",
                    self.heal_at.unwrap_or_default(),
                    self.net.last_long_tail_arrival,
                    self.quorum,
                    self.liveness_bound
                ),
            });
        }
        Handled::Check
    }

    /// [`Scenario::first_leader_from`](super::Scenario::first_leader_from)
    /// plus the liveness bound: a first leader known to a quorum must have
    /// appeared by now.
    pub(super) fn first_leader_deadline(&mut self) -> Handled {
        self.report.liveness_checked = true;
        self.track_leadership();
        if self.report.first_election.is_none() {
            return Handled::Violation(Violation {
                seed: self.cfg.seed,
                at: self.now,
                invariant: "first_election_liveness",
                detail: std::format!(
                    "no leader known to a quorum of {} voters within {:?} of {:?}, though the faults in place allow one",
                    self.quorum,
                    self.liveness_bound,
                    self.track.first_leader_from.unwrap_or(Instant::ZERO)
                ),
            });
        }
        Handled::Check
    }

    /// The first violation now, if any: a node's, the replicated log's,
    /// a membership invariant's, then the cluster-wide checker's.
    pub(super) fn find_violation(&mut self) -> Option<Violation> {
        let now = self.now;
        let seed = self.cfg.seed;
        let node_violation = self
            .nodes
            .iter()
            .find_map(|s| s.checker.as_ref().and_then(NodeChecker::violation));
        if let Some(v) = node_violation {
            return Some(Violation {
                seed,
                at: now,
                invariant: v.invariant,
                detail: std::format!("node {} at local {:?}: {}", v.node, v.at, v.detail),
            });
        }
        if let Some((at, invariant, detail)) = self.replication_violation() {
            return Some(Violation {
                seed,
                at,
                invariant,
                detail,
            });
        }
        let views: Vec<check::NodeView> = self
            .nodes
            .iter()
            .filter_map(|s| {
                let node = s.node.as_ref()?;
                let local = s.clock.local(now);
                Some(check::NodeView {
                    id: s.id,
                    status: node.status(),
                    lease: node.lease(local),
                })
            })
            .collect();
        if views.iter().any(|v| v.lease.is_some()) {
            self.report.lease_events += 1;
        }
        let leaders: Vec<(NodeId, u64, &Membership)> = self
            .nodes
            .iter()
            .filter_map(|s| {
                let node = s.node.as_ref()?;
                let st = node.status();
                (st.role == Role::Leader).then(|| (s.id, st.term, node.membership()))
            })
            .collect();
        self.membership_checker.check_leaders(&leaders);
        if let Some((invariant, detail)) =
            self.membership_checker.take_violations().into_iter().next()
        {
            return Some(Violation {
                seed,
                at: now,
                invariant,
                detail,
            });
        }
        self.checker.check(seed, now, &views)
    }

    /// The run ended: operators still working are unfinished, and the
    /// report takes the end time, the highest term and the replicated
    /// log's outcome.
    pub(super) fn finish_report(&mut self) {
        if self.report.violation.is_none() {
            self.finish_operators();
        }
        self.report.ended_at = self.now;
        self.report.max_term = self.checker.max_term();
        self.report.committed = self.committed();
        self.report.refused_writes = self.refused_writes();
    }
}
