//! Who should lead: rank policies.
//!
//! `tenure` elects whoever reaches a quorum first; a rank policy only
//! decides who *tries* first, and to whom a leader hands leadership back.
//! Every member agrees on the ranks because they travel with the
//! [`Membership`](crate::Membership) (its `rank`, `priorities` and `joined`
//! fields), changed only by a membership change
//! ([`MembershipChange::SetRankPolicy`](crate::MembershipChange::SetRankPolicy),
//! [`MembershipChange::SetPriority`](crate::MembershipChange::SetPriority)).
//!
//! # The two seed algorithms, and what tenure keeps
//!
//! - **Bully** ([`RankPolicy::HighestId`]): the live node with the highest
//!   id coordinates. A partitioned Bully coordinator keeps coordinating on
//!   its side while the other side elects its own: split brain.
//! - **Emergent Leader** ([`RankPolicy::Oldest`]): the oldest member (the
//!   first to join) coordinates. Each side of a partition sees its own
//!   oldest member: split brain again.
//!
//! Here rank never overrides safety: votes, quorums, leader stickiness and
//! the log check decide as without a policy (at most one leader per term, a
//! lease that ends before anyone else can be elected). Rank adds a
//! campaign delay (rule `rank_orders_campaigns`): after a leader's death the
//! best-ranked live, caught-up voter campaigns first, the next one a
//! [`Config::rank_step`](crate::Config::rank_step) later, and so on; and a
//! leader hands leadership back to a better-ranked voter that has been
//! alive and caught up for a stable period (rule `rank_hand_back`). What is
//! given up: a better-ranked node that is partitioned, deaf or behind does
//! not lead, and a failover in which the better-ranked nodes are down waits
//! up to one rank step per such node the old leader did not know was down.

use crate::NodeId;

/// How members rank for leadership. Carried with the membership, so every
/// member ranks the same way.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
#[non_exhaustive]
pub enum RankPolicy {
    /// No preference: whoever times out first campaigns (the default).
    #[default]
    Unranked,
    /// Explicit priorities ([`Membership::priorities`](crate::Membership::priorities)):
    /// higher leads; `0` never leads (like [`Mode::Voter`](crate::Mode::Voter));
    /// a member without one has [`DEFAULT_PRIORITY`]. Equal priorities
    /// order by lower id for campaigns but never cause a hand-back.
    Priority,
    /// The Bully algorithm's order: the highest id leads.
    HighestId,
    /// The Emergent Leader pattern's order: the member that joined first
    /// (lowest [`Membership::joined`](crate::Membership::joined) epoch),
    /// then the lowest id, leads.
    Oldest,
}

/// The priority of a member that has none recorded.
pub const DEFAULT_PRIORITY: u32 = 1;

impl RankPolicy {
    /// Every policy, in declaration order.
    pub const ALL: [RankPolicy; 4] = [
        RankPolicy::Unranked,
        RankPolicy::Priority,
        RankPolicy::HighestId,
        RankPolicy::Oldest,
    ];

    /// The name used in files, on the command line and in JSON.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            RankPolicy::Unranked => "unranked",
            RankPolicy::Priority => "priority",
            RankPolicy::HighestId => "highest_id",
            RankPolicy::Oldest => "oldest",
        }
    }

    /// The policy named `name` ([`RankPolicy::name`]).
    #[must_use]
    pub fn from_name(name: &str) -> Option<RankPolicy> {
        RankPolicy::ALL.into_iter().find(|p| p.name() == name)
    }

    /// Whether the policy prefers some members over others.
    #[must_use]
    pub const fn is_ranked(self) -> bool {
        !matches!(self, RankPolicy::Unranked)
    }
}

impl core::fmt::Display for RankPolicy {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.name())
    }
}

/// A member's standing under a [`RankPolicy`]; greater is better.
///
/// `class` is what the policy prefers (a priority, an id, an age): a leader
/// hands back only to a strictly greater class. `tie` orders equal classes
/// (lower id first), so campaigns follow one total order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Rank {
    /// What the policy prefers; compared first.
    pub class: u128,
    /// Orders equal classes: greater for a lower id.
    pub tie: u64,
}

impl Rank {
    /// The rank of `id` that joined at epoch `joined` with `priority`.
    pub(crate) fn of(policy: RankPolicy, id: NodeId, priority: u32, joined: u64) -> Rank {
        let tie = u64::MAX - id;
        match policy {
            RankPolicy::Priority => Rank {
                class: u128::from(priority),
                tie,
            },
            RankPolicy::HighestId => Rank {
                class: u128::from(id),
                tie,
            },
            RankPolicy::Oldest => Rank {
                class: (u128::from(u64::MAX - joined) << 64) | u128::from(tie),
                tie,
            },
            _ => Rank { class: 0, tie },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for p in RankPolicy::ALL {
            assert_eq!(RankPolicy::from_name(p.name()), Some(p));
        }
        assert_eq!(RankPolicy::from_name("bully"), None);
    }

    #[test]
    fn each_policy_orders_as_documented() {
        let r = |p, id, prio, joined| Rank::of(p, id, prio, joined);
        // Priority: higher wins; equal priorities order by lower id, same class.
        assert!(r(RankPolicy::Priority, 5, 3, 0) > r(RankPolicy::Priority, 1, 2, 0));
        let (a, b) = (
            r(RankPolicy::Priority, 1, 2, 0),
            r(RankPolicy::Priority, 2, 2, 0),
        );
        assert!(a > b && a.class == b.class);
        // HighestId: the Bully order.
        assert!(r(RankPolicy::HighestId, 9, 1, 0) > r(RankPolicy::HighestId, 3, 1, 0));
        // Oldest: earlier join first, then the lower id; every class distinct.
        assert!(r(RankPolicy::Oldest, 9, 1, 0) > r(RankPolicy::Oldest, 1, 1, 4));
        let (a, b) = (
            r(RankPolicy::Oldest, 1, 1, 0),
            r(RankPolicy::Oldest, 2, 1, 0),
        );
        assert!(a.class > b.class);
        // Unranked: one class, lower id first (the old duel tie-break).
        let (a, b) = (
            r(RankPolicy::Unranked, 1, 1, 0),
            r(RankPolicy::Unranked, 2, 7, 0),
        );
        assert!(a > b && a.class == b.class);
    }
}
