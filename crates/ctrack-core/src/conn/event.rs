//! Connection events, as `conntrack -E` reports them: a connection was
//! created (`NEW`), its protocol state changed (`UPDATE`), it ended
//! (`DESTROY`: expired, flushed, removed, evicted, replaced).
//!
//! A tracker reports to at most one [`EventSink`], set with
//! [`crate::Tracker::set_event_sink`]. Nothing is built for a sink that is
//! not [`EventSink::active`], and while no sink is set each place an event
//! could come from pays one relaxed load of a flag, nothing more: no lock,
//! no entry, no call.
//!
//! When events come, and what they carry:
//!
//! - `NEW` once a commit has stored the connection (plain, translated, or
//!   a data connection a gateway expected), still under the shard lock of
//!   the insert, so that no `DESTROY` of it can come first.
//! - `UPDATE` when judging a packet changed the protocol state's name (the
//!   `state=` of a dump: TCP's `SYN_SENT`, `ESTABLISHED`, `FIN_WAIT_1`...;
//!   `FIRST`, `MULTIPLE`, `BIDIR` for UDP and other protocols; `FIRST`,
//!   `REPLY` for ICMP queries), under the connection's entry lock.
//! - `DESTROY` as the table unlinks the connection, under its shard
//!   lock(s); its counters are the final ones.
//!
//! Each carries the connection's [`Entry`] as of the call's time. A removal
//! with no time at hand ([`crate::Tracker::flush_all`],
//! [`crate::Tracker::flush_zone_now`]) takes the connection's expiry as
//! the time, so its `timeout` is 0 (as it is for an expired one).
//!
//! Events of one connection come in its order (`NEW`, then `UPDATE`s,
//! then `DESTROY`); events of different connections from different
//! threads interleave. The sink is called on the packet path and under
//! the table's entry and shard locks: it must not block (queue, or drop
//! and count) and must never call back into the tracker.

use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};

use ctrack_table::{EpochBox, Guard, pin};

use super::dump::Entry;
use super::record::Conn;
use crate::key::Addr;
use crate::time::Time;

/// What happened to a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventKind {
    /// Committed.
    New,
    /// Its protocol state changed (TCP's SYN_SENT → ESTABLISHED → ...).
    Update,
    /// Removed from the table.
    Destroy,
}

impl EventKind {
    /// `NEW`, `UPDATE` or `DESTROY`, as `conntrack -E` prints them.
    pub fn name(self) -> &'static str {
        match self {
            EventKind::New => "NEW",
            EventKind::Update => "UPDATE",
            EventKind::Destroy => "DESTROY",
        }
    }
}

/// Where a tracker's events go.
pub trait EventSink: Send + Sync + std::fmt::Debug {
    /// True while someone listens; when false no event is built and
    /// [`EventSink::event`] is not called. Called once per event, before
    /// anything is built: keep it cheap (an atomic load).
    fn active(&self) -> bool;
    /// One event. Called on the packet path and under the table's locks:
    /// must not block (queue, or drop and count) and must never call into
    /// the tracker.
    fn event(&self, kind: EventKind, entry: &Entry);
}

/// The tracker's slot for its sink.
///
/// Readers check `set` (one relaxed load) and only when it is true read
/// the sink, lock-free, from an epoch box under the guard they hold.
/// Writers (rare: a control request) are serialised by `writer`, so that
/// the flag and the box always end up agreeing.
#[derive(Debug, Default)]
pub(crate) struct Events {
    /// A sink is set (checked before anything else).
    set: AtomicBool,
    sink: EpochBox<Arc<dyn EventSink>>,
    writer: Mutex<()>,
}

impl Events {
    /// Replaces the sink. The old one may still get the events of calls
    /// under way (until their guards are dropped).
    pub(crate) fn set(&self, sink: Option<Arc<dyn EventSink>>) {
        let _w = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        let on = sink.is_some();
        self.sink.replace(sink.map(Box::new), &pin());
        self.set.store(on, Relaxed);
    }

    /// True if a sink is set (one relaxed load): the packet path's check
    /// before [`Events::active`].
    #[inline(always)]
    pub(crate) fn on(&self) -> bool {
        self.set.load(Relaxed)
    }

    /// The sink, if one is set and active; borrowed for `guard`'s life.
    #[inline(always)]
    pub(crate) fn active<'g>(&self, guard: &'g Guard) -> Option<&'g dyn EventSink> {
        if !self.on() {
            return None;
        }
        self.listening(guard)
    }

    /// [`Events::active`] once a sink is known to be set.
    #[cold]
    #[inline(never)]
    fn listening<'g>(&self, guard: &'g Guard) -> Option<&'g dyn EventSink> {
        let s: &'g dyn EventSink = &**self.sink.get(guard)?;
        s.active().then_some(s)
    }
}

/// Sends `sink` the event `kind` about `conn`, expiring at `expires` (ms),
/// as of `now`.
#[cold]
#[inline(never)]
pub(crate) fn emit<A: Addr>(
    sink: &dyn EventSink,
    kind: EventKind,
    conn: &Conn<A>,
    expires: u64,
    now: Time,
    guard: &Guard,
) {
    sink.event(kind, &Entry::of(conn, expires, now, guard));
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    #[derive(Debug, Default)]
    struct Probe {
        on: AtomicBool,
        asked: AtomicUsize,
    }

    impl EventSink for Probe {
        fn active(&self) -> bool {
            self.asked.fetch_add(1, Relaxed);
            self.on.load(Relaxed)
        }
        fn event(&self, _: EventKind, _: &Entry) {}
    }

    #[test]
    fn no_sink_is_not_even_asked() {
        let ev = Events::default();
        let guard = pin();
        assert!(!ev.on());
        assert!(ev.active(&guard).is_none());
    }

    #[test]
    fn a_sink_counts_only_while_it_is_active_and_set() {
        let ev = Events::default();
        let probe = Arc::new(Probe::default());
        ev.set(Some(probe.clone()));
        let guard = pin();
        assert!(ev.on());
        assert!(ev.active(&guard).is_none());
        probe.on.store(true, Relaxed);
        assert!(ev.active(&guard).is_some());
        assert_eq!(probe.asked.load(Relaxed), 2);
        drop(guard);
        ev.set(None);
        let guard = pin();
        assert!(!ev.on());
        assert!(ev.active(&guard).is_none());
        assert_eq!(probe.asked.load(Relaxed), 2);
    }

    #[test]
    fn kinds_print_as_conntrack_does() {
        let names = [EventKind::New, EventKind::Update, EventKind::Destroy].map(EventKind::name);
        assert_eq!(names, ["NEW", "UPDATE", "DESTROY"]);
    }
}
