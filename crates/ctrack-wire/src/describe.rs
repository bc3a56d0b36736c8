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
}
