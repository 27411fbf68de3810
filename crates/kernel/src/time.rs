//! Time as blocks see it: nanoseconds since their runtime started. The real
//! runtime reads a monotonic clock; the simulator advances its own, so time
//! is one of the determinism seams.

use std::ops::{Add, Sub};
use std::time::Duration;

/// A point in time, in nanoseconds since the runtime started.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Instant(pub u64);

impl Instant {
    pub const ZERO: Instant = Instant(0);

    pub fn as_nanos(self) -> u64 {
        self.0
    }

    /// Time from `earlier` to `self`; zero if `earlier` is later.
    pub fn saturating_since(self, earlier: Instant) -> Duration {
        Duration::from_nanos(self.0.saturating_sub(earlier.0))
    }
}

impl Add<Duration> for Instant {
    type Output = Instant;
    fn add(self, rhs: Duration) -> Instant {
        let nanos = u64::try_from(rhs.as_nanos()).unwrap_or(u64::MAX);
        Instant(self.0.saturating_add(nanos))
    }
}

impl Sub<Instant> for Instant {
    type Output = Duration;
    fn sub(self, rhs: Instant) -> Duration {
        self.saturating_since(rhs)
    }
}

/// The source of `Instant`s. The real runtime uses [`MonotonicClock`]; the
/// simulator owns its clock and never calls the operating system.
pub trait Clock: Send + Sync {
    fn now(&self) -> Instant;
}

/// The operating system's monotonic clock, counted from this value's creation.
#[derive(Clone, Copy, Debug)]
pub struct MonotonicClock {
    origin: std::time::Instant,
}

impl MonotonicClock {
    pub fn new() -> MonotonicClock {
        MonotonicClock {
            origin: std::time::Instant::now(),
        }
    }

    /// Converts one of this clock's instants back to the operating system's.
    pub fn to_std(&self, instant: Instant) -> std::time::Instant {
        self.origin + Duration::from_nanos(instant.0)
    }
}

impl Default for MonotonicClock {
    fn default() -> Self {
        MonotonicClock::new()
    }
}

impl Clock for MonotonicClock {
    fn now(&self) -> Instant {
        let nanos = self.origin.elapsed().as_nanos();
        Instant(u64::try_from(nanos).unwrap_or(u64::MAX))
    }
}
