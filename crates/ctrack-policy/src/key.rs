//! The packet fields ACLs match, packed into one 64-byte [`Key`].
//!
//! Every field of OVN's match language that ctrack supports has a fixed
//! place in eight 64-bit words, so that a compiled rule is a value and a
//! mask over the same eight words and a match is eight AND-compares:
//!
//! ```text
//! w0: flags:16 | eth.type:16 | vlan.tci:16 | ip.proto:8 | ip.ttl:8
//! w1: inport:16 | outport:16 | 0:8 | ip.tos:8 | tcp.flags:16 or icmp.type:8 | icmp.code:8
//! w2: eth.src:48 | l4.src:16            (tcp.src, udp.src, sctp.src)
//! w3: eth.dst:48 | l4.dst:16            (tcp.dst, udp.dst, sctp.dst)
//! w4, w5: source address, 128 bits      (an IPv4 address in the low 32)
//! w6, w7: destination address, 128 bits
//! ```
//!
//! Fields that share a place (`tcp.src` and `udp.src`, `ip4.src` and
//! `ip6.src`, `icmp4.type` and `icmp6.type`) are told apart by the
//! prerequisite flags in w0, which every such field's test carries (so
//! do `tcp.flags` and the ICMP type and code, which share w1's low 16
//! bits: a packet has one or the other). An
//! ARP frame (Ethernet and IPv4 addresses, as Open vSwitch reads ARP)
//! puts its opcode in l4.src, its sender's addresses in the source
//! address words (`arp.spa` in the low 32 bits, `arp.sha` in bits 64..112)
//! and its target's in the destination's (`arp.tpa`, `arp.tha`).

use ctrack_wire::ethernet::ethertype;
pub(crate) use ctrack_wire::plain_ipv4;
use ctrack_wire::{Fragment, IpVersion, LinkType, NotIp, ip_proto, parse_frame};

/// Bits of the flags field (w0's top 16 bits): what a frame is. Protocol
/// names of the match language (`ip`, `tcp`, `icmp`...) test these.
pub mod flag {
    /// An IPv4 or IPv6 EtherType, its header usable or not (OVN's `ip` is
    /// the EtherType; a frame whose header is not has no network fields).
    pub const IP: u16 = 1 << 0;
    /// IPv4.
    pub const IP4: u16 = 1 << 1;
    /// IPv6.
    pub const IP6: u16 = 1 << 2;
    /// ARP.
    pub const ARP: u16 = 1 << 3;
    /// TCP, header present.
    pub const TCP: u16 = 1 << 4;
    /// UDP, header present.
    pub const UDP: u16 = 1 << 5;
    /// SCTP, header present.
    pub const SCTP: u16 = 1 << 6;
    /// ICMPv4 or ICMPv6.
    pub const ICMP: u16 = 1 << 7;
    /// ICMPv4.
    pub const ICMP4: u16 = 1 << 8;
    /// ICMPv6.
    pub const ICMP6: u16 = 1 << 9;
    /// The frame has a VLAN tag (`vlan.present`).
    pub const VLAN: u16 = 1 << 10;
    /// A fragment that is not the first (no transport header):
    /// `ip.later_frag`.
    pub const LATER_FRAG: u16 = 1 << 11;
    /// A fragment, first or later: `ip.is_frag`.
    pub const FRAG: u16 = 1 << 12;
}

/// A port as the key holds it: 0 is "no known port", port `i` of the
/// policy is `i + 1`.
pub type PortNo = u16;

/// No known port.
pub const NO_PORT: PortNo = 0;

/// A field of the key: where it lies and how wide it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Field {
    /// The prerequisite flags ([`flag`]).
    Flags,
    /// `eth.type`.
    EthType,
    /// `vlan.tci` as Open vSwitch holds it: the outer tag's TCI (`vlan.pcp`
    /// in bits 13..16, `vlan.vid` in 0..12) with bit 12 set for "a tag is
    /// present" in place of the wire's DEI bit; 0 without a tag.
    VlanTci,
    /// `ip.proto`.
    IpProto,
    /// `ip.ttl` (IPv6's hop limit).
    IpTtl,
    /// `inport`, as a [`PortNo`].
    Inport,
    /// `outport`, as a [`PortNo`].
    Outport,
    /// `tcp.flags` (12 bits), where the ICMP type and code are for ICMP.
    TcpFlags,
    /// `icmp4.type` / `icmp6.type`.
    IcmpType,
    /// `icmp4.code` / `icmp6.code`.
    IcmpCode,
    /// `eth.src`.
    EthSrc,
    /// `tcp.src` / `udp.src` / `sctp.src`.
    L4Src,
    /// `eth.dst`.
    EthDst,
    /// `tcp.dst` / `udp.dst` / `sctp.dst`.
    L4Dst,
    /// `ip4.src` (low 32 bits) / `ip6.src`.
    IpSrc,
    /// `ip4.dst` (low 32 bits) / `ip6.dst`.
    IpDst,
    /// The IPv4 TOS byte / IPv6 traffic class: `ip.dscp` in its high six
    /// bits, `ip.ecn` in its low two.
    IpTos,
}

impl Field {
    /// Every field.
    pub const ALL: [Field; 17] = [
        Field::Flags,
        Field::EthType,
        Field::VlanTci,
        Field::IpProto,
        Field::IpTtl,
        Field::Inport,
        Field::Outport,
        Field::TcpFlags,
        Field::IcmpType,
        Field::IcmpCode,
        Field::EthSrc,
        Field::L4Src,
        Field::EthDst,
        Field::L4Dst,
        Field::IpSrc,
        Field::IpDst,
        Field::IpTos,
    ];

    /// `(word, shift, width)`: the field is bits `shift..shift + width` of
    /// word `word`; a 128-bit field takes words `word` (high half) and
    /// `word + 1` (low half) whole.
    pub const fn place(self) -> (usize, u32, u32) {
        match self {
            Field::Flags => (0, 48, 16),
            Field::EthType => (0, 32, 16),
            Field::VlanTci => (0, 16, 16),
            Field::IpProto => (0, 8, 8),
            Field::IpTtl => (0, 0, 8),
            Field::Inport => (1, 48, 16),
            Field::Outport => (1, 32, 16),
            Field::TcpFlags => (1, 0, 16),
            Field::IpTos => (1, 16, 8),
            Field::IcmpType => (1, 8, 8),
            Field::IcmpCode => (1, 0, 8),
            Field::EthSrc => (2, 16, 48),
            Field::L4Src => (2, 0, 16),
            Field::EthDst => (3, 16, 48),
            Field::L4Dst => (3, 0, 16),
            Field::IpSrc => (4, 0, 128),
            Field::IpDst => (6, 0, 128),
        }
    }

    /// Width in bits.
    pub const fn width(self) -> u32 {
        self.place().2
    }

    /// The largest value the field holds.
    pub const fn all_ones(self) -> u128 {
        let w = self.width();
        if w == 128 {
            u128::MAX
        } else {
            (1u128 << w) - 1
        }
    }
}

/// The fields of one packet (or, as a mask, the bits a rule looks at).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[repr(align(64))]
pub struct Key {
    /// The eight words.
    pub w: [u64; 8],
}

impl Key {
    /// The value of `field`.
    #[inline]
    pub fn get(&self, field: Field) -> u128 {
        let (word, shift, width) = field.place();
        if width == 128 {
            (u128::from(self.w[word]) << 64) | u128::from(self.w[word + 1])
        } else {
            u128::from((self.w[word] >> shift) & ((1u64 << width) - 1))
        }
    }

    /// Sets `field` to `value` (bits above its width are dropped).
    #[inline]
    pub fn set(&mut self, field: Field, value: u128) {
        let (word, shift, width) = field.place();
        if width == 128 {
            self.w[word] = (value >> 64) as u64;
            self.w[word + 1] = value as u64;
        } else {
            let m = ((1u64 << width) - 1) << shift;
            self.w[word] = (self.w[word] & !m) | (((value as u64) << shift) & m);
        }
    }

    /// Word-wise AND.
    #[inline]
    pub fn and(&self, mask: &Key) -> Key {
        let mut out = *self;
        for (o, m) in out.w.iter_mut().zip(mask.w.iter()) {
            *o &= m;
        }
        out
    }

    /// True when `self` under `mask` equals `value` (which must already be
    /// masked).
    #[inline]
    pub fn matches(&self, mask: &Key, value: &Key) -> bool {
        let mut diff = 0u64;
        for i in 0..8 {
            diff |= (self.w[i] & mask.w[i]) ^ value.w[i];
        }
        diff == 0
    }

    /// The prerequisite flags.
    #[inline]
    pub fn flags(&self) -> u16 {
        (self.w[0] >> 48) as u16
    }

    /// Fills a key from an Ethernet frame that entered from `inport` and
    /// goes to `outport`. A frame cut short fills what it has: fields of a
    /// layer that is missing stay 0 and their protocol flag stays clear, so
    /// no ACL that needs them matches it, but for `ip` and `ip4` or `ip6`,
    /// which an IP EtherType sets whatever follows (as Open vSwitch's
    /// flow extraction keeps a frame's EtherType). Never panics.
    pub fn from_frame(frame: &[u8], inport: PortNo, outport: PortNo) -> Key {
        match Key::from_ipv4_frame(frame, inport, outport) {
            Some(k) => k,
            None => Key::from_layers(frame, inport, outport),
        }
    }

    /// [`Key::from_frame`] by the frame's layers, for every frame.
    pub(crate) fn from_layers(frame: &[u8], inport: PortNo, outport: PortNo) -> Key {
        let mut k = Key::default();
        k.set(Field::Inport, u128::from(inport));
        k.set(Field::Outport, u128::from(outport));
        if frame.len() < 14 {
            return k;
        }
        k.set(Field::EthDst, u128::from(mac_u64(&frame[0..6])));
        k.set(Field::EthSrc, u128::from(mac_u64(&frame[6..12])));
        let layers = parse_frame(frame, LinkType::Ethernet);
        let mut flags = 0u16;
        if let Some(tag) = layers.vlans.as_slice().first() {
            flags |= flag::VLAN;
            k.set(Field::VlanTci, u128::from(tag.tci | VLAN_PRESENT));
        }
        let ty = layers.ethertype.unwrap_or(0);
        k.set(Field::EthType, u128::from(ty));
        if ty == ethertype::ARP {
            flags |= flag::ARP;
            if let Some(arp) = layers.l3.and_then(|at| frame.get(at..)) {
                arp_fields(&mut k, arp);
            }
        }
        if let Ok(ip) = layers.ip {
            flags |= flag::IP;
            let (src, dst, ttl, tos) = match ip.version {
                IpVersion::V4 => {
                    flags |= flag::IP4;
                    let h = &frame[ip.l3..];
                    (
                        u128::from(u32::from_be_bytes([h[12], h[13], h[14], h[15]])),
                        u128::from(u32::from_be_bytes([h[16], h[17], h[18], h[19]])),
                        h[8],
                        h[1],
                    )
                }
                IpVersion::V6 => {
                    flags |= flag::IP6;
                    let h = &frame[ip.l3..];
                    (
                        u128::from_be_bytes(h[8..24].try_into().unwrap_or([0; 16])),
                        u128::from_be_bytes(h[24..40].try_into().unwrap_or([0; 16])),
                        h[7],
                        (h[0] << 4) | (h[1] >> 4),
                    )
                }
            };
            k.set(Field::IpTos, u128::from(tos));
            k.set(Field::IpSrc, src);
            k.set(Field::IpDst, dst);
            k.set(Field::IpTtl, u128::from(ttl));
            k.set(Field::IpProto, u128::from(ip.proto));
            match ip.frag {
                Fragment::No => {}
                Fragment::First => flags |= flag::FRAG,
                Fragment::Later => flags |= flag::FRAG | flag::LATER_FRAG,
            }
            flags |= proto_flags(ip.version, ip.proto);
            if ip.frag != Fragment::Later {
                l4_fields(&mut k, &frame[ip.l4..ip.end], ip.version, ip.proto);
            }
        } else if let Err(bad) = layers.ip
            && bad.is_ip_ethertype()
        {
            // An IP EtherType with a header that is not usable (cut short,
            // lengths that run past the frame, a bad extension header): as
            // Open vSwitch's flow has it, `ip` and `ip4` or `ip6` but no
            // network fields (they stay 0), so that an ACL on `ip` meets
            // it as OVN's does, and a tracking policy sends it to the
            // tracker, which finds it invalid. Open vSwitch reads an IPv6
            // header's addresses once its lengths hold, before the
            // extension headers that may fail.
            if let NotIp::BadIpv4(_) = bad {
                flags |= flag::IP | flag::IP4;
            } else {
                flags |= flag::IP | flag::IP6;
                if let Some((src, dst)) = layers.l3.and_then(|at| ipv6_addresses(frame, at)) {
                    k.set(Field::IpSrc, src);
                    k.set(Field::IpDst, dst);
                }
            }
        }
        k.set(Field::Flags, u128::from(flags));
        k
    }
}

/// The source and destination addresses of the IPv6 header at `at`, where
/// its lengths hold as Open vSwitch checks them before it reads them
/// (lib/flow.c, `ipv6_sanity_check`: a whole header, a payload length
/// within the frame, at most 64 KiB of padding after it).
fn ipv6_addresses(frame: &[u8], at: usize) -> Option<(u128, u128)> {
    let h: &[u8; 40] = frame.get(at..)?.first_chunk()?;
    let plen = usize::from(u16::from_be_bytes([h[4], h[5]]));
    let size = frame.len() - at;
    if plen + 40 > size || size - (plen + 40) > usize::from(u16::MAX) {
        return None;
    }
    let word = |b: &[u8]| b.iter().fold(0u128, |v, &x| (v << 8) | u128::from(x));
    Some((word(&h[8..24]), word(&h[24..40])))
}

/// `vlan.tci`'s bit 12, set when the frame has a tag (Open vSwitch's
/// `VLAN_CFI`).
const VLAN_PRESENT: u16 = 0x1000;

/// The fields of the ARP packet `arp` (from its first byte), as Open
/// vSwitch reads them (lib/flow.c): only for Ethernet and IPv4 addresses,
/// whole; the opcode only if it is below 256 (0 otherwise).
fn arp_fields(k: &mut Key, arp: &[u8]) {
    let Some(a) = arp.get(..28) else {
        return;
    };
    if a[0..6] != [0, 1, 8, 0, 6, 4] {
        return;
    }
    let op = u16::from_be_bytes([a[6], a[7]]);
    if op <= 0xff {
        k.set(Field::L4Src, u128::from(op));
    }
    let mac = |b: &[u8]| b.iter().fold(0u128, |v, &x| (v << 8) | u128::from(x));
    k.set(Field::IpSrc, (mac(&a[8..14]) << 64) | mac(&a[14..18]));
    k.set(Field::IpDst, (mac(&a[18..24]) << 64) | mac(&a[24..28]));
}

impl Key {
    /// [`Key::from_frame`] for the common case: an untagged Ethernet II
    /// frame carrying an IPv4 datagram with a header of five words, whole
    /// and not a fragment ([`plain_ipv4`]). Its words are written at once from the frame's
    /// bytes, where the general path parses the frame's layers and sets
    /// each field in turn: 490 instructions a packet of `bench policy
    /// stateless` went there (callgrind). `None` for any other frame (the
    /// general path then decides); the same key as the general path
    /// otherwise (a test checks both on generated frames).
    #[inline]
    fn from_ipv4_frame(frame: &[u8], inport: PortNo, outport: PortNo) -> Option<Key> {
        let (h, l4) = plain_ipv4(frame)?;
        let (ttl, proto) = (h[22], h[23]);
        // (l4 flags, l4.src, l4.dst, tcp.flags, icmp type and code): the
        // fields where the header is whole (`l4_whole`, in one match here:
        // a second match after it cost 5.5 instructions a stateless
        // packet under callgrind), the flag by the protocol alone.
        let (l4_flag, sport, dport, tcp_flags, icmp) = match proto {
            ip_proto::TCP if l4_whole(l4, IpVersion::V4, proto) => (
                flag::TCP,
                be16_at(l4, 0),
                be16_at(l4, 2),
                be16_at(l4, 12) & 0x0fff,
                0,
            ),
            ip_proto::UDP if l4.len() >= 8 => (flag::UDP, be16_at(l4, 0), be16_at(l4, 2), 0, 0),
            ip_proto::SCTP if l4.len() >= 12 => (flag::SCTP, be16_at(l4, 0), be16_at(l4, 2), 0, 0),
            ip_proto::ICMP if l4.len() >= 8 => (flag::ICMP | flag::ICMP4, 0, 0, 0, be16_at(l4, 0)),
            _ => (proto_flags(IpVersion::V4, proto), 0, 0, 0, 0),
        };
        let flags = u64::from(flag::IP | flag::IP4 | l4_flag);
        let be32 = |a: [u8; 4]| u64::from(u32::from_be_bytes(a));
        Some(Key {
            w: [
                (flags << 48)
                    | (u64::from(ethertype::IPV4) << 32)
                    | (u64::from(proto) << 8)
                    | u64::from(ttl),
                (u64::from(inport) << 48)
                    | (u64::from(outport) << 32)
                    | (u64::from(h[15]) << 16)
                    | tcp_flags
                    | icmp,
                (mac_u64(&h[6..12]) << 16) | sport,
                (mac_u64(&h[0..6]) << 16) | dport,
                0,
                be32([h[26], h[27], h[28], h[29]]),
                0,
                be32([h[30], h[31], h[32], h[33]]),
            ],
        })
    }
}

/// The 16 bits at `at` of `b` (which the caller checked holds them).
#[inline(always)]
fn be16_at(b: &[u8], at: usize) -> u64 {
    match b.get(at..at + 2) {
        Some(&[x, y]) => u64::from(u16::from_be_bytes([x, y])),
        _ => 0,
    }
}

/// The protocol flags of an IP packet of `version` whose protocol (after
/// its IPv6 extension headers) is `proto`, as OVN's predicates read them
/// (lib/logical-fields.c): `tcp` is `ip.proto == 6`, `udp` 17, `sctp` 132,
/// `icmp4` `ip4 && ip.proto == 1`, `icmp6` `ip6 && ip.proto == 58`,
/// whatever follows the IP header (a transport header cut short, an IPv4
/// fragment that is not the first). Until 2026-12-01 ctrack set them only
/// where the transport header was whole, so an ACL on `tcp` missed a TCP
/// packet whose header was cut short, which OVN's meets.
fn proto_flags(version: IpVersion, proto: u8) -> u16 {
    match (proto, version) {
        (ip_proto::TCP, _) => flag::TCP,
        (ip_proto::UDP, _) => flag::UDP,
        (ip_proto::SCTP, _) => flag::SCTP,
        (ip_proto::ICMP, IpVersion::V4) => flag::ICMP | flag::ICMP4,
        (ip_proto::ICMPV6, IpVersion::V6) => flag::ICMP | flag::ICMP6,
        _ => 0,
    }
}

/// Whether the transport header of protocol `proto` (of an IP packet of
/// `version`) at the start of `l4` is whole as Open vSwitch requires
/// before it reads its fields (lib/flow.c, `miniflow_extract`): TCP 20
/// bytes and a data offset of at least that within `l4`, UDP 8, SCTP 12,
/// ICMP and ICMPv6 8. A header that is not leaves its fields 0.
fn l4_whole(l4: &[u8], version: IpVersion, proto: u8) -> bool {
    match (proto, version) {
        (ip_proto::TCP, _) => {
            let off = l4.get(12).map_or(0, |b| usize::from(b >> 4) * 4);
            l4.len() >= 20 && off >= 20 && off <= l4.len()
        }
        (ip_proto::UDP, _) => l4.len() >= 8,
        (ip_proto::SCTP, _) => l4.len() >= 12,
        (ip_proto::ICMP, IpVersion::V4) | (ip_proto::ICMPV6, IpVersion::V6) => l4.len() >= 8,
        _ => false,
    }
}

/// Fills the transport fields of the header of protocol `proto` at the
/// start of `l4`, where it is whole ([`l4_whole`]).
fn l4_fields(k: &mut Key, l4: &[u8], version: IpVersion, proto: u8) {
    if !l4_whole(l4, version, proto) {
        return;
    }
    let be16 = |at: usize| u16::from_be_bytes([l4[at], l4[at + 1]]);
    match proto {
        ip_proto::TCP => {
            k.set(Field::L4Src, u128::from(be16(0)));
            k.set(Field::L4Dst, u128::from(be16(2)));
            k.set(Field::TcpFlags, u128::from(be16(12) & 0x0fff));
        }
        ip_proto::UDP | ip_proto::SCTP => {
            k.set(Field::L4Src, u128::from(be16(0)));
            k.set(Field::L4Dst, u128::from(be16(2)));
        }
        _ => {
            k.set(Field::IcmpType, u128::from(l4[0]));
            k.set(Field::IcmpCode, u128::from(l4[1]));
        }
    }
}

/// Six bytes as a 48-bit number, first byte highest.
pub fn mac_u64(b: &[u8]) -> u64 {
    // Six bytes at once where there are six (the fold below takes a loop
    // of six steps; this is on the per-packet path of every burst).
    if let Some(m) = b.first_chunk::<6>() {
        return u64::from_be_bytes([0, 0, m[0], m[1], m[2], m[3], m[4], m[5]]);
    }
    b.iter().fold(0u64, |acc, &x| (acc << 8) | u64::from(x))
}

#[cfg(test)]
mod tests {
    use super::*;
    use ctrack_wire::build::{Frame, L4};

    #[test]
    fn a_mac_is_its_first_six_bytes_first_byte_highest() {
        let b = [0x02, 0x1b, 0x44, 0x11, 0x3a, 0xb7, 0xff, 0xee];
        assert_eq!(mac_u64(&b), 0x021b_4411_3ab7);
        assert_eq!(mac_u64(&b[..6]), 0x021b_4411_3ab7);
        // Fewer than six bytes: those there are.
        assert_eq!(mac_u64(&b[..3]), 0x021b44);
        assert_eq!(mac_u64(&[]), 0);
    }

    /// Each field reads back what was written into it, and the fields'
    /// places are disjoint but for `tcp.flags` and the ICMP type and code,
    /// which share w1's low 16 bits (a packet has one or the other).
    #[test]
    fn fields_round_trip_in_place() {
        let place = |f: Field| {
            let mut k = Key::default();
            k.set(f, f.all_ones());
            k
        };
        for (i, f) in Field::ALL.iter().enumerate() {
            let mut k = Key::default();
            let v = ((i as u128 + 1) * 0x0101_0101_0101_0101_0101_0101_0101_0101) & f.all_ones();
            k.set(*f, v);
            assert_eq!(k.get(*f), v, "{f:?}");
            assert_eq!(k.and(&place(*f)), k, "{f:?} within its place");
            for g in &Field::ALL[i + 1..] {
                let shared = matches!((f, g), (Field::TcpFlags, Field::IcmpType | Field::IcmpCode));
                let overlap = (0..8).any(|w| place(*f).w[w] & place(*g).w[w] != 0);
                assert_eq!(overlap, shared, "{f:?} and {g:?}");
            }
        }
    }

    #[test]
    fn tcp_frame_fills_its_fields() {
        let f = Frame::v4([10, 0, 0, 1], [10, 0, 0, 2], L4::tcp(1234, 80, 0x002)).build();
        let k = Key::from_frame(&f, 1, 2);
        assert_eq!(k.get(Field::Inport), 1);
        assert_eq!(k.get(Field::Outport), 2);
        assert_eq!(k.get(Field::IpSrc), 0x0a00_0001);
        assert_eq!(k.get(Field::IpDst), 0x0a00_0002);
        assert_eq!(k.get(Field::L4Src), 1234);
        assert_eq!(k.get(Field::L4Dst), 80);
        assert_eq!(k.get(Field::TcpFlags), 0x002);
        assert_eq!(k.get(Field::IpProto), 6);
        assert_eq!(k.flags(), flag::IP | flag::IP4 | flag::TCP);
    }

    #[test]
    fn short_frames_fill_what_they_have() {
        for n in 0..80 {
            let f = Frame::v4([10, 0, 0, 1], [10, 0, 0, 2], L4::tcp(1, 2, 0x002)).build();
            let k = Key::from_frame(&f[..n.min(f.len())], 0, 0);
            // Cut inside the IP datagram: `ip` and `ip4`, and nothing of
            // the network layer, as Open vSwitch's flow has it.
            let want = match n {
                ..14 => 0,
                14..54 => flag::IP | flag::IP4,
                _ => flag::IP | flag::IP4 | flag::TCP,
            };
            assert_eq!(k.flags(), want, "{n}");
            if (14..54).contains(&n) {
                assert_eq!((k.get(Field::IpSrc), k.get(Field::IpProto)), (0, 0));
                assert_eq!(k.get(Field::EthType), 0x0800);
            }
        }
    }

    /// An IPv6 header whose lengths hold but whose extension header is
    /// malformed keeps its addresses (Open vSwitch reads them before the
    /// extension headers), not its protocol; one whose payload length runs
    /// past the frame keeps neither.
    #[test]
    fn a_bad_ipv6_header_keeps_what_open_vswitch_reads() {
        let (a, b) = ("fd00::1".parse().unwrap(), "fd00::2".parse().unwrap());
        let mut f = Frame::v6(a, b, L4::udp(1, 2, b"x"));
        f.ext = vec![ctrack_wire::build::Ext::HopByHop(0)];
        let mut bytes = f.build();
        // The hop-by-hop header's length runs past the datagram.
        bytes[14 + 40 + 1] = 200;
        let k = Key::from_frame(&bytes, 0, 0);
        assert_eq!(k.flags(), flag::IP | flag::IP6);
        assert_eq!(k.get(Field::IpSrc), u128::from(a));
        assert_eq!(k.get(Field::IpDst), u128::from(b));
        assert_eq!(k.get(Field::IpProto), 0);
        // A payload length past the frame, by a little or by much, or more
        // than 64 KiB of padding after the datagram: no addresses, as
        // Open vSwitch's `ipv6_sanity_check` has it.
        let whole = Frame::v6(a, b, L4::udp(1, 2, b"x")).build();
        let plen = u16::from_be_bytes([whole[18], whole[19]]);
        for (past, padding) in [(8, 0), (0xff00, 0), (0, 70_000)] {
            let mut bytes = whole.clone();
            bytes[18..20].copy_from_slice(&(plen + past).to_be_bytes());
            if padding > 0 {
                // A bad hop-by-hop header, then the padding.
                let mut f = Frame::v6(a, b, L4::udp(1, 2, b"x"));
                f.ext = vec![ctrack_wire::build::Ext::HopByHop(0)];
                bytes = f.build();
                bytes[14 + 40 + 1] = 200;
                bytes.resize(bytes.len() + padding, 0);
            }
            let k = Key::from_frame(&bytes, 0, 0);
            assert_eq!(k.flags(), flag::IP | flag::IP6, "{past} {padding}");
            assert_eq!(
                (k.get(Field::IpSrc), k.get(Field::IpDst)),
                (0, 0),
                "{past} {padding} {}",
                bytes.len()
            );
        }
    }

    /// The common case's shortcut answers what it is for: a plain IPv4
    /// TCP, UDP or ICMP frame.
    #[test]
    fn the_ipv4_shortcut_takes_plain_frames() {
        for l4 in [
            L4::tcp(1, 2, 0x010),
            L4::udp(3, 4, b"abc"),
            L4::icmp_query(8, 1, 2),
        ] {
            let f = Frame::v4([10, 0, 0, 1], [10, 0, 0, 2], l4).build();
            let k = Key::from_ipv4_frame(&f, 3, 4).expect("the shortcut's case");
            assert_eq!(k, Key::from_layers(&f, 3, 4));
        }
        let tagged = Frame::v4([10, 0, 0, 1], [10, 0, 0, 2], L4::tcp(1, 2, 0x002)).vlan(0x8100, 7);
        assert!(Key::from_ipv4_frame(&tagged.build(), 0, 0).is_none());
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(20_000))]

        /// `from_frame` (the IPv4 shortcut first) and the general path give
        /// the same key for frames of every IPv4 protocol, fragments and
        /// IP options included, with a byte changed (lengths, flags, the
        /// version, the EtherType) or the frame cut short.
        #[test]
        fn the_ipv4_shortcut_agrees_with_the_layers(
            proto in 0u8..5,
            sport: u16,
            dport: u16,
            tcp_flags: u16,
            payload in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..40),
            ttl: u8,
            more_frags: bool,
            frag_offset in proptest::prop_oneof![3 => proptest::strategy::Just(0u16), 1 => proptest::strategy::Strategy::prop_map(0u16..64, |o| o * 8)],
            options in 0usize..3,
            flip in proptest::option::of((0usize..80, 1u8..=255)),
            cut in proptest::option::of(0usize..100),
            inport: u16,
            outport: u16,
        ) {
            let l4 = match proto {
                0 => L4::tcp(sport, dport, tcp_flags),
                1 => L4::udp(sport, dport, &payload),
                2 => L4::icmp_query(sport as u8, dport, 1),
                3 => L4::Sctp { sport, dport, vtag: 1, chunks: payload.clone() },
                _ => L4::Raw { proto: (tcp_flags >> 8) as u8, payload: payload.clone() },
            };
            let mut frame = Frame::v4([10, 0, 0, 1], [192, 168, 7, 9], l4);
            frame.ttl = ttl;
            frame.more_frags = more_frags;
            frame.frag_offset = frag_offset;
            frame.ip_options = vec![1; options * 4];
            let mut f = frame.build();
            if let Some((at, x)) = flip && !f.is_empty() {
                let at = at % f.len();
                f[at] ^= x;
            }
            if let Some(c) = cut {
                f.truncate(c % (f.len() + 1));
            }
            proptest::prop_assert_eq!(Key::from_frame(&f, inport, outport), Key::from_layers(&f, inport, outport));
        }
    }
}
