//! Cache prefetch hints: the one processor intrinsic the table uses.

/// Hints the processor to load the cache line at `p` (no effect elsewhere,
/// nor under the model checker or Miri).
#[inline(always)]
pub fn prefetch(p: *const u8) {
    #[cfg(all(target_arch = "x86_64", not(loom), not(miri)))]
    {
        if !p.is_null() {
            // SAFETY: a prefetch is a hint that never faults, whatever the
            // address; SSE is part of the x86-64 baseline.
            unsafe {
                core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_T0 }>(p.cast())
            };
        }
    }
    #[cfg(not(all(target_arch = "x86_64", not(loom), not(miri))))]
    {
        let _ = p;
    }
}

/// Prefetches every cache line a record at `p` touches (a 120-byte record
/// straddles three lines more often than two).
#[inline(always)]
pub(crate) fn prefetch_lines<R>(p: *const R) {
    if p.is_null() {
        return;
    }
    let p = p.cast::<u8>();
    let last = p.addr() + core::mem::size_of::<R>().max(1) - 1;
    // Line addresses by pointer arithmetic from `p` (no address is turned
    // back into a pointer); a prefetch never dereferences them.
    let mut line = p.wrapping_sub(p.addr() & 63);
    while line.addr() <= last {
        prefetch(line);
        line = line.wrapping_add(64);
    }
}
