//! Flushing zones, every connection, or one.

use super::shared::{Counted, Dead};
use super::tracker::{Fam, Tracker};
use crate::key::{ConnKey, Family, V6, Zone};
use crate::time::Time;
use crate::verdict::Stats;
use ctrack_table::{Guard, Removal, pin};

impl Tracker {
    /// Flushes `zone` in constant time: from now on no packet finds its
    /// connections and its limit count restarts; their memory is freed by
    /// later sweeps (each shard walking its list of the zone alone), or at
    /// once by [`Tracker::flush_zone_now`]. Returns false if the zone had
    /// no connection (then nothing changes).
    pub fn flush_zone(&self, zone: Zone) -> bool {
        let Some(m) = self.shared.zones.get(zone) else {
            return false;
        };
        if m.is_empty() {
            return false;
        }
        let generation = m.next_generation();
        self.dead
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push_back(Dead {
                zone,
                generation,
                family: 0,
                shard: 0,
            });
        true
    }

    /// Flushes `zone` and frees its connections now. Returns how many
    /// connections were freed (those of earlier flushes still pending
    /// included).
    pub fn flush_zone_now(&self, zone: Zone) -> usize {
        self.flush_zone(zone);
        self.reclaim_dead(&Counted::new(&self.shared), &pin(), usize::MAX)
            .0
    }

    /// Removes every connection now; returns how many.
    pub fn flush_all(&self) -> usize {
        let zones: Vec<Zone> = self
            .shared
            .zones
            .used()
            .filter(|(_, m)| !m.is_empty())
            .map(|(z, _)| z)
            .collect();
        for z in zones {
            self.flush_zone(z);
        }
        let guard = pin();
        let mut n = self
            .reclaim_dead(&Counted::new(&self.shared), &guard, usize::MAX)
            .0;
        // Connections of zone instances a racing flush left behind.
        n += self.v4.clear(&self.shared, &guard) + self.v6.clear(&self.shared, &guard);
        n
    }

    /// Removes the connection with `key` (either direction), if live.
    pub fn flush_key(&self, key: &ConnKey, now: Time) -> bool {
        let guard = pin();
        match key.family {
            Family::V4 => self.flush_key_in::<u32>(&guard, key, now),
            Family::V6 => self.flush_key_in::<V6>(&guard, key, now),
        }
    }

    pub(super) fn flush_key_in<A: Fam>(&self, guard: &Guard, key: &ConnKey, now: Time) -> bool {
        let Some(e) = self.find::<A>(guard, key, now) else {
            return false;
        };
        self.remove_entry(guard, e.0, Removal::Deleted, &mut Stats::default())
    }
}
