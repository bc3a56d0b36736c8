//! Where a table's slot chunks and index arrays come from: large regions
//! taken from the kernel (zero-filled, committed as touched, and backed by
//! transparent huge pages on Linux), carved up by a bump pointer, and given
//! back all at once when the last slab or index using them is dropped.
//!
//! Why not the global allocator: the table is hundreds of megabytes of
//! small per-shard pieces (a shard's chunk of records, its index). Carved
//! from 2 MiB-aligned regions, they sit on huge pages, so a random lookup
//! no longer misses the TLB on top of the cache (measured on the lookup
//! benchmark); the allocator would hand out 4 KiB-page memory with a header
//! before every piece. Nothing the arena hands out is freed before the
//! arena: slot chunks live as long as the table anyway, and an index
//! replaced by a larger one (rare) stays behind, bounded by the size of the
//! live index. Under Miri and the model checker the regions come from the
//! global allocator.

use core::ptr::NonNull;

use crate::sync::Mutex;

/// First region size; later ones double up to [`MAX_REGION`].
const FIRST_REGION: usize = 2 << 20;
const MAX_REGION: usize = 64 << 20;
/// Huge-page size and the alignment of every region.
const HUGE: usize = 2 << 20;

#[derive(Debug)]
struct Inner {
    /// Regions (start, bytes), freed on drop.
    regions: Vec<(NonNull<u8>, usize)>,
    /// Next free byte of the last region (dangling before the first), and
    /// bytes left in it.
    next: NonNull<u8>,
    left: usize,
    next_size: usize,
}

// SAFETY: the pointers name regions the arena owns outright (as a
// `Vec<u8>` owns its buffer) and are used only under the arena's mutex;
// nothing about them is tied to the thread that mapped them.
unsafe impl Send for Inner {}

/// A bump allocator of zeroed memory. See the module documentation.
///
/// Whatever points into an arena's memory keeps the arena alive: slabs and
/// indexes hold an [`Arc`](crate::sync::Arc) of the arena they allocate
/// from, so its regions are unmapped only after the last of them is gone.
#[derive(Debug)]
pub(crate) struct Arena {
    inner: Mutex<Inner>,
}

impl Default for Arena {
    fn default() -> Self {
        Arena {
            inner: Mutex::new(Inner {
                regions: Vec::new(),
                next: NonNull::dangling(),
                left: 0,
                next_size: FIRST_REGION,
            }),
        }
    }
}

impl Arena {
    /// `bytes` of zeroed memory aligned to `align` (at most a page), valid
    /// until the arena is dropped. Returns null if the system has no
    /// memory to give.
    pub(crate) fn alloc_zeroed(&self, bytes: usize, align: usize) -> *mut u8 {
        debug_assert!(align.is_power_of_two() && align <= 4096);
        let bytes = bytes.max(1);
        let mut a = self.inner.lock();
        if cfg!(miri) {
            // Under Miri every piece is an allocation of its own: Miri then
            // checks each piece's bounds, and tracks many small allocations
            // rather than one large one (much faster).
            let Some(start) = map_region(bytes) else {
                return core::ptr::null_mut();
            };
            a.regions.push((start, bytes));
            return start.as_ptr();
        }
        let pad = a.next.addr().get().wrapping_neg() & (align - 1);
        if a.left < pad + bytes {
            let size = a.next_size.max(bytes.next_multiple_of(HUGE));
            let Some(start) = map_region(size) else {
                return core::ptr::null_mut();
            };
            a.regions.push((start, size));
            a.next = start;
            a.left = size;
            a.next_size = (a.next_size * 2).min(MAX_REGION);
        }
        let pad = a.next.addr().get().wrapping_neg() & (align - 1);
        // In bounds: `pad + bytes <= left`, the bytes left in the region
        // `next` points into (pointer arithmetic keeps the region's
        // provenance).
        let p = a.next.as_ptr().wrapping_add(pad);
        a.next = NonNull::new(p.wrapping_add(bytes)).expect("inside a region");
        a.left -= pad + bytes;
        p
    }

    /// Bytes of address space held.
    pub(crate) fn bytes(&self) -> usize {
        self.inner.lock().regions.iter().map(|r| r.1).sum()
    }
}

impl Drop for Arena {
    fn drop(&mut self) {
        let a = self.inner.lock();
        for &(start, size) in &a.regions {
            unmap_region(start, size);
        }
    }
}

/// A fresh zeroed region of `size` bytes (a multiple of [`HUGE`]), aligned
/// to [`HUGE`], advised to use huge pages.
#[cfg(all(target_os = "linux", not(loom), not(miri)))]
fn map_region(size: usize) -> Option<NonNull<u8>> {
    // Map one huge page more than needed, then trim to an aligned region.
    let len = size + HUGE;
    // SAFETY: an anonymous private mapping with no address hint touches no
    // existing memory; the result is checked for failure.
    let p = unsafe {
        libc::mmap(
            core::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return None;
    }
    let p = p.cast::<u8>();
    let head = p.addr().next_multiple_of(HUGE) - p.addr();
    let tail = len - head - size;
    let start = p.wrapping_add(head);
    // SAFETY: the head and tail ranges lie inside the mapping just made and
    // nothing refers to them; unmapping them leaves exactly
    // `start..start+size` mapped. The advice only changes how the kernel
    // backs the region, and failing (no THP) is harmless.
    unsafe {
        if head > 0 {
            libc::munmap(p.cast(), head);
        }
        if tail > 0 {
            libc::munmap(start.wrapping_add(size).cast(), tail);
        }
        libc::madvise(start.cast(), size, libc::MADV_HUGEPAGE);
    }
    NonNull::new(start)
}

#[cfg(all(target_os = "linux", not(loom), not(miri)))]
fn unmap_region(start: NonNull<u8>, size: usize) {
    // SAFETY: `start..start+size` is a region made by `map_region`, owned by
    // the arena being dropped; nothing refers to it any more.
    unsafe { libc::munmap(start.as_ptr().cast(), size) };
}

/// Elsewhere (and under the model checker and Miri): zeroed memory from
/// the global allocator, aligned to a page, never freed before the arena.
/// Under Miri, `size` is that of one piece.
#[cfg(not(all(target_os = "linux", not(loom), not(miri))))]
fn map_region(size: usize) -> Option<NonNull<u8>> {
    let layout = std::alloc::Layout::from_size_align(size, 4096).ok()?;
    // SAFETY: `layout` has a non-zero size.
    NonNull::new(unsafe { std::alloc::alloc_zeroed(layout) })
}

#[cfg(not(all(target_os = "linux", not(loom), not(miri))))]
fn unmap_region(start: NonNull<u8>, size: usize) {
    let layout = std::alloc::Layout::from_size_align(size, 4096).expect("valid layout");
    // SAFETY: `start` came from `alloc_zeroed` with this layout and is freed
    // once, when the arena is dropped.
    unsafe { std::alloc::dealloc(start.as_ptr(), layout) };
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn hands_out_aligned_zeroed_disjoint_memory() {
        let a = Arena::default();
        let mut seen = Vec::new();
        // Miri checks every byte it is shown: fewer, smaller pieces there.
        let (pieces, step) = if cfg!(miri) { (40, 31) } else { (200, 97) };
        for i in 1..pieces {
            let n = i * step;
            let p = a.alloc_zeroed(n, 64);
            assert!(!p.is_null());
            assert_eq!(p as usize % 64, 0);
            // SAFETY: `p..p+n` was just handed out and is zeroed.
            let s = unsafe { core::slice::from_raw_parts_mut(p, n) };
            assert!(s.iter().all(|&b| b == 0));
            s.fill(0xaa);
            seen.push((p as usize, n));
        }
        seen.sort();
        for w in seen.windows(2) {
            assert!(w[0].0 + w[0].1 <= w[1].0, "overlap");
        }
        // A piece larger than a region gets a region of its own.
        let big_len = if cfg!(miri) { 3 << 20 } else { 10 << 20 };
        let big = a.alloc_zeroed(big_len, 4096);
        assert!(!big.is_null());
        assert!(a.bytes() >= big_len);
    }
}
