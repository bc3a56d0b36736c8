//! Memory reclamation: readers pin an epoch, writers defer frees until every
//! reader pinned before the unlink has unpinned.
//!
//! Normal builds use crossbeam-epoch's process-wide collector, behind a
//! [`Guard`] that only this crate makes ([`pin`]): every guard a caller can
//! hold is a guard of that collector, the one the table defers its frees
//! on, so a guard of another collector can never stand in for it.
//!
//! Under `--cfg loom` the model checker cannot drive crossbeam's collector;
//! a small model collector (`model`, below) takes its place. It counts the
//! guards pinned in each epoch and runs a deferred closure once no guard
//! pinned before the defer is alive, so that the models see slots reused
//! and boxes freed, at every point the interleaving allows.

use core::fmt;
use core::marker::PhantomData;

use crate::sync::{AtomicPtr, Ordering};

/// A pinned epoch: references read from the table (and from an
/// [`EpochBox`]) under it stay valid until it is dropped. Made by [`pin`]
/// only.
///
/// A guard of any other collector is not a `Guard`, so it cannot vouch for
/// the table's memory:
///
/// ```compile_fail,E0308
/// let other = crossbeam_epoch::Collector::new();
/// let handle = other.register();
/// let foreign = handle.pin();
/// let b = ctrack_table::EpochBox::new(Some(Box::new(1u32)));
/// let _ = b.get(&foreign);
/// ```
///
/// nor can one be wrapped into a `Guard` outside this crate:
///
/// ```compile_fail,E0423
/// let g = ctrack_table::Guard(crossbeam_epoch::pin());
/// ```
///
/// ```compile_fail,E0451
/// let g = ctrack_table::Guard { inner: crossbeam_epoch::pin() };
/// ```
///
/// while the crate's own guard is accepted:
///
/// ```
/// let b = ctrack_table::EpochBox::new(Some(Box::new(1u32)));
/// let guard = ctrack_table::pin();
/// assert_eq!(b.get(&guard), Some(&1));
/// ```
#[cfg(not(loom))]
#[derive(Debug)]
pub struct Guard {
    inner: crossbeam_epoch::Guard,
}

/// A pinned epoch (model-checking build: a guard of the model collector).
#[cfg(loom)]
#[derive(Debug)]
pub struct Guard {
    /// The epoch it pinned.
    epoch: u64,
    /// Like crossbeam's guard, it stays on the thread that pinned it.
    _not_send: PhantomData<*const ()>,
}

#[cfg(loom)]
impl Drop for Guard {
    fn drop(&mut self) {
        model::unpin(self.epoch);
    }
}

/// Pins the current thread: references read from the table stay valid
/// until the guard is dropped. Pinning is cheap (a thread-local counter and
/// a fence) and nests; pin once per batch of packets, not per packet.
#[inline]
pub fn pin() -> Guard {
    #[cfg(not(loom))]
    {
        Guard {
            inner: crossbeam_epoch::pin(),
        }
    }
    #[cfg(loom)]
    {
        Guard {
            epoch: model::pin(),
            _not_send: PhantomData,
        }
    }
}

impl Guard {
    /// Moves the guard to the current epoch, as if dropped and pinned
    /// again: references read under it before are no longer valid (the
    /// borrow checker sees to that: it takes `&mut self`), and memory
    /// retired before can be freed. For a guard held across many calls
    /// (a per-thread handle), now and then.
    pub fn repin(&mut self) {
        #[cfg(not(loom))]
        self.inner.repin();
        #[cfg(loom)]
        {
            let old = self.epoch;
            self.epoch = model::pin();
            model::unpin(old);
        }
    }

    /// Hands this thread's deferred frees to the collector and lets it
    /// advance the epoch if it can, so that memory retired so far becomes
    /// reusable sooner (after many removals in one pinned batch, e.g. an
    /// early drop under a flood). Costs a visit to the collector's shared
    /// state: not for every packet.
    pub fn flush(&self) {
        #[cfg(not(loom))]
        self.inner.flush();
    }
}

/// Runs `f` once every thread pinned now has unpinned.
pub(crate) fn defer(guard: &Guard, f: impl FnOnce() + Send + 'static) {
    #[cfg(not(loom))]
    {
        guard.inner.defer(f);
    }
    #[cfg(loom)]
    {
        let _ = guard;
        model::defer(Box::new(f));
    }
}

/// The collector of the model-checking build: guards counted per epoch
/// under a (model-checked) lock, deferred closures run by whoever drops
/// the last guard that could still see what they free.
///
/// Its rule is crossbeam's guarantee, stated directly: a closure deferred
/// in epoch `d` runs once no guard pinned in an epoch up to `d` is alive.
/// Each defer starts a new epoch, so guards pinned after it never hold it
/// back. The lock makes pinning a stronger synchronisation than
/// crossbeam's fence; what the models check is that the table defers the
/// right work under the right guards, and never frees or reuses memory a
/// guard can still reach.
#[cfg(loom)]
mod model {
    use std::collections::BTreeMap;

    use loom::sync::Mutex;

    type Deferred = Box<dyn FnOnce() + Send>;

    #[derive(Default)]
    struct State {
        /// The current epoch.
        epoch: u64,
        /// Guards alive, by the epoch they pinned.
        pinned: BTreeMap<u64, usize>,
        /// Deferred closures, with the epoch they were deferred in.
        deferred: Vec<(u64, Deferred)>,
    }

    loom::lazy_static! {
        // One per model execution: loom resets its statics between them.
        static ref STATE: Mutex<State> = Mutex::new(State::default());
    }

    fn lock() -> loom::sync::MutexGuard<'static, State> {
        STATE.lock().expect("model collector poisoned")
    }

    pub(super) fn pin() -> u64 {
        let mut s = lock();
        let e = s.epoch;
        *s.pinned.entry(e).or_default() += 1;
        e
    }

    pub(super) fn unpin(epoch: u64) {
        if std::thread::panicking() {
            // A failing model unwinds: leave the state alone.
            return;
        }
        let ready: Vec<Deferred> = {
            let mut s = lock();
            let n = s.pinned.get_mut(&epoch).expect("a pinned epoch");
            *n -= 1;
            if *n == 0 {
                s.pinned.remove(&epoch);
            }
            let oldest = s.pinned.keys().next().copied().unwrap_or(u64::MAX);
            let (ready, wait) = core::mem::take(&mut s.deferred)
                .into_iter()
                .partition(|(d, _)| *d < oldest);
            s.deferred = wait;
            ready.into_iter().map(|(_, f)| f).collect()
        };
        // Outside the lock: the closures take locks of their own.
        for f in ready {
            f();
        }
    }

    pub(super) fn defer(f: Deferred) {
        let mut s = lock();
        let d = s.epoch;
        s.deferred.push((d, f));
        s.epoch += 1;
    }
}

/// The room a batch of retired values starts with: a limbo list's slots
/// (each removed record has at most one).
const RETIRED_ROOM: usize = 64;

/// A raw pointer that may cross threads; used only to hand a box to a
/// deferred destructor.
struct SendPtr<T>(*mut T);

// SAFETY: the pointer is the unique owner of a `Box<T>` in transit to a
// deferred destructor on another thread; moving a `Box<T>` between threads
// is sound when `T: Send`.
unsafe impl<T: Send> Send for SendPtr<T> {}

/// Drops the box at `p` (from `Box::into_raw`, null allowed) once every
/// guard pinned now is gone: a reader may still hold a reference to it.
fn retire_box<T: Send + 'static>(p: *mut T, guard: &Guard) {
    if p.is_null() {
        return;
    }
    let p = SendPtr(p);
    defer(guard, move || {
        let p = p;
        // SAFETY: `p.0` came from `Box::into_raw` and was unlinked from its
        // `EpochBox` before this was deferred, so nothing else frees it and
        // no new reader can find it; the epoch runs this only once every
        // guard that could have loaded it is gone.
        drop(unsafe { Box::from_raw(p.0) });
    });
}

/// A box taken out of its [`EpochBox`], its type forgotten: the pointer
/// and the function that drops it.
struct ErasedBox {
    ptr: *mut (),
    // SAFETY: the function's contract is `drop_erased`'s; it is called
    // once, on `ptr`, by `free_all` alone, after the grace period.
    drop: unsafe fn(*mut ()),
}

// SAFETY: an `ErasedBox` is made only by `EpochBox::<T>::retire_into`,
// whose `T` is `Send`: it owns a `Box<T>` in transit to the thread that
// drops it, which is sound to move between threads for `T: Send`.
unsafe impl Send for ErasedBox {}

/// Drops the `Box<T>` at `p`.
///
/// # Safety
/// `p` came from `Box::<T>::into_raw`, nothing else frees it, and no
/// reference to the value is alive.
// SAFETY: a contract (above) the compiler cannot check: `p`'s type is
// forgotten, so the caller must pair it with the `T` it was made from,
// which `retire_into` does by storing the two together.
unsafe fn drop_erased<T>(p: *mut ()) {
    // SAFETY: by this function's contract.
    drop(unsafe { Box::from_raw(p.cast::<T>()) });
}

/// Values taken out of their [`EpochBox`]es ([`EpochBox::retire_into`])
/// that readers pinned before may still hold, dropped together after one
/// grace period: one deferred function for the batch
/// ([`Retired::defer`]) rather than one a value.
///
/// The table's shards keep one beside their slots' limbo list: what a
/// removed record owns through an `EpochBox` ([`crate::Record::retire`])
/// goes with the record's slot. Deferring each value on its own
/// outgrew the epoch's collection under churn: a collection frees a few
/// batches of the collector's own, every 128 pins, and a thread that
/// removed 16 labelled connections a pin (`ctrack bench cps` with every
/// connection labelled) left its values behind faster than they were
/// collected, without bound (2.8 GB resident after 8M connections, 0.76
/// after 2M).
///
/// Dropped any other way than through [`Retired::defer`], a batch hands
/// itself to the epoch.
#[derive(Default)]
pub struct Retired {
    boxes: Vec<ErasedBox>,
}

impl fmt::Debug for Retired {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Retired")
            .field("len", &self.boxes.len())
            .finish()
    }
}

impl Retired {
    /// An empty batch.
    pub fn new() -> Retired {
        Retired::default()
    }

    /// How many values wait in the batch.
    pub fn len(&self) -> usize {
        self.boxes.len()
    }

    /// True if no value waits in the batch.
    pub fn is_empty(&self) -> bool {
        self.boxes.is_empty()
    }

    /// Drops the batch's values once every guard pinned now is gone.
    pub fn defer(mut self, guard: &Guard) {
        let boxes = core::mem::take(&mut self.boxes);
        if !boxes.is_empty() {
            defer(guard, move || free_all(boxes));
        }
    }
}

/// Drops every box of a batch whose grace period is over.
fn free_all(boxes: Vec<ErasedBox>) {
    for b in boxes {
        // SAFETY: each box came from `Box::into_raw` in `retire_into`,
        // where it was unlinked from its `EpochBox` (so nothing else frees
        // it and no new reader can find it), and `free_all` runs only in
        // a function deferred after the last of them was unlinked: every
        // guard that could have loaded one is gone.
        unsafe { (b.drop)(b.ptr) };
    }
}

impl Drop for Retired {
    fn drop(&mut self) {
        if !self.boxes.is_empty() {
            core::mem::take(self).defer(&pin());
        }
    }
}

/// An optional heap value that readers borrow under a [`Guard`] and writers
/// replace, the old value being dropped after the grace period.
///
/// A value borrowed through [`EpochBox::get`] lives as long as the guard,
/// not as long as the borrow of the box, so even the box's own drop (and
/// [`EpochBox::set`]) hands the value it held to the epoch rather than
/// freeing it at once: a reader pinned before may still hold it.
///
/// ```
/// use ctrack_table::{EpochBox, pin};
///
/// let guard = pin();
/// let b = EpochBox::new(Some(Box::new(String::from("policy"))));
/// let v = b.get(&guard).unwrap();
/// drop(b);
/// // Still valid: freed only after `guard` is dropped.
/// assert_eq!(v, "policy");
/// ```
pub struct EpochBox<T: Send + Sync + 'static> {
    ptr: AtomicPtr<T>,
    _owns: PhantomData<Box<T>>,
}

impl<T: Send + Sync + 'static> fmt::Debug for EpochBox<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EpochBox")
            .field("set", &!self.ptr.load(Ordering::Relaxed).is_null())
            .finish()
    }
}

impl<T: Send + Sync + 'static> Default for EpochBox<T> {
    fn default() -> Self {
        EpochBox {
            ptr: AtomicPtr::new(core::ptr::null_mut()),
            _owns: PhantomData,
        }
    }
}

impl<T: Send + Sync + 'static> EpochBox<T> {
    /// A box holding `value`.
    pub fn new(value: Option<Box<T>>) -> Self {
        let b = EpochBox::default();
        if let Some(v) = value {
            b.ptr.store(Box::into_raw(v), Ordering::Relaxed);
        }
        b
    }

    /// The value, borrowed for as long as `guard` is pinned.
    #[inline]
    pub fn get<'g>(&self, guard: &'g Guard) -> Option<&'g T> {
        let _ = guard;
        let p = self.ptr.load(Ordering::Acquire);
        // SAFETY: a non-null pointer here came from `Box::into_raw` (in
        // `new`, `set`, `replace` or `get_or_init`) and is freed only by a
        // destructor deferred through the epoch after the pointer was
        // unlinked (by `replace`, `set` or `Drop`), or by `take_now`, whose
        // caller vouches that no reference from here is alive. `guard` is
        // a `Guard`, which only `pin` makes, so it is pinned on the very
        // collector `defer` hands that destructor to; the collector runs it
        // only once every guard pinned before the unlink is dropped, and
        // `guard`, which loaded the pointer, is one of them; so the value
        // outlives 'g.
        unsafe { p.as_ref() }
    }

    /// The value, installing the one `make` builds if none is set. If
    /// another thread installs one first, that one is returned and ours is
    /// dropped.
    pub fn get_or_init<'g>(&self, guard: &'g Guard, make: impl FnOnce() -> Box<T>) -> &'g T {
        if let Some(v) = self.get(guard) {
            return v;
        }
        let new = Box::into_raw(make());
        match self.ptr.compare_exchange(
            core::ptr::null_mut(),
            new,
            Ordering::AcqRel,
            Ordering::Acquire,
        ) {
            // SAFETY: `new` is now the installed value; it is freed only as
            // described in `get`, after 'g.
            Ok(_) => unsafe { &*new },
            Err(current) => {
                // SAFETY: `new` came from `Box::into_raw` just above and was
                // never published.
                drop(unsafe { Box::from_raw(new) });
                // SAFETY: `current` is the installed value, freed only as
                // described in `get`.
                unsafe { &*current }
            }
        }
    }

    /// Asks the processor to fetch the value's memory, if one is set (a
    /// hint: nothing is read through the pointer).
    #[inline]
    pub fn prefetch(&self) {
        crate::prefetch::prefetch_lines(self.ptr.load(Ordering::Relaxed).cast_const());
    }

    /// True if a value is set.
    pub fn is_set(&self) -> bool {
        !self.ptr.load(Ordering::Acquire).is_null()
    }

    /// Replaces the value with exclusive access to the box: a plain load
    /// and store, no locked exchange. The old value, if any, goes after
    /// the grace period (references from [`EpochBox::get`] are tied to
    /// their guard, not to the box); replacing nothing costs nothing more.
    pub fn set(&mut self, value: Option<Box<T>>) {
        let new = value.map_or(core::ptr::null_mut(), Box::into_raw);
        let old = self.ptr.load(Ordering::Relaxed);
        if old.is_null() && new.is_null() {
            return;
        }
        self.ptr.store(new, Ordering::Release);
        if !old.is_null() {
            retire_box(old, &pin());
        }
    }

    /// Replaces the value while readers may hold the old one: the old
    /// value is dropped after the grace period.
    pub fn replace(&self, value: Option<Box<T>>, guard: &Guard) {
        let new = value.map_or(core::ptr::null_mut(), Box::into_raw);
        let old = self.ptr.swap(new, Ordering::AcqRel);
        retire_box(old, guard);
    }

    /// Takes the value out (readers that load the box from now on find
    /// none) and puts it in `into`, to be dropped with that batch after
    /// its grace period: for a writer that unlinks many values at a time.
    pub fn retire_into(&self, into: &mut Retired) {
        let old = self.ptr.swap(core::ptr::null_mut(), Ordering::AcqRel);
        if old.is_null() {
            return;
        }
        if into.boxes.capacity() == 0 {
            into.boxes.reserve(RETIRED_ROOM);
        }
        into.boxes.push(ErasedBox {
            ptr: old.cast(),
            drop: drop_erased::<T>,
        });
    }

    /// Drops the value at once.
    ///
    /// # Safety
    /// No reference returned by [`EpochBox::get`] or
    /// [`EpochBox::get_or_init`] on this box may be alive.
    pub(crate) unsafe fn take_now(&mut self) {
        let p = self.ptr.load(Ordering::Relaxed);
        self.ptr.store(core::ptr::null_mut(), Ordering::Relaxed);
        if !p.is_null() {
            // SAFETY: `p` came from `Box::into_raw` and is unlinked; by the
            // contract no reference to the value is alive.
            drop(unsafe { Box::from_raw(p) });
        }
    }
}

impl<T: Send + Sync + 'static> Drop for EpochBox<T> {
    fn drop(&mut self) {
        let p = self.ptr.load(Ordering::Relaxed);
        if !p.is_null() {
            // A reader pinned before may hold the value (its reference is
            // tied to its guard, not to the box): after the grace period.
            retire_box(p, &pin());
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::AtomicUsize;

    struct Counted(Arc<AtomicUsize>);

    impl Drop for Counted {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }

    #[test]
    fn get_or_init_installs_once() {
        let drops = Arc::new(AtomicUsize::new(0));
        let b: EpochBox<Counted> = EpochBox::default();
        let g = pin();
        assert!(b.get(&g).is_none());
        let first: *const Counted = b.get_or_init(&g, || Box::new(Counted(Arc::clone(&drops))));
        let again: *const Counted = b.get_or_init(&g, || unreachable!("already set"));
        assert_eq!(first, again);
        assert!(b.is_set());
        assert_eq!(drops.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn values_outlive_the_box_while_a_guard_holds_them() {
        let drops = Arc::new(AtomicUsize::new(0));
        let g = pin();
        let mut b = EpochBox::new(Some(Box::new(Counted(Arc::clone(&drops)))));
        let first = b.get(&g).unwrap();
        // Neither `set`, nor `replace`, nor the box's drop frees a value
        // under the guard that read it.
        b.set(Some(Box::new(Counted(Arc::clone(&drops)))));
        let second = b.get(&g).unwrap();
        b.replace(None, &g);
        assert!(!b.is_set());
        b.set(Some(Box::new(Counted(Arc::clone(&drops)))));
        let third = b.get(&g).unwrap();
        drop(b);
        assert_eq!(drops.load(Ordering::Relaxed), 0);
        for v in [first, second, third] {
            assert!(Arc::ptr_eq(&v.0, &drops));
        }
        drop(g);
        // Freed after the guard, when the collector gets to it.
        eventually(|| drops.load(Ordering::Relaxed) == 3);
    }

    /// A guard held on and moved on to the current epoch now and then
    /// (as a per-thread handle does) no longer holds back what was retired
    /// before: it is freed while the guard lives on. (Repinned once only,
    /// it would hold the epoch back again: crossbeam frees a value two
    /// epochs after it was retired, and a pinned guard lets the epoch move
    /// one step beyond its own.)
    #[test]
    fn a_repinned_guard_lets_older_values_go() {
        let drops = Arc::new(AtomicUsize::new(0));
        let mut g = pin();
        let b = EpochBox::new(Some(Box::new(Counted(Arc::clone(&drops)))));
        b.replace(None, &g);
        for _ in 0..100_000 {
            if drops.load(Ordering::Relaxed) == 1 {
                return;
            }
            g.repin();
            g.flush();
            std::thread::yield_now();
        }
        panic!("a guard repinned held its old epoch");
    }

    /// What a batch and a box say of themselves.
    #[test]
    fn batches_and_boxes_say_what_they_hold() {
        let drops = Arc::new(AtomicUsize::new(0));
        let b = EpochBox::new(Some(Box::new(Counted(Arc::clone(&drops)))));
        assert_eq!(format!("{b:?}"), "EpochBox { set: true }");
        let mut batch = Retired::new();
        assert!(batch.is_empty());
        b.retire_into(&mut batch);
        assert!(!batch.is_empty());
        assert_eq!(format!("{b:?}"), "EpochBox { set: false }");
        assert_eq!(format!("{batch:?}"), "Retired { len: 1 }");
        batch.defer(&pin());
        eventually(|| drops.load(Ordering::Relaxed) == 1);
    }

    /// Runs the collector until `done`, as long as it takes it to get to
    /// what was deferred (other tests' guards may hold the epoch back).
    fn eventually(done: impl Fn() -> bool) {
        for _ in 0..100_000 {
            if done() {
                return;
            }
            pin().flush();
            std::thread::yield_now();
        }
        panic!("the collector never got to it");
    }

    #[test]
    fn retired_values_outlive_the_guards_that_read_them_then_go() {
        let drops = Arc::new(AtomicUsize::new(0));
        let counted = || Some(Box::new(Counted(Arc::clone(&drops))));
        let boxes: Vec<EpochBox<Counted>> = (0..3).map(|_| EpochBox::new(counted())).collect();
        let g = pin();
        let read: Vec<&Counted> = boxes.iter().map(|b| b.get(&g).unwrap()).collect();
        let mut batch = Retired::new();
        for b in &boxes {
            b.retire_into(&mut batch);
        }
        // An empty box adds nothing.
        boxes[0].retire_into(&mut batch);
        assert_eq!(batch.len(), 3);
        assert!(boxes.iter().all(|b| !b.is_set() && b.get(&g).is_none()));
        batch.defer(&g);
        drop(boxes);
        assert_eq!(drops.load(Ordering::Relaxed), 0);
        for v in &read {
            assert!(Arc::ptr_eq(&v.0, &drops), "freed under the guard");
        }
        drop(g);
        eventually(|| drops.load(Ordering::Relaxed) == 3);
        // A batch dropped without `defer` hands itself to the epoch.
        let b = EpochBox::new(counted());
        let g = pin();
        let v = b.get(&g).unwrap();
        let mut batch = Retired::new();
        b.retire_into(&mut batch);
        drop(batch);
        assert!(Arc::ptr_eq(&v.0, &drops));
        assert_eq!(drops.load(Ordering::Relaxed), 3);
        drop(g);
        eventually(|| drops.load(Ordering::Relaxed) == 4);
    }

    #[test]
    fn take_now_frees_at_once() {
        let drops = Arc::new(AtomicUsize::new(0));
        let mut b = EpochBox::new(Some(Box::new(Counted(Arc::clone(&drops)))));
        // SAFETY: no reference from `get` was made.
        unsafe { b.take_now() };
        assert_eq!(drops.load(Ordering::Relaxed), 1);
        assert!(!b.is_set());
    }
}
