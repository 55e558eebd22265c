//! Fencing tokens, leases, and the storage-side [`Fence`].
//!
//! # The write path
//!
//! 1. Before acting as leader (accepting a write, running the singleton
//!    job), ask [`Node::lease(now)`](crate::Node::lease). `None` means "you
//!    may not act as the only leader right now": refuse or redirect.
//! 2. Attach the lease's [`FencingToken`] to the write.
//! 3. The storage that applies writes keeps a [`Fence`] (persisted with the
//!    data it guards) and calls [`Fence::check`] on every write's token. A
//!    token older than one already seen is rejected, so a deposed leader
//!    that was paused past its lease cannot overwrite its successor's work.
//!
//! The lease bounds the window with a clock-drift argument; the token closes
//! the rest (pauses, slow disks, late packets), which no clock can bound.

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

    /// The highest token accepted so far.
    pub fn highest(&self) -> Option<FencingToken> {
        self.highest
    }
}
