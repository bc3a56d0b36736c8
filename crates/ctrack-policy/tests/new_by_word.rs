//! A `+new` packet of a connection already committed (a one-way UDP flow,
//! a SYN sent again) gets its verdict from the connection's word where the
//! ACLs would decide it as they decided the packet that committed it
//! (`Compiled::takes_words`): the same decisions and counters as a firewall
//! whose ACLs meet every such packet, and the ACLs still meet the packets
//! they could decide otherwise.

mod common;
use common::{each, in_a_burst, plain, seg};

use ctrack_core::{Config, FragConfig, Tracker};
use ctrack_policy::expr::Expr;
use ctrack_policy::firewall::{AclRef, Action, Decision, Firewall, FwOutputs, Stage};
use ctrack_policy::key::{Field, flag};
use ctrack_policy::model::{Acl, AclAction, DefaultAction, Direction, Policy, Port};
use ctrack_wire::build::{Frame, L4};

const A_MAC: [u8; 6] = [2, 0, 0, 0, 0, 1];
const B_MAC: [u8; 6] = [2, 0, 0, 0, 0, 2];
const C_MAC: [u8; 6] = [2, 0, 0, 0, 0, 3];
const A_IP: [u8; 4] = [10, 0, 0, 1];
const B_IP: [u8; 4] = [10, 0, 0, 2];
/// Port B's number in the key (ports are numbered from 1).
const B: u128 = 2;

/// Ports A, B and C, in zones 1, 2 and 3: A's packets to B and to C are
/// tracked in the same zone (A's, the lower). To-lport: B takes UDP
/// (allow-related, logged); C takes nothing (its stage's default drops).
/// From-lport: everything may leave (allow-related `ip`). With `extra`,
/// one more ACL, last, at the highest priority.
fn policy(extra: Option<(AclAction, Expr)>) -> Policy {
    let port = common::port;
    let mut to_b = Acl::new(
        0,
        Direction::ToLport,
        1000,
        AclAction::AllowRelated,
        Expr::And(vec![
            Expr::eq(Field::Outport, B),
            Expr::flags(flag::IP | flag::UDP),
        ]),
    );
    to_b.log = true;
    let mut acls = vec![
        to_b,
        Acl::new(
            1,
            Direction::FromLport,
            1,
            AclAction::AllowRelated,
            Expr::flags(flag::IP),
        ),
    ];
    if let Some((action, expr)) = extra {
        acls.push(Acl::new(acls.len(), Direction::ToLport, 2000, action, expr));
    }
    Policy {
        default: DefaultAction::Drop,
        ports: vec![
            port("a", A_MAC, 1),
            port("b", B_MAC, 2),
            port("c", C_MAC, 3),
        ],
        acls,
        ..Policy::default()
    }
}

/// The same decisions with every `+new` packet meeting the ACLs: an ACL
/// that reads `ip.ttl` (which may change from packet to packet) keeps the
/// words from deciding, and this one never matches a packet of TTL 64.
fn ttl_never() -> Option<(AclAction, Expr)> {
    Some((
        AclAction::Drop,
        Expr::And(vec![Expr::flags(flag::IP), Expr::eq(Field::IpTtl, 0)]),
    ))
}

fn fw(p: Policy) -> Firewall<u64> {
    Firewall::new(Tracker::new(Config::default()), FragConfig::default(), p).unwrap()
}

/// A UDP datagram from A (source port `sport`) to B's address, sent to
/// the port owning `to` (B's MAC or C's), with `ttl`.
fn udp(sport: u16, to: [u8; 6], ttl: u8) -> Vec<u8> {
    let mut f = Frame::v4(A_IP, B_IP, L4::udp(sport, 53, b"query"));
    f.eth_src = A_MAC;
    f.eth_dst = to;
    f.ttl = ttl;
    f.build()
}

/// The same decisions, frame by frame, as [`plain`] shows them.
fn same(got: &[Decision], want: &[Decision]) {
    assert_eq!(
        got.iter().map(plain).collect::<Vec<_>>(),
        want.iter().map(plain).collect::<Vec<_>>()
    );
}

/// A one-way flow to B with, in its middle, datagrams of the same
/// addresses and ports sent to C's MAC, and one from B's MAC to A's (the
/// pair the other way round, the addresses as they were), and a second
/// flow.
fn traffic() -> Vec<Vec<u8>> {
    let mut frames = Vec::new();
    for i in 0..6 {
        frames.push(udp(4000, B_MAC, 64));
        if i == 2 || i == 3 {
            frames.push(udp(4000, C_MAC, 64));
        }
        if i == 4 {
            let mut f = udp(4000, A_MAC, 64);
            f[6..12].copy_from_slice(&B_MAC);
            frames.push(f);
        }
        frames.push(udp(4001, B_MAC, 64));
    }
    frames
}

#[test]
fn a_one_way_flow_is_decided_by_its_word_as_the_acls_would() {
    let frames = traffic();
    let words = fw(policy(None));
    let acls = fw(policy(ttl_never()));
    let (mut sw, mut sa) = (FwOutputs::default(), FwOutputs::default());
    let got = each(&words, &frames, &mut sw);
    let want = each(&acls, &frames, &mut sa);
    same(&got, &want);
    // Every datagram to B passes under B's ACL (its to-lport stage), the
    // ones to C and the one to A are dropped by their to-lport stage's
    // default: the connection A's datagrams to B opened is not theirs to
    // pass on.
    for (f, d) in frames.iter().zip(&got) {
        if f[..6] != B_MAC {
            assert_eq!((d.action, d.stage), (Action::Drop, Stage::Default));
        } else {
            assert_eq!(
                (d.action, d.stage, d.acl, d.log),
                (Action::Allow, Stage::ToLport, AclRef::Acl(0), true)
            );
        }
    }
    // All but the first datagram of each flow to B took the word.
    assert_eq!(sw.stats.new_by_word, 10);
    assert_eq!(sa.stats.new_by_word, 0);
    let (w, a) = (&sw.stats, &sa.stats);
    assert_eq!(w.verdicts, a.verdicts);
    assert_eq!(w.stages, a.stages);
    assert_eq!(w.drops, a.drops);
    assert_eq!(&w.acls[..2], &a.acls[..2]);
    assert_eq!(w.defaults, a.defaults);
    assert_eq!(w.tracker, a.tracker);
    assert_eq!((w.acls[0].packets, w.acls[0].conns), (12, 2));
}

#[test]
fn a_burst_takes_the_words_as_the_packet_path_does() {
    let frames = traffic();
    let acls = fw(policy(ttl_never()));
    let mut sa = FwOutputs::default();
    let want = each(&acls, &frames, &mut sa);
    let words = fw(policy(None));
    // The flows' first datagrams one by one, then the rest in one burst.
    let mut sw = FwOutputs::default();
    let mut got = each(&words, &frames[..2], &mut sw);
    got.extend(in_a_burst(&words, &frames[2..], &mut sw));
    same(&got, &want);
    assert_eq!(sw.stats.new_by_word, 10);
    assert_eq!(&sw.stats.acls[..2], &sa.stats.acls[..2]);
    assert_eq!(sw.stats.verdicts, sa.stats.verdicts);
    assert_eq!(sw.stats.stages, sa.stats.stages);
}

#[test]
fn a_field_that_changes_from_packet_to_packet_keeps_the_acls_deciding() {
    // Above B's allow: datagrams of TTL 1 are dropped.
    let ttl_one = Some((
        AclAction::Drop,
        Expr::And(vec![Expr::flags(flag::IP), Expr::eq(Field::IpTtl, 1)]),
    ));
    let fw = fw(policy(ttl_one));
    let mut st = FwOutputs::default();
    let frames = [
        udp(4000, B_MAC, 64),
        udp(4000, B_MAC, 1),
        udp(4000, B_MAC, 64),
    ];
    let got = each(&fw, &frames, &mut st);
    assert_eq!(
        got.iter().map(|d| (d.action, d.acl)).collect::<Vec<_>>(),
        [
            (Action::Allow, AclRef::Acl(0)),
            (Action::Drop, AclRef::Acl(2)),
            (Action::Allow, AclRef::Acl(0)),
        ]
    );
    assert_eq!(st.stats.new_by_word, 0);
}

#[test]
fn after_a_policy_change_a_connection_of_the_older_one_meets_the_acls() {
    let fw = fw(policy(None));
    let mut st = FwOutputs::default();
    let d = each(&fw, &[udp(4000, B_MAC, 64), udp(4000, B_MAC, 64)], &mut st);
    assert!(d.iter().all(|d| d.acl == AclRef::Acl(0)));
    assert_eq!(st.stats.new_by_word, 1);
    // The same policy again, a new generation. The connection's word is
    // of the older one (a commit leaves an existing connection's word as
    // it is; its first packet with a reply re-judges it): its `+new`
    // packets meet the ACLs again, while a flow opened now takes its word.
    fw.set_policy(policy(None)).unwrap();
    let frames = [
        udp(4000, B_MAC, 64),
        udp(4000, B_MAC, 64),
        udp(4002, B_MAC, 64),
        udp(4002, B_MAC, 64),
    ];
    let d = each(&fw, &frames, &mut st);
    assert!(
        d.iter()
            .all(|d| (d.action, d.acl) == (Action::Allow, AclRef::Acl(0)))
    );
    assert_eq!(
        st.stats.new_by_word, 2,
        "the new flow's second datagram only"
    );
    // A policy that drops what B took: the old flow's next datagram meets
    // it, and so does the newer flow's, whose word is now of an older
    // generation.
    fw.set_policy(policy(Some((AclAction::Drop, Expr::flags(flag::UDP)))))
        .unwrap();
    let d = each(&fw, &[udp(4000, B_MAC, 64), udp(4002, B_MAC, 64)], &mut st);
    assert!(
        d.iter()
            .all(|d| (d.action, d.acl) == (Action::Drop, AclRef::Acl(2)))
    );
    assert_eq!(st.stats.new_by_word, 2);
}

#[test]
fn connections_the_default_commits_take_their_words_too() {
    // Default allow in a stateful policy with no from-lport ACL: a flow to
    // C, which no ACL decides, is committed by the default and counted as
    // to-lport's.
    let mk = |extra| {
        let mut p = Policy {
            default: DefaultAction::Allow,
            ..policy(None)
        };
        p.acls.truncate(1);
        if let Some((action, expr)) = extra {
            p.acls
                .push(Acl::new(1, Direction::ToLport, 2000, action, expr));
        }
        p
    };
    let frames: Vec<_> = (0..8)
        .map(|i| match i % 2 {
            0 => udp(5000, C_MAC, 64),
            _ => udp(5001, B_MAC, 64),
        })
        .collect();
    let (words, acls) = (fw(mk(None)), fw(mk(ttl_never())));
    let (mut sw, mut sa) = (FwOutputs::default(), FwOutputs::default());
    let got = each(&words, &frames, &mut sw);
    let want = each(&acls, &frames, &mut sa);
    same(&got, &want);
    let to_c: Vec<_> = frames
        .iter()
        .zip(&got)
        .filter(|(f, _)| f[..6] == C_MAC)
        .map(|(_, d)| (d.action, d.stage, d.acl))
        .collect();
    assert_eq!(to_c, [(Action::Allow, Stage::Default, AclRef::Default); 4]);
    assert_eq!((sw.stats.new_by_word, sa.stats.new_by_word), (6, 0));
    assert_eq!(sw.stats.defaults, sa.stats.defaults);
    assert_eq!(sw.stats.defaults[1].packets, 4);
    assert_eq!(sw.stats.stages, sa.stats.stages);
    assert_eq!(&sw.stats.acls[..1], &sa.stats.acls[..1]);
}

#[test]
fn a_burst_of_one_pair_takes_each_frames_way_round() {
    // One pair of MACs, both ways round, in one burst: the frame from B's
    // MAC to A's with the flow's addresses as A sent them is a `+new`
    // packet of A's connection, between the ports the other way round;
    // A's to-lport stage (its default) drops it.
    let odd = {
        let mut f = udp(4000, A_MAC, 64);
        f[6..12].copy_from_slice(&B_MAC);
        f
    };
    let mut frames = vec![udp(4000, B_MAC, 64), udp(4000, B_MAC, 64)];
    frames.push(odd);
    frames.push(udp(4000, B_MAC, 64));
    let acls = fw(policy(ttl_never()));
    let mut sa = FwOutputs::default();
    let want = each(&acls, &frames, &mut sa);
    assert_eq!(want[2].action, Action::Drop);
    let words = fw(policy(None));
    let mut sw = FwOutputs::default();
    let mut got = each(&words, &frames[..1], &mut sw);
    got.extend(in_a_burst(&words, &frames[1..], &mut sw));
    same(&got, &want);
    assert_eq!(sw.stats.new_by_word, 2);
}

#[test]
fn the_policy_says_whether_its_words_decide_new_packets() {
    assert_eq!(fw(policy(None)).policy().new_by_word_off(), None);
    let off = fw(policy(ttl_never())).policy().new_by_word_off();
    assert_eq!(
        off.as_deref(),
        Some("ACL acl#2 reads a field that may change from packet to packet")
    );
    // The word keeps the ports' zones: any number of ports, each with a
    // zone of its own.
    let mut many = policy(None);
    for i in 4..=300u16 {
        many.ports.push(Port {
            name: format!("p{i}"),
            macs: vec![[2, 0, 0, 0, (i >> 8) as u8 + 1, i as u8]],
            ips: Vec::new(),
            zone: i,
            security: Vec::new(),
            disabled: false,
        });
    }
    assert!(fw(many.clone()).policy().takes_words());
    // Two ports in one zone: the zones do not name the ports.
    many.ports[200].zone = 2;
    let shared = fw(many.clone());
    assert_eq!(
        shared.policy().new_by_word_off().as_deref(),
        Some("ports b and p201 share zone 2")
    );
    assert!(!shared.policy().takes_words());
    many.ports[200].zone = 9999;
    many.ports[2].zone = 0;
    assert_eq!(
        fw(many).policy().new_by_word_off().as_deref(),
        Some("port c has zone 0, the zone of frames of no known port")
    );
}

/// [`policy`] with B's ACL taking TCP instead, with `label` and
/// `persist`, and `extra` as there.
fn tcp_policy(label: Option<u32>, persist: bool, extra: Option<(AclAction, Expr)>) -> Policy {
    let mut p = policy(extra);
    let to_b = &mut p.acls[0];
    to_b.expr = Expr::And(vec![
        Expr::eq(Field::Outport, B),
        Expr::flags(flag::IP | flag::TCP),
    ]);
    to_b.label = label;
    to_b.persist_established = persist;
    p
}

/// A connection committed under one policy and judged again under the
/// next at a packet that is not `+new` (the client's ACK before any
/// answer, `+est` as in Open vSwitch) gets that policy's word. A SYN sent
/// again after it is `+new`: where committing it now would change the
/// connection (the identity of an ACL with `persist-established`, which
/// OVN commits with every `ct.new` packet; the allowing ACL's label the
/// judging gives it),
/// it meets the ACLs and is committed, as in a firewall whose ACLs meet
/// every `+new` packet; where it would not, it takes the word. (The fuzz
/// target `firewall_frames` found the first case deciding by the word,
/// leaving the connection without the persisting ACL's identity: seed
/// 5158.)
#[test]
fn a_connection_judged_again_takes_its_word_only_where_a_commit_would_change_nothing() {
    // The client's segments, with `flags` and sequence number `seq`.
    let client = |flags, seq| {
        seg(
            ((A_IP, 4000), (B_IP, 80)),
            (flags, seq, 0),
            b"",
            (A_MAC, B_MAC),
        )
    };
    let (syn, ack) = (|| client(0x02, 100), || client(0x10, 101));
    for (first, label, persist, by_word) in [
        (None, None, false, 1),
        // The judging gave it the label already.
        (None, Some(7), false, 1),
        // The same, over the label of the first policy's ACL. (Mutation
        // round 72: the label after the judging worked out wrongly, the
        // old one's bits kept under the new, went unseen.)
        (Some(8), Some(7), false, 1),
        (None, None, true, 0),
        (None, Some(9), true, 0),
    ] {
        let words = fw(tcp_policy(first, false, None));
        let acls = fw(tcp_policy(first, false, ttl_never()));
        let (mut sw, mut sa) = (FwOutputs::default(), FwOutputs::default());
        let mut got = each(&words, &[syn(), ack()], &mut sw);
        let mut want = each(&acls, &[syn(), ack()], &mut sa);
        words.set_policy(tcp_policy(label, persist, None)).unwrap();
        acls.set_policy(tcp_policy(label, persist, ttl_never()))
            .unwrap();
        let frames = [ack(), syn(), syn(), ack()];
        got.extend(each(&words, &frames, &mut sw));
        want.extend(each(&acls, &frames, &mut sa));
        let case = format!("label {first:?} then {label:?}, persist {persist}");
        assert_eq!(
            got.iter()
                .map(|d| d.ct.map(|v| v.state.to_string()))
                .collect::<Vec<_>>(),
            [
                "new|trk", "est|trk", "est|trk", "new|trk", "new|trk", "est|trk"
            ]
            .map(|s| Some(s.to_string())),
            "{case}"
        );
        same(&got, &want);
        assert!(got.iter().all(|d| d.action == Action::Allow), "{case}");
        // The connection ends with the same label on both.
        let label_of = |f: &Firewall<u64>, d: &Decision| {
            let id = d.ct.and_then(|v| v.conn).expect("tracked");
            f.tracker()
                .conn(id, ctrack_core::Time::from_secs(1))
                .expect("there")
                .entry
                .label
        };
        assert_eq!(
            label_of(&words, &got[5]),
            label_of(&acls, &want[5]),
            "{case}"
        );
        if let Some(l) = label {
            assert_eq!(label_of(&words, &got[5]) >> 96, u128::from(l), "{case}");
        }
        // The first SYN sent again takes the word only where nothing
        // changes; the second always does (the first was committed).
        assert_eq!(sw.stats.new_by_word, by_word + 1, "{case}");
    }
}
