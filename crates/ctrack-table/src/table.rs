//! The table: shards, lookups without locks, writers that hold the locks of
//! the shards they touch, expiry, and reclamation of whole zone instances.

use core::fmt;
use core::ops::Deref;

use crate::arena::Arena;
use crate::epoch::Guard;
use crate::index::{ALIAS_BIT, BUCKET_ENTRIES, Index};
use crate::shard::{Inner, Links, List, Shard, TICK_MS, rec};
use crossbeam_utils::CachePadded;

use crate::sync::{AtomicI64, AtomicU64, MutexGuard, Ordering};
use crate::{Context, Hashes, Record, Removal};

/// Most shards a table may have (a record id holds six bits of shard).
pub const MAX_SHARDS: usize = 64;
const SLOT_BITS: u32 = 23;
const SLOT_MASK: u32 = (1 << SLOT_BITS) - 1;
/// Index buckets are sized so that a table holding its capacity has this
/// many records per hundred entries.
const TARGET_LOAD_PERCENT: usize = 85;

/// Names a record while it lives: its shard and slot. After the record is
/// removed the id may name a later record; compare keys to be sure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RecordId(u32);

impl RecordId {
    fn new(shard: usize, slot: u32) -> RecordId {
        debug_assert!(shard < MAX_SHARDS && slot <= SLOT_MASK);
        RecordId(((shard as u32) << SLOT_BITS) | slot)
    }

    /// The shard.
    pub fn shard(self) -> usize {
        (self.0 >> SLOT_BITS) as usize
    }

    fn slot(self) -> u32 {
        self.0 & SLOT_MASK
    }

    /// The id as a number (29 bits).
    pub fn as_u32(self) -> u32 {
        self.0
    }

    /// The id from [`RecordId::as_u32`].
    pub fn from_u32(v: u32) -> RecordId {
        RecordId(v)
    }
}

/// Sizing.
#[derive(Debug, Clone, Copy)]
pub struct TableConfig {
    /// Number of shards: a power of two, at most [`MAX_SHARDS`]. More
    /// shards mean less lock contention between writers and more fixed
    /// memory.
    pub shards: usize,
    /// Records the table is sized for: index buckets are allocated up front
    /// (zeroed, so untouched pages cost nothing) for this many at 85% load.
    /// More may be inserted; lookups slow down as the load grows.
    pub capacity: usize,
}

impl Default for TableConfig {
    fn default() -> Self {
        TableConfig {
            shards: MAX_SHARDS,
            capacity: 1 << 16,
        }
    }
}

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

/// What a sweep did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SweepStats {
    /// Records looked at.
    pub examined: usize,
    /// Records removed because they had expired.
    pub removed: usize,
    /// True if the budget ran out before everything due was processed.
    pub more: bool,
}

/// Memory held by a table, from its own accounting.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MemoryStats {
    /// Index buckets (allocated; pages never touched are not resident).
    pub index_bytes: usize,
    /// Record slots allocated.
    pub record_bytes: usize,
    /// Alias slots allocated.
    pub alias_bytes: usize,
    /// Wheels, zone-list heads and shard headers.
    pub other_bytes: usize,
    /// Slots handed out (live or in their grace period).
    pub slots_in_use: usize,
    /// Address space the arena reserved for index and records.
    pub arena_bytes: usize,
}

impl MemoryStats {
    /// Everything.
    pub fn total(&self) -> usize {
        self.index_bytes + self.record_bytes + self.alias_bytes + self.other_bytes
    }
}

/// A concurrent table of `R`s. See the crate documentation.
pub struct Table<R: Record> {
    // Dropped before `arena`, whose memory they use.
    shards: Box<[Shard<R>]>,
    mask: usize,
    sweep_start: AtomicU64,
    /// Sum of the shards' counts, each shard adding its changes in steps of
    /// [`APPROX_STEP`]: within `shards * APPROX_STEP` of the truth.
    approx: CachePadded<AtomicI64>,
    arena: Arena,
}

/// How far a shard's count may drift before it updates the table's
/// approximate count: the shared line is written once per this many
/// inserts or removals of a shard, not on every one.
pub const APPROX_STEP: i64 = 32;

impl<R: Record> fmt::Debug for Table<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Table")
            .field("shards", &self.shards.len())
            .field("len", &self.len())
            .finish()
    }
}

/// Prefetches every cache line a record at `p` touches (a 120-byte record
/// straddles three lines more often than two).
#[inline(always)]
fn prefetch_lines<R>(p: *const R) {
    if p.is_null() {
        return;
    }
    let start = p as usize;
    let end = start + core::mem::size_of::<R>() - 1;
    let mut line = start & !63;
    while line <= end {
        crate::prefetch(line as *const u8);
        line += 64;
    }
}

/// Where a lookup expects to find its record, from [`Table::probe`]. A
/// hint is only a guess: the record it names is checked like any other.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Hint(u32);

/// A live record found in the table, valid while the guard it was found
/// under is pinned.
pub struct EntryRef<'g, R> {
    id: RecordId,
    rec: &'g R,
}

impl<R> Clone for EntryRef<'_, R> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<R> Copy for EntryRef<'_, R> {}

impl<R> fmt::Debug for EntryRef<'_, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EntryRef").field("id", &self.id).finish()
    }
}

impl<'g, R: Record> EntryRef<'g, R> {
    /// The record's id.
    pub fn id(&self) -> RecordId {
        self.id
    }

    /// The record. Fields the table's writers change (through
    /// [`EntryLock`]) may change while it is read.
    pub fn record(&self) -> &'g R {
        self.rec
    }

    /// True while the record is in the table.
    pub fn is_live(&self) -> bool {
        self.rec.header().is_live()
    }

    /// Takes the record's lock; `None` if the record was removed since it
    /// was found. Never take a shard lock (a [`Writer`]) while holding it.
    #[inline]
    pub fn lock(&self) -> Option<EntryLock<'g, R>> {
        self.rec.header().lock()?;
        Some(EntryLock { rec: self.rec })
    }
}

/// A record's lock, held: the record stays in the table until it is
/// released.
pub struct EntryLock<'g, R: Record> {
    rec: &'g R,
}

impl<R: Record> fmt::Debug for EntryLock<'_, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EntryLock").finish_non_exhaustive()
    }
}

impl<R: Record> Deref for EntryLock<'_, R> {
    type Target = R;
    fn deref(&self) -> &R {
        self.rec
    }
}

impl<R: Record> Drop for EntryLock<'_, R> {
    fn drop(&mut self) {
        self.rec.header().unlock();
    }
}

impl<R: Record> Table<R> {
    /// An empty table.
    pub fn new(cfg: TableConfig) -> Table<R> {
        let n = cfg.shards.clamp(1, MAX_SHARDS).next_power_of_two();
        let buckets = Self::buckets_for(cfg.capacity, n);
        let share = cfg.capacity.div_ceil(n);
        let arena = Arena::default();
        Table {
            shards: (0..n).map(|_| Shard::new(buckets, share, &arena)).collect(),
            mask: n - 1,
            sweep_start: AtomicU64::new(0),
            approx: CachePadded::new(AtomicI64::new(0)),
            arena,
        }
    }

    fn buckets_for(capacity: usize, shards: usize) -> usize {
        let per_shard = capacity.div_ceil(shards);
        let entries = per_shard.saturating_mul(100) / TARGET_LOAD_PERCENT;
        entries.div_ceil(BUCKET_ENTRIES).max(1)
    }

    /// Number of shards.
    pub fn shard_count(&self) -> usize {
        self.shards.len()
    }

    /// The shard a hash belongs to (its top bits).
    #[inline]
    pub fn shard_of(&self, hash: u64) -> usize {
        ((hash >> 58) as usize) & self.mask
    }

    fn index<'g>(&self, shard: usize, guard: &'g Guard) -> &'g Index
    where
        R: 'g,
    {
        // The index pointer is set at construction and only ever replaced.
        let ix: Option<&'g Index> = self.shards[shard].index.get(guard);
        ix.expect("every shard has an index")
    }

    #[inline]
    fn resolve<'g>(&'g self, shard: usize, reference: u32) -> Option<EntryRef<'g, R>> {
        let id = if reference & ALIAS_BIT != 0 {
            let owner = self.shards[shard]
                .aliases
                .get(reference & !ALIAS_BIT)?
                .load(Ordering::Acquire);
            if owner == 0 {
                return None;
            }
            RecordId(owner)
        } else {
            RecordId::new(shard, reference)
        };
        let rec = self.shards.get(id.shard())?.slab.get(id.slot())?;
        Some(EntryRef { id, rec })
    }

    /// Finds a live record stored under `hash` for which `matches` holds.
    /// Takes no lock and writes nothing shared.
    #[inline]
    pub fn find<'g>(
        &'g self,
        guard: &'g Guard,
        hash: u64,
        mut matches: impl FnMut(&R) -> bool,
    ) -> Option<EntryRef<'g, R>> {
        let shard = self.shard_of(hash);
        self.index(shard, guard).find(hash, |reference| {
            let e = self.resolve(shard, reference)?;
            (e.is_live() && matches(e.rec)).then_some(e)
        })
    }

    /// The live record named by `id`.
    pub fn get<'g>(&'g self, guard: &'g Guard, id: RecordId) -> Option<EntryRef<'g, R>> {
        let _ = guard;
        let rec = self.shards.get(id.shard())?.slab.get(id.slot())?;
        rec.header().is_live().then_some(EntryRef { id, rec })
    }

    /// Asks the processor to fetch the index bucket `hash` starts in.
    #[inline]
    pub fn prefetch(&self, guard: &Guard, hash: u64) {
        let shard = self.shard_of(hash);
        crate::prefetch(self.index(shard, guard).bucket_addr(hash));
    }

    /// Guesses where the record stored under `hash` is (the first entry of
    /// its home bucket with its tag) and asks the processor to fetch it.
    /// The home bucket should have been prefetched some time before with
    /// [`Table::prefetch`]; the guess goes to [`Table::find_hinted`].
    #[inline]
    pub fn probe(&self, guard: &Guard, hash: u64) -> Hint {
        let shard = self.shard_of(hash);
        let r = self.index(shard, guard).first(hash);
        if r != 0 {
            prefetch_lines(self.shards[shard].slab.addr(r));
        }
        Hint(r)
    }

    /// [`Table::find`], trying the record `hint` guessed first.
    #[inline]
    pub fn find_hinted<'g>(
        &'g self,
        guard: &'g Guard,
        hash: u64,
        hint: Hint,
        mut matches: impl FnMut(&R) -> bool,
    ) -> Option<EntryRef<'g, R>> {
        if hint.0 != 0
            && let Some(e) = self.resolve(self.shard_of(hash), hint.0)
            && e.is_live()
            && matches(e.rec)
        {
            return Some(e);
        }
        self.find(guard, hash, matches)
    }

    /// Asks the processor to fetch record `id`.
    #[inline]
    pub fn prefetch_record(&self, id: RecordId) {
        if let Some(s) = self.shards.get(id.shard()) {
            prefetch_lines(s.slab.addr(id.slot()));
        }
    }

    /// Locks the shards that records with `hashes` live in, in increasing
    /// shard order.
    pub fn write<'g>(&'g self, guard: &'g Guard, hashes: &Hashes) -> Writer<'g, R> {
        let a = self.shard_of(hashes.primary);
        let b = hashes.secondary.map_or(a, |h| self.shard_of(h));
        self.lock_pair(guard, a, b)
    }

    fn lock_pair<'g>(&'g self, guard: &'g Guard, a: usize, b: usize) -> Writer<'g, R> {
        let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
        let first = (lo, self.shards[lo].inner.lock());
        let second = (hi != lo).then(|| (hi, self.shards[hi].inner.lock()));
        Writer {
            table: self,
            guard,
            held: [Some(first), second],
        }
    }

    /// Removes record `id` whose entry lock the caller turned to dead.
    /// `home` is its shard's state; `alias` the state of the shard of its
    /// secondary entry when that is another shard.
    #[allow(clippy::too_many_arguments)]
    fn unlink_dead<C: Context<R>>(
        &self,
        ctx: &C,
        guard: &Guard,
        id: RecordId,
        r: &R,
        home: &mut Inner,
        alias: Option<&mut Inner>,
        why: Removal,
    ) {
        let hashes = ctx.hashes(r, guard);
        let shard = id.shard();
        let hs = &self.shards[shard];
        self.index(shard, guard).remove(hashes.primary, id.slot());
        if let Some(sec) = hashes.secondary {
            let a_shard = self.shard_of(sec);
            let inner = match alias {
                Some(i) => i,
                None => &mut *home,
            };
            self.remove_alias(guard, a_shard, sec, id, inner);
        }
        let inst = ctx.instance(r);
        if let Some(list) = home.zones.get_mut(&inst) {
            hs.unlink(list, id.slot(), Links::Zone);
            if list.len == 0 {
                home.zones.remove(&inst);
                ctx.occupancy(inst, shard, false);
            }
        }
        hs.unfile(home, id.slot());
        ctx.removed(r, why);
        r.retire(guard);
        home.live -= 1;
        hs.live.store(home.live as u64, Ordering::Relaxed);
        self.count_change(home, -1);
        hs.retire_slot(home, guard, id.slot());
    }

    fn remove_alias(
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
            (sh.aliases.get(a)?.load(Ordering::Acquire) == owner.0).then_some(a)
        });
        if let Some(a) = found {
            ix.remove(hash, a | ALIAS_BIT);
            if let Some(cell) = sh.aliases.get(a) {
                cell.store(0, Ordering::Release);
            }
            sh.retire_alias(inner, guard, a);
        }
    }

    /// Removes expired records, looking at no more than `budget`. Shards
    /// are visited round-robin from call to call, so that small budgets
    /// still reach every shard.
    pub fn sweep<C: Context<R>>(
        &self,
        ctx: &C,
        guard: &Guard,
        now: u64,
        budget: usize,
    ) -> SweepStats {
        let mut out = SweepStats::default();
        let n = self.shards.len();
        let start = self.sweep_start.fetch_add(1, Ordering::Relaxed) as usize;
        for i in 0..n {
            let shard = (start + i) & self.mask;
            if self.shards[shard].next_due.load(Ordering::Relaxed) > now {
                continue;
            }
            if out.examined >= budget {
                out.more = true;
                break;
            }
            self.sweep_shard(ctx, guard, shard, now, budget - out.examined, &mut out);
        }
        out
    }

    fn sweep_shard<C: Context<R>>(
        &self,
        ctx: &C,
        guard: &Guard,
        shard: usize,
        now: u64,
        budget: usize,
        out: &mut SweepStats,
    ) {
        let sh = &self.shards[shard];
        let mut deferred = Vec::new();
        {
            let mut inner = sh.inner.lock();
            let mut examined = 0;
            while let Some((slot, tick)) = sh.due(&mut inner, now) {
                if examined >= budget {
                    out.more = true;
                    break;
                }
                examined += 1;
                let r = rec(&sh.slab, slot);
                let id = RecordId::new(shard, slot);
                if ctx.expiry(r, guard) > now {
                    sh.unfile(&mut inner, slot);
                    sh.file(&mut inner, slot, ctx.expiry(r, guard), tick + 1);
                    continue;
                }
                let alias_shard = ctx.hashes(r, guard).secondary.map(|h| self.shard_of(h));
                match alias_shard {
                    Some(a) if a != shard => {
                        // Its alias lives in another shard: lock that one
                        // in order if we can, else finish it below.
                        let other = if a > shard {
                            Some(self.shards[a].inner.lock())
                        } else {
                            self.shards[a].inner.try_lock()
                        };
                        match other {
                            Some(mut o) => {
                                if self.remove_expired(
                                    ctx,
                                    guard,
                                    id,
                                    r,
                                    now,
                                    &mut inner,
                                    Some(&mut o),
                                ) {
                                    out.removed += 1;
                                } else {
                                    sh.unfile(&mut inner, slot);
                                    sh.file(&mut inner, slot, ctx.expiry(r, guard), tick + 1);
                                }
                            }
                            None => {
                                sh.unfile(&mut inner, slot);
                                deferred.push(id);
                            }
                        }
                    }
                    _ => {
                        if self.remove_expired(ctx, guard, id, r, now, &mut inner, None) {
                            out.removed += 1;
                        } else {
                            sh.unfile(&mut inner, slot);
                            sh.file(&mut inner, slot, ctx.expiry(r, guard), tick + 1);
                        }
                    }
                }
            }
            out.examined += examined;
            sh.update_next_due(&inner);
            sh.seal(&mut inner, guard);
        }
        // Records whose alias shard was busy: lock both shards in order.
        for id in deferred {
            let Some(e) = self.get(guard, id) else {
                continue;
            };
            let r = e.rec;
            let hashes = ctx.hashes(r, guard);
            let mut w = self.write(guard, &hashes);
            let (home, alias) = w.pair(shard, hashes.secondary.map(|h| self.shard_of(h)));
            let Some(home) = home else { continue };
            if self.remove_expired(ctx, guard, id, r, now, home, alias) {
                out.removed += 1;
            } else if r.header().is_live() {
                let home = w.inner_mut(shard).expect("home shard is held");
                sh.file(home, id.slot(), ctx.expiry(r, guard), 0);
            }
        }
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
        self.unlink_dead(ctx, guard, id, r, home, alias, Removal::Expired);
        true
    }

    /// When some shard next has an expiry due (ms), if any.
    pub fn next_due(&self) -> Option<u64> {
        self.shards
            .iter()
            .map(|s| s.next_due.load(Ordering::Relaxed))
            .min()
            .filter(|&t| t != u64::MAX)
    }

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
                let alias_shard = ctx.hashes(r, guard).secondary.map(|h| self.shard_of(h));
                let done = match alias_shard {
                    Some(a) if a != shard => {
                        let other = if a > shard {
                            Some(self.shards[a].inner.lock())
                        } else {
                            self.shards[a].inner.try_lock()
                        };
                        match other {
                            Some(mut o) => {
                                self.kill_and_unlink(
                                    ctx,
                                    guard,
                                    id,
                                    r,
                                    &mut inner,
                                    Some(&mut o),
                                    Removal::Flushed,
                                );
                                true
                            }
                            None => false,
                        }
                    }
                    _ => {
                        self.kill_and_unlink(ctx, guard, id, r, &mut inner, None, Removal::Flushed);
                        true
                    }
                };
                if done {
                    removed += 1;
                } else {
                    deferred.push(id);
                }
                s = next;
            }
            sh.update_next_due(&inner);
            sh.seal(&mut inner, guard);
        }
        for id in deferred {
            let Some(e) = self.get(guard, id) else {
                continue;
            };
            let r = e.rec;
            if ctx.instance(r) != instance {
                continue;
            }
            let hashes = ctx.hashes(r, guard);
            let mut w = self.write(guard, &hashes);
            let (home, alias) = w.pair(shard, hashes.secondary.map(|h| self.shard_of(h)));
            let Some(home) = home else { continue };
            if self.kill_and_unlink(ctx, guard, id, r, home, alias, Removal::Flushed) {
                removed += 1;
            }
        }
        if more {
            return (removed, true);
        }
        let still = sh.inner.lock().zones.contains_key(&instance);
        (removed, still)
    }

    #[allow(clippy::too_many_arguments)]
    fn kill_and_unlink<C: Context<R>>(
        &self,
        ctx: &C,
        guard: &Guard,
        id: RecordId,
        r: &R,
        home: &mut Inner,
        alias: Option<&mut Inner>,
        why: Removal,
    ) -> bool {
        if !r.header().kill() {
            return false;
        }
        self.unlink_dead(ctx, guard, id, r, home, alias, why);
        true
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

    fn count_change(&self, inner: &mut Inner, delta: i64) {
        inner.pending += delta;
        if inner.pending.abs() >= APPROX_STEP {
            self.approx.fetch_add(inner.pending, Ordering::Relaxed);
            inner.pending = 0;
        }
    }

    /// The number of live records to within `shard_count() * APPROX_STEP`,
    /// from one shared load.
    pub fn approx_len(&self) -> usize {
        self.approx.load(Ordering::Relaxed).max(0) as usize
    }

    /// Live records (expired ones not yet swept included), summed over the
    /// shards' own counts.
    pub fn len(&self) -> usize {
        self.shards
            .iter()
            .map(|s| s.live.load(Ordering::Relaxed) as usize)
            .sum()
    }

    /// True if no record is live.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Records live in `shard`.
    pub fn shard_len(&self, shard: usize) -> usize {
        self.shards[shard].live.load(Ordering::Relaxed) as usize
    }

    /// Memory held, from the table's own accounting. Index and record
    /// bytes are what was handed out for them; `arena_bytes` the address
    /// space reserved (committed only as touched).
    pub fn memory(&self, guard: &Guard) -> MemoryStats {
        let mut m = MemoryStats {
            arena_bytes: self.arena.bytes(),
            ..MemoryStats::default()
        };
        for (i, s) in self.shards.iter().enumerate() {
            m.index_bytes += self.index(i, guard).bytes();
            m.record_bytes += s.slab.bytes();
            m.alias_bytes += s.aliases.bytes();
            let inner = s.inner.lock();
            m.other_bytes += core::mem::size_of::<Shard<R>>()
                + inner.zones.capacity() * (core::mem::size_of::<(u64, List)>() + 1)
                + inner.wheel_bytes();
            m.slots_in_use += s.slot_counts(&inner).0;
        }
        m
    }

    /// Grows the index of every shard so that `capacity` records fit at the
    /// target load. Each shard is rebuilt under its own lock (its writers
    /// wait, its readers go on with the old index); other shards go on.
    pub fn reserve<C: Context<R>>(&self, ctx: &C, guard: &Guard, capacity: usize) {
        let buckets = Self::buckets_for(capacity, self.shards.len());
        for shard in 0..self.shards.len() {
            let inner = self.shards[shard].inner.lock();
            if self.index(shard, guard).buckets() < buckets {
                self.rebuild_index(ctx, guard, shard, &inner, buckets);
            }
        }
    }

    /// Doubles a shard's index if one more entry would take it past 90%
    /// load (hash imbalance between shards, or more records than the table
    /// was sized for). The shard's lock is held by the caller.
    fn make_room<C: Context<R>>(&self, ctx: &C, guard: &Guard, shard: usize, inner: &Inner) {
        let ix = self.index(shard, guard);
        let entries = inner.live + inner.alias_live + 1;
        if entries * 10 > ix.buckets() * BUCKET_ENTRIES * 9 {
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
            let r = self
                .shards
                .get(RecordId(owner).shard())
                .and_then(|s| s.slab.get(RecordId(owner).slot()));
            if let Some(sec) = r.and_then(|r| ctx.hashes(r, guard).secondary) {
                let _ = ix.insert(sec, a | ALIAS_BIT);
            }
        }
        sh.index.replace(Some(Box::new(ix)), guard);
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
}

/// The locks of one or two shards, held: the way to insert and remove.
/// Dropping it releases them.
pub struct Writer<'g, R: Record> {
    table: &'g Table<R>,
    guard: &'g Guard,
    held: [Option<(usize, MutexGuard<'g, Inner>)>; 2],
}

impl<R: Record> fmt::Debug for Writer<'_, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let shards: Vec<usize> = self.held.iter().flatten().map(|(s, _)| *s).collect();
        f.debug_struct("Writer").field("shards", &shards).finish()
    }
}

impl<'g, R: Record> Writer<'g, R> {
    fn inner_mut(&mut self, shard: usize) -> Option<&mut Inner> {
        self.held
            .iter_mut()
            .flatten()
            .find(|(s, _)| *s == shard)
            .map(|(_, g)| &mut **g)
    }

    /// The held states of `home` and, if it is another held shard, `alias`.
    fn pair(
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
        let sh = &table.shards[shard];
        if let Some(a) = a_shard.filter(|&a| a != shard) {
            let ainner = self.inner_mut(a).ok_or(InsertError::NotLocked)?;
            table.make_room(ctx, guard, a, ainner);
        }
        let (home, alias) = self.pair(shard, a_shard);
        let home = home.ok_or(InsertError::NotLocked)?;
        table.make_room(ctx, guard, shard, home);
        let slot = sh.alloc(home, &table.arena).ok_or(InsertError::NoSlot)?;
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
        let mut alias_no = None;
        if let (Some(sec), Some(a)) = (hashes.secondary, a_shard) {
            let ash = &table.shards[a];
            let ainner = match alias {
                Some(i) => i,
                None => &mut *home,
            };
            let Some(no) = ash.alloc_alias(ainner, &table.arena) else {
                r.header().kill();
                sh.free_unseen(home, slot);
                return Err(InsertError::NoSlot);
            };
            if let Some(cell) = ash.aliases.get(no) {
                cell.store(id.0, Ordering::Release);
            }
            if table.index(a, guard).insert(sec, no | ALIAS_BIT).is_err() {
                if let Some(cell) = ash.aliases.get(no) {
                    cell.store(0, Ordering::Release);
                }
                ainner.alias_free_unseen(no);
                r.header().kill();
                sh.free_unseen(home, slot);
                return Err(InsertError::IndexFull);
            }
            alias_no = Some((a, no));
        }
        if table
            .index(shard, guard)
            .insert(hashes.primary, slot)
            .is_err()
        {
            r.header().kill();
            if let (Some(sec), Some((a, _))) = (hashes.secondary, alias_no) {
                // Readers may have seen the alias: free through the epoch.
                let (home, alias) = self.pair(shard, Some(a));
                let home = home.expect("home shard is held");
                let ainner = match alias {
                    Some(i) => i,
                    None => &mut *home,
                };
                table.remove_alias(guard, a, sec, id, ainner);
                let home = self.inner_mut(shard).expect("home shard is held");
                sh.retire_slot(home, guard, slot);
            } else {
                sh.free_unseen(home, slot);
            }
            return Err(InsertError::IndexFull);
        }
        let home = self.inner_mut(shard).expect("home shard is held");
        let inst = ctx.instance(r);
        let list = home.zones.entry(inst).or_default();
        sh.push_front(list, slot, Links::Zone);
        if list.len == 1 {
            ctx.occupancy(inst, shard, true);
        }
        sh.start_clock(home, now);
        sh.file(home, slot, ctx.expiry(r, guard), now / TICK_MS);
        home.live += 1;
        sh.live.store(home.live as u64, Ordering::Relaxed);
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
        let a_shard = ctx
            .hashes(entry.rec, guard)
            .secondary
            .map(|h| table.shard_of(h));
        // Shards not held are taken only if free: waiting could deadlock.
        let mut extra_home = None;
        let mut extra_alias = None;
        if !self.holds(home) {
            match table.shards[home].inner.try_lock() {
                Some(g) => extra_home = Some(g),
                None => return false,
            }
        }
        if let Some(a) = a_shard
            && a != home
            && !self.holds(a)
        {
            match table.shards[a].inner.try_lock() {
                Some(g) => extra_alias = Some(g),
                None => return false,
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
        let alias_other = a_shard.filter(|&a| a != home);
        let (held_home, held_alias) = self.pair(home, alias_other);
        let home_inner: &mut Inner = match (held_home, extra_home.as_deref_mut()) {
            (Some(h), _) => h,
            (None, Some(h)) => h,
            (None, None) => unreachable!("home shard locked above"),
        };
        let alias_inner: Option<&mut Inner> = match (held_alias, extra_alias.as_deref_mut()) {
            (Some(a), _) => Some(a),
            (None, Some(a)) => Some(a),
            (None, None) => None,
        };
        table.unlink_dead(
            ctx,
            guard,
            entry.id,
            entry.rec,
            home_inner,
            alias_inner,
            why,
        );
        true
    }

    /// Looks at up to `scan` of the oldest records of `instance` in the
    /// shard of `hash` and removes the first for which `pick` holds
    /// (early drop). Returns true if one was removed.
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
        let mut s = inner.zones.get(&instance).map_or(0, |l| l.tail);
        let mut candidates = Vec::new();
        while s != 0 && candidates.len() < scan {
            candidates.push(s);
            s = sh.zone_prev(s);
        }
        for slot in candidates {
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
}

impl<R: Record> Drop for Writer<'_, R> {
    fn drop(&mut self) {
        // Release in reverse order of acquisition.
        self.held[1] = None;
        self.held[0] = None;
    }
}
