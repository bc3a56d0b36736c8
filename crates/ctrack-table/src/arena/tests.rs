//! The arena's tests: what it hands out, what a populator does.

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

/// Released memory's whole pages are given back (they read as zeroes
/// again where the system can release them), and the pages it shares
/// with its neighbours keep their bytes; the memory is never handed
/// out again.
#[test]
fn released_pages_are_given_back_and_never_handed_out_again() {
    let a = Arena::default();
    let n = 5 * PAGE;
    // A piece before, so that the released one does not start a page.
    assert!(!a.alloc_zeroed(64, 64).is_null());
    let p = a.alloc_zeroed(n, 64);
    let next = a.alloc_zeroed(64, 64);
    assert!(!p.is_null() && !next.is_null());
    // SAFETY: `p..p+n` and `next..next+64` were just handed out.
    let (s, t) = unsafe {
        (
            core::slice::from_raw_parts_mut(p, n),
            core::slice::from_raw_parts_mut(next, 64),
        )
    };
    s.fill(0xaa);
    t.fill(0xbb);
    // SAFETY: `p..p+n` came from this arena and nothing uses it after
    // this but the reads below, of memory that stays mapped.
    unsafe { a.release(p, n) };
    let from = page_up(p.addr()) - p.addr();
    let to = ((p.addr() + n) & !(PAGE - 1)) - p.addr();
    assert!(to - from >= 3 * PAGE, "{from}..{to}");
    // SAFETY: still mapped (the arena holds its regions); plain bytes.
    let s = unsafe { core::slice::from_raw_parts(p, n) };
    let released = cfg!(all(target_os = "linux", not(miri)));
    assert!(s[from..to].iter().all(|&b| (b == 0) == released));
    assert!(s[..from].iter().chain(&s[to..]).all(|&b| b == 0xaa));
    assert!(t.iter().all(|&b| b == 0xbb), "a neighbour's page kept");
    // (Under Miri each piece is an allocation of its own.)
    let again = a.alloc_zeroed(n, 64);
    assert!(
        cfg!(miri) || again.addr() >= next.addr() + 64,
        "never handed out again"
    );
}

#[test]
fn populates_ahead_of_the_bump_pointer_and_maps_the_next_region() {
    let a = Arena::default();
    if !CAN_POPULATE {
        assert_eq!(a.populate_ahead(), 0);
        return;
    }
    // Before any allocation: the first region is mapped ahead and its
    // start faulted in (2 MiB, the least it looks ahead).
    assert_eq!(a.populate_ahead(), 2 << 20);
    assert_eq!(a.populate_ahead(), 0, "already ahead");
    let held = a.bytes();
    let p = a.alloc_zeroed(4096, 64);
    assert!(!p.is_null());
    assert_eq!(a.bytes(), held, "the spare region was used, not a new one");
    // Ahead of the pointer again: a page more, at the end of the 2 MiB
    // region, and then the start of a region after it.
    let more = a.populate_ahead();
    assert!(more >= 4096, "{more}");
    assert!(a.bytes() > held, "the next region was mapped ahead");
    // What is handed out is still zeroed and writable, across the
    // region boundary.
    for _ in 0..3 {
        let q = a.alloc_zeroed(1 << 20, 4096);
        assert!(!q.is_null());
        // SAFETY: `q..q+1 MiB` was just handed out.
        let s = unsafe { core::slice::from_raw_parts_mut(q, 1 << 20) };
        assert!(s.iter().all(|&b| b == 0));
        s.fill(0x55);
        a.populate_ahead();
    }
    let inner = a.inner.lock();
    assert!(inner.populated >= inner.next.addr().get().min(inner.start + (2 << 20)));
}

/// An arena's state at a made-up address (never dereferenced): a
/// region of `size` at `BASE`, the bump pointer `used` bytes in,
/// populated `populated` bytes in, `handed` bytes handed out.
fn state(size: usize, used: usize, populated: usize, handed: usize) -> Inner {
    Inner {
        regions: Vec::new(),
        next: NonNull::new(core::ptr::without_provenance_mut(BASE + used)).unwrap(),
        left: size - used,
        next_size: FIRST_REGION,
        start: BASE,
        populated: BASE + populated,
        spare: None,
        behind: Vec::new(),
        busy: false,
        handed,
    }
}

const BASE: usize = 0x4000_0000;
const MIB: usize = 1 << 20;

fn job(a: &mut Inner) -> Option<(usize, usize)> {
    match next_job(a)? {
        Job::Map(size) => Some((0, size)),
        Job::Populate { from, to } => Some((from, to)),
    }
}

/// What a populator does next, decided under the lock: one step of
/// 2 MiB at a time, what was handed out but left behind first, then
/// the memory ahead of the bump pointer (an eighth of what was handed
/// out, between 2 and 32 MiB), then the next region's start.
#[test]
fn a_populator_works_in_steps_behind_first_then_ahead() {
    // Nothing while another populator is at work.
    let mut a = state(8 * MIB, 0, 0, 0);
    a.busy = true;
    assert!(job(&mut a).is_none());
    a.busy = false;
    // Ranges left behind: a step at a time, the rest kept.
    a.behind.push((BASE + 64 * MIB, BASE + 64 * MIB + 5 * MIB));
    assert_eq!(job(&mut a), Some((BASE + 64 * MIB, BASE + 66 * MIB)));
    assert_eq!(a.behind, [(BASE + 66 * MIB, BASE + 69 * MIB)]);
    assert_eq!(job(&mut a), Some((BASE + 66 * MIB, BASE + 68 * MIB)));
    assert_eq!(job(&mut a), Some((BASE + 68 * MIB, BASE + 69 * MIB)));
    assert!(a.behind.is_empty());
    // Then ahead: at least 2 MiB past the pointer.
    assert_eq!(job(&mut a), Some((BASE, BASE + 2 * MIB)));
    let mut a = state(8 * MIB, 5000, 4096, 0);
    assert_eq!(job(&mut a), Some((BASE + 4096, BASE + 4096 + 2 * MIB)));
    // Up to the page after the pointer's 2 MiB, not a step further.
    let mut a = state(8 * MIB, 5000, MIB, 0);
    assert_eq!(
        job(&mut a),
        Some((BASE + MIB, BASE + page_up(5000 + 2 * MIB)))
    );
    // An eighth of what was handed out: 40 MiB handed, 5 MiB ahead.
    let mut a = state(64 * MIB, 0, 4 * MIB, 40 * MIB);
    assert_eq!(job(&mut a), Some((BASE + 4 * MIB, BASE + 5 * MIB)));
    let mut a = state(64 * MIB, 0, 5 * MIB, 40 * MIB);
    assert!(job(&mut a).is_none(), "ahead enough, inside the region");
    // At most 32 MiB ahead however much was handed out.
    let mut a = state(64 * MIB, 0, 31 * MIB, 1 << 40);
    assert_eq!(job(&mut a), Some((BASE + 31 * MIB, BASE + 32 * MIB)));
    let mut a = state(64 * MIB, 0, 32 * MIB, 1 << 40);
    assert!(job(&mut a).is_none());
    // Never past the region's end.
    let mut a = state(4 * MIB, 3 * MIB, 3 * MIB + MIB / 2, 0);
    assert_eq!(
        job(&mut a),
        Some((BASE + 3 * MIB + MIB / 2, BASE + 4 * MIB))
    );
}

/// When the region has less left than the populator looks ahead, the
/// next one is mapped (at the size the allocator would map next) and
/// its start faulted in, as much as the current region falls short.
#[test]
fn a_region_running_short_gets_the_next_one_ahead() {
    let mut a = state(4 * MIB, 3 * MIB, 4 * MIB, 0);
    a.next_size = 16 * MIB;
    assert_eq!(job(&mut a), Some((0, 16 * MIB)), "mapped at the next size");
    // The 2 MiB ahead overrun the region by 1 MiB: that much of the
    // spare, from where its population stopped.
    let spare = BASE + 256 * MIB;
    let at = NonNull::new(core::ptr::without_provenance_mut(spare)).unwrap();
    a.spare = Some((at, 16 * MIB, 0));
    assert_eq!(job(&mut a), Some((spare, spare + MIB)));
    a.spare = Some((at, 16 * MIB, 4096));
    assert_eq!(job(&mut a), Some((spare + 4096, spare + MIB)));
    a.spare = Some((at, 16 * MIB, MIB));
    assert!(job(&mut a).is_none());
    // Looking further ahead, a step at a time.
    a.handed = 64 * MIB;
    assert_eq!(job(&mut a), Some((spare + MIB, spare + 3 * MIB)));
    // A spare smaller than the shortfall: all of it, and no more.
    a.spare = Some((at, 2 * MIB, MIB));
    assert_eq!(job(&mut a), Some((spare + MIB, spare + 2 * MIB)));
    a.spare = Some((at, 2 * MIB, 2 * MIB));
    assert!(job(&mut a).is_none());
    // An exhausted region (nothing left) looks only at the next.
    let mut a = state(4 * MIB, 4 * MIB, 0, 0);
    assert_eq!(job(&mut a), Some((0, FIRST_REGION)));
}

/// A populator's work is recorded where it lies: the current region's
/// populated end moves when the work starts at or before it; the
/// spare's when it continues it; work elsewhere (behind) moves neither.
#[test]
fn populated_ranges_are_recorded_where_they_lie() {
    let mut a = state(8 * MIB, MIB, 2 * MIB, 0);
    mark_populated(&mut a, BASE + 2 * MIB, BASE + 4 * MIB);
    assert_eq!(a.populated, BASE + 4 * MIB);
    mark_populated(&mut a, BASE + MIB, BASE + 5 * MIB);
    assert_eq!(a.populated, BASE + 5 * MIB, "overlapping the populated end");
    mark_populated(&mut a, BASE + 6 * MIB, BASE + 7 * MIB);
    assert_eq!(a.populated, BASE + 5 * MIB, "a gap is not populated");
    mark_populated(&mut a, BASE + MIB, BASE + 2 * MIB);
    assert_eq!(a.populated, BASE + 5 * MIB, "never moved back");
    mark_populated(&mut a, BASE + 5 * MIB, BASE + 9 * MIB);
    assert_eq!(a.populated, BASE + 5 * MIB, "past the region: not its");
    mark_populated(&mut a, BASE + 5 * MIB, BASE + 8 * MIB);
    assert_eq!(a.populated, BASE + 8 * MIB, "up to its end");
    // Before the region (left behind by the allocator): nothing moves.
    let mut a = state(8 * MIB, MIB, 2 * MIB, 0);
    mark_populated(&mut a, BASE - 2 * MIB, BASE + 3 * MIB);
    assert_eq!(a.populated, BASE + 2 * MIB);
    // The spare's start, continued.
    let spare = BASE + 256 * MIB;
    let at = NonNull::new(core::ptr::without_provenance_mut(spare)).unwrap();
    a.spare = Some((at, 4 * MIB, MIB));
    mark_populated(&mut a, spare + MIB, spare + 3 * MIB);
    assert_eq!(a.spare.unwrap().2, 3 * MIB);
    mark_populated(&mut a, spare + 2 * MIB, spare + 4 * MIB);
    assert_eq!(a.spare.unwrap().2, 3 * MIB, "not where it stopped");
    mark_populated(&mut a, spare + 3 * MIB, spare + 5 * MIB);
    assert_eq!(a.spare.unwrap().2, 3 * MIB, "past its end");
    mark_populated(&mut a, spare + 3 * MIB, spare + 4 * MIB);
    assert_eq!(a.spare.unwrap().2, 4 * MIB);
    assert_eq!(a.populated, BASE + 2 * MIB);
}

/// Regions double from 2 MiB up to 64 MiB; a piece larger than the
/// next region gets one of its own size (in huge pages); what was
/// handed out counts each piece's padding.
#[test]
fn regions_double_up_to_their_largest() {
    let a = Arena::default();
    let sizes =
        |a: &Arena| -> Vec<usize> { a.inner.lock().regions.iter().map(|r| r.1 / MIB).collect() };
    // Under Miri every piece is its own allocation.
    if cfg!(miri) {
        return;
    }
    assert!(!a.alloc_zeroed(10, 8).is_null());
    assert_eq!(a.inner.lock().handed, 10);
    assert!(!a.alloc_zeroed(64, 64).is_null());
    assert_eq!(a.inner.lock().handed, 64 + 64, "54 bytes of padding");
    assert_eq!(sizes(&a), [2]);
    for want in [4, 8, 16, 32, 64, 64] {
        let left = a.inner.lock().left;
        assert!(!a.alloc_zeroed(left + 1, 64).is_null());
        assert_eq!(*sizes(&a).last().unwrap(), want);
    }
    assert_eq!(a.bytes(), (2 + 4 + 8 + 16 + 32 + 64 + 64) * MIB);
    assert!(!a.alloc_zeroed(100 * MIB + 1, 64).is_null());
    assert_eq!(
        *sizes(&a).last().unwrap(),
        102,
        "its own size, in huge pages"
    );
}

/// Moving to a new region leaves what the allocator handed out of the
/// old one and no populator faulted in behind, for a populator to
/// finish; a spare the populator mapped is taken when the piece fits
/// it, and passed over (kept) when it does not.
#[test]
fn a_new_region_leaves_the_old_ones_unpopulated_part_behind() {
    if !CAN_POPULATE {
        return;
    }
    let a = Arena::default();
    assert!(!a.alloc_zeroed(MIB + 100, 64).is_null());
    let start = a.inner.lock().start;
    assert!(!a.alloc_zeroed(MIB, 64).is_null(), "a second region");
    {
        let i = a.inner.lock();
        assert_eq!(i.behind, [(start, start + page_up(MIB + 100))]);
        assert_ne!(i.start, start);
        assert_eq!(i.populated, i.start);
    }
    // A spare mapped ahead, taken by a piece that fits it.
    let b = Arena::default();
    assert_eq!(b.populate_ahead(), 2 * MIB);
    let (spare, _, _) = b.inner.lock().spare.unwrap();
    let p = b.alloc_zeroed(100, 64);
    assert_eq!(p.addr(), spare.addr().get());
    {
        let i = b.inner.lock();
        assert!(i.spare.is_none() && i.behind.is_empty());
        assert_eq!((i.start, i.populated), (p.addr(), p.addr() + 2 * MIB));
        assert_eq!(i.left, FIRST_REGION - 100);
        assert_eq!(i.next_size, 2 * FIRST_REGION);
    }
    // One that does not fit: a region of its own, the spare kept.
    let c = Arena::default();
    assert_eq!(c.populate_ahead(), 2 * MIB);
    let p = c.alloc_zeroed(3 * MIB, 64);
    let i = c.inner.lock();
    assert!(i.spare.is_some());
    assert_eq!(i.start, p.addr());
    assert_eq!(i.regions.len(), 2);
}

/// A piece that fits what is left of the region, its alignment's
/// padding included, is carved from it; one byte more moves to a new
/// region.
#[test]
fn a_piece_that_just_fits_stays_in_the_region() {
    if cfg!(miri) {
        return;
    }
    let a = Arena::default();
    assert!(!a.alloc_zeroed(10, 8).is_null());
    let left = a.inner.lock().left;
    // 54 bytes of padding to the next 64-byte boundary.
    let b = Arena::default();
    assert!(!b.alloc_zeroed(10, 8).is_null());
    let p = b.alloc_zeroed(left - 54, 64);
    assert!(!p.is_null());
    let i = b.inner.lock();
    assert_eq!((i.regions.len(), i.left, i.handed), (1, 0, FIRST_REGION));
    drop(i);
    let q = a.alloc_zeroed(left - 53, 64);
    assert!(!q.is_null());
    let i = a.inner.lock();
    assert_eq!(i.regions.len(), 2, "a byte more than fits");
    assert_eq!(q.addr(), i.start);
}

/// A region the populator had faulted in up to the bump pointer
/// leaves nothing behind when the allocator moves on.
#[test]
fn a_populated_region_leaves_nothing_behind() {
    if !CAN_POPULATE {
        return;
    }
    let a = Arena::default();
    assert_eq!(a.populate_ahead(), 2 * MIB);
    assert!(!a.alloc_zeroed(FIRST_REGION, 64).is_null());
    {
        let i = a.inner.lock();
        assert_eq!(i.populated, i.start + FIRST_REGION);
    }
    assert!(!a.alloc_zeroed(64, 64).is_null());
    assert!(a.inner.lock().behind.is_empty());
}

/// Which of the `len` bytes' pages at `p` are in memory.
#[cfg(all(target_os = "linux", not(miri)))]
fn resident(p: usize, len: usize) -> Vec<bool> {
    let mut v = vec![0u8; len.div_ceil(PAGE)];
    // SAFETY: `p..p + len` is page-aligned memory of an arena the
    // caller holds (mapped); `mincore` only writes one byte a page
    // into `v`, which has room for them.
    let r = unsafe { libc::mincore(core::ptr::without_provenance_mut(p), len, v.as_mut_ptr()) };
    assert_eq!(r, 0, "{}", std::io::Error::last_os_error());
    v.into_iter().map(|b| b & 1 != 0).collect()
}

/// What a populator says it faulted in is in memory, every page of
/// it, before anything has written to it; the pages past it are not.
#[test]
#[cfg(all(target_os = "linux", not(miri)))]
fn populated_pages_are_in_memory() {
    if !CAN_POPULATE {
        return;
    }
    let a = Arena::default();
    assert_eq!(a.populate_ahead(), 2 * MIB);
    let (start, size, populated) = a.inner.lock().spare.unwrap();
    assert_eq!(populated, 2 * MIB);
    assert_eq!(size, FIRST_REGION);
    assert!(resident(start.addr().get(), 2 * MIB).into_iter().all(|r| r));
}

/// A population that worked does not take an error number an earlier
/// call left behind for the kernel's "cannot" (which would turn
/// population off for good).
#[test]
#[cfg(all(target_os = "linux", not(miri)))]
fn a_stale_error_number_does_not_turn_population_off() {
    if !CAN_POPULATE {
        return;
    }
    let a = Arena::default();
    let p = a.alloc_zeroed(2 * PAGE, PAGE);
    assert!(!p.is_null());
    // A kernel that cannot (before Linux 5.14) fails this first one,
    // whichever test in the process asked first.
    if !populate(p.addr(), PAGE) {
        return;
    }
    // SAFETY: the calling thread's own error number, a plain `int`.
    unsafe { *libc::__errno_location() = libc::EINVAL };
    assert!(populate(p.addr(), 2 * PAGE));
    assert!(!NO_POPULATE.load(std::sync::atomic::Ordering::Relaxed));
}
