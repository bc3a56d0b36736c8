//! Freeing expired connections and those of flushed zones.

use std::sync::atomic::Ordering::{Acquire, Release};

use ctrack_table::{Guard, pin};

use super::shared::Counted;
use super::tracker::Tracker;
use crate::key::instance;
use crate::time::Time;
use crate::verdict::C;
use crate::verdict::Stats;

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
        let counted = Counted::at(&self.shared, now);
        let now_ms = now.as_millis();
        let mut out = Sweep::default();
        let (flushed, dead_left) = self.reclaim_dead(&counted, &guard, budget);
        out.flushed = flushed;
        out.examined = flushed;
        let left = budget - flushed;
        let s4 = self.v4.sweep(&counted, &guard, now_ms, left);
        let s6 = self
            .v6
            .get()
            .map(|t| t.sweep(&counted, &guard, now_ms, left - s4.examined))
            .unwrap_or_default();
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
            match (s4.next_due, s6.next_due) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            }
            .map(Time::from_millis)
        };
        out
    }

    /// True if flushed zone instances still hold connections.
    pub(super) fn reclaim_pending(&self) -> bool {
        self.dead_pending.load(Acquire)
    }

    /// Frees connections of flushed zone instances, at most `budget`.
    /// Returns how many, and whether some are left.
    pub(super) fn reclaim_dead(
        &self,
        ctx: &Counted<'_>,
        guard: &Guard,
        budget: usize,
    ) -> (usize, bool) {
        if !self.dead_pending.load(Acquire) {
            return (0, false);
        }
        let mut dead = self.dead.lock().unwrap_or_else(|e| e.into_inner());
        let mut removed = 0;
        while let Some(d) = dead.front_mut() {
            let inst = instance(d.zone, d.generation);
            // An IPv6 table not made yet holds nothing to reclaim.
            let v6 = self.v6.get();
            while d.family < 2 {
                let shards = match (d.family, v6) {
                    (0, _) => self.v4.shard_count(),
                    (_, Some(t)) => t.shard_count(),
                    (_, None) => 0,
                };
                while d.shard < shards {
                    if removed >= budget {
                        // Out of budget: work is left only if a shard still
                        // holds connections of this instance.
                        let table_len = |s| match (d.family, v6) {
                            (0, _) => self.v4.instance_len(s, inst),
                            (_, Some(t)) => t.instance_len(s, inst),
                            (_, None) => 0,
                        };
                        if table_len(d.shard) != 0 {
                            return (removed, true);
                        }
                        d.shard += 1;
                        continue;
                    }
                    let (n, more) = match (d.family, v6) {
                        (0, _) => {
                            self.v4
                                .reclaim_instance(ctx, guard, d.shard, inst, budget - removed)
                        }
                        (_, Some(t)) => {
                            t.reclaim_instance(ctx, guard, d.shard, inst, budget - removed)
                        }
                        (_, None) => (0, false),
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
        self.dead_pending.store(false, Release);
        (removed, false)
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{Sim, T0, tcp, udp, udp_key};
    use super::Sweep;
    use crate::time::Time;
    use ctrack_wire::build::{Frame, L4};
    use ctrack_wire::tcp::flags::SYN;
    use std::net::Ipv6Addr;

    #[test]
    fn sweeping_an_empty_tracker_finds_nothing_to_do() {
        let sim = Sim::new();
        assert_eq!(sim.sweep(sim.now, 100), Sweep::default());
    }

    #[test]
    fn a_sweep_before_expiry_frees_nothing_and_names_the_second_due() {
        let mut sim = Sim::one_shard(100);
        // One way: 60 s, so it expires at T0 + 60.5 s, in the second that
        // ends at T0 + 61 s.
        sim.at(500).open(&udp(1000, true), "commit");
        let s = sim.sweep(sim.now, 100);
        assert_eq!(
            s,
            Sweep {
                next: Some(Time::from_millis(T0 + 61_000)),
                ..Sweep::default()
            }
        );
        assert_eq!(sim.t.table_len(), 1);
    }

    #[test]
    fn a_sweep_frees_expired_connections_and_counts_them() {
        let mut sim = Sim::one_shard(100);
        sim.open(&udp(1000, true), "commit");
        sim.open(&udp(2000, true), "commit");
        // Not yet: the second of the expiry has not ended.
        sim.at(60_999);
        assert_eq!(sim.sweep(sim.now, 100).expired, 0);
        sim.at(61_000);
        let s = sim.sweep(sim.now, 100);
        assert_eq!(
            s,
            Sweep {
                expired: 2,
                examined: 2,
                ..Sweep::default()
            }
        );
        assert_eq!(sim.t.table_len(), 0);
        assert_eq!(sim.stats.get().expired, 2);
    }

    #[test]
    fn next_points_at_the_next_due_second() {
        let mut sim = Sim::one_shard(100);
        sim.open(&udp(1000, true), "commit"); // 60 s
        sim.open(&tcp(true, SYN, 1, 0, b""), "commit"); // SYN_SENT: 30 s
        let s = sim.sweep(sim.now, 100);
        assert_eq!(s.next, Some(Time::from_millis(T0 + 31_000)));
        sim.at(31_000);
        let s = sim.sweep(sim.now, 100);
        assert_eq!(
            (s.expired, s.next),
            (1, Some(Time::from_millis(T0 + 61_000)))
        );
        sim.at(61_000);
        let s = sim.sweep(sim.now, 100);
        assert_eq!((s.expired, s.next), (1, None));
    }

    #[test]
    fn a_refreshed_connection_is_kept_and_filed_again() {
        let mut sim = Sim::one_shard(100);
        let id = sim.open(&udp(1000, true), "commit");
        sim.at(50_000).send(&udp(1000, true), "commit");
        // Filed for T0 + 61 s, but refreshed: expires at T0 + 110 s.
        sim.at(61_000);
        let s = sim.sweep(sim.now, 100);
        assert_eq!(
            s,
            Sweep {
                examined: 1,
                next: Some(Time::from_millis(T0 + 111_000)),
                ..Sweep::default()
            }
        );
        assert_eq!(sim.t.lookup(&udp_key(1000, 0), sim.now).unwrap().0, id);
    }

    /// Three UDP flows one way (60 s) from C to S in `v6`'s family.
    fn three_flows(sim: &Sim, v6: bool) {
        let (c6, s6): (Ipv6Addr, Ipv6Addr) =
            ("fd00::1".parse().unwrap(), "fd00::2".parse().unwrap());
        for port in [1000, 2000, 3000] {
            let f = if v6 {
                Frame::v6(c6, s6, L4::udp(port, 53, b"query"))
            } else {
                udp(port, true)
            };
            sim.open(&f, "commit");
        }
    }

    #[test]
    fn next_is_the_earlier_of_both_families() {
        let mut sim = Sim::one_shard(100);
        // IPv4 due at T0 + 61 s, IPv6 (a SYN: 30 s) at T0 + 31 s.
        sim.open(&udp(1000, true), "commit");
        let (c6, s6): (Ipv6Addr, Ipv6Addr) =
            ("fd00::1".parse().unwrap(), "fd00::2".parse().unwrap());
        sim.open(&Frame::v6(c6, s6, L4::tcp(40000, 80, SYN)), "commit");
        assert_eq!(
            sim.sweep(sim.now, 100).next,
            Some(Time::from_millis(T0 + 31_000))
        );
        // And the other way round: the IPv4 connection due first.
        sim.at(31_000);
        assert_eq!(sim.sweep(sim.now, 100).expired, 1);
        sim.open(&tcp(true, SYN, 1, 0, b""), "commit");
        sim.open(&Frame::v6(c6, s6, L4::udp(5000, 53, b"query")), "commit");
        assert_eq!(
            sim.sweep(sim.now, 100).next,
            Some(Time::from_millis(T0 + 61_000))
        );
    }

    /// One budget for both families: what the IPv4 table examined is
    /// not the IPv6 table's to examine again.
    #[test]
    fn both_families_share_one_budget() {
        let mut sim = Sim::one_shard(100);
        three_flows(&sim, false);
        three_flows(&sim, true);
        sim.at(61_000);
        let s = sim.sweep(sim.now, 4);
        assert_eq!(
            s,
            Sweep {
                expired: 4,
                examined: 4,
                next: Some(sim.now),
                ..Sweep::default()
            }
        );
        assert_eq!(sim.t.table_len(), 2);
        let s = sim.sweep(sim.now, 4);
        assert_eq!((s.expired, s.examined, s.next), (2, 2, None));
    }

    #[test]
    fn a_sweep_out_of_budget_says_now() {
        let mut sim = Sim::one_shard(100);
        for port in [1000, 2000, 3000] {
            sim.open(&udp(port, true), "commit");
        }
        sim.at(61_000);
        let s = sim.sweep(sim.now, 2);
        assert_eq!(
            s,
            Sweep {
                expired: 2,
                examined: 2,
                next: Some(sim.now),
                ..Sweep::default()
            }
        );
        let s = sim.sweep(sim.now, 2);
        assert_eq!(
            s,
            Sweep {
                expired: 1,
                examined: 1,
                next: None,
                ..Sweep::default()
            }
        );
        assert_eq!(sim.stats.get().expired, 3);
    }

    #[test]
    fn a_sweep_whose_budget_exactly_frees_the_expired_has_nothing_left() {
        let mut sim = Sim::one_shard(100);
        for port in [1000, 2000] {
            sim.open(&udp(port, true), "commit");
        }
        sim.at(61_000);
        let s = sim.sweep(sim.now, 2);
        assert_eq!(
            s,
            Sweep {
                expired: 2,
                examined: 2,
                next: None,
                ..Sweep::default()
            }
        );
    }

    #[test]
    fn a_flushed_zone_is_freed_by_sweeps_within_their_budget() {
        let sim = Sim::one_shard(100);
        for port in [1000, 2000, 3000] {
            sim.open(&udp(port, true), "commit,zone=5");
        }
        let other = sim.open(&udp(4000, true), "commit,zone=6");
        assert!(sim.t.flush_zone(5));
        assert_eq!(sim.t.table_len(), 4, "flushed, not yet freed");
        let s = sim.sweep(sim.now, 2);
        assert_eq!(
            s,
            Sweep {
                flushed: 2,
                examined: 2,
                next: Some(sim.now),
                ..Sweep::default()
            }
        );
        assert_eq!(sim.t.table_len(), 2);
        let s = sim.sweep(sim.now, 2);
        assert_eq!(
            s,
            Sweep {
                flushed: 1,
                examined: 1,
                // Zone 6's connection, one way: 60 s.
                next: Some(Time::from_millis(T0 + 61_000)),
                ..Sweep::default()
            }
        );
        assert_eq!(sim.t.table_len(), 1);
        assert_eq!(sim.stats.get().flushed, 3);
        // The other zone's connection is untouched.
        assert_eq!(sim.t.lookup(&udp_key(4000, 6), sim.now).unwrap().0, other);
    }

    /// A table full of a flushed zone's connections, not yet swept, takes
    /// a new connection at once: the commit frees flushed ones first
    /// (`reclaim_pending`), where early drop, which evicts in the new
    /// connection's zone only, would find nothing.
    #[test]
    fn a_commit_into_a_table_full_of_a_flushed_zone_frees_it_first() {
        let sim = Sim::one_shard(3);
        for port in [1000, 2000, 3000] {
            sim.udp_both_ways(port, "commit,zone=5");
        }
        let v = sim.send(&udp(4000, true), "commit,zone=6");
        assert!(!v.committed, "the table is full: {v:?}");
        assert!(sim.t.flush_zone(5));
        assert_eq!(sim.t.table_len(), 3, "flushed, not yet freed");
        sim.open(&udp(4000, true), "commit,zone=6");
        assert!(sim.t.lookup(&udp_key(4000, 6), sim.now).is_some());
        assert_eq!(sim.stats.get().flushed, 3);
        assert_eq!(sim.t.table_len(), 1);
    }

    #[test]
    fn a_sweep_whose_budget_exactly_frees_a_flushed_zone_has_nothing_left() {
        let sim = Sim::one_shard(100);
        for port in [1000, 2000] {
            sim.open(&udp(port, true), "commit,zone=5");
        }
        assert!(sim.t.flush_zone(5));
        let s = sim.sweep(sim.now, 2);
        assert_eq!(sim.t.table_len(), 0);
        // Nothing is tracked and nothing is left to free: no call back at
        // once (`Some(now)` is only for a budget that ran out with work
        // left).
        assert_eq!(
            s,
            Sweep {
                flushed: 2,
                examined: 2,
                next: None,
                ..Sweep::default()
            }
        );
    }
}
