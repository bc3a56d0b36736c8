//! A soak (issue 12, "Under attack"): several threads drive one
//! [`Pipeline`] (reassembly, tracking, NAT, the FTP gateway) with a seeded
//! random mix over a small key space, so that they keep hitting each
//! other's connections: TCP handshakes, data, FINs and RSTs, UDP both
//! ways, ICMP echo and ICMP errors quoting live connections, IPv4 and IPv6
//! fragments (some datagrams left unfinished), source and destination NAT,
//! FTP control connections with their data connections, zone flushes,
//! zone-limit and table-limit changes, and sweeps, while virtual time
//! runs on.
//!
//! Mid-run, race-free checks: a zone's dump lists only that zone, the
//! expectations and held fragments stay under their bounds, every TCP
//! frame that leaves has valid lengths and checksums.
//!
//! At the end (all threads joined):
//! - the table's count equals the number of connections a dump lists, in
//!   all and per zone, and a zone that always had a limit counts exactly
//!   its connections;
//! - after time passes every timeout and everything is swept: no
//!   connection, no expectation, no fragment held, every zone count 0;
//! - no slot leaked: once the epoch has let every freed slot go, opening
//!   new connections reuses them until the slots in use are exactly the
//!   connections held.
//!
//! Minutes in CI (about 20 s in a debug build). By hand, for an hour:
//!
//! ```text
//! CTRACK_SOAK_SECS=3600 cargo test --release -p ctrack-core --test soak -- --nocapture
//! ```
//!
//! `CTRACK_SOAK_THREADS` sets the number of threads (default 4),
//! `CTRACK_SOAK_SEED` the seed (default: from the clock, printed).

mod common;

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

use ctrack_core::{
    Config, CtAction, FragConfig, LinkType, Outputs, Pipeline, Stats, Time, Tracker, Zone,
};
use ctrack_wire::build::{Ext, Frame, L4, quote};
use ctrack_wire::tcp::flags::*;

/// Zones: 0 never limited, 1 and 2 always limited (their count must equal
/// their connections), 3 limited now and then.
const ZONES: Zone = 4;
const LIMITED: [Zone; 2] = [1, 2];
/// Table limits the run switches between.
const MAX_CONNS: [usize; 3] = [2_000, 6_000, 20_000];

/// A small random generator (xorshift64*), written here so that a run is
/// reproducible from its seed alone.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn chance(&mut self, per_mille: u64) -> bool {
        self.below(1000) < per_mille
    }
}

/// What the threads counted.
#[derive(Default)]
struct Ops {
    by_kind: [AtomicU64; KINDS.len()],
}

const KINDS: [&str; 17] = [
    "tcp flow",
    "tcp stray segment",
    "udp",
    "icmp echo",
    "icmp error",
    "fragments v4",
    "fragments v6",
    "fragments left unfinished",
    "fragments overtaken by time",
    "ftp control + data",
    "zone flush",
    "zone flush now",
    "zone limit change",
    "max conns change",
    "sweep",
    "mid-run check",
    "packets sent",
];

#[derive(Clone, Copy)]
enum K {
    Tcp,
    Stray,
    Udp,
    Echo,
    IcmpErr,
    Frag4,
    Frag6,
    Unfinished,
    Overtaken,
    Ftp,
    Flush,
    FlushNow,
    Limit,
    MaxConns,
    Sweep,
    Check,
    Packets,
}

impl Ops {
    fn add(&self, k: K) {
        self.by_kind[k as usize].fetch_add(1, Relaxed);
    }
}

/// The actions a connection's packets take: by zone, NAT or not, family.
struct Actions {
    plain: Vec<CtAction>,
    snat4: Vec<CtAction>,
    snat6: Vec<CtAction>,
    dnat4: Vec<CtAction>,
    ftp: Vec<CtAction>,
    /// Later packets of a translated connection.
    nat: Vec<CtAction>,
}

impl Actions {
    fn new() -> Actions {
        let each = |f: &dyn Fn(Zone) -> String| -> Vec<CtAction> {
            (0..ZONES).map(|z| f(z).parse().unwrap()).collect()
        };
        Actions {
            plain: each(&|z| format!("commit,zone={z}")),
            snat4: each(&|z| format!("commit,zone={z},nat(src=198.51.100.1-198.51.100.4)")),
            snat6: each(&|z| format!("commit,zone={z},nat(src=2001:db8:ffff::1-2001:db8:ffff::4)")),
            dnat4: each(&|z| format!("commit,zone={z},nat(dst=10.9.0.1-10.9.0.2)")),
            ftp: each(&|z| format!("commit,zone={z},nat(src=198.51.100.9),alg=ftp")),
            nat: each(&|z| format!("commit,zone={z},nat")),
        }
    }
}

/// Everything the threads share.
struct World {
    p: Pipeline<u32>,
    clock: AtomicU64,
    stop: AtomicBool,
    ops: Ops,
    act: Actions,
}

impl World {
    fn now(&self, r: &mut Rng) -> Time {
        Time::from_millis(self.clock.fetch_add(r.below(12), Relaxed))
    }

    /// Sends one frame; returns the frames that left (none while a
    /// fragment is held) and checks every TCP one.
    fn send(
        &self,
        frame: Vec<u8>,
        a: &CtAction,
        now: Time,
        out: &mut Outputs<u32>,
    ) -> Vec<Vec<u8>> {
        self.ops.add(K::Packets);
        out.out.clear();
        self.p.process(frame, 0, LinkType::Ethernet, a, now, out);
        out.dropped.clear();
        out.out
            .drain(..)
            .map(|o| {
                if o.verdict.committed {
                    assert!(o.verdict.conn.is_some());
                }
                o.frame
            })
            .collect()
    }
}

/// A flow's ends: the client picks from a small set, so that threads
/// collide; the family, zone and translation follow from the client.
#[derive(Clone, Copy)]
struct Flow {
    c: IpAddr,
    s: IpAddr,
    cport: u16,
    zone: Zone,
    /// 0: none, 1: source NAT, 2: destination NAT (IPv4 only).
    nat: u8,
}

fn flow(r: &mut Rng, sport_base: u16) -> Flow {
    let ci = r.below(16) as u8;
    let si = r.below(4) as u8;
    let v6 = r.chance(300);
    let (c, s) = if v6 {
        (
            IpAddr::V6(Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, u16::from(ci) + 1)),
            IpAddr::V6(Ipv6Addr::new(0xfd01, 0, 0, 0, 0, 0, 0, u16::from(si) + 1)),
        )
    } else {
        (
            IpAddr::V4(Ipv4Addr::new(10, 0, 0, ci + 1)),
            IpAddr::V4(Ipv4Addr::new(172, 16, 0, si + 1)),
        )
    };
    let nat = match (ci % 3, v6) {
        (2, true) => 0,
        (n, _) => n,
    };
    Flow {
        c,
        s,
        cport: sport_base + r.below(32) as u16,
        zone: Zone::from(ci) % ZONES,
        nat,
    }
}

impl Flow {
    fn first(&self, w: &World) -> CtAction {
        let z = usize::from(self.zone);
        match (self.nat, self.c.is_ipv6()) {
            (0, _) => w.act.plain[z],
            (1, false) => w.act.snat4[z],
            (1, true) => w.act.snat6[z],
            _ => w.act.dnat4[z],
        }
    }

    fn later(&self, w: &World) -> CtAction {
        w.act.nat[usize::from(self.zone)]
    }

    /// A seed for this flow's sequence numbers.
    fn isn(&self) -> u32 {
        let a = match self.c {
            IpAddr::V4(a) => u32::from(a),
            IpAddr::V6(a) => a.segments()[7].into(),
        };
        a.wrapping_mul(2_654_435_761) ^ u32::from(self.cport) << 7
    }
}

/// The addresses and ports of a frame as it left (IPv4 or IPv6 without
/// extension headers, TCP or UDP or ICMP id).
fn ends(frame: &[u8]) -> Option<(IpAddr, IpAddr, u16, u16)> {
    let ip = frame.get(14..)?;
    let (s, d, l4): (IpAddr, IpAddr, usize) = match ip.first()? >> 4 {
        4 => {
            let hl = usize::from(ip[0] & 0x0f) * 4;
            let s: [u8; 4] = ip.get(12..16)?.try_into().ok()?;
            let d: [u8; 4] = ip.get(16..20)?.try_into().ok()?;
            (s.into(), d.into(), hl)
        }
        _ => {
            let s: [u8; 16] = ip.get(8..24)?.try_into().ok()?;
            let d: [u8; 16] = ip.get(24..40)?.try_into().ok()?;
            (s.into(), d.into(), 40)
        }
    };
    let p = ip.get(l4..l4 + 4)?;
    Some((
        s,
        d,
        u16::from_be_bytes([p[0], p[1]]),
        u16::from_be_bytes([p[2], p[3]]),
    ))
}

/// A TCP segment from `(address, port)` to `(address, port)`.
fn tcp(from: (IpAddr, u16), to: (IpAddr, u16), f: u16, seq: u32, ack: u32, d: &[u8]) -> Vec<u8> {
    Frame::new(
        from.0,
        to.0,
        L4::tcp_seg(from.1, to.1, f, seq, ack, 65535, d),
    )
    .build()
}

/// Checks a TCP frame that left.
fn check_tcp(frames: &[Vec<u8>]) {
    for f in frames {
        common::wire::tcp_seg(f, "soak");
    }
}

/// A TCP connection, as far as the dice say: handshake, data both ways,
/// then FINs, a RST, or nothing (left to time out).
fn tcp_flow(w: &World, r: &mut Rng, out: &mut Outputs<u32>) {
    w.ops.add(K::Tcp);
    let f = flow(r, 20_000);
    let (ci, si) = (f.isn(), f.isn() ^ 0x5555_0000);
    let s = if f.nat == 2 {
        IpAddr::V4(Ipv4Addr::new(203, 0, 113, 1))
    } else {
        f.s
    };
    let a = f.first(w);
    let l = f.later(w);
    let now = w.now(r);
    let left = w.send(tcp((f.c, f.cport), (s, 80), SYN, ci, 0, b""), &a, now, out);
    check_tcp(&left);
    let Some((ls, ld, lsp, ldp)) = left.first().and_then(|x| ends(x)) else {
        return;
    };
    // The server answers to where the SYN went, from where it went.
    let steps = r.below(6);
    let back = |fl, seq, ack, d: &[u8]| tcp((ld, ldp), (ls, lsp), fl, seq, ack, d);
    let fwd = |fl, seq, ack, d: &[u8]| tcp((f.c, f.cport), (s, 80), fl, seq, ack, d);
    let mut script = vec![
        (false, back(SYN | ACK, si, ci + 1, b"")),
        (true, fwd(ACK, ci + 1, si + 1, b"")),
        (true, fwd(PSH | ACK, ci + 1, si + 1, b"GET /")),
        (false, back(PSH | ACK, si + 1, ci + 6, b"200 OK")),
    ];
    script.truncate(steps as usize);
    match r.below(3) {
        0 if steps >= 4 => {
            script.push((true, fwd(FIN | ACK, ci + 6, si + 7, b"")));
            script.push((false, back(FIN | ACK, si + 7, ci + 7, b"")));
            script.push((true, fwd(ACK, ci + 7, si + 8, b"")));
        }
        1 => script.push((r.chance(500), fwd(RST, ci + 1, 0, b""))),
        _ => {}
    }
    for (to_server, frame) in script {
        let act = if to_server { &a } else { &l };
        let now = w.now(r);
        check_tcp(&w.send(frame, act, now, out));
    }
}

/// A segment of any flags and numbers on a flow that may or may not exist.
fn stray(w: &World, r: &mut Rng, out: &mut Outputs<u32>) {
    w.ops.add(K::Stray);
    let f = flow(r, 20_000);
    let flags = [ACK, SYN, FIN | ACK, RST, RST | ACK, PSH | ACK, SYN | ACK][r.below(7) as usize];
    let seq = f.isn().wrapping_add(r.below(3) as u32);
    let frame = if r.chance(500) {
        tcp((f.c, f.cport), (f.s, 80), flags, seq, r.next() as u32, b"x")
    } else {
        tcp((f.s, 80), (f.c, f.cport), flags, seq, r.next() as u32, b"")
    };
    let now = w.now(r);
    check_tcp(&w.send(frame, &f.first(w), now, out));
}

/// A UDP request, perhaps answered, perhaps answered with an ICMP error
/// quoting it as it left.
fn udp(w: &World, r: &mut Rng, out: &mut Outputs<u32>) {
    w.ops.add(K::Udp);
    let f = flow(r, 30_000);
    let a = f.first(w);
    let now = w.now(r);
    let q = Frame::new(f.c, f.s, L4::udp(f.cport, 53, b"query")).build();
    let left = w.send(q, &a, now, out);
    let Some((ls, ld, lsp, ldp)) = left.first().and_then(|x| ends(x)) else {
        return;
    };
    let l = f.later(w);
    match r.below(4) {
        0 => {}
        1 => {
            w.ops.add(K::IcmpErr);
            let ip = &left[0][14..];
            let (ty, code) = if f.c.is_ipv6() { (1, 4) } else { (3, 3) };
            let e = Frame::new(ld, ls, L4::icmp_error(ty, code, &quote(ip, 8))).build();
            let now = w.now(r);
            w.send(e, &l, now, out);
        }
        _ => {
            for _ in 0..r.below(3) + 1 {
                let a = Frame::new(ld, ls, L4::udp(ldp, lsp, b"answer")).build();
                let now = w.now(r);
                w.send(a, &l, now, out);
            }
        }
    }
}

/// An ICMP echo request and maybe its reply.
fn echo(w: &World, r: &mut Rng, out: &mut Outputs<u32>) {
    w.ops.add(K::Echo);
    let f = flow(r, 0);
    let (req, rep) = if f.c.is_ipv6() { (128, 129) } else { (8, 0) };
    let id = f.cport;
    let now = w.now(r);
    let q = Frame::new(f.c, f.s, L4::icmp_query(req, id, 1)).build();
    let left = w.send(q, &f.first(w), now, out);
    if r.chance(700)
        && let Some((ls, ld, _, _)) = left.first().and_then(|x| ends(x))
    {
        // The identifier as it left (translated under NAT).
        let at = 14 + hl(&left[0]) + 4;
        let id = u16::from_be_bytes([left[0][at], left[0][at + 1]]);
        let a = Frame::new(ld, ls, L4::icmp_query(rep, id, 1)).build();
        let now = w.now(r);
        w.send(a, &f.later(w), now, out);
    }
}

fn hl(frame: &[u8]) -> usize {
    if frame[14] >> 4 == 4 {
        usize::from(frame[14] & 0x0f) * 4
    } else {
        40
    }
}

/// A UDP datagram of a few kilobytes in fragments, in any order; now and
/// then one is never sent (the datagram waits for its timeout).
///
/// Identifications are the thread's own (`ident`, counted per thread), so
/// that two threads never mix fragments of the same flow: then a datagram
/// sent whole leaves whole, in the call of its last fragment.
fn fragments(w: &World, r: &mut Rng, out: &mut Outputs<u32>, ident: u32) {
    let f = flow(r, 40_000);
    let v6 = f.c.is_ipv6();
    w.ops.add(if v6 { K::Frag6 } else { K::Frag4 });
    let body: Vec<u8> = (0..2000 + r.below(2000)).map(|i| i as u8).collect();
    let whole = Frame::new(f.c, f.s, L4::udp(f.cport, 53, &body)).ip_packet();
    let data = &whole[if v6 { 40 } else { 20 }..];
    let mut frags = Vec::new();
    for (i, chunk) in data.chunks(1400).enumerate() {
        let off = i * 1400;
        let more = off + chunk.len() < data.len();
        let raw = L4::Raw {
            proto: 17,
            payload: chunk.to_vec(),
        };
        let mut fr = Frame::new(f.c, f.s, raw);
        if v6 {
            fr.ext = vec![Ext::Fragment {
                offset: off as u16,
                more,
                ident,
            }];
        } else {
            // 4 bits of thread, 12 of count: a thread wraps after 4096
            // datagrams, long after an unfinished one has expired.
            fr.ident = (ident >> 8 & 0xf000 | ident & 0x0fff) as u16;
            fr.more_frags = more;
            fr.frag_offset = off as u16;
        }
        frags.push(fr.build());
    }
    // Shuffle, and perhaps lose one.
    for i in (1..frags.len()).rev() {
        frags.swap(i, r.below(i as u64 + 1) as usize);
    }
    let unfinished = r.chance(250);
    if unfinished {
        w.ops.add(K::Unfinished);
        frags.pop();
    }
    let a = f.first(w);
    let n = frags.len();
    let mut left = 0;
    let mut first = None;
    for fr in frags {
        let now = w.now(r);
        first.get_or_insert(now.as_millis());
        left += w.send(fr, &a, now, out).len();
    }
    // Virtual time runs on while this thread waits for a core: if any
    // thread's clock passed the datagram's deadline, it may have expired
    // between its fragments.
    let timeout = w.p.reassembler().config().timeout_ms;
    if w.clock.load(Relaxed) >= first.unwrap_or(0) + timeout {
        w.ops.add(K::Overtaken);
        return;
    }
    if unfinished {
        assert_eq!(left, 0, "fragments of an unfinished datagram left");
    } else {
        assert_eq!(left, n, "a whole datagram left in part");
    }
}

/// An FTP control connection through source NAT announcing a port, and
/// the data connection it lets in.
fn ftp(w: &World, r: &mut Rng, out: &mut Outputs<u32>) {
    w.ops.add(K::Ftp);
    let ci = r.below(8) as u8;
    let c = IpAddr::V4(Ipv4Addr::new(10, 1, 0, ci + 1));
    let s = IpAddr::V4(Ipv4Addr::new(172, 16, 1, 1));
    let zone = Zone::from(ci) % ZONES;
    let cport = 5000 + r.below(8) as u16;
    let a = w.act.ftp[usize::from(zone)];
    let l = w.act.nat[usize::from(zone)];
    let now = w.now(r);
    let left = w.send(tcp((c, cport), (s, 21), SYN, 1000, 0, b""), &a, now, out);
    let Some((ls, ld, lsp, ldp)) = left.first().and_then(|x| ends(x)) else {
        return;
    };
    let dport = 6000 + r.below(64) as u16;
    let text = format!("PORT 10,1,0,{},{},{}\r\n", ci + 1, dport >> 8, dport & 0xff);
    let script = [
        (false, tcp((ld, ldp), (ls, lsp), SYN | ACK, 9000, 1001, b"")),
        (true, tcp((c, cport), (s, 21), ACK, 1001, 9001, b"")),
        (
            true,
            tcp((c, cport), (s, 21), PSH | ACK, 1001, 9001, text.as_bytes()),
        ),
    ];
    for (to_server, frame) in script {
        let now = w.now(r);
        check_tcp(&w.send(frame, if to_server { &a } else { &l }, now, out));
    }
    // The server's data connection, to the translated address.
    let now = w.now(r);
    let data = tcp((s, 20), (ls, dport), SYN, 1, 0, b"");
    check_tcp(&w.send(data, &w.act.nat[usize::from(zone)], now, out));
}

/// Administrative changes and sweeps, rarely.
fn admin(w: &World, r: &mut Rng, stats: &mut Stats) {
    let t = w.p.tracker();
    let z = r.below(u64::from(ZONES)) as Zone;
    match r.below(6) {
        0 if r.chance(100) => {
            w.ops.add(K::Flush);
            t.flush_zone(z);
        }
        1 if r.chance(50) => {
            w.ops.add(K::FlushNow);
            t.flush_zone_now(z, stats);
        }
        2 => {
            w.ops.add(K::Limit);
            let limit = 50 + r.below(400) as u32;
            match z {
                1 | 2 => t.set_zone_limit(z, limit),
                3 if r.chance(500) => t.set_zone_limit(3, 0),
                3 => t.set_zone_limit(3, limit),
                _ => {}
            }
        }
        3 if r.chance(200) => {
            w.ops.add(K::MaxConns);
            t.set_max_conns(MAX_CONNS[r.below(3) as usize]);
        }
        4 => {
            w.ops.add(K::Sweep);
            let now = w.now(r);
            t.sweep(now, 1 + r.below(2000) as usize, stats);
        }
        5 if r.chance(100) => mid_run_check(w),
        _ => {}
    }
}

/// What holds whatever the other threads are doing.
fn mid_run_check(w: &World) {
    w.ops.add(K::Check);
    let t = w.p.tracker();
    let now = Time::from_millis(w.clock.load(Relaxed));
    for z in 0..ZONES {
        t.for_each(Some(z), now, |_, c| {
            assert_eq!(c.entry.zone, z, "zone {z}'s dump lists {:?}", c.entry);
            assert!(c.expires > now);
        });
    }
    assert!(t.expectation_count() <= t.max_expectations());
    assert!(w.p.reassembler().held() <= w.p.reassembler().config().max_frags);
    // Never more than the largest limit, give or take the commits racing
    // past the approximate count, and flushed ones not yet freed.
    assert!(t.table_len() <= MAX_CONNS[2] + 4096, "{}", t.table_len());
}

fn worker(w: &World, thread: u32, seed: u64, deadline: Instant) -> Stats {
    let mut r = Rng(seed | 1);
    let mut datagrams = 0u32;
    let mut out = Outputs::default();
    let mut n = 0u64;
    while !w.stop.load(Relaxed) {
        match r.below(100) {
            0..30 => tcp_flow(w, &mut r, &mut out),
            30..40 => stray(w, &mut r, &mut out),
            40..65 => udp(w, &mut r, &mut out),
            65..75 => echo(w, &mut r, &mut out),
            75..85 => {
                datagrams += 1;
                let ident = thread << 20 | datagrams & 0xf_ffff;
                fragments(w, &mut r, &mut out, ident);
            }
            85..88 => ftp(w, &mut r, &mut out),
            _ => admin(w, &mut r, &mut out.stats),
        }
        n += 1;
        if n.is_multiple_of(256) && Instant::now() >= deadline {
            w.stop.store(true, Relaxed);
        }
    }
    out.stats
}

fn env(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
}

#[test]
fn soak() {
    let secs = env("CTRACK_SOAK_SECS").unwrap_or(if cfg!(debug_assertions) { 20 } else { 30 });
    let threads = env("CTRACK_SOAK_THREADS").unwrap_or(4).max(1);
    let seed = env("CTRACK_SOAK_SEED").unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64)
    });
    println!("soak: {secs} s, {threads} threads, seed {seed}");
    let tracker = Tracker::new(Config {
        max_conns: MAX_CONNS[1],
        shards: 16,
        ..Config::default()
    });
    for z in LIMITED {
        tracker.set_zone_limit(z, 300);
    }
    let w = World {
        p: Pipeline::new(tracker, FragConfig::default()),
        clock: AtomicU64::new(1_000_000),
        stop: AtomicBool::new(false),
        ops: Ops::default(),
        act: Actions::new(),
    };
    let deadline = Instant::now() + Duration::from_secs(secs);
    let started = Instant::now();
    let mut stats = Stats::default();
    std::thread::scope(|s| {
        let hs: Vec<_> = (0..threads)
            .map(|i| {
                let w = &w;
                let seed = seed.wrapping_add(i.wrapping_mul(0x9e37_79b9_7f4a_7c15));
                s.spawn(move || worker(w, i as u32, seed, deadline))
            })
            .collect();
        for h in hs {
            stats.merge(&h.join().expect("a worker panicked"));
        }
    });
    let ran = started.elapsed();
    report(&w, &stats, ran);
    end_checks(&w, &mut stats);
}

fn report(w: &World, stats: &Stats, ran: Duration) {
    println!("soak: ran {:.1} s", ran.as_secs_f64());
    for (i, k) in KINDS.iter().enumerate() {
        println!("  {k:<26} {}", w.ops.by_kind[i].load(Relaxed));
    }
    println!(
        "  tracker: packets {} committed {} established {} related {} invalid {} \
         evicted {} expired {} flushed {} refused (full {}, zone {}, nat {}) translated {} \
         expectations (created {}, matched {}, refused {}) rewritten {}",
        stats.packets,
        stats.committed,
        stats.established,
        stats.related,
        stats.invalid,
        stats.evicted,
        stats.expired,
        stats.flushed,
        stats.refused_table_full,
        stats.refused_zone_limit,
        stats.refused_nat_exhausted,
        stats.translated,
        stats.expectations_created,
        stats.expectations_matched,
        stats.expectations_refused,
        stats.alg_rewritten,
    );
    println!("  fragments: {:?}", w.p.reassembler().stats());
    let t = w.p.tracker();
    println!(
        "  table at the end: {} connections, {:?}",
        t.table_len(),
        t.memory()
    );
}

/// Connections a dump lists, whatever their expiry.
fn dumped(t: &Tracker, zone: Option<Zone>) -> usize {
    let mut n = 0;
    t.for_each(zone, Time::ZERO, |_, _| n += 1);
    n
}

fn end_checks(w: &World, stats: &mut Stats) {
    let t = w.p.tracker();
    let now = Time::from_millis(w.clock.load(Relaxed) + 1);
    // Free the flushed zones' connections (and the expired).
    while t.sweep(now, usize::MAX, stats).next == Some(now) {}
    let all = dumped(t, None);
    assert_eq!(t.table_len(), all, "the count and the dump disagree");
    let mut sum = 0;
    for z in 0..ZONES {
        let n = dumped(t, Some(z));
        assert_eq!(
            t.zone_len(z),
            n,
            "zone {z}: its count and its dump disagree"
        );
        sum += n;
        if LIMITED.contains(&z) {
            assert_eq!(t.zone_limit(z).1 as usize, n, "zone {z}'s limit count");
        }
    }
    assert_eq!(sum, all, "connections outside the zones used");
    assert_eq!(t.expectation_count(), t.expectations(Time::ZERO).len());

    // Past every timeout: everything goes (in a thread of its own, whose
    // end hands the slots it freed to the epoch's collector).
    let far = Time::from_millis(now.as_millis() + 3 * 86_400_000);
    std::thread::scope(|s| {
        s.spawn(|| {
            let mut st = Stats::default();
            for _ in 0..100 {
                if t.sweep(far, usize::MAX, &mut st).next.is_none() {
                    break;
                }
            }
            w.p.expire(far, &mut Vec::new());
        });
    });
    assert_eq!(t.table_len(), 0, "connections left after every timeout");
    for z in 0..ZONES {
        assert_eq!((t.zone_len(z), t.zone_limit(z).1), (0, 0), "zone {z}");
    }
    assert_eq!(t.expectation_count(), 0);
    assert_eq!(w.p.reassembler().held(), 0);
    no_slot_leaked(t, far);
}

/// Once the epoch has run the frees, new connections take the freed slots
/// before fresh ones: opening enough of them must bring the slots in use
/// down to exactly the connections held. A slot lost on the way (removed
/// but never freed) would keep them apart forever.
fn no_slot_leaked(t: &Tracker, now: Time) {
    // Pinning drives the collector.
    for _ in 0..1_000_000 {
        drop(ctrack_table::pin());
    }
    let floor = t.memory();
    println!("  floor after everything expired: {floor:?}");
    t.set_max_conns(1 << 18);
    let mut stats = Stats::default();
    let commit = CtAction::commit(0);
    let mut opened = 0u32;
    let equal = loop {
        for _ in 0..512 {
            let i = opened;
            opened += 1;
            let (hi, lo) = ((i >> 8) as u8, i as u8);
            let f = if i % 4 == 3 {
                let c = Ipv6Addr::new(0xfd99, 0, 0, 0, 0, 0, i as u16, (i >> 16) as u16);
                Frame::v6(c, "fd98::1".parse().unwrap(), L4::udp(7, 7, b"r"))
            } else {
                Frame::v4(
                    [10, 200, hi, lo],
                    [10, 201, (i >> 16) as u8, 1],
                    L4::udp(7, 7, b"r"),
                )
            };
            let v = t.process(&f.build(), LinkType::Ethernet, &commit, now, &mut stats);
            assert!(v.committed);
        }
        let m = t.memory();
        if m.slots_in_use == t.table_len() {
            break true;
        }
        if opened >= 240_000 {
            println!("  after {opened}: {m:?}, {} connections", t.table_len());
            break false;
        }
    };
    assert!(equal, "slots leaked");
    println!("  slots in use matched the connections after {opened} new ones");
    t.flush_all(&mut stats);
    assert_eq!(t.table_len(), 0);
}
