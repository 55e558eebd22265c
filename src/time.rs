//! Caller-supplied monotonic time.
//!
//! The core never reads a clock. Every entry point takes `now: Instant`, an
//! opaque count of nanoseconds from an epoch the driver chooses (usually the
//! moment the driver started).
//!
//! The clock must keep counting while the machine is suspended (on Linux,
//! `CLOCK_BOOTTIME` rather than `CLOCK_MONOTONIC`): the strict-fencing lease
//! argument bounds how fast clocks may drift apart, and a clock that stops
//! during suspend drifts without bound. The bundled drivers read
//! `tenure::adapters::clock::SuspendAwareClock` (feature `adapters`), which
//! is `CLOCK_BOOTTIME` on Linux and Android; `std::time::Instant` and
//! `tokio::time::Instant` are `CLOCK_MONOTONIC` there and do not count suspend.

use core::fmt;
use core::ops::{Add, Sub};
use core::time::Duration;

/// A point in time: nanoseconds since an epoch chosen by the driver.
///
/// Arithmetic saturates instead of panicking: `Instant::MAX` is "never".
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Instant(u64);

impl Instant {
    /// The driver's epoch.
    pub const ZERO: Instant = Instant(0);
    /// The far future; adding to it saturates here.
    pub const MAX: Instant = Instant(u64::MAX);

    /// An instant `nanos` nanoseconds after the epoch.
    pub const fn from_nanos(nanos: u64) -> Instant {
        Instant(nanos)
    }

    /// An instant `millis` milliseconds after the epoch (saturating).
    pub const fn from_millis(millis: u64) -> Instant {
        Instant(millis.saturating_mul(1_000_000))
    }

    /// Nanoseconds since the epoch.
    pub const fn as_nanos(self) -> u64 {
        self.0
    }

    /// Time elapsed from `earlier` to `self`, or zero if `earlier` is later.
    pub const fn saturating_duration_since(self, earlier: Instant) -> Duration {
        Duration::from_nanos(self.0.saturating_sub(earlier.0))
    }
}

impl Instant {
    /// `self` plus `nanos` nanoseconds, saturating (what `+ Duration` does,
    /// for a duration kept in nanoseconds on a hot path).
    #[inline]
    pub(crate) const fn add_nanos(self, nanos: u64) -> Instant {
        Instant(self.0.saturating_add(nanos))
    }
}

/// Converts a duration to nanoseconds, saturating at `u64::MAX` (~584 years).
#[inline]
pub(crate) fn duration_nanos(d: Duration) -> u64 {
    // In u64 arithmetic (no 128-bit product): this runs on every step.
    d.as_secs()
        .checked_mul(1_000_000_000)
        .and_then(|n| n.checked_add(u64::from(d.subsec_nanos())))
        .unwrap_or(u64::MAX)
}

impl Add<Duration> for Instant {
    type Output = Instant;
    #[inline]
    fn add(self, rhs: Duration) -> Instant {
        Instant(self.0.saturating_add(duration_nanos(rhs)))
    }
}

impl Sub<Duration> for Instant {
    type Output = Instant;
    fn sub(self, rhs: Duration) -> Instant {
        Instant(self.0.saturating_sub(duration_nanos(rhs)))
    }
}

impl fmt::Debug for Instant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Seconds with all nine digits: exact, and traces sort as text.
        write!(
            f,
            "{}.{:09}s",
            self.0 / 1_000_000_000,
            self.0 % 1_000_000_000
        )
    }
}

impl fmt::Display for Instant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arithmetic_saturates_instead_of_panicking() {
        assert_eq!(Instant::MAX + Duration::from_secs(1), Instant::MAX);
        assert_eq!(Instant::ZERO - Duration::from_secs(1), Instant::ZERO);
        assert_eq!(Instant::from_millis(u64::MAX), Instant::MAX);
        assert_eq!(Instant::ZERO + Duration::MAX, Instant::MAX);
    }

    #[test]
    fn duration_since_is_zero_when_earlier_is_later() {
        let a = Instant::from_millis(5);
        let b = Instant::from_millis(7);
        assert_eq!(b.saturating_duration_since(a), Duration::from_millis(2));
        assert_eq!(a.saturating_duration_since(b), Duration::ZERO);
    }
}
