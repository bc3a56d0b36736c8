//! Opening a connection: may the packet open one, was it expected, and
//! with `commit` storing it: its translation chosen and checked under the
//! shard locks, the table and zone limits with early drop, the insert.

use core::sync::atomic::Ordering::Relaxed;
use std::sync::{MutexGuard, PoisonError};

use ctrack_table::{
    APPROX_STEP, EntryRef, Guard, Hashes, Place, Record, Removal, Seen, Table, Writer,
};

use super::config::{EARLY_DROP_BUCKETS, EARLY_DROP_SCAN, EARLY_DROP_SHARDS, SMALL_SHARD};
use super::packet::{Call, Found, Pkt};
use super::setup::Matched;
use super::shared::{Counted, FULL, FULL_IN_FLIGHT, NOT_FULL};
use super::tracker::{Fam, NAT_RETRIES, RECLAIM_ON_FULL, Tracker};
use crate::conn::event::{EventKind, emit};
use crate::conn::{Conn, First, Setup};
use crate::key::{ConnId, Dir, Family, LookupKey, instance};
use crate::packet::L4Info;
use crate::proto::{IcmpState, OtherState, ProtoState, tcp};
use crate::verdict::{C, CtState, InvalidReason, Refusal, Stats, Verdict};
use crate::zone::ZoneMeta;

/// A connection about to be committed.
struct Opening<'a, A> {
    key: &'a LookupKey<A>,
    hash: u64,
    /// The shard's insert count read before a search under `hash` that
    /// found no live record, or `Seen::NOTHING` where the caller cannot
    /// say so (see `commit_counted`).
    searched: Seen,
    proto: ProtoState,
    /// The expectation it matched (rare, and large: borrowed, not moved
    /// along with the rest).
    expected: Option<&'a Matched>,
}

/// What holding the connection's shard locks came to (a short-lived
/// value on the stack: its size does not matter).
#[allow(clippy::large_enum_variant)]
enum Locked<'g, A: Fam> {
    /// Locked, with the translation chosen and checked (in the caller's
    /// `Setup`, written in place: a moved one cost a copy of it a commit).
    Ready(Writer<'g, Conn<A>>, Hashes),
    /// The commit is refused.
    Refused(Refusal),
    /// Lost a race: look the packet up again.
    Lost,
}

impl Tracker {
    /// Decides whether the packet may open a connection and, with `commit`,
    /// stores it. `None` if it lost a race and must look again.
    pub(super) fn open<'g, A: Fam>(
        &'g self,
        cx: &mut Call<'g>,
        p: &Pkt<A>,
        key: &LookupKey<A>,
        hash: u64,
        searched: Seen,
        out: &mut Verdict,
    ) -> Option<Found<'g, A>> {
        let zone = cx.action.zone;
        let proto = match may_open::<A>(p, self.tcp_loose.load(Relaxed)) {
            Ok(proto) => proto,
            Err(reason) => {
                *out = Verdict::invalid(zone, reason);
                return Some(None);
            }
        };
        // The verdict so far (`new`, maybe `rel`), written where it goes
        // and completed there: carried along by value, it was copied
        // twice a commit.
        *out = Verdict::new(zone);
        let v = &mut *out;
        v.state = CtState::NEW | CtState::TRK;
        // A connection a gateway announced?
        let expected = if self.expect.active() {
            self.expected::<A>(cx.guard, key, cx.now.as_millis(), cx.stats)
        } else {
            None
        };
        if let Some(m) = &expected {
            v.state |= CtState::REL;
            v.mark = m.x.mark;
            v.label = m.x.label;
            // What a firewall allowed on the control connection (read with
            // its liveness check): without `commit` the packet has no
            // connection of its own to carry a word.
            v.word = m.master_word;
        }
        if !cx.action.commit {
            return Some(None);
        }
        let o = Opening {
            key,
            hash,
            searched,
            proto,
            expected: expected.as_ref(),
        };
        self.commit(cx, p, o, out)
    }

    /// Stores a new connection, within the limits, counting what the
    /// table removed to make room.
    fn commit<'g, A: Fam>(
        &'g self,
        cx: &mut Call<'g>,
        p: &Pkt<A>,
        o: Opening<'_, A>,
        out: &mut Verdict,
    ) -> Option<Found<'g, A>> {
        let counted = Counted::at(&self.shared, cx.now);
        let found = self.commit_counted(cx, p, o, &counted, out);
        counted.count_into(cx.stats);
        found
    }

    fn commit_counted<'g, A: Fam>(
        &'g self,
        cx: &mut Call<'g>,
        p: &Pkt<A>,
        o: Opening<'_, A>,
        shared: &Counted<'_>,
        out: &mut Verdict,
    ) -> Option<Found<'g, A>> {
        let (guard, now) = (cx.guard, cx.now.as_millis());
        let meta = self.shared.zones.get_or_create(cx.action.zone);
        // A recount's turn (`recount`): declared before the place, so that
        // the place is given back first.
        let mut turn = None;
        // Held from the count (or the first eviction) until the insert is
        // done: see `table_full`.
        let (mut full, mut place) = self.table_full();
        if full && self.reclaim_pending() {
            // The table is full but holds flushed connections: free some
            // before judging (with no shard lock held).
            self.reclaim_dead(shared, guard, RECLAIM_ON_FULL);
            drop(place);
            (full, place) = self.table_full();
        }
        let mut setup = Setup::default();
        let (mut w, hashes) = match self.lock_for_commit(cx, p, &o, meta, shared, &mut setup) {
            Locked::Ready(w, h) => (w, h),
            Locked::Refused(r) => return Some(refuse(r, cx.stats, out)),
            Locked::Lost => return None,
        };
        if place.is_none() && !full {
            (full, place) = self.announce(&mut w, o.hash);
        }
        let key = o.key;
        // Searched again (committed since, or an expired one passed over)
        // unless nothing went into the shard since a search that found none.
        if !w.unchanged_since(o.hash, o.searched)
            && let Some(e) = w.find(o.hash, |c| c.direction_of(key, guard).is_some())
        {
            if self.shared.expiry(e.record(), guard) > now {
                // Another thread committed it meanwhile: judge the packet
                // against it.
                return None;
            }
            w.remove_if(shared, e, Removal::Expired, |c| {
                self.shared.expiry(c, guard) <= now
            });
        }
        let admitted = match self.admit(cx, &mut w, &o, meta, full, shared, &mut place) {
            Err(Refusal::TableFull) => {
                self.recount(cx, &mut w, &o, meta, shared, &mut place, &mut turn)
            }
            admitted => admitted,
        };
        let counted = match admitted {
            Ok(counted) => counted,
            Err(r) => return Some(refuse(r, cx.stats, out)),
        };
        if !w.has_room(o.hash) {
            self.make_index_room(cx, &mut w, o.hash, shared, &mut place);
        }
        let action = cx.action;
        let first = First {
            proto: o.proto,
            counted,
            now,
            bytes: p.ip_len,
        };
        let inherit = o.expected.map(|m| m.x.mark);
        setup.label = o.expected.map_or(0, |m| m.x.label);
        // The action's label over the inherited one, under its mask (a
        // zero value clears the master's bits there), as Linux's datapath
        // does (`ovs_ct_init_labels`). Open vSwitch's userspace datapath
        // keeps an ALG-related connection's inherited mark and label
        // whatever the action says (README, "Gateways").
        if let Some(l) = action.label {
            setup.label = (setup.label & !l.mask) | (l.value & l.mask);
        }
        let res = w.insert(shared, &hashes, now, |c| {
            c.init(key, &first, &mut setup);
            if let Some(mark) = inherit {
                c.set_mark(mark, u32::MAX);
            }
            if let Some(m) = action.mark {
                c.set_mark(m.value, m.mask);
            }
        });
        let Ok(e) = res else {
            if counted {
                meta.uncount(key.generation);
            }
            return Some(refuse(Refusal::TableFull, cx.stats, out));
        };
        // NEW while the shard lock still keeps out every removal (so no
        // DESTROY of it can come first).
        if let Some(sink) = self.shared.events.active(guard) {
            let c = e.record();
            emit(
                sink,
                EventKind::New,
                c,
                self.shared.expiry(c, guard),
                cx.now,
                guard,
            );
        }
        drop(w);
        cx.stats.add(C::Committed, 1);
        if let Some(m) = o.expected {
            // Consumed by the connection it let in.
            self.expect.take(&m.key, m.x.master);
            cx.stats.add(C::ExpectMatched, 1);
        }
        self.committed(e, guard, out);
        Some(Some((e, Dir::Orig)))
    }

    /// What a commit's verdict says of the connection `e` it made; a
    /// connection made with an extension turns on [`Shared::extended`].
    ///
    /// [`Shared::extended`]: super::shared::Shared
    fn committed<A: Fam>(&self, e: EntryRef<'_, Conn<A>>, guard: &Guard, out: &mut Verdict) {
        let c = e.record();
        self.shared.note_extended(c.has_ext());
        out.conn = Some(ConnId::new(A::FAMILY, e.id()));
        out.committed = true;
        out.mark = c.mark();
        out.label = c.label(guard);
        out.word = c.word();
        out.inspect = c.special();
    }

    /// The table was taken for full and nothing could be evicted. Unless
    /// a count saw it at its limit and no announced insert was taken back
    /// since (`Shared::remembered_full`), count it again before refusing:
    /// it may have a place or two left, and without this, commits would be
    /// refused for want of room the table has until the next removal. Once
    /// a count has seen the table at its limit, a refusal costs three loads
    /// (a flood against a table full of established connections is
    /// refused cheaply).
    ///
    /// Recounts go one at a time, each holding its turn (`turn`, kept by
    /// the caller until its insert is done). Two commits that counted
    /// together each counted the other as an insert in flight, and both
    /// could refuse the one place left; if those were the last commits to
    /// come, the table stayed a place short (one of the two ways a CI run
    /// of `commits_that_looked_far_from_the_limit_do_not_pass_it` could
    /// end with 5,999 connections of 6,000; the other is the withdrawal).
    /// One at a time, a recount is refused for a commit in flight only if
    /// that commit holds a place outside the turns: one that will insert,
    /// or else recount after this one.
    /// The turn is taken with the shard locks held: whoever holds it waits
    /// for no shard (evictions take other shards' locks only when free).
    #[allow(clippy::too_many_arguments)]
    fn recount<'g, A: Fam>(
        &'g self,
        cx: &Call<'_>,
        w: &mut Writer<'_, Conn<A>>,
        o: &Opening<'_, A>,
        meta: &ZoneMeta,
        shared: &Counted<'_>,
        place: &mut Option<Place<'g>>,
        turn: &mut Option<MutexGuard<'g, ()>>,
    ) -> Result<bool, Refusal> {
        if self.shared.remembered_full(self.withdrawals()) {
            return Err(Refusal::TableFull);
        }
        // Given back before waiting for the turn: the recount holding it
        // must not count this commit as one in flight.
        *place = None;
        let mine = match turn.take() {
            Some(t) => t,
            None => self
                .shared
                .recounting
                .lock()
                .unwrap_or_else(PoisonError::into_inner),
        };
        let max = self.max_conns.load(Relaxed);
        let withdrawals = self.withdrawals();
        // Dropped before `mine` on a refusal.
        let mut counting = self.shared.gate.enter();
        let n = counting.count(GATE_TRIES, || self.table_len());
        if n.sum >= max {
            self.shared.remember(FULL, withdrawals);
            return Err(Refusal::TableFull);
        }
        if n.bound() >= max {
            self.shared.remember(FULL_IN_FLIGHT, 0);
            return Err(Refusal::TableFull);
        }
        self.shared.remember(NOT_FULL, 0);
        *turn = Some(mine);
        *place = Some(counting);
        self.admit(cx, w, o, meta, false, shared, place)
    }

    /// A commit that found the table far from its limit, with no place at
    /// the gate, announces its insert in its shard's count, then looks
    /// again. One descheduled since its look while the others filled the
    /// table finds the table near its limit now, takes back its
    /// announcement and counts through the gate (`table_full`); one that
    /// finds it still far is counted by every sum from now on, however long
    /// it waits. (Before, the others could fill the table meanwhile, and
    /// its insert ended it above its limit: 240,002 of 240,000 in `bench
    /// flood syn --threads 8` on two cores.) The fence keeps the look from
    /// being made before the announcement is seen: it costs a commit about
    /// 4% (BENCHMARKS.md).
    fn announce<A: Fam>(
        &self,
        w: &mut Writer<'_, Conn<A>>,
        hash: u64,
    ) -> (bool, Option<Place<'_>>) {
        w.reserve(hash);
        core::sync::atomic::fence(core::sync::atomic::Ordering::SeqCst);
        if !self.near_limit() {
            return (false, None);
        }
        w.unreserve(hash);
        self.table_full()
    }

    /// The index buckets from the key's home on are full (long runs form
    /// under churn near the limit): an early drop there makes room, so
    /// that the index need not grow (an index is never given back to the
    /// arena it came from). Kept from a count of the table until the
    /// insert, as `admit`'s evictions are.
    fn make_index_room<'g, A: Fam>(
        &'g self,
        cx: &Call<'_>,
        w: &mut Writer<'_, Conn<A>>,
        hash: u64,
        shared: &Counted<'_>,
        place: &mut Option<Place<'g>>,
    ) {
        let (guard, now) = (cx.guard, cx.now.as_millis());
        w.hide_count(hash);
        let gate = &self.shared.gate;
        w.evict_near(
            shared,
            hash,
            EARLY_DROP_BUCKETS,
            1,
            |c| !c.proto_state().is_established() || self.shared.expiry(c, guard) <= now,
            || {
                place.get_or_insert_with(|| gate.enter());
            },
        );
    }

    /// Chooses the translation before any lock is taken (its search looks
    /// at many shards), then takes the locks of the connection's shards and
    /// checks it again; a tuple taken meanwhile means searching again.
    fn lock_for_commit<'g, A: Fam>(
        &'g self,
        cx: &Call<'g>,
        p: &Pkt<A>,
        o: &Opening<'_, A>,
        meta: &ZoneMeta,
        shared: &Counted<'_>,
        setup: &mut Setup<A>,
    ) -> Locked<'g, A> {
        let (guard, now) = (cx.guard, cx.now.as_millis());
        let key = o.key;
        for _ in 0..NAT_RETRIES {
            if self
                .setup::<A>(guard, p, cx.action, key, o.expected, now, setup)
                .is_err()
            {
                return Locked::Refused(Refusal::NatExhausted);
            }
            let secondary = setup
                .reply
                .filter(|r| *r != key.tuple.reverse())
                .map(|r| self.hash_of(&LookupKey { tuple: r, ..*key }));
            if secondary.is_some() && !self.shared.translated.load(Relaxed) {
                self.shared.translated.store(true, Relaxed);
            }
            let hashes = Hashes {
                primary: o.hash,
                secondary,
            };
            let mut w = A::table(self).write(guard, &hashes);
            if meta.generation() != key.generation {
                // Flushed since the lookup: look again in the new generation.
                return Locked::Lost;
            }
            let (Some(r), Some(h)) = (setup.reply, secondary) else {
                // Untranslated: the reply tuple is the packet's reversed,
                // in the same bucket (the hash is symmetric). The lookup
                // found no connection of the packet's tuple, but where
                // connections are translated, a translated one's original
                // tuple (its replies go to its translated address) may be
                // this reply tuple: refused, or the tuple would be two
                // connections'.
                if self.shared.translated.load(Relaxed) {
                    let rkey = LookupKey {
                        tuple: key.tuple.reverse(),
                        ..*key
                    };
                    if let Some(e) = w.find(o.hash, |c| c.direction_of(&rkey, guard).is_some()) {
                        let gone = self.shared.expiry(e.record(), guard) <= now
                            && w.remove_if(shared, e, Removal::Expired, |c| {
                                self.shared.expiry(c, guard) <= now
                            });
                        if !gone {
                            return Locked::Refused(Refusal::Clash);
                        }
                    }
                }
                return Locked::Ready(w, hashes);
            };
            let rkey = LookupKey { tuple: r, ..*key };
            let Some(e) = w.find(h, |c| c.direction_of(&rkey, guard).is_some()) else {
                return Locked::Ready(w, hashes);
            };
            let gone = self.shared.expiry(e.record(), guard) <= now
                && w.remove_if(shared, e, Removal::Expired, |c| {
                    self.shared.expiry(c, guard) <= now
                });
            if gone {
                return Locked::Ready(w, hashes);
            }
        }
        Locked::Refused(Refusal::NatExhausted)
    }

    /// Checks the zone's and the table's limits, evicting an unestablished
    /// (or expired) connection to make room if need be (early drop): one
    /// from the new connection's hash neighbourhood (of any zone when the
    /// table is full, of its own zone when the zone is at its limit), else
    /// from the same place in the next shards, else one of the zone's
    /// oldest or newest in this shard. Returns whether the connection
    /// counts against its zone's limit. An eviction hides the count of the
    /// newcomer's shard until the insert, or takes a place at the table's
    /// gate for a victim of another shard (see `table_full`).
    #[allow(clippy::too_many_arguments)]
    fn admit<'g, A: Fam>(
        &'g self,
        cx: &Call<'_>,
        w: &mut Writer<'_, Conn<A>>,
        o: &Opening<'_, A>,
        meta: &ZoneMeta,
        full: bool,
        shared: &Counted<'_>,
        place: &mut Option<Place<'g>>,
    ) -> Result<bool, Refusal> {
        let (guard, now) = (cx.guard, cx.now.as_millis());
        let generation = o.key.generation;
        let limit = self.shared.limit_of(meta);
        let inst = instance(cx.action.zone, generation);
        // After an eviction the table has room for this one connection
        // (the eviction left the remembered "full" state alone on purpose).
        let mut evicted = false;
        loop {
            let zone_ok = limit == 0 || meta.try_count(generation, limit);
            let table_ok = evicted || !full;
            if zone_ok && table_ok {
                return Ok(limit != 0);
            }
            if limit != 0 && zone_ok {
                meta.uncount(generation);
            }
            let refusal = if table_ok {
                Refusal::ZoneLimit
            } else {
                Refusal::TableFull
            };
            // A zone whose limit was lowered below its count: one eviction
            // would not make room, and would only lose a connection. It
            // comes down to its limit as its connections end.
            if !zone_ok && meta.count() > limit {
                return Err(refusal);
            }
            // A connection that may go: not established, or expired. A
            // full table may give up any zone's (as Linux does: the
            // flood's entries are wherever the newcomer's neighbours are);
            // a zone at its limit only one of its own that its limit
            // counts (also when the table is full too: one eviction must
            // make room on both counts). The zone's connections from before
            // its limit was set count against nothing: evicting one would
            // make no room.
            let any_zone = zone_ok;
            let evictable = |c: &Conn<A>| {
                (any_zone || (c.instance() == inst && c.counted()))
                    && (!c.proto_state().is_established() || self.shared.expiry(c, guard) <= now)
            };
            // An eviction's slot waits out its grace period before it can
            // be reused; where the newcomer's shard has nothing vacant and
            // already that many slots waiting (reclamation held up by a
            // reader descheduled while pinned), the insert would take a
            // fresh slot for every eviction, and the table would outgrow
            // its limit's memory for as long as the hold-up lasts. Refuse
            // instead, before evicting anyone. (This thread's own sealed
            // batches may still sit in its cache of deferred frees, which
            // the single-packet paths hand over only now and then: hand
            // them over first, and take back what is due.)
            if w.reclaim_behind(o.hash) {
                guard.flush();
                if w.reclaim_behind(o.hash) {
                    return Err(refusal);
                }
            }
            // A small table's shard holds a handful: look next door too.
            let small = self.max_conns.load(Relaxed) / self.v4.shard_count() < SMALL_SHARD;
            let shards = if small { EARLY_DROP_SHARDS } else { 1 };
            // Until the insert, the eviction must not look like room to a
            // commit that counts the table (`table_full`). A victim of the
            // newcomer's own shard (nearly every one) is hidden: that
            // shard's count is published again only with the insert, which
            // leaves it where it was. For a victim of another shard (next
            // door, or reached through its alias) this commit first takes a
            // place at the table's gate, and is counted as in flight until
            // its insert.
            w.hide_count(o.hash);
            let gate = &self.shared.gate;
            let mut foreign = || {
                place.get_or_insert_with(|| gate.enter());
            };
            let mut near = |w: &mut Writer<'_, Conn<A>>| {
                w.evict_near(
                    shared,
                    o.hash,
                    EARLY_DROP_BUCKETS,
                    shards,
                    evictable,
                    &mut foreign,
                )
            };
            let listed = |w: &mut Writer<'_, Conn<A>>| {
                w.evict(shared, o.hash, inst, EARLY_DROP_SCAN, evictable)
            };
            // A full table: the neighbourhood first (the victim where the
            // newcomer goes). A zone at its limit: the zone's own list
            // first, whose candidates are all of the zone (its connections
            // may be few and far from the newcomer's neighbours).
            let made_room = if any_zone {
                near(w) || listed(w)
            } else if listed(w) {
                true
            } else {
                near(w)
            };
            if evicted || !made_room {
                return Err(refusal);
            }
            evicted = true;
        }
    }

    /// True if the table holds `max_conns` connections. Reads one shared
    /// approximate count; only within a few thousand of the limit does it
    /// sum the shards' exact counts (and then remembers a full table until
    /// something is removed).
    ///
    /// Near the limit the sum goes through the table's gate
    /// ([`ctrack_table::Gate`]): the commit takes a place, to hold until
    /// its insert is done, and counts the other commits holding places as
    /// inserts to come. A commit that evicts keeps its eviction from the
    /// counts until its insert (`admit`): a victim of the newcomer's own
    /// shard by hiding that shard's count until the insert publishes it
    /// (unchanged), one of another shard by taking a place first; so a
    /// count never takes an eviction's room for its own. A sum that
    /// other commits disturbed on every try decides on its bound (the sum,
    /// the commits in flight when it began and every place taken while it
    /// ran: [`ctrack_table::GateCount::bound`]), which errs towards an
    /// eviction, never an overshoot. Without the gate, threads that all find
    /// one place left all take it, and an eviction's room is taken twice:
    /// the table ends above its limit.
    pub(super) fn table_full(&self) -> (bool, Option<Place<'_>>) {
        if !self.near_limit() {
            return (false, None);
        }
        let max = self.max_conns.load(Relaxed);
        if self.shared.full_state() != NOT_FULL {
            return (true, None);
        }
        let withdrawals = self.withdrawals();
        let mut place = self.shared.gate.enter();
        let n = place.count(GATE_TRIES, || self.table_len());
        // Remembered full by every commit that finds no room. Under many
        // threads near the limit few sums settle, and the bound of one
        // that did not counts every commit that came or went meanwhile:
        // if commits that found no room only within that bound did not
        // remember it, the table would hover short of its limit with every
        // commit summing the shards (on 16 cores a flood ran at half its
        // speed so). Remembered, the table stops at most about the commits
        // in flight short of its limit until the next removal (a refusal
        // counts again first: `recount`); it never passes it.
        if n.sum >= max {
            self.shared.remember(FULL, withdrawals);
            return (true, Some(place));
        }
        if n.bound() >= max {
            self.shared.remember(FULL_IN_FLIGHT, 0);
            return (true, Some(place));
        }
        (false, Some(place))
    }
}

impl Tracker {
    /// Inserts announced and then taken back, in both families' tables
    /// (`Shared::full`).
    #[inline]
    fn withdrawals(&self) -> u64 {
        self.v4
            .withdrawals()
            .wrapping_add(self.v6.get().map_or(0, Table::withdrawals))
    }

    /// True unless the shared approximate count says the table is more
    /// than its error away from the limit.
    fn near_limit(&self) -> bool {
        let max = self.max_conns.load(Relaxed);
        // A family's table that no writer ever took counts exactly 0: no
        // error to allow for (an IPv4-only tracker's IPv6 table doubled
        // the slack, and a table of 10,000 connections at a limit of
        // 13,524 then summed every shard at every commit: 476 instructions
        // a connection, `bench cps --conns 10000`).
        let v6 = self.v6.get();
        let slack = slack_of(&self.v4) + v6.map_or(0, slack_of);
        self.v4.approx_len() + v6.map_or(0, Table::approx_len) + slack >= max
    }
}

/// The most `t.approx_len()` can be short of its count.
fn slack_of<R: Record>(t: &Table<R>) -> usize {
    match t.ever_written() {
        true => t.shard_count() * APPROX_STEP as usize,
        false => 0,
    }
}

/// Sums of the table near its limit that a commit tries for one that
/// settles (each retry follows another commit's arrival or departure
/// during the sum) before it decides on the last one's bound.
const GATE_TRIES: usize = 2;

/// May the packet open a connection, and in what protocol state.
fn may_open<A: Fam>(p: &Pkt<A>, tcp_loose: bool) -> Result<ProtoState, InvalidReason> {
    match p.l4 {
        L4Info::Tcp(seg) => {
            if tcp::invalid_flags(seg.flags) {
                return Err(InvalidReason::TcpBadFlags);
            }
            if !tcp::valid_new(seg.flags, tcp_loose) {
                return Err(InvalidReason::CannotOpen);
            }
            Ok(ProtoState::Tcp(tcp::new_conn(&seg)))
        }
        L4Info::IcmpQuery { msg_type } => {
            let request = match A::FAMILY {
                Family::V4 => ctrack_wire::icmp::v4::is_request(msg_type),
                Family::V6 => msg_type == ctrack_wire::icmp::v6::ECHO_REQUEST,
            };
            if !request {
                return Err(InvalidReason::CannotOpen);
            }
            Ok(ProtoState::Icmp(IcmpState::First))
        }
        L4Info::Other => Ok(ProtoState::Other(OtherState::First)),
    }
}

/// Reports a refused commit.
fn refuse<'g, A: Fam>(r: Refusal, stats: &mut Stats, out: &mut Verdict) -> Found<'g, A> {
    out.refused = Some(r);
    stats.add(
        match r {
            Refusal::TableFull => C::RefusedTableFull,
            Refusal::ZoneLimit => C::RefusedZoneLimit,
            Refusal::NatExhausted => C::RefusedNatExhausted,
            Refusal::Clash => C::RefusedClash,
        },
        1,
    );
    None
}

#[cfg(test)]
mod tests {
    use super::super::Config;
    use super::super::packet::Pkt;
    use super::super::testing::{Sim, alone, committed, id_of, ping, tcp, udp, udp_key, verdict};
    use super::may_open;
    use crate::key::{Tuple, V6};
    use crate::packet::L4Info;
    use crate::proto::tcp::{Segment, WSCALE_UNKNOWN};
    use crate::proto::{IcmpState, OtherState, ProtoState, TcpState};
    use crate::verdict::{InvalidReason, Refusal, Verdict};
    use ctrack_wire::icmp::{v4, v6};
    use ctrack_wire::tcp::flags::{ACK, FIN, PSH, RST, SYN};

    use super::EARLY_DROP_SCAN;

    fn pkt<A: Default>(l4: L4Info) -> Pkt<A> {
        Pkt {
            tuple: Tuple::default(),
            proto: 0,
            related: false,
            l4,
            ip_len: 40,
        }
    }

    fn seg(flags: u16) -> L4Info {
        L4Info::Tcp(Segment {
            flags,
            seq: 1000,
            win: 65535,
            ..Segment::default()
        })
    }

    /// The two sides' states of a TCP connection `may_open` starts.
    fn tcp_states(r: Result<ProtoState, InvalidReason>) -> (TcpState, TcpState) {
        match r {
            Ok(ProtoState::Tcp(c)) => (c.peers[0].state, c.peers[1].state),
            other => panic!("not a TCP connection: {other:?}"),
        }
    }

    #[test]
    fn may_open_a_syn_starts_syn_sent() {
        for loose in [false, true] {
            let r = may_open::<u32>(&pkt(seg(SYN)), loose);
            assert_eq!(tcp_states(r), (TcpState::SynSent, TcpState::Closed));
        }
    }

    #[test]
    fn may_open_never_a_syn_ack() {
        for loose in [false, true] {
            let r = may_open::<u32>(&pkt(seg(SYN | ACK)), loose);
            assert_eq!(r, Err(InvalidReason::CannotOpen), "loose {loose}");
        }
    }

    #[test]
    fn may_open_mid_stream_only_when_loose() {
        for flags in [ACK, PSH | ACK, FIN | ACK, RST] {
            let strict = may_open::<u32>(&pkt(seg(flags)), false);
            assert_eq!(strict, Err(InvalidReason::CannotOpen), "{flags:#x}");
            let Ok(ProtoState::Tcp(c)) = may_open::<u32>(&pkt(seg(flags)), true) else {
                panic!("{flags:#x} opens when loose");
            };
            // Picked up mid-stream: neither side's window scale is known.
            assert_eq!(c.peers[0].state, TcpState::SynSent);
            assert_eq!(c.peers[0].wscale, WSCALE_UNKNOWN);
            assert_eq!(c.peers[1].wscale, WSCALE_UNKNOWN);
        }
    }

    #[test]
    fn may_open_refuses_bad_flags_before_anything_else() {
        for flags in [SYN | RST, SYN | FIN, FIN, PSH, 0] {
            for loose in [false, true] {
                let r = may_open::<u32>(&pkt(seg(flags)), loose);
                assert_eq!(r, Err(InvalidReason::TcpBadFlags), "{flags:#x}");
            }
        }
    }

    #[test]
    fn may_open_icmp_requests_only() {
        let q = |msg_type| L4Info::IcmpQuery { msg_type };
        for ty in [v4::ECHO_REQUEST, v4::TIMESTAMP, v4::INFO_REQUEST] {
            let r = may_open::<u32>(&pkt(q(ty)), true);
            assert_eq!(r, Ok(ProtoState::Icmp(IcmpState::First)), "type {ty}");
        }
        let r = may_open::<u32>(&pkt(q(v4::ECHO_REPLY)), true);
        assert_eq!(r, Err(InvalidReason::CannotOpen));
        let r = may_open::<V6>(&pkt(q(v6::ECHO_REQUEST)), true);
        assert_eq!(r, Ok(ProtoState::Icmp(IcmpState::First)));
        let r = may_open::<V6>(&pkt(q(v6::ECHO_REPLY)), true);
        assert_eq!(r, Err(InvalidReason::CannotOpen));
        // An IPv4 echo request's number means nothing in ICMPv6.
        let r = may_open::<V6>(&pkt(q(v4::ECHO_REQUEST)), true);
        assert_eq!(r, Err(InvalidReason::CannotOpen));
    }

    #[test]
    fn may_open_any_other_protocol() {
        let r = may_open::<u32>(&pkt(L4Info::Other), false);
        assert_eq!(r, Ok(ProtoState::Other(OtherState::First)));
    }

    fn invalid(reason: InvalidReason) -> Verdict {
        Verdict {
            invalid: Some(reason),
            ..verdict("inv|trk")
        }
    }

    #[test]
    fn a_syn_ack_cannot_open() {
        let sim = Sim::new();
        let v = sim.send(&tcp(false, SYN | ACK, 500, 101, b""), "commit");
        assert_eq!(v, invalid(InvalidReason::CannotOpen));
        assert_eq!(sim.stats.get().invalid_count(InvalidReason::CannotOpen), 1);
        assert_eq!(sim.t.table_len(), 0);
    }

    #[test]
    fn an_icmp_echo_reply_cannot_open() {
        let sim = Sim::new();
        let v = sim.send(&ping(7, false), "commit");
        assert_eq!(v, invalid(InvalidReason::CannotOpen));
        assert_eq!(sim.t.table_len(), 0);
    }

    #[test]
    fn bad_flags_cannot_open() {
        let sim = Sim::new();
        let v = sim.send(&tcp(true, SYN | RST, 100, 0, b""), "commit");
        assert_eq!(v, invalid(InvalidReason::TcpBadFlags));
        assert_eq!(sim.stats.get().invalid_count(InvalidReason::TcpBadFlags), 1);
        assert_eq!(sim.t.table_len(), 0);
    }

    #[test]
    fn tcp_loose_on_picks_up_a_connection_mid_stream() {
        let sim = Sim::new();
        let v = sim.send(&tcp(true, PSH | ACK, 1000, 2000, b"data"), "commit");
        assert_eq!(v, committed("new|trk", id_of(&v)));
        assert_eq!(sim.t.table_len(), 1);
    }

    #[test]
    fn tcp_loose_off_lets_only_a_syn_open() {
        let sim = Sim::new();
        sim.t.set_tcp_loose(false);
        let v = sim.send(&tcp(true, PSH | ACK, 1000, 2000, b"data"), "commit");
        assert_eq!(v, invalid(InvalidReason::CannotOpen));
        assert_eq!(sim.t.table_len(), 0);
        let v = sim.send(&tcp(true, SYN, 100, 0, b""), "commit");
        assert_eq!(v, committed("new|trk", id_of(&v)));
        // Back on: mid-stream pickup again.
        sim.t.set_tcp_loose(true);
        sim.flush_all();
        let v = sim.send(&tcp(true, PSH | ACK, 1000, 2000, b"data"), "commit");
        assert!(v.committed, "{v:?}");
    }

    #[test]
    fn without_commit_a_packet_is_new_with_no_connection() {
        let sim = Sim::new();
        for _ in 0..2 {
            let v = sim.send(&tcp(true, SYN, 100, 0, b""), "zone=3");
            assert_eq!(
                v,
                Verdict {
                    zone: 3,
                    ..verdict("new|trk")
                }
            );
        }
        assert_eq!(sim.t.table_len(), 0);
        assert_eq!(sim.stats.get().committed, 0);
        assert_eq!(sim.t.zone_limit(3), (0, 0));
    }

    #[test]
    fn a_zone_at_its_limit_refuses_and_counts() {
        let sim = Sim::one_shard(100);
        sim.t.set_zone_limit(3, 1);
        sim.udp_both_ways(1000, "commit,zone=3");
        let v = sim.send(&tcp(true, SYN, 100, 0, b""), "commit,zone=3");
        assert_eq!(
            v,
            Verdict {
                zone: 3,
                refused: Some(Refusal::ZoneLimit),
                ..verdict("new|trk")
            }
        );
        let s = sim.stats.get();
        assert_eq!((s.refused_zone_limit, s.evicted, s.committed), (1, 0, 1));
        assert_eq!(sim.t.zone_limit(3), (1, 1));
        // Another zone has no limit.
        let v = sim.send(&tcp(true, SYN, 100, 0, b""), "commit,zone=4");
        assert!(v.committed, "{v:?}");
    }

    #[test]
    fn a_zone_at_its_limit_evicts_an_unestablished_connection() {
        let sim = Sim::one_shard(100);
        sim.t.set_zone_limit(3, 1);
        sim.open(&udp(1000, true), "commit,zone=3");
        let v = sim.send(&tcp(true, SYN, 100, 0, b""), "commit,zone=3");
        assert_eq!(
            v,
            Verdict {
                zone: 3,
                ..committed("new|trk", id_of(&v))
            }
        );
        assert_eq!(sim.stats.get().evicted, 1);
        assert_eq!(sim.t.zone_limit(3), (1, 1));
        assert!(sim.t.lookup(&udp_key(1000, 3), sim.now).is_none());
    }

    #[test]
    fn a_full_table_evicts_an_unestablished_connection_of_the_zone() {
        let sim = Sim::one_shard(2);
        let kept = sim.udp_both_ways(1000, "commit");
        sim.open(&udp(2000, true), "commit");
        let v = sim.send(&udp(3000, true), "commit");
        assert_eq!(v, committed("new|trk", id_of(&v)));
        let s = sim.stats.get();
        assert_eq!((s.evicted, s.refused_table_full), (1, 0));
        assert_eq!(sim.t.table_len(), 2);
        assert!(sim.t.lookup(&udp_key(2000, 0), sim.now).is_none());
        assert_eq!(sim.t.lookup(&udp_key(1000, 0), sim.now).unwrap().0, kept);
    }

    /// In a process of its own ([`alone`]): what it checks after the
    /// reader is gone needs the epoch to move, which another test holding
    /// a pin at the same moment would stop.
    #[test]
    #[cfg_attr(miri, ignore)] // Miri runs no other process.
    fn a_full_table_stops_evicting_while_reclamation_is_held_up() {
        alone(
            "track::open::tests::a_full_table_stops_evicting_while_reclamation_is_held_up",
            full_table_held_up,
        );
    }

    fn full_table_held_up() {
        let sim = Sim::one_shard(100);
        for port in 0..100 {
            sim.open(&udp(1000 + port, true), "commit");
        }
        let slots = |sim: &Sim| sim.t.memory().slots_in_use;
        assert_eq!(slots(&sim), 100);
        let grace = crate::GRACE_SLOTS_PER_SHARD as u64;
        let n = 3 * grace as u16;
        // A reader pinned all along (as a packet thread descheduled while
        // pinned): no evicted slot can come back meanwhile.
        let held = ctrack_table::pin();
        for port in 0..n {
            sim.send(&udp(5000 + port, true), "commit");
        }
        let s = sim.stats.get();
        assert_eq!(
            (s.evicted, s.refused_table_full),
            (grace, u64::from(n) - grace)
        );
        assert_eq!(sim.t.table_len(), 100);
        // Without the refusals: one slot for every eviction.
        assert_eq!(slots(&sim), 100 + grace as usize);
        assert_eq!(sim.t.memory().grace_peak_shard, grace as usize);
        // Once the reader is gone the slots come back, and evictions make
        // room again without the table growing. (One packet at a time,
        // this thread hands its sealed batches to the collector only when
        // its shard runs short, and the epoch moves one step a visit: a
        // commit now and then may find them not back yet.)
        drop(held);
        for port in 0..n {
            sim.send(&udp(9000 + port, true), "commit");
        }
        let after = sim.stats.get();
        let refused = after.refused_table_full - s.refused_table_full;
        assert!(refused <= u64::from(n) / grace + 1, "{refused} refused");
        assert_eq!(after.evicted - s.evicted, u64::from(n) - refused);
        assert!(slots(&sim) <= 100 + grace as usize, "{}", slots(&sim));
    }

    #[test]
    fn a_full_table_never_evicts_an_established_connection() {
        let sim = Sim::one_shard(1);
        let kept = sim.udp_both_ways(1000, "commit");
        let v = sim.send(&tcp(true, SYN, 100, 0, b""), "commit");
        assert_eq!(
            v,
            Verdict {
                refused: Some(Refusal::TableFull),
                ..verdict("new|trk")
            }
        );
        let s = sim.stats.get();
        assert_eq!((s.evicted, s.refused_table_full), (0, 1));
        assert_eq!(sim.t.lookup(&udp_key(1000, 0), sim.now).unwrap().0, kept);
    }

    /// A commit refused for want of room in the table counts nothing
    /// against its zone's limit, however often it is tried: once the table
    /// has room, the zone takes up to its limit.
    #[test]
    fn a_commit_the_full_table_refuses_counts_nothing_against_its_zone() {
        let sim = Sim::one_shard(1);
        sim.t.set_zone_limit(3, 2);
        sim.udp_both_ways(1000, "commit,zone=1");
        for seq in [100, 101, 102] {
            let v = sim.send(&tcp(true, SYN, seq, 0, b""), "commit,zone=3");
            assert_eq!(v.refused, Some(Refusal::TableFull), "{v:?}");
        }
        assert_eq!(sim.t.zone_limit(3), (2, 0));
        sim.t.set_max_conns(3);
        for sport in [2000, 2001] {
            let v = sim.send(&udp(sport, true), "commit,zone=3");
            assert!(v.committed, "{v:?}");
        }
        assert_eq!(sim.t.zone_limit(3), (2, 2));
    }

    #[test]
    fn a_full_table_evicts_an_unestablished_connection_of_any_zone() {
        // As Linux: when the table is full, a flood's entries make room
        // wherever they are, so that a flood in one zone cannot lock the
        // other zones out of the table.
        let sim = Sim::one_shard(1);
        sim.open(&udp(1000, true), "commit,zone=1");
        let v = sim.send(&udp(2000, true), "commit,zone=2");
        assert!(v.committed, "{v:?}");
        assert_eq!(sim.stats.get().evicted, 1);
        assert!(sim.t.lookup(&udp_key(1000, 1), sim.now).is_none());
    }

    #[test]
    fn a_zone_at_its_limit_does_not_evict_from_another_zone() {
        let sim = Sim::one_shard(100);
        sim.t.set_zone_limit(2, 1);
        sim.open(&udp(1000, true), "commit,zone=1");
        sim.udp_both_ways(3000, "commit,zone=2");
        let v = sim.send(&udp(2000, true), "commit,zone=2");
        assert_eq!(v.refused, Some(Refusal::ZoneLimit), "{v:?}");
        assert_eq!(sim.stats.get().evicted, 0);
        assert!(sim.t.lookup(&udp_key(1000, 1), sim.now).is_some());
    }

    #[test]
    fn a_zone_at_its_limit_evicts_only_a_connection_its_limit_counts() {
        // The older connection came before the limit and counts against
        // nothing: evicting it would make no room (the commit was refused
        // after losing it). The one the limit counts goes.
        let sim = Sim::one_shard(100);
        sim.open(&udp(1000, true), "commit,zone=3");
        sim.t.set_zone_limit(3, 1);
        sim.open(&udp(1001, true), "commit,zone=3");
        assert_eq!(sim.t.zone_limit(3), (1, 1));
        let v = sim.send(&udp(2000, true), "commit,zone=3");
        assert!(v.committed, "{v:?}");
        assert_eq!(sim.stats.get().evicted, 1);
        assert!(sim.t.lookup(&udp_key(1000, 3), sim.now).is_some());
        assert!(sim.t.lookup(&udp_key(1001, 3), sim.now).is_none());
        assert_eq!(sim.t.zone_limit(3), (1, 1));
    }

    #[test]
    fn a_zone_above_a_lowered_limit_refuses_without_evicting() {
        // Three counted, the limit lowered to one: an eviction would leave
        // two, still over it, and the newcomer refused all the same.
        let sim = Sim::one_shard(100);
        sim.t.set_zone_limit(3, 3);
        for port in 1000..1003 {
            sim.open(&udp(port, true), "commit,zone=3");
        }
        sim.t.set_zone_limit(3, 1);
        let v = sim.send(&udp(2000, true), "commit,zone=3");
        assert_eq!(v.refused, Some(Refusal::ZoneLimit), "{v:?}");
        assert_eq!(sim.stats.get().evicted, 0);
        assert_eq!(sim.t.zone_limit(3), (1, 3));
        for port in 1000..1003 {
            assert!(sim.t.lookup(&udp_key(port, 3), sim.now).is_some());
        }
    }

    #[test]
    fn a_zone_at_its_limit_falls_back_on_the_newcomer_s_neighbours() {
        // The zone's oldest and newest (`EARLY_DROP_SCAN` each) are all
        // established; the one that may go is between them. A table of
        // 40 in one shard has an index of four buckets: all of them are
        // the newcomer's neighbourhood.
        let sim = Sim::one_shard(40);
        let n = 2 * EARLY_DROP_SCAN + 1;
        sim.t.set_zone_limit(3, n as u32);
        for i in 0..n {
            let port = 1000 + i as u16;
            if i == EARLY_DROP_SCAN {
                sim.open(&udp(port, true), "commit,zone=3");
            } else {
                sim.udp_both_ways(port, "commit,zone=3");
            }
        }
        let v = sim.send(&udp(3000, true), "commit,zone=3");
        assert!(v.committed, "{v:?}");
        assert_eq!(sim.stats.get().evicted, 1);
        let gone = 1000 + EARLY_DROP_SCAN as u16;
        assert!(sim.t.lookup(&udp_key(gone, 3), sim.now).is_none());
        assert_eq!(sim.t.zone_limit(3), (n as u32, n as u32));
    }

    #[test]
    fn a_small_full_table_evicts_from_the_next_shard() {
        // Four shards of 40 (an index of four buckets each, one window
        // of an early drop). The newcomer's shard holds only established
        // connections; the next shard, both of whose index entries
        // hold it, has the one that may go.
        let sim = Sim::with(Config {
            max_conns: 160,
            shards: 4,
            ..Config::default()
        });
        let shards = |port: u16| {
            let k = udp_key(port, 0);
            (sim.t.shard_of(&k), sim.t.shard_of(&k.reverse()))
        };
        let home = shards(3000).0;
        let next = (home + 1) % 4;
        let victim = (1000..).find(|&p| shards(p) == (next, next)).unwrap();
        let at_home: Vec<u16> = (1000..).filter(|&p| shards(p).0 == home).take(3).collect();
        for &port in &at_home {
            sim.udp_both_ways(port, "commit");
        }
        sim.open(&udp(victim, true), "commit");
        sim.t.set_max_conns(sim.t.table_len());
        let v = sim.send(&udp(3000, true), "commit");
        assert!(v.committed, "{v:?}");
        let s = sim.stats.get();
        assert_eq!((s.evicted, s.refused_table_full), (1, 0));
        assert!(sim.t.lookup(&udp_key(victim, 0), sim.now).is_none());
        for port in at_home {
            assert!(sim.t.lookup(&udp_key(port, 0), sim.now).is_some());
        }
    }

    /// Where the index buckets from a newcomer's home on are full (keys
    /// chosen to share one home bucket, in an index far from half full,
    /// which does not grow for them), its commit makes room by early drop
    /// there, of an unestablished connection and never of an established
    /// one, though the table is far from its limit; without it the insert
    /// finds no entry and is refused. (Mutation round 45: no test reached
    /// `make_index_room`; without it the newcomer's commit here is
    /// refused, and with its choice turned it is refused or evicts an
    /// established connection.)
    ///
    /// The keys are chosen by the index's home bucket as the table
    /// computes it (`Index::home`: the hash's bits 8 to 39 scaled to the
    /// buckets, of 64 bytes each); the table's own `has_room` says when
    /// the run is full, and a change to either shows as the run never
    /// filling.
    #[test]
    fn a_full_run_of_index_buckets_makes_room_by_early_drop() {
        use crate::key::{ConnKey, Endpoint, Family};
        use ctrack_table::Hashes;
        use ctrack_wire::build::{Frame, L4};
        use std::net::Ipv4Addr;
        let sim = Sim::one_shard(4096);
        let key = |i: u32| ConnKey {
            src: Endpoint::v4(Ipv4Addr::from(0x0a00_0000 | i), 1000),
            dst: Endpoint::v4(Ipv4Addr::new(192, 0, 2, 2), 53),
            zone: 0,
            proto: ctrack_wire::ip_proto::UDP,
            family: Family::V4,
        };
        let frame = |i: u32, out: bool| {
            let (c, s) = (
                [10, (i >> 16) as u8, (i >> 8) as u8, i as u8],
                [192, 0, 2, 2],
            );
            match out {
                true => Frame::v4(c, s, L4::udp(1000, 53, b"q")),
                false => Frame::v4(s, c, L4::udp(53, 1000, b"a")),
            }
        };
        let index_bytes = || sim.t.v4.memory().index_bytes;
        let before = index_bytes();
        let buckets = (before / 64) as u64;
        let hash = |i: u32| sim.t.shared.hasher.hash(&key(i));
        let home = |i: u32| (u64::from((hash(i) >> 8) as u32) * buckets) >> 32;
        let has_room = |i: u32| {
            let guard = ctrack_table::pin();
            let h = hash(i);
            let hashes = Hashes {
                primary: h,
                secondary: None,
            };
            sim.t.v4.write(&guard, &hashes).has_room(h)
        };
        let newcomer = 1;
        let mut run = (2..).filter(|&i| home(i) == home(newcomer));
        // The fifth of the run unestablished, the rest established: an
        // early drop that took the first live connection it met would
        // take an established one.
        let mut held = Vec::new();
        while has_room(newcomer) {
            assert!(
                held.len() < 2000,
                "the run never filled: `home` is not the table's"
            );
            let i = run.next().unwrap();
            let v = sim.send(&frame(i, true), "commit");
            assert!(v.committed, "{v:?}");
            if held.len() != 4 {
                sim.send(&frame(i, false), "commit");
            }
            held.push(i);
        }
        assert!(held.len() * 4 < 4096, "far from the limit: {}", held.len());
        let v = sim.send(&frame(newcomer, true), "commit");
        assert!(v.committed, "{v:?}");
        assert_eq!(sim.stats.get().evicted, 1);
        assert_eq!(index_bytes(), before, "the index did not grow");
        for (n, &i) in held.iter().enumerate() {
            let found = sim.t.lookup(&key(i), sim.now).is_some();
            assert_eq!(found, n != 4, "connection {n} of the run");
        }
    }

    /// Whether a table is small, its limit a shard's under
    /// [`SMALL_SHARD`], decides whether a full one's early drop looks next
    /// door: two shards at their limit of `per_shard` each, the
    /// newcomer's holding only established connections, the other only
    /// unestablished ones. A small table evicts one of those; one whose
    /// shards hold `SMALL_SHARD` each refuses. (Mutation round 45: the
    /// limit's share of a shard turned into its remainder or its
    /// multiple, or the bound taken in, passed the test above, whose
    /// table is a handful.)
    #[test]
    fn only_a_small_full_table_evicts_next_door() {
        use super::super::config::SMALL_SHARD;
        for (per_shard, small) in [(300, true), (SMALL_SHARD - 1, true), (SMALL_SHARD, false)] {
            let sim = Sim::with(Config {
                max_conns: 2 * per_shard,
                shards: 2,
                ..Config::default()
            });
            let shard = |port: u16| sim.t.shard_of(&udp_key(port, 0));
            let home = shard(1);
            let (mut at_home, mut next_door) = (0, 0);
            for port in 2..=u16::MAX {
                if at_home == per_shard && next_door == per_shard {
                    break;
                }
                if shard(port) == home && at_home < per_shard {
                    sim.udp_both_ways(port, "commit");
                    at_home += 1;
                } else if shard(port) != home && next_door < per_shard {
                    sim.open(&udp(port, true), "commit");
                    next_door += 1;
                }
            }
            assert_eq!(sim.t.table_len(), 2 * per_shard);
            let v = sim.send(&udp(1, true), "commit");
            let s = sim.stats.get();
            if small {
                assert!(v.committed, "{per_shard}: {v:?}");
                assert_eq!((s.evicted, s.refused_table_full), (1, 0), "{per_shard}");
            } else {
                assert_eq!(v.refused, Some(Refusal::TableFull), "{per_shard}: {v:?}");
                assert_eq!((s.evicted, s.refused_table_full), (0, 1), "{per_shard}");
            }
        }
    }

    #[test]
    fn a_full_table_and_a_zone_at_its_limit_evict_from_that_zone() {
        // One eviction must make room on both counts: another zone's
        // connection would free the table and leave the zone at its limit.
        for order in [[1u16, 2], [2, 1]] {
            let sim = Sim::one_shard(2);
            sim.t.set_zone_limit(1, 1);
            for z in order {
                sim.open(&udp(1000 + z, true), &format!("commit,zone={z}"));
            }
            let v = sim.send(&udp(3000, true), "commit,zone=1");
            assert!(v.committed, "{order:?}: {v:?}");
            assert_eq!(sim.stats.get().evicted, 1);
            assert!(sim.t.lookup(&udp_key(1001, 1), sim.now).is_none());
            assert!(sim.t.lookup(&udp_key(1002, 2), sim.now).is_some());
        }
    }

    #[test]
    fn a_full_table_evicts_an_expired_established_connection() {
        let mut sim = Sim::one_shard(1);
        sim.udp_both_ways(1000, "commit");
        // Both ways: 30 s. Expired, not yet swept.
        sim.at(31_000);
        assert_eq!(sim.t.table_len(), 1);
        let v = sim.send(&udp(2000, true), "commit");
        assert_eq!(v, committed("new|trk", id_of(&v)));
        assert_eq!(sim.stats.get().evicted, 1);
    }

    /// A connection is over at the very millisecond its timeout runs out,
    /// as a lookup has it (`expiry > now` is live): a packet of its tuple
    /// then opens a new one, and the commit, finding the old one under
    /// the shard lock, removes it as expired rather than leaving it
    /// beside the new one. (Mutation round 45: the commit taking a
    /// connection expiring at `now` for live lost the race on every try;
    /// and with the removal's own check turned, two connections stood
    /// under one tuple.)
    #[test]
    fn a_commit_at_the_expiry_replaces_the_expired_connection() {
        let mut sim = Sim::new();
        sim.udp_both_ways(1000, "commit");
        // Both ways: 30 s. Not yet swept.
        sim.at(30_000);
        let v = sim.send(&udp(1000, true), "commit");
        assert_eq!(v, committed("new|trk", id_of(&v)));
        assert_eq!(sim.t.table_len(), 1);
        assert_eq!(sim.ids(None), vec![id_of(&v)]);
        assert_eq!(sim.stats.get().expired, 1);
        // A millisecond before it, the connection was live.
        let mut sim = Sim::new();
        let old = sim.udp_both_ways(1000, "commit");
        sim.at(29_999);
        let v = sim.send(&udp(1000, true), "commit");
        assert_eq!(v.conn, Some(old));
        assert_eq!(v.state.to_string(), "est|trk");
    }

    /// A full table of `EARLY_DROP_SCAN + 1` connections, established but
    /// for the one at `unestablished` (0: the oldest).
    fn full_with_one_unestablished_at(unestablished: usize) -> Sim {
        let sim = Sim::one_shard(EARLY_DROP_SCAN + 1);
        for i in 0..=EARLY_DROP_SCAN {
            let port = 1000 + i as u16;
            if i == unestablished {
                sim.open(&udp(port, true), "commit");
            } else {
                sim.udp_both_ways(port, "commit");
            }
        }
        assert_eq!(sim.t.table_len(), EARLY_DROP_SCAN + 1);
        sim
    }

    #[test]
    fn early_drop_looks_at_the_zone_s_oldest_connections() {
        let sim = full_with_one_unestablished_at(EARLY_DROP_SCAN - 1);
        let v = sim.send(&udp(3000, true), "commit");
        assert_eq!(v, committed("new|trk", id_of(&v)));
        assert_eq!(sim.stats.get().evicted, 1);
        let gone = 1000 + EARLY_DROP_SCAN as u16 - 1;
        assert!(sim.t.lookup(&udp_key(gone, 0), sim.now).is_none());
    }

    #[test]
    fn early_drop_finds_the_unestablished_among_the_neighbours() {
        // The youngest is the only one that may go: the zone's oldest are
        // all established, the neighbourhood has it.
        let sim = full_with_one_unestablished_at(EARLY_DROP_SCAN);
        let v = sim.send(&udp(3000, true), "commit");
        assert!(v.committed, "{v:?}");
        let s = sim.stats.get();
        assert_eq!((s.evicted, s.refused_table_full), (1, 0));
        assert_eq!(sim.t.table_len(), EARLY_DROP_SCAN + 1);
        let gone = 1000 + EARLY_DROP_SCAN as u16;
        assert!(sim.t.lookup(&udp_key(gone, 0), sim.now).is_none());
    }

    /// A table of four with three answered connections (none evictable):
    /// one place left.
    fn one_place_left() -> Sim {
        let sim = Sim::one_shard(4);
        for port in 1000..1003 {
            sim.udp_both_ways(port, "commit");
        }
        sim
    }

    /// A recount waits for the recount in progress (here held by the
    /// test: its turn, and its place at the gate) rather than counting it
    /// as a commit in flight. Without the turns, the commit counted that
    /// place, found the table's last place taken by it, and refused; two
    /// recounts that did so to each other left the place empty for good.
    #[test]
    fn a_recount_waits_for_the_recount_in_progress() {
        use super::super::shared::FULL_IN_FLIGHT;
        use crate::time::Time;
        use crate::verdict::Stats;
        use ctrack_wire::LinkType;
        use std::sync::atomic::{AtomicBool, Ordering};

        let sim = one_place_left();
        let t = &sim.t;
        let now: Time = sim.now;
        let frame = udp(2000, true).build();
        // Another commit's recount in progress: it holds its turn and a
        // place, and left the table remembered full with commits in flight.
        let turn = t.shared.recounting.lock().unwrap();
        let place = t.shared.gate.enter();
        t.shared.remember(FULL_IN_FLIGHT, 0);
        let started = AtomicBool::new(false);
        let v = std::thread::scope(|s| {
            let h = s.spawn(|| {
                started.store(true, Ordering::Release);
                let mut stats = Stats::default();
                let action = super::super::testing::act("commit");
                t.process(&frame, LinkType::Ethernet, &action, now, &mut stats)
            });
            while !started.load(Ordering::Acquire) {
                std::thread::yield_now();
            }
            // Time for the commit to reach its recount (with the turns it
            // waits there; without them it refused meanwhile). The result
            // does not depend on how long this is, only whether the test
            // can fail without the turns.
            std::thread::sleep(std::time::Duration::from_millis(50));
            drop(place);
            drop(turn);
            h.join().unwrap()
        });
        assert!(v.committed, "{v:?}");
        assert_eq!(t.table_len(), 4);
    }

    /// A table remembered full from a sum that counted an insert announced
    /// and then taken back is counted again: the sum's place was never
    /// taken. (Here the sum is played by remembering the table full
    /// before the withdrawal; the withdrawal is an announcement taken back
    /// as a commit takes it back.)
    #[test]
    fn a_table_remembered_full_before_a_withdrawal_is_counted_again() {
        use super::super::shared::FULL;
        use ctrack_table::pin;

        let sim = one_place_left();
        let t = &sim.t;
        // A sum saw 4: three connections and an announced insert.
        t.shared.remember(FULL, t.withdrawals());
        let v = sim.send(&udp(2000, true), "commit");
        assert_eq!(v.refused, Some(Refusal::TableFull), "{v:?}");
        // The announcement is taken back.
        let guard = pin();
        // Any hash: the table has one shard.
        let hash = 0x5eed;
        let hashes = ctrack_table::Hashes {
            primary: hash,
            secondary: None,
        };
        let mut w = t.v4.write(&guard, &hashes);
        w.reserve(hash);
        w.unreserve(hash);
        drop(w);
        drop(guard);
        let v = sim.send(&udp(2000, true), "commit");
        assert!(v.committed, "{v:?}");
        assert_eq!(t.table_len(), 4);
    }
}
