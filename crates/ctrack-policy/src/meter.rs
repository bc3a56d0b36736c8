//! Meters: what limits the log lines of ACLs that name one (OVN's
//! `ACL.meter`, a `Meter` with one `drop` band), shared by every thread
//! that logs.
//!
//! Each meter is a cell of the generic cell rate algorithm (GCRA, the
//! virtual-scheduling form of a token bucket): one 64-bit word, the
//! "theoretical arrival time" by which everything let through so far
//! would have drained at the meter's rate. A packet is let through if,
//! with its cost added, that time lies no further ahead of now than the
//! burst allows, and the word is advanced by one compare-and-swap. A
//! packet over the rate costs one load and no write, so a flood against a
//! metered ACL on many threads reads a shared line and does not bounce it
//! between cores. (Open vSwitch's userspace datapath takes a mutex a
//! meter; this is ours, written for that reason.)
//!
//! A policy's `[copp] reject` meter limits the answers of its `reject`
//! ACLs ([`Meters::reject_admit`]), sharing its cell with the ACLs that
//! name it unless it is `fair`; without one, the firewall's own cell does
//! ([`Limit`], held by the firewall for all its workers): a per-worker clock that runs a
//! little behind another's only makes a cell stricter, where a token
//! bucket that takes an earlier time as its reference would gain tokens
//! each time two threads' clocks alternate.
//!
//! Time is counted in milliseconds times the meter's rate, from the first
//! time a meter of the set is asked: one packet costs 1,000 of those
//! units, one bit (for `kbps`) 1, and the burst allows `burst × 1000`
//! ahead. The count is exact at the millisecond resolution of
//! [`Time`] and saturates after 2^64 units (213 days at a rate of 10^9,
//! 585 years at 10^6), after which the meter lets everything
//! through.

use ctrack_core::Time;

use crate::model::{MeterUnit, Policy};

#[cfg(loom)]
use loom::sync::atomic::{AtomicU64, Ordering::Relaxed};
#[cfg(not(loom))]
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// No meter (in [`Meters`]' table of ACLs).
const NONE: u32 = u32::MAX;

/// One meter's state: a GCRA cell.
#[derive(Debug)]
pub struct Cell {
    /// The theoretical arrival time, in units of milliseconds × `rate`
    /// since the set's origin.
    tat: AtomicU64,
    /// Packets or kilobits a second.
    rate: u64,
    /// How far ahead of now `tat` may be after a packet: `burst × 1000`.
    tolerance: u64,
    unit: MeterUnit,
}

impl Cell {
    /// A meter of `rate` and `burst` in `unit`, full. A rate of 0 lets
    /// the burst through and then nothing; a burst of 0, nothing.
    pub fn new(unit: MeterUnit, rate: u32, burst: u32) -> Cell {
        Cell {
            tat: AtomicU64::new(0),
            rate: u64::from(rate),
            tolerance: u64::from(burst).saturating_mul(1000),
            unit,
        }
    }

    /// What a packet of `bytes` bytes costs.
    fn cost(&self, bytes: usize) -> u64 {
        match self.unit {
            MeterUnit::Pktps => 1000,
            MeterUnit::Kbps => (bytes as u64).saturating_mul(8),
        }
    }

    /// Whether a packet of `bytes` bytes would be let through `elapsed`
    /// milliseconds after the origin, without letting it through: a load
    /// and no write.
    pub fn would_admit(&self, elapsed: u64, bytes: usize) -> bool {
        let now = elapsed.saturating_mul(self.rate);
        let next = self
            .tat
            .load(Relaxed)
            .max(now)
            .saturating_add(self.cost(bytes));
        next - now <= self.tolerance
    }

    /// Lets a packet of `bytes` bytes through `elapsed` milliseconds after
    /// the origin if the meter allows it; returns whether it did.
    pub fn admit(&self, elapsed: u64, bytes: usize) -> bool {
        let now = elapsed.saturating_mul(self.rate);
        let cost = self.cost(bytes);
        let mut tat = self.tat.load(Relaxed);
        loop {
            let next = tat.max(now).saturating_add(cost);
            if next - now > self.tolerance {
                return false;
            }
            // Relaxed: the word is the whole state; nothing else is
            // published with it.
            match self.tat.compare_exchange_weak(tat, next, Relaxed, Relaxed) {
                Ok(_) => return true,
                Err(t) => tat = t,
            }
        }
    }
}

/// Milliseconds from `origin` (set to `now` by the first caller) to
/// `now`; 0 for a time before it.
fn since(origin: &AtomicU64, now: Time) -> u64 {
    let ms = now.as_millis();
    let o = match origin.load(Relaxed) {
        u64::MAX => match origin.compare_exchange(u64::MAX, ms, Relaxed, Relaxed) {
            Ok(_) => ms,
            Err(o) => o,
        },
        o => o,
    };
    ms.saturating_sub(o)
}

/// One cell with a clock of its own: what limits `reject` answers
/// (`Firewall::set_reject_limit`), one packet an answer.
#[derive(Debug)]
pub struct Limit {
    cell: Cell,
    origin: AtomicU64,
}

impl Limit {
    /// `per_second` answers a second, `burst` at once (a rate of 0 lets
    /// the burst through and then nothing; a burst of 0, nothing).
    pub fn new(per_second: u32, burst: u32) -> Limit {
        Limit {
            cell: Cell::new(MeterUnit::Pktps, per_second, burst),
            origin: AtomicU64::new(u64::MAX),
        }
    }

    /// Lets one through at `now` if the limit allows; returns whether it
    /// did.
    pub fn allow(&self, now: Time) -> bool {
        self.cell.admit(since(&self.origin, now), 0)
    }

    /// Whether one would be let through at `now`, without letting it
    /// through (a caller with work to do before [`Limit::allow`] skips
    /// it where the limit is spent).
    pub fn open(&self, now: Time) -> bool {
        self.cell.would_admit(since(&self.origin, now), 0)
    }
}

/// The meters of a policy, as the ACLs use them: one cell a meter, or one
/// a meter and ACL for a `fair` meter.
#[derive(Debug)]
pub struct Meters {
    cells: Vec<Cell>,
    /// Each ACL's cell, or [`NONE`].
    by_acl: Vec<u32>,
    /// The cell of the `[copp] reject` meter, or [`NONE`].
    reject: u32,
    /// The time the set was first asked, in milliseconds (`u64::MAX`
    /// until then).
    origin: AtomicU64,
}

impl Meters {
    /// The cells `policy`'s ACLs and `[copp]` need. A meter is one cell
    /// for all that name it, as in OVN, but for a `fair` meter's ACLs,
    /// which have one each (OVN gives each a meter of its own, and its
    /// `Copp` the meter by its name).
    pub fn new(policy: &Policy) -> Meters {
        let mut cells = Vec::new();
        let mut shared: std::collections::HashMap<&str, u32> = std::collections::HashMap::new();
        let mut cell_of = |name: Option<&str>| {
            let Some(m) = name.and_then(|m| policy.meters.get(m)) else {
                return NONE;
            };
            let mut cell = || {
                cells.push(Cell::new(m.unit, m.rate, m.burst));
                (cells.len() - 1) as u32
            };
            if m.fair {
                cell()
            } else {
                *shared.entry(m.name.as_str()).or_insert_with(cell)
            }
        };
        let by_acl = policy
            .acls
            .iter()
            .map(|a| cell_of(a.meter.as_deref()))
            .collect();
        let reject = cell_of(policy.copp.reject.as_deref());
        Meters {
            cells,
            by_acl,
            reject,
            origin: AtomicU64::new(u64::MAX),
        }
    }

    /// The number of cells.
    pub fn cells(&self) -> usize {
        self.cells.len()
    }

    /// Whether ACL `acl`'s meter lets a log line for a packet of `bytes`
    /// bytes through at `now`; `None` when the ACL has no meter.
    pub fn admit(&self, acl: u32, now: Time, bytes: usize) -> Option<bool> {
        let &c = self.by_acl.get(acl as usize)?;
        let cell = self.cells.get(c as usize)?;
        Some(cell.admit(since(&self.origin, now), bytes))
    }

    /// Whether the policy's `[copp]` names a `reject` meter, which then
    /// limits `reject` answers in place of the firewall's own limit.
    pub fn limits_rejects(&self) -> bool {
        self.reject != NONE
    }

    /// Whether the `[copp] reject` meter lets the answer to a rejected
    /// packet of `bytes` bytes through at `now`; `None` without one.
    pub fn reject_admit(&self, now: Time, bytes: usize) -> Option<bool> {
        let cell = self.cells.get(self.reject as usize)?;
        Some(cell.admit(since(&self.origin, now), bytes))
    }

    /// [`Meters::reject_admit`] without letting it through: a load and
    /// no write.
    pub fn reject_would_admit(&self, now: Time, bytes: usize) -> Option<bool> {
        let cell = self.cells.get(self.reject as usize)?;
        Some(cell.would_admit(since(&self.origin, now), bytes))
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::model::{Acl, AclAction, Direction, Meter};

    fn policy(meters: &[(&str, MeterUnit, u32, u32, bool)], acls: &[Option<&str>]) -> Policy {
        let mut p = Policy::default();
        for &(name, unit, rate, burst, fair) in meters {
            p.meters.insert(
                name.into(),
                Meter {
                    name: name.into(),
                    unit,
                    rate,
                    burst,
                    fair,
                },
            );
        }
        for (i, m) in acls.iter().enumerate() {
            let mut a = Acl::new(
                i,
                Direction::FromLport,
                1,
                AclAction::Drop,
                crate::expr::Expr::True,
            );
            a.meter = m.map(str::to_string);
            a.log = true;
            p.acls.push(a);
        }
        p
    }

    /// How many of `n` packets of `bytes` at `ms` get through ACL `acl`.
    fn through(m: &Meters, acl: u32, ms: u64, n: usize, bytes: usize) -> usize {
        (0..n)
            .filter(|_| m.admit(acl, Time::from_millis(ms), bytes) == Some(true))
            .count()
    }

    #[test]
    fn a_packet_meter_lets_its_burst_through_then_its_rate() {
        let m = Meters::new(&policy(
            &[("m", MeterUnit::Pktps, 10, 5, false)],
            &[Some("m")],
        ));
        assert_eq!(through(&m, 0, 1000, 50, 60), 5, "the burst at once");
        assert_eq!(through(&m, 0, 1000, 50, 60), 0);
        // 100 ms at 10 a second: one more.
        assert_eq!(through(&m, 0, 1100, 50, 60), 1);
        assert_eq!(through(&m, 0, 1150, 50, 60), 0);
        // A long silence refills the burst, no more.
        assert_eq!(through(&m, 0, 60_000, 50, 60), 5);
        // A second at the rate, one packet a millisecond: 10 through.
        let n: usize = (60_001..=61_000).map(|t| through(&m, 0, t, 1, 60)).sum();
        assert_eq!(n, 10);
    }

    #[test]
    fn a_kilobit_meter_counts_bits() {
        // 8 kbit/s, burst 8 kbit: 1,000 bytes at once, then 1,000 a second.
        let m = Meters::new(&policy(
            &[("k", MeterUnit::Kbps, 8, 8, false)],
            &[Some("k")],
        ));
        assert_eq!(through(&m, 0, 0, 10, 100), 10);
        assert_eq!(through(&m, 0, 0, 10, 1), 0);
        assert_eq!(through(&m, 0, 500, 10, 100), 5);
        // A packet larger than the burst never passes (as in Open vSwitch).
        let m = Meters::new(&policy(
            &[("k", MeterUnit::Kbps, 1, 1, false)],
            &[Some("k")],
        ));
        assert_eq!(through(&m, 0, 100_000, 1, 1500), 0);
        assert_eq!(through(&m, 0, 100_000, 1, 125), 1);
    }

    #[test]
    fn a_shared_meter_is_shared_and_a_fair_one_is_not() {
        let p = policy(
            &[
                ("s", MeterUnit::Pktps, 1, 2, false),
                ("f", MeterUnit::Pktps, 1, 2, true),
            ],
            &[Some("s"), Some("s"), Some("f"), Some("f"), None],
        );
        let m = Meters::new(&p);
        assert_eq!(m.cells(), 3);
        assert_eq!(through(&m, 0, 0, 3, 60) + through(&m, 1, 0, 3, 60), 2);
        assert_eq!(through(&m, 2, 0, 3, 60), 2);
        assert_eq!(through(&m, 3, 0, 3, 60), 2);
        assert_eq!(m.admit(4, Time::ZERO, 60), None, "no meter");
        assert_eq!(m.admit(5, Time::ZERO, 60), None, "no such ACL");
    }

    #[test]
    fn time_is_counted_from_the_first_packet_and_never_goes_back() {
        let m = Meters::new(&policy(
            &[("m", MeterUnit::Pktps, 1000, 1, false)],
            &[Some("m")],
        ));
        // Capture times: far from zero.
        let t0 = 1_700_000_000_000;
        assert_eq!(through(&m, 0, t0, 3, 60), 1);
        assert_eq!(
            through(&m, 0, t0 - 5_000, 3, 60),
            0,
            "earlier is the origin"
        );
        assert_eq!(through(&m, 0, t0 + 1, 3, 60), 1);
        // Saturation lets everything through rather than nothing.
        let big = Meters::new(&policy(
            &[("m", MeterUnit::Pktps, u32::MAX, 1, false)],
            &[Some("m")],
        ));
        assert_eq!(through(&big, 0, 0, 1, 60), 1);
        assert_eq!(through(&big, 0, u64::MAX - 1, 3, 60), 3);
    }

    #[test]
    fn a_limit_of_answers() {
        let l = Limit::new(1000, 50);
        let t = |ms| Time::from_millis(ms);
        assert_eq!((0..100).filter(|_| l.allow(t(7))).count(), 50);
        assert_eq!((0..100).filter(|_| l.allow(t(17))).count(), 10);
        assert!(!l.open(t(17)) && l.open(t(18)) && l.open(t(18)));
        assert_eq!((0..100).filter(|_| l.allow(t(18))).count(), 1);
        // Clocks that alternate (two workers', one behind) gain nothing.
        let n = (0..1000)
            .filter(|i| l.allow(t(if i % 2 == 0 { 16 } else { 17 })))
            .count();
        assert_eq!(n, 0);
        assert_eq!((0..100).filter(|_| l.allow(t(27))).count(), 9);
        // A rate of 0: the burst, then nothing; a burst of 0: nothing.
        let l = Limit::new(0, 2);
        assert_eq!((0..5).filter(|_| l.allow(t(0))).count(), 2);
        assert_eq!((0..5).filter(|_| l.allow(t(1_000_000))).count(), 0);
        let l = Limit::new(1000, 0);
        assert_eq!((0..5).filter(|_| l.allow(t(0))).count(), 0);
        assert_eq!((0..5).filter(|_| l.allow(t(1_000_000))).count(), 0);
    }

    /// `[copp] reject`: its own cell for a `fair` meter, else the one its
    /// ACLs share; in `kbps` the rejected packets' sizes count.
    #[test]
    fn a_copp_reject_meter() {
        let t = |ms| Time::from_millis(ms);
        let with_copp = |meters: &[(&str, MeterUnit, u32, u32, bool)], acls: &[Option<&str>]| {
            let mut p = policy(meters, acls);
            p.copp.reject = Some("m".into());
            Meters::new(&p)
        };
        assert!(!Meters::new(&policy(&[], &[])).limits_rejects());
        assert_eq!(Meters::new(&policy(&[], &[])).reject_admit(t(0), 60), None);
        // 8 kbit/s with a burst of 8 kbit: a thousand bytes at once, then
        // a hundred a tenth of a second.
        let m = with_copp(&[("m", MeterUnit::Kbps, 8, 8, false)], &[]);
        assert!(m.limits_rejects());
        assert_eq!(m.cells(), 1);
        let n = (0..100).filter(|_| m.reject_admit(t(5), 100) == Some(true));
        assert_eq!(n.count(), 10);
        assert_eq!(m.reject_would_admit(t(104), 100), Some(false));
        assert_eq!(m.reject_would_admit(t(105), 100), Some(true));
        assert_eq!(m.reject_admit(t(105), 101), Some(false));
        assert_eq!(m.reject_admit(t(105), 100), Some(true));
        // Shared with the ACLs that name it...
        let m = with_copp(&[("m", MeterUnit::Pktps, 1, 3, false)], &[Some("m")]);
        assert_eq!(m.cells(), 1);
        assert_eq!(m.admit(0, t(0), 60), Some(true));
        let n = (0..10).filter(|_| m.reject_admit(t(0), 60) == Some(true));
        assert_eq!(n.count(), 2);
        // ...but for a fair meter, whose ACLs have their own.
        let m = with_copp(&[("m", MeterUnit::Pktps, 1, 3, true)], &[Some("m")]);
        assert_eq!(m.cells(), 2);
        assert_eq!(m.admit(0, t(0), 60), Some(true));
        let n = (0..10).filter(|_| m.reject_admit(t(0), 60) == Some(true));
        assert_eq!(n.count(), 3);
    }

    #[test]
    fn threads_together_get_exactly_the_burst() {
        use std::sync::Arc;
        for _ in 0..20 {
            let m = Arc::new(Meters::new(&policy(
                &[("m", MeterUnit::Pktps, 1, 1000, false)],
                &[Some("m"), Some("m")],
            )));
            let hs: Vec<_> = (0..4)
                .map(|t| {
                    let m = Arc::clone(&m);
                    std::thread::spawn(move || through(&m, t % 2, 5, 10_000, 60))
                })
                .collect();
            let n: usize = hs.into_iter().map(|h| h.join().unwrap()).sum();
            assert_eq!(n, 1000);
        }
    }
}
