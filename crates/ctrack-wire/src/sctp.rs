//! SCTP common headers (RFC 9260 §3.1) and the chunk-length walk.

use crate::{Error, Result, be16, be32};

/// Length of the SCTP common header.
pub const HEADER_LEN: usize = 12;
/// Length of a chunk header.
pub const CHUNK_HEADER_LEN: usize = 4;

/// A view of an SCTP packet over a buffer that starts with its common header
/// and ends where the packet ends.
#[derive(Debug, Clone, Copy)]
pub struct SctpPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> SctpPacket<T> {
    /// Wraps `buffer` after checking that the common header fits.
    pub fn new_checked(buffer: T) -> Result<Self> {
        if buffer.as_ref().len() < HEADER_LEN {
            return Err(Error::Truncated);
        }
        Ok(Self { buffer })
    }

    /// Source port.
    pub fn src_port(&self) -> u16 {
        be16(self.buffer.as_ref(), 0)
    }

    /// Destination port.
    pub fn dst_port(&self) -> u16 {
        be16(self.buffer.as_ref(), 2)
    }

    /// Verification tag.
    pub fn vtag(&self) -> u32 {
        be32(self.buffer.as_ref(), 4)
    }

    /// The checksum as stored (CRC32c, little-endian on the wire).
    pub fn checksum(&self) -> u32 {
        let d = &self.buffer.as_ref()[8..12];
        u32::from_le_bytes([d[0], d[1], d[2], d[3]])
    }

    /// True if the CRC32c is correct.
    pub fn verify_checksum(&self) -> bool {
        crate::checksum::sctp_crc32c(self.buffer.as_ref()) == self.checksum()
    }

    /// True if the chunks tile the packet exactly: each chunk length at least
    /// 4, padded to a multiple of 4, and the last ending at the end of the
    /// packet (the check Open vSwitch applies before tracking).
    pub fn chunks_well_formed(&self) -> bool {
        let data = self.buffer.as_ref();
        let mut next = HEADER_LEN;
        while next < data.len() {
            // A chunk header that does not fit is malformed.
            let Some(len) = data.get(next + 2..next + 4) else {
                return false;
            };
            let len = usize::from(u16::from_be_bytes([len[0], len[1]]));
            if len < CHUNK_HEADER_LEN {
                return false;
            }
            next += (len + 3) & !3;
        }
        next == data.len()
    }

    /// The type of the first chunk, if any.
    pub fn first_chunk_type(&self) -> Option<u8> {
        self.buffer.as_ref().get(HEADER_LEN).copied()
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> SctpPacket<T> {
    /// Sets the source port.
    pub fn set_src_port(&mut self, port: u16) {
        self.buffer.as_mut()[0..2].copy_from_slice(&port.to_be_bytes());
    }

    /// Sets the destination port.
    pub fn set_dst_port(&mut self, port: u16) {
        self.buffer.as_mut()[2..4].copy_from_slice(&port.to_be_bytes());
    }

    /// Recomputes the CRC32c.
    pub fn fill_checksum(&mut self) {
        let c = crate::checksum::sctp_crc32c(self.buffer.as_ref());
        self.buffer.as_mut()[8..12].copy_from_slice(&c.to_le_bytes());
    }
}

/// Changes an SCTP packet (common header and chunks) in place with `edit`
/// and moves its CRC32c field by the change of the CRC, so that a correct
/// CRC stays correct and a wrong one stays wrong by the same bits, as Open
/// vSwitch does. (For a fixed length the CRC is affine over GF(2):
/// `crc(a) ^ crc(b) ^ crc(c) = crc(a ^ b ^ c)`, so the stored value `s`
/// becomes `s ^ crc(before) ^ crc(after)`.)
///
/// Whatever `edit` writes to the checksum field (bytes 8..12) is replaced.
/// Returns `false`, without calling `edit`, if `packet` is shorter than the
/// common header.
pub fn edit_keeping_crc(packet: &mut [u8], edit: impl FnOnce(&mut [u8])) -> bool {
    const CSUM: core::ops::Range<usize> = 8..12;
    if packet.len() < HEADER_LEN {
        return false;
    }
    let before = crate::checksum::sctp_crc32c(packet);
    let stored = u32::from_le_bytes([packet[8], packet[9], packet[10], packet[11]]);
    edit(packet);
    let after = crate::checksum::sctp_crc32c(packet);
    packet[CSUM].copy_from_slice(&(stored ^ before ^ after).to_le_bytes());
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn init_packet() -> Vec<u8> {
        let mut p = vec![0x13, 0x88, 0x13, 0x89, 0, 0, 0, 0, 0, 0, 0, 0];
        // INIT chunk: type 1, flags 0, length 20
        p.extend_from_slice(&[
            1, 0, 0, 20, 0xde, 0xad, 0xbe, 0xef, 0, 1, 0, 0, 0, 10, 0, 10,
        ]);
        p.extend_from_slice(&[0, 0, 0, 1]);
        p
    }

    #[test]
    fn fields_and_crc() {
        let mut p = init_packet();
        let mut s = SctpPacket::new_checked(&mut p[..]).unwrap();
        s.fill_checksum();
        assert!(s.verify_checksum());
        assert_eq!(s.src_port(), 5000);
        assert_eq!(s.dst_port(), 5001);
        assert_eq!(s.first_chunk_type(), Some(1));
        assert!(s.chunks_well_formed());
        p[20] ^= 0xff;
        assert!(!SctpPacket::new_checked(&p[..]).unwrap().verify_checksum());
    }

    #[test]
    fn chunk_walk() {
        let p = init_packet();
        // Header only: no chunks is well formed.
        assert!(
            SctpPacket::new_checked(&p[..12])
                .unwrap()
                .chunks_well_formed()
        );
        // Chunk longer than the packet.
        assert!(
            !SctpPacket::new_checked(&p[..28])
                .unwrap()
                .chunks_well_formed()
        );
        // Chunk length below 4.
        let mut q = p.clone();
        q[15] = 3;
        assert!(
            !SctpPacket::new_checked(&q[..])
                .unwrap()
                .chunks_well_formed()
        );
        // Unpadded odd chunk length: 20 -> 18 rounds to 20, still fits.
        let mut q = p.clone();
        q[15] = 18;
        assert!(
            SctpPacket::new_checked(&q[..])
                .unwrap()
                .chunks_well_formed()
        );
        // Trailing bytes too short for a chunk header.
        let mut q = p.clone();
        q.extend_from_slice(&[0, 0]);
        assert!(
            !SctpPacket::new_checked(&q[..])
                .unwrap()
                .chunks_well_formed()
        );
    }

    /// A chunk of its header alone (a COOKIE ACK, four bytes) is well
    /// formed; the header's fields read and write in their places.
    #[test]
    fn a_bare_chunk_and_the_common_header() {
        let mut p = vec![0x13, 0x88, 0x13, 0x89, 0x01, 0x02, 0x03, 0x04, 0, 0, 0, 0];
        p.extend_from_slice(&[11, 0, 0, 4]);
        let mut s = SctpPacket::new_checked(&mut p[..]).unwrap();
        assert!(s.chunks_well_formed());
        assert_eq!((s.vtag(), s.first_chunk_type()), (0x0102_0304, Some(11)));
        s.set_src_port(0x0a0b);
        s.set_dst_port(0x0c0d);
        assert_eq!((s.src_port(), s.dst_port()), (0x0a0b, 0x0c0d));
        assert_eq!(p[..4], [0x0a, 0x0b, 0x0c, 0x0d]);
        p.truncate(12);
        assert_eq!(
            SctpPacket::new_checked(&p[..]).unwrap().first_chunk_type(),
            None
        );
    }
}
