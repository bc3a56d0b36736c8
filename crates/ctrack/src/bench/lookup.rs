//! `ctrack bench lookup --threads N --conns M [--zipf S]`: established
//! packets per second over a table of M connections.
//!
//! The table is filled with M UDP connections that have seen both
//! directions. Each thread then replays its own pre-built sequence of
//! 64-byte frames (a ring, as a NIC would fill it), each frame a packet of
//! a connection drawn uniformly or from a Zipf law of exponent S, in either
//! direction, in batches of 32. Every verdict must be `est`; the run fails
//! otherwise.
//!
//! With `--nat` every connection is committed through source NAT (to an
//! address of 198.51.0.0/16, or with `--ipv6` of fd01::/112) and the
//! packets replayed are of the original
//! direction, each rewritten (`Tracker::process_burst_mut`, or
//! `Tracker::process_mut` one per call) from a copy of its frame, as a
//! datapath's buffer would be.
//!
//! With `--label` every connection is committed with a label (`LABEL`,
//! as the firewall writes an ACL's) and every verdict must carry it.

use std::io::Write;
use std::time::Instant;

use anyhow::{Context, Result, bail, ensure};
use clap::Args;
use ctrack_core::{Config, CtAction, CtState, LinkType, Masked, Stats, Time, Tracker, Verdict};
use rand::{RngExt, SeedableRng};
use rand_distr::{Distribution, Zipf};
use serde::Serialize;

use super::cps::{Latency, histogram};
use super::threads::{StartLine, spawn, spawn_all};
use super::{LABEL, MAX_BENCH_CONNS, Machine, median, packets};
use crate::args::{MAX_RUNS, MAX_THREADS, bounded, positive, power_of_two};

/// Arguments of `ctrack bench lookup`.
#[derive(Debug, Args)]
pub struct LookupArgs {
    /// Threads (1 to 1024).
    #[arg(long, default_value_t = 1, value_parser = bounded(1, MAX_THREADS))]
    pub threads: usize,
    /// Connections in the table (1 to 400000000).
    #[arg(long, default_value_t = 1_000_000, value_parser = bounded(1, MAX_BENCH_CONNS))]
    pub conns: u64,
    /// Draw connections from a Zipf law of this exponent (a positive
    /// number) instead of uniformly.
    #[arg(long, value_name = "S", value_parser = positive)]
    pub zipf: Option<f64>,
    /// Packets each thread sends (1 to 1000000000; each thread keeps its
    /// packets in memory, 64 bytes each).
    #[arg(long, default_value_t = 4_000_000, value_parser = bounded(1, MAX_PACKETS))]
    pub packets: u64,
    /// Runs over the same table; the median rate is reported (1 to 1000).
    #[arg(long, default_value_t = 3, value_parser = bounded(1, MAX_RUNS))]
    pub runs: usize,
    /// Table shards per family (a power of two up to 256; default: as
    /// `ctrack run` takes for as many workers, `Config::shards_for`).
    #[arg(long, value_parser = power_of_two(ctrack_core::MAX_SHARDS))]
    pub shards: Option<usize>,
    /// How packets are handed to the tracker: `burst` (32 per call,
    /// `Tracker::process_batch`, prefetching), or one per call, through
    /// a per-thread `handle` (`Tracker::handle`) or `process` (a fresh
    /// epoch pin per call).
    #[arg(long, value_enum, default_value_t = Calls::Burst)]
    pub calls: Calls,
    /// Source NAT: connections are committed translated and every packet
    /// replayed is rewritten (original direction only; with `--calls
    /// burst` or `process`).
    #[arg(long)]
    pub nat: bool,
    /// IPv6 connections (fd00::/16 addresses, 80-byte frames 128 bytes
    /// apart) instead of IPv4 (64-byte frames 64 bytes apart).
    #[arg(long)]
    pub ipv6: bool,
    /// Commit every connection with a label (as an ACL's `label` or
    /// `persist-established` does) and check each packet's: the label is
    /// kept in the connection's extension, one dependent load past the
    /// record.
    #[arg(long)]
    pub label: bool,
}

/// The translation `--nat` commits connections with.
const SNAT: &str = "commit,nat(src=198.51.0.0-198.51.255.255)";
/// The same for `--ipv6`.
const SNAT6: &str = "commit,nat(src=fd01::-fd01::ffff)";

/// How `bench lookup` calls the tracker.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Calls {
    /// 32 packets per call.
    Burst,
    /// One per call, through a per-thread handle.
    Handle,
    /// One per call, `Tracker::process`.
    Process,
}

#[derive(Debug, Serialize)]
struct LookupJson {
    bench: &'static str,
    threads: usize,
    conns: u64,
    zipf: Option<f64>,
    calls: Calls,
    nat: bool,
    ipv6: bool,
    label: bool,
    packets_per_thread: u64,
    runs_mpps: Vec<f64>,
    mpps: f64,
    mpps_per_thread: f64,
    ns_per_packet_per_thread: f64,
    batch_latency_ns: Latency,
    fill_seconds: f64,
    machine: Machine,
}

const BATCH: usize = 32;
/// Bytes from one frame of a ring to the next: a cache line for an IPv4
/// frame, two for an IPv6 one.
fn stride(v6: bool) -> usize {
    if v6 { 128 } else { 64 }
}
/// The most packets a thread sends.
const MAX_PACKETS: u64 = 1_000_000_000;

/// The arguments' bounds, checked; the shard count they give.
fn checked(a: &LookupArgs) -> Result<usize> {
    let bounds = [
        (a.threads as u64, MAX_THREADS as u64, "--threads"),
        (a.conns, MAX_BENCH_CONNS, "--conns"),
        (a.packets, MAX_PACKETS, "--packets"),
        (a.runs as u64, MAX_RUNS as u64, "--runs"),
    ];
    for (v, max, name) in bounds {
        if !(1..=max).contains(&v) {
            bail!("{name} must be from 1 to {max}");
        }
    }
    if let Some(s) = a.zipf
        && !(s > 0.0 && s.is_finite())
    {
        bail!("--zipf must be a positive number");
    }
    if a.nat && a.calls == Calls::Handle {
        bail!("--nat works with --calls burst or process (a handle does not rewrite)");
    }
    let shards = a.shards.unwrap_or(Config::shards_for(a.threads));
    if !shards.is_power_of_two() || shards > ctrack_core::MAX_SHARDS {
        bail!(
            "--shards must be a power of two from 1 to {}",
            ctrack_core::MAX_SHARDS
        );
    }
    Ok(shards)
}

pub(crate) fn run(a: &LookupArgs, json: bool, out: &mut dyn Write) -> Result<()> {
    let shards = checked(a)?;
    let tracker = Tracker::new(Config {
        max_conns: (a.conns as usize).saturating_mul(11) / 10 + 1024,
        shards,
        ..Config::default()
    });
    let now = Time::from_secs(1);
    let t0 = Instant::now();
    fill(&tracker, a, now)?;
    let fill_seconds = t0.elapsed().as_secs_f64();
    if tracker.table_len() as u64 != a.conns {
        bail!(
            "filling the table left {} connections instead of {}",
            tracker.table_len(),
            a.conns
        );
    }

    // Each thread's frames: a permutation spreads the popular Zipf ranks
    // over the key space.
    let rings: Vec<Vec<u8>> = (0..a.threads)
        .map(|t| ring(a, t as u64))
        .collect::<Result<_>>()?;
    let mut runs = Vec::new();
    let mut hist = histogram();
    for _ in 0..a.runs {
        let (secs, h, bad) = replay(&tracker, &rings, a, now)?;
        let with = if a.label { " with their label" } else { "" };
        ensure!(
            bad == 0,
            "{bad} packets were not reported established{with}"
        );
        runs.push(a.packets as f64 * a.threads as f64 / secs / 1e6);
        hist.add(h).expect("histograms add");
    }
    let mpps = median(&runs);
    let j = LookupJson {
        bench: "lookup",
        threads: a.threads,
        conns: a.conns,
        zipf: a.zipf,
        calls: a.calls,
        nat: a.nat,
        ipv6: a.ipv6,
        label: a.label,
        packets_per_thread: a.packets,
        runs_mpps: runs,
        mpps,
        mpps_per_thread: mpps / a.threads as f64,
        ns_per_packet_per_thread: 1e3 / (mpps / a.threads as f64),
        batch_latency_ns: Latency::of(&hist),
        fill_seconds,
        machine: Machine::this(),
    };
    if json {
        serde_json::to_writer_pretty(&mut *out, &j)?;
        writeln!(out)?;
        return Ok(());
    }
    writeln!(
        out,
        "lookup: {} {} connections, {} thread(s), {}, batches of {BATCH}{}{}{}: {:.2} Mpps ({:.2} Mpps/thread, {:.1} ns/packet), runs {}",
        a.conns,
        if a.ipv6 { "IPv6" } else { "IPv4" },
        a.threads,
        match a.zipf {
            Some(s) => format!("zipf {s}"),
            None => "uniform".into(),
        },
        match a.calls {
            Calls::Burst => "",
            Calls::Handle => " (one packet per call, through a handle)",
            Calls::Process => " (one packet per call, Tracker::process)",
        },
        if a.nat { ", source NAT" } else { "" },
        if a.label { ", labelled" } else { "" },
        j.mpps,
        j.mpps_per_thread,
        j.ns_per_packet_per_thread,
        j.runs_mpps
            .iter()
            .map(|m| format!("{m:.2}"))
            .collect::<Vec<_>>()
            .join(", "),
    )?;
    writeln!(
        out,
        "  batch latency: p50 {} ns, p99 {} ns, p99.9 {} ns, max {} ns; fill took {:.2} s",
        j.batch_latency_ns.p50,
        j.batch_latency_ns.p99,
        j.batch_latency_ns.p999,
        j.batch_latency_ns.max,
        fill_seconds
    )?;
    Ok(())
}

/// Commits `n` UDP connections and answers each, with `threads` threads
/// (through source NAT with `nat`: the answer goes to the translated
/// address).
fn fill(tracker: &Tracker, a: &LookupArgs, now: Time) -> Result<()> {
    let mut action = commit_action(a.nat, a.ipv6);
    if a.label {
        action.label = Some(Masked::new(LABEL, u128::MAX));
    }
    fill_with(tracker, a.conns, a.threads, &action, a.nat, a.ipv6, now)
}

/// What [`fill`] commits with: in zone 0, through source NAT with `nat`.
pub(crate) fn commit_action(nat: bool, v6: bool) -> CtAction {
    match nat {
        true => if v6 { SNAT6 } else { SNAT }
            .parse()
            .expect("a valid action"),
        false => CtAction::commit(0),
    }
}

/// [`fill`] with the committing `action` given (`nat`: it translates the
/// source, so the answer goes to the translated address).
fn fill_with(
    tracker: &Tracker,
    n: u64,
    threads: usize,
    action: &CtAction,
    nat: bool,
    v6: bool,
    now: Time,
) -> Result<()> {
    std::thread::scope(|s| {
        for t in 0..threads {
            spawn(s, t, threads, move || {
                let mine = (t as u64..n).step_by(threads);
                fill_these(tracker, mine, action, nat, v6, now);
            })?;
        }
        Ok(())
    })
}

/// Commits and answers connections `conns` on the calling thread, as
/// [`fill_with`] does.
pub(crate) fn fill_these(
    tracker: &Tracker,
    conns: impl Iterator<Item = u64>,
    action: &CtAction,
    nat: bool,
    v6: bool,
    now: Time,
) {
    let mut verdicts = Vec::with_capacity(BATCH);
    let mut stats = Stats::default();
    let mut cs = Vec::with_capacity(BATCH / 2);
    let mut conns = conns.peekable();
    while conns.peek().is_some() {
        cs.clear();
        cs.extend(conns.by_ref().take(BATCH / 2));
        let link = LinkType::Ethernet;
        if nat {
            let mut frames: Vec<Vec<u8>> =
                cs.iter().map(|&c| packets::udp_of(c, false, v6)).collect();
            let mut vs = vec![Verdict::default(); frames.len()];
            tracker.process_burst_mut(&mut frames, link, action, now, &mut vs, &mut stats);
            frames.iter_mut().for_each(|f| packets::swap_of(f, v6));
            tracker.process_burst_mut(&mut frames, link, action, now, &mut vs, &mut stats);
            continue;
        }
        let frames: Vec<Vec<u8>> = cs
            .iter()
            .map(|&c| packets::udp_of(c, false, v6))
            .chain(cs.iter().map(|&c| packets::udp_of(c, true, v6)))
            .collect();
        let refs: Vec<&[u8]> = frames.iter().map(Vec::as_slice).collect();
        verdicts.clear();
        tracker.process_batch(&refs, link, action, now, &mut verdicts, &mut stats);
    }
}

/// A thread's frames, [`stride`] bytes apart.
fn ring(a: &LookupArgs, thread: u64) -> Result<Vec<u8>> {
    let mut rng = rand::rngs::SmallRng::seed_from_u64(0x5eed + thread);
    let zipf = match a.zipf {
        Some(s) => Some(Zipf::new(a.conns as f64, s)?),
        None => None,
    };
    // Asked for, not assumed: a failed allocation is an error, not an abort.
    let step = stride(a.ipv6);
    let bytes = (a.packets as usize).saturating_mul(step);
    let mut buf = Vec::new();
    buf.try_reserve_exact(bytes).with_context(|| {
        format!(
            "cannot allocate {bytes} bytes for the {} packets of thread {}",
            a.packets,
            thread + 1
        )
    })?;
    buf.resize(bytes, 0u8);
    for k in 0..a.packets as usize {
        let c = match &zipf {
            Some(z) => {
                let rank = z.sample(&mut rng) as u64 - 1;
                // A fixed odd multiplier permutes ranks over the
                // connections.
                rank.wrapping_mul(0x9e37_79b9_7f4a_7c15) % a.conns
            }
            None => rng.random_range(0..a.conns),
        };
        let f = packets::udp_of(c, !a.nat && rng.random_bool(0.5), a.ipv6);
        buf[k * step..k * step + f.len()].copy_from_slice(&f);
    }
    Ok(buf)
}

/// Replays the rings; returns the seconds taken, the batch latencies and
/// the number of verdicts that were not `est`.
fn replay(
    tracker: &Tracker,
    rings: &[Vec<u8>],
    a: &LookupArgs,
    now: Time,
) -> Result<(f64, hdrhistogram::Histogram<u64>, u64)> {
    let (threads, calls, nat, v6) = (a.threads, a.calls, a.nat, a.ipv6);
    let labelled = a.label;
    let line = StartLine::new(threads + 1);
    let action = &CtAction {
        nat: nat
            .then(|| "nat".parse::<CtAction>().expect("a valid action").nat)
            .flatten(),
        ..CtAction::lookup(0)
    };
    std::thread::scope(|s| {
        let line = &line;
        let handles = spawn_all(s, threads, line, move |t| {
            let ring = &rings[t];
            let len = packets::udp_of(0, false, v6).len();
            let step = stride(v6);
            let n = ring.len() / step;
            let mut h = histogram();
            let mut verdicts = Vec::with_capacity(BATCH);
            let mut stats = Stats::default();
            let mut refs: Vec<&[u8]> = Vec::with_capacity(BATCH);
            let mut bad = 0u64;
            let mut handle = tracker.handle();
            // With `nat`: the frames a burst rewrites, copied from the ring.
            let mut bufs: Vec<Vec<u8>> = (0..BATCH).map(|_| Vec::with_capacity(len)).collect();
            if !line.wait() {
                return (h, bad);
            }
            let mut k = 0;
            while k < n {
                let end = (k + BATCH).min(n);
                refs.clear();
                refs.extend((k..end).map(|i| &ring[i * step..i * step + len]));
                verdicts.clear();
                let t0 = Instant::now();
                let link = LinkType::Ethernet;
                match calls {
                    Calls::Burst if nat => {
                        let bufs = &mut bufs[..refs.len()];
                        for (b, f) in bufs.iter_mut().zip(&refs) {
                            b.clear();
                            b.extend_from_slice(f);
                        }
                        verdicts.resize(refs.len(), Verdict::default());
                        tracker.process_burst_mut(
                            bufs,
                            link,
                            action,
                            now,
                            &mut verdicts,
                            &mut stats,
                        )
                    }
                    Calls::Process if nat => {
                        verdicts.extend(bufs.iter_mut().zip(&refs).map(|(b, f)| {
                            b.clear();
                            b.extend_from_slice(f);
                            tracker.process_mut(b, link, action, now, &mut stats)
                        }))
                    }
                    Calls::Burst => {
                        tracker.process_batch(&refs, link, action, now, &mut verdicts, &mut stats)
                    }
                    Calls::Handle => verdicts.extend(
                        refs.iter()
                            .map(|f| handle.process(f, link, action, now, &mut stats)),
                    ),
                    Calls::Process => verdicts.extend(
                        refs.iter()
                            .map(|f| tracker.process(f, link, action, now, &mut stats)),
                    ),
                }
                h.record(t0.elapsed().as_nanos().max(1) as u64)
                    .expect("latency within the histogram's range");
                let want = if nat {
                    CtState::EST | CtState::SNAT
                } else {
                    CtState::EST
                };
                let label = if labelled { LABEL } else { 0 };
                bad += verdicts
                    .iter()
                    .filter(|v| !v.state.contains(want) || v.label != label)
                    .count() as u64;
                k = end;
            }
            line.wait();
            (h, bad)
        })?;
        let secs = line.time_between().as_secs_f64();
        let mut all = histogram();
        let mut bad = 0;
        for h in handles {
            let (hh, b) = h.join().expect("bench thread");
            all.add(hh).expect("histograms add");
            bad += b;
        }
        Ok((secs, all, bad))
    })
}
