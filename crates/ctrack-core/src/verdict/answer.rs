//! The tracker's answer for one packet, and why a commit stored nothing.

use crate::key::{ConnId, Dir, Zone};
use crate::verdict::{CtState, InvalidReason};

/// Why a commit did not store a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
pub enum Refusal {
    /// The table holds `max_conns` connections and none could be evicted.
    TableFull,
    /// The zone holds its limit and none could be evicted.
    ZoneLimit,
    /// Address translation found no free tuple in its range (the bounded
    /// search of [`crate::nat`] saw only tuples in use). The packet is
    /// untranslated and `new`; a firewall drops it, as Linux does.
    NatExhausted,
    /// The connection's reply tuple is already another connection's: a
    /// translated connection's original tuple, whose own replies go to
    /// its translated address. Two connections of one tuple would leave
    /// it to the lookup to pick one; Linux refuses such a clash when it
    /// confirms the newcomer, and so does this. The packet is `new`; a
    /// firewall drops it.
    Clash,
}

/// The tracker's answer for one packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Verdict {
    /// `ct_state`.
    pub state: CtState,
    /// Zone the packet was tracked in.
    pub zone: Zone,
    /// The connection's mark (0 without a connection).
    pub mark: u32,
    /// The connection's label (0 without a connection, and for a packet
    /// of a connection that is not `+new`, an ICMP error about one aside,
    /// looked up with [`CtAction::skip_label`](crate::CtAction::skip_label)).
    pub label: u128,
    /// The connection, if the packet has one (found or just committed).
    pub conn: Option<ConnId>,
    /// Direction of the packet in `conn`.
    pub dir: Dir,
    /// Why the packet is invalid, when it is.
    pub invalid: Option<InvalidReason>,
    /// Why a commit stored nothing, when it did not.
    pub refused: Option<Refusal>,
    /// True if this packet committed `conn`.
    pub committed: bool,
    /// The caller's word kept with `conn` (0: none; see
    /// [`crate::CtAction::word`] and [`crate::Tracker::set_word`]), read
    /// with the rest of the record. For an ICMP error, its connection's;
    /// for the first packet of a connection an expectation lets in (`new`
    /// and `rel`) that gets no connection of its own (no `commit`, or a
    /// refused one): its control connection's.
    pub word: u64,
    /// The connection has a gateway or was expected: the packet goes to
    /// the gateway stage.
    pub(crate) inspect: bool,
}

impl Verdict {
    pub(crate) fn new(zone: Zone) -> Verdict {
        Verdict {
            zone,
            ..Verdict::default()
        }
    }

    pub(crate) fn invalid(zone: Zone, reason: InvalidReason) -> Verdict {
        Verdict {
            state: CtState::INV | CtState::TRK,
            invalid: Some(reason),
            ..Verdict::new(zone)
        }
    }
}
