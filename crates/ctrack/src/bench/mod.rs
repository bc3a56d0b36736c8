//! `ctrack bench`: the measurements of the seed documents, with their
//! arguments, and the ones they lack.
//!
//! | subcommand | workload |
//! | --- | --- |
//! | `benchmark N_THREADS N_PKTS BATCH [CHANGE]` | `ovstest test-conntrack benchmark` |
//! | `zones N_CONNS N_ZONES ITERATIONS` | `ovstest test-conntrack benchmark-zones` |
//! | `cps --threads N --conns M` | new connections per second, filling then at a steady size |
//! | `lookup --threads N --conns M [--zipf S]` | established packets per second over a large table |
//! | `memory --conns M` | bytes per connection, all indexes included |
//!
//! Each prints a table for people, or with `--json` one JSON document.
//! With `--ovstest PATH`, `benchmark` and `zones` also run Open vSwitch's
//! tool with the same arguments in the same invocation and print the
//! ratio. Timings are wall-clock (`Instant`) around the measured work only.

mod cps;
mod lookup;
mod memory;
mod ovs;
mod packets;
mod zones;

use std::io::Write;
use std::path::PathBuf;
use std::sync::Barrier;
use std::time::{Duration, Instant};

use anyhow::{Result, bail};
use clap::{Args, Subcommand};
use ctrack_core::{Config, CtAction, LinkType, Stats, Time, Tracker};
use serde::Serialize;

/// Arguments of `ctrack bench`.
#[derive(Debug, Args)]
pub struct BenchArgs {
    /// Print one JSON document instead of a table.
    #[arg(long, global = true)]
    pub json: bool,
    #[command(subcommand)]
    pub which: Which,
}

/// The benchmarks.
#[derive(Debug, Subcommand)]
pub enum Which {
    /// The workload of `ovstest test-conntrack benchmark`: each thread sends
    /// a batch of BATCH UDP packets of one connection (its own) N_PKTS/BATCH
    /// times, committing.
    Benchmark(BenchmarkArgs),
    /// The workload of `ovstest test-conntrack benchmark-zones`: fill
    /// N_ZONES zones with N_CONNS connections, then per iteration flush a
    /// full zone, refill it, run it again without commit, flush an empty
    /// zone.
    Zones(zones::ZonesArgs),
    /// New connections per second: fill an empty table, then hold it at a
    /// steady size with expiry removing as many as are created.
    Cps(cps::CpsArgs),
    /// Established packets per second over a table of M connections.
    Lookup(lookup::LookupArgs),
    /// Bytes per connection, all indexes included.
    Memory(memory::MemoryArgs),
}

/// Arguments of `ctrack bench benchmark`.
#[derive(Debug, Args)]
pub struct BenchmarkArgs {
    /// Threads.
    pub n_threads: usize,
    /// Packets per thread.
    pub n_pkts: u64,
    /// Packets per batch (1 to 32).
    pub batch: usize,
    /// 1: use destination port 3 instead of 2 (as `ovstest`'s CHANGE).
    #[arg(default_value_t = 0)]
    pub change: u8,
    /// Spread each thread's batch over this many connections (packet i of a
    /// batch on connection i mod K) instead of one.
    #[arg(long, default_value_t = 1)]
    pub flows_per_thread: usize,
    /// Runs; the median is reported.
    #[arg(long, default_value_t = 3)]
    pub runs: usize,
    /// Also run `PATH test-conntrack benchmark` with the same arguments and
    /// report the ratio.
    #[arg(long)]
    pub ovstest: Option<PathBuf>,
}

/// Runs `ctrack bench`.
pub fn run(args: &BenchArgs, out: &mut dyn Write) -> Result<()> {
    match &args.which {
        Which::Benchmark(a) => benchmark(a, args.json, out),
        Which::Zones(a) => zones::run(a, args.json, out),
        Which::Cps(a) => cps::run(a, args.json, out),
        Which::Lookup(a) => lookup::run(a, args.json, out),
        Which::Memory(a) => memory::run(a, args.json, out),
    }
}

/// The median of some durations.
pub(crate) fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// The machine, for the record.
#[derive(Debug, Serialize)]
pub(crate) struct Machine {
    cpus: usize,
    model: String,
}

impl Machine {
    pub(crate) fn this() -> Machine {
        let model = std::fs::read_to_string("/proc/cpuinfo")
            .ok()
            .and_then(|s| {
                s.lines()
                    .find(|l| l.starts_with("model name"))
                    .and_then(|l| l.split_once(':'))
                    .map(|(_, m)| m.trim().to_string())
            })
            .unwrap_or_else(|| "unknown".into());
        Machine {
            cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
            model,
        }
    }
}

#[derive(Debug, Serialize)]
struct BenchmarkJson {
    bench: &'static str,
    threads: usize,
    packets_per_thread: u64,
    batch: usize,
    flows_per_thread: usize,
    runs_ms: Vec<f64>,
    median_ms: f64,
    mpps: f64,
    ns_per_packet_per_thread: f64,
    ovs_runs_ms: Option<Vec<f64>>,
    ovs_median_ms: Option<f64>,
    speedup_vs_ovs: Option<f64>,
    machine: Machine,
}

fn benchmark(a: &BenchmarkArgs, json: bool, out: &mut dyn Write) -> Result<()> {
    if a.n_threads == 0 {
        bail!("n_threads must be at least one");
    }
    if a.batch == 0 || a.batch > 32 {
        bail!("batch must be between 1 and 32");
    }
    if a.flows_per_thread == 0 || a.runs == 0 {
        bail!("--flows-per-thread and --runs must be at least one");
    }
    let mut runs = Vec::new();
    let mut ovs_runs = Vec::new();
    for _ in 0..a.runs {
        // Interleave the two so that both see the same machine state.
        runs.push(benchmark_once(a));
        if let Some(path) = &a.ovstest {
            ovs_runs.push(ovs::benchmark(path, a)?);
        }
    }
    let med = median(runs.clone());
    let total = a.n_threads as f64 * a.n_pkts as f64;
    let mpps = total / med.as_secs_f64() / 1e6;
    let ovs_med = (!ovs_runs.is_empty()).then(|| median(ovs_runs.clone()));
    let speedup = ovs_med.map(|o| o.as_secs_f64() / med.as_secs_f64());
    if json {
        let j = BenchmarkJson {
            bench: "benchmark",
            threads: a.n_threads,
            packets_per_thread: a.n_pkts,
            batch: a.batch,
            flows_per_thread: a.flows_per_thread,
            runs_ms: runs.iter().map(|d| d.as_secs_f64() * 1e3).collect(),
            median_ms: med.as_secs_f64() * 1e3,
            mpps,
            ns_per_packet_per_thread: med.as_secs_f64() * 1e9 / a.n_pkts as f64,
            ovs_runs_ms: ovs_med.map(|_| ovs_runs.iter().map(|d| d.as_secs_f64() * 1e3).collect()),
            ovs_median_ms: ovs_med.map(|d| d.as_secs_f64() * 1e3),
            speedup_vs_ovs: speedup,
            machine: Machine::this(),
        };
        serde_json::to_writer_pretty(&mut *out, &j)?;
        writeln!(out)?;
        return Ok(());
    }
    writeln!(out, "conntrack:  {:5} ms", med.as_millis())?;
    writeln!(
        out,
        "{} threads x {} packets, batch {}, {} flow(s) per thread: {:.2} Mpps ({:.1} ns/packet/thread), median of {} runs {:?}",
        a.n_threads,
        a.n_pkts,
        a.batch,
        a.flows_per_thread,
        mpps,
        med.as_secs_f64() * 1e9 / a.n_pkts as f64,
        a.runs,
        runs.iter().map(|d| d.as_millis()).collect::<Vec<_>>()
    )?;
    if let (Some(o), Some(s)) = (ovs_med, speedup) {
        writeln!(
            out,
            "ovstest:    {:5} ms (median of {:?}); ctrack is {:.2}x faster",
            o.as_millis(),
            ovs_runs.iter().map(|d| d.as_millis()).collect::<Vec<_>>(),
            s
        )?;
    }
    Ok(())
}

fn benchmark_once(a: &BenchmarkArgs) -> Duration {
    let tracker = Tracker::new(Config::default());
    let barrier = Barrier::new(a.n_threads + 1);
    let now = Time::from_secs(1);
    let action = CtAction::commit(0);
    std::thread::scope(|s| {
        for tid in 0..a.n_threads {
            let tracker = &tracker;
            let barrier = &barrier;
            s.spawn(move || {
                let frames: Vec<Vec<u8>> = (0..a.batch)
                    .map(|i| {
                        let flow = (i % a.flows_per_thread) as u16;
                        let dst = if a.change != 0 { 3 } else { 2 };
                        // Each thread's own source port, as ovstest; extra
                        // flows take further destination ports.
                        packets::ovs_udp(1 + tid as u16, dst + flow * 4)
                    })
                    .collect();
                let batch: Vec<&[u8]> = frames.iter().map(Vec::as_slice).collect();
                let mut verdicts = Vec::with_capacity(a.batch);
                let mut stats = Stats::default();
                barrier.wait();
                let mut i = 0;
                while i < a.n_pkts {
                    verdicts.clear();
                    tracker.process_batch(
                        &batch,
                        LinkType::Ethernet,
                        &action,
                        now,
                        &mut verdicts,
                        &mut stats,
                    );
                    i += a.batch as u64;
                }
                std::hint::black_box(&verdicts);
                barrier.wait();
            });
        }
        barrier.wait();
        let start = Instant::now();
        barrier.wait();
        start.elapsed()
    })
}
