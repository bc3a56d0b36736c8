//! Cache prefetch hints: the one processor intrinsic the table uses.

/// Hints the processor to load the cache line at `p` (no effect elsewhere,
/// nor under the model checker or Miri).
#[inline(always)]
pub fn prefetch(p: *const u8) {
    if !p.is_null() {
        hint(p);
    }
}

/// [`prefetch`] without its test for null (a prefetch of address zero
/// does not fault, but costs a page walk for nothing), for callers that
/// made it already.
#[inline(always)]
fn hint(p: *const u8) {
    #[cfg(all(target_arch = "x86_64", not(loom), not(miri)))]
    {
        // SAFETY: a prefetch is a hint that never faults, whatever the
        // address; SSE is part of the x86-64 baseline.
        unsafe {
            core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_T0 }>(p.cast())
        };
    }
    #[cfg(not(all(target_arch = "x86_64", not(loom), not(miri))))]
    {
        let _ = p;
    }
}

/// Prefetches every cache line a record at `p` touches: its lines, when it
/// is whole lines at a line's start (a slot of a slab: 128 bytes in
/// line-aligned chunks), else every line from its first byte's to its
/// last's (a record of another size may straddle one more).
#[inline(always)]
pub(crate) fn prefetch_lines<R>(p: *const R) {
    if p.is_null() {
        return;
    }
    let p = p.cast::<u8>();
    let size = core::mem::size_of::<R>();
    if size.is_multiple_of(64) && p.addr().is_multiple_of(64) {
        // A record of whole lines at a line's start (a slot of 128 bytes
        // in a slab, whose chunks are line-aligned): exactly its lines, a
        // count the compiler knows, with no test per line. (The loop below
        // took about 50 instructions a connection in `bench cps`, under
        // callgrind.)
        for k in 0..size / 64 {
            hint(p.wrapping_add(k * 64));
        }
        return;
    }
    let last = p.addr() + size.max(1) - 1;
    // Line addresses by pointer arithmetic from `p` (no address is turned
    // back into a pointer); a prefetch never dereferences them.
    let mut line = p.wrapping_sub(p.addr() & 63);
    while line.addr() <= last {
        hint(line);
        line = line.wrapping_add(64);
    }
}
