//! Connection events (`conntrack -E`): NEW on commit, UPDATE when the
//! protocol state's name changes, DESTROY when the connection leaves the
//! table, each with the connection's dump entry; nothing at all while no
//! sink is set or the sink is not active.

mod common;
use common::Net;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Mutex};

use std::net::Ipv4Addr;

use ctrack_core::{
    Config, ConnKey, Endpoint, Entry, EventKind, EventSink, Family, Stats, Time, Tracker, Verdict,
};
use ctrack_wire::build::{Frame, L4};
use ctrack_wire::tcp::flags::*;

use EventKind::{Destroy, New, Update};

const C: [u8; 4] = [10, 0, 0, 1];
const S: [u8; 4] = [192, 0, 2, 2];

/// Records every event as its kind and the entry as a dump prints it.
#[derive(Debug)]
struct Recorder {
    on: AtomicBool,
    /// Calls of `active`.
    asked: AtomicUsize,
    /// Calls of `event`.
    calls: AtomicUsize,
    seen: Mutex<Vec<(EventKind, String)>>,
}

impl Recorder {
    fn new(on: bool) -> Arc<Recorder> {
        Arc::new(Recorder {
            on: AtomicBool::new(on),
            asked: AtomicUsize::new(0),
            calls: AtomicUsize::new(0),
            seen: Mutex::new(Vec::new()),
        })
    }

    /// The events so far, emptied.
    fn take(&self) -> Vec<(EventKind, String)> {
        std::mem::take(&mut *self.seen.lock().unwrap())
    }

    /// The events so far as kind and state name, emptied.
    fn states(&self) -> Vec<(EventKind, String)> {
        self.take()
            .into_iter()
            .map(|(k, e)| (k, state_of(&e).to_string()))
            .collect()
    }
}

impl EventSink for Recorder {
    fn active(&self) -> bool {
        self.asked.fetch_add(1, Relaxed);
        self.on.load(Relaxed)
    }

    fn event(&self, kind: EventKind, entry: &Entry) {
        self.calls.fetch_add(1, Relaxed);
        self.seen.lock().unwrap().push((kind, entry.to_string()));
    }
}

/// The `state=` of a printed entry.
fn state_of(entry: &str) -> &str {
    let (_, rest) = entry
        .split_once("protoinfo=(state=")
        .expect("an entry with its state");
    rest.split(')').next().unwrap()
}

/// The `timeout=` of a printed entry.
fn timeout_of(entry: &str) -> u64 {
    let (_, rest) = entry.split_once(",timeout=").expect("a timeout");
    rest.split(',').next().unwrap().parse().unwrap()
}

fn ev(list: &[(EventKind, &str)]) -> Vec<(EventKind, String)> {
    list.iter().map(|&(k, s)| (k, s.to_string())).collect()
}

fn tcp(to_server: bool, flags: u16, seq: u32, ack: u32, data: &[u8]) -> Frame {
    let (src, dst, sp, dp) = if to_server {
        (C, S, 40000, 80)
    } else {
        (S, C, 80, 40000)
    };
    Frame::v4(src, dst, L4::tcp_seg(sp, dp, flags, seq, ack, 65535, data))
}

fn udp(port: u16, to_server: bool) -> Frame {
    let l4 = if to_server {
        L4::udp(port, 53, b"q")
    } else {
        L4::udp(53, port, b"a")
    };
    if to_server {
        Frame::v4(C, S, l4)
    } else {
        Frame::v4(S, C, l4)
    }
}

fn udp_key(port: u16, zone: u16) -> ConnKey {
    ConnKey {
        src: Endpoint::v4(Ipv4Addr::from(C), port),
        dst: Endpoint::v4(Ipv4Addr::from(S), 53),
        zone,
        proto: ctrack_wire::ip_proto::UDP,
        family: Family::V4,
    }
}

/// A tracker whose events go to a recorder that listens.
fn listened() -> (Net, Arc<Recorder>) {
    let n = Net::new();
    let r = Recorder::new(true);
    n.t.set_event_sink(Some(r.clone()));
    (n, r)
}

fn send(n: &Net, f: &Frame, action: &str) -> Verdict {
    n.send(f, action).0
}

/// A whole TCP conversation: handshake, data both ways, FIN from each
/// side, the last ACK.
fn tcp_conversation(n: &Net) -> Verdict {
    let first = send(n, &tcp(true, SYN, 100, 0, b""), "commit");
    for f in [
        tcp(false, SYN | ACK, 500, 101, b""),
        tcp(true, ACK, 101, 501, b""),
        tcp(true, PSH | ACK, 101, 501, b"GET /"),
        tcp(false, PSH | ACK, 501, 106, b"200 OK"),
        tcp(true, ACK, 106, 507, b""),
        tcp(true, FIN | ACK, 106, 507, b""),
        tcp(false, ACK, 507, 107, b""),
        tcp(false, FIN | ACK, 507, 107, b""),
        tcp(true, ACK, 107, 508, b""),
    ] {
        let v = send(n, &f, "commit");
        assert!(v.invalid.is_none(), "{f:?}: {v:?}");
    }
    first
}

#[test]
fn a_tcp_conversation_is_new_then_each_state_change_then_destroy_on_expiry() {
    let (mut n, r) = listened();
    let first = tcp_conversation(&n);
    assert_eq!(
        r.states(),
        ev(&[
            (New, "SYN_SENT"),
            (Update, "ESTABLISHED"),
            (Update, "CLOSING"),
            (Update, "TIME_WAIT"),
        ])
    );
    // Nothing while it waits; DESTROY when a sweep frees it.
    let mut stats = Stats::default();
    assert_eq!(n.t.sweep(n.now, usize::MAX, &mut stats).expired, 0);
    assert!(r.take().is_empty());
    n.now = Time::from_secs(100 + 3600);
    assert_eq!(n.t.sweep(n.now, usize::MAX, &mut stats).expired, 1);
    let got = r.take();
    assert_eq!(got.len(), 1, "{got:?}");
    let (kind, entry) = &got[0];
    assert_eq!(
        (*kind, state_of(entry), timeout_of(entry)),
        (Destroy, "TIME_WAIT", 0)
    );
    // With the final counters: 6 packets from the client, 4 from the server.
    assert!(entry.contains("packets=6,"), "{entry}");
    assert!(entry.contains("packets=4,"), "{entry}");
    assert!(first.committed);
}

#[test]
fn an_event_carries_the_entry_a_dump_shows() {
    let (n, r) = listened();
    let v = send(&n, &udp(1000, true), "commit,zone=5,mark=0x7");
    let dumped = n.t.conn(v.conn.unwrap(), n.now).unwrap().entry.to_string();
    assert_eq!(r.take(), vec![(New, dumped.clone())]);
    assert!(
        dumped.contains("zone=5") && dumped.contains("mark=7"),
        "{dumped}"
    );
    // UDP's first timeout: 60 s.
    assert_eq!(timeout_of(&dumped), 60);
}

#[test]
fn udp_is_new_then_updated_by_a_second_packet_and_by_the_reply() {
    let (n, r) = listened();
    send(&n, &udp(1000, true), "commit");
    send(&n, &udp(1000, false), "commit");
    // Later packets change nothing.
    send(&n, &udp(1000, true), "commit");
    send(&n, &udp(1000, false), "commit");
    assert_eq!(r.states(), ev(&[(New, "FIRST"), (Update, "BIDIR")]));
    // Two packets one way: FIRST, MULTIPLE.
    send(&n, &udp(2000, true), "commit");
    send(&n, &udp(2000, true), "commit");
    send(&n, &udp(2000, true), "commit");
    assert_eq!(r.states(), ev(&[(New, "FIRST"), (Update, "MULTIPLE")]));
}

#[test]
fn a_packet_without_commit_that_opens_nothing_makes_no_event() {
    let (n, r) = listened();
    send(&n, &udp(1000, true), "");
    assert!(r.take().is_empty());
}

#[test]
fn flush_all_destroys_every_connection() {
    let (n, r) = listened();
    send(&n, &udp(1000, true), "commit");
    send(&n, &udp(2000, true), "commit,zone=3");
    r.take();
    let mut stats = Stats::default();
    assert_eq!(n.t.flush_all(&mut stats), 2);
    let got = r.take();
    assert_eq!(got.len(), 2, "{got:?}");
    // No time at hand: the expiry stands for it, the timeout reads 0.
    for (kind, entry) in &got {
        assert_eq!((*kind, timeout_of(entry)), (Destroy, 0), "{entry}");
    }
    assert!(
        got.iter()
            .any(|(_, e)| e.contains("sport=2000") && e.contains("zone=3"))
    );
}

#[test]
fn flush_key_and_remove_destroy_one_connection() {
    let (n, r) = listened();
    send(&n, &udp(1000, true), "commit");
    let v = send(&n, &udp(2000, true), "commit");
    r.take();
    let mut stats = Stats::default();
    assert!(n.t.flush_key(&udp_key(1000, 0), n.now, &mut stats));
    let got = r.take();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].0, Destroy);
    assert!(got[0].1.contains("sport=1000"), "{}", got[0].1);
    // At the call's time, its timeout is what was left.
    assert_eq!(timeout_of(&got[0].1), 60);
    assert!(n.t.remove(v.conn.unwrap(), n.now, &mut stats));
    let got = r.take();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].0, Destroy);
    assert!(got[0].1.contains("sport=2000"), "{}", got[0].1);
    // Gone already: no second event.
    assert!(!n.t.remove(v.conn.unwrap(), n.now, &mut stats));
    assert!(r.take().is_empty());
}

#[test]
fn a_flushed_zone_s_connections_are_destroyed_when_freed() {
    let (n, r) = listened();
    send(&n, &udp(1000, true), "commit,zone=5");
    send(&n, &udp(2000, true), "commit,zone=5");
    send(&n, &udp(3000, true), "commit,zone=6");
    r.take();
    let mut stats = Stats::default();
    // Flushed lazily: DESTROY when the sweep frees them.
    assert!(n.t.flush_zone(5));
    assert!(r.take().is_empty());
    assert_eq!(n.t.sweep(n.now, usize::MAX, &mut stats).flushed, 2);
    let got = r.take();
    assert_eq!(got.len(), 2, "{got:?}");
    assert!(
        got.iter()
            .all(|(k, e)| *k == Destroy && e.contains("zone=5"))
    );
    // At once.
    assert_eq!(n.t.flush_zone_now(6, &mut stats), 1);
    let got = r.take();
    assert_eq!(got.len(), 1);
    assert!(got[0].0 == Destroy && got[0].1.contains("zone=6"));
}

#[test]
fn a_syn_reusing_a_closed_connection_destroys_it_and_makes_a_new_one() {
    let (n, r) = listened();
    tcp_conversation(&n);
    r.take();
    send(&n, &tcp(true, SYN, 7_000_000, 0, b""), "commit");
    assert_eq!(r.states(), ev(&[(Destroy, "TIME_WAIT"), (New, "SYN_SENT")]));
}

#[test]
fn an_evicted_connection_is_destroyed() {
    // One shard: early drop looks in the new connection's shard.
    let n = Net {
        t: Tracker::new(Config {
            shards: 1,
            ..Config::default()
        }),
        ..Net::new()
    };
    let r = Recorder::new(true);
    n.t.set_event_sink(Some(r.clone()));
    n.t.set_zone_limit(9, 1);
    send(&n, &udp(1000, true), "commit,zone=9");
    // At its limit, the zone drops its unestablished connection.
    let v = send(&n, &udp(2000, true), "commit,zone=9");
    assert!(v.committed, "{v:?}");
    let got = r.take();
    let kinds: Vec<_> = got.iter().map(|(k, _)| *k).collect();
    assert_eq!(kinds, [New, Destroy, New], "{got:?}");
    assert!(got[1].1.contains("sport=1000"));
    assert!(got[2].1.contains("sport=2000"));
}

/// A segment of the FTP control connection C:40000 <-> S:21.
fn ftp(to_server: bool, flags: u16, seq: u32, ack: u32, data: &[u8]) -> Frame {
    let (src, dst, sp, dp) = if to_server {
        (C, S, 40000, 21)
    } else {
        (S, C, 21, 40000)
    };
    Frame::v4(src, dst, L4::tcp_seg(sp, dp, flags, seq, ack, 65535, data))
}

#[test]
fn an_expected_ftp_data_connection_is_new_and_names_its_master() {
    let (n, r) = listened();
    send(&n, &ftp(true, SYN, 100, 0, b""), "commit,alg=ftp");
    send(&n, &ftp(false, SYN | ACK, 500, 101, b""), "commit");
    send(&n, &ftp(true, ACK, 101, 501, b""), "commit");
    let port = b"PORT 10,0,0,1,156,65\r\n"; // 40001
    send(&n, &ftp(true, PSH | ACK, 101, 501, port), "commit");
    assert_eq!(n.t.expectation_count(), 1);
    r.take();
    let data = Frame::v4(S, C, L4::tcp_seg(20, 40001, SYN, 9000, 0, 65535, b""));
    let v = send(&n, &data, "commit");
    assert!(v.committed, "{v:?}");
    let got = r.take();
    assert_eq!(got.len(), 1, "{got:?}");
    let (kind, entry) = &got[0];
    assert_eq!((*kind, state_of(entry)), (New, "SYN_SENT"));
    assert!(entry.contains("sport=20,dport=40001"), "{entry}");
    assert!(entry.contains("master=("), "{entry}");
    // The control connection's entry says which gateway watches it.
    send(
        &n,
        &ftp(true, FIN | ACK, 101 + port.len() as u32, 501, b""),
        "commit",
    );
    let got = r.take();
    assert_eq!(got.len(), 1, "{got:?}");
    assert!(got[0].1.contains("helper=ftp"), "{}", got[0].1);
}

#[test]
fn a_translated_connection_is_new_with_its_reply_tuple() {
    let (n, r) = listened();
    send(&n, &udp(1000, true), "commit,nat(src=198.51.100.1)");
    let got = r.take();
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(got[0].0, New);
    assert!(got[0].1.contains("dst=198.51.100.1"), "{}", got[0].1);
}

#[test]
fn without_a_sink_nothing_is_reported() {
    let n = Net::new();
    let r = Recorder::new(true);
    tcp_conversation(&n);
    send(&n, &udp(1000, true), "commit");
    let mut stats = Stats::default();
    n.t.flush_all(&mut stats);
    assert_eq!(r.asked.load(Relaxed), 0);
    // Set, then cleared: nothing more comes, and it is not even asked.
    n.t.set_event_sink(Some(r.clone()));
    send(&n, &udp(2000, true), "commit");
    assert_eq!(r.take().len(), 1);
    n.t.set_event_sink(None);
    let asked = r.asked.load(Relaxed);
    send(&n, &udp(2000, false), "commit");
    send(&n, &udp(3000, true), "commit");
    n.t.flush_all(&mut stats);
    assert!(r.take().is_empty());
    assert_eq!(r.asked.load(Relaxed), asked);
}

#[test]
fn an_inactive_sink_is_asked_but_never_called() {
    let (mut n, r) = listened();
    r.on.store(false, Relaxed);
    tcp_conversation(&n);
    send(&n, &udp(1000, true), "commit");
    send(&n, &udp(1000, false), "commit");
    let mut stats = Stats::default();
    n.now = Time::from_secs(100 + 3600);
    n.t.sweep(n.now, usize::MAX, &mut stats);
    assert!(r.asked.load(Relaxed) > 0);
    assert_eq!(r.calls.load(Relaxed), 0);
    assert!(r.take().is_empty());
    // Once it listens again, events come.
    r.on.store(true, Relaxed);
    send(&n, &udp(2000, true), "commit");
    assert_eq!(r.states(), ev(&[(New, "FIRST")]));
}

#[test]
fn a_burst_reports_each_state_change_of_a_flow_in_order() {
    let (n, r) = listened();
    let frames: Vec<Vec<u8>> = [
        tcp(true, SYN, 100, 0, b""),
        tcp(false, SYN | ACK, 500, 101, b""),
        tcp(true, ACK, 101, 501, b""),
        tcp(true, FIN | ACK, 101, 501, b""),
        tcp(true, ACK, 102, 501, b""),
    ]
    .iter()
    .map(Frame::build)
    .collect();
    let refs: Vec<&[u8]> = frames.iter().map(Vec::as_slice).collect();
    let mut outs = Vec::new();
    let mut stats = Stats::default();
    n.t.process_batch(
        &refs,
        ctrack_core::LinkType::Ethernet,
        &common::act("commit"),
        n.now,
        &mut outs,
        &mut stats,
    );
    assert!(outs.iter().all(|v| v.invalid.is_none()), "{outs:?}");
    assert_eq!(
        r.states(),
        ev(&[
            (New, "SYN_SENT"),
            (Update, "ESTABLISHED"),
            (Update, "CLOSING"),
        ])
    );
}

#[test]
fn threads_committing_and_a_flush_report_each_connection_once_each_way() {
    let (n, r) = listened();
    let (tracker, now, commit) = (&n.t, n.now, common::act("commit"));
    std::thread::scope(|s| {
        for t in 0..4u16 {
            let commit = &commit;
            s.spawn(move || {
                let mut stats = Stats::default();
                let link = ctrack_core::LinkType::Ethernet;
                for i in 0..250u16 {
                    let port = 1024 + t * 250 + i;
                    let f = udp(port, true).build();
                    let v = tracker.process(&f, link, commit, now, &mut stats);
                    assert!(v.committed, "{v:?}");
                    let f = udp(port, false).build();
                    tracker.process(&f, link, commit, now, &mut stats);
                }
            });
        }
    });
    let mut stats = Stats::default();
    assert_eq!(n.t.flush_all(&mut stats), 1000);
    let got = r.states();
    let count = |k: EventKind, s: &str| got.iter().filter(|(gk, gs)| *gk == k && gs == s).count();
    assert_eq!(count(New, "FIRST"), 1000);
    assert_eq!(count(Update, "BIDIR"), 1000);
    assert_eq!(count(Destroy, "BIDIR"), 1000);
    assert_eq!(got.len(), 3000);
}
