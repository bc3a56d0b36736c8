//! IPv4 headers (RFC 791), options included.

use crate::{Error, Result, be16, checksum};

/// Length of an IPv4 header without options.
pub const MIN_HEADER_LEN: usize = 20;

/// "More fragments" flag in the flags/fragment-offset word.
pub const FLAG_MF: u16 = 0x2000;
/// "Don't fragment" flag.
pub const FLAG_DF: u16 = 0x4000;
/// Mask of the fragment offset (in 8-byte units).
pub const OFFSET_MASK: u16 = 0x1fff;

mod field {
    use core::ops::Range;
    pub(super) const VER_IHL: usize = 0;
    pub(super) const TOS: usize = 1;
    pub(super) const TOTAL_LEN: usize = 2;
    pub(super) const IDENT: usize = 4;
    pub(super) const FLAGS_FRAG: usize = 6;
    pub(super) const TTL: usize = 8;
    pub(super) const PROTOCOL: usize = 9;
    pub(super) const CHECKSUM: Range<usize> = 10..12;
    pub(super) const SRC: Range<usize> = 12..16;
    pub(super) const DST: Range<usize> = 16..20;
}

/// A view of an IPv4 header over a buffer that starts with it.
///
/// `new_checked` verifies that the fixed header and its options fit; the
/// total-length field is not checked against the buffer (the caller decides
/// how to treat padding and truncation), so [`Ipv4Packet::payload`] is
/// bounded by both.
#[derive(Debug, Clone, Copy)]
pub struct Ipv4Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Ipv4Packet<T> {
    /// Wraps `buffer` after checking the version, that the header length is
    /// at least 20, and that the whole header (options included) fits.
    pub fn new_checked(buffer: T) -> Result<Self> {
        let data = buffer.as_ref();
        if data.len() < MIN_HEADER_LEN {
            return Err(Error::Truncated);
        }
        let p = Self { buffer };
        if p.version() != 4 {
            return Err(Error::Malformed);
        }
        let hl = p.header_len();
        if hl < MIN_HEADER_LEN {
            return Err(Error::Malformed);
        }
        if p.buffer.as_ref().len() < hl {
            return Err(Error::Truncated);
        }
        Ok(p)
    }

    /// Wraps `buffer` without checks. Accessors may panic if it is shorter
    /// than the header.
    pub fn new_unchecked(buffer: T) -> Self {
        Self { buffer }
    }

    /// IP version (4).
    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[field::VER_IHL] >> 4
    }

    /// Header length in bytes (IHL × 4).
    pub fn header_len(&self) -> usize {
        usize::from(self.buffer.as_ref()[field::VER_IHL] & 0x0f) * 4
    }

    /// DSCP and ECN.
    pub fn tos(&self) -> u8 {
        self.buffer.as_ref()[field::TOS]
    }

    /// The total-length field.
    pub fn total_len(&self) -> u16 {
        be16(self.buffer.as_ref(), field::TOTAL_LEN)
    }

    /// Identification.
    pub fn ident(&self) -> u16 {
        be16(self.buffer.as_ref(), field::IDENT)
    }

    /// The whole flags / fragment-offset word.
    pub fn flags_frag(&self) -> u16 {
        be16(self.buffer.as_ref(), field::FLAGS_FRAG)
    }

    /// Don't-fragment flag.
    pub fn dont_frag(&self) -> bool {
        self.flags_frag() & FLAG_DF != 0
    }

    /// More-fragments flag.
    pub fn more_frags(&self) -> bool {
        self.flags_frag() & FLAG_MF != 0
    }

    /// Fragment offset in bytes.
    pub fn frag_offset(&self) -> u16 {
        (self.flags_frag() & OFFSET_MASK) << 3
    }

    /// True for any fragment (MF set or a non-zero offset).
    pub fn is_fragment(&self) -> bool {
        self.flags_frag() & (FLAG_MF | OFFSET_MASK) != 0
    }

    /// True for a fragment other than the first (non-zero offset).
    pub fn is_later_fragment(&self) -> bool {
        self.flags_frag() & OFFSET_MASK != 0
    }

    /// Time to live.
    pub fn ttl(&self) -> u8 {
        self.buffer.as_ref()[field::TTL]
    }

    /// The protocol of the payload.
    pub fn protocol(&self) -> u8 {
        self.buffer.as_ref()[field::PROTOCOL]
    }

    /// The header checksum field.
    pub fn checksum(&self) -> u16 {
        be16(self.buffer.as_ref(), field::CHECKSUM.start)
    }

    /// True if the header checksum is correct.
    pub fn verify_checksum(&self) -> bool {
        checksum::checksum(&self.buffer.as_ref()[..self.header_len()]) == 0
    }

    /// Source address.
    pub fn src(&self) -> [u8; 4] {
        let s = &self.buffer.as_ref()[field::SRC];
        [s[0], s[1], s[2], s[3]]
    }

    /// Destination address.
    pub fn dst(&self) -> [u8; 4] {
        let d = &self.buffer.as_ref()[field::DST];
        [d[0], d[1], d[2], d[3]]
    }

    /// The options, between the fixed header and the payload.
    pub fn options(&self) -> &[u8] {
        &self.buffer.as_ref()[MIN_HEADER_LEN..self.header_len()]
    }

    /// The payload: after the header, up to the total length or the end of
    /// the buffer, whichever comes first.
    pub fn payload(&self) -> &[u8] {
        let data = self.buffer.as_ref();
        let end = usize::from(self.total_len()).min(data.len());
        data.get(self.header_len()..end).unwrap_or(&[])
    }

    /// Consumes the view, returning the buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv4Packet<T> {
    /// Sets the source address (the checksum is not updated).
    pub fn set_src(&mut self, addr: [u8; 4]) {
        self.buffer.as_mut()[field::SRC].copy_from_slice(&addr);
    }

    /// Sets the destination address (the checksum is not updated).
    pub fn set_dst(&mut self, addr: [u8; 4]) {
        self.buffer.as_mut()[field::DST].copy_from_slice(&addr);
    }

    /// Sets the header checksum field.
    pub fn set_checksum(&mut self, value: u16) {
        self.buffer.as_mut()[field::CHECKSUM].copy_from_slice(&value.to_be_bytes());
    }

    /// Recomputes the header checksum from scratch.
    pub fn fill_checksum(&mut self) {
        self.set_checksum(0);
        let hl = self.header_len();
        let c = checksum::checksum(&self.buffer.as_ref()[..hl]);
        self.set_checksum(c);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // 10.1.1.1 -> 10.1.1.2, UDP, total length 28, with a correct checksum.
    const HDR: [u8; 20] = [
        0x45, 0x00, 0x00, 0x1c, 0x00, 0x00, 0x00, 0x00, 0x00, 0x11, 0xa4, 0xcd, 0x0a, 0x01, 0x01,
        0x01, 0x0a, 0x01, 0x01, 0x02,
    ];

    #[test]
    fn fields() {
        let p = Ipv4Packet::new_checked(&HDR[..]).unwrap();
        assert_eq!(p.version(), 4);
        assert_eq!(p.header_len(), 20);
        assert_eq!(p.total_len(), 28);
        assert_eq!(p.protocol(), 17);
        assert_eq!(p.src(), [10, 1, 1, 1]);
        assert_eq!(p.dst(), [10, 1, 1, 2]);
        assert!(p.verify_checksum());
        assert!(!p.is_fragment());
        assert!(p.options().is_empty());
        assert!(p.payload().is_empty());
    }

    #[test]
    fn options_and_fragments() {
        let mut h = [0u8; 28];
        h[..20].copy_from_slice(&HDR);
        h[0] = 0x47; // IHL 7: 8 bytes of options
        h[20..24].copy_from_slice(&[0x94, 0x04, 0, 0]); // router alert
        h[24..28].copy_from_slice(&[1, 1, 1, 0]); // NOP NOP NOP EOL
        h[6] = 0x20; // MF
        let mut p = Ipv4Packet::new_checked(&mut h[..]).unwrap();
        p.fill_checksum();
        assert!(p.verify_checksum());
        assert_eq!(p.options().len(), 8);
        assert!(p.is_fragment());
        assert!(!p.is_later_fragment());
        assert!(p.more_frags());
        let mut h2 = h;
        h2[6] = 0x00;
        h2[7] = 0x03; // offset 3 * 8
        let p2 = Ipv4Packet::new_checked(&h2[..]).unwrap();
        assert!(p2.is_later_fragment());
        assert_eq!(p2.frag_offset(), 24);
    }

    #[test]
    fn malformed() {
        assert_eq!(
            Ipv4Packet::new_checked(&HDR[..19]).err(),
            Some(Error::Truncated)
        );
        let mut h = HDR;
        h[0] = 0x44; // IHL 4
        assert_eq!(
            Ipv4Packet::new_checked(&h[..]).err(),
            Some(Error::Malformed)
        );
        h[0] = 0x65; // version 6
        assert_eq!(
            Ipv4Packet::new_checked(&h[..]).err(),
            Some(Error::Malformed)
        );
        h[0] = 0x46; // options that are not there
        assert_eq!(
            Ipv4Packet::new_checked(&h[..]).err(),
            Some(Error::Truncated)
        );
    }

    #[test]
    fn bad_checksum_detected() {
        let mut h = HDR;
        h[11] ^= 1;
        assert!(!Ipv4Packet::new_checked(&h[..]).unwrap().verify_checksum());
    }

    /// Every field reads from its place; the flags apart from each other.
    #[test]
    fn every_field_and_flag() {
        let mut h = [0u8; 28];
        h[..20].copy_from_slice(&HDR);
        h[1] = 0xb8; // DSCP EF
        h[4..6].copy_from_slice(&[0x12, 0x34]);
        h[6] = 0x40; // DF alone
        h[8] = 63;
        h[20..].copy_from_slice(b"payload!");
        let p = Ipv4Packet::new_checked(&h[..]).unwrap();
        assert_eq!(
            (p.tos(), p.ident(), p.ttl(), p.checksum()),
            (0xb8, 0x1234, 63, 0xa4cd)
        );
        assert!(p.dont_frag() && !p.more_frags() && !p.is_fragment());
        assert_eq!(p.payload(), b"payload!");
        h[6] = 0x20; // MF alone
        let p = Ipv4Packet::new_checked(&h[..]).unwrap();
        assert!(!p.dont_frag() && p.more_frags() && p.is_fragment());
        h[6] = 0;
        let mut p = Ipv4Packet::new_checked(&mut h[..]).unwrap();
        assert!(!p.dont_frag() && !p.more_frags());
        p.set_src([192, 0, 2, 1]);
        p.set_dst([198, 51, 100, 2]);
        assert_eq!((p.src(), p.dst()), ([192, 0, 2, 1], [198, 51, 100, 2]));
        assert_eq!(h[12..20], [192, 0, 2, 1, 198, 51, 100, 2]);
    }
}
