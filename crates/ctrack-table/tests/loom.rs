//! Loom models of the table's races. Run with
//! `RUSTFLAGS="--cfg loom" cargo test --release -p ctrack-table --test loom`
//! (`.ci/run` does, into its own target directory). The models use one
//! shard and a one-bucket index, so that every operation contends.
//!
//! Under loom the epoch never frees anything (see `epoch.rs`): these models
//! check the table's own protocol (shard locks, entry locks, index and
//! liveness publication), not crossbeam's collector.
#![cfg(loom)]

use std::sync::atomic::Ordering;

use loom::sync::Arc;
use loom::thread;

use ctrack_table::testing::{Ctx, Rec};
use ctrack_table::{Table, TableConfig, pin};

/// Hashes that all land in shard 0 and bucket 0, tags differing.
fn same_bucket(k: u64) -> u64 {
    k & 0xff
}

const CTX: Ctx = Ctx::<fn(u64) -> u64>::new(same_bucket);

fn table() -> Arc<Table<Rec>> {
    Arc::new(Table::new(TableConfig {
        shards: 1,
        capacity: 4,
    }))
}

fn model(f: impl Fn() + Sync + Send + 'static) {
    let mut b = loom::model::Builder::new();
    if b.preemption_bound.is_none() {
        b.preemption_bound = Some(2);
    }
    b.check(f);
}

/// Inserts unless `key` or `alt` is held (as either key); value `key * 10`.
fn insert(t: &Table<Rec>, key: u64, alt: u64, inst: u64, exp: u64) -> bool {
    CTX.insert_new(t, key, alt, inst, exp, key * 10)
        .expect("room in the table")
}

fn find(t: &Table<Rec>, key: u64) -> Option<(u64, u64)> {
    let g = pin();
    t.find(&g, CTX.hash(key), |r| r.has_key(key))
        .map(|e| (e.record().key, e.record().val.load(Ordering::Relaxed)))
}

fn remove(t: &Table<Rec>, key: u64) -> bool {
    CTX.remove(t, key)
}

#[test]
fn insert_against_insert_of_the_same_connection_from_both_sides() {
    model(|| {
        let t = table();
        let t2 = Arc::clone(&t);
        // One thread commits (1, reply key 2), the other the reply side
        // alone (2): exactly one wins.
        let h = thread::spawn(move || insert(&t2, 2, 0, 0, u64::MAX));
        let a = insert(&t, 1, 2, 0, u64::MAX);
        let b = h.join().unwrap();
        assert!(a ^ b, "exactly one insert wins ({a}, {b})");
        assert_eq!(t.len(), 1);
        assert!(find(&t, 2).is_some());
    });
}

#[test]
fn insert_against_lookup() {
    model(|| {
        let t = table();
        let t2 = Arc::clone(&t);
        let h = thread::spawn(move || find(&t2, 7));
        assert!(insert(&t, 7, 0, 0, u64::MAX));
        // Found either not at all or whole.
        if let Some((k, v)) = h.join().unwrap() {
            assert_eq!((k, v), (7, 70));
        }
        assert_eq!(find(&t, 7), Some((7, 70)));
    });
}

#[test]
fn remove_against_lookup_and_lock() {
    model(|| {
        let t = table();
        assert!(insert(&t, 5, 6, 0, u64::MAX));
        let t2 = Arc::clone(&t);
        let h = thread::spawn(move || {
            let g = pin();
            if let Some(e) = t2.find(&g, CTX.hash(6), |r| r.alt == 6) {
                // Locked, it is live and whole; else it was removed.
                if let Some(l) = e.lock() {
                    assert!(e.is_live());
                    assert_eq!((l.key, l.val.load(Ordering::Relaxed)), (5, 50));
                }
            }
        });
        assert!(remove(&t, 5));
        h.join().unwrap();
        assert_eq!(find(&t, 5), None);
        assert_eq!(find(&t, 6), None);
        assert!(t.is_empty());
    });
}

#[test]
fn instance_reclaim_against_insert() {
    model(|| {
        let t = table();
        assert!(insert(&t, 1, 0, 9, u64::MAX));
        let t2 = Arc::clone(&t);
        let h = thread::spawn(move || insert(&t2, 2, 0, 9, u64::MAX));
        let g = pin();
        let (removed, _) = t.reclaim_instance(&CTX, &g, 0, 9, usize::MAX);
        assert!(h.join().unwrap());
        assert!(removed >= 1);
        assert_eq!(find(&t, 1), None);
        // The racing insert either was reclaimed or is listed and found.
        let listed = t.instance_records(0, 9).len();
        assert_eq!(listed, usize::from(find(&t, 2).is_some()));
        assert_eq!(t.len(), listed);
    });
}

#[test]
fn expiry_against_refresh() {
    model(|| {
        let t = table();
        assert!(insert(&t, 3, 0, 0, 10));
        let t2 = Arc::clone(&t);
        // A packet refreshes the connection under its lock...
        let h = thread::spawn(move || {
            let g = pin();
            let e = t2.find(&g, CTX.hash(3), |r| r.key == 3)?;
            let l = e.lock()?;
            l.exp.store(100_000, Ordering::Relaxed);
            Some(())
        });
        // ...while a sweep at 20 finds it expired.
        let g = pin();
        let s = t.sweep(&CTX, &g, 20_000, usize::MAX);
        let refreshed = h.join().unwrap().is_some();
        // A refreshed connection is never swept; an unrefreshed one is.
        assert_eq!(refreshed, find(&t, 3).is_some());
        assert_eq!(s.removed, usize::from(!refreshed));
    });
}
