//! Per-direction packet and byte counts.

/// Packet and byte counts of one direction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Counters {
    /// Packets.
    pub packets: u64,
    /// Bytes of IP datagrams (IP header included, link layer excluded), as
    /// Linux's `nf_conntrack_acct` counts them.
    pub bytes: u64,
}
