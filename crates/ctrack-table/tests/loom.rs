//! Loom models of the table's races. Run with
//! `LOOM_MAX_PREEMPTIONS=2 RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom
//! cargo test --release -p ctrack-table --test loom` (`.ci/run` does). The
//! models use one shard and a one-bucket index, so that every operation
//! contends.
//!
//! Under loom the epoch is a model collector (see `epoch.rs`) that really
//! runs deferred work once no guard pinned before the defer is alive, and
//! freed slots are handed to it one at a time: removed slots are reused
//! and replaced boxes freed within a model, so the models check that no
//! reader ever sees either through its guard, besides the table's own
//! protocol (shard locks, entry locks, index and liveness publication).
#![cfg(loom)]

use std::sync::atomic::Ordering;

use loom::sync::Arc;
use loom::sync::atomic::AtomicUsize;
use loom::thread;

use ctrack_table::testing::{Ctx, Rec};
use ctrack_table::{EpochBox, Gate, RecordId, Removal, Retired, Table, TableConfig, Writer, pin};

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

/// The id of the live record of `key` (as either key).
fn id_of(t: &Table<Rec>, key: u64) -> Option<RecordId> {
    let g = pin();
    t.find(&g, CTX.hash(key), |r| r.has_key(key))
        .map(|e| e.id())
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

/// A lookup that reads its shard's insert count, then searches and finds
/// nothing, against an insert of the key it looks for (`alt` 0: as a
/// record's own key; else as the reply key of record `alt`, through an
/// alias): when the writer then says nothing was inserted since, the key
/// is truly not in the table, so that a commit may skip its search under
/// the lock.
fn search_and_miss_against_insert(alt: u64) {
    model(move || {
        let t = table();
        let t2 = Arc::clone(&t);
        let h = thread::spawn(move || {
            if alt == 0 {
                insert(&t2, 7, 0, 0, u64::MAX)
            } else {
                insert(&t2, alt, 7, 0, u64::MAX)
            }
        });
        let g = pin();
        let hash = CTX.hash(7);
        let seen = t.seen(hash);
        let missed = t.find(&g, hash, |r| r.has_key(7)).is_none();
        if missed {
            let w = t.write(&g, &CTX.hashes_of(7, 0));
            if w.unchanged_since(hash, seen) {
                assert!(
                    w.find(hash, |r| r.has_key(7)).is_none(),
                    "nothing inserted since the search began, yet the key is in"
                );
            }
        }
        drop(g);
        assert!(h.join().unwrap());
    });
}

#[test]
fn search_and_miss_against_insert_of_the_key() {
    search_and_miss_against_insert(0);
}

#[test]
fn search_and_miss_against_insert_of_an_alias_of_the_key() {
    search_and_miss_against_insert(8);
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

/// Runs of `budgeted_expiry_against_insert_into_its_shard` that found its
/// shard busy (counted outside the model: some run must).
static BUSY_RUNS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

#[test]
fn budgeted_expiry_against_insert_into_its_shard() {
    BUSY_RUNS.store(0, Ordering::Relaxed);
    model(|| {
        let t = table();
        assert!(insert(&t, 3, 0, 0, 10));
        let t2 = Arc::clone(&t);
        let h = thread::spawn(move || insert(&t2, 5, 0, 0, u64::MAX));
        // A sweep with a budget passes over the shard if the insert holds
        // its lock, and then says so and leaves it due.
        let g = pin();
        let s = t.sweep(&CTX, &g, 20_000, 8);
        assert!(h.join().unwrap());
        assert_eq!(s.removed + s.busy, 1, "{s:?}");
        assert_eq!(find(&t, 3).is_some(), s.busy == 1);
        if s.busy == 1 {
            assert!(s.next_due.is_some_and(|d| d <= 20_000), "{s:?}");
            BUSY_RUNS.fetch_add(1, Ordering::Relaxed);
        }
        // Nothing is lost: a later sweep takes what was left.
        let s = t.sweep(&CTX, &g, 20_000, 8);
        assert_eq!(s.busy, 0);
        assert_eq!(find(&t, 3), None);
        assert!(find(&t, 5).is_some());
    });
    assert!(
        BUSY_RUNS.load(Ordering::Relaxed) > 0,
        "no run found the shard busy"
    );
}

#[test]
fn unbudgeted_expiry_waits_for_its_busy_shard() {
    // A sweep of everything due leaves nothing due behind, a shard an
    // insert holds included.
    model(|| {
        let t = table();
        assert!(insert(&t, 3, 0, 0, 10));
        let t2 = Arc::clone(&t);
        let h = thread::spawn(move || insert(&t2, 5, 0, 0, u64::MAX));
        let g = pin();
        let s = t.sweep(&CTX, &g, 20_000, usize::MAX);
        assert!(h.join().unwrap());
        assert_eq!((s.removed, s.busy), (1, 0), "{s:?}");
        assert_eq!(find(&t, 3), None);
    });
}

/// A reader holds a record found by `by` (1, or its secondary key 2 when
/// `alt` is 2) while a writer removes it and inserts others, which take
/// its slot (and alias) once no reader pinned before the removal is left.
fn reader_against_remove_and_reuse(alt: u64, by: u64) {
    let t = table();
    assert!(insert(&t, 1, alt, 0, u64::MAX));
    let old = id_of(&t, 1).expect("inserted");
    let t2 = Arc::clone(&t);
    let reader = thread::spawn(move || {
        let g = pin();
        let Some(e) = t2.find(&g, CTX.hash(by), |r| r.has_key(by)) else {
            return;
        };
        // Whatever the writer does meanwhile, the record found stays the
        // one found while the guard is pinned: its slot is not handed to
        // the next record.
        for _ in 0..2 {
            let r = e.record();
            assert_eq!((r.key, r.alt), (1, alt), "slot reused under a guard");
            assert_eq!(r.val.load(Ordering::Relaxed), 10);
            thread::yield_now();
        }
    });
    let alt2 = if alt == 0 { 0 } else { 4 };
    assert!(remove(&t, 1));
    assert!(insert(&t, 3, alt2, 0, u64::MAX));
    let second = id_of(&t, 3).expect("inserted");
    reader.join().unwrap();
    assert_eq!(find(&t, by), None);
    if alt2 != 0 {
        assert_eq!(find(&t, alt2), Some((3, 30)));
    }
    // With every guard gone the slot is free for reuse if the second
    // record did not get it: the model really reuses slots.
    assert!(insert(&t, 5, 0, 0, u64::MAX));
    let third = id_of(&t, 5).expect("inserted");
    assert!(second == old || third == old, "the removed slot is reused");
    assert_eq!(t.len(), 2);
}

#[test]
fn reader_never_sees_its_record_reused() {
    model(|| reader_against_remove_and_reuse(0, 1));
}

#[test]
fn reader_through_an_alias_never_sees_its_record_reused() {
    model(|| reader_against_remove_and_reuse(2, 2));
}

/// A value that reports its drop.
struct Tracked {
    n: u64,
    dropped: Arc<AtomicUsize>,
}

impl Drop for Tracked {
    fn drop(&mut self) {
        self.dropped.fetch_add(1, Ordering::SeqCst);
    }
}

fn tracked(n: u64, dropped: &Arc<AtomicUsize>) -> Option<Box<Tracked>> {
    Some(Box::new(Tracked {
        n,
        dropped: Arc::clone(dropped),
    }))
}

#[test]
fn replaced_value_outlives_the_readers_that_saw_it() {
    model(|| {
        let dropped = Arc::new(AtomicUsize::new(0));
        let b = Arc::new(EpochBox::new(tracked(1, &dropped)));
        let (b2, dropped2) = (Arc::clone(&b), Arc::clone(&dropped));
        let reader = thread::spawn(move || {
            let g = pin();
            if let Some(v) = b2.get(&g) {
                let n = v.n;
                thread::yield_now();
                // Not dropped while pinned, whenever the replace ran.
                if n == 1 {
                    assert_eq!(dropped2.load(Ordering::SeqCst), 0, "freed under a guard");
                }
                assert_eq!(v.n, n);
            }
        });
        {
            let g = pin();
            b.replace(tracked(2, &dropped), &g);
        }
        reader.join().unwrap();
        // Every guard is gone: the deferred free has run.
        assert_eq!(dropped.load(Ordering::SeqCst), 1);
        drop(b);
        assert_eq!(dropped.load(Ordering::SeqCst), 2);
    });
}

#[test]
fn retired_batch_outlives_the_readers_that_saw_its_values() {
    model(|| {
        let dropped = Arc::new(AtomicUsize::new(0));
        let b = Arc::new(EpochBox::new(tracked(1, &dropped)));
        let (b2, dropped2) = (Arc::clone(&b), Arc::clone(&dropped));
        let reader = thread::spawn(move || {
            let g = pin();
            if let Some(v) = b2.get(&g) {
                thread::yield_now();
                // Not dropped while pinned, whenever the batch was
                // deferred.
                assert_eq!(dropped2.load(Ordering::SeqCst), 0, "freed under a guard");
                assert_eq!(v.n, 1);
            }
        });
        {
            let mut batch = Retired::new();
            b.retire_into(&mut batch);
            assert_eq!(batch.len(), 1);
            batch.defer(&pin());
        }
        reader.join().unwrap();
        // Every guard is gone: the deferred batch has been dropped.
        assert_eq!(dropped.load(Ordering::SeqCst), 1);
        assert!(!b.is_set());
    });
}

#[test]
fn dropped_box_outlives_the_readers_that_saw_its_value() {
    model(|| {
        let dropped = Arc::new(AtomicUsize::new(0));
        let b = Arc::new(EpochBox::new(tracked(1, &dropped)));
        let (b2, dropped2) = (Arc::clone(&b), Arc::clone(&dropped));
        let reader = thread::spawn(move || {
            let g = pin();
            let v = b2.get(&g).expect("set");
            // The box goes here or in the other thread, whichever lets go
            // of it last: the value stays while `g` is pinned.
            drop(b2);
            thread::yield_now();
            assert_eq!(dropped2.load(Ordering::SeqCst), 0, "freed under a guard");
            assert_eq!(v.n, 1);
        });
        drop(b);
        reader.join().unwrap();
        assert_eq!(dropped.load(Ordering::SeqCst), 1);
    });
}

#[test]
fn deferred_free_runs_once_no_guard_is_held() {
    model(|| {
        let dropped = Arc::new(AtomicUsize::new(0));
        let b = Arc::new(EpochBox::new(tracked(1, &dropped)));
        {
            let g = pin();
            b.replace(tracked(2, &dropped), &g);
            assert_eq!(dropped.load(Ordering::SeqCst), 0, "freed under a guard");
        }
        // No guard anywhere: the free ran as the last one went.
        assert_eq!(dropped.load(Ordering::SeqCst), 1);
        // Another thread pins and unpins meanwhile: the free runs once the
        // last guard pinned before it is gone, whichever thread drops it.
        let b2 = Arc::clone(&b);
        let other = thread::spawn(move || {
            let g = pin();
            let n = b2.get(&g).map(|v| v.n);
            assert!(matches!(n, Some(2 | 3)));
        });
        {
            let g = pin();
            b.replace(tracked(3, &dropped), &g);
        }
        other.join().unwrap();
        assert_eq!(dropped.load(Ordering::SeqCst), 2);
    });
}

/// A commit near a limit of `max` records, as `ctrack-core` makes one:
/// count through the gate, insert `key` only if a place is left.
fn insert_within(t: &Table<Rec>, gate: &Gate, max: usize, key: u64) -> bool {
    insert_within_by(&CTX, t, gate, max, key, 2)
}

fn insert_within_by(
    ctx: &Ctx<fn(u64) -> u64>,
    t: &Table<Rec>,
    gate: &Gate,
    max: usize,
    key: u64,
    tries: usize,
) -> bool {
    let mut place = gate.enter();
    if place.count(tries, || t.len()).bound() < max {
        ctx.insert_new(t, key, 0, 0, u64::MAX, key).expect("room")
    } else {
        false
    }
}

/// Odd keys in shard 1 of two, even keys in shard 0, all in bucket 0.
fn two_shards(k: u64) -> u64 {
    (k & 0xff) | ((k & 1) << 56)
}

const CTX2: Ctx = Ctx::<fn(u64) -> u64>::new(two_shards);

/// A one-shard table holding records 1 and 2, at its limit of 2, and a
/// gate with no place held.
fn at_its_limit() -> (Arc<Table<Rec>>, Arc<Gate>) {
    let t = table();
    assert!(insert(&t, 1, 0, 0, u64::MAX));
    assert!(insert(&t, 2, 0, 0, u64::MAX));
    (t, Arc::new(Gate::new()))
}

#[test]
fn a_count_near_the_limit_never_takes_the_room_of_an_eviction() {
    // The table is at its limit of 2. One commit evicts a record to make
    // room for its own (holding a place from before the eviction until
    // after the insert); another counts the table meanwhile. Without the
    // evicting commit's place, the count can see the eviction and not the
    // insert, take the room, and end the table at 3.
    model(|| {
        let (t, gate) = at_its_limit();
        let (t2, g2) = (Arc::clone(&t), Arc::clone(&gate));
        let h = thread::spawn(move || {
            let _place = g2.enter();
            assert!(remove(&t2, 1));
            assert!(insert(&t2, 3, 0, 0, u64::MAX));
        });
        let took = insert_within(&t, &gate, 2, 4);
        h.join().unwrap();
        assert!(t.len() <= 2, "{} records, {took}", t.len());
        assert_eq!(gate.held(), 0);
    });
}

#[test]
fn two_counts_near_the_limit_take_one_place_once() {
    // One place left: at most one of two counting commits takes it.
    model(|| {
        let t = table();
        let gate = Arc::new(Gate::new());
        assert!(insert(&t, 1, 0, 0, u64::MAX));
        let (t2, g2) = (Arc::clone(&t), Arc::clone(&gate));
        let h = thread::spawn(move || insert_within(&t2, &g2, 2, 3));
        let a = insert_within(&t, &gate, 2, 4);
        let b = h.join().unwrap();
        assert!(t.len() <= 2, "{} records ({a}, {b})", t.len());
        assert_eq!(gate.held(), 0);
    });
}

/// A table of two shards at its limit of 2: one commit evicts a record of
/// one shard and inserts into the other, holding a place from before the
/// eviction until after the insert; another counts (`tries` sums at most)
/// meanwhile. The table must stay within its limit.
fn eviction_across_shards_against_a_count(tries: usize) {
    let t = Arc::new(Table::new(TableConfig {
        shards: 2,
        capacity: 8,
    }));
    assert_eq!((t.shard_of(CTX2.hash(1)), t.shard_of(CTX2.hash(2))), (1, 0));
    let gate = Arc::new(Gate::new());
    assert!(CTX2.insert_new(&t, 1, 0, 0, u64::MAX, 1).unwrap());
    assert!(CTX2.insert_new(&t, 2, 0, 0, u64::MAX, 2).unwrap());
    let (t2, g2) = (Arc::clone(&t), Arc::clone(&gate));
    let h = thread::spawn(move || {
        let _place = g2.enter();
        assert!(CTX2.remove(&t2, 1));
        assert!(CTX2.insert_new(&t2, 4, 0, 0, u64::MAX, 4).unwrap());
    });
    let took = insert_within_by(&CTX2, &t, &gate, 2, 6, tries);
    h.join().unwrap();
    assert!(t.len() <= 2, "{} records, {took}", t.len());
}

#[test]
fn a_count_across_shards_never_takes_the_room_of_an_eviction() {
    // A sum that reads the insert's shard before the insert and the
    // eviction's after it sees room even if the evicting commit has given
    // its place back by the time the sum ends; the gate's sequence number
    // catches that.
    model(|| eviction_across_shards_against_a_count(2));
}

/// Evicts record 1 through `w`, a writer for a newcomer whose primary
/// hash is `home`, with the shard's count hidden first (as `ctrack-core`
/// does for a victim in the newcomer's own shard).
fn evict_hidden(w: &mut Writer<'_, Rec>, home: u64) {
    w.hide_count(home);
    let victim = w.find(CTX.hash(1), |r| r.has_key(1)).expect("held");
    assert!(w.remove(&CTX, victim, Removal::Evicted));
}

#[test]
fn a_count_never_sees_an_eviction_hidden_until_its_insert() {
    // As `a_count_near_the_limit_never_takes_the_room_of_an_eviction`, but
    // the evicting commit takes no place: its victim is in the newcomer's
    // own shard, whose published count it hides from before the eviction
    // until its insert (as `ctrack-core` does for such victims).
    model(|| {
        let (t, gate) = at_its_limit();
        let t2 = Arc::clone(&t);
        let h = thread::spawn(move || {
            let g = pin();
            let hashes = CTX.hashes_of(3, 0);
            let mut w = t2.write(&g, &hashes);
            evict_hidden(&mut w, hashes.primary);
            w.insert(&CTX, &hashes, 0, |r| r.fill(3, 0, 0, u64::MAX, 30))
                .expect("room");
        });
        let took = insert_within(&t, &gate, 2, 4);
        h.join().unwrap();
        assert!(t.len() <= 2, "{} records, {took}", t.len());
    });
}

#[test]
fn a_hidden_count_is_published_when_the_writer_ends() {
    // An eviction whose insert never comes (refused): the count drops
    // when the writer goes, and a count after that sees the room.
    model(|| {
        let t = table();
        assert!(insert(&t, 1, 0, 0, u64::MAX));
        assert!(insert(&t, 2, 0, 0, u64::MAX));
        let t2 = Arc::clone(&t);
        let h = thread::spawn(move || {
            let g = pin();
            let hashes = CTX.hashes_of(3, 0);
            let mut w = t2.write(&g, &hashes);
            evict_hidden(&mut w, hashes.primary);
            assert_eq!(t2.len(), 2, "hidden while the writer lasts");
        });
        h.join().unwrap();
        assert_eq!(t.len(), 1);
    });
}

#[test]
fn an_unsettled_count_decides_on_its_bound() {
    // One try only, so that the count decides on a sum that the other
    // commit disturbed (its place taken and given back meanwhile): the
    // bound must still keep the table within its limit.
    model(|| eviction_across_shards_against_a_count(1));
}

#[test]
fn a_sum_that_counted_an_insert_taken_back_sees_the_withdrawals_move() {
    // One writer announces an insert and takes it back; a commit reads
    // the withdrawals, then sums the counts (as `ctrack-core` does before
    // remembering a table full). If the sum counted the announcement, the
    // withdrawals it read first must be from before the withdrawal, so
    // that a table remembered full from that sum is counted again. With
    // the withdrawals counted and read `Relaxed` (instead of `Release`
    // and `Acquire`), the model fails: the sum counts the announcement
    // with the withdrawal already read.
    model(|| {
        let t = table();
        let t2 = Arc::clone(&t);
        let h = thread::spawn(move || {
            let g = pin();
            let hashes = CTX.hashes_of(1, 0);
            let mut w = t2.write(&g, &hashes);
            w.reserve(hashes.primary);
            w.unreserve(hashes.primary);
        });
        let before = t.withdrawals();
        let sum = t.len();
        h.join().unwrap();
        if sum == 1 {
            assert_eq!(before, 0, "the sum counted an insert taken back");
        }
        assert_eq!((t.len(), t.withdrawals()), (0, 1));
    });
}

/// A table of two shards holding record 1 of shard 1, whose reply key 2
/// is in shard 0, expiring at 10.
fn alias_in_the_shard_below() -> Arc<Table<Rec>> {
    let t = Arc::new(Table::new(TableConfig {
        shards: 2,
        capacity: 8,
    }));
    assert_eq!((t.shard_of(CTX2.hash(1)), t.shard_of(CTX2.hash(2))), (1, 0));
    assert!(CTX2.insert_new(&t, 1, 2, 9, 10, 1).unwrap());
    t
}

/// True if no live record has key `k` (as either key), in [`CTX2`]'s
/// hashes.
fn gone(t: &Table<Rec>, k: u64) -> bool {
    let g = pin();
    t.find(&g, CTX2.hash(k), |r| r.has_key(k)).is_none()
}

/// Takes the lock of shard 0 for a commit of key 4, which searches for
/// it there and yields (loom switches threads at a yield; loads alone
/// never left the lock held when the other thread tried it), and lets it
/// go.
fn hold_shard_0(t: Arc<Table<Rec>>) -> thread::JoinHandle<()> {
    thread::spawn(move || {
        let g = pin();
        let w = t.write(&g, &CTX2.hashes_of(4, 0));
        assert!(w.find(CTX2.hash(4), |r| r.has_key(4)).is_none());
        thread::yield_now();
    })
}

#[test]
fn expiry_finishes_a_record_whose_alias_shard_is_busy() {
    // The sweep holds shard 1 and may not wait for shard 0, below it in
    // lock order: when another writer holds it, the record is finished
    // after the shard, with both locks taken in order.
    model(|| {
        let t = alias_in_the_shard_below();
        let h = hold_shard_0(Arc::clone(&t));
        let g = pin();
        let s = t.sweep(&CTX2, &g, 20_000, usize::MAX);
        h.join().unwrap();
        assert_eq!(s.removed, 1);
        assert!(t.is_empty());
        assert!(gone(&t, 1) && gone(&t, 2));
    });
}

#[test]
fn zone_reclaim_finishes_a_record_whose_alias_shard_is_busy() {
    // As above, for a flush of the record's zone.
    model(|| {
        let t = alias_in_the_shard_below();
        let h = hold_shard_0(Arc::clone(&t));
        let g = pin();
        assert_eq!(t.reclaim_instance(&CTX2, &g, 1, 9, usize::MAX), (1, false));
        h.join().unwrap();
        assert!(t.is_empty());
        assert!(gone(&t, 1) && gone(&t, 2));
    });
}

#[test]
fn expiry_refiles_a_record_refreshed_while_its_alias_shard_was_busy() {
    // The other thread holds shard 0 and refreshes the record meanwhile:
    // a sweep that deferred the record, or found it refreshed, files it
    // again, so that a later sweep takes it; one that removed it first
    // leaves nothing filed.
    model(|| {
        let t = alias_in_the_shard_below();
        let t2 = Arc::clone(&t);
        let h = thread::spawn(move || {
            let g = pin();
            let w = t2.write(&g, &CTX2.hashes_of(4, 0));
            let refreshed = t2
                .find(&g, CTX2.hash(1), |r| r.key == 1)
                .and_then(|e| e.lock())
                .map(|l| l.exp.store(100_000, Ordering::Relaxed))
                .is_some();
            thread::yield_now();
            drop(w);
            refreshed
        });
        let g = pin();
        let s = t.sweep(&CTX2, &g, 20_000, usize::MAX);
        let refreshed = h.join().unwrap();
        assert_eq!(s.removed, usize::from(!refreshed));
        assert_eq!(gone(&t, 1), !refreshed);
        if refreshed {
            assert_eq!(t.next_due(), Some(101_000));
            assert_eq!(t.sweep(&CTX2, &g, 101_000, usize::MAX).removed, 1);
        }
        assert_eq!(t.next_due(), None);
        assert!(t.is_empty());
    });
}

#[test]
fn entry_locks_exclude_each_other() {
    // Two packets of one connection update it under its entry lock, each
    // reading the value and writing it back one more: neither update is
    // lost (the lock has one holder at a time, and a holder sees the
    // last holder's writes).
    model(|| {
        let t = table();
        assert!(insert(&t, 3, 0, 0, u64::MAX));
        let bump = |t: &Table<Rec>| {
            let g = pin();
            let e = t.find(&g, CTX.hash(3), |r| r.key == 3).expect("live");
            let l = e.lock().expect("live");
            let v = l.val.load(Ordering::Relaxed);
            thread::yield_now();
            l.val.store(v + 1, Ordering::Relaxed);
        };
        let t2 = Arc::clone(&t);
        let h = thread::spawn(move || bump(&t2));
        bump(&t);
        h.join().unwrap();
        assert_eq!(find(&t, 3), Some((3, 32)));
    });
}
