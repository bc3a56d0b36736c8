//! The table's part of every record: liveness, the entry lock, and the
//! links of the zone list and the timer wheel.
//!
//! Lock order, for the whole crate: shard locks in increasing shard number,
//! then at most one entry lock. The packet path takes an entry lock alone
//! and never a shard lock while holding it.

use crate::sync::{AtomicU8, AtomicU16, AtomicU32, Ordering, spin_wait};

const LIVE: u8 = 1;
const LOCKED: u8 = 2;

/// Wheel slot of a record that is in no wheel list.
pub(crate) const NO_WHEEL: u16 = u16::MAX;

/// Bookkeeping the table keeps inside each record (20 bytes). A record
/// type embeds one and returns it from [`Record::header`](crate::Record).
#[derive(Debug)]
pub struct Header {
    state: AtomicU8,
    _spare: AtomicU8,
    pub(crate) wheel_slot: AtomicU16,
    pub(crate) zone_prev: AtomicU32,
    /// Next in the zone list; for a vacant slot, next in the free list.
    pub(crate) zone_next: AtomicU32,
    pub(crate) wheel_prev: AtomicU32,
    pub(crate) wheel_next: AtomicU32,
}

impl Default for Header {
    fn default() -> Self {
        Header {
            state: AtomicU8::new(0),
            _spare: AtomicU8::new(0),
            wheel_slot: AtomicU16::new(NO_WHEEL),
            zone_prev: AtomicU32::new(0),
            zone_next: AtomicU32::new(0),
            wheel_prev: AtomicU32::new(0),
            wheel_next: AtomicU32::new(0),
        }
    }
}

impl Header {
    /// True while the record is in the table.
    #[inline]
    pub fn is_live(&self) -> bool {
        self.state.load(Ordering::Acquire) & LIVE != 0
    }

    /// Takes the entry lock of a live record; `None` once the record has
    /// been removed (then the caller must look it up again).
    #[inline]
    pub(crate) fn lock(&self) -> Option<()> {
        let mut round = 0;
        loop {
            let s = self.state.load(Ordering::Relaxed);
            if s & LIVE == 0 {
                return None;
            }
            if s & LOCKED == 0
                && self
                    .state
                    .compare_exchange_weak(s, s | LOCKED, Ordering::Acquire, Ordering::Relaxed)
                    .is_ok()
            {
                return Some(());
            }
            spin_wait(round);
            round += 1;
        }
    }

    /// Releases the entry lock of a record that is still live (a record is
    /// removed only by a thread holding its lock, so it is).
    #[inline]
    pub(crate) fn unlock(&self) {
        self.state.store(LIVE, Ordering::Release);
    }

    /// Marks a record removed, waiting for any holder of its lock. Writers
    /// only (the record's shard locks held). Returns false if it already
    /// was removed.
    pub(crate) fn kill(&self) -> bool {
        if self.lock().is_none() {
            return false;
        }
        self.state.store(0, Ordering::Release);
        true
    }

    /// Releases a lock taken by [`Header::lock`] and marks the record
    /// removed in one step.
    pub(crate) fn kill_locked(&self) {
        self.state.store(0, Ordering::Release);
    }

    /// Resets a vacant slot's header for a new record (the caller has
    /// exclusive access).
    pub(crate) fn reset(&self) {
        self.state.store(0, Ordering::Relaxed);
        self.wheel_slot.store(NO_WHEEL, Ordering::Relaxed);
        self.zone_prev.store(0, Ordering::Relaxed);
        self.zone_next.store(0, Ordering::Relaxed);
        self.wheel_prev.store(0, Ordering::Relaxed);
        self.wheel_next.store(0, Ordering::Relaxed);
    }

    /// Publishes a freshly initialised record as live.
    pub(crate) fn set_live(&self) {
        self.state.store(LIVE, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::Header;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Duration;

    /// A held entry lock keeps the record live and shuts out a second
    /// taker, which waits (spinning, then yielding) until it is released;
    /// a removed record's lock is refused.
    #[test]
    fn an_entry_lock_has_one_holder_at_a_time() {
        let h = Arc::new(Header::default());
        h.set_live();
        assert!(h.lock().is_some());
        assert!(h.is_live(), "live while locked");
        let took = Arc::new(AtomicBool::new(false));
        let (h2, took2) = (Arc::clone(&h), Arc::clone(&took));
        let waiter = std::thread::spawn(move || {
            assert!(h2.lock().is_some());
            took2.store(true, Ordering::SeqCst);
            h2.unlock();
        });
        // Long enough for the waiter to spin past its first 64 rounds.
        std::thread::sleep(Duration::from_millis(50));
        assert!(!took.load(Ordering::SeqCst), "taken while held");
        h.unlock();
        waiter.join().unwrap();
        assert!(took.load(Ordering::SeqCst));
        assert!(h.kill());
        assert!(!h.is_live() && h.lock().is_none() && !h.kill());
    }
}
