//! From a parsed frame to a connection key, with every check the tracker
//! makes before looking a packet up: header lengths, fragments, checksums,
//! zero ports, ICMP types, and the packet an ICMP error quotes.
//!
//! The rules are Open vSwitch's (`conn_key_extract` and friends), so that a
//! packet ctrack calls invalid is one Open vSwitch calls invalid; where
//! ctrack goes further (UDP-Lite, an IP version nibble that contradicts the
//! EtherType) the difference is noted where it is made.

use ctrack_wire::icmp::{self, IcmpPacket};
use ctrack_wire::sctp::SctpPacket;
use ctrack_wire::tcp::TcpPacket;
use ctrack_wire::udp::{self, UdpPacket};
use ctrack_wire::{Fragment, Frame, IpLayer, IpVersion, NotIp, checksum, ip_proto, ipv6};

use crate::key::{ConnKey, Endpoint, Family, Zone};
use crate::proto::tcp::Segment;
use crate::verdict::InvalidReason;

/// What the protocol tracker needs from the transport header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum L4Info {
    /// A TCP segment.
    Tcp(Segment),
    /// An ICMP or ICMPv6 query of this type.
    IcmpQuery {
        /// Message type.
        msg_type: u8,
    },
    /// Anything else.
    Other,
}

/// A packet ready for lookup.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Extracted {
    /// The key of the packet's direction, or for an ICMP error the key of
    /// the quoted packet's reverse direction (the direction the error
    /// travels in the quoted connection).
    pub key: ConnKey,
    /// True for an ICMP error: look up `key` and report `rel`.
    pub related: bool,
    /// Transport details for the protocol tracker.
    pub l4: L4Info,
    /// Bytes of the IP datagram (for per-connection byte counters).
    pub ip_len: u32,
}

/// Checks to apply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExtractOptions {
    /// Verify IPv4 header and transport checksums (off for traffic whose
    /// checksums a NIC verified or will fill in).
    pub checksums: bool,
}

impl Default for ExtractOptions {
    fn default() -> Self {
        ExtractOptions { checksums: true }
    }
}

/// Extracts the key of `frame`, whose layers `layers` are, in `zone`.
pub fn extract(
    frame: &[u8],
    layers: &Frame,
    zone: Zone,
    opts: ExtractOptions,
) -> Result<Extracted, InvalidReason> {
    let ip = match layers.ip {
        Ok(ip) => ip,
        Err(NotIp::LinkTruncated) => return Err(InvalidReason::LinkTruncated),
        Err(NotIp::OtherProtocol(_)) => return Err(InvalidReason::NotIp),
        Err(NotIp::BadIpv4(_)) => return Err(InvalidReason::BadIpv4Header),
        Err(NotIp::BadIpv6(_)) => return Err(InvalidReason::BadIpv6Header),
    };
    // `parse_frame` guarantees l3 <= l4 <= end <= frame.len().
    let datagram = &frame[ip.l3..ip.end];
    if ip.frag != Fragment::No {
        return Err(InvalidReason::Fragment);
    }
    let (family, src, dst, pseudo) = addresses(datagram, &ip, opts)?;
    let mut key = ConnKey {
        src: Endpoint {
            addr: src,
            ..Endpoint::default()
        },
        dst: Endpoint {
            addr: dst,
            ..Endpoint::default()
        },
        zone,
        proto: ip.proto,
        family,
    };
    let l4 = &frame[ip.l4..ip.end];
    let ip_len = datagram.len() as u32;
    let info = match transport(&mut key, l4, pseudo, opts.checksums)? {
        Transport::Info(info) => info,
        Transport::Icmp => {
            let m = IcmpPacket::new_checked(l4).map_err(l4_error)?;
            return icmp_message(m, key, ip_len);
        }
    };
    Ok(Extracted {
        key,
        related: false,
        l4: info,
        ip_len,
    })
}

/// The family, source and destination addresses of a datagram, and the
/// sum of its transport pseudo-header; the IPv4 header checksum checked.
fn addresses(
    datagram: &[u8],
    ip: &IpLayer,
    opts: ExtractOptions,
) -> Result<(Family, u128, u128, u64), InvalidReason> {
    let l4_len = (ip.end - ip.l4) as u32;
    Ok(match ip.version {
        IpVersion::V4 => {
            let h = ctrack_wire::ipv4::Ipv4Packet::new_unchecked(datagram);
            if opts.checksums && !h.verify_checksum() {
                return Err(InvalidReason::BadIpChecksum);
            }
            (
                Family::V4,
                Endpoint::addr_from_v4(h.src()),
                Endpoint::addr_from_v4(h.dst()),
                checksum::pseudo_header_v4(h.src(), h.dst(), ip.proto, l4_len),
            )
        }
        IpVersion::V6 => {
            let h = ipv6::Ipv6Packet::new_unchecked(datagram);
            (
                Family::V6,
                Endpoint::addr_from_v6(h.src()),
                Endpoint::addr_from_v6(h.dst()),
                checksum::pseudo_header_v6(&h.src(), &h.dst(), ip.proto, l4_len),
            )
        }
    })
}

/// What the transport header says.
enum Transport {
    /// The protocol tracker's part; ports are in the key.
    Info(L4Info),
    /// An ICMP or ICMPv6 message (checked): a query or an error.
    Icmp,
}

/// Checks the transport header (its checksum with `csum`) and puts its
/// ports in `key`.
fn transport(
    key: &mut ConnKey,
    l4: &[u8],
    pseudo: u64,
    csum: bool,
) -> Result<Transport, InvalidReason> {
    let family = key.family;
    Ok(Transport::Info(match (family, key.proto) {
        (_, ip_proto::TCP) => {
            let t = TcpPacket::new_checked(l4).map_err(l4_error)?;
            if csum && !checksum::is_valid(checksum::sum(pseudo, l4)) {
                return Err(InvalidReason::BadL4Checksum);
            }
            set_ports(key, t.src_port(), t.dst_port())?;
            L4Info::Tcp(Segment {
                flags: t.flags(),
                seq: t.seq(),
                ack: t.ack(),
                win: t.window(),
                payload_len: (l4.len() - t.header_len()) as u32,
                wscale: crate::proto::tcp::syn_wscale(&t),
            })
        }
        (_, ip_proto::UDP) => {
            let u = UdpPacket::new_checked(l4).map_err(l4_error)?;
            let len = usize::from(u.len_field());
            if len < udp::HEADER_LEN || len > l4.len() {
                return Err(InvalidReason::L4Malformed);
            }
            // A zero UDP checksum over IPv4 means "none".
            let skip = family == Family::V4 && u.checksum() == 0;
            if csum && !skip && !checksum::is_valid(checksum::sum(pseudo, l4)) {
                return Err(InvalidReason::BadL4Checksum);
            }
            set_ports(key, u.src_port(), u.dst_port())?;
            L4Info::Other
        }
        (_, ip_proto::UDPLITE) => {
            // Open vSwitch tracks UDP-Lite by addresses only and never checks
            // it; ctrack keys it by ports and checks it as Linux does
            // (RFC 3828: a checksum is mandatory, coverage 0 or 8..=len).
            let u = UdpPacket::new_checked(l4).map_err(l4_error)?;
            let cov =
                udp::udplite_coverage(u.len_field(), l4.len()).ok_or(InvalidReason::L4Malformed)?;
            if csum && (u.checksum() == 0 || !checksum::is_valid(checksum::sum(pseudo, &l4[..cov])))
            {
                return Err(InvalidReason::BadL4Checksum);
            }
            set_ports(key, u.src_port(), u.dst_port())?;
            L4Info::Other
        }
        (_, ip_proto::SCTP) => {
            let s = SctpPacket::new_checked(l4).map_err(l4_error)?;
            if !s.chunks_well_formed() {
                return Err(InvalidReason::L4Malformed);
            }
            if csum && !s.verify_checksum() {
                return Err(InvalidReason::BadL4Checksum);
            }
            set_ports(key, s.src_port(), s.dst_port())?;
            L4Info::Other
        }
        (Family::V4, ip_proto::ICMP) => {
            IcmpPacket::new_checked(l4).map_err(l4_error)?;
            if csum && checksum::checksum(l4) != 0 {
                return Err(InvalidReason::BadL4Checksum);
            }
            return Ok(Transport::Icmp);
        }
        (Family::V6, ip_proto::ICMPV6) => {
            IcmpPacket::new_checked(l4).map_err(l4_error)?;
            if csum && !checksum::is_valid(checksum::sum(pseudo, l4)) {
                return Err(InvalidReason::BadL4Checksum);
            }
            return Ok(Transport::Icmp);
        }
        // Any other protocol is tracked by its addresses.
        _ => L4Info::Other,
    }))
}

fn l4_error(e: ctrack_wire::Error) -> InvalidReason {
    match e {
        ctrack_wire::Error::Truncated => InvalidReason::L4Truncated,
        ctrack_wire::Error::Malformed => InvalidReason::L4Malformed,
    }
}

fn set_ports(key: &mut ConnKey, src: u16, dst: u16) -> Result<(), InvalidReason> {
    if src == 0 || dst == 0 {
        return Err(InvalidReason::ZeroPort);
    }
    key.src.port = src;
    key.dst.port = dst;
    Ok(())
}

/// Sets the ICMP query part of a key: both sides carry the identifier; the
/// source side the message type, the destination side the type of its
/// counterpart.
fn set_query(key: &mut ConnKey, id: u16, ty: u8, reverse: u8) {
    key.src.port = id;
    key.dst.port = id;
    key.src.icmp_type = ty;
    key.dst.icmp_type = reverse;
}

/// The key of an ICMP or ICMPv6 message: a query's identifier and types,
/// or for an error the key of the packet it quotes.
fn icmp_message(
    m: IcmpPacket<&[u8]>,
    mut key: ConnKey,
    ip_len: u32,
) -> Result<Extracted, InvalidReason> {
    type Quoted = fn(&[u8], u128) -> Option<ConnKey>;
    type Reverse = fn(u8) -> Option<u8>;
    let (reverse_query, is_error, quoted): (Reverse, fn(u8) -> bool, Quoted) = match key.family {
        Family::V4 => (icmp::v4::reverse_query, icmp::v4::is_error, quoted_v4),
        Family::V6 => (icmp::v6::reverse_query, icmp::v6::is_error, quoted_v6),
    };
    let ty = m.msg_type();
    if let Some(rev) = reverse_query(ty) {
        if m.code() != 0 {
            return Err(InvalidReason::IcmpBadCode);
        }
        set_query(&mut key, m.ident(), ty, rev);
        return Ok(Extracted {
            key,
            related: false,
            l4: L4Info::IcmpQuery { msg_type: ty },
            ip_len,
        });
    }
    if !is_error(ty) {
        return Err(InvalidReason::IcmpUnsupportedType);
    }
    let inner = quoted(m.quoted(), key.dst.addr).ok_or(InvalidReason::IcmpBadQuote)?;
    Ok(related(inner, key.zone, ip_len))
}

/// An ICMP error is looked up with the quoted packet's key reversed: the
/// quoted packet went from the error's recipient to some peer, so the error
/// belongs to that connection, travelling from the peer's side.
fn related(inner: ConnKey, zone: Zone, ip_len: u32) -> Extracted {
    let key = ConnKey { zone, ..inner }.reverse();
    Extracted {
        key,
        related: true,
        l4: L4Info::Other,
        ip_len,
    }
}

/// Minimum bytes of the quoted transport header that must be present in an
/// ICMPv4 error: RFC 792 quotes 8 bytes beyond the IP header.
const ICMP4_QUOTE_L4_LEN: usize = 8;

/// The key of the IPv4 packet an ICMP error quotes. Only the IP header and
/// the first 8 bytes of its payload need be present; the quoted lengths and
/// checksums are not checked (the quote is usually truncated). The quoted
/// packet must come from the error's recipient.
fn quoted_v4(q: &[u8], outer_dst: u128) -> Option<ConnKey> {
    let h = ctrack_wire::ipv4::Ipv4Packet::new_checked(q).ok()?;
    if h.is_later_fragment() {
        return None;
    }
    let src = Endpoint::addr_from_v4(h.src());
    if src != outer_dst {
        return None;
    }
    let mut key = ConnKey {
        src: Endpoint {
            addr: src,
            ..Endpoint::default()
        },
        dst: Endpoint {
            addr: Endpoint::addr_from_v4(h.dst()),
            ..Endpoint::default()
        },
        zone: 0,
        proto: h.protocol(),
        family: Family::V4,
    };
    let l4 = &q[h.header_len()..];
    quoted_l4(
        &mut key,
        l4,
        ICMP4_QUOTE_L4_LEN,
        ICMP4_QUOTE_L4_LEN,
        ICMP4_QUOTE_L4_LEN,
    )?;
    Some(key)
}

/// The key of the IPv6 packet an ICMPv6 error quotes. Extension headers are
/// walked within the quote; a quoted fragment is refused.
fn quoted_v6(q: &[u8], outer_dst: u128) -> Option<ConnKey> {
    let h = ipv6::Ipv6Packet::new_checked(q).ok()?;
    let chain = ipv6::walk_extensions(&q[ipv6::HEADER_LEN..], h.next_header()).ok()?;
    if chain.frag != Fragment::No {
        return None;
    }
    let src = Endpoint::addr_from_v6(h.src());
    if src != outer_dst {
        return None;
    }
    let mut key = ConnKey {
        src: Endpoint {
            addr: src,
            ..Endpoint::default()
        },
        dst: Endpoint {
            addr: Endpoint::addr_from_v6(h.dst()),
            ..Endpoint::default()
        },
        zone: 0,
        proto: chain.proto,
        family: Family::V6,
    };
    let l4 = &q[ipv6::HEADER_LEN + chain.l4_offset..];
    // Open vSwitch asks for whole TCP and SCTP headers in an ICMPv6 quote
    // (which RFC 4443 makes room for), but only 8 bytes in an ICMPv4 one.
    quoted_l4(
        &mut key,
        l4,
        ctrack_wire::tcp::MIN_HEADER_LEN,
        udp::HEADER_LEN,
        ctrack_wire::sctp::HEADER_LEN,
    )?;
    Some(key)
}

/// Reads the ports or ICMP query fields of a quoted transport header. A
/// quoted ICMP error is refused (errors about errors are never sent).
fn quoted_l4(
    key: &mut ConnKey,
    l4: &[u8],
    tcp_min: usize,
    udp_min: usize,
    sctp_min: usize,
) -> Option<()> {
    let ports = |l4: &[u8], min: usize| -> Option<(u16, u16)> {
        if l4.len() < min {
            return None;
        }
        let (s, d) = (
            u16::from_be_bytes([l4[0], l4[1]]),
            u16::from_be_bytes([l4[2], l4[3]]),
        );
        (s != 0 && d != 0).then_some((s, d))
    };
    let (sp, dp) = match (key.family, key.proto) {
        (_, ip_proto::TCP) => ports(l4, tcp_min)?,
        (_, ip_proto::UDP | ip_proto::UDPLITE) => ports(l4, udp_min)?,
        (_, ip_proto::SCTP) => ports(l4, sctp_min)?,
        (Family::V4, ip_proto::ICMP) | (Family::V6, ip_proto::ICMPV6) => {
            let m = IcmpPacket::new_checked(l4).ok()?;
            let rev = match key.family {
                Family::V4 => icmp::v4::reverse_query(m.msg_type()),
                Family::V6 => icmp::v6::reverse_query(m.msg_type()),
            }?;
            if m.code() != 0 {
                return None;
            }
            set_query(key, m.ident(), m.msg_type(), rev);
            return Some(());
        }
        _ => return Some(()),
    };
    key.src.port = sp;
    key.dst.port = dp;
    Some(())
}
