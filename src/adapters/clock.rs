//! The clock the drivers read `now` from: one that keeps counting while the
//! host is suspended.
//!
//! Why not `std::time::Instant`: on Linux it is `CLOCK_MONOTONIC`, which
//! stops while the machine is suspended. Strict fencing's lease argument
//! (see [`Node::lease`](crate::Node::lease)) bounds how far two nodes'
//! clocks may drift apart in *rate*; a clock that stops during a suspend
//! drifts without bound. A leader whose host slept through its lease would
//! wake up, read a `now` from before the sleep, and act on a lease that
//! ended long ago, while the others have already elected a new leader.
//! `CLOCK_BOOTTIME` is the same clock as `CLOCK_MONOTONIC` plus the time
//! spent suspended, so the lease check sees the sleep.
//!
//! | platform | source | counts suspend |
//! |---|---|---|
//! | Linux, Android | `CLOCK_BOOTTIME` (through `rustix`) | yes |
//! | macOS, iOS | `std::time::Instant` (`CLOCK_UPTIME_RAW`) | **no** |
//! | Windows | `std::time::Instant` (`QueryPerformanceCounter`) | not promised by std |
//! | FreeBSD, OpenBSD, NetBSD, others | `std::time::Instant` (`CLOCK_MONOTONIC`) | not promised |
//!
//! [`COUNTS_SUSPEND`] says which case this build is. Where it is `false`,
//! strict fencing is sound only on hosts that never suspend: a suspend
//! longer than the lease margin can leave the old leader holding a lease
//! after a new leader was elected. The [`Fence`](crate::Fence) still
//! rejects that leader's writes once storage has seen the new token. No
//! clock in the guest sees a virtual machine paused by its hypervisor
//! unless the hypervisor advances the guest's clocks on resume.
//!
//! Only `now` comes from this clock. The drivers still sleep and time out
//! with std or tokio timers: those only decide when the next tick happens,
//! and a late tick is safe because the lease is checked against `now`.

use crate::Instant;

/// Whether [`SuspendAwareClock`] counts time spent suspended on this
/// platform (`CLOCK_BOOTTIME`, on Linux and Android). See the
/// [module documentation](self) for what the fallback means elsewhere.
pub const COUNTS_SUSPEND: bool = cfg!(any(target_os = "linux", target_os = "android"));

/// Monotonic time for a node, counted from the moment the clock was
/// started, that keeps counting while the host is suspended where the
/// platform allows ([`COUNTS_SUSPEND`]).
///
/// Both drivers feed the engine `now` from one of these; an application
/// with its own loop should too.
///
/// ```
/// use tenure::adapters::clock::SuspendAwareClock;
///
/// let clock = SuspendAwareClock::start();
/// let a = clock.now();
/// assert!(clock.now() >= a);
/// ```
#[derive(Clone, Copy, Debug)]
pub struct SuspendAwareClock {
    epoch: source::Reading,
}

impl SuspendAwareClock {
    /// A clock reading [`Instant::ZERO`] now.
    pub fn start() -> SuspendAwareClock {
        SuspendAwareClock {
            epoch: source::Reading::now(),
        }
    }

    /// Time since [`start`](Self::start), as the engine's [`Instant`].
    pub fn now(&self) -> Instant {
        let elapsed = source::Reading::now().since(self.epoch);
        Instant::from_nanos(u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX))
    }
}

#[cfg(any(target_os = "linux", target_os = "android"))]
mod source {
    use std::time::Duration;

    use rustix::time::{ClockId, clock_gettime};

    /// A `CLOCK_BOOTTIME` reading.
    #[derive(Clone, Copy, Debug)]
    pub(super) struct Reading(Duration);

    impl Reading {
        pub(super) fn now() -> Reading {
            let t = clock_gettime(ClockId::Boottime);
            // The kernel never returns a negative BOOTTIME nor a
            // nanosecond field outside 0..1e9; the fallbacks are unreachable.
            Reading(Duration::new(
                u64::try_from(t.tv_sec).unwrap_or(0),
                u32::try_from(t.tv_nsec).unwrap_or(0),
            ))
        }

        pub(super) fn since(self, earlier: Reading) -> Duration {
            self.0.saturating_sub(earlier.0)
        }
    }
}

#[cfg(not(any(target_os = "linux", target_os = "android")))]
mod source {
    use std::time::Duration;

    /// A `std::time::Instant` reading (may not count suspend: see the
    /// module documentation).
    #[derive(Clone, Copy, Debug)]
    pub(super) struct Reading(std::time::Instant);

    impl Reading {
        pub(super) fn now() -> Reading {
            Reading(std::time::Instant::now())
        }

        pub(super) fn since(self, earlier: Reading) -> Duration {
            self.0.saturating_duration_since(earlier.0)
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn starts_near_zero_never_goes_back_and_advances() {
        let clock = SuspendAwareClock::start();
        let first = clock.now();
        assert!(first < Instant::from_millis(1000), "{first:?}");
        let mut last = first;
        for _ in 0..10_000 {
            let now = clock.now();
            assert!(now >= last, "went back from {last:?} to {now:?}");
            last = now;
        }
        std::thread::sleep(Duration::from_millis(20));
        let later = clock.now();
        assert!(
            later.saturating_duration_since(first) >= Duration::from_millis(20),
            "a 20 ms sleep advanced the clock from {first:?} only to {later:?}"
        );
    }

    /// BOOTTIME is MONOTONIC plus suspend, so over one interval it never
    /// advances less than `std::time::Instant` (read inside that interval).
    #[test]
    fn advances_at_least_as_much_as_std_instant() {
        let clock = SuspendAwareClock::start();
        let std_start = std::time::Instant::now();
        std::thread::sleep(Duration::from_millis(20));
        let std_elapsed = std_start.elapsed();
        let elapsed = clock.now().saturating_duration_since(Instant::ZERO);
        assert!(
            elapsed >= std_elapsed,
            "{elapsed:?} < std's {std_elapsed:?}"
        );
    }
}
