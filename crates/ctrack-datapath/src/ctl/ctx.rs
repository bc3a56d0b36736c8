//! What the control server's commands work on: the datapath's shared
//! state and the server's own bookkeeping.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Mutex};

use ctrack_core::Zone;

use crate::live::Shared;

/// The commands' context (one per server).
#[derive(Debug)]
pub(crate) struct Ctx {
    /// The datapath.
    pub(crate) shared: Arc<Shared>,
    /// Zones given their own limit through `ct-set-limits` (the tracker
    /// keeps the limits; this is for listing them).
    pub(crate) limit_zones: Mutex<BTreeSet<Zone>>,
    /// Zones given their own timeout policy through `ct-set-timeout`.
    pub(crate) timeout_zones: Mutex<BTreeSet<Zone>>,
    /// Client connections open now.
    pub(crate) clients: AtomicUsize,
    /// Listings of connections made or being written now (each holds a
    /// place until it is written: `listing::MAX_LISTINGS`).
    pub(crate) listings: Arc<AtomicUsize>,
}

impl Ctx {
    /// A context serving `shared`.
    pub(crate) fn new(shared: Arc<Shared>) -> Ctx {
        Ctx {
            shared,
            limit_zones: Mutex::new(BTreeSet::new()),
            timeout_zones: Mutex::new(BTreeSet::new()),
            clients: AtomicUsize::new(0),
            listings: Arc::new(AtomicUsize::new(0)),
        }
    }

    /// Client connections open now.
    pub(crate) fn clients(&self) -> usize {
        self.clients.load(Relaxed)
    }

    /// Zones worth listing: 0, the policy's ports' zones, and those the
    /// control commands configured.
    pub(crate) fn known_zones(&self) -> BTreeSet<Zone> {
        let mut z: BTreeSet<Zone> = self
            .shared
            .fw
            .policy()
            .policy
            .ports
            .iter()
            .map(|p| p.zone)
            .collect();
        z.insert(0);
        z.extend(lock(&self.limit_zones).iter().copied());
        z.extend(lock(&self.timeout_zones).iter().copied());
        z
    }
}

/// Locks `m`, whatever a panicking holder left (the data are counters and
/// sets: still usable).
pub(crate) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
