//! The control server's event stream, its socket's life, its limits on
//! clients, and the metrics endpoint.

mod common;

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use common::{CLIENT, Env, SERVER, an_entry, collect, http, raw, tmp_dir};
use ctrack_core::{EventKind, EventSink};
use ctrack_datapath::ctl::client::{Client, StreamItem, request};
use ctrack_datapath::ctl::{self, EventHub};
use ctrack_datapath::metrics;
use ctrack_policy::firewall::FwOutputs;
use ctrack_wire::build::{Frame, L4};

#[test]
fn events_stream_as_conntrack_e_lines_and_json() {
    let mut env = Env::new();
    let e = an_entry(&mut env);
    let ev = e.clone();
    let items = collect(
        &env,
        &["events"],
        move |s| {
            s.events.event(EventKind::New, &ev);
            s.events.event(EventKind::Destroy, &ev);
        },
        |i| i.len() >= 2,
    );
    let text: Vec<String> = items
        .iter()
        .map(|i| match i {
            StreamItem::Event(serde_json::Value::String(s)) => s.clone(),
            other => panic!("{other:?}"),
        })
        .collect();
    assert!(text[0].starts_with("    [NEW] udp      17 "), "{}", text[0]);
    assert!(
        text[0].contains("sport=7000 dport=53 [UNREPLIED] src=10.0.0.2"),
        "{}",
        text[0]
    );
    assert!(
        text[1].starts_with("[DESTROY] udp      17 src=10.0.0.1 "),
        "{}",
        text[1]
    );
    let ev = e.clone();
    let items = collect(
        &env,
        &["events", "--format", "json"],
        move |s| {
            s.events.event(EventKind::Update, &ev);
        },
        |i| !i.is_empty(),
    );
    match &items[0] {
        StreamItem::Event(v) => {
            assert_eq!(v["type"], "UPDATE");
            assert_eq!(v["entry"]["orig"]["sport"], 7000);
        }
        other => panic!("{other:?}"),
    }
    // The subscriber is gone once its client is.
    let t0 = Instant::now();
    while env.shared.events.active() && t0.elapsed() < Duration::from_secs(2) {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(!env.shared.events.active());
    assert!(
        env.fails(&["events", "--format", "xml"])
            .contains("unknown format")
    );
}

#[test]
fn a_slow_subscriber_loses_events_and_is_told_how_many() {
    let mut env = Env::with_hub(EventHub::new(4));
    let e = an_entry(&mut env);
    const N: u64 = 20_000;
    let mut seen = 0;
    let mut dropped = 0;
    let items = collect(
        &env,
        &["events"],
        move |s| {
            for _ in 0..N {
                s.events.event(EventKind::Update, &e);
            }
        },
        |items| {
            let (ev, dr) = items.iter().fold((0, 0), |(a, b), i| match i {
                StreamItem::Event(_) => (a + 1, b),
                StreamItem::Dropped(n) => (a, b + n),
            });
            (seen, dropped) = (ev, dr);
            ev + dr >= N
        },
    );
    assert!(!items.is_empty());
    assert_eq!(seen + dropped, N, "every event delivered or reported lost");
    assert!(dropped > 0, "a queue of 4 cannot take {N} at once");
    assert_eq!(env.shared.events.dropped(), dropped);
    let st: serde_json::Value =
        serde_json::from_str(&env.ok(&["stats", "--format", "json"])).unwrap();
    assert_eq!(st["events"]["dropped"], dropped);
}

/// End to end: the tracker reports NEW for a committed connection, and a
/// subscriber gets it through the socket.
#[test]
fn a_new_connection_is_reported_new() {
    let env = Env::new();
    let items = collect(
        &env,
        &["events"],
        |s| {
            let mut f = Frame::v4(CLIENT.1, SERVER.1, L4::udp(9999, 53, b"q"));
            f.eth_src = CLIENT.0;
            f.eth_dst = SERVER.0;
            let mut outs = FwOutputs::default();
            s.fw.process(f.build(), 0, s.now(), &mut outs);
        },
        |i| !i.is_empty(),
    );
    match items.first() {
        Some(StreamItem::Event(serde_json::Value::String(s))) => {
            assert!(s.starts_with("    [NEW] udp      17 "), "{s}");
            assert!(s.contains("sport=9999 dport=53"), "{s}");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn at_most_64_clients_at_once() {
    let env = Env::new();
    let held: Vec<Client> = (0..64)
        .map(|_| Client::connect(&env.sock).unwrap())
        .collect();
    // Let the server accept them all.
    let t0 = Instant::now();
    loop {
        let line = raw(&env.sock, b"{\"argv\":[\"count\"]}\n");
        if line.contains("too many") {
            break;
        }
        assert!(t0.elapsed() < Duration::from_secs(5), "{line}");
        std::thread::sleep(Duration::from_millis(20));
    }
    drop(held);
    let t0 = Instant::now();
    while request(&env.sock, &["count"]).is_err() {
        assert!(t0.elapsed() < Duration::from_secs(5));
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn the_socket_is_private_unique_and_removed_at_stop() {
    let mut env = Env::new();
    let mode = std::fs::metadata(&env.sock).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    let e = ctl::serve(env.shared.clone(), &env.sock, None).unwrap_err();
    assert_eq!(
        e.to_string(),
        format!("another ctrack is running on {}", env.sock.display())
    );
    let e = ctl::serve(env.shared.clone(), &env.dir.join("policy.toml"), None).unwrap_err();
    assert!(e.to_string().contains("not a socket"), "{e}");
    assert!(
        ctl::serve(
            env.shared.clone(),
            &env.dir.join("x.sock"),
            Some("no-such-group-ctrack")
        )
        .is_err()
    );
    assert!(!env.dir.join("x.sock").exists());
    // A path longer than a socket's address holds: said as such, and no
    // directory made for it (until 2026-12-01 the directory was made,
    // then `bind` said ENAMETOOLONG).
    let deep = env.dir.join("d".repeat(120));
    let e = ctl::serve(env.shared.clone(), &deep.join("c.sock"), None).unwrap_err();
    assert!(
        e.to_string()
            .contains("and a Unix socket's holds at most 107"),
        "{e}"
    );
    assert!(!deep.exists());
    // With a group: 0660, owned by it (root's group 0 exists everywhere).
    let grouped = env.dir.join("g.sock");
    let g = ctl::serve(env.shared.clone(), &grouped, Some("root")).unwrap();
    let m = std::fs::metadata(&grouped).unwrap();
    assert_eq!((m.permissions().mode() & 0o777, m.gid()), (0o660, 0));
    // An event stream ends with the server.
    let c = Client::connect(&env.sock).unwrap();
    let streaming = std::thread::spawn(move || c.stream(&["events"], |_| true));
    let t0 = Instant::now();
    while !env.shared.events.active() {
        assert!(t0.elapsed() < Duration::from_secs(5));
        std::thread::sleep(Duration::from_millis(5));
    }
    let t0 = Instant::now();
    env.stop();
    assert!(t0.elapsed() < Duration::from_secs(1), "{:?}", t0.elapsed());
    assert!(streaming.join().unwrap().is_ok());
    g.join().unwrap();
    assert!(!grouped.exists());
    assert!(!env.sock.exists());
    let e = request(&env.sock, &["count"]).unwrap_err().to_string();
    assert_eq!(
        e,
        format!(
            "cannot reach ctrack at {}: no such file (is `ctrack run` running?)",
            env.sock.display()
        )
    );
}

#[test]
fn a_stale_socket_is_replaced() {
    let dir = tmp_dir();
    let path = dir.join("stale.sock");
    drop(std::os::unix::net::UnixListener::bind(&path).unwrap());
    assert!(path.exists());
    let env = Env::new();
    let h = ctl::serve(env.shared.clone(), &path, None).unwrap();
    assert_eq!(request(&path, &["count"]).unwrap(), "0");
    env.shared.stop.store(true, Ordering::Relaxed);
    h.join().unwrap();
    assert!(!path.exists());
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn metrics_endpoint_serves_prometheus_text() {
    let mut env = Env::new();
    env.populate();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let h = metrics::serve(env.shared.clone(), port).unwrap();
    // A second on the same address fails, naming it once: `ctrack run`
    // says this error as it is (until 2026-12-01 it named the address a
    // second time in front of it).
    let e = metrics::serve(env.shared.clone(), port)
        .unwrap_err()
        .to_string();
    assert_eq!(e.matches(&format!("metrics on {port}: ")).count(), 1, "{e}");
    let r = http(port, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
    assert!(r.starts_with("HTTP/1.1 200 OK\r\n"), "{r}");
    for want in [
        "ctrack_connections 3",
        "ctrack_zone_connections{zone=\"5\"} 2",
        "ctrack_packets_total{verdict=\"allow\"} 7",
        "ctrack_drops_total{source=\"switch\",reason=\"port-security\"} 0",
        "ctrack_acl_conns_total{acl=\"web\",direction=\"to-lport\",priority=\"1000\"} 2",
        "ctrack_port_rx_packets_total{port=\"client\",interface=\"veth0\"} 1",
        "ctrack_events_dropped_total 0",
        "ctrack_policy_generation 1",
        "ctrack_uptime_seconds ",
        "ctrack_conntrack_committed_total 3",
        "ctrack_conntrack_invalid_by_reason_total{reason=",
    ] {
        assert!(r.contains(want), "{want:?} in\n{r}");
    }
    assert!(http(port, b"GET / HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 404"));
    assert!(http(port, b"POST /metrics HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 405"));
    let big = [b"GET /metrics HTTP/1.1\r\nX: ".as_slice(), &[b'a'; 9000]].concat();
    assert!(http(port, &big).starts_with("HTTP/1.1 431"));
    // A silent client is let go; the next is served.
    let silent = std::net::TcpStream::connect(port).unwrap();
    assert!(http(port, b"GET /metrics HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 200"));
    drop(silent);
    env.shared.stop.store(true, Ordering::Relaxed);
    h.join().unwrap();
}

/// Every counter that `stats` reports and the metrics expose reads the
/// same in both, each set to a value of its own (so that two swapped
/// counters show); a control command's flush is counted in both.
#[test]
fn every_counter_reads_the_same_in_stats_and_metrics() {
    use ctrack_datapath::live::{Part, SwitchDrop};
    use ctrack_policy::firewall::{DropReason, Stage};
    let mut env = Env::new();
    env.populate();
    assert_eq!(env.ok(&["flush", "zone=7"]), "");
    {
        let mut w = env.shared.workers[0].lock().unwrap();
        let mut n = 1000u64;
        let mut next = || {
            n += 1;
            n
        };
        for v in w.fw.verdicts.iter_mut() {
            *v = next();
        }
        for v in w.fw.stages.iter_mut() {
            *v = next();
        }
        for v in w.fw.drops.iter_mut() {
            *v = next();
        }
        w.fw.rejects_sent = next();
        w.fw.rejects_suppressed = next();
        w.fw.rejudged = next();
        w.fw.new_by_word = next();
        w.fw.cross_pair = next();
        w.switch.forwarded = next();
        w.switch.flooded = next();
        w.switch.replies = next();
        w.switch.learned = next();
        for v in w.switch.drops.iter_mut() {
            *v = next();
        }
        for p in w.ports.iter_mut() {
            p.rx_packets = next();
            p.rx_bytes = next();
            p.rx_dropped = next();
            p.tx_packets = next();
            p.tx_bytes = next();
            p.tx_errors = next();
            p.rx_csum_completed = next();
            p.rx_gso_frames = next();
            p.rx_gso_segments = next();
            p.tx_gso_frames = next();
        }
        w.bursts = next();
        for v in w.cost.ns.iter_mut() {
            *v = next();
        }
        w.cost.total_ns = 1_000_000;
        w.cost.packets = next();
        w.cost.rounds = next();
        w.acl_log.lines = next();
        w.acl_log.suppressed = next();
        w.acl_log.dropped = next();
    }
    let stats: serde_json::Value =
        serde_json::from_str(&env.ok(&["stats", "--format", "json"])).unwrap();
    let text = metrics::render(&env.shared);
    // Each help line ends with one full stop (the encoder's own).
    for l in text.lines().filter(|l| l.starts_with("# HELP")) {
        assert!(l.ends_with('.') && !l.ends_with(".."), "{l}");
    }
    let metric = |name: &str| -> u64 {
        let line = text
            .lines()
            .find(|l| l.split_once(' ').is_some_and(|(k, _)| k == name))
            .unwrap_or_else(|| panic!("no {name} in\n{text}"));
        line.rsplit(' ').next().unwrap().parse().unwrap()
    };
    let json = |path: &[&str]| -> u64 {
        let mut v = &stats;
        for k in path {
            v = &v[*k];
        }
        v.as_u64().unwrap_or_else(|| panic!("{path:?} in stats"))
    };
    let mut pairs: Vec<(String, Vec<String>)> = Vec::new();
    let mut pair =
        |m: String, j: &[&str]| pairs.push((m, j.iter().map(|s| s.to_string()).collect()));
    for v in ["allow", "drop", "reject"] {
        pair(
            format!("ctrack_packets_total{{verdict=\"{v}\"}}"),
            &["verdicts", v],
        );
    }
    for st in Stage::ALL {
        let s = st.name();
        pair(
            format!("ctrack_stage_packets_total{{stage=\"{s}\"}}"),
            &["stages", s],
        );
    }
    for r in DropReason::ALL {
        let r = r.name();
        pair(
            format!("ctrack_drops_total{{source=\"firewall\",reason=\"{r}\"}}"),
            &["drops", r],
        );
    }
    for r in SwitchDrop::ALL {
        let r = r.name();
        pair(
            format!("ctrack_drops_total{{source=\"switch\",reason=\"{r}\"}}"),
            &["switch", "drops", r],
        );
    }
    for o in ["sent", "suppressed"] {
        pair(
            format!("ctrack_rejects_total{{outcome=\"{o}\"}}"),
            &["rejects", o],
        );
    }
    for k in ["rejudged", "new_by_word", "cross_pair", "bursts"] {
        let m = if k == "bursts" { "worker_bursts" } else { k };
        pair(format!("ctrack_{m}_total"), &[k]);
    }
    for k in ["forwarded", "flooded", "replies", "learned"] {
        pair(format!("ctrack_switch_{k}_total"), &["switch", k]);
    }
    for (o, k) in [
        ("written", "lines"),
        ("suppressed", "suppressed"),
        ("dropped", "dropped"),
    ] {
        pair(
            format!("ctrack_acl_log_lines_total{{outcome=\"{o}\"}}"),
            &["acl_log", k],
        );
    }
    for p in Part::ALL {
        let p = p.name();
        pair(
            format!("ctrack_worker_nanoseconds_total{{part=\"{p}\"}}"),
            &["cost", "ns", p],
        );
    }
    pair("ctrack_worker_packets_total".into(), &["cost", "packets"]);
    pair(
        "ctrack_worker_busy_rounds_total".into(),
        &["cost", "rounds"],
    );
    pair("ctrack_connections".into(), &["connections", "total"]);
    pair("ctrack_connections_max".into(), &["connections", "max"]);
    pair(
        "ctrack_expectations".into(),
        &["connections", "expectations"],
    );
    pair("ctrack_events_offered_total".into(), &["events", "offered"]);
    pair("ctrack_events_dropped_total".into(), &["events", "dropped"]);
    pair(
        "ctrack_event_subscribers".into(),
        &["events", "subscribers"],
    );
    for k in ["committed", "flushed", "packets", "established", "invalid"] {
        pair(format!("ctrack_conntrack_{k}_total"), &["tracker", k]);
    }
    for k in ["held", "accepted", "completed", "evicted"] {
        let m = if k == "held" {
            "ctrack_fragments_held".to_owned()
        } else {
            format!("ctrack_fragments_{k}_total")
        };
        pair(m, &["fragments", k]);
    }
    let ports = stats["ports"].as_array().expect("ports").clone();
    assert_eq!(ports.len(), 2);
    for (i, (name, ifname)) in [("client", "veth0"), ("server", "veth1")]
        .into_iter()
        .enumerate()
    {
        assert_eq!(ports[i]["name"], name, "{:?}", ports[i]);
        for (m, k) in [
            ("rx_packets", "rx_packets"),
            ("rx_bytes", "rx_bytes"),
            ("rx_dropped", "rx_dropped"),
            ("tx_packets", "tx_packets"),
            ("tx_bytes", "tx_bytes"),
            ("tx_errors", "tx_errors"),
            ("rx_checksums_completed", "rx_csum_completed"),
            ("rx_gso_frames", "rx_gso_frames"),
            ("rx_gso_segments", "rx_gso_segments"),
            ("tx_gso_frames", "tx_gso_frames"),
        ] {
            let want = ports[i][k]
                .as_u64()
                .unwrap_or_else(|| panic!("{k} of {name}"));
            let got = metric(&format!(
                "ctrack_port_{m}_total{{port=\"{name}\",interface=\"{ifname}\"}}"
            ));
            assert_eq!(got, want, "port {name} {m}");
        }
    }
    for (m, j) in &pairs {
        let j: Vec<&str> = j.iter().map(String::as_str).collect();
        assert_eq!(metric(m), json(&j), "{m} against {j:?}");
    }
    // Distinct values, so that a swap shows.
    let mut seen: Vec<u64> = pairs
        .iter()
        .filter(|(m, _)| m.contains("_total{") && !m.contains("conntrack"))
        .map(|(m, _)| metric(m))
        .collect();
    let all = seen.len();
    seen.sort_unstable();
    seen.dedup();
    assert_eq!(seen.len(), all);
    // The control command's flush of zone 7's connection is counted.
    assert_eq!(metric("ctrack_conntrack_flushed_total"), 1);
}
