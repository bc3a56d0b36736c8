//! Multi-thread stress tests of the table, bounded for CI. Longer runs:
//! `CTRACK_STRESS_OPS=2000000 cargo test --release -p ctrack-table --test stress`.
//!
//! - `disjoint_keys_match_a_sequential_model`: threads apply random
//!   operations to keys of their own (sharing shards, buckets and zone
//!   instances with the others); at the end the table holds exactly what a
//!   single-threaded model of each thread's operations holds.
//! - `racing_inserts_of_the_same_keys`: threads insert the same keys, from
//!   the primary and the secondary side, with lookups, removals, sweeps and
//!   instance reclaims racing: no key is ever held twice, and every record
//!   found is whole.
//! - `lookups_hold_through_index_rebuilds`: readers look up keys that stay
//!   in the table while a writer grows it far past its capacity, so that
//!   every shard's index is rebuilt again and again (each replaced one
//!   giving its pages back once the epoch lets it go): no lookup ever
//!   misses. (The window in which a reader holds a replaced index is too
//!   short for this to catch a release that came too early; the unit
//!   test `a_replaced_index_stays_whole_for_a_reader_pinned_before`
//!   holds one open and does.)
#![cfg(not(loom))]

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use ctrack_table::testing::{MIXED, Rec, mix};
use ctrack_table::{Guard, Table, TableConfig, pin};
use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};

fn ops() -> usize {
    std::env::var("CTRACK_STRESS_OPS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(40_000)
}

/// Finds the live record of `key` (by its primary or secondary key).
fn find(t: &Table<Rec>, g: &Guard, key: u64) -> Option<u64> {
    t.find(g, mix(key), |r| r.has_key(key))
        .map(|e| e.record().key)
}

/// Inserts unless a record of `key` or `alt` exists; returns whether it
/// did. Its value is `key * 1000`, checked whole by `touch`.
fn insert(t: &Table<Rec>, key: u64, alt: u64, inst: u64, exp: u64) -> bool {
    MIXED
        .insert_new(t, key, alt, inst, exp, key * 1000)
        .expect("room in the table")
}

fn remove(t: &Table<Rec>, key: u64) -> bool {
    MIXED.remove(t, key)
}

/// Bumps the version of `key`'s record under its lock, checking that what
/// it reads is whole.
fn touch(t: &Table<Rec>, key: u64) -> bool {
    let g = pin();
    let Some(e) = t.find(&g, mix(key), |r| r.key == key) else {
        return false;
    };
    let Some(l) = e.lock() else { return false };
    let v = l.val.load(Ordering::Relaxed);
    assert_eq!(v / 1000, key, "a record's value belongs to its key");
    l.val.store(v + 1, Ordering::Relaxed);
    true
}

#[test]
fn disjoint_keys_match_a_sequential_model() {
    const THREADS: u64 = 4;
    let t = Arc::new(Table::<Rec>::new(TableConfig {
        shards: 8,
        capacity: 4096,
    }));
    let per_thread = ops();
    let handles: Vec<_> = (0..THREADS)
        .map(|tid| {
            let t = Arc::clone(&t);
            std::thread::spawn(move || {
                let mut rng = SmallRng::seed_from_u64(tid);
                // key -> (alt, inst): this thread's model.
                let mut model: HashMap<u64, (u64, u64)> = HashMap::new();
                for _ in 0..per_thread {
                    // Keys of thread `tid` are `tid + 1 + THREADS * n`;
                    // secondary keys live far above them.
                    let n = rng.random_range(0..512u64);
                    let key = tid + 1 + THREADS * n;
                    let alt = if rng.random_bool(0.3) {
                        key + (1 << 40)
                    } else {
                        0
                    };
                    let inst = rng.random_range(0..4u64);
                    match rng.random_range(0..10) {
                        0..=3 => {
                            let done = insert(&t, key, alt, inst, u64::MAX);
                            assert_eq!(done, !model.contains_key(&key), "insert {key}");
                            if done {
                                model.insert(key, (alt, inst));
                            }
                        }
                        4..=5 => {
                            let done = remove(&t, key);
                            assert_eq!(done, model.remove(&key).is_some(), "remove {key}");
                        }
                        6..=7 => {
                            let g = pin();
                            assert_eq!(find(&t, &g, key).is_some(), model.contains_key(&key));
                            if let Some(&(alt, _)) = model.get(&key)
                                && alt != 0
                            {
                                assert_eq!(find(&t, &g, alt), Some(key));
                            }
                        }
                        _ => {
                            assert_eq!(touch(&t, key), model.contains_key(&key));
                        }
                    }
                }
                model
            })
        })
        .collect();
    let mut all: HashMap<u64, (u64, u64)> = HashMap::new();
    for h in handles {
        all.extend(h.join().expect("stress thread"));
    }
    // The table holds exactly the union of the models.
    assert_eq!(t.len(), all.len());
    let g = pin();
    for (&k, &(alt, inst)) in &all {
        let e = t
            .find(&g, mix(k), |r| r.key == k)
            .expect("a modelled key is held");
        assert_eq!((e.record().alt, e.record().inst), (alt, inst));
        if alt != 0 {
            assert_eq!(find(&t, &g, alt), Some(k));
        }
    }
    // Zone instance lists agree with the model.
    for inst in 0..4 {
        let listed: usize = (0..t.shard_count())
            .map(|s| t.instance_records(s, inst).len())
            .sum();
        assert_eq!(listed, all.values().filter(|v| v.1 == inst).count());
    }
    // Reclaiming every instance empties the table.
    for s in 0..t.shard_count() {
        for inst in 0..4 {
            t.reclaim_instance(&MIXED, &g, s, inst, usize::MAX);
        }
    }
    assert!(t.is_empty());
    for &k in all.keys() {
        assert!(find(&t, &g, k).is_none());
    }
}

#[test]
fn racing_inserts_of_the_same_keys() {
    racing_inserts_in(256);
}

/// The same in shards whose share pays for four timer-wheel lanes: the
/// sweeper takes a tick's records from several lists.
#[test]
fn racing_inserts_of_the_same_keys_in_shards_of_four_wheel_lanes() {
    racing_inserts_in(4 * 8192);
}

fn racing_inserts_in(capacity: usize) {
    const THREADS: usize = 4;
    const KEYS: u64 = 64;
    let t = Arc::new(Table::<Rec>::new(TableConfig {
        shards: 4,
        capacity,
    }));
    let stop = Arc::new(AtomicBool::new(false));
    let per_thread = ops();
    let mut handles: Vec<_> = (0..THREADS)
        .map(|tid| {
            let t = Arc::clone(&t);
            std::thread::spawn(move || {
                let mut rng = SmallRng::seed_from_u64(100 + tid as u64);
                for i in 0..per_thread {
                    let k = rng.random_range(1..=KEYS);
                    // Every key k has the secondary key k + KEYS: threads
                    // race from both sides.
                    let (key, alt) = (k, k + KEYS);
                    match rng.random_range(0..8) {
                        0..=2 => {
                            insert(&t, key, alt, k % 3, 1_000 + (i as u64 % 5_000));
                        }
                        3 => {
                            remove(&t, key);
                        }
                        4..=5 => {
                            let g = pin();
                            // Found from either side, it is the same record.
                            if let Some(a) = find(&t, &g, key)
                                && let Some(b) = find(&t, &g, alt)
                            {
                                assert_eq!(a, b);
                            }
                        }
                        _ => {
                            touch(&t, key);
                        }
                    }
                }
            })
        })
        .collect();
    // A sweeper and a reclaimer race with them.
    {
        let t = Arc::clone(&t);
        let stop = Arc::clone(&stop);
        handles.push(std::thread::spawn(move || {
            let mut now = 0;
            while !stop.load(Ordering::Relaxed) {
                let g = pin();
                t.sweep(&MIXED, &g, now, 64);
                now += 97;
                let s = (now as usize) % t.shard_count();
                t.reclaim_instance(&MIXED, &g, s, now % 3, 8);
            }
        }));
    }
    for h in handles.drain(..THREADS) {
        h.join().expect("stress thread");
    }
    stop.store(true, Ordering::Relaxed);
    for h in handles {
        h.join().expect("sweeper");
    }
    // No key is held twice, from either side.
    let g = pin();
    let mut held = 0;
    for k in 1..=KEYS {
        let mut seen = 0;
        let mut seen_alt = 0;
        for s in 0..t.shard_count() {
            for inst in 0..3 {
                for id in t.instance_records(s, inst) {
                    if let Some(e) = t.get(&g, id) {
                        let r = e.record();
                        seen += usize::from(r.key == k);
                        seen_alt += usize::from(r.alt == k + KEYS);
                    }
                }
            }
        }
        assert!(seen <= 1 && seen == seen_alt, "key {k}: {seen} records");
        held += seen;
        assert_eq!(find(&t, &g, k).is_some(), seen == 1);
        assert_eq!(find(&t, &g, k + KEYS).is_some(), seen == 1);
    }
    assert_eq!(t.len(), held);
}

#[test]
fn lookups_hold_through_index_rebuilds() {
    const READERS: usize = 3;
    const STABLE: u64 = 500;
    let t = Arc::new(Table::<Rec>::new(TableConfig {
        shards: 4,
        capacity: 64,
    }));
    for k in 1..=STABLE {
        assert!(insert(&t, k, 1_000_000_000 + k, 0, u64::MAX));
    }
    let stop = Arc::new(AtomicBool::new(false));
    let readers: Vec<_> = (0..READERS)
        .map(|r| {
            let (t, stop) = (Arc::clone(&t), Arc::clone(&stop));
            std::thread::spawn(move || {
                let mut rounds = 0u64;
                while !stop.load(Ordering::Relaxed) || rounds == 0 {
                    for k in (1..=STABLE).skip(r) {
                        // A pin a lookup, as a packet's: pins come and go
                        // while indexes are replaced and released.
                        let g = pin();
                        assert_eq!(find(&t, &g, k), Some(k), "key {k} lost");
                        assert_eq!(find(&t, &g, 1_000_000_000 + k), Some(k));
                    }
                    rounds += 1;
                }
                rounds
            })
        })
        .collect();
    // Grown to many times its capacity: each shard's index rebuilt again
    // and again while the readers look.
    let grow = (ops() as u64 / 2).max(5_000);
    for k in STABLE + 1..=STABLE + grow {
        assert!(insert(&t, k, 1_000_000_000 + k, 0, u64::MAX));
    }
    stop.store(true, Ordering::Relaxed);
    for h in readers {
        assert!(h.join().expect("reader") > 0);
    }
    let g = pin();
    for k in (1..=STABLE + grow).step_by(97) {
        assert_eq!(find(&t, &g, k), Some(k));
    }
    assert_eq!(t.len() as u64, STABLE + grow);
}
