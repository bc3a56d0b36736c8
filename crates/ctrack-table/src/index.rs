//! A shard's hash index: cache-line buckets of twelve 32-bit entries with a
//! tag byte each, probed linearly bucket by bucket, read without locks.
//!
//! A bucket is two 64-bit metadata words and twelve entries. The metadata
//! holds twelve tag bytes (eight bits of the entry's hash, never zero; zero
//! marks a free entry) and a 32-bit overflow count. A lookup loads the two
//! words and finds the entries whose tag matches with a few word
//! operations (SWAR), instead of loading and testing every entry: this was
//! the largest single cost of a lookup when tags lived inside the entries.
//! An entry is a 24-bit reference to a record slot (or, with its alias
//! bit, to an alias naming a record in another shard); references are
//! never zero.
//!
//! Deletion needs no tombstones: each bucket counts the entries stored past
//! it because it was full when they were inserted (F14's "outbound overflow
//! count"). A lookup moves to the next bucket only while that count is
//! non-zero, and removing a displaced entry decrements the counts it
//! incremented. Writers hold the shard lock (so each metadata word has one
//! writer at a time and is updated by load and store); readers load with
//! Acquire and tolerate concurrent change: a reader may miss an entry
//! inserted while it looks (the lookup then happened before the insert) and
//! may find a record that is being removed (the record's own liveness flag
//! tells).

use crate::arena::Arena;
use crate::sync::{Arc, AtomicU32, AtomicU64, Ordering};

/// Entries per bucket.
pub(crate) const BUCKET_ENTRIES: usize = 12;
/// Marks a reference to an alias rather than to a record slot.
pub(crate) const ALIAS_BIT: u32 = 1 << 23;
/// Mask of a reference (slot or alias number, with [`ALIAS_BIT`]).
pub(crate) const REF_MASK: u32 = (1 << 24) - 1;

const ONES: u64 = 0x0101_0101_0101_0101;
const HIGHS: u64 = 0x8080_8080_8080_8080;
/// The tag bytes of the second metadata word (the other four bytes hold the
/// overflow count).
const META1_TAGS: u64 = 0x0000_0000_8080_8080;

#[repr(C, align(64))]
#[derive(Debug, Default)]
pub(crate) struct Bucket {
    /// Bytes 0..8 of `meta[0]` and 0..4 of `meta[1]`: the tags of entries
    /// 0..12. The high half of `meta[1]`: the overflow count.
    meta: [AtomicU64; 2],
    entries: [AtomicU32; BUCKET_ENTRIES],
}

/// The tag of a hash: its low eight bits, zero mapped to one.
#[inline]
pub(crate) fn tag_of(hash: u64) -> u8 {
    (hash as u8).max(1)
}

/// A mask with the high bit of every byte of `w` equal to `tag` set (and
/// possibly of some bytes above one that is: such false matches are
/// harmless, every match is checked).
#[inline(always)]
fn matches(w: u64, tag: u8) -> u64 {
    let x = w ^ ONES.wrapping_mul(u64::from(tag));
    x.wrapping_sub(ONES) & !x & HIGHS
}

/// Entries a bucket's two metadata words say match `tag`: bit `8 * i + 7`
/// set for entry `i`.
#[inline(always)]
fn tag_mask(m0: u64, m1: u64, tag: u8) -> (u64, u64) {
    (matches(m0, tag), matches(m1, tag) & META1_TAGS)
}

/// Iterates the entry numbers of a match mask pair.
#[inline(always)]
fn for_each_match(mut lo: u64, mut hi: u64, mut f: impl FnMut(usize) -> bool) -> bool {
    while lo != 0 {
        let i = (lo.trailing_zeros() / 8) as usize;
        lo &= lo - 1;
        if f(i) {
            return true;
        }
    }
    while hi != 0 {
        let i = 8 + (hi.trailing_zeros() / 8) as usize;
        hi &= hi - 1;
        if f(i) {
            return true;
        }
    }
    false
}

impl Bucket {
    #[inline(always)]
    fn overflow(&self, m1: u64) -> u32 {
        let _ = self;
        (m1 >> 32) as u32
    }

    /// Its first free entry (tag 0), if any: both tag words at once (the
    /// lowest byte `matches` flags is always a true match). Writers only,
    /// under the shard's lock. (The tags read one by one, a load and a
    /// test each until the first free one, left the loop at a place the
    /// processor could not predict: `bench cps` fills 8% faster this way,
    /// `bench zones` commits 4–15%, for about the same instructions;
    /// BENCHMARKS.md, "free index entries found a word at a time", where
    /// the removal's search, the same way, reclaims a zone 15% faster.)
    #[inline(always)]
    fn first_free(&self) -> Option<usize> {
        let (lo, hi) = tag_mask(
            self.meta[0].load(Ordering::Relaxed),
            self.meta[1].load(Ordering::Relaxed),
            0,
        );
        if lo != 0 {
            Some((lo.trailing_zeros() / 8) as usize)
        } else if hi != 0 {
            Some(8 + (hi.trailing_zeros() / 8) as usize)
        } else {
            None
        }
    }

    /// The tag byte of entry `i`, with a writer's plain load.
    fn tag(&self, i: usize) -> u8 {
        let (w, shift) = if i < 8 { (0, 8 * i) } else { (1, 8 * (i - 8)) };
        (self.meta[w].load(Ordering::Relaxed) >> shift) as u8
    }

    /// Sets the tag byte of entry `i` (a writer: load and store).
    fn set_tag(&self, i: usize, tag: u8) {
        let (w, shift) = if i < 8 { (0, 8 * i) } else { (1, 8 * (i - 8)) };
        let m = self.meta[w].load(Ordering::Relaxed);
        let m = (m & !(0xff << shift)) | (u64::from(tag) << shift);
        self.meta[w].store(m, Ordering::Release);
    }

    /// Adds `delta` to the overflow count (a writer).
    fn add_overflow(&self, delta: i32) {
        let m = self.meta[1].load(Ordering::Relaxed);
        let count = ((m >> 32) as u32).wrapping_add_signed(delta);
        self.meta[1].store(
            (m & 0xffff_ffff) | (u64::from(count) << 32),
            Ordering::Release,
        );
    }
}

/// One shard's index: `n` buckets in arena memory, the arena kept alive by
/// the index itself (or, under the model checker, a boxed slice).
#[derive(Debug)]
pub(crate) struct Index {
    #[cfg(not(loom))]
    buckets: *const Bucket,
    #[cfg(loom)]
    buckets: Box<[Bucket]>,
    n: usize,
    /// Owner of the memory `buckets` points into.
    #[cfg(not(loom))]
    _arena: Arc<Arena>,
}

// SAFETY: the buckets are atomics in memory of the arena the index holds
// (so it outlives the index); sharing or sending the pointer is sharing
// `&[Bucket]`, which is `Send + Sync`.
#[cfg(not(loom))]
unsafe impl Send for Index {}
// SAFETY: as above.
#[cfg(not(loom))]
unsafe impl Sync for Index {}

/// Buckets a lookup visits before giving up, whatever the overflow counts
/// say: a bound on the work of one lookup even if the index were full.
pub(crate) const MAX_PROBE_BUCKETS: usize = 64;

impl Index {
    /// An index of `buckets` buckets (any number: positions are found by
    /// multiplying, not masking), every entry empty, in `arena`'s memory.
    /// The index holds the arena, which therefore outlives it.
    pub(crate) fn new(buckets: usize, arena: &Arc<Arena>) -> Index {
        let n = buckets.max(1);
        #[cfg(not(loom))]
        {
            Index {
                buckets: zeroed_buckets(n, arena),
                n,
                _arena: Arc::clone(arena),
            }
        }
        #[cfg(loom)]
        {
            let _ = arena;
            Index {
                buckets: (0..n).map(|_| Bucket::default()).collect(),
                n,
            }
        }
    }

    #[inline(always)]
    fn b(&self) -> &[Bucket] {
        #[cfg(not(loom))]
        {
            // SAFETY: `buckets` points to `n` zero-initialised buckets
            // (atomics, valid at zero) in memory of `_arena`, which the
            // index holds, so it lives at least as long as `&self`.
            unsafe { core::slice::from_raw_parts(self.buckets, self.n) }
        }
        #[cfg(loom)]
        {
            &self.buckets
        }
    }

    /// Number of buckets.
    pub(crate) fn buckets(&self) -> usize {
        self.n
    }

    /// The bucket after `b`, wrapping.
    #[inline(always)]
    fn next(&self, b: usize) -> usize {
        if b + 1 == self.n { 0 } else { b + 1 }
    }

    /// Bytes of memory the index occupies.
    pub(crate) fn bytes(&self) -> usize {
        self.buckets() * core::mem::size_of::<Bucket>()
    }

    /// The home bucket: 32 bits of the hash (above the tag, below the
    /// shard bits) scaled to the number of buckets.
    #[inline]
    fn home(&self, hash: u64) -> usize {
        ((u64::from((hash >> 8) as u32) * self.n as u64) >> 32) as usize
    }

    /// Calls `f` with each reference whose tag matches `hash`, in probe
    /// order, until `f` returns `Some`.
    #[inline]
    pub(crate) fn find<T>(&self, hash: u64, mut f: impl FnMut(u32) -> Option<T>) -> Option<T> {
        let tag = tag_of(hash);
        let mut b = self.home(hash);
        let buckets = self.b();
        for _ in 0..MAX_PROBE_BUCKETS.min(self.n) {
            let bucket = &buckets[b];
            let m0 = bucket.meta[0].load(Ordering::Acquire);
            let m1 = bucket.meta[1].load(Ordering::Acquire);
            let (lo, hi) = tag_mask(m0, m1, tag);
            let mut found = None;
            if for_each_match(lo, hi, |i| {
                let v = bucket.entries[i].load(Ordering::Acquire);
                if v == 0 {
                    return false;
                }
                found = f(v);
                found.is_some()
            }) {
                return found;
            }
            if bucket.overflow(m1) == 0 {
                return None;
            }
            b = self.next(b);
        }
        None
    }

    /// The first reference to a record slot (not an alias) in `bucket`,
    /// the home bucket of `hash` ([`Index::bucket`]), whose tag matches,
    /// or 0: a guess made ahead of the real lookup, to prefetch the
    /// record.
    #[inline]
    pub(crate) fn first_in(bucket: &Bucket, hash: u64) -> u32 {
        let tag = tag_of(hash);
        let m0 = bucket.meta[0].load(Ordering::Relaxed);
        let m1 = bucket.meta[1].load(Ordering::Relaxed);
        let (lo, hi) = tag_mask(m0, m1, tag);
        let mut r = 0;
        for_each_match(lo, hi, |i| {
            let v = bucket.entries[i].load(Ordering::Relaxed);
            if v != 0 && v & ALIAS_BIT == 0 {
                r = v;
                return true;
            }
            false
        });
        r
    }

    /// The home bucket of `hash`, for prefetching.
    #[inline]
    pub(crate) fn bucket_addr(&self, hash: u64) -> *const u8 {
        (self.bucket(hash) as *const Bucket).cast()
    }

    /// The home bucket of `hash`.
    #[inline]
    pub(crate) fn bucket(&self, hash: u64) -> &Bucket {
        &self.b()[self.home(hash)]
    }

    /// True if [`Index::insert`] of `hash` would find a free entry within
    /// the probe bound. Writers only; normally answered by the home
    /// bucket, which the insert reads next anyway.
    pub(crate) fn has_room(&self, hash: u64) -> bool {
        let buckets = self.b();
        let mut b = self.home(hash);
        for _ in 0..MAX_PROBE_BUCKETS.min(self.n) {
            if buckets[b].first_free().is_some() {
                return true;
            }
            b = self.next(b);
        }
        false
    }

    /// Stores `reference` under `hash`. Writers only (shard lock held).
    /// Fails only if every bucket within the probe bound is full.
    pub(crate) fn insert(&self, hash: u64, reference: u32) -> Result<(), ()> {
        debug_assert!(reference != 0 && reference <= REF_MASK);
        let buckets = self.b();
        let home = self.home(hash);
        let limit = MAX_PROBE_BUCKETS.min(self.n);
        // Find the first free entry before touching any overflow count.
        let mut found = None;
        let mut b = home;
        for step in 0..limit {
            if let Some(i) = buckets[b].first_free() {
                found = Some((step, b, i));
                break;
            }
            b = self.next(b);
        }
        let Some((steps, bucket, slot)) = found else {
            return Err(());
        };
        let mut p = home;
        for _ in 0..steps {
            buckets[p].add_overflow(1);
            p = self.next(p);
        }
        // The entry before its tag: a reader that sees the tag sees it.
        buckets[bucket].entries[slot].store(reference, Ordering::Release);
        buckets[bucket].set_tag(slot, tag_of(hash));
        Ok(())
    }

    /// Removes the entry holding `reference` stored under `hash`. Writers
    /// only. Returns false if there is none.
    pub(crate) fn remove(&self, hash: u64, reference: u32) -> bool {
        let tag = tag_of(hash);
        let buckets = self.b();
        let home = self.home(hash);
        let limit = MAX_PROBE_BUCKETS.min(self.n);
        let mut b = home;
        for step in 0..limit {
            let bucket = &buckets[b];
            let m1 = bucket.meta[1].load(Ordering::Relaxed);
            // The entries of the hash's tag, found a word at a time (as
            // `Bucket::first_free`: about 20 more instructions a removal
            // from a sparse index, but no exit the processor mispredicts;
            // a flag `matches` raises by mistake costs a comparison of the
            // reference, no more).
            let (lo, hi) = tag_mask(bucket.meta[0].load(Ordering::Relaxed), m1, tag);
            let mut at = None;
            for_each_match(lo, hi, |i| {
                let hit = bucket.entries[i].load(Ordering::Relaxed) == reference;
                if hit {
                    at = Some(i);
                }
                hit
            });
            if let Some(i) = at {
                // The tag first: a reader that no longer sees it does
                // not look at the entry.
                bucket.set_tag(i, 0);
                bucket.entries[i].store(0, Ordering::Release);
                let mut p = home;
                for _ in 0..step {
                    buckets[p].add_overflow(-1);
                    p = self.next(p);
                }
                return true;
            }
            if bucket.overflow(m1) == 0 {
                return false;
            }
            b = self.next(b);
        }
        false
    }

    /// Calls `f` with every reference stored in the buckets `from` to
    /// `from + buckets - 1` after the home bucket of `hash` (0: the home
    /// bucket itself; its hash neighbourhood), in probe order, until `f`
    /// returns true: the early drop's candidates. Without the shard lock
    /// the references may be stale (an entry removed or reused meanwhile):
    /// the caller checks each again under the locks.
    pub(crate) fn neighbourhood(
        &self,
        hash: u64,
        from: usize,
        buckets: usize,
        mut f: impl FnMut(u32) -> bool,
    ) -> bool {
        let all = self.b();
        let n = self.n;
        let mut b = (self.home(hash) + from % n) % n;
        for _ in 0..buckets.min(n.saturating_sub(from)) {
            let bucket = &all[b];
            for i in 0..BUCKET_ENTRIES {
                if bucket.tag(i) == 0 {
                    continue;
                }
                let v = bucket.entries[i].load(Ordering::Relaxed);
                if v != 0 && f(v) {
                    return true;
                }
            }
            b = self.next(b);
        }
        false
    }

    /// Touches every page of the index (stores the zero each first
    /// metadata word already holds, one per 4 KiB), so that its memory is
    /// faulted in and zeroed now rather than by the first inserts.
    /// Writers only (the shard lock held: no other writer stores meanwhile).
    pub(crate) fn prefault(&self) {
        const PER_PAGE: usize = 4096 / core::mem::size_of::<Bucket>();
        for b in self.b().iter().step_by(PER_PAGE) {
            let m = b.meta[0].load(Ordering::Relaxed);
            b.meta[0].store(m, Ordering::Relaxed);
        }
    }

    /// The most buckets a lookup walks ([`Index::find`]'s bound).
    pub(crate) fn probe_bound(&self) -> usize {
        MAX_PROBE_BUCKETS.min(self.n)
    }

    /// The longest probe sequence a lookup can take, in buckets: one more
    /// than the longest run of consecutive buckets whose overflow count is
    /// not zero (a lookup moves on only past those), at most
    /// the probe bound. Zero for an empty index. A full scan, for
    /// statistics (hash-flood reports), not for the packet path.
    pub(crate) fn longest_probe(&self) -> usize {
        let all = self.b();
        let (mut longest, mut run, mut any) = (0usize, 0usize, false);
        // Twice round, so that a run wrapping past the end is counted whole.
        for i in 0..2 * self.n {
            let bucket = &all[i % self.n];
            let m1 = bucket.meta[1].load(Ordering::Relaxed);
            if i < self.n && (bucket.meta[0].load(Ordering::Relaxed) != 0 || m1 != 0) {
                any = true;
            }
            if bucket.overflow(m1) != 0 {
                run += 1;
                longest = longest.max(run);
            } else {
                run = 0;
            }
        }
        if !any {
            return 0;
        }
        (longest + 1).min(MAX_PROBE_BUCKETS.min(self.n))
    }

    /// Number of occupied entries (a full scan, for reports and tests).
    pub(crate) fn occupied(&self) -> usize {
        self.b()
            .iter()
            .map(|b| (0..BUCKET_ENTRIES).filter(|&i| b.tag(i) != 0).count())
            .sum()
    }
}

/// An index replaced by a larger one gives its memory back once it goes
/// (after every reader that could see it is gone: the shard keeps its
/// index in an `EpochBox`): a table that starts small and grows (the
/// tracker's IPv6 table) otherwise kept every smaller index it replaced,
/// about as much again as the live one.
#[cfg(not(loom))]
impl Drop for Index {
    fn drop(&mut self) {
        // SAFETY: `buckets` came from `_arena`'s `alloc_zeroed` for `n`
        // buckets (`zeroed_buckets`), and the index, which alone refers to
        // them, is being dropped: nothing reads or writes them after this.
        unsafe {
            self._arena
                .release(self.buckets.cast(), self.n * core::mem::size_of::<Bucket>());
        }
    }
}

#[cfg(not(loom))]
fn zeroed_buckets(n: usize, arena: &Arena) -> *const Bucket {
    let p = arena.alloc_zeroed(n * core::mem::size_of::<Bucket>(), 64);
    assert!(!p.is_null(), "out of memory for a connection index");
    // A `Bucket` is atomics, for which all-zero bytes are a valid value (0);
    // arena memory is zeroed and committed as touched. (A thread calling
    // `Table::populate_ahead` faults in what was handed out, the index
    // sized for the connection limit included, off the packet path.)
    p.cast()
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn swar_matches_every_equal_byte() {
        for tag in 1..=255u8 {
            for pos in 0..8 {
                let w = u64::from(tag) << (8 * pos);
                assert_ne!(
                    matches(w, tag) & (0x80 << (8 * pos)),
                    0,
                    "tag {tag} at {pos}"
                );
            }
            // A word of other tags and empties reports no match at its
            // lowest byte, and every reported match is checked anyway.
            let other = tag.wrapping_add(1).max(1);
            let w = ONES.wrapping_mul(u64::from(other));
            if other != tag {
                assert_eq!(matches(w, tag) & 0x80, 0);
            }
        }
        assert_eq!(matches(0, 7), 0);
    }

    #[test]
    fn insert_find_remove() {
        let arena = Arc::new(Arena::default());
        let ix = Index::new(4, &arena);
        let h = 0x1234_5678_9abc_de01u64;
        ix.insert(h, 7).unwrap();
        assert_eq!(ix.find(h, |r| (r == 7).then_some(r)), Some(7));
        assert_eq!(Index::first_in(ix.bucket(h), h), 7);
        // Same home, different tag: not reported.
        let other = h ^ 0x02;
        assert_eq!(ix.find(other, Some), None);
        assert!(ix.remove(h, 7));
        assert!(!ix.remove(h, 7));
        assert_eq!(ix.find(h, Some), None);
        assert_eq!(Index::first_in(ix.bucket(h), h), 0);
        assert_eq!(ix.occupied(), 0);
    }

    #[test]
    fn overflow_chains_and_removal() {
        // One bucket's worth plus more, all with the same home bucket.
        let arena = Arc::new(Arena::default());
        let ix = Index::new(4, &arena);
        let home_bits = 0xc000_0000u64 << 8;
        let n = BUCKET_ENTRIES as u32 * 2 + 3;
        let h = |r: u32| home_bits | u64::from(r & 0xff);
        for r in 1..=n {
            ix.insert(h(r), r).unwrap();
        }
        for r in 1..=n {
            assert_eq!(ix.find(h(r), |x| (x == r).then_some(x)), Some(r), "ref {r}");
        }
        // Remove the first bucket's entries: the displaced ones stay found.
        for r in 1..=BUCKET_ENTRIES as u32 {
            assert!(ix.remove(h(r), r));
        }
        for r in BUCKET_ENTRIES as u32 + 1..=n {
            assert_eq!(ix.find(h(r), |x| (x == r).then_some(x)), Some(r));
        }
        for r in BUCKET_ENTRIES as u32 + 1..=n {
            assert!(ix.remove(h(r), r));
        }
        // Every overflow count is back to zero.
        assert!(
            ix.b()
                .iter()
                .all(|b| b.overflow(b.meta[1].load(Ordering::Relaxed)) == 0)
        );
        assert_eq!(ix.occupied(), 0);
    }

    #[test]
    fn many_keys_in_a_small_index() {
        let arena = Arc::new(Arena::default());
        let ix = Index::new(8, &arena);
        let mut rng = 0x9e37_79b9_7f4a_7c15u64;
        let mut keys = Vec::new();
        for r in 1..=90u32 {
            rng = rng
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ix.insert(rng, r).unwrap();
            keys.push((rng, r));
        }
        for &(h, r) in &keys {
            assert_eq!(ix.find(h, |x| (x == r).then_some(x)), Some(r));
        }
        for &(h, r) in keys.iter().step_by(2) {
            assert!(ix.remove(h, r));
        }
        for (k, &(h, r)) in keys.iter().enumerate() {
            assert_eq!(ix.find(h, |x| (x == r).then_some(x)).is_some(), k % 2 == 1);
        }
    }

    #[test]
    fn neighbourhood_and_longest_probe() {
        let arena = Arc::new(Arena::default());
        let ix = Index::new(8, &arena);
        assert_eq!(ix.longest_probe(), 0);
        // Every key homes in bucket 0: 30 of them fill buckets 0, 1 and
        // half of 2, so a lookup may probe three buckets.
        for r in 1..=30u32 {
            ix.insert(u64::from(r) << 56 | 0x11, r).unwrap();
        }
        assert_eq!(ix.longest_probe(), 3);
        let mut seen = Vec::new();
        ix.neighbourhood(0x11, 0, 2, |v| {
            seen.push(v);
            false
        });
        assert_eq!(seen.len(), 2 * BUCKET_ENTRIES);
        let mut first = 0;
        assert!(ix.neighbourhood(0x11, 0, 1, |v| {
            first = v;
            true
        }));
        assert_eq!(first, 1);
        // From the second bucket on: its twelve, then half of the third.
        let mut later = Vec::new();
        ix.neighbourhood(0x11, 1, 8, |v| {
            later.push(v);
            false
        });
        assert_eq!(later, (13..=30).collect::<Vec<u32>>());
        for r in 13..=30u32 {
            assert!(ix.remove(u64::from(r) << 56 | 0x11, r));
        }
        assert_eq!(ix.longest_probe(), 1);
    }

    #[test]
    fn has_room_says_whether_an_insert_fits() {
        let arena = Arc::new(Arena::default());
        let ix = Index::new(1, &arena);
        for r in 1..=BUCKET_ENTRIES as u32 {
            assert!(ix.has_room(u64::from(r)));
            ix.insert(u64::from(r), r).unwrap();
        }
        assert!(!ix.has_room(99));
        assert!(ix.remove(3, 3));
        assert!(ix.has_room(99));
    }

    /// An insert takes the first free entry of its bucket, wherever the
    /// holes are, and tags of 1 (which a zero byte's borrow could be
    /// mistaken for) beside a free entry do not mislead it; removal finds
    /// each reference among entries of the same tag.
    #[test]
    fn inserts_take_the_first_free_entry() {
        let arena = Arc::new(Arena::default());
        let ix = Index::new(1, &arena);
        // Every hash's tag is 1 (`tag_of` of a low byte 0 or 1).
        let h = |r: u32| u64::from(r % 2) << 40;
        for r in 1..=BUCKET_ENTRIES as u32 {
            ix.insert(h(r), r).unwrap();
        }
        for k in 0..BUCKET_ENTRIES {
            // Empty entry k alone: its reference is k + 1.
            let r = k as u32 + 1;
            assert!(ix.remove(h(r), r));
            assert_eq!(ix.b()[0].first_free(), Some(k));
            if k + 1 < BUCKET_ENTRIES {
                // And k + 1 too: k still comes first.
                assert!(ix.remove(h(r + 1), r + 1));
                assert_eq!(ix.b()[0].first_free(), Some(k));
                ix.insert(h(100), 100).unwrap();
                assert_eq!(ix.b()[0].entries[k].load(Ordering::Relaxed), 100);
                ix.insert(h(101), 101).unwrap();
                assert_eq!(ix.b()[0].entries[k + 1].load(Ordering::Relaxed), 101);
                assert!(ix.remove(h(100), 100) && ix.remove(h(101), 101));
                ix.insert(h(r), r).unwrap();
                assert_eq!(ix.b()[0].first_free(), Some(k + 1));
                ix.insert(h(r + 1), r + 1).unwrap();
                assert_eq!(ix.b()[0].entries[k + 1].load(Ordering::Relaxed), r + 1);
            } else {
                ix.insert(h(r), r).unwrap();
            }
            assert_eq!(ix.b()[0].entries[k].load(Ordering::Relaxed), r);
            assert_eq!(ix.b()[0].first_free(), None);
        }
        for r in 1..=BUCKET_ENTRIES as u32 {
            assert!(ix.remove(h(r), r), "{r}");
            assert!(!ix.remove(h(r), r), "{r}");
        }
        assert_eq!(ix.occupied(), 0);
    }

    #[test]
    fn full_index_refuses() {
        let arena = Arc::new(Arena::default());
        let ix = Index::new(1, &arena);
        for r in 1..=BUCKET_ENTRIES as u32 {
            ix.insert(u64::from(r), r).unwrap();
        }
        assert!(ix.insert(99, 99).is_err());
    }

    /// Entries of the second metadata word (8 to 11) are counted and
    /// offered as early-drop candidates by their own tags, however many
    /// of them are taken.
    #[test]
    fn the_second_words_entries_are_counted_and_offered() {
        let arena = Arc::new(Arena::default());
        let ix = Index::new(1, &arena);
        for n in 1..=BUCKET_ENTRIES as u32 {
            ix.insert(u64::from(n) << 8, n).unwrap();
            assert_eq!(ix.occupied(), n as usize);
            let mut seen = Vec::new();
            ix.neighbourhood(0, 0, 1, |r| {
                seen.push(r);
                false
            });
            assert_eq!(seen, (1..=n).collect::<Vec<_>>());
        }
    }

    /// The home bucket comes from the hash's 32 bits above the tag's
    /// byte: neither the tag (compared within the bucket) nor the shard's
    /// bits above (equal in one shard) choose it, so they do not crowd
    /// one bucket.
    #[test]
    fn the_home_bucket_is_the_hashs_middle_bits() {
        let arena = Arc::new(Arena::default());
        let ix = Index::new(2, &arena);
        assert_eq!(ix.home(1 << 39), 1, "the top bit of the 32");
        for other in [0xff, 1 << 23, 1 << 40, 0xffff_ff00_0000_00ff] {
            assert_eq!(ix.home(other), 0, "{other:#x}");
        }
        let ix = Index::new(256, &arena);
        assert_eq!(ix.home(0xab << 32), 0xab);
    }

    /// A lone entry, in a bucket other than the first, makes a probe of
    /// one bucket; a run of full buckets that wraps past the end is
    /// counted whole; the prefetch's guess skips an alias.
    #[test]
    fn a_lone_entry_a_wrapping_run_and_an_alias() {
        let arena = Arc::new(Arena::default());
        let ix = Index::new(8, &arena);
        // Bits 37 to 39 choose one of eight buckets.
        let home = |b: u64, low: u32| b << 37 | u64::from(low);
        ix.insert(home(5, 1), 1).unwrap();
        assert_eq!(ix.longest_probe(), 1);
        // 61 keys homing in bucket 6 fill 6, 7, 0, 1 and 2 and one entry
        // of 3: five buckets overflowed, across the end.
        for r in 2..=62 {
            ix.insert(home(6, r), r).unwrap();
        }
        assert_eq!(ix.longest_probe(), 6);
        let ix = Index::new(8, &arena);
        ix.insert(home(3, 9), ALIAS_BIT | 4).unwrap();
        ix.insert(home(3, 9), 7).unwrap();
        assert_eq!(Index::first_in(ix.bucket(home(3, 9)), home(3, 9)), 7);
    }

    /// A dropped index gives its whole pages back to the system (they
    /// read as zeroes again where it can release them), all of them.
    #[test]
    fn a_dropped_index_gives_its_pages_back() {
        let arena = Arc::new(Arena::default());
        let n = 1024;
        let ix = Index::new(n, &arena);
        // Bits 30 to 39 choose one of 1,024 buckets: an entry in each.
        for b in 0..n as u64 {
            ix.insert(b << 30 | 1, 1).unwrap();
        }
        let len = n * core::mem::size_of::<Bucket>();
        let p: *const u8 = ix.buckets.cast();
        drop(ix);
        // SAFETY: the arena, held here, keeps its regions mapped; nothing
        // uses the dropped index's memory, read as plain bytes.
        let bytes = unsafe { core::slice::from_raw_parts(p, len) };
        let released = cfg!(all(target_os = "linux", not(miri)));
        let from = p.addr().next_multiple_of(4096) - p.addr();
        let pages = bytes[from..].chunks_exact(4096);
        assert!(pages.len() >= 15);
        for page in pages {
            assert_eq!(page.iter().all(|&b| b == 0), released);
        }
    }
}
