//! Taking a dead record out of the table: its index entries, its zone
//! list, the wheel, and its slot (and alias) into the epoch's limbo.

use crate::epoch::Guard;
use crate::index::ALIAS_BIT;
use crate::shard::{Inner, Links};
use crate::sync::Ordering;
use crate::{Context, Hashes, Record, Removal};

use super::writer::alias_or_home;
use super::{RecordId, Table};

impl<R: Record> Table<R> {
    /// Removes record `id` whose entry lock the caller turned to dead.
    /// `hashes` are its hashes (`ctx.hashes(r)`: every caller has them
    /// already, for the shard of its alias or for prefetching); `home` is
    /// its shard's state; `alias` the state of the shard of its secondary
    /// entry when that is another shard.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn unlink_dead<C: Context<R>>(
        &self,
        ctx: &C,
        guard: &Guard,
        id: RecordId,
        r: &R,
        hashes: Hashes,
        home: &mut Inner,
        alias: Option<&mut Inner>,
        why: Removal,
    ) {
        let shard = id.shard();
        let hs = &self.shards[shard];
        self.index(shard, guard).remove(hashes.primary, id.slot());
        if let Some(sec) = hashes.secondary {
            let a_shard = self.shard_of(sec);
            self.remove_alias(guard, a_shard, sec, id, alias_or_home(alias, home));
        }
        let inst = ctx.instance(r);
        if let Some(list) = home.zones.get_mut(inst) {
            hs.unlink(list, id.slot(), r.header(), Links::Zone);
            if list.len == 0 {
                home.zones.remove(inst);
                ctx.occupancy(inst, shard, false);
            }
        }
        hs.unfile(home, id.slot(), r.header());
        ctx.removed(r, why);
        r.retire(&mut home.retired);
        home.live -= 1;
        if !home.hidden {
            hs.hot.live.store(home.published(), Ordering::Release);
        }
        self.count_change(home, -1);
        hs.retire_slot(home, guard, id.slot());
    }

    /// Removes the alias naming `owner` stored under `hash` in `shard`
    /// (whose state is `inner`), retiring its number through the epoch.
    pub(super) fn remove_alias(
        &self,
        guard: &Guard,
        shard: usize,
        hash: u64,
        owner: RecordId,
        inner: &mut Inner,
    ) {
        let sh = &self.shards[shard];
        let ix = self.index(shard, guard);
        let found = ix.find(hash, |reference| {
            if reference & ALIAS_BIT == 0 {
                return None;
            }
            let a = reference & !ALIAS_BIT;
            (sh.aliases.get(a)?.load(Ordering::Acquire) == owner.as_u32()).then_some(a)
        });
        if let Some(a) = found {
            ix.remove(hash, a | ALIAS_BIT);
            if let Some(cell) = sh.aliases.get(a) {
                cell.store(0, Ordering::Release);
            }
            sh.retire_alias(inner, guard, a);
        }
    }

    /// Marks `r` (whose hashes are `hashes`) dead, waiting for its entry
    /// lock, and unlinks it; false if it already was dead.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn kill_and_unlink<C: Context<R>>(
        &self,
        ctx: &C,
        guard: &Guard,
        id: RecordId,
        r: &R,
        hashes: Hashes,
        home: &mut Inner,
        alias: Option<&mut Inner>,
        why: Removal,
    ) -> bool {
        if !r.header().kill() {
            return false;
        }
        self.unlink_dead(ctx, guard, id, r, hashes, home, alias, why);
        true
    }
}

#[cfg(test)]
mod tests {
    use crate::testing::{MIXED, Rec};
    use crate::{APPROX_STEP, Table, TableConfig};

    /// The approximate count goes down with removals as it went up with
    /// inserts: within a step of the count, one shard.
    #[test]
    fn the_approximate_count_follows_removals() {
        let t = Table::<Rec>::new(TableConfig {
            shards: 1,
            capacity: 256,
        });
        let n = 4 * APPROX_STEP as u64;
        for key in 1..=n {
            assert!(MIXED.insert_new(&t, key, 0, 0, u64::MAX, key).unwrap());
        }
        assert!(t.approx_len().abs_diff(t.len()) < APPROX_STEP as usize);
        for key in 1..=n - 10 {
            assert!(MIXED.remove(&t, key));
        }
        assert_eq!(t.len(), 10);
        assert!(
            t.approx_len() < 10 + APPROX_STEP as usize,
            "{}",
            t.approx_len()
        );
    }
}
