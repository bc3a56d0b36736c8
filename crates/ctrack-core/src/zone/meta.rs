//! Per-zone state: the generation that makes a flush O(1), the timeout
//! policy, the connection limit and its count, and which shards hold the
//! zone's connections.
//!
//! A zone's connections are keyed by (zone, generation). Flushing a zone
//! bumps its generation: from that instant no lookup can find the old
//! connections (their key no longer matches) and the zone's limit count
//! restarts at zero; the old connections are then reclaimed by sweeps (or
//! at once, by [`Tracker::flush_zone_now`](crate::Tracker::flush_zone_now)),
//! each shard walking its list of that zone instance alone.
//!
//! Zones are kept in 256 pages of 256, each allocated the first time one of
//! its zones is used, so a tracker that sees a few zones holds a few pages.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use ctrack_table::{EpochBox, Guard};

use crate::key::Zone;
use crate::zone::Compiled;

const PAGE: usize = 256;

/// What the tracker keeps for one zone.
#[derive(Debug, Default)]
pub(crate) struct ZoneMeta {
    /// The current generation.
    generation: AtomicU32,
    /// The zone's own timeout policy, if it has one.
    pub(crate) policy: EpochBox<Compiled>,
    /// The limit: [`LIMIT_DEFAULT`] for the default zone limit, 0 for none.
    limit: AtomicU32,
    /// `generation << 32 | connections counted against the limit`.
    count: AtomicU64,
    /// Per family, a bit per shard holding connections of the current
    /// generation.
    occupied: [[AtomicU64; OCCUPANCY_WORDS]; 2],
}

/// `ZoneMeta::limit` value meaning "the default zone limit applies".
pub(crate) const LIMIT_DEFAULT: u32 = u32::MAX;

/// Words of a family's shard bits: one bit for each of the most shards.
const OCCUPANCY_WORDS: usize = ctrack_table::MAX_SHARDS / 64;

impl ZoneMeta {
    fn new() -> ZoneMeta {
        ZoneMeta {
            limit: AtomicU32::new(LIMIT_DEFAULT),
            ..ZoneMeta::default()
        }
    }

    /// The current generation.
    #[inline]
    pub(crate) fn generation(&self) -> u32 {
        self.generation.load(Ordering::Acquire)
    }

    /// The limit setting.
    pub(crate) fn limit_setting(&self) -> u32 {
        self.limit.load(Ordering::Relaxed)
    }

    pub(crate) fn set_limit_setting(&self, v: u32) {
        self.limit.store(v, Ordering::Relaxed);
    }

    /// Connections counted against the limit in the current generation.
    pub(crate) fn count(&self) -> u32 {
        let c = self.count.load(Ordering::Acquire);
        if (c >> 32) as u32 == self.generation() {
            c as u32
        } else {
            0
        }
    }

    /// Counts one more connection of generation `generation` if fewer than `limit`
    /// are counted. False if the zone is full (or was flushed since `generation`).
    pub(crate) fn try_count(&self, generation: u32, limit: u32) -> bool {
        let mut cur = self.count.load(Ordering::Acquire);
        loop {
            let n = if (cur >> 32) as u32 == generation {
                cur as u32
            } else if generation == self.generation() {
                // First count of this generation.
                0
            } else {
                return false;
            };
            if n >= limit {
                return false;
            }
            let next = (u64::from(generation) << 32) | u64::from(n + 1);
            match self
                .count
                .compare_exchange_weak(cur, next, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => return true,
                Err(c) => cur = c,
            }
        }
    }

    /// Uncounts a connection of generation `generation` (nothing if the zone was
    /// flushed since: its count restarted).
    pub(crate) fn uncount(&self, generation: u32) {
        let mut cur = self.count.load(Ordering::Acquire);
        loop {
            if (cur >> 32) as u32 != generation || cur as u32 == 0 {
                return;
            }
            match self.count.compare_exchange_weak(
                cur,
                cur - 1,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return,
                Err(c) => cur = c,
            }
        }
    }

    /// Records that `shard` of `family` (0 or 1) gained its first or lost
    /// its last connection of generation `generation`.
    pub(crate) fn set_occupied(
        &self,
        family: usize,
        generation: u32,
        shard: usize,
        occupied: bool,
    ) {
        if generation != self.generation() {
            return;
        }
        let word = &self.occupied[family][shard / 64 % OCCUPANCY_WORDS];
        let bit = 1u64 << (shard % 64);
        if occupied {
            word.fetch_or(bit, Ordering::AcqRel);
        } else {
            word.fetch_and(!bit, Ordering::AcqRel);
        }
    }

    /// Whether `shard` of `family` may hold connections of the current
    /// generation.
    pub(crate) fn occupied(&self, family: usize, shard: usize) -> bool {
        let word = &self.occupied[family][shard / 64 % OCCUPANCY_WORDS];
        word.load(Ordering::Acquire) & (1u64 << (shard % 64)) != 0
    }

    /// True if no shard holds a connection of the current generation.
    pub(crate) fn is_empty(&self) -> bool {
        self.occupied
            .iter()
            .flatten()
            .all(|w| w.load(Ordering::Acquire) == 0)
    }

    /// Starts a new generation: returns the old one. The limit count
    /// restarts, and the occupancy bits go with the old generation.
    pub(crate) fn next_generation(&self) -> u32 {
        let old = self.generation.fetch_add(1, Ordering::AcqRel);
        let new = old.wrapping_add(1);
        self.count.store(u64::from(new) << 32, Ordering::Release);
        for w in self.occupied.iter().flatten() {
            w.store(0, Ordering::Release);
        }
        old
    }

    /// The zone's own timeout policy.
    pub(crate) fn policy<'g>(&self, guard: &'g Guard) -> Option<&'g Compiled> {
        self.policy.get(guard)
    }
}

/// All zones' state.
#[derive(Debug)]
pub(crate) struct Zones {
    /// Arrays, not slices, so that a zone's place needs no bounds check
    /// (a zone is found a few times a connection).
    pages: Box<[OnceLock<Box<[ZoneMeta; PAGE]>>; PAGES]>,
}

/// Pages of zones.
const PAGES: usize = (Zone::MAX as usize + 1) / PAGE;

/// A page of fresh zones.
fn page() -> Box<[ZoneMeta; PAGE]> {
    Box::new(core::array::from_fn(|_| ZoneMeta::new()))
}

impl Default for Zones {
    fn default() -> Self {
        Zones {
            pages: Box::new(core::array::from_fn(|_| OnceLock::new())),
        }
    }
}

impl Zones {
    /// The zone's state, if the zone was ever used.
    #[inline]
    pub(crate) fn get(&self, zone: Zone) -> Option<&ZoneMeta> {
        let z = usize::from(zone);
        self.pages[z / PAGE].get().map(|p| &p[z % PAGE])
    }

    /// The zone's state, created if needed.
    pub(crate) fn get_or_create(&self, zone: Zone) -> &ZoneMeta {
        let z = usize::from(zone);
        &self.pages[z / PAGE].get_or_init(page)[z % PAGE]
    }

    /// The zones that were ever used.
    pub(crate) fn used(&self) -> impl Iterator<Item = (Zone, &ZoneMeta)> {
        self.pages.iter().enumerate().flat_map(|(p, page)| {
            page.get().into_iter().flat_map(move |metas| {
                metas
                    .iter()
                    .enumerate()
                    .map(move |(i, m)| ((p * PAGE + i) as Zone, m))
            })
        })
    }

    /// Bytes of the allocated pages.
    pub(crate) fn bytes(&self) -> usize {
        self.pages.iter().filter(|p| p.get().is_some()).count()
            * PAGE
            * core::mem::size_of::<ZoneMeta>()
            + self.pages.len() * core::mem::size_of::<OnceLock<Box<[ZoneMeta; PAGE]>>>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limit_counting_follows_generations() {
        let m = ZoneMeta::new();
        assert!(m.try_count(0, 2));
        assert!(m.try_count(0, 2));
        assert!(!m.try_count(0, 2));
        assert_eq!(m.count(), 2);
        m.uncount(0);
        assert_eq!(m.count(), 1);
        let old = m.next_generation();
        assert_eq!(old, 0);
        assert_eq!(m.count(), 0);
        // A connection of the old generation no longer counts...
        m.uncount(0);
        assert_eq!(m.count(), 0);
        // ...nor can one be counted in it.
        assert!(!m.try_count(0, 2));
        assert!(m.try_count(1, 2));
        assert_eq!(m.count(), 1);
    }

    #[test]
    fn occupancy_is_per_generation() {
        let m = ZoneMeta::new();
        assert!(m.is_empty());
        m.set_occupied(0, 0, 5, true);
        m.set_occupied(1, 0, 255, true);
        assert!(m.occupied(0, 5) && !m.occupied(0, 69) && !m.occupied(1, 5));
        assert!(m.occupied(1, 255) && !m.occupied(1, 63));
        assert!(!m.is_empty());
        m.set_occupied(0, 0, 5, false);
        assert!(!m.occupied(0, 5) && !m.is_empty());
        m.next_generation();
        assert!(m.is_empty());
        // A late report about the old generation changes nothing.
        m.set_occupied(0, 0, 7, true);
        assert!(m.is_empty());
    }

    #[test]
    fn pages_are_allocated_on_use() {
        let z = Zones::default();
        assert!(z.get(300).is_none());
        z.get_or_create(300).set_limit_setting(9);
        assert_eq!(z.get(300).unwrap().limit_setting(), 9);
        assert_eq!(z.get(301).unwrap().limit_setting(), LIMIT_DEFAULT);
        assert!(z.get(0).is_none());
        assert_eq!(z.used().count(), PAGE);
        // The last zone has a page too, the last one.
        z.get_or_create(Zone::MAX).set_limit_setting(7);
        assert_eq!(z.get(Zone::MAX).map(ZoneMeta::limit_setting), Some(7));
        let used: Vec<Zone> = z.used().map(|(zone, _)| zone).collect();
        assert_eq!(used.len(), 2 * PAGE);
        assert_eq!(used.last(), Some(&Zone::MAX));
        assert_eq!(used[..2], [256, 257]);
        assert_eq!(used[PAGE], Zone::MAX - (PAGE as Zone - 1));
    }

    #[test]
    fn bytes_are_the_page_table_and_the_allocated_pages() {
        let z = Zones::default();
        let table = PAGES * core::mem::size_of::<OnceLock<Box<[ZoneMeta; PAGE]>>>();
        let page = PAGE * core::mem::size_of::<ZoneMeta>();
        assert_eq!(z.bytes(), table);
        z.get_or_create(1);
        z.get_or_create(255);
        assert_eq!(z.bytes(), table + page);
        z.get_or_create(256);
        z.get_or_create(Zone::MAX);
        assert_eq!(z.bytes(), table + 3 * page);
    }
}
