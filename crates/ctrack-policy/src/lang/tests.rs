//! The parser and resolver: every field, operator, prerequisite and error.

use std::collections::BTreeMap;
use std::net::IpAddr;

use super::{Context, LangError, parse};
use crate::expr::Expr;
use crate::key::{Field, flag};
use crate::model::{Policy, Port, Prefix};

/// Three ports (vm1, vm2, vm3), a mixed address set, a port group.
pub(super) fn policy() -> Policy {
    let port = |name: &str, mac: u8, ips: &[&str]| Port {
        name: name.into(),
        macs: vec![[2, 0, 0, 0, 0, mac]],
        ips: ips.iter().map(|s| s.parse().unwrap()).collect(),
        zone: u16::from(mac),
        security: Vec::new(),
        disabled: false,
    };
    let mut p = Policy {
        ports: vec![
            port("vm1", 1, &["10.0.0.1", "fd00::1"]),
            port("vm2", 2, &["10.0.0.2"]),
            port("vm3", 3, &[]),
        ],
        ..Policy::default()
    };
    let pre = |s: &str, len| Prefix {
        addr: s.parse::<IpAddr>().unwrap(),
        len,
    };
    p.address_sets = BTreeMap::from([
        (
            "clients".to_string(),
            vec![pre("10.0.0.0", 24), pre("192.0.2.7", 32), pre("fd00::", 64)],
        ),
        ("empty".to_string(), vec![]),
    ]);
    p.port_groups = BTreeMap::from([
        ("web".to_string(), vec![0, 1]),
        ("none".to_string(), vec![]),
    ]);
    p
}

fn ok(s: &str) -> Expr {
    parse(s, &policy()).unwrap_or_else(|e| panic!("{s}: {e}"))
}

fn bad(s: &str) -> LangError {
    match parse(s, &policy()) {
        Ok(e) => panic!("{s} parsed: {e:?}"),
        Err(e) => e,
    }
}

fn and(prereq: u16, e: Expr) -> Expr {
    Expr::And(vec![Expr::flags(prereq), e])
}

const TCP: u16 = flag::IP | flag::TCP;

#[test]
fn fields_resolve_with_their_prerequisites() {
    let cases: &[(&str, Expr)] = &[
        ("inport == \"vm1\"", Expr::eq(Field::Inport, 1)),
        ("outport == \"vm3\"", Expr::eq(Field::Outport, 3)),
        (
            "eth.src == 02:00:00:00:00:01",
            Expr::eq(Field::EthSrc, 0x0200_0000_0001),
        ),
        (
            "eth.dst == ff:ff:ff:ff:ff:ff",
            Expr::eq(Field::EthDst, 0xffff_ffff_ffff),
        ),
        ("eth.type == 0x800", Expr::eq(Field::EthType, 0x800)),
        (
            "vlan.vid == 10",
            and(flag::VLAN, Expr::masked(Field::VlanTci, 10, 0xfff)),
        ),
        ("ip.proto == 6", and(flag::IP, Expr::eq(Field::IpProto, 6))),
        ("ip.ttl == 1", and(flag::IP, Expr::eq(Field::IpTtl, 1))),
        (
            "ip4.src == 10.0.0.1",
            and(
                flag::IP | flag::IP4,
                Expr::masked(Field::IpSrc, 0x0a00_0001, 0xffff_ffff),
            ),
        ),
        (
            "ip4.dst == 10.0.0.0/8",
            and(
                flag::IP | flag::IP4,
                Expr::masked(Field::IpDst, 0x0a00_0000, 0xff00_0000),
            ),
        ),
        (
            "ip6.src == fd00::1",
            and(
                flag::IP | flag::IP6,
                Expr::eq(Field::IpSrc, (0xfd00 << 112) | 1),
            ),
        ),
        (
            "ip6.dst == fd00::/16",
            and(
                flag::IP | flag::IP6,
                Expr::masked(Field::IpDst, 0xfd00 << 112, 0xffff << 112),
            ),
        ),
        ("tcp.src == 1", and(TCP, Expr::eq(Field::L4Src, 1))),
        ("tcp.dst == 80", and(TCP, Expr::eq(Field::L4Dst, 80))),
        (
            "tcp.flags == 0x2/0x2",
            and(TCP, Expr::masked(Field::TcpFlags, 2, 2)),
        ),
        (
            "udp.src == 53",
            and(flag::IP | flag::UDP, Expr::eq(Field::L4Src, 53)),
        ),
        (
            "udp.dst == 53",
            and(flag::IP | flag::UDP, Expr::eq(Field::L4Dst, 53)),
        ),
        (
            "sctp.src == 9",
            and(flag::IP | flag::SCTP, Expr::eq(Field::L4Src, 9)),
        ),
        (
            "sctp.dst == 9",
            and(flag::IP | flag::SCTP, Expr::eq(Field::L4Dst, 9)),
        ),
        (
            "icmp4.type == 8",
            and(
                flag::IP | flag::IP4 | flag::ICMP | flag::ICMP4,
                Expr::eq(Field::IcmpType, 8),
            ),
        ),
        (
            "icmp4.code == 0",
            and(
                flag::IP | flag::IP4 | flag::ICMP | flag::ICMP4,
                Expr::eq(Field::IcmpCode, 0),
            ),
        ),
        (
            "icmp6.type == 128",
            and(
                flag::IP | flag::IP6 | flag::ICMP | flag::ICMP6,
                Expr::eq(Field::IcmpType, 128),
            ),
        ),
        (
            "icmp6.code == 0",
            and(
                flag::IP | flag::IP6 | flag::ICMP | flag::ICMP6,
                Expr::eq(Field::IcmpCode, 0),
            ),
        ),
    ];
    for (s, want) in cases {
        assert_eq!(&ok(s), want, "{s}");
    }
}

#[test]
fn predicates_resolve_to_flags() {
    let cases: &[(&str, Expr)] = &[
        ("ip", Expr::flags(flag::IP)),
        ("ip4", Expr::flags(flag::IP | flag::IP4)),
        ("ip6", Expr::flags(flag::IP | flag::IP6)),
        ("tcp", Expr::flags(TCP)),
        ("udp", Expr::flags(flag::IP | flag::UDP)),
        ("sctp", Expr::flags(flag::IP | flag::SCTP)),
        ("icmp", Expr::flags(flag::IP | flag::ICMP)),
        (
            "icmp4",
            Expr::flags(flag::IP | flag::IP4 | flag::ICMP | flag::ICMP4),
        ),
        (
            "icmp6",
            Expr::flags(flag::IP | flag::IP6 | flag::ICMP | flag::ICMP6),
        ),
        ("arp", Expr::flags(flag::ARP)),
        ("vlan.present", Expr::flags(flag::VLAN)),
        ("ip.is_frag", Expr::flags(flag::IP | flag::FRAG)),
        ("ip.later_frag", Expr::flags(flag::IP | flag::LATER_FRAG)),
        ("tcp == 1", Expr::flags(TCP)),
        ("1", Expr::True),
        ("0", Expr::False),
        ("(1)", Expr::True),
    ];
    for (s, want) in cases {
        assert_eq!(&ok(s), want, "{s}");
    }
}

#[test]
fn nd_is_ovns_definition() {
    let e = ok("nd");
    let want = Expr::And(vec![
        Expr::flags(flag::IP | flag::IP6 | flag::ICMP | flag::ICMP6),
        Expr::Or(vec![
            Expr::eq(Field::IcmpType, 135),
            Expr::eq(Field::IcmpType, 136),
        ]),
        Expr::eq(Field::IcmpCode, 0),
        Expr::eq(Field::IpTtl, 255),
    ]);
    assert_eq!(e, want);
    for s in [
        "nd_ns",
        "nd_na",
        "nd_rs",
        "nd_ra",
        "mldv1",
        "mldv2",
        "ip.first_frag",
    ] {
        ok(s);
    }
}

#[test]
fn operators() {
    let r = |lo, hi| {
        and(
            TCP,
            Expr::Range {
                field: Field::L4Dst,
                lo,
                hi,
            },
        )
    };
    assert_eq!(ok("tcp.dst < 1024"), r(0, 1023));
    assert_eq!(ok("tcp.dst <= 1024"), r(0, 1024));
    assert_eq!(ok("tcp.dst > 1024"), r(1025, 65535));
    assert_eq!(ok("tcp.dst >= 1024"), r(1024, 65535));
    assert_eq!(ok("1024 <= tcp.dst"), r(1024, 65535));
    assert_eq!(ok("80 == tcp.dst"), and(TCP, Expr::eq(Field::L4Dst, 80)));
    assert_eq!(ok("tcp.dst < 0"), Expr::False);
    assert_eq!(ok("tcp.dst > 65535"), Expr::False);
    assert_eq!(
        ok("1024 <= tcp.src <= 49151"),
        Expr::And(vec![
            and(
                TCP,
                Expr::Range {
                    field: Field::L4Src,
                    lo: 1024,
                    hi: 65535
                }
            ),
            and(
                TCP,
                Expr::Range {
                    field: Field::L4Src,
                    lo: 0,
                    hi: 49151
                }
            ),
        ])
    );
    assert_eq!(
        ok("tcp.dst != 80"),
        and(TCP, Expr::Not(Box::new(Expr::eq(Field::L4Dst, 80))))
    );
    let d = |v| Expr::eq(Field::L4Dst, v);
    assert_eq!(
        ok("tcp.dst == {80, 443}"),
        and(TCP, Expr::Or(vec![d(80), d(443)]))
    );
    assert_eq!(ok("tcp.dst == {80 443,}"), ok("tcp.dst == {80, 443}"));
    assert_eq!(
        ok("tcp.dst != {80, 443}"),
        and(
            TCP,
            Expr::And(vec![
                Expr::Not(Box::new(d(80))),
                Expr::Not(Box::new(d(443)))
            ])
        )
    );
    assert_eq!(
        ok("tcp.dst == 0x10/0x1f"),
        and(TCP, Expr::masked(Field::L4Dst, 0x10, 0x1f))
    );
    assert_eq!(
        ok("ip4.src == 1.2.3.4/255.255.0.0"),
        and(
            flag::IP | flag::IP4,
            Expr::masked(Field::IpSrc, 0x0102_0000, 0xffff_0000)
        )
    );
    assert_eq!(
        ok("ip4.src < 10.0.0.5"),
        and(
            flag::IP | flag::IP4,
            Expr::Range {
                field: Field::IpSrc,
                lo: 0,
                hi: 0x0a00_0004
            }
        )
    );
    assert_eq!(
        ok("tcp.dst == 0/0x0"),
        and(TCP, Expr::masked(Field::L4Dst, 0, 0))
    );
    assert_eq!(
        ok("vlan.present == 0"),
        Expr::Not(Box::new(Expr::flags(flag::VLAN)))
    );
    assert_eq!(
        ok("!vlan.present"),
        Expr::Not(Box::new(Expr::flags(flag::VLAN)))
    );
    assert_eq!(ok("!tcp.dst"), and(TCP, Expr::eq(Field::L4Dst, 0)));
    assert_eq!(ok("/* c */ tcp // to the end\n"), Expr::flags(TCP));
}

#[test]
fn and_or_and_parentheses() {
    let t = Expr::flags(TCP);
    let u = Expr::flags(flag::IP | flag::UDP);
    let a = Expr::flags(flag::ARP);
    assert_eq!(
        ok("tcp && udp && arp"),
        Expr::And(vec![t.clone(), u.clone(), a.clone()])
    );
    assert_eq!(
        ok("tcp || udp || arp"),
        Expr::Or(vec![t.clone(), u.clone(), a.clone()])
    );
    assert_eq!(
        ok("(tcp && udp) || arp"),
        Expr::Or(vec![Expr::And(vec![t.clone(), u.clone()]), a.clone()])
    );
    assert_eq!(
        ok("tcp && (udp || arp)"),
        Expr::And(vec![t, Expr::Or(vec![u, a])])
    );
    // OVN refuses `&&` and `||` together without parentheses.
    for s in ["tcp && udp || arp", "tcp || udp && arp"] {
        let e = bad(s);
        assert!(e.message.contains("parenthesized"), "{e}");
        assert_eq!(e.offset, 11, "{s}");
    }
}

#[test]
fn negation_keeps_prerequisites_outside() {
    // `!(tcp.dst == 80)` is `tcp.dst != 80 && tcp`, as OVN.
    assert_eq!(ok("!(tcp.dst == 80)"), ok("tcp.dst != 80"));
    assert_eq!(ok("!(tcp.dst == {80, 443})"), ok("tcp.dst != {80, 443}"));
    assert_eq!(ok("!(tcp.dst < 80)"), ok("tcp.dst >= 80"));
    assert_eq!(ok("!(tcp.dst <= 80)"), ok("tcp.dst > 80"));
    assert_eq!(
        ok("!(tcp.dst == 80 && ip4.src == 10.0.0.1)"),
        Expr::Or(vec![ok("tcp.dst != 80"), ok("ip4.src != 10.0.0.1")])
    );
    assert_eq!(ok("!(inport != \"vm1\")"), ok("inport == \"vm1\""));
    // As in OVN, `!` takes an atomic operand: `!!x` and `!f == v` are refused.
    assert_eq!(bad("!!vlan.present").offset, 1);
    assert_eq!(bad("!tcp.dst == 80").offset, 0);
}

#[test]
fn ports_groups_and_address_sets() {
    let p = |f: Field, i| Expr::eq(f, i);
    assert_eq!(
        ok("inport == {\"vm1\", \"vm3\"}"),
        Expr::Or(vec![p(Field::Inport, 1), p(Field::Inport, 3)])
    );
    assert_eq!(
        ok("outport == @web"),
        Expr::Or(vec![p(Field::Outport, 1), p(Field::Outport, 2)])
    );
    assert_eq!(ok("outport == @none"), Expr::False);
    // Only the set's IPv4 members meet an ip4 field, its IPv6 ones an ip6 field.
    let v4 = flag::IP | flag::IP4;
    assert_eq!(
        ok("ip4.src == $clients"),
        and(
            v4,
            Expr::Or(vec![
                Expr::masked(Field::IpSrc, 0x0a00_0000, 0xffff_ff00),
                Expr::masked(Field::IpSrc, 0xc000_0207, 0xffff_ffff),
            ])
        )
    );
    assert_eq!(
        ok("ip6.dst == $clients"),
        and(
            flag::IP | flag::IP6,
            Expr::masked(Field::IpDst, 0xfd00 << 112, u128::MAX << 64)
        )
    );
    assert_eq!(ok("ip4.src == $empty"), Expr::False);
    assert_eq!(ok("ip4.src != $empty"), Expr::True);
    // Port groups' derived address sets, as OVN's `$pg_ip4`.
    assert_eq!(
        ok("ip4.src == $web_ip4"),
        ok("ip4.src == {10.0.0.1, 10.0.0.2}")
    );
    assert_eq!(ok("ip6.src == $web_ip6"), ok("ip6.src == fd00::1"));
    assert_eq!(ok("ip4.src == {$clients, 10.9.9.9}").size(), 6);
}

/// (match, offset of the error, a piece of its message)
const ERRORS: &[(&str, usize, &str)] = &[
    (
        "tcp.dst == 80 && bogus.field == 1",
        17,
        "unknown field `bogus.field`",
    ),
    ("ip4.src == $nope", 11, "unknown address set `$nope`"),
    ("outport == @nope", 11, "unknown port group `@nope`"),
    ("inport == \"vm9\"", 10, "unknown port \"vm9\""),
    ("inport == vm1", 10, "port names are quoted"),
    ("vm1 == inport", 0, "port names are quoted"),
    ("tcp.dst == ", 11, "expected a constant"),
    ("tcp.dst = 80", 8, "relational operator"),
    ("tcp.dst", 0, "explicit `tcp.dst != 0`"),
    (
        "tcp.dst == 65536",
        11,
        "17-bit constant is not compatible with 16-bit field",
    ),
    ("ip4.src == fd00::1", 11, "128-bit constant"),
    ("vlan.vid == 4096", 12, "13-bit constant"),
    ("inport == 1", 10, "quoted port names"),
    (
        "tcp.dst == \"vm1\"",
        11,
        "cannot be compared with a port name",
    ),
    (
        "inport != \"vm1\"",
        7,
        "nominal field `inport` may only be tested for equality",
    ),
    ("!(inport == \"vm1\")", 9, "nominal field"),
    ("eth.type != 0x800", 9, "nominal field"),
    (
        "ip.proto < 6",
        9,
        "only == and != may be used with nominal field",
    ),
    ("icmp4.type != 8", 11, "nominal field"),
    (
        "!tcp",
        1,
        "nominal predicate `tcp` may only be tested positively",
    ),
    ("ip4 == 0", 4, "nominal predicate"),
    ("vlan.present < 1", 13, "Boolean field"),
    ("tcp.dst < {80, 90}", 8, "set of values"),
    // Each ordered operator is checked, not only `<`.
    ("tcp.dst <= {80, 90}", 8, "set of values"),
    ("tcp.dst >= {80, 90}", 8, "set of values"),
    ("tcp.dst > {80, 90}", 8, "set of values"),
    ("vlan.present <= 1", 13, "Boolean field"),
    ("ip4.src >= 10.0.0.0/8", 11, "masked constants"),
    // A predicate is 0 or 1, never a masked value.
    (
        "tcp == 1/1",
        7,
        "predicate `tcp` is compared with 0 or 1, unmasked",
    ),
    ("ip4.src < 10.0.0.0/8", 10, "masked constants"),
    ("eth.src == $clients", 11, "address sets hold IP prefixes"),
    ("tcp.dst == {}", 12, "expected a constant"),
    ("tcp.dst == 080", 11, "leading zeros"),
    ("tcp.dst == 0x", 11, "hex digits expected"),
    ("tcp.dst == 0xfg", 11, "invalid hexadecimal"),
    (
        "ip4.src == 1.2.3.4/33",
        19,
        "prefix length 33 is longer than an IPv4 address (at most /32)",
    ),
    (
        "ip6.src == fd00::/129",
        18,
        "prefix length 129 is longer than an IPv6 address (at most /128)",
    ),
    ("ip4.src == 10.0.0.1/0x8", 20, "incompatible forms"),
    ("tcp.dst == 80 &", 14, "`&` is only valid as part of `&&`"),
    ("tcp.dst == 80 | udp", 14, "`|`"),
    ("(tcp", 4, "expected `)`"),
    ("tcp)", 3, "the end of the match"),
    ("tcp.dst == 80 /* open", 14, "`/*` without `*/`"),
    ("inport == \"vm1", 10, "inside a quoted string"),
    ("is_chassis_resident(\"vm1\")", 0, "functions"),
    ("tcp.dst == 1 < 2", 13, "the end of the match"),
    ("1 < tcp.dst > 5", 12, "a range must read"),
    ("é", 0, "unexpected character"),
    ("$", 0, "`$` must be followed by a name"),
    ("", 0, "expected a constant"),
    ("tcp.dst == 1e", 11, "invalid constant"),
    (
        "tcp.dst == 99999999999999999999999999999999999999999",
        11,
        "too large",
    ),
];

/// Each text is refused, the error at its offset and holding its words.
pub(super) fn check_errors(cases: &[(&str, usize, &str)]) {
    for (s, at, msg) in cases {
        let e = bad(s);
        assert!(e.message.contains(msg), "{s}: {e}, expected {msg}");
        assert_eq!(e.offset, *at, "{s}: {e}");
    }
}

#[test]
fn errors_point_at_the_offending_token() {
    check_errors(ERRORS);
}

#[test]
fn bounds_hold() {
    let deep = format!("{}tcp{}", "(".repeat(100), ")".repeat(100));
    assert_eq!(ok(&deep), Expr::flags(TCP));
    let deeper = format!("{}tcp{}", "(".repeat(101), ")".repeat(101));
    assert!(bad(&deeper).message.contains("nested deeper"));
    let hostile = "(".repeat(60_000);
    assert!(bad(&hostile).message.contains("nested deeper"));
    let long = format!("tcp{}", " ".repeat(super::MAX_MATCH_LEN));
    assert!(bad(&long).message.contains("longer than"));
    // Expansion is bounded.
    let pol = policy();
    let cx = Context::new(&pol);
    let many = format!("ip4.src == {{{}}}", vec!["$clients"; 100].join(" "));
    assert!(cx.parse_bounded(&many, 100).is_err());
    assert!(cx.parse_bounded(&many, 1000).is_ok());
}

/// The lexer's comments, punctuation and constants, as OVN's lib/lex.c
/// reads them (mutation round 62).
#[test]
fn comments_punctuation_and_constants_lex_as_ovn() {
    let tcp80 = ok("tcp.dst == 80");
    // A `//` comment runs to the line's end; the match may go on after it.
    assert_eq!(ok("tcp.dst == 80 // web"), tcp80);
    assert_eq!(ok("tcp.dst == // the port\n80"), tcp80);
    // A `/* */` comment, anywhere on its line, may hold `*` and `/`; the
    // opening's `*` does not close it.
    assert_eq!(ok("tcp.dst == 80 /**/"), tcp80);
    assert_eq!(ok("tcp.dst == 80 /* a*b */"), tcp80);
    assert_eq!(ok("tcp.dst == 80 /* a/b */"), tcp80);
    assert_eq!(ok("/*/ tcp */ tcp.dst == 80"), tcp80);
    // An IPv6 address may open with `::`.
    assert_eq!(ok("ip6.src == ::1"), ok("ip6.src == 0:0:0:0:0:0:0:1"));
    assert_eq!(ok("ip6.src == ::/64"), ok("ip6.src == 0:0:0:0::/64"));
    // A string's `\"` is a quote inside it, not its end.
    let e = bad("inport == \"vm\\\"1\"");
    assert_eq!(
        (e.offset, e.message.as_str()),
        (10, "unknown port \"vm\\\"1\"")
    );
    assert_eq!(ok("inport == \"v\\u006d1\""), ok("inport == \"vm1\""));
    check_errors(&[
        // An error at the end of a match that ends in a comment is at its
        // last byte's end, not past it.
        ("(tcp // none", 12, "expected `)` or an operator"),
        // Punctuation OVN lexes but a match never uses.
        ("tcp <-> udp", 4, "`<->`"),
        ("tcp.dst <-1", 9, "`-`"),
        ("tcp.dst == 80 -- x", 14, "`--`"),
        ("tcp.dst == -1", 11, "`-`"),
        ("tcp.dst == : 1", 11, "`:`"),
        ("tcp / udp", 4, "`/` is only valid as part of"),
        // A hexadecimal mask goes with a decimal value of 0 only.
        ("tcp.dst == 5/0xff", 13, "incompatible forms"),
    ]);
    assert_eq!(ok("tcp.dst == 0/0xff"), ok("tcp.dst == 0x0/0xff"));
    // A hexadecimal constant holds 128 bits at most, leading zeros aside.
    let f32 = format!("0x{}", "f".repeat(32));
    assert_eq!(
        ok(&format!("ip6.src == {f32}")),
        ok("ip6.src == ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff")
    );
    assert_eq!(ok(&format!("tcp.dst == 0x{}50", "0".repeat(40))), tcp80);
    let f33 = format!("ip6.src == 0x1{}", "0".repeat(32));
    check_errors(&[(&f33, 11, "wider than 128 bits")]);
    // A MAC address is six pairs of hex digits: 17 bytes of other
    // groupings are no MAC (nor anything else).
    check_errors(&[
        ("eth.src == 0:00:00:00:00:000", 11, "invalid constant"),
        ("eth.src == 000:00:00:00:00:0", 11, "invalid constant"),
    ]);
    assert_eq!(
        ok("eth.src == 0a:0B:00:00:00:01"),
        ok("eth.src == 0x0a0b00000001")
    );
}
