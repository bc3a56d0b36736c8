//! One shard: its index, its record and alias slots, and, under its lock,
//! the free lists, the zone lists and the timer wheel.
//!
//! Everything in [`Inner`] is touched only with the shard lock held. The
//! link fields it manipulates live in the records' [`Header`]s as relaxed
//! atomics: readers never follow them.

use crossbeam_utils::CachePadded;

use crate::Record;
use crate::arena::Arena;
use crate::epoch::{EpochBox, Guard, Retired, defer};
use crate::header::{Header, NO_WHEEL};
use crate::index::Index;
pub(crate) use crate::lists::{Links, List, ZoneLists};
use crate::slab::{AliasSlab, MAX_SLOTS, Slab};
use crate::sync::{Arc, AtomicU8, AtomicU32, AtomicU64, Mutex, Ordering};

/// Ticks in a lap of a shard's timer wheel. A record expiring further
/// ahead than the wheel spans is filed in its last tick and filed again
/// when it comes due.
pub(crate) const WHEEL_TICKS: usize = 256;
/// The most lists ("lanes") a tick's records are spread over, by slot
/// number. A list through random records is a chain of cache misses that
/// a sweep can follow only one record at a time; with a tick's records in
/// several lists, the sweep follows that many chains at once. Measured
/// (`ctrack bench cps --threads 1 --conns 1000000`, steady, BENCHMARKS.md
/// "Timer-wheel lanes"): UDP 3–11% more connections a second (median
/// 8%), TCP about 2% fewer (the sweep's own time falls by a third there
/// too, but something else on the packet path takes more than that back).
pub(crate) const MAX_WHEEL_LANES: usize = 4;
/// Records of a shard's share for each lane's 256 heads (1 KiB): a
/// shard has as many lanes as its share pays for at half a byte a
/// record, so that small shares (a 1M table in 256 shards) keep one.
const RECORDS_PER_LANE: usize = 2 * WHEEL_TICKS * core::mem::size_of::<u32>();

/// The lanes of a shard whose share of the table is `share` records.
pub(crate) fn wheel_lanes_for(share: usize) -> usize {
    match share / RECORDS_PER_LANE {
        0 | 1 => 1,
        2 | 3 => 2,
        _ => MAX_WHEEL_LANES,
    }
}

/// Width of a wheel tick, in milliseconds.
pub(crate) const TICK_MS: u64 = 1000;
/// Freed slots handed to the epoch in batches of this many (one at a time
/// under the model checker, so that its small models see slots reused).
#[cfg(not(loom))]
const LIMBO_BATCH: usize = 64;
#[cfg(loom)]
const LIMBO_BATCH: usize = 1;
/// Spent slot lists a shard keeps for reuse.
const SPARE_LISTS: usize = 4;
/// A sweep leaving a shard seals its limbo lists from this many; fewer
/// wait there for later removals (see `Shard::seal_some`).
#[cfg(not(loom))]
const SEAL_SOME: usize = LIMBO_BATCH / 4;
#[cfg(loom)]
const SEAL_SOME: usize = 1;

/// Removed slots a shard may hold in their grace period before an
/// eviction that would make room in it is refused
/// ([`crate::Writer::reclaim_behind`]): sixteen batches. Each shard of a
/// table at its limit thus holds at most this many slots beyond its live
/// records, however long reclamation is held up (a packet thread
/// descheduled while pinned holds back every slot the others retire
/// meanwhile). Measured (`ctrack bench flood syn --threads 3
/// --established 2000 --max-conns 5000`, two cores): threads descheduled
/// while pinned left up to 708 slots waiting in one shard; with 512 here,
/// one run in three refused 0.7% of its legitimate newcomers, with 256 up
/// to 30%.
pub const GRACE_SLOTS_PER_SHARD: usize = 16 * LIMBO_BATCH;

/// Slots whose grace period has passed, ready for reuse.
#[derive(Debug, Default)]
pub(crate) struct Mailbox {
    ready: Mutex<Vec<(Vec<u32>, Vec<u32>)>>,
    /// Set when `ready` may be non-empty, so that allocation checks a flag
    /// instead of taking the mailbox's lock every time.
    pending: AtomicU8,
}

/// The part of a shard that needs the lock.
///
/// In a fixed order (`repr(C)`), what every insert and removal touches
/// first: with the lock and the published counts before it ([`Hot`]), the
/// counts and slot fields share the lock's cache line, the wheel, the
/// batch of slots being handed out and the first zone list the next one
/// (the pair of lines that the processor fetches together), what only
/// removals touch the third. A writer on another core than the shard's
/// last one then fetches these two lines and the wheel slot's, not the
/// six or seven that the compiler's order spread the same fields over,
/// with the zone map's and the batch list's own (`--threads 2` in
/// `ctrack bench cps`).
///
/// The wheel slot's list was kept beside the lock for a while (`1d44bdf`):
/// two threads on machine A made 3–5% more connections, but on 16 vCPUs
/// 16 threads made 5–27% fewer in 12 of 14 comparisons with the build before
/// it, over five calls of one lease, also once only a later second could
/// take the kept slot's place (BENCHMARKS.md, lease 10). Taken out.
#[derive(Debug)]
#[repr(C)]
pub(crate) struct Inner {
    /// Live records.
    pub(crate) live: usize,
    /// Change of `live` not yet added to the table's approximate count
    /// (less than [`crate::APPROX_STEP`] either way).
    pub(crate) pending: i32,
    /// Vacant slots freed one at a time, linked through their headers.
    free: u32,
    /// Vacant slots counted in `free`, `cur` and `ready`.
    free_len: u32,
    next_fresh: u32,
    /// Removals leave the published count (`Shard::live`) as it was until
    /// the next insert or the writer's end ([`crate::Writer::hide_count`]).
    pub(crate) hidden: bool,
    /// An insert announced ahead, counted in the published count until it
    /// comes or the writer ends ([`crate::Writer::reserve`]).
    pub(crate) reserved: bool,
    /// The next wheel tick to process; every earlier one is done.
    pub(crate) cursor: u64,
    /// The head of each wheel list (0: empty), tick by tick, each tick's
    /// lanes together; None until the first record is filed. Heads only:
    /// the sweep takes a list's records from its head and nothing asks a
    /// list how many it holds, so a tail and a count (a [`List`], 12
    /// bytes a list) would be 2 KiB a lane that no one reads: 0.5 bytes a
    /// connection for a 1M table in 256 shards (`ctrack bench memory
    /// --conns 1000000 --shards 256`).
    wheel: Option<Box<[u32]>>,
    /// The batch of `ready` that slots are being taken from, kept here so
    /// that taking one reads and writes these lines and the batch's own
    /// numbers, not the list of batches as well.
    cur: Vec<u32>,
    /// Zone lists by instance.
    pub(crate) zones: ZoneLists,
    limbo: Vec<u32>,
    /// What the records of `limbo` owned through an [`EpochBox`]
    /// ([`crate::Record::retire`]): sealed with it.
    pub(crate) retired: Retired,
    /// The most slots that were neither live nor vacant (removed, in
    /// their grace period) when this shard took a fresh slot: what the
    /// grace period has cost the shard's memory.
    grace_peak: u32,
    alias_next_fresh: u32,
    /// Aliases in use.
    pub(crate) alias_live: usize,
    /// The mailbox's list of batches as last emptied, kept for its room.
    drained: Vec<(Vec<u32>, Vec<u32>)>,
    /// Spent slot lists kept for the next limbo lists (at most
    /// [`SPARE_LISTS`]), each with room for a whole batch.
    spare: Vec<Vec<u32>>,
    /// Vacant slots whose grace period ended, as the epoch handed them
    /// back (batches of up to `LIMBO_BATCH`): kept as numbers, so that
    /// taking a batch back writes to none of its records (linking each
    /// into `free` would miss the cache once per slot, all in one call).
    ready: Vec<Vec<u32>>,
    alias_free: Vec<u32>,
    alias_limbo: Vec<u32>,
}

impl Inner {
    /// The first record of wheel list `s` (0: none, or no wheel yet).
    #[inline]
    fn wheel_head(&self, s: usize) -> u32 {
        self.wheel.as_ref().map_or(0, |w| w[s])
    }

    /// The count to publish: the live records and an announced insert.
    pub(crate) fn published(&self) -> u64 {
        self.live as u64 + u64::from(self.reserved)
    }

    /// Returns an alias number no reader has seen.
    pub(crate) fn alias_free_unseen(&mut self, a: u32) {
        self.alias_free.push(a);
        self.alias_live -= 1;
    }

    /// One more than the largest alias number handed out.
    pub(crate) fn alias_next_fresh(&self) -> u32 {
        self.alias_next_fresh
    }

    /// Bytes of the slot and alias lists: batches waiting for reuse, the
    /// limbo lists, free aliases, and the list kept for its room.
    pub(crate) fn ready_bytes(&self) -> usize {
        let u32s = self.limbo.capacity()
            + self.cur.capacity()
            + self.alias_limbo.capacity()
            + self.alias_free.capacity()
            + self.spare.iter().map(Vec::capacity).sum::<usize>();
        (self.ready.capacity() + self.spare.capacity()) * core::mem::size_of::<Vec<u32>>()
            + self.drained.capacity() * core::mem::size_of::<(Vec<u32>, Vec<u32>)>()
            + (u32s + self.ready.iter().map(|b| b.capacity()).sum::<usize>())
                * core::mem::size_of::<u32>()
    }

    /// Bytes of the wheel.
    pub(crate) fn wheel_bytes(&self) -> usize {
        self.wheel
            .as_ref()
            .map_or(0, |w| core::mem::size_of_val(&**w))
    }

    fn new() -> Inner {
        Inner {
            next_fresh: 1,
            grace_peak: 0,
            free: 0,
            free_len: 0,
            cur: Vec::new(),
            ready: Vec::new(),
            drained: Vec::new(),
            limbo: Vec::new(),
            retired: Retired::new(),
            spare: Vec::new(),
            alias_next_fresh: 1,
            alias_free: Vec::new(),
            alias_limbo: Vec::new(),
            alias_live: 0,
            zones: ZoneLists::default(),
            wheel: None,
            cursor: 0,
            live: 0,
            hidden: false,
            reserved: false,
            pending: 0,
        }
    }
}

/// The shard's lock, what it guards, and the two counts that writers
/// publish for readers, in this order on the same lines (see [`Inner`]).
#[derive(Debug)]
#[repr(C)]
pub(crate) struct Hot {
    /// Mirror of `Inner::live`, readable without the lock.
    pub(crate) live: AtomicU64,
    /// Entries inserted into this shard's index so far, modulo 2^32
    /// (counted under the lock, stored with `Release` after the entry is
    /// in): see [`Writer::unchanged_since`](crate::Writer::unchanged_since).
    /// Its 32 bits wrap, as a Linux seqcount's: a thread whose search read
    /// it would have to be held up while exactly a multiple of 2^32
    /// entries went into one shard (hours, at millions a second) to be
    /// deceived. (A count that happens to equal `Seen::NOTHING` only costs
    /// the writer a search.)
    pub(crate) inserts: AtomicU32,
    /// The slot this shard hands out next, as far as its last allocation
    /// knew (stored under the lock, read without it): a thread about to
    /// insert prefetches its record ([`crate::Table::seen`]) while it
    /// searches, instead of missing on it under the lock. Only a hint: the
    /// slot may be taken by then, or the number out of date.
    pub(crate) next_slot: AtomicU32,
    pub(crate) inner: Mutex<Inner>,
}

/// A shard.
#[derive(Debug)]
pub(crate) struct Shard<R> {
    // Read by lookups; written rarely.
    pub(crate) index: EpochBox<Index>,
    pub(crate) slab: Slab<R>,
    /// Alias number to the [`RecordId`](crate::RecordId) it names (0 once
    /// freed).
    pub(crate) aliases: AliasSlab,
    /// Lists each tick of the wheel has: a power of two, at most
    /// [`MAX_WHEEL_LANES`].
    pub(crate) wheel_lanes: usize,
    /// Written by writers, on lines of their own.
    pub(crate) hot: CachePadded<Hot>,
    mailbox: Arc<Mailbox>,
}

impl<R> Shard<R> {
    /// Counts an entry just inserted into the index (the shard's lock
    /// held: one writer at a time, so a load and a store).
    #[inline]
    pub(crate) fn count_insert(&self) {
        let n = self.hot.inserts.load(Ordering::Relaxed);
        self.hot.inserts.store(n.wrapping_add(1), Ordering::Release);
    }
}

impl<R> Drop for Shard<R> {
    fn drop(&mut self) {
        // SAFETY: every reference to a shard's index comes from
        // `Table::index`, which only the table's own methods call and none
        // returns, so none outlives the borrow of the table it was made
        // under; the table is being dropped (this shard with it), so none
        // is alive. Freed now rather than after a grace period, the index
        // gives its hold on the arena back with the table.
        unsafe { self.index.take_now() };
    }
}

#[inline]
pub(crate) fn rec<R: Record>(slab: &Slab<R>, slot: u32) -> &R {
    slab.get(slot)
        .expect("a linked slot lies in an allocated chunk")
}

impl<R: Record> Shard<R> {
    /// A shard expected to hold about `share` records, with an index of
    /// `index_buckets` buckets, its memory from `arena`.
    pub(crate) fn new(index_buckets: usize, share: usize, arena: &Arc<Arena>) -> Shard<R> {
        Shard {
            index: EpochBox::new(Some(Box::new(Index::new(index_buckets, arena)))),
            slab: Slab::new(share, arena),
            aliases: Slab::new(0, arena),
            wheel_lanes: wheel_lanes_for(share),
            hot: CachePadded::new(Hot {
                live: AtomicU64::new(0),
                inserts: AtomicU32::new(0),
                next_slot: AtomicU32::new(1),
                inner: Mutex::new(Inner::new()),
            }),
            mailbox: Arc::new(Mailbox::default()),
        }
    }

    // ----- lists -----

    /// Puts `slot` (whose header is `h`) at the head of `list`.
    pub(crate) fn push_front(&self, list: &mut List, slot: u32, h: &Header, links: Links) {
        if self.link_front(&mut list.head, slot, h, links) {
            list.tail = slot;
        }
        list.len += 1;
    }

    /// Takes `slot` (whose header is `h`) out of `list`.
    pub(crate) fn unlink(&self, list: &mut List, slot: u32, h: &Header, links: Links) {
        if let Some(prev) = self.link_out(&mut list.head, slot, h, links) {
            list.tail = prev;
        }
        list.len -= 1;
    }

    /// Puts `slot` (whose header is `h`) at the head of the list that
    /// starts at `head`; true if that list was empty.
    #[inline]
    fn link_front(&self, head: &mut u32, slot: u32, h: &Header, links: Links) -> bool {
        debug_assert!(core::ptr::eq(h, rec(&self.slab, slot).header()));
        let (prev, next) = links.of(h);
        prev.store(0, Ordering::Relaxed);
        next.store(*head, Ordering::Relaxed);
        let was_empty = *head == 0;
        if !was_empty {
            links
                .of(rec(&self.slab, *head).header())
                .0
                .store(slot, Ordering::Relaxed);
        }
        *head = slot;
        was_empty
    }

    /// Takes `slot` (whose header is `h`) out of the list that starts at
    /// `head`; if it was that list's last, the slot before it (the new
    /// last; 0 when the list is now empty).
    ///
    /// Always inlined: a call (the compiler's choice under `#[inline]`)
    /// cost 36 instructions of its own in saved registers and matched
    /// `links` at run time, where each caller names its list: a zone's
    /// reclaim 573 -> 534 instructions a record (callgrind, `bench zones
    /// 10000 10 N`, `--toggle-collect='*reclaim_instance*'`).
    #[inline(always)]
    fn link_out(&self, head: &mut u32, slot: u32, h: &Header, links: Links) -> Option<u32> {
        debug_assert!(core::ptr::eq(h, rec(&self.slab, slot).header()));
        let (p, n) = links.of(h);
        let prev = p.load(Ordering::Relaxed);
        let next = n.load(Ordering::Relaxed);
        if prev != 0 {
            links
                .of(rec(&self.slab, prev).header())
                .1
                .store(next, Ordering::Relaxed);
        } else {
            *head = next;
        }
        p.store(0, Ordering::Relaxed);
        n.store(0, Ordering::Relaxed);
        if next != 0 {
            links
                .of(rec(&self.slab, next).header())
                .0
                .store(prev, Ordering::Relaxed);
            None
        } else {
            Some(prev)
        }
    }

    /// The slot before `slot` in its zone list (towards the head).
    pub(crate) fn zone_prev(&self, slot: u32) -> u32 {
        rec(&self.slab, slot)
            .header()
            .zone_prev
            .load(Ordering::Relaxed)
    }

    /// The slot after `slot` in its zone list.
    pub(crate) fn zone_next(&self, slot: u32) -> u32 {
        rec(&self.slab, slot)
            .header()
            .zone_next
            .load(Ordering::Relaxed)
    }

    // ----- the wheel -----

    fn tick_of(ms: u64) -> u64 {
        ms / TICK_MS
    }

    /// Where tick `t`'s lanes start among the wheel's list heads.
    #[inline]
    fn tick_lists(&self, t: u64) -> usize {
        (t % WHEEL_TICKS as u64) as usize * self.wheel_lanes
    }

    /// Files `slot` (whose header is `h`), expiring at `expiry` (ms), in
    /// the wheel; never in a tick before `min_tick`. `due` is the shard's
    /// entry in the table's times due (`Table::due`).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn file(
        &self,
        inner: &mut Inner,
        due: &AtomicU64,
        slot: u32,
        h: &Header,
        expiry: u64,
        min_tick: u64,
    ) {
        // Within the lap ahead of the cursor; a wheel that has not been
        // swept for a lap files in its last tick, and sweeping refiles.
        let lo = min_tick.max(inner.cursor);
        let hi = inner.cursor + WHEEL_TICKS as u64 - 1;
        let t = Self::tick_of(expiry).max(lo).min(hi);
        let lanes = self.wheel_lanes;
        let s = self.tick_lists(t) + (slot as usize & (lanes - 1));
        h.wheel_slot.store(s as u16, Ordering::Relaxed);
        let wheel = inner
            .wheel
            .get_or_insert_with(|| vec![0; WHEEL_TICKS * lanes].into_boxed_slice());
        self.link_front(&mut wheel[s], slot, h, Links::Wheel);
        let at = (t + 1) * TICK_MS;
        if at < due.load(Ordering::Relaxed) {
            due.store(at, Ordering::Relaxed);
        }
    }

    /// Files `slot` again, now expiring at `expiry`, no earlier than
    /// `min_tick`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn refile(
        &self,
        inner: &mut Inner,
        due: &AtomicU64,
        slot: u32,
        h: &Header,
        expiry: u64,
        min_tick: u64,
    ) {
        self.unfile(inner, slot, h);
        self.file(inner, due, slot, h, expiry, min_tick);
    }

    /// Takes `slot` (whose header is `h`) out of the wheel, if it is in it.
    /// Always inlined, as [`Shard::link_out`] in it: a zone's reclaim 501
    /// -> 490 instructions a record, `bench cps`'s steady connection 3,337
    /// -> 3,326 (callgrind).
    #[inline(always)]
    pub(crate) fn unfile(&self, inner: &mut Inner, slot: u32, h: &Header) {
        let s = h.wheel_slot.load(Ordering::Relaxed);
        if s == NO_WHEEL {
            return;
        }
        if let Some(wheel) = inner.wheel.as_mut() {
            self.link_out(&mut wheel[usize::from(s)], slot, h, Links::Wheel);
        }
        h.wheel_slot.store(NO_WHEEL, Ordering::Relaxed);
    }

    /// Starts the wheel's clock at `now` if nothing was ever filed.
    pub(crate) fn start_clock(&self, inner: &mut Inner, now: u64) {
        if inner.wheel.is_none() && inner.live == 0 {
            inner.cursor = Self::tick_of(now);
        }
    }

    /// A slot due at `now`, the tick it belongs to and its lane: the head
    /// of the first lane from `turn` (modulo the lanes) that holds one in
    /// the earliest tick due; moves the cursor past empty ticks. `None`
    /// when nothing is due.
    pub(crate) fn due(
        &self,
        inner: &mut Inner,
        now: u64,
        turn: usize,
    ) -> Option<(u32, u64, usize)> {
        inner.wheel.as_ref()?;
        let now_tick = Self::tick_of(now);
        if now_tick > inner.cursor + WHEEL_TICKS as u64 {
            // More than a lap behind: everything filed lies in the last lap.
            inner.cursor = now_tick - WHEEL_TICKS as u64;
        }
        let lanes = self.wheel_lanes;
        while inner.cursor < now_tick {
            let base = self.tick_lists(inner.cursor);
            for i in 0..lanes {
                let lane = (turn + i) & (lanes - 1);
                let slot = inner.wheel_head(base + lane);
                if slot != 0 {
                    return Some((slot, inner.cursor, lane));
                }
            }
            inner.cursor += 1;
        }
        None
    }

    /// Recomputes when the wheel next has something due, into `due` (the
    /// shard's entry in the table's times due, `Table::due`).
    pub(crate) fn update_next_due(&self, inner: &Inner, due: &AtomicU64) {
        let next = if inner.wheel.is_none() {
            u64::MAX
        } else {
            (0..WHEEL_TICKS as u64)
                .map(|i| inner.cursor + i)
                .find(|&t| {
                    let base = self.tick_lists(t);
                    (0..self.wheel_lanes).any(|l| inner.wheel_head(base + l) != 0)
                })
                .map_or(u64::MAX, |t| (t + 1) * TICK_MS)
        };
        if due.load(Ordering::Relaxed) != next {
            due.store(next, Ordering::Relaxed);
        }
    }

    // ----- slots -----

    /// A vacant slot whose grace period has passed, or `None` if the shard
    /// is at its slot limit.
    pub(crate) fn alloc(&self, inner: &mut Inner, guard: &Guard) -> Option<u32> {
        if inner.free != 0 {
            let s = inner.free;
            inner.free = self.zone_next(s);
            inner.free_len -= 1;
            // The next one handed out: fetched meanwhile (see below).
            if inner.free != 0 {
                crate::prefetch::prefetch_lines(self.slab.addr(inner.free));
                self.hint_next(inner.free);
            }
            return Some(s);
        }
        // The batches handed back, then the mailbox, and only when both
        // are empty a fresh slot. (Checking the mailbox only when `ready`
        // held no batch at all missed it whenever `ready` held an emptied
        // one: a shard under churn then took a fresh slot each time one of
        // its batches ran out, with hundreds of reusable slots waiting in
        // its mailbox, and grew for as long as the churn went on.)
        loop {
            if let Some(s) = inner.cur.pop() {
                inner.free_len -= 1;
                // The slot after it is the next one handed out: start
                // fetching its record (cold since it was freed), as
                // linking the slots into `free` used to, all at once.
                if let Some(&n) = inner.cur.last() {
                    crate::prefetch::prefetch_lines(self.slab.addr(n));
                    self.hint_next(n);
                }
                return Some(s);
            }
            // Spent: kept for a later limbo list, so that a shard under
            // churn does not allocate one (and grow it in steps) for
            // every batch it retires.
            if inner.cur.capacity() >= LIMBO_BATCH && inner.spare.len() < SPARE_LISTS {
                let spent = core::mem::take(&mut inner.cur);
                inner.spare.push(spent);
            }
            if let Some(batch) = inner.ready.pop() {
                inner.cur = batch;
                continue;
            }
            if !self.drain_mailbox(inner) {
                break;
            }
        }
        // Slots a sweep left in limbo (see `seal_some`) start their grace
        // period now: a shard that takes fresh slots, and removes nothing
        // more, would otherwise never see them again.
        if !inner.limbo.is_empty() {
            self.seal(inner, guard);
        }
        let s = inner.next_fresh;
        if s >= MAX_SLOTS || !self.slab.ensure(s) {
            return None;
        }
        // Nothing vacant is left (`free`, `ready` and the mailbox are
        // empty), so every slot handed out that is not live waits out its
        // grace period.
        let waiting = self.waiting(inner) as u32;
        inner.grace_peak = inner.grace_peak.max(waiting);
        inner.next_fresh += 1;
        // The next fresh slot is the next one this shard hands out: its
        // lines (never written, or not since the memory was faulted in) are
        // fetched while the commits that land in other shards go on, not
        // when the commit that takes it writes the record. (Null, and so
        // nothing, where its chunk is not there yet.)
        crate::prefetch::prefetch_lines(self.slab.addr(s + 1));
        self.hint_next(s + 1);
        Some(s)
    }

    /// Tells threads about to insert which slot comes next.
    #[inline]
    fn hint_next(&self, slot: u32) {
        self.hot.next_slot.store(slot, Ordering::Relaxed);
    }

    /// Returns a slot that no reader can have seen straight to the free
    /// list.
    pub(crate) fn free_unseen(&self, inner: &mut Inner, slot: u32) {
        rec(&self.slab, slot)
            .header()
            .zone_next
            .store(inner.free, Ordering::Relaxed);
        inner.free = slot;
        inner.free_len += 1;
    }

    /// A fresh alias number.
    pub(crate) fn alloc_alias(&self, inner: &mut Inner, guard: &Guard) -> Option<u32> {
        if inner.alias_free.is_empty() {
            self.drain_mailbox(inner);
        }
        if let Some(a) = inner.alias_free.pop() {
            inner.alias_live += 1;
            return Some(a);
        }
        // As for slots (`alloc`).
        if !inner.alias_limbo.is_empty() {
            self.seal(inner, guard);
        }
        let a = inner.alias_next_fresh;
        if a >= MAX_SLOTS || !self.aliases.ensure(a) {
            return None;
        }
        inner.alias_next_fresh += 1;
        inner.alias_live += 1;
        Some(a)
    }

    /// Hands a removed slot (and alias) to the epoch.
    pub(crate) fn retire_slot(&self, inner: &mut Inner, guard: &Guard, slot: u32) {
        // A new limbo list has room for a whole batch from the start, a
        // spent one if the shard kept one: lists are sealed before they
        // fill (by a sweep, by an allocation), and growing one from
        // nothing each time cost about 35 instructions a connection in
        // `malloc`, `realloc` and `free` (callgrind on `bench cps`).
        if inner.limbo.capacity() == 0 {
            inner.limbo = inner
                .spare
                .pop()
                .unwrap_or_else(|| Vec::with_capacity(LIMBO_BATCH));
        }
        inner.limbo.push(slot);
        if inner.limbo.len() >= LIMBO_BATCH {
            self.seal(inner, guard);
        }
    }

    pub(crate) fn retire_alias(&self, inner: &mut Inner, guard: &Guard, alias: u32) {
        inner.alias_live -= 1;
        inner.alias_limbo.push(alias);
        if inner.alias_limbo.len() >= LIMBO_BATCH {
            self.seal(inner, guard);
        }
    }

    /// [`Shard::seal`] once the limbo lists hold [`SEAL_SOME`] slots or
    /// aliases: what a sweep does when it leaves a shard. In a small table
    /// a sweep removes one or two records in each of dozens of shards, and
    /// sealing each of them, a deferred function and an allocation each
    /// time, cost about 200 instructions a connection (`bench cps --conns
    /// 10000`, callgrind), ten times its share in a table of a million.
    /// What waits in limbo meanwhile is bounded (fewer than `SEAL_SOME`
    /// slots a shard) and sealed by the next removals.
    pub(crate) fn seal_some(&self, inner: &mut Inner, guard: &Guard) {
        if inner.limbo.len() >= SEAL_SOME || inner.alias_limbo.len() >= SEAL_SOME {
            self.seal(inner, guard);
        }
    }

    /// Sends the limbo lists to the epoch: once every current reader is
    /// gone, they land in the mailbox for reuse.
    pub(crate) fn seal(&self, inner: &mut Inner, guard: &Guard) {
        if inner.limbo.is_empty() && inner.alias_limbo.is_empty() {
            return;
        }
        let batch = (
            core::mem::take(&mut inner.limbo),
            core::mem::take(&mut inner.alias_limbo),
        );
        let mailbox = Arc::clone(&self.mailbox);
        defer(guard, move || {
            mailbox.ready.lock().push(batch);
            mailbox.pending.store(1, Ordering::Release);
        });
        // Deferred after the slots, and run as soon: retired by the same
        // removals, before this seal.
        core::mem::take(&mut inner.retired).defer(guard);
    }

    /// Takes what the epoch handed back; true if that included slots.
    fn drain_mailbox(&self, inner: &mut Inner) -> bool {
        if self.mailbox.pending.load(Ordering::Acquire) == 0 {
            return false;
        }
        self.mailbox.pending.store(0, Ordering::Relaxed);
        // Swapped with a list emptied last time, so neither side loses
        // its room.
        let mut ready = core::mem::take(&mut inner.drained);
        core::mem::swap(&mut ready, &mut *self.mailbox.ready.lock());
        let mut slots_back = false;
        for (slots, mut aliases) in ready.drain(..) {
            inner.free_len += slots.len() as u32;
            if !slots.is_empty() {
                inner.ready.push(slots);
                slots_back = true;
            }
            inner.alias_free.extend_from_slice(&aliases);
            if inner.alias_limbo.capacity() == 0 {
                aliases.clear();
                inner.alias_limbo = aliases;
            }
        }
        inner.drained = ready;
        slots_back
    }

    /// Slots handed out that are neither live nor vacant: removed, in
    /// their grace period (sealed or not), or handed back by the epoch
    /// into the mailbox and not taken yet.
    fn waiting(&self, inner: &Inner) -> usize {
        (inner.next_fresh as usize - 1).saturating_sub(inner.live + inner.free_len as usize)
    }

    /// True if the shard has no vacant slot to hand out and at least
    /// [`GRACE_SLOTS_PER_SHARD`] slots waiting out their grace period, so
    /// that an insert would take a fresh slot to stand in for one of them.
    pub(crate) fn reclaim_behind(&self, inner: &Inner) -> bool {
        // (The mailbox, another allocation's line, read last.)
        inner.free_len == 0
            && self.waiting(inner) >= GRACE_SLOTS_PER_SHARD
            && self.mailbox.pending.load(Ordering::Acquire) == 0
    }

    /// The most slots in their grace period when the shard had to take a
    /// fresh one.
    pub(crate) fn grace_peak(&self, inner: &Inner) -> usize {
        inner.grace_peak as usize
    }

    /// Number of slots handed out and not vacant (live, or removed and
    /// still in their grace period), and slots ever handed out.
    pub(crate) fn slot_counts(&self, inner: &Inner) -> (usize, usize) {
        let ever = inner.next_fresh as usize - 1;
        (ever - inner.free_len as usize, ever)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::Rec;

    /// The epoch handing `slots` back, as the closure `seal` defers does.
    fn hand_back(sh: &Shard<Rec>, slots: Vec<u32>) {
        sh.mailbox.ready.lock().push((slots, Vec::new()));
        sh.mailbox.pending.store(1, Ordering::Release);
    }

    #[test]
    fn the_lists_that_carry_slots_are_reused_not_reallocated() {
        let arena = Arc::new(Arena::default());
        let sh = Shard::<Rec>::new(16, 1024, &arena);
        let mut inner = sh.hot.inner.lock();
        let n = LIMBO_BATCH;
        let taken: Vec<u32> = (0..n)
            .map(|_| sh.alloc(&mut inner, &crate::epoch::pin()).unwrap())
            .collect();
        hand_back(&sh, taken);
        // Every slot of the batch handed back is reused, then the spent
        // batch is kept, and the next limbo list is that list.
        for _ in 0..n {
            sh.alloc(&mut inner, &crate::epoch::pin()).unwrap();
        }
        assert_eq!(inner.limbo.capacity(), 0);
        let fresh = sh.alloc(&mut inner, &crate::epoch::pin()).unwrap();
        assert!(inner.ready.is_empty());
        assert_eq!(inner.spare.len(), 1);
        let room = inner.spare[0].as_ptr();
        // Retiring a batch's worth less one fills it in place.
        let g = crate::epoch::pin();
        for s in 1..n as u32 {
            sh.retire_slot(&mut inner, &g, s);
        }
        assert!(inner.spare.is_empty());
        assert_eq!(inner.limbo.as_ptr(), room, "the limbo list moved");
        assert_eq!(inner.limbo.len(), n - 1);
        // The mailbox's list of batches and the one emptied last time
        // trade places, so neither starts from nothing.
        hand_back(&sh, vec![fresh]);
        assert!(sh.drain_mailbox(&mut inner));
        let kept = inner.drained.capacity();
        assert!(kept >= 1);
        let other = sh.alloc(&mut inner, &crate::epoch::pin()).unwrap();
        hand_back(&sh, vec![other]);
        let mailbox_room = sh.mailbox.ready.lock().capacity();
        assert!(sh.drain_mailbox(&mut inner));
        assert_eq!(sh.mailbox.ready.lock().capacity(), kept);
        assert!(sh.mailbox.ready.lock().is_empty());
        assert_eq!(inner.drained.capacity(), mailbox_room);
        // A list sealed with a few slots is followed by one with room for
        // a whole batch, not one grown from nothing.
        sh.seal(&mut inner, &g);
        assert_eq!(inner.limbo.capacity(), 0);
        sh.retire_slot(&mut inner, &g, fresh);
        assert!(inner.limbo.capacity() >= n);
    }

    /// A sweep leaving a shard with a few slots in limbo does not seal
    /// them; the shard's next fresh slot does, so that a shard that only
    /// inserts from then on gets them back (the soak test found them
    /// stranded without it).
    #[test]
    fn a_few_slots_wait_in_limbo_until_a_fresh_slot_is_taken() {
        let arena = Arc::new(Arena::default());
        let sh = Shard::<Rec>::new(16, 1024, &arena);
        let mut inner = sh.hot.inner.lock();
        let g = crate::epoch::pin();
        let taken: Vec<u32> = (0..3).map(|_| sh.alloc(&mut inner, &g).unwrap()).collect();
        for &s in &taken {
            sh.retire_slot(&mut inner, &g, s);
        }
        sh.seal_some(&mut inner, &g);
        assert_eq!(inner.limbo.len(), 3, "sealed below SEAL_SOME");
        let fresh = sh.alloc(&mut inner, &g).unwrap();
        assert!(!taken.contains(&fresh));
        assert!(inner.limbo.is_empty(), "the fresh slot left them in limbo");
        // Enough of them, and the sweep seals.
        let more: Vec<u32> = (0..SEAL_SOME)
            .map(|_| sh.alloc(&mut inner, &g).unwrap())
            .collect();
        for s in more {
            sh.retire_slot(&mut inner, &g, s);
        }
        assert_eq!(inner.limbo.len(), SEAL_SOME);
        sh.seal_some(&mut inner, &g);
        assert!(inner.limbo.is_empty());
    }

    /// Zone lists: the inline one and the map agree on every instance,
    /// whichever holds it, and the inline one is taken again once empty.
    #[test]
    fn zone_lists_keep_each_instance_in_one_place() {
        let mut z = ZoneLists::default();
        let push = |z: &mut ZoneLists, k: u64| {
            let l = z.get_or_default(k);
            l.len += 1;
            l.head = k as u32;
        };
        push(&mut z, 7);
        push(&mut z, 9);
        push(&mut z, 7);
        assert_eq!(z.first_key, 7);
        assert_eq!(z.get(7).map(|l| l.len), Some(2));
        assert_eq!(z.get(9).map(|l| l.len), Some(1));
        assert!(z.rest.contains_key(&9));
        assert_eq!(z.get(8).map(|l| l.len), None);
        // 7 empties: the inline list is vacant, and an instance that is in
        // the map is not taken into it a second time.
        z.get_mut(7).unwrap().len = 0;
        z.remove(7);
        assert!(z.get(7).is_none());
        push(&mut z, 9);
        assert_eq!(z.get(9).map(|l| l.len), Some(2));
        assert_eq!(z.first.len, 0);
        // A new instance takes the vacant inline list.
        push(&mut z, 11);
        assert_eq!((z.first_key, z.first.len), (11, 1));
        let mut all: Vec<(u64, u32)> = z.iter().map(|(k, l)| (k, l.len)).collect();
        all.sort_unstable();
        assert_eq!(all, vec![(9, 2), (11, 1)]);
        // Promoted, 9 goes inline and 11 to the map: each still in one
        // place, with its list.
        z.promote(9);
        assert_eq!((z.first_key, z.first.len), (9, 2));
        assert_eq!(z.rest.get(&11).map(|l| l.len), Some(1));
        assert!(!z.rest.contains_key(&9));
        z.promote(9);
        z.promote(12); // no records: nothing moves
        assert_eq!((z.first_key, z.rest.len()), (9, 1));
        let mut all: Vec<(u64, u32)> = z.iter().map(|(k, l)| (k, l.len)).collect();
        all.sort_unstable();
        assert_eq!(all, vec![(9, 2), (11, 1)]);
        z.get_mut(9).unwrap().len = 0;
        z.remove(9);
        // 11, in the map, is promoted into the vacant inline list.
        z.promote(11);
        assert_eq!((z.first_key, z.first.len), (11, 1));
        assert!(z.rest.is_empty());
        z.get_mut(11).unwrap().len = 0;
        z.remove(11);
        assert!(z.rest.is_empty());
        assert_eq!(z.iter().count(), 0);
    }

    /// A shard has as many wheel lanes as its share pays for at half a
    /// byte a record (1 KiB of heads a lane), a power of two up to four.
    #[test]
    fn wheel_lanes_follow_the_share() {
        let lanes: Vec<usize> = [0, 4095, 4096, 8191, 8192, 15_625, 1 << 30]
            .into_iter()
            .map(wheel_lanes_for)
            .collect();
        assert_eq!(lanes, [1, 1, 2, 2, 4, 4, 4]);
        // A 1M table: 64 shards take four lanes, 256 one.
        assert_eq!(wheel_lanes_for(1_000_000usize.div_ceil(64)), 4);
        assert_eq!(wheel_lanes_for(1_000_000usize.div_ceil(256)), 1);
    }

    /// What every insert touches lies in the first 128 bytes of the
    /// shard's hot part (the lock and the published counts come first, 24
    /// bytes with the lock's own), the pair of lines fetched together.
    #[test]
    #[cfg(all(target_pointer_width = "64", not(loom)))]
    fn an_insert_touches_the_first_two_lines_of_a_shard() {
        use core::mem::offset_of;
        assert_eq!(offset_of!(Hot, inner), 16);
        let end = offset_of!(Inner, zones) + offset_of!(ZoneLists, rest);
        assert!(24 + end <= 128, "the hot fields end at {}", 24 + end);
        assert!(offset_of!(Inner, cur) < offset_of!(Inner, zones));
        assert!(offset_of!(Inner, wheel) < offset_of!(Inner, zones));
    }

    /// The lists' bytes count each list's room at its element's size,
    /// and the wheel's its heads; an alias handed back unseen is free
    /// again and no longer live.
    #[test]
    fn the_lists_and_the_wheel_are_counted_at_their_room() {
        let mut inner = Inner::new();
        assert_eq!((inner.ready_bytes(), inner.wheel_bytes()), (0, 0));
        inner.limbo = Vec::with_capacity(3);
        inner.cur = Vec::with_capacity(5);
        inner.alias_limbo = Vec::with_capacity(7);
        inner.alias_free = Vec::with_capacity(11);
        inner.spare = vec![Vec::with_capacity(13)];
        inner.ready = vec![Vec::with_capacity(17), Vec::with_capacity(19)];
        inner.drained = Vec::with_capacity(2);
        let u32s: usize = [
            &inner.limbo,
            &inner.cur,
            &inner.alias_limbo,
            &inner.alias_free,
        ]
        .into_iter()
        .chain(&inner.spare)
        .chain(&inner.ready)
        .map(Vec::capacity)
        .sum();
        let lists = inner.spare.capacity() + inner.ready.capacity();
        let pairs = inner.drained.capacity();
        assert!(u32s >= 75 && lists >= 3 && pairs >= 2);
        assert_eq!(
            inner.ready_bytes(),
            u32s * 4
                + lists * core::mem::size_of::<Vec<u32>>()
                + pairs * core::mem::size_of::<(Vec<u32>, Vec<u32>)>()
        );
        inner.wheel = Some(vec![0; 96].into_boxed_slice());
        assert_eq!(inner.wheel_bytes(), 96 * 4);
        inner.alias_live = 3;
        inner.alias_free_unseen(9);
        assert_eq!((inner.alias_live, inner.alias_free.last()), (2, Some(&9)));
    }

    /// A shard with no vacant slot asks for the ones behind their grace
    /// period once `GRACE_SLOTS_PER_SHARD` of them wait, not before.
    #[test]
    fn reclaim_behind_at_the_grace_limit() {
        let arena = Arc::new(Arena::default());
        let sh = Shard::<Rec>::new(16, 1024, &arena);
        let mut inner = sh.hot.inner.lock();
        let g = crate::epoch::pin();
        for _ in 1..GRACE_SLOTS_PER_SHARD {
            sh.alloc(&mut inner, &g).unwrap();
        }
        assert!(!sh.reclaim_behind(&inner));
        sh.alloc(&mut inner, &g).unwrap();
        assert!(sh.reclaim_behind(&inner));
    }

    /// A dropped shard frees its index at once, and with it the index's
    /// hold on the arena, rather than after a grace period.
    #[test]
    fn a_dropped_shard_lets_its_arena_go_at_once() {
        let arena = Arc::new(Arena::default());
        let sh = Shard::<Rec>::new(16, 1024, &arena);
        assert!(Arc::strong_count(&arena) > 1);
        drop(sh);
        assert_eq!(Arc::strong_count(&arena), 1);
    }

    /// The wheel's clock starts at the first filing, and only then; a
    /// far expiry waits in the last tick of the lap ahead, a near one in
    /// its own, and the shard's time due is the end of the earliest.
    #[test]
    fn the_wheel_starts_at_the_first_filing_and_files_within_one_lap() {
        use crate::Record;
        let arena = Arc::new(Arena::default());
        let sh = Shard::<Rec>::new(16, 1024, &arena);
        let mut inner = sh.hot.inner.lock();
        let g = crate::epoch::pin();
        let due = AtomicU64::new(u64::MAX);
        let now = 10_000 * TICK_MS + 5;
        sh.start_clock(&mut inner, now);
        assert_eq!(inner.cursor, 10_000);
        let file = |inner: &mut Inner, expiry: u64| {
            let slot = sh.alloc(inner, &g).unwrap();
            let h = rec(&sh.slab, slot).header();
            sh.file(inner, &due, slot, h, expiry, 10_000);
            let lane = slot as usize & (sh.wheel_lanes - 1);
            usize::from(h.wheel_slot.load(Ordering::Relaxed)) - lane
        };
        let last = 10_000 + WHEEL_TICKS as u64 - 1;
        assert_eq!(file(&mut inner, now + 3_600_000), sh.tick_lists(last));
        assert_eq!(due.load(Ordering::Relaxed), (last + 1) * TICK_MS);
        assert_eq!(file(&mut inner, now + 2_500), sh.tick_lists(10_002));
        assert_eq!(due.load(Ordering::Relaxed), 10_003 * TICK_MS);
        // Filed once: a later start leaves the clock alone.
        sh.start_clock(&mut inner, now + 50 * TICK_MS);
        assert_eq!(inner.cursor, 10_000);
    }

    /// A slot handed back unseen is vacant until it is taken again: the
    /// counts of slots in use say so both ways.
    #[test]
    fn a_slot_handed_back_unseen_is_vacant_until_taken_again() {
        let arena = Arc::new(Arena::default());
        let sh = Shard::<Rec>::new(16, 1024, &arena);
        let mut inner = sh.hot.inner.lock();
        let g = crate::epoch::pin();
        let a = sh.alloc(&mut inner, &g).unwrap();
        let b = sh.alloc(&mut inner, &g).unwrap();
        assert_eq!(sh.slot_counts(&inner), (2, 2));
        sh.free_unseen(&mut inner, a);
        sh.free_unseen(&mut inner, b);
        assert_eq!(sh.slot_counts(&inner), (0, 2));
        assert_eq!(sh.alloc(&mut inner, &g), Some(b));
        assert_eq!(sh.slot_counts(&inner), (1, 2));
        assert_eq!(sh.alloc(&mut inner, &g), Some(a));
        assert_eq!(sh.slot_counts(&inner), (2, 2));
    }

    /// Aliases retired wait in limbo until a whole batch is sealed, or
    /// until an alias must be taken fresh; the live count follows.
    #[test]
    fn aliases_wait_in_limbo_for_a_batch_or_a_fresh_one() {
        let arena = Arc::new(Arena::default());
        let sh = Shard::<Rec>::new(16, 1024, &arena);
        let mut inner = sh.hot.inner.lock();
        let g = crate::epoch::pin();
        let taken: Vec<u32> = (0..=LIMBO_BATCH)
            .map(|_| sh.alloc_alias(&mut inner, &g).unwrap())
            .collect();
        assert_eq!(inner.alias_live, LIMBO_BATCH + 1);
        sh.retire_alias(&mut inner, &g, taken[0]);
        assert_eq!(
            (inner.alias_live, inner.alias_limbo.len()),
            (LIMBO_BATCH, 1)
        );
        // None free: a fresh one is taken, and the limbo list sealed.
        sh.alloc_alias(&mut inner, &g).unwrap();
        assert_eq!(
            (inner.alias_live, inner.alias_limbo.len()),
            (LIMBO_BATCH + 1, 0)
        );
        for &a in &taken[1..] {
            sh.retire_alias(&mut inner, &g, a);
        }
        assert_eq!(inner.alias_limbo.len(), 0, "sealed as a batch");
        assert_eq!(inner.alias_live, 1);
    }

    /// The grace period's peak is the slots neither live nor vacant when
    /// a fresh one was taken.
    #[test]
    fn the_grace_peak_leaves_out_the_live_slots() {
        let arena = Arc::new(Arena::default());
        let sh = Shard::<Rec>::new(16, 1024, &arena);
        let mut inner = sh.hot.inner.lock();
        let g = crate::epoch::pin();
        // Twenty slots taken by live records, then six removed ones.
        for _ in 0..20 {
            sh.alloc(&mut inner, &g).unwrap();
            inner.live += 1;
        }
        assert_eq!(sh.grace_peak(&inner), 0);
        for _ in 0..6 {
            sh.alloc(&mut inner, &g).unwrap();
        }
        assert_eq!(sh.grace_peak(&inner), 5);
    }

    /// A wheel more than a lap behind meets a record at its tick in the
    /// last lap, where everything filed lies, without walking the laps
    /// before.
    #[test]
    fn a_wheel_laps_behind_looks_at_the_last_lap() {
        use crate::Record;
        let arena = Arc::new(Arena::default());
        let sh = Shard::<Rec>::new(16, 1024, &arena);
        let mut inner = sh.hot.inner.lock();
        let g = crate::epoch::pin();
        let due = AtomicU64::new(u64::MAX);
        sh.start_clock(&mut inner, 10_000 * TICK_MS);
        let slot = sh.alloc(&mut inner, &g).unwrap();
        let h = rec(&sh.slab, slot).header();
        sh.file(&mut inner, &due, slot, h, 10_002 * TICK_MS + 500, 10_000);
        let laps = 10 * WHEEL_TICKS as u64;
        let now_tick = 10_002 + laps + 3;
        let found = sh.due(&mut inner, now_tick * TICK_MS, 0);
        assert_eq!(found.map(|(s, t, _)| (s, t)), Some((slot, 10_002 + laps)));
    }
}
