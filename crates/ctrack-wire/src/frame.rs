//! One pass over a frame that finds its layers: link header, VLAN tags, the
//! IP header and where the upper layer starts and the datagram ends.
//!
//! The pass follows the rules Open vSwitch's flow extraction applies before
//! its conntrack sees a packet, so that ctrack classifies the same frames as
//! IP (with an upper layer) and the same ones as not: an IPv4 header is taken
//! if its length fields are consistent with the frame, an IPv6 header if its
//! payload fits and its extension headers walk cleanly. Bytes past the IP
//! datagram's length are link-layer padding and are never part of it.

use crate::ethernet::{self, VlanTags, ethertype};
use crate::ipv6::{self, Fragment};
use crate::{Error, ipv4};

/// How the captured bytes begin.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkType {
    /// Ethernet II (pcap link type 1).
    Ethernet,
    /// A bare IPv4 or IPv6 packet (pcap link types 101, 228, 229).
    RawIp,
    /// Linux "cooked" capture v1 (pcap link type 113), 16-byte header.
    LinuxSll,
    /// Linux "cooked" capture v2 (pcap link type 276), 20-byte header.
    LinuxSll2,
}

impl core::fmt::Display for LinkType {
    /// What the link type is called in messages (`raw IP`, `Linux cooked
    /// (SLL)`).
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            LinkType::Ethernet => "Ethernet",
            LinkType::RawIp => "raw IP",
            LinkType::LinuxSll => "Linux cooked (SLL)",
            LinkType::LinuxSll2 => "Linux cooked v2 (SLL2)",
        })
    }
}

/// IP version.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IpVersion {
    /// IPv4.
    V4,
    /// IPv6.
    V6,
}

/// Where the IP layer of a frame lies. All offsets are from the start of the
/// frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IpLayer {
    /// IPv4 or IPv6.
    pub version: IpVersion,
    /// Offset of the IP header.
    pub l3: usize,
    /// Offset of the upper-layer header (after IPv4 options or IPv6
    /// extension headers).
    pub l4: usize,
    /// End of the IP datagram, per its length field; what follows is padding.
    pub end: usize,
    /// Upper-layer protocol. For an IPv6 later fragment this is 44
    /// (fragment), as the payload's protocol cannot be seen.
    pub proto: u8,
    /// Fragmentation status.
    pub frag: Fragment,
    /// For IPv6, the offset of the fragment header if there is one.
    pub frag_header: Option<usize>,
}

impl IpLayer {
    /// Bytes from the IP header to the end of the datagram.
    pub fn l3_len(&self) -> usize {
        self.end - self.l3
    }

    /// Bytes from the upper-layer header to the end of the datagram.
    pub fn l4_len(&self) -> usize {
        self.end - self.l4
    }
}

/// Why a frame has no usable IP layer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotIp {
    /// The link-layer header itself is cut short.
    LinkTruncated,
    /// The frame carries something other than IP (ARP, MPLS, LLDP, an
    /// 802.3 frame without SNAP, a third VLAN tag...).
    OtherProtocol(Option<u16>),
    /// An IPv4 EtherType, but the header is cut short or its lengths are
    /// inconsistent.
    BadIpv4(Error),
    /// An IPv6 EtherType, but the header is cut short, the payload length
    /// runs past the frame, or an extension header is malformed.
    BadIpv6(Error),
}

impl NotIp {
    /// Whether the frame's EtherType says IPv4 or IPv6 although its IP
    /// header is not usable. Open vSwitch's flow of such a frame keeps
    /// that EtherType (`dl_type`) and no network fields, so OVN's `ip`,
    /// `ip4` and `ip6` match it, and its conntrack finds it invalid.
    pub fn is_ip_ethertype(&self) -> bool {
        matches!(self, NotIp::BadIpv4(_) | NotIp::BadIpv6(_))
    }
}

/// The layers of a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Frame {
    /// VLAN tags, outermost first.
    pub vlans: VlanTags,
    /// The EtherType after VLAN tags and LLC/SNAP, if one was found.
    pub ethertype: Option<u16>,
    /// Offset of the network header, if the link header is complete.
    pub l3: Option<usize>,
    /// The IP layer, or why there is none.
    pub ip: Result<IpLayer, NotIp>,
}

/// Finds the layers of `data`, captured with link type `link`. Never panics
/// and never reads outside `data`.
pub fn parse_frame(data: &[u8], link: LinkType) -> Frame {
    let (vlans, ty, l3) = match link {
        LinkType::Ethernet => {
            if data.len() < ethernet::HEADER_LEN {
                return Frame::no_link();
            }
            ethernet::parse_l2_tail(data, 12)
        }
        LinkType::LinuxSll | LinkType::LinuxSll2 => {
            // SLL keeps the protocol at byte 14 of 16; SLL2 at byte 0 of 20.
            let (proto_at, hdr_len) = if link == LinkType::LinuxSll {
                (14, 16)
            } else {
                (0, 20)
            };
            if data.len() < hdr_len {
                return Frame::no_link();
            }
            let ty = crate::be16(data, proto_at);
            (VlanTags::default(), Some(ty), hdr_len)
        }
        LinkType::RawIp => {
            let ty = match data.first().map(|b| b >> 4) {
                Some(4) => Some(ethertype::IPV4),
                Some(6) => Some(ethertype::IPV6),
                Some(_) => None,
                None => return Frame::no_link(),
            };
            (VlanTags::default(), ty, 0)
        }
    };
    let ip = match ty {
        Some(ethertype::IPV4) => parse_ipv4(data, l3).map_err(NotIp::BadIpv4),
        Some(ethertype::IPV6) => parse_ipv6(data, l3).map_err(NotIp::BadIpv6),
        other => Err(NotIp::OtherProtocol(other)),
    };
    Frame {
        vlans,
        ethertype: ty,
        l3: Some(l3),
        ip,
    }
}

/// The Ethernet and IPv4 headers and the IPv4 payload of a frame of the
/// common case: untagged Ethernet II carrying an IPv4 datagram with a
/// header of five words, whole (its length within the frame, at most 64
/// KiB of padding after it, as [`parse_frame`] and Open vSwitch require)
/// and not a fragment; `None` for any other frame. Such a frame's IP
/// layer parses, and it is never neighbour discovery (IPv6 only): the
/// fast paths that take it (the tracker's reader, the classifier's key)
/// need not parse its layers.
#[inline(always)]
pub fn plain_ipv4(frame: &[u8]) -> Option<(&[u8; 34], &[u8])> {
    const ETH: usize = ethernet::HEADER_LEN;
    const IP: usize = ipv4::MIN_HEADER_LEN;
    // The Ethernet and IPv4 headers as one array: the checks below need
    // no bounds checks.
    let h: &[u8; 34] = frame.first_chunk()?;
    // IPv4 EtherType; version 4 with a header of five words (no options).
    if h[12] != 0x08 || h[13] != 0x00 || h[14] != 0x45 {
        return None;
    }
    let total = usize::from(u16::from_be_bytes([h[16], h[17]]));
    let area = frame.len() - ETH;
    if total < IP || total > area || area - total > usize::from(u16::MAX) {
        return None;
    }
    // More fragments, or an offset: a fragment.
    if (h[20] & 0x3f) != 0 || h[21] != 0 {
        return None;
    }
    Some((h, frame.get(ETH + IP..ETH + total)?))
}

/// The Ethernet and IPv6 headers of a frame of the common case over
/// IPv6: untagged Ethernet II carrying an IPv6 packet whose next header
/// is TCP, UDP or SCTP (no extension header, so neither a fragment nor
/// ICMPv6 and its neighbour discovery), whole (its payload length within
/// the frame, at most 64 KiB of padding after it, as [`parse_frame`]
/// requires); `None` for any other frame. Such a frame's IP layer parses,
/// its transport header starting at byte 54.
#[inline(always)]
pub fn plain_ipv6(frame: &[u8]) -> Option<&[u8; 54]> {
    const ETH: usize = ethernet::HEADER_LEN;
    let h: &[u8; 54] = frame.first_chunk()?;
    // IPv6 EtherType, version 6, a transport protocol next.
    if h[12] != 0x86 || h[13] != 0xdd || h[14] >> 4 != 6 {
        return None;
    }
    if !matches!(
        h[20],
        crate::ip_proto::TCP | crate::ip_proto::UDP | crate::ip_proto::SCTP
    ) {
        return None;
    }
    let end = ipv6::HEADER_LEN + usize::from(u16::from_be_bytes([h[18], h[19]]));
    let area = frame.len() - ETH;
    if end > area || area - end > usize::from(u16::MAX) {
        return None;
    }
    Some(h)
}

impl Frame {
    fn no_link() -> Frame {
        Frame {
            vlans: VlanTags::default(),
            ethertype: None,
            l3: None,
            ip: Err(NotIp::LinkTruncated),
        }
    }
}

fn parse_ipv4(data: &[u8], l3: usize) -> Result<IpLayer, Error> {
    let area = data.get(l3..).ok_or(Error::Truncated)?;
    let ip = ipv4::Ipv4Packet::new_checked(area)?;
    let hl = ip.header_len();
    let total = usize::from(ip.total_len());
    if total > area.len() {
        return Err(Error::Truncated);
    }
    if total < hl {
        return Err(Error::Malformed);
    }
    // Open vSwitch refuses more than 64 KiB of trailing padding.
    if area.len() - total > usize::from(u16::MAX) {
        return Err(Error::Malformed);
    }
    let frag = if ip.is_later_fragment() {
        Fragment::Later
    } else if ip.is_fragment() {
        Fragment::First
    } else {
        Fragment::No
    };
    Ok(IpLayer {
        version: IpVersion::V4,
        l3,
        l4: l3 + hl,
        end: l3 + total,
        proto: ip.protocol(),
        frag,
        frag_header: None,
    })
}

fn parse_ipv6(data: &[u8], l3: usize) -> Result<IpLayer, Error> {
    let area = data.get(l3..).ok_or(Error::Truncated)?;
    let ip = ipv6::Ipv6Packet::new_checked(area)?;
    let end = ipv6::HEADER_LEN + usize::from(ip.payload_len());
    if end > area.len() {
        return Err(Error::Truncated);
    }
    if area.len() - end > usize::from(u16::MAX) {
        return Err(Error::Malformed);
    }
    let chain = ipv6::walk_extensions(&area[ipv6::HEADER_LEN..end], ip.next_header())?;
    let base = l3 + ipv6::HEADER_LEN;
    Ok(IpLayer {
        version: IpVersion::V6,
        l3,
        l4: base + chain.l4_offset,
        end: l3 + end,
        proto: chain.proto,
        frag: chain.frag,
        frag_header: chain.frag_header.map(|o| base + o),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ip_proto;

    const ETH_V4: [u8; 14] = [0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 2, 0x08, 0x00];

    fn v4_udp(total: u16, extra: usize) -> Vec<u8> {
        let mut f = ETH_V4.to_vec();
        f.extend_from_slice(&[
            0x45, 0, 0, 0, 0, 0, 0, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2,
        ]);
        f[16..18].copy_from_slice(&total.to_be_bytes());
        f.extend_from_slice(&[0, 1, 0, 2, 0, 8, 0, 0]);
        f.extend(std::iter::repeat_n(0xee, extra));
        f
    }

    #[test]
    fn ipv4_with_padding() {
        let f = v4_udp(28, 18); // 60-byte minimum frame: 18 bytes padding
        let fr = parse_frame(&f, LinkType::Ethernet);
        let ip = fr.ip.unwrap();
        assert_eq!(ip.version, IpVersion::V4);
        assert_eq!((ip.l3, ip.l4, ip.end), (14, 34, 42));
        assert_eq!(ip.proto, ip_proto::UDP);
        assert_eq!(ip.l4_len(), 8);
        assert_eq!(ip.frag, Fragment::No);
    }

    #[test]
    fn ipv4_length_errors() {
        let f = v4_udp(29, 0); // total length past the frame
        assert_eq!(
            parse_frame(&f, LinkType::Ethernet).ip,
            Err(NotIp::BadIpv4(Error::Truncated))
        );
        let f = v4_udp(19, 0); // total length below the header length
        assert_eq!(
            parse_frame(&f, LinkType::Ethernet).ip,
            Err(NotIp::BadIpv4(Error::Malformed))
        );
        let f = v4_udp(28, 0);
        assert!(matches!(
            parse_frame(&f[..30], LinkType::Ethernet).ip,
            Err(NotIp::BadIpv4(Error::Truncated))
        ));
    }

    #[test]
    fn link_errors_and_other_protocols() {
        assert_eq!(
            parse_frame(&[0; 13], LinkType::Ethernet).ip,
            Err(NotIp::LinkTruncated)
        );
        let mut arp = ETH_V4.to_vec();
        arp[12..14].copy_from_slice(&[0x08, 0x06]);
        arp.extend_from_slice(&[0; 28]);
        assert_eq!(
            parse_frame(&arp, LinkType::Ethernet).ip,
            Err(NotIp::OtherProtocol(Some(ethertype::ARP)))
        );
        assert_eq!(
            parse_frame(&[], LinkType::RawIp).ip,
            Err(NotIp::LinkTruncated)
        );
        assert_eq!(
            parse_frame(&[0x50], LinkType::RawIp).ip,
            Err(NotIp::OtherProtocol(None))
        );
    }

    #[test]
    fn vlan_and_raw_and_sll() {
        let plain = v4_udp(28, 0);
        let mut tagged = plain[..12].to_vec();
        tagged.extend_from_slice(&[0x81, 0x00, 0x00, 0x64]);
        tagged.extend_from_slice(&plain[12..]);
        let fr = parse_frame(&tagged, LinkType::Ethernet);
        assert_eq!(fr.vlans.len(), 1);
        assert_eq!(fr.ip.unwrap().l3, 18);

        let raw = &plain[14..];
        let ip = parse_frame(raw, LinkType::RawIp).ip.unwrap();
        assert_eq!((ip.l3, ip.l4, ip.end), (0, 20, 28));

        let mut sll = vec![0, 0, 0, 1, 0, 6, 0, 0, 0, 0, 0, 0, 0, 0, 0x08, 0x00];
        sll.extend_from_slice(raw);
        assert_eq!(parse_frame(&sll, LinkType::LinuxSll).ip.unwrap().l3, 16);
        let mut sll2 = vec![
            0x08, 0x00, 0, 0, 0, 0, 0, 1, 0, 1, 0, 6, 0, 0, 0, 0, 0, 0, 0, 0,
        ];
        sll2.extend_from_slice(raw);
        assert_eq!(parse_frame(&sll2, LinkType::LinuxSll2).ip.unwrap().l3, 20);
    }

    fn v6(next: u8, ext: &[u8], l4: &[u8]) -> Vec<u8> {
        let mut f = ETH_V4.to_vec();
        f[12..14].copy_from_slice(&[0x86, 0xdd]);
        let plen = (ext.len() + l4.len()) as u16;
        f.extend_from_slice(&[0x60, 0, 0, 0]);
        f.extend_from_slice(&plen.to_be_bytes());
        f.extend_from_slice(&[next, 64]);
        f.extend_from_slice(&[0; 32]);
        f.extend_from_slice(ext);
        f.extend_from_slice(l4);
        f
    }

    #[test]
    fn ipv6_layers() {
        let f = v6(ip_proto::UDP, &[], &[0, 1, 0, 2, 0, 8, 0, 0]);
        let ip = parse_frame(&f, LinkType::Ethernet).ip.unwrap();
        assert_eq!(
            (ip.l3, ip.l4, ip.end, ip.proto),
            (14, 54, 62, ip_proto::UDP)
        );

        let hbh = [ip_proto::TCP, 0, 0, 0, 0, 0, 0, 0];
        let f = v6(ip_proto::HOPOPTS, &hbh, &[0; 20]);
        let ip = parse_frame(&f, LinkType::Ethernet).ip.unwrap();
        assert_eq!((ip.l4, ip.proto), (62, ip_proto::TCP));

        let later = [ip_proto::UDP, 0, 0x00, 0x10, 0, 0, 0, 1];
        let f = v6(ip_proto::FRAGMENT, &later, &[0; 8]);
        let ip = parse_frame(&f, LinkType::Ethernet).ip.unwrap();
        assert_eq!(ip.frag, Fragment::Later);
        assert_eq!(ip.frag_header, Some(54));

        // Payload length past the end of the frame.
        let mut f = v6(ip_proto::UDP, &[], &[0; 8]);
        f.truncate(f.len() - 1);
        assert_eq!(
            parse_frame(&f, LinkType::Ethernet).ip,
            Err(NotIp::BadIpv6(Error::Truncated))
        );
        // Extension header running past the payload length.
        let f = v6(
            ip_proto::HOPOPTS,
            &[ip_proto::TCP, 1, 0, 0, 0, 0, 0, 0],
            &[],
        );
        assert_eq!(
            parse_frame(&f, LinkType::Ethernet).ip,
            Err(NotIp::BadIpv6(Error::Truncated))
        );
    }

    #[test]
    fn every_prefix_of_a_frame_is_safe() {
        let f = v6(
            ip_proto::HOPOPTS,
            &[ip_proto::TCP, 0, 0, 0, 0, 0, 0, 0],
            &[0; 20],
        );
        for n in 0..=f.len() {
            let _ = parse_frame(&f[..n], LinkType::Ethernet);
            let _ = parse_frame(&f[..n], LinkType::RawIp);
            let _ = parse_frame(&f[..n], LinkType::LinuxSll);
        }
    }

    /// A plain IPv6 frame is one whose layers parse as IPv6, whole, with
    /// TCP, UDP or SCTP right after the fixed header and no tag.
    #[test]
    fn plain_ipv6_is_what_the_parser_finds_plain() {
        use crate::build::{Frame as Build, L4};
        let (a, b) = ("fd00::1".parse().unwrap(), "fd00::2".parse().unwrap());
        let mut f = Build::v6(a, b, L4::udp(1, 2, b"abcd")).build();
        f.extend_from_slice(&[0; 6]); // padding
        for plain in [
            f.clone(),
            Build::v6(a, b, L4::tcp(1, 2, 0x02)).build(),
            Build::v6(a, b, L4::udp(1, 2, b"")).build(),
        ] {
            assert!(plain_ipv6(&plain).is_some());
            let ip = parse_frame(&plain, LinkType::Ethernet).ip.expect("parses");
            assert_eq!(
                (ip.version, ip.l4, ip.frag),
                (IpVersion::V6, 54, Fragment::No)
            );
        }
        let tagged = Build::v6(a, b, L4::udp(1, 2, b"")).vlan(0x8100, 5).build();
        let icmp = Build::v6(a, b, L4::icmp_query(128, 1, 1)).build();
        let mut long = f.clone();
        long[19] = 200; // a payload length past the frame
        let mut version = f.clone();
        version[14] = 0x45;
        let mut ext = f.clone();
        ext[20] = 0; // a hop-by-hop header next
        for other in [tagged, icmp, long, version, ext, f[..53].to_vec()] {
            assert!(plain_ipv6(&other).is_none(), "{other:02x?}");
        }
    }

    /// A plain IPv4 frame is one whose layers parse as IPv4, whole and not
    /// a fragment, with a five-word header and no tag; its payload is the
    /// datagram's, padding left out.
    #[test]
    fn plain_ipv4_is_what_the_parser_finds_plain() {
        use crate::build::{Frame as Build, L4};
        let mut f = Build::v4([10, 0, 0, 1], [10, 0, 0, 2], L4::udp(1, 2, b"abcd")).build();
        f.extend_from_slice(&[0; 6]); // padding
        let (h, l4) = plain_ipv4(&f).expect("plain");
        assert_eq!((h.len(), l4.len()), (34, 12));
        let layers = parse_frame(&f, LinkType::Ethernet);
        let ip = layers.ip.expect("parses");
        assert_eq!((ip.l4, ip.end, ip.frag), (34, 34 + 12, Fragment::No));
        let tagged = Build::v4([10, 0, 0, 1], [10, 0, 0, 2], L4::udp(1, 2, b"")).vlan(0x8100, 5);
        let mut frag = Build::v4([10, 0, 0, 1], [10, 0, 0, 2], L4::udp(1, 2, b""));
        frag.more_frags = true;
        let mut options = Build::v4([10, 0, 0, 1], [10, 0, 0, 2], L4::udp(1, 2, b""));
        options.ip_options = vec![1; 4];
        let mut long = f.clone();
        long[17] = 200; // a total length past the frame
        for other in [
            tagged.build(),
            frag.build(),
            options.build(),
            long,
            f[..33].to_vec(),
        ] {
            assert!(plain_ipv4(&other).is_none());
        }
    }

    /// What [`parse_frame`] must find in an Ethernet frame whose datagram
    /// claims `claimed` bytes of an IP area of `area` bytes, the header
    /// being `hl` of them: too long is truncated, shorter than its header
    /// or followed by more than 64 KiB of padding is malformed.
    fn expected_end(claimed: usize, hl: usize, area: usize) -> Result<usize, Error> {
        if claimed > area {
            Err(Error::Truncated)
        } else if claimed < hl || area - claimed > usize::from(u16::MAX) {
            Err(Error::Malformed)
        } else {
            Ok(14 + claimed)
        }
    }

    /// Every length at and beside each limit (the header's, the frame's,
    /// 64 KiB of padding), with each fragment flag: the parser finds what
    /// the limits say, and a frame is plain exactly when it finds a whole
    /// untagged five-word datagram that is not a fragment.
    #[test]
    fn ipv4_lengths_at_every_edge() {
        let flags = [(0, 0), (0x40, 0), (0x80, 0), (0x20, 0), (0, 1), (0x01, 0)];
        for payload in [0usize, 8] {
            for pad in [0usize, 1, 65_534, 65_535, 65_536] {
                let area = 20 + payload + pad;
                for claimed in [19, 20, 21, 19 + payload, 20 + payload, 21 + payload] {
                    for (hi, lo) in flags {
                        let mut f = v4_udp(claimed as u16, 0);
                        f.resize(14 + area, 0xee);
                        f[20] = hi;
                        f[21] = lo;
                        let ip = parse_frame(&f, LinkType::Ethernet).ip;
                        let end = expected_end(claimed, 20, area);
                        let case = format!("claimed {claimed} area {area} flags {hi:x} {lo:x}");
                        assert_eq!(ip.map(|l| l.end), end.map_err(NotIp::BadIpv4), "{case}");
                        let whole = end.is_ok() && hi & 0x3f == 0 && lo == 0;
                        let plain = plain_ipv4(&f);
                        assert_eq!(plain.is_some(), whole, "{case}");
                        if let (Some((h, l4)), Ok(end)) = (plain, end) {
                            assert_eq!((&h[..], l4), (&f[..34], &f[34..end]), "{case}");
                        }
                    }
                }
            }
        }
    }

    /// The same for IPv6's payload length, with each next header: plain
    /// only for a whole datagram with TCP, UDP or SCTP next.
    #[test]
    fn ipv6_lengths_at_every_edge() {
        let next = [
            ip_proto::TCP,
            ip_proto::UDP,
            ip_proto::SCTP,
            ip_proto::ICMPV6,
            200,
        ];
        for payload in [0usize, 8] {
            for pad in [0usize, 1, 65_534, 65_535, 65_536] {
                let area = 40 + payload + pad;
                for claimed in [payload.saturating_sub(1), payload, payload + 1] {
                    for proto in next {
                        let mut f = v6(proto, &[], &[]);
                        f[18..20].copy_from_slice(&(claimed as u16).to_be_bytes());
                        f.resize(14 + area, 0xee);
                        let ip = parse_frame(&f, LinkType::Ethernet).ip;
                        let end = expected_end(40 + claimed, 40, area);
                        let case = format!("claimed {claimed} area {area} next {proto}");
                        assert_eq!(ip.map(|l| l.end), end.map_err(NotIp::BadIpv6), "{case}");
                        let transport =
                            matches!(proto, ip_proto::TCP | ip_proto::UDP | ip_proto::SCTP);
                        let plain = plain_ipv6(&f);
                        assert_eq!(plain.is_some(), end.is_ok() && transport, "{case}");
                        if let Some(h) = plain {
                            assert_eq!(&h[..], &f[..54]);
                        }
                    }
                }
            }
        }
    }

    /// The lengths the layers report, and which EtherTypes say IP.
    #[test]
    fn a_layers_lengths_and_an_ip_ethertype() {
        let f = v4_udp(28, 4);
        let ip = parse_frame(&f, LinkType::Ethernet).ip.unwrap();
        assert_eq!((ip.l3_len(), ip.l4_len()), (28, 8));
        for (not_ip, says_ip) in [
            (NotIp::LinkTruncated, false),
            (NotIp::OtherProtocol(Some(ethertype::ARP)), false),
            (NotIp::OtherProtocol(None), false),
            (NotIp::BadIpv4(Error::Truncated), true),
            (NotIp::BadIpv6(Error::Malformed), true),
        ] {
            assert_eq!(not_ip.is_ip_ethertype(), says_ip, "{not_ip:?}");
        }
        // Exactly the link header's length and exactly SLL's: a link, no IP.
        let sll = [0u8; 16];
        assert_eq!(parse_frame(&sll, LinkType::LinuxSll).l3, Some(16));
        assert_eq!(parse_frame(&sll[..15], LinkType::LinuxSll).l3, None);
        let sll2 = [0u8; 20];
        assert_eq!(parse_frame(&sll2, LinkType::LinuxSll2).l3, Some(20));
        assert_eq!(parse_frame(&sll2[..19], LinkType::LinuxSll2).l3, None);
        assert_eq!(parse_frame(&f[..14], LinkType::Ethernet).l3, Some(14));
        assert_eq!(LinkType::LinuxSll2.to_string(), "Linux cooked v2 (SLL2)");
        assert_eq!(LinkType::RawIp.to_string(), "raw IP");
    }

    /// An EtherType one byte away from IP's, over what looks like an IP
    /// header, is not plain; nor is the IP version alone.
    #[test]
    fn a_near_ip_ethertype_is_not_plain() {
        let v4 = v4_udp(28, 0);
        let v6 = v6(ip_proto::UDP, &[], &[0; 8]);
        assert!(plain_ipv4(&v4).is_some() && plain_ipv6(&v6).is_some());
        for (at, byte) in [(12, 0x09), (13, 0x06), (14, 0x46)] {
            let mut f = v4.clone();
            f[at] = byte;
            assert!(plain_ipv4(&f).is_none(), "byte {at} = {byte:#x}");
        }
        for (at, byte) in [(12, 0x87), (13, 0xdc), (14, 0x40)] {
            let mut f = v6.clone();
            f[at] = byte;
            assert!(plain_ipv6(&f).is_none(), "byte {at} = {byte:#x}");
        }
    }

    /// A fragment header after another extension header is found where
    /// it lies.
    #[test]
    fn a_fragment_header_after_hop_by_hop() {
        let exts = [
            ip_proto::FRAGMENT,
            0,
            0,
            0,
            0,
            0,
            0,
            0, // hop-by-hop
            ip_proto::UDP,
            0,
            0x00,
            0x10,
            0,
            0,
            0,
            1, // a later fragment
        ];
        let f = v6(ip_proto::HOPOPTS, &exts, &[0; 8]);
        let ip = parse_frame(&f, LinkType::Ethernet).ip.unwrap();
        assert_eq!((ip.frag, ip.frag_header), (Fragment::Later, Some(62)));
    }
}
