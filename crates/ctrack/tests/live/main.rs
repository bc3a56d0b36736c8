//! Real TCP/IP stacks talking through `ctrack run`: a client and a server
//! namespace joined over veth pairs through a third namespace where ctrack
//! switches and filters, with curl, ping, a Python HTTP server, an FTP
//! server (pyftpdlib) and iperf3 on either side.
//!
//! Needs root (namespaces, raw sockets) and the programs `.ci/run`
//! installs; without them the tests say why and pass, except in CI (`CI`
//! set), where they fail. One runs at a time (and never beside the other
//! namespace tests: they share a lock file).

#[path = "../common/mod.rs"]
mod common;
mod flood;
mod ftp;
mod ipv6;
mod links;
mod net;
mod persist;

use std::time::{Duration, Instant};

use net::{CLIENT_IP, CLIENT_MAC, Net, SERVER_IP, SERVER_MAC};

const CTRACK: &str = env!("CARGO_BIN_EXE_ctrack");

/// The SNAT address FTP connections leave with.
const SNAT_IP: &str = "10.77.0.100";

/// The policy of the tests: default drop; ARP both ways; the client may
/// open connections out; the server takes HTTP (80), iperf3 (5201, unless
/// `iperf` is false), ping, FTP (21, with the FTP gateway and SNAT to
/// 10.77.0.100); port 81 is dropped and 82 rejected.
fn policy(iperf: bool, extra: &str) -> String {
    let mut p = format!(
        r#"
[default]
action = "drop"

[[port]]
name = "client"
addresses = ["{CLIENT_MAC} {CLIENT_IP}"]

[[port]]
name = "server"
addresses = ["{SERVER_MAC} {SERVER_IP}"]

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
name = "client-out"
direction = "from-lport"
priority = 1000
match = "inport == \"client\" && ip4"
action = "allow-related"

[[acl]]
name = "http"
direction = "to-lport"
priority = 1000
match = "outport == \"server\" && tcp.dst == 80"
action = "allow-related"

[[acl]]
name = "ping"
direction = "to-lport"
priority = 1000
match = "outport == \"server\" && icmp4"
action = "allow-related"

[[acl]]
name = "closed"
direction = "to-lport"
priority = 1000
match = "outport == \"server\" && tcp.dst == 82"
action = "reject"
log = true
meter = "acl-log"

[[acl]]
name = "ftp"
direction = "to-lport"
priority = 1000
match = "outport == \"server\" && tcp.dst == 21"
action = "allow-related"
alg = "ftp"
nat = "src={SNAT_IP}"
"#
    );
    if iperf {
        p.push_str(
            r#"
[[acl]]
name = "iperf"
direction = "to-lport"
priority = 1000
match = "outport == \"server\" && tcp.dst == 5201"
action = "allow-related"
"#,
        );
    }
    p.push_str(extra);
    // OVN's meter for ACL logs: one line a second, a burst of one.
    p.push_str("\n[meters.acl-log]\nrate = 1\n");
    p
}

/// A running `ctrack run` in the firewall namespace.
struct Fw {
    sock: String,
}

impl Fw {
    /// Starts ctrack with `policy_file` and waits until its control socket
    /// answers.
    fn start(net: &mut Net, name: &str, policy_file: &str, io: &str) -> Fw {
        Fw::start_with(net, name, policy_file, io, "100000")
    }

    /// [`Fw::start`] with a connection limit.
    fn start_with(net: &mut Net, name: &str, policy_file: &str, io: &str, max: &str) -> Fw {
        // AF_XDP: one worker per receive queue, and a veth has one.
        let workers = if io == "af-xdp" { "1" } else { "2" };
        let sock = net.dir.join(format!("{name}.sock")).display().to_string();
        let f = net.f.clone();
        // `af-packet-v2`: AF_PACKET with `--rx-ring v2`.
        let (io, ring) = match io.strip_prefix("af-packet-") {
            Some(v) => ("af-packet", v),
            None => (io, "v3"),
        };
        net.spawn(
            &f,
            name,
            &[
                CTRACK,
                "run",
                "--policy",
                policy_file,
                "--port",
                "client=c1",
                "--port",
                "server=s1",
                "--io",
                io,
                "--rx-ring",
                ring,
                "--workers",
                workers,
                "--max-conns",
                max,
                "--ctl",
                &sock,
            ],
        );
        let fw = Fw { sock };
        let up = Net::until(Duration::from_secs(15), || {
            fw.ctl(net, &["count"]).status.success()
        });
        assert!(
            up,
            "ctrack did not come up: {}{}",
            net.stdout(name),
            net.stderr(name)
        );
        fw
    }

    /// `ctrack ctl ARGS`.
    fn ctl(&self, net: &Net, args: &[&str]) -> std::process::Output {
        let mut argv = vec![CTRACK, "ctl", "--ctl", &self.sock];
        argv.extend_from_slice(args);
        net.run(&net.f, &argv)
    }

    /// `ctrack ctl ARGS`, which must succeed; its output.
    fn ctl_ok(&self, net: &Net, args: &[&str]) -> String {
        let o = self.ctl(net, args);
        assert!(
            o.status.success(),
            "ctrack ctl {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8_lossy(&o.stdout).into_owned()
    }
}

/// Sets up the namespaces and ctrack, or says why not.
fn setup(tag: &str, io: &str) -> Option<(Net, Fw)> {
    setup_with(tag, io, false, &policy(true, ""))
}

/// [`setup`] with the senders' offloads left on or not
/// ([`Net::with_sender_offloads`]) and the policy `policy`.
fn setup_with(tag: &str, io: &str, offloads: bool, policy: &str) -> Option<(Net, Fw)> {
    if let Some(why) = net::unusable() {
        net::skip(&why);
        return None;
    }
    let mut net = match offloads {
        true => Net::with_sender_offloads(tag),
        false => Net::new(tag),
    };
    let p = net.file("policy.toml", policy);
    let fw = Fw::start(&mut net, "ctrack", &p.display().to_string(), io);
    Some((net, fw))
}

fn curl(net: &Net, port: u16, max_time: &str) -> (std::process::Output, Duration) {
    let url = format!("http://{SERVER_IP}:{port}/");
    let start = Instant::now();
    let o = net.run(
        &net.c,
        &[
            "curl",
            "-sS",
            "-o",
            "/dev/null",
            "--max-time",
            max_time,
            &url,
        ],
    );
    (o, start.elapsed())
}

fn http_ping_reject(tag: &str, io: &str) {
    let Some((mut net, fw)) = setup(tag, io) else {
        return;
    };
    let s = net.s.clone();
    net.spawn(
        &s,
        "http",
        &["python3", "-m", "http.server", "80", "--bind", SERVER_IP],
    );
    net.spawn(
        &s,
        "http81",
        &["python3", "-m", "http.server", "81", "--bind", SERVER_IP],
    );
    // Connection events stream while the traffic runs.
    let f = net.f.clone();
    let sock = fw.sock.clone();
    net.spawn(&f, "events", &[CTRACK, "ctl", "--ctl", &sock, "events"]);
    std::thread::sleep(Duration::from_millis(300));
    // HTTP on 80 passes (the server may take a moment to listen).
    let ok = Net::until(Duration::from_secs(10), || {
        curl(&net, 80, "2").0.status.success()
    });
    assert!(ok, "curl through ctrack to port 80 failed");
    // Ping passes, both ways of the exchange.
    let p = net.run(
        &net.c,
        &["ping", "-c", "2", "-i", "0.2", "-W", "2", SERVER_IP],
    );
    assert!(
        p.status.success(),
        "ping: {}",
        String::from_utf8_lossy(&p.stdout)
    );
    // Port 81 is dropped: curl times out although a server listens.
    let (o, took) = curl(&net, 81, "2");
    assert_eq!(o.status.code(), Some(28), "curl to a dropped port: {o:?}");
    assert!(took >= Duration::from_secs(2));
    // Port 82 is rejected: curl fails at once, refused by the RST.
    let (o, took) = curl(&net, 82, "5");
    assert_eq!(o.status.code(), Some(7), "curl to a rejected port: {o:?}");
    assert!(took < Duration::from_secs(2), "reject took {took:?}");
    // The server may not open connections to the client (no ACL lets it).
    let back = net.run(
        &net.s,
        &[
            "curl",
            "-sS",
            "--max-time",
            "1",
            &format!("http://{CLIENT_IP}:80/"),
        ],
    );
    assert_eq!(back.status.code(), Some(28), "{back:?}");
    // The control socket shows the HTTP connections; flush removes them.
    let list = fw.ctl_ok(&net, &["list", "-p", "tcp", "--dport", "80"]);
    assert!(list.contains(&format!("dst={SERVER_IP}")), "list: {list}");
    assert!(list.contains("dport=80"), "list: {list}");
    let events = net.stdout("events");
    assert!(
        events.contains("[NEW] tcp") && events.contains("dport=80"),
        "events: {events}"
    );
    let stats = fw.ctl_ok(&net, &["stats"]);
    assert!(stats.contains("reject"), "stats: {stats}");
    // The rejecting ACL logs (`log = true`), as ovn-controller's acl_log;
    // the others do not.
    let line = format!(
        "acl_log(ctrack)|INFO|name=\"closed\", verdict=reject, severity=info, \
         direction=to-lport: inport=\"client\": {CLIENT_IP}:"
    );
    let logged = Net::until(Duration::from_secs(5), || {
        net.stderr("ctrack").contains(&line)
    });
    let log = net.stderr("ctrack");
    assert!(logged, "no ACL log line {line:?} in: {log}");
    assert!(log.contains(&format!("> {SERVER_IP}:82 tcp [S]")), "{log}");
    assert!(!log.contains("name=\"http\""), "{log}");
    // Five more rejected SYNs: the ACL's meter (one line a second, a burst
    // of one) logs about one a second of them, and counts the rest as
    // suppressed.
    let start = Instant::now();
    for _ in 0..5 {
        let (o, _) = curl(&net, 82, "5");
        assert_eq!(o.status.code(), Some(7), "curl to a rejected port: {o:?}");
    }
    let secs = start.elapsed().as_secs();
    let mut json = String::new();
    let counted = Net::until(Duration::from_secs(5), || {
        json = fw.ctl_ok(&net, &["stats", "--format", "json"]);
        let v: serde_json::Value = serde_json::from_str(&json).expect("stats JSON");
        let n = |k: &str| v["acl_log"][k].as_u64().unwrap_or(0);
        n("lines") + n("suppressed") + n("dropped") == 6
    });
    assert!(counted, "six rejected SYNs, six log decisions: {json}");
    let v: serde_json::Value = serde_json::from_str(&json).expect("stats JSON");
    let lines = v["acl_log"]["lines"].as_u64().unwrap_or(0);
    assert!(
        (1..=2 + secs).contains(&lines),
        "{lines} lines in {secs} s through a meter of one a second: {json}"
    );
    assert_eq!(v["acl_log"]["dropped"], 0, "{json}");
    fw.ctl_ok(&net, &["flush"]);
    let count = fw.ctl_ok(&net, &["count"]);
    assert_eq!(count.trim(), "0", "count after flush: {count}");
}

/// A policy's `[copp] reject` meter limits `reject` answers in place of
/// `--reject-rate`, from the reload that brings it: twenty SYNs at once
/// to the rejected port get twenty RSTs under the default limit (a burst
/// of 50), then, under a meter of one a second with a burst of two, two
/// (three if a second turns meanwhile); the rest are dropped unanswered.
#[test]
fn reject_answers_within_a_copp_meter() {
    let Some((net, fw)) = setup("cp", "af-packet") else {
        return;
    };
    // Twenty connections opened at once, closed before a SYN is sent
    // again: one SYN each.
    let syns = format!(
        "import socket, time\n\
         ss = [socket.socket() for _ in range(20)]\n\
         for s in ss:\n    s.setblocking(False)\n    s.connect_ex(('{SERVER_IP}', 82))\n\
         time.sleep(0.3)\n\
         for s in ss:\n    s.close()\n"
    );
    let rejects = |want: u64| {
        let mut json = String::new();
        let done = Net::until(Duration::from_secs(5), || {
            json = fw.ctl_ok(&net, &["stats", "--format", "json"]);
            let v: serde_json::Value = serde_json::from_str(&json).expect("stats JSON");
            let n = |k: &str| v["rejects"][k].as_u64().unwrap_or(0);
            n("sent") + n("suppressed") >= want
        });
        assert!(done, "{want} rejected SYNs: {json}");
        let v: serde_json::Value = serde_json::from_str(&json).expect("stats JSON");
        let n = |k: &str| v["rejects"][k].as_u64().unwrap_or(0);
        (n("sent"), n("suppressed"))
    };
    let run = |what: &str| {
        let o = net.run(&net.c, &["python3", "-c", &syns]);
        assert!(o.status.success(), "{what}: {o:?}");
    };
    run("under --reject-rate");
    assert_eq!(rejects(20), (20, 0));
    let copp = "\n[meters.answers]\nrate = 1\nburst = 2\n\n[copp]\nreject = \"answers\"\n";
    let with = net.file("copp.toml", &policy(true, copp));
    let shown = fw.ctl_ok(&net, &["policy", "reload", &with.display().to_string()]);
    assert!(shown.contains("generation"), "{shown}");
    let show = fw.ctl_ok(&net, &["policy", "show"]);
    assert!(show.contains("the reject answers ([copp])"), "{show}");
    let start = Instant::now();
    run("under the copp meter");
    let secs = start.elapsed().as_secs();
    let (sent, suppressed) = rejects(40);
    assert!(
        (22..=23 + secs).contains(&sent) && sent + suppressed == 40,
        "{sent} answers and {suppressed} kept back, 20 of them in {secs} s through a meter of one a second, a burst of two"
    );
}

/// `port_security` on the client's port: ping from its own address
/// passes; from a second address the client takes, it is dropped by port
/// security (counted as such), while the ACLs would allow it; and a frame
/// from a MAC the client makes up is dropped by the switch.
#[test]
fn port_security_drops_a_spoofed_source() {
    let ours = format!("addresses = [\"{CLIENT_MAC} {CLIENT_IP}\"]");
    let text = policy(false, "").replacen(
        &ours,
        &format!("{ours}\nport_security = [\"{CLIENT_MAC} {CLIENT_IP}\"]"),
        1,
    );
    assert!(text.contains("port_security"));
    let Some((net, fw)) = setup_with("ps", "af-packet", false, &text) else {
        return;
    };
    let ping = |from: &str| {
        net.run(
            &net.c,
            &[
                "ping", "-c", "2", "-i", "0.2", "-W", "1", "-I", from, SERVER_IP,
            ],
        )
    };
    let ok = Net::until(Duration::from_secs(10), || ping(CLIENT_IP).status.success());
    assert!(ok, "ping from the client's own address");
    let add = net.run(&net.c, &["ip", "addr", "add", "10.77.0.50/24", "dev", "c0"]);
    assert!(add.status.success(), "{add:?}");
    let spoofed = ping("10.77.0.50");
    assert!(
        !spoofed.status.success(),
        "ping from another address passed: {spoofed:?}"
    );
    let json = fw.ctl_ok(&net, &["stats", "--format", "json"]);
    let v: serde_json::Value = serde_json::from_str(&json).expect("stats JSON");
    let n = v["drops"]["port_security"].as_u64().unwrap_or(0);
    assert!(n >= 2, "{n} drops by port security: {json}");
    assert!(ping(CLIENT_IP).status.success(), "the own address after");
    // Another MAC on the client's interface: the switch drops it.
    let mac = net.run(
        &net.c,
        &["ip", "link", "set", "c0", "address", "02:77:00:00:00:42"],
    );
    assert!(mac.status.success(), "{mac:?}");
    assert!(!ping(CLIENT_IP).status.success(), "a made-up MAC passed");
    let json = fw.ctl_ok(&net, &["stats", "--format", "json"]);
    let v: serde_json::Value = serde_json::from_str(&json).expect("stats JSON");
    let n = v["switch"]["drops"]["port-security"].as_u64().unwrap_or(0);
    assert!(n >= 1, "{n} switch drops by port security: {json}");
}

/// `enabled = false` on the client's port, by a reload: its ping stops
/// (dropped by port security); a reload without it lets it through again.
#[test]
fn a_disabled_port_is_cut_off_until_enabled() {
    let Some((net, fw)) = setup("dp", "af-packet") else {
        return;
    };
    let ping = || {
        net.run(
            &net.c,
            &["ping", "-c", "2", "-i", "0.2", "-W", "1", SERVER_IP],
        )
    };
    let ok = Net::until(Duration::from_secs(10), || ping().status.success());
    assert!(ok, "ping before");
    let ours = format!("addresses = [\"{CLIENT_MAC} {CLIENT_IP}\"]");
    let off = policy(true, "").replacen(&ours, &format!("{ours}\nenabled = false"), 1);
    let file = net.file("off.toml", &off);
    fw.ctl_ok(&net, &["policy", "reload", &file.display().to_string()]);
    assert!(!ping().status.success(), "ping from a disabled port");
    let json = fw.ctl_ok(&net, &["stats", "--format", "json"]);
    let v: serde_json::Value = serde_json::from_str(&json).expect("stats JSON");
    assert!(
        v["drops"]["port_security"].as_u64().unwrap_or(0) >= 1,
        "{json}"
    );
    let on = net.file("on.toml", &policy(true, ""));
    fw.ctl_ok(&net, &["policy", "reload", &on.display().to_string()]);
    let ok = Net::until(Duration::from_secs(10), || ping().status.success());
    assert!(ok, "ping once enabled again");
}

#[test]
fn http_ping_and_reject_af_packet() {
    http_ping_reject("hp", "af-packet");
}

#[test]
fn http_ping_and_reject_af_packet_v2() {
    http_ping_reject("h2", "af-packet-v2");
}

#[test]
fn http_ping_and_reject_af_xdp() {
    http_ping_reject("hx", "af-xdp");
}

/// The client and the server keep their transmit offloads (as a veth has
/// them by default): their TCP segments reach ctrack up to 64 KiB long,
/// left for the device to cut, and their checksums left for it to finish.
/// ctrack (AF_PACKET, which the kernel tells) finishes the checksums,
/// judges each long segment once and sends it on whole, the cutting left
/// to the kernel: HTTP, a UDP exchange and iperf3 both ways pass; the
/// stacks, which check every checksum that reaches them, take what ctrack
/// forwards; the tracker finds nothing invalid; the ports count what they
/// finished, took in whole and sent on whole. An iperf3 stream through
/// SNAT both ways: the long segments leave whole, translated, their
/// checksums left to the kernel from the translated headers.
///
/// (AF_XDP is not told: through it, such frames are dropped or found
/// invalid, and docs/live.md says to turn the offloads off.)
#[test]
fn traffic_with_sender_offloads_af_packet() {
    sender_offloads("co", "af-packet");
}

/// [`traffic_with_sender_offloads_af_packet`] through V2 receive rings,
/// whose slots hold no frame of segmentation offload: each comes whole
/// through the socket instead.
#[test]
fn traffic_with_sender_offloads_af_packet_v2() {
    sender_offloads("c2", "af-packet-v2");
}

fn sender_offloads(tag: &str, io: &str) {
    let echo_acl = format!(
        r#"
[[acl]]
name = "udp-echo"
direction = "to-lport"
priority = 1000
match = "outport == \"server\" && udp.dst == 7007"
action = "allow-related"

[[acl]]
name = "iperf-snat"
direction = "to-lport"
priority = 1000
match = "outport == \"server\" && tcp.dst == 5202"
action = "allow-related"
nat = "src={SNAT_IP}"
"#
    );
    let Some((mut net, fw)) = setup_with(tag, io, true, &policy(true, &echo_acl)) else {
        return;
    };
    let s = net.s.clone();
    net.spawn(
        &s,
        "http",
        &["python3", "-m", "http.server", "80", "--bind", SERVER_IP],
    );
    net.spawn(&s, "iperf", &["iperf3", "-s", "-B", SERVER_IP]);
    net.spawn(
        &s,
        "iperf-snat",
        &["iperf3", "-s", "-B", SERVER_IP, "-p", "5202"],
    );
    // The server answers the SNAT address at the client's MAC.
    let o = net.run(
        &s,
        &[
            "ip", "neigh", "add", SNAT_IP, "lladdr", CLIENT_MAC, "dev", "s0",
        ],
    );
    assert!(o.status.success(), "{o:?}");
    // A UDP echo server: the answer goes back through ctrack too.
    let echo = format!(
        "import socket\ns=socket.socket(socket.AF_INET,socket.SOCK_DGRAM)\ns.bind(('{SERVER_IP}',7007))\nwhile True:\n d,a=s.recvfrom(2048)\n s.sendto(d,a)\n"
    );
    net.spawn(&s, "echo", &["python3", "-c", &echo]);
    let ok = Net::until(Duration::from_secs(10), || {
        curl(&net, 80, "2").0.status.success()
    });
    assert!(ok, "curl through ctrack with sender offloads failed");
    // Five datagrams, then one of 9,500 bytes sent with UDP_SEGMENT (103)
    // of 1,000: the kernel hands it over whole, ctrack sends it on whole,
    // the server's kernel cuts it in ten, and each comes back.
    let ask = format!(
        "import socket\ns=socket.socket(socket.AF_INET,socket.SOCK_DGRAM)\ns.settimeout(1)\nfor i in range(5):\n s.sendto(b'offloaded %d' % i,('{SERVER_IP}',7007))\n print(s.recvfrom(2048)[0].decode())\ns.setsockopt(17,103,1000)\ns.sendto(b'u'*9500,('{SERVER_IP}',7007))\nn=sum(len(s.recvfrom(2048)[0]) for i in range(10))\nprint('segmented', n)\n"
    );
    let o = net.run(&net.c, &["python3", "-c", &ask]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success() && out.contains("offloaded 4") && out.contains("segmented 9500"),
        "UDP echo through ctrack: {o:?}"
    );
    // 8 MB each way: the sender's long segments go through whole. (A
    // stream that stalls would keep iperf3 waiting: `timeout` ends it.)
    for (port, dir) in [
        ("5201", &[][..]),
        ("5201", &["-R"][..]),
        ("5202", &[][..]),
        ("5202", &["-R"][..]),
    ] {
        let mut argv = vec![
            "timeout",
            "15",
            "iperf3",
            "-c",
            SERVER_IP,
            "-p",
            port,
            "-n",
            "8M",
            "--connect-timeout",
            "3000",
        ];
        argv.extend_from_slice(dir);
        let ok = Net::until(Duration::from_secs(30), || {
            net.run(&net.c, &argv).status.success()
        });
        assert!(
            ok,
            "iperf3 {argv:?} through ctrack with sender offloads failed"
        );
    }
    let ports = fw.ctl_ok(&net, &["ports", "--format", "json"]);
    let v: serde_json::Value = serde_json::from_str(&ports).expect("ports JSON");
    for p in v.as_array().expect("ports") {
        let n = |k: &str| p[k].as_u64().unwrap_or(0);
        assert!(n("rx_csum_completed") > 0, "no checksum finished: {ports}");
        assert!(
            n("rx_gso_frames") > 0 && n("tx_gso_frames") > 0,
            "no frame of segmentation offload through whole: {ports}"
        );
        assert_eq!(n("rx_gso_segments"), 0, "cut, not sent whole: {ports}");
    }
    let stats = fw.ctl_ok(&net, &["stats", "--format", "json"]);
    let st: serde_json::Value = serde_json::from_str(&stats).expect("stats JSON");
    assert_eq!(
        (
            st["tracker"]["invalid"].as_u64(),
            st["drops"]["invalid"].as_u64()
        ),
        (Some(0), Some(0)),
        "the tracker found packets invalid: {stats}"
    );
    assert!(
        st["tracker"]["translated"].as_u64().unwrap_or(0) > 1000,
        "the SNAT stream was not translated: {stats}"
    );
}

/// AF_XDP is not told what its senders left to offload: their checksums
/// look wrong and the tracker finds the packets invalid. ctrack says so
/// once, with what to do, on standard error.
#[test]
fn af_xdp_says_what_sender_offloads_cost() {
    let Some((net, _fw)) = setup_with("cx", "af-xdp", true, &policy(false, "")) else {
        return;
    };
    // Twenty UDP datagrams whose checksums the client's stack left to its
    // veth.
    let send = format!(
        "import socket\ns=socket.socket(socket.AF_INET,socket.SOCK_DGRAM)\nfor i in range(20):\n s.sendto(b'unfinished',('{SERVER_IP}',7007))\n"
    );
    let o = net.run(&net.c, &["python3", "-c", &send]);
    assert!(o.status.success(), "{o:?}");
    let said = Net::until(Duration::from_secs(5), || {
        net.stderr("ctrack").contains("AF_XDP cannot tell")
    });
    assert!(said, "no hint: {}", net.stderr("ctrack"));
    let hint = net.stderr("ctrack");
    assert_eq!(hint.matches("AF_XDP cannot tell").count(), 1, "{hint}");
    assert!(hint.contains("--io af-packet"), "{hint}");
}

fn first_lines(text: &str, n: usize) -> String {
    text.lines().take(n).collect::<Vec<_>>().join("\n")
}

/// Bytes per one-second interval of an iperf3 client's text output.
fn intervals(text: &str) -> Vec<f64> {
    text.lines()
        .filter(|l| l.contains(" sec ") && !l.contains("sender") && !l.contains("receiver"))
        .filter_map(|l| {
            let after = l.split(" sec ").nth(1)?;
            let mut it = after.split_whitespace();
            let n: f64 = it.next()?.parse().ok()?;
            let scale = match it.next()? {
                "Bytes" => 1.0,
                "KBytes" => 1e3,
                "MBytes" => 1e6,
                "GBytes" => 1e9,
                _ => return None,
            };
            Some(n * scale)
        })
        .collect()
}

/// Starts an iperf3 server (`iperfd`) and a client (`iperf`) sending to
/// it for nine seconds at 50 Mbit/s, reporting every second, and waits
/// until ctrack lists the stream's connection as established.
fn iperf_stream(net: &mut Net, fw: &Fw) {
    let s = net.s.clone();
    let c = net.c.clone();
    net.spawn(&s, "iperfd", &["iperf3", "-s", "-B", SERVER_IP, "-1"]);
    std::thread::sleep(Duration::from_millis(500));
    net.spawn(
        &c,
        "iperf",
        &[
            "timeout",
            "20",
            "iperf3",
            "-c",
            SERVER_IP,
            "-t",
            "9",
            "-i",
            "1",
            "--forceflush",
            "-b",
            "50M",
        ],
    );
    let running = Net::until(Duration::from_secs(5), || {
        fw.ctl_ok(net, &["list", "--dport", "5201"])
            .contains("ESTABLISHED")
    });
    assert!(
        running,
        "iperf3's connection not listed: {}",
        net.stderr("iperf")
    );
}

/// An iperf3 stream keeps running through a reload that keeps it allowed
/// and stops at once after one that removes its rule; SIGHUP and `ctl
/// policy reload` both reload.
#[test]
fn iperf_through_reloads() {
    let Some((mut net, fw)) = setup("ip", "af-packet") else {
        return;
    };
    iperf_stream(&mut net, &fw);
    std::thread::sleep(Duration::from_millis(2500));
    // A reload that keeps the stream allowed (one ACL more), by SIGHUP.
    let keep = policy(
        true,
        r#"
[[acl]]
name = "ssh"
direction = "to-lport"
priority = 900
match = "outport == \"server\" && tcp.dst == 22"
action = "allow-related"
"#,
    );
    hup(&net, &keep, 1);
    std::thread::sleep(Duration::from_millis(2500));
    // A reload that removes the stream's rule, by the control socket.
    let cut = net.file("cut.toml", &policy(false, ""));
    iperf_cut_by(&mut net, &fw, &cut, "its rule was removed");
}

/// Writes `text` as the policy file and sends ctrack SIGHUP, then waits
/// until it has said `policy reloaded` `n` times in all.
fn hup(net: &Net, text: &str, n: usize) {
    net.file("policy.toml", text);
    net.signal("ctrack", "HUP");
    let reloaded = Net::until(Duration::from_secs(3), || {
        net.stderr("ctrack").matches("policy reloaded").count() == n
    });
    assert!(reloaded, "SIGHUP: {}", net.stderr("ctrack"));
}

/// Reloads the policy file `cut` through the control socket while the
/// iperf3 stream of [`iperf_stream`] runs, and checks that the stream had
/// carried bytes every second until then and carries none from the
/// second after (`why`: what the reload did to it).
fn iperf_cut_by(net: &mut Net, fw: &Fw, cut: &std::path::Path, why: &str) {
    let before = intervals(&net.stdout("iperf"));
    fw.ctl_ok(net, &["policy", "reload", &cut.display().to_string()]);
    let t_cut = before.len();
    let _ = net.wait("iperf", Duration::from_secs(20));
    let all = intervals(&net.stdout("iperf"));
    assert!(t_cut >= 4, "intervals before the cut: {before:?}");
    assert!(
        before.iter().all(|b| *b > 0.0),
        "the stream stalled before {why}: {before:?}"
    );
    // At most the interval the cut fell in carries bytes after it.
    let after: Vec<f64> = all.iter().skip(t_cut + 1).copied().collect();
    assert!(
        !after.is_empty() && after.iter().all(|b| *b == 0.0),
        "the stream went on after {why}: {all:?}"
    );
}

/// SIGTERM stops cleanly (status 0, counters printed, socket removed);
/// a second start on the same socket works.
#[test]
fn term_and_restart() {
    let Some((mut net, fw)) = setup("tm", "af-packet") else {
        return;
    };
    let p = net.run(&net.c, &["ping", "-c", "1", "-W", "2", SERVER_IP]);
    assert!(p.status.success(), "ping: {p:?}");
    net.signal("ctrack", "TERM");
    let st = net.wait("ctrack", Duration::from_secs(10));
    assert!(st.is_some_and(|s| s.success()), "exit: {st:?}");
    let out = net.stdout("ctrack");
    assert!(out.contains("packets: received"), "summary: {out}");
    assert!(
        !std::path::Path::new(&fw.sock).exists(),
        "the control socket is left behind"
    );
    let policy = net.dir.join("policy.toml").display().to_string();
    let fw2 = Fw::start(&mut net, "ctrack2", &policy, "af-packet");
    let p = net.run(&net.c, &["ping", "-c", "1", "-W", "2", SERVER_IP]);
    assert!(p.status.success(), "ping after restart: {p:?}");
    assert_eq!(fw2.ctl_ok(&net, &["count"]).trim(), "1");
}
