//! Slot reuse under churn, alone in its own process: the epoch is the
//! process's, and a test elsewhere in the same process that holds a pin
//! would hold back every removed slot (as a thread descheduled while
//! pinned does; that is the grace period's price, not a leak).
#![cfg(not(loom))]

use ctrack_table::testing::{MIXED, Rec};
use ctrack_table::{Hashes, Table, TableConfig, pin};

fn insert(t: &Table<Rec>, key: u64) {
    let g = pin();
    let h: Hashes = MIXED.hashes_of(key, 0);
    let mut w = t.write(&g, &h);
    w.insert(&MIXED, &h, 0, |r| r.fill(key, 0, 0, u64::MAX, key))
        .expect("insert");
}

#[test]
fn churn_reuses_slots_instead_of_growing() {
    // Records removed and as many inserted, over and over (a flood's
    // evictions): once their grace period has passed, removed slots must
    // be taken again before any fresh one. A shard that took a fresh slot
    // whenever one of its batches of reusable slots ran out, while more
    // waited in its mailbox, grew by one slot every batch, for as long
    // as the churn lasted (2,688 slots for these 2,000 records, and
    // growing; `bench flood syn --established 200000` went from 35.1 MB
    // after 1M flood packets to 39.5 MB after 16M).
    let t = Table::<Rec>::new(TableConfig {
        shards: 1,
        capacity: 4096,
    });
    let live = 2000u64;
    for k in 1..=live {
        insert(&t, k);
    }
    let slot_bytes = core::mem::size_of::<Rec>();
    let held = |t: &Table<Rec>| t.memory().record_bytes / slot_bytes;
    let before = held(&t);
    for k in live + 1..=live + 200_000 {
        assert!(MIXED.remove(&t, k - live));
        insert(&t, k);
        if k % 16 == 0 {
            // Lets the epoch advance (each call above pinned and unpinned).
            pin().flush();
        }
    }
    assert_eq!(t.len(), live as usize);
    // Live records, a batch in limbo, a few sealed ones in their grace
    // period, and chunk rounding (2,112 here).
    let bound = live as usize + 8 * 64;
    assert!(
        held(&t) <= bound,
        "{} slots held for {live} records ({before} before the churn)",
        held(&t)
    );
}
