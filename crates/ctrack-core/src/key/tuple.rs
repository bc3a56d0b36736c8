//! Tuples: the addresses and L4 words of one direction, and what a lookup compares.

use super::addr::Addr;
use super::conn_key::{ConnKey, Endpoint, Zone};

/// The addresses and L4 words of one direction. An L4 word is the port (or
/// ICMP identifier) in its high 16 bits, then ICMP type and code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct Tuple<A> {
    /// Source address.
    pub src: A,
    /// Destination address.
    pub dst: A,
    /// Source L4 word.
    pub src_l4: u32,
    /// Destination L4 word.
    pub dst_l4: u32,
}

fn l4_word(e: &Endpoint) -> u32 {
    (u32::from(e.port) << 16) | (u32::from(e.icmp_type) << 8) | u32::from(e.icmp_code)
}

fn endpoint(addr: u128, l4: u32) -> Endpoint {
    Endpoint {
        addr,
        port: (l4 >> 16) as u16,
        icmp_type: (l4 >> 8) as u8,
        icmp_code: l4 as u8,
    }
}

impl<A: Addr> Tuple<A> {
    /// The tuple of `key`.
    #[inline]
    pub fn of(key: &ConnKey) -> Tuple<A> {
        Tuple {
            src: A::from_u128(key.src.addr),
            dst: A::from_u128(key.dst.addr),
            src_l4: l4_word(&key.src),
            dst_l4: l4_word(&key.dst),
        }
    }

    /// The other direction.
    #[inline]
    pub fn reverse(&self) -> Tuple<A> {
        Tuple {
            src: self.dst,
            dst: self.src,
            src_l4: self.dst_l4,
            dst_l4: self.src_l4,
        }
    }

    /// The key of this tuple in `zone`, for protocol `proto`.
    pub fn to_key(&self, zone: Zone, proto: u8) -> ConnKey {
        ConnKey {
            src: endpoint(self.src.to_u128(), self.src_l4),
            dst: endpoint(self.dst.to_u128(), self.dst_l4),
            zone,
            proto,
            family: A::FAMILY,
        }
    }
}

/// What a lookup compares: a tuple in a zone instance.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct LookupKey<A> {
    /// The packet's tuple.
    pub tuple: Tuple<A>,
    /// Zone.
    pub zone: Zone,
    /// IP protocol.
    pub proto: u8,
    /// Generation of the zone (bumped by each flush).
    pub generation: u32,
}
