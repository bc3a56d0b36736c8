//! Choosing a new connection's translation: the reply tuple that makes it
//! unique in its zone.
//!
//! One address is picked from the range the way Linux picks it (a Jenkins
//! hash of the addresses, or of the source alone with `persistent`), so that
//! a capture translated by Linux and replayed through ctrack with the same
//! rule gets the same addresses. Then the port (or ICMP identifier) is
//! searched:
//!
//! * no port range: the original port is kept if the tuple is free, as
//!   Linux and Open vSwitch both do; otherwise the search walks the range of
//!   the original port's class (1-511, 600-1023, 1024-65535) from the
//!   original port up, as Open vSwitch does;
//! * a port range, `hash` or `persistent`: the original port if it lies in
//!   the range and the tuple is free (Linux), else from a point of the range
//!   chosen by a hash of the connection (Open vSwitch);
//! * `random`: from a random point, never keeping the original.
//!
//! A search round looks at up to 128 ports; if all are taken and the range
//! is larger, it starts again at a random point with half as many, down to
//! 16 (the bound Linux and Open vSwitch both use): at most 248 lookups, and
//! then the commit is refused ([`crate::Refusal::NatExhausted`]).
//!
//! A destination translation without a port range keeps the destination
//! port; if that tuple is taken it searches the source port instead, as
//! Open vSwitch does (Linux would keep the clash and drop the packet).
//! Protocols without ports get one lookup.

use std::net::IpAddr;

use ctrack_wire::ip_proto;

use crate::action::{NatKind, NatMode, NatRange};
use crate::key::{Addr, Tuple};
use crate::key::{Family, KeyHasher, Zone};

/// Most ports a search round looks at.
pub const MAX_ATTEMPTS: u32 = 128;
/// A round of fewer attempts than this is the last.
const MIN_ATTEMPTS: u32 = 16;

/// Why no translation was chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NatError {
    /// Every tuple the search looked at is in use.
    Exhausted,
    /// The range's addresses are of the other family.
    Family,
}

/// The 128-bit form of an address of family `A`, or `None` if `ip` is of
/// the other family.
pub(crate) fn addr_of<A: Addr>(ip: IpAddr) -> Option<A> {
    match (A::FAMILY, ip) {
        (Family::V4, IpAddr::V4(a)) => Some(A::from_u128(u128::from(u32::from(a)))),
        (Family::V6, IpAddr::V6(a)) => Some(A::from_u128(u128::from(a))),
        _ => None,
    }
}

/// Protocols whose translation can change a port or identifier.
pub(crate) fn has_port(family: Family, proto: u8) -> bool {
    matches!(
        (family, proto),
        (
            _,
            ip_proto::TCP | ip_proto::UDP | ip_proto::UDPLITE | ip_proto::SCTP
        ) | (Family::V4, ip_proto::ICMP)
            | (Family::V6, ip_proto::ICMPV6)
    )
}

pub(crate) fn is_icmp(family: Family, proto: u8) -> bool {
    matches!(
        (family, proto),
        (Family::V4, ip_proto::ICMP) | (Family::V6, ip_proto::ICMPV6)
    )
}

/// The port half of an L4 word.
#[inline]
fn port_of(l4: u32) -> u16 {
    (l4 >> 16) as u16
}

#[inline]
fn with_port(l4: u32, port: u16) -> u32 {
    (l4 & 0xffff) | (u32::from(port) << 16)
}

/// The address Linux's `find_best_ips_proto` picks from `[min, max]` for a
/// connection from `src` to `dst`: a Jenkins hash of the source address,
/// seeded with the destination (unless `persistent`), scaled into the range
/// word by word.
pub(crate) fn pick_addr<A: Addr>(
    src: A,
    dst: A,
    zone: Zone,
    min: A,
    max: A,
    persistent: bool,
    kind: NatKind,
) -> A {
    if min == max {
        return min;
    }
    let words = |a: A| -> [u32; 4] {
        match A::FAMILY {
            // Linux hashes the whole 16-byte address union; an IPv4 address
            // fills the first word, the rest are zero.
            Family::V4 => [a.to_u128() as u32, 0, 0, 0],
            Family::V6 => {
                let v = a.to_u128();
                [
                    (v >> 96) as u32,
                    (v >> 64) as u32,
                    (v >> 32) as u32,
                    v as u32,
                ]
            }
        }
    };
    let n = match A::FAMILY {
        Family::V4 => 1,
        Family::V6 => 4,
    };
    // The kernel reads the addresses as they lie in memory (network order)
    // into host-order (little-endian) words.
    let raw = |w: u32| w.swap_bytes();
    let (s, d, lo, hi) = (words(src), words(dst), words(min), words(max));
    let s_raw = s.map(raw);
    let initval = if persistent {
        0
    } else {
        raw(d[n - 1]) ^ u32::from(zone)
    };
    let mut j = jhash2(&s_raw, initval);
    let mut out = [0u32; 4];
    let mut full = false;
    for i in 0..n {
        let (base, dist) = if full {
            (0u32, u32::MAX)
        } else {
            (lo[i], hi[i].wrapping_sub(lo[i]).wrapping_add(1))
        };
        // reciprocal_scale: the high half of j * dist.
        let v = base.wrapping_add(((u64::from(j) * u64::from(dist)) >> 32) as u32);
        out[i] = v;
        if v != hi[i] {
            full = true;
        }
        if !persistent {
            // For a destination translation the kernel's tuple word is the
            // one just written.
            j ^= raw(if kind == NatKind::Dst { v } else { d[i] });
        }
    }
    match A::FAMILY {
        Family::V4 => A::from_u128(u128::from(out[0])),
        Family::V6 => A::from_u128(
            (u128::from(out[0]) << 96)
                | (u128::from(out[1]) << 64)
                | (u128::from(out[2]) << 32)
                | u128::from(out[3]),
        ),
    }
}

/// Bob Jenkins' lookup3 `hashword` as Linux's `jhash2` computes it.
pub(crate) fn jhash2(k: &[u32], initval: u32) -> u32 {
    const JHASH_INITVAL: u32 = 0xdead_beef;
    let mut a = JHASH_INITVAL
        .wrapping_add((k.len() as u32) << 2)
        .wrapping_add(initval);
    let mut b = a;
    let mut c = a;
    let mut k = k;
    while k.len() > 3 {
        a = a.wrapping_add(k[0]);
        b = b.wrapping_add(k[1]);
        c = c.wrapping_add(k[2]);
        // __jhash_mix
        a = a.wrapping_sub(c);
        a ^= c.rotate_left(4);
        c = c.wrapping_add(b);
        b = b.wrapping_sub(a);
        b ^= a.rotate_left(6);
        a = a.wrapping_add(c);
        c = c.wrapping_sub(b);
        c ^= b.rotate_left(8);
        b = b.wrapping_add(a);
        a = a.wrapping_sub(c);
        a ^= c.rotate_left(16);
        c = c.wrapping_add(b);
        b = b.wrapping_sub(a);
        b ^= a.rotate_left(19);
        a = a.wrapping_add(c);
        c = c.wrapping_sub(b);
        c ^= b.rotate_left(4);
        b = b.wrapping_add(a);
        k = &k[3..];
    }
    if k.is_empty() {
        return c;
    }
    if k.len() == 3 {
        c = c.wrapping_add(k[2]);
    }
    if k.len() >= 2 {
        b = b.wrapping_add(k[1]);
    }
    a = a.wrapping_add(k[0]);
    // __jhash_final
    c ^= b;
    c = c.wrapping_sub(b.rotate_left(14));
    a ^= c;
    a = a.wrapping_sub(c.rotate_left(11));
    b ^= a;
    b = b.wrapping_sub(a.rotate_left(25));
    c ^= b;
    c = c.wrapping_sub(b.rotate_left(16));
    a ^= c;
    a = a.wrapping_sub(c.rotate_left(4));
    b ^= a;
    b = b.wrapping_sub(a.rotate_left(14));
    c ^= b;
    c = c.wrapping_sub(b.rotate_left(24));
    c
}

/// The default range of ports for an original port that must change.
fn default_range(orig: u16) -> (u16, u16) {
    match orig {
        0..512 => (1, 511),
        512..1024 => (600, 1023),
        _ => (1024, 65535),
    }
}

/// Searches `[min, max]` for a free port, starting at `start`: rounds of
/// at most [`MAX_ATTEMPTS`], each later one from a random point with half
/// as many. `set` writes a candidate into the tuple.
fn search<A: Addr>(
    reply: &mut Tuple<A>,
    min: u16,
    max: u16,
    start: u16,
    set: impl Fn(&mut Tuple<A>, u16),
    random: &mut impl FnMut() -> u32,
    taken: &mut impl FnMut(&Tuple<A>) -> bool,
) -> bool {
    let size = u32::from(max) - u32::from(min) + 1;
    let mut attempts = size.min(MAX_ATTEMPTS);
    let mut off = u32::from(start.clamp(min, max)) - u32::from(min);
    loop {
        for i in 0..attempts {
            let p = min as u32 + (off + i) % size;
            set(reply, p as u16);
            if !taken(reply) {
                return true;
            }
        }
        if attempts >= size || attempts < MIN_ATTEMPTS {
            return false;
        }
        attempts /= 2;
        off = random() % size;
    }
}

/// What a translation is chosen from, besides the original tuple.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Request<'a> {
    /// IP protocol.
    pub proto: u8,
    /// The connection's zone.
    pub zone: Zone,
    /// The range to translate into.
    pub range: &'a NatRange,
    /// How to pick in it.
    pub mode: NatMode,
    /// The tracker's keyed hash (the port search's starting point).
    pub hasher: &'a KeyHasher,
}

/// Writes port `p` into the L4 word of the translated side of a reply
/// tuple (for ICMP, the identifier, which both words carry). The original
/// source's port is the reply's destination port.
fn set_port<A: Addr>(src_side: bool, icmp: bool) -> impl Fn(&mut Tuple<A>, u16) + Copy {
    move |t: &mut Tuple<A>, p: u16| {
        if src_side || icmp {
            t.dst_l4 = with_port(t.dst_l4, p);
        }
        if !src_side || icmp {
            t.src_l4 = with_port(t.src_l4, p);
        }
    }
}

/// What to translate and how: the reply tuple a new connection with
/// original tuple `orig` gets, unique by `taken` (which looks a candidate
/// reply tuple up in the connection's zone instance).
pub(crate) fn choose<A: Addr>(
    orig: &Tuple<A>,
    req: &Request<'_>,
    random: &mut impl FnMut() -> u32,
    mut taken: impl FnMut(&Tuple<A>) -> bool,
) -> Result<Tuple<A>, NatError> {
    let mut reply = orig.reverse();
    choose_addr(orig, req, &mut reply)?;
    let found = if !has_port(A::FAMILY, req.proto) {
        !taken(&reply)
    } else if let Some((lo, hi)) = req.range.ports {
        port_in_range(
            orig,
            req,
            &mut reply,
            (lo.min(hi), lo.max(hi)),
            random,
            &mut taken,
        )
    } else {
        port_in_class(orig, req, &mut reply, random, &mut taken)
    };
    if found {
        Ok(reply)
    } else {
        Err(NatError::Exhausted)
    }
}

/// The translated address, written into `reply`.
fn choose_addr<A: Addr>(
    orig: &Tuple<A>,
    req: &Request<'_>,
    reply: &mut Tuple<A>,
) -> Result<(), NatError> {
    let range = req.range;
    let Some((lo, hi)) = range.addrs else {
        return Ok(());
    };
    let (Some(lo), Some(hi)) = (addr_of::<A>(lo), addr_of::<A>(hi)) else {
        return Err(NatError::Family);
    };
    let src_side = range.kind == NatKind::Src;
    // Linux keeps a source already in the range (if its tuple is free,
    // which the port step checks); Open vSwitch always picks.
    let keep = src_side
        && req.mode != NatMode::Random
        && (lo..=hi).contains(&orig.src)
        && range
            .ports
            .is_none_or(|(a, b)| (a.min(b)..=a.max(b)).contains(&port_of(orig.src_l4)));
    if !keep {
        let persistent = req.mode == NatMode::Persistent;
        let a = pick_addr(orig.src, orig.dst, req.zone, lo, hi, persistent, range.kind);
        if src_side {
            reply.dst = a;
        } else {
            reply.src = a;
        }
    }
    Ok(())
}

/// A port in the range `[lo, hi]` of the translated side: the original one
/// if it is in range and free, else a search from a hashed (or random)
/// point. A full destination range moves the client's port instead.
fn port_in_range<A: Addr>(
    orig: &Tuple<A>,
    req: &Request<'_>,
    reply: &mut Tuple<A>,
    (lo, hi): (u16, u16),
    random: &mut impl FnMut() -> u32,
    taken: &mut impl FnMut(&Tuple<A>) -> bool,
) -> bool {
    let src_side = req.range.kind == NatKind::Src;
    let icmp = is_icmp(A::FAMILY, req.proto);
    let random_mode = req.mode == NatMode::Random;
    let orig_sport = port_of(orig.src_l4);
    let current = if src_side {
        orig_sport
    } else {
        port_of(orig.dst_l4)
    };
    let set = set_port::<A>(src_side, icmp);
    if !random_mode && (lo..=hi).contains(&current) {
        // In range already: keep it if free.
        set(reply, current);
        if !taken(reply) {
            return true;
        }
    }
    let size = u32::from(hi) - u32::from(lo) + 1;
    let hash = req.hasher.hash_tuple(req.zone, 0, req.proto, orig) as u32;
    let off = if random_mode { random() } else { hash } % size;
    let start = (u32::from(lo) + off) as u16;
    if search(reply, lo, hi, start, set, random, taken) {
        return true;
    }
    if src_side {
        return false;
    }
    // The destination range is full for this client: move the client's
    // port instead.
    let (dlo, dhi) = default_range(orig_sport);
    let set_src = set_port::<A>(true, icmp);
    search(reply, dlo, dhi, orig_sport, set_src, random, taken)
}

/// Without a port range: the original ports if the tuple is free, else
/// the source port moves within its class (ICMP identifiers anywhere, as
/// Linux).
fn port_in_class<A: Addr>(
    orig: &Tuple<A>,
    req: &Request<'_>,
    reply: &mut Tuple<A>,
    random: &mut impl FnMut() -> u32,
    taken: &mut impl FnMut(&Tuple<A>) -> bool,
) -> bool {
    let random_mode = req.mode == NatMode::Random;
    if !random_mode && !taken(reply) {
        return true;
    }
    let icmp = is_icmp(A::FAMILY, req.proto);
    let orig_sport = port_of(orig.src_l4);
    let (lo, hi) = if icmp {
        (0, u16::MAX)
    } else {
        default_range(orig_sport)
    };
    let start = if random_mode {
        let size = u32::from(hi) - u32::from(lo) + 1;
        (u32::from(lo) + random() % size) as u16
    } else {
        orig_sport
    };
    search(
        reply,
        lo,
        hi,
        start,
        set_port::<A>(true, icmp),
        random,
        taken,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;
    use std::net::Ipv4Addr;

    fn t(src: u32, sp: u16, dst: u32, dp: u16) -> Tuple<u32> {
        Tuple {
            src,
            dst,
            src_l4: u32::from(sp) << 16,
            dst_l4: u32::from(dp) << 16,
        }
    }

    fn ip(a: u32) -> IpAddr {
        IpAddr::V4(Ipv4Addr::from(a))
    }

    fn snat(lo: u32, hi: u32, ports: Option<(u16, u16)>) -> NatRange {
        NatRange {
            kind: NatKind::Src,
            addrs: Some((ip(lo), ip(hi))),
            ports,
        }
    }

    #[test]
    fn jhash2_known_values() {
        // lookup3's hashword of nothing is the seed arithmetic alone.
        assert_eq!(jhash2(&[], 0), 0xdead_beef);
        // Values of Linux's jhash2 (and Open vSwitch's jhash_words).
        assert_eq!(jhash2(&[1, 2, 3, 4], 0), 0x6649_1246);
        assert_eq!(jhash2(&[0x0100_000a, 0, 0, 0], 0), 0x44dd_116c);
    }

    #[test]
    fn addresses_as_linux_picks_them() {
        let a = |s: &str| u32::from(s.parse::<Ipv4Addr>().unwrap());
        let pick = |src, dst, lo, hi, persistent| {
            Ipv4Addr::from(pick_addr(
                a(src),
                a(dst),
                0,
                a(lo),
                a(hi),
                persistent,
                NatKind::Src,
            ))
            .to_string()
        };
        assert_eq!(
            pick("192.168.1.2", "8.8.8.8", "10.0.0.1", "10.0.0.10", false),
            "10.0.0.1"
        );
        assert_eq!(
            pick("192.168.1.2", "8.8.8.8", "10.0.0.1", "10.0.0.10", true),
            "10.0.0.9"
        );
        assert_eq!(
            pick(
                "10.1.1.1",
                "203.0.113.5",
                "198.51.100.0",
                "198.51.100.255",
                false
            ),
            "198.51.100.1"
        );
    }

    #[test]
    fn keeps_the_original_port_when_free() {
        let h = KeyHasher::with_seed(1);
        let o = t(0x0a00_0001, 40000, 0x0a00_0002, 80);
        let r = choose(
            &o,
            &Request {
                proto: ip_proto::TCP,
                zone: 0,
                range: &snat(0xc000_0201, 0xc000_0201, None),
                mode: NatMode::Hash,
                hasher: &h,
            },
            &mut || 0,
            |_| false,
        )
        .unwrap();
        assert_eq!(r, t(0x0a00_0002, 80, 0xc000_0201, 40000));
    }

    #[test]
    fn a_taken_port_moves_within_its_class() {
        let h = KeyHasher::with_seed(1);
        for (sport, lo, hi) in [(40000, 1024, 65535), (700, 600, 1023), (22, 1, 511)] {
            let o = t(0x0a00_0001, sport, 0x0a00_0002, 80);
            let r = choose(
                &o,
                &Request {
                    proto: ip_proto::UDP,
                    zone: 0,
                    range: &snat(9, 9, None),
                    mode: NatMode::Hash,
                    hasher: &h,
                },
                &mut || 0,
                |c| port_of(c.dst_l4) == sport,
            )
            .unwrap();
            let p = port_of(r.dst_l4);
            assert!(p != sport && (lo..=hi).contains(&p), "{sport} -> {p}");
        }
    }

    #[test]
    fn exhaustion_is_bounded() {
        let h = KeyHasher::with_seed(1);
        let o = t(1, 40000, 2, 80);
        let mut looked = 0;
        let r = choose(
            &o,
            &Request {
                proto: ip_proto::TCP,
                zone: 0,
                range: &snat(9, 9, Some((1000, 60000))),
                mode: NatMode::Random,
                hasher: &h,
            },
            &mut || 12345,
            |_| {
                looked += 1;
                true
            },
        );
        assert_eq!(r, Err(NatError::Exhausted));
        assert_eq!(looked, 128 + 64 + 32 + 16 + 8);
        // A small range is searched whole, once.
        let mut looked = 0;
        let r = choose(
            &o,
            &Request {
                proto: ip_proto::TCP,
                zone: 0,
                range: &snat(9, 9, Some((1000, 1009))),
                mode: NatMode::Hash,
                hasher: &h,
            },
            &mut || 0,
            |_| {
                looked += 1;
                true
            },
        );
        assert_eq!(r, Err(NatError::Exhausted));
        assert_eq!(looked, 10);
    }

    #[test]
    fn a_range_fills_up_exactly() {
        let h = KeyHasher::with_seed(3);
        let mut used = HashSet::new();
        let mut ok = 0;
        for sport in 1024..1200u16 {
            let o = t(1, sport, 2, 80);
            match choose(
                &o,
                &Request {
                    proto: ip_proto::TCP,
                    zone: 0,
                    range: &snat(9, 9, Some((2000, 2099))),
                    mode: NatMode::Hash,
                    hasher: &h,
                },
                &mut || 7,
                |c| used.contains(c),
            ) {
                Ok(r) => {
                    assert!((2000..=2099).contains(&port_of(r.dst_l4)));
                    assert!(used.insert(r));
                    ok += 1;
                }
                Err(e) => assert_eq!(e, NatError::Exhausted),
            }
        }
        assert_eq!(ok, 100);
    }

    #[test]
    fn addresses_spread_and_persistent_sticks() {
        let mut seen = HashSet::new();
        for dst in 0..64 {
            seen.insert(pick_addr(
                0x0a00_0001u32,
                0x0b00_0000 + dst,
                0,
                100,
                103,
                false,
                NatKind::Src,
            ));
        }
        assert_eq!(seen.len(), 4);
        let mut seen = HashSet::new();
        for dst in 0..64 {
            seen.insert(pick_addr(
                0x0a00_0001u32,
                0x0b00_0000 + dst,
                0,
                100,
                103,
                true,
                NatKind::Src,
            ));
        }
        assert_eq!(seen.len(), 1);
    }

    #[test]
    fn icmp_ids_change_together() {
        let h = KeyHasher::with_seed(1);
        let o = Tuple {
            src: 1u32,
            dst: 2,
            src_l4: (7 << 16) | (8 << 8),
            dst_l4: 7 << 16,
        };
        let r = choose(
            &o,
            &Request {
                proto: ip_proto::ICMP,
                zone: 0,
                range: &snat(9, 9, None),
                mode: NatMode::Hash,
                hasher: &h,
            },
            &mut || 0,
            |c| port_of(c.src_l4) == 7,
        )
        .unwrap();
        assert_eq!(port_of(r.src_l4), port_of(r.dst_l4));
        assert_ne!(port_of(r.src_l4), 7);
        assert_eq!(r.src_l4 & 0xffff, 0);
        assert_eq!(r.dst_l4 & 0xffff, 8 << 8);
    }

    /// A request of protocol `proto` into `range`, hashed.
    fn req<'a>(proto: u8, range: &'a NatRange, h: &'a KeyHasher) -> Request<'a> {
        Request {
            proto,
            zone: 0,
            range,
            mode: NatMode::Hash,
            hasher: h,
        }
    }

    #[test]
    fn a_port_in_its_range_is_kept_when_free() {
        let h = KeyHasher::with_seed(1);
        let o = t(0x0a00_0001, 40000, 0x0a00_0002, 80);
        let range = snat(9, 9, Some((1024, 65535)));
        let r = choose(&o, &req(ip_proto::TCP, &range, &h), &mut || 0, |_| false).unwrap();
        assert_eq!(port_of(r.dst_l4), 40000);
    }

    /// Outside the range, the search starts at a point hashed from the
    /// connection (as Linux's `nf_nat_l4proto_unique_tuple`), not at the
    /// range's bottom: connections spread over it.
    #[test]
    fn ports_searched_in_a_range_start_from_a_hash() {
        let h = KeyHasher::with_seed(1);
        let range = snat(9, 9, Some((20000, 20100)));
        let ports: std::collections::HashSet<u16> = (0..32)
            .map(|i| {
                let o = t(0x0a00_0001, 40000 + i, 0x0a00_0002, 80);
                let r = choose(&o, &req(ip_proto::TCP, &range, &h), &mut || 0, |_| false).unwrap();
                port_of(r.dst_l4)
            })
            .collect();
        assert!(ports.iter().all(|p| (20000..=20100).contains(p)));
        assert!(ports.len() > 16, "{ports:?}");
    }

    /// A range given high port first (possible through the API) is read
    /// in order.
    #[test]
    fn a_port_range_given_backwards_is_read_in_order() {
        let h = KeyHasher::with_seed(1);
        let range = snat(9, 9, Some((20100, 20000)));
        let o = t(0x0a00_0001, 40000, 0x0a00_0002, 80);
        let r = choose(&o, &req(ip_proto::TCP, &range, &h), &mut || 0, |_| false).unwrap();
        assert!((20000..=20100).contains(&port_of(r.dst_l4)));
    }

    /// Destination NAT to a single port that this client's port already
    /// holds there: the client's port moves instead (within its class).
    #[test]
    fn a_full_destination_range_moves_the_clients_port() {
        let h = KeyHasher::with_seed(1);
        let range = NatRange {
            kind: NatKind::Dst,
            addrs: Some((ip(0x0a00_0063), ip(0x0a00_0063))),
            ports: Some((8080, 8080)),
        };
        let o = t(0x0a00_0001, 40000, 0xc000_0201, 80);
        let r = choose(&o, &req(ip_proto::TCP, &range, &h), &mut || 0, |c| {
            port_of(c.dst_l4) == 40000
        })
        .unwrap();
        assert_eq!((r.src, port_of(r.src_l4)), (0x0a00_0063, 8080));
        assert_eq!(port_of(r.dst_l4), 40001);
    }

    /// An ICMP identifier that must change may take any value (Linux),
    /// not only those of its port class.
    #[test]
    fn an_icmp_identifier_moves_anywhere() {
        let h = KeyHasher::with_seed(1);
        let o = Tuple {
            src: 1u32,
            dst: 2,
            src_l4: (511 << 16) | (8 << 8),
            dst_l4: 511 << 16,
        };
        let range = snat(9, 9, None);
        let r = choose(&o, &req(ip_proto::ICMP, &range, &h), &mut || 0, |c| {
            port_of(c.src_l4) == 511
        })
        .unwrap();
        assert_eq!(port_of(r.src_l4), 512);
    }
}
