//! Zone instances: each shard lists the records of every instance, so that
//! listing or flushing an instance walks that instance alone.

use crate::epoch::Guard;
use crate::prefetch::prefetch_lines;
use crate::shard::rec;
use crate::{Context, Record, Removal};

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
            // The records waiting to be removed, with the shard of their
            // secondary entries, oldest at `at`.
            let mut lag = [(0u32, None::<usize>); REMOVAL_LAG];
            let mut at = 0;
            loop {
                let (next, alias_of_s) = if s != 0 {
                    self.prefetch_removal(ctx, guard, shard, s)
                } else {
                    (0, None)
                };
                let (ready, ready_alias) = lag[at];
                if s == 0 && lag.iter().all(|&(x, _)| x == 0) {
                    break;
                }
                if ready != 0 {
                    if removed + deferred.len() >= budget {
                        more = true;
                        break;
                    }
                    let r = rec(&sh.slab, ready);
                    let id = RecordId::new(shard, ready);
                    let done =
                        self.with_alias_locked(shard, &mut inner, ready_alias, |home, alias| {
                            self.kill_and_unlink(ctx, guard, id, r, home, alias, Removal::Flushed);
                        });
                    match done {
                        Some(()) => removed += 1,
                        None => deferred.push(id),
                    }
                }
                lag[at] = (s, alias_of_s);
                at = (at + 1) % REMOVAL_LAG;
                s = next;
            }
            sh.update_next_due(&inner);
            sh.seal(&mut inner, guard);
        }
        for id in deferred {
            let done = self.with_record_locked(ctx, guard, id, |r, home, alias| {
                ctx.instance(r) == instance
                    && self.kill_and_unlink(ctx, guard, id, r, home, alias, Removal::Flushed)
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
    /// that record's slot (0 at the end) and the shard of `slot`'s
    /// secondary entry, if it has one.
    #[inline]
    fn prefetch_removal<C: Context<R>>(
        &self,
        ctx: &C,
        guard: &Guard,
        shard: usize,
        slot: u32,
    ) -> (u32, Option<usize>) {
        let sh = &self.shards[shard];
        let next = sh.zone_next(slot);
        if next != 0 {
            prefetch_lines(sh.slab.addr(next));
        }
        let hashes = ctx.hashes(rec(&sh.slab, slot), guard);
        crate::prefetch(self.index(shard, guard).bucket_addr(hashes.primary));
        if let Some(sec) = hashes.secondary {
            self.prefetch(guard, sec);
        }
        (next, hashes.secondary.map(|h| self.shard_of(h)))
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
