//! `ctrack bench flood hash`: a hash flood against the connection table.
//!
//! An attacker who knows the hash function and a seed searches for N
//! UDP 5-tuples whose hash under that seed lands in one table shard (the
//! top bits) and in the same 1/2^B of that shard's index (the home bucket
//! comes from bits 8..40, scaled): N x 64 x 2^B candidates, searched on
//! every core. Those keys are then committed through the packet path of
//!
//! - (a) a tracker seeded with that known seed: the attack works (long
//!   probe sequences, commits refused or pushing others out, slow
//!   lookups);
//! - (b) a tracker with a fresh random seed, as every real tracker has:
//!   the keys spread like any others;
//! - (c) for comparison, N ordinary sequential keys on a fresh seed.
//!
//! For each: the longest probe sequence (index buckets), commits made and
//! refused, early drops, and the lookup rate of established packets (the
//! replies of those connections, without commit). The run fails if (b)'s
//! longest probe is above twice (c)'s plus two buckets.

use std::io::Write;
use std::net::Ipv4Addr;
use std::time::{Duration, Instant};

use anyhow::{Result, bail};
use clap::Args;
use ctrack_core::{
    Config, ConnKey, CtAction, Endpoint, Family, KeyHasher, LinkType, Stats, Time, Tracker,
};
use ctrack_wire::build::{Frame, L4};
use ctrack_wire::ipv4;
use serde::Serialize;

use crate::args::{MAX_CONNS, MAX_RUNS, bounded};
use crate::bench::{Machine, median};

/// Arguments of `ctrack bench flood hash`.
#[derive(Debug, Args)]
pub struct HashFloodArgs {
    /// Keys the attacker sends (1000 to 50000000).
    #[arg(long, default_value_t = 10_000_000, value_parser = bounded(1000u64, 50_000_000))]
    pub(crate) keys: u64,
    /// Narrowness: the keys' home buckets fall in 1/2^B of their shard's
    /// index (0 to 8; the search tries about keys x 64 x 2^B candidates).
    #[arg(long, default_value_t = 3, value_parser = bounded(0u32, 8))]
    pub(crate) bits: u32,
    /// The seed the attacker knows.
    #[arg(long, default_value_t = 0x5eed)]
    pub(crate) seed: u64,
    /// Threads for the search (1 to 256; default: every core).
    #[arg(long, value_parser = bounded(1usize, 256))]
    pub(crate) threads: Option<usize>,
    /// Each tracker's connection limit, which sizes its index (default:
    /// twice `--keys`; at least `--keys`, at most 536870912). At exactly
    /// `--keys` the index is at its design load when full and ordinary
    /// keys already walk long runs.
    #[arg(long, value_name = "N", value_parser = bounded(1000usize, MAX_CONNS))]
    pub(crate) max_conns: Option<usize>,
    /// Lookup passes over the keys per tracker; the median is reported (1
    /// to 1000).
    #[arg(long, default_value_t = 3, value_parser = bounded(1, MAX_RUNS))]
    pub(crate) runs: usize,
}

/// The server every key talks to.
const SERVER: [u8; 4] = [172, 16, 0, 1];

/// A key: client address (in 10.0.0.0/8) and port, from a candidate
/// number.
#[derive(Debug, Clone, Copy)]
struct Key {
    client: u32,
    port: u16,
}

impl Key {
    fn of(c: u64) -> Key {
        Key {
            client: 0x0a00_0000 | ((c / 65_535) as u32 & 0x00ff_ffff),
            port: (c % 65_535) as u16 + 1,
        }
    }

    fn conn(&self) -> ConnKey {
        ConnKey {
            src: Endpoint::v4(Ipv4Addr::from(self.client), self.port),
            dst: Endpoint::v4(Ipv4Addr::from(SERVER), 53),
            zone: 0,
            proto: 17,
            family: Family::V4,
        }
    }
}

/// The bits of a hash the attacker aims at, and their wanted value: shard
/// 0 of `shards` (the top bits) and the first 1/2^B of the home field
/// (bits 8..40).
fn target(shards: u64, bits: u32) -> (u64, u64) {
    let shard_mask = (shards.next_power_of_two() - 1) << ctrack_core::SHARD_SHIFT;
    let region_mask = if bits == 0 {
        0
    } else {
        ((1u64 << bits) - 1) << (40 - bits)
    };
    (shard_mask | region_mask, 0)
}

/// Searches keys whose hash under `hasher` matches the target, on
/// `threads` threads; returns them and the candidates tried.
fn search(hasher: &KeyHasher, n: u64, bits: u32, threads: usize) -> (Vec<Key>, u64) {
    // The tracker's shard count (its default), which the attacker knows.
    let (mask, want) = target(Config::default().shards as u64, bits);
    let threads = threads.max(1) as u64;
    // Each thread its own stretch of the 2^24 x 65535 candidates.
    let stretch = (65_535u64 << 24) / threads;
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let share = n / threads + u64::from(t < n % threads);
                s.spawn(move || {
                    let mut found = Vec::with_capacity(share as usize);
                    let mut c = t * stretch;
                    let end = c + stretch;
                    while (found.len() as u64) < share && c < end {
                        let k = Key::of(c);
                        if hasher.hash(&k.conn()) & mask == want {
                            found.push(k);
                        }
                        c += 1;
                    }
                    (found, c - t * stretch)
                })
            })
            .collect();
        let mut keys = Vec::with_capacity(n as usize);
        let mut tried = 0;
        for h in handles {
            if let Ok((f, t)) = h.join() {
                keys.extend(f);
                tried += t;
            }
        }
        (keys, tried)
    })
}

/// A batch of frames to patch: the query (client to server) or the reply.
struct Frames {
    frames: Vec<Vec<u8>>,
}

const BATCH: usize = 32;

impl Frames {
    fn new(reply: bool) -> Frames {
        let c = [10, 0, 0, 1];
        let payload = [0u8; 18];
        let f = if reply {
            Frame::v4(SERVER, c, L4::udp(53, 1, &payload)).build()
        } else {
            Frame::v4(c, SERVER, L4::udp(1, 53, &payload)).build()
        };
        Frames {
            frames: vec![f; BATCH],
        }
    }

    /// Sets frame `i` to `k`'s packet (the client's address and port on
    /// the client side; no UDP checksum).
    fn set(&mut self, i: usize, k: &Key, reply: bool) {
        let f = &mut self.frames[i];
        let (addr, port) = if reply { (30, 36) } else { (26, 34) };
        f[addr..addr + 4].copy_from_slice(&k.client.to_be_bytes());
        f[port..port + 2].copy_from_slice(&k.port.to_be_bytes());
        f[40..42].copy_from_slice(&[0, 0]);
        ipv4::Ipv4Packet::new_unchecked(&mut f[14..]).fill_checksum();
    }
}

/// Sends one packet of each key (queries with commit, or replies with a
/// lookup only) in batches; returns the time taken and the counters.
fn send(t: &Tracker, keys: &[Key], reply: bool) -> (Duration, Stats) {
    let action = if reply {
        CtAction::lookup(0)
    } else {
        CtAction::commit(0)
    };
    let mut frames = Frames::new(reply);
    let mut verdicts = Vec::with_capacity(BATCH);
    let mut stats = Stats::default();
    let now = Time::from_secs(1);
    let mut busy = Duration::ZERO;
    for chunk in keys.chunks(BATCH) {
        for (i, k) in chunk.iter().enumerate() {
            frames.set(i, k, reply);
        }
        let refs: Vec<&[u8]> = frames.frames[..chunk.len()]
            .iter()
            .map(Vec::as_slice)
            .collect();
        verdicts.clear();
        let t0 = Instant::now();
        t.process_batch(
            &refs,
            LinkType::Ethernet,
            &action,
            now,
            &mut verdicts,
            &mut stats,
        );
        busy += t0.elapsed();
    }
    (busy, stats)
}

/// Each tracker's size and lookup passes.
struct Sizing {
    max_conns: usize,
    runs: usize,
}

#[derive(Debug, Serialize)]
struct Case {
    case: &'static str,
    seed: String,
    keys: u64,
    committed: u64,
    refused_table_full: u64,
    early_dropped: u64,
    table_len: usize,
    longest_probe: usize,
    insert_mconn_per_sec: f64,
    lookup_runs_mpps: Vec<f64>,
    lookup_mpps: f64,
    lookups_found: u64,
    lookups_not_found: u64,
}

/// Commits `keys` into a tracker with `hasher`, then looks them up.
fn case(name: &'static str, seed: String, hasher: KeyHasher, keys: &[Key], a: &Sizing) -> Case {
    let runs = a.runs;
    let t = Tracker::with_hasher(
        Config {
            max_conns: a.max_conns,
            ..Config::default()
        },
        hasher,
    );
    let (ins, st) = send(&t, keys, false);
    let probe = t.longest_probe();
    let mut rates = Vec::new();
    let mut found = (0, 0);
    for _ in 0..runs {
        let (d, s) = send(&t, keys, true);
        rates.push(keys.len() as f64 / d.as_secs_f64().max(1e-9) / 1e6);
        found = (s.established, s.packets - s.established);
    }
    Case {
        case: name,
        seed,
        keys: keys.len() as u64,
        committed: st.committed,
        refused_table_full: st.refused_table_full,
        early_dropped: st.evicted,
        table_len: t.table_len(),
        longest_probe: probe,
        insert_mconn_per_sec: keys.len() as f64 / ins.as_secs_f64().max(1e-9) / 1e6,
        lookup_mpps: median(&rates),
        lookup_runs_mpps: rates,
        lookups_found: found.0,
        lookups_not_found: found.1,
    }
}

#[derive(Debug, Serialize)]
struct HashFloodJson {
    bench: &'static str,
    keys: u64,
    bits: u32,
    max_conns: usize,
    threads: usize,
    candidates_tried: u64,
    search_seconds: f64,
    search_mhash_per_sec: f64,
    cases: Vec<Case>,
    failure: Option<String>,
    machine: Machine,
}

/// Runs `ctrack bench flood hash`.
pub(crate) fn run(a: &HashFloodArgs, json: bool, out: &mut dyn Write) -> Result<()> {
    let threads = a
        .threads
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    let max_conns = a
        .max_conns
        .unwrap_or((a.keys as usize).saturating_mul(2).min(MAX_CONNS));
    if (max_conns as u64) < a.keys {
        bail!(
            "--max-conns ({max_conns}) is below --keys ({}): the table could not hold them",
            a.keys
        );
    }
    let sz = Sizing {
        max_conns,
        runs: a.runs,
    };
    let known = KeyHasher::with_seed(a.seed);
    let t0 = Instant::now();
    let (keys, tried) = search(&known, a.keys, a.bits, threads);
    let search_time = t0.elapsed();
    if keys.len() as u64 != a.keys {
        bail!(
            "the search found {} keys of {} in its candidate space",
            keys.len(),
            a.keys
        );
    }
    let mut cases = Vec::new();
    // One tracker at a time: each is dropped before the next is built.
    cases.push(case(
        "a: attack keys, known seed",
        format!("{:#x}", a.seed),
        known,
        &keys,
        &sz,
    ));
    cases.push(case(
        "b: attack keys, fresh seed",
        "random".into(),
        KeyHasher::new(),
        &keys,
        &sz,
    ));
    drop(keys);
    let plain: Vec<Key> = (0..a.keys).map(Key::of).collect();
    cases.push(case(
        "c: sequential keys, fresh seed",
        "random".into(),
        KeyHasher::new(),
        &plain,
        &sz,
    ));
    let (b, c) = (cases[1].longest_probe, cases[2].longest_probe);
    let failure = (b > 2 * c + 2).then(|| {
        format!(
            "with a fresh seed the attack keys' longest probe ({b} buckets) is far above ordinary keys' ({c})"
        )
    });
    let j = HashFloodJson {
        bench: "flood hash",
        keys: a.keys,
        bits: a.bits,
        max_conns,
        threads,
        candidates_tried: tried,
        search_seconds: search_time.as_secs_f64(),
        search_mhash_per_sec: tried as f64 / search_time.as_secs_f64().max(1e-9) / 1e6,
        cases,
        failure,
        machine: Machine::this(),
    };
    if json {
        serde_json::to_writer_pretty(&mut *out, &j)?;
        writeln!(out)?;
    } else {
        table(&j, out)?;
    }
    if let Some(f) = &j.failure {
        bail!("hash flood: {f}");
    }
    Ok(())
}

fn table(j: &HashFloodJson, out: &mut dyn Write) -> Result<()> {
    writeln!(
        out,
        "hash flood: {} UDP keys in one table shard and 1/{} of its index under a known seed, \
         trackers of {} connections; search: {} candidates in {:.1} s on {} threads ({:.0} M hashes/s)",
        j.keys,
        1u64 << j.bits,
        j.max_conns,
        j.candidates_tried,
        j.search_seconds,
        j.threads,
        j.search_mhash_per_sec
    )?;
    writeln!(
        out,
        "{:<32} {:>10} {:>10} {:>10} {:>10} {:>8} {:>12} {:>11} {:>10}",
        "case",
        "committed",
        "refused",
        "early drop",
        "in table",
        "probe",
        "insert Mc/s",
        "lookup Mpps",
        "found"
    )?;
    for c in &j.cases {
        writeln!(
            out,
            "{:<32} {:>10} {:>10} {:>10} {:>10} {:>8} {:>12.2} {:>11.2} {:>10}",
            c.case,
            c.committed,
            c.refused_table_full,
            c.early_dropped,
            c.table_len,
            c.longest_probe,
            c.insert_mconn_per_sec,
            c.lookup_mpps,
            c.lookups_found
        )?;
    }
    match &j.failure {
        Some(f) => writeln!(out, "FAILED: {f}")?,
        None => writeln!(
            out,
            "a fresh seed spreads the attack keys like ordinary ones (longest probe {} vs {} buckets)",
            j.cases[1].longest_probe, j.cases[2].longest_probe
        )?,
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_search_finds_keys_in_the_target_and_only_there() {
        let known = KeyHasher::with_seed(7);
        let (keys, tried) = search(&known, 64, 2, 2);
        assert_eq!(keys.len(), 64);
        // About 64 x 2^2 candidates per key.
        assert!(tried > 64 * 64, "{tried}");
        let (mask, want) = target(Config::default().shards as u64, 2);
        assert!(keys.iter().all(|k| known.hash(&k.conn()) & mask == want));
        // Under another seed they are ordinary keys: spread over shards.
        let fresh = KeyHasher::new();
        let shards: std::collections::HashSet<u64> = keys
            .iter()
            .map(|k| fresh.hash(&k.conn()) >> ctrack_core::SHARD_SHIFT & 63)
            .collect();
        assert!(shards.len() > 16, "{}", shards.len());
    }

    #[test]
    fn the_attack_works_with_the_known_seed_only() {
        let known = KeyHasher::with_seed(9);
        let (keys, _) = search(&known, 3000, 3, 2);
        let sz = Sizing {
            max_conns: 6000,
            runs: 1,
        };
        let a = case("a", String::new(), known, &keys, &sz);
        let b = case("b", String::new(), KeyHasher::new(), &keys, &sz);
        // Known seed: the run near home fills, so each commit there evicts
        // another attack key (or is refused) and few stay in the table.
        assert!(a.early_dropped + a.refused_table_full > 0, "{a:?}");
        assert!(
            a.table_len < 3000 && a.longest_probe > b.longest_probe,
            "{a:?}"
        );
        assert_eq!(b.committed, 3000);
        assert_eq!(b.lookups_found, 3000);
    }
}
