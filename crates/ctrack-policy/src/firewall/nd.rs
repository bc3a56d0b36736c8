//! What OVN keeps from conntrack: IPv6 neighbour discovery and MLD, which
//! pass above every ACL and without tracking (northd's priority-65532
//! flows for `nd || nd_ra || nd_rs || mldv1 || mldv2`, with those
//! predicates' meanings in OVN's `lib/logical-fields.c`), and multicast
//! and DHCPv6 clients' messages, which meet the ACLs untracked.

use ctrack_wire::{Fragment, Frame, IpVersion, ip_proto};

/// ICMPv6 types of router solicitation/advertisement and neighbour
/// solicitation/advertisement: OVN's `nd_rs`, `nd_ra`, `nd` (code 0, hop
/// limit 255).
const ND: [u8; 4] = [133, 134, 135, 136];
/// MLDv1 query, report, done: OVN's `mldv1` (from a link-local address).
const MLD1: [u8; 3] = [130, 131, 132];
/// MLDv2 report: OVN's `mldv2` (to `ff02::16`).
const MLD2: u8 = 143;

/// True for an ND or MLD message as OVN's predicates define them: `nd`,
/// `nd_rs`, `nd_ra` (ICMPv6 133 to 136, code 0, hop limit 255); `mldv1`
/// (`eth.mcastv6 && ip6.src == fe80::/10 && icmp6.type == {130, 131,
/// 132}`); `mldv2` (`eth.mcastv6 && ip6.dst == ff02::16 && icmp6.type ==
/// 143`). An ICMPv6 message of an MLD type that is not one of these meets
/// the ACLs.
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
    if ND.contains(&ty) {
        return code == 0 && hops == 255;
    }
    // eth.mcastv6: the destination MAC begins 33:33.
    let mcastv6 = frame.get(..2) == Some(&[0x33, 0x33][..]);
    if !mcastv6 {
        return false;
    }
    let (Some(src), Some(dst)) = (
        frame.get(ip.l3 + 8..ip.l3 + 24),
        frame.get(ip.l3 + 24..ip.l3 + 40),
    ) else {
        return false;
    };
    // ip6.src == fe80::/10
    let link_local = src[0] == 0xfe && src[1] & 0xc0 == 0x80;
    // ip6.dst == ff02::16
    let all_mld_routers =
        dst[..2] == [0xff, 0x02] && dst[2..15].iter().all(|&b| b == 0) && dst[15] == 0x16;
    (MLD1.contains(&ty) && link_local) || (ty == MLD2 && all_mld_routers)
}

/// UDP ports of a DHCPv6 client's message to a server: source 546,
/// destination 547, as the first four bytes of the UDP header; and of a
/// server's answer.
const DHCPV6_CLIENT: [u8; 4] = [0x02, 0x22, 0x02, 0x23];
const DHCPV6_SERVER: [u8; 4] = [0x02, 0x23, 0x02, 0x22];

/// True for a frame that OVN never sends to conntrack on a switch with
/// stateful ACLs, so that the ACLs alone decide it and an allowing ACL
/// commits nothing (northd's priority-110 flows of `ls_in_pre_acl` and
/// `ls_out_pre_acl`): `eth.mcast` (a multicast or broadcast destination
/// MAC), and `udp && udp.src == 546 && udp.dst == 547` (a DHCPv6
/// client's message). `l4` is the frame's transport header (`None` for a
/// later fragment or no IP layer) and `proto` its protocol.
///
/// A server's answer (`udp.src == 547 && udp.dst == 546`) is kept from
/// the tracker too, where OVN tracks it: there, its client's messages are
/// untracked, so a connection committed for the answers is never found
/// by them, and each later answer, an established packet in the request
/// direction, meets the ACLs again (as OVN's ACL hints have it); the ACLs
/// decide each packet either way. Committing none keeps the session's
/// fast path free of a port check for the client's messages, which
/// would otherwise find that connection there.
pub(super) fn untracked(frame: &[u8], proto: u8, l4: Option<&[u8]>) -> bool {
    let mcast = frame.first().is_some_and(|b| b & 1 == 1);
    mcast
        || (proto == ip_proto::UDP
            && l4
                .and_then(|h| h.first_chunk::<4>())
                .is_some_and(|p| *p == DHCPV6_CLIENT || *p == DHCPV6_SERVER))
}

/// [`untracked`] for a frame whose layers were parsed.
pub(super) fn untracked_parsed(frame: &[u8], layers: &Frame) -> bool {
    match &layers.ip {
        Ok(ip) if ip.frag != Fragment::Later => untracked(frame, ip.proto, frame.get(ip.l4..)),
        _ => untracked(frame, 0, None),
    }
}
