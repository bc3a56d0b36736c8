//! The symbols a match may name: OVN's fields and predicates that ctrack's
//! [`Key`](crate::key::Key) holds, with OVN's widths, levels of
//! measurement and prerequisites (lib/logical-fields.c), the
//! prerequisites already reduced to the key's [`flag`] bits.

use crate::expr::Expr;
use crate::key::{Field, flag};

/// OVN's level of measurement: what may be asked of a symbol.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Level {
    /// Any relation, `!=` and `!` included (maskable fields).
    Ordinal,
    /// Only equality, in the positive sense once enclosing `!` are
    /// counted (fields OpenFlow cannot mask; predicates over them).
    Nominal,
    /// A one-bit predicate over ordinal fields: either sense.
    Boolean,
}

/// A predicate's expansion.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Pred {
    /// These flags all set.
    Flags(u16),
    /// `ip.is_frag && !ip.later_frag`.
    FirstFrag,
    /// ICMPv6 with one of these types, code 0 and hop limit 255 (`nd`,
    /// `nd_ns`...).
    Nd(&'static [u8]),
    /// MLDv1 (`false`) or MLDv2 (`true`).
    Mld(bool),
    /// `eth.bcast`: `eth.dst == ff:ff:ff:ff:ff:ff`.
    EthBcast,
    /// `eth.mcast`: `eth.dst[40]`, the group bit.
    EthMcast,
    /// `eth.mcastv6`: `eth.dst[32..47] == 0x3333`.
    EthMcastV6,
    /// `ip4.src_mcast`: `ip4.src[28..31] == 0xe`.
    Ip4SrcMcast,
    /// `ip4.mcast`: `eth.mcast && ip4.dst[28..31] == 0xe`.
    Ip4Mcast,
    /// `igmp`: `ip4.mcast && ip.proto == 2`.
    Igmp,
    /// One of the IPv6 multicast predicates.
    Ip6(Mcast6),
    /// `nd_ns_mcast`: `ip6.mcast && nd_ns`.
    NdNsMcast,
}

/// OVN's IPv6 multicast predicates (RFC 4291, 2.7 and 2.7.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mcast6 {
    /// `ip6.mcast`: `eth.mcastv6 && ip6.dst[120..127] == 0xff`.
    Any,
    /// `ip6.mcast_rsvd`: `ip6.dst == {ff00::0, ff01::0, ..., ff0f::0}`.
    Rsvd,
    /// `ip6.mcast_all_nodes`: `ip6.dst == {ff01::1, ff02::1}`.
    AllNodes,
    /// `ip6.mcast_all_rtrs`: `ip6.dst == {ff01::2, ff02::2, ff05::2}`.
    AllRtrs,
    /// `ip6.mcast_sol_node`: `ip6.dst == ff02::1:ff00:0/104`.
    SolNode,
    /// `ip6.mcast_flood`: `eth.mcastv6` and one of the four above.
    Flood,
}

/// What a symbol is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A field of the key, with the flags its prerequisites come to.
    Field { field: Field, prereq: u16 },
    /// `inport` or `outport`: compared with port names.
    Port(Field),
    /// A predicate.
    Pred(Pred),
}

/// A symbol of the match language.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Symbol {
    pub(crate) name: &'static str,
    pub(crate) kind: Kind,
    /// Width in bits (0 for the string fields, 1 for predicates).
    pub(crate) width: u32,
    /// A field's lowest bit in its key field (`vlan.pcp` is bits 13..16
    /// of the key's `vlan.tci`).
    pub(crate) shift: u32,
    /// A field whose bits are the only ones its key field may have set
    /// where its prerequisites hold (`ip4.src`, whose key field is 0
    /// above it for IPv4): an ordered relation on it is a range of the
    /// key field. Not so `vlan.vid` (`vlan.pcp` shares its key field) or
    /// `arp.spa` (`arp.sha` does).
    pub(crate) alone: bool,
    pub(crate) level: Level,
}

impl Symbol {
    /// The family of addresses the symbol holds: `Some(false)` for IPv4,
    /// `Some(true)` for IPv6, `None` for anything else.
    pub(crate) fn ip_family(&self) -> Option<bool> {
        match self.kind {
            Kind::Field {
                field: Field::IpSrc | Field::IpDst,
                ..
            } if self.shift == 0 && matches!(self.width, 32 | 128) => Some(self.width == 128),
            _ => None,
        }
    }
}

const ICMP4: u16 = flag::IP | flag::IP4 | flag::ICMP | flag::ICMP4;
const ICMP6: u16 = flag::IP | flag::IP6 | flag::ICMP | flag::ICMP6;

const fn field(name: &'static str, field: Field, width: u32, prereq: u16, level: Level) -> Symbol {
    Symbol {
        name,
        kind: Kind::Field { field, prereq },
        width,
        shift: 0,
        alone: true,
        level,
    }
}

/// An ordinal field of `width` bits at bit `shift` of the key field
/// `field`, which holds other bits too.
const fn part(name: &'static str, field: Field, shift: u32, width: u32, prereq: u16) -> Symbol {
    Symbol {
        name,
        kind: Kind::Field { field, prereq },
        width,
        shift,
        alone: false,
        level: Level::Ordinal,
    }
}

/// [`part`], nominal: a field Open vSwitch cannot mask (so OVN's level of
/// it is nominal) that shares its key field with another.
const fn nominal_part(
    name: &'static str,
    field: Field,
    shift: u32,
    width: u32,
    prereq: u16,
) -> Symbol {
    Symbol {
        level: Level::Nominal,
        ..part(name, field, shift, width, prereq)
    }
}

const fn pred(name: &'static str, p: Pred, level: Level) -> Symbol {
    Symbol {
        name,
        kind: Kind::Pred(p),
        width: 1,
        shift: 0,
        alone: true,
        level,
    }
}

const fn port(name: &'static str, f: Field) -> Symbol {
    Symbol {
        name,
        kind: Kind::Port(f),
        width: 0,
        shift: 0,
        alone: true,
        level: Level::Nominal,
    }
}

use Level::{Boolean, Nominal, Ordinal};

/// Every symbol.
pub(crate) const SYMBOLS: &[Symbol] = &[
    port("inport", Field::Inport),
    port("outport", Field::Outport),
    field("eth.src", Field::EthSrc, 48, 0, Ordinal),
    field("eth.dst", Field::EthDst, 48, 0, Ordinal),
    field("eth.type", Field::EthType, 16, 0, Nominal),
    field("vlan.tci", Field::VlanTci, 16, 0, Ordinal),
    part("vlan.vid", Field::VlanTci, 0, 12, flag::VLAN),
    part("vlan.pcp", Field::VlanTci, 13, 3, flag::VLAN),
    pred("vlan.present", Pred::Flags(flag::VLAN), Boolean),
    pred("arp", Pred::Flags(flag::ARP), Nominal),
    pred("ip", Pred::Flags(flag::IP), Nominal),
    pred("ip4", Pred::Flags(flag::IP | flag::IP4), Nominal),
    pred("ip6", Pred::Flags(flag::IP | flag::IP6), Nominal),
    field("ip.proto", Field::IpProto, 8, flag::IP, Nominal),
    field("ip.ttl", Field::IpTtl, 8, flag::IP, Nominal),
    // Open vSwitch cannot mask `ip_dscp`, `nw_ecn` or `arp_op`
    // (meta-flow.h: "Maskable: no."), so OVN's level of each is nominal.
    nominal_part("ip.dscp", Field::IpTos, 2, 6, flag::IP),
    nominal_part("ip.ecn", Field::IpTos, 0, 2, flag::IP),
    pred("ip.is_frag", Pred::Flags(flag::IP | flag::FRAG), Boolean),
    pred(
        "ip.later_frag",
        Pred::Flags(flag::IP | flag::LATER_FRAG),
        Boolean,
    ),
    pred("ip.first_frag", Pred::FirstFrag, Boolean),
    field("arp.op", Field::L4Src, 16, flag::ARP, Nominal),
    part("arp.spa", Field::IpSrc, 0, 32, flag::ARP),
    part("arp.tpa", Field::IpDst, 0, 32, flag::ARP),
    part("arp.sha", Field::IpSrc, 64, 48, flag::ARP),
    part("arp.tha", Field::IpDst, 64, 48, flag::ARP),
    field("ip4.src", Field::IpSrc, 32, flag::IP | flag::IP4, Ordinal),
    field("ip4.dst", Field::IpDst, 32, flag::IP | flag::IP4, Ordinal),
    field("ip6.src", Field::IpSrc, 128, flag::IP | flag::IP6, Ordinal),
    field("ip6.dst", Field::IpDst, 128, flag::IP | flag::IP6, Ordinal),
    pred("tcp", Pred::Flags(flag::IP | flag::TCP), Nominal),
    field("tcp.src", Field::L4Src, 16, flag::IP | flag::TCP, Ordinal),
    field("tcp.dst", Field::L4Dst, 16, flag::IP | flag::TCP, Ordinal),
    field(
        "tcp.flags",
        Field::TcpFlags,
        16,
        flag::IP | flag::TCP,
        Ordinal,
    ),
    pred("udp", Pred::Flags(flag::IP | flag::UDP), Nominal),
    field("udp.src", Field::L4Src, 16, flag::IP | flag::UDP, Ordinal),
    field("udp.dst", Field::L4Dst, 16, flag::IP | flag::UDP, Ordinal),
    pred("sctp", Pred::Flags(flag::IP | flag::SCTP), Nominal),
    field("sctp.src", Field::L4Src, 16, flag::IP | flag::SCTP, Ordinal),
    field("sctp.dst", Field::L4Dst, 16, flag::IP | flag::SCTP, Ordinal),
    pred("icmp", Pred::Flags(flag::IP | flag::ICMP), Nominal),
    pred("icmp4", Pred::Flags(ICMP4), Nominal),
    field("icmp4.type", Field::IcmpType, 8, ICMP4, Nominal),
    field("icmp4.code", Field::IcmpCode, 8, ICMP4, Nominal),
    pred("icmp6", Pred::Flags(ICMP6), Nominal),
    field("icmp6.type", Field::IcmpType, 8, ICMP6, Nominal),
    field("icmp6.code", Field::IcmpCode, 8, ICMP6, Nominal),
    pred("nd", Pred::Nd(&[135, 136]), Nominal),
    pred("nd_ns", Pred::Nd(&[135]), Nominal),
    pred("nd_na", Pred::Nd(&[136]), Nominal),
    pred("nd_rs", Pred::Nd(&[133]), Nominal),
    pred("nd_ra", Pred::Nd(&[134]), Nominal),
    pred("mldv1", Pred::Mld(false), Nominal),
    pred("mldv2", Pred::Mld(true), Nominal),
    pred("eth.bcast", Pred::EthBcast, Boolean),
    pred("eth.mcast", Pred::EthMcast, Boolean),
    pred("eth.mcastv6", Pred::EthMcastV6, Boolean),
    pred("ip4.src_mcast", Pred::Ip4SrcMcast, Boolean),
    pred("ip4.mcast", Pred::Ip4Mcast, Boolean),
    pred("igmp", Pred::Igmp, Nominal),
    pred("ip6.mcast", Pred::Ip6(Mcast6::Any), Boolean),
    pred("ip6.mcast_rsvd", Pred::Ip6(Mcast6::Rsvd), Boolean),
    pred("ip6.mcast_all_nodes", Pred::Ip6(Mcast6::AllNodes), Boolean),
    pred("ip6.mcast_all_rtrs", Pred::Ip6(Mcast6::AllRtrs), Boolean),
    pred("ip6.mcast_sol_node", Pred::Ip6(Mcast6::SolNode), Boolean),
    pred("ip6.mcast_flood", Pred::Ip6(Mcast6::Flood), Boolean),
    pred("nd_ns_mcast", Pred::NdNsMcast, Nominal),
];

/// The symbol called `name`.
pub(crate) fn lookup(name: &str) -> Option<&'static Symbol> {
    SYMBOLS.iter().find(|s| s.name == name)
}

/// The names of every symbol, for messages.
pub(crate) fn names() -> String {
    SYMBOLS.iter().map(|s| s.name).collect::<Vec<_>>().join(" ")
}

/// `eth.mcastv6`: `eth.dst[32..47] == 0x3333`.
fn eth_mcastv6() -> Expr {
    Expr::masked(Field::EthDst, 0x3333 << 32, 0xffff << 32)
}

/// `eth.mcast`: the group bit of the destination MAC.
fn eth_mcast() -> Expr {
    Expr::masked(Field::EthDst, 1 << 40, 1 << 40)
}

/// `ip4.mcast`, its prerequisite included.
fn ip4_mcast() -> Expr {
    Expr::And(vec![
        eth_mcast(),
        Expr::flags(flag::IP | flag::IP4),
        // ip4.dst[28..31] == 0xe
        Expr::masked(Field::IpDst, 0xe << 28, 0xf << 28),
    ])
}

/// `ip6.dst == a` for each address `a`, given as its first and last
/// sixteen bits (`ff02::1` is `(0xff02, 1)`).
fn ip6_dsts(addrs: &[(u16, u16)]) -> Expr {
    let v: Vec<Expr> = addrs
        .iter()
        .map(|&(hi, lo)| Expr::eq(Field::IpDst, (u128::from(hi) << 112) | u128::from(lo)))
        .collect();
    Expr::Or(v)
}

impl Mcast6 {
    /// The destination test alone (its prerequisite `ip6` apart).
    fn dst(self) -> Expr {
        match self {
            // ip6.dst[120..127] == 0xff
            Mcast6::Any => Expr::masked(Field::IpDst, 0xff << 120, 0xff << 120),
            // ff00::0 to ff0f::0: every bit but the scope's four is
            // compared, all zero but the leading 0xff.
            Mcast6::Rsvd => Expr::masked(Field::IpDst, 0xff00 << 112, !(0xf << 112)),
            Mcast6::AllNodes => ip6_dsts(&[(0xff01, 1), (0xff02, 1)]),
            Mcast6::AllRtrs => ip6_dsts(&[(0xff01, 2), (0xff02, 2), (0xff05, 2)]),
            // ff02::1:ff00:0/104
            Mcast6::SolNode => Expr::masked(
                Field::IpDst,
                (0xff02 << 112) | (0x1_ff00_0000),
                u128::MAX << 24,
            ),
            Mcast6::Flood => Expr::Or(vec![
                Mcast6::Rsvd.dst(),
                Mcast6::AllNodes.dst(),
                Mcast6::AllRtrs.dst(),
                Mcast6::SolNode.dst(),
            ]),
        }
    }

    /// The predicate's expansion, prerequisites included.
    fn expr(self) -> Expr {
        let ip6 = Expr::flags(flag::IP | flag::IP6);
        match self {
            Mcast6::Any | Mcast6::Flood => Expr::And(vec![eth_mcastv6(), ip6, self.dst()]),
            _ => Expr::And(vec![ip6, self.dst()]),
        }
    }
}

fn icmp_types(types: &[u8]) -> Expr {
    let mut v: Vec<Expr> = types
        .iter()
        .map(|t| Expr::eq(Field::IcmpType, u128::from(*t)))
        .collect();
    if v.len() == 1 {
        v.pop().unwrap_or(Expr::False)
    } else {
        Expr::Or(v)
    }
}

impl Pred {
    /// The predicate's expansion, prerequisites included.
    pub(crate) fn expr(self) -> Expr {
        match self {
            Pred::Flags(bits) => Expr::flags(bits),
            Pred::FirstFrag => Expr::And(vec![
                Expr::flags(flag::IP | flag::FRAG),
                Expr::Not(Box::new(Expr::flags(flag::IP | flag::LATER_FRAG))),
            ]),
            Pred::Nd(types) => Expr::And(vec![
                Expr::flags(ICMP6),
                icmp_types(types),
                Expr::eq(Field::IcmpCode, 0),
                Expr::eq(Field::IpTtl, 255),
            ]),
            Pred::Mld(false) => Expr::And(vec![
                Expr::flags(ICMP6),
                eth_mcastv6(),
                // ip6.src == fe80::/10
                Expr::masked(Field::IpSrc, 0xfe80 << 112, 0xffc0 << 112),
                icmp_types(&[130, 131, 132]),
            ]),
            Pred::Mld(true) => Expr::And(vec![
                Expr::flags(ICMP6),
                eth_mcastv6(),
                // ip6.dst == ff02::16
                Expr::eq(Field::IpDst, (0xff02 << 112) | 0x16),
                icmp_types(&[143]),
            ]),
            Pred::EthBcast => Expr::eq(Field::EthDst, 0xffff_ffff_ffff),
            Pred::EthMcast => eth_mcast(),
            Pred::EthMcastV6 => eth_mcastv6(),
            Pred::Ip4SrcMcast => Expr::And(vec![
                Expr::flags(flag::IP | flag::IP4),
                // ip4.src[28..31] == 0xe
                Expr::masked(Field::IpSrc, 0xe << 28, 0xf << 28),
            ]),
            Pred::Ip4Mcast => ip4_mcast(),
            Pred::Igmp => Expr::And(vec![ip4_mcast(), Expr::eq(Field::IpProto, 2)]),
            Pred::Ip6(m) => m.expr(),
            Pred::NdNsMcast => Expr::And(vec![Mcast6::Any.expr(), Pred::Nd(&[135]).expr()]),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The fields an address set may be compared with, and the family of
    /// its members each takes: the IP addresses (and ARP's, which are
    /// IPv4 ones), not ARP's hardware addresses beside them in the same
    /// key fields.
    #[test]
    fn address_sets_go_with_the_ip_address_fields() {
        let family = |name| lookup(name).expect(name).ip_family();
        for name in ["ip4.src", "ip4.dst", "arp.spa", "arp.tpa"] {
            assert_eq!(family(name), Some(false), "{name}");
        }
        for name in ["ip6.src", "ip6.dst"] {
            assert_eq!(family(name), Some(true), "{name}");
        }
        for name in ["arp.sha", "arp.tha", "eth.src", "tcp.dst", "ip4", "inport"] {
            assert_eq!(family(name), None, "{name}");
        }
    }

    /// The list an unknown field's message offers: every symbol, once,
    /// in the table's order.
    #[test]
    fn names_lists_every_symbol() {
        let listed: Vec<_> = names().split(' ').map(str::to_owned).collect();
        let all: Vec<_> = SYMBOLS.iter().map(|s| s.name.to_owned()).collect();
        assert_eq!(listed, all);
        assert!(listed.iter().any(|n| n == "tcp.dst") && listed.len() > 60);
    }

    /// Whether the predicate `name` holds for an IPv6 packet to `dst`
    /// sent to the destination MAC `mac`.
    fn holds(name: &str, mac: u64, dst: &str) -> bool {
        let Kind::Pred(p) = lookup(name).expect(name).kind else {
            panic!("{name} is not a predicate");
        };
        let mut k = crate::key::Key::default();
        k.set(Field::Flags, u128::from(flag::IP | flag::IP6 | flag::UDP));
        k.set(Field::EthDst, u128::from(mac));
        let dst: std::net::Ipv6Addr = dst.parse().unwrap();
        k.set(Field::IpDst, u128::from(dst));
        p.expr().eval(&k)
    }

    /// OVN's IPv6 multicast predicates (ovn-sb(5)): `ip6.mcast` and
    /// `ip6.mcast_flood` need the multicast MAC (`eth.mcastv6`) too, the
    /// others only the address; `ip6.mcast_rsvd` is ff00:: to ff0f::,
    /// any scope.
    #[test]
    fn ipv6_multicast_predicates_are_ovns() {
        let (group, unicast) = (0x3333_0000_0001, 0x0200_0000_0001);
        assert!(holds("ip6.mcast", group, "ff02::1"));
        assert!(!holds("ip6.mcast", unicast, "ff02::1"));
        assert!(!holds("ip6.mcast", group, "fe80::1"));
        assert!(holds("ip6.mcast_flood", group, "ff02::2"));
        assert!(!holds("ip6.mcast_flood", unicast, "ff02::2"));
        assert!(holds("ip6.mcast_all_nodes", unicast, "ff02::1"));
        for scope in ["ff00::", "ff02::", "ff0f::"] {
            assert!(holds("ip6.mcast_rsvd", unicast, scope), "{scope}");
        }
        assert!(!holds("ip6.mcast_rsvd", unicast, "ff02::1"));
        assert!(!holds("ip6.mcast_rsvd", unicast, "ff12::"));
        assert!(holds("ip6.mcast_sol_node", unicast, "ff02::1:ff00:1234"));
        assert!(!holds("ip6.mcast_sol_node", unicast, "ff02::1:fe00:1234"));
    }
}
