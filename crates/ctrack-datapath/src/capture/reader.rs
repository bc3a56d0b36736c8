//! The streaming reader of pcap and pcapng files.

use std::fmt;
use std::io::{self, Read};

use pcap_file::pcapng::blocks::enhanced_packet::EnhancedPacketOption;
use pcap_file::pcapng::blocks::interface_description::{
    InterfaceDescriptionBlock, InterfaceDescriptionOption,
};
use pcap_file::pcapng::{Block, PcapNgParser};
use pcap_file::{PcapError, TsResolution, pcap::PcapParser};

use super::link::{Framing, epb_flags_fcs, fcslen_option, link_of, pcap_framing};
use super::{CaptureError, MAX_RECORD, Packet};

/// Largest pcapng block accepted.
const MAX_BLOCK: usize = 16 * 1024 * 1024;
/// Bytes read from the file at a time.
const CHUNK: usize = 256 * 1024;
/// pcapng's section header block type, and the first bytes of its file.
const PCAPNG_MAGIC: [u8; 4] = [0x0a, 0x0d, 0x0d, 0x0a];
/// pcap's magic numbers, little- and big-endian, micro- and nanosecond.
const PCAP_MAGICS: [[u8; 4]; 4] = [
    [0xd4, 0xc3, 0xb2, 0xa1],
    [0xa1, 0xb2, 0xc3, 0xd4],
    [0x4d, 0x3c, 0xb2, 0xa1],
    [0xa1, 0xb2, 0x3c, 0x4d],
];

enum Format {
    Pcap {
        parser: PcapParser,
        framing: Framing,
        nanos: bool,
    },
    PcapNg {
        parser: PcapNgParser,
    },
}

/// A packet found in a record: its frame as a range of the read buffer.
struct Found {
    ts_nanos: u64,
    data: (usize, usize),
    orig_len: u32,
    link: ctrack_wire::LinkType,
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

impl<R: Read> CaptureReader<R> {
    /// Reads the file header and prepares to stream packets. From a pipe
    /// it reads what has come, as soon as the header is whole.
    pub fn new(mut src: R) -> Result<Self, CaptureError> {
        let mut buf = Vec::with_capacity(CHUNK);
        let mut eof = false;
        loop {
            if !eof {
                let want = CHUNK.saturating_sub(buf.len());
                eof = fill(&mut src, &mut buf, want)?;
            }
            if buf.is_empty() && eof {
                return Err(CaptureError::Empty);
            }
            let Some(&magic) = buf.first_chunk::<4>() else {
                if eof {
                    return Err(CaptureError::NotCapture {
                        what: format!("only {} bytes", buf.len()),
                    });
                }
                continue;
            };
            match header(magic, &buf) {
                // More of the header is coming (a pipe hands it over in
                // pieces): read on, up to a chunk.
                Err(PcapError::IncompleteBuffer) if !eof && buf.len() < CHUNK => continue,
                Err(e) => return Err(header_error(e, &buf, eof)),
                Ok(None) => {
                    return Err(CaptureError::NotCapture {
                        what: format!(
                            "it starts with {:02x} {:02x} {:02x} {:02x}",
                            magic[0], magic[1], magic[2], magic[3]
                        ),
                    });
                }
                Ok(Some((format, used))) => {
                    let format = format?;
                    return Ok(CaptureReader {
                        src,
                        buf,
                        start: used,
                        offset: used as u64,
                        eof,
                        format,
                    });
                }
            }
        }
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
                let total = if ty == PCAPNG_MAGIC {
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
    /// holds (with its frame as a range of the buffer), or `None` for a
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
            start + (data.as_ptr() as usize - rec.as_ptr() as usize)
        };
        match &mut self.format {
            Format::Pcap {
                parser,
                framing,
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
                let f = framing.frame(&raw.data, raw.orig_len);
                let from = start + 16;
                Ok(Some(Found {
                    ts_nanos: u64::from(raw.ts_sec) * 1_000_000_000 + frac_ns,
                    data: (from + f.start, from + f.end),
                    orig_len: f.orig_len,
                    link: f.link,
                }))
            }
            Format::PcapNg { parser } => {
                let (_, block) = parser.next_block(rec).map_err(corrupt)?;
                let (iface, raw_ts, data, orig_len, epb_fcs, simple) = match block {
                    Block::EnhancedPacket(b) => (
                        b.interface_id as usize,
                        b.timestamp.as_nanos() as u64,
                        b.data,
                        b.original_len,
                        b.options.iter().find_map(|o| match o {
                            EnhancedPacketOption::Flags(f) => epb_flags_fcs(*f),
                            _ => None,
                        }),
                        false,
                    ),
                    Block::SimplePacket(b) => (0, 0, b.data, b.original_len, None, true),
                    Block::Packet(b) => (
                        usize::from(b.interface_id),
                        b.timestamp,
                        b.data,
                        b.original_len,
                        None,
                        false,
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
                let mut data: &[u8] = &data;
                if simple {
                    // A simple packet block has no captured length: its
                    // data runs to the block's end, padding included, and
                    // the packet is its original length cut to the
                    // interface's snapshot length (0: none), as the pcapng
                    // specification derives it.
                    let snap = match idb.snaplen {
                        0 => usize::MAX,
                        n => n as usize,
                    };
                    data = &data[..data.len().min(orig_len as usize).min(snap)];
                }
                let (mut framing, tsresol) = interface(idb, offset)?;
                if let Some(fcs) = epb_fcs {
                    framing.fcs = fcs;
                }
                let ts_nanos =
                    scale_timestamp(raw_ts, tsresol).ok_or_else(|| CaptureError::Corrupt {
                        offset,
                        what: format!("timestamp {raw_ts} at resolution {tsresol:#x} out of range"),
                    })?;
                let f = framing.frame(data, orig_len);
                let from = range_of(data);
                Ok(Some(Found {
                    ts_nanos,
                    data: (from + f.start, from + f.end),
                    orig_len: f.orig_len,
                    link: f.link,
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

/// A pcapng interface's framing and timestamp resolution (`if_tsresol`,
/// microseconds by default), for a packet at `offset`.
fn interface(
    idb: &InterfaceDescriptionBlock<'_>,
    offset: u64,
) -> Result<(Framing, u8), CaptureError> {
    let link_type = u32::from(idb.linktype);
    let link = link_of(link_type).ok_or(CaptureError::UnsupportedLink {
        offset,
        link: link_type,
    })?;
    let mut framing = Framing { link, fcs: 0 };
    let mut tsresol = 6;
    for o in &idb.options {
        match o {
            InterfaceDescriptionOption::IfTsResol(r) => tsresol = *r,
            InterfaceDescriptionOption::IfFcsLen(v) => {
                framing.fcs = fcslen_option(*v).ok_or_else(|| CaptureError::Corrupt {
                    offset,
                    what: format!(
                        "the packet's interface declares an FCS of {v}, neither bits nor bytes"
                    ),
                })?;
            }
            _ => {}
        }
    }
    Ok((framing, tsresol))
}

/// Converts a raw pcapng timestamp in units of `if_tsresol` to nanoseconds:
/// a resolution byte below 0x80 means 10^-n seconds, otherwise 2^-(n & 0x7f).
pub(super) fn scale_timestamp(raw: u64, tsresol: u8) -> Option<u64> {
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

/// What is wrong with a file whose magic number is right and whose header
/// could not be read.
fn header_error(e: PcapError, buf: &[u8], eof: bool) -> CaptureError {
    match e {
        PcapError::IncompleteBuffer if eof => CaptureError::TruncatedHeader {
            len: buf.len() as u64,
        },
        PcapError::IncompleteBuffer => CaptureError::NotCapture {
            what: format!("a file header longer than {CHUNK} bytes"),
        },
        PcapError::IoError(io) => CaptureError::Io(io),
        // The magic number was right: a capture whose header is wrong.
        other => CaptureError::Corrupt {
            offset: 0,
            what: format!("file header: {other}"),
        },
    }
}

/// The file header at the start of `buf`, which begins with `magic`: its
/// format (or the error of a link type there is no reading) and its
/// length; `None` if `magic` is no capture's.
#[allow(clippy::type_complexity)]
fn header(
    magic: [u8; 4],
    buf: &[u8],
) -> Result<Option<(Result<Format, CaptureError>, usize)>, PcapError> {
    if magic == PCAPNG_MAGIC {
        let (rem, parser) = PcapNgParser::new(buf)?;
        return Ok(Some((Ok(Format::PcapNg { parser }), buf.len() - rem.len())));
    }
    if !PCAP_MAGICS.contains(&magic) {
        return Ok(None);
    }
    let (rem, parser) = PcapParser::new(buf)?;
    let h = parser.header();
    let used = buf.len() - rem.len();
    let framing = match pcap_framing(u32::from(h.datalink)) {
        Ok(f) => f,
        Err(link) => {
            return Ok(Some((
                Err(CaptureError::UnsupportedLink { offset: 0, link }),
                used,
            )));
        }
    };
    let nanos = h.ts_resolution == TsResolution::NanoSecond;
    let format = Format::Pcap {
        parser,
        framing,
        nanos,
    };
    Ok(Some((Ok(format), used)))
}

/// Appends what one read of `src` gives, up to `want` bytes (at least
/// one); returns true at end of file. One read: from a pipe, what has
/// come, so that a packet is handed over as soon as it is whole rather
/// than when a chunk is full (until 2026-12-01 a read filled the whole
/// chunk, 256 KiB, and a live capture, `tcpdump -U -w - | ctrack replay
/// -`, showed nothing until that much had come).
fn fill<R: Read>(src: &mut R, buf: &mut Vec<u8>, want: usize) -> Result<bool, CaptureError> {
    let mut tmp = [0u8; 16 * 1024];
    let n = want.clamp(1, tmp.len());
    loop {
        match src.read(&mut tmp[..n]) {
            Ok(0) => return Ok(true),
            Ok(k) => {
                buf.extend_from_slice(&tmp[..k]);
                return Ok(false);
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(CaptureError::Io(e)),
        }
    }
}
