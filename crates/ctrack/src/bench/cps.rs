//! `ctrack bench cps --threads N --conns M`: new connections per second.
//!
//! Two phases, each timed on its own, each reporting per-batch latency:
//!
//! 1. *fill*: N threads create M connections in an empty table (each
//!    thread its own share, in batches of 32 packets);
//! 2. *steady*: the table stays at about M connections while threads
//!    create new ones and expiry removes as many as are created. Time is
//!    virtual: it advances with the connections created so that a
//!    connection lives as long as M creations take, and every thread
//!    sweeps after each batch with a budget of twice the batch (so expiry
//!    is shared equally between threads).
//!
//! Beside each phase, the machine's own floor: busy loops as long as the
//! phase's median batch, as many as there were batches, timed the same
//! way right after the phase. Whatever stretches them (timer ticks, the
//! hypervisor, other tenants) stretches the batches too, so a batch tail
//! is only ours where it exceeds the floor's. And a floor that touches
//! memory as the table does: batches of writes to random words of a
//! buffer as large as the table's memory, each batch calibrated to take
//! the phase's median, as many as there were batches, on as many threads
//! (`memory_floor_latency_ns`). A machine whose memory stalls now and then
//! (on machine A, a host that stops a guest touching a large working set
//! for tens to hundreds of microseconds, a few hundred times a second)
//! shows it there, with no table involved.
//!
//! With `--sweeper thread`, the packet threads never sweep: one more
//! thread sweeps all the while, with the budget of `ctrack run`'s
//! housekeeping thread, at the virtual time of the slowest packet thread:
//! expiry left to one thread alone (how `ctrack run` expired before its
//! workers swept too). If the sweeper falls behind, the table fills and
//! commits are refused or evict (both reported).
//!
//! `--proto udp` creates a connection with one packet (then answers it, so
//! that both directions are looked up); `--proto tcp` with a three-way
//! handshake (SYN, SYN-ACK, ACK). Connection creation includes the lookup
//! that misses, the limit checks and indexing the connection for both
//! directions.
//!
//! `--label` commits every connection with a label, which takes the
//! connection's extension: allocated at the commit, handed to the epoch
//! with the connection's slot when it expires.

use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Instant;

use anyhow::{Result, bail};
use clap::{Args, ValueEnum};
use ctrack_core::{
    Config, ConnKey, CtAction, Endpoint, Family, LinkType, Stats, Time, TimeoutPolicy, Tracker,
};
use ctrack_wire::tcp::flags::{ACK, SYN};
use hdrhistogram::Histogram;
use serde::Serialize;

use super::threads::{StartLine, spawn_all};
use super::{MAX_BENCH_CONNS, Machine, median, packets};
use crate::args::{MAX_RUNS, MAX_THREADS, bounded};

/// An option's value as the command line writes it (`udp`, `each`).
fn value_name(v: impl ValueEnum) -> String {
    v.to_possible_value()
        .map_or_else(String::new, |p| p.get_name().to_owned())
}

/// Protocols.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Proto {
    /// One UDP packet opens a connection, one answers it.
    Udp,
    /// A three-way handshake.
    Tcp,
}

/// Who expires connections in the steady phase.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Sweeper {
    /// Every packet thread, after each of its batches (a budget of twice
    /// the batch).
    Each,
    /// One more thread, sweeping all the while with the budget of `ctrack
    /// run`'s housekeeping thread; packet threads never sweep.
    Thread,
}

/// Arguments of `ctrack bench cps`.
#[derive(Debug, Args)]
pub struct CpsArgs {
    /// Threads (1 to 1024).
    #[arg(long, default_value_t = 1, value_parser = bounded(1, MAX_THREADS))]
    pub threads: usize,
    /// Connections in the table, filled then held (1 to 400000000).
    #[arg(long, default_value_t = 1_000_000, value_parser = bounded(1, MAX_BENCH_CONNS))]
    pub conns: u64,
    /// Connections created in the steady phase (default: as many as
    /// `--conns`; 1 to 400000000).
    #[arg(long, value_name = "N", value_parser = bounded(1, MAX_BENCH_CONNS))]
    pub steady: Option<u64>,
    /// Protocol.
    #[arg(long, value_enum, default_value_t = Proto::Udp)]
    pub proto: Proto,
    /// Runs; the median rate is reported (1 to 1000).
    #[arg(long, default_value_t = 3, value_parser = bounded(1, MAX_RUNS))]
    pub runs: usize,
    /// Fault in the table's memory for its limit before timing anything
    /// (`Config::prefault`), so that the fill does not pay the kernel's
    /// zeroing of fresh pages.
    #[arg(long)]
    pub prefault: bool,
    /// Fault in the table's memory from a background thread, ahead of the
    /// packet path (`Tracker::populate_ahead`, as `ctrack run` does).
    #[arg(long, conflicts_with = "prefault")]
    pub populate: bool,
    /// Who expires connections in the steady phase: each packet thread
    /// after its batches (as `ctrack run`'s workers), or a thread of its
    /// own.
    #[arg(long, value_enum, default_value_t = Sweeper::Each)]
    pub sweeper: Sweeper,
    /// Table shards per family (a power of two up to 256; default: as
    /// `ctrack run` takes for as many workers, `Config::shards_for`):
    /// fewer shards, more threads meeting at each shard's lock.
    #[arg(long, value_parser = crate::args::power_of_two(ctrack_core::MAX_SHARDS))]
    pub shards: Option<usize>,
    /// Each thread creates only connections of its own shards (shard
    /// number modulo the threads), as workers would whose traffic is
    /// steered by the table's own hash: no shard's lock or lists are
    /// shared between threads. Shows what sharing the shards costs.
    #[arg(long)]
    pub affine: bool,
    /// Commit every connection with a label, as the firewall does for an
    /// ACL with `label` or `persist-established`: each connection then has
    /// an extension, allocated at its commit and freed after its expiry.
    #[arg(long)]
    pub label: bool,
}

/// Per-batch latency, in nanoseconds.
#[derive(Debug, Clone, Copy, Serialize)]
pub(crate) struct Latency {
    pub(crate) p50: u64,
    pub(crate) p99: u64,
    pub(crate) p999: u64,
    pub(crate) max: u64,
}

impl Latency {
    pub(crate) fn of(h: &Histogram<u64>) -> Latency {
        Latency {
            p50: h.value_at_quantile(0.5),
            p99: h.value_at_quantile(0.99),
            p999: h.value_at_quantile(0.999),
            max: h.max(),
        }
    }
}

pub(crate) fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 60_000_000_000, 3).expect("valid histogram bounds")
}

#[derive(Debug, Clone, Serialize)]
struct Phase {
    conns: u64,
    seconds: f64,
    conns_per_sec: f64,
    batch_latency_ns: Latency,
    /// The machine's own floor: a busy loop as long as this thread's
    /// median batch, timed as many times as there were batches, right
    /// after the phase. What the machine adds to any work of that length
    /// (timer ticks, the hypervisor, other tenants) shows in its tail.
    floor_latency_ns: Latency,
    /// The machine's floor for work that touches memory as the table
    /// does: batches of writes to random words of a buffer the size of the
    /// table's memory after the run (`memory_floor_mib`), each batch as
    /// many writes as take the phase's median batch, as many batches as
    /// the phase had, on as many threads, once both phases are done.
    memory_floor_latency_ns: Latency,
    /// The size of that buffer, MiB.
    memory_floor_mib: f64,
    /// Batches timed.
    batches: u64,
    /// Connections committed. More than `conns` when a thread's clock ran
    /// far enough ahead of another's to expire the other's connection
    /// between its first packet and its answer: the answer (UDP) then
    /// opens a connection of its own.
    committed: u64,
    /// Connections freed after expiring: by sweeps, and by inserts that
    /// found an expired connection in their way.
    expired: u64,
    /// Connections replaced by a packet that opened a new one in their
    /// place.
    replaced: u64,
    /// Commits refused because the table was full (the sweeper behind).
    refused_table_full: u64,
    /// Connections evicted to make room.
    evicted: u64,
    table_len_after: usize,
}

#[derive(Debug, Serialize)]
struct CpsJson {
    bench: &'static str,
    threads: usize,
    conns: u64,
    proto: Proto,
    sweeper: Sweeper,
    /// Table shards per family.
    shards: usize,
    /// Whether each thread created only connections of its own shards.
    affine: bool,
    label: bool,
    runs: usize,
    fill: Phase,
    steady: Phase,
    fill_runs_conns_per_sec: Vec<f64>,
    steady_runs_conns_per_sec: Vec<f64>,
    machine: Machine,
}

const BATCH: usize = 32;
/// Virtual lifetime of a connection in the steady phase.
const LIFETIME_MS: u64 = 60_000;

pub(crate) fn run(a: &CpsArgs, json: bool, out: &mut dyn Write) -> Result<()> {
    let bounds = [
        (a.threads as u64, MAX_THREADS as u64, "--threads"),
        (a.conns, MAX_BENCH_CONNS, "--conns"),
        (a.steady.unwrap_or(a.conns), MAX_BENCH_CONNS, "--steady"),
        (a.runs as u64, MAX_RUNS as u64, "--runs"),
    ];
    for (v, max, name) in bounds {
        if !(1..=max).contains(&v) {
            bail!("{name} must be from 1 to {max}");
        }
    }
    let mut results = Vec::new();
    for _ in 0..a.runs {
        results.push(run_once(a)?);
    }
    let fill_rates: Vec<f64> = results.iter().map(|r| r.0.conns_per_sec).collect();
    let steady_rates: Vec<f64> = results.iter().map(|r| r.1.conns_per_sec).collect();
    // The run whose fill rate is the median.
    let med = median(&fill_rates);
    let chosen = results
        .iter()
        .find(|r| r.0.conns_per_sec == med)
        .cloned()
        .expect("a run has the median rate");
    let smed = median(&steady_rates);
    let steady = results
        .iter()
        .find(|r| r.1.conns_per_sec == smed)
        .map(|r| r.1.clone())
        .expect("a run has the median rate");
    let j = CpsJson {
        bench: "cps",
        threads: a.threads,
        conns: a.conns,
        proto: a.proto,
        sweeper: a.sweeper,
        shards: shards(a),
        affine: a.affine,
        label: a.label,
        runs: a.runs,
        fill: chosen.0,
        steady,
        fill_runs_conns_per_sec: fill_rates,
        steady_runs_conns_per_sec: steady_rates,
        machine: Machine::this(),
    };
    if json {
        serde_json::to_writer_pretty(&mut *out, &j)?;
        writeln!(out)?;
        return Ok(());
    }
    writeln!(
        out,
        "cps: {} thread(s){}, {} connections, {}{}, sweeper {}, {} shards, median of {} runs",
        a.threads,
        if a.affine { " on their own shards" } else { "" },
        a.conns,
        value_name(a.proto),
        if a.label { ", labelled" } else { "" },
        value_name(a.sweeper),
        j.shards,
        a.runs
    )?;
    for (name, p) in [("fill", &j.fill), ("steady", &j.steady)] {
        writeln!(
            out,
            "  {name:<6} {:>10} conns in {:>8.3} s: {:>6.3} M conns/s; batch of {BATCH} packets: p50 {} ns, p99 {} ns, p99.9 {} ns ({:.1}x p50), max {} ns; expired {}; refused (full) {}; evicted {}; table {}",
            p.conns,
            p.seconds,
            p.conns_per_sec / 1e6,
            p.batch_latency_ns.p50,
            p.batch_latency_ns.p99,
            p.batch_latency_ns.p999,
            ratio(p.batch_latency_ns),
            p.batch_latency_ns.max,
            p.expired,
            p.refused_table_full,
            p.evicted,
            p.table_len_after,
        )?;
        let f = p.floor_latency_ns;
        writeln!(
            out,
            "  {:<6} machine floor (a busy loop as long as p50, as many times): p50 {} ns, p99 {} ns, p99.9 {} ns ({:.1}x p50), max {} ns",
            "",
            f.p50,
            f.p99,
            f.p999,
            ratio(f),
            f.max,
        )?;
        let m = p.memory_floor_latency_ns;
        writeln!(
            out,
            "  {:<6} memory floor (random writes over {:.0} MiB, as long as p50, as many times): p50 {} ns, p99 {} ns, p99.9 {} ns ({:.1}x p50), max {} ns",
            "",
            p.memory_floor_mib,
            m.p50,
            m.p99,
            m.p999,
            ratio(m),
            m.max,
        )?;
    }
    Ok(())
}

/// p99.9 over p50.
fn ratio(l: Latency) -> f64 {
    l.p999 as f64 / l.p50.max(1) as f64
}

/// `n` busy loops of `ns` nanoseconds each, each one timed: what the
/// machine alone does to the latency of work that long.
fn floor(ns: u64, n: usize) -> Histogram<u64> {
    let mut h = histogram();
    let d = std::time::Duration::from_nanos(ns);
    for _ in 0..n {
        let t0 = Instant::now();
        while t0.elapsed() < d {
            std::hint::spin_loop();
        }
        h.record(t0.elapsed().as_nanos().max(1) as u64)
            .expect("latency within the histogram's range");
    }
    h
}

/// The memory floors of a run's phases, taken once both are done (so
/// that neither phase runs on memory the other's floor has just touched
/// and freed): over one buffer of the table's size then, batches as long as
/// each phase's median batch, as many as it had, on `threads` threads.
fn memory_floors(tracker: &Tracker, phases: [&mut Phase; 2], threads: usize) -> Result<()> {
    let m = tracker.memory();
    let bytes = m.index_bytes + m.record_bytes + m.alias_bytes;
    let words = (bytes / 8).max(1);
    let buf: Vec<AtomicU64> = (0..words).map(|_| AtomicU64::new(0)).collect();
    // Zeroed memory may come from the allocator untouched: a word of each
    // page written, so that the batches take no page faults.
    for w in buf.iter().step_by(512) {
        w.store(1, Ordering::Relaxed);
    }
    for p in phases {
        let per_thread = (p.batches as usize).div_ceil(threads);
        let h = memory_floor(&buf, p.batch_latency_ns.p50, per_thread, threads)?;
        p.memory_floor_latency_ns = Latency::of(&h);
        p.memory_floor_mib = bytes as f64 / (1 << 20) as f64;
    }
    Ok(())
}

/// `threads` threads each timing `n` batches of writes to random words
/// of `buf` (as large as the table, each of its pages written by the
/// caller so that no batch takes its first page faults), each batch as
/// many writes as take about `ns` (calibrated on the thread first): what
/// the machine does to the latency of work that long that touches memory
/// the size of the table at random, with no table involved.
fn memory_floor(buf: &[AtomicU64], ns: u64, n: usize, threads: usize) -> Result<Histogram<u64>> {
    let words = buf.len().max(1);
    let mut all = histogram();
    std::thread::scope(|s| {
        let handles = (0..threads)
            .map(|t| {
                super::threads::spawn(s, t, threads, move || {
                    // xorshift64: a word to write per step, each likely on
                    // a line of its own.
                    let mut x = 0x9e37_79b9_7f4a_7c15u64 ^ ((t as u64 + 1) << 32);
                    let mut writes = |k: usize| {
                        for _ in 0..k {
                            x ^= x << 13;
                            x ^= x >> 7;
                            x ^= x << 17;
                            let w = &buf[(x % words as u64) as usize];
                            w.store(w.load(Ordering::Relaxed).wrapping_add(1), Ordering::Relaxed);
                        }
                    };
                    // How many writes take `ns`: from the median of 1,001
                    // batches, three times over (the first batches after
                    // the buffer was written run slower than the rest).
                    let mut k = 64usize;
                    for _ in 0..3 {
                        let mut probe: Vec<u128> = (0..1001)
                            .map(|_| {
                                let t0 = Instant::now();
                                writes(k);
                                t0.elapsed().as_nanos()
                            })
                            .collect();
                        probe.sort_unstable();
                        k = (k as u128 * u128::from(ns) / probe[500].max(1)).clamp(1, 1 << 20)
                            as usize;
                    }
                    let mut h = histogram();
                    for _ in 0..n {
                        let t0 = Instant::now();
                        writes(k);
                        h.record(t0.elapsed().as_nanos().max(1) as u64)
                            .expect("latency within the histogram's range");
                    }
                    h
                })
            })
            .collect::<Result<Vec<_>>>()?;
        for h in handles {
            all.add(h.join().expect("memory floor thread"))
                .expect("histograms add");
        }
        Ok(all)
    })
}

/// The packets that create connection `i` (and answer it).
fn opening(proto: Proto, i: u64) -> Vec<Vec<u8>> {
    match proto {
        Proto::Udp => vec![packets::udp(i, false), packets::udp(i, true)],
        Proto::Tcp => vec![
            packets::tcp(i, false, SYN, 1000, 0),
            packets::tcp(i, true, SYN | ACK, 5000, 1001),
            packets::tcp(i, false, ACK, 1001, 5001),
        ],
    }
}

/// The table's shards per family.
fn shards(a: &CpsArgs) -> usize {
    a.shards.unwrap_or(Config::shards_for(a.threads))
}

fn run_once(a: &CpsArgs) -> Result<(Phase, Phase)> {
    let steady_conns = a.steady.unwrap_or(a.conns);
    let lifetime_s = (LIFETIME_MS / 1000) as u32;
    let policy = TimeoutPolicy {
        tcp_syn_sent: lifetime_s,
        tcp_syn_recv: lifetime_s,
        tcp_established: lifetime_s,
        tcp_fin_wait: lifetime_s,
        tcp_time_wait: lifetime_s,
        tcp_close: lifetime_s,
        udp_first: lifetime_s,
        udp_single: lifetime_s,
        udp_multiple: lifetime_s,
        icmp_first: lifetime_s,
        icmp_reply: lifetime_s,
    };
    let tracker = Tracker::new(Config {
        // Room for the steady phase's overlap of old and new.
        max_conns: (a.conns as usize).saturating_mul(5) / 4 + 1024,
        timeouts: policy,
        prefault: a.prefault,
        shards: shards(a),
        ..Config::default()
    });
    let mut action = CtAction::commit(0);
    if a.label {
        action.label = Some(ctrack_core::Masked::new(super::LABEL, u128::MAX));
    }
    let base = Time::from_secs(1);

    super::with_populator(&tracker, a.populate, || {
        phases(a, &tracker, &action, base, steady_conns)
    })
}

/// The fill, then the steady phase.
fn phases(
    a: &CpsArgs,
    tracker: &Tracker,
    action: &CtAction,
    base: Time,
    steady_conns: u64,
) -> Result<(Phase, Phase)> {
    // Fill.
    let mut fill = phase(a, tracker, a.conns, 0, |_, _| base, false, action)?;
    // Steady: connection c is created at virtual time
    // base + (conns + c) * LIFETIME / conns, so that those created more
    // than `conns` creations ago have expired.
    let conns = a.conns;
    let mut steady = phase(
        a,
        tracker,
        steady_conns,
        a.conns,
        move |created_before: u64, _| {
            base + ctrack_core::Millis((conns + created_before) * LIFETIME_MS / conns)
        },
        true,
        action,
    )?;
    memory_floors(tracker, [&mut fill, &mut steady], a.threads)?;
    Ok((fill, steady))
}

/// The table shard that connection `i` of [`opening`] lives in.
fn shard_of(tracker: &Tracker, proto: Proto, i: u64) -> usize {
    let (c, s, sport) = packets::endpoints(i);
    let endpoint = |a: [u8; 4], port| Endpoint {
        addr: u128::from(u32::from_be_bytes(a)),
        port,
        ..Endpoint::default()
    };
    let (proto, port) = match proto {
        Proto::Udp => (17, 53),
        Proto::Tcp => (6, 80),
    };
    tracker.shard_of(&ConnKey {
        src: endpoint(c, sport),
        dst: endpoint(s, port),
        zone: 0,
        proto,
        family: Family::V4,
    })
}

/// Batches of frames in a buffer: each batch's first connection number
/// and its frames' (offset, length).
type Batches = Vec<(u64, Vec<(usize, usize)>)>;

/// Thread `t`'s batches of the phase's connections (`t`, `t + threads`,
/// ...), built up front and packed in one buffer (packet building is not
/// what is measured): each batch's first connection number and its
/// frames' spans in the buffer, all first packets of the batch, then all
/// answers (a burst of new flows).
fn thread_batches(
    proto: Proto,
    n: u64,
    first: u64,
    t: usize,
    owner: &(dyn Fn(u64) -> usize + Sync),
) -> (Vec<u8>, Batches) {
    let per_conn = opening(proto, 0).len();
    // Conns per batch: whole openings only.
    let conns_per_batch = (BATCH / per_conn).max(1);
    let mine: Vec<u64> = (0..n).filter(|&c| owner(first + c) == t).collect();
    let mut buf: Vec<u8> = Vec::new();
    let mut batches = Vec::new();
    for cs in mine.chunks(conns_per_batch) {
        let mut spans = Vec::with_capacity(BATCH);
        let ps: Vec<Vec<Vec<u8>>> = cs.iter().map(|&c| opening(proto, first + c)).collect();
        for k in 0..per_conn {
            for p in &ps {
                spans.push((buf.len(), p[k].len()));
                buf.extend_from_slice(&p[k]);
            }
        }
        batches.push((cs[0], spans));
    }
    (buf, batches)
}

/// A packet thread's virtual time (ms), on a cache line of its own, for
/// the sweeper thread to read.
#[repr(align(128))]
struct Clock(AtomicU64);

impl Clock {
    /// A thread not started yet, or done: it holds nobody back.
    fn idle() -> Clock {
        Clock(AtomicU64::new(u64::MAX))
    }
}

/// The dedicated sweeper (`--sweeper thread`): sweeps with the
/// housekeeping thread's budget at the slowest packet thread's time until
/// `done`; returns its counters.
fn sweeper(tracker: &Tracker, clocks: &[Clock], done: &AtomicBool) -> Stats {
    let mut stats = Stats::default();
    while !done.load(Ordering::Acquire) {
        let now = clocks
            .iter()
            .map(|c| c.0.load(Ordering::Relaxed))
            .min()
            .unwrap_or(u64::MAX);
        if now == u64::MAX {
            std::thread::yield_now();
            continue;
        }
        let now = Time::from_millis(now);
        let s = tracker.sweep(now, ctrack_datapath::daemon::SWEEP_BUDGET, &mut stats);
        if s.next != Some(now) {
            // Nothing more due yet: let the packet threads move time on.
            std::thread::yield_now();
        }
    }
    stats
}

/// What a packet thread hands back: its batch latencies, its floor, and
/// its tracker counters.
type ThreadOut = (Histogram<u64>, Histogram<u64>, Stats);

/// Runs `n` connection openings spread over the threads, connection
/// numbers from `first`; `clock(c, thread)` is the time of a batch whose
/// first connection is the `c`-th of the phase. With `expire`, expiry runs
/// too, as `a.sweeper` says.
fn phase(
    a: &CpsArgs,
    tracker: &Tracker,
    n: u64,
    first: u64,
    clock: impl Fn(u64, usize) -> Time + Sync,
    expire: bool,
    action: &CtAction,
) -> Result<Phase> {
    let threads = a.threads;
    let sweep = expire && a.sweeper == Sweeper::Each;
    let dedicated = expire && a.sweeper == Sweeper::Thread;
    let line = StartLine::new(threads + 1);
    let clocks: Vec<Clock> = (0..threads).map(|_| Clock::idle()).collect();
    let done = AtomicBool::new(false);
    let shard_of = |i: u64| shard_of(tracker, a.proto, i);
    let owner: &(dyn Fn(u64) -> usize + Sync) = &|i: u64| match a.affine {
        true => shard_of(i) % threads,
        false => ((i - first) % threads as u64) as usize,
    };
    let (elapsed, hist, floors, stats) = std::thread::scope(|s| {
        let line = &line;
        let clock = &clock;
        let clocks = &clocks;
        let done = &done;
        let sweeping = match dedicated {
            true => Some(
                std::thread::Builder::new()
                    .name("bench-sweeper".into())
                    .spawn_scoped(s, move || sweeper(tracker, clocks, done))
                    .map_err(|e| anyhow::anyhow!("cannot start the sweeper thread: {e}"))?,
            ),
            false => None,
        };
        let handles = spawn_all(s, threads, line, move |t| -> ThreadOut {
            let (buf, batches) = thread_batches(a.proto, n, first, t, owner);
            let mut h = histogram();
            let mut verdicts = Vec::with_capacity(BATCH);
            let mut stats = Stats::default();
            let mut refs: Vec<&[u8]> = Vec::with_capacity(BATCH);
            if let Some((c0, _)) = batches.first() {
                clocks[t]
                    .0
                    .store(clock(*c0, t).as_millis(), Ordering::Relaxed);
            }
            if !line.wait() {
                return (h, histogram(), stats);
            }
            for (c0, spans) in &batches {
                let now = clock(*c0, t);
                if dedicated {
                    clocks[t].0.store(now.as_millis(), Ordering::Relaxed);
                }
                refs.clear();
                refs.extend(spans.iter().map(|&(o, l)| &buf[o..o + l]));
                let t0 = Instant::now();
                verdicts.clear();
                tracker.process_batch(
                    &refs,
                    LinkType::Ethernet,
                    action,
                    now,
                    &mut verdicts,
                    &mut stats,
                );
                if sweep {
                    tracker.sweep(now, 2 * BATCH, &mut stats);
                }
                h.record(t0.elapsed().as_nanos().max(1) as u64)
                    .expect("latency within the histogram's range");
            }
            std::hint::black_box(&verdicts);
            clocks[t].0.store(u64::MAX, Ordering::Relaxed);
            line.wait();
            // Outside the timed span: the floor.
            let floor = floor(h.value_at_quantile(0.5), batches.len());
            (h, floor, stats)
        });
        let handles = match handles {
            Ok(h) => h,
            Err(e) => {
                done.store(true, Ordering::Release);
                return Err(e);
            }
        };
        let elapsed = line.time_between();
        done.store(true, Ordering::Release);
        let mut stats = Stats::default();
        if let Some(sw) = sweeping {
            stats.merge(&sw.join().expect("sweeper thread"));
        }
        let mut all = histogram();
        let mut floors = histogram();
        for h in handles {
            let (h, f, st) = h.join().expect("bench thread");
            all.add(h).expect("histograms add");
            floors.add(f).expect("histograms add");
            stats.merge(&st);
        }
        Ok::<_, anyhow::Error>((elapsed, all, floors, stats))
    })?;
    Ok(Phase {
        conns: n,
        seconds: elapsed.as_secs_f64(),
        conns_per_sec: n as f64 / elapsed.as_secs_f64().max(1e-9),
        batch_latency_ns: Latency::of(&hist),
        floor_latency_ns: Latency::of(&floors),
        // Taken with the other phase's, once both are done.
        memory_floor_latency_ns: Latency::of(&histogram()),
        memory_floor_mib: 0.0,
        batches: hist.len(),
        committed: stats.committed,
        expired: stats.expired,
        replaced: stats.replaced,
        refused_table_full: stats.refused_table_full,
        evicted: stats.evicted,
        table_len_after: tracker.table_len(),
    })
}
