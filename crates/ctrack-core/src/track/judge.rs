//! Judging a packet against the connection it belongs to.

use core::sync::atomic::Ordering::Relaxed;

use ctrack_table::{EntryRef, Guard, Hint, Removal, Seen};

use super::packet::{Call, Found, Hit, Judged, Pkt, Pre};
use super::shared::{Counted, Shared, expiry};
use super::tracker::{Fam, RETRIES, Tracker};
use crate::action::CtAction;
use crate::conn::event::{EventKind, EventSink, emit};
use crate::conn::{Conn, Kind};
use crate::key::{Addr, ConnId, Dir, LookupKey};
use crate::packet::L4Info;
use crate::proto::{IcmpState, OtherState, Update, tcp};
use crate::time::Time;
use crate::verdict::{C, CtState, InvalidReason, Stats, Verdict};
use crate::zone::{Compiled, Timeout, ZoneMeta};

#[inline(always)]
pub(super) fn apply_marks<A: Addr>(c: &Conn<A>, action: &CtAction, shared: &Shared, guard: &Guard) {
    if let Some(m) = action.mark {
        c.set_mark(m.value, m.mask);
    }
    if let Some(l) = action.label {
        c.set_label(l.value, l.mask, guard);
        shared.note_extended(true);
    }
}

#[inline]
pub(super) fn count(stats: &mut Stats, v: &Verdict) {
    count_many(stats, v, 1);
}

/// Counts `n` packets that were each given the verdict `v`.
#[inline]
pub(super) fn count_many(stats: &mut Stats, v: &Verdict, n: u64) {
    stats.add(C::Packets, n);
    if v.state.contains(CtState::NEW) {
        stats.add(C::New, n);
    }
    if v.state.contains(CtState::EST) {
        stats.add(C::Established, n);
    }
    if v.state.contains(CtState::REL) {
        stats.add(C::Related, n);
    }
    if let Some(r) = v.invalid {
        stats.add(C::Invalid, n);
        stats.invalid_many(r, n);
    }
}

/// Reports an `UPDATE` if `c`'s state name is no longer `before`. The
/// entry lock is held.
#[cold]
#[inline(never)]
fn updated<A: Addr>(
    sink: &dyn EventSink,
    c: &Conn<A>,
    before: &'static str,
    policy: &Compiled,
    now: Time,
    guard: &Guard,
) {
    if c.proto_state().state_name() != before {
        emit(sink, EventKind::Update, c, expiry(c, policy), now, guard);
    }
}

impl Tracker {
    /// Tracks a packet of family `A`, looking it up again (at most
    /// [`RETRIES`] times) if it loses a race.
    #[inline]
    pub(super) fn track<'g, A: Fam>(
        &'g self,
        cx: &mut Call<'g>,
        p: &Pkt<A>,
        cache: &mut Option<Hit<'g, A>>,
        pre: Option<Pre<'g, A>>,
        v: &mut Verdict,
    ) {
        let zone = cx.action.zone;
        // First with what the burst computed; after a lost race, afresh.
        if let Some(pre) = pre
            && self.attempt(cx, p, cache, pre, v)
        {
            return;
        }
        for _ in 0..RETRIES {
            let meta = self.shared.zones.get(zone);
            let generation = meta.map_or(0, ZoneMeta::generation);
            let key = LookupKey {
                tuple: p.tuple,
                zone,
                proto: p.proto,
                generation,
            };
            let pre = Pre {
                generation,
                hash: self.hash_of(&key),
                hint: Hint::default(),
                policy: self.shared.policy_of(meta, cx.guard),
            };
            if self.attempt(cx, p, cache, pre, v) {
                return;
            }
        }
        // Lost a race every time (a connection flapping under a flood of
        // flushes): judge the packet without storing anything.
        *v = Verdict {
            state: CtState::NEW | CtState::TRK,
            ..Verdict::new(zone)
        };
    }

    /// One attempt at judging a packet; false if it lost a race.
    #[inline]
    fn attempt<'g, A: Fam>(
        &'g self,
        cx: &mut Call<'g>,
        p: &Pkt<A>,
        cache: &mut Option<Hit<'g, A>>,
        pre: Pre<'g, A>,
        v: &mut Verdict,
    ) -> bool {
        let action = cx.action;
        let key = LookupKey {
            tuple: p.tuple,
            zone: action.zone,
            proto: p.proto,
            generation: pre.generation,
        };
        // The connection of the previous packet of the burst.
        if let Some(hit) = cache.as_ref()
            && !p.related
            && hit.key == key
            && !(action.force && action.commit && hit.dir.is_reply())
        {
            let (entry, dir) = (hit.entry, hit.dir);
            match self.track_hit(cx, p, pre.policy, entry, dir, v) {
                Judged::Done => return true,
                Judged::Lost => *cache = None,
                Judged::Reopen => {
                    *cache = None;
                    self.remove_entry(cx.guard, entry, Removal::Replaced, cx.now, cx.stats);
                    return match self.open::<A>(cx, p, &key, pre.hash, Seen::NOTHING, v) {
                        Some(hit) => {
                            *cache = hit.map(|(entry, dir)| Hit { key, entry, dir });
                            true
                        }
                        None => false,
                    };
                }
            }
        }
        match self.track_key::<A>(cx, p, &key, pre, v) {
            Some(hit) => {
                *cache = hit.map(|(entry, dir)| Hit { key, entry, dir });
                true
            }
            None => {
                *cache = None;
                false
            }
        }
    }

    /// The hash of `key`.
    #[inline]
    pub(super) fn hash_of<A: Addr>(&self, key: &LookupKey<A>) -> u64 {
        self.shared
            .hasher
            .hash_tuple(key.zone, key.generation, key.proto, &key.tuple)
    }

    /// Judges a packet against a connection found for it (not an ICMP
    /// error), writing the verdict to `v` when it is `Done`.
    #[inline]
    fn track_hit<A: Fam>(
        &self,
        cx: &mut Call<'_>,
        p: &Pkt<A>,
        policy: &Compiled,
        e: EntryRef<'_, Conn<A>>,
        dir: Dir,
        v: &mut Verdict,
    ) -> Judged {
        let Some(lock) = e.lock() else {
            return Judged::Lost;
        };
        let j = self.judge_locked(cx, p, policy, e, dir, v);
        drop(lock);
        j
    }

    /// [`Tracker::track_hit`] with the connection's entry lock held by the
    /// caller.
    #[inline(always)]
    pub(super) fn judge_locked<A: Fam>(
        &self,
        cx: &Call<'_>,
        p: &Pkt<A>,
        policy: &Compiled,
        e: EntryRef<'_, Conn<A>>,
        dir: Dir,
        v: &mut Verdict,
    ) -> Judged {
        let (guard, action, now) = (cx.guard, cx.action, cx.now.as_millis());
        let c = e.record();
        if expiry(c, policy) <= now {
            return Judged::Lost;
        }
        // Events: the state's name before the packet, if anyone listens
        // (one relaxed load when nobody does).
        let watch = self
            .shared
            .events
            .active(guard)
            .map(|sink| (sink, c.proto_state().state_name()));
        let (state, invalid) = match self.update(c, p, dir, now) {
            Update::Valid if dir.is_reply() => (CtState::EST | CtState::RPL, None),
            Update::Valid => (CtState::EST, None),
            Update::ValidNew => (CtState::NEW, None),
            Update::Invalid => (
                CtState::INV,
                Some(match p.l4 {
                    L4Info::Tcp(seg) if tcp::invalid_flags(seg.flags) => InvalidReason::TcpBadFlags,
                    _ => InvalidReason::TcpOutOfWindow,
                }),
            ),
            Update::New => return Judged::Reopen,
        };
        let special = c.special();
        let mut state = state | CtState::TRK;
        if special && c.expected(guard) {
            // Every packet of an expected connection is related (as in
            // Open vSwitch).
            state |= CtState::REL;
        }
        apply_marks(c, action, &self.shared, guard);
        if let Some((sink, before)) = watch {
            updated(sink, c, before, policy, cx.now, guard);
        }
        *v = Verdict {
            state,
            zone: action.zone,
            mark: c.mark(),
            label: match action.skip_label && !state.contains(CtState::NEW) {
                true => 0,
                false => c.label(guard),
            },
            conn: Some(ConnId::new(A::FAMILY, e.id())),
            dir,
            invalid,
            refused: None,
            committed: false,
            word: c.word(),
            inspect: special,
        };
        Judged::Done
    }

    /// One attempt at tracking a packet; `None` if it lost a race and must
    /// look again. Else the verdict is in `v`, and with it comes the
    /// connection it belongs to (for the next packet of the burst).
    fn track_key<'g, A: Fam>(
        &'g self,
        cx: &mut Call<'g>,
        p: &Pkt<A>,
        key: &LookupKey<A>,
        pre: Pre<'g, A>,
        v: &mut Verdict,
    ) -> Option<Found<'g, A>> {
        let (guard, action, now) = (cx.guard, cx.action, cx.now.as_millis());
        let table = A::table(self);
        let mut dir = Dir::Orig;
        let mut found = table.find_hinted(guard, pre.hash, pre.hint, |c| {
            match c.direction_of(key, guard) {
                Some(d) if expiry(c, pre.policy) > now => {
                    dir = d;
                    true
                }
                _ => false,
            }
        });
        if action.force
            && action.commit
            && let Some(e) = found
            && dir == Dir::Reply
        {
            self.remove_entry(guard, e, Removal::Replaced, cx.now, cx.stats);
            found = None;
        }

        let Some(e) = found else {
            if p.related {
                *v = Verdict::invalid(action.zone, InvalidReason::RelatedNotFound);
                return Some(None);
            }
            return self.open::<A>(cx, p, key, pre.hash, Seen::NOTHING, v);
        };
        let c = e.record();
        if !p.related {
            return match self.track_hit(cx, p, pre.policy, e, dir, v) {
                Judged::Done => Some(Some((e, dir))),
                Judged::Lost => None,
                Judged::Reopen => {
                    // A SYN reusing a closed connection ends it and opens a
                    // new one in its place.
                    self.remove_entry(guard, e, Removal::Replaced, cx.now, cx.stats);
                    self.open::<A>(cx, p, key, pre.hash, Seen::NOTHING, v)
                }
            };
        }
        // An ICMP error: related to the connection, which it does not move.
        let lock = e.lock()?;
        apply_marks(c, action, &self.shared, guard);
        *v = Verdict {
            state: if dir.is_reply() {
                CtState::REL | CtState::RPL | CtState::TRK
            } else {
                CtState::REL | CtState::TRK
            },
            mark: c.mark(),
            label: c.label(guard),
            word: c.word(),
            conn: Some(ConnId::new(A::FAMILY, e.id())),
            dir,
            ..Verdict::new(action.zone)
        };
        drop(lock);
        Some(None)
    }

    /// Runs the protocol tracker of a connection for the packet, refreshes
    /// its timeout and counts it. The connection's entry lock is held.
    #[inline(always)]
    pub(super) fn update<A: Addr>(&self, c: &Conn<A>, p: &Pkt<A>, dir: Dir, now: u64) -> Update {
        let reply = dir.is_reply();
        // Per kind, reading and writing only what the kind uses (building a
        // whole `ProtoState` here cost a store-forwarding stall per packet).
        let (verdict, timeout) = match (c.kind(), &p.l4) {
            (Kind::Tcp, L4Info::Tcp(seg)) => {
                let seq_check = self.tcp_seq_check.load(Relaxed);
                if seq_check && tcp::established_flags(seg.flags) && c.tcp_established(seg, reply) {
                    // An established ACK in the window, moved in place.
                    (Update::Valid, Some(Timeout::TcpEstablished))
                } else {
                    // (The shortcut was tried in place: straight to the
                    // general path.)
                    let mut t = c.tcp_state();
                    let r = tcp::update_general(&mut t, seg, reply, seq_check);
                    // A packet that ends the connection (to open a new one
                    // in its place) leaves it as it was: judging it again
                    // gives the same answer.
                    if r.0 != Update::New {
                        c.set_tcp_state(&t);
                    }
                    r
                }
            }
            // A key match implies the same protocol, so the transport
            // details agree with the state.
            (Kind::Tcp, _) => (Update::Invalid, None),
            (Kind::Icmp, _) => {
                let old = c.small_state();
                let mut s = IcmpState::from_u8(old);
                let r = s.update(reply);
                if s as u8 != old {
                    c.set_small_state(s as u8);
                }
                r
            }
            (Kind::Other, _) => {
                let old = c.small_state();
                let mut s = OtherState::from_u8(old);
                let r = s.update(reply);
                if s as u8 != old {
                    c.set_small_state(s as u8);
                }
                r
            }
        };
        if let Some(t) = timeout {
            c.refresh(now, t);
        }
        if matches!(verdict, Update::Valid | Update::ValidNew) {
            c.count(dir, p.ip_len);
        }
        verdict
    }

    /// Removes a connection found by a lookup (if it is still there) at
    /// `now`, counting the removal in `stats`.
    pub(super) fn remove_entry<A: Fam>(
        &self,
        guard: &Guard,
        e: EntryRef<'_, Conn<A>>,
        why: Removal,
        now: Time,
        stats: &mut Stats,
    ) -> bool {
        let counted = Counted::at(&self.shared, now);
        let hashes = self.shared.hashes(e.record(), guard);
        let mut w = A::table(self).write(guard, &hashes);
        let removed = w.remove(&counted, e, why);
        drop(w);
        counted.count_into(stats);
        removed
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{C, R, S, Sim, committed, hit, id_of, ping, tcp, udp, unreachable};
    use crate::key::Dir;
    use crate::verdict::{InvalidReason, Verdict};
    use ctrack_wire::tcp::flags::{ACK, FIN, PSH, SYN};

    #[test]
    fn the_handshake_is_new_then_est_rpl_then_est() {
        let sim = Sim::new();
        let v = sim.send(&tcp(true, SYN, 100, 0, b""), "commit");
        let id = id_of(&v);
        assert_eq!(v, committed("new|trk", id));
        let v = sim.send(&tcp(false, SYN | ACK, 500, 101, b""), "commit");
        assert_eq!(v, hit("est|rpl|trk", id, Dir::Reply));
        let v = sim.send(&tcp(true, ACK, 101, 501, b""), "commit");
        assert_eq!(v, hit("est|trk", id, Dir::Orig));
        let v = sim.send(&tcp(false, PSH | ACK, 501, 101, b"hello"), "commit");
        assert_eq!(v, hit("est|rpl|trk", id, Dir::Reply));
        assert_eq!(sim.stats.get().committed, 1);
    }

    #[test]
    fn a_retransmitted_syn_stays_new_on_its_connection() {
        let sim = Sim::new();
        let id = sim.open(&tcp(true, SYN, 100, 0, b""), "commit");
        let v = sim.send(&tcp(true, SYN, 100, 0, b""), "commit");
        assert_eq!(v, hit("new|trk", id, Dir::Orig));
    }

    #[test]
    fn an_out_of_window_segment_is_invalid_on_its_connection() {
        let sim = Sim::new();
        let id = sim.handshake("commit");
        let v = sim.send(&tcp(true, PSH | ACK, 101 + 1_000_000, 501, b"x"), "commit");
        assert_eq!(
            v,
            Verdict {
                invalid: Some(InvalidReason::TcpOutOfWindow),
                ..hit("inv|trk", id, Dir::Orig)
            }
        );
        let s = sim.stats.get();
        assert_eq!(s.invalid_count(InvalidReason::TcpOutOfWindow), 1);
        assert_eq!(s.invalid, 1);
        // The connection is untouched: the next segment in window is fine.
        let v = sim.send(&tcp(true, PSH | ACK, 101, 501, b"x"), "commit");
        assert_eq!(v, hit("est|trk", id, Dir::Orig));
    }

    #[test]
    fn bad_flags_on_a_connection_are_tcp_bad_flags() {
        let sim = Sim::new();
        let id = sim.handshake("commit");
        // FIN without ACK, then SYN with FIN: no stack sends either.
        for flags in [FIN, SYN | FIN] {
            let v = sim.send(&tcp(false, flags, 501, 101, b""), "commit");
            assert_eq!(
                v,
                Verdict {
                    invalid: Some(InvalidReason::TcpBadFlags),
                    ..hit("inv|trk", id, Dir::Reply)
                },
                "flags {flags:#x}"
            );
        }
        assert_eq!(sim.stats.get().invalid_count(InvalidReason::TcpBadFlags), 2);
        assert_eq!(sim.t.conn(id, sim.now).unwrap().entry.state, "ESTABLISHED");
    }

    #[test]
    fn a_syn_after_both_sides_closed_replaces_the_connection() {
        let sim = Sim::new();
        sim.handshake("commit");
        sim.close("commit");
        let v = sim.send(&tcp(true, SYN, 7_000_000, 0, b""), "commit");
        // The slot may or may not be reused: the id is whatever was given.
        let id = id_of(&v);
        assert_eq!(v, committed("new|trk", id));
        let s = sim.stats.get();
        assert_eq!((s.replaced, s.committed), (1, 2));
        assert_eq!(sim.t.table_len(), 1);
        assert_eq!(sim.t.conn(id, sim.now).unwrap().entry.state, "SYN_SENT");
        // The new connection's answer is judged against it.
        let v = sim.send(&tcp(false, SYN | ACK, 9_000_000, 7_000_001, b""), "commit");
        assert_eq!(v, hit("est|rpl|trk", id, Dir::Reply));
    }

    #[test]
    fn a_syn_after_both_sides_closed_without_commit_ends_the_connection() {
        let sim = Sim::new();
        sim.handshake("commit");
        sim.close("commit");
        let v = sim.send(&tcp(true, SYN, 7_000_000, 0, b""), "");
        assert_eq!(v, super::super::testing::verdict("new|trk"));
        assert_eq!(sim.stats.get().replaced, 1);
        assert_eq!(sim.t.table_len(), 0);
    }

    #[test]
    fn an_icmp_echo_reply_is_est_rpl() {
        let sim = Sim::new();
        let id = sim.open(&ping(7, true), "commit");
        assert_eq!(
            sim.send(&ping(7, true), "commit"),
            hit("new|trk", id, Dir::Orig)
        );
        assert_eq!(
            sim.send(&ping(7, false), "commit"),
            hit("est|rpl|trk", id, Dir::Reply)
        );
        assert_eq!(
            sim.send(&ping(7, true), "commit"),
            hit("est|trk", id, Dir::Orig)
        );
    }

    #[test]
    fn an_icmp_error_from_the_reply_side_is_rel_rpl() {
        let sim = Sim::new();
        let id = sim.open(&udp(5353, true), "commit");
        // The server's port unreachable about the client's datagram.
        let v = sim.send(&unreachable(S, C, &udp(5353, true)), "commit");
        assert_eq!(v, hit("rel|rpl|trk", id, Dir::Reply));
        assert_eq!(sim.stats.get().related, 1);
        // It neither moves nor counts the connection.
        let e = sim.t.conn(id, sim.now).unwrap().entry;
        assert_eq!((e.state, e.orig.packets, e.reply.packets), ("FIRST", 1, 0));
    }

    #[test]
    fn an_icmp_error_about_a_reply_is_rel_in_the_original_direction() {
        let sim = Sim::new();
        let id = sim.udp_both_ways(5353, "commit");
        // A router tells the server its answer did not get through.
        let v = sim.send(&unreachable(R, S, &udp(5353, false)), "commit");
        assert_eq!(v, hit("rel|trk", id, Dir::Orig));
    }

    #[test]
    fn an_icmp_error_quoting_no_connection_is_related_not_found() {
        let sim = Sim::new();
        let v = sim.send(&unreachable(S, C, &udp(5353, true)), "commit");
        assert_eq!(
            v,
            Verdict {
                invalid: Some(InvalidReason::RelatedNotFound),
                ..super::super::testing::verdict("inv|trk")
            }
        );
        assert_eq!(sim.t.table_len(), 0);
    }

    #[test]
    fn the_action_sets_mark_and_label_on_a_hit() {
        let sim = Sim::new();
        let id = sim.open(&udp(5353, true), "commit");
        let v = sim.send(&udp(5353, false), "commit,mark=0x15/0xff,label=0x300");
        assert_eq!(
            v,
            Verdict {
                mark: 0x15,
                label: 0x300,
                ..hit("est|rpl|trk", id, Dir::Reply)
            }
        );
        // A masked update keeps the other bits; a plain hit reads them back.
        let v = sim.send(&udp(5353, true), "commit,mark=0xa0/0xf0");
        assert_eq!((v.mark, v.label), (0xa5, 0x300));
        let v = sim.send(&udp(5353, true), "commit");
        assert_eq!((v.mark, v.label), (0xa5, 0x300));
        let e = sim.t.conn(id, sim.now).unwrap().entry;
        assert_eq!((e.mark, e.label), (0xa5, 0x300));
    }

    #[test]
    fn the_action_sets_the_mark_on_an_icmp_error_hit() {
        let sim = Sim::new();
        let id = sim.open(&udp(5353, true), "commit");
        let v = sim.send(&unreachable(S, C, &udp(5353, true)), "commit,mark=0x9");
        assert_eq!(
            v,
            Verdict {
                mark: 0x9,
                ..hit("rel|rpl|trk", id, Dir::Reply)
            }
        );
        assert_eq!(sim.t.conn(id, sim.now).unwrap().entry.mark, 0x9);
    }

    #[test]
    fn a_hit_in_another_zone_is_a_different_connection() {
        let sim = Sim::new();
        let a = sim.open(&udp(5353, true), "commit,zone=1");
        let v = sim.send(&udp(5353, false), "commit,zone=2");
        let b = id_of(&v);
        assert_ne!(a, b);
        assert_eq!(
            v,
            Verdict {
                zone: 2,
                ..committed("new|trk", b)
            }
        );
    }
}
