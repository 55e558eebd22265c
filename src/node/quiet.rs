//! What a [`Host`](crate::host::Host) tells a group it keeps quiet: the
//! host's own rounds stand in for the group's heartbeat rounds, so an idle
//! group exchanges no message of its own. The lease argument for this is
//! in the host's `quiet` module; here are the two facts a group takes from
//! its host, and the questions the host asks of it.

use alloc::vec::Vec;
use core::time::Duration;

use super::{Action, Node, Phase};
use crate::NodeId;
use crate::config::Fencing;
use crate::fence::Lease;
use crate::position::LogPosition;
use crate::rule::Rule;
use crate::time::Instant;

/// A fact a host learned for its quiet groups, fed into one group with
/// [`Node::host_note`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum HostNote {
    /// Leader side: peer `from`, which agreed to take this host's rounds
    /// as this leadership's, acknowledged the host round sent at `sent`;
    /// the acknowledgement arrived at `heard`. `round` is when the host's
    /// newest round left (this leader's own contact, as if it had sent it).
    Acked {
        from: NodeId,
        sent: Instant,
        heard: Instant,
        round: Instant,
    },
    /// Follower side: a round of the host of this node's leader, which
    /// this node agreed to take as its leader's, arrived at `at`. `first`
    /// (named by the leader host) campaigns first should that leader die
    /// (rule `quiet_failover_spread`).
    LeaderHeard { at: Instant, first: NodeId },
}

impl<P: LogPosition> Node<P> {
    /// Feeds a host's fact as one step (same order of output as
    /// [`Node::step_into`]).
    pub(crate) fn host_note(&mut self, now: Instant, note: HostNote, out: &mut Vec<Action<P>>) {
        let now = self.observe_time(now);
        match note {
            HostNote::Acked {
                from,
                sent,
                heard,
                round,
            } => self.host_acked(now, from, sent, heard, round),
            HostNote::LeaderHeard { at, first } => self.host_heard_leader(at, first),
        }
        self.finish_step(now, out);
    }

    /// Rule `quiet_rounds_back_promises`: a peer that agreed to take the
    /// host's rounds as this leadership's rounds keeps, for each host round
    /// it acknowledges, the promise it stated in its last acknowledgement
    /// of this leadership (it refreshes its stickiness to this leader at
    /// the round's arrival), so the acknowledgement counts as one of a
    /// round of this leadership sent at `sent`. Nothing it says of its log
    /// position or mode is new: those keep their last values.
    fn host_acked(
        &mut self,
        now: Instant,
        from: NodeId,
        sent: Instant,
        heard: Instant,
        round: Instant,
    ) {
        let Phase::Leader(l) = &self.phase else {
            return;
        };
        // Rounds from before this leadership started back nothing of it.
        if sent < l.since() || sent > now || heard > now || round > now {
            return;
        }
        if self.gates.leader_contact().is_none_or(|c| c < round) {
            self.gates.leading(round);
        }
        let Some(index) = self.tracker.index_of(from) else {
            return;
        };
        let peer = &self.tracker.peers()[index];
        let (Some(promise), Some(position), Some(can_lead)) =
            (peer.promise(), peer.position().cloned(), peer.can_lead())
        else {
            // It never acknowledged a round of this leadership itself: the
            // promise it keeps is unknown.
            return;
        };
        slog::trace!(self.log, "a host round backs this leadership";
            "rule" => Rule::QuietRoundsBackPromises, "term" => self.term, "from" => from,
            "sent" => %sent);
        if self.record_ack_at((heard, 0), index, Some(sent), promise, can_lead, position) {
            self.raise_anchors();
        }
    }

    /// Rule `quiet_rounds_back_promises`, follower side: the round arrived
    /// at `at` refreshes contact with the leader this node follows (a
    /// promise starts again from `at`, as at a heartbeat of its own).
    fn host_heard_leader(&mut self, at: Instant, first: NodeId) {
        let Some(leader) = self.leader.filter(|_| self.phase.is_follower()) else {
            return;
        };
        if self.gates.leader_contact().is_some_and(|c| c >= at) || at > self.now {
            return;
        }
        let newest = self.gates.newest_round();
        let delay = self.rank.delay() + self.failover_wait(leader, first);
        self.gates.heard_leader(at, newest, delay);
    }

    /// Rule `quiet_failover_spread`: how much longer than its death
    /// timeout (and jitter) this voter waits to campaign should `leader`
    /// die. Every group a host keeps quiet hears that host's rounds at one
    /// instant, so without an order the member host that heard the last
    /// round first would win most of the races after the host dies (and
    /// the one that heard it last would refuse the first pre-votes while
    /// its promise runs). So the voters that would campaign take places in
    /// their membership order, starting at `first` (which the leader host
    /// names so that each member host comes first for an equal share of
    /// its groups): each place waits one rank step (more than the
    /// campaign jitter) longer, and every place a quarter interval more,
    /// by which the other voters' promises have ended when the first
    /// asks. It only delays campaigns: no promise or vote changes.
    fn failover_wait(&self, leader: NodeId, first: NodeId) -> Duration {
        let voters = &self.members.current().voters;
        let others = voters.iter().filter(|&&v| v != leader);
        let count = others.clone().count() as u64;
        let Some(index) = others.clone().position(|&v| v == self.id) else {
            return Duration::ZERO;
        };
        if count < 2 {
            return Duration::ZERO;
        }
        let first = others.clone().position(|&v| v == first).unwrap_or(0) as u64;
        let place = (index as u64 + count - first) % count;
        slog::trace!(self.log, "waits its place to campaign should the leader die";
            "rule" => Rule::QuietFailoverSpread, "term" => self.term, "leader" => leader,
            "place" => place);
        self.cfg.timing.heartbeat / 4 + self.cfg.timing.rank_step * place as u32
    }

    /// The other voters of its durable membership.
    pub(crate) fn voter_peers(&self) -> impl Iterator<Item = NodeId> + '_ {
        let id = self.id;
        self.members
            .current()
            .voters
            .iter()
            .copied()
            .filter(move |&v| v != id)
    }

    /// The other members of its durable membership (voters, then
    /// observers).
    pub(crate) fn peer_ids(&self) -> impl Iterator<Item = NodeId> + '_ {
        self.tracker.peers().iter().map(|p| p.id())
    }

    /// The latest instant it was given.
    pub(crate) fn last_now(&self) -> Instant {
        self.now
    }

    /// The leader this node follows and its term, if it follows one.
    pub(crate) fn following(&self) -> Option<(NodeId, u64)> {
        if !self.phase.is_follower() {
            return None;
        }
        self.leader
            .filter(|&l| l != self.id)
            .map(|leader| (leader, self.term))
    }

    /// Whether this leader may let its host's rounds stand in for its own
    /// (rule `quiet_rounds_back_promises`): it leads with nothing under
    /// way (no transfer, no membership change, a plain durable
    /// membership, no rank policy to publish standings for), holds its
    /// lease under strict fencing, is not alone a quorum (its own rounds
    /// are its lease), and every voter's known promise backs a lease
    /// longer than `stale_after` (how late a host acknowledgement may be
    /// before the group wakes): so while every peer acknowledges host
    /// rounds in time, the lease never lapses between them.
    pub(crate) fn may_go_quiet(&self, now: Instant, stale_after: Duration) -> bool {
        let Phase::Leader(l) = &self.phase else {
            return false;
        };
        if l.change().is_some()
            || self.handover.transfer().is_some()
            || self.members.current().is_joint()
            || self.members.current().rank.is_ranked()
            || self.inherited_membership()
            || !self.tracker.is_voter()
            || self.tracker.alone_is_quorum()
            // `TimeoutNow` went out this term: its candidate may still
            // campaign, and a member that grants it leaves quiet without
            // a new epoch (the host trusts the transfer ended this quiet
            // leadership), so the leadership stays active to its end.
            || l.fence().forfeited()
        {
            return false;
        }
        if self.cfg.fencing == Fencing::Strict && self.lease(now).is_none() {
            return false;
        }
        self.tracker.peers().iter().all(|p| {
            p.promise().is_some_and(|promise| {
                self.cfg.fencing != Fencing::Strict || self.lease_for_promise(promise) > stale_after
            }) && p.position().is_some()
                && p.can_lead().is_some()
        })
    }

    /// How long this quiet leadership may go without a member's host
    /// acknowledgement before its host wakes it (rule
    /// `quiet_rounds_back_promises`): the shortest lease a member's
    /// promise backs, less `keep` (a round: the woken group still holds
    /// that member's part of its lease while it runs a round of its own),
    /// and never less than `floor` (which [`Node::may_go_quiet`] made
    /// shorter than every such lease). A late or lost host round then
    /// wakes nothing while the promises already acknowledged reach past
    /// it.
    pub(crate) fn quiet_wake_after(&self, keep: Duration, floor: Duration) -> Duration {
        self.tracker
            .peers()
            .iter()
            .filter_map(|p| p.promise())
            .map(|promise| self.lease_for_promise(promise).saturating_sub(keep))
            .min()
            .map_or(floor, |d| d.max(floor))
    }

    /// The lease this leader holds at `now` if each peer's latest host
    /// acknowledgement (`sent_of`: the send time of the host round it
    /// acknowledged) counted as a round of this leadership: what
    /// [`Node::host_note`] would make of them, without changing anything.
    pub(crate) fn quiet_lease(
        &self,
        now: Instant,
        sent_of: impl Fn(NodeId) -> Option<Instant>,
    ) -> Option<Lease> {
        let own = self.lease(now);
        let Phase::Leader(l) = &self.phase else {
            return None;
        };
        if self.cfg.fencing != Fencing::Strict
            || self.handover.transfer().is_some()
            || l.fence().forfeited()
        {
            return None;
        }
        let fence = l.fence();
        let backed = self.tracker.quorum_value_of(|p| {
            let sent = sent_of(p.id()).filter(|&s| fence.backs_lease(Some(s)))?;
            let until = sent + self.lease_for_promise(p.promise()?);
            Some(until).filter(|&u| u < Instant::MAX)
        });
        let valid_until = match (own.map(|l| l.valid_until), backed) {
            (Some(a), Some(b)) => a.max(b),
            (a, b) => a.or(b)?,
        };
        let token = self.token()?;
        (now < valid_until).then_some(Lease { token, valid_until })
    }
}
