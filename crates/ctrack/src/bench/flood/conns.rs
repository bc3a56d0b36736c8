//! `ctrack bench flood syn|udp|icmp|zone`: a connection flood against a
//! table of established connections near its limit.
//!
//! 1. *reference*: a separate tracker is filled with `--max-conns`
//!    ordinary connections of the attack's protocol; its memory (the
//!    table's own accounting) is the bound the attacked table must stay
//!    within ("the limit × bytes per connection"). It is dropped before
//!    the run.
//! 2. *establish*: `--established` connections complete their opening
//!    (TCP three-way handshake, UDP request and answer, ICMP echo and
//!    reply).
//! 3. *flood*: `--flood` spoofed openers from random sources (outside the
//!    legitimate clients' 10.0.0.0/8) at the servers, in bursts of 32,
//!    timed alone. Interleaved, evenly spread and not timed: `--newcomers`
//!    legitimate connections open and complete, and established
//!    connections send a packet each (probes). The table's length and
//!    memory are sampled every 2^20 flood packets.
//! 4. *after*: every established connection sends one packet.
//!
//! Virtual time stands still, so nothing expires: whatever leaves the
//! table was evicted (early drop). `zone` puts the connections in zones 1
//! and 2, limits each zone to half the table, and floods zone 1 only.

use std::io::Write;
use std::time::Instant;

use anyhow::{Result, bail};
use clap::Args;
use ctrack_core::{Config, CtAction, CtState, LinkType, Stats, Time, Tracker, Verdict};
use ctrack_wire::build::{Frame, L4};
use ctrack_wire::icmp::v4::ECHO_REQUEST;
use ctrack_wire::tcp::flags::{ACK, SYN};
use serde::Serialize;

use super::super::{MAX_BENCH_CONNS, Machine, packets};
// The flood's random sources, reproducible from the seed.
use super::fragmix::Rng;
use crate::args::{MAX_CONNS, MAX_THREADS, bounded};

/// What floods.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Attack {
    Syn,
    Udp,
    Icmp,
    Zone,
}

impl Attack {
    fn name(self) -> &'static str {
        match self {
            Attack::Syn => "syn",
            Attack::Udp => "udp",
            Attack::Icmp => "icmp",
            Attack::Zone => "zone",
        }
    }

    /// The protocol of the legitimate connections and of the flood.
    fn proto(self) -> Proto {
        match self {
            Attack::Syn | Attack::Zone => Proto::Tcp,
            Attack::Udp => Proto::Udp,
            Attack::Icmp => Proto::Icmp,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Proto {
    Tcp,
    Udp,
    Icmp,
}

/// Arguments of `ctrack bench flood syn|udp|icmp|zone`.
#[derive(Debug, Args)]
pub struct ConnFloodArgs {
    /// Established connections in the table when the flood starts (1 to
    /// 400000000).
    #[arg(long, default_value_t = 1_000_000, value_parser = bounded(1, MAX_BENCH_CONNS))]
    pub established: u64,
    /// The table's limit (default: 1.2 × `--established`; above
    /// `--established`, at most 536870912).
    #[arg(long, value_name = "N", value_parser = bounded(2, MAX_CONNS))]
    pub max_conns: Option<usize>,
    /// Flood packets (1 to 10000000000).
    #[arg(long, default_value_t = 20_000_000, value_parser = bounded(1u64, 10_000_000_000))]
    pub flood: u64,
    /// Legitimate connections opened during the flood (0 to 100000000).
    #[arg(long, default_value_t = 10_000, value_parser = bounded(0u64, 100_000_000))]
    pub newcomers: u64,
    /// Packets of established connections sent during the flood (0 to
    /// 100000000).
    #[arg(long, default_value_t = 100_000, value_parser = bounded(0u64, 100_000_000))]
    pub probes: u64,
    /// Seed of the flood's random sources.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Threads sending the flood at once (1 to 1024); the first also
    /// opens the newcomers and sends the probes.
    #[arg(long, default_value_t = 1, value_parser = bounded(1, MAX_THREADS))]
    pub threads: usize,
    /// Table shards per family (a power of two up to 256; default: as
    /// `ctrack run` takes for as many workers as `--threads`,
    /// `Config::shards_for`).
    #[arg(long, value_parser = crate::args::power_of_two(ctrack_core::MAX_SHARDS))]
    pub shards: Option<usize>,
}

impl ConnFloodArgs {
    fn shards(&self) -> usize {
        self.shards.unwrap_or(Config::shards_for(self.threads))
    }

    fn max_conns(&self) -> usize {
        self.max_conns
            .unwrap_or((self.established as usize).saturating_mul(6) / 5)
            .max(self.established as usize + 1)
    }

    fn validate(&self, attack: Attack) -> Result<(), String> {
        let max = self.max_conns();
        if max > MAX_CONNS {
            return Err(format!("--max-conns must be at most {MAX_CONNS}"));
        }
        if let Some(m) = self.max_conns
            && m as u64 <= self.established
        {
            return Err(format!(
                "--max-conns ({m}) must be above --established ({}): the flood needs room to land in",
                self.established
            ));
        }
        if attack == Attack::Zone && (self.established as usize).div_ceil(2) >= max / 2 {
            return Err(format!(
                "--max-conns ({max}) must leave each zone (half of it) room above its half of --established ({})",
                self.established
            ));
        }
        Ok(())
    }
}

/// One zone's figures (`zone` only).
#[derive(Debug, Clone, Serialize)]
struct ZoneFigures {
    zone: u16,
    limit: u32,
    established: u64,
    count_before: usize,
    count_after: usize,
    newcomers: u64,
    newcomers_admitted: u64,
    established_survived: u64,
}

#[derive(Debug, Serialize)]
struct FloodJson {
    bench: &'static str,
    attack: &'static str,
    established: u64,
    max_conns: usize,
    threads: usize,
    /// Table shards per family.
    shards: usize,
    flood: u64,
    flood_seconds: f64,
    flood_packets_per_sec: f64,
    newcomers: u64,
    newcomers_admitted: u64,
    newcomers_admitted_pct: f64,
    probes: u64,
    probes_passed: u64,
    established_survived: u64,
    evicted: u64,
    refused_table_full: u64,
    refused_zone_limit: u64,
    peak_table_len: usize,
    table_len_after: usize,
    peak_table_bytes: usize,
    limit_table_bytes: usize,
    bytes_per_conn_at_limit: f64,
    peak_slots_in_use: usize,
    grace_allowance_slots: usize,
    /// Over the shards, the most slots each held in their grace period
    /// when it had to take a fresh one, and the most in one shard.
    grace_peak_slots: usize,
    grace_peak_shard: usize,
    bound_table_bytes: usize,
    rss_growth_bytes: i64,
    zones: Vec<ZoneFigures>,
    failures: Vec<String>,
    machine: Machine,
}

const BURST: usize = 32;
/// The flood is sampled (table length and memory) every this many packets.
const SAMPLE_EVERY: u64 = 1 << 20;
const NOW: Time = Time::from_secs(1);

/// The tracker and what the run sends through it.
struct Run<'a> {
    t: &'a Tracker,
    proto: Proto,
    stats: Stats,
    zoned: bool,
    /// Newcomers per zone, and those that got in.
    newcomers: [u64; 3],
    admitted: [u64; 3],
}

impl Run<'_> {
    fn zone_of(&self, i: u64) -> u16 {
        if self.zoned { 1 + (i % 2) as u16 } else { 0 }
    }

    fn send(&mut self, frame: &[u8], zone: u16) -> Verdict {
        self.t.process(
            frame,
            LinkType::Ethernet,
            &CtAction::commit(zone),
            NOW,
            &mut self.stats,
        )
    }

    /// Opens legitimate connection `i` and completes its opening: true if
    /// it was committed and its last packet is established.
    fn open(&mut self, i: u64) -> bool {
        let z = self.zone_of(i);
        match self.proto {
            Proto::Tcp => {
                let syn = self.send(&packets::tcp(i, false, SYN, 100, 0), z);
                self.send(&packets::tcp(i, true, SYN | ACK, 500, 101), z);
                let ack = self.send(&packets::tcp(i, false, ACK, 101, 501), z);
                syn.committed && ack.state.contains(CtState::EST)
            }
            Proto::Udp => {
                let q = self.send(&packets::udp(i, false), z);
                let a = self.send(&packets::udp(i, true), z);
                q.committed && a.state.contains(CtState::EST)
            }
            Proto::Icmp => {
                let q = self.send(&packets::icmp(i, false), z);
                let a = self.send(&packets::icmp(i, true), z);
                q.committed && a.state.contains(CtState::EST)
            }
        }
    }

    /// Legitimate newcomer `n` (after the established), counted.
    fn newcomer(&mut self, established: u64, n: u64) {
        let i = established + n;
        let z = self.zone_of(i) as usize;
        self.newcomers[z] += 1;
        if self.open(i) {
            self.admitted[z] += 1;
        }
    }

    /// A packet of established connection `i`: true if it is established.
    fn probe(&mut self, i: u64) -> bool {
        let z = self.zone_of(i);
        let f = match self.proto {
            Proto::Tcp => packets::tcp(i, false, ACK, 101, 501),
            Proto::Udp => packets::udp(i, false),
            Proto::Icmp => packets::icmp(i, false),
        };
        self.send(&f, z).state.contains(CtState::EST)
    }
}

/// A spoofed opener from a random source (outside 10.0.0.0/8) at the
/// server of a random legitimate connection.
fn flood_frame(proto: Proto, r: u64, established: u64) -> Vec<u8> {
    let src = (0x6400_0000 | (r as u32 & 0x1fff_ffff)).to_be_bytes();
    let (_, server, _) = packets::endpoints((r >> 32) % established);
    let sport = (r >> 16) as u16 | 1024;
    let l4 = match proto {
        Proto::Tcp => L4::tcp_seg(sport, 80, SYN, r as u32, 0, 65535, &[]),
        Proto::Udp => L4::udp(sport, 53, &[0; 18]),
        Proto::Icmp => L4::icmp_query(ECHO_REQUEST, sport, 1),
    };
    Frame::v4(src, server, l4).build()
}

/// What the flood phase measured.
struct Flooded {
    elapsed: std::time::Duration,
    stats: Stats,
    probes_passed: u64,
    peak_len: usize,
    peak_bytes: usize,
    peak_slots: usize,
}

/// What every flood thread sends at.
#[derive(Clone, Copy)]
struct Target<'a> {
    t: &'a Tracker,
    proto: Proto,
    zone: u16,
    /// Legitimate connections, whose servers are attacked.
    established: u64,
}

/// One thread's share of the flood: `count` spoofed openers from the
/// random sources of `seed`, in bursts; returns the time spent inside the
/// tracker. `after` runs after each burst with the packets sent so far.
fn flood_share(
    to: Target<'_>,
    seed: u64,
    count: u64,
    stats: &mut Stats,
    mut after: impl FnMut(u64),
) -> std::time::Duration {
    let Target {
        t,
        proto,
        zone,
        established,
    } = to;
    let mut rng = Rng::new(seed);
    let mut verdicts = [Verdict::default(); BURST];
    let mut busy = std::time::Duration::ZERO;
    let action = CtAction::commit(zone);
    let mut sent = 0u64;
    while sent < count {
        let n = (count - sent).min(BURST as u64) as usize;
        let frames: Vec<Vec<u8>> = (0..n)
            .map(|_| flood_frame(proto, rng.next(), established))
            .collect();
        let refs: Vec<&[u8]> = frames.iter().map(Vec::as_slice).collect();
        let start = Instant::now();
        t.process_burst(
            &refs,
            LinkType::Ethernet,
            &action,
            NOW,
            &mut verdicts[..n],
            stats,
        );
        busy += start.elapsed();
        sent += n as u64;
        after(sent);
    }
    busy
}

/// The flood over `--threads` threads, with the newcomers and probes
/// spread evenly over it by the first (which also samples the table).
fn flood_phase(run: &mut Run<'_>, a: &ConnFloodArgs) -> Result<Flooded> {
    let t = run.t;
    let m = t.memory();
    let mut f = Flooded {
        elapsed: std::time::Duration::ZERO,
        stats: Stats::default(),
        probes_passed: 0,
        peak_len: t.table_len(),
        peak_bytes: m.total(),
        peak_slots: m.slots_in_use,
    };
    let established = a.established;
    let to = Target {
        t,
        proto: run.proto,
        zone: if run.zoned { 1 } else { 0 },
        established,
    };
    let threads = a.threads as u64;
    let share = |k: u64| a.flood / threads + u64::from(k < a.flood % threads);
    let mine = share(0);
    let (mut next_new, mut next_probe, mut next_sample) = (0u64, 0u64, SAMPLE_EVERY);
    let mut stats = Stats::default();
    let others = std::thread::scope(|s| -> Result<Vec<(std::time::Duration, Stats)>> {
        let mut handles = Vec::new();
        for k in 1..threads {
            let seed = a.seed.wrapping_add(k.wrapping_mul(0x9e37_79b9));
            let h = std::thread::Builder::new()
                .name(format!("flood-{k}"))
                .spawn_scoped(s, move || {
                    let mut st = Stats::default();
                    let busy = flood_share(to, seed, share(k), &mut st, |_| {});
                    (busy, st)
                })
                .map_err(|e| anyhow::anyhow!("cannot start flood thread {k}: {e}"))?;
            handles.push(h);
        }
        let busy = flood_share(to, a.seed, mine, &mut stats, |sent| {
            // This thread's progress stands for everyone's.
            while next_new < a.newcomers && next_new * mine <= sent * a.newcomers {
                run.newcomer(established, next_new);
                next_new += 1;
            }
            while next_probe < a.probes && next_probe * mine <= sent * a.probes {
                if run.probe(next_probe % established) {
                    f.probes_passed += 1;
                }
                next_probe += 1;
            }
            if sent * threads >= next_sample || sent == mine {
                next_sample += SAMPLE_EVERY;
                f.peak_len = f.peak_len.max(t.table_len());
                let m = t.memory();
                f.peak_bytes = f.peak_bytes.max(m.total());
                f.peak_slots = f.peak_slots.max(m.slots_in_use);
            }
        });
        let mut all = vec![(busy, Stats::default())];
        for h in handles {
            all.push(
                h.join()
                    .map_err(|_| anyhow::anyhow!("a flood thread panicked"))?,
            );
        }
        Ok(all)
    })?;
    for (busy, st) in others {
        f.elapsed = f.elapsed.max(busy);
        f.stats.merge(&st);
    }
    f.stats.merge(&stats);
    // Newcomers left over (none unless the flood is shorter than them).
    while next_new < a.newcomers {
        run.newcomer(a.established, next_new);
        next_new += 1;
    }
    Ok(f)
}

fn rss_bytes() -> i64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse::<i64>().ok())
        .map_or(0, |pages| pages * 4096)
}

/// The memory of a table of `shards` shards holding `max` ordinary
/// connections of `proto`.
fn reference_bytes(proto: Proto, max: usize, shards: usize) -> usize {
    let t = Tracker::new(Config {
        max_conns: max,
        shards,
        ..Config::default()
    });
    let mut run = Run {
        t: &t,
        proto,
        stats: Stats::default(),
        zoned: false,
        newcomers: [0; 3],
        admitted: [0; 3],
    };
    for i in 0..max as u64 {
        run.open(i);
    }
    t.memory().total()
}

pub(crate) fn run(
    attack: Attack,
    a: &ConnFloodArgs,
    json: bool,
    out: &mut dyn Write,
) -> Result<()> {
    if let Err(e) = a.validate(attack) {
        bail!(e);
    }
    let j = measure(attack, a)?;
    if json {
        serde_json::to_writer_pretty(&mut *out, &j)?;
        writeln!(out)?;
    } else {
        print_table(&j, out)?;
    }
    if !j.failures.is_empty() {
        bail!("flood {}: {}", j.attack, j.failures.join("; "));
    }
    Ok(())
}

fn measure(attack: Attack, a: &ConnFloodArgs) -> Result<FloodJson> {
    let max = a.max_conns();
    let proto = attack.proto();
    let shards = a.shards();
    let limit_bytes = reference_bytes(proto, max, shards);
    let rss0 = rss_bytes();
    let t = Tracker::new(Config {
        max_conns: max,
        shards,
        ..Config::default()
    });
    let zoned = attack == Attack::Zone;
    if zoned {
        for z in [1, 2] {
            t.set_zone_limit(z, (max / 2) as u32);
        }
    }
    let mut run = Run {
        t: &t,
        proto,
        stats: Stats::default(),
        zoned,
        newcomers: [0; 3],
        admitted: [0; 3],
    };
    for i in 0..a.established {
        run.open(i);
    }
    let count_before: Vec<usize> = [1u16, 2].iter().map(|&z| t.zone_len(z)).collect();
    let after_establish = run.stats;

    let f = flood_phase(&mut run, a)?;
    let (admitted, newcomers_by_zone) = (run.admitted, run.newcomers);
    let (peak_len, peak_bytes, peak_slots) = (f.peak_len, f.peak_bytes, f.peak_slots);
    let (elapsed, flood_stats, probes_passed) = (f.elapsed, f.stats, f.probes_passed);
    let rss_growth = rss_bytes() - rss0;
    let mem_after = t.memory();
    let mut survived = [0u64; 3];
    for i in 0..a.established {
        if run.probe(i) {
            survived[run.zone_of(i) as usize] += 1;
        }
    }
    let mut all = run.stats;
    all.merge(&flood_stats);
    let admitted_all: u64 = admitted.iter().sum();
    let survived_all: u64 = survived.iter().sum();
    let secs = elapsed.as_secs_f64();
    // Each shard of the flooded family (one) may hold this many evicted
    // slots in their grace period beyond its live records: a table at its
    // limit refuses an eviction in a shard that has them all waiting. The
    // memory bound is the table at its limit plus these: their records,
    // one more slot chunk in each shard (a shard allocates whole chunks,
    // and the reference's last ones were partly empty to begin with), and
    // their numbers in the lists that hold them, which keep room for as
    // many again. (The bound used to scale the table's bytes at its limit
    // by the slots: 0.5–0.8 MB short of a 16-thread flood with most shards
    // at the cap; BENCHMARKS.md, lease 7.) The flood is IPv4, whose table's
    // sizes `memory` gives.
    let grace = ctrack_core::GRACE_SLOTS_PER_SHARD * shards;
    let bound = limit_bytes
        + grace * (mem_after.slot_bytes + 2 * core::mem::size_of::<u32>())
        + shards * mem_after.chunk_bytes;
    let zones = if zoned {
        [1u16, 2]
            .iter()
            .map(|&z| ZoneFigures {
                zone: z,
                limit: t.zone_limit(z).0,
                established: a.established / 2 + (a.established % 2) * u64::from(z == 1),
                count_before: count_before[usize::from(z) - 1],
                count_after: t.zone_len(z),
                newcomers: newcomers_by_zone[usize::from(z)],
                newcomers_admitted: admitted[usize::from(z)],
                established_survived: survived[usize::from(z)],
            })
            .collect()
    } else {
        Vec::new()
    };
    let mut j = FloodJson {
        bench: "flood",
        attack: attack.name(),
        established: a.established,
        max_conns: max,
        threads: a.threads,
        shards,
        flood: a.flood,
        flood_seconds: secs,
        flood_packets_per_sec: a.flood as f64 / secs.max(1e-9),
        newcomers: a.newcomers,
        newcomers_admitted: admitted_all,
        newcomers_admitted_pct: pct(admitted_all, a.newcomers),
        probes: a.probes,
        probes_passed,
        established_survived: survived_all,
        evicted: all.evicted - after_establish.evicted,
        refused_table_full: all.refused_table_full - after_establish.refused_table_full,
        refused_zone_limit: all.refused_zone_limit - after_establish.refused_zone_limit,
        peak_table_len: peak_len,
        table_len_after: t.table_len(),
        peak_table_bytes: peak_bytes,
        limit_table_bytes: limit_bytes,
        bytes_per_conn_at_limit: limit_bytes as f64 / max as f64,
        peak_slots_in_use: peak_slots,
        grace_allowance_slots: grace,
        grace_peak_slots: mem_after.grace_peak_slots,
        grace_peak_shard: mem_after.grace_peak_shard,
        bound_table_bytes: bound,
        rss_growth_bytes: rss_growth,
        zones,
        failures: Vec::new(),
        machine: Machine::this(),
    };
    j.failures = failures(&j, after_establish.committed);
    Ok(j)
}

fn pct(n: u64, of: u64) -> f64 {
    if of == 0 {
        100.0
    } else {
        100.0 * n as f64 / of as f64
    }
}

/// What the attack broke, if anything.
fn failures(j: &FloodJson, committed_before: u64) -> Vec<String> {
    let mut f = Vec::new();
    if committed_before != j.established {
        f.push(format!(
            "only {committed_before} of {} connections could be established before the flood",
            j.established
        ));
    }
    if j.established_survived != j.established {
        f.push(format!(
            "{} of {} established connections lost",
            j.established - j.established_survived,
            j.established
        ));
    }
    if j.probes_passed != j.probes {
        f.push(format!(
            "{} of {} packets of established connections did not pass during the flood",
            j.probes - j.probes_passed,
            j.probes
        ));
    }
    if j.newcomers_admitted_pct < 99.0 {
        f.push(format!(
            "only {:.2}% of legitimate new connections got in (at least 99% must)",
            j.newcomers_admitted_pct
        ));
    }
    if j.peak_table_len > j.max_conns {
        f.push(format!(
            "the table held {} connections, above its limit {}",
            j.peak_table_len, j.max_conns
        ));
    }
    if j.peak_slots_in_use > j.max_conns + j.grace_allowance_slots {
        f.push(format!(
            "{} record slots in use, above the limit {} and the {} of the grace period",
            j.peak_slots_in_use, j.max_conns, j.grace_allowance_slots
        ));
    }
    if j.grace_peak_shard > ctrack_core::GRACE_SLOTS_PER_SHARD {
        f.push(format!(
            "a shard held {} slots waiting out their grace period, above the {} a table at its limit may",
            j.grace_peak_shard,
            ctrack_core::GRACE_SLOTS_PER_SHARD
        ));
    }
    if j.peak_table_bytes > j.bound_table_bytes {
        f.push(format!(
            "the table took {} bytes, above the {} it takes at its limit of ordinary connections with the grace period's slots",
            j.peak_table_bytes, j.bound_table_bytes
        ));
    }
    if j.flood > (j.max_conns as u64) * 2 && j.evicted == 0 && j.zones.is_empty() {
        f.push("the flood filled the table but nothing was evicted".into());
    }
    for z in &j.zones {
        if z.established_survived != z.established {
            f.push(format!(
                "zone {}: {} established connections lost",
                z.zone,
                z.established - z.established_survived
            ));
        }
        if z.count_after > z.limit as usize {
            f.push(format!(
                "zone {}: {} connections, above its limit {}",
                z.zone, z.count_after, z.limit
            ));
        }
        if z.zone == 2 && z.count_after as u64 != z.count_before as u64 + z.newcomers_admitted {
            f.push(format!(
                "zone 2 (not attacked): {} connections after, not {} before + {} newcomers",
                z.count_after, z.count_before, z.newcomers_admitted
            ));
        }
        if pct(z.newcomers_admitted, z.newcomers) < 99.0 {
            f.push(format!(
                "zone {}: only {} of {} newcomers got in",
                z.zone, z.newcomers_admitted, z.newcomers
            ));
        }
    }
    f
}

fn print_table(j: &FloodJson, out: &mut dyn Write) -> Result<()> {
    writeln!(
        out,
        "flood {}: {} established, limit {}, {} thread(s), {} shards, {} flood packets in {:.2} s ({:.2} M packets/s)",
        j.attack,
        j.established,
        j.max_conns,
        j.threads,
        j.shards,
        j.flood,
        j.flood_seconds,
        j.flood_packets_per_sec / 1e6
    )?;
    writeln!(
        out,
        "  established: {} of {} survived; {} of {} of their packets passed during the flood",
        j.established_survived, j.established, j.probes_passed, j.probes
    )?;
    writeln!(
        out,
        "  newcomers: {} of {} got in ({:.2}%)",
        j.newcomers_admitted, j.newcomers, j.newcomers_admitted_pct
    )?;
    writeln!(
        out,
        "  evicted {}, refused (table full) {}, refused (zone limit) {}",
        j.evicted, j.refused_table_full, j.refused_zone_limit
    )?;
    writeln!(
        out,
        "  table: peak {} connections ({} slots with those in their grace period), {} after; at most {} slots waiting in one shard, {} over all",
        j.peak_table_len,
        j.peak_slots_in_use,
        j.table_len_after,
        j.grace_peak_shard,
        j.grace_peak_slots
    )?;
    writeln!(
        out,
        "  memory: peak {:.1} MB; at its limit of ordinary connections {:.1} MB ({:.1} bytes each), bound {:.1} MB with {} grace slots; resident set grew {:.1} MB",
        j.peak_table_bytes as f64 / 1e6,
        j.limit_table_bytes as f64 / 1e6,
        j.bytes_per_conn_at_limit,
        j.bound_table_bytes as f64 / 1e6,
        j.grace_allowance_slots,
        j.rss_growth_bytes as f64 / 1e6
    )?;
    for z in &j.zones {
        writeln!(
            out,
            "  zone {}: limit {}, {} connections before, {} after; {} of {} established survived; {} of {} newcomers got in",
            z.zone,
            z.limit,
            z.count_before,
            z.count_after,
            z.established_survived,
            z.established,
            z.newcomers_admitted,
            z.newcomers
        )?;
    }
    if j.failures.is_empty() {
        writeln!(out, "  kept everything it should keep")?;
    }
    Ok(())
}
