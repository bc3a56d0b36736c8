//! The burst path: the tracker looks up a burst as one (prefetching the
//! table's memory for every packet before judging the first) and hands
//! each packet to the firewall before it looks up the next; a packet whose
//! connection's word is current leaves at once. Only the others take the
//! per-packet path.
//!
//! Frames are judged in place and not reassembled: a datapath sends IP
//! fragments to [`Firewall::process`] instead (in a burst, the tracker
//! finds a fragment invalid and it is dropped).

use ctrack_core::{AfterEach, CtState, Dir, LinkType, Stats, Time, Verdict};
use ctrack_wire::parse_frame;

use super::compiled::Compiled;
use super::decision::{
    AclCounters, AclRef, Action, BURST, Decision, DropReason, FwStats, Stage, ZoneCache,
};
use super::engine::Firewall;
use super::judge::{Cx, by_word, uncount};
use super::nd::{is_nd_or_mld, untracked, untracked_parsed};
use super::word::{Pair, Word};
use crate::key::plain_ipv4;

/// Where a burst's answers go: a decision per frame, and the `reject`
/// answers with the index of the frame each answers.
#[derive(Debug)]
pub struct BurstOut<'a> {
    /// One decision per frame.
    pub decisions: &'a mut [Decision],
    /// `(frame index, answer)`.
    pub replies: &'a mut Vec<(usize, Vec<u8>)>,
    /// The worker's counters.
    pub stats: &'a mut FwStats,
}

impl<T> Firewall<T> {
    /// Judges a burst of Ethernet frames (as a datapath receives them) in
    /// place: the same decisions (and, where NAT or a gateway rewrites, the
    /// same bytes) as [`Firewall::process`] frame by frame, without
    /// reassembly; cheaper per packet where the policy tracks and the
    /// frames of a burst are of one zone.
    ///
    /// Each packet is judged before the burst's next packet is looked up
    /// ([`ctrack_core::AfterEach`]): what its judging does to the table
    /// (a commit, a connection judged again and stamped or removed) the
    /// later packets see, as frame by frame. See docs/firewall.md,
    /// "Bursts".
    pub fn process_burst(&self, frames: &mut [Vec<u8>], now: Time, out: BurstOut<'_>) {
        assert_eq!(frames.len(), out.decisions.len(), "one decision per frame");
        let pol = self.policy_guard();
        let mut base = 0;
        // The worker's memo of its last MAC pair, if it is of this policy.
        let mut zones = std::mem::take(&mut out.stats.zones);
        if zones.policy != pol.id() {
            zones = ZoneCache {
                policy: pol.id(),
                last: None,
                pairs: [Pair::NONE; 2],
                ports: (0, 0),
                group: false,
            };
        }
        for chunk in frames.chunks_mut(BURST) {
            let n = chunk.len();
            let decisions = &mut out.decisions[base..base + n];
            let zone = zones.zone_of(&pol, &chunk[0]);
            let same_zone = zones.all_of_last(chunk);
            // Port security holds for every frame, a session's too: a
            // chunk with a frame it drops goes frame by frame, where it is
            // checked first (as is every frame that goes alone anyway).
            let secure = |forward: u64| {
                // The pair's checks each way, found once for the chunk.
                // `zones.ports` are the memo's pair's as the memo has
                // it, which frames of bit 1 carry.
                let (a, b) = zones.ports;
                let first: [u8; 12] = chunk[0].first_chunk().copied().unwrap_or_default();
                let mut swapped = [0u8; 12];
                swapped[..6].copy_from_slice(&first[6..]);
                swapped[6..].copy_from_slice(&first[..6]);
                let (memo, other) = match forward & 1 {
                    1 => (first, swapped),
                    _ => (swapped, first),
                };
                let there = pol.guard(&memo, a, b);
                let back = pol.guard(&other, b, a);
                (chunk.iter().enumerate()).all(|(i, f)| match (forward >> (i % 64)) & 1 {
                    1 => pol.secure_with(&there, f),
                    _ => pol.secure_with(&back, f),
                })
            };
            let go = pol.tracking
                && !zones.group
                && same_zone.is_some_and(|fw| !pol.has_security || secure(fw));
            if let (true, Some(forward)) = (go, same_zone) {
                let mut o = BurstOut {
                    decisions,
                    replies: out.replies,
                    stats: out.stats,
                };
                let pairs = zones.pairs(&pol, forward);
                self.chunk(&pol, chunk, (zone, pairs), now, base, &mut o);
            } else {
                for (i, f) in chunk.iter_mut().enumerate() {
                    let (d, reply) = self.judge_alone(&pol, f, now, out.stats);
                    decisions[i] = d;
                    if let Some(r) = reply {
                        out.replies.push((base + i, r));
                    }
                }
            }
            base += n;
        }
        out.stats.zones = zones;
    }

    /// One frame, alone, without reassembly: port security first (OVN's
    /// `ls_in_check_port_sec`; its `ls_out_check_port_sec` comes last
    /// there, after the receiver's ACLs, which here commit nothing for a
    /// frame it drops), as `Firewall::process` checks it.
    fn judge_alone(
        &self,
        pol: &Compiled,
        frame: &mut Vec<u8>,
        now: Time,
        st: &mut FwStats,
    ) -> (Decision, Option<Vec<u8>>) {
        let d = if frame.len() < 14 {
            Decision::drop(Stage::Default, AclRef::Runt, DropReason::Runt)
        } else if !pol.secure(frame) {
            Decision::drop(
                Stage::PortSecurity,
                AclRef::PortSecurity,
                DropReason::PortSecurity,
            )
        } else {
            return self.judge(pol, frame, now, st);
        };
        st.count(&d);
        (d, None)
    }
}

// `ZoneCache` (in decision.rs, where a worker's `FwStats` keeps it) is
// read and written here.

/// A frame's first twelve bytes as two words.
#[inline(always)]
fn pair_words(p: &[u8; 12]) -> (u64, u32) {
    let (a, b) = p.split_at(8);
    let a: [u8; 8] = a.try_into().unwrap_or_default();
    let b: [u8; 4] = b.try_into().unwrap_or_default();
    (u64::from_ne_bytes(a), u32::from_ne_bytes(b))
}

impl ZoneCache {
    #[inline(always)]
    fn zone_of(&mut self, pol: &Compiled, f: &[u8]) -> u16 {
        let Some(pair) = f.first_chunk::<12>() else {
            return pol.zone_for(pol.port_at(f, 6), pol.port_at(f, 0));
        };
        let (a, b) = pair_words(pair);
        if let Some((fa, fb, ra, rb, z)) = self.last
            && ((a == fa && b == fb) || (a == ra && b == rb))
        {
            return z;
        }
        self.miss(pol, f, pair)
    }

    /// Whether every frame is at least an Ethernet header long and carries
    /// the memo's MAC pair, either way round: after [`ZoneCache::zone_of`]
    /// of the first frame, whether all are of its zone. If so, the frames
    /// that carry it as the memo has it (bit `i` for frame `i`). The pair
    /// words are compared whole, without branching on each (fewer
    /// instructions than asking `zone_of` of each frame).
    #[inline(always)]
    fn all_of_last(&self, frames: &[Vec<u8>]) -> Option<u64> {
        let (fa, fb, ra, rb, _) = self.last?;
        let mut forward = 0;
        for (i, f) in frames.iter().enumerate() {
            let h = f.first_chunk::<14>()?;
            let (a, b) = pair_words(h.first_chunk::<12>().unwrap_or(&[0; 12]));
            let fwd = ((a ^ fa) | u64::from(b ^ fb)) == 0;
            if !fwd && ((a ^ ra) | u64::from(b ^ rb)) != 0 {
                return None;
            }
            forward |= u64::from(fwd) << (i % 64);
        }
        Some(forward)
    }

    /// The memo's MAC pair as it came (its first eight bytes and next
    /// four) and its zones, with the chunk's frames that carry it that
    /// way (`forward`).
    #[inline(always)]
    fn pairs(&self, pol: &Compiled, forward: u64) -> Pairs {
        let (fa, fb, ..) = self.last.unwrap_or_default();
        let g = u64::from(pol.generation);
        Pairs {
            words: (fa, fb),
            codes: self.pairs,
            forward,
            session: self.pairs.map(|p| g | p.in_word()),
        }
    }

    #[inline(never)]
    fn miss(&mut self, pol: &Compiled, f: &[u8], pair: &[u8; 12]) -> u16 {
        let (inport, outport) = (pol.port_at(f, 6), pol.port_at(f, 0));
        self.ports = (inport, outport);
        let z = pol.zone_for(inport, outport);
        self.pairs = [
            pol.pair_at(outport, inport, z),
            pol.pair_at(inport, outport, z),
        ];
        let mut rev = [0u8; 12];
        rev[..6].copy_from_slice(&pair[6..]);
        rev[6..].copy_from_slice(&pair[..6]);
        let (fa, fb) = pair_words(pair);
        let (ra, rb) = pair_words(&rev);
        self.last = Some((fa, fb, ra, rb, z));
        self.group = (pair[0] | pair[6]) & 1 == 1;
        z
    }
}

/// A chunk's pair of MAC addresses as its first frame carries it (its
/// first eight bytes and next four: every frame of the chunk carries it
/// one way or the other), the pair's zones as a connection's word keeps
/// them, the other way round (`codes[0]`) and that way (`codes[1]`), and
/// which frames carry it that way (`forward`, bit `i` for frame `i`).
/// `words` holds, for each, a session's word's generation and zones under
/// the chunk's policy (what [`Word::session_bits`] leaves of it).
#[derive(Debug, Clone, Copy)]
struct Pairs {
    words: (u64, u32),
    codes: [Pair; 2],
    forward: u64,
    session: [u64; 2],
}

impl Pairs {
    /// The zones `frame` went between, as [`Compiled::pair_at`] gives
    /// them.
    #[inline(always)]
    fn of(&self, frame: &[u8]) -> Pair {
        let (a, b) = pair_words(frame.first_chunk::<12>().unwrap_or(&[0; 12]));
        self.codes[usize::from((a, b) == self.words)]
    }

    /// Whether the word of frame `i` of the chunk, of verdict `v`, is of
    /// the chunk's policy generation and keeps the zones the frame went
    /// between as the opening packets went (swapped for a reply): a packet
    /// of the session, not the connection's addresses sent between other
    /// ports. Strict: a word that keeps no zones fails here and is let
    /// through by [`Word::fits`] on the per-packet path.
    #[inline(always)]
    fn fit(&self, i: usize, v: &Verdict) -> bool {
        // As the opening packets went: a frame that carries the pair as
        // it came, in the original direction, or the other way round as
        // a reply.
        let k = ((self.forward >> (i % 64)) as usize & 1) ^ usize::from(v.dir == Dir::Reply);
        Word::session_bits(v.word) == self.session[k]
    }
}

impl<T> Firewall<T> {
    /// A chunk of frames of one zone under a tracked policy: the tracker
    /// looks it up as one burst and hands each packet, before it looks up
    /// the next, to [`Judging`].
    fn chunk(
        &self,
        pol: &Compiled,
        chunk: &mut [Vec<u8>],
        (zone, pairs): (u16, Pairs),
        now: Time,
        base: usize,
        out: &mut BurstOut<'_>,
    ) {
        // The worker's buffer (see `Verdicts`), or a new one.
        let mut verdicts = out
            .stats
            .verdicts_buf
            .0
            .take()
            .unwrap_or_else(|| Box::new([Verdict::default(); BURST]));
        let vs = &mut verdicts[..chunk.len()];
        out.stats.sync(pol.generation, pol.policy.acls.len());
        // The tracker counts into its own counters; a packet of the slow
        // path takes them back while it is judged (`Judging::after`).
        let mut counts = std::mem::take(&mut out.stats.tracker);
        let mut j = Judging {
            fw: self,
            pol,
            zone,
            now,
            base,
            decisions: &mut *out.decisions,
            replies: &mut *out.replies,
            st: &mut *out.stats,
            fast: 0,
            fast_mask: 0,
            pairs,
        };
        let action = pol.lookup_action(zone);
        if pol.has_nat || pol.has_alg {
            // Translations and gateways rewrite frames: the tracker's
            // rewriting burst path. A packet of a translated connection
            // leaves translated; a `+new` one is left as it came, for the
            // ACLs.
            let t = &self.tracker;
            t.process_burst_mut_then(
                chunk,
                LinkType::Ethernet,
                &action,
                now,
                vs,
                &mut counts,
                &mut j,
            );
        } else {
            let t = &self.tracker;
            t.process_burst_then(
                chunk,
                LinkType::Ethernet,
                &action,
                now,
                vs,
                &mut counts,
                &mut j,
            );
        }
        // Packets that left by the session fast path: their decisions and
        // ACL counts, then counted (as allowed, by the session stage) once
        // for the chunk.
        j.decide_fast(vs, chunk);
        let fast = j.fast;
        out.stats.tracker = counts;
        out.stats.verdicts_buf.0 = Some(verdicts);
        out.stats
            .count_many(&Decision::allow(Stage::Session, AclRef::Default), fast);
    }
}

/// What the firewall does with each packet of a chunk as soon as the
/// tracker has looked it up, before it looks up the next: a packet of a
/// connection whose word is current leaves by the session at once; the
/// others take the per-packet path from their lookup on, which may track
/// them again (a commit, a translation), judge their connection again, or
/// remove it, and the chunk's later packets are looked up after that, as
/// frame by frame.
struct Judging<'a, T> {
    fw: &'a Firewall<T>,
    pol: &'a Compiled,
    zone: u16,
    now: Time,
    /// The chunk's first frame's index in the call.
    base: usize,
    /// The chunk's decisions.
    decisions: &'a mut [Decision],
    replies: &'a mut Vec<(usize, Vec<u8>)>,
    /// The worker's counters, but the tracker's (see `Firewall::chunk`).
    st: &'a mut FwStats,
    /// Packets that left by the session fast path.
    fast: u64,
    /// Those of the chunk, bit `i` for packet `i`: their decisions are
    /// written after the tracker's loop ([`Judging::decide_fast`]).
    fast_mask: u64,
    /// The chunk's MAC pair and its zones.
    pairs: Pairs,
}

impl<T> Judging<'_, T> {
    /// The decisions of the packets that left by the session fast path
    /// (`fast_mask`), from their verdicts `vs`, and their ACLs' counts
    /// (bytes as the `frames` are now, which is as they were when judged:
    /// the tracker is done with the chunk).
    ///
    /// Written here, once the tracker's loop is done, rather than in
    /// [`AfterEach::after`] as each packet is judged: there, a decision
    /// copied the verdict the tracker had stored field by field a few
    /// instructions before, in wide loads that had to wait for those
    /// stores. `bench policy stage --acls 1`, three alternating pairs:
    /// 1.25–1.26× a plain lookup before, 1.20–1.21× after (the same
    /// instructions a packet under callgrind, 689.8 and 689.2).
    fn decide_fast(&mut self, vs: &[Verdict], frames: &[Vec<u8>]) {
        decide_fast(
            self.fast_mask,
            vs,
            self.decisions,
            frames,
            &mut self.st.acls,
        );
        if self.pol.logs_related {
            // OVN's `log-related`: out of the loop above, which a policy
            // without it never pays for.
            for i in (0..vs.len().min(64)).filter(|i| (self.fast_mask >> i) & 1 != 0) {
                if let Some(d) = self.decisions.get_mut(i) {
                    self.pol.log_related(d, &vs[i]);
                }
            }
        }
        self.fast += u64::from(self.fast_mask.count_ones());
    }
}

/// [`Judging::decide_fast`]'s loop, apart and out of line: inlined in
/// `Firewall::chunk` beside the tracker's loop, its state lived on the
/// stack (34 instructions a packet under callgrind, loop and reloads
/// included; 23 here, the firewall's cost over a plain lookup 96 → 86
/// instructions a packet; in time, within this host's spread:
/// BENCHMARKS.md, "The session path's decisions"). The packets of one ACL
/// in a row are counted as a run, added to the ACL's counters when the
/// ACL changes or the chunk ends: one comparison a packet instead of
/// finding the ACL's counters.
#[inline(never)]
fn decide_fast(
    mask: u64,
    vs: &[Verdict],
    decisions: &mut [Decision],
    frames: &[Vec<u8>],
    acls: &mut [AclCounters],
) {
    // The run in three locals (as a struct in `Judging`, it was written
    // back to memory every packet), and the decision of its ACL made once
    // a run. `acl` is the words' run key ([`Word::run_key`]: the ACL's
    // index plus one, and whether a policy change left the connection
    // alone); the default (0) and those left alone are not counted.
    let (mut acl, mut packets, mut bytes) = (0, 0, 0);
    let head = |key: u32| {
        let r = match Word::run_acl_plus_one(key).checked_sub(1) {
            Some(a) => AclRef::Acl(a),
            None if Word::run_persisted(key) => AclRef::Persisted,
            None => AclRef::Default,
        };
        Decision::allow(Stage::Session, r)
    };
    let mut allow = head(acl);
    let n = vs.len().min(decisions.len()).min(frames.len());
    // Packet `i`'s decision and counts; a macro, not a closure, so that it
    // is inlined in both loops below.
    macro_rules! decide {
        ($i:expr) => {{
            let i = $i;
            // The word is of this policy (`settled`): its ACL is the one
            // `session_acl` would name.
            let v = &vs[i];
            let a1 = Word::run_key(v.word);
            if a1 != acl {
                count_run(acls, acl, packets, bytes);
                (acl, packets, bytes) = (a1, 0, 0);
                allow = head(a1);
            }
            decisions[i] = Decision {
                ct: Some(*v),
                ..allow
            };
            packets += 1;
            bytes += frames[i].len() as u64;
        }};
    }
    if n < 64 && mask == (1 << n) - 1 {
        // The whole chunk left by the session, as most do: no bit to test.
        for i in 0..n {
            decide!(i);
        }
    } else {
        for i in 0..n {
            if (mask >> i) & 1 != 0 {
                decide!(i);
            }
        }
    }
    count_run(acls, acl, packets, bytes);
}

/// Adds a run of `packets` packets and `bytes` bytes to the counters of
/// the ACL of run key `key` (none for the default or a connection left
/// alone).
#[inline]
fn count_run(acls: &mut [AclCounters], key: u32, packets: u64, bytes: u64) {
    if let Some(i) = Word::run_acl_plus_one(key).checked_sub(1)
        && let Some(c) = acls.get_mut(i as usize)
    {
        c.packets += packets;
        c.bytes += bytes;
    }
}

impl<T> AfterEach for Judging<'_, T> {
    #[inline(always)]
    fn settled(&self, v: &Verdict) -> bool {
        v.conn.is_some()
            && !v.state.contains(CtState::NEW)
            && v.invalid.is_none()
            && Word::generation_of(v.word) == self.pol.generation
    }

    #[inline(always)]
    fn after(
        &mut self,
        i: usize,
        frame: &mut Vec<u8>,
        v: &mut Verdict,
        counts: &mut Stats,
    ) -> bool {
        // `settled`, with the word's generation and zones in one
        // comparison.
        let fast = v.conn.is_some()
            && !v.state.contains(CtState::NEW)
            && v.invalid.is_none()
            && self.pairs.fit(i, v);
        if fast {
            // Decided after the tracker's loop (`decide_fast`); a chunk
            // has at most `BURST` packets. (A settled packet that does not
            // fit its connection's zones is judged below without touching
            // the table, as `settled` promised the tracker.)
            debug_assert!(i < BURST);
            self.fast_mask |= 1 << i;
            return false;
        }
        self.not_settled(i, frame, v, counts);
        true
    }
}

impl<T> Judging<'_, T> {
    /// Packet `i`, whose lookup did not settle it: the per-packet path,
    /// with the tracker's counters (`counts`) taken back meanwhile. One
    /// call out of the tracker's loop, so that what it does takes no
    /// room there.
    #[inline(never)]
    #[cold]
    fn not_settled(&mut self, i: usize, frame: &mut Vec<u8>, v: &Verdict, counts: &mut Stats) {
        // A later `+new` packet of a connection committed between the
        // same ports: its word's verdict, which needs neither the ports'
        // map nor the tracker's counters.
        let pair = self.pairs.of(frame);
        if let Some(d) = by_word(self.pol, v, pair, frame.len(), self.st) {
            self.st.count(&d);
            if let Some(slot) = self.decisions.get_mut(i) {
                *slot = d;
            }
            return;
        }
        std::mem::swap(&mut self.st.tracker, counts);
        let (d, reply) = self
            .fw
            .slow(self.pol, frame, v, self.zone, self.now, self.st);
        std::mem::swap(&mut self.st.tracker, counts);
        if let Some(slot) = self.decisions.get_mut(i) {
            *slot = d;
        }
        if let Some(r) = reply {
            self.replies.push((self.base + i, r));
        }
    }
}

impl<T> Firewall<T> {
    /// A packet of a chunk that did not leave by the session fast path on
    /// its lookup's verdict `v`. Kept out of line, so that it does not
    /// crowd the tracker's burst loop it is called from: inlined in the
    /// firewall's own loop (as it was before `Judging`), the firewall
    /// took 802.6 instructions a packet on `bench policy stage`
    /// (callgrind), 792.8 with it apart.
    #[inline(never)]
    fn slow(
        &self,
        pol: &Compiled,
        frame: &mut Vec<u8>,
        v: &Verdict,
        zone: u16,
        now: Time,
        st: &mut FwStats,
    ) -> (Decision, Option<Vec<u8>>) {
        // A packet that is not for the tracker at all (neighbour
        // discovery, a frame that is not IP) is judged as frame by frame;
        // its lookup found no connection, so it changed nothing.
        // A plain IPv4 frame is neither neighbour discovery nor short of
        // an IP layer: no need to parse its layers to know.
        // Nor is what OVN keeps from conntrack (multicast, a DHCPv6
        // client's message): never committed, so never found either.
        let no_conn = v.conn.is_none() || v.state.contains(CtState::NEW);
        let alone = no_conn
            && match plain_ipv4(frame) {
                Some((h, l4)) => untracked(frame, h[23], Some(l4)),
                None => {
                    let layers = parse_frame(frame, LinkType::Ethernet);
                    is_nd_or_mld(frame, &layers)
                        || layers.ip.is_err_and(|e| !e.is_ip_ethertype())
                        || untracked_parsed(frame, &layers)
                }
            };
        if alone {
            uncount(&mut st.tracker, v);
            return self.judge(pol, frame, now, st);
        }
        let cx = Cx {
            pol,
            inport: pol.port_at(frame, 6),
            outport: pol.port_at(frame, 0),
            zone,
            now,
        };
        let d = self.after_lookup(&cx, frame, *v, st);
        st.count(&d);
        let reply = if d.action == Action::Reject {
            self.reject(pol, frame, now, st)
        } else {
            None
        };
        (d, reply)
    }
}
