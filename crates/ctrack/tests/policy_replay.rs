//! `ctrack replay --policy FILE` on captures written here, packet by
//! packet: what each output line and the summary say when time passes in
//! the capture (expiry, `--clock`), a reject is answered, a fragment is
//! never completed, or a packet was cut short by the capture; and the
//! tracker alone (no policy) freeing what expires as the capture's time
//! passes.

mod common;

use common::{Temp, ctrack, cut_frame, frame, pcap, read_pcap, two_fragments, whole};
use ctrack_wire::build::L4;
use ctrack_wire::tcp::flags::SYN;
use serde_json::Value;

const POLICY: &str = r#"
[default]
action = "drop"

[[port]]
name = "a"
addresses = ["02:00:00:00:00:01 10.0.0.1"]

[[port]]
name = "b"
addresses = ["02:00:00:00:00:02 10.0.0.2"]

[[acl]]
name = "a-telnet"
direction = "from-lport"
priority = 200
match = 'inport == "a" && tcp.dst == 23'
action = "reject"

[[acl]]
name = "a-out"
direction = "from-lport"
priority = 100
match = 'inport == "a" && ip4'
action = "allow-related"

[[acl]]
name = "b-in"
direction = "to-lport"
priority = 100
match = 'outport == "b" && ip4'
action = "allow-related"
"#;

/// Replays `records` through `policy` with `args`: standard output.
fn run(name: &str, policy: &str, records: &[(u64, Vec<u8>, u32)], args: &[&str]) -> String {
    let (pol, cap) = (
        Temp::new(&format!("{name}.toml")),
        Temp::new(&format!("{name}.pcap")),
    );
    std::fs::write(&pol.0, policy).expect("write the policy");
    std::fs::write(&cap.0, pcap(records)).expect("write the capture");
    let mut argv = vec!["replay", "--policy", pol.path()];
    argv.extend_from_slice(args);
    argv.push(cap.path());
    let out = ctrack(&argv);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Every JSON line of `text`.
fn objects(text: &str) -> Vec<Value> {
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}")))
        .collect()
}

/// Replays `records` through `policy` with `args` (JSON lines); the
/// packets' objects by number and the summary.
fn replay(
    name: &str,
    policy: &str,
    records: &[(u64, Vec<u8>, u32)],
    args: &[&str],
) -> (Vec<Value>, Value) {
    let objects = objects(&run(
        name,
        policy,
        records,
        &[&["--format", "json"], args].concat(),
    ));
    let packets = objects
        .iter()
        .filter(|v| v.get("packet").is_some())
        .cloned()
        .collect();
    let summary = objects
        .iter()
        .find(|v| v.get("verdicts").is_some())
        .cloned()
        .expect("the summary");
    (packets, summary)
}

/// The verdict and ACL of packet `n`'s line (the first, if several).
fn decided(packets: &[Value], n: u64) -> (String, String) {
    let v = packets
        .iter()
        .find(|v| v["packet"] == n)
        .unwrap_or_else(|| panic!("no line for packet {n}: {packets:?}"));
    let s = |k: &str| v[k].as_str().unwrap_or_default().to_owned();
    (s("verdict"), s("acl"))
}

/// A connection that has expired in the capture's time is gone: its
/// reply is no longer one, the default drops it, and the summary's count
/// of connections holds only the live ones (the replay sweeps the table
/// as the capture's clock moves). With `--clock fixed` nothing expires,
/// and every line's `time` is still the capture's, from its first packet.
#[test]
fn capture_time_expires_connections_and_fixed_time_does_not() {
    let udp = |a_to_b| {
        frame(
            a_to_b,
            L4::udp(
                if a_to_b { 1000 } else { 53 },
                if a_to_b { 53 } else { 1000 },
                b"q",
            ),
        )
    };
    let other = |a_to_b| {
        frame(
            a_to_b,
            L4::udp(
                if a_to_b { 2000 } else { 53 },
                if a_to_b { 53 } else { 2000 },
                b"q",
            ),
        )
    };
    let records = whole(&[
        (0, udp(true)),
        (1, udp(false)),
        (1000, other(true)),
        (1001, udp(false)),
    ]);
    let (packets, summary) = replay("expiry", POLICY, &records, &[]);
    assert_eq!(decided(&packets, 1), ("allow".into(), "b-in".into()));
    assert_eq!(decided(&packets, 2).0, "allow", "a reply");
    assert_eq!(decided(&packets, 3), ("allow".into(), "b-in".into()));
    assert_eq!(
        decided(&packets, 4),
        ("drop".into(), "default".into()),
        "the first connection expired 1,000 s before"
    );
    assert_eq!(
        summary["connections"], 1,
        "the expired one swept: {summary}"
    );
    let times: Vec<f64> = packets.iter().filter_map(|v| v["time"].as_f64()).collect();
    assert_eq!(times, [0.0, 1.0, 1000.0, 1001.0]);

    let (packets, summary) = replay("fixed", POLICY, &records, &["--clock", "fixed"]);
    assert_eq!(
        decided(&packets, 4).0,
        "allow",
        "still a reply: {packets:?}"
    );
    assert_eq!(summary["connections"], 2);
    let times: Vec<f64> = packets.iter().filter_map(|v| v["time"].as_f64()).collect();
    assert_eq!(
        times,
        [0.0, 1.0, 1000.0, 1001.0],
        "the capture's times, shown"
    );
}

/// A rejected packet's line says it was answered (`replied`), in JSON and
/// in the human format; the summary's `drops` lists only reasons that
/// dropped something.
#[test]
fn a_rejected_packet_is_answered_and_says_so() {
    let records = whole(&[
        (0, frame(true, L4::tcp(40000, 23, SYN))),
        (1, frame(false, L4::udp(53, 3000, b"q"))),
    ]);
    let (packets, summary) = replay("reject", POLICY, &records, &[]);
    let first = &packets[0];
    assert_eq!(first["verdict"], "reject");
    assert_eq!(first["acl"], "a-telnet");
    assert_eq!(first["replied"], true, "{first}");
    let second = &packets[1];
    assert_eq!(second["verdict"], "drop");
    assert!(second.get("replied").is_none(), "not answered: {second}");
    assert_eq!(summary["rejects_sent"], 1);
    let drops = summary["drops"].as_object().expect("drops by reason");
    assert!(!drops.is_empty(), "{summary}");
    assert!(
        drops.values().all(|n| n.as_u64().is_some_and(|n| n > 0)),
        "only reasons that dropped a packet: {summary}"
    );
    let text = run("reject-h", POLICY, &records, &[]);
    let line = text
        .lines()
        .find(|l| l.trim_start().starts_with("1 "))
        .expect("packet 1's line");
    assert!(
        line.contains("reject") && line.ends_with(", answered)"),
        "{line}"
    );
}

/// The fragments of a datagram that never completes are dropped when its
/// time runs out, each with a line of its own (`fragment dropped:
/// expired`) and counted as a fragment's drop.
#[test]
fn an_unfinished_datagram_is_reported_when_it_expires() {
    // A first fragment (more follow; its IP payload a multiple of 8 and
    // the packet over the 1,200-byte minimum), never followed by the rest.
    let mut first = frame(true, L4::udp(1000, 53, &[7u8; 1232]));
    first.more_frags = true;
    first.ident = 77;
    let records = whole(&[(0, first), (100, frame(true, L4::udp(1000, 53, b"q")))]);
    let (packets, summary) = replay("frag", POLICY, &records, &[]);
    assert_eq!(summary["fragments_held"], 0, "{summary}");
    let lines: Vec<&Value> = packets.iter().filter(|v| v["packet"] == 1).collect();
    assert_eq!(lines.len(), 1, "{packets:?}");
    assert_eq!(lines[0]["verdict"], "drop");
    assert_eq!(lines[0]["summary"], "fragment dropped: expired");
    assert_eq!(lines[0]["reason"], "fragment");
    assert_eq!(decided(&packets, 2), ("allow".into(), "b-in".into()));
    assert_eq!(summary["drops"]["fragment"], 1, "{summary}");
}

/// A fragment the reassembler holds gets a line saying so when it comes
/// (in JSON an object of its own, `held`, with no verdict), and one with
/// its verdict when its datagram is decided; the summary counts those
/// still held at the end, which no verdict ever reached.
#[test]
fn a_held_fragment_is_reported_as_held() {
    let [first, last] = two_fragments(53, 79);
    let mut lone = frame(true, L4::udp(1001, 53, &[7u8; 1232]));
    (lone.more_frags, lone.ident) = (true, 80);
    let records = whole(&[(0, first), (0, last), (0, lone)]);
    let text = run("held", POLICY, &records, &["--format", "json"]);
    let objects = objects(&text);
    let held: Vec<u64> = objects.iter().filter_map(|v| v["held"].as_u64()).collect();
    assert_eq!(held, [1, 3], "{text}");
    let decided: Vec<(u64, &str)> = objects
        .iter()
        .filter_map(|v| Some((v["packet"].as_u64()?, v["verdict"].as_str()?)))
        .collect();
    assert_eq!(decided, [(1, "allow"), (2, "allow")], "{text}");
    let summary = objects
        .iter()
        .find(|v| v.get("verdicts").is_some())
        .expect("summary");
    assert_eq!(summary["fragments_held"], 1, "{summary}");
    let text = run("held-h", POLICY, &records, &[]);
    assert!(text.contains("(fragment held)"), "{text}");
    assert!(
        text.contains("fragments still held at the end, never decided: 1"),
        "{text}"
    );
}

/// A frame shorter than an Ethernet header is dropped as a runt; a
/// rejected datagram that came in fragments is answered once, at one
/// fragment's line, each fragment with the datagram's verdict; fragments
/// that overlap are dropped with their datagram, each counted.
#[test]
fn runts_fragmented_rejects_and_overlaps() {
    let reject_udp = POLICY.replace("tcp.dst == 23", "udp.dst == 7");
    let [first, last] = two_fragments(7, 5);
    let mut held = frame(true, L4::udp(1000, 53, &[7u8; 1232]));
    (held.more_frags, held.ident) = (true, 6);
    let mut overlap = held.clone();
    overlap.frag_offset = 8;
    let mut records = vec![(0, vec![2, 0, 0, 0, 0, 2, 2, 0, 0, 0], 10)];
    records.extend(whole(&[(0, first), (0, last), (1, held), (1, overlap)]));
    let (packets, summary) = replay("runt", &reject_udp, &records, &[]);
    let line = |i: usize, keys: &[&str]| -> Vec<Value> {
        keys.iter()
            .map(|k| packets[i][*k].clone())
            .collect::<Vec<_>>()
    };
    let kv = |v: &[&str]| v.iter().map(|s| Value::from(*s)).collect::<Vec<_>>();
    assert_eq!(
        line(0, &["verdict", "stage", "reason"]),
        kv(&["drop", "default", "runt"])
    );
    let rejected: Vec<(u64, bool)> = packets[1..3]
        .iter()
        .map(|v| {
            assert_eq!(v["verdict"], "reject", "{v}");
            (v["packet"].as_u64().unwrap_or(0), v["replied"] == true)
        })
        .collect();
    assert_eq!(
        rejected.iter().filter(|(_, r)| *r).count(),
        1,
        "{rejected:?}"
    );
    assert_eq!(summary["rejects_sent"], 1, "{summary}");
    let dropped: Vec<u64> = packets[3..]
        .iter()
        .filter(|v| v["reason"] == "fragment")
        .filter_map(|v| v["packet"].as_u64())
        .collect();
    assert_eq!(dropped.len(), 2, "{packets:?}");
    assert_eq!(summary["drops"]["fragment"], 2, "{summary}");
    assert_eq!(summary["drops"]["runt"], 1, "{summary}");
}

/// With `--no-checksum` (checksums left to the NIC), the reassembler
/// takes fragments whose IP checksum does not hold, as the tracker takes
/// such packets: the datagram is decided whole.
#[test]
fn no_checksum_reaches_the_reassembler() {
    let records: Vec<(u64, Vec<u8>, u32)> = whole(&two_fragments(53, 12).map(|f| (0, f)))
        .into_iter()
        .map(|(t, mut b, n)| {
            b[24] ^= 0xff;
            (t, b, n)
        })
        .collect();
    let (packets, _) = replay("nosum", POLICY, &records, &["--no-checksum"]);
    let verdicts: Vec<&str> = packets
        .iter()
        .filter_map(|v| v["verdict"].as_str())
        .collect();
    assert_eq!(verdicts, ["allow", "allow"], "{packets:?}");
}

/// After a policy change, the counters at the end are the new policy's
/// alone, zero where it has decided nothing: here the change takes over
/// at a fragment the reassembler holds, the last packet, so that no
/// packet is judged under the new policy at all.
#[test]
fn counters_after_a_change_are_the_new_policys_only() {
    let mut first = frame(true, L4::udp(1000, 53, &[7u8; 1232]));
    first.more_frags = true;
    first.ident = 78;
    let records = whole(&[
        (0, frame(true, L4::udp(1000, 53, b"q"))),
        (1, frame(false, L4::udp(53, 3000, b"q"))),
        (2, first),
    ]);
    let new = Temp::new("change-new.toml");
    std::fs::write(&new.0, POLICY).expect("write");
    let reload = format!("3:{}", new.path());
    let text = run(
        "change",
        POLICY,
        &records,
        &["--format", "json", "--reload", &reload],
    );
    let counts = |acl: &str, direction: &str| -> Vec<(Option<u64>, u64)> {
        text.lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|v| v["acl"] == acl && v["direction"] == direction)
            .filter(|v| v.get("n_packets").is_some())
            .map(|v| {
                (
                    v["until_packet"].as_u64(),
                    v["n_packets"].as_u64().unwrap_or(99),
                )
            })
            .collect()
    };
    assert_eq!(
        counts("b-in", "to-lport"),
        [(Some(3), 1), (None, 0)],
        "{text}"
    );
    assert_eq!(
        counts("default", "from-lport"),
        [(Some(3), 1), (None, 0)],
        "b's packet to a, which no ACL allows: {text}"
    );
}

/// What passes is written as it came, a packet the capture cut short
/// with its length on the wire kept: here a frame whose Ethernet padding
/// the capture left out.
#[test]
fn write_keeps_the_length_on_the_wire_of_a_cut_packet() {
    let cut = cut_frame();
    let out = Temp::new("cut-out.pcap");
    let (packets, _) = replay(
        "cut",
        POLICY,
        std::slice::from_ref(&cut),
        &["--write", out.path()],
    );
    assert_eq!(decided(&packets, 1).0, "allow");
    let written = read_pcap(&out.0);
    assert_eq!(written, [(cut.1, cut.2)]);
}

/// Without a policy too, the replay frees connections as they expire in
/// the capture's time (its counters' `expired`), sweeping at least once a
/// second of capture time even after a sweep that found the table empty;
/// with `--clock fixed` nothing expires.
#[test]
fn a_plain_replay_frees_what_expires() {
    let udp = |port| frame(true, L4::udp(port, 53, b"q"));
    let records = whole(&[(0, udp(1000)), (1, udp(1001)), (1000, udp(1002))]);
    let cap = Temp::new("plain.pcap");
    std::fs::write(&cap.0, pcap(&records)).expect("write the capture");
    let expired = |args: &[&str]| {
        let mut argv = vec!["replay", "--format", "json"];
        argv.extend_from_slice(args);
        argv.push(cap.path());
        let out = ctrack(&argv);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let stats = text
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .find_map(|v| v.get("stats").cloned())
            .unwrap_or_else(|| panic!("no counters: {text}"));
        stats["expired"]
            .as_u64()
            .unwrap_or_else(|| panic!("{stats}"))
    };
    assert_eq!(expired(&[]), 2, "the two of the first second");
    assert_eq!(expired(&["--clock", "fixed"]), 0);
}
