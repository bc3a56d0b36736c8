//! The connection record as the table stores it (128 bytes for IPv4), its
//! per-direction counters, and the extension few connections need (label,
//! translated reply tuple, gateway state, master).

mod counters;
pub mod dump;
pub mod event;
mod ext;
mod info;
mod record;

pub use counters::Counters;
pub use dump::{Entry, EntryTuple};
pub(crate) use event::Events;
pub use event::{EventKind, EventSink};
pub use ext::Ext;
pub(crate) use ext::{First, Setup};
pub use info::ConnInfo;
pub use record::Conn;
pub(crate) use record::{DNAT, Kind, SNAT};
