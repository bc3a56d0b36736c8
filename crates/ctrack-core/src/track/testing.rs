//! What the tracker's own tests share: a tracker with a clock, the frames
//! of a few small conversations, actions, keys and expected verdicts.

use std::cell::Cell;
use std::net::Ipv4Addr;

use ctrack_wire::LinkType;
use ctrack_wire::build::{self, Frame, L4};
use ctrack_wire::icmp::v4;
use ctrack_wire::ip_proto;
use ctrack_wire::tcp::flags::{ACK, FIN, PSH, SYN};

use super::{Config, Sweep, Tracker};
use crate::action::CtAction;
use crate::key::{ConnId, ConnKey, Dir, Endpoint, Family, Zone};
use crate::time::Time;
use crate::verdict::{CtState, Stats, Verdict};

/// The client.
pub(super) const C: [u8; 4] = [10, 0, 0, 1];
/// The server.
pub(super) const S: [u8; 4] = [10, 0, 0, 2];
/// A router between them.
pub(super) const R: [u8; 4] = [10, 0, 0, 254];

/// The client's TCP port; the server's is 80.
pub(super) const CPORT: u16 = 40000;

/// The `ct` action written as Open vSwitch users write it.
pub(super) fn act(s: &str) -> CtAction {
    s.parse().expect("a valid ct action")
}

/// A `ct_state` from its names (`"est|rpl|trk"`).
pub(super) fn st(names: &str) -> CtState {
    names.split('|').fold(CtState::empty(), |acc, n| {
        acc | CtState::from_name(&n.to_uppercase()).expect("a ct_state name")
    })
}

/// The verdict of a packet with state `names` in zone 0 and nothing else
/// set: complete it with `..` for the fields a packet sets.
pub(super) fn verdict(names: &str) -> Verdict {
    Verdict {
        state: st(names),
        ..Verdict::default()
    }
}

/// The verdict of a packet judged against connection `id` in direction
/// `dir`.
pub(super) fn hit(names: &str, id: ConnId, dir: Dir) -> Verdict {
    Verdict {
        conn: Some(id),
        dir,
        ..verdict(names)
    }
}

/// The verdict of a later packet of the connection `first` committed:
/// the same zone, mark, label and gateway, in direction `dir`.
pub(super) fn later(first: &Verdict, names: &str, dir: Dir) -> Verdict {
    Verdict {
        state: st(names),
        dir,
        committed: false,
        ..*first
    }
}

/// The verdict of a packet that committed connection `id`.
pub(super) fn committed(names: &str, id: ConnId) -> Verdict {
    Verdict {
        committed: true,
        ..hit(names, id, Dir::Orig)
    }
}

/// A TCP segment between C:40000 and S:80, to the server or back.
pub(super) fn tcp(to_server: bool, flags: u16, seq: u32, ack: u32, payload: &[u8]) -> Frame {
    if to_server {
        Frame::v4(
            C,
            S,
            L4::tcp_seg(CPORT, 80, flags, seq, ack, 65535, payload),
        )
    } else {
        Frame::v4(
            S,
            C,
            L4::tcp_seg(80, CPORT, flags, seq, ack, 65535, payload),
        )
    }
}

/// A UDP datagram between C:`port` and S:53, to the server or back.
pub(super) fn udp(port: u16, to_server: bool) -> Frame {
    if to_server {
        Frame::v4(C, S, L4::udp(port, 53, b"query"))
    } else {
        Frame::v4(S, C, L4::udp(53, port, b"answer"))
    }
}

/// An ICMP echo request C -> S (`request`) or its reply S -> C.
pub(super) fn ping(id: u16, request: bool) -> Frame {
    if request {
        Frame::v4(C, S, L4::icmp_query(v4::ECHO_REQUEST, id, 1))
    } else {
        Frame::v4(S, C, L4::icmp_query(v4::ECHO_REPLY, id, 1))
    }
}

/// An ICMP destination unreachable from `from` to `to` quoting `quoted`'s
/// IP header and 8 bytes.
pub(super) fn unreachable(from: [u8; 4], to: [u8; 4], quoted: &Frame) -> Frame {
    let q = build::quote(&quoted.ip_packet(), 8);
    Frame::v4(from, to, L4::icmp_error(v4::DST_UNREACH, 3, &q))
}

/// The key of the TCP connection C:40000 -> S:80 in `zone`.
pub(super) fn tcp_key(zone: Zone) -> ConnKey {
    ConnKey {
        src: Endpoint::v4(Ipv4Addr::from(C), CPORT),
        dst: Endpoint::v4(Ipv4Addr::from(S), 80),
        zone,
        proto: ip_proto::TCP,
        family: Family::V4,
    }
}

/// The key of the UDP flow C:`port` -> S:53 in `zone`.
pub(super) fn udp_key(port: u16, zone: Zone) -> ConnKey {
    ConnKey {
        src: Endpoint::v4(Ipv4Addr::from(C), port),
        dst: Endpoint::v4(Ipv4Addr::from(S), 53),
        zone,
        proto: ip_proto::UDP,
        family: Family::V4,
    }
}

/// The start of every test's clock (ms): a whole second, so that the
/// sweep's seconds are easy to name.
pub(super) const T0: u64 = 1_000_000;

/// A tracker and the time its packets arrive at.
pub(super) struct Sim {
    pub(super) t: Tracker,
    pub(super) now: Time,
    /// The counters of the test's one worker.
    pub(super) stats: Cell<Stats>,
}

impl Sim {
    pub(super) fn new() -> Sim {
        Sim::with(Config::default())
    }

    /// One shard: what a commit's early drop and a sweep's budget see is
    /// the whole table.
    pub(super) fn one_shard(max_conns: usize) -> Sim {
        Sim::with(Config {
            max_conns,
            shards: 1,
            ..Config::default()
        })
    }

    pub(super) fn with(config: Config) -> Sim {
        Sim {
            t: Tracker::new(config),
            now: Time::from_millis(T0),
            stats: Cell::new(Stats::default()),
        }
    }

    /// Moves the clock to `ms` after [`T0`].
    pub(super) fn at(&mut self, ms: u64) -> &mut Sim {
        self.now = Time::from_millis(T0 + ms);
        self
    }

    /// Tracks `f` with `action` now.
    pub(super) fn send(&self, f: &Frame, action: &str) -> Verdict {
        let mut stats = self.stats.get();
        let v = self.t.process(
            &f.build(),
            LinkType::Ethernet,
            &act(action),
            self.now,
            &mut stats,
        );
        self.stats.set(stats);
        v
    }

    /// [`Tracker::flush_all`], counting in this worker's counters.
    pub(super) fn flush_all(&self) -> usize {
        let mut stats = self.stats.get();
        let n = self.t.flush_all(&mut stats);
        self.stats.set(stats);
        n
    }

    /// [`Tracker::flush_zone_now`], counting in this worker's counters.
    pub(super) fn flush_zone_now(&self, zone: Zone) -> usize {
        let mut stats = self.stats.get();
        let n = self.t.flush_zone_now(zone, &mut stats);
        self.stats.set(stats);
        n
    }

    /// [`Tracker::flush_key`] now, counting in this worker's counters.
    pub(super) fn flush_key(&self, key: &ConnKey) -> bool {
        let mut stats = self.stats.get();
        let found = self.t.flush_key(key, self.now, &mut stats);
        self.stats.set(stats);
        found
    }

    /// Sweeps at `now`, looking at no more than `budget` connections.
    pub(super) fn sweep(&self, now: Time, budget: usize) -> Sweep {
        let mut stats = self.stats.get();
        let s = self.t.sweep(now, budget, &mut stats);
        self.stats.set(stats);
        s
    }

    /// The connection of a committed packet.
    pub(super) fn open(&self, f: &Frame, action: &str) -> ConnId {
        let v = self.send(f, action);
        assert!(v.committed, "{f:?} committed: {v:?}");
        v.conn.expect("a committed packet has a connection")
    }

    /// A UDP flow C:`port` <-> S:53 seen both ways (established) in the
    /// zone of `action`.
    pub(super) fn udp_both_ways(&self, port: u16, action: &str) -> ConnId {
        let first = self.send(&udp(port, true), action);
        assert!(first.committed, "{first:?}");
        let v = self.send(&udp(port, false), action);
        assert_eq!(v, later(&first, "est|rpl|trk", Dir::Reply));
        id_of(&first)
    }

    /// The TCP handshake C:40000 <-> S:80 (client ISN 100, server ISN
    /// 500) with `action`, each step's verdict checked.
    pub(super) fn handshake(&self, action: &str) -> ConnId {
        let first = self.send(&tcp(true, SYN, 100, 0, b""), action);
        assert!(first.committed, "{first:?}");
        let v = self.send(&tcp(false, SYN | ACK, 500, 101, b""), action);
        assert_eq!(v, later(&first, "est|rpl|trk", Dir::Reply));
        let v = self.send(&tcp(true, ACK, 101, 501, b""), action);
        assert_eq!(v, later(&first, "est|trk", Dir::Orig));
        id_of(&first)
    }

    /// After [`Sim::handshake`]: FIN from each side and the last ACK,
    /// leaving both sides closed (TIME_WAIT).
    pub(super) fn close(&self, action: &str) {
        for f in [
            tcp(true, FIN | ACK, 101, 501, b""),
            tcp(false, FIN | ACK, 501, 102, b""),
            tcp(true, ACK, 102, 502, b""),
        ] {
            let v = self.send(&f, action);
            assert!(v.state.contains(CtState::EST), "{f:?}: {v:?}");
        }
    }

    /// The ids of the connections `for_each` visits (of `zone`, if
    /// given), sorted.
    pub(super) fn ids(&self, zone: Option<Zone>) -> Vec<ConnId> {
        let mut v = Vec::new();
        self.t.for_each(zone, self.now, |id, _| v.push(id));
        v.sort();
        v
    }
}

/// A segment of the FTP control connection `client`:40000 <-> S:21.
pub(super) fn ftp_seg(
    client: [u8; 4],
    to_server: bool,
    flags: u16,
    seq: u32,
    ack: u32,
    data: &[u8],
) -> Frame {
    if to_server {
        Frame::v4(
            client,
            S,
            L4::tcp_seg(CPORT, 21, flags, seq, ack, 65535, data),
        )
    } else {
        Frame::v4(
            S,
            client,
            L4::tcp_seg(21, CPORT, flags, seq, ack, 65535, data),
        )
    }
}

/// The client's next sequence number on the FTP control connection after
/// [`ftp_port_from`].
pub(super) const FTP_SEQ_AFTER_PORT: u32 = 101 + 22;

/// The FTP control connection `client`:40000 -> S:21 opened with
/// `action` (which names `alg=ftp`): its handshake (client ISN 100, server
/// ISN 500) and the client's `PORT` for its own address and port 40001,
/// each later packet committed in the action's zone. Returns the control
/// connection.
pub(super) fn ftp_port_from(sim: &Sim, client: [u8; 4], action: &str) -> ConnId {
    let syn = sim.send(&ftp_seg(client, true, SYN, 100, 0, b""), action);
    assert!(syn.committed && syn.inspect, "{syn:?}");
    let commit = format!("commit,zone={}", act(action).zone);
    let v = sim.send(&ftp_seg(client, false, SYN | ACK, 500, 101, b""), &commit);
    assert_eq!(v, later(&syn, "est|rpl|trk", Dir::Reply));
    let v = sim.send(&ftp_seg(client, true, ACK, 101, 501, b""), &commit);
    assert_eq!(v, later(&syn, "est|trk", Dir::Orig));
    let [a, b, c, d] = client;
    let port = format!("PORT {a},{b},{c},{d},156,65\r\n");
    assert_eq!(port.len() as u32, FTP_SEQ_AFTER_PORT - 101);
    let data = ftp_seg(client, true, PSH | ACK, 101, 501, port.as_bytes());
    assert_eq!(sim.send(&data, &commit), later(&syn, "est|trk", Dir::Orig));
    id_of(&syn)
}

/// [`ftp_port_from`] the client C.
pub(super) fn ftp_port(sim: &Sim, action: &str) -> ConnId {
    ftp_port_from(sim, C, action)
}

/// The FTP control connection's key (C:40000 -> S:21).
pub(super) fn ftp_key() -> ConnKey {
    ConnKey {
        dst: Endpoint::v4(Ipv4Addr::from(S), 21),
        ..tcp_key(0)
    }
}

/// The server's active-mode data connection to `client`:40001 (the port
/// `PORT` announced), from source port `sport`.
pub(super) fn ftp_data_syn(client: [u8; 4], sport: u16) -> Frame {
    Frame::v4(
        S,
        client,
        L4::tcp_seg(sport, 40001, SYN, 9000, 0, 65535, b""),
    )
}

/// `v` for a connection with a gateway, or an expected one: its packets
/// go to the gateway stage.
pub(super) fn inspected(v: Verdict) -> Verdict {
    Verdict { inspect: true, ..v }
}

/// The connection a verdict names.
pub(super) fn id_of(v: &Verdict) -> ConnId {
    v.conn.expect("the packet has a connection")
}

/// Runs `body` in a process of its own: this test binary again, with only
/// the test `name` (its path below the crate, e.g.
/// `track::open::tests::x`), on one thread. For a test that needs the
/// epoch to itself: the collector is the process's, and another test
/// holding a pin meanwhile (a handle keeps one across its calls) holds
/// back the slots it expects to come back. Checks that the test ran and
/// passed there.
pub(super) fn alone(name: &str, body: impl FnOnce()) {
    const ALONE: &str = "CTRACK_TEST_ALONE";
    if std::env::var_os(ALONE).is_some() {
        body();
        return;
    }
    let exe = std::env::current_exe().expect("the test binary's path");
    let out = std::process::Command::new(exe)
        .args([name, "--exact", "--test-threads=1"])
        .env(ALONE, "1")
        .output()
        .expect("the test binary runs again");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{name} alone failed:\n{text}");
    assert!(
        text.contains("1 passed"),
        "{name} did not run alone:\n{text}"
    );
}
