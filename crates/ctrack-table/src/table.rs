//! The table: shards, lookups without locks, writers that hold the locks of
//! the shards they touch, expiry, and reclamation of whole zone instances.
//!
//! This file holds the table itself, its sizing, its lookups and its
//! counts; the rest is split by concept:
//!
//! - `entry`: record ids, lookup hints, references to records and their
//!   entry locks;
//! - `writer`: the shard locks (the lock order, in one place), inserts and
//!   removals;
//! - `unlink`: taking a dead record out of the index, its lists and the
//!   wheel;
//! - `expiry`: the sweep of the timer wheels;
//! - `zones`: walking and reclaiming zone instances;
//! - `resize`: growing a shard's index.

use core::fmt;

use crossbeam_utils::CachePadded;

use crate::arena::Arena;
use crate::epoch::Guard;
use crate::index::{ALIAS_BIT, BUCKET_ENTRIES, Bucket, Index};
use crate::prefetch::prefetch_lines;
use crate::shard::{Inner, List, Shard};
use crate::slab::MAX_SLOTS;
use crate::sync::{Arc, AtomicI64, AtomicU8, AtomicU64, Ordering};
use crate::{Hashes, Record};

mod entry;
mod expiry;
mod resize;
mod unlink;
#[allow(unsafe_code)]
mod writer;
mod zones;

pub use entry::{EntryLock, EntryRef, Hint, Home, RecordId, Seen};
pub use expiry::SweepStats;
pub use writer::{InsertError, NEAR_WINDOW, Writer};

/// Most shards a table may have (a record id holds eight bits of shard).
pub const MAX_SHARDS: usize = 256;
/// A record's shard is its hash shifted right by this much, masked to the
/// shard count (bits 56 to 63: the index uses bits 0 to 39).
pub const SHARD_SHIFT: u32 = 56;
/// Index buckets are sized so that a table holding its capacity has this
/// many records per hundred entries.
const TARGET_LOAD_PERCENT: usize = 85;

/// How far a shard's count may drift before it updates the table's
/// approximate count: the shared line is written once per this many
/// inserts or removals of a shard, not on every one.
pub const APPROX_STEP: i64 = 32;

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
            // A quarter of the most: what a few writers need (more cost one
            // thread cache misses on the shards' headers).
            shards: MAX_SHARDS / 4,
            capacity: 1 << 16,
        }
    }
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
    /// Over the shards, the most slots each had in their grace period
    /// (removed, not yet reusable) when it had to take a fresh slot: what
    /// reclamation's delay added to the table's memory.
    pub grace_peak_slots: usize,
    /// The most of them in one shard.
    pub grace_peak_shard: usize,
    /// Address space the arena reserved for index and records.
    pub arena_bytes: usize,
    /// Bytes of a record slot.
    pub slot_bytes: usize,
    /// The most bytes a shard adds at once when it needs a record slot
    /// past its chunks (its fixed chunk; the largest over the shards).
    pub chunk_bytes: usize,
}

impl MemoryStats {
    /// Everything.
    pub fn total(&self) -> usize {
        self.index_bytes + self.record_bytes + self.alias_bytes + self.other_bytes
    }
}

/// A concurrent table of `R`s. See the crate documentation.
pub struct Table<R: Record> {
    shards: Box<[Shard<R>]>,
    mask: usize,
    /// 1 once a writer ever took the table (set before its first change,
    /// `SeqCst`): until then every count is exactly 0 and a sweep has
    /// nothing to look at (the IPv6 table of IPv4-only traffic used to be
    /// swept, summed and counted in the limit's slack shard by shard, as
    /// often as the other). Written once.
    pub(crate) filed: AtomicU8,
    /// Where the next sweep starts. Written by every sweep of every
    /// thread, so on a line of its own: beside `shards` and `mask`, which
    /// every lookup reads, each sweep would take that line from every
    /// other core.
    sweep_start: CachePadded<AtomicU64>,
    /// Sum of the shards' counts, each shard adding its changes in steps of
    /// [`APPROX_STEP`]: within `shards * APPROX_STEP` of the truth.
    approx: CachePadded<AtomicI64>,
    /// Inserts announced ([`crate::Writer::reserve`]) and then taken back
    /// without an insert: a sum of the counts taken meanwhile may have
    /// counted one that never came (see [`Table::withdrawals`]). Rarely
    /// written; read by commits refused at a limit.
    withdrawn: CachePadded<AtomicU64>,
    /// When each shard's wheel next has something due (ms), `u64::MAX` if
    /// nothing: every sweep of every thread reads them all, so they are
    /// packed eight to a line here rather than one to a shard's line (with
    /// 256 shards, one thread's sweeps missed the first level cache on
    /// each, 9 misses a connection in `bench cps`). Stored under the
    /// shard's lock, only when the time changes.
    pub(crate) due: Box<[AtomicU64]>,
    /// The memory of the shards' slabs and indexes, each of which holds the
    /// arena too (so field order does not matter).
    arena: Arc<Arena>,
}

impl<R: Record> fmt::Debug for Table<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Table")
            .field("shards", &self.shards.len())
            .field("len", &self.len())
            .finish()
    }
}

impl<R: Record> Table<R> {
    /// An empty table.
    pub fn new(cfg: TableConfig) -> Table<R> {
        Self::with_slots_for(cfg, cfg.capacity)
    }

    /// An empty table whose index is sized for `cfg.capacity` records and
    /// whose record slots are laid out for `records` (at least the
    /// capacity): for a table that starts small and may grow large.
    ///
    /// A shard's slots come in chunks allocated on first use: 256 of a
    /// 256th of its share of `records` each, then chunks that double. A
    /// shard grown past its share by doubling chunks may leave up to half
    /// of the last one unused (and written: each slot is initialised when
    /// its chunk is made). So a table that may grow to far more than its
    /// capacity takes its slots' layout from what it may grow to: its
    /// first record in a shard then allocates a chunk of a 256th of that
    /// shard's share of `records`.
    pub fn with_slots_for(cfg: TableConfig, records: usize) -> Table<R> {
        let n = cfg.shards.clamp(1, MAX_SHARDS).next_power_of_two();
        let buckets = Self::buckets_for(cfg.capacity, n);
        let share = (records.max(cfg.capacity).div_ceil(n)).min(MAX_SLOTS as usize);
        let arena = Arc::new(Arena::default());
        Table {
            shards: (0..n).map(|_| Shard::new(buckets, share, &arena)).collect(),
            mask: n - 1,
            due: (0..n).map(|_| AtomicU64::new(u64::MAX)).collect(),
            filed: AtomicU8::new(0),
            sweep_start: CachePadded::new(AtomicU64::new(0)),
            approx: CachePadded::new(AtomicI64::new(0)),
            withdrawn: CachePadded::new(AtomicU64::new(0)),
            arena,
        }
    }

    /// The most records this table can hold, whatever its capacity: each
    /// of its shards at most 2^23 (a slot number's bits). A capacity past
    /// it is taken as it.
    pub fn most_records(&self) -> usize {
        self.shards.len() * MAX_SLOTS as usize
    }

    fn buckets_for(capacity: usize, shards: usize) -> usize {
        // No shard holds more than `MAX_SLOTS` records: an index sized
        // past them (a capacity of `usize::MAX`, "no limit") would only
        // fail to be allocated.
        let per_shard = capacity.div_ceil(shards).min(MAX_SLOTS as usize);
        let entries = per_shard.saturating_mul(100) / TARGET_LOAD_PERCENT;
        entries.div_ceil(BUCKET_ENTRIES).max(1)
    }

    /// The current index of `shard` (for tests: the reference lives as
    /// long as `guard`).
    #[cfg(all(test, not(loom), not(miri)))]
    pub(crate) fn index_of<'g>(&self, shard: usize, guard: &'g Guard) -> &'g Index
    where
        R: 'g,
    {
        self.index(shard, guard)
    }

    /// The wheel lanes of shard `shard`.
    #[cfg(test)]
    pub(crate) fn wheel_lanes(&self, shard: usize) -> usize {
        self.shards[shard].wheel_lanes
    }

    /// Number of shards.
    pub fn shard_count(&self) -> usize {
        self.shards.len()
    }

    /// The shard a hash belongs to (its top bits).
    #[inline]
    pub fn shard_of(&self, hash: u64) -> usize {
        ((hash >> SHARD_SHIFT) as usize) & self.mask
    }

    /// The current index of `shard`. The reference must not leave the
    /// method borrowing the table that called this: a shard frees its
    /// index at once when the table is dropped (see `Shard`'s `Drop`).
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
            RecordId::from_u32(owner)
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
        self.prefetch_home(guard, hash);
    }

    /// [`Table::prefetch`], keeping where the bucket is for
    /// [`Table::probe`], which then need not find the shard's index and
    /// the bucket in it again (about 25 instructions a packet, callgrind
    /// on `bench policy stage`).
    #[inline]
    pub fn prefetch_home<'g>(&'g self, guard: &'g Guard, hash: u64) -> Home<'g> {
        let shard = self.shard_of(hash);
        let bucket = self.index(shard, guard).bucket(hash);
        crate::prefetch((bucket as *const Bucket).cast::<u8>());
        Home {
            shard: shard as u32,
            bucket: Some(bucket),
        }
    }

    /// Guesses where the record stored under `hash` is (the first entry of
    /// its home bucket with its tag) and asks the processor to fetch it.
    /// `home` is where [`Table::prefetch_home`] found that bucket some time
    /// before, under the same guard (the index may have been replaced
    /// since: the guess is from the one it read, and only a guess); the
    /// guess goes to [`Table::find_hinted`].
    #[inline]
    pub fn probe<'g>(&'g self, home: Home<'g>, hash: u64) -> Hint<'g, R> {
        let Some(bucket) = home.bucket else {
            return Hint(None);
        };
        let shard = home.shard as usize;
        // Never an alias (`Index::first_in`): the record is in this shard.
        let r = Index::first_in(bucket, hash);
        if r == 0 {
            return Hint(None);
        }
        let Some(rec) = self.shards.get(shard).and_then(|s| s.slab.get(r)) else {
            return Hint(None);
        };
        prefetch_lines(core::ptr::from_ref(rec));
        Hint(Some(EntryRef {
            id: RecordId::new(shard, r),
            rec,
        }))
    }

    /// The count of entries inserted so far into the index of the shard
    /// of `hash`, read before a search under `hash` begins: if that search
    /// finds no live record, a writer that then holds the shard can tell
    /// from it whether one may have come since
    /// ([`Writer::unchanged_since`]). One load; a caller that expects to
    /// find its record (a [`Hint::is_guess`]) need not take it.
    ///
    /// A caller that takes it is likely to insert: the record the shard
    /// hands out next (as its last allocation left word on the same line)
    /// is prefetched too, so that it comes while the search goes on rather
    /// than under the lock (from another core's cache, as often as not,
    /// when several threads insert).
    #[inline]
    pub fn seen(&self, hash: u64) -> Seen {
        let Some(s) = self.shards.get(self.shard_of(hash)) else {
            return Seen::NOTHING;
        };
        let seen = Seen(s.hot.inserts.load(Ordering::Acquire));
        prefetch_lines(s.slab.addr(s.hot.next_slot.load(Ordering::Relaxed)));
        seen
    }

    /// [`Table::find`], trying the record `hint` guessed first. (Always
    /// inlined: the packet path's lane calls it with its own closure, and
    /// a call costs it about 20 instructions a packet under callgrind.)
    #[inline(always)]
    pub fn find_hinted<'g>(
        &'g self,
        guard: &'g Guard,
        hash: u64,
        hint: Hint<'g, R>,
        mut matches: impl FnMut(&R) -> bool,
    ) -> Option<EntryRef<'g, R>> {
        if let Some(e) = hint.0
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
        if self.filed.load(Ordering::Relaxed) == 0 {
            self.filed.store(1, Ordering::SeqCst);
        }
        let a = self.shard_of(hashes.primary);
        let b = hashes.secondary.map_or(a, |h| self.shard_of(h));
        Writer::lock_pair(self, guard, a, b)
    }

    fn count_change(&self, inner: &mut Inner, delta: i64) {
        // `pending` stays within APPROX_STEP of zero, so within i32.
        inner.pending += delta as i32;
        if i64::from(inner.pending.abs()) >= APPROX_STEP {
            self.approx
                .fetch_add(i64::from(inner.pending), Ordering::Relaxed);
            inner.pending = 0;
        }
    }

    /// The number of live records to within `shard_count() * APPROX_STEP`,
    /// from one shared load.
    pub fn approx_len(&self) -> usize {
        self.approx.load(Ordering::Relaxed).max(0) as usize
    }

    /// How many announced inserts were taken back so far. A caller that
    /// reads it (`Acquire`) before a sum of the counts ([`Table::len`])
    /// and finds it moved later knows that the sum may have counted an
    /// insert that never came: one taken back after the sum read its
    /// shard is counted here only after, and one counted before the read
    /// of this number was not in the sum (its count was published first,
    /// with `Release`). A limit remembered reached from such a sum is
    /// worth counting again.
    pub fn withdrawals(&self) -> u64 {
        self.withdrawn.load(Ordering::Acquire)
    }

    /// Counts an announced insert taken back, after its shard's count was
    /// published without it.
    pub(crate) fn withdraw(&self) {
        self.withdrawn.fetch_add(1, Ordering::Release);
    }

    /// Whether a writer ever took the table. Until one does, its count is
    /// exactly 0 (nothing pending in any shard either): a caller bounding
    /// the count of several tables by [`Table::approx_len`] and
    /// `shard_count() * APPROX_STEP` need not allow that error for this
    /// one. A writer that sets it after this call returned false changes
    /// the table after the call, as any other writer that comes then.
    #[inline]
    pub fn ever_written(&self) -> bool {
        self.filed.load(Ordering::SeqCst) != 0
    }

    /// Live records (expired ones not yet swept included), summed over the
    /// shards' own counts. Not a snapshot while writers work: near a limit,
    /// sum through a [`crate::Gate`] (the counts are stored with `Release`
    /// and read here with `Acquire`, as the gate needs).
    pub fn len(&self) -> usize {
        if !self.ever_written() {
            return 0;
        }
        self.shards
            .iter()
            .map(|s| s.hot.live.load(Ordering::Acquire) as usize)
            .sum()
    }

    /// True if no record is live.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Records live in `shard`.
    pub fn shard_len(&self, shard: usize) -> usize {
        self.shards[shard].hot.live.load(Ordering::Relaxed) as usize
    }

    /// Faults in the memory `capacity` records will need (each shard's
    /// index and the slot chunks of its share, with four standard
    /// deviations of the hash's imbalance between shards to spare), so
    /// that the kernel's zeroing of fresh pages happens now, before any
    /// packet, and never on the packet path under a shard lock. Returns
    /// false if memory ran out (the table still works, faulting in the
    /// rest as it goes).
    pub fn prefault(&self, guard: &Guard, capacity: usize) -> bool {
        let share = capacity.div_ceil(self.shards.len()) as u64;
        let mut ok = true;
        for (i, s) in self.shards.iter().enumerate() {
            let _inner = s.hot.inner.lock();
            self.index(i, guard).prefault();
            let spare = 4 * share.isqrt() + 64;
            let slots = (share + spare).min(u64::from(u32::MAX)) as u32;
            ok &= s.slab.ensure_up_to(slots);
        }
        ok
    }

    /// Faults in the memory the table's next allocations will take (slot
    /// chunks, a grown index), without holding any lock meanwhile; for a
    /// background thread, called again and again (when it returns 0 the
    /// memory ahead is there already: wait a little). Returns the bytes
    /// faulted in. With it, the packet path finds fresh memory already
    /// zeroed instead of taking the kernel's page faults under a shard's
    /// lock. See the arena's documentation.
    pub fn populate_ahead(&self) -> usize {
        self.arena.populate_ahead()
    }

    /// The longest probe sequence a lookup can take in any shard's index,
    /// in buckets (see the index's overflow counts): how well the keyed
    /// hash spreads the keys present. A full scan of every index.
    pub fn longest_probe(&self, guard: &Guard) -> usize {
        (0..self.shards.len())
            .map(|i| self.index(i, guard).longest_probe())
            .max()
            .unwrap_or(0)
    }

    /// Entries in every shard's index: one a record, two for a record
    /// with a secondary hash. A full scan of every index, for reports and
    /// tests: an entry left behind by a removal shows here.
    pub fn index_entries(&self, guard: &Guard) -> usize {
        (0..self.shards.len())
            .map(|i| self.index(i, guard).occupied())
            .sum()
    }

    /// Memory held, from the table's own accounting. Index and record
    /// bytes are what was handed out for them; `arena_bytes` the address
    /// space reserved (committed only as touched).
    ///
    /// It takes each shard's lock in turn, and holds no epoch pin while
    /// it waits for one: a caller pinned across 64 lock waits (a
    /// statistics request while sixteen threads flood the table) would
    /// hold back the reuse of every slot the table retires meanwhile.
    pub fn memory(&self) -> MemoryStats {
        let mut m = MemoryStats {
            arena_bytes: self.arena.bytes(),
            slot_bytes: core::mem::size_of::<R>(),
            ..MemoryStats::default()
        };
        for (i, s) in self.shards.iter().enumerate() {
            m.index_bytes += self.index(i, &crate::epoch::pin()).bytes();
            m.record_bytes += s.slab.bytes();
            m.chunk_bytes = m.chunk_bytes.max(s.slab.fixed_chunk_bytes());
            m.alias_bytes += s.aliases.bytes();
            let inner = s.hot.inner.lock();
            m.other_bytes += core::mem::size_of::<Shard<R>>()
                + inner.zones.capacity() * (core::mem::size_of::<(u64, List)>() + 1)
                + inner.wheel_bytes()
                + inner.ready_bytes();
            m.slots_in_use += s.slot_counts(&inner).0;
            let g = s.grace_peak(&inner);
            m.grace_peak_slots += g;
            m.grace_peak_shard = m.grace_peak_shard.max(g);
        }
        m
    }
}

/// The table's own counts and figures, one thread: what it says of its
/// size, its records and its memory.
#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::testing::{Ctx, MIXED, Rec};
    use crate::{APPROX_STEP, TableConfig, pin};

    /// Its counts, per table and per shard, its index entries, and how it
    /// prints.
    #[test]
    fn a_table_counts_its_records_and_entries() {
        let t = Table::<Rec>::new(TableConfig {
            shards: 4,
            capacity: 4096,
        });
        assert_eq!(t.most_records(), 4 << 23);
        assert_eq!(format!("{t:?}"), "Table { shards: 4, len: 0 }");
        assert!(t.is_empty());
        for key in 1..=100 {
            let alt = if key <= 10 { key + 1_000 } else { 0 };
            assert!(MIXED.insert_new(&t, key, alt, 0, u64::MAX, key).unwrap());
        }
        assert!(!t.is_empty());
        assert_eq!(t.len(), 100);
        let per_shard: Vec<usize> = (0..4).map(|s| t.shard_len(s)).collect();
        assert_eq!(per_shard.iter().sum::<usize>(), 100, "{per_shard:?}");
        let g = pin();
        assert_eq!(
            t.index_entries(&g),
            110,
            "a record's entry, and an alias each"
        );
        assert_eq!(format!("{t:?}"), "Table { shards: 4, len: 100 }");
    }

    /// The approximate count moves a step at a time: the shared word is
    /// written once per `APPROX_STEP` changes of a shard, not on each.
    #[test]
    fn the_approximate_count_moves_a_step_at_a_time() {
        let t = Table::<Rec>::new(TableConfig {
            shards: 1,
            capacity: 256,
        });
        let step = APPROX_STEP as u64;
        for key in 1..step {
            assert!(MIXED.insert_new(&t, key, 0, 0, u64::MAX, key).unwrap());
        }
        assert_eq!(t.approx_len(), 0);
        assert!(MIXED.insert_new(&t, step, 0, 0, u64::MAX, step).unwrap());
        assert_eq!(t.approx_len(), APPROX_STEP as usize);
    }

    /// The longest probe is the run of buckets a lookup may walk: 30 keys
    /// of one home bucket fill it and the next and half the third.
    #[test]
    fn the_longest_probe_is_the_run_a_lookup_walks() {
        let ctx = Ctx::new(|k: u64| k & 0xff);
        let t = Table::<Rec>::new(TableConfig {
            shards: 1,
            capacity: 1024,
        });
        let g = pin();
        assert_eq!(t.longest_probe(&g), 0);
        for key in 1..=30 {
            assert!(ctx.insert_new(&t, key, 0, 0, u64::MAX, key).unwrap());
        }
        assert_eq!(t.longest_probe(&g), 3);
    }

    /// The memory figures add up: `total` is the four kinds, "other" the
    /// shards' own structures, zone maps, wheels and retire lists, the
    /// slots in use those live or in their grace period.
    #[test]
    fn the_memory_figures_add_up() {
        let t = Table::<Rec>::new(TableConfig {
            shards: 2,
            capacity: 1024,
        });
        // Pinned before the removals: their slots wait.
        let g = pin();
        for key in 1..=300 {
            let alt = if key % 3 == 0 { key + 10_000 } else { 0 };
            assert!(
                MIXED
                    .insert_new(&t, key, alt, key % 7, u64::MAX, key)
                    .unwrap()
            );
        }
        for key in 1..=50 {
            assert!(MIXED.remove(&t, key));
        }
        let m = t.memory();
        assert!(m.index_bytes > 0 && m.record_bytes > 0 && m.alias_bytes > 0);
        assert_eq!(
            m.total(),
            m.index_bytes + m.record_bytes + m.alias_bytes + m.other_bytes
        );
        assert!(m.arena_bytes >= m.index_bytes + m.record_bytes);
        assert_eq!(m.slot_bytes, core::mem::size_of::<Rec>());
        let mut other = 0;
        let mut slots = 0;
        for s in t.shards.iter() {
            let inner = s.hot.inner.lock();
            assert!(inner.zones.capacity() > 0 && inner.ready_bytes() > 0);
            other += core::mem::size_of::<Shard<Rec>>()
                + inner.zones.capacity() * (core::mem::size_of::<(u64, List)>() + 1)
                + inner.wheel_bytes()
                + inner.ready_bytes();
            slots += s.slot_counts(&inner).0;
        }
        assert_eq!(m.other_bytes, other);
        assert_eq!(m.slots_in_use, slots);
        assert!(
            slots >= 300,
            "250 live and 50 in their grace period: {slots}"
        );
        assert_eq!(
            m.grace_peak_slots, 0,
            "no fresh slot taken since the removals"
        );
        // Fresh slots taken while the removed ones wait: a grace peak.
        for key in 301..=320 {
            assert!(MIXED.insert_new(&t, key, 0, 0, u64::MAX, key).unwrap());
        }
        let m = t.memory();
        assert!(m.grace_peak_shard > 0 && m.grace_peak_slots >= m.grace_peak_shard);
        drop(g);
    }

    /// A fresh table's memory ahead is faulted in by calls to
    /// `populate_ahead` until one says there is nothing more to do, on a
    /// kernel that can (Linux 5.14 on; each call then does some).
    #[test]
    #[cfg(all(target_os = "linux", not(miri)))]
    fn populating_ahead_ends_having_done_something() {
        let t = Table::<Rec>::new(TableConfig {
            shards: 1,
            capacity: 4096,
        });
        let mut total = 0;
        let mut calls = 0;
        loop {
            let n = t.populate_ahead();
            calls += 1;
            if n == 0 || calls == 10_000 {
                break;
            }
            total += n;
        }
        assert!(calls < 10_000, "populate_ahead never said it was done");
        if total == 0 {
            assert!(
                !kernel_at_least(5, 14),
                "nothing populated on Linux 5.14 or later"
            );
        }
    }

    /// Whether the running kernel's release is `major.minor` or later.
    #[cfg(all(target_os = "linux", not(miri)))]
    pub(crate) fn kernel_at_least(major: u32, minor: u32) -> bool {
        let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
        let mut parts = release
            .trim()
            .split(['.', '-'])
            .map(|p| p.parse::<u32>().unwrap_or(0));
        let (a, b) = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
        (a, b) >= (major, minor)
    }
}
