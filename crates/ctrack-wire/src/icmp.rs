//! ICMP for IPv4 (RFC 792) and ICMPv6 (RFC 4443): the header, the message
//! types conntrack cares about, and where an error message quotes the packet
//! that caused it.

use crate::{Error, Result, be16};

/// Length of the ICMP / ICMPv6 header (type, code, checksum, 4 bytes of
/// rest-of-header).
pub const HEADER_LEN: usize = 8;

/// ICMPv4 message types.
pub mod v4 {
    /// Echo reply.
    pub const ECHO_REPLY: u8 = 0;
    /// Destination unreachable.
    pub const DST_UNREACH: u8 = 3;
    /// Source quench (deprecated, still an error that quotes a packet).
    pub const SOURCE_QUENCH: u8 = 4;
    /// Redirect.
    pub const REDIRECT: u8 = 5;
    /// Echo request.
    pub const ECHO_REQUEST: u8 = 8;
    /// Time exceeded.
    pub const TIME_EXCEEDED: u8 = 11;
    /// Parameter problem.
    pub const PARAM_PROBLEM: u8 = 12;
    /// Timestamp request.
    pub const TIMESTAMP: u8 = 13;
    /// Timestamp reply.
    pub const TIMESTAMP_REPLY: u8 = 14;
    /// Information request (obsolete).
    pub const INFO_REQUEST: u8 = 15;
    /// Information reply (obsolete).
    pub const INFO_REPLY: u8 = 16;

    /// The reply type of a query type, or the query type of a reply.
    pub fn reverse_query(ty: u8) -> Option<u8> {
        Some(match ty {
            ECHO_REQUEST => ECHO_REPLY,
            ECHO_REPLY => ECHO_REQUEST,
            TIMESTAMP => TIMESTAMP_REPLY,
            TIMESTAMP_REPLY => TIMESTAMP,
            INFO_REQUEST => INFO_REPLY,
            INFO_REPLY => INFO_REQUEST,
            _ => return None,
        })
    }

    /// True for the error messages that quote an offending datagram.
    pub fn is_error(ty: u8) -> bool {
        matches!(
            ty,
            DST_UNREACH | SOURCE_QUENCH | REDIRECT | TIME_EXCEEDED | PARAM_PROBLEM
        )
    }

    /// True for query types that may open a tracked exchange.
    pub fn is_request(ty: u8) -> bool {
        matches!(ty, ECHO_REQUEST | TIMESTAMP | INFO_REQUEST)
    }
}

/// ICMPv6 message types.
pub mod v6 {
    /// Destination unreachable.
    pub const DST_UNREACH: u8 = 1;
    /// Packet too big.
    pub const PACKET_TOO_BIG: u8 = 2;
    /// Time exceeded.
    pub const TIME_EXCEEDED: u8 = 3;
    /// Parameter problem.
    pub const PARAM_PROBLEM: u8 = 4;
    /// Echo request.
    pub const ECHO_REQUEST: u8 = 128;
    /// Echo reply.
    pub const ECHO_REPLY: u8 = 129;
    /// Router solicitation.
    pub const ROUTER_SOLICIT: u8 = 133;
    /// Router advertisement.
    pub const ROUTER_ADVERT: u8 = 134;
    /// Neighbor solicitation.
    pub const NEIGHBOR_SOLICIT: u8 = 135;
    /// Neighbor advertisement.
    pub const NEIGHBOR_ADVERT: u8 = 136;

    /// The reply type of a query type, or the query type of a reply.
    pub fn reverse_query(ty: u8) -> Option<u8> {
        Some(match ty {
            ECHO_REQUEST => ECHO_REPLY,
            ECHO_REPLY => ECHO_REQUEST,
            _ => return None,
        })
    }

    /// True for the error messages that quote an offending packet.
    pub fn is_error(ty: u8) -> bool {
        matches!(
            ty,
            DST_UNREACH | PACKET_TOO_BIG | TIME_EXCEEDED | PARAM_PROBLEM
        )
    }
}

/// A view of an ICMP or ICMPv6 message over a buffer that starts with its
/// header and ends where the message ends.
#[derive(Debug, Clone, Copy)]
pub struct IcmpPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> IcmpPacket<T> {
    /// Wraps `buffer` after checking that the 8-byte header fits.
    pub fn new_checked(buffer: T) -> Result<Self> {
        if buffer.as_ref().len() < HEADER_LEN {
            return Err(Error::Truncated);
        }
        Ok(Self { buffer })
    }

    /// Message type.
    pub fn msg_type(&self) -> u8 {
        self.buffer.as_ref()[0]
    }

    /// Message code.
    pub fn code(&self) -> u8 {
        self.buffer.as_ref()[1]
    }

    /// Checksum field.
    pub fn checksum(&self) -> u16 {
        be16(self.buffer.as_ref(), 2)
    }

    /// Identifier of an echo, timestamp or information message.
    pub fn ident(&self) -> u16 {
        be16(self.buffer.as_ref(), 4)
    }

    /// Sequence number of an echo, timestamp or information message.
    pub fn seq(&self) -> u16 {
        be16(self.buffer.as_ref(), 6)
    }

    /// For an error message: the quoted packet, starting at its IP header.
    pub fn quoted(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..]
    }

    /// The whole message.
    pub fn as_bytes(&self) -> &[u8] {
        self.buffer.as_ref()
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> IcmpPacket<T> {
    /// Sets the identifier.
    pub fn set_ident(&mut self, id: u16) {
        self.buffer.as_mut()[4..6].copy_from_slice(&id.to_be_bytes());
    }

    /// Sets the checksum field.
    pub fn set_checksum(&mut self, c: u16) {
        self.buffer.as_mut()[2..4].copy_from_slice(&c.to_be_bytes());
    }

    /// The quoted packet, writable (for NAT of the inner header).
    pub fn quoted_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[HEADER_LEN..]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn echo_fields() {
        let m = [8, 0, 0xf7, 0xfe, 0x12, 0x34, 0x00, 0x01, b'x'];
        let p = IcmpPacket::new_checked(&m[..]).unwrap();
        assert_eq!(p.msg_type(), v4::ECHO_REQUEST);
        assert_eq!(p.code(), 0);
        assert_eq!(p.ident(), 0x1234);
        assert_eq!(p.seq(), 1);
        assert_eq!(p.quoted(), b"x");
        assert!(IcmpPacket::new_checked(&m[..7]).is_err());
    }

    #[test]
    fn type_tables() {
        for t in [v4::ECHO_REQUEST, v4::TIMESTAMP, v4::INFO_REQUEST] {
            let r = v4::reverse_query(t).unwrap();
            assert_eq!(v4::reverse_query(r), Some(t));
            assert!(v4::is_request(t));
            assert!(!v4::is_request(r));
        }
        assert_eq!(v4::reverse_query(v4::DST_UNREACH), None);
        assert!(v4::is_error(v4::REDIRECT));
        assert!(!v4::is_error(9));
        assert_eq!(v6::reverse_query(v6::ECHO_REQUEST), Some(v6::ECHO_REPLY));
        assert!(v6::is_error(v6::PACKET_TOO_BIG));
        assert!(!v6::is_error(v6::NEIGHBOR_SOLICIT));
    }

    /// A bare eight-byte header is a message; each field reads and writes
    /// in its place, the quoted packet too; ICMPv6's echo reply answers
    /// its request.
    #[test]
    fn fields_written_are_read_back() {
        let mut m = [3, 4, 0xab, 0xcd, 0, 0, 0x56, 0x78, 0x45, 0];
        let mut p = IcmpPacket::new_checked(&mut m[..]).unwrap();
        assert_eq!((p.code(), p.checksum(), p.seq()), (4, 0xabcd, 0x5678));
        p.set_ident(0x0102);
        p.set_checksum(0x0304);
        p.quoted_mut()[1] = 0x10;
        assert_eq!((p.ident(), p.checksum()), (0x0102, 0x0304));
        assert_eq!(p.as_bytes(), [3, 4, 3, 4, 1, 2, 0x56, 0x78, 0x45, 0x10]);
        assert!(
            IcmpPacket::new_checked(&m[..8])
                .unwrap()
                .quoted()
                .is_empty()
        );
        assert_eq!(v6::reverse_query(v6::ECHO_REPLY), Some(v6::ECHO_REQUEST));
        assert_eq!(v6::reverse_query(v6::DST_UNREACH), None);
    }
}
