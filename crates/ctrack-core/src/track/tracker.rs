//! The tracker: its tables, zones, expectations and settings.

use core::sync::atomic::Ordering::Relaxed;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize};
use std::sync::{Mutex, OnceLock};

use ctrack_table::{Table, TableConfig, pin};

use super::config::Config;
use super::shared::{Counted, Dead, NOT_FULL, Shared};
use crate::alg::expect::Expectations;
use crate::conn::{Conn, Events};
use crate::key::{Addr, ConnKey, KeyHasher, V6, Zone, instance};
use crate::zone::{Compiled, LIMIT_DEFAULT, TimeoutPolicy, Zones};

/// The tables by address family.
pub(super) trait Fam: Addr {
    fn table(t: &Tracker) -> &Table<Conn<Self>>;
}

impl Fam for u32 {
    #[inline]
    fn table(t: &Tracker) -> &Table<Conn<u32>> {
        &t.v4
    }
}

impl Fam for V6 {
    #[inline]
    fn table(t: &Tracker) -> &Table<Conn<V6>> {
        t.v6_table()
    }
}

/// A connection tracker. See the module documentation.
#[derive(Debug)]
pub struct Tracker {
    pub(super) tcp_seq_check: AtomicBool,
    pub(super) tcp_loose: AtomicBool,
    pub(super) checksums: AtomicBool,
    /// Whether the common case takes the fast lane (see
    /// [`Tracker::set_fast_lane`]).
    pub(super) fast_lane: AtomicBool,
    pub(super) max_conns: AtomicUsize,
    pub(super) shared: Shared,
    pub(super) v4: Table<Conn<u32>>,
    /// Made when an IPv6 packet first needs it ([`Tracker::v6_table`]);
    /// code that only reads or maintains the tables passes over it while
    /// it is not there.
    pub(super) v6: OnceLock<Table<Conn<V6>>>,
    /// The IPv6 table's shards when it is made.
    v6_shards: usize,
    pub(super) dead: Mutex<VecDeque<Dead>>,
    /// True while `dead` holds something: set and cleared under its lock,
    /// read without it, so that a sweep finding nothing to reclaim (nearly
    /// always) does not take a lock every thread shares.
    pub(super) dead_pending: AtomicBool,
    pub(super) expect: Expectations,
    /// Counter behind `random` translations.
    pub(super) rng: AtomicU64,
}

impl Default for Tracker {
    fn default() -> Self {
        Self::new(Config::default())
    }
}

/// How often a packet tries again after losing a race before giving up.
pub(super) const RETRIES: usize = 3;

/// Packets judged together by [`Tracker::process_batch`] (a datapath's
/// burst).
pub(super) const BURST: usize = 32;

/// Flushed connections a commit frees when it finds the table full.
pub(super) const RECLAIM_ON_FULL: usize = 64;

/// How often a commit searches a translation again after another thread
/// took the tuple it chose.
pub(super) const NAT_RETRIES: usize = 3;

impl Tracker {
    /// A tracker with a random hash seed.
    pub fn new(config: Config) -> Tracker {
        Self::with_hasher(config, KeyHasher::new())
    }

    /// A tracker with the given hasher (a fixed seed makes runs
    /// reproducible; use a random one in production).
    pub fn with_hasher(config: Config, hasher: KeyHasher) -> Tracker {
        // The IPv4 table is sized for the whole limit; the IPv6 table is
        // made when the first IPv6 packet comes, small, and grows shard by
        // shard (an IPv6 shard's index is rebuilt, under its own lock, when
        // it passes 90% load), so that an IPv4-only deployment pays nothing
        // for it (its shards' fixed structures were 0.75 MB in 256 shards:
        // BENCHMARKS.md, `memory`).
        let v4 = Table::new(TableConfig {
            shards: config.shards,
            capacity: config.max_conns,
        });
        // Past what the table can hold, a limit means no limit.
        let max_conns = config.max_conns.min(v4.most_records());
        let t = Tracker {
            tcp_seq_check: AtomicBool::new(config.tcp_seq_check),
            tcp_loose: AtomicBool::new(config.tcp_loose),
            checksums: AtomicBool::new(config.checksums),
            fast_lane: AtomicBool::new(true),
            max_conns: AtomicUsize::new(max_conns),
            shared: Shared {
                hasher,
                zones: Zones::default(),
                default_policy: ctrack_table::EpochBox::new(Some(Box::new(Compiled::new(
                    config.timeouts,
                )))),
                default_zone_limit: AtomicU32::new(config.default_zone_limit),
                full: AtomicU64::new(NOT_FULL),
                recounting: Mutex::new(()),
                gate: ctrack_table::Gate::new(),
                seqadj: AtomicUsize::new(0),
                translated: AtomicBool::new(false),
                extended: AtomicBool::new(false),
                events: Events::default(),
            },
            v4,
            v6: OnceLock::new(),
            v6_shards: config.shards,
            dead: Mutex::new(VecDeque::new()),
            dead_pending: AtomicBool::new(false),
            expect: Expectations::default(),
            rng: AtomicU64::new(0),
        };
        if config.prefault {
            // Before any packet: nobody else holds a lock or a reference.
            t.v4.prefault(&pin(), max_conns);
        }
        t
    }

    /// Faults in the memory the table's next connections will take (their
    /// records, a grown index), so that the packet path finds it already
    /// zeroed by the kernel instead of taking page faults under a shard's
    /// lock; no lock is held while the kernel works. For a background
    /// thread, called again and again: it returns the bytes faulted in,
    /// and 0 when the memory ahead is there already (then wait a
    /// millisecond or so). It stays a few megabytes ahead (an eighth of
    /// what the table holds, 2 to 32 MiB). Where the system cannot do it
    /// (before Linux 5.14), it does nothing. The alternative for a known
    /// limit is [`Config::prefault`](crate::Config::prefault), at start.
    pub fn populate_ahead(&self) -> usize {
        self.v4.populate_ahead() + self.v6.get().map_or(0, Table::populate_ahead)
    }

    /// The IPv6 table, made now if it was not yet: its index sized for a
    /// 64th of the limit (at least 4,096; grown by each shard as it
    /// fills), its record slots laid out for the whole limit (so that a
    /// table grown far past its first size does not leave up to half of
    /// its last chunk of slots unused in each shard: 10M IPv6 connections
    /// took 255 bytes of slots each, 152.5 now), in as many shards as the
    /// IPv4 table.
    #[inline]
    pub(super) fn v6_table(&self) -> &Table<Conn<V6>> {
        self.v6.get_or_init(|| self.make_v6())
    }

    #[cold]
    fn make_v6(&self) -> Table<Conn<V6>> {
        let max = self.max_conns.load(Relaxed);
        let cfg = TableConfig {
            shards: self.v6_shards,
            capacity: (max / 64).max(4096),
        };
        Table::with_slots_for(cfg, max)
    }

    /// Sends connection events (NEW, UPDATE, DESTROY) to `sink`, or stops
    /// sending them (`None`). See [`crate::conn::event`] for when each
    /// comes and what a sink must not do (block, or call into the tracker).
    pub fn set_event_sink(&self, sink: Option<std::sync::Arc<dyn crate::EventSink>>) {
        self.shared.events.set(sink);
    }

    /// Connections held (expired ones not yet swept, and flushed ones not
    /// yet reclaimed, included).
    pub fn table_len(&self) -> usize {
        self.v4.len() + self.v6.get().map_or(0, Table::len)
    }

    /// Connections of `zone`'s current generation, summed over shards.
    pub fn zone_len(&self, zone: Zone) -> usize {
        let Some(m) = self.shared.zones.get(zone) else {
            return 0;
        };
        let inst = instance(zone, m.generation());
        (0..self.v4.shard_count())
            .map(|s| self.v4.instance_len(s, inst))
            .sum::<usize>()
            + self.v6.get().map_or(0, |t| {
                (0..t.shard_count())
                    .map(|s| t.instance_len(s, inst))
                    .sum::<usize>()
            })
    }

    /// The table shard (of [`Config::shards`] per family) that `key`'s
    /// connection lives in, or would, in its zone's current generation. A
    /// datapath that hands each worker the traffic of its own shards keeps
    /// each shard's lock and lists on one core (`ctrack bench cps
    /// --affine` measures what that saves).
    pub fn shard_of(&self, key: &ConnKey) -> usize {
        let generation = self
            .shared
            .zones
            .get(key.zone)
            .map_or(0, |m| m.generation());
        let hash = self.shared.hasher.hash_in(key, generation);
        // Both families' tables have the same shards, picked by the same
        // bits of the hash: the IPv4 table answers for both (and the IPv6
        // table need not be made for a question).
        self.v4.shard_of(hash)
    }

    /// The hash seed in use.
    pub fn hasher(&self) -> &KeyHasher {
        &self.shared.hasher
    }

    /// The most connections the table may hold.
    pub fn max_conns(&self) -> usize {
        self.max_conns.load(Relaxed)
    }

    /// The largest connection limit there is: what the IPv4 table can
    /// hold (2^23 connections a shard). A larger limit, given to
    /// [`Tracker::new`] or [`Tracker::set_max_conns`], is taken as it.
    pub fn max_conns_ceiling(&self) -> usize {
        self.v4.most_records()
    }

    /// Changes the connection limit (existing connections stay); at most
    /// [`Tracker::max_conns_ceiling`]. Raising it grows the index, shard by
    /// shard.
    pub fn set_max_conns(&self, max: usize) {
        let max = max.min(self.max_conns_ceiling());
        self.max_conns.store(max, Relaxed);
        self.shared.remember(NOT_FULL, 0);
        let guard = pin();
        // A rebuilt index only hashes: nothing is removed to count.
        let cx = Counted::new(&self.shared);
        self.v4.reserve(&cx, &guard, max);
        if let Some(t) = self.v6.get() {
            t.reserve(&cx, &guard, (max / 64).max(4096));
        }
    }

    /// Checks TCP sequence numbers and windows, or not.
    pub fn set_tcp_seq_check(&self, on: bool) {
        self.tcp_seq_check.store(on, Relaxed);
    }

    /// Lets any TCP segment but a SYN-ACK open a connection, or only a SYN.
    pub fn set_tcp_loose(&self, on: bool) {
        self.tcp_loose.store(on, Relaxed);
    }

    /// Verifies checksums, or not.
    pub fn set_checksums(&self, on: bool) {
        self.checksums.store(on, Relaxed);
    }

    /// Lets packets of the common case (untagged IPv4 TCP or UDP, an
    /// action that does not force a commit) take
    /// the fast lane, which looks their connection up and judges them
    /// without the general path's retries and checks (on by default), or
    /// sends every packet down the general path. Both give the same
    /// verdicts: the switch is there to show it (the differential tests
    /// compare the two) and to rule the lane out when a verdict looks
    /// wrong.
    pub fn set_fast_lane(&self, on: bool) {
        self.fast_lane.store(on, Relaxed);
    }

    /// True if checksums are verified.
    pub fn checksums(&self) -> bool {
        self.checksums.load(Relaxed)
    }

    /// Gives `zone` its own timeout policy. It applies at once to the
    /// zone's existing connections: expiry is computed from the time a
    /// connection was last refreshed and the policy in force.
    pub fn set_zone_timeouts(&self, zone: Zone, policy: TimeoutPolicy) {
        let guard = pin();
        self.shared
            .zones
            .get_or_create(zone)
            .policy
            .replace(Some(Box::new(Compiled::new(policy))), &guard);
    }

    /// Returns `zone` to the default timeout policy.
    pub fn clear_zone_timeouts(&self, zone: Zone) {
        if let Some(m) = self.shared.zones.get(zone) {
            m.policy.replace(None, &pin());
        }
    }

    /// Replaces the default timeout policy (applies at once to every
    /// connection of a zone without its own).
    pub fn set_default_timeouts(&self, policy: TimeoutPolicy) {
        self.shared
            .default_policy
            .replace(Some(Box::new(Compiled::new(policy))), &pin());
    }

    /// The timeout policy in force in `zone`.
    pub fn zone_timeouts(&self, zone: Zone) -> TimeoutPolicy {
        self.shared.policy(zone, &pin()).policy
    }

    /// Limits `zone` to `limit` connections (0: no limit). Connections
    /// committed from now on count; a zone over its new limit keeps its
    /// connections but commits nothing new until it is under.
    pub fn set_zone_limit(&self, zone: Zone, limit: u32) {
        self.shared
            .zones
            .get_or_create(zone)
            .set_limit_setting(limit.min(LIMIT_DEFAULT - 1));
    }

    /// Returns `zone` to the default zone limit.
    pub fn clear_zone_limit(&self, zone: Zone) {
        if let Some(m) = self.shared.zones.get(zone) {
            m.set_limit_setting(LIMIT_DEFAULT);
        }
    }

    /// Sets the limit of zones without their own (0: none).
    pub fn set_default_zone_limit(&self, limit: u32) {
        self.shared
            .default_zone_limit
            .store(limit.min(LIMIT_DEFAULT - 1), Relaxed);
    }

    /// The limit in force in `zone` (0: none) and the connections counted
    /// against it.
    pub fn zone_limit(&self, zone: Zone) -> (u32, u32) {
        match self.shared.zones.get(zone) {
            Some(m) => (self.shared.limit_of(m), m.count()),
            None => (self.shared.default_zone_limit.load(Relaxed), 0),
        }
    }
}

/// The settings' entry points, as an embedder calls them. (Mutation round
/// 40: each could be made to do nothing, or to answer a constant, with
/// every test of the crate passing; the control commands of `ctrack run`
/// test some of them through the daemon.)
#[cfg(test)]
mod tests {
    use super::super::testing::{Sim, act, tcp, udp};
    use crate::key::KeyHasher;
    use crate::verdict::{InvalidReason, Stats};
    use crate::{CtState, LinkType, TimeoutPolicy};
    use ctrack_wire::tcp::flags::ACK;

    /// Opens the UDP connection from client port `port` with `action`;
    /// returns how many seconds from now it expires.
    fn udp_timeout(sim: &Sim, port: u16, action: &str) -> u64 {
        let id = sim.open(&udp(port, true), action);
        let info = sim.t.conn(id, sim.now).unwrap();
        (info.expires.as_millis() - sim.now.as_millis()) / 1000
    }

    #[test]
    fn a_zones_timeouts_its_own_then_the_default_again() {
        let sim = Sim::new();
        let short = TimeoutPolicy {
            udp_first: 5,
            ..TimeoutPolicy::default()
        };
        assert_eq!(sim.t.zone_timeouts(1), TimeoutPolicy::default());
        sim.t.set_zone_timeouts(1, short);
        assert_eq!(sim.t.zone_timeouts(1), short);
        assert_eq!(udp_timeout(&sim, 1000, "commit,zone=1"), 5);
        sim.t.clear_zone_timeouts(1);
        assert_eq!(sim.t.zone_timeouts(1), TimeoutPolicy::default());
        assert_eq!(
            udp_timeout(&sim, 1001, "commit,zone=1"),
            u64::from(TimeoutPolicy::default().udp_first)
        );
        // A new default reaches every zone without its own, not the others.
        let long = TimeoutPolicy {
            udp_first: 700,
            ..TimeoutPolicy::default()
        };
        sim.t.set_zone_timeouts(2, short);
        sim.t.set_default_timeouts(long);
        assert_eq!(sim.t.zone_timeouts(0), long);
        assert_eq!(sim.t.zone_timeouts(1), long);
        assert_eq!(sim.t.zone_timeouts(2), short);
        assert_eq!(udp_timeout(&sim, 1002, "commit"), 700);
        assert_eq!(udp_timeout(&sim, 1003, "commit,zone=2"), 5);
    }

    #[test]
    fn a_zones_limit_its_own_then_the_default_again() {
        let sim = Sim::new();
        assert_eq!(sim.t.zone_limit(5), (0, 0));
        sim.t.set_default_zone_limit(2);
        assert_eq!(sim.t.zone_limit(5), (2, 0));
        // Established both ways, so that the zone at its limit may not
        // evict either for a newcomer (an early drop in its neighbourhood,
        // which a one-way flow would be open to whenever the hashes' seed
        // put them next to it).
        sim.udp_both_ways(1000, "commit,zone=5");
        sim.udp_both_ways(1001, "commit,zone=5");
        let v = sim.send(&udp(1002, true), "commit,zone=5");
        assert!(!v.committed && v.refused.is_some(), "{v:?}");
        sim.t.set_zone_limit(5, 3);
        assert_eq!(sim.t.zone_limit(5), (3, 2));
        sim.open(&udp(1002, true), "commit,zone=5");
        sim.t.clear_zone_limit(5);
        assert_eq!(sim.t.zone_limit(5), (2, 3));
        // The largest limit there is stays a limit of its own: u32::MAX
        // names "the default" inside, so a limit is at most one less.
        sim.t.set_zone_limit(6, u32::MAX);
        assert_eq!(sim.t.zone_limit(6), (u32::MAX - 1, 0));
        sim.t.set_default_zone_limit(u32::MAX);
        assert_eq!(sim.t.zone_limit(7), (u32::MAX - 1, 0));
        assert_eq!(sim.t.zone_limit(5), (u32::MAX - 1, 3));
    }

    #[test]
    fn checksums_and_sequence_checks_turn_off() {
        let mut sim = Sim::new();
        let mut bad = udp(1000, true).build();
        // The UDP checksum (Ethernet 14, IPv4 20, then its seventh byte).
        bad[14 + 20 + 6] ^= 0xff;
        let send = |sim: &Sim, f: &[u8]| {
            let mut stats = Stats::default();
            sim.t
                .process(f, LinkType::Ethernet, &act("commit"), sim.now, &mut stats)
        };
        assert!(sim.t.checksums());
        let v = send(&sim, &bad);
        assert_eq!(v.invalid, Some(InvalidReason::BadL4Checksum), "{v:?}");
        sim.t.set_checksums(false);
        assert!(!sim.t.checksums());
        assert!(send(&sim, &bad).committed);
        sim.t.set_checksums(true);
        assert!(sim.t.checksums());

        // A segment a gigabyte past the window.
        sim.handshake("commit");
        sim.at(1);
        let far = tcp(true, ACK, 101 + (1 << 30), 501, b"x").build();
        let v = send(&sim, &far);
        assert_eq!(v.invalid, Some(InvalidReason::TcpOutOfWindow), "{v:?}");
        sim.t.set_tcp_seq_check(false);
        let v = send(&sim, &far);
        assert!(
            v.state.contains(CtState::EST) && v.invalid.is_none(),
            "{v:?}"
        );
    }

    /// `hasher` is the tracker's own: the one given to `with_hasher`.
    #[test]
    fn the_hasher_is_the_one_given() {
        let h = KeyHasher::with_seed(7);
        let t = super::Tracker::with_hasher(crate::Config::default(), h.clone());
        let other = KeyHasher::with_seed(8);
        let key = super::super::testing::udp_key(1000, 0);
        assert_eq!(t.hasher().hash(&key), h.hash(&key));
        assert_ne!(t.hasher().hash(&key), other.hash(&key));
    }

    /// `populate_ahead` works for both tables: once the IPv4 table's
    /// memory ahead is there, the IPv6 table's, made by its first packet,
    /// has its own to fault in.
    #[cfg(all(target_os = "linux", not(miri)))]
    #[test]
    fn populating_ahead_covers_the_ipv6_table() {
        if Sim::new().t.v4.populate_ahead() == 0 {
            eprintln!("skipped: this kernel cannot populate memory ahead (MADV_POPULATE_WRITE)");
            return;
        }
        let sim = Sim::new();
        let first = sim.t.populate_ahead();
        assert!(first >= 1 << 20, "{first} bytes");
        while sim.t.populate_ahead() != 0 {}
        let c6: std::net::Ipv6Addr = "fd00::1".parse().unwrap();
        let s6: std::net::Ipv6Addr = "fd00::2".parse().unwrap();
        use ctrack_wire::build::{Frame, L4};
        sim.open(&Frame::v6(c6, s6, L4::udp(1, 53, b"q")), "commit");
        assert!(sim.t.populate_ahead() >= 1 << 20);
    }

    /// The IPv6 table's index is sized for a 64th of the limit, made so
    /// and when the limit is raised: a tracker whose limit was raised has
    /// the index of one made with that limit.
    #[test]
    fn the_ipv6_index_follows_the_limit() {
        use crate::Config;
        use ctrack_wire::build::{Frame, L4};
        let c6: std::net::Ipv6Addr = "fd00::1".parse().unwrap();
        let s6: std::net::Ipv6Addr = "fd00::2".parse().unwrap();
        let f = Frame::v6(c6, s6, L4::udp(1, 53, b"q"));
        let index = |sim: &Sim| sim.t.v6_table().memory().index_bytes;
        let with = |max_conns| {
            let sim = Sim::with(Config {
                max_conns,
                ..Config::default()
            });
            sim.open(&f, "commit");
            sim
        };
        let (small, large) = (with(64 * 4096), with(64 * 65536));
        assert!(
            index(&large) > index(&small),
            "{} {}",
            index(&large),
            index(&small)
        );
        small.t.set_max_conns(64 * 65536);
        assert_eq!(index(&small), index(&large));
    }

    /// A raw IP packet is read as raw IP, never as an Ethernet frame,
    /// even one whose bytes would pass for an Ethernet frame of IPv4: its
    /// source 8.0.69.0 puts 0x0800 where an Ethernet type would be and
    /// 0x45 after it, and its length, source port and destination port
    /// give the rest a valid-looking header of a UDP datagram to
    /// 1.2.0.0; and the same for IPv6. (Mutation round 41: with the fast
    /// readers handed frames of every link type but Ethernet, every test
    /// passed.)
    #[test]
    fn a_raw_ip_packet_is_never_read_as_an_ethernet_frame() {
        use crate::key::{ConnKey, Endpoint, Family};
        use ctrack_wire::build::{Frame, L4};
        use std::net::Ipv4Addr;
        let (src, dst) = ([8, 0, 0x45, 0], [0x0a, 0x00, 1, 2]);
        // As Ethernet, the IPv4 total length is the destination's first
        // two bytes: 0x0a00, so the packet is 0x0a00 + 14 bytes long.
        let len = 0x0a00 + 14;
        let mut payload = vec![0u8; len - 28];
        // The end of the would-be header (its source's last two bytes, its
        // destination 1.2.0.0), then a UDP header (ports 1111 and 2222,
        // the length that fits).
        payload[..14]
            .copy_from_slice(&[0, 1, 1, 2, 0, 0, 0x04, 0x57, 0x08, 0xae, 0x09, 0xec, 0, 0]);
        // Source port 0x4000 (the would-be "don't fragment"), destination
        // port 0x1111 (the would-be protocol, 17).
        let eth = Frame::v4(src, dst, L4::udp(0x4000, 0x1111, &payload)).build();
        assert_eq!(eth.len() - 14, len);
        // And one that would pass for an Ethernet frame of IPv6: source
        // 134.221.96.0 (0x86dd, then 0x60), its destination's last two
        // bytes the would-be payload length (100), its source port's
        // first byte the would-be next header (17); the would-be
        // addresses 2001:...:1 and 2001:db8::2, then a UDP header.
        let (src6, dst6) = ([0x86, 0xdd, 0x60, 0], [10, 0, 0, 100]);
        let mut payload6 = vec![0u8; 54 + 100 - 28];
        payload6[9] = 1;
        payload6[10..12].copy_from_slice(&[0x20, 0x01]);
        payload6[12..14].copy_from_slice(&[0x0d, 0xb8]);
        payload6[25] = 2;
        payload6[26..34].copy_from_slice(&[0x04, 0x57, 0x08, 0xae, 0, 100, 0, 0]);
        let eth6 = Frame::v4(src6, dst6, L4::udp(0x1140, 0x2001, &payload6)).build();
        for (eth, (src, sport), (dst, dport)) in [
            (&eth, (src, 0x4000), (dst, 0x1111)),
            (&eth6, (src6, 0x1140), (dst6, 0x2001)),
        ] {
            let raw = &eth[14..];
            for checksums in [true, false] {
                let sim = Sim::new();
                sim.t.set_checksums(checksums);
                let mut stats = Stats::default();
                let v = sim
                    .t
                    .process(raw, LinkType::RawIp, &act("commit"), sim.now, &mut stats);
                assert!(v.committed, "{v:?}");
                let key = ConnKey {
                    src: Endpoint::v4(Ipv4Addr::from(src), sport),
                    dst: Endpoint::v4(Ipv4Addr::from(dst), dport),
                    zone: 0,
                    proto: 17,
                    family: Family::V4,
                };
                let (id, _, _) = sim
                    .t
                    .lookup(&key, sim.now)
                    .expect("the raw packet's connection");
                assert_eq!(Some(id), v.conn);
                assert_eq!(sim.t.table_len(), 1);
            }
        }
    }
}
