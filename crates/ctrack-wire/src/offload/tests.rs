use std::net::Ipv6Addr;

use proptest::prelude::*;

use super::*;
use crate::build::{Ext, Frame, L4};
use crate::frame::parse_frame;

const C4: [u8; 4] = [10, 77, 0, 1];
const S4: [u8; 4] = [10, 77, 0, 2];

fn c6() -> Ipv6Addr {
    "fd00::1".parse().unwrap()
}

fn s6() -> Ipv6Addr {
    "fd00::2".parse().unwrap()
}

fn tcp() -> L4 {
    L4::tcp_seg(40000, 80, 0x018, 1000, 2000, 501, b"GET / HTTP/1.1\r\n\r\n")
}

fn sctp() -> L4 {
    // One DATA chunk of 4 bytes of payload (16 bytes, padded).
    let mut chunk = vec![0, 0x03, 0, 20];
    chunk.extend_from_slice(&[0; 12]);
    chunk.extend_from_slice(b"data");
    L4::Sctp {
        sport: 5000,
        dport: 5001,
        vtag: 0x1234_5678,
        chunks: chunk,
    }
}

/// `f` as a Linux stack hands it to a device with checksum offload: the
/// TCP or UDP checksum field holds the folded pseudo-header sum, the
/// SCTP CRC is zero.
fn unfinished(f: &[u8]) -> Vec<u8> {
    let mut f = f.to_vec();
    let ip = parse_frame(&f, LinkType::Ethernet).ip.unwrap();
    let len = (ip.end - ip.l4) as u32;
    let pseudo = match ip.version {
        IpVersion::V4 => {
            let h = &f[ip.l3..];
            checksum::pseudo_header_v4(
                [h[12], h[13], h[14], h[15]],
                [h[16], h[17], h[18], h[19]],
                ip.proto,
                len,
            )
        }
        IpVersion::V6 => {
            let h = &f[ip.l3..];
            checksum::pseudo_header_v6(
                h[8..24].try_into().unwrap(),
                h[24..40].try_into().unwrap(),
                ip.proto,
                len,
            )
        }
    };
    let at = match ip.proto {
        ip_proto::TCP => ip.l4 + 16,
        ip_proto::UDP => ip.l4 + 6,
        ip_proto::SCTP => {
            f[ip.l4 + 8..ip.l4 + 12].fill(0);
            return f;
        }
        p => panic!("protocol {p}"),
    };
    let partial = checksum::fold(pseudo);
    f[at..at + 2].copy_from_slice(&partial.to_be_bytes());
    f
}

/// Built with its checksum, unfinished, completed: the frame built.
fn round_trip(frame: &Frame, want: Completed) {
    let built = frame.build();
    let mut f = unfinished(&built);
    assert_ne!(f, built, "the unfinished frame differs");
    assert_eq!(complete(&mut f), Some(want));
    assert_eq!(f, built);
}

#[test]
fn tcp_and_udp_over_ipv4_are_completed() {
    round_trip(&Frame::v4(C4, S4, tcp()), Completed::Tcp);
    round_trip(
        &Frame::v4(C4, S4, L4::udp(5353, 53, b"a question")),
        Completed::Udp,
    );
    // Behind two VLAN tags, with IP options and link padding.
    let mut f = Frame::v4(C4, S4, tcp()).vlan(0x88a8, 10).vlan(0x8100, 20);
    f.ip_options = vec![1, 1, 1, 0];
    f.padding = 6;
    round_trip(&f, Completed::Tcp);
}

#[test]
fn tcp_and_udp_over_ipv6_are_completed() {
    round_trip(&Frame::v6(c6(), s6(), tcp()), Completed::Tcp);
    let mut f = Frame::v6(c6(), s6(), L4::udp(5353, 53, b"a question"));
    f.ext = vec![Ext::HopByHop(0), Ext::DestOpts(1)];
    round_trip(&f, Completed::Udp);
}

#[test]
fn sctp_gets_its_crc() {
    round_trip(&Frame::v4(C4, S4, sctp()), Completed::Sctp);
    round_trip(&Frame::v6(c6(), s6(), sctp()), Completed::Sctp);
}

#[test]
fn a_udp_checksum_of_zero_is_sent_as_all_ones() {
    // Two payload bytes chosen so that the checksum comes out zero: the
    // builder then writes all ones, and so must `complete`.
    let f = (0..=u16::MAX)
        .map(|v| Frame::v4(C4, S4, L4::udp(1, 2, &v.to_be_bytes())))
        .find(|f| {
            let b = f.build();
            b[40..42] == [0xff, 0xff]
        })
        .expect("some payload sums to zero");
    round_trip(&f, Completed::Udp);
}

#[test]
fn what_is_not_finished_by_offload_is_left_alone() {
    let cases = [
        // ICMP is never offloaded.
        Frame::v4(C4, S4, L4::icmp_query(8, 1, 1)).build(),
        // A first fragment: the stack finished it before fragmenting.
        {
            let mut f = Frame::v4(C4, S4, tcp());
            f.more_frags = true;
            f.build()
        },
        // A routing header: the pseudo-header's destination is elsewhere.
        {
            let mut f = Frame::v6(c6(), s6(), tcp());
            f.ext = vec![Ext::Routing];
            f.build()
        },
        // A UDP length that is not the datagram's.
        {
            let mut f = Frame::v4(C4, S4, L4::udp(1, 2, b"abcd")).build();
            f[38..40].copy_from_slice(&10u16.to_be_bytes());
            f
        },
        // ARP.
        {
            let mut f = vec![0xff; 12];
            f.extend_from_slice(&[0x08, 0x06]);
            f.extend_from_slice(&[0; 28]);
            f
        },
    ];
    for f in cases {
        let mut g = f.clone();
        assert_eq!(complete(&mut g), None, "{f:02x?}");
        assert_eq!(g, f);
    }
}

#[test]
fn a_truncated_transport_header_is_left_alone() {
    let built = Frame::v4(C4, S4, L4::tcp(1, 2, 0x002)).build();
    // Cut the TCP header to 12 bytes and say so in the IP header.
    let mut f = built[..14 + 20 + 12].to_vec();
    f[16..18].copy_from_slice(&32u16.to_be_bytes());
    let g = f.clone();
    assert_eq!(complete(&mut f), None);
    assert_eq!(f, g);
}

proptest! {
    /// Any bytes: no panic, and a frame is only ever changed in its
    /// transport checksum field (or SCTP's CRC).
    #[test]
    fn any_frame_is_safe(mut f in proptest::collection::vec(any::<u8>(), 0..200)) {
        let before = f.clone();
        let r = complete(&mut f);
        if r.is_none() {
            prop_assert_eq!(&f, &before);
        }
        let changed = f.iter().zip(&before).filter(|(a, b)| a != b).count();
        prop_assert!(changed <= 4);
    }

    /// Any TCP or UDP payload over either family round-trips.
    #[test]
    fn any_payload_round_trips(
        payload in proptest::collection::vec(any::<u8>(), 0..300),
        v6 in any::<bool>(),
        udp in any::<bool>(),
    ) {
        let l4 = if udp {
            L4::udp(1234, 53, &payload)
        } else {
            L4::tcp_seg(1234, 80, 0x018, 7, 9, 100, &payload)
        };
        let f = if v6 { Frame::v6(c6(), s6(), l4) } else { Frame::v4(C4, S4, l4) };
        let built = f.build();
        let mut g = unfinished(&built);
        let want = if udp { Completed::Udp } else { Completed::Tcp };
        prop_assert_eq!(complete(&mut g), Some(want));
        prop_assert_eq!(g, built);
    }
}

fn payload(n: usize) -> Vec<u8> {
    (0..n).map(|i| (i * 7 % 251) as u8).collect()
}

/// The frame a GSO super-packet of `l4` would have been cut into, piece
/// `i` carrying `chunk` (built whole by the frame builder).
fn piece(v6: bool, i: usize, l4: L4) -> Vec<u8> {
    let mut f = if v6 {
        Frame::v6(c6(), s6(), l4)
    } else {
        Frame::v4(C4, S4, l4)
    };
    f.ident = 0x1000u16.wrapping_add(i as u16);
    f.dont_frag = !v6;
    f.build()
}

fn cut(frame: &[u8], gso: Gso) -> Option<Vec<Vec<u8>>> {
    let mut scratch = Vec::new();
    let mut out = Vec::new();
    let n = segment(frame, gso, &mut scratch, |s| out.push(s.to_vec()))?;
    assert_eq!(n, out.len());
    Some(out)
}

#[test]
fn a_tcp_super_packet_is_cut_as_the_kernel_cuts_it() {
    for v6 in [false, true] {
        let data = payload(4000);
        // PSH and FIN on the whole, CWR too: each lands where it belongs.
        let flags = 0x010 | 0x008 | 0x001 | 0x080;
        let whole = piece(v6, 0, L4::tcp_seg(40000, 80, flags, 7000, 9, 501, &data));
        let pieces = cut(&unfinished(&whole), Gso::Tcp(1448)).expect("cut");
        assert_eq!(pieces.len(), 3);
        for (i, p) in pieces.iter().enumerate() {
            let chunk = &data[i * 1448..((i + 1) * 1448).min(data.len())];
            let mut f = 0x010;
            if i == 0 {
                f |= 0x080;
            }
            if i == 2 {
                f |= 0x008 | 0x001;
            }
            let seq = 7000 + (i * 1448) as u32;
            let want = piece(v6, i, L4::tcp_seg(40000, 80, f, seq, 9, 501, chunk));
            assert_eq!(p, &want, "v6 {v6}, piece {i}");
        }
    }
}

#[test]
fn a_udp_super_datagram_is_cut_into_datagrams() {
    for v6 in [false, true] {
        let data = payload(3000);
        let whole = piece(v6, 0, L4::udp(4433, 443, &data));
        let pieces = cut(&unfinished(&whole), Gso::Udp(1200)).expect("cut");
        assert_eq!(pieces.len(), 3);
        for (i, p) in pieces.iter().enumerate() {
            let chunk = &data[i * 1200..((i + 1) * 1200).min(data.len())];
            assert_eq!(p, &piece(v6, i, L4::udp(4433, 443, chunk)), "v6 {v6}, {i}");
        }
    }
}

#[test]
fn a_small_packet_comes_out_whole_and_finished() {
    let whole = piece(false, 0, L4::tcp_seg(1, 2, 0x018, 5, 6, 100, b"hello"));
    assert_eq!(cut(&unfinished(&whole), Gso::Tcp(1448)), Some(vec![whole]));
}

#[test]
fn what_cannot_be_cut_is_refused() {
    let tcp = piece(
        false,
        0,
        L4::tcp_seg(1, 2, 0x018, 5, 6, 100, &payload(1000)),
    );
    let udp = piece(false, 0, L4::udp(1, 2, &payload(1000)));
    assert_eq!(cut(&tcp, Gso::Tcp(0)), None, "size 0");
    assert_eq!(cut(&tcp, Gso::Tcp(1)), None, "over MAX_SEGMENTS pieces");
    assert_eq!(cut(&tcp, Gso::Udp(100)), None, "not the protocol named");
    assert_eq!(cut(&udp, Gso::Tcp(100)), None, "not the protocol named");
    assert_eq!(cut(&tcp, Gso::None), None);
    assert_eq!(cut(&tcp, Gso::Other), None);
    let mut frag = Frame::v4(C4, S4, L4::udp(1, 2, &payload(1000)));
    frag.more_frags = true;
    assert_eq!(cut(&frag.build(), Gso::Udp(100)), None, "a fragment");
    let mut routed = Frame::v6(c6(), s6(), L4::udp(1, 2, &payload(1000)));
    routed.ext = vec![Ext::Routing];
    assert_eq!(
        cut(&routed.build(), Gso::Udp(100)),
        None,
        "a routing header"
    );
}

#[test]
fn a_virtio_header_reads_in_host_order() {
    // As the kernel wrote one before a TSO frame from a veth's peer.
    let mut b = [0u8; 10];
    b[0] = 1;
    b[1] = 1;
    b[2..4].copy_from_slice(&66u16.to_ne_bytes());
    b[4..6].copy_from_slice(&1448u16.to_ne_bytes());
    b[6..8].copy_from_slice(&34u16.to_ne_bytes());
    b[8..10].copy_from_slice(&16u16.to_ne_bytes());
    let h = VnetHdr::parse(b);
    assert!(h.needs_csum());
    assert_eq!(h.gso(), Gso::Tcp(1448));
    assert_eq!((h.hdr_len, h.csum_start, h.csum_offset), (66, 34, 16));
    b[1] = 4 | 0x80;
    assert_eq!(VnetHdr::parse(b).gso(), Gso::Tcp(1448));
    b[1] = 5;
    assert_eq!(VnetHdr::parse(b).gso(), Gso::Udp(1448));
    b[1] = 3;
    assert_eq!(VnetHdr::parse(b).gso(), Gso::Other);
    b[1] = 0;
    assert_eq!(VnetHdr::parse(b).gso(), Gso::None);
}

/// The header a veth's peer hands over a frame of `gso` with.
fn rx_hdr(v6: bool, gso: Gso) -> VnetHdr {
    let (gso_type, gso_size) = match gso {
        Gso::Tcp(s) => (if v6 { 4 } else { 1 }, s),
        Gso::Udp(s) => (5, s),
        Gso::None => (0, 0),
        Gso::Other => (3, 1000),
    };
    VnetHdr {
        flags: 1,
        gso_type,
        hdr_len: 0,
        gso_size,
        csum_start: 0,
        csum_offset: 0,
    }
}

#[test]
fn a_frame_handed_over_whole_is_what_the_kernel_finishes_and_cuts_alike() {
    let tcp = |v6| {
        let flags = 0x010 | 0x008 | 0x080;
        piece(
            v6,
            0,
            L4::tcp_seg(40000, 80, flags, 7000, 9, 501, &payload(4000)),
        )
    };
    let udp = |v6| piece(v6, 0, L4::udp(4433, 443, &payload(3000)));
    for v6 in [false, true] {
        for (whole, gso, at) in [
            (tcp(v6), Gso::Tcp(1448), 16usize),
            (udp(v6), Gso::Udp(1200), 6),
        ] {
            let mut f = whole.clone();
            let h = hand_over(&mut f, rx_hdr(v6, gso)).expect("handed over");
            let l4 = if v6 { 14 + 40 } else { 14 + 20 };
            let hl = if at == 16 { 20 } else { 8 };
            assert_eq!(h.hdr.flags, 1);
            assert_eq!(h.hdr.gso_type, rx_hdr(v6, gso).gso_type);
            assert_eq!(usize::from(h.hdr.csum_start), l4);
            assert_eq!(usize::from(h.hdr.csum_offset), at);
            assert_eq!(usize::from(h.hdr.hdr_len), l4 + hl);
            let size = match gso {
                Gso::Tcp(s) | Gso::Udp(s) => usize::from(s),
                _ => unreachable!(),
            };
            assert_eq!(h.segment_ip_len, l4 - 14 + hl + size);
            // Only the checksum field changed: it now holds what a stack
            // leaves for the device ...
            assert_eq!(f, unfinished(&whole), "v6 {v6}, {gso:?}");
            // ... which finishes it, summing from csum_start, to the
            // checksum the frame had.
            let mut done = f.clone();
            let c = checksum::finish(checksum::sum(0, &done[l4..]));
            done[l4 + at..l4 + at + 2].copy_from_slice(&c.to_be_bytes());
            assert_eq!(done, whole, "v6 {v6}, {gso:?}");
            // Cut, it gives the pieces the finished frame gives.
            assert_eq!(cut(&f, gso), cut(&whole, gso));
        }
    }
    // A translated frame: its own addresses go into the sum.
    let mut moved = Frame::v4([192, 0, 2, 9], S4, L4::udp(1, 2, &payload(2500))).build();
    let want = unfinished(&moved);
    hand_over(&mut moved, rx_hdr(false, Gso::Udp(1000))).expect("handed over");
    assert_eq!(moved, want);
}

#[test]
fn what_cannot_be_handed_over_is_left_alone() {
    let tcp4 = piece(
        false,
        0,
        L4::tcp_seg(1, 2, 0x018, 5, 6, 100, &payload(3000)),
    );
    let tcp6 = piece(true, 0, L4::tcp_seg(1, 2, 0x018, 5, 6, 100, &payload(3000)));
    let udp = piece(false, 0, L4::udp(1, 2, &payload(3000)));
    let refused = |f: &[u8], h: VnetHdr, why: &str| {
        let mut g = f.to_vec();
        assert_eq!(hand_over(&mut g, h), None, "{why}");
        assert_eq!(g, f, "{why}: touched");
    };
    refused(&tcp4, rx_hdr(false, Gso::None), "no segmentation");
    refused(
        &tcp4,
        rx_hdr(false, Gso::Other),
        "UDP fragmentation offload",
    );
    refused(&tcp4, rx_hdr(false, Gso::Tcp(0)), "size 0");
    refused(
        &tcp4,
        rx_hdr(false, Gso::Udp(1000)),
        "not the protocol named",
    );
    refused(
        &udp,
        rx_hdr(false, Gso::Tcp(1000)),
        "not the protocol named",
    );
    refused(&tcp4, rx_hdr(true, Gso::Tcp(1000)), "TCP over IPv6 named");
    refused(&tcp6, rx_hdr(false, Gso::Tcp(1000)), "TCP over IPv4 named");
    let mut frag = Frame::v4(C4, S4, L4::udp(1, 2, &payload(1000)));
    frag.more_frags = true;
    refused(&frag.build(), rx_hdr(false, Gso::Udp(100)), "a fragment");
    let mut routed = Frame::v6(c6(), s6(), L4::udp(1, 2, &payload(1000)));
    routed.ext = vec![Ext::Routing];
    refused(
        &routed.build(),
        rx_hdr(true, Gso::Udp(100)),
        "a routing header",
    );
    refused(
        &tcp4[..14 + 20 + 10],
        rx_hdr(false, Gso::Tcp(1000)),
        "cut short",
    );
}

#[test]
fn a_virtio_header_writes_as_it_reads() {
    let h = VnetHdr {
        flags: 1,
        gso_type: 4 | 0x80,
        hdr_len: 74,
        gso_size: 1428,
        csum_start: 54,
        csum_offset: 16,
    };
    assert_eq!(VnetHdr::parse(h.to_bytes()), h);
}

proptest! {
    /// Any bytes, any header: handing over never panics.
    #[test]
    fn any_frame_hands_over_safely(
        mut f in proptest::collection::vec(any::<u8>(), 0..200),
        ty in any::<u8>(),
        size in any::<u16>(),
    ) {
        let h = VnetHdr { flags: 1, gso_type: ty, hdr_len: 0, gso_size: size, csum_start: 0, csum_offset: 0 };
        let _ = hand_over(&mut f, h);
    }

    /// Any payload, any size: the pieces' payloads put together are the
    /// payload, every piece is within the size, and every checksum holds.
    #[test]
    fn pieces_add_up_and_check(
        n in 0usize..5000,
        size in 128u16..3000,
        v6 in any::<bool>(),
        udp in any::<bool>(),
    ) {
        let data = payload(n);
        let (l4, gso) = if udp {
            (L4::udp(9, 10, &data), Gso::Udp(size))
        } else {
            (L4::tcp_seg(9, 10, 0x018, 1, 1, 100, &data), Gso::Tcp(size))
        };
        let whole = piece(v6, 0, l4);
        let pieces = cut(&whole, gso).expect("cut");
        let mut joined = Vec::new();
        for p in &pieces {
            let ip = parse_frame(p, LinkType::Ethernet).ip.unwrap();
            prop_assert_eq!(ip.end, p.len());
            let hl = if udp { 8 } else { 20 };
            let body = &p[ip.l4 + hl..];
            prop_assert!(body.len() <= usize::from(size));
            joined.extend_from_slice(body);
            let mut again = p.clone();
            // Completing a whole piece changes nothing: its checksum is right.
            complete(&mut again);
            prop_assert_eq!(&again, p);
            if !v6 {
                prop_assert_eq!(checksum::checksum(&p[ip.l3..ip.l4]), 0);
            }
        }
        prop_assert_eq!(joined, data);
    }
}

/// A UDP piece whose checksum comes out zero carries all ones (zero
/// means "none"), as the kernel's `udp4_gso_segment` writes
/// `CSUM_MANGLED_0`.
#[test]
fn a_udp_piece_whose_checksum_is_zero_carries_all_ones() {
    let f = (0..=u16::MAX)
        .map(|v| piece(false, 0, L4::udp(1, 2, &v.to_be_bytes())))
        .find(|b| b[40..42] == [0xff, 0xff])
        .expect("some payload sums to zero");
    assert_eq!(cut(&f, Gso::Udp(100)), Some(vec![f.clone()]));
}

/// An authentication header before a routing header is passed over by
/// its own length (4-byte words plus two), so the routing header is
/// found and the frame left alone.
#[test]
fn a_routing_header_behind_an_authentication_header_is_found() {
    let mut f = Frame::v6(c6(), s6(), L4::udp(1, 2, &payload(1000)));
    // A 16-byte destination options header (length field 1) made into a
    // 16-byte AH (length field 2).
    f.ext = vec![Ext::DestOpts(1), Ext::Routing];
    let mut b = f.build();
    assert_eq!((b[14 + 6], b[14 + 41]), (ip_proto::DSTOPTS, 1));
    b[14 + 6] = ip_proto::AH;
    b[14 + 41] = 2;
    let mut g = b.clone();
    assert_eq!(complete(&mut g), None);
    assert_eq!(g, b);
    assert_eq!(cut(&b, Gso::Udp(100)), None);
}

/// Ethernet padding after the IP packet would be summed and cut as
/// payload by the kernel: such a frame is not handed over whole.
#[test]
fn a_padded_frame_is_not_handed_over() {
    let mut f = piece(false, 0, L4::udp(1, 2, &payload(3000)));
    f.extend_from_slice(&[0; 4]);
    let mut g = f.clone();
    assert_eq!(hand_over(&mut g, rx_hdr(false, Gso::Udp(1000))), None);
    assert_eq!(g, f);
}

/// A frame whose payload is less than one segment comes out as one
/// segment of its own size: what the sending port's MTU must hold.
#[test]
fn a_short_frame_s_segment_is_its_own_size() {
    let mut f = piece(false, 0, L4::tcp_seg(1, 2, 0x018, 5, 6, 100, &payload(500)));
    let h = hand_over(&mut f, rx_hdr(false, Gso::Tcp(1448))).expect("handed over");
    assert_eq!(h.segment_ip_len, 20 + 20 + 500);
}

/// [`MAX_SEGMENTS`] pieces are cut; one more is refused.
#[test]
fn at_most_max_segments_pieces_are_cut() {
    let of = |n: usize| piece(false, 0, L4::udp(1, 2, &payload(n)));
    let pieces = cut(&of(2 * MAX_SEGMENTS), Gso::Udp(2)).expect("cut");
    assert_eq!(pieces.len(), MAX_SEGMENTS);
    assert_eq!(cut(&of(2 * MAX_SEGMENTS + 1), Gso::Udp(2)), None);
}

/// A TCP header shorter than 20 bytes (data offset under 5) is neither
/// cut nor handed over.
#[test]
fn a_tcp_header_under_twenty_bytes_is_refused() {
    let mut f = piece(
        false,
        0,
        L4::tcp_seg(1, 2, 0x018, 5, 6, 100, &payload(3000)),
    );
    f[14 + 20 + 12] = 4 << 4;
    assert_eq!(cut(&f, Gso::Tcp(1000)), None);
    let mut g = f.clone();
    assert_eq!(hand_over(&mut g, rx_hdr(false, Gso::Tcp(1000))), None);
    assert_eq!(g, f);
}

/// `frame` left alone by every path here: not completed, not cut, not
/// handed over.
fn left_alone(frame: &[u8], gso: Gso) {
    let mut g = frame.to_vec();
    assert_eq!(complete(&mut g), None, "{frame:02x?}");
    assert_eq!(g, frame);
    assert_eq!(cut(frame, gso), None);
    let v6 = frame[12..14] == [0x86, 0xdd];
    assert_eq!(hand_over(&mut g, rx_hdr(v6, gso)), None);
    assert_eq!(g, frame);
}

/// A routing header behind other extension headers is found by walking
/// each by its own length: hop-by-hop and destination options in 8-byte
/// units plus one, an authentication header in 4-byte words plus two, a
/// fragment header (an atomic one, a whole packet) 8 bytes whatever its
/// reserved byte holds.
#[test]
fn a_routing_header_is_found_behind_a_chain_of_headers() {
    let udp = || L4::udp(1, 2, &payload(1000));
    // Hop-by-hop of 16 bytes, destination options of 8.
    let mut f = Frame::v6(c6(), s6(), udp());
    f.ext = vec![Ext::HopByHop(1), Ext::DestOpts(0), Ext::Routing];
    left_alone(&f.build(), Gso::Udp(100));
    // An AH of 24 bytes (a destination options header made one: length
    // field 4, where 2 would read the same multiplied as added), then
    // destination options of 8.
    let mut f = Frame::v6(c6(), s6(), udp());
    f.ext = vec![Ext::DestOpts(2), Ext::DestOpts(0), Ext::Routing];
    let mut b = f.build();
    assert_eq!((b[14 + 6], b[14 + 41]), (ip_proto::DSTOPTS, 2));
    b[14 + 6] = ip_proto::AH;
    b[14 + 41] = 4;
    // Its body (as an AH's, opaque) of bytes that name no extension
    // header, so that a walk that lands in it stops there.
    b[14 + 42..14 + 64].fill(ip_proto::UDP);
    left_alone(&b, Gso::Udp(100));
    // An atomic fragment header whose reserved byte is set, then
    // destination options.
    let mut f = Frame::v6(c6(), s6(), udp());
    f.ext = vec![
        Ext::Fragment {
            offset: 0,
            more: false,
            ident: 7,
        },
        Ext::DestOpts(0),
        Ext::Routing,
    ];
    let mut b = f.build();
    assert_eq!(b[14 + 6], ip_proto::FRAGMENT);
    b[14 + 41] = 0x55;
    assert!(
        !parse_frame(&b, LinkType::Ethernet)
            .ip
            .unwrap()
            .frag
            .is_fragment()
    );
    left_alone(&b, Gso::Udp(100));
    // The same chains without the routing header are completed and cut.
    let mut f = Frame::v6(c6(), s6(), udp());
    f.ext = vec![Ext::HopByHop(1), Ext::DestOpts(0)];
    let built = f.build();
    let mut g = unfinished(&built);
    assert_eq!(complete(&mut g), Some(Completed::Udp));
    assert_eq!(g, built);
    assert_eq!(cut(&built, Gso::Udp(100)).map(|p| p.len()), Some(10));
}

/// A TCP segment of headers alone (its header ends where the packet
/// does) is cut into one piece and handed over; one whose header would
/// run past the packet's end is neither (its checksum, which covers the
/// segment whatever its header says, is still finished).
#[test]
fn a_tcp_header_reaching_the_packets_end_is_whole() {
    let f = piece(false, 0, L4::tcp_seg(1, 2, 0x010, 5, 6, 100, &[]));
    let pieces = cut(&f, Gso::Tcp(1000)).expect("cut");
    assert_eq!(pieces, std::slice::from_ref(&f));
    let mut g = f.clone();
    let h = hand_over(&mut g, rx_hdr(false, Gso::Tcp(1000))).expect("handed over");
    assert_eq!(h.segment_ip_len, 40);
    // Data offset 15 (60 bytes) in a segment of 20.
    let mut bad = f.clone();
    bad[14 + 20 + 12] = 15 << 4;
    assert_eq!(cut(&bad, Gso::Tcp(1000)), None);
    let mut g = bad.clone();
    assert_eq!(hand_over(&mut g, rx_hdr(false, Gso::Tcp(1000))), None);
    assert_eq!(g, bad);
}

/// An SCTP packet shorter than its common header gets no CRC (nor a
/// panic).
#[test]
fn an_sctp_packet_under_twelve_bytes_is_left_alone() {
    let built = Frame::v4(C4, S4, sctp()).build();
    let mut f = built[..14 + 20 + 8].to_vec();
    f[16..18].copy_from_slice(&28u16.to_be_bytes());
    let g = f.clone();
    assert_eq!(complete(&mut f), None);
    assert_eq!(f, g);
}

/// Only the `NEEDS_CSUM` flag (1) says a checksum is left to finish;
/// `DATA_VALID` (2) does not.
#[test]
fn only_needs_csum_asks_for_a_checksum() {
    let h = |flags| VnetHdr {
        flags,
        ..VnetHdr::default()
    };
    assert!(h(1).needs_csum() && h(3).needs_csum());
    assert!(!h(0).needs_csum() && !h(2).needs_csum());
}
