//! Connection keys: (zone, L3 addresses, L4 ports or ICMP id/type/code,
//! protocol), and the keyed hash that finds a connection from either
//! direction.

use core::fmt;
use core::hash::{BuildHasher, Hasher};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use ctrack_wire::{IpVersion, ip_proto};

use crate::conn::{Addr, Tuple, V6};

/// The zone a connection lives in. Zones are separate tables: the same
/// addresses and ports in two zones are two connections.
pub type Zone = u16;

/// IPv4 or IPv6.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "lowercase"))]
pub enum Family {
    /// IPv4.
    #[default]
    V4,
    /// IPv6.
    V6,
}

impl From<IpVersion> for Family {
    fn from(v: IpVersion) -> Family {
        match v {
            IpVersion::V4 => Family::V4,
            IpVersion::V6 => Family::V6,
        }
    }
}

/// One side of a connection.
///
/// The address is held as a 128-bit number: an IPv6 address, or an IPv4
/// address in the low 32 bits. For TCP, UDP, UDP-Lite and SCTP `port` is the
/// port; for ICMP and ICMPv6 queries it is the identifier and `icmp_type` /
/// `icmp_code` are set as Open vSwitch sets them (the source side holds the
/// packet's type, the destination side the type of the matching reply, so
/// that reversing the key gives the key of the reply). Other protocols use
/// the address alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Endpoint {
    /// Address (see the type's documentation).
    pub addr: u128,
    /// Port, or ICMP identifier.
    pub port: u16,
    /// ICMP type (0 for other protocols).
    pub icmp_type: u8,
    /// ICMP code (0 for other protocols).
    pub icmp_code: u8,
}

impl Endpoint {
    /// An endpoint with an IPv4 address and a port.
    pub fn v4(addr: Ipv4Addr, port: u16) -> Endpoint {
        Endpoint {
            addr: u128::from(u32::from(addr)),
            port,
            ..Endpoint::default()
        }
    }

    /// An endpoint with an IPv6 address and a port.
    pub fn v6(addr: Ipv6Addr, port: u16) -> Endpoint {
        Endpoint {
            addr: u128::from(addr),
            port,
            ..Endpoint::default()
        }
    }

    /// The address as a standard-library address of `family`.
    pub fn ip(&self, family: Family) -> IpAddr {
        match family {
            Family::V4 => IpAddr::V4(Ipv4Addr::from(self.addr as u32)),
            Family::V6 => IpAddr::V6(Ipv6Addr::from(self.addr)),
        }
    }

    /// The address from its wire bytes.
    pub fn addr_from_v4(bytes: [u8; 4]) -> u128 {
        u128::from(u32::from_be_bytes(bytes))
    }

    /// The address from its wire bytes.
    pub fn addr_from_v6(bytes: [u8; 16]) -> u128 {
        u128::from_be_bytes(bytes)
    }
}

/// The key of one direction of a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct ConnKey {
    /// Sender side.
    pub src: Endpoint,
    /// Receiver side.
    pub dst: Endpoint,
    /// Zone.
    pub zone: Zone,
    /// IP protocol number.
    pub proto: u8,
    /// Address family.
    pub family: Family,
}

impl ConnKey {
    /// The key of the other direction.
    #[inline]
    pub fn reverse(&self) -> ConnKey {
        ConnKey {
            src: self.dst,
            dst: self.src,
            ..*self
        }
    }

    /// True for ICMP and ICMPv6 keys, whose L4 part is an id and types.
    pub fn is_icmp(&self) -> bool {
        matches!(
            (self.family, self.proto),
            (Family::V4, ip_proto::ICMP) | (Family::V6, ip_proto::ICMPV6)
        )
    }

    /// Source address.
    pub fn src_ip(&self) -> IpAddr {
        self.src.ip(self.family)
    }

    /// Destination address.
    pub fn dst_ip(&self) -> IpAddr {
        self.dst.ip(self.family)
    }
}

impl fmt::Display for ConnKey {
    /// `src=10.0.0.1,dst=10.0.0.2,sport=1,dport=2`, or
    /// `...,id=7,type=8,code=0` for ICMP: the tuple format of
    /// `ovs-appctl dpctl/dump-conntrack`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "src={},dst={}", self.src_ip(), self.dst_ip())?;
        if self.is_icmp() {
            write!(
                f,
                ",id={},type={},code={}",
                self.src.port, self.src.icmp_type, self.src.icmp_code
            )
        } else {
            write!(f, ",sport={},dport={}", self.src.port, self.dst.port)
        }
    }
}

/// The keyed hash of connection keys.
///
/// The hash is symmetric: a key and its reverse hash alike, so one index
/// entry finds a connection from both directions (as in Open vSwitch).
/// Unlike Open vSwitch's XOR of the two endpoint hashes, the two endpoints
/// are put in a canonical order and hashed together, so an endpoint talking
/// to itself does not cancel out to a constant. The hasher is seeded at
/// random per tracker, so an attacker cannot choose colliding keys offline.
#[derive(Debug, Clone)]
pub struct KeyHasher {
    state: foldhash::fast::SeedableRandomState,
}

impl Default for KeyHasher {
    fn default() -> Self {
        Self::new()
    }
}

impl KeyHasher {
    /// A hasher with a random seed.
    pub fn new() -> KeyHasher {
        KeyHasher {
            state: foldhash::fast::SeedableRandomState::random(),
        }
    }

    /// A hasher with a fixed seed (tests and reproducible benchmarks only).
    pub fn with_seed(seed: u64) -> KeyHasher {
        KeyHasher {
            state: foldhash::fast::SeedableRandomState::with_seed(
                seed,
                foldhash::SharedSeed::global_fixed(),
            ),
        }
    }

    /// The hash of a tuple in a zone instance, equal to the hash of its
    /// reverse.
    #[inline]
    pub fn hash_tuple<A: Addr>(&self, zone: Zone, generation: u32, proto: u8, t: &Tuple<A>) -> u64 {
        let ((a, al4), (b, bl4)) = t.canonical();
        let mut h = self.state.build_hasher();
        a.hash_with(al4, &mut h);
        b.hash_with(bl4, &mut h);
        h.write_u64(
            (u64::from(generation) << 32)
                | (u64::from(zone) << 16)
                | (u64::from(proto) << 8)
                | A::FAMILY as u64,
        );
        h.finish()
    }

    /// A keyed mix of one number (pseudo-random numbers from a counter).
    pub(crate) fn mix(&self, v: u64) -> u64 {
        let mut h = self.state.build_hasher();
        h.write_u64(v);
        h.finish()
    }

    /// The hash of `key` in generation 0 of its zone, equal to the hash of
    /// `key.reverse()`.
    pub fn hash(&self, key: &ConnKey) -> u64 {
        match key.family {
            Family::V4 => self.hash_tuple(key.zone, 0, key.proto, &Tuple::<u32>::of(key)),
            Family::V6 => self.hash_tuple(key.zone, 0, key.proto, &Tuple::<V6>::of(key)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> ConnKey {
        ConnKey {
            src: Endpoint::v4(Ipv4Addr::new(10, 0, 0, 1), 40000),
            dst: Endpoint::v4(Ipv4Addr::new(10, 0, 0, 2), 80),
            zone: 3,
            proto: ip_proto::TCP,
            family: Family::V4,
        }
    }

    #[test]
    fn reverse_and_display() {
        let k = key();
        assert_eq!(k.reverse().reverse(), k);
        assert_eq!(
            k.to_string(),
            "src=10.0.0.1,dst=10.0.0.2,sport=40000,dport=80"
        );
        let mut icmp = k;
        icmp.proto = ip_proto::ICMP;
        icmp.src.port = 7;
        icmp.dst.port = 7;
        icmp.src.icmp_type = 8;
        assert_eq!(
            icmp.to_string(),
            "src=10.0.0.1,dst=10.0.0.2,id=7,type=8,code=0"
        );
        let v6 = ConnKey {
            src: Endpoint::v6("fd00::1".parse().unwrap(), 1),
            dst: Endpoint::v6("fd00::2".parse().unwrap(), 2),
            family: Family::V6,
            ..k
        };
        assert_eq!(v6.to_string(), "src=fd00::1,dst=fd00::2,sport=1,dport=2");
    }

    #[test]
    fn hash_is_symmetric_and_keyed() {
        let h = KeyHasher::with_seed(1);
        let k = key();
        assert_eq!(h.hash(&k), h.hash(&k.reverse()));
        let mut other_zone = k;
        other_zone.zone = 4;
        assert_ne!(h.hash(&k), h.hash(&other_zone));
        let mut other_proto = k;
        other_proto.proto = ip_proto::UDP;
        assert_ne!(h.hash(&k), h.hash(&other_proto));
        assert_ne!(h.hash(&k), KeyHasher::with_seed(2).hash(&k));
    }

    #[test]
    fn self_talk_does_not_collapse() {
        // With an XOR of endpoint hashes every key whose two sides are equal
        // hashes to the same value; here they must spread.
        let h = KeyHasher::with_seed(7);
        let mut seen = std::collections::HashSet::new();
        for i in 0..1000u32 {
            let e = Endpoint::v4(Ipv4Addr::from(0x0a00_0000 + i), 5);
            let k = ConnKey {
                src: e,
                dst: e,
                ..key()
            };
            seen.insert(h.hash(&k));
        }
        assert_eq!(seen.len(), 1000);
    }
}
