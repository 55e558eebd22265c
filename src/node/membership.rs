//! The membership as durable state, and the leader's changes to it (see
//! the [`membership`](crate::membership) module for the design and the
//! safety argument).
//!
//! A node uses only its **durable** membership: it counts votes and
//! acknowledgements, grants votes and stamps its messages with the
//! membership storage confirmed (rule `membership_durable_before_use`).
//! A newer one, proposed by this node as leader or received from a leader,
//! is first written ([`Action::PersistMembership`](crate::Action::PersistMembership)); one write at a time,
//! the newest waiting one superseding older ones.

#[cfg(feature = "sim")]
use super::fingerprint::{Fnv, Relative};
use alloc::boxed::Box;
use alloc::vec::Vec;

use super::leadership::Leadership;
use super::{Action, Node, Phase};
use crate::NodeId;
use crate::membership::{MAX_EPOCH, Membership, MembershipChange, MembershipFailure, MembershipId};
use crate::message::MessageKind;
use crate::position::LogPosition;
use crate::rank::RankPolicy;
use crate::rule::Rule;
use crate::status::{Event, PromoteFailure, StepDownReason};
use crate::time::Instant;

/// The durable membership, its writes, and what peers' stamps said of it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) struct Members {
    /// The durable membership in use, and its id.
    current: Membership,
    id: MembershipId,
    /// The membership write in flight and the newest one waiting for it.
    // Boxed: a group that is not changing its membership (almost every
    // group of a host, almost always) keeps two pointers, not two
    // memberships.
    in_flight: Option<Box<Membership>>,
    waiting: Option<Box<Membership>>,
    /// A configured quorum that is not a majority (bootstrap only).
    custom_quorum: Option<usize>,
    /// Started with no membership; waits for one that names it.
    joining: bool,
    /// Messages whose stamp conflicted with this membership.
    conflicts: u64,
    /// The last conflicting stamp reported, per peer.
    conflicts_reported: Vec<(NodeId, MembershipId)>,
}

impl Members {
    pub(super) fn new(current: Membership, custom_quorum: Option<usize>, joining: bool) -> Self {
        Members {
            id: current.id(),
            current,
            in_flight: None,
            waiting: None,
            custom_quorum,
            joining,
            conflicts: 0,
            conflicts_reported: Vec::new(),
        }
    }

    pub(super) fn current(&self) -> &Membership {
        &self.current
    }

    pub(super) fn id(&self) -> MembershipId {
        self.id
    }

    /// Messages whose stamp conflicted with this membership.
    pub(super) fn conflicts(&self) -> u64 {
        self.conflicts
    }

    /// The newest membership known here: the durable one, or a newer one
    /// being written.
    fn newest_id(&self) -> MembershipId {
        self.waiting
            .as_deref()
            .or(self.in_flight.as_deref())
            .map_or(self.id, Membership::id)
    }

    /// The newest membership known here: waiting, in flight, or durable.
    fn newest(&self) -> &Membership {
        self.waiting
            .as_deref()
            .or(self.in_flight.as_deref())
            .unwrap_or(&self.current)
    }

    /// The state as the model checker sees it (`conflicts` is a counter
    /// that decides nothing).
    #[cfg(feature = "sim")]
    pub(super) fn fingerprint(&self, h: &mut Fnv) {
        use core::hash::Hash;
        let Members {
            current,
            id,
            in_flight,
            waiting,
            custom_quorum,
            joining,
            conflicts: _,
            conflicts_reported,
        } = self;
        (current, id, in_flight, waiting, custom_quorum, joining).hash(h);
        conflicts_reported.hash(h);
    }
}

/// A change the leader is making, one step at a time (rule
/// `one_change_at_a_time`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) struct Change {
    /// What the operator asked for.
    request: MembershipChange,
    /// The voters and observers the change ends with.
    voters: Vec<NodeId>,
    observers: Vec<NodeId>,
    /// The step it is at.
    step: Step,
    /// The membership this step waits for: durable here and stored by a
    /// quorum of each of its voter sets.
    awaiting: Option<MembershipId>,
    /// When it fails unless it reached the final membership (rule
    /// `membership_change_bounded`).
    deadline: Instant,
    /// The observers before the change: a first step that did not finish
    /// in time is undone to them.
    observers_before: Vec<NodeId>,
    /// The rank policy and priorities before the change, undone to the
    /// same way.
    rank_before: (RankPolicy, Vec<(NodeId, u32)>),
}

impl Change {
    /// The state as the model checker sees it (see `fingerprint.rs`).
    #[cfg(feature = "sim")]
    pub(super) fn fingerprint(&self, rel: &Relative, h: &mut Fnv) {
        use core::hash::Hash;
        let Change {
            request,
            voters,
            observers,
            step,
            awaiting,
            deadline,
            observers_before,
            rank_before,
        } = self;
        (request, voters, observers, step, awaiting, observers_before).hash(h);
        rank_before.hash(h);
        rel.expiry(*deadline).hash(h);
    }
}

/// The steps of a change.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) enum Step {
    /// A membership that adds or removes an observer only; then done, or,
    /// for a new voter, catch-up.
    Observers { then_catch_up: Option<NodeId> },
    /// Waiting for the new voter to catch up (rule `new_voter_catches_up`).
    CatchUp { id: NodeId },
    /// The joint membership (rule `joint_quorums`).
    Joint,
    /// The final membership: the change is decided.
    Final,
}

impl<P: LogPosition> Node<P> {
    /// The durable membership this node acts on.
    #[must_use]
    pub fn membership(&self) -> &Membership {
        &self.members.current
    }

    /// The id of the durable membership: the stamp a driver attaches to
    /// every message this node sends (see
    /// [`Input::ReceiveStamped`](crate::Input::ReceiveStamped)).
    #[must_use]
    pub fn membership_id(&self) -> MembershipId {
        self.members.id
    }

    /// The membership change this leader is making.
    fn change(&self) -> Option<&Change> {
        self.phase.leadership().and_then(Leadership::change)
    }

    fn change_mut(&mut self) -> Option<&mut Change> {
        self.phase
            .leadership_mut()
            .and_then(|l| l.change_mut().as_mut())
    }

    /// Sets the change this leader makes (nothing when not leading).
    fn set_change(&mut self, change: Option<Change>) {
        if let Some(l) = self.phase.leadership_mut() {
            *l.change_mut() = change;
        }
    }

    pub(super) fn take_change(&mut self) -> Option<Change> {
        self.phase.leadership_mut()?.change_mut().take()
    }

    /// The newest membership known here: the durable one, or a newer one
    /// being written.
    pub(super) fn newest_membership_id(&self) -> MembershipId {
        self.members.newest_id()
    }

    /// Rule `membership_durable_before_use`: asks storage for `next`
    /// (newer than anything known here); the node acts on it only once
    /// storage confirms it.
    pub(super) fn stage_membership(&mut self, next: Membership, out: &mut Vec<Action<P>>) {
        debug_assert!(next.id().is_newer_than(&self.newest_membership_id()));
        self.members.waiting = Some(Box::new(next));
        self.flush_membership_write(out);
    }

    /// Rule `membership_durable_before_use`: starts the write of the newest
    /// waiting membership unless one is in flight.
    fn flush_membership_write(&mut self, out: &mut Vec<Action<P>>) {
        if self.members.in_flight.is_some() {
            return;
        }
        if let Some(next) = self.members.waiting.take() {
            slog::info!(self.log, "persist membership"; "rule" => Rule::MembershipDurableBeforeUse,
                "term" => self.term, "epoch" => next.epoch, "membership_term" => next.term);
            out.push(Action::PersistMembership(next.clone()));
            self.members.in_flight = Some(next);
        }
    }

    /// Storage confirmed the membership write `id`: use it from now on.
    /// Rule `persist_ack_matches_write`: an acknowledgement of anything
    /// else changes nothing.
    pub(super) fn on_membership_persisted(
        &mut self,
        now: Instant,
        id: MembershipId,
        out: &mut Vec<Action<P>>,
    ) {
        let matches = self
            .members
            .in_flight
            .as_ref()
            .is_some_and(|m| m.id() == id);
        if !matches {
            slog::error!(self.log, "PersistedMembership does not match the write in flight; ignored";
                "rule" => Rule::PersistAckMatchesWrite, "term" => self.term, "acked" => %id);
            return;
        }
        let Some(membership) = self.members.in_flight.take() else {
            return;
        };
        self.install_membership(now, *membership, out);
        self.flush_membership_write(out);
    }

    /// Rule `membership_durable_before_use`: `membership` is durable; count,
    /// vote and stamp with it from now on. A running (pre-)vote round is
    /// abandoned (its tally was kept over the old voters); a leader keeps
    /// what it learned of the peers that remain and tells every peer, old
    /// and new.
    fn install_membership(
        &mut self,
        now: Instant,
        membership: Membership,
        out: &mut Vec<Action<P>>,
    ) {
        let old_members = self
            .tracker
            .peers()
            .iter()
            .map(|p| p.id())
            .collect::<Vec<_>>();
        let sets_changed = self.tracker.apply(&membership, self.members.custom_quorum);
        self.members.id = membership.id();
        self.members.current = membership;
        slog::info!(self.log, "membership durable, in use"; "rule" => Rule::MembershipDurableBeforeUse,
            "term" => self.term, "epoch" => self.members.current.epoch,
            "membership_term" => self.members.current.term,
            "voters" => ?self.members.current.voters, "outgoing" => ?self.members.current.outgoing,
            "observers" => ?self.members.current.observers);
        if matches!(self.phase, Phase::PreVoting(_) | Phase::Candidate(_)) {
            // Votes were counted over the old voters: start over (a
            // promotion keeps its deadline and reports its outcome).
            self.abandon_round(now);
        }
        if !self.tracker.is_voter() && !self.phase.is_leader() {
            self.phase = Phase::Follower;
            self.end_promotion(Some(PromoteFailure::NotAllowed), out);
        }
        self.probe_new_members(&old_members, out);
        self.emit(
            Event::MembershipChanged {
                epoch: self.members.current.epoch,
                voters: self.members.current.voters.clone(),
                observers: self.members.current.observers.clone(),
            },
            out,
        );
        if self.phase.is_leader() {
            // Before anything is sent: the new voters can act on this
            // membership only once they receive it.
            if sets_changed {
                self.rederive_anchors(now, out);
            } else {
                self.recompute_anchors();
            }
            // Every peer, and those just removed, so they learn it now.
            let mut to = old_members;
            to.extend(self.tracker.peers().iter().map(|p| p.id()));
            to.sort_unstable();
            to.dedup();
            for id in to {
                self.send_membership(id, out);
            }
            self.advance_change(now, out);
        }
    }

    /// Sends this node's durable membership to `to`: a leader's asserts
    /// its leadership (and so its vote); anyone else's only its term.
    pub(super) fn send_membership(&mut self, to: NodeId, out: &mut Vec<Action<P>>) {
        if to == self.id {
            return;
        }
        let kind = MessageKind::MembershipUpdate {
            membership: Box::new(self.members.current.clone()),
        };
        if self.phase.is_leader() {
            self.send_with_vote(to, kind, out);
        } else {
            self.reply(to, kind, out);
        }
    }

    /// Whether this node, unable to campaign itself (mode voter or off, or
    /// not a voter), tells the members its membership while no leader is
    /// known (see [`Node::share_membership_when_leaderless`]): only once
    /// the membership changed (epoch > 0) and the node is no joiner.
    pub(super) fn shares_membership_when_leaderless(&self) -> bool {
        self.members.current.epoch > 0 && !self.members.joining
    }

    /// Rule `membership_adopt_newer`, from a node that cannot campaign:
    /// with no leader heard for a death timeout (the campaign timer's
    /// gates), it sends its membership to every other member, once per
    /// election round. Otherwise, when every node holding the newest
    /// membership is in mode voter, a new voter that missed it would never
    /// learn that it votes, and no one would ever campaign. Receivers adopt
    /// only a newer membership, so this is as safe as every other path.
    pub(super) fn share_membership_when_leaderless(
        &mut self,
        now: Instant,
        out: &mut Vec<Action<P>>,
    ) {
        let to = self.members.current.members();
        slog::debug!(self.log, "no leader and no campaign of my own: share the membership";
            "rule" => Rule::MembershipAdoptNewer, "term" => self.term,
            "epoch" => self.members.current.epoch);
        for id in to {
            self.send_membership(id, out);
        }
        self.gates.campaign_after_round(now);
    }

    /// Rule `membership_adopt_newer`, between a candidate and a voter that
    /// refuses it, either way round: whichever of the two holds the newer
    /// durable membership sends it to the other (`theirs` is the other's
    /// stamp). A refused candidate stops asking with an old membership (a
    /// leader that removed itself may be the only node holding the final
    /// membership the others need); a refusing voter behind (a new voter
    /// that missed the joint phase refuses everyone) learns that it votes.
    /// From a candidate to a voter of an earlier term, the update moves the
    /// voter at most to the membership's own term.
    pub(super) fn share_newer_membership(
        &mut self,
        to: NodeId,
        theirs: MembershipId,
        out: &mut Vec<Action<P>>,
    ) {
        if self.members.id.is_newer_than(&theirs) {
            slog::info!(self.log, "refusal with an older membership on the other side: send ours";
                "rule" => Rule::MembershipAdoptNewer, "term" => self.term, "to" => to);
            self.send_membership(to, out);
        }
    }

    /// Rule `membership_adopt_newer`, the leader's side: each round, a peer
    /// whose messages of this leadership showed no membership or an older
    /// one than this leader's is sent it. A cluster that never changed its
    /// membership (epoch 0) has no peer to catch up.
    pub(super) fn resend_membership(&mut self, out: &mut Vec<Action<P>>) {
        if !self.phase.is_leader() {
            return;
        }
        let mine = self.members.id;
        for i in 0..self.tracker.peers().len() {
            let peer = &self.tracker.peers()[i];
            if peer.membership().is_none_or(|m| mine.is_newer_than(&m)) {
                let id = peer.id();
                slog::debug!(self.log, "peer behind this membership: send it";
                    "rule" => Rule::MembershipAdoptNewer, "term" => self.term, "to" => id);
                self.send_membership(id, out);
            }
        }
    }

    /// Rule `membership_adopt_newer`: a leader's membership newer than any
    /// known here is written, then used. Older or equal ones change
    /// nothing; a malformed one is logged and ignored; a joining node takes
    /// only one that names it. A membership made in a later term than this
    /// node's brings that term along (with no vote), as Raft keeps
    /// currentTerm at least the last log entry's term: otherwise this node
    /// could campaign for a term whose leader made that membership, and
    /// the voters that membership added (who had no vote in that term)
    /// could elect a second leader of it. A leader steps down for such a
    /// membership; it ignores any other.
    pub(super) fn on_membership_update(
        &mut self,
        now: Instant,
        from: NodeId,
        msg_term: u64,
        membership: Membership,
        out: &mut Vec<Action<P>>,
    ) {
        let id = membership.id();
        let reason = if !membership.is_well_formed() {
            Some("malformed membership")
        } else if membership.term > msg_term || membership.epoch > MAX_EPOCH {
            // A leader's membership was made in its term or before, one
            // epoch per change: anything else is forged or corrupt, and
            // taking it would put the membership out of every honest
            // leader's reach.
            Some("membership made in a term after the message's, or epoch beyond 2^62")
        } else if !id.is_newer_than(&self.newest_membership_id()) {
            None
        } else if self.members.joining && !membership.is_member(self.id) {
            Some("a joining node waits for a membership that names it")
        } else {
            if membership.term > self.term {
                slog::info!(self.log, "membership of a later term: adopt its term";
                    "rule" => Rule::MembershipAdoptNewer, "term" => self.term, "from" => from,
                    "membership_term" => membership.term);
                self.adopt_term(now, membership.term, out);
            }
            if self.phase.is_leader() {
                return;
            }
            slog::info!(self.log, "newer membership from the leader: store it";
                "rule" => Rule::MembershipAdoptNewer, "term" => self.term, "from" => from,
                "epoch" => id.epoch, "membership_term" => id.term);
            self.members.joining = false;
            self.stage_membership(membership, out);
            return;
        };
        if let Some(reason) = reason {
            slog::warn!(self.log, "membership update ignored"; "rule" => Rule::MembershipAdoptNewer,
                "term" => self.term, "from" => from, "reason" => reason);
        }
    }

    /// Rule `membership_conflict_reported`: a peer stamps its messages with
    /// the same version as this node's membership but other voter sets
    /// (different bootstrap peer lists, or lost state). Counted on every
    /// message; reported (event and warning) once per peer and stamp, so
    /// the conflict is loud, never a silent stall.
    pub(super) fn check_stamp(
        &mut self,
        from: NodeId,
        stamp: MembershipId,
        out: &mut Vec<Action<P>>,
    ) {
        if self.members.joining || !stamp.conflicts_with(&self.members.id) {
            return;
        }
        self.members.conflicts = self.members.conflicts.saturating_add(1);
        if self.members.conflicts_reported.contains(&(from, stamp)) {
            return;
        }
        self.members
            .conflicts_reported
            .retain(|(peer, _)| *peer != from);
        self.members.conflicts_reported.push((from, stamp));
        let mine = self.members.id;
        slog::error!(self.log, "a peer disagrees about the membership at the same epoch";
            "rule" => Rule::MembershipConflictReported, "term" => self.term, "from" => from,
            "epoch" => mine.epoch, "mine" => %mine, "theirs" => %stamp);
        self.emit(
            Event::MembershipConflict {
                peer: from,
                mine,
                theirs: stamp,
            },
            out,
        );
    }

    /// The leader records the membership a message of its term from the
    /// peer at `index` shows (the highest seen in this leadership). Rule
    /// `membership_adopt_newer` needs stamps to tell who holds what: a peer
    /// whose messages carry none once the membership changed is logged
    /// (once per leadership).
    pub(super) fn note_peer_stamp(&mut self, index: usize, stamp: MembershipId) {
        let (mine, term) = (self.members.id, self.term);
        let Some(l) = self.phase.leadership_mut() else {
            return;
        };
        let peer = self.tracker.peer_at_mut(index);
        let first = peer.membership().is_none();
        peer.note_stamp(stamp);
        if first && stamp == MembershipId::default() && mine.epoch > 0 {
            // An unstamped message stands for the bootstrap membership: a
            // change can never be seen stored through this peer.
            let from = peer.id();
            slog::warn!(self.log, "a peer's messages carry no membership stamp: feed Input::ReceiveStamped";
                "rule" => Rule::MembershipAdoptNewer, "term" => self.term, "from" => from,
                "epoch" => mine.epoch);
        }
        if stamp.is_newer_than(&mine) && stamp.term < term {
            l.note_newer_stamp();
        }
    }

    /// Whether membership `version` is durable here and on a quorum of
    /// each voter set of this node's durable membership, as their messages
    /// of this leadership show.
    fn stored(&self, version: MembershipId) -> bool {
        let holds = |m: &MembershipId| !version.is_newer_than(m);
        self.phase.is_leader()
            && holds(&self.members.id)
            && self
                .tracker
                .has_quorum(true, |p| p.membership().as_ref().is_some_and(holds))
    }

    /// Rule `new_voter_catches_up`: `id` acknowledged a round sent within
    /// the last death timeout, with this membership and a log position at
    /// least the leader's (the gate a leadership transfer uses).
    fn caught_up(&self, now: Instant, id: NodeId) -> bool {
        let Some(peer) = self.tracker.peer(id).filter(|_| self.phase.is_leader()) else {
            return false;
        };
        let recent = peer.heard_within(now, self.cfg.timing.death);
        let current = peer
            .membership()
            .is_some_and(|m| !self.members.id.is_newer_than(&m));
        let position = peer
            .position()
            .is_some_and(|p| p.is_at_least(self.tracker.position()));
        recent && current && position
    }

    /// Whether one of `voters` may lead: this leader, a node not heard
    /// from yet, or one whose acknowledgements say its mode allows it; and
    /// in every case, one the rank policy lets lead (priority above 0).
    /// `ranks` is the membership whose rank policy judges them.
    fn some_voter_may_lead(&self, ranks: &Membership, voters: &[NodeId]) -> bool {
        voters.iter().any(|v| {
            ranks.rank_allows_leading(*v)
                && (*v == self.id
                    || self
                        .tracker
                        .peer(*v)
                        .is_none_or(|p| p.can_lead() != Some(false)))
        })
    }

    /// Whether a majority of `voters` is alive: this node if it is one, and
    /// peers that acknowledged a round within the last death timeout. A
    /// joint membership whose new set has no live majority could never be
    /// stored, and its leader could not keep its quorum (rule
    /// `joint_quorums`): it is not entered.
    fn live_majority(&self, now: Instant, voters: &[NodeId]) -> bool {
        if !self.phase.is_leader() {
            return false;
        }
        let death = self.cfg.timing.death;
        let alive = voters
            .iter()
            .filter(|&&id| {
                id == self.id
                    || self
                        .tracker
                        .peer(id)
                        .is_some_and(|p| p.heard_within(now, death))
            })
            .count();
        alive > voters.len() / 2
    }

    /// `Input::ChangeMembership`: rules `one_change_at_a_time`,
    /// `change_after_own_membership_stored` and `joint_quorums` (a removal
    /// needs a live majority of the voters it leaves) decide whether it
    /// starts.
    pub(super) fn on_change_membership(
        &mut self,
        now: Instant,
        request: MembershipChange,
        out: &mut Vec<Action<P>>,
    ) {
        let refusal = if !self.phase.is_leader() {
            Some((
                Rule::OneChangeAtATime,
                MembershipFailure::NotLeader {
                    leader: self.leader,
                },
            ))
        } else if self.change().is_some()
            || self.members.current.is_joint()
            || self.newest_membership_id() != self.members.id
        {
            Some((Rule::OneChangeAtATime, MembershipFailure::ChangeInProgress))
        } else if self.members.custom_quorum.is_some() && self.members.current.epoch == 0 {
            // The custom quorum applies to the bootstrap membership only
            // (see `voter_set`), which such a cluster never leaves.
            Some((Rule::OneChangeAtATime, MembershipFailure::CustomQuorum))
        } else if self.members.current.epoch > MAX_EPOCH - 3 {
            // A change takes up to three epochs (observer, joint, final).
            Some((Rule::OneChangeAtATime, MembershipFailure::Invalid))
        } else if self.inherited_membership() || !self.stored(self.members.id) {
            Some((
                Rule::ChangeAfterOwnMembershipStored,
                MembershipFailure::NotEstablished,
            ))
        } else {
            None
        };
        if let Some((rule, reason)) = refusal {
            slog::info!(self.log, "membership change refused"; "rule" => rule,
                "term" => self.term, "change" => ?request, "reason" => ?reason);
            self.emit(Event::MembershipChangeFailed { reason }, out);
            return;
        }
        if let Some(next) = self.plan_rank_change(&request) {
            self.start_rank_change(now, request, next, out);
            return;
        }
        let Some((voters, observers, step, address)) = self.plan(&request) else {
            slog::info!(self.log, "membership change refused"; "rule" => Rule::OneChangeAtATime,
                "term" => self.term, "change" => ?request, "reason" => "invalid for this membership");
            let reason = MembershipFailure::Invalid;
            self.emit(Event::MembershipChangeFailed { reason }, out);
            return;
        };
        if !self.some_voter_may_lead(&self.members.current, &voters) {
            slog::info!(self.log, "membership change refused"; "rule" => Rule::OneChangeAtATime,
                "term" => self.term, "change" => ?request, "voters" => ?voters,
                "reason" => "no voter of the new set may lead");
            let reason = MembershipFailure::NoLeaderLeft;
            self.emit(Event::MembershipChangeFailed { reason }, out);
            return;
        }
        if step == Step::Joint && !self.live_majority(now, &voters) {
            slog::info!(self.log, "membership change refused"; "rule" => Rule::JointQuorums,
                "term" => self.term, "change" => ?request, "voters" => ?voters,
                "reason" => "the new voters have no live majority");
            let reason = MembershipFailure::NoQuorum;
            self.emit(Event::MembershipChangeFailed { reason }, out);
            return;
        }
        self.begin_change(now, request, voters, observers, step);
        match step {
            Step::Observers { then_catch_up } => {
                // Add the new node as an observer (or drop one): no voter
                // set changes, so no joint phase.
                let current = &self.members.current;
                let observers = match (then_catch_up, self.change()) {
                    (Some(id), _) => {
                        crate::membership::sorted(current.observers.iter().copied().chain([id]))
                    }
                    (None, Some(change)) => change.observers.clone(),
                    (None, None) => current.observers.clone(),
                };
                let mut next =
                    current.successor(self.term, current.voters.clone(), Vec::new(), observers);
                if let Some((id, address)) = address {
                    next = next.with_address(id, address);
                }
                self.propose(next, out);
            }
            Step::CatchUp { .. } => self.advance_change(now, out),
            Step::Joint | Step::Final => self.propose_joint(out),
        }
    }

    /// The membership's rank settings, as a change records them to undo.
    fn rank_before(&self) -> (RankPolicy, Vec<(NodeId, u32)>) {
        (
            self.members.current.rank,
            self.members.current.priorities.clone(),
        )
    }

    /// The membership a rank change (`SetRankPolicy`, `SetPriority` of a
    /// member) makes: voters and observers unchanged, epoch + 1. `None`
    /// for any other request, and for a priority of a non-member (which
    /// `plan` then refuses as invalid).
    fn plan_rank_change(&self, request: &MembershipChange) -> Option<Membership> {
        let m = &self.members.current;
        let same = || m.successor(self.term, m.voters.clone(), Vec::new(), m.observers.clone());
        match request {
            MembershipChange::SetRankPolicy { policy } => Some(Membership {
                rank: *policy,
                ..same()
            }),
            MembershipChange::SetPriority { id, priority } if m.is_member(*id) => {
                Some(same().with_priority(*id, *priority))
            }
            _ => None,
        }
    }

    /// Starts a rank change: one membership step, like an observer change
    /// (no voter set changes, so no joint phase and no quorum moves).
    /// Refused when no voter could lead under the new ranks (rule
    /// `one_change_at_a_time`).
    fn start_rank_change(
        &mut self,
        now: Instant,
        request: MembershipChange,
        next: Membership,
        out: &mut Vec<Action<P>>,
    ) {
        let may_lead: Vec<NodeId> = next
            .voters
            .iter()
            .copied()
            .filter(|&v| next.rank_allows_leading(v))
            .collect();
        if !self.some_voter_may_lead(&next, &may_lead) {
            slog::info!(self.log, "membership change refused"; "rule" => Rule::OneChangeAtATime,
                "term" => self.term, "change" => ?request,
                "reason" => "no voter may lead under the new ranks");
            let reason = MembershipFailure::NoLeaderLeft;
            self.emit(Event::MembershipChangeFailed { reason }, out);
            return;
        }
        let step = Step::Observers {
            then_catch_up: None,
        };
        let (voters, observers) = (next.voters.clone(), next.observers.clone());
        self.begin_change(now, request, voters, observers, step);
        self.propose(next, out);
    }

    /// Rule `one_change_at_a_time`: records the change now running, with
    /// what a first step not stored in time is undone to.
    fn begin_change(
        &mut self,
        now: Instant,
        request: MembershipChange,
        voters: Vec<NodeId>,
        observers: Vec<NodeId>,
        step: Step,
    ) {
        slog::info!(self.log, "membership change started"; "rule" => Rule::OneChangeAtATime,
            "term" => self.term, "change" => ?request, "epoch" => self.members.current.epoch);
        let change = Some(Change {
            request,
            voters,
            observers,
            step,
            awaiting: None,
            deadline: now + self.cfg.timing.change,
            observers_before: self.members.current.observers.clone(),
            rank_before: self.rank_before(),
        });
        self.set_change(change);
    }

    /// The voters and observers `request` ends with, its first step, and
    /// the address of a node it adds; `None` if it makes no sense here.
    #[allow(clippy::type_complexity)]
    fn plan(
        &self,
        request: &MembershipChange,
    ) -> Option<(
        Vec<NodeId>,
        Vec<NodeId>,
        Step,
        Option<(NodeId, alloc::string::String)>,
    )> {
        let m = &self.members.current;
        let without = |list: &[NodeId], id: NodeId| -> Vec<NodeId> {
            list.iter().copied().filter(|&x| x != id).collect()
        };
        let with = |list: &[NodeId], id: NodeId| -> Vec<NodeId> {
            crate::membership::sorted(list.iter().copied().chain([id]))
        };
        let new_member = |id: NodeId| id != 0 && !m.is_member(id);
        match request {
            MembershipChange::AddVoter { id, address } if new_member(*id) => Some((
                with(&m.voters, *id),
                m.observers.clone(),
                Step::Observers {
                    then_catch_up: Some(*id),
                },
                Some((*id, address.clone())),
            )),
            MembershipChange::AddObserver { id, address } if new_member(*id) => Some((
                m.voters.clone(),
                with(&m.observers, *id),
                Step::Observers {
                    then_catch_up: None,
                },
                Some((*id, address.clone())),
            )),
            MembershipChange::Promote { id } if m.observers.contains(id) => Some((
                with(&m.voters, *id),
                without(&m.observers, *id),
                Step::CatchUp { id: *id },
                None,
            )),
            // Adding (or replacing by) a node that is an observer already,
            // e.g. left one by a change that failed at catch-up, promotes
            // it; its observer step is written again with the address
            // given, which may correct the one recorded before.
            MembershipChange::AddVoter { id, address } if m.observers.contains(id) => Some((
                with(&m.voters, *id),
                without(&m.observers, *id),
                Step::Observers {
                    then_catch_up: Some(*id),
                },
                Some((*id, address.clone())),
            )),
            MembershipChange::Replace { old, new, address }
                if m.voters.contains(old) && m.observers.contains(new) =>
            {
                Some((
                    with(&without(&m.voters, *old), *new),
                    without(&m.observers, *new),
                    Step::Observers {
                        then_catch_up: Some(*new),
                    },
                    Some((*new, address.clone())),
                ))
            }
            MembershipChange::Remove { id } if m.observers.contains(id) => Some((
                m.voters.clone(),
                without(&m.observers, *id),
                Step::Observers {
                    then_catch_up: None,
                },
                None,
            )),
            MembershipChange::Remove { id } if m.voters.contains(id) && m.voters.len() > 1 => {
                Some((
                    without(&m.voters, *id),
                    m.observers.clone(),
                    Step::Joint,
                    None,
                ))
            }
            MembershipChange::Replace { old, new, address }
                if m.voters.contains(old) && new_member(*new) =>
            {
                Some((
                    with(&without(&m.voters, *old), *new),
                    m.observers.clone(),
                    Step::Observers {
                        then_catch_up: Some(*new),
                    },
                    Some((*new, address.clone())),
                ))
            }
            _ => None,
        }
    }

    /// Proposes `next` (this leader's, epoch + 1): written, then used.
    fn propose(&mut self, next: Membership, out: &mut Vec<Action<P>>) {
        let id = next.id();
        if let Some(change) = self.change_mut() {
            change.awaiting = Some(id);
        }
        self.stage_membership(next, out);
    }

    /// Rule `joint_quorums`: the joint membership of the running change:
    /// its voters vote beside the current ones, and every quorum needs a
    /// majority of both.
    fn propose_joint(&mut self, out: &mut Vec<Action<P>>) {
        let Some(change) = self.change_mut() else {
            return;
        };
        change.step = Step::Joint;
        let (voters, observers) = (change.voters.clone(), change.observers.clone());
        let current = &self.members.current;
        // A new voter leaves the observers as it starts voting.
        let observers = observers
            .into_iter()
            .filter(|o| voters.binary_search(o).is_err())
            .collect();
        let next = current.successor(self.term, voters, current.voters.clone(), observers);
        slog::info!(self.log, "enter the joint membership"; "rule" => Rule::JointQuorums,
            "term" => self.term, "epoch" => next.epoch, "outgoing" => ?next.outgoing,
            "voters" => ?next.voters);
        self.propose(next, out);
    }

    /// Drives the running change (a new voter votes only once caught up:
    /// rule `new_voter_catches_up`; a change whose new voters turn out
    /// unable to lead fails: rule `one_change_at_a_time`), and leaves a
    /// joint membership (this leader's or inherited) once it is stored
    /// (rule `joint_left_when_stored`). Runs after every acknowledgement,
    /// every heartbeat round and every membership this leader starts
    /// using.
    pub(super) fn advance_change(&mut self, now: Instant, out: &mut Vec<Action<P>>) {
        if !self.phase.is_leader() || self.newest_membership_id() != self.members.id {
            // Not leading, or a proposal of ours is still being written.
            self.check_change_deadline(now, out);
            return;
        }
        if self.inherited_membership() {
            self.rewrite_inherited_membership(out);
            return;
        }
        if self.members.current.is_joint() {
            if self.stored(self.members.id) {
                let current = &self.members.current;
                let next = current.successor(
                    self.term,
                    current.voters.clone(),
                    Vec::new(),
                    current.observers.clone(),
                );
                slog::info!(self.log, "joint membership stored by both majorities: leave it";
                    "rule" => Rule::JointLeftWhenStored, "term" => self.term,
                    "epoch" => next.epoch, "voters" => ?next.voters);
                if let Some(change) = self.change_mut() {
                    change.step = Step::Final;
                }
                self.propose(next, out);
            } else {
                self.check_change_deadline(now, out);
            }
            return;
        }
        let Some(change) = self.change() else {
            // An inherited change removed this leader (rule
            // `removed_leader_hands_over`): it hands over once the
            // membership is stored, or a change timeout into its
            // leadership at the latest.
            let overdue = self
                .phase
                .leadership()
                .is_some_and(|l| now >= l.since() + self.cfg.timing.change);
            if !self.tracker.is_voter() && (overdue || self.stored(self.members.id)) {
                self.hand_over_if_removed(out);
            }
            return;
        };
        let waiting = change.awaiting.is_some_and(|a| !self.stored(a));
        match change.step {
            _ if waiting => self.check_change_deadline(now, out),
            Step::Observers {
                then_catch_up: Some(id),
            } => {
                if let Some(change) = self.change_mut() {
                    change.step = Step::CatchUp { id };
                }
                self.advance_change(now, out);
            }
            Step::CatchUp { id } => {
                let voters = change.voters.clone();
                if self.caught_up(now, id)
                    && !self.some_voter_may_lead(&self.members.current, &voters)
                {
                    // Heard now: the new voter's mode does not allow leading
                    // either (rule `one_change_at_a_time`); it stays an
                    // observer.
                    slog::info!(self.log, "membership change failed"; "rule" => Rule::OneChangeAtATime,
                        "term" => self.term, "reason" => "no voter of the new set may lead");
                    self.set_change(None);
                    let reason = MembershipFailure::NoLeaderLeft;
                    self.emit(Event::MembershipChangeFailed { reason }, out);
                } else if self.caught_up(now, id) && self.live_majority(now, &voters) {
                    slog::info!(self.log, "new voter caught up"; "rule" => Rule::NewVoterCatchesUp,
                        "term" => self.term, "to" => id);
                    self.propose_joint(out);
                } else {
                    self.check_change_deadline(now, out);
                }
            }
            Step::Observers {
                then_catch_up: None,
            }
            | Step::Final => self.complete_change(out),
            Step::Joint => {}
        }
    }

    /// Whether this leader acts on a membership a leader of an earlier term
    /// made (the bootstrap membership, known to all, excepted, unless a
    /// peer shows a newer one): it must be written again in this term
    /// before anything is built on it.
    ///
    /// A peer can hold a newer membership than this leader's: one a
    /// deposed leader made and never stored, adopted from a late message
    /// after this leader was elected (rule `membership_adopt_newer`).
    /// Nobody would ever replace it (it orders above this leader's), and
    /// the two would disagree for good (about ranks, say). Written again
    /// in this term, this leader's membership orders above it, and the
    /// peer adopts it: Raft's leader overwriting a follower's uncommitted
    /// entries. Such a membership was never stored (else this leader, of a
    /// later term, would hold it or a newer one), so nothing is lost; and
    /// a stamp counts only while it is of an earlier term than this
    /// leader's, so at most one write per leadership follows.
    pub(super) fn inherited_membership(&self) -> bool {
        self.members.current.term < self.term
            && (self.members.current.epoch > 0
                || self
                    .phase
                    .leadership()
                    .is_some_and(|l| l.newer_stamp_seen()))
    }

    /// Rules `joint_left_when_stored` and
    /// `change_after_own_membership_stored`: a membership made by the
    /// leader of an earlier term is first written again, unchanged, in this
    /// leader's term; a joint one is left, and a change started, only once
    /// that copy is stored. Counting copies of an earlier term's membership
    /// proves nothing (Raft §5.4.2, Figure 8): a sibling made in a later
    /// term than it, holding other voters, could still win a vote from the
    /// nodes that count as storing it, and both sides would lead. A copy in
    /// this term outranks every membership a past leader made, and a peer
    /// acknowledging this term holds no membership of a later term, so
    /// every newer stamp it shows descends from the copy. Raft's new leader
    /// commits an entry of its own term the same way.
    fn rewrite_inherited_membership(&mut self, out: &mut Vec<Action<P>>) {
        let current = &self.members.current;
        let next = current.successor(
            self.term,
            current.voters.clone(),
            current.outgoing.clone(),
            current.observers.clone(),
        );
        slog::info!(self.log, "membership of an earlier term: write it in this term first";
            "rule" => Rule::JointLeftWhenStored, "term" => self.term,
            "epoch" => next.epoch, "membership_term" => current.term);
        self.stage_membership(next, out);
    }

    /// Rule `one_change_at_a_time`: the change reached its final membership
    /// and a quorum stored it; the next may start. Rule
    /// `removed_leader_hands_over`: a leader that is no longer a voter
    /// hands leadership to the best-placed voter of the new set.
    fn complete_change(&mut self, out: &mut Vec<Action<P>>) {
        let Some(change) = self.take_change() else {
            return;
        };
        let epoch = self.members.current.epoch;
        slog::info!(self.log, "membership change complete"; "rule" => Rule::OneChangeAtATime,
            "term" => self.term, "change" => ?change.request, "epoch" => epoch);
        self.emit(Event::MembershipChangeCompleted { epoch }, out);
        self.hand_over_if_removed(out);
    }

    /// Rule `removed_leader_hands_over`: once the final membership without
    /// this leader is stored, it sends `TimeoutNow` to the best-placed new
    /// voter (the newest acknowledged log position, then the lowest id)
    /// and steps down at once: it gave up its lease by stepping down, so
    /// the target's voters may skip stickiness, and as a non-member it
    /// would never hear the new leader. If `TimeoutNow` is lost, the new
    /// voters elect a leader after a death timeout.
    pub(super) fn hand_over_if_removed(&mut self, out: &mut Vec<Action<P>>) {
        if !self.phase.is_leader() || self.tracker.is_voter() {
            return;
        }
        let target = self
            .tracker
            .peers()
            .iter()
            .filter(|p| p.is_voter() && p.can_lead() != Some(false))
            .map(|p| (p.position(), p.id()))
            .reduce(|best, next| {
                let newer = match (next.0, best.0) {
                    (Some(n), Some(b)) => !b.is_at_least(n),
                    (Some(_), None) => true,
                    _ => false,
                };
                if newer { next } else { best }
            })
            .map(|(_, id)| id);
        slog::info!(self.log, "this leader is no longer a voter: hand over and step down";
            "rule" => Rule::RemovedLeaderHandsOver, "term" => self.term, "to" => ?target);
        self.step_down(StepDownReason::Transferred, out);
        if let Some(to) = target {
            self.send_with_vote(to, MessageKind::TimeoutNow, out);
        }
    }

    /// Rule `membership_change_bounded`: a change that has not completed by
    /// its deadline fails. A joint membership goes back to the old voters
    /// (leaving a joint membership for either of its sides is safe: both
    /// need a majority of the set kept); a new voter that did not catch up
    /// stays an observer; a final membership that a majority of its voters
    /// has not stored stays in use, since it is decided, and is stored
    /// whenever its voters answer (a leader the change removed hands over
    /// at once). A step whose write had not finished may still take effect
    /// afterwards: the outcome reports that the change did not complete in
    /// time, not that nothing changed.
    fn check_change_deadline(&mut self, now: Instant, out: &mut Vec<Action<P>>) {
        let Some(change) = self.change() else {
            return;
        };
        if now < change.deadline {
            return;
        }
        let unstamped = self
            .tracker
            .peers()
            .iter()
            .find(|p| p.membership() == Some(MembershipId::default()))
            .map(|p| p.id());
        let reason = match (change.step, unstamped) {
            (Step::CatchUp { .. }, _) => MembershipFailure::NotCaughtUp,
            (_, Some(peer)) => MembershipFailure::Unstamped { peer },
            (_, None) => MembershipFailure::NoQuorum,
        };
        let step = change.step;
        let request = change.request.clone();
        let observers_before = change.observers_before.clone();
        let rank_before = change.rank_before.clone();
        self.set_change(None);
        slog::warn!(self.log, "membership change timed out"; "rule" => Rule::MembershipChangeBounded,
            "term" => self.term, "change" => ?request, "reason" => ?reason);
        self.emit(Event::MembershipChangeFailed { reason }, out);
        if step == Step::Joint && self.phase.is_leader() {
            self.roll_back_joint(out);
        }
        if matches!(step, Step::Observers { .. }) && self.phase.is_leader() {
            self.roll_back_observers(observers_before, rank_before, out);
        }
        // A leader outside its own voters whose final membership was not
        // stored in time hands over anyway (rule
        // `removed_leader_hands_over`): it must not lead on a membership
        // that does not list it.
        self.hand_over_if_removed(out);
    }

    /// Rule `membership_change_bounded`: leaves the joint membership
    /// (durable or being written) for its old voters; the new ones that were not voters before become observers.
    fn roll_back_joint(&mut self, out: &mut Vec<Action<P>>) {
        let newest = self.newest_membership();
        if !newest.is_joint() {
            return;
        }
        let added = newest
            .voters
            .iter()
            .copied()
            .filter(|v| newest.outgoing.binary_search(v).is_err());
        let observers = crate::membership::sorted(newest.observers.iter().copied().chain(added));
        let next = newest.successor(self.term, newest.outgoing.clone(), Vec::new(), observers);
        slog::warn!(self.log, "joint membership not stored in time: back to the old voters";
            "rule" => Rule::MembershipChangeBounded, "term" => self.term,
            "epoch" => next.epoch, "voters" => ?next.voters);
        self.stage_membership(next, out);
    }

    /// Rule `membership_change_bounded`: a first step (observers only) not
    /// stored in time is undone: the observers go back to what they were,
    /// so a change reported failed does not take effect once a slow write
    /// finishes. The voters are the same on both sides, so this is as safe
    /// as any observer change. A rank change is undone the same way.
    fn roll_back_observers(
        &mut self,
        observers: Vec<NodeId>,
        (rank, priorities): (RankPolicy, Vec<(NodeId, u32)>),
        out: &mut Vec<Action<P>>,
    ) {
        let newest = self.newest_membership();
        if newest.observers == observers && (newest.rank, &newest.priorities) == (rank, &priorities)
        {
            return;
        }
        let mut next = newest.successor(
            self.term,
            newest.voters.clone(),
            newest.outgoing.clone(),
            observers,
        );
        next.rank = rank;
        next.priorities = priorities
            .into_iter()
            .filter(|(id, _)| next.is_member(*id))
            .collect();
        slog::warn!(self.log, "observer step not stored in time: undo it";
            "rule" => Rule::MembershipChangeBounded, "term" => self.term,
            "epoch" => next.epoch, "observers" => ?next.observers);
        self.stage_membership(next, out);
    }

    /// The newest membership known here: waiting, in flight, or durable.
    fn newest_membership(&self) -> Membership {
        self.members.newest().clone()
    }

    /// Rule `one_change_at_a_time`: a running change fails because this
    /// node stopped leading. A joint
    /// membership it wrote is finished by the next leader.
    pub(super) fn fail_change_on_step_down(
        &mut self,
        change: Option<Change>,
        out: &mut Vec<Action<P>>,
    ) {
        if let Some(change) = change {
            let reason = MembershipFailure::SteppedDown;
            slog::info!(self.log, "membership change failed"; "rule" => Rule::OneChangeAtATime,
                "term" => self.term, "change" => ?change.request, "reason" => ?reason);
            self.emit(Event::MembershipChangeFailed { reason }, out);
        }
    }
}
