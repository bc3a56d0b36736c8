//! Writers: the shard locks, taken in lock order (one helper decides when
//! waiting for one is allowed), and the inserts and removals done under
//! them.

use core::fmt;

use crate::epoch::Guard;
use crate::index::ALIAS_BIT;
use crate::prefetch::prefetch_lines;
use crate::shard::{Inner, Links, TICK_MS, rec};
use crate::sync::{MutexGuard, Ordering};
use crate::{Context, Hashes, Record, Removal};

use super::{EntryRef, RecordId, Seen, Table};

/// Why an insert failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InsertError {
    /// The shard has no free slot (2^23 records in one shard).
    NoSlot,
    /// The index has no free entry near the key's home bucket.
    IndexFull,
    /// The writer does not hold the lock of a shard the record needs.
    NotLocked,
}

/// The shard locks a thread holds when it takes another, which decides
/// whether it may wait for it.
#[derive(Debug, Clone, Copy)]
pub(super) enum Holding {
    /// None.
    Nothing,
    /// Locks of shards up to this one (none above it).
    UpTo(usize),
    /// Locks the table cannot see (a [`Writer`]'s user may hold others).
    Unknown,
}

/// The state of a record's alias shard when that is another shard, else
/// its home shard's.
pub(super) fn alias_or_home<'a>(
    alias: Option<&'a mut Inner>,
    home: &'a mut Inner,
) -> &'a mut Inner {
    match alias {
        Some(a) => a,
        None => home,
    }
}

/// How long a writer that may wait for a shard's lock spins (a `pause`
/// and a look each round) before it parks: 1,000 rounds, about 11 µs on
/// machine A's processor (10.7 ns a `pause`), longer than a sweep holds a
/// shard (at most `SWEEP_HOLD` records). Parking_lot's own wait spins
/// about a microsecond, then yields to the kernel and parks. With two
/// threads, `ctrack bench cps` made 51,000 `sched_yield` and 9,700 `futex`
/// calls per 5M connections that way, 950 and 655 with this spin; at 16
/// threads (machine B) its steady phase went from 7.6–8.4 to 8.9–10.0 M
/// conns/s and its batch p99.9 from 358–414 to 95–127 µs (BENCHMARKS.md,
/// lease 7). With 250 rounds the two-thread tail grew again; 4,000 were
/// no better than 1,000.
const SPIN_ROUNDS: u32 = 1000;

impl<R: Record> Table<R> {
    /// Takes the lock of `shard`, not held by the caller. The lock order
    /// (shards in increasing number, then at most one entry lock) lets a
    /// thread wait only for a shard above every one it holds; otherwise
    /// the lock is taken only if free (`None` if not): waiting could
    /// deadlock. A wait spins first ([`SPIN_ROUNDS`]).
    pub(super) fn lock_shard(
        &self,
        shard: usize,
        holding: Holding,
    ) -> Option<MutexGuard<'_, Inner>> {
        let may_wait = match holding {
            Holding::Nothing => true,
            Holding::UpTo(held) => shard > held,
            Holding::Unknown => false,
        };
        let lock = &self.shards[shard].hot.inner;
        if may_wait {
            Some(lock.lock_spinning(SPIN_ROUNDS))
        } else {
            lock.try_lock()
        }
    }

    /// Runs `f` with the states of both shards of a record of `shard`:
    /// `home`, that shard's, locked by the caller, and that of `alias` (the
    /// shard of its secondary entry) when it is another shard, locked here.
    /// `None`, without running `f`, if that lock is busy and lock order
    /// forbids waiting: the caller finishes the record later with
    /// [`Table::with_record_locked`].
    pub(super) fn with_alias_locked<T>(
        &self,
        shard: usize,
        home: &mut Inner,
        alias: Option<usize>,
        f: impl FnOnce(&mut Inner, Option<&mut Inner>) -> T,
    ) -> Option<T> {
        match alias {
            Some(a) if a != shard => {
                let mut other = self.lock_shard(a, Holding::UpTo(shard))?;
                Some(f(home, Some(&mut other)))
            }
            _ => Some(f(home, None)),
        }
    }

    /// Runs `f` on record `id`, if it is still live, with both its shards
    /// locked in order (for a record [`Table::with_alias_locked`] could not
    /// finish): the record, its home shard's state and its alias shard's
    /// when that is another shard.
    pub(super) fn with_record_locked<C: Context<R>, T>(
        &self,
        ctx: &C,
        guard: &Guard,
        id: RecordId,
        f: impl FnOnce(&R, &mut Inner, Option<&mut Inner>) -> T,
    ) -> Option<T> {
        let r = self.get(guard, id)?.rec;
        let hashes = ctx.hashes(r, guard);
        let mut w = self.write(guard, &hashes);
        let (home, alias) = w.pair(id.shard(), hashes.secondary.map(|h| self.shard_of(h)));
        Some(f(r, home?, alias))
    }
}

/// The locks of one or two shards, held: the way to insert and remove.
/// Dropping it releases them.
pub struct Writer<'g, R: Record> {
    table: &'g Table<R>,
    guard: &'g Guard,
    held: [Option<(usize, MutexGuard<'g, Inner>)>; 2],
    /// A hash [`Writer::has_room`] found room for since this writer last
    /// inserted: only an insert takes room, so the insert under it need
    /// not probe for it again.
    room: Option<u64>,
}

impl<R: Record> fmt::Debug for Writer<'_, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let shards: Vec<usize> = self.held.iter().flatten().map(|(s, _)| *s).collect();
        f.debug_struct("Writer").field("shards", &shards).finish()
    }
}

impl<'g, R: Record> Writer<'g, R> {
    /// Locks shards `a` and `b` (possibly the same), in increasing order.
    pub(super) fn lock_pair(table: &'g Table<R>, guard: &'g Guard, a: usize, b: usize) -> Self {
        let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
        let first = table
            .lock_shard(lo, Holding::Nothing)
            .expect("a lock taken in order is waited for");
        let second = (hi != lo).then(|| {
            let g = table.lock_shard(hi, Holding::UpTo(lo));
            (hi, g.expect("a lock taken in order is waited for"))
        });
        Writer {
            table,
            guard,
            held: [Some((lo, first)), second],
            room: None,
        }
    }

    fn inner(&self, shard: usize) -> Option<&Inner> {
        self.held
            .iter()
            .flatten()
            .find(|(s, _)| *s == shard)
            .map(|(_, g)| &**g)
    }

    pub(super) fn inner_mut(&mut self, shard: usize) -> Option<&mut Inner> {
        self.held
            .iter_mut()
            .flatten()
            .find(|(s, _)| *s == shard)
            .map(|(_, g)| &mut **g)
    }

    /// The held states of `home` and, if it is another held shard, `alias`.
    pub(super) fn pair(
        &mut self,
        home: usize,
        alias: Option<usize>,
    ) -> (Option<&mut Inner>, Option<&mut Inner>) {
        let [a, b] = &mut self.held;
        let mut home_ref = None;
        let mut alias_ref = None;
        for (s, g) in [a, b].into_iter().flatten() {
            if *s == home {
                home_ref = Some(&mut **g);
            } else if Some(*s) == alias {
                alias_ref = Some(&mut **g);
            }
        }
        (home_ref, alias_ref)
    }

    fn holds(&self, shard: usize) -> bool {
        self.held.iter().flatten().any(|(s, _)| *s == shard)
    }

    /// Whether nothing was inserted into the index of the shard of `hash`
    /// (held by this writer) since [`Table::seen`] gave `seen`. Then a
    /// search under `hash` that began after that and found no live record
    /// holds still: the table has none under `hash` now, and the writer
    /// need not search again. (The count was read before the search
    /// looked, and an insert stores its entry before it counts: either the
    /// count read included the insert, and the search saw its entry, or it
    /// did not, and the count differs now.) False for [`Seen::NOTHING`].
    #[inline]
    pub fn unchanged_since(&self, hash: u64, seen: Seen) -> bool {
        let shard = self.table.shard_of(hash);
        seen != Seen::NOTHING
            && self.holds(shard)
            && self.table.shards[shard].hot.inserts.load(Ordering::Relaxed) == seen.0
    }

    /// Finds a live record under `hash`; with the shard of `hash` held,
    /// nothing can be inserted under it meanwhile.
    pub fn find(&self, hash: u64, matches: impl FnMut(&R) -> bool) -> Option<EntryRef<'g, R>> {
        self.table.find(self.guard, hash, matches)
    }

    /// Inserts a record: takes a vacant slot in the shard of
    /// `hashes.primary`, lets `init` fill it (the slot holds whatever its
    /// last record left: `init` must set every field), links it into its
    /// zone list and the wheel, and publishes its index entries. Both
    /// shards of `hashes` must be held.
    pub fn insert<C: Context<R>>(
        &mut self,
        ctx: &C,
        hashes: &Hashes,
        now: u64,
        init: impl FnOnce(&mut R),
    ) -> Result<EntryRef<'g, R>, InsertError> {
        let table = self.table;
        let guard = self.guard;
        let shard = table.shard_of(hashes.primary);
        let a_shard = hashes.secondary.map(|h| table.shard_of(h));
        if !self.holds(shard) || a_shard.is_some_and(|a| !self.holds(a)) {
            return Err(InsertError::NotLocked);
        }
        // Room the caller found for the primary entry is still there.
        let checked = self.room.take() == Some(hashes.primary);
        let sh = &table.shards[shard];
        if let (Some(a), Some(sec)) = (a_shard.filter(|&a| a != shard), hashes.secondary) {
            let ainner = self.inner_mut(a).ok_or(InsertError::NotLocked)?;
            table.make_room(ctx, guard, a, ainner, sec, false);
        }
        let (home, alias) = self.pair(shard, a_shard);
        let home = home.ok_or(InsertError::NotLocked)?;
        if let Some(sec) = hashes.secondary.filter(|_| a_shard == Some(shard)) {
            table.make_room(ctx, guard, shard, home, sec, false);
        }
        table.make_room(ctx, guard, shard, home, hashes.primary, checked);
        let slot = sh.alloc(home, guard).ok_or(InsertError::NoSlot)?;
        {
            // SAFETY: `slot` came from `alloc`: never handed out, or freed
            // through the epoch (its grace period has passed, so no reader
            // holds a reference) and unreachable from every index. The
            // shard lock makes this thread its only user.
            let r = unsafe { sh.slab.get_mut_unchecked(slot) };
            r.header().reset();
            init(r);
        }
        let r = rec(&sh.slab, slot);
        let id = RecordId::new(shard, slot);
        r.header().set_live();

        // The alias first: a lookup of the primary key may then find a
        // record whose every entry is in place.
        let mut alias_shard = None;
        if let (Some(sec), Some(a)) = (hashes.secondary, a_shard) {
            let ainner = alias_or_home(alias, home);
            if let Err(e) = table.insert_alias(guard, a, sec, id, ainner) {
                r.header().kill();
                let home = self.inner_mut(shard).expect("home shard is held");
                sh.free_unseen(home, slot);
                return Err(e);
            }
            alias_shard = Some(a);
        }
        if table
            .index(shard, guard)
            .insert(hashes.primary, slot)
            .is_err()
        {
            r.header().kill();
            let (home, alias) = self.pair(shard, alias_shard);
            let home = home.expect("home shard is held");
            if let (Some(sec), Some(a)) = (hashes.secondary, alias_shard) {
                // Readers may have seen the alias: free through the epoch.
                table.remove_alias(guard, a, sec, id, alias_or_home(alias, home));
                let home = self.inner_mut(shard).expect("home shard is held");
                sh.retire_slot(home, guard, slot);
            } else {
                sh.free_unseen(home, slot);
            }
            return Err(InsertError::IndexFull);
        }
        sh.count_insert();
        let home = self.inner_mut(shard).expect("home shard is held");
        let inst = ctx.instance(r);
        let list = home.zones.get_or_default(inst);
        sh.push_front(list, slot, r.header(), Links::Zone);
        if list.len == 1 {
            ctx.occupancy(inst, shard, true);
        }
        sh.start_clock(home, now);
        sh.file(
            home,
            &table.due[shard],
            slot,
            r.header(),
            ctx.expiry(r, guard),
            now / TICK_MS,
        );
        home.live += 1;
        // An announced insert is this one (only this writer inserts here
        // while it holds the shard): the published count stays.
        home.reserved = false;
        home.hidden = false;
        sh.hot.live.store(home.published(), Ordering::Release);
        table.count_change(home, 1);
        Ok(EntryRef { id, rec: r })
    }

    /// Removes a live record. Its shards must be held, or free to lock
    /// without waiting; returns false if they are not, or if the record is
    /// already gone.
    pub fn remove<C: Context<R>>(&mut self, ctx: &C, entry: EntryRef<'g, R>, why: Removal) -> bool {
        self.remove_if(ctx, entry, why, |_| true)
    }

    /// Removes a live record if `pred` holds for it under its entry lock.
    pub fn remove_if<C: Context<R>>(
        &mut self,
        ctx: &C,
        entry: EntryRef<'g, R>,
        why: Removal,
        pred: impl FnOnce(&R) -> bool,
    ) -> bool {
        let table = self.table;
        let guard = self.guard;
        let home = entry.id.shard();
        let hashes = ctx.hashes(entry.rec, guard);
        let a_shard = hashes.secondary.map(|h| table.shard_of(h));
        let alias_other = a_shard.filter(|&a| a != home);
        // Shards not held are taken only if free: this writer's user may
        // hold other locks.
        let mut extra = [None, None];
        for (i, s) in [Some(home), alias_other].into_iter().enumerate() {
            if let Some(s) = s.filter(|&s| !self.holds(s)) {
                match table.lock_shard(s, Holding::Unknown) {
                    Some(g) => extra[i] = Some(g),
                    None => return false,
                }
            }
        }
        if entry.rec.header().lock().is_none() {
            return false;
        }
        if !pred(entry.rec) {
            entry.rec.header().unlock();
            return false;
        }
        entry.rec.header().kill_locked();
        let (held_home, held_alias) = self.pair(home, alias_other);
        let [extra_home, extra_alias] = &mut extra;
        let home_inner = held_home
            .or(extra_home.as_deref_mut())
            .expect("home shard locked above");
        let alias_inner = held_alias.or(extra_alias.as_deref_mut());
        table.unlink_dead(
            ctx,
            guard,
            entry.id,
            entry.rec,
            hashes,
            home_inner,
            alias_inner,
            why,
        );
        true
    }

    /// Looks at up to `scan` of the oldest records of `instance` in the
    /// shard of `hash`, then up to `scan` of its newest, and removes the
    /// first for which `pick` holds (early drop). The oldest are the ones
    /// closest to expiry; the newest, under a flood, the flood's. Returns
    /// true if one was removed.
    pub fn evict<C: Context<R>>(
        &mut self,
        ctx: &C,
        hash: u64,
        instance: u64,
        scan: usize,
        mut pick: impl FnMut(&R) -> bool,
    ) -> bool {
        let table = self.table;
        let shard = table.shard_of(hash);
        let sh = &table.shards[shard];
        let Some(inner) = self.inner_mut(shard) else {
            return false;
        };
        let (head, tail) = inner
            .zones
            .get(instance)
            .map_or((0, 0), |l| (l.head, l.tail));
        let scan = scan.min(MAX_NEAR / 2);
        let mut candidates = [0u32; MAX_NEAR];
        let mut n = 0;
        let mut s = tail;
        while s != 0 && n < scan {
            candidates[n] = s;
            n += 1;
            s = sh.zone_prev(s);
        }
        let oldest = n;
        let mut s = head;
        while s != 0 && n < oldest + scan && !candidates[..oldest].contains(&s) {
            candidates[n] = s;
            n += 1;
            s = sh.zone_next(s);
        }
        for &slot in &candidates[..n] {
            let r = rec(&sh.slab, slot);
            if !pick(r) {
                continue;
            }
            let e = EntryRef {
                id: RecordId::new(shard, slot),
                rec: r,
            };
            if self.remove_if(ctx, e, Removal::Evicted, |r| pick(r)) {
                return true;
            }
        }
        false
    }

    /// Until this writer's next insert into the shard of `hash` (held by
    /// it), or its end, removals from that shard leave the shard's published
    /// count ([`crate::Table::len`] sums them) as it was: for evictions that
    /// make room for an insert, which together leave the count where it
    /// was, so that a sum taken meanwhile does not see the eviction as room
    /// (see [`crate::Gate`]). Removals from other shards are published as
    /// always: an eviction's `foreign` hook says when one comes.
    pub fn hide_count(&mut self, hash: u64) {
        let shard = self.table.shard_of(hash);
        if let Some(inner) = self.inner_mut(shard) {
            inner.hidden = true;
        }
    }

    /// True if an insert into the shard of `hash` (held by this writer)
    /// would take a fresh slot while at least
    /// [`GRACE_SLOTS_PER_SHARD`](crate::GRACE_SLOTS_PER_SHARD) removed ones
    /// still wait out their grace period there. A table at its limit that
    /// makes room by eviction refuses instead: each eviction adds a slot to
    /// the wait, and reclamation held up (by a reader descheduled while
    /// pinned) would otherwise grow the table by every eviction meanwhile.
    /// False if the shard is not held.
    pub fn reclaim_behind(&self, hash: u64) -> bool {
        let shard = self.table.shard_of(hash);
        self.inner(shard)
            .is_some_and(|inner| self.table.shards[shard].reclaim_behind(inner))
    }

    /// Announces an insert into the shard of `hash` (held by this writer):
    /// the shard's published count includes it from now until the insert
    /// (which keeps it) or [`Writer::unreserve`] or the writer's end (which
    /// take it back, counted in [`Table::withdrawals`]). For a commit that
    /// decided without a place at the gate that the table has room: a sum
    /// taken while it waits (however long it is descheduled) counts its
    /// insert.
    pub fn reserve(&mut self, hash: u64) {
        let shard = self.table.shard_of(hash);
        if let Some(inner) = self.inner_mut(shard)
            && !inner.reserved
        {
            inner.reserved = true;
            if !inner.hidden {
                let n = inner.published();
                self.table.shards[shard]
                    .hot
                    .live
                    .store(n, Ordering::Release);
            }
        }
    }

    /// Takes back an insert announced with [`Writer::reserve`] (counted in
    /// [`Table::withdrawals`]).
    pub fn unreserve(&mut self, hash: u64) {
        let shard = self.table.shard_of(hash);
        if let Some(inner) = self.inner_mut(shard)
            && inner.reserved
        {
            inner.reserved = false;
            if !inner.hidden {
                let n = inner.published();
                self.table.shards[shard]
                    .hot
                    .live
                    .store(n, Ordering::Release);
            }
            self.table.withdraw();
        }
    }

    /// True if a record stored under `hash` would find a free index entry
    /// within the probe bound of its shard (held by this writer) without
    /// the index growing: false means the buckets from its home on are
    /// full, and an early drop there ([`Writer::evict_near`]) makes room.
    pub fn has_room(&mut self, hash: u64) -> bool {
        let shard = self.table.shard_of(hash);
        if !self.holds(shard) {
            return true;
        }
        let room = self.table.index(shard, self.guard).has_room(hash);
        if room {
            self.room = Some(hash);
        }
        room
    }

    /// Early drop from the hash neighbourhood, as Linux's conntrack does
    /// it: looks at the records indexed in the home bucket of `hash` and
    /// the buckets after it in the shard of `hash` (which this writer must
    /// hold), [`NEAR_WINDOW`] buckets at a time, nearest first, up to
    /// `buckets` buckets (at most the lookup's probe bound), both
    /// directions' entries, and removes the first for which `pick` holds
    /// (checked again under its entry lock). A flood fills the
    /// neighbourhood of every key with its own entries, so a newcomer
    /// finds one of them next to it, whatever their age; the zone's oldest
    /// ([`Writer::evict`]) may all be established.
    ///
    /// Evicting where the newcomer will be stored keeps the index as it
    /// was: a victim taken from elsewhere leaves the newcomer's region one
    /// entry fuller, and under a long flood such regions grow into runs of
    /// full buckets as long as the probe bound (every lookup there walks
    /// them all; inserts there fail). Looking on past the first window (12
    /// buckets in all) kept the longest probe at its value before the
    /// flood in a model of 2 million evictions at 85% load, where four or
    /// eight buckets let it reach the bound.
    ///
    /// If none qualifies there, the first window at the same place in each
    /// of the next `shards - 1` shards is looked at: the table's limit is
    /// global, and a small table's shard may hold a handful of records, all
    /// established, while its neighbours hold the flood's. Records of
    /// shards this writer does not hold are removed only if their locks
    /// are free. `foreign` is called before a record whose home is not the
    /// shard of `hash` (reached through an alias, or next door) is removed.
    /// Returns true if one was removed.
    pub fn evict_near<C: Context<R>>(
        &mut self,
        ctx: &C,
        hash: u64,
        buckets: usize,
        shards: usize,
        mut pick: impl FnMut(&R) -> bool,
        mut foreign: impl FnMut(),
    ) -> bool {
        let table = self.table;
        let home = table.shard_of(hash);
        if !self.holds(home) {
            return false;
        }
        let bound = table.index(home, self.guard).probe_bound();
        let mut from = 0;
        while from < buckets.min(bound) {
            let window = NEAR_WINDOW.min(buckets - from);
            if self.evict_in(ctx, home, hash, from, window, &mut pick, &mut foreign) {
                return true;
            }
            from += window;
        }
        (1..shards.clamp(1, table.shard_count()))
            .map(|k| (home + k) & table.mask)
            .any(|shard| self.evict_in(ctx, shard, hash, 0, NEAR_WINDOW, &mut pick, &mut foreign))
    }

    /// [`Writer::evict_near`] in buckets `from..from + buckets` after the
    /// home of `hash` in one shard. The index of a shard this writer does
    /// not hold is read without its lock: a reference may be stale, and
    /// each candidate is checked again under its locks.
    #[allow(clippy::too_many_arguments)]
    fn evict_in<C: Context<R>>(
        &mut self,
        ctx: &C,
        shard: usize,
        hash: u64,
        from: usize,
        buckets: usize,
        pick: &mut impl FnMut(&R) -> bool,
        foreign: &mut impl FnMut(),
    ) -> bool {
        let home = self.table.shard_of(hash);
        let table = self.table;
        let mut candidates = [0u32; MAX_NEAR];
        let mut n = 0;
        table
            .index(shard, self.guard)
            .neighbourhood(hash, from, buckets, |reference| {
                candidates[n] = reference;
                n += 1;
                n == MAX_NEAR
            });
        // The candidates' records are cache misses, one each: ask for
        // them a window ahead, so that they load side by side rather than
        // one after the other (the scan was most of a flood's cost).
        let sh = &table.shards[shard];
        let ahead = |i: usize| {
            if let Some(&r) = candidates[..n].get(i)
                && r & ALIAS_BIT == 0
            {
                prefetch_lines(sh.slab.addr(r));
            }
        };
        (0..PREFETCH_AHEAD).for_each(ahead);
        for (i, &reference) in candidates[..n].iter().enumerate() {
            ahead(i + PREFETCH_AHEAD);
            let Some(e) = table.resolve(shard, reference) else {
                continue;
            };
            if !e.is_live() || !pick(e.rec) {
                continue;
            }
            if e.id.shard() != home {
                foreign();
            }
            if self.remove_if(ctx, e, Removal::Evicted, |r| pick(r)) {
                return true;
            }
        }
        false
    }
}

/// Buckets an early drop looks at together: their 48 entries are the
/// candidates it prefetches and checks as one batch.
pub const NEAR_WINDOW: usize = 4;
/// The most index entries one window of an early drop holds.
const MAX_NEAR: usize = 64;
/// How many candidates ahead of the one examined an early drop prefetches.
const PREFETCH_AHEAD: usize = 8;

impl<R: Record> Drop for Writer<'_, R> {
    fn drop(&mut self) {
        // A count hidden, or an insert announced, that no insert settled:
        // publish the count as it is.
        for (shard, inner) in self.held.iter_mut().flatten() {
            if inner.hidden || inner.reserved {
                let withdrawn = inner.reserved;
                inner.hidden = false;
                inner.reserved = false;
                self.table.shards[*shard]
                    .hot
                    .live
                    .store(inner.published(), Ordering::Release);
                if withdrawn {
                    self.table.withdraw();
                }
            }
        }
        // Release in reverse order of acquisition.
        self.held[1] = None;
        self.held[0] = None;
    }
}

impl<R: Record> Table<R> {
    /// Allocates an alias in shard `a` naming record `id` and stores it
    /// under `sec` in that shard's index (`inner` is the shard's state).
    /// On failure nothing of it remains.
    fn insert_alias(
        &self,
        guard: &Guard,
        a: usize,
        sec: u64,
        id: RecordId,
        inner: &mut Inner,
    ) -> Result<(), InsertError> {
        let ash = &self.shards[a];
        let no = ash.alloc_alias(inner, guard).ok_or(InsertError::NoSlot)?;
        if let Some(cell) = ash.aliases.get(no) {
            cell.store(id.as_u32(), Ordering::Release);
        }
        if self.index(a, guard).insert(sec, no | ALIAS_BIT).is_err() {
            if let Some(cell) = ash.aliases.get(no) {
                cell.store(0, Ordering::Release);
            }
            inner.alias_free_unseen(no);
            return Err(InsertError::IndexFull);
        }
        ash.count_insert();
        Ok(())
    }
}

/// The writer's own bookkeeping, one table at a time: when an insert grows
/// the index, where it files a record and whom it tells, what an early
/// drop looks at, and the counts a writer hides or reports. The races are
/// `tests/loom.rs`'s; the table's other single-threaded tests are in
/// `tests.rs`.
#[cfg(test)]
mod tests {
    use std::cell::RefCell;

    use super::*;
    use crate::index::{BUCKET_ENTRIES, MAX_PROBE_BUCKETS};
    use crate::testing::{Ctx, MIXED, Rec, mix};
    use crate::{GRACE_SLOTS_PER_SHARD, TableConfig, pin};

    /// Keys under 10,000 hash into the first bucket of a one-shard table's
    /// index (tags differing); those under 20,000 three quarters of the way
    /// in; the rest into the first bucket of 128, the second of 256.
    fn bucketed(k: u64) -> u64 {
        let tag = k & 0xff;
        match k {
            ..10_000 => tag,
            10_000..20_000 => (0xc000_0000 << 8) | tag,
            _ => (1 << 32) | tag,
        }
    }

    const BUCKETED: Ctx = Ctx::<fn(u64) -> u64>::new(bucketed);

    /// Keys in shard `k % 4` of four, all in the first bucket.
    fn quartered(k: u64) -> u64 {
        ((k % 4) << 56) | (k & 0xff)
    }

    const QUARTERED: Ctx = Ctx::<fn(u64) -> u64>::new(quartered);

    fn one_shard(capacity: usize) -> Table<Rec> {
        Table::new(TableConfig {
            shards: 1,
            capacity,
        })
    }

    fn put<H: Fn(u64) -> u64>(
        t: &Table<Rec>,
        ctx: &Ctx<H>,
        key: u64,
        alt: u64,
        inst: u64,
        now: u64,
    ) {
        let g = pin();
        let h = ctx.hashes_of(key, alt);
        t.write(&g, &h)
            .insert(ctx, &h, now, |r| r.fill(key, alt, inst, u64::MAX, key))
            .expect("insert");
    }

    fn has<H: Fn(u64) -> u64>(t: &Table<Rec>, ctx: &Ctx<H>, key: u64) -> bool {
        let g = pin();
        t.find(&g, ctx.hash(key), |r| r.has_key(key)).is_some()
    }

    fn buckets(t: &Table<Rec>) -> usize {
        t.memory().index_bytes / 64
    }

    /// A one-shard table of 128 buckets whose first `MAX_PROBE_BUCKETS`
    /// (every bucket a lookup from the first may visit) are full: more
    /// than half its entries, less than nine tenths.
    fn a_full_run() -> Table<Rec> {
        let t = one_shard(1300);
        assert_eq!(buckets(&t), 128);
        for k in 1..=(MAX_PROBE_BUCKETS * BUCKET_ENTRIES) as u64 {
            put(&t, &BUCKETED, k, 0, 0, 0);
        }
        assert_eq!(buckets(&t), 128, "the run filled without growing");
        t
    }

    /// A writer tells a full run from room, and an insert into the full
    /// run doubles the index rather than fail, whether or not the writer
    /// looked for room first (what it found for another hash does not
    /// count for this one).
    #[test]
    #[cfg_attr(miri, ignore = "hundreds of inserts: 30 s to 2 min under Miri")]
    fn an_insert_into_a_full_run_grows_the_index() {
        let t = a_full_run();
        let g = pin();
        let key = 20_001;
        let h = BUCKETED.hashes_of(key, 0);
        let mut w = t.write(&g, &h);
        assert_eq!(format!("{w:?}"), "Writer { shards: [0] }");
        assert!(
            !w.has_room(h.primary),
            "the run from the first bucket is full"
        );
        assert!(w.has_room(bucketed(10_001)), "there is room further on");
        w.insert(&BUCKETED, &h, 0, |r| r.fill(key, 0, 0, u64::MAX, 0))
            .expect("the index grew");
        drop(w);
        assert_eq!(buckets(&t), 256);
        let run = (MAX_PROBE_BUCKETS * BUCKET_ENTRIES) as u64;
        assert!((1..=run).chain([key]).all(|k| has(&t, &BUCKETED, k)));
        // Without a look for room first.
        let t = a_full_run();
        put(&t, &BUCKETED, key, 0, 0, 0);
        assert_eq!(buckets(&t), 256);
    }

    /// A record whose reply key falls in the full run of its own shard
    /// grows the index for its alias, though its own entry has room.
    #[test]
    #[cfg_attr(miri, ignore = "hundreds of inserts: 30 s to 2 min under Miri")]
    fn an_alias_into_a_full_run_of_its_shard_grows_the_index() {
        let t = a_full_run();
        let alt = 20_001;
        put(&t, &BUCKETED, 10_001, alt, 0, 0);
        assert_eq!(buckets(&t), 256);
        assert!(has(&t, &BUCKETED, 10_001) && has(&t, &BUCKETED, alt));
    }

    /// A full run is grown for only in an index more than half full
    /// (counting the insert): in one emptier, a run is keys chosen to
    /// collide, and the insert is refused rather than let them double the
    /// index at will. 129 buckets hold 1,548 entries; the run 768 of them.
    #[test]
    #[cfg_attr(miri, ignore = "hundreds of inserts: 30 s to 2 min under Miri")]
    fn a_full_run_grows_the_index_only_past_half_full() {
        let t = one_shard(1310);
        assert_eq!(buckets(&t), 129);
        for k in (1..=(MAX_PROBE_BUCKETS * BUCKET_ENTRIES) as u64).chain(10_001..=10_005) {
            put(&t, &BUCKETED, k, 0, 0, 0);
        }
        // 774 entries with it: half, not more.
        let g = pin();
        let h = BUCKETED.hashes_of(20_001, 0);
        let refused = t
            .write(&g, &h)
            .insert(&BUCKETED, &h, 0, |r| r.fill(20_001, 0, 0, u64::MAX, 0))
            .map(|e| e.id());
        assert_eq!(refused, Err(InsertError::IndexFull));
        assert_eq!(buckets(&t), 129);
        put(&t, &BUCKETED, 10_006, 0, 0, 0);
        put(&t, &BUCKETED, 20_001, 0, 0, 0);
        assert_eq!(buckets(&t), 258);
    }

    /// An index grows when an insert would take it past nine tenths
    /// full, not at nine tenths: 10 buckets hold 120 entries, 108 of them
    /// without growing.
    #[test]
    fn an_index_grows_past_nine_tenths_full() {
        let t = one_shard(100);
        assert_eq!(buckets(&t), 10);
        for k in 1..=108 {
            put(&t, &MIXED, k, 0, 0, 0);
        }
        assert_eq!(buckets(&t), 10);
        put(&t, &MIXED, 109, 0, 0, 0);
        assert_eq!(buckets(&t), 20);
    }

    /// Reserving room an index already has leaves it as it is: readers
    /// keep it, nothing is rebuilt.
    #[test]
    #[cfg(not(miri))]
    fn reserving_room_the_index_has_rebuilds_nothing() {
        let t = one_shard(100);
        let g = pin();
        let before: *const crate::index::Index = t.index_of(0, &g);
        t.reserve(&MIXED, &g, 100);
        assert!(core::ptr::eq(before, t.index_of(0, &g)));
        t.reserve(&MIXED, &g, 200);
        assert!(!core::ptr::eq(before, t.index_of(0, &g)));
        assert_eq!(buckets(&t), 20);
    }

    /// A record inserted already expired is due at the end of the tick it
    /// was inserted in, though the wheel's clock (started by the first
    /// insert, never swept since) is behind it: not earlier, and not a lap
    /// later.
    #[test]
    fn an_expired_insert_is_due_at_the_end_of_its_tick() {
        let t = one_shard(64);
        let g = pin();
        put(&t, &MIXED, 1, 0, 0, 0);
        let h = MIXED.hashes_of(2, 0);
        t.write(&g, &h)
            .insert(&MIXED, &h, 5_500, |r| r.fill(2, 0, 0, 1_000, 0))
            .expect("insert");
        assert_eq!(t.next_due(), Some(6_000));
        let s = t.sweep(&MIXED, &g, 6_000, usize::MAX);
        assert_eq!(s.removed, 1);
        assert!(!has(&t, &MIXED, 2) && has(&t, &MIXED, 1));
    }

    /// [`MIXED`], telling each occupancy change.
    struct Occupancy(RefCell<Vec<(u64, usize, bool)>>);

    impl Context<Rec> for Occupancy {
        fn hashes(&self, r: &Rec, g: &Guard) -> Hashes {
            MIXED.hashes(r, g)
        }
        fn instance(&self, r: &Rec) -> u64 {
            r.inst
        }
        fn expiry(&self, r: &Rec, g: &Guard) -> u64 {
            MIXED.expiry(r, g)
        }
        fn occupancy(&self, instance: u64, shard: usize, occupied: bool) {
            self.0.borrow_mut().push((instance, shard, occupied));
        }
    }

    /// A shard says when it gets its first record of a zone instance and
    /// when it loses its last, once each.
    #[test]
    fn a_shard_tells_its_first_and_last_record_of_a_zone() {
        let t = one_shard(64);
        let ctx = Occupancy(RefCell::default());
        let g = pin();
        for (key, inst) in [(1, 7), (2, 7), (3, 8)] {
            let h = MIXED.hashes_of(key, 0);
            t.write(&g, &h)
                .insert(&ctx, &h, 0, |r| r.fill(key, 0, inst, u64::MAX, 0))
                .expect("insert");
        }
        assert_eq!(*ctx.0.borrow(), [(7, 0, true), (8, 0, true)]);
        for key in [1, 2] {
            let e = t.find(&g, mix(key), |r| r.key == key).unwrap();
            let h = MIXED.hashes_of(key, 0);
            assert!(t.write(&g, &h).remove(&ctx, e, Removal::Deleted));
        }
        assert_eq!(*ctx.0.borrow(), [(7, 0, true), (8, 0, true), (7, 0, false)]);
    }

    /// An eviction by age looks at exactly `scan` of the zone's oldest and
    /// `scan` of its newest, and at no more than 32 of each however many
    /// it is asked to (its candidates fit one array).
    #[test]
    fn an_eviction_by_age_looks_at_scan_records_at_each_end() {
        let t = one_shard(256);
        for k in 1..=100 {
            put(&t, &MIXED, k, 0, 4, 0);
        }
        let g = pin();
        let h = MIXED.hashes_of(1_000, 0);
        let mut w = t.write(&g, &h);
        let evict = |w: &mut Writer<'_, Rec>, scan, key| {
            w.evict(&MIXED, h.primary, 4, scan, |r: &Rec| r.key == key)
        };
        // Oldest 1, 2, 3; newest 100, 99, 98.
        assert!(!evict(&mut w, 3, 4));
        assert!(!evict(&mut w, 3, 97));
        assert!(evict(&mut w, 3, 3));
        assert!(evict(&mut w, 3, 98));
        // Asked for 1,000: 32 at each end (1..=33 less 3; 100 down to 68
        // less 98).
        assert!(!evict(&mut w, 1_000, 50));
        assert!(!evict(&mut w, 1_000, 34));
        assert!(evict(&mut w, 1_000, 33));
        assert!(!evict(&mut w, 1_000, 67));
        assert!(evict(&mut w, 1_000, 68));
        drop(w);
        assert_eq!(t.len(), 96);
    }

    /// Removals under a hidden count leave the table's sum as it was until
    /// the writer inserts there (the insert makes up for them) or ends.
    #[test]
    fn a_hidden_count_shows_again_at_an_insert_or_the_writers_end() {
        let t = one_shard(64);
        for k in 1..=4 {
            put(&t, &MIXED, k, 0, 4, 0);
        }
        let g = pin();
        let h = MIXED.hashes_of(10, 0);
        let mut w = t.write(&g, &h);
        w.hide_count(h.primary);
        assert!(w.evict(&MIXED, h.primary, 4, 8, |r| r.key == 1));
        assert_eq!(t.len(), 4, "an eviction under a hidden count");
        w.insert(&MIXED, &h, 0, |r| r.fill(10, 0, 4, u64::MAX, 0))
            .expect("insert");
        assert_eq!(t.len(), 4, "the insert that took its room");
        assert!(w.evict(&MIXED, h.primary, 4, 8, |r| r.key == 2));
        assert_eq!(t.len(), 3, "a removal after the insert");
        w.hide_count(h.primary);
        assert!(w.evict(&MIXED, h.primary, 4, 8, |r| r.key == 3));
        assert_eq!(t.len(), 3);
        drop(w);
        assert_eq!(t.len(), 2, "the writer's end");
    }

    /// A writer tells when its shard has no vacant slot and
    /// `GRACE_SLOTS_PER_SHARD` removed ones wait for a reader pinned
    /// before their removal.
    #[test]
    #[cfg_attr(miri, ignore = "hundreds of inserts: 30 s to 2 min under Miri")]
    fn a_writer_tells_when_reclamation_is_behind() {
        let n = GRACE_SLOTS_PER_SHARD as u64;
        let t = one_shard(2 * n as usize);
        for k in 1..=n {
            put(&t, &MIXED, k, 0, 0, 0);
        }
        let g = pin();
        let h = MIXED.hashes_of(n + 1, 0);
        assert!(!t.write(&g, &h).reclaim_behind(h.primary));
        for k in 1..n {
            assert!(MIXED.remove(&t, k));
        }
        assert!(!t.write(&g, &h).reclaim_behind(h.primary), "one short");
        assert!(MIXED.remove(&t, n));
        assert!(t.write(&g, &h).reclaim_behind(h.primary));
    }

    /// An early drop looks through `buckets` buckets from the key's home
    /// and no further, then at the first window of each of the next
    /// `shards - 1` shards (wrapping around), and tells of a victim outside
    /// its home shard, only of one it removes.
    #[test]
    fn an_early_drop_looks_near_then_next_door() {
        let t = Table::<Rec>::new(TableConfig {
            shards: 4,
            capacity: 4096,
        });
        let g = pin();
        // Shard 3 holds 3 and 7 at home; shard 0 holds 4, shard 1 holds 5.
        for k in [3, 7, 4, 5] {
            put(&t, &QUARTERED, k, 0, 1, 0);
        }
        let h = QUARTERED.hashes_of(11, 0);
        let mut w = t.write(&g, &h);
        let mut foreign = 0;
        let mut near = |w: &mut Writer<'_, Rec>, buckets, shards, key: u64| {
            w.evict_near(
                &QUARTERED,
                h.primary,
                buckets,
                shards,
                |r| r.key == key,
                || foreign += 1,
            )
        };
        assert!(!near(&mut w, 12, 1, 4), "home shard only");
        assert!(!near(&mut w, 12, 2, 5), "shard 0 only");
        assert!(near(&mut w, 12, 2, 4), "shard 0, next after 3");
        assert!(near(&mut w, 12, 3, 5), "shard 1");
        assert!(near(&mut w, 12, 1, 7), "at home");
        assert_eq!(foreign, 2);
        drop(w);
        assert!(!has(&t, &QUARTERED, 4) && !has(&t, &QUARTERED, 5) && !has(&t, &QUARTERED, 7));
        assert!(has(&t, &QUARTERED, 3));
    }

    /// An early drop's windows end at `buckets`, the last one short when
    /// `buckets` is no multiple of [`NEAR_WINDOW`], and a search that finds
    /// nothing ends.
    #[test]
    fn an_early_drop_stops_at_its_last_bucket() {
        // Key b homes in bucket b of a one-shard table of 128 buckets.
        let ctx = Ctx::new(|b: u64| (b << 33) | 1);
        let t = one_shard(1300);
        assert_eq!(buckets(&t), 128);
        for b in [5, 6] {
            put(&t, &ctx, b, 0, 0, 0);
        }
        let g = pin();
        let h = ctx.hashes_of(0, 0);
        let mut w = t.write(&g, &h);
        let mut near =
            |buckets, key: u64| w.evict_near(&ctx, h.primary, buckets, 1, |r| r.key == key, || {});
        assert!(!near(5, 5), "buckets 0 to 4");
        assert!(!near(6, 6), "buckets 0 to 5");
        assert!(near(6, 5));
        assert!(!near(usize::MAX, 99), "nothing qualifies");
        assert!(near(usize::MAX, 6));
    }
}
