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
    assert!(!m("udp", &later));
    assert!(m("ip.proto == 17", &later));
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
