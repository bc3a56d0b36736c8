//! Opening a connection: may the packet open one, was it expected, and
//! with `commit` storing it: its translation chosen and checked under the
//! shard locks, the table and zone limits with early drop, the insert.

use core::sync::atomic::Ordering::Relaxed;

use ctrack_table::{APPROX_STEP, Hashes, Removal, Writer};

use super::config::EARLY_DROP_SCAN;
use super::packet::{Call, Found, Pkt};
use super::shared::Counted;
use super::tracker::{Fam, NAT_RETRIES, RECLAIM_ON_FULL, Tracker};
use crate::alg::expect::{ExpKey, Expectation};
use crate::conn::{Conn, Setup};
use crate::key::{ConnId, Dir, Family, LookupKey, instance};
use crate::packet::L4Info;
use crate::proto::{IcmpState, OtherState, ProtoState, tcp};
use crate::verdict::{C, CtState, InvalidReason, Refusal, Stats, Verdict};
use crate::zone::ZoneMeta;

/// A connection about to be committed.
struct Opening<'a, A> {
    key: &'a LookupKey<A>,
    hash: u64,
    proto: ProtoState,
    /// The expectation it matched, with its key.
    expected: Option<(ExpKey, Expectation)>,
    /// The verdict so far (`new`, maybe `rel`).
    v: Verdict,
}

/// What holding the connection's shard locks came to (a short-lived
/// value on the stack: its size does not matter).
#[allow(clippy::large_enum_variant)]
enum Locked<'g, A: Fam> {
    /// Locked, with the translation chosen and checked.
    Ready(Writer<'g, Conn<A>>, Hashes, Setup<A>),
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
        let mut v = Verdict::new(zone);
        v.state = CtState::NEW | CtState::TRK;
        // A connection a gateway announced?
        let expected = if self.expect.active() {
            self.expected::<A>(cx.guard, key, cx.now.as_millis(), cx.stats)
        } else {
            None
        };
        if let Some((_, x)) = &expected {
            v.state |= CtState::REL;
            v.mark = x.mark;
            v.label = x.label;
        }
        if !cx.action.commit {
            *out = v;
            return Some(None);
        }
        let o = Opening {
            key,
            hash,
            proto,
            expected,
            v,
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
        let counted = Counted::new(&self.shared);
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
        let mut full = self.table_full();
        if full && self.reclaim_pending() {
            // The table is full but holds flushed connections: free some
            // before judging (with no shard lock held).
            self.reclaim_dead(shared, guard, RECLAIM_ON_FULL);
            full = self.table_full();
        }
        let (mut w, hashes, setup) = match self.lock_for_commit(cx, p, &o, meta, shared) {
            Locked::Ready(w, h, s) => (w, h, s),
            Locked::Refused(r) => return Some(refuse(o.v, r, cx.stats, out)),
            Locked::Lost => return None,
        };
        let key = o.key;
        if let Some(e) = w.find(o.hash, |c| c.direction_of(key, guard).is_some()) {
            if self.shared.expiry(e.record(), guard) > now {
                // Another thread committed it meanwhile: judge the packet
                // against it.
                return None;
            }
            w.remove_if(shared, e, Removal::Expired, |c| {
                self.shared.expiry(c, guard) <= now
            });
        }
        let counted = match self.admit(cx, &mut w, &o, meta, full, shared) {
            Ok(counted) => counted,
            Err(r) => return Some(refuse(o.v, r, cx.stats, out)),
        };
        let action = cx.action;
        let class = o.proto.initial_timeout();
        let inherit = o.expected.as_ref().map(|(_, x)| (x.mark, x.label));
        let res = w.insert(shared, &hashes, now, |c| {
            c.init(key, &o.proto, class, counted, now, p.ip_len, setup);
            if let Some((mark, label)) = inherit {
                c.set_mark(mark, u32::MAX);
                if label != 0 {
                    c.set_label(label, u128::MAX, guard);
                }
            }
            if let Some(m) = action.mark {
                c.set_mark(m.value, m.mask);
            }
            if let Some(l) = action.label
                && l.value & l.mask != 0
            {
                c.set_label(l.value, l.mask, guard);
            }
        });
        let Ok(e) = res else {
            if counted {
                meta.uncount(key.generation);
            }
            return Some(refuse(o.v, Refusal::TableFull, cx.stats, out));
        };
        drop(w);
        cx.stats.add(C::Committed, 1);
        if let Some((k, x)) = &o.expected {
            // Consumed by the connection it let in.
            self.expect.take(k, x.master);
            cx.stats.add(C::ExpectMatched, 1);
        }
        let c = e.record();
        let mut v = o.v;
        v.conn = Some(ConnId::new(A::FAMILY, e.id()));
        v.committed = true;
        v.mark = c.mark();
        v.label = c.label(guard);
        v.inspect = c.special();
        *out = v;
        Some(Some((e, Dir::Orig)))
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
    ) -> Locked<'g, A> {
        let (guard, now) = (cx.guard, cx.now.as_millis());
        let key = o.key;
        for _ in 0..NAT_RETRIES {
            let Ok(setup) = self.setup::<A>(guard, p, cx.action, key, o.expected.as_ref(), now)
            else {
                return Locked::Refused(Refusal::NatExhausted);
            };
            let secondary = setup
                .reply
                .filter(|r| *r != key.tuple.reverse())
                .map(|r| self.hash_of(&LookupKey { tuple: r, ..*key }));
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
                return Locked::Ready(w, hashes, setup);
            };
            let rkey = LookupKey { tuple: r, ..*key };
            let Some(e) = w.find(h, |c| c.direction_of(&rkey, guard).is_some()) else {
                return Locked::Ready(w, hashes, setup);
            };
            let gone = self.shared.expiry(e.record(), guard) <= now
                && w.remove_if(shared, e, Removal::Expired, |c| {
                    self.shared.expiry(c, guard) <= now
                });
            if gone {
                return Locked::Ready(w, hashes, setup);
            }
        }
        Locked::Refused(Refusal::NatExhausted)
    }

    /// Checks the zone's and the table's limits, evicting one of the zone's
    /// oldest unestablished (or expired) connections in this shard to make
    /// room if need be (early drop). Returns whether the connection counts
    /// against its zone's limit.
    fn admit<A: Fam>(
        &self,
        cx: &Call<'_>,
        w: &mut Writer<'_, Conn<A>>,
        o: &Opening<'_, A>,
        meta: &ZoneMeta,
        full: bool,
        shared: &Counted<'_>,
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
            if evicted
                || !w.evict(shared, o.hash, inst, EARLY_DROP_SCAN, |c| {
                    !c.proto_state().is_established() || self.shared.expiry(c, guard) <= now
                })
            {
                return Err(refusal);
            }
            evicted = true;
        }
    }

    /// True if the table holds `max_conns` connections. Reads one shared
    /// approximate count; only within a few thousand of the limit does it
    /// sum the shards' exact counts (and then remembers a full table until
    /// something is removed).
    pub(super) fn table_full(&self) -> bool {
        let max = self.max_conns.load(Relaxed);
        let slack = (self.v4.shard_count() + self.v6.shard_count()) * APPROX_STEP as usize;
        if self.v4.approx_len() + self.v6.approx_len() + slack < max {
            return false;
        }
        if self.shared.full.load(Relaxed) {
            return true;
        }
        if self.table_len() >= max {
            self.shared.full.store(true, Relaxed);
            return true;
        }
        false
    }
}

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
fn refuse<'g, A: Fam>(
    mut v: Verdict,
    r: Refusal,
    stats: &mut Stats,
    out: &mut Verdict,
) -> Found<'g, A> {
    v.refused = Some(r);
    stats.add(
        match r {
            Refusal::TableFull => C::RefusedTableFull,
            Refusal::ZoneLimit => C::RefusedZoneLimit,
            Refusal::NatExhausted => C::RefusedNatExhausted,
        },
        1,
    );
    *out = v;
    None
}
