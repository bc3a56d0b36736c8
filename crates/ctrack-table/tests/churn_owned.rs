//! What records own, freed under churn, alone in its own process as
//! `churn.rs` is (the epoch is the process's: a test elsewhere in the
//! process that holds a pin would hold back every removed record's value).
#![cfg(not(loom))]

// A record that owns a value through an [`EpochBox`], as a tracked
// connection owns its extension (label, reply tuple).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use ctrack_table::testing::mix;
use ctrack_table::{
    Context, EpochBox, Guard, Hashes, Header, Record, Removal, Retired, Table, TableConfig, pin,
};

/// Counts its drops.
struct Owned(Arc<AtomicUsize>);

impl Drop for Owned {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
}

#[derive(Default)]
struct Owning {
    h: Header,
    key: u64,
    owned: EpochBox<Owned>,
}

impl Record for Owning {
    fn header(&self) -> &Header {
        &self.h
    }
    fn retire(&self, retired: &mut Retired) {
        self.owned.retire_into(retired);
    }
}

struct Ctx;

impl Context<Owning> for Ctx {
    fn hashes(&self, r: &Owning, _: &Guard) -> Hashes {
        Hashes {
            primary: mix(r.key),
            secondary: None,
        }
    }
    fn instance(&self, _: &Owning) -> u64 {
        0
    }
    fn expiry(&self, _: &Owning, _: &Guard) -> u64 {
        u64::MAX
    }
}

#[test]
fn values_records_owned_are_freed_with_their_slots_however_many_a_pin() {
    // Records removed 64 under each pin: each removed record's value
    // retired on its own (one deferred function each) came faster than
    // the epoch's collection takes them (a few batches every 128 pins),
    // and they piled up for as long as the churn lasted (`ctrack bench cps` with every connection labelled: 0.76
    // GB resident after 2M connections, 2.8 GB after 8M). Retired with
    // their slots, they go as the slots do.
    let t = Table::<Owning>::new(TableConfig {
        shards: 1,
        capacity: 4096,
    });
    let made = Arc::new(AtomicUsize::new(0));
    let dropped = Arc::new(AtomicUsize::new(0));
    let live = 2000u64;
    let insert = |g: &Guard, key: u64| {
        let h = Hashes {
            primary: mix(key),
            secondary: None,
        };
        let mut w = t.write(g, &h);
        w.insert(&Ctx, &h, 0, |r| {
            r.key = key;
            made.fetch_add(1, Ordering::Relaxed);
            r.owned.set(Some(Box::new(Owned(Arc::clone(&dropped)))));
        })
        .expect("insert");
    };
    let g = pin();
    for k in 1..=live {
        insert(&g, k);
    }
    drop(g);
    // The most values alive in the first half of the rounds, and in the
    // second.
    let mut most = [0; 2];
    for round in 0..4_000u64 {
        // As a sweep of expired records and the commits after it: 64
        // removed, then 64 inserted, under one pin (nothing handed to the
        // collector but what fills this thread's bag of deferred
        // functions, and a collection every 128 pins).
        let g = pin();
        let first = round * 64 + 1;
        for old in first..first + 64 {
            let e = t.find(&g, mix(old), |r| r.key == old).expect("live");
            let h = Hashes {
                primary: mix(old),
                secondary: None,
            };
            assert!(t.write(&g, &h).remove(&Ctx, e, Removal::Deleted));
        }
        for k in first + live..first + live + 64 {
            insert(&g, k);
        }
        drop(g);
        let waiting = made.load(Ordering::Relaxed) - dropped.load(Ordering::Relaxed);
        let half = usize::from(round >= 2_000);
        most[half] = most[half].max(waiting);
    }
    assert_eq!(t.len(), live as usize);
    // Live records' values, and those removed in the last few
    // collection periods (a collection every 128 pins, each freeing what
    // was deferred two epochs before): not growing with the churn.
    let bound = live as usize + 4 * 128 * 64;
    assert!(
        most[0] <= bound && most[1] <= bound,
        "{most:?} values alive at most for {live} records (256,000 churned)"
    );
    assert!(
        most[1] <= most[0] + 8 * 64,
        "{most:?}: the values alive grew with the churn"
    );
}
