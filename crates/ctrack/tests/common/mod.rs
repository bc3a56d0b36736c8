//! What the command's end-to-end tests share: the repository root and
//! running the built `ctrack` binary from it.

#![allow(dead_code, unreachable_pub)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use ctrack_wire::build::{Frame, L4};

/// The repository's root (the bundled captures' paths are relative to it).
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Runs the built `ctrack` with `args`, from the repository's root.
pub fn ctrack(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ctrack"))
        .args(args)
        .current_dir(root())
        .output()
        .expect("run ctrack")
}

/// Whether this process's effective user is root (the tests with network
/// namespaces need it).
pub fn root_user() -> bool {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|l| l.split_whitespace().nth(1))
        == Some("0")
}

/// The first of `tools` that is not on the `PATH`, if one is missing.
pub fn missing_tool<'a>(tools: &[&'a str]) -> Option<&'a str> {
    tools.iter().copied().find(|tool| {
        !Command::new("sh")
            .args(["-c", &format!("command -v {tool}")])
            .stdout(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    })
}

/// The time of the first packet of the captures the tests write:
/// 2023-11-14 22:13:20 UTC.
pub const T0: u64 = 1_700_000_000;

/// A file of this test's own under the temporary folder, removed when
/// dropped.
pub struct Temp(pub PathBuf);

impl Temp {
    pub fn new(name: &str) -> Temp {
        Temp(std::env::temp_dir().join(format!("ctrack-test-{}-{name}", std::process::id())))
    }

    pub fn path(&self) -> &str {
        self.0.to_str().expect("UTF-8 path")
    }
}

impl Drop for Temp {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// A frame from port `a` to port `b` (`a_to_b`) or back.
pub fn frame(a_to_b: bool, l4: L4) -> Frame {
    let (a, b) = ([10, 0, 0, 1], [10, 0, 0, 2]);
    let (ma, mb) = ([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2]);
    let mut f = if a_to_b {
        Frame::v4(a, b, l4)
    } else {
        Frame::v4(b, a, l4)
    };
    (f.eth_src, f.eth_dst) = if a_to_b { (ma, mb) } else { (mb, ma) };
    f
}

/// A nanosecond pcap of Ethernet frames: (time in nanoseconds from
/// [`T0`], the bytes captured, the frame's length on the wire).
pub fn pcap(records: &[(u64, Vec<u8>, u32)]) -> Vec<u8> {
    let mut out = Vec::new();
    for w in [0xa1b2_3c4du32, 0x0004_0002, 0, 0, 65535, 1] {
        out.extend_from_slice(&w.to_le_bytes());
    }
    for (t, data, orig) in records {
        let ns = T0 * 1_000_000_000 + t;
        let head = [
            (ns / 1_000_000_000) as u32,
            (ns % 1_000_000_000) as u32,
            data.len() as u32,
            *orig,
        ];
        for w in head {
            out.extend_from_slice(&w.to_le_bytes());
        }
        out.extend_from_slice(data);
    }
    out
}

/// Each frame whole, at its time in seconds from [`T0`].
pub fn whole(frames: &[(u64, Frame)]) -> Vec<(u64, Vec<u8>, u32)> {
    frames
        .iter()
        .map(|(s, f)| {
            let b = f.build();
            let n = b.len() as u32;
            (s * 1_000_000_000, b, n)
        })
        .collect()
}

/// A capture's record of a frame from port `a` to port `b` whose Ethernet
/// padding the capture left out: at time 0, its 43 bytes captured of the
/// 60 on the wire.
pub fn cut_frame() -> (u64, Vec<u8>, u32) {
    let mut f = frame(true, L4::udp(1000, 53, b"q"));
    f.padding = 17;
    let bytes = f.build();
    assert_eq!(bytes.len(), 60);
    (0, bytes[..43].to_vec(), 60)
}

/// The records of a pcap file: bytes captured and length on the wire.
pub fn read_pcap(path: &Path) -> Vec<(Vec<u8>, u32)> {
    let file = std::fs::File::open(path).expect("open the written pcap");
    let mut r = pcap_file::pcap::PcapReader::new(file).expect("a pcap");
    let mut out = Vec::new();
    while let Some(p) = r.next_packet() {
        let p = p.expect("a record");
        out.push((p.data.into_owned(), p.orig_len));
    }
    out
}

/// A UDP datagram from port `a` to port `b`, 1000 to `dport`, of 2,400
/// bytes of data, in two fragments of identification `ident`: the first
/// of 1,260 bytes of IP packet (over the 1,200-byte minimum of every
/// fragment but the last), then the rest.
pub fn two_fragments(dport: u16, ident: u16) -> [Frame; 2] {
    let ip = frame(true, L4::udp(1000, dport, &[7u8; 2400])).ip_packet();
    let (head, tail) = ip[20..].split_at(1240);
    let part = |offset: usize, more: bool, body: &[u8]| {
        let payload = body.to_vec();
        let mut f = frame(true, L4::Raw { proto: 17, payload });
        (f.more_frags, f.frag_offset, f.ident) = (more, offset as u16, ident);
        f
    };
    [part(0, true, head), part(head.len(), false, tail)]
}
