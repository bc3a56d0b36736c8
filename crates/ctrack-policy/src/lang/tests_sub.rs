//! Subfields (`field[lo..hi]`) and OVN's multicast and broadcast
//! predicates: what they resolve to, what they match on real frames, and
//! that each predicate means what OVN's definition (lib/logical-fields.c,
//! written here with subfields) means.

use std::net::Ipv6Addr;

use ctrack_wire::build::{Frame, L4};
use proptest::prelude::*;

use super::parse;
use super::tests::{check_errors, policy};
use crate::expr::Expr;
use crate::key::{Field, Key, flag};

fn ok(s: &str) -> Expr {
    parse(s, &policy()).unwrap_or_else(|e| panic!("{s}: {e}"))
}

fn m(s: &str, k: &Key) -> bool {
    ok(s).eval(k)
}

const IP4: u16 = flag::IP | flag::IP4;
const IP6: u16 = flag::IP | flag::IP6;

#[test]
fn subfields_resolve_to_masked_tests_of_their_field() {
    let and = |p: u16, e: Expr| Expr::And(vec![Expr::flags(p), e]);
    let cases: &[(&str, Expr)] = &[
        // A one-bit subfield alone is a predicate.
        ("eth.dst[40]", Expr::masked(Field::EthDst, 1 << 40, 1 << 40)),
        ("eth.dst[40] == 0", Expr::masked(Field::EthDst, 0, 1 << 40)),
        (
            "ip6.dst[120..127] == 0xff",
            and(IP6, Expr::masked(Field::IpDst, 0xff << 120, 0xff << 120)),
        ),
        (
            "ip4.dst[28..31] == 0xe",
            and(IP4, Expr::masked(Field::IpDst, 0xe << 28, 0xf << 28)),
        ),
        // A masked constant keeps its mask, within the subfield.
        (
            "tcp.dst[8..15] == 0x10/0x30",
            and(
                flag::IP | flag::TCP,
                Expr::masked(Field::L4Dst, 0x10 << 8, 0x30 << 8),
            ),
        ),
        // `!` on a multi-bit subfield: all its bits zero.
        (
            "!ip4.src[0..7]",
            and(IP4, Expr::masked(Field::IpSrc, 0, 0xff)),
        ),
        // The whole of a nominal field is the field.
        ("eth.type[0..15] == 0x800", Expr::eq(Field::EthType, 0x800)),
        // An ordered relation over a subfield: the prefixes that cover it.
        (
            "vlan.vid[0..3] >= 12",
            and(flag::VLAN, Expr::masked(Field::VlanTci, 12, 0xc)),
        ),
        (
            "tcp.src[0..1] < 3",
            and(
                flag::IP | flag::TCP,
                Expr::Or(vec![
                    Expr::masked(Field::L4Src, 0, 2),
                    Expr::masked(Field::L4Src, 2, 3),
                ]),
            ),
        ),
        ("ip4.src[0..7] > 255", Expr::False),
        ("ip4.src[0..7] < 0", Expr::False),
    ];
    for (s, want) in cases {
        assert_eq!(&ok(s), want, "{s}");
    }
}

/// Text, the offset of the error, and words its message holds.
const ERRORS: &[(&str, usize, &str)] = &[
    (
        "eth.dst[48]",
        7,
        "cannot select bits 48 to 48 of 48-bit field `eth.dst`",
    ),
    ("eth.dst[5..3] == 0", 7, "invalid bit range 5 to 3"),
    (
        "eth.type[0..7] == 8",
        8,
        "subfield of nominal field `eth.type`",
    ),
    ("inport[0] == 1", 6, "subfield of string field `inport`"),
    ("ip4[0]", 3, "subfield of predicate `ip4`"),
    (
        "eth.dst[40] == 2",
        15,
        "2-bit constant is not compatible with 1-bit subfield `eth.dst[40]`",
    ),
    (
        "ip4.dst[28..31] == 224.0.0.0",
        19,
        "32-bit constant is not compatible with 4-bit subfield `ip4.dst[28..31]`",
    ),
    (
        "ip4.src[0..7] == $clients",
        17,
        "address sets hold IP prefixes",
    ),
    (
        "eth.dst[40",
        10,
        "expected `]` or `..`, found the end of the match",
    ),
    ("eth.dst[40 41]", 11, "expected `]` or `..`"),
    ("eth.dst[x] == 1", 8, "expected a bit number"),
    ("eth.dst[0x1] == 1", 8, "expected a bit number"),
    ("eth.dst[128] == 1", 8, "expected a bit number"),
    ("eth.dst[]", 8, "expected a bit number"),
    (
        "ip4.src[0..7]",
        0,
        "explicit `ip4.src[0..7] != 0` is required",
    ),
    ("ip4.src[0..7] < 0x10/0xff", 16, "masked constants"),
    ("ip4.src[0..7] < {1, 2}", 14, "set of values"),
    (
        "!igmp",
        1,
        "nominal predicate `igmp` may only be tested positively",
    ),
    ("nd_ns_mcast == 0", 12, "nominal predicate"),
    ("eth.mcast < 1", 10, "Boolean field"),
];

#[test]
fn subfield_errors_point_at_the_offending_token() {
    check_errors(ERRORS);
}

fn v4_key(src: u32) -> Key {
    Key::from_frame(
        &Frame::v4(src.to_be_bytes(), [10, 0, 0, 2], L4::udp(1, 2, b"")).build(),
        1,
        2,
    )
}

proptest! {
    /// `ip4.src[lo..hi] R v` reads bits `lo..=hi` of the source address as
    /// a number and compares it with `v`, whatever the relation.
    #[test]
    fn relations_on_subfields_compare_their_bits(
        lo in 0u32..32,
        len in 1u32..=32,
        r in 0usize..6,
        v in any::<u32>(),
        srcs in prop::collection::vec(any::<u32>(), 8),
    ) {
        let hi = (lo + len - 1).min(31);
        let width = hi - lo + 1;
        let max = u32::MAX >> (32 - width);
        let v = v & max;
        let rel = ["==", "!=", "<", "<=", ">", ">="][r];
        let text = format!("ip4.src[{lo}..{hi}] {rel} {v}");
        let e = parse(&text, &policy()).map_err(|e| TestCaseError::fail(format!("{text}: {e}")))?;
        // Keys whose bits equal `v`, and its neighbours, beside random ones.
        let mut srcs = srcs;
        for d in [0u32, 1, u32::MAX] {
            let bits = v.wrapping_add(d) & max;
            srcs.push((srcs[0] & !(max << lo)) | (bits << lo));
        }
        for src in srcs {
            let bits = (src >> lo) & max;
            let want = match r {
                0 => bits == v,
                1 => bits != v,
                2 => bits < v,
                3 => bits <= v,
                4 => bits > v,
                _ => bits >= v,
            };
            prop_assert_eq!(e.eval(&v4_key(src)), want, "{} on {:#x}", text, src);
            // An IPv6 frame has no ip4.src: no relation holds.
            let k6 = Key::from_frame(
                &Frame::v6(Ipv6Addr::LOCALHOST, Ipv6Addr::LOCALHOST, L4::udp(1, 2, b"")).build(),
                1,
                2,
            );
            prop_assert!(!e.eval(&k6), "{} on IPv6", text);
        }
    }
}

/// Frames to tell the multicast predicates apart: each a name and a key.
fn frames() -> Vec<(&'static str, Key)> {
    let v4 = |dst: [u8; 4], mac: [u8; 6], l4: L4| {
        let mut f = Frame::v4([10, 0, 0, 1], dst, l4);
        f.eth_dst = mac;
        Key::from_frame(&f.build(), 1, 2)
    };
    let v6 = |src: &str, dst: &str, mac: [u8; 6], l4: L4, ttl: u8| {
        let mut f = Frame::v6(src.parse().unwrap(), dst.parse().unwrap(), l4);
        f.eth_dst = mac;
        f.ttl = ttl;
        Key::from_frame(&f.build(), 1, 2)
    };
    let udp = || L4::udp(5353, 5353, b"x");
    let igmp = || L4::Raw {
        proto: 2,
        payload: vec![0x16, 0, 0, 0, 224, 0, 0, 251],
    };
    let mut arp = vec![0xff; 6];
    arp.extend_from_slice(&[2, 0, 0, 0, 0, 1, 0x08, 0x06]);
    arp.extend_from_slice(&[0; 28]);
    let ll = "fe80::1";
    vec![
        (
            "mdns4",
            v4([224, 0, 0, 251], [1, 0, 0x5e, 0, 0, 0xfb], udp()),
        ),
        (
            "igmp",
            v4([224, 0, 0, 251], [1, 0, 0x5e, 0, 0, 0xfb], igmp()),
        ),
        (
            "igmp to a unicast MAC",
            v4([224, 0, 0, 251], [2, 0, 0, 0, 0, 2], igmp()),
        ),
        ("unicast4", v4([10, 0, 0, 2], [2, 0, 0, 0, 0, 2], udp())),
        ("bcast4", v4([255, 255, 255, 255], [0xff; 6], udp())),
        ("arp bcast", Key::from_frame(&arp, 1, 0)),
        (
            "all-nodes",
            v6(ll, "ff02::1", [0x33, 0x33, 0, 0, 0, 1], udp(), 1),
        ),
        (
            "node-local all-nodes",
            v6(ll, "ff01::1", [0x33, 0x33, 0, 0, 0, 1], udp(), 1),
        ),
        (
            "all-routers",
            v6(ll, "ff05::2", [0x33, 0x33, 0, 0, 0, 2], udp(), 1),
        ),
        (
            "reserved",
            v6(ll, "ff0e::", [0x33, 0x33, 0, 0, 0, 0], udp(), 1),
        ),
        (
            "not reserved",
            v6(ll, "ff0e::1:0", [0x33, 0x33, 0, 1, 0, 0], udp(), 1),
        ),
        (
            "ns to a solicited node",
            v6(
                ll,
                "ff02::1:ff00:5",
                [0x33, 0x33, 0xff, 0, 0, 5],
                L4::icmp_query(135, 0, 0),
                255,
            ),
        ),
        (
            "ns unicast",
            v6(
                ll,
                "fd00::5",
                [2, 0, 0, 0, 0, 5],
                L4::icmp_query(135, 0, 0),
                255,
            ),
        ),
        (
            "mdns6",
            v6(ll, "ff02::fb", [0x33, 0x33, 0, 0, 0, 0xfb], udp(), 1),
        ),
        (
            "ssm6",
            v6(ll, "ff3e::8000:1", [0x33, 0x33, 0x80, 0, 0, 1], udp(), 1),
        ),
        (
            "unicast6",
            v6("fd00::1", "fd00::2", [2, 0, 0, 0, 0, 2], udp(), 64),
        ),
    ]
}

/// Each predicate, OVN's definition of it in the words of fields and
/// subfields, and the frames of [`frames`] it matches.
const PREDICATES: &[(&str, &str, &[&str])] = &[
    (
        "eth.bcast",
        "eth.dst == ff:ff:ff:ff:ff:ff",
        &["bcast4", "arp bcast"],
    ),
    (
        "eth.mcast",
        "eth.dst[40]",
        &[
            "mdns4",
            "igmp",
            "bcast4",
            "arp bcast",
            "all-nodes",
            "node-local all-nodes",
            "all-routers",
            "reserved",
            "not reserved",
            "ns to a solicited node",
            "mdns6",
            "ssm6",
        ],
    ),
    (
        "eth.mcastv6",
        "eth.dst[32..47] == 0x3333",
        &[
            "all-nodes",
            "node-local all-nodes",
            "all-routers",
            "reserved",
            "not reserved",
            "ns to a solicited node",
            "mdns6",
            "ssm6",
        ],
    ),
    ("ip4.src_mcast", "ip4.src[28..31] == 0xe", &[]),
    (
        "ip4.mcast",
        "eth.dst[40] && ip4.dst[28..31] == 0xe",
        &["mdns4", "igmp"],
    ),
    (
        "igmp",
        "eth.dst[40] && ip4.dst[28..31] == 0xe && ip.proto == 2",
        &["igmp"],
    ),
    (
        "ip6.mcast",
        "eth.dst[32..47] == 0x3333 && ip6.dst[120..127] == 0xff",
        &[
            "all-nodes",
            "node-local all-nodes",
            "all-routers",
            "reserved",
            "not reserved",
            "ns to a solicited node",
            "mdns6",
            "ssm6",
        ],
    ),
    (
        "ip6.mcast_rsvd",
        "ip6.dst == {ff00::0, ff01::0, ff02::0, ff03::0, ff04::0, ff05::0, ff06::0, ff07::0, \
         ff08::0, ff09::0, ff0a::0, ff0b::0, ff0c::0, ff0d::0, ff0e::0, ff0f::0}",
        &["reserved"],
    ),
    (
        "ip6.mcast_all_nodes",
        "ip6.dst == ff01::1 || ip6.dst == ff02::1",
        &["all-nodes", "node-local all-nodes"],
    ),
    (
        "ip6.mcast_all_rtrs",
        "ip6.dst == ff01::2 || ip6.dst == ff02::2 || ip6.dst == ff05::2",
        &["all-routers"],
    ),
    (
        "ip6.mcast_sol_node",
        "ip6.dst == ff02::1:ff00:0000/104",
        &["ns to a solicited node"],
    ),
    (
        "ip6.mcast_flood",
        "eth.dst[32..47] == 0x3333 && (ip6.dst == {ff00::0, ff01::0, ff02::0, ff03::0, ff04::0, \
         ff05::0, ff06::0, ff07::0, ff08::0, ff09::0, ff0a::0, ff0b::0, ff0c::0, ff0d::0, \
         ff0e::0, ff0f::0} || ip6.dst == ff01::1 || ip6.dst == ff02::1 || ip6.dst == ff01::2 || \
         ip6.dst == ff02::2 || ip6.dst == ff05::2 || ip6.dst == ff02::1:ff00:0000/104)",
        &[
            "all-nodes",
            "node-local all-nodes",
            "all-routers",
            "reserved",
            "ns to a solicited node",
        ],
    ),
    (
        "nd_ns_mcast",
        "eth.dst[32..47] == 0x3333 && ip6.dst[120..127] == 0xff && icmp6.type == 135 && \
         icmp6.code == 0 && ip.ttl == 255",
        &["ns to a solicited node"],
    ),
];

#[test]
fn multicast_predicates_are_ovns_definitions() {
    let frames = frames();
    for (name, definition, matching) in PREDICATES {
        let (p, d) = (ok(name), ok(definition));
        for (f, k) in &frames {
            let want = matching.contains(f);
            assert_eq!(p.eval(k), want, "{name} on {f}");
            assert_eq!(d.eval(k), want, "{definition} on {f}");
        }
        // A Boolean predicate negated matches exactly the other frames,
        // as OVN's negation of the whole expansion does.
        if !matches!(*name, "igmp" | "nd_ns_mcast") {
            let not = ok(&format!("!{name}"));
            for (f, k) in &frames {
                assert_eq!(not.eval(k), !matching.contains(f), "!{name} on {f}");
            }
        }
    }
    let ip4_src = Key::from_frame(
        &Frame::v4([239, 1, 2, 3], [10, 0, 0, 2], L4::udp(1, 2, b"")).build(),
        1,
        2,
    );
    assert!(m("ip4.src_mcast", &ip4_src));
    assert!(m("ip4.src[28..31] == 0xe", &ip4_src));
}

/// The multicast match ovn-kubernetes writes in its multicast ACLs
/// (`getMulticastACLMatch`): IPv4 multicast, MLD, and IPv6 multicast
/// with dynamically assigned group IDs (RFC 3306, the T flag set).
#[test]
fn ovn_kubernetes_multicast_acl_match() {
    let e = ok("(ip4.mcast || mldv1 || mldv2 || \
                (ip6.dst[120..127] == 0xff && ip6.dst[116] == 1))");
    let frames = frames();
    let hits: Vec<&str> = frames
        .iter()
        .filter(|(_, k)| e.eval(k))
        .map(|(f, _)| *f)
        .collect();
    assert_eq!(hits, ["mdns4", "igmp", "ssm6"]);
}

#[test]
fn a_mask_of_zero_compares_nothing() {
    let k = v4_key(0x0a00_0001);
    assert!(m("eth.dst[40] == 0/0", &k));
    assert!(!m("eth.dst[40] != 0/0", &k));
    assert!(!m("eth.dst[40] != 1/0", &k));
}

/// The compiled classifier decides subfield and multicast matches as
/// evaluating them does, one rule at a time and all together.
#[test]
fn the_classifier_agrees_on_subfields_and_multicast() {
    use crate::classify::{Classifier, naive};
    let texts: Vec<String> = PREDICATES
        .iter()
        .flat_map(|(p, d, _)| {
            let nominal = matches!(*p, "igmp" | "nd_ns_mcast");
            let not = (!nominal).then(|| format!("!{p}"));
            [p.to_string(), d.to_string()].into_iter().chain(not)
        })
        .chain(
            [
                "ip6.dst[116] == 1 && ip6.dst[120..127] == 0xff",
                "udp.dst[0..7] < 0xfb",
                "udp.dst[8..15] >= 0x14 && ip4.mcast",
                "eth.src[0..23] != 0x000001",
                "!eth.mcast && ip6.dst[0..63] > 4",
            ]
            .map(String::from),
        )
        .collect();
    let rules: Vec<_> = texts
        .iter()
        .enumerate()
        .map(|(i, t)| (i as u32, (i % 7) as u64, ok(t)))
        .collect();
    let keys: Vec<Key> = frames().into_iter().map(|(_, k)| k).collect();
    let mut all = Classifier::new();
    for (id, rank, e) in &rules {
        let text = texts[*id as usize].as_str();
        // Each compiles, `!ip6.mcast_flood` (negated tests of several
        // masks) included.
        let mut one = Classifier::new();
        one.insert(*id, *rank, e)
            .unwrap_or_else(|err| panic!("{text}: {err}"));
        for k in &keys {
            assert_eq!(one.classify(k).is_some(), e.eval(k), "{text}");
        }
        all.insert(*id, *rank, e).unwrap();
    }
    for k in &keys {
        assert_eq!(all.classify(k), naive(&rules, k));
    }
}

/// Ordered relations over subfields resolve to up to two tests a bit: a
/// long match of them is refused as it is read, before it is built.
#[test]
fn ordered_subfield_expansions_are_bounded_as_read() {
    let one = "ip6.dst[1..126] > 1";
    let many = vec![one; 500].join(" && ");
    let e = parse(&many, &policy()).unwrap_err();
    assert!(e.message.contains("match too large"), "{e}");
    assert!(e.offset < many.len(), "{e}");
    ok(&vec![one; 100].join(" && "));
}
