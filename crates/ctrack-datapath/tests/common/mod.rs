//! What the control tests share: a datapath built by hand on a small
//! policy, its control server on a temporary socket, frames to make
//! connections with, and raw socket and HTTP helpers.
#![allow(dead_code)] // each test file uses its own part

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use ctrack_core::{Config, EventSink, FragConfig, Tracker};
use ctrack_datapath::ctl::client::{Client, ClientError, StreamItem, request};
use ctrack_datapath::ctl::{self, EventHub};
use ctrack_datapath::io::{IoKind, PortStats};
use ctrack_datapath::live::{PortInfo, Shared};
use ctrack_policy::firewall::{Firewall, FwOutputs};
use ctrack_policy::model::Policy;
use ctrack_wire::build::{Frame, L4};
use ctrack_wire::tcp::flags::{ACK, SYN};

pub(crate) const CLIENT: ([u8; 6], [u8; 4]) = ([2, 0, 0, 0, 0, 1], [10, 0, 0, 1]);
pub(crate) const SERVER: ([u8; 6], [u8; 4]) = ([2, 0, 0, 0, 0, 2], [10, 0, 0, 2]);
pub(crate) const GUEST: ([u8; 6], [u8; 4]) = ([2, 0, 0, 0, 0, 3], [10, 0, 0, 3]);

/// client (zone 5) and guest (zone 9) talk to server (zone 7): their
/// connections live in zones 5 and 7 (the lower of the two ports').
pub(crate) const POLICY: &str = r#"
[default]
action = "allow"

[[port]]
name = "client"
addresses = ["02:00:00:00:00:01 10.0.0.1"]
zone = 5

[[port]]
name = "server"
addresses = ["02:00:00:00:00:02 10.0.0.2"]
zone = 7

[[port]]
name = "guest"
addresses = ["02:00:00:00:00:03 10.0.0.3"]
zone = 9

[[acl]]
name = "web"
direction = "to-lport"
priority = 1000
match = "outport == \"server\" && tcp.dst == 80"
action = "allow-related"

[[acl]]
name = "out"
direction = "from-lport"
priority = 1
match = "ip"
action = "allow-related"
"#;

pub(crate) fn tmp_dir() -> PathBuf {
    static N: AtomicUsize = AtomicUsize::new(0);
    let d = std::env::temp_dir().join(format!(
        "ctrack-ctl-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

pub(crate) struct Env {
    pub(crate) shared: Arc<Shared>,
    pub(crate) dir: PathBuf,
    pub(crate) sock: PathBuf,
    server: Option<JoinHandle<()>>,
    outs: FwOutputs<u16>,
}

impl Env {
    /// A datapath on POLICY and its control server.
    pub(crate) fn new() -> Env {
        Env::with_hub(EventHub::new(1024))
    }

    pub(crate) fn with_hub(hub: EventHub) -> Env {
        let dir = tmp_dir();
        let policy_path = dir.join("policy.toml");
        std::fs::write(&policy_path, POLICY).unwrap();
        let policy = Policy::from_str(POLICY, "test.toml").unwrap();
        let tracker = Tracker::new(Config {
            max_conns: 10_000,
            ..Config::default()
        });
        let fw = Firewall::new(tracker, FragConfig::default(), policy).unwrap();
        let port = |name: &str, ifname: &str, mac| PortInfo {
            name: name.into(),
            ifname: ifname.into(),
            mac,
            mtu: 1500,
        };
        let shared = Arc::new(Shared::new(
            fw,
            vec![
                port("client", "veth0", CLIENT.0),
                port("server", "veth1", SERVER.0),
            ],
            IoKind::AfPacket,
            policy_path,
            1,
            Arc::new(hub),
        ));
        let sock = dir.join("run").join("ctrack.sock");
        let server = ctl::serve(shared.clone(), &sock, None).unwrap();
        Env {
            shared,
            dir,
            sock,
            server: Some(server),
            outs: FwOutputs::default(),
        }
    }

    /// Runs one frame from `from` to `to` through the firewall; publishes
    /// the counters as a worker would.
    pub(crate) fn send(&mut self, from: ([u8; 6], [u8; 4]), to: ([u8; 6], [u8; 4]), l4: L4) {
        let mut f = Frame::v4(from.1, to.1, l4);
        f.eth_src = from.0;
        f.eth_dst = to.0;
        let frame = f.build();
        let len = frame.len() as u64;
        self.outs.out.clear();
        self.shared
            .fw
            .process(frame, 0, self.shared.now(), &mut self.outs);
        let mut w = self.shared.workers[0].lock().unwrap();
        w.fw = self.outs.stats.clone();
        w.ports = vec![
            PortStats {
                rx_packets: 1,
                rx_bytes: len,
                ..PortStats::default()
            },
            PortStats::default(),
        ];
    }

    pub(crate) fn handshake(&mut self, from: ([u8; 6], [u8; 4]), sport: u16, dport: u16) {
        let seg = |s, d, fl, seq, ack| L4::tcp_seg(s, d, fl, seq, ack, 65535, b"");
        self.send(from, SERVER, seg(sport, dport, SYN, 100, 0));
        self.send(SERVER, from, seg(dport, sport, SYN | ACK, 500, 101));
        self.send(from, SERVER, seg(sport, dport, ACK, 101, 501));
    }

    /// Three connections: client:40000 -> server:80 (TCP, zone 5),
    /// client:5000 -> server:53 (UDP one way, zone 5), guest:41000 ->
    /// server:80 (TCP, zone 7).
    pub(crate) fn populate(&mut self) {
        self.handshake(CLIENT, 40000, 80);
        self.send(CLIENT, SERVER, L4::udp(5000, 53, b"q"));
        self.handshake(GUEST, 41000, 80);
    }

    pub(crate) fn ok(&self, argv: &[&str]) -> String {
        request(&self.sock, argv).unwrap_or_else(|e| panic!("{argv:?}: {e}"))
    }

    pub(crate) fn fails(&self, argv: &[&str]) -> String {
        match request(&self.sock, argv) {
            Err(ClientError::Failed(m)) => m,
            other => panic!("{argv:?}: expected an error reply, got {other:?}"),
        }
    }

    pub(crate) fn stop(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.server.take() {
            h.join().unwrap();
        }
    }
}

impl Drop for Env {
    fn drop(&mut self) {
        self.stop();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

pub(crate) fn lines(s: &str) -> Vec<&str> {
    s.lines().collect()
}

/// Reads stream items until `want` says stop or 5 s pass.
pub(crate) fn collect(
    env: &Env,
    argv: &[&str],
    send: impl FnOnce(&Shared) + Send,
    mut want: impl FnMut(&[StreamItem]) -> bool,
) -> Vec<StreamItem> {
    let deadline = Instant::now() + Duration::from_secs(5);
    // An earlier stream's subscriber goes when its server thread notices.
    while env.shared.events.subscribers() != 0 {
        assert!(Instant::now() < deadline, "an earlier subscriber stays");
        std::thread::sleep(Duration::from_millis(5));
    }
    let mut client = Client::connect(&env.sock).unwrap();
    client.set_stream_timeout(Some(Duration::from_secs(5)));
    let shared = env.shared.clone();
    let mut items = Vec::new();
    std::thread::scope(|s| {
        s.spawn(move || {
            // Wait for the subscription, then produce.
            while !shared.events.active() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(2));
            }
            send(&shared);
        });
        client
            .stream(argv, |it| {
                items.push(it);
                !want(&items) && Instant::now() < deadline
            })
            .unwrap();
    });
    items
}

pub(crate) fn an_entry(env: &mut Env) -> ctrack_core::Entry {
    env.send(CLIENT, SERVER, L4::udp(7000, 53, b"q"));
    let mut e = None;
    env.shared
        .fw
        .tracker()
        .for_each(None, env.shared.now(), |_, i| e = Some(i.entry.clone()));
    e.unwrap()
}

/// Sends raw bytes, returns what the server answered before closing (or
/// the first line).
pub(crate) fn raw(sock: &Path, bytes: &[u8]) -> String {
    let mut s = UnixStream::connect(sock).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let _ = s.write_all(bytes);
    let mut line = String::new();
    let _ = BufReader::new(s).read_line(&mut line);
    line
}

pub(crate) fn http(addr: std::net::SocketAddr, req: &[u8]) -> String {
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let _ = s.write_all(req);
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out
}
