//! Transport checksums a sender left to offload.
//!
//! A Linux stack sending through a device with checksum offload (a veth
//! has it by default) hands over TCP and UDP segments whose checksum field
//! holds only the pseudo-header's sum, and SCTP packets without their
//! CRC32c, for the device to finish (`CHECKSUM_PARTIAL`). A packet socket
//! on the device's peer receives them as they are, flagged
//! `TP_STATUS_CSUMNOTREADY`. A switch in user space that forwards such a
//! frame must finish the checksum itself, as Linux's `skb_checksum_help`
//! does before a device without the offload: left alone, the tracker finds
//! the frame's checksum wrong, and so would the receiver.
//!
//! [`complete`] computes the checksum from scratch (whatever the field
//! held), so it needs nothing but the frame. Call it only for frames the
//! kernel says are unfinished: on any other frame it would turn a wrong
//! checksum into a right one.
//!
//! With segmentation offload (TSO, GSO; a veth's default too) the stack
//! hands over one TCP segment of up to 64 KiB, or one UDP datagram made of
//! many, for the device to cut at a size it names. A packet socket with
//! `PACKET_VNET_HDR` receives the frame behind a [`VnetHdr`] that says how;
//! [`segment`] cuts it as the kernel's software segmentation would, each
//! piece a whole packet with its own checksums, so that the firewall
//! judges, and the receiver gets, what would have been on a wire.

use crate::checksum;
use crate::frame::{IpVersion, LinkType, parse_frame};
use crate::ip_proto;
use crate::ipv6;

/// What [`complete`] wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Completed {
    /// The TCP checksum.
    Tcp,
    /// The UDP checksum.
    Udp,
    /// The SCTP CRC32c.
    Sctp,
}

/// Fills in the transport checksum of an Ethernet `frame` whose sender
/// left it to offload: TCP's and UDP's over IPv4 or IPv6 (with the
/// pseudo-header), SCTP's CRC32c. Returns what it wrote, or `None` where
/// it wrote nothing: a frame that is not IP, a fragment (the stack
/// finishes the checksum itself before it fragments), an IPv6 packet with
/// a routing header (whose pseudo-header names a final destination that
/// is not the header's), another protocol, or a header cut short or
/// inconsistent (a UDP length that is not the datagram's). Never panics.
pub fn complete(frame: &mut [u8]) -> Option<Completed> {
    let ip = parse_frame(frame, LinkType::Ethernet).ip.ok()?;
    if ip.frag.is_fragment() {
        return None;
    }
    let (l3, l4, end) = (ip.l3, ip.l4, ip.end);
    let v4 = ip.version == IpVersion::V4;
    if !v4 && has_routing_header(frame.get(l3 + ipv6::HEADER_LEN..l4)?, frame[l3 + 6]) {
        return None;
    }
    let pseudo = pseudo_header(frame, l3, v4, ip.proto, end - l4);
    let seg = frame.get_mut(l4..end)?;
    let (at, what) = match ip.proto {
        ip_proto::TCP if seg.len() >= 20 => (16, Completed::Tcp),
        ip_proto::UDP if seg.len() >= 8 && usize::from(crate::be16(seg, 4)) == seg.len() => {
            (6, Completed::Udp)
        }
        ip_proto::SCTP if seg.len() >= 12 => {
            let crc = checksum::sctp_crc32c(seg);
            seg[8..12].copy_from_slice(&crc.to_le_bytes());
            return Some(Completed::Sctp);
        }
        _ => return None,
    };
    seg[at..at + 2].fill(0);
    let mut c = checksum::finish(checksum::sum(pseudo, seg));
    if what == Completed::Udp && c == 0 {
        // A UDP checksum that comes out zero is sent as all ones (zero
        // means "none").
        c = 0xffff;
    }
    seg[at..at + 2].copy_from_slice(&c.to_be_bytes());
    Some(what)
}

/// The running sum of the pseudo-header of the IP packet at `l3` in
/// `frame` (a parsed one: its addresses are there) for a transport area of
/// `len` bytes of protocol `proto`.
fn pseudo_header(frame: &[u8], l3: usize, v4: bool, proto: u8, len: usize) -> u64 {
    let len = len as u32;
    if v4 {
        let a = |i: usize| [frame[i], frame[i + 1], frame[i + 2], frame[i + 3]];
        checksum::pseudo_header_v4(a(l3 + 12), a(l3 + 16), proto, len)
    } else {
        let a = |i: usize| -> [u8; 16] {
            let mut b = [0u8; 16];
            b.copy_from_slice(&frame[i..i + 16]);
            b
        };
        checksum::pseudo_header_v6(&a(l3 + 8), &a(l3 + 24), proto, len)
    }
}

/// A frame of segmentation offload as [`hand_over`] and [`segment`] read
/// it.
struct Super {
    tcp: bool,
    /// Payload bytes per segment.
    size: usize,
    v4: bool,
    proto: u8,
    l3: usize,
    l4: usize,
    end: usize,
    /// The transport header's length.
    hl: usize,
}

impl Super {
    /// `frame` as a segment of `gso`: TCP or UDP as it names, over IPv4 or
    /// IPv6 without a routing header, not a fragment, its transport header
    /// whole, a size above 0; else `None`.
    fn read(frame: &[u8], gso: Gso) -> Option<Super> {
        let (tcp, size) = match gso {
            Gso::Tcp(s) => (true, usize::from(s)),
            Gso::Udp(s) => (false, usize::from(s)),
            Gso::None | Gso::Other => return None,
        };
        let ip = parse_frame(frame, LinkType::Ethernet).ip.ok()?;
        let proto = if tcp { ip_proto::TCP } else { ip_proto::UDP };
        if ip.frag.is_fragment() || ip.proto != proto || size == 0 {
            return None;
        }
        let (l3, l4, end) = (ip.l3, ip.l4, ip.end);
        let v4 = ip.version == IpVersion::V4;
        if !v4 && has_routing_header(frame.get(l3 + ipv6::HEADER_LEN..l4)?, frame[l3 + 6]) {
            return None;
        }
        let hl = if tcp {
            usize::from(frame.get(l4 + 12)? >> 4) * 4
        } else {
            8
        };
        if (tcp && hl < 20) || l4 + hl > end {
            return None;
        }
        Some(Super {
            tcp,
            size,
            v4,
            proto,
            l3,
            l4,
            end,
            hl,
        })
    }
}

/// True if the extension headers in `area` (those between the IPv6 header
/// and the upper layer, the first named by `next`) include a routing
/// header.
fn has_routing_header(area: &[u8], mut next: u8) -> bool {
    let mut off = 0;
    while ipv6::is_extension(next) && off + 2 <= area.len() {
        if next == ip_proto::ROUTING {
            return true;
        }
        let len = match next {
            ip_proto::AH => (usize::from(area[off + 1]) + 2) * 4,
            ip_proto::FRAGMENT => ipv6::FRAG_HEADER_LEN,
            _ => (usize::from(area[off + 1]) + 1) * 8,
        };
        next = area[off];
        off += len;
    }
    false
}

/// The header a packet socket with `PACKET_VNET_HDR` puts before each
/// frame (`struct virtio_net_hdr`, in the host's byte order, as the kernel
/// writes it for a packet socket).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct VnetHdr {
    /// `VIRTIO_NET_HDR_F_*`: 1, the checksum is left to finish.
    pub flags: u8,
    /// `VIRTIO_NET_HDR_GSO_*`: 0 none, 1 TCP over IPv4, 3 UDP (fragmenting),
    /// 4 TCP over IPv6, 5 UDP datagrams; 0x80 ECN.
    pub gso_type: u8,
    /// Bytes of headers (a hint).
    pub hdr_len: u16,
    /// Payload bytes per segment.
    pub gso_size: u16,
    /// Where the checksummed area starts, and the checksum's offset in it.
    pub csum_start: u16,
    /// See `csum_start`.
    pub csum_offset: u16,
}

/// How a frame is to be cut ([`VnetHdr::gso`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Gso {
    /// Not at all.
    None,
    /// A TCP segment, into segments of `size` payload bytes.
    Tcp(u16),
    /// A UDP datagram, into datagrams of `size` payload bytes
    /// (`UDP_SEGMENT`).
    Udp(u16),
    /// A kind this code does not cut (UDP fragmentation offload, an
    /// unknown type).
    Other,
}

impl VnetHdr {
    /// Its size.
    pub const LEN: usize = 10;

    /// Reads a header from its 10 bytes.
    pub fn parse(b: [u8; Self::LEN]) -> VnetHdr {
        let w = |i: usize| u16::from_ne_bytes([b[i], b[i + 1]]);
        VnetHdr {
            flags: b[0],
            gso_type: b[1],
            hdr_len: w(2),
            gso_size: w(4),
            csum_start: w(6),
            csum_offset: w(8),
        }
    }

    /// Whether the checksum is left to finish (`VIRTIO_NET_HDR_F_NEEDS_CSUM`).
    pub fn needs_csum(&self) -> bool {
        self.flags & 1 != 0
    }

    /// What segmentation the frame asks for.
    pub fn gso(&self) -> Gso {
        match self.gso_type & !0x80 {
            0 => Gso::None,
            1 | 4 => Gso::Tcp(self.gso_size),
            5 => Gso::Udp(self.gso_size),
            _ => Gso::Other,
        }
    }
}

impl VnetHdr {
    /// The header's 10 bytes, in the host's byte order (as a packet
    /// socket with `PACKET_VNET_HDR` reads it before a frame sent).
    pub fn to_bytes(&self) -> [u8; Self::LEN] {
        let mut b = [0u8; Self::LEN];
        b[0] = self.flags;
        b[1] = self.gso_type;
        b[2..4].copy_from_slice(&self.hdr_len.to_ne_bytes());
        b[4..6].copy_from_slice(&self.gso_size.to_ne_bytes());
        b[6..8].copy_from_slice(&self.csum_start.to_ne_bytes());
        b[8..10].copy_from_slice(&self.csum_offset.to_ne_bytes());
        b
    }
}

/// A frame of segmentation offload made ready to leave whole: what
/// [`hand_over`] wrote and how big its segments come out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HandOver {
    /// The header to send the frame with.
    pub hdr: VnetHdr,
    /// The IP length of the largest segment the frame will be cut into
    /// (what the sending interface's MTU must hold).
    pub segment_ip_len: usize,
}

/// Makes an Ethernet `frame` that came in with segmentation offload as
/// `rx` said (and whose transport checksum has since been finished, so
/// that the firewall could check it) ready to be sent on whole, the
/// cutting left to the kernel or the device behind the sending socket:
/// writes into the TCP or UDP checksum field the folded sum of the
/// pseudo-header, as a Linux stack leaves it for `CHECKSUM_PARTIAL`, and
/// returns the header that says so (`NEEDS_CSUM`, where the transport
/// header starts in this frame, `rx`'s segment size and type). The
/// frame's current headers are read, so a translated frame is handed over
/// right. `None`, with the frame untouched, for one that cannot be: not
/// TCP or UDP as `rx` names, a fragment, an IPv6 routing header, a header
/// cut short, bytes after the IP packet, a segment size of 0. Never
/// panics.
pub fn hand_over(frame: &mut [u8], rx: VnetHdr) -> Option<HandOver> {
    let f = Super::read(frame, rx.gso())?;
    // TCP's types name the IP version too (1: over IPv4, 4: over IPv6).
    if f.tcp && (rx.gso_type & !0x80 == 1) != f.v4 {
        return None;
    }
    // Bytes after the IP packet (padding) would be summed, and cut, as
    // payload by the kernel: such a frame is cut here instead.
    if f.end != frame.len() {
        return None;
    }
    let len = f.end - f.l4;
    let pseudo = pseudo_header(frame, f.l3, f.v4, f.proto, len);
    let at = if f.tcp { 16 } else { 6 };
    let csum_start = u16::try_from(f.l4).ok()?;
    let hdr_len = u16::try_from(f.l4 + f.hl).ok()?;
    frame[f.l4 + at..f.l4 + at + 2].copy_from_slice(&checksum::fold(pseudo).to_be_bytes());
    Some(HandOver {
        hdr: VnetHdr {
            flags: 1,
            gso_type: rx.gso_type,
            hdr_len,
            gso_size: rx.gso_size,
            csum_start,
            csum_offset: at as u16,
        },
        segment_ip_len: (f.l4 - f.l3) + f.hl + f.size.min(len - f.hl),
    })
}

/// The most segments [`segment`] makes of one frame (64 KiB in pieces of
/// 128 bytes): a smaller size is refused rather than made into thousands
/// of frames.
pub const MAX_SEGMENTS: usize = 512;

/// Cuts an Ethernet `frame` sent with segmentation offload as `gso` says
/// (TCP or UDP over IPv4 or IPv6), as Linux's software segmentation does:
/// each piece carries the headers with its own lengths, IPv4
/// identification (one more per piece) and header checksum, TCP sequence
/// number and flags (FIN and PSH on the last piece only, CWR on the first
/// only) or UDP length, and a whole transport checksum. Each piece is
/// built in `scratch` and handed to `each`. Returns the number of pieces,
/// or `None` (and hands nothing over) for a frame it cannot cut: not IP,
/// a fragment, another protocol than `gso` names, a routing header, a
/// header cut short, a size of 0, or more than [`MAX_SEGMENTS`] pieces. A
/// frame whose payload fits one piece comes out as one piece, its checksum
/// finished.
pub fn segment(
    frame: &[u8],
    gso: Gso,
    scratch: &mut Vec<u8>,
    mut each: impl FnMut(&[u8]),
) -> Option<usize> {
    let Super {
        tcp,
        size,
        v4,
        proto,
        l3,
        l4,
        end,
        hl,
    } = Super::read(frame, gso)?;
    let payload = &frame[l4 + hl..end];
    let n = payload.len().div_ceil(size).max(1);
    if n > MAX_SEGMENTS {
        return None;
    }
    let ident = crate::be16(frame, l3 + 4);
    let seq = crate::be32(frame, l4 + 4);
    for i in 0..n {
        let chunk = &payload[(i * size).min(payload.len())..((i + 1) * size).min(payload.len())];
        scratch.clear();
        scratch.extend_from_slice(&frame[..l4 + hl]);
        scratch.extend_from_slice(chunk);
        let l4_len = hl + chunk.len();
        let ip_len = (l4 - l3) + l4_len;
        let s = &mut scratch[..];
        if v4 {
            s[l3 + 2..l3 + 4].copy_from_slice(&(ip_len as u16).to_be_bytes());
            s[l3 + 4..l3 + 6].copy_from_slice(&ident.wrapping_add(i as u16).to_be_bytes());
            s[l3 + 10..l3 + 12].fill(0);
            let c = checksum::checksum(&s[l3..l4]);
            s[l3 + 10..l3 + 12].copy_from_slice(&c.to_be_bytes());
        } else {
            let plen = (ip_len - ipv6::HEADER_LEN) as u16;
            s[l3 + 4..l3 + 6].copy_from_slice(&plen.to_be_bytes());
        }
        let at = if tcp {
            let sq = seq.wrapping_add((i * size) as u32);
            s[l4 + 4..l4 + 8].copy_from_slice(&sq.to_be_bytes());
            if i + 1 != n {
                s[l4 + 13] &= !(crate::tcp::flags::FIN | crate::tcp::flags::PSH) as u8;
            }
            if i != 0 {
                s[l4 + 13] &= !(crate::tcp::flags::CWR as u8);
            }
            l4 + 16
        } else {
            s[l4 + 4..l4 + 6].copy_from_slice(&(l4_len as u16).to_be_bytes());
            l4 + 6
        };
        let pseudo = pseudo_header(frame, l3, v4, proto, l4_len);
        s[at..at + 2].fill(0);
        let mut c = checksum::finish(checksum::sum(pseudo, &s[l4..]));
        if !tcp && c == 0 {
            c = 0xffff;
        }
        s[at..at + 2].copy_from_slice(&c.to_be_bytes());
        each(s);
    }
    Some(n)
}

#[cfg(test)]
mod tests;
