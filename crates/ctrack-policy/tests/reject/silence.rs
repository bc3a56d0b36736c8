//! What is never answered.

use std::net::IpAddr;

use ctrack_policy::reject;
use ctrack_wire::build::{Ext, Frame, L4};
use ctrack_wire::tcp::flags;

use crate::answers::{data_chunk, init, sctp};
use crate::{a4, a6, v4, v6};

fn silent(f: &Frame) {
    assert_eq!(reject::reply(&f.build()), None, "{f:?}");
}

fn answered(f: &Frame) {
    assert!(reject::reply(&f.build()).is_some(), "{f:?}");
}

#[test]
fn tcp_resets_are_not_answered() {
    for fl in [flags::RST, flags::RST | flags::ACK, flags::RST | flags::SYN] {
        silent(&v4(L4::tcp(1, 2, fl)));
        silent(&v6(L4::tcp(1, 2, fl)));
    }
}

#[test]
fn icmp_errors_are_not_answered() {
    let quoted = ctrack_wire::build::quote(&v4(L4::udp(1, 2, b"x")).ip_packet(), 8);
    for (ty, code) in [(3, 3), (3, 1), (4, 0), (5, 1), (11, 0), (12, 0)] {
        silent(&v4(L4::icmp_error(ty, code, &quoted)));
    }
    let quoted = ctrack_wire::build::quote(&v6(L4::udp(1, 2, b"x")).ip_packet(), 8);
    // Every ICMPv6 type below 128 is an error, known or not.
    for ty in [0, 1, 2, 3, 4, 5, 100, 127] {
        silent(&v6(L4::icmp_error(ty, 0, &quoted)));
    }
    // But echo and the other ICMPv4 queries are answered.
    answered(&v4(L4::icmp_query(8, 1, 1)));
    answered(&v4(L4::icmp_query(0, 1, 1)));
}

#[test]
fn icmpv6_link_control_is_not_answered() {
    for ty in [130, 131, 132, 133, 134, 135, 136, 137, 143] {
        silent(&v6(L4::icmp_query(ty, 0, 0)));
    }
    answered(&v6(L4::icmp_query(138, 0, 0)));
}

#[test]
fn cut_icmp_headers_are_not_answered() {
    for n in 0..8 {
        let cut = L4::Raw {
            proto: 1,
            payload: vec![8; n],
        };
        silent(&v4(cut));
        let cut = L4::Raw {
            proto: 58,
            payload: vec![128; n],
        };
        silent(&v6(cut));
    }
}

#[test]
fn later_fragments_are_not_answered() {
    let mut f = v4(L4::Raw {
        proto: 17,
        payload: vec![0; 32],
    });
    f.frag_offset = 8;
    silent(&f);
    f.more_frags = true;
    silent(&f);
    let mut f = v6(L4::udp(1, 2, &[0; 32]));
    f.ext = vec![Ext::Fragment {
        offset: 8,
        more: false,
        ident: 1,
    }];
    silent(&f);
}

#[test]
fn group_link_addresses_are_not_answered() {
    for mac in [
        [0xff; 6],
        [0x01, 0x00, 0x5e, 0, 0, 1],
        [0x33, 0x33, 0, 0, 0, 1],
    ] {
        for mut f in [v4(L4::udp(1, 2, b"x")), v6(L4::tcp(1, 2, flags::SYN))] {
            f.eth_dst = mac;
            silent(&f);
            f.eth_dst = [0x02, 0, 0, 0, 0, 2];
            f.eth_src = mac;
            silent(&f);
        }
    }
}

#[test]
fn group_and_odd_ip_addresses_are_not_answered() {
    let unicast4 = a4("10.0.0.1");
    for dst in [
        "224.0.0.1",
        "239.255.255.250",
        "255.255.255.255",
        "240.0.0.1",
    ] {
        silent(&Frame::new(
            unicast4.into(),
            a4(dst).into(),
            L4::udp(1, 2, b"x"),
        ));
    }
    for src in [
        "0.0.0.0",
        "127.0.0.1",
        "224.0.0.5",
        "255.255.255.255",
        "250.1.1.1",
    ] {
        silent(&Frame::new(
            a4(src).into(),
            unicast4.into(),
            L4::tcp(1, 2, flags::SYN),
        ));
    }
    let unicast6 = a6("2001:db8::1");
    for dst in ["ff02::1", "ff05::1:3", "ff0e::101"] {
        silent(&Frame::new(
            unicast6.into(),
            a6(dst).into(),
            L4::udp(1, 2, b"x"),
        ));
    }
    for src in ["::", "::1", "ff02::2"] {
        silent(&Frame::new(
            a6(src).into(),
            unicast6.into(),
            L4::tcp(1, 2, flags::SYN),
        ));
    }
    // The edges of the unicast ranges are answered.
    for (s, d) in [
        ("1.0.0.0", "223.255.255.255"),
        ("126.255.255.255", "128.0.0.0"),
    ] {
        let (s, d): (IpAddr, IpAddr) = (a4(s).into(), a4(d).into());
        answered(&Frame::new(s, d, L4::udp(1, 2, b"x")));
    }
    answered(&Frame::new(
        a6("::2").into(),
        a6("fe80::1").into(),
        L4::udp(1, 2, b""),
    ));
}

#[test]
fn sctp_that_must_not_be_answered() {
    let abort = vec![6, 0, 0, 4];
    let shutdown_complete = vec![14, 0, 0, 4];
    let cookie_ack = vec![11, 0, 0, 4];
    for tail in [&abort, &shutdown_complete, &cookie_ack] {
        silent(&v4(sctp(9, tail.clone())));
        // Anywhere among the chunks, not only first.
        let mut chunks = data_chunk();
        chunks.extend_from_slice(tail);
        silent(&v6(sctp(9, chunks)));
    }
    // No chunk at all, or a cut chunk header.
    silent(&v4(sctp(9, vec![])));
    silent(&v4(sctp(9, vec![0, 0, 0])));
    // An INIT cut before the end of its fixed fields.
    let mut cut = init(0x1122_3344);
    cut.truncate(4 + 15);
    silent(&v4(sctp(0, cut)));
    // The common header cut short.
    silent(&v4(L4::Raw {
        proto: 132,
        payload: vec![0; 11],
    }));
    // A chunk walk that stops at a bad length does not look further.
    let mut chunks = vec![0, 0, 0, 2];
    chunks.extend_from_slice(&abort);
    answered(&v4(sctp(9, chunks)));
}

#[test]
fn non_ip_and_malformed_frames_are_not_answered() {
    let mut arp = v4(L4::udp(1, 2, b"x")).build();
    arp[12..14].copy_from_slice(&[0x08, 0x06]);
    assert_eq!(reject::reply(&arp), None);
    let good = v4(L4::tcp(1, 2, flags::SYN)).build();
    // The TCP header cut: the IP length still says 40, so shorten it too.
    let mut cut = good[..14 + 20 + 19].to_vec();
    cut[16..18].copy_from_slice(&39u16.to_be_bytes());
    assert_eq!(reject::reply(&cut), None);
    // A data offset below 5.
    let mut bad = good.clone();
    bad[14 + 20 + 12] = 0x40;
    assert_eq!(reject::reply(&bad), None);
    for n in 0..good.len() {
        assert_eq!(reject::reply(&good[..n]), None, "{n} bytes");
    }
    assert_eq!(reject::reply(&[]), None);
}
