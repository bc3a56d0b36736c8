//! ctrack's policy layer: OVN-style ACLs on a single-pass session fast path.
//!
//! - [`key`]: the packet fields ACLs match, packed into one 64-byte
//!   [`key::Key`], and how a frame fills it;
//! - [`expr`]: a match expression once resolved ([`expr::Expr`]): tests of
//!   fields under masks, ranges, `&&`, `||`, `!`; and its direct evaluation,
//!   the reference the classifier is checked against;
//! - [`model`]: the policy as loaded: ports, ACLs with their resolved
//!   matches;
//! - [`file`](mod@file): reading the policy file (TOML or JSON) into a
//!   [`model::Policy`] ([`model::Policy::from_str`], [`model::Policy::load`]);
//! - [`lang`]: OVN's match language, parsed and resolved into an
//!   [`expr::Expr`].
//!
//! Sans-IO like the core: no clock, no thread, no socket (only
//! [`model::Policy::load`] reads a file).

#![forbid(unsafe_code)]

pub mod expr;
pub mod file;
pub mod key;
pub mod lang;
pub mod model;
