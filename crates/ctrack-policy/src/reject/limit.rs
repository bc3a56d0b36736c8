//! A token bucket bounding how many reject answers go out, on the caller's
//! clock.

use ctrack_core::time::Time;

/// Answers allowed per second by default.
///
/// OVN meters what its reject action sends to the controller through a
/// CoPP meter (`Logical_Switch.copp`, key `reject`) that is unset, so
/// unlimited, unless the operator configures one. An answer is a packet
/// ctrack makes for a packet an attacker can send at line rate, so an
/// unlimited default would make ctrack an amplifier; the default is the
/// one Linux gives every ICMP error it sends (`net.ipv4.icmp_msgs_per_sec`
/// = 1000, `net.ipv4.icmp_msgs_burst` = 50): rejected peers still learn
/// quickly that they are refused, and a flood earns at most 1000 answers a
/// second.
pub const DEFAULT_RATE: u32 = 1000;

/// Answers allowed in a burst by default (see [`DEFAULT_RATE`]).
pub const DEFAULT_BURST: u32 = 50;

/// Milli-tokens per token: the bucket counts thousandths of a token so
/// that a rate in tokens per second refills exactly per millisecond, the
/// unit of [`Time`].
const MILLI: u64 = 1000;

/// A token bucket: holds up to `burst` tokens, starts full, and gains
/// `per_second` tokens a second of the caller's clock. Each answer takes
/// one.
///
/// Time is ctrack's [`Time`] (milliseconds), the clock the tracker runs
/// on; the bucket refills exactly at that resolution (it counts
/// thousandths of a token). A clock that goes back gives no tokens, and
/// none until it passes again the latest time the bucket saw (a bucket
/// that took the earlier time as its reference would gain the interval
/// again each time the clock went back and forth). Any jump forward,
/// however large, at most fills the bucket.
///
/// One thread's: the firewall's limit on answers, which all its workers
/// share, is a [`crate::meter::Limit`].
#[derive(Debug, Clone)]
pub struct RateLimiter {
    /// Thousandths of a token gained per millisecond (= tokens per second).
    per_ms: u64,
    /// The most the bucket holds, in thousandths of a token: `burst` tokens
    /// and, so that a slow rate loses no thousandths while the bucket is
    /// full, up to 999 thousandths more (never a whole further token).
    ceiling: u64,
    /// Thousandths of a token in the bucket.
    level: u64,
    /// When the bucket was last refilled.
    last: Time,
    /// Answers refused.
    dropped: u64,
}

impl RateLimiter {
    /// A bucket of `burst` tokens, full, refilled at `per_second` tokens a
    /// second. A `burst` of 0 refuses everything; a `per_second` of 0
    /// allows `burst` answers in all.
    pub fn new(per_second: u32, burst: u32) -> RateLimiter {
        let full = u64::from(burst) * MILLI;
        RateLimiter {
            per_ms: u64::from(per_second),
            ceiling: if burst == 0 { 0 } else { full + MILLI - 1 },
            level: full,
            last: Time::ZERO,
            dropped: 0,
        }
    }

    /// Takes a token at time `now` if one is left; returns whether it did.
    pub fn allow(&mut self, now: Time) -> bool {
        let elapsed = now.millis_since(self.last);
        self.last = self.last.max(now);
        let room = self.ceiling.saturating_sub(self.level);
        self.level += elapsed.saturating_mul(self.per_ms).min(room);
        if self.level >= MILLI {
            self.level -= MILLI;
            true
        } else {
            self.dropped = self.dropped.saturating_add(1);
            false
        }
    }

    /// How many answers [`allow`](RateLimiter::allow) refused.
    pub fn dropped(&self) -> u64 {
        self.dropped
    }
}

impl Default for RateLimiter {
    /// [`DEFAULT_RATE`] and [`DEFAULT_BURST`].
    fn default() -> RateLimiter {
        RateLimiter::new(DEFAULT_RATE, DEFAULT_BURST)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(t: u64) -> Time {
        Time::from_millis(t)
    }

    fn allowed(l: &mut RateLimiter, now: Time, tries: u32) -> u32 {
        (0..tries).map(|_| u32::from(l.allow(now))).sum()
    }

    #[test]
    fn burst_then_refill() {
        let mut l = RateLimiter::new(1000, 100);
        assert_eq!(allowed(&mut l, ms(0), 150), 100);
        assert_eq!(l.dropped(), 50);
        // 1000/s is one a millisecond.
        assert_eq!(allowed(&mut l, ms(1), 5), 1);
        assert_eq!(allowed(&mut l, ms(11), 20), 10);
        // A long pause fills the bucket, no more.
        assert_eq!(allowed(&mut l, ms(60_000), 500), 100);
        assert_eq!(l.dropped(), 50 + 4 + 10 + 400);
    }

    #[test]
    fn slow_rates_accumulate_fractions() {
        // 3 a second: one every 333.3 ms, without losing the thousandths.
        let mut l = RateLimiter::new(3, 1);
        assert!(l.allow(ms(0)));
        assert!(!l.allow(ms(333)));
        assert!(l.allow(ms(334)));
        let mut got = 0;
        for t in 335..=10_334 {
            got += u32::from(l.allow(ms(t)));
        }
        assert_eq!(got, 30);
    }

    #[test]
    fn zero_rate_and_zero_burst() {
        let mut l = RateLimiter::new(0, 2);
        assert_eq!(allowed(&mut l, ms(0), 5), 2);
        assert_eq!(allowed(&mut l, Time::MAX, 5), 0);
        let mut l = RateLimiter::new(1000, 0);
        assert_eq!(allowed(&mut l, ms(0), 3), 0);
        assert_eq!(allowed(&mut l, ms(1_000_000), 3), 0);
        assert_eq!(l.dropped(), 6);
    }

    #[test]
    fn huge_jumps_and_time_going_back() {
        let mut l = RateLimiter::new(u32::MAX, u32::MAX);
        assert!(l.allow(Time::MAX));
        assert!(l.allow(ms(0)));
        let mut l = RateLimiter::new(10, 2);
        assert_eq!(allowed(&mut l, ms(5_000), 3), 2);
        // Back in time: nothing gained, nor on the way forward again
        // until the latest time is passed...
        assert_eq!(allowed(&mut l, ms(1_000), 2), 0);
        assert_eq!(allowed(&mut l, ms(4_999), 2), 0);
        assert_eq!(allowed(&mut l, ms(5_000), 2), 0);
        // ...then the refill counts from it.
        assert_eq!(allowed(&mut l, ms(5_100), 2), 1);
        // Two clocks that alternate, one a millisecond behind, up to
        // 5,699 ms: what one clock would give over those 599 ms (5.99
        // tokens and the 0.999 left at 5,100), no more.
        let n: u32 = (0..1000)
            .map(|i| allowed(&mut l, ms(5_200 + i / 2 - (i % 2)), 1))
            .sum();
        assert_eq!(n, 6);
        assert_eq!(allowed(&mut l, Time::MAX, 5), 2);
        assert_eq!(allowed(&mut l, ms(0), 1), 0);
        assert_eq!(l.dropped(), 1 + 2 + 2 + 2 + 1 + 994 + 3 + 1);
    }

    #[test]
    fn defaults() {
        let mut l = RateLimiter::default();
        assert_eq!(allowed(&mut l, ms(7), 1000), DEFAULT_BURST);
        assert_eq!(
            allowed(&mut l, ms(1007), 10_000),
            DEFAULT_RATE.min(DEFAULT_BURST)
        );
    }
}
