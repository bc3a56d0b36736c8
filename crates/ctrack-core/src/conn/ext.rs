//! What few connections need: the extension allocated on first use, and what a new connection starts with.

use core::sync::atomic::Ordering::Relaxed;
use std::sync::atomic::AtomicU64;

use crate::key::Tuple;
use crate::proto::ProtoState;

#[derive(Debug, Default)]
pub struct Ext<A> {
    /// The 128-bit label, as two halves (high, low).
    pub(super) label: [AtomicU64; 2],
    /// The reply tuple when it is not the reverse of the original one
    /// (address translation).
    pub reply: Option<Tuple<A>>,
    /// The application-layer gateway watching this (control) connection,
    /// boxed: few connections have one, and inline it would take the
    /// extension of every translated connection from one cache line to
    /// four.
    pub(crate) helper: Option<Box<crate::alg::helper::Helper>>,
    /// For a connection an expectation let in: the original tuple of the
    /// control connection that expected it.
    pub master: Option<Tuple<A>>,
}

impl<A> Ext<A> {
    /// The label.
    pub fn label(&self) -> u128 {
        (u128::from(self.label[0].load(Relaxed)) << 64) | u128::from(self.label[1].load(Relaxed))
    }

    pub(super) fn set_label(&self, v: u128) {
        self.label[0].store((v >> 64) as u64, Relaxed);
        self.label[1].store(v as u64, Relaxed);
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
}

impl<A> Default for Setup<A> {
    fn default() -> Self {
        Setup {
            reply: None,
            nat: 0,
            helper: None,
            master: None,
            word: 0,
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
