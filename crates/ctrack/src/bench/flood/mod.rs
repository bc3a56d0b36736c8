//! `ctrack bench flood WHAT`: the tracker under attack.
//!
//! | WHAT | measures |
//! | --- | --- |
//! | `frag` | a fragment flood: reassembly memory stays bounded, times out, legitimate datagrams still complete |
//! | `hash` | a hash flood: keys colliding under a known seed, replayed against a fresh one |

mod frag;
mod fragmix;
mod hash;

use std::io::Write;

use anyhow::Result;
use clap::{Args, Subcommand};

/// Arguments of `ctrack bench flood`.
#[derive(Debug, Args)]
pub struct FloodArgs {
    #[command(subcommand)]
    pub(crate) which: FloodWhich,
}

/// The floods.
#[derive(Debug, Subcommand)]
pub(crate) enum FloodWhich {
    /// Fragment flood: random hostile fragments (overlapping, never
    /// completing, tiny, oversized, both families) among legitimate
    /// fragmented datagrams; reassembly memory stays within its bound,
    /// times out, and the legitimate datagrams complete.
    Frag(frag::FragFloodArgs),
    /// Hash flood: keys chosen to collide under a known hash seed, replayed
    /// against a tracker with a fresh random seed.
    Hash(hash::HashFloodArgs),
}

/// Runs `ctrack bench flood`.
pub(crate) fn run(a: &FloodArgs, json: bool, out: &mut dyn Write) -> Result<()> {
    match &a.which {
        FloodWhich::Frag(f) => frag::run(f, json, out),
        FloodWhich::Hash(h) => hash::run(h, json, out),
    }
}
