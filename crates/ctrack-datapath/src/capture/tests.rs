use super::reader::scale_timestamp;
use super::*;

fn pcap_file(nanos: bool, records: &[(u32, u32, &[u8])]) -> Vec<u8> {
    let magic: u32 = if nanos { 0xa1b2_3c4d } else { 0xa1b2_c3d4 };
    let mut f = Vec::new();
    f.extend_from_slice(&magic.to_le_bytes());
    f.extend_from_slice(&2u16.to_le_bytes());
    f.extend_from_slice(&4u16.to_le_bytes());
    f.extend_from_slice(&0i32.to_le_bytes());
    f.extend_from_slice(&0u32.to_le_bytes());
    f.extend_from_slice(&65535u32.to_le_bytes());
    f.extend_from_slice(&1u32.to_le_bytes());
    for (sec, frac, data) in records {
        f.extend_from_slice(&sec.to_le_bytes());
        f.extend_from_slice(&frac.to_le_bytes());
        f.extend_from_slice(&(data.len() as u32).to_le_bytes());
        f.extend_from_slice(&(data.len() as u32).to_le_bytes());
        f.extend_from_slice(data);
    }
    f
}

/// (timestamp, data, offset) of each packet read.
type Read = Vec<(u64, Vec<u8>, u64)>;

fn read_all(bytes: &[u8]) -> (Read, Option<CaptureError>) {
    let mut out = Vec::new();
    let mut r = match CaptureReader::new(bytes) {
        Ok(r) => r,
        Err(e) => return (out, Some(e)),
    };
    loop {
        match r.next_packet() {
            Ok(Some(p)) => out.push((p.ts_nanos, p.data.to_vec(), p.offset)),
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
    let (_, err) = read_all(b"not a capture at all");
    assert!(
        matches!(err, Some(CaptureError::Corrupt { offset: 0, .. })),
        "{err:?}"
    );
    let (_, err) = read_all(b"ab");
    assert!(matches!(err, Some(CaptureError::Truncated { offset: 0 })));
    // Microsecond fraction out of range.
    let f = pcap_file(false, &[(1, 2_000_000, b"a")]);
    assert!(matches!(read_all(&f).1, Some(CaptureError::Corrupt { .. })));
}

fn pcapng_file(tsresol: Option<u8>, ts: u64, data: &[u8]) -> Vec<u8> {
    let mut f = Vec::new();
    // Section header block.
    f.extend_from_slice(&0x0a0d_0d0au32.to_le_bytes());
    f.extend_from_slice(&28u32.to_le_bytes());
    f.extend_from_slice(&0x1a2b_3c4du32.to_le_bytes());
    f.extend_from_slice(&1u16.to_le_bytes());
    f.extend_from_slice(&0u16.to_le_bytes());
    f.extend_from_slice(&(-1i64).to_le_bytes());
    f.extend_from_slice(&28u32.to_le_bytes());
    // Interface description block, Ethernet, optional if_tsresol.
    let opts: Vec<u8> = match tsresol {
        Some(r) => {
            let mut o = Vec::new();
            o.extend_from_slice(&9u16.to_le_bytes());
            o.extend_from_slice(&1u16.to_le_bytes());
            o.extend_from_slice(&[r, 0, 0, 0]);
            o.extend_from_slice(&[0, 0, 0, 0]); // opt_endofopt
            o
        }
        None => Vec::new(),
    };
    let idb_len = 20 + opts.len() as u32;
    f.extend_from_slice(&1u32.to_le_bytes());
    f.extend_from_slice(&idb_len.to_le_bytes());
    f.extend_from_slice(&1u16.to_le_bytes());
    f.extend_from_slice(&0u16.to_le_bytes());
    f.extend_from_slice(&0u32.to_le_bytes());
    f.extend_from_slice(&opts);
    f.extend_from_slice(&idb_len.to_le_bytes());
    // Enhanced packet block.
    let pad = (4 - data.len() % 4) % 4;
    let epb_len = 32 + data.len() as u32 + pad as u32;
    f.extend_from_slice(&6u32.to_le_bytes());
    f.extend_from_slice(&epb_len.to_le_bytes());
    f.extend_from_slice(&0u32.to_le_bytes());
    f.extend_from_slice(&((ts >> 32) as u32).to_le_bytes());
    f.extend_from_slice(&(ts as u32).to_le_bytes());
    f.extend_from_slice(&(data.len() as u32).to_le_bytes());
    f.extend_from_slice(&(data.len() as u32).to_le_bytes());
    f.extend_from_slice(data);
    f.extend(std::iter::repeat_n(0, pad));
    f.extend_from_slice(&epb_len.to_le_bytes());
    f
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
fn timestamp_scaling() {
    assert_eq!(scale_timestamp(5, 6), Some(5_000));
    assert_eq!(scale_timestamp(5, 9), Some(5));
    assert_eq!(scale_timestamp(3, 0), Some(3_000_000_000));
    assert_eq!(scale_timestamp(1, 0x81), Some(500_000_000));
    assert_eq!(scale_timestamp(1, 99), None);
    assert_eq!(scale_timestamp(u64::MAX, 0), None);
}
