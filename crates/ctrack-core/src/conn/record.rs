//! A tracked connection as the table stores it: 128 bytes for IPv4 (two
//! cache lines), 152 for IPv6, the table's header included.
//!
//! The fields are laid out in order (`repr(C)`), so that the first cache
//! line of an IPv4 record holds all a lookup and a verdict read: the
//! entry lock, the key, the flags and last-seen time (expiry), the mark and
//! the caller's word; the second holds what judging a packet writes
//! besides (protocol state, counters) and the extension pointer.
//!
//! The key fields are fixed while the connection lives. Everything a packet
//! changes (protocol state, last-seen time and timeout class, counters,
//! mark) is a relaxed atomic written under the connection's entry lock, so
//! that a lock-free reader (an expiry check, a dump) reads a value that is
//! old or new but never torn per field. Rarely used data (label, and the
//! translated reply tuple once NAT exists) lives in an extension allocated
//! on first use.

use core::sync::atomic::{AtomicU8, AtomicU32, AtomicU64, Ordering::Relaxed};

use ctrack_table::{EpochBox, Guard, Header, Record, Retired};
use ctrack_wire::ip_proto;

use crate::conn::{Counters, Ext, First, Setup};
use crate::key::{Addr, Dir, LookupKey, Tuple, instance};
use crate::key::{Family, Zone};
use crate::proto::tcp::{self, Peer, TcpConn, TcpState};
use crate::proto::{IcmpState, OtherState, ProtoState};
use crate::zone::Timeout;

/// Bits of [`Conn::flags`]: the timeout class in the low nibble, then:
const COUNTED: u8 = 0x10;
/// The connection's source is translated (in the original direction).
pub(crate) const SNAT: u8 = 0x20;
/// The connection's destination is translated.
pub(crate) const DNAT: u8 = 0x40;
/// The connection has a gateway or was expected: see its extension.
pub(crate) const SPECIAL: u8 = 0x80;
const CLASS_MASK: u8 = 0x0f;

/// One connection.
#[derive(Debug, Default)]
#[repr(C)]
pub struct Conn<A: Addr> {
    header: Header,
    orig: Tuple<A>,
    generation: u32,
    zone: Zone,
    proto: u8,
    flags: AtomicU8,
    mark: AtomicU32,
    last_seen: AtomicU64,
    /// A word the caller keeps with the connection, e.g. a firewall's
    /// cached verdict and policy generation (0: none). Opaque to the core.
    word: AtomicU64,
    state: [AtomicU32; 6],
    /// Packets and bytes, original then reply.
    counters: [AtomicU64; 4],
    ext: EpochBox<Ext<A>>,
}

impl<A: Addr> Record for Conn<A> {
    #[inline]
    fn header(&self) -> &Header {
        &self.header
    }

    fn retire(&self, retired: &mut Retired) {
        self.ext.retire_into(retired);
    }
}

/// The protocol tracker a connection uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Tcp,
    Icmp,
    Other,
}

#[inline]
pub(crate) fn kind_of(family: Family, proto: u8) -> Kind {
    match (family, proto) {
        (_, ip_proto::TCP) => Kind::Tcp,
        (Family::V4, ip_proto::ICMP) | (Family::V6, ip_proto::ICMPV6) => Kind::Icmp,
        _ => Kind::Other,
    }
}

impl<A: Addr> Conn<A> {
    /// Fills a vacant slot with a new connection (exclusive access): its
    /// key, its first packet's state, count and time, and its set-up.
    pub(crate) fn init(&mut self, key: &LookupKey<A>, first: &First, setup: &mut Setup<A>) {
        let First {
            proto,
            counted,
            now,
            bytes: first_bytes,
        } = *first;
        let class = proto.initial_timeout();
        self.orig = key.tuple;
        self.generation = key.generation;
        self.zone = key.zone;
        self.proto = key.proto;
        let special = setup.helper.is_some() || setup.master.is_some();
        self.flags.store(
            class as u8
                | if counted { COUNTED } else { 0 }
                | (setup.nat & (SNAT | DNAT))
                | if special { SPECIAL } else { 0 },
            Relaxed,
        );
        self.mark.store(0, Relaxed);
        self.word.store(setup.word, Relaxed);
        self.set_proto_state(&proto);
        self.last_seen.store(now, Relaxed);
        self.counters[0].store(1, Relaxed);
        self.counters[1].store(u64::from(first_bytes), Relaxed);
        self.counters[2].store(0, Relaxed);
        self.counters[3].store(0, Relaxed);
        let reply = setup.reply.filter(|r| *r != key.tuple.reverse());
        // What `Shared::hashes` relies on: a reply tuple of its own only
        // with a translation bit.
        debug_assert!(reply.is_none() || setup.nat & (SNAT | DNAT) != 0);
        // Made with its label, in one allocation (set after, the label
        // took a second step through `EpochBox::get_or_init`'s
        // compare-exchange: about 90 instructions a connection, `bench cps`
        // with labels under callgrind).
        self.ext
            .set((reply.is_some() || special || setup.label != 0).then(|| {
                let reply = reply.unwrap_or_else(|| key.tuple.reverse());
                let x = Ext::new(reply, setup.helper.take(), setup.master);
                x.set_label(setup.label);
                Box::new(x)
            }));
    }

    /// Its [`SNAT`] and [`DNAT`] bits.
    #[inline]
    pub(crate) fn nat_bits(&self) -> u8 {
        self.flags.load(Relaxed) & (SNAT | DNAT)
    }

    /// True if it has a gateway or was expected.
    #[inline]
    pub(crate) fn special(&self) -> bool {
        self.flags.load(Relaxed) & SPECIAL != 0
    }

    /// True if an expectation let it in (every packet is `rel`).
    pub(crate) fn expected(&self, guard: &Guard) -> bool {
        self.special() && self.ext(guard).is_some_and(|e| e.master().is_some())
    }

    /// The original-direction tuple.
    #[inline]
    pub fn orig(&self) -> &Tuple<A> {
        &self.orig
    }

    /// The zone.
    #[inline]
    pub fn zone(&self) -> Zone {
        self.zone
    }

    /// The zone generation the connection was created in.
    #[inline]
    pub fn generation(&self) -> u32 {
        self.generation
    }

    /// The IP protocol.
    #[inline]
    pub fn proto(&self) -> u8 {
        self.proto
    }

    #[inline]
    pub(crate) fn kind(&self) -> Kind {
        kind_of(A::FAMILY, self.proto)
    }

    /// The zone instance the table files the connection under.
    #[inline]
    pub(crate) fn instance(&self) -> u64 {
        instance(self.zone, self.generation)
    }

    /// The extension, if one was allocated.
    pub fn ext<'g>(&self, guard: &'g Guard) -> Option<&'g Ext<A>> {
        self.ext.get(guard)
    }

    /// Asks the processor to fetch the extension (where a translated
    /// connection keeps its reply tuple, and the label), if it has one.
    #[inline]
    pub(crate) fn prefetch_ext(&self) {
        self.ext.prefetch();
    }

    /// True if the connection has an extension (a label, a reply tuple
    /// of its own, a gateway or a master).
    pub(crate) fn has_ext(&self) -> bool {
        self.ext.is_set()
    }

    /// The reply tuple.
    pub fn reply(&self, guard: &Guard) -> Tuple<A> {
        self.ext(guard)
            .map_or_else(|| self.orig.reverse(), Ext::reply)
    }

    /// The direction `key` travels in this connection, if it belongs to it.
    #[inline]
    pub(crate) fn direction_of(&self, key: &LookupKey<A>, guard: &Guard) -> Option<Dir> {
        if self.zone != key.zone || self.proto != key.proto || self.generation != key.generation {
            return None;
        }
        if self.orig == key.tuple {
            return Some(Dir::Orig);
        }
        // Only a translated connection keeps a reply tuple of its own: one
        // whose extension holds a label or a gateway alone is not fetched
        // it (a dependent load a reply packet).
        let reply = match self.nat_bits() {
            0 => self.orig.reverse(),
            _ => match self.ext.get(guard) {
                Some(e) => e.reply(),
                None => self.orig.reverse(),
            },
        };
        (reply == key.tuple).then_some(Dir::Reply)
    }

    /// When the connection was last refreshed (ms).
    #[inline]
    pub fn last_seen(&self) -> u64 {
        self.last_seen.load(Relaxed)
    }

    /// Its timeout class number (the low nibble of its flags).
    #[inline]
    pub(crate) fn class_bits(&self) -> u8 {
        self.flags.load(Relaxed)
    }

    /// Its timeout class.
    #[inline]
    pub fn class(&self) -> Timeout {
        Timeout::from_index(self.flags.load(Relaxed) & CLASS_MASK)
    }

    /// True if the connection counts against its zone's limit.
    pub(crate) fn counted(&self) -> bool {
        self.flags.load(Relaxed) & COUNTED != 0
    }

    /// Refreshes the timeout: last seen `now`, class `class`. Entry lock held.
    #[inline]
    pub(crate) fn refresh(&self, now: u64, class: Timeout) {
        self.last_seen.store(now, Relaxed);
        let f = self.flags.load(Relaxed);
        self.flags.store((f & !CLASS_MASK) | class as u8, Relaxed);
    }

    /// The mark.
    #[inline]
    pub fn mark(&self) -> u32 {
        self.mark.load(Relaxed)
    }

    /// Sets mark bits. Entry lock held.
    pub(crate) fn set_mark(&self, value: u32, mask: u32) {
        let m = self.mark.load(Relaxed);
        self.mark.store((m & !mask) | (value & mask), Relaxed);
    }

    /// The caller's word (0: none), as [`crate::CtAction::word`] or
    /// [`crate::Tracker::set_word`] last stored it. A relaxed load: the
    /// word orders nothing else.
    #[inline]
    pub fn word(&self) -> u64 {
        self.word.load(Relaxed)
    }

    /// Replaces the word with `new` if it is `old`; false if it was not.
    /// Needs no lock (one compare-exchange, ordering nothing else).
    pub(crate) fn cas_word(&self, old: u64, new: u64) -> bool {
        self.word
            .compare_exchange(old, new, Relaxed, Relaxed)
            .is_ok()
    }

    /// The label.
    pub fn label(&self, guard: &Guard) -> u128 {
        self.ext(guard).map_or(0, Ext::label)
    }

    /// Sets label bits. Entry lock held.
    pub(crate) fn set_label(&self, value: u128, mask: u128, guard: &Guard) {
        let old = self.label(guard);
        let new = (old & !mask) | (value & mask);
        if new == old {
            return;
        }
        let reply = self.orig.reverse();
        self.ext
            .get_or_init(guard, || Box::new(Ext::new(reply, None, None)))
            .set_label(new);
    }

    /// Counts a packet. Entry lock held.
    #[inline]
    pub(crate) fn count(&self, dir: Dir, bytes: u32) {
        self.count_many(dir, 1, u64::from(bytes));
    }

    /// Counts `packets` packets of `bytes` bytes in all, in direction
    /// `dir`. Entry lock held.
    #[inline]
    pub(crate) fn count_many(&self, dir: Dir, packets: u64, bytes: u64) {
        let i = dir.index() * 2;
        self.counters[i].store(self.counters[i].load(Relaxed) + packets, Relaxed);
        self.counters[i + 1].store(self.counters[i + 1].load(Relaxed) + bytes, Relaxed);
    }

    /// The counters of one direction.
    pub fn counters(&self, dir: Dir) -> Counters {
        let i = dir.index() * 2;
        Counters {
            packets: self.counters[i].load(Relaxed),
            bytes: self.counters[i + 1].load(Relaxed),
        }
    }

    /// The TCP state (of a TCP connection). Entry lock held for a
    /// consistent read.
    #[inline]
    pub(crate) fn tcp_state(&self) -> TcpConn {
        let w = |i: usize| self.state[i].load(Relaxed);
        let peer = |b: usize| {
            let misc = w(b + 2);
            Peer {
                seqlo: w(b),
                seqhi: w(b + 1),
                max_win: misc as u16,
                wscale: (misc >> 16) as u8,
                state: TcpState::from_index((misc >> 24) as u8),
            }
        };
        TcpConn {
            peers: [peer(0), peer(3)],
        }
    }

    /// The established fast path of [`tcp::update`] on the stored state,
    /// in place: for a segment of [`tcp::established_flags`] in direction
    /// `reply`, with both sides ESTABLISHED and the segment in the window,
    /// moves the window as the general path would and returns true;
    /// otherwise changes nothing and returns false (the caller then takes
    /// the general path). Reads the six state words once and stores only
    /// those the segment changed (one or two, where the general path's
    /// round trip through a [`TcpConn`] unpacked all six and stored them
    /// back). Entry lock held.
    ///
    /// Out of line, as `tcp::established`: it is called from the
    /// tracker's burst loops, which the firewall's callback makes large.
    #[inline(never)]
    pub(crate) fn tcp_established(&self, seg: &tcp::Segment, reply: bool) -> bool {
        const EST: u32 = TcpState::Established as u32;
        // Checked here again (the caller's test is inlined away): what the
        // window check may then leave out, the compiler knows.
        if !tcp::established_flags(seg.flags) {
            return false;
        }
        let (s, d) = if reply { (3, 0) } else { (0, 3) };
        let w = |i: usize| self.state[i].load(Relaxed);
        let (sm, dm) = (w(s + 2), w(d + 2));
        if sm >> 24 != EST || dm >> 24 != EST {
            return false;
        }
        let peer = |b: usize, misc: u32| Peer {
            seqlo: w(b),
            seqhi: w(b + 1),
            max_win: misc as u16,
            wscale: (misc >> 16) as u8,
            state: TcpState::Established,
        };
        let (src, dst) = (peer(s, sm), peer(d, dm));
        let Some((s2, d2)) = tcp::established_peers(src, dst, seg) else {
            return false;
        };
        // The window's advance moves these three, and only these.
        debug_assert_eq!(
            (s2.seqhi, s2.wscale, d2.seqlo, d2.max_win, d2.wscale),
            (src.seqhi, src.wscale, dst.seqlo, dst.max_win, dst.wscale)
        );
        if s2.seqlo != src.seqlo {
            self.state[s].store(s2.seqlo, Relaxed);
        }
        if s2.max_win != src.max_win {
            self.state[s + 2].store((sm & !0xffff) | u32::from(s2.max_win), Relaxed);
        }
        if d2.seqhi != dst.seqhi {
            self.state[d + 1].store(d2.seqhi, Relaxed);
        }
        true
    }

    /// Stores the TCP state. Entry lock held.
    #[inline]
    pub(crate) fn set_tcp_state(&self, t: &TcpConn) {
        for (b, p) in [(0, &t.peers[0]), (3, &t.peers[1])] {
            self.state[b].store(p.seqlo, Relaxed);
            self.state[b + 1].store(p.seqhi, Relaxed);
            self.state[b + 2].store(
                u32::from(p.max_win) | (u32::from(p.wscale) << 16) | ((p.state as u32) << 24),
                Relaxed,
            );
        }
    }

    /// The one-byte state of an ICMP or other connection.
    #[inline]
    pub(crate) fn small_state(&self) -> u8 {
        self.state[2].load(Relaxed) as u8
    }

    /// Stores the one-byte state. Entry lock held.
    #[inline]
    pub(crate) fn set_small_state(&self, v: u8) {
        self.state[2].store(u32::from(v), Relaxed);
    }

    /// The protocol state.
    pub fn proto_state(&self) -> ProtoState {
        let w = |i: usize| self.state[i].load(Relaxed);
        match self.kind() {
            Kind::Tcp => {
                let peer = |b: usize| {
                    let misc = w(b + 2);
                    Peer {
                        seqlo: w(b),
                        seqhi: w(b + 1),
                        max_win: misc as u16,
                        wscale: (misc >> 16) as u8,
                        state: TcpState::from_index((misc >> 24) as u8),
                    }
                };
                ProtoState::Tcp(TcpConn {
                    peers: [peer(0), peer(3)],
                })
            }
            Kind::Icmp => ProtoState::Icmp(if w(2) & 0xff == 0 {
                IcmpState::First
            } else {
                IcmpState::Reply
            }),
            Kind::Other => ProtoState::Other(match w(2) & 0xff {
                0 => OtherState::First,
                1 => OtherState::Multiple,
                _ => OtherState::Bidir,
            }),
        }
    }

    /// Stores the protocol state. Entry lock held (or exclusive access).
    pub(crate) fn set_proto_state(&self, s: &ProtoState) {
        let set = |i: usize, v: u32| self.state[i].store(v, Relaxed);
        match s {
            ProtoState::Tcp(t) => {
                for (b, p) in [(0, &t.peers[0]), (3, &t.peers[1])] {
                    set(b, p.seqlo);
                    set(b + 1, p.seqhi);
                    set(
                        b + 2,
                        u32::from(p.max_win)
                            | (u32::from(p.wscale) << 16)
                            | ((p.state as u32) << 24),
                    );
                }
            }
            ProtoState::Icmp(i) => set(2, *i as u32),
            ProtoState::Other(o) => set(2, *o as u32),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::V6;
    use crate::proto::{Update, tcp};
    use ctrack_wire::tcp::flags;

    #[test]
    fn a_connection_fits_its_memory_budget() {
        // The budget: at most 128 bytes per IPv4 connection (two cache
        // lines), the policy layer's verdict word included, so that the
        // table's index and slots stay within 136 B per connection. The
        // layout has no padding: IPv6 adds 3 x 2 address words.
        assert_eq!(core::mem::size_of::<Conn<u32>>(), 128);
        assert_eq!(core::mem::size_of::<Conn<V6>>(), 128 + 3 * 2 * 4);
        // The first cache line holds the lock, key, expiry, mark and word.
        assert_eq!(core::mem::offset_of!(Conn<u32>, word), 56);
        assert_eq!(core::mem::offset_of!(Conn<u32>, state), 64);
        // An extension takes 48 bytes of the allocator for IPv4 (80 for
        // IPv6): its own 40 (64) and a header, rounded up to 16.
        assert_eq!(core::mem::size_of::<Ext<u32>>(), 40);
        assert_eq!(core::mem::size_of::<Ext<V6>>(), 64);
    }

    #[test]
    fn v6_address_round_trip() {
        let a: u128 = 0x2001_0db8_0000_0000_0000_0000_0000_0001;
        assert_eq!(V6::from_u128(a).to_u128(), a);
        assert!(V6::from_u128(1) < V6::from_u128(1 << 100));
    }

    /// The key 1:3 -> 2:4 of `proto` in zone 5, in `generation`.
    fn key_of(proto: u8, generation: u32) -> LookupKey<u32> {
        LookupKey {
            tuple: Tuple {
                src: 1,
                dst: 2,
                src_l4: 3 << 16,
                dst_l4: 4 << 16,
            },
            zone: 5,
            proto,
            generation,
        }
    }

    #[test]
    fn proto_state_round_trips_through_the_atomics() {
        let mut c: Conn<u32> = Conn::default();
        let key = key_of(ip_proto::TCP, 0);
        let t = tcp::TcpConn {
            peers: [
                Peer {
                    seqlo: 10,
                    seqhi: 20,
                    max_win: 65535,
                    wscale: 0x87,
                    state: TcpState::Established,
                },
                Peer {
                    seqlo: 0xffff_fff0,
                    seqhi: 7,
                    max_win: 1,
                    wscale: 0x40,
                    state: TcpState::FinWait2,
                },
            ],
        };
        let first = First {
            proto: ProtoState::Tcp(t),
            counted: true,
            now: 9,
            bytes: 60,
        };
        c.init(&key, &first, &mut Setup::default());
        assert_eq!(c.proto_state(), ProtoState::Tcp(t));
        // A new connection's class is its protocol's first.
        assert_eq!(c.class(), Timeout::TcpFirstPacket);
        assert!(c.counted());
        c.refresh(11, Timeout::TcpClosing);
        assert_eq!((c.last_seen(), c.class()), (11, Timeout::TcpClosing));
        assert!(c.counted());
        assert_eq!(
            c.counters(Dir::Orig),
            Counters {
                packets: 1,
                bytes: 60
            }
        );
        c.count(Dir::Reply, 40);
        assert_eq!(c.counters(Dir::Reply).bytes, 40);
    }

    /// A key belongs to a connection only in its zone, protocol and
    /// generation all three, in the direction its tuple says. (Mutation
    /// round 50: with either `||` of the first test made `&&`, a key that
    /// differed in only one of them was taken for the connection's, and
    /// only the hash, which covers all three, kept the tests from meeting
    /// such a key in the same bucket.)
    #[test]
    fn a_key_belongs_in_its_zone_protocol_generation_and_tuple() {
        let mut c: Conn<u32> = Conn::default();
        let key = key_of(ip_proto::UDP, 6);
        let first = First {
            proto: ProtoState::Other(OtherState::First),
            counted: false,
            now: 9,
            bytes: 60,
        };
        c.init(&key, &first, &mut Setup::default());
        let guard = ctrack_table::pin();
        let reply = LookupKey {
            tuple: key.tuple.reverse(),
            ..key
        };
        assert_eq!(c.direction_of(&key, &guard), Some(Dir::Orig));
        assert_eq!(c.direction_of(&reply, &guard), Some(Dir::Reply));
        for (what, k) in [
            ("zone", LookupKey { zone: 7, ..key }),
            (
                "protocol",
                LookupKey {
                    proto: ip_proto::TCP,
                    ..key
                },
            ),
            (
                "generation",
                LookupKey {
                    generation: 7,
                    ..key
                },
            ),
            ("zone, reply", LookupKey { zone: 7, ..reply }),
            (
                "protocol, reply",
                LookupKey {
                    proto: ip_proto::TCP,
                    ..reply
                },
            ),
            (
                "generation, reply",
                LookupKey {
                    generation: 7,
                    ..reply
                },
            ),
        ] {
            assert_eq!(c.direction_of(&k, &guard), None, "another {what}");
        }
        let other = Tuple {
            dst: 9,
            ..key.tuple
        };
        assert_eq!(
            c.direction_of(
                &LookupKey {
                    tuple: other,
                    ..key
                },
                &guard
            ),
            None
        );
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(20_000))]

        /// The in-place fast path changes the stored state exactly as
        /// `tcp::update` changes an unpacked copy, wherever it answers,
        /// and leaves it untouched where it does not.
        #[test]
        fn tcp_established_in_place_agrees_with_update(
            p0 in tcp::testing::any_peer(),
            p1 in tcp::testing::any_peer(),
            f in proptest::prop_oneof![4 => proptest::strategy::Just(flags::ACK), 1 => 0u16..0x1000],
            seq_off in -70_000i64..140_000,
            ack_off in -70_000i64..140_000,
            win in proptest::prelude::any::<u16>(),
            len in 0u32..3000,
            reply in proptest::prelude::any::<bool>(),
        ) {
            let t = tcp::TcpConn { peers: [p0, p1] };
            let c: Conn<u32> = Conn::default();
            c.set_proto_state(&ProtoState::Tcp(t));
            let (src, dst) = if reply { (p1, p0) } else { (p0, p1) };
            let seg = tcp::Segment {
                flags: f,
                seq: src.seqlo.wrapping_add(seq_off as u32),
                ack: dst.seqlo.wrapping_add(ack_off as u32),
                win,
                payload_len: len,
                wscale: None,
            };
            let mut want = t;
            let r = tcp::update(&mut want, &seg, reply, true);
            if c.tcp_established(&seg, reply) {
                proptest::prop_assert_eq!(r, (Update::Valid, Some(Timeout::TcpEstablished)));
                proptest::prop_assert_eq!(c.tcp_state(), want);
            } else {
                proptest::prop_assert_eq!(c.tcp_state(), t);
            }
        }
    }

    /// The in-place fast path answers the segment it is for.
    #[test]
    fn tcp_established_in_place_takes_an_established_ack() {
        let peer = |seqlo: u32| Peer {
            seqlo,
            seqhi: seqlo + 60_000,
            max_win: 60_000,
            wscale: 0,
            state: TcpState::Established,
        };
        let c: Conn<u32> = Conn::default();
        c.set_proto_state(&ProtoState::Tcp(tcp::TcpConn {
            peers: [peer(1000), peer(5000)],
        }));
        let seg = tcp::Segment {
            flags: flags::ACK,
            seq: 1000,
            ack: 5000,
            win: 60_000,
            payload_len: 100,
            wscale: None,
        };
        assert!(c.tcp_established(&seg, false));
        assert_eq!(c.tcp_state().peers[0].seqlo, 1100);
        // The reply side's FIN is for the general path.
        let fin = tcp::Segment {
            flags: flags::ACK | flags::FIN,
            ..seg
        };
        assert!(!c.tcp_established(&fin, true));
    }
}
