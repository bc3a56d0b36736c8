//! No input makes `reply` panic, and whatever it answers is well formed.

use ctrack_policy::reject;
use ctrack_wire::build::{Ext, Frame, L4};
use ctrack_wire::ethernet::ethertype;
use proptest::prelude::*;

use crate::answers::{data_chunk, init, sctp};
use crate::{read, v4, v6};

/// Frames of every kind `reply` answers or refuses.
fn seeds() -> Vec<Vec<u8>> {
    let l4s = vec![
        L4::tcp_seg(1, 2, 0x002, 9, 0, 0, b""),
        L4::tcp_seg(1, 2, 0x018, 9, 10, 0, b"data"),
        L4::udp(1, 2, &[7; 40]),
        L4::icmp_query(8, 1, 2),
        L4::icmp_query(128, 1, 2),
        sctp(0, init(5)),
        sctp(6, data_chunk()),
        L4::Raw {
            proto: 47,
            payload: vec![0; 12],
        },
    ];
    let mut out = Vec::new();
    for l4 in l4s {
        out.push(v4(l4.clone()).build());
        out.push(v4(l4.clone()).vlan(ethertype::VLAN, 5).build());
        let mut f = v6(l4);
        out.push(f.build());
        f.ext = vec![Ext::HopByHop(0)];
        out.push(f.vlan(ethertype::QINQ, 1).vlan(ethertype::VLAN, 2).build());
    }
    let mut opts = Frame::v4([1, 2, 3, 4], [5, 6, 7, 8], L4::udp(1, 2, b"x"));
    opts.ip_options = vec![1; 8];
    out.push(opts.build());
    out
}

/// If there is an answer, it reads back well formed (every checksum right)
/// and is itself never answered.
fn check(frame: &[u8]) {
    if let Some(a) = reject::reply(frame) {
        let _ = read(&a);
        assert!(a.len() <= 14 + 8 + 1280, "{} bytes", a.len());
        assert_eq!(reject::reply(&a), None);
    }
}

#[test]
fn every_prefix_of_every_seed() {
    let seeds = seeds();
    let answered = seeds.iter().filter(|s| reject::reply(s).is_some());
    // All but ICMPv4 echo over IPv6 (type 8 there is an error), twice.
    assert_eq!(answered.count(), seeds.len() - 2);
    for s in seeds {
        for n in 0..=s.len() {
            check(&s[..n]);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn random_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
        check(&bytes);
    }

    #[test]
    fn random_bytes_behind_an_ip_header(
        v6 in any::<bool>(),
        proto in prop_oneof![Just(1u8), Just(6), Just(17), Just(58), Just(132), any::<u8>()],
        body in proptest::collection::vec(any::<u8>(), 0..120),
    ) {
        let raw = L4::Raw { proto, payload: body };
        let f = if v6 { crate::v6(raw) } else { v4(raw) };
        check(&f.build());
    }

    #[test]
    fn mutated_seeds(
        pick in any::<prop::sample::Index>(),
        edits in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..6),
        cut in any::<prop::sample::Index>(),
    ) {
        let seeds = seeds();
        let mut f = seeds[pick.index(seeds.len())].clone();
        for (at, b) in edits {
            let i = at.index(f.len());
            f[i] = b;
        }
        let keep = f.len() - cut.index(f.len() / 4 + 1);
        check(&f[..keep]);
    }
}
