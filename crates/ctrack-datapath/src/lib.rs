//! ctrack's datapath: where packets come from and where they go.
//!
//! Today it holds the [`capture`] module: reading pcap and pcapng files as
//! a stream of packets in bounded memory, and writing pcap files. It is
//! the future home of the live datapath around the sans-IO core
//! (`ctrack-core`): the ports packets arrive on and leave by, the worker
//! threads that run bursts through the tracker and sweep it, and the
//! control server that configures them while they run.
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
