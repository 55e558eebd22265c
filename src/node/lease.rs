//! Leader fencing: soft step-down, the strict lease, and its proof.
//!
//! The strict lease's safety argument is the doc comment of [`Node::lease`].
//!
//! # Soft fencing
//!
//! The leader steps down, in the same term, once it has not heard from a
//! quorum (itself included) within the death timeout. It hears a peer when
//! an acknowledgement arrives of a round sent within the last death
//! timeout: an acknowledgement delayed longer says nothing about now, and
//! must not keep a deaf leader in office. This bounds how long an isolated
//! leader believes it leads, but another leader may be elected before it
//! notices: there is no lease.

use alloc::vec::Vec;

use core::time::Duration;

use super::{Action, Node, PeerProgress, Transfer};
use crate::NodeId;
use crate::config::{Fencing, lease_length};
use crate::fence::{FencingToken, Lease};
use crate::message::MessageKind;
use crate::position::LogPosition;
use crate::quorum::kth_largest;

/// The shortest heartbeat period `heartbeat_fits_promises` uses: a quarter
/// of the configured interval, and never zero (a zero period would be a
/// busy loop).
pub(super) fn min_heartbeat_period(configured: Duration) -> Duration {
    (configured / 4).max(Duration::from_nanos(1))
}
use crate::rule::Rule;
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
    /// Let `ρ = 1 + clock_drift_ppm / 10⁶` bound how much faster any node's
    /// clock runs than any other's. The leader records the send time `s_k`
    /// (its own clock) of every heartbeat round `k` of its leadership. A
    /// voter `v` that acknowledges round `k` says how long it keeps its
    /// promise, `E_v` (its death timeout; [`MessageKind::HeartbeatAck`](crate::MessageKind::HeartbeatAck)).
    /// For the newest round `k` that `v` acknowledged, the leader computes
    ///
    /// ```text
    /// until_v = s_k + min(E_v, E) / ρ − margin        (E: the leader's own death timeout)
    /// ```
    ///
    /// and counts itself as a voter whose `until` never ends while it
    /// leads. The lease runs until `lease_until`, the largest instant that
    /// the `until` of a whole quorum `Q` reaches (the quorum-th largest).
    ///
    /// **Claim.** While the leader's clock reads below `lease_until`, no other
    /// node is or can become leader in this or a later term.
    ///
    /// **Argument.** Any successor needs the votes of a quorum, and every
    /// quorum intersects `Q`; let `v ∈ Q` be in both.
    /// - If `v` is the leader itself: it grants nothing while it leads, and
    ///   it leads until its lease ends (strict step-down), until it demotes
    ///   (having given up the lease first), or until a higher term deposes
    ///   it, after which it keeps its own stickiness promise for `E` from
    ///   its last heartbeat, which outlasts every `until_v`.
    /// - Otherwise `v` received round `k` at some real moment after `s_k`,
    ///   and from then on keeps the promise (rule `leader_stickiness`): for
    ///   `E_v` on its own clock it grants no vote or pre-vote, adopts no
    ///   higher term from a vote request, and casts no self-vote. So `v`
    ///   votes for a successor only after its clock advanced `E_v` past the
    ///   receipt, that is after the real time in which the leader's clock
    ///   advanced at least `E_v / ρ` past `s_k`; the leader's clock then
    ///   reads at least `s_k + E_v / ρ > until_v ≥ lease_until`. Message
    ///   delay and clock offset cancel out because the lease is anchored at
    ///   the *send* time; only the rate ratio matters. `margin` covers the
    ///   time between checking the lease and the guarded action.
    ///
    /// What the argument needs, and the rule that provides it:
    /// - **Acknowledgement identity** (rule `acks_name_their_round`): an
    ///   acknowledgement carries the term of the heartbeat it answers and
    ///   is sent only in answer to that term's leader. A node leads a term
    ///   at most once (it campaigns only after a durable term bump, so a
    ///   restart cannot make it leader of a term again), and rounds are
    ///   numbered from 1 in each leadership, so (term, round) names exactly
    ///   one round of one leadership. A heartbeat of another term is
    ///   answered with `HeartbeatResponse { seq: 0 }`, which names no round
    ///   and counts for nothing: a delayed heartbeat from the leader's
    ///   earlier life can never stand in for a promise to its new one
    ///   (issue 8, defect 1).
    /// - **Restarts** (rule `restart_waits_death_timeout`): a restarted `v`
    ///   waits `E_v` before voting or campaigning, so a crash does not
    ///   shorten the promise. A node whose durable term is 0 skips the wait
    ///   (rule `fresh_node_owes_no_promise`): it never acknowledged a
    ///   round, because an acknowledgement is sent only once its term is
    ///   durable and every leader's term is at least 1. This needs storage
    ///   that tells a fresh node from one that lost its state: a node whose
    ///   state was lost or wiped is not fresh (it may also have voted in
    ///   the current term), and must stay down for a death timeout before
    ///   it starts again from an empty state.
    /// - **Mixed timing**: each voter's own promise `E_v` is used, so nodes
    ///   need not share a death timeout (issue 8, defect 6); capping at `E`
    ///   keeps the lease within [`Config::effective_lease_duration`](crate::Config::effective_lease_duration).
    ///   A node whose death timeout is lowered across a restart waits only
    ///   the new value (the promise length is not durable): keep it down
    ///   for the old one first. A voter whose promise backs less than two
    ///   of this leader's rounds makes the leader heartbeat more often (rule
    ///   `heartbeat_fits_promises`) rather than let the lease lapse.
    /// - **Transfers**: a transfer's `TimeoutNow` lets the target's voters
    ///   skip stickiness, so the leader gives up its lease when a transfer
    ///   starts and, once `TimeoutNow` went out, claims none for the rest of
    ///   the term (etcd #12704), even if another transfer replaces that one.
    ///   If the transfer ends before `TimeoutNow`, only rounds sent after
    ///   that moment restore the lease (rule `transfer_leadership`).
    /// - **Older acknowledgements**: a `HeartbeatResponse` with `seq ≥ 1`
    ///   states no promise and backs no lease.
    /// - **The end of time**: a promise whose end saturates at
    ///   [`Instant::MAX`] backs nothing.
    /// - **Resign** releases followers and is sent only after stepping
    ///   down.
    ///
    /// A new leader's lease starts only with the first quorum-acknowledged
    /// round of its term. The leader steps down the moment the promises it
    /// holds (counting every round, before any transfer) run out; the
    /// deadline is part of [`Node::next_deadline`](crate::Node::next_deadline), never sampled at interval boundaries
    /// (etcd-io/raft #166).
    ///
    /// Assumptions: clocks keep counting during suspend and their rates stay
    /// within `ρ` of each other; durable state survives crashes; peers are
    /// not malicious. Pauses of the process between checking the lease and
    /// acting are not bounded by any clock: that is what fencing tokens are
    /// for.
    #[must_use]
    pub fn lease(&self, now: Instant) -> Option<Lease> {
        if self.fencing != Fencing::Strict
            || self.role != Role::Leader
            || self.transfer.is_some()
            || self.lease_forfeited
        {
            return None;
        }
        let valid_until = self.lease_until?;
        debug_assert!(valid_until <= self.strict_until);
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
            Fencing::Strict => Some(self.strict_until),
            _ => None,
        }
    }

    /// How long after a round's send time a voter's promise of `promise`
    /// backs the lease: `min(promise, E) / ρ − margin`.
    pub(super) fn lease_for_promise(&self, promise: Duration) -> Duration {
        if promise >= self.timing.death {
            self.lease_duration
        } else {
            lease_length(promise, self.timing.drift_ppm, self.timing.lease_margin)
        }
    }

    /// Rule `heartbeat_fits_promises`: how long until the next heartbeat
    /// round. The configured interval, shortened so that every voter's
    /// promise, less the round trip its acknowledgement takes, backs at
    /// least two rounds: a voter with a shorter death timeout than the
    /// leader's would otherwise let the strict lease lapse between rounds,
    /// with no fault at all (`Config::validate` can check only this node's
    /// own timing). Never below a quarter of the configured interval (nor
    /// zero): a voter whose promise is shorter than that cannot back a
    /// continuous lease from this leader.
    pub(super) fn heartbeat_period(&self) -> Duration {
        let configured = self.timing.heartbeat;
        if self.fencing != Fencing::Strict {
            return configured;
        }
        // What each short promise leaves once its acknowledgement is back.
        let tightest = self
            .peers
            .iter()
            .filter(|p| p.is_voter)
            .filter_map(|p| Some((p.promise?, p.rtt.unwrap_or_default())))
            .filter(|&(promise, _)| promise < self.timing.death)
            .map(|(promise, rtt)| self.lease_for_promise(promise).saturating_sub(rtt))
            .min();
        match tightest {
            Some(usable) => (usable / 2).clamp(min_heartbeat_period(configured), configured),
            None => configured,
        }
    }

    /// Records the send time of heartbeat round `seq`.
    pub(super) fn record_round(&mut self, seq: u64, now: Instant) {
        let len = self.rounds.len() as u64;
        self.rounds[(seq % len) as usize] = (seq, now);
    }

    /// When round `seq` of this leadership was sent, if it is recent enough
    /// to matter (older rounds cannot back a lease that has not expired).
    pub(super) fn round_sent(&self, seq: u64) -> Option<Instant> {
        let len = self.rounds.len() as u64;
        let (s, at) = self.rounds[(seq % len) as usize];
        (s == seq).then_some(at)
    }

    /// Recomputes the fencing anchors from the peers' acknowledgements:
    /// each is the quorum-th largest value among the voters, the leader
    /// counting as a voter that heard itself and keeps its promise.
    pub(super) fn recompute_anchors(&mut self) {
        let needed_from_peers = self.voters.quorum() - 1;
        if needed_from_peers == 0 {
            // A single-voter quorum: the leader alone is a quorum.
            self.soft_anchor = Instant::MAX;
            if let Some(sent) = self.round_sent(self.heartbeat_seq) {
                let until = sent + self.lease_duration;
                self.strict_until = self.strict_until.max(until);
                if !self.lease_forfeited && sent >= self.lease_floor {
                    self.lease_until = self.lease_until.max(Some(until));
                }
            }
            return;
        }
        // Each fencing mode reads only its own anchors: compute just those
        // (this runs on every acknowledgement).
        match self.fencing {
            Fencing::Soft => {
                let since = self.leader_since;
                let heard = |p: &PeerProgress<P>| Some(p.heard_at.unwrap_or(since));
                if let Some(t) = self.quorum_value(needed_from_peers, heard) {
                    self.soft_anchor = t;
                }
            }
            Fencing::Strict => {
                if let Some(t) = self.quorum_value(needed_from_peers, |p| p.promised_until) {
                    self.strict_until = self.strict_until.max(t);
                }
                if let Some(t) = self.quorum_value(needed_from_peers, |p| p.lease_until) {
                    self.lease_until = self.lease_until.max(Some(t));
                }
            }
            _ => {}
        }
    }

    /// The `needed`-th largest `value` among the voter peers that have one.
    fn quorum_value(
        &mut self,
        needed: usize,
        value: impl Fn(&PeerProgress<P>) -> Option<Instant>,
    ) -> Option<Instant> {
        self.scratch.clear();
        self.scratch.extend(
            self.peers
                .iter()
                .filter(|p| p.is_voter)
                .filter_map(|p| value(p).map(Instant::as_nanos)),
        );
        kth_largest(&mut self.scratch, needed).map(Instant::from_nanos)
    }

    /// Gives up the reported lease and every acknowledgement that backed
    /// it; only rounds acknowledged from now on can bring it back.
    fn drop_lease(&mut self) {
        self.lease_until = None;
        for peer in &mut self.peers {
            peer.lease_until = None;
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
                "rule" => if reason == StepDownReason::LeaseExpired { Rule::StrictLease } else { Rule::SoftFencing },
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
        } else if self
            .peers
            .iter()
            .any(|p| p.id == to && p.can_lead == Some(false))
        {
            // Its last acknowledgement said it never campaigns (mode Voter
            // or Off): TimeoutNow would be ignored and the lease lost.
            Some(TransferFailure::TargetCannotLead)
        } else {
            None
        };
        if let Some(reason) = refusal {
            slog::info!(self.log, "transfer refused"; "rule" => Rule::TransferLeadership,
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
        slog::info!(self.log, "transfer leadership: lease given up"; "rule" => Rule::TransferLeadership,
            "term" => self.term, "to" => to);
        self.drop_lease();
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
        slog::info!(self.log, "target caught up: TimeoutNow"; "rule" => Rule::TransferLeadership,
            "term" => self.term, "to" => transfer.to);
        // From here on the target's voters may skip stickiness: no lease
        // for the rest of this term.
        self.lease_forfeited = true;
        self.drop_lease();
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
        // `lease_forfeited` also covers a transfer that replaced one whose
        // TimeoutNow already went out: this term's lease is gone either way.
        if transfer.timeout_now_sent || self.lease_forfeited {
            if self.fencing == Fencing::Strict {
                // No lease can be regained this term: leading on without
                // one is pointless under strict fencing.
                self.step_down(StepDownReason::LeaseExpired, out);
            }
        } else {
            // Only rounds sent from now on may restore the lease: rounds
            // acknowledged during the transfer do not (issue 8, defect 7).
            self.lease_floor = now;
            self.drop_lease();
        }
    }

    pub(super) fn fail_transfer(&mut self, reason: TransferFailure, out: &mut Vec<Action<P>>) {
        if let Some(t) = self.transfer.take() {
            slog::info!(self.log, "transfer failed"; "rule" => Rule::TransferLeadership,
                "term" => self.term, "to" => t.to, "reason" => ?reason);
            self.emit(Event::TransferFailed { to: t.to, reason }, out);
        }
    }

    /// A leader became known while a handed-over transfer was pending.
    pub(super) fn transfer_saw_leader(&mut self, leader: NodeId, out: &mut Vec<Action<P>>) {
        match self.transfer {
            Some(t) if self.role != Role::Leader && t.to == leader => {
                self.transfer = None;
                slog::info!(self.log, "transfer completed"; "rule" => Rule::TransferLeadership,
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
