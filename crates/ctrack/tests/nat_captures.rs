//! Real traffic through a Linux router that translates (nftables snat and
//! dnat, the kernel's FTP and TFTP helpers, fragments): what entered the
//! router, replayed through `ctrack replay --ct ACTION --write`, must come
//! out as what left it, packet for packet and byte for byte, apart from what
//! the router does as a router (its link-layer header, the TTL or hop limit
//! it decrements and the IPv4 header checksum that follows).
//!
//! The captures and their actions are made by `scripts/make-nat-captures.sh`.

use std::path::Path;

mod common;

use common::root;
use std::process::Command;

/// The IP packets of a pcap file (Ethernet), with the router's own changes
/// blanked.
fn packets(path: &Path) -> Vec<Vec<u8>> {
    let f = std::fs::File::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut r = pcap_file::pcap::PcapReader::new(f).unwrap();
    let mut out = Vec::new();
    while let Some(p) = r.next_packet() {
        let p = p.unwrap();
        let mut ip = p.data[14..].to_vec();
        match ip[0] >> 4 {
            4 => {
                ip[8] = 0;
                ip[10] = 0;
                ip[11] = 0;
            }
            6 => {
                ip[7] = 0;
                // Linux gives the fragments it sends on a fresh
                // identification (ctrack keeps the one they came with).
                if ip[6] == 44 && ip.len() >= 48 {
                    ip[44..48].fill(0);
                }
            }
            _ => {}
        }
        out.push(ip);
    }
    out
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

#[test]
fn replay_turns_what_entered_linux_into_what_left_it() {
    let dir = root().join("examples/nat");
    let list = std::fs::read_to_string(dir.join("scenarios.tsv")).unwrap();
    let tmp = std::env::temp_dir().join(format!("ctrack-nat-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).unwrap();
    let mut failures = Vec::new();
    for line in list.lines().filter(|l| !l.trim().is_empty()) {
        let (name, action) = line.split_once('\t').expect("NAME<TAB>ACTION");
        let written = tmp.join(format!("{name}.pcap"));
        let input = dir.join(format!("{name}.in.pcap"));
        let out = Command::new(env!("CARGO_BIN_EXE_ctrack"))
            .args(["replay", "--format", "ovs", "--ct", action, "--write"])
            .arg(&written)
            .arg(&input)
            .output()
            .expect("run ctrack");
        assert!(
            out.status.success(),
            "{name}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        // Packets of opposite directions may cross inside the router (one
        // enters before the other leaves): compare each direction's
        // packets in order.
        let by_direction = |mut v: Vec<Vec<u8>>| {
            v.sort_by_key(|p| match p[0] >> 4 {
                4 => p[12..20].to_vec(),
                _ => p[8..40].to_vec(),
            });
            v
        };
        let got = by_direction(packets(&written));
        let want = by_direction(packets(&dir.join(format!("{name}.out.pcap"))));
        let mut bad = Vec::new();
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            if g != w {
                let at = g.iter().zip(w).take_while(|(a, b)| a == b).count();
                let from = at.saturating_sub(8);
                bad.push(format!(
                    "  packet {} (lengths {} and {}), from byte {from}:\n    ctrack {}\n    linux  {}",
                    i + 1,
                    g.len(),
                    w.len(),
                    hex(&g[from.min(g.len())..(at + 24).min(g.len())]),
                    hex(&w[from.min(w.len())..(at + 24).min(w.len())])
                ));
            }
        }
        if got.len() != want.len() {
            bad.push(format!(
                "  {} packets written, Linux sent {}",
                got.len(),
                want.len()
            ));
        }
        if !bad.is_empty() {
            bad.truncate(4);
            failures.push(format!("{name} ({action}):\n{}", bad.join("\n")));
        }
    }
    let _ = std::fs::remove_dir_all(&tmp);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The Ethernet frames of a pcap file, with their times.
fn frames(path: &Path) -> Vec<(u64, Vec<u8>)> {
    let f = std::fs::File::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut r = pcap_file::pcap::PcapReader::new(f).unwrap();
    let mut out = Vec::new();
    while let Some(p) = r.next_packet() {
        let p = p.unwrap();
        out.push((p.timestamp.as_nanos() as u64, p.data.to_vec()));
    }
    out
}

/// The burst path that rewrites (`Tracker::process_burst_mut`) gives the
/// verdicts and the bytes the per-packet path (`process_mut`) gives, on
/// every capture and action of the scenarios (translation both ways,
/// address ranges, the FTP and TFTP gateways shifting sequence numbers,
/// fragments), cut into bursts of uneven sizes; and again with
/// `untranslated_new`, as the firewall looks packets up.
#[test]
fn the_rewriting_burst_path_matches_the_packet_path() {
    use ctrack_core::{Config, CtAction, LinkType, Stats, Time, Tracker, Verdict};
    let dir = root().join("examples/nat");
    let list = std::fs::read_to_string(dir.join("scenarios.tsv")).unwrap();
    let mut translated = 0;
    for line in list.lines().filter(|l| !l.trim().is_empty()) {
        let (name, action) = line.split_once('\t').expect("NAME<TAB>ACTION");
        let committing: CtAction = action.parse().unwrap();
        let input = frames(&dir.join(format!("{name}.in.pcap")));
        // The original direction commits; every packet is translated.
        // Then the firewall's way: a lookup that leaves `+new` packets
        // alone (the firewall commits them after), for the same packets.
        let lookup = CtAction {
            commit: false,
            alg: None,
            untranslated_new: true,
            ..committing
        };
        for action in [committing, lookup] {
            let (one, burst) = (
                Tracker::new(Config::default()),
                Tracker::new(Config::default()),
            );
            let (mut s1, mut s2) = (Stats::default(), Stats::default());
            let sizes = [1usize, 5, 32, 2, 40, 3, 17];
            let (mut at, mut k) = (0, 0);
            while at < input.len() {
                let n = sizes[k % sizes.len()].min(input.len() - at);
                k += 1;
                let now = Time::from_nanos(input[at].0);
                let mut want = Vec::new();
                let mut want_v = Vec::new();
                for (_, f) in &input[at..at + n] {
                    let mut f = f.clone();
                    want_v.push(one.process_mut(&mut f, LinkType::Ethernet, &action, now, &mut s1));
                    want.push(f);
                }
                let mut got: Vec<Vec<u8>> =
                    input[at..at + n].iter().map(|(_, f)| f.clone()).collect();
                let mut got_v = vec![Verdict::default(); n];
                burst.process_burst_mut(
                    &mut got,
                    LinkType::Ethernet,
                    &action,
                    now,
                    &mut got_v,
                    &mut s2,
                );
                // Connection numbers differ between two tables.
                let plain = |v: &Verdict| {
                    let mut v = *v;
                    let had = v.conn.take().is_some();
                    (had, v)
                };
                for j in 0..n {
                    assert_eq!(
                        plain(&got_v[j]),
                        plain(&want_v[j]),
                        "{name} ({action}), packet {}",
                        at + j + 1
                    );
                    assert_eq!(
                        got[j],
                        want[j],
                        "{name} ({action}), packet {} bytes",
                        at + j + 1
                    );
                }
                translated += want
                    .iter()
                    .zip(&input[at..at + n])
                    .filter(|(w, (_, f))| *w != f)
                    .count();
                at += n;
            }
            assert_eq!(s1, s2, "{name} ({action}): counters");
        }
    }
    assert!(translated > 100, "only {translated} packets were rewritten");
}

/// The firewall over the same captures, under a policy that translates
/// and runs the gateway (the inside port's connections go out through
/// source NAT, or to a translated destination): `Firewall::process_burst`
/// decides every packet as `Firewall::process` does, and leaves the same
/// bytes.
#[test]
fn the_firewall_burst_path_translates_as_the_packet_path() {
    use ctrack_core::{Config, FragConfig, Time, Tracker};
    use ctrack_policy::firewall::{BurstOut, Decision, Firewall, FwOutputs, FwStats};
    use ctrack_policy::model::Policy;
    let dir = root().join("examples/nat");
    let mut translated = 0;
    for (name, nat, alg) in [
        ("snat4", "src=198.51.100.1", ""),
        ("range4", "src=198.51.100.10-198.51.100.20", ""),
        ("dnat4", "dst=10.10.2.2:8080", ""),
        ("ftp4", "src=198.51.100.1", "alg = \"ftp\""),
        ("tftp4", "src=198.51.100.1", "alg = \"tftp\""),
    ] {
        let text = format!(
            r#"
[default]
action = "drop"

[[port]]
name = "inside"
addresses = ["02:00:00:00:01:02"]
zone = 0

[[port]]
name = "outside"
addresses = ["02:00:00:00:02:02"]
zone = 0

[[acl]]
direction = "from-lport"
priority = 100
match = 'inport == "inside" && ip4'
action = "allow-related"
nat = "{nat}"
{alg}

[[acl]]
direction = "to-lport"
priority = 100
match = 'ip4'
action = "allow-related"
"#
        );
        let policy = Policy::from_str(&text, "test.toml").unwrap();
        let new = || {
            Firewall::<u64>::new(
                Tracker::new(Config::default()),
                FragConfig::default(),
                policy.clone(),
            )
            .unwrap()
        };
        let (one, burst) = (new(), new());
        let input = frames(&dir.join(format!("{name}.in.pcap")));
        let mut outs = FwOutputs::default();
        let mut stats = FwStats::default();
        let sizes = [1usize, 5, 32, 2, 40, 3, 17];
        let (mut at, mut k) = (0, 0);
        while at < input.len() {
            let n = sizes[k % sizes.len()].min(input.len() - at);
            k += 1;
            let now = Time::from_nanos(input[at].0);
            outs.out.clear();
            for (_, f) in &input[at..at + n] {
                one.process(f.clone(), 0, now, &mut outs);
            }
            let mut got: Vec<Vec<u8>> = input[at..at + n].iter().map(|(_, f)| f.clone()).collect();
            let mut ds = vec![Decision::default(); n];
            let mut replies = Vec::new();
            burst.process_burst(
                &mut got,
                now,
                BurstOut {
                    decisions: &mut ds,
                    replies: &mut replies,
                    stats: &mut stats,
                },
            );
            assert_eq!(outs.out.len(), n, "{name}: one output per frame");
            for j in 0..n {
                let (w, d) = (&outs.out[j], &ds[j]);
                let what = format!("{name}, packet {}", at + j + 1);
                assert_eq!(
                    (d.action, d.stage, d.acl, d.reason),
                    (
                        w.decision.action,
                        w.decision.stage,
                        w.decision.acl,
                        w.decision.reason
                    ),
                    "{what}"
                );
                assert_eq!(
                    d.ct.map(|v| v.state),
                    w.decision.ct.map(|v| v.state),
                    "{what}"
                );
                assert_eq!(got[j], w.frame, "{what}: bytes");
                // Linux passed all of it; so does the policy.
                assert_eq!(d.action, ctrack_policy::firewall::Action::Allow, "{what}");
                translated += usize::from(got[j] != input[at + j].1);
            }
            at += n;
        }
        assert_eq!(stats.verdicts, outs.stats.verdicts, "{name}: verdicts");
        assert_eq!(stats.stages, outs.stats.stages, "{name}: stages");
        assert_eq!(stats.acls, outs.stats.acls, "{name}: per-ACL counters");
    }
    assert!(translated > 100, "only {translated} frames were rewritten");
}
