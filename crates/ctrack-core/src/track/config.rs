//! The tracker's settings.

use crate::zone::TimeoutPolicy;

/// Open vSwitch's default limit on tracked connections.
pub const DEFAULT_MAX_CONNS: usize = 3_000_000;

/// Table shards per address family unless a [`Config`] says otherwise:
/// enough that a few threads creating connections rarely meet at a shard's
/// lock, few enough that one thread keeps every shard's lock, lists and
/// counts in its first-level cache. See [`Config::shards_for`].
pub const DEFAULT_SHARDS: usize = 64;

/// How many of a zone's oldest connections in a shard a commit looks at
/// for one to evict when a limit is reached (Linux's early drop looks at
/// eight).
pub const EARLY_DROP_SCAN: usize = 8;

/// Index buckets of a new connection's hash neighbourhood (its home bucket
/// and the ones after it, twelve entries each) that early drop looks in
/// for an unestablished connection to evict, four at a time, nearest
/// first. Far enough that the victim is where the newcomer goes, so that
/// the index keeps its shape under a long flood (in a model of 2 million
/// evictions at 85% load with a flood of one entry in eight, 8 buckets let
/// runs of full buckets grow to the probe bound, 12 kept the longest probe
/// as it was; see `Writer::evict_near`), and near enough that a commit
/// that finds nothing to evict (a table full of established connections)
/// stays cheap: at most 144 candidates.
pub const EARLY_DROP_BUCKETS: usize = 12;

/// Shards early drop looks in, the new connection's first, when that one
/// has nothing to evict near it, in a small table (one whose shards hold
/// fewer than [`SMALL_SHARD`] connections each at its limit): a small
/// table's shard holds a handful of connections, and its limit is the
/// table's, not the shard's. A large table's run is enough.
pub const EARLY_DROP_SHARDS: usize = 8;

/// A table whose limit gives each shard fewer connections than this is
/// small (see [`EARLY_DROP_SHARDS`]).
pub const SMALL_SHARD: usize = 1024;

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
    /// The table's index is sized for this many. A limit past what the
    /// table can hold (2^23 connections a shard: `usize::MAX`, say) is
    /// taken as that ([`crate::Tracker::max_conns_ceiling`]).
    pub max_conns: usize,
    /// Timeout policy for zones without their own.
    pub timeouts: TimeoutPolicy,
    /// Limit for zones without their own (0: none), as Open vSwitch's
    /// `ct-set-limits default=`.
    pub default_zone_limit: u32,
    /// Table shards per address family: a power of two up to
    /// [`ctrack_table::MAX_SHARDS`] (256). More shards, less contention
    /// between threads creating connections; fewer, less memory that every
    /// thread touches ([`Config::shards_for`]). A tracker that one thread
    /// alone uses, sweeping included, creates connections about a fifth
    /// faster in 16 shards than in 64; once a second thread takes the
    /// shards' locks (another packet thread, or a sweeper), 64 are
    /// faster and keep the latency's tail shorter (BENCHMARKS.md, "The
    /// shard count for one thread").
    pub shards: usize,
    /// Fault in the memory `max_conns` IPv4 connections need when the
    /// tracker is made (its index, and record slots for the limit), so
    /// that the kernel zeroes those pages before the first packet instead
    /// of on the packet path, under a shard lock, as the table fills. The
    /// memory is taken at once (about 135 bytes per connection of the
    /// limit), as in a daemon sized for its load; off by default, when a
    /// tracker costs only what it holds.
    pub prefault: bool,
}

impl Config {
    /// The shards per family for `threads` threads that create
    /// connections: 32 a thread, from [`DEFAULT_SHARDS`] up to
    /// [`ctrack_table::MAX_SHARDS`]. Measured with `ctrack bench cps` (16
    /// vCPUs, BENCHMARKS.md): 16 threads create 9.8 M connections a second
    /// in 64 shards, 11.1 in 128 and 12.5-13.0 in 256, their slowest
    /// batches 5x-6x the median against 4.4x-4.6x; one thread is as fast
    /// in 64 there and 4-9% faster on the 2-core host (its shard headers
    /// fit its first-level cache). 256 shards also cost memory: 138.0 bytes a connection
    /// against 135.5 in a table at its limit of 1.2M, 152.8 against 139.0
    /// at 240,000 (`ctrack bench flood syn --shards N`).
    pub fn shards_for(threads: usize) -> usize {
        threads
            .min(ctrack_table::MAX_SHARDS)
            .saturating_mul(32)
            .next_power_of_two()
            .clamp(DEFAULT_SHARDS, ctrack_table::MAX_SHARDS)
    }
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
            shards: DEFAULT_SHARDS,
            prefault: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{Config, DEFAULT_SHARDS};

    #[test]
    fn shards_grow_with_the_threads_up_to_the_most() {
        let got: Vec<usize> = [0, 1, 2, 3, 4, 5, 8, 9, 16, 1024, usize::MAX]
            .into_iter()
            .map(Config::shards_for)
            .collect();
        assert_eq!(got, [64, 64, 64, 128, 128, 256, 256, 256, 256, 256, 256]);
        assert_eq!(Config::default().shards, DEFAULT_SHARDS);
    }

    /// A limit past what the table holds (`usize::MAX` for "no limit") is
    /// taken as the table's ceiling, given at the start or later. Until
    /// 2026-12-01 it sized the index for itself: the start panicked ("out
    /// of memory for a connection index").
    #[test]
    fn a_limit_past_the_table_is_its_ceiling() {
        for (shards, ceiling) in [(1, 1usize << 23), (4, 1 << 25)] {
            let t = crate::Tracker::new(Config {
                max_conns: usize::MAX,
                shards,
                ..Config::default()
            });
            assert_eq!(t.max_conns_ceiling(), ceiling);
            assert_eq!(t.max_conns(), ceiling);
            t.set_max_conns(1000);
            assert_eq!(t.max_conns(), 1000);
            t.set_max_conns(usize::MAX);
            assert_eq!(t.max_conns(), ceiling);
            t.set_max_conns(ceiling + 1);
            assert_eq!(t.max_conns(), ceiling);
        }
    }
}
