//! Packets of a known connection sent between other ports than the ones
//! that opened it: the connection's addresses and ports, from or to a third
//! port whose zone is the one the connection is tracked in. OVN tracks a
//! packet in its inport's zone and in its outport's, so the third port's
//! stage finds no connection there and its ACLs meet the packet; ctrack,
//! which tracks a connection once, tells such packets from its session's
//! by the zones its word keeps (docs/firewall.md, "Packets of a connection
//! between other ports"). Each case says what OVN's two lookups give.

mod common;
use common::{each, in_a_burst, plain, seg};

use ctrack_core::{Config, FragConfig, Tracker};
use ctrack_policy::expr::Expr;
use ctrack_policy::firewall::{AclRef, Action, Decision, DropReason, Firewall, FwOutputs, Stage};
use ctrack_policy::key::{Field, flag};
use ctrack_policy::model::{Acl, AclAction, DefaultAction, Direction, Policy};
use ctrack_wire::build::{Frame, L4, quote};

const A_MAC: [u8; 6] = [2, 0, 0, 0, 0, 1];
const B_MAC: [u8; 6] = [2, 0, 0, 0, 0, 2];
const C_MAC: [u8; 6] = [2, 0, 0, 0, 0, 3];
const A2_MAC: [u8; 6] = [2, 0, 0, 0, 0, 4];
const A_IP: [u8; 4] = [10, 0, 0, 1];
const B_IP: [u8; 4] = [10, 0, 0, 2];
const C_IP: [u8; 4] = [10, 0, 0, 3];
/// Ports' numbers in the key (from 1, in file order).
const B: u128 = 2;
const C: u128 = 3;

/// The ACL `to_b`, 0: B takes UDP (to-lport allow-related). The ACL
/// `leave`, 1: everything may leave (from-lport allow-related `ip`). No
/// to-lport ACL for A or C: their stage's default drops. Then `extra`, in
/// order, from index 2.
fn policy(extra: Vec<Acl>) -> Policy {
    let to_b = Acl::new(
        0,
        Direction::ToLport,
        1000,
        AclAction::AllowRelated,
        Expr::And(vec![
            Expr::eq(Field::Outport, B),
            Expr::flags(flag::IP | flag::UDP),
        ]),
    );
    let leave = Acl::new(
        1,
        Direction::FromLport,
        1,
        AclAction::AllowRelated,
        Expr::flags(flag::IP),
    );
    let mut acls = vec![to_b, leave];
    for mut a in extra {
        a.index = acls.len();
        a.name = format!("acl#{}", a.index);
        acls.push(a);
    }
    Policy {
        default: DefaultAction::Drop,
        ports: vec![
            common::port("a", A_MAC, 1),
            common::port("b", B_MAC, 2),
            common::port("c", C_MAC, 3),
        ],
        acls,
        ..Policy::default()
    }
}

fn fw(p: Policy) -> Firewall<u64> {
    Firewall::new(Tracker::new(Config::default()), FragConfig::default(), p).unwrap()
}

/// A datagram of the A–B flow (A's 4000 to B's 53), or its reply (`back`),
/// with the MACs given.
fn udp(back: bool, from: [u8; 6], to: [u8; 6]) -> Vec<u8> {
    let mut f = if back {
        Frame::v4(B_IP, A_IP, L4::udp(53, 4000, b"answer"))
    } else {
        Frame::v4(A_IP, B_IP, L4::udp(4000, 53, b"query"))
    };
    f.eth_src = from;
    f.eth_dst = to;
    f.build()
}

/// An ICMP port unreachable from `src` (MAC `from`) to A, about the A–B
/// flow's datagram.
fn unreachable(src: [u8; 4], from: [u8; 6]) -> Vec<u8> {
    let q = Frame::v4(A_IP, B_IP, L4::udp(4000, 53, b"query")).ip_packet();
    let mut f = Frame::v4(src, A_IP, L4::icmp_error(3, 3, &quote(&q, 8)));
    f.eth_src = from;
    f.eth_dst = A_MAC;
    f.build()
}

/// The decisions frame by frame, checked against the same frames in
/// bursts (the first alone, the rest in one burst: each chunk's frames
/// are of one MAC pair, so mixed pairs take the per-frame path and runs of
/// one pair the burst's), with the same `cross_pair` count.
fn decide(p: Policy, frames: &[Vec<u8>]) -> (Vec<Decision>, u64) {
    let mut st = FwOutputs::default();
    let want = each(&fw(p.clone()), frames, &mut st);
    let burst_fw = fw(p);
    let mut sb = FwOutputs::default();
    let mut got = each(&burst_fw, &frames[..1], &mut sb);
    for f in &frames[1..] {
        got.extend(in_a_burst(&burst_fw, std::slice::from_ref(f), &mut sb));
    }
    let plain_all = |ds: &[Decision]| ds.iter().map(plain).collect::<Vec<_>>();
    assert_eq!(plain_all(&got), plain_all(&want));
    assert_eq!(sb.stats.cross_pair, st.stats.cross_pair);
    (want, st.stats.cross_pair)
}

fn what(d: &Decision) -> (Action, Stage, AclRef) {
    (d.action, d.stage, d.acl)
}

/// A–B's flow, answered; then its datagram sent to C's MAC. OVN: A's zone
/// holds the connection (the from-lport ACLs meet an original-direction
/// packet again: `ip` allows), C's does not (C's to-lport ACLs meet it:
/// none, the default drops).
#[test]
fn a_sessions_datagram_sent_to_a_third_port_meets_its_acls() {
    let frames = [
        udp(false, A_MAC, B_MAC),
        udp(true, B_MAC, A_MAC),
        udp(false, A_MAC, C_MAC),
        udp(false, A_MAC, B_MAC),
        udp(true, B_MAC, A_MAC),
    ];
    let (ds, cross) = decide(policy(vec![]), &frames);
    assert_eq!(
        what(&ds[0]),
        (Action::Allow, Stage::ToLport, AclRef::Acl(0))
    );
    assert_eq!(
        what(&ds[1]),
        (Action::Allow, Stage::Session, AclRef::Acl(0))
    );
    assert_eq!(
        what(&ds[2]),
        (Action::Drop, Stage::Default, AclRef::Default)
    );
    assert_eq!(ds[2].reason, Some(DropReason::Default));
    // The session goes on as before.
    assert_eq!(
        what(&ds[3]),
        (Action::Allow, Stage::Session, AclRef::Acl(0))
    );
    assert_eq!(
        what(&ds[4]),
        (Action::Allow, Stage::Session, AclRef::Acl(0))
    );
    assert_eq!(cross, 1);
    // Where C takes UDP, it passes, decided by C's ACL, not the session.
    let to_c = Acl::new(
        0,
        Direction::ToLport,
        500,
        AclAction::AllowRelated,
        Expr::And(vec![Expr::eq(Field::Outport, C), Expr::flags(flag::UDP)]),
    );
    let (ds, _) = decide(policy(vec![to_c]), &frames);
    assert_eq!(
        what(&ds[2]),
        (Action::Allow, Stage::ToLport, AclRef::Acl(2))
    );
}

/// A reply of A–B's flow sent from C's MAC. OVN: C's zone does not hold
/// the connection (C's from-lport ACLs meet it: `ip` allows), A's holds
/// it as a reply (it passes A's to-lport stage, which has no ACL and
/// whose default drops: meeting both stages' ACLs would drop it).
#[test]
fn a_reply_from_a_third_port_meets_that_ports_from_lport_acls_only() {
    let frames = [
        udp(false, A_MAC, B_MAC),
        udp(true, B_MAC, A_MAC),
        udp(true, C_MAC, A_MAC),
    ];
    let (ds, cross) = decide(policy(vec![]), &frames);
    assert_eq!(
        what(&ds[2]),
        (Action::Allow, Stage::FromLport, AclRef::Acl(1))
    );
    assert_eq!(cross, 1);
    // C's from-lport ACLs may stop it.
    let c_out = Acl::new(
        0,
        Direction::FromLport,
        100,
        AclAction::Drop,
        Expr::eq(Field::Inport, C),
    );
    let (ds, _) = decide(policy(vec![c_out]), &frames);
    assert_eq!(
        what(&ds[2]),
        (Action::Drop, Stage::FromLport, AclRef::Acl(2))
    );
}

/// An ICMP error about A–B's flow: from B, related, it passes on the
/// session; from C, whose zone does not hold the connection, it is
/// invalid there (OVN drops `ct.inv`).
#[test]
fn an_icmp_error_from_a_third_port_is_invalid() {
    let frames = [
        udp(false, A_MAC, B_MAC),
        udp(true, B_MAC, A_MAC),
        unreachable(C_IP, C_MAC),
        unreachable(B_IP, B_MAC),
    ];
    let (ds, cross) = decide(policy(vec![]), &frames);
    assert_eq!(
        what(&ds[2]),
        (Action::Drop, Stage::Session, AclRef::Invalid)
    );
    assert_eq!(ds[2].reason, Some(DropReason::Invalid));
    assert_eq!(
        what(&ds[3]),
        (Action::Allow, Stage::Session, AclRef::Acl(0))
    );
    assert_eq!(cross, 1);
}

/// Before any reply: a datagram of the flow sent to C's MAC meets the ACLs
/// and commits nothing, so the connection keeps its ports, its ACL and its
/// label: B's reply is the session's, under B's ACL, and a later datagram
/// to C (the connection now established) is C's ACLs' again.
#[test]
fn an_unanswered_flows_datagram_to_a_third_port_leaves_the_connection_alone() {
    let mut to_c = Acl::new(
        0,
        Direction::ToLport,
        500,
        AclAction::AllowRelated,
        Expr::And(vec![Expr::eq(Field::Outport, C), Expr::flags(flag::UDP)]),
    );
    to_c.label = Some(77);
    let frames = [
        udp(false, A_MAC, B_MAC),
        udp(false, A_MAC, C_MAC),
        udp(true, B_MAC, A_MAC),
        udp(false, A_MAC, C_MAC),
        udp(false, A_MAC, B_MAC),
    ];
    let (ds, cross) = decide(policy(vec![to_c]), &frames);
    let d: Vec<_> = ds.iter().map(what).collect();
    assert_eq!(
        d,
        [
            (Action::Allow, Stage::ToLport, AclRef::Acl(0)),
            (Action::Allow, Stage::ToLport, AclRef::Acl(2)),
            (Action::Allow, Stage::Session, AclRef::Acl(0)),
            (Action::Allow, Stage::ToLport, AclRef::Acl(2)),
            (Action::Allow, Stage::Session, AclRef::Acl(0)),
        ]
    );
    assert_eq!(cross, 2);
    // Nor did C's ACL label it (OVN labels the connection it commits in
    // C's zone).
    assert!(ds.iter().all(|d| d.ct.is_some_and(|v| v.label == 0)));
    // Without C's ACL the datagram to C is dropped, and the flow is as
    // before.
    let (ds, _) = decide(policy(vec![]), &frames[..3]);
    assert_eq!(
        what(&ds[1]),
        (Action::Drop, Stage::Default, AclRef::Default)
    );
    assert_eq!(
        what(&ds[2]),
        (Action::Allow, Stage::Session, AclRef::Acl(0))
    );
}

/// Two ports in one zone share connections, as in OVN, where that zone
/// holds them for both: B's reply sent to A2 (A's zone) is the session's.
#[test]
fn ports_of_one_zone_share_their_sessions() {
    let mut p = policy(vec![]);
    p.ports.push(common::port("a2", A2_MAC, 1));
    let frames = [
        udp(false, A_MAC, B_MAC),
        udp(true, B_MAC, A2_MAC),
        udp(false, A2_MAC, B_MAC),
    ];
    let (ds, cross) = decide(p, &frames);
    for d in &ds[1..] {
        assert_eq!(what(d), (Action::Allow, Stage::Session, AclRef::Acl(0)));
    }
    assert_eq!(cross, 0);
}

/// A burst of one MAC pair carrying the flow's datagrams the wrong way
/// round (A's addresses from B's MAC, B's from A's) among its session's:
/// the burst's fast path tells them apart as frame by frame does.
#[test]
fn a_burst_tells_the_sessions_packets_from_others() {
    let p = policy(vec![]);
    let mut st = FwOutputs::default();
    let mut frames = vec![udp(false, A_MAC, B_MAC), udp(true, B_MAC, A_MAC)];
    for i in 0..40 {
        frames.push(match i % 5 {
            1 => udp(false, B_MAC, A_MAC),
            3 => udp(true, A_MAC, B_MAC),
            _ if i % 2 == 0 => udp(false, A_MAC, B_MAC),
            _ => udp(true, B_MAC, A_MAC),
        });
    }
    let want = each(&fw(p.clone()), &frames, &mut st);
    let f = fw(p);
    let mut sb = FwOutputs::default();
    let mut got = each(&f, &frames[..2], &mut sb);
    got.extend(in_a_burst(&f, &frames[2..], &mut sb));
    assert_eq!(
        got.iter().map(plain).collect::<Vec<_>>(),
        want.iter().map(plain).collect::<Vec<_>>()
    );
    // The wrong-way datagrams: A's addresses from B's MAC meet both
    // stages (original direction: B's from-lport `ip` allows, A's
    // to-lport default drops); B's from A's MAC are a reply both zones
    // hold, the session's.
    assert_eq!(
        what(&want[3]),
        (Action::Drop, Stage::Default, AclRef::Default)
    );
    assert_eq!(
        what(&want[5]),
        (Action::Allow, Stage::Session, AclRef::Acl(0))
    );
    assert_eq!(st.stats.cross_pair, sb.stats.cross_pair);
    assert_eq!(st.stats.cross_pair, 8);
}

const S_IP: [u8; 4] = [192, 0, 2, 2];

/// An FTP server on port S (B's MAC, address `S_IP`, zone 2) that A may
/// reach (ACL 0, to-lport, with the FTP gateway); everyone may send
/// (ACL 1); C's from-lport stage drops everything (ACL 2).
fn ftp_policy() -> Policy {
    let mut ftp = Acl::new(
        0,
        Direction::ToLport,
        1000,
        AclAction::AllowRelated,
        Expr::And(vec![
            Expr::eq(Field::Outport, B),
            Expr::flags(flag::TCP),
            Expr::eq(Field::L4Dst, 21),
        ]),
    );
    ftp.alg = Some(ctrack_core::action::Alg::Ftp);
    let mut p = policy(vec![Acl::new(
        0,
        Direction::FromLport,
        100,
        AclAction::Drop,
        Expr::eq(Field::Inport, C),
    )]);
    p.acls[0] = ftp;
    p
}

/// Active FTP: A announces port 40001 (PORT), the server opens the data
/// connection from port 20. The same SYN from C's MAC finds the
/// expectation in the shared zone, but C's zone holds none in OVN: C's
/// from-lport ACLs meet it and drop it, and the expectation stays for
/// the server's. Once the data connection is established, its segment
/// from C's MAC (`+est+rel`, which goes as any established packet, not
/// as an ICMP error) meets C's ACLs the same way. (Mutation round 72:
/// taken as related, it was dropped as invalid, and no test saw it.)
#[test]
fn an_expected_connection_from_a_third_port_meets_its_acls() {
    use ctrack_wire::tcp::flags::{ACK, PSH, SYN};
    let (a, s) = ((A_IP, 40000), (S_IP, 21));
    let (out, back) = ((A_MAC, B_MAC), (B_MAC, A_MAC));
    let data = ((S_IP, 20), (A_IP, 40001));
    let frames = [
        seg((a, s), (SYN, 100, 0), b"", out),
        seg((s, a), (SYN | ACK, 500, 101), b"", back),
        seg((a, s), (ACK, 101, 501), b"", out),
        seg(
            (a, s),
            (PSH | ACK, 101, 501),
            b"PORT 10,0,0,1,156,65\r\n",
            out,
        ),
        seg(data, (SYN, 9000, 0), b"", (C_MAC, A_MAC)),
        seg(data, (SYN, 9000, 0), b"", back),
        seg(
            ((A_IP, 40001), (S_IP, 20)),
            (SYN | ACK, 7000, 9001),
            b"",
            out,
        ),
        seg(data, (ACK, 9001, 7001), b"", back),
        seg(data, (PSH | ACK, 9001, 7001), b"x", (C_MAC, A_MAC)),
    ];
    let (ds, cross) = decide(ftp_policy(), &frames);
    let d: Vec<_> = ds.iter().map(what).collect();
    assert_eq!(
        d[3..],
        [
            (Action::Allow, Stage::Session, AclRef::Acl(0)),
            (Action::Drop, Stage::FromLport, AclRef::Acl(2)),
            (Action::Allow, Stage::Session, AclRef::Acl(0)),
            (Action::Allow, Stage::Session, AclRef::Acl(0)),
            (Action::Allow, Stage::Session, AclRef::Acl(0)),
            (Action::Drop, Stage::FromLport, AclRef::Acl(2)),
        ]
    );
    assert_eq!(ds[8].reason, Some(DropReason::Acl));
    assert_eq!(cross, 2);
}

/// A–B's flow opened on `fw` and answered: the answer is the session's,
/// under B's ACL.
fn open_a_to_b(fw: &Firewall<u64>, st: &mut FwOutputs<u64>) {
    let opened = each(fw, &[udp(false, A_MAC, B_MAC), udp(true, B_MAC, A_MAC)], st);
    assert_eq!(
        what(&opened[1]),
        (Action::Allow, Stage::Session, AclRef::Acl(0))
    );
}

/// A packet of the A–B flow's reply tuple sent from A's MAC to B's (the
/// zones the flow's own, the way round of its opening) after the same
/// policy is given again: the connection is judged again by the ports its
/// word's zones name (A to B), not by the packet's swapped as a reply's
/// (B to A, which no ACL would let in), and stays the session's, as it
/// was before the change.
#[test]
fn a_connection_is_judged_again_between_the_ports_that_opened_it() {
    let fw = fw(policy(vec![]));
    let mut st = FwOutputs::default();
    open_a_to_b(&fw, &mut st);
    let odd = udp(true, A_MAC, B_MAC);
    let before = each(&fw, std::slice::from_ref(&odd), &mut st);
    fw.set_policy(policy(vec![])).unwrap();
    let after = each(&fw, std::slice::from_ref(&odd), &mut st);
    assert_eq!(st.stats.rejudged, 1);
    assert_eq!(what(&after[0]), what(&before[0]));
    assert_eq!(
        what(&after[0]),
        (Action::Allow, Stage::Session, AclRef::Acl(0))
    );
}

/// A connection judged again on a reply is judged by its opening packet
/// rebuilt, the reply's MAC addresses swapped back: an ACL that lets B
/// take UDP from A's MAC alone (`eth.src`) keeps allowing it, whichever
/// way the packet that meets the change goes; and an ACL above it that
/// drops VLAN-tagged frames does not meet the untagged opening packet.
/// (Mutation round 72: the MACs swapped for every packet, or for none,
/// or the rebuilt packet's flags all kept from the packet at hand, or
/// its VLAN flag always set, went unseen, as no ACL of the tests read
/// them.)
#[test]
fn a_connection_judged_again_on_a_reply_reads_its_opening_macs() {
    let mac = |m: [u8; 6]| u128::from(ctrack_policy::key::mac_u64(&m));
    let tagged = Acl::new(
        0,
        Direction::ToLport,
        2000,
        AclAction::Drop,
        Expr::flags(flag::VLAN),
    );
    let mut p = policy(vec![tagged]);
    p.acls[0].expr = Expr::And(vec![
        Expr::eq(Field::Outport, B),
        Expr::flags(flag::IP | flag::UDP),
        Expr::eq(Field::EthSrc, mac(A_MAC)),
    ]);
    let fw = fw(p.clone());
    let mut st = FwOutputs::default();
    open_a_to_b(&fw, &mut st);
    for (n, back) in [(1, true), (2, false), (3, true)] {
        fw.set_policy(p.clone()).unwrap();
        let (from, to) = if back { (B_MAC, A_MAC) } else { (A_MAC, B_MAC) };
        let d = each(&fw, &[udp(back, from, to)], &mut st);
        assert_eq!(st.stats.rejudged, n);
        assert_eq!(
            what(&d[0]),
            (Action::Allow, Stage::Session, AclRef::Acl(0)),
            "judged again on {}",
            if back { "a reply" } else { "a datagram" }
        );
    }
}

/// A connection judged again on its reply is judged by an opening packet
/// of its own protocol: an ICMP echo under an ACL for `icmp4` and an
/// ICMPv6 echo under one for `icmp6` stay allowed. (Mutation round 72:
/// the rebuilt packet's ICMP flags dropped for either version went
/// unseen.)
#[test]
fn a_connection_judged_again_keeps_its_protocol() {
    use std::net::Ipv6Addr;
    let (a6, b6): (Ipv6Addr, Ipv6Addr) = ("fd00::1".parse().unwrap(), "fd00::2".parse().unwrap());
    let cases: [(u16, Frame, Frame); 2] = [
        (
            flag::ICMP4,
            Frame::v4(A_IP, B_IP, L4::icmp_query(8, 7, 1)),
            Frame::v4(B_IP, A_IP, L4::icmp_query(0, 7, 1)),
        ),
        (
            flag::ICMP6,
            Frame::v6(a6, b6, L4::icmp_query(128, 7, 1)),
            Frame::v6(b6, a6, L4::icmp_query(129, 7, 1)),
        ),
    ];
    for (proto, mut ask, mut answer) in cases {
        (ask.eth_src, ask.eth_dst) = (A_MAC, B_MAC);
        (answer.eth_src, answer.eth_dst) = (B_MAC, A_MAC);
        let mut p = policy(vec![]);
        p.acls[0].expr = Expr::And(vec![Expr::eq(Field::Outport, B), Expr::flags(proto)]);
        let fw = fw(p.clone());
        let mut st = FwOutputs::default();
        let opened = each(&fw, &[ask.build()], &mut st);
        assert_eq!(
            what(&opened[0]),
            (Action::Allow, Stage::ToLport, AclRef::Acl(0)),
            "{proto:x}"
        );
        fw.set_policy(p).unwrap();
        let d = each(&fw, &[answer.build()], &mut st);
        assert_eq!(st.stats.rejudged, 1, "{proto:x}");
        assert_eq!(
            what(&d[0]),
            (Action::Allow, Stage::Session, AclRef::Acl(0)),
            "{proto:x}"
        );
    }
}
