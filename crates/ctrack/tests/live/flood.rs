//! A SYN flood through `ctrack run`: spoofed SYNs from random sources
//! (raw frames from the client's namespace) at a table near its limit,
//! while real TCP connections stay open and new ones are made.

use std::time::Duration;

use super::net::{self, CLIENT_MAC, Net, SERVER_IP, SERVER_MAC};
use super::{Fw, curl, policy};

/// The connection limit of the test's ctrack.
const MAX_CONNS: usize = 2000;
/// Connections held open through the flood.
const HELD: usize = 200;
/// Spoofed SYNs.
const FLOOD: usize = 30_000;

/// Spoofed SYNs from 198.18.0.0/16 (random sources and ports) to the
/// server's port 80, as raw Ethernet frames on the client's interface.
const FLOOD_PY: &str = r#"
import random, socket, struct, sys
iface, smac, dmac, dst, n = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
mac = lambda m: bytes(int(x, 16) for x in m.split(":"))
def csum(b):
    if len(b) % 2:
        b += b"\0"
    s = sum(struct.unpack("!%dH" % (len(b) // 2), b))
    s = (s >> 16) + (s & 0xFFFF)
    s += s >> 16
    return ~s & 0xFFFF
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
s.bind((iface, 0))
d, eth, rnd = socket.inet_aton(dst), mac(dmac) + mac(smac) + b"\x08\x00", random.Random(7)
for i in range(n):
    src = bytes([198, 18, rnd.randrange(256), rnd.randrange(1, 255)])
    tcp = struct.pack("!HHIIBBHHH", rnd.randrange(1024, 65535), 80, rnd.getrandbits(32), 0, 5 << 4, 2, 65535, 0, 0)
    tcp = tcp[:16] + struct.pack("!H", csum(src + d + struct.pack("!BBH", 0, 6, len(tcp)) + tcp)) + tcp[18:]
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(tcp), i & 0xFFFF, 0, 64, 6, 0, src, d)
    ip = ip[:10] + struct.pack("!H", csum(ip)) + ip[12:]
    s.send(eth + ip + tcp)
print("sent", n, flush=True)
"#;

/// A TCP echo server on port 5201, a thread per connection.
const ECHO_PY: &str = r#"
import socket, sys, threading
l = socket.socket()
l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
l.bind((sys.argv[1], 5201))
l.listen(1024)
def echo(c):
    while True:
        b = c.recv(64)
        if not b:
            return
        c.sendall(b)
while True:
    c, _ = l.accept()
    threading.Thread(target=echo, args=(c,), daemon=True).start()
"#;

/// Opens N connections to the echo server, says so, waits for a flag file,
/// then checks that each still echoes.
const HOLD_PY: &str = r#"
import os, socket, sys, time
dst, n, flag = sys.argv[1], int(sys.argv[2]), sys.argv[3]
conns = []
for _ in range(n):
    c = socket.create_connection((dst, 5201), timeout=5)
    conns.append(c)
print("open", len(conns), flush=True)
while not os.path.exists(flag):
    time.sleep(0.05)
alive = 0
for c in conns:
    try:
        c.sendall(b"x")
        if c.recv(1) == b"x":
            alive += 1
    except OSError:
        pass
print("alive", alive, flush=True)
"#;

#[test]
fn a_syn_flood_through_ctrack_run_keeps_connections_and_lets_new_ones_in() {
    if let Some(why) = net::unusable() {
        net::skip(&why);
        return;
    }
    let mut net = Net::new("fl");
    let p = net.file("policy.toml", &policy(true, ""));
    let max = MAX_CONNS.to_string();
    let fw = Fw::start_with(
        &mut net,
        "ctrack",
        &p.display().to_string(),
        "af-packet",
        &max,
    );
    let (c, s) = (net.c.clone(), net.s.clone());
    let echo = net.file("echo.py", ECHO_PY).display().to_string();
    let hold = net.file("hold.py", HOLD_PY).display().to_string();
    let flood = net.file("flood.py", FLOOD_PY).display().to_string();
    let flag = net.dir.join("flood-done").display().to_string();
    net.spawn(&s, "echo", &["python3", &echo, SERVER_IP]);
    net.spawn(
        &s,
        "http",
        &["python3", "-m", "http.server", "80", "--bind", SERVER_IP],
    );
    // Real connections, opened before the flood and held through it.
    std::thread::sleep(Duration::from_millis(500));
    let held = HELD.to_string();
    net.spawn(&c, "hold", &["python3", &hold, SERVER_IP, &held, &flag]);
    let open = Net::until(Duration::from_secs(20), || {
        net.stdout("hold").contains(&format!("open {HELD}"))
    });
    assert!(
        open,
        "held connections: {}{}",
        net.stdout("hold"),
        net.stderr("hold")
    );
    // The flood, many times the table's room.
    let n = FLOOD.to_string();
    let sent = net.run(
        &c,
        &[
            "python3", &flood, "c0", CLIENT_MAC, SERVER_MAC, SERVER_IP, &n,
        ],
    );
    assert!(sent.status.success(), "flood: {sent:?}");
    // The table stayed within its limit, and the flood's entries made
    // room for each other.
    let count: usize = fw.ctl_ok(&net, &["count"]).trim().parse().expect("count");
    assert!(count <= MAX_CONNS, "{count} connections, limit {MAX_CONNS}");
    let stats: serde_json::Value =
        serde_json::from_str(&fw.ctl_ok(&net, &["stats", "--format", "json"])).expect("stats");
    // The flood's SYNs that reached the firewall (the kernel drops what
    // overflows the receive ring, more of it on a loaded machine and a
    // debug build): each one past the table's room took the place of an
    // older entry.
    let evicted = stats["tracker"]["evicted"].as_u64().unwrap_or(0);
    let judged = stats["policy"]["acls"]
        .as_array()
        .and_then(|a| a.iter().find(|x| x["acl"] == "http"))
        .and_then(|x| x["conns"].as_u64())
        .unwrap_or(0);
    assert!(
        judged as usize >= 3 * MAX_CONNS,
        "only {judged} of {FLOOD} flood SYNs reached the firewall: {stats}"
    );
    assert!(
        evicted as usize + MAX_CONNS >= judged as usize,
        "evicted {evicted} of {judged} flood SYNs at a limit of {MAX_CONNS}: {stats}"
    );
    // New connections still get in.
    let mut ok = 0;
    for _ in 0..50 {
        if curl(&net, 80, "3").0.status.success() {
            ok += 1;
        }
    }
    assert!(ok >= 50, "{ok} of 50 new connections got through the flood");
    // Every held connection survived and still passes.
    std::fs::write(&flag, b"").expect("flag file");
    let done = net.wait("hold", Duration::from_secs(30));
    assert!(
        done.is_some_and(|s| s.success()),
        "hold: {}",
        net.stderr("hold")
    );
    let out = net.stdout("hold");
    assert!(
        out.contains(&format!("alive {HELD}")),
        "held connections after the flood: {out}"
    );
}
