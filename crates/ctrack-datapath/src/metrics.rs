//! The Prometheus endpoint: `GET /metrics` over HTTP/1.1.
//!
//! The exposition is built at each scrape from the workers' published
//! counters: a fresh `prometheus-client` registry is filled with their
//! values and encoded (OpenMetrics text, which Prometheus reads; served
//! with its content type). The HTTP side is ours, on a standard
//! `TcpListener`: one request per connection, answered in turn by one
//! thread, with a request over 8 KiB refused and a client given 2 s to
//! send it. Everything is named `ctrack_*`.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use ctrack_core::{InvalidReason, Zone};
use ctrack_policy::firewall::{DropReason, Stage};
use ctrack_policy::model::Direction;
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use crate::live::{CostStats, Part, Shared, SwitchDrop};

/// The largest request accepted, headers included.
pub const MAX_REQUEST: usize = 8 * 1024;
/// How long a client has to send its request.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(2);
/// How often the accept loop looks at `shared.stop`.
const POLL: Duration = Duration::from_millis(50);

type Labels = Vec<(String, String)>;

fn labels(kv: &[(&str, String)]) -> Labels {
    kv.iter()
        .map(|(k, v)| ((*k).to_owned(), v.clone()))
        .collect()
}

/// `help` without its closing full stop: the encoder ends every `# HELP`
/// line with one of its own (until 2026-12-01 each read `..`).
fn help(h: &str) -> &str {
    h.strip_suffix('.').unwrap_or(h)
}

fn counter(reg: &mut Registry, name: &str, h: &str, v: u64) {
    let c: Counter = Counter::default();
    c.inc_by(v);
    reg.register(name, help(h), c);
}

fn gauge(reg: &mut Registry, name: &str, h: &str, v: u64) {
    let g: Gauge = Gauge::default();
    g.set(i64::try_from(v).unwrap_or(i64::MAX));
    reg.register(name, help(h), g);
}

fn counters(reg: &mut Registry, name: &str, h: &str, rows: Vec<(Labels, u64)>) {
    let f: Family<Labels, Counter> = Family::default();
    for (l, v) in rows {
        f.get_or_create(&l).inc_by(v);
    }
    reg.register(name, help(h), f);
}

fn gauges(reg: &mut Registry, name: &str, h: &str, rows: Vec<(Labels, u64)>) {
    let f: Family<Labels, Gauge> = Family::default();
    for (l, v) in rows {
        f.get_or_create(&l)
            .set(i64::try_from(v).unwrap_or(i64::MAX));
    }
    reg.register(name, help(h), f);
}

/// The zones whose connections are counted: 0 and the policy's ports'.
fn zones(shared: &Shared) -> Vec<Zone> {
    let mut z: Vec<Zone> = shared
        .fw
        .policy()
        .policy
        .ports
        .iter()
        .map(|p| p.zone)
        .collect();
    z.push(0);
    z.sort_unstable();
    z.dedup();
    z
}

fn connections(reg: &mut Registry, shared: &Shared) {
    let t = shared.fw.tracker();
    gauge(
        reg,
        "connections",
        "Connections in the table.",
        t.table_len() as u64,
    );
    gauge(
        reg,
        "connections_max",
        "The table's connection limit.",
        t.max_conns() as u64,
    );
    let rows = zones(shared)
        .into_iter()
        .map(|z| (labels(&[("zone", z.to_string())]), t.zone_len(z) as u64))
        .collect();
    gauges(reg, "zone_connections", "Connections per zone.", rows);
    gauge(
        reg,
        "expectations",
        "Expectations waiting.",
        t.expectation_count() as u64,
    );
}

fn firewall(reg: &mut Registry, shared: &Shared, s: &crate::live::WorkerStats) {
    let fw = &s.fw;
    let verdicts = ["allow", "drop", "reject"]
        .iter()
        .zip(fw.verdicts)
        .map(|(v, n)| (labels(&[("verdict", (*v).to_owned())]), n))
        .collect();
    counters(reg, "packets", "Packets by final verdict.", verdicts);
    let stages = Stage::ALL
        .iter()
        .zip(fw.stages)
        .map(|(st, n)| (labels(&[("stage", st.name().to_owned())]), n))
        .collect();
    counters(reg, "stage_packets", "Packets by deciding stage.", stages);
    let mut drops: Vec<(Labels, u64)> = DropReason::ALL
        .iter()
        .zip(fw.drops)
        .map(|(r, n)| {
            (
                labels(&[("source", "firewall".into()), ("reason", r.name().into())]),
                n,
            )
        })
        .collect();
    drops.extend(SwitchDrop::ALL.iter().zip(s.switch.drops).map(|(r, n)| {
        (
            labels(&[("source", "switch".into()), ("reason", r.name().into())]),
            n,
        )
    }));
    counters(reg, "drops", "Packets dropped, by reason.", drops);
    answers_and_judgings(reg, fw);
    let c = shared.fw.policy();
    gauge(
        reg,
        "policy_generation",
        "The policy generation in force.",
        u64::from(c.generation),
    );
    let current = fw.generation == c.generation;
    let mut rows: [Vec<(Labels, u64)>; 3] = Default::default();
    for a in &c.policy.acls {
        let k = if current {
            fw.acls.get(a.index).copied().unwrap_or_default()
        } else {
            Default::default()
        };
        let l = labels(&[
            ("acl", a.name.clone()),
            ("direction", a.direction.name().into()),
            ("priority", a.priority.to_string()),
        ]);
        rows[0].push((l.clone(), k.packets));
        rows[1].push((l.clone(), k.bytes));
        rows[2].push((l, k.conns));
    }
    for d in [Direction::FromLport, Direction::ToLport] {
        let k = if current {
            fw.defaults[d as usize]
        } else {
            Default::default()
        };
        let l = labels(&[
            ("acl", "default".into()),
            ("direction", d.name().into()),
            ("priority", "0".into()),
        ]);
        rows[0].push((l.clone(), k.packets));
        rows[1].push((l.clone(), k.bytes));
        rows[2].push((l, k.conns));
    }
    let [p, b, n] = rows;
    counters(
        reg,
        "acl_packets",
        "Packets an ACL decided (current policy generation).",
        p,
    );
    counters(reg, "acl_bytes", "Bytes of the packets an ACL decided.", b);
    counters(reg, "acl_conns", "Connections an ACL allowed.", n);
    // The tracker's counters, one metric each (their field names).
    if let Ok(serde_json::Value::Object(m)) = serde_json::to_value(fw.tracker) {
        for (k, v) in m {
            if let Some(n) = v.as_u64() {
                counter(
                    reg,
                    &format!("conntrack_{k}"),
                    &format!("The tracker's {k} counter."),
                    n,
                );
            }
        }
    }
    let invalid = InvalidReason::ALL
        .iter()
        .map(|r| {
            let n = fw.tracker.invalid_count(*r);
            (labels(&[("reason", r.name().to_owned())]), n)
        })
        .collect();
    counters(
        reg,
        "conntrack_invalid_by_reason",
        "Packets the tracker found invalid, by reason.",
        invalid,
    );
}

fn ports(reg: &mut Registry, shared: &Shared, s: &crate::live::WorkerStats) {
    let mut rows: [Vec<(Labels, u64)>; 10] = Default::default();
    for (i, p) in shared.ports.iter().enumerate() {
        let c = s.ports.get(i).copied().unwrap_or_default();
        let l = labels(&[("port", p.name.clone()), ("interface", p.ifname.clone())]);
        let vals = [
            c.rx_packets,
            c.rx_bytes,
            c.rx_dropped,
            c.tx_packets,
            c.tx_bytes,
            c.tx_errors,
            c.rx_csum_completed,
            c.rx_gso_frames,
            c.rx_gso_segments,
            c.tx_gso_frames,
        ];
        for (r, v) in rows.iter_mut().zip(vals) {
            r.push((l.clone(), v));
        }
    }
    let names = [
        ("port_rx_packets", "Frames received."),
        ("port_rx_bytes", "Bytes received."),
        ("port_rx_dropped", "Frames the kernel dropped (ring full)."),
        ("port_tx_packets", "Frames sent."),
        ("port_tx_bytes", "Bytes sent."),
        ("port_tx_errors", "Frames that could not be sent."),
        (
            "port_rx_checksums_completed",
            "Frames received with the transport checksum left to offload, finished by ctrack.",
        ),
        (
            "port_rx_gso_frames",
            "Frames received whole from a sender with segmentation offload.",
        ),
        (
            "port_rx_gso_segments",
            "Segments ctrack cut those frames into where they could not leave whole.",
        ),
        (
            "port_tx_gso_frames",
            "Frames sent whole with their segmentation left to the kernel.",
        ),
    ];
    for ((name, help), r) in names.into_iter().zip(rows) {
        counters(reg, name, help, r);
    }
    let up = (shared.ports.iter().enumerate())
        .map(|(i, p)| {
            let l = labels(&[("port", p.name.clone()), ("interface", p.ifname.clone())]);
            (l, u64::from(shared.link(i) == crate::io::LinkState::Up))
        })
        .collect();
    gauges(
        reg,
        "port_link_up",
        "1 while the port's interface is up and running; 0 while it is down or gone (removed, or made again: restart ctrack run).",
        up,
    );
}

/// The reject answers, and the connections and packets the firewall
/// judged otherwise than by the first packet's ACLs.
fn answers_and_judgings(reg: &mut Registry, fw: &ctrack_policy::firewall::FwStats) {
    let rejects = [
        ("sent", fw.rejects_sent),
        ("suppressed", fw.rejects_suppressed),
    ]
    .iter()
    .map(|(o, n)| (labels(&[("outcome", (*o).to_owned())]), *n))
    .collect();
    counters(
        reg,
        "rejects",
        "Reject answers: sent, or suppressed (the rate limit, or a packet that may not be answered).",
        rejects,
    );
    counter(
        reg,
        "rejudged",
        "Connections judged again after a policy change.",
        fw.rejudged,
    );
    counter(
        reg,
        "new_by_word",
        "+new packets of committed connections decided by the connection's verdict word, without the classifier.",
        fw.new_by_word,
    );
    counter(
        reg,
        "cross_pair",
        "Packets of a connection between other ports than its own, judged by the ACLs.",
        fw.cross_pair,
    );
}

/// The switch's counters, the learned addresses held, and the
/// reassembler's counters.
fn switch(reg: &mut Registry, shared: &Shared, s: &crate::live::WorkerStats) {
    let sw = &s.switch;
    counter(
        reg,
        "switch_forwarded",
        "Frames sent to one known port.",
        sw.forwarded,
    );
    counter(
        reg,
        "switch_flooded",
        "Frames flooded (broadcast, multicast, unknown unicast).",
        sw.flooded,
    );
    counter(
        reg,
        "switch_replies",
        "Reject answers sent back where the rejected packet came from.",
        sw.replies,
    );
    counter(
        reg,
        "switch_learned",
        "Addresses learned (or moved).",
        sw.learned,
    );
    gauge(
        reg,
        "switch_addresses",
        "Learned addresses held.",
        shared.macs.len() as u64,
    );
    counter(
        reg,
        "worker_bursts",
        "Bursts run (one per port that had frames in a round).",
        s.bursts,
    );
    // The reassembler's counters, one metric each (their field names);
    // the fragments held now are a gauge.
    if let Ok(serde_json::Value::Object(m)) = serde_json::to_value(shared.fw.reassembler().stats())
    {
        for (k, v) in m {
            let Some(n) = v.as_u64() else { continue };
            let name = format!("fragments_{k}");
            if k == "held" {
                gauge(reg, &name, "Fragments held now.", n);
            } else {
                counter(reg, &name, &format!("The reassembler's {k} counter."), n);
            }
        }
    }
}

/// The workers' time by part (see `live::cost`), summed over workers.
fn cost(reg: &mut Registry, c: &CostStats) {
    let rows = Part::ALL
        .iter()
        .map(|&p| (p.name(), c.get(p)))
        .chain([("other", c.other_ns())])
        .map(|(name, v)| (labels(&[("part", name.to_owned())]), v))
        .collect();
    counters(
        reg,
        "worker_nanoseconds",
        "Workers' wall time by part: recv, switch, firewall, send, idle, other (ns).",
        rows,
    );
    counter(
        reg,
        "worker_wall_nanoseconds",
        "Workers' wall time since they started, summed (ns).",
        c.total_ns,
    );
    counter(
        reg,
        "worker_packets",
        "Frames the workers received (the per-packet cost's denominator).",
        c.packets,
    );
    counter(
        reg,
        "worker_busy_rounds",
        "Worker rounds that received at least one frame.",
        c.rounds,
    );
}

/// The ACL log's counters.
fn acl_log(reg: &mut Registry, s: &crate::acllog::AclLogStats) {
    let rows = [
        ("written", s.lines),
        ("suppressed", s.suppressed),
        ("dropped", s.dropped),
    ]
    .iter()
    .map(|(o, n)| (labels(&[("outcome", (*o).to_owned())]), *n))
    .collect();
    counters(
        reg,
        "acl_log_lines",
        "ACL log lines (ACLs with log = true): written, suppressed over the rate, dropped on a full queue.",
        rows,
    );
}

/// The exposition, now.
pub fn render(shared: &Shared) -> String {
    let mut reg = Registry::with_prefix("ctrack");
    let s = shared.stats();
    connections(&mut reg, shared);
    firewall(&mut reg, shared, &s);
    ports(&mut reg, shared, &s);
    switch(&mut reg, shared, &s);
    cost(&mut reg, &s.cost);
    acl_log(&mut reg, &s.acl_log);
    counter(
        &mut reg,
        "events_offered",
        "Connection events offered to the subscribers.",
        shared.events.offered(),
    );
    counter(
        &mut reg,
        "events_dropped",
        "Connection events dropped (a subscriber's queue was full).",
        shared.events.dropped(),
    );
    gauge(
        &mut reg,
        "event_subscribers",
        "Connection event subscribers.",
        shared.events.subscribers() as u64,
    );
    gauge(
        &mut reg,
        "uptime_seconds",
        "Seconds since the datapath started.",
        shared.epoch.elapsed().as_secs(),
    );
    let mut out = String::new();
    // Writing to a String cannot fail.
    let _ = encode(&mut out, &reg);
    out
}

/// Starts the endpoint on `addr`; it serves until `shared.stop` is set.
pub fn serve(shared: Arc<Shared>, addr: SocketAddr) -> io::Result<JoinHandle<()>> {
    let listener = TcpListener::bind(addr)
        .map_err(|e| io::Error::new(e.kind(), format!("metrics on {addr}: {e}")))?;
    listener.set_nonblocking(true)?;
    std::thread::Builder::new()
        .name("ctrack-metrics".into())
        .spawn(move || {
            while !shared.stopping() {
                match listener.accept() {
                    Ok((s, _)) => answer(&shared, s),
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(_) => std::thread::sleep(POLL),
                }
            }
        })
}

/// The request's head (up to the blank line), or the status to refuse it
/// with.
fn read_head(s: &mut TcpStream) -> Result<Vec<u8>, &'static str> {
    let deadline = Instant::now() + REQUEST_TIMEOUT;
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    loop {
        if buf.windows(4).any(|w| w == b"\r\n\r\n") || buf.windows(2).any(|w| w == b"\n\n") {
            return Ok(buf);
        }
        if buf.len() > MAX_REQUEST {
            return Err("431 Request Header Fields Too Large");
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() || s.set_read_timeout(Some(left)).is_err() {
            return Err("408 Request Timeout");
        }
        match s.read(&mut chunk) {
            Ok(0) => return Err(""),
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return Err("408 Request Timeout"),
        }
    }
}

fn respond(s: &mut TcpStream, status: &str, ctype: &str, body: &str, head_only: bool) {
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    let _ = s.write_all(head.as_bytes());
    if !head_only {
        let _ = s.write_all(body.as_bytes());
    }
}

fn answer(shared: &Shared, mut s: TcpStream) {
    if s.set_nonblocking(false).is_err() {
        return;
    }
    let _ = s.set_write_timeout(Some(REQUEST_TIMEOUT));
    let text = "text/plain; charset=utf-8";
    let head = match read_head(&mut s) {
        Ok(h) => h,
        Err("") => return,
        Err(status) => return respond(&mut s, status, text, "", false),
    };
    let line = head.split(|&b| b == b'\n').next().unwrap_or_default();
    let line = String::from_utf8_lossy(line);
    let mut words = line.split_whitespace();
    let (method, target) = (words.next().unwrap_or(""), words.next().unwrap_or(""));
    let path = target.split('?').next().unwrap_or("");
    match (method, path) {
        ("GET" | "HEAD", "/metrics") => {
            let body = render(shared);
            let ctype = "application/openmetrics-text; version=1.0.0; charset=utf-8";
            respond(&mut s, "200 OK", ctype, &body, method == "HEAD");
        }
        ("GET" | "HEAD", _) => respond(
            &mut s,
            "404 Not Found",
            text,
            "not found: try /metrics\n",
            method == "HEAD",
        ),
        _ => respond(
            &mut s,
            "405 Method Not Allowed",
            text,
            "GET /metrics\n",
            false,
        ),
    }
}
