//! A burst's lanes: the passes in front of judging that read each packet
//! of the common case on its family's fast path, hash it, and fetch its
//! index bucket and then its record ahead of use.

use core::sync::atomic::Ordering::Relaxed;

use ctrack_table::{Hint, Home};
use ctrack_wire::LinkType;

use super::packet::{Call, Pkt, Pre};
use super::tracker::{BURST, Tracker};
use crate::conn::Conn;
use crate::key::{Addr, V6};
use crate::zone::Compiled;

/// The fast path's view of a burst: each IPv4 (or, with `A` = [`V6`],
/// IPv6) packet's key and hash, and a guess at its record.
pub(super) struct Lanes<'g, A: Addr = u32> {
    pub(super) fast: [Option<(Pkt<A>, u64)>; BURST],
    pub(super) hints: [Hint<'g, Conn<A>>; BURST],
    /// Bit `i` set: packet `i` has a lane and the same key as packet
    /// `i - 1` (IPv4 lanes only).
    pub(super) runs: u32,
}

impl<'g, A: Addr> Lanes<'g, A> {
    /// Empty lanes, filled where they stay ([`Tracker::prefetch`] takes
    /// them by reference: returned, the 2.5 KB were copied each burst).
    pub(super) fn new() -> Lanes<'g, A> {
        Lanes {
            fast: [None; BURST],
            hints: [Hint::default(); BURST],
            runs: 0,
        }
    }

    /// Packet `i`'s key, if it has a lane, and what judging it needs.
    #[inline(always)]
    pub(super) fn at(
        &self,
        i: usize,
        generation: u32,
        policy: &'g Compiled,
    ) -> Option<(&Pkt<A>, Pre<'g, A>)> {
        let (p, hash) = self.fast.get(i)?.as_ref()?;
        let pre = Pre {
            generation,
            hash: *hash,
            hint: self.hints.get(i).copied().unwrap_or_default(),
            policy,
        };
        Some((p, pre))
    }
}

/// Pass 3, where judging reads connections' extensions
/// ([`Tracker::wants_ext`]): each packet's guessed record's extension
/// (its label; a translated connection's reply tuple), one dependent load
/// past the record, which passes 1 and 2 do not fetch. Judging a labelled
/// or translated connection waited for it (a lookup of a million labelled
/// connections took 2.2 times a plain one's time). The records' pointers
/// are read once pass 2 has asked for every record: fetching each
/// extension four packets ahead of its judging instead, with fewer misses
/// in flight, gained less (`bench lookup --conns 1000000`: 7.29 against
/// 8.27 Mpps with `--label`, 3.81 against 4.55 with `--nat --ipv6`).
pub(super) fn prefetch_exts(v4: &Lanes<'_>, v6: Option<&Lanes<'_, V6>>) {
    for h in &v4.hints {
        if let Some(c) = h.record() {
            c.prefetch_ext();
        }
    }
    if let Some(l) = v6 {
        for h in &l.hints {
            if let Some(c) = h.record() {
                c.prefetch_ext();
            }
        }
    }
}

impl Tracker {
    /// True if judging a burst under `action` may read connections'
    /// extensions: some connection has one, and the action reads labels
    /// (no [`CtAction::skip_label`](crate::CtAction)) or translates, or
    /// some connection is translated (its reply packets are matched
    /// against its own reply tuple).
    #[inline]
    pub(super) fn wants_ext(&self, action: &crate::CtAction) -> bool {
        self.shared.extended.load(Relaxed)
            && (!action.skip_label || action.nat.is_some() || self.shared.translated.load(Relaxed))
    }

    /// Passes 1 and 2 of a burst: the IPv4 fast path's key and hash of
    /// each packet, prefetching its index bucket; then a guess at each
    /// packet's record from its bucket, prefetching the record. True if
    /// it left some of the Ethernet frames (for [`Tracker::prefetch6`]).
    #[inline]
    pub(super) fn prefetch<'g>(
        &'g self,
        cx: &Call<'g>,
        frames: &[&[u8]],
        link: LinkType,
        generation: u32,
        lanes: &mut Lanes<'g>,
    ) -> bool {
        if link != LinkType::Ethernet {
            return false;
        }
        let checksums = self.checksums.load(Relaxed);
        let zone = cx.action.zone;
        // The frames' headers, all at once: a burst whose frames are not
        // in cache then waits for one miss, not one per frame.
        for f in frames {
            ctrack_table::prefetch(f.as_ptr());
        }
        let mut left = false;
        // Each packet's index bucket, found in the first pass for the
        // second.
        let mut homes = [Home::default(); BURST];
        let n = frames.len().min(BURST);
        for i in 0..n {
            let (before, this) = lanes.fast.split_at_mut(i);
            let slot = &mut this[0];
            if !Pkt::read_fast(frames[i], checksums, slot) {
                left = true;
                continue;
            }
            let Some((x, hash)) = slot else {
                continue;
            };
            // The same flow as the frame before (a run) takes its hash.
            // The key is compared with the one in that frame's lane, where
            // it is already: keeping a copy of the previous key to compare
            // cost about 30 instructions a packet (callgrind, `bench policy
            // stage`); hashing every packet and comparing keys only where
            // the hashes matched, 10 fewer on different flows but 15 more
            // on a run (`bench benchmark 1 4000000 32`: 20% slower).
            if let Some(Some((q, h))) = before.last()
                && q.tuple == x.tuple
                && q.proto == x.proto
            {
                *hash = *h;
                lanes.runs |= 1 << i;
            } else {
                let h = self
                    .shared
                    .hasher
                    .hash_tuple(zone, generation, x.proto, &x.tuple);
                *hash = h;
                homes[i] = self.v4.prefetch_home(cx.guard, h);
            }
        }
        // A packet of a run has no home of its own: only the run's first
        // is probed.
        for ((hint, pre), home) in lanes.hints.iter_mut().zip(&lanes.fast).zip(&homes) {
            if let Some((_, h)) = pre {
                *hint = self.v4.probe(*home, *h);
            }
        }
        left
    }

    /// [`Tracker::prefetch`] for the IPv6 packets of the common case among
    /// the frames the IPv4 lanes left (whose first lines it fetched
    /// already): read, hashed, their index buckets fetched, then their
    /// records guessed and fetched.
    pub(super) fn prefetch6<'g>(
        &'g self,
        cx: &Call<'g>,
        frames: &[&[u8]],
        generation: u32,
        v4: &Lanes<'g>,
        lanes: &mut Lanes<'g, V6>,
    ) {
        let checksums = self.checksums.load(Relaxed);
        let zone = cx.action.zone;
        // Once a burst, not once a packet: it is behind a `OnceLock`.
        let table = self.v6_table();
        let mut homes = [Home::default(); BURST];
        for (((slot, f), taken), home) in lanes
            .fast
            .iter_mut()
            .zip(frames)
            .zip(&v4.fast)
            .zip(&mut homes)
        {
            if taken.is_some() || !Pkt::read_fast6(f, checksums, slot) {
                continue;
            }
            if let Some((x, hash)) = slot {
                let h = self
                    .shared
                    .hasher
                    .hash_tuple(zone, generation, x.proto, &x.tuple);
                *hash = h;
                *home = table.prefetch_home(cx.guard, h);
            }
        }
        for ((hint, pre), home) in lanes.hints.iter_mut().zip(&lanes.fast).zip(&homes) {
            if let Some((_, h)) = pre {
                *hint = table.probe(*home, *h);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{Sim, act, udp};
    use crate::CtAction;

    /// A burst fetches extensions only once some connection has one, and
    /// only where judging reads them: every way a connection gets one
    /// turns it on.
    #[test]
    fn extensions_are_fetched_once_a_connection_has_one() {
        let skip = CtAction {
            skip_label: true,
            ..CtAction::lookup(0)
        };
        let lookup = CtAction::lookup(0);
        // A label on a new connection, and a label on one already there.
        for (first, then) in [
            ("commit,label=0x1", None),
            ("commit", Some("commit,label=0x2")),
        ] {
            let sim = Sim::new();
            sim.udp_both_ways(1, first);
            if let Some(then) = then {
                assert!(!sim.t.wants_ext(&lookup), "{first}: no extension yet");
                sim.send(&udp(1, true), then);
            }
            assert!(sim.t.wants_ext(&lookup), "{first} {then:?}");
            assert!(
                !sim.t.wants_ext(&skip),
                "labels skipped, nothing translated"
            );
        }
        // A label set through the library.
        let sim = Sim::new();
        let id = sim.udp_both_ways(1, "commit");
        assert!(sim.t.set_label(id, 5, u128::MAX, sim.now));
        assert!(sim.t.wants_ext(&lookup));
        // A translation: its reply packets are matched against its own
        // reply tuple, labels skipped or not.
        let sim = Sim::new();
        sim.send(&udp(1, true), "commit,nat(src=192.0.2.9)");
        assert!(sim.t.wants_ext(&lookup) && sim.t.wants_ext(&skip));
        assert!(sim.t.wants_ext(&act("nat")));
        // A plain connection gives none.
        let sim = Sim::new();
        sim.udp_both_ways(1, "commit");
        assert!(!sim.t.wants_ext(&lookup));
    }
}
