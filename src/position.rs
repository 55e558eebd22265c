//! The application's log position, used by the vote rule "grant only to a
//! candidate whose log is at least as up to date as mine" (Raft §5.4.1).
//!
//! `tenure` has no log of its own. The application reports where its
//! replication stands with [`Input::LogPosition`](crate::Input::LogPosition),
//! vote requests carry it, and voters compare. Provided positions:
//!
//! | type | order | use |
//! |---|---|---|
//! | `()` | all equal | pure election, no data to protect |
//! | `u64` | numeric | a single sequence number (LSN, offset) |
//! | `(u64, u64)` | lexicographic | Raft's `(last term, last index)` |
//! | [`VClock`] | ≥ in every component; incomparable refuses | multi-source replication (Tarantool) |

use alloc::collections::BTreeMap;
use core::fmt::Debug;

use crate::NodeId;

/// A position in the application's log, partially ordered by recency.
///
/// # What to feed
///
/// Feed the position of the last entry this node holds **durably** (after
/// its fsync), with [`Input::LogPosition`](crate::Input::LogPosition):
///
/// - **Durable, not merely received.** A node votes and campaigns with the
///   position it last reported. If it reported entries that a crash then
///   loses, it may have refused a candidate that had them, or won with a
///   log it no longer has: Raft's "a leader holds every committed entry"
///   (§5.4) rests on the position surviving the crash.
/// - **When.** Right after [`Node::new`](crate::Node::new), before the
///   node handles any message (a restarted node otherwise votes with
///   `P::default()`, the oldest position), and after each durable append.
///   Reporting more often is harmless; a position reported late only makes
///   the node more willing to vote for others meanwhile.
/// - **Backwards.** Allowed (an uncommitted suffix truncated by a new
///   leader): the node uses the latest value from then on. Votes already
///   granted stay granted, as in Raft.
///
/// ```
/// use tenure::{Config, HardState, Input, Instant, Node};
///
/// // A node whose storage holds entries up to index 41 of term 3.
/// let mut node: Node<(u64, u64)> =
///     Node::new(Config::new(1, [1, 2, 3]), HardState::new(3, None), Instant::ZERO).unwrap();
/// node.step(Instant::ZERO, Input::LogPosition((3, 41)));
/// assert_eq!(node.position(), &(3, 41));
/// ```
pub trait LogPosition: Clone + Debug + PartialEq + Default {
    /// Whether a candidate at `self` is at least as up to date as a voter at
    /// `voter`. Must be reflexive and transitive; incomparable positions
    /// return `false` in both directions (the vote is refused).
    fn is_at_least(&self, voter: &Self) -> bool;
}

impl LogPosition for () {
    fn is_at_least(&self, _voter: &()) -> bool {
        true
    }
}

impl LogPosition for u64 {
    fn is_at_least(&self, voter: &u64) -> bool {
        self >= voter
    }
}

/// `(last log term, last log index)`: Raft's up-to-date rule, comparing
/// terms first.
impl LogPosition for (u64, u64) {
    fn is_at_least(&self, voter: &(u64, u64)) -> bool {
        self >= voter
    }
}

/// A vector clock: one counter per replication source. Missing components
/// are zero. `a` is at least `b` when every component of `a` is ≥ the same
/// component of `b`; two clocks where each is ahead somewhere are
/// incomparable, and a vote between them is refused.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct VClock(BTreeMap<NodeId, u64>);

impl VClock {
    /// An empty clock (all components zero).
    pub fn new() -> VClock {
        VClock::default()
    }

    /// The component of `source` (zero when absent).
    pub fn get(&self, source: NodeId) -> u64 {
        self.0.get(&source).copied().unwrap_or(0)
    }

    /// Sets the component of `source`; zero removes it.
    pub fn set(&mut self, source: NodeId, value: u64) {
        if value == 0 {
            self.0.remove(&source);
        } else {
            self.0.insert(source, value);
        }
    }

    /// Non-zero components in source order.
    pub fn iter(&self) -> impl Iterator<Item = (NodeId, u64)> + '_ {
        self.0
            .iter()
            .map(|(&k, &v)| (k, v))
            .filter(|&(_, v)| v != 0)
    }
}

impl FromIterator<(NodeId, u64)> for VClock {
    fn from_iter<I: IntoIterator<Item = (NodeId, u64)>>(iter: I) -> VClock {
        let mut clock = VClock::new();
        for (source, value) in iter {
            clock.set(source, value);
        }
        clock
    }
}

impl LogPosition for VClock {
    fn is_at_least(&self, voter: &VClock) -> bool {
        // Every component the voter has must be matched; components only the
        // candidate has can only make it newer.
        voter.0.iter().all(|(&source, &v)| self.get(source) >= v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn term_index_compares_term_first() {
        assert!((3, 1).is_at_least(&(2, 100)));
        assert!(!(2, 100).is_at_least(&(3, 1)));
        assert!((2, 5).is_at_least(&(2, 5)));
    }

    #[test]
    fn vclock_incomparable_refuses_both_ways() {
        let a: VClock = [(1, 4), (2, 6)].into_iter().collect();
        let b: VClock = [(1, 5), (2, 5)].into_iter().collect();
        assert!(!a.is_at_least(&b));
        assert!(!b.is_at_least(&a));
    }

    #[test]
    fn vclock_greater_in_every_component_wins() {
        let a: VClock = [(1, 5), (2, 6), (3, 1)].into_iter().collect();
        let b: VClock = [(1, 5), (2, 5)].into_iter().collect();
        assert!(a.is_at_least(&b));
        assert!(!b.is_at_least(&a));
        assert!(a.is_at_least(&a));
    }

    #[test]
    fn vclock_zero_components_are_absent() {
        let mut a = VClock::new();
        a.set(1, 3);
        a.set(1, 0);
        assert_eq!(a, VClock::new());
        let explicit_zero: VClock = [(7, 0)].into_iter().collect();
        assert!(VClock::new().is_at_least(&explicit_zero));
    }
}
