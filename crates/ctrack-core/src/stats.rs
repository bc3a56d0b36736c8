//! Counters of everything the tracker decides, kept per thread and summed
//! when read: no counter line is shared between threads on the packet
//! path.
//!
//! Each thread gets a stripe (a process-wide thread number modulo the
//! number of stripes); a batch adds its counts to the stripe once. With
//! more threads than stripes two threads may share one, which stays
//! correct (the adds are atomic) and costs only some cache-line traffic.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use crossbeam_utils::CachePadded;

use crate::extract::InvalidReason;

/// Stripes per tracker.
const STRIPES: usize = 64;

/// The counters.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct Stats {
    /// Packets processed.
    pub packets: u64,
    /// Packets reported `new`.
    pub new: u64,
    /// Packets reported `est`.
    pub established: u64,
    /// Packets reported `rel`.
    pub related: u64,
    /// Packets reported `inv`.
    pub invalid: u64,
    /// `inv` packets by reason, in [`InvalidReason::ALL`] order.
    pub invalid_by_reason: [u64; InvalidReason::ALL.len()],
    /// Connections committed.
    pub committed: u64,
    /// Commits refused because the table held its maximum.
    pub refused_table_full: u64,
    /// Commits refused because the zone held its limit.
    pub refused_zone_limit: u64,
    /// Connections removed to make room for a new one (early drop).
    pub evicted: u64,
    /// Connections ended by a packet that starts a new one in their place
    /// (TCP reuse after close, `force`).
    pub replaced: u64,
    /// Connections freed after expiring.
    pub expired: u64,
    /// Connections removed by flushes.
    pub flushed: u64,
}

impl Stats {
    /// The count of `inv` packets for `reason`.
    pub fn invalid_count(&self, reason: InvalidReason) -> u64 {
        self.invalid_by_reason[reason as usize]
    }
}

/// Indexes of the counters in a stripe.
#[derive(Debug, Clone, Copy)]
#[repr(usize)]
pub(crate) enum C {
    Packets,
    New,
    Established,
    Related,
    Invalid,
    Committed,
    RefusedTableFull,
    RefusedZoneLimit,
    Evicted,
    Replaced,
    Expired,
    Flushed,
    /// First of the invalid reasons.
    Reasons,
}

const N: usize = C::Reasons as usize + InvalidReason::ALL.len();

/// Counts gathered by one thread before they go to its stripe.
#[derive(Debug, Clone)]
pub(crate) struct Local {
    c: [u64; N],
    dirty: bool,
}

impl Default for Local {
    fn default() -> Self {
        Local {
            c: [0; N],
            dirty: false,
        }
    }
}

impl Local {
    #[inline]
    pub(crate) fn add(&mut self, c: C, n: u64) {
        self.c[c as usize] += n;
        self.dirty = true;
    }

    #[inline]
    pub(crate) fn invalid(&mut self, r: InvalidReason) {
        self.c[C::Reasons as usize + r as usize] += 1;
        self.dirty = true;
    }
}

#[derive(Debug)]
struct Stripe([AtomicU64; N]);

impl Default for Stripe {
    fn default() -> Self {
        Stripe(core::array::from_fn(|_| AtomicU64::new(0)))
    }
}

/// The per-thread stripes of one tracker.
#[derive(Debug)]
pub(crate) struct Striped {
    stripes: Box<[CachePadded<Stripe>]>,
}

impl Default for Striped {
    fn default() -> Self {
        Striped {
            stripes: (0..STRIPES)
                .map(|_| CachePadded::new(Stripe::default()))
                .collect(),
        }
    }
}

fn thread_stripe() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static STRIPE: usize = NEXT.fetch_add(1, Ordering::Relaxed) % STRIPES;
    }
    STRIPE.with(|s| *s)
}

impl Striped {
    /// Adds `local` to this thread's stripe and clears it.
    pub(crate) fn flush(&self, local: &mut Local) {
        if !local.dirty {
            return;
        }
        let s = &self.stripes[thread_stripe()].0;
        for (cell, v) in s.iter().zip(local.c.iter_mut()) {
            if *v != 0 {
                cell.fetch_add(*v, Ordering::Relaxed);
                *v = 0;
            }
        }
        local.dirty = false;
    }

    /// Adds one count to this thread's stripe.
    pub(crate) fn bump(&self, c: C, n: u64) {
        self.stripes[thread_stripe()].0[c as usize].fetch_add(n, Ordering::Relaxed);
    }

    /// The sum of every stripe.
    pub(crate) fn sum(&self) -> Stats {
        let mut t = [0u64; N];
        for s in self.stripes.iter() {
            for (acc, cell) in t.iter_mut().zip(s.0.iter()) {
                *acc += cell.load(Ordering::Relaxed);
            }
        }
        let mut reasons = [0u64; InvalidReason::ALL.len()];
        reasons.copy_from_slice(&t[C::Reasons as usize..]);
        Stats {
            packets: t[C::Packets as usize],
            new: t[C::New as usize],
            established: t[C::Established as usize],
            related: t[C::Related as usize],
            invalid: t[C::Invalid as usize],
            invalid_by_reason: reasons,
            committed: t[C::Committed as usize],
            refused_table_full: t[C::RefusedTableFull as usize],
            refused_zone_limit: t[C::RefusedZoneLimit as usize],
            evicted: t[C::Evicted as usize],
            replaced: t[C::Replaced as usize],
            expired: t[C::Expired as usize],
            flushed: t[C::Flushed as usize],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn threads_add_up() {
        let s = std::sync::Arc::new(Striped::default());
        let hs: Vec<_> = (0..8)
            .map(|_| {
                let s = s.clone();
                std::thread::spawn(move || {
                    let mut l = Local::default();
                    for _ in 0..1000 {
                        l.add(C::Packets, 1);
                        l.invalid(InvalidReason::ZeroPort);
                        s.flush(&mut l);
                    }
                    s.bump(C::Expired, 5);
                })
            })
            .collect();
        for h in hs {
            h.join().unwrap();
        }
        let t = s.sum();
        assert_eq!(t.packets, 8000);
        assert_eq!(t.invalid_count(InvalidReason::ZeroPort), 8000);
        assert_eq!(t.expired, 40);
    }
}
