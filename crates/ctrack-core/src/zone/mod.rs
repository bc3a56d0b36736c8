//! Zones: each zone's generation (a flush is a new generation, O(1)),
//! limit and count, and the timeout policies that say when a connection
//! of a zone expires.

mod meta;
mod timeout;

pub(crate) use meta::{LIMIT_DEFAULT, ZoneMeta, Zones};

pub use timeout::{Compiled, Timeout, TimeoutPolicy};
