//! What tells datagrams apart (Linux's keys: for IPv4 the addresses, the
//! identification and the protocol, `ip4_frag_match`; for IPv6 the
//! addresses and the identification, `ip6frag_key`), what a fragment's
//! header must hold, and the 65535-byte bound counted as Linux counts it.

use std::net::Ipv6Addr;

use ctrack_wire::LinkType;
use ctrack_wire::build::{Ext, Frame, L4};
use ctrack_wire::ipv4;

use super::tests_overlap::outcome as name;
use super::{FragError, Offer, Reassembler};
use crate::time::Time;

const A6: &str = "fd00::1";
const B6: &str = "fd00::2";

/// An IPv4 fragment of datagram `ident`, protocol `proto`, from
/// 10.0.0.`src` to 10.0.0.2: `len` bytes of `fill` at `off`.
fn v4(src: u8, proto: u8, ident: u16, (off, len, more): (u16, usize, bool), fill: u8) -> Vec<u8> {
    let mut f = Frame::v4(
        [10, 0, 0, src],
        [10, 0, 0, 2],
        L4::Raw {
            proto,
            payload: vec![fill; len],
        },
    );
    f.ident = ident;
    f.more_frags = more;
    f.frag_offset = off;
    let mut out = f.build();
    ipv4::Ipv4Packet::new_unchecked(&mut out[14..]).fill_checksum();
    out
}

/// An IPv6 fragment of datagram `ident` from `src` to fd00::2, after the
/// extension headers `ext`: `len` bytes of `fill` at `off`.
fn v6(
    src: &str,
    ext: &[Ext],
    ident: u32,
    (off, len, more): (u16, usize, bool),
    fill: u8,
) -> Vec<u8> {
    let mut f = Frame::v6(
        src.parse().unwrap(),
        B6.parse::<Ipv6Addr>().unwrap(),
        L4::Raw {
            proto: 17,
            payload: vec![fill; len],
        },
    );
    f.ext = ext.to_vec();
    f.ext.push(Ext::Fragment {
        offset: off,
        more,
        ident,
    });
    f.build()
}

fn offer(r: &Reassembler<u32>, frame: Vec<u8>, tag: u32) -> Offer<u32> {
    r.offer(frame, tag, LinkType::Ethernet, 0, Time::from_secs(1), true)
}

/// The payload of a completed datagram, and its fragments' tags.
fn completed(o: Offer<u32>) -> (Vec<u8>, Vec<u32>) {
    let Offer::Complete(d) = o else {
        panic!("not complete: {}", name(&o))
    };
    let held: usize = d.frags.iter().map(|f| f.len).sum();
    let mut tags: Vec<u32> = d.frags.iter().map(|f| f.tag).collect();
    tags.sort_unstable();
    (d.frame[d.frame.len() - held..].to_vec(), tags)
}

/// Two IPv4 datagrams with the same addresses and identification but
/// different protocols are two datagrams, their fragments interleaved.
#[test]
fn ipv4_datagrams_of_two_protocols_are_apart() {
    let r = Reassembler::default();
    assert!(matches!(
        offer(&r, v4(1, 17, 9, (0, 1232, true), 1), 0),
        Offer::Held
    ));
    assert!(matches!(
        offer(&r, v4(1, 6, 9, (0, 1232, true), 2), 1),
        Offer::Held
    ));
    let (udp, tags) = completed(offer(&r, v4(1, 17, 9, (1232, 8, false), 3), 2));
    assert_eq!(tags, [0, 2]);
    assert_eq!(udp, [vec![1; 1232], vec![3; 8]].concat());
    let (tcp, tags) = completed(offer(&r, v4(1, 6, 9, (1232, 8, false), 4), 3));
    assert_eq!(tags, [1, 3]);
    assert_eq!(tcp, [vec![2; 1232], vec![4; 8]].concat());
    // And two sources with the same identification: apart too.
    assert!(matches!(
        offer(&r, v4(1, 17, 5, (0, 1232, true), 5), 4),
        Offer::Held
    ));
    assert!(matches!(
        offer(&r, v4(7, 17, 5, (0, 1232, true), 6), 5),
        Offer::Held
    ));
    let (first, _) = completed(offer(&r, v4(7, 17, 5, (1232, 8, false), 7), 6));
    assert_eq!(first[0], 6);
}

/// Two IPv6 datagrams from two sources with the same identification are
/// two datagrams.
#[test]
fn ipv6_datagrams_of_two_sources_are_apart() {
    let r = Reassembler::default();
    assert!(matches!(
        offer(&r, v6(A6, &[], 9, (0, 1280, true), 1), 0),
        Offer::Held
    ));
    assert!(matches!(
        offer(&r, v6("fd00::7", &[], 9, (0, 1280, true), 2), 1),
        Offer::Held
    ));
    let (one, tags) = completed(offer(&r, v6(A6, &[], 9, (1280, 8, false), 3), 2));
    assert_eq!(tags, [0, 2]);
    assert_eq!(one, [vec![1; 1280], vec![3; 8]].concat());
    let (other, tags) = completed(offer(&r, v6("fd00::7", &[], 9, (1280, 8, false), 4), 3));
    assert_eq!(tags, [1, 3]);
    assert_eq!(other, [vec![2; 1280], vec![4; 8]].concat());
}

/// An IPv4 fragment whose header checksum is wrong is refused when
/// checksums are checked (Linux drops it before defragmenting,
/// `ip_rcv_core`), and taken when they are not (offloaded).
#[test]
fn an_ipv4_fragment_with_a_bad_header_checksum_is_refused() {
    let r = Reassembler::default();
    let mut bad = v4(1, 17, 3, (0, 1232, true), 1);
    bad[14 + 10] ^= 0x55;
    let o = r.offer(
        bad.clone(),
        0,
        LinkType::Ethernet,
        0,
        Time::from_secs(1),
        true,
    );
    assert!(
        matches!(o, Offer::Refused(_, _, FragError::Malformed)),
        "{}",
        name(&o)
    );
    let o = r.offer(bad, 0, LinkType::Ethernet, 0, Time::from_secs(1), false);
    assert!(matches!(o, Offer::Held), "{}", name(&o));
}

/// The whole datagram must fit in 65535 bytes, counted as Linux counts
/// it (`nf_ct_frag6_reasm`): the extension headers before the fragment
/// header and the fragmentable part, not the fixed IPv6 header. With an
/// 8-byte hop-by-hop header, a fragmentable part of 65527 bytes fits
/// and one of 65528 does not.
#[test]
fn ipv6_s_bound_counts_the_unfragmentable_headers_not_the_fixed_one() {
    let hbh = [Ext::HopByHop(0)];
    for (end, fits) in [(65527usize, true), (65528, false)] {
        let r = Reassembler::default();
        assert!(matches!(
            offer(&r, v6(A6, &hbh, 4, (0, 1280, true), 1), 0),
            Offer::Held
        ));
        let o = offer(&r, v6(A6, &hbh, 4, (1280, end - 1280, false), 2), 1);
        if fits {
            let (payload, _) = completed(o);
            assert_eq!(payload.len(), end);
        } else {
            assert!(matches!(o, Offer::Dropped(_)), "{end}: {}", name(&o));
        }
    }
}

/// An authentication header before the fragment header (RFC 4302 puts
/// it after; Linux's `ipv6_skip_exthdr` walks it anywhere) counts its
/// length in 4-byte words plus two: a 16-byte one is passed over so that
/// the reassembled datagram names what followed the fragment header.
#[test]
fn an_authentication_header_before_the_fragment_header_is_passed_over() {
    // A 16-byte destination options header (length field 1) made into a
    // 16-byte AH (length field 2): (2 + 2) * 4.
    let as_ah = |mut f: Vec<u8>| {
        assert_eq!(f[14 + 6], ctrack_wire::ip_proto::DSTOPTS);
        f[14 + 6] = ctrack_wire::ip_proto::AH;
        assert_eq!(f[14 + 40 + 1], 1);
        f[14 + 40 + 1] = 2;
        f
    };
    let opts = [Ext::DestOpts(1)];
    let r = Reassembler::default();
    let first = as_ah(v6(A6, &opts, 11, (0, 1280, true), 1));
    assert!(matches!(offer(&r, first, 0), Offer::Held));
    let last = as_ah(v6(A6, &opts, 11, (1280, 8, false), 2));
    let Offer::Complete(d) = offer(&r, last, 1) else {
        panic!("not complete")
    };
    // The AH now names UDP, the fragment header gone.
    let ip = &d.frame[14..];
    assert_eq!((ip[6], ip[40]), (ctrack_wire::ip_proto::AH, 17));
    assert_eq!(u16::from_be_bytes([ip[4], ip[5]]), 16 + 1288);
    assert_eq!(ip.len(), 40 + 16 + 1288);
}
