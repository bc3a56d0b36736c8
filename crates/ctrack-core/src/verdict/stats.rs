//! Counters of everything the tracker decides, kept per thread and summed
//! when read: no counter line is shared between threads on the packet
//! path.
//!
//! Each thread gets a stripe of its own while it lives (a process-wide
//! stripe number, handed back when the thread ends), so adding to it is a
//! plain load and store, no locked instruction; a batch adds its counts
//! once. Past [`STRIPES`] live threads, the extra threads share the last
//! stripe with atomic adds: still correct, a little slower.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use crossbeam_utils::CachePadded;

use crate::verdict::InvalidReason;

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
    /// Commits refused because no free translated tuple was found.
    pub refused_nat_exhausted: u64,
    /// Packets whose addresses or ports were translated.
    pub translated: u64,
    /// Expectations created by application-layer gateways.
    pub expectations_created: u64,
    /// New connections that matched an expectation (`rel`).
    pub expectations_matched: u64,
    /// Expectations not created because a limit was reached.
    pub expectations_refused: u64,
    /// Expectations that expired (or whose control connection ended)
    /// unused.
    pub expectations_expired: u64,
    /// Packets whose payload a gateway rewrote (FTP under NAT).
    pub alg_rewritten: u64,
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
    RefusedNatExhausted,
    Translated,
    ExpectCreated,
    ExpectMatched,
    ExpectRefused,
    ExpectExpired,
    AlgRewritten,
    /// First of the invalid reasons.
    Reasons,
}

const N: usize = C::Reasons as usize + InvalidReason::ALL.len();

/// Counts gathered by one thread before they go to its stripe.
#[derive(Debug, Clone)]
pub(crate) struct Local {
    c: [u64; N],
    /// Bit `i`: counter `i` is non-zero.
    touched: u64,
}

const _: () = assert!(N <= 64, "one bit per counter");

impl Default for Local {
    fn default() -> Self {
        Local {
            c: [0; N],
            touched: 0,
        }
    }
}

impl Local {
    #[inline]
    pub(crate) fn add(&mut self, c: C, n: u64) {
        self.c[c as usize] += n;
        self.touched |= 1 << c as u64;
    }

    #[inline]
    pub(crate) fn invalid(&mut self, r: InvalidReason) {
        let i = C::Reasons as usize + r as usize;
        self.c[i] += 1;
        self.touched |= 1 << i;
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

/// Stripe numbers of the threads that ended, for reuse.
static FREE: std::sync::Mutex<Vec<usize>> = std::sync::Mutex::new(Vec::new());
/// Stripe numbers never handed out start here.
static NEXT: AtomicUsize = AtomicUsize::new(0);
/// The shared stripe, for threads past the first `STRIPES - 1`.
const SHARED: usize = STRIPES - 1;

/// This thread's stripe: `(number, owned)`.
struct Owned(usize);

impl Owned {
    fn new() -> Owned {
        if let Some(i) = FREE.lock().unwrap_or_else(|e| e.into_inner()).pop() {
            return Owned(i);
        }
        let i = NEXT.fetch_add(1, Ordering::Relaxed);
        Owned(if i < SHARED { i } else { SHARED })
    }
}

impl Drop for Owned {
    fn drop(&mut self) {
        if self.0 != SHARED {
            FREE.lock().unwrap_or_else(|e| e.into_inner()).push(self.0);
        }
    }
}

thread_local! {
    static STRIPE: Owned = Owned::new();
}

/// This thread's stripe number, and whether the thread owns it alone.
#[inline]
fn thread_stripe() -> (usize, bool) {
    STRIPE
        .try_with(|s| (s.0, s.0 != SHARED))
        .unwrap_or((SHARED, false))
}

/// Adds `n` to a counter: a plain load and store when this thread alone
/// writes it (readers only load it), an atomic add otherwise.
#[inline]
fn add(cell: &AtomicU64, n: u64, owned: bool) {
    if owned {
        cell.store(
            cell.load(Ordering::Relaxed).wrapping_add(n),
            Ordering::Relaxed,
        );
    } else {
        cell.fetch_add(n, Ordering::Relaxed);
    }
}

impl Striped {
    /// Adds `local` to this thread's stripe and clears it.
    pub(crate) fn flush(&self, local: &mut Local) {
        if local.touched == 0 {
            return;
        }
        let (stripe, owned) = thread_stripe();
        let s = &self.stripes[stripe].0;
        let mut t = local.touched;
        while t != 0 {
            let i = t.trailing_zeros() as usize;
            t &= t - 1;
            add(&s[i], local.c[i], owned);
            local.c[i] = 0;
        }
        local.touched = 0;
    }

    /// Adds one count to this thread's stripe.
    pub(crate) fn bump(&self, c: C, n: u64) {
        let (stripe, owned) = thread_stripe();
        add(&self.stripes[stripe].0[c as usize], n, owned);
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
            refused_nat_exhausted: t[C::RefusedNatExhausted as usize],
            translated: t[C::Translated as usize],
            expectations_created: t[C::ExpectCreated as usize],
            expectations_matched: t[C::ExpectMatched as usize],
            expectations_refused: t[C::ExpectRefused as usize],
            expectations_expired: t[C::ExpectExpired as usize],
            alg_rewritten: t[C::AlgRewritten as usize],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn threads_add_up() {
        let s = std::sync::Arc::new(Striped::default());
        let hs: Vec<_> = (0..100)
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
        // More threads than stripes: the extra ones share one.
        assert_eq!(t.packets, 100_000);
        assert_eq!(t.invalid_count(InvalidReason::ZeroPort), 100_000);
        assert_eq!(t.expired, 500);
    }
}
