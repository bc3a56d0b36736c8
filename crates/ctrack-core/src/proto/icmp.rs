//! ICMP and ICMPv6 query tracking (echo, timestamp, information): a request
//! and its replies, matched by identifier.

use crate::proto::Update;
use crate::zone::Timeout;

/// State of an ICMP query exchange.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum IcmpState {
    /// Requests seen, no reply yet.
    #[default]
    First,
    /// A reply was seen.
    Reply,
}

impl IcmpState {
    /// The state stored as `v` (`First` for 0).
    #[inline]
    pub fn from_u8(v: u8) -> IcmpState {
        if v == 0 {
            IcmpState::First
        } else {
            IcmpState::Reply
        }
    }

    /// The timeout class of the state.
    pub fn timeout(self) -> Timeout {
        match self {
            IcmpState::First => Timeout::IcmpFirst,
            IcmpState::Reply => Timeout::IcmpReply,
        }
    }

    /// A name for dumps.
    pub fn name(self) -> &'static str {
        match self {
            IcmpState::First => "FIRST",
            IcmpState::Reply => "REPLY",
        }
    }

    /// Moves the state for a message in direction `reply`: `new` until a
    /// reply is seen, `est` after.
    pub fn update(&mut self, reply: bool) -> (Update, Option<Timeout>) {
        let verdict = if reply && *self == IcmpState::First {
            *self = IcmpState::Reply;
            Update::Valid
        } else if *self == IcmpState::First {
            Update::ValidNew
        } else {
            Update::Valid
        };
        (verdict, Some(self.timeout()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transitions() {
        let mut s = IcmpState::First;
        assert_eq!(
            s.update(false),
            (Update::ValidNew, Some(Timeout::IcmpFirst))
        );
        assert_eq!(s.update(true), (Update::Valid, Some(Timeout::IcmpReply)));
        assert_eq!(s, IcmpState::Reply);
        assert_eq!(s.update(false), (Update::Valid, Some(Timeout::IcmpReply)));
        assert_eq!(s.update(true), (Update::Valid, Some(Timeout::IcmpReply)));
    }
}
