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
//! before every piece. Nothing the arena hands out is reused before the
//! arena goes: slot chunks live as long as the table anyway, and an index
//! replaced by a larger one gives its pages back to the kernel when it is
//! dropped ([`Arena::release`], `MADV_DONTNEED`), keeping only its address
//! space (a table that starts small and grows, such as the tracker's IPv6
//! table, kept about as much again as its live index before). Under Miri
//! and the model checker the regions come from the global allocator.
//!
//! **Population ahead of use.** The kernel zeroes a fresh page when it is
//! first written, and a packet that allocates a slot chunk would pay for
//! it under its shard's lock. [`Arena::populate_ahead`], called from a
//! background thread, faults in the memory just past the bump pointer
//! (and maps and faults in the start of the next region when the current
//! one runs short), so that allocations land on memory that is already
//! there. The faulting is done with `MADV_POPULATE_WRITE` (Linux 5.14):
//! the kernel does the work, nothing is written from user space, and the
//! arena's lock is not held meanwhile, so allocations go on.

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
    /// Start (an address) of the region `next` points into, and the end
    /// of its populated start.
    start: usize,
    populated: usize,
    /// A region mapped ahead by the populator, not yet used: (start, size,
    /// bytes populated from its start). It is in `regions` already.
    spare: Option<(NonNull<u8>, usize, usize)>,
    /// Handed out but not populated, in regions the allocator has left
    /// (address ranges): populated first.
    behind: Vec<(usize, usize)>,
    /// A populator is at work (outside the lock).
    busy: bool,
    /// Bytes handed out so far.
    handed: usize,
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
                start: 0,
                populated: 0,
                spare: None,
                behind: Vec::new(),
                busy: false,
                handed: 0,
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
            let used = a.next.addr().get();
            // (`start` is 0 before the first region.)
            if a.start != 0 && a.populated < used && CAN_POPULATE {
                let range = (a.populated, page_up(used));
                a.behind.push(range);
            }
            match a.spare {
                // The region the populator mapped ahead (aligned to a
                // huge page, so no padding).
                Some((start, size, populated)) if size >= bytes => {
                    a.spare = None;
                    a.next = start;
                    a.left = size;
                    a.start = start.addr().get();
                    a.populated = a.start + populated;
                }
                _ => {
                    let size = a.next_size.max(bytes.next_multiple_of(HUGE));
                    let Some(start) = map_region(size) else {
                        return core::ptr::null_mut();
                    };
                    a.regions.push((start, size));
                    a.next = start;
                    a.left = size;
                    a.start = start.addr().get();
                    a.populated = a.start;
                }
            }
            a.next_size = (a.next_size * 2).min(MAX_REGION);
        }
        let pad = a.next.addr().get().wrapping_neg() & (align - 1);
        // In bounds: `pad + bytes <= left`, the bytes left in the region
        // `next` points into (pointer arithmetic keeps the region's
        // provenance).
        let p = a.next.as_ptr().wrapping_add(pad);
        a.next = NonNull::new(p.wrapping_add(bytes)).expect("inside a region");
        a.left -= pad + bytes;
        a.handed += pad + bytes;
        p
    }

    /// Faults in, without holding the arena's lock, the memory the next
    /// allocations will take: the bytes past the bump pointer, and the
    /// start of the next region when the current one has less left (see
    /// the module documentation). How far ahead: an eighth of what was
    /// handed out so far, at least 2 MiB and at most 32 MiB. Returns the
    /// bytes faulted in (0 when the memory ahead is there already, when
    /// another thread is populating, or where the system cannot do it).
    /// For a background thread: it takes as long as the kernel needs to
    /// zero the pages.
    pub(crate) fn populate_ahead(&self) -> usize {
        if !CAN_POPULATE {
            return 0;
        }
        let mut done = 0;
        loop {
            let job = {
                let mut a = self.inner.lock();
                let Some(job) = next_job(&mut a) else {
                    return done;
                };
                a.busy = true;
                job
            };
            let ok = match job {
                Job::Map(size) => {
                    let region = map_region(size);
                    let mut a = self.inner.lock();
                    a.busy = false;
                    match region {
                        Some(start) => {
                            a.regions.push((start, size));
                            a.spare = Some((start, size, 0));
                            true
                        }
                        None => false,
                    }
                }
                Job::Populate { from, to } => {
                    let ok = populate(from, to - from);
                    let mut a = self.inner.lock();
                    a.busy = false;
                    if ok {
                        mark_populated(&mut a, from, to);
                        done += to - from;
                    }
                    ok
                }
            };
            if !ok {
                return done;
            }
        }
    }

    /// Gives the whole pages of the `len` bytes at `ptr` back to the
    /// kernel: memory this arena handed out that nothing will use again
    /// (an index a larger one replaced). The bump pointer never hands it
    /// out again; its address space stays the arena's until the arena
    /// goes. A populator that was behind may fault some of it in again
    /// (memory, never read); pages it shares with a neighbour stay.
    ///
    /// # Safety
    ///
    /// `ptr..ptr + len` came from [`Arena::alloc_zeroed`] of this arena,
    /// and nothing reads or writes it any more: its pages read as zeroes
    /// after this.
    // SAFETY: the caller's to uphold, since whether anything still uses
    // the memory cannot be checked here (an `Index` in its `Drop`, after
    // the epoch let it go, is the one caller).
    pub(crate) unsafe fn release(&self, ptr: *const u8, len: usize) {
        let from = page_up(ptr.addr());
        let to = ptr.addr().saturating_add(len) & !(PAGE - 1);
        if from < to {
            // SAFETY: `from..to` is the whole pages of `ptr..ptr + len`,
            // which by this function's contract came from this arena (so
            // lie inside one of its regions, mapped while `self` lives)
            // and are used by nothing any more.
            unsafe { release_pages(from, to - from) };
        }
    }

    /// Bytes of address space held.
    pub(crate) fn bytes(&self) -> usize {
        self.inner.lock().regions.iter().map(|r| r.1).sum()
    }
}

/// How much a populator does between two looks at the arena.
const POPULATE_STEP: usize = HUGE;

/// Work for a populator, decided under the lock and done outside it.
enum Job {
    /// Map the next region ahead, of this size.
    Map(usize),
    /// Fault in `from..to` (addresses).
    Populate { from: usize, to: usize },
}

/// What the populator should do next, if anything.
fn next_job(a: &mut Inner) -> Option<Job> {
    if a.busy {
        return None;
    }
    // Every address below is page-aligned (madvise wants whole pages):
    // regions are aligned to huge pages and their sizes are multiples of
    // them, and ends are rounded up to a page inside the region.
    if let Some((from, to)) = a.behind.pop() {
        let stop = to.min(from + POPULATE_STEP);
        if stop < to {
            a.behind.push((stop, to));
        }
        return Some(Job::Populate { from, to: stop });
    }
    let ahead = (a.handed / 8).clamp(2 << 20, 32 << 20);
    let next = a.next.addr().get();
    let end = next + a.left;
    let want = next.saturating_add(ahead);
    // From the populated end on: what was handed out but not touched yet
    // (an index made before any population) is faulted in too.
    let from = a.populated;
    if a.left > 0 && from < end.min(want) {
        let to = (from + POPULATE_STEP).min(page_up(want)).min(end);
        return Some(Job::Populate { from, to });
    }
    if want <= end {
        return None;
    }
    // The current region runs short: the start of the next one.
    let need = want - end;
    match a.spare {
        None => Some(Job::Map(a.next_size)),
        Some((start, size, populated)) if populated < need.min(size) => {
            let from = start.addr().get() + populated;
            let to = start.addr().get() + (populated + POPULATE_STEP).min(page_up(need).min(size));
            Some(Job::Populate { from, to })
        }
        Some(_) => None,
    }
}

/// `x` rounded up to a multiple of the page size.
fn page_up(x: usize) -> usize {
    x.next_multiple_of(PAGE)
}

/// The smallest page size.
const PAGE: usize = 4096;

/// Records that `from..to` is faulted in, in whichever region it lies
/// (the allocator may have moved on meanwhile).
fn mark_populated(a: &mut Inner, from: usize, to: usize) {
    let end = a.next.addr().get() + a.left;
    let current = a.start <= from && to <= end;
    if current && from <= a.populated && to > a.populated {
        a.populated = to;
        return;
    }
    if let Some((start, size, populated)) = &mut a.spare {
        let s = start.addr().get();
        if from == s + *populated && to <= s + *size {
            *populated = to - s;
        }
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

/// Whether this build can populate memory ahead (not under Miri or the
/// model checker, whose regions come from the allocator).
const CAN_POPULATE: bool = cfg!(all(target_os = "linux", not(loom), not(miri)));

/// Kernels without `MADV_POPULATE_WRITE` (before 5.14) say so once; the
/// arena then stops trying.
#[cfg(all(target_os = "linux", not(loom), not(miri)))]
static NO_POPULATE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Faults in `len` bytes at address `from`, inside a region of an arena
/// the caller holds. False if the kernel cannot (or ran out of memory).
#[cfg(all(target_os = "linux", not(loom), not(miri)))]
fn populate(from: usize, len: usize) -> bool {
    use std::sync::atomic::Ordering::Relaxed;
    if NO_POPULATE.load(Relaxed) {
        return false;
    }
    // SAFETY: `from..from+len` lies inside a region mapped by `map_region`
    // and owned by an arena the caller holds a reference to, so it stays
    // mapped for the call. MADV_POPULATE_WRITE faults the pages in as a
    // write would, without changing any byte of their contents: memory
    // that threads already use keeps its values, fresh memory reads as
    // the zeroes it read before.
    let r = unsafe {
        libc::madvise(
            core::ptr::without_provenance_mut(from),
            len,
            libc::MADV_POPULATE_WRITE,
        )
    };
    if r != 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::EINVAL) {
        NO_POPULATE.store(true, Relaxed);
    }
    r == 0
}

#[cfg(not(all(target_os = "linux", not(loom), not(miri))))]
fn populate(_from: usize, _len: usize) -> bool {
    false
}

/// Drops the pages of `len` bytes at address `from` ([`Arena::release`]).
///
/// # Safety
///
/// `from..from + len` is whole pages inside a region of an arena the
/// caller holds, and nothing reads or writes them any more.
// SAFETY: the caller's to uphold, since it frees whatever pages it is
// given; only `Arena::release` calls it, with its own caller's guarantee.
#[cfg(all(target_os = "linux", not(loom), not(miri)))]
unsafe fn release_pages(from: usize, len: usize) {
    // SAFETY: by the contract, `from..from+len` lies inside a region mapped
    // by `map_region` (private and anonymous) of an arena the caller
    // holds, so it stays mapped for the call, and nothing reads or writes
    // it any more. MADV_DONTNEED frees its pages; a later touch (a
    // populator's) would find zeroes, still valid memory.
    unsafe {
        libc::madvise(
            core::ptr::without_provenance_mut(from),
            len,
            libc::MADV_DONTNEED,
        );
    }
}

/// Elsewhere (and under the model checker and Miri) memory is kept until
/// the arena goes.
///
/// # Safety
///
/// None needed; the signature is the Linux one's.
// SAFETY: nothing to uphold: it does nothing, and is marked so only to
// match the Linux one's signature.
#[cfg(not(all(target_os = "linux", not(loom), not(miri))))]
unsafe fn release_pages(_from: usize, _len: usize) {}

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
mod tests;
