//! Addresses as a connection stores them: `u32` for IPv4, [`V6`] for IPv6.

use core::fmt;
use core::hash::Hasher;
use std::net::{Ipv4Addr, Ipv6Addr};

use super::conn_key::Family;

/// An address as a connection stores it: `u32` for IPv4, [`V6`] for IPv6.
pub trait Addr:
    Copy + Eq + Ord + Default + Send + Sync + fmt::Debug + core::hash::Hash + 'static
{
    /// The family.
    const FAMILY: Family;
    /// From the 128-bit form of [`Endpoint::addr`](crate::key::Endpoint::addr).
    fn from_u128(a: u128) -> Self;
    /// To the 128-bit form of [`Endpoint::addr`](crate::key::Endpoint::addr).
    fn to_u128(self) -> u128;
    /// Feeds the address and an L4 word to a hasher.
    fn hash_with(self, l4: u32, h: &mut impl Hasher);
    /// Feeds two endpoints (address, L4 word) to a hasher in a fixed
    /// order, the smaller first, whichever is given first.
    #[inline]
    fn hash_endpoints(a: (Self, u32), b: (Self, u32), h: &mut impl Hasher) {
        let (a, b) = if a <= b { (a, b) } else { (b, a) };
        a.0.hash_with(a.1, h);
        b.0.hash_with(b.1, h);
    }
}

impl Addr for u32 {
    const FAMILY: Family = Family::V4;
    #[inline]
    fn from_u128(a: u128) -> Self {
        a as u32
    }
    #[inline]
    fn to_u128(self) -> u128 {
        u128::from(self)
    }
    #[inline]
    fn hash_with(self, l4: u32, h: &mut impl Hasher) {
        h.write_u64((u64::from(self) << 32) | u64::from(l4));
    }
    /// The default's order and words, as one comparison of the two words
    /// [`Addr::hash_with`] hashes (ordered as the pairs are): the pairs'
    /// comparison took about 20 instructions a packet (callgrind, `bench
    /// policy stage`).
    #[inline]
    fn hash_endpoints(a: (Self, u32), b: (Self, u32), h: &mut impl Hasher) {
        let word = |(addr, l4): (u32, u32)| (u64::from(addr) << 32) | u64::from(l4);
        let (x, y) = (word(a), word(b));
        let (lo, hi) = if x <= y { (x, y) } else { (y, x) };
        h.write_u64(lo);
        h.write_u64(hi);
    }
}

/// An IPv6 address as four 32-bit words (4-byte aligned, so that a
/// connection needs no 16-byte alignment).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default, Hash)]
pub struct V6(pub [u32; 4]);

impl Addr for V6 {
    const FAMILY: Family = Family::V6;
    #[inline]
    fn from_u128(a: u128) -> Self {
        V6([
            (a >> 96) as u32,
            (a >> 64) as u32,
            (a >> 32) as u32,
            a as u32,
        ])
    }
    #[inline]
    fn to_u128(self) -> u128 {
        let [a, b, c, d] = self.0;
        (u128::from(a) << 96) | (u128::from(b) << 64) | (u128::from(c) << 32) | u128::from(d)
    }
    #[inline]
    fn hash_with(self, l4: u32, h: &mut impl Hasher) {
        h.write_u128(self.to_u128());
        h.write_u32(l4);
    }
}

/// Display helper for addresses in tests and debugging.
pub fn ip_of<A: Addr>(a: A) -> std::net::IpAddr {
    match A::FAMILY {
        Family::V4 => Ipv4Addr::from(a.to_u128() as u32).into(),
        Family::V6 => Ipv6Addr::from(a.to_u128()).into(),
    }
}
