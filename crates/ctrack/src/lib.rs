//! The `ctrack` command's building blocks: argument checks, packet
//! summaries, and the subcommands (`replay`, `bench`). `main.rs` only
//! parses arguments and reports errors; capture files are read and
//! written by `ctrack-datapath`.
//!
//! A replay, as `ctrack replay --format ovs FILE` runs it:
//!
//! ```
//! use clap::Parser;
//! use ctrack::replay::{self, ReplayArgs};
//!
//! #[derive(Parser)]
//! struct Cli {
//!     #[command(flatten)]
//!     replay: ReplayArgs,
//! }
//!
//! let cli = Cli::parse_from(["ctrack", "--format", "ovs", "../../examples/traffic.pcap"]);
//! let mut out = Vec::new();
//! replay::run(&cli.replay, &mut out)?;
//! let text = String::from_utf8(out)?;
//! // One line per packet, `N: ct_state` as `ovstest test-conntrack pcap`.
//! assert!(text.lines().all(|l| l.contains(": ")));
//! assert!(text.contains("est|rpl|trk"));
//! # Ok::<(), anyhow::Error>(())
//! ```
#![forbid(unsafe_code)]

pub mod args;
pub mod bench;
pub mod ctl;
pub mod fwreplay;
pub mod policy;
pub mod replay;
pub mod run;
