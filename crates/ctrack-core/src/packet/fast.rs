//! The common case, recognised without the general machinery: an untagged
//! Ethernet II frame carrying an unfragmented IPv4 datagram without options
//! and a TCP or UDP segment that passes every check ([`fast_ipv4`]); or an
//! IPv6 packet whose first header is that segment ([`fast_ipv6`]).
//!
//! The general path ([`parse_frame`](ctrack_wire::parse_frame) then
//! [`extract`](crate::packet::extract::extract)) builds a full [`ConnKey`] with
//! 128-bit addresses for every packet; profiling showed a third of the
//! per-packet time in it for this common case. This function makes the
//! same checks in one pass and returns the compact key the family's table
//! uses.
//! It never decides alone that a packet is invalid: anything unusual, or
//! failing a check, returns `None` and the general path decides, so the fast
//! path can only agree with it. A differential test (below, and in the
//! `parse` fuzz body) checks that where it answers, it answers the same.
//!
//! [`ConnKey`]: crate::ConnKey

use ctrack_wire::tcp::flags::SYN;
use ctrack_wire::tcp::ovs_wscale;
use ctrack_wire::{be16, checksum, ip_proto};

use crate::key::{Tuple, V6};
use crate::packet::extract::L4Info;
use crate::proto::tcp::Segment;

/// What the tracker needs of a packet the fast path accepted (of IPv4 by
/// default, or of IPv6 with `A` = [`V6`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fast<A = u32> {
    /// Addresses and ports.
    pub tuple: Tuple<A>,
    /// IP protocol (TCP or UDP).
    pub proto: u8,
    /// Transport details.
    pub l4: L4Info,
    /// Bytes of the IP datagram.
    pub ip_len: u32,
}

/// The one's-complement sum of a 20-byte IPv4 header, unfolded: five
/// 32-bit words (a fixed-size version of `checksum::sum`, which loops),
/// read as they lie (little-endian, as [`checksum::sum_le`]: a sum only
/// checked, never written, needs no byte swaps).
#[inline(always)]
fn sum_header(h: &[u8; 34]) -> u64 {
    let w = |i: usize| u64::from(u32::from_le_bytes([h[i], h[i + 1], h[i + 2], h[i + 3]]));
    w(14) + w(18) + w(22) + w(26) + w(30)
}

/// The packet's key and transport details, if it is the common case and
/// passes every check; `None` otherwise (the general path then decides).
#[inline]
pub fn fast_ipv4(frame: &[u8], checksums: bool) -> Option<Fast> {
    fast_ipv4_inline(frame, checksums)
}

/// [`fast_ipv4`], inlined where it is called: for a caller that stores
/// what it reads elsewhere, so that it is built where it is stored.
#[inline(always)]
pub(crate) fn fast_ipv4_inline(frame: &[u8], checksums: bool) -> Option<Fast> {
    // Untagged, a five-word header, whole, not a fragment: the bounds of
    // the general path (the datagram fits; Open vSwitch refuses more than
    // 64 KiB of padding after it).
    let (h, l4) = ctrack_wire::plain_ipv4(frame)?;
    if checksums && checksum::fold(sum_header(h)) != 0xffff {
        return None;
    }
    let proto = h[23];
    let (src_bytes, dst_bytes) = ([h[26], h[27], h[28], h[29]], [h[30], h[31], h[32], h[33]]);
    let (src, dst) = (u32::from_be_bytes(src_bytes), u32::from_be_bytes(dst_bytes));
    // `l4` lies within the datagram, whose length is 16 bits.
    let pseudo = || checksum::pseudo_header_v4_le(src_bytes, dst_bytes, proto, l4.len() as u16);
    // A zero UDP checksum over IPv4 means "none".
    let (sport, dport, info) = transport(proto, l4, checksums, true, pseudo)?;
    Some(Fast {
        tuple: Tuple {
            src,
            dst,
            src_l4: u32::from(sport) << 16,
            dst_l4: u32::from(dport) << 16,
        },
        proto,
        l4: info,
        // The header's five words and the transport bytes: the datagram.
        ip_len: (20 + l4.len()) as u32,
    })
}

/// The common IPv6 case, as [`fast_ipv4`] for IPv4: an untagged Ethernet
/// II frame carrying an IPv6 packet whose first header is TCP or UDP (no
/// extension header) and passes every check; `None` otherwise, and the
/// general path decides.
#[inline]
pub fn fast_ipv6(frame: &[u8], checksums: bool) -> Option<Fast<V6>> {
    fast_ipv6_inline(frame, checksums)
}

/// [`fast_ipv6`], inlined into its caller (the burst's in-place reader).
#[inline(always)]
pub(crate) fn fast_ipv6_inline(frame: &[u8], checksums: bool) -> Option<Fast<V6>> {
    const ETH: usize = 14;
    const IP: usize = 40;
    // Untagged, whole (as the general path: at most 64 KiB of padding
    // after it, Open vSwitch's bound), TCP, UDP or SCTP next.
    let h = ctrack_wire::plain_ipv6(frame)?;
    let total = IP + usize::from(u16::from_be_bytes([h[18], h[19]]));
    let proto = h[20];
    if proto != ip_proto::TCP && proto != ip_proto::UDP {
        return None;
    }
    let src: &[u8; 16] = h[22..38].try_into().ok()?;
    let dst: &[u8; 16] = h[38..54].try_into().ok()?;
    let l4 = frame.get(ETH + IP..ETH + total)?;
    let pseudo = || checksum::pseudo_header_v6_le(src, dst, proto, l4.len() as u32);
    // Over IPv6 a UDP checksum is never optional.
    let (sport, dport, info) = transport(proto, l4, checksums, false, pseudo)?;
    let addr = |a: &[u8; 16]| {
        let w = |i: usize| u32::from_be_bytes([a[i], a[i + 1], a[i + 2], a[i + 3]]);
        V6([w(0), w(4), w(8), w(12)])
    };
    Some(Fast {
        tuple: Tuple {
            src: addr(src),
            dst: addr(dst),
            src_l4: u32::from(sport) << 16,
            dst_l4: u32::from(dport) << 16,
        },
        proto,
        l4: info,
        ip_len: total as u32,
    })
}

/// The ports and details of a TCP or UDP header `l4` (of protocol
/// `proto`) that passes every check, its checksum verified with the
/// pseudo-header sum `pseudo` (little-endian, as [`checksum::sum_le`])
/// when `checksums` says so (for UDP not when
/// its checksum is zero and `zero_is_none`, as over IPv4); `None` for
/// anything else.
#[inline(always)]
fn transport(
    proto: u8,
    l4: &[u8],
    checksums: bool,
    zero_is_none: bool,
    pseudo: impl FnOnce() -> u64,
) -> Option<(u16, u16, L4Info)> {
    // Written out at each use rather than as a closure: out of line, as a
    // closure it was, it cost a call and a spilled environment on every
    // packet (726 against 751 instructions a packet, callgrind on `bench
    // lookup --conns 10000`).
    let (sport, dport, info) = match proto {
        ip_proto::UDP => {
            let u: &[u8; 8] = l4.get(..8)?.try_into().ok()?;
            let len = usize::from(be16(u, 4));
            if len < 8 || len > l4.len() {
                return None;
            }
            let none = zero_is_none && (u[6] | u[7]) == 0;
            if checksums && !none && !checksum::is_valid(pseudo() + checksum::sum_le(l4)) {
                return None;
            }
            (be16(u, 0), be16(u, 2), L4Info::Other)
        }
        ip_proto::TCP => {
            // The fixed header as one array, as the IP headers, and the
            // checks of `TcpPacket::new_checked`: its field readers each
            // checked their bounds again.
            let t: &[u8; 20] = l4.get(..20)?.try_into().ok()?;
            let header_len = usize::from(t[12] >> 4) * 4;
            if header_len < 20 || header_len > l4.len() {
                return None;
            }
            if checksums && !checksum::is_valid(pseudo() + checksum::sum_le(l4)) {
                return None;
            }
            let word = |i: usize| u32::from_be_bytes([t[i], t[i + 1], t[i + 2], t[i + 3]]);
            let flags = u16::from_be_bytes([t[12], t[13]]) & 0x0fff;
            let seg = Segment {
                flags,
                seq: word(4),
                ack: word(8),
                win: u16::from_be_bytes([t[14], t[15]]),
                payload_len: (l4.len() - header_len) as u32,
                // As `proto::tcp::syn_wscale`: a SYN's option only.
                wscale: match flags & SYN {
                    0 => None,
                    _ => ovs_wscale(l4.get(20..header_len)?),
                },
            };
            let port = |i: usize| u16::from_be_bytes([t[i], t[i + 1]]);
            (port(0), port(2), L4Info::Tcp(seg))
        }
        _ => return None,
    };
    if sport == 0 || dport == 0 {
        return None;
    }
    Some((sport, dport, info))
}

/// Checks that the fast paths agree with the general one on `frame`:
/// where one answers, the general path accepts the packet with the same
/// key, transport details and length. Used by tests and the fuzz bodies.
pub fn agrees_with_general(frame: &[u8], checksums: bool) -> bool {
    let v4 = fast_ipv4(frame, checksums);
    let v6 = fast_ipv6(frame, checksums);
    agree(frame, checksums, v4, v6)
}

/// [`agrees_with_general`] on the fast paths' answers `v4` and `v6`
/// about `frame`: apart, so that a test can hand it answers that are
/// wrong and see it say so.
fn agree(frame: &[u8], checksums: bool, v4: Option<Fast>, v6: Option<Fast<V6>>) -> bool {
    if v4.is_none() && v6.is_none() {
        return true;
    }
    if v4.is_some() && v6.is_some() {
        // One frame cannot be both.
        return false;
    }
    let layers = ctrack_wire::parse_frame(frame, ctrack_wire::LinkType::Ethernet);
    let ex = match crate::packet::extract::extract(
        frame,
        &layers,
        0,
        crate::packet::extract::ExtractOptions { checksums },
    ) {
        Ok(ex) if !ex.related => ex,
        _ => return false,
    };
    let same = |proto: u8, l4: L4Info, ip_len: u32| {
        ex.key.proto == proto && ex.l4 == l4 && ex.ip_len == ip_len
    };
    match (v4, v6) {
        (Some(f), _) => {
            ex.key.family == crate::Family::V4
                && Tuple::<u32>::of(&ex.key) == f.tuple
                && same(f.proto, f.l4, f.ip_len)
        }
        (_, Some(f)) => {
            ex.key.family == crate::Family::V6
                && Tuple::<V6>::of(&ex.key) == f.tuple
                && same(f.proto, f.l4, f.ip_len)
        }
        (None, None) => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ctrack_wire::build::{Frame, L4};
    use proptest::prelude::*;

    fn udp() -> Vec<u8> {
        Frame::v4([10, 0, 0, 1], [10, 0, 0, 2], L4::udp(1000, 53, b"hello")).build()
    }

    fn tcp() -> Vec<u8> {
        Frame::v4(
            [10, 0, 0, 1],
            [10, 0, 0, 2],
            L4::tcp_seg(40000, 80, 0x18, 7, 9, 512, b"GET /"),
        )
        .build()
    }

    #[test]
    fn accepts_the_common_case() {
        let f = fast_ipv4(&udp(), true).unwrap();
        assert_eq!(f.tuple.src_l4 >> 16, 1000);
        assert_eq!(f.proto, ip_proto::UDP);
        assert!(agrees_with_general(&udp(), true));
        let f = fast_ipv4(&tcp(), true).unwrap();
        assert!(matches!(f.l4, L4Info::Tcp(s) if s.payload_len == 5 && s.seq == 7));
        assert!(agrees_with_general(&tcp(), true));
    }

    /// The window-scale option is read from a SYN only (the one segment
    /// whose option counts), by the fast path and the general one alike.
    #[test]
    fn reads_the_window_scale_of_a_syn_only() {
        use ctrack_wire::tcp::flags::{ACK, SYN};
        let with_wscale = |flags: u16| {
            let mut l4 = L4::tcp_seg(40000, 80, flags, 7, 9, 512, b"");
            if let L4::Tcp { options, .. } = &mut l4 {
                *options = vec![1, 3, 3, 7];
            }
            Frame::v4([10, 0, 0, 1], [10, 0, 0, 2], l4).build()
        };
        for (flags, expected) in [(SYN, Some(7)), (SYN | ACK, Some(7)), (ACK, None)] {
            let f = with_wscale(flags);
            let fast = fast_ipv4(&f, true).unwrap();
            assert!(
                matches!(fast.l4, L4Info::Tcp(s) if s.wscale == expected),
                "{flags:#x}"
            );
            assert!(agrees_with_general(&f, true), "{flags:#x}");
        }
    }

    fn v6(l4: L4) -> Vec<u8> {
        let a = |last: u16| std::net::Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, last);
        Frame::v6(a(1), a(2), l4).build()
    }

    fn udp6() -> Vec<u8> {
        v6(L4::udp(1000, 53, b"hello"))
    }

    fn tcp6() -> Vec<u8> {
        v6(L4::tcp_seg(40000, 80, 0x18, 7, 9, 512, b"GET /"))
    }

    #[test]
    fn accepts_the_common_ipv6_case() {
        let f = fast_ipv6(&udp6(), true).unwrap();
        assert_eq!(f.tuple.src_l4 >> 16, 1000);
        assert_eq!(f.tuple.dst, V6([0xfd00_0000, 0, 0, 2]));
        assert_eq!(f.ip_len, 40 + 8 + 5);
        assert!(fast_ipv4(&udp6(), true).is_none());
        assert!(fast_ipv6(&udp(), true).is_none());
        let f = fast_ipv6(&tcp6(), true).unwrap();
        assert!(matches!(f.l4, L4Info::Tcp(s) if s.payload_len == 5 && s.seq == 7));
        for frame in [udp6(), tcp6()] {
            assert!(agrees_with_general(&frame, true));
        }
    }

    #[test]
    fn leaves_the_rest_of_ipv6_to_the_general_path() {
        // A hop-by-hop options header before UDP.
        let mut ext = udp6();
        ext[20] = 0;
        ext.splice(54..54, [17u8, 0, 1, 4, 0, 0, 0, 0]);
        let len = u16::from_be_bytes([ext[18], ext[19]]) + 8;
        ext[18..20].copy_from_slice(&len.to_be_bytes());
        assert!(fast_ipv6(&ext, true).is_none());
        // A zero UDP checksum is no checksum over IPv4, a wrong one over
        // IPv6: the general path says so.
        let mut zero = udp6();
        zero[60] = 0;
        zero[61] = 0;
        assert!(fast_ipv6(&zero, true).is_none());
        assert!(fast_ipv6(&zero, false).is_some());
        let layers = ctrack_wire::parse_frame(&zero, ctrack_wire::LinkType::Ethernet);
        let opts = crate::packet::extract::ExtractOptions { checksums: true };
        assert_eq!(
            crate::packet::extract::extract(&zero, &layers, 0, opts),
            Err(crate::verdict::InvalidReason::BadL4Checksum)
        );
        // Truncated: the payload length says more than the frame holds.
        let mut short = udp6();
        short.truncate(short.len() - 1);
        assert!(fast_ipv6(&short, true).is_none());
        let icmp = v6(L4::icmp_query(128, 1, 1));
        assert!(fast_ipv6(&icmp, true).is_none());
        for f in [ext, zero, short, icmp] {
            assert!(agrees_with_general(&f, true));
            assert!(agrees_with_general(&f, false));
        }
    }

    #[test]
    fn leaves_the_rest_to_the_general_path() {
        let vlan = Frame::v4([10, 0, 0, 1], [10, 0, 0, 2], L4::udp(1, 2, b"x"))
            .vlan(0x8100, 5)
            .build();
        assert!(fast_ipv4(&vlan, true).is_none());
        let mut bad = udp();
        bad[24] ^= 1; // IPv4 header checksum
        assert!(fast_ipv4(&bad, true).is_none());
        assert!(fast_ipv4(&bad, false).is_some());
        let mut frag = udp();
        frag[20] |= 0x20; // more fragments
        assert!(fast_ipv4(&frag, false).is_none());
        let mut zero = udp();
        zero[34] = 0;
        zero[35] = 0; // source port 0
        assert!(fast_ipv4(&zero, false).is_none());
        let icmp = Frame::v4([10, 0, 0, 1], [10, 0, 0, 2], L4::icmp_query(8, 1, 1)).build();
        assert!(fast_ipv4(&icmp, true).is_none());
    }

    /// The IPv4 header's checksum is over all five words: an
    /// identification and the don't-fragment flag (zero in the frames
    /// above) count as much as the addresses. (Mutation round 66: the
    /// second word subtracted went unseen.)
    #[test]
    fn checks_every_word_of_the_ipv4_header() {
        let mut b = Frame::v4([10, 0, 0, 1], [10, 0, 0, 2], L4::udp(1000, 53, b"hello"));
        b.ident = 0x1234;
        b.dont_frag = true;
        let f = b.build();
        assert_eq!(&f[18..21], &[0x12, 0x34, 0x40]);
        assert!(fast_ipv4(&f, true).is_some());
        assert!(agrees_with_general(&f, true));
        for at in [18, 19, 22] {
            // The identification's bytes and the TTL, changed under the
            // same checksum.
            let mut bad = f.clone();
            bad[at] ^= 0x10;
            assert!(fast_ipv4(&bad, true).is_none(), "byte {at}");
            assert!(fast_ipv4(&bad, false).is_some(), "byte {at}");
            assert!(agrees_with_general(&bad, true), "byte {at}");
        }
    }

    /// A UDP header's length and checksum: eight bytes (no payload) is a
    /// datagram the fast path takes, fewer the general path's to refuse; a
    /// checksum is "none" over IPv4 when it is zero, not when its two
    /// bytes are alike. (Mutation round 66.)
    #[test]
    fn reads_the_udp_length_and_checksum() {
        let empty = Frame::v4([10, 0, 0, 1], [10, 0, 0, 2], L4::udp(1000, 53, b"")).build();
        let f = fast_ipv4(&empty, true).unwrap();
        assert_eq!(f.ip_len, 28);
        assert!(agrees_with_general(&empty, true));
        let mut short = udp();
        short[38..40].copy_from_slice(&7u16.to_be_bytes());
        assert!(fast_ipv4(&short, false).is_none());
        assert!(agrees_with_general(&short, false));
        let mut alike = udp();
        assert_ne!(alike[40..42], [0x55, 0x55]);
        alike[40..42].copy_from_slice(&[0x55, 0x55]);
        assert!(fast_ipv4(&alike, true).is_none());
        assert!(fast_ipv4(&alike, false).is_some());
        assert!(agrees_with_general(&alike, true));
        let mut zero = udp();
        zero[40..42].copy_from_slice(&[0, 0]);
        assert!(fast_ipv4(&zero, true).is_some());
        assert!(agrees_with_general(&zero, true));
    }

    /// The differential oracle the tests and fuzz bodies rely on finds
    /// out an answer wrong in any one part: the ports, the transport
    /// details, the length, the family, both families at once, or a key
    /// for an ICMP error (which the general path looks up as related).
    /// (Mutation round 66: an oracle that always agreed went unseen.)
    #[test]
    fn the_oracle_finds_out_wrong_answers() {
        let (f4, f6) = (udp(), udp6());
        let right = fast_ipv4(&f4, true).unwrap();
        let right6 = fast_ipv6(&f6, true).unwrap();
        assert!(agree(&f4, true, Some(right), None));
        assert!(agree(&f6, true, None, Some(right6)));
        let tcp_l4 = fast_ipv4(&tcp(), true).unwrap().l4;
        let port = |t: Tuple<u32>| Tuple {
            dst_l4: 54 << 16,
            ..t
        };
        let wrong = [
            Fast {
                tuple: port(right.tuple),
                ..right
            },
            Fast {
                l4: tcp_l4,
                ..right
            },
            Fast {
                ip_len: right.ip_len + 1,
                ..right
            },
        ];
        for w in wrong {
            assert!(!agree(&f4, true, Some(w), None), "{w:?}");
        }
        let wrong6 = [
            Fast {
                tuple: Tuple {
                    dst_l4: 54 << 16,
                    ..right6.tuple
                },
                ..right6
            },
            Fast {
                l4: tcp_l4,
                ..right6
            },
            Fast {
                ip_len: right6.ip_len + 1,
                ..right6
            },
        ];
        for w in wrong6 {
            assert!(!agree(&f6, true, None, Some(w)), "{w:?}");
        }
        assert!(!agree(&f4, true, Some(right), Some(right6)));
        assert!(!agree(&f6, true, Some(right), None));
        assert!(!agree(&f4, true, None, Some(right6)));
        // An ICMP error quoting the UDP datagram, answered with the very
        // key the general path finds in it.
        let ip = Frame::v4([10, 0, 0, 1], [10, 0, 0, 2], L4::udp(1000, 53, b"hello")).ip_packet();
        let err = Frame::v4(
            [10, 0, 0, 2],
            [10, 0, 0, 1],
            L4::icmp_error(3, 3, &ctrack_wire::build::quote(&ip, 8)),
        )
        .build();
        let layers = ctrack_wire::parse_frame(&err, ctrack_wire::LinkType::Ethernet);
        let opts = crate::packet::extract::ExtractOptions { checksums: true };
        let ex = crate::packet::extract::extract(&err, &layers, 0, opts).unwrap();
        assert!(ex.related);
        let as_found = Fast {
            tuple: Tuple::<u32>::of(&ex.key),
            proto: ex.key.proto,
            l4: ex.l4,
            ip_len: ex.ip_len,
        };
        assert!(!agree(&err, true, Some(as_found), None));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(4096))]

        /// Valid packets with random bytes flipped: wherever the fast path
        /// answers, the general path answers the same.
        #[test]
        fn agrees_on_mutated_packets(
            tcp_pkt in any::<bool>(),
            ipv6 in any::<bool>(),
            flips in proptest::collection::vec((0usize..100, any::<u8>()), 0..4),
            cut in 0usize..8,
            pad in 0usize..8,
            checksums in any::<bool>(),
        ) {
            let mut f = match (ipv6, tcp_pkt) {
                (false, false) => udp(),
                (false, true) => tcp(),
                (true, false) => udp6(),
                (true, true) => tcp6(),
            };
            for (at, x) in flips {
                if at < f.len() {
                    f[at] ^= x;
                }
            }
            let n = f.len().saturating_sub(cut);
            f.truncate(n);
            f.extend(std::iter::repeat_n(0u8, pad));
            prop_assert!(agrees_with_general(&f, checksums));
        }
    }
}
