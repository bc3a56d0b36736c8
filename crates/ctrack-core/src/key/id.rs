//! Numbers that name connections and zone instances in the table.

use ctrack_table::RecordId;

use super::conn_key::{Family, Zone};

/// The table's zone-instance number of a zone generation.
#[inline]
pub(crate) fn instance(zone: Zone, generation: u32) -> u64 {
    (u64::from(zone) << 32) | u64::from(generation)
}

/// A connection's number while it lives: its family and its place in the
/// table. Once the connection is gone, a later one may get the same id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ConnId(u32);

const V6_BIT: u32 = 1 << 31;

impl ConnId {
    pub(crate) fn new(family: Family, id: RecordId) -> ConnId {
        ConnId(
            id.as_u32()
                | match family {
                    Family::V4 => 0,
                    Family::V6 => V6_BIT,
                },
        )
    }

    /// The family of the connection.
    pub fn family(self) -> Family {
        if self.0 & V6_BIT != 0 {
            Family::V6
        } else {
            Family::V4
        }
    }

    pub(crate) fn record(self) -> RecordId {
        RecordId::from_u32(self.0 & !V6_BIT)
    }

    /// The id as a number (for printing).
    pub fn as_u64(self) -> u64 {
        u64::from(self.0)
    }
}
