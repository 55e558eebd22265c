//! The node's only source of randomness: a PCG-64 (MCG variant) seeded from
//! the configuration. Named and versioned, so the same seed draws the same
//! timeouts on every platform and release (unlike `StdRng`).

use core::time::Duration;

use rand_core::{Rng, SeedableRng};
use rand_pcg::Pcg64Mcg;

use crate::NodeId;
use crate::time::duration_nanos;

/// Seeded jitter source.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Jitter {
    rng: Pcg64Mcg,
}

/// splitmix64's finalizer: a bijection of `u64` that spreads nearby
/// values (ids that differ in one bit) over the whole range.
pub(crate) fn mix(mut x: u64) -> u64 {
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

impl Jitter {
    /// The node id is mixed into the seed so that nodes configured with the
    /// same seed still draw different timeouts (identical draws would make
    /// simultaneous candidates collide every round).
    pub(crate) fn new(seed: u64, id: NodeId) -> Jitter {
        let mixed = seed ^ id.wrapping_mul(0x9E37_79B9_7F4A_7C15).rotate_left(17);
        Jitter {
            rng: Pcg64Mcg::seed_from_u64(mixed),
        }
    }

    /// 64 random bits.
    pub(crate) fn bits(&mut self) -> u64 {
        self.rng.next_u64()
    }

    /// A duration uniformly drawn from `[0, max]` (nanosecond resolution).
    pub(crate) fn up_to(&mut self, max: Duration) -> Duration {
        let span = duration_nanos(max);
        if span == 0 {
            return Duration::ZERO;
        }
        // Multiply-shift maps 64 random bits onto [0, span] without the
        // modulo bias Tarantool's `rand() % n` has.
        let wide = u128::from(self.rng.next_u64()) * (u128::from(span) + 1);
        Duration::from_nanos((wide >> 64) as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_draws_and_ids_differ() {
        let max = Duration::from_millis(50);
        let mut a = Jitter::new(7, 1);
        let mut b = Jitter::new(7, 1);
        let mut c = Jitter::new(7, 2);
        let da: alloc::vec::Vec<_> = (0..16).map(|_| a.up_to(max)).collect();
        let db: alloc::vec::Vec<_> = (0..16).map(|_| b.up_to(max)).collect();
        let dc: alloc::vec::Vec<_> = (0..16).map(|_| c.up_to(max)).collect();
        assert_eq!(da, db);
        assert_ne!(da, dc);
        assert!(da.iter().all(|d| *d <= max));
    }

    #[test]
    fn zero_bound_draws_zero() {
        let mut j = Jitter::new(1, 1);
        assert_eq!(j.up_to(Duration::ZERO), Duration::ZERO);
    }
}
