//! Writing pcap files.

use std::fmt;
use std::io::{self, Write};
use std::time::Duration;

use ctrack_wire::LinkType;
use pcap_file::pcap::{PcapHeader, PcapPacket, PcapWriter};
use pcap_file::{Endianness, PcapError, TsResolution};

use super::link::datalink_of;
use super::{CaptureError, MAX_RECORD};

/// A pcap file being written: little-endian, nanosecond timestamps, one
/// link type for every packet.
pub struct CaptureWriter<W: Write> {
    w: PcapWriter<W>,
}

impl<W: Write> fmt::Debug for CaptureWriter<W> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CaptureWriter").finish_non_exhaustive()
    }
}

fn write_error(e: PcapError) -> CaptureError {
    match e {
        PcapError::IoError(e) => CaptureError::Io(e),
        other => CaptureError::Io(io::Error::other(other.to_string())),
    }
}

impl<W: Write> CaptureWriter<W> {
    /// Writes the file header: frames of `link` follow.
    pub fn new(w: W, link: LinkType) -> Result<Self, CaptureError> {
        let header = PcapHeader {
            snaplen: MAX_RECORD as u32,
            datalink: datalink_of(link),
            ts_resolution: TsResolution::NanoSecond,
            endianness: Endianness::Little,
            ..PcapHeader::default()
        };
        let w = PcapWriter::with_header(w, header).map_err(write_error)?;
        Ok(CaptureWriter { w })
    }

    /// Writes one packet: captured at `ts_nanos` (since the Unix epoch),
    /// `orig_len` bytes long on the wire of which `frame` was captured.
    pub fn write(
        &mut self,
        ts_nanos: u64,
        frame: &[u8],
        orig_len: u32,
    ) -> Result<(), CaptureError> {
        let ts = Duration::from_nanos(ts_nanos);
        let orig_len = orig_len.max(frame.len() as u32);
        self.w
            .write_packet(&PcapPacket::new(ts, orig_len, frame))
            .map_err(write_error)?;
        Ok(())
    }

    /// Flushes the file and gives back what it was written to.
    pub fn finish(self) -> Result<W, CaptureError> {
        let mut w = self.w.into_writer();
        w.flush()?;
        Ok(w)
    }
}
