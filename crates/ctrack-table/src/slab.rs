//! Slot storage that grows without moving: chunk `k` holds `64 << k`
//! slots, allocated on first use and kept until the slab is dropped, so a
//! slot's address never changes and a reader needs no lock to reach it.
//!
//! A slot number `s` lives in chunk `k = log2(s / 64 + 1)`; seventeen
//! chunks give 2^23 slots. Slot 0 exists but the shard never hands it out,
//! so a reference is never zero.

use core::fmt;
use core::marker::PhantomData;

use crate::sync::{AtomicPtr, AtomicU32, Ordering};

const BASE_SHIFT: u32 = 6;
/// Number of chunks.
pub(crate) const CHUNKS: usize = 17;
/// One more than the largest slot number.
pub(crate) const MAX_SLOTS: u32 = (1 << (BASE_SHIFT + CHUNKS as u32)) - (1 << BASE_SHIFT);

#[inline]
fn locate(slot: u32) -> (usize, usize) {
    let q = (slot >> BASE_SHIFT) + 1;
    let k = 31 - q.leading_zeros();
    let first = ((1u32 << k) - 1) << BASE_SHIFT;
    (k as usize, (slot - first) as usize)
}

#[inline]
fn chunk_len(k: usize) -> usize {
    1usize << (BASE_SHIFT as usize + k)
}

/// Growable, never-moving storage of `T`s addressed by slot number.
pub(crate) struct Slab<T> {
    chunks: [AtomicPtr<T>; CHUNKS],
    /// Bit `k`: chunk `k` is a mapping (see `region`).
    mapped: AtomicU32,
    _owns: PhantomData<Box<[T]>>,
}

impl<T> fmt::Debug for Slab<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Slab")
            .field("chunks", &self.allocated_chunks())
            .finish()
    }
}

impl<T: Default> Slab<T> {
    pub(crate) fn new() -> Self {
        Slab {
            chunks: core::array::from_fn(|_| AtomicPtr::new(core::ptr::null_mut())),
            mapped: AtomicU32::new(0),
            _owns: PhantomData,
        }
    }

    /// The slot, if its chunk exists.
    #[inline]
    pub(crate) fn get(&self, slot: u32) -> Option<&T> {
        if slot >= MAX_SLOTS {
            return None;
        }
        let (k, off) = locate(slot);
        let base = self.chunks[k].load(Ordering::Acquire);
        if base.is_null() {
            return None;
        }
        // SAFETY: a non-null chunk pointer comes from `alloc_slice` of
        // `chunk_len(k)` initialised `T`s (see `ensure`), which are freed
        // only when the slab is dropped; `off < chunk_len(k)` by
        // construction of `locate`. Shared references to slots coexist with
        // the exclusive ones of `get_mut_unchecked` only under that
        // method's contract.
        Some(unsafe { &*base.add(off) })
    }

    /// The slot's address, for prefetching; null if its chunk is missing.
    #[inline]
    pub(crate) fn addr(&self, slot: u32) -> *const T {
        if slot >= MAX_SLOTS {
            return core::ptr::null();
        }
        let (k, off) = locate(slot);
        let base = self.chunks[k].load(Ordering::Acquire);
        if base.is_null() {
            return core::ptr::null();
        }
        base.wrapping_add(off)
    }

    /// Exclusive access to a slot.
    ///
    /// # Safety
    /// No other reference to this slot may exist or be created while the
    /// returned one lives: the slot must be vacant (unreachable from any
    /// index) and every reader that could have reached it before it was
    /// vacated must be gone (the epoch grace period has passed).
    #[allow(clippy::mut_from_ref)]
    pub(crate) unsafe fn get_mut_unchecked(&self, slot: u32) -> &mut T {
        let (k, off) = locate(slot);
        let base = self.chunks[k].load(Ordering::Acquire);
        assert!(!base.is_null(), "slot {slot} in an unallocated chunk");
        // SAFETY: the chunk holds `chunk_len(k)` initialised `T`s and
        // `off` is in range (as in `get`); exclusivity is the caller's
        // contract.
        unsafe { &mut *base.add(off) }
    }

    /// Makes sure the chunk holding `slot` exists. Writers only (the
    /// owner's lock held, so chunks are never allocated twice).
    pub(crate) fn ensure(&self, slot: u32) -> bool {
        if slot >= MAX_SLOTS {
            return false;
        }
        let (k, _) = locate(slot);
        if self.chunks[k].load(Ordering::Acquire).is_null() {
            let (p, mapped) = crate::region::alloc_slice::<T>(chunk_len(k));
            if mapped {
                self.mapped.fetch_or(1 << k, Ordering::Relaxed);
            }
            self.chunks[k].store(p, Ordering::Release);
        }
        true
    }
}

impl<T> Slab<T> {
    /// Number of chunks allocated.
    pub(crate) fn allocated_chunks(&self) -> usize {
        self.chunks
            .iter()
            .filter(|c| !c.load(Ordering::Relaxed).is_null())
            .count()
    }

    /// Bytes held by allocated chunks.
    pub(crate) fn bytes(&self) -> usize {
        (0..CHUNKS)
            .filter(|&k| !self.chunks[k].load(Ordering::Relaxed).is_null())
            .map(|k| chunk_len(k) * core::mem::size_of::<T>())
            .sum()
    }
}

impl<T> Drop for Slab<T> {
    fn drop(&mut self) {
        let mapped = self.mapped.load(Ordering::Relaxed);
        for (k, c) in self.chunks.iter().enumerate() {
            let p = c.load(Ordering::Relaxed);
            if !p.is_null() {
                // SAFETY: `p` came from `alloc_slice(chunk_len(k))`, which
                // reported the mapping recorded in `mapped`; the slab is
                // being dropped, so no reference into it remains.
                unsafe { crate::region::free_slice(p, chunk_len(k), mapped & (1 << k) != 0) };
            }
        }
    }
}

// SAFETY: the slab owns its `T`s like a `Box<[T]>` does; sending it moves
// them, sharing it shares `&T`s.
unsafe impl<T: Send> Send for Slab<T> {}
// SAFETY: shared access hands out `&T` to several threads (needs `T: Sync`)
// and lets any thread allocate chunks of new `T`s that another thread drops
// (needs `T: Send`).
unsafe impl<T: Send + Sync> Sync for Slab<T> {}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn geometry() {
        assert_eq!(locate(0), (0, 0));
        assert_eq!(locate(63), (0, 63));
        assert_eq!(locate(64), (1, 0));
        assert_eq!(locate(191), (1, 127));
        assert_eq!(locate(192), (2, 0));
        assert_eq!(
            locate(MAX_SLOTS - 1),
            (CHUNKS - 1, chunk_len(CHUNKS - 1) - 1)
        );
        assert_eq!(MAX_SLOTS, (1 << 23) - 64);
        // Every slot maps to a distinct place.
        let mut seen = std::collections::HashSet::new();
        for s in 0..5000 {
            let (k, off) = locate(s);
            assert!(off < chunk_len(k));
            assert!(seen.insert((k, off)));
        }
    }

    #[test]
    fn grows_without_moving() {
        let s: Slab<u64> = Slab::new();
        assert!(s.get(5).is_none());
        assert!(s.ensure(5));
        let a = s.get(5).unwrap() as *const u64;
        assert!(s.ensure(1000));
        assert_eq!(s.get(5).unwrap() as *const u64, a);
        assert!(s.get(1000).is_some());
        assert!(!s.ensure(MAX_SLOTS));
        assert_eq!(s.allocated_chunks(), 2);
    }
}
