//! `ctrack bench zones N_CONNS N_ZONES ITERATIONS`: the workload of
//! `ovstest test-conntrack benchmark-zones`.
//!
//! Open vSwitch's table reports an exponentially weighted average as "Avg";
//! this one reports the true mean and the true 95th percentile (nearest
//! rank over every sample). A flush here is two steps, timed apart: the
//! flush itself (the zone's connections vanish for every packet, O(1)) and
//! the reclaim of their memory by a sweep (work proportional to the zone).
//! Their sum is what Open vSwitch's "flush full zone" measures.

use std::io::Write;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Result, bail};
use clap::Args;
use ctrack_core::{Config, CtAction, Handle, LinkType, Stats, Time, Tracker};
use serde::Serialize;

use super::{Machine, ovs, packets};
use crate::args::{bounded, power_of_two};

/// Arguments of `ctrack bench zones`.
#[derive(Debug, Args)]
pub struct ZonesArgs {
    /// Connections per zone (N_CONNS × N_ZONES at most 3000000, the
    /// table's default limit, as in `ovstest`).
    #[arg(value_parser = bounded(1, MAX_CONNS))]
    pub n_conns: u64,
    /// Zones filled at the start (1 to 65534: zone 65535 is the empty zone
    /// flushed).
    #[arg(value_parser = bounded(1, u64::from(u16::MAX) - 1))]
    pub n_zones: u64,
    /// Iterations (1 to 1000000).
    #[arg(value_parser = bounded(1, MAX_ITERATIONS))]
    pub iterations: u64,
    /// Also run `PATH test-conntrack benchmark-zones` with the same
    /// arguments and report ratios.
    #[arg(long)]
    pub ovstest: Option<PathBuf>,
    /// Fault in the table's memory from a background thread, ahead of the
    /// packet path (`Tracker::populate_ahead`, as `ctrack run` does).
    #[arg(long, conflicts_with = "prefault")]
    pub populate: bool,
    /// Fault in the table's memory for its limit before timing anything
    /// (`Config::prefault`, as a daemon sized for its load would), so that
    /// the initial insert does not pay the kernel's zeroing of fresh pages.
    #[arg(long)]
    pub prefault: bool,
    /// Table shards per family (a power of two up to 256; default: the
    /// library's, `DEFAULT_SHARDS`, 64). One thread fills this table, in
    /// the order it then looks connections up; fewer shards keep
    /// consecutive connections' records closer in memory.
    #[arg(long, value_parser = power_of_two(ctrack_core::MAX_SHARDS))]
    pub shards: Option<usize>,
}

/// The most connections in all zones: the tracker's default limit.
const MAX_CONNS: u64 = ctrack_core::track::DEFAULT_MAX_CONNS as u64;
/// The most iterations (each keeps six timings).
const MAX_ITERATIONS: u64 = 1_000_000;

impl ZonesArgs {
    /// Checks the arguments together.
    pub fn validate(&self) -> Result<(), String> {
        if !(1..=MAX_CONNS).contains(&self.n_conns) {
            return Err(format!("N_CONNS must be from 1 to {MAX_CONNS}"));
        }
        if !(1..u64::from(u16::MAX)).contains(&self.n_zones) {
            return Err(format!("N_ZONES must be from 1 to {}", u16::MAX - 1));
        }
        if !(1..=MAX_ITERATIONS).contains(&self.iterations) {
            return Err(format!("ITERATIONS must be from 1 to {MAX_ITERATIONS}"));
        }
        if self.n_conns.saturating_mul(self.n_zones) > MAX_CONNS {
            return Err(format!(
                "N_CONNS × N_ZONES ({} × {}) must be at most {MAX_CONNS}, the connection limit of the table (as in ovstest): more would be refused",
                self.n_conns, self.n_zones
            ));
        }
        Ok(())
    }
}

/// Summary of one column, in microseconds.
#[derive(Debug, Clone, Copy, Serialize)]
struct Summary {
    min: f64,
    max: f64,
    p95: f64,
    mean: f64,
}

fn summarize(mut v: Vec<Duration>) -> Summary {
    v.sort();
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    let n = v.len();
    // Nearest rank: the smallest value with at least 95% of samples <= it.
    let rank = ((n as f64) * 0.95).ceil() as usize;
    Summary {
        min: us(v[0]),
        max: us(v[n - 1]),
        p95: us(v[rank.clamp(1, n) - 1]),
        mean: v.iter().map(|d| us(*d)).sum::<f64>() / n as f64,
    }
}

#[derive(Debug, Serialize)]
struct ZonesJson {
    bench: &'static str,
    n_conns: u64,
    n_zones: u64,
    iterations: u64,
    /// Table shards per family.
    shards: usize,
    initial_insert_ms: f64,
    initial_insert_conns_per_sec: f64,
    commit: Summary,
    no_commit: Summary,
    flush_full_zone: Summary,
    reclaim_flushed_zone: Summary,
    flush_and_reclaim: Summary,
    flush_empty_zone: Summary,
    ovs: Option<ovs::ZonesResult>,
    machine: Machine,
}

/// The frame of connection `i`, with `ovstest`'s port rule.
fn frame(i: u64) -> Vec<u8> {
    let hi = ((i >> 16) & 0xffff) as u16;
    let lo = (i & 0xffff) as u16;
    packets::ovs_udp(
        if hi == 0 { u16::MAX } else { hi },
        if lo == 0 { u16::MAX } else { lo },
    )
}

/// The table under test and the frames that fill one zone of it.
struct Workload {
    frames: Vec<Vec<u8>>,
    tracker: Tracker,
    now: Time,
}

impl Workload {
    fn new(n_conns: u64, prefault: bool, shards: usize) -> Self {
        Workload {
            frames: (0..n_conns).map(frame).collect(),
            tracker: Tracker::new(Config {
                prefault,
                shards,
                ..Config::default()
            }),
            now: Time::from_secs(1),
        }
    }

    /// Sends every frame once in `zone`, committing or not: one packet
    /// per call, as `ovstest` calls `conntrack_execute`, through a
    /// per-thread handle (the tracker's interface for such callers), the
    /// bench thread's one, kept from pass to pass as a packet thread keeps
    /// its own.
    fn run_zone(&self, handle: &mut Handle<'_>, zone: u16, commit: bool) {
        let action = CtAction {
            zone,
            commit,
            ..CtAction::default()
        };
        let mut stats = Stats::default();
        for f in &self.frames {
            std::hint::black_box(handle.process(
                f,
                LinkType::Ethernet,
                &action,
                self.now,
                &mut stats,
            ));
        }
    }

    /// Fills zones `0..n_zones`; returns how long it took.
    fn fill(&self, n_zones: u64) -> Duration {
        let mut handle = self.tracker.handle();
        let start = Instant::now();
        for z in 0..n_zones {
            self.run_zone(&mut handle, z as u16, true);
        }
        start.elapsed()
    }

    /// Runs `iterations` iterations, keeping every timing; returns them
    /// and the time the whole run took.
    fn iterate(&self, iterations: u64) -> (Samples, Duration) {
        let mut s = Samples::default();
        let mut handle = self.tracker.handle();
        let run_start = Instant::now();
        for _ in 0..iterations {
            // The packets stop while the zone is flushed and reclaimed: the
            // handle's pin moves on, so that what the reclaim retires is
            // not held back by this thread (as a packet thread going idle
            // does).
            handle.quiesce();
            let t = Instant::now();
            self.tracker.flush_zone(1);
            let f = t.elapsed();
            let t = Instant::now();
            self.tracker
                .sweep(self.now, usize::MAX, &mut Stats::default());
            let r = t.elapsed();
            s.flush.push(f);
            s.reclaim.push(r);
            s.both.push(f + r);

            let t = Instant::now();
            self.run_zone(&mut handle, 1, true);
            s.commit.push(t.elapsed());

            let t = Instant::now();
            self.run_zone(&mut handle, 1, false);
            s.no_commit.push(t.elapsed());

            let t = Instant::now();
            self.tracker.flush_zone(u16::MAX);
            s.empty.push(t.elapsed());
        }
        (s, run_start.elapsed())
    }
}

/// Every iteration's timings, per column.
#[derive(Default)]
struct Samples {
    commit: Vec<Duration>,
    no_commit: Vec<Duration>,
    flush: Vec<Duration>,
    reclaim: Vec<Duration>,
    both: Vec<Duration>,
    empty: Vec<Duration>,
}

pub(crate) fn run(a: &ZonesArgs, json: bool, out: &mut dyn Write) -> Result<()> {
    if let Err(e) = a.validate() {
        bail!(e);
    }
    let shards = a.shards.unwrap_or(Config::default().shards);
    let w = Workload::new(a.n_conns, a.prefault, shards);
    let (insert, (samples, run_time)) = super::with_populator(&w.tracker, a.populate, || {
        (w.fill(a.n_zones), w.iterate(a.iterations))
    });
    let ovs = match &a.ovstest {
        Some(p) => Some(ovs::zones(p, a.n_conns, a.n_zones, a.iterations)?),
        None => None,
    };
    let r = ZonesJson {
        bench: "zones",
        n_conns: a.n_conns,
        n_zones: a.n_zones,
        iterations: a.iterations,
        shards,
        initial_insert_ms: insert.as_secs_f64() * 1e3,
        initial_insert_conns_per_sec: (a.n_conns * a.n_zones) as f64 / insert.as_secs_f64(),
        commit: summarize(samples.commit),
        no_commit: summarize(samples.no_commit),
        flush_full_zone: summarize(samples.flush),
        reclaim_flushed_zone: summarize(samples.reclaim),
        flush_and_reclaim: summarize(samples.both),
        flush_empty_zone: summarize(samples.empty),
        ovs,
        machine: Machine::this(),
    };
    if json {
        serde_json::to_writer_pretty(&mut *out, &r)?;
        writeln!(out)?;
        return Ok(());
    }
    write_table(out, &r, run_time)?;
    if let Some(o) = &r.ovs {
        write_ovs(out, &r, o)?;
    }
    Ok(())
}

/// ctrack's own results, as a table.
fn write_table(out: &mut dyn Write, r: &ZonesJson, run_time: Duration) -> Result<()> {
    writeln!(
        out,
        "initial insert time: {:.0} ms ({:.2} M connections/s)",
        r.initial_insert_ms,
        r.initial_insert_conns_per_sec / 1e6
    )?;
    writeln!(out, "flush run time: {} ms", run_time.as_millis())?;
    writeln!(
        out,
        "results (us; mean and p95 are exact, over every iteration):"
    )?;
    let cols: [(&str, Summary); 6] = [
        ("ct execute (commit)", r.commit),
        ("ct execute (no commit)", r.no_commit),
        ("flush full zone", r.flush_full_zone),
        ("  reclaim (sweep)", r.reclaim_flushed_zone),
        ("  flush + reclaim", r.flush_and_reclaim),
        ("flush empty zone", r.flush_empty_zone),
    ];
    writeln!(
        out,
        "| {:<24} | {:>12} | {:>12} | {:>12} | {:>12} |",
        "", "Min", "Max", "95%ile", "Mean"
    )?;
    for (name, s) in cols {
        writeln!(
            out,
            "| {name:<24} | {:>12.3} | {:>12.3} | {:>12.3} | {:>12.3} |",
            s.min, s.max, s.p95, s.mean
        )?;
    }
    Ok(())
}

/// `ovstest`'s results with the same arguments, and ctrack's ratios to
/// them.
fn write_ovs(out: &mut dyn Write, r: &ZonesJson, o: &ovs::ZonesResult) -> Result<()> {
    writeln!(out)?;
    writeln!(
        out,
        "ovstest, same arguments: initial insert {} ms (ctrack {:.1}x faster)",
        o.initial_insert_ms,
        o.initial_insert_ms as f64 / r.initial_insert_ms
    )?;
    writeln!(
        out,
        "| {:<24} | {:>12} | {:>12} | {:>12} | {:>12} | {:>16} |",
        "ovstest", "Min", "Max", "95%ile", "Avg (EWMA)", "ctrack faster by"
    )?;
    let ours = [
        r.commit,
        r.no_commit,
        r.flush_and_reclaim,
        r.flush_empty_zone,
    ];
    let names = [
        "ct execute (commit)",
        "ct execute (no commit)",
        "flush full zone",
        "flush empty zone",
    ];
    for (i, name) in names.iter().enumerate() {
        let [min, max, p95, avg] = o.table[i];
        let ratio = if ours[i].min > 0.0 {
            format!("{:.1}x (min)", min / ours[i].min)
        } else {
            "-".into()
        };
        writeln!(
            out,
            "| {name:<24} | {min:>12.0} | {max:>12.0} | {p95:>12.2} | {avg:>12.2} | {ratio:>16} |"
        )?;
    }
    writeln!(
        out,
        "(flush full zone compared with ctrack's flush + reclaim; the flush alone is {:.1}x faster by min)",
        o.table[2][0] / r.flush_full_zone.min.max(1e-3)
    )?;
    Ok(())
}
