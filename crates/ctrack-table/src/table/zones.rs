//! Zone instances: each shard lists the records of every instance, so that
//! listing or flushing an instance walks that instance alone.

use crate::epoch::Guard;
use crate::shard::rec;
use crate::{Context, Record, Removal};

use super::{RecordId, Table};

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
            let mut inner = sh.inner.lock();
            // Walk the list; records whose alias shard is busy stay in it
            // and are finished below with both shards locked in order.
            let mut s = inner.zones.get(&instance).map_or(0, |l| l.head);
            while s != 0 {
                if removed + deferred.len() >= budget {
                    more = true;
                    break;
                }
                let next = sh.zone_next(s);
                let r = rec(&sh.slab, s);
                let id = RecordId::new(shard, s);
                let alias = ctx.hashes(r, guard).secondary.map(|h| self.shard_of(h));
                let done = self.with_alias_locked(shard, &mut inner, alias, |home, alias| {
                    self.kill_and_unlink(ctx, guard, id, r, home, alias, Removal::Flushed);
                });
                match done {
                    Some(()) => removed += 1,
                    None => deferred.push(id),
                }
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
        let still = sh.inner.lock().zones.contains_key(&instance);
        (removed, still)
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
        let inner = sh.inner.lock();
        let mut out = Vec::new();
        let mut s = inner.zones.get(&instance).map_or(0, |l| l.head);
        while s != 0 {
            out.push(RecordId::new(shard, s));
            s = sh.zone_next(s);
        }
        out
    }

    /// The zone instances with records in `shard`, and how many each has.
    pub fn shard_instances(&self, shard: usize) -> Vec<(u64, usize)> {
        let inner = self.shards[shard].inner.lock();
        inner
            .zones
            .iter()
            .map(|(k, l)| (*k, l.len as usize))
            .collect()
    }

    /// Number of records of `instance` in `shard`.
    pub fn instance_len(&self, shard: usize, instance: u64) -> usize {
        let inner = self.shards[shard].inner.lock();
        inner.zones.get(&instance).map_or(0, |l| l.len as usize)
    }
}
