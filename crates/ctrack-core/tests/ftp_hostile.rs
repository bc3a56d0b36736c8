//! FTP control channels with hostile payloads (issue 12, "Under attack"):
//! lines of tens of kilobytes without a line end, thousands of
//! announcements on one control connection and across many, commands cut
//! at every byte, segments out of the window, retransmitted or
//! overlapping, rewrites that would take a datagram past 64 KiB.
//!
//! Every packet goes through a real handshake's connection with the FTP
//! gateway under NAT, and every frame that leaves is read back by hand
//! ([`common::wire`]): IP lengths and every checksum verified, its
//! sequence and acknowledgment numbers compared with a model of the
//! offset the rewrites so far put between the two sides' numberings.
//!
//! The bounds these tests hold the gateway to, from the code:
//! - a line is kept across segments only up to `alg::ftp::MAX_LINE`
//!   bytes (longer lines are skipped to their end);
//! - a control connection has at most `alg::expect::PER_MASTER` (1)
//!   expectation waiting, the tracker at most `max_expectations()`
//!   (default `alg::expect::DEFAULT_MAX`);
//! - a rewrite never takes the IP datagram past 65535 bytes (then the
//!   segment leaves as it came). It may take a frame past the link's MTU:
//!   every announcement of a segment is rewritten, as the peer must not see
//!   an untranslated address.

mod common;
use common::Net;
use common::wire::{Seg, tcp_seg};

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use ctrack_core::alg::expect::{DEFAULT_MAX, PER_MASTER};
use ctrack_core::alg::ftp::MAX_LINE;
use ctrack_core::{Config, InvalidReason, Stats, Time, Verdict};
use ctrack_wire::build::{Frame, L4};
use ctrack_wire::tcp::flags::*;

const C: [u8; 4] = [10, 0, 0, 1];
const S: [u8; 4] = [192, 0, 2, 2];
const N: [u8; 4] = [198, 51, 100, 1];
/// The client's control connection leaves through a source NAT to N.
const SNAT: &str = "commit,nat(src=198.51.100.1),alg=ftp";

fn ip(a: [u8; 4]) -> IpAddr {
    Ipv4Addr::from(a).into()
}

fn small() -> Net {
    Net::with(Config {
        max_conns: 4096,
        shards: 4,
        ..Config::default()
    })
}

/// One control connection and the model of its two numberings: what each
/// side sent (in its own numbering) and how far the gateway's rewrites
/// moved each direction's bytes.
struct Ctl {
    n: Net,
    /// Client's packets: from, to (as the client sends them).
    c: (IpAddr, IpAddr),
    /// Server's packets: from, to (as the server sends them).
    s: (IpAddr, IpAddr),
    cport: u16,
    /// Action of each direction.
    fwd: &'static str,
    back: &'static str,
    /// Next sequence number of each side, in its own numbering.
    cseq: u32,
    sseq: u32,
    /// How far the rewrites moved each side's bytes as its peer sees them.
    cgrow: u32,
    sgrow: u32,
}

impl Ctl {
    /// The client's control connection to port 21 through a source NAT,
    /// after its handshake (each packet checked as it leaves).
    fn snat(n: Net) -> Ctl {
        Ctl::open(n, (ip(C), ip(S)), (ip(S), ip(N)), SNAT, "nat")
    }

    /// From `a` to `b` without NAT.
    fn plain(a: [u8; 4], b: [u8; 4]) -> Ctl {
        let (a, b) = (ip(a), ip(b));
        Ctl::open(small(), (a, b), (b, a), "commit,alg=ftp", "commit")
    }

    /// From 192.0.2.7 to the server 10.0.0.9, reached at N.
    fn dnat() -> Ctl {
        let (o, srv) = (ip([192, 0, 2, 7]), ip([10, 0, 0, 9]));
        let fwd = "commit,nat(dst=10.0.0.9),alg=ftp";
        Ctl::open(small(), (o, ip(N)), (srv, o), fwd, "nat")
    }

    fn open(
        n: Net,
        c: (IpAddr, IpAddr),
        s: (IpAddr, IpAddr),
        fwd: &'static str,
        back: &'static str,
    ) -> Ctl {
        let mut k = Ctl {
            n,
            c,
            s,
            cport: 40000,
            fwd,
            back,
            cseq: 100,
            sseq: 500,
            cgrow: 0,
            sgrow: 0,
        };
        let (v, _) = k.raw_client(SYN, 100, 0, b"");
        assert!(v.committed, "{v:?}");
        let (v, _) = k.raw_server(SYN | ACK, 500, 101, b"");
        assert_eq!(v.state.to_string().split('|').next(), Some("est"));
        k.cseq = 101;
        k.sseq = 501;
        let (v, _) = k.raw_client(ACK, 101, 501, b"");
        assert!(v.invalid.is_none());
        k
    }

    fn client_frame(&self, flags: u16, seq: u32, ack: u32, data: &[u8]) -> Frame {
        let l4 = L4::tcp_seg(self.cport, 21, flags, seq, ack, 65535, data);
        Frame::new(self.c.0, self.c.1, l4)
    }

    fn server_frame(&self, flags: u16, seq: u32, ack: u32, data: &[u8]) -> Frame {
        let l4 = L4::tcp_seg(21, self.cport, flags, seq, ack, 65535, data);
        Frame::new(self.s.0, self.s.1, l4)
    }

    /// Sends a client segment as given; the frame that leaves, checked.
    fn raw_client(&self, flags: u16, seq: u32, ack: u32, data: &[u8]) -> (Verdict, Seg) {
        let (v, out) = self
            .n
            .send(&self.client_frame(flags, seq, ack, data), self.fwd);
        (v, tcp_seg(&out, "client segment"))
    }

    fn raw_server(&self, flags: u16, seq: u32, ack: u32, data: &[u8]) -> (Verdict, Seg) {
        let (v, out) = self
            .n
            .send(&self.server_frame(flags, seq, ack, data), self.back);
        (v, tcp_seg(&out, "server segment"))
    }

    /// The client sends `data` in order; it must leave as `want` (itself
    /// if `None`), with its sequence number moved by the offset so far and
    /// its acknowledgment put back into the server's numbering; the server
    /// acknowledges it.
    fn client(&mut self, data: &[u8], want: Option<&[u8]>) {
        assert!(self.offer(true, data, want), "client segment refused");
    }

    /// The server sends `data` in order (as [`Ctl::client`]).
    fn server(&mut self, data: &[u8], want: Option<&[u8]>) {
        assert!(self.offer(false, data, want), "server segment refused");
    }

    /// Sends `data` from one side, in order. False if the gateway refused
    /// it as an unfinished announcement (it left as it came; nothing
    /// moved), else checks it as [`Ctl::client`] says.
    fn offer(&mut self, from_client: bool, data: &[u8], want: Option<&[u8]>) -> bool {
        let (seq, grow, peer, peer_grow) = if from_client {
            (self.cseq, self.cgrow, self.sseq, self.sgrow)
        } else {
            (self.sseq, self.sgrow, self.cseq, self.cgrow)
        };
        let seen = peer.wrapping_add(peer_grow);
        let (v, out) = if from_client {
            self.raw_client(PSH | ACK, seq, seen, data)
        } else {
            self.raw_server(PSH | ACK, seq, seen, data)
        };
        assert_eq!(out.seq, seq.wrapping_add(grow), "seq");
        assert_eq!(out.ack, peer, "ack");
        if matches!(
            v.invalid,
            Some(InvalidReason::AlgPartialCommand | InvalidReason::AlgCannotTranslate)
        ) {
            // Refused (the firewall drops it); the frame is not touched.
            assert_eq!(out.payload, data, "a refused segment leaves as it came");
            return false;
        }
        assert_eq!(v.invalid, None, "segment refused: {v:?}");
        assert_eq!(out.payload, want.unwrap_or(data), "text");
        let grow = grow
            .wrapping_add(out.payload.len() as u32)
            .wrapping_sub(data.len() as u32);
        let seq = seq.wrapping_add(data.len() as u32);
        if from_client {
            (self.cseq, self.cgrow) = (seq, grow);
        } else {
            (self.sseq, self.sgrow) = (seq, grow);
        }
        // The peer acknowledges all of it, in the numbering it saw; the
        // sender sees its own.
        let (v, back) = if from_client {
            self.raw_server(ACK, peer, seq.wrapping_add(grow), b"")
        } else {
            self.raw_client(ACK, peer, seq.wrapping_add(grow), b"")
        };
        assert_eq!(v.invalid, None, "ack refused: {v:?}");
        assert_eq!(back.ack, seq, "ack as the sender sees it");
        assert_eq!(back.seq, peer.wrapping_add(peer_grow), "the peer's seq");
        true
    }

    fn expectations(&self) -> usize {
        self.n.t.expectation_count()
    }
}

/// One test at a time: the resident-memory check must not see the others'
/// memory.
fn serial() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// Resident memory of this process, in KiB (Linux).
fn rss_kib() -> Option<usize> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = s.lines().find(|l| l.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

#[test]
fn lines_of_megabytes_without_a_line_end_keep_nothing() {
    let _one = serial();
    let mut k = Ctl::snat(small());
    let table = k.n.t.memory();
    let rss = rss_kib();
    // 32 MiB of one line that starts like an announcement, in segments of
    // 60000 bytes, each acknowledged.
    let junk: Vec<u8> = b"1,2,3,".iter().copied().cycle().take(60_000).collect();
    let first = [b"PORT 10,0,0,1,".as_slice(), &junk].concat();
    k.client(&first, None);
    for _ in 0..560 {
        k.client(&junk, None);
        assert_eq!(k.expectations(), 0);
    }
    // The same from the server: a 227 line that never ends.
    let first = [b"227 Entering Passive Mode (".as_slice(), &junk].concat();
    k.server(&first, None);
    for _ in 0..20 {
        k.server(&junk, None);
    }
    // Nothing grew: not the table, not the process (the text is not kept).
    assert_eq!(k.n.t.memory(), table);
    if let (Some(before), Some(after)) = (rss, rss_kib()) {
        assert!(
            after < before + 16 * 1024,
            "resident memory grew from {before} KiB to {after} KiB"
        );
    }
    // The line ends; the next one is read again and rewritten.
    k.client(b"\r\n", None);
    k.client(
        b"PORT 10,0,0,1,156,65\r\n",
        Some(b"PORT 198,51,100,1,156,65\r\n"),
    );
    assert_eq!(k.expectations(), 1);
    assert_eq!(k.n.stats.get().alg_rewritten, 1);
}

#[test]
fn a_line_just_over_the_bound_is_skipped_and_one_at_it_is_read() {
    let _one = serial();
    // Without NAT, a line is carried across segments up to MAX_LINE bytes.
    for (extra, expected) in [(0usize, 1usize), (1, 0)] {
        let mut k = Ctl::plain(C, S);
        let head = b"PORT 10,0,0,1,156,65";
        // Spaces after the numbers are ignored by the reader.
        let pad = MAX_LINE - head.len() - 1 + extra;
        let mut line = head.to_vec();
        line.extend(std::iter::repeat_n(b' ', pad));
        line.push(b'\r');
        assert_eq!(line.len(), MAX_LINE + extra);
        let (a, b) = line.split_at(300);
        k.client(a, None);
        k.client(b, None);
        k.client(b"\n", None);
        assert_eq!(k.expectations(), expected, "line of {} bytes", line.len());
    }
}

/// An announcement of each kind, the client's and the server's, and the
/// text a translation to N writes.
fn port(p: u16) -> (Vec<u8>, Vec<u8>) {
    let (h, l) = (p >> 8, p & 0xff);
    (
        format!("PORT 10,0,0,1,{h},{l}\r\n").into_bytes(),
        format!("PORT 198,51,100,1,{h},{l}\r\n").into_bytes(),
    )
}

fn eprt(p: u16) -> (Vec<u8>, Vec<u8>) {
    (
        format!("EPRT |1|10.0.0.1|{p}|\r\n").into_bytes(),
        format!("EPRT |1|198.51.100.1|{p}|\r\n").into_bytes(),
    )
}

#[test]
fn thousands_of_announcements_keep_one_expectation_and_the_offset_right() {
    let _one = serial();
    let mut k = Ctl::snat(small());
    let table = k.n.t.memory();
    for i in 0..3000u16 {
        let p = 1024 + i;
        match i % 5 {
            0 => {
                let (a, b) = port(p);
                k.client(&a, Some(&b));
            }
            1 => {
                let (a, b) = eprt(p);
                k.client(&a, Some(&b));
            }
            2 => {
                // Twenty in one segment: each is rewritten, the last one
                // is expected.
                let (mut a, mut b) = (Vec::new(), Vec::new());
                for j in 0..20 {
                    let (x, y) = port(p.wrapping_add(j * 7));
                    a.extend(x);
                    b.extend(y);
                }
                k.client(&a, Some(&b));
            }
            3 => {
                // The server's own address is not translated: its text
                // stays, and its expectation replaces the client's.
                let t = format!(
                    "227 Entering Passive Mode (192,0,2,2,{},{})\r\n",
                    p >> 8,
                    p & 0xff
                );
                k.server(t.as_bytes(), None);
            }
            _ => {
                let t = format!("229 Entering Extended Passive Mode (|||{p}|)\r\n");
                k.server(t.as_bytes(), None);
            }
        }
        assert!(k.expectations() <= PER_MASTER, "at {i}");
    }
    assert_eq!(k.expectations(), 1);
    // 600 single PORT and 600 EPRT (4 bytes each), 600 segments of 20.
    assert_eq!(k.cgrow, (600 + 600 + 600 * 20) * 4);
    assert_eq!(k.sgrow, 0);
    let st = k.n.stats.get();
    assert_eq!(st.expectations_created, 600 * 20 + 600 * 4);
    assert_eq!(st.expectations_refused, 0);
    assert_eq!(k.n.t.memory(), table);
    // The last announcement (a 229 for port 1024 + 2999) is the one that
    // waits, and it lets its data connection in.
    let e = k.n.t.expectations(k.n.now);
    assert_eq!(e[0].key.dst.port, 1024 + 2999);
    let data = Frame::v4(C, S, L4::tcp(40001, 1024 + 2999, SYN));
    assert_eq!(k.n.state(&data, "commit,nat"), "new|rel|trk|snat");
    assert_eq!(k.expectations(), 0);
}

#[test]
fn the_server_side_through_a_destination_nat_moves_its_own_numbering() {
    let _one = serial();
    // The server 10.0.0.9 is reached at N; its 227 and the client's
    // EPRT (of its own, untranslated, address) interleave.
    let mut k = Ctl::dnat();
    for i in 0..500u16 {
        let p = 2000 + i;
        let t = format!("227 ok (10,0,0,9,{},{})\r\n", p >> 8, p & 0xff);
        let w = format!("227 ok (198,51,100,1,{},{})\r\n", p >> 8, p & 0xff);
        k.server(t.as_bytes(), Some(w.as_bytes()));
        let e = format!("EPRT |1|192.0.2.7|{p}|\r\n");
        k.client(e.as_bytes(), None);
        assert!(k.expectations() <= PER_MASTER);
    }
    assert_eq!((k.cgrow, k.sgrow), (0, 500 * 4));
}

#[test]
fn announcements_across_many_control_connections_stay_under_the_bound() {
    let _one = serial();
    let n = Net::with(Config {
        max_conns: 1 << 14,
        shards: 8,
        ..Config::default()
    });
    assert_eq!(n.t.max_expectations(), DEFAULT_MAX);
    let conns = DEFAULT_MAX + 500;
    let mut k = Ctl::snat(n);
    for i in 0..conns {
        k.cport = 1024 + i as u16;
        k.cseq = 100;
        k.sseq = 500;
        k.cgrow = 0;
        k.sgrow = 0;
        let (v, _) = k.raw_client(SYN, 100, 0, b"");
        assert!(v.committed);
        k.raw_server(SYN | ACK, 500, 101, b"");
        k.cseq = 101;
        k.sseq = 501;
        k.raw_client(ACK, 101, 501, b"");
        // Twice each, ports of its own: the second replaces the first.
        let own = 2000 + 2 * i as u16;
        let mut mine = false;
        for p in [own, own + 1] {
            let (a, b) = port(p);
            // Once the table is full the PORT of a connection without an
            // expectation to replace cannot be translated (no expectation
            // to translate it to): refused, as Linux drops it, rather than
            // sent on with the untranslated address.
            let full = k.expectations() >= DEFAULT_MAX && !mine;
            if full {
                assert!(!k.offer(true, &a, None), "connection {i}: refused");
            } else {
                k.client(&a, Some(&b));
            }
            mine = !full;
        }
        assert!(k.expectations() <= DEFAULT_MAX);
    }
    assert_eq!(k.expectations(), DEFAULT_MAX);
    let st = k.n.stats.get();
    assert_eq!(st.expectations_created, DEFAULT_MAX as u64 * 2);
    assert_eq!(st.expectations_refused, 500 * 2);
    // Five minutes on, a sweep ends them all.
    let later = Time::from_secs(100 + 301);
    k.n.t.sweep(later, usize::MAX, &mut Stats::default());
    assert_eq!(k.expectations(), 0);
}

/// For each split point of `line`, a fresh control connection gets the
/// line in two segments.
fn split_everywhere(line: &[u8], want: &[u8], server_side: bool) {
    // A line before, so that the gateway has read the stream already.
    let ctl = || {
        if server_side {
            let mut k = Ctl::dnat();
            k.server(b"220 hello\r\n", None);
            k
        } else {
            let mut k = Ctl::snat(small());
            k.client(b"NOOP\r\n", None);
            k
        }
    };
    let send = |k: &Ctl, seq: u32, data: &[u8]| {
        if server_side {
            k.raw_server(PSH | ACK, seq, k.cseq, data)
        } else {
            k.raw_client(PSH | ACK, seq, k.sseq, data)
        }
    };
    let first_seq = |k: &Ctl| if server_side { k.sseq } else { k.cseq };
    for cut in 1..line.len() {
        let (a, b) = line.split_at(cut);
        // Under NAT the first part is refused (it cannot be rewritten
        // alone); the whole line, sent again, is rewritten once.
        let k = ctl();
        let seq = first_seq(&k);
        let (v, out) = send(&k, seq, a);
        assert_eq!(
            v.invalid,
            Some(InvalidReason::AlgPartialCommand),
            "cut {cut}"
        );
        assert_eq!(
            out.payload, a,
            "cut {cut}: the refused part leaves as it came"
        );
        assert_eq!(k.expectations(), 0);
        let (v, out) = send(&k, seq, line);
        assert_eq!(v.invalid, None, "cut {cut}");
        assert_eq!(out.payload, want, "cut {cut}");
        assert_eq!(k.expectations(), 1, "cut {cut}");

        // If the refused part was let through anyway, the second part
        // starts past what the gateway read: it is skipped, nothing is
        // rewritten and the numbering does not move.
        let k = ctl();
        let seq = first_seq(&k);
        send(&k, seq, a);
        let (v, out) = send(&k, seq.wrapping_add(cut as u32), b);
        assert_eq!(v.invalid, None, "cut {cut}");
        assert_eq!(out.payload, b, "cut {cut}");
        assert_eq!(out.seq, seq.wrapping_add(cut as u32));
        assert_eq!(k.expectations(), 0, "cut {cut}");

        // Without NAT the parts are joined.
        let mut k = if server_side {
            Ctl::plain([192, 0, 2, 7], [10, 0, 0, 9])
        } else {
            Ctl::plain(C, S)
        };
        if server_side {
            k.server(a, None);
            k.server(b, None);
        } else {
            k.client(a, None);
            k.client(b, None);
        }
        assert_eq!(k.expectations(), 1, "cut {cut}");
    }
}

#[test]
fn commands_cut_at_every_byte() {
    let _one = serial();
    let (a, b) = port(40001);
    split_everywhere(&a, &b, false);
    let (a, b) = eprt(40001);
    split_everywhere(&a, &b, false);
    split_everywhere(
        b"227 Entering Passive Mode (10,0,0,9,195,80).\r\n",
        b"227 Entering Passive Mode (198,51,100,1,195,80).\r\n",
        true,
    );
    let epsv = b"229 Entering Extended Passive Mode (|||50001|)\r\n";
    split_everywhere(epsv, epsv, true);
}

#[test]
fn segments_out_of_the_window_retransmitted_or_overlapping() {
    let _one = serial();
    let mut k = Ctl::snat(small());
    let (p1, w1) = port(40001);
    let grow = (w1.len() - p1.len()) as u32;

    // Far out of the window: refused, not read, not rewritten.
    let far = k.cseq.wrapping_add(1 << 20);
    let (v, out) = k.raw_client(PSH | ACK, far, k.sseq, &p1);
    assert_eq!(v.invalid, Some(InvalidReason::TcpOutOfWindow));
    assert_eq!(out.payload, p1);
    assert_eq!(k.expectations(), 0);

    // Rewritten once, and the same way when it comes again.
    let at1 = k.cseq;
    k.client(&p1, Some(&w1));
    assert_eq!(k.cgrow, grow);
    let (v, out) = k.raw_client(PSH | ACK, at1, k.sseq, &p1);
    assert_eq!(v.invalid, None);
    assert_eq!((out.seq, &out.payload), (at1, &w1));
    // ... and that moved the numbering only once.
    k.client(b"NOOP\r\n", None);
    assert_eq!(k.cgrow, grow);

    // A second rewrite; then the first comes again. Only the last
    // rewritten segment is read again: an older one leaves as it came,
    // moved by the offset before the last rewrite (Linux's seqadj keeps
    // the same single position).
    let (p2, w2) = port(40002);
    k.client(&p2, Some(&w2));
    assert_eq!(k.cgrow, 2 * grow);
    let (v, out) = k.raw_client(PSH | ACK, at1, k.sseq, &p1);
    assert_eq!(v.invalid, None);
    assert_eq!(out.payload, p1);
    assert_eq!(out.seq, at1.wrapping_add(grow));

    // Overlapping: a segment that repeats the last five bytes sent and
    // carries a new announcement. It is taken for a repeat: not read, not
    // rewritten, the numbering unmoved; the gateway resumes at the next
    // line.
    let mut over = p2[p2.len() - 5..].to_vec();
    let (p3, _) = port(40003);
    over.extend_from_slice(&p3);
    let back = k.cseq.wrapping_sub(5);
    let (v, out) = k.raw_client(PSH | ACK, back, k.sseq, &over);
    assert_eq!(v.invalid, None);
    assert_eq!(out.payload, over);
    assert_eq!(out.seq, back.wrapping_add(2 * grow));
    assert_eq!(
        k.n.t.expectations(k.n.now)[0].key.dst.port,
        40002,
        "the overlapping announcement is not expected"
    );
    k.cseq = back.wrapping_add(over.len() as u32);
    // Sent after the overlap: the gateway sees a gap, skips to the next
    // line end and reads on.
    k.client(b"TYPE I\r\n", None);
    let (p4, w4) = port(40004);
    k.client(&p4, Some(&w4));
    assert_eq!(k.n.t.expectations(k.n.now)[0].key.dst.port, 40004);
    assert_eq!(k.cgrow, 3 * grow);

    // An empty segment, a bare FIN and a RST in the middle: nothing read.
    let (v, _) = k.raw_client(ACK, k.cseq, k.sseq, b"");
    assert_eq!(v.invalid, None);
}

#[test]
fn a_rewrite_that_would_pass_64_kib_is_not_made() {
    let _one = serial();
    // IPv4: 20 bytes of IP header, 20 of TCP. A PORT grows by 4.
    for (room, rewritten) in [(3usize, false), (4, true)] {
        let mut k = Ctl::snat(small());
        let (p, w) = port(40001);
        let total = 65_535 - room;
        let mut data = p.clone();
        data.resize(total - 40, b'x');
        let mut want = w.clone();
        want.resize(total - 40 + 4, b'x');
        if rewritten {
            k.client(&data, Some(&want));
            let (_, seg) = k.raw_client(ACK, k.cseq, k.sseq, b"");
            assert_eq!(seg.seq, k.cseq.wrapping_add(4));
        } else {
            // Refused whole (its text cannot be changed, and sent on it
            // would give the untranslated address away), nothing moved.
            assert!(!k.offer(true, &data, None));
            let (_, seg) = k.raw_client(ACK, k.cseq, k.sseq, b"");
            assert_eq!(seg.seq, k.cseq);
        }
        assert_eq!(k.expectations(), 1);
    }
    // IPv6: EPRT written in full grows by 36 (from `::1`) per line; a
    // segment of them stops short of 64 KiB.
    let c: Ipv6Addr = "fd00::1".parse().unwrap();
    let s: Ipv6Addr = "2001:db8::2".parse().unwrap();
    let x: Ipv6Addr = "2001:db8:ffff::1".parse().unwrap();
    let mut k = Ctl::open(
        small(),
        (c.into(), s.into()),
        (s.into(), x.into()),
        "commit,nat(src=2001:db8:ffff::1),alg=ftp",
        "nat",
    );
    let line = b"EPRT |2|fd00::1|40001|\r\n";
    let shown = b"EPRT |2|2001:0db8:ffff:0000:0000:0000:0000:0001|40001|\r\n";
    let g = shown.len() - line.len();
    // As many lines as fit in 64 KiB with their growth, then one more.
    let fit = (65_535 - 40 - 20) / shown.len();
    let data: Vec<u8> = line
        .iter()
        .copied()
        .cycle()
        .take(line.len() * fit)
        .collect();
    let want: Vec<u8> = shown
        .iter()
        .copied()
        .cycle()
        .take(shown.len() * fit)
        .collect();
    k.client(&data, Some(&want));
    assert_eq!(k.cgrow as usize, fit * g);
    let more: Vec<u8> = line
        .iter()
        .copied()
        .cycle()
        .take(line.len() * (fit + 1))
        .collect();
    assert!(40 + 20 + more.len() <= 65_535);
    assert!(!k.offer(true, &more, None), "refused: it would pass 64 KiB");
    assert_eq!(k.cgrow as usize, fit * g);
}

#[test]
fn many_announcements_in_one_segment_may_pass_the_mtu_but_not_64_kib() {
    let _one = serial();
    let mut k = Ctl::snat(small());
    // A 1460-byte segment of PORT lines: each grows by 4.
    let (p, w) = port(40001);
    let lines = 1460 / p.len();
    let data: Vec<u8> = p.iter().copied().cycle().take(p.len() * lines).collect();
    let want: Vec<u8> = w.iter().copied().cycle().take(w.len() * lines).collect();
    k.client(&data, Some(&want));
    let (_, seg) = k.raw_client(ACK, k.cseq, k.sseq, b"");
    assert_eq!(seg.seq, k.cseq.wrapping_add(4 * lines as u32));
    assert!(40 + want.len() > 1500);
    assert_eq!(k.expectations(), 1);
}

#[test]
fn garbage_of_every_shape_in_both_directions() {
    let _one = serial();
    // A seeded mix of announcement-like text, binary, huge numbers and
    // line ends, cut at random places; every frame leaving is checked by
    // the model (no announcement of the own address: no rewrite).
    let mut k = Ctl::snat(small());
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut rnd = move |m: u64| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x % m
    };
    let pieces: [&[u8]; 12] = [
        b"PORT ",
        b"EPRT |1|",
        b"EPRT |2|::1|",
        b"227 (",
        b"229 (|||",
        b"10,0,0,2,",
        b"999999999999",
        b"|",
        b"\r\n",
        b"\n",
        b",",
        &[0, 255, 128, 13],
    ];
    let mut refused = 0;
    for round in 0..2000 {
        let mut data = Vec::new();
        for _ in 0..rnd(40) + 1 {
            data.extend_from_slice(pieces[rnd(pieces.len() as u64) as usize]);
        }
        // An unfinished announcement is refused; the next segment
        // comes in its place.
        if !k.offer(round % 2 == 0, &data, None) {
            refused += 1;
        }
    }
    assert_eq!((k.cgrow, k.sgrow), (0, 0));
    assert_eq!(k.expectations(), 0);
    assert!(refused > 0);
}

#[test]
fn an_announcement_in_a_fragmented_segment_is_rewritten_and_refragmented() {
    use ctrack_core::{FragConfig, LinkType, Outputs, Pipeline};
    use ctrack_wire::checksum;
    let _one = serial();
    let p: Pipeline<usize> = Pipeline::new(
        ctrack_core::Tracker::new(Config {
            max_conns: 1024,
            shards: 4,
            ..Config::default()
        }),
        FragConfig::default(),
    );
    let act: ctrack_core::CtAction = SNAT.parse().unwrap();
    let nat: ctrack_core::CtAction = "nat".parse().unwrap();
    let now = Time::from_secs(100);
    let mut outs = Outputs::default();
    let seg = |src, dst, sp, dp, fl, seq, ack, data: &[u8]| {
        Frame::v4(src, dst, L4::tcp_seg(sp, dp, fl, seq, ack, 65535, data))
    };
    for (f, a) in [
        (seg(C, S, 40000, 21, SYN, 100, 0, b""), &act),
        (seg(S, N, 21, 40000, SYN | ACK, 500, 101, b""), &nat),
        (seg(C, S, 40000, 21, ACK, 101, 501, b""), &act),
    ] {
        p.process(f.build(), 0, LinkType::Ethernet, a, now, &mut outs);
    }
    // The PORT, then a long line: 2500 bytes of TCP data.
    let (cmd, shown) = port(40001);
    let mut data = cmd.clone();
    data.resize(2500, b'x');
    let whole = seg(C, S, 40000, 21, PSH | ACK, 101, 501, &data).ip_packet();
    let body = &whole[20..];
    let mut frags = Vec::new();
    for (i, chunk) in body.chunks(1400).enumerate() {
        let mut f = Frame::v4(
            C,
            S,
            L4::Raw {
                proto: 6,
                payload: chunk.to_vec(),
            },
        );
        f.ident = 77;
        f.frag_offset = (i * 1400) as u16;
        f.more_frags = (i + 1) * 1400 < body.len();
        frags.push(f.build());
    }
    outs.out.clear();
    // The last fragment first: held; then the first completes it.
    for (tag, f) in frags.into_iter().enumerate().rev() {
        p.process(f, tag, LinkType::Ethernet, &act, now, &mut outs);
    }
    assert_eq!(outs.out.len(), 2);
    assert_eq!(outs.out[0].verdict.state.to_string(), "est|trk|snat");
    // Each fragment's IPv4 header is sound; the first keeps its size, the
    // last takes the growth.
    let mut tcp = Vec::new();
    for (i, o) in outs.out.iter().enumerate() {
        let ip = &o.frame[14..];
        assert_eq!(checksum::checksum(&ip[..20]), 0, "fragment {i}");
        assert_eq!(usize::from(u16::from_be_bytes([ip[2], ip[3]])), ip.len());
        assert_eq!(ip[12..16], N);
        tcp.extend_from_slice(&ip[20..]);
    }
    assert_eq!(outs.out[0].frame.len(), 14 + 20 + 1400);
    let grow = shown.len() - cmd.len();
    assert_eq!(tcp.len(), body.len() + grow);
    // The segment they make is the rewritten one, with a valid checksum.
    let pseudo = checksum::pseudo_header_v4(N, S, 6, tcp.len() as u32);
    assert!(checksum::is_valid(checksum::sum(pseudo, &tcp)));
    assert_eq!(&tcp[20..20 + shown.len()], &shown[..]);
    assert_eq!(p.tracker().expectation_count(), 1);
}
