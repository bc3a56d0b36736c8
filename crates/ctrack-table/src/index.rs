//! A shard's hash index: buckets of fifteen 32-bit entries and an overflow
//! count, probed linearly bucket by bucket, read without locks.
//!
//! An entry is `tag << 24 | reference`: eight bits of the hash to skip most
//! non-matching records without touching them, and a 24-bit reference to a
//! record slot (or, with [`ALIAS_BIT`], to an alias naming a record in
//! another shard). Zero is an empty entry; references are never zero.
//!
//! Deletion needs no tombstones: each bucket counts the entries stored past
//! it because it was full when they were inserted (F14's "outbound overflow
//! count"). A lookup moves to the next bucket only while that count is
//! non-zero, and removing a displaced entry decrements the counts it
//! incremented. Writers hold the shard lock; readers load entries with
//! Acquire and tolerate concurrent change: a reader may miss an entry
//! inserted while it looks (the lookup then happened before the insert)
//! and may find a record that is being removed (the record's own liveness
//! flag tells).

use crate::sync::{AtomicU32, Ordering};

/// Entries per bucket (one 64-byte cache line with the overflow count).
pub(crate) const BUCKET_ENTRIES: usize = 15;
/// Marks a reference to an alias rather than to a record slot.
pub(crate) const ALIAS_BIT: u32 = 1 << 23;
/// Mask of a reference (slot or alias number, with [`ALIAS_BIT`]).
pub(crate) const REF_MASK: u32 = (1 << 24) - 1;

#[repr(C, align(64))]
#[derive(Debug, Default)]
pub(crate) struct Bucket {
    entries: [AtomicU32; BUCKET_ENTRIES],
    /// Entries stored in later buckets while this one was full.
    overflow: AtomicU32,
}

/// One shard's index: `n` buckets in arena memory (or, under the model
/// checker, a boxed slice).
#[derive(Debug)]
pub(crate) struct Index {
    #[cfg(not(loom))]
    buckets: *const Bucket,
    #[cfg(loom)]
    buckets: Box<[Bucket]>,
    n: usize,
}

// SAFETY: the buckets are atomics in memory the arena keeps until the table
// (which owns every index) is dropped; sharing or sending the pointer is
// sharing `&[Bucket]`, which is `Send + Sync`.
#[cfg(not(loom))]
unsafe impl Send for Index {}
// SAFETY: as above.
#[cfg(not(loom))]
unsafe impl Sync for Index {}

/// The tag of a hash: its low eight bits.
#[inline]
pub(crate) fn tag_of(hash: u64) -> u32 {
    (hash & 0xff) as u32
}

#[inline]
fn pack(hash: u64, reference: u32) -> u32 {
    debug_assert!(reference != 0 && reference <= REF_MASK);
    (tag_of(hash) << 24) | reference
}

/// Entries visited before a lookup gives up, whatever the overflow counts
/// say: a bound on the work of one lookup even if the index were full.
const MAX_PROBE_BUCKETS: usize = 64;

impl Index {
    /// An index of `buckets` buckets (any number: positions are found by
    /// multiplying, not masking), every entry empty, in `arena`'s memory.
    /// The arena must outlive the index.
    pub(crate) fn new(buckets: usize, arena: &crate::arena::Arena) -> Index {
        let n = buckets.max(1);
        Index {
            buckets: zeroed_buckets(n, arena),
            n,
        }
    }

    #[inline(always)]
    fn b(&self) -> &[Bucket] {
        #[cfg(not(loom))]
        {
            // SAFETY: `buckets` points to `n` zero-initialised buckets
            // (atomics, valid at zero) in arena memory that outlives the
            // index (see `new`).
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
        for _ in 0..MAX_PROBE_BUCKETS.min(self.buckets()) {
            let bucket = &self.b()[b];
            for e in &bucket.entries {
                let v = e.load(Ordering::Acquire);
                if v != 0
                    && v >> 24 == tag
                    && let Some(found) = f(v & REF_MASK)
                {
                    return Some(found);
                }
            }
            if bucket.overflow.load(Ordering::Acquire) == 0 {
                return None;
            }
            b = self.next(b);
        }
        None
    }

    /// The first reference to a record slot (not an alias) in the home
    /// bucket of `hash` whose tag matches, or 0: a guess made ahead of the
    /// real lookup, to prefetch the record.
    #[inline]
    pub(crate) fn first(&self, hash: u64) -> u32 {
        let tag = tag_of(hash);
        for e in &self.b()[self.home(hash)].entries {
            let v = e.load(Ordering::Relaxed);
            if v != 0 && v >> 24 == tag && v & ALIAS_BIT == 0 {
                return v & REF_MASK;
            }
        }
        0
    }

    /// The home bucket of `hash`, for prefetching.
    #[inline]
    pub(crate) fn bucket_addr(&self, hash: u64) -> *const u8 {
        (&self.b()[self.home(hash)] as *const Bucket).cast()
    }

    /// Stores `reference` under `hash`. Writers only (shard lock held).
    /// Fails only if every bucket within the probe bound is full.
    pub(crate) fn insert(&self, hash: u64, reference: u32) -> Result<(), ()> {
        let home = self.home(hash);
        let limit = MAX_PROBE_BUCKETS.min(self.buckets());
        // Find the first free entry before touching any overflow count.
        let mut found = None;
        let mut b = home;
        'outer: for step in 0..limit {
            for (i, e) in self.b()[b].entries.iter().enumerate() {
                if e.load(Ordering::Relaxed) == 0 {
                    found = Some((step, b, i));
                    break 'outer;
                }
            }
            b = self.next(b);
        }
        let Some((steps, bucket, slot)) = found else {
            return Err(());
        };
        let mut b = home;
        for _ in 0..steps {
            self.b()[b].overflow.fetch_add(1, Ordering::Release);
            b = self.next(b);
        }
        self.b()[bucket].entries[slot].store(pack(hash, reference), Ordering::Release);
        Ok(())
    }

    /// Removes the entry holding `reference` stored under `hash`. Writers
    /// only. Returns false if there is none.
    pub(crate) fn remove(&self, hash: u64, reference: u32) -> bool {
        let want = pack(hash, reference);
        let home = self.home(hash);
        let limit = MAX_PROBE_BUCKETS.min(self.buckets());
        let mut b = home;
        for step in 0..limit {
            for e in &self.b()[b].entries {
                if e.load(Ordering::Relaxed) == want {
                    e.store(0, Ordering::Release);
                    let mut p = home;
                    for _ in 0..step {
                        self.b()[p].overflow.fetch_sub(1, Ordering::Release);
                        p = self.next(p);
                    }
                    return true;
                }
            }
            if self.b()[b].overflow.load(Ordering::Relaxed) == 0 {
                return false;
            }
            b = self.next(b);
        }
        false
    }

    /// Number of occupied entries (a full scan, for tests).
    #[cfg(test)]
    pub(crate) fn occupied(&self) -> usize {
        self.b()
            .iter()
            .flat_map(|b| b.entries.iter())
            .filter(|e| e.load(Ordering::Relaxed) != 0)
            .count()
    }
}

#[cfg(not(loom))]
fn zeroed_buckets(n: usize, arena: &crate::arena::Arena) -> *const Bucket {
    let p = arena.alloc_zeroed(n * core::mem::size_of::<Bucket>(), 64);
    assert!(!p.is_null(), "out of memory for a connection index");
    // A `Bucket` is sixteen `AtomicU32`s, for which all-zero bytes are a
    // valid value (0); arena memory is zeroed and committed as touched, so
    // an index sized for the connection limit costs memory only where used.
    p.cast()
}

#[cfg(loom)]
fn zeroed_buckets(n: usize, _arena: &crate::arena::Arena) -> Box<[Bucket]> {
    (0..n).map(|_| Bucket::default()).collect()
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn insert_find_remove() {
        let arena = crate::arena::Arena::default();
        let ix = Index::new(4, &arena);
        let h = 0x1234_5678_9abc_de01u64;
        ix.insert(h, 7).unwrap();
        assert_eq!(ix.find(h, |r| (r == 7).then_some(r)), Some(7));
        // Same home, different tag: not reported.
        let other = h ^ 0x02;
        assert_eq!(ix.find(other, Some), None);
        assert!(ix.remove(h, 7));
        assert!(!ix.remove(h, 7));
        assert_eq!(ix.find(h, Some), None);
        assert_eq!(ix.occupied(), 0);
    }

    #[test]
    fn overflow_chains_and_removal() {
        // One bucket's worth plus more, all with the same home bucket.
        let arena = crate::arena::Arena::default();
        let ix = Index::new(4, &arena);
        let home_bits = 0xc000_0000u64 << 8;
        let n = BUCKET_ENTRIES as u32 * 2 + 3;
        for r in 1..=n {
            let h = home_bits | u64::from(r & 0xff);
            ix.insert(h, r).unwrap();
        }
        for r in 1..=n {
            let h = home_bits | u64::from(r & 0xff);
            assert_eq!(ix.find(h, |x| (x == r).then_some(x)), Some(r), "ref {r}");
        }
        // Remove the first bucket's entries: the displaced ones stay found.
        for r in 1..=BUCKET_ENTRIES as u32 {
            assert!(ix.remove(home_bits | u64::from(r & 0xff), r));
        }
        for r in BUCKET_ENTRIES as u32 + 1..=n {
            let h = home_bits | u64::from(r & 0xff);
            assert_eq!(ix.find(h, |x| (x == r).then_some(x)), Some(r));
        }
        for r in BUCKET_ENTRIES as u32 + 1..=n {
            assert!(ix.remove(home_bits | u64::from(r & 0xff), r));
        }
        // Every overflow count is back to zero.
        assert!(
            ix.b()
                .iter()
                .all(|b| b.overflow.load(Ordering::Relaxed) == 0)
        );
        assert_eq!(ix.occupied(), 0);
    }

    #[test]
    fn full_index_refuses() {
        let arena = crate::arena::Arena::default();
        let ix = Index::new(1, &arena);
        for r in 1..=BUCKET_ENTRIES as u32 {
            ix.insert(u64::from(r), r).unwrap();
        }
        assert!(ix.insert(99, 99).is_err());
    }
}
