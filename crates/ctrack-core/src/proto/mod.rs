//! Per-protocol trackers. Each has the same three parts: may this packet
//! create a connection, the state of a new connection, and how a packet
//! moves an existing one (with the timeout class to apply).

pub mod icmp;
pub mod other;
pub mod tcp;

pub use icmp::IcmpState;
pub use other::OtherState;
pub use tcp::{TcpConn, TcpState};

use crate::timeout::Timeout;

/// What a packet does to an existing connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Update {
    /// Accepted; the connection has seen both directions (`est`).
    Valid,
    /// Accepted, but the connection is still opening (`new`).
    ValidNew,
    /// Refused (`inv`); the connection is unchanged but for what the
    /// protocol's checks recorded.
    Invalid,
    /// The packet starts a new connection in place of this one, which is
    /// over (a SYN after both sides closed).
    New,
}

/// The protocol part of a connection's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProtoState {
    /// TCP with both sides' sequence windows.
    Tcp(TcpConn),
    /// ICMP or ICMPv6 query.
    Icmp(IcmpState),
    /// Any other protocol.
    Other(OtherState),
}

impl ProtoState {
    /// The timeout class of the state, as a fresh connection would get.
    pub fn initial_timeout(&self) -> Timeout {
        match self {
            ProtoState::Tcp(_) => Timeout::TcpFirstPacket,
            ProtoState::Icmp(s) => s.timeout(),
            ProtoState::Other(s) => s.timeout(),
        }
    }

    /// The state name a dump prints (`protoinfo=(state=...)` for TCP).
    pub fn state_name(&self) -> &'static str {
        match self {
            ProtoState::Tcp(c) => c.display_state().name(),
            ProtoState::Icmp(s) => s.name(),
            ProtoState::Other(s) => s.name(),
        }
    }

    /// True if the connection counts as established (both directions seen;
    /// for TCP, both sides established and not closing). Eviction spares
    /// these.
    pub fn is_established(&self) -> bool {
        match self {
            ProtoState::Tcp(c) => c.is_established(),
            ProtoState::Icmp(s) => *s == IcmpState::Reply,
            ProtoState::Other(s) => *s == OtherState::Bidir,
        }
    }
}
