//! An admission gate for a limit on a count that is kept in pieces.
//!
//! The table keeps its count per shard, so that no insert or removal
//! writes a line shared by every thread. A limit on the whole count is then
//! checked by summing the shards, which is not a snapshot: the sum can
//! catch one change of a writer and miss another. Two kinds of writers
//! make that unsafe near a limit:
//!
//! - threads that all find one place left and all take it (each sum
//!   misses the others' inserts, still to come);
//! - a thread that makes room by evicting a record and then inserts its
//!   own: a sum that sees the eviction and not the insert finds a place
//!   that is not there, and whoever takes it ends the table above its
//!   limit.
//!
//! The gate covers both. Every writer that may change the count near the
//! limit, whether it checked the count or evicts to make room, holds a
//! [`Place`] from before its first change until after its last. A writer
//! that checks counts the others holding places (each may still add one)
//! and accepts its sum only if no place was taken or given back while it
//! summed; otherwise it sums again, and after a few tries reports the count
//! unknown (its caller treats that as full). So a sum it accepts saw every
//! writer that had finished before it began in full, and every writer
//! still in flight is counted as one more, whatever part of its changes
//! the sum caught.
//!
//! For that, the summed counters must be published with `Release` and read
//! with `Acquire` ([`crate::Table::len`] does): a sum that reads a change
//! made after a place was taken then also reads the place.
//!
//! The gate is one word (the places held, and a sequence number that
//! every take and give-back moves), touched only near the limit.

use crate::sync::{AtomicU64, Ordering};

/// One take of a place: the count of places held goes up by one, and the
/// sequence number (high 32 bits) moves on.
const TAKE: u64 = (1 << 32) + 1;
/// One give-back: the count goes down by one, the sequence number moves on
/// (adding `2^32 - 1` borrows from the count's half and carries into the
/// sequence's).
const GIVE_BACK: u64 = (1 << 32) - 1;

fn held(word: u64) -> u64 {
    word & 0xffff_ffff
}

fn sequence(word: u64) -> u64 {
    word >> 32
}

/// Places held by writers near a limit (see the module's documentation).
#[derive(Debug, Default)]
pub struct Gate {
    word: AtomicU64,
}

/// A count summed through the gate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GateCount {
    /// What the sum found.
    pub sum: usize,
    /// Other writers holding a place while it was summed: each may add one.
    pub others: usize,
}

impl Gate {
    /// A gate with no place held.
    pub fn new() -> Self {
        Self::default()
    }

    /// Takes a place, held until the returned value is dropped. Take it
    /// before the first change to the counted total.
    pub fn enter(&self) -> Place<'_> {
        // AcqRel: the changes of writers that gave their places back before
        // this take are visible to this writer's sums; and this take is
        // visible to any sum that reads one of this writer's later changes.
        let seen = self
            .word
            .fetch_add(TAKE, Ordering::AcqRel)
            .wrapping_add(TAKE);
        Place { gate: self, seen }
    }

    /// Places held now.
    pub fn held(&self) -> usize {
        held(self.word.load(Ordering::Relaxed)) as usize
    }
}

/// A place held at a [`Gate`]; given back when dropped.
#[derive(Debug)]
pub struct Place<'a> {
    gate: &'a Gate,
    /// The gate's word as this place last saw it.
    seen: u64,
}

impl Place<'_> {
    /// Sums the counted total with `sum` (whose loads must be `Acquire` of
    /// counters stored with `Release`), up to `tries` times, until no place
    /// was taken or given back while it summed. None if every try was
    /// disturbed.
    pub fn count(&mut self, tries: usize, mut sum: impl FnMut() -> usize) -> Option<GateCount> {
        for _ in 0..tries {
            let total = sum();
            let now = self.gate.word.load(Ordering::Acquire);
            if sequence(now) == sequence(self.seen) {
                return Some(GateCount {
                    sum: total,
                    // This place is among those held.
                    others: held(now).saturating_sub(1) as usize,
                });
            }
            self.seen = now;
        }
        None
    }
}

impl Drop for Place<'_> {
    fn drop(&mut self) {
        // Release: a writer that takes a place after this one is given back
        // sees every change this writer made.
        self.gate.word.fetch_add(GIVE_BACK, Ordering::AcqRel);
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn places_are_counted_and_given_back() {
        let g = Gate::new();
        assert_eq!(g.held(), 0);
        let mut a = g.enter();
        let b = g.enter();
        assert_eq!(g.held(), 2);
        assert_eq!(a.count(1, || 5), None, "b was taken after a's last look");
        assert_eq!(a.count(1, || 5), Some(GateCount { sum: 5, others: 1 }));
        drop(b);
        assert_eq!(g.held(), 1);
        assert_eq!(a.count(2, || 7), Some(GateCount { sum: 7, others: 0 }));
        drop(a);
        assert_eq!(g.held(), 0);
    }

    #[test]
    fn a_sum_disturbed_on_every_try_is_unknown() {
        let g = Gate::new();
        let mut a = g.enter();
        let mut others = Vec::new();
        // Each sum takes a place, as a writer arriving meanwhile would.
        assert_eq!(
            a.count(3, || {
                others.push(g.enter());
                1
            }),
            None
        );
        assert_eq!(g.held(), 4);
        // Give-backs disturb too.
        assert_eq!(
            a.count(3, || {
                others.pop();
                1
            }),
            None
        );
        assert_eq!(a.count(1, || 1), Some(GateCount { sum: 1, others: 0 }));
    }

    #[test]
    fn the_sequence_wraps_without_touching_the_count() {
        let g = Gate {
            word: AtomicU64::new(u64::MAX << 32),
        };
        let mut a = g.enter();
        assert_eq!(g.held(), 1);
        let b = g.enter();
        drop(b);
        assert_eq!(g.held(), 1);
        assert!(a.count(2, || 0).is_some());
        drop(a);
        assert_eq!(g.held(), 0);
    }
}
