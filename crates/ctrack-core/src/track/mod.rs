//! The tracker: one call per packet (or per burst) with the `ct` action to
//! apply and the current time, a [`Verdict`](crate::Verdict) back. Shared by
//! any number of threads (`&self` everywhere).
//!
//! The decision procedure is Open vSwitch's `process_one`: look the packet's
//! key up from both directions; if a connection is found, let its protocol
//! tracker judge the packet (or, for an ICMP error, report it related); if
//! not, decide whether the packet may open a connection and, with `commit`,
//! store one.
//!
//! Concurrency: a lookup takes no lock; judging a packet takes its
//! connection's entry lock; creating or removing a connection takes the
//! lock of the table shard it lives in (see `ctrack-table`). A packet that
//! loses a race (its connection removed under it, its zone flushed) is
//! looked up again.

mod after;
mod config;
mod expiry;
mod flush;
mod handle;
mod inspect;
mod judge;
mod lanes;
mod open;
mod packet;
mod pipeline;
mod process;
mod setup;
mod shared;
mod stages;
#[cfg(test)]
mod testing;
mod tracker;
mod word;

pub use after::AfterEach;
pub use config::{
    Config, DEFAULT_MAX_CONNS, DEFAULT_SHARDS, EARLY_DROP_BUCKETS, EARLY_DROP_SCAN,
    EARLY_DROP_SHARDS, SMALL_SHARD,
};
pub use expiry::Sweep;
pub use handle::{Handle, REPIN_EVERY};
pub use pipeline::{Out, Outputs, Pipeline};
pub use tracker::Tracker;
