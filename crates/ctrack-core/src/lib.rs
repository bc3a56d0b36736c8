//! ctrack's connection-tracking core, sans IO.
//!
//! A [`Tracker`] takes frames, a [`CtAction`] and the current [`Time`], and
//! returns a [`Verdict`] per packet: its `ct_state` ([`CtState`], with Open
//! vSwitch's meaning), zone, mark, label and connection. It never reads a
//! clock, opens a file or starts a thread: the caller supplies time and
//! calls [`Tracker::sweep`] when the previous sweep said to.
//!
//! Layers, bottom up: [`extract`] turns a parsed frame into a [`ConnKey`] or
//! an [`InvalidReason`]; [`proto`] holds the per-protocol state machines
//! (TCP with sequence tracking, ICMP queries, three-state "other"); a
//! [`ConnTable`] stores [`Conn`]s (the [`LocalTable`] here is
//! single-threaded); [`tracker`] ties them together.
#![forbid(unsafe_code)]

pub mod conn;
pub mod dump;
pub mod extract;
pub mod key;
pub mod proto;
pub mod state;
pub mod table;
pub mod time;
pub mod timeout;
pub mod tracker;

pub use conn::{Conn, Counters, Dir};
pub use dump::Entry;
pub use extract::InvalidReason;
pub use key::{ConnKey, Endpoint, Family, KeyHasher, Zone};
pub use state::CtState;
pub use table::{ConnId, ConnTable, LocalTable, Sweep};
pub use time::{Millis, Time};
pub use timeout::{Timeout, TimeoutPolicy, ZonePolicies};
pub use tracker::{Config, CtAction, Masked, Refusal, Stats, Tracker, Verdict};

pub use ctrack_wire::LinkType;
