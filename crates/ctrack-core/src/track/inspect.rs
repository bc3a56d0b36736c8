//! Reading the table: lookups, snapshots, walks, expectations, memory.

use super::shared::family_index;
use super::tracker::{Fam, Tracker};
use crate::conn::{Conn, ConnInfo, Entry};
use crate::key::{Addr, ConnId, ConnKey, Dir, Family, LookupKey, Tuple, V6, Zone, instance};
use crate::time::Time;
use crate::zone::ZoneMeta;
use ctrack_table::{EntryRef, Guard, Record, pin};

impl Tracker {
    pub(super) fn find<'g, A: Fam>(
        &'g self,
        guard: &'g Guard,
        key: &ConnKey,
        now: Time,
    ) -> Option<(EntryRef<'g, Conn<A>>, Dir)> {
        let generation = self
            .shared
            .zones
            .get(key.zone)
            .map_or(0, ZoneMeta::generation);
        let k = LookupKey {
            tuple: Tuple::<A>::of(key),
            zone: key.zone,
            proto: key.proto,
            generation,
        };
        let hash = self
            .shared
            .hasher
            .hash_tuple(key.zone, generation, key.proto, &k.tuple);
        let shared = &self.shared;
        let e = A::table(self).find(guard, hash, |c| {
            c.direction_of(&k, guard).is_some() && shared.expiry(c, guard) > now.as_millis()
        })?;
        let dir = e.record().direction_of(&k, guard)?;
        Some((e, dir))
    }

    /// Finds the live connection with `key` in either direction.
    pub fn lookup(&self, key: &ConnKey, now: Time) -> Option<(ConnId, ConnInfo, Dir)> {
        let guard = pin();
        match key.family {
            Family::V4 => self.lookup_in::<u32>(&guard, key, now),
            Family::V6 => self.lookup_in::<V6>(&guard, key, now),
        }
    }

    pub(super) fn lookup_in<A: Fam>(
        &self,
        guard: &Guard,
        key: &ConnKey,
        now: Time,
    ) -> Option<(ConnId, ConnInfo, Dir)> {
        let (e, dir) = self.find::<A>(guard, key, now)?;
        let info = self.info(e.record(), now, guard)?;
        Some((ConnId::new(A::FAMILY, e.id()), info, dir))
    }

    /// A snapshot of connection `id`, if it is live.
    pub fn conn(&self, id: ConnId, now: Time) -> Option<ConnInfo> {
        let guard = pin();
        match id.family() {
            Family::V4 => {
                let e = self.v4.get(&guard, id.record())?;
                self.info(e.record(), now, &guard)
            }
            Family::V6 => {
                let e = self.v6.get(&guard, id.record())?;
                self.info(e.record(), now, &guard)
            }
        }
    }

    pub(super) fn info<A: Addr>(&self, c: &Conn<A>, now: Time, guard: &Guard) -> Option<ConnInfo> {
        // Lock for a consistent snapshot of the fields packets change.
        c.header().is_live().then_some(())?;
        let expires = self.shared.expiry(c, guard);
        Some(ConnInfo {
            entry: Entry::of(c, expires, now, guard),
            proto: c.proto_state(),
            expires: Time::from_millis(expires),
        })
    }

    /// Calls `f` for each live connection (of `zone`, if given) that has
    /// not expired at `now`. Each shard is visited in turn; connections
    /// created or removed meanwhile may or may not be seen.
    pub fn for_each(&self, zone: Option<Zone>, now: Time, mut f: impl FnMut(ConnId, &ConnInfo)) {
        let guard = pin();
        self.for_each_in::<u32>(&guard, zone, now, &mut f);
        self.for_each_in::<V6>(&guard, zone, now, &mut f);
    }

    pub(super) fn for_each_in<A: Fam>(
        &self,
        guard: &Guard,
        zone: Option<Zone>,
        now: Time,
        f: &mut impl FnMut(ConnId, &ConnInfo),
    ) {
        let table = A::table(self);
        let zones = &self.shared.zones;
        for shard in 0..table.shard_count() {
            let insts: Vec<u64> = match zone {
                Some(z) => {
                    let Some(m) = zones.get(z) else { return };
                    if m.occupied(family_index(A::FAMILY)) & (1 << (shard & 63)) == 0 {
                        continue;
                    }
                    vec![instance(z, m.generation())]
                }
                None => table
                    .shard_instances(shard)
                    .into_iter()
                    .map(|(i, _)| i)
                    .filter(|&i| {
                        zones
                            .get((i >> 32) as Zone)
                            .is_some_and(|m| m.generation() == i as u32)
                    })
                    .collect(),
            };
            for inst in insts {
                for id in table.instance_records(shard, inst) {
                    let Some(e) = table.get(guard, id) else {
                        continue;
                    };
                    let Some(lock) = e.lock() else { continue };
                    let info = self.info(&*lock, now, guard);
                    drop(lock);
                    if let Some(info) = info
                        && info.expires > now
                    {
                        f(ConnId::new(A::FAMILY, id), &info);
                    }
                }
            }
        }
    }

    /// The expectations waiting (for `dpctl/dump-conntrack-exp`-style
    /// listings).
    pub fn expectations(&self, now: Time) -> Vec<crate::alg::expect::ExpectationInfo> {
        let now_ms = now.as_millis();
        let mut out: Vec<_> = self
            .expect
            .list(now_ms)
            .into_iter()
            .map(|(k, x)| {
                let mut key = ConnKey {
                    src: crate::key::Endpoint {
                        addr: k.src,
                        ..Default::default()
                    },
                    dst: crate::key::Endpoint {
                        addr: k.dst,
                        port: k.dport,
                        ..Default::default()
                    },
                    zone: k.zone,
                    proto: k.proto,
                    family: k.family,
                };
                key.src.port = 0;
                crate::alg::expect::ExpectationInfo {
                    key,
                    master: x.master_key,
                    remaining_ms: x.expires.saturating_sub(now_ms),
                    mark: x.mark,
                    label: x.label,
                }
            })
            .collect();
        out.sort_by_key(|e| (e.key.zone, e.key.src.addr, e.key.dst.addr, e.key.dst.port));
        out
    }

    /// Number of expectations waiting.
    pub fn expectation_count(&self) -> usize {
        self.expect.len()
    }

    /// Sets the most expectations the tracker holds (default
    /// [`crate::alg::expect::DEFAULT_MAX`]); past it, new ones are refused and
    /// counted.
    pub fn set_max_expectations(&self, max: usize) {
        self.expect.set_max(max);
    }

    /// The most expectations the tracker holds.
    pub fn max_expectations(&self) -> usize {
        self.expect.max()
    }

    /// Memory held by the connection tables and zone state, from their own
    /// accounting.
    pub fn memory(&self) -> ctrack_table::MemoryStats {
        let guard = pin();
        let a = self.v4.memory(&guard);
        let b = self.v6.memory(&guard);
        ctrack_table::MemoryStats {
            index_bytes: a.index_bytes + b.index_bytes,
            record_bytes: a.record_bytes + b.record_bytes,
            alias_bytes: a.alias_bytes + b.alias_bytes,
            other_bytes: a.other_bytes + b.other_bytes + self.shared.zones.bytes(),
            slots_in_use: a.slots_in_use + b.slots_in_use,
            arena_bytes: a.arena_bytes + b.arena_bytes,
        }
    }
}
