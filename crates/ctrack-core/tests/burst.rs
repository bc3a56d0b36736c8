//! The burst path (`Tracker::process_batch`) and the one-packet path
//! (`Tracker::process`) against the one-packet path with the fast lane off
//! (`Tracker::set_fast_lane`), every packet down the general path: the
//! same traffic, cut into bursts of uneven sizes and full of runs of one
//! flow (the same frame again and again, as a sender's burst or a
//! benchmark's batch), must give every packet the same verdict, leave the
//! same counters in the caller's stats and the same connections (states,
//! packet and byte counts, marks) in the table, and report the same events.
//!
//! The shortcuts that the traffic puts to the test: in a burst, runs of a
//! connection that is not TCP are judged once and copied; in a burst or
//! alone, a packet of the common case takes the fast lane (its connection
//! looked up and judged, or opened, without the general path's retries and
//! checks). The traffic meets every case where they must not apply: a run
//! whose first packet changes the state, runs in both directions, actions
//! that set a mark or a label or force a commit, connections that expire
//! the moment they are created or on their second packet (zones whose
//! timeouts are zero), expiry and zone flushes between bursts, ICMP errors,
//! and TCP segments (sent again, or enough of them to fill the window).

use std::sync::{Arc, Mutex};

use ctrack_core::{
    AfterEach, Config, ConnId, CtAction, CtState, Entry, EventKind, EventSink, KeyHasher, LinkType,
    Millis, Stats, Time, TimeoutPolicy, Tracker, Verdict,
};
use ctrack_wire::build::{self, Frame, L4};
use ctrack_wire::tcp::flags::{ACK, PSH, SYN};

const C: [u8; 4] = [10, 0, 0, 1];
const S: [u8; 4] = [192, 0, 2, 2];
/// A zone whose connections expire as soon as they are made.
const ZERO_ZONE: u16 = 7;
/// A zone whose connections live until their second packet one way (or
/// their answer), then expire at once.
const SECOND_ZONE: u16 = 8;

/// A verdict without its connection id (ids differ from tracker to
/// tracker), and whether it had one.
fn plain(v: &Verdict) -> (bool, Verdict) {
    let mut v = *v;
    (v.conn.take().is_some(), v)
}

/// Every event, in the order reported.
#[derive(Debug, Default)]
struct Recorder(Mutex<Vec<(EventKind, String)>>);

impl EventSink for Recorder {
    fn active(&self) -> bool {
        true
    }

    fn event(&self, kind: EventKind, entry: &Entry) {
        self.0.lock().unwrap().push((kind, entry.to_string()));
    }
}

/// A small deterministic generator (xorshift64*).
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 32) % n
    }
}

fn udp(port: u16, out: bool, payload: &[u8]) -> Frame {
    if out {
        Frame::v4(C, S, L4::udp(port, 53, payload))
    } else {
        Frame::v4(S, C, L4::udp(53, port, payload))
    }
}

/// The IPv6 addresses of the client and the server.
fn v6_ends() -> (std::net::Ipv6Addr, std::net::Ipv6Addr) {
    (
        "fd00::10:1".parse().expect("an address"),
        "2001:db8::2".parse().expect("an address"),
    )
}

fn udp6(port: u16, out: bool, payload: &[u8]) -> Frame {
    let (c, s) = v6_ends();
    if out {
        Frame::v6(c, s, L4::udp(port, 53, payload))
    } else {
        Frame::v6(s, c, L4::udp(53, port, payload))
    }
}

fn ping(id: u16, out: bool) -> Frame {
    if out {
        Frame::v4(C, S, L4::icmp_query(8, id, 1))
    } else {
        Frame::v4(S, C, L4::icmp_query(0, id, 1))
    }
}

/// The server's port unreachable about a datagram of flow `port`.
fn unreachable(port: u16) -> Frame {
    let quoted = udp(port, true, b"q").ip_packet();
    Frame::v4(S, C, L4::icmp_error(3, 3, &build::quote(&quoted, 8)))
}

/// One TCP conversation: a handshake, then runs of segments one way (a
/// sender's burst, each segment one byte further on) and the other side's
/// acknowledgement of all of them; now and then a segment sent again.
struct Conversation {
    /// Next sequence numbers of client and server (0: no handshake yet).
    seq: [u32; 2],
    /// Over IPv6.
    v6: bool,
}

impl Conversation {
    fn segment(&self, client: bool, flags: u16, seq: u32, ack: u32, len: usize) -> Vec<u8> {
        let (sp, dp) = if client { (40000, 80) } else { (80, 40000) };
        let l4 = L4::tcp_seg(sp, dp, flags, seq, ack, 65535, &vec![b'x'; len]);
        if self.v6 {
            let (c, s) = v6_ends();
            let (src, dst) = if client { (c, s) } else { (s, c) };
            return Frame::v6(src, dst, l4).build();
        }
        let (src, dst) = if client { (C, S) } else { (S, C) };
        Frame::v4(src, dst, l4).build()
    }

    /// The next frames: a run of segments of one side, each once, or one
    /// segment `repeat` times.
    fn next(&mut self, rng: &mut Rng, out: &mut Vec<Vec<u8>>) {
        if self.seq == [0, 0] {
            out.push(self.segment(true, SYN, 100, 0, 0));
            out.push(self.segment(false, SYN | ACK, 500, 101, 0));
            self.seq = [101, 501];
            return;
        }
        let side = rng.below(2) as usize;
        let (me, peer) = (self.seq[side], self.seq[1 - side]);
        let run = 1 + rng.below(8) as u32;
        // Small segments, and segments large enough that a run of them
        // fills the peer's window (65,535 bytes): the last ones are out
        // of it, which only tracking every segment shows.
        let len = [1, 1460, 9000][rng.below(3) as usize];
        if rng.below(4) == 0 {
            // The last byte again (a retransmission), several times.
            let f = self.segment(side == 0, PSH | ACK, me.wrapping_sub(1), peer, 1);
            out.extend(std::iter::repeat_n(f, run as usize));
            return;
        }
        for k in 0..run {
            out.push(self.segment(side == 0, PSH | ACK, me + k * len as u32, peer, len));
        }
        let end = me + run * len as u32;
        self.seq[side] = end;
        // The peer acknowledges all of it at once.
        out.push(self.segment(side == 1, ACK, peer, end, 0));
    }
}

/// The traffic: runs of one frame, 1 to 8 long, of UDP flows both ways
/// (with payloads of different lengths) over IPv4 and IPv6, pings and
/// their replies, ICMP errors, and a TCP conversation over each family.
fn traffic(rng: &mut Rng, n: usize) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut tcp = Conversation {
        seq: [0, 0],
        v6: false,
    };
    let mut tcp6 = Conversation {
        seq: [0, 0],
        v6: true,
    };
    while out.len() < n {
        let f = match rng.below(9) {
            0 | 1 => {
                let payload = vec![b'p'; 1 + rng.below(40) as usize];
                udp(5000 + rng.below(6) as u16, rng.below(3) != 0, &payload)
            }
            2 => ping(1 + rng.below(3) as u16, rng.below(2) == 0),
            3 => unreachable(5000 + rng.below(6) as u16),
            4 | 5 => {
                let payload = vec![b'p'; 1 + rng.below(40) as usize];
                udp6(5000 + rng.below(6) as u16, rng.below(3) != 0, &payload)
            }
            6 => {
                tcp6.next(rng, &mut out);
                continue;
            }
            _ => {
                tcp.next(rng, &mut out);
                continue;
            }
        };
        let bytes = f.build();
        for _ in 0..1 + rng.below(8) {
            out.push(bytes.clone());
        }
    }
    out
}

/// The connections of a table as dumps print them (ids differ between
/// two tables, and `for_each` visits in table order), sorted.
fn dump(t: &Tracker, now: Time) -> Vec<String> {
    let mut v = Vec::new();
    t.for_each(None, now, |_, c| v.push(c.entry.to_string()));
    v.sort();
    v
}

fn tracker() -> (Tracker, Arc<Recorder>) {
    let t = Tracker::default();
    t.set_zone_timeouts(
        ZERO_ZONE,
        TimeoutPolicy {
            udp_first: 0,
            udp_single: 0,
            udp_multiple: 0,
            icmp_first: 0,
            icmp_reply: 0,
            ..TimeoutPolicy::default()
        },
    );
    t.set_zone_timeouts(
        SECOND_ZONE,
        TimeoutPolicy {
            udp_single: 0,
            udp_multiple: 0,
            icmp_reply: 0,
            ..TimeoutPolicy::default()
        },
    );
    let r = Arc::new(Recorder::default());
    t.set_event_sink(Some(r.clone()));
    (t, r)
}

#[test]
fn bursts_with_runs_of_one_flow_judge_as_one_packet_at_a_time() {
    let actions: Vec<CtAction> = [
        "commit",
        "commit",
        "",
        "commit,mark=0x15/0xff",
        "commit,zone=7",
        "zone=7",
        "commit,zone=8",
        "commit,zone=3,label=0x300",
        "commit,force",
    ]
    .iter()
    .map(|s| s.parse().unwrap())
    .collect();
    let mut copied_runs = 0;
    for seed in 1..=8u64 {
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ seed);
        let frames = traffic(&mut rng, 3_000);
        // The reference: one packet at a time, every one down the general
        // path. Against it: bursts, and one packet at a time, both with the
        // fast lane.
        let ((one, one_events), (burst, burst_events)) = (tracker(), tracker());
        let (single, single_events) = tracker();
        one.set_fast_lane(false);
        let (mut s1, mut s2, mut s3) = (Stats::default(), Stats::default(), Stats::default());
        let mut now = Time::from_secs(1);
        let mut at = 0;
        while at < frames.len() {
            let n = (1 + rng.below(48) as usize).min(frames.len() - at);
            let action = &actions[rng.below(actions.len() as u64) as usize];
            // Mostly the same second; now and then long enough for some
            // connections to expire between bursts.
            now = match rng.below(10) {
                0 => now + Millis(31_000),
                1..=3 => now + Millis(700),
                _ => now,
            };
            if rng.below(40) == 0 {
                // A zone flushed now and then: its connections' generation
                // ends, and their packets start new ones.
                let zone = [0, 3, 7][rng.below(3) as usize];
                for t in [&one, &burst, &single] {
                    t.flush_zone(zone);
                }
            }
            let chunk: Vec<&[u8]> = frames[at..at + n].iter().map(Vec::as_slice).collect();
            let want: Vec<Verdict> = chunk
                .iter()
                .map(|f| one.process(f, LinkType::Ethernet, action, now, &mut s1))
                .collect();
            let mut got = Vec::new();
            burst.process_batch(&chunk, LinkType::Ethernet, action, now, &mut got, &mut s2);
            let alone: Vec<Verdict> = chunk
                .iter()
                .map(|f| single.process(f, LinkType::Ethernet, action, now, &mut s3))
                .collect();
            for (j, w) in want.iter().enumerate() {
                let at = at + j + 1;
                assert_eq!(
                    plain(&got[j]),
                    plain(w),
                    "seed {seed}, packet {at} ({action}), burst"
                );
                assert_eq!(
                    plain(&alone[j]),
                    plain(w),
                    "seed {seed}, packet {at} ({action}), alone"
                );
            }
            // Runs of equal frames the burst could copy: a packet equal to
            // the one before it, of a connection that is not TCP.
            copied_runs += (1..n)
                .filter(|&j| {
                    chunk[j] == chunk[j - 1] && chunk[j][23] != 6 && want[j].conn.is_some()
                })
                .count();
            at += n;
            assert_eq!(s1, s2, "seed {seed}: counters after packet {at}, burst");
            assert_eq!(s1, s3, "seed {seed}: counters after packet {at}, alone");
            let table = dump(&one, now);
            assert_eq!(
                table,
                dump(&burst, now),
                "seed {seed}: table after packet {at}, burst"
            );
            assert_eq!(
                table,
                dump(&single, now),
                "seed {seed}: table after packet {at}, alone"
            );
        }
        let events = one_events.0.lock().unwrap();
        assert_eq!(
            *events,
            *burst_events.0.lock().unwrap(),
            "seed {seed}: events, burst"
        );
        assert_eq!(
            *events,
            *single_events.0.lock().unwrap(),
            "seed {seed}: events, alone"
        );
        assert_eq!(s1.packets, frames.len() as u64);
    }
    assert!(copied_runs > 1_000, "only {copied_runs} repeated packets");
}

/// What a firewall does with a lookup's verdict: a packet found `+new`
/// (and valid) is tracked again with a commit, whose verdict it takes;
/// every other packet is settled on its lookup.
struct CommitNew<'a> {
    t: &'a Tracker,
    commit: CtAction,
    now: Time,
    /// Rewrite the frame (`process_mut`), as the rewriting burst does.
    rewrite: bool,
    /// The packets `after` was called for, by their place in the call.
    seen: Vec<usize>,
}

impl CommitNew<'_> {
    fn needs_commit(v: &Verdict) -> bool {
        v.state.contains(CtState::NEW) && v.invalid.is_none()
    }
}

impl AfterEach for CommitNew<'_> {
    fn settled(&self, v: &Verdict) -> bool {
        !CommitNew::needs_commit(v)
    }

    fn after(&mut self, i: usize, frame: &mut Vec<u8>, v: &mut Verdict, stats: &mut Stats) -> bool {
        self.seen.push(i);
        if !CommitNew::needs_commit(v) {
            return false;
        }
        *v = if self.rewrite {
            self.t
                .process_mut(frame, LinkType::Ethernet, &self.commit, self.now, stats)
        } else {
            self.t
                .process(frame, LinkType::Ethernet, &self.commit, self.now, stats)
        };
        true
    }
}

/// Bursts whose caller commits each new connection as soon as the
/// tracker has looked its packet up (`Tracker::process_burst_then` and
/// `process_burst_mut_then`, as the firewall does) against the same
/// lookups and commits frame by frame: a commit happens before the
/// burst's next packet is looked up, so a reply right behind the packet
/// that opened its connection finds it (and a run of one flow is not
/// judged past a packet that is to be committed); `after` is told each
/// packet's place in the call, past the first burst of 32 too (mutation
/// round 40: with the place counted from each burst, every test passed).
#[test]
fn bursts_that_commit_after_each_lookup_judge_as_frame_by_frame() {
    let pairs: Vec<(CtAction, CtAction)> = [
        ("", "commit"),
        ("zone=3", "commit,zone=3,label=0x300"),
        ("zone=8", "commit,zone=8,mark=0x15/0xff"),
    ]
    .iter()
    .map(|(l, c)| (l.parse().unwrap(), c.parse().unwrap()))
    .collect();
    for seed in 1..=6u64 {
        let rewrite = seed % 2 == 0;
        let mut rng = Rng(0x243f_6a88_85a3_08d3 ^ seed);
        let frames = traffic(&mut rng, 3_000);
        let ((one, one_events), (burst, burst_events)) = (tracker(), tracker());
        let (mut s1, mut s2) = (Stats::default(), Stats::default());
        let mut now = Time::from_secs(1);
        let mut at = 0;
        let mut commits = 0;
        while at < frames.len() {
            let n = (1 + rng.below(48) as usize).min(frames.len() - at);
            let (lookup, commit) = &pairs[rng.below(pairs.len() as u64) as usize];
            if rng.below(10) == 0 {
                now = now + Millis(700);
            }
            let want: Vec<Verdict> = frames[at..at + n]
                .iter()
                .map(|f| {
                    let v = one.process(f, LinkType::Ethernet, lookup, now, &mut s1);
                    if CommitNew::needs_commit(&v) {
                        commits += 1;
                        one.process(f, LinkType::Ethernet, commit, now, &mut s1)
                    } else {
                        v
                    }
                })
                .collect();
            let mut chunk: Vec<Vec<u8>> = frames[at..at + n].to_vec();
            let mut got = vec![Verdict::default(); n];
            let mut then = CommitNew {
                t: &burst,
                commit: *commit,
                now,
                rewrite,
                seen: Vec::new(),
            };
            let l = LinkType::Ethernet;
            if rewrite {
                burst.process_burst_mut_then(
                    &mut chunk, l, lookup, now, &mut got, &mut s2, &mut then,
                );
            } else {
                burst.process_burst_then(&mut chunk, l, lookup, now, &mut got, &mut s2, &mut then);
            }
            // Every packet once, in order, named by its place in the call
            // (past the first 32 too: the tracker works in bursts of 32).
            assert_eq!(then.seen, (0..n).collect::<Vec<_>>(), "seed {seed}");
            for (j, (w, g)) in want.iter().zip(&got).enumerate() {
                assert_eq!(plain(g), plain(w), "seed {seed}, packet {}", at + j + 1);
            }
            assert_eq!(chunk, frames[at..at + n], "seed {seed}: bytes");
            at += n;
            assert_eq!(s1, s2, "seed {seed}: counters after packet {at}");
            assert_eq!(
                dump(&one, now),
                dump(&burst, now),
                "seed {seed}: table after packet {at}"
            );
        }
        assert_eq!(
            *one_events.0.lock().unwrap(),
            *burst_events.0.lock().unwrap(),
            "seed {seed}: events"
        );
        assert!(commits > 50, "seed {seed}: only {commits} commits");
    }
}

/// What follows each packet removes the connection of an invalid packet
/// (the last connection it was told of: an invalid packet may name none),
/// as the firewall removes a connection a policy change blocked: `settled`
/// says so, and a run of one flow must stop there, so that the flow's
/// next packets meet the table without it, as frame by frame.
struct RemoveOnInvalid<'a> {
    t: &'a Tracker,
    now: Time,
    last: Option<ConnId>,
}

impl RemoveOnInvalid<'_> {
    /// What `after` does, frame by frame as in a burst.
    fn follow(&mut self, v: &Verdict, stats: &mut Stats) -> bool {
        if v.invalid.is_none() {
            self.last = v.conn.or(self.last);
            return false;
        }
        self.last
            .take()
            .is_some_and(|id| self.t.remove(id, self.now, stats))
    }
}

impl AfterEach for RemoveOnInvalid<'_> {
    fn settled(&self, v: &Verdict) -> bool {
        v.invalid.is_none()
    }

    fn after(&mut self, _: usize, _: &mut Vec<u8>, v: &mut Verdict, stats: &mut Stats) -> bool {
        self.follow(v, stats)
    }
}

/// A run of one TCP flow's segments with an invalid one in its middle
/// (out of the window), whose connection the caller removes: the segments
/// behind it are judged after the removal, each meeting no connection
/// (and, mid-stream, opening one, as Open vSwitch's loose tracking does),
/// as frame by frame. (Mutation round 40: with `settled` taken as true
/// whatever the caller said, every test passed.)
#[test]
fn a_run_stops_at_a_packet_whose_follower_changes_the_table() {
    let mut frames = Vec::new();
    for port in 1000..1008u16 {
        let seg = |to_server: bool, flags: u16, seq: u32, ack: u32, data: &[u8]| {
            let l4 = |s, d| L4::tcp_seg(s, d, flags, seq, ack, 65535, data);
            if to_server {
                Frame::v4(C, S, l4(port, 80)).build()
            } else {
                Frame::v4(S, C, l4(80, port)).build()
            }
        };
        frames.push(seg(true, SYN, 100, 0, b""));
        frames.push(seg(false, SYN | ACK, 500, 101, b""));
        frames.push(seg(true, ACK, 101, 501, b""));
        frames.push(seg(true, PSH | ACK, 101, 501, b"a"));
        frames.push(seg(true, PSH | ACK, 102, 501, b"b"));
        frames.push(seg(true, PSH | ACK, 101 + (1 << 30), 501, b"c"));
        frames.push(seg(true, PSH | ACK, 103, 501, b"d"));
        frames.push(seg(true, PSH | ACK, 104, 501, b"e"));
    }
    let commit: CtAction = "commit".parse().unwrap();
    let now = Time::from_secs(1);
    let one = Tracker::default();
    let mut s1 = Stats::default();
    let mut reference = RemoveOnInvalid {
        t: &one,
        now,
        last: None,
    };
    let want: Vec<Verdict> = frames
        .iter()
        .map(|f| {
            let v = one.process(f, LinkType::Ethernet, &commit, now, &mut s1);
            reference.follow(&v, &mut s1);
            v
        })
        .collect();
    // The read-only burst and the rewriting one.
    for rewrite in [false, true] {
        let burst = Tracker::default();
        let mut s2 = Stats::default();
        let mut got = vec![Verdict::default(); frames.len()];
        let mut then = RemoveOnInvalid {
            t: &burst,
            now,
            last: None,
        };
        let mut chunk = frames.clone();
        let (l, a) = (LinkType::Ethernet, &commit);
        if rewrite {
            burst.process_burst_mut_then(&mut chunk, l, a, now, &mut got, &mut s2, &mut then);
        } else {
            burst.process_burst_then(&mut chunk, l, a, now, &mut got, &mut s2, &mut then);
        }
        for (j, (w, g)) in want.iter().zip(&got).enumerate() {
            assert_eq!(plain(g), plain(w), "rewrite {rewrite}, packet {}", j + 1);
        }
        assert_eq!(s1, s2, "rewrite {rewrite}");
    }
    // Each flow's invalid segment removed its connection, and the next
    // segment opened another.
    assert_eq!(s1.flushed, 8, "{s1:?}");
    assert_eq!(s1.committed, 16, "{s1:?}");
}

/// A run of one flow's packets takes only packets of its protocol: a TCP
/// segment between the same addresses and ports as a UDP flow (a tuple
/// equal but for the protocol) that follows the flow's datagrams in a
/// burst opens a connection of its own, as it does one packet at a time.
/// (Mutation round 42: the run taking packets of another protocol and
/// not its own passed the crate's tests.)
#[test]
fn a_run_of_one_flow_takes_no_packet_of_another_protocol() {
    let dgram = |out: bool| {
        if out {
            Frame::v4(C, S, L4::udp(4000, 53, b"q")).build()
        } else {
            Frame::v4(S, C, L4::udp(53, 4000, b"a")).build()
        }
    };
    let tcp = |out: bool, flags: u16| {
        let l4 = |s, d| L4::tcp_seg(s, d, flags, 100, 0, 65535, b"");
        if out {
            Frame::v4(C, S, l4(4000, 53)).build()
        } else {
            Frame::v4(S, C, l4(53, 4000)).build()
        }
    };
    let frames = [
        dgram(true),
        dgram(false),
        dgram(false),
        tcp(false, SYN),
        tcp(false, SYN),
        dgram(true),
        dgram(true),
        tcp(true, SYN),
    ];
    let commit: CtAction = "commit".parse().unwrap();
    let (now, l) = (Time::from_secs(1), LinkType::Ethernet);
    let one = Tracker::default();
    one.set_fast_lane(false);
    let mut s1 = Stats::default();
    let want: Vec<Verdict> = frames
        .iter()
        .map(|f| one.process(f, l, &commit, now, &mut s1))
        .collect();
    let states: Vec<String> = want.iter().map(|v| v.state.to_string()).collect();
    // The datagrams' flow answered and going on; the server's SYN (and
    // its repeat) a TCP connection of its own, beside it.
    let (new, est, rpl) = ("new|trk", "est|trk", "est|rpl|trk");
    assert_eq!(states[..7], [new, rpl, rpl, new, new, est, est], "{s1:?}");
    // With the fast lane and without: the general path keeps every
    // packet's connection for the next, whatever its flow.
    for fast in [true, false] {
        let burst = Tracker::default();
        burst.set_fast_lane(fast);
        let mut s2 = Stats::default();
        let mut got = Vec::new();
        let refs: Vec<&[u8]> = frames.iter().map(Vec::as_slice).collect();
        burst.process_batch(&refs, l, &commit, now, &mut got, &mut s2);
        for (j, (w, g)) in want.iter().zip(&got).enumerate() {
            assert_eq!(plain(g), plain(w), "fast lane {fast}, packet {}", j + 1);
        }
        assert_eq!(s1, s2, "fast lane {fast}");
    }
}

/// The rewriting burst (`Tracker::process_burst_mut`) against the
/// rewriting path frame by frame (`process_mut`), with and without
/// translations: the same verdicts, the same bytes out, the same counters;
/// and a frame whose layers the caller found (`process_layers`) is
/// tracked as `process` tracks it. (Mutation round 41: either entry point
/// made to do nothing passed the crate's tests.)
#[test]
fn rewriting_bursts_and_given_layers_track_as_frame_by_frame() {
    let actions: Vec<CtAction> = [
        "commit",
        "commit,nat(src=198.51.100.1:20000-20100)",
        "nat",
        "commit,nat(dst=192.0.2.99)",
        "commit,zone=3,label=0x300",
    ]
    .iter()
    .map(|s| s.parse().unwrap())
    .collect();
    for seed in 1..=4u64 {
        let mut rng = Rng(0x7f4a_7c15_9e37_79b9 ^ seed);
        let frames = traffic(&mut rng, 2_000);
        // One hash key for all: a translation's port or identifier is
        // chosen from a keyed hash.
        let t = || Tracker::with_hasher(Config::default(), KeyHasher::with_seed(seed));
        let (one, burst, plain_t, layered) = (t(), t(), t(), t());
        let (mut s1, mut s2) = (Stats::default(), Stats::default());
        let (mut s3, mut s4) = (Stats::default(), Stats::default());
        let mut now = Time::from_secs(1);
        let mut at = 0;
        let mut translated = 0;
        while at < frames.len() {
            let n = (1 + rng.below(48) as usize).min(frames.len() - at);
            let action = &actions[rng.below(actions.len() as u64) as usize];
            if rng.below(10) == 0 {
                now = now + Millis(700);
            }
            let l = LinkType::Ethernet;
            let mut want_bytes: Vec<Vec<u8>> = frames[at..at + n].to_vec();
            let want: Vec<Verdict> = want_bytes
                .iter_mut()
                .map(|f| one.process_mut(f, l, action, now, &mut s1))
                .collect();
            let mut got_bytes: Vec<Vec<u8>> = frames[at..at + n].to_vec();
            let mut got = vec![Verdict::default(); n];
            burst.process_burst_mut(&mut got_bytes, l, action, now, &mut got, &mut s2);
            for (j, (w, g)) in want.iter().zip(&got).enumerate() {
                let p = at + j + 1;
                assert_eq!(plain(g), plain(w), "seed {seed}, packet {p} ({action})");
                assert_eq!(
                    got_bytes[j], want_bytes[j],
                    "seed {seed}, packet {p}: bytes"
                );
            }
            translated += want_bytes
                .iter()
                .zip(&frames[at..at + n])
                .filter(|(a, b)| a != b)
                .count();
            for f in &frames[at..at + n] {
                let layers = ctrack_wire::frame::parse_frame(f, l);
                let w = plain_t.process(f, l, action, now, &mut s3);
                let v = layered.process_layers(f, &layers, action, now, &mut s4);
                assert_eq!(plain(&v), plain(&w), "seed {seed} ({action})");
            }
            at += n;
            assert_eq!(s1, s2, "seed {seed}: counters after packet {at}, burst");
            assert_eq!(s3, s4, "seed {seed}: counters after packet {at}, layers");
        }
        assert!(
            translated > 100,
            "seed {seed}: {translated} frames rewritten"
        );
    }
}
