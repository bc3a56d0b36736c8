//! The tracker's settings.

use crate::zone::TimeoutPolicy;

/// Open vSwitch's default limit on tracked connections.
pub const DEFAULT_MAX_CONNS: usize = 3_000_000;

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
    /// Fault in the memory `max_conns` IPv4 connections need when the
    /// tracker is made (its index, and record slots for the limit), so
    /// that the kernel zeroes those pages before the first packet instead
    /// of on the packet path, under a shard lock, as the table fills. The
    /// memory is taken at once (about 135 bytes per connection of the
    /// limit), as in a daemon sized for its load; off by default, when a
    /// tracker costs only what it holds.
    pub prefault: bool,
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
            prefault: false,
        }
    }
}
