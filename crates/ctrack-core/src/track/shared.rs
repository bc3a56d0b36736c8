//! What the table asks of the tracker and what packets share: the hash
//! seed, zones, timeout policies, the dead zone instances, the event sink.

use core::cell::Cell;
use core::sync::atomic::Ordering::Relaxed;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize};

use ctrack_table::{Context, Guard, Hashes, Removal, pin};

use crate::alg::helper::Helper;
use crate::conn::event::{EventKind, emit};
use crate::conn::{Conn, Events, Ext};
use crate::key::{Addr, Family, KeyHasher, Zone};
use crate::time::Time;
use crate::verdict::{C, Stats};
use crate::zone::{Compiled, LIMIT_DEFAULT, ZoneMeta, Zones};

/// A zone instance whose connections are still to be freed.
#[derive(Debug)]
pub(super) struct Dead {
    pub(super) zone: Zone,
    pub(super) generation: u32,
    pub(super) family: usize,
    pub(super) shard: usize,
}

/// [`Shared::full`]: not remembered full.
pub(super) const NOT_FULL: u64 = 0;
/// [`Shared::full`]: a count saw the table at its maximum.
pub(super) const FULL: u64 = 1;
/// [`Shared::full`]: a count and the commits in flight when it began
/// reached the maximum.
pub(super) const FULL_IN_FLIGHT: u64 = 2;
/// The state's bits in [`Shared::full`]'s word; the rest is its tag.
const STATE_BITS: u64 = 3;

/// What the table asks of the tracker, and what packets share: the hash
/// seed, zones, timeout policies, the event sink.
#[derive(Debug)]
pub(super) struct Shared {
    pub(super) hasher: KeyHasher,
    pub(super) zones: Zones,
    pub(super) default_policy: ctrack_table::EpochBox<Compiled>,
    pub(super) default_zone_limit: AtomicU32,
    /// The table remembered full: [`NOT_FULL`], [`FULL`] (a count saw it at
    /// its maximum) or [`FULL_IN_FLIGHT`] (a count and the commits in flight
    /// reached it, which may leave a place or two: a refusal counts again),
    /// in the low bits; above them, for [`FULL`], the tables' withdrawals
    /// read before that count (`Tracker::withdrawals`): a sum can count an
    /// insert announced and then taken back, and a table remembered full
    /// from it would refuse for good the place it still has. Cleared by any
    /// removal but an eviction.
    pub(super) full: AtomicU64,
    /// Commits that recount a table remembered full go one at a time, each
    /// from its count to its insert (`Tracker::recount`).
    pub(super) recounting: Mutex<()>,
    /// Commits near the limit hold a place here from their count of the
    /// table (or their eviction) until their insert (`Tracker::table_full`).
    pub(super) gate: ctrack_table::Gate,
    /// Connections whose gateway adjusts sequence numbers (while none
    /// does, packets skip the lookup that adjustment needs).
    pub(super) seqadj: AtomicUsize,
    /// Some connection was committed translated: from then on, an
    /// untranslated commit checks that its reply tuple is not a translated
    /// connection's original one (`Refusal::Clash`). Set before that
    /// connection's insert, so that a commit holding the same bucket's
    /// lock after it sees it.
    pub(super) translated: AtomicBool,
    /// Some connection was given an extension (a label, a translation, a
    /// gateway, an expectation's master): from then on a burst fetches
    /// each packet's extension ahead of judging it where judging reads it
    /// (`Tracker::wants_ext`). Never cleared.
    pub(super) extended: AtomicBool,
    /// Where connection events go (`conntrack -E`); here so that the
    /// table's removal hook reaches it.
    pub(super) events: Events,
}

impl Shared {
    /// What is remembered of the table's fullness: [`NOT_FULL`], [`FULL`]
    /// or [`FULL_IN_FLIGHT`].
    #[inline]
    pub(super) fn full_state(&self) -> u64 {
        self.full.load(Relaxed) & STATE_BITS
    }

    /// True if a count found the table at its maximum and no announced
    /// insert has been taken back since it began (`withdrawals`, read now).
    #[inline]
    pub(super) fn remembered_full(&self, withdrawals: u64) -> bool {
        let word = self.full.load(Relaxed);
        word & STATE_BITS == FULL && word >> 2 == withdrawals & (u64::MAX >> 2)
    }

    /// Remembers `state`, with `withdrawals` as read before the count that
    /// decided it.
    #[inline]
    pub(super) fn remember(&self, state: u64, withdrawals: u64) {
        self.full.store(withdrawals << 2 | state, Relaxed);
    }

    /// Sets [`Shared::extended`] if `has` (a load first: once set, it is
    /// only read).
    #[inline]
    pub(super) fn note_extended(&self, has: bool) {
        if has && !self.extended.load(Relaxed) {
            self.extended.store(true, Relaxed);
        }
    }

    #[inline]
    pub(super) fn policy<'g>(&self, zone: Zone, guard: &'g Guard) -> &'g Compiled {
        self.policy_of(self.zones.get(zone), guard)
    }

    #[inline]
    pub(super) fn policy_of<'g>(&self, meta: Option<&ZoneMeta>, guard: &'g Guard) -> &'g Compiled {
        if let Some(p) = meta.and_then(|m| m.policy(guard)) {
            return p;
        }
        self.default_policy
            .get(guard)
            .expect("the default policy is always set")
    }

    #[inline]
    pub(super) fn expiry<A: Addr>(&self, c: &Conn<A>, guard: &Guard) -> u64 {
        expiry(c, self.policy(c.zone(), guard))
    }

    /// What the table's removal hook does, with the time of the call
    /// that removed `c` if it has one.
    fn removed_at<A: Addr>(&self, c: &Conn<A>, why: Removal, now: Option<Time>) {
        if c.special() {
            let guard = pin();
            if c.ext(&guard)
                .and_then(Ext::helper)
                .is_some_and(Helper::counted)
            {
                self.seqadj.fetch_sub(1, Relaxed);
            }
        }
        if c.counted()
            && let Some(m) = self.zones.get(c.zone())
        {
            m.uncount(c.generation());
        }
        if why != Removal::Evicted && self.full_state() != NOT_FULL {
            self.remember(NOT_FULL, 0);
        }
        if self.events.on() {
            self.destroyed(c, now);
        }
    }

    /// Reports `c`'s removal to the event sink, if one listens. Without
    /// a time, the connection's expiry stands for it (its timeout reads 0).
    #[cold]
    #[inline(never)]
    fn destroyed<A: Addr>(&self, c: &Conn<A>, now: Option<Time>) {
        let guard = pin();
        if let Some(sink) = self.events.active(&guard) {
            let expires = self.expiry(c, &guard);
            let now = now.unwrap_or(Time::from_millis(expires));
            emit(sink, EventKind::Destroy, c, expires, now, &guard);
        }
    }

    pub(super) fn limit_of(&self, meta: &ZoneMeta) -> u32 {
        match meta.limit_setting() {
            LIMIT_DEFAULT => self.default_zone_limit.load(Relaxed),
            l => l,
        }
    }
}

pub(super) fn family_index(f: Family) -> usize {
    match f {
        Family::V4 => 0,
        Family::V6 => 1,
    }
}

// `Shared` is not itself a table `Context`: every call into the table
// goes through a `Counted`, which adds what the call removed to the
// caller's counters. These are the parts of its context that need no
// caller.
impl Shared {
    /// The index hashes of `c`: its original tuple's, and its own reply
    /// tuple's if it has one.
    #[inline(always)]
    pub(super) fn hashes<A: Addr>(&self, c: &Conn<A>, guard: &Guard) -> Hashes {
        let primary = self
            .hasher
            .hash_tuple(c.zone(), c.generation(), c.proto(), c.orig());
        // Only a translated connection can have a reply tuple of its own
        // (`Conn::init`): a labelled or expected one's extension is not
        // read (it was, by every removal: a line from memory a
        // connection, `bench cps --label`).
        let secondary = (c.nat_bits() != 0)
            .then(|| c.ext(guard))
            .flatten()
            .and_then(|e: &Ext<A>| e.own_reply(c.orig()))
            .map(|r| {
                self.hasher
                    .hash_tuple(c.zone(), c.generation(), c.proto(), &r)
            });
        Hashes { primary, secondary }
    }

    /// Records that a shard of family `A` gained its first or lost its
    /// last connection of zone instance `inst`.
    fn occupancy<A: Addr>(&self, inst: u64, shard: usize, occupied: bool) {
        if let Some(m) = self.zones.get((inst >> 32) as Zone) {
            m.set_occupied(family_index(A::FAMILY), inst as u32, shard, occupied);
        }
    }
}

/// When a connection expires under `policy` (ms).
#[inline(always)]
pub(super) fn expiry<A: Addr>(c: &Conn<A>, policy: &Compiled) -> u64 {
    c.last_seen()
        .saturating_add(policy.millis_of(c.class_bits()))
}

/// The table's context for one call into the tracker: the shared state,
/// the call's time (for the `DESTROY` events of what it removes), and the
/// removals the call caused, counted for the caller's [`Stats`] (the table
/// reports removals through [`Context::removed`], which has no caller to
/// write to).
pub(super) struct Counted<'a> {
    shared: &'a Shared,
    now: Option<Time>,
    /// Expired, flushed, evicted, replaced.
    removed: Cell<[u32; 4]>,
}

impl<'a> Counted<'a> {
    /// For a call with no time at hand.
    pub(super) fn new(shared: &'a Shared) -> Self {
        Counted {
            shared,
            now: None,
            removed: Cell::new([0; 4]),
        }
    }

    /// For a call at `now`.
    pub(super) fn at(shared: &'a Shared, now: Time) -> Self {
        Counted {
            now: Some(now),
            ..Counted::new(shared)
        }
    }

    /// Adds the removals counted so far to `stats`.
    pub(super) fn count_into(&self, stats: &mut Stats) {
        let [expired, flushed, evicted, replaced] = self.removed.take();
        stats.add(C::Expired, u64::from(expired));
        stats.add(C::Flushed, u64::from(flushed));
        stats.add(C::Evicted, u64::from(evicted));
        stats.add(C::Replaced, u64::from(replaced));
    }
}

impl<A: Addr> Context<Conn<A>> for Counted<'_> {
    #[inline(always)]
    fn hashes(&self, c: &Conn<A>, guard: &Guard) -> Hashes {
        self.shared.hashes(c, guard)
    }

    #[inline]
    fn instance(&self, c: &Conn<A>) -> u64 {
        c.instance()
    }

    #[inline]
    fn expiry(&self, c: &Conn<A>, guard: &Guard) -> u64 {
        self.shared.expiry(c, guard)
    }

    fn removed(&self, c: &Conn<A>, why: Removal) {
        self.shared.removed_at(c, why, self.now);
        let i = match why {
            Removal::Expired => 0,
            Removal::Flushed | Removal::Deleted => 1,
            Removal::Evicted => 2,
            Removal::Replaced => 3,
        };
        let mut r = self.removed.get();
        r[i] = r[i].saturating_add(1);
        self.removed.set(r);
    }

    fn occupancy(&self, inst: u64, shard: usize, occupied: bool) {
        self.shared.occupancy::<A>(inst, shard, occupied);
    }
}
