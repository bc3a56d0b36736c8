//! Resolved matches evaluated on keys of real frames, and a property:
//! the resolved expression means what OVN says it means.

use std::net::Ipv6Addr;

use ctrack_wire::build::{Frame, L4};
use proptest::prelude::*;

use super::parse;
use super::tests::policy;
use crate::key::{Field, Key};

fn m(s: &str, k: &Key) -> bool {
    parse(s, &policy())
        .unwrap_or_else(|e| panic!("{s}: {e}"))
        .eval(k)
}

fn v6(last: u16) -> Ipv6Addr {
    Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, last)
}

#[test]
fn matches_on_frames() {
    let tcp443 = Key::from_frame(
        &Frame::v4([10, 0, 0, 1], [10, 0, 0, 2], L4::tcp(40000, 443, 0x002)).build(),
        1,
        2,
    );
    let udp443 = Key::from_frame(
        &Frame::v4([10, 0, 0, 1], [10, 0, 0, 2], L4::udp(40000, 443, b"x")).build(),
        1,
        2,
    );
    let ping = Key::from_frame(
        &Frame::v4([192, 0, 2, 7], [10, 0, 0, 2], L4::icmp_query(8, 1, 1)).build(),
        2,
        1,
    );
    let tcp6 = Key::from_frame(
        &Frame::v6(v6(1), v6(2), L4::tcp(1, 22, 0x012)).build(),
        3,
        1,
    );
    assert!(m("tcp.dst == {80, 443}", &tcp443));
    assert!(!m("tcp.dst == {80, 443}", &udp443));
    assert!(m("udp.dst == 443 && udp", &udp443));
    assert!(m(
        "ip4 && ip4.src == 10.0.0.1 && ip4.dst == 10.0.0.0/24",
        &tcp443
    ));
    assert!(m("inport == \"vm1\" && outport == @web", &tcp443));
    assert!(!m("inport == \"vm2\"", &tcp443));
    assert!(m("tcp.flags == 0x2", &tcp443));
    assert!(m(
        "tcp.flags == 0x2/0x2 && !(tcp.flags == 0x10/0x10)",
        &tcp443
    ));
    assert!(m(
        "ip4.src == $clients && icmp4.type == 8 && icmp4.code == 0",
        &ping
    ));
    assert!(m("icmp && icmp4 && ip.proto == 1 && ip.ttl == 64", &ping));
    assert!(!m("icmp6", &ping));
    assert!(m(
        "ip6.src == $clients && tcp.dst < 1024 && tcp.src >= 1",
        &tcp6
    ));
    assert!(!m("ip4.src == $clients", &tcp6));
    assert!(m("ip6 && ip6.dst == fd00::2 && eth.type == 0x86dd", &tcp6));
    assert!(m(
        "eth.src == 02:00:00:00:00:01 && eth.dst == 02:00:00:00:00:02",
        &tcp6
    ));
    // A prerequisite stays outside `!`: a UDP frame is not `!(tcp.dst == 80)`.
    assert!(!m("!(tcp.dst == 80)", &udp443));
    assert!(m("!(tcp.dst == 80)", &tcp443));
    assert!(m("tcp.dst != {80, 8080}", &tcp443));
    assert!(!m("tcp.dst != {80, 443}", &tcp443));
}

#[test]
fn vlan_nd_and_fragments() {
    let tagged = Key::from_frame(
        &Frame::v4([10, 0, 0, 1], [10, 0, 0, 2], L4::udp(1, 2, b""))
            .vlan(0x8100, 5)
            .build(),
        0,
        0,
    );
    assert!(m("vlan.present && vlan.vid == 5", &tagged));
    assert!(!m("vlan.vid == 6", &tagged));
    let mut ns = Frame::v6(v6(1), v6(2), L4::icmp_query(135, 0, 0));
    ns.ttl = 255;
    let ns = Key::from_frame(&ns.build(), 0, 0);
    assert!(m("nd && nd_ns && icmp6.type == 135", &ns));
    assert!(!m("nd_na", &ns));
    let mut frag = Frame::v4([10, 0, 0, 1], [10, 0, 0, 2], L4::udp(1, 2, &[0; 64]));
    frag.frag_offset = 64;
    let later = Key::from_frame(&frag.build(), 0, 0);
    assert!(m("ip.is_frag && ip.later_frag && !ip.first_frag", &later));
    // OVN's `udp` is `ip.proto == 17`: a later fragment's, without ports.
    assert!(m("udp && ip.proto == 17 && ip.later_frag", &later));
    assert!(!m("udp.dst == 2", &later));
    assert!(m("udp.dst == 0", &later));
    // A UDP header cut short (the datagram's length says 4 bytes of it):
    // `udp`, no ports, as Open vSwitch's flow has it; a TCP header whose
    // data offset is under 20 bytes or past the segment likewise.
    let mut cut = Frame::v4([10, 0, 0, 1], [10, 0, 0, 2], L4::udp(1, 2, b"")).build();
    cut[16..18].copy_from_slice(&24u16.to_be_bytes());
    let cut = Key::from_frame(&cut, 0, 0);
    assert!(m("udp && udp.src == 0 && udp.dst == 0", &cut));
    for off in [0x40u8, 0xf0] {
        let mut f = Frame::v4([10, 0, 0, 1], [10, 0, 0, 2], L4::tcp(1, 2, 0x002)).build();
        f[14 + 20 + 12] = off;
        let k = Key::from_frame(&f, 0, 0);
        assert!(m("tcp && tcp.src == 0 && tcp.flags == 0", &k), "{off:#x}");
    }
    // An ICMP header of fewer than eight bytes has no type or code.
    let mut f = Frame::v4([10, 0, 0, 1], [10, 0, 0, 2], L4::icmp_query(8, 1, 1)).build();
    f[16..18].copy_from_slice(&24u16.to_be_bytes());
    assert!(m("icmp4 && icmp4.type == 0", &Key::from_frame(&f, 0, 0)));
    // A first fragment is a fragment, with its transport header.
    let mut frag = Frame::v4([10, 0, 0, 1], [10, 0, 0, 2], L4::udp(1, 2, &[0; 64]));
    frag.more_frags = true;
    let first = Key::from_frame(&frag.build(), 0, 0);
    assert!(m("ip.is_frag && ip.first_frag && !ip.later_frag", &first));
    assert!(m("udp && udp.dst == 2", &first));
    // `vlan.tci` carries the presence bit (12) beside the VID and PCP,
    // as Open vSwitch's `vlan_tci` (OVN: `vlan.present` is
    // `vlan.tci[12]`).
    assert!(m("vlan.tci == 0x1005 && vlan.tci[12] == 1", &tagged));
    // ICMPv6 over IPv4 (protocol 58 in an IPv4 header) is neither `icmp6`
    // nor `icmp4`, and has no ICMP type; plain and tagged (the general
    // path, past the plain IPv4 shortcut).
    for tag in [None, Some(5)] {
        let mut f = Frame::v4(
            [10, 0, 0, 1],
            [10, 0, 0, 2],
            L4::Raw {
                proto: 58,
                payload: vec![128, 0, 0, 0, 0, 1, 0, 1],
            },
        );
        if let Some(vid) = tag {
            f = f.vlan(0x8100, vid);
        }
        let bogus = Key::from_frame(&f.build(), 0, 0);
        assert!(m("ip.proto == 58", &bogus), "{tag:?}");
        assert!(!m("icmp6", &bogus), "{tag:?}");
        assert!(!m("icmp", &bogus), "{tag:?}");
    }
    // ICMPv4 over IPv6 (next header 1) likewise, `icmp4` being `ip4 &&
    // ip.proto == 1`.
    let f = Frame::v6(
        v6(1),
        v6(2),
        L4::Raw {
            proto: 1,
            payload: vec![8, 0, 0, 0, 0, 1, 0, 1],
        },
    );
    let bogus = Key::from_frame(&f.build(), 0, 0);
    assert!(m("ip6 && ip.proto == 1", &bogus));
    assert!(!m("icmp4", &bogus));
    assert!(!m("icmp", &bogus));
    // An ICMPv6 header of fewer than eight bytes has no type or code
    // either (the general path, IPv6).
    let mut f = Frame::v6(v6(1), v6(2), L4::icmp_query(128, 0, 1)).build();
    f[18..20].copy_from_slice(&4u16.to_be_bytes());
    f.truncate(14 + 40 + 4);
    let k = Key::from_frame(&f, 0, 0);
    assert!(m("icmp6 && icmp6.type == 0 && icmp6.code == 0", &k));
    let mut arp = vec![0xff; 6];
    arp.extend_from_slice(&[2, 0, 0, 0, 0, 1, 0x08, 0x06]);
    arp.extend_from_slice(&[0; 28]);
    let arp = Key::from_frame(&arp, 1, 0);
    assert!(m(
        "arp && eth.type == 0x806 && eth.dst == ff:ff:ff:ff:ff:ff",
        &arp
    ));
    assert!(!m("ip", &arp));
}

/// A leaf: its text, its prerequisite and its comparison, as OVN reads it.
type Leaf = (&'static str, fn(&Key) -> bool, fn(&Key) -> bool);

fn flags(k: &Key, bits: u16) -> bool {
    k.flags() & bits == bits
}

const LEAVES: &[Leaf] = &[
    (
        "tcp.dst == 80",
        |k| flags(k, 0x11),
        |k| k.get(Field::L4Dst) == 80,
    ),
    (
        "tcp.dst < 1000",
        |k| flags(k, 0x11),
        |k| k.get(Field::L4Dst) < 1000,
    ),
    (
        "udp.src != 53",
        |k| flags(k, 0x21),
        |k| k.get(Field::L4Src) != 53,
    ),
    (
        "ip4.src == 10.0.0.0/24",
        |k| flags(k, 0x3),
        |k| k.get(Field::IpSrc) >> 8 == 0x0a_0000,
    ),
    (
        "ip6.dst == fd00::2",
        |k| flags(k, 0x5),
        |k| k.get(Field::IpDst) == u128::from(v6(2)),
    ),
    (
        "eth.src == 02:00:00:00:00:01",
        |_| true,
        |k| k.get(Field::EthSrc) == 0x0200_0000_0001,
    ),
    (
        "tcp.src >= 443",
        |k| flags(k, 0x11),
        |k| k.get(Field::L4Src) >= 443,
    ),
];

#[derive(Debug, Clone)]
enum T {
    Leaf(usize),
    Not(Box<T>),
    And(Vec<T>),
    Or(Vec<T>),
}

fn tree() -> impl Strategy<Value = T> {
    (0..LEAVES.len())
        .prop_map(T::Leaf)
        .prop_recursive(4, 24, 3, |inner| {
            prop_oneof![
                inner.clone().prop_map(|t| T::Not(Box::new(t))),
                prop::collection::vec(inner.clone(), 2..4).prop_map(T::And),
                prop::collection::vec(inner, 2..4).prop_map(T::Or),
            ]
        })
}

fn text(t: &T) -> String {
    let join = |xs: &[T], op: &str| {
        xs.iter()
            .map(|x| format!("({})", text(x)))
            .collect::<Vec<_>>()
            .join(op)
    };
    match t {
        T::Leaf(i) => LEAVES[*i].0.to_string(),
        T::Not(x) => format!("!({})", text(x)),
        T::And(xs) => join(xs, " && "),
        T::Or(xs) => join(xs, " || "),
    }
}

/// OVN's meaning: `!` pushed to the leaves, each leaf `prereq && cmp`
/// (or `prereq && !cmp` under an odd number of `!`).
fn reference(t: &T, neg: bool, k: &Key) -> bool {
    match t {
        T::Leaf(i) => LEAVES[*i].1(k) && (LEAVES[*i].2(k) != neg),
        T::Not(x) => reference(x, !neg, k),
        T::And(xs) if !neg => xs.iter().all(|x| reference(x, neg, k)),
        T::Or(xs) if neg => xs.iter().all(|x| reference(x, neg, k)),
        T::And(xs) | T::Or(xs) => xs.iter().any(|x| reference(x, neg, k)),
    }
}

fn key() -> impl Strategy<Value = Key> {
    let port = prop::sample::select(vec![53u16, 80, 443, 999, 1000, 40000]);
    (0..4u8, port.clone(), port, 0..3u8, 0..3u8, any::<bool>()).prop_map(
        |(kind, sp, dp, s, d, mac)| {
            let l4 = match kind {
                0 | 1 => L4::tcp(sp, dp, 0x002),
                2 => L4::udp(sp, dp, b""),
                _ => L4::icmp_query(8, 1, 1),
            };
            let mut f = if kind == 1 {
                Frame::v6(v6(u16::from(s) + 1), v6(u16::from(d) + 1), l4)
            } else {
                Frame::v4([10, 0, s, 1], [10, 0, 0, d], l4)
            };
            if mac {
                f.eth_src = [2, 0, 0, 0, 0, 9];
            }
            Key::from_frame(&f.build(), 1, 2)
        },
    )
}

proptest! {
    #[test]
    fn resolved_matches_mean_what_ovn_says(t in tree(), keys in prop::collection::vec(key(), 8)) {
        let s = text(&t);
        let e = parse(&s, &policy()).map_err(|e| TestCaseError::fail(format!("{s}: {e}")))?;
        for k in &keys {
            prop_assert_eq!(e.eval(k), reference(&t, false, k), "{} on {:?}", s, k);
        }
    }

    #[test]
    fn arbitrary_text_never_panics(s in "[ -~]{0,64}") {
        let _ = parse(&s, &policy());
    }
}

/// A VLAN-tagged frame of priority `pcp` and VLAN `vid`, and an untagged
/// one.
fn vlan_keys(pcp: u16, vid: u16) -> (Key, Key) {
    let f = Frame::v4([10, 0, 0, 1], [10, 0, 0, 2], L4::udp(1, 2, b""));
    let tagged = f.clone().vlan(0x8100, (pcp << 13) | 0x1000 | vid).build();
    (
        Key::from_frame(&tagged, 0, 0),
        Key::from_frame(&f.build(), 0, 0),
    )
}

/// An ARP packet (Ethernet and IPv4 addresses) of opcode `op` from
/// 02:00:00:00:00:01 / 10.0.0.1 for 10.0.0.2 (target MAC `tha`), with
/// `ethertype` and the hardware-type bytes `hw`.
fn arp_frame(op: u16, tha: [u8; 6], ethertype: u16, hw: [u8; 6]) -> Vec<u8> {
    let mut f = vec![0xff; 6];
    f.extend_from_slice(&[2, 0, 0, 0, 0, 1]);
    f.extend_from_slice(&ethertype.to_be_bytes());
    f.extend_from_slice(&hw);
    f.extend_from_slice(&op.to_be_bytes());
    f.extend_from_slice(&[2, 0, 0, 0, 0, 1, 10, 0, 0, 1]);
    f.extend_from_slice(&tha);
    f.extend_from_slice(&[10, 0, 0, 2]);
    f
}

/// The matches of the VLAN and ARP fields and what each matches, among
/// a tagged frame of priority 5, VLAN 50 (`t`), the same untagged (`u`),
/// an ARP request (`q`), an ARP reply (`r`), an ARP of opcode 0x101 (`b`),
/// a RARP (`v`), an ARP of other hardware (`h`) and a UDP packet from
/// the request's sender (`i`).
const VLAN_ARP: &[(&str, &str)] = &[
    ("vlan.pcp == 5", "t"),
    ("vlan.pcp < 5", ""),
    ("vlan.pcp >= 4 && vlan.vid == 50", "t"),
    // OVN's `vlan.vid` is `vlan.tci[0..11]`: the priority beside it is
    // not part of it, for ordered relations too.
    ("vlan.vid < 100", "t"),
    ("vlan.vid > 49 && vlan.vid <= 50", "t"),
    ("vlan.vid >= 51", ""),
    ("vlan.tci == 0xb032", "t"),
    ("vlan.tci[12] && vlan.tci[13..15] == 5", "t"),
    ("vlan.tci == 0", "uqrbvhi"),
    ("vlan.tci > 0xb031", "t"),
    ("!vlan.present && vlan.tci < 0x1000", "uqrbvhi"),
    ("arp.op == 1", "q"),
    ("arp.op == {1, 2}", "qr"),
    ("arp.op == 0", "bh"),
    ("arp.spa == 10.0.0.1 && arp.tpa == 10.0.0.0/24", "qrb"),
    ("arp.spa < 10.0.0.2", "qrbh"),
    ("arp.spa == $clients", "qrb"),
    ("arp.sha == 02:00:00:00:00:01", "qrb"),
    ("arp.tha == 00:00:00:00:00:00", "qbh"),
    ("arp.tha == 02:00:00:00:00:02 && arp.op == 2", "r"),
    ("arp.sha[40]", ""),
    ("arp.tha != 00:00:00:00:00:00", "r"),
    ("ip4.src == 10.0.0.1", "tui"),
];

#[test]
fn vlan_and_arp_fields() {
    let (t, u) = vlan_keys(5, 50);
    let bcast = [0; 6];
    let hw = [0, 1, 8, 0, 6, 4];
    let keys = [
        ('t', t),
        ('u', u),
        ('q', Key::from_frame(&arp_frame(1, bcast, 0x806, hw), 1, 0)),
        (
            'r',
            Key::from_frame(&arp_frame(2, [2, 0, 0, 0, 0, 2], 0x806, hw), 1, 0),
        ),
        (
            'b',
            Key::from_frame(&arp_frame(0x101, bcast, 0x806, hw), 1, 0),
        ),
        ('v', Key::from_frame(&arp_frame(3, bcast, 0x8035, hw), 1, 0)),
        (
            'h',
            Key::from_frame(&arp_frame(1, bcast, 0x806, [0, 6, 8, 0, 6, 4]), 1, 0),
        ),
        (
            'i',
            Key::from_frame(
                &Frame::v4([10, 0, 0, 1], [10, 0, 0, 2], L4::udp(1, 2, b"")).build(),
                1,
                0,
            ),
        ),
    ];
    check_table(VLAN_ARP, &keys);
    // The words: `vlan.tci` bit 12 for a tag (Open vSwitch's CFI), the
    // ARP's fields in the address words and l4.src.
    assert_eq!(t.get(Field::VlanTci), 0xb032);
    let q = keys[2].1;
    assert_eq!(q.get(Field::L4Src), 1);
    assert_eq!(q.get(Field::IpSrc), (0x0200_0000_0001 << 64) | 0x0a00_0001);
    assert_eq!(q.get(Field::IpDst), 0x0a00_0002);
}

#[test]
fn vlan_and_arp_field_errors() {
    for (text, why) in [
        ("vlan.pcp == 8", "4-bit constant"),
        ("arp.op == 0x10000", "17-bit constant"),
        // Nominal, as in OVN (Open vSwitch cannot mask `arp_op`).
        ("arp.op > 1", "nominal field"),
        ("arp && !(arp.op == 1)", "nominal field"),
        ("arp.spa == fd00::1", "128-bit constant"),
        ("vlan.vid[12]", "bit"),
    ] {
        let e = parse(text, &policy()).expect_err(text);
        assert!(e.message.contains(why), "{text}: {e}");
    }
}

/// Each match of `table` matches the keys whose names it lists, evaluated
/// and through a classifier of it alone.
fn check_table(table: &[(&str, &str)], keys: &[(char, Key)]) {
    use crate::classify::Classifier;
    for (i, (text, want)) in table.iter().enumerate() {
        let e = parse(text, &policy()).unwrap_or_else(|e| panic!("{text}: {e}"));
        let mut c = Classifier::new();
        c.insert(i as u32, 1, &e)
            .unwrap_or_else(|err| panic!("{text}: {err}"));
        for (name, k) in keys {
            assert_eq!(e.eval(k), want.contains(*name), "{text} on {name}");
            assert_eq!(c.classify(k).is_some(), e.eval(k), "{text} on {name}");
        }
    }
}

/// The matches of `ip.dscp` and `ip.ecn` and what each matches, among an
/// IPv4 TCP SYN of DSCP 46 (EF) and ECN 0 (`e`), an IPv4 ping of DSCP 10
/// and ECN 3 (`p`), an IPv6 UDP datagram of traffic class 0xb9 (DSCP 46,
/// ECN 1; `s`), an IPv4 UDP datagram of TOS 0 (`z`) and an ARP (`a`).
const TOS: &[(&str, &str)] = &[
    ("ip.dscp == 46", "es"),
    ("ip.dscp == 46 && ip4", "e"),
    ("ip.dscp == {10, 12, 14}", "p"),
    ("ip.ecn == 3", "p"),
    ("ip.ecn == 0", "ez"),
    ("ip.dscp == 0", "z"),
    // The TCP flags and the ICMP type and code, which share a word with
    // the TOS byte, are read as before.
    ("ip.dscp == 46 && tcp.flags == 0x002", "e"),
    ("tcp.flags == 0x002", "e"),
    ("icmp4.type == 8 && icmp4.code == 0 && ip.ecn == 3", "p"),
    ("icmp4.type == 8", "p"),
];

#[test]
fn dscp_and_ecn() {
    // An IPv4 frame's TOS is byte 15 (the header's second byte); an IPv6
    // frame's traffic class spans bytes 14 and 15.
    let v4 = |l4: L4, tos: u8| {
        let mut f = Frame::v4([10, 0, 0, 1], [10, 0, 0, 2], l4).build();
        f[15] = tos;
        Key::from_frame(&f, 1, 2)
    };
    let mut f6 = Frame::v6(v6(1), v6(2), L4::udp(1, 2, b"x")).build();
    f6[14] = 0x60 | (0xb9 >> 4);
    f6[15] = (0xb9 << 4) | (f6[15] & 0x0f);
    let mut arp = vec![0xff; 6];
    arp.extend_from_slice(&[2, 0, 0, 0, 0, 1, 0x08, 0x06]);
    arp.extend_from_slice(&[0; 28]);
    let keys = [
        ('e', v4(L4::tcp(40000, 443, 0x002), 46 << 2)),
        ('p', v4(L4::icmp_query(8, 1, 1), (10 << 2) | 3)),
        ('s', Key::from_frame(&f6, 1, 2)),
        ('z', v4(L4::udp(1, 2, b"x"), 0)),
        ('a', Key::from_frame(&arp, 1, 0)),
    ];
    check_table(TOS, &keys);
    assert_eq!(keys[0].1.get(Field::IpTos), 46 << 2);
    assert_eq!(keys[2].1.get(Field::IpTos), 0xb9);
    // Nominal, as in OVN (Open vSwitch cannot mask `ip_dscp` or
    // `nw_ecn`): equality only, in the positive sense.
    for text in [
        "ip.dscp >= 40",
        "ip.dscp < 11",
        "ip.ecn != 0",
        "!(ip.dscp == 46)",
        "ip.dscp[0] == 1",
    ] {
        let e = parse(text, &policy()).expect_err(text);
        assert!(e.message.contains("nominal field"), "{text}: {e}");
    }
}
