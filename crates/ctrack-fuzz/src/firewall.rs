//! Fuzz body for the firewall (ctrack-policy's policy, tracker, NAT and
//! gateways in one stage): frame lists through its burst path and through
//! its per-packet path must get the same decisions, answers and bytes.

use ctrack_core::{Config, FragConfig, KeyHasher, LinkType, Time, Tracker};
use ctrack_policy::firewall::{BurstOut, Decision, Firewall, FwOut, FwOutputs, FwStats};
use ctrack_policy::model::Policy;
use ctrack_wire::parse_frame;

use crate::Probe;

/// The policies a `firewall_frames` input picks from (its first byte), as
/// policy files: `{A}` and `{B}` stand for the source and destination MAC
/// addresses of the input's first frame, so that mutated traffic meets
/// ACLs that name its ports. Between them: stateful and stateless ACLs at
/// interleaved priorities, `reject` of every kind, tiers and `pass`,
/// source NAT with the FTP and TFTP gateways, a default allow that
/// commits, ports in zones of their own, and sessions of several ACLs
/// side by side.
pub const FIREWALL_POLICIES: [&str; 6] = [
    // A security group: each port may send anything out; the server
    // takes a few services in; ARP passes stateless.
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
direction = "to-lport"
priority = 100
match = 'outport == "b" && (tcp.dst == {21, 22, 80, 443} || udp.dst == {53, 69} || icmp4 || icmp6)'
action = "allow-related"
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
    // and its converse), rejects of each protocol.
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

/// A MAC address as the policy file writes it.
fn mac(b: &[u8]) -> String {
    b.iter()
        .map(|x| format!("{x:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

/// [`firewall_frames`] on bytes: the first picks one of
/// [`FIREWALL_POLICIES`], the rest are frames
/// ([`crate::mutate::decode_frames`]).
pub fn firewall_frames_bytes(data: &[u8], probe: &mut Probe) {
    let Some((&pick, rest)) = data.split_first() else {
        return;
    };
    firewall_frames(&crate::mutate::decode_frames(rest), pick, probe);
}

/// Frames (real traffic, mutated) through two firewalls of the same
/// policy (changed to the next of [`FIREWALL_POLICIES`] every 65 frames,
/// on both), one frame at a time and in bursts of uneven sizes, the
/// counters of each path carried from one call to the next as a worker
/// carries them: the same decision for every frame (connection numbers
/// aside), the same bytes (translated where NAT applies), the same
/// answers to `reject`, the same counters. Fragments are left out: the
/// per-packet path reassembles them and the burst path, by design, does
/// not. Counts the frames judged.
pub fn firewall_frames(frames: &[Vec<u8>], pick: u8, probe: &mut Probe) {
    // The ports' MAC addresses: the first frame's, or two fixed ones.
    let (a, b) = match frames.iter().find(|f| f.len() >= 14) {
        Some(f) if f[6..12] != f[0..6] => (mac(&f[6..12]), mac(&f[0..6])),
        _ => ("02:00:00:00:00:01".into(), "02:00:00:00:00:02".into()),
    };
    let policy_at = |n: usize| {
        let text = FIREWALL_POLICIES[n % FIREWALL_POLICIES.len()]
            .replace("{A}", &a)
            .replace("{B}", &b);
        Policy::from_str(&text, "fuzz.toml").expect("the fuzz policies load")
    };
    let policy = policy_at(usize::from(pick));
    let make = || {
        Firewall::<usize>::new(
            // One hash seed for both: where a translation's port is taken,
            // the search starts from a hash of the connection, and two
            // seeds would pick two ports, each right.
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
    };
    let (one, burst) = (make(), make());
    let frames: Vec<&Vec<u8>> = frames
        .iter()
        .filter(|f| {
            !parse_frame(f, LinkType::Ethernet)
                .ip
                .is_ok_and(|ip| ip.frag.is_fragment())
        })
        .collect();
    let mut outs = FwOutputs::default();
    let mut st = FwStats::default();
    let mut now = Time::from_secs(10);
    let mut replies = Vec::new();
    let mut at = 0;
    for (k, chunk) in frames.chunks(13).enumerate() {
        now = Time::from_millis(now.as_millis() + 7);
        for part in chunk.chunks(1 + k % 7) {
            outs.out.clear();
            for (i, f) in part.iter().enumerate() {
                one.process((*f).clone(), i, now, &mut outs);
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
        }
        if k % 5 == 4 {
            // A policy change, the same on both paths: connections are
            // judged again at their next packet.
            let p = policy_at(usize::from(pick) + 1 + k / 5);
            one.set_policy(p.clone())
                .expect("the fuzz policies compile");
            burst.set_policy(p).expect("the fuzz policies compile");
        }
        if k % 8 == 7 {
            one.tracker().sweep(now, 1000, &mut outs.stats.tracker);
            burst.tracker().sweep(now, 1000, &mut st.tracker);
        }
    }
    let (w, g) = (&outs.stats, &st);
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
