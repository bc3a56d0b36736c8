//! What each kind of rejected packet gets back.

use ctrack_policy::reject::{self, ICMP_TTL, RESET_TTL};
use ctrack_wire::be32;
use ctrack_wire::build::{Ext, L4};
use ctrack_wire::ethernet::ethertype;
use ctrack_wire::tcp::flags;

use crate::{answer, v4, v6};

/// The RST's fields: ports, seq, ack, flags; and its fixed shape.
fn rst(l4: &[u8]) -> (u16, u16, u32, u32, u16) {
    assert_eq!(l4.len(), 20, "header only");
    assert_eq!(l4[12] >> 4, 5, "data offset 5");
    assert_eq!(&l4[14..16], &[0, 0], "window 0");
    assert_eq!(&l4[18..20], &[0, 0], "urgent pointer 0");
    let p = |at: usize| u16::from_be_bytes([l4[at], l4[at + 1]]);
    (p(0), p(2), be32(l4, 4), be32(l4, 8), p(12) & 0x0fff)
}

#[test]
fn tcp_syn_gets_rst_ack_v4_tagged() {
    let syn = L4::tcp_seg(40000, 80, flags::SYN, 1000, 0, 65535, b"");
    let s = answer(&v4(syn).vlan(ethertype::VLAN, 42));
    assert_eq!((s.proto, s.ttl), (6, RESET_TTL));
    assert_eq!(rst(&s.l4), (80, 40000, 0, 1001, flags::RST | flags::ACK));
}

#[test]
fn tcp_with_ack_gets_rst_at_its_ack_v6_qinq() {
    let seg = L4::tcp_seg(
        443,
        51000,
        flags::ACK | flags::PSH,
        5,
        0xdead_beef,
        100,
        b"0123456789",
    );
    let f = v6(seg)
        .vlan(ethertype::QINQ, 100)
        .vlan(ethertype::VLAN, 0x2000 | 7);
    let s = answer(&f);
    assert_eq!((s.proto, s.ttl), (6, RESET_TTL));
    assert_eq!(rst(&s.l4), (51000, 443, 0xdead_beef, 0, flags::RST));
}

#[test]
fn tcp_without_ack_acknowledges_payload_syn_and_fin_wrapping() {
    // SYN and FIN count one each, the payload its length, modulo 2^32.
    let seg = L4::tcp_seg(1, 2, flags::SYN | flags::FIN, u32::MAX - 1, 0, 0, b"abc");
    let s = answer(&v4(seg));
    assert_eq!(rst(&s.l4), (2, 1, 0, 3, flags::RST | flags::ACK));
    // A bare data segment without ACK: its length alone.
    let seg = L4::tcp_seg(1, 2, flags::PSH, 7, 0, 0, &[0; 100]);
    let s = answer(&v6(seg));
    assert_eq!(rst(&s.l4), (2, 1, 0, 107, flags::RST | flags::ACK));
    // Options are header, not payload.
    let mut seg = L4::tcp(1, 2, flags::SYN);
    if let L4::Tcp { options, seq, .. } = &mut seg {
        *options = vec![2, 4, 5, 0xb4, 1, 3, 3, 7];
        *seq = 41;
    }
    let s = answer(&v4(seg));
    assert_eq!(rst(&s.l4), (2, 1, 0, 42, flags::RST | flags::ACK));
}

/// The ICMP error's type, code and quote, after checking the unused word
/// and the TTL.
fn icmp(s: &crate::Seen) -> (u8, u8, &[u8]) {
    assert!(s.proto == 1 || s.proto == 58);
    assert_eq!(s.ttl, ICMP_TTL);
    assert_eq!(&s.l4[4..8], &[0; 4], "unused");
    (s.l4[0], s.l4[1], &s.l4[8..])
}

#[test]
fn udp_gets_port_unreachable_quoting_the_datagram() {
    let mut f = v4(L4::udp(5353, 53, b"query"));
    f.padding = 12; // link padding is not part of the datagram
    let s = answer(&f);
    assert_eq!(s.proto, 1);
    let (ty, code, quote) = icmp(&s);
    assert_eq!((ty, code), (3, 3));
    assert_eq!(quote, f.ip_packet());

    let f = v6(L4::udp(5353, 53, b"query"));
    let s = answer(&f);
    assert_eq!(s.proto, 58);
    let (ty, code, quote) = icmp(&s);
    assert_eq!((ty, code), (1, 4));
    assert_eq!(quote, f.ip_packet());
}

#[test]
fn quotes_are_cut_at_576_and_1280_bytes() {
    let f = v4(L4::udp(1, 2, &[0xab; 1400]));
    let s = answer(&f);
    let (_, _, quote) = icmp(&s);
    assert_eq!(quote.len(), 576 - 20 - 8);
    assert_eq!(quote, &f.ip_packet()[..548]);
    assert_eq!(s.l4.len() + 20, 576);

    let f = v6(L4::udp(1, 2, &[0xab; 1400]));
    let s = answer(&f);
    let (_, _, quote) = icmp(&s);
    assert_eq!(quote.len(), 1280 - 40 - 8);
    assert_eq!(quote, &f.ip_packet()[..1232]);
    assert_eq!(s.l4.len() + 40, 1280);

    // Exactly at the limit: all of it.
    let f = v4(L4::udp(1, 2, &[1; 548 - 28]));
    assert_eq!(icmp(&answer(&f)).2, f.ip_packet());
}

#[test]
fn ip_options_and_extension_headers_are_quoted() {
    let mut f = v4(L4::udp(1, 2, b"x"));
    f.ip_options = vec![1, 1, 1, 0]; // NOP NOP NOP EOL
    let s = answer(&f);
    assert_eq!(icmp(&s).2, f.ip_packet());
    assert_eq!(icmp(&s).2[0], 0x46);

    let mut f = v6(L4::udp(1, 2, b"x"));
    f.ext = vec![Ext::HopByHop(0), Ext::DestOpts(1)];
    let s = answer(&f);
    let (ty, code, quote) = icmp(&s);
    assert_eq!((ty, code), (1, 4), "UDP behind extension headers");
    assert_eq!(quote, f.ip_packet());
}

#[test]
fn other_protocols_get_host_unreachable() {
    let others = [
        L4::icmp_query(8, 7, 1),
        L4::icmp_query(13, 7, 1), // timestamp
        L4::Raw {
            proto: 47,
            payload: vec![0; 24],
        },
        L4::UdpLite {
            sport: 1,
            dport: 2,
            coverage: 8,
            payload: vec![1, 2],
        },
    ];
    for l4 in others.clone() {
        let f = v4(l4);
        let s = answer(&f);
        let (ty, code, quote) = icmp(&s);
        assert_eq!((s.proto, ty, code), (1, 3, 1), "{f:?}");
        assert_eq!(quote, f.ip_packet());
    }
    let six = [
        L4::icmp_query(128, 7, 1),
        L4::icmp_query(129, 7, 1),
        L4::icmp_query(200, 0, 0), // private experimentation, informational
        L4::Raw {
            proto: 47,
            payload: vec![0; 24],
        },
        L4::Raw {
            proto: 59, // no next header, empty
            payload: vec![],
        },
    ];
    for l4 in six.into_iter().chain(others.into_iter().skip(2)) {
        let f = v6(l4);
        let s = answer(&f);
        let (ty, code, quote) = icmp(&s);
        assert_eq!((s.proto, ty, code), (58, 1, 1), "{f:?}");
        assert_eq!(quote, f.ip_packet());
    }
}

#[test]
fn first_fragments_are_answered() {
    let mut f = v4(L4::udp(1, 2, &[0; 64]));
    f.more_frags = true;
    let s = answer(&f);
    assert_eq!(icmp(&s).2, f.ip_packet());

    let mut f = v6(L4::tcp_seg(1, 2, flags::ACK, 1, 99, 0, &[0; 16]));
    f.ext = vec![Ext::Fragment {
        offset: 0,
        more: true,
        ident: 5,
    }];
    assert_eq!(rst(&answer(&f).l4), (2, 1, 99, 0, flags::RST));
}

/// An SCTP packet's chunks: one chunk of `ty` with `body`, padded.
fn chunk(ty: u8, flags: u8, body: &[u8]) -> Vec<u8> {
    let mut c = vec![ty, flags];
    c.extend_from_slice(&(4 + body.len() as u16).to_be_bytes());
    c.extend_from_slice(body);
    while c.len() % 4 != 0 {
        c.push(0);
    }
    c
}

pub(crate) fn sctp(vtag: u32, chunks: Vec<u8>) -> L4 {
    L4::Sctp {
        sport: 5000,
        dport: 38412,
        vtag,
        chunks,
    }
}

/// An INIT chunk with initiate tag `tag`.
pub(crate) fn init(tag: u32) -> Vec<u8> {
    let mut body = tag.to_be_bytes().to_vec();
    body.extend_from_slice(&[0, 1, 0, 0, 0, 10, 0, 10, 0, 0, 0, 1]);
    chunk(1, 0, &body)
}

pub(crate) fn data_chunk() -> Vec<u8> {
    chunk(0, 3, &[0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, b'h', b'i'])
}

/// The ABORT's vtag and chunk flags, after checking its shape.
fn abort(s: &crate::Seen) -> (u32, u8) {
    assert_eq!((s.proto, s.ttl), (132, RESET_TTL));
    assert_eq!(s.l4.len(), 16, "common header and one bare ABORT");
    assert_eq!(&s.l4[0..4], &[0x96, 0x0c, 0x13, 0x88], "ports swapped");
    assert_eq!((s.l4[12], &s.l4[14..16]), (6, &[0u8, 4][..]));
    (be32(&s.l4, 4), s.l4[13])
}

#[test]
fn sctp_init_gets_abort_with_its_initiate_tag() {
    let s = answer(&v4(sctp(0, init(0x1122_3344))));
    assert_eq!(abort(&s), (0x1122_3344, 0), "T bit clear");
    let s = answer(&v6(sctp(0, init(0xfeed_f00d))).vlan(ethertype::VLAN, 3));
    assert_eq!(abort(&s), (0xfeed_f00d, 0));
}

#[test]
fn other_sctp_gets_abort_with_its_tag_reflected() {
    let s = answer(&v4(sctp(0xabcd_ef01, data_chunk())));
    assert_eq!(abort(&s), (0xabcd_ef01, 1), "T bit set");
    let s = answer(&v6(sctp(0x0102_0304, data_chunk())));
    assert_eq!(abort(&s), (0x0102_0304, 1));
    // An INIT with a non-zero tag (invalid) is answered like any other.
    let s = answer(&v4(sctp(77, init(0x1122_3344))));
    assert_eq!(abort(&s), (77, 1));
    // A zero tag on something else than an INIT is reflected as is.
    let s = answer(&v4(sctp(0, data_chunk())));
    assert_eq!(abort(&s), (0, 1));
}

#[test]
fn answers_do_not_depend_on_the_offending_checksums() {
    // A reject answers what the ACL matched; the checksums of the offending
    // packet are not checked (pinctrl does not either).
    let mut bytes = v4(L4::tcp(1, 2, flags::SYN)).build();
    bytes[14 + 20 + 16] ^= 0xff;
    let out = reject::reply(&bytes).expect("an answer");
    assert_eq!(rst(&crate::read(&out).l4).4, flags::RST | flags::ACK);
}
