//! The connection events' hub: the tracker's [`EventSink`], fanning events
//! out to `ctrack ctl events` subscribers through bounded queues that
//! count what they drop rather than slow the datapath.
//!
//! The packet path's side ([`EventSink::event`]) never waits: it loads the
//! subscriber list (one atomic pointer load, `arc-swap`), builds the event
//! once, and offers it to each subscriber's bounded queue with a
//! non-blocking `try_send` (the standard library's array channel); a full
//! queue counts the event as dropped for that subscriber. With nobody
//! subscribed, [`EventSink::active`] is one relaxed load and the tracker
//! builds nothing.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, TrySendError, sync_channel};
use std::time::Duration;

use arc_swap::ArcSwap;
use ctrack_core::{Entry, EventKind, EventSink};

/// The default queue length of one subscriber.
pub const DEFAULT_CAPACITY: usize = 65_536;

/// One connection event, as delivered to subscribers.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    /// NEW, UPDATE or DESTROY.
    pub kind: EventKind,
    /// The connection at the time of the event.
    pub entry: Entry,
}

#[derive(Debug, Clone)]
struct Sub {
    id: u64,
    tx: SyncSender<Arc<Event>>,
    dropped: Arc<AtomicU64>,
}

/// The hub. Subscribers come and go with [`EventHub::subscribe`] and the
/// [`Subscription`]'s drop.
#[derive(Debug)]
pub struct EventHub {
    capacity: usize,
    subs: ArcSwap<Vec<Sub>>,
    /// Subscribers now (what `active` reads).
    count: AtomicUsize,
    next_id: AtomicU64,
    /// Events offered while someone listened.
    events: AtomicU64,
    /// Events dropped because a subscriber's queue was full, all
    /// subscribers together (past ones included).
    dropped: AtomicU64,
}

impl Default for EventHub {
    fn default() -> Self {
        EventHub::new(DEFAULT_CAPACITY)
    }
}

impl EventHub {
    /// A hub whose subscribers each queue at most `capacity` events (at
    /// least 1).
    pub fn new(capacity: usize) -> EventHub {
        EventHub {
            capacity: capacity.max(1),
            subs: ArcSwap::from_pointee(Vec::new()),
            count: AtomicUsize::new(0),
            next_id: AtomicU64::new(1),
            events: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
        }
    }

    /// A new subscriber, receiving every event from now on.
    pub fn subscribe(self: &Arc<Self>) -> Subscription {
        let (tx, rx) = sync_channel(self.capacity);
        let id = self.next_id.fetch_add(1, Relaxed);
        let dropped = Arc::new(AtomicU64::new(0));
        let sub = Sub {
            id,
            tx,
            dropped: dropped.clone(),
        };
        self.subs.rcu(|cur| {
            let mut v: Vec<Sub> = cur.iter().cloned().collect();
            v.push(sub.clone());
            v
        });
        self.count.fetch_add(1, Relaxed);
        Subscription {
            hub: self.clone(),
            id,
            rx,
            dropped,
            reported: 0,
        }
    }

    fn unsubscribe(&self, id: u64) {
        self.subs.rcu(|cur| {
            cur.iter()
                .filter(|s| s.id != id)
                .cloned()
                .collect::<Vec<_>>()
        });
        self.count.fetch_sub(1, Relaxed);
    }

    /// Subscribers now.
    pub fn subscribers(&self) -> usize {
        self.count.load(Relaxed)
    }

    /// Events dropped so far because a subscriber's queue was full (each
    /// subscriber's drop counts once).
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Relaxed)
    }

    /// Events offered to subscribers so far.
    pub fn offered(&self) -> u64 {
        self.events.load(Relaxed)
    }

    /// The queue length of each subscriber.
    pub fn capacity(&self) -> usize {
        self.capacity
    }
}

impl EventSink for EventHub {
    #[inline]
    fn active(&self) -> bool {
        self.count.load(Relaxed) != 0
    }

    fn event(&self, kind: EventKind, entry: &Entry) {
        let subs = self.subs.load();
        if subs.is_empty() {
            return;
        }
        self.events.fetch_add(1, Relaxed);
        let ev = Arc::new(Event {
            kind,
            entry: entry.clone(),
        });
        for s in subs.iter() {
            match s.tx.try_send(ev.clone()) {
                Ok(()) => {}
                Err(TrySendError::Full(_)) => {
                    s.dropped.fetch_add(1, Relaxed);
                    self.dropped.fetch_add(1, Relaxed);
                }
                // Its receiver is going away; it unsubscribes itself.
                Err(TrySendError::Disconnected(_)) => {}
            }
        }
    }
}

/// What a subscriber receives next.
#[derive(Debug, Clone, PartialEq)]
pub enum Next {
    /// An event.
    Event(Arc<Event>),
    /// The queue drained after events were dropped: this many since the
    /// last such report.
    Dropped(u64),
    /// Nothing within the wait.
    Idle,
}

/// One subscriber's end: events in order, and reports of those dropped.
/// Dropping it unsubscribes.
#[derive(Debug)]
pub struct Subscription {
    hub: Arc<EventHub>,
    id: u64,
    rx: Receiver<Arc<Event>>,
    dropped: Arc<AtomicU64>,
    reported: u64,
}

impl Subscription {
    /// The next event, waiting up to `wait`. Once the queue is empty,
    /// events dropped since the last report are reported (before waiting
    /// for more).
    pub fn next(&mut self, wait: Duration) -> Next {
        match self.rx.try_recv() {
            Ok(ev) => return Next::Event(ev),
            Err(_) => {
                if let Some(n) = self.take_dropped() {
                    return Next::Dropped(n);
                }
            }
        }
        match self.rx.recv_timeout(wait) {
            Ok(ev) => Next::Event(ev),
            Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => {
                self.take_dropped().map_or(Next::Idle, Next::Dropped)
            }
        }
    }

    fn take_dropped(&mut self) -> Option<u64> {
        let d = self.dropped.load(Relaxed);
        (d > self.reported).then(|| {
            let n = d - self.reported;
            self.reported = d;
            n
        })
    }

    /// Events this subscriber lost so far.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Relaxed)
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        self.hub.unsubscribe(self.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An entry from a real connection (Entry's constructor is the
    /// core's own).
    fn entry() -> Entry {
        use ctrack_core::{CtAction, LinkType, Stats, Time, Tracker};
        use ctrack_wire::build::{Frame, L4};
        let t = Tracker::default();
        let f = Frame::v4([10, 0, 0, 1], [10, 0, 0, 2], L4::udp(1000, 53, b"x"));
        let a: CtAction = "commit".parse().expect("an action");
        let v = t.process(
            &f.build(),
            LinkType::Ethernet,
            &a,
            Time::from_secs(1),
            &mut Stats::default(),
        );
        let id = v.conn.expect("committed");
        t.conn(id, Time::from_secs(1)).expect("live").entry
    }

    #[test]
    fn active_follows_subscribers() {
        let hub = Arc::new(EventHub::new(4));
        assert!(!hub.active());
        let a = hub.subscribe();
        let b = hub.subscribe();
        assert!(hub.active());
        assert_eq!(hub.subscribers(), 2);
        drop(a);
        assert!(hub.active());
        drop(b);
        assert!(!hub.active());
    }

    #[test]
    fn each_subscriber_gets_each_event_in_order() {
        let hub = Arc::new(EventHub::new(8));
        let mut a = hub.subscribe();
        let mut b = hub.subscribe();
        let e = entry();
        hub.event(EventKind::New, &e);
        hub.event(EventKind::Destroy, &e);
        for s in [&mut a, &mut b] {
            let kinds: Vec<_> = (0..3)
                .map(|_| match s.next(Duration::from_millis(1)) {
                    Next::Event(ev) => Some(ev.kind),
                    _ => None,
                })
                .collect();
            assert_eq!(
                kinds,
                vec![Some(EventKind::New), Some(EventKind::Destroy), None]
            );
        }
    }

    #[test]
    fn a_full_queue_drops_counts_and_reports_once_drained() {
        let hub = Arc::new(EventHub::new(2));
        let mut s = hub.subscribe();
        let e = entry();
        for _ in 0..5 {
            hub.event(EventKind::Update, &e);
        }
        assert_eq!(hub.dropped(), 3);
        assert_eq!(s.dropped(), 3);
        let w = Duration::from_millis(1);
        assert!(matches!(s.next(w), Next::Event(_)));
        assert!(matches!(s.next(w), Next::Event(_)));
        assert_eq!(s.next(w), Next::Dropped(3));
        assert_eq!(s.next(w), Next::Idle);
        hub.event(EventKind::Update, &e);
        assert!(matches!(s.next(w), Next::Event(_)));
        assert_eq!(s.next(w), Next::Idle);
    }

    #[test]
    fn nothing_is_queued_without_subscribers() {
        let hub = Arc::new(EventHub::new(2));
        hub.event(EventKind::New, &entry());
        assert_eq!((hub.offered(), hub.dropped()), (0, 0));
        // Nor once the subscribers have gone: a subscription leaves the
        // list with its drop (else the list grew with every `ctl events`
        // client, and each event was built for receivers long gone).
        for _ in 0..3 {
            drop(hub.subscribe());
        }
        hub.event(EventKind::New, &entry());
        assert_eq!((hub.offered(), hub.dropped()), (0, 0));
    }

    /// A hub made with no room still queues one event a subscriber (a
    /// channel of no room would take an event only from a receiver
    /// waiting at that moment).
    #[test]
    fn a_queue_holds_at_least_one_event() {
        let hub = Arc::new(EventHub::new(0));
        assert_eq!(hub.capacity(), 1);
        let mut sub = hub.subscribe();
        hub.event(EventKind::New, &entry());
        hub.event(EventKind::Destroy, &entry());
        assert!(
            matches!(sub.next(Duration::from_millis(1)), Next::Event(e) if e.kind == EventKind::New)
        );
        assert_eq!(sub.next(Duration::from_millis(1)), Next::Dropped(1));
    }
}
