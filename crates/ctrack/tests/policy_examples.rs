//! The bundled policy examples (`examples/policy/`): every policy loads, and
//! replaying each one's capture through it decides every flow of its
//! `NAME.traffic` as the flow's comment says (the first packet of the flow:
//! a TCP SYN, a UDP datagram, an ICMP echo request).

mod common;

use std::net::IpAddr;
use std::path::Path;

use common::{ctrack, root};
use ctrack_policy::model::Policy;

/// The policy examples, by name (`examples/policy/NAME.toml`).
fn examples() -> Vec<String> {
    let dir = root().join("examples/policy");
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .expect("examples/policy")
        .filter_map(|e| {
            let p = e.ok()?.path();
            (p.extension()? == "toml").then(|| p.file_stem()?.to_str().map(str::to_owned))?
        })
        .collect();
    names.sort();
    names
}

#[test]
fn every_policy_example_loads() {
    let names = examples();
    assert!(names.len() >= 2, "examples/policy has {names:?}");
    for name in names {
        let path = root().join(format!("examples/policy/{name}.toml"));
        if let Err(e) = Policy::load(&path) {
            panic!("{name}.toml does not load: {e}");
        }
        let out = ctrack(&["policy", "check", &format!("examples/policy/{name}.toml")]);
        assert!(
            out.status.success(),
            "ctrack policy check {name}.toml: {}",
            String::from_utf8_lossy(&out.stdout)
        );
    }
}

/// One packet of the replay: its addresses, ports, what it is, the verdict.
struct Seen {
    src: IpAddr,
    dst: IpAddr,
    dport: Option<u16>,
    /// `tcp [S]`, `udp`, `echo-request`, or empty.
    kind: &'static str,
    verdict: String,
}

/// `10.0.0.1:80`, `[fd00::1]:80` or a bare address.
fn endpoint(s: &str) -> Option<(IpAddr, Option<u16>)> {
    if let Ok(a) = s.parse() {
        return Some((a, None));
    }
    let (a, p) = s.rsplit_once(':')?;
    let a = a.trim_start_matches('[').trim_end_matches(']');
    Some((a.parse().ok()?, Some(p.parse().ok()?)))
}

fn seen(line: &serde_json::Value) -> Option<Seen> {
    let summary = line.get("summary")?.as_str()?;
    let mut w = summary.split(' ');
    let (src, _) = endpoint(w.next()?)?;
    if w.next()? != ">" {
        return None;
    }
    let (dst, dport) = endpoint(w.next()?)?;
    let rest: Vec<&str> = w.collect();
    let kind = match rest.as_slice() {
        ["tcp", "[S]", ..] => "tcp [S]",
        ["udp", ..] => "udp",
        ["icmp" | "icmpv6", "echo-request", ..] => "echo-request",
        _ => "",
    };
    Some(Seen {
        src,
        dst,
        dport,
        kind,
        verdict: line.get("verdict")?.as_str()?.to_owned(),
    })
}

/// Port `name`'s address of the family asked for.
fn address(policy: &Policy, name: &str, v6: bool) -> IpAddr {
    let port = policy
        .ports
        .iter()
        .find(|p| p.name == name)
        .unwrap_or_else(|| panic!("no port {name}"));
    *port
        .ips
        .iter()
        .find(|a| a.is_ipv6() == v6)
        .unwrap_or_else(|| panic!("port {name} has no address of that family"))
}

#[test]
fn each_example_capture_is_decided_as_its_traffic_file_says() {
    let mut checked = 0;
    for name in examples() {
        let dir = root().join("examples/policy");
        let traffic = dir.join(format!("{name}.traffic"));
        if !traffic.exists() || !dir.join(format!("{name}.pcap")).exists() {
            continue;
        }
        let policy = Policy::load(&dir.join(format!("{name}.toml"))).expect("loads");
        let out = ctrack(&[
            "replay",
            "--format",
            "json",
            "--policy",
            &format!("examples/policy/{name}.toml"),
            &format!("examples/policy/{name}.pcap"),
        ]);
        assert!(
            out.status.success(),
            "replay {name}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let packets: Vec<Seen> = String::from_utf8(out.stdout)
            .expect("UTF-8")
            .lines()
            .filter_map(|l| seen(&serde_json::from_str(l).expect("JSON line")))
            .collect();
        checked += check_flows(&name, &traffic, &policy, &packets);
    }
    assert!(checked >= 20, "only {checked} flows checked");
}

/// Checks every flow line of `traffic` whose comment starts with a
/// verdict; returns how many it checked.
fn check_flows(name: &str, traffic: &Path, policy: &Policy, packets: &[Seen]) -> usize {
    let text = std::fs::read_to_string(traffic).expect("traffic file");
    let mut checked = 0;
    for line in text.lines() {
        let Some((flow, comment)) = line.split_once('#') else {
            continue;
        };
        let f: Vec<&str> = flow.split_whitespace().collect();
        let want = comment.split_whitespace().next().unwrap_or("");
        let want = want.trim_end_matches([',', ':']);
        if f.is_empty() || !["allow", "drop", "reject"].contains(&want) {
            continue;
        }
        let v6 = f.contains(&"-6");
        let (kind, port) = match f[0] {
            "tcp" => ("tcp [S]", f.get(3).and_then(|p| p.parse().ok())),
            "udp" => ("udp", f.get(3).and_then(|p| p.parse().ok())),
            "ping" => ("echo-request", None),
            other => panic!("{name}.traffic: unknown flow kind {other:?}"),
        };
        let (src, dst) = (address(policy, f[1], v6), address(policy, f[2], v6));
        let first = packets
            .iter()
            .find(|p| {
                p.src == src
                    && p.dst == dst
                    && p.kind == kind
                    && (port.is_none() || p.dport == port)
            })
            .unwrap_or_else(|| panic!("{name}.pcap has no packet of '{}'", flow.trim()));
        assert_eq!(
            first.verdict,
            want,
            "{name}: the first packet of '{}' ({src} > {dst})",
            flow.trim()
        );
        checked += 1;
    }
    checked
}

/// The policies written out in docs/policy.md (its TOML and JSON blocks)
/// load, and are the same policy.
#[test]
fn the_policies_in_the_docs_load() {
    let text = std::fs::read_to_string(root().join("docs/policy.md")).expect("docs/policy.md");
    let mut shown = Vec::new();
    for (fence, ext) in [("```toml\n", "toml"), ("```json\n", "json")] {
        let start = text.find(fence).expect("a block") + fence.len();
        let body = &text[start..start + text[start..].find("```").expect("its end")];
        let path = std::env::temp_dir().join(format!("ctrack-doc-{}.{ext}", std::process::id()));
        std::fs::write(&path, body).expect("write");
        let out = ctrack(&["policy", "show", path.to_str().expect("UTF-8 path")]);
        let _ = std::fs::remove_file(&path);
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "docs/policy.md's {ext} block: {stdout}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        // `policy show` prints the policy as it is written, not as Rust
        // debugging output.
        assert!(
            stdout.contains("nat=(src=198.51.100.1:1024-65535) alg=ftp"),
            "{stdout}"
        );
        assert!(
            stdout.contains("compiled to 1 rule (8 conjunctions)"),
            "{stdout}"
        );
        // Its ACL translates: a `+new` packet is translated by its commit,
        // so it meets the ACLs again.
        assert!(
            stdout.contains(
                "later +new packets of a connection (no reply yet): meet the ACLs again \
                 (an ACL translates addresses)"
            ),
            "{stdout}"
        );
        assert!(
            !stdout.contains('{') || stdout.contains("{80, 443}"),
            "{stdout}"
        );
        assert!(!stdout.contains("Some("), "{stdout}");
        // The first line names the file; the rest must be alike.
        shown.push(stdout.lines().skip(1).collect::<Vec<_>>().join("\n"));
    }
    assert_eq!(
        shown[0], shown[1],
        "the TOML and the JSON are the same policy"
    );
}

/// The frames of a little-endian pcap file (what `--write` writes, and the
/// bundled captures are).
fn pcap_frames(path: &Path) -> Vec<Vec<u8>> {
    let b = std::fs::read(path).expect("pcap");
    let u32_at =
        |at: usize| u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes")) as usize;
    assert!(
        [0xa1b2_c3d4, 0xa1b2_3c4d].contains(&(u32_at(0) as u32)),
        "{}: not a little-endian pcap",
        path.display()
    );
    let mut out = Vec::new();
    let mut at = 24;
    while at + 16 <= b.len() {
        let len = u32_at(at + 8);
        out.push(b[at + 16..at + 16 + len].to_vec());
        at += 16 + len;
    }
    assert_eq!(at, b.len(), "{}: a cut record", path.display());
    out
}

/// The 16-bit one's complement sum of `b`, folded.
fn ones_sum(b: &[u8]) -> u16 {
    let mut s: u32 = b
        .chunks(2)
        .map(|c| u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)])))
        .sum();
    while s > 0xffff {
        s = (s & 0xffff) + (s >> 16);
    }
    s as u16
}

/// `replay --policy --write` writes what passes, as it came, and after each
/// rejected packet the answer `reject` sent: for the UDP rejects of
/// `mixed`, an ICMP port unreachable back to the sender, quoting it.
#[test]
fn a_policy_replay_writes_what_passes_and_the_answers_to_rejects() {
    let written = std::env::temp_dir().join(format!("ctrack-mixed-{}.pcap", std::process::id()));
    let out = ctrack(&[
        "replay",
        "--format",
        "json",
        "--policy",
        "examples/policy/mixed.toml",
        "--write",
        written.to_str().expect("UTF-8 path"),
        "examples/policy/mixed.pcap",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let frames_out = pcap_frames(&written);
    let _ = std::fs::remove_file(&written);
    let frames_in = pcap_frames(&root().join("examples/policy/mixed.pcap"));
    let verdicts: Vec<String> = String::from_utf8(out.stdout)
        .expect("UTF-8")
        .lines()
        .filter_map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).ok()?;
            v.get("packet")?;
            Some(v.get("verdict")?.as_str()?.to_owned())
        })
        .collect();
    assert_eq!(verdicts.len(), frames_in.len());
    let mut next = frames_out.iter();
    let mut rejects = 0;
    for (frame, verdict) in frames_in.iter().zip(&verdicts) {
        match verdict.as_str() {
            "allow" => assert_eq!(next.next(), Some(frame), "an allowed frame, unchanged"),
            "drop" => {}
            "reject" => {
                rejects += 1;
                let a = next.next().expect("the reject's answer");
                // Ethernet and IPv4 turned around, ICMP type 3 code 3.
                assert_eq!((&a[0..6], &a[6..12]), (&frame[6..12], &frame[0..6]));
                assert_eq!(&a[12..14], &[0x08, 0x00]);
                let (ip, orig) = (&a[14..], &frame[14..]);
                assert_eq!(ip[9], 1, "ICMP");
                assert_eq!((&ip[12..16], &ip[16..20]), (&orig[16..20], &orig[12..16]));
                assert_eq!(ones_sum(&ip[..20]), 0xffff, "IPv4 header checksum");
                let icmp = &ip[20..usize::from(u16::from_be_bytes([ip[2], ip[3]]))];
                assert_eq!((icmp[0], icmp[1]), (3, 3), "port unreachable");
                assert_eq!(ones_sum(icmp), 0xffff, "ICMP checksum");
                // It quotes the rejected datagram's header and more.
                assert_eq!(&icmp[8..8 + 28], &orig[..28]);
            }
            other => panic!("verdict {other:?}"),
        }
    }
    assert_eq!(next.next(), None, "nothing more written");
    assert_eq!(rejects, 2, "mixed.pcap's two rejected UDP flows");
}

/// `ctrack policy check` prints each finding on a line of its own and
/// counts warnings and notes; findings do not fail the command.
#[test]
fn policy_check_reports_findings_and_counts_them() {
    let path = std::env::temp_dir().join(format!("ctrack-check-{}.toml", std::process::id()));
    std::fs::write(
        &path,
        r#"
[address_sets]
spare = ["192.0.2.0/24"]
[[acl]]
name = "v4"
direction = "to-lport"
priority = 100
match = "ip4"
action = "drop"
persist-established = true
[[acl]]
name = "v6"
direction = "to-lport"
priority = 100
match = "ip6"
action = "drop"
[[acl]]
name = "ssh"
direction = "to-lport"
priority = 50
match = "tcp.dst == 22"
action = "allow"
[[acl]]
name = "odd"
direction = "from-lport"
priority = 50
match = "tcp && udp"
action = "allow"
[meters.answers]
rate = 5
[copp]
reject = "answers"
"#,
    )
    .expect("write");
    let file = path.to_str().expect("UTF-8 path");
    let out = ctrack(&["policy", "check", file]);
    let strict = ctrack(&["policy", "check", "--strict", file]);
    let strict_clean = ctrack(&[
        "policy",
        "check",
        "--strict",
        "examples/policy/three-tier.toml",
    ]);
    let json = ctrack(&["policy", "check", "--format", "json", file]);
    let _ = std::fs::remove_file(&path);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{text}");
    // --strict refuses warnings, and only warnings.
    assert_eq!(strict.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&strict.stderr).contains("2 warning(s), refused by --strict"),
        "{}",
        String::from_utf8_lossy(&strict.stderr)
    );
    assert!(strict_clean.status.success());
    // The same findings as one JSON document.
    assert!(json.status.success());
    let j: serde_json::Value = serde_json::from_slice(&json.stdout).expect("one JSON document");
    assert_eq!(
        (
            j["acls"].as_u64(),
            j["warnings"].as_u64(),
            j["notes"].as_u64()
        ),
        (Some(4), Some(2), Some(3))
    );
    let kinds: Vec<(&str, &str)> = j["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .map(|f| {
            (
                f["level"].as_str().unwrap_or(""),
                f["kind"].as_str().unwrap_or(""),
            )
        })
        .collect();
    assert_eq!(
        kinds,
        [
            ("note", "unused_address_set"),
            ("note", "persist_without_commit"),
            ("note", "copp_without_reject"),
            ("warning", "never_matches"),
            ("warning", "shadowed")
        ]
    );
    assert_eq!(j["findings"][1]["acl"].as_str(), Some("v4"));
    assert_eq!(j["findings"][2]["name"].as_str(), Some("answers"));
    let shadow = &j["findings"][4];
    assert_eq!(
        (
            shadow["acl"].as_str(),
            shadow["by"][0].as_str(),
            shadow["by"][1].as_str()
        ),
        (Some("ssh"), Some("v4"), Some("v6"))
    );
    for want in [
        "note: address set spare is not used by any ACL",
        "warning: ACL odd can never match",
        "warning: ACL ssh is shadowed by v4 and v6, which rank above it and together match every packet it matches",
        "note: [copp] reject names meter answers but no ACL rejects: it limits nothing",
        "note: ACL v4 has persist-established but commits no connection: there is nothing to persist",
        "4 ACLs (0 stateful), default allow; 2 warning(s), 3 note(s)",
    ] {
        assert!(text.contains(want), "{want:?} in {text}");
    }
}

/// `policy check --format json` names each kind of finding as
/// docs/firewall.md lists them: those the test above does not bring
/// about, with the fields each fills.
#[test]
fn policy_check_names_every_kind_of_finding_in_json() {
    let path = std::env::temp_dir().join(format!("ctrack-kinds-{}.toml", std::process::id()));
    std::fs::write(
        &path,
        r#"
[[port]]
name = "vm1"
addresses = ["02:00:00:00:00:01 10.0.0.1"]
port_security = ["02:00:00:00:00:01 10.0.0.9"]
[port_groups]
idle = ["vm1"]
[meters.quiet]
rate = 5
[meters.spare]
rate = 7
[[acl]]
name = "web"
direction = "to-lport"
priority = 100
match = "tcp.dst == 80"
action = "allow-related"
log-related = true
[[acl]]
name = "web"
direction = "to-lport"
priority = 90
match = "tcp.dst == 443"
action = "allow-related"
meter = "quiet"
[[acl]]
name = "dns"
direction = "from-lport"
priority = 100
match = "udp.dst == 53"
action = "allow-stateless"
log = true
log-related = true
"#,
    )
    .expect("write");
    let file = path.to_str().expect("UTF-8 path");
    let json = ctrack(&["policy", "check", "--format", "json", file]);
    let _ = std::fs::remove_file(&path);
    assert!(
        json.status.success(),
        "{}",
        String::from_utf8_lossy(&json.stderr)
    );
    let j: serde_json::Value = serde_json::from_slice(&json.stdout).expect("one JSON document");
    let findings = j["findings"].as_array().expect("findings");
    let find = |kind: &str| {
        let all: Vec<&serde_json::Value> = findings.iter().filter(|f| f["kind"] == kind).collect();
        assert_eq!(all.len(), 1, "one {kind} in {j}");
        all[0]
    };
    let unused_group = find("unused_port_group");
    assert_eq!(unused_group["name"], "idle");
    assert_eq!(find("unused_meter")["name"], "spare");
    // ACLs that share a name are told apart by their index in the file.
    let meter = find("meter_without_log");
    assert_eq!(meter["acl"], "web (#1)");
    assert_eq!(meter["name"], "quiet");
    assert_eq!(find("log_related_without_log")["acl"], "web (#0)");
    assert_eq!(find("log_related_without_commit")["acl"], "dns");
    assert_eq!(find("port_security_excludes")["name"], "vm1");
    let shared = find("shared_name");
    assert_eq!(shared["name"], "web");
    assert_eq!(shared["indexes"], serde_json::json!([0, 1]));
    assert_eq!(shared["level"], "warning");
    for f in findings {
        let kind = f["kind"].as_str().unwrap_or("");
        let want = if kind == "shared_name" {
            "warning"
        } else {
            "note"
        };
        assert_eq!(f["level"], want, "{f}");
        assert!(!f["message"].as_str().unwrap_or("").is_empty(), "{f}");
    }
    assert_eq!(
        (j["warnings"].as_u64(), j["notes"].as_u64()),
        (Some(1), Some(6))
    );
}

/// A policy needs Ethernet frames: a raw-IP capture is refused, naming its
/// link type in words.
#[test]
fn a_policy_replay_of_raw_ip_is_refused_in_words() {
    let ip: Vec<u8> = [
        "450000280001000040067cce0a0000010a00000b",
        "a4b20050000000000000000050022000917c0000",
    ]
    .concat()
    .as_bytes()
    .chunks(2)
    .map(|h| u8::from_str_radix(std::str::from_utf8(h).expect("hex"), 16).expect("hex"))
    .collect();
    let mut file = Vec::new();
    for w in [0xa1b2_c3d4u32, 0x0004_0002, 0, 0, 65535, 101] {
        file.extend_from_slice(&w.to_le_bytes());
    }
    for w in [1u32, 0, ip.len() as u32, ip.len() as u32] {
        file.extend_from_slice(&w.to_le_bytes());
    }
    file.extend_from_slice(&ip);
    let path = std::env::temp_dir().join(format!("ctrack-raw-{}.pcap", std::process::id()));
    std::fs::write(&path, &file).expect("write");
    let out = ctrack(&[
        "replay",
        "--policy",
        "examples/policy/mixed.toml",
        path.to_str().expect("UTF-8 path"),
    ]);
    let _ = std::fs::remove_file(&path);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("a policy needs Ethernet frames (ports are told apart by MAC); this capture's link type is raw IP"),
        "{err}"
    );
}

/// An ACL whose match the classifier cannot expand within its bounds
/// refuses the policy with the ACL named and its line, no backtrace; OVN's
/// multicast predicates and subfields load.
#[test]
fn a_match_too_costly_to_compile_names_its_acl() {
    let policy = |m: &str| {
        format!(
            "[[port]]\nname = \"vm1\"\naddresses = [\"02:00:00:00:00:01 10.0.0.1 fd00::1\"]\n\n\
             [[acl]]\nname = \"kube-mcast\"\ndirection = \"to-lport\"\npriority = 200\n\
             match = '(ip4.mcast || mldv1 || mldv2 || (ip6.dst[120..127] == 0xff && ip6.dst[116] == 1))'\n\
             action = \"allow\"\n\n\
             [[acl]]\nname = \"no-flood\"\ndirection = \"from-lport\"\npriority = 100\n\
             match = '{m}'\naction = \"drop\"\n"
        )
    };
    let path = std::env::temp_dir().join(format!("ctrack-costly-{}.toml", std::process::id()));
    let run = |m: &str| {
        std::fs::write(&path, policy(m)).expect("write");
        ctrack(&["policy", "check", path.to_str().expect("UTF-8 path")])
    };
    for m in ["!ip6.mcast_all_rtrs", "!ip6.mcast_flood"] {
        let out = run(m);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{m}: {err}");
    }
    // Three negated tests of three fields: 128 × 128 × 16 conjunctions.
    let out = run("ip6.src != fd00::1 && ip6.dst != fd00::2 && tcp.dst != 80");
    let _ = std::fs::remove_file(&path);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("line 12, column 1: ACL `no-flood` (from-lport, priority 100): expression expands to more than"),
        "{err}"
    );
    assert!(
        !err.contains("panicked") && !err.contains("backtrace"),
        "{err}"
    );
}

/// `ctrack replay --policy` logs the decisions of an ACL with `log =
/// true` on standard error, one `acl_log` line each with the ACL's
/// severity and the packet's number, and no other ACL's.
#[test]
fn a_policy_replay_logs_the_decisions_of_logged_acls() {
    let r = replay_logged("severity = \"warning\"", "", &[]);
    assert!(!r.decided.is_empty(), "the capture never meets the ACL");
    assert_eq!(r.logged, r.decided, "{}", r.stderr);
    assert!(
        r.stderr.contains("severity=warning, direction="),
        "{}",
        r.stderr
    );
    assert_eq!(r.summary["log_lines"], r.decided.len() as u64);
    assert_eq!(r.summary["log_suppressed"], 0);
}

/// An ACL with a meter (OVN's `ACL.meter`) logs what its meter lets
/// through on the replay's clock: with `--clock fixed`, time stands still
/// and only the burst (one line) is logged.
#[test]
fn a_policy_replay_meters_the_log_of_an_acl_with_a_meter() {
    let r = replay_logged(
        "meter = \"m\"",
        "\n[meters.m]\nrate = 1\nburst = 1\n",
        &["--clock", "fixed"],
    );
    assert!(
        r.decided.len() > 1,
        "the meter is never full: {:?}",
        r.decided
    );
    assert_eq!(r.logged, r.decided[..1], "{}", r.stderr);
    assert_eq!(r.summary["log_lines"], 1);
    assert_eq!(r.summary["log_suppressed"], r.decided.len() as u64 - 1);
}

/// What `replay --format json` of the mixed example said and logged, its
/// ACL `c-udp4-reject` given `log = true` and the lines `acl`, and the file
/// `tail`.
struct Logged {
    /// The packets the ACL decided.
    decided: Vec<u64>,
    /// The packets an ACL log line names.
    logged: Vec<u64>,
    summary: serde_json::Value,
    stderr: String,
}

fn replay_logged(acl: &str, tail: &str, args: &[&str]) -> Logged {
    let text = std::fs::read_to_string(root().join("examples/policy/mixed.toml")).expect("read");
    let marked = "name = \"c-udp4-reject\"";
    assert!(text.contains(marked));
    let logged = text.replacen(marked, &format!("{marked}\nlog = true\n{acl}"), 1) + tail;
    let path = std::env::temp_dir().join(format!(
        "ctrack-log-{}-{}.toml",
        std::process::id(),
        args.len()
    ));
    std::fs::write(&path, logged).expect("write");
    let mut argv = vec![
        "replay",
        "--policy",
        path.to_str().expect("UTF-8 path"),
        "--format",
        "json",
    ];
    argv.extend_from_slice(args);
    argv.push("examples/policy/mixed.pcap");
    let out = ctrack(&argv);
    let _ = std::fs::remove_file(&path);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{stderr}");
    let objects: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let decided = objects
        .iter()
        .filter(|v| v["acl"] == "c-udp4-reject" && v["packet"].is_u64())
        .filter_map(|v| v["packet"].as_u64())
        .collect();
    let head = "acl_log(ctrack)|INFO|name=\"c-udp4-reject\", verdict=reject, severity=";
    let logged = stderr
        .lines()
        .filter(|l| l.starts_with("acl_log(ctrack)"))
        .map(|l| {
            assert!(l.starts_with(head), "{l}");
            let n = l
                .split(": packet ")
                .nth(1)
                .and_then(|r| r.split(':').next());
            n.and_then(|n| n.parse().ok())
                .unwrap_or_else(|| panic!("{l}"))
        })
        .collect();
    let summary = objects
        .iter()
        .find(|v| v.get("log_lines").is_some())
        .cloned()
        .expect("the summary");
    Logged {
        decided,
        logged,
        summary,
        stderr,
    }
}

/// `replay --reject-rate N --reject-burst N` set the limit on `reject`
/// answers, as `ctrack run`'s do: with a burst of 0 the mixed example's
/// rejected UDP gets no ICMP error, by default every one does; without
/// `--policy` they are refused. A policy's `[copp] reject` meter limits
/// them in the flags' place.
#[test]
fn replay_takes_the_reject_limit() {
    let summary = |policy: &str, extra: &[&str]| {
        let mut argv = vec!["replay", "--policy", policy, "--format", "json"];
        argv.extend_from_slice(extra);
        argv.push("examples/policy/mixed.pcap");
        let out = ctrack(&argv);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .find(|v| v.get("rejects_sent").is_some())
            .expect("the summary")
    };
    let n = |v: &serde_json::Value, k: &str| v[k].as_u64().expect("a count");
    let both = |v: &serde_json::Value| (n(v, "rejects_sent"), n(v, "rejects_suppressed"));
    let mixed = "examples/policy/mixed.toml";
    let open = summary(mixed, &[]);
    let shut = summary(mixed, &["--reject-rate", "0", "--reject-burst", "0"]);
    assert!(n(&open, "rejects_sent") >= 2, "{open}");
    assert_eq!(n(&shut, "rejects_sent"), 0, "{shut}");
    assert_eq!(
        n(&shut, "rejects_suppressed"),
        n(&open, "rejects_sent") + n(&open, "rejects_suppressed")
    );
    // A meter of one answer a second, by `[copp]`: what the same limit
    // by flags gives, whatever the flags say.
    let one = summary(mixed, &["--reject-rate", "1", "--reject-burst", "1"]);
    assert_eq!(both(&one), (1, n(&open, "rejects_sent") - 1), "{one}");
    let copp = std::env::temp_dir().join(format!("ctrack-copp-{}.toml", std::process::id()));
    let text = std::fs::read_to_string(root().join(mixed)).expect("the example")
        + "\n[meters.answers]\nrate = 1\nburst = 1\n\n[copp]\nreject = \"answers\"\n";
    std::fs::write(&copp, text).expect("a temporary file");
    let path = copp.to_str().expect("a UTF-8 path");
    let by_meter = summary(path, &[]);
    let over_flags = summary(path, &["--reject-rate", "0", "--reject-burst", "0"]);
    let _ = std::fs::remove_file(&copp);
    assert_eq!(both(&by_meter), both(&one), "{by_meter}");
    assert_eq!(both(&over_flags), both(&one), "{over_flags}");
    let bad = ctrack(&["replay", "--reject-rate", "5", "examples/traffic.pcap"]);
    assert!(!bad.status.success());
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(err.contains("--policy"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}
