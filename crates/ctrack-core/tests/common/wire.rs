//! Checking a frame as it leaves: its IP length fields and every checksum,
//! and the TCP fields a test follows (written here, by hand, so that the
//! check does not share code with what it checks).

use ctrack_wire::checksum;

/// A TCP segment read back from an Ethernet frame whose lengths and
/// checksums all verified.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seg {
    pub seq: u32,
    pub ack: u32,
    pub payload: Vec<u8>,
    /// Length of the IP datagram (header included).
    pub ip_len: usize,
}

fn be16(b: &[u8], at: usize) -> usize {
    usize::from(u16::from_be_bytes([b[at], b[at + 1]]))
}

fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// Reads an untagged Ethernet frame holding an IPv4 or IPv6 (no extension
/// header) TCP segment, and panics with `what` if a length or checksum is
/// wrong.
pub fn tcp_seg(frame: &[u8], what: &str) -> Seg {
    assert!(frame.len() >= 14 + 20, "{what}: short frame");
    let ip = &frame[14..];
    let (l4, ip_len, pseudo) = match ip[0] >> 4 {
        4 => {
            let hl = usize::from(ip[0] & 0x0f) * 4;
            let total = be16(ip, 2);
            assert_eq!(total, ip.len(), "{what}: IPv4 total length");
            assert_eq!(checksum::checksum(&ip[..hl]), 0, "{what}: IPv4 checksum");
            assert_eq!(ip[9], 6, "{what}: not TCP");
            let mut s = [0u8; 4];
            let mut d = [0u8; 4];
            s.copy_from_slice(&ip[12..16]);
            d.copy_from_slice(&ip[16..20]);
            let pseudo = checksum::pseudo_header_v4(s, d, 6, (total - hl) as u32);
            (hl, total, pseudo)
        }
        6 => {
            let plen = be16(ip, 4);
            assert_eq!(plen + 40, ip.len(), "{what}: IPv6 payload length");
            assert_eq!(ip[6], 6, "{what}: not TCP (or an extension header)");
            let mut s = [0u8; 16];
            let mut d = [0u8; 16];
            s.copy_from_slice(&ip[8..24]);
            d.copy_from_slice(&ip[24..40]);
            let pseudo = checksum::pseudo_header_v6(&s, &d, 6, plen as u32);
            (40, plen + 40, pseudo)
        }
        v => panic!("{what}: IP version {v}"),
    };
    let tcp = &ip[l4..ip_len];
    assert!(
        checksum::is_valid(checksum::sum(pseudo, tcp)),
        "{what}: TCP checksum"
    );
    let off = usize::from(tcp[12] >> 4) * 4;
    Seg {
        seq: be32(tcp, 4),
        ack: be32(tcp, 8),
        payload: tcp[off..].to_vec(),
        ip_len,
    }
}
