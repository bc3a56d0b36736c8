//! The files a replay opens beyond its standard output: the capture it
//! reads and the pcap file `--write` fills.

use std::fs::File;
use std::io::{self, BufReader, Write};
use std::os::fd::{AsRawFd, RawFd};
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use ctrack_core::LinkType;
use ctrack_datapath::capture::{CaptureReader, CaptureWriter};
use ctrack_wire::parse_frame;

use super::ReplayArgs;

/// The pcap file `--write` fills.
pub(crate) struct PcapOut {
    w: CaptureWriter<io::BufWriter<File>>,
    path: PathBuf,
    /// Its link type (a pcap file has one).
    link: LinkType,
}

impl PcapOut {
    pub(crate) fn create(path: &std::path::Path, link: LinkType) -> Result<PcapOut> {
        let f = File::create(path).with_context(|| format!("{}", path.display()))?;
        let w = CaptureWriter::new(io::BufWriter::new(f), link)
            .with_context(|| format!("{}", path.display()))?;
        Ok(PcapOut {
            w,
            path: path.to_owned(),
            link,
        })
    }

    /// Refuses packet `n` of link type `link` where the file is of
    /// another (a pcapng capture may mix interfaces of several): its
    /// bytes would be read as the file's type.
    pub(crate) fn takes(&self, n: u64, link: LinkType) -> Result<()> {
        if link != self.link {
            bail!(
                "--write {}: packet {n} is {link}, where the file is {} (the first packet's): a pcap file holds one link type",
                self.path.display(),
                self.link
            );
        }
        Ok(())
    }

    pub(crate) fn write(&mut self, ts_nanos: u64, frame: &[u8], cut: u32) -> Result<()> {
        let orig_len = (frame.len() as u32).saturating_add(cut);
        self.w
            .write(ts_nanos, frame, orig_len)
            .with_context(|| format!("{}", self.path.display()))
    }

    pub(crate) fn finish(self) -> Result<()> {
        self.w
            .finish()
            .with_context(|| format!("{}", self.path.display()))?;
        Ok(())
    }
}

/// Opens the capture of `args`, after checking that `--write` would not
/// overwrite a file the replay reads (the capture, the policy or a policy
/// it reloads: `File::create` would empty it before it is read). A
/// directory is refused in words; other files that are not regular (a
/// FIFO, `/dev/stdin`, and `-`, standard input) are read as they come.
pub(crate) fn open_capture(args: &ReplayArgs) -> Result<(CaptureReader<BufReader<File>>, Live)> {
    let name = args.file.display();
    // `-`: standard input, as tcpdump and tshark read it (`tcpdump -w - |
    // ctrack replay -`), read as it comes.
    let stdin = std::path::PathBuf::from("/dev/stdin");
    let path = match args.file.as_os_str() == "-" {
        true => &stdin,
        false => &args.file,
    };
    if let Some(w) = &args.write {
        let read = std::iter::once(("the capture", path))
            .chain(args.policy.iter().map(|p| ("the policy", p)))
            .chain(args.reload.iter().map(|r| ("a reloaded policy", &r.path)));
        for (what, path) in read {
            if same_file(w, path) {
                bail!(
                    "--write {}: that is {what} ({}), which the replay reads: write elsewhere",
                    w.display(),
                    path.display()
                );
            }
        }
    }
    if std::fs::metadata(path).is_ok_and(|m| m.is_dir()) {
        bail!("{name}: a directory, not a pcap or pcapng capture");
    }
    let file = File::open(path).with_context(|| format!("{name}"))?;
    let regular = file.metadata().is_ok_and(|m| m.is_file());
    let live = Live((!regular).then(|| file.as_raw_fd()));
    let reader = CaptureReader::new(BufReader::new(file)).with_context(|| format!("{name}"))?;
    Ok((reader, live))
}

/// A capture read as it comes (a pipe, a FIFO, standard input): its
/// descriptor, to see whether the next packet is there yet. `None` for a
/// regular file, which is all there.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Live(Option<RawFd>);

impl Live {
    /// Flushes `out` if the capture has nothing more to read at once, so
    /// that what the replay printed so far shows while it waits for the
    /// next packet (`tcpdump -U -w - | ctrack replay -` prints each packet
    /// as it comes, not at the end). An extra flush where bytes are
    /// already buffered in the reader costs nothing but the flush.
    pub(crate) fn flush_if_waiting(self, out: &mut dyn Write) -> io::Result<()> {
        let Some(fd) = self.0 else {
            return Ok(());
        };
        if !ctrack_datapath::io::wait(&[fd], Duration::ZERO).unwrap_or(true) {
            out.flush()?;
        }
        Ok(())
    }
}

/// Whether `a` and `b` name one file (the same device and inode: a link
/// or another spelling of the path too); false where either is missing.
fn same_file(a: &std::path::Path, b: &std::path::Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (std::fs::metadata(a), std::fs::metadata(b)) {
        (Ok(x), Ok(y)) => (x.dev(), x.ino()) == (y.dev(), y.ino()),
        _ => false,
    }
}

/// Packets the capture holds cut short of their length on the wire (a
/// snapshot length, `tcpdump -s`) inside their IP datagram: the replay
/// reads only the bytes captured, as Open vSwitch's `ovstest
/// test-conntrack pcap` does, so such a packet's IP header is not usable
/// (its lengths run past the bytes there are): the tracker finds it
/// invalid, and ACLs see neither its addresses nor its ports. Said once,
/// on standard error, at the end of the replay, so that a user who sees a
/// capture's packets invalid knows why. A packet whose cut took only its
/// Ethernet padding is whole to the tracker and is not counted.
#[derive(Debug, Default)]
pub(crate) struct CutShort {
    packets: u64,
    first: u64,
    /// The fewest and most bytes captured of such a packet.
    captured: (u32, u32),
}

impl CutShort {
    /// Packet `n`, `frame` of link type `link` as captured, of which
    /// `cut` more bytes were on the wire.
    pub(crate) fn see(&mut self, n: u64, frame: &[u8], link: LinkType, cut: u32) {
        if cut == 0
            || !parse_frame(frame, link)
                .ip
                .is_err_and(|e| e.is_ip_ethertype())
        {
            return;
        }
        let c = u32::try_from(frame.len()).unwrap_or(u32::MAX);
        if self.packets == 0 {
            self.first = n;
            self.captured = (c, c);
        }
        self.packets += 1;
        self.captured = (self.captured.0.min(c), self.captured.1.max(c));
    }

    /// The note, if a packet was counted.
    pub(crate) fn note(&self, file: &Path) -> Option<String> {
        if self.packets == 0 {
            return None;
        }
        let (lo, hi) = self.captured;
        let bytes = if lo == hi {
            format!("{lo} bytes")
        } else {
            format!("{lo} to {hi} bytes")
        };
        Some(format!(
            "{}: note: {} packet(s), the first packet {}, were captured cut short inside their IP datagram ({bytes} of each captured: the capture's snapshot length): read as captured, as Open vSwitch reads them, their IP header is not usable, so the tracker finds them invalid and ACLs see no addresses or ports; capture with a larger snapshot length (tcpdump -s 0) to judge them whole",
            file.display(),
            self.packets,
            self.first,
        ))
    }
}
