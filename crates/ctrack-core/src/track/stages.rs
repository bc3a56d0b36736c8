//! After tracking: the translation stage ([`crate::nat::stage`]) and the
//! gateway stage ([`crate::alg::stage`]) for a tracked packet, each given
//! a narrow view of the connection. Only [`Tracker::process_mut`] rewrites
//! packets; the read-only entry points run the gateway's inspection (to
//! create expectations) and leave the bytes alone.

use core::sync::atomic::Ordering::Relaxed;

use ctrack_wire::{Fragment, Frame, IpLayer, IpVersion, LinkType, ip_proto, parse_frame};

use super::packet::{Cache, Call, Hit, Pkt};
use super::tracker::{Fam, Tracker};
use crate::alg::expect::Expectation;
use crate::alg::stage::{self as gateway, Control, GatewayCx};
use crate::conn::{Conn, DNAT, SNAT};
use crate::key::{ConnId, ConnKey, Family, V6};
use crate::nat::stage::{self as translation, Buf, Translation, is_icmp_error, translate_fast_v4};
use crate::packet::{ExtractOptions, extract};
use crate::verdict::Verdict;

impl Tracker {
    /// Translation and gateway for a tracked packet of connection `v.conn`.
    pub(super) fn stages(&self, cx: &mut Call<'_>, buf: Buf<'_>, layers: &Frame, v: &mut Verdict) {
        let Some(id) = v.conn else { return };
        match id.family() {
            Family::V4 => self.stages_in::<u32>(cx, id, buf, layers, v),
            Family::V6 => self.stages_in::<V6>(cx, id, buf, layers, v),
        }
    }

    fn stages_in<A: Fam>(
        &self,
        cx: &mut Call<'_>,
        id: ConnId,
        mut buf: Buf<'_>,
        layers: &Frame,
        v: &mut Verdict,
    ) {
        let Ok(ip) = layers.ip else { return };
        // The guard has been pinned since the packet was tracked, so the
        // slot still holds its connection (a removed slot is not reused
        // while any reader that saw it is pinned).
        let guard = cx.guard;
        let Some(e) = A::table(self).get(guard, id.record()) else {
            return;
        };
        let c = e.record();
        if c.zone() != cx.action.zone {
            return;
        }
        let related = is_icmp_error(buf.bytes(), &ip);
        let translates = cx.action.translates(v.state);
        if translates && let Buf::Mut(f) = &mut buf {
            let bits = c.nat_bits();
            let t = Translation {
                dir: v.dir,
                orig: *c.orig(),
                reply: c.reply(guard),
                src: bits & SNAT != 0,
                dst: bits & DNAT != 0,
            };
            translation::translate(&t, f, &ip, related, v, cx.stats);
        }
        if v.inspect
            && !related
            && v.invalid.is_none()
            && let Some(h) = c.ext(guard).and_then(|x| x.helper())
        {
            let control = Control {
                id,
                zone: c.zone(),
                generation: c.generation(),
                proto: c.proto(),
                orig: *c.orig(),
                reply: c.reply(guard),
                mark: c.mark(),
                label: c.label(guard),
                helper: h,
                translated: c.nat_bits() != 0,
            };
            let alive = |x: &Expectation| self.master_alive(guard, x);
            let mut g = GatewayCx {
                expect: &self.expect,
                alive: &alive,
                seqadj: &self.shared.seqadj,
                nat: translates,
                now: cx.now,
                stats: cx.stats,
            };
            gateway::run(&mut g, &control, buf, &ip, v);
        }
    }

    /// Translates a fast-path packet just judged against the connection
    /// the burst's cache holds (the record the judging step found).
    #[inline]
    pub(super) fn translate_judged(
        &self,
        cx: &mut Call<'_>,
        cache: &Cache<'_>,
        frame: &mut Vec<u8>,
        p: &Pkt<u32>,
        v: &mut Verdict,
    ) {
        match judged_translation(cache.v4.as_ref(), v, cx) {
            Judged::Translate(t) => translate_fast_v4(&t, frame, p.proto, v, cx.stats),
            Judged::Untranslated => {}
            Judged::Elsewhere => self.stages_again(cx, frame, v),
        }
    }

    /// [`Tracker::translate_judged`] for a packet of the IPv6 lanes (an
    /// untagged Ethernet frame, a 40-byte IPv6 header, TCP or UDP: what
    /// `fast_ipv6_inline` takes): the general rewrite at those offsets,
    /// without parsing the frame again. (It was parsed again and sent
    /// through the general stages: `bench lookup --nat --ipv6`, see
    /// BENCHMARKS.md.)
    pub(super) fn translate_judged6(
        &self,
        cx: &mut Call<'_>,
        cache: &Cache<'_>,
        frame: &mut Vec<u8>,
        p: &Pkt<V6>,
        v: &mut Verdict,
    ) {
        match judged_translation(cache.v6.as_ref(), v, cx) {
            Judged::Translate(t) => {
                const L3: usize = 14;
                let ip = IpLayer {
                    version: IpVersion::V6,
                    l3: L3,
                    l4: L3 + 40,
                    end: L3 + p.ip_len as usize,
                    proto: p.proto,
                    frag: Fragment::No,
                    frag_header: None,
                };
                translation::translate(&t, frame, &ip, false, v, cx.stats);
            }
            Judged::Untranslated => {}
            Judged::Elsewhere => self.stages_again(cx, frame, v),
        }
    }

    /// The general stages, on the frame parsed again.
    fn stages_again(&self, cx: &mut Call<'_>, frame: &mut Vec<u8>, v: &mut Verdict) {
        let layers = parse_frame(frame, LinkType::Ethernet);
        self.stages(cx, Buf::Mut(frame), &layers, v);
    }

    /// Before tracking a packet of a connection whose gateway rewrote
    /// payloads: put its acknowledgment back into the sequence space of the
    /// peer that sent the rewritten bytes (the tracker follows each side in
    /// its own numbering).
    pub(super) fn restore_acks(&self, cx: &Call<'_>, frame: &mut [u8], layers: &Frame) {
        if self.shared.seqadj.load(Relaxed) == 0 {
            return;
        }
        let Ok(ip) = layers.ip else { return };
        if ip.proto != ip_proto::TCP || ip.frag != Fragment::No {
            return;
        }
        let opts = ExtractOptions { checksums: false };
        let Ok(ex) = extract(frame, layers, cx.action.zone, opts) else {
            return;
        };
        if ex.related {
            return;
        }
        match ex.key.family {
            Family::V4 => self.restore_acks_in::<u32>(cx, frame, &ip, &ex.key),
            Family::V6 => self.restore_acks_in::<V6>(cx, frame, &ip, &ex.key),
        }
    }

    fn restore_acks_in<A: Fam>(
        &self,
        cx: &Call<'_>,
        frame: &mut [u8],
        ip: &IpLayer,
        key: &ConnKey,
    ) {
        let guard = cx.guard;
        let Some((e, dir)) = self.find::<A>(guard, key, cx.now) else {
            return;
        };
        let c: &Conn<A> = e.record();
        if !c.special() {
            return;
        }
        if let Some(h) = c.ext(guard).and_then(|x| x.helper()) {
            gateway::restore_ack(h, dir, frame, ip);
        }
    }
}

/// What [`judged_translation`] found.
enum Judged<A> {
    /// The connection translates the packet so.
    Translate(Translation<A>),
    /// The connection does not translate.
    Untranslated,
    /// The burst's cache does not hold the packet's connection (cannot
    /// happen for a tracked packet, but the general stages are always
    /// right).
    Elsewhere,
}

/// The translation of a packet just judged (`v`), from the connection the
/// burst's cache holds (`hit`), if it is the packet's.
#[inline]
fn judged_translation<A: Fam>(hit: Option<&Hit<'_, A>>, v: &Verdict, cx: &Call<'_>) -> Judged<A> {
    let hit = hit.filter(|h| {
        v.conn
            .is_some_and(|id| id.family() == A::FAMILY && id.record() == h.entry.id())
    });
    let Some(hit) = hit else {
        return Judged::Elsewhere;
    };
    let c = hit.entry.record();
    let bits = c.nat_bits();
    if bits == 0 {
        return Judged::Untranslated;
    }
    Judged::Translate(Translation {
        dir: v.dir,
        orig: *c.orig(),
        reply: c.reply(cx.guard),
        src: bits & SNAT != 0,
        dst: bits & DNAT != 0,
    })
}
