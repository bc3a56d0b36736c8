//! Single-threaded tests of the table's bookkeeping. The concurrent
//! behaviour is covered by `tests/stress.rs` and `tests/loom.rs`.
//!
//! They run under Miri too, with fewer shards and records: Miri interprets
//! every access and retags every reference to a shard (two arrays of 274
//! chunk pointers), so the native sizes would take the best part of an
//! hour there.

use super::*;
use crate::testing::{MIXED, Rec, mix};
use std::sync::atomic::Ordering;

/// `native`, or the smaller `miri` under Miri.
const fn size(native: u64, miri: u64) -> u64 {
    if cfg!(miri) { miri } else { native }
}

fn table() -> Table<Rec> {
    Table::new(TableConfig {
        shards: size(8, 2) as usize,
        capacity: 1024,
    })
}

fn insert(t: &Table<Rec>, key: u64, alt: u64, inst: u64, exp: u64) -> RecordId {
    let g = pin();
    let hashes = MIXED.hashes_of(key, alt);
    let mut w = t.write(&g, &hashes);
    w.insert(&MIXED, &hashes, 0, |r| {
        r.fill(key, alt, inst, exp, key * 10)
    })
    .expect("insert")
    .id()
}

fn find(t: &Table<Rec>, key: u64) -> Option<(RecordId, u64)> {
    let g = pin();
    t.find(&g, mix(key), |r| r.has_key(key))
        .map(|e| (e.id(), e.record().val.load(Ordering::Relaxed)))
}

/// A writer says "nothing inserted since" a search's count exactly while
/// no entry (a record's own, or an alias) went into the shard of the
/// searched hash; inserts into other shards, removals, and a count no
/// search took are told apart.
#[test]
fn a_writer_tells_whether_its_shard_took_an_insert_since_a_search() {
    let t = table();
    let g = pin();
    let shard_of = |k: u64| t.shard_of(mix(k));
    let key = 1u64;
    let same = (2..).find(|&k| shard_of(k) == shard_of(key)).unwrap();
    let other = (2..).find(|&k| shard_of(k) != shard_of(key)).unwrap();
    // A record of another shard whose reply key falls in this one.
    let (primary, reply) = (
        (2..)
            .find(|&k| shard_of(k) != shard_of(key) && k != other)
            .unwrap(),
        (2..)
            .find(|&k| shard_of(k) == shard_of(key) && k != same)
            .unwrap(),
    );
    let unchanged = |seen: Seen| {
        let w = t.write(&g, &MIXED.hashes_of(key, 0));
        w.unchanged_since(mix(key), seen)
    };
    let seen = t.seen(mix(key));
    assert!(unchanged(seen));
    assert!(!unchanged(Seen::NOTHING), "a count no search took");
    insert(&t, other, 0, 1, 100_000);
    assert!(unchanged(seen), "an insert into another shard");
    insert(&t, same, 0, 1, 100_000);
    assert!(!unchanged(seen), "an insert into the shard");
    // Its alias is an insert here.
    let seen = t.seen(mix(key));
    insert(&t, primary, reply, 1, 100_000);
    assert!(!unchanged(seen), "an alias inserted into the shard");
    let seen = t.seen(mix(key));
    let (id, _) = find(&t, same).unwrap();
    let e = t.get(&g, id).unwrap();
    let h = MIXED.hashes(e.record(), &g);
    assert!(t.write(&g, &h).remove(&MIXED, e, Removal::Deleted));
    assert!(unchanged(seen), "a removal");
    // A writer that does not hold the shard cannot tell.
    let w = t.write(&g, &MIXED.hashes_of(other, 0));
    assert!(!w.unchanged_since(mix(key), seen));
}

#[test]
fn insert_find_remove() {
    let t = table();
    let id = insert(&t, 7, 0, 1, 100_000);
    assert_eq!(find(&t, 7), Some((id, 70)));
    assert_eq!(find(&t, 8), None);
    assert_eq!(t.len(), 1);
    let g = pin();
    let e = t.get(&g, id).unwrap();
    let h = MIXED.hashes(e.record(), &g);
    let mut w = t.write(&g, &h);
    assert!(w.remove(&MIXED, e, Removal::Deleted));
    assert!(!w.remove(&MIXED, e, Removal::Deleted));
    drop(w);
    assert_eq!(find(&t, 7), None);
    assert!(t.get(&g, id).is_none());
    assert_eq!(t.len(), 0);
}

/// A probe's hint holds the record its home bucket names, from the bucket
/// the prefetch found; it is only a guess: a lookup with it still checks
/// the record (removed, or of another key, it falls back to the search),
/// and a home found for nothing guesses nothing.
#[test]
fn a_probe_guesses_the_record_and_a_lookup_checks_the_guess() {
    let t = table();
    let id = insert(&t, 7, 0, 1, 100_000);
    let g = pin();
    let hint = t.probe(t.prefetch_home(&g, mix(7)), mix(7));
    assert!(hint.is_guess());
    assert_eq!(hint.record().map(|r| r.key), Some(7));
    let found = t.find_hinted(&g, mix(7), hint, |r| r.has_key(7));
    assert_eq!(found.map(|e| e.id()), Some(id));
    // Of another key, in a shard with no record: no guess, no record.
    let absent = (8..)
        .find(|&k| t.shard_of(mix(k)) != t.shard_of(mix(7)))
        .unwrap();
    let none = t.probe(t.prefetch_home(&g, mix(absent)), mix(absent));
    assert!(!none.is_guess());
    assert!(
        t.find_hinted(&g, mix(absent), none, |r| r.has_key(absent))
            .is_none()
    );
    assert!(!t.probe(Home::default(), mix(7)).is_guess());
    // A guess used for a key it is not the record of: the search decides.
    assert!(t.find_hinted(&g, mix(7), hint, |r| r.has_key(9)).is_none());
    // The record removed, then the key inserted again: the old guess is
    // refused (not live) and the search finds the new record.
    let e = t.get(&g, id).unwrap();
    let h = MIXED.hashes(e.record(), &g);
    let mut w = t.write(&g, &h);
    assert!(w.remove(&MIXED, e, Removal::Deleted));
    drop(w);
    assert!(t.find_hinted(&g, mix(7), hint, |r| r.has_key(7)).is_none());
    let again = insert(&t, 7, 0, 1, 100_000);
    let found = t.find_hinted(&g, mix(7), hint, |r| r.has_key(7));
    assert_eq!(found.map(|e| e.id()), Some(again));
}

#[test]
fn secondary_key_finds_and_goes_with_the_record() {
    let t = table();
    let n = size(200, 24);
    for i in 1..n {
        insert(&t, i, 1_000_000 + i, 1, 100_000);
    }
    for i in 1..n {
        let a = find(&t, i).unwrap();
        let g = pin();
        let b = t
            .find(&g, mix(1_000_000 + i), |r| r.alt == 1_000_000 + i)
            .unwrap();
        assert_eq!(a.0, b.id());
    }
    let g = pin();
    for i in 1..n {
        let e = t.find(&g, mix(i), |r| r.key == i).unwrap();
        let h = MIXED.hashes(e.record(), &g);
        let mut w = t.write(&g, &h);
        assert!(w.remove(&MIXED, e, Removal::Deleted));
    }
    for i in 1..n {
        assert!(
            t.find(&g, mix(1_000_000 + i), |r| r.alt == 1_000_000 + i)
                .is_none()
        );
    }
    assert!(t.is_empty());
}

#[test]
fn zone_instances_are_separate_lists() {
    let t = table();
    let n = size(300, 30);
    for i in 1..=n {
        insert(&t, i, 0, i % 3, 100_000);
    }
    let g = pin();
    let mut removed = 0;
    for shard in 0..t.shard_count() {
        let (k, more) = t.reclaim_instance(&MIXED, &g, shard, 1, usize::MAX);
        assert!(!more);
        removed += k;
    }
    assert_eq!(removed, n as usize / 3);
    for i in 1..=n {
        assert_eq!(find(&t, i).is_some(), i % 3 != 1, "key {i}");
    }
    let mut listed = 0;
    for shard in 0..t.shard_count() {
        for id in t.instance_records(shard, 2) {
            let e = t.get(&g, id).unwrap();
            assert_eq!(e.record().inst, 2);
            listed += 1;
        }
        assert_eq!(t.instance_len(shard, 1), 0);
    }
    assert_eq!(listed, n as usize / 3);
}

#[test]
fn budgeted_reclaim_resumes() {
    let t = Table::<Rec>::new(TableConfig {
        shards: 1,
        capacity: 64,
    });
    for i in 1..=50u64 {
        insert(&t, i, 0, 9, 100_000);
    }
    let g = pin();
    assert_eq!(t.reclaim_instance(&MIXED, &g, 0, 9, 20), (20, true));
    assert_eq!(t.reclaim_instance(&MIXED, &g, 0, 9, 20), (20, true));
    assert_eq!(t.reclaim_instance(&MIXED, &g, 0, 9, 20), (10, false));
    assert!(t.is_empty());
}

#[test]
fn sweep_removes_expired_and_refiles_refreshed() {
    let t = table();
    let a = insert(&t, 1, 0, 0, 5_000);
    let b = insert(&t, 2, 0, 0, 5_000);
    let c = insert(&t, 3, 0, 0, 100_000_000); // beyond the wheel
    let g = pin();
    // b is refreshed: only the record changes.
    t.get(&g, b)
        .unwrap()
        .record()
        .exp
        .store(20_000, Ordering::Relaxed);
    let s = t.sweep(&MIXED, &g, 4_000, usize::MAX);
    assert_eq!(s.removed, 0);
    assert_eq!(t.next_due(), Some(6_000));
    let s = t.sweep(&MIXED, &g, 6_000, usize::MAX);
    assert_eq!(s.removed, 1);
    assert!(t.get(&g, a).is_none());
    assert!(t.get(&g, b).is_some());
    assert_eq!(t.next_due(), Some(21_000));
    let s = t.sweep(&MIXED, &g, 21_000, usize::MAX);
    assert_eq!(s.removed, 1);
    assert!(t.get(&g, c).is_some());
    let s = t.sweep(&MIXED, &g, 100_000_001, usize::MAX);
    assert_eq!(s.removed, 1);
    assert_eq!(t.next_due(), None);
    assert!(t.is_empty());
}

/// A shard whose share pays for several wheel lanes spreads a tick's
/// records over them: sweeps with small budgets (stopping mid-tick, in
/// any lane) take every record due, whatever its lane, refile the
/// refreshed ones, and leave the rest.
#[test]
fn a_sweep_takes_every_lane_of_a_tick() {
    let t = Table::<Rec>::new(TableConfig {
        shards: 1,
        capacity: 16_384,
    });
    assert_eq!(t.wheel_lanes(0), 4);
    let n = size(2_000, 120);
    // Ticks 1, 2 and 3 (1 s each), every lane of each.
    let exp = |i: u64| 1_000 + (i % 3) * 1_000;
    let ids: Vec<RecordId> = (1..=n).map(|i| insert(&t, i, 0, 0, exp(i))).collect();
    let g = pin();
    // Every fifth record is refreshed to 10 s.
    for (i, id) in (1..=n).zip(&ids) {
        if i.is_multiple_of(5) {
            let e = t.get(&g, *id).unwrap();
            e.record().exp.store(10_000, Ordering::Relaxed);
        }
    }
    // A sweep at `now` takes the records of every tick before now's, the
    // refreshed ones when their new tick has passed.
    let live = |now: u64, i: u64| {
        let e = if i.is_multiple_of(5) { 10_000 } else { exp(i) };
        e / 1_000 >= now / 1_000
    };
    let mut gone = 0;
    for now in [2_500, 4_000, 11_000] {
        let mut removed = 0;
        loop {
            let s = t.sweep(&MIXED, &g, now, 7);
            assert!(s.examined <= 7);
            removed += s.removed;
            if !s.more {
                break;
            }
        }
        let dead = (1..=n).filter(|&i| !live(now, i)).count();
        assert_eq!(removed, dead - gone, "at {now}");
        gone = dead;
        for (i, id) in (1..=n).zip(&ids) {
            assert_eq!(
                t.get(&g, *id).is_some(),
                live(now, i),
                "record {i} at {now}"
            );
        }
    }
    assert!(t.is_empty());
    assert_eq!(t.next_due(), None);
}

#[test]
fn sweep_budget_and_round_robin() {
    let t = table();
    let n = size(100, 30);
    for i in 1..=n {
        insert(&t, i, 0, 0, 1_000);
    }
    let g = pin();
    let mut total = 0;
    let mut rounds = 0;
    loop {
        let s = t.sweep(&MIXED, &g, 5_000, 7);
        assert!(s.examined <= 7);
        total += s.removed;
        rounds += 1;
        if !s.more && t.next_due().is_none() {
            break;
        }
        assert!(rounds < 100);
    }
    assert_eq!(total, n as usize);
}

#[test]
fn evicts_the_oldest_or_newest_that_qualifies() {
    let t = Table::<Rec>::new(TableConfig {
        shards: 1,
        capacity: 64,
    });
    for i in 1..=10u64 {
        insert(&t, i, 0, 4, 100_000);
    }
    let g = pin();
    let h = Hashes {
        primary: mix(99),
        secondary: None,
    };
    let mut w = t.write(&g, &h);
    // Oldest is key 1; exclude odd keys: key 2 goes.
    assert!(w.evict(&MIXED, h.primary, 4, 8, |r| r.key % 2 == 0));
    // Nothing in another instance.
    assert!(!w.evict(&MIXED, h.primary, 5, 8, |_| true));
    // Nothing within the scan bound at either end (1, 3, 4 oldest; 10, 9,
    // 8 newest).
    assert!(!w.evict(&MIXED, h.primary, 4, 3, |r| r.key == 6));
    // The newest are looked at too.
    assert!(w.evict(&MIXED, h.primary, 4, 3, |r| r.key == 9));
    drop(w);
    assert!(find(&t, 2).is_none());
    assert!(find(&t, 9).is_none());
    assert_eq!(t.len(), 8);
}

#[test]
fn shards_grow_past_their_sizing() {
    let t = Table::<Rec>::new(TableConfig {
        shards: 2,
        capacity: 16,
    });
    // Past the first chunk of slots (and of aliases: 1,024 a chunk) and
    // several index rebuilds.
    let n = size(5000, 150);
    for i in 1..=n {
        insert(&t, i, 10_000 + i, 0, 100_000);
    }
    let g = pin();
    for i in 1..=n {
        assert!(find(&t, i).is_some());
        assert!(
            t.find(&g, mix(10_000 + i), |r| r.alt == 10_000 + i)
                .is_some()
        );
    }
}

/// A table whose slots are laid out for what it may grow to holds as many
/// records as one that grew by doubling chunks, in fewer slot bytes: at
/// most one chunk partly empty a shard, against up to half of the last
/// doubling chunk (and their records are found alike).
#[test]
fn slots_laid_out_for_growth_leave_no_doubling_chunk_half_empty() {
    let (shards, n) = (2usize, size(40_000, 300));
    let cfg = TableConfig {
        shards,
        capacity: 16,
    };
    let grown = Table::<Rec>::new(cfg);
    let laid_out = Table::<Rec>::with_slots_for(cfg, n as usize);
    for t in [&grown, &laid_out] {
        for i in 1..=n {
            insert(t, i, 0, 0, 100_000);
        }
        for i in (1..=n).step_by(7) {
            assert!(find(t, i).is_some());
        }
    }
    let slot = size_of::<Rec>();
    let (a, b) = (grown.memory().record_bytes, laid_out.memory().record_bytes);
    // Each shard's share of `n` (a hash spreads them about evenly) in
    // chunks of a 256th of it, rounded up to a power of two slots: at
    // most one chunk a shard partly empty, and at most twice the share.
    let share = (n as usize).div_ceil(shards);
    let chunk = (share / 256).next_power_of_two().max(4096 / slot).max(32);
    assert!(
        b <= (n as usize + shards * 2 * chunk) * slot,
        "{b} bytes of slots for {n} records of {slot}"
    );
    // (Under Miri's few records both take the smallest chunks.)
    assert!(b < a || cfg!(miri), "laid out {b}, grown {a}");
}

/// An index a larger one replaced stays whole for a reader pinned before
/// the replacement: its pages go back to the kernel (`Arena::release`)
/// only once the epoch lets it go. (Not under Miri, where nothing is
/// released and 10,000 inserts take long.)
#[cfg(not(miri))]
#[test]
fn a_replaced_index_stays_whole_for_a_reader_pinned_before() {
    // An index of many pages, so that a release would zero some of them.
    let t = Table::<Rec>::new(TableConfig {
        shards: 1,
        capacity: 8192,
    });
    for k in 1..=8 {
        insert(&t, k, 0, 0, 100_000);
    }
    let g = pin();
    let old = t.index_of(0, &g);
    let bytes = old.bytes();
    assert!(bytes >= 4 * 4096, "{bytes}");
    assert_eq!(old.occupied(), 8);
    // Past 90% load: rebuilt larger (each insert pins on its own).
    for k in 9..=10_000 {
        insert(&t, k, 0, 0, 100_000);
    }
    assert!(t.index_of(0, &g).bytes() > bytes, "rebuilt");
    // It took inserts until its load passed 90%, then was replaced.
    let held = old.occupied();
    assert!(
        held > 8000,
        "a reader's index released under it: {held} entries"
    );
    for _ in 0..256 {
        pin().flush();
    }
    assert_eq!(old.occupied(), held, "a reader's index released under it");
    drop(g);
    for k in (1..=10_000).step_by(7) {
        assert!(find(&t, k).is_some());
    }
}

#[test]
fn reserve_rebuilds_the_index() {
    let t = Table::<Rec>::new(TableConfig {
        shards: 2,
        capacity: 16,
    });
    let n = size(500, 40);
    for i in 1..=n {
        insert(&t, i, 5000 + i, 0, 100_000);
    }
    let g = pin();
    let before = t.memory().index_bytes;
    t.reserve(&MIXED, &g, size(100_000, 2_000) as usize);
    assert!(t.memory().index_bytes > before);
    for i in 1..=n {
        assert!(find(&t, i).is_some());
        assert!(t.find(&g, mix(5000 + i), |r| r.alt == 5000 + i).is_some());
    }
}

#[test]
fn entry_lock_excludes_removal_and_reports_death() {
    let t = table();
    let id = insert(&t, 1, 0, 0, 100_000);
    let g = pin();
    let e = t.get(&g, id).unwrap();
    {
        let l = e.lock().unwrap();
        l.val.store(5, Ordering::Relaxed);
    }
    let h = MIXED.hashes(e.record(), &g);
    let mut w = t.write(&g, &h);
    assert!(w.remove(&MIXED, e, Removal::Deleted));
    drop(w);
    assert!(e.lock().is_none());
    assert!(!e.is_live());
}

/// A long flood against a full table: every newcomer evicts a flood record
/// near its own home (as the tracker's early drop does) and takes its
/// place. Looking through the whole run a lookup of the newcomer walks
/// keeps the index as it was; with four buckets only (and a victim taken
/// elsewhere when none is there) runs of full buckets grew to the probe
/// bound within a few hundred thousand evictions.
#[test]
fn a_long_flood_leaves_the_index_in_shape() {
    let t = Table::<Rec>::new(TableConfig {
        shards: 1,
        capacity: size(20_000, 200) as usize,
    });
    let g = pin();
    let slots = t.memory().index_bytes / 64 * crate::index::BUCKET_ENTRIES;
    let (est, full) = (slots * 62 / 100, slots * 76 / 100);
    let mut flood = Vec::new();
    for k in 1..=full as u64 {
        let inst = if (k as usize) <= est { 1 } else { 2 };
        insert(&t, k, 0, inst, u64::MAX);
        if inst == 2 {
            flood.push(k);
        }
    }
    let before = t.longest_probe(&g);
    let index_bytes = t.memory().index_bytes;
    let mut x = 0x2545_f491_4f6c_dd1d_u64;
    let (mut far, mut next) = (0, full as u64 + 1);
    for _ in 0..size(300_000, 300) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let k = next;
        next += 1;
        let h = MIXED.hashes_of(k, 0);
        let mut w = t.write(&g, &h);
        let mut victim = 0;
        let near = w.evict_near(
            &MIXED,
            h.primary,
            12,
            1,
            |r| {
                victim = r.key;
                r.inst == 2
            },
            || {},
        );
        drop(w);
        if !near {
            // Nothing to evict near it: one elsewhere, as the zone's
            // oldest would be.
            far += 1;
            victim = flood[(x as usize) % flood.len()];
            assert!(MIXED.remove(&t, victim));
        }
        let i = flood
            .iter()
            .position(|&f| f == victim)
            .expect("a flood record went");
        flood.swap_remove(i);
        insert(&t, k, 0, 2, u64::MAX);
        flood.push(k);
    }
    assert_eq!(t.len(), full);
    assert_eq!(far, 0, "every newcomer found a flood record in its run");
    assert!(
        t.longest_probe(&g) <= before + 2,
        "longest probe {} from {before}",
        t.longest_probe(&g)
    );
    assert_eq!(
        t.memory().index_bytes,
        index_bytes,
        "the index did not grow"
    );
}

#[test]
fn prefault_takes_the_memory_of_the_capacity_up_front() {
    let cap = size(50_000, 300) as usize;
    let t = Table::<Rec>::new(TableConfig {
        shards: size(8, 2) as usize,
        capacity: cap,
    });
    let g = pin();
    let before = t.memory().record_bytes;
    assert!(t.prefault(&g, cap));
    let after = t.memory().record_bytes;
    assert!(after >= cap * core::mem::size_of::<Rec>(), "{after}");
    assert!(after > before);
    // Filling to the capacity takes no more record memory.
    for k in 1..=cap as u64 {
        insert(&t, k, 0, 1, 100_000);
    }
    assert_eq!(t.memory().record_bytes, after);
    assert_eq!(find(&t, 7).map(|f| f.1), Some(70));
}

/// Minor page faults taken by the calling thread so far (field 10 of
/// `/proc/thread-self/stat`, after the command name in parentheses).
#[cfg(all(target_os = "linux", not(miri)))]
fn thread_minor_faults() -> i64 {
    let stat = std::fs::read_to_string("/proc/thread-self/stat").expect("thread stat");
    let rest = &stat[stat.rfind(')').expect("comm") + 2..];
    rest.split(' ')
        .nth(7)
        .expect("minflt")
        .parse()
        .expect("a number")
}

/// The faults an inserting thread takes, with or without another thread
/// populating the table's memory between its steps.
#[cfg(all(target_os = "linux", not(miri)))]
fn faults_of_inserting(populate: bool) -> i64 {
    // 32 MiB of records, in steps of 4,096 (well under the 2 MiB the
    // arena looks ahead).
    let total = (32 << 20) / core::mem::size_of::<Rec>() as u64;
    let t = Table::<Rec>::new(TableConfig {
        shards: 8,
        capacity: total as usize,
    });
    // One populator thread for the whole run, asked to run between steps
    // (a thread made per step would fault in its stack on this one).
    let (ask, asked) = std::sync::mpsc::channel::<()>();
    let (tell, told) = std::sync::mpsc::channel::<usize>();
    std::thread::scope(|s| {
        let t = &t;
        s.spawn(move || {
            for () in asked {
                if tell.send(t.populate_ahead()).is_err() {
                    break;
                }
            }
        });
        let before = thread_minor_faults();
        let mut key = 1;
        while key <= total {
            if populate {
                ask.send(()).expect("populator");
                told.recv().expect("populator");
            }
            for _ in 0..4096 {
                insert(t, key, 0, 1, 100_000);
                key += 1;
            }
        }
        let faults = thread_minor_faults() - before;
        drop(ask);
        assert_eq!(find(t, total / 2).map(|f| f.1), Some(total / 2 * 10));
        faults
    })
}

#[cfg(all(target_os = "linux", not(miri)))]
#[test]
fn populating_ahead_takes_the_page_faults_off_the_inserting_thread() {
    let probe = Table::<Rec>::new(TableConfig {
        shards: 1,
        capacity: 16,
    });
    if probe.populate_ahead() == 0 {
        // Linux before 5.14 has no MADV_POPULATE_WRITE: nothing to test.
        assert!(
            !crate::table::tests::kernel_at_least(5, 14),
            "nothing populated on Linux 5.14 or later"
        );
        eprintln!("skipped: this kernel cannot populate memory ahead (MADV_POPULATE_WRITE)");
        return;
    }
    let without = faults_of_inserting(false);
    // Without: one fault per huge page of records at least (16 for 32
    // MiB), one per 4 KiB page where the kernel gives no huge pages.
    assert!(without >= 16, "without population: {without} faults");
    // With: none of those. The kernel may still fault the thread for its
    // own reasons (seen under a loaded machine: a burst of dozens at
    // once, with or without population; and a few for the thread's own
    // heap), so the best of three runs, and at most half. With huge pages
    // `without` is only about 16 to 30, so a margin of four failed now
    // and then (7 against 27, in the full suite under CI).
    let mut with = i64::MAX;
    for _ in 0..3 {
        with = with.min(faults_of_inserting(true));
        if with * 2 <= without {
            break;
        }
    }
    assert!(
        with * 2 <= without,
        "{with} faults with population, {without} without"
    );
}

/// A table no writer took says so, counts 0 without summing, and is
/// written from the first writer on, whether or not it inserted (the
/// tracker leaves such a table out of its limit's slack).
#[test]
fn a_table_no_writer_took_says_so() {
    let t = table();
    assert!(!t.ever_written());
    assert_eq!(t.len(), 0);
    let g = pin();
    drop(t.write(&g, &MIXED.hashes_of(1, 0)));
    assert!(t.ever_written());
    assert_eq!(t.len(), 0);
    insert(&t, 2, 0, 0, 100);
    assert_eq!(t.len(), 1);
}

/// An announced insert counts in the table's sum until it is inserted or
/// taken back; only taking it back (by `unreserve`, or by a writer that
/// ends without inserting) moves the withdrawals, which tell a caller that
/// a sum may have counted an insert that never came.
#[test]
fn announced_inserts_taken_back_are_counted_as_withdrawals() {
    let t = table();
    let g = pin();
    let h = MIXED.hashes_of(5, 0);
    assert_eq!(t.withdrawals(), 0);
    // Inserted: the announcement becomes the record.
    let mut w = t.write(&g, &h);
    w.reserve(mix(5));
    assert_eq!(t.len(), 1);
    w.insert(&MIXED, &h, 0, |r| r.fill(5, 0, 1, 100_000, 50))
        .expect("insert");
    drop(w);
    assert_eq!((t.len(), t.withdrawals()), (1, 0));
    // Taken back explicitly, then once more (a second call does nothing).
    let h6 = MIXED.hashes_of(6, 0);
    let mut w = t.write(&g, &h6);
    w.reserve(mix(6));
    assert_eq!(t.len(), 2);
    w.unreserve(mix(6));
    w.unreserve(mix(6));
    assert_eq!((t.len(), t.withdrawals()), (1, 1));
    drop(w);
    assert_eq!(t.withdrawals(), 1);
    // A writer that ends without its insert takes it back.
    let mut w = t.write(&g, &h6);
    w.reserve(mix(6));
    assert_eq!(t.len(), 2);
    drop(w);
    assert_eq!((t.len(), t.withdrawals()), (1, 2));
}
