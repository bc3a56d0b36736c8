//! Expiry: sweeping the shards' timer wheels for records whose time ran
//! out.

use crate::epoch::Guard;
use crate::prefetch::prefetch_lines;
use crate::shard::{Inner, MAX_WHEEL_LANES, rec};
use crate::sync::Ordering;
use crate::{Context, Hashes, Record, Removal};

use super::{RecordId, Table};

/// What a sweep did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SweepStats {
    /// Records looked at.
    pub examined: usize,
    /// Records removed because they had expired.
    pub removed: usize,
    /// True if the budget ran out before everything due was processed.
    pub more: bool,
    /// Shards with records due that a budgeted sweep left alone because
    /// another thread held their lock at that moment (their due time is in
    /// `next_due`, so a later sweep takes them).
    pub busy: usize,
    /// When the table next has something due, as the sweep left its
    /// shards (what [`Table::next_due`] would say, without going over them
    /// again); `None` if nothing is filed. Meaningful when `more` is false.
    pub next_due: Option<u64>,
}

/// The most records a sweep looks at in one shard under one hold of its
/// lock: a thread inserting into that shard waits for at most this many
/// removals, whatever the sweep's budget.
const SWEEP_HOLD: usize = 64;

/// How many records of a tick's lists the sweep fetches ahead of the one
/// it removes, over all its lanes (each lane's scout runs this many
/// divided by the lanes ahead in its own list: with four lanes, one).
const EXPIRY_AHEAD: usize = 4;

impl<R: Record> Table<R> {
    /// Removes expired records, looking at no more than `budget`. Shards
    /// are visited round-robin from call to call, so that small budgets
    /// still reach every shard.
    ///
    /// A sweep with a budget passes over a shard whose lock another thread
    /// holds ([`SweepStats::busy`]) rather than wait for it: packet threads
    /// sweep a little after each burst, and with two threads, waiting
    /// there (spinning, yielding, parking) cost `ctrack bench cps
    /// --threads 2` a tenth of its rate. A sweep with no budget
    /// (`usize::MAX`) waits, and leaves nothing due behind.
    pub fn sweep<C: Context<R>>(
        &self,
        ctx: &C,
        guard: &Guard,
        now: u64,
        budget: usize,
    ) -> SweepStats {
        let mut out = SweepStats::default();
        if self.filed.load(Ordering::Relaxed) == 0 {
            // Nothing was ever filed (a record inserted meanwhile, by
            // another thread, waits for the next sweep).
            return out;
        }
        let n = self.shards.len();
        let start = self.sweep_start.fetch_add(1, Ordering::Relaxed) as usize;
        let mut next = u64::MAX;
        // Only a sweep of everything due waits for a busy shard.
        let wait = budget == usize::MAX;
        for i in 0..n {
            let shard = (start + i) & self.mask;
            let due = self.due[shard].load(Ordering::Relaxed);
            if due > now {
                next = next.min(due);
                continue;
            }
            // The shard's lock is held for at most SWEEP_HOLD records at
            // a time, so that a thread inserting into the shard waits for
            // a few removals at most, never for a whole budget of them.
            loop {
                if out.examined >= budget {
                    out.more = true;
                    return out;
                }
                let chunk = (budget - out.examined).min(SWEEP_HOLD);
                match self.sweep_shard(ctx, guard, shard, now, chunk, wait, &mut out) {
                    Some(true) => {}
                    Some(false) => break,
                    None => {
                        out.busy += 1;
                        next = next.min(due);
                        break;
                    }
                }
            }
            next = next.min(self.due[shard].load(Ordering::Relaxed));
        }
        out.next_due = (next != u64::MAX).then_some(next);
        out
    }

    /// Sweeps one shard under one hold of its lock, looking at no more
    /// than `budget` records; true if it stopped at the budget with more
    /// due. `None`, having done nothing, if the lock is busy and `wait`
    /// is false.
    #[allow(clippy::too_many_arguments)]
    fn sweep_shard<C: Context<R>>(
        &self,
        ctx: &C,
        guard: &Guard,
        shard: usize,
        now: u64,
        budget: usize,
        wait: bool,
        out: &mut SweepStats,
    ) -> Option<bool> {
        let sh = &self.shards[shard];
        let due = &self.due[shard];
        let mut deferred = Vec::new();
        let mut stopped = false;
        {
            let mut inner = if wait {
                sh.hot.inner.lock()
            } else {
                sh.hot.inner.try_lock()?
            };
            let mut examined = 0;
            // The records due are linked lists through random memory (a
            // tick's lanes), and removing one misses on its index buckets
            // and its zone list neighbours. So in each lane a scout runs
            // ahead (`EXPIRY_AHEAD` records in all): what the removal of
            // the record it reaches will touch is fetched, and the record
            // after it.
            // The sweep takes the lanes in turn, so that each scout's next
            // record has as many removals' time to come as there are
            // lanes. (Every record the sweep takes off a list, removed or
            // filed under a later tick, is behind its scout; a stale link
            // would only cost a useless prefetch, the scout's steps are
            // bounded.) Each scout's next record is as read when the scout
            // was fetched ahead (read again at each step, it cost a second
            // lookup of the scout's slot; the sweep changes nothing ahead
            // of it).
            let mut scouts = [(0u32, u64::MAX, 0u32); MAX_WHEEL_LANES];
            let ahead = EXPIRY_AHEAD / sh.wheel_lanes;
            while let Some((slot, tick, lane)) = sh.due(&mut inner, now, examined) {
                if examined >= budget {
                    stopped = true;
                    break;
                }
                examined += 1;
                let r = rec(&sh.slab, slot);
                let (scout, scout_tick, scout_next) = &mut scouts[lane];
                let steps = if tick != *scout_tick {
                    (*scout, *scout_tick) = (slot, tick);
                    *scout_next = r.header().wheel_next.load(Ordering::Relaxed);
                    ahead
                } else {
                    usize::from(*scout != 0)
                };
                for _ in 0..steps {
                    *scout = *scout_next;
                    if *scout == 0 {
                        break;
                    }
                    *scout_next = self.prefetch_expiry(ctx, guard, shard, *scout);
                }
                let id = RecordId::new(shard, slot);
                if ctx.expiry(r, guard) > now {
                    sh.refile(
                        &mut inner,
                        due,
                        slot,
                        r.header(),
                        ctx.expiry(r, guard),
                        tick + 1,
                    );
                    continue;
                }
                // If its alias lives in another shard that is busy and
                // comes first in lock order, finish it below.
                let hashes = ctx.hashes(r, guard);
                let alias = hashes.secondary.map(|h| self.shard_of(h));
                let removed = self.with_alias_locked(shard, &mut inner, alias, |home, alias| {
                    self.remove_expired(ctx, guard, id, r, hashes, now, home, alias)
                });
                match removed {
                    Some(true) => out.removed += 1,
                    Some(false) => sh.refile(
                        &mut inner,
                        due,
                        slot,
                        r.header(),
                        ctx.expiry(r, guard),
                        tick + 1,
                    ),
                    None => {
                        sh.unfile(&mut inner, slot, r.header());
                        deferred.push(id);
                    }
                }
            }
            out.examined += examined;
            sh.update_next_due(&inner, due);
            sh.seal_some(&mut inner, guard);
        }
        for id in deferred {
            let removed = self.with_record_locked(ctx, guard, id, |r, home, alias| {
                let hashes = ctx.hashes(r, guard);
                let removed = self.remove_expired(ctx, guard, id, r, hashes, now, home, alias);
                if !removed && r.header().is_live() {
                    sh.file(home, due, id.slot(), r.header(), ctx.expiry(r, guard), 0);
                }
                removed
            });
            out.removed += usize::from(removed == Some(true));
        }
        Some(stopped)
    }

    /// Prefetches what expiring record `slot` of `shard` will touch (its
    /// index buckets, its zone list neighbours) and the record after it in
    /// the wheel. `slot` itself should have been fetched a round before.
    /// Returns the record after it.
    #[inline]
    fn prefetch_expiry<C: Context<R>>(
        &self,
        ctx: &C,
        guard: &Guard,
        shard: usize,
        slot: u32,
    ) -> u32 {
        let sh = &self.shards[shard];
        let r = rec(&sh.slab, slot);
        let h = r.header();
        let after = h.wheel_next.load(Ordering::Relaxed);
        if after != 0 {
            prefetch_lines(sh.slab.addr(after));
        }
        for n in [
            h.zone_prev.load(Ordering::Relaxed),
            h.zone_next.load(Ordering::Relaxed),
        ] {
            if n != 0 {
                crate::prefetch(sh.slab.addr(n).cast());
            }
        }
        let hashes = ctx.hashes(r, guard);
        crate::prefetch(self.index(shard, guard).bucket_addr(hashes.primary));
        if let Some(sec) = hashes.secondary {
            self.prefetch(guard, sec);
        }
        after
    }

    /// Removes `r` if it is live and expired at `now` (checked under its
    /// entry lock, so that a packet refreshing it wins or loses cleanly).
    #[allow(clippy::too_many_arguments)]
    fn remove_expired<C: Context<R>>(
        &self,
        ctx: &C,
        guard: &Guard,
        id: RecordId,
        r: &R,
        hashes: Hashes,
        now: u64,
        home: &mut Inner,
        alias: Option<&mut Inner>,
    ) -> bool {
        if r.header().lock().is_none() {
            return false;
        }
        if ctx.expiry(r, guard) > now {
            r.header().unlock();
            return false;
        }
        r.header().kill_locked();
        self.unlink_dead(ctx, guard, id, r, hashes, home, alias, Removal::Expired);
        true
    }

    /// When some shard next has an expiry due (ms), if any.
    pub fn next_due(&self) -> Option<u64> {
        self.due
            .iter()
            .map(|d| d.load(Ordering::Relaxed))
            .min()
            .filter(|&t| t != u64::MAX)
    }
}

/// A sweep's own figures, one thread: what it examined and removed, when
/// it says the table is next due, and where a record's expiry falls
/// against the sweep's moment. The races (a busy shard, a record whose
/// alias shard is busy, a refresh) are `tests/loom.rs`'s.
#[cfg(test)]
mod tests {
    use crate::testing::{MIXED, Rec, mix};
    use crate::{Table, TableConfig, pin};
    use std::sync::atomic::Ordering;

    fn put(t: &Table<Rec>, key: u64, exp: u64) {
        assert!(MIXED.insert_new(t, key, 0, 0, exp, key).unwrap());
    }

    fn has(t: &Table<Rec>, key: u64) -> bool {
        let g = pin();
        t.find(&g, mix(key), |r| r.key == key).is_some()
    }

    /// A budgeted sweep examines its budget and says there is more; the
    /// next takes the rest; each says when the table is next due, as
    /// [`Table::next_due`] does.
    #[test]
    fn a_sweep_counts_what_it_examined_and_says_when_next_due() {
        let t = Table::<Rec>::new(TableConfig {
            shards: 1,
            capacity: 64,
        });
        for k in 1..=10 {
            put(&t, k, 5_000);
        }
        put(&t, 11, 50_000);
        let g = pin();
        let s = t.sweep(&MIXED, &g, 6_000, 4);
        assert_eq!((s.examined, s.removed, s.more), (4, 4, true));
        let s = t.sweep(&MIXED, &g, 6_000, usize::MAX);
        assert_eq!((s.examined, s.removed, s.more, s.busy), (6, 6, false, 0));
        assert_eq!(s.next_due, Some(51_000));
        assert_eq!(t.next_due(), s.next_due);
        let s = t.sweep(&MIXED, &g, 51_000, usize::MAX);
        assert_eq!((s.examined, s.removed, s.next_due), (1, 1, None));
        assert!(t.is_empty());
    }

    /// A record refreshed to expire at the sweep's very moment has
    /// expired: a record lives up to its expiry, not through it (as the
    /// removal under the entry lock decides too).
    #[test]
    fn a_record_expiring_at_the_sweeps_moment_goes() {
        let t = Table::<Rec>::new(TableConfig {
            shards: 1,
            capacity: 64,
        });
        put(&t, 1, 5_500);
        put(&t, 2, 5_500);
        let g = pin();
        for (key, exp) in [(1, 6_000), (2, 6_001)] {
            let e = t.find(&g, mix(key), |r| r.key == key).unwrap();
            e.lock().unwrap().exp.store(exp, Ordering::Relaxed);
        }
        let s = t.sweep(&MIXED, &g, 6_000, usize::MAX);
        assert_eq!((s.examined, s.removed), (2, 1));
        assert!(!has(&t, 1) && has(&t, 2));
        assert_eq!(t.next_due(), Some(7_000));
    }
}
