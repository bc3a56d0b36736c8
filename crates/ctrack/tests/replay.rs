//! `ctrack replay` end to end: the binary on the bundled captures, compared
//! with what Open vSwitch's `ovstest test-conntrack pcap` and the Linux
//! kernel said for the same packets; error handling on bad files and
//! arguments.

mod common;

use std::path::PathBuf;

use common::{ctrack, root};

/// Runs ctrack, which must succeed, and returns what it printed.
fn ctrack_ok(args: &[&str]) -> String {
    let out = ctrack(args);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("UTF-8 output")
}

fn expected(name: &str) -> String {
    std::fs::read_to_string(root().join("tests/expected").join(name)).expect(name)
}

/// Runs `ctrack replay --format ovs` on `capture` (with `extra` options) and
/// compares with `reference`, reporting every line that differs.
fn check(capture: &str, extra: &[&str], reference: &str) {
    let path = format!("examples/{capture}");
    let mut args = vec!["replay", "--format", "ovs"];
    args.extend_from_slice(extra);
    args.push(&path);
    let got = ctrack_ok(&args);
    let want = expected(reference);
    let diffs: Vec<String> = got
        .lines()
        .zip(want.lines())
        .filter(|(g, w)| g != w)
        .map(|(g, w)| format!("ctrack {g:<24} reference {w}"))
        .collect();
    assert!(
        diffs.is_empty(),
        "{capture} vs {reference}:\n{}",
        diffs.join("\n")
    );
    assert_eq!(
        got.lines().count(),
        want.lines().count(),
        "{capture}: packet count"
    );
}

#[test]
fn real_traffic_matches_ovs() {
    check("traffic.pcap", &[], "traffic.ovs");
}

/// `-` reads the capture from standard input, through a pipe (not
/// seekable), as `tcpdump -U -w - | ctrack replay -` gives it: the same
/// verdicts as from the file. Until 2026-12-01 `-` was a file name.
#[test]
fn a_capture_is_read_from_standard_input_for_a_dash() {
    use std::io::Write;
    use std::process::{Command, Stdio};
    let bytes = std::fs::read(root().join("examples/traffic.pcap")).expect("the capture");
    let mut child = Command::new(env!("CARGO_BIN_EXE_ctrack"))
        .args(["replay", "--format", "ovs", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("run ctrack");
    let mut stdin = child.stdin.take().expect("a pipe");
    let feed = std::thread::spawn(move || stdin.write_all(&bytes));
    let out = child.wait_with_output().expect("its output");
    feed.join().expect("the feeder").expect("fed");
    assert!(out.status.success(), "{out:?}");
    let got = String::from_utf8(out.stdout).expect("UTF-8");
    assert_eq!(got, expected("traffic.ovs"));
}

/// A capture fed as it comes (`tcpdump -U -w - | ctrack replay -`) has
/// each packet's line printed while the replay waits for the next, not
/// at the end: here the header and the first packet, then nothing until
/// that packet's line has come; with and without a policy. Until
/// 2026-12-01 the reader waited for 256 KiB or the end of the input, and
/// the output was flushed at the end.
#[test]
fn a_capture_fed_as_it_comes_is_printed_as_it_comes() {
    use std::io::{BufRead, BufReader, Write};
    use std::process::{Command, Stdio};
    use std::time::Duration;
    let bytes = std::fs::read(root().join("examples/traffic.pcap")).expect("the capture");
    // The pcap header (24 bytes) and the first record (16 and its data).
    let incl = u32::from_le_bytes(bytes[32..36].try_into().expect("4 bytes")) as usize;
    let first = 24 + 16 + incl;
    let want = expected("traffic.ovs");
    let policy = root().join("examples/policy/mixed.toml");
    let policy = policy.to_str().expect("a UTF-8 path");
    let runs: [(&[&str], &str); 2] = [
        (
            &["replay", "--format", "ovs", "-"],
            want.lines().next().expect("a line"),
        ),
        (
            &["replay", "--policy", policy, "--format", "json", "-"],
            "{\"packet\":1,",
        ),
    ];
    for (args, first_line) in runs {
        let mut child = Command::new(env!("CARGO_BIN_EXE_ctrack"))
            .args(args)
            .current_dir(root())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("run ctrack");
        let mut stdin = child.stdin.take().expect("a pipe");
        stdin.write_all(&bytes[..first]).expect("the first packet");
        let stdout = child.stdout.take().expect("a pipe");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                if tx.send(line.expect("a line")).is_err() {
                    return;
                }
            }
        });
        let line = rx.recv_timeout(Duration::from_secs(10));
        // Fed the rest either way, so that ctrack ends.
        stdin.write_all(&bytes[first..]).expect("the rest");
        drop(stdin);
        let line = line.unwrap_or_else(|e| panic!("{args:?}: no line before the rest: {e}"));
        assert!(line.starts_with(first_line), "{args:?}: {line}");
        let rest = rx.iter().count();
        assert!(child.wait().expect("its end").success());
        if args.contains(&"ovs") {
            assert_eq!(rest + 1, want.lines().count());
        }
    }
}

#[test]
fn edge_cases_match_ovs() {
    check("edge-cases.pcap", &[], "edge-cases.ovs");
}

#[test]
fn midstream_pickup_matches_ovs_and_linux_loose() {
    for l in ["0", "1"] {
        let cap = format!("linux-midstream-loose{l}.pcap");
        check(&cap, &[], &format!("linux-midstream-loose{l}.ovs"));
    }
    // Linux with nf_conntrack_tcp_loose=1 picks up mid-stream as OVS does.
    check(
        "linux-midstream-loose1.pcap",
        &[],
        "linux-midstream-loose1.linux",
    );
}

#[test]
fn no_tcp_loose_matches_linux_loose0() {
    check(
        "linux-midstream-loose0.pcap",
        &["--no-tcp-loose"],
        "linux-midstream-loose0.linux",
    );
}

#[test]
fn human_output_lists_packets_connections_and_counters() {
    let text = ctrack_ok(&["replay", "examples/traffic.pcap"]);
    let packets = expected("traffic.ovs").lines().count();
    assert!(text.contains("connections at"));
    assert!(text.contains(&format!("{packets} packets:")));
    assert!(text.contains("tcp,orig=(src=10.10.1.2,dst=10.10.2.2,"));
    assert!(text.contains("protoinfo=(state=TIME_WAIT)"));
    assert!(text.contains("rel|rpl|trk"));
    assert!(text.contains("inv|trk (not_ip)"));
}

/// `replay --format json` of `args`, one value per line.
fn json_lines(args: &[&str]) -> Vec<serde_json::Value> {
    let mut all = vec!["replay", "--format", "json"];
    all.extend_from_slice(args);
    ctrack_ok(&all)
        .lines()
        .map(|l| serde_json::from_str(l).expect("valid JSON line"))
        .collect()
}

#[test]
fn json_output_is_one_object_per_line() {
    let values = json_lines(&["examples/traffic.pcap"]);
    let packets: Vec<_> = values
        .iter()
        .filter(|v| v.get("packet").is_some())
        .collect();
    let conns: Vec<_> = values.iter().filter(|v| v.get("orig").is_some()).collect();
    let want = expected("traffic.ovs");
    assert_eq!(packets.len(), want.lines().count());
    for (p, w) in packets.iter().zip(want.lines()) {
        assert_eq!(p["state"].as_str().unwrap(), w.split_once(": ").unwrap().1);
    }
    assert!(!conns.is_empty());
    assert!(conns.iter().all(|c| c["reply"]["src"].is_string()));
    let stats = values.last().unwrap();
    assert_eq!(
        stats["stats"]["packets"].as_u64().unwrap() as usize,
        packets.len()
    );
    // Invalid packets by reason name; the reasons' counts add up.
    let by_reason = stats["stats"]["invalid_by_reason"].as_object().unwrap();
    assert_eq!(by_reason["not_ip"], 2);
    assert_eq!(by_reason["icmp_unsupported_type"], 11);
    let sum: u64 = by_reason.values().map(|v| v.as_u64().unwrap()).sum();
    assert_eq!(sum, stats["stats"]["invalid"].as_u64().unwrap());
    // An ICMP connection's query, by name.
    let ping = conns.iter().find(|c| c["proto_name"] == "icmp").unwrap();
    assert_eq!(ping["orig"]["icmp"]["type"], 8);
    assert_eq!(ping["reply"]["icmp"]["type"], 0);
    assert_eq!(ping["orig"]["icmp"]["code"], 0);
    assert_eq!(ping["orig"]["icmp"]["id"], ping["reply"]["icmp"]["id"]);
    assert!(ping["orig"].get("sport").is_none());
}

#[test]
fn json_output_is_the_same_on_every_run() {
    // The table's order depends on a hash seeded at random: the output
    // lists connections by number.
    let first = ctrack_ok(&["replay", "--format", "json", "examples/traffic.pcap"]);
    for _ in 0..3 {
        let again = ctrack_ok(&["replay", "--format", "json", "examples/traffic.pcap"]);
        assert_eq!(first, again);
    }
    let numbers: Vec<u64> = first
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|v| v.get("orig").is_some())
        .map(|v| v["conn"].as_u64().unwrap())
        .collect();
    assert_eq!(numbers, (1..=numbers.len() as u64).collect::<Vec<_>>());
}

/// The fields of every object `replay --format json` printed, by object
/// type (`packet`, `dropped`, `connection`, `tuple`, `icmp`, `counters`,
/// `stats`, `invalid_by_reason`, `fragments`).
fn json_fields(values: &[serde_json::Value]) -> Vec<(&'static str, String)> {
    let mut out = Vec::new();
    let mut add = |ty: &'static str, v: &serde_json::Value| {
        for k in v.as_object().unwrap().keys() {
            out.push((ty, k.clone()));
        }
    };
    for v in values {
        if v.get("packet").is_some() {
            add("packet", v);
        } else if v.get("dropped").is_some() {
            add("dropped", v);
        } else if v.get("orig").is_some() {
            add("connection", v);
            for dir in ["orig", "reply"] {
                add("tuple", &v[dir]);
                if let Some(icmp) = v[dir].get("icmp") {
                    add("icmp", icmp);
                }
            }
        } else {
            add("counters", v);
            add("stats", &v["stats"]);
            add("invalid_by_reason", &v["stats"]["invalid_by_reason"]);
            add("fragments", &v["fragments"]);
        }
    }
    out.sort();
    out.dedup();
    out
}

/// Each object type's documented fields: the first column of the table
/// under each `####` heading (which names the type in backticks) of the
/// README's JSON section.
fn documented_fields() -> Vec<(String, String)> {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let start = readme
        .find("### JSON output")
        .expect("a JSON section in README.md");
    let section = &readme[start..];
    let end = section[4..].find("\n## ").map_or(section.len(), |e| e + 4);
    let mut out = Vec::new();
    let mut ty = None;
    for line in section[..end].lines() {
        if let Some(h) = line.strip_prefix("#### ") {
            ty = h.split('`').nth(1).map(str::to_owned);
        } else if let (Some(t), Some(cell)) = (&ty, line.strip_prefix("| `")) {
            let field = cell.split('`').next().unwrap();
            out.push((t.clone(), field.to_owned()));
        }
    }
    out
}

#[test]
fn every_json_field_is_documented() {
    let doc = documented_fields();
    let mut seen = Vec::new();
    for args in [
        &["examples/traffic.pcap"][..],
        &[
            "--ct",
            "commit,nat(src=198.51.100.1),alg=ftp",
            "examples/nat/ftp4.in.pcap",
        ],
        &["--clock", "fixed", "examples/nat/frag4.in.pcap"],
        &["--max-conns", "2", "examples/traffic.pcap"],
        &["examples/edge-cases.pcap"],
    ] {
        seen.extend(json_fields(&json_lines(args)));
    }
    seen.sort();
    seen.dedup();
    let undocumented: Vec<String> = seen
        .iter()
        .filter(|(t, f)| !doc.iter().any(|(dt, df)| dt == t && df == f))
        .map(|(t, f)| format!("{t}.{f}"))
        .collect();
    assert!(
        undocumented.is_empty(),
        "fields printed but not in README.md's JSON section: {undocumented:?}"
    );
    // And nothing documented that is never printed by these replays, but
    // for the fields of rare events.
    let rare = ["dropped", "reason", "helper", "master", "out", "refused"];
    let stale: Vec<String> = doc
        .iter()
        .filter(|(t, f)| !seen.iter().any(|(st, sf)| st == t && sf == f))
        .filter(|(_, f)| !rare.contains(&f.as_str()))
        .map(|(t, f)| format!("{t}.{f}"))
        .collect();
    assert!(stale.is_empty(), "documented but never printed: {stale:?}");
}

#[test]
fn zone_and_no_commit_options() {
    let values = json_lines(&["--zone", "7", "examples/traffic.pcap"]);
    assert_eq!(values[0]["zone"], 7);
    let text = ctrack_ok(&[
        "replay",
        "--no-commit",
        "--format",
        "ovs",
        "examples/traffic.pcap",
    ]);
    assert!(
        !text.contains("est"),
        "nothing committed, nothing established"
    );
    assert!(text.contains("new|trk"));
}

/// A file of the test's own, in a folder of its own that goes with it
/// (when the test fails too).
struct TempFile {
    dir: PathBuf,
    path: PathBuf,
}

impl TempFile {
    fn to_str(&self) -> Option<&str> {
        self.path.to_str()
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn temp_file(name: &str, bytes: &[u8]) -> TempFile {
    let dir = std::env::temp_dir().join(format!("ctrack-test-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    TempFile { dir, path }
}

#[test]
fn truncated_capture_prints_what_it_read_then_fails_with_the_offset() {
    let full = std::fs::read(root().join("examples/traffic.pcap")).unwrap();
    // Cut in the middle of the fourth record.
    let mut off = 24;
    for _ in 0..3 {
        let incl = u32::from_le_bytes(full[off + 8..off + 12].try_into().unwrap()) as usize;
        off += 16 + incl;
    }
    let cut = temp_file("cut.pcap", &full[..off + 20]);
    let out = ctrack(&["replay", "--format", "ovs", cut.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(String::from_utf8(out.stdout).unwrap().lines().count(), 3);
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(err.lines().count(), 1, "one line: {err}");
    assert!(
        err.contains(&format!("truncated record at byte offset {off}")),
        "{err}"
    );
    assert!(err.contains("cut.pcap"), "{err}");
    assert!(!err.contains("panicked") && !err.contains("backtrace"));
}

#[test]
fn corrupt_and_missing_files_fail_cleanly() {
    let garbage = temp_file("garbage.pcap", b"this is not a capture file at all");
    let out = ctrack(&["replay", garbage.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains("not a pcap or pcapng file"), "{err}");
    assert!(err.contains("byte offset 0"), "{err}");

    let full = std::fs::read(root().join("examples/traffic.pcap")).unwrap();
    let mut bad = full.clone();
    bad[24 + 8..24 + 12].copy_from_slice(&0x7fff_ffffu32.to_le_bytes());
    let bad = temp_file("bad-len.pcap", &bad);
    let out = ctrack(&["replay", bad.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains("corrupt record at byte offset 24"), "{err}");

    let out = ctrack(&["replay", "no/such/file.pcap"]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.starts_with("ctrack: error: no/such/file.pcap"), "{err}");
    assert_eq!(err.lines().count(), 1);
}

#[test]
fn bad_arguments_are_usage_errors() {
    let out = ctrack(&["replay", "--zone", "70000", "examples/traffic.pcap"]);
    assert_eq!(out.status.code(), Some(2));
    let out = ctrack(&["replay", "--format", "xml", "examples/traffic.pcap"]);
    assert_eq!(out.status.code(), Some(2));
    let out = ctrack(&["frobnicate"]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn translated_traffic_untranslated_matches_ovs() {
    // The captures of examples/nat replayed with a plain commit, against
    // `ovstest test-conntrack pcap` on the same files.
    for name in ["snat4", "snat6", "range4", "dnat4", "ftp4", "ftp6", "tftp4"] {
        check(
            &format!("nat/{name}.in.pcap"),
            &["--clock", "fixed"],
            &format!("nat/{name}.ovs"),
        );
    }
}

#[test]
fn fragments_match_ovs_but_for_its_invalid_datagrams() {
    // Held fragments print `0` in both. Where a datagram completes,
    // Open vSwitch's test tool calls it invalid although its checksums are
    // right (Linux forwards it, and `nat_captures.rs` matches what Linux
    // sent); ctrack gives its real state. Those lines, and only those,
    // differ.
    for name in ["frag4", "frag6"] {
        let out = ctrack(&[
            "replay",
            "--format",
            "ovs",
            "--clock",
            "fixed",
            &format!("examples/nat/{name}.in.pcap"),
        ]);
        assert_eq!(out.status.code(), Some(0));
        let got = String::from_utf8(out.stdout).unwrap();
        let want = expected(&format!("nat/{name}.ovs"));
        assert_eq!(got.lines().count(), want.lines().count());
        let mut differ = Vec::new();
        for (g, w) in got.lines().zip(want.lines()) {
            if g != w {
                let n = g.split(':').next().unwrap().to_string();
                assert_eq!(
                    (
                        g.trim_start_matches(&format!("{n}: ")),
                        w.trim_start_matches(&format!("{n}: "))
                    ),
                    ("new|trk", "inv|trk"),
                    "{name} packet {n}"
                );
                differ.push(n);
            }
        }
        assert_eq!(differ, ["3", "7", "11", "17"], "{name}");
    }
}
