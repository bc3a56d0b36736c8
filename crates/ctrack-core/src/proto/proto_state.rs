//! The protocol part of a connection's state.

use crate::proto::{IcmpState, OtherState, TcpConn};
use crate::zone::Timeout;

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
