//! Leader fencing: soft step-down, the strict lease, and its proof.
//!
//! The strict lease's safety argument is the doc comment of [`Node::lease`].
//!
//! # Soft fencing
//!
//! The leader steps down, in the same term, as soon as it has not heard
//! from a quorum (itself included) within the death timeout. This bounds
//! how long an isolated leader believes it leads, but another leader may be
//! elected before it notices: there is no lease.

use alloc::vec::Vec;

use super::{Action, Node, Transfer};
use crate::NodeId;
use crate::config::Fencing;
use crate::fence::{FencingToken, Lease};
use crate::message::MessageKind;
use crate::position::LogPosition;
use crate::status::{Event, Role, StepDownReason, TransferFailure};
use crate::time::Instant;

impl<P: LogPosition> Node<P> {
    /// The lease this node holds at `now`, if it may act as the only leader.
    /// Always `None` unless fencing is [`Fencing::Strict`], the node leads,
    /// a quorum acknowledged a heartbeat round of its term, no transfer is
    /// running, and the lease has not run out.
    ///
    /// # Why the strict lease is safe
    ///
    /// Let `E` be the death timeout and `ρ = 1 + clock_drift_ppm / 10⁶` the
    /// bound on how much faster any node's clock runs than any other's. The
    /// leader records the send time `s` (its own clock) of every heartbeat
    /// round. Once a quorum `Q` (the leader included) has acknowledged round
    /// `k` or a later one, the leader holds a lease until
    ///
    /// ```text
    /// lease_until = s_k + E / ρ − margin
    /// ```
    ///
    /// **Claim.** While the leader's clock reads below `lease_until`, no other
    /// node is or can become leader in this or a later term.
    ///
    /// **Argument.** Any successor needs the vote of a quorum, and every quorum
    /// intersects `Q`; let `v ∈ Q` be a voter in both. `v` accepted round `k`
    /// (or later) at some moment after `s_k`, and from then on it keeps the
    /// stickiness promise (rule `leader_stickiness`): for `E` on its own clock
    /// it grants no vote or pre-vote, adopts no higher term from a vote request,
    /// and casts no self-vote. A restarted `v` waits `E` before voting (rule
    /// `restart_waits_death_timeout`), so a crash does not shorten the promise.
    /// Hence `v` votes for a successor only after its clock advanced `E` past
    /// the receipt, so after the real time in which the leader's clock advanced
    /// at least `E / ρ` past `s_k`. At that moment the leader's clock reads at
    /// least `s_k + E / ρ > lease_until`: the lease is over before the
    /// successor even has its votes. Message delay and clock offset cancel out
    /// because the lease is anchored at the *send* time; only the rate ratio
    /// matters. `margin` covers the time between checking the lease and the
    /// guarded action taking effect.
    ///
    /// Two bypasses of the promise exist, and both end the lease first:
    /// - a transfer's `TimeoutNow` lets the target's voters skip stickiness, so
    ///   a leader gives up its lease when a transfer starts and, once it sent
    ///   `TimeoutNow`, claims none for the rest of the term (etcd #12704);
    /// - a `Resign` releases followers, and is sent only after stepping down.
    ///
    /// A new leader's lease starts only with the first quorum-acknowledged
    /// round of its term. The leader steps down the moment the lease (as
    /// computed from acknowledgements, before any transfer) ends; the deadline
    /// is part of [`Node::next_deadline`](crate::Node::next_deadline), never sampled at interval boundaries
    /// (etcd-io/raft #166).
    ///
    /// Assumptions: clocks keep counting during suspend and their rates stay
    /// within `ρ` of each other; durable state survives crashes. Pauses of the
    /// process between checking the lease and acting are not bounded by any
    /// clock: that is what fencing tokens are for.
    ///
    #[must_use]
    pub fn lease(&self, now: Instant) -> Option<Lease> {
        if self.fencing != Fencing::Strict || self.role != Role::Leader || self.transfer.is_some() {
            return None;
        }
        let valid_until = self.lease_anchor? + self.lease_duration;
        (now < valid_until).then_some(Lease {
            token: self.token()?,
            valid_until,
        })
    }

    /// This node's leadership token, while it leads.
    pub(super) fn token(&self) -> Option<FencingToken> {
        (self.role == Role::Leader).then_some(FencingToken {
            term: self.term,
            leader: self.id,
        })
    }

    /// When fencing makes this leader step down (rule `soft_fencing` or
    /// `strict_lease`), or `None` with fencing off.
    pub(super) fn step_down_deadline(&self) -> Option<Instant> {
        match self.fencing {
            Fencing::Soft => {
                (self.soft_anchor != Instant::MAX).then(|| self.soft_anchor + self.timing.death)
            }
            Fencing::Strict => Some(self.strict_anchor + self.lease_duration),
            _ => None,
        }
    }

    /// Records the send time of heartbeat round `seq`.
    pub(super) fn record_round(&mut self, seq: u64, now: Instant) {
        let len = self.rounds.len() as u64;
        self.rounds[(seq % len) as usize] = (seq, now);
    }

    fn round_sent(&self, seq: u64) -> Option<Instant> {
        let len = self.rounds.len() as u64;
        let (s, at) = self.rounds[(seq % len) as usize];
        (s == seq).then_some(at)
    }

    /// Recomputes both fencing anchors from the peers' acknowledgements.
    /// The leader counts as having heard itself and acknowledged every
    /// round it sent.
    pub(super) fn recompute_anchors(&mut self) {
        let needed_from_peers = self.voters.quorum() - 1;
        if needed_from_peers == 0 {
            // A single-voter quorum: the leader alone is a quorum.
            self.soft_anchor = Instant::MAX;
            if let Some(sent) = self.round_sent(self.heartbeat_seq) {
                self.advance_strict_anchor(sent);
            }
            return;
        }
        let since = self.leader_since;
        self.scratch.clear();
        self.scratch.extend(
            self.peers
                .iter()
                .filter(|p| p.is_voter)
                .map(|p| p.last_ack.unwrap_or(since).as_nanos()),
        );
        self.scratch.sort_unstable_by(|a, b| b.cmp(a));
        if let Some(&t) = self.scratch.get(needed_from_peers - 1) {
            self.soft_anchor = Instant::from_nanos(t);
        }
        self.scratch.clear();
        self.scratch.extend(
            self.peers
                .iter()
                .filter(|p| p.is_voter)
                .map(|p| p.acked_seq),
        );
        self.scratch.sort_unstable_by(|a, b| b.cmp(a));
        let acked = self
            .scratch
            .get(needed_from_peers - 1)
            .copied()
            .unwrap_or(0);
        if acked > 0 {
            if let Some(sent) = self.round_sent(acked) {
                self.advance_strict_anchor(sent);
            }
        }
    }

    /// Moves the lease anchors forward to a round sent at `sent` that a
    /// quorum acknowledged. The reported lease ignores rounds sent before
    /// `lease_floor` (an aborted transfer) and is never regained in a term
    /// whose `TimeoutNow` went out.
    fn advance_strict_anchor(&mut self, sent: Instant) {
        self.strict_anchor = self.strict_anchor.max(sent);
        if !self.lease_forfeited && sent >= self.lease_floor {
            self.lease_anchor = Some(self.lease_anchor.map_or(sent, |a| a.max(sent)));
        }
    }

    /// Leader timers: fencing first (a leader past its lease must not send
    /// another heartbeat as leader), then the transfer deadline, then
    /// heartbeats.
    pub(super) fn leader_tick(&mut self, now: Instant, out: &mut Vec<Action<P>>) {
        if let Some(deadline) = self.step_down_deadline().filter(|&d| now >= d) {
            let reason = if self.fencing == Fencing::Strict {
                StepDownReason::LeaseExpired
            } else {
                StepDownReason::QuorumLost
            };
            slog::warn!(self.log, "fencing: step down";
                "rule" => if reason == StepDownReason::LeaseExpired { "strict_lease" } else { "soft_fencing" },
                "term" => self.term, "deadline" => %deadline);
            self.step_down(reason, out);
            return;
        }
        self.transfer_tick(now, out);
        if self.role == Role::Leader && now >= self.next_heartbeat {
            self.broadcast_heartbeat(now, out);
        }
    }

    /// Rule `transfer_leadership` (Raft thesis §3.10): give up the lease at
    /// once, wait until the target's acknowledged log position is at least
    /// ours, then send it `TimeoutNow`. Aborts after one election timeout,
    /// on a term change, or if the target is not a voter.
    pub(super) fn on_transfer(&mut self, now: Instant, to: NodeId, out: &mut Vec<Action<P>>) {
        let refusal = if self.role != Role::Leader {
            Some(TransferFailure::NotLeader)
        } else if to == self.id {
            Some(TransferFailure::TargetIsSelf)
        } else if !self.voters.contains(to) {
            Some(TransferFailure::NotAVoter)
        } else {
            None
        };
        if let Some(reason) = refusal {
            slog::info!(self.log, "transfer refused"; "rule" => "transfer_leadership",
                "term" => self.term, "to" => to, "reason" => ?reason);
            self.emit(Event::TransferFailed { to, reason }, out);
            return;
        }
        if let Some(current) = self.transfer {
            if current.to == to {
                // Same target again: does not extend the deadline (etcd).
                return;
            }
            self.fail_transfer(TransferFailure::Superseded, out);
        }
        slog::info!(self.log, "transfer leadership: lease given up"; "rule" => "transfer_leadership",
            "term" => self.term, "to" => to);
        self.lease_anchor = None;
        self.transfer = Some(Transfer {
            to,
            deadline: now + self.timing.election,
            timeout_now_sent: false,
        });
        self.maybe_send_timeout_now(to, out);
    }

    /// Sends `TimeoutNow` once the target has caught up.
    pub(super) fn maybe_send_timeout_now(&mut self, from: NodeId, out: &mut Vec<Action<P>>) {
        let Some(transfer) = self
            .transfer
            .filter(|t| t.to == from && !t.timeout_now_sent)
        else {
            return;
        };
        if self.role != Role::Leader {
            return;
        }
        let caught_up = self
            .peers
            .iter()
            .find(|p| p.id == transfer.to)
            .and_then(|p| p.position.as_ref())
            .is_some_and(|pos| pos.is_at_least(&self.position));
        if !caught_up {
            return;
        }
        slog::info!(self.log, "target caught up: TimeoutNow"; "rule" => "transfer_leadership",
            "term" => self.term, "to" => transfer.to);
        // From here on the target's voters may skip stickiness: no lease
        // for the rest of this term.
        self.lease_forfeited = true;
        self.lease_anchor = None;
        self.transfer = Some(Transfer {
            timeout_now_sent: true,
            ..transfer
        });
        self.send_with_vote(transfer.to, MessageKind::TimeoutNow, out);
    }

    /// The transfer deadline, on the leader or on a leader that already
    /// stepped down for the transfer and waits to see the target lead.
    pub(super) fn transfer_tick(&mut self, now: Instant, out: &mut Vec<Action<P>>) {
        let Some(transfer) = self.transfer.filter(|t| now >= t.deadline) else {
            return;
        };
        self.fail_transfer(TransferFailure::TimedOut, out);
        if self.role != Role::Leader {
            return;
        }
        if transfer.timeout_now_sent {
            if self.fencing == Fencing::Strict {
                // No lease can be regained this term: leading on without
                // one is pointless under strict fencing.
                self.step_down(StepDownReason::LeaseExpired, out);
            }
        } else {
            // Only rounds sent from now on may restore the lease.
            self.lease_floor = now;
        }
    }

    pub(super) fn fail_transfer(&mut self, reason: TransferFailure, out: &mut Vec<Action<P>>) {
        if let Some(t) = self.transfer.take() {
            slog::info!(self.log, "transfer failed"; "rule" => "transfer_leadership",
                "term" => self.term, "to" => t.to, "reason" => ?reason);
            self.emit(Event::TransferFailed { to: t.to, reason }, out);
        }
    }

    /// A leader became known while a handed-over transfer was pending.
    pub(super) fn transfer_saw_leader(&mut self, leader: NodeId, out: &mut Vec<Action<P>>) {
        match self.transfer {
            Some(t) if self.role != Role::Leader && t.to == leader => {
                self.transfer = None;
                slog::info!(self.log, "transfer completed"; "rule" => "transfer_leadership",
                    "term" => self.term, "to" => leader);
                self.emit(Event::TransferCompleted { to: leader }, out);
            }
            Some(_) if self.role != Role::Leader => {
                self.fail_transfer(TransferFailure::TermChanged, out)
            }
            _ => {}
        }
    }
}
