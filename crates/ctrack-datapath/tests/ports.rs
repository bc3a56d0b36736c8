//! Ports on real interfaces: a veth pair per test (root only; skipped
//! with a message otherwise), frames sent on one end and compared byte for
//! byte on the other, for both socket kinds.

use std::collections::HashMap;
use std::process::Command;
use std::time::{Duration, Instant};

use ctrack_datapath::io::{self, IoKind, Pool, Port, PortOptions, RxRing};
use ctrack_wire::offload::{Gso, VnetHdr};

/// The source MAC of every test frame (how we tell ours from others).
const SRC: [u8; 6] = [0x02, 0xc7, 0x10, 0x00, 0x00, 0x01];
const DST: [u8; 6] = [0x02, 0xc7, 0x10, 0x00, 0x00, 0x02];
const MTU: usize = 1500;

/// The tests run one at a time (the descriptor and mapping counts of
/// `ports_close_everything` are the process's).
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn root() -> bool {
    // SAFETY: geteuid(2) cannot fail and touches no memory.
    let euid = unsafe { libc::geteuid() };
    if euid != 0 {
        // In CI (`CI` set), which runs as root, every test must run.
        assert!(
            std::env::var_os("CI").is_none(),
            "the port tests need root in CI (veth pairs, raw sockets)"
        );
        eprintln!("skipped: needs root (veth pairs, raw sockets)");
    }
    euid == 0
}

fn sh(args: &[&str]) -> bool {
    match Command::new(args[0]).args(&args[1..]).output() {
        Ok(o) if o.status.success() => true,
        Ok(o) => {
            eprintln!("{args:?}: {}", String::from_utf8_lossy(&o.stderr).trim());
            false
        }
        Err(e) => {
            eprintln!("{args:?}: {e}");
            false
        }
    }
}

/// A veth pair, deleted on drop (panics included).
struct Veth {
    a: String,
    b: String,
}

impl Veth {
    fn new(tag: u32) -> Veth {
        Veth::with_queues(tag, 1)
    }

    /// A pair whose ends have `queues` receive and send queues each.
    fn with_queues(tag: u32, queues: u32) -> Veth {
        let id = std::process::id() % 10000;
        let (a, b) = (format!("ckio{id}{tag}a"), format!("ckio{id}{tag}b"));
        let _ = Command::new("ip").args(["link", "del", &a]).output();
        let q = queues.to_string();
        let qs = ["numrxqueues", &q, "numtxqueues", &q];
        let mut add = vec!["ip", "link", "add", &a];
        add.extend(qs);
        add.extend(["type", "veth", "peer", "name", &b]);
        add.extend(qs);
        assert!(sh(&add), "ip link add");
        let v = Veth { a, b };
        for i in [&v.a, &v.b] {
            if queues > 1 {
                assert!(sh(&["ethtool", "-L", i, "rx", &q, "tx", &q]), "ethtool -L");
            }
            // No IPv6 chatter (router solicitations, DAD) on the pair.
            let _ = std::fs::write(format!("/proc/sys/net/ipv6/conf/{i}/disable_ipv6"), "1");
            let off = [
                "tx", "off", "rx", "off", "tso", "off", "gso", "off", "gro", "off",
            ];
            let mut k = vec!["ethtool", "-K", i];
            k.extend(off);
            let _ = sh(&k);
            assert!(sh(&["ip", "link", "set", i, "up"]), "ip link set up");
        }
        v
    }
}

impl Drop for Veth {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["link", "del", &self.a]).output();
    }
}

fn opts(
    ifname: &str,
    kind: IoKind,
    worker: usize,
    workers: usize,
    group: Option<u16>,
) -> PortOptions {
    PortOptions {
        ifname: ifname.into(),
        kind,
        worker,
        workers,
        fanout_group: group,
        ring_frames: 1024,
        frame_size: 1518,
        rx_ring: RxRing::V3,
    }
}

fn open(o: &PortOptions) -> Box<dyn Port> {
    io::open(o).unwrap_or_else(|e| panic!("opening {} ({:?}): {e}", o.ifname, o.kind))
}

fn csum(b: &[u8]) -> u16 {
    let mut s: u32 = b
        .chunks(2)
        .map(|c| u32::from(c[0]) << 8 | u32::from(*c.get(1).unwrap_or(&0)))
        .sum();
    while s > 0xffff {
        s = (s & 0xffff) + (s >> 16);
    }
    !(s as u16)
}

/// An Ethernet/IPv4/UDP frame of `len` bytes (with the tag if `vlan`),
/// numbered `i` (in its ports and payload).
fn frame(i: usize, len: usize, vlan: Option<u16>) -> Vec<u8> {
    let mut f = Vec::with_capacity(len);
    f.extend_from_slice(&DST);
    f.extend_from_slice(&SRC);
    if let Some(tci) = vlan {
        f.extend_from_slice(&[0x81, 0x00]);
        f.extend_from_slice(&tci.to_be_bytes());
    }
    f.extend_from_slice(&[0x08, 0x00]);
    let ip_len = (len - f.len()) as u16;
    let mut ip = vec![
        0x45, 0, 0, 0, 0, 0, 0x40, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 1, 2,
    ];
    ip[2..4].copy_from_slice(&ip_len.to_be_bytes());
    ip[4..6].copy_from_slice(&(i as u16).to_be_bytes());
    let c = csum(&ip);
    ip[10..12].copy_from_slice(&c.to_be_bytes());
    f.extend_from_slice(&ip);
    f.extend_from_slice(&(1000 + i as u16).to_be_bytes());
    f.extend_from_slice(&(2000 + (i % 7) as u16).to_be_bytes());
    f.extend_from_slice(&(ip_len - 20).to_be_bytes());
    f.extend_from_slice(&[0, 0]);
    while f.len() < len {
        f.push((i + f.len()) as u8);
    }
    f
}

/// The burst: 200 UDP frames of sizes 60..=1514, a VLAN-tagged one, one
/// exactly at the MTU; and (separately) one over it.
fn burst() -> (Vec<Vec<u8>>, Vec<u8>) {
    let mut v: Vec<Vec<u8>> = (0..200)
        .map(|i| frame(i, 60 + (i * 97) % 1455, None))
        .collect();
    v.push(frame(200, MTU + 14 + 4, Some(0x2000 | 42)));
    v.push(frame(201, MTU + 14, None));
    (v, frame(202, MTU + 14 + 1, None))
}

/// Our frames received on `ports` (one list each) until `want` came or
/// `patience` passed, and a little longer to catch extras.
fn collect(ports: &mut [Box<dyn Port>], want: usize, patience: Duration) -> Vec<Vec<Vec<u8>>> {
    let mut pool = Pool::default();
    let mut got: Vec<Vec<Vec<u8>>> = vec![Vec::new(); ports.len()];
    let fds: Vec<_> = ports.iter().map(|p| p.fd()).collect();
    let deadline = Instant::now() + patience;
    let mut extra_until = None;
    loop {
        let now = Instant::now();
        let total: usize = got.iter().map(Vec::len).sum();
        if total >= want && extra_until.is_none() {
            extra_until = Some(now + Duration::from_millis(100));
        }
        if now > deadline || extra_until.is_some_and(|t| now > t) {
            return got;
        }
        io::wait(&fds, Duration::from_millis(20)).unwrap();
        for (p, g) in ports.iter_mut().zip(got.iter_mut()) {
            let mut out = Vec::new();
            p.recv(&mut pool, &mut out, 64).unwrap();
            g.extend(out.into_iter().filter(|f| f.len() >= 12 && f[6..12] == SRC));
        }
    }
}

/// Sends the burst from `a` to `b` and checks bytes and counters.
fn one_way(kind: IoKind, a: &str, b: &str) {
    one_way_ring(kind, RxRing::V3, a, b);
}

/// [`one_way`] with AF_PACKET receive rings of layout `ring`.
fn one_way_ring(kind: IoKind, ring: RxRing, a: &str, b: &str) {
    let o = |ifname| PortOptions {
        rx_ring: ring,
        ..opts(ifname, kind, 0, 1, None)
    };
    let mut tx = open(&o(a));
    let mut rx = vec![open(&o(b))];
    if kind == IoKind::AfPacket {
        let want = format!("af-packet, TPACKET_{}", ring.name().to_uppercase());
        assert_eq!(rx[0].mode(), want);
    }
    let watcher = (kind == IoKind::AfPacket).then(|| open(&o(a)));
    let (frames, over) = burst();
    let mut refs: Vec<&[u8]> = frames.iter().map(Vec::as_slice).collect();
    refs.insert(150, &over);
    let mut accepted = 0;
    for chunk in refs.chunks(32) {
        accepted += tx.send(chunk).unwrap();
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(accepted, frames.len());
    eprintln!("{a} -> {b}: {} -> {}", tx.mode(), rx[0].mode());
    assert!(rx[0].mode().starts_with(kind.name()), "{}", rx[0].mode());
    let got = collect(&mut rx, frames.len(), Duration::from_secs(5)).remove(0);
    assert_eq!(got.len(), frames.len(), "{kind:?}: frames received");
    for (i, (g, f)) in got.iter().zip(&frames).enumerate() {
        assert!(
            g == f,
            "{kind:?}: frame {i} differs ({} vs {} bytes)",
            g.len(),
            f.len()
        );
    }
    let bytes: u64 = frames.iter().map(|f| f.len() as u64).sum();
    let st = tx.stats();
    assert_eq!(
        (st.tx_packets, st.tx_bytes, st.tx_errors),
        (frames.len() as u64, bytes, 1),
        "{kind:?}"
    );
    let sr = rx[0].stats();
    assert!(
        sr.rx_packets >= frames.len() as u64 && sr.rx_bytes >= bytes,
        "{kind:?}: {sr:?}"
    );
    assert_eq!(
        (sr.rx_dropped, sr.tx_packets, sr.tx_errors),
        (0, 0, 0),
        "{kind:?}"
    );
    // Our own sends come back neither on the sending handle nor (AF_PACKET
    // ignores outgoing frames) on another handle on the same interface.
    let mut senders = vec![tx];
    if let Some(w) = watcher {
        senders.push(w);
    }
    let back = collect(&mut senders, 1, Duration::from_millis(300));
    assert!(
        back.iter().all(Vec::is_empty),
        "{kind:?}: own frames came back"
    );
}

#[test]
fn af_packet_frames_cross_intact() {
    if !root() {
        return;
    }
    let _serial = serial();
    let v = Veth::new(1);
    one_way(IoKind::AfPacket, &v.a, &v.b);
    one_way(IoKind::AfPacket, &v.b, &v.a);
}

#[test]
fn af_packet_v2_frames_cross_intact() {
    if !root() {
        return;
    }
    let _serial = serial();
    let v = Veth::new(7);
    one_way_ring(IoKind::AfPacket, RxRing::V2, &v.a, &v.b);
    one_way_ring(IoKind::AfPacket, RxRing::V2, &v.b, &v.a);
}

/// A TCP/IPv4 frame of `len` bytes from port 1000 to 2000, its checksum
/// left to offload (the pseudo-header's sum in place, as a sender's stack
/// leaves it).
fn tcp_frame(len: usize) -> Vec<u8> {
    let mut f = Vec::with_capacity(len);
    f.extend_from_slice(&DST);
    f.extend_from_slice(&SRC);
    f.extend_from_slice(&[0x08, 0x00]);
    let ip_len = (len - 14) as u16;
    let mut ip = vec![
        0x45, 0, 0, 0, 0, 1, 0x40, 0, 64, 6, 0, 0, 10, 0, 0, 1, 10, 0, 1, 2,
    ];
    ip[2..4].copy_from_slice(&ip_len.to_be_bytes());
    let c = csum(&ip);
    ip[10..12].copy_from_slice(&c.to_be_bytes());
    f.extend_from_slice(&ip);
    let mut tcp = vec![0u8; 20];
    tcp[0..2].copy_from_slice(&1000u16.to_be_bytes());
    tcp[2..4].copy_from_slice(&2000u16.to_be_bytes());
    tcp[4..8].copy_from_slice(&7u32.to_be_bytes());
    tcp[12] = 5 << 4;
    tcp[13] = 0x18; // PSH, ACK
    tcp[14..16].copy_from_slice(&512u16.to_be_bytes());
    // The pseudo-header's sum, not complemented: what CHECKSUM_PARTIAL
    // leaves for the device to finish.
    let tcp_len = u32::from(ip_len) - 20;
    let mut sum: u32 = 0x0a00 + 0x0001 + 0x0a00 + 0x0102 + 6 + tcp_len;
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    tcp[16..18].copy_from_slice(&(sum as u16).to_be_bytes());
    f.extend_from_slice(&tcp);
    while f.len() < len {
        f.push(f.len() as u8);
    }
    f
}

#[test]
fn af_packet_v2_takes_frames_of_segmentation_offload_whole() {
    if !root() {
        return;
    }
    let _serial = serial();
    let v = Veth::new(8);
    // Offloads on, as a veth comes: the frame of segmentation offload
    // crosses the pair whole.
    for i in [&v.a, &v.b] {
        assert!(sh(&[
            "ethtool", "-K", i, "tx", "on", "tso", "on", "gso", "on"
        ]));
    }
    let mut tx = open(&opts(&v.a, IoKind::AfPacket, 0, 1, None));
    let mut rx = open(&PortOptions {
        rx_ring: RxRing::V2,
        ..opts(&v.b, IoKind::AfPacket, 0, 1, None)
    });
    assert!(tx.sends_gso(), "no virtio-net header on this kernel");
    let big = tcp_frame(20_000);
    let hdr = VnetHdr {
        flags: 1,
        gso_type: 1,
        hdr_len: 54,
        gso_size: 1448,
        csum_start: 34,
        csum_offset: 16,
    };
    // Small frames around it: the ring and the socket's queue keep order.
    let (small, _) = burst();
    assert_eq!(tx.send(&[&small[0]]).unwrap(), 1);
    assert_eq!(tx.send_gso(&[(&big, hdr)]).unwrap(), 1);
    assert_eq!(tx.send(&[&small[1]]).unwrap(), 1);
    let mut pool = Pool::default();
    let mut got = Vec::new();
    let mut gso = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(5);
    while got.len() < 3 && Instant::now() < deadline {
        io::wait(&[rx.fd()], Duration::from_millis(20)).unwrap();
        let mut out = Vec::new();
        rx.recv(&mut pool, &mut out, 64).unwrap();
        let mut hdrs = Vec::new();
        rx.take_gso(&mut hdrs);
        for (i, h) in hdrs {
            if out[i].len() >= 12 && out[i][6..12] == SRC {
                gso.push((
                    got.len() + out[..i].iter().filter(|f| f[6..12] == SRC).count(),
                    h,
                ));
            }
        }
        got.extend(out.into_iter().filter(|f| f.len() >= 12 && f[6..12] == SRC));
    }
    assert_eq!(got.len(), 3, "frames received");
    assert_eq!((&got[0], &got[2]), (&small[0], &small[1]));
    // Whole, its checksum finished (the only bytes that differ).
    let g = &got[1];
    assert_eq!(g.len(), big.len());
    assert_eq!((&g[..50], &g[52..]), (&big[..50], &big[52..]));
    assert_eq!(
        csum(
            &[
                &[10, 0, 0, 1, 10, 0, 1, 2, 0, 6],
                &19_966u16.to_be_bytes()[..],
                &g[34..]
            ]
            .concat()
        ),
        0
    );
    assert_eq!(gso.len(), 1);
    assert_eq!(gso[0].0, 1);
    assert!(matches!(gso[0].1.gso(), Gso::Tcp(_)), "{:?}", gso[0].1);
    let st = rx.stats();
    assert_eq!((st.rx_gso_frames, st.rx_dropped), (1, 0), "{st:?}");
}

#[test]
fn af_packet_fanout_shares_frames_once() {
    if !root() {
        return;
    }
    let _serial = serial();
    let v = Veth::new(2);
    let mut tx = open(&opts(&v.a, IoKind::AfPacket, 0, 1, None));
    // Rings as large as `ctrack run`'s (4,096 frames): every frame is
    // sent before any is read, and a block is handed over, however few
    // frames it holds, a millisecond after its first (the 1,024 frames of
    // `opts` are 13 blocks, which 16 frames a millisecond fill first).
    let rx_opts = |w, group| PortOptions {
        ring_frames: 4096,
        ..opts(&v.b, IoKind::AfPacket, w, 2, group)
    };
    // The first worker's socket has the kernel make a group of its own;
    // the second joins it.
    let first = open(&rx_opts(0, None));
    let group = first.fanout_group();
    assert!(group.is_some());
    let mut rx = vec![first, open(&rx_opts(1, group))];
    let (frames, _) = burst();
    for chunk in frames.chunks(16) {
        let refs: Vec<&[u8]> = chunk.iter().map(Vec::as_slice).collect();
        assert_eq!(tx.send(&refs).unwrap(), refs.len());
        std::thread::sleep(Duration::from_millis(1));
    }
    let got = collect(&mut rx, frames.len(), Duration::from_secs(5));
    assert!(
        got.iter().all(|g| !g.is_empty()),
        "a worker got nothing: {:?}",
        got.iter().map(Vec::len).collect::<Vec<_>>()
    );
    let mut seen: HashMap<&[u8], usize> = HashMap::new();
    for f in got.iter().flatten() {
        *seen.entry(f.as_slice()).or_default() += 1;
    }
    for (i, f) in frames.iter().enumerate() {
        assert_eq!(
            seen.get(f.as_slice()),
            Some(&1),
            "frame {i} seen {:?} times",
            seen.get(f.as_slice())
        );
    }
    assert_eq!(got.iter().map(Vec::len).sum::<usize>(), frames.len());
    let n: u64 = rx.iter_mut().map(|p| p.stats().rx_packets).sum();
    assert!(n >= frames.len() as u64);
}

#[test]
fn af_xdp_frames_cross_intact() {
    if !root() {
        return;
    }
    let _serial = serial();
    let v = Veth::new(3);
    one_way(IoKind::AfXdp, &v.a, &v.b);
    one_way(IoKind::AfXdp, &v.b, &v.a);
}

#[test]
fn wait_wakes_on_frames_only() {
    if !root() {
        return;
    }
    let _serial = serial();
    let v = Veth::new(4);
    let mut tx = open(&opts(&v.a, IoKind::AfPacket, 0, 1, None));
    let rx = open(&opts(&v.b, IoKind::AfPacket, 0, 1, None));
    let t = Instant::now();
    assert!(!io::wait(&[rx.fd()], Duration::from_millis(50)).unwrap());
    assert!(t.elapsed() >= Duration::from_millis(40));
    let f = frame(1, 100, None);
    assert_eq!(tx.send(&[&f]).unwrap(), 1);
    assert!(io::wait(&[rx.fd()], Duration::from_secs(2)).unwrap());
}

#[test]
fn interface_mac_mtu_and_errors() {
    if !root() {
        return;
    }
    let _serial = serial();
    let v = Veth::new(5);
    assert!(sh(&["ip", "link", "set", &v.a, "mtu", "1400"]));
    let (mac, mtu) = io::interface(&v.a).unwrap();
    let want = std::fs::read_to_string(format!("/sys/class/net/{}/address", v.a)).unwrap();
    let hex: Vec<String> = mac.iter().map(|b| format!("{b:02x}")).collect();
    assert_eq!(hex.join(":"), want.trim());
    assert_eq!(mtu, 1400);
    let e = io::interface("ckio-none9").unwrap_err();
    assert_eq!(e.to_string(), "no interface named ckio-none9");
    for kind in [IoKind::AfPacket, IoKind::AfXdp] {
        let e = io::open(&opts("ckio-none9", kind, 0, 1, None)).unwrap_err();
        assert_eq!(e.to_string(), "no interface named ckio-none9");
    }
    let e = io::open(&opts(&v.a, IoKind::AfPacket, 2, 2, None)).unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput);
    let mut o = opts(&v.a, IoKind::AfPacket, 0, 1, None);
    o.frame_size = 1 << 20;
    assert!(io::open(&o).unwrap_err().to_string().contains("frame size"));
    assert!(io::check_capabilities(IoKind::AfPacket).is_ok());
    assert!(io::check_capabilities(IoKind::AfXdp).is_ok());
}

/// Whether an XDP program is attached to `ifname`.
fn has_xdp(ifname: &str) -> bool {
    let o = Command::new("ip")
        .args(["link", "show", ifname])
        .output()
        .unwrap();
    String::from_utf8_lossy(&o.stdout).contains("xdp")
}

#[test]
fn af_xdp_workers_share_the_program() {
    if !root() {
        return;
    }
    let _serial = serial();
    let v = Veth::with_queues(6, 2);
    let mut tx = open(&opts(&v.a, IoKind::AfPacket, 0, 1, None));
    let e = io::open(&opts(&v.b, IoKind::AfXdp, 0, 3, None)).unwrap_err();
    assert!(e.to_string().contains("--workers 2"), "{e}");
    let e = io::open(&opts(&v.b, IoKind::AfXdp, 0, 1, None)).unwrap_err();
    assert!(e.to_string().contains("--workers 2"), "{e}");
    assert!(!has_xdp(&v.b), "a failed open left the program attached");
    let mut rx = vec![open(&opts(&v.b, IoKind::AfXdp, 0, 2, None))];
    rx.push(open(&opts(&v.b, IoKind::AfXdp, 1, 2, None)));
    assert!(has_xdp(&v.b));
    let (frames, _) = burst();
    for chunk in frames.chunks(16) {
        let refs: Vec<&[u8]> = chunk.iter().map(Vec::as_slice).collect();
        assert_eq!(tx.send(&refs).unwrap(), refs.len());
        std::thread::sleep(Duration::from_millis(1));
    }
    let got = collect(&mut rx, frames.len(), Duration::from_secs(5));
    let mut all: Vec<&Vec<u8>> = got.iter().flatten().collect();
    all.sort();
    let mut want: Vec<&Vec<u8>> = frames.iter().collect();
    want.sort();
    assert!(
        all == want,
        "{} frames of {} received",
        all.len(),
        want.len()
    );
    // The first handle's drop leaves the program to the second.
    let second = rx.pop();
    drop(rx);
    assert!(has_xdp(&v.b));
    drop(second);
    assert!(!has_xdp(&v.b), "program still attached after the last port");
}

/// The process's descriptors and socket mappings.
fn resources() -> (usize, usize) {
    let fds = std::fs::read_dir("/proc/self/fd").unwrap().count();
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    (fds, maps.lines().filter(|l| l.contains("socket:[")).count())
}

#[test]
fn ports_close_everything() {
    if !root() {
        return;
    }
    let _serial = serial();
    let v = Veth::new(7);
    let before = resources();
    for kind in [IoKind::AfPacket, IoKind::AfXdp] {
        let mut ports = vec![open(&opts(&v.a, kind, 0, 1, None))];
        if kind == IoKind::AfPacket {
            let first = open(&opts(&v.b, kind, 0, 2, None));
            let group = first.fanout_group();
            ports.push(first);
            ports.push(open(&opts(&v.b, kind, 1, 2, group)));
        } else {
            ports.push(open(&opts(&v.b, kind, 0, 1, None)));
        }
        let during = resources();
        assert!(
            during.0 > before.0 && during.1 > before.1,
            "{kind:?}: {before:?} {during:?}"
        );
        let f = frame(1, 200, None);
        assert_eq!(ports[0].send(&[&f]).unwrap(), 1);
        drop(ports);
        assert_eq!(
            resources(),
            before,
            "{kind:?}: descriptors or mappings left"
        );
        assert!(!has_xdp(&v.a) && !has_xdp(&v.b));
    }
}

/// The kernel's count of promiscuous holders of `ifname` (`promiscuity`
/// in `ip -d link show`): each open port of either kind holds one.
fn promiscuity(ifname: &str) -> u32 {
    let o = Command::new("ip")
        .args(["-d", "link", "show", ifname])
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    let at = out
        .find("promiscuity ")
        .expect("ip -d link shows promiscuity");
    let n = out[at + "promiscuity ".len()..].split_whitespace().next();
    n.and_then(|n| n.parse().ok()).expect("a count")
}

/// A port of either kind holds its interface promiscuous while it is
/// open (a NIC would otherwise drop the frames addressed to the stations
/// beyond it, before any socket or XDP program saw them), and lets go when
/// it closes. Until 2026-12-01 AF_XDP ports did not: on a veth, which
/// filters nothing, it did not show.
#[test]
fn ports_hold_their_interface_promiscuous() {
    if !root() {
        return;
    }
    let _serial = serial();
    let v = Veth::new(9);
    assert_eq!(promiscuity(&v.a), 0);
    for kind in [IoKind::AfPacket, IoKind::AfXdp] {
        let p = open(&opts(&v.a, kind, 0, 1, None));
        assert_eq!(promiscuity(&v.a), 1, "{kind:?}");
        drop(p);
        assert_eq!(promiscuity(&v.a), 0, "{kind:?}");
    }
}

/// A fanout group's number is the network namespace's: one in use on
/// another interface (by another program, or another `ctrack run`) is
/// refused to a socket here, and a socket joining it on the same
/// interface would share that program's frames. So the first worker's
/// socket has the kernel make a group no other socket is in. Until
/// 2026-12-01 `ctrack run` chose the number from its process id, and
/// failed to start where another process had that number.
#[test]
fn the_first_fanout_socket_gets_a_group_of_its_own() {
    if !root() {
        return;
    }
    let _serial = serial();
    let v = Veth::new(10);
    // Another program's group on the other end of the pair.
    let theirs = open(&opts(&v.a, IoKind::AfPacket, 0, 2, None));
    let taken = theirs.fanout_group().expect("a group");
    let e = io::open(&opts(&v.b, IoKind::AfPacket, 0, 2, Some(taken))).unwrap_err();
    assert!(e.to_string().contains("joining fanout group"), "{e}");
    let ours = open(&opts(&v.b, IoKind::AfPacket, 0, 2, None));
    let group = ours.fanout_group().expect("a group");
    assert_ne!(group, taken);
    let second = open(&opts(&v.b, IoKind::AfPacket, 1, 2, Some(group)));
    assert_eq!(second.fanout_group(), Some(group));
    // One worker: no group.
    assert_eq!(
        open(&opts(&v.b, IoKind::AfPacket, 0, 1, None)).fanout_group(),
        None
    );
}
