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

#[cfg(not(loom))]
type Buckets = crate::region::Region<Bucket>;
#[cfg(loom)]
type Buckets = Box<[Bucket]>;

/// One shard's index.
#[derive(Debug)]
pub(crate) struct Index {
    buckets: Buckets,
    mask: usize,
}

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
    /// An index with at least `buckets` buckets (rounded up to a power of
    /// two), every entry empty.
    pub(crate) fn new(buckets: usize) -> Index {
        let n = buckets.max(1).next_power_of_two();
        Index {
            buckets: zeroed_buckets(n),
            mask: n - 1,
        }
    }

    #[inline(always)]
    fn b(&self) -> &[Bucket] {
        #[cfg(not(loom))]
        {
            self.buckets.as_slice()
        }
        #[cfg(loom)]
        {
            &self.buckets
        }
    }

    /// Number of buckets.
    pub(crate) fn buckets(&self) -> usize {
        self.mask + 1
    }

    /// Bytes of memory the index occupies.
    pub(crate) fn bytes(&self) -> usize {
        self.buckets() * core::mem::size_of::<Bucket>()
    }

    #[inline]
    fn home(&self, hash: u64) -> usize {
        (hash >> 8) as usize & self.mask
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
            b = (b + 1) & self.mask;
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
            b = (b + 1) & self.mask;
        }
        let Some((steps, bucket, slot)) = found else {
            return Err(());
        };
        let mut b = home;
        for _ in 0..steps {
            self.b()[b].overflow.fetch_add(1, Ordering::Release);
            b = (b + 1) & self.mask;
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
                        p = (p + 1) & self.mask;
                    }
                    return true;
                }
            }
            if self.b()[b].overflow.load(Ordering::Relaxed) == 0 {
                return false;
            }
            b = (b + 1) & self.mask;
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
fn zeroed_buckets(n: usize) -> Buckets {
    // SAFETY: a `Bucket` is sixteen `AtomicU32`s, for which all-zero bytes
    // are a valid value (0). A zeroed region lets the kernel hand out pages
    // as they are touched, so an index sized for the connection limit
    // costs memory only where it is used.
    unsafe { crate::region::Region::zeroed(n) }
}

#[cfg(loom)]
fn zeroed_buckets(n: usize) -> Buckets {
    (0..n).map(|_| Bucket::default()).collect()
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn insert_find_remove() {
        let ix = Index::new(4);
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
        let ix = Index::new(4);
        let home_bits = 3u64 << 8;
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
        let ix = Index::new(1);
        for r in 1..=BUCKET_ENTRIES as u32 {
            ix.insert(u64::from(r), r).unwrap();
        }
        assert!(ix.insert(99, 99).is_err());
    }
}
