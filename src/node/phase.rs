//! What the node is doing: following, pre-voting, awaiting its self-vote,
//! campaigning or leading. A round's and a leadership's state live in that
//! phase's variant, so they exist exactly while they are true: a follower
//! has no heartbeat round, a leader no election round. What outlives a
//! phase stays on the node: the newest round seen from the current leader
//! (kept across a pre-vote that fails), the vote tally buffer, and what a
//! leader learned of its peers (their promises, round trips, whether they
//! can lead), which the next leadership reuses.

use alloc::vec::Vec;
use core::time::Duration;

use crate::status::Role;
use crate::time::Instant;

/// The node's phase. [`Role`] is its public projection.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum Phase<P> {
    /// Follows the leader of its term, or waits for one.
    Follower,
    /// Asks for pre-votes (rule `pre_vote`); changes no term.
    PreVoting(PreVoteRound),
    /// Won the pre-vote (or skipped it, or was handed leadership): term + 1
    /// and the self-vote are decided and wait to become durable (rule
    /// `self_vote_durable_before_candidacy`).
    AwaitingSelfVote {
        /// Started by `TimeoutNow`: voters may skip stickiness.
        transfer: bool,
    },
    /// Asks for votes in the current term; its self-vote is durable.
    Candidate(VoteRound),
    /// Leads the current term.
    Leader(Leadership<P>),
}

impl<P> Phase<P> {
    /// The public role of this phase.
    pub(super) fn role(&self) -> Role {
        match self {
            Phase::Follower => Role::Follower,
            Phase::PreVoting(_) | Phase::AwaitingSelfVote { .. } => Role::PreCandidate,
            Phase::Candidate(_) => Role::Candidate,
            Phase::Leader(_) => Role::Leader,
        }
    }

    pub(super) fn is_leader(&self) -> bool {
        matches!(self, Phase::Leader(_))
    }

    pub(super) fn is_follower(&self) -> bool {
        matches!(self, Phase::Follower)
    }

    pub(super) fn leadership(&self) -> Option<&Leadership<P>> {
        match self {
            Phase::Leader(l) => Some(l),
            _ => None,
        }
    }

    pub(super) fn leadership_mut(&mut self) -> Option<&mut Leadership<P>> {
        match self {
            Phase::Leader(l) => Some(l),
            _ => None,
        }
    }

    /// When the running pre-vote or vote round gives up, if one runs.
    pub(super) fn round_deadline(&self) -> Option<Instant> {
        match self {
            Phase::PreVoting(r) => Some(r.deadline),
            Phase::Candidate(r) => Some(r.deadline),
            _ => None,
        }
    }
}

/// A pre-vote round.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) struct PreVoteRound {
    /// The term proposed: the current term + 1.
    pub(super) proposed: u64,
    /// When the round gives up.
    pub(super) deadline: Instant,
}

/// A vote round in the current term.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) struct VoteRound {
    /// When the round gives up.
    pub(super) deadline: Instant,
    /// The split-vote shortcut is taken at most once per round.
    pub(super) split_handled: bool,
    /// Started by `TimeoutNow`: voters skip stickiness.
    pub(super) transfer: bool,
}

/// What the leader knows of one peer's acknowledgements in this leadership.
/// Index-aligned with [`Node::peers`](super::Node).
#[derive(Clone, Debug, PartialEq)]
pub(super) struct PeerAcks<P> {
    /// When an acknowledgement of a round sent within the last death
    /// timeout last arrived (soft fencing). Older rounds do not count:
    /// acknowledgements delayed in the network must not keep a deaf leader
    /// in office.
    pub(super) heard_at: Option<Instant>,
    /// Log position from the last acknowledgement.
    pub(super) position: Option<P>,
    /// Strict fencing: the latest instant (leader's clock) until which this
    /// peer's acknowledged promises keep it from helping elect anyone, less
    /// drift and margin: send time of the round + its promise / ρ − margin.
    pub(super) promised_until: Option<Instant>,
    /// The same, from rounds that may back a reported lease (sent at or
    /// after `lease_floor`, in a term whose `TimeoutNow` has not gone out).
    pub(super) lease_until: Option<Instant>,
    /// The newest membership its messages of this leadership showed.
    pub(super) membership: Option<crate::membership::MembershipId>,
}

impl<P> PeerAcks<P> {
    pub(super) const NONE: PeerAcks<P> = PeerAcks {
        heard_at: None,
        position: None,
        promised_until: None,
        lease_until: None,
        membership: None,
    };
}

/// Everything a leader keeps, built in one place
/// ([`Leadership::new`]) when it wins and dropped when it steps down.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Leadership<P> {
    /// When this leadership began.
    pub(super) since: Instant,
    /// When the next heartbeat round goes out.
    pub(super) next_heartbeat: Instant,
    /// The newest round sent; rounds are numbered from 1 in each
    /// leadership (0 names no round; rule `acks_name_their_round`).
    pub(super) seq: u64,
    /// Per peer, index-aligned with the node's peers.
    pub(super) acks: Vec<PeerAcks<P>>,
    /// Send times of recent heartbeat rounds, indexed by `seq % len`.
    pub(super) rounds: Vec<(u64, Instant)>,
    /// Soft fencing: the newest instant by which a quorum was heard; `None`
    /// when this node alone is a quorum (it never loses it).
    pub(super) soft_anchor: Option<Instant>,
    /// Strict fencing: until when a quorum's acknowledged promises cover
    /// this leadership (from its start on); the step-down deadline.
    pub(super) strict_until: Instant,
    /// The same, restricted to rounds that may back a reported lease.
    pub(super) lease_until: Option<Instant>,
    /// Rounds sent before this do not back a reported lease.
    pub(super) lease_floor: Instant,
    /// `TimeoutNow` was sent this term: no lease until the term ends.
    pub(super) lease_forfeited: bool,
    /// A peer's message showed a membership newer than this leader's, made
    /// in an earlier term (see `Node::inherited_membership`). Kept here,
    /// set as stamps arrive, so the check on every acknowledgement reads
    /// one flag instead of every peer's stamp.
    pub(super) newer_stamp_seen: bool,
}

impl<P> Leadership<P> {
    /// A leadership won at `now`: no round sent, no acknowledgement heard,
    /// no lease; the strict step-down deadline is one lease away (the
    /// promises of the votes that elected it).
    pub(super) fn new(now: Instant, lease: Duration, peers: usize, round_slots: usize) -> Self {
        let mut acks = Vec::with_capacity(peers);
        acks.resize_with(peers, || PeerAcks::NONE);
        Leadership {
            since: now,
            next_heartbeat: now,
            seq: 0,
            acks,
            rounds: alloc::vec![(0, Instant::ZERO); round_slots],
            soft_anchor: Some(now),
            strict_until: now + lease,
            lease_until: None,
            lease_floor: now,
            lease_forfeited: false,
            newer_stamp_seen: false,
        }
    }

    /// Records the send time of the next round and returns its number.
    pub(super) fn start_round(&mut self, now: Instant) -> u64 {
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

    /// Gives up the reported lease and every acknowledgement that backed
    /// it; only rounds acknowledged from now on can bring it back.
    pub(super) fn drop_lease(&mut self) {
        self.lease_until = None;
        for acks in &mut self.acks {
            acks.lease_until = None;
        }
    }
}
