//! The durable part of a node: its term and its vote in that term.

use crate::NodeId;

/// What a node must persist before anything that depends on it leaves the
/// engine: the current term and the vote cast in it.
///
/// Invariant: a node's persisted term never decreases, and within one term
/// its persisted vote never changes once set. Restart a node from the last
/// `HardState` its storage confirmed; never from a default, which would let
/// it vote twice in a term.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct HardState {
    /// The current term.
    pub term: u64,
    /// The node voted for in `term`, if any.
    pub vote: Option<crate::NodeId>,
}

impl HardState {
    /// A state at `term` with `vote`.
    pub const fn new(term: u64, vote: Option<NodeId>) -> HardState {
        HardState { term, vote }
    }

    /// Whether a durable `self` covers a message that needs `needed` durable:
    /// the same term, and the same vote if the message depends on one.
    pub(crate) fn covers(&self, needed: &HardState) -> bool {
        self.term == needed.term && (needed.vote.is_none() || self.vote == needed.vote)
    }
}
