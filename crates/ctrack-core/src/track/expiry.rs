//! Freeing expired connections and those of flushed zones.

use super::shared::Counted;
use super::tracker::Tracker;
use crate::key::instance;
use crate::time::Time;
use crate::verdict::C;
use crate::verdict::Stats;
use ctrack_table::{Guard, pin};

/// What a sweep did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Sweep {
    /// Connections freed because they had expired.
    pub expired: usize,
    /// Connections of flushed zones freed.
    pub flushed: usize,
    /// Connections looked at.
    pub examined: usize,
    /// When to sweep next: `Some(now)` if the budget ran out with work
    /// left, the end of the next occupied second otherwise, `None` if
    /// nothing is tracked.
    pub next: Option<Time>,
}

impl Tracker {
    /// Frees expired connections and connections of flushed zones, looking
    /// at no more than `budget`, and says when to call again.
    pub fn sweep(&self, now: Time, budget: usize, stats: &mut Stats) -> Sweep {
        let guard = pin();
        let counted = Counted::new(&self.shared);
        let now_ms = now.as_millis();
        let mut out = Sweep::default();
        let (flushed, dead_left) = self.reclaim_dead(&counted, &guard, budget);
        out.flushed = flushed;
        out.examined = flushed;
        let left = budget - flushed;
        let s4 = self.v4.sweep(&counted, &guard, now_ms, left);
        let s6 = self.v6.sweep(&counted, &guard, now_ms, left - s4.examined);
        out.expired = s4.removed + s6.removed;
        out.examined += s4.examined + s6.examined;
        let gone = self.expect.sweep(now_ms, |x| self.master_alive(&guard, x));
        if gone != 0 {
            stats.add(C::ExpectExpired, gone as u64);
        }
        counted.count_into(stats);
        out.next = if dead_left || s4.more || s6.more {
            Some(now)
        } else {
            match (self.v4.next_due(), self.v6.next_due()) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            }
            .map(Time::from_millis)
        };
        out
    }

    /// True if flushed zone instances still hold connections.
    pub(super) fn reclaim_pending(&self) -> bool {
        !self
            .dead
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_empty()
    }

    /// Frees connections of flushed zone instances, at most `budget`.
    /// Returns how many, and whether some are left.
    pub(super) fn reclaim_dead(
        &self,
        ctx: &Counted<'_>,
        guard: &Guard,
        budget: usize,
    ) -> (usize, bool) {
        let mut dead = self.dead.lock().unwrap_or_else(|e| e.into_inner());
        let mut removed = 0;
        while let Some(d) = dead.front_mut() {
            let inst = instance(d.zone, d.generation);
            while d.family < 2 {
                let shards = if d.family == 0 {
                    self.v4.shard_count()
                } else {
                    self.v6.shard_count()
                };
                while d.shard < shards {
                    if removed >= budget {
                        return (removed, true);
                    }
                    let (n, more) = if d.family == 0 {
                        self.v4
                            .reclaim_instance(ctx, guard, d.shard, inst, budget - removed)
                    } else {
                        self.v6
                            .reclaim_instance(ctx, guard, d.shard, inst, budget - removed)
                    };
                    removed += n;
                    if more {
                        return (removed, true);
                    }
                    d.shard += 1;
                }
                d.family += 1;
                d.shard = 0;
            }
            dead.pop_front();
        }
        (removed, false)
    }
}
