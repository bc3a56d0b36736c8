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
    let len = end - l4;
    let pseudo = match ip.version {
        IpVersion::V4 => {
            let h = frame.get(l3..l3 + 20)?;
            let src = [h[12], h[13], h[14], h[15]];
            let dst = [h[16], h[17], h[18], h[19]];
            checksum::pseudo_header_v4(src, dst, ip.proto, len as u32)
        }
        IpVersion::V6 => {
            let h = frame.get(l3..l3 + ipv6::HEADER_LEN)?;
            let area = frame.get(l3 + ipv6::HEADER_LEN..l4)?;
            if has_routing_header(area, h[6]) {
                return None;
            }
            let mut src = [0u8; 16];
            let mut dst = [0u8; 16];
            src.copy_from_slice(&h[8..24]);
            dst.copy_from_slice(&h[24..40]);
            checksum::pseudo_header_v6(&src, &dst, ip.proto, len as u32)
        }
    };
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

#[cfg(test)]
mod tests;
