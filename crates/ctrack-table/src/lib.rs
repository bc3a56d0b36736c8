//! ctrack's concurrent connection table: the only crate of ctrack with
//! `unsafe` code, confined to the modules that need it (`unsafe_code` is
//! denied everywhere else) and each block justified where it stands.
//!
//! A [`Table`] holds records in shards (a power of two, up to [`MAX_SHARDS`])
//! chosen by the top bits of a record's hash. Each shard has:
//!
//! - an index of 32-bit entries in cache-line buckets ([`index`]), read with
//!   plain atomic loads: a lookup takes no lock and writes nothing shared;
//! - slots that never move ([`slab`]), so a reference found in the index
//!   stays valid while the reader's epoch is pinned ([`pin`], [`Guard`]);
//!   removed slots are reused only after every reader that could have
//!   seen them has unpinned (crossbeam-epoch), in batches;
//! - a lock, taken by writers only: inserting or removing a record takes the
//!   locks of the one or two shards its entries live in, in increasing
//!   shard order, so both entries of a translated connection appear and
//!   disappear together for anyone who locks;
//! - per zone instance, a list of its records, so that flushing or dumping
//!   a zone walks that zone alone; and a lazy timer wheel, so that a packet
//!   refreshing a record touches nothing but the record and expiry never
//!   scans the table.
//!
//! Every record embeds a [`Header`] with its liveness, a one-byte entry
//! lock and its list links. The table is generic: the caller computes hashes
//! and compares keys ([`Context`]), so symmetric hashing, zones and timeout
//! policies stay in `ctrack-core`.
//!
//! Counts are per shard (`len` sums them); there is no global lock and no
//! shared counter on any path. A limit on the whole count is checked
//! through a [`Gate`], touched only near the limit.
//!
//! # Example
//!
//! ```
//! use std::sync::atomic::{AtomicU64, Ordering};
//!
//! use ctrack_table::{Context, Guard, Hashes, Header, Record, Removal, Table, TableConfig, pin};
//!
//! /// A record: the table's header and the caller's fields.
//! #[derive(Debug, Default)]
//! struct Conn {
//!     header: Header,
//!     key: u64,
//!     /// Changed by packets under the entry lock, hence atomic.
//!     expires: AtomicU64,
//! }
//!
//! impl Record for Conn {
//!     fn header(&self) -> &Header {
//!         &self.header
//!     }
//! }
//!
//! fn hash(key: u64) -> u64 {
//!     key.wrapping_mul(0x9e37_79b9_7f4a_7c15)
//! }
//!
//! /// How the table sees records: their hashes, zone and expiry.
//! struct Ctx;
//!
//! impl Context<Conn> for Ctx {
//!     fn hashes(&self, c: &Conn, _: &Guard) -> Hashes {
//!         Hashes { primary: hash(c.key), secondary: None }
//!     }
//!     fn instance(&self, _: &Conn) -> u64 {
//!         0
//!     }
//!     fn expiry(&self, c: &Conn, _: &Guard) -> u64 {
//!         c.expires.load(Ordering::Relaxed)
//!     }
//! }
//!
//! let table = Table::<Conn>::new(TableConfig { shards: 4, capacity: 1024 });
//! let guard = pin();
//! let hashes = Hashes { primary: hash(42), secondary: None };
//!
//! // Insert: lock the record's shard, fill a slot (every field).
//! let mut w = table.write(&guard, &hashes);
//! let id = w
//!     .insert(&Ctx, &hashes, 0, |c| {
//!         c.key = 42;
//!         *c.expires.get_mut() = 60_000;
//!     })
//!     .expect("room")
//!     .id();
//! drop(w);
//!
//! // Look up: no lock; the reference is good while `guard` is pinned.
//! let found = table.find(&guard, hash(42), |c| c.key == 42).expect("inserted");
//! assert_eq!(found.id(), id);
//! assert_eq!(found.record().expires.load(Ordering::Relaxed), 60_000);
//! assert!(table.find(&guard, hash(7), |c| c.key == 7).is_none());
//!
//! // Remove: lock its shard again.
//! assert!(table.write(&guard, &hashes).remove(&Ctx, found, Removal::Deleted));
//! assert!(table.find(&guard, hash(42), |c| c.key == 42).is_none());
//! assert!(table.is_empty());
//! ```
#![deny(unsafe_code)]
#![deny(unsafe_op_in_unsafe_fn)]

#[allow(unsafe_code)]
mod arena;
#[allow(unsafe_code)]
mod epoch;
mod gate;
mod header;
#[allow(unsafe_code)]
pub mod index;
mod lists;
#[allow(unsafe_code)]
mod prefetch;
#[allow(unsafe_code)]
mod shard;
#[allow(unsafe_code)]
pub mod slab;
mod sync;
mod table;
#[cfg(any(test, feature = "testing"))]
#[doc(hidden)]
pub mod testing;

pub use epoch::{EpochBox, Guard, Retired, pin};
pub use gate::{Gate, GateCount, Place};
pub use header::Header;
pub use prefetch::prefetch;
pub use shard::GRACE_SLOTS_PER_SHARD;
pub use table::{
    APPROX_STEP, EntryLock, EntryRef, Hint, Home, InsertError, MAX_SHARDS, MemoryStats,
    NEAR_WINDOW, RecordId, SHARD_SHIFT, Seen, SweepStats, Table, TableConfig, Writer,
};

/// The index positions of a record: every record has a primary hash, and a
/// record reachable by a second key (a translated reply) a secondary one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hashes {
    /// Hash of the key the record lives under.
    pub primary: u64,
    /// Hash of its second key, if it has one.
    pub secondary: Option<u64>,
}

/// Why a record left the table (passed to [`Context::removed`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Removal {
    /// Its time ran out and a sweep reclaimed it.
    Expired,
    /// Its zone instance was flushed.
    Flushed,
    /// Removed to make room for a new record (early drop).
    Evicted,
    /// Replaced by a new record with the same key.
    Replaced,
    /// Removed on request.
    Deleted,
}

/// A type the table can hold.
///
/// A slot is reused for later records, so `Default` builds the vacant
/// value of fresh slots and [`Writer::insert`]'s `init` overwrites every
/// field.
pub trait Record: Default + Send + Sync + 'static {
    /// The table's bookkeeping inside the record.
    fn header(&self) -> &Header;

    /// Called once when the record leaves the table, under its shard lock:
    /// heap data it owns through an [`EpochBox`] should be retired here,
    /// into `retired` ([`EpochBox::retire_into`]), which goes to the epoch
    /// with the slot's limbo list and is dropped after the same grace
    /// period.
    fn retire(&self, retired: &mut Retired) {
        let _ = retired;
    }
}

/// What the table asks of its user about records.
pub trait Context<R> {
    /// The record's hashes; must not change while it is in the table.
    fn hashes(&self, r: &R, guard: &Guard) -> Hashes;
    /// The zone instance the record belongs to (its zone list).
    fn instance(&self, r: &R) -> u64;
    /// When the record expires, in milliseconds of the caller's clock. May
    /// grow while the record lives (a packet refreshed it) and the timer
    /// wheel catches up lazily.
    fn expiry(&self, r: &R, guard: &Guard) -> u64;
    /// Called under the record's shard lock when it is removed.
    fn removed(&self, r: &R, why: Removal) {
        let _ = (r, why);
    }
    /// Called when `shard` gets its first record of `instance`
    /// (`occupied`) or loses its last.
    fn occupancy(&self, instance: u64, shard: usize, occupied: bool) {
        let _ = (instance, shard, occupied);
    }
}

#[cfg(all(test, not(loom)))]
mod tests;
