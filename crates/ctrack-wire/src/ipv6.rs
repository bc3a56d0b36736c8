//! IPv6 headers (RFC 8200) and the extension headers conntrack walks:
//! hop-by-hop options, routing, fragment, destination options, and AH.

use crate::{Error, Result, be16, be32, ip_proto};

/// Length of the fixed IPv6 header.
pub const HEADER_LEN: usize = 40;
/// Length of a fragment extension header.
pub const FRAG_HEADER_LEN: usize = 8;

mod field {
    use core::ops::Range;
    pub(super) const VER_TC_FLOW: Range<usize> = 0..4;
    pub(super) const PAYLOAD_LEN: usize = 4;
    pub(super) const NEXT_HEADER: usize = 6;
    pub(super) const HOP_LIMIT: usize = 7;
    pub(super) const SRC: Range<usize> = 8..24;
    pub(super) const DST: Range<usize> = 24..40;
}

/// A view of an IPv6 fixed header over a buffer that starts with it.
#[derive(Debug, Clone, Copy)]
pub struct Ipv6Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Ipv6Packet<T> {
    /// Wraps `buffer` after checking that the fixed header fits and the
    /// version is 6.
    pub fn new_checked(buffer: T) -> Result<Self> {
        if buffer.as_ref().len() < HEADER_LEN {
            return Err(Error::Truncated);
        }
        let p = Self { buffer };
        if p.version() != 6 {
            return Err(Error::Malformed);
        }
        Ok(p)
    }

    /// Wraps `buffer` without checks.
    pub fn new_unchecked(buffer: T) -> Self {
        Self { buffer }
    }

    fn word0(&self) -> u32 {
        let d = &self.buffer.as_ref()[field::VER_TC_FLOW];
        u32::from_be_bytes([d[0], d[1], d[2], d[3]])
    }

    /// IP version (6).
    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[0] >> 4
    }

    /// Traffic class.
    pub fn traffic_class(&self) -> u8 {
        (self.word0() >> 20) as u8
    }

    /// Flow label (20 bits).
    pub fn flow_label(&self) -> u32 {
        self.word0() & 0x000f_ffff
    }

    /// The payload-length field (extension headers included).
    pub fn payload_len(&self) -> u16 {
        be16(self.buffer.as_ref(), field::PAYLOAD_LEN)
    }

    /// The first next-header value.
    pub fn next_header(&self) -> u8 {
        self.buffer.as_ref()[field::NEXT_HEADER]
    }

    /// Hop limit.
    pub fn hop_limit(&self) -> u8 {
        self.buffer.as_ref()[field::HOP_LIMIT]
    }

    /// Source address.
    pub fn src(&self) -> [u8; 16] {
        let mut a = [0; 16];
        a.copy_from_slice(&self.buffer.as_ref()[field::SRC]);
        a
    }

    /// Destination address.
    pub fn dst(&self) -> [u8; 16] {
        let mut a = [0; 16];
        a.copy_from_slice(&self.buffer.as_ref()[field::DST]);
        a
    }

    /// The bytes after the fixed header, up to the payload length or the end
    /// of the buffer, whichever comes first.
    pub fn payload(&self) -> &[u8] {
        let data = self.buffer.as_ref();
        let end = (HEADER_LEN + usize::from(self.payload_len())).min(data.len());
        &data[HEADER_LEN..end]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv6Packet<T> {
    /// Sets the source address.
    pub fn set_src(&mut self, addr: [u8; 16]) {
        self.buffer.as_mut()[field::SRC].copy_from_slice(&addr);
    }

    /// Sets the destination address.
    pub fn set_dst(&mut self, addr: [u8; 16]) {
        self.buffer.as_mut()[field::DST].copy_from_slice(&addr);
    }
}

/// Where a packet stands with respect to fragmentation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Fragment {
    /// Not a fragment (an IPv6 atomic fragment, offset 0 without M, counts as
    /// not a fragment: RFC 8021).
    #[default]
    No,
    /// The first fragment: offset 0, more fragments follow. Its L4 header is
    /// present.
    First,
    /// A later fragment: non-zero offset. It carries no L4 header.
    Later,
}

impl Fragment {
    /// True for first and later fragments.
    pub fn is_fragment(self) -> bool {
        self != Fragment::No
    }
}

/// The result of walking the extension-header chain.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExtChain {
    /// The upper-layer protocol (or [`ip_proto::FRAGMENT`] for a later
    /// fragment, whose payload cannot be identified).
    pub proto: u8,
    /// Offset of the upper-layer header from the start of the walked area.
    pub l4_offset: usize,
    /// Fragmentation status.
    pub frag: Fragment,
    /// Offset of the fragment header from the start of the walked area.
    pub frag_header: Option<usize>,
}

/// True for the extension headers [`walk_extensions`] steps over.
pub fn is_extension(next_header: u8) -> bool {
    matches!(
        next_header,
        ip_proto::HOPOPTS
            | ip_proto::ROUTING
            | ip_proto::FRAGMENT
            | ip_proto::DSTOPTS
            | ip_proto::AH
    )
}

/// Walks the extension headers that start at `data[0]` with `next_header`
/// naming the first of them.
///
/// Stops at the first header that is not hop-by-hop, routing, fragment,
/// destination options or AH (the upper layer, or one it does not know such
/// as ESP or "no next header"), and at a later fragment (whose payload is
/// not an upper-layer header). Every extension header must have at least 8
/// bytes present, and its stated length must fit. The fragment header's
/// reserved fields are ignored. This is the walk Open vSwitch and Linux
/// conntrack do.
pub fn walk_extensions(data: &[u8], next_header: u8) -> Result<ExtChain> {
    let mut proto = next_header;
    let mut off = 0usize;
    let mut frag = Fragment::No;
    let mut frag_header = None;
    loop {
        if !is_extension(proto) {
            return Ok(ExtChain {
                proto,
                l4_offset: off,
                frag,
                frag_header,
            });
        }
        let Some(hdr) = data.get(off..off + 8) else {
            return Err(Error::Truncated);
        };
        let len = match proto {
            ip_proto::HOPOPTS | ip_proto::DSTOPTS | ip_proto::ROUTING => {
                (usize::from(hdr[1]) + 1) * 8
            }
            ip_proto::AH => (usize::from(hdr[1]) + 2) * 4,
            _ => FRAG_HEADER_LEN,
        };
        if data.len() < off + len {
            return Err(Error::Truncated);
        }
        let next = hdr[0];
        if proto == ip_proto::FRAGMENT {
            frag_header = Some(off);
            let offlg = be16(hdr, 2);
            off += len;
            if offlg != 0 {
                // Offset (13 bits, in 8-byte units) and the M flag; bits 1-2
                // are reserved. Open vSwitch compares the whole word.
                if offlg & 0xfff8 != 0 {
                    return Ok(ExtChain {
                        proto: ip_proto::FRAGMENT,
                        l4_offset: off,
                        frag: Fragment::Later,
                        frag_header,
                    });
                }
                frag = Fragment::First;
            }
            proto = next;
            continue;
        }
        off += len;
        proto = next;
    }
}

/// The fields of an IPv6 fragment header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FragHeader {
    /// The protocol of the fragmentable part.
    pub next_header: u8,
    /// Offset in bytes.
    pub offset: u16,
    /// More fragments follow.
    pub more: bool,
    /// Identification.
    pub ident: u32,
}

impl FragHeader {
    /// Reads a fragment header from the first 8 bytes of `data`.
    pub fn parse(data: &[u8]) -> Result<Self> {
        let h = data.get(..FRAG_HEADER_LEN).ok_or(Error::Truncated)?;
        let offlg = be16(h, 2);
        Ok(FragHeader {
            next_header: h[0],
            offset: offlg & 0xfff8,
            more: offlg & 1 != 0,
            ident: be32(h, 4),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(next: u8, plen: u16) -> Vec<u8> {
        let mut h = vec![0x60, 0x00, 0x00, 0x00];
        h.extend_from_slice(&plen.to_be_bytes());
        h.push(next);
        h.push(64);
        h.extend_from_slice(&[0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
        h.extend_from_slice(&[0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]);
        h
    }

    #[test]
    fn fixed_header() {
        let mut h = header(ip_proto::TCP, 0);
        h[1] = 0xa1; // traffic class low nibble a, flow label 1....
        let p = Ipv6Packet::new_checked(&h[..]).unwrap();
        assert_eq!(p.version(), 6);
        assert_eq!(p.traffic_class(), 0x0a);
        assert_eq!(p.flow_label(), 0x10000);
        assert_eq!(p.next_header(), ip_proto::TCP);
        assert_eq!(p.hop_limit(), 64);
        assert_eq!(p.src()[15], 1);
        assert_eq!(p.dst()[15], 2);
        assert!(Ipv6Packet::new_checked(&h[..39]).is_err());
        h[0] = 0x40;
        assert_eq!(
            Ipv6Packet::new_checked(&h[..]).err(),
            Some(Error::Malformed)
        );
    }

    #[test]
    fn no_extensions() {
        let c = walk_extensions(&[0; 8], ip_proto::UDP).unwrap();
        assert_eq!(c.proto, ip_proto::UDP);
        assert_eq!(c.l4_offset, 0);
        assert_eq!(c.frag, Fragment::No);
    }

    #[test]
    fn every_extension_in_a_chain() {
        let mut d = Vec::new();
        // hop-by-hop, 8 bytes, next routing
        d.extend_from_slice(&[ip_proto::ROUTING, 0, 1, 4, 0, 0, 0, 0]);
        // routing, 24 bytes (hdrlen 2), next dstopts
        d.extend_from_slice(&[ip_proto::DSTOPTS, 2, 0, 0, 0, 0, 0, 0]);
        d.extend_from_slice(&[0; 16]);
        // destination options, 16 bytes, next AH
        d.extend_from_slice(&[ip_proto::AH, 1, 0, 0, 0, 0, 0, 0]);
        d.extend_from_slice(&[0; 8]);
        // AH, payload len 4 -> (4 + 2) * 4 = 24 bytes, next fragment
        d.extend_from_slice(&[ip_proto::FRAGMENT, 4, 0, 0, 0, 0, 0, 0]);
        d.extend_from_slice(&[0; 16]);
        // atomic fragment header, next TCP
        d.extend_from_slice(&[ip_proto::TCP, 0, 0, 0, 0, 0, 0, 7]);
        let c = walk_extensions(&d, ip_proto::HOPOPTS).unwrap();
        assert_eq!(c.proto, ip_proto::TCP);
        assert_eq!(c.l4_offset, 8 + 24 + 16 + 24 + 8);
        assert_eq!(c.frag, Fragment::No, "an atomic fragment is not a fragment");
        assert_eq!(c.frag_header, Some(8 + 24 + 16 + 24));
    }

    #[test]
    fn first_and_later_fragments() {
        let first = [ip_proto::UDP, 0, 0x00, 0x01, 0, 0, 0, 9];
        let c = walk_extensions(&first, ip_proto::FRAGMENT).unwrap();
        assert_eq!(
            (c.proto, c.frag, c.l4_offset),
            (ip_proto::UDP, Fragment::First, 8)
        );
        let later = [ip_proto::UDP, 0, 0x05, 0x00, 0, 0, 0, 9];
        let c = walk_extensions(&later, ip_proto::FRAGMENT).unwrap();
        assert_eq!((c.proto, c.frag), (ip_proto::FRAGMENT, Fragment::Later));
        let f = FragHeader::parse(&later).unwrap();
        assert_eq!((f.offset, f.more, f.ident), (0x500, false, 9));
    }

    #[test]
    fn truncated_extensions() {
        assert_eq!(
            walk_extensions(&[0; 7], ip_proto::HOPOPTS),
            Err(Error::Truncated)
        );
        // stated length 16 but only 8 present
        let d = [ip_proto::TCP, 1, 0, 0, 0, 0, 0, 0];
        assert_eq!(
            walk_extensions(&d, ip_proto::DSTOPTS),
            Err(Error::Truncated)
        );
    }

    #[test]
    fn esp_and_no_next_stop_the_walk() {
        let c = walk_extensions(&[0; 8], ip_proto::ESP).unwrap();
        assert_eq!(c.proto, ip_proto::ESP);
        let c = walk_extensions(&[ip_proto::NONE, 0, 0, 0, 0, 0, 0, 0], ip_proto::HOPOPTS).unwrap();
        assert_eq!((c.proto, c.l4_offset), (ip_proto::NONE, 8));
    }

    /// The addresses write in their places; the payload ends at its
    /// length, padding left out.
    #[test]
    fn addresses_and_payload() {
        let mut h = [0u8; 48];
        h[0] = 0x60;
        h[5] = 4;
        h[40..44].copy_from_slice(b"data");
        let mut p = Ipv6Packet::new_checked(&mut h[..]).unwrap();
        assert_eq!(p.payload(), b"data");
        p.set_src([1; 16]);
        p.set_dst([2; 16]);
        assert_eq!((p.src(), p.dst()), ([1; 16], [2; 16]));
        assert_eq!((&h[8..24], &h[24..40]), (&[1; 16][..], &[2; 16][..]));
    }
}
