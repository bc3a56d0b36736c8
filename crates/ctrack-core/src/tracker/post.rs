//! The stage after tracking: address translation of the packet and the
//! gateway of its connection. Only [`Tracker::process_mut`] rewrites
//! packets; the read-only entry points run the gateway's inspection (to
//! create expectations) and leave the bytes alone.

use ctrack_table::Guard;
use ctrack_wire::{Frame, LinkType, parse_frame};

use super::{Cache, Fam, Tracker, Verdict};
use crate::action::CtAction;
use crate::conn::{ConnId, DNAT, Dir, SNAT, V6};
use crate::key::Family;
use crate::rewrite;
use crate::state::CtState;
use crate::stats::{C, Local};
use crate::time::Time;

/// True if the packet is an ICMP or ICMPv6 error (it was tracked as
/// related to the connection of the packet it quotes).
fn is_icmp_error(b: &[u8], ip: &ctrack_wire::IpLayer) -> bool {
    let Some(&ty) = b.get(ip.l4) else {
        return false;
    };
    match (ip.version, ip.proto) {
        (ctrack_wire::IpVersion::V4, ctrack_wire::ip_proto::ICMP) => {
            ctrack_wire::icmp::v4::is_error(ty)
        }
        (ctrack_wire::IpVersion::V6, ctrack_wire::ip_proto::ICMPV6) => {
            ctrack_wire::icmp::v6::is_error(ty)
        }
        _ => false,
    }
}

/// A packet the stage may or may not change.
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

impl Tracker {
    /// Tracks one frame and carries out the action on it: with `nat`, the
    /// packet of a translated connection is rewritten in place (addresses,
    /// ports or ICMP identifier, checksums; for an ICMP error the quoted
    /// packet too) and its state shows `snat`/`dnat`; a gateway may rewrite
    /// the payload (FTP under NAT), changing the frame's length. Without
    /// `nat`, and for untranslated connections, the frame is unchanged.
    pub fn process_mut(
        &self,
        frame: &mut Vec<u8>,
        link: LinkType,
        action: &CtAction,
        now: Time,
    ) -> Verdict {
        let guard = ctrack_table::pin();
        let mut local = Local::default();
        let mut cache = Cache::default();
        let mut v = Verdict::default();
        let layers = parse_frame(frame, link);
        if action.nat.is_some() {
            self.before_tracking(&guard, frame, &layers, action, now);
        }
        self.process_one(
            &guard,
            frame,
            link,
            Some(&layers),
            action,
            now,
            &mut local,
            &mut cache,
            &mut v,
        );
        if v.conn.is_some() && (action.nat.is_some() || v.inspect) {
            self.post(
                &guard,
                Buf::Mut(frame),
                &layers,
                action,
                now,
                &mut v,
                &mut local,
            );
        }
        self.shared.stats.flush(&mut local);
        v
    }

    /// The gateway stage for a packet of the read-only entry points.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn inspect_ro(
        &self,
        guard: &Guard,
        frame: &[u8],
        link: LinkType,
        action: &CtAction,
        now: Time,
        v: &mut Verdict,
        local: &mut Local,
    ) {
        let layers = parse_frame(frame, link);
        self.post(guard, Buf::Ref(frame), &layers, action, now, v, local);
    }

    /// Translation and gateway for a tracked packet of connection `v.conn`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn post(
        &self,
        guard: &Guard,
        buf: Buf<'_>,
        layers: &Frame,
        action: &CtAction,
        now: Time,
        v: &mut Verdict,
        local: &mut Local,
    ) {
        let Some(id) = v.conn else { return };
        match id.family() {
            Family::V4 => self.post_in::<u32>(guard, id, buf, layers, action, now, v, local),
            Family::V6 => self.post_in::<V6>(guard, id, buf, layers, action, now, v, local),
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn post_in<A: Fam>(
        &self,
        guard: &Guard,
        id: ConnId,
        mut buf: Buf<'_>,
        layers: &Frame,
        action: &CtAction,
        now: Time,
        v: &mut Verdict,
        local: &mut Local,
    ) {
        let Ok(ip) = layers.ip else { return };
        // The guard has been pinned since the packet was tracked, so the
        // slot still holds its connection (a removed slot is not reused
        // while any reader that saw it is pinned): the packet's tuple is
        // the connection's tuple of its direction, with no need to parse
        // the packet again.
        let Some(e) = A::table(self).get(guard, id.record()) else {
            return;
        };
        let c = e.record();
        if c.zone() != action.zone {
            return;
        }
        let tuple = match v.dir {
            Dir::Orig => *c.orig(),
            Dir::Reply => c.reply(guard),
        };
        let related = is_icmp_error(buf.bytes(), &ip);
        let bits = c.nat_bits();
        // Only a packet that is rewritten shows `snat`/`dnat`.
        if action.nat.is_some() && bits != 0 && matches!(buf, Buf::Mut(_)) {
            // The state names the side rewritten: a reply of a source
            // translation gets its destination put back (`dnat`).
            let (src, dst) = match v.dir {
                Dir::Orig => (bits & SNAT != 0, bits & DNAT != 0),
                Dir::Reply => (bits & DNAT != 0, bits & SNAT != 0),
            };
            if src {
                v.state |= CtState::SNAT;
            }
            if dst {
                v.state |= CtState::DNAT;
            }
            if let Buf::Mut(f) = &mut buf {
                let to = match v.dir {
                    Dir::Orig => c.reply(guard).reverse(),
                    Dir::Reply => c.orig().reverse(),
                };
                if related {
                    rewrite::icmp_error(f, &ip, &tuple, &to);
                } else {
                    rewrite::packet(f, &ip, &tuple, &to);
                }
                local.add(C::Translated, 1);
            }
        }
        if v.inspect
            && !related
            && v.invalid.is_none()
            && let Some(h) = c.ext(guard).and_then(|x| x.helper.as_ref())
        {
            self.gateway(guard, id, c, h, buf, &ip, action, now, v, local);
        }
    }

    /// Before tracking a packet of a connection whose gateway rewrote
    /// payloads: put its acknowledgment back into the sequence space of the
    /// peer that sent the rewritten bytes (the tracker follows each side in
    /// its own numbering).
    fn before_tracking(
        &self,
        guard: &Guard,
        frame: &mut [u8],
        layers: &Frame,
        action: &CtAction,
        now: Time,
    ) {
        if !self.alg_seqadj_active() {
            return;
        }
        self.alg_before(guard, frame, layers, action, now);
    }
}
