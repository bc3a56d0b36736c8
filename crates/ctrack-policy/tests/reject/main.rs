//! The answers of `reject::reply`, read back with etherparse and ctrack-wire
//! and checked field by field, every checksum recomputed here from scratch
//! (RFC 1071 sums, a bitwise CRC32c): nothing is taken from the code under
//! test.

mod answers;
mod props;
mod silence;

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use ctrack_policy::reject;
use ctrack_wire::build::{Frame, L4};
use ctrack_wire::{LinkType, parse_frame};
use etherparse::{NetSlice, SlicedPacket};

/// An answer, read back: its link and IP fields and its transport bytes.
#[derive(Debug)]
pub struct Seen {
    pub eth_dst: [u8; 6],
    pub eth_src: [u8; 6],
    /// The bytes of the VLAN tags, as on the wire.
    pub tags: Vec<u8>,
    pub src: IpAddr,
    pub dst: IpAddr,
    pub ttl: u8,
    pub proto: u8,
    pub l4: Vec<u8>,
}

/// RFC 1071, done the plain way: 16-bit words, an odd last byte padded.
pub fn ones_sum(data: &[u8]) -> u32 {
    data.chunks(2)
        .map(|w| u32::from(w[0]) << 8 | u32::from(*w.get(1).unwrap_or(&0)))
        .sum()
}

pub fn folds_to_ffff(mut s: u32) -> bool {
    while s > 0xffff {
        s = (s & 0xffff) + (s >> 16);
    }
    s == 0xffff
}

/// The pseudo-header for an upper-layer area of `len` bytes.
pub fn pseudo(src: IpAddr, dst: IpAddr, proto: u8, len: usize) -> Vec<u8> {
    let mut p = Vec::new();
    match (src, dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            p.extend_from_slice(&s.octets());
            p.extend_from_slice(&d.octets());
            p.extend_from_slice(&[0, proto]);
            p.extend_from_slice(&(len as u16).to_be_bytes());
        }
        (IpAddr::V6(s), IpAddr::V6(d)) => {
            p.extend_from_slice(&s.octets());
            p.extend_from_slice(&d.octets());
            p.extend_from_slice(&(len as u32).to_be_bytes());
            p.extend_from_slice(&[0, 0, 0, proto]);
        }
        _ => panic!("mixed families"),
    }
    p
}

/// CRC32c (Castagnoli, reflected polynomial 0x82f63b78), bit by bit.
pub fn crc32c(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in data {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0x82f6_3b78
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

/// True if the transport checksum of `l4` is right: the Internet checksum
/// with the pseudo-header (none for ICMPv4) or SCTP's CRC32c.
pub fn l4_checksum_ok(src: IpAddr, dst: IpAddr, proto: u8, l4: &[u8]) -> bool {
    match proto {
        1 => folds_to_ffff(ones_sum(l4)),
        132 => {
            let mut zeroed = l4.to_vec();
            zeroed[8..12].fill(0);
            l4[8..12] == crc32c(&zeroed).to_le_bytes()
        }
        _ => folds_to_ffff(ones_sum(&pseudo(src, dst, proto, l4.len())) + ones_sum(l4)),
    }
}

/// Reads an answer back with etherparse, checks what every answer shares
/// (the IP header as pinctrl builds it, no padding, valid checksums, the
/// same layout as ctrack-wire sees it), and returns the rest.
pub fn read(answer: &[u8]) -> Seen {
    let p = SlicedPacket::from_ethernet(answer).expect("etherparse reads the answer");
    let Some(etherparse::LinkSlice::Ethernet2(eth)) = &p.link else {
        panic!("not Ethernet II")
    };
    let tags_end = 12 + 4 * p.link_exts.len();
    let (src, dst, ttl, payload) = match p.net.as_ref().expect("an IP layer") {
        NetSlice::Ipv4(v4) => {
            let h = v4.header();
            assert_eq!(h.ihl(), 5, "no options");
            assert_eq!(h.slice()[1], 0xc0, "TOS: DSCP CS6");
            assert!(h.dont_fragment() && !h.more_fragments());
            assert_eq!(h.fragments_offset().value(), 0);
            assert_eq!(h.identification(), 0);
            assert!(folds_to_ffff(ones_sum(h.slice())), "IPv4 header checksum");
            assert_eq!(usize::from(h.total_len()), answer.len() - tags_end - 2);
            let a = (h.source_addr().into(), h.destination_addr().into(), h.ttl());
            (a.0, a.1, a.2, v4.payload())
        }
        NetSlice::Ipv6(v6) => {
            let h = v6.header();
            assert_eq!(h.traffic_class(), 0);
            assert_eq!(h.flow_label().value(), 0);
            assert_eq!(
                usize::from(h.payload_length()) + 40,
                answer.len() - tags_end - 2
            );
            assert!(v6.extensions().is_empty(), "no extension headers");
            let a = (
                h.source_addr().into(),
                h.destination_addr().into(),
                h.hop_limit(),
            );
            (a.0, a.1, a.2, v6.payload())
        }
        NetSlice::Arp(_) => panic!("ARP"),
    };
    let proto = payload.ip_number.0;
    let l4 = payload.payload.to_vec();
    assert!(l4_checksum_ok(src, dst, proto, &l4), "transport checksum");
    // ctrack-wire reads the same layers.
    let ip = parse_frame(answer, LinkType::Ethernet)
        .ip
        .expect("ctrack-wire reads it");
    assert_eq!(
        (ip.proto, ip.end, ip.l4_len()),
        (proto, answer.len(), l4.len())
    );
    Seen {
        eth_dst: eth.destination(),
        eth_src: eth.source(),
        tags: answer[12..tags_end].to_vec(),
        src,
        dst,
        ttl,
        proto,
        l4,
    }
}

/// The answer to `frame`, read back, after checking that the link and IP
/// addresses are those of `frame` swapped, and that the answer itself is
/// never answered (two ctracks cannot ping-pong).
pub fn answer(frame: &Frame) -> Seen {
    let bytes = frame.build();
    let out = reject::reply(&bytes).expect("an answer");
    let seen = read(&out);
    assert_eq!((seen.eth_dst, seen.eth_src), (frame.eth_src, frame.eth_dst));
    assert_eq!((seen.src, seen.dst), (frame.dst, frame.src));
    assert_eq!(seen.tags, bytes[12..12 + 4 * frame.vlans.len()]);
    assert_eq!(reject::reply(&out), None, "an answer is never answered");
    seen
}

pub fn v4(l4: L4) -> Frame {
    Frame::v4([10, 0, 0, 1], [10, 0, 0, 2], l4)
}

pub fn v6(l4: L4) -> Frame {
    Frame::v6(a6("fd00::1"), a6("fd00:1::2"), l4)
}

pub fn a6(s: &str) -> Ipv6Addr {
    s.parse().expect("an IPv6 address")
}

pub fn a4(s: &str) -> Ipv4Addr {
    s.parse().expect("an IPv4 address")
}
