//! `ctrack replay --policy FILE --reload N:FILE`: a policy change in the
//! middle of a capture, as `ctrack run` makes one on SIGHUP. The bundled
//! three-tier example's capture opens an HTTP connection to web1 (packets
//! 17 to 28: SYN, SYN-ACK, ACK, request, answer, close) and then an HTTPS
//! one over IPv6 to web2 (its SYN is packet 33).

mod common;

use common::{ctrack, root};
use serde_json::Value;

/// The three-tier example with its `web-http` ACL's match replaced by
/// `web_http` (and `extra` lines added to that ACL), written to a file of
/// its own named after `tag`.
fn variant(tag: &str, web_http: &str, extra: &str) -> std::path::PathBuf {
    let text =
        std::fs::read_to_string(root().join("examples/policy/three-tier.toml")).expect("read");
    let old = "match = \"outport == @web && tcp.dst == {80, 443}\"";
    assert!(text.contains(old), "the example's web-http ACL changed");
    let new = format!("match = \"{web_http}\"\n{extra}");
    let path =
        std::env::temp_dir().join(format!("ctrack-reload-{}-{tag}.toml", std::process::id()));
    std::fs::write(&path, text.replacen(old, &new, 1)).expect("write");
    path
}

/// Replays the example's capture under `policy` with `args` added, in
/// JSON: every object, by line.
fn replay(policy: &str, args: &[&str]) -> Vec<Value> {
    let mut argv = vec!["replay", "--policy", policy, "--format", "json"];
    argv.extend_from_slice(args);
    argv.push("examples/policy/three-tier.pcap");
    let out = ctrack(&argv);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}")))
        .collect()
}

/// Packet `n`'s (verdict, acl, stage, reason).
fn packet(objects: &[Value], n: u64) -> (String, String, String, String) {
    let p = objects
        .iter()
        .find(|v| v["packet"] == n)
        .unwrap_or_else(|| panic!("no packet {n}"));
    let s = |k: &str| p[k].as_str().unwrap_or("").to_string();
    (s("verdict"), s("acl"), s("stage"), s("reason"))
}

/// A change that no longer allows HTTP blocks the open HTTP connection at
/// its next packet (dropped, `blocked`, and removed: its later packets
/// meet the ACLs as new ones, and the default drops them); a second change
/// back lets the next connection in. The outgoing policy's counters come
/// at each change, and the change itself as an object of its own.
#[test]
fn a_reload_blocks_the_connections_the_new_policy_no_longer_allows() {
    let closed = variant("closed", "outport == @web && tcp.dst == 8443", "");
    let original = "examples/policy/three-tier.toml";
    let arg1 = format!("20:{}", closed.display());
    let arg2 = format!("30:{original}");
    let objects = replay(original, &["--reload", &arg1, "--reload", &arg2]);
    let _ = std::fs::remove_file(&closed);

    for n in 17..=19 {
        let (verdict, acl, ..) = packet(&objects, n);
        assert_eq!(
            (verdict.as_str(), acl.as_str()),
            ("allow", "web-http"),
            "packet {n}"
        );
    }
    let (verdict, _, stage, reason) = packet(&objects, 20);
    assert_eq!(
        (verdict.as_str(), stage.as_str(), reason.as_str()),
        ("drop", "default", "blocked")
    );
    for n in 21..=28 {
        let (verdict, _, _, reason) = packet(&objects, n);
        assert_eq!(
            (verdict.as_str(), reason.as_str()),
            ("drop", "default"),
            "packet {n}"
        );
    }
    // The second change puts HTTPS back before the IPv6 connection opens.
    let (verdict, acl, stage, _) = packet(&objects, 33);
    assert_eq!(
        (verdict.as_str(), acl.as_str(), stage.as_str()),
        ("allow", "web-http", "to-lport")
    );

    let changes: Vec<&Value> = objects
        .iter()
        .filter(|v| v.get("reload").is_some())
        .collect();
    assert_eq!(changes.len(), 2, "{changes:?}");
    assert_eq!(
        (
            changes[0]["reload"].as_u64(),
            changes[0]["generation"].as_u64()
        ),
        (Some(20), Some(2))
    );
    assert_eq!(
        (
            changes[1]["reload"].as_u64(),
            changes[1]["generation"].as_u64()
        ),
        (Some(30), Some(3))
    );
    assert_eq!(changes[1]["policy"], original);

    // The first policy's counters, at the first change: the one connection
    // and its three packets so far.
    let web_http = |until: Option<u64>| {
        objects
            .iter()
            .find(|v| {
                v["acl"] == "web-http"
                    && v.get("n_packets").is_some()
                    && v["until_packet"].as_u64() == until
            })
            .unwrap_or_else(|| panic!("no counters of web-http until {until:?}"))
    };
    let first = web_http(Some(20));
    assert_eq!(
        (first["n_conns"].as_u64(), first["n_packets"].as_u64()),
        (Some(1), Some(3))
    );
    let between = web_http(Some(30));
    assert_eq!(between["n_packets"].as_u64(), Some(0));
    // At the end, the last policy's, from packet 30: the IPv6 connection.
    let last = web_http(None);
    assert_eq!(last["n_conns"].as_u64(), Some(1));

    let summary = objects.last().expect("the summary");
    assert_eq!(summary["drops"]["blocked"].as_u64(), Some(1), "{summary}");
}

/// The same change, where the ACL that allowed the connection has
/// `persist-established` and keeps it (by its name, `web-http`): the
/// connection is left alone and flows on, reported as `persisted`; only
/// new connections meet the new policy. A reload that unsets the option
/// ends it, as OVN flushes such an ACL's connections.
#[test]
fn persist_established_keeps_a_connection_through_a_reload() {
    let persist = "persist-established = true";
    let kept = variant("kept", "outport == @web && tcp.dst == {80, 443}", persist);
    let closed = variant("closed-kept", "outport == @web && tcp.dst == 8443", persist);
    let unset = variant("closed-unset", "outport == @web && tcp.dst == 8443", "");
    let arg = format!("20:{}", closed.display());
    let objects = replay(kept.to_str().expect("UTF-8"), &["--reload", &arg]);
    let arg = format!("20:{}", unset.display());
    let ended = replay(kept.to_str().expect("UTF-8"), &["--reload", &arg]);
    for f in [&kept, &closed, &unset] {
        let _ = std::fs::remove_file(f);
    }
    let (verdict, _, _, reason) = packet(&ended, 20);
    assert_eq!((verdict.as_str(), reason.as_str()), ("drop", "blocked"));
    for n in 20..=28 {
        let (verdict, acl, stage, _) = packet(&objects, n);
        assert_eq!(
            (verdict.as_str(), acl.as_str(), stage.as_str()),
            ("allow", "persisted", "session"),
            "packet {n}"
        );
    }
    // The IPv6 connection opens under the new policy, which drops it.
    let (verdict, ..) = packet(&objects, 33);
    assert_eq!(verdict, "drop");
}

/// A `--reload` that cannot be carried out is refused with a message and
/// a non-zero exit, before any packet where it can be told then.
#[test]
fn a_bad_reload_is_refused_in_words() {
    let policy = "examples/policy/three-tier.toml";
    let capture = "examples/policy/three-tier.pcap";
    let run = |args: &[&str]| {
        let mut argv = vec!["replay", "--policy", policy];
        argv.extend_from_slice(args);
        argv.push(capture);
        let out = ctrack(&argv);
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    for bad in ["20", "0:x.toml", "20:", "x:y.toml"] {
        let (code, _, err) = run(&["--reload", bad]);
        assert_eq!(code, Some(2), "{bad}: {err}");
        assert!(err.contains("expected N:FILE"), "{bad}: {err}");
    }
    let (code, out, err) = run(&["--reload", "20:/nonexistent/p.toml"]);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("/nonexistent/p.toml") && out.is_empty(),
        "{out}{err}"
    );
    let (code, out, err) = run(&[
        "--reload",
        &format!("20:{policy}"),
        "--reload",
        &format!("10:{policy}"),
    ]);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("must increase") && out.is_empty(),
        "{out}{err}"
    );
    let (code, out, err) = run(&[
        "--reload",
        &format!("20:{policy}"),
        "--reload",
        &format!("20:{policy}"),
    ]);
    assert_eq!(code, Some(1), "two changes before one packet: {err}");
    assert!(
        err.contains("must increase") && out.is_empty(),
        "{out}{err}"
    );
    // A policy that loads but does not compile (a match that expands
    // past the classifier's bound) is refused before the first packet too.
    let costly = variant(
        "costly",
        "ip6.src != fd00::1 && ip6.dst != fd00::2 && tcp.dst != 80",
        "",
    );
    let (code, out, err) = run(&["--reload", &format!("20:{}", costly.display())]);
    let _ = std::fs::remove_file(&costly);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("expands to more than") && out.is_empty(),
        "{out}{err}"
    );
    let (code, out, err) = run(&["--reload", &format!("100000:{policy}")]);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("never took over") && out.contains("ACL counters"),
        "{err}"
    );
    let out = ctrack(&["replay", "--reload", &format!("20:{policy}"), capture]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--policy"));
    let bad = std::env::temp_dir().join(format!("ctrack-reload-{}-bad.toml", std::process::id()));
    let text = "[[acl]]\ndirection = \"to-lport\"\npriority = 1\naction = \"drop\"\nmatch = 'tcp.dst == '\n";
    std::fs::write(&bad, text).expect("write");
    let (code, out, err) = run(&["--reload", &format!("20:{}", bad.display())]);
    let _ = std::fs::remove_file(&bad);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains(":5:"), "{err}");
    assert!(out.is_empty(), "{out}");
}

/// In the human format, the counters of the policy a change replaces are
/// printed at the change, up to its packet, and the new policy's at the
/// end, from that packet on.
#[test]
fn a_reload_splits_the_counters_in_the_human_format() {
    let policy = "examples/policy/three-tier.toml";
    let out = ctrack(&[
        "replay",
        "--policy",
        policy,
        "--reload",
        &format!("20:{policy}"),
        "examples/policy/three-tier.pcap",
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let heads: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("ACL counters"))
        .collect();
    assert_eq!(
        heads,
        [
            "ACL counters, until packet 20:",
            "ACL counters, from packet 20:"
        ],
        "{text}"
    );
    assert!(text.contains(&format!(
        "policy {policy} in force from packet 20 (generation 2)"
    )));
}
