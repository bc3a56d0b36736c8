//! A tracked connection: its two keys, protocol state, expiry, mark, label
//! and counters.

use crate::key::ConnKey;
use crate::proto::ProtoState;
use crate::time::Time;

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

impl Counters {
    /// Counts one packet of `bytes` bytes.
    #[inline]
    pub fn add(&mut self, bytes: u32) {
        self.packets += 1;
        self.bytes += u64::from(bytes);
    }
}

/// Direction of a packet within its connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "lowercase"))]
pub enum Dir {
    /// The direction of the packet that created the connection.
    Orig,
    /// The other direction.
    Reply,
}

impl Dir {
    /// 0 for original, 1 for reply: the index into per-direction arrays.
    #[inline]
    pub fn index(self) -> usize {
        self as usize
    }

    /// True for the reply direction.
    #[inline]
    pub fn is_reply(self) -> bool {
        self == Dir::Reply
    }
}

/// One connection.
#[derive(Debug, Clone, PartialEq)]
pub struct Conn {
    /// `[original, reply]` keys. Without address translation the reply key
    /// is the reverse of the original.
    pub keys: [ConnKey; 2],
    /// Protocol state.
    pub proto: ProtoState,
    /// When the connection expires; at or after this time it is absent.
    pub expiration: Time,
    /// 32-bit mark.
    pub mark: u32,
    /// 128-bit label.
    pub label: u128,
    /// `[original, reply]` counters.
    pub counters: [Counters; 2],
    /// When the connection was committed.
    pub created: Time,
}

impl Conn {
    /// A connection whose original direction is `key`, with the reply key
    /// its reverse.
    pub fn new(key: ConnKey, proto: ProtoState, now: Time, expiration: Time) -> Conn {
        Conn {
            keys: [key, key.reverse()],
            proto,
            expiration,
            mark: 0,
            label: 0,
            counters: [Counters::default(); 2],
            created: now,
        }
    }

    /// True if the connection has expired at `now`.
    #[inline]
    pub fn is_expired(&self, now: Time) -> bool {
        now >= self.expiration
    }

    /// The direction `key` travels in this connection, if it is one of its
    /// keys.
    #[inline]
    pub fn direction_of(&self, key: &ConnKey) -> Option<Dir> {
        if self.keys[0] == *key {
            Some(Dir::Orig)
        } else if self.keys[1] == *key {
            Some(Dir::Reply)
        } else {
            None
        }
    }

    /// The reply key is not simply the reverse of the original (address
    /// translation): it needs an index entry of its own.
    #[inline]
    pub fn reply_key_differs(&self) -> bool {
        self.keys[1] != self.keys[0].reverse()
    }
}
