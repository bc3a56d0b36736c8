//! The caller's word kept with each connection (a firewall's cached
//! verdict, say): set when a commit creates the connection
//! ([`CtAction::word`](crate::CtAction::word)), read into every verdict,
//! changed here; and its label, changed after the commit that set it.

use ctrack_table::{Guard, pin};

use super::tracker::{Fam, Tracker};
use crate::key::{ConnId, Family, V6};
use crate::time::Time;

impl Tracker {
    /// Replaces the word of connection `id` with `new` if it is `old` (a
    /// compare-exchange; no lock, so packets being judged meanwhile read
    /// one or the other). False if the connection is not live (gone,
    /// expired at `now`, its zone flushed) or its word was not `old`.
    ///
    /// An id names a slot: once its connection is gone, a later one may
    /// have it; `old` (which a caller read from that connection's verdict)
    /// makes a mix-up unlikely, not impossible.
    pub fn set_word(&self, id: ConnId, old: u64, new: u64, now: Time) -> bool {
        let guard = pin();
        match id.family() {
            Family::V4 => self.set_word_in::<u32>(&guard, id, old, new, now),
            Family::V6 => self.set_word_in::<V6>(&guard, id, old, new, now),
        }
    }

    fn set_word_in<A: Fam>(
        &self,
        guard: &Guard,
        id: ConnId,
        old: u64,
        new: u64,
        now: Time,
    ) -> bool {
        self.live_entry::<A>(guard, id, now)
            .is_some_and(|e| e.record().cas_word(old, new))
    }

    /// Sets the bits of connection `id`'s label that `mask` selects to
    /// those of `value`, as a commit's `label` would (OVN commits an
    /// established connection again to change its label, when the ACL that
    /// allows it changes). False if the connection is not live.
    pub fn set_label(&self, id: ConnId, value: u128, mask: u128, now: Time) -> bool {
        let guard = pin();
        match id.family() {
            Family::V4 => self.set_label_in::<u32>(&guard, id, value, mask, now),
            Family::V6 => self.set_label_in::<V6>(&guard, id, value, mask, now),
        }
    }

    fn set_label_in<A: Fam>(
        &self,
        guard: &Guard,
        id: ConnId,
        value: u128,
        mask: u128,
        now: Time,
    ) -> bool {
        let Some(e) = self.live_entry::<A>(guard, id, now) else {
            return false;
        };
        let Some(lock) = e.lock() else { return false };
        lock.set_label(value, mask, guard);
        self.shared.note_extended(true);
        true
    }
}
