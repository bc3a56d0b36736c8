//! What a `reject` ACL sends back, and how often it may.
//!
//! [`reply`] builds the answer OVN's controller sends for a rejected
//! packet (`pinctrl_handle_reject` in ovn-controller's `pinctrl.c`):
//!
//! | offending packet            | answer                                  |
//! |-----------------------------|-----------------------------------------|
//! | TCP                         | a RST                                   |
//! | SCTP                        | an ABORT chunk                          |
//! | UDP                         | ICMP 3/3, ICMPv6 1/4: port unreachable  |
//! | any other IP (ICMP echo...) | ICMP 3/1 host unreachable, ICMPv6 1/1   |
//!
//! The RST follows RFC 793's reset generation, as Linux and netfilter's
//! `REJECT --reject-with tcp-reset` do: to a segment with ACK, `RST` with
//! the segment's acknowledgment number as its sequence number; otherwise
//! `RST|ACK` with sequence number 0 acknowledging the whole segment
//! (sequence number + payload length + 1 for SYN + 1 for FIN). pinctrl
//! always sends `RST|ACK`, seq 0, ack `seq + 1`: the same for a bare SYN,
//! but ignored by the peer (outside its window) for a segment of an open
//! connection. The ABORT carries the INIT's initiate tag with the T bit
//! clear when it answers an INIT with tag 0, and otherwise the packet's
//! own tag reflected with the T bit set (RFC 9260 §8.4 items 3 and 8),
//! as pinctrl; its CRC32c is computed.
//!
//! The answer goes back the way the packet came: Ethernet addresses
//! swapped, the same VLAN tags (TPID and TCI, outermost first; pinctrl
//! keeps only one 802.1Q tag), IP addresses swapped, every checksum
//! computed. The answer is always Ethernet II, even to an 802.3 LLC/SNAP
//! frame, and never padded to 60 bytes (the NIC pads). The IP header is built as
//! pinctrl's `pinctrl_compose_ipv4`/`_ipv6` build it: IPv4 with DSCP CS6
//! (TOS 0xc0), identification 0, don't-fragment set and no options; IPv6
//! with traffic class and flow label 0. TTL / hop limit: 255 for ICMP
//! errors and 63 for a RST or an ABORT, pinctrl's values.
//!
//! No answer ([`None`]) is ever sent to:
//!
//! - anything that is not Ethernet carrying a well-formed IPv4 or IPv6
//!   header (as `parse_frame` reads it);
//! - a group Ethernet address (broadcast or multicast), as destination or
//!   source (RFC 1122 §3.2.2, RFC 4443 §2.4(e.3)); a multicast or
//!   limited-broadcast IP destination (RFC 1122 §3.2.2, RFC 4443 §2.4(e.2));
//!   a source that does not name a single host: IPv4 0/8, 127/8, 224/4 and
//!   240/4 (class E, limited broadcast included), IPv6 `::`, `::1` and
//!   ff00::/8 (RFC 1122 §3.2.2, RFC 4443 §2.4(e.6)); the answer would go
//!   to many hosts or to none. A directed broadcast (a subnet's last
//!   address) cannot be recognised without the subnet and is answered. The
//!   same rules hold for a RST or an ABORT: neither protocol runs over
//!   group addresses, and a host's own stack drops such segments too.
//! - a fragment other than the first (RFC 1122 §3.2.2, RFC 4443 §2.4(e.4)):
//!   it has no transport header to answer;
//! - a TCP RST (RFC 793 "Reset Generation"; pinctrl ignores it too), or a
//!   TCP segment whose header is cut short (pinctrl: no L4 header);
//! - an SCTP packet without a complete common header or first chunk header,
//!   one that holds an ABORT (RFC 9260 §8.4 item 2; pinctrl checks the first
//!   chunk only), a SHUTDOWN COMPLETE (§8.4 item 6), or a first INIT chunk
//!   cut before its initiate tag (pinctrl: "Incomplete SCTP INIT chunk");
//! - an ICMP or ICMPv6 error message (RFC 1122 §3.2.2, RFC 4443 §2.4(e.1)):
//!   every ICMPv4 error type and every ICMPv6 type below 128. pinctrl only
//!   skips destination-unreachable; the RFCs forbid answering any error;
//! - ICMPv6 neighbour discovery, redirect and multicast listener messages
//!   (types 130 to 137 and 143): link-local control traffic that OVN's
//!   northd lets through ahead of every ACL, so pinctrl never sees it
//!   rejected; answering it would only be noise on the link;
//! - an ICMP or ICMPv6 message shorter than its 8-byte header (pinctrl: no
//!   L4 header).
//!
//! ICMP echo and other informational messages are "other IP": they get a
//! host unreachable, as in OVN. The checksums of the offending packet are
//! not checked (pinctrl does not either): the ACL matched it, it is
//! answered.
//!
//! [`reply_within`] asks a rate limit before it builds the answer; the
//! firewall's is one for all its workers (`crate::meter::Limit`), and
//! [`RateLimiter`] is a token bucket for one thread, on the caller's
//! clock.

use ctrack_wire::ethernet::{EthernetFrame, VlanTag, ethertype};
use ctrack_wire::ipv4::Ipv4Packet;
use ctrack_wire::ipv6::Ipv6Packet;
use ctrack_wire::{Fragment, IpLayer, IpVersion, LinkType, checksum, ip_proto, parse_frame};

mod icmp;
mod limit;
mod sctp;
mod tcp;

pub use limit::{DEFAULT_BURST, DEFAULT_RATE, RateLimiter};

/// TTL / hop limit of an ICMP or ICMPv6 error, as pinctrl sends it.
pub const ICMP_TTL: u8 = 255;
/// TTL / hop limit of a TCP RST or SCTP ABORT, as pinctrl sends it.
pub const RESET_TTL: u8 = 63;
/// IPv4 TOS of every answer: DSCP CS6 (network control), as pinctrl sets.
pub const TOS: u8 = 0xc0;

/// The answer to the Ethernet frame `frame` rejected by an ACL, or `None`
/// when none may be sent (see the [module documentation](self)). Never
/// panics, whatever the bytes.
pub fn reply(frame: &[u8]) -> Option<Vec<u8>> {
    reply_within(frame, || true)
}

/// [`reply`], asking `allow` (a rate limit) once `frame` is known to be
/// answerable and before its answer is built: `None` if it is not
/// answerable or `allow` says no (then nothing was built).
pub fn reply_within(frame: &[u8], allow: impl FnOnce() -> bool) -> Option<Vec<u8>> {
    let layers = parse_frame(frame, LinkType::Ethernet);
    let ip = layers.ip.ok()?;
    let eth = EthernetFrame::new_checked(frame).ok()?;
    if is_group_mac(eth.dst()) || is_group_mac(eth.src()) || ip.frag == Fragment::Later {
        return None;
    }
    let addrs = Addrs::read(frame, &ip)?;
    if !addrs.answerable() {
        return None;
    }
    let l4 = frame.get(ip.l4..ip.end)?;
    let datagram = frame.get(ip.l3..ip.end)?;
    let v6 = ip.version == IpVersion::V6;
    // What answers it, known before anything is built: an ABORT is built
    // here (rare, and whether there is one depends on its chunks), a RST
    // or an ICMP error (a copy of up to a few hundred bytes of the packet)
    // only once the limit allows.
    let plan = match ip.proto {
        ip_proto::TCP => Plan::Reset(tcp::reset(l4)?),
        ip_proto::SCTP => Plan::Ready(sctp::abort(l4)?),
        ip_proto::ICMP if !v6 && !icmp::answerable_v4(l4) => return None,
        ip_proto::ICMPV6 if v6 && !icmp::answerable_v6(l4) => return None,
        ip_proto::UDP => Plan::Unreachable(icmp::Unreachable::Port),
        _ => Plan::Unreachable(icmp::Unreachable::Host),
    };
    if !allow() {
        return None;
    }
    let answer = match plan {
        Plan::Reset(r) => r.answer(),
        Plan::Ready(a) => a,
        Plan::Unreachable(kind) => icmp::unreachable(ip.version, kind, datagram),
    };
    Some(assemble(
        eth.src(),
        eth.dst(),
        layers.vlans.as_slice(),
        addrs.swapped(),
        answer,
    ))
}

/// An answer decided on, not yet built.
enum Plan {
    Reset(tcp::Reset),
    Ready(Answer),
    Unreachable(icmp::Unreachable),
}

/// The transport part of an answer, before the IP header is known.
#[derive(Debug)]
struct Answer {
    /// IP protocol of the answer.
    proto: u8,
    /// TTL / hop limit.
    ttl: u8,
    /// The transport header and body; the checksum field is filled by
    /// [`assemble`] once the addresses are known, except SCTP's CRC32c,
    /// which covers no pseudo-header and is filled by [`sctp`].
    l4: Vec<u8>,
}

/// The IP addresses of a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Addrs {
    V4 { src: [u8; 4], dst: [u8; 4] },
    V6 { src: [u8; 16], dst: [u8; 16] },
}

impl Addrs {
    fn read(frame: &[u8], ip: &IpLayer) -> Option<Addrs> {
        let l3 = frame.get(ip.l3..)?;
        Some(match ip.version {
            IpVersion::V4 => {
                let h = Ipv4Packet::new_checked(l3).ok()?;
                Addrs::V4 {
                    src: h.src(),
                    dst: h.dst(),
                }
            }
            IpVersion::V6 => {
                let h = Ipv6Packet::new_checked(l3).ok()?;
                Addrs::V6 {
                    src: h.src(),
                    dst: h.dst(),
                }
            }
        })
    }

    /// True if an answer may go to the source: the destination is not a
    /// group, the source names a single host.
    fn answerable(&self) -> bool {
        match *self {
            Addrs::V4 { src, dst } => {
                let group_dst = dst[0] >= 224; // 224/4 multicast, 240/4 with 255.255.255.255
                let bad_src = src[0] == 0 || src[0] == 127 || src[0] >= 224;
                !group_dst && !bad_src
            }
            Addrs::V6 { src, dst } => {
                const UNSPECIFIED: [u8; 16] = [0; 16];
                let mut loopback = [0; 16];
                loopback[15] = 1;
                let group_dst = dst[0] == 0xff;
                let bad_src = src[0] == 0xff || src == UNSPECIFIED || src == loopback;
                !group_dst && !bad_src
            }
        }
    }

    fn swapped(self) -> Addrs {
        match self {
            Addrs::V4 { src, dst } => Addrs::V4 { src: dst, dst: src },
            Addrs::V6 { src, dst } => Addrs::V6 { src: dst, dst: src },
        }
    }
}

/// True for a group (multicast or broadcast) Ethernet address: the I/G bit.
fn is_group_mac(mac: [u8; 6]) -> bool {
    mac[0] & 1 == 1
}

/// The whole answer frame: from `eth_dst` (the offending packet's
/// destination) back to `eth_src` over the same VLAN tags, with `addrs`
/// (already swapped) and every checksum filled.
fn assemble(
    to_mac: [u8; 6],
    from_mac: [u8; 6],
    vlans: &[VlanTag],
    addrs: Addrs,
    answer: Answer,
) -> Vec<u8> {
    let Answer { proto, ttl, mut l4 } = answer;
    // An answer is at most 1280 bytes of IPv6 (icmp.rs caps the quote), so
    // these lengths fit their fields.
    let l4_len = u32::try_from(l4.len()).unwrap_or(u32::MAX);
    let mut out = Vec::with_capacity(14 + 4 * vlans.len() + 40 + l4.len());
    out.extend_from_slice(&to_mac);
    out.extend_from_slice(&from_mac);
    for tag in vlans {
        out.extend_from_slice(&tag.tpid.to_be_bytes());
        out.extend_from_slice(&tag.tci.to_be_bytes());
    }
    let pseudo = match addrs {
        Addrs::V4 { src, dst } => {
            out.extend_from_slice(&ethertype::IPV4.to_be_bytes());
            let total = u16::try_from(20 + l4.len()).unwrap_or(u16::MAX);
            let mut h = [0u8; 20];
            h[0] = 0x45;
            h[1] = TOS;
            h[2..4].copy_from_slice(&total.to_be_bytes());
            h[6] = 0x40; // don't fragment; identification and offset 0
            h[8] = ttl;
            h[9] = proto;
            h[12..16].copy_from_slice(&src);
            h[16..20].copy_from_slice(&dst);
            let c = checksum::checksum(&h);
            h[10..12].copy_from_slice(&c.to_be_bytes());
            out.extend_from_slice(&h);
            checksum::pseudo_header_v4(src, dst, proto, l4_len)
        }
        Addrs::V6 { src, dst } => {
            out.extend_from_slice(&ethertype::IPV6.to_be_bytes());
            let plen = u16::try_from(l4.len()).unwrap_or(u16::MAX);
            out.extend_from_slice(&[0x60, 0, 0, 0]);
            out.extend_from_slice(&plen.to_be_bytes());
            out.extend_from_slice(&[proto, ttl]);
            out.extend_from_slice(&src);
            out.extend_from_slice(&dst);
            checksum::pseudo_header_v6(&src, &dst, proto, l4_len)
        }
    };
    let at = match proto {
        ip_proto::TCP => Some((16, pseudo)),
        ip_proto::ICMP => Some((2, 0)), // ICMPv4 has no pseudo-header
        ip_proto::ICMPV6 => Some((2, pseudo)),
        _ => None, // SCTP: CRC32c already in place
    };
    if let Some((at, pseudo)) = at {
        let c = checksum::finish(checksum::sum(pseudo, &l4));
        ctrack_wire::write_be16(&mut l4, at, c);
    }
    out.extend_from_slice(&l4);
    out
}
