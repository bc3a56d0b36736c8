//! The policy file: the issue's example, TOML and JSON alike, and where
//! every kind of error is reported.

use std::net::IpAddr;

use ctrack_core::action::Alg;

use crate::key::{Field, Key};
use crate::model::{AclAction, DefaultAction, Direction, MeterUnit, Policy, PolicyError, Severity};

pub(super) const EXAMPLE: &str = r#"[default]
action = "allow"

[[port]]
name = "vm1"
addresses = ["02:00:00:00:00:01 10.0.0.1 fd00::1"]
zone = 1

[[port]]
name = "vm2"
addresses = ["02:00:00:00:00:02 10.0.0.2"]

[address_sets]
clients = ["10.0.0.0/24", "192.0.2.7", "fd00::/64"]

[port_groups]
web = ["vm1", "vm2"]

[[acl]]
name = "web-in"
direction = "to-lport"
priority = 1000
match = 'outport == @web && ip4.src == $clients && tcp.dst == {80, 443}'
action = "allow-related"
tier = 0
label = 7
log = false
persist-established = false
nat = "src=198.51.100.1:1024-65535"
alg = "ftp"

[[acl]]
direction = "from-lport"
priority = 0
match = "1"
action = "drop"
"#;

pub(super) const EXAMPLE_JSON: &str = r#"{
  "default": {"action": "allow"},
  "port": [
    {"name": "vm1", "addresses": ["02:00:00:00:00:01 10.0.0.1 fd00::1"], "zone": 1},
    {"name": "vm2", "addresses": ["02:00:00:00:00:02 10.0.0.2"]}
  ],
  "address_sets": {"clients": ["10.0.0.0/24", "192.0.2.7", "fd00::/64"]},
  "port_groups": {"web": ["vm1", "vm2"]},
  "acl": [
    {"name": "web-in", "direction": "to-lport", "priority": 1000,
     "match": "outport == @web && ip4.src == $clients && tcp.dst == {80, 443}",
     "action": "allow-related", "tier": 0, "label": 7, "log": false,
     "persist-established": false, "nat": "src=198.51.100.1:1024-65535", "alg": "ftp"},
    {"direction": "from-lport", "priority": 0, "match": "1", "action": "drop"}
  ]
}"#;

pub(super) fn load(text: &str) -> Policy {
    Policy::from_str(text, "p.toml").unwrap_or_else(|e| panic!("{e}"))
}

pub(super) fn error(text: &str) -> PolicyError {
    match Policy::from_str(text, "p.toml") {
        Ok(p) => panic!("loaded: {p:?}"),
        Err(e) => e,
    }
}

#[test]
fn the_example_loads() {
    let p = load(EXAMPLE);
    assert_eq!(p.default, DefaultAction::Allow);
    assert_eq!(p.ports.len(), 2);
    assert_eq!(p.ports[0].macs, vec![[2, 0, 0, 0, 0, 1]]);
    assert_eq!(
        p.ports[0].ips,
        vec![
            "10.0.0.1".parse::<IpAddr>().unwrap(),
            "fd00::1".parse().unwrap()
        ]
    );
    assert_eq!((p.ports[0].zone, p.ports[1].zone), (1, 2));
    assert_eq!(p.address_sets["clients"].len(), 3);
    assert_eq!(p.port_groups["web"], vec![0, 1]);
    let a = &p.acls[0];
    assert_eq!(
        (a.name.as_str(), a.direction, a.priority, a.tier),
        ("web-in", Direction::ToLport, 1000, 0)
    );
    assert_eq!(
        (a.action, a.label, a.log, a.persist_established),
        (AclAction::AllowRelated, Some(7), false, false)
    );
    assert!(a.nat.is_some());
    assert_eq!(a.alg, Some(Alg::Ftp));
    assert_eq!((a.span.line, a.span.col), (19, 1), "the `[[acl]]` header");
    assert_eq!(p.acls[1].name, "acl#1");
    assert_eq!(p.acls[1].action, AclAction::Drop);
    assert!(p.has_stateful());
    let f = ctrack_wire::build::Frame::v4(
        [10, 0, 0, 9],
        [10, 0, 0, 2],
        ctrack_wire::build::L4::tcp(1, 443, 2),
    );
    let k = Key::from_frame(&f.build(), 0, 2);
    assert!(a.expr.eval(&k));
    assert_eq!(k.get(Field::Outport), 2);
}

#[test]
fn json_of_the_same_shape_is_the_same_policy() {
    let mut t = load(EXAMPLE);
    let mut j = Policy::from_str(EXAMPLE_JSON, "p.json").unwrap_or_else(|e| panic!("{e}"));
    // Only where each ACL starts in its file differs.
    assert_eq!((j.acls[0].span.line, j.acls[0].span.col), (10, 5));
    for a in t.acls.iter_mut().chain(j.acls.iter_mut()) {
        a.span = Default::default();
    }
    assert_eq!(t, j);
}

#[test]
fn zones_fill_the_smallest_unused() {
    let p = load(
        "[[port]]\nname = \"a\"\n[[port]]\nname = \"b\"\nzone = 2\n[[port]]\nname = \"c\"\n[[port]]\nname = \"d\"\nzone = 1\n",
    );
    let zones: Vec<u16> = p.ports.iter().map(|p| p.zone).collect();
    assert_eq!(zones, vec![3, 2, 4, 1]);
    assert_eq!(load("").default, DefaultAction::Allow);
    assert_eq!(
        load("[default]\naction = \"drop\"\n").default,
        DefaultAction::Drop
    );
}

/// The example with line `line` (1-based) replaced.
pub(super) fn with_line(line: usize, new: &str) -> String {
    let mut v: Vec<&str> = EXAMPLE.lines().collect();
    v[line - 1] = new;
    v.join("\n") + "\n"
}

pub(super) fn at(e: &PolicyError) -> (u32, u32) {
    (e.span.line, e.span.col)
}

#[test]
fn match_errors_point_into_the_file() {
    // Line 23 is the first ACL's match; the match starts at column 10.
    let cases = [
        (
            "match = 'tcp.dst == 80 &&& udp'",
            (23, 26),
            "`&` is only valid",
        ),
        (
            "match = 'tcp.dst == 80 && bogus == 1'",
            (23, 27),
            "unknown field `bogus`",
        ),
        (
            "match = 'ip4.src == $nope'",
            (23, 21),
            "unknown address set `$nope`",
        ),
        (
            "match = 'outport == @nope'",
            (23, 21),
            "unknown port group `@nope`",
        ),
        (
            "match = 'outport == \"vm7\"'",
            (23, 21),
            "unknown port \"vm7\"",
        ),
        (
            "match = \"outport == \\\"vm7\\\"\"",
            (23, 21),
            "unknown port \"vm7\"",
        ),
        (
            "match = \"\\u0074cp.dst == 1 && x\"",
            (23, 31),
            "unknown field `x`",
        ),
    ];
    for (line, want, msg) in cases {
        let e = error(&with_line(23, line));
        assert!(e.message.contains(msg), "{line}: {e}");
        assert_eq!(at(&e), want, "{line}: {e}");
        assert!(
            e.to_string()
                .starts_with(&format!("p.toml:{}:{}: ", want.0, want.1)),
            "{e}"
        );
    }
    // A multi-line match: the error is on the match's third line.
    let e = error(&with_line(
        23,
        "match = \"\"\"\ntcp.dst == 80 &&\n   udp.dst == 99999\n\"\"\"",
    ));
    assert_eq!(at(&e), (25, 15), "{e}");
    let e = error(&with_line(23, "match = '''\r\ntcp &&\r\n  $x'''"));
    assert_eq!(at(&e), (25, 3), "{e}");
    let e = error(&with_line(23, "match = \"\"\"tcp && \\\n     bad\"\"\""));
    assert_eq!(at(&e), (24, 6), "{e}");
    // Past a line-ending backslash, on the line after it.
    let e = error(&with_line(
        23,
        "match = \"\"\"tcp && \\\n     udp && bad\"\"\"",
    ));
    assert_eq!(at(&e), (24, 13), "{e}");
    // A literal string has no line-ending backslash: the one it holds is
    // itself the error.
    let e = error(&with_line(23, "match = '''tcp && \\\n  udp'''"));
    assert!(e.message.contains("unexpected character"), "{e}");
    assert_eq!(at(&e), (23, 19), "{e}");
}

#[test]
fn a_bad_token_on_line_9_of_a_file() {
    let text = "[[port]]\nname = \"vm1\"\n\n[[acl]]\ndirection = \"to-lport\"\npriority = 1\naction = \"drop\"\n# the match:\nmatch = \"ip4 && tcp.dst == 80 ; udp\"\n";
    let e = error(text);
    assert_eq!(at(&e), (9, 31), "{e}");
    assert!(e.message.contains("expected `&&`, `||` or the end"), "{e}");
}

#[test]
fn file_errors_say_where() {
    let cases: Vec<(String, (u32, u32), &str)> = vec![
        (
            with_line(21, "direction = \"sideways\""),
            (21, 13),
            "from-lport",
        ),
        (
            with_line(22, "priority = 32768"),
            (22, 12),
            "priority 32768 out of range",
        ),
        (with_line(22, "priority = -1"), (22, 12), "out of range"),
        (with_line(25, "tier = 4"), (25, 8), "tier 4 out of range"),
        (with_line(26, "label = 4294967296"), (26, 9), "label"),
        (
            with_line(27, "severity = \"critical\""),
            (27, 12),
            "expected \"alert\", \"warning\", \"notice\", \"info\" or \"debug\"",
        ),
        (
            with_line(24, "action = \"allow\""),
            (29, 7),
            "only for allow-related",
        ),
        (with_line(29, "nat = \"src=1.2.3.4:0\""), (29, 7), "bad nat"),
        (
            with_line(29, "nat = \"src=1.2.3.4),alg=ftp,nat(\""),
            (29, 7),
            "bad nat",
        ),
        (with_line(30, "alg = \"http\""), (30, 7), "bad alg"),
        (
            with_line(6, "addresses = [\"02:00:00:00:00:0g 10.0.0.1\"]"),
            (6, 15),
            "bad MAC",
        ),
        (
            with_line(6, "addresses = [\"02:00:00:00:00:01 10.0.0.300\"]"),
            (6, 33),
            "bad IP address",
        ),
        (
            with_line(11, "addresses = [\"02:00:00:00:00:01\"]"),
            (11, 15),
            "already port \"vm1\"",
        ),
        (
            with_line(10, "name = \"vm1\""),
            (10, 8),
            "duplicate port name",
        ),
        (with_line(7, "zone = 70000"), (7, 8), "zone 70000"),
        (
            with_line(14, "clients = [\"10.0.0.0/33\"]"),
            (14, 12),
            "bad address set member",
        ),
        (
            with_line(17, "web = [\"vm1\", \"vm9\"]"),
            (17, 15),
            "unknown port \"vm9\"",
        ),
        (with_line(17, "web = [\"vm1\", \"vm1\"]"), (17, 15), "twice"),
        (with_line(20, "name = \"acl#3\""), (20, 8), "reserved"),
        (
            with_line(31, "colour = \"red\""),
            (31, 1),
            "unknown field `colour`",
        ),
        (
            with_line(2, "action = \"reject\""),
            (2, 10),
            "\"allow\" or \"drop\"",
        ),
        (with_line(21, "direction = 7"), (21, 13), "invalid type"),
        (with_line(3, "x = = 1"), (3, 5), ""),
        // A prefix length with a leading zero.
        (
            with_line(14, "clients = [\"10.0.0.0/024\"]"),
            (14, 12),
            "bad address set member",
        ),
        // `$web_ip4` would name the address set, not the group's IPv4
        // addresses (OVN derives `$NAME_ip4` from a port group).
        (
            with_line(14, "web_ip4 = [\"10.0.0.0/24\"]"),
            (17, 7),
            "port group \"web\" would be hidden",
        ),
        // One algorithm, nothing after it.
        (with_line(30, "alg = \"ftp,commit\""), (30, 7), "bad alg"),
        // OVN's limit on a name: 63 bytes.
        (
            with_line(20, &format!("name = \"{}\"", "n".repeat(64))),
            (20, 8),
            "longer than 63 bytes",
        ),
        // OVN's `router` addresses (a port facing a router) are not
        // supported, as `unknown` and `dynamic` are not.
        (
            with_line(6, "addresses = [\"router 10.0.0.1\"]"),
            (6, 15),
            "`router` addresses are not supported",
        ),
    ];
    for (text, want, msg) in cases {
        let e = error(&text);
        assert!(e.message.contains(msg), "{e}");
        assert_eq!(at(&e), want, "{e}");
    }
}

#[test]
fn names_and_address_set_members_as_ovn_reads_them() {
    // Host bits of an address set member are cleared, as OVN's lexer
    // does: `10.0.0.5/24` is the network 10.0.0.0/24.
    let p = load(&with_line(
        14,
        "clients = [\"10.0.0.5/24\", \"192.0.2.7\", \"fd00::1/64\"]",
    ));
    let members: Vec<(IpAddr, u8)> = p.address_sets["clients"]
        .iter()
        .map(|m| (m.addr, m.len))
        .collect();
    assert_eq!(
        members,
        vec![
            ("10.0.0.0".parse().unwrap(), 24),
            ("192.0.2.7".parse().unwrap(), 32),
            ("fd00::".parse().unwrap(), 64),
        ]
    );
    // Only `acl#` and digits is reserved; a 63-byte name is OVN's most.
    let p = load(&with_line(20, "name = \"acl#web\""));
    assert_eq!(p.acls[0].name, "acl#web");
    let long = "n".repeat(63);
    let p = load(&with_line(20, &format!("name = \"{long}\"")));
    assert_eq!(p.acls[0].name, long);
}

#[test]
fn json_errors_say_where() {
    let bad_syntax = EXAMPLE_JSON.replace("\"port_groups\": {", "\"port_groups\" {");
    let e = Policy::from_str(&bad_syntax, "p.json").unwrap_err();
    assert_eq!(at(&e), (8, 17), "{e}");
    assert!(e.to_string().starts_with("p.json:8:17: "), "{e}");
    let bad_match = EXAMPLE_JSON.replace("tcp.dst == {80, 443}", "tcp.dst == {80, 443} && nope");
    let e = Policy::from_str(&bad_match, "p.json").unwrap_err();
    assert_eq!(at(&e), (11, 82), "{e}");
    assert!(e.message.contains("unknown field `nope`"), "{e}");
    let unknown = EXAMPLE_JSON.replace("\"tier\": 0", "\"tear\": 0");
    let e = Policy::from_str(&unknown, "p.json").unwrap_err();
    assert_eq!(at(&e), (12, 38), "the key `\"tear\"`: {e}");
    assert!(e.message.contains("unknown field `tear`"), "{e}");
    let dup = EXAMPLE_JSON.replace("\"web\": [\"vm1\", \"vm2\"]", "\"web\": [], \"web\": []");
    let e = Policy::from_str(&dup, "p.json").unwrap_err();
    assert!(e.message.contains("duplicate name `web`"), "{e}");
}

#[test]
fn load_reads_a_file_and_names_it() {
    let dir = std::env::temp_dir().join(format!("ctrack-policy-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("p.toml");
    std::fs::write(&path, EXAMPLE).unwrap();
    assert_eq!(Policy::load(&path).unwrap(), load(EXAMPLE));
    let missing = dir.join("missing.toml");
    let e = Policy::load(&missing).unwrap_err();
    assert!(
        e.file.ends_with("missing.toml") && e.message.contains("cannot read"),
        "{e}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn files_that_are_not_regular_are_refused_at_once() {
    // A device that never ends, a directory, and (on Linux) a FIFO nobody
    // writes: each would hang or grow memory without bound if read.
    let dir = std::env::temp_dir().join(format!("ctrack-policy-nr-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut paths = vec![std::path::PathBuf::from("/dev/zero"), dir.clone()];
    let fifo = dir.join("fifo");
    if std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .is_ok_and(|s| s.success())
    {
        paths.push(fifo);
    }
    for p in &paths {
        if !p.exists() {
            continue;
        }
        let e = Policy::load(p).unwrap_err();
        assert!(
            e.message.contains("not a regular file"),
            "{}: {e}",
            p.display()
        );
        // The file as a whole: no line and column in the text.
        assert_eq!(
            e.to_string(),
            format!("{}: the policy file is not a regular file", p.display())
        );
    }
    let missing = dir.join("missing.toml");
    let e = Policy::load(&missing).unwrap_err();
    assert!(
        e.to_string().starts_with(&format!(
            "{}: cannot read the policy file: ",
            missing.display()
        )),
        "{e}"
    );
    // A file over the limit is refused by its length, before a byte of
    // it is read (a sparse file: no gigabyte written).
    let big = dir.join("big.toml");
    let f = std::fs::File::create(&big).unwrap();
    f.set_len(super::MAX_FILE_LEN + 1).unwrap();
    drop(f);
    let e = Policy::load(&big).unwrap_err();
    assert_eq!(
        e.to_string(),
        format!(
            "{}: the policy file is {} bytes (at most {})",
            big.display(),
            super::MAX_FILE_LEN + 1,
            super::MAX_FILE_LEN
        )
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn sets_and_groups_must_be_tables_of_names() {
    let e = error("address_sets = \"x\"\n");
    assert!(e.message.contains("expected a table of names"), "{e}");
    assert_eq!(at(&e), (1, 16), "{e}");
    let e = match Policy::from_str(r#"{"port_groups": 5}"#, "p.json") {
        Ok(p) => panic!("loaded: {p:?}"),
        Err(e) => e,
    };
    assert!(e.message.contains("expected a table of names"), "{e}");
    let e = error("[address_sets]\na = [\"10.0.0.1\"]\na = [\"10.0.0.2\"]\n");
    assert!(e.message.contains("duplicate"), "{e}");
}

#[test]
fn hostile_files_are_refused_without_panic() {
    for text in [
        format!("a = {}", "[".repeat(100_000)),
        "{".repeat(100_000),
        format!(
            "[[acl]]\ndirection = \"to-lport\"\npriority = 1\naction = \"drop\"\nmatch = '{}'\n",
            "(".repeat(70_000)
        ),
        "\u{feff}[[port]]".into(),
        "[[port]]\nname = \"\"\n".into(),
    ] {
        assert!(Policy::from_str(&text, "h").is_err());
    }
}

/// `severity`, OVN's `ACL.severity`: `info` unless given; `policy show`
/// prints it with `log`.
#[test]
fn severity_is_read_and_shown_with_log() {
    let p = load(EXAMPLE);
    assert_eq!(p.acls[0].severity, Severity::Info);
    assert_eq!(
        p.acls[0].options_text(),
        " nat=(src=198.51.100.1:1024-65535) alg=ftp label=7"
    );
    let p = load(&with_line(27, "log = true\nseverity = \"warning\""));
    let a = &p.acls[0];
    assert_eq!((a.log, a.severity), (true, Severity::Warning));
    assert_eq!(
        a.options_text(),
        " nat=(src=198.51.100.1:1024-65535) alg=ftp label=7 log(severity=warning)"
    );
    for s in Severity::ALL {
        let p = load(&with_line(27, &format!("severity = \"{}\"", s.name())));
        assert_eq!(p.acls[0].severity, s);
    }
}

const METERS: &str = "
[meters.acl-log]
rate = 20

[meters.bits]
unit = \"kbps\"
rate = 64
burst = 128
fair = true
";

/// `[meters]` and an ACL's `meter`: OVN's `Meter` (one `drop` band) and
/// `ACL.meter`.
#[test]
fn meters_are_read_and_named_by_acls() {
    let p = load(&(with_line(27, "log = true\nmeter = \"acl-log\"") + METERS));
    let m = &p.meters["acl-log"];
    assert_eq!(
        (m.unit, m.rate, m.burst, m.fair),
        (MeterUnit::Pktps, 20, 20, false),
        "pktps and a burst of the rate unless given"
    );
    let m = &p.meters["bits"];
    assert_eq!(
        (m.unit, m.rate, m.burst, m.fair),
        (MeterUnit::Kbps, 64, 128, true)
    );
    assert_eq!(p.acls[0].meter.as_deref(), Some("acl-log"));
    assert_eq!(p.acls[1].meter, None);
    assert_eq!(
        p.acls[0].options_text(),
        " nat=(src=198.51.100.1:1024-65535) alg=ftp label=7 log(severity=info,meter=\"acl-log\")"
    );
    // A meter without `log` limits nothing; it is kept and shown.
    let p = load(&(with_line(27, "meter = \"bits\"") + METERS));
    assert!(
        p.acls[0]
            .options_text()
            .ends_with(" label=7 meter=\"bits\"")
    );
    // `burst = 0`: the rate, as Open vSwitch chooses.
    let p = load(&(EXAMPLE.to_string() + "[meters.m]\nrate = 7\nburst = 0\n"));
    assert_eq!(p.meters["m"].burst, 7);
    // JSON, the same shape.
    let json = EXAMPLE_JSON.replace("\"log\": false,", "\"log\": true, \"meter\": \"m\",");
    let json = json.replacen(
        '{',
        "{\"meters\": {\"m\": {\"unit\": \"kbps\", \"rate\": 5}},",
        1,
    );
    let p = Policy::from_str(&json, "p.json").unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(p.meters["m"].unit, MeterUnit::Kbps);
    assert_eq!(p.acls[0].meter.as_deref(), Some("m"));
}

#[test]
fn meter_errors_say_where() {
    let with = |acl: &str, meters: &str| with_line(27, acl) + meters;
    let line_of = |text: &str, needle: &str| {
        text.lines().position(|l| l.contains(needle)).unwrap() as u32 + 1
    };
    let cases = [
        (
            with("meter = \"nope\"", METERS),
            "nope",
            9,
            "unknown meter \"nope\": expected one of acl-log, bits",
        ),
        (
            with("meter = \"nope\"", ""),
            "nope",
            9,
            "the policy has no [meters] table",
        ),
        (
            with("", "[meters.m]\nrate = 0\n"),
            "rate = 0",
            8,
            "rate 0 out of range: expected 1..=4294967295",
        ),
        (
            with("", "[meters.m]\nrate = 4294967296\n"),
            "rate = 4",
            8,
            "out of range",
        ),
        (
            with("", "[meters.m]\nrate = 1\nburst = -1\n"),
            "burst",
            9,
            "burst -1 out of range",
        ),
        (
            with("", "[meters.m]\nunit = \"bps\"\nrate = 1\n"),
            "unit",
            8,
            "expected \"pktps\" or \"kbps\"",
        ),
        (
            with("", "[meters.m]\nrate = 1\nbands = []\n"),
            "bands",
            1,
            "unknown field `bands`",
        ),
        (
            with("", "[meters.m]\nunit = \"kbps\"\n"),
            "[meters.m]",
            1,
            "missing field `rate`",
        ),
    ];
    for (text, needle, col, want) in cases {
        let e = error(&text);
        assert!(e.message.contains(want), "{e}");
        assert_eq!(at(&e), (line_of(&text, needle), col), "{e}");
    }
}

/// `[copp]`: OVN's `Copp` of the switch, its `reject` key naming the
/// meter that limits the answers to `reject` ACLs.
#[test]
fn copp_names_the_reject_meter() {
    let p = load(&(EXAMPLE.to_string() + METERS));
    assert_eq!(p.copp.reject, None);
    let p = load(&(EXAMPLE.to_string() + METERS + "[copp]\nreject = \"bits\"\n"));
    assert_eq!(p.copp.reject.as_deref(), Some("bits"));
    assert!(
        p.meter_lines()
            .iter()
            .any(|l| l.starts_with("meter bits:") && l.ends_with(", the reject answers ([copp])")),
        "{:?}",
        p.meter_lines()
    );
    // JSON, the same shape.
    let json = EXAMPLE_JSON.replacen(
        '{',
        "{\"meters\": {\"m\": {\"rate\": 5}}, \"copp\": {\"reject\": \"m\"},",
        1,
    );
    let p = Policy::from_str(&json, "p.json").unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(p.copp.reject.as_deref(), Some("m"));
}

#[test]
fn copp_errors_say_where() {
    let line_of = |text: &str, needle: &str| {
        text.lines().position(|l| l.contains(needle)).unwrap() as u32 + 1
    };
    let cases = [
        (
            EXAMPLE.to_string() + METERS + "[copp]\nreject = \"nope\"\n",
            "nope",
            10,
            "unknown meter \"nope\": expected one of acl-log, bits",
        ),
        (
            EXAMPLE.to_string() + "[copp]\nreject = \"nope\"\n",
            "nope",
            10,
            "the policy has no [meters] table",
        ),
        (
            EXAMPLE.to_string() + METERS + "[copp]\ntcp-reset = \"bits\"\n",
            "tcp-reset",
            13,
            "copp key \"tcp-reset\": expected \"reject\"",
        ),
        (
            EXAMPLE.to_string() + METERS + "[copp]\nreject = 5\n",
            "reject = 5",
            10,
            "expected a string",
        ),
    ];
    for (text, needle, col, want) in cases {
        let e = error(&text);
        assert!(e.message.contains(want), "{e}");
        assert_eq!(at(&e), (line_of(&text, needle), col), "{e}");
    }
}
