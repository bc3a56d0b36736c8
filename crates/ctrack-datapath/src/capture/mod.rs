//! Capture files: pcap (microsecond and nanosecond) and pcapng (any
//! timestamp resolution, several interfaces and sections), read as a
//! stream in bounded memory with every error naming the byte offset where
//! the file went wrong; and pcap files written.
//!
//! The record formats are parsed by the `pcap-file` crate; this module adds
//! streaming with offsets, size limits against corrupt lengths, pcapng's
//! `if_tsresol` (which `pcap-file` 2 ignores), and the link types the
//! tracker understands, read as libpcap reads them:
//!
//! - Ethernet, raw IP (101, 228, 229), Linux cooked v1 and v2: handed on
//!   as they are;
//! - BSD loopback, `NULL` (0; a 4-byte address family in the byte order of
//!   the host that captured) and `LOOP` (108; in network byte order): the
//!   4-byte header is taken off and the packet handed on as raw IP when the
//!   family is `AF_INET` (2) or `AF_INET6` (24, 28 or 30, as the BSDs and
//!   macOS number it). A packet of any other family keeps its header,
//!   whose first byte is no IP version: the tracker sees it as not IP.
//! - A frame check sequence at the end of every packet, declared by the
//!   upper bits of a pcap header's link type (bit 26 set, bits 28 to 31 the
//!   length in 16-bit words: libpcap's `LT_FCS_LENGTH`), by a pcapng
//!   interface's `if_fcslen` or by a packet's `epb_flags`, is cut off.

mod link;
mod reader;
mod writer;

#[cfg(test)]
mod tests;

use std::fmt;
use std::io;

use ctrack_wire::LinkType;

pub use reader::CaptureReader;
pub use writer::CaptureWriter;

/// Largest packet record accepted (libpcap's own limit on a snapshot).
pub const MAX_RECORD: usize = 256 * 1024;

/// One packet from a capture.
#[derive(Debug, Clone, Copy)]
pub struct Packet<'a> {
    /// Capture timestamp in nanoseconds since the Unix epoch.
    pub ts_nanos: u64,
    /// The captured bytes, from the link type's header on (a loopback
    /// header and a frame check sequence taken off).
    pub data: &'a [u8],
    /// Length of the packet on the wire (less what was taken off).
    pub orig_len: u32,
    /// How the bytes begin.
    pub link: LinkType,
    /// Byte offset of the packet's record in the file.
    pub offset: u64,
}

/// What went wrong reading or writing a capture.
#[derive(Debug)]
#[non_exhaustive]
pub enum CaptureError {
    /// Reading or writing the file failed.
    Io(io::Error),
    /// The file is empty.
    Empty,
    /// The file is not a pcap or pcapng file.
    NotCapture {
        /// What it starts with, or why it cannot be one.
        what: String,
    },
    /// The file ends inside its header.
    TruncatedHeader {
        /// Bytes the file has.
        len: u64,
    },
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
            CaptureError::Io(e) => write!(f, "I/O error: {e}"),
            CaptureError::Empty => write!(f, "empty file, not a pcap or pcapng capture"),
            CaptureError::NotCapture { what } => {
                write!(f, "not a pcap or pcapng file at byte offset 0 ({what})")
            }
            CaptureError::TruncatedHeader { len } => write!(
                f,
                "file header cut short: the file ends at byte offset {len}, inside it"
            ),
            CaptureError::Truncated { offset } => {
                write!(f, "truncated record at byte offset {offset}")
            }
            CaptureError::Corrupt { offset, what } => {
                write!(f, "corrupt record at byte offset {offset}: {what}")
            }
            CaptureError::UnsupportedLink { offset, link } => write!(
                f,
                "unsupported link type {link} at byte offset {offset} (supported: Ethernet, \
                 raw IP, Linux cooked v1/v2, BSD loopback NULL and LOOP)"
            ),
        }
    }
}

impl std::error::Error for CaptureError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            CaptureError::Io(e) => Some(e),
            _ => None,
        }
    }
}

impl From<io::Error> for CaptureError {
    fn from(e: io::Error) -> Self {
        CaptureError::Io(e)
    }
}
