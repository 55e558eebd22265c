//! Promote, demote, leadership transfer and TimeoutNow.

#[cfg(feature = "sim")]
use super::fingerprint::{Fnv, Relative};
use alloc::vec::Vec;

use super::election::VoteRound;
use super::{Action, Node, Phase};
use crate::NodeId;
use crate::config::Fencing;
use crate::config::Mode;
use crate::message::MessageKind;
use crate::position::LogPosition;
use crate::rule::Rule;
use crate::status::{Event, PromoteFailure, StepDownReason, TransferFailure};
use crate::time::Instant;

/// A leadership transfer in progress.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) struct Transfer {
    to: NodeId,
    /// One election timeout after it started.
    deadline: Instant,
    /// Whether `TimeoutNow` went out (the lease is then gone for the term).
    timeout_now_sent: bool,
    /// A hand-over before a stop (`Input::HandOver`): resign if it fails.
    resign_on_failure: bool,
}

/// A promotion (one campaign) and a transfer in progress. A transfer is
/// started by a leader and outlives its leadership once `TimeoutNow` went
/// out, until the target is seen leading (or it times out); a promotion
/// ends when the node leads or its one campaign fails.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub(super) struct Handover {
    /// A promotion in progress: when it gives up.
    promotion: Option<Instant>,
    transfer: Option<Transfer>,
}

impl Handover {
    pub(super) fn promotion(&self) -> Option<Instant> {
        self.promotion
    }

    pub(super) fn is_promoted(&self) -> bool {
        self.promotion.is_some()
    }

    /// The voter leadership is being handed to, if a transfer runs.
    pub(super) fn transfer(&self) -> Option<NodeId> {
        self.transfer.map(|t| t.to)
    }

    pub(super) fn transfer_deadline(&self) -> Option<Instant> {
        self.transfer.map(|t| t.deadline)
    }

    /// Whether a transfer waits for `to` to catch up (no `TimeoutNow` yet).
    pub(super) fn transfer_waits_for(&self, to: NodeId) -> bool {
        self.transfer
            .is_some_and(|t| t.to == to && !t.timeout_now_sent)
    }

    /// Whether a running transfer already sent `TimeoutNow`.
    pub(super) fn handed_over(&self) -> bool {
        self.transfer.is_some_and(|t| t.timeout_now_sent)
    }

    /// This node leads: neither a promotion nor an earlier transfer runs.
    pub(super) fn leading(&mut self) {
        self.promotion = None;
        self.transfer = None;
    }

    /// The state as the model checker sees it (see `fingerprint.rs`).
    #[cfg(feature = "sim")]
    pub(super) fn fingerprint(&self, rel: &Relative, h: &mut Fnv) {
        use core::hash::Hash;
        let Handover {
            promotion,
            transfer,
        } = self;
        promotion.map(|p| rel.expiry(p)).hash(h);
        transfer.is_some().hash(h);
        if let Some(Transfer {
            to,
            deadline,
            timeout_now_sent,
            resign_on_failure,
        }) = transfer
        {
            (
                to,
                rel.expiry(*deadline),
                timeout_now_sent,
                resign_on_failure,
            )
                .hash(h);
        }
    }
}

impl<P: LogPosition> Node<P> {
    /// Rule `promote_one_campaign` (Tarantool box.ctl.promote): in `Manual`
    /// or `Candidate` mode, start one campaign now (pre-vote, then vote),
    /// skipping this node's own stickiness, restart wait and demote
    /// embargo; the voters still apply theirs and the quorum. Under strict
    /// fencing the node's own promise protects a live leader's lease and is
    /// kept: promote then fails at once while a leader may be alive. Within
    /// one election timeout the outcome is `BecameLeader` or exactly one
    /// `PromoteFailed`; never a retry loop (Tarantool dd89c57e78).
    pub(super) fn on_promote(&mut self, now: Instant, out: &mut Vec<Action<P>>) {
        if !self.may_lead_if_asked() {
            slog::info!(self.log, "promote refused: mode or observer status forbids campaigning";
                "rule" => Rule::PromoteOneCampaign, "term" => self.term, "mode" => ?self.cfg.mode);
            self.emit(
                Event::PromoteFailed {
                    reason: PromoteFailure::NotAllowed,
                },
                out,
            );
            return;
        }
        match self.phase {
            Phase::Leader(_) => {
                slog::info!(self.log, "promote ignored: already leader";
                    "rule" => Rule::PromoteOneCampaign, "term" => self.term);
                return;
            }
            Phase::PreVoting(_) | Phase::AwaitingSelfVote { .. } | Phase::Candidate(_) => {
                // Already campaigning: the campaign becomes the promotion
                // (no term inflation), with its own deadline: its outcome
                // is reported within one election timeout from now. A
                // promotion already running keeps its deadline and round.
                if self.handover.promotion.is_none() {
                    slog::info!(self.log, "promoted: the running campaign counts, in a fresh round";
                        "rule" => Rule::PromoteOneCampaign, "term" => self.term);
                    self.handover.promotion = Some(now + self.cfg.timing.election);
                    self.refresh_round(now, out);
                }
                return;
            }
            Phase::Follower => {}
        }
        if self.cfg.fencing == Fencing::Strict && self.promise_active(now) {
            slog::info!(self.log, "promote refused: a leader may still be alive";
                "rule" => Rule::PromoteOneCampaign, "term" => self.term, "leader" => ?self.leader);
            let leader = self.leader;
            self.emit(
                Event::PromoteFailed {
                    reason: PromoteFailure::OtherLeader { leader },
                },
                out,
            );
            return;
        }
        slog::info!(self.log, "promoted: campaign for one term";
            "rule" => Rule::PromoteOneCampaign, "term" => self.term);
        self.handover.promotion = Some(now + self.cfg.timing.election);
        self.start_pre_vote(now, out);
    }

    /// Rule `promote_one_campaign`: the running round starts afresh, with
    /// new requests to every voter and a new deadline, in the same term.
    /// The round a promotion adopts may have lost its requests or answers
    /// (sent while this node was cut off), and would then only time out:
    /// a fresh round wins within one election timeout whenever a quorum
    /// hears this node. A pre-vote changes no term, so it simply starts
    /// again; a vote round keeps its grants (valid for the whole term),
    /// forgets its refusals (a voter that refused, say during its restart
    /// wait, may grant now) and asks again; a self-vote still being written
    /// starts its round once durable anyway.
    fn refresh_round(&mut self, now: Instant, out: &mut Vec<Action<P>>) {
        match self.phase {
            Phase::PreVoting(_) => self.start_pre_vote(now, out),
            Phase::Candidate(round) => {
                let deadline = now + self.gates.round_length();
                self.phase = Phase::Candidate(VoteRound::new(deadline, round.transfer()));
                self.tracker.forget_refusals();
                slog::info!(self.log, "vote requests sent again for the promotion";
                    "rule" => Rule::PromoteOneCampaign, "term" => self.term);
                self.request_votes(round.transfer(), out);
            }
            _ => {}
        }
    }

    /// Whether this node campaigns when asked to (Promote, TimeoutNow): a
    /// voter in mode `Candidate` or `Manual`.
    pub(super) fn may_lead_if_asked(&self) -> bool {
        self.tracker.is_voter() && self.mode_may_lead()
    }

    /// Whether this node's mode lets it lead, voter or not (what its
    /// acknowledgements tell the leader: an observer about to be promoted
    /// counts as a possible leader).
    pub(super) fn mode_may_lead(&self) -> bool {
        matches!(self.cfg.mode, Mode::Candidate | Mode::Manual)
            && self.membership().rank_allows_leading(self.id)
    }

    /// Rule `promote_one_campaign`: ends a promotion, reporting `failure`
    /// (exactly one outcome per promotion) if one was in progress.
    pub(super) fn end_promotion(
        &mut self,
        failure: Option<PromoteFailure>,
        out: &mut Vec<Action<P>>,
    ) {
        if self.handover.promotion.take().is_none() {
            return;
        }
        if let Some(reason) = failure {
            slog::info!(self.log, "promotion failed"; "rule" => Rule::PromoteOneCampaign,
                "term" => self.term, "reason" => ?reason);
            self.emit(Event::PromoteFailed { reason }, out);
        }
    }

    /// Rule `demote_moves_leadership` (Tarantool gh-9855): a leader resigns
    /// in the same term, tells its followers, and does not campaign for a
    /// death timeout, so another node takes over. On a (pre-)candidate it
    /// cancels the campaign; on any node it starts the same embargo.
    pub(super) fn on_demote(&mut self, now: Instant, out: &mut Vec<Action<P>>) {
        self.gates.demote(now);
        match self.phase {
            Phase::Leader(_) => {
                // `step_down` fails a running transfer (`SteppedDown`).
                self.step_down(StepDownReason::Demoted, out);
                self.send_to_peers(&MessageKind::Resign, out);
            }
            Phase::PreVoting(_) | Phase::AwaitingSelfVote { .. } | Phase::Candidate(_) => {
                slog::info!(self.log, "demote: campaign cancelled"; "rule" => Rule::DemoteMovesLeadership,
                    "term" => self.term);
                self.abandon_round(now);
                self.end_promotion(Some(PromoteFailure::Cancelled), out);
            }
            Phase::Follower => {
                slog::info!(self.log, "demote on a follower: no campaign for a death timeout";
                    "rule" => Rule::DemoteMovesLeadership, "term" => self.term);
                if let Some(leader) = self.leader.filter(|_| self.membership().rank.is_ranked()) {
                    // A ranked leader must not hand leadership back to it
                    // within the embargo.
                    self.send_hand_back_ready(leader, out);
                }
            }
        }
    }

    /// Rule `timeout_now_campaigns`: the leader of this term hands over; a
    /// voter in `Candidate` or `Manual` mode campaigns at once, skipping
    /// pre-vote, with the transfer flag that lets voters skip stickiness.
    pub(super) fn on_timeout_now(&mut self, now: Instant, from: NodeId, out: &mut Vec<Action<P>>) {
        if self.leader != Some(from) || !self.may_lead_if_asked() || !self.phase.is_follower() {
            slog::info!(self.log, "TimeoutNow ignored"; "rule" => Rule::TimeoutNowCampaigns,
                "term" => self.term, "from" => from);
            return;
        }
        slog::info!(self.log, "leadership handed over: campaign now"; "rule" => Rule::TimeoutNowCampaigns,
            "term" => self.term, "from" => from);
        self.rank.note_handed_campaign();
        self.start_campaign(now, true, out);
    }

    /// Timer `promotion` (rule `promote_one_campaign`): the promotion's
    /// one campaign did not win within an election timeout.
    pub(super) fn promotion_timed_out(&mut self, now: Instant, out: &mut Vec<Action<P>>) {
        self.abandon_round(now);
        self.end_promotion(Some(PromoteFailure::NoQuorum), out);
    }

    /// Rule `transfer_leadership` (Raft thesis §3.10): give up the lease at
    /// once, wait until the target's acknowledged log position is at least
    /// ours, then send it `TimeoutNow`. Aborts after one election timeout,
    /// on a term change, or if the target is not a voter.
    pub(super) fn on_transfer(&mut self, now: Instant, to: NodeId, out: &mut Vec<Action<P>>) {
        let refusal = if !self.phase.is_leader() {
            Some(TransferFailure::NotLeader)
        } else if to == self.id {
            Some(TransferFailure::TargetIsSelf)
        } else if !self.tracker.is_voter_id(to) {
            Some(TransferFailure::NotAVoter)
        } else if !self.membership().rank_allows_leading(to)
            || self
                .tracker
                .peer(to)
                .is_some_and(|p| p.can_lead() == Some(false))
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
        if let Some(current) = self.handover.transfer {
            if current.to == to {
                // Same target again: does not extend the deadline (etcd).
                return;
            }
            self.fail_transfer(TransferFailure::Superseded, out);
        }
        slog::info!(self.log, "transfer leadership: lease given up"; "rule" => Rule::TransferLeadership,
            "term" => self.term, "to" => to);
        if let Some(l) = self.phase.leadership_mut() {
            l.fence_mut().drop_lease();
        }
        self.tracker.drop_lease();
        self.handover.transfer = Some(Transfer {
            to,
            deadline: now + self.cfg.timing.election,
            timeout_now_sent: false,
            resign_on_failure: false,
        });
        self.maybe_send_timeout_now(to, out);
    }

    /// Rule `transfer_leadership` for a planned stop (`Input::HandOver`):
    /// transfer to the best voter that may lead, resigning (rule
    /// `demote_moves_leadership`) if there is none or the transfer fails.
    pub(super) fn on_hand_over(&mut self, now: Instant, out: &mut Vec<Action<P>>) {
        if self.phase.is_leader()
            && let Some(t) = self.handover.transfer.as_mut()
        {
            // A transfer is running (its TimeoutNow may be out): a second
            // target could campaign in the same term and split the vote.
            // Keep it; if it fails, resign.
            t.resign_on_failure = true;
            slog::info!(self.log, "hand-over: keep the running transfer"; "rule" => Rule::TransferLeadership,
                "term" => self.term, "to" => t.to);
            return;
        }
        let salt = self.gates.random_bits();
        let target = self
            .phase
            .is_leader()
            .then(|| self.hand_over_target(salt))
            .flatten();
        let Some(to) = target else {
            slog::info!(self.log, "hand-over: no voter to transfer to, resign";
                "rule" => Rule::TransferLeadership, "term" => self.term);
            return self.on_demote(now, out);
        };
        slog::info!(self.log, "hand-over before a stop"; "rule" => Rule::TransferLeadership,
            "term" => self.term, "to" => to);
        self.on_transfer(now, to, out);
        match self.handover.transfer.as_mut().filter(|t| t.to == to) {
            Some(t) => t.resign_on_failure = true,
            // Refused (it cannot lead after all): nobody else is better.
            None => self.on_demote(now, out),
        }
    }

    /// The voter a hand-over goes to: one that may lead (a voter of the
    /// membership being entered, so never one a change is removing, that
    /// the rank policy lets lead and whose acknowledgements did not say it
    /// never campaigns), preferring one whose acknowledgements said it
    /// campaigns (right after an election, before any answered, the choice
    /// is a guess: one that cannot lead lets the transfer time out, and
    /// the leader resigns), then one caught up with this leader's log
    /// position (no wait before `TimeoutNow`), then the highest rank under
    /// a rank policy (the successor a hand-back would move leadership to
    /// anyway), then the most recently heard (the likeliest to answer),
    /// then a draw of `salt` (voters heard at one instant, as the members
    /// of groups a host keeps quiet on equal delays, are not all handed to
    /// the lowest id).
    fn hand_over_target(&self, salt: u64) -> Option<NodeId> {
        let membership = self.membership();
        let own = self.tracker.position();
        self.tracker
            .peers()
            .iter()
            .filter(|p| p.id() != self.id && self.tracker.is_voter_id(p.id()))
            .filter(|p| membership.voters.binary_search(&p.id()).is_ok())
            .filter(|p| membership.rank_allows_leading(p.id()) && p.can_lead() != Some(false))
            .max_by_key(|p| {
                let caught_up = p.position().is_some_and(|pos| pos.is_at_least(own));
                let rank = membership
                    .rank
                    .is_ranked()
                    .then(|| membership.rank_of(p.id()).class);
                let said_it_campaigns = p.can_lead() == Some(true);
                (
                    said_it_campaigns,
                    caught_up,
                    rank,
                    p.heard_at(),
                    crate::rng::mix(p.id() ^ salt),
                )
            })
            .map(|p| p.id())
    }

    /// Rule `transfer_leadership`: sends `TimeoutNow` once the target's
    /// acknowledged log position has caught up, and forfeits the lease for
    /// the rest of the term (the target's voters may skip stickiness).
    pub(super) fn maybe_send_timeout_now(&mut self, from: NodeId, out: &mut Vec<Action<P>>) {
        let Some(transfer) = self
            .handover
            .transfer
            .filter(|t| t.to == from && !t.timeout_now_sent)
        else {
            return;
        };
        let caught_up = self
            .tracker
            .peer(transfer.to)
            .and_then(|p| p.position())
            .is_some_and(|pos| pos.is_at_least(self.tracker.position()));
        let Some(l) = self.phase.leadership_mut().filter(|_| caught_up) else {
            return;
        };
        // From here on the target's voters may skip stickiness: no lease
        // for the rest of this term.
        l.fence_mut().forfeit();
        self.tracker.drop_lease();
        slog::info!(self.log, "target caught up: TimeoutNow"; "rule" => Rule::TransferLeadership,
            "term" => self.term, "to" => transfer.to);
        self.handover.transfer = Some(Transfer {
            timeout_now_sent: true,
            ..transfer
        });
        self.send_with_vote(transfer.to, MessageKind::TimeoutNow, out);
    }

    /// Timer `transfer`: the transfer gave up, on the leader or on a
    /// leader that already stepped down for it and waits to see the target
    /// lead.
    pub(super) fn transfer_timed_out(&mut self, now: Instant, out: &mut Vec<Action<P>>) {
        let Some(transfer) = self.handover.transfer else {
            return;
        };
        self.fail_transfer(TransferFailure::TimedOut, out);
        if transfer.resign_on_failure && self.phase.is_leader() {
            // A stopping leader: its followers campaign now instead of
            // after a death timeout.
            return self.on_demote(now, out);
        }
        let fencing = self.cfg.fencing;
        let Some(l) = self.phase.leadership_mut() else {
            return;
        };
        // `lease_forfeited` also covers a transfer that replaced one whose
        // TimeoutNow already went out: this term's lease is gone either way.
        if transfer.timeout_now_sent || l.fence().forfeited() {
            if fencing == Fencing::Strict {
                // No lease can be regained this term: leading on without
                // one is pointless under strict fencing.
                self.step_down(StepDownReason::LeaseExpired, out);
            }
        } else {
            // Only rounds sent from now on may restore the lease: rounds
            // acknowledged during the transfer do not.
            l.fence_mut().restart_lease(now);
            self.tracker.drop_lease();
        }
    }

    /// Rule `transfer_leadership`: ends a running transfer with `reason`
    /// (one `TransferFailed` per transfer).
    pub(super) fn fail_transfer(&mut self, reason: TransferFailure, out: &mut Vec<Action<P>>) {
        if let Some(t) = self.handover.transfer.take() {
            slog::info!(self.log, "transfer failed"; "rule" => Rule::TransferLeadership,
                "term" => self.term, "to" => t.to, "reason" => ?reason);
            self.emit(Event::TransferFailed { to: t.to, reason }, out);
            self.note_hand_back_outcome(t.to, false);
        }
    }

    /// Rule `transfer_leadership`: a leader became known while a
    /// handed-over transfer was pending; it completed if the leader is the
    /// target, and failed otherwise.
    pub(super) fn transfer_saw_leader(&mut self, leader: NodeId, out: &mut Vec<Action<P>>) {
        match self.handover.transfer {
            Some(t) if !self.phase.is_leader() && t.to == leader => {
                self.handover.transfer = None;
                slog::info!(self.log, "transfer completed"; "rule" => Rule::TransferLeadership,
                    "term" => self.term, "to" => leader);
                self.emit(Event::TransferCompleted { to: leader }, out);
                self.note_hand_back_outcome(leader, true);
            }
            Some(_) if !self.phase.is_leader() => {
                self.fail_transfer(TransferFailure::TermChanged, out)
            }
            _ => {}
        }
    }
}
