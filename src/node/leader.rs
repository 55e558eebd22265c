//! Following a leader, leading, heartbeats and stepping down.

use alloc::vec::Vec;

use super::{Ack, Action, Node, Round, min_heartbeat_period};
use crate::NodeId;
use crate::fence::FencingToken;
use crate::message::MessageKind;
use crate::position::LogPosition;
use crate::rule::Rule;
use crate::status::{Event, PromoteFailure, Role, StepDownReason, TransferFailure};
use crate::time::Instant;

impl<P: LogPosition> Node<P> {
    /// Rule `follow_leader` (Raft §5.2): a heartbeat of a round newer than
    /// any seen in the current term makes a (pre-)candidate concede and
    /// refreshes leader contact, which starts a new stickiness promise. Rule `one_leader_per_term`: a second
    /// claimant in a term whose leader is known is reported and ignored.
    pub(super) fn on_heartbeat(
        &mut self,
        now: Instant,
        from: NodeId,
        seq: u64,
        out: &mut Vec<Action<P>>,
    ) {
        let known = if self.role == Role::Leader {
            Some(self.id)
        } else {
            self.leader
        };
        if let Some(known) = known.filter(|&k| k != from) {
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
            return;
        }
        if seq <= self.newest_round {
            // Rule `old_rounds_ignored`: a round not newer than one already
            // seen from this term's leader is a duplicate or was delayed; it
            // says nothing about the leader being alive now, so it neither
            // refreshes leader contact nor revives a leader declared dead.
            // The newest round is acknowledged again (its acknowledgement
            // may have been lost); its promise already runs.
            if seq == self.newest_round && self.leader == Some(from) {
                self.ack_heartbeat(from, seq, out);
            } else {
                slog::debug!(self.log, "heartbeat round older than one already seen: ignored";
                    "rule" => Rule::OldRoundsIgnored, "term" => self.term, "from" => from,
                    "seq" => seq, "newest" => self.newest_round);
            }
            return;
        }
        self.newest_round = seq;
        if self.role != Role::Follower {
            slog::info!(self.log, "leader of my term found, concede"; "rule" => Rule::FollowLeader,
                "term" => self.term, "leader" => from);
            self.role = Role::Follower;
            self.round = Round::IDLE;
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
        self.leader_contact = Some(now);
        self.campaign_at = now + self.timing.death + self.death_jitter;
        self.ack_heartbeat(from, seq, out);
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
        if self.role != Role::Leader || ack.seq == 0 || ack.seq > self.heartbeat_seq {
            slog::debug!(self.log, "acknowledgement of no round of this leadership: ignored";
                "rule" => Rule::AcksNameTheirRound, "term" => self.term, "from" => from,
                "seq" => ack.seq);
            return;
        }
        let sent = self.round_sent(ack.seq);
        let promise_backs = self.lease_for_promise(ack.promise);
        // A zero promise (the older `HeartbeatResponse`) backs nothing; an
        // instant that saturated at the end of time proves nothing either.
        let promised = sent
            .filter(|_| !ack.promise.is_zero())
            .map(|s| s + promise_backs)
            .filter(|&until| until < Instant::MAX);
        let floor = self.lease_floor;
        let forfeited = self.lease_forfeited;
        let Some(peer) = self.peers.iter_mut().find(|p| p.id == from) else {
            return;
        };
        peer.position = Some(position);
        peer.can_lead = Some(ack.can_lead);
        if !ack.promise.is_zero() && peer.promise != Some(ack.promise) {
            peer.promise = Some(ack.promise);
            if ack.promise < self.timing.death {
                slog::info!(self.log, "a voter promises less than this node's death timeout";
                    "rule" => Rule::HeartbeatFitsPromises, "term" => self.term, "from" => from,
                    "promise" => ?ack.promise, "death_timeout" => ?self.timing.death);
                let fastest = min_heartbeat_period(self.timing.heartbeat);
                if promise_backs < fastest.saturating_mul(2) {
                    slog::warn!(self.log, "a voter's promise cannot back a continuous lease: raise its death_timeout";
                        "rule" => Rule::HeartbeatFitsPromises, "term" => self.term, "from" => from,
                        "promise" => ?ack.promise, "fastest_heartbeat" => ?fastest);
                }
            }
        }
        // Soft fencing hears a peer when its acknowledgement arrives, but
        // only for a round sent within the last death timeout: one delayed
        // longer says nothing about now, and would keep a deaf leader in
        // office for as long as such acknowledgements trickle in.
        if let Some(sent) = sent.filter(|&s| now.saturating_duration_since(s) <= self.timing.death)
        {
            // `now` never goes back (`observe_time`): the newest is `now`.
            peer.heard_at = Some(now);
            peer.rtt = Some(now.saturating_duration_since(sent));
        }
        if let (Some(sent), Some(until)) = (sent, promised) {
            // `None` orders below every `Some`: these only move forward.
            peer.promised_until = peer.promised_until.max(Some(until));
            if !forfeited && sent >= floor {
                peer.lease_until = peer.lease_until.max(Some(until));
            }
        }
        self.recompute_anchors();
        self.maybe_send_timeout_now(from, out);
    }

    /// Rule `leader_heartbeats_at_once`: a new leader announces itself
    /// immediately so followers stop campaigning. Its lease (strict fencing)
    /// starts only once a quorum acknowledges a round of this term.
    pub(super) fn become_leader(&mut self, now: Instant, out: &mut Vec<Action<P>>) {
        self.role = Role::Leader;
        self.round = Round::IDLE;
        self.promotion = None;
        self.leader_contact = Some(now);
        self.leader_since = now;
        self.soft_anchor = now;
        self.strict_until = now + self.lease_duration;
        self.lease_until = None;
        self.lease_floor = now;
        self.lease_forfeited = false;
        self.transfer = None;
        // Rounds are numbered per leadership, from 1 (0 names no round).
        self.heartbeat_seq = 0;
        self.rounds.fill((0, Instant::ZERO));
        for peer in &mut self.peers {
            peer.heard_at = None;
            peer.position = None;
            peer.promised_until = None;
            peer.lease_until = None;
        }
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

    pub(super) fn broadcast_heartbeat(&mut self, now: Instant, out: &mut Vec<Action<P>>) {
        self.heartbeat_seq += 1;
        self.record_round(self.heartbeat_seq, now);
        self.next_heartbeat = now + self.heartbeat_period();
        self.leader_contact = Some(now);
        let seq = self.heartbeat_seq;
        self.send_to_peers(&MessageKind::Heartbeat { seq }, out);
        // The leader acknowledges its own round as it sends it; with a
        // single-voter quorum that alone moves the fencing anchors.
        self.recompute_anchors();
    }

    /// Leaves leadership in the same term (no term bump). The caller decides
    /// what follows (resign message, campaign embargo).
    pub(super) fn step_down(&mut self, reason: StepDownReason, out: &mut Vec<Action<P>>) {
        slog::warn!(self.log, "resigning from leader state"; "rule" => Rule::StepDown,
            "term" => self.term, "reason" => ?reason);
        self.fail_transfer(TransferFailure::SteppedDown, out);
        self.role = Role::Follower;
        self.round = Round::IDLE;
        self.leader_contact = None;
        self.next_heartbeat = Instant::MAX;
        self.lease_until = None;
        // Campaigning at once would only repeat what just failed.
        self.campaign_at = self.now + self.round_length();
        self.emit(
            Event::SteppedDown {
                term: self.term,
                reason,
            },
            out,
        );
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
        self.leader_contact = None;
        self.campaign_at = now + self.jitter.up_to(self.timing.jitter);
    }
}
