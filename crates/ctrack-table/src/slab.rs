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

/// Chunks of the fixed size, for a shard's records.
pub(crate) const FIXED: usize = 256;
/// Doubling chunks after them.
const GROWING: usize = 18;
const CHUNKS: usize = FIXED + GROWING;
/// Chunks of the fixed size, and in all, for a shard's aliases ([`AliasSlab`]).
const ALIAS_FIXED: usize = 16;
const ALIAS_CHUNKS: usize = ALIAS_FIXED + 14;
/// One more than the largest slot number (slot numbers have 23 bits).
pub(crate) const MAX_SLOTS: u32 = 1 << 23;
/// A chunk holds at least this many bytes (and 32 slots): a page of
/// 128-byte records. (64 slots at least, a shard of a 1M table in 256
/// shards left half of 8 KiB unused on average: 0.5 bytes a connection.)
const MIN_CHUNK_BYTES: usize = 4096;
const MIN_CHUNK_SLOTS: usize = 32;

/// The aliases of a shard (alias number to record id): four bytes each,
/// and only translated connections have one, so a directory of 30 chunks
/// of at least 4 KiB instead of the records' 274 chunks of at least 32
/// slots. Each directory is part of every shard of both families whether
/// or not it ever holds anything: with the records' directory's size,
/// the aliases' took 2,224 of a shard's 4,864 fixed bytes (`bench memory
/// --conns 1000000 --shards 256`: 138.7 bytes a connection by the
/// table's accounting; 137.8 with this one).
pub(crate) type AliasSlab = Slab<crate::sync::AtomicU32, ALIAS_FIXED, ALIAS_CHUNKS>;

/// Growable, never-moving storage of `T`s addressed by slot number, in
/// `F` chunks of one size and then `C - F` doubling ones.
pub(crate) struct Slab<T, const F: usize = FIXED, const C: usize = CHUNKS> {
    chunks: [AtomicPtr<T>; C],
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

impl<T, const F: usize, const C: usize> fmt::Debug for Slab<T, F, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Slab")
            .field("chunk_slots", &(1usize << self.shift))
            .field("chunks", &self.allocated_chunks())
            .finish()
    }
}

impl<T, const F: usize, const C: usize> Slab<T, F, C> {
    /// Slots in chunk `k`.
    #[inline]
    fn chunk_len(&self, k: usize) -> usize {
        if k < F {
            1 << self.shift
        } else {
            (F << self.shift) << (k - F)
        }
    }

    /// The chunk of `slot` and its offset in it.
    #[inline]
    fn locate(&self, slot: u32) -> (usize, usize) {
        let k = slot as usize >> self.shift;
        if k < F {
            return (k, slot as usize & self.mask);
        }
        self.locate_far(slot)
    }

    /// [`Slab::locate`] past the fixed chunks.
    #[inline(never)]
    fn locate_far(&self, slot: u32) -> (usize, usize) {
        let slot = slot as usize;
        let fixed = self.fixed;
        // Chunk F + j holds `fixed << j` slots, starting at
        // `fixed * 2^j` (the fixed part plus the doubling chunks before).
        let q = slot / fixed;
        let j = (usize::BITS - 1 - q.leading_zeros()) as usize;
        (F + j, slot - (fixed << j))
    }

    /// [`Slab::locate`], or None for a slot past the limit (tested only
    /// past the fixed chunks: a fixed chunk's slot is below it).
    #[inline]
    fn locate_checked(&self, slot: u32) -> Option<(usize, usize)> {
        let k = slot as usize >> self.shift;
        if k < F {
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
        (0..C)
            .filter(|&k| !self.chunks[k].load(Ordering::Relaxed).is_null())
            .map(|k| self.chunk_len(k) * core::mem::size_of::<T>())
            .sum()
    }
}

impl<T: Default, const F: usize, const C: usize> Slab<T, F, C> {
    /// An empty slab for a shard expected to hold about `share` slots, its
    /// chunks to come from `arena`.
    pub(crate) fn new(share: usize, arena: &Arc<Arena>) -> Self {
        let least = (MIN_CHUNK_BYTES / core::mem::size_of::<T>().max(1)).max(MIN_CHUNK_SLOTS);
        let s = (share / F).clamp(least, 1 << 15).next_power_of_two();
        // The last chunk ends past the last slot number: chunk F + j
        // starts at slot `F * s * 2^j`.
        assert!(
            C > F && ((F * s) as u64) << (C - F) >= u64::from(MAX_SLOTS),
            "a slab of {F} + {} chunks cannot hold {MAX_SLOTS} slots",
            C - F
        );
        Slab {
            chunks: core::array::from_fn(|_| AtomicPtr::new(core::ptr::null_mut())),
            shift: s.trailing_zeros(),
            mask: s - 1,
            fixed: F * s,
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

impl<T, const F: usize, const C: usize> Drop for Slab<T, F, C> {
    fn drop(&mut self) {
        if !core::mem::needs_drop::<T>() {
            return;
        }
        for k in 0..C {
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
unsafe impl<T: Send, const F: usize, const C: usize> Send for Slab<T, F, C> {}
// SAFETY: shared access hands out `&T` to several threads (needs `T: Sync`)
// and lets any thread create `T`s that another thread drops (needs
// `T: Send`).
unsafe impl<T: Send + Sync, const F: usize, const C: usize> Sync for Slab<T, F, C> {}

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
        // An alias slab: chunks of 4 KiB at least, the last slot in its
        // last chunk's range.
        let a = AliasSlab::new(0, &arena);
        assert_eq!(a.chunk_len(0), 1024);
        let (k, off) = a.locate(MAX_SLOTS - 1);
        assert!(k < ALIAS_CHUNKS && off < a.chunk_len(k));
        assert!(!a.ensure(MAX_SLOTS));
        assert!(a.ensure(1) && a.get(1).is_some() && a.get(1024).is_none());
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
        // Far ahead: the first doubling chunk (under Miri, the next fixed
        // one, as writing the 2^17 slots of that one takes long).
        let c = s.chunk_len(0) as u32;
        let far = if cfg!(miri) {
            c + 100
        } else {
            FIXED as u32 * c + 100
        };
        assert!(s.ensure(far));
        assert_eq!(s.get(5).unwrap() as *const u64, a);
        assert!(s.get(far).is_some());
        assert!(!s.ensure(MAX_SLOTS));
        assert_eq!(s.allocated_chunks(), 2);
    }

    /// Filling ahead stops at the slot asked for, not one past it (the
    /// next chunk is left alone); a slot's address is where it lies; a
    /// fixed chunk's bytes and the slab's description say its geometry.
    #[test]
    fn fills_ahead_to_the_slot_and_says_its_geometry() {
        let arena = Arc::new(Arena::default());
        let s: Slab<u64> = Slab::new(100, &arena);
        let c = s.chunk_len(0);
        assert_eq!(s.fixed_chunk_bytes(), c * 8);
        assert_eq!(
            format!("{s:?}"),
            format!("Slab {{ chunk_slots: {c}, chunks: 0 }}")
        );
        assert!(s.ensure_up_to(c as u32));
        assert_eq!(s.allocated_chunks(), 1);
        assert!(s.addr(c as u32).is_null());
        assert!(s.ensure_up_to(c as u32 + 1));
        assert_eq!(s.allocated_chunks(), 2);
        for slot in [1, c as u32 - 1, c as u32] {
            assert_eq!(s.addr(slot), s.get(slot).unwrap() as *const u64);
        }
        assert_eq!(
            format!("{s:?}"),
            format!("Slab {{ chunk_slots: {c}, chunks: 2 }}")
        );
    }

    /// Counts the values of its kind dropped, in this test binary.
    static DROPPED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

    #[derive(Default)]
    struct Counted(#[allow(dead_code)] u8); // a byte: a value with a size

    impl Drop for Counted {
        fn drop(&mut self) {
            DROPPED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
    }

    /// A slab dropped drops every value of every chunk it made.
    #[test]
    fn a_dropped_slab_drops_its_values() {
        let arena = Arc::new(Arena::default());
        let s: Slab<Counted> = Slab::new(100, &arena);
        let c = s.chunk_len(0);
        assert!(s.ensure(1) && s.ensure(c as u32 * 2));
        assert_eq!(DROPPED.load(std::sync::atomic::Ordering::Relaxed), 0);
        drop(s);
        assert_eq!(DROPPED.load(std::sync::atomic::Ordering::Relaxed), 2 * c);
    }
}
