//! ctrack's policy layer: OVN-style ACLs on a single-pass session fast path.
//!
//! - [`key`]: the packet fields ACLs match, packed into one 64-byte
//!   [`key::Key`], and how a frame fills it;
//! - [`expr`]: a match expression once resolved ([`expr::Expr`]): tests of
//!   fields under masks, ranges, `&&`, `||`, `!`; and its direct evaluation,
//!   the reference the classifier is checked against;
//! - [`classify`]: the compiled classifier: of many ranked rules, the best
//!   one a key matches, by a TupleMerge-style tuple space search;
//! - [`model`]: the policy as loaded: ports, ACLs with their resolved
//!   matches;
//! - [`reject`]: what a `reject` ACL sends back (a TCP RST, an SCTP ABORT,
//!   an ICMP or ICMPv6 unreachable) and the rate limit on those answers.
//!
//! Sans-IO like the core: no clock, no thread, no socket.

#![forbid(unsafe_code)]

pub mod analyze;
pub mod classify;
pub mod expr;
pub mod firewall;
pub mod key;
pub mod model;
pub mod reject;
