//! Fencing tokens, leases, and the storage-side [`Fence`].
//!
//! The write path they serve is in the crate docs (section "Fencing").

use crate::NodeId;
use crate::time::Instant;

/// Identifies one leadership: the term and the leader that won it. Ordered
/// by term, then leader id; a later leadership always has a larger token
/// (terms only grow and each term has at most one leader).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct FencingToken {
    /// The term of the leadership.
    pub term: u64,
    /// The leader.
    pub leader: NodeId,
}

impl FencingToken {
    /// The token as one integer, for stores that keep a single number per
    /// guarded object (a version column, a ZooKeeper-style epoch, an etcd
    /// revision check): the term.
    ///
    /// The term alone identifies the leadership because the engine elects
    /// at most one leader per term (rule `one_leader_per_term`: a quorum
    /// of durable votes, each voter voting once per term). Compare it the
    /// way [`Fence::check`] compares tokens: accept a write whose number is
    /// at least the highest seen, reject a smaller one. Two writes with the
    /// same number come from the same leadership.
    #[must_use]
    pub const fn as_u64(self) -> u64 {
        self.term
    }

    /// The token as one 128-bit integer, ordered exactly as the token
    /// (term in the high 64 bits, leader id in the low): for stores with
    /// 128-bit numbers that also want the leader id back
    /// ([`FencingToken::from_u128`]).
    #[must_use]
    pub const fn as_u128(self) -> u128 {
        ((self.term as u128) << 64) | self.leader as u128
    }

    /// The token [`FencingToken::as_u128`] encoded.
    #[must_use]
    pub const fn from_u128(value: u128) -> FencingToken {
        FencingToken {
            term: (value >> 64) as u64,
            leader: value as u64,
        }
    }
}

/// Proof that this node may act as the only leader until `valid_until`
/// (on this node's clock).
///
/// Only [`Node::lease`](crate::Node::lease) makes one: the struct is
/// `#[non_exhaustive]`, so code outside the crate can read its fields but
/// not build one. (With feature `serde` a lease can be deserialized, e.g.
/// from a log; such a copy records a lease, it proves nothing now.)
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct Lease {
    /// The token to attach to writes made under this lease.
    pub token: FencingToken,
    /// Local instant at which the lease ends.
    pub valid_until: Instant,
}

impl Lease {
    /// A lease no node granted, for checker tests that must show a bogus
    /// lease is caught. Not for production use.
    #[cfg(feature = "sim")]
    #[doc(hidden)]
    #[must_use]
    pub fn forged(token: FencingToken, valid_until: Instant) -> Lease {
        Lease { token, valid_until }
    }
}

/// A write carried a token older than one the fence has already accepted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("stale fencing token {presented:?}: {highest:?} was already accepted")]
pub struct StaleToken {
    /// The token the write carried.
    pub presented: FencingToken,
    /// The highest token accepted so far.
    pub highest: FencingToken,
}

/// Whether a node in `term` that knows `leader` for it may take a write
/// under `token` (see [`Node::admits`](crate::Node::admits)).
pub(crate) fn admits(term: u64, leader: Option<NodeId>, token: FencingToken) -> bool {
    token.term > term || (token.term == term && leader.is_none_or(|l| l == token.leader))
}

/// Why a replica refused a write ([`Fence::admit`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum WriteRefused {
    /// A newer leadership already wrote here.
    #[error(transparent)]
    Stale(StaleToken),
    /// This replica's node is in a later term than the token's: it may
    /// have voted for a newer leader that has not written here yet.
    #[error("fencing token {presented:?} is of term {}, but this replica is in term {term}", presented.term)]
    TermPassed {
        /// The token the write carried.
        presented: FencingToken,
        /// The replica's node's current term.
        term: u64,
    },
}

/// The storage side of fencing: remembers the highest token seen, accepts
/// equal or higher tokens, rejects lower ones. Persist it atomically with
/// the data it guards.
///
/// ```
/// use tenure::{Fence, FencingToken};
///
/// let mut fence = Fence::new();
/// let old = FencingToken { term: 3, leader: 1 };
/// let new = FencingToken { term: 4, leader: 2 };
/// assert!(fence.check(old).is_ok()); // the term-3 leader writes
/// assert!(fence.check(new).is_ok()); // its successor writes
/// assert!(fence.check(old).is_err()); // a late write of the deposed leader
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Fence {
    highest: Option<FencingToken>,
}

impl Fence {
    /// A fence that has seen no token.
    pub const fn new() -> Fence {
        Fence { highest: None }
    }

    /// Accepts `token` if it is at least the highest seen (remembering it),
    /// rejects it otherwise.
    ///
    /// # Errors
    /// [`StaleToken`] when a higher token was already accepted.
    pub fn check(&mut self, token: FencingToken) -> Result<(), StaleToken> {
        match self.highest {
            Some(highest) if token < highest => Err(StaleToken {
                presented: token,
                highest,
            }),
            _ => {
                self.highest = Some(token);
                Ok(())
            }
        }
    }

    /// The replica-side check: refuses `token` if its term is older than
    /// `replica_term` (the current term of the node beside this replica,
    /// [`Status::term`](crate::Status::term)), else as [`Fence::check`].
    ///
    /// Invariant kept: a replica never takes a write from a leadership
    /// older than a term it may have voted in, so a write a deposed leader
    /// sends late cannot become held by a quorum behind the new leader's
    /// back.
    ///
    /// ```
    /// use tenure::{Fence, FencingToken, WriteRefused};
    ///
    /// let mut replica = Fence::new();
    /// let old = FencingToken { term: 1, leader: 1 };
    /// assert!(replica.admit(old, 1).is_ok()); // the term-1 leader replicates
    /// // The replica votes in term 2; the new leader has not written yet.
    /// let late = replica.admit(old, 2);
    /// assert!(matches!(late, Err(WriteRefused::TermPassed { term: 2, .. })));
    /// // The plain check would still take it: no term-2 token seen yet.
    /// assert!(replica.clone().check(old).is_ok());
    /// # Ok::<(), WriteRefused>(())
    /// ```
    ///
    /// # Errors
    /// [`WriteRefused::TermPassed`] when `token.term < replica_term`;
    /// [`WriteRefused::Stale`] when a higher token was already accepted.
    pub fn admit(&mut self, token: FencingToken, replica_term: u64) -> Result<(), WriteRefused> {
        if token.term < replica_term {
            return Err(WriteRefused::TermPassed {
                presented: token,
                term: replica_term,
            });
        }
        self.check(token).map_err(WriteRefused::Stale)
    }

    /// The highest token accepted so far.
    pub fn highest(&self) -> Option<FencingToken> {
        self.highest
    }
}
