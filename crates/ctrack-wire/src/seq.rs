//! TCP sequence numbers: arithmetic and comparison modulo 2^32 (RFC 9293
//! §3.4, RFC 1982's serial number arithmetic with `SERIAL_BITS` = 32).
//!
//! ```
//! use ctrack_wire::SeqNum;
//!
//! let isn = SeqNum(u32::MAX - 1);
//! let next = isn + 5u32; // wraps past zero
//! assert_eq!(next, SeqNum(3));
//! assert!(next.after(isn));
//! assert_eq!(next - isn, 5);
//! assert_eq!(isn - next, -5);
//! assert_eq!(isn.max(next), next);
//! ```

use core::cmp::Ordering;
use core::fmt;
use core::ops::{Add, AddAssign, Sub, SubAssign};

/// A TCP sequence or acknowledgment number: a point on a circle of 2^32
/// byte positions.
///
/// Adding and subtracting wrap. Comparison follows the sign of the wrapped
/// difference: `a` is [after](SeqNum::after) `b` when `a - b`, read as an
/// `i32`, is positive, that is when `a` is 1 to 2^31 − 1 positions ahead of
/// `b`. This is the comparison of pf, Linux (`after()` in `net/tcp.h`) and
/// Open vSwitch; it is meaningful as long as the numbers compared lie within
/// half the circle of each other, which TCP's windows (at most 2^30 bytes)
/// guarantee.
///
/// # Why no `PartialOrd` or `Ord`
///
/// The relation is not an order on the whole circle, and the standard
/// traits' contracts would be broken:
///
/// * it is not transitive: `0` is before `0x6000_0000`, which is before
///   `0xc000_0000`, which is before `0` again;
/// * two numbers exactly 2^31 apart are neither before nor after each other
///   (RFC 1982 leaves that case undefined), and not equal.
///
/// `PartialOrd` allows the second (it may answer `None`) but requires
/// transitivity, and `Ord` requires a total order. Sorting, binary search,
/// `BTreeMap`, `Iterator::max` and the like would then give arbitrary
/// answers, so `SeqNum` implements neither; smoltcp's `TcpSeqNumber`
/// implements `PartialOrd` and lives with that. The comparisons are named
/// methods instead ([`after`](SeqNum::after),
/// [`at_or_after`](SeqNum::at_or_after), [`before`](SeqNum::before),
/// [`at_or_before`](SeqNum::at_or_before), [`compare`](SeqNum::compare)),
/// with the same answers the `as i32` idiom gives, including for numbers
/// 2^31 apart (each predicate is false, `compare` is `None`). Equality is
/// plain equality and is a true equivalence relation, so `Eq` and `Hash` are
/// derived.
///
/// Within any run of numbers spanning less than 2^31 (for example the
/// numbers of one connection's window), the methods do form a total order.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct SeqNum(pub u32);

impl SeqNum {
    /// The signed distance from `other` to `self`: positive if `self` is
    /// after `other`. Numbers 2^31 apart give `i32::MIN`.
    #[inline]
    const fn diff(self, other: SeqNum) -> i32 {
        self.0.wrapping_sub(other.0) as i32
    }

    /// `self` comes after `other`: it is 1 to 2^31 − 1 positions ahead.
    #[inline]
    pub const fn after(self, other: SeqNum) -> bool {
        self.diff(other) > 0
    }

    /// `self` is `other` or comes after it: 0 to 2^31 − 1 positions ahead.
    #[inline]
    pub const fn at_or_after(self, other: SeqNum) -> bool {
        self.diff(other) >= 0
    }

    /// `self` comes before `other`: `other` is after `self`.
    #[inline]
    pub const fn before(self, other: SeqNum) -> bool {
        other.after(self)
    }

    /// `self` is `other` or comes before it.
    #[inline]
    pub const fn at_or_before(self, other: SeqNum) -> bool {
        other.at_or_after(self)
    }

    /// How `self` compares with `other` in sequence space: `None` for
    /// numbers exactly 2^31 apart, which are neither before nor after each
    /// other. Not a `PartialOrd` (see the type's documentation).
    #[inline]
    pub const fn compare(self, other: SeqNum) -> Option<Ordering> {
        match self.diff(other) {
            0 => Some(Ordering::Equal),
            i32::MIN => None,
            d if d > 0 => Some(Ordering::Greater),
            _ => Some(Ordering::Less),
        }
    }

    /// The later of `self` and `other`: `other` if it is after `self`,
    /// `self` otherwise (so `self` when they are equal or 2^31 apart). This
    /// is `if other.after(x) { x = other }` as an expression.
    #[inline]
    #[must_use]
    pub const fn max(self, other: SeqNum) -> SeqNum {
        if other.after(self) { other } else { self }
    }

    /// The earlier of `self` and `other`: `other` if it is before `self`,
    /// `self` otherwise (so `self` when they are equal or 2^31 apart).
    #[inline]
    #[must_use]
    pub const fn min(self, other: SeqNum) -> SeqNum {
        if other.before(self) { other } else { self }
    }
}

impl From<u32> for SeqNum {
    #[inline]
    fn from(n: u32) -> SeqNum {
        SeqNum(n)
    }
}

impl From<SeqNum> for u32 {
    #[inline]
    fn from(n: SeqNum) -> u32 {
        n.0
    }
}

impl fmt::Display for SeqNum {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

/// `seq + n` moves `n` positions forward, wrapping.
impl Add<u32> for SeqNum {
    type Output = SeqNum;
    #[inline]
    fn add(self, n: u32) -> SeqNum {
        SeqNum(self.0.wrapping_add(n))
    }
}

/// `seq + len` moves `len` positions forward, wrapping; `len` is taken
/// modulo 2^32, as sequence space is (a segment's length always fits).
impl Add<usize> for SeqNum {
    type Output = SeqNum;
    #[inline]
    fn add(self, n: usize) -> SeqNum {
        SeqNum(self.0.wrapping_add(n as u32))
    }
}

/// `seq + off` moves `off` positions, backwards if it is negative (an
/// offset such as a sequence adjustment).
impl Add<i32> for SeqNum {
    type Output = SeqNum;
    #[inline]
    fn add(self, off: i32) -> SeqNum {
        SeqNum(self.0.wrapping_add_signed(off))
    }
}

/// `seq - n` moves `n` positions back, wrapping.
impl Sub<u32> for SeqNum {
    type Output = SeqNum;
    #[inline]
    fn sub(self, n: u32) -> SeqNum {
        SeqNum(self.0.wrapping_sub(n))
    }
}

/// `seq - len` moves `len` positions back, wrapping; `len` is taken modulo
/// 2^32.
impl Sub<usize> for SeqNum {
    type Output = SeqNum;
    #[inline]
    fn sub(self, n: usize) -> SeqNum {
        SeqNum(self.0.wrapping_sub(n as u32))
    }
}

/// `seq - off` moves `off` positions back (forward if it is negative).
impl Sub<i32> for SeqNum {
    type Output = SeqNum;
    #[inline]
    fn sub(self, off: i32) -> SeqNum {
        SeqNum(self.0.wrapping_sub(off as u32))
    }
}

/// `a - b` is the signed distance from `b` to `a`: positive when `a` is
/// after `b`, so `b + (a - b) == a` always. Numbers exactly 2^31 apart give
/// `i32::MIN` (either way round).
impl Sub<SeqNum> for SeqNum {
    type Output = i32;
    #[inline]
    fn sub(self, other: SeqNum) -> i32 {
        self.diff(other)
    }
}

macro_rules! assign_ops {
    ($($t:ty),*) => {$(
        impl AddAssign<$t> for SeqNum {
            #[inline]
            fn add_assign(&mut self, n: $t) {
                *self = *self + n;
            }
        }
        impl SubAssign<$t> for SeqNum {
            #[inline]
            fn sub_assign(&mut self, n: $t) {
                *self = *self - n;
            }
        }
    )*};
}
assign_ops!(u32, usize, i32);

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const HALF: u32 = 1 << 31;

    /// ctrack-core's current comparisons, which `SeqNum` must reproduce.
    fn core_after(a: u32, b: u32) -> bool {
        (a.wrapping_sub(b) as i32) > 0
    }
    fn core_geq(a: u32, b: u32) -> bool {
        (a.wrapping_sub(b) as i32) >= 0
    }

    #[test]
    fn wraps_around_zero() {
        let top = SeqNum(u32::MAX);
        assert_eq!(top + 1u32, SeqNum(0));
        // An untyped literal is an `i32` offset.
        assert_eq!(top + 1, SeqNum(0));
        assert_eq!(SeqNum(0) - 1, top);
        assert_eq!(SeqNum(0) - 1u32, top);
        assert!(SeqNum(0).after(top));
        assert!(top.before(SeqNum(0)));
        assert_eq!(SeqNum(0) - top, 1);
        assert_eq!(top - SeqNum(0), -1);
        assert_eq!(SeqNum(10) + (-20i32), SeqNum(u32::MAX - 9));
        assert_eq!(SeqNum(10) - (-20i32), SeqNum(30));
        assert_eq!(SeqNum(u32::MAX - 1) + 3usize, SeqNum(1));
        assert_eq!(SeqNum(1) - 3usize, SeqNum(u32::MAX - 1));
        // A length past 2^32 wraps too.
        assert_eq!(SeqNum(5) + (1usize << 32 | 2), SeqNum(7));
        let mut s = SeqNum(u32::MAX);
        s += 2u32;
        s += 1usize;
        s -= 1i32;
        assert_eq!(s, SeqNum(1));
        s -= 2u32;
        s -= 1usize;
        s += -1i32;
        assert_eq!(s, SeqNum(u32::MAX - 2));
    }

    #[test]
    fn half_the_circle_apart_is_incomparable() {
        let a = SeqNum(7);
        let b = a + HALF;
        for (x, y) in [(a, b), (b, a)] {
            assert!(!x.after(y) && !x.before(y));
            assert!(!x.at_or_after(y) && !x.at_or_before(y));
            assert_eq!(x.compare(y), None);
            assert_eq!(x - y, i32::MIN);
            // max and min keep the receiver.
            assert_eq!(x.max(y), x);
            assert_eq!(x.min(y), x);
        }
        // One short of half: comparable.
        assert!((a + (HALF - 1)).after(a));
        assert!((a + (HALF + 1)).before(a));
    }

    #[test]
    fn not_transitive_across_the_circle() {
        // The reason for not implementing PartialOrd.
        let (a, b, c) = (SeqNum(0), SeqNum(0x6000_0000), SeqNum(0xc000_0000));
        assert!(a.before(b) && b.before(c) && c.before(a));
    }

    #[test]
    fn max_min_and_equal() {
        let a = SeqNum(u32::MAX - 5);
        let b = SeqNum(10);
        assert_eq!(a.max(b), b);
        assert_eq!(b.max(a), b);
        assert_eq!(a.min(b), a);
        assert_eq!(b.min(a), a);
        assert_eq!(a.max(a), a);
        assert!(a.at_or_after(a) && a.at_or_before(a));
        assert!(!a.after(a) && !a.before(a));
        assert_eq!(a.compare(a), Some(Ordering::Equal));
        assert_eq!(b.compare(a), Some(Ordering::Greater));
        assert_eq!(a.compare(b), Some(Ordering::Less));
        assert_eq!(u32::from(SeqNum::from(42)), 42);
        assert_eq!(SeqNum(42).to_string(), "42");
    }

    /// A number near the wrap point or anywhere.
    fn seq() -> impl Strategy<Value = u32> {
        prop_oneof![
            any::<u32>(),
            (0u32..64).prop_map(|d| d.wrapping_sub(32)),
            (0u32..64).prop_map(|d| HALF.wrapping_add(d).wrapping_sub(32)),
        ]
    }

    proptest! {
        #[test]
        fn same_answers_as_the_i32_idiom(a in seq(), b in seq()) {
            let (x, y) = (SeqNum(a), SeqNum(b));
            prop_assert_eq!(x.after(y), core_after(a, b));
            prop_assert_eq!(x.at_or_after(y), core_geq(a, b));
            prop_assert_eq!(x.before(y), core_after(b, a));
            prop_assert_eq!(x.at_or_before(y), core_geq(b, a));
            prop_assert_eq!(x - y, a.wrapping_sub(b) as i32);
        }

        #[test]
        fn compare_agrees_with_the_predicates(a in seq(), b in seq()) {
            let (x, y) = (SeqNum(a), SeqNum(b));
            let c = x.compare(y);
            prop_assert_eq!(c == Some(Ordering::Greater), x.after(y));
            prop_assert_eq!(c == Some(Ordering::Less), x.before(y));
            prop_assert_eq!(c == Some(Ordering::Equal), x == y);
            prop_assert_eq!(matches!(c, Some(Ordering::Greater | Ordering::Equal)), x.at_or_after(y));
            prop_assert_eq!(matches!(c, Some(Ordering::Less | Ordering::Equal)), x.at_or_before(y));
            // Antisymmetric, and exactly one answer.
            prop_assert!(!(x.after(y) && y.after(x)));
            prop_assert_eq!(y.compare(x), c.map(Ordering::reverse));
            prop_assert_eq!(c.is_none(), a.wrapping_sub(b) == HALF);
        }

        #[test]
        fn distance_round_trips(a in seq(), d in any::<i32>()) {
            let x = SeqNum(a);
            prop_assert_eq!((x + d) - x, d);
            prop_assert_eq!(x + (x + d - x), x + d);
            prop_assert_eq!((x + d) - d, x);
            prop_assert_eq!(x - d, x + d.wrapping_neg());
            prop_assert_eq!(x + (d as u32), x + d);
            prop_assert_eq!(x + (d as u32 as usize), x + d);
            prop_assert_eq!(x - (d as u32), x - d);
            prop_assert_eq!(x - (d as u32 as usize), x - d);
        }

        #[test]
        fn moving_forward_is_after(a in seq(), n in 1u32..HALF) {
            let x = SeqNum(a);
            prop_assert!((x + n).after(x));
            prop_assert!((x - n).before(x));
            prop_assert_eq!(x.max(x + n), x + n);
            prop_assert_eq!((x + n).max(x), x + n);
            prop_assert_eq!(x.min(x + n), x);
            prop_assert_eq!((x + n).min(x), x);
        }

        #[test]
        fn transitive_within_half_the_circle(a in seq(), d1 in 0u32..HALF / 2, d2 in 0u32..HALF / 2) {
            // a <= b <= c, all within 2^31 - 1 of each other.
            let (x, y, z) = (SeqNum(a), SeqNum(a) + d1, SeqNum(a) + d1 + d2);
            prop_assert!(x.at_or_before(y) && y.at_or_before(z) && x.at_or_before(z));
            prop_assert_eq!(x.before(z), d1 + d2 > 0);
            prop_assert_eq!(x.max(y).max(z), z);
            prop_assert_eq!(z.min(y).min(x), x);
        }

        #[test]
        fn max_is_the_core_update_pattern(a in seq(), b in seq()) {
            // `if seq_gt(end, seqlo) { seqlo = end }` in ctrack-core.
            let mut lo = a;
            if core_after(b, lo) {
                lo = b;
            }
            prop_assert_eq!(SeqNum(a).max(SeqNum(b)), SeqNum(lo));
        }
    }
}
