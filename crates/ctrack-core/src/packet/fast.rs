//! The common case, recognised without the general machinery: an untagged
//! Ethernet II frame carrying an unfragmented IPv4 datagram without options
//! and a TCP or UDP segment that passes every check.
//!
//! The general path ([`parse_frame`](ctrack_wire::parse_frame) then
//! [`extract`](crate::packet::extract::extract)) builds a full [`ConnKey`] with
//! 128-bit addresses for every packet; profiling showed a third of the
//! per-packet time in it for this common case. This function makes the
//! same checks in one pass and returns the compact key the IPv4 table uses.
//! It never decides alone that a packet is invalid: anything unusual, or
//! failing a check, returns `None` and the general path decides, so the fast
//! path can only agree with it. A differential test (below, and in the
//! `parse` fuzz body) checks that where it answers, it answers the same.
//!
//! [`ConnKey`]: crate::ConnKey

use ctrack_wire::tcp::flags::SYN;
use ctrack_wire::tcp::ovs_wscale;
use ctrack_wire::{be16, checksum, ip_proto};

use crate::key::Tuple;
use crate::packet::extract::L4Info;
use crate::proto::tcp::Segment;

/// What the tracker needs of a packet the fast path accepted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fast {
    /// Addresses and ports.
    pub tuple: Tuple<u32>,
    /// IP protocol (TCP or UDP).
    pub proto: u8,
    /// Transport details.
    pub l4: L4Info,
    /// Bytes of the IP datagram.
    pub ip_len: u32,
}

/// The one's-complement sum of a 20-byte IPv4 header, unfolded: five
/// 32-bit words (a fixed-size version of `checksum::sum`, which loops).
#[inline(always)]
fn sum_header(h: &[u8; 34]) -> u64 {
    let w = |i: usize| u64::from(u32::from_be_bytes([h[i], h[i + 1], h[i + 2], h[i + 3]]));
    w(14) + w(18) + w(22) + w(26) + w(30)
}

/// True if the transport checksum over `l4`, with the IPv4 pseudo-header,
/// is right. Always inlined: called out of line (as the closure it was),
/// it cost a call and a spilled environment on every packet.
#[inline(always)]
fn transport_checksum_ok(src: u32, dst: u32, proto: u8, l4: &[u8]) -> bool {
    let pseudo =
        checksum::pseudo_header_v4(src.to_be_bytes(), dst.to_be_bytes(), proto, l4.len() as u32);
    checksum::is_valid(checksum::sum(pseudo, l4))
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
    const ETH: usize = 14;
    const IP: usize = 20;
    // The Ethernet and IPv4 headers as one array: the checks below need no
    // bounds checks.
    let h: &[u8; ETH + IP] = frame.get(..ETH + IP)?.try_into().ok()?;
    // IPv4 EtherType; version 4 with a header of five words (no options).
    if h[12] != 0x08 || h[13] != 0x00 || h[14] != 0x45 {
        return None;
    }
    let total = usize::from(u16::from_be_bytes([h[16], h[17]]));
    let area = frame.len() - ETH;
    // As the general path: the datagram must fit, and Open vSwitch refuses
    // more than 64 KiB of padding after it.
    if total < IP || total > area || area - total > usize::from(u16::MAX) {
        return None;
    }
    // More fragments, or an offset: a fragment.
    if (h[20] & 0x3f) != 0 || h[21] != 0 {
        return None;
    }
    if checksums && checksum::fold(sum_header(h)) != 0xffff {
        return None;
    }
    let proto = h[23];
    let src = u32::from_be_bytes([h[26], h[27], h[28], h[29]]);
    let dst = u32::from_be_bytes([h[30], h[31], h[32], h[33]]);
    let l4 = frame.get(ETH + IP..ETH + total)?;
    let csum_ok = || transport_checksum_ok(src, dst, proto, l4);
    let (sport, dport, info) = match proto {
        ip_proto::UDP => {
            let u: &[u8; 8] = l4.get(..8)?.try_into().ok()?;
            let len = usize::from(be16(u, 4));
            if len < 8 || len > l4.len() {
                return None;
            }
            // A zero checksum over IPv4 means "none".
            if checksums && (u[6] | u[7]) != 0 && !csum_ok() {
                return None;
            }
            (be16(u, 0), be16(u, 2), L4Info::Other)
        }
        ip_proto::TCP => {
            // The fixed header as one array, as the IPv4 header above, and
            // the checks of `TcpPacket::new_checked`: its field readers
            // each checked their bounds again.
            let t: &[u8; 20] = l4.get(..20)?.try_into().ok()?;
            let header_len = usize::from(t[12] >> 4) * 4;
            if header_len < 20 || header_len > l4.len() {
                return None;
            }
            if checksums && !csum_ok() {
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
    Some(Fast {
        tuple: Tuple {
            src,
            dst,
            src_l4: u32::from(sport) << 16,
            dst_l4: u32::from(dport) << 16,
        },
        proto,
        l4: info,
        ip_len: total as u32,
    })
}

/// Checks that the fast path agrees with the general one on `frame`:
/// where it answers, the general path accepts the packet with the same key,
/// transport details and length. Used by tests and the fuzz bodies.
pub fn agrees_with_general(frame: &[u8], checksums: bool) -> bool {
    let Some(f) = fast_ipv4(frame, checksums) else {
        return true;
    };
    let layers = ctrack_wire::parse_frame(frame, ctrack_wire::LinkType::Ethernet);
    match crate::packet::extract::extract(
        frame,
        &layers,
        0,
        crate::packet::extract::ExtractOptions { checksums },
    ) {
        Ok(ex) => {
            !ex.related
                && ex.key.family == crate::Family::V4
                && Tuple::<u32>::of(&ex.key) == f.tuple
                && ex.key.proto == f.proto
                && ex.l4 == f.l4
                && ex.ip_len == f.ip_len
        }
        Err(_) => false,
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

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(4096))]

        /// Valid packets with random bytes flipped: wherever the fast path
        /// answers, the general path answers the same.
        #[test]
        fn agrees_on_mutated_packets(
            tcp_pkt in any::<bool>(),
            flips in proptest::collection::vec((0usize..80, any::<u8>()), 0..4),
            cut in 0usize..8,
            pad in 0usize..8,
            checksums in any::<bool>(),
        ) {
            let mut f = if tcp_pkt { tcp() } else { udp() };
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
