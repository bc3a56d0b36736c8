//! Fuzz body for the firewall (ctrack-policy's policy, tracker, NAT and
//! gateways in one stage): frame lists through its burst path and through
//! its per-packet path must get the same decisions, answers and bytes, and
//! so must a firewall whose ACLs meet every `+new` packet.

use ctrack_core::{Config, FragConfig, KeyHasher, LinkType, Time, Tracker};
use ctrack_policy::expr::Expr;
use ctrack_policy::firewall::{BurstOut, Decision, Firewall, FwOut, FwOutputs, FwStats};
use ctrack_policy::key::Field;
use ctrack_policy::model::{Acl, AclAction, Direction, Policy};
use ctrack_wire::parse_frame;

use crate::Probe;

/// The policies a `firewall_frames` input picks from (its first byte), as
/// policy files: `{A}` and `{B}` stand for the source and destination MAC
/// addresses of the input's first frame, so that mutated traffic meets
/// ACLs that name its ports. Between them: port security, stateful and
/// stateless ACLs at interleaved priorities, `reject` of every kind, tiers
/// and `pass`, `persist-established` across changes that keep its ACL
/// and one that drops it,
/// source NAT with the FTP and TFTP gateways, a default allow that
/// commits, ports in zones of their own, and sessions of several ACLs
/// side by side.
pub const FIREWALL_POLICIES: [&str; 8] = [
    // A security group: each port may send anything out; the server
    // takes a few services in, and connections to them outlive the
    // change to the next policy (`persist-established`, the ACL kept by
    // its name there); ARP passes stateless.
    // Port security: `a` sends from and receives at private addresses
    // only, `b` its MAC alone.
    r#"[default]
action = "drop"
[[port]]
name = "a"
addresses = ["{A}"]
port_security = ["{A} 10.0.0.0/8 192.168.0.0/16 172.16.0.1/12 fd00::/8"]
zone = 1
[[port]]
name = "b"
addresses = ["{B}"]
port_security = ["{B}"]
zone = 2
[[acl]]
direction = "from-lport"
priority = 10
match = 'ip'
action = "allow-related"
[[acl]]
name = "services"
direction = "to-lport"
priority = 100
match = 'outport == "b" && (tcp.dst == {21, 22, 80, 443} || udp.dst == {53, 69} || icmp4 || icmp6)'
action = "allow-related"
persist-established = true
[[acl]]
direction = "from-lport"
priority = 100
match = 'arp'
action = "allow-stateless"
[[acl]]
direction = "to-lport"
priority = 100
match = 'arp'
action = "allow-stateless"
"#,
    // The first one's ports and zones, its services closed but FTP (with
    // the gateway) and SSH by the same ACL, kept by its name: the
    // connections the first one opened to the others are no longer
    // allowed but left alone (the ACL has `persist-established`), and
    // their later packets are a persisted session's, until the change to
    // the next policy, which has no such ACL, blocks them. Ports in zones
    // of their own and ACLs that read only what
    // a connection's packets share: given again, this policy judges every
    // connection, FTP data connections among them, as before
    // (`Compiled::judges_again_alike`).
    r#"[default]
action = "drop"
[[port]]
name = "a"
addresses = ["{A}"]
zone = 1
[[port]]
name = "b"
addresses = ["{B}"]
zone = 2
[[acl]]
direction = "from-lport"
priority = 10
match = 'ip'
action = "allow-related"
[[acl]]
name = "services"
direction = "to-lport"
priority = 100
match = 'outport == "b" && tcp.dst == {21, 22}'
action = "allow-related"
alg = "ftp"
persist-established = true
[[acl]]
direction = "from-lport"
priority = 100
match = 'arp'
action = "allow-stateless"
[[acl]]
direction = "to-lport"
priority = 100
match = 'arp'
action = "allow-stateless"
"#,
    // The first one's ports and zones again, with neither of the first
    // two's persisting ACLs: the connections they left alone are judged as
    // any other now (the `services` ACL gone), blocked or allowed by this
    // one's SSH ACL, which persists under an identity of its own.
    r#"[default]
action = "drop"
[[port]]
name = "a"
addresses = ["{A}"]
zone = 1
[[port]]
name = "b"
addresses = ["{B}"]
zone = 2
[[acl]]
direction = "from-lport"
priority = 10
match = 'ip'
action = "allow-related"
[[acl]]
name = "ssh"
direction = "to-lport"
priority = 100
match = 'outport == "b" && tcp.dst == 22'
action = "allow-related"
persist-established = true
[[acl]]
direction = "from-lport"
priority = 100
match = 'arp'
action = "allow-stateless"
[[acl]]
direction = "to-lport"
priority = 100
match = 'arp'
action = "allow-stateless"
"#,
    // Stateless and stateful at interleaved priorities (seed 004's case
    // and its converse), rejects of each protocol, their answers limited
    // by a `[copp]` meter in kilobits (the rejected frames' sizes count).
    r#"[default]
action = "allow"
[[port]]
name = "a"
addresses = ["{A}"]
[[port]]
name = "b"
addresses = ["{B}"]
zone = 7
[[acl]]
direction = "from-lport"
priority = 300
match = 'tcp.dst == 23 || udp.dst == 7 || sctp'
action = "reject"
[[acl]]
direction = "from-lport"
priority = 200
match = 'ip4 && tcp.flags == 0x02/0x02 && tcp.dst >= 1024'
action = "drop"
[[acl]]
direction = "from-lport"
priority = 100
match = 'ip4.dst == 0.0.0.0/1 || ip6'
action = "allow-stateless"
[[acl]]
direction = "to-lport"
priority = 150
match = 'icmp4.type == 8 || icmp6.type == 128'
action = "reject"
[[acl]]
direction = "to-lport"
priority = 50
match = 'ip'
action = "allow-related"
label = 9
[meters.answers]
unit = "kbps"
rate = 8
burst = 2
[copp]
reject = "answers"
"#,
    // Source NAT with the FTP gateway, and the TFTP gateway.
    r#"[default]
action = "drop"
[[port]]
name = "a"
addresses = ["{A}"]
zone = 3
[[port]]
name = "b"
addresses = ["{B}"]
zone = 3
[[acl]]
direction = "from-lport"
priority = 100
match = 'tcp.dst == 21'
action = "allow-related"
nat = "src=198.51.100.1:1024-65535"
alg = "ftp"
[[acl]]
direction = "from-lport"
priority = 100
match = 'udp.dst == 69'
action = "allow-related"
alg = "tftp"
[[acl]]
direction = "from-lport"
priority = 10
match = 'ip'
action = "allow-related"
nat = "src=198.51.100.2"
[[acl]]
direction = "to-lport"
priority = 10
match = 'ip || arp'
action = "allow-related"
"#,
    // Tiers: `pass` hands over, the next tier decides.
    r#"[default]
action = "drop"
[[port]]
name = "a"
addresses = ["{A}"]
[[port]]
name = "b"
addresses = ["{B}"]
[[acl]]
direction = "from-lport"
priority = 500
tier = 0
match = 'tcp || udp'
action = "pass"
[[acl]]
direction = "from-lport"
priority = 400
tier = 0
match = 'ip'
action = "drop"
[[acl]]
direction = "from-lport"
priority = 10
tier = 1
match = 'tcp.src > 1000 || udp'
action = "allow-related"
[[acl]]
direction = "to-lport"
priority = 10
tier = 2
match = '1'
action = "allow"
"#,
    // A default allow with one stateful ACL: what no ACL decides is
    // committed; one port only, the other side unknown.
    r#"[default]
action = "allow"
[[port]]
name = "a"
addresses = ["{A}"]
zone = 4
[[acl]]
direction = "to-lport"
priority = 1
match = 'udp.dst == 5353'
action = "allow-related"
"#,
    // Connections opened by four ACLs, by protocol and port, so that a
    // burst's established packets belong to sessions of several ACLs in
    // turn (the session path counts each ACL's packets as runs).
    r#"[default]
action = "drop"
[[port]]
name = "a"
addresses = ["{A}"]
zone = 5
[[port]]
name = "b"
addresses = ["{B}"]
zone = 5
[[acl]]
direction = "from-lport"
priority = 10
match = 'ip || arp'
action = "allow-related"
[[acl]]
direction = "to-lport"
priority = 100
match = 'tcp.dst < 1024'
action = "allow-related"
[[acl]]
direction = "to-lport"
priority = 90
match = 'tcp'
action = "allow-related"
[[acl]]
direction = "to-lport"
priority = 80
match = 'udp'
action = "allow-related"
[[acl]]
direction = "to-lport"
priority = 70
match = 'ip || arp'
action = "allow-related"
"#,
];

/// A MAC address as the policy file writes it, made unicast (a port's
/// address is: the file refuses a group address), so that a frame sent
/// to the group address it came from is flooded, not the port's.
fn mac(b: &[u8]) -> String {
    b.iter()
        .enumerate()
        .map(|(i, x)| format!("{:02x}", if i == 0 { x & !1 } else { *x }))
        .collect::<Vec<_>>()
        .join(":")
}

/// [`firewall_frames`] on bytes: the first picks one of
/// [`FIREWALL_POLICIES`] (and, with its top bit set, how far each change
/// moves along them), the rest are frames
/// ([`crate::mutate::decode_frames`]).
pub fn firewall_frames_bytes(data: &[u8], probe: &mut Probe) {
    let Some((&pick, rest)) = data.split_first() else {
        return;
    };
    firewall_frames(&crate::mutate::decode_frames(rest), pick, probe);
}

/// Frames (real traffic, mutated) through two firewalls of the same
/// policy (changed every 65 frames, on both, to the next of
/// [`FIREWALL_POLICIES`], or with `pick`'s top bit set to the one 1 to 7
/// further on, as its bits 3-5 say, so that every policy follows every
/// other), one frame at a time and in bursts of uneven sizes, the
/// counters of each path carried from one call to the next as a worker
/// carries them: the same decision for every frame (connection numbers
/// aside), the same bytes (translated where NAT applies), the same
/// answers to `reject`, the same counters. A third firewall, one frame at
/// a time, has the policy with an ACL that matches nothing but keeps every
/// `+new` packet meeting the ACLs (`without_words`): the same again. A
/// fourth, one frame at a time, is also given its policy again between
/// the changes where the policy says that changes nothing
/// (`Compiled::judges_again_alike`): the same decisions and bytes.
/// Fragments are left out: the per-packet path reassembles them and the
/// burst path, by design, does not. Counts the frames judged.
pub fn firewall_frames(frames: &[Vec<u8>], pick: u8, probe: &mut Probe) {
    // The ports' MAC addresses: the first frame's, or two fixed ones.
    let (a, b) = match frames.iter().find(|f| f.len() >= 14) {
        Some(f) if mac(&f[6..12]) != mac(&f[0..6]) => (mac(&f[6..12]), mac(&f[0..6])),
        _ => ("02:00:00:00:00:01".into(), "02:00:00:00:00:02".into()),
    };
    let policy_at = |n: usize| {
        let text = FIREWALL_POLICIES[n % FIREWALL_POLICIES.len()]
            .replace("{A}", &a)
            .replace("{B}", &b);
        Policy::from_str(&text, "fuzz.toml").expect("the fuzz policies load")
    };
    let policy = policy_at(usize::from(pick));
    let stride = stride_of(pick);
    let (one, burst) = (make(&policy), make(&policy));
    let acls = make(&without_words(policy.clone()));
    // A fourth, frame by frame, that is also given its policy again now
    // and then: connections judged again by the policy that opened them
    // are decided as before (where that holds: `judges_again_alike`).
    let again = make(&policy);
    let mut current = policy.clone();
    let frames: Vec<&Vec<u8>> = frames
        .iter()
        .filter(|f| {
            !parse_frame(f, LinkType::Ethernet)
                .ip
                .is_ok_and(|ip| ip.frag.is_fragment())
        })
        .collect();
    let mut outs = FwOutputs::default();
    let mut by_acls = FwOutputs::default();
    let mut reloaded = FwOutputs::default();
    let mut st = FwStats::default();
    let mut now = Time::from_secs(10);
    let mut replies = Vec::new();
    let mut at = 0;
    for (k, chunk) in frames.chunks(13).enumerate() {
        now = Time::from_millis(now.as_millis() + 7);
        for part in chunk.chunks(1 + k % 7) {
            outs.out.clear();
            by_acls.out.clear();
            reloaded.out.clear();
            for (i, f) in part.iter().enumerate() {
                one.process((*f).clone(), i, now, &mut outs);
                acls.process((*f).clone(), i, now, &mut by_acls);
                again.process((*f).clone(), i, now, &mut reloaded);
            }
            assert!(
                outs.dropped.is_empty(),
                "a frame that is no fragment dropped as one"
            );
            assert_eq!(outs.out.len(), part.len(), "one output a frame");
            let mut got: Vec<Vec<u8>> = part.iter().map(|f| (*f).clone()).collect();
            let mut ds = vec![Decision::default(); got.len()];
            replies.clear();
            burst.process_burst(
                &mut got,
                now,
                BurstOut {
                    decisions: &mut ds,
                    replies: &mut replies,
                    stats: &mut st,
                },
            );
            probe.count(part.len() as u64);
            // The input's number of the part's first frame (fragments
            // left out), for the messages.
            let base = at;
            at += part.len();
            agree(&outs.out, &got, &ds, &replies, base, probe);
            as_the_acls(&outs.out, &by_acls.out, base);
            as_before(&outs.out, &reloaded.out, base);
            // Inputs whose `+new` packets take their connections' words.
            probe.feature(84, outs.stats.new_by_word.min(8));
            // Inputs that send a connection's packets between other ports.
            probe.feature(85, outs.stats.cross_pair.min(8));
        }
        if k % 5 == 4 {
            // A policy change, the same on both paths: connections are
            // judged again at their next packet.
            let (from, to) = (
                usize::from(pick) + stride * (k / 5),
                usize::from(pick) + stride * (1 + k / 5),
            );
            let p = policy_at(to);
            // Which policy followed which: new coverage for each pair.
            let n = FIREWALL_POLICIES.len();
            probe.feature(87, (from % n, to % n));
            one.set_policy(p.clone())
                .expect("the fuzz policies compile");
            acls.set_policy(without_words(p.clone()))
                .expect("the fuzz policies compile");
            again
                .set_policy(p.clone())
                .expect("the fuzz policies compile");
            burst
                .set_policy(p.clone())
                .expect("the fuzz policies compile");
            current = p;
        } else if k % 5 == 2 && again.policy().judges_again_alike() {
            // The same policy again (a reload of an unchanged file).
            again
                .set_policy(current.clone())
                .expect("the fuzz policies compile");
            probe.feature(86, 1);
        }
        if k % 8 == 7 {
            acls.tracker().sweep(now, 1000, &mut by_acls.stats.tracker);
            one.tracker().sweep(now, 1000, &mut outs.stats.tracker);
            burst.tracker().sweep(now, 1000, &mut st.tracker);
        }
    }
    same_counters(&outs.stats, &by_acls.stats);
    burst_counters(&outs.stats, &st);
}

/// How far each policy change of an input whose first byte is `pick`
/// moves along [`FIREWALL_POLICIES`]: 1 (each policy's successor, as
/// inputs whose first byte is under 0x80 always had), or with the top bit
/// set 1 to 7, so that an input may follow any policy with any other (the
/// last one by the first, NAT by `persist-established`, ...).
fn stride_of(pick: u8) -> usize {
    match pick & 0x80 {
        0 => 1,
        _ => 1 + usize::from(pick >> 3 & 7) % (FIREWALL_POLICIES.len() - 1),
    }
}

/// The counters of the per-packet path (`w`) and of the burst path
/// (`g`).
fn burst_counters(w: &FwStats, g: &FwStats) {
    assert_eq!(w.verdicts, g.verdicts, "counters by verdict");
    assert_eq!(w.stages, g.stages, "counters by stage");
    assert_eq!(w.drops, g.drops, "counters by drop reason");
    // An ACL counted nothing on one path may be absent from its list.
    let trim = |a: &[ctrack_policy::firewall::AclCounters]| {
        let n = a.len()
            - a.iter()
                .rev()
                .take_while(|c| **c == Default::default())
                .count();
        a[..n].to_vec()
    };
    // Per-ACL counters are those of one policy generation each: a path
    // that counted no ACL since the last change still holds the older.
    if w.generation == g.generation {
        assert_eq!(trim(&w.acls), trim(&g.acls), "counters by ACL");
    }
    assert_eq!(
        (w.rejects_sent, w.rejects_suppressed),
        (g.rejects_sent, g.rejects_suppressed),
        "answers"
    );
    assert_eq!(
        w.cross_pair, g.cross_pair,
        "packets of a connection between other zones"
    );
}

/// A firewall of the fuzz policy `policy`: a small table, one hash seed
/// for all (where a translation's port is taken, the search starts from a
/// hash of the connection, and two seeds would pick two ports, each
/// right).
fn make(policy: &Policy) -> Firewall<usize> {
    Firewall::<usize>::new(
        Tracker::with_hasher(
            Config {
                max_conns: 256,
                ..Config::default()
            },
            KeyHasher::with_seed(0x5eed),
        ),
        FragConfig::default(),
        policy.clone(),
    )
    .expect("the fuzz policies compile")
}

/// The same decisions and bytes, frame by frame, from a firewall (`want`)
/// and one given the same policy again now and then (`got`), whose
/// connections are judged again each time: connection numbers and words
/// (their generations differ) aside. The answers to `reject` are not
/// compared: a policy given again starts its `[copp]` meter afresh. Nor is
/// the ACL named by a drop for want of room (a full table, no free
/// translated port): a connection a gateway expected, refused so before
/// its control connection was judged again, names no ACL.
fn as_before(want: &[FwOut<usize>], got: &[FwOut<usize>], base: usize) {
    assert_eq!(want.len(), got.len(), "one output a frame");
    let plain = |d: &Decision| {
        let mut d = *d;
        if let Some(v) = d.ct.as_mut() {
            v.conn = None;
            v.word = 0;
        }
        if d.ct.is_some_and(|v| v.refused.is_some()) {
            d.acl = ctrack_policy::firewall::AclRef::Default;
        }
        d
    };
    for (i, (w, g)) in want.iter().zip(got).enumerate() {
        let n = base + i;
        assert_eq!(
            plain(&w.decision),
            plain(&g.decision),
            "decision of frame {n}, the policy given again"
        );
        assert_eq!(
            w.frame, g.frame,
            "bytes of frame {n}, the policy given again"
        );
    }
}

/// `p` with one more ACL, last and of the lowest priority, that reads
/// `ip.ttl` and matches nothing: a firewall of it decides every packet as
/// one of `p` does, but its ACLs meet every `+new` packet of a committed
/// connection, which `p`'s firewall may decide by the connection's word
/// (`Compiled::takes_words`).
fn without_words(mut p: Policy) -> Policy {
    let never = Expr::And(vec![Expr::eq(Field::IpTtl, 0), Expr::eq(Field::IpTtl, 1)]);
    let n = p.acls.len();
    p.acls
        .push(Acl::new(n, Direction::ToLport, 0, AclAction::Drop, never));
    p
}

/// The same outputs, frame by frame, from a firewall that takes words
/// (`want`) and one whose ACLs meet every `+new` packet (`got`): the
/// decision (connection numbers and the word's port pair aside), the
/// bytes, the answer.
fn as_the_acls(want: &[FwOut<usize>], got: &[FwOut<usize>], base: usize) {
    assert_eq!(want.len(), got.len(), "one output a frame");
    let plain = |d: &Decision| {
        let mut d = *d;
        if let Some(v) = d.ct.as_mut() {
            v.conn = None;
            v.word &= (1 << 51) - 1;
        }
        d
    };
    for (i, (w, g)) in want.iter().zip(got).enumerate() {
        let n = base + i;
        assert_eq!(
            plain(&w.decision),
            plain(&g.decision),
            "decision of frame {n}, by the ACLs"
        );
        assert_eq!(w.frame, g.frame, "bytes of frame {n}, by the ACLs");
        assert_eq!(
            w.reply, g.reply,
            "reject's answer to frame {n}, by the ACLs"
        );
    }
}

/// The counters of a firewall that takes words (`w`) and of one whose
/// ACLs meet every `+new` packet (`a`), whose last ACL never counts.
fn same_counters(w: &FwStats, a: &FwStats) {
    assert_eq!(w.verdicts, a.verdicts, "counters by verdict, by the ACLs");
    assert_eq!(w.stages, a.stages, "counters by stage, by the ACLs");
    assert_eq!(w.drops, a.drops, "counters by drop reason, by the ACLs");
    assert_eq!(
        w.rejudged, a.rejudged,
        "connections judged again, by the ACLs"
    );
    assert_eq!(w.tracker, a.tracker, "the tracker's counters, by the ACLs");
    assert_eq!(a.new_by_word, 0, "a word taken where an ACL reads the TTL");
    assert_eq!(
        w.cross_pair, a.cross_pair,
        "packets of a connection between other zones, by the ACLs"
    );
    if w.generation == a.generation {
        let n = w.acls.len().min(a.acls.len());
        assert_eq!(w.acls[..n], a.acls[..n], "counters by ACL, by the ACLs");
        assert!(
            a.acls[n..].iter().all(|c| c.packets == 0),
            "the ACL that never matches"
        );
        assert_eq!(
            w.defaults, a.defaults,
            "the defaults' counters, by the ACLs"
        );
    }
}

/// Compares one burst's decisions (`ds`), bytes (`got`) and answers
/// (`replies`) with the same frames' outputs one at a time (`want_all`);
/// `base` numbers the first frame for the messages.
fn agree(
    want_all: &[FwOut<usize>],
    got: &[Vec<u8>],
    ds: &[Decision],
    replies: &[(usize, Vec<u8>)],
    base: usize,
    probe: &mut Probe,
) {
    for (i, (want, (g, d))) in want_all.iter().zip(got.iter().zip(ds)).enumerate() {
        assert_eq!(want.tag, i);
        let reply = replies.iter().find(|(j, _)| *j == i).map(|(_, r)| r);
        // Connection numbers differ between two tables.
        let (mut w, mut d) = (want.decision, *d);
        let wc = w.ct.as_mut().and_then(|v| v.conn.take()).is_some();
        let dc = d.ct.as_mut().and_then(|v| v.conn.take()).is_some();
        assert_eq!(&want.frame, g, "bytes of frame {}", base + i);
        assert_eq!(wc, dc, "a connection on one path only: frame {}", base + i);
        assert_eq!(w, d, "decision of frame {}", base + i);
        assert_eq!(
            want.reply.as_ref(),
            reply,
            "reject's answer to frame {}",
            base + i
        );
        if probe.records() {
            probe.feature(
                80,
                (
                    d.action as u8,
                    d.stage as u8,
                    d.ct.map(|v| v.state.bits()),
                    want.reply.is_some(),
                ),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ctrack_policy::firewall::Compiled;

    /// Which of the policies let a `+new` packet take its connection's
    /// word: the comparison with [`without_words`] tests something only
    /// where some do.
    #[test]
    fn some_fuzz_policies_take_words() {
        let takes: Vec<bool> = FIREWALL_POLICIES
            .iter()
            .map(|t| {
                let t = t
                    .replace("{A}", "02:00:00:00:00:01")
                    .replace("{B}", "02:00:00:00:00:02");
                let p = Policy::from_str(&t, "fuzz.toml").unwrap();
                let c = Compiled::new(p.clone(), 1).unwrap();
                let w = Compiled::new(without_words(p), 1).unwrap();
                assert!(!w.takes_words());
                c.takes_words()
            })
            .collect();
        // A gateway in the second, `tcp.flags` in the fourth,
        // translations in the fifth, both ports in one zone in the last.
        assert_eq!(takes, [true, false, true, false, false, true, true, false]);
    }
}
