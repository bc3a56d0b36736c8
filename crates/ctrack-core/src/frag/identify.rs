//! Reading what a fragment is: its datagram's key, its offset and length.

use ctrack_wire::{IpLayer, IpVersion, ipv4, ipv6};

use super::config::FragError;
use crate::key::Zone;

/// Identifies a datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) struct Key {
    pub(super) v6: bool,
    pub(super) src: u128,
    pub(super) dst: u128,
    pub(super) id: u32,
    pub(super) proto: u8,
    pub(super) zone: Zone,
}

/// What a fragment is.
pub(super) struct Info {
    pub(super) key: Key,
    pub(super) off: usize,
    pub(super) len: usize,
    pub(super) more: bool,
    pub(super) data: usize,
    pub(super) end: usize,
    pub(super) l3: usize,
    /// Bytes of the IP packet (for the size minimum).
    pub(super) l3_len: usize,
    /// Bytes of IP header (and IPv6 unfragmentable part) before the
    /// payload, for the 65535 bound.
    pub(super) head: usize,
}

/// Reads what a fragment is.
pub(super) fn info(
    frame: &[u8],
    ip: &IpLayer,
    zone: Zone,
    checksums: bool,
) -> Result<Info, FragError> {
    let l3 = ip.l3;
    let pkt = frame.get(l3..ip.end).ok_or(FragError::Malformed)?;
    match ip.version {
        IpVersion::V4 => {
            let h = ipv4::Ipv4Packet::new_checked(pkt).map_err(|_| FragError::Malformed)?;
            if checksums && !h.verify_checksum() {
                return Err(FragError::Malformed);
            }
            let hl = h.header_len();
            Ok(Info {
                key: Key {
                    v6: false,
                    src: u128::from(u32::from_be_bytes(h.src())),
                    dst: u128::from(u32::from_be_bytes(h.dst())),
                    id: u32::from(h.ident()),
                    proto: h.protocol(),
                    zone,
                },
                off: usize::from(h.frag_offset()),
                len: pkt.len() - hl,
                more: h.more_frags(),
                data: l3 + hl,
                end: ip.end,
                l3,
                l3_len: pkt.len(),
                head: hl,
            })
        }
        IpVersion::V6 => {
            let fh_at = ip.frag_header.ok_or(FragError::Malformed)?;
            let fh = ipv6::FragHeader::parse(frame.get(fh_at..).ok_or(FragError::Malformed)?)
                .map_err(|_| FragError::Malformed)?;
            let h = ipv6::Ipv6Packet::new_checked(pkt).map_err(|_| FragError::Malformed)?;
            let data = fh_at + ipv6::FRAG_HEADER_LEN;
            if data > ip.end {
                return Err(FragError::Malformed);
            }
            Ok(Info {
                key: Key {
                    v6: true,
                    src: u128::from_be_bytes(h.src()),
                    dst: u128::from_be_bytes(h.dst()),
                    id: fh.ident,
                    proto: 0,
                    zone,
                },
                off: usize::from(fh.offset),
                len: ip.end - data,
                more: fh.more,
                data,
                end: ip.end,
                l3,
                l3_len: pkt.len(),
                // The datagram's payload length counts the unfragmentable
                // extension headers.
                head: fh_at - l3 - ipv6::HEADER_LEN,
            })
        }
    }
}

/// Where the "next header" byte naming the fragment header is, in an IPv6
/// packet at `l3` whose fragment header is at `fh`.
pub(super) fn v6_next_header_field(frame: &[u8], l3: usize, fh: usize) -> Option<usize> {
    let mut field = l3 + 6;
    let mut pos = l3 + ipv6::HEADER_LEN;
    while pos < fh {
        let ty = *frame.get(field)?;
        let len = match ty {
            ctrack_wire::ip_proto::HOPOPTS
            | ctrack_wire::ip_proto::DSTOPTS
            | ctrack_wire::ip_proto::ROUTING => (usize::from(*frame.get(pos + 1)?) + 1) * 8,
            ctrack_wire::ip_proto::AH => (usize::from(*frame.get(pos + 1)?) + 2) * 4,
            _ => return None,
        };
        field = pos;
        pos += len;
    }
    (pos == fh).then_some(field)
}
