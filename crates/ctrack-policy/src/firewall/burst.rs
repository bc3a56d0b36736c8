//! The burst path: the tracker looks up a whole burst at once (prefetching
//! the table's memory for every packet before judging the first), and a
//! packet whose connection's word is current leaves at once. Only the
//! others take the per-packet path.
//!
//! Frames are judged in place and not reassembled: a datapath sends IP
//! fragments to [`Firewall::process`] instead (in a burst, the tracker
//! finds a fragment invalid and it is dropped).

use std::cell::Cell;

use ctrack_core::{ConnId, CtState, LinkType, Time, Verdict};
use ctrack_wire::parse_frame;

use super::compiled::Compiled;
use super::decision::{AclRef, Action, Decision, DropReason, FwStats, Stage, ZoneCache};
use super::engine::Firewall;
use super::judge::{Cx, session_acl, uncount};
use super::nd::is_nd_or_mld;
use super::word::Word;

/// Packets per tracker burst.
const BURST: usize = 32;

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
    /// One known difference: the tracker looks the whole burst up first,
    /// so a packet whose judging tracks it a second time (a commit, the
    /// translation of a `+new` packet, a connection judged again after a
    /// policy change) is tracked after the lookups of the burst's later
    /// packets and sees their effects (a reply that established its
    /// connection, a RST that ended it, a gateway's expectation). See
    /// docs/firewall.md, "Bursts".
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
            };
        }
        for chunk in frames.chunks_mut(BURST) {
            let n = chunk.len();
            let decisions = &mut out.decisions[base..base + n];
            let zone = zones.zone_of(&pol, &chunk[0]);
            let same_zone = chunk
                .iter()
                .all(|f| f.len() >= 14 && zones.zone_of(&pol, f) == zone);
            if pol.tracking && same_zone {
                let mut o = BurstOut {
                    decisions,
                    replies: out.replies,
                    stats: out.stats,
                };
                self.chunk(&pol, chunk, zone, now, base, &mut o);
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

    /// One frame, alone, without reassembly.
    fn judge_alone(
        &self,
        pol: &Compiled,
        frame: &mut Vec<u8>,
        now: Time,
        st: &mut FwStats,
    ) -> (Decision, Option<Vec<u8>>) {
        if frame.len() < 14 {
            let d = Decision::drop(Stage::Default, AclRef::Runt, DropReason::Runt);
            st.count(&d);
            return (d, None);
        }
        self.judge(pol, frame, now, st)
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

    #[inline(never)]
    fn miss(&mut self, pol: &Compiled, f: &[u8], pair: &[u8; 12]) -> u16 {
        let z = pol.zone_for(pol.port_at(f, 6), pol.port_at(f, 0));
        let mut rev = [0u8; 12];
        rev[..6].copy_from_slice(&pair[6..]);
        rev[6..].copy_from_slice(&pair[..6]);
        let (fa, fb) = pair_words(pair);
        let (ra, rb) = pair_words(&rev);
        self.last = Some((fa, fb, ra, rb, z));
        z
    }
}

impl<T> Firewall<T> {
    /// A chunk of frames of one zone under a tracked policy.
    fn chunk(
        &self,
        pol: &Compiled,
        chunk: &mut [Vec<u8>],
        zone: u16,
        now: Time,
        base: usize,
        out: &mut BurstOut<'_>,
    ) {
        let mut verdicts = [Verdict::default(); BURST];
        let vs = &mut verdicts[..chunk.len()];
        if pol.has_nat || pol.has_alg {
            // Translations and gateways rewrite frames: the tracker's
            // rewriting burst path. A packet of a translated connection
            // leaves translated; a `+new` one is left as it came, for the
            // ACLs.
            let action = pol.lookup_action(zone);
            self.tracker.process_burst_mut(
                chunk,
                LinkType::Ethernet,
                &action,
                now,
                vs,
                &mut out.stats.tracker,
            );
        } else {
            let mut refs: [&[u8]; BURST] = [&[]; BURST];
            for (r, f) in refs.iter_mut().zip(chunk.iter()) {
                *r = f.as_slice();
            }
            let action = pol.lookup_action(zone);
            self.tracker.process_burst(
                &refs[..chunk.len()],
                LinkType::Ethernet,
                &action,
                now,
                vs,
                &mut out.stats.tracker,
            );
        }
        out.stats.sync(pol.generation, pol.policy.acls.len());
        // What the slow path's packets did that later ones must know.
        let mut later = Later::default();
        // Packets that left by the session fast path: counted (as allowed,
        // by the session stage) once for the chunk.
        let mut fast = 0;
        for (i, (frame, v)) in chunk.iter_mut().zip(vs.iter()).enumerate() {
            let st = &mut *out.stats;
            if v.conn.is_some()
                && !v.state.contains(CtState::NEW)
                && v.invalid.is_none()
                && Word::generation_of(v.word) == pol.generation
            {
                let acl = session_acl(pol, v.word);
                if let AclRef::Acl(a) = acl
                    && let Some(c) = st.acls.get_mut(a as usize)
                {
                    c.packets += 1;
                    c.bytes += frame.len() as u64;
                }
                fast += 1;
                out.decisions[i] = Decision {
                    ct: Some(*v),
                    ..Decision::allow(Stage::Session, acl)
                };
                continue;
            }
            let (d, reply) = self.slow(pol, frame, v, zone, now, st, &mut later);
            if std::mem::take(&mut later.left) {
                fast += 1;
            }
            out.decisions[i] = d;
            if let Some(r) = reply {
                out.replies.push((base + i, r));
            }
        }
        out.stats
            .count_many(&Decision::allow(Stage::Session, AclRef::Default), fast);
    }
}

impl<T> Firewall<T> {
    /// A packet of a chunk that did not leave by the session fast path on
    /// its lookup's verdict `v`. Kept out of the chunk's loop, which it
    /// would otherwise crowd: inlined there, the firewall took 802.6
    /// instructions a packet on `bench policy stage` (callgrind), 792.8
    /// with it apart.
    #[inline(never)]
    #[allow(clippy::too_many_arguments)]
    fn slow(
        &self,
        pol: &Compiled,
        frame: &mut Vec<u8>,
        v: &Verdict,
        zone: u16,
        now: Time,
        st: &mut FwStats,
        later: &mut Later,
    ) -> (Decision, Option<Vec<u8>>) {
        // A packet of a connection an earlier packet of the burst judged
        // again under a new policy: as its lookup would have found the
        // connection after that, stamped with the new word (then it
        // leaves by the session, as frame by frame), or gone.
        let mut gone = false;
        match later.stamps.of(v) {
            Some(Some(word)) => {
                let mut w = *v;
                w.word = word;
                if w.conn.is_some()
                    && !w.state.contains(CtState::NEW)
                    && w.invalid.is_none()
                    && Word::generation_of(w.word) == pol.generation
                {
                    let acl = session_acl(pol, w.word);
                    if let AclRef::Acl(a) = acl
                        && let Some(c) = st.acls.get_mut(a as usize)
                    {
                        c.packets += 1;
                        c.bytes += frame.len() as u64;
                    }
                    later.left = true;
                    let d = Decision {
                        ct: Some(w),
                        ..Decision::allow(Stage::Session, acl)
                    };
                    return (d, None);
                }
            }
            Some(None) => gone = true,
            None => {}
        }
        // The slow path. A lookup that found no connection changed
        // nothing and may be done again: it is, when an earlier packet of
        // the burst changed the table, or when the packet is not for the
        // tracker at all.
        let layers = parse_frame(frame, LinkType::Ethernet);
        let no_conn = v.conn.is_none() || v.state.contains(CtState::NEW);
        let mut wrote = None;
        let (d, reply) = if gone
            || (no_conn && (later.changed || is_nd_or_mld(frame, &layers) || layers.ip.is_err()))
        {
            uncount(&mut st.tracker, v);
            self.judge(pol, frame, now, st)
        } else {
            let cx = Cx {
                pol,
                inport: pol.port_at(frame, 6),
                outport: pol.port_at(frame, 0),
                zone,
                now,
                wrote: Cell::new(None),
            };
            let d = self.after_lookup(&cx, frame, *v, st);
            wrote = cx.wrote.get();
            st.count(&d);
            let reply = if d.action == Action::Reject {
                self.reject(frame, now, st)
            } else {
                None
            };
            (d, reply)
        };
        later.changed |= d.reason == Some(DropReason::Blocked) || d.ct.is_some_and(|c| c.committed);
        later.stamps.push(wrote);
        (d, reply)
    }
}

/// What the slow path's packets of a chunk did that its later packets,
/// looked up before, must know.
#[derive(Default)]
struct Later {
    /// An earlier packet changed the table (committed a connection or
    /// blocked one): a later packet whose lookup found no connection is
    /// looked up again.
    changed: bool,
    /// Connections judged again under a new policy.
    stamps: Stamps,
    /// The last packet left by the session (on its connection's new
    /// word): counted as the fast path's are.
    left: bool,
}

/// What the judging of a burst's packets wrote to the connections their
/// lookups found, when it judged them again under a new policy: each
/// connection's new verdict word, or `None` where it was removed.
///
/// The burst's later packets were looked up before. One of the same
/// connection takes the word its lookup would have found, and so leaves
/// by the session fast path (as it would frame by frame, where judging
/// it again also stamped the word twice and counted two re-judgings); one
/// of a connection since removed is judged again from its lookup on (its
/// connection is gone, so the first lookup's effect on it is too).
#[derive(Default)]
struct Stamps {
    /// Empty (and unallocated) but right after a policy change.
    list: Vec<(ConnId, Option<u64>)>,
}

impl Stamps {
    #[inline(always)]
    fn push(&mut self, w: Option<(ConnId, Option<u64>)>) {
        if let Some(w) = w {
            self.list.push(w);
        }
    }

    /// What was written to `v`'s connection: its new word, or `None`
    /// where it was removed; `None` if nothing was.
    #[inline(always)]
    fn of(&self, v: &Verdict) -> Option<Option<u64>> {
        if self.list.is_empty() {
            return None;
        }
        self.find(v.conn?)
    }

    /// The last write to connection `c`.
    #[inline(never)]
    fn find(&self, c: ConnId) -> Option<Option<u64>> {
        self.list
            .iter()
            .rev()
            .find(|(id, _)| *id == c)
            .map(|&(_, w)| w)
    }
}
