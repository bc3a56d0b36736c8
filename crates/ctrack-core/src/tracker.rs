//! The tracker: one call per packet (or per batch) with the `ct` action to
//! apply and the current time, a [`Verdict`] back. Shared by any number of
//! threads (`&self` everywhere).
//!
//! The decision procedure is Open vSwitch's `process_one`: look the packet's
//! key up from both directions; if a connection is found, let its protocol
//! tracker judge the packet (or, for an ICMP error, report it related); if
//! not, decide whether the packet may open a connection and, with `commit`,
//! store one. Per-packet results use the same `ct_state` bits.
//!
//! Concurrency: a lookup takes no lock; judging a packet takes its
//! connection's entry lock; creating or removing a connection takes the
//! lock of the table shard it lives in (see `ctrack-table`). A packet that
//! loses a race (its connection removed under it, its zone flushed) is
//! looked up again.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering::Relaxed};

use ctrack_table::{
    APPROX_STEP, Context, EntryRef, Guard, Hashes, Hint, Record, Removal, Table, TableConfig, pin,
};
use ctrack_wire::{Frame, LinkType, parse_frame};

use crate::action::{CtAction, Nat, NatKind};
use crate::alg::Helper;
use crate::conn::{
    Addr, Conn, ConnId, DNAT, Dir, Ext, Kind, LookupKey, SNAT, Setup, Tuple, V6, instance,
};
use crate::dump::Entry;
use crate::expect::{ExpKey, Expectation, Expectations};
use crate::extract::{ExtractOptions, Extracted, InvalidReason, L4Info, extract};
use crate::key::{ConnKey, Family, KeyHasher, Zone};
use crate::nat::{self, NatError};
use crate::proto::{IcmpState, OtherState, ProtoState, Update, tcp};
use crate::state::CtState;
use crate::stats::{C, Local, Stats, Striped};
use crate::time::Time;
use crate::timeout::{Compiled, TimeoutPolicy};
use crate::zone::{LIMIT_DEFAULT, ZoneMeta, Zones};

mod gateway;
mod post;

/// Open vSwitch's default limit on tracked connections.
pub const DEFAULT_MAX_CONNS: usize = 3_000_000;

/// How many of a zone's oldest connections in a shard a commit looks at
/// for one to evict when a limit is reached (Linux's early drop looks at
/// eight).
pub const EARLY_DROP_SCAN: usize = 8;

/// Tracker settings.
#[derive(Debug, Clone)]
pub struct Config {
    /// Check TCP sequence numbers and windows (Open vSwitch's
    /// `tcp_seq_chk`). Off, any segment with sane flags is in window.
    pub tcp_seq_check: bool,
    /// Let any TCP segment but a SYN-ACK open a connection, picking up
    /// connections established before tracking began (Open vSwitch's
    /// behaviour, Linux's `nf_conntrack_tcp_loose=1`). Off, only a SYN may
    /// (Linux's `nf_conntrack_tcp_loose=0`).
    pub tcp_loose: bool,
    /// Verify IPv4 header and transport checksums.
    pub checksums: bool,
    /// Most connections the table may hold. When it holds them, a commit
    /// first evicts an unestablished connection of its zone (early drop),
    /// else is refused (the packet is still `new`, as in Open vSwitch).
    /// The table's index is sized for this many.
    pub max_conns: usize,
    /// Timeout policy for zones without their own.
    pub timeouts: TimeoutPolicy,
    /// Limit for zones without their own (0: none), as Open vSwitch's
    /// `ct-set-limits default=`.
    pub default_zone_limit: u32,
    /// Table shards per address family: a power of two up to 64. More
    /// shards, less contention between threads creating connections.
    pub shards: usize,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            tcp_seq_check: true,
            tcp_loose: true,
            checksums: true,
            max_conns: DEFAULT_MAX_CONNS,
            timeouts: TimeoutPolicy::default(),
            default_zone_limit: 0,
            shards: ctrack_table::MAX_SHARDS,
        }
    }
}

/// Why a commit did not store a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
pub enum Refusal {
    /// The table holds `max_conns` connections and none could be evicted.
    TableFull,
    /// The zone holds its limit and none could be evicted.
    ZoneLimit,
    /// Address translation found no free tuple in its range (the bounded
    /// search of [`crate::nat`] saw only tuples in use). The packet is
    /// untranslated and `new`; a firewall drops it, as Linux does.
    NatExhausted,
}

/// The tracker's answer for one packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Verdict {
    /// `ct_state`.
    pub state: CtState,
    /// Zone the packet was tracked in.
    pub zone: Zone,
    /// The connection's mark (0 without a connection).
    pub mark: u32,
    /// The connection's label (0 without a connection).
    pub label: u128,
    /// The connection, if the packet has one (found or just committed).
    pub conn: Option<ConnId>,
    /// Direction of the packet in `conn`.
    pub dir: Dir,
    /// Why the packet is invalid, when it is.
    pub invalid: Option<InvalidReason>,
    /// Why a commit stored nothing, when it did not.
    pub refused: Option<Refusal>,
    /// True if this packet committed `conn`.
    pub committed: bool,
    /// The connection has a gateway or was expected: the packet goes to
    /// the gateway stage.
    pub(crate) inspect: bool,
}

impl Verdict {
    fn new(zone: Zone) -> Verdict {
        Verdict {
            zone,
            ..Verdict::default()
        }
    }

    fn invalid(zone: Zone, reason: InvalidReason) -> Verdict {
        Verdict {
            state: CtState::INV | CtState::TRK,
            invalid: Some(reason),
            ..Verdict::new(zone)
        }
    }
}

/// What a sweep did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Sweep {
    /// Connections freed because they had expired.
    pub expired: usize,
    /// Connections of flushed zones freed.
    pub flushed: usize,
    /// Connections looked at.
    pub examined: usize,
    /// When to sweep next: `Some(now)` if the budget ran out with work
    /// left, the end of the next occupied second otherwise, `None` if
    /// nothing is tracked.
    pub next: Option<Time>,
}

/// A snapshot of one connection.
#[derive(Debug, Clone, PartialEq)]
pub struct ConnInfo {
    /// The connection as a dump shows it.
    pub entry: Entry,
    /// Its protocol state.
    pub proto: ProtoState,
    /// When it expires.
    pub expires: Time,
}

/// A zone instance whose connections are still to be freed.
#[derive(Debug)]
struct Dead {
    zone: Zone,
    generation: u32,
    family: usize,
    shard: usize,
}

/// What the table asks of the tracker, and what packets share: the hash
/// seed, zones, timeout policies, counters.
#[derive(Debug)]
struct Shared {
    hasher: KeyHasher,
    zones: Zones,
    default_policy: ctrack_table::EpochBox<Compiled>,
    default_zone_limit: AtomicU32,
    /// Set when an exact count found the table at its maximum; cleared by
    /// any removal but an eviction.
    full: AtomicBool,
    stats: Striped,
    /// Connections whose gateway adjusts sequence numbers (while none
    /// does, packets skip the lookup that adjustment needs).
    seqadj: AtomicUsize,
}

impl Shared {
    #[inline]
    fn policy<'g>(&self, zone: Zone, guard: &'g Guard) -> &'g Compiled {
        self.policy_of(self.zones.get(zone), guard)
    }

    #[inline]
    fn policy_of<'g>(&self, meta: Option<&ZoneMeta>, guard: &'g Guard) -> &'g Compiled {
        if let Some(p) = meta.and_then(|m| m.policy(guard)) {
            return p;
        }
        self.default_policy
            .get(guard)
            .expect("the default policy is always set")
    }

    #[inline]
    fn expiry<A: Addr>(&self, c: &Conn<A>, guard: &Guard) -> u64 {
        expiry(c, self.policy(c.zone(), guard))
    }

    fn limit_of(&self, meta: &ZoneMeta) -> u32 {
        match meta.limit_setting() {
            LIMIT_DEFAULT => self.default_zone_limit.load(Relaxed),
            l => l,
        }
    }
}

fn family_index(f: Family) -> usize {
    match f {
        Family::V4 => 0,
        Family::V6 => 1,
    }
}

impl<A: Addr> Context<Conn<A>> for Shared {
    #[inline]
    fn hashes(&self, c: &Conn<A>, guard: &Guard) -> Hashes {
        let primary = self
            .hasher
            .hash_tuple(c.zone(), c.generation(), c.proto(), c.orig());
        let secondary = c.ext(guard).and_then(|e: &Ext<A>| e.reply).map(|r| {
            self.hasher
                .hash_tuple(c.zone(), c.generation(), c.proto(), &r)
        });
        Hashes { primary, secondary }
    }

    #[inline]
    fn instance(&self, c: &Conn<A>) -> u64 {
        c.instance()
    }

    #[inline]
    fn expiry(&self, c: &Conn<A>, guard: &Guard) -> u64 {
        Shared::expiry(self, c, guard)
    }

    fn removed(&self, c: &Conn<A>, why: Removal) {
        if c.special() {
            let guard = pin();
            if c.ext(&guard)
                .and_then(|e| e.helper.as_ref())
                .is_some_and(Helper::counted)
            {
                self.seqadj.fetch_sub(1, Relaxed);
            }
        }
        if c.counted()
            && let Some(m) = self.zones.get(c.zone())
        {
            m.uncount(c.generation());
        }
        if why != Removal::Evicted && self.full.load(Relaxed) {
            self.full.store(false, Relaxed);
        }
        let counter = match why {
            Removal::Expired => C::Expired,
            Removal::Flushed | Removal::Deleted => C::Flushed,
            Removal::Evicted => C::Evicted,
            Removal::Replaced => C::Replaced,
        };
        self.stats.bump(counter, 1);
    }

    fn occupancy(&self, inst: u64, shard: usize, occupied: bool) {
        if let Some(m) = self.zones.get((inst >> 32) as Zone) {
            m.set_occupied(family_index(A::FAMILY), inst as u32, shard, occupied);
        }
    }
}

/// A packet ready for lookup in the table of family `A`.
#[derive(Debug, Clone, Copy)]
struct Pkt<A> {
    tuple: Tuple<A>,
    proto: u8,
    /// An ICMP error: `tuple` is the quoted packet's, reversed.
    related: bool,
    l4: L4Info,
    ip_len: u32,
}

impl<A: Addr> Pkt<A> {
    fn of(ex: &Extracted) -> Pkt<A> {
        Pkt {
            tuple: Tuple::of(&ex.key),
            proto: ex.key.proto,
            related: ex.related,
            l4: ex.l4,
            ip_len: ex.ip_len,
        }
    }
}

/// What a burst worked out for a packet before judging it.
#[derive(Debug, Clone, Copy)]
struct Pre<'g> {
    generation: u32,
    hash: u64,
    hint: Hint,
    policy: &'g Compiled,
}

/// What judging a packet against its connection came to.
enum Judged {
    /// The verdict is written.
    Done,
    /// The connection was removed (or expired) meanwhile: look again.
    Lost,
    /// The packet ends the connection and opens a new one in its place.
    Reopen,
}

/// The connection of the previous packet of a burst.
struct Hit<'g, A: Addr> {
    key: LookupKey<A>,
    entry: EntryRef<'g, Conn<A>>,
    dir: Dir,
}

/// A burst's cache of its last connection, per family.
#[derive(Default)]
struct Cache<'g> {
    v4: Option<Hit<'g, u32>>,
    v6: Option<Hit<'g, V6>>,
}

/// When a connection expires under `policy` (ms).
#[inline(always)]
fn expiry<A: Addr>(c: &Conn<A>, policy: &Compiled) -> u64 {
    c.last_seen()
        .saturating_add(policy.millis_of(c.class_bits()))
}

/// The tables by address family.
trait Fam: Addr {
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
        &t.v6
    }
}

/// A connection tracker. See the module documentation.
#[derive(Debug)]
pub struct Tracker {
    tcp_seq_check: AtomicBool,
    tcp_loose: AtomicBool,
    checksums: AtomicBool,
    max_conns: AtomicUsize,
    shared: Shared,
    v4: Table<Conn<u32>>,
    v6: Table<Conn<V6>>,
    dead: Mutex<VecDeque<Dead>>,
    expect: Expectations,
    /// Counter behind `random` translations.
    rng: AtomicU64,
}

impl Default for Tracker {
    fn default() -> Self {
        Self::new(Config::default())
    }
}

/// How often a packet tries again after losing a race before giving up.
const RETRIES: usize = 3;

/// Packets judged together by [`Tracker::process_batch`] (a datapath's
/// burst).
const BURST: usize = 32;

/// Flushed connections a commit frees when it finds the table full.
const RECLAIM_ON_FULL: usize = 64;

/// How often a commit searches a translation again after another thread
/// took the tuple it chose.
const NAT_RETRIES: usize = 3;

impl Tracker {
    /// A tracker with a random hash seed.
    pub fn new(config: Config) -> Tracker {
        Self::with_hasher(config, KeyHasher::new())
    }

    /// A tracker with the given hasher (a fixed seed makes runs
    /// reproducible; use a random one in production).
    pub fn with_hasher(config: Config, hasher: KeyHasher) -> Tracker {
        // The IPv4 table is sized for the whole limit; the IPv6 table starts
        // small and grows shard by shard (an IPv6 shard's index is rebuilt,
        // under its own lock, when it passes 90% load), so that an IPv4-only
        // deployment pays nothing for it.
        let v4 = TableConfig {
            shards: config.shards,
            capacity: config.max_conns,
        };
        let v6 = TableConfig {
            shards: config.shards,
            capacity: (config.max_conns / 64).max(4096),
        };
        Tracker {
            tcp_seq_check: AtomicBool::new(config.tcp_seq_check),
            tcp_loose: AtomicBool::new(config.tcp_loose),
            checksums: AtomicBool::new(config.checksums),
            max_conns: AtomicUsize::new(config.max_conns),
            shared: Shared {
                hasher,
                zones: Zones::default(),
                default_policy: ctrack_table::EpochBox::new(Some(Box::new(Compiled::new(
                    config.timeouts,
                )))),
                default_zone_limit: AtomicU32::new(config.default_zone_limit),
                full: AtomicBool::new(false),
                stats: Striped::default(),
                seqadj: AtomicUsize::new(0),
            },
            v4: Table::new(v4),
            v6: Table::new(v6),
            dead: Mutex::new(VecDeque::new()),
            expect: Expectations::default(),
            rng: AtomicU64::new(0),
        }
    }

    /// The counters, summed over threads.
    pub fn stats(&self) -> Stats {
        self.shared.stats.sum()
    }

    /// Connections held (expired ones not yet swept, and flushed ones not
    /// yet reclaimed, included).
    pub fn table_len(&self) -> usize {
        self.v4.len() + self.v6.len()
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
            + (0..self.v6.shard_count())
                .map(|s| self.v6.instance_len(s, inst))
                .sum::<usize>()
    }

    /// The hash seed in use.
    pub fn hasher(&self) -> &KeyHasher {
        &self.shared.hasher
    }

    /// The most connections the table may hold.
    pub fn max_conns(&self) -> usize {
        self.max_conns.load(Relaxed)
    }

    /// Changes the connection limit (existing connections stay). Raising it
    /// grows the index, shard by shard.
    pub fn set_max_conns(&self, max: usize) {
        self.max_conns.store(max, Relaxed);
        self.shared.full.store(false, Relaxed);
        let guard = pin();
        self.v4.reserve(&self.shared, &guard, max);
        self.v6.reserve(&self.shared, &guard, (max / 64).max(4096));
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

    /// Tracks one frame captured with link type `link`.
    pub fn process(&self, frame: &[u8], link: LinkType, action: &CtAction, now: Time) -> Verdict {
        let guard = pin();
        let mut local = Local::default();
        let mut cache = Cache::default();
        let mut v = Verdict::default();
        self.process_one(
            &guard, frame, link, None, action, now, &mut local, &mut cache, &mut v,
        );
        if v.inspect {
            self.inspect_ro(&guard, frame, link, action, now, &mut v, &mut local);
        }
        self.shared.stats.flush(&mut local);
        v
    }

    /// Tracks one frame whose layers the caller already found with
    /// [`parse_frame`].
    pub fn process_layers(
        &self,
        frame: &[u8],
        layers: &Frame,
        action: &CtAction,
        now: Time,
    ) -> Verdict {
        let guard = pin();
        let mut local = Local::default();
        let mut cache = Cache::default();
        let mut v = Verdict::default();
        self.process_one(
            &guard,
            frame,
            LinkType::Ethernet,
            Some(layers),
            action,
            now,
            &mut local,
            &mut cache,
            &mut v,
        );
        if v.inspect {
            self.inspect_ro(
                &guard,
                frame,
                LinkType::Ethernet,
                action,
                now,
                &mut v,
                &mut local,
            );
        }
        self.shared.stats.flush(&mut local);
        v
    }

    /// Tracks a burst of frames with one action (as a datapath delivers
    /// them, up to 32 at a time), appending a verdict per frame to `out`.
    ///
    /// Cheaper per packet than [`Tracker::process`]: one epoch pin and one
    /// counter update per burst; the zone's state is read once; the table's
    /// memory for every packet of the burst is prefetched before the first
    /// is judged, so that the cache misses of a large table overlap instead
    /// of adding up; and a packet of the same connection as the one before
    /// it skips the lookup.
    pub fn process_batch(
        &self,
        frames: &[&[u8]],
        link: LinkType,
        action: &CtAction,
        now: Time,
        out: &mut Vec<Verdict>,
    ) {
        let first = out.len();
        out.resize(first + frames.len(), Verdict::default());
        self.process_burst(frames, link, action, now, &mut out[first..]);
    }

    /// [`Tracker::process_batch`] into a slice of as many verdicts as
    /// frames.
    pub fn process_burst(
        &self,
        frames: &[&[u8]],
        link: LinkType,
        action: &CtAction,
        now: Time,
        out: &mut [Verdict],
    ) {
        assert_eq!(frames.len(), out.len(), "one verdict per frame");
        let guard = pin();
        let mut local = Local::default();
        let mut cache = Cache::default();
        let checksums = self.checksums.load(Relaxed);
        let zone = action.zone;
        for (burst, outs) in frames.chunks(BURST).zip(out.chunks_mut(BURST)) {
            // The zone's state, once per burst.
            let meta = self.shared.zones.get(zone);
            let generation = meta.map_or(0, ZoneMeta::generation);
            let policy = self.shared.policy_of(meta, &guard);
            // Pass 1: the common case's key and hash; fetch index buckets.
            let mut fast: [Option<(Pkt<u32>, u64)>; BURST] = [None; BURST];
            let mut hints = [Hint::default(); BURST];
            if link == LinkType::Ethernet {
                let mut prev: Option<(Tuple<u32>, u8, u64)> = None;
                for (slot, f) in fast.iter_mut().zip(burst) {
                    let Some(x) = crate::fast::fast_ipv4(f, checksums) else {
                        continue;
                    };
                    let hash = match prev {
                        Some((t, proto, h)) if t == x.tuple && proto == x.proto => h,
                        _ => {
                            let h = self
                                .shared
                                .hasher
                                .hash_tuple(zone, generation, x.proto, &x.tuple);
                            self.v4.prefetch(&guard, h);
                            prev = Some((x.tuple, x.proto, h));
                            h
                        }
                    };
                    *slot = Some((
                        Pkt {
                            tuple: x.tuple,
                            proto: x.proto,
                            related: false,
                            l4: x.l4,
                            ip_len: x.ip_len,
                        },
                        hash,
                    ));
                }
                // Pass 2: guess each packet's record from its bucket and
                // fetch it.
                let mut last = None;
                for (hint, pre) in hints.iter_mut().zip(&fast) {
                    if let Some((_, h)) = pre
                        && last != Some(*h)
                    {
                        *hint = self.v4.probe(&guard, *h);
                        last = Some(*h);
                    }
                }
            }
            // Pass 3: judge, in order. A run of packets of one connection
            // (a flow's burst) is judged under one hold of its entry lock.
            let n = burst.len();
            let mut i = 0;
            while i < n {
                let Some((p, hash)) = &fast[i] else {
                    self.process_one(
                        &guard,
                        burst[i],
                        link,
                        None,
                        action,
                        now,
                        &mut local,
                        &mut cache,
                        &mut outs[i],
                    );
                    if outs[i].inspect {
                        self.inspect_ro(
                            &guard,
                            burst[i],
                            link,
                            action,
                            now,
                            &mut outs[i],
                            &mut local,
                        );
                    }
                    i += 1;
                    continue;
                };
                let pre = Pre {
                    generation,
                    hash: *hash,
                    hint: hints[i],
                    policy,
                };
                self.track::<u32>(
                    &guard,
                    p,
                    action,
                    now,
                    &mut local,
                    &mut cache.v4,
                    Some(pre),
                    &mut outs[i],
                );
                count(&mut local, &outs[i]);
                if outs[i].inspect {
                    // A gateway's connection: each packet on its own.
                    self.inspect_ro(
                        &guard,
                        burst[i],
                        link,
                        action,
                        now,
                        &mut outs[i],
                        &mut local,
                    );
                    i += 1;
                    continue;
                }
                i += 1;
                // The same connection next? Judge its packets while holding
                // the lock once.
                let Some(hit) = cache.v4.as_ref() else {
                    continue;
                };
                let (entry, dir, key) = (hit.entry, hit.dir, hit.key);
                let same = |lane: &Option<(Pkt<u32>, u64)>| {
                    lane.as_ref()
                        .is_some_and(|(q, _)| q.tuple == key.tuple && q.proto == key.proto)
                };
                if i >= n || !same(&fast[i]) || (action.force && action.commit && dir.is_reply()) {
                    continue;
                }
                let Some(lock) = entry.lock() else {
                    continue;
                };
                let now_ms = now.as_millis();
                while i < n && same(&fast[i]) {
                    let (q, _) = fast[i].as_ref().expect("checked by `same`");
                    match self.judge_locked(
                        &guard,
                        q,
                        action,
                        now_ms,
                        policy,
                        entry,
                        dir,
                        &mut outs[i],
                    ) {
                        Judged::Done => {
                            count(&mut local, &outs[i]);
                            i += 1;
                        }
                        // Expired, or the packet starts a new connection:
                        // the general path takes it from here.
                        Judged::Lost | Judged::Reopen => break,
                    }
                }
                drop(lock);
            }
        }
        self.shared.stats.flush(&mut local);
    }

    #[allow(clippy::too_many_arguments)]
    #[inline]
    fn process_one<'g>(
        &'g self,
        guard: &'g Guard,
        frame: &[u8],
        link: LinkType,
        layers: Option<&Frame>,
        action: &CtAction,
        now: Time,
        local: &mut Local,
        cache: &mut Cache<'g>,
        v: &mut Verdict,
    ) {
        let checksums = self.checksums.load(Relaxed);
        let fast = if link == LinkType::Ethernet {
            crate::fast::fast_ipv4(frame, checksums)
        } else {
            None
        };
        match fast {
            Some(f) => {
                let p = Pkt {
                    tuple: f.tuple,
                    proto: f.proto,
                    related: false,
                    l4: f.l4,
                    ip_len: f.ip_len,
                };
                self.track::<u32>(guard, &p, action, now, local, &mut cache.v4, None, v);
            }
            None => {
                let parsed;
                let layers = match layers {
                    Some(l) => l,
                    None => {
                        parsed = parse_frame(frame, link);
                        &parsed
                    }
                };
                let opts = ExtractOptions { checksums };
                match extract(frame, layers, action.zone, opts) {
                    Ok(ex) => match ex.key.family {
                        Family::V4 => {
                            let p = Pkt::<u32>::of(&ex);
                            self.track::<u32>(
                                guard,
                                &p,
                                action,
                                now,
                                local,
                                &mut cache.v4,
                                None,
                                v,
                            );
                        }
                        Family::V6 => {
                            let p = Pkt::<V6>::of(&ex);
                            self.track::<V6>(guard, &p, action, now, local, &mut cache.v6, None, v);
                        }
                    },
                    Err(reason) => *v = Verdict::invalid(action.zone, reason),
                }
            }
        }
        count(local, v);
    }

    #[allow(clippy::too_many_arguments)]
    #[inline]
    fn track<'g, A: Fam>(
        &'g self,
        guard: &'g Guard,
        p: &Pkt<A>,
        action: &CtAction,
        now: Time,
        local: &mut Local,
        cache: &mut Option<Hit<'g, A>>,
        pre: Option<Pre<'g>>,
        v: &mut Verdict,
    ) {
        let zone = action.zone;
        let now = now.as_millis();
        // First with what the burst computed; after a lost race, afresh.
        if let Some(pre) = pre
            && self.attempt(guard, p, action, now, local, cache, pre, v)
        {
            return;
        }
        for _ in 0..RETRIES {
            let meta = self.shared.zones.get(zone);
            let generation = meta.map_or(0, ZoneMeta::generation);
            let key = LookupKey {
                tuple: p.tuple,
                zone,
                proto: p.proto,
                generation,
            };
            let pre = Pre {
                generation,
                hash: self.hash_of(&key),
                hint: Hint::default(),
                policy: self.shared.policy_of(meta, guard),
            };
            if self.attempt(guard, p, action, now, local, cache, pre, v) {
                return;
            }
        }
        // Lost a race every time (a connection flapping under a flood of
        // flushes): judge the packet without storing anything.
        *v = Verdict {
            state: CtState::NEW | CtState::TRK,
            ..Verdict::new(zone)
        };
    }

    /// One attempt at judging a packet; false if it lost a race.
    #[allow(clippy::too_many_arguments)]
    #[inline]
    fn attempt<'g, A: Fam>(
        &'g self,
        guard: &'g Guard,
        p: &Pkt<A>,
        action: &CtAction,
        now: u64,
        local: &mut Local,
        cache: &mut Option<Hit<'g, A>>,
        pre: Pre<'g>,
        v: &mut Verdict,
    ) -> bool {
        let key = LookupKey {
            tuple: p.tuple,
            zone: action.zone,
            proto: p.proto,
            generation: pre.generation,
        };
        // The connection of the previous packet of the burst.
        if let Some(hit) = cache.as_ref()
            && !p.related
            && hit.key == key
            && !(action.force && action.commit && hit.dir.is_reply())
        {
            let (entry, dir) = (hit.entry, hit.dir);
            match self.track_hit(guard, p, action, now, pre.policy, entry, dir, v) {
                Judged::Done => return true,
                Judged::Lost => *cache = None,
                Judged::Reopen => {
                    *cache = None;
                    self.remove_entry(A::table(self), guard, entry, Removal::Replaced);
                    return match self.open::<A>(guard, p, action, now, &key, pre.hash, local, v) {
                        Some(hit) => {
                            *cache = hit.map(|(entry, dir)| Hit { key, entry, dir });
                            true
                        }
                        None => false,
                    };
                }
            }
        }
        match self.track_key::<A>(
            guard, p, action, now, &key, pre.hash, pre.hint, pre.policy, local, v,
        ) {
            Some(hit) => {
                *cache = hit.map(|(entry, dir)| Hit { key, entry, dir });
                true
            }
            None => {
                *cache = None;
                false
            }
        }
    }

    /// The hash of `key`.
    #[inline]
    fn hash_of<A: Addr>(&self, key: &LookupKey<A>) -> u64 {
        self.shared
            .hasher
            .hash_tuple(key.zone, key.generation, key.proto, &key.tuple)
    }

    /// Judges a packet against a connection found for it (not an ICMP
    /// error), writing the verdict to `v` when it is `Done`.
    #[allow(clippy::too_many_arguments)]
    #[inline]
    fn track_hit<A: Fam>(
        &self,
        guard: &Guard,
        p: &Pkt<A>,
        action: &CtAction,
        now: u64,
        policy: &Compiled,
        e: EntryRef<'_, Conn<A>>,
        dir: Dir,
        v: &mut Verdict,
    ) -> Judged {
        let Some(lock) = e.lock() else {
            return Judged::Lost;
        };
        let j = self.judge_locked(guard, p, action, now, policy, e, dir, v);
        drop(lock);
        j
    }

    /// [`Tracker::track_hit`] with the connection's entry lock held by the
    /// caller.
    #[allow(clippy::too_many_arguments)]
    #[inline]
    fn judge_locked<A: Fam>(
        &self,
        guard: &Guard,
        p: &Pkt<A>,
        action: &CtAction,
        now: u64,
        policy: &Compiled,
        e: EntryRef<'_, Conn<A>>,
        dir: Dir,
        v: &mut Verdict,
    ) -> Judged {
        let c = e.record();
        if expiry(c, policy) <= now {
            return Judged::Lost;
        }
        let (state, invalid) = match self.update(c, p, dir, now) {
            Update::Valid if dir.is_reply() => (CtState::EST | CtState::RPL, None),
            Update::Valid => (CtState::EST, None),
            Update::ValidNew => (CtState::NEW, None),
            Update::Invalid => (
                CtState::INV,
                Some(match p.l4 {
                    L4Info::Tcp(seg) if tcp::invalid_flags(seg.flags) => InvalidReason::TcpBadFlags,
                    _ => InvalidReason::TcpOutOfWindow,
                }),
            ),
            Update::New => return Judged::Reopen,
        };
        let special = c.special();
        let mut state = state | CtState::TRK;
        if special && c.expected(guard) {
            // Every packet of an expected connection is related (as in
            // Open vSwitch).
            state |= CtState::REL;
        }
        apply_marks(c, action, guard);
        *v = Verdict {
            state,
            zone: action.zone,
            mark: c.mark(),
            label: c.label(guard),
            conn: Some(ConnId::new(A::FAMILY, e.id())),
            dir,
            invalid,
            refused: None,
            committed: false,
            inspect: special,
        };
        Judged::Done
    }

    /// One attempt at tracking a packet; `None` if it lost a race and must
    /// look again. Else the verdict is in `v`, and with it comes the
    /// connection it belongs to (for the next packet of the burst).
    #[allow(clippy::too_many_arguments, clippy::type_complexity)]
    fn track_key<'g, A: Fam>(
        &'g self,
        guard: &'g Guard,
        p: &Pkt<A>,
        action: &CtAction,
        now: u64,
        key: &LookupKey<A>,
        hash: u64,
        hint: Hint,
        policy: &Compiled,
        local: &mut Local,
        v: &mut Verdict,
    ) -> Option<Option<(EntryRef<'g, Conn<A>>, Dir)>> {
        let table = A::table(self);
        let mut dir = Dir::Orig;
        let mut found =
            table.find_hinted(guard, hash, hint, |c| match c.direction_of(key, guard) {
                Some(d) if expiry(c, policy) > now => {
                    dir = d;
                    true
                }
                _ => false,
            });
        if action.force
            && action.commit
            && let Some(e) = found
            && dir == Dir::Reply
        {
            self.remove_entry(table, guard, e, Removal::Replaced);
            found = None;
        }

        let Some(e) = found else {
            if p.related {
                *v = Verdict::invalid(action.zone, InvalidReason::RelatedNotFound);
                return Some(None);
            }
            return self.open::<A>(guard, p, action, now, key, hash, local, v);
        };
        let c = e.record();
        if !p.related {
            return match self.track_hit(guard, p, action, now, policy, e, dir, v) {
                Judged::Done => Some(Some((e, dir))),
                Judged::Lost => None,
                Judged::Reopen => {
                    // A SYN reusing a closed connection ends it and opens a
                    // new one in its place.
                    self.remove_entry(table, guard, e, Removal::Replaced);
                    self.open::<A>(guard, p, action, now, key, hash, local, v)
                }
            };
        }
        // An ICMP error: related to the connection, which it does not move.
        let lock = e.lock()?;
        apply_marks(c, action, guard);
        *v = Verdict {
            state: if dir.is_reply() {
                CtState::REL | CtState::RPL | CtState::TRK
            } else {
                CtState::REL | CtState::TRK
            },
            mark: c.mark(),
            label: c.label(guard),
            conn: Some(ConnId::new(A::FAMILY, e.id())),
            dir,
            ..Verdict::new(action.zone)
        };
        drop(lock);
        Some(None)
    }

    /// Runs the protocol tracker of a connection for the packet, refreshes
    /// its timeout and counts it. The connection's entry lock is held.
    #[inline]
    fn update<A: Addr>(&self, c: &Conn<A>, p: &Pkt<A>, dir: Dir, now: u64) -> Update {
        let reply = dir.is_reply();
        // Per kind, reading and writing only what the kind uses (building a
        // whole `ProtoState` here cost a store-forwarding stall per packet).
        let (verdict, timeout) = match (c.kind(), &p.l4) {
            (Kind::Tcp, L4Info::Tcp(seg)) => {
                let mut t = c.tcp_state();
                let r = tcp::update(&mut t, seg, reply, self.tcp_seq_check.load(Relaxed));
                // A packet that ends the connection (to open a new one in
                // its place) leaves it as it was: judging it again gives
                // the same answer.
                if r.0 != Update::New {
                    c.set_tcp_state(&t);
                }
                r
            }
            // A key match implies the same protocol, so the transport
            // details agree with the state.
            (Kind::Tcp, _) => (Update::Invalid, None),
            (Kind::Icmp, _) => {
                let old = c.small_state();
                let mut s = IcmpState::from_u8(old);
                let r = s.update(reply);
                if s as u8 != old {
                    c.set_small_state(s as u8);
                }
                r
            }
            (Kind::Other, _) => {
                let old = c.small_state();
                let mut s = OtherState::from_u8(old);
                let r = s.update(reply);
                if s as u8 != old {
                    c.set_small_state(s as u8);
                }
                r
            }
        };
        if let Some(t) = timeout {
            c.refresh(now, t);
        }
        if matches!(verdict, Update::Valid | Update::ValidNew) {
            c.count(dir, p.ip_len);
        }
        verdict
    }

    /// Removes a connection found by a lookup (if it is still there).
    fn remove_entry<A: Fam>(
        &self,
        table: &Table<Conn<A>>,
        guard: &Guard,
        e: EntryRef<'_, Conn<A>>,
        why: Removal,
    ) -> bool {
        let hashes = self.shared.hashes(e.record(), guard);
        let mut w = table.write(guard, &hashes);
        w.remove(&self.shared, e, why)
    }

    /// Decides whether the packet may open a connection and, with `commit`,
    /// stores it. `None` if it lost a race and must look again.
    #[allow(clippy::too_many_arguments, clippy::type_complexity)]
    fn open<'g, A: Fam>(
        &'g self,
        guard: &'g Guard,
        p: &Pkt<A>,
        action: &CtAction,
        now: u64,
        key: &LookupKey<A>,
        hash: u64,
        local: &mut Local,
        out: &mut Verdict,
    ) -> Option<Option<(EntryRef<'g, Conn<A>>, Dir)>> {
        let mut v = Verdict::new(action.zone);
        let proto = match p.l4 {
            L4Info::Tcp(seg) => {
                if tcp::invalid_flags(seg.flags) {
                    *out = Verdict::invalid(action.zone, InvalidReason::TcpBadFlags);
                    return Some(None);
                }
                if !tcp::valid_new(seg.flags, self.tcp_loose.load(Relaxed)) {
                    *out = Verdict::invalid(action.zone, InvalidReason::CannotOpen);
                    return Some(None);
                }
                ProtoState::Tcp(tcp::new_conn(&seg))
            }
            L4Info::IcmpQuery { msg_type } => {
                let request = match A::FAMILY {
                    Family::V4 => ctrack_wire::icmp::v4::is_request(msg_type),
                    Family::V6 => msg_type == ctrack_wire::icmp::v6::ECHO_REQUEST,
                };
                if !request {
                    *out = Verdict::invalid(action.zone, InvalidReason::CannotOpen);
                    return Some(None);
                }
                ProtoState::Icmp(IcmpState::First)
            }
            L4Info::Other => ProtoState::Other(OtherState::First),
        };
        v.state = CtState::NEW | CtState::TRK;
        // A connection a gateway announced?
        let expected = if self.expect.active() {
            self.expected::<A>(guard, key, now)
        } else {
            None
        };
        if let Some((_, x)) = &expected {
            v.state |= CtState::REL;
            v.mark = x.mark;
            v.label = x.label;
        }
        if !action.commit {
            *out = v;
            return Some(None);
        }

        let table = A::table(self);
        let shared = &self.shared;
        let meta = shared.zones.get_or_create(action.zone);
        let mut full = self.table_full();
        if full && self.reclaim_pending() {
            // The table is full but holds flushed connections: free some
            // before judging (with no shard lock held).
            self.reclaim_dead(guard, RECLAIM_ON_FULL);
            full = self.table_full();
        }
        // The translation is chosen before any lock is taken (its search
        // looks at many shards), then checked again under the locks of the
        // connection's two shards; a tuple taken meanwhile means searching
        // again.
        let mut tries = 0;
        let (mut w, hashes, setup) = loop {
            let setup = match self.setup::<A>(guard, p, action, key, expected.as_ref(), now) {
                Ok(s) => s,
                Err(_) => return Some(self.refuse(v, Refusal::NatExhausted, local, out)),
            };
            let secondary = setup
                .reply
                .filter(|r| *r != key.tuple.reverse())
                .map(|r| self.hash_of(&LookupKey { tuple: r, ..*key }));
            let hashes = Hashes {
                primary: hash,
                secondary,
            };
            let mut w = table.write(guard, &hashes);
            if meta.generation() != key.generation {
                // Flushed since the lookup: look again in the new generation.
                return None;
            }
            if let (Some(r), Some(h)) = (setup.reply, secondary) {
                let rkey = LookupKey { tuple: r, ..*key };
                if let Some(e) = w.find(h, |c| c.direction_of(&rkey, guard).is_some()) {
                    let gone = shared.expiry(e.record(), guard) <= now
                        && w.remove_if(shared, e, Removal::Expired, |c| {
                            shared.expiry(c, guard) <= now
                        });
                    if !gone {
                        drop(w);
                        tries += 1;
                        if tries >= NAT_RETRIES {
                            return Some(self.refuse(v, Refusal::NatExhausted, local, out));
                        }
                        continue;
                    }
                }
            }
            break (w, hashes, setup);
        };
        if let Some(e) = w.find(hash, |c| c.direction_of(key, guard).is_some()) {
            if shared.expiry(e.record(), guard) > now {
                // Another thread committed it meanwhile: judge the packet
                // against it.
                return None;
            }
            w.remove_if(shared, e, Removal::Expired, |c| {
                shared.expiry(c, guard) <= now
            });
        }

        let limit = shared.limit_of(meta);
        let inst = instance(action.zone, key.generation);
        let mut counted = false;
        let mut refusal = None;
        // After an eviction the table has room for this one connection
        // (the eviction left the remembered "full" state alone on purpose).
        let mut evicted = false;
        for round in 0..2 {
            let zone_ok = limit == 0 || meta.try_count(key.generation, limit);
            counted = limit != 0 && zone_ok;
            let table_ok = evicted || !full;
            if zone_ok && table_ok {
                refusal = None;
                break;
            }
            if counted {
                meta.uncount(key.generation);
                counted = false;
            }
            refusal = Some(if table_ok {
                Refusal::ZoneLimit
            } else {
                Refusal::TableFull
            });
            // Early drop: evict one of the zone's oldest unestablished (or
            // expired) connections in this shard, then try once more.
            if round == 1
                || !w.evict(shared, hash, inst, EARLY_DROP_SCAN, |c| {
                    !c.proto_state().is_established() || shared.expiry(c, guard) <= now
                })
            {
                break;
            }
            evicted = true;
        }
        if let Some(r) = refusal {
            return Some(self.refuse(v, r, local, out));
        }

        let class = proto.initial_timeout();
        let inherit = expected.as_ref().map(|(_, x)| (x.mark, x.label));
        let res = w.insert(shared, &hashes, now, |c| {
            c.init(key, &proto, class, counted, now, p.ip_len, setup);
            if let Some((mark, label)) = inherit {
                c.set_mark(mark, u32::MAX);
                if label != 0 {
                    c.set_label(label, u128::MAX, guard);
                }
            }
            if let Some(m) = action.mark {
                c.set_mark(m.value, m.mask);
            }
            if let Some(l) = action.label
                && l.value & l.mask != 0
            {
                c.set_label(l.value, l.mask, guard);
            }
        });
        match res {
            Ok(e) => {
                drop(w);
                local.add(C::Committed, 1);
                if let Some((k, x)) = &expected {
                    // Consumed by the connection it let in.
                    self.expect.take(k, x.master);
                    local.add(C::ExpectMatched, 1);
                }
                let c = e.record();
                v.conn = Some(ConnId::new(A::FAMILY, e.id()));
                v.committed = true;
                v.mark = c.mark();
                v.label = c.label(guard);
                v.inspect = c.special();
                *out = v;
                Some(Some((e, Dir::Orig)))
            }
            Err(_) => {
                if counted {
                    meta.uncount(key.generation);
                }
                Some(self.refuse(v, Refusal::TableFull, local, out))
            }
        }
    }

    /// Reports a refused commit.
    fn refuse<'g, A: Addr>(
        &self,
        mut v: Verdict,
        r: Refusal,
        local: &mut Local,
        out: &mut Verdict,
    ) -> Option<(EntryRef<'g, Conn<A>>, Dir)> {
        v.refused = Some(r);
        local.add(
            match r {
                Refusal::TableFull => C::RefusedTableFull,
                Refusal::ZoneLimit => C::RefusedZoneLimit,
                Refusal::NatExhausted => C::RefusedNatExhausted,
            },
            1,
        );
        *out = v;
        None
    }

    /// The expectation a new connection with `key` matches, if any, with
    /// its key. One whose control connection has ended is removed.
    fn expected<A: Fam>(
        &self,
        guard: &Guard,
        key: &LookupKey<A>,
        now: u64,
    ) -> Option<(ExpKey, Expectation)> {
        let k = ExpKey {
            zone: key.zone,
            generation: key.generation,
            family: A::FAMILY,
            proto: key.proto,
            src: key.tuple.src.to_u128(),
            dst: key.tuple.dst.to_u128(),
            dport: (key.tuple.dst_l4 >> 16) as u16,
        };
        let x = self.expect.find(&k, now)?;
        if !self.master_alive(guard, &x) {
            if self.expect.take(&k, x.master) {
                self.shared.stats.bump(C::ExpectExpired, 1);
            }
            return None;
        }
        Some((k, x))
    }

    /// True if an expectation's control connection still lives.
    fn master_alive(&self, guard: &Guard, x: &Expectation) -> bool {
        match x.master.family() {
            Family::V4 => self.master_alive_in::<u32>(guard, x),
            Family::V6 => self.master_alive_in::<V6>(guard, x),
        }
    }

    fn master_alive_in<A: Fam>(&self, guard: &Guard, x: &Expectation) -> bool {
        A::table(self)
            .get(guard, x.master.record())
            .is_some_and(|e| {
                let c = e.record();
                *c.orig() == Tuple::of(&x.master_key)
                    && c.zone() == x.master_key.zone
                    && c.proto() == x.master_key.proto
            })
    }

    /// What a new connection starts with: its translation (chosen here),
    /// gateway, and the control connection that expected it.
    fn setup<A: Fam>(
        &self,
        guard: &Guard,
        p: &Pkt<A>,
        action: &CtAction,
        key: &LookupKey<A>,
        expected: Option<&(ExpKey, Expectation)>,
        now: u64,
    ) -> Result<Setup<A>, NatError> {
        let mut setup = Setup::default();
        let table = A::table(self);
        let taken = |cand: &Tuple<A>| {
            let k = LookupKey {
                tuple: *cand,
                ..*key
            };
            let policy = self.shared.policy(key.zone, guard);
            table
                .find(guard, self.hash_of(&k), |c| {
                    c.direction_of(&k, guard).is_some() && expiry(c, policy) > now
                })
                .is_some()
        };
        if let Some((_, x)) = expected {
            setup.master = Some(Tuple::of(&x.master_key));
            if action.nat.is_some()
                && let Some(t) = x.target
            {
                // Where the control connection's gateway said its packets
                // go: no search (the port was announced).
                let o = key.tuple;
                let to = Tuple {
                    src: A::from_u128(t.src),
                    dst: A::from_u128(t.dst),
                    src_l4: o.src_l4,
                    dst_l4: (o.dst_l4 & 0xffff) | (u32::from(t.dport) << 16),
                };
                if to != o {
                    let reply = to.reverse();
                    if taken(&reply) {
                        return Err(NatError::Exhausted);
                    }
                    setup.reply = Some(reply);
                    setup.nat = if to.src != o.src { SNAT } else { 0 }
                        | if to.dst != o.dst || to.dst_l4 != o.dst_l4 {
                            DNAT
                        } else {
                            0
                        };
                }
            }
        } else if let Some(alg) = action.alg
            && alg.proto() == p.proto
        {
            setup.helper = Some(Helper::new(alg));
        }
        // A connection expected by an untranslated control connection is
        // translated by the action's range, as any other (Linux).
        if setup.reply.is_none()
            && let Some(Nat {
                range: Some(range),
                mode,
            }) = action.nat
        {
            let mut random = || self.shared.hasher.mix(self.rng.fetch_add(1, Relaxed)) as u32;
            match nat::choose(
                &key.tuple,
                key.proto,
                key.zone,
                &range,
                mode,
                &self.shared.hasher,
                &mut random,
                taken,
            ) {
                Ok(reply) => {
                    setup.reply = Some(reply);
                    setup.nat = match range.kind {
                        NatKind::Src => SNAT,
                        NatKind::Dst => DNAT,
                    };
                }
                // A range of the other family does not apply.
                Err(NatError::Family) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(setup)
    }

    /// True if the table holds `max_conns` connections. Reads one shared
    /// approximate count; only within a few thousand of the limit does it
    /// sum the shards' exact counts (and then remembers a full table until
    /// something is removed).
    fn table_full(&self) -> bool {
        let max = self.max_conns.load(Relaxed);
        let slack = (self.v4.shard_count() + self.v6.shard_count()) * APPROX_STEP as usize;
        if self.v4.approx_len() + self.v6.approx_len() + slack < max {
            return false;
        }
        if self.shared.full.load(Relaxed) {
            return true;
        }
        if self.table_len() >= max {
            self.shared.full.store(true, Relaxed);
            return true;
        }
        false
    }

    /// Frees expired connections and connections of flushed zones, looking
    /// at no more than `budget`, and says when to call again.
    pub fn sweep(&self, now: Time, budget: usize) -> Sweep {
        let guard = pin();
        let now_ms = now.as_millis();
        let mut out = Sweep::default();
        let (flushed, dead_left) = self.reclaim_dead(&guard, budget);
        out.flushed = flushed;
        out.examined = flushed;
        let left = budget - flushed;
        let s4 = self.v4.sweep(&self.shared, &guard, now_ms, left);
        let s6 = self
            .v6
            .sweep(&self.shared, &guard, now_ms, left - s4.examined);
        out.expired = s4.removed + s6.removed;
        out.examined += s4.examined + s6.examined;
        let gone = self.expect.sweep(now_ms, |x| self.master_alive(&guard, x));
        if gone != 0 {
            self.shared.stats.bump(C::ExpectExpired, gone as u64);
        }
        out.next = if dead_left || s4.more || s6.more {
            Some(now)
        } else {
            match (self.v4.next_due(), self.v6.next_due()) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            }
            .map(Time::from_millis)
        };
        out
    }

    /// True if flushed zone instances still hold connections.
    fn reclaim_pending(&self) -> bool {
        !self
            .dead
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_empty()
    }

    /// Frees connections of flushed zone instances, at most `budget`.
    /// Returns how many, and whether some are left.
    fn reclaim_dead(&self, guard: &Guard, budget: usize) -> (usize, bool) {
        let mut dead = self.dead.lock().unwrap_or_else(|e| e.into_inner());
        let mut removed = 0;
        while let Some(d) = dead.front_mut() {
            let inst = instance(d.zone, d.generation);
            while d.family < 2 {
                let shards = if d.family == 0 {
                    self.v4.shard_count()
                } else {
                    self.v6.shard_count()
                };
                while d.shard < shards {
                    if removed >= budget {
                        return (removed, true);
                    }
                    let (n, more) = if d.family == 0 {
                        self.v4.reclaim_instance(
                            &self.shared,
                            guard,
                            d.shard,
                            inst,
                            budget - removed,
                        )
                    } else {
                        self.v6.reclaim_instance(
                            &self.shared,
                            guard,
                            d.shard,
                            inst,
                            budget - removed,
                        )
                    };
                    removed += n;
                    if more {
                        return (removed, true);
                    }
                    d.shard += 1;
                }
                d.family += 1;
                d.shard = 0;
            }
            dead.pop_front();
        }
        (removed, false)
    }

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
        self.reclaim_dead(&pin(), usize::MAX).0
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
        let mut n = self.reclaim_dead(&guard, usize::MAX).0;
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

    fn flush_key_in<A: Fam>(&self, guard: &Guard, key: &ConnKey, now: Time) -> bool {
        let Some(e) = self.find::<A>(guard, key, now) else {
            return false;
        };
        self.remove_entry(A::table(self), guard, e.0, Removal::Deleted)
    }

    fn find<'g, A: Fam>(
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

    fn lookup_in<A: Fam>(
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

    fn info<A: Addr>(&self, c: &Conn<A>, now: Time, guard: &Guard) -> Option<ConnInfo> {
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

    fn for_each_in<A: Fam>(
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
    pub fn expectations(&self, now: Time) -> Vec<crate::expect::ExpectationInfo> {
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
                crate::expect::ExpectationInfo {
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
    /// [`crate::expect::DEFAULT_MAX`]); past it, new ones are refused and
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

#[inline(always)]
fn apply_marks<A: Addr>(c: &Conn<A>, action: &CtAction, guard: &Guard) {
    if let Some(m) = action.mark {
        c.set_mark(m.value, m.mask);
    }
    if let Some(l) = action.label {
        c.set_label(l.value, l.mask, guard);
    }
}

fn count(local: &mut Local, v: &Verdict) {
    local.add(C::Packets, 1);
    if v.state.contains(CtState::NEW) {
        local.add(C::New, 1);
    }
    if v.state.contains(CtState::EST) {
        local.add(C::Established, 1);
    }
    if v.state.contains(CtState::REL) {
        local.add(C::Related, 1);
    }
    if let Some(r) = v.invalid {
        local.add(C::Invalid, 1);
        local.invalid(r);
    }
}
