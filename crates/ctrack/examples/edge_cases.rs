//! Writes `examples/edge-cases.pcap`: crafted packets that exercise every
//! corner of the tracker where Open vSwitch's behaviour is the reference —
//! TCP flag combinations, RSTs in and out of window, SYN retransmits and
//! reuse, mid-stream pickup, windows, ICMP queries and errors of every kind,
//! bad checksums and lengths, VLAN/QinQ/LLC-SNAP, IPv6 extension headers.
//! Each scenario uses its own ports so that they do not interfere.
//!
//! `ovstest test-conntrack pcap examples/edge-cases.pcap` produced
//! `tests/expected/edge-cases.ovs`; `tests/replay.rs` checks that
//! `ctrack replay --format ovs` prints the same.
//!
//! Run: `cargo run --example edge_cases -- examples/edge-cases.pcap`

use std::fs::File;
use std::net::Ipv6Addr;
use std::time::Duration;

use ctrack_wire::build::{self, Ext, Frame, L4};
use ctrack_wire::ethernet::ethertype;
use ctrack_wire::icmp::{v4, v6};
use ctrack_wire::ip_proto;
use ctrack_wire::tcp::flags::*;
use pcap_file::DataLink;
use pcap_file::pcap::{PcapHeader, PcapPacket, PcapWriter};

const C: [u8; 4] = [172, 16, 0, 1];
const S: [u8; 4] = [172, 16, 0, 2];
const R: [u8; 4] = [172, 16, 0, 254];

fn c6() -> Ipv6Addr {
    "2001:db8::1".parse().unwrap()
}
fn s6() -> Ipv6Addr {
    "2001:db8::2".parse().unwrap()
}
fn r6() -> Ipv6Addr {
    "2001:db8::fe".parse().unwrap()
}

/// TCP between C:cport and S:80, client to server if `up`.
fn tcp(cport: u16, up: bool, flags: u16, seq: u32, ack: u32, win: u16, data: &[u8]) -> Frame {
    if up {
        Frame::v4(C, S, L4::tcp_seg(cport, 80, flags, seq, ack, win, data))
    } else {
        Frame::v4(S, C, L4::tcp_seg(80, cport, flags, seq, ack, win, data))
    }
}

fn udp(cport: u16, up: bool) -> Frame {
    if up {
        Frame::v4(C, S, L4::udp(cport, 53, b"question"))
    } else {
        Frame::v4(S, C, L4::udp(53, cport, b"answer"))
    }
}

fn handshake(out: &mut Vec<Vec<u8>>, cport: u16) {
    out.push(tcp(cport, true, SYN, 1000, 0, 65535, b"").build());
    out.push(tcp(cport, false, SYN | ACK, 5000, 1001, 65535, b"").build());
    out.push(tcp(cport, true, ACK, 1001, 5001, 65535, b"").build());
}

fn with_code(mut f: Frame, c: u8) -> Frame {
    if let L4::Icmp { code, .. } = &mut f.l4 {
        *code = c;
    }
    f
}

fn frames() -> Vec<Vec<u8>> {
    let mut out: Vec<Vec<u8>> = Vec::new();

    // TCP: handshake, data both ways, FIN close, then reuse by a new SYN.
    handshake(&mut out, 1001);
    out.push(tcp(1001, true, PSH | ACK, 1001, 5001, 65535, b"hello").build());
    out.push(tcp(1001, false, PSH | ACK, 5001, 1006, 65535, b"world!").build());
    out.push(tcp(1001, true, FIN | ACK, 1006, 5007, 65535, b"").build());
    out.push(tcp(1001, false, FIN | ACK, 5007, 1007, 65535, b"").build());
    out.push(tcp(1001, true, ACK, 1007, 5008, 65535, b"").build());
    out.push(tcp(1001, true, ACK, 1007, 5008, 65535, b"").build()); // late ACK
    out.push(tcp(1001, true, SYN, 900_000, 0, 65535, b"").build()); // reuse
    out.push(tcp(1001, false, SYN | ACK, 70_000, 900_001, 65535, b"").build());

    // SYN retransmits, then a simultaneous-open SYN from the server.
    for _ in 0..3 {
        out.push(tcp(1002, true, SYN, 42, 0, 65535, b"").build());
    }
    out.push(tcp(1002, false, SYN, 77, 0, 65535, b"").build());

    // RSTs: exact, one off, inside the window but wrong, far away, with ACK 0.
    handshake(&mut out, 1003);
    out.push(tcp(1003, false, RST, 9000, 0, 0, b"").build());
    out.push(tcp(1003, false, RST | ACK, 5002, 1001, 0, b"").build());
    out.push(tcp(1003, false, RST, 5001, 0, 0, b"").build());
    out.push(tcp(1003, true, ACK, 1001, 5001, 65535, b"").build()); // after reset
    handshake(&mut out, 1004);
    out.push(tcp(1004, true, RST | ACK, 1001, 0, 0, b"").build());
    handshake(&mut out, 1005);
    out.push(tcp(1005, true, RST, 3_000_000_000, 0, 0, b"").build());

    // Mid-stream pickup, and a SYN-ACK without a connection.
    out.push(tcp(1006, true, PSH | ACK, 123_456, 654_321, 502, b"data").build());
    out.push(tcp(1006, false, ACK, 654_321, 123_460, 509, b"").build());
    out.push(tcp(1006, true, ACK, 123_460, 654_321, 502, b"more").build());
    out.push(tcp(1007, false, SYN | ACK, 1, 1, 65535, b"").build());
    out.push(tcp(1008, true, RST, 1, 0, 0, b"").build()); // a lone RST opens in OVS
    out.push(tcp(1009, true, FIN | ACK, 1, 1, 100, b"").build());

    // Flag combinations no stack sends.
    for (i, f) in [
        SYN | FIN,
        SYN | RST,
        0,
        FIN,
        PSH,
        URG,
        FIN | PSH | URG,
        SYN | FIN | ACK,
    ]
    .into_iter()
    .enumerate()
    {
        out.push(tcp(1100 + i as u16, true, f, 1, 0, 1000, b"").build());
    }
    // ... on an established connection too.
    handshake(&mut out, 1010);
    out.push(tcp(1010, true, SYN | RST, 1001, 5001, 65535, b"").build());
    out.push(tcp(1010, true, ACK, 1001, 5001, 65535, b"").build());

    // Windows: small window, data that fits, data that does not, an ACK
    // for data never sent.
    out.push(tcp(1011, true, SYN, 100, 0, 1000, b"").build());
    out.push(tcp(1011, false, SYN | ACK, 500, 101, 1000, b"").build());
    out.push(tcp(1011, true, ACK, 101, 501, 1000, b"").build());
    out.push(tcp(1011, true, ACK, 101, 501, 1000, &[b'a'; 900]).build());
    out.push(tcp(1011, true, ACK, 1001, 501, 1000, &[b'b'; 1400]).build());
    out.push(tcp(1011, false, ACK, 501, 1001, 65535, b"").build());
    out.push(tcp(1011, true, ACK, 1001, 501, 1000, &[b'b'; 1400]).build());
    out.push(tcp(1011, false, ACK, 501, 900_000, 65535, b"").build());
    out.push(tcp(1011, true, ACK, 5_000_000, 501, 1000, b"x").build());
    // Window scaling announced both ways.
    let mut syn = tcp(1012, true, SYN, 10, 0, 64240, b"");
    if let L4::Tcp { options, .. } = &mut syn.l4 {
        *options = vec![2, 4, 5, 180, 4, 2, 1, 3, 3, 7];
    }
    out.push(syn.build());
    let mut synack = tcp(1012, false, SYN | ACK, 20, 11, 65160, b"");
    if let L4::Tcp { options, .. } = &mut synack.l4 {
        *options = vec![2, 4, 5, 180, 4, 2, 1, 3, 3, 7];
    }
    out.push(synack.build());
    out.push(tcp(1012, true, ACK, 11, 21, 502, b"").build());
    out.push(tcp(1012, false, ACK, 21, 11, 509, &[b'z'; 1448]).build());
    out.push(tcp(1012, true, ACK, 11, 1469, 502, b"").build());

    // UDP: first, multiple, both ways; zero checksum (v4: none; v6: wrong).
    out.push(udp(2001, true).build());
    out.push(udp(2001, true).build());
    out.push(udp(2001, false).build());
    out.push(udp(2001, true).build());
    let mut f = udp(2002, true).build();
    f[40..42].copy_from_slice(&[0, 0]);
    out.push(f);
    let mut f = Frame::v6(c6(), s6(), L4::udp(2003, 53, b"q")).build();
    f[60..62].copy_from_slice(&[0, 0]);
    out.push(f);

    // Other protocols.
    let gre = |up: bool| {
        let l4 = L4::Raw {
            proto: ip_proto::GRE,
            payload: vec![0, 0, 0x65, 0x58],
        };
        if up {
            Frame::v4(C, S, l4)
        } else {
            Frame::v4(S, C, l4)
        }
    };
    out.push(gre(true).build());
    out.push(gre(false).build());
    let init = vec![
        1, 0, 0, 20, 0xde, 0xad, 0xbe, 0xef, 0, 1, 0, 0, 0, 10, 0, 10, 0, 0, 0, 1,
    ];
    let sctp = |chunks: Vec<u8>| {
        Frame::v4(
            C,
            S,
            L4::Sctp {
                sport: 2004,
                dport: 5000,
                vtag: 0,
                chunks,
            },
        )
    };
    out.push(sctp(init.clone()).build());
    let mut bad_chunk = init.clone();
    bad_chunk[3] = 2; // chunk length 2
    out.push(sctp(bad_chunk).build());
    let mut f = sctp(init.clone()).build();
    let last = f.len() - 1;
    f[last] ^= 1;
    out.push(f);

    // ICMP queries.
    let q = |ty, up: bool, id| {
        if up {
            Frame::v4(C, S, L4::icmp_query(ty, id, 1))
        } else {
            Frame::v4(S, C, L4::icmp_query(ty, id, 1))
        }
    };
    for (id, (req, rep)) in [
        (v4::ECHO_REQUEST, v4::ECHO_REPLY),
        (v4::TIMESTAMP, v4::TIMESTAMP_REPLY),
        (v4::INFO_REQUEST, v4::INFO_REPLY),
    ]
    .into_iter()
    .enumerate()
    {
        let id = 3000 + id as u16;
        out.push(q(req, true, id).build());
        out.push(q(req, true, id).build());
        out.push(q(rep, false, id).build());
        out.push(q(req, true, id).build());
    }
    out.push(q(v4::ECHO_REPLY, false, 3010).build());
    out.push(with_code(q(v4::ECHO_REQUEST, true, 3011), 1).build());
    out.push(q(9, true, 0).build()); // router advertisement
    out.push(q(17, true, 3012).build()); // address mask request
    let mut f = q(v4::ECHO_REQUEST, true, 3013).build();
    f[36] ^= 0xff; // ICMP checksum
    out.push(f);
    let e6 = |ty, up: bool, id| {
        if up {
            Frame::v6(c6(), s6(), L4::icmp_query(ty, id, 1))
        } else {
            Frame::v6(s6(), c6(), L4::icmp_query(ty, id, 1))
        }
    };
    out.push(e6(v6::ECHO_REQUEST, true, 3020).build());
    out.push(e6(v6::ECHO_REPLY, false, 3020).build());
    out.push(e6(v6::ECHO_REPLY, false, 3021).build());
    out.push(with_code(e6(v6::ECHO_REQUEST, true, 3022), 2).build());
    out.push(e6(v6::NEIGHBOR_SOLICIT, true, 0).build());
    out.push(e6(v6::ROUTER_ADVERT, false, 0).build());

    // ICMP errors about TCP, UDP, ICMP; both directions; bad quotes.
    let err4 = |from, to, ty, code, quoted: &Frame, n| {
        Frame::v4(
            from,
            to,
            L4::icmp_error(ty, code, &build::quote(&quoted.ip_packet(), n)),
        )
    };
    out.push(udp(4001, true).build());
    out.push(err4(S, C, v4::DST_UNREACH, 3, &udp(4001, true), 8).build());
    out.push(err4(R, C, v4::TIME_EXCEEDED, 0, &udp(4001, true), 8).build());
    out.push(err4(R, C, v4::SOURCE_QUENCH, 0, &udp(4001, true), 8).build());
    out.push(err4(R, C, v4::REDIRECT, 1, &udp(4001, true), 8).build());
    out.push(err4(R, C, v4::PARAM_PROBLEM, 0, &udp(4001, true), 8).build());
    out.push(udp(4001, false).build());
    out.push(err4(R, S, v4::DST_UNREACH, 1, &udp(4001, false), 8).build());
    handshake(&mut out, 4002);
    out.push(
        err4(
            R,
            C,
            v4::DST_UNREACH,
            4,
            &tcp(4002, true, ACK, 1001, 5001, 65535, b""),
            8,
        )
        .build(),
    );
    out.push(
        err4(
            R,
            C,
            v4::DST_UNREACH,
            4,
            &tcp(4002, true, ACK, 1001, 5001, 65535, b""),
            20,
        )
        .build(),
    );
    let ping = q(v4::ECHO_REQUEST, true, 4003);
    out.push(ping.build());
    out.push(err4(R, C, v4::TIME_EXCEEDED, 0, &ping, 8).build());
    out.push(err4(S, C, v4::DST_UNREACH, 3, &udp(4004, true), 8).build()); // untracked
    out.push(err4(S, R, v4::DST_UNREACH, 3, &udp(4001, true), 8).build()); // not the sender
    out.push(err4(S, C, v4::DST_UNREACH, 3, &udp(4001, true), 4).build()); // short
    let inner = err4(S, C, v4::DST_UNREACH, 3, &udp(4001, true), 8);
    out.push(err4(R, C, v4::DST_UNREACH, 3, &inner, 8).build()); // error about an error
    let mut f = err4(S, C, v4::DST_UNREACH, 3, &udp(4001, true), 8).build();
    f[36] ^= 0xff;
    out.push(f);

    let syn6 = Frame::v6(c6(), s6(), L4::tcp_seg(4005, 443, SYN, 1, 0, 65535, b""));
    out.push(syn6.build());
    for ty in [
        v6::DST_UNREACH,
        v6::PACKET_TOO_BIG,
        v6::TIME_EXCEEDED,
        v6::PARAM_PROBLEM,
    ] {
        let q20 = build::quote(&syn6.ip_packet(), 20);
        out.push(Frame::v6(r6(), c6(), L4::icmp_error(ty, 0, &q20)).build());
    }
    let q8 = build::quote(&syn6.ip_packet(), 8);
    out.push(Frame::v6(r6(), c6(), L4::icmp_error(v6::DST_UNREACH, 0, &q8)).build());
    let mut ping6 = Frame::v6(c6(), s6(), L4::icmp_query(v6::ECHO_REQUEST, 4006, 1));
    ping6.ext = vec![Ext::DestOpts(0)];
    out.push(ping6.build());
    out.push(
        Frame::v6(
            r6(),
            c6(),
            L4::icmp_error(v6::TIME_EXCEEDED, 0, &ping6.ip_packet()),
        )
        .build(),
    );
    out.push(
        Frame::v6(
            r6(),
            s6(),
            L4::icmp_error(v6::TIME_EXCEEDED, 0, &ping6.ip_packet()),
        )
        .build(),
    );

    // Link layer: VLAN, QinQ, three tags, LLC/SNAP, padding, ARP, others.
    out.push(udp(5001, true).vlan(ethertype::VLAN, 100).build());
    out.push(
        udp(5001, false)
            .vlan(ethertype::QINQ, 10)
            .vlan(ethertype::VLAN, 100)
            .build(),
    );
    out.push(
        udp(5002, true)
            .vlan(ethertype::QINQ, 1)
            .vlan(ethertype::VLAN, 2)
            .vlan(ethertype::VLAN, 3)
            .build(),
    );
    let plain = udp(5003, true).build();
    let mut snap = plain[..12].to_vec();
    let llc_len = (8 + plain.len() - 14) as u16;
    snap.extend_from_slice(&llc_len.to_be_bytes());
    snap.extend_from_slice(&[0xaa, 0xaa, 0x03, 0, 0, 0, 0x08, 0x00]);
    snap.extend_from_slice(&plain[14..]);
    out.push(snap);
    let mut padded = Frame::v4(C, S, L4::tcp_seg(5004, 80, SYN, 1, 0, 100, b""));
    padded.padding = 6;
    out.push(padded.build());
    let mut arp = vec![0xff; 6];
    arp.extend_from_slice(&[2, 0, 0, 0, 0, 1, 0x08, 0x06, 0, 1, 8, 0, 6, 4, 0, 1]);
    arp.extend_from_slice(&[
        2, 0, 0, 0, 0, 1, 172, 16, 0, 1, 0, 0, 0, 0, 0, 0, 172, 16, 0, 2,
    ]);
    out.push(arp);
    let mut lldp = plain[..12].to_vec();
    lldp.extend_from_slice(&[0x88, 0xcc, 2, 7, 4, 0, 0, 0, 0, 0, 1]);
    out.push(lldp);

    // IPv4 header trouble: options, bad checksum, lengths.
    let mut opt = udp(6001, true);
    opt.ip_options = vec![0x94, 0x04, 0, 0]; // router alert
    out.push(opt.build());
    let mut f = udp(6002, true).build();
    f[24] ^= 0x10;
    out.push(f);
    let mut f = udp(6003, true).build();
    f[14] = 0x44; // IHL 4
    out.push(f);
    let good = udp(6004, true).build();
    out.push(good[..30].to_vec()); // cut in the IP header
    let mut f = good.clone();
    f[16..18].copy_from_slice(&200u16.to_be_bytes()); // total length past the frame
    out.push(f);
    let mut f = good.clone();
    f[16..18].copy_from_slice(&16u16.to_be_bytes()); // total length below the header
    out.push(f);
    out.push(good[..13].to_vec()); // not even an Ethernet header

    // Transport header trouble.
    let syn = tcp(7001, true, SYN, 1, 0, 100, b"").build();
    let mut f = syn.clone();
    f[46] = 0x40; // data offset 4
    out.push(f);
    let mut f = syn.clone();
    f[46] = 0xf0; // data offset past the segment
    out.push(f);
    let mut f = syn.clone();
    f[50] ^= 1; // TCP checksum
    out.push(f);
    out.push(Frame::v4(C, S, L4::tcp_seg(0, 80, SYN, 1, 0, 100, b"")).build());
    out.push(Frame::v4(C, S, L4::udp(7002, 0, b"x")).build());
    let mut f = Frame::v4(C, S, L4::udp(7003, 53, b"abcd")).build();
    f[38..40].copy_from_slice(&40u16.to_be_bytes()); // UDP length past the datagram
    out.push(f);
    let mut f = Frame::v4(C, S, L4::udp(7004, 53, b"abcd")).build();
    f[38..40].copy_from_slice(&4u16.to_be_bytes()); // UDP length below the header
    out.push(f);
    out.push(
        Frame::v4(
            C,
            S,
            L4::Raw {
                proto: ip_proto::TCP,
                payload: vec![0; 12],
            },
        )
        .build(),
    );

    // IPv6: extension headers, an atomic fragment, a bad extension chain.
    out.push(Frame::v6(c6(), s6(), L4::udp(8001, 53, b"q")).build());
    let mut r = Frame::v6(s6(), c6(), L4::udp(53, 8001, b"a"));
    r.ext = vec![Ext::HopByHop(0), Ext::Routing, Ext::DestOpts(1)];
    out.push(r.build());
    let mut atomic = Frame::v6(c6(), s6(), L4::udp(8001, 53, b"q"));
    atomic.ext = vec![Ext::Fragment {
        offset: 0,
        more: false,
        ident: 5,
    }];
    out.push(atomic.build());
    let mut f = Frame::v6(c6(), s6(), L4::udp(8002, 53, b"q")).build();
    f[18..20].copy_from_slice(&400u16.to_be_bytes()); // payload length past the frame
    out.push(f);
    let mut bad = Frame::v6(c6(), s6(), L4::udp(8003, 53, b"q"));
    bad.ext = vec![Ext::DestOpts(0)];
    let mut f = bad.build();
    f[55] = 9; // extension header length past the payload
    out.push(f);
    let mut f = Frame::v6(c6(), s6(), L4::tcp(8004, 80, SYN)).build();
    let last = f.len() - 1;
    f[last - 10] ^= 1; // TCP checksum (IPv6 pseudo-header)
    out.push(f);

    out
}

fn main() {
    let path = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "examples/edge-cases.pcap".into());
    let file = File::create(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let header = PcapHeader {
        datalink: DataLink::ETHERNET,
        ..PcapHeader::default()
    };
    let mut w = PcapWriter::with_header(file, header).expect("pcap header");
    let start = Duration::from_secs(1_700_000_000);
    let frames = frames();
    for (i, f) in frames.iter().enumerate() {
        let ts = start + Duration::from_millis(i as u64);
        w.write_packet(&PcapPacket::new(ts, f.len() as u32, f))
            .expect("write packet");
    }
    eprintln!("wrote {} packets to {path}", frames.len());
}
