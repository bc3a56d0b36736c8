use super::reader::scale_timestamp;
use super::*;

/// A little-endian pcap file with the given link-type field.
fn pcap_with_link(nanos: bool, link: u32, records: &[(u32, u32, &[u8])]) -> Vec<u8> {
    let magic: u32 = if nanos { 0xa1b2_3c4d } else { 0xa1b2_c3d4 };
    let mut f = Vec::new();
    f.extend_from_slice(&magic.to_le_bytes());
    f.extend_from_slice(&2u16.to_le_bytes());
    f.extend_from_slice(&4u16.to_le_bytes());
    f.extend_from_slice(&0i32.to_le_bytes());
    f.extend_from_slice(&0u32.to_le_bytes());
    f.extend_from_slice(&65535u32.to_le_bytes());
    f.extend_from_slice(&link.to_le_bytes());
    for (sec, frac, data) in records {
        f.extend_from_slice(&sec.to_le_bytes());
        f.extend_from_slice(&frac.to_le_bytes());
        f.extend_from_slice(&(data.len() as u32).to_le_bytes());
        f.extend_from_slice(&(data.len() as u32).to_le_bytes());
        f.extend_from_slice(data);
    }
    f
}

fn pcap_file(nanos: bool, records: &[(u32, u32, &[u8])]) -> Vec<u8> {
    pcap_with_link(nanos, 1, records)
}

/// (timestamp, data, offset) of each packet read.
type Read = Vec<(u64, Vec<u8>, u64)>;

fn read_all(bytes: &[u8]) -> (Read, Option<CaptureError>) {
    let (pkts, err) = read_full(bytes);
    (
        pkts.into_iter().map(|(t, d, o, _, _)| (t, d, o)).collect(),
        err,
    )
}

/// Every packet with its link type and original length too.
#[allow(clippy::type_complexity)]
fn read_full(
    bytes: &[u8],
) -> (
    Vec<(u64, Vec<u8>, u64, LinkType, u32)>,
    Option<CaptureError>,
) {
    let mut out = Vec::new();
    let mut r = match CaptureReader::new(bytes) {
        Ok(r) => r,
        Err(e) => return (out, Some(e)),
    };
    loop {
        match r.next_packet() {
            Ok(Some(p)) => out.push((p.ts_nanos, p.data.to_vec(), p.offset, p.link, p.orig_len)),
            Ok(None) => return (out, None),
            Err(e) => return (out, Some(e)),
        }
    }
}

#[test]
fn pcap_micro_and_nano() {
    let f = pcap_file(false, &[(1, 5, b"abc"), (2, 999_999, b"de")]);
    let (pkts, err) = read_all(&f);
    assert!(err.is_none());
    assert_eq!(pkts[0], (1_000_005_000, b"abc".to_vec(), 24));
    assert_eq!(pkts[1].0, 2_999_999_000);
    assert_eq!(pkts[1].2, 24 + 16 + 3);
    let f = pcap_file(true, &[(1, 5, b"x")]);
    assert_eq!(read_all(&f).0[0].0, 1_000_000_005);
}

#[test]
fn truncated_and_corrupt() {
    let f = pcap_file(false, &[(1, 0, b"abcdef"), (2, 0, b"ghijkl")]);
    let (pkts, err) = read_all(&f[..f.len() - 2]);
    assert_eq!(pkts.len(), 1);
    assert!(
        matches!(err, Some(CaptureError::Truncated { offset: 46 })),
        "{err:?}"
    );
    let mut bad = f.clone();
    bad[24 + 8..24 + 12].copy_from_slice(&u32::MAX.to_le_bytes());
    let (pkts, err) = read_all(&bad);
    assert!(pkts.is_empty());
    assert!(
        matches!(err, Some(CaptureError::Corrupt { offset: 24, .. })),
        "{err:?}"
    );
    // Microsecond fraction out of range.
    let f = pcap_file(false, &[(1, 2_000_000, b"a")]);
    assert!(matches!(read_all(&f).1, Some(CaptureError::Corrupt { .. })));
}

#[test]
fn empty_short_and_foreign_files() {
    let (_, err) = read_all(b"");
    let err = err.unwrap();
    assert!(matches!(err, CaptureError::Empty), "{err:?}");
    assert_eq!(err.to_string(), "empty file, not a pcap or pcapng capture");
    let (_, err) = read_all(b"ab");
    let err = err.unwrap().to_string();
    assert!(
        err.contains("not a pcap or pcapng file") && err.contains("only 2 bytes"),
        "{err}"
    );
    let (_, err) = read_all(b"not a capture at all");
    let err = err.unwrap().to_string();
    assert!(
        err.contains("not a pcap or pcapng file at byte offset 0"),
        "{err}"
    );
    // A pcap magic and half a header.
    let f = pcap_file(false, &[]);
    let (_, err) = read_all(&f[..10]);
    let err = err.unwrap();
    assert!(
        matches!(err, CaptureError::TruncatedHeader { len: 10 }),
        "{err:?}"
    );
    assert!(err.to_string().contains("file header cut short"));
}

#[test]
fn link_type_with_fcs_length() {
    // Ethernet with a 4-byte FCS (2 words): bit 26 and 2 << 28.
    let field = 1 | 0x0400_0000 | (2 << 28);
    let frame = b"0123456789abcdefFCS!";
    let f = pcap_with_link(false, field, &[(1, 0, frame)]);
    let (p, e) = read_full(&f);
    assert!(e.is_none(), "{e:?}");
    assert_eq!(p[0].1, b"0123456789abcdef");
    assert_eq!(p[0].3, LinkType::Ethernet);
    assert_eq!(p[0].4, 16);
    // The flag without a length, and a length without the flag: no FCS.
    for field in [1 | 0x0400_0000, 1 | (2 << 28)] {
        let f = pcap_with_link(false, field, &[(1, 0, frame)]);
        assert_eq!(read_full(&f).0[0].1, frame);
    }
    // An unsupported link type is named by its low 16 bits.
    let f = pcap_with_link(false, 105 | 0x0400_0000 | (2 << 28), &[]);
    let e = read_all(&f).1.unwrap();
    assert!(
        matches!(e, CaptureError::UnsupportedLink { link: 105, .. }),
        "{e:?}"
    );
}

#[test]
fn fcs_of_a_cut_packet() {
    let framing = link::Framing {
        link: link::Link::Plain(LinkType::Ethernet),
        fcs: 4,
    };
    let data = [7u8; 100];
    // Captured whole: the FCS goes.
    let f = framing.frame(&data, 100);
    assert_eq!((f.start, f.end, f.orig_len), (0, 96, 96));
    // Cut before the FCS: nothing goes.
    let f = framing.frame(&data, 200);
    assert_eq!((f.end, f.orig_len), (100, 196));
    // Cut inside it: its captured part goes.
    let f = framing.frame(&data, 102);
    assert_eq!((f.end, f.orig_len), (98, 98));
    // Shorter than its FCS.
    let f = framing.frame(&data[..2], 2);
    assert_eq!((f.end, f.orig_len), (0, 0));
}

#[test]
fn bsd_loopback() {
    let v4 = [0x45u8, 0, 0, 20];
    let v6 = [0x60u8, 0, 0, 0];
    let with = |family: [u8; 4], ip: &[u8]| [&family[..], ip].concat();
    // NULL, family in the capturing host's order (little-endian here,
    // big-endian from a big-endian host).
    let recs = [
        with(2u32.to_le_bytes(), &v4),
        with(2u32.to_be_bytes(), &v4),
        with(24u32.to_le_bytes(), &v6),
        with(28u32.to_le_bytes(), &v6),
        with(30u32.to_be_bytes(), &v6),
        with(7u32.to_le_bytes(), &v4),
        vec![2, 0],
    ];
    let records: Vec<(u32, u32, &[u8])> = recs.iter().map(|r| (1, 0, &r[..])).collect();
    let (p, e) = read_full(&pcap_with_link(false, 0, &records));
    assert!(e.is_none(), "{e:?}");
    assert!(p.iter().all(|p| p.3 == LinkType::RawIp));
    for (i, want) in [&v4, &v4, &v6, &v6, &v6].iter().enumerate() {
        assert_eq!(&p[i].1, want, "record {i}");
        assert_eq!(p[i].4, 4, "record {i}");
    }
    // Another family keeps its header (not IP to the tracker); a record
    // cut inside its header has nothing left.
    assert_eq!(p[5].1, recs[5]);
    assert!(p[6].1.is_empty());

    // LOOP: network order.
    let recs = [
        with(2u32.to_be_bytes(), &v4),
        with(24u32.to_be_bytes(), &v6),
        with(2u32.to_le_bytes(), &v4),
    ];
    let records: Vec<(u32, u32, &[u8])> = recs.iter().map(|r| (1, 0, &r[..])).collect();
    let (p, e) = read_full(&pcap_with_link(false, 108, &records));
    assert!(e.is_none(), "{e:?}");
    assert_eq!(p[0].1, v4);
    assert_eq!(p[1].1, v6);
    assert_eq!(p[2].1, recs[2], "0x02000000 is no family in network order");

    // NULL with an FCS: both come off.
    let rec = with(2u32.to_le_bytes(), &[0x45, 0, 0, 20, 0xf, 0xc, 0x5, 0]);
    let f = pcap_with_link(false, 0x0400_0000 | (2 << 28), &[(1, 0, &rec)]);
    let (p, _) = read_full(&f);
    assert_eq!(p[0].1, v4);
}

/// A pcapng file: one interface of `linktype` with the given options
/// (code, value), one enhanced packet block with its options.
fn pcapng_with(
    linktype: u16,
    idb_opts: &[(u16, &[u8])],
    ts: u64,
    data: &[u8],
    epb_opts: &[(u16, &[u8])],
) -> Vec<u8> {
    fn options(opts: &[(u16, &[u8])]) -> Vec<u8> {
        let mut o = Vec::new();
        for (code, v) in opts {
            o.extend_from_slice(&code.to_le_bytes());
            o.extend_from_slice(&(v.len() as u16).to_le_bytes());
            o.extend_from_slice(v);
            o.extend(std::iter::repeat_n(0, (4 - v.len() % 4) % 4));
        }
        if !opts.is_empty() {
            o.extend_from_slice(&[0, 0, 0, 0]); // opt_endofopt
        }
        o
    }
    let mut f = Vec::new();
    // Section header block.
    f.extend_from_slice(&0x0a0d_0d0au32.to_le_bytes());
    f.extend_from_slice(&28u32.to_le_bytes());
    f.extend_from_slice(&0x1a2b_3c4du32.to_le_bytes());
    f.extend_from_slice(&1u16.to_le_bytes());
    f.extend_from_slice(&0u16.to_le_bytes());
    f.extend_from_slice(&(-1i64).to_le_bytes());
    f.extend_from_slice(&28u32.to_le_bytes());
    // Interface description block.
    let opts = options(idb_opts);
    let idb_len = 20 + opts.len() as u32;
    f.extend_from_slice(&1u32.to_le_bytes());
    f.extend_from_slice(&idb_len.to_le_bytes());
    f.extend_from_slice(&linktype.to_le_bytes());
    f.extend_from_slice(&0u16.to_le_bytes());
    f.extend_from_slice(&0u32.to_le_bytes());
    f.extend_from_slice(&opts);
    f.extend_from_slice(&idb_len.to_le_bytes());
    // Enhanced packet block.
    let opts = options(epb_opts);
    let pad = (4 - data.len() % 4) % 4;
    let epb_len = 32 + data.len() as u32 + pad as u32 + opts.len() as u32;
    f.extend_from_slice(&6u32.to_le_bytes());
    f.extend_from_slice(&epb_len.to_le_bytes());
    f.extend_from_slice(&0u32.to_le_bytes());
    f.extend_from_slice(&((ts >> 32) as u32).to_le_bytes());
    f.extend_from_slice(&(ts as u32).to_le_bytes());
    f.extend_from_slice(&(data.len() as u32).to_le_bytes());
    f.extend_from_slice(&(data.len() as u32).to_le_bytes());
    f.extend_from_slice(data);
    f.extend(std::iter::repeat_n(0, pad));
    f.extend_from_slice(&opts);
    f.extend_from_slice(&epb_len.to_le_bytes());
    f
}

fn pcapng_file(tsresol: Option<u8>, ts: u64, data: &[u8]) -> Vec<u8> {
    match tsresol {
        Some(r) => pcapng_with(1, &[(9, &[r])], ts, data, &[]),
        None => pcapng_with(1, &[], ts, data, &[]),
    }
}

#[test]
fn pcapng_resolutions() {
    // Default resolution: microseconds.
    let (p, e) = read_all(&pcapng_file(None, 1_500_000, b"hello"));
    assert!(e.is_none(), "{e:?}");
    assert_eq!(p[0].0, 1_500_000_000);
    assert_eq!(p[0].1, b"hello");
    let (p, _) = read_all(&pcapng_file(Some(9), 1_500_000, b"x"));
    assert_eq!(p[0].0, 1_500_000);
    let (p, _) = read_all(&pcapng_file(Some(0x80 | 10), 1024, b"x"));
    assert_eq!(p[0].0, 1_000_000_000);
    // A cut in the middle of the packet block.
    let f = pcapng_file(None, 1, b"hello");
    let (p, e) = read_all(&f[..f.len() - 3]);
    assert!(p.is_empty());
    assert!(matches!(e, Some(CaptureError::Truncated { .. })), "{e:?}");
}

#[test]
fn pcapng_fcs_and_loopback() {
    let frame = b"0123456789abFCS!";
    // if_fcslen in bits (the specification) and in bytes (some writers).
    for v in [32u8, 4] {
        let (p, e) = read_full(&pcapng_with(1, &[(13, &[v])], 0, frame, &[]));
        assert!(e.is_none(), "{e:?}");
        assert_eq!(p[0].1, b"0123456789ab", "if_fcslen {v}");
    }
    // epb_flags: FCS length 4 in bits 5 to 8; it overrides the interface.
    let flags = (4u32 << 5).to_le_bytes();
    let (p, _) = read_full(&pcapng_with(1, &[(13, &[16])], 0, frame, &[(2, &flags)]));
    assert_eq!(p[0].1, b"0123456789ab");
    let (p, _) = read_full(&pcapng_with(1, &[], 0, frame, &[(2, &0u32.to_le_bytes())]));
    assert_eq!(p[0].1, frame);
    // A length that is neither bits nor bytes.
    let e = read_all(&pcapng_with(1, &[(13, &[12])], 0, frame, &[])).1;
    assert!(matches!(e, Some(CaptureError::Corrupt { .. })), "{e:?}");
    // NULL on pcapng.
    let rec = [&2u32.to_le_bytes()[..], &[0x45, 1, 2, 3]].concat();
    let (p, _) = read_full(&pcapng_with(0, &[], 0, &rec, &[]));
    assert_eq!(
        (p[0].1.as_slice(), p[0].3),
        (&[0x45, 1, 2, 3][..], LinkType::RawIp)
    );
}

#[test]
fn written_files_read_back() {
    for link in [
        LinkType::Ethernet,
        LinkType::RawIp,
        LinkType::LinuxSll,
        LinkType::LinuxSll2,
    ] {
        let mut w = CaptureWriter::new(Vec::new(), link).unwrap();
        w.write(1_234_567_890_123, b"frame", 9).unwrap();
        let file = w.finish().unwrap();
        let (p, e) = read_full(&file);
        assert!(e.is_none(), "{e:?}");
        assert_eq!(p, [(1_234_567_890_123, b"frame".to_vec(), 24, link, 9)]);
    }
}

#[test]
fn timestamp_scaling() {
    assert_eq!(scale_timestamp(5, 6), Some(5_000));
    assert_eq!(scale_timestamp(5, 9), Some(5));
    assert_eq!(scale_timestamp(3, 0), Some(3_000_000_000));
    assert_eq!(scale_timestamp(1, 0x81), Some(500_000_000));
    assert_eq!(scale_timestamp(1, 99), None);
    assert_eq!(scale_timestamp(u64::MAX, 0), None);
}

/// pcapng blocks, written in either byte order.
struct Ng {
    big: bool,
    bytes: Vec<u8>,
}

impl Ng {
    fn new(big: bool) -> Ng {
        let mut ng = Ng {
            big,
            bytes: Vec::new(),
        };
        // Section header block: magic, version 1.0, section length unknown.
        let mut body = ng.u32(0x1a2b_3c4d);
        body.extend(ng.u16(1));
        body.extend(ng.u16(0));
        body.extend_from_slice(&[0xff; 8]);
        ng.block(0x0a0d_0d0a, &body);
        ng
    }

    fn u16(&self, v: u16) -> Vec<u8> {
        match self.big {
            true => v.to_be_bytes().to_vec(),
            false => v.to_le_bytes().to_vec(),
        }
    }

    fn u32(&self, v: u32) -> Vec<u8> {
        match self.big {
            true => v.to_be_bytes().to_vec(),
            false => v.to_le_bytes().to_vec(),
        }
    }

    /// A block of `kind` around `body` (padded to 4 bytes).
    fn block(&mut self, kind: u32, body: &[u8]) {
        let pad = (4 - body.len() % 4) % 4;
        let len = (12 + body.len() + pad) as u32;
        let (k, l) = (self.u32(kind), self.u32(len));
        self.bytes.extend(k);
        self.bytes.extend(l.clone());
        self.bytes.extend_from_slice(body);
        self.bytes.extend(std::iter::repeat_n(0, pad));
        self.bytes.extend(l);
    }

    /// An interface of `link` with its `if_tsresol`.
    fn interface(&mut self, link: u16, tsresol: u8) {
        let mut body = self.u16(link);
        body.extend(self.u16(0));
        body.extend(self.u32(0));
        body.extend(self.u16(9));
        body.extend(self.u16(1));
        body.extend_from_slice(&[tsresol, 0, 0, 0]);
        body.extend_from_slice(&[0; 4]);
        self.block(1, &body);
    }

    /// An enhanced packet block on interface `iface` at raw time `ts`.
    fn packet(&mut self, iface: u32, ts: u64, data: &[u8]) {
        let mut body = self.u32(iface);
        body.extend(self.u32((ts >> 32) as u32));
        body.extend(self.u32(ts as u32));
        body.extend(self.u32(data.len() as u32));
        body.extend(self.u32(data.len() as u32));
        body.extend_from_slice(data);
        body.extend(std::iter::repeat_n(0, (4 - data.len() % 4) % 4));
        self.block(6, &body);
    }

    /// A simple packet block (no interface, no time: interface 0).
    fn simple(&mut self, data: &[u8], orig_len: u32) {
        let mut body = self.u32(orig_len);
        body.extend_from_slice(data);
        body.extend(std::iter::repeat_n(0, (4 - data.len() % 4) % 4));
        self.block(3, &body);
    }
}

/// A capture taken on two interfaces (`dumpcap -i a -i b`), in either
/// byte order: each packet has its own interface's link type and time
/// resolution; a simple packet block is of the first interface.
#[test]
fn pcapng_of_two_interfaces_in_either_byte_order() {
    for big in [false, true] {
        let mut ng = Ng::new(big);
        ng.interface(1, 6);
        ng.interface(101, 9);
        ng.packet(1, 7, &[0x45, 0, 0, 20]);
        ng.packet(0, 7, b"ethernet frame");
        ng.simple(b"simple", 6);
        let (p, e) = read_full(&ng.bytes);
        assert!(e.is_none(), "big-endian {big}: {e:?}");
        let got: Vec<(u64, &[u8], LinkType, u32)> = p
            .iter()
            .map(|(t, d, _, l, o)| (*t, d.as_slice(), *l, *o))
            .collect();
        assert_eq!(
            got,
            [
                (7, &[0x45, 0, 0, 20][..], LinkType::RawIp, 4),
                (7_000, &b"ethernet frame"[..], LinkType::Ethernet, 14),
                (0, &b"simple"[..], LinkType::Ethernet, 6),
            ],
            "big-endian {big}"
        );
    }
    // Two sections, as concatenating two captures makes them, the second
    // in the other byte order: each read in its own (a section header's
    // length in the order its own magic gives), its interfaces its own.
    let mut le = Ng::new(false);
    le.interface(1, 6);
    le.packet(0, 1, b"first");
    let mut be = Ng::new(true);
    be.interface(101, 9);
    be.packet(0, 2, &[0x45, 1]);
    let (p, e) = read_full(&[le.bytes, be.bytes].concat());
    assert!(e.is_none(), "{e:?}");
    let got: Vec<(u64, &[u8], LinkType)> = p
        .iter()
        .map(|(t, d, _, l, _)| (*t, d.as_slice(), *l))
        .collect();
    assert_eq!(
        got,
        [
            (1_000, &b"first"[..], LinkType::Ethernet),
            (2, &[0x45, 1][..], LinkType::RawIp)
        ]
    );
    // A simple packet block's packet is cut to its interface's snapshot
    // length as well (the interface block's snaplen, after link type and
    // reserved field).
    let mut ng = Ng::new(false);
    let at = ng.bytes.len();
    ng.interface(1, 6);
    ng.bytes[at + 12..at + 16].copy_from_slice(&4u32.to_le_bytes());
    ng.simple(b"simple", 6);
    let (p, e) = read_full(&ng.bytes);
    assert!(e.is_none(), "{e:?}");
    assert_eq!((p[0].1.as_slice(), p[0].4), (&b"simp"[..], 6));
    // A packet on an interface the section never declared.
    let mut ng = Ng::new(false);
    ng.interface(1, 6);
    ng.packet(1, 7, b"x");
    let e = read_all(&ng.bytes).1;
    assert!(
        matches!(&e, Some(CaptureError::Corrupt { what, .. }) if what.contains("undeclared interface 1")),
        "{e:?}"
    );
}

/// A block length under a block's 12 bytes or not a multiple of 4 is
/// refused as corrupt, never read as an empty block over and over.
#[test]
fn pcapng_block_lengths_that_cannot_be() {
    for len in [0u32, 4, 8, 30] {
        let mut ng = Ng::new(false);
        ng.interface(1, 6);
        let at = ng.bytes.len();
        ng.packet(0, 1, b"abcd");
        ng.bytes[at + 4..at + 8].copy_from_slice(&len.to_le_bytes());
        let (p, e) = read_all(&ng.bytes);
        assert!(p.is_empty(), "{len}");
        assert!(
            matches!(&e, Some(CaptureError::Corrupt { what, .. }) if what == &format!("block length {len}")),
            "{len}: {e:?}"
        );
    }
}

/// The bounds of a pcap record: a captured length of `MAX_RECORD` is
/// read, one more is corrupt; a fraction of a second one short of a
/// second is read, a whole second is corrupt; a file cut inside a
/// record's header is truncated, not at its end.
#[test]
fn pcap_record_bounds() {
    let big = vec![7u8; MAX_RECORD];
    let (p, e) = read_all(&pcap_file(false, &[(1, 0, &big)]));
    assert!(e.is_none(), "{e:?}");
    assert_eq!(p[0].1.len(), MAX_RECORD);
    let mut f = pcap_file(false, &[(1, 0, b"x")]);
    f[24 + 8..24 + 12].copy_from_slice(&(MAX_RECORD as u32 + 1).to_le_bytes());
    let e = read_all(&f).1;
    assert!(
        matches!(e, Some(CaptureError::Corrupt { offset: 24, .. })),
        "{e:?}"
    );
    let (p, e) = read_all(&pcap_file(true, &[(1, 999_999_999, b"x")]));
    assert_eq!((p[0].0, e.is_none()), (1_999_999_999, true));
    for (nanos, frac) in [(true, 1_000_000_000), (false, 1_000_000)] {
        let e = read_all(&pcap_file(nanos, &[(1, frac, b"x")])).1;
        assert!(matches!(e, Some(CaptureError::Corrupt { .. })), "{e:?}");
    }
    let f = pcap_file(false, &[(1, 0, b"abc"), (2, 0, b"def")]);
    let (p, e) = read_all(&f[..24 + 16 + 3 + 10]);
    assert_eq!(p.len(), 1);
    assert!(
        matches!(e, Some(CaptureError::Truncated { offset: 43 })),
        "{e:?}"
    );
}

/// The largest resolutions `if_tsresol` can give still scale.
#[test]
fn timestamp_scaling_at_its_bounds() {
    assert_eq!(scale_timestamp(1, 38), Some(0));
    assert_eq!(scale_timestamp(10u64.pow(19), 38), Some(0));
    assert_eq!(scale_timestamp(1 << 40, 0x80 | 64), Some(59));
    assert_eq!(scale_timestamp(1, 0x80 | 65), None);
}

/// A source that is interrupted (`EINTR`) before each read it answers.
struct Interrupted<'a> {
    data: &'a [u8],
    interrupt: bool,
}

impl std::io::Read for Interrupted<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.interrupt = !self.interrupt;
        if self.interrupt {
            return Err(std::io::ErrorKind::Interrupted.into());
        }
        let n = buf.len().min(self.data.len()).min(7);
        buf[..n].copy_from_slice(&self.data[..n]);
        self.data = &self.data[n..];
        Ok(n)
    }
}

/// A read interrupted by a signal is made again, as `std::io::Read`
/// asks of its callers.
#[test]
fn interrupted_reads_are_retried() {
    let f = pcap_file(false, &[(1, 0, b"abc"), (2, 0, b"defg")]);
    let src = Interrupted {
        data: &f,
        interrupt: false,
    };
    let mut r = CaptureReader::new(src).expect("a pcap");
    let mut got = Vec::new();
    while let Some(p) = r.next_packet().expect("no error") {
        got.push(p.data.to_vec());
    }
    assert_eq!(got, [b"abc".to_vec(), b"defg".to_vec()]);
}

/// What a [`Drip`] hands over: pieces still to come, and whether the
/// writer has closed.
type Pieces = std::rc::Rc<std::cell::RefCell<(std::collections::VecDeque<Vec<u8>>, bool)>>;

/// A source that hands over what has come, a piece a read, as a pipe
/// does. A read when nothing has come and the writer has not closed
/// would wait (for a pipe, until more comes): here it fails the test, so
/// a reader that asks for more than a packet needs before handing it over
/// is caught.
struct Drip(Pieces);

impl std::io::Read for Drip {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        let mut p = self.0.borrow_mut();
        let Some(mut piece) = p.0.pop_front() else {
            assert!(p.1, "a read past what has come: it would wait");
            return Ok(0);
        };
        let n = piece.len().min(out.len());
        out[..n].copy_from_slice(&piece[..n]);
        if n < piece.len() {
            p.0.push_front(piece.split_off(n));
        }
        Ok(n)
    }
}

/// Each packet of a capture read as it comes (a pipe, `tcpdump -U -w -`)
/// is handed over as soon as it is whole, the header too in pieces, in
/// pcap and pcapng. Until 2026-12-01 each read waited for a whole chunk
/// (256 KiB) or the end.
#[test]
fn a_capture_read_as_it_comes_hands_each_packet_over_when_whole() {
    let one = [1u8; 60];
    let two = [2u8; 70];
    let pcap = pcap_file(false, &[(1, 0, &one), (2, 0, &two)]);
    // pcapng: the second packet's enhanced packet block (32 bytes and its
    // data padded to 72) after a file of the first.
    let mut ng = pcapng_with(1, &[], 1_000_000, &one, &[]);
    let tail = pcapng_with(1, &[], 2_000_000, &two, &[]);
    ng.extend_from_slice(&tail[tail.len() - 104..]);
    for (file, second) in [(pcap, 16 + two.len()), (ng, 104)] {
        // The header and the first packet, in 3-byte pieces.
        let first_end = file.len() - second;
        let pieces: Pieces = Default::default();
        for c in file[..first_end].chunks(3) {
            pieces.borrow_mut().0.push_back(c.to_vec());
        }
        let mut r = CaptureReader::new(Drip(pieces.clone())).expect("the header");
        let p = r.next_packet().expect("read").expect("the first packet");
        assert_eq!(p.data, &one[..]);
        // The second comes, then the writer closes.
        pieces.borrow_mut().0.push_back(file[first_end..].to_vec());
        let p = r.next_packet().expect("read").expect("the second packet");
        assert_eq!(p.data, &two[..]);
        pieces.borrow_mut().1 = true;
        assert!(r.next_packet().expect("the end").is_none());
    }
}
