//! A port's link going down, coming back, changing its MTU and going
//! away under `ctrack run`: said on standard error and by `ctl ports`,
//! and costing nothing meanwhile; and what is said there lost, not fatal,
//! where standard error has closed. Until 2026-12-01 an AF_PACKET socket's `ENETDOWN`, never
//! read, made every poll return at once, and each worker spun on a whole
//! core from the moment a link went down, even after it came back.

use std::time::Duration;

use super::net::{self, Net, SERVER_IP};
use super::{CTRACK, Fw, policy, setup_with};

/// The CPU time, in clock ticks (a hundredth of a second on Linux), that
/// process `pid` has used so far: its user and system time from
/// /proc/PID/stat.
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("/proc/PID/stat");
    // The fields after the command's name (in parentheses, which may hold
    // spaces): state is the first, utime the 12th, stime the 13th.
    let rest = &stat[stat.rfind(')').expect("a command name") + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    f[11].parse::<u64>().expect("utime") + f[12].parse::<u64>().expect("stime")
}

/// The CPU ticks ctrack uses in two seconds with nothing to do: a few,
/// where a spinning worker uses 200 (a whole core). The bound is far from
/// both; this counts work done, not time taken.
fn idle_ticks(net: &Net) -> u64 {
    let pid = net.pid("ctrack");
    let before = cpu_ticks(pid);
    std::thread::sleep(Duration::from_secs(2));
    cpu_ticks(pid) - before
}

fn ping(net: &Net) -> bool {
    let o = net.run(&net.c, &["ping", "-c", "1", "-W", "1", SERVER_IP]);
    o.status.success()
}

/// The server port's `link` as `ctl ports --format json` says it.
fn link(net: &Net, fw: &Fw) -> String {
    let out = fw.ctl_ok(net, &["ports", "--format", "json"]);
    let v: serde_json::Value = serde_json::from_str(&out).expect("ports JSON");
    v[1]["link"].as_str().unwrap_or_default().to_string()
}

/// Runs `change` in namespace `ns` and waits until ctrack has said `line`
/// on standard error once more than before (a port may be said down at
/// the start, before its carrier is seen).
fn said_after(net: &Net, ns: &str, change: &[&str], line: &str) {
    let count = || net.stderr("ctrack").matches(line).count();
    let before = count();
    let o = net.run(ns, change);
    assert!(o.status.success(), "{change:?}: {o:?}");
    let ok = Net::until(Duration::from_secs(5), || count() > before);
    assert!(ok, "no new {line:?} in: {}", net.stderr("ctrack"));
}

fn down_up_gone(tag: &str, io: &str) {
    let Some((net, fw)) = setup_with(tag, io, false, &policy(false, "")) else {
        return;
    };
    assert!(ping(&net));
    assert_eq!(link(&net, &fw), "up");
    let set = |what: &[&str], line: &str| {
        let mut argv = vec!["ip", "link", "set", "s1"];
        argv.extend_from_slice(what);
        said_after(&net, &net.f, &argv, line);
    };
    // The carrier lost (the server's end set down), then the port's own
    // interface set down.
    let peer = |what: &str, line: &str| {
        said_after(&net, &net.s, &["ip", "link", "set", "s0", what], line);
    };
    peer("down", "ctrack: port server (s1): link down");
    assert_eq!(link(&net, &fw), "down");
    peer("up", "ctrack: port server (s1): link up");
    set(&["down"], "ctrack: port server (s1): link down");
    assert_eq!(link(&net, &fw), "down");
    assert!(!ping(&net));
    let down = idle_ticks(&net);
    set(&["up"], "ctrack: port server (s1): link up");
    let back = Net::until(Duration::from_secs(10), || ping(&net));
    assert!(back, "no ping after the link came back");
    let up = idle_ticks(&net);
    // An MTU changed is said, and what it means for frames.
    set(
        &["mtu", "9000"],
        "ctrack: port server (s1): MTU 1500 -> 9000, ctrack sized the port for 1500",
    );
    set(
        &["mtu", "1500"],
        "ctrack: port server (s1): MTU 9000 -> 1500, as at the start",
    );
    said_after(
        &net,
        &net.f,
        &["ip", "link", "del", "s1"],
        "ctrack: port server (s1): the interface is gone",
    );
    assert_eq!(link(&net, &fw), "gone");
    let gone = idle_ticks(&net);
    // An interface made again under the name is another (its index): the
    // port stays gone.
    let o = net.run(
        &net.f,
        &[
            "ip", "link", "add", "s1", "type", "veth", "peer", "name", "s1p",
        ],
    );
    assert!(o.status.success(), "{o:?}");
    for dev in ["s1", "s1p"] {
        net.run(&net.f, &["ip", "link", "set", dev, "up"]);
    }
    std::thread::sleep(Duration::from_millis(2500));
    assert_eq!(link(&net, &fw), "gone");
    // The control socket still answers, and the client's port still
    // takes frames in.
    let before = fw.ctl_ok(&net, &["ports", "--format", "json"]);
    let rx = |s: &str| {
        let v: serde_json::Value = serde_json::from_str(s).expect("JSON");
        v[0]["rx_packets"].as_u64().unwrap_or(0)
    };
    assert!(!ping(&net));
    let grew = Net::until(Duration::from_secs(3), || {
        rx(&fw.ctl_ok(&net, &["ports", "--format", "json"])) > rx(&before)
    });
    assert!(grew, "the client's port took nothing in");
    // Each change said once: the client's link, never changed, at most
    // once (up after the start, if its carrier came late); two MTUs.
    let err = net.stderr("ctrack");
    assert!(
        err.matches("port client (c1): link up").count() <= 1,
        "{err}"
    );
    assert_eq!(err.matches("port server (s1): MTU").count(), 2, "{err}");
    assert_eq!(err.matches("the interface is gone").count(), 1, "{err}");
    for (when, ticks) in [("down", down), ("up again", up), ("gone", gone)] {
        assert!(
            ticks < 60,
            "{io}: {ticks} CPU ticks in 2 s of idling with the link {when}"
        );
    }
}

/// With either AF_PACKET ring layout: the link down, said and free; up
/// again and forwarding; the interface removed, said, free, the rest of
/// ctrack going on.
#[test]
fn a_link_down_and_gone_costs_nothing() {
    down_up_gone("lk3", "af-packet");
    down_up_gone("lk2", "af-packet-v2");
}

/// The names of the threads of process `pid`.
fn threads(pid: u32) -> Vec<String> {
    let dir = std::fs::read_dir(format!("/proc/{pid}/task")).expect("/proc/PID/task");
    dir.filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .map(|c| c.trim().to_string())
        .collect()
}

/// `ctrack run` whose standard error is a pipe nobody reads any more (a
/// log pipe gone) keeps running whole through what it reports there: its
/// start, a link down and up (the housekeeping thread, which expires the
/// connections, says them), a SIGHUP (the main thread says it). Until
/// 2026-12-01 each of these writes panicked its thread (`eprintln!`):
/// the process died at its start.
#[test]
fn a_closed_standard_error_stops_nothing() {
    if let Some(why) = net::unusable() {
        net::skip(&why);
        return;
    }
    let mut net = Net::new("lke");
    let p = net.file("policy.toml", &policy(false, ""));
    let sock = net.dir.join("e.sock").display().to_string();
    let f = net.f.clone();
    let p = p.display().to_string();
    net.spawn_stderr_closed(
        &f,
        "ctrack",
        &[
            CTRACK,
            "run",
            "--policy",
            &p,
            "--port",
            "client=c1",
            "--port",
            "server=s1",
            "--ctl",
            &sock,
        ],
    );
    let fw = Fw { sock };
    let up = Net::until(Duration::from_secs(15), || {
        fw.ctl(&net, &["count"]).status.success()
    });
    assert!(up, "ctrack did not come up with its standard error closed");
    for (what, wait) in [("down", 1500), ("up", 1500)] {
        let o = net.run(&net.f, &["ip", "link", "set", "s1", what]);
        assert!(o.status.success());
        std::thread::sleep(Duration::from_millis(wait));
    }
    net.signal("ctrack", "HUP");
    std::thread::sleep(Duration::from_millis(500));
    let names = threads(net.pid("ctrack"));
    for t in ["ctrack", "ctrack-hk", "ctrack-w0", "ctrack-ctl"] {
        assert!(names.iter().any(|n| n == t), "no thread {t}: {names:?}");
    }
    fw.ctl_ok(&net, &["count"]);
    let back = Net::until(Duration::from_secs(10), || ping(&net));
    assert!(back, "no ping through ctrack");
}

/// A `ctrack run` started beside the test's, in the firewall's namespace,
/// with the test's policy, its control socket `NAME.sock` and `args`,
/// which must fail at its start: its standard error. (`timeout`: one that
/// runs is the test's failure, not its hang.)
fn refused_start(net: &Net, name: &str, args: &[&str]) -> String {
    let p = net.dir.join("policy.toml").display().to_string();
    let sock = net.dir.join(format!("{name}.sock")).display().to_string();
    let mut argv = vec![
        "timeout", "5", CTRACK, "run", "--policy", &p, "--ctl", &sock,
    ];
    argv.extend_from_slice(args);
    let o = net.run(&net.f, &argv);
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(o.status.code(), Some(1), "{name}: {err}");
    assert!(!err.contains("panicked"), "{name}: {err}");
    err
}

/// A second `ctrack run` on interfaces one already serves is refused at
/// its start, in words that name the first, whichever sockets either uses,
/// and so is one run given an interface twice under two of its names; the
/// first goes on alone, every ping answered once. Until 2026-12-01
/// the second ran: each took in a copy of every frame and sent it on, and
/// every ping came back three times more ("DUP!").
#[test]
fn a_second_datapath_on_the_interfaces_is_refused() {
    let Some((net, _fw)) = setup_with("lk2nd", "af-packet", false, &policy(false, "")) else {
        return;
    };
    let first = net.pid("ctrack");
    for io in ["af-packet", "af-xdp"] {
        let ports = ["--port", "server=s1", "--port", "client=c1"];
        let mut args = ports.to_vec();
        args.extend(["--io", io, "--workers", "1"]);
        let err = refused_start(&net, &format!("second-{io}"), &args);
        let want = format!("interface s1 is already served by process {first} (ctrack)");
        assert!(err.contains(&want), "{io}: {err}");
    }
    // One interface under two names (an alternative name) for two ports
    // of one run is refused as such, not as another process's.
    let o = net.run(
        &net.f,
        &[
            "ip", "link", "property", "add", "dev", "c1", "altname", "c1alt",
        ],
    );
    assert!(o.status.success(), "{o:?}");
    let args = ["--port", "client=c1", "--port", "server=c1alt"];
    let err = refused_start(&net, "alt", &args);
    assert!(
        err.contains("--port server=c1alt: c1alt is interface c1 (index ")
            && err.contains("under another name, given for port client before"),
        "{err}"
    );
    let o = net.run(
        &net.c,
        &["ping", "-c", "3", "-i", "0.2", "-W", "2", SERVER_IP],
    );
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{out}");
    assert!(!out.contains("DUP!"), "{out}");
}
