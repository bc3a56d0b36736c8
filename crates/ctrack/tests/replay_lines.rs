//! `ctrack replay` without a policy, on captures written here: what each
//! format says of a fragment held, refused or expired, a datagram
//! completed, a translated packet, a reply, a zone, a refused commit, and
//! the human format's closing table; `--write` keeping what a capture
//! cut.

mod common;

use common::{Temp, ctrack, cut_frame, frame, pcap, read_pcap, two_fragments, whole};
use ctrack_wire::build::{Frame, L4};
use serde_json::{Value, json};

/// Replays `records` with `args`; standard output.
fn replay(name: &str, records: &[(u64, Vec<u8>, u32)], args: &[&str]) -> String {
    let cap = Temp::new(&format!("lines-{name}.pcap"));
    std::fs::write(&cap.0, pcap(records)).expect("write the capture");
    let mut argv = vec!["replay"];
    argv.extend_from_slice(args);
    argv.push(cap.path());
    let out = ctrack(&argv);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn json(text: &str) -> Vec<Value> {
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}")))
        .collect()
}

/// A first fragment of a UDP datagram from a to b (more follow), of
/// `len` bytes of UDP payload, identification `id`.
fn first_fragment(len: usize, id: u16) -> Frame {
    let mut f = frame(true, L4::udp(1000, 53, &vec![7u8; len]));
    (f.more_frags, f.ident) = (true, id);
    f
}

/// A fragment under the minimum is refused and tracked as it is
/// (invalid, `inv|trk`, as Open vSwitch's test tool has it); a fragment
/// that overlaps one held before drops their datagram (`inv|trk` in the
/// `ovs` format for both: the held one's number comes back with it); a
/// held one's datagram that expires is reported at the packet whose time
/// drops it, with the held fragment's number, in each format. The human
/// format's closing summary counts the reassembler's work whenever it
/// saw a fragment.
#[test]
fn fragments_refused_held_overlapping_and_expired() {
    let mut overlap = first_fragment(1232, 2);
    overlap.frag_offset = 8;
    let records = whole(&[
        (0, first_fragment(400, 1)),
        (1, first_fragment(1232, 2)),
        (2, overlap),
        (3, first_fragment(1232, 4)),
        (100, frame(true, L4::udp(2000, 53, b"q"))),
    ]);
    let ovs = replay("frag-ovs", &records, &["--format", "ovs"]);
    assert_eq!(ovs, "1: inv|trk\n2: 0\n3: inv|trk\n4: 0\n5: new|trk\n");
    let objects = json(&replay("frag-json", &records, &["--format", "json"]));
    let fields = |i: usize, keys: &[&str]| -> Value {
        Value::Array(keys.iter().map(|k| objects[i][*k].clone()).collect())
    };
    assert_eq!(
        fields(0, &["packet", "state", "invalid"]),
        json!([1, "inv|trk", "fragment"])
    );
    assert_eq!(fields(1, &["packet", "held"]), json!([2, true]));
    assert_eq!(fields(2, &["packet", "dropped"]), json!([3, "overlap"]));
    assert_eq!(fields(3, &["dropped", "reason"]), json!([2, "overlap"]));
    assert_eq!(fields(4, &["packet", "held"]), json!([4, true]));
    assert_eq!(fields(5, &["packet", "state"]), json!([5, "new|trk"]));
    assert_eq!(fields(6, &["dropped", "reason"]), json!([4, "expired"]));
    let human = replay("frag-human", &records, &[]);
    for line in [
        "(fragment dropped: overlap)",
        "packet 2 dropped (overlap)",
        "packet 4 dropped (expired)",
    ] {
        assert!(human.contains(line), "{line}: {human}");
    }
    assert!(
        human.contains("0 fragments reassembled into 0 datagrams, 1 expired, 1 too small"),
        "{human}"
    );
    // A capture whose only fragment is refused still gets the summary.
    let human = replay("frag-small", &whole(&[(0, first_fragment(400, 3))]), &[]);
    assert!(
        human.contains("0 fragments reassembled into 0 datagrams, 1 too small"),
        "{human}"
    );
}

/// A datagram completed by its last fragment: the human format names
/// its packets under the last one's line, the JSON its `fragments`.
#[test]
fn a_datagram_completed_names_its_fragments() {
    let [first, last] = two_fragments(53, 9);
    let records = whole(&[(0, first), (1, last)]);
    let human = replay("dgram", &records, &[]);
    assert!(human.contains("datagram of packets 1, 2"), "{human}");
    let objects = json(&replay("dgram-json", &records, &["--format", "json"]));
    assert_eq!(objects[1]["fragments"], json!([1, 2]), "{objects:?}");
    assert_eq!(objects[1]["state"], "new|trk");
}

/// A translated packet: the human format shows it as it leaves under its
/// line (`->`), the JSON in `out`; an untranslated one has neither. A
/// reply is marked as one, the zone shown when not 0.
#[test]
fn translation_replies_and_zones_in_the_lines() {
    // The reply comes back to the translated address.
    let reply = Frame::v4([10, 0, 0, 2], [192, 0, 2, 9], L4::udp(53, 1000, b"a"));
    let records = whole(&[(0, frame(true, L4::udp(1000, 53, b"q"))), (1, reply)]);
    let ct = ["--ct", "commit,zone=5,nat(src=192.0.2.9)"];
    let human = replay("nat", &records, &ct);
    let lines: Vec<&str> = human.lines().collect();
    let at = lines
        .iter()
        .position(|l| l.trim_start().starts_with("1 "))
        .expect("packet 1");
    assert!(lines[at].ends_with("#1 zone=5"), "{}", lines[at]);
    assert!(
        lines[at + 1]
            .trim_start()
            .starts_with("-> 192.0.2.9:1000 > 10.0.0.2:53 udp"),
        "{human}"
    );
    assert!(lines[at + 2].ends_with("#1 reply zone=5"), "{human}");
    let objects = json(&replay(
        "nat-json",
        &records,
        &[&ct[..], &["--format", "json"]].concat(),
    ));
    let out = objects[0]["out"].as_str().unwrap_or_default();
    assert!(out.starts_with("192.0.2.9:1000 > 10.0.0.2:53 udp"), "{out}");
    let records = whole(&[
        (0, frame(true, L4::udp(1000, 53, b"q"))),
        (1, frame(false, L4::udp(53, 1000, b"a"))),
    ]);
    let plain = json(&replay("plain-json", &records, &["--format", "json"]));
    assert!(plain[0].get("out").is_none(), "{:?}", plain[0]);
    assert_eq!(plain[1]["dir"], "reply");
}

/// A commit the table has no room for is refused and says so; the human
/// format's table is headed by the capture's span.
#[test]
fn a_refused_commit_and_the_span() {
    let records = whole(&[
        (0, frame(true, L4::udp(1000, 53, b"q"))),
        (1, frame(false, L4::udp(53, 1000, b"a"))),
        (250, frame(true, L4::udp(1001, 53, b"q"))),
        (250, frame(true, L4::udp(1002, 53, b"q"))),
    ]);
    let human = replay("full", &records, &["--max-conns", "1", "--clock", "fixed"]);
    assert!(human.contains("new|trk (table full)"), "{human}");
    assert!(
        human.contains("connections at 250.000000 s (1):"),
        "{human}"
    );
}

/// `--write` writes each packet as it leaves with its length on the wire:
/// a frame whose Ethernet padding the capture left out keeps it.
#[test]
fn write_keeps_a_cut_packets_length() {
    let cut = cut_frame();
    let out = Temp::new("lines-cut-out.pcap");
    replay("cut", std::slice::from_ref(&cut), &["--write", out.path()]);
    assert_eq!(read_pcap(&out.0), [(cut.1, cut.2)]);
}

/// `--write` refuses a file the replay reads (the capture, under another
/// name too, or the policy), which creating the output would empty before
/// it is read, and leaves it as it was; a directory is no capture.
#[test]
fn write_refuses_a_file_the_replay_reads() {
    let cap = Temp::new("lines-self.pcap");
    let bytes = pcap(&whole(&[(0, frame(true, L4::udp(1000, 53, b"q")))]));
    std::fs::write(&cap.0, &bytes).expect("write the capture");
    let link = Temp::new("lines-self-link.pcap");
    std::fs::hard_link(&cap.0, &link.0).expect("a hard link");
    let policy = Temp::new("lines-self.toml");
    let text = "[default]\naction = \"allow\"\n";
    std::fs::write(&policy.0, text).expect("write the policy");
    let refused = |argv: &[&str], says: &str| {
        let out = ctrack(argv);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{argv:?}: {err}");
        assert!(err.contains(says), "{argv:?}: {err}");
        assert!(!err.contains("panicked"), "{err}");
    };
    refused(
        &["replay", "--write", cap.path(), cap.path()],
        "that is the capture",
    );
    refused(
        &["replay", "--write", link.path(), cap.path()],
        "that is the capture",
    );
    refused(
        &[
            "replay",
            "--policy",
            policy.path(),
            "--write",
            policy.path(),
            cap.path(),
        ],
        "that is the policy",
    );
    assert_eq!(std::fs::read(&cap.0).expect("the capture"), bytes);
    assert_eq!(
        std::fs::read_to_string(&policy.0).expect("the policy"),
        text
    );
    let dir = std::env::temp_dir();
    refused(
        &["replay", dir.to_str().expect("UTF-8")],
        "a directory, not a pcap or pcapng capture",
    );
}

/// A pcapng capture of an Ethernet interface and a raw-IP one (block by
/// block: a section header, two interface descriptions, an enhanced
/// packet block for each frame).
fn pcapng_two_links(eth: &[u8], raw: &[u8]) -> Vec<u8> {
    let block = |kind: u32, body: &[u8]| {
        let mut b = body.to_vec();
        b.resize(body.len().div_ceil(4) * 4, 0);
        let len = (b.len() + 12) as u32;
        let mut out = kind.to_le_bytes().to_vec();
        out.extend_from_slice(&len.to_le_bytes());
        out.extend_from_slice(&b);
        out.extend_from_slice(&len.to_le_bytes());
        out
    };
    let mut shb = 0x1A2B_3C4Du32.to_le_bytes().to_vec();
    shb.extend_from_slice(&[1, 0, 0, 0]);
    shb.extend_from_slice(&(-1i64).to_le_bytes());
    let idb = |link: u16| {
        let mut b = link.to_le_bytes().to_vec();
        b.extend_from_slice(&[0, 0]);
        b.extend_from_slice(&65535u32.to_le_bytes());
        b
    };
    let epb = |iface: u32, usecs: u32, data: &[u8]| {
        let mut b = iface.to_le_bytes().to_vec();
        b.extend_from_slice(&0u32.to_le_bytes());
        b.extend_from_slice(&usecs.to_le_bytes());
        b.extend_from_slice(&(data.len() as u32).to_le_bytes());
        b.extend_from_slice(&(data.len() as u32).to_le_bytes());
        b.extend_from_slice(data);
        b
    };
    [
        block(0x0A0D_0D0A, &shb),
        block(1, &idb(1)),
        block(1, &idb(101)),
        block(6, &epb(0, 1, eth)),
        block(6, &epb(1, 2, raw)),
    ]
    .concat()
}

/// A capture that mixes link types replays whole, but its `--write`
/// stops at the first packet of a link type other than the file's, in
/// words, rather than writing bytes the file's type would misread.
#[test]
fn write_refuses_a_second_link_type() {
    let eth = frame(true, L4::udp(1000, 53, b"q")).build();
    let raw = eth[14..].to_vec();
    let cap = Temp::new("lines-two-links.pcapng");
    std::fs::write(&cap.0, pcapng_two_links(&eth, &raw)).expect("write the capture");
    let out = ctrack(&["replay", "--format", "json", cap.path()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines = json(&String::from_utf8_lossy(&out.stdout));
    let packets: Vec<&Value> = lines.iter().filter(|l| l.get("packet").is_some()).collect();
    assert_eq!(packets.len(), 2, "{lines:?}");
    // The raw-IP packet is the Ethernet one's connection.
    assert_eq!(packets[1]["conn"], 1, "{lines:?}");
    let dst = Temp::new("lines-two-links-out.pcap");
    let out = ctrack(&["replay", "--write", dst.path(), cap.path()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains(&format!(
            "--write {}: packet 2 is raw IP, where the file is Ethernet (the first packet's)",
            dst.path()
        )),
        "{err}"
    );
}

/// A capture whose snapshot length cut packets inside their IP datagram:
/// they are invalid (as in Open vSwitch, which reads only the bytes
/// captured), and the replay says why once, on standard error, with a
/// policy too; a packet whose cut took only its Ethernet padding is
/// tracked as a whole one and draws no note.
#[test]
fn packets_a_snapshot_length_cut_are_told_of() {
    let whole_frame = frame(true, L4::udp(1000, 53, &[7; 40])).build();
    let len = whole_frame.len() as u32;
    let cut = |ts: u64, n: usize| (ts, whole_frame[..n].to_vec(), len);
    let cap = Temp::new("lines-snaplen.pcap");
    std::fs::write(&cap.0, pcap(&[cut_frame(), cut(0, 50), cut(1, 42)])).expect("write");
    let policy = Temp::new("lines-snaplen.toml");
    std::fs::write(&policy.0, "[default]\naction = \"allow\"\n").expect("write");
    for extra in [&[][..], &["--policy", policy.path()][..]] {
        let mut argv = vec!["replay", "--format", "json"];
        argv.extend_from_slice(extra);
        argv.push(cap.path());
        let out = ctrack(&argv);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{err}");
        assert!(
            err.contains("note: 2 packet(s), the first packet 2, were captured cut short inside their IP datagram")
                && err.contains("(42 to 50 bytes of each captured"),
            "{extra:?}: {err}"
        );
        assert_eq!(err.lines().count(), 1, "{err}");
    }
    let out = ctrack(&["replay", "--format", "ovs", cap.path()]);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "1: new|trk\n2: inv|trk\n3: inv|trk\n"
    );
    // Only the padding cut, or a packet whole as captured whose IP header
    // lies (invalid, but not for a cut): no note.
    let mut liar = whole_frame.clone();
    liar[16..18].copy_from_slice(&1000u16.to_be_bytes());
    let len = liar.len() as u32;
    let padding = Temp::new("lines-snaplen-padding.pcap");
    std::fs::write(&padding.0, pcap(&[cut_frame(), (2, liar, len)])).expect("write");
    let out = ctrack(&["replay", "--format", "ovs", padding.path()]);
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "1: new|trk\n2: inv|trk\n"
    );
    assert_eq!(String::from_utf8_lossy(&out.stderr), "");
}
