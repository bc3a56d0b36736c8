//! What a packet does to an existing connection.

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
