//! Realistic ACL rule sets and packet keys, seeded, for tests and
//! benchmarks (`ctrack bench policy` uses them for 100 to 100k rules).
//!
//! The shapes follow what published firewall rule sets and ClassBench's
//! ACL seeds show:
//!
//! - protocols: about 55 % TCP, 25 % UDP, 7 % ICMP, the rest any IP; one
//!   rule in ten IPv6;
//! - source prefixes mostly /32, /24 and /16, some wildcards, a few odd
//!   lengths; destinations more specific (mostly /32 and /24);
//! - addresses clustered in a few hundred /16 sites, so that prefixes nest
//!   and overlap as in a real network;
//! - destination ports mostly single well-known ports, then any, small
//!   sets (`{80, 443}`), the ephemeral range 1024-65535 and short ranges;
//!   source ports mostly any;
//! - one rule in five bound to an input port; a few negations.
//!
//! Ranks follow the order of the list, first rule highest, like an ACL
//! read top-down. Keys: half built to hit a chosen rule (a packet made to
//! satisfy one of its conjunctions), half random packets from the same
//! sites.

use super::dnf::normalise;
use super::rule::{Rank, RuleId};
use crate::expr::Expr;
use crate::key::{Field, Key, flag};

/// A small seeded generator (splitmix64): reproducible from its seed.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator seeded with `seed`.
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 { 0 } else { self.next_u64() % n }
    }

    /// True `pct` times in a hundred.
    pub fn chance(&mut self, pct: u64) -> bool {
        self.below(100) < pct
    }

    /// One of `xs` by weight: `(weight, value)` pairs.
    fn weighted<T: Copy>(&mut self, xs: &[(u64, T)]) -> T {
        let total: u64 = xs.iter().map(|x| x.0).sum();
        let mut r = self.below(total);
        for &(w, v) in xs {
            if r < w {
                return v;
            }
            r -= w;
        }
        xs[xs.len() - 1].1
    }
}

/// Well-known destination ports, most used first.
const PORTS: [u16; 20] = [
    80, 443, 22, 53, 25, 8080, 3389, 123, 110, 143, 3306, 5432, 8443, 161, 389, 636, 1433, 5060,
    6379, 27017,
];

/// The /16 networks addresses are drawn from.
const SITES: u64 = 256;

#[derive(Debug, Clone, Copy, PartialEq)]
enum Proto {
    Tcp,
    Udp,
    Icmp,
    Ip,
}

/// A site's address: IPv4 `a.b.x.y` in one of [`SITES`] /16s, x in a
/// small range, or an IPv6 address under a matching /32.
fn address(rng: &mut Rng, v6: bool) -> u128 {
    let site = rng.below(SITES);
    let net = rng.below(32);
    let host = rng.below(256);
    if v6 {
        (0x2001_0db8u128 << 96)
            | (u128::from(site) << 80)
            | (u128::from(net) << 64)
            | u128::from(host)
    } else {
        let hi = 10 + (site * 37 % 200);
        u128::from((hi << 24) | ((site & 0xff) << 16) | (net << 8) | host)
    }
}

/// A prefix test on an address field, of a length drawn from `lens`.
fn prefix(rng: &mut Rng, field: Field, v6: bool, lens: &[(u64, u32)]) -> Option<Expr> {
    let mut len = rng.weighted(lens);
    if len == 99 {
        len = 17 + rng.below(15) as u32;
    }
    if len == 0 {
        return None;
    }
    let (width, len) = if v6 {
        (128, (len * 4).min(128))
    } else {
        (32, len)
    };
    let mask = (u128::MAX >> (128 - len)) << (width - len);
    Some(Expr::masked(field, address(rng, v6), mask))
}

const SRC_LENS: [(u64, u32); 7] = [
    (15, 0),
    (3, 8),
    (20, 16),
    (25, 24),
    (7, 99),
    (25, 32),
    (5, 12),
];
const DST_LENS: [(u64, u32); 5] = [(10, 0), (10, 16), (30, 24), (5, 99), (45, 32)];

fn dst_port(rng: &mut Rng) -> Option<Expr> {
    let f = Field::L4Dst;
    let pick = |rng: &mut Rng| u128::from(PORTS[(rng.below(20) * rng.below(20) / 19) as usize]);
    Some(match rng.below(100) {
        0..55 => Expr::eq(f, pick(rng)),
        55..63 => Expr::Or(
            (0..2 + rng.below(3))
                .map(|_| Expr::eq(f, pick(rng)))
                .collect(),
        ),
        63..70 => Expr::Range {
            field: f,
            lo: 1024,
            hi: 65535,
        },
        70..75 => {
            let lo = u128::from(rng.below(60000));
            Expr::Range {
                field: f,
                lo,
                hi: lo + u128::from(rng.below(200)),
            }
        }
        75..78 => Expr::eq(f, 1 + u128::from(rng.below(65535))),
        _ => return None,
    })
}

fn src_port(rng: &mut Rng) -> Option<Expr> {
    let f = Field::L4Src;
    match rng.below(100) {
        0..10 => Some(Expr::Range {
            field: f,
            lo: 1024,
            hi: 65535,
        }),
        10..15 => Some(Expr::eq(f, u128::from(PORTS[rng.below(5) as usize]))),
        _ => None,
    }
}

/// One realistic rule.
pub fn rule(rng: &mut Rng) -> Expr {
    let v6 = rng.chance(10);
    let proto = rng.weighted(&[
        (55, Proto::Tcp),
        (25, Proto::Udp),
        (7, Proto::Icmp),
        (13, Proto::Ip),
    ]);
    let mut bits = flag::IP | if v6 { flag::IP6 } else { flag::IP4 };
    bits |= match proto {
        Proto::Tcp => flag::TCP,
        Proto::Udp => flag::UDP,
        Proto::Icmp => flag::ICMP,
        Proto::Ip => 0,
    };
    let mut parts = vec![Expr::flags(bits)];
    if rng.chance(20) {
        parts.push(Expr::eq(Field::Inport, 1 + u128::from(rng.below(16))));
    }
    parts.extend(prefix(rng, Field::IpSrc, v6, &SRC_LENS));
    parts.extend(prefix(rng, Field::IpDst, v6, &DST_LENS));
    match proto {
        Proto::Tcp | Proto::Udp => {
            parts.extend(dst_port(rng));
            parts.extend(src_port(rng));
        }
        Proto::Icmp if rng.chance(50) => {
            parts.push(Expr::eq(
                Field::IcmpType,
                u128::from([0u8, 8, 3, 11][rng.below(4) as usize]),
            ));
        }
        _ => {}
    }
    if rng.chance(3) {
        let x = if v6 || rng.chance(50) {
            Expr::eq(Field::L4Dst, 22)
        } else {
            Expr::masked(Field::IpDst, 0x0a00_0000, 0xff00_0000)
        };
        parts.push(Expr::Not(Box::new(x)));
    }
    Expr::And(parts)
}

/// `n` realistic rules with ids `0..n`, the first ranked highest (rank
/// `n - i`).
pub fn rules(n: usize, seed: u64) -> Vec<(RuleId, Rank, Expr)> {
    let mut rng = Rng::new(seed);
    (0..n)
        .map(|i| (i as RuleId, (n - i) as Rank, rule(&mut rng)))
        .collect()
}

/// A random packet from the same sites: TCP, UDP or ICMP over IPv4 or
/// IPv6, ports mostly well-known on one side and ephemeral on the other.
pub fn packet(rng: &mut Rng) -> Key {
    let v6 = rng.chance(10);
    let mut k = Key::default();
    let mut bits = flag::IP | if v6 { flag::IP6 } else { flag::IP4 };
    let proto = rng.weighted(&[(60, Proto::Tcp), (30, Proto::Udp), (10, Proto::Icmp)]);
    let (p, b) = match proto {
        Proto::Tcp => (6, flag::TCP),
        Proto::Udp => (17, flag::UDP),
        _ => (
            if v6 { 58 } else { 1 },
            flag::ICMP | if v6 { flag::ICMP6 } else { flag::ICMP4 },
        ),
    };
    bits |= b;
    k.set(Field::Flags, u128::from(bits));
    k.set(Field::EthType, if v6 { 0x86dd } else { 0x0800 });
    k.set(Field::IpProto, p);
    k.set(Field::IpTtl, 64);
    k.set(Field::Inport, 1 + u128::from(rng.below(16)));
    k.set(Field::Outport, 1 + u128::from(rng.below(16)));
    k.set(Field::IpSrc, address(rng, v6));
    k.set(Field::IpDst, address(rng, v6));
    if proto == Proto::Icmp {
        k.set(
            Field::IcmpType,
            u128::from([0u8, 8, 3, 11][rng.below(4) as usize]),
        );
    } else {
        k.set(Field::L4Src, 1024 + u128::from(rng.below(64512)));
        let dst = if rng.chance(70) {
            PORTS[rng.below(20) as usize]
        } else {
            rng.below(65536) as u16
        };
        k.set(Field::L4Dst, u128::from(dst));
        if proto == Proto::Tcp {
            k.set(Field::TcpFlags, 0x010);
        }
    }
    k
}

/// A key that matches `expr` (one of its conjunctions, the other bits from
/// a random packet), or `None` if it matches nothing or does not compile.
pub fn hitting_key(rng: &mut Rng, expr: &Expr) -> Option<Key> {
    let conjs = normalise(expr).ok()?;
    let c = conjs.get(rng.below(conjs.len() as u64) as usize)?;
    let mut k = packet(rng);
    for i in 0..8 {
        k.w[i] = (k.w[i] & !c.mask.w[i]) | c.value.w[i];
    }
    Some(k)
}

/// `n` keys for `rules`: even ones built to hit a random rule, odd ones
/// random packets.
pub fn keys(rules: &[(RuleId, Rank, Expr)], n: usize, seed: u64) -> Vec<Key> {
    let mut rng = Rng::new(seed ^ 0x6b65_7973);
    (0..n)
        .map(|i| {
            let r = &rules.get(rng.below(rules.len() as u64) as usize);
            match r {
                Some((_, _, e)) if i % 2 == 0 => {
                    hitting_key(&mut rng, e).unwrap_or_else(|| packet(&mut rng))
                }
                _ => packet(&mut rng),
            }
        })
        .collect()
}
