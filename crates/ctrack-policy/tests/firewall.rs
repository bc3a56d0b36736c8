//! The firewall's semantics, on policies built in code (the policy file's
//! own tests load the same shapes from files).

mod common;

use ctrack_core::{Config, CtState, FragConfig, Time, Tracker};
use ctrack_policy::expr::Expr;
use ctrack_policy::firewall::{
    AclCounters, AclRef, Action, BurstOut, Decision, DropReason, Firewall, FwOutputs, FwStats,
    Stage,
};
use ctrack_policy::key::{Field, flag};
use ctrack_policy::model::{Acl, AclAction, DefaultAction, Direction, Policy};
use ctrack_wire::build::{Ext, Frame, L4};
use ctrack_wire::tcp::flags::{ACK, RST, SYN};

const C_MAC: [u8; 6] = [2, 0, 0, 0, 0, 1];
const S_MAC: [u8; 6] = [2, 0, 0, 0, 0, 2];
const C_IP: [u8; 4] = [10, 0, 0, 1];
const S_IP: [u8; 4] = [10, 0, 0, 2];
const SERVER: u128 = 2;

fn acl(index: usize, dir: Direction, priority: u16, action: AclAction, expr: Expr) -> Acl {
    Acl::new(index, dir, priority, action, expr)
}

fn policy(default: DefaultAction, acls: Vec<Acl>) -> Policy {
    let port = common::port;
    Policy {
        default,
        ports: vec![port("client", C_MAC, 1), port("server", S_MAC, 2)],
        acls,
        ..Policy::default()
    }
}

fn tcp_to(port: u16) -> Expr {
    Expr::And(vec![
        Expr::flags(flag::IP | flag::TCP),
        Expr::eq(Field::L4Dst, u128::from(port)),
    ])
}

fn udp_to(port: u16) -> Expr {
    Expr::And(vec![
        Expr::flags(flag::IP | flag::UDP),
        Expr::eq(Field::L4Dst, u128::from(port)),
    ])
}

fn fw(p: Policy) -> Firewall<u64> {
    Firewall::new(Tracker::new(Config::default()), FragConfig::default(), p).unwrap()
}

fn from_client(dst: [u8; 4], l4: L4) -> Vec<u8> {
    let mut f = Frame::v4(C_IP, dst, l4);
    f.eth_src = C_MAC;
    f.eth_dst = S_MAC;
    f.build()
}

fn from_server(src: [u8; 4], l4: L4) -> Vec<u8> {
    let mut f = Frame::v4(src, C_IP, l4);
    f.eth_src = S_MAC;
    f.eth_dst = C_MAC;
    f.build()
}

fn seg(sport: u16, dport: u16, flags: u16, seq: u32, ack: u32) -> L4 {
    L4::tcp_seg(sport, dport, flags, seq, ack, 65535, &[])
}

/// Runs `frame` and returns its decision and answer.
fn one(fw: &Firewall<u64>, frame: Vec<u8>, st: &mut FwOutputs<u64>) -> (Decision, Option<Vec<u8>>) {
    st.out.clear();
    fw.process(frame, 0, Time::from_secs(1), st);
    assert_eq!(st.out.len(), 1);
    let o = st.out.pop().unwrap();
    (o.decision, o.reply)
}

/// A security group: the server takes TCP 80; everyone may send out
/// (from-lport allow-related `ip`, Neutron's default egress rule). Each
/// stage reaches its own default, as in OVN: a default-drop policy needs
/// both.
fn web_policy() -> Policy {
    policy(
        DefaultAction::Drop,
        vec![
            acl(
                0,
                Direction::ToLport,
                1000,
                AclAction::AllowRelated,
                Expr::And(vec![Expr::eq(Field::Outport, SERVER), tcp_to(80)]),
            ),
            acl(
                1,
                Direction::FromLport,
                1,
                AclAction::AllowRelated,
                Expr::flags(flag::IP),
            ),
        ],
    )
}

#[test]
fn allow_related_passes_the_connection_and_its_replies() {
    let fw = fw(web_policy());
    let mut o = FwOutputs::default();
    let (d, _) = one(&fw, from_client(S_IP, seg(1000, 80, SYN, 1, 0)), &mut o);
    assert_eq!(
        (d.action, d.stage, d.acl),
        (Action::Allow, Stage::ToLport, AclRef::Acl(0))
    );
    assert!(d.ct.unwrap().committed);
    let (d, _) = one(
        &fw,
        from_server(S_IP, seg(80, 1000, SYN | ACK, 100, 2)),
        &mut o,
    );
    assert_eq!(
        (d.action, d.stage, d.acl),
        (Action::Allow, Stage::Session, AclRef::Acl(0))
    );
    assert!(d.ct.unwrap().state.contains(CtState::RPL));
    let (d, _) = one(&fw, from_client(S_IP, seg(1000, 80, ACK, 2, 101)), &mut o);
    assert_eq!((d.action, d.stage), (Action::Allow, Stage::Session));
    // Another port: the default drop; the server cannot open back.
    let (d, _) = one(&fw, from_client(S_IP, seg(1001, 22, SYN, 1, 0)), &mut o);
    assert_eq!(
        (d.action, d.stage, d.reason),
        (Action::Drop, Stage::Default, Some(DropReason::Default))
    );
    let (d, _) = one(&fw, from_server(S_IP, seg(80, 2000, SYN, 1, 0)), &mut o);
    assert_eq!(d.action, Action::Drop);
    assert_eq!(o.stats.acls[0].conns, 1);
    assert_eq!(o.stats.acls[0].packets, 3);
}

#[test]
fn priorities_hold_across_stateless_and_stateful() {
    // The seed's example: from-lport 100 `ip4.dst == 1.1.1.1`
    // allow-stateless over from-lport 50 `ip` drop.
    let seed = policy(
        DefaultAction::Allow,
        vec![
            acl(
                0,
                Direction::FromLport,
                100,
                AclAction::AllowStateless,
                Expr::And(vec![
                    Expr::flags(flag::IP | flag::IP4),
                    Expr::eq(Field::IpDst, 0x0101_0101),
                ]),
            ),
            acl(
                1,
                Direction::FromLport,
                50,
                AclAction::Drop,
                Expr::flags(flag::IP),
            ),
            acl(
                2,
                Direction::ToLport,
                10,
                AclAction::AllowRelated,
                tcp_to(443),
            ),
            acl(
                3,
                Direction::ToLport,
                5,
                AclAction::AllowStateless,
                Expr::And(vec![
                    Expr::flags(flag::IP | flag::IP4),
                    Expr::eq(Field::IpDst, 0x0101_0101),
                ]),
            ),
        ],
    );
    let fw1 = fw(seed);
    let mut o = FwOutputs::default();
    let (d, _) = one(
        &fw1,
        from_client([1, 1, 1, 1], seg(1000, 80, SYN, 1, 0)),
        &mut o,
    );
    assert_eq!((d.action, d.acl), (Action::Allow, AclRef::Acl(3)));
    assert!(d.ct.is_none(), "stateless in both stages: never tracked");
    let (d, _) = one(
        &fw1,
        from_client([2, 2, 2, 2], seg(1000, 80, SYN, 1, 0)),
        &mut o,
    );
    assert_eq!((d.action, d.acl), (Action::Drop, AclRef::Acl(1)));
    // What OVN cannot do: a stateful drop at 200 beats an allow-stateless
    // at 100.
    let p = policy(
        DefaultAction::Allow,
        vec![
            acl(0, Direction::FromLport, 200, AclAction::Drop, tcp_to(22)),
            acl(
                1,
                Direction::FromLport,
                100,
                AclAction::AllowStateless,
                Expr::flags(flag::IP),
            ),
            acl(
                2,
                Direction::ToLport,
                10,
                AclAction::AllowRelated,
                tcp_to(443),
            ),
        ],
    );
    let fw2 = fw(p);
    let (d, _) = one(&fw2, from_client(S_IP, seg(1000, 22, SYN, 1, 0)), &mut o);
    assert_eq!(
        (d.action, d.stage, d.acl),
        (Action::Drop, Stage::FromLport, AclRef::Acl(0))
    );
    let (d, _) = one(&fw2, from_client(S_IP, seg(1000, 23, SYN, 1, 0)), &mut o);
    assert_eq!(
        (d.action, d.stage, d.acl),
        (Action::Allow, Stage::FromLport, AclRef::Acl(1))
    );
    // The to-lport stage had no ACL: its default allow in a stateful
    // policy tracks the connection, as OVN's egress pipeline would.
    assert_eq!(fw2.tracker().table_len(), 1);
}

#[test]
fn reject_answers_with_a_reset() {
    let p = policy(
        DefaultAction::Allow,
        vec![acl(
            0,
            Direction::ToLport,
            10,
            AclAction::Reject,
            tcp_to(25),
        )],
    );
    let fw = fw(p);
    let mut o = FwOutputs::default();
    let (d, reply) = one(&fw, from_client(S_IP, seg(1000, 25, SYN, 7, 0)), &mut o);
    assert_eq!(d.action, Action::Reject);
    let reply = reply.expect("a RST");
    let k = ctrack_policy::key::Key::from_frame(&reply, 0, 0);
    assert_eq!(k.get(Field::TcpFlags) as u16 & RST, RST);
    assert_eq!(k.get(Field::L4Src), 25);
    assert_eq!(k.get(Field::IpDst), 0x0a00_0001);
    // Never in answer to a RST.
    let (d, reply) = one(&fw, from_client(S_IP, seg(1000, 25, RST, 7, 0)), &mut o);
    assert_eq!(d.action, Action::Reject);
    assert!(reply.is_none());
}

/// `[copp] reject`: the policy's meter limits the answers in place of the
/// firewall's own limit, while that policy is in force; frame by frame
/// and in bursts alike, and in kilobits where the meter counts them.
#[test]
fn a_copp_meter_limits_reject_answers() {
    use ctrack_policy::model::{Copp, Meter, MeterUnit};
    let with_copp = |unit, rate, burst| {
        let mut p = policy(
            DefaultAction::Allow,
            vec![
                acl(0, Direction::ToLport, 10, AclAction::Reject, tcp_to(25)),
                // Tracked: a burst takes the tracker's burst path.
                acl(
                    1,
                    Direction::ToLport,
                    5,
                    AclAction::AllowRelated,
                    tcp_to(80),
                ),
            ],
        );
        p.meters.insert(
            "answers".into(),
            Meter {
                name: "answers".into(),
                unit,
                rate,
                burst,
                fair: false,
            },
        );
        p.copp = Copp {
            reject: Some("answers".into()),
        };
        p
    };
    let syns = |n: u16| -> Vec<Vec<u8>> {
        (0..n)
            .map(|i| from_client(S_IP, seg(1000 + i, 25, SYN, 7, 0)))
            .collect()
    };
    let answered = |fw: &Firewall<u64>, frames: Vec<Vec<u8>>| {
        let mut o = FwOutputs::default();
        frames
            .into_iter()
            .filter(|f| one(fw, f.clone(), &mut o).1.is_some())
            .count()
    };
    // The firewall's own limit would answer all ten; the meter, three.
    let f = fw(with_copp(MeterUnit::Pktps, 1, 3));
    f.set_reject_limit(1000, 1000);
    assert_eq!(answered(&f, syns(10)), 3);
    // In a burst: the same meter, spent.
    let (actions, st) = bursts(&f, [&mut syns(10)]);
    assert!(actions.iter().all(|a| *a == Action::Reject));
    assert_eq!((st.rejects_sent, st.rejects_suppressed), (0, 10));
    // A policy without `[copp]`: the firewall's own limit again.
    let mut plain = with_copp(MeterUnit::Pktps, 1, 3);
    plain.copp = Copp::default();
    f.set_policy(plain).unwrap();
    f.set_reject_limit(0, 5);
    assert_eq!(answered(&f, syns(10)), 5);
    // A new policy's meter starts full, in a burst as well.
    f.set_policy(with_copp(MeterUnit::Pktps, 1, 4)).unwrap();
    let (_, st) = bursts(&f, [&mut syns(10)]);
    assert_eq!((st.rejects_sent, st.rejects_suppressed), (4, 6));
    // In kilobits: the rejected frames' bits count. Each SYN here is 54
    // bytes (432 bits); a burst of 2 kbit answers four of them.
    let len = syns(1)[0].len();
    assert_eq!(len, 54);
    let f = fw(with_copp(MeterUnit::Kbps, 1, 2));
    assert_eq!(answered(&f, syns(10)), 2000 / (len * 8));
}

/// The server takes TCP 443 only (a change of `web_policy` that no longer
/// allows its connections to port 80).
fn https_only() -> Policy {
    policy(
        DefaultAction::Drop,
        vec![acl(
            0,
            Direction::ToLport,
            1000,
            AclAction::AllowRelated,
            tcp_to(443),
        )],
    )
}

#[test]
fn a_policy_change_blocks_what_it_no_longer_allows() {
    let fw = fw(web_policy());
    let mut o = FwOutputs::default();
    one(&fw, from_client(S_IP, seg(1000, 80, SYN, 1, 0)), &mut o);
    one(
        &fw,
        from_server(S_IP, seg(80, 1000, SYN | ACK, 100, 2)),
        &mut o,
    );
    // The same rule again under another generation: no hiccup.
    fw.set_policy(web_policy()).unwrap();
    let (d, _) = one(&fw, from_client(S_IP, seg(1000, 80, ACK, 2, 101)), &mut o);
    assert_eq!(
        (d.action, d.stage, d.acl),
        (Action::Allow, Stage::Session, AclRef::Acl(0))
    );
    assert_eq!(o.stats.rejudged, 1);
    // Without it: blocked, in the reply direction too, and removed.
    fw.set_policy(https_only()).unwrap();
    let (d, _) = one(&fw, from_server(S_IP, seg(80, 1000, ACK, 101, 2)), &mut o);
    assert_eq!(
        (d.action, d.reason),
        (Action::Drop, Some(DropReason::Blocked))
    );
    assert_eq!(fw.tracker().table_len(), 0);
    let (d, _) = one(&fw, from_client(S_IP, seg(1000, 80, ACK, 2, 101)), &mut o);
    assert_eq!(d.action, Action::Drop);
}

/// After a policy change, a burst holding two packets of one connection
/// decides as frame by frame: the first judges the connection again, and
/// the second (looked up before that) takes what the first wrote: the new
/// verdict word (it leaves by the session fast path; the connection was
/// judged again once), or the connection's removal (it meets the ACLs as
/// a new one).
#[test]
fn a_burst_after_a_policy_change_takes_what_its_first_packet_wrote() {
    for (change, expect) in [
        (web_policy(), [Action::Allow, Action::Allow]),
        (https_only(), [Action::Drop, Action::Drop]),
    ] {
        let opening = [
            from_client(S_IP, seg(1000, 80, SYN, 1, 0)),
            from_server(S_IP, seg(80, 1000, SYN | ACK, 100, 2)),
        ];
        let later = vec![
            from_client(S_IP, seg(1000, 80, ACK, 2, 101)),
            from_server(S_IP, seg(80, 1000, ACK, 101, 2)),
        ];
        // Frame by frame.
        let one_by_one = fw(web_policy());
        let mut o = FwOutputs::default();
        for f in &opening {
            one(&one_by_one, f.clone(), &mut o);
        }
        one_by_one.set_policy(change.clone()).unwrap();
        let want: Vec<Decision> = later
            .iter()
            .map(|f| one(&one_by_one, f.clone(), &mut o).0)
            .collect();
        // The opening frame by frame, the two later packets in one burst.
        let burst = fw(web_policy());
        let mut ob = FwOutputs::default();
        for f in &opening {
            one(&burst, f.clone(), &mut ob);
        }
        burst.set_policy(change).unwrap();
        let mut frames = later.clone();
        let mut ds = vec![Decision::default(); 2];
        let mut replies = Vec::new();
        burst.process_burst(
            &mut frames,
            Time::from_secs(1),
            BurstOut {
                decisions: &mut ds,
                replies: &mut replies,
                stats: &mut ob.stats,
            },
        );
        let strip = |d: &Decision| {
            let mut d = *d;
            if let Some(v) = d.ct.as_mut() {
                v.conn = None;
            }
            d
        };
        assert_eq!(want.iter().map(|d| d.action).collect::<Vec<_>>(), expect);
        assert_eq!(
            ds.iter().map(strip).collect::<Vec<_>>(),
            want.iter().map(strip).collect::<Vec<_>>()
        );
        assert_eq!(ob.stats.rejudged, o.stats.rejudged);
        assert_eq!(o.stats.rejudged, 1);
        assert_eq!(ob.stats.stages, o.stats.stages);
        assert_eq!(
            burst.tracker().table_len(),
            one_by_one.tracker().table_len()
        );
    }
}

/// `web_policy` with its HTTP ACL named `web` and persisting, taking TCP
/// `port` instead of 80.
fn persisting_web(port: u16) -> Policy {
    let mut p = web_policy();
    p.acls[0].name = "web".into();
    p.acls[0].persist_established = true;
    p.acls[0].expr = Expr::And(vec![Expr::eq(Field::Outport, SERVER), tcp_to(port)]);
    p
}

/// A change to the match of the ACL that allowed a connection, which has
/// `persist-established`, leaves the connection alone (tests/persist.rs
/// has the rest).
#[test]
fn persist_established_keeps_its_connections() {
    let fw = fw(persisting_web(80));
    let mut o = FwOutputs::default();
    one(&fw, from_client(S_IP, seg(1000, 80, SYN, 1, 0)), &mut o);
    fw.set_policy(persisting_web(8080)).unwrap();
    let (d, _) = one(
        &fw,
        from_server(S_IP, seg(80, 1000, SYN | ACK, 100, 2)),
        &mut o,
    );
    assert_eq!((d.action, d.acl), (Action::Allow, AclRef::Persisted));
    // A new connection meets the new policy.
    let (d, _) = one(&fw, from_client(S_IP, seg(1001, 80, SYN, 1, 0)), &mut o);
    assert_eq!(d.action, Action::Drop);
}

/// A connection a change left alone is reported as `persisted` at every
/// later packet, frame by frame and in bursts, where a connection the
/// default allowed beside it is reported as the default's; neither counts
/// under an ACL or the default.
#[test]
fn a_connection_left_alone_is_reported_persisted_on_every_path() {
    let fw = fw(persisting_web(80));
    let mut o = FwOutputs::default();
    let (c, s) = (|l4| from_client(S_IP, l4), |l4| from_server(S_IP, l4));
    one(&fw, c(seg(1000, 80, SYN, 1, 0)), &mut o);
    one(&fw, s(seg(80, 1000, SYN | ACK, 100, 2)), &mut o);
    // The new policy drops HTTP and lets the rest in by its default; it
    // has a stateful ACL, so what the default allows is committed. The
    // ACL that allowed the connection now takes TCP 9999.
    let mut next = policy(
        DefaultAction::Allow,
        vec![
            acl(
                0,
                Direction::ToLport,
                1000,
                AclAction::Drop,
                Expr::And(vec![Expr::eq(Field::Outport, SERVER), tcp_to(80)]),
            ),
            acl(
                1,
                Direction::ToLport,
                1,
                AclAction::AllowRelated,
                tcp_to(9999),
            ),
        ],
    );
    next.default = DefaultAction::Allow;
    next.acls[1].name = "web".into();
    next.acls[1].persist_established = true;
    fw.set_policy(next).unwrap();
    let (d, _) = one(&fw, c(seg(1000, 80, ACK, 2, 101)), &mut o);
    assert_eq!((d.action, d.acl), (Action::Allow, AclRef::Persisted));
    let (d, _) = one(&fw, s(seg(80, 1000, ACK, 101, 2)), &mut o);
    assert_eq!(
        (d.action, d.stage, d.acl),
        (Action::Allow, Stage::Session, AclRef::Persisted)
    );
    // A connection to port 81, opened under the new policy by its default.
    let (d, _) = one(&fw, c(seg(1001, 81, SYN, 1, 0)), &mut o);
    assert_eq!((d.action, d.acl), (Action::Allow, AclRef::Default));
    let (d, _) = one(&fw, s(seg(81, 1001, SYN | ACK, 100, 2)), &mut o);
    assert_eq!((d.action, d.acl), (Action::Allow, AclRef::Default));
    let mut burst = vec![
        c(seg(1000, 80, ACK, 2, 101)),
        c(seg(1001, 81, ACK, 2, 101)),
        s(seg(80, 1000, ACK, 101, 2)),
        s(seg(81, 1001, ACK, 101, 2)),
        c(seg(1000, 80, ACK, 2, 101)),
    ];
    let mut ds = vec![Decision::default(); burst.len()];
    let mut st = FwStats::default();
    fw.process_burst(
        &mut burst,
        Time::from_secs(1),
        BurstOut {
            decisions: &mut ds,
            replies: &mut Vec::new(),
            stats: &mut st,
        },
    );
    let got: Vec<_> = ds.iter().map(|d| (d.action, d.stage, d.acl)).collect();
    let (persisted, default) = (
        (Action::Allow, Stage::Session, AclRef::Persisted),
        (Action::Allow, Stage::Session, AclRef::Default),
    );
    assert_eq!(got, [persisted, default, persisted, default, persisted]);
    assert!(st.acls.iter().all(|c| c.packets == 0), "{:?}", st.acls);
    assert_eq!(st.defaults, [AclCounters::default(); 2]);
    assert_eq!(st.stages[Stage::Session as usize], 5);
}

/// A connection an ACL with `persist-established` allowed, judged again
/// by a policy that still allows it, stays that ACL's (reported and
/// counted as its, not as `persisted`); a later change that no longer
/// allows it, keeping the ACL, leaves it alone all the same.
#[test]
fn a_persisting_connection_still_allowed_keeps_its_acl() {
    let p = persisting_web(80);
    let fw = fw(p.clone());
    let mut o = FwOutputs::default();
    let (c, s) = (|l4| from_client(S_IP, l4), |l4| from_server(S_IP, l4));
    one(&fw, c(seg(1000, 80, SYN, 1, 0)), &mut o);
    one(&fw, s(seg(80, 1000, SYN | ACK, 100, 2)), &mut o);
    // The same policy again.
    fw.set_policy(p).unwrap();
    let (d, _) = one(&fw, c(seg(1000, 80, ACK, 2, 101)), &mut o);
    assert_eq!(
        (d.action, d.stage, d.acl),
        (Action::Allow, Stage::Session, AclRef::Acl(0))
    );
    let (d, _) = one(&fw, s(seg(80, 1000, ACK, 101, 2)), &mut o);
    assert_eq!(d.acl, AclRef::Acl(0));
    assert_eq!(o.stats.acls[0].packets, 2);
    // Then a policy where it no longer matches.
    fw.set_policy(persisting_web(8080)).unwrap();
    let (d, _) = one(&fw, c(seg(1000, 80, ACK, 2, 101)), &mut o);
    assert_eq!((d.action, d.acl), (Action::Allow, AclRef::Persisted));
}

/// OVN's `nd_rs`, `nd_ra` and `nd` exactly: ICMPv6 133 to 136 with code
/// 0 and hop limit 255 pass at stage `nd`; a redirect (137), another
/// code, another hop limit, MLDv1 from outside fe80::/10 and a fragment
/// of a neighbour solicitation (RFC 6980: never fragmented) meet the ACLs.
#[test]
fn nd_is_what_ovn_s_predicates_say() {
    let fw = fw(policy(DefaultAction::Drop, vec![]));
    let mut o = FwOutputs::default();
    let icmp6 = |ty: u8, code: u8, hops: u8, src: &str, dst: &str, mac: [u8; 6]| {
        let mut f = Frame::new(
            src.parse().unwrap(),
            dst.parse().unwrap(),
            L4::Icmp {
                ty,
                code,
                rest: [0; 4],
                body: vec![0; 16],
            },
        );
        f.ttl = hops;
        f.eth_src = C_MAC;
        f.eth_dst = mac;
        f
    };
    let nd = |ty: u8, code: u8, hops: u8| {
        icmp6(
            ty,
            code,
            hops,
            "fe80::1",
            "ff02::1",
            [0x33, 0x33, 0, 0, 0, 1],
        )
        .build()
    };
    let mut fragmented = icmp6(135, 0, 255, "fe80::1", "ff02::1", [0x33, 0x33, 0, 0, 0, 1]);
    fragmented.ext = vec![Ext::Fragment {
        offset: 0,
        more: true,
        ident: 7,
    }];
    let group = [0x33, 0x33, 0, 0, 0, 0x16];
    for (frame, passes, what) in [
        (nd(133, 0, 255), true, "router solicitation"),
        (nd(134, 0, 255), true, "router advertisement"),
        (nd(135, 0, 255), true, "neighbour solicitation"),
        (nd(136, 0, 255), true, "neighbour advertisement"),
        (nd(137, 0, 255), false, "redirect"),
        (nd(135, 1, 255), false, "code 1"),
        (nd(136, 0, 64), false, "hop limit 64"),
        (fragmented.build(), false, "a first fragment"),
        (
            icmp6(131, 0, 1, "fec0::1", "ff02::16", group).build(),
            false,
            "MLDv1 from fec0::/10",
        ),
        (
            icmp6(131, 0, 1, "febf::1", "ff02::16", group).build(),
            true,
            "MLDv1 from the top of fe80::/10",
        ),
    ] {
        let (d, _) = one(&fw, frame, &mut o);
        let want = match passes {
            true => (Action::Allow, Stage::Nd),
            false => (Action::Drop, Stage::Default),
        };
        assert_eq!((d.action, d.stage), want, "{what}");
    }
}

#[test]
fn nd_passes_and_arp_meets_the_acls() {
    let fw = fw(policy(DefaultAction::Drop, vec![]));
    let mut o = FwOutputs::default();
    let mut ns = Frame::new(
        "fe80::1".parse().unwrap(),
        "ff02::1:ff00:2".parse().unwrap(),
        L4::icmp_query(135, 0, 0),
    );
    ns.ttl = 255;
    ns.eth_src = C_MAC;
    let (d, _) = one(&fw, ns.build(), &mut o);
    assert_eq!((d.action, d.stage), (Action::Allow, Stage::Nd));
    // MLD as OVN's `mldv1` and `mldv2` say: to a 33:33 MAC; MLDv1 from a
    // link-local address, MLDv2 to ff02::16. An ICMPv6 message of an MLD
    // type that is neither meets the ACLs.
    let mld = |ty: u8, src: &str, dst: &str, mac: [u8; 6]| {
        let mut f = Frame::new(
            src.parse().unwrap(),
            dst.parse().unwrap(),
            L4::Icmp {
                ty,
                code: 0,
                rest: [0; 4],
                body: vec![0; 16],
            },
        );
        f.ttl = 1;
        f.eth_src = C_MAC;
        f.eth_dst = mac;
        f.build()
    };
    let group = [0x33, 0x33, 0, 0, 0, 0x16];
    // As hosts send them: after a hop-by-hop header (the router alert).
    let mut with_hbh = Frame::new(
        "fe80::1".parse().unwrap(),
        "ff02::16".parse().unwrap(),
        L4::Icmp {
            ty: 143,
            code: 0,
            rest: [0; 4],
            body: vec![0; 16],
        },
    );
    with_hbh.ext = vec![Ext::HopByHop(0)];
    with_hbh.ttl = 1;
    with_hbh.eth_src = C_MAC;
    with_hbh.eth_dst = group;
    for (frame, passes) in [
        (with_hbh.build(), true),
        (mld(143, "fe80::1", "ff02::16", group), true),
        (mld(143, "::", "ff02::16", group), true),
        (mld(131, "fe80::1", "ff02::16", group), true),
        (
            mld(130, "fe80::1", "ff02::1", [0x33, 0x33, 0, 0, 0, 1]),
            true,
        ),
        (
            mld(132, "fe80::1", "ff02::2", [0x33, 0x33, 0, 0, 0, 2]),
            true,
        ),
        // Not from a link-local address.
        (mld(131, "fd00::1", "ff02::16", group), false),
        // To a unicast MAC.
        (mld(131, "fe80::1", "ff02::16", S_MAC), false),
        (mld(143, "fe80::1", "ff02::16", S_MAC), false),
        // MLDv2 not to ff02::16.
        (
            mld(143, "fe80::1", "ff02::1", [0x33, 0x33, 0, 0, 0, 1]),
            false,
        ),
        (mld(143, "fe80::1", "ff02::1:16", group), false),
    ] {
        let (d, _) = one(&fw, frame, &mut o);
        let want = match passes {
            true => (Action::Allow, Stage::Nd),
            false => (Action::Drop, Stage::Default),
        };
        assert_eq!((d.action, d.stage), want, "{passes}");
    }
    let mut arp = vec![0xffu8; 6];
    arp.extend_from_slice(&C_MAC);
    arp.extend_from_slice(&[0x08, 0x06]);
    arp.extend_from_slice(&[0u8; 28]);
    let (d, _) = one(&fw, arp.clone(), &mut o);
    assert_eq!(d.action, Action::Drop);
    let fw = self::fw(policy(
        DefaultAction::Drop,
        both_stages(AclAction::Allow, Expr::flags(flag::ARP)),
    ));
    let (d, _) = one(&fw, arp, &mut o);
    assert_eq!(
        (d.action, d.stage, d.acl),
        (Action::Allow, Stage::ToLport, AclRef::Acl(1))
    );
}

/// Each set of frames through `fw` as one burst, in turn: every frame's
/// action, and the counters.
fn bursts<const N: usize>(
    fw: &Firewall<u64>,
    sets: [&mut Vec<Vec<u8>>; N],
) -> (Vec<Action>, FwStats) {
    let (ds, st) = burst_decisions(fw, sets);
    (ds.iter().map(|d| d.action).collect(), st)
}

/// [`bursts`], with every frame's whole decision.
fn burst_decisions<const N: usize>(
    fw: &Firewall<u64>,
    sets: [&mut Vec<Vec<u8>>; N],
) -> (Vec<Decision>, FwStats) {
    let mut st = FwStats::default();
    let mut got = Vec::new();
    for set in sets {
        let mut ds = vec![Decision::default(); set.len()];
        let mut replies = Vec::new();
        fw.process_burst(
            set,
            Time::from_secs(1),
            BurstOut {
                decisions: &mut ds,
                replies: &mut replies,
                stats: &mut st,
            },
        );
        got.extend(ds);
    }
    (got, st)
}

#[test]
fn the_burst_path_decides_as_the_packet_path() {
    let mut frames = Vec::new();
    for i in 0..40u16 {
        frames.push(from_client(
            S_IP,
            seg(1000 + i, if i % 3 == 0 { 22 } else { 80 }, SYN, 1, 0),
        ));
        frames.push(from_server(
            S_IP,
            seg(if i % 3 == 0 { 22 } else { 80 }, 1000 + i, SYN | ACK, 9, 2),
        ));
    }
    let mut later: Vec<Vec<u8>> = (0..40u16)
        .map(|i| {
            from_client(
                S_IP,
                seg(1000 + i, if i % 3 == 0 { 22 } else { 80 }, ACK, 2, 10),
            )
        })
        .collect();
    let one_by_one = fw(web_policy());
    let mut o = FwOutputs::default();
    let expect: Vec<Action> = frames
        .iter()
        .chain(later.iter())
        .map(|f| one(&one_by_one, f.clone(), &mut o).0.action)
        .collect();
    let (got, st) = bursts(&fw(web_policy()), [&mut frames, &mut later]);
    assert_eq!(got, expect);
    assert_eq!(st.verdicts, o.stats.verdicts);
    assert_eq!(st.stages, o.stats.stages);
    assert_eq!(st.acls, o.stats.acls);
}

/// Established packets of connections that two ACLs opened, interleaved
/// in one burst and of different sizes: the session path counts each
/// packet and its bytes to the ACL that opened its connection (it counts
/// runs of one ACL, and every change of ACL ends a run), as frame by
/// frame.
#[test]
fn a_burst_counts_each_session_packet_to_the_acl_that_opened_it() {
    let mut p = web_policy();
    p.acls.push(acl(
        2,
        Direction::ToLport,
        900,
        AclAction::AllowRelated,
        Expr::And(vec![Expr::eq(Field::Outport, SERVER), tcp_to(443)]),
    ));
    let port = |i: u16| [80, 443, 443, 80, 80, 80, 443][usize::from(i % 7)];
    let mut opening = Vec::new();
    for i in 0..20u16 {
        opening.push(from_client(S_IP, seg(1000 + i, port(i), SYN, 1, 0)));
        opening.push(from_server(S_IP, seg(port(i), 1000 + i, SYN | ACK, 9, 2)));
    }
    let mut later: Vec<Vec<u8>> = (0..20u16)
        .map(|i| {
            let data = vec![b'x'; usize::from(i)];
            let l4 = L4::tcp_seg(1000 + i, port(i), ACK, 2, 10, 65535, &data);
            from_client(S_IP, l4)
        })
        .collect();
    let one_by_one = fw(p.clone());
    let mut o = FwOutputs::default();
    for f in opening.iter().chain(later.iter()) {
        one(&one_by_one, f.clone(), &mut o);
    }
    let (got, st) = bursts(&fw(p), [&mut opening, &mut later]);
    assert!(got.iter().all(|a| *a == Action::Allow), "{got:?}");
    assert_eq!(st.acls, o.stats.acls);
    assert_eq!(st.stages, o.stats.stages);
    // Both ACLs opened connections, and each counted the later packets
    // of its own.
    let session = st.stages[Stage::Session as usize];
    assert!(session >= 20, "{session} packets by the session");
    assert!(
        st.acls[0].packets > 20 && st.acls[2].packets > 14,
        "{:?}",
        st.acls
    );
}

/// A one-way UDP flow stays `+new` (nobody answers), so every packet
/// meets the ACLs: the later ones find the connection the first committed
/// and leave it as it is, until a change makes the commit change it.
#[test]
fn a_flow_nobody_answers_is_committed_once_and_recommitted_on_a_change() {
    let udp_to_53 = || udp_to(53);
    let labelled = |label: u32| {
        let mut a = acl(
            0,
            Direction::FromLport,
            100,
            AclAction::AllowRelated,
            udp_to_53(),
        );
        a.label = Some(label);
        policy(DefaultAction::Allow, vec![a])
    };
    let label_of = |d: &Decision| d.ct.map(|v| (v.label >> 96) as u32);
    let fw = fw(labelled(7));
    let mut o = FwOutputs::default();
    for i in 0..5 {
        let (d, _) = one(&fw, from_client(S_IP, L4::udp(5000, 53, b"q")), &mut o);
        assert_eq!(
            (d.action, d.stage, d.acl),
            (Action::Allow, Stage::FromLport, AclRef::Acl(0)),
            "packet {i}"
        );
        assert!(d.ct.is_some_and(|v| v.state.contains(CtState::NEW)));
        assert_eq!(label_of(&d), Some(7), "packet {i}");
    }
    assert_eq!(fw.tracker().table_len(), 1);
    assert_eq!(o.stats.tracker.packets, 5, "each packet tracked once");
    assert_eq!(o.stats.acls[0].conns, 1);
    // Another label for the same rule: the next commit changes the
    // connection, so it is made.
    fw.set_policy(labelled(9)).unwrap();
    let (d, _) = one(&fw, from_client(S_IP, L4::udp(5000, 53, b"q")), &mut o);
    assert_eq!(d.action, Action::Allow);
    assert_eq!(label_of(&d), Some(9));
    assert_eq!(fw.tracker().table_len(), 1);
    // And the burst path agrees.
    let mut frames = vec![from_client(S_IP, L4::udp(5000, 53, b"q")); 3];
    let mut decisions = vec![Decision::default(); 3];
    let mut replies = Vec::new();
    let mut stats = FwStats::default();
    fw.process_burst(
        &mut frames,
        Time::from_secs(1),
        BurstOut {
            decisions: &mut decisions,
            replies: &mut replies,
            stats: &mut stats,
        },
    );
    for d in &decisions {
        assert_eq!((d.action, d.acl), (Action::Allow, AclRef::Acl(0)));
        assert_eq!(label_of(d), Some(9));
    }
    assert_eq!(stats.tracker.packets, 3);
}

/// A flow through source NAT that nobody answers stays `+new`: each
/// later packet meets the ACLs as it arrived (before the NAT, as in OVN),
/// so an ACL on the inside address keeps allowing it, and it leaves
/// translated as the first did. The burst path agrees, bytes and all.
/// UDP from the client's address allowed and translated to
/// 198.51.100.1 (source NAT); to-lport, any IP allowed; else drop.
fn snat_inside() -> Policy {
    use ctrack_core::{Nat, NatKind, NatMode, NatRange};
    let mut inside = acl(
        0,
        Direction::FromLport,
        100,
        AclAction::AllowRelated,
        Expr::And(vec![
            Expr::flags(flag::IP | flag::UDP),
            Expr::eq(Field::IpSrc, u128::from(u32::from_be_bytes(C_IP))),
        ]),
    );
    inside.nat = Some(Nat {
        range: Some(NatRange {
            kind: NatKind::Src,
            addrs: Some(([198, 51, 100, 1].into(), [198, 51, 100, 1].into())),
            ports: None,
        }),
        mode: NatMode::default(),
    });
    let any = acl(
        1,
        Direction::ToLport,
        1,
        AclAction::AllowRelated,
        Expr::flags(flag::IP),
    );
    policy(DefaultAction::Drop, vec![inside, any])
}

#[test]
fn a_translated_flow_nobody_answers_meets_the_acls_as_it_arrived() {
    let pol = snat_inside;
    let translated = |f: &[u8]| f[26..30] == [198, 51, 100, 1] && f[30..34] == S_IP;
    let fw = fw(pol());
    let mut o = FwOutputs::default();
    let mut first = None;
    for i in 0..4 {
        o.out.clear();
        let f = from_client(S_IP, L4::udp(5000, 53, b"q"));
        fw.process(f, 0, Time::from_secs(1), &mut o);
        let out = o.out.pop().unwrap();
        assert_eq!(out.decision.action, Action::Allow, "packet {i}");
        assert!(translated(&out.frame), "packet {i}");
        assert_eq!(*first.get_or_insert(out.frame.clone()), out.frame);
    }
    assert_eq!(fw.tracker().table_len(), 1);
    // Bursts, on a firewall of their own: the same decisions and bytes.
    let burst = crate::fw(pol());
    let mut frames = vec![from_client(S_IP, L4::udp(5000, 53, b"q")); 4];
    let mut decisions = vec![Decision::default(); 4];
    let mut replies = Vec::new();
    let mut stats = FwStats::default();
    for _ in 0..2 {
        burst.process_burst(
            &mut frames,
            Time::from_secs(1),
            BurstOut {
                decisions: &mut decisions,
                replies: &mut replies,
                stats: &mut stats,
            },
        );
        for (i, (d, f)) in decisions.iter().zip(&frames).enumerate() {
            assert_eq!(d.action, Action::Allow, "burst packet {i}");
            assert_eq!(Some(f), first.as_ref(), "burst packet {i}");
        }
        frames = vec![from_client(S_IP, L4::udp(5000, 53, b"q")); 4];
    }
    assert_eq!(burst.tracker().table_len(), 1);
}

/// A packet whose judging tracks it a second time (here the commit of a
/// translated `+new` flow) is tracked before the burst's next packet is
/// looked up: a reply right behind it in the burst does not make it
/// `+est`, as it would if the whole burst were looked up first. Frame by
/// frame and in one burst, the same decisions, states and bytes.
#[test]
fn a_reply_behind_a_commit_in_a_burst_is_looked_up_after_it() {
    let request = || from_client(S_IP, L4::udp(5000, 53, b"q"));
    // The server's answer, to the translated address.
    let reply = || {
        let mut f = Frame::v4(S_IP, [198, 51, 100, 1], L4::udp(53, 5000, b"a"));
        f.eth_src = S_MAC;
        f.eth_dst = C_MAC;
        f.build()
    };
    let run = |burst: bool| {
        let fw = fw(snat_inside());
        let mut o = FwOutputs::default();
        // The flow, committed and translated; nobody has answered yet.
        one(&fw, request(), &mut o);
        let mut frames = vec![request(), reply()];
        let mut ds = vec![Decision::default(); 2];
        if burst {
            fw.process_burst(
                &mut frames,
                Time::from_secs(1),
                BurstOut {
                    decisions: &mut ds,
                    replies: &mut Vec::new(),
                    stats: &mut o.stats,
                },
            );
        } else {
            for (f, d) in frames.iter_mut().zip(ds.iter_mut()) {
                o.out.clear();
                fw.process(f.clone(), 0, Time::from_secs(1), &mut o);
                let out = o.out.pop().unwrap();
                (*f, *d) = (out.frame, out.decision);
            }
        }
        let states: Vec<_> = ds.iter().map(|d| d.ct.map(|v| (v.state, v.dir))).collect();
        let actions: Vec<_> = ds.iter().map(|d| (d.action, d.stage)).collect();
        (actions, states, frames, o.stats.tracker.packets)
    };
    let want = run(false);
    assert!(
        want.1[0].is_some_and(|(st, _)| st.contains(CtState::NEW)),
        "the request is +new frame by frame: {:?}",
        want.1
    );
    assert!(want.1[1].is_some_and(|(st, _)| st.contains(CtState::EST)));
    assert_eq!(
        want.0,
        [
            (Action::Allow, Stage::ToLport),
            (Action::Allow, Stage::Session)
        ]
    );
    assert_eq!(run(true), want);
}

/// Two pairs of ports in two zones carry the same addresses and ports, in
/// one burst, both ways round: the burst must judge each frame in its own
/// zone (its pair's), as the packet path does. Only the first pair's
/// client may open connections, so a reply in the second pair's zone is
/// dropped, where a burst that took every frame for the first pair's zone
/// would find the first pair's connection and pass it.
#[test]
fn a_burst_of_two_zones_judges_each_frame_in_its_own() {
    const C2_MAC: [u8; 6] = [2, 0, 0, 0, 0, 3];
    const S2_MAC: [u8; 6] = [2, 0, 0, 0, 0, 4];
    let mut p = policy(
        DefaultAction::Drop,
        vec![
            acl(
                0,
                Direction::FromLport,
                10,
                AclAction::AllowRelated,
                Expr::And(vec![Expr::eq(Field::Inport, 1), Expr::flags(flag::IP)]),
            ),
            acl(
                1,
                Direction::ToLport,
                10,
                AclAction::AllowRelated,
                Expr::And(vec![
                    Expr::eq(Field::Outport, SERVER),
                    Expr::flags(flag::IP),
                ]),
            ),
        ],
    );
    // A third server whose address differs from the first's in its last
    // byte only, in zone 0: its frames to the client agree with the first
    // pair's, swapped, on their first eight bytes, and their zone is
    // another.
    const S3_MAC: [u8; 6] = [2, 0, 0, 0, 0, 5];
    for (name, mac, zone) in [
        ("client2", C2_MAC, 3),
        ("server2", S2_MAC, 4),
        ("server3", S3_MAC, 0),
    ] {
        p.ports.push(common::port(name, mac, zone));
    }
    let frame = |src_mac, dst_mac, reply: bool, i: u16, flags, seq, ack| {
        let (src, dst, sport, dport) = if reply {
            (S_IP, C_IP, 80, 1000 + i)
        } else {
            (C_IP, S_IP, 1000 + i, 80)
        };
        let mut f = Frame::v4(src, dst, seg(sport, dport, flags, seq, ack));
        f.eth_src = src_mac;
        f.eth_dst = dst_mac;
        f.build()
    };
    let mut first = Vec::new();
    let mut second = Vec::new();
    for i in 0..20u16 {
        first.push(frame(C_MAC, S_MAC, false, i, SYN, 1, 0));
        first.push(frame(C2_MAC, S2_MAC, false, i, SYN, 1, 0));
        second.push(frame(S_MAC, C_MAC, true, i, SYN | ACK, 9, 2));
        second.push(frame(S2_MAC, C2_MAC, true, i, SYN | ACK, 9, 2));
    }
    // The third server's frames to the client (zone 0, no connection: a
    // new one from it, dropped) among the first pair's, both ways, in one
    // burst: each half of the cached pair is met by a frame that agrees
    // with it on its first eight bytes only.
    let mut third = Vec::new();
    for i in 0..10u16 {
        third.push(frame(C_MAC, S_MAC, false, i, ACK, 2, 10));
        third.push(frame(S3_MAC, C_MAC, true, i, ACK, 10, 2));
    }
    for i in 10..20u16 {
        third.push(frame(S_MAC, C_MAC, true, i, ACK, 10, 2));
        third.push(frame(S3_MAC, C_MAC, true, i, ACK, 10, 2));
    }
    let one_by_one = fw(p.clone());
    let mut o = FwOutputs::default();
    let expect: Vec<Action> = first
        .iter()
        .chain(second.iter())
        .chain(third.iter())
        .map(|f| one(&one_by_one, f.clone(), &mut o).0.action)
        .collect();
    // The first pair passes both ways; the second pair neither.
    for (i, a) in expect.iter().enumerate() {
        let want = if i % 2 == 0 {
            Action::Allow
        } else {
            Action::Drop
        };
        assert_eq!(*a, want, "frame {i}");
    }
    let (got, st) = bursts(&fw(p), [&mut first, &mut second, &mut third]);
    assert_eq!(got, expect);
    assert_eq!(st.verdicts, o.stats.verdicts);
}

/// A worker's counters carry the zone of the last MAC pair from one call
/// to the next; that memo holds for the compiled policy it was made under
/// only: the same counters handed to another firewall, or to the same
/// firewall after a change of zones, give the zones of the policy in
/// force.
#[test]
fn the_last_pairs_zone_is_remembered_for_its_own_policy_only() {
    let zoned = |client, server| {
        let mut p = web_policy();
        p.ports[0].zone = client;
        p.ports[1].zone = server;
        p
    };
    let syn = |i: u16| vec![from_client(S_IP, seg(1000 + i, 80, SYN, 1, 0))];
    // The zone each frame of a burst was tracked in.
    let zones = |fw: &Firewall<u64>, mut frames: Vec<Vec<u8>>, st: &mut FwStats| {
        let mut ds = vec![Decision::default(); frames.len()];
        let mut replies = Vec::new();
        fw.process_burst(
            &mut frames,
            Time::from_secs(1),
            BurstOut {
                decisions: &mut ds,
                replies: &mut replies,
                stats: st,
            },
        );
        ds.iter()
            .map(|d| (d.action, d.ct.map(|v| v.zone)))
            .collect::<Vec<_>>()
    };
    let mut st = FwStats::default();
    let a = fw(zoned(1, 2));
    let b = fw(zoned(7, 8));
    assert_eq!(zones(&a, syn(0), &mut st), [(Action::Allow, Some(1))]);
    assert_eq!(zones(&a, syn(1), &mut st), [(Action::Allow, Some(1))]);
    // Another firewall, the same pair of MAC addresses.
    assert_eq!(zones(&b, syn(2), &mut st), [(Action::Allow, Some(7))]);
    // The first again, then a change of its zones.
    assert_eq!(zones(&a, syn(3), &mut st), [(Action::Allow, Some(1))]);
    a.set_policy(zoned(5, 6)).unwrap();
    assert_eq!(zones(&a, syn(4), &mut st), [(Action::Allow, Some(5))]);
}

/// `web_policy` with port security on both ports: each may use its own
/// address only.
fn secured_web() -> Policy {
    use ctrack_policy::model::PortSecurity;
    let mut p = web_policy();
    let ip = |a: [u8; 4]| (std::net::IpAddr::from(a), 32);
    p.ports[0].security = vec![PortSecurity {
        mac: C_MAC,
        ips: vec![ip(C_IP)],
    }];
    p.ports[1].security = vec![PortSecurity {
        mac: S_MAC,
        ips: vec![ip(S_IP)],
    }];
    p
}

/// Port security drops a spoofed source before the ACLs and the tracker,
/// and a destination the receiver may not use after them; the session's
/// packets pass, frame by frame and in bursts alike.
#[test]
fn port_security_holds_before_the_acls_and_the_session() {
    let fw = fw(secured_web());
    let mut o = FwOutputs::default();
    let (d, _) = one(&fw, from_client(S_IP, seg(1000, 80, SYN, 1, 0)), &mut o);
    assert_eq!((d.action, d.acl), (Action::Allow, AclRef::Acl(0)));
    let (d, _) = one(
        &fw,
        from_server(S_IP, seg(80, 1000, SYN | ACK, 9, 2)),
        &mut o,
    );
    assert_eq!((d.action, d.stage), (Action::Allow, Stage::Session));
    // The client sends as another address: dropped, nothing tracked.
    let mut spoofed = Frame::v4([10, 0, 0, 9], S_IP, seg(1001, 80, SYN, 1, 0));
    spoofed.eth_src = C_MAC;
    spoofed.eth_dst = S_MAC;
    let spoofed = spoofed.build();
    let (d, reply) = one(&fw, spoofed.clone(), &mut o);
    assert_eq!(
        (d.action, d.stage, d.acl, d.reason),
        (
            Action::Drop,
            Stage::PortSecurity,
            AclRef::PortSecurity,
            Some(DropReason::PortSecurity)
        )
    );
    assert!(reply.is_none() && d.ct.is_none());
    assert_eq!(fw.tracker().table_len(), 1);
    // To the server's MAC, another address: the server may not receive it.
    let (d, _) = one(
        &fw,
        from_client([10, 0, 0, 3], seg(1002, 80, SYN, 1, 0)),
        &mut o,
    );
    assert_eq!(d.stage, Stage::PortSecurity);
    assert_eq!(o.stats.drops[DropReason::PortSecurity as usize], 2);
    assert_eq!(o.stats.stages[Stage::PortSecurity as usize], 2);
    // The same frames in bursts: the session's packets, a spoofed one
    // among them, decided as frame by frame.
    let frames = || {
        let mut v = Vec::new();
        for i in 0..40u32 {
            v.push(from_client(S_IP, seg(1000, 80, ACK, 2 + i, 10)));
            v.push(from_server(S_IP, seg(80, 1000, ACK, 10, 2 + i)));
            if i == 17 {
                v.push(spoofed.clone());
            }
        }
        v
    };
    let fw2 = ctrack_policy::firewall::Firewall::new(
        Tracker::new(Config::default()),
        FragConfig::default(),
        secured_web(),
    )
    .unwrap();
    let mut o2 = FwOutputs::default();
    one(&fw2, from_client(S_IP, seg(1000, 80, SYN, 1, 0)), &mut o2);
    one(
        &fw2,
        from_server(S_IP, seg(80, 1000, SYN | ACK, 9, 2)),
        &mut o2,
    );
    let by_frame: Vec<Action> = frames()
        .into_iter()
        .map(|f| one(&fw2, f, &mut o2).0.action)
        .collect();
    let (by_burst, st) = bursts(&fw, [&mut frames()]);
    assert_eq!(by_burst, by_frame);
    assert_eq!(by_burst.iter().filter(|a| **a == Action::Drop).count(), 1);
    assert_eq!(st.drops[DropReason::PortSecurity as usize], 1);
}

/// A disabled port (`enabled = false`, OVN's `Logical_Switch_Port.enabled`):
/// nothing from it or to it, neighbour discovery and broadcasts included.
#[test]
fn a_disabled_port_sends_and_receives_nothing() {
    let mut p = web_policy();
    p.ports[1].disabled = true;
    let fw = fw(p);
    let mut o = FwOutputs::default();
    let (d, _) = one(&fw, from_client(S_IP, seg(1000, 80, SYN, 1, 0)), &mut o);
    assert_eq!((d.action, d.stage), (Action::Drop, Stage::PortSecurity));
    let (d, _) = one(&fw, from_server(S_IP, seg(80, 1000, SYN, 1, 0)), &mut o);
    assert_eq!((d.action, d.stage), (Action::Drop, Stage::PortSecurity));
    // Neighbour discovery passes above every ACL, but not from a disabled
    // port; a broadcast from it is dropped, one from the client is not.
    let ns = |src_mac: [u8; 6]| {
        let t: std::net::Ipv6Addr = "fd00::1".parse().unwrap();
        let mut f = Frame::v6(
            "fd00::2".parse().unwrap(),
            "ff02::1:ff00:1".parse().unwrap(),
            L4::Icmp {
                ty: 135,
                code: 0,
                rest: [0; 4],
                body: t.octets().to_vec(),
            },
        );
        f.ttl = 255;
        f.eth_src = src_mac;
        f.eth_dst = [0x33, 0x33, 0xff, 0, 0, 1];
        f.build()
    };
    let (d, _) = one(&fw, ns(S_MAC), &mut o);
    assert_eq!(d.stage, Stage::PortSecurity);
    let (d, _) = one(&fw, ns(C_MAC), &mut o);
    assert_eq!((d.action, d.stage), (Action::Allow, Stage::Nd));
    assert_eq!(fw.tracker().table_len(), 0);
    assert_eq!(o.stats.drops[DropReason::PortSecurity as usize], 3);
}

/// An ACK segment with four bytes of data.
fn data(sport: u16, dport: u16, seq: u32, ack: u32) -> L4 {
    L4::tcp_seg(sport, dport, ACK, seq, ack, 65535, b"data")
}

/// A segment of an established connection outside its window is invalid
/// to the tracker, and the firewall drops it (OVN's `ct.inv` drop), its
/// connection's word current or not, frame by frame and in a burst (where
/// it must not leave by the session with the packets around it); the
/// connection is unharmed: the next segment in the window passes.
#[test]
fn a_segment_outside_the_window_is_dropped_as_invalid() {
    let frames = [
        from_client(S_IP, seg(1000, 80, SYN, 1, 0)),
        from_server(S_IP, seg(80, 1000, SYN | ACK, 100, 2)),
        from_client(S_IP, seg(1000, 80, ACK, 2, 101)),
        // Data far past what each side's window allows (a segment
        // without data has its sequence number let go, as in Open
        // vSwitch).
        from_client(S_IP, data(1000, 80, 2 + (1 << 30), 101)),
        from_server(S_IP, data(80, 1000, 101 + (1 << 30), 2)),
        from_client(S_IP, data(1000, 80, 2, 101)),
    ];
    let what = |d: &Decision| (d.action, d.stage, d.acl, d.reason);
    let invalid = (
        Action::Drop,
        Stage::Session,
        AclRef::Invalid,
        Some(DropReason::Invalid),
    );
    let passes = (Action::Allow, Stage::Session, AclRef::Acl(0), None);
    let one_by_one = fw(web_policy());
    let mut o = FwOutputs::default();
    let alone: Vec<Decision> = frames
        .iter()
        .map(|f| one(&one_by_one, f.clone(), &mut o).0)
        .collect();
    assert_eq!(
        alone[2..].iter().map(what).collect::<Vec<_>>(),
        [passes, invalid, invalid, passes]
    );
    assert!(alone[3].ct.is_some_and(|v| v.state.contains(CtState::INV)));
    // In one burst, and in a burst of established packets alone.
    for split in [0, 3] {
        let (mut first, mut rest) = (frames[..split].to_vec(), frames[split..].to_vec());
        let (ds, st) = burst_decisions(&fw(web_policy()), [&mut first, &mut rest]);
        assert_eq!(
            ds.iter().map(what).collect::<Vec<_>>(),
            alone.iter().map(what).collect::<Vec<_>>(),
            "split at {split}"
        );
        assert_eq!(st.drops, o.stats.drops);
    }
}

/// Default drop; the client may open TCP 80 to the server, by `action`
/// in both stages; UDP to anyone, allow-related.
fn web_both_ways(action: AclAction) -> Policy {
    policy(
        DefaultAction::Drop,
        vec![
            acl(
                0,
                Direction::ToLport,
                1000,
                action,
                Expr::And(vec![Expr::eq(Field::Outport, SERVER), tcp_to(80)]),
            ),
            acl(
                1,
                Direction::FromLport,
                1000,
                action,
                Expr::And(vec![Expr::eq(Field::Inport, 1), tcp_to(80)]),
            ),
            // Something stateful, so that the policy tracks.
            acl(
                2,
                Direction::ToLport,
                10,
                AclAction::AllowRelated,
                Expr::flags(flag::IP | flag::UDP),
            ),
        ],
    )
}

/// A connection that a change leaves allowed stateless only (its ACLs now
/// `allow-stateless`, in a policy that still tracks other traffic) is no
/// longer tracked: the packet that finds it so passes, as the ACLs
/// decide it, and the connection is removed, so that the server's replies
/// need a rule of their own, as for any stateless traffic, and do not
/// pass on the session.
#[test]
fn a_connection_allowed_stateless_after_a_change_is_no_longer_tracked() {
    let stateless = web_both_ways(AclAction::AllowStateless);
    let fw = fw(web_policy());
    let mut o = FwOutputs::default();
    for f in [
        from_client(S_IP, seg(1000, 80, SYN, 1, 0)),
        from_server(S_IP, seg(80, 1000, SYN | ACK, 100, 2)),
        from_client(S_IP, seg(1000, 80, ACK, 2, 101)),
    ] {
        assert_eq!(one(&fw, f, &mut o).0.action, Action::Allow);
    }
    fw.set_policy(stateless).unwrap();
    let (d, _) = one(&fw, from_client(S_IP, seg(1000, 80, ACK, 2, 101)), &mut o);
    assert_eq!(
        (d.action, d.stage, d.acl),
        (Action::Allow, Stage::ToLport, AclRef::Acl(0))
    );
    assert_eq!(fw.tracker().table_len(), 0, "no longer tracked");
    // The server's answer: no rule lets the server send; not the session.
    let (d, _) = one(&fw, from_server(S_IP, seg(80, 1000, ACK, 101, 2)), &mut o);
    assert_eq!(
        (d.action, d.stage, d.reason),
        (Action::Drop, Stage::Default, Some(DropReason::Default))
    );
}

/// OVN's `allow` on a switch that has a stateful ACL commits, as
/// `allow-related` does: the server's answer to a connection that two
/// `allow` ACLs let in passes on the session, with no rule of its own.
#[test]
fn allow_commits_where_the_policy_has_a_stateful_acl() {
    let p = web_both_ways(AclAction::Allow);
    let fw = fw(p);
    let mut o = FwOutputs::default();
    let (d, _) = one(&fw, from_client(S_IP, seg(1000, 80, SYN, 1, 0)), &mut o);
    assert_eq!(
        (d.action, d.stage, d.acl),
        (Action::Allow, Stage::ToLport, AclRef::Acl(0))
    );
    assert!(d.ct.is_some_and(|v| v.committed), "{d:?}");
    let (d, _) = one(
        &fw,
        from_server(S_IP, seg(80, 1000, SYN | ACK, 100, 2)),
        &mut o,
    );
    assert_eq!(
        (d.action, d.stage, d.acl),
        (Action::Allow, Stage::Session, AclRef::Acl(0))
    );
}

/// A packet both stages deny is decided by the first, from-lport: its
/// `drop` (no answer), not the to-lport stage's `reject`.
#[test]
fn the_first_stage_that_denies_decides() {
    let ssh = || tcp_to(22);
    let p = policy(
        DefaultAction::Allow,
        vec![
            acl(0, Direction::FromLport, 100, AclAction::Drop, ssh()),
            acl(1, Direction::ToLport, 100, AclAction::Reject, ssh()),
            acl(
                2,
                Direction::ToLport,
                10,
                AclAction::AllowRelated,
                Expr::flags(flag::IP),
            ),
        ],
    );
    let fw = fw(p);
    let mut o = FwOutputs::default();
    let (d, answer) = one(&fw, from_client(S_IP, seg(1000, 22, SYN, 1, 0)), &mut o);
    assert_eq!(
        (d.action, d.stage, d.acl, d.reason),
        (
            Action::Drop,
            Stage::FromLport,
            AclRef::Acl(0),
            Some(DropReason::Acl)
        )
    );
    assert!(answer.is_none(), "no reset for a from-lport drop");
    assert_eq!(o.stats.rejects_sent, 0);
}

/// `pass` hands a packet to the next tier, whose ACLs decide it; only
/// after the last tier does the stage's default apply.
#[test]
fn pass_hands_over_to_the_next_tier() {
    let mut pass = acl(
        0,
        Direction::ToLport,
        1000,
        AclAction::Pass,
        Expr::And(vec![Expr::eq(Field::Outport, SERVER), tcp_to(80)]),
    );
    pass.tier = 0;
    let mut web = acl(
        1,
        Direction::ToLport,
        10,
        AclAction::AllowRelated,
        tcp_to(80),
    );
    web.tier = 1;
    let egress = acl(
        2,
        Direction::FromLport,
        1,
        AclAction::AllowRelated,
        Expr::flags(flag::IP),
    );
    let mut ssh = acl(3, Direction::ToLport, 1000, AclAction::Pass, tcp_to(22));
    ssh.tier = 1;
    let fw = fw(policy(DefaultAction::Drop, vec![pass, web, egress, ssh]));
    let mut o = FwOutputs::default();
    let (d, _) = one(&fw, from_client(S_IP, seg(1000, 80, SYN, 1, 0)), &mut o);
    assert_eq!(
        (d.action, d.stage, d.acl),
        (Action::Allow, Stage::ToLport, AclRef::Acl(1))
    );
    // Passed by the last tier: the default.
    let (d, _) = one(&fw, from_client(S_IP, seg(1001, 22, SYN, 1, 0)), &mut o);
    assert_eq!(
        (d.action, d.stage, d.reason),
        (Action::Drop, Stage::Default, Some(DropReason::Default))
    );
}

/// A packet the ACLs decide stateless in a policy that tracks other
/// traffic is looked up (its connection might exist) but not tracked: the
/// tracker's counters leave it out.
#[test]
fn a_packet_decided_stateless_is_not_counted_as_tracked() {
    let dns = || udp_to(53);
    let p = policy(
        DefaultAction::Drop,
        vec![
            acl(0, Direction::ToLport, 100, AclAction::AllowStateless, dns()),
            acl(
                1,
                Direction::FromLport,
                100,
                AclAction::AllowStateless,
                dns(),
            ),
            acl(
                2,
                Direction::ToLport,
                10,
                AclAction::AllowRelated,
                tcp_to(80),
            ),
        ],
    );
    let fw = fw(p);
    let mut o = FwOutputs::default();
    for sport in [5000, 5000, 5001] {
        let (d, _) = one(&fw, from_client(S_IP, L4::udp(sport, 53, b"q")), &mut o);
        assert_eq!(
            (d.action, d.stage, d.acl),
            (Action::Allow, Stage::ToLport, AclRef::Acl(0))
        );
        assert!(d.ct.is_none(), "{d:?}");
    }
    assert_eq!(o.stats.tracker, ctrack_core::Stats::default());
    assert_eq!(fw.tracker().table_len(), 0);
}

/// A connection the tracker cannot commit (its table full) is not let
/// through: the packet is dropped, with the reason, and nothing is
/// tracked for it.
#[test]
fn a_connection_the_table_has_no_room_for_is_dropped() {
    let fw = Firewall::new(
        Tracker::new(Config {
            max_conns: 1,
            ..Config::default()
        }),
        FragConfig::default(),
        web_policy(),
    )
    .unwrap();
    let mut o = FwOutputs::default();
    // The first connection, established (early drop evicts only
    // connections not yet established).
    for f in [
        from_client(S_IP, seg(1000, 80, SYN, 1, 0)),
        from_server(S_IP, seg(80, 1000, SYN | ACK, 100, 2)),
        from_client(S_IP, seg(1000, 80, ACK, 2, 101)),
    ] {
        assert_eq!(one(&fw, f, &mut o).0.action, Action::Allow);
    }
    let (d, _) = one(&fw, from_client(S_IP, seg(1001, 80, SYN, 1, 0)), &mut o);
    assert_eq!(
        (d.action, d.reason),
        (Action::Drop, Some(DropReason::TableFull)),
        "{d:?}"
    );
    assert_eq!(fw.tracker().table_len(), 1);
}

/// A UDP frame from the client to `dst` at `dst_mac`.
fn udp(dst_mac: [u8; 6], dst: [u8; 4], sport: u16, dport: u16) -> Vec<u8> {
    let mut f = Frame::v4(C_IP, dst, L4::udp(sport, dport, b"x"));
    f.eth_src = C_MAC;
    f.eth_dst = dst_mac;
    f.build()
}

/// A policy that tracks: UDP allow-related both ways, nothing else.
fn allow_udp() -> Policy {
    policy(
        DefaultAction::Drop,
        both_stages(AclAction::AllowRelated, Expr::flags(flag::UDP)),
    )
}

/// ACL 0 (from-lport) and ACL 1 (to-lport), each `action` for `expr`, at
/// priority 1.
fn both_stages(action: AclAction, expr: Expr) -> Vec<Acl> {
    vec![
        acl(0, Direction::FromLport, 1, action, expr.clone()),
        acl(1, Direction::ToLport, 1, action, expr),
    ]
}

/// As OVN on a switch with stateful ACLs: multicast (`eth.mcast`) and a
/// DHCPv6 client's message (`udp.src == 546 && udp.dst == 547`) are never
/// sent to conntrack; the ACLs alone decide them, an allow-related ACL
/// allows without committing, and a drop ACL drops. Frame by frame and in
/// bursts.
#[test]
fn multicast_and_dhcpv6_clients_meet_the_acls_untracked() {
    let mut dhcp6 = Frame::new(
        "fe80::1".parse().unwrap(),
        "ff02::1:2".parse().unwrap(),
        L4::udp(546, 547, b"solicit"),
    );
    dhcp6.eth_src = C_MAC;
    dhcp6.eth_dst = S_MAC;
    let frames = [
        // Multicast and broadcast: allowed, not committed.
        (
            udp([0x01, 0, 0x5e, 1, 1, 1], [239, 1, 1, 1], 5000, 6000),
            false,
        ),
        (udp([0xff; 6], [10, 0, 0, 255], 5001, 6000), false),
        // A DHCPv6 client's message, to a unicast MAC (and over IPv4 too,
        // as OVN's match says).
        (dhcp6.build(), false),
        (udp(S_MAC, S_IP, 546, 547), false),
        // A server's answer (547 to 546): kept from the table too (OVN
        // tracks it, but meets each with the ACLs again; docs/firewall.md).
        (udp(S_MAC, S_IP, 547, 546), false),
        // Unicast: committed.
        (udp(S_MAC, S_IP, 5002, 6000), true),
        (udp(S_MAC, S_IP, 546, 548), true),
    ];
    for burst in [false, true] {
        let fw = fw(allow_udp());
        let mut o = FwOutputs::default();
        for (frame, commits) in frames.clone() {
            let before = fw.tracker().table_len();
            let d = if burst {
                burst_decisions(&fw, [&mut vec![frame]]).0[0]
            } else {
                one(&fw, frame, &mut o).0
            };
            assert_eq!(d.action, Action::Allow, "burst {burst}: {d:?}");
            assert_eq!(d.acl, AclRef::Acl(1), "burst {burst}: {d:?}");
            let committed = fw.tracker().table_len() - before;
            assert_eq!(committed, usize::from(commits), "burst {burst}: {d:?}");
        }
    }
    // OVN's match is UDP's: TCP and SCTP between ports 546 and 547 are
    // tracked as any other.
    for burst in [false, true] {
        let fw = fw(policy(
            DefaultAction::Drop,
            both_stages(AclAction::AllowRelated, Expr::flags(flag::IP)),
        ));
        let mut o = FwOutputs::default();
        let syn = from_client(S_IP, seg(546, 547, SYN, 1, 0));
        let mut sctp = Frame::v4(
            C_IP,
            S_IP,
            L4::Sctp {
                sport: 546,
                dport: 547,
                vtag: 0,
                chunks: vec![
                    1, 0, 0, 20, 0, 0, 0, 1, 0, 0, 0xff, 0xff, 0, 1, 0, 1, 0, 0, 0, 1,
                ],
            },
        );
        sctp.eth_src = C_MAC;
        sctp.eth_dst = S_MAC;
        for frame in [syn, sctp.build()] {
            let d = if burst {
                burst_decisions(&fw, [&mut vec![frame]]).0[0]
            } else {
                one(&fw, frame, &mut o).0
            };
            assert_eq!(d.action, Action::Allow, "burst {burst}: {d:?}");
        }
        assert_eq!(fw.tracker().table_len(), 2, "burst {burst}");
    }
    // A later fragment carries no UDP header: bytes that read as a DHCPv6
    // client's ports at the start of its data are not them (in a burst,
    // which takes fragments as they come).
    let later = |data: [u8; 4]| {
        let mut payload = data.to_vec();
        payload.resize(64, 0);
        let mut f = Frame::v4(C_IP, S_IP, L4::Raw { proto: 17, payload });
        f.eth_src = C_MAC;
        f.eth_dst = S_MAC;
        f.frag_offset = 1480;
        f.build()
    };
    let fw_a = fw(allow_udp());
    let fw_b = fw(allow_udp());
    let a = burst_decisions(&fw_a, [&mut vec![later([2, 0x22, 2, 0x23])]]).0[0];
    let b = burst_decisions(&fw_b, [&mut vec![later([0, 1, 0, 2])]]).0[0];
    assert_eq!(
        (a.action, a.stage, a.acl),
        (b.action, b.stage, b.acl),
        "{a:?} {b:?}"
    );
    assert_eq!(a.ct.map(|v| v.state), b.ct.map(|v| v.state), "{a:?} {b:?}");
    // A frame to a group MAC with the addresses and ports of a committed
    // connection is untracked all the same, frame by frame and in a burst
    // (whose chunk of such frames goes frame by frame).
    for burst in [false, true] {
        let fw = fw(allow_udp());
        let mut o = FwOutputs::default();
        let (d, _) = one(&fw, udp(S_MAC, S_IP, 5003, 6000), &mut o);
        assert!(d.ct.is_some_and(|v| v.committed), "{d:?}");
        let to_group = udp([0x01, 0, 0x5e, 0, 0, 1], S_IP, 5003, 6000);
        let ds = if burst {
            burst_decisions(&fw, [&mut vec![to_group.clone(), to_group]]).0
        } else {
            vec![
                one(&fw, to_group.clone(), &mut o).0,
                one(&fw, to_group, &mut o).0,
            ]
        };
        for d in ds {
            assert_eq!(
                (d.action, d.acl, d.ct),
                (Action::Allow, AclRef::Acl(1), None),
                "burst {burst}"
            );
        }
    }
    // A drop ACL above drops the multicast frame, untracked all the same.
    let mut p = allow_udp();
    p.acls.push(acl(
        2,
        Direction::ToLport,
        10,
        AclAction::Drop,
        Expr::flags(flag::UDP),
    ));
    let fw = fw(p);
    let mut o = FwOutputs::default();
    let (d, _) = one(&fw, frames[0].0.clone(), &mut o);
    assert_eq!(
        (d.action, d.acl, d.ct),
        (Action::Drop, AclRef::Acl(2), None)
    );
    assert_eq!(fw.tracker().table_len(), 0);
}

/// A port whose MAC is a group address (a policy may say so): its
/// frames to the other port are tracked and commit; the other's to it are
/// not tracked, in a burst too, where a chunk between the two goes frame
/// by frame rather than by the session the first commit made (found by
/// `firewall_frames`, whose ports take the MACs of its frames).
#[test]
fn frames_to_a_port_with_a_group_mac_are_untracked() {
    let group_mac = [0x03, 0, 0, 0, 0, 2];
    for burst in [false, true] {
        let mut p = allow_udp();
        p.ports[1].macs = vec![group_mac];
        let fw = fw(p);
        let mut o = FwOutputs::default();
        let mut back = Frame::v4(S_IP, C_IP, L4::udp(6000, 5004, b"x"));
        back.eth_src = group_mac;
        back.eth_dst = C_MAC;
        let (d, _) = one(&fw, back.build(), &mut o);
        assert!(d.ct.is_some_and(|v| v.committed), "{d:?}");
        let to_group = udp(group_mac, S_IP, 5004, 6000);
        let ds = if burst {
            // Two chunks: one of frames to the group port, one that
            // begins with the group port's frame.
            let mut ds = burst_decisions(&fw, [&mut vec![to_group.clone(), to_group.clone()]]).0;
            let mid = burst_decisions(&fw, [&mut vec![back.build(), to_group]]).0;
            assert!(mid[0].ct.is_some(), "{:?}", mid[0]);
            ds.push(mid[1]);
            ds
        } else {
            vec![
                one(&fw, to_group.clone(), &mut o).0,
                one(&fw, to_group, &mut o).0,
            ]
        };
        for d in ds {
            assert_eq!(
                (d.action, d.ct),
                (Action::Allow, None),
                "burst {burst}: {d:?}"
            );
        }
    }
}
