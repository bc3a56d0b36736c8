//! Expectations: connections a gateway announced (an FTP data connection, a
//! TFTP transfer) that may open as `rel` while they are awaited.
//!
//! An expectation lives in its control connection's zone (and zone
//! generation: a flush ends it), names the data connection's addresses,
//! protocol and destination port (any source port), carries the mark and
//! label the data connection inherits and, under NAT, where its packets are
//! to be translated to. It is consumed by the connection it lets in, ends
//! after its timeout, and ends when its control connection does. Each
//! control connection has at most [`PER_MASTER`] waiting (a new one
//! replaces the oldest, as Linux does), and the whole table at most
//! `max` (then a new one is refused and counted).
//!
//! The table is a handful of mutex-guarded hash maps: expectations are
//! created by control-connection packets and looked up only by packets
//! that would open a connection, and only while any exist (one atomic load
//! otherwise).

use std::collections::HashMap;
use std::hash::{BuildHasher, Hash};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

use crate::key::ConnId;
use crate::key::{ConnKey, Family, Zone};

/// Expectations a control connection may have waiting.
pub const PER_MASTER: usize = 1;
/// How long an expectation waits (Linux's FTP and TFTP helpers: 5 min).
pub const TIMEOUT_MS: u64 = 300_000;
/// Default bound on expectations in the whole tracker.
pub const DEFAULT_MAX: usize = 4096;

const SHARDS: usize = 16;

/// What a data connection's first packet must match: everything but its
/// source port.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct ExpKey {
    pub zone: Zone,
    pub generation: u32,
    pub family: Family,
    pub proto: u8,
    pub src: u128,
    pub dst: u128,
    pub dport: u16,
}

/// Where an expected connection's original-direction packets are
/// translated to (its source port stays).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Target {
    pub src: u128,
    pub dst: u128,
    pub dport: u16,
}

/// One expectation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Expectation {
    /// The control connection.
    pub master: ConnId,
    /// Its original tuple (to tell it from a later connection in its slot).
    pub master_key: ConnKey,
    /// When it stops waiting (ms).
    pub expires: u64,
    /// Mark and label the data connection inherits.
    pub mark: u32,
    pub label: u128,
    /// Translation for the data connection, if the control connection is
    /// translated.
    pub target: Option<Target>,
}

/// Why an expectation was not created.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refused {
    /// Another control connection expects the same.
    Clash,
    /// The table holds its maximum.
    Full,
}

/// An expectation as a dump shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExpectationInfo {
    /// The awaited connection's key; its source port is 0 (any).
    pub key: ConnKey,
    /// The control connection's original key.
    pub master: ConnKey,
    /// Milliseconds left.
    pub remaining_ms: u64,
    /// Mark the data connection will get.
    pub mark: u32,
    /// Label the data connection will get.
    pub label: u128,
}

/// The tracker's expectations.
#[derive(Debug)]
pub(crate) struct Expectations {
    shards: Box<[Mutex<HashMap<ExpKey, Expectation>>]>,
    count: AtomicUsize,
    max: AtomicUsize,
    hasher: foldhash::fast::RandomState,
}

impl Default for Expectations {
    fn default() -> Self {
        Expectations {
            shards: (0..SHARDS).map(|_| Mutex::new(HashMap::new())).collect(),
            count: AtomicUsize::new(0),
            max: AtomicUsize::new(DEFAULT_MAX),
            hasher: foldhash::fast::RandomState::default(),
        }
    }
}

impl Expectations {
    fn shard(&self, k: &ExpKey) -> std::sync::MutexGuard<'_, HashMap<ExpKey, Expectation>> {
        let i = (self.hasher.hash_one(k) as usize) % SHARDS;
        self.shards[i].lock().unwrap_or_else(|e| e.into_inner())
    }

    /// True if any expectation exists (the check every new connection
    /// makes).
    #[inline]
    pub(crate) fn active(&self) -> bool {
        self.count.load(Relaxed) != 0
    }

    pub(crate) fn len(&self) -> usize {
        self.count.load(Relaxed)
    }

    pub(crate) fn set_max(&self, max: usize) {
        self.max.store(max, Relaxed);
    }

    pub(crate) fn max(&self) -> usize {
        self.max.load(Relaxed)
    }

    /// The expectation for `k`, if one waits (not consumed).
    pub(crate) fn find(&self, k: &ExpKey, now: u64) -> Option<Expectation> {
        self.shard(k).get(k).copied().filter(|e| e.expires > now)
    }

    /// Removes the expectation for `k` if it is still the one from
    /// `master`.
    pub(crate) fn take(&self, k: &ExpKey, master: ConnId) -> bool {
        let mut s = self.shard(k);
        if s.get(k).is_some_and(|e| e.master == master) {
            s.remove(k);
            self.count.fetch_sub(1, Relaxed);
            return true;
        }
        false
    }

    /// Adds an expectation; one from the same master for the same key
    /// replaces it, one from another master that lives (`alive`) and
    /// waits is a clash. (A removed connection's expectations wait for
    /// the next sweep, but hold their place no longer: as in Linux and
    /// Open vSwitch, which remove them with it.)
    pub(crate) fn insert(
        &self,
        k: ExpKey,
        e: Expectation,
        now: u64,
        alive: &dyn Fn(&Expectation) -> bool,
    ) -> Result<(), Refused> {
        let mut s = self.shard(&k);
        if let Some(old) = s.get_mut(&k) {
            let same = old.master == e.master && old.master_key == e.master_key;
            if !same && old.expires > now && alive(old) {
                return Err(Refused::Clash);
            }
            *old = e;
            return Ok(());
        }
        // Reserve a place under the bound first.
        let max = self.max.load(Relaxed);
        if self
            .count
            .fetch_update(Relaxed, Relaxed, |n| (n < max).then_some(n + 1))
            .is_err()
        {
            return Err(Refused::Full);
        }
        s.insert(k, e);
        Ok(())
    }

    /// True if `k` is free for `master` (nothing waits, or its own, or
    /// one whose master `alive` says is gone).
    pub(crate) fn free_for(
        &self,
        k: &ExpKey,
        master: ConnId,
        now: u64,
        alive: &dyn Fn(&Expectation) -> bool,
    ) -> bool {
        self.shard(k)
            .get(k)
            .is_none_or(|e| e.master == master || e.expires <= now || !alive(e))
    }

    /// Removes expectations that expired or whose master `alive` says is
    /// gone; returns how many.
    pub(crate) fn sweep(&self, now: u64, mut alive: impl FnMut(&Expectation) -> bool) -> usize {
        if !self.active() {
            return 0;
        }
        let mut n = 0;
        for s in self.shards.iter() {
            let mut s = s.lock().unwrap_or_else(|e| e.into_inner());
            s.retain(|_, e| {
                let keep = e.expires > now && alive(e);
                if !keep {
                    n += 1;
                }
                keep
            });
        }
        self.count.fetch_sub(n, Relaxed);
        n
    }

    /// Every expectation, for dumps.
    pub(crate) fn list(&self, now: u64) -> Vec<(ExpKey, Expectation)> {
        let mut out = Vec::new();
        for s in self.shards.iter() {
            let s = s.lock().unwrap_or_else(|e| e.into_inner());
            out.extend(
                s.iter()
                    .filter(|(_, e)| e.expires > now)
                    .map(|(k, e)| (*k, *e)),
            );
        }
        out
    }
}
