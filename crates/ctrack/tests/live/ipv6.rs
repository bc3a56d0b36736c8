//! IPv6 through `ctrack run`: HTTP and ping between the namespaces' IPv6
//! addresses, neighbour discovery passing ahead of every ACL (the policy
//! has none for it), and port security on the client's IPv6 address, which
//! drops what the client sends from another address it takes on.

use std::time::Duration;

use super::net::{CLIENT_MAC, Net, SERVER_MAC};
use super::{Fw, setup_with};

const CLIENT_IP6: &str = "fd77::1";
const SERVER_IP6: &str = "fd77::2";
/// An address the client takes on, outside its port security.
const SPOOFED_IP6: &str = "fd77::50";

/// Default drop; the client may open connections out over IPv6; the
/// server takes HTTP and echo requests. No ACL for neighbour discovery,
/// and none for IPv4 or ARP.
fn policy() -> String {
    format!(
        r#"
[default]
action = "drop"

[[port]]
name = "client"
addresses = ["{CLIENT_MAC} {CLIENT_IP6}"]
port_security = ["{CLIENT_MAC} {CLIENT_IP6}"]

[[port]]
name = "server"
addresses = ["{SERVER_MAC} {SERVER_IP6}"]

[[acl]]
name = "client-out"
direction = "from-lport"
priority = 1000
match = "inport == \"client\" && ip6"
action = "allow-related"

[[acl]]
name = "http6"
direction = "to-lport"
priority = 1000
match = "outport == \"server\" && ip6 && tcp.dst == 80"
action = "allow-related"

[[acl]]
name = "ping6"
direction = "to-lport"
priority = 1000
match = "outport == \"server\" && icmp6.type == 128"
action = "allow-related"
"#
    )
}

/// Adds `addr`/64 to `dev` in `ns`, without duplicate address detection
/// (it would hold the address back a second or more).
fn add6(net: &Net, ns: &str, dev: &str, addr: &str) {
    let a = format!("{addr}/64");
    let o = net.run(ns, &["ip", "-6", "addr", "add", &a, "dev", dev, "nodad"]);
    assert!(o.status.success(), "ip -6 addr add {a}: {o:?}");
}

/// `curl` to the server's IPv6 address from `from`.
fn curl6(net: &Net, from: &str) -> std::process::Output {
    net.run(
        &net.c,
        &[
            "curl",
            "-sS",
            "-o",
            "/dev/null",
            "--max-time",
            "3",
            "--interface",
            from,
            &format!("http://[{SERVER_IP6}]:80/"),
        ],
    )
}

fn drops(fw: &Fw, net: &Net, reason: &str) -> u64 {
    let json = fw.ctl_ok(net, &["stats", "--format", "json"]);
    let v: serde_json::Value = serde_json::from_str(&json).expect("stats JSON");
    v["drops"][reason].as_u64().unwrap_or(0)
}

#[test]
fn ipv6_http_and_ping_through_port_security() {
    let Some((mut net, fw)) = setup_with("v6", "af-packet", false, &policy()) else {
        return;
    };
    let (c, s) = (net.c.clone(), net.s.clone());
    add6(&net, &c, "c0", CLIENT_IP6);
    add6(&net, &s, "s0", SERVER_IP6);
    net.spawn(
        &s,
        "http",
        &["python3", "-m", "http.server", "80", "--bind", SERVER_IP6],
    );
    // Neighbour discovery first (it passes without an ACL), then the
    // connection, once the server listens.
    let ok = Net::until(Duration::from_secs(15), || {
        curl6(&net, CLIENT_IP6).status.success()
    });
    assert!(ok, "curl over IPv6: {}", net.stderr("http"));
    let ping = |from: &str| {
        net.run(
            &net.c,
            &[
                "ping", "-6", "-c", "2", "-i", "0.2", "-W", "1", "-I", from, SERVER_IP6,
            ],
        )
    };
    let p = ping(CLIENT_IP6);
    assert!(p.status.success(), "ping -6: {p:?}");
    let conns = fw.ctl_ok(&net, &["dump-conntrack"]);
    assert!(conns.contains(SERVER_IP6), "no IPv6 connection: {conns}");
    // From an address outside its port security: nothing passes, and
    // port security says so.
    let before = drops(&fw, &net, "port_security");
    add6(&net, &c, "c0", SPOOFED_IP6);
    let spoofed = curl6(&net, SPOOFED_IP6);
    assert!(
        !spoofed.status.success(),
        "curl from an address outside port security passed: {spoofed:?}"
    );
    assert!(!ping(SPOOFED_IP6).status.success(), "ping from it passed");
    let after = drops(&fw, &net, "port_security");
    assert!(
        after >= before + 3,
        "{before} -> {after} drops by port security"
    );
    // The client's own address still passes.
    assert!(curl6(&net, CLIENT_IP6).status.success(), "curl after");
}
