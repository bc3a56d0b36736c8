//! A snapshot of one connection.

use crate::conn::Entry;
use crate::proto::ProtoState;
use crate::time::Time;

/// A snapshot of one connection.
#[derive(Debug, Clone, PartialEq)]
pub struct ConnInfo {
    /// The connection as a dump shows it.
    pub entry: Entry,
    /// Its protocol state.
    pub proto: ProtoState,
    /// When it expires.
    pub expires: Time,
    /// The caller's word (see [`crate::Tracker::set_word`]); not part of
    /// [`Entry`], so dumps show it nowhere.
    pub word: u64,
}
