//! `ctrack bench flood`: the floods at a size a debug build runs in
//! seconds, checked through the JSON report (the benchmark itself also
//! fails on a broken property; these tests check the figures say why).
//!
//! The first is the case the early drop was rebuilt for: 2,000 handshaked
//! connections, a limit of 5,000, then spoofed SYNs; before, every
//! newcomer stayed `new` ("table full") because eviction looked only at
//! the zone's oldest connections, all established.

use std::process::Command;

use serde_json::Value;

fn flood(args: &[&str]) -> (bool, Value, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_ctrack"))
        .args(["bench", "--json", "flood"])
        .args(args)
        .output()
        .expect("ctrack runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let json: Value =
        serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {stdout}"));
    (
        out.status.success(),
        json,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn num(j: &Value, k: &str) -> u64 {
    j[k].as_u64()
        .unwrap_or_else(|| panic!("{k} missing in {j}"))
}

/// The properties every flood must keep.
fn kept(j: &Value) {
    assert_eq!(num(j, "established_survived"), num(j, "established"), "{j}");
    assert_eq!(num(j, "probes_passed"), num(j, "probes"), "{j}");
    let newcomers = num(j, "newcomers");
    assert!(
        num(j, "newcomers_admitted") * 100 >= newcomers * 99,
        "fewer than 99% of newcomers got in: {j}"
    );
    assert!(num(j, "peak_table_len") <= num(j, "max_conns"), "{j}");
    assert!(
        num(j, "peak_table_bytes") <= num(j, "bound_table_bytes"),
        "{j}"
    );
    // A table at its limit evicts in no shard that has 1,024 slots
    // waiting out their grace period (`ctrack_core::GRACE_SLOTS_PER_SHARD`).
    assert!(num(j, "grace_peak_shard") <= 1024, "{j}");
    assert!(
        num(j, "grace_peak_slots") >= num(j, "grace_peak_shard"),
        "{j}"
    );
    assert_eq!(j["failures"].as_array().map(Vec::len), Some(0), "{j}");
}

const SMALL: [&str; 10] = [
    "--established",
    "2000",
    "--max-conns",
    "5000",
    "--flood",
    "200000",
    "--newcomers",
    "1000",
    "--probes",
    "2000",
];

#[test]
fn a_syn_flood_evicts_its_own_entries_and_lets_newcomers_in() {
    let (ok, j, err) = flood(&[&["syn"][..], &SMALL[..]].concat());
    assert!(ok, "{err}\n{j}");
    kept(&j);
    // All 1,000 newcomers: the flood's entries were next to them.
    assert_eq!(num(&j, "newcomers_admitted"), 1000, "{j}");
    // Nearly every flood SYN found a flood entry to replace.
    assert!(num(&j, "evicted") >= 200_000 - 3_000 - 1_000, "{j}");
    assert_eq!(num(&j, "table_len_after"), 5000, "{j}");
}

#[test]
fn a_syn_flood_from_several_threads_keeps_the_same_properties() {
    // Evictions race each other and the newcomers across shards: the
    // locks of another shard are only tried, never waited for.
    let (ok, j, err) = flood(&[&["syn", "--threads", "3"][..], &SMALL[..]].concat());
    assert!(ok, "{err}\n{j}");
    kept(&j);
    assert_eq!(num(&j, "threads"), 3);
    // As many shards as `ctrack run` takes for three workers.
    assert_eq!(num(&j, "shards"), 128);
}

#[test]
fn a_small_table_finds_room_in_the_shards_next_door() {
    // 500 places over 64 shards: a newcomer's own shard may hold only
    // established connections while the flood's sit in the others (the
    // limit is the table's). Before early drop looked past the home shard,
    // 91-98% of newcomers got in at this size.
    for seed in ["1", "2", "3"] {
        let (ok, j, err) = flood(&[
            "syn",
            "--established",
            "200",
            "--max-conns",
            "500",
            "--flood",
            "20000",
            "--newcomers",
            "100",
            "--probes",
            "500",
            "--seed",
            seed,
        ]);
        assert!(ok, "seed {seed}: {err}\n{j}");
        kept(&j);
    }
}

#[test]
fn udp_and_icmp_floods_keep_the_established() {
    for kind in ["udp", "icmp"] {
        let (ok, j, err) = flood(&[&[kind][..], &SMALL[..]].concat());
        assert!(ok, "{kind}: {err}\n{j}");
        kept(&j);
        assert!(num(&j, "evicted") > 100_000, "{kind}: {j}");
    }
}

#[test]
fn a_flood_aimed_at_one_zone_leaves_the_other_alone() {
    let (ok, j, err) = flood(&[
        "zone",
        "--established",
        "2000",
        "--max-conns",
        "10000",
        "--flood",
        "100000",
        "--newcomers",
        "400",
        "--probes",
        "1000",
    ]);
    assert!(ok, "{err}\n{j}");
    kept(&j);
    let zones = j["zones"].as_array().expect("zones");
    let (z1, z2) = (&zones[0], &zones[1]);
    // The attacked zone sits at its limit; nothing overflowed into the
    // table, which never filled.
    assert_eq!(num(z1, "count_after"), num(z1, "limit"), "{j}");
    assert_eq!(num(&j, "refused_table_full"), 0, "{j}");
    // The other zone: its connections, and only those and its newcomers.
    assert_eq!(num(z2, "count_before"), 1000, "{j}");
    assert_eq!(num(z2, "count_after"), 1000 + num(z2, "newcomers_admitted"));
    assert_eq!(num(z2, "newcomers_admitted"), num(z2, "newcomers"), "{j}");
    assert_eq!(num(z2, "established_survived"), 1000, "{j}");
}

#[test]
fn bad_arguments_are_refused_with_a_message() {
    let out = Command::new(env!("CARGO_BIN_EXE_ctrack"))
        .args([
            "bench",
            "flood",
            "syn",
            "--established",
            "100",
            "--max-conns",
            "50",
        ])
        .output()
        .expect("ctrack runs");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--max-conns (50) must be above --established"),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");
}

/// A reject flood on two threads: the answers stay within the limit (the
/// benchmark's own check, on a tight limit), the flood is refused
/// whole, and the report says so.
#[test]
fn a_reject_flood_is_answered_within_the_limit() {
    for proto in ["tcp", "udp"] {
        let (ok, j, err) = flood(&[
            "reject",
            "--proto",
            proto,
            "--threads",
            "2",
            "--packets",
            "20000",
            "--runs",
            "2",
            "--rate",
            "10",
            "--burst",
            "5",
        ]);
        assert!(ok, "{proto}: {err}\n{j}");
        assert!(
            j["failures"].as_array().expect("failures").is_empty(),
            "{j}"
        );
        let (drop, reject) = (&j["drop"], &j["reject"]);
        assert_eq!(num(drop, "answers_sent"), 0, "{j}");
        let sent = num(reject, "answers_sent");
        assert!(sent >= 10, "both runs' bursts: {j}");
        assert!(sent <= num(reject, "answers_allowed"), "{j}");
        assert_eq!(sent + num(reject, "answers_suppressed"), 40_000, "{j}");
    }
}
