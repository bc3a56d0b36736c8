//! The gateway stage: FTP and TFTP control connections announce data
//! connections, which become expectations; under NAT the FTP text is
//! rewritten and the control connection's sequence numbers adjusted for
//! the change in length, in both directions.
//!
//! An announcement is honoured only for the sender's own address (the one
//! its packets carry, or the one its peer sees after translation), so that
//! a client cannot make the firewall expect a connection to a third host
//! (the FTP "bounce").

use std::sync::atomic::Ordering::Relaxed;

use ctrack_table::Guard;
use ctrack_wire::{Fragment, Frame, IpLayer, ip_proto};

use super::post::Buf;
use super::{Fam, Tracker, Verdict};
use crate::action::{Alg, CtAction};
use crate::alg::{Helper, State};
use crate::conn::{Addr, Conn, ConnId, Dir, Tuple, ip_of};
use crate::expect::{self, ExpKey, Expectation, Target};
use crate::extract::{ExtractOptions, InvalidReason, extract};
use crate::ftp::{self, Side};
use crate::key::{ConnKey, Family};
use crate::rewrite;
use crate::state::CtState;
use crate::stats::{C, Local};
use crate::time::Time;

/// Ports an FTP data port may move by when the one announced is already
/// expected by another control connection.
const PORT_ATTEMPTS: u32 = 128;

/// TFTP read and write requests (RFC 1350).
const TFTP_RRQ: u16 = 1;
const TFTP_WRQ: u16 = 2;

fn be16(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes([*b.get(at)?, *b.get(at + 1)?]))
}

fn be32(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_be_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

impl Tracker {
    /// True if some connection's sequence numbers are being adjusted.
    pub(super) fn alg_seqadj_active(&self) -> bool {
        self.shared.seqadj.load(Relaxed) != 0
    }

    /// Before tracking: a TCP segment of a connection whose other direction
    /// was rewritten gets its acknowledgment and SACK edges put back.
    pub(super) fn alg_before(
        &self,
        guard: &Guard,
        frame: &mut [u8],
        layers: &Frame,
        action: &CtAction,
        now: Time,
    ) {
        let Ok(ip) = layers.ip else { return };
        if ip.proto != ip_proto::TCP || ip.frag != Fragment::No {
            return;
        }
        let opts = ExtractOptions { checksums: false };
        let Ok(ex) = extract(frame, layers, action.zone, opts) else {
            return;
        };
        if ex.related {
            return;
        }
        match ex.key.family {
            Family::V4 => self.alg_before_in::<u32>(guard, frame, &ip, &ex.key, now),
            Family::V6 => self.alg_before_in::<crate::conn::V6>(guard, frame, &ip, &ex.key, now),
        }
    }

    fn alg_before_in<A: Fam>(
        &self,
        guard: &Guard,
        frame: &mut [u8],
        ip: &IpLayer,
        key: &ConnKey,
        now: Time,
    ) {
        let Some((e, dir)) = self.find::<A>(guard, key, now) else {
            return;
        };
        let c = e.record();
        if !c.special() {
            return;
        }
        let Some(h) = c.ext(guard).and_then(|x| x.helper.as_ref()) else {
            return;
        };
        let other = h.lock().adj[1 - dir.index()];
        if other.active() {
            rewrite::tcp_adjust(frame, ip.l4, None, Some(&other));
        }
    }

    /// The gateway of connection `c` for a packet tracked against it.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn gateway<A: Fam>(
        &self,
        guard: &Guard,
        id: ConnId,
        c: &Conn<A>,
        h: &Helper,
        buf: Buf<'_>,
        ip: &IpLayer,
        action: &CtAction,
        now: Time,
        v: &mut Verdict,
        local: &mut Local,
    ) {
        // Payloads are rewritten (and sequence numbers moved) only where
        // headers are: a translated connection, a `nat` action.
        let translate = action.nat.is_some() && c.nat_bits() != 0;
        match h.alg {
            Alg::Tftp => {
                // A read or write request, in either direction (as Linux):
                // the transfer comes from the server's side.
                if v.invalid.is_some() || ip.proto != ip_proto::UDP {
                    return;
                }
                let b = buf.bytes();
                let op = be16(b, ip.l4 + 8);
                if !matches!(op, Some(TFTP_RRQ | TFTP_WRQ)) {
                    return;
                }
                // The server answers from a new port to the client's port
                // (as the server sees it).
                let (t_d, t_nd) = tuples(c, Dir::Orig, guard);
                let mut st = h.lock();
                self.expect_data(
                    guard,
                    id,
                    c,
                    &mut st,
                    Dir::Orig,
                    ip_proto::UDP,
                    port(t_d.src_l4),
                    Some(port(t_nd.dst_l4)),
                    false,
                    translate,
                    now,
                    local,
                );
            }
            Alg::Ftp => self.ftp(guard, id, c, h, buf, ip, translate, now, v, local),
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn ftp<A: Fam>(
        &self,
        guard: &Guard,
        id: ConnId,
        c: &Conn<A>,
        h: &Helper,
        mut buf: Buf<'_>,
        ip: &IpLayer,
        translate: bool,
        now: Time,
        v: &mut Verdict,
        local: &mut Local,
    ) {
        if ip.proto != ip_proto::TCP {
            return;
        }
        let writable = matches!(buf, Buf::Mut(_));
        let rewrite = translate && writable;
        let b = buf.bytes();
        let Some(&off) = b.get(ip.l4 + 12) else {
            return;
        };
        let start = ip.l4 + usize::from(off >> 4) * 4;
        let (Some(seq), true) = (be32(b, ip.l4 + 4), start <= ip.end) else {
            return;
        };
        let d = v.dir;
        let (t_d, t_nd) = tuples(c, d, guard);
        let mut st = h.lock();
        let mut edits: Vec<(core::ops::Range<usize>, String)> = Vec::new();
        if v.invalid.is_none() && start < ip.end {
            let payload = &b[start..ip.end];
            let side = match d {
                Dir::Orig => Side::Client,
                Dir::Reply => Side::Server,
            };
            let v6 = A::FAMILY == Family::V6;
            let scan = st.streams[d.index()].feed(seq, payload, side, v6, rewrite);
            if scan.partial && rewrite {
                v.state = CtState::INV | CtState::TRK;
                v.invalid = Some(InvalidReason::AlgPartialCommand);
                local.add(C::Invalid, 1);
                local.invalid(InvalidReason::AlgPartialCommand);
            }
            for f in scan.found {
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
                let Some(kport) = self.expect_data(
                    guard,
                    id,
                    c,
                    &mut st,
                    d,
                    ip_proto::TCP,
                    f.command.port,
                    None,
                    can,
                    translate,
                    now,
                    local,
                ) else {
                    continue;
                };
                if let (true, Some(at)) = (can, f.at) {
                    let shown = match f.command.kind {
                        // The sender as its peer sees it.
                        ftp::Kind::Port | ftp::Kind::Pasv | ftp::Kind::Eprt => ip_of(t_nd.dst),
                        ftp::Kind::Epsv => ip_of(t_nd.dst),
                    };
                    let text = ftp::format(f.command.kind, shown, kport);
                    if !text.is_empty() {
                        edits.push((start + at.start..start + at.end, text));
                    }
                }
            }
        }
        let Buf::Mut(frame) = &mut buf else {
            return;
        };
        // A rewrite may not take the datagram past 65535 bytes.
        let grow: isize = edits
            .iter()
            .map(|(r, t)| t.len() as isize - r.len() as isize)
            .sum();
        if (ip.end - ip.l3) as isize + grow > 65_535 {
            edits.clear();
        }
        // Rewrite from the last edit back, so earlier offsets hold.
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
        let end = (ip.end as isize + delta) as usize;
        if delta != 0 {
            let total = st.adj[d.index()];
            let mut adj = total;
            adj.record(seq, delta as i32);
            st.adj[d.index()] = adj;
            if !st.counted {
                st.counted = true;
                self.shared.seqadj.fetch_add(1, Relaxed);
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
            rewrite::tcp_checksum(frame, ip, end);
            local.add(C::AlgRewritten, 1);
        }
    }

    /// Creates the expectation of a data connection announced by the
    /// sender of direction `d` of control connection `c`, to its own
    /// `port` (`forced`: the port the peer will use, when the gateway has
    /// no say). With `may_move`, a port another control connection already
    /// expects is replaced by a free one nearby (the text is rewritten to
    /// match). Returns the port the peer will connect to.
    #[allow(clippy::too_many_arguments)]
    fn expect_data<A: Fam>(
        &self,
        guard: &Guard,
        id: ConnId,
        c: &Conn<A>,
        st: &mut State,
        d: Dir,
        proto: u8,
        port: u16,
        forced: Option<u16>,
        may_move: bool,
        translate: bool,
        now: Time,
        local: &mut Local,
    ) -> Option<u16> {
        let now_ms = now.as_millis();
        let (t_d, t_nd) = tuples(c, d, guard);
        let mut key = ExpKey {
            zone: c.zone(),
            generation: c.generation(),
            family: A::FAMILY,
            proto,
            // The peer connects from where its packets come from, to the
            // sender as it sees it.
            src: t_nd.src.to_u128(),
            dst: t_nd.dst.to_u128(),
            dport: forced.unwrap_or(port),
        };
        let x = Expectation {
            master: id,
            master_key: c.orig().to_key(c.zone(), c.proto()),
            expires: now_ms.saturating_add(expect::TIMEOUT_MS),
            mark: c.mark(),
            label: c.label(guard),
            // Translated back to the sender's real address and port.
            target: translate.then(|| Target {
                src: t_d.dst.to_u128(),
                dst: t_d.src.to_u128(),
                dport: port,
            }),
        };
        if port == 0 || key.dport == 0 {
            return None;
        }
        if may_move && forced.is_none() {
            let base = u32::from(port);
            let mut found = false;
            for i in 0..PORT_ATTEMPTS {
                let p = base + i;
                if p > 65535 {
                    break;
                }
                key.dport = p as u16;
                if self.expect.free_for(&key, id, now_ms) {
                    found = true;
                    break;
                }
            }
            if !found {
                local.add(C::ExpectRefused, 1);
                return None;
            }
        }
        // A control connection has few expectations waiting: a new one
        // replaces the oldest.
        st.waiting.retain(|k| *k != key);
        while st.waiting.len() >= expect::PER_MASTER {
            let old = st.waiting.remove(0);
            self.expect.take(&old, id);
        }
        match self.expect.insert(key, x, now_ms) {
            Ok(()) => {
                st.waiting.push(key);
                local.add(C::ExpectCreated, 1);
                Some(key.dport)
            }
            Err(_) => {
                local.add(C::ExpectRefused, 1);
                None
            }
        }
    }
}

/// The tuples of direction `d` and of the other direction.
fn tuples<A: Addr>(c: &Conn<A>, d: Dir, guard: &Guard) -> (Tuple<A>, Tuple<A>) {
    let (o, r) = (*c.orig(), c.reply(guard));
    match d {
        Dir::Orig => (o, r),
        Dir::Reply => (r, o),
    }
}

fn port(l4: u32) -> u16 {
    (l4 >> 16) as u16
}
