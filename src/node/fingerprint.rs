//! The model checker's state identity: a hash of everything that decides a
//! node's future behaviour, built from the state types themselves. Each
//! state type has a `fingerprint` method in the file that owns it, which
//! destructures it exhaustively, so a new field does not compile until it
//! is placed there.

use core::hash::{Hash, Hasher};

use super::Node;
use crate::position::LogPosition;
use crate::time::Instant;

/// FNV-1a: deterministic, unlike std's RandomState.
pub(super) struct Fnv(u64);

impl Hasher for Fnv {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0 ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3);
        }
    }
}

/// Instants seen from `at` (see [`Node::protocol_fingerprint`]).
pub(super) struct Relative {
    at: Instant,
    /// One death timeout, in nanoseconds: older anchors are clamped to it.
    horizon: i128,
}

impl Relative {
    /// Nanoseconds after `at`; 0: expired; `u64::MAX`: never.
    pub(super) fn expiry(&self, t: Instant) -> u64 {
        t.saturating_duration_since(self.at).as_nanos() as u64
    }

    /// An optional expiry that has passed hashes as absent.
    pub(super) fn live(&self, t: Option<Instant>) -> Option<u64> {
        t.filter(|&t| t > self.at).map(|t| self.expiry(t))
    }

    /// Signed nanoseconds from `at`, no earlier than one death timeout ago;
    /// `i128::MAX`: never.
    pub(super) fn anchor(&self, t: Instant) -> i128 {
        if t == Instant::MAX {
            i128::MAX
        } else {
            (i128::from(t.as_nanos()) - i128::from(self.at.as_nanos())).max(-self.horizon)
        }
    }
}

impl<P: LogPosition + Hash> Node<P> {
    /// A hash of everything that decides this node's future behaviour, as
    /// seen at time `at` (the driver's current time; the node's own `now`
    /// if that is later). Model checkers use it to recognise states they
    /// have already explored; it is not stable across versions.
    ///
    /// Instants are hashed **relative to `at`**, because the node only ever
    /// compares instants with each other and with the time it is stepped
    /// at, and adds durations to them: two nodes whose instants differ by
    /// one common shift behave alike, so a model whose clocks grow without
    /// bound still has finitely many states. Two kinds of instants, two
    /// collapses, both exact (they merge only states that behave alike):
    ///
    /// - *Expiries* (deadlines, promises, leases: compared with the current
    ///   time, or combined with `max`/`min` with other expiries): every one
    ///   at or before `at` hashes as "expired", since time never goes back
    ///   and an expired one acts like any other. An optional lease or
    ///   promise that expired hashes as absent: it backs nothing, and
    ///   folding it into a quorum value or a later lease changes nothing.
    /// - *Anchors* (when a leader was heard, a round sent, an
    ///   acknowledgement arrived, leadership began): the node adds at most
    ///   a death timeout to one before comparing it with the time, so an
    ///   anchor older than a death timeout is clamped to exactly one death
    ///   timeout ago, keeping the sign and everything newer.
    ///
    /// Every field is listed (destructured), here and in each state type's
    /// part. Left out on purpose: the logger, `now` (replaced by `at`: a
    /// step before `now` acts at `now`), the peers' acknowledgements while
    /// not leading (only a leader reads them; a leadership starts with none)
    /// and the conflict counter. The PRNG is hashed through the next two
    /// draws of a copy: its state is private, and its draws are all that it
    /// decides.
    #[doc(hidden)]
    pub fn protocol_fingerprint(&self, at: Instant) -> u64 {
        let Node {
            id,
            log: _,
            cfg,
            now,
            durable,
            term,
            vote,
            leader,
            phase,
            gates,
            tracker,
            members,
            rank,
            handover,
            rollback,
            lease_announced,
            // Counters for the status: they decide nothing.
            refusals: _,
        } = self;
        let at = at.max(*now);
        let rel = Relative {
            at,
            horizon: i128::from(cfg.timing.death.as_nanos() as u64),
        };
        let mut h = Fnv(0xcbf2_9ce4_8422_2325);
        (id, cfg).hash(&mut h);
        (durable, term, vote, leader, lease_announced).hash(&mut h);
        phase.fingerprint(&rel, &cfg.timing, &mut h);
        gates.fingerprint(&rel, &mut h);
        tracker.fingerprint(&rel, phase.is_leader(), &mut h);
        members.fingerprint(&mut h);
        rank.fingerprint(&rel, cfg.timing.hand_back_after, &mut h);
        handover.fingerprint(&rel, &mut h);
        rollback.fingerprint(&rel, &mut h);
        h.finish()
    }
}
