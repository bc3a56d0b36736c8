//! Where a worker's time goes: receive, switch, firewall, send, idle.
//!
//! The clock is read a few times per burst (never per packet): between
//! the parts of a round, each reading closes one part and opens the next
//! ([`Lap`]). A round that received nothing counts whole as idle, with
//! the waits in `poll`. The parts are disjoint stretches of the worker's
//! wall time since it started (`total`), so they never add up to more;
//! what they leave over (`other`) is the loop itself and the publishing
//! of counters. With the CPU time of the forwarder's core (user, system,
//! softirq), these say how much of a packet's cost is I/O and how much
//! the firewall.

use std::time::Instant;

/// The parts of a worker's time, in counter order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    /// Taking frames from the ports (ring reads, copies out of the UMEM,
    /// wake-up system calls), empty receives of busy rounds included.
    Recv,
    /// The switch: source checks and learning, destinations, queueing.
    Switch,
    /// The firewall: reassembly, policy, tracker, NAT, gateways.
    Firewall,
    /// Handing the queued frames to the ports (copies into the UMEM or
    /// the send system calls) and reclaiming the buffers.
    Send,
    /// Rounds that received nothing, and the waits in `poll`.
    Idle,
}

impl Part {
    /// Every part, in counter order.
    pub const ALL: [Part; 5] = [
        Part::Recv,
        Part::Switch,
        Part::Firewall,
        Part::Send,
        Part::Idle,
    ];

    /// The name stats and metrics print.
    pub fn name(self) -> &'static str {
        match self {
            Part::Recv => "recv",
            Part::Switch => "switch",
            Part::Firewall => "firewall",
            Part::Send => "send",
            Part::Idle => "idle",
        }
    }
}

/// A worker's time, cumulative (nanoseconds), and the packets it handled.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CostStats {
    /// Nanoseconds by [`Part`] (in `Part::ALL` order).
    pub ns: [u64; Part::ALL.len()],
    /// Wall time since the worker started, at its last publication.
    pub total_ns: u64,
    /// Frames received (the per-packet figures' denominator).
    pub packets: u64,
    /// Rounds that received at least one frame.
    pub rounds: u64,
}

impl CostStats {
    /// Adds `o` to `self` (several workers: their times add up, as CPU
    /// time does).
    pub fn merge(&mut self, o: &CostStats) {
        for (a, b) in self.ns.iter_mut().zip(o.ns) {
            *a += b;
        }
        self.total_ns += o.total_ns;
        self.packets += o.packets;
        self.rounds += o.rounds;
    }

    /// Nanoseconds in `part`.
    pub fn get(&self, part: Part) -> u64 {
        self.ns[part as usize]
    }

    /// Wall time that is in no part (the loop, publishing counters).
    pub fn other_ns(&self) -> u64 {
        self.total_ns.saturating_sub(self.ns.iter().sum())
    }

    /// Wall time not idle: the parts that handle packets, and `other`.
    pub fn busy_ns(&self) -> u64 {
        self.total_ns.saturating_sub(self.get(Part::Idle))
    }

    /// `ns` per packet received (0 before the first packet).
    pub fn per_packet(&self, ns: u64) -> f64 {
        if self.packets == 0 {
            0.0
        } else {
            ns as f64 / self.packets as f64
        }
    }

    /// `ns`'s share of the wall time (0 before any).
    pub fn share(&self, ns: u64) -> f64 {
        if self.total_ns == 0 {
            0.0
        } else {
            ns as f64 / self.total_ns as f64
        }
    }
}

/// A stopwatch read between the parts of a round: each [`Lap::lap`] is
/// one clock reading, charging the time since the last to a part.
#[derive(Debug, Clone, Copy)]
pub struct Lap {
    last: Instant,
}

impl Lap {
    /// Starts now.
    #[inline]
    pub fn start() -> Lap {
        Lap {
            last: Instant::now(),
        }
    }

    /// When the last lap (or the start) was.
    #[inline]
    pub fn last(&self) -> Instant {
        self.last
    }

    /// Nanoseconds since the last lap (or the start); starts the next.
    #[inline]
    pub fn lap(&mut self) -> u64 {
        let now = Instant::now();
        let ns = now.duration_since(self.last).as_nanos();
        self.last = now;
        u64::try_from(ns).unwrap_or(u64::MAX)
    }
}

/// One round's time by part, kept apart until the round's end says whether
/// it was busy (its parts count) or idle (its whole time counts as idle).
#[derive(Debug, Clone, Copy, Default)]
pub struct RoundCost {
    ns: [u64; Part::ALL.len()],
}

impl RoundCost {
    /// Charges `ns` to `part`.
    #[inline]
    pub fn add(&mut self, part: Part, ns: u64) {
        self.ns[part as usize] += ns;
    }

    /// Adds the round to `to`: its parts if it received `packets` frames,
    /// else its whole time as idle.
    pub fn close(self, packets: usize, to: &mut CostStats) {
        if packets == 0 {
            to.ns[Part::Idle as usize] += self.ns.iter().sum::<u64>();
            return;
        }
        for (a, b) in to.ns.iter_mut().zip(self.ns) {
            *a += b;
        }
        to.packets += packets as u64;
        to.rounds += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounds_count_as_busy_or_idle() {
        let mut c = CostStats::default();
        let mut r = RoundCost::default();
        r.add(Part::Recv, 100);
        r.add(Part::Firewall, 50);
        r.add(Part::Send, 250);
        r.close(4, &mut c);
        let mut idle = RoundCost::default();
        idle.add(Part::Recv, 30);
        idle.add(Part::Send, 5);
        idle.close(0, &mut c);
        c.total_ns = 1000;
        assert_eq!(c.ns, [100, 0, 50, 250, 35]);
        assert_eq!((c.packets, c.rounds), (4, 1));
        assert_eq!(c.other_ns(), 1000 - 435);
        assert_eq!(c.busy_ns(), 965);
        assert_eq!(c.per_packet(c.get(Part::Send)), 62.5);
        assert_eq!(c.share(c.get(Part::Idle)), 0.035);
        let mut sum = CostStats::default();
        sum.merge(&c);
        sum.merge(&c);
        assert_eq!((sum.packets, sum.total_ns, sum.ns[3]), (8, 2000, 500));
        assert_eq!(CostStats::default().per_packet(5), 0.0);
    }

    #[test]
    fn laps_are_disjoint() {
        let mut l = Lap::start();
        let t0 = Instant::now();
        std::thread::sleep(std::time::Duration::from_millis(2));
        let a = l.lap();
        let b = l.lap();
        assert!(a >= 2_000_000, "{a}");
        assert!(u128::from(a + b) <= t0.elapsed().as_nanos() + 1_000_000);
    }
}
