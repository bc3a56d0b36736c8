//! ctrack's datapath: where packets come from and where they go.
//!
//! - [`capture`]: pcap and pcapng files read as a stream of packets in
//!   bounded memory, and pcap files written (what `ctrack replay` reads
//!   and writes);
//! - the live datapath around the sans-IO core (`ctrack-core`,
//!   `ctrack-policy`): the ports packets arrive on and leave by ([`io`]),
//!   the worker threads that run bursts through the firewall ([`live`]),
//!   the [`daemon`] that starts them with their housekeeping thread, the
//!   control server ([`ctl`]), the connection [`events`], the ACL log
//!   ([`acllog`]) and the Prometheus [`metrics`].
//!
//! ```
//! use ctrack_datapath::capture::{CaptureReader, CaptureWriter};
//! use ctrack_wire::LinkType;
//!
//! // Write two raw IP packets to a pcap file in memory...
//! let mut w = CaptureWriter::new(Vec::new(), LinkType::RawIp)?;
//! w.write(1_000_000_000, &[0x45; 20], 20)?;
//! w.write(1_500_000_000, &[0x60; 40], 60)?;
//! let file = w.finish()?;
//!
//! // ...and read them back.
//! let mut r = CaptureReader::new(&file[..])?;
//! let p = r.next_packet()?.expect("a first packet");
//! assert_eq!((p.ts_nanos, p.data.len(), p.link), (1_000_000_000, 20, LinkType::RawIp));
//! let p = r.next_packet()?.expect("a second packet");
//! assert_eq!((p.data.len(), p.orig_len), (40, 60));
//! assert!(r.next_packet()?.is_none());
//! # Ok::<(), ctrack_datapath::capture::CaptureError>(())
//! ```
#![deny(unsafe_code)]

pub mod acllog;
pub mod capture;
pub mod ctl;
pub mod daemon;
pub mod events;
pub mod io;
pub mod live;
pub mod metrics;
#[allow(unsafe_code)]
mod sys;

/// Writes `line` and a newline to standard error, losing it where
/// standard error is closed or failing: a running datapath's messages must
/// never stop it. `eprintln!` panics on a write error: until 2026-12-01 a
/// `ctrack run` whose standard error had closed (a log pipe gone) lost
/// its housekeeping thread at the first link it reported, and with it the
/// expiry of every connection, and its main thread at a SIGHUP.
pub fn say(line: &str) {
    use std::io::Write as _;
    let _ = writeln!(std::io::stderr().lock(), "{line}");
}
