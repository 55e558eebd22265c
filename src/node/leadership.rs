//! Following a leader, leading, heartbeats, acknowledgements and stepping
//! down.

use alloc::vec::Vec;
use core::time::Duration;

use super::phase::Leadership;
use super::{Ack, Action, Node, Phase};
use crate::NodeId;
use crate::fence::FencingToken;
use crate::message::MessageKind;
use crate::position::LogPosition;
use crate::rule::Rule;
use crate::status::{Event, PromoteFailure, StepDownReason, TransferFailure};
use crate::time::Instant;

impl<P: LogPosition> Node<P> {
    /// Rule `follow_leader` (Raft §5.2): a heartbeat of a round newer than
    /// any seen in the current term makes a (pre-)candidate concede and
    /// refreshes leader contact, which starts a new stickiness promise.
    pub(super) fn on_heartbeat(
        &mut self,
        now: Instant,
        from: NodeId,
        seq: u64,
        out: &mut Vec<Action<P>>,
    ) {
        if self.conflicting_leader(from, out) || self.old_round(from, seq, out) {
            return;
        }
        self.newest_round = seq;
        if !self.phase.is_follower() {
            slog::info!(self.log, "leader of my term found, concede"; "rule" => Rule::FollowLeader,
                "term" => self.term, "leader" => from);
            self.phase = Phase::Follower;
            self.end_promotion(
                Some(PromoteFailure::OtherLeader { leader: Some(from) }),
                out,
            );
        }
        if self.leader.is_none() {
            slog::info!(self.log, "leader is known, follow"; "rule" => Rule::FollowLeader,
                "term" => self.term, "leader" => from);
        }
        self.set_leader(Some(from), out);
        self.gates.leader_contact = Some(now);
        self.gates.campaign_at = now + self.timing.death + self.death_jitter + self.rank.delay;
        self.ack_heartbeat(from, seq, out);
    }

    /// Rule `one_leader_per_term` (Raft §5.2, Election Safety): a second
    /// claimant in a term whose leader is known is reported and ignored.
    fn conflicting_leader(&mut self, from: NodeId, out: &mut Vec<Action<P>>) -> bool {
        let known = if self.phase.is_leader() {
            Some(self.id)
        } else {
            self.leader
        };
        let Some(known) = known.filter(|&k| k != from) else {
            return false;
        };
        slog::warn!(self.log, "conflicting leader detected in one term";
            "rule" => Rule::OneLeaderPerTerm, "term" => self.term,
            "known" => known, "claimed" => from);
        self.emit(
            Event::ConflictingLeader {
                term: self.term,
                known,
                claimed: from,
            },
            out,
        );
        true
    }

    /// Rule `old_rounds_ignored`: a round not newer than one already seen
    /// from this term's leader is a duplicate or was delayed; it says
    /// nothing about the leader being alive now, so it neither refreshes
    /// leader contact nor revives a leader declared dead. The newest round
    /// is acknowledged again (its acknowledgement may have been lost); its
    /// promise already runs.
    fn old_round(&mut self, from: NodeId, seq: u64, out: &mut Vec<Action<P>>) -> bool {
        if seq > self.newest_round {
            return false;
        }
        if seq == self.newest_round && self.leader == Some(from) {
            self.ack_heartbeat(from, seq, out);
        } else {
            slog::debug!(self.log, "heartbeat round older than one already seen: ignored";
                "rule" => Rule::OldRoundsIgnored, "term" => self.term, "from" => from,
                "seq" => seq, "newest" => self.newest_round);
        }
        true
    }

    /// Rule `acks_name_their_round`: a peer acknowledged round `ack.seq` of
    /// this leadership (the message's term is this leader's term, and a
    /// node leads a term at most once, so term and round name exactly one
    /// round). Refresh the fencing anchors with the promise the peer says
    /// it keeps, and hand over if a transfer waits for this peer.
    pub(super) fn on_heartbeat_ack(
        &mut self,
        now: Instant,
        from: NodeId,
        ack: Ack,
        position: P,
        out: &mut Vec<Action<P>>,
    ) {
        let index = self.peers.iter().position(|p| p.id == from);
        let (index, sent) = match (&self.phase, index) {
            (Phase::Leader(l), Some(index)) if ack.seq > 0 && ack.seq <= l.seq => {
                (index, l.round_sent(ack.seq))
            }
            _ => {
                slog::debug!(self.log, "acknowledgement of no round of this leadership: ignored";
                    "rule" => Rule::AcksNameTheirRound, "term" => self.term, "from" => from,
                    "seq" => ack.seq);
                return;
            }
        };
        self.note_promise(index, ack.promise);
        self.peers[index].can_lead = Some(ack.can_lead);
        self.record_ack(now, index, sent, ack.promise, position);
        self.recompute_anchors();
        self.maybe_send_timeout_now(from, out);
        if self.change.is_some()
            || self.membership.is_joint()
            || self.self_index.is_none()
            || self.inherited_membership()
        {
            self.advance_change(now, out);
        }
    }

    /// Records an acknowledgement from the peer at `index` of a round sent
    /// at `sent` (`None`: too old to be remembered; it then backs nothing,
    /// but its position is still news): when the peer was heard (soft
    /// fencing) and until when its promise backs this leadership (strict
    /// fencing).
    fn record_ack(
        &mut self,
        now: Instant,
        index: usize,
        sent: Option<Instant>,
        promise: Duration,
        position: P,
    ) {
        // A zero promise (the older `HeartbeatResponse`) backs nothing; an
        // instant that saturated at the end of time proves nothing either.
        let promised = sent
            .map(|s| s + self.lease_for_promise(promise))
            .filter(|&until| !promise.is_zero() && until < Instant::MAX);
        // Soft fencing hears a peer when its acknowledgement arrives, but
        // only for a round sent within the last death timeout: one delayed
        // longer says nothing about now, and would keep a deaf leader in
        // office for as long as such acknowledgements trickle in.
        let recent = sent.filter(|&s| now.saturating_duration_since(s) <= self.timing.death);
        if let Some(s) = recent {
            self.peers[index].rtt = Some(now.saturating_duration_since(s));
        }
        let Some(l) = self.phase.leadership_mut() else {
            return;
        };
        let backs_lease = !l.lease_forfeited && sent.is_some_and(|s| s >= l.lease_floor);
        let acks = &mut l.acks[index];
        acks.position = Some(position);
        if recent.is_some() {
            // `now` never goes back (`observe_time`): the newest is `now`.
            acks.heard_at = Some(now);
        }
        if let Some(until) = promised {
            // `None` orders below every `Some`: these only move forward.
            acks.promised_until = acks.promised_until.max(Some(until));
            if backs_lease {
                acks.lease_until = acks.lease_until.max(Some(until));
            }
        }
    }

    /// Rule `leader_heartbeats_at_once`: a new leader announces itself
    /// immediately so followers stop campaigning. Its lease (strict fencing)
    /// starts only once a quorum acknowledges a round of this term.
    pub(super) fn become_leader(&mut self, now: Instant, out: &mut Vec<Action<P>>) {
        self.phase = Phase::Leader(Leadership::new(
            now,
            self.timing.lease,
            self.peers.len(),
            self.timing.round_slots,
        ));
        self.promotion = None;
        self.transfer = None;
        // The restart probes are a follower's timer (rollback.rs): a node
        // elected this early has sent its first ones already.
        self.restart_probe = None;
        slog::info!(self.log, "enter leader state, heartbeat at once"; "rule" => Rule::LeaderHeartbeatsAtOnce,
            "term" => self.term, "quorum" => self.voters.quorum());
        let token = FencingToken {
            term: self.term,
            leader: self.id,
        };
        self.emit(
            Event::BecameLeader {
                term: self.term,
                token,
            },
            out,
        );
        self.set_leader(Some(self.id), out);
        self.broadcast_heartbeat(now, out);
    }

    /// Sends the next heartbeat round (timer `heartbeat`). The leader
    /// counts as having acknowledged its own round as it sends it; with a
    /// single-voter quorum that alone moves the fencing anchors.
    pub(super) fn broadcast_heartbeat(&mut self, now: Instant, out: &mut Vec<Action<P>>) {
        let period = self.heartbeat_period();
        let Some(l) = self.phase.leadership_mut() else {
            return;
        };
        let seq = l.start_round(now);
        l.next_heartbeat = now + period;
        self.gates.leader_contact = Some(now);
        self.send_to_peers(&MessageKind::Heartbeat { seq }, out);
        self.recompute_anchors();
        if self.membership.epoch > 0 {
            self.resend_membership(out);
        }
        if self.change.is_some()
            || self.membership.is_joint()
            || self.self_index.is_none()
            || self.inherited_membership()
        {
            self.advance_change(now, out);
        }
        if self.membership.rank.is_ranked() {
            self.record_round_position();
            self.publish_standings(now, out);
            self.maybe_hand_back(now, out);
        }
    }

    /// Rule `step_down`: leaves leadership in the same term (no term bump),
    /// failing a running transfer; no own campaign for a round. The caller
    /// decides what follows (resign message, demote embargo).
    pub(super) fn step_down(&mut self, reason: StepDownReason, out: &mut Vec<Action<P>>) {
        slog::warn!(self.log, "resigning from leader state"; "rule" => Rule::StepDown,
            "term" => self.term, "reason" => ?reason);
        self.fail_transfer(TransferFailure::SteppedDown, out);
        self.fail_change_on_step_down(out);
        self.phase = Phase::Follower;
        self.gates.leader_contact = None;
        // Campaigning at once would only repeat what just failed.
        self.gates.campaign_at = self.now + self.round_length();
        self.emit(
            Event::SteppedDown {
                term: self.term,
                reason,
            },
            out,
        );
        self.set_leader(None, out);
    }

    /// Rule `leader_death` (timer `leader_death`): no message from the
    /// leader for a death timeout; forget it, so the campaign timer runs.
    pub(super) fn declare_leader_dead(&mut self, out: &mut Vec<Action<P>>) {
        slog::info!(self.log, "leader declared dead";
            "rule" => Rule::LeaderDeath, "term" => self.term, "leader" => ?self.leader,
            "last_heard" => ?self.gates.leader_contact);
        self.set_leader(None, out);
    }

    /// Rule `resign_releases_followers`: the leader of this term resigned
    /// and gave up any lease before saying so, so followers drop their
    /// promise to it and may campaign after a short random delay instead of a
    /// death timeout.
    pub(super) fn on_resign(&mut self, now: Instant, from: NodeId, out: &mut Vec<Action<P>>) {
        if self.leader != Some(from) {
            return;
        }
        slog::info!(self.log, "the leader has resigned"; "rule" => Rule::ResignReleasesFollowers,
            "term" => self.term, "leader" => from);
        self.set_leader(None, out);
        self.gates.leader_contact = None;
        self.gates.campaign_at = now + self.jitter.up_to(self.timing.jitter) + self.rank.delay;
    }
}
