//! Terms, pre-vote, votes and candidacy (Raft §5.2, §5.4.1; thesis §9.6).

#[cfg(feature = "sim")]
use super::fingerprint::{Fnv, Relative};
use alloc::vec::Vec;
use core::cmp::Ordering;
use core::time::Duration;

use super::{Ack, Action, Node, Phase};
use crate::NodeId;
use crate::config::Mode;
use crate::membership::MembershipId;
use crate::message::{MAX_TERM_JUMP, Message, MessageKind};
use crate::position::LogPosition;
use crate::quorum::Outcome;
use crate::rule::Rule;
use crate::status::{Event, PromoteFailure, StepDownReason, TransferFailure};
use crate::time::Instant;

/// Why a (pre-)vote is refused: the rule that decides, and a reason.
type Refusal = (Rule, &'static str);

/// A pre-vote round.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) struct PreVoteRound {
    /// The term proposed: the current term + 1.
    proposed: u64,
    /// When the round gives up.
    deadline: Instant,
}

impl PreVoteRound {
    pub(super) fn proposed(&self) -> u64 {
        self.proposed
    }

    pub(super) fn deadline(&self) -> Instant {
        self.deadline
    }

    #[cfg(feature = "sim")]
    pub(super) fn fingerprint(&self, rel: &Relative, h: &mut Fnv) {
        use core::hash::Hash;
        let PreVoteRound { proposed, deadline } = self;
        (proposed, rel.expiry(*deadline)).hash(h);
    }
}

/// A vote round in the current term.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) struct VoteRound {
    /// When the round gives up.
    deadline: Instant,
    /// The split-vote shortcut is taken at most once per round.
    split_handled: bool,
    /// Started by `TimeoutNow`: voters skip stickiness.
    transfer: bool,
}

impl VoteRound {
    pub(super) fn new(deadline: Instant, transfer: bool) -> Self {
        VoteRound {
            deadline,
            split_handled: false,
            transfer,
        }
    }

    pub(super) fn deadline(&self) -> Instant {
        self.deadline
    }

    pub(super) fn transfer(&self) -> bool {
        self.transfer
    }

    #[cfg(feature = "sim")]
    pub(super) fn fingerprint(&self, rel: &Relative, h: &mut Fnv) {
        use core::hash::Hash;
        let VoteRound {
            deadline,
            split_handled,
            transfer,
        } = self;
        (rel.expiry(*deadline), split_handled, transfer).hash(h);
    }
}

impl<P: LogPosition> Node<P> {
    /// Entry point for every peer message. Rules `members_only` (a sender
    /// outside the configuration is ignored) and `voters_only` (only voters
    /// ask for votes, answer them, lead or hand over). Rule `term_check`
    /// (Raft §5.1): lower terms are ignored (a stale leader or candidate is
    /// answered with the current term), higher terms are adopted, except
    /// where pre-vote and stickiness say otherwise. Rule `term_jump_bounded`:
    /// a term more than [`MAX_TERM_JUMP`] ahead is ignored.
    pub(super) fn on_message(
        &mut self,
        now: Instant,
        from: NodeId,
        stamp: Option<MembershipId>,
        message: Message<P>,
        out: &mut Vec<Action<P>>,
    ) {
        if from == self.id {
            slog::debug!(self.log, "message from self ignored";
                "rule" => Rule::MembersOnly, "term" => self.term, "from" => from);
            return;
        }
        if let Some(stamp) = stamp {
            self.check_stamp(from, stamp, out);
        }
        let index = self.tracker.index_of(from);
        // The common case first: a heartbeat of this term's known leader.
        // It passes every check below (rule `members_only` lets the known
        // leader through, it asks for no vote, its term is the current
        // one, and a follower is no leader to count stamps); what applies
        // is rule `rollback_seen_by_peers` (the term it shows) and the
        // heartbeat rules. Taken here, a follower's heartbeat skips the
        // dispatch.
        if let MessageKind::Heartbeat { seq } = message.kind
            && message.term == self.term
            && self.leader == Some(from)
        {
            if let Some(i) = index {
                self.tracker.peer_at_mut(i).note_term_shown(message.term, 0);
            }
            // A known leader is followed (and is not this node): no
            // conflict, no phase or leader to change (`on_heartbeat`).
            if !self.old_round(from, seq, out) {
                self.follow_round(now, from, seq);
                self.ack_heartbeat(from, seq, out);
            }
            return;
        }
        // An unstamped message stands for the bootstrap membership.
        let sender = stamp.unwrap_or_default();
        // The other common case: an acknowledgement of this leader's round
        // by a member. It too passes every check below (members and
        // observers acknowledge, its term is the current one); what
        // applies is rule `rollback_seen_by_peers`, the stamp this
        // leadership records, and the acknowledgement rules.
        if let (
            MessageKind::HeartbeatAck {
                seq,
                promise_nanos,
                can_lead,
                ..
            },
            Some(i),
        ) = (&message.kind, index)
            && message.term == self.term
            && self.phase.is_leader()
        {
            let ack = Ack::new(*seq, Duration::from_nanos(*promise_nanos), *can_lead);
            self.tracker.peer_at_mut(i).note_term_shown(message.term, 0);
            self.note_peer_stamp(i, sender);
            let MessageKind::HeartbeatAck { position, .. } = message.kind else {
                return;
            };
            self.on_heartbeat_ack(now, from, index, ack, position, out);
            return;
        }
        // Rule `members_only`, with two exceptions that move no term by
        // themselves being accepted: a leader's membership (a lagging or
        // joining node learns of members added since), and the known
        // leader of this term (a leader that removed itself leads until it
        // has handed over).
        let update = matches!(message.kind, MessageKind::MembershipUpdate { .. });
        let known_leader = (self.leader == Some(from) && message.term == self.term)
            || self.removed_leader(stamp, &message.kind);
        if !update && !known_leader && index.is_none() {
            slog::debug!(self.log, "message from a non-member ignored";
                "rule" => Rule::MembersOnly, "term" => self.term, "from" => from);
            if self.phase.is_leader() && self.membership_id().is_newer_than(&sender) {
                // A removed node learns that it was removed.
                self.send_membership(from, out);
            }
            self.answer_newer_candidate(from, sender, &message, out);
            return;
        }
        if self.check_term_shown(now, from, index, sender, &message, out) {
            return;
        }
        // Only voters ask for votes, answer them, lead or hand over.
        let voter_only = !matches!(
            message.kind,
            MessageKind::HeartbeatResponse { .. } | MessageKind::HeartbeatAck { .. }
        );
        if voter_only && !update && !known_leader && !self.tracker.is_voter_id(from) {
            slog::debug!(self.log, "election message from a non-voter ignored";
                "rule" => Rule::VotersOnly, "term" => self.term, "from" => from);
            self.answer_newer_candidate(from, sender, &message, out);
            return;
        }
        // Rule `term_jump_bounded`: at term u64::MAX nobody can campaign
        // again, so no single message may carry a node more than
        // MAX_TERM_JUMP terms ahead (ignoring it is as safe as losing it).
        if message.term > self.term.saturating_add(MAX_TERM_JUMP) {
            slog::warn!(self.log, "message term too far ahead ignored";
                "rule" => Rule::TermJumpBounded, "term" => self.term,
                "from" => from, "message_term" => message.term);
            return;
        }
        if let Some(i) = index.filter(|_| message.term == self.term && self.phase.is_leader()) {
            self.note_peer_stamp(i, sender);
        }
        let refused = matches!(
            message.kind,
            MessageKind::PreVoteResponse { granted: false }
                | MessageKind::VoteResponse { granted: false }
        );
        let msg_term = message.term;
        match message.term.cmp(&self.term) {
            Ordering::Less => self.on_stale_message(now, from, message, out),
            Ordering::Greater => self.on_higher_term(now, from, sender, message, out),
            Ordering::Equal => {
                self.on_current_term(now, from, sender, message.term, message.kind, out);
            }
        }
        if refused && msg_term <= self.term {
            // A voter that refused with an older membership (a new voter
            // that missed the joint phase refuses everyone) learns ours.
            self.share_newer_membership(from, sender, out);
        }
    }

    /// Rule `members_only`, exception: a leader that removed itself leads
    /// until it has handed over. Its heartbeats and its `TimeoutNow` are
    /// heard when stamped with this node's membership or a newer one, the
    /// one that removed it: only the leader that made that membership
    /// sends those while not a member.
    fn removed_leader(&self, stamp: Option<MembershipId>, kind: &MessageKind<P>) -> bool {
        matches!(
            kind,
            MessageKind::Heartbeat { .. } | MessageKind::TimeoutNow
        ) && self.membership_id().epoch > 0
            && stamp.is_some_and(|s| {
                s == self.membership_id() || s.is_newer_than(&self.membership_id())
            })
    }

    /// Rules `members_only` and `voters_only`, answered: a (pre-)vote
    /// request from a node that is a voter only in a newer membership than
    /// this node's is refused out loud, so the candidate sees this node's
    /// older stamp and sends it the newer membership (rule
    /// `membership_adopt_newer`).
    fn answer_newer_candidate(
        &mut self,
        from: NodeId,
        sender: MembershipId,
        message: &Message<P>,
        out: &mut Vec<Action<P>>,
    ) {
        if !sender.is_newer_than(&self.newest_membership_id()) {
            return;
        }
        match message.kind {
            MessageKind::PreVoteRequest { .. } => {
                self.reply(from, MessageKind::PreVoteResponse { granted: false }, out);
            }
            MessageKind::VoteRequest { .. } if message.term >= self.term => {
                self.reply(from, MessageKind::VoteResponse { granted: false }, out);
            }
            _ => {}
        }
    }

    /// Rule `stale_term_answered`: a message from an older term changes
    /// nothing; requests and heartbeats are answered with the current term so
    /// a stale candidate or leader steps down, and a lagging pre-candidate
    /// catches up (etcd #8501). A stale heartbeat is answered with
    /// `HeartbeatResponse { seq: 0 }`, which names no round: the answer
    /// must never count as acknowledging a round of a later leadership of
    /// the same sender (rule `acks_name_their_round`).
    fn on_stale_message(
        &mut self,
        now: Instant,
        from: NodeId,
        message: Message<P>,
        out: &mut Vec<Action<P>>,
    ) {
        slog::debug!(self.log, "stale message ignored";
            "rule" => Rule::StaleTermAnswered, "term" => self.term,
            "from" => from, "message_term" => message.term);
        match message.kind {
            MessageKind::Heartbeat { .. } => {
                let position = self.tracker.position().clone();
                self.reply(
                    from,
                    MessageKind::HeartbeatResponse { seq: 0, position },
                    out,
                );
            }
            MessageKind::VoteRequest { .. } => {
                self.reply(from, MessageKind::VoteResponse { granted: false }, out);
            }
            MessageKind::PreVoteRequest { .. } => {
                self.reply(from, MessageKind::PreVoteResponse { granted: false }, out);
            }
            // A membership is ordered by its own version, not by the
            // message's term: a newer one is learned from any sender
            // (rule `membership_adopt_newer`); its term is below this
            // node's, so nothing moves the term.
            MessageKind::MembershipUpdate { membership } => {
                self.on_membership_update(now, from, message.term, *membership, out);
            }
            _ => {}
        }
    }

    /// A message of a higher term. Rule `higher_term_adopted` (Raft §5.1):
    /// the term is adopted and the message handled in it, except that rule
    /// `pre_vote_changes_nothing` (a pre-vote request or grant moves nobody's
    /// term) and rule `leader_stickiness` (a vote request is not even
    /// adopted while this node keeps its promise to a live leader) apply
    /// first.
    fn on_higher_term(
        &mut self,
        now: Instant,
        from: NodeId,
        sender: MembershipId,
        message: Message<P>,
        out: &mut Vec<Action<P>>,
    ) {
        match message.kind {
            // Rule `pre_vote_changes_nothing`: a pre-vote request or grant
            // never moves anybody's term.
            MessageKind::PreVoteRequest { position } => {
                slog::debug!(self.log, "pre-vote request for a higher term: term not adopted";
                    "rule" => Rule::PreVoteChangesNothing, "term" => self.term,
                    "from" => from, "proposed" => message.term);
                self.on_pre_vote_request(now, from, sender, message.term, &position, out);
            }
            MessageKind::PreVoteResponse { granted: true } => {
                self.on_pre_vote_response(now, from, message.term, true, out);
            }
            // Rule `membership_adopt_newer`: a membership is ordered by its
            // own version; learning one moves the term at most to the
            // membership's own, never to the message's (the leader's
            // heartbeats do that), so a candidate may teach a voter of an
            // earlier term without pulling it into the candidate's term.
            MessageKind::MembershipUpdate { membership } => {
                self.on_membership_update(now, from, message.term, *membership, out);
            }
            // Rule `leader_stickiness` (thesis §4.2.3): while a live leader
            // was heard within the death timeout (or since restart), a vote
            // request's higher term is not even adopted.
            MessageKind::VoteRequest { transfer, .. } if !transfer && self.promise_active(now) => {
                slog::info!(self.log, "vote request ignored: a leader was heard within the death timeout";
                    "rule" => Rule::LeaderStickiness, "term" => self.term,
                    "from" => from, "request_term" => message.term);
            }
            kind => {
                slog::info!(self.log, "newer term seen, follow";
                    "rule" => Rule::HigherTermAdopted, "term" => self.term,
                    "from" => from, "new_term" => message.term);
                self.adopt_term(now, message.term, out);
                self.on_current_term(now, from, sender, message.term, kind, out);
            }
        }
    }

    fn on_current_term(
        &mut self,
        now: Instant,
        from: NodeId,
        sender: MembershipId,
        msg_term: u64,
        kind: MessageKind<P>,
        out: &mut Vec<Action<P>>,
    ) {
        match kind {
            MessageKind::PreVoteRequest { position } => {
                self.on_pre_vote_request(now, from, sender, msg_term, &position, out);
            }
            MessageKind::PreVoteResponse { granted } => {
                // A grant echoes the proposed term (term + 1), so a grant at
                // the current term is stale; a rejection carries the voter's
                // term, which is the current one.
                if !granted {
                    self.on_pre_vote_response(now, from, self.term.saturating_add(1), false, out);
                }
            }
            MessageKind::VoteRequest { position, transfer } => {
                self.on_vote_request(now, from, sender, &position, transfer, out);
            }
            MessageKind::VoteResponse { granted } => self.on_vote_response(now, from, granted, out),
            MessageKind::Heartbeat { seq } => self.on_heartbeat(now, from, seq, out),
            MessageKind::HeartbeatAck {
                seq,
                position,
                promise_nanos,
                can_lead,
            } => {
                let promise = Duration::from_nanos(promise_nanos);
                let ack = Ack::new(seq, promise, can_lead);
                let index = self.tracker.index_of(from);
                self.on_heartbeat_ack(now, from, index, ack, position, out);
            }
            // An answer to a stale heartbeat names no round: it counts for
            // nothing (rule `acks_name_their_round`).
            MessageKind::HeartbeatResponse { .. } => {}
            MessageKind::Resign => self.on_resign(now, from, out),
            MessageKind::Standings { successors } => self.on_standings(from, successors, out),
            MessageKind::HandBackReady { ready } => self.on_hand_back_ready(from, ready),
            MessageKind::TimeoutNow => self.on_timeout_now(now, from, out),
            MessageKind::MembershipUpdate { membership } => {
                self.on_membership_update(now, from, msg_term, *membership, out);
            }
            // Read by `check_term_shown` before any term rule.
            MessageKind::RestartProbe { .. } | MessageKind::TermSeen { .. } => {}
        }
    }

    /// Rule `higher_term_adopted` (Raft §5.1): become a follower of `term`
    /// with no vote and no known leader. A leader steps down; a promotion
    /// ends. The stickiness anchor (`gates.leader_contact`) is kept on purpose: a
    /// new term does not release this node's promise to the old leader.
    pub(super) fn adopt_term(&mut self, now: Instant, term: u64, out: &mut Vec<Action<P>>) {
        debug_assert!(term > self.term);
        let old_term = self.term;
        // A transfer that already sent TimeoutNow expects this term change;
        // any other transfer is aborted by it.
        let handed_over = self.handover.handed_over();
        if !handed_over {
            self.fail_transfer(TransferFailure::TermChanged, out);
        }
        self.term = term;
        self.vote = None;
        self.gates.new_term();
        let change = self.take_change();
        let was_leader = core::mem::replace(&mut self.phase, Phase::Follower).is_leader();
        self.drop_stale_held();
        if was_leader {
            self.fail_change_on_step_down(change, out);
            let reason = if handed_over {
                StepDownReason::Transferred
            } else {
                StepDownReason::HigherTerm
            };
            self.emit(
                Event::SteppedDown {
                    term: old_term,
                    reason,
                },
                out,
            );
        }
        self.set_leader(None, out);
        self.end_promotion(Some(PromoteFailure::OutdatedTerm { term }), out);
        self.gates.defer_campaign(now);
    }

    /// Whether this node is bound by a promise not to help elect anyone
    /// (itself included): it leads, it heard a leader within the death
    /// timeout (rule `leader_stickiness`), or it restarted less than a death
    /// timeout ago (rule `restart_waits_death_timeout`). The strict-fencing
    /// lease is sound only because of this promise.
    pub(super) fn promise_active(&self, now: Instant) -> bool {
        self.phase.is_leader() || now < self.gates.promise_until()
    }

    /// Whether the mode and voter status allow campaigning at all right now
    /// (a promotion counts).
    pub(super) fn may_ever_campaign(&self) -> bool {
        self.tracker.is_voter()
            && self.membership().rank_allows_leading(self.id)
            && (self.cfg.mode == Mode::Candidate
                || (self.cfg.mode == Mode::Manual && self.handover.is_promoted()))
    }

    /// Whether a new campaign may start now (every gate open).
    fn may_campaign(&self, now: Instant) -> bool {
        self.may_ever_campaign()
            && self.leader.is_none()
            && now >= self.gates.no_campaign_before()
            && !self.promise_active(now)
    }

    /// Rule `election_timeout` (timer `election_round`): the round gave up.
    /// A promotion ends; otherwise a new pre-vote starts if every gate is
    /// open, or the node goes back to following.
    pub(super) fn round_timed_out(&mut self, now: Instant, out: &mut Vec<Action<P>>) {
        slog::info!(self.log, "election round timed out";
            "rule" => Rule::ElectionTimeout, "term" => self.term,
            "role" => ?self.phase.role());
        if self.handover.is_promoted() {
            // A promotion is one campaign; never retried in a loop
            // (Tarantool dd89c57e78).
            self.abandon_round(now);
            self.end_promotion(Some(PromoteFailure::NoQuorum), out);
        } else if self.may_campaign(now) {
            self.start_pre_vote(now, out);
        } else {
            self.abandon_round(now);
        }
    }

    /// Back to follower; the next own attempt waits a randomized round.
    pub(super) fn abandon_round(&mut self, now: Instant) {
        self.phase = Phase::Follower;
        self.gates.campaign_after_round(now);
    }

    /// Rule `pre_vote` (thesis §9.6): ask for term + 1 without changing
    /// anyone's term or vote. A pre-candidate forgets its leader (etcd #9586).
    pub(super) fn start_pre_vote(&mut self, now: Instant, out: &mut Vec<Action<P>>) {
        if !self.cfg.pre_vote {
            self.start_campaign(now, false, out);
            return;
        }
        if !self.tracker.is_voter() {
            return;
        }
        let Some(proposed) = self.term_space_left(now) else {
            return;
        };
        self.set_leader(None, out);
        let deadline = now + self.gates.round_length();
        self.phase = Phase::PreVoting(PreVoteRound { proposed, deadline });
        self.tracker.start_round();
        slog::info!(self.log, "start pre-vote";
            "rule" => Rule::PreVote, "term" => self.term, "proposed" => proposed);
        if self.tracker.outcome() == Outcome::Won {
            self.start_campaign(now, false, out);
            return;
        }
        self.send_to_other_voters(
            proposed,
            false,
            |position| MessageKind::PreVoteRequest { position },
            out,
        );
    }

    /// Rule `self_vote_with_term_bump`: term + 1 and the self-vote are decided
    /// together and written as one state; the node stays a pre-candidate
    /// until storage confirms it (Tarantool gh-8497).
    pub(super) fn start_campaign(
        &mut self,
        now: Instant,
        transfer: bool,
        out: &mut Vec<Action<P>>,
    ) {
        if !self.tracker.is_voter() {
            return;
        }
        let Some(term) = self.term_space_left(now) else {
            return;
        };
        self.term = term;
        self.vote = Some(self.id);
        self.gates.new_term();
        self.phase = Phase::AwaitingSelfVote { transfer };
        self.drop_stale_held();
        self.set_leader(None, out);
        slog::info!(self.log, "bump term and vote for self";
            "rule" => Rule::SelfVoteWithTermBump, "term" => self.term, "transfer" => transfer);
    }

    /// Rule `term_check` at the end of the term space: the next term, or
    /// `None` (logged, round abandoned) when the term space is exhausted
    /// (the term is `u64::MAX`, at least 2^32 messages away by rule
    /// `term_jump_bounded`). Campaigning would wrap to term 0 and break
    /// every invariant, so this node stops campaigning instead; the book's
    /// "Security and keys" chapter (`docs/src/security.md`, "The end of the
    /// term space") says how an operator recovers.
    fn term_space_left(&mut self, now: Instant) -> Option<u64> {
        let next = self.term.checked_add(1);
        if next.is_none() {
            slog::error!(self.log, "term space exhausted; not campaigning";
                "rule" => Rule::TermCheck, "term" => self.term);
            self.abandon_round(now);
        }
        next
    }

    /// Rule `self_vote_durable_before_candidacy`: the term bump and
    /// self-vote are durable, so this node may ask for votes (a crash can
    /// no longer make it vote for another in the same term).
    pub(super) fn become_candidate(
        &mut self,
        now: Instant,
        transfer: bool,
        out: &mut Vec<Action<P>>,
    ) {
        if !self.tracker.is_voter() {
            return;
        }
        let deadline = now + self.gates.round_length();
        self.phase = Phase::Candidate(VoteRound::new(deadline, transfer));
        self.tracker.start_round();
        slog::info!(self.log, "enter candidate state with 1 self vote";
            "rule" => Rule::SelfVoteDurableBeforeCandidacy, "term" => self.term);
        self.emit(Event::CampaignStarted { term: self.term }, out);
        if self.tracker.outcome() == Outcome::Won {
            self.become_leader(now, out);
            return;
        }
        self.request_votes(transfer, out);
    }

    /// Asks every other voter for its vote in the current term (once the
    /// self-vote is durable: rule `self_vote_durable_before_candidacy`).
    pub(super) fn request_votes(&mut self, transfer: bool, out: &mut Vec<Action<P>>) {
        let term = self.term;
        self.send_to_other_voters(
            term,
            true,
            |position| MessageKind::VoteRequest { position, transfer },
            out,
        );
    }

    /// Why this node would refuse to help elect `from` (pre-vote or vote),
    /// or `None` if it may: rule `voters_only` (mode `Off` or an observer),
    /// rule `leader_stickiness` (its promise is active, unless the candidate
    /// was handed leadership), rule `membership_up_to_date` (the candidate's
    /// membership is older than this node's durable one: the membership's
    /// own Raft §5.4.1, see the `membership` module) or rule
    /// `log_up_to_date` (Raft §5.4.1). Shared by both rounds so they cannot
    /// disagree.
    fn refusal(
        &self,
        now: Instant,
        term: u64,
        candidate: MembershipId,
        position: &P,
        bypass_promise: bool,
    ) -> Option<Refusal> {
        if candidate.term >= term {
            // An honest candidate's term is above its membership's (it
            // adopts a membership's term with it): this one would be a
            // second candidate of the term that made its membership.
            Some((
                Rule::MembershipUpToDate,
                "the candidate's membership was made in the term it asks for, or later",
            ))
        } else if self.cfg.mode == Mode::Off || !self.tracker.is_voter() {
            Some((
                Rule::VotersOnly,
                "this node does not vote (mode off or observer)",
            ))
        } else if !bypass_promise && self.promise_active(now) {
            Some((
                Rule::LeaderStickiness,
                "a leader was heard within the death timeout, or this node restarted less than a death timeout ago",
            ))
        } else if self.newest_membership_id().is_newer_than(&candidate) {
            Some((
                Rule::MembershipUpToDate,
                "the candidate's membership is older than this node's",
            ))
        } else if !position.is_at_least(self.tracker.position()) {
            Some((
                Rule::LogUpToDate,
                "the candidate's log position is behind this node's",
            ))
        } else {
            None
        }
    }

    /// Rule `pre_vote_grant`: grant if this node would vote for `from` in
    /// `proposed` now. Granting changes nothing here, and does not refresh
    /// leader contact (hashicorp #609); it only defers this node's own
    /// campaign by one round so the pre-candidate's vote request finds it
    /// still uncommitted.
    ///
    /// Rule `pre_vote_defers_once`: this node makes one concession per
    /// proposed term, to whichever pre-candidate asks first: it defers its
    /// own campaign by a round, or yields a duel. Later requests for the same
    /// term still get the grant, but hold nothing back: the term did not
    /// move since, so the pre-candidate conceded to made no progress (it
    /// never completed a round, e.g. it hears nothing). However many such
    /// nodes there are, each costs the others at most one round per term in
    /// total. Without this, a deaf node that keeps pre-voting stalls every
    /// election.
    fn on_pre_vote_request(
        &mut self,
        now: Instant,
        from: NodeId,
        candidate: MembershipId,
        proposed: u64,
        position: &P,
        out: &mut Vec<Action<P>>,
    ) {
        if let Some(refusal) = self.pre_vote_refusal(now, from, candidate, proposed, position) {
            self.refuse_pre_vote(from, refusal, out);
            self.share_newer_membership(from, candidate, out);
            return;
        }
        let conceded = self.gates.conceded(proposed);
        let dueling = matches!(self.phase, Phase::PreVoting(r) if r.proposed() == proposed);
        if dueling && !self.settle_duel(now, from, candidate, proposed, position, conceded, out) {
            return;
        }
        if !conceded && self.phase.is_follower() {
            self.gates.concede(now, proposed);
        } else if conceded && !dueling {
            slog::info!(self.log, "already conceded this term: grant without deferring";
                "rule" => Rule::PreVoteDefersOnce, "term" => self.term, "from" => from,
                "proposed" => proposed);
        }
        slog::info!(self.log, "pre-vote granted"; "rule" => Rule::PreVoteGrant,
            "term" => self.term, "from" => from, "proposed" => proposed);
        self.send(
            from,
            proposed,
            MessageKind::PreVoteResponse { granted: true },
            false,
            out,
        );
    }

    /// Rule `pre_vote_duel_ranked`: `from` runs a pre-vote for the same
    /// term as this node. Refuses it (returns `false`) if this node ranks
    /// higher; otherwise yields its own round, unless this term's one
    /// concession is already spent (rule `pre_vote_defers_once`).
    ///
    /// A refused duelist that has not answered this node's round is asked
    /// again: its request shows it is up now, and this node's request may
    /// have been lost while it was down (nodes of a new cluster start one
    /// after another). Without it the round would wait out its deadline
    /// while the only other live voter yields to it. Asked once per
    /// request received, so two nodes cannot ping-pong.
    #[allow(clippy::too_many_arguments)]
    fn settle_duel(
        &mut self,
        now: Instant,
        from: NodeId,
        candidate: MembershipId,
        proposed: u64,
        position: &P,
        conceded: bool,
        out: &mut Vec<Action<P>>,
    ) -> bool {
        if self.outranks(from, candidate, position) {
            let refusal = (
                Rule::PreVoteDuelRanked,
                "dueling pre-candidate ranked lower",
            );
            self.refuse_pre_vote(from, refusal, out);
            if self.tracker.peer(from).is_some_and(|p| !p.answered()) {
                slog::info!(self.log, "ask the lower-ranked duelist again";
                    "rule" => Rule::PreVoteDuelRanked, "term" => self.term, "to" => from,
                    "proposed" => proposed);
                let position = self.tracker.position().clone();
                self.send(
                    from,
                    proposed,
                    MessageKind::PreVoteRequest { position },
                    false,
                    out,
                );
            }
            return false;
        }
        if conceded {
            // This term's concession is spent: grant, but keep this node's
            // own round running.
            slog::info!(self.log, "already conceded this term: grant and keep campaigning";
                "rule" => Rule::PreVoteDefersOnce, "term" => self.term, "to" => from,
                "proposed" => proposed);
        } else {
            // Yield to the better-placed pre-candidate so the two do not
            // split the vote.
            slog::info!(self.log, "yield to a better-placed pre-candidate";
                "rule" => Rule::PreVoteDuelRanked, "term" => self.term, "to" => from);
            self.abandon_round(now);
            self.end_promotion(Some(PromoteFailure::OtherLeader { leader: None }), out);
        }
        true
    }

    /// Why a pre-vote for `from` in `proposed` is refused outright: the
    /// shared vote refusal, or rule `one_vote_per_term` (this node already
    /// voted for another or follows a leader in that very term).
    fn pre_vote_refusal(
        &self,
        now: Instant,
        from: NodeId,
        candidate: MembershipId,
        proposed: u64,
        position: &P,
    ) -> Option<Refusal> {
        self.refusal(now, proposed, candidate, position, false)
            .or_else(|| {
                let committed = self.leader.is_some() || self.vote.is_some_and(|v| v != from);
                (proposed == self.term && committed).then_some((
                    Rule::OneVotePerTerm,
                    "already voted or following a leader in that term",
                ))
            })
    }

    fn refuse_pre_vote(&mut self, from: NodeId, (rule, reason): Refusal, out: &mut Vec<Action<P>>) {
        slog::info!(self.log, "pre-vote refused"; "rule" => rule,
            "term" => self.term, "from" => from, "reason" => reason);
        self.refusals.pre_vote_refused(rule);
        self.reply(from, MessageKind::PreVoteResponse { granted: false }, out);
    }

    /// Rule `pre_vote_duel_ranked`: between two pre-candidates for the same
    /// term, the one with the newer membership ranks higher (the other
    /// could never collect its vote: rule `membership_up_to_date`), then
    /// the one with the newer log position; on equal positions the better
    /// rank under the membership's policy (unranked: the lower node id;
    /// rule `rank_orders_campaigns`). Both sides evaluate the same order, so exactly one
    /// yields and the other can win without a split vote.
    fn outranks(&self, other: NodeId, other_membership: MembershipId, other_position: &P) -> bool {
        if other_membership.is_newer_than(&self.membership_id()) {
            return false;
        }
        if self.membership_id().is_newer_than(&other_membership) {
            return true;
        }
        let mine_newer = !other_position.is_at_least(self.tracker.position());
        let theirs_newer = !self.tracker.position().is_at_least(other_position);
        match (mine_newer, theirs_newer) {
            (true, false) => true,
            (false, true) => false,
            // Equal (or incomparable, which the log check already refused):
            // the better rank (unranked: the lower id).
            _ => self.membership().rank_of(self.id) > self.membership().rank_of(other),
        }
    }

    /// Rule `pre_vote`: counts a pre-vote answer for the running round; a
    /// quorum of grants starts the campaign, a lost quorum ends the round.
    fn on_pre_vote_response(
        &mut self,
        now: Instant,
        from: NodeId,
        proposed: u64,
        granted: bool,
        out: &mut Vec<Action<P>>,
    ) {
        if !matches!(self.phase, Phase::PreVoting(r) if r.proposed() == proposed) {
            return;
        }
        let Some(outcome) = self.tracker.record_vote(from, granted) else {
            return;
        };
        match outcome {
            Outcome::Won => {
                slog::info!(self.log, "pre-vote won"; "rule" => Rule::PreVote,
                    "term" => self.term, "granted" => self.tracker.granted());
                self.start_campaign(now, false, out);
            }
            Outcome::Lost => {
                slog::info!(self.log, "pre-vote lost: a quorum refused"; "rule" => Rule::PreVote,
                    "term" => self.term);
                self.abandon_round(now);
                self.end_promotion(Some(PromoteFailure::NoQuorum), out);
            }
            Outcome::Pending => {}
        }
    }

    /// Rule `one_vote_per_term` (Raft §5.2) with `log_up_to_date` (§5.4.1)
    /// and `leader_stickiness`: grant if this node has not voted for another
    /// in this term, knows no leader of it, is not bound by its promise
    /// (unless the candidate was handed leadership), and the candidate's log
    /// is at least as up to date. The grant is sent only once durable.
    fn on_vote_request(
        &mut self,
        now: Instant,
        from: NodeId,
        candidate: MembershipId,
        position: &P,
        transfer: bool,
        out: &mut Vec<Action<P>>,
    ) {
        let term = self.term;
        if self.vote == Some(from) {
            // Repeat the (same) durable answer; a lost grant must be resendable.
            self.send_with_vote(from, MessageKind::VoteResponse { granted: true }, out);
            return;
        }
        let reason = if self.vote.is_some() {
            Some((Rule::OneVotePerTerm, "already voted in this term"))
        } else if self.leader.is_some() || self.phase.is_leader() {
            Some((Rule::OneVotePerTerm, "the leader of this term is known"))
        } else {
            self.refusal(now, term, candidate, position, transfer)
        };
        if let Some((rule, reason)) = reason {
            slog::info!(self.log, "vote refused"; "rule" => rule,
                "term" => term, "from" => from, "reason" => reason);
            self.refusals.vote_refused(rule);
            self.reply(from, MessageKind::VoteResponse { granted: false }, out);
            self.share_newer_membership(from, candidate, out);
            return;
        }
        slog::info!(self.log, "vote granted, follow"; "rule" => Rule::OneVotePerTerm,
            "term" => term, "to" => from, "transfer" => transfer);
        self.vote = Some(from);
        if !self.phase.is_follower() {
            // A pre-candidate gives up its own round for the candidate it voted for.
            self.phase = Phase::Follower;
            self.end_promotion(Some(PromoteFailure::OtherLeader { leader: None }), out);
        }
        self.gates.campaign_after_round(now);
        self.send_with_vote(from, MessageKind::VoteResponse { granted: true }, out);
    }

    /// Rule `quorum_wins` and `split_vote_ends_round`: a quorum of durable
    /// grants from configured voters makes the candidate leader; once a
    /// quorum is out of reach the round is cut to a short random delay (once
    /// per round) instead of waiting out the election timeout.
    fn on_vote_response(
        &mut self,
        now: Instant,
        from: NodeId,
        granted: bool,
        out: &mut Vec<Action<P>>,
    ) {
        if !matches!(self.phase, Phase::Candidate(_)) {
            return;
        }
        let Some(outcome) = self.tracker.record_vote(from, granted) else {
            return;
        };
        match outcome {
            Outcome::Won => {
                slog::info!(self.log, "quorum of votes"; "rule" => Rule::QuorumWins,
                    "term" => self.term, "votes" => self.tracker.granted(),
                    "quorum" => self.tracker.quorum());
                self.become_leader(now, out);
            }
            Outcome::Lost if self.handover.is_promoted() => {
                slog::info!(self.log, "promotion lost the vote"; "rule" => Rule::SplitVoteEndsRound,
                    "term" => self.term);
                self.abandon_round(now);
                self.end_promotion(Some(PromoteFailure::NoQuorum), out);
            }
            Outcome::Lost => self.split_vote(now),
            Outcome::Pending => {}
        }
    }

    /// Rule `split_vote_ends_round`: a quorum is out of reach; cut the
    /// round to a short random delay, once per round.
    fn split_vote(&mut self, now: Instant) {
        if !matches!(self.phase, Phase::Candidate(r) if !r.split_handled) {
            return;
        }
        let retry = now + self.gates.short_delay();
        let Phase::Candidate(round) = &mut self.phase else {
            return;
        };
        round.split_handled = true;
        round.deadline = round.deadline.min(retry);
        let retry_at = round.deadline;
        slog::info!(self.log, "split vote is discovered"; "rule" => Rule::SplitVoteEndsRound,
            "term" => self.term, "retry_at" => %retry_at);
    }
}
