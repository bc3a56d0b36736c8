//! Building frames: Ethernet (with VLAN tags), IPv4 (with options and
//! fragment fields), IPv6 (with extension headers), and TCP, UDP, UDP-Lite,
//! SCTP, ICMP, ICMPv6 or any payload, with correct lengths and checksums.
//!
//! For tests, benchmarks and traffic generators; the datapath never builds
//! packets from scratch.
//!
//! ```
//! use ctrack_wire::build::{Frame, L4};
//! use ctrack_wire::tcp::flags;
//! let syn = Frame::v4([10, 0, 0, 1], [10, 0, 0, 2], L4::tcp(40000, 80, flags::SYN)).build();
//! assert_eq!(syn.len(), 14 + 20 + 20);
//! ```

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::checksum;
use crate::ethernet::{VlanTag, ethertype};
use crate::ip_proto;

/// A transport header and payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum L4 {
    /// A TCP segment.
    Tcp {
        /// Source port.
        sport: u16,
        /// Destination port.
        dport: u16,
        /// Sequence number.
        seq: u32,
        /// Acknowledgment number.
        ack: u32,
        /// Flag bits.
        flags: u16,
        /// Window.
        window: u16,
        /// Option bytes (padded to a multiple of 4 with EOL).
        options: Vec<u8>,
        /// Payload.
        payload: Vec<u8>,
    },
    /// A UDP datagram.
    Udp {
        /// Source port.
        sport: u16,
        /// Destination port.
        dport: u16,
        /// Payload.
        payload: Vec<u8>,
    },
    /// A UDP-Lite datagram.
    UdpLite {
        /// Source port.
        sport: u16,
        /// Destination port.
        dport: u16,
        /// Checksum coverage field (0: everything).
        coverage: u16,
        /// Payload.
        payload: Vec<u8>,
    },
    /// An SCTP packet.
    Sctp {
        /// Source port.
        sport: u16,
        /// Destination port.
        dport: u16,
        /// Verification tag.
        vtag: u32,
        /// The chunks, already encoded.
        chunks: Vec<u8>,
    },
    /// An ICMP (over IPv4) or ICMPv6 (over IPv6) message.
    Icmp {
        /// Type.
        ty: u8,
        /// Code.
        code: u8,
        /// The 4 bytes after the checksum (identifier and sequence of a
        /// query, unused or MTU for an error).
        rest: [u8; 4],
        /// The body (a quoted packet for an error).
        body: Vec<u8>,
    },
    /// Any other protocol: its number and payload.
    Raw {
        /// Protocol number.
        proto: u8,
        /// Payload.
        payload: Vec<u8>,
    },
}

impl L4 {
    /// A TCP segment with no payload, sequence numbers 0 and a 64 KiB window.
    pub fn tcp(sport: u16, dport: u16, flags: u16) -> L4 {
        L4::Tcp {
            sport,
            dport,
            seq: 0,
            ack: 0,
            flags,
            window: 65535,
            options: Vec::new(),
            payload: Vec::new(),
        }
    }

    /// A TCP segment with sequence numbers, window and payload.
    pub fn tcp_seg(
        sport: u16,
        dport: u16,
        flags: u16,
        seq: u32,
        ack: u32,
        window: u16,
        payload: &[u8],
    ) -> L4 {
        L4::Tcp {
            sport,
            dport,
            seq,
            ack,
            flags,
            window,
            options: Vec::new(),
            payload: payload.to_vec(),
        }
    }

    /// A UDP datagram.
    pub fn udp(sport: u16, dport: u16, payload: &[u8]) -> L4 {
        L4::Udp {
            sport,
            dport,
            payload: payload.to_vec(),
        }
    }

    /// An ICMP or ICMPv6 echo-style query (echo, timestamp, information).
    pub fn icmp_query(ty: u8, id: u16, seq: u16) -> L4 {
        let mut rest = [0; 4];
        rest[..2].copy_from_slice(&id.to_be_bytes());
        rest[2..].copy_from_slice(&seq.to_be_bytes());
        L4::Icmp {
            ty,
            code: 0,
            rest,
            body: b"ctrack-ping".to_vec(),
        }
    }

    /// An ICMP or ICMPv6 error quoting `quoted` (an IP packet, usually cut
    /// to its header and 8 bytes).
    pub fn icmp_error(ty: u8, code: u8, quoted: &[u8]) -> L4 {
        L4::Icmp {
            ty,
            code,
            rest: [0; 4],
            body: quoted.to_vec(),
        }
    }

    fn proto(&self, v6: bool) -> u8 {
        match self {
            L4::Tcp { .. } => ip_proto::TCP,
            L4::Udp { .. } => ip_proto::UDP,
            L4::UdpLite { .. } => ip_proto::UDPLITE,
            L4::Sctp { .. } => ip_proto::SCTP,
            L4::Icmp { .. } if v6 => ip_proto::ICMPV6,
            L4::Icmp { .. } => ip_proto::ICMP,
            L4::Raw { proto, .. } => *proto,
        }
    }

    /// Encodes the header and payload with the checksum computed over the
    /// pseudo-header sum `pseudo` (ignored by ICMPv4, SCTP and raw).
    fn encode(&self, pseudo: u64) -> Vec<u8> {
        match self {
            L4::Tcp {
                sport,
                dport,
                seq,
                ack,
                flags,
                window,
                options,
                payload,
            } => {
                let mut opts = options.clone();
                while opts.len() % 4 != 0 {
                    opts.push(0);
                }
                let hl = 20 + opts.len();
                let mut b = Vec::with_capacity(hl + payload.len());
                b.extend_from_slice(&sport.to_be_bytes());
                b.extend_from_slice(&dport.to_be_bytes());
                b.extend_from_slice(&seq.to_be_bytes());
                b.extend_from_slice(&ack.to_be_bytes());
                let off_flags = ((hl as u16 / 4) << 12) | (flags & 0x0fff);
                b.extend_from_slice(&off_flags.to_be_bytes());
                b.extend_from_slice(&window.to_be_bytes());
                b.extend_from_slice(&[0, 0, 0, 0]);
                b.extend_from_slice(&opts);
                b.extend_from_slice(payload);
                let c = checksum::finish(checksum::sum(pseudo, &b));
                b[16..18].copy_from_slice(&c.to_be_bytes());
                b
            }
            L4::Udp {
                sport,
                dport,
                payload,
            } => {
                let mut b = udp_header(*sport, *dport, (8 + payload.len()) as u16);
                b.extend_from_slice(payload);
                let mut c = checksum::finish(checksum::sum(pseudo, &b));
                if c == 0 {
                    c = 0xffff;
                }
                b[6..8].copy_from_slice(&c.to_be_bytes());
                b
            }
            L4::UdpLite {
                sport,
                dport,
                coverage,
                payload,
            } => {
                let mut b = udp_header(*sport, *dport, *coverage);
                b.extend_from_slice(payload);
                let cov = if *coverage == 0 {
                    b.len()
                } else {
                    usize::from(*coverage).min(b.len())
                };
                let mut c = checksum::finish(checksum::sum(pseudo, &b[..cov]));
                if c == 0 {
                    c = 0xffff;
                }
                b[6..8].copy_from_slice(&c.to_be_bytes());
                b
            }
            L4::Sctp {
                sport,
                dport,
                vtag,
                chunks,
            } => {
                let mut b = Vec::with_capacity(12 + chunks.len());
                b.extend_from_slice(&sport.to_be_bytes());
                b.extend_from_slice(&dport.to_be_bytes());
                b.extend_from_slice(&vtag.to_be_bytes());
                b.extend_from_slice(&[0; 4]);
                b.extend_from_slice(chunks);
                let c = checksum::sctp_crc32c(&b);
                b[8..12].copy_from_slice(&c.to_le_bytes());
                b
            }
            L4::Icmp {
                ty,
                code,
                rest,
                body,
            } => {
                let mut b = vec![*ty, *code, 0, 0];
                b.extend_from_slice(rest);
                b.extend_from_slice(body);
                let c = checksum::finish(checksum::sum(pseudo, &b));
                b[2..4].copy_from_slice(&c.to_be_bytes());
                b
            }
            L4::Raw { payload, .. } => payload.clone(),
        }
    }
}

fn udp_header(sport: u16, dport: u16, len: u16) -> Vec<u8> {
    let mut b = Vec::with_capacity(8);
    b.extend_from_slice(&sport.to_be_bytes());
    b.extend_from_slice(&dport.to_be_bytes());
    b.extend_from_slice(&len.to_be_bytes());
    b.extend_from_slice(&[0, 0]);
    b
}

/// An IPv6 extension header to insert before the transport header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ext {
    /// Hop-by-hop options with this many 8-byte units of padding options.
    HopByHop(u8),
    /// Destination options.
    DestOpts(u8),
    /// A type-0 routing header with no addresses left.
    Routing,
    /// A fragment header.
    Fragment {
        /// Offset in bytes (multiple of 8).
        offset: u16,
        /// More fragments follow.
        more: bool,
        /// Identification.
        ident: u32,
    },
}

/// A frame to build. Fields are public: set what the helpers do not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    /// Source MAC.
    pub eth_src: [u8; 6],
    /// Destination MAC.
    pub eth_dst: [u8; 6],
    /// VLAN tags, outermost first.
    pub vlans: Vec<VlanTag>,
    /// Source address.
    pub src: IpAddr,
    /// Destination address.
    pub dst: IpAddr,
    /// TTL or hop limit.
    pub ttl: u8,
    /// IPv4 identification.
    pub ident: u16,
    /// IPv4 don't-fragment flag.
    pub dont_frag: bool,
    /// IPv4 more-fragments flag.
    pub more_frags: bool,
    /// IPv4 fragment offset in bytes (multiple of 8).
    pub frag_offset: u16,
    /// IPv4 options (padded to a multiple of 4).
    pub ip_options: Vec<u8>,
    /// IPv6 extension headers, in order.
    pub ext: Vec<Ext>,
    /// Transport.
    pub l4: L4,
    /// Bytes of link-layer padding after the IP datagram.
    pub padding: usize,
}

impl Frame {
    /// An IPv4 frame.
    pub fn v4(src: [u8; 4], dst: [u8; 4], l4: L4) -> Frame {
        Frame::new(Ipv4Addr::from(src).into(), Ipv4Addr::from(dst).into(), l4)
    }

    /// An IPv6 frame.
    pub fn v6(src: Ipv6Addr, dst: Ipv6Addr, l4: L4) -> Frame {
        Frame::new(src.into(), dst.into(), l4)
    }

    /// A frame between two addresses of the same family.
    pub fn new(src: IpAddr, dst: IpAddr, l4: L4) -> Frame {
        Frame {
            eth_src: [0x02, 0, 0, 0, 0, 0x01],
            eth_dst: [0x02, 0, 0, 0, 0, 0x02],
            vlans: Vec::new(),
            src,
            dst,
            ttl: 64,
            ident: 0,
            dont_frag: false,
            more_frags: false,
            frag_offset: 0,
            ip_options: Vec::new(),
            ext: Vec::new(),
            l4,
            padding: 0,
        }
    }

    /// Adds a VLAN tag (outermost first).
    pub fn vlan(mut self, tpid: u16, vid: u16) -> Frame {
        self.vlans.push(VlanTag { tpid, tci: vid });
        self
    }

    /// The IP datagram alone (no link layer).
    pub fn ip_packet(&self) -> Vec<u8> {
        match (self.src, self.dst) {
            (IpAddr::V4(s), IpAddr::V4(d)) => self.ipv4(s.octets(), d.octets()),
            (IpAddr::V6(s), IpAddr::V6(d)) => self.ipv6(s.octets(), d.octets()),
            _ => panic!("source and destination of different families"),
        }
    }

    /// The whole Ethernet frame.
    pub fn build(&self) -> Vec<u8> {
        let ip = self.ip_packet();
        let mut f = Vec::with_capacity(14 + 4 * self.vlans.len() + ip.len() + self.padding);
        f.extend_from_slice(&self.eth_dst);
        f.extend_from_slice(&self.eth_src);
        for t in &self.vlans {
            f.extend_from_slice(&t.tpid.to_be_bytes());
            f.extend_from_slice(&t.tci.to_be_bytes());
        }
        let ty = if self.src.is_ipv4() {
            ethertype::IPV4
        } else {
            ethertype::IPV6
        };
        f.extend_from_slice(&ty.to_be_bytes());
        f.extend_from_slice(&ip);
        f.extend(core::iter::repeat_n(0, self.padding));
        f
    }

    fn ipv4(&self, src: [u8; 4], dst: [u8; 4]) -> Vec<u8> {
        let proto = self.l4.proto(false);
        let mut opts = self.ip_options.clone();
        while !opts.len().is_multiple_of(4) {
            opts.push(0);
        }
        let hl = 20 + opts.len();
        // The pseudo-header covers the whole transport segment; a later
        // fragment has no transport header at all.
        let body = if self.frag_offset == 0 {
            let l4_len = self.l4.encode(0).len() as u32;
            // ICMPv4 alone has no pseudo-header.
            let pseudo = match self.l4 {
                L4::Icmp { .. } => 0,
                _ => checksum::pseudo_header_v4(src, dst, proto, l4_len),
            };
            self.l4.encode(pseudo)
        } else {
            match &self.l4 {
                L4::Raw { payload, .. } => payload.clone(),
                other => other.encode(0),
            }
        };
        let total = (hl + body.len()) as u16;
        let mut ff = (self.frag_offset / 8) & 0x1fff;
        if self.dont_frag {
            ff |= 0x4000;
        }
        if self.more_frags {
            ff |= 0x2000;
        }
        let mut b = Vec::with_capacity(usize::from(total));
        b.push(0x40 | (hl / 4) as u8);
        b.push(0);
        b.extend_from_slice(&total.to_be_bytes());
        b.extend_from_slice(&self.ident.to_be_bytes());
        b.extend_from_slice(&ff.to_be_bytes());
        b.push(self.ttl);
        b.push(proto);
        b.extend_from_slice(&[0, 0]);
        b.extend_from_slice(&src);
        b.extend_from_slice(&dst);
        b.extend_from_slice(&opts);
        let c = checksum::checksum(&b);
        b[10..12].copy_from_slice(&c.to_be_bytes());
        b.extend_from_slice(&body);
        b
    }

    fn ipv6(&self, src: [u8; 16], dst: [u8; 16]) -> Vec<u8> {
        let proto = self.l4.proto(true);
        let l4_len = self.l4.encode(0).len() as u32;
        let body = self
            .l4
            .encode(checksum::pseudo_header_v6(&src, &dst, proto, l4_len));
        // Extension headers, each naming the next.
        let mut next_values: Vec<u8> = self
            .ext
            .iter()
            .map(|e| match e {
                Ext::HopByHop(_) => ip_proto::HOPOPTS,
                Ext::DestOpts(_) => ip_proto::DSTOPTS,
                Ext::Routing => ip_proto::ROUTING,
                Ext::Fragment { .. } => ip_proto::FRAGMENT,
            })
            .collect();
        next_values.push(proto);
        let mut exts = Vec::new();
        for (i, e) in self.ext.iter().enumerate() {
            let next = next_values[i + 1];
            match e {
                Ext::HopByHop(units) | Ext::DestOpts(units) => {
                    // Next header, length in 8-byte units beyond the first,
                    // then PadN filling the rest.
                    let len = (usize::from(*units) + 1) * 8;
                    exts.push(next);
                    exts.push(*units);
                    exts.push(1); // PadN
                    exts.push((len - 4) as u8);
                    exts.extend(core::iter::repeat_n(0, len - 4));
                }
                Ext::Routing => {
                    exts.extend_from_slice(&[next, 0, 0, 0, 0, 0, 0, 0]);
                }
                Ext::Fragment {
                    offset,
                    more,
                    ident,
                } => {
                    let offlg = (offset & 0xfff8) | u16::from(*more);
                    exts.push(next);
                    exts.push(0);
                    exts.extend_from_slice(&offlg.to_be_bytes());
                    exts.extend_from_slice(&ident.to_be_bytes());
                }
            }
        }
        let first = next_values[0];
        let plen = (exts.len() + body.len()) as u16;
        let mut b = Vec::with_capacity(40 + usize::from(plen));
        b.extend_from_slice(&[0x60, 0, 0, 0]);
        b.extend_from_slice(&plen.to_be_bytes());
        b.push(first);
        b.push(self.ttl);
        b.extend_from_slice(&src);
        b.extend_from_slice(&dst);
        b.extend_from_slice(&exts);
        b.extend_from_slice(&body);
        b
    }
}

/// The first `l4_bytes` bytes past the IP header of `ip_packet`, with the
/// IP header: what an ICMP error quotes (RFC 792 asks for 8).
pub fn quote(ip_packet: &[u8], l4_bytes: usize) -> Vec<u8> {
    let hl = if ip_packet.first().map(|b| b >> 4) == Some(6) {
        40
    } else {
        usize::from(ip_packet.first().copied().unwrap_or(0x45) & 0x0f) * 4
    };
    ip_packet[..(hl + l4_bytes).min(ip_packet.len())].to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::{LinkType, parse_frame};
    use crate::tcp::flags;

    fn l4_checksum_ok(frame: &[u8]) -> bool {
        let ip = parse_frame(frame, LinkType::Ethernet).ip.unwrap();
        let l4 = &frame[ip.l4..ip.end];
        let pseudo = match ip.version {
            crate::IpVersion::V4 => {
                let h = crate::ipv4::Ipv4Packet::new_checked(&frame[ip.l3..]).unwrap();
                checksum::pseudo_header_v4(h.src(), h.dst(), ip.proto, l4.len() as u32)
            }
            crate::IpVersion::V6 => {
                let h = crate::ipv6::Ipv6Packet::new_checked(&frame[ip.l3..]).unwrap();
                checksum::pseudo_header_v6(&h.src(), &h.dst(), ip.proto, l4.len() as u32)
            }
        };
        checksum::is_valid(checksum::sum(pseudo, l4))
    }

    #[test]
    fn tcp_v4_and_v6_checksums() {
        let f = Frame::v4(
            [10, 0, 0, 1],
            [10, 0, 0, 2],
            L4::tcp_seg(1, 2, flags::ACK, 5, 6, 100, b"hello"),
        )
        .build();
        assert!(l4_checksum_ok(&f));
        let ip = crate::ipv4::Ipv4Packet::new_checked(&f[14..]).unwrap();
        assert!(ip.verify_checksum());
        assert_eq!(usize::from(ip.total_len()), f.len() - 14);
        let f = Frame::v6(
            "fd00::1".parse().unwrap(),
            "fd00::2".parse().unwrap(),
            L4::tcp(1, 2, flags::SYN),
        )
        .build();
        assert!(l4_checksum_ok(&f));
    }

    #[test]
    fn udp_icmp_ext_vlan() {
        let mut fr = Frame::v6(
            "fd00::1".parse().unwrap(),
            "fd00::2".parse().unwrap(),
            L4::udp(5, 6, b"x"),
        );
        fr.ext = vec![Ext::HopByHop(0), Ext::Routing, Ext::DestOpts(1)];
        let f = fr
            .vlan(ethertype::QINQ, 10)
            .vlan(ethertype::VLAN, 20)
            .build();
        let layers = parse_frame(&f, LinkType::Ethernet);
        assert_eq!(layers.vlans.len(), 2);
        let ip = layers.ip.unwrap();
        assert_eq!(ip.proto, ip_proto::UDP);
        assert_eq!(ip.l4, 22 + 40 + 8 + 8 + 16);
        assert!(l4_checksum_ok(&f));
        let ping = Frame::v4([1, 1, 1, 1], [2, 2, 2, 2], L4::icmp_query(8, 7, 1)).build();
        assert_eq!(checksum::checksum(&ping[34..]), 0);
        let lite = Frame::v4(
            [1, 1, 1, 1],
            [2, 2, 2, 2],
            L4::UdpLite {
                sport: 1,
                dport: 2,
                coverage: 8,
                payload: vec![1, 2, 3],
            },
        )
        .build();
        let ip = parse_frame(&lite, LinkType::Ethernet).ip.unwrap();
        assert_eq!(ip.proto, ip_proto::UDPLITE);
    }

    #[test]
    fn quote_cuts_after_eight_bytes() {
        let p = Frame::v4([1, 1, 1, 1], [2, 2, 2, 2], L4::udp(5, 6, &[0; 100])).ip_packet();
        assert_eq!(quote(&p, 8).len(), 28);
        let p6 = Frame::v6(
            "fd00::1".parse().unwrap(),
            "fd00::2".parse().unwrap(),
            L4::udp(5, 6, &[0; 100]),
        )
        .ip_packet();
        assert_eq!(quote(&p6, 8).len(), 48);
    }

    /// What the builder is told is what the parsers read: padded TCP
    /// options, UDP-Lite's coverage, IPv4's fragment fields, IPv6's
    /// extension headers byte for byte, and ICMP's protocol per family.
    #[test]
    fn built_fields_parse_back() {
        let (a, b) = ([10, 0, 0, 1], [10, 0, 0, 2]);
        let mut syn = L4::tcp(1, 2, flags::SYN);
        if let L4::Tcp { options, .. } = &mut syn {
            *options = vec![3, 3, 7];
        }
        let f = Frame::v4(a, b, syn).build();
        let t = crate::tcp::TcpPacket::new_checked(&f[34..]).unwrap();
        assert_eq!((t.header_len(), t.options()), (24, &[3, 3, 7, 0][..]));
        assert!(l4_checksum_ok(&f));
        for coverage in [0, 8, 10] {
            let lite = L4::UdpLite {
                sport: 1,
                dport: 2,
                coverage,
                payload: vec![1, 2, 3, 4],
            };
            let f = Frame::v4(a, b, lite).build();
            let l4 = &f[34..];
            let cov = if coverage == 0 {
                l4.len()
            } else {
                usize::from(coverage)
            };
            let pseudo = checksum::pseudo_header_v4(a, b, ip_proto::UDPLITE, l4.len() as u32);
            assert!(
                checksum::is_valid(checksum::sum(pseudo, &l4[..cov])),
                "{coverage}"
            );
        }
        let mut frag = Frame::v4(a, b, L4::udp(1, 2, b""));
        (frag.frag_offset, frag.dont_frag, frag.more_frags) = (1480, true, true);
        let f = frag.build();
        let ip = crate::ipv4::Ipv4Packet::new_checked(&f[14..]).unwrap();
        assert_eq!(
            (ip.frag_offset(), ip.dont_frag(), ip.more_frags()),
            (1480, true, true)
        );
        let (a6, b6) = ("fd00::1".parse().unwrap(), "fd00::2".parse().unwrap());
        let mut v6 = Frame::v6(a6, b6, L4::udp(1, 2, b""));
        v6.ext = vec![
            Ext::HopByHop(1),
            Ext::Fragment {
                offset: 1232,
                more: true,
                ident: 9,
            },
        ];
        let f = v6.build();
        let mut hbh = vec![ip_proto::FRAGMENT, 1, 1, 12];
        hbh.resize(16, 0);
        assert_eq!(f[54..70], hbh);
        assert_eq!(f[70..78], [ip_proto::UDP, 0, 0x04, 0xd1, 0, 0, 0, 9]);
        let ping4 = Frame::v4(a, b, L4::icmp_query(8, 1, 1)).build();
        let ping6 = Frame::v6(a6, b6, L4::icmp_query(128, 1, 1)).build();
        assert_eq!((ping4[23], ping6[20]), (ip_proto::ICMP, ip_proto::ICMPV6));
    }
}
