//! The entry points: a frame, a frame already parsed, a frame to rewrite,
//! a burst. Every one of them takes a packet down the same path
//! ([`Tracker::one`]); a burst adds prefetch passes in front of it and
//! judges a run of packets of one connection under one hold of its lock
//! (outside TCP, a run that leaves its connection as it was is judged once
//! and the verdict copied).

use core::sync::atomic::Ordering::Relaxed;

use ctrack_table::{Hint, Seen, pin};
use ctrack_wire::{Frame, LinkType, parse_frame};

use super::after::{AfterEach, Plain, Side};
use super::judge::{count, count_many};
use super::lanes::{Lanes, prefetch_exts};
use super::packet::{Cache, Call, Hit, Judged, Pkt, Pre};
use super::shared::expiry;
use super::tracker::{BURST, Fam, Tracker};
use crate::action::CtAction;
use crate::conn::Kind;
use crate::key::{Dir, Family, LookupKey, V6};
use crate::nat::stage::Buf;
use crate::packet::fast::fast_ipv6;
use crate::packet::{ExtractOptions, extract};
use crate::time::Time;
use crate::verdict::{Stats, Verdict};
use crate::zone::{Compiled, ZoneMeta};

impl Tracker {
    /// Tracks one frame captured with link type `link`.
    pub fn process(
        &self,
        frame: &[u8],
        link: LinkType,
        action: &CtAction,
        now: Time,
        stats: &mut Stats,
    ) -> Verdict {
        self.single(frame, link, None, action, now, stats)
    }

    /// Tracks one frame whose layers the caller already found with
    /// [`parse_frame`].
    pub fn process_layers(
        &self,
        frame: &[u8],
        layers: &Frame,
        action: &CtAction,
        now: Time,
        stats: &mut Stats,
    ) -> Verdict {
        self.single(frame, LinkType::Ethernet, Some(layers), action, now, stats)
    }

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
        stats: &mut Stats,
    ) -> Verdict {
        let guard = pin();
        let mut cx = Call {
            guard: &guard,
            action,
            now,
            stats,
        };
        self.single_mut_in(&mut cx, frame, link)
    }

    /// One packet to rewrite, under the pin of `cx` (fresh, or a
    /// [`Handle`](super::Handle)'s).
    #[inline]
    pub(super) fn single_mut_in<'g>(
        &'g self,
        cx: &mut Call<'g>,
        frame: &mut Vec<u8>,
        link: LinkType,
    ) -> Verdict {
        let mut v = Verdict::default();
        self.one_mut(cx, frame, link, &mut Cache::default(), &mut v);
        v
    }

    /// [`Tracker::process_mut`] for a burst of frames with one action (as a
    /// datapath delivers them), rewriting each in place and writing a
    /// verdict per frame to `out`: the same verdicts and the same bytes as
    /// [`Tracker::process_mut`] frame by frame, in order.
    ///
    /// As [`Tracker::process_burst`], the table's memory for the whole
    /// burst is prefetched before the first packet is judged; a packet of a
    /// translated connection is rewritten from the connection the judging
    /// step found (its tuples are read from the record in hand, not looked
    /// up again). An IPv6 packet of the common case (no extension header,
    /// TCP or UDP) is judged in the burst's IPv6 lanes and translated the
    /// same way, at the offsets the lanes read it at. A gateway's
    /// control connection, and every TCP packet while some gateway has
    /// shifted sequence numbers, take the per-packet path.
    pub fn process_burst_mut(
        &self,
        frames: &mut [Vec<u8>],
        link: LinkType,
        action: &CtAction,
        now: Time,
        out: &mut [Verdict],
        stats: &mut Stats,
    ) {
        assert_eq!(frames.len(), out.len(), "one verdict per frame");
        self.in_bursts(action, now, stats, |t, cx, cache| {
            for (burst, outs) in frames.chunks_mut(BURST).zip(out.chunks_mut(BURST)) {
                t.burst_mut(cx, burst, link, cache, outs, &mut (), 0);
            }
        });
    }

    /// What every burst entry point does around its bursts: one pin, one
    /// call, one cache of the last connection; and, if the bursts evicted
    /// connections, a visit to the collector.
    #[inline]
    pub(super) fn in_bursts(
        &self,
        action: &CtAction,
        now: Time,
        stats: &mut Stats,
        bursts: impl for<'g> FnOnce(&'g Tracker, &mut Call<'g>, &mut Cache<'g>),
    ) {
        let guard = pin();
        let mut cx = Call {
            guard: &guard,
            action,
            now,
            stats,
        };
        let mut cache = Cache::default();
        let evicted = cx.stats.evicted;
        bursts(self, &mut cx, &mut cache);
        if cx.stats.evicted != evicted {
            // Under a flood every commit evicts: hand the evicted records
            // to the collector now, so that their slots come back before
            // the table has to grow for the next ones.
            guard.flush();
        }
    }

    /// One frame of a rewriting entry point: put back the acknowledgment a
    /// gateway shifted, track, translate and run the gateway, count.
    fn one_mut<'g>(
        &'g self,
        cx: &mut Call<'g>,
        frame: &mut Vec<u8>,
        link: LinkType,
        cache: &mut Cache<'g>,
        v: &mut Verdict,
    ) {
        let layers = parse_frame(frame, link);
        if cx.action.nat.is_some() {
            self.restore_acks(cx, frame, &layers);
        }
        self.track_frame(cx, frame, link, Some(&layers), cache, v);
        if v.conn.is_some() && (cx.action.nat.is_some() || v.inspect) {
            self.stages(cx, Buf::Mut(frame), &layers, v);
        }
        count(cx.stats, v);
    }

    /// Tracks a burst of frames with one action (as a datapath delivers
    /// them, up to 32 at a time), appending a verdict per frame to `out`.
    ///
    /// Cheaper per packet than [`Tracker::process`]: one epoch pin and one
    /// counter update per burst; the zone's state is read once; the table's
    /// memory for every packet of the burst is prefetched before the first
    /// is judged, so that the cache misses of a large table overlap instead
    /// of adding up; and a packet of the same connection as the one before
    /// it skips the lookup.
    pub fn process_batch(
        &self,
        frames: &[&[u8]],
        link: LinkType,
        action: &CtAction,
        now: Time,
        out: &mut Vec<Verdict>,
        stats: &mut Stats,
    ) {
        let first = out.len();
        out.resize(first + frames.len(), Verdict::default());
        self.process_burst(frames, link, action, now, &mut out[first..], stats);
    }

    /// [`Tracker::process_batch`] into a slice of as many verdicts as
    /// frames.
    pub fn process_burst(
        &self,
        frames: &[&[u8]],
        link: LinkType,
        action: &CtAction,
        now: Time,
        out: &mut [Verdict],
        stats: &mut Stats,
    ) {
        assert_eq!(frames.len(), out.len(), "one verdict per frame");
        self.in_bursts(action, now, stats, |t, cx, cache| {
            for (burst, outs) in frames.chunks(BURST).zip(out.chunks_mut(BURST)) {
                t.burst(cx, &mut Plain(burst), link, cache, outs);
            }
        });
    }

    /// One packet on its own, with a fresh pin.
    fn single(
        &self,
        frame: &[u8],
        link: LinkType,
        layers: Option<&Frame>,
        action: &CtAction,
        now: Time,
        stats: &mut Stats,
    ) -> Verdict {
        let guard = pin();
        let mut cx = Call {
            guard: &guard,
            action,
            now,
            stats,
        };
        self.single_in(&mut cx, frame, link, layers)
    }

    /// One packet on its own, under the pin of `cx` (fresh, or a
    /// [`Handle`](super::Handle)'s).
    #[inline]
    pub(super) fn single_in<'g>(
        &'g self,
        cx: &mut Call<'g>,
        frame: &[u8],
        link: LinkType,
        layers: Option<&Frame>,
    ) -> Verdict {
        let mut v = Verdict::default();
        self.one(cx, frame, link, layers, &mut Cache::default(), &mut v);
        v
    }

    /// The per-packet path: track, run the gateway's inspection if the
    /// connection has one, and count the packet as the stages left it.
    #[inline]
    fn one<'g>(
        &'g self,
        cx: &mut Call<'g>,
        frame: &[u8],
        link: LinkType,
        layers: Option<&Frame>,
        cache: &mut Cache<'g>,
        v: &mut Verdict,
    ) {
        self.track_frame(cx, frame, link, layers, cache, v);
        self.inspect(cx, frame, link, v);
        count(cx.stats, v);
    }

    /// The gateway stage of a read-only entry point (creates expectations,
    /// rewrites nothing).
    #[inline]
    fn inspect(&self, cx: &mut Call<'_>, frame: &[u8], link: LinkType, v: &mut Verdict) {
        if v.inspect && v.conn.is_some() {
            let layers = parse_frame(frame, link);
            self.stages(cx, Buf::Ref(frame), &layers, v);
        }
    }

    /// Tracks one frame: the IPv4 fast path when it applies, else the
    /// general extraction. The caller counts it once the stages are done.
    #[inline]
    fn track_frame<'g>(
        &'g self,
        cx: &mut Call<'g>,
        frame: &[u8],
        link: LinkType,
        layers: Option<&Frame>,
        cache: &mut Cache<'g>,
        v: &mut Verdict,
    ) {
        let checksums = self.checksums.load(Relaxed);
        // Read by the burst's out-of-line reader: inlined here, the
        // reading ran short of registers (about 12 instructions a packet
        // more, callgrind on `bench lookup --calls handle`).
        let mut fast = None;
        if link == LinkType::Ethernet
            && Pkt::read_fast(frame, checksums, &mut fast)
            && let Some((p, _)) = &fast
        {
            self.track_fast(cx, p, &mut cache.v4, v);
        } else if let Some(f) = (link == LinkType::Ethernet && layers.is_none())
            .then(|| fast_ipv6(frame, checksums))
            .flatten()
        {
            // The common IPv6 case, read without the general machinery.
            self.track_fast(cx, &Pkt::fast(&f), &mut cache.v6, v);
        } else {
            let parsed;
            let layers = match layers {
                Some(l) => l,
                None => {
                    parsed = parse_frame(frame, link);
                    &parsed
                }
            };
            let opts = ExtractOptions { checksums };
            match extract(frame, layers, cx.action.zone, opts) {
                Ok(ex) if ex.key.family == Family::V4 => {
                    self.track::<u32>(cx, &Pkt::of(&ex), &mut cache.v4, None, v)
                }
                Ok(ex) => self.track::<V6>(cx, &Pkt::of(&ex), &mut cache.v6, None, v),
                Err(reason) => *v = Verdict::invalid(cx.action.zone, reason),
            }
        }
    }

    /// A packet a fast path read, on its own: the fast lane, with what a
    /// burst works out for all its packets at once worked out for this
    /// one, else the general tracking.
    #[inline]
    fn track_fast<'g, A: Fam>(
        &'g self,
        cx: &mut Call<'g>,
        p: &Pkt<A>,
        cache: &mut Option<Hit<'g, A>>,
        v: &mut Verdict,
    ) {
        if self.lean_serves(cx.action) {
            let zone = cx.action.zone;
            let meta = self.shared.zones.get(zone);
            let generation = meta.map_or(0, ZoneMeta::generation);
            let pre = Pre {
                generation,
                hash: self
                    .shared
                    .hasher
                    .hash_tuple(zone, generation, p.proto, &p.tuple),
                hint: Hint::default(),
                policy: self.shared.policy_of(meta, cx.guard),
            };
            // One packet: no packet behind it to use the connection.
            if self.lean(cx, p, pre, false, cache, v) {
                return;
            }
        }
        self.track::<A>(cx, p, cache, None, v);
    }

    /// Up to [`BURST`] frames: the prefetch passes, then each packet in
    /// order, each followed by what the caller does with it
    /// ([`Side::after`]).
    pub(super) fn burst<'g, S: Side>(
        &'g self,
        cx: &mut Call<'g>,
        side: &mut S,
        link: LinkType,
        cache: &mut Cache<'g>,
        outs: &mut [Verdict],
    ) {
        // The zone's state, once per burst.
        let meta = self.shared.zones.get(cx.action.zone);
        let generation = meta.map_or(0, ZoneMeta::generation);
        let policy = self.shared.policy_of(meta, cx.guard);
        let mut lanes = Lanes::new();
        // IPv6 packets of the common case get lanes of their own, made
        // only for a burst with Ethernet frames the IPv4 lanes left (so
        // that an IPv4 burst does not clear them).
        let mut six: Option<Lanes<V6>> = None;
        {
            let mut buf: [&[u8]; BURST] = [&[]; BURST];
            let frames = side.refs(&mut buf);
            if self.prefetch(cx, frames, link, generation, &mut lanes) {
                self.prefetch6(cx, frames, generation, &lanes, six.insert(Lanes::new()));
            }
        }
        let n = outs.len();
        let lean = self.lean_serves(cx.action);
        if self.wants_ext(cx.action) {
            prefetch_exts(&lanes, six.as_ref());
        }
        let mut i = 0;
        while i < n {
            let Some((p, pre)) = lanes.at(i, generation, policy) else {
                match six.as_ref().and_then(|l| l.at(i, generation, policy)) {
                    Some((p, pre)) => {
                        let v = &mut outs[i];
                        if !(lean && self.lean(cx, p, pre, false, &mut cache.v6, v)) {
                            self.track::<V6>(cx, p, &mut cache.v6, Some(pre), v);
                        }
                        if v.inspect {
                            self.inspect(cx, side.frame(i), link, v);
                        }
                        count(cx.stats, v);
                    }
                    None => self.one(cx, side.frame(i), link, None, cache, &mut outs[i]),
                }
                if side.after(i, &mut outs[i], cx.stats) {
                    *cache = Cache::default();
                }
                i += 1;
                continue;
            };
            // The connection is kept for the next packet only if it is of
            // the same flow (a run, marked by the prefetch pass): storing
            // it for every packet cost 792 against 758 instructions a
            // packet (callgrind, `bench lookup --calls burst`, 100k
            // connections).
            let next_same = (lanes.runs >> i) & 2 != 0;
            if !(lean && self.lean(cx, p, pre, next_same, &mut cache.v4, &mut outs[i])) {
                self.track::<u32>(cx, p, &mut cache.v4, Some(pre), &mut outs[i]);
            }
            if outs[i].inspect {
                // A gateway's connection: each packet on its own.
                self.inspect(cx, side.frame(i), link, &mut outs[i]);
                count(cx.stats, &outs[i]);
                if side.after(i, &mut outs[i], cx.stats) {
                    *cache = Cache::default();
                }
                i += 1;
                continue;
            }
            count(cx.stats, &outs[i]);
            if side.after(i, &mut outs[i], cx.stats) {
                // The caller changed the table: no run from what the
                // lookup found.
                *cache = Cache::default();
                i += 1;
                continue;
            }
            i += 1;
            let start = i;
            i = self.run_of_flow(cx, &lanes, i, policy, cache, outs, |v| side.settled(v));
            // Every packet of the run but perhaps its last is settled
            // (what follows it reads only its verdict), so these come
            // after the run's lookups without changing anything.
            for (j, v) in outs.iter_mut().enumerate().take(i).skip(start) {
                if side.after(j, v, cx.stats) {
                    *cache = Cache::default();
                }
            }
        }
    }

    /// True if the fast lane ([`Tracker::lean`]) serves packets of
    /// `action`: it is on, and the action does not force a commit (which
    /// may end a connection found in the reply direction: the general
    /// path's business).
    #[inline]
    fn lean_serves(&self, action: &CtAction) -> bool {
        self.fast_lane.load(Relaxed) && !action.force
    }

    /// The fast lane, for fast-path packets (in a burst, or one at a time
    /// with `pre.hint` empty): the packet's connection is looked up from
    /// the hint (or searched for) and the packet is judged against it by
    /// the same [`Tracker::judge_locked`] the general path ends in; a
    /// packet with no connection goes to [`Tracker::open`] as there. What
    /// the general path adds is left out: its retries, the cache check,
    /// ICMP errors (never on the fast path) and forced commits (see
    /// [`Tracker::lean_serves`]). False, with nothing written, when the
    /// general path must decide: a lost race, an expired connection, or a
    /// packet that ends it (which leaves it as it was, so that judging it
    /// again gives the same answer). The connection goes to `cache` where
    /// `keep` says the next packet may use it, else `cache` is emptied.
    #[inline(always)]
    fn lean<'g, A: Fam>(
        &'g self,
        cx: &mut Call<'g>,
        p: &Pkt<A>,
        pre: Pre<'g, A>,
        keep: bool,
        cache: &mut Option<Hit<'g, A>>,
        v: &mut Verdict,
    ) -> bool {
        let key = LookupKey {
            tuple: p.tuple,
            zone: cx.action.zone,
            proto: p.proto,
            generation: pre.generation,
        };
        let guard = cx.guard;
        let mut dir = Dir::Orig;
        // Where the probe guessed no record (a new connection, likely), the
        // shard's insert count before the search: if the search finds no
        // live record, the commit need not search again.
        let seen = if pre.hint.is_guess() {
            Seen::NOTHING
        } else {
            A::table(self).seen(pre.hash)
        };
        let found = A::table(self).find_hinted(guard, pre.hash, pre.hint, |c| {
            c.direction_of(&key, guard).map(|d| dir = d).is_some()
        });
        let Some(e) = found else {
            // No live record at all under the key (this search passes over
            // none, expired or not).
            return match self.open::<A>(cx, p, &key, pre.hash, seen, v) {
                Some(hit) => {
                    *cache = match hit {
                        Some((entry, dir)) if keep => Some(Hit { key, entry, dir }),
                        _ => None,
                    };
                    true
                }
                None => false,
            };
        };
        let Some(lock) = e.lock() else {
            return false;
        };
        let judged = self.judge_locked(cx, p, pre.policy, e, dir, v);
        drop(lock);
        if !matches!(judged, Judged::Done) {
            return false;
        }
        if keep {
            *cache = Some(Hit { key, entry: e, dir });
        } else {
            *cache = None;
        }
        true
    }

    /// Up to [`BURST`] frames of [`Tracker::process_burst_mut`]: the
    /// prefetch passes, then each packet in order, translated as soon as
    /// it is judged.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn burst_mut<'g, J: AfterEach>(
        &'g self,
        cx: &mut Call<'g>,
        frames: &mut [Vec<u8>],
        link: LinkType,
        cache: &mut Cache<'g>,
        outs: &mut [Verdict],
        then: &mut J,
        base: usize,
    ) {
        let meta = self.shared.zones.get(cx.action.zone);
        let generation = meta.map_or(0, ZoneMeta::generation);
        let policy = self.shared.policy_of(meta, cx.guard);
        let mut lanes = Lanes::new();
        // IPv6 packets of the common case get lanes of their own, as in
        // `burst`, made only for a burst with frames the IPv4 lanes left.
        let mut six: Option<Lanes<V6>> = None;
        {
            let mut refs: [&[u8]; BURST] = [&[]; BURST];
            for (r, f) in refs.iter_mut().zip(frames.iter()) {
                *r = f.as_slice();
            }
            let refs = &refs[..frames.len()];
            if self.prefetch(cx, refs, link, generation, &mut lanes) {
                self.prefetch6(cx, refs, generation, &lanes, six.insert(Lanes::new()));
            }
        }
        // While a gateway has shifted sequence numbers somewhere (perhaps
        // for a packet earlier in this burst), a TCP packet's
        // acknowledgment may need putting back before it is judged: the
        // per-packet path does that.
        let shifted = |proto: u8| {
            cx.action.nat.is_some()
                && proto == ctrack_wire::ip_proto::TCP
                && self.shared.seqadj.load(Relaxed) != 0
        };
        // A translated connection keeps its reply tuple (and label) in its
        // extension, one dependent load after the record.
        if self.wants_ext(cx.action) {
            prefetch_exts(&lanes, six.as_ref());
        }
        for (i, (frame, v)) in frames.iter_mut().zip(outs.iter_mut()).enumerate() {
            let fast = lanes
                .at(i, generation, policy)
                .filter(|(p, _)| !shifted(p.proto));
            let Some((p, pre)) = fast else {
                let six = six
                    .as_ref()
                    .and_then(|l| l.at(i, generation, policy))
                    .filter(|(p, _)| !shifted(p.proto));
                match six {
                    Some((p, pre)) => {
                        self.track::<V6>(cx, p, &mut cache.v6, Some(pre), v);
                        if v.conn.is_some() && v.inspect {
                            // Gateways as the per-packet path runs them
                            // (`one_mut`), on the frame parsed again.
                            let layers = parse_frame(frame, link);
                            self.stages(cx, Buf::Mut(frame), &layers, v);
                        } else if v.conn.is_some() && cx.action.translates(v.state) {
                            self.translate_judged6(cx, cache, frame, p, v);
                        }
                        count(cx.stats, v);
                    }
                    None => self.one_mut(cx, frame, link, cache, v),
                }
                if then.after(base + i, frame, v, cx.stats) {
                    *cache = Cache::default();
                }
                continue;
            };
            self.track::<u32>(cx, p, &mut cache.v4, Some(pre), v);
            if v.conn.is_some() {
                if v.inspect && self.has_gateway(cx, cache, v) {
                    // A gateway's control connection: the general stages.
                    let layers = parse_frame(frame, link);
                    self.stages(cx, Buf::Mut(frame), &layers, v);
                } else if cx.action.translates(v.state) {
                    // (An expected connection, FTP data, has no gateway of
                    // its own: translating is all the stages would do.)
                    self.translate_judged(cx, cache, frame, p, v);
                }
            }
            count(cx.stats, v);
            if then.after(base + i, frame, v, cx.stats) {
                *cache = Cache::default();
            }
        }
    }

    /// Whether connection `v.conn`, just judged, has a gateway; true when
    /// the burst's cache does not hold it (the general stages then look).
    #[inline]
    fn has_gateway(&self, cx: &Call<'_>, cache: &Cache<'_>, v: &Verdict) -> bool {
        let held = cache
            .v4
            .as_ref()
            .filter(|h| v.conn.is_some_and(|id| id.record() == h.entry.id()));
        held.is_none_or(|h| {
            h.entry
                .record()
                .ext(cx.guard)
                .is_some_and(|x| x.helper().is_some())
        })
    }

    /// After packet `i - 1` was judged against a connection: the packets
    /// from `i` on of the same connection (a flow's burst) are judged under
    /// one hold of its entry lock, up to (and with) the first whose
    /// verdict is not `settled`. Returns the index of the first packet not
    /// judged.
    #[inline]
    #[allow(clippy::too_many_arguments)]
    fn run_of_flow(
        &self,
        cx: &mut Call<'_>,
        lanes: &Lanes,
        mut i: usize,
        policy: &Compiled,
        cache: &Cache<'_>,
        outs: &mut [Verdict],
        settled: impl Fn(&Verdict) -> bool,
    ) -> usize {
        let Some(hit) = cache.v4.as_ref() else {
            return i;
        };
        let (entry, dir, key) = (hit.entry, hit.dir, hit.key);
        let n = outs.len();
        let same = |lane: &Option<(Pkt<u32>, u64)>| {
            lane.as_ref()
                .is_some_and(|(q, _)| q.tuple == key.tuple && q.proto == key.proto)
        };
        let action = cx.action;
        if i >= n || !same(&lanes.fast[i]) || (action.force && action.commit && dir.is_reply()) {
            return i;
        }
        let Some(lock) = entry.lock() else {
            return i;
        };
        let c = entry.record();
        // Outside TCP, a packet's effect on its connection depends only on
        // its direction (and its length, which is only counted).
        let by_direction = c.kind() != Kind::Tcp;
        while i < n {
            let Some((q, _)) = lanes.fast[i].as_ref().filter(|_| same(&lanes.fast[i])) else {
                break;
            };
            let before = c.small_state();
            match self.judge_locked(cx, q, policy, entry, dir, &mut outs[i]) {
                Judged::Done => {
                    count(cx.stats, &outs[i]);
                    i += 1;
                    if !settled(&outs[i - 1]) {
                        // What the caller does with it may change the
                        // table: it must come before the next lookup.
                        break;
                    }
                    // The packet left the state as it found it, and the
                    // connection stays live at this time: every further
                    // packet of the run (same tuple, so same direction,
                    // same time) would be judged the same, so its verdict
                    // is a copy and its counts are added at once. (Today's
                    // machines for these kinds settle in one step, so
                    // either test implies the other; both are kept so that
                    // the copy does not rest on that.)
                    if by_direction
                        && c.small_state() == before
                        && expiry(c, policy) > cx.now.as_millis()
                    {
                        let v = outs[i - 1];
                        let (mut packets, mut bytes) = (0, 0);
                        while i < n && same(&lanes.fast[i]) {
                            if let Some((q, _)) = &lanes.fast[i] {
                                bytes += u64::from(q.ip_len);
                            }
                            outs[i] = v;
                            packets += 1;
                            i += 1;
                        }
                        if packets > 0 {
                            c.count_many(dir, packets, bytes);
                            count_many(cx.stats, &v, packets);
                        }
                        break;
                    }
                }
                // Expired, or the packet starts a new connection: the
                // general path takes it from here.
                Judged::Lost | Judged::Reopen => break,
            }
        }
        drop(lock);
        i
    }
}
