//! Reading capture files: pcap (microsecond and nanosecond) and pcapng
//! (any timestamp resolution, several interfaces and sections), streamed in
//! bounded memory, with every error naming the byte offset where the file
//! went wrong.
//!
//! The record formats are parsed by the `pcap-file` crate; this module adds
//! streaming with offsets, size limits against corrupt lengths, pcapng's
//! `if_tsresol` (which `pcap-file` 2 ignores), and the link types the
//! tracker understands.

use std::fmt;
use std::io::{self, Read};

use ctrack_wire::LinkType;
use pcap_file::pcapng::blocks::interface_description::InterfaceDescriptionOption;
use pcap_file::pcapng::{Block, PcapNgParser};
use pcap_file::{DataLink, PcapError, TsResolution, pcap::PcapParser};

/// Largest packet record accepted (libpcap's own limit on a snapshot).
pub const MAX_RECORD: usize = 256 * 1024;
/// Largest pcapng block accepted.
const MAX_BLOCK: usize = 16 * 1024 * 1024;
/// Bytes read from the file at a time.
const CHUNK: usize = 256 * 1024;

/// One packet from a capture.
#[derive(Debug, Clone, Copy)]
pub struct Packet<'a> {
    /// Capture timestamp in nanoseconds since the Unix epoch.
    pub ts_nanos: u64,
    /// The captured bytes.
    pub data: &'a [u8],
    /// Length of the packet on the wire.
    pub orig_len: u32,
    /// How the bytes begin.
    pub link: LinkType,
    /// Byte offset of the packet's record in the file.
    pub offset: u64,
}

/// What went wrong reading a capture.
#[derive(Debug)]
pub enum CaptureError {
    /// Reading the file failed.
    Io(io::Error),
    /// The file ends in the middle of a record.
    Truncated {
        /// Offset of the incomplete record.
        offset: u64,
    },
    /// A record cannot be right.
    Corrupt {
        /// Offset of the bad record.
        offset: u64,
        /// What is wrong with it.
        what: String,
    },
    /// The capture's link type is not one the tracker reads.
    UnsupportedLink {
        /// Offset of the header naming it.
        offset: u64,
        /// The link type.
        link: u32,
    },
}

impl fmt::Display for CaptureError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CaptureError::Io(e) => write!(f, "read error: {e}"),
            CaptureError::Truncated { offset } => {
                write!(f, "truncated record at byte offset {offset}")
            }
            CaptureError::Corrupt { offset, what } => {
                write!(f, "corrupt record at byte offset {offset}: {what}")
            }
            CaptureError::UnsupportedLink { offset, link } => write!(
                f,
                "unsupported link type {link} at byte offset {offset} \
                 (supported: Ethernet, raw IP, Linux cooked v1/v2)"
            ),
        }
    }
}

impl std::error::Error for CaptureError {}

enum Format {
    Pcap {
        parser: PcapParser,
        link: LinkType,
        nanos: bool,
    },
    PcapNg {
        parser: PcapNgParser,
    },
}

/// A packet found in a record: its data as a range of the read buffer.
struct Found {
    ts_nanos: u64,
    data: (usize, usize),
    orig_len: u32,
    link: LinkType,
}

/// A streaming reader of pcap and pcapng files.
pub struct CaptureReader<R> {
    src: R,
    buf: Vec<u8>,
    /// `buf[start..]` is unparsed.
    start: usize,
    /// File offset of `buf[start]`.
    offset: u64,
    eof: bool,
    format: Format,
}

impl<R> fmt::Debug for CaptureReader<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CaptureReader")
            .field("offset", &self.offset)
            .finish_non_exhaustive()
    }
}

fn link_type(dl: DataLink) -> Option<LinkType> {
    match dl {
        DataLink::ETHERNET => Some(LinkType::Ethernet),
        DataLink::RAW | DataLink::IPV4 | DataLink::IPV6 => Some(LinkType::RawIp),
        DataLink::LINUX_SLL => Some(LinkType::LinuxSll),
        DataLink::Unknown(276) => Some(LinkType::LinuxSll2),
        _ => None,
    }
}

fn datalink_number(dl: DataLink) -> u32 {
    u32::from(dl)
}

impl<R: Read> CaptureReader<R> {
    /// Reads the file header and prepares to stream packets.
    pub fn new(mut src: R) -> Result<Self, CaptureError> {
        let mut buf = Vec::with_capacity(CHUNK);
        let eof = fill(&mut src, &mut buf, CHUNK)?;
        if buf.len() < 4 {
            return Err(CaptureError::Truncated { offset: 0 });
        }
        let magic = [buf[0], buf[1], buf[2], buf[3]];
        const PCAP_MAGICS: [[u8; 4]; 4] = [
            [0xd4, 0xc3, 0xb2, 0xa1],
            [0xa1, 0xb2, 0xc3, 0xd4],
            [0x4d, 0x3c, 0xb2, 0xa1],
            [0xa1, 0xb2, 0x3c, 0x4d],
        ];
        let (format, used) = match magic {
            m if m != [0x0a, 0x0d, 0x0d, 0x0a] && !PCAP_MAGICS.contains(&m) => {
                return Err(CaptureError::Corrupt {
                    offset: 0,
                    what: "not a pcap or pcapng file".into(),
                });
            }
            [0x0a, 0x0d, 0x0d, 0x0a] => {
                let (rem, parser) = PcapNgParser::new(&buf).map_err(|e| header_error(e, 0))?;
                (Format::PcapNg { parser }, buf.len() - rem.len())
            }
            _ => {
                let (rem, parser) = PcapParser::new(&buf).map_err(|e| header_error(e, 0))?;
                let h = parser.header();
                let link = link_type(h.datalink).ok_or(CaptureError::UnsupportedLink {
                    offset: 0,
                    link: datalink_number(h.datalink),
                })?;
                let nanos = h.ts_resolution == TsResolution::NanoSecond;
                (
                    Format::Pcap {
                        parser,
                        link,
                        nanos,
                    },
                    buf.len() - rem.len(),
                )
            }
        };
        Ok(CaptureReader {
            src,
            buf,
            start: used,
            offset: used as u64,
            eof,
            format,
        })
    }

    /// Byte offset of the next record.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// Makes sure at least `need` unparsed bytes are buffered, if the file
    /// has them. Returns false at end of file with fewer.
    fn ensure(&mut self, need: usize) -> Result<bool, CaptureError> {
        if self.buf.len() - self.start >= need {
            return Ok(true);
        }
        if self.eof {
            return Ok(false);
        }
        self.buf.drain(..self.start);
        self.start = 0;
        while self.buf.len() < need && !self.eof {
            let want = need.max(CHUNK).saturating_sub(self.buf.len()).max(1);
            self.eof = fill(&mut self.src, &mut self.buf, want)?;
        }
        Ok(self.buf.len() >= need)
    }

    /// The next packet, or `None` at the end of the file.
    pub fn next_packet(&mut self) -> Result<Option<Packet<'_>>, CaptureError> {
        loop {
            let Some((rec_start, len, offset)) = self.next_record()? else {
                return Ok(None);
            };
            if let Some(found) = self.parse_record(rec_start, len, offset)? {
                let data = &self.buf[found.data.0..found.data.1];
                return Ok(Some(Packet {
                    ts_nanos: found.ts_nanos,
                    data,
                    orig_len: found.orig_len,
                    link: found.link,
                    offset,
                }));
            }
        }
    }

    /// Buffers the next whole record and returns where it lies in the
    /// buffer, its length and its file offset.
    fn next_record(&mut self) -> Result<Option<(usize, usize, u64)>, CaptureError> {
        if !self.ensure(1)? {
            return Ok(None);
        }
        // Read the record's length from its header first, so that a corrupt
        // length is reported rather than buffered.
        let offset = self.offset;
        let len = match &self.format {
            Format::Pcap { .. } => {
                if !self.ensure(16)? {
                    return Err(CaptureError::Truncated { offset });
                }
                let b = &self.buf[self.start + 8..self.start + 12];
                let incl = self.read_u32(b) as usize;
                if incl > MAX_RECORD {
                    return Err(CaptureError::Corrupt {
                        offset,
                        what: format!("captured length {incl} exceeds {MAX_RECORD}"),
                    });
                }
                16 + incl
            }
            Format::PcapNg { .. } => {
                if !self.ensure(12)? {
                    return Err(CaptureError::Truncated { offset });
                }
                let b = &self.buf[self.start + 4..self.start + 8];
                let ty = &self.buf[self.start..self.start + 4];
                let total = if ty == [0x0a, 0x0d, 0x0d, 0x0a] {
                    // A new section may change the byte order: read the
                    // length in the order its own magic says.
                    let m = &self.buf[self.start + 8..self.start + 12];
                    if m == [0x1a, 0x2b, 0x3c, 0x4d] {
                        u32::from_be_bytes([b[0], b[1], b[2], b[3]])
                    } else {
                        u32::from_le_bytes([b[0], b[1], b[2], b[3]])
                    }
                } else {
                    self.read_u32(b)
                } as usize;
                if !(12..=MAX_BLOCK).contains(&total) || !total.is_multiple_of(4) {
                    return Err(CaptureError::Corrupt {
                        offset,
                        what: format!("block length {total}"),
                    });
                }
                total
            }
        };
        if !self.ensure(len)? {
            return Err(CaptureError::Truncated { offset });
        }
        let start = self.start;
        self.start += len;
        self.offset += len as u64;
        Ok(Some((start, len, offset)))
    }

    /// Parses the record at `buf[start..start + len]`. Returns the packet it
    /// holds (with its data as a range of the buffer), or `None` for a
    /// block that holds none.
    fn parse_record(
        &mut self,
        start: usize,
        len: usize,
        offset: u64,
    ) -> Result<Option<Found>, CaptureError> {
        let rec = &self.buf[start..start + len];
        let corrupt = |e: PcapError| CaptureError::Corrupt {
            offset,
            what: e.to_string(),
        };
        let range_of = |data: &[u8]| {
            // `data` is a subslice of `rec`: find where, without unsafe.
            let from = start + (data.as_ptr() as usize - rec.as_ptr() as usize);
            (from, from + data.len())
        };
        match &mut self.format {
            Format::Pcap {
                parser,
                link,
                nanos,
            } => {
                let (_, raw) = parser.next_raw_packet(rec).map_err(corrupt)?;
                let frac = u64::from(raw.ts_frac);
                let frac_ns = if *nanos { frac } else { frac * 1000 };
                if frac_ns >= 1_000_000_000 {
                    return Err(CaptureError::Corrupt {
                        offset,
                        what: format!("timestamp fraction {frac} out of range"),
                    });
                }
                Ok(Some(Found {
                    ts_nanos: u64::from(raw.ts_sec) * 1_000_000_000 + frac_ns,
                    data: (start + 16, start + len),
                    orig_len: raw.orig_len,
                    link: *link,
                }))
            }
            Format::PcapNg { parser } => {
                let (_, block) = parser.next_block(rec).map_err(corrupt)?;
                let (iface, raw_ts, data, orig_len) = match block {
                    Block::EnhancedPacket(b) => (
                        b.interface_id as usize,
                        b.timestamp.as_nanos() as u64,
                        b.data,
                        b.original_len,
                    ),
                    Block::SimplePacket(b) => (0, 0, b.data, b.original_len),
                    Block::Packet(b) => (
                        usize::from(b.interface_id),
                        b.timestamp,
                        b.data,
                        b.original_len,
                    ),
                    // Headers, name resolution, statistics...
                    _ => return Ok(None),
                };
                let Some(idb) = parser.interfaces().get(iface) else {
                    return Err(CaptureError::Corrupt {
                        offset,
                        what: format!("packet on undeclared interface {iface}"),
                    });
                };
                let link = link_type(idb.linktype).ok_or(CaptureError::UnsupportedLink {
                    offset,
                    link: datalink_number(idb.linktype),
                })?;
                let tsresol = idb
                    .options
                    .iter()
                    .find_map(|o| match o {
                        InterfaceDescriptionOption::IfTsResol(r) => Some(r.to_owned()),
                        _ => None,
                    })
                    .unwrap_or(6);
                let ts_nanos =
                    scale_timestamp(raw_ts, tsresol).ok_or_else(|| CaptureError::Corrupt {
                        offset,
                        what: format!("timestamp {raw_ts} at resolution {tsresol:#x} out of range"),
                    })?;
                Ok(Some(Found {
                    ts_nanos,
                    data: range_of(&data),
                    orig_len,
                    link,
                }))
            }
        }
    }

    fn read_u32(&self, b: &[u8]) -> u32 {
        let b = [b[0], b[1], b[2], b[3]];
        let big = match &self.format {
            Format::Pcap { parser, .. } => parser.header().endianness == pcap_file::Endianness::Big,
            Format::PcapNg { parser } => parser.section().endianness == pcap_file::Endianness::Big,
        };
        if big {
            u32::from_be_bytes(b)
        } else {
            u32::from_le_bytes(b)
        }
    }
}

/// Converts a raw pcapng timestamp in units of `if_tsresol` to nanoseconds:
/// a resolution byte below 0x80 means 10^-n seconds, otherwise 2^-(n & 0x7f).
fn scale_timestamp(raw: u64, tsresol: u8) -> Option<u64> {
    let raw = u128::from(raw);
    let ns = if tsresol & 0x80 == 0 {
        let exp = u32::from(tsresol);
        if exp > 38 {
            return None;
        }
        let unit = 10u128.pow(exp);
        raw * 1_000_000_000 / unit
    } else {
        let shift = u32::from(tsresol & 0x7f);
        if shift > 64 {
            return None;
        }
        (raw * 1_000_000_000) >> shift
    };
    u64::try_from(ns).ok()
}

fn header_error(e: PcapError, offset: u64) -> CaptureError {
    match e {
        PcapError::IncompleteBuffer => CaptureError::Truncated { offset },
        PcapError::IoError(io) => CaptureError::Io(io),
        other => CaptureError::Corrupt {
            offset,
            what: format!("not a pcap or pcapng file ({other})"),
        },
    }
}

/// Appends up to `want` bytes from `src`; returns true at end of file.
fn fill<R: Read>(src: &mut R, buf: &mut Vec<u8>, want: usize) -> Result<bool, CaptureError> {
    let target = buf.len() + want;
    let mut tmp = [0u8; 16 * 1024];
    while buf.len() < target {
        let n = (target - buf.len()).min(tmp.len());
        match src.read(&mut tmp[..n]) {
            Ok(0) => return Ok(true),
            Ok(k) => buf.extend_from_slice(&tmp[..k]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(CaptureError::Io(e)),
        }
    }
    Ok(false)
}

#[cfg(test)]
mod tests {
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
}
