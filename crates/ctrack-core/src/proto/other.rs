//! Three-state tracking for protocols without a state machine of their own
//! here (UDP, UDP-Lite, SCTP, and any other IP protocol): first packet,
//! several packets one way, packets both ways.

use crate::proto::Update;
use crate::zone::Timeout;

/// State of a connection of a protocol without its own tracker.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum OtherState {
    /// Only the first packet seen.
    #[default]
    First,
    /// More packets, all in the original direction.
    Multiple,
    /// Packets seen in both directions.
    Bidir,
}

impl OtherState {
    /// The state stored as `v`.
    #[inline]
    pub fn from_u8(v: u8) -> OtherState {
        match v {
            0 => OtherState::First,
            1 => OtherState::Multiple,
            _ => OtherState::Bidir,
        }
    }

    /// The timeout class of the state.
    pub fn timeout(self) -> Timeout {
        match self {
            OtherState::First => Timeout::OtherFirst,
            OtherState::Multiple => Timeout::OtherMultiple,
            OtherState::Bidir => Timeout::OtherBidir,
        }
    }

    /// A name for dumps.
    pub fn name(self) -> &'static str {
        match self {
            OtherState::First => "FIRST",
            OtherState::Multiple => "MULTIPLE",
            OtherState::Bidir => "BIDIR",
        }
    }

    /// Moves the state for a packet in direction `reply`. The connection is
    /// `est` once a reply was seen, `new` until then.
    pub fn update(&mut self, reply: bool) -> (Update, Option<Timeout>) {
        if reply && *self != OtherState::Bidir {
            *self = OtherState::Bidir;
        } else if *self == OtherState::First {
            *self = OtherState::Multiple;
        }
        let verdict = if *self == OtherState::Bidir {
            Update::Valid
        } else {
            Update::ValidNew
        };
        (verdict, Some(self.timeout()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transitions() {
        // (start, reply, end, verdict)
        let cases = [
            (
                OtherState::First,
                false,
                OtherState::Multiple,
                Update::ValidNew,
            ),
            (OtherState::First, true, OtherState::Bidir, Update::Valid),
            (
                OtherState::Multiple,
                false,
                OtherState::Multiple,
                Update::ValidNew,
            ),
            (OtherState::Multiple, true, OtherState::Bidir, Update::Valid),
            (OtherState::Bidir, false, OtherState::Bidir, Update::Valid),
            (OtherState::Bidir, true, OtherState::Bidir, Update::Valid),
        ];
        for (start, reply, end, verdict) in cases {
            let mut s = start;
            let (v, t) = s.update(reply);
            assert_eq!(
                (s, v, t),
                (end, verdict, Some(end.timeout())),
                "{start:?} {reply}"
            );
        }
    }
}
