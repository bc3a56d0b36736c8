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
//! - [`file`](mod@file): reading the policy file (TOML or JSON) into a
//!   [`model::Policy`] ([`model::Policy::from_str`], [`model::Policy::load`]);
//! - [`lang`]: OVN's match language, parsed and resolved into an
//!   [`expr::Expr`];
//! - [`reject`]: what a `reject` ACL sends back (a TCP RST, an SCTP ABORT,
//!   an ICMP or ICMPv6 unreachable) and the rate limit on those answers;
//! - [`firewall`]: the single-pass firewall joining a policy to the
//!   tracker; [`analyze`]: never-matching and shadowed ACLs.
//!
//! Sans-IO like the core: no clock, no thread, no socket (only
//! [`model::Policy::load`] reads a file).

#![forbid(unsafe_code)]

pub mod analyze;
pub mod classify;
pub mod expr;
pub mod file;
pub mod firewall;
pub mod key;
pub mod lang;
pub mod meter;
pub mod model;
pub mod reject;
