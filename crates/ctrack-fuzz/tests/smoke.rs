//! Bounded runs of the fuzz bodies, for CI: seeded random inputs and
//! mutations of the packets and files in `examples/`.
//!
//! `CTRACK_FUZZ_ITERS` scales every run (default 1; e.g. 100 for a long run
//! by hand); `CTRACK_FUZZ_SEED` changes the seed. For coverage-guided
//! fuzzing use the cargo-fuzz targets in `fuzz/` (see the README).

use std::path::Path;

use ctrack_datapath::capture::CaptureReader;

/// splitmix64: a tiny, well-mixed PRNG, so the runs are reproducible from
/// their seed without another dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }

    fn bytes(&mut self, len: usize) -> Vec<u8> {
        (0..len).map(|_| self.next() as u8).collect()
    }

    /// A copy of `input` with a few random edits: byte flips, byte
    /// overwrites with interesting values, truncation, insertion, removal.
    fn mutate(&mut self, input: &[u8]) -> Vec<u8> {
        let mut v = input.to_vec();
        for _ in 0..1 + self.below(4) {
            match self.below(6) {
                0 if !v.is_empty() => {
                    let i = self.below(v.len());
                    v[i] ^= 1 << self.below(8);
                }
                1 if !v.is_empty() => {
                    let i = self.below(v.len());
                    v[i] = [0, 1, 0x7f, 0x80, 0xff, 0x40, 0x05, 0x45][self.below(8)];
                }
                2 => v.truncate(self.below(v.len() + 1)),
                3 => {
                    let i = self.below(v.len() + 1);
                    let n = 1 + self.below(8);
                    let b = self.bytes(n);
                    v.splice(i..i, b);
                }
                4 if !v.is_empty() => {
                    let i = self.below(v.len());
                    let n = 1 + self.below(8).min(v.len() - i - 1);
                    v.drain(i..i + n);
                }
                _ => {
                    if v.len() >= 2 {
                        let i = self.below(v.len() - 1);
                        v[i..i + 2].copy_from_slice(&[0xff, 0xff]);
                    }
                }
            }
        }
        v
    }
}

fn iters() -> usize {
    std::env::var("CTRACK_FUZZ_ITERS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1)
}

fn rng(salt: u64) -> Rng {
    let seed = std::env::var("CTRACK_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5eed);
    Rng(seed ^ salt)
}

fn examples() -> Vec<(String, Vec<u8>)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .expect("examples/")
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "pcap" || x == "pcapng"))
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|p| (p.display().to_string(), std::fs::read(&p).unwrap()))
        .collect()
}

/// Every packet of every bundled capture.
fn seed_packets() -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for (name, bytes) in examples() {
        let mut r = CaptureReader::new(&bytes[..]).unwrap_or_else(|e| panic!("{name}: {e}"));
        while let Some(p) = r.next_packet().unwrap_or_else(|e| panic!("{name}: {e}")) {
            out.push(p.data.to_vec());
        }
    }
    assert!(out.len() > 300, "the bundled captures are the seed corpus");
    out
}

#[test]
fn parse_seeds_and_mutations() {
    let seeds = seed_packets();
    let mut r = rng(1);
    for s in &seeds {
        ctrack_fuzz::parse(s);
    }
    for _ in 0..iters() * 60_000 {
        let s = &seeds[r.below(seeds.len())];
        let m = r.mutate(s);
        ctrack_fuzz::parse(&m);
    }
    for _ in 0..iters() * 5_000 {
        let len = r.below(200);
        ctrack_fuzz::parse(&r.bytes(len));
    }
}

#[test]
fn tracker_operation_sequences() {
    let mut r = rng(2);
    for _ in 0..iters() * 1_500 {
        let len = r.below(6_000);
        ctrack_fuzz::tracker(&r.bytes(len));
    }
}

#[test]
fn tracker_on_mutated_real_traffic() {
    let seeds = seed_packets();
    let mut r = rng(3);
    // The real traffic in order, then mutated copies in random order.
    ctrack_fuzz::tracker_frames(&seeds);
    for _ in 0..iters() * 60 {
        let frames: Vec<Vec<u8>> = (0..128)
            .map(|_| {
                let s = &seeds[r.below(seeds.len())];
                if r.below(3) == 0 {
                    s.clone()
                } else {
                    r.mutate(s)
                }
            })
            .collect();
        ctrack_fuzz::tracker_frames(&frames);
    }
}

#[test]
fn capture_files_mutated() {
    let files = examples();
    let mut r = rng(4);
    for (_, bytes) in &files {
        ctrack_fuzz::capture(bytes);
        for _ in 0..iters() * 200 {
            ctrack_fuzz::capture(&r.mutate(bytes));
        }
        for _ in 0..iters() * 50 {
            let cut = r.below(bytes.len());
            ctrack_fuzz::capture(&bytes[..cut]);
        }
    }
    for _ in 0..iters() * 2_000 {
        let len = r.below(512);
        let mut b = r.bytes(len);
        // Give some a valid magic so that record parsing is reached.
        if r.below(2) == 0 && b.len() >= 4 {
            b[..4].copy_from_slice(&[0xd4, 0xc3, 0xb2, 0xa1]);
        }
        ctrack_fuzz::capture(&b);
    }
}

#[test]
fn table_against_a_map() {
    let mut r = rng(5);
    for _ in 0..iters() * 3_000 {
        let len = r.below(3_000);
        ctrack_fuzz::table(&r.bytes(len));
    }
}

#[test]
fn ftp_reader_on_random_and_command_like_text() {
    let mut r = rng(6);
    let words: [&[u8]; 8] = [
        b"PORT 10,0,0,1,4,1\r\n",
        b"EPRT |1|10.0.0.1|1025|\r\n",
        b"EPRT |2|fd00::1|1025|\r\n",
        b"227 Entering Passive Mode (10,0,0,1,4,1).\r\n",
        b"229 Entering Extended Passive Mode (|||1025|)\r\n",
        b"USER anonymous\r\n",
        b"PORT ",
        b"\r\n",
    ];
    for _ in 0..iters() * 3_000 {
        let n = r.below(16);
        let mut data = r.bytes(n);
        for _ in 0..r.below(12) {
            let w = words[r.below(words.len())];
            if r.below(3) == 0 {
                data.extend_from_slice(&r.mutate(w));
            } else {
                data.extend_from_slice(w);
            }
        }
        ctrack_fuzz::ftp(&data);
    }
}

#[test]
fn reassembler_on_cut_repeated_and_overlapping_fragments() {
    let mut r = rng(7);
    for _ in 0..iters() * 2_000 {
        let len = r.below(1_500);
        ctrack_fuzz::reassembly(&r.bytes(len));
    }
}

#[test]
fn translating_pipeline_on_mutated_real_traffic() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/nat");
    let list = std::fs::read_to_string(dir.join("scenarios.tsv")).unwrap();
    let mut r = rng(8);
    for line in list.lines() {
        let (name, action) = line.split_once('\t').unwrap();
        let bytes = std::fs::read(dir.join(format!("{name}.in.pcap"))).unwrap();
        let mut rd = CaptureReader::new(&bytes[..]).unwrap();
        let mut frames = Vec::new();
        while let Some(p) = rd.next_packet().unwrap() {
            frames.push(p.data.to_vec());
        }
        ctrack_fuzz::pipeline_frames(&frames, action);
        for _ in 0..iters() * 4 {
            let m: Vec<Vec<u8>> = frames
                .iter()
                .map(|f| {
                    if r.below(4) == 0 {
                        r.mutate(f)
                    } else {
                        f.clone()
                    }
                })
                .collect();
            ctrack_fuzz::pipeline_frames(&m, action);
        }
    }
}

const POLICY_TOML: &str = r#"[default]
action = "drop"
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
label = 7
nat = "src=198.51.100.1:1024-65535"
alg = "ftp"
[[acl]]
direction = "from-lport"
priority = 10
match = """
  inport == "vm1" && (udp.dst == 53 || icmp4.type == 8)
"""
action = "allow"
"#;

const POLICY_JSON: &str = r#"{"port": [{"name": "vm1", "addresses": ["02:00:00:00:00:01 10.0.0.1"]}],
 "port_groups": {"g": ["vm1"]},
 "acl": [{"direction": "to-lport", "priority": 1, "match": "outport == @g && !(tcp.src < 1024)", "action": "drop"}]}"#;

#[test]
fn policy_files_mutated() {
    let mut r = rng(11);
    for seed in [POLICY_TOML, POLICY_JSON] {
        ctrack_fuzz::policy_file(seed.as_bytes());
        for _ in 0..iters() * 400 {
            ctrack_fuzz::policy_file(&r.mutate(seed.as_bytes()));
        }
    }
    for _ in 0..iters() * 200 {
        let n = r.below(64);
        ctrack_fuzz::policy_file(&r.bytes(n));
    }
}

#[test]
fn matches_from_words_and_bytes() {
    let mut r = rng(12);
    let words: &[&[u8]] = &[
        b"tcp.dst",
        b"ip4.src",
        b"ip6.dst",
        b"inport",
        b"outport",
        b"eth.src",
        b"vlan.vid",
        b"icmp4.type",
        b"ip.proto",
        b"tcp",
        b"udp",
        b"ip4",
        b"nd",
        b"vlan.present",
        b"==",
        b"!=",
        b"<",
        b"<=",
        b">",
        b">=",
        b"&&",
        b"||",
        b"!",
        b"(",
        b")",
        b"{",
        b"}",
        b",",
        b"80",
        b"0x10/0x1f",
        b"10.0.0.0/8",
        b"fd00::/64",
        b"02:00:00:00:00:01",
        b"\"vm1\"",
        b"\"vm9\"",
        b"$clients",
        b"$web_ip4",
        b"@web",
        b"1",
        b"0",
        b" ",
        b"/* c */",
        b"65536",
    ];
    for _ in 0..iters() * 5_000 {
        let mut data = Vec::new();
        for _ in 0..r.below(14) {
            let w = words[r.below(words.len())];
            if r.below(8) == 0 {
                data.extend_from_slice(&r.mutate(w));
            } else {
                data.extend_from_slice(w);
            }
            data.push(b' ');
        }
        ctrack_fuzz::match_expr(&data);
    }
    for _ in 0..iters() * 500 {
        let n = r.below(32);
        ctrack_fuzz::match_expr(&r.bytes(n));
    }
}

#[test]
fn classifier_against_a_linear_scan() {
    let mut r = rng(9);
    for _ in 0..iters() * 200 {
        let len = r.below(800);
        ctrack_fuzz::classifier_diff(&r.bytes(len));
    }
}
