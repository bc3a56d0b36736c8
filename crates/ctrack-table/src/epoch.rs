//! Memory reclamation: readers pin an epoch, writers defer frees until every
//! reader pinned before the unlink has unpinned.
//!
//! Normal builds use crossbeam-epoch's process-wide collector. Under
//! `--cfg loom` the model checker cannot drive crossbeam's collector, so a
//! guard is a token and deferred work is dropped without running: nothing
//! is reused or freed while a model runs, which keeps the models about the
//! table's own races (crossbeam models its collector itself).

use core::fmt;
use core::marker::PhantomData;

use crate::sync::{AtomicPtr, Ordering};

#[cfg(not(loom))]
pub use crossbeam_epoch::Guard;

/// A pinned epoch (model-checking build: a token).
#[cfg(loom)]
#[derive(Debug)]
pub struct Guard {
    _private: (),
}

/// Pins the current thread: references read from the table stay valid
/// until the guard is dropped. Pinning is cheap (a thread-local counter and
/// a fence) and nests; pin once per batch of packets, not per packet.
#[inline]
pub fn pin() -> Guard {
    #[cfg(not(loom))]
    {
        crossbeam_epoch::pin()
    }
    #[cfg(loom)]
    {
        Guard { _private: () }
    }
}

/// Runs `f` once every thread pinned now has unpinned.
pub(crate) fn defer(guard: &Guard, f: impl FnOnce() + Send + 'static) {
    #[cfg(not(loom))]
    {
        guard.defer(f);
    }
    #[cfg(loom)]
    {
        let _ = guard;
        drop(f);
    }
}

/// A raw pointer that may cross threads; used only to hand a box to a
/// deferred destructor.
struct SendPtr<T>(*mut T);

// SAFETY: the pointer is the unique owner of a `Box<T>` in transit to a
// deferred destructor on another thread; moving a `Box<T>` between threads
// is sound when `T: Send`.
unsafe impl<T: Send> Send for SendPtr<T> {}

/// An optional heap value that readers borrow under a [`Guard`] and writers
/// replace, the old value being dropped after the grace period.
pub struct EpochBox<T> {
    ptr: AtomicPtr<T>,
    _owns: PhantomData<Box<T>>,
}

impl<T> fmt::Debug for EpochBox<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EpochBox")
            .field("set", &!self.ptr.load(Ordering::Relaxed).is_null())
            .finish()
    }
}

impl<T> Default for EpochBox<T> {
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
        // `new`, `set`, `replace` or `get_or_init`) and is freed only by
        // `Drop` (no reader can exist then), by `set` (exclusive access), or
        // by a destructor that `replace` deferred through the epoch after
        // swapping the pointer out. The collector runs that destructor only
        // once every guard pinned before the swap is dropped, and `guard`,
        // which loaded the pointer, is one of them; so the value outlives
        // 'g.
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

    /// True if a value is set.
    pub fn is_set(&self) -> bool {
        !self.ptr.load(Ordering::Acquire).is_null()
    }

    /// Replaces the value with exclusive access: nobody else can be
    /// reading, so the old value is dropped at once.
    pub fn set(&mut self, value: Option<Box<T>>) {
        let new = value.map_or(core::ptr::null_mut(), Box::into_raw);
        // Exclusive access: a plain load and store, no locked exchange.
        let old = self.ptr.load(Ordering::Relaxed);
        if old.is_null() && new.is_null() {
            return;
        }
        self.ptr.store(new, Ordering::Release);
        if !old.is_null() {
            // SAFETY: `old` came from `Box::into_raw` and, with `&mut self`,
            // no reader can hold a reference to it.
            drop(unsafe { Box::from_raw(old) });
        }
    }

    /// Replaces the value while readers may hold the old one: the old
    /// value is dropped after the grace period.
    pub fn replace(&self, value: Option<Box<T>>, guard: &Guard) {
        let new = value.map_or(core::ptr::null_mut(), Box::into_raw);
        let old = self.ptr.swap(new, Ordering::AcqRel);
        if !old.is_null() {
            let p = SendPtr(old);
            defer(guard, move || {
                let p = p;
                // SAFETY: `p.0` came from `Box::into_raw`, was unlinked by
                // the swap above, and the epoch guarantees no reader still
                // holds it when this runs.
                drop(unsafe { Box::from_raw(p.0) });
            });
        }
    }
}

impl<T> Drop for EpochBox<T> {
    fn drop(&mut self) {
        let p = self.ptr.load(Ordering::Relaxed);
        if !p.is_null() {
            // SAFETY: the pointer came from `Box::into_raw`; dropping the
            // box means no reader can be borrowing through it.
            drop(unsafe { Box::from_raw(p) });
        }
    }
}
