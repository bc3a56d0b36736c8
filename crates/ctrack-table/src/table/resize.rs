//! Growing a shard's index: rebuilt larger under the shard's lock while
//! readers go on with the old one, which is freed after the grace period.

use crate::epoch::Guard;
use crate::index::{ALIAS_BIT, BUCKET_ENTRIES, Index};
use crate::shard::{Inner, rec};
use crate::sync::Ordering;
use crate::{Context, Record};

use super::{RecordId, Table};

impl<R: Record> Table<R> {
    /// Grows the index of every shard so that `capacity` records fit at the
    /// target load. Each shard is rebuilt under its own lock (its writers
    /// wait, its readers go on with the old index); other shards go on.
    pub fn reserve<C: Context<R>>(&self, ctx: &C, guard: &Guard, capacity: usize) {
        let buckets = Self::buckets_for(capacity, self.shards.len());
        for shard in 0..self.shards.len() {
            let inner = self.shards[shard].hot.inner.lock();
            if self.index(shard, guard).buckets() < buckets {
                self.rebuild_index(ctx, guard, shard, &inner, buckets);
            }
        }
    }

    /// Doubles a shard's index if one more entry would take it past 90%
    /// load (hash imbalance between shards, or more records than the table
    /// was sized for), or if `hash` would find no free entry within the
    /// probe bound while the index is more than half full (a long cluster
    /// of full buckets: near 90% load they occur in a large index whatever
    /// the hash, and an insert that fails there would be refused although
    /// the table has room). A cluster in an index less than half full is
    /// keys chosen to collide, which no size spreads: growing for them
    /// would only let an attacker double the index at will. The shard's
    /// lock is held by the caller. With `room_checked`, the caller found
    /// room for `hash` under that lock and inserted nothing since, so there
    /// is no cluster to probe for.
    pub(super) fn make_room<C: Context<R>>(
        &self,
        ctx: &C,
        guard: &Guard,
        shard: usize,
        inner: &Inner,
        hash: u64,
        room_checked: bool,
    ) {
        let ix = self.index(shard, guard);
        let entries = inner.live + inner.alias_live + 1;
        let slots = ix.buckets() * BUCKET_ENTRIES;
        if entries * 10 > slots * 9 || (entries * 2 > slots && !room_checked && !ix.has_room(hash))
        {
            self.rebuild_index(ctx, guard, shard, inner, ix.buckets() * 2);
        }
    }

    /// Replaces a shard's index by one of `buckets` buckets holding the same
    /// entries. The shard's lock is held by the caller, so no entry of this
    /// index can come or go meanwhile; readers keep using the old index
    /// until they next load it, and it is freed after the grace period.
    fn rebuild_index<C: Context<R>>(
        &self,
        ctx: &C,
        guard: &Guard,
        shard: usize,
        inner: &Inner,
        buckets: usize,
    ) {
        let sh = &self.shards[shard];
        let ix = Index::new(buckets, &self.arena);
        let (_, ever) = sh.slot_counts(inner);
        for slot in 1..=ever as u32 {
            let r = rec(&sh.slab, slot);
            if r.header().is_live() {
                // Cannot fail: the new index is larger than the old.
                let _ = ix.insert(ctx.hashes(r, guard).primary, slot);
            }
        }
        for a in 1..inner.alias_next_fresh() {
            let Some(cell) = sh.aliases.get(a) else { break };
            let owner = cell.load(Ordering::Acquire);
            if owner == 0 {
                continue;
            }
            let owner = RecordId::from_u32(owner);
            let r = self
                .shards
                .get(owner.shard())
                .and_then(|s| s.slab.get(owner.slot()));
            if let Some(sec) = r.and_then(|r| ctx.hashes(r, guard).secondary) {
                let _ = ix.insert(sec, a | ALIAS_BIT);
            }
        }
        sh.index.replace(Some(Box::new(ix)), guard);
    }
}
