//! The worker end to end over ports in memory: it switches exactly what
//! the firewall frame by frame (`Firewall::process`) would let through,
//! burst path or not, and its time accounting is filled and adds up (in
//! `stats`, over the control socket, and in the metrics).

use std::collections::VecDeque;
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::net::UnixDatagram;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ctrack_core::{Config, FragConfig, Time, TimeoutPolicy, Tracker};
use ctrack_datapath::acllog::{AclLog, AclLogStats};
use ctrack_datapath::ctl::client::request;
use ctrack_datapath::ctl::{self, EventHub};
use ctrack_datapath::io::{IoKind, Pool, Port, PortStats};
use ctrack_datapath::live::worker::Worker;
use ctrack_datapath::live::{Part, PortInfo, Shared, SwitchDrop};
use ctrack_policy::firewall::{Action, Firewall, FwOutputs};
use ctrack_policy::model::Policy;
use ctrack_wire::build::{Frame, L4};
use ctrack_wire::offload::{self, Gso, VnetHdr};
use ctrack_wire::tcp::flags::{ACK, PSH, RST, SYN};

const CLIENT: ([u8; 6], [u8; 4]) = ([2, 0, 0, 0, 0, 1], [10, 0, 0, 1]);
const SERVER: ([u8; 6], [u8; 4]) = ([2, 0, 0, 0, 0, 2], [10, 0, 0, 2]);

/// Tracked, no NAT: the burst path's fast case. Port 23 is rejected.
const POLICY: &str = r#"
[default]
action = "drop"

[[port]]
name = "client"
addresses = ["02:00:00:00:00:01 10.0.0.1"]

[[port]]
name = "server"
addresses = ["02:00:00:00:00:02 10.0.0.2"]

[[acl]]
name = "arp-out"
direction = "from-lport"
priority = 32000
match = "arp"
action = "allow-stateless"

[[acl]]
name = "arp-in"
direction = "to-lport"
priority = 32000
match = "arp"
action = "allow-stateless"

[[acl]]
name = "telnet"
direction = "from-lport"
priority = 2000
match = "tcp.dst == 23"
action = "reject"

[[acl]]
name = "client-out"
direction = "from-lport"
priority = 1000
match = "inport == \"client\" && ip4"
action = "allow-related"

[[acl]]
name = "server-in"
direction = "to-lport"
priority = 1000
match = "outport == \"server\" && ip4.src == 10.0.0.1"
action = "allow-related"
"#;

type Queue = Arc<Mutex<VecDeque<Vec<u8>>>>;

/// A port in memory: frames pushed to `inbox` are received, frames sent
/// land in `sent`.
#[derive(Debug)]
struct MemPort {
    inbox: Queue,
    sent: Arc<Mutex<Vec<Vec<u8>>>>,
    /// Only for `fd`: never readable, so an idle worker sleeps in poll.
    sock: UnixDatagram,
    stats: PortStats,
    /// Frames of segmentation offload received after `inbox`'s, each with
    /// its header (handed over whole, their checksums finished).
    gso_inbox: GsoQueue,
    /// What the last `recv` handed over of them.
    gso_rx: Vec<(usize, VnetHdr)>,
    /// Whether the port sends them whole, and what it sent so.
    sends_gso: bool,
    sent_gso: GsoQueue,
    /// When set, each `send` takes one frame less than it is given (a
    /// full transmit ring).
    short: Arc<AtomicBool>,
}

type GsoQueue = Arc<Mutex<VecDeque<(Vec<u8>, VnetHdr)>>>;

impl Port for MemPort {
    fn name(&self) -> &str {
        "mem"
    }

    fn recv(&mut self, pool: &mut Pool, out: &mut Vec<Vec<u8>>, max: usize) -> io::Result<usize> {
        let mut q = self.inbox.lock().unwrap();
        let n = max.min(q.len());
        for f in q.drain(..n) {
            let mut b = pool.get();
            b.extend_from_slice(&f);
            self.stats.rx_packets += 1;
            out.push(b);
        }
        let mut g = self.gso_inbox.lock().unwrap();
        let m = (max - n).min(g.len());
        for (f, h) in g.drain(..m) {
            self.gso_rx.push((out.len(), h));
            self.stats.rx_packets += 1;
            self.stats.rx_gso_frames += 1;
            out.push(f);
        }
        Ok(n + m)
    }

    fn take_gso(&mut self, into: &mut Vec<(usize, VnetHdr)>) {
        into.append(&mut self.gso_rx);
    }

    fn sends_gso(&self) -> bool {
        self.sends_gso
    }

    fn send_gso(&mut self, frames: &[(&[u8], VnetHdr)]) -> io::Result<usize> {
        assert!(self.sends_gso, "send_gso on a port that does not");
        let mut s = self.sent_gso.lock().unwrap();
        s.extend(frames.iter().map(|(f, h)| (f.to_vec(), *h)));
        self.stats.tx_packets += frames.len() as u64;
        self.stats.tx_gso_frames += frames.len() as u64;
        Ok(frames.len())
    }

    fn send(&mut self, frames: &[&[u8]]) -> io::Result<usize> {
        let n = match self.short.load(Ordering::Relaxed) {
            true => frames.len().saturating_sub(1),
            false => frames.len(),
        };
        let mut s = self.sent.lock().unwrap();
        s.extend(frames[..n].iter().map(|f| f.to_vec()));
        self.stats.tx_packets += n as u64;
        Ok(n)
    }

    fn fd(&self) -> RawFd {
        self.sock.as_raw_fd()
    }

    fn stats(&mut self) -> PortStats {
        self.stats
    }
}

struct Rig {
    shared: Arc<Shared>,
    inbox: [Queue; 2],
    sent: [Arc<Mutex<Vec<Vec<u8>>>>; 2],
    gso_inbox: [GsoQueue; 2],
    sent_gso: [GsoQueue; 2],
    short: [Arc<AtomicBool>; 2],
    ports: Option<Vec<Box<dyn Port>>>,
    _peers: Vec<UnixDatagram>,
}

fn firewall(config: Config) -> Firewall<u16> {
    let policy = Policy::from_str(POLICY, "test.toml").unwrap();
    Firewall::new(Tracker::new(config), FragConfig::default(), policy).unwrap()
}

fn config() -> Config {
    Config {
        max_conns: 10_000,
        ..Config::default()
    }
}

fn rig() -> Rig {
    rig_with(config())
}

fn rig_with(config: Config) -> Rig {
    rig_gso(config, false)
}

/// A rig whose ports send frames of segmentation offload whole if
/// `sends_gso`.
fn rig_gso(config: Config, sends_gso: bool) -> Rig {
    rig_full(config, sends_gso, AclLog::default())
}

/// [`rig_gso`] with the ACL log `log`.
fn rig_full(config: Config, sends_gso: bool, log: AclLog) -> Rig {
    let info = |name: &str, mac| PortInfo {
        name: name.into(),
        ifname: format!("mem-{name}"),
        mac,
        mtu: 1500,
    };
    let shared = Arc::new(
        Shared::new(
            firewall(config),
            vec![info("client", CLIENT.0), info("server", SERVER.0)],
            IoKind::AfPacket,
            "unused.toml".into(),
            1,
            Arc::new(EventHub::new(64)),
        )
        .with_acl_log(log),
    );
    let inbox: [Queue; 2] = Default::default();
    let sent: [Arc<Mutex<Vec<Vec<u8>>>>; 2] = Default::default();
    let gso_inbox: [GsoQueue; 2] = Default::default();
    let sent_gso: [GsoQueue; 2] = Default::default();
    let short: [Arc<AtomicBool>; 2] = Default::default();
    let mut ports: Vec<Box<dyn Port>> = Vec::new();
    let mut peers = Vec::new();
    for i in 0..2 {
        let (a, b) = UnixDatagram::pair().unwrap();
        peers.push(b);
        ports.push(Box::new(MemPort {
            inbox: inbox[i].clone(),
            sent: sent[i].clone(),
            sock: a,
            stats: PortStats::default(),
            gso_inbox: gso_inbox[i].clone(),
            gso_rx: Vec::new(),
            sends_gso,
            sent_gso: sent_gso[i].clone(),
            short: short[i].clone(),
        }));
    }
    Rig {
        shared,
        inbox,
        sent,
        gso_inbox,
        sent_gso,
        short,
        ports: Some(ports),
        _peers: peers,
    }
}

fn ip4(from: ([u8; 6], [u8; 4]), to: ([u8; 6], [u8; 4]), l4: L4) -> Frame {
    let mut f = Frame::v4(from.1, to.1, l4);
    f.eth_src = from.0;
    f.eth_dst = to.0;
    f
}

fn seg(sport: u16, dport: u16, flags: u16, seq: u32, ack: u32) -> L4 {
    L4::tcp_seg(sport, dport, flags, seq, ack, 65535, b"")
}

/// A UDP datagram from the client in two IPv4 fragments.
fn fragments(ident: u16) -> [Vec<u8>; 2] {
    let mut f = ip4(CLIENT, SERVER, L4::udp(7000, 53, &[0x5a; 56]));
    f.ident = ident;
    let whole = f.build();
    let (head, body) = whole.split_at(34);
    let part = |data: &[u8], flags_off: u16| {
        let mut h = head.to_vec();
        h[16..18].copy_from_slice(&((20 + data.len()) as u16).to_be_bytes());
        h[20..22].copy_from_slice(&flags_off.to_be_bytes());
        h[24..26].copy_from_slice(&[0, 0]);
        let c = ctrack_wire::checksum::checksum(&h[14..34]);
        h[24..26].copy_from_slice(&c.to_be_bytes());
        h.extend_from_slice(data);
        h
    };
    [part(&body[..32], 0x2000), part(&body[32..], 32 / 8)]
}

fn arp_request() -> Vec<u8> {
    let mut f = vec![0xff; 6];
    f.extend_from_slice(&CLIENT.0);
    f.extend_from_slice(&[0x08, 0x06, 0, 1, 0x08, 0, 6, 4, 0, 1]);
    f.extend_from_slice(&CLIENT.0);
    f.extend_from_slice(&CLIENT.1);
    f.extend_from_slice(&[0; 6]);
    f.extend_from_slice(&SERVER.1);
    f
}

/// Batches of (input port, frames), each judged in one go by the worker.
fn traffic() -> Vec<(usize, Vec<Vec<u8>>)> {
    let c = |l4| ip4(CLIENT, SERVER, l4).build();
    let s = |l4| ip4(SERVER, CLIENT, l4).build();
    let ports = 1000..1040u16;
    let mut b = Vec::new();
    // 40 SYNs (more than a burst), one to a rejected port, a UDP query,
    // ARP, a fragmented datagram in the middle, a runt, a spoof.
    let mut first: Vec<Vec<u8>> = ports.clone().map(|p| c(seg(p, 80, SYN, 1, 0))).collect();
    first.insert(5, c(seg(2000, 23, SYN, 1, 0)));
    first.insert(9, c(L4::udp(5000, 53, b"q")));
    first.insert(12, arp_request());
    let [f1, f2] = fragments(77);
    first.insert(20, f1);
    first.insert(21, f2);
    first.insert(25, vec![0u8; 13]);
    let mut spoof = ip4(CLIENT, SERVER, L4::udp(1, 2, b"x"));
    spoof.eth_src = SERVER.0;
    first.insert(30, spoof.build());
    b.push((0, first));
    // The answers, an unsolicited SYN from the server (dropped), and an
    // ACK out of nowhere.
    let mut answers: Vec<Vec<u8>> = ports
        .clone()
        .map(|p| s(seg(80, p, SYN | ACK, 9, 2)))
        .collect();
    answers.push(s(seg(81, 3000, SYN, 1, 0)));
    answers.push(s(seg(80, 4000, ACK, 5, 5)));
    answers.push(s(L4::udp(53, 5000, b"a")));
    b.push((1, answers));
    // The handshakes' last steps and data; an RST closes one.
    let mut last: Vec<Vec<u8>> = ports.clone().map(|p| c(seg(p, 80, ACK, 2, 10))).collect();
    last.push(c(seg(1000, 80, RST | ACK, 2, 10)));
    b.push((0, last));
    b
}

/// What the frame-by-frame firewall forwards, per output port, and its
/// verdict counts.
fn expected(batches: &[(usize, Vec<Vec<u8>>)]) -> ([Vec<Vec<u8>>; 2], [u64; 3]) {
    let fw = firewall(config());
    let mut outs = FwOutputs::default();
    let mut sent: [Vec<Vec<u8>>; 2] = Default::default();
    for (inport, frames) in batches {
        for f in frames {
            if f.get(6..12) == Some(&SERVER.0[..]) && *inport == 0 {
                continue; // the switch drops spoofs before the firewall
            }
            fw.process(f.clone(), *inport as u16, Time::from_secs(1), &mut outs);
            for o in outs.out.drain(..) {
                let i = usize::from(o.tag);
                if let Some(r) = o.reply {
                    sent[i].push(r);
                }
                if o.decision.action == Action::Allow {
                    sent[1 - i].push(o.frame);
                }
            }
        }
    }
    (sent, outs.stats.verdicts)
}

#[test]
fn switches_what_the_firewall_frame_by_frame_allows() {
    let mut r = rig();
    let mut w = Worker::new(r.shared.clone(), 0, r.ports.take().unwrap());
    let batches = traffic();
    let mut received = 0;
    for (inport, frames) in &batches {
        r.inbox[*inport]
            .lock()
            .unwrap()
            .extend(frames.iter().cloned());
        while !r.inbox[*inport].lock().unwrap().is_empty() {
            received += w.round();
        }
    }
    w.publish();
    let (want, verdicts) = expected(&batches);
    for (i, want) in want.iter().enumerate() {
        let got = r.sent[i].lock().unwrap();
        assert_eq!(got.len(), want.len(), "port {i}");
        for (k, (g, e)) in got.iter().zip(want).enumerate() {
            assert_eq!(g, e, "port {i}, frame {k}");
        }
    }
    let s = r.shared.stats();
    assert_eq!(s.fw.verdicts, verdicts);
    assert_eq!(s.switch.drops[0], 1, "the spoof");
    assert!(s.fw.verdicts[Action::Reject as usize] >= 1);
    assert!(s.switch.replies >= 1);
    assert!(s.switch.flooded >= 1, "ARP");
    // The cost: every frame counted, the parts within the wall time.
    let total: usize = batches.iter().map(|(_, f)| f.len()).sum();
    assert_eq!(received, total);
    let c = s.cost;
    assert_eq!(c.packets, total as u64);
    assert!(c.rounds >= 4 && c.rounds <= c.packets, "{c:?}");
    for p in [Part::Recv, Part::Switch, Part::Firewall, Part::Send] {
        assert!(c.get(p) > 0, "{} is zero: {c:?}", p.name());
    }
    assert!(c.ns.iter().sum::<u64>() <= c.total_ns, "{c:?}");
}

/// A TCP segment of 4,000 bytes that the client's stack left to
/// segmentation offload (segments of 1,448), in an open connection: the
/// firewall judges it once; it leaves whole, behind a header that leaves
/// the cutting to the kernel, through a port that sends so, and cut into
/// the three segments a wire would carry through one that does not.
#[test]
fn a_frame_of_segmentation_offload_leaves_whole_or_cut() {
    for sends_gso in [true, false] {
        let mut r = rig_gso(config(), sends_gso);
        let mut w = Worker::new(r.shared.clone(), 0, r.ports.take().unwrap());
        let mut send = |port: usize, f: Vec<u8>| {
            r.inbox[port].lock().unwrap().push_back(f);
            w.round();
        };
        send(0, ip4(CLIENT, SERVER, seg(1000, 80, SYN, 1, 0)).build());
        send(
            1,
            ip4(SERVER, CLIENT, seg(80, 1000, SYN | ACK, 9, 2)).build(),
        );
        send(0, ip4(CLIENT, SERVER, seg(1000, 80, ACK, 2, 10)).build());
        let data: Vec<u8> = (0..4000).map(|i| (i % 251) as u8).collect();
        let big = ip4(
            CLIENT,
            SERVER,
            L4::tcp_seg(1000, 80, ACK | PSH, 2, 10, 502, &data),
        );
        let big = big.build();
        let rx = VnetHdr {
            flags: 1,
            gso_type: 1,
            hdr_len: 54,
            gso_size: 1448,
            csum_start: 34,
            csum_offset: 16,
        };
        r.gso_inbox[0].lock().unwrap().push_back((big.clone(), rx));
        w.round();
        w.publish();
        let whole = r.sent_gso[1].lock().unwrap().clone();
        let cut: Vec<Vec<u8>> = r.sent[1].lock().unwrap()[2..].to_vec();
        let mut pieces = Vec::new();
        offload::segment(&big, Gso::Tcp(1448), &mut Vec::new(), |p| {
            pieces.push(p.to_vec())
        })
        .unwrap();
        let ports = r.shared.stats().ports;
        if sends_gso {
            assert_eq!(whole.len(), 1, "{whole:?}");
            let (f, h) = &whole[0];
            // As the client's stack handed it over: the checksum field
            // holds the pseudo-header's sum, for the kernel to finish.
            let mut want = big.clone();
            let ho = offload::hand_over(&mut want, rx).unwrap();
            assert_eq!((f, h), (&want, &ho.hdr));
            assert_eq!(ho.hdr, rx);
            assert!(cut.is_empty(), "{cut:?}");
            assert_eq!(ports[0].rx_gso_segments, 0);
            assert_eq!(ports[1].tx_gso_frames, 1);
        } else {
            assert!(whole.is_empty());
            assert_eq!(cut, pieces);
            assert_eq!(cut.len(), 3);
            assert_eq!(ports[0].rx_gso_segments, 3);
            assert_eq!(ports[1].tx_gso_frames, 0);
        }
        assert_eq!(ports[0].rx_gso_frames, 1);
        let s = r.shared.stats();
        assert_eq!(s.fw.tracker.invalid, 0, "{:?}", s.fw.tracker);
        // The big one judged once, established.
        let t = &s.fw.tracker;
        assert_eq!((t.packets, t.established), (4, 3), "{t:?}");
    }
}

/// A table whose first UDP packet's connection expires after a second.
fn udp_in_a_second() -> Config {
    Config {
        max_conns: 10_000,
        timeouts: TimeoutPolicy {
            udp_first: 1,
            ..TimeoutPolicy::default()
        },
        ..Config::default()
    }
}

/// A worker expires connections itself after a round with traffic (no
/// housekeeping thread runs here): up to twice the frames it received.
#[test]
fn a_busy_worker_expires_connections_itself() {
    let mut r = rig_with(udp_in_a_second());
    let mut w = Worker::new(r.shared.clone(), 0, r.ports.take().unwrap());
    let udp = |first: u16| -> Vec<Vec<u8>> {
        (first..first + 100)
            .map(|p| ip4(CLIENT, SERVER, L4::udp(p, 9, &[0; 18])).build())
            .collect()
    };
    let mut run = |frames: Vec<Vec<u8>>| {
        r.inbox[0].lock().unwrap().extend(frames);
        while !r.inbox[0].lock().unwrap().is_empty() {
            w.round();
        }
    };
    run(udp(10_000));
    let tracker = r.shared.fw.tracker();
    assert_eq!(tracker.table_len(), 100);
    // Past their 1 s (expiry falls at the end of a second of the wheel).
    std::thread::sleep(Duration::from_millis(2_500));
    run(udp(20_000));
    assert_eq!(tracker.table_len(), 100, "the first hundred expired");
    w.publish();
    assert_eq!(r.shared.stats().fw.tracker.expired, 100);
}

/// Waits until `f` holds or `secs` pass.
fn until(secs: u64, mut f: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + Duration::from_secs(secs);
    while Instant::now() < end {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    f()
}

#[test]
fn cost_reaches_stats_and_metrics() {
    let mut r = rig();
    let dir = std::env::temp_dir().join(format!("ctrack-worker-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let sock = dir.join("ctrack.sock");
    let server = ctl::serve(r.shared.clone(), &sock, None).unwrap();
    let w = Worker::new(r.shared.clone(), 0, r.ports.take().unwrap());
    let thread = std::thread::spawn(move || w.run());
    std::thread::sleep(Duration::from_millis(60)); // idle a while
    let frames: Vec<Vec<u8>> = (0..100u16)
        .map(|p| ip4(CLIENT, SERVER, L4::udp(10_000 + p, 9, &[0; 18])).build())
        .collect();
    r.inbox[0].lock().unwrap().extend(frames);
    let sent = r.sent[1].clone();
    assert!(until(5, || sent.lock().unwrap().len() == 100));
    let shared = r.shared.clone();
    assert!(until(5, || shared.stats().cost.packets == 100));
    let j: serde_json::Value =
        serde_json::from_str(&request(&sock, &["stats", "--format", "json"]).unwrap()).unwrap();
    let c = &j["cost"];
    assert_eq!(c["packets"], 100, "{c}");
    let per = &c["ns_per_packet"];
    for k in ["recv", "switch", "firewall", "send", "busy"] {
        assert!(per[k].as_f64().unwrap() > 0.0, "{k}: {c}");
    }
    let ns = &c["ns"];
    let parts: u64 = ["recv", "switch", "firewall", "send", "idle", "other"]
        .iter()
        .map(|k| ns[k].as_u64().unwrap())
        .sum();
    // `other` closes the sum: the parts and it are the wall time.
    assert_eq!(parts, ns["total"].as_u64().unwrap(), "{c}");
    assert!(ns["idle"].as_u64().unwrap() >= 40_000_000, "{c}");
    assert!(c["share"]["idle"].as_f64().unwrap() > 0.0, "{c}");
    let text = request(&sock, &["stats"]).unwrap();
    assert!(text.contains("cost: 100 packets in "), "{text}");
    assert!(text.contains(" firewall "), "{text}");
    // Rounded figures, no float noise (26.900000000000002).
    assert!(!text.contains("0000000"), "{text}");
    let m = ctrack_datapath::metrics::render(&r.shared);
    assert!(
        m.contains("ctrack_worker_nanoseconds_total{part=\"firewall\"}"),
        "{m}"
    );
    assert!(m.contains("ctrack_worker_packets_total 100"), "{m}");
    r.shared.stop.store(true, Ordering::Relaxed);
    thread.join().unwrap();
    server.join().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}

/// An ACL with `log = true` logs its decisions, up to the rate; the rest
/// are counted as suppressed, and ACLs without it log nothing.
#[test]
fn a_logged_acl_logs_its_decisions_within_the_rate() {
    let (st, lines) = log_ten_telnets("log = true", "");
    // One token a second, the bucket full at the start: one line, unless
    // this machine took a second over the burst.
    assert!((1..=2).contains(&st.lines), "{st:?}");
    assert_eq!(st.lines + st.suppressed, 10, "{st:?}");
    assert_eq!(lines.len() as u64, st.lines);
}

/// An ACL with a meter is limited by its meter (here a burst of five),
/// not by the workers' rate (one a second).
#[test]
fn a_logged_acl_with_a_meter_logs_within_its_meter() {
    let (st, lines) = log_ten_telnets(
        "log = true\nmeter = \"m\"",
        "\n[meters.m]\nrate = 1\nburst = 5\n",
    );
    assert!((5..=6).contains(&st.lines), "{st:?}");
    assert_eq!(st.lines + st.suppressed, 10, "{st:?}");
    assert_eq!(lines.len() as u64, st.lines);
}

/// Ten telnet SYNs and one HTTP SYN through a worker whose policy's
/// rejecting ACL (`telnet`) has the lines `acl`, with `tail` after the
/// policy, the workers' log rate one line a second: the log's counters
/// and lines, each checked to name the ACL and the packet.
fn log_ten_telnets(acl: &str, tail: &str) -> (AclLogStats, Vec<String>) {
    let mut r = rig_full(config(), false, AclLog::new(1, 64));
    let logged = POLICY.replace(
        "action = \"reject\"",
        &format!("action = \"reject\"\n{acl}"),
    ) + tail;
    assert_ne!(logged, POLICY);
    r.shared
        .fw
        .set_policy(Policy::from_str(&logged, "test.toml").unwrap())
        .unwrap();
    let mut w = Worker::new(r.shared.clone(), 0, r.ports.take().unwrap());
    let c = |l4| ip4(CLIENT, SERVER, l4).build();
    let mut frames: Vec<Vec<u8>> = (0..10).map(|p| c(seg(2000 + p, 23, SYN, 1, 0))).collect();
    frames.push(c(seg(3000, 80, SYN, 1, 0)));
    r.inbox[0].lock().unwrap().extend(frames);
    while !r.inbox[0].lock().unwrap().is_empty() {
        w.round();
    }
    w.publish();
    let st = r.shared.stats().acl_log;
    assert_eq!(st.dropped, 0);
    let rx = r.shared.acl_log.take_receiver().unwrap();
    let lines: Vec<String> = rx.try_iter().collect();
    for l in &lines {
        assert!(
            l.starts_with(
                "acl_log(ctrack)|INFO|name=\"telnet\", verdict=reject, severity=info, \
                 direction=from-lport: inport=\"client\": 10.0.0.1:200"
            ),
            "{l}"
        );
        assert!(l.contains("> 10.0.0.2:23 tcp [S]"), "{l}");
    }
    (st, lines)
}

/// The firewall's limit on `reject` answers (`ctrack run --reject-rate`,
/// `--reject-burst`) holds for the worker: a burst of three and no rate,
/// ten rejected SYNs, three RSTs back to the client and seven refused.
#[test]
fn rejects_are_answered_within_the_limit() {
    let mut r = rig_full(config(), false, AclLog::default());
    r.shared.fw.set_reject_limit(0, 3);
    let mut w = Worker::new(r.shared.clone(), 0, r.ports.take().unwrap());
    let frames: Vec<Vec<u8>> = (0..10)
        .map(|p| ip4(CLIENT, SERVER, seg(2000 + p, 23, SYN, 1, 0)).build())
        .collect();
    r.inbox[0].lock().unwrap().extend(frames);
    while !r.inbox[0].lock().unwrap().is_empty() {
        w.round();
    }
    w.publish();
    let s = r.shared.stats();
    assert_eq!(s.fw.verdicts[Action::Reject as usize], 10);
    assert_eq!((s.fw.rejects_sent, s.fw.rejects_suppressed), (3, 7));
    assert_eq!(s.switch.replies, 3);
    let back = r.sent[0].lock().unwrap();
    assert_eq!(back.len(), 3, "three RSTs to the client");
    for f in back.iter() {
        let l = ctrack_wire::parse_frame(f, ctrack_wire::LinkType::Ethernet);
        let ip = l.ip.expect("an IP answer");
        assert_eq!(ip.proto, ctrack_wire::ip_proto::TCP);
        let flags = u16::from_be_bytes([f[ip.l4 + 12], f[ip.l4 + 13]]) & 0x3f;
        assert_eq!(flags, 0x14, "RST|ACK");
    }
    assert!(
        r.sent[1].lock().unwrap().is_empty(),
        "nothing to the server"
    );
}

/// `log-related` through the worker: the ACL's decision on the SYN, then
/// its connection's replies (the SYN-ACK, and a burst of answers that
/// leave by the session fast path) are logged; the client's later
/// packets are not.
#[test]
fn log_related_logs_a_connections_replies() {
    let mut r = rig_full(config(), false, AclLog::default());
    let server_in =
        "match = \"outport == \\\"server\\\" && ip4.src == 10.0.0.1\"\naction = \"allow-related\"";
    assert!(POLICY.contains(server_in));
    let text = POLICY.replace(
        server_in,
        &format!("{server_in}\nlog = true\nlog-related = true"),
    );
    r.shared
        .fw
        .set_policy(Policy::from_str(&text, "test.toml").unwrap())
        .unwrap();
    let mut w = Worker::new(r.shared.clone(), 0, r.ports.take().unwrap());
    let steps: Vec<(usize, Vec<Vec<u8>>)> = vec![
        (
            0,
            vec![ip4(CLIENT, SERVER, seg(4000, 80, SYN, 1, 0)).build()],
        ),
        (
            1,
            vec![ip4(SERVER, CLIENT, seg(80, 4000, SYN | ACK, 100, 2)).build()],
        ),
        (
            0,
            vec![ip4(CLIENT, SERVER, seg(4000, 80, ACK, 2, 101)).build()],
        ),
        (
            1,
            (0..5)
                .map(|i| ip4(SERVER, CLIENT, seg(80, 4000, ACK, 101 + i, 2)).build())
                .collect(),
        ),
        (
            0,
            vec![ip4(CLIENT, SERVER, seg(4000, 80, ACK, 2, 106)).build()],
        ),
    ];
    for (port, frames) in steps {
        r.inbox[port].lock().unwrap().extend(frames);
        while !r.inbox[port].lock().unwrap().is_empty() {
            w.round();
        }
    }
    w.publish();
    let rx = r.shared.acl_log.take_receiver().unwrap();
    let lines: Vec<String> = rx.try_iter().collect();
    assert_eq!(lines.len(), 7, "{lines:#?}");
    let head = "acl_log(ctrack)|INFO|name=\"server-in\", verdict=allow, severity=info, direction=";
    assert!(
        lines[0].starts_with(&format!(
            "{head}to-lport: inport=\"client\": 10.0.0.1:4000 > 10.0.0.2:80 tcp [S]"
        )),
        "{}",
        lines[0]
    );
    for l in &lines[1..] {
        assert!(
            l.starts_with(&format!(
                "{head}session: inport=\"server\": 10.0.0.2:80 > 10.0.0.1:4000 tcp"
            )),
            "{l}"
        );
    }
    assert_eq!(r.shared.stats().acl_log.lines, 7);
}

/// Runs one round with `frames` arriving on port `inport`.
fn one_round(r: &Rig, w: &mut Worker, inport: usize, frames: Vec<Vec<u8>>) {
    r.inbox[inport].lock().unwrap().extend(frames);
    while !r.inbox[inport].lock().unwrap().is_empty() {
        w.round();
    }
}

/// An ARP reply from the client to `dst`.
fn arp_reply_to(dst: [u8; 6]) -> Vec<u8> {
    let mut f = arp_request();
    f[..6].copy_from_slice(&dst);
    f[21] = 2;
    f
}

/// A frame for an address on the port it came in on goes nowhere (not
/// back out of that port), counted as a hairpin.
#[test]
fn a_frame_for_its_own_port_is_not_sent_back() {
    let mut r = rig();
    let mut w = Worker::new(r.shared.clone(), 0, r.ports.take().unwrap());
    one_round(&r, &mut w, 0, vec![arp_reply_to(CLIENT.0)]);
    w.publish();
    assert!(r.sent[0].lock().unwrap().is_empty());
    assert!(r.sent[1].lock().unwrap().is_empty());
    let s = r.shared.stats().switch;
    assert_eq!(s.drops[SwitchDrop::Hairpin as usize], 1, "{s:?}");
}

/// Unknown unicast is not flooded to a port with port security (OVN's
/// egress port security), a broadcast is.
#[test]
fn unknown_unicast_skips_a_port_with_port_security() {
    let mut r = rig();
    let server = "name = \"server\"\naddresses = [\"02:00:00:00:00:02 10.0.0.2\"]";
    assert!(POLICY.contains(server));
    let text = POLICY.replace(
        server,
        &format!("{server}\nport_security = [\"02:00:00:00:00:02 10.0.0.2\"]"),
    );
    r.shared
        .fw
        .set_policy(Policy::from_str(&text, "test.toml").unwrap())
        .unwrap();
    let mut w = Worker::new(r.shared.clone(), 0, r.ports.take().unwrap());
    one_round(&r, &mut w, 0, vec![arp_reply_to([2, 0, 0, 0, 0, 0x99])]);
    w.publish();
    assert_eq!(r.shared.stats().switch.flooded, 1);
    assert!(r.sent[1].lock().unwrap().is_empty(), "skipped");
    one_round(&r, &mut w, 0, vec![arp_request()]);
    assert_eq!(r.sent[1].lock().unwrap().len(), 1, "a broadcast reaches it");
}

/// The answer to a rejected frame is sent when that frame ends its burst
/// too.
#[test]
fn the_last_frame_of_a_burst_is_answered() {
    let mut r = rig();
    let mut w = Worker::new(r.shared.clone(), 0, r.ports.take().unwrap());
    let frames = vec![
        ip4(CLIENT, SERVER, seg(3000, 80, SYN, 1, 0)).build(),
        ip4(CLIENT, SERVER, seg(3001, 23, SYN, 1, 0)).build(),
    ];
    one_round(&r, &mut w, 0, frames);
    w.publish();
    assert_eq!(r.shared.stats().switch.replies, 1);
    assert_eq!(r.sent[0].lock().unwrap().len(), 1, "the RST");
    assert_eq!(r.sent[1].lock().unwrap().len(), 1, "the allowed SYN");
}

/// `fdb-show` lists where each address goes (the policy ports' own, then
/// those learned, with their age) and `fdb-flush` forgets the learned
/// ones: frames to them flood again.
#[test]
fn fdb_show_lists_the_addresses_and_fdb_flush_forgets_the_learned() {
    let mut r = rig();
    let dir = std::env::temp_dir().join(format!("ctrack-fdb-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let sock = dir.join("ctrack.sock");
    let server = ctl::serve(r.shared.clone(), &sock, None).unwrap();
    let mut w = Worker::new(r.shared.clone(), 0, r.ports.take().unwrap());
    // A host behind the client's port (no port security there) sends.
    let host = [2, 0, 0, 0, 0, 0x77];
    let mut from_host = arp_request();
    from_host[6..12].copy_from_slice(&host);
    one_round(&r, &mut w, 0, vec![from_host]);
    let j: serde_json::Value =
        serde_json::from_str(&request(&sock, &["fdb-show", "--format", "json"]).unwrap()).unwrap();
    let rows: Vec<(String, String, bool)> = j["addresses"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            (
                a["port"].as_str().unwrap().to_owned(),
                a["mac"].as_str().unwrap().to_owned(),
                a["learned"].as_bool().unwrap(),
            )
        })
        .collect();
    let row = |p: &str, m: &str, l| (p.to_owned(), m.to_owned(), l);
    assert_eq!(
        rows,
        [
            row("client", "02:00:00:00:00:01", false),
            row("server", "02:00:00:00:00:02", false),
            row("client", "02:00:00:00:00:77", true),
        ]
    );
    assert_eq!(j["addresses"][2]["age_seconds"], 0);
    assert!(j["addresses"][0]["age_seconds"].is_null());
    assert_eq!(
        (j["learned"].as_u64(), j["max_learned"].as_u64()),
        (Some(1), Some(65_536))
    );
    let text = request(&sock, &["fdb-show"]).unwrap();
    assert!(text.starts_with("port "), "{text}");
    assert!(
        text.contains("client           02:00:00:00:00:77      0\n"),
        "{text}"
    );
    assert!(text.contains("02:00:00:00:00:01 policy"), "{text}");
    assert!(text.ends_with("1 learned (at most 65536)"), "{text}");
    // A reply from the server to the host goes to the client's port ...
    let mut to_host = arp_request();
    to_host[..6].copy_from_slice(&host);
    to_host[6..12].copy_from_slice(&SERVER.0);
    to_host[21] = 2;
    one_round(&r, &mut w, 1, vec![to_host.clone()]);
    w.publish();
    assert_eq!(r.shared.stats().switch.forwarded, 1);
    // ... and, the host forgotten, floods.
    assert_eq!(
        request(&sock, &["fdb/flush"]).unwrap(),
        "1 learned addresses forgotten"
    );
    assert!(r.shared.macs.is_empty());
    one_round(&r, &mut w, 1, vec![to_host]);
    w.publish();
    assert_eq!(r.shared.stats().switch.flooded, 2, "the first ARP and this");
    assert!(matches!(
        request(&sock, &["fdb-show", "extra"]),
        Err(ctrack_datapath::ctl::client::ClientError::Failed(_))
    ));
    r.shared.stop.store(true, Ordering::Relaxed);
    server.join().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}

/// A flood reaches every port but the input, each a whole copy (three
/// ports: two copies, the last port taking the frame itself).
#[test]
fn a_flood_reaches_every_other_port_whole() {
    let info = |name: &str, mac| PortInfo {
        name: name.into(),
        ifname: format!("mem-{name}"),
        mac,
        mtu: 1500,
    };
    let shared = Arc::new(Shared::new(
        firewall(config()),
        vec![
            info("client", CLIENT.0),
            info("server", SERVER.0),
            info("third", [2, 0, 0, 0, 0, 3]),
        ],
        IoKind::AfPacket,
        "unused.toml".into(),
        1,
        Arc::new(EventHub::new(64)),
    ));
    let inbox: Queue = Default::default();
    let mut sent: Vec<Arc<Mutex<Vec<Vec<u8>>>>> = Vec::new();
    let mut ports: Vec<Box<dyn Port>> = Vec::new();
    let mut peers = Vec::new();
    for i in 0..3 {
        let (a, b) = UnixDatagram::pair().unwrap();
        peers.push(b);
        let out: Arc<Mutex<Vec<Vec<u8>>>> = Default::default();
        sent.push(out.clone());
        ports.push(Box::new(MemPort {
            inbox: if i == 0 {
                inbox.clone()
            } else {
                Default::default()
            },
            sent: out,
            sock: a,
            stats: PortStats::default(),
            gso_inbox: Default::default(),
            gso_rx: Vec::new(),
            sends_gso: false,
            sent_gso: Default::default(),
            short: Default::default(),
        }));
    }
    let mut w = Worker::new(shared.clone(), 0, ports);
    let frames = vec![arp_request(), arp_reply_to([2, 0, 0, 0, 0, 0x99])];
    inbox.lock().unwrap().extend(frames.iter().cloned());
    while !inbox.lock().unwrap().is_empty() {
        w.round();
    }
    w.publish();
    assert!(sent[0].lock().unwrap().is_empty(), "not back to the input");
    for s in &sent[1..] {
        assert_eq!(*s.lock().unwrap(), frames);
    }
    assert_eq!(shared.stats().switch.flooded, 2);
}

/// A TCP connection from the client to the server's port 80, opened
/// through `w` (from client port `sport`), and a frame of segmentation
/// offload of 4,000 bytes of it with its header as a stack hands it over,
/// segments of `gso_size` bytes.
fn opened_with_a_big_frame(
    r: &Rig,
    w: &mut Worker,
    sport: u16,
    gso_size: u16,
) -> (Vec<u8>, VnetHdr) {
    one_round(
        r,
        w,
        0,
        vec![ip4(CLIENT, SERVER, seg(sport, 80, SYN, 1, 0)).build()],
    );
    one_round(
        r,
        w,
        1,
        vec![ip4(SERVER, CLIENT, seg(80, sport, SYN | ACK, 9, 2)).build()],
    );
    one_round(
        r,
        w,
        0,
        vec![ip4(CLIENT, SERVER, seg(sport, 80, ACK, 2, 10)).build()],
    );
    let data: Vec<u8> = (0..4000).map(|i| (i % 251) as u8).collect();
    let big = ip4(
        CLIENT,
        SERVER,
        L4::tcp_seg(sport, 80, ACK | PSH, 2, 10, 502, &data),
    )
    .build();
    let hdr = VnetHdr {
        flags: 1,
        gso_type: 1,
        hdr_len: 54,
        gso_size,
        csum_start: 34,
        csum_offset: 16,
    };
    (big, hdr)
}

/// A frame of segmentation offload keeps its header when a frame before
/// it in the same burst is dropped as spoofed (the burst closes up) or
/// goes the frame-by-frame way (a fragment: the run after it starts
/// further on): it is cut into its segments, not taken for a frame over
/// the MTU.
#[test]
fn a_frame_of_segmentation_offload_keeps_its_header_behind_other_frames() {
    let mut r = rig_gso(config(), false);
    let mut w = Worker::new(r.shared.clone(), 0, r.ports.take().unwrap());
    let (big, hdr) = opened_with_a_big_frame(&r, &mut w, 1000, 1448);
    let mut spoof = ip4(CLIENT, SERVER, L4::udp(1, 2, b"x"));
    spoof.eth_src = SERVER.0;
    let [fragment, _] = fragments(5);
    for (i, first) in [spoof.build(), fragment].into_iter().enumerate() {
        r.sent[1].lock().unwrap().clear();
        r.inbox[0].lock().unwrap().push_back(first);
        r.gso_inbox[0].lock().unwrap().push_back((big.clone(), hdr));
        w.round();
        let sent = r.sent[1].lock().unwrap().clone();
        let cut = sent.iter().filter(|f| f.len() > 1000).count();
        assert_eq!(cut, 3, "case {i}: {} frames sent", sent.len());
    }
    w.publish();
    let s = r.shared.stats().switch;
    assert_eq!(s.drops[SwitchDrop::TooBig as usize], 0, "{s:?}");
    assert_eq!(s.drops[SwitchDrop::PortSecurity as usize], 1, "{s:?}");
}

/// A port that sends frames of segmentation offload whole takes them
/// through `send_gso` and the others, queued in the same round, through
/// `send`; a frame whose segments would be over the port's MTU is not
/// sent whole.
#[test]
fn frames_whole_and_plain_leave_each_their_way() {
    let mut r = rig_gso(config(), true);
    let mut w = Worker::new(r.shared.clone(), 0, r.ports.take().unwrap());
    let (big, hdr) = opened_with_a_big_frame(&r, &mut w, 1000, 1448);
    let plain_before = r.sent[1].lock().unwrap().len();
    let ack = ip4(CLIENT, SERVER, seg(1000, 80, ACK, 2, 10)).build();
    r.inbox[0].lock().unwrap().push_back(ack.clone());
    r.gso_inbox[0].lock().unwrap().push_back((big, hdr));
    w.round();
    assert_eq!(r.sent_gso[1].lock().unwrap().len(), 1);
    let sent = r.sent[1].lock().unwrap().clone();
    assert_eq!(sent.len(), plain_before + 1);
    assert_eq!(sent.last(), Some(&ack));
    // Segments of 1,461 bytes: IP packets of 1,501, over the MTU of 1,500.
    let (big, hdr) = opened_with_a_big_frame(&r, &mut w, 1001, 1461);
    r.gso_inbox[0].lock().unwrap().push_back((big, hdr));
    w.round();
    w.publish();
    assert_eq!(r.sent_gso[1].lock().unwrap().len(), 1, "not sent whole");
    let s = r.shared.stats().switch;
    assert_eq!(s.drops[SwitchDrop::TooBig as usize], 1, "{s:?}");
}

/// A frame fits the port's MTU plus its link header: 14 bytes, 18 with a
/// VLAN tag (802.1Q or 802.1ad); one byte more is dropped as too big. A
/// port that takes fewer frames than it is given counts the rest as
/// failed.
#[test]
fn frames_fit_the_mtu_with_their_link_header_and_failed_sends_count() {
    let mut r = rig();
    let mut w = Worker::new(r.shared.clone(), 0, r.ports.take().unwrap());
    let udp = |payload: usize| ip4(CLIENT, SERVER, L4::udp(4000, 9, &vec![7; payload])).build();
    let fits = udp(1472);
    assert_eq!(fits.len(), 1514);
    one_round(&r, &mut w, 0, vec![fits.clone(), udp(1473)]);
    assert_eq!(r.sent[1].lock().unwrap().clone(), vec![fits.clone()]);
    // The same frame with a tag of each kind: four bytes more fit.
    for tpid in [[0x81, 0x00], [0x88, 0xa8]] {
        let mut tagged = fits[..12].to_vec();
        tagged.extend_from_slice(&tpid);
        tagged.extend_from_slice(&[0x00, 0x05]);
        tagged.extend_from_slice(&fits[12..]);
        assert_eq!(tagged.len(), 1518);
        r.sent[1].lock().unwrap().clear();
        one_round(&r, &mut w, 0, vec![tagged]);
        w.publish();
        let sent = r.sent[1].lock().unwrap().len();
        let s = r.shared.stats();
        assert_eq!(sent, 1, "{tpid:?}: {:?} {:?}", s.switch, s.fw.verdicts);
    }
    w.publish();
    let s = r.shared.stats().switch;
    assert_eq!(s.drops[SwitchDrop::TooBig as usize], 1, "{s:?}");
    assert_eq!(s.drops[SwitchDrop::TxFailed as usize], 0, "{s:?}");
    r.short[1].store(true, Ordering::Relaxed);
    one_round(&r, &mut w, 0, vec![udp(10), udp(11), udp(12)]);
    w.publish();
    let s = r.shared.stats().switch;
    assert_eq!(s.drops[SwitchDrop::TxFailed as usize], 1, "{s:?}");
}

/// What arrived before the worker was told to stop still goes through:
/// it drains its ports. And nothing that takes the frame-by-frame way is
/// logged where no ACL logs (here a datagram in fragments too small to
/// be reassembled, which the firewall drops).
#[test]
fn a_stopping_worker_drains_its_ports_and_logs_nothing_unasked() {
    let mut r = rig();
    let w = Worker::new(r.shared.clone(), 0, r.ports.take().unwrap());
    let [f1, f2] = fragments(9);
    let udp = ip4(CLIENT, SERVER, L4::udp(5, 6, b"u")).build();
    r.inbox[0]
        .lock()
        .unwrap()
        .extend([arp_request(), f1, f2, udp.clone()]);
    r.shared.stop.store(true, Ordering::Relaxed);
    w.run();
    assert!(r.inbox[0].lock().unwrap().is_empty());
    assert_eq!(r.sent[1].lock().unwrap().clone(), vec![arp_request(), udp]);
    let s = r.shared.stats();
    assert_eq!(s.fw.verdicts[Action::Drop as usize], 1, "{:?}", s.fw);
    assert_eq!(s.acl_log.lines + s.acl_log.suppressed, 0, "{:?}", s.acl_log);
}

/// A worker that gets one frame a round still expires connections.
#[test]
fn a_worker_of_one_frame_a_round_expires_connections() {
    let mut r = rig_with(udp_in_a_second());
    let mut w = Worker::new(r.shared.clone(), 0, r.ports.take().unwrap());
    let udp = |p: u16| ip4(CLIENT, SERVER, L4::udp(p, 9, &[0; 18])).build();
    one_round(&r, &mut w, 0, vec![udp(100)]);
    let tracker = r.shared.fw.tracker();
    assert_eq!(tracker.table_len(), 1);
    std::thread::sleep(Duration::from_millis(2_500));
    one_round(&r, &mut w, 0, vec![udp(200)]);
    assert_eq!(tracker.table_len(), 1, "the first expired");
    w.publish();
    assert_eq!(r.shared.stats().fw.tracker.expired, 1);
}
