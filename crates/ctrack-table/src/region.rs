//! Large arrays straight from the kernel: zero-filled, committed page by
//! page as they are touched, and on Linux backed by transparent huge pages
//! when large enough.
//!
//! Measured on the lookup benchmark (1M connections, random access): with
//! 4 KiB pages nearly every lookup misses the TLB on top of missing the
//! cache, since the table is some hundred megabytes; huge pages remove most
//! of the page walks. And an index sized up front for the connection limit
//! must not cost memory for the buckets it never uses: the allocator's
//! `calloc` clears (and so commits) memory it reuses, `mmap` does not.

use core::fmt;
use core::marker::PhantomData;

/// Regions this large or larger ask for huge pages.
const HUGE: usize = 2 << 20;

/// A zero-filled array of `len` `T`s. `T` must be valid as all-zero bytes:
/// [`Region::zeroed`] is `unsafe` for that reason.
pub(crate) struct Region<T> {
    ptr: *mut T,
    len: usize,
    /// From `mmap` (else from the global allocator).
    mapped: bool,
    _owns: PhantomData<T>,
}

impl<T> fmt::Debug for Region<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Region")
            .field("len", &self.len)
            .field("mapped", &self.mapped)
            .finish()
    }
}

// SAFETY: a region owns its `T`s like a `Box<[T]>`.
unsafe impl<T: Send> Send for Region<T> {}
// SAFETY: shared access only hands out `&T`.
unsafe impl<T: Sync> Sync for Region<T> {}

impl<T> Region<T> {
    /// `len` zeroed `T`s.
    ///
    /// # Safety
    /// All-zero bytes must be a valid `T`.
    pub(crate) unsafe fn zeroed(len: usize) -> Region<T> {
        let bytes = len
            .checked_mul(core::mem::size_of::<T>())
            .expect("region size overflows");
        assert!(
            core::mem::align_of::<T>() <= 4096,
            "page alignment suffices"
        );
        if bytes >= HUGE
            && let Some(p) = map(bytes)
        {
            return Region {
                ptr: p.cast(),
                len,
                mapped: true,
                _owns: PhantomData,
            };
        }
        let b = Box::<[T]>::new_zeroed_slice(len);
        // SAFETY: the caller guarantees all-zero bytes are a valid `T`.
        let b = unsafe { b.assume_init() };
        Region {
            ptr: Box::into_raw(b).cast(),
            len,
            mapped: false,
            _owns: PhantomData,
        }
    }

    /// The elements.
    #[inline]
    pub(crate) fn as_slice(&self) -> &[T] {
        // SAFETY: `ptr` points to `len` initialised (zeroed, valid by
        // `zeroed`'s contract) `T`s owned by this region, alive until drop.
        unsafe { core::slice::from_raw_parts(self.ptr, self.len) }
    }

    /// Bytes of address space.
    pub(crate) fn bytes(&self) -> usize {
        self.len * core::mem::size_of::<T>()
    }
}

impl<T> Drop for Region<T> {
    fn drop(&mut self) {
        let slice = core::ptr::slice_from_raw_parts_mut(self.ptr, self.len);
        // SAFETY: the elements are valid `T`s owned by the region and no
        // reference to them outlives it.
        unsafe { core::ptr::drop_in_place(slice) };
        if self.mapped {
            unmap(self.ptr.cast(), self.bytes());
        } else {
            // SAFETY: the pointer came from `Box::into_raw` of a boxed slice
            // of `len` elements, whose elements were just dropped in place;
            // `ManuallyDrop` keeps them from being dropped again.
            drop(unsafe { Box::from_raw(slice as *mut [core::mem::ManuallyDrop<T>]) });
        }
    }
}

/// Allocates `len` `T`s built by `T::default()`: from the kernel (with
/// huge pages) if large, else from the global allocator. Returns the
/// pointer and whether it is a mapping; free with [`free_slice`] and the
/// same `len` and flag. The slab's chunks.
pub(crate) fn alloc_slice<T: Default>(len: usize) -> (*mut T, bool) {
    let bytes = len
        .checked_mul(core::mem::size_of::<T>())
        .expect("chunk size overflows");
    if bytes >= HUGE
        && core::mem::align_of::<T>() <= 4096
        && let Some(p) = map(bytes)
    {
        let p: *mut T = p.cast();
        for i in 0..len {
            // SAFETY: `p` is a fresh, page-aligned (so `T`-aligned) mapping
            // of `len` `T`s; each element is written once before any read.
            unsafe { p.add(i).write(T::default()) };
        }
        return (p, true);
    }
    let b: Box<[T]> = (0..len).map(|_| T::default()).collect();
    (Box::into_raw(b).cast(), false)
}

/// Frees what [`alloc_slice`] returned, dropping the elements.
///
/// # Safety
/// `(p, mapped)` must come from `alloc_slice::<T>(len)` and `p` must not be
/// used afterwards.
pub(crate) unsafe fn free_slice<T>(p: *mut T, len: usize, mapped: bool) {
    let slice = core::ptr::slice_from_raw_parts_mut(p, len);
    if mapped {
        // SAFETY: per the contract, `len` valid `T`s in a mapping of ours.
        unsafe { core::ptr::drop_in_place(slice) };
        unmap(p.cast(), len * core::mem::size_of::<T>());
    } else {
        // SAFETY: per the contract, the pointer came from `Box::into_raw` of
        // a boxed slice of `len` elements.
        drop(unsafe { Box::from_raw(slice) });
    }
}

#[cfg(all(target_os = "linux", not(loom)))]
fn map(bytes: usize) -> Option<*mut u8> {
    // SAFETY: an anonymous private mapping with no address hint touches no
    // existing memory; the result is checked for failure.
    let p = unsafe {
        libc::mmap(
            core::ptr::null_mut(),
            bytes,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return None;
    }
    // SAFETY: `p..p+bytes` is the mapping just made. The advice only
    // changes how the kernel backs it; failure (no THP support) is fine.
    unsafe { libc::madvise(p, bytes, libc::MADV_HUGEPAGE) };
    Some(p.cast())
}

#[cfg(not(all(target_os = "linux", not(loom))))]
fn map(_bytes: usize) -> Option<*mut u8> {
    None
}

#[cfg(all(target_os = "linux", not(loom)))]
fn unmap(p: *mut u8, bytes: usize) {
    // SAFETY: `p..p+bytes` is a mapping made by `map` and owned by the
    // region being dropped; nothing refers to it any more.
    unsafe { libc::munmap(p.cast(), bytes) };
}

#[cfg(not(all(target_os = "linux", not(loom))))]
fn unmap(_p: *mut u8, _bytes: usize) {
    unreachable!("no mapping without mmap");
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn small_and_large_regions_are_zeroed() {
        // SAFETY: zero is a valid u64.
        let small: Region<u64> = unsafe { Region::zeroed(100) };
        assert!(small.as_slice().iter().all(|&x| x == 0));
        assert!(!small.mapped);
        // SAFETY: as above.
        let large: Region<u64> = unsafe { Region::zeroed(1 << 20) };
        assert_eq!(large.as_slice().len(), 1 << 20);
        assert!(large.as_slice().iter().step_by(4096).all(|&x| x == 0));
        assert_eq!(large.bytes(), 8 << 20);
    }
}
