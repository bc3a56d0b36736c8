//! [`ctl_request`]: arbitrary bytes as the control server's request lines,
//! against a small datapath with a few connections.

use std::path::PathBuf;
use std::sync::Arc;

use ctrack_core::{Config, FragConfig, Tracker};
use ctrack_datapath::ctl::{EventHub, Session};
use ctrack_datapath::io::IoKind;
use ctrack_datapath::live::{PortInfo, Shared};
use ctrack_policy::firewall::{Firewall, FwOutputs};
use ctrack_policy::model::Policy;
use ctrack_wire::build::{Frame, L4};
use ctrack_wire::tcp::flags::{ACK, SYN};

use crate::Probe;

/// Request lines one input may make (each also sent as an argv request).
const MAX_LINES: usize = 32;

const POLICY: &str = r#"
[[port]]
name = "a"
addresses = ["02:00:00:00:00:01 10.0.0.1"]
zone = 5

[[port]]
name = "b"
addresses = ["02:00:00:00:00:02 10.0.0.2"]
zone = 7

[[acl]]
name = "web"
direction = "to-lport"
priority = 100
match = "outport == \"b\" && tcp.dst == 80"
action = "allow-related"
"#;

/// A datapath on [`POLICY`] with no ports open, as the control server
/// sees one, and a few connections in it.
fn datapath() -> Arc<Shared> {
    let policy = Policy::from_str(POLICY, "fuzz.toml").expect("the fuzz policy loads");
    let tracker = Tracker::new(Config {
        max_conns: 1000,
        shards: 4,
        ..Config::default()
    });
    let fw = Firewall::new(tracker, FragConfig::default(), policy).expect("the fuzz firewall");
    let port = |name: &str, n: u8| PortInfo {
        name: name.into(),
        ifname: format!("fz{n}"),
        mac: [2, 0, 0, 0, 0, n],
        mtu: 1500,
    };
    let shared = Arc::new(Shared::new(
        fw,
        vec![port("a", 1), port("b", 2)],
        IoKind::AfPacket,
        // Nothing there: `policy reload` without a file fails cleanly.
        PathBuf::from("/nonexistent/ctrack-fuzz/policy.toml"),
        1,
        Arc::new(EventHub::new(16)),
    ));
    let mut outs = FwOutputs::default();
    let now = shared.now();
    for (i, (flags, reply)) in [(SYN, false), (SYN | ACK, true), (ACK, false)]
        .into_iter()
        .enumerate()
    {
        for sport in [1000u16, 1001] {
            let (src, dst, s, d, tag) = if reply {
                ([10, 0, 0, 2], [10, 0, 0, 1], 80, sport, 1)
            } else {
                ([10, 0, 0, 1], [10, 0, 0, 2], sport, 80, 0)
            };
            let mut f = Frame::v4(
                src,
                dst,
                L4::tcp_seg(s, d, flags, 100 + i as u32, 0, 65535, &[]),
            );
            f.eth_src = [2, 0, 0, 0, 0, if reply { 2 } else { 1 }];
            f.eth_dst = [2, 0, 0, 0, 0, if reply { 1 } else { 2 }];
            shared.fw.process(f.build(), tag, now, &mut outs);
        }
    }
    shared
}

/// The commands, for the features (a word that is none of them is one
/// feature, not one per word).
const COMMANDS: &[&str] = &[
    "dump-conntrack",
    "list",
    "flush",
    "count",
    "stats",
    "set-maxconns",
    "get-maxconns",
    "ct-set-limits",
    "ct-get-limits",
    "ct-del-limits",
    "ct-set-timeout",
    "ct-get-timeout",
    "ct-del-timeout",
    "policy",
    "events",
    "ports",
    "fdb-show",
    "fdb-flush",
    "version",
    "help",
];

/// Checks a reply line: one JSON object, `ok` and its `text` or `error`.
/// Returns `ok`.
fn check(reply: &str) -> bool {
    let body = reply
        .strip_suffix('\n')
        .unwrap_or_else(|| panic!("a reply line ends with a newline: {reply:?}"));
    assert!(!body.contains('\n'), "one line: {reply:?}");
    let v: serde_json::Value = serde_json::from_str(body).expect("a reply is JSON");
    match v["ok"].as_bool() {
        Some(true) => {
            assert!(v["text"].is_string(), "{v}");
            true
        }
        Some(false) => {
            let e = v["error"].as_str().expect("an error says what");
            assert!(!e.is_empty());
            false
        }
        None => panic!("a reply says ok or not: {v}"),
    }
}

/// Arbitrary bytes as request lines to a control session: each line as
/// it is, then its words as an `argv` request (so that the commands, not
/// only the JSON parser, meet the input). Every reply must be one JSON
/// line saying `ok` with a text or not with an error; nothing may panic.
/// Counts request lines (not packets).
pub fn ctl_request(data: &[u8], probe: &mut Probe) {
    let session = Session::new(datapath());
    for line in data.split(|&b| b == b'\n').take(MAX_LINES) {
        let raw = check(&session.answer(line));
        let words: Vec<String> = String::from_utf8_lossy(line)
            .split_whitespace()
            .take(300)
            .map(str::to_owned)
            .collect();
        let req = serde_json::json!({ "argv": words }).to_string();
        let argv = check(&session.answer(req.as_bytes()));
        let command = words
            .first()
            .and_then(|w| COMMANDS.iter().position(|c| c == w));
        probe.feature(120, (command, words.len().min(6), raw, argv));
        probe.count(2);
    }
}
