//! The keyed, direction-symmetric hash of connection keys.

use core::hash::{BuildHasher, Hasher};

use super::addr::{Addr, V6};
use super::conn_key::{ConnKey, Family, Zone};
use super::tuple::Tuple;

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
        let mut h = self.state.build_hasher();
        A::hash_endpoints((t.src, t.src_l4), (t.dst, t.dst_l4), &mut h);
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
        self.hash_in(key, 0)
    }

    /// The hash of `key` in generation `generation` of its zone.
    pub(crate) fn hash_in(&self, key: &ConnKey, generation: u32) -> u64 {
        match key.family {
            Family::V4 => self.hash_tuple(key.zone, generation, key.proto, &Tuple::<u32>::of(key)),
            Family::V6 => self.hash_tuple(key.zone, generation, key.proto, &Tuple::<V6>::of(key)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::conn_key::Endpoint;
    use super::*;
    use ctrack_wire::ip_proto;
    use std::net::Ipv4Addr;

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
