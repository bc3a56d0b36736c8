//! Rewriting a packet's addresses and ports in place, with every checksum
//! that covers them updated incrementally (RFC 1624), so that a packet that
//! arrived with a wrong checksum leaves with one exactly as wrong, and a
//! correct one stays correct.
//!
//! What is updated, by protocol:
//!
//! | field changed | IPv4 header | TCP | UDP | UDP-Lite | DCCP | SCTP | ICMP | ICMPv6 |
//! |---|---|---|---|---|---|---|---|---|
//! | address | yes | yes | if not 0 | yes | yes | no (no pseudo-header) | no | yes |
//! | port / id | | yes | if not 0 | yes | | CRC32c | yes | yes |
//!
//! A UDP checksum of 0 ("none", IPv4) stays 0, and an update that comes to 0
//! is written 0xffff (RFC 768). SCTP's CRC32c is linear: the stored value is
//! changed by the difference between the CRCs of the old and new packet, so
//! a corrupt packet stays corrupt (as Open vSwitch does).
//!
//! An ICMP error quoting a translated packet gets its outer addresses
//! rewritten where the connection translates them in the error's direction,
//! and the quoted header put back as its sender sent it (addresses, ports or
//! echo identifier, the quoted IPv4 header checksum and the quoted transport
//! checksum where the quote holds it); the ICMP checksum then follows every
//! changed word.
//!
//! Every offset is checked: a packet too short for a field is left as it is
//! (the tracker only hands over packets it parsed, so this does not happen).

use ctrack_wire::checksum::Delta;
use ctrack_wire::{IpLayer, IpVersion, checksum, ip_proto, ipv6, read_be16, read_be32, write_be16};

use crate::key::Family;
use crate::key::{Addr, Tuple};
use crate::nat::is_icmp;

fn set16(b: &mut [u8], at: usize, v: u16, d: &mut Delta) {
    d.set_be16(b, at, v);
}

/// What a transport checksum field makes of zero.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Zero {
    /// A value like any other (IP, TCP, DCCP, ICMP).
    Plain,
    /// UDP: a zero field means "no checksum" and stays zero; a result of
    /// zero is written 0xffff.
    Udp,
    /// UDP-Lite: a checksum is mandatory, so a result of zero is written
    /// 0xffff (a zero field would read as missing, and the packet be
    /// dropped), as Linux's NAT does for it.
    Mangled,
}

/// Updates the checksum field at `at` by `d`, with the field's rule for
/// zero.
fn fix_check(b: &mut [u8], at: usize, d: Delta, zero: Zero) -> Delta {
    match zero {
        Zero::Plain => d.apply_at(b, at),
        Zero::Udp => d.apply_udp_at(b, at),
        Zero::Mangled => d.apply_mangled_at(b, at),
    }
}

/// The bytes of an address of family `A`: 4 or 16 of the array.
fn addr_bytes<A: Addr>(a: A) -> ([u8; 16], usize) {
    match A::FAMILY {
        Family::V4 => {
            let mut out = [0; 16];
            out[..4].copy_from_slice(&(a.to_u128() as u32).to_be_bytes());
            (out, 4)
        }
        Family::V6 => (a.to_u128().to_be_bytes(), 16),
    }
}

/// Writes an address at `at`, adding the change to `d`.
fn set_addr<A: Addr>(b: &mut [u8], at: usize, a: A, d: &mut Delta) {
    let (bytes, n) = addr_bytes(a);
    d.set_bytes(b, at, &bytes[..n]);
}

/// Where the source and destination addresses are in an IP header.
fn addr_offsets(v: IpVersion) -> (usize, usize) {
    match v {
        IpVersion::V4 => (12, 16),
        IpVersion::V6 => (8, 24),
    }
}

/// Offset of the transport checksum from the start of the transport header,
/// whether the pseudo-header is covered, and what the field makes of zero.
fn l4_check(family: Family, proto: u8) -> Option<(usize, bool, Zero)> {
    Some(match (family, proto) {
        (_, ip_proto::TCP) => (16, true, Zero::Plain),
        (_, ip_proto::UDP) => (6, true, Zero::Udp),
        (_, ip_proto::UDPLITE) => (6, true, Zero::Mangled),
        (_, ip_proto::DCCP) => (6, true, Zero::Plain),
        (Family::V4, ip_proto::ICMP) => (2, false, Zero::Plain),
        (Family::V6, ip_proto::ICMPV6) => (2, true, Zero::Plain),
        _ => return None,
    })
}

/// True for protocols whose L4 words carry ports at bytes 0..4.
fn has_ports(proto: u8) -> bool {
    matches!(
        proto,
        ip_proto::TCP | ip_proto::UDP | ip_proto::UDPLITE | ip_proto::SCTP
    )
}

fn port(l4: u32) -> u16 {
    (l4 >> 16) as u16
}

/// Rewrites the transport header at `l4` (a whole datagram's, `end` its
/// end) from ports/identifier of `from` to those of `to`, with `pseudo` the
/// change to the pseudo-header the addresses made.
fn rewrite_l4<A: Addr>(
    b: &mut [u8],
    l4: usize,
    end: usize,
    proto: u8,
    pseudo: Delta,
    from: &Tuple<A>,
    to: &Tuple<A>,
) {
    let family = A::FAMILY;
    let mut d = Delta::default();
    if proto == ip_proto::SCTP {
        if from.src_l4 == to.src_l4 && from.dst_l4 == to.dst_l4 {
            return;
        }
        let Some(seg) = b.get_mut(l4..end) else {
            return;
        };
        ctrack_wire::sctp::edit_keeping_crc(seg, |seg| {
            seg[0..2].copy_from_slice(&port(to.src_l4).to_be_bytes());
            seg[2..4].copy_from_slice(&port(to.dst_l4).to_be_bytes());
        });
        return;
    }
    if has_ports(proto) {
        set16(b, l4, port(to.src_l4), &mut d);
        set16(b, l4 + 2, port(to.dst_l4), &mut d);
    } else if is_icmp(family, proto) && port(from.src_l4) != port(to.src_l4) {
        // A query: the identifier.
        set16(b, l4 + 4, port(to.src_l4), &mut d);
    }
    if let Some((at, covers_pseudo, zero)) = l4_check(family, proto) {
        if covers_pseudo {
            d.add(pseudo);
        }
        fix_check(b, l4 + at, d, zero);
    }
}

/// Rewrites a packet whose tuple is `from` (not an ICMP error) so that its
/// tuple becomes `to`: addresses, ports or ICMP identifier, and checksums.
pub(crate) fn packet<A: Addr>(b: &mut [u8], ip: &IpLayer, from: &Tuple<A>, to: &Tuple<A>) {
    let (src_at, dst_at) = addr_offsets(ip.version);
    let mut pseudo = Delta::default();
    set_addr(b, ip.l3 + src_at, to.src, &mut pseudo);
    set_addr(b, ip.l3 + dst_at, to.dst, &mut pseudo);
    if ip.version == IpVersion::V4 {
        fix_check(b, ip.l3 + 10, pseudo, Zero::Plain);
    }
    rewrite_l4(b, ip.l4, ip.end, ip.proto, pseudo, from, to);
}

/// [`packet`] for what the IPv4 fast path reads (an Ethernet frame, a
/// 20-byte IPv4 header, TCP or UDP; `to` of the same shape): the same
/// changes at fixed offsets, without the general case's dispatch on
/// version and protocol.
#[inline]
pub(crate) fn packet_v4_fast(b: &mut [u8], proto: u8, to: &Tuple<u32>) {
    const IP: usize = 14;
    const L4: usize = IP + 20;
    let mut pseudo = Delta::default();
    pseudo.set_bytes(b, IP + 12, &to.src.to_be_bytes());
    pseudo.set_bytes(b, IP + 16, &to.dst.to_be_bytes());
    pseudo.apply_at(b, IP + 10);
    let mut d = Delta::default();
    set16(b, L4, port(to.src_l4), &mut d);
    set16(b, L4 + 2, port(to.dst_l4), &mut d);
    d.add(pseudo);
    match proto {
        ip_proto::TCP => d.apply_at(b, L4 + 16),
        _ => d.apply_udp_at(b, L4 + 6),
    };
}

/// Rewrites an ICMP or ICMPv6 error that travels in a connection with tuple
/// `from` and must leave with tuple `to` (the error's own addresses and the
/// quoted packet's reversed: see [`crate::packet::extract`]).
///
/// The outer source and destination change only where the connection
/// translates them in this direction (so the router that sent the error
/// keeps its address unless it stands where a translated address does, as
/// Linux and Open vSwitch do); the quoted packet becomes the reverse of
/// `to`, as its sender sent it.
pub(crate) fn icmp_error<A: Addr>(b: &mut [u8], ip: &IpLayer, from: &Tuple<A>, to: &Tuple<A>) {
    let family = A::FAMILY;
    let (src_at, dst_at) = addr_offsets(ip.version);
    // Outer addresses.
    let mut pseudo = Delta::default();
    if from.src != to.src {
        set_addr(b, ip.l3 + src_at, to.src, &mut pseudo);
    }
    if from.dst != to.dst {
        set_addr(b, ip.l3 + dst_at, to.dst, &mut pseudo);
    }
    if ip.version == IpVersion::V4 {
        fix_check(b, ip.l3 + 10, pseudo, Zero::Plain);
    }
    // The quoted packet: from reverse(from) to reverse(to).
    let qto = to.reverse();
    let q = ip.l4 + ctrack_wire::icmp::HEADER_LEN;
    let mut inner = Delta::default();
    let (qproto, ql4) = match family {
        Family::V4 => {
            let Some(&vihl) = b.get(q) else { return };
            let ihl = usize::from(vihl & 0x0f) * 4;
            let Some(&proto) = b.get(q + 9) else { return };
            let mut qpseudo = Delta::default();
            set_addr(b, q + 12, qto.src, &mut qpseudo);
            set_addr(b, q + 16, qto.dst, &mut qpseudo);
            inner.add(qpseudo);
            inner.add(fix_check(b, q + 10, qpseudo, Zero::Plain));
            (proto, (q + ihl, qpseudo))
        }
        Family::V6 => {
            let Some(h) = b.get(q..q + ipv6::HEADER_LEN) else {
                return;
            };
            let next = h[6];
            let Some(rest) = b.get(q + ipv6::HEADER_LEN..ip.end) else {
                return;
            };
            let Ok(chain) = ipv6::walk_extensions(rest, next) else {
                return;
            };
            let mut qpseudo = Delta::default();
            set_addr(b, q + 8, qto.src, &mut qpseudo);
            set_addr(b, q + 24, qto.dst, &mut qpseudo);
            inner.add(qpseudo);
            (
                chain.proto,
                (q + ipv6::HEADER_LEN + chain.l4_offset, qpseudo),
            )
        }
    };
    let (ql4, qpseudo) = ql4;
    // Quoted ports or identifier, and the quoted checksum if quoted.
    let mut l4d = Delta::default();
    if has_ports(qproto) {
        set16(b, ql4, port(qto.src_l4), &mut l4d);
        set16(b, ql4 + 2, port(qto.dst_l4), &mut l4d);
    } else if is_icmp(family, qproto) {
        set16(b, ql4 + 4, port(qto.src_l4), &mut l4d);
    }
    inner.add(l4d);
    if let Some((at, covers_pseudo, zero)) = l4_check(family, qproto)
        && ql4 + at + 2 <= ip.end
    {
        let mut cd = l4d;
        if covers_pseudo {
            cd.add(qpseudo);
        }
        inner.add(fix_check(b, ql4 + at, cd, zero));
    }
    // The ICMP checksum covers the quote, and for ICMPv6 the outer
    // addresses.
    if family == Family::V6 {
        inner.add(pseudo);
    }
    fix_check(b, ip.l4 + 2, inner, Zero::Plain);
}

/// TCP option kind of selective acknowledgments.
const TCPOPT_SACK: u8 = 5;

/// Moves a TCP segment's sequence number by `seq` (this direction's
/// adjustment) and its acknowledgment and SACK edges by `ack` (the other
/// direction's), updating the checksum. `l4` is the TCP header's offset.
pub(crate) fn tcp_adjust(
    b: &mut [u8],
    l4: usize,
    seq: Option<&crate::nat::seqadj::SeqAdj>,
    ack: Option<&crate::nat::seqadj::SeqAdj>,
) {
    let mut d = Delta::default();
    let word = read_be32;
    let set32 = |b: &mut [u8], at: usize, v: u32, d: &mut Delta| {
        d.set_be32(b, at, v);
    };
    if let Some(a) = seq.filter(|a| a.active())
        && let Some(old) = word(b, l4 + 4)
    {
        set32(b, l4 + 4, a.seq(old), &mut d);
    }
    let Some(&off_flags) = b.get(l4 + 12) else {
        return;
    };
    let Some(&flags) = b.get(l4 + 13) else {
        return;
    };
    if let Some(a) = ack.filter(|a| a.active()) {
        if flags & 0x10 != 0
            && let Some(old) = word(b, l4 + 8)
        {
            set32(b, l4 + 8, a.ack(old), &mut d);
        }
        // SACK blocks name the other direction's bytes too.
        let hlen = usize::from(off_flags >> 4) * 4;
        let mut i = l4 + 20;
        let end = (l4 + hlen).min(b.len());
        while i < end {
            match b[i] {
                0 => break,
                1 => i += 1,
                kind => {
                    let Some(&len) = b.get(i + 1) else { break };
                    let len = usize::from(len);
                    if len < 2 || i + len > end {
                        break;
                    }
                    if kind == TCPOPT_SACK {
                        let mut e = i + 2;
                        while e + 4 <= i + len {
                            if let Some(old) = word(b, e) {
                                // Edges lie at even offsets from the header
                                // start only by luck; the checksum update
                                // works on 16-bit words, so update byte
                                // pairs aligned to the header.
                                let new = a.ack(old);
                                if (e - l4).is_multiple_of(2) {
                                    set32(b, e, new, &mut d);
                                } else {
                                    set_unaligned32(b, l4, e, new, &mut d);
                                }
                            }
                            e += 4;
                        }
                    }
                    i += len;
                }
            }
        }
    }
    fix_check(b, l4 + 16, d, Zero::Plain);
}

/// Writes 4 bytes at an odd offset from `base`, adding the change of the
/// 16-bit words (aligned to `base`) they touch to `d`.
fn set_unaligned32(b: &mut [u8], base: usize, at: usize, v: u32, d: &mut Delta) {
    let Some(old) = read_be32(b, at) else {
        return;
    };
    ctrack_wire::write_be32(b, at, v);
    d.bytes_at(at - base, &old.to_be_bytes(), &v.to_be_bytes());
}

/// Recomputes a TCP checksum in full (after a payload changed length).
pub(crate) fn tcp_checksum(b: &mut [u8], ip: &IpLayer, end: usize) {
    let Some(seg) = b.get(ip.l4..end) else {
        return;
    };
    if seg.len() < 20 {
        return;
    }
    let len = seg.len() as u32;
    let pseudo = match ip.version {
        IpVersion::V4 => {
            let h = &b[ip.l3..];
            checksum::pseudo_header_v4(
                [h[12], h[13], h[14], h[15]],
                [h[16], h[17], h[18], h[19]],
                ip_proto::TCP,
                len,
            )
        }
        IpVersion::V6 => {
            let h = &b[ip.l3..];
            let mut s = [0u8; 16];
            let mut t = [0u8; 16];
            s.copy_from_slice(&h[8..24]);
            t.copy_from_slice(&h[24..40]);
            checksum::pseudo_header_v6(&s, &t, ip_proto::TCP, len)
        }
    };
    b[ip.l4 + 16] = 0;
    b[ip.l4 + 17] = 0;
    let c = checksum::finish(checksum::sum(pseudo, &b[ip.l4..end]));
    b[ip.l4 + 16..ip.l4 + 18].copy_from_slice(&c.to_be_bytes());
}

/// Sets an IP datagram's length field after its payload grew by `delta`
/// (IPv4 total length with its header checksum, IPv6 payload length).
pub(crate) fn ip_length(b: &mut [u8], ip: &IpLayer, delta: isize) {
    match ip.version {
        IpVersion::V4 => {
            let Some(old) = read_be16(b, ip.l3 + 2) else {
                return;
            };
            let new = (old as isize + delta) as u16;
            let mut d = Delta::default();
            set16(b, ip.l3 + 2, new, &mut d);
            fix_check(b, ip.l3 + 10, d, Zero::Plain);
        }
        IpVersion::V6 => {
            let Some(old) = read_be16(b, ip.l3 + 4) else {
                return;
            };
            write_be16(b, ip.l3 + 4, (old as isize + delta) as u16);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ctrack_wire::build::{Frame, L4, quote};
    use ctrack_wire::{LinkType, parse_frame};
    use std::net::{Ipv4Addr, Ipv6Addr};

    fn v4(a: [u8; 4]) -> u32 {
        u32::from_be_bytes(a)
    }

    fn t4(src: [u8; 4], sp: u16, dst: [u8; 4], dp: u16) -> Tuple<u32> {
        Tuple {
            src: v4(src),
            dst: v4(dst),
            src_l4: u32::from(sp) << 16,
            dst_l4: u32::from(dp) << 16,
        }
    }

    /// Every checksum in the frame verifies.
    fn all_valid(frame: &[u8]) -> bool {
        let f = parse_frame(frame, LinkType::Ethernet);
        let ip = f.ip.unwrap();
        let ex = crate::packet::extract::extract(
            frame,
            &f,
            0,
            crate::packet::extract::ExtractOptions::default(),
        );
        ex.is_ok()
            && (ip.version == IpVersion::V6 || {
                let h = ctrack_wire::ipv4::Ipv4Packet::new_unchecked(&frame[ip.l3..ip.end]);
                h.verify_checksum()
            })
    }

    fn rewrite_v4(l4: L4, from: Tuple<u32>, to: Tuple<u32>) -> Vec<u8> {
        let mut f = Frame::v4(from.src.to_be_bytes(), from.dst.to_be_bytes(), l4).build();
        assert!(all_valid(&f));
        let ip = parse_frame(&f, LinkType::Ethernet).ip.unwrap();
        packet(&mut f, &ip, &from, &to);
        f
    }

    #[test]
    fn tcp_udp_rewrites_keep_checksums_valid() {
        let from = t4([10, 0, 0, 1], 40000, [10, 0, 0, 2], 80);
        let to = t4([192, 0, 2, 1], 1024, [10, 0, 0, 2], 8080);
        for l4 in [L4::tcp(40000, 80, 0x02), L4::udp(40000, 80, b"hello")] {
            let f = rewrite_v4(l4, from, to);
            assert!(all_valid(&f));
            let ip = parse_frame(&f, LinkType::Ethernet).ip.unwrap();
            assert_eq!(&f[ip.l3 + 12..ip.l3 + 16], &[192, 0, 2, 1]);
            assert_eq!(read_be16(&f, ip.l4), Some(1024));
            assert_eq!(read_be16(&f, ip.l4 + 2), Some(8080));
        }
    }

    /// The fixed-offset rewrite writes the bytes the general one writes:
    /// TCP and UDP, valid, wrong and (UDP) absent checksums, many tuples.
    #[test]
    fn the_fast_v4_rewrite_is_the_general_one() {
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for round in 0..2000 {
            let r = next();
            let from = t4(
                (r as u32).to_be_bytes(),
                (r >> 32) as u16 | 1,
                ((r >> 16) as u32).to_be_bytes(),
                (r >> 48) as u16 | 1,
            );
            let r2 = next();
            let to = Tuple {
                src: if r2 & 1 == 0 { r2 as u32 } else { from.src },
                dst: if r2 & 2 == 0 {
                    (r2 >> 32) as u32
                } else {
                    from.dst
                },
                src_l4: if r2 & 4 == 0 {
                    (r2 as u32) & 0xffff_0000
                } else {
                    from.src_l4
                },
                dst_l4: if r2 & 8 == 0 {
                    (r2 >> 16) as u32 & 0xffff_0000
                } else {
                    from.dst_l4
                },
            };
            let (sp, dp) = (port(from.src_l4), port(from.dst_l4));
            let l4 = if round % 2 == 0 {
                L4::tcp_seg(
                    sp,
                    dp,
                    0x18,
                    r as u32,
                    r2 as u32,
                    512,
                    &r.to_le_bytes()[..(round % 9)],
                )
            } else {
                L4::udp(sp, dp, &r2.to_le_bytes()[..(round % 9)])
            };
            let mut f = Frame::v4(from.src.to_be_bytes(), from.dst.to_be_bytes(), l4).build();
            let ip = parse_frame(&f, LinkType::Ethernet).ip.unwrap();
            let _ = match round % 6 {
                // A wrong transport checksum, or (UDP) none.
                1 | 2 => write_be16(
                    &mut f,
                    ip.l4 + if round % 2 == 0 { 16 } else { 6 },
                    (r >> 8) as u16,
                ),
                3 if round % 2 == 1 => write_be16(&mut f, ip.l4 + 6, 0),
                4 => write_be16(&mut f, ip.l3 + 10, r2 as u16),
                _ => true,
            };
            let mut general = f.clone();
            packet(&mut general, &ip, &from, &to);
            packet_v4_fast(&mut f, ip.proto, &to);
            assert_eq!(f, general, "round {round}");
        }
    }

    #[test]
    fn udp_zero_checksum_stays_zero() {
        let from = t4([10, 0, 0, 1], 5, [10, 0, 0, 2], 6);
        let to = t4([10, 9, 9, 9], 7, [10, 0, 0, 2], 6);
        let mut f = Frame::v4([10, 0, 0, 1], [10, 0, 0, 2], L4::udp(5, 6, b"x")).build();
        let ip = parse_frame(&f, LinkType::Ethernet).ip.unwrap();
        write_be16(&mut f, ip.l4 + 6, 0);
        packet(&mut f, &ip, &from, &to);
        assert_eq!(read_be16(&f, ip.l4 + 6), Some(0));
        assert!(all_valid(&f));
    }

    #[test]
    fn a_wrong_checksum_stays_exactly_as_wrong() {
        let from = t4([10, 0, 0, 1], 40000, [10, 0, 0, 2], 80);
        let to = t4([192, 0, 2, 1], 1024, [10, 0, 0, 2], 80);
        let mut good = Frame::v4([10, 0, 0, 1], [10, 0, 0, 2], L4::tcp(40000, 80, 2)).build();
        let ip = parse_frame(&good, LinkType::Ethernet).ip.unwrap();
        let mut bad = good.clone();
        let c = read_be16(&bad, ip.l4 + 16).unwrap();
        write_be16(&mut bad, ip.l4 + 16, c ^ 0x0101);
        packet(&mut good, &ip, &from, &to);
        packet(&mut bad, &ip, &from, &to);
        assert_eq!(
            read_be16(&good, ip.l4 + 16).unwrap() ^ 0x0101,
            read_be16(&bad, ip.l4 + 16).unwrap()
        );
    }

    #[test]
    fn icmp_echo_id_and_v6_pseudo_header() {
        let from = Tuple {
            src: v4([10, 0, 0, 1]),
            dst: v4([10, 0, 0, 2]),
            src_l4: (7 << 16) | (8 << 8),
            dst_l4: 7 << 16,
        };
        let to = Tuple {
            src: v4([10, 1, 1, 1]),
            src_l4: (9 << 16) | (8 << 8),
            dst_l4: 9 << 16,
            ..from
        };
        let f = rewrite_v4(L4::icmp_query(8, 7, 1), from, to);
        assert!(all_valid(&f));
        let ip = parse_frame(&f, LinkType::Ethernet).ip.unwrap();
        assert_eq!(read_be16(&f, ip.l4 + 4), Some(9));

        let a: Ipv6Addr = "fd00::1".parse().unwrap();
        let b: Ipv6Addr = "fd00::2".parse().unwrap();
        let n: Ipv6Addr = "2001:db8::7".parse().unwrap();
        let from6 = Tuple {
            src: crate::key::V6::from_u128(a.into()),
            dst: crate::key::V6::from_u128(b.into()),
            src_l4: (7 << 16) | (128 << 8),
            dst_l4: (7 << 16) | (129 << 8),
        };
        let to6 = Tuple {
            src: crate::key::V6::from_u128(n.into()),
            src_l4: (300 << 16) | (128 << 8),
            dst_l4: (300 << 16) | (129 << 8),
            ..from6
        };
        for l4 in [
            L4::icmp_query(128, 7, 1),
            L4::tcp(7, 129, 2),
            L4::udp(7, 129, b"abc"),
        ] {
            let l4_is_icmp = matches!(l4, L4::Icmp { .. });
            let mut f = Frame::v6(a, b, l4).build();
            assert!(all_valid(&f));
            let ip = parse_frame(&f, LinkType::Ethernet).ip.unwrap();
            let (fr, t) = if l4_is_icmp {
                (from6, to6)
            } else {
                (
                    Tuple {
                        src_l4: 7 << 16,
                        dst_l4: 129 << 16,
                        ..from6
                    },
                    Tuple {
                        src_l4: 300 << 16,
                        dst_l4: 129 << 16,
                        ..to6
                    },
                )
            };
            packet(&mut f, &ip, &fr, &t);
            assert!(all_valid(&f), "{f:02x?}");
            assert_eq!(&f[ip.l3 + 8..ip.l3 + 24], &n.octets());
        }
    }

    #[test]
    fn sctp_crc_follows_the_ports() {
        let from = t4([10, 0, 0, 1], 5000, [10, 0, 0, 2], 6000);
        let to = t4([10, 7, 7, 7], 5001, [10, 0, 0, 2], 6000);
        let chunk = vec![
            1, 0, 0, 20, 0, 0, 0x12, 0x34, 0, 1, 0, 0, 0, 1, 0, 1, 0, 0, 0, 9,
        ];
        let l4 = L4::Sctp {
            sport: 5000,
            dport: 6000,
            vtag: 0,
            chunks: chunk,
        };
        let f = rewrite_v4(l4, from, to);
        assert!(all_valid(&f));
    }

    /// UDP-Lite has no "no checksum": a translation whose checksum comes
    /// to zero writes 0xffff (Linux's `CSUM_MANGLED_0`), which verifies,
    /// where zero would read as missing.
    #[test]
    fn a_udplite_checksum_that_comes_to_zero_is_written_0xffff() {
        let from = t4([10, 0, 0, 1], 40000, [10, 0, 0, 2], 9);
        let lite = L4::UdpLite {
            sport: 40000,
            dport: 9,
            coverage: 8,
            payload: b"partly covered".to_vec(),
        };
        let hit = (1..=u16::MAX)
            .find_map(|p| {
                let to = t4([192, 0, 2, 1], p, [10, 0, 0, 2], 9);
                let f = rewrite_v4(lite.clone(), from, to);
                let ip = parse_frame(&f, LinkType::Ethernet).ip.unwrap();
                (read_be16(&f, ip.l4 + 6) == Some(0xffff)).then_some(f)
            })
            .expect("some port brings the checksum to zero");
        assert!(all_valid(&hit));
    }

    /// DCCP is tracked by its addresses alone, but its checksum covers
    /// them (the pseudo-header): a translated address moves it.
    #[test]
    fn dccp_checksum_follows_the_addresses() {
        use ctrack_wire::checksum as ck;
        let valid = |src: [u8; 4], dst: [u8; 4], seg: &[u8]| {
            let pseudo = ck::pseudo_header_v4(src, dst, ip_proto::DCCP, seg.len() as u32);
            ck::is_valid(ck::sum(pseudo, seg))
        };
        let (src, dst) = ([10, 0, 0, 1], [10, 0, 0, 2]);
        // A 16-byte generic header (data offset 4 words, X = 1), checksum
        // over the whole packet (CsCov 0).
        let mut h = vec![0u8; 16];
        h[0..2].copy_from_slice(&5000u16.to_be_bytes());
        h[2..4].copy_from_slice(&5001u16.to_be_bytes());
        h[4] = 4;
        h[8] = 1;
        h[15] = 7;
        let pseudo = ck::pseudo_header_v4(src, dst, ip_proto::DCCP, 16);
        let c = ck::finish(ck::sum(pseudo, &h));
        h[6..8].copy_from_slice(&c.to_be_bytes());
        assert!(valid(src, dst, &h));
        let from = t4(src, 0, dst, 0);
        let to = t4([192, 0, 2, 1], 0, dst, 0);
        let raw = L4::Raw {
            proto: ip_proto::DCCP,
            payload: h,
        };
        let f = rewrite_v4(raw, from, to);
        let ip = parse_frame(&f, LinkType::Ethernet).ip.unwrap();
        assert_eq!(&f[ip.l3 + 12..ip.l3 + 16], &[192, 0, 2, 1]);
        assert!(valid([192, 0, 2, 1], dst, &f[ip.l4..ip.end]));
    }

    /// The quote of an ICMP error is translated back whatever it quotes: a
    /// UDP header cut right after its checksum, an SCTP header's ports, an
    /// echo's identifier, each with the checksums the quote holds.
    #[test]
    fn icmp_error_quotes_of_udp_sctp_and_echo() {
        let (client, server, public) = ([10, 0, 0, 1], [10, 0, 0, 2], [192, 0, 2, 1]);
        let init = vec![
            1, 0, 0, 20, 0xde, 0xad, 0xbe, 0xef, 0, 1, 0, 0, 0, 10, 0, 10, 0, 0, 0, 1,
        ];
        let sctp = |sport| L4::Sctp {
            sport,
            dport: 5001,
            vtag: 0,
            chunks: init.clone(),
        };
        // (what the client sent, what left translated, client's and
        // public port or identifier, server's, bytes quoted, bytes that
        // must come back as the client sent them)
        let cases = [
            (
                L4::udp(40000, 53, b"q"),
                L4::udp(1024, 53, b"q"),
                40000,
                1024,
                53,
                8,
                8,
            ),
            (sctp(40000), sctp(1024), 40000, 1024, 5001, 12, 8),
            (
                L4::icmp_query(8, 7, 1),
                L4::icmp_query(8, 1024, 1),
                7,
                1024,
                7,
                8,
                8,
            ),
        ];
        for (orig_l4, sent_l4, cport, pport, sport, cut, same) in cases {
            let orig = t4(client, cport, server, sport);
            let reply = t4(server, sport, public, pport);
            let sent = Frame::v4(public, server, sent_l4).ip_packet();
            let mut f = Frame::v4(
                [10, 9, 9, 9],
                public,
                L4::icmp_error(3, 1, &quote(&sent, cut)),
            )
            .build();
            let ip = parse_frame(&f, LinkType::Ethernet).ip.unwrap();
            icmp_error(&mut f, &ip, &reply, &orig.reverse());
            assert!(all_valid(&f));
            let q = ip.l4 + 8;
            let orig_pkt = Frame::v4(client, server, orig_l4).ip_packet();
            assert_eq!(&f[q..q + 20 + same], &orig_pkt[..20 + same], "cut at {cut}");
        }
    }

    #[test]
    fn icmp_error_outer_and_quote() {
        // SNAT 10.0.0.1:40000 -> 192.0.2.1:1024 towards 10.0.0.2:80; a router
        // 10.9.9.9 reports the translated packet back.
        let orig = t4([10, 0, 0, 1], 40000, [10, 0, 0, 2], 80);
        let reply = t4([10, 0, 0, 2], 80, [192, 0, 2, 1], 1024);
        let sent = Frame::v4([192, 0, 2, 1], [10, 0, 0, 2], L4::tcp(1024, 80, 2)).ip_packet();
        for quoted in [quote(&sent, 8), quote(&sent, 20)] {
            let mut f = Frame::v4(
                [10, 9, 9, 9],
                [192, 0, 2, 1],
                L4::icmp_error(11, 0, &quoted),
            )
            .build();
            assert!(all_valid(&f));
            let ip = parse_frame(&f, LinkType::Ethernet).ip.unwrap();
            // The error travels in the reply direction: its tuple is the
            // reply tuple; it must leave as the reverse of the original.
            icmp_error(&mut f, &ip, &reply, &orig.reverse());
            assert!(all_valid(&f));
            assert_eq!(&f[ip.l3 + 12..ip.l3 + 16], &[10, 9, 9, 9], "router kept");
            assert_eq!(&f[ip.l3 + 16..ip.l3 + 20], &[10, 0, 0, 1]);
            let q = ip.l4 + 8;
            assert_eq!(&f[q + 12..q + 16], &[10, 0, 0, 1]);
            assert_eq!(read_be16(&f, q + 20), Some(40000));
            let h = ctrack_wire::ipv4::Ipv4Packet::new_unchecked(&f[q..q + 20]);
            assert!(h.verify_checksum());
            if quoted.len() >= 40 {
                // The quoted TCP checksum is right for the original packet.
                let orig_pkt =
                    Frame::v4([10, 0, 0, 1], [10, 0, 0, 2], L4::tcp(40000, 80, 2)).ip_packet();
                assert_eq!(&f[q..q + 40], &orig_pkt[..40]);
            }
        }
        let _ = Ipv4Addr::LOCALHOST;
    }
}
