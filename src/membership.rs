//! The voter set as durable, versioned state, and the changes a leader
//! makes to it.
//!
//! # Design: joint consensus over a one-entry log
//!
//! `tenure` has no log, so the membership is its own tiny replicated log:
//! each [`Membership`] is one entry, numbered by its `epoch` and stamped
//! with the `term` of the leader that made it. Memberships are ordered by
//! `(term, epoch)`, exactly as Raft orders logs by (last term, last index)
//! (§5.4.1), and a voter never helps a candidate whose membership is older
//! than its own (rule `membership_up_to_date`).
//!
//! A change goes through a **joint** membership (Raft §6): the leader
//! first writes `old ∪ new` with `outgoing = old`, in which elections,
//! lease acknowledgements and moving on need a majority of the old voters
//! *and* a majority of the new ones (rule `joint_quorums`), then, once a
//! majority of both stored it, the final membership with only the new
//! voters. Joint consensus rather than single-server changes because a
//! replacement (remove a dead node, add a new one) is then one change that
//! needs majorities of the old and of the new set, never a state in
//! between with an even voter count; and because every pair of consecutive
//! memberships shares a quorum by construction, the single-server pitfall
//! (Ongaro, raft-dev 2015) cannot arise. The leader still starts a change
//! only once a quorum stored its own membership in its own term (rule
//! `change_after_own_membership_stored`), which is that pitfall's fix, so
//! a change never builds on a membership a future leader might not know.
//!
//! # Safety argument
//!
//! Call a membership `M` *stored at term T* once a majority of each of its
//! voter sets holds `M`, or a membership built on it, durably while at
//! term `T` or below (none of those voters has yet decided a vote in a
//! later term). The leader moves on only from a membership stored in its
//! own term (it writes an inherited one again first), one change at a
//! time.
//!
//! 1. **Completeness.** If `M` is stored at term `T`, every leader of a
//!    term after `T` uses `M` or a newer membership. (Stated by term, as
//!    Raft's: a leader of an earlier term can still be elected *after*
//!    `M` was stored, with votes given before; the model checker finds
//!    such runs.) This is Raft's leader completeness
//!    (§5.4.3) for a log whose only entries are memberships, with Raft's
//!    commit rule for configuration entries (§6: an entry counts once
//!    majorities of each of its own voter sets hold it). Along the chain
//!    of stored memberships, two consecutive ones share a voter set (a
//!    joint membership keeps the old voters and adds the new; the final
//!    one keeps the new; an observer change keeps the voters), so a
//!    candidate at an earlier one needs a majority of a set in which a
//!    majority already holds something newer, and one of them refuses it
//!    (rule `membership_up_to_date`). A membership off the chain was made
//!    by a leader of an earlier term and never stored; it orders below
//!    every membership of a later term, as an uncommitted entry does in
//!    Raft, and a leader builds only on a membership a quorum stored in
//!    its own term (rule `change_after_own_membership_stored`). A joint
//!    membership inherited from an earlier term is first written again,
//!    unchanged, in the leader's own term, and left only once that copy
//!    is stored (rule `joint_left_when_stored`): as in Raft §5.4.2
//!    (Figure 8), counting copies of an earlier term's entry proves
//!    nothing, since a sibling made in a later term could still win votes
//!    from the nodes counted; leaving it on such a count let two leaders
//!    with disjoint quorums hold strict leases at once (the test
//!    `joint_left_when_stored_only_after_rewriting_an_inherited_joint`).
//! 2. **One leader per term.** A candidate counts votes under its own
//!    durable membership, requiring a majority of each of its voter sets.
//!    Two memberships that may both be in use at once are consecutive
//!    (a stored one and the one built on it), and their quorums intersect.
//! 3. **Leases.** A leader's lease needs promises from a majority of each
//!    voter set of its membership, recomputed whenever it changes (a joint
//!    membership needs both). A rival must win a majority of each voter
//!    set of *its* membership, which is, by 1 and 2, one whose quorums
//!    intersect the leader's; the promiser in the intersection refuses it.
//! 4. **Durability.** A node acts only on its durable membership: it
//!    counts, votes, stamps and reports the membership storage confirmed.
//!
//! The same argument is checked by the model checker
//! (`tests/model/membership.rs`) and by the simulator's membership
//! scenarios (`tests/sim/membership.rs`).
//!
//! # Liveness: how a membership reaches every node
//!
//! Safety never depends on who tells a node of a membership: any genuine
//! membership newer than a node's own descends from every stored one, so
//! a node adopts a newer one from any message that carries it, even one of
//! a past term (rule `membership_adopt_newer`). The message's term is not
//! adopted with it, but the membership's own term is when it is later
//! than the node's (with no vote): as in Raft, where currentTerm is never
//! below the last entry's term, a node never campaigns for a term at or
//! below its membership's, since the voters that membership added had no
//! vote in the term that made it and could elect a second leader of it.
//! A candidate whose membership was made in the term it asks for, or a
//! later one, is refused for the same reason. What keeps elections from
//! stalling is that every node is told:
//! - the leader sends its membership to every peer whose messages show an
//!   older one, each round, and to a node it removed;
//! - a voter that refuses a candidate whose membership is older sends it
//!   its own (a leader that removed itself may hold the only copy of the
//!   final membership the others need);
//! - a candidate refused at its term by a voter whose membership is older
//!   sends it its own (a new voter that missed the joint phase would
//!   otherwise refuse everyone), and a node outside a candidate's older
//!   membership answers its request so the candidate learns that;
//! - a node that cannot campaign (mode voter or off, or an observer)
//!   sends its membership to every member once per election round while
//!   no leader is known (a new voter that missed the final membership
//!   would otherwise never learn that it votes when every node holding it
//!   is in mode voter);
//! - a leader that sees a peer stamp a membership newer than its own,
//!   made in an earlier term (a deposed leader's unstored change adopted
//!   from a late message), writes its own again in its term, which orders
//!   above it, so the peer adopts that (Raft's leader overwriting a
//!   follower's uncommitted entries); without it the two would disagree
//!   for good;
//! - a follower hears a leader that removed itself (its heartbeats and
//!   `TimeoutNow`, stamped with the follower's membership or a newer one)
//!   until it has handed over, also after the follower restarted; a leader
//!   that finds itself outside the voters of a stored membership of its
//!   own term hands over, whether it made that change or inherited it
//!   (rule `removed_leader_hands_over`).

use alloc::string::String;
use alloc::vec::Vec;

use crate::NodeId;
use crate::rank::{DEFAULT_PRIORITY, Rank, RankPolicy};

/// The largest epoch a node accepts (from a leader, or from storage): a
/// change takes at most three, so honest clusters never come near it
/// (2^62 steps), and every successor's epoch is representable.
pub(crate) const MAX_EPOCH: u64 = 1 << 62;

/// The voters and observers of a cluster, as one durable, versioned record.
///
/// Outside a change, `outgoing` is empty and `voters` vote. During the
/// joint phase of a change, `outgoing` holds the voters before the change
/// and `voters` those after it; both groups vote, and every quorum needs a
/// majority of each.
///
/// ```
/// use tenure::{Config, HardState, Input, Instant, MembershipChange, Node};
///
/// let node: Node = Node::new(Config::new(1, [1, 2, 3]), HardState::default(), Instant::ZERO)?;
/// let m = node.membership(); // the bootstrap membership, from the config
/// assert_eq!((m.epoch, m.voters.as_slice()), (0, &[1, 2, 3][..]));
/// assert!(m.outgoing.is_empty() && m.is_member(2) && !m.is_member(4));
/// // Changes go through the leader, one at a time, e.g.:
/// let _grow: Input = Input::ChangeMembership(MembershipChange::AddVoter {
///     id: 4,
///     address: "10.0.0.4:7001".into(),
/// });
/// # Ok::<(), tenure::ConfigError>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Membership {
    /// The change number: 0 for the bootstrap membership, +1 per step.
    pub epoch: u64,
    /// The term of the leader that made it (0 for the bootstrap membership).
    /// Memberships are ordered by `(term, epoch)`.
    pub term: u64,
    /// The voters (during a joint phase: the voters after the change).
    pub voters: Vec<NodeId>,
    /// During a joint phase, the voters before the change; otherwise empty.
    pub outgoing: Vec<NodeId>,
    /// Members that follow the leader but never vote or campaign.
    pub observers: Vec<NodeId>,
    /// Contact addresses of members, opaque to the core (the adapters use
    /// them so that a new node's address reaches everyone). Sorted by id.
    pub addresses: Vec<(NodeId, String)>,
    /// How members rank for leadership (see [`RankPolicy`]).
    pub rank: RankPolicy,
    /// Explicit priorities ([`RankPolicy::Priority`]), sorted by id; a
    /// member not listed has [`DEFAULT_PRIORITY`].
    pub priorities: Vec<(NodeId, u32)>,
    /// The epoch at which each member joined ([`RankPolicy::Oldest`]),
    /// sorted by id; a member not listed joined at epoch 0 (bootstrap).
    pub joined: Vec<(NodeId, u64)>,
}

/// Names one membership exactly: its version and a fingerprint of its
/// voter sets. Every message a driver sends carries the sender's
/// ([`Node::membership_id`](crate::Node::membership_id)).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct MembershipId {
    /// The membership's epoch.
    pub epoch: u64,
    /// The term of the leader that made it.
    pub term: u64,
    /// FNV-1a over the voters, outgoing voters and observers (not the
    /// addresses, which legitimately differ between nodes' views).
    pub fingerprint: u64,
}

impl MembershipId {
    /// Whether `self` names a newer membership than `other`: a greater
    /// `(term, epoch)`.
    #[must_use]
    pub fn is_newer_than(&self, other: &MembershipId) -> bool {
        (self.term, self.epoch) > (other.term, other.epoch)
    }

    /// Whether both name the same version but different voter sets: the
    /// two nodes disagree about membership (a misconfigured bootstrap peer
    /// list, or lost state).
    #[must_use]
    pub fn conflicts_with(&self, other: &MembershipId) -> bool {
        (self.term, self.epoch) == (other.term, other.epoch)
            && self.fingerprint != other.fingerprint
    }
}

impl core::fmt::Display for MembershipId {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(
            f,
            "epoch {} (term {}, {:016x})",
            self.epoch, self.term, self.fingerprint
        )
    }
}

/// A change an operator asks the leader for
/// ([`Input::ChangeMembership`](crate::Input::ChangeMembership)).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
#[non_exhaustive]
pub enum MembershipChange {
    /// Add `id` as a voter: it joins as an observer first and becomes a
    /// voter once it caught up (rule `new_voter_catches_up`). An `id` that
    /// is an observer already (say, left one by an earlier attempt that
    /// failed at catch-up) is promoted, as by [`MembershipChange::Promote`].
    AddVoter {
        /// The new voter.
        id: NodeId,
        /// Its contact address (opaque to the core).
        address: String,
    },
    /// Add `id` as an observer.
    AddObserver {
        /// The new observer.
        id: NodeId,
        /// Its contact address (opaque to the core).
        address: String,
    },
    /// Make observer `id` a voter, once it caught up.
    Promote {
        /// The observer.
        id: NodeId,
    },
    /// Remove voter or observer `id`. Removing the leader ends with a
    /// handover to a voter of the new set.
    Remove {
        /// The member to remove.
        id: NodeId,
    },
    /// Replace voter `old` by the new node `new` in one joint change
    /// (available while a majority of both the old and the new voter set is
    /// up): `new` joins as an observer (or is one already), catches up,
    /// then `old` leaves and `new` votes.
    Replace {
        /// The voter to remove.
        old: NodeId,
        /// The new voter.
        new: NodeId,
        /// The new voter's contact address.
        address: String,
    },
    /// Rank members by `policy` from now on (one membership step; the
    /// voters do not change). Refused as [`MembershipFailure::NoLeaderLeft`]
    /// if it leaves no voter allowed to lead.
    SetRankPolicy {
        /// The new policy.
        policy: RankPolicy,
    },
    /// Set member `id`'s priority ([`RankPolicy::Priority`]; `0` never
    /// leads). One membership step; refused as
    /// [`MembershipFailure::NoLeaderLeft`] if it leaves no voter allowed to
    /// lead under the policy.
    SetPriority {
        /// The member.
        id: NodeId,
        /// Its new priority.
        priority: u32,
    },
}

/// Why a membership change did not happen, or did not finish.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
#[non_exhaustive]
pub enum MembershipFailure {
    /// This node is not the leader (the leader, if known).
    NotLeader {
        /// The known leader.
        leader: Option<NodeId>,
    },
    /// Another change is still running (one change at a time).
    ChangeInProgress,
    /// The leader's own membership is not yet stored by a quorum in its
    /// term; retry in a moment (rule `change_after_own_membership_stored`).
    NotEstablished,
    /// The change makes no sense for the current membership (adding a
    /// member, removing a non-member, removing the last voter, node id 0).
    Invalid,
    /// The new voter did not catch up (acknowledge a round with a log
    /// position at least the leader's) in time; it stays an observer.
    NotCaughtUp,
    /// The joint membership was not stored by majorities of both voter sets
    /// in time; the leader went back to the old voters.
    NoQuorum,
    /// The leader stopped leading; a new leader finishes a joint change it
    /// inherits, but nothing else.
    SteppedDown,
    /// The configured quorum is not a majority; changes need majorities.
    CustomQuorum,
    /// After the change no voter could lead: every voter it keeps or adds
    /// is known (from its acknowledgements) to be in mode voter or off, so
    /// the cluster would never elect a leader again.
    NoLeaderLeft,
    /// Like `NoQuorum`, but `peer`'s messages carry no membership stamp: the
    /// driver feeds them as [`Input::Receive`](crate::Input::Receive)
    /// instead of [`Input::ReceiveStamped`](crate::Input::ReceiveStamped),
    /// so the leader cannot see that they stored the change.
    Unstamped {
        /// A member whose messages carried no stamp.
        peer: NodeId,
    },
}

impl Membership {
    /// The bootstrap membership (epoch 0, term 0) with these voters and
    /// observers (sorted and deduplicated here).
    #[must_use]
    pub fn bootstrap(
        voters: impl IntoIterator<Item = NodeId>,
        observers: impl IntoIterator<Item = NodeId>,
    ) -> Membership {
        Membership {
            voters: sorted(voters),
            observers: sorted(observers),
            ..Membership::default()
        }
    }

    /// Its id: version and fingerprint.
    #[must_use]
    pub fn id(&self) -> MembershipId {
        let mut h = FNV_OFFSET;
        for group in [&self.voters, &self.outgoing, &self.observers] {
            h = fnv(h, &(group.len() as u64).to_le_bytes());
            for id in group {
                h = fnv(h, &id.to_le_bytes());
            }
        }
        // Ranks are covered only when set, so that an unranked membership
        // keeps the fingerprint it had before ranks existed, and members
        // configured with different ranks are reported as a conflict.
        if self.rank.is_ranked() || !self.priorities.is_empty() {
            h = fnv(h, &[self.rank as u8]);
            for (id, priority) in &self.priorities {
                h = fnv(h, &id.to_le_bytes());
                h = fnv(h, &priority.to_le_bytes());
            }
        }
        MembershipId {
            epoch: self.epoch,
            term: self.term,
            fingerprint: h,
        }
    }

    /// Whether this is the joint phase of a change.
    #[must_use]
    pub fn is_joint(&self) -> bool {
        !self.outgoing.is_empty()
    }

    /// Whether `id` votes in this membership (in either voter set).
    #[must_use]
    pub fn is_voter(&self, id: NodeId) -> bool {
        self.voters.binary_search(&id).is_ok() || self.outgoing.binary_search(&id).is_ok()
    }

    /// Whether `id` is a voter or an observer.
    #[must_use]
    pub fn is_member(&self, id: NodeId) -> bool {
        self.is_voter(id) || self.observers.binary_search(&id).is_ok()
    }

    /// Every voter of either set, sorted.
    #[must_use]
    pub fn all_voters(&self) -> Vec<NodeId> {
        sorted(self.voters.iter().chain(&self.outgoing).copied())
    }

    /// Every member (voters of either set and observers), sorted.
    #[must_use]
    pub fn members(&self) -> Vec<NodeId> {
        sorted(
            self.voters
                .iter()
                .chain(&self.outgoing)
                .chain(&self.observers)
                .copied(),
        )
    }

    /// The address recorded for `id`.
    #[must_use]
    pub fn address(&self, id: NodeId) -> Option<&str> {
        self.addresses
            .binary_search_by_key(&id, |(i, _)| *i)
            .ok()
            .map(|i| self.addresses[i].1.as_str())
    }

    /// Whether the lists are sorted, deduplicated, free of id 0, voters and
    /// observers disjoint, at least one voter, and the epoch at most
    /// 2^62 + 3 (a change started at 2^62 ends there): what every
    /// membership the core makes satisfies, and what a stored or received
    /// one must.
    #[must_use]
    pub fn is_well_formed(&self) -> bool {
        let strictly_sorted = |v: &[NodeId]| v.windows(2).all(|w| w[0] < w[1]);
        self.epoch <= MAX_EPOCH + 3
            && strictly_sorted(&self.voters)
            && strictly_sorted(&self.outgoing)
            && strictly_sorted(&self.observers)
            && self.addresses.windows(2).all(|w| w[0].0 < w[1].0)
            && self.priorities.windows(2).all(|w| w[0].0 < w[1].0)
            && self.joined.windows(2).all(|w| w[0].0 < w[1].0)
            && !self.voters.is_empty()
            && !self.is_member(0)
            && !self.observers.iter().any(|&o| self.is_voter(o))
    }

    /// The priority of `id` ([`RankPolicy::Priority`]).
    #[must_use]
    pub fn priority(&self, id: NodeId) -> u32 {
        self.priorities
            .binary_search_by_key(&id, |(i, _)| *i)
            .map_or(DEFAULT_PRIORITY, |i| self.priorities[i].1)
    }

    /// The epoch at which `id` joined (0 for a bootstrap member).
    #[must_use]
    pub fn joined(&self, id: NodeId) -> u64 {
        self.joined
            .binary_search_by_key(&id, |(i, _)| *i)
            .map_or(0, |i| self.joined[i].1)
    }

    /// The rank of `id` under this membership's policy (greater is better).
    #[must_use]
    pub fn rank_of(&self, id: NodeId) -> Rank {
        Rank::of(self.rank, id, self.priority(id), self.joined(id))
    }

    /// Whether the rank policy lets `id` lead: only priority 0 under
    /// [`RankPolicy::Priority`] forbids it.
    #[must_use]
    #[inline]
    pub fn rank_allows_leading(&self, id: NodeId) -> bool {
        self.rank != RankPolicy::Priority || self.priority(id) > 0
    }

    /// `self` with `priority` recorded for `id` (a default priority is not
    /// listed).
    pub(crate) fn with_priority(mut self, id: NodeId, priority: u32) -> Membership {
        match self.priorities.binary_search_by_key(&id, |(i, _)| *i) {
            Ok(i) if priority == DEFAULT_PRIORITY => {
                self.priorities.remove(i);
            }
            Ok(i) => self.priorities[i].1 = priority,
            Err(_) if priority == DEFAULT_PRIORITY => {}
            Err(i) => self.priorities.insert(i, (id, priority)),
        }
        self
    }

    /// `self` with `address` recorded for `id`.
    pub(crate) fn with_address(mut self, id: NodeId, address: String) -> Membership {
        match self.addresses.binary_search_by_key(&id, |(i, _)| *i) {
            Ok(i) => self.addresses[i].1 = address,
            Err(i) => self.addresses.insert(i, (id, address)),
        }
        self
    }

    /// The next membership, made by the leader of `term`: `epoch + 1`.
    pub(crate) fn successor(
        &self,
        term: u64,
        voters: Vec<NodeId>,
        outgoing: Vec<NodeId>,
        observers: Vec<NodeId>,
    ) -> Membership {
        let mut next = Membership {
            epoch: self.epoch + 1,
            term,
            voters: sorted(voters),
            outgoing: sorted(outgoing),
            observers: sorted(observers),
            rank: self.rank,
            ..Membership::default()
        };
        // Keep the addresses and ranks of members only; a new member joins
        // at this epoch.
        next.addresses = self
            .addresses
            .iter()
            .filter(|(id, _)| next.is_member(*id))
            .cloned()
            .collect();
        next.priorities = self
            .priorities
            .iter()
            .filter(|(id, _)| next.is_member(*id))
            .copied()
            .collect();
        let joined = next
            .members()
            .into_iter()
            .filter_map(|id| match self.is_member(id) {
                true => self.joined.iter().find(|(i, _)| *i == id).copied(),
                false => Some((id, next.epoch)),
            })
            .collect();
        next.joined = joined;
        next
    }
}

/// Sorted and deduplicated.
pub(crate) fn sorted(ids: impl IntoIterator<Item = NodeId>) -> Vec<NodeId> {
    let mut v: Vec<NodeId> = ids.into_iter().collect();
    v.sort_unstable();
    v.dedup();
    v
}

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;

fn fnv(mut h: u64, bytes: &[u8]) -> u64 {
    for b in bytes {
        h = (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3);
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_order_by_term_then_epoch() {
        let a = MembershipId {
            epoch: 5,
            term: 2,
            fingerprint: 1,
        };
        let b = MembershipId {
            epoch: 1,
            term: 3,
            fingerprint: 1,
        };
        assert!(b.is_newer_than(&a));
        assert!(!a.is_newer_than(&b));
        assert!(!a.is_newer_than(&a));
    }

    #[test]
    fn the_fingerprint_covers_roles_not_addresses() {
        let m = Membership::bootstrap([1, 2, 3], [4]);
        let moved = m.clone().with_address(2, "elsewhere".into());
        assert_eq!(m.id(), moved.id());
        let other = Membership::bootstrap([1, 2, 4], [3]);
        assert!(m.id().conflicts_with(&other.id()));
        let observer_as_voter = Membership::bootstrap([1, 2, 3, 4], []);
        assert!(m.id().conflicts_with(&observer_as_voter.id()));
    }

    #[test]
    fn successors_record_when_members_joined_and_keep_ranks_of_members() {
        let m = Membership::bootstrap([1, 2, 3], [])
            .with_priority(3, 7)
            .with_priority(2, 0);
        let m = Membership {
            rank: RankPolicy::Oldest,
            ..m
        };
        // Node 4 joins as an observer at epoch 1, then votes at epoch 2.
        let one = m.successor(1, alloc::vec![1, 2, 3], Vec::new(), alloc::vec![4]);
        let two = one.successor(1, alloc::vec![1, 2, 3, 4], alloc::vec![1, 2, 3], Vec::new());
        assert_eq!(two.joined(4), 1, "joined when it first became a member");
        assert_eq!(two.joined(1), 0, "bootstrap members joined at 0");
        assert!(two.rank_of(1) > two.rank_of(3) && two.rank_of(3) > two.rank_of(4));
        assert_eq!(two.rank, RankPolicy::Oldest);
        // Node 3 leaves: its priority goes with it; node 2 keeps its 0.
        let three = two.successor(1, alloc::vec![1, 2, 4], Vec::new(), Vec::new());
        assert_eq!(three.priorities, alloc::vec![(2, 0)]);
        assert_eq!(three.priority(1), DEFAULT_PRIORITY);
        assert!(three.is_well_formed());
        // Setting the default priority removes the entry.
        assert!(
            three
                .with_priority(2, DEFAULT_PRIORITY)
                .priorities
                .is_empty()
        );
    }

    #[test]
    fn well_formed_refuses_overlap_zero_and_no_voters() {
        assert!(Membership::bootstrap([1, 2, 3], [4]).is_well_formed());
        assert!(!Membership::bootstrap([1, 2], [2]).is_well_formed());
        assert!(!Membership::bootstrap([0, 1], []).is_well_formed());
        assert!(!Membership::bootstrap([], [1]).is_well_formed());
        let unsorted = Membership {
            voters: alloc::vec![2, 1],
            ..Membership::default()
        };
        assert!(!unsorted.is_well_formed());
    }
}
