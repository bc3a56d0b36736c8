//! `ctrack bench`: Open vSwitch's conntrack benchmarks (the workloads of
//! `ovstest test-conntrack`), with their arguments, and the ones they lack.
//!
//! | subcommand | workload |
//! | --- | --- |
//! | `benchmark N_THREADS N_PKTS BATCH [CHANGE]` | `ovstest test-conntrack benchmark` |
//! | `zones N_CONNS N_ZONES ITERATIONS` | `ovstest test-conntrack benchmark-zones` |
//! | `cps --threads N --conns M` | new connections per second, filling then at a steady size |
//! | `lookup --threads N --conns M [--zipf S]` | established packets per second over a large table |
//! | `memory --conns M` | bytes per connection, all indexes included |
//! | `policy stage\|passes\|stateless\|classify\|reload` | the firewall stage (policy + tracker) and its classifier |
//! | `flood syn\|udp\|icmp\|zone` | floods against a table of established connections near its limit |
//!
//! Each prints a table for people, or with `--json` one JSON document.
//! With `--ovstest PATH`, `benchmark` and `zones` also run Open vSwitch's
//! tool with the same arguments in the same invocation and print the
//! ratio. Timings are wall-clock (`Instant`) around the measured work only.

mod cps;
mod flood;
mod lookup;
mod memory;
mod ovs;
mod packets;
mod policy;
mod threads;
mod zones;

use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Result, bail};
use clap::{Args, Subcommand};
use ctrack_core::{Config, CtAction, LinkType, Stats, Time, Tracker};
use serde::Serialize;

use crate::args::{MAX_RUNS, MAX_THREADS, at_least, bounded};
use threads::{StartLine, spawn_all};

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
    /// The firewall stage (policy + tracker) and its classifier: `stage`,
    /// `passes`, `stateless`, `classify`, `reload`.
    Policy(policy::PolicyBenchArgs),
    /// Under attack: `syn`, `udp`, `icmp` and `zone` floods against a table
    /// of established connections near its limit, `frag` (fragment flood),
    /// `hash` (hash flood).
    Flood(flood::FloodArgs),
}

/// Arguments of `ctrack bench benchmark`.
#[derive(Debug, Args)]
pub struct BenchmarkArgs {
    /// Threads (1 to 1024).
    #[arg(value_parser = bounded(1, MAX_THREADS))]
    pub n_threads: usize,
    /// Packets per thread (at least 1).
    #[arg(value_parser = at_least(1u64))]
    pub n_pkts: u64,
    /// Packets per batch (1 to 32).
    #[arg(value_parser = bounded(1, MAX_BATCH))]
    pub batch: usize,
    /// 1: use destination port 3 instead of 2 (as `ovstest`'s CHANGE); 0
    /// or 1.
    #[arg(default_value_t = 0, value_parser = bounded(0u8, 1))]
    pub change: u8,
    /// Spread each thread's batch over this many connections (packet i of a
    /// batch on connection i mod K) instead of one; at most BATCH.
    #[arg(long, value_name = "K", default_value_t = 1, value_parser = bounded(1, MAX_BATCH))]
    pub flows_per_thread: usize,
    /// Runs; the median is reported (1 to 1000).
    #[arg(long, default_value_t = 3, value_parser = bounded(1, MAX_RUNS))]
    pub runs: usize,
    /// Also run `PATH test-conntrack benchmark` with the same arguments and
    /// report the ratio.
    #[arg(long)]
    pub ovstest: Option<PathBuf>,
}

/// The most connections a benchmark fills its table with: with the room
/// `cps` and `lookup` add to their limit, the table stays within
/// [`MAX_CONNS`](crate::args::MAX_CONNS).
pub(crate) const MAX_BENCH_CONNS: u64 = 400_000_000;

/// The label `--label` (of `lookup`, `cps`, `memory`) commits every
/// connection with: both persisting ACLs' identities and an ACL's label,
/// as the firewall writes them.
pub(crate) const LABEL: u128 = 7 << 96 | 1 << 48 | 1;

/// The largest batch of `benchmark` (the tracker's burst).
const MAX_BATCH: usize = 32;

impl BenchArgs {
    /// Checks between arguments: Err names the benchmark and says what is
    /// wrong.
    pub fn validate(&self) -> Result<(), (&'static str, String)> {
        match &self.which {
            Which::Benchmark(a) => a.validate().map_err(|e| ("benchmark", e)),
            Which::Zones(a) => a.validate().map_err(|e| ("zones", e)),
            Which::Cps(_) | Which::Lookup(_) | Which::Policy(_) | Which::Flood(_) => Ok(()),
            Which::Memory(a) => a.validate().map_err(|e| ("memory", e)),
        }
    }
}

impl BenchmarkArgs {
    /// Checks between arguments (each alone is checked as it is parsed).
    pub fn validate(&self) -> Result<(), String> {
        if self.n_threads == 0 || self.n_threads > MAX_THREADS {
            return Err(format!("N_THREADS must be from 1 to {MAX_THREADS}"));
        }
        if self.n_pkts == 0 {
            return Err("N_PKTS must be at least 1".into());
        }
        if self.batch == 0 || self.batch > MAX_BATCH {
            return Err(format!("BATCH must be from 1 to {MAX_BATCH}"));
        }
        if self.change > 1 {
            return Err("CHANGE must be 0 or 1".into());
        }
        if self.runs == 0 || self.runs > MAX_RUNS {
            return Err(format!("--runs must be from 1 to {MAX_RUNS}"));
        }
        if self.flows_per_thread == 0 || self.flows_per_thread > self.batch {
            return Err(format!(
                "--flows-per-thread ({}) must be from 1 to BATCH ({}): a batch spreads over at most as many connections as it has packets",
                self.flows_per_thread, self.batch
            ));
        }
        Ok(())
    }
}

/// Runs `ctrack bench`.
pub fn run(args: &BenchArgs, out: &mut dyn Write) -> Result<()> {
    match &args.which {
        Which::Benchmark(a) => benchmark(a, args.json, out),
        Which::Zones(a) => zones::run(a, args.json, out),
        Which::Cps(a) => cps::run(a, args.json, out),
        Which::Lookup(a) => lookup::run(a, args.json, out),
        Which::Memory(a) => memory::run(a, args.json, out),
        Which::Policy(a) => policy::run(a, args.json, out),
        Which::Flood(a) => flood::run(a, args.json, out),
    }
}

/// The median of some measurements (of an even number, the upper one).
///
/// # Panics
///
/// If `values` is empty.
/// Runs `f` while a background thread faults in `tracker`'s memory ahead
/// of it ([`Tracker::populate_ahead`], as `ctrack run` does), or runs it
/// alone when `on` is false.
pub(crate) fn with_populator<R>(tracker: &Tracker, on: bool, f: impl FnOnce() -> R) -> R {
    use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
    if !on {
        return f();
    }
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| {
            while !stop.load(Relaxed) {
                if tracker.populate_ahead() == 0 {
                    std::thread::sleep(Duration::from_micros(200));
                }
            }
        });
        let r = f();
        stop.store(true, Relaxed);
        r
    })
}

pub(crate) fn median<T: Copy + PartialOrd>(values: &[T]) -> T {
    let mut v = values.to_vec();
    v.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
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
    /// Each thread's own time in the run of the median, fastest first:
    /// the run's figure is its slowest thread's (the time from the start
    /// line to the last thread's end), so a spread here says that some
    /// threads were held up, not all.
    thread_ms: Vec<f64>,
    machine: Machine,
}

fn benchmark(a: &BenchmarkArgs, json: bool, out: &mut dyn Write) -> Result<()> {
    if let Err(e) = a.validate() {
        bail!(e);
    }
    let mut runs = Vec::new();
    let mut own = Vec::new();
    let mut ovs_runs = Vec::new();
    for _ in 0..a.runs {
        // Interleave the two so that both see the same machine state.
        let (run, threads) = benchmark_once(a)?;
        runs.push(run);
        own.push(threads);
        if let Some(path) = &a.ovstest {
            ovs_runs.push(ovs::benchmark(path, a)?);
        }
    }
    let med = median(&runs);
    // The threads' own times in the run whose time is the median.
    let thread_ms: Vec<f64> = runs
        .iter()
        .position(|&r| r == med)
        .map(|i| own[i].iter().map(|d| d.as_secs_f64() * 1e3).collect())
        .unwrap_or_default();
    let total = a.n_threads as f64 * a.n_pkts as f64;
    let mpps = total / med.as_secs_f64() / 1e6;
    let ovs_med = (!ovs_runs.is_empty()).then(|| median(&ovs_runs));
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
            thread_ms: thread_ms.clone(),
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
    if a.n_threads > 1
        && let (Some(first), Some(last)) = (thread_ms.first(), thread_ms.last())
    {
        writeln!(
            out,
            "threads' own times in that run: fastest {first:.0} ms, median {:.0}, slowest {last:.0}",
            thread_ms[thread_ms.len() / 2]
        )?;
    }
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

/// One run: the time from the start line to the last thread's end, and
/// each thread's own time (from the line to its end), fastest first.
fn benchmark_once(a: &BenchmarkArgs) -> Result<(Duration, Vec<Duration>)> {
    let tracker = Tracker::new(Config {
        shards: Config::shards_for(a.n_threads),
        ..Config::default()
    });
    let line = StartLine::new(a.n_threads + 1);
    let now = Time::from_secs(1);
    let action = CtAction::commit(0);
    std::thread::scope(|s| {
        let tracker = &tracker;
        let line = &line;
        let action = &action;
        let handles = spawn_all(s, a.n_threads, line, move |tid| {
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
            let Some(start) = line.wait_at() else {
                return Duration::ZERO;
            };
            let mut i = 0;
            while i < a.n_pkts {
                verdicts.clear();
                tracker.process_batch(
                    &batch,
                    LinkType::Ethernet,
                    action,
                    now,
                    &mut verdicts,
                    &mut stats,
                );
                i += a.batch as u64;
            }
            std::hint::black_box(&verdicts);
            let own = start.elapsed();
            line.wait();
            own
        })?;
        let span = line.time_between();
        let mut own = handles
            .into_iter()
            .map(|h| {
                h.join()
                    .map_err(|_| anyhow::anyhow!("a benchmark thread panicked"))
            })
            .collect::<Result<Vec<_>>>()?;
        own.sort();
        Ok((span, own))
    })
}
