//! Captures as they come from the wild, built here byte by byte: a frame
//! check sequence declared in the pcap header's link-type field or by a
//! pcapng interface, BSD loopback (`NULL`, `LOOP`), empty files.

use std::net::Ipv6Addr;
use std::path::{Path, PathBuf};

mod common;

use common::ctrack;

use ctrack_datapath::capture::CaptureReader;
use ctrack_wire::build::{Frame, L4};

/// Runs `ctrack replay --format ovs FILE` (with `extra` options first) and
/// returns its lines; it must succeed.
fn replay_ovs(file: &Path, extra: &[&str]) -> Vec<String> {
    let mut args = vec!["replay", "--format", "ovs"];
    args.extend_from_slice(extra);
    args.push(file.to_str().unwrap());
    let out = ctrack(&args);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect()
}

fn temp_dir(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("ctrack-captures-{}-{test}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A pcap file with the given link-type field, in either byte order; one
/// record a second.
fn pcap(big_endian: bool, link_field: u32, records: &[Vec<u8>]) -> Vec<u8> {
    let u32b = |v: u32| {
        if big_endian {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        }
    };
    let u16b = |v: u16| {
        if big_endian {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        }
    };
    let mut f = Vec::new();
    f.extend_from_slice(&u32b(0xa1b2_c3d4));
    f.extend_from_slice(&u16b(2));
    f.extend_from_slice(&u16b(4));
    f.extend_from_slice(&u32b(0));
    f.extend_from_slice(&u32b(0));
    f.extend_from_slice(&u32b(65535));
    f.extend_from_slice(&u32b(link_field));
    for (i, r) in records.iter().enumerate() {
        f.extend_from_slice(&u32b(1_700_000_000 + i as u32));
        f.extend_from_slice(&u32b(0));
        f.extend_from_slice(&u32b(r.len() as u32));
        f.extend_from_slice(&u32b(r.len() as u32));
        f.extend_from_slice(r);
    }
    f
}

/// A UDP exchange: the request, then its answer, as IP packets.
fn udp_v4(port: u16) -> [Vec<u8>; 2] {
    let (c, s) = ([10, 0, 0, 1], [10, 0, 0, 2]);
    [
        Frame::v4(c, s, L4::udp(port, 53, b"query")).ip_packet(),
        Frame::v4(s, c, L4::udp(53, port, b"answer")).ip_packet(),
    ]
}

fn udp_v6(port: u16) -> [Vec<u8>; 2] {
    let c: Ipv6Addr = "fd00::1".parse().unwrap();
    let s: Ipv6Addr = "fd00::2".parse().unwrap();
    [
        Frame::v6(c, s, L4::udp(port, 53, b"query")).ip_packet(),
        Frame::v6(s, c, L4::udp(53, port, b"answer")).ip_packet(),
    ]
}

fn with_header(header: [u8; 4], packet: &[u8]) -> Vec<u8> {
    [&header[..], packet].concat()
}

/// The frames of a pcap file, with its link type.
fn frames(path: &Path) -> Vec<(Vec<u8>, ctrack_wire::LinkType)> {
    let bytes = std::fs::read(path).unwrap();
    let mut r = CaptureReader::new(&bytes[..]).unwrap();
    let mut out = Vec::new();
    while let Some(p) = r.next_packet().unwrap() {
        out.push((p.data.to_vec(), p.link));
    }
    out
}

const FCS: [u8; 4] = [0xde, 0xad, 0xbe, 0xef];

#[test]
fn fcs_declared_in_the_pcap_link_type_is_cut_off() {
    let dir = temp_dir("fcs");
    // Ethernet whose frames end with a 4-byte FCS: libpcap's
    // LT_FCS_DATALINK_EXT(2) | LINKTYPE_ETHERNET.
    let field = 1 | 0x0400_0000 | (2 << 28);
    let c = [10, 0, 0, 1];
    let s = [10, 0, 0, 2];
    let eth = [
        Frame::v4(c, s, L4::udp(4000, 53, b"query")).build(),
        Frame::v4(s, c, L4::udp(53, 4000, b"answer")).build(),
    ];
    let records: Vec<Vec<u8>> = eth.iter().map(|f| [&f[..], &FCS].concat()).collect();
    let file = dir.join("fcs.pcap");
    std::fs::write(&file, pcap(false, field, &records)).unwrap();
    let out = dir.join("out.pcap");
    let lines = replay_ovs(&file, &["--write", out.to_str().unwrap()]);
    assert_eq!(lines, ["1: new|trk", "2: est|rpl|trk"]);
    // What leaves has no FCS.
    let written = frames(&out);
    assert_eq!(written.len(), 2);
    for (w, e) in written.iter().zip(&eth) {
        assert_eq!(&w.0, e);
        assert_eq!(w.1, ctrack_wire::LinkType::Ethernet);
    }

    // Raw IP with a 2-byte FCS (one 16-bit word).
    let field = 101 | 0x0400_0000 | (1 << 28);
    let records: Vec<Vec<u8>> = udp_v6(5000)
        .iter()
        .map(|p| [&p[..], &FCS[..2]].concat())
        .collect();
    std::fs::write(&file, pcap(false, field, &records)).unwrap();
    let lines = replay_ovs(&file, &["--write", out.to_str().unwrap()]);
    assert_eq!(lines, ["1: new|trk", "2: est|rpl|trk"]);
    assert_eq!(frames(&out)[0].0, udp_v6(5000)[0]);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bsd_loopback_null_in_either_byte_order() {
    let dir = temp_dir("null");
    let le = |af: u32| af.to_le_bytes();
    let mut records = Vec::new();
    let [q, a] = udp_v4(4001);
    records.push(with_header(le(2), &q));
    records.push(with_header(le(2), &a));
    // AF_INET6 as NetBSD/OpenBSD, FreeBSD and macOS number it.
    for (i, af) in [24u32, 28, 30].into_iter().enumerate() {
        let [q, a] = udp_v6(5000 + i as u16);
        records.push(with_header(le(af), &q));
        records.push(with_header(le(af), &a));
    }
    // Another family (AF_ISO): not IP.
    records.push(with_header(le(7), b"\x81\x01\x02\x03"));
    let file = dir.join("null.pcap");
    std::fs::write(&file, pcap(false, 0, &records)).unwrap();
    let lines = replay_ovs(&file, &[]);
    let pair = ["new|trk", "est|rpl|trk"];
    let want: Vec<String> = (0..8)
        .map(|i| format!("{}: {}", i + 1, pair[i % 2]))
        .chain(["9: inv|trk".to_string()])
        .collect();
    assert_eq!(lines, want);

    // The reason of the last, and the packets as written: raw IP.
    let out = ctrack(&["replay", "--format", "json", file.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8(out.stdout).unwrap();
    let ninth: serde_json::Value = serde_json::from_str(text.lines().nth(8).unwrap()).unwrap();
    assert_eq!(ninth["invalid"], "not_ip");
    let written = dir.join("out.pcap");
    replay_ovs(&file, &["--write", written.to_str().unwrap()]);
    let w = frames(&written);
    assert_eq!(w[0], (q.clone(), ctrack_wire::LinkType::RawIp));
    assert_eq!(w[2].0, udp_v6(5000)[0]);

    // A capture from a big-endian host: the file and the family in its
    // order.
    let records: Vec<Vec<u8>> = udp_v4(4002)
        .iter()
        .map(|p| with_header(2u32.to_be_bytes(), p))
        .collect();
    std::fs::write(&file, pcap(true, 0, &records)).unwrap();
    assert_eq!(replay_ovs(&file, &[]), ["1: new|trk", "2: est|rpl|trk"]);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bsd_loopback_loop_in_network_order() {
    let dir = temp_dir("loop");
    let be = |af: u32| af.to_be_bytes();
    let mut records = Vec::new();
    for p in udp_v4(4003) {
        records.push(with_header(be(2), &p));
    }
    for p in udp_v6(5003) {
        records.push(with_header(be(24), &p));
    }
    let file = dir.join("loop.pcap");
    std::fs::write(&file, pcap(false, 108, &records)).unwrap();
    assert_eq!(
        replay_ovs(&file, &[]),
        [
            "1: new|trk",
            "2: est|rpl|trk",
            "3: new|trk",
            "4: est|rpl|trk"
        ]
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A pcapng file: one interface of `linktype` with `if_fcslen` set to
/// `fcslen` (bits), and an enhanced packet block per record.
fn pcapng(linktype: u16, fcslen: u8, records: &[Vec<u8>]) -> Vec<u8> {
    let mut f = Vec::new();
    // Section header block.
    for v in [
        0x0a0d_0d0a,
        28,
        0x1a2b_3c4d,
        1,
        0xffff_ffff,
        0xffff_ffff,
        28,
    ] {
        f.extend_from_slice(&u32::to_le_bytes(v));
    }
    // Interface description block with if_fcslen (13) and opt_endofopt.
    let idb: [u32; 8] = [
        1,
        32,
        u32::from(linktype),
        0,
        13 | (1 << 16),
        u32::from(fcslen),
        0,
        32,
    ];
    for v in idb {
        f.extend_from_slice(&v.to_le_bytes());
    }
    for (i, r) in records.iter().enumerate() {
        let pad = (4 - r.len() % 4) % 4;
        let len = 32 + (r.len() + pad) as u32;
        for v in [
            6,
            len,
            0,
            0,
            i as u32 * 1_000_000,
            r.len() as u32,
            r.len() as u32,
        ] {
            f.extend_from_slice(&u32::to_le_bytes(v));
        }
        f.extend_from_slice(r);
        f.extend(std::iter::repeat_n(0, pad));
        f.extend_from_slice(&len.to_le_bytes());
    }
    f
}

#[test]
fn fcs_declared_by_a_pcapng_interface_is_cut_off() {
    let dir = temp_dir("pcapng");
    let c = [10, 0, 0, 1];
    let s = [10, 0, 0, 2];
    let eth = [
        Frame::v4(c, s, L4::udp(4004, 53, b"query")).build(),
        Frame::v4(s, c, L4::udp(53, 4004, b"answer")).build(),
    ];
    let records: Vec<Vec<u8>> = eth.iter().map(|f| [&f[..], &FCS].concat()).collect();
    let file = dir.join("fcs.pcapng");
    std::fs::write(&file, pcapng(1, 32, &records)).unwrap();
    let out = dir.join("out.pcap");
    let lines = replay_ovs(&file, &["--write", out.to_str().unwrap()]);
    assert_eq!(lines, ["1: new|trk", "2: est|rpl|trk"]);
    assert_eq!(frames(&out)[1].0, eth[1]);
    // BSD loopback on pcapng.
    let records: Vec<Vec<u8>> = udp_v4(4005)
        .iter()
        .map(|p| with_header(2u32.to_le_bytes(), p))
        .collect();
    std::fs::write(&file, pcapng(0, 0, &records)).unwrap();
    assert_eq!(replay_ovs(&file, &[]), ["1: new|trk", "2: est|rpl|trk"]);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn an_empty_file_says_it_is_empty() {
    let dir = temp_dir("empty");
    let file = dir.join("empty.pcap");
    std::fs::write(&file, b"").unwrap();
    let out = ctrack(&["replay", file.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("empty.pcap: empty file, not a pcap or pcapng capture"),
        "{err}"
    );
    assert!(!err.contains("truncated"), "{err}");
    // Half a header.
    let full = pcap(false, 1, &[]);
    std::fs::write(&file, &full[..12]).unwrap();
    let out = ctrack(&["replay", file.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains("file header cut short"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn an_unsupported_link_type_is_named() {
    let dir = temp_dir("link");
    let file = dir.join("wifi.pcap");
    // 802.11 with an FCS declared: named by its link type alone.
    std::fs::write(&file, pcap(false, 105 | 0x0400_0000 | (2 << 28), &[])).unwrap();
    let out = ctrack(&["replay", file.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.contains("unsupported link type 105 at byte offset 0"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
