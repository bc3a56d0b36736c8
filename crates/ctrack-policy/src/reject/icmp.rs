//! ICMP and ICMPv6 destination-unreachable answers (pinctrl's
//! `pinctrl_handle_icmp`), and which ICMP messages may be answered at all.
//!
//! The message quotes the offending IP datagram from its IP header
//! (options and extension headers included) to the end given by its length
//! field, cut so that the answer's IP datagram stays within 576 bytes for
//! IPv4 (RFC 1812 §4.3.2.3) and the minimum MTU of 1280 bytes for IPv6
//! (RFC 4443 §3.1): at most 548 and 1232 quoted bytes. pinctrl counts the
//! 14-byte Ethernet header against the same limits and so quotes 14 bytes
//! less; the RFCs count the IP datagram only.
//!
//! Codes, as pinctrl sets them: UDP gets port unreachable (ICMP 3/3,
//! ICMPv6 1/4), everything else ICMP 3/1 (host unreachable) or ICMPv6 1/1
//! (communication administratively prohibited).

use ctrack_wire::icmp::{self, IcmpPacket};
use ctrack_wire::{IpVersion, ip_proto};

use super::{Answer, ICMP_TTL};

/// The most an IPv4 ICMP error quotes: 576 - 20 (IP) - 8 (ICMP).
pub(super) const MAX_QUOTE_V4: usize = 576 - 20 - icmp::HEADER_LEN;
/// The most an ICMPv6 error quotes: 1280 - 40 (IPv6) - 8 (ICMPv6).
pub(super) const MAX_QUOTE_V6: usize = 1280 - 40 - icmp::HEADER_LEN;

/// Which unreachable message to send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Unreachable {
    /// Port unreachable: the answer to UDP.
    Port,
    /// Host unreachable (ICMPv6: administratively prohibited): the answer
    /// to any other protocol.
    Host,
}

/// ICMPv6 types that are link-local control traffic, never answered:
/// multicast listener query, report and done (130-132), router and
/// neighbour discovery and redirect (133-137), MLDv2 report (143).
fn is_link_control_v6(ty: u8) -> bool {
    matches!(ty, 130..=137 | 143)
}

/// True if the ICMPv4 message `l4` may be answered: its header is whole and
/// it is not an error (RFC 1122 §3.2.2).
pub(super) fn answerable_v4(l4: &[u8]) -> bool {
    IcmpPacket::new_checked(l4).is_ok_and(|m| !icmp::v4::is_error(m.msg_type()))
}

/// True if the ICMPv6 message `l4` may be answered: its header is whole, it
/// is informational (type 128 or more; RFC 4443 §2.1 makes every type below
/// 128 an error, §2.4(e.1) forbids answering one) and not link control.
pub(super) fn answerable_v6(l4: &[u8]) -> bool {
    IcmpPacket::new_checked(l4)
        .is_ok_and(|m| m.msg_type() >= 128 && !is_link_control_v6(m.msg_type()))
}

/// A destination-unreachable message quoting `datagram` (the offending IP
/// datagram, from its IP header to its end). The checksum is left zero for
/// the caller, which knows the pseudo-header.
pub(super) fn unreachable(version: IpVersion, kind: Unreachable, datagram: &[u8]) -> Answer {
    let (proto, ty, code, max) = match (version, kind) {
        (IpVersion::V4, Unreachable::Port) => {
            (ip_proto::ICMP, icmp::v4::DST_UNREACH, 3, MAX_QUOTE_V4)
        }
        (IpVersion::V4, Unreachable::Host) => {
            (ip_proto::ICMP, icmp::v4::DST_UNREACH, 1, MAX_QUOTE_V4)
        }
        (IpVersion::V6, Unreachable::Port) => {
            (ip_proto::ICMPV6, icmp::v6::DST_UNREACH, 4, MAX_QUOTE_V6)
        }
        (IpVersion::V6, Unreachable::Host) => {
            (ip_proto::ICMPV6, icmp::v6::DST_UNREACH, 1, MAX_QUOTE_V6)
        }
    };
    let quoted = &datagram[..datagram.len().min(max)];
    let mut l4 = Vec::with_capacity(icmp::HEADER_LEN + quoted.len());
    // Type, code, checksum (filled later), 4 unused bytes.
    l4.extend_from_slice(&[ty, code, 0, 0, 0, 0, 0, 0]);
    l4.extend_from_slice(quoted);
    Answer {
        proto,
        ttl: ICMP_TTL,
        l4,
    }
}
