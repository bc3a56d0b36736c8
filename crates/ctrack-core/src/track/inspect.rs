//! Reading the table: lookups, snapshots, walks, expectations, memory.

use ctrack_table::{EntryRef, Guard, Record, pin};

use super::shared::family_index;
use super::tracker::{Fam, Tracker};
use crate::conn::{Conn, ConnInfo, Entry};
use crate::key::{Addr, ConnId, ConnKey, Dir, Family, LookupKey, Tuple, V6, Zone, instance};
use crate::time::Time;
use crate::zone::ZoneMeta;

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

    /// The connection named `id` if it is live for packets: in the table,
    /// not expired at `now`, and in its zone's current generation (not
    /// flushed).
    pub(super) fn live_entry<'g, A: Fam>(
        &'g self,
        guard: &'g Guard,
        id: ConnId,
        now: Time,
    ) -> Option<EntryRef<'g, Conn<A>>> {
        let e = A::table(self).get(guard, id.record())?;
        let c = e.record();
        let current = self
            .shared
            .zones
            .get(c.zone())
            .is_some_and(|m| m.generation() == c.generation());
        (current && self.shared.expiry(c, guard) > now.as_millis()).then_some(e)
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

    /// A snapshot of connection `id`, if it is live: in the table, not
    /// expired at `now` and not of a flushed zone, as for `lookup` and
    /// `for_each` (an expired connection, or one of a zone flushed, waits
    /// for a sweep, unseen by packets). Until 2026-12-01 a connection of a
    /// flushed zone was given until the sweep freed it.
    pub fn conn(&self, id: ConnId, now: Time) -> Option<ConnInfo> {
        let guard = pin();
        let info = match id.family() {
            Family::V4 => {
                let e = self.live_entry::<u32>(&guard, id, now)?;
                self.info(e.record(), now, &guard)
            }
            Family::V6 => {
                // No IPv6 table made yet: nothing to find (and none made).
                self.v6.get()?;
                let e = self.live_entry::<V6>(&guard, id, now)?;
                self.info(e.record(), now, &guard)
            }
        }?;
        // Expired since `live_entry` looked, under the record's lock.
        (info.expires > now).then_some(info)
    }

    pub(super) fn info<A: Addr>(&self, c: &Conn<A>, now: Time, guard: &Guard) -> Option<ConnInfo> {
        // Lock for a consistent snapshot of the fields packets change.
        c.header().is_live().then_some(())?;
        let expires = self.shared.expiry(c, guard);
        Some(ConnInfo {
            entry: Entry::of(c, expires, now, guard),
            proto: c.proto_state(),
            expires: Time::from_millis(expires),
            word: c.word(),
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
                    if !m.occupied(family_index(A::FAMILY), shard) {
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
    /// accounting (a slot's and a chunk's size: the IPv4 table's).
    ///
    /// A connection's extension is not in it: allocated apart, on first
    /// use, for a connection with a label, a translation, a gateway or a
    /// control connection, 40 bytes for IPv4 (48 with the allocator's
    /// header; IPv6 64 and 80; more with a gateway's state or a master's
    /// tuple). `ctrack bench memory --label` and `--nat`
    /// measure it by the resident set.
    pub fn memory(&self) -> ctrack_table::MemoryStats {
        // No pin held here: `Table::memory` waits for shard locks.
        let a = self.v4.memory();
        let b = self.v6.get().map(|t| t.memory()).unwrap_or_default();
        ctrack_table::MemoryStats {
            index_bytes: a.index_bytes + b.index_bytes,
            record_bytes: a.record_bytes + b.record_bytes,
            alias_bytes: a.alias_bytes + b.alias_bytes,
            other_bytes: a.other_bytes + b.other_bytes + self.shared.zones.bytes(),
            slots_in_use: a.slots_in_use + b.slots_in_use,
            grace_peak_slots: a.grace_peak_slots + b.grace_peak_slots,
            grace_peak_shard: a.grace_peak_shard.max(b.grace_peak_shard),
            arena_bytes: a.arena_bytes + b.arena_bytes,
            // A slot's and a chunk's size are the IPv4 table's: the one
            // sized for the limit (the IPv6 table starts small).
            slot_bytes: a.slot_bytes,
            chunk_bytes: a.chunk_bytes,
        }
    }

    /// The longest probe sequence a lookup can take now, in index buckets
    /// (1 when no key had to be stored past its home bucket; 0 for an
    /// empty table): how well the keyed hash spreads the connections
    /// present, whoever chose them. A full scan of the indexes, for
    /// reports, not for the packet path.
    pub fn longest_probe(&self) -> usize {
        let guard = pin();
        self.v4
            .longest_probe(&guard)
            .max(self.v6.get().map_or(0, |t| t.longest_probe(&guard)))
    }

    /// Entries in the tables' indexes: one a connection, two for a
    /// translated one (its reply tuple is looked up on its own). A full
    /// scan of the indexes, for reports and tests, not for the packet
    /// path.
    pub fn index_entries(&self) -> usize {
        let guard = pin();
        self.v4.index_entries(&guard) + self.v6.get().map_or(0, |t| t.index_entries(&guard))
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{C, CPORT, S, Sim, ftp_key, ftp_port, tcp, tcp_key, udp, udp_key};
    use crate::alg::expect::ExpectationInfo;
    use crate::key::{ConnId, ConnKey, Dir, Endpoint, Family};
    use crate::proto::TcpState;
    use crate::time::Time;
    use ctrack_wire::ip_proto;
    use ctrack_wire::tcp::flags::SYN;
    use std::net::Ipv4Addr;

    #[test]
    fn lookup_finds_one_connection_from_both_directions() {
        let sim = Sim::new();
        let id = sim.handshake("commit");
        let (a, info, dir) = sim.t.lookup(&tcp_key(0), sim.now).unwrap();
        assert_eq!((a, dir), (id, Dir::Orig));
        assert_eq!(info.entry.state, "ESTABLISHED");
        let (b, back, dir) = sim.t.lookup(&tcp_key(0).reverse(), sim.now).unwrap();
        assert_eq!((b, dir), (id, Dir::Reply));
        assert_eq!(back, info, "the same snapshot either way");
    }

    #[test]
    fn lookup_misses_other_zones_and_expired_connections() {
        let mut sim = Sim::new();
        let id = sim.open(&udp(1000, true), "commit,zone=1");
        let found = |sim: &Sim, zone| sim.t.lookup(&udp_key(1000, zone), sim.now).map(|l| l.0);
        assert_eq!(found(&sim, 1), Some(id));
        assert_eq!(found(&sim, 2), None);
        // One way: 60 s.
        sim.at(59_999);
        assert_eq!(found(&sim, 1), Some(id));
        sim.at(60_000);
        assert_eq!(found(&sim, 1), None);
    }

    #[test]
    fn conn_gives_the_snapshot_until_the_connection_is_removed() {
        let mut sim = Sim::new();
        let id = sim.handshake("commit");
        let info = sim.t.conn(id, sim.now).unwrap();
        assert!(matches!(info.proto, crate::proto::ProtoState::Tcp(c)
            if c.peers.iter().all(|p| p.state == TcpState::Established)));
        // Established: 24 hours from the last packet.
        assert_eq!(
            info.expires,
            Time::from_millis(sim.now.as_millis() + 86_400_000)
        );
        assert_eq!(info.entry.timeout, 86_400);
        sim.at(10_000);
        assert_eq!(sim.t.conn(id, sim.now).unwrap().entry.timeout, 86_390);
        assert!(sim.flush_key(&tcp_key(0)));
        assert_eq!(sim.t.conn(id, sim.now), None);
    }

    #[test]
    fn conn_of_an_expired_connection_is_none_before_any_sweep() {
        let mut sim = Sim::new();
        let id = sim.open(&udp(1000, true), "commit");
        // UDP one way: 60 s. The last millisecond it is live; then not,
        // though no sweep has freed it yet.
        sim.at(59_999);
        assert_eq!(sim.t.conn(id, sim.now).unwrap().entry.timeout, 0);
        sim.at(60_000);
        assert_eq!(sim.t.conn(id, sim.now), None);
        assert_eq!(sim.t.table_len(), 1);
    }

    #[test]
    fn conn_after_a_sweep_freed_it_is_none() {
        let mut sim = Sim::new();
        let id = sim.open(&udp(1000, true), "commit");
        sim.at(61_000);
        assert_eq!(sim.sweep(sim.now, usize::MAX).expired, 1);
        assert_eq!(sim.t.conn(id, sim.now), None);
    }

    /// Two UDP flows in zone 1, one in zone 2 (60 s one way) and a SYN in
    /// zone 1 (30 s); the UDP flows' ids by zone.
    fn two_zones(sim: &Sim) -> (Vec<ConnId>, Vec<ConnId>) {
        let mut one = vec![
            sim.open(&udp(1000, true), "commit,zone=1"),
            sim.open(&udp(2000, true), "commit,zone=1"),
        ];
        one.sort();
        let two = vec![sim.open(&udp(3000, true), "commit,zone=2")];
        sim.open(&tcp(true, SYN, 1, 0, b""), "commit,zone=1");
        (one, two)
    }

    #[test]
    fn for_each_visits_live_connections_of_every_zone() {
        let mut sim = Sim::new();
        let (one, two) = two_zones(&sim);
        assert_eq!(sim.ids(None).len(), 4);
        // The SYN has expired; the UDP flows have not.
        sim.at(30_000);
        let mut all = [one, two].concat();
        all.sort();
        assert_eq!(sim.ids(None), all);
    }

    #[test]
    fn for_each_with_a_zone_visits_that_zone_only() {
        let mut sim = Sim::new();
        let (one, two) = two_zones(&sim);
        assert_eq!(sim.ids(Some(1)).len(), 3);
        sim.at(30_000);
        assert_eq!(sim.ids(Some(1)), one);
        assert_eq!(sim.ids(Some(2)), two);
        assert_eq!(sim.ids(Some(3)), vec![]);
    }

    #[test]
    fn for_each_skips_a_flushed_zone() {
        let sim = Sim::new();
        sim.open(&udp(1000, true), "commit,zone=1");
        let kept = sim.open(&udp(1000, true), "commit,zone=2");
        assert!(sim.t.flush_zone(1));
        assert_eq!(sim.ids(None), vec![kept]);
        assert_eq!(sim.ids(Some(1)), vec![]);
    }

    #[test]
    fn for_each_gives_each_connection_s_snapshot() {
        let sim = Sim::new();
        let id = sim.udp_both_ways(1000, "commit,zone=4");
        let mut seen = Vec::new();
        sim.t
            .for_each(None, sim.now, |i, info| seen.push((i, info.clone())));
        assert_eq!(seen, vec![(id, sim.t.conn(id, sim.now).unwrap())]);
        assert_eq!(seen[0].1.entry.zone, 4);
    }

    #[test]
    fn expectations_list_what_an_ftp_port_command_announced() {
        let mut sim = Sim::new();
        ftp_port(&sim, "commit,alg=ftp,mark=0x42,label=0x7");
        let want = ExpectationInfo {
            key: ConnKey {
                src: Endpoint::v4(Ipv4Addr::from(S), 0),
                dst: Endpoint::v4(Ipv4Addr::from(C), CPORT + 1),
                zone: 0,
                proto: ip_proto::TCP,
                family: Family::V4,
            },
            master: ftp_key(),
            remaining_ms: 300_000,
            mark: 0x42,
            label: 0x7,
        };
        assert_eq!(sim.t.expectations(sim.now), vec![want.clone()]);
        assert_eq!(sim.t.expectation_count(), 1);
        sim.at(100_000);
        assert_eq!(
            sim.t.expectations(sim.now),
            vec![ExpectationInfo {
                remaining_ms: 200_000,
                ..want
            }]
        );
        // Past its five minutes it is no longer listed.
        sim.at(300_000);
        assert_eq!(sim.t.expectations(sim.now), vec![]);
    }

    #[test]
    fn memory_grows_with_connections() {
        let sim = Sim::new();
        let before = sim.t.memory();
        for port in 1000..1100 {
            sim.open(&udp(port, true), "commit");
        }
        let after = sim.t.memory();
        assert_eq!(after.slots_in_use, before.slots_in_use + 100);
        assert!(
            after.record_bytes > before.record_bytes,
            "{before:?} {after:?}"
        );
        assert!(after.total() > before.total());
    }

    /// `memory` is both tables' and the zones' together, IPv6's included
    /// once its table is made, every field (aliases of translated
    /// connections, slots waiting out their grace period); `longest_probe`
    /// is 0 for empty tables and at least 1 once either holds a
    /// connection; `index_entries` counts both tables', a translated
    /// connection twice. (Mutation round 40: the sums turned to
    /// differences or products, and `longest_probe` returning a constant,
    /// passed every test: only IPv4 was measured.)
    #[test]
    fn memory_and_probes_count_both_families() {
        use ctrack_wire::build::{Frame, L4};
        // One shard: a slot freed is in the grace period of the shard the
        // next commit takes a slot in.
        let sim = Sim::one_shard(10_000);
        assert_eq!(sim.t.longest_probe(), 0);
        let c6: std::net::Ipv6Addr = "fd00::1".parse().unwrap();
        let s6: std::net::Ipv6Addr = "fd00::2".parse().unwrap();
        let v6 = |port| Frame::v6(c6, s6, L4::udp(port, 53, b"q"));
        for port in 1000..1040 {
            sim.open(&v6(port), "commit");
        }
        assert!(sim.t.longest_probe() >= 1);
        for port in 1000..1030 {
            sim.open(&udp(port, true), "commit");
        }
        // A translated connection a family (two index entries each), and
        // one connection a family removed and another opened.
        sim.open(&v6(2000), "commit,nat(src=[fd00::9])");
        sim.open(&udp(2000, true), "commit,nat(src=10.0.0.9)");
        let gone = ConnKey {
            zone: 0,
            family: Family::V6,
            proto: ip_proto::UDP,
            src: Endpoint::v6(c6, 1000),
            dst: Endpoint::v6(s6, 53),
        };
        assert!(sim.flush_key(&gone));
        assert!(sim.flush_key(&udp_key(1000, 0)));
        sim.open(&v6(3000), "commit");
        sim.open(&udp(3000, true), "commit");
        assert_eq!(sim.t.index_entries(), (40 + 2 + 1 - 1) + (30 + 2 + 1 - 1));
        let (a, b, m) = (sim.t.v4.memory(), sim.t.v6_table().memory(), sim.t.memory());
        for t in [&a, &b] {
            assert!(
                t.index_bytes > 0 && t.record_bytes > 0 && t.other_bytes > 0,
                "{t:?}"
            );
            assert!(
                t.alias_bytes > 0 && t.arena_bytes > 0 && t.grace_peak_slots > 0,
                "{t:?}"
            );
        }
        assert_eq!(m.slots_in_use, a.slots_in_use + b.slots_in_use);
        assert_eq!(m.index_bytes, a.index_bytes + b.index_bytes);
        assert_eq!(m.record_bytes, a.record_bytes + b.record_bytes);
        assert_eq!(m.alias_bytes, a.alias_bytes + b.alias_bytes);
        assert_eq!(m.arena_bytes, a.arena_bytes + b.arena_bytes);
        assert_eq!(m.grace_peak_slots, a.grace_peak_slots + b.grace_peak_slots);
        let zones = sim.t.shared.zones.bytes();
        assert_eq!(m.other_bytes, a.other_bytes + b.other_bytes + zones);
        assert_eq!(m.total(), a.total() + b.total() + zones);
    }
}
