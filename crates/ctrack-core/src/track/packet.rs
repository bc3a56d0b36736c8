//! A packet on its way through the tracker, and what a burst keeps between packets.

use ctrack_table::{EntryRef, Guard, Hint};

use crate::action::CtAction;
use crate::conn::Conn;
use crate::key::{Addr, Dir, LookupKey, Tuple, V6};
use crate::packet::fast::{Fast, fast_ipv4_inline, fast_ipv6_inline};
use crate::packet::{Extracted, L4Info};
use crate::time::Time;
use crate::verdict::Stats;
use crate::zone::Compiled;

/// What one call into the tracker carries through its steps: the pinned
/// epoch, the action, the time, and the counters of the calling worker
/// (owned by the caller: the core keeps none).
#[derive(Debug)]
pub(super) struct Call<'a> {
    pub(super) guard: &'a Guard,
    pub(super) action: &'a CtAction,
    pub(super) now: Time,
    pub(super) stats: &'a mut Stats,
}

/// A packet ready for lookup in the table of family `A`.
#[derive(Debug, Clone, Copy)]
pub(super) struct Pkt<A> {
    pub(super) tuple: Tuple<A>,
    pub(super) proto: u8,
    /// An ICMP error: `tuple` is the quoted packet's, reversed.
    pub(super) related: bool,
    pub(super) l4: L4Info,
    pub(super) ip_len: u32,
}

impl<A: Addr> Pkt<A> {
    pub(super) fn of(ex: &Extracted) -> Pkt<A> {
        Pkt {
            tuple: Tuple::of(&ex.key),
            proto: ex.key.proto,
            related: ex.related,
            l4: ex.l4,
            ip_len: ex.ip_len,
        }
    }
}

impl<A: Addr> Pkt<A> {
    /// A packet a fast path read.
    #[inline]
    pub(super) fn fast(f: &Fast<A>) -> Pkt<A> {
        Pkt {
            tuple: f.tuple,
            proto: f.proto,
            related: false,
            l4: f.l4,
            ip_len: f.ip_len,
        }
    }
}

impl Pkt<u32> {
    /// Reads `frame` on the IPv4 fast path into `slot`, with a hash of 0
    /// for the caller to set; false, and `slot` as it was, where the fast
    /// path does not take the frame. (Built in place: returning the
    /// packet and storing it cost about 25 instructions a packet in
    /// copies, callgrind on `bench cps`.)
    #[inline(never)]
    pub(super) fn read_fast(
        frame: &[u8],
        checksums: bool,
        slot: &mut Option<(Pkt<u32>, u64)>,
    ) -> bool {
        match fast_ipv4_inline(frame, checksums) {
            Some(f) => {
                *slot = Some((Pkt::fast(&f), 0));
                true
            }
            None => false,
        }
    }
}

impl Pkt<V6> {
    /// [`Pkt::read_fast`] for the IPv6 fast path: built in place too.
    /// Returned and stored (as it was), the larger IPv6 packet cost about
    /// 50 instructions a packet in copies (callgrind, `bench lookup
    /// --ipv6`).
    #[inline(never)]
    pub(super) fn read_fast6(
        frame: &[u8],
        checksums: bool,
        slot: &mut Option<(Pkt<V6>, u64)>,
    ) -> bool {
        match fast_ipv6_inline(frame, checksums) {
            Some(f) => {
                *slot = Some((Pkt::fast(&f), 0));
                true
            }
            None => false,
        }
    }
}

/// What a burst worked out for a packet before judging it.
#[derive(Debug, Clone, Copy)]
pub(super) struct Pre<'g, A: Addr> {
    pub(super) generation: u32,
    pub(super) hash: u64,
    pub(super) hint: Hint<'g, Conn<A>>,
    pub(super) policy: &'g Compiled,
}

/// What judging a packet against its connection came to.
pub(super) enum Judged {
    /// The verdict is written.
    Done,
    /// The connection was removed (or expired) meanwhile: look again.
    Lost,
    /// The packet ends the connection and opens a new one in its place.
    Reopen,
}

/// The connection of the previous packet of a burst.
pub(super) struct Hit<'g, A: Addr> {
    pub(super) key: LookupKey<A>,
    pub(super) entry: EntryRef<'g, Conn<A>>,
    pub(super) dir: Dir,
}

/// A connection found for a packet, and the packet's direction in it
/// (`None`: the packet has no connection to remember).
pub(super) type Found<'g, A> = Option<(EntryRef<'g, Conn<A>>, Dir)>;

/// A burst's cache of its last connection, per family.
#[derive(Default)]
pub(super) struct Cache<'g> {
    pub(super) v4: Option<Hit<'g, u32>>,
    pub(super) v6: Option<Hit<'g, V6>>,
}
