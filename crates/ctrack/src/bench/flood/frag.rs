//! `ctrack bench flood frag`: a fragment flood against the reassembler.
//!
//! Random hostile fragments of both families (never completing, repeats,
//! overlaps, tiny, past 65535 bytes, odd lengths; see
//! [`fragmix`](super::fragmix)) with legitimate fragmented datagrams of
//! other flows among them, in virtual time. It checks that the
//! reassembler's memory stays within its bounds (sampled after every
//! batch), that legitimate datagrams still complete (at least 99%, intact),
//! and that once virtual time passes the reassembly timeout nothing is
//! held. Any of these failing makes the run fail.

use std::io::Write;

use anyhow::{Result, bail};
use clap::Args;
use ctrack_core::FragConfig;
use ctrack_core::frag::{DEFAULT_MAX_FRAGS, FragStats, MAX_FRAGS_LIMIT};
use serde::Serialize;

use super::fragmix::{self, KINDS, Mix, Report};
use crate::args::{MAX_RUNS, bounded};
use crate::bench::{Machine, median};

/// The share of legitimate datagrams that must complete.
const MIN_LEGIT: f64 = 0.99;

/// Arguments of `ctrack bench flood frag`.
#[derive(Debug, Args)]
pub struct FragFloodArgs {
    /// Hostile fragments per run (1 to 1000000000).
    #[arg(long, default_value_t = 10_000_000, value_parser = bounded(1u64, 1_000_000_000))]
    pub(crate) fragments: u64,
    /// One legitimate datagram (2 to 7 fragments) per this many hostile
    /// fragments (1 to 1000000; at least 7 times `--gap`).
    #[arg(long, value_name = "K", default_value_t = 50, value_parser = bounded(1u64, 1_000_000))]
    pub(crate) legit_every: u64,
    /// Hostile fragments between two fragments of one legitimate datagram
    /// (1 to 100000).
    #[arg(long, default_value_t = 4, value_parser = bounded(1u64, 100_000))]
    pub(crate) gap: u64,
    /// Virtual arrival rate in fragments per second (1 to 1000000000):
    /// how fast virtual time moves.
    #[arg(long, default_value_t = 1_000_000, value_parser = bounded(1u64, 1_000_000_000))]
    pub(crate) pps: u64,
    /// The reassembler's bound on fragments held (1 to 5000).
    #[arg(long, default_value_t = DEFAULT_MAX_FRAGS, value_parser = bounded(1, MAX_FRAGS_LIMIT))]
    pub(crate) max_frags: usize,
    /// Seed of the traffic (run i uses seed + i).
    #[arg(long, default_value_t = 1)]
    pub(crate) seed: u64,
    /// Runs; the median rate is reported, every run is checked (1 to 1000).
    #[arg(long, default_value_t = 3, value_parser = bounded(1, MAX_RUNS))]
    pub(crate) runs: usize,
}

impl FragFloodArgs {
    /// Checks the arguments together.
    pub(crate) fn validate(&self) -> Result<(), String> {
        if self.gap.saturating_mul(7) > self.legit_every {
            return Err(format!(
                "--legit-every ({}) must be at least 7 x --gap ({}): legitimate fragments would queue without end",
                self.legit_every, self.gap
            ));
        }
        Ok(())
    }
}

#[derive(Debug, Serialize)]
struct RunJson {
    seed: u64,
    hostile_fragments: u64,
    hostile_kinds: Vec<(&'static str, u64)>,
    legit_fragments: u64,
    seconds: f64,
    fragments_per_sec: f64,
    virtual_ms: u64,
    peak_fragments_held: usize,
    peak_bytes_held: usize,
    peak_datagrams_held: usize,
    peak_memory_estimate: usize,
    legit_sent: u64,
    legit_completed: u64,
    legit_completed_pct: f64,
    legit_corrupt: u64,
    expired_during_flood: u64,
    expired_after_timeout: u64,
    after_timeout_fragments: usize,
    after_timeout_bytes: usize,
    after_timeout_datagrams: usize,
    after_timeout_memory_estimate: usize,
    counters_end_of_flood: FragStats,
    counters_after_timeout: FragStats,
}

#[derive(Debug, Serialize)]
struct FragFloodJson {
    bench: &'static str,
    fragments: u64,
    legit_every: u64,
    gap: u64,
    virtual_pps: u64,
    max_frags: usize,
    max_bytes: usize,
    max_datagrams: usize,
    timeout_ms: u64,
    median_fragments_per_sec: f64,
    runs: Vec<RunJson>,
    failures: Vec<String>,
    machine: Machine,
}

fn run_json(seed: u64, r: &Report) -> RunJson {
    RunJson {
        seed,
        hostile_fragments: r.hostile,
        hostile_kinds: KINDS.iter().copied().zip(r.kinds).collect(),
        legit_fragments: r.legit_fragments,
        seconds: r.busy.as_secs_f64(),
        fragments_per_sec: r.rate(),
        virtual_ms: r.virtual_ms,
        peak_fragments_held: r.peak_held,
        peak_bytes_held: r.peak_bytes,
        peak_datagrams_held: r.peak_datagrams,
        peak_memory_estimate: r.peak_memory,
        legit_sent: r.legit_sent,
        legit_completed: r.legit_completed,
        legit_completed_pct: r.legit_ratio() * 100.0,
        legit_corrupt: r.legit_corrupt,
        expired_during_flood: r.expired_during,
        expired_after_timeout: r.expired_after,
        after_timeout_fragments: r.after_timeout.0,
        after_timeout_bytes: r.after_timeout.1,
        after_timeout_datagrams: r.after_timeout.2,
        after_timeout_memory_estimate: r.after_timeout.3,
        counters_end_of_flood: r.at_end,
        counters_after_timeout: r.final_stats,
    }
}

/// Runs `ctrack bench flood frag`.
pub(crate) fn run(a: &FragFloodArgs, json: bool, out: &mut dyn Write) -> Result<()> {
    if let Err(e) = a.validate() {
        bail!(e);
    }
    let config = FragConfig {
        max_frags: a.max_frags,
        ..FragConfig::default()
    };
    let mut runs = Vec::new();
    let mut failures = Vec::new();
    for i in 0..a.runs {
        let seed = a.seed.wrapping_add(i as u64);
        let mix = Mix {
            fragments: a.fragments,
            legit_every: a.legit_every,
            gap: a.gap,
            pps: a.pps,
            seed,
            batch: 4096,
            config,
        };
        let r = fragmix::run(&mix);
        failures.extend(
            r.failures(&config, MIN_LEGIT)
                .into_iter()
                .map(|f| format!("run {} (seed {seed}): {f}", i + 1)),
        );
        runs.push(run_json(seed, &r));
    }
    let rates: Vec<f64> = runs.iter().map(|r| r.fragments_per_sec).collect();
    let j = FragFloodJson {
        bench: "flood frag",
        fragments: a.fragments,
        legit_every: a.legit_every,
        gap: a.gap,
        virtual_pps: a.pps,
        max_frags: config.max_frags,
        max_bytes: config.max_bytes,
        max_datagrams: config.max_datagrams(),
        timeout_ms: config.timeout_ms,
        median_fragments_per_sec: median(&rates),
        runs,
        failures,
        machine: Machine::this(),
    };
    if json {
        serde_json::to_writer_pretty(&mut *out, &j)?;
        writeln!(out)?;
    } else {
        table(&j, out)?;
    }
    if !j.failures.is_empty() {
        bail!("fragment flood: {}", j.failures.join("; "));
    }
    Ok(())
}

fn table(j: &FragFloodJson, out: &mut dyn Write) -> Result<()> {
    writeln!(
        out,
        "fragment flood: {} hostile fragments per run, one legitimate datagram per {} (a fragment every {}), \
         virtual {} fragments/s; bounds {} fragments, {} bytes, {} datagrams, timeout {} ms",
        j.fragments,
        j.legit_every,
        j.gap,
        j.virtual_pps,
        j.max_frags,
        j.max_bytes,
        j.max_datagrams,
        j.timeout_ms
    )?;
    writeln!(
        out,
        "{:>4} {:>10} {:>10} {:>9} {:>11} {:>9} {:>11} {:>18} {:>9} {:>9} {:>10}",
        "seed",
        "Mfrag/s",
        "peak held",
        "peak KiB",
        "peak dgrams",
        "peak mem",
        "legit sent",
        "legit completed",
        "evicted",
        "timed out",
        "after t/o"
    )?;
    for r in &j.runs {
        writeln!(
            out,
            "{:>4} {:>10.2} {:>10} {:>9} {:>11} {:>8}K {:>11} {:>9} {:>7.3}% {:>9} {:>9} {:>10}",
            r.seed,
            r.fragments_per_sec / 1e6,
            r.peak_fragments_held,
            r.peak_bytes_held / 1024,
            r.peak_datagrams_held,
            r.peak_memory_estimate / 1024,
            r.legit_sent,
            r.legit_completed,
            r.legit_completed_pct,
            r.counters_end_of_flood.evicted,
            r.counters_after_timeout.expired,
            format!("{}f/{}B", r.after_timeout_fragments, r.after_timeout_bytes),
        )?;
    }
    if let Some(r) = j.runs.first() {
        let c = &r.counters_end_of_flood;
        writeln!(
            out,
            "first run's counters: {} held in, {} completed, {} evicted, {} too small, {} malformed, \
             {} duplicate, {} overlapping datagrams, {} too big, {} dropped with their datagram, {} refused at a limit",
            c.accepted,
            c.completed,
            c.evicted,
            c.too_small,
            c.malformed,
            c.duplicate,
            c.overlap,
            c.too_big,
            c.dropped,
            c.limit
        )?;
    }
    writeln!(
        out,
        "median {:.2} M fragments/s; {}",
        j.median_fragments_per_sec / 1e6,
        if j.failures.is_empty() {
            "all bounds held, legitimate datagrams completed, nothing held after the timeout"
                .to_string()
        } else {
            format!("FAILED: {}", j.failures.join("; "))
        }
    )?;
    Ok(())
}
