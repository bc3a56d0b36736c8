//! IPv6 neighbour discovery and MLD, which pass above every ACL and
//! without tracking, as in OVN (northd's priority-65535 flows for `nd ||
//! nd_rs || nd_ra || mldv1 || mldv2`).

use ctrack_wire::{Frame, IpVersion, ip_proto};

/// ICMPv6 types of router solicitation/advertisement and neighbour
/// solicitation/advertisement: OVN's `nd_rs`, `nd_ra`, `nd` (code 0, hop
/// limit 255).
const ND: [u8; 4] = [133, 134, 135, 136];
/// MLDv1 query, report, done; MLDv2 report.
const MLD: [u8; 4] = [130, 131, 132, 143];

/// True for an ND or MLD message.
pub fn is_nd_or_mld(frame: &[u8], layers: &Frame) -> bool {
    let Ok(ip) = layers.ip else { return false };
    if ip.version != IpVersion::V6 || ip.proto != ip_proto::ICMPV6 || ip.frag.is_fragment() {
        return false;
    }
    let (Some(&ty), Some(&code), Some(&hops)) =
        (frame.get(ip.l4), frame.get(ip.l4 + 1), frame.get(ip.l3 + 7))
    else {
        return false;
    };
    (ND.contains(&ty) && code == 0 && hops == 255) || MLD.contains(&ty)
}
