//! `ctrack bench flood`: the tracker under attack, with the figures that
//! say it kept what it should keep.
//!
//! | subcommand | attack |
//! | --- | --- |
//! | `syn` | spoofed TCP SYNs from random sources at a table of established connections near its limit |
//! | `udp` | the same with one-way UDP packets |
//! | `icmp` | the same with ICMP echo requests |
//! | `zone` | a SYN flood aimed at one zone, with limits on two |
//! | `frag` | a fragment flood: reassembly memory stays bounded, times out, legitimate datagrams still complete |
//! | `hash` | a hash flood: keys colliding under a known seed, replayed against a fresh one |
//! | `reject` | packets a `reject` ACL refuses, through the firewall: answers within their limit, and what answering costs against dropping |
//!
//! Each run fails (non-zero exit, the reason on stderr) when a property the
//! attack must not break is broken: an established connection lost or no
//! longer passing, fewer than 99% of legitimate newcomers admitted, the
//! table's memory above what the same table holds at its limit of
//! ordinary connections, another zone's connections or count touched.

mod conns;
mod frag;
mod fragmix;
mod hash;
mod reject;

use std::io::Write;

use anyhow::Result;
use clap::{Args, Subcommand};

/// Arguments of `ctrack bench flood`.
#[derive(Debug, Args)]
pub struct FloodArgs {
    #[command(subcommand)]
    pub which: FloodWhich,
}

/// The floods.
#[derive(Debug, Subcommand)]
pub enum FloodWhich {
    /// Spoofed TCP SYNs from random sources.
    Syn(conns::ConnFloodArgs),
    /// One-way UDP packets from random sources.
    Udp(conns::ConnFloodArgs),
    /// ICMP echo requests from random sources.
    Icmp(conns::ConnFloodArgs),
    /// A SYN flood aimed at one of two zones, each with its limit.
    Zone(conns::ConnFloodArgs),
    /// Fragment flood: random hostile fragments (overlapping, never
    /// completing, tiny, oversized, both families) among legitimate
    /// fragmented datagrams; reassembly memory stays within its bound,
    /// times out, and the legitimate datagrams complete.
    Frag(frag::FragFloodArgs),
    /// Hash flood: keys chosen to collide under a known hash seed, replayed
    /// against a tracker with a fresh random seed.
    Hash(hash::HashFloodArgs),
    /// Reject flood: spoofed packets that a `reject` ACL refuses, through
    /// the firewall on one or more threads, against the same flood
    /// refused by a `drop` ACL; the answers stay within their limit.
    Reject(reject::RejectFloodArgs),
}

/// Runs `ctrack bench flood`.
pub(crate) fn run(a: &FloodArgs, json: bool, out: &mut dyn Write) -> Result<()> {
    match &a.which {
        FloodWhich::Syn(c) => conns::run(conns::Attack::Syn, c, json, out),
        FloodWhich::Udp(c) => conns::run(conns::Attack::Udp, c, json, out),
        FloodWhich::Icmp(c) => conns::run(conns::Attack::Icmp, c, json, out),
        FloodWhich::Zone(c) => conns::run(conns::Attack::Zone, c, json, out),
        FloodWhich::Frag(f) => frag::run(f, json, out),
        FloodWhich::Hash(h) => hash::run(h, json, out),
        FloodWhich::Reject(r) => reject::run(r, json, out),
    }
}
