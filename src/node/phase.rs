//! What the node is doing: following, pre-voting, awaiting its self-vote,
//! campaigning or leading. A round's and a leadership's state live in that
//! phase's variant, so they exist exactly while they are true: a follower
//! has no heartbeat round, a leader no election round. What outlives a
//! phase stays on the node: the newest round seen from the current leader
//! (kept across a pre-vote that fails, in the gates), the vote tally
//! buffer, and what a leader learned of its peers (their promises, round
//! trips, whether they can lead), which the next leadership reuses (both
//! in the peer tracker).

use alloc::boxed::Box;

use super::election::{PreVoteRound, VoteRound};
#[cfg(feature = "sim")]
use super::fingerprint::{Fnv, Relative};
use super::leadership::Leadership;
use crate::status::Role;
use crate::time::Instant;

/// The node's phase. [`Role`] is its public projection.
#[derive(Clone, Debug, PartialEq)]
// One per node, never in a collection: boxing the leader's state would
// only add an allocation per leadership and an indirection on its hot path.
#[allow(clippy::large_enum_variant)]
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
    // Boxed: most nodes of a many-group host follow, and a follower's
    // phase need not be as large as a leader's.
    Leader(Box<Leadership<P>>),
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
            Phase::PreVoting(r) => Some(r.deadline()),
            Phase::Candidate(r) => Some(r.deadline()),
            _ => None,
        }
    }

    /// The state as the model checker sees it (see `fingerprint.rs`).
    #[cfg(feature = "sim")]
    pub(super) fn fingerprint(&self, rel: &Relative, timing: &super::Timing, h: &mut Fnv)
    where
        P: core::hash::Hash,
    {
        use core::hash::Hash;
        core::mem::discriminant(self).hash(h);
        match self {
            Phase::Follower => {}
            Phase::PreVoting(round) => round.fingerprint(rel, h),
            Phase::AwaitingSelfVote { transfer } => transfer.hash(h),
            Phase::Candidate(round) => round.fingerprint(rel, h),
            Phase::Leader(leadership) => leadership.fingerprint(rel, timing, h),
        }
    }
}
