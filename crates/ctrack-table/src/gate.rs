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
//! limit without the others seeing the change whole holds a [`Place`]
//! from before its first change until after its last: a writer that
//! checked the count before it inserts, a writer that evicts in another
//! piece than the one it inserts into. (A writer whose eviction and insert
//! are in one piece can instead leave that piece's published count
//! alone until its insert: [`crate::Writer::hide_count`].) A writer that
//! checks counts the writers holding places when its sum began (each may
//! still add one), and accepts its sum if no place was taken or given back
//! while it summed: such a sum saw every writer that had finished before
//! it began in full, and every writer still in flight is counted as one
//! more, whatever part of its changes the sum caught. If places moved, it
//! may sum again; the last sum, with every place taken while it ran
//! counted as one more too, is still a bound from above
//! ([`GateCount::bound`]), only a looser one.
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
    /// Other writers that held a place when the sum began: each may add
    /// one that the sum did not see.
    pub others: usize,
    /// Places taken or given back while it summed (0: the sum is settled).
    /// Each taken may add one more; `sum + others + moved` bounds the total
    /// from above whatever the sum caught.
    pub moved: usize,
}

impl GateCount {
    /// At least the total the counted writers will reach: the sum, every
    /// writer that held a place when it began, and every place taken
    /// while it ran.
    pub fn bound(&self) -> usize {
        self.sum + self.others + self.moved
    }
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
    /// counters stored with `Release`), up to `tries` (at least one) times,
    /// until no place was taken or given back while it summed; returns the
    /// last try's count (`moved` 0 if it settled).
    ///
    /// Why [`GateCount::bound`] bounds the total even when the sum did not
    /// settle: a change the sum missed was made by a writer holding a
    /// place at some time during the sum (one that gave its place back
    /// before the sum began had made its changes visible to it), so by one
    /// of the `others` or one of the places taken meanwhile, and each such
    /// writer adds at most one.
    pub fn count(&mut self, tries: usize, mut sum: impl FnMut() -> usize) -> GateCount {
        let mut last = GateCount {
            sum: 0,
            others: 0,
            moved: 0,
        };
        for _ in 0..tries.max(1) {
            let total = sum();
            let now = self.gate.word.load(Ordering::Acquire);
            last = GateCount {
                sum: total,
                // This place is among those held.
                others: held(self.seen).saturating_sub(1) as usize,
                moved: sequence(now).wrapping_sub(sequence(self.seen)) as u32 as usize,
            };
            self.seen = now;
            if last.moved == 0 {
                break;
            }
        }
        last
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

    fn settled(sum: usize, others: usize) -> GateCount {
        GateCount {
            sum,
            others,
            moved: 0,
        }
    }

    #[test]
    fn places_are_counted_and_given_back() {
        let g = Gate::new();
        assert_eq!(g.held(), 0);
        let mut a = g.enter();
        let b = g.enter();
        assert_eq!(g.held(), 2);
        // b was taken after a's last look: one move, and b not yet among
        // the others a saw at its start.
        let c = a.count(1, || 5);
        assert_eq!((c.sum, c.others, c.moved, c.bound()), (5, 0, 1, 6));
        assert_eq!(a.count(1, || 5), settled(5, 1));
        drop(b);
        assert_eq!(g.held(), 1);
        assert_eq!(a.count(2, || 7), settled(7, 0), "the second try settles");
        drop(a);
        assert_eq!(g.held(), 0);
    }

    #[test]
    fn a_sum_disturbed_on_every_try_is_bounded_by_what_moved() {
        let g = Gate::new();
        let mut a = g.enter();
        let mut others = Vec::new();
        // Each sum takes two places, as writers arriving meanwhile would.
        let mut n = 0;
        let c = a.count(3, || {
            others.push(g.enter());
            others.push(g.enter());
            n += 1;
            n
        });
        assert_eq!(n, 3, "every try was disturbed");
        assert_eq!(
            c,
            GateCount {
                sum: 3,
                others: 4,
                moved: 2
            },
            "the last try's"
        );
        assert_eq!(c.bound(), 9, "the sum, the others and the moves");
        assert_eq!(g.held(), 7);
        // Give-backs move it too.
        let c = a.count(1, || {
            others.pop();
            1
        });
        assert_eq!(
            c,
            GateCount {
                sum: 1,
                others: 6,
                moved: 1
            }
        );
        assert_eq!(a.count(1, || 1), settled(1, 5));
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
        let c = a.count(1, || 0);
        assert_eq!(c.moved, 2, "moved across the wrap");
        assert_eq!(a.count(1, || 0), settled(0, 0));
        drop(a);
        assert_eq!(g.held(), 0);
    }
}
