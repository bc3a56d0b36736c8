//! The gateway stage: FTP and TFTP control connections announce data
//! connections, which become expectations; under NAT the FTP text is
//! rewritten and the control connection's sequence numbers adjusted for
//! the change in length, in both directions.
//!
//! An announcement is honoured only for the sender's own address (the one
//! its packets carry, or the one its peer sees after translation), so that
//! a client cannot make the firewall expect a connection to a third host
//! (the FTP "bounce").
//!
//! The stage is a set of functions over a narrow context: the tracker
//! hands it what it needs of the control connection ([`Control`]) and of
//! itself ([`GatewayCx`]); it reaches back into the tracker only to ask
//! whether an expectation's control connection still lives.

use core::ops::Range;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

use ctrack_wire::{IpLayer, ip_proto, read_be16, read_be32};

use crate::action::Alg;
use crate::alg::expect::{self, ExpKey, Expectation, Expectations, Target};
use crate::alg::ftp::{self, Side};
use crate::alg::helper::{Helper, State};
use crate::key::{Addr, ConnId, Dir, Family, Tuple, Zone, ip_of};
use crate::nat::rewrite;
use crate::nat::stage::Buf;
use crate::time::Time;
use crate::verdict::{C, CtState, InvalidReason, Stats, Verdict};

/// Ports an FTP data port may move by when the one announced is already
/// expected by another control connection.
const PORT_ATTEMPTS: u32 = 128;

/// TFTP read and write requests (RFC 1350).
const TFTP_RRQ: u16 = 1;
const TFTP_WRQ: u16 = 2;

/// What the gateway needs of its control connection.
#[derive(Debug)]
pub(crate) struct Control<'a, A> {
    pub id: ConnId,
    pub zone: Zone,
    pub generation: u32,
    pub proto: u8,
    pub orig: Tuple<A>,
    pub reply: Tuple<A>,
    pub mark: u32,
    pub label: u128,
    pub helper: &'a Helper,
    /// The connection is translated.
    pub translated: bool,
}

impl<A: Addr> Control<'_, A> {
    /// The tuples of direction `d` and of the other direction.
    fn tuples(&self, d: Dir) -> (Tuple<A>, Tuple<A>) {
        match d {
            Dir::Orig => (self.orig, self.reply),
            Dir::Reply => (self.reply, self.orig),
        }
    }
}

/// What the gateway needs of the tracker.
pub(crate) struct GatewayCx<'a> {
    pub expect: &'a Expectations,
    /// Whether an expectation's control connection still lives (the one
    /// question the stage asks of the tracker: an expectation of a
    /// removed connection holds its place no longer).
    pub alive: &'a dyn Fn(&Expectation) -> bool,
    /// Connections whose sequence numbers are adjusted (packets skip the
    /// adjustment's lookup while there are none).
    pub seqadj: &'a AtomicUsize,
    /// The action translates (`nat`).
    pub nat: bool,
    pub now: Time,
    pub stats: &'a mut Stats,
}

impl core::fmt::Debug for GatewayCx<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("GatewayCx")
            .field("expect", &self.expect)
            .field("nat", &self.nat)
            .field("now", &self.now)
            .finish_non_exhaustive()
    }
}

/// A data connection a control connection announced.
#[derive(Debug, Clone, Copy)]
struct Announce {
    /// The direction of the announcing packet.
    dir: Dir,
    proto: u8,
    /// The port announced (the sender's own).
    port: u16,
    /// The port the peer will use, when the gateway has no say.
    forced: Option<u16>,
    /// A port another control connection already expects may be replaced
    /// by a free one nearby (the text is rewritten to match).
    may_move: bool,
}

/// Runs the gateway of control connection `c` on a packet tracked against
/// it (not an ICMP error, not invalid before the stage).
pub(crate) fn run<A: Addr>(
    cx: &mut GatewayCx<'_>,
    c: &Control<'_, A>,
    buf: Buf<'_>,
    ip: &IpLayer,
    v: &mut Verdict,
) {
    match c.helper.alg {
        Alg::Tftp => tftp(cx, c, buf.bytes(), ip, v),
        Alg::Ftp => ftp(cx, c, buf, ip, v),
    }
}

/// Before tracking: a TCP segment of a connection whose other direction
/// was rewritten gets its acknowledgment and SACK edges put back into the
/// numbering of the peer that sent the rewritten bytes.
pub(crate) fn restore_ack(helper: &Helper, dir: Dir, frame: &mut [u8], ip: &IpLayer) {
    let other = helper.lock().adj[1 - dir.index()];
    if other.active() {
        rewrite::tcp_adjust(frame, ip.l4, None, Some(&other));
    }
}

/// A TFTP read or write request, in either direction (as Linux): the
/// transfer comes from the server's side, from a new port to the client's
/// port (as the server sees it).
fn tftp<A: Addr>(cx: &mut GatewayCx<'_>, c: &Control<'_, A>, b: &[u8], ip: &IpLayer, v: &Verdict) {
    if v.invalid.is_some() || ip.proto != ip_proto::UDP {
        return;
    }
    if !matches!(read_be16(b, ip.l4 + 8), Some(TFTP_RRQ | TFTP_WRQ)) {
        return;
    }
    let (t_d, t_nd) = c.tuples(Dir::Orig);
    let a = Announce {
        dir: Dir::Orig,
        proto: ip_proto::UDP,
        port: port(t_d.src_l4),
        forced: Some(port(t_nd.dst_l4)),
        may_move: false,
    };
    expect_data(cx, c, &mut c.helper.lock(), a);
}

/// The FTP text of one segment: announcements become expectations, and
/// under NAT the addresses and ports in the text are rewritten.
fn ftp<A: Addr>(
    cx: &mut GatewayCx<'_>,
    c: &Control<'_, A>,
    mut buf: Buf<'_>,
    ip: &IpLayer,
    v: &mut Verdict,
) {
    if ip.proto != ip_proto::TCP {
        return;
    }
    // Payloads are rewritten (and sequence numbers moved) only where
    // headers are: a translated connection, a `nat` action, a writable
    // packet.
    let rewrite = cx.nat && c.translated && matches!(buf, Buf::Mut(_));
    let b = buf.bytes();
    let Some(&off) = b.get(ip.l4 + 12) else {
        return;
    };
    let start = ip.l4 + usize::from(off >> 4) * 4;
    let (Some(seq), true) = (read_be32(b, ip.l4 + 4), start <= ip.end) else {
        return;
    };
    let mut st = c.helper.lock();
    let edits = if v.invalid.is_none() && start < ip.end {
        scan(cx, c, &mut st, &b[start..ip.end], seq, rewrite, v)
            .into_iter()
            .map(|(r, t)| (start + r.start..start + r.end, t))
            .collect()
    } else {
        Vec::new()
    };
    let Buf::Mut(frame) = &mut buf else {
        return;
    };
    let d = v.dir;
    // A refused segment (dropped) has none of its text rewritten and moves
    // no sequence number: its retransmission is read again, as a repeated
    // announcement. It keeps the adjustment earlier rewrites made.
    let refused = v.invalid == Some(InvalidReason::AlgCannotTranslate);
    let edits = if refused { Vec::new() } else { edits };
    let (delta, changed) = apply_edits(frame, ip, edits).unwrap_or_else(|| {
        refuse_untranslated(v);
        (0, false)
    });
    if delta != 0 {
        st.adj[d.index()].record(seq, delta as i32);
        if !st.counted {
            st.counted = true;
            cx.seqadj.fetch_add(1, Relaxed);
        }
        rewrite::ip_length(frame, ip, delta);
    }
    if rewrite {
        let own = st.adj[d.index()];
        if own.active() {
            rewrite::tcp_adjust(frame, ip.l4, Some(&own), None);
        }
    }
    if changed {
        let end = (ip.end as isize + delta) as usize;
        rewrite::tcp_checksum(frame, ip, end);
        cx.stats.add(C::AlgRewritten, 1);
    }
}

/// Reads a segment's FTP text, creates the expectations it announces, and
/// returns the edits of the text (ranges within `payload`) that NAT needs.
fn scan<A: Addr>(
    cx: &mut GatewayCx<'_>,
    c: &Control<'_, A>,
    st: &mut State,
    payload: &[u8],
    seq: u32,
    rewrite: bool,
    v: &mut Verdict,
) -> Vec<(Range<usize>, String)> {
    let d = v.dir;
    let (t_d, t_nd) = c.tuples(d);
    let side = match d {
        Dir::Orig => Side::Client,
        Dir::Reply => Side::Server,
    };
    let v6 = A::FAMILY == Family::V6;
    let found = st.streams[d.index()].feed(seq, payload, side, v6, rewrite);
    if found.partial && rewrite {
        v.state = CtState::INV | CtState::TRK;
        // Counted as the verdict says, once the stages are done.
        v.invalid = Some(InvalidReason::AlgPartialCommand);
    }
    let mut edits = Vec::new();
    for f in found.found {
        let announced = match f.command.addr {
            Some(a) => match crate::nat::addr_of::<A>(a) {
                Some(a) => a,
                None => continue,
            },
            None => t_d.src,
        };
        // The sender's own address only (no bounce).
        if announced != t_d.src && announced != t_nd.dst {
            continue;
        }
        let can = rewrite && f.at.is_some();
        let a = Announce {
            dir: d,
            proto: ip_proto::TCP,
            port: f.command.port,
            forced: None,
            may_move: can,
        };
        let Some(kport) = expect_data(cx, c, st, a) else {
            if can {
                refuse_untranslated(v);
            }
            continue;
        };
        if let (true, Some(at)) = (can, f.at) {
            // The sender as its peer sees it.
            let text = ftp::format(f.command.kind, ip_of(t_nd.dst), kport);
            if !text.is_empty() {
                edits.push((at, text));
            }
        }
    }
    edits
}

/// Marks a segment whose announcement cannot be translated invalid (the
/// firewall drops it): sent on, it would give away the untranslated
/// address.
fn refuse_untranslated(v: &mut Verdict) {
    v.state = CtState::INV | CtState::TRK;
    v.invalid = Some(InvalidReason::AlgCannotTranslate);
}

/// Rewrites the text of `frame` from the last edit back (so earlier
/// offsets hold). Returns the change in length and whether any byte
/// changed; `None`, with nothing changed, if the datagram would pass 65535
/// bytes.
fn apply_edits(
    frame: &mut Vec<u8>,
    ip: &IpLayer,
    edits: Vec<(Range<usize>, String)>,
) -> Option<(isize, bool)> {
    let grow: isize = edits
        .iter()
        .map(|(r, t)| t.len() as isize - r.len() as isize)
        .sum();
    if (ip.end - ip.l3) as isize + grow > 65_535 {
        return None;
    }
    let mut delta: isize = 0;
    let mut changed = false;
    for (range, text) in edits.iter().rev() {
        if frame
            .get(range.clone())
            .is_some_and(|old| old != text.as_bytes())
            || range.len() != text.len()
        {
            changed = true;
        }
        delta += text.len() as isize - range.len() as isize;
        frame.splice(range.clone(), text.bytes());
    }
    Some((delta, changed))
}

/// Creates the expectation of a data connection announced by the sender
/// of direction `a.dir` of control connection `c`. Returns the port the
/// peer will connect to.
fn expect_data<A: Addr>(
    cx: &mut GatewayCx<'_>,
    c: &Control<'_, A>,
    st: &mut State,
    a: Announce,
) -> Option<u16> {
    let now_ms = cx.now.as_millis();
    let (t_d, t_nd) = c.tuples(a.dir);
    let mut key = ExpKey {
        zone: c.zone,
        generation: c.generation,
        family: A::FAMILY,
        proto: a.proto,
        // The peer connects from where its packets come from, to the
        // sender as it sees it.
        src: t_nd.src.to_u128(),
        dst: t_nd.dst.to_u128(),
        dport: a.forced.unwrap_or(a.port),
    };
    let x = Expectation {
        master: c.id,
        master_key: c.orig.to_key(c.zone, c.proto),
        expires: now_ms.saturating_add(expect::TIMEOUT_MS),
        mark: c.mark,
        label: c.label,
        // Translated back to the sender's real address and port.
        target: (cx.nat && c.translated).then(|| Target {
            src: t_d.dst.to_u128(),
            dst: t_d.src.to_u128(),
            dport: a.port,
        }),
    };
    if a.port == 0 || key.dport == 0 {
        return None;
    }
    if a.may_move && a.forced.is_none() {
        let free = (u32::from(a.port)..(u32::from(a.port) + PORT_ATTEMPTS).min(65536))
            .map(|p| p as u16)
            .find(|&p| {
                key.dport = p;
                cx.expect.free_for(&key, c.id, now_ms, cx.alive)
            });
        if free.is_none() {
            cx.stats.add(C::ExpectRefused, 1);
            return None;
        }
    }
    // A control connection has few expectations waiting: a new one
    // replaces the oldest.
    st.waiting.retain(|k| *k != key);
    while st.waiting.len() >= expect::PER_MASTER {
        let old = st.waiting.remove(0);
        cx.expect.take(&old, c.id);
    }
    match cx.expect.insert(key, x, now_ms, cx.alive) {
        Ok(()) => {
            st.waiting.push(key);
            cx.stats.add(C::ExpectCreated, 1);
            Some(key.dport)
        }
        Err(_) => {
            cx.stats.add(C::ExpectRefused, 1);
            None
        }
    }
}

fn port(l4: u32) -> u16 {
    (l4 >> 16) as u16
}
