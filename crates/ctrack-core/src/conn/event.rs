//! Connection events, as `conntrack -E` reports them: a connection was
//! created (`NEW`), its protocol state changed (`UPDATE`), it ended
//! (`DESTROY`: expired, flushed, removed, evicted).
//!
//! A tracker reports to at most one [`EventSink`], set with
//! [`crate::Tracker::set_event_sink`]. Nothing is built for a sink that is
//! not [`EventSink::active`], so the packet path pays one relaxed load when
//! nobody listens. A sink must not block and must not call back into the
//! tracker: it is called on the packet path and under table locks.

use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};

use super::dump::Entry;

/// What happened to a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventKind {
    /// Committed.
    New,
    /// Its protocol state changed (TCP's SYN_RECV → ESTABLISHED → ...).
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
    /// True while someone listens; when false no event is built.
    fn active(&self) -> bool;
    /// One event. Must not block (drop and count instead) and must not
    /// call into the tracker.
    fn event(&self, kind: EventKind, entry: &Entry);
}

/// The tracker's slot for its sink.
#[derive(Debug, Default)]
pub(crate) struct Events {
    /// A sink is set (checked before anything else).
    set: AtomicBool,
    sink: Mutex<Option<Arc<dyn EventSink>>>,
}

impl Events {
    /// Replaces the sink.
    pub(crate) fn set(&self, sink: Option<Arc<dyn EventSink>>) {
        let mut s = self.sink.lock().unwrap_or_else(|e| e.into_inner());
        self.set.store(sink.is_some(), Relaxed);
        *s = sink;
    }

    /// The sink, if one is set and active.
    #[allow(dead_code)] // the NEW/UPDATE/DESTROY call sites are being written
    #[inline]
    pub(crate) fn active(&self) -> Option<Arc<dyn EventSink>> {
        if !self.set.load(Relaxed) {
            return None;
        }
        let s = self.sink.lock().unwrap_or_else(|e| e.into_inner());
        s.as_ref().filter(|s| s.active()).cloned()
    }
}
