//! The synchronisation primitives the table uses, in one place so that a
//! `--cfg loom` build swaps in loom's model-checked versions (the way
//! crossbeam's `primitive` shim does).
//!
//! Everything else in the crate takes its atomics, mutexes and spin hints
//! from here, never from `std` or `parking_lot` directly.

#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{
    AtomicI64, AtomicPtr, AtomicU8, AtomicU16, AtomicU32, AtomicU64, Ordering,
};

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{
    AtomicI64, AtomicPtr, AtomicU8, AtomicU16, AtomicU32, AtomicU64, Ordering,
};

#[cfg(not(loom))]
pub(crate) use std::sync::Arc;

#[cfg(loom)]
pub(crate) use loom::sync::Arc;

/// A mutex whose `lock` cannot fail (no poisoning): parking_lot's, or
/// loom's under the model checker.
#[derive(Debug, Default)]
pub(crate) struct Mutex<T>(
    #[cfg(not(loom))] parking_lot::Mutex<T>,
    #[cfg(loom)] loom::sync::Mutex<T>,
);

#[cfg(not(loom))]
pub(crate) type MutexGuard<'a, T> = parking_lot::MutexGuard<'a, T>;
#[cfg(loom)]
pub(crate) type MutexGuard<'a, T> = loom::sync::MutexGuard<'a, T>;

impl<T> Mutex<T> {
    pub(crate) fn new(value: T) -> Self {
        #[cfg(not(loom))]
        {
            Mutex(parking_lot::Mutex::new(value))
        }
        #[cfg(loom)]
        {
            Mutex(loom::sync::Mutex::new(value))
        }
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, T> {
        #[cfg(not(loom))]
        {
            self.0.lock()
        }
        #[cfg(loom)]
        {
            self.0.lock().expect("loom mutex poisoned")
        }
    }

    /// Locks, spinning a while before the thread parks: for locks held
    /// for microseconds, where parking and waking cost more than the wait.
    pub(crate) fn lock_spinning(&self, rounds: u32) -> MutexGuard<'_, T> {
        #[cfg(not(loom))]
        {
            if let Some(g) = self.0.try_lock() {
                return g;
            }
            // A look at the lock after every pause. (Looking after 1, 2,
            // 4 ... 64 pauses, so as to take the lock's line from its
            // holder less often, gave the same rate and a longer tail at
            // 16 threads: BENCHMARKS.md, lease 7.)
            for _ in 0..rounds {
                core::hint::spin_loop();
                if !self.0.is_locked()
                    && let Some(g) = self.0.try_lock()
                {
                    return g;
                }
            }
            self.0.lock()
        }
        #[cfg(loom)]
        {
            let _ = rounds;
            self.lock()
        }
    }

    pub(crate) fn try_lock(&self) -> Option<MutexGuard<'_, T>> {
        #[cfg(not(loom))]
        {
            self.0.try_lock()
        }
        #[cfg(loom)]
        {
            self.0.try_lock().ok()
        }
    }
}

/// Tells the processor (or the model checker) that this thread is waiting
/// for another one.
#[inline]
pub(crate) fn spin_wait(round: u32) {
    #[cfg(not(loom))]
    {
        if round < 64 {
            std::hint::spin_loop();
        } else {
            // The holder may have been preempted: let it run.
            std::thread::yield_now();
        }
    }
    #[cfg(loom)]
    {
        let _ = round;
        loom::thread::yield_now();
    }
}
