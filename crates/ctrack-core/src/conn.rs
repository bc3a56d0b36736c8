//! A tracked connection as the table stores it: 120 bytes for IPv4, the
//! table's header included.
//!
//! The key fields are fixed while the connection lives. Everything a packet
//! changes (protocol state, last-seen time and timeout class, counters,
//! mark) is a relaxed atomic written under the connection's entry lock, so
//! that a lock-free reader (an expiry check, a dump) reads a value that is
//! old or new but never torn per field. Rarely used data (label, and the
//! translated reply tuple once NAT exists) lives in an extension allocated
//! on first use.

use core::fmt;
use core::hash::Hasher;
use core::sync::atomic::{AtomicU8, AtomicU32, AtomicU64, Ordering::Relaxed};
use std::net::{Ipv4Addr, Ipv6Addr};

use ctrack_table::{EpochBox, Guard, Header, Record, RecordId};
use ctrack_wire::ip_proto;

use crate::key::{ConnKey, Endpoint, Family, Zone};
use crate::proto::tcp::{Peer, TcpConn, TcpState};
use crate::proto::{IcmpState, OtherState, ProtoState};
use crate::timeout::Timeout;

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

/// Direction of a packet within its connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "lowercase"))]
pub enum Dir {
    /// The direction of the packet that created the connection.
    #[default]
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

/// An address as a connection stores it: `u32` for IPv4, [`V6`] for IPv6.
pub trait Addr:
    Copy + Eq + Ord + Default + Send + Sync + fmt::Debug + core::hash::Hash + 'static
{
    /// The family.
    const FAMILY: Family;
    /// From the 128-bit form of [`Endpoint::addr`].
    fn from_u128(a: u128) -> Self;
    /// To the 128-bit form of [`Endpoint::addr`].
    fn to_u128(self) -> u128;
    /// Feeds the address and an L4 word to a hasher.
    fn hash_with(self, l4: u32, h: &mut impl Hasher);
}

impl Addr for u32 {
    const FAMILY: Family = Family::V4;
    #[inline]
    fn from_u128(a: u128) -> Self {
        a as u32
    }
    #[inline]
    fn to_u128(self) -> u128 {
        u128::from(self)
    }
    #[inline]
    fn hash_with(self, l4: u32, h: &mut impl Hasher) {
        h.write_u64((u64::from(self) << 32) | u64::from(l4));
    }
}

/// An IPv6 address as four 32-bit words (4-byte aligned, so that a
/// connection needs no 16-byte alignment).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default, Hash)]
pub struct V6(pub [u32; 4]);

impl Addr for V6 {
    const FAMILY: Family = Family::V6;
    #[inline]
    fn from_u128(a: u128) -> Self {
        V6([
            (a >> 96) as u32,
            (a >> 64) as u32,
            (a >> 32) as u32,
            a as u32,
        ])
    }
    #[inline]
    fn to_u128(self) -> u128 {
        let [a, b, c, d] = self.0;
        (u128::from(a) << 96) | (u128::from(b) << 64) | (u128::from(c) << 32) | u128::from(d)
    }
    #[inline]
    fn hash_with(self, l4: u32, h: &mut impl Hasher) {
        h.write_u128(self.to_u128());
        h.write_u32(l4);
    }
}

/// The addresses and L4 words of one direction. An L4 word is the port (or
/// ICMP identifier) in its high 16 bits, then ICMP type and code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct Tuple<A> {
    /// Source address.
    pub src: A,
    /// Destination address.
    pub dst: A,
    /// Source L4 word.
    pub src_l4: u32,
    /// Destination L4 word.
    pub dst_l4: u32,
}

fn l4_word(e: &Endpoint) -> u32 {
    (u32::from(e.port) << 16) | (u32::from(e.icmp_type) << 8) | u32::from(e.icmp_code)
}

fn endpoint(addr: u128, l4: u32) -> Endpoint {
    Endpoint {
        addr,
        port: (l4 >> 16) as u16,
        icmp_type: (l4 >> 8) as u8,
        icmp_code: l4 as u8,
    }
}

impl<A: Addr> Tuple<A> {
    /// The tuple of `key`.
    #[inline]
    pub fn of(key: &ConnKey) -> Tuple<A> {
        Tuple {
            src: A::from_u128(key.src.addr),
            dst: A::from_u128(key.dst.addr),
            src_l4: l4_word(&key.src),
            dst_l4: l4_word(&key.dst),
        }
    }

    /// The other direction.
    #[inline]
    pub fn reverse(&self) -> Tuple<A> {
        Tuple {
            src: self.dst,
            dst: self.src,
            src_l4: self.dst_l4,
            dst_l4: self.src_l4,
        }
    }

    /// The key of this tuple in `zone`, for protocol `proto`.
    pub fn to_key(&self, zone: Zone, proto: u8) -> ConnKey {
        ConnKey {
            src: endpoint(self.src.to_u128(), self.src_l4),
            dst: endpoint(self.dst.to_u128(), self.dst_l4),
            zone,
            proto,
            family: A::FAMILY,
        }
    }

    /// The two endpoints in a fixed order, whichever the direction.
    #[inline]
    pub(crate) fn canonical(&self) -> ((A, u32), (A, u32)) {
        let a = (self.src, self.src_l4);
        let b = (self.dst, self.dst_l4);
        if a <= b { (a, b) } else { (b, a) }
    }
}

/// What a lookup compares: a tuple in a zone instance.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct LookupKey<A> {
    /// The packet's tuple.
    pub tuple: Tuple<A>,
    /// Zone.
    pub zone: Zone,
    /// IP protocol.
    pub proto: u8,
    /// Generation of the zone (bumped by each flush).
    pub generation: u32,
}

/// Data few connections need, allocated on first use.
#[derive(Debug, Default)]
pub struct Ext<A> {
    /// The 128-bit label, as two halves (high, low).
    label: [AtomicU64; 2],
    /// The reply tuple when it is not the reverse of the original one
    /// (address translation).
    pub reply: Option<Tuple<A>>,
    /// The application-layer gateway watching this (control) connection.
    pub(crate) helper: Option<crate::alg::Helper>,
    /// For a connection an expectation let in: the original tuple of the
    /// control connection that expected it.
    pub master: Option<Tuple<A>>,
}

impl<A> Ext<A> {
    /// The label.
    pub fn label(&self) -> u128 {
        (u128::from(self.label[0].load(Relaxed)) << 64) | u128::from(self.label[1].load(Relaxed))
    }

    fn set_label(&self, v: u128) {
        self.label[0].store((v >> 64) as u64, Relaxed);
        self.label[1].store(v as u64, Relaxed);
    }
}

/// Bits of [`Conn::flags`]: the timeout class in the low nibble, then:
const COUNTED: u8 = 0x10;
/// The connection's source is translated (in the original direction).
pub(crate) const SNAT: u8 = 0x20;
/// The connection's destination is translated.
pub(crate) const DNAT: u8 = 0x40;
/// The connection has a gateway or was expected: see its extension.
pub(crate) const SPECIAL: u8 = 0x80;
const CLASS_MASK: u8 = 0x0f;

/// What a new connection starts with besides its key.
#[derive(Debug)]
pub(crate) struct Setup<A> {
    /// The translated reply tuple, if translated.
    pub reply: Option<Tuple<A>>,
    /// [`SNAT`] and [`DNAT`] bits.
    pub nat: u8,
    /// A gateway to run on its packets.
    pub helper: Option<crate::alg::Helper>,
    /// The control connection that expected it.
    pub master: Option<Tuple<A>>,
}

impl<A> Default for Setup<A> {
    fn default() -> Self {
        Setup {
            reply: None,
            nat: 0,
            helper: None,
            master: None,
        }
    }
}

/// One connection.
#[derive(Debug, Default)]
pub struct Conn<A: Addr> {
    header: Header,
    orig: Tuple<A>,
    generation: u32,
    zone: Zone,
    proto: u8,
    flags: AtomicU8,
    mark: AtomicU32,
    state: [AtomicU32; 6],
    last_seen: AtomicU64,
    /// Packets and bytes, original then reply.
    counters: [AtomicU64; 4],
    ext: EpochBox<Ext<A>>,
}

impl<A: Addr> Record for Conn<A> {
    #[inline]
    fn header(&self) -> &Header {
        &self.header
    }

    fn retire(&self, guard: &Guard) {
        self.ext.replace(None, guard);
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
    /// Fills a vacant slot with a new connection (exclusive access).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn init(
        &mut self,
        key: &LookupKey<A>,
        proto: &ProtoState,
        class: Timeout,
        counted: bool,
        now: u64,
        first_bytes: u32,
        setup: Setup<A>,
    ) {
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
        self.set_proto_state(proto);
        self.last_seen.store(now, Relaxed);
        self.counters[0].store(1, Relaxed);
        self.counters[1].store(u64::from(first_bytes), Relaxed);
        self.counters[2].store(0, Relaxed);
        self.counters[3].store(0, Relaxed);
        let reply = setup.reply.filter(|r| *r != key.tuple.reverse());
        self.ext.set((reply.is_some() || special).then(|| {
            Box::new(Ext {
                label: Default::default(),
                reply,
                helper: setup.helper,
                master: setup.master,
            })
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
        self.special() && self.ext(guard).is_some_and(|e| e.master.is_some())
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

    /// The reply tuple.
    pub fn reply(&self, guard: &Guard) -> Tuple<A> {
        self.ext(guard)
            .and_then(|e| e.reply)
            .unwrap_or_else(|| self.orig.reverse())
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
        let reply = match self.ext.get(guard).and_then(|e| e.reply) {
            Some(r) => r,
            None => self.orig.reverse(),
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
        self.ext.get_or_init(guard, Box::default).set_label(new);
    }

    /// Counts a packet. Entry lock held.
    #[inline]
    pub(crate) fn count(&self, dir: Dir, bytes: u32) {
        let i = dir.index() * 2;
        self.counters[i].store(self.counters[i].load(Relaxed) + 1, Relaxed);
        self.counters[i + 1].store(
            self.counters[i + 1].load(Relaxed) + u64::from(bytes),
            Relaxed,
        );
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

/// The table's zone-instance number of a zone generation.
#[inline]
pub(crate) fn instance(zone: Zone, generation: u32) -> u64 {
    (u64::from(zone) << 32) | u64::from(generation)
}

/// A connection's number while it lives: its family and its place in the
/// table. Once the connection is gone, a later one may get the same id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ConnId(u32);

const V6_BIT: u32 = 1 << 31;

impl ConnId {
    pub(crate) fn new(family: Family, id: RecordId) -> ConnId {
        ConnId(
            id.as_u32()
                | match family {
                    Family::V4 => 0,
                    Family::V6 => V6_BIT,
                },
        )
    }

    /// The family of the connection.
    pub fn family(self) -> Family {
        if self.0 & V6_BIT != 0 {
            Family::V6
        } else {
            Family::V4
        }
    }

    pub(crate) fn record(self) -> RecordId {
        RecordId::from_u32(self.0 & !V6_BIT)
    }

    /// The id as a number (for printing).
    pub fn as_u64(self) -> u64 {
        u64::from(self.0)
    }
}

/// Display helper for addresses in tests and debugging.
pub fn ip_of<A: Addr>(a: A) -> std::net::IpAddr {
    match A::FAMILY {
        Family::V4 => Ipv4Addr::from(a.to_u128() as u32).into(),
        Family::V6 => Ipv6Addr::from(a.to_u128()).into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::tcp;

    #[test]
    fn an_ipv4_connection_takes_120_bytes() {
        assert_eq!(core::mem::size_of::<Conn<u32>>(), 120);
        assert_eq!(core::mem::size_of::<Conn<V6>>(), 144);
    }

    #[test]
    fn v6_address_round_trip() {
        let a: u128 = 0x2001_0db8_0000_0000_0000_0000_0000_0001;
        assert_eq!(V6::from_u128(a).to_u128(), a);
        assert!(V6::from_u128(1) < V6::from_u128(1 << 100));
    }

    #[test]
    fn proto_state_round_trips_through_the_atomics() {
        let mut c: Conn<u32> = Conn::default();
        let key = LookupKey {
            tuple: Tuple {
                src: 1,
                dst: 2,
                src_l4: 3 << 16,
                dst_l4: 4 << 16,
            },
            zone: 5,
            proto: ip_proto::TCP,
            generation: 0,
        };
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
        c.init(
            &key,
            &ProtoState::Tcp(t),
            Timeout::TcpEstablished,
            true,
            9,
            60,
            Setup::default(),
        );
        assert_eq!(c.proto_state(), ProtoState::Tcp(t));
        assert_eq!(c.class(), Timeout::TcpEstablished);
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
}
