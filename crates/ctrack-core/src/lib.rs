//! ctrack's connection-tracking core, sans IO.
//!
//! A [`Tracker`] takes frames, a [`CtAction`] and the current [`Time`], and
//! returns a [`Verdict`] per packet: its `ct_state` ([`CtState`], with Open
//! vSwitch's meaning), zone, mark, label and connection. It never reads a
//! clock, opens a file or starts a thread: the caller supplies time and
//! calls [`Tracker::sweep`] when the previous sweep said to. One tracker
//! serves any number of threads (`&self` throughout).
//!
//! Layers, bottom up: [`extract`] turns a parsed frame into a [`ConnKey`] or
//! an [`InvalidReason`]; [`proto`] holds the per-protocol state machines
//! (TCP with sequence tracking, ICMP queries, three-state "other"); the
//! `ctrack-table` crate stores [`Conn`]s, one table per address family,
//! sharded, read without locks; [`zone`](crate::Tracker::flush_zone)
//! state makes a zone flush O(1); [`tracker`] ties them together.
#![forbid(unsafe_code)]

pub mod action;
mod alg;
pub mod conn;
pub mod dump;
pub mod expect;
pub mod extract;
pub mod fast;
pub mod frag;
pub mod ftp;
pub mod key;
pub mod nat;
mod pipeline;
pub mod proto;
mod rewrite;
pub mod state;
mod stats;
pub mod time;
pub mod timeout;
pub mod tracker;
mod zone;

pub use action::{ActionError, Alg, CtAction, Masked, Nat, NatKind, NatMode, NatRange};
pub use conn::{Conn, ConnId, Counters, Dir};
pub use dump::Entry;
pub use expect::ExpectationInfo;
pub use extract::InvalidReason;
pub use frag::{FragConfig, FragError, FragStats, Reassembler};
pub use key::{ConnKey, Endpoint, Family, KeyHasher, Zone};
pub use pipeline::{Out, Pipeline};
pub use state::CtState;
pub use stats::Stats;
pub use time::{Millis, Time};
pub use timeout::{Timeout, TimeoutPolicy, ZonePolicies};
pub use tracker::{Config, ConnInfo, EARLY_DROP_SCAN, Refusal, Sweep, Tracker, Verdict};

pub use ctrack_table::MAX_SHARDS;
pub use ctrack_wire::LinkType;
