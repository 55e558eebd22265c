//! What a node reports: its [`Status`] snapshot and the [`Event`]s it emits.

use alloc::vec::Vec;
use core::time::Duration;

use crate::NodeId;
use crate::config::{Fencing, Mode};
use crate::fence::FencingToken;
use crate::hard_state::HardState;
use crate::membership::{Membership, MembershipFailure, MembershipId};
use crate::rule::Rule;
use crate::time::Instant;

/// A node's role in its current term.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
#[non_exhaustive]
pub enum Role {
    /// Follows the leader of its term (or waits for one).
    Follower,
    /// Runs a pre-vote round, or waits for its term bump and self-vote to
    /// become durable before it may campaign.
    PreCandidate,
    /// Asks for votes; its term and self-vote are durable.
    Candidate,
    /// Won its term.
    Leader,
}

/// Why a leader stopped leading.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
#[non_exhaustive]
pub enum StepDownReason {
    /// A message showed a newer term.
    HigherTerm,
    /// [`Input::Demote`](crate::Input::Demote).
    Demoted,
    /// Soft fencing: no quorum heard within the death timeout.
    QuorumLost,
    /// Strict fencing: the lease ran out.
    LeaseExpired,
    /// Leadership was handed to another node.
    Transferred,
}

/// Why a promotion did not make this node leader.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
#[non_exhaustive]
pub enum PromoteFailure {
    /// The mode (`Off`, `Voter`) or observer status forbids campaigning.
    NotAllowed,
    /// Not enough voters granted within one election timeout.
    NoQuorum,
    /// Another node won the term, or a live leader kept the voters loyal.
    OtherLeader {
        /// The leader, when known.
        leader: Option<NodeId>,
    },
    /// A newer term appeared while campaigning.
    OutdatedTerm {
        /// The newer term.
        term: u64,
    },
    /// Cancelled by [`Input::Demote`](crate::Input::Demote).
    Cancelled,
}

/// Why a leadership transfer did not happen.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
#[non_exhaustive]
pub enum TransferFailure {
    /// This node is not the leader.
    NotLeader,
    /// The target is not a configured voter.
    NotAVoter,
    /// No new leader within one election timeout.
    TimedOut,
    /// The term changed before the target won.
    TermChanged,
    /// The target is this node.
    TargetIsSelf,
    /// Another transfer replaced this one.
    Superseded,
    /// The leader stepped down for another reason (demote, fencing).
    SteppedDown,
    /// The target said in its last acknowledgement that it never campaigns
    /// (mode `Voter` or `Off`): handing over would only cost the lease.
    TargetCannotLead,
}

/// Why a leader hands leadership back ([`Event::HandingBack`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
#[non_exhaustive]
pub enum HandBackReason {
    /// The target ranks strictly higher under `policy`.
    BetterRank {
        /// The membership's rank policy.
        policy: crate::rank::RankPolicy,
    },
    /// This leader's priority is 0: it may not lead at all.
    MayNotLead,
}

/// Something the application may want to react to.
///
/// Events arrive as [`Action::Event`](crate::Action::Event), after the
/// state they report (the drivers publish the status first):
///
/// ```
/// use tenure::{Action, Config, Event, HardState, Input, Instant, Node};
///
/// let mut node: Node = Node::new(Config::new(1, [1]).rng_seed(7), HardState::default(), Instant::ZERO)?;
/// let mut events = Vec::new();
/// while events.is_empty() {
///     let now = node.next_deadline().expect("a deadline");
///     let mut actions = node.step(now, Input::Tick);
///     while let Some(action) = (!actions.is_empty()).then(|| actions.remove(0)) {
///         match action {
///             Action::Persist(state) => actions.extend(node.step(now, Input::Persisted(state))),
///             Action::Event(Event::BecameLeader { term, token, .. }) => events.push((term, token)),
///             _ => {}
///         }
///     }
/// }
/// let (term, token) = events[0];
/// assert_eq!((token.term, token.leader), (term, 1)); // the token names this leadership
/// # Ok::<(), tenure::ConfigError>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
#[non_exhaustive]
pub enum Event {
    /// This node won `term` (client-go's OnStartedLeading). Under strict
    /// fencing the lease starts only with the first quorum-acknowledged
    /// heartbeat round: check [`Node::lease`](crate::Node::lease) before acting.
    #[non_exhaustive]
    BecameLeader {
        /// The term won.
        term: u64,
        /// The token to attach to this leadership's writes.
        token: FencingToken,
    },
    /// This node stopped leading (client-go's OnStoppedLeading).
    #[non_exhaustive]
    SteppedDown {
        /// The term it led.
        term: u64,
        /// Why.
        reason: StepDownReason,
    },
    /// The known leader changed; `None` when it is unknown or declared dead
    /// (client-go's OnNewLeader).
    LeaderChanged {
        /// The term of the new knowledge.
        term: u64,
        /// The leader, if known.
        leader: Option<NodeId>,
    },
    /// This node's term and self-vote became durable and it asks for votes.
    CampaignStarted {
        /// The term campaigned for.
        term: u64,
    },
    /// A second node claimed leadership of a term whose leader is known; the
    /// claim is ignored. Indicates misconfiguration (a minority quorum) or a
    /// node restarted from lost state.
    ConflictingLeader {
        /// The term.
        term: u64,
        /// The leader this node follows.
        known: NodeId,
        /// The conflicting claimant.
        claimed: NodeId,
    },
    /// [`Input::Promote`](crate::Input::Promote) did not make this node leader.
    PromoteFailed {
        /// Why.
        reason: PromoteFailure,
    },
    /// This node now holds a strict lease (client-go's
    /// `OnStartedLeading`): it may act as the only leader until
    /// `valid_until` on its clock, unless [`Event::LeaseLost`] comes first.
    /// Follows `BecameLeader` once a quorum acknowledged a round; comes
    /// again if the lease returns after a loss. Strict fencing only.
    #[non_exhaustive]
    LeaseAcquired {
        /// The leadership holding the lease.
        token: FencingToken,
        /// When the lease ends unless renewed (renewals are not events:
        /// read [`Node::lease`](crate::Node::lease) before each act).
        valid_until: Instant,
    },
    /// The lease held now ends earlier than this node reported before
    /// (rule `lease_follows_voter_sets`): a membership change made it rest
    /// on voters that promise less. Announced before the new membership
    /// is sent to anyone. Act as the only leader only until `valid_until`
    /// (read [`Node::lease`](crate::Node::lease) before each act, as
    /// always). Strict fencing only.
    #[non_exhaustive]
    LeaseShortened {
        /// The leadership holding the lease.
        token: FencingToken,
        /// When the lease now ends unless renewed.
        valid_until: Instant,
    },
    /// The lease announced by [`Event::LeaseAcquired`] is no longer held:
    /// it ran out, a transfer started, or the node stopped leading. Stop
    /// acting as the only leader.
    #[non_exhaustive]
    LeaseLost {
        /// The leadership that held it.
        token: FencingToken,
    },
    /// The target of a transfer became leader.
    TransferCompleted {
        /// The new leader.
        to: NodeId,
    },
    /// Rule `rank_hand_back`: this leader starts a transfer to `to`, a
    /// better-ranked voter that has been alive and caught up for the
    /// hand-back period. `TransferCompleted` or `TransferFailed` follows.
    HandingBack {
        /// The voter leadership goes to.
        to: NodeId,
        /// Why.
        reason: HandBackReason,
    },
    /// [`Input::TransferLeadership`](crate::Input::TransferLeadership) did not
    /// complete.
    TransferFailed {
        /// The intended new leader.
        to: NodeId,
        /// Why.
        reason: TransferFailure,
    },
    /// The membership this node acts on changed (it is durable): its new
    /// `epoch` and `voters` (during the joint phase of a change, the voters
    /// after it; [`Status::membership`] has the voters before it too) and
    /// `observers`. Comes on every node for every step of a change.
    MembershipChanged {
        /// The membership's epoch.
        epoch: u64,
        /// Its voters.
        voters: Vec<NodeId>,
        /// Its observers.
        observers: Vec<NodeId>,
    },
    /// The leader's membership change reached its final membership and a
    /// quorum of its voters stored it.
    MembershipChangeCompleted {
        /// The final membership's epoch.
        epoch: u64,
    },
    /// [`Input::ChangeMembership`](crate::Input::ChangeMembership) was
    /// refused or did not complete.
    MembershipChangeFailed {
        /// Why.
        reason: MembershipFailure,
    },
    /// Rule `rollback_abstains`: a peer saw this node use term `seen`, above
    /// the term it restarted with (`had`) and every term it used since: it
    /// restarted from an older copy of its state (a restored backup or
    /// snapshot) and may have voted in a term up to `seen`. It now abstains
    /// in `seen` (unless it already voted there since the restart, or has
    /// moved past it), so it cannot vote twice; find out how its state went
    /// back.
    RollbackSuspected {
        /// The highest term a peer saw this node use.
        seen: u64,
        /// The durable term this node restarted with.
        had: u64,
    },
    /// A peer's messages carry the same membership version as this node's
    /// but different voter sets: the two disagree about membership (the
    /// bootstrap peer lists differ, or a node lost its state). Neither side
    /// can count the other correctly; fix the configuration. Reported once
    /// per peer and stamp; [`Status::membership_conflicts`] counts every
    /// such message.
    MembershipConflict {
        /// The peer.
        peer: NodeId,
        /// This node's membership.
        mine: MembershipId,
        /// The peer's.
        theirs: MembershipId,
    },
}

/// Votes and pre-votes a node refused, by the rule that refused them
/// ([`Status::refusals`]): why a candidate cannot win, visible without a
/// log drain.
///
/// ```
/// use tenure::{Config, HardState, Input, Instant, Message, MessageKind, Node, Rule};
///
/// // Node 2 already voted for 3 in term 5; node 1 asks for its vote too.
/// let mut node: Node = Node::new(Config::new(2, [1, 2, 3]), HardState::new(5, Some(3)), Instant::ZERO)?;
/// let ask = Message { term: 5, kind: MessageKind::VoteRequest { position: (), transfer: false } };
/// node.step(Instant::ZERO, Input::Receive { from: 1, message: ask });
/// let refusals = node.status().refusals;
/// assert_eq!(refusals.votes(Rule::OneVotePerTerm), 1);
/// assert_eq!(refusals.total(), 1);
/// # Ok::<(), tenure::ConfigError>(())
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Refusals {
    /// Vote requests refused, by rule (rules never seen are absent).
    pub by_vote: Vec<(Rule, u64)>,
    /// Pre-vote requests refused, by rule.
    pub by_pre_vote: Vec<(Rule, u64)>,
}

impl Refusals {
    /// Votes refused under `rule`.
    #[must_use]
    pub fn votes(&self, rule: Rule) -> u64 {
        count(&self.by_vote, rule)
    }

    /// Pre-votes refused under `rule`.
    #[must_use]
    pub fn pre_votes(&self, rule: Rule) -> u64 {
        count(&self.by_pre_vote, rule)
    }

    /// Votes and pre-votes refused under any rule.
    #[must_use]
    pub fn total(&self) -> u64 {
        self.by_vote
            .iter()
            .chain(&self.by_pre_vote)
            .fold(0, |sum, (_, n)| sum.saturating_add(*n))
    }

    pub(crate) fn vote_refused(&mut self, rule: Rule) {
        bump(&mut self.by_vote, rule);
    }

    pub(crate) fn pre_vote_refused(&mut self, rule: Rule) {
        bump(&mut self.by_pre_vote, rule);
    }
}

fn count(list: &[(Rule, u64)], rule: Rule) -> u64 {
    list.iter().find(|(r, _)| *r == rule).map_or(0, |(_, n)| *n)
}

fn bump(list: &mut Vec<(Rule, u64)>, rule: Rule) {
    match list.iter_mut().find(|(r, _)| *r == rule) {
        Some((_, n)) => *n = n.saturating_add(1),
        None => list.push((rule, 1)),
    }
}

/// A snapshot of a node, from [`Node::status`](crate::Node::status).
///
/// ```
/// use tenure::{Config, HardState, Instant, Node, Role};
///
/// // A node restarted with its durable term 4 and vote for node 3.
/// let node: Node = Node::new(Config::new(2, [1, 2, 3]), HardState::new(4, Some(3)), Instant::ZERO)?;
/// let status = node.status();
/// assert_eq!((status.role, status.term, status.vote), (Role::Follower, 4, Some(3)));
/// assert_eq!(status.leader, None); // not heard yet
/// assert_eq!(status.persisted, HardState::new(4, Some(3)));
/// assert_eq!(status.membership.voters, [1, 2, 3]);
/// assert_eq!(status.lease_until, None); // soft fencing: never a lease
/// # Ok::<(), tenure::ConfigError>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Status {
    /// This node.
    pub id: NodeId,
    /// Its role.
    pub role: Role,
    /// Its volatile term (decided, maybe not yet durable).
    pub term: u64,
    /// Its volatile vote in `term`.
    pub vote: Option<NodeId>,
    /// The leader of `term`, if known and not declared dead.
    pub leader: Option<NodeId>,
    /// The last state storage confirmed; the only state peers ever see.
    pub persisted: HardState,
    /// Whether a `Persist` is awaiting its `Persisted`.
    pub write_in_flight: bool,
    /// Time since a leader message was last accepted (`Some(0)` on the
    /// leader itself), `None` if never.
    pub leader_idle: Option<Duration>,
    /// The configured mode.
    pub mode: Mode,
    /// Whether this node is a voter (otherwise an observer).
    pub is_voter: bool,
    /// The configured fencing mode.
    pub fencing: Fencing,
    /// This node's local instant until which it may act as the only leader
    /// (strict fencing); `None` whenever it may not.
    pub lease_until: Option<crate::time::Instant>,
    /// The token of this node's leadership while it is leader.
    pub fencing_token: Option<FencingToken>,
    /// The node a leadership transfer is handing over to, while one runs.
    pub transferring_to: Option<NodeId>,
    /// The durable membership the node acts on.
    pub membership: Membership,
    /// Messages whose sender stamped the same membership version with
    /// other voter sets (see [`Event::MembershipConflict`]).
    pub membership_conflicts: u64,
    /// Votes and pre-votes this node refused since it started, by rule.
    pub refusals: Refusals,
}

impl Status {
    /// Whether a replica beside this node may take a write made under
    /// `token`, as [`Node::admits`](crate::Node::admits) answers it from
    /// this snapshot (the drivers publish one after every step).
    #[must_use]
    pub fn admits(&self, token: FencingToken) -> bool {
        crate::fence::admits(self.term, self.leader, token)
    }
}
