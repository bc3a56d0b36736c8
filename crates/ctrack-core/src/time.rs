//! Time as the tracker sees it: a count of milliseconds that the caller
//! supplies with every call. The core never reads a clock.

use core::fmt;
use core::ops::{Add, Sub};

/// A point in time, in milliseconds since an epoch of the caller's choosing
/// (a capture's timestamps, a monotonic clock). Only differences matter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Time(u64);

impl Time {
    /// The epoch.
    pub const ZERO: Time = Time(0);
    /// A time later than any other.
    pub const MAX: Time = Time(u64::MAX);

    /// From milliseconds.
    pub const fn from_millis(ms: u64) -> Time {
        Time(ms)
    }

    /// From seconds.
    pub const fn from_secs(s: u64) -> Time {
        Time(s.saturating_mul(1000))
    }

    /// From nanoseconds (rounded down to the millisecond).
    pub const fn from_nanos(ns: u64) -> Time {
        Time(ns / 1_000_000)
    }

    /// As milliseconds.
    pub const fn as_millis(self) -> u64 {
        self.0
    }

    /// Milliseconds from `earlier` to `self`, or zero if `earlier` is later.
    pub fn millis_since(self, earlier: Time) -> u64 {
        self.0.saturating_sub(earlier.0)
    }
}

/// A span of time in milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Millis(pub u64);

impl Millis {
    /// From whole seconds.
    pub const fn from_secs(s: u32) -> Millis {
        Millis(s as u64 * 1000)
    }
}

impl Add<Millis> for Time {
    type Output = Time;
    fn add(self, d: Millis) -> Time {
        Time(self.0.saturating_add(d.0))
    }
}

impl Sub<Time> for Time {
    type Output = Millis;
    fn sub(self, earlier: Time) -> Millis {
        Millis(self.0.saturating_sub(earlier.0))
    }
}

impl fmt::Display for Time {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{:03}", self.0 / 1000, self.0 % 1000)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arithmetic_saturates() {
        let t = Time::from_secs(10);
        assert_eq!((t + Millis::from_secs(5)).as_millis(), 15_000);
        assert_eq!(Time::MAX + Millis(1), Time::MAX);
        assert_eq!(Time::from_secs(1) - Time::from_secs(2), Millis(0));
        assert_eq!(Time::from_nanos(1_999_999).as_millis(), 1);
        assert_eq!(Time::from_millis(1234).to_string(), "1.234");
    }
}
