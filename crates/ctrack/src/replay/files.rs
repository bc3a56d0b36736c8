//! The files a replay opens beyond its standard output: the capture it
//! reads and the pcap file `--write` fills.

use std::fs::File;
use std::io::{self, BufReader};
use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use ctrack_core::LinkType;
use ctrack_datapath::capture::{CaptureReader, CaptureWriter};

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
/// FIFO, `/dev/stdin`) are read as they come.
pub(crate) fn open_capture(args: &ReplayArgs) -> Result<CaptureReader<BufReader<File>>> {
    let name = args.file.display();
    if let Some(w) = &args.write {
        let read = std::iter::once(("the capture", &args.file))
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
    if std::fs::metadata(&args.file).is_ok_and(|m| m.is_dir()) {
        bail!("{name}: a directory, not a pcap or pcapng capture");
    }
    let file = File::open(&args.file).with_context(|| format!("{name}"))?;
    CaptureReader::new(BufReader::new(file)).with_context(|| format!("{name}"))
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
