//! `persist-established` across policy changes, as OVN has it (ovn-nb(5)):
//! a connection such an ACL committed outlives changes to the ACL's match,
//! and stops being allowed once the ACL is gone, loses the option or
//! stops committing. An ACL is the same ACL in the next policy file by its
//! name, or, unnamed, by its direction, priority and match
//! (docs/firewall.md, "Policy changes").

mod common;
use common::{each, in_a_burst, plain, seg};

use ctrack_core::{Config, FragConfig, Time, Tracker};
use ctrack_policy::firewall::{AclRef, Action, Decision, DropReason, Firewall, FwOutputs, Stage};
use ctrack_policy::model::Policy;
use ctrack_wire::tcp::flags::{ACK, SYN};

const C_IP: [u8; 4] = [10, 0, 0, 1];
const S_IP: [u8; 4] = [10, 0, 0, 2];
const C_MAC: [u8; 6] = [2, 0, 0, 0, 0, 1];
const S_MAC: [u8; 6] = [2, 0, 0, 0, 0, 2];
const OUT: ([u8; 6], [u8; 6]) = (C_MAC, S_MAC);
const BACK: ([u8; 6], [u8; 6]) = (S_MAC, C_MAC);

/// Default drop; the client and the server; the client may send anything
/// out (from-lport `ip`, allow-related, with `egress` in its place when
/// given); `acls` as written.
fn policy(acls: &str, egress: &str) -> Policy {
    let text = format!(
        r#"
[default]
action = "drop"

[[port]]
name = "client"
addresses = ["02:00:00:00:00:01 10.0.0.1"]

[[port]]
name = "server"
addresses = ["02:00:00:00:00:02 10.0.0.2"]

[[acl]]
name = "egress"
direction = "from-lport"
priority = 1
match = 'inport == "client" && ip4'
action = "allow-related"
{egress}

{acls}
"#
    );
    Policy::from_str(&text, "persist.toml").unwrap_or_else(|e| panic!("{e}\n{text}"))
}

/// The server's HTTP, allow-related, with `persist-established`, named
/// `name` (unnamed for ""), matching `tcp.dst == {port}`, and `more`.
fn http(name: &str, priority: u16, ports: &str, more: &str) -> String {
    let name = match name {
        "" => String::new(),
        n => format!("name = \"{n}\""),
    };
    format!(
        r#"
[[acl]]
{name}
direction = "to-lport"
priority = {priority}
match = 'outport == "server" && tcp.dst == {ports}'
action = "allow-related"
persist-established = true
{more}
"#
    )
}

fn fw(p: Policy) -> Firewall<u64> {
    Firewall::new(Tracker::new(Config::default()), FragConfig::default(), p).unwrap()
}

/// The client's connection from port `sp` to the server's 80, opened:
/// the SYN and the SYN-ACK.
fn open(fw: &Firewall<u64>, sp: u16) -> Vec<Decision> {
    let frames = [
        seg(((C_IP, sp), (S_IP, 80)), (SYN, 1, 0), &[], OUT),
        seg(((S_IP, 80), (C_IP, sp)), (SYN | ACK, 100, 2), &[], BACK),
    ];
    each(fw, &frames, &mut FwOutputs::default())
}

/// A later packet of the connection from `sp` each way.
fn later(sp: u16) -> [Vec<u8>; 2] {
    [
        seg(((C_IP, sp), (S_IP, 80)), (ACK, 2, 101), b"GET", OUT),
        seg(((S_IP, 80), (C_IP, sp)), (ACK, 101, 5), b"OK", BACK),
    ]
}

/// What a change to `next` does to a connection `first` allowed, frame
/// by frame and, on a second firewall, in a burst (which must agree):
/// the later packets' (action, stage, ACL).
fn across(first: &Policy, next: &Policy) -> Vec<(Action, Stage, AclRef)> {
    let (one, burst) = (fw(first.clone()), fw(first.clone()));
    for f in [&one, &burst] {
        assert!(open(f, 1000).iter().all(|d| d.action == Action::Allow));
        f.set_policy(next.clone()).unwrap();
    }
    let frames: Vec<Vec<u8>> = later(1000).into_iter().chain(later(1000)).collect();
    let ds = each(&one, &frames, &mut FwOutputs::default());
    let bs = in_a_burst(&burst, &frames, &mut FwOutputs::default());
    assert_eq!(
        ds.iter().map(plain).collect::<Vec<_>>(),
        bs.iter().map(plain).collect::<Vec<_>>()
    );
    ds.iter().map(|d| (d.action, d.stage, d.acl)).collect()
}

const PERSISTED: (Action, Stage, AclRef) = (Action::Allow, Stage::Session, AclRef::Persisted);

fn blocked(d: &[(Action, Stage, AclRef)]) -> bool {
    d[0].0 == Action::Drop && d[1..].iter().all(|d| d.0 == Action::Drop)
}

/// A named ACL whose match changes so that it no longer allows the
/// connection: the connection is left alone, reported `persisted` each
/// way, in bursts too.
#[test]
fn a_named_acl_whose_match_changed_keeps_its_connections() {
    let first = policy(&http("web", 1000, "80", ""), "");
    let next = policy(&http("web", 1000, "8080", ""), "");
    assert_eq!(across(&first, &next), [PERSISTED; 4]);
    // Moved to another priority and place, still by name.
    let moved = policy(
        &format!(
            "{}{}",
            http("other", 10, "443", ""),
            http("web", 7, "8080", "")
        ),
        "",
    );
    assert_eq!(across(&first, &moved), [PERSISTED; 4]);
}

/// The ACL gone, its option unset, or its action no longer one that
/// commits: its connections are blocked at their next packet, either way,
/// as OVN flushes them.
#[test]
fn a_connection_ends_with_its_persisting_acl() {
    let first = policy(&http("web", 1000, "80", ""), "");
    let gone = policy(&http("ssh", 1000, "22", ""), "");
    let unset = policy(
        &http("web", 1000, "8080", "").replace("persist-established = true", ""),
        "",
    );
    let stateless = policy(
        &http("web", 1000, "8080", "").replace("allow-related", "allow-stateless"),
        "",
    );
    for next in [gone, unset, stateless] {
        let d = across(&first, &next);
        assert!(blocked(&d), "{d:?}");
        assert_eq!(d[0].2, AclRef::Default);
    }
    // Blocked whichever side sends first after the change.
    let f = fw(first.clone());
    open(&f, 1000);
    f.set_policy(policy(&http("ssh", 1000, "22", ""), ""))
        .unwrap();
    let [_, back] = later(1000);
    let d = each(&f, &[back], &mut FwOutputs::default());
    assert_eq!(
        (d[0].action, d[0].reason),
        (Action::Drop, Some(DropReason::Blocked))
    );
    assert_eq!(f.tracker().table_len(), 0);
}

/// An unnamed ACL is the same ACL while its direction, priority and match
/// stay, wherever it stands in the file: kept behind a drop put above it,
/// ended when its match changes.
#[test]
fn an_unnamed_acl_is_its_direction_priority_and_match() {
    let first = policy(&http("", 1000, "80", ""), "");
    let drop = r#"
[[acl]]
direction = "to-lport"
priority = 2000
match = 'tcp.dst == 80'
action = "drop"
"#;
    let behind = policy(&format!("{drop}{}", http("", 1000, "80", "")), "");
    assert_eq!(across(&first, &behind), [PERSISTED; 4]);
    let changed = policy(&format!("{drop}{}", http("", 1000, "{80, 81}", "")), "");
    assert!(blocked(&across(&first, &changed)));
    let reprioritised = policy(&format!("{drop}{}", http("", 999, "80", "")), "");
    assert!(blocked(&across(&first, &reprioritised)));
    // Still allowing, it stays its ACL's (reported and counted as it).
    let same = policy(
        &format!("{}{}", http("x", 5, "22", ""), http("", 1000, "80", "")),
        "",
    );
    let acl = AclRef::Acl(same.acls.iter().position(|a| a.priority == 1000).unwrap() as u32);
    assert_eq!(
        across(&first, &same),
        [(Action::Allow, Stage::Session, acl); 4]
    );
}

/// Each stage keeps its own ACL's persistence, as OVN's each zone: the
/// to-lport ACL persisting holds that stage, while the from-lport stage,
/// whose ACL does not persist, meets the new policy's ACLs.
#[test]
fn each_stage_persists_by_its_own_acl() {
    let first = policy(&http("web", 1000, "80", ""), "");
    // The client may no longer send TCP out: the from-lport stage drops
    // the connection, whatever the to-lport ACL keeps.
    let drop_out = r#"
[[acl]]
direction = "from-lport"
priority = 100
match = 'tcp'
action = "drop"
"#;
    let next = policy(&format!("{}{drop_out}", http("web", 1000, "8080", "")), "");
    assert!(blocked(&across(&first, &next)));
    // With the egress ACL persisting too, both stages are held.
    let both = policy(&http("web", 1000, "80", ""), "persist-established = true");
    let next = policy(
        &format!("{}{drop_out}", http("web", 1000, "8080", "")),
        "persist-established = true",
    );
    assert_eq!(across(&both, &next), [PERSISTED; 4]);
}

/// A connection no persisting ACL committed does not become one a later
/// change leaves alone because a persisting ACL allows it after a first
/// change: OVN commits no `allow_established` to an established
/// connection.
#[test]
fn persistence_comes_with_the_commit_only() {
    let plain_http = policy(
        &http("web", 1000, "80", "").replace("persist-established = true", ""),
        "",
    );
    let f = fw(plain_http);
    open(&f, 1000);
    f.set_policy(policy(&http("web", 1000, "80", ""), ""))
        .unwrap();
    let d = each(&f, &later(1000), &mut FwOutputs::default());
    assert!(d.iter().all(|d| d.action == Action::Allow), "{d:?}");
    f.set_policy(policy(&http("web", 1000, "8080", ""), ""))
        .unwrap();
    let d = each(&f, &later(1000), &mut FwOutputs::default());
    assert_eq!(d[0].reason, Some(DropReason::Blocked), "{d:?}");
    // While one a persisting ACL committed is left alone by the same two
    // changes.
    let f = fw(policy(&http("web", 1000, "80", ""), ""));
    open(&f, 1000);
    f.set_policy(policy(&http("web", 1000, "80", ""), ""))
        .unwrap();
    each(&f, &later(1000), &mut FwOutputs::default());
    f.set_policy(policy(&http("web", 1000, "8080", ""), ""))
        .unwrap();
    let d = each(&f, &later(1000), &mut FwOutputs::default());
    assert!(d.iter().all(|d| d.acl == AclRef::Persisted), "{d:?}");
}

/// A connection whose stage's persisting ACL is gone, allowed by another
/// persisting ACL of the new policy, takes that one's identity (OVN
/// flushes it and commits its next packet afresh): it is left alone
/// while that ACL lives, and blocked when it goes.
#[test]
fn a_connection_judged_afresh_takes_the_persisting_acl_that_allows_it() {
    let f = fw(policy(&http("web", 1000, "80", ""), ""));
    open(&f, 1000);
    let web2 = http("web2", 900, "{80, 8080}", "");
    f.set_policy(policy(&web2, "")).unwrap();
    let d = each(&f, &later(1000), &mut FwOutputs::default());
    assert!(
        d.iter()
            .all(|d| d.action == Action::Allow && d.acl == AclRef::Acl(1)),
        "{d:?}"
    );
    f.set_policy(policy(&http("web2", 900, "8080", ""), ""))
        .unwrap();
    let d = each(&f, &later(1000), &mut FwOutputs::default());
    assert!(d.iter().all(|d| d.acl == AclRef::Persisted), "{d:?}");
    f.set_policy(policy(&http("web", 1000, "8080", ""), ""))
        .unwrap();
    let d = each(&f, &later(1000), &mut FwOutputs::default());
    assert_eq!(d[0].reason, Some(DropReason::Blocked), "{d:?}");
}

/// The ACL that allows a connection after a change gives it its `label`,
/// as OVN commits an established connection again to change its label;
/// the persisting ACLs' identities sit below it in the label.
#[test]
fn a_change_gives_the_connection_its_new_acl_label() {
    // The label of the connection of decision `d`, from the tracker (the
    // firewall's verdicts of established packets carry none).
    let label = |f: &Firewall<u64>, d: &Decision| {
        let id = d.ct.and_then(|v| v.conn).expect("a connection");
        let info = f.tracker().conn(id, Time::from_secs(1)).expect("live");
        info.entry.label
    };
    let f = fw(policy(&http("web", 1000, "80", "label = 7"), ""));
    let d = open(&f, 1000);
    let first = label(&f, &d[0]);
    assert_eq!(d[0].ct.unwrap().label, first, "a commit's verdict has it");
    assert_eq!(first >> 96, 7);
    assert_ne!(first & ((1 << 96) - 1), 0, "the ACL's identity");
    f.set_policy(policy(&http("web", 1000, "80", "label = 9"), ""))
        .unwrap();
    let d = each(&f, &later(1000), &mut FwOutputs::default());
    let now = label(&f, &d[0]);
    assert_eq!(
        (now >> 96, now & ((1 << 96) - 1)),
        (9, first & ((1 << 96) - 1))
    );
    // A connection left alone keeps its label.
    f.set_policy(policy(&http("web", 1000, "8080", "label = 11"), ""))
        .unwrap();
    let d = each(&f, &later(1000), &mut FwOutputs::default());
    assert_eq!(d[0].acl, AclRef::Persisted);
    assert_eq!(label(&f, &d[0]), now);
}

/// A connection committed again by a later `+new` packet (a SYN sent
/// again) under a persisting ACL is one that ACL committed, as OVN
/// commits every `ct.new` packet with `allow_established`: a change after
/// it leaves the connection alone while the ACL lives. (That commit
/// leaves the connection's word as it was, a word of the older policy
/// whose `persist` bit is clear; the label, which the commit writes, is
/// what says so: found by the fuzz target `firewall_frames`, seed 5161.)
#[test]
fn a_new_packets_commit_persists_the_connection_too() {
    let syn = seg(((C_IP, 1000), (S_IP, 80)), (SYN, 1, 0), &[], OUT);
    let syn_ack = seg(((S_IP, 80), (C_IP, 1000)), (SYN | ACK, 100, 2), &[], BACK);
    let plain_http = policy(
        &http("web", 1000, "80", "").replace("persist-established = true", ""),
        "",
    );
    let (one, burst) = (fw(plain_http.clone()), fw(plain_http));
    let (mut so, mut sb) = (FwOutputs::default(), FwOutputs::default());
    for (f, st) in [(&one, &mut so), (&burst, &mut sb)] {
        let d = each(f, std::slice::from_ref(&syn), st);
        assert!(d[0].ct.is_some_and(|v| v.committed), "{d:?}");
        f.set_policy(policy(&http("web", 1000, "80", ""), ""))
            .unwrap();
        // The SYN again, `+new`: the persisting ACL commits it.
        let d = each(f, std::slice::from_ref(&syn), st);
        assert_eq!((d[0].action, d[0].acl), (Action::Allow, AclRef::Acl(1)));
        f.set_policy(policy(&http("web", 1000, "8080", ""), ""))
            .unwrap();
    }
    let d = each(&one, std::slice::from_ref(&syn_ack), &mut so);
    let b = in_a_burst(&burst, std::slice::from_ref(&syn_ack), &mut sb);
    assert_eq!(plain(&b[0]), plain(&d[0]));
    assert_eq!((d[0].action, d[0].stage, d[0].acl), PERSISTED, "{:?}", d[0]);
}

/// A connection a change left alone is not one the new policy's ACLs
/// allowed: a `+new` packet of it (the SYN sent again before any answer)
/// meets them, as OVN's ACLs meet every `ct.new` packet, and does not
/// take the word the change stamped the connection with (judged again at
/// the client's ACK, `+est` as in Open vSwitch, before any answer).
#[test]
fn a_persisted_connections_new_packets_meet_the_new_acls() {
    let syn = seg(((C_IP, 1000), (S_IP, 80)), (SYN, 1, 0), &[], OUT);
    let ack = seg(((C_IP, 1000), (S_IP, 80)), (ACK, 2, 0), &[], OUT);
    let first = policy(&http("web", 100, "80", ""), "");
    let next = policy(&http("web", 100, "8080", ""), "");
    let (one, burst) = (fw(first.clone()), fw(first));
    let (mut so, mut sb) = (FwOutputs::default(), FwOutputs::default());
    let mut got = Vec::new();
    for (f, st, by_burst) in [(&one, &mut so, false), (&burst, &mut sb, true)] {
        let d = each(f, std::slice::from_ref(&syn), st);
        assert!(d[0].ct.is_some_and(|v| v.committed), "{d:?}");
        f.set_policy(next.clone()).unwrap();
        let frames = [ack.clone(), syn.clone(), syn.clone()];
        let ds = match by_burst {
            false => each(f, &frames, st),
            true => frames
                .iter()
                .flat_map(|s| in_a_burst(f, std::slice::from_ref(s), st))
                .collect(),
        };
        got.push(
            ds.iter()
                .map(|d| (d.action, d.stage, d.acl, d.ct.map(|v| v.state.to_string())))
                .collect::<Vec<_>>(),
        );
    }
    // The ACK passes, the connection left alone; each SYN after it is
    // dropped by the to-lport stage's default (no ACL of the new policy
    // takes port 80).
    let (est, new) = (Some("est|trk".to_string()), Some("new|trk".to_string()));
    let dropped = (Action::Drop, Stage::Default, AclRef::Default, new);
    assert_eq!(
        got[0],
        [
            (PERSISTED.0, PERSISTED.1, PERSISTED.2, est),
            dropped.clone(),
            dropped
        ]
    );
    assert_eq!(got[1], got[0], "in bursts");
}

/// A connection judged again where another persisting ACL now allows it
/// keeps the identity of the one that committed it while that one stays
/// (so its word says a commit would change something: `WordStage::Again`);
/// its next `+new` packet, the SYN sent again, is committed, as OVN
/// commits every `ct.new` packet, and takes the new ACL's identity. So a
/// later change that drops the first ACL and narrows the second leaves
/// the connection alone, by the second.
#[test]
fn a_syn_sent_again_takes_the_identity_of_the_persisting_acl_that_allows_it_now() {
    let syn = seg(((C_IP, 1000), (S_IP, 80)), (SYN, 1, 0), &[], OUT);
    let ack = seg(((C_IP, 1000), (S_IP, 80)), (ACK, 2, 0), &[], OUT);
    let syn_ack = seg(((S_IP, 80), (C_IP, 1000)), (SYN | ACK, 100, 2), &[], BACK);
    let a = || http("a", 100, "80", "");
    let b = |ports| http("b", 200, ports, "");
    let p1 = policy(&a(), "");
    let p2 = policy(&format!("{}{}", a(), b("{80, 443}")), "");
    let p3 = policy(&b("443"), "");
    let (one, burst) = (fw(p1.clone()), fw(p1));
    let (mut so, mut sb) = (FwOutputs::default(), FwOutputs::default());
    for (f, st) in [(&one, &mut so), (&burst, &mut sb)] {
        let d = each(f, std::slice::from_ref(&syn), st);
        assert!(d[0].ct.is_some_and(|v| v.committed), "{d:?}");
        f.set_policy(p2.clone()).unwrap();
        // Judged again at the client's ACK (`+est`): allowed by `b`.
        let d = each(f, std::slice::from_ref(&ack), st);
        assert_eq!((d[0].action, d[0].acl), (Action::Allow, AclRef::Acl(2)));
        // The SYN again: committed by `b` (reported as its word would
        // report it: what tells the two apart is the identity it leaves).
        let d = each(f, std::slice::from_ref(&syn), st);
        assert_eq!(
            (d[0].action, d[0].stage, d[0].acl),
            (Action::Allow, Stage::ToLport, AclRef::Acl(2))
        );
        f.set_policy(p3.clone()).unwrap();
    }
    let d = each(&one, std::slice::from_ref(&syn_ack), &mut so);
    let b = in_a_burst(&burst, std::slice::from_ref(&syn_ack), &mut sb);
    assert_eq!(plain(&b[0]), plain(&d[0]));
    assert_eq!((d[0].action, d[0].stage, d[0].acl), PERSISTED, "{:?}", d[0]);
}
