//! Real traffic through a Linux router that translates (nftables snat and
//! dnat, the kernel's FTP and TFTP helpers, fragments): what entered the
//! router, replayed through `ctrack replay --ct ACTION --write`, must come
//! out as what left it, packet for packet and byte for byte, apart from what
//! the router does as a router (its link-layer header, the TTL or hop limit
//! it decrements and the IPv4 header checksum that follows).
//!
//! The captures and their actions are made by `scripts/make-nat-captures.sh`.

use std::path::Path;

mod common;

use common::root;
use std::process::Command;

/// The IP packets of a pcap file (Ethernet), with the router's own changes
/// blanked.
fn packets(path: &Path) -> Vec<Vec<u8>> {
    let f = std::fs::File::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut r = pcap_file::pcap::PcapReader::new(f).unwrap();
    let mut out = Vec::new();
    while let Some(p) = r.next_packet() {
        let p = p.unwrap();
        let mut ip = p.data[14..].to_vec();
        match ip[0] >> 4 {
            4 => {
                ip[8] = 0;
                ip[10] = 0;
                ip[11] = 0;
            }
            6 => {
                ip[7] = 0;
                // Linux gives the fragments it sends on a fresh
                // identification (ctrack keeps the one they came with).
                if ip[6] == 44 && ip.len() >= 48 {
                    ip[44..48].fill(0);
                }
            }
            _ => {}
        }
        out.push(ip);
    }
    out
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

#[test]
fn replay_turns_what_entered_linux_into_what_left_it() {
    let dir = root().join("examples/nat");
    let list = std::fs::read_to_string(dir.join("scenarios.tsv")).unwrap();
    let tmp = std::env::temp_dir().join(format!("ctrack-nat-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).unwrap();
    let mut failures = Vec::new();
    for line in list.lines().filter(|l| !l.trim().is_empty()) {
        let (name, action) = line.split_once('\t').expect("NAME<TAB>ACTION");
        let written = tmp.join(format!("{name}.pcap"));
        let input = dir.join(format!("{name}.in.pcap"));
        let out = Command::new(env!("CARGO_BIN_EXE_ctrack"))
            .args(["replay", "--format", "ovs", "--ct", action, "--write"])
            .arg(&written)
            .arg(&input)
            .output()
            .expect("run ctrack");
        assert!(
            out.status.success(),
            "{name}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        // Packets of opposite directions may cross inside the router (one
        // enters before the other leaves): compare each direction's
        // packets in order.
        let by_direction = |mut v: Vec<Vec<u8>>| {
            v.sort_by_key(|p| match p[0] >> 4 {
                4 => p[12..20].to_vec(),
                _ => p[8..40].to_vec(),
            });
            v
        };
        let got = by_direction(packets(&written));
        let want = by_direction(packets(&dir.join(format!("{name}.out.pcap"))));
        let mut bad = Vec::new();
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            if g != w {
                let at = g.iter().zip(w).take_while(|(a, b)| a == b).count();
                let from = at.saturating_sub(8);
                bad.push(format!(
                    "  packet {} (lengths {} and {}), from byte {from}:\n    ctrack {}\n    linux  {}",
                    i + 1,
                    g.len(),
                    w.len(),
                    hex(&g[from.min(g.len())..(at + 24).min(g.len())]),
                    hex(&w[from.min(w.len())..(at + 24).min(w.len())])
                ));
            }
        }
        if got.len() != want.len() {
            bad.push(format!(
                "  {} packets written, Linux sent {}",
                got.len(),
                want.len()
            ));
        }
        if !bad.is_empty() {
            bad.truncate(4);
            failures.push(format!("{name} ({action}):\n{}", bad.join("\n")));
        }
    }
    let _ = std::fs::remove_dir_all(&tmp);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
