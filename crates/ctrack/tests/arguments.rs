//! Bad arguments are usage errors (exit status 2) that say what is
//! allowed, huge values included; a benchmark whose threads cannot start
//! fails with a message. Never a panic.

mod common;

use std::process::Command;

use common::{Temp, ctrack, root_user};

fn no_panic(err: &str) {
    assert!(
        !err.contains("panicked") && !err.contains("backtrace") && !err.contains("RUST_BACKTRACE"),
        "{err}"
    );
}

/// `args` must be a usage error whose message contains `says`.
fn usage_error(args: &[&str], says: &str) {
    let out = ctrack(args);
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
    assert!(err.contains(says), "{args:?}: {err}");
    assert!(err.starts_with("error: "), "{args:?}: {err}");
    no_panic(&err);
}

const CAPTURE: &str = "examples/traffic.pcap";

#[test]
fn huge_values_are_refused_with_the_maximum() {
    usage_error(
        &["replay", "--max-conns", "100000000000000", CAPTURE],
        "from 1 to 536870912",
    );
    usage_error(
        &["bench", "memory", "--conns", "100000000000000"],
        "from 1 to 400000000",
    );
    usage_error(
        &["bench", "benchmark", "100000", "1000", "32"],
        "from 1 to 1024",
    );
    usage_error(
        &["bench", "cps", "--threads", "100000", "--conns", "10"],
        "from 1 to 1024",
    );
    usage_error(
        &["bench", "lookup", "--conns", "100000000000000"],
        "from 1 to 400000000",
    );
    usage_error(
        &["bench", "lookup", "--packets", "100000000000000"],
        "from 1 to 1000000000",
    );
    usage_error(
        &["bench", "zones", "100000000000000", "1", "1"],
        "from 1 to 3000000",
    );
    usage_error(
        &[
            "replay",
            "--max-conns",
            "99999999999999999999999999",
            CAPTURE,
        ],
        "too large",
    );
}

#[test]
fn values_out_of_range_are_usage_errors() {
    usage_error(
        &["replay", "--max-frags", "6000", CAPTURE],
        "from 0 to 5000",
    );
    usage_error(
        &["replay", "--min-frag-v4", "10", CAPTURE],
        "from 400 to 65535",
    );
    usage_error(
        &["replay", "--min-frag-v6", "100000", CAPTURE],
        "from 400 to 65535",
    );
    usage_error(&["replay", "--max-conns", "0", CAPTURE], "from 1 to");
    usage_error(&["bench", "benchmark", "0", "1000", "32"], "from 1 to 1024");
    usage_error(&["bench", "benchmark", "1", "1000", "33"], "from 1 to 32");
    usage_error(&["bench", "benchmark", "1", "1000", "0"], "from 1 to 32");
    usage_error(&["bench", "benchmark", "1", "0", "32"], "at least 1");
    usage_error(
        &["bench", "benchmark", "1", "1000", "32", "2"],
        "from 0 to 1",
    );
    usage_error(
        &["bench", "benchmark", "1", "1000", "32", "--runs", "0"],
        "from 1 to 1000",
    );
    usage_error(&["bench", "cps", "--runs", "0"], "from 1 to 1000");
    usage_error(&["bench", "cps", "--conns", "0"], "from 1 to");
    usage_error(
        &["bench", "lookup", "--shards", "3"],
        "power of two from 1 to 256",
    );
    usage_error(
        &["bench", "lookup", "--shards", "512"],
        "power of two from 1 to 256",
    );
    usage_error(
        &["bench", "cps", "--shards", "0"],
        "power of two from 1 to 256",
    );
    usage_error(
        &["bench", "memory", "--shards", "100"],
        "power of two from 1 to 256",
    );
    usage_error(
        &["bench", "zones", "10", "1", "1", "--shards", "3"],
        "power of two from 1 to 256",
    );
    usage_error(&["bench", "lookup", "--zipf", "0"], "positive number");
    let out = ctrack(&["bench", "lookup", "--nat", "--calls", "handle"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("--nat works with --calls burst or process"),
        "{err}"
    );
    no_panic(&err);
    usage_error(&["bench", "zones", "10", "65535", "1"], "from 1 to 65534");
    usage_error(&["bench", "zones", "10", "1", "0"], "from 1 to 1000000");
    usage_error(&["bench", "memory", "--conns", "0"], "from 1 to");
    let run = |extra: &[&'static str]| {
        let mut v = vec!["run", "--policy", "p.toml", "--port", "a=veth0"];
        v.extend_from_slice(extra);
        v
    };
    usage_error(
        &run(&["--rx-ring", "v4"]),
        "unknown receive ring \"v4\" (v2 or v3)",
    );
    usage_error(&run(&["--io", "dpdk"]), "unknown I/O kind");
    usage_error(&run(&["--acl-log-rate", "1000001"]), "from 0 to 1000000");
    usage_error(&run(&["--acl-log-rate", "lots"]), "--acl-log-rate");
    // One interface a port, one port an interface.
    usage_error(
        &run(&["--port", "a=veth1"]),
        "--port a=veth1: port \"a\" is given twice (with veth0 before)",
    );
    usage_error(
        &run(&["--port", "b=veth0"]),
        "--port b=veth0: interface veth0 is given twice (for a before)",
    );
}

#[test]
fn arguments_that_contradict_each_other_are_usage_errors() {
    usage_error(
        &["bench", "memory", "--conns", "1000", "--max-conns", "10"],
        "--max-conns (10) is below --conns (1000)",
    );
    usage_error(
        &[
            "bench",
            "benchmark",
            "1",
            "100",
            "8",
            "--flows-per-thread",
            "9",
        ],
        "--flows-per-thread (9) must be from 1 to BATCH (8)",
    );
    usage_error(
        &["bench", "zones", "100000", "100", "1"],
        "N_CONNS × N_ZONES (100000 × 100) must be at most 3000000",
    );
    // The usage shown is the subcommand's.
    let out = ctrack(&["bench", "memory", "--conns", "1000", "--max-conns", "10"]);
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains("Usage: ctrack bench memory"), "{err}");
}

#[test]
fn a_label_wider_than_128_bits_says_so() {
    let label = format!("commit,label=0x1{}", "0".repeat(32));
    usage_error(
        &["replay", "--ct", &label, CAPTURE],
        "is too wide (128 bits at most)",
    );
}

/// Every option, at a value within its range, parses and runs (tiny
/// workloads).
#[test]
fn every_benchmark_option_runs_within_its_range() {
    let runs: [&[&str]; 13] = [
        &[
            "benchmark",
            "2",
            "64",
            "32",
            "1",
            "--flows-per-thread",
            "4",
            "--runs",
            "1",
        ],
        &["zones", "10", "3", "2"],
        &[
            "cps",
            "--threads",
            "2",
            "--conns",
            "100",
            "--steady",
            "50",
            "--proto",
            "tcp",
            "--label",
            "--runs",
            "1",
        ],
        &[
            "lookup",
            "--threads",
            "2",
            "--conns",
            "100",
            "--packets",
            "64",
            "--zipf",
            "1.1",
            "--shards",
            "8",
            "--runs",
            "1",
        ],
        &["memory", "--conns", "100", "--max-conns", "200"],
        &[
            "lookup",
            "--threads",
            "2",
            "--conns",
            "300",
            "--packets",
            "100",
            "--nat",
            "--runs",
            "1",
        ],
        &[
            "lookup",
            "--conns",
            "300",
            "--packets",
            "100",
            "--nat",
            "--calls",
            "process",
            "--runs",
            "1",
        ],
        &[
            "lookup",
            "--threads",
            "2",
            "--conns",
            "300",
            "--packets",
            "100",
            "--ipv6",
            "--runs",
            "1",
        ],
        &[
            "lookup",
            "--conns",
            "300",
            "--packets",
            "100",
            "--ipv6",
            "--calls",
            "handle",
            "--runs",
            "1",
        ],
        // Labelled connections, in bursts and one per call (the bench
        // fails unless every packet is `est` with the label committed).
        &[
            "lookup",
            "--threads",
            "2",
            "--conns",
            "300",
            "--packets",
            "100",
            "--label",
            "--runs",
            "1",
        ],
        &[
            "lookup",
            "--conns",
            "300",
            "--packets",
            "100",
            "--ipv6",
            "--label",
            "--calls",
            "handle",
            "--runs",
            "1",
        ],
        // IPv6 through source NAT, in bursts and one per call (the bench
        // fails unless every packet is `est` and translated).
        &[
            "lookup",
            "--threads",
            "2",
            "--conns",
            "300",
            "--packets",
            "100",
            "--ipv6",
            "--nat",
            "--runs",
            "1",
        ],
        &[
            "lookup",
            "--conns",
            "300",
            "--packets",
            "100",
            "--ipv6",
            "--nat",
            "--calls",
            "process",
            "--runs",
            "1",
        ],
    ];
    for args in runs {
        let mut all = vec!["bench", "--json"];
        all.extend_from_slice(args);
        let out = ctrack(&all);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{all:?}: {err}");
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON document");
        assert_eq!(v["bench"], args[0]);
    }
    // cps reports the machine's floor beside each phase: busy loops as
    // long as the phase's median batch, so never shorter than it.
    let out = ctrack(&["bench", "--json", "cps", "--conns", "2000", "--runs", "1"]);
    assert_eq!(out.status.code(), Some(0));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON document");
    for phase in ["fill", "steady"] {
        let p50 = v[phase]["batch_latency_ns"]["p50"].as_u64().expect("p50");
        let floor = &v[phase]["floor_latency_ns"];
        let f50 = floor["p50"].as_u64().expect("floor p50");
        // The histogram keeps three significant digits.
        assert!(f50 * 1001 >= p50 * 1000, "{phase}: floor p50 {f50} < {p50}");
        assert!(floor["p999"].as_u64() >= floor["p50"].as_u64(), "{phase}");
        // And the memory floor: batches of random writes over a buffer the
        // size of the table, timed the same way.
        let mem = &v[phase]["memory_floor_latency_ns"];
        let m50 = mem["p50"].as_u64().expect("memory floor p50");
        assert!(m50 > 0, "{phase}");
        assert!(mem["p999"].as_u64() >= Some(m50), "{phase}");
        let mib = v[phase]["memory_floor_mib"]
            .as_f64()
            .expect("memory floor MiB");
        assert!(mib > 0.0, "{phase}: {mib}");
    }
    // Whoever sweeps, every connection committed is still there, expired
    // (by a sweep, or by an insert that found it in its way), replaced or
    // evicted, and the table stays within its limit (1.25 times the size,
    // plus 1024). Each packet thread's clock is its own: one that runs
    // ahead (another descheduled) may expire another's connection between
    // its first packet and its answer, which then opens one of its own;
    // one far behind may fill the table with the other's future.
    for sweeper in ["each", "thread"] {
        let args = [
            "bench",
            "--json",
            "cps",
            "--threads",
            "2",
            "--conns",
            "2000",
            "--steady",
            "6000",
            "--runs",
            "1",
            "--sweeper",
            sweeper,
        ];
        let out = ctrack(&args);
        assert_eq!(out.status.code(), Some(0), "{args:?}");
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON document");
        assert_eq!(v["sweeper"], sweeper);
        assert_eq!(v["fill"]["table_len_after"], 2000);
        let s = &v["steady"];
        let n = |k: &str| s[k].as_u64().unwrap_or_else(|| panic!("{sweeper}: {k}"));
        assert!(n("committed") + n("refused_table_full") >= 6000, "{s}");
        let gone = n("expired") + n("replaced") + n("evicted");
        assert_eq!(n("table_len_after") + gone, 2000 + n("committed"), "{s}");
        assert!(n("table_len_after") <= 3524, "{s}");
    }
    let out = ctrack(&[
        "replay",
        "--max-frags",
        "0",
        "--min-frag-v4",
        "400",
        "--min-frag-v6",
        "65535",
        "--max-conns",
        "536870912",
        "--format",
        "ovs",
        CAPTURE,
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `zones` runs in the library's default shards (64), or `--shards`, and
/// says which.
#[test]
fn zones_takes_shards() {
    for (shards, want) in [(None, 64), (Some("16"), 16), (Some("1"), 1)] {
        let mut args = vec!["bench", "--json", "zones", "200", "3", "2"];
        if let Some(s) = shards {
            args.extend(["--shards", s]);
        }
        let out = ctrack(&args);
        assert_eq!(out.status.code(), Some(0), "{args:?}");
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON document");
        assert_eq!(v["shards"], want, "{args:?}");
        assert_eq!(v["n_conns"], 200, "{args:?}");
    }
}

/// `cps` and the floods take as many shards as `ctrack run` would for
/// their threads, or `--shards`; with `--affine` each thread creates
/// connections of its own shards only, and every connection is still
/// created and answered.
#[test]
fn cps_and_floods_take_shards_for_their_threads() {
    for (threads, shards, affine, want) in [
        ("1", None, false, 64),
        ("8", None, false, 256),
        ("3", Some("16"), true, 16),
        ("2", None, true, 64),
    ] {
        let mut args = vec![
            "bench",
            "--json",
            "cps",
            "--threads",
            threads,
            "--conns",
            "3000",
            "--steady",
            "3000",
            "--runs",
            "1",
        ];
        if let Some(s) = shards {
            args.extend(["--shards", s]);
        }
        if affine {
            args.push("--affine");
        }
        let out = ctrack(&args);
        assert_eq!(out.status.code(), Some(0), "{args:?}");
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON document");
        assert_eq!(v["shards"], want, "{args:?}");
        assert_eq!(v["affine"], affine, "{args:?}");
        assert_eq!(v["fill"]["table_len_after"], 3000, "{args:?}");
        assert_eq!(v["fill"]["committed"], 3000, "{args:?}");
        // With expiry, a few more when one thread's clock runs ahead of
        // another's and expires its connection before the answer, which
        // then opens one of its own (see `cps`'s `committed`).
        let steady = v["steady"]["committed"].as_u64().expect("committed");
        assert!((3000..=3300).contains(&steady), "{args:?}: {steady}");
    }
    // The SYN flood's checks hold in 256 shards too (and the report says
    // how many).
    for (threads, shards, want) in [("1", Some("256"), 256), ("2", None, 64)] {
        let mut args = vec![
            "bench",
            "--json",
            "flood",
            "syn",
            "--established",
            "3000",
            "--flood",
            "30000",
            "--newcomers",
            "100",
            "--threads",
            threads,
        ];
        if let Some(s) = shards {
            args.extend(["--shards", s]);
        }
        let out = ctrack(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {err}");
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON document");
        assert_eq!(v["shards"], want, "{args:?}");
    }
}

/// `bench memory --shards N` builds its table of N shards and says so;
/// each shard's fixed structures (its slot directories, its timer wheel,
/// its state; in the IPv4 table, the IPv6 one being made by the first
/// IPv6 packet) show as "other" bytes, the same for every connection
/// count.
#[test]
fn memory_reports_its_shards_and_their_fixed_cost() {
    let other = |shards: Option<&str>, want: u64| {
        let mut args = vec!["bench", "--json", "memory", "--conns", "20000"];
        if let Some(s) = shards {
            args.extend(["--shards", s]);
        }
        let out = ctrack(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {err}");
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON document");
        assert_eq!(v["shards"], want, "{args:?}");
        assert_eq!(v["conns"], 20000, "{args:?}");
        let total = v["table_bytes"].as_u64().expect("table_bytes");
        let parts = ["index_bytes", "record_bytes", "other_bytes"]
            .map(|k| v[k].as_u64().expect(k))
            .iter()
            .sum::<u64>();
        assert_eq!(total, parts, "{args:?}");
        v["other_bytes"].as_u64().expect("other_bytes")
    };
    let (few, default, most) = (
        other(Some("16"), 16),
        other(None, 64),
        other(Some("256"), 256),
    );
    // The same fixed bytes for each shard: going from 64 to 256 shards
    // adds four times what going from 16 to 64 added (exactly, as the
    // table counts them today; the margin is for lists of freed slots,
    // which these connections, never removed, leave empty). A ratio of
    // the totals would count the bytes that are not the shards' (the
    // zones' state).
    assert!(few < default && default < most, "{few} {default} {most}");
    let (d1, d2) = (default - few, most - default);
    assert!(
        d2 * 10 >= d1 * 35 && d2 * 10 <= d1 * 45,
        "{few} {default} {most}: +{d1} for 48 more shards, +{d2} for 192 more"
    );
}

/// The system refuses every thread: a huge minimum stack (RUST_MIN_STACK,
/// 2^48 bytes) cannot be mapped.
#[test]
fn threads_that_cannot_start_are_an_error() {
    for args in [
        &["bench", "benchmark", "4", "1000", "32"][..],
        &[
            "bench",
            "cps",
            "--threads",
            "2",
            "--conns",
            "100",
            "--runs",
            "1",
        ],
        &[
            "bench",
            "lookup",
            "--threads",
            "2",
            "--conns",
            "100",
            "--packets",
            "64",
            "--runs",
            "1",
        ],
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_ctrack"))
            .args(args)
            .env("RUST_MIN_STACK", "281474976710656")
            .output()
            .expect("run ctrack");
        let err = String::from_utf8(out.stderr).unwrap();
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert!(
            err.starts_with("ctrack: error: cannot start benchmark thread 1 of "),
            "{err}"
        );
        assert_eq!(err.lines().count(), 1, "{err}");
        no_panic(&err);
    }
}

/// `bench policy stage` takes the firewall and the plain lookup in turns:
/// one cost per pair of runs, each the pair's ratio, and the reported cost
/// their median.
#[test]
fn the_stage_benchmark_pairs_its_runs() {
    let args = [
        "bench",
        "--json",
        "policy",
        "stage",
        "--conns",
        "100",
        "--acls",
        "1,10",
        "--packets",
        "2000",
        "--runs",
        "3",
    ];
    let out = ctrack(&args);
    assert_eq!(out.status.code(), Some(0), "{args:?}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON document");
    let rows = v["figures"]["rows"].as_array().expect("rows");
    assert_eq!(rows.len(), 2);
    for row in rows {
        let list = |k: &str| -> Vec<f64> {
            let a = row[k].as_array().unwrap_or_else(|| panic!("{k}: {row}"));
            a.iter().map(|x| x.as_f64().expect("a number")).collect()
        };
        let (fw, pl, costs) = (
            list("firewall_runs"),
            list("lookup_runs"),
            list("cost_runs"),
        );
        assert_eq!((fw.len(), pl.len(), costs.len()), (3, 3, 3), "{row}");
        for k in 0..3 {
            assert!((costs[k] - pl[k] / fw[k]).abs() < 1e-9, "{row}");
        }
        let mut sorted = costs.clone();
        sorted.sort_by(f64::total_cmp);
        assert_eq!(row["cost_vs_lookup"].as_f64(), Some(sorted[1]), "{row}");
    }
}

/// `bench policy --proto tcp` opens every connection by a handshake
/// through the firewall and sends data both ways: each benchmark fails if
/// an opening or an established segment does not pass, so a run that ends
/// well is one where every segment did, and the report names TCP. The
/// same over IPv6 (`--ipv6`), through port security on the addresses'
/// networks.
#[test]
fn the_policy_benchmarks_run_on_tcp_connections() {
    for what in ["stage", "passes", "stateless", "reload"] {
        for v6 in [false, true] {
            let mut args = vec![
                "bench",
                "--json",
                "policy",
                what,
                "--proto",
                "tcp",
                "--conns",
                "300",
                "--acls",
                "10",
                "--packets",
                "2000",
                "--runs",
                "1",
            ];
            if v6 {
                args.extend(["--ipv6", "--port-security"]);
            }
            let out = ctrack(&args);
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(0), "{args:?}: {err}");
            let v: serde_json::Value =
                serde_json::from_slice(&out.stdout).expect("one JSON document");
            assert_eq!(v["figures"]["proto"], "tcp", "{what}: {v}");
            assert_eq!(v["figures"]["conns"], 300, "{what}: {v}");
            assert_eq!(v["figures"]["ipv6"], v6, "{what}: {v}");
        }
    }
}

/// `bench policy --rules realistic` puts the classifier benchmark's rule
/// shapes, as allows, in front of the admitting ACL: every benchmark still
/// checks that each packet passed (an opening or established packet that
/// a generated rule dropped would fail it), and the report says which
/// rules it ran with.
#[test]
fn the_policy_benchmarks_run_behind_realistic_rules() {
    for what in ["stage", "passes", "stateless", "reload"] {
        for proto in ["udp", "tcp"] {
            let args = [
                "bench",
                "--json",
                "policy",
                what,
                "--proto",
                proto,
                "--rules",
                "realistic",
                "--conns",
                "300",
                "--acls",
                "200",
                "--packets",
                "2000",
                "--runs",
                "1",
            ];
            let out = ctrack(&args);
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(0), "{args:?}: {err}");
            let v: serde_json::Value =
                serde_json::from_slice(&out.stdout).expect("one JSON document");
            assert_eq!(v["figures"]["rules"], "realistic", "{what}: {v}");
            assert_eq!(v["figures"]["proto"], proto, "{what}: {v}");
        }
    }
    let out = ctrack(&["bench", "policy", "stage", "--rules", "complicated"]);
    assert_eq!(out.status.code(), Some(2));
}

/// `bench policy --ring N` cycles over N distinct frames whatever the
/// packet count, and says so; without it, over as many as a run sends.
#[test]
fn the_policy_benchmarks_take_the_ring_they_are_given() {
    for (ring, expected) in [(Some("512"), 512), (None, 3000)] {
        let mut args = vec![
            "bench",
            "--json",
            "policy",
            "stage",
            "--conns",
            "300",
            "--acls",
            "1",
            "--packets",
            "3000",
            "--runs",
            "1",
        ];
        if let Some(r) = ring {
            args.extend(["--ring", r]);
        }
        let out = ctrack(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {err}");
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON document");
        assert_eq!(v["figures"]["ring"], expected, "{v}");
    }
    for bad in ["0", "1048577", "x"] {
        let out = ctrack(&["bench", "policy", "stage", "--ring", bad]);
        assert_eq!(out.status.code(), Some(2), "--ring {bad}");
    }
}

/// `bench policy stage --threads N` sends each thread's packets through
/// the one firewall and then the one plain tracker: the rates are the
/// threads' total, every thread's packets must pass (a run where one did
/// not fails), and the per-thread rates are the totals shared out; with
/// `--affine` each thread keeps to connections of its own. Other `bench
/// policy` measures refuse the options, `--affine` wants `--threads` and
/// a connection a thread, and out of range `--threads` is a usage error.
#[test]
fn the_stage_benchmark_runs_on_threads() {
    let args = [
        "bench",
        "--json",
        "policy",
        "stage",
        "--conns",
        "200",
        "--acls",
        "1,5",
        "--packets",
        "4000",
        "--runs",
        "2",
        "--ring",
        "256",
        "--threads",
        "3",
    ];
    let out = ctrack(&args);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{args:?}: {err}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON document");
    assert_eq!(v["figures"]["threads"], 3, "{v}");
    let rows = v["figures"]["rows"].as_array().expect("rows");
    assert_eq!(rows.len(), 2);
    for row in rows {
        let f = |k: &str| row[k].as_f64().unwrap_or_else(|| panic!("{k}: {row}"));
        assert!(f("firewall_mpps") > 0.0 && f("lookup_mpps") > 0.0, "{row}");
        assert!((f("firewall_mpps_per_thread") * 3.0 - f("firewall_mpps")).abs() < 1e-9);
        assert!((f("lookup_mpps_per_thread") * 3.0 - f("lookup_mpps")).abs() < 1e-9);
        assert_eq!(row["cost_runs"].as_array().map(Vec::len), Some(2), "{row}");
    }
    // Each thread on connections of its own.
    let mut affine = args.to_vec();
    affine.push("--affine");
    let out = ctrack(&affine);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{affine:?}: {err}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON document");
    assert_eq!(v["figures"]["affine"], true, "{v}");
    for bad in [
        &["bench", "policy", "stage", "--affine"][..],
        &["bench", "policy", "classify", "--affine", "--threads", "2"],
        &[
            "bench",
            "policy",
            "stage",
            "--affine",
            "--threads",
            "4",
            "--conns",
            "3",
        ],
    ] {
        let out = ctrack(bad);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{bad:?}: {err}");
        assert!(err.contains("--"), "{err}");
        assert_eq!(err.lines().count(), 1, "{err}");
    }
    let out = ctrack(&["bench", "policy", "passes", "--threads", "2"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("--threads applies to `stage` only"), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    for bad in ["0", "1025", "x"] {
        let out = ctrack(&["bench", "policy", "stage", "--threads", bad]);
        assert_eq!(out.status.code(), Some(2), "--threads {bad}");
    }
}

/// `bench memory --label` and `--nat` commit every connection labelled or
/// source-translated and say so. Translation about doubles the index
/// (each connection's reply tuple has an entry of its own); the extension
/// either takes, allocated apart from the table, shows in the resident
/// set only: at least 32 bytes a connection more than plain ones (it is
/// 40, 48 with the allocator's header). 100,000 connections: with fewer,
/// the resident set's growth by whole pages blurs the difference (20,000
/// gave 37 to 46 bytes).
#[test]
fn memory_counts_what_labels_and_translation_add() {
    let run = |extra: &[&str]| {
        let mut args = vec!["bench", "--json", "memory", "--conns", "100000"];
        args.extend(extra);
        let out = ctrack(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {err}");
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON document");
        assert_eq!(v["conns"], 100000, "{args:?}");
        assert_eq!(v["label"], extra.contains(&"--label"), "{args:?}");
        assert_eq!(v["nat"], extra.contains(&"--nat"), "{args:?}");
        assert_eq!(v["ipv6"], false, "{args:?}");
        let index = v["index_bytes"].as_u64().expect("index_bytes");
        let rss = v["rss_bytes_per_conn"]
            .as_f64()
            .expect("rss_bytes_per_conn");
        (index, rss)
    };
    // (An index's size varies a little from run to run with the hash
    // seeds: the entries' spread over the shards decides when one grows.)
    let (plain_index, plain_rss) = run(&[]);
    let (_, label_rss) = run(&["--label"]);
    let (nat_index, nat_rss) = run(&["--nat"]);
    assert!(
        nat_index * 2 >= plain_index * 3,
        "{nat_index} against {plain_index}"
    );
    // IPv6 connections fill the IPv6 table, whose records are 152 bytes
    // (the IPv4 table's index stays, allocated for the limit).
    let out = ctrack(&["bench", "--json", "memory", "--conns", "20000", "--ipv6"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON document");
    assert_eq!(v["ipv6"], true);
    let records = v["record_bytes"].as_u64().expect("record_bytes");
    assert!(records >= 152 * 20000, "{records} bytes of records");
    for (what, rss) in [("--label", label_rss), ("--nat", nat_rss)] {
        assert!(
            rss >= plain_rss + 32.0,
            "{what}: {rss:.1} B a connection against {plain_rss:.1}"
        );
    }
}

/// An interface whose MTU no port's frame holds (`lo`'s 65,536) is
/// refused in words, naming the interface and what to do. Needs root
/// (the capability check comes first) and `lo` at such an MTU, as a
/// machine has it unless someone lowered it.
#[test]
fn an_mtu_over_a_ports_frame_is_refused_in_words() {
    let mtu: usize = std::fs::read_to_string("/sys/class/net/lo/mtu")
        .ok()
        .and_then(|m| m.trim().parse().ok())
        .unwrap_or(0);
    if !root_user() || mtu + 18 <= 65536 {
        eprintln!("skipped: needs root and lo's MTU over 65,518 (it is {mtu})");
        return;
    }
    let policy = Temp::new("mtu.toml");
    std::fs::write(
        &policy.0,
        "[[port]]\nname = \"a\"\naddresses = [\"02:00:00:00:00:01\"]\n",
    )
    .expect("write the policy");
    let sock = Temp::new("mtu.sock");
    let out = ctrack(&[
        "run",
        "--policy",
        policy.path(),
        "--port",
        "a=lo",
        "--ctl",
        sock.path(),
        "--workers",
        "1",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains(&format!("lo: MTU {mtu} is too large")) && err.contains("ip link set lo mtu"),
        "{err}"
    );
    no_panic(&err);
}
