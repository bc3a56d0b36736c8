//! Capture files: pcap (microsecond and nanosecond) and pcapng (any
//! timestamp resolution, several interfaces and sections), read as a
//! stream in bounded memory with every error naming the byte offset where
//! the file went wrong; and pcap files written.
//!
//! The record formats are parsed by the `pcap-file` crate; this module adds
//! streaming with offsets, size limits against corrupt lengths, pcapng's
//! `if_tsresol` (which `pcap-file` 2 ignores), and the link types the
//! tracker understands.

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
    /// The captured bytes.
    pub data: &'a [u8],
    /// Length of the packet on the wire.
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
