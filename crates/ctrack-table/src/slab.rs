//! Slot storage that grows without moving: chunks allocated on first use
//! from the table's arena (which the slab holds) and kept until the slab is
//! dropped, so a slot's address never changes and a reader needs no lock
//! to reach it.
//!
//! Chunk sizes follow the shard's expected share of the table: the first
//! 256 chunks hold `S` slots each, where `S` is about 1/256 of the
//! shard's share (so that a table at its expected size leaves at most one
//! chunk partly empty per shard: well under 1% of its memory), and later
//! chunks double, so a shard can grow far past its share. Slot 0 is never handed out, so a
//! reference is never zero.

use core::fmt;
use core::marker::PhantomData;

use crate::arena::Arena;
use crate::sync::{Arc, AtomicPtr, Ordering};

/// Chunks of the fixed size.
pub(crate) const FIXED: usize = 256;
/// Doubling chunks after them.
const GROWING: usize = 18;
const CHUNKS: usize = FIXED + GROWING;
/// One more than the largest slot number (slot numbers have 23 bits).
pub(crate) const MAX_SLOTS: u32 = 1 << 23;

/// Growable, never-moving storage of `T`s addressed by slot number.
pub(crate) struct Slab<T> {
    chunks: [AtomicPtr<T>; CHUNKS],
    /// log2 of the fixed chunk size.
    shift: u32,
    /// The fixed chunk size less one, and the slots of the fixed chunks:
    /// kept, not derived from `shift` on every lookup (a slot is located
    /// a dozen times a connection made and removed).
    mask: usize,
    fixed: usize,
    /// Where the chunks come from; held, so it outlives them.
    arena: Arc<Arena>,
    _owns: PhantomData<T>,
}

impl<T> fmt::Debug for Slab<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Slab")
            .field("chunk_slots", &(1usize << self.shift))
            .field("chunks", &self.allocated_chunks())
            .finish()
    }
}

impl<T> Slab<T> {
    /// Slots in chunk `k`.
    #[inline]
    fn chunk_len(&self, k: usize) -> usize {
        if k < FIXED {
            1 << self.shift
        } else {
            (FIXED << self.shift) << (k - FIXED)
        }
    }

    /// The chunk of `slot` and its offset in it.
    #[inline]
    fn locate(&self, slot: u32) -> (usize, usize) {
        let k = slot as usize >> self.shift;
        if k < FIXED {
            return (k, slot as usize & self.mask);
        }
        self.locate_far(slot)
    }

    /// [`Slab::locate`] past the fixed chunks.
    #[inline(never)]
    fn locate_far(&self, slot: u32) -> (usize, usize) {
        let slot = slot as usize;
        let fixed = self.fixed;
        // Chunk FIXED + j holds `fixed << j` slots, starting at
        // `fixed * 2^j` (the fixed part plus the doubling chunks before).
        let q = slot / fixed;
        let j = (usize::BITS - 1 - q.leading_zeros()) as usize;
        (FIXED + j, slot - (fixed << j))
    }

    /// [`Slab::locate`], or None for a slot past the limit (tested only
    /// past the fixed chunks: a fixed chunk's slot is below it).
    #[inline]
    fn locate_checked(&self, slot: u32) -> Option<(usize, usize)> {
        let k = slot as usize >> self.shift;
        if k < FIXED {
            return Some((k, slot as usize & self.mask));
        }
        (slot < MAX_SLOTS).then(|| self.locate_far(slot))
    }

    /// Number of chunks allocated.
    pub(crate) fn allocated_chunks(&self) -> usize {
        self.chunks
            .iter()
            .filter(|c| !c.load(Ordering::Relaxed).is_null())
            .count()
    }

    /// Bytes of one of the fixed chunks.
    pub(crate) fn fixed_chunk_bytes(&self) -> usize {
        self.chunk_len(0) * core::mem::size_of::<T>()
    }

    /// Bytes held by allocated chunks.
    pub(crate) fn bytes(&self) -> usize {
        (0..CHUNKS)
            .filter(|&k| !self.chunks[k].load(Ordering::Relaxed).is_null())
            .map(|k| self.chunk_len(k) * core::mem::size_of::<T>())
            .sum()
    }
}

impl<T: Default> Slab<T> {
    /// An empty slab for a shard expected to hold about `share` slots, its
    /// chunks to come from `arena`.
    pub(crate) fn new(share: usize, arena: &Arc<Arena>) -> Self {
        let s = (share / FIXED).clamp(64, 1 << 15).next_power_of_two();
        Slab {
            chunks: core::array::from_fn(|_| AtomicPtr::new(core::ptr::null_mut())),
            shift: s.trailing_zeros(),
            mask: s - 1,
            fixed: FIXED * s,
            arena: Arc::clone(arena),
            _owns: PhantomData,
        }
    }

    /// The slot, if its chunk exists.
    #[inline]
    pub(crate) fn get(&self, slot: u32) -> Option<&T> {
        let (k, off) = self.locate_checked(slot)?;
        let base = self.chunks[k].load(Ordering::Acquire);
        if base.is_null() {
            return None;
        }
        // SAFETY: a non-null chunk pointer comes from `ensure`: memory of
        // `self.arena` (held by the slab, so alive while `&self` is) for
        // `chunk_len(k)` `T`s, each initialised before the pointer was
        // published; `off < chunk_len(k)` by `locate`. Shared references to slots
        // coexist with the exclusive one of `get_mut_unchecked` only under
        // that method's contract.
        Some(unsafe { &*base.add(off) })
    }

    /// The slot's address, for prefetching; null if its chunk is missing.
    #[inline]
    pub(crate) fn addr(&self, slot: u32) -> *const T {
        let Some((k, off)) = self.locate_checked(slot) else {
            return core::ptr::null();
        };
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
    // SAFETY: an unsafe fn because exclusivity cannot be checked here; the
    // contract above is what makes the `&mut` sound, and the one caller
    // (`Writer::insert`) upholds it with a slot fresh from `alloc`.
    #[allow(clippy::mut_from_ref)]
    pub(crate) unsafe fn get_mut_unchecked(&self, slot: u32) -> &mut T {
        let (k, off) = self.locate(slot);
        let base = self.chunks[k].load(Ordering::Acquire);
        assert!(!base.is_null(), "slot {slot} in an unallocated chunk");
        // SAFETY: the chunk holds `chunk_len(k)` initialised `T`s and `off`
        // is in range (as in `get`); exclusivity is the caller's contract.
        unsafe { &mut *base.add(off) }
    }

    /// Makes sure the chunk holding `slot` exists, allocating it from the
    /// slab's arena. Writers only (the owner's lock held, so chunks are
    /// never allocated twice). False if `slot` is past the limit or memory
    /// ran out.
    pub(crate) fn ensure(&self, slot: u32) -> bool {
        if slot >= MAX_SLOTS {
            return false;
        }
        let (k, _) = self.locate(slot);
        if self.chunks[k].load(Ordering::Acquire).is_null() {
            let len = self.chunk_len(k);
            let align = core::mem::align_of::<T>().clamp(64, 4096);
            let p: *mut T = self
                .arena
                .alloc_zeroed(len * core::mem::size_of::<T>(), align)
                .cast();
            if p.is_null() {
                return false;
            }
            for i in 0..len {
                // SAFETY: `p` is fresh arena memory for `len` `T`s, aligned
                // for `T` (`align` is at least `T`'s alignment, which is at
                // most a page); each element is written once before the
                // chunk is published.
                unsafe { p.add(i).write(T::default()) };
            }
            self.chunks[k].store(p, Ordering::Release);
        }
        true
    }

    /// Makes sure the chunks of slots `1..slots` exist ([`Slab::ensure`]
    /// for each): their records written, so their pages are faulted in
    /// and zeroed now rather than on the packet path. Writers only. False
    /// if memory ran out.
    pub(crate) fn ensure_up_to(&self, slots: u32) -> bool {
        let mut slot = 1;
        while slot < slots.min(MAX_SLOTS) {
            if !self.ensure(slot) {
                return false;
            }
            let (k, off) = self.locate(slot);
            slot += (self.chunk_len(k) - off) as u32;
        }
        true
    }
}

impl<T> Drop for Slab<T> {
    fn drop(&mut self) {
        if !core::mem::needs_drop::<T>() {
            return;
        }
        for k in 0..CHUNKS {
            let p = self.chunks[k].load(Ordering::Relaxed);
            if !p.is_null() {
                let slice = core::ptr::slice_from_raw_parts_mut(p, self.chunk_len(k));
                // SAFETY: the chunk holds `chunk_len(k)` initialised `T`s
                // (see `ensure`) in memory of `self.arena`, still held; the
                // slab is being dropped, so no reference into it remains.
                // The memory itself goes with the arena.
                unsafe { core::ptr::drop_in_place(slice) };
            }
        }
    }
}

// SAFETY: the slab owns its `T`s like a `Box<[T]>` does; sending it moves
// them, sharing it shares `&T`s.
unsafe impl<T: Send> Send for Slab<T> {}
// SAFETY: shared access hands out `&T` to several threads (needs `T: Sync`)
// and lets any thread create `T`s that another thread drops (needs
// `T: Send`).
unsafe impl<T: Send + Sync> Sync for Slab<T> {}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn geometry() {
        let arena = Arc::new(Arena::default());
        let s: Slab<u64> = Slab::new(1 << 20, &arena);
        let c = 1usize << s.shift;
        assert_eq!(c, (1 << 20) / FIXED);
        assert_eq!(s.locate(0), (0, 0));
        assert_eq!(s.locate(c as u32 - 1), (0, c - 1));
        assert_eq!(s.locate(c as u32), (1, 0));
        let fixed = (FIXED * c) as u32;
        assert_eq!(s.locate(fixed - 1), (FIXED - 1, c - 1));
        assert_eq!(s.locate(fixed), (FIXED, 0));
        assert_eq!(s.locate(2 * fixed - 1), (FIXED, fixed as usize - 1));
        assert_eq!(s.locate(2 * fixed), (FIXED + 1, 0));
        // The last slot lies in the last chunk's range.
        let (k, off) = s.locate(MAX_SLOTS - 1);
        assert!(k < CHUNKS && off < s.chunk_len(k));
        // Every slot maps to a distinct place, for small shards too.
        let small: Slab<u64> = Slab::new(10, &arena);
        let mut seen = std::collections::HashSet::new();
        for slot in 0..if cfg!(miri) { 300 } else { 20_000 } {
            let (k, off) = small.locate(slot);
            assert!(off < small.chunk_len(k));
            assert!(seen.insert((k, off)));
        }
    }

    #[test]
    fn grows_without_moving() {
        let arena = Arc::new(Arena::default());
        let s: Slab<u64> = Slab::new(100, &arena);
        assert!(s.get(5).is_none());
        assert!(s.ensure(5));
        let a = s.get(5).unwrap() as *const u64;
        // Far ahead: a doubling chunk (under Miri, the next fixed one, as
        // writing 2^16 slots there takes long).
        let far = if cfg!(miri) { 100 } else { 100_000 };
        assert!(s.ensure(far));
        assert_eq!(s.get(5).unwrap() as *const u64, a);
        assert!(s.get(far).is_some());
        assert!(!s.ensure(MAX_SLOTS));
        assert_eq!(s.allocated_chunks(), 2);
    }
}
