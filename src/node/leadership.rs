//! Following a leader, leading, heartbeats, acknowledgements and stepping
//! down. [`Leadership`] is everything a leader keeps, built in one place
//! when it wins and dropped when it steps down.

#[cfg(feature = "sim")]
use super::fingerprint::{Fnv, Relative};
use alloc::boxed::Box;
use alloc::vec::Vec;
use core::time::Duration;

use super::lease::LeaderFence;
use super::membership::Change;
use super::rank::RankLeading;
use super::{Ack, Action, Node, Phase};
use crate::NodeId;
use crate::config::Fencing;
use crate::fence::FencingToken;
use crate::message::MessageKind;
use crate::position::LogPosition;
use crate::rule::Rule;
use crate::status::{Event, PromoteFailure, StepDownReason, TransferFailure};
use crate::time::Instant;

/// Everything a leader keeps, built in one place ([`Leadership::new`])
/// when it wins and dropped when it steps down. The acknowledgements of
/// this leadership live with the peers in the tracker, cleared when it
/// starts.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Leadership<P> {
    /// When this leadership began.
    since: Instant,
    /// When the next heartbeat round goes out.
    next_heartbeat: Instant,
    /// The newest round sent; rounds are numbered from 1 in each
    /// leadership (0 names no round; rule `acks_name_their_round`).
    seq: u64,
    /// The newest round sent to every peer, and when the voters that have
    /// not acknowledged it get one more (rule `urgent_renewal`).
    full_seq: u64,
    renew_at: Option<Instant>,
    /// Send times of recent heartbeat rounds, indexed by `seq % len`.
    rounds: Vec<(u64, Instant)>,
    /// The fencing anchors and the lease (lease.rs).
    fence: LeaderFence,
    /// A peer's message showed a membership newer than this leader's, made
    /// in an earlier term (see `Node::inherited_membership`). Kept here,
    /// set as stamps arrive, so the check on every acknowledgement reads
    /// one flag instead of every peer's stamp.
    newer_stamp_seen: bool,
    /// The membership change this leader is making (membership.rs).
    change: Option<Change>,
    /// The standings sent and the hand-back watch (rank.rs).
    rank: RankLeading<P>,
}

impl<P> Leadership<P> {
    /// A leadership won at `now`: no round sent, no acknowledgement heard,
    /// no lease; the strict step-down deadline is one lease away (the
    /// promises of the votes that elected it).
    pub(super) fn new(now: Instant, lease: Duration, round_slots: usize) -> Self {
        Leadership {
            since: now,
            next_heartbeat: now,
            seq: 0,
            full_seq: 0,
            renew_at: None,
            rounds: alloc::vec![(0, Instant::ZERO); round_slots],
            fence: LeaderFence::new(now, lease),
            newer_stamp_seen: false,
            change: None,
            rank: RankLeading::default(),
        }
    }

    pub(super) fn since(&self) -> Instant {
        self.since
    }

    pub(super) fn next_heartbeat(&self) -> Instant {
        self.next_heartbeat
    }

    /// Brings the next round forward to no later than `at`.
    pub(super) fn heartbeat_by(&mut self, at: Instant) {
        self.next_heartbeat = self.next_heartbeat.min(at);
    }

    /// When the voters that have not acknowledged the newest full round
    /// get one more (rule `urgent_renewal`).
    pub(super) fn renew_at(&self) -> Option<Instant> {
        self.renew_at
    }

    /// The newest round sent (0: none yet).
    pub(super) fn seq(&self) -> u64 {
        self.seq
    }

    /// Records the send time of the next round and returns its number.
    fn start_round(&mut self, now: Instant) -> u64 {
        self.seq += 1;
        let len = self.rounds.len() as u64;
        self.rounds[(self.seq % len) as usize] = (self.seq, now);
        self.seq
    }

    /// When round `seq` of this leadership was sent, if it is recent enough
    /// to matter (older rounds cannot back a lease that has not expired).
    pub(super) fn round_sent(&self, seq: u64) -> Option<Instant> {
        let len = self.rounds.len() as u64;
        let (s, at) = self.rounds[(seq % len) as usize];
        (s == seq && seq > 0).then_some(at)
    }

    pub(super) fn fence(&self) -> &LeaderFence {
        &self.fence
    }

    pub(super) fn fence_mut(&mut self) -> &mut LeaderFence {
        &mut self.fence
    }

    pub(super) fn newer_stamp_seen(&self) -> bool {
        self.newer_stamp_seen
    }

    pub(super) fn note_newer_stamp(&mut self) {
        self.newer_stamp_seen = true;
    }

    pub(super) fn change(&self) -> Option<&Change> {
        self.change.as_ref()
    }

    pub(super) fn change_mut(&mut self) -> &mut Option<Change> {
        &mut self.change
    }

    pub(super) fn rank(&self) -> &RankLeading<P> {
        &self.rank
    }

    pub(super) fn rank_mut(&mut self) -> &mut RankLeading<P> {
        &mut self.rank
    }

    /// The state as the model checker sees it (see `fingerprint.rs`).
    #[cfg(feature = "sim")]
    pub(super) fn fingerprint(&self, rel: &Relative, timing: &super::Timing, h: &mut Fnv)
    where
        P: core::hash::Hash,
    {
        use core::hash::Hash;
        let Leadership {
            since,
            next_heartbeat,
            seq,
            full_seq,
            renew_at,
            rounds,
            fence,
            newer_stamp_seen,
            change,
            rank,
        } = self;
        newer_stamp_seen.hash(h);
        (rel.anchor(*since), rel.expiry(*next_heartbeat), seq).hash(h);
        (full_seq, renew_at.map(|t| rel.expiry(t))).hash(h);
        // How long it has led also decides past a death timeout: when a
        // hand-back may start and when an inherited change is overdue.
        let led_for = |d: Duration| rel.expiry(*since + d);
        (led_for(timing.hand_back_after), led_for(timing.change)).hash(h);
        for &(seq, sent) in rounds {
            (seq, rel.anchor(sent)).hash(h);
        }
        fence.fingerprint(rel, h);
        change.is_some().hash(h);
        if let Some(change) = change {
            change.fingerprint(rel, h);
        }
        rank.fingerprint(rel, timing.hand_back_after, h);
    }
}

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
        self.follow_round(now, from, seq);
        self.ack_heartbeat(from, seq, out);
    }

    /// Round `seq` of `from`, this term's known leader, which this node
    /// follows: its promise starts again (rule `follow_leader`). What a
    /// follower does for every new round before acknowledging it; the
    /// caller checked that the round is new (rule `old_rounds_ignored`).
    #[inline]
    pub(super) fn follow_round(&mut self, now: Instant, from: NodeId, seq: u64) {
        debug_assert!(self.phase.is_follower() && self.leader == Some(from));
        self.gates.heard_leader(now, seq, self.rank.delay());
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
    pub(super) fn old_round(&mut self, from: NodeId, seq: u64, out: &mut Vec<Action<P>>) -> bool {
        let newest = self.gates.newest_round();
        if seq > newest {
            return false;
        }
        if seq == newest && self.leader == Some(from) {
            self.ack_heartbeat(from, seq, out);
        } else {
            slog::debug!(self.log, "heartbeat round older than one already seen: ignored";
                "rule" => Rule::OldRoundsIgnored, "term" => self.term, "from" => from,
                "seq" => seq, "newest" => newest);
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
        index: Option<usize>,
        ack: Ack,
        position: P,
        out: &mut Vec<Action<P>>,
    ) {
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
        if self.record_ack_at(
            (now, ack.seq),
            index,
            sent,
            ack.promise,
            ack.can_lead,
            position,
        ) {
            self.raise_anchors();
        }
        self.settle_urgent_renewal();
        if self.handover.transfer_waits_for(from) {
            self.maybe_send_timeout_now(from, out);
        }
        if self.change_pending() {
            self.advance_change(now, out);
        }
    }

    /// Whether a membership step may be due: a change runs, the membership
    /// is joint or inherited, or this leader is no voter of its own
    /// membership. None of these: nothing to advance (the common case).
    fn change_pending(&self) -> bool {
        self.phase.leadership().is_some_and(|l| l.change.is_some())
            || self.members.current().is_joint()
            || !self.tracker.is_voter()
            || self.inherited_membership()
    }

    /// Records an acknowledgement from the peer at `index` of a round sent at `sent`
    /// (`None`: too old to be remembered; it then backs nothing, but its
    /// position is still news): when the peer was heard (soft fencing) and
    /// until when its promise backs this leadership (strict fencing).
    /// Returns whether the fencing anchors may move (a value rose above
    /// the anchor it feeds; otherwise the quorum's value cannot change).
    /// `now` is when it arrived, which may be before this step's time (a
    /// host's, `quiet.rs`).
    pub(super) fn record_ack_at(
        &mut self,
        (now, seq): (Instant, u64),
        index: usize,
        sent: Option<Instant>,
        promise: Duration,
        can_lead: bool,
        position: P,
    ) -> bool {
        // A zero promise backs nothing; an instant that saturated at the end
        // of time proves nothing either.
        // Only strict fencing reads promises.
        let fencing = self.cfg.fencing;
        let promised = sent
            .filter(|_| fencing == Fencing::Strict && !promise.is_zero())
            .map(|s| s + self.lease_for_promise(promise))
            .filter(|&until| until < Instant::MAX);
        // Soft fencing hears a peer when its acknowledgement arrives, but
        // only for a round sent within the last death timeout: one delayed
        // longer says nothing about now, and would keep a deaf leader in
        // office for as long as such acknowledgements trickle in.
        let rtt = sent
            .map(|s| now.as_nanos().saturating_sub(s.as_nanos()))
            .filter(|&rtt| rtt <= self.cfg.timing.promise_nanos);
        let Some(l) = self.phase.leadership() else {
            return false;
        };
        let backs_lease = l.fence.backs_lease(sent);
        let moves = l
            .fence
            .moved_by(fencing, rtt.map(|_| now), promised, backs_lease);
        let peer = self.tracker.peer_at_mut(index);
        peer.note_can_lead(can_lead);
        peer.record_ack((now, seq), rtt, (promised, backs_lease), position);
        moves
    }

    /// Rule `leader_heartbeats_at_once`: a new leader announces itself
    /// immediately so followers stop campaigning. Its lease (strict fencing)
    /// starts only once a quorum acknowledges a round of this term.
    pub(super) fn become_leader(&mut self, now: Instant, out: &mut Vec<Action<P>>) {
        self.phase = Phase::Leader(Box::new(Leadership::new(
            now,
            self.cfg.timing.lease,
            self.cfg.timing.round_slots,
        )));
        self.tracker.start_leadership();
        self.handover.leading();
        // The restart probes are a follower's timer (rollback.rs): a node
        // elected this early has sent its first ones already.
        self.rollback.stop_probing();
        slog::info!(self.log, "enter leader state, heartbeat at once"; "rule" => Rule::LeaderHeartbeatsAtOnce,
            "term" => self.term, "quorum" => self.tracker.quorum());
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

    /// [`Input::HeartbeatNow`](crate::Input::HeartbeatNow): expired timers
    /// first (rule `strict_lease`: a leader past its lease steps down
    /// before it could send), then a round unless one left at `now`.
    pub(super) fn heartbeat_now(&mut self, now: Instant, out: &mut Vec<Action<P>>) {
        // A full round goes out now: no voter needs a renewal before it.
        // If none does after all (one left at this very instant), the
        // renewal set aside stays armed (rule `urgent_renewal`).
        let renewal = self.phase.leadership_mut().and_then(|l| l.renew_at.take());
        self.on_tick(now, out);
        let sent_now = self
            .phase
            .leadership()
            .is_some_and(|l| l.round_sent(l.full_seq) == Some(now));
        if self.phase.is_leader() && !sent_now {
            self.broadcast_heartbeat(now, out);
        } else if let Some(l) = self.phase.leadership_mut() {
            l.renew_at = l.renew_at.or(renewal);
        }
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
        l.full_seq = seq;
        l.renew_at = None;
        self.gates.leading(now);
        self.send_to_peers(&MessageKind::Heartbeat { seq }, out);
        self.arm_urgent_renewal(now);
        if self.tracker.alone_is_quorum() {
            // Its own round is all a single-voter quorum needs; otherwise
            // only acknowledgements move the anchors.
            self.recompute_anchors();
        }
        if self.members.current().epoch > 0 {
            self.resend_membership(out);
        }
        if self.change_pending() {
            self.advance_change(now, out);
        }
        if self.members.current().rank.is_ranked() {
            self.record_round_position();
            self.publish_standings(now, out);
            self.maybe_hand_back(now, out);
        }
    }

    /// Rule `urgent_renewal`: how long after a round the voters that have
    /// not acknowledged it get one more: twice the slowest round trip
    /// heard, and no sooner than the fastest heartbeat pace. `None` when
    /// the next regular round comes first, or when fencing is off (nothing
    /// then ends for want of acknowledgements).
    fn arm_urgent_renewal(&mut self, now: Instant) {
        if self.cfg.fencing != Fencing::Soft && self.cfg.fencing != Fencing::Strict {
            return;
        }
        let slowest = self
            .tracker
            .peers()
            .iter()
            .filter(|p| p.is_voter())
            .filter_map(|p| p.rtt())
            .max()
            .unwrap_or_default();
        let pace = super::lease::min_heartbeat_period(self.cfg.timing.heartbeat);
        let at = now + slowest.saturating_mul(2).max(pace);
        if let Some(l) = self.phase.leadership_mut() {
            l.renew_at = (at < l.next_heartbeat).then_some(at);
        }
    }

    /// Rule `urgent_renewal`: once a quorum of every voter set has
    /// acknowledged the newest full round, no voter needs another.
    #[inline]
    fn settle_urgent_renewal(&mut self) {
        let Some(l) = self.phase.leadership() else {
            return;
        };
        if l.renew_at.is_none() {
            return;
        }
        let full = l.full_seq;
        if self.tracker.has_quorum(true, |p| p.acked_seq() >= full)
            && let Some(l) = self.phase.leadership_mut()
        {
            l.renew_at = None;
        }
    }

    /// Rule `urgent_renewal` (timer `urgent_renewal`): the newest full
    /// round is not acknowledged by a quorum of every voter set past its
    /// expected round trip, so each voter that has not acknowledged it
    /// gets a new round now, and again at the same pace until a quorum has
    /// or the next regular round is due. Under packet loss this renews the
    /// lease (or, soft, the quorum heard) before it can lapse, instead of
    /// waiting a whole interval per try. It moves no bound: a round is a
    /// round, its acknowledgement counts from its own send time, and the
    /// voters that answered in time get nothing more, so a network without
    /// loss carries no extra message.
    pub(super) fn urgent_renewal(&mut self, now: Instant, out: &mut Vec<Action<P>>) {
        let Some(l) = self.phase.leadership_mut() else {
            return;
        };
        l.renew_at = None;
        let full = l.full_seq;
        // A full round due in this same tick reaches them anyway.
        if full == 0
            || l.next_heartbeat <= now
            || self.tracker.has_quorum(true, |p| p.acked_seq() >= full)
        {
            return;
        }
        let seq = l.start_round(now);
        self.gates.leading(now);
        let mut sent = 0usize;
        for i in 0..self.tracker.peers().len() {
            let peer = &self.tracker.peers()[i];
            if !peer.is_voter() || peer.acked_seq() >= full {
                continue;
            }
            let to = peer.id();
            self.send_with_vote(to, MessageKind::Heartbeat { seq }, out);
            sent += 1;
        }
        slog::debug!(self.log, "round not acknowledged by a quorum in time: send it again to those who did not";
            "rule" => Rule::UrgentRenewal, "term" => self.term, "seq" => seq, "peers" => sent);
        self.arm_urgent_renewal(now);
    }

    /// Rule `step_down`: leaves leadership in the same term (no term bump),
    /// failing a running transfer; no own campaign for a round. The caller
    /// decides what follows (resign message, demote embargo).
    pub(super) fn step_down(&mut self, reason: StepDownReason, out: &mut Vec<Action<P>>) {
        slog::warn!(self.log, "resigning from leader state"; "rule" => Rule::StepDown,
            "term" => self.term, "reason" => ?reason);
        self.fail_transfer(TransferFailure::SteppedDown, out);
        let change = self.take_change();
        self.fail_change_on_step_down(change, out);
        self.phase = Phase::Follower;
        // Campaigning at once would only repeat what just failed.
        self.gates.stepped_down(self.now);
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
            "last_heard" => ?self.gates.leader_contact());
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
        self.gates.leader_resigned(now, self.rank.delay());
    }
}
