//! The single-pass firewall: a policy joined to the tracker.
//!
//! A packet of a known connection takes one tracker lookup, which returns
//! its state and the connection's verdict word ([`word`]): if the word is
//! of the current policy generation, the packet passes on it (stage
//! `session`) with no classification. Only a connection's first packet, a
//! packet decided stateless, and the first packet of a connection after a
//! policy change meet the classifier. See `docs/policy.md` for the
//! semantics and where they differ from OVN's.

mod burst;
mod compiled;
mod decision;
mod engine;
mod judge;
mod nd;
mod security;
mod session;
pub mod word;

pub use burst::BurstOut;
pub use compiled::{Compiled, FirstDecision, Kind, StageDecision, TIERS, rank};
pub use decision::{AclCounters, AclRef, Action, Decision, DropReason, FwStats, Stage};
pub use engine::{Firewall, FwOut, FwOutputs};
pub use nd::is_nd_or_mld;
