//! What few connections need: the extension allocated on first use, and what a new connection starts with.

use core::sync::atomic::Ordering::Relaxed;
use std::sync::atomic::AtomicU64;

use crate::key::{Addr, Tuple};
use crate::proto::ProtoState;

/// What few connections need, allocated on first use: the label, a
/// translated connection's reply tuple, a gateway or an expectation's
/// master.
///
/// 40 bytes for IPv4, so that the allocator gives it 48 (64 bytes, as it
/// was with the reply tuple and the master each an `Option` inline, took
/// 80 a connection: `ctrack bench memory --label`).
#[derive(Debug)]
pub struct Ext<A> {
    /// The 128-bit label, as two halves (high, low).
    label: [AtomicU64; 2],
    /// The reply tuple: the reverse of the original one unless the
    /// connection is translated.
    reply: Tuple<A>,
    /// A gateway's control connection's helper, or the control
    /// connection an expected one came from; boxed again: few
    /// connections have either.
    special: Option<Box<Special<A>>>,
}

/// What a gateway's control connection or an expected connection keeps
/// (never both: an expected connection gets no gateway of its own).
#[derive(Debug)]
enum Special<A> {
    /// The application-layer gateway watching this control connection,
    /// boxed: its state is large, and this enum is what an expected
    /// connection allocates too.
    Gateway(Box<crate::alg::helper::Helper>),
    /// For a connection an expectation let in: the original tuple of the
    /// control connection that expected it.
    Expected(Tuple<A>),
}

impl<A: Addr> Ext<A> {
    /// An extension with label 0, reply tuple `reply`, and the gateway or
    /// the master given (a gateway wins: the two never come together).
    pub(crate) fn new(
        reply: Tuple<A>,
        helper: Option<crate::alg::helper::Helper>,
        master: Option<Tuple<A>>,
    ) -> Ext<A> {
        let special = match (helper, master) {
            (Some(h), _) => Some(Special::Gateway(Box::new(h))),
            (None, Some(m)) => Some(Special::Expected(m)),
            (None, None) => None,
        };
        Ext {
            label: Default::default(),
            reply,
            special: special.map(Box::new),
        }
    }

    /// The label.
    pub fn label(&self) -> u128 {
        (u128::from(self.label[0].load(Relaxed)) << 64) | u128::from(self.label[1].load(Relaxed))
    }

    pub(super) fn set_label(&self, v: u128) {
        self.label[0].store((v >> 64) as u64, Relaxed);
        self.label[1].store(v as u64, Relaxed);
    }

    /// The reply tuple (the reverse of the original one unless
    /// translated).
    pub fn reply(&self) -> Tuple<A> {
        self.reply
    }

    /// The reply tuple if it is not the reverse of `orig`, the
    /// connection's original tuple: a translated connection's, which has
    /// an index entry of its own.
    pub fn own_reply(&self, orig: &Tuple<A>) -> Option<Tuple<A>> {
        (self.reply != orig.reverse()).then_some(self.reply)
    }

    /// For a connection an expectation let in: the original tuple of the
    /// control connection that expected it.
    pub fn master(&self) -> Option<Tuple<A>> {
        match self.special.as_deref() {
            Some(Special::Expected(m)) => Some(*m),
            _ => None,
        }
    }

    /// The application-layer gateway watching this (control) connection.
    pub(crate) fn helper(&self) -> Option<&crate::alg::helper::Helper> {
        match self.special.as_deref() {
            Some(Special::Gateway(h)) => Some(h),
            _ => None,
        }
    }
}

/// What a new connection starts with besides its key.
#[derive(Debug)]
pub(crate) struct Setup<A> {
    /// The translated reply tuple, if translated.
    pub reply: Option<Tuple<A>>,
    /// [`SNAT`] and [`DNAT`] bits.
    pub nat: u8,
    /// A gateway to run on its packets.
    pub helper: Option<crate::alg::helper::Helper>,
    /// The control connection that expected it.
    pub master: Option<Tuple<A>>,
    /// The caller's word (0: none).
    pub word: u64,
    /// The label it starts with (an expectation's, then the commit's).
    pub label: u128,
}

impl<A> Default for Setup<A> {
    fn default() -> Self {
        Setup {
            reply: None,
            nat: 0,
            helper: None,
            master: None,
            word: 0,
            label: 0,
        }
    }
}

/// A new connection's first packet: the protocol state it opens, whether
/// it counts against its zone's limit, when it came, and its IP length.
#[derive(Debug, Clone, Copy)]
pub(crate) struct First {
    pub proto: ProtoState,
    pub counted: bool,
    pub now: u64,
    pub bytes: u32,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::V6;

    #[test]
    fn sizes() {
        // What an expected connection or a gateway's control connection
        // allocates besides the extension: 32 bytes with the header.
        assert_eq!(core::mem::size_of::<Special<u32>>(), 24);
        assert_eq!(core::mem::size_of::<Special<V6>>(), 48);
    }

    #[test]
    fn own_reply_only_when_translated() {
        let orig = Tuple::<u32> {
            src: 1,
            dst: 2,
            src_l4: 3 << 16,
            dst_l4: 4 << 16,
        };
        let plain = Ext::new(orig.reverse(), None, None);
        assert_eq!(plain.reply(), orig.reverse());
        assert_eq!(plain.own_reply(&orig), None);
        assert_eq!(plain.master(), None);
        let translated = Tuple {
            dst: 9,
            ..orig.reverse()
        };
        let nat = Ext::new(translated, None, Some(orig));
        assert_eq!(nat.own_reply(&orig), Some(translated));
        assert_eq!(nat.master(), Some(orig));
        assert!(nat.helper().is_none());
    }
}
