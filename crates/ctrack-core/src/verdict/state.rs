//! The per-packet connection-tracking state, `ct_state`, with the bit
//! meanings and print order of Open vSwitch (`CS_*`).

use core::fmt;

bitflags::bitflags! {
    /// What the tracker says of one packet.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
    pub struct CtState: u8 {
        /// Start of a new connection (committed or not).
        const NEW = 1 << 0;
        /// Part of an established connection: packets were seen both ways.
        const EST = 1 << 1;
        /// Related to an existing connection (an ICMP error quoting it, or an
        /// expected data connection).
        const REL = 1 << 2;
        /// Travels in the reply direction.
        const RPL = 1 << 3;
        /// Invalid: malformed, out of window, or impossible in its state.
        const INV = 1 << 4;
        /// Went through the tracker.
        const TRK = 1 << 5;
        /// The connection's source is translated.
        const SNAT = 1 << 6;
        /// The connection's destination is translated.
        const DNAT = 1 << 7;
    }
}

const NAMES: [&str; 8] = ["new", "est", "rel", "rpl", "inv", "trk", "snat", "dnat"];

impl CtState {
    /// The flag names in print order.
    pub fn names(self) -> impl Iterator<Item = &'static str> {
        (0..8)
            .filter(move |i| self.bits() & (1 << i) != 0)
            .map(|i| NAMES[i])
    }
}

impl fmt::Display for CtState {
    /// `new|trk`, flags in bit order joined by `|`; `0` when none is set.
    /// Exactly what `ovstest test-conntrack pcap` prints.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_empty() {
            return f.write_str("0");
        }
        for (i, name) in self.names().enumerate() {
            if i > 0 {
                f.write_str("|")?;
            }
            f.write_str(name)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prints_like_ovs() {
        assert_eq!(CtState::empty().to_string(), "0");
        assert_eq!((CtState::NEW | CtState::TRK).to_string(), "new|trk");
        assert_eq!((CtState::TRK | CtState::INV).to_string(), "inv|trk");
        assert_eq!(
            (CtState::EST | CtState::RPL | CtState::TRK).to_string(),
            "est|rpl|trk"
        );
        assert_eq!(
            (CtState::REL | CtState::RPL | CtState::TRK).to_string(),
            "rel|rpl|trk"
        );
        assert_eq!(
            CtState::all().to_string(),
            "new|est|rel|rpl|inv|trk|snat|dnat"
        );
    }
}
