//! Zone instances: each shard lists the records of every instance, so that
//! listing or flushing an instance walks that instance alone.

use crate::epoch::Guard;
use crate::prefetch::prefetch_lines;
use crate::shard::rec;
use crate::sync::Ordering;
use crate::{Context, Hashes, Record, Removal};

use super::{RecordId, Table};

/// How many records a zone's reclaim walk runs ahead of its removals.
const REMOVAL_LAG: usize = 4;

impl<R: Record> Table<R> {
    /// Removes up to `budget` records of zone instance `instance` from
    /// `shard`. Returns how many were removed and whether the shard still
    /// holds some.
    pub fn reclaim_instance<C: Context<R>>(
        &self,
        ctx: &C,
        guard: &Guard,
        shard: usize,
        instance: u64,
        budget: usize,
    ) -> (usize, bool) {
        let sh = &self.shards[shard];
        let mut removed = 0;
        let mut deferred = Vec::new();
        let mut more = false;
        {
            let mut inner = sh.hot.inner.lock();
            // Each removal below finds the list again: inline, it is found
            // without the map.
            inner.zones.promote(instance);
            // Walk the list; records whose alias shard is busy stay in it
            // and are finished below with both shards locked in order.
            let mut s = inner.zones.get(instance).map_or(0, |l| l.head);
            // A walk of a linked list is a chain of cache misses, and each
            // record's removal misses again on its index buckets. So the
            // walk runs ahead of the removals: while record `s` is looked
            // at (fetched the round before), the record after it and the
            // index buckets of `s` are fetched, and the record
            // `REMOVAL_LAG` rounds behind it, whose buckets came
            // meanwhile, is removed. (One round behind, the buckets had a
            // removal's time to come, less than a miss takes: `bench
            // zones` spent most of the removal waiting for them.) Removing
            // a record rewrites its neighbours' links, never the `next` of
            // a record the walk has yet to read past.
            // The records waiting to be removed, oldest at `at`, each with
            // its slot and the hashes worked out for the prefetch (kept
            // for the removal, with the record's place: 634 instructions
            // a record before, 587 with both kept, under callgrind).
            let mut lag: [Option<(u32, &R, Hashes)>; REMOVAL_LAG] = [None; REMOVAL_LAG];
            let mut at = 0;
            loop {
                let ahead = (s != 0).then(|| self.prefetch_removal(ctx, guard, shard, s));
                let ready = lag[at];
                if s == 0 && lag.iter().all(Option::is_none) {
                    break;
                }
                if let Some((slot, r, hashes)) = ready {
                    if removed + deferred.len() >= budget {
                        more = true;
                        break;
                    }
                    let id = RecordId::new(shard, slot);
                    let alias = hashes.secondary.map(|h| self.shard_of(h));
                    let done = self.with_alias_locked(shard, &mut inner, alias, |home, alias| {
                        let why = Removal::Flushed;
                        self.kill_and_unlink(ctx, guard, id, r, hashes, home, alias, why);
                    });
                    match done {
                        Some(()) => removed += 1,
                        None => deferred.push(id),
                    }
                }
                lag[at] = ahead.map(|(_, r, hashes)| (s, r, hashes));
                at = (at + 1) % REMOVAL_LAG;
                s = ahead.map_or(0, |(next, _, _)| next);
            }
            sh.update_next_due(&inner, &self.due[shard]);
            sh.seal(&mut inner, guard);
        }
        for id in deferred {
            let done = self.with_record_locked(ctx, guard, id, |r, home, alias| {
                let hashes = ctx.hashes(r, guard);
                ctx.instance(r) == instance
                    && self.kill_and_unlink(
                        ctx,
                        guard,
                        id,
                        r,
                        hashes,
                        home,
                        alias,
                        Removal::Flushed,
                    )
            });
            removed += usize::from(done == Some(true));
        }
        if more {
            return (removed, true);
        }
        let still = sh.hot.inner.lock().zones.get(instance).is_some();
        (removed, still)
    }

    /// Prefetches what removing record `slot` of `shard` will touch (its
    /// index buckets) and the record after it in its zone list; returns
    /// that record's slot (0 at the end), and `slot`'s record and hashes.
    #[inline]
    fn prefetch_removal<C: Context<R>>(
        &self,
        ctx: &C,
        guard: &Guard,
        shard: usize,
        slot: u32,
    ) -> (u32, &R, Hashes) {
        let sh = &self.shards[shard];
        let r = rec(&sh.slab, slot);
        let next = r.header().zone_next.load(Ordering::Relaxed);
        if next != 0 {
            prefetch_lines(sh.slab.addr(next));
        }
        let hashes = ctx.hashes(r, guard);
        crate::prefetch(self.index(shard, guard).bucket_addr(hashes.primary));
        if let Some(sec) = hashes.secondary {
            self.prefetch(guard, sec);
        }
        (next, r, hashes)
    }

    /// Removes every record (all zone instances), shard by shard.
    pub fn clear<C: Context<R>>(&self, ctx: &C, guard: &Guard) -> usize {
        let mut n = 0;
        for shard in 0..self.shards.len() {
            for (inst, _) in self.shard_instances(shard) {
                loop {
                    let (removed, more) = self.reclaim_instance(ctx, guard, shard, inst, 4096);
                    n += removed;
                    if !more {
                        break;
                    }
                }
            }
        }
        n
    }

    /// The ids of the records of `instance` in `shard`, newest first (a
    /// snapshot: records may come and go once it is taken).
    pub fn instance_records(&self, shard: usize, instance: u64) -> Vec<RecordId> {
        let sh = &self.shards[shard];
        let inner = sh.hot.inner.lock();
        let mut out = Vec::new();
        let mut s = inner.zones.get(instance).map_or(0, |l| l.head);
        while s != 0 {
            out.push(RecordId::new(shard, s));
            s = sh.zone_next(s);
        }
        out
    }

    /// The zone instances with records in `shard`, and how many each has.
    pub fn shard_instances(&self, shard: usize) -> Vec<(u64, usize)> {
        let inner = self.shards[shard].hot.inner.lock();
        inner
            .zones
            .iter()
            .map(|(k, l)| (k, l.len as usize))
            .collect()
    }

    /// Number of records of `instance` in `shard`.
    pub fn instance_len(&self, shard: usize, instance: u64) -> usize {
        let inner = self.shards[shard].hot.inner.lock();
        inner.zones.get(instance).map_or(0, |l| l.len as usize)
    }
}

/// The zone lists as the table reports and clears them, one thread (a
/// flush that meets a busy alias shard is `tests/loom.rs`'s).
#[cfg(test)]
mod tests {
    use crate::testing::{MIXED, Rec};
    use crate::{Table, TableConfig, pin};

    fn one_shard(capacity: usize) -> Table<Rec> {
        Table::new(TableConfig {
            shards: 1,
            capacity,
        })
    }

    /// A shard lists its zone instances with their counts, and counts one.
    #[test]
    fn a_shard_lists_and_counts_its_zones() {
        let t = one_shard(64);
        for (key, inst) in [(1, 7), (2, 7), (3, 7), (4, 9)] {
            assert!(MIXED.insert_new(&t, key, 0, inst, u64::MAX, key).unwrap());
        }
        let mut zones = t.shard_instances(0);
        zones.sort_unstable();
        assert_eq!(zones, [(7, 3), (9, 1)]);
        assert_eq!(
            (
                t.instance_len(0, 7),
                t.instance_len(0, 9),
                t.instance_len(0, 8)
            ),
            (3, 1, 0)
        );
        assert!(MIXED.remove(&t, 4));
        assert_eq!(t.shard_instances(0), [(7, 3)]);
    }

    /// Clearing removes every record of every zone in every shard, in as
    /// many rounds of a zone's reclaim as it takes (4,096 records a round),
    /// and says how many.
    #[test]
    #[cfg_attr(miri, ignore = "5,000 inserts: minutes under Miri")]
    fn clearing_takes_every_zone_whole() {
        let t = Table::<Rec>::new(TableConfig {
            shards: 2,
            capacity: 8192,
        });
        for key in 1..=5_000 {
            assert!(MIXED.insert_new(&t, key, 0, 1, u64::MAX, key).unwrap());
        }
        for key in 5_001..=5_010 {
            assert!(
                MIXED
                    .insert_new(&t, key, key + 10_000, 2, u64::MAX, key)
                    .unwrap()
            );
        }
        assert!(t.instance_len(0, 1).max(t.instance_len(1, 1)) > 2_500);
        let g = pin();
        assert_eq!(t.clear(&MIXED, &g), 5_010);
        assert!(t.is_empty());
        assert!(t.shard_instances(0).is_empty() && t.shard_instances(1).is_empty());
        assert_eq!(t.clear(&MIXED, &g), 0);
    }
}
