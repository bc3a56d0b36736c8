//! Built-in seeds: the bundled captures and policies of `examples/`, text
//! made of each text target's words, a few hand-built capture files, and
//! seeded random bytes for the targets that decode their input with
//! `arbitrary`. The campaign driver starts from them when it has no corpus
//! (the corpus in `fuzz/corpus/` was grown from them), and the smoke test
//! mutates them.

use std::path::{Path, PathBuf};

use ctrack_core::LinkType;
use ctrack_datapath::capture::{CaptureReader, CaptureWriter};

use crate::mutate::{Rng, encode_frames};
use crate::targets::{FTP_WORDS, MATCH_WORDS};

/// The repository's `examples/` folder (found from this crate's source).
pub fn examples_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples")
}

/// The repository's `fuzz/` folder (the cargo-fuzz targets and the corpus).
pub fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz")
}

/// The repository's `fuzz/corpus/` folder.
pub fn corpus_dir() -> PathBuf {
    fuzz_dir().join("corpus")
}

/// The bundled capture files (`examples/*.pcap`, `examples/policy/*.pcap`),
/// by name, sorted.
pub fn capture_files() -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    for dir in [examples_dir(), examples_dir().join("policy")] {
        let Ok(rd) = std::fs::read_dir(&dir) else {
            continue;
        };
        let mut paths: Vec<PathBuf> = rd
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "pcap" || x == "pcapng"))
            .collect();
        paths.sort();
        for p in paths {
            if let Ok(b) = std::fs::read(&p) {
                out.push((p.display().to_string(), b));
            }
        }
    }
    out
}

/// The frames of a capture file (as far as it reads).
pub fn frames_of(file: &[u8]) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    if let Ok(mut r) = CaptureReader::new(file) {
        while let Ok(Some(p)) = r.next_packet() {
            out.push(p.data.to_vec());
        }
    }
    out
}

/// Every frame of every bundled capture.
pub fn packets() -> Vec<Vec<u8>> {
    capture_files()
        .iter()
        .flat_map(|(_, b)| frames_of(b))
        .collect()
}

/// The NAT scenarios of `examples/nat/`: name, action, input frames.
pub fn nat_scenarios() -> Vec<(String, String, Vec<Vec<u8>>)> {
    let dir = examples_dir().join("nat");
    let list = std::fs::read_to_string(dir.join("scenarios.tsv")).unwrap_or_default();
    list.lines()
        .filter_map(|l| l.split_once('\t'))
        .map(|(name, action)| {
            let file = std::fs::read(dir.join(format!("{name}.in.pcap"))).unwrap_or_default();
            (name.to_string(), action.to_string(), frames_of(&file))
        })
        .collect()
}

/// A pcapng file with one Ethernet interface holding `frames`; written by
/// hand (section header, interface description, enhanced packet blocks).
pub fn pcapng(frames: &[Vec<u8>]) -> Vec<u8> {
    fn block(out: &mut Vec<u8>, ty: u32, body: &[u8]) {
        let pad = (4 - body.len() % 4) % 4;
        let len = (12 + body.len() + pad) as u32;
        out.extend_from_slice(&ty.to_le_bytes());
        out.extend_from_slice(&len.to_le_bytes());
        out.extend_from_slice(body);
        out.extend(std::iter::repeat_n(0, pad));
        out.extend_from_slice(&len.to_le_bytes());
    }
    let mut out = Vec::new();
    let mut shb = 0x1a2b_3c4du32.to_le_bytes().to_vec();
    shb.extend_from_slice(&[1, 0, 0, 0]);
    shb.extend_from_slice(&u64::MAX.to_le_bytes());
    block(&mut out, 0x0a0d_0d0a, &shb);
    block(&mut out, 1, &[1, 0, 0, 0, 0xff, 0xff, 0, 0]);
    for (i, f) in frames.iter().enumerate() {
        let mut epb = 0u32.to_le_bytes().to_vec();
        epb.extend_from_slice(&0u32.to_le_bytes());
        epb.extend_from_slice(&(i as u32 * 1000).to_le_bytes());
        epb.extend_from_slice(&(f.len() as u32).to_le_bytes());
        epb.extend_from_slice(&(f.len() as u32).to_le_bytes());
        epb.extend_from_slice(f);
        block(&mut out, 6, &epb);
    }
    out
}

/// A classic pcap file of `link` holding `frames`.
pub fn pcap(link: LinkType, frames: &[Vec<u8>]) -> Vec<u8> {
    let Ok(mut w) = CaptureWriter::new(Vec::new(), link) else {
        return Vec::new();
    };
    for (i, f) in frames.iter().enumerate() {
        if w.write(i as u64 * 1_000_000, f, f.len() as u32).is_err() {
            break;
        }
    }
    w.finish().unwrap_or_default()
}

fn random(salt: u64, count: usize, max_len: usize) -> Vec<Vec<u8>> {
    let mut r = Rng::new(0x5eed ^ salt);
    (0..count)
        .map(|_| {
            let n = r.below(max_len);
            r.bytes(n)
        })
        .collect()
}

fn words(salt: u64, dict: &[&[u8]], count: usize) -> Vec<Vec<u8>> {
    let mut r = Rng::new(0x5eed ^ salt);
    (0..count)
        .map(|_| {
            let mut v = Vec::new();
            for _ in 0..1 + r.below(12) {
                v.extend_from_slice(dict[r.below(dict.len())]);
                v.push(b' ');
            }
            v
        })
        .collect()
}

/// Policy files to start from: the bundled ones and two small ones.
pub fn policies() -> Vec<Vec<u8>> {
    let mut out = vec![
        POLICY_TOML.as_bytes().to_vec(),
        POLICY_JSON.as_bytes().to_vec(),
    ];
    if let Ok(rd) = std::fs::read_dir(examples_dir().join("policy")) {
        let mut paths: Vec<PathBuf> = rd
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "toml"))
            .collect();
        paths.sort();
        out.extend(paths.iter().filter_map(|p| std::fs::read(p).ok()));
    }
    out
}

/// The built-in seeds of the target called `name` (empty for an unknown
/// name).
pub fn builtin(name: &str) -> Vec<Vec<u8>> {
    match name {
        "parse" => packets(),
        "tracker" => random(2, 32, 6000),
        "tracker_frames" => capture_files()
            .iter()
            .map(|(_, b)| encode_frames(&frames_of(b)))
            .collect(),
        "capture" => {
            let mut out: Vec<Vec<u8>> = capture_files().into_iter().map(|(_, b)| b).collect();
            let some: Vec<Vec<u8>> = packets().into_iter().take(24).collect();
            out.push(pcapng(&some));
            let raw: Vec<Vec<u8>> = some.iter().map(|f| f[14.min(f.len())..].to_vec()).collect();
            out.push(pcap(LinkType::RawIp, &raw));
            out
        }
        "table" => random(5, 32, 3000),
        "ftp" => words(6, FTP_WORDS, 32),
        "reassembly" => random(7, 32, 1500),
        "pipeline_frames" => nat_scenarios()
            .iter()
            .filter_map(|(_, action, frames)| {
                let i = crate::PIPELINE_ACTIONS.iter().position(|a| a == action)?;
                let mut v = vec![i as u8];
                v.extend(encode_frames(frames));
                Some(v)
            })
            .collect(),
        "firewall_frames" => {
            // Each capture and NAT scenario under each policy in turn.
            let lists: Vec<Vec<Vec<u8>>> = capture_files()
                .iter()
                .map(|(_, b)| frames_of(b))
                .chain(nat_scenarios().into_iter().map(|(_, _, f)| f))
                .filter(|f| !f.is_empty())
                .collect();
            lists
                .iter()
                .enumerate()
                .map(|(i, frames)| {
                    let mut v = vec![(i % crate::FIREWALL_POLICIES.len()) as u8];
                    v.extend(encode_frames(frames));
                    v
                })
                .collect()
        }
        "policy_file" => policies(),
        "match_expr" => words(12, MATCH_WORDS, 64),
        "classifier_diff" => random(9, 32, 800),
        "ctl_request" => ctl_requests(),
        _ => Vec::new(),
    }
}

/// A policy file that uses most of the format.
pub const POLICY_TOML: &str = r#"[default]
action = "drop"
[[port]]
name = "vm1"
addresses = ["02:00:00:00:00:01 10.0.0.1 fd00::1"]
port_security = ["02:00:00:00:00:01 10.0.0.1 fd00::1/64", "02:00:00:00:00:11, 10.0.1.0/255.255.255.0"]
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
label = 7
log = true
severity = "notice"
meter = "acl-log"
nat = "src=198.51.100.1:1024-65535"
alg = "ftp"
[[acl]]
direction = "from-lport"
priority = 10
match = """
  inport == "vm1" && (udp.dst == 53 || icmp4.type == 8)
"""
action = "allow"
meter = "bits"
[meters.acl-log]
rate = 20
[meters.bits]
unit = "kbps"
rate = 64
burst = 128
fair = true
[copp]
reject = "acl-log"
"#;

/// The same format in JSON.
pub const POLICY_JSON: &str = r#"{"port": [{"name": "vm1", "addresses": ["02:00:00:00:00:01 10.0.0.1"]}],
 "port_groups": {"g": ["vm1"]},
 "acl": [{"direction": "to-lport", "priority": 1, "match": "outport == @g && !(tcp.src < 1024)", "action": "drop",
          "log": true, "meter": "m"}],
 "meters": {"m": {"rate": 5, "burst": 0}}, "copp": {"reject": "m"}}"#;

/// Every control command with typical arguments, one request a line, as
/// raw words (the body also sends each line as an `argv` request) and as
/// JSON.
pub fn ctl_requests() -> Vec<Vec<u8>> {
    let lines = [
        "dump-conntrack zone=5 -s",
        "list -p tcp --src 10.0.0.1 --dport 80 --state ESTABLISHED --format json",
        "list --zone 7 --mark 0",
        "count zone=5",
        "flush zone=5 ct_orig_src=10.0.0.1,ct_orig_dst=10.0.0.2,ct_nw_proto=6,ct_tp_src=1000,ct_tp_dst=80",
        "flush",
        "stats --format json",
        "set-maxconns 500",
        "get-maxconns",
        "ct-set-limits default=10 zone=5,limit=3",
        "ct-get-limits zone=5",
        "ct-del-limits zone=5",
        "ct-set-timeout zone=5 tcp_established=10 udp_first=5",
        "ct-get-timeout zone=5",
        "ct-del-timeout zone=5",
        "policy show",
        "policy counters",
        "policy reload",
        "events --format json",
        "ports",
        "fdb-show --format json",
        "fdb-flush",
        "version",
        "help",
    ];
    let mut out: Vec<Vec<u8>> = lines.iter().map(|l| l.as_bytes().to_vec()).collect();
    out.push(lines.join("\n").into_bytes());
    out.push(br#"{"argv":["list","-p","udp"]}"#.to_vec());
    out.push(br#"{"argv":[]}"#.to_vec());
    out.push(br#"{"argv":"count"}"#.to_vec());
    out
}
