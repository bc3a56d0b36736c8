//! One-line, tcpdump-like summaries of frames for people.

use std::fmt::Write;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::icmp::{self, IcmpPacket};
use crate::ipv4::Ipv4Packet;
use crate::ipv6::Ipv6Packet;
use crate::tcp::{TcpPacket, flags};
use crate::udp::UdpPacket;
use crate::{Fragment, Frame, IpVersion, NotIp, ethernet::ethertype, ip_proto};

/// Summarises `frame` (whose layers are `layers`): addresses, ports,
/// protocol, TCP flags or ICMP type, and the IP length.
pub fn describe(frame: &[u8], layers: &Frame) -> String {
    let ip = match layers.ip {
        Ok(ip) => ip,
        Err(NotIp::LinkTruncated) => return format!("truncated frame ({} bytes)", frame.len()),
        Err(NotIp::OtherProtocol(Some(ethertype::ARP))) => return "arp".into(),
        Err(NotIp::OtherProtocol(Some(t))) => return format!("ethertype {t:#06x}"),
        Err(NotIp::OtherProtocol(None)) => return "802.3 frame".into(),
        Err(NotIp::BadIpv4(e)) => return format!("ipv4 header {e}"),
        Err(NotIp::BadIpv6(e)) => return format!("ipv6 header {e}"),
    };
    let datagram = &frame[ip.l3..ip.end];
    let (src, dst): (IpAddr, IpAddr) = match ip.version {
        IpVersion::V4 => {
            let h = Ipv4Packet::new_unchecked(datagram);
            (
                Ipv4Addr::from(h.src()).into(),
                Ipv4Addr::from(h.dst()).into(),
            )
        }
        IpVersion::V6 => {
            let h = Ipv6Packet::new_unchecked(datagram);
            (
                Ipv6Addr::from(h.src()).into(),
                Ipv6Addr::from(h.dst()).into(),
            )
        }
    };
    let len = datagram.len();
    let l4 = &frame[ip.l4..ip.end];
    let mut s = String::new();
    let frag = match ip.frag {
        Fragment::No => "",
        Fragment::First => " first-fragment",
        Fragment::Later => " fragment",
    };
    if ip.frag == Fragment::Later {
        let _ = write!(s, "{src} > {dst} ip{frag} len={len}");
        return s;
    }
    let with_port = |a: IpAddr, p: u16| match a {
        IpAddr::V4(a) => format!("{a}:{p}"),
        IpAddr::V6(a) => format!("[{a}]:{p}"),
    };
    match ip.proto {
        ip_proto::TCP => match TcpPacket::new_checked(l4) {
            Ok(t) => {
                let _ = write!(
                    s,
                    "{} > {} tcp [{}]{frag} seq={} ack={} win={} len={}",
                    with_port(src, t.src_port()),
                    with_port(dst, t.dst_port()),
                    tcp_flags(t.flags()),
                    t.seq(),
                    t.ack(),
                    t.window(),
                    t.payload().len()
                );
            }
            Err(e) => {
                let _ = write!(s, "{src} > {dst} tcp {e}");
            }
        },
        ip_proto::UDP | ip_proto::UDPLITE | ip_proto::SCTP => {
            let name = ip_proto::name(ip.proto).unwrap_or("?");
            match UdpPacket::new_checked(l4) {
                Ok(u) => {
                    let _ = write!(
                        s,
                        "{} > {} {name}{frag} len={len}",
                        with_port(src, u.src_port()),
                        with_port(dst, u.dst_port())
                    );
                }
                Err(e) => {
                    let _ = write!(s, "{src} > {dst} {name} {e}");
                }
            }
        }
        ip_proto::ICMP | ip_proto::ICMPV6 => {
            let v6 = ip.proto == ip_proto::ICMPV6;
            let name = if v6 { "icmpv6" } else { "icmp" };
            match IcmpPacket::new_checked(l4) {
                Ok(m) => {
                    let _ = write!(s, "{src} > {dst} {name} {}", icmp_name(v6, m.msg_type()));
                    let query = if v6 {
                        icmp::v6::reverse_query(m.msg_type()).is_some()
                    } else {
                        icmp::v4::reverse_query(m.msg_type()).is_some()
                    };
                    if query {
                        let _ = write!(s, " id={} seq={}", m.ident(), m.seq());
                    } else if m.code() != 0 {
                        let _ = write!(s, " code={}", m.code());
                    }
                    let _ = write!(s, "{frag} len={len}");
                }
                Err(e) => {
                    let _ = write!(s, "{src} > {dst} {name} {e}");
                }
            }
        }
        p => {
            let name = ip_proto::name(p).map_or_else(|| format!("proto {p}"), str::to_owned);
            let _ = write!(s, "{src} > {dst} {name}{frag} len={len}");
        }
    }
    s
}

/// TCP flags as tcpdump prints them: `S`, `S.`, `F.`, `R`, `P.`...
pub fn tcp_flags(f: u16) -> String {
    let mut s = String::new();
    for (bit, c) in [
        (flags::SYN, 'S'),
        (flags::FIN, 'F'),
        (flags::PSH, 'P'),
        (flags::RST, 'R'),
        (flags::URG, 'U'),
        (flags::ECE, 'E'),
        (flags::CWR, 'W'),
    ] {
        if f & bit != 0 {
            s.push(c);
        }
    }
    if f & flags::ACK != 0 {
        s.push('.');
    }
    if s.is_empty() {
        s.push_str("none");
    }
    s
}

fn icmp_name(v6: bool, ty: u8) -> String {
    let name = if v6 {
        match ty {
            icmp::v6::DST_UNREACH => "unreachable",
            icmp::v6::PACKET_TOO_BIG => "packet-too-big",
            icmp::v6::TIME_EXCEEDED => "time-exceeded",
            icmp::v6::PARAM_PROBLEM => "parameter-problem",
            icmp::v6::ECHO_REQUEST => "echo-request",
            icmp::v6::ECHO_REPLY => "echo-reply",
            icmp::v6::ROUTER_SOLICIT => "router-solicitation",
            icmp::v6::ROUTER_ADVERT => "router-advertisement",
            icmp::v6::NEIGHBOR_SOLICIT => "neighbor-solicitation",
            icmp::v6::NEIGHBOR_ADVERT => "neighbor-advertisement",
            _ => "",
        }
    } else {
        match ty {
            icmp::v4::ECHO_REPLY => "echo-reply",
            icmp::v4::DST_UNREACH => "unreachable",
            icmp::v4::SOURCE_QUENCH => "source-quench",
            icmp::v4::REDIRECT => "redirect",
            icmp::v4::ECHO_REQUEST => "echo-request",
            icmp::v4::TIME_EXCEEDED => "time-exceeded",
            icmp::v4::PARAM_PROBLEM => "parameter-problem",
            icmp::v4::TIMESTAMP => "timestamp-request",
            icmp::v4::TIMESTAMP_REPLY => "timestamp-reply",
            icmp::v4::INFO_REQUEST => "info-request",
            icmp::v4::INFO_REPLY => "info-reply",
            _ => "",
        }
    };
    if name.is_empty() {
        format!("type={ty}")
    } else {
        name.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_like_tcpdump() {
        assert_eq!(tcp_flags(flags::SYN), "S");
        assert_eq!(tcp_flags(flags::SYN | flags::ACK), "S.");
        assert_eq!(tcp_flags(flags::FIN | flags::PSH | flags::ACK), "FP.");
        assert_eq!(tcp_flags(flags::ACK), ".");
        assert_eq!(tcp_flags(0), "none");
    }
    use crate::build::{Frame as Build, L4};
    use crate::{LinkType, parse_frame};

    fn said(frame: &[u8]) -> String {
        describe(frame, &parse_frame(frame, LinkType::Ethernet))
    }

    const A: [u8; 4] = [10, 0, 0, 1];
    const B: [u8; 4] = [10, 0, 0, 2];

    /// Each kind of frame in one line, checked by hand: ports and flags
    /// for TCP, the protocol's name, an ICMP query's identifier and an
    /// error's code, a later fragment as bare IP, and the IP length.
    #[test]
    fn frames_in_one_line() {
        let mut frag = Build::v4(A, B, L4::udp(1, 2, &[0; 16]));
        frag.frag_offset = 8;
        let (a6, b6) = ("fd00::1".parse().unwrap(), "fd00::2".parse().unwrap());
        let raw = |proto| L4::Raw {
            proto,
            payload: vec![0; 4],
        };
        // Four bytes where a TCP header should be.
        let short_tcp = Build::v4(A, B, raw(ip_proto::TCP)).build();
        for (f, want) in [
            (
                Build::v4(A, B, L4::tcp(1000, 80, flags::SYN | flags::ACK)).build(),
                "10.0.0.1:1000 > 10.0.0.2:80 tcp [S.] seq=0 ack=0 win=65535 len=0",
            ),
            (
                Build::v6(a6, b6, L4::udp(53, 5353, b"abcd")).build(),
                "[fd00::1]:53 > [fd00::2]:5353 udp len=52",
            ),
            (
                Build::v4(A, B, L4::icmp_query(8, 7, 9)).build(),
                "10.0.0.1 > 10.0.0.2 icmp echo-request id=7 seq=9 len=39",
            ),
            (
                Build::v4(A, B, L4::icmp_error(3, 3, &[0; 28])).build(),
                "10.0.0.1 > 10.0.0.2 icmp unreachable code=3 len=56",
            ),
            (
                Build::v4(A, B, L4::icmp_error(11, 0, &[0; 28])).build(),
                "10.0.0.1 > 10.0.0.2 icmp time-exceeded len=56",
            ),
            (
                Build::v6(a6, b6, L4::icmp_query(129, 7, 9)).build(),
                "fd00::1 > fd00::2 icmpv6 echo-reply id=7 seq=9 len=59",
            ),
            (
                Build::v6(a6, b6, L4::icmp_error(1, 4, &[0; 48])).build(),
                "fd00::1 > fd00::2 icmpv6 unreachable code=4 len=96",
            ),
            (frag.build(), "10.0.0.1 > 10.0.0.2 ip fragment len=44"),
            (
                Build::v4(A, B, raw(47)).build(),
                "10.0.0.1 > 10.0.0.2 gre len=24",
            ),
            (
                Build::v4(A, B, raw(253)).build(),
                "10.0.0.1 > 10.0.0.2 proto 253 len=24",
            ),
            (short_tcp, "10.0.0.1 > 10.0.0.2 tcp truncated"),
        ] {
            assert_eq!(said(&f), want);
        }
    }

    /// Frames with no IP layer say why.
    #[test]
    fn frames_without_ip() {
        let ip = Build::v4(A, B, L4::udp(1, 2, b"")).build();
        let mut arp = ip.clone();
        arp[12..14].copy_from_slice(&[0x08, 0x06]);
        let mut lldp = ip.clone();
        lldp[12..14].copy_from_slice(&[0x88, 0xcc]);
        let mut dot3 = ip.clone();
        dot3[12..14].copy_from_slice(&[0x00, 0x40]);
        let mut short = ip.clone();
        short.truncate(30);
        let mut v6 = ip.clone();
        v6[12..14].copy_from_slice(&[0x86, 0xdd]);
        v6.resize(14 + 40, 0); // long enough, but version 4
        for (f, want) in [
            (&ip[..10], "truncated frame (10 bytes)"),
            (&arp[..], "arp"),
            (&lldp[..], "ethertype 0x88cc"),
            (&dot3[..], "802.3 frame"),
            (&short[..], "ipv4 header truncated"),
            (&v6[..], "ipv6 header malformed"),
        ] {
            assert_eq!(said(f), want);
        }
    }

    /// Every ICMP type with a name, and a number for the rest.
    #[test]
    fn icmp_names() {
        let v4 = [
            (0, "echo-reply"),
            (3, "unreachable"),
            (4, "source-quench"),
            (5, "redirect"),
            (8, "echo-request"),
            (11, "time-exceeded"),
            (12, "parameter-problem"),
            (13, "timestamp-request"),
            (14, "timestamp-reply"),
            (15, "info-request"),
            (16, "info-reply"),
            (9, "type=9"),
        ];
        let v6 = [
            (1, "unreachable"),
            (2, "packet-too-big"),
            (3, "time-exceeded"),
            (4, "parameter-problem"),
            (128, "echo-request"),
            (129, "echo-reply"),
            (133, "router-solicitation"),
            (134, "router-advertisement"),
            (135, "neighbor-solicitation"),
            (136, "neighbor-advertisement"),
            (0, "type=0"),
        ];
        for (v6, names) in [(false, &v4[..]), (true, &v6[..])] {
            for &(ty, name) in names {
                assert_eq!(icmp_name(v6, ty), name, "v6 {v6} type {ty}");
            }
        }
    }
}
