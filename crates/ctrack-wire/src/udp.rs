//! UDP (RFC 768) and UDP-Lite (RFC 3828) headers. Both have the same layout;
//! UDP-Lite's length field is the checksum coverage.

use crate::{Error, Result, be16};

/// Length of a UDP header.
pub const HEADER_LEN: usize = 8;

/// A view of a UDP or UDP-Lite datagram over a buffer that starts with its
/// header.
#[derive(Debug, Clone, Copy)]
pub struct UdpPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> UdpPacket<T> {
    /// Wraps `buffer` after checking that the 8-byte header fits. The length
    /// field is not checked: UDP and UDP-Lite read it differently.
    pub fn new_checked(buffer: T) -> Result<Self> {
        if buffer.as_ref().len() < HEADER_LEN {
            return Err(Error::Truncated);
        }
        Ok(Self { buffer })
    }

    /// Wraps `buffer` without checks.
    pub fn new_unchecked(buffer: T) -> Self {
        Self { buffer }
    }

    /// Source port.
    pub fn src_port(&self) -> u16 {
        be16(self.buffer.as_ref(), 0)
    }

    /// Destination port.
    pub fn dst_port(&self) -> u16 {
        be16(self.buffer.as_ref(), 2)
    }

    /// The length field (UDP: datagram length; UDP-Lite: checksum coverage,
    /// 0 meaning the whole datagram).
    pub fn len_field(&self) -> u16 {
        be16(self.buffer.as_ref(), 4)
    }

    /// Checksum field.
    pub fn checksum(&self) -> u16 {
        be16(self.buffer.as_ref(), 6)
    }

    /// The bytes after the header.
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> UdpPacket<T> {
    /// Sets the source port.
    pub fn set_src_port(&mut self, port: u16) {
        self.buffer.as_mut()[0..2].copy_from_slice(&port.to_be_bytes());
    }

    /// Sets the destination port.
    pub fn set_dst_port(&mut self, port: u16) {
        self.buffer.as_mut()[2..4].copy_from_slice(&port.to_be_bytes());
    }

    /// Sets the checksum field.
    pub fn set_checksum(&mut self, c: u16) {
        self.buffer.as_mut()[6..8].copy_from_slice(&c.to_be_bytes());
    }
}

/// How many bytes of a UDP-Lite datagram of `len` bytes its checksum covers,
/// or `None` if the coverage field is illegal (RFC 3828 §3.1: 1 to 7, or
/// more than the datagram).
pub fn udplite_coverage(coverage_field: u16, len: usize) -> Option<usize> {
    match usize::from(coverage_field) {
        0 => Some(len),
        c if c < HEADER_LEN || c > len => None,
        c => Some(c),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields() {
        let d = [0x00, 0x35, 0xc0, 0x00, 0x00, 0x0a, 0xbe, 0xef, 0x61, 0x62];
        let u = UdpPacket::new_checked(&d[..]).unwrap();
        assert_eq!(u.src_port(), 53);
        assert_eq!(u.dst_port(), 49152);
        assert_eq!(u.len_field(), 10);
        assert_eq!(u.checksum(), 0xbeef);
        assert_eq!(u.payload(), b"ab");
        assert!(UdpPacket::new_checked(&d[..7]).is_err());
    }

    #[test]
    fn coverage() {
        assert_eq!(udplite_coverage(0, 30), Some(30));
        assert_eq!(udplite_coverage(8, 30), Some(8));
        assert_eq!(udplite_coverage(30, 30), Some(30));
        assert_eq!(udplite_coverage(31, 30), None);
        assert_eq!(udplite_coverage(7, 30), None);
    }

    /// The setters write each field in its place; a bare header is a
    /// datagram.
    #[test]
    fn fields_written_are_read_back() {
        let mut d = [0u8; 8];
        let mut u = UdpPacket::new_checked(&mut d[..]).unwrap();
        u.set_src_port(0x0102);
        u.set_dst_port(0x0304);
        u.set_checksum(0x0708);
        assert_eq!(
            (u.src_port(), u.dst_port(), u.checksum()),
            (0x0102, 0x0304, 0x0708)
        );
        assert_eq!(d, [1, 2, 3, 4, 0, 0, 7, 8]);
        assert!(UdpPacket::new_checked(&d[..]).unwrap().payload().is_empty());
    }
}
