//! The translation stage: a tracked packet of a translated connection is
//! rewritten in place (addresses, ports or ICMP identifier, checksums; for
//! an ICMP error the quoted packet too) and its state shows `snat`/`dnat`.
//!
//! A function over a narrow context: the tracker hands it the
//! connection's two tuples and which sides are translated.

use ctrack_wire::{IpLayer, IpVersion, icmp, ip_proto};

use crate::key::{Addr, Dir, Tuple};
use crate::nat::rewrite;
use crate::verdict::{C, CtState, Stats, Verdict};

/// A packet a stage may or may not change.
#[derive(Debug)]
pub(crate) enum Buf<'a> {
    /// Read only: inspect, never rewrite.
    Ref(&'a [u8]),
    /// Rewritable (and resizable: a gateway may lengthen a payload).
    Mut(&'a mut Vec<u8>),
}

impl Buf<'_> {
    pub(crate) fn bytes(&self) -> &[u8] {
        match self {
            Buf::Ref(b) => b,
            Buf::Mut(b) => b,
        }
    }
}

/// What translating a packet needs of its connection.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Translation<A> {
    /// The packet's direction.
    pub dir: Dir,
    /// The connection's original tuple.
    pub orig: Tuple<A>,
    /// Its (translated) reply tuple.
    pub reply: Tuple<A>,
    /// The source of the original direction is translated.
    pub src: bool,
    /// The destination of the original direction is translated.
    pub dst: bool,
}

/// True if the packet is an ICMP or ICMPv6 error (it was tracked as
/// related to the connection of the packet it quotes).
pub(crate) fn is_icmp_error(b: &[u8], ip: &IpLayer) -> bool {
    let Some(&ty) = b.get(ip.l4) else {
        return false;
    };
    match (ip.version, ip.proto) {
        (IpVersion::V4, ip_proto::ICMP) => icmp::v4::is_error(ty),
        (IpVersion::V6, ip_proto::ICMPV6) => icmp::v6::is_error(ty),
        _ => false,
    }
}

/// [`translate`] for a packet the IPv4 fast path read (TCP or UDP after
/// a 20-byte header; not an ICMP error).
#[inline]
pub(crate) fn translate_fast_v4(
    t: &Translation<u32>,
    frame: &mut [u8],
    proto: u8,
    v: &mut Verdict,
    stats: &mut Stats,
) {
    let (src, dst, to) = match t.dir {
        Dir::Orig => (t.src, t.dst, t.reply.reverse()),
        Dir::Reply => (t.dst, t.src, t.orig.reverse()),
    };
    if !src && !dst {
        return;
    }
    if src {
        v.state |= CtState::SNAT;
    }
    if dst {
        v.state |= CtState::DNAT;
    }
    rewrite::packet_v4_fast(frame, proto, &to);
    stats.add(C::Translated, 1);
}

/// Rewrites `frame`, a packet of direction `t.dir`, into the other side's
/// view of the connection and adds `snat`/`dnat` to its state (the side
/// rewritten: a reply of a source translation gets its destination put
/// back, `dnat`). `related`: the packet is an ICMP error quoting one of the
/// connection's packets.
pub(crate) fn translate<A: Addr>(
    t: &Translation<A>,
    frame: &mut [u8],
    ip: &IpLayer,
    related: bool,
    v: &mut Verdict,
    stats: &mut Stats,
) {
    if !t.src && !t.dst {
        return;
    }
    let (src, dst, from, to) = match t.dir {
        Dir::Orig => (t.src, t.dst, t.orig, t.reply.reverse()),
        Dir::Reply => (t.dst, t.src, t.reply, t.orig.reverse()),
    };
    if src {
        v.state |= CtState::SNAT;
    }
    if dst {
        v.state |= CtState::DNAT;
    }
    if related {
        rewrite::icmp_error(frame, ip, &from, &to);
    } else {
        rewrite::packet(frame, ip, &from, &to);
    }
    stats.add(C::Translated, 1);
}
