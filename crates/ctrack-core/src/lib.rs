//! ctrack's connection-tracking core, sans IO.
//!
//! A [`Tracker`] takes frames, a [`CtAction`] and the current [`Time`], and
//! returns a [`Verdict`] per packet: its `ct_state` ([`CtState`], with Open
//! vSwitch's meaning), zone, mark, label and connection. It never reads a
//! clock, opens a file, starts a thread or keeps a counter of its own: the
//! caller supplies time, calls [`Tracker::sweep`] when the previous sweep
//! said to, and owns the [`Stats`] each call adds to (one per worker). One tracker
//! serves any number of threads (`&self` throughout).
//!
//! The crate in folders, bottom up (each imports only from those above it
//! in this list; `ARCHITECTURE.md` draws the graph):
//!
//! - [`key`]: naming connections: zones, families, endpoints, keys,
//!   tuples, directions, connection ids, the keyed symmetric hash.
//! - `time`, [`action`]: the clock the caller gives, and the `ct` action.
//! - [`verdict`]: `ct_state`, invalid reasons, the per-packet verdict, the
//!   counters.
//! - [`zone`]: zone generations (O(1) flush), limits, timeout policies.
//! - [`proto`]: the per-protocol state machines (TCP windows, ICMP, other).
//! - [`packet`]: from a parsed frame to a key (every check), and the IPv4
//!   fast path.
//! - [`frag`]: IP fragment reassembly in front of the tracker.
//! - [`nat`]: choosing a translation, rewriting packets in place, sequence
//!   adjustment, the translation stage.
//! - [`alg`]: FTP and TFTP gateways: the command reader, gateway state,
//!   expectations, the gateway stage.
//! - [`conn`]: the connection record the table stores.
//! - [`track`]: the [`Tracker`] itself (lookup, judgement, commit, limits,
//!   early drop, expiry, flushes, dumps) and the [`Pipeline`].
//!
//! ```
//! use ctrack_core::{CtAction, CtState, LinkType, Stats, Time, Tracker};
//! use ctrack_wire::build::{Frame, L4};
//! use ctrack_wire::tcp::flags::{ACK, SYN};
//!
//! let tracker = Tracker::default();
//! // This worker's counters: the tracker keeps none of its own.
//! let mut stats = Stats::default();
//! let commit: CtAction = "commit".parse().unwrap();
//! let syn = Frame::v4([10, 0, 0, 1], [10, 0, 0, 2], L4::tcp(40000, 80, SYN)).build();
//! let v = tracker.process(&syn, LinkType::Ethernet, &commit, Time::ZERO, &mut stats);
//! assert!(v.state.contains(CtState::NEW | CtState::TRK));
//! assert!(v.committed);
//!
//! // The server's answer belongs to the same connection, in reply.
//! let syn_ack = Frame::v4([10, 0, 0, 2], [10, 0, 0, 1], L4::tcp(80, 40000, SYN | ACK)).build();
//! let now = Time::from_millis(1);
//! let r = tracker.process(&syn_ack, LinkType::Ethernet, &commit, now, &mut stats);
//! assert_eq!(r.conn, v.conn);
//! assert!(r.state.contains(CtState::RPL));
//! assert_eq!((stats.packets, stats.committed), (2, 1));
//! ```
#![forbid(unsafe_code)]

pub mod action;
pub mod alg;
pub mod conn;
pub mod frag;
pub mod key;
pub mod nat;
pub mod packet;
pub mod proto;
pub mod time;
pub mod track;
pub mod verdict;
pub mod zone;

pub use action::{ActionError, Alg, CtAction, Masked, Nat, NatKind, NatMode, NatRange};
pub use alg::ExpectationInfo;
pub use conn::{Conn, ConnInfo, Counters, Entry, EntryTuple, EventKind, EventSink};
pub use frag::{FragConfig, FragError, FragStats, Reassembler};
pub use key::{ConnId, ConnKey, Dir, Endpoint, Family, KeyHasher, Zone};
pub use time::{Millis, Time};
pub use track::{
    AfterEach, Config, DEFAULT_SHARDS, EARLY_DROP_BUCKETS, EARLY_DROP_SCAN, EARLY_DROP_SHARDS,
    Handle, Out, Outputs, Pipeline, SMALL_SHARD, Sweep, Tracker,
};
pub use verdict::{CtState, InvalidReason, Refusal, Stats, Verdict};
pub use zone::{Timeout, TimeoutPolicy};

pub use ctrack_table::{GRACE_SLOTS_PER_SHARD, MAX_SHARDS, SHARD_SHIFT};
pub use ctrack_wire::LinkType;
