//! ctrack-wire's frame parsing next to etherparse's, on the same frames.
//!
//! Each frame is parsed down to its transport header and the ports (or the
//! ICMP type and code) are read, by:
//!
//! * `ctrack-wire/layers`: [`parse_frame`] alone, which finds the link, VLAN,
//!   IP and extension headers and where the transport header lies (what the
//!   tracker's first pass does); it returns that offset and the protocol;
//! * `ctrack-wire/l4`: [`parse_frame`], then the transport view's
//!   `new_checked` and its port (type, code) accessors: the same work as
//!   etherparse's slicing;
//! * `etherparse/sliced`: `SlicedPacket::from_ethernet`, then the transport
//!   slice's ports (type, code);
//! * `etherparse/lax`: the same with `LaxSlicedPacket`, which accepts
//!   inconsistent lengths as ctrack-wire does.
//!
//! Run with `cargo bench -p ctrack-wire --bench parse`.

use std::hint::black_box;
use std::net::Ipv6Addr;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use ctrack_wire::build::{Ext, Frame, L4, quote};
use ctrack_wire::icmp::IcmpPacket;
use ctrack_wire::tcp::{TcpPacket, flags};
use ctrack_wire::udp::UdpPacket;
use ctrack_wire::{LinkType, ip_proto, parse_frame};
use etherparse::{LaxSlicedPacket, SlicedPacket, TransportSlice};

/// The frames: name and bytes.
fn frames() -> Vec<(&'static str, Vec<u8>)> {
    let payload = [0x5a; 100];
    let tcp4 = Frame::v4(
        [10, 0, 0, 1],
        [10, 0, 0, 2],
        L4::tcp_seg(40000, 80, flags::ACK | flags::PSH, 1, 1, 502, &payload),
    );
    let a: Ipv6Addr = "fd00:1::2".parse().unwrap();
    let b: Ipv6Addr = "fd00:2::2".parse().unwrap();
    let mut udp6 = Frame::v6(a, b, L4::udp(5353, 5000, &payload));
    udp6.ext = vec![Ext::HopByHop(0), Ext::DestOpts(1)];
    let vlan = tcp4.clone().vlan(0x8100, 100);
    let sent = Frame::v4([10, 0, 0, 1], [10, 0, 0, 2], L4::tcp(40000, 80, flags::SYN));
    let icmp_err = Frame::v4(
        [10, 9, 9, 9],
        [10, 0, 0, 1],
        L4::icmp_error(11, 0, &quote(&sent.ip_packet(), 8)),
    );
    vec![
        ("tcp4", tcp4.build()),
        ("udp6-ext", udp6.build()),
        ("vlan-tcp4", vlan.build()),
        ("icmp4-error", icmp_err.build()),
    ]
}

/// What both parsers hand back: the two ports, or ICMP type and code.
type Summary = Option<(u16, u16)>;

/// Where the transport header lies and its protocol, without reading it.
#[inline]
fn ctrack_layers(f: &[u8]) -> Option<(usize, u8)> {
    let ip = parse_frame(f, LinkType::Ethernet).ip.ok()?;
    Some((ip.l4, ip.proto))
}

#[inline]
fn ctrack_l4(f: &[u8]) -> Summary {
    let ip = parse_frame(f, LinkType::Ethernet).ip.ok()?;
    let l4 = f.get(ip.l4..ip.end)?;
    match ip.proto {
        ip_proto::TCP => TcpPacket::new_checked(l4)
            .ok()
            .map(|t| (t.src_port(), t.dst_port())),
        ip_proto::UDP => UdpPacket::new_checked(l4)
            .ok()
            .map(|u| (u.src_port(), u.dst_port())),
        ip_proto::ICMP | ip_proto::ICMPV6 => IcmpPacket::new_checked(l4)
            .ok()
            .map(|i| (u16::from(i.msg_type()), u16::from(i.code()))),
        _ => None,
    }
}

#[inline]
fn etherparse_summary(t: Option<&TransportSlice<'_>>) -> Summary {
    Some(match t? {
        TransportSlice::Tcp(t) => (t.source_port(), t.destination_port()),
        TransportSlice::Udp(u) => (u.source_port(), u.destination_port()),
        TransportSlice::Icmpv4(i) => (u16::from(i.type_u8()), u16::from(i.code_u8())),
        TransportSlice::Icmpv6(i) => (u16::from(i.type_u8()), u16::from(i.code_u8())),
        TransportSlice::Igmp(_) => return None,
    })
}

#[inline]
fn etherparse_sliced(f: &[u8]) -> Summary {
    let p = SlicedPacket::from_ethernet(f).ok()?;
    etherparse_summary(p.transport.as_ref())
}

#[inline]
fn etherparse_lax(f: &[u8]) -> Summary {
    let p = LaxSlicedPacket::from_ethernet(f).ok()?;
    etherparse_summary(p.transport.as_ref())
}

fn parse(c: &mut Criterion) {
    let frames = frames();
    for (name, f) in &frames {
        // Every parser reads every frame, and they agree.
        let want = ctrack_l4(f);
        assert!(want.is_some(), "{name}");
        assert_eq!(etherparse_sliced(f), want, "{name}");
        assert_eq!(etherparse_lax(f), want, "{name}");
        assert!(ctrack_layers(f).is_some(), "{name}");
    }
    let mut g = c.benchmark_group("parse");
    for (name, f) in &frames {
        let f = f.as_slice();
        g.bench_with_input(BenchmarkId::new("ctrack-wire/layers", name), f, |b, f| {
            b.iter(|| ctrack_layers(black_box(f)))
        });
        g.bench_with_input(BenchmarkId::new("ctrack-wire/l4", name), f, |b, f| {
            b.iter(|| ctrack_l4(black_box(f)))
        });
        g.bench_with_input(BenchmarkId::new("etherparse/sliced", name), f, |b, f| {
            b.iter(|| etherparse_sliced(black_box(f)))
        });
        g.bench_with_input(BenchmarkId::new("etherparse/lax", name), f, |b, f| {
            b.iter(|| etherparse_lax(black_box(f)))
        });
    }
    g.finish();
}

criterion_group!(benches, parse);
criterion_main!(benches);
