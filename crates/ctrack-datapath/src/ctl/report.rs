//! The reporting commands: `stats`, `ports`, `fdb-show`, `fdb-flush`,
//! `policy show`, `policy counters`.

use std::fmt::Write as _;

use ctrack_policy::firewall::{AclCounters, Compiled, DropReason, FwStats, Stage};
use ctrack_policy::model::{Acl, DefaultAction, Direction};
use serde_json::{Value, json};

use super::args::{self, FORMAT, Format};
use super::ctx::{Ctx, lock};
use crate::live::{CostStats, Part, SwitchDrop, WorkerStats};

/// The stages, in counter order.
pub(crate) const STAGES: [Stage; 6] = Stage::ALL;

/// The verdicts, in counter order.
pub(crate) const VERDICTS: [&str; 3] = ["allow", "drop", "reject"];

fn json_text(v: &Value) -> Result<String, String> {
    serde_json::to_string_pretty(v).map_err(|e| format!("cannot encode: {e}"))
}

/// `aa:bb:cc:dd:ee:ff`.
pub(crate) fn mac(m: &[u8; 6]) -> String {
    m.iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

/// The per-ACL counters of the policy in force (zero where the workers
/// have not yet counted under its generation).
pub(crate) fn acl_counters(c: &Compiled, fw: &FwStats, acl: &Acl) -> AclCounters {
    if fw.generation != c.generation {
        return AclCounters::default();
    }
    fw.acls.get(acl.index).copied().unwrap_or_default()
}

/// The default's counters for `dir`.
fn default_counters(c: &Compiled, fw: &FwStats, dir: Direction) -> AclCounters {
    if fw.generation != c.generation {
        return AclCounters::default();
    }
    fw.defaults[dir as usize]
}

fn named<T: Copy + Into<Value>>(names: impl IntoIterator<Item = &'static str>, v: &[T]) -> Value {
    Value::Object(
        names
            .into_iter()
            .zip(v)
            .map(|(n, &x)| (n.to_owned(), x.into()))
            .collect(),
    )
}

fn counters_json(c: &AclCounters) -> Value {
    json!({"packets": c.packets, "bytes": c.bytes, "conns": c.conns})
}

/// The `stats` document (also what the text form prints).
pub(crate) fn stats_json(ctx: &Ctx) -> Value {
    let s = ctx.shared.stats();
    let t = ctx.shared.fw.tracker();
    let zones: Vec<Value> = ctx
        .known_zones()
        .into_iter()
        .map(|z| {
            let (limit, _) = t.zone_limit(z);
            json!({"zone": z, "count": t.zone_len(z), "limit": limit})
        })
        .collect();
    let sw = &s.switch;
    let hub = &ctx.shared.events;
    json!({
        "uptime_seconds": ctx.shared.epoch.elapsed().as_secs(),
        "connections": {
            "total": t.table_len(),
            "max": t.max_conns(),
            "expectations": t.expectation_count(),
            "zones": zones,
        },
        "verdicts": named(VERDICTS, &s.fw.verdicts),
        "stages": named(STAGES.map(Stage::name), &s.fw.stages),
        "drops": named(DropReason::ALL.map(DropReason::name), &s.fw.drops),
        "switch": {
            "forwarded": sw.forwarded,
            "flooded": sw.flooded,
            "replies": sw.replies,
            "learned": sw.learned,
            "drops": named(SwitchDrop::ALL.map(SwitchDrop::name), &sw.drops),
        },
        "rejects": {"sent": s.fw.rejects_sent, "suppressed": s.fw.rejects_suppressed},
        "acl_log": {
            "lines": s.acl_log.lines,
            "suppressed": s.acl_log.suppressed,
            "dropped": s.acl_log.dropped,
        },
        "rejudged": s.fw.rejudged,
        "new_by_word": s.fw.new_by_word,
        "cross_pair": s.fw.cross_pair,
        "tracker": serde_json::to_value(s.fw.tracker).unwrap_or(Value::Null),
        "fragments": serde_json::to_value(ctx.shared.fw.reassembler().stats())
            .unwrap_or(Value::Null),
        "policy": policy_counters_json(ctx, &s.fw),
        "ports": ports_json(ctx, &s),
        "events": {
            "subscribers": hub.subscribers(),
            "offered": hub.offered(),
            "dropped": hub.dropped(),
        },
        "bursts": s.bursts,
        "cost": cost_json(&s.cost),
        "ctl_clients": ctx.clients(),
    })
}

/// Rounded to `1 / per` (10: a tenth, for nanoseconds per packet; 1000:
/// a thousandth, for shares), printed without float noise.
fn round(x: f64, per: f64) -> f64 {
    (x * per).round() / per
}

/// The workers' time by part (summed over workers, as CPU time): total
/// nanoseconds, nanoseconds per packet received, and shares of the wall
/// time.
pub(crate) fn cost_json(c: &CostStats) -> Value {
    let mut ns = serde_json::Map::new();
    let mut per = serde_json::Map::new();
    let mut share = serde_json::Map::new();
    let parts = Part::ALL.iter().map(|&p| (p.name(), c.get(p)));
    for (name, v) in parts.chain([("other", c.other_ns())]) {
        ns.insert(name.into(), v.into());
        if name != "idle" {
            per.insert(name.into(), round(c.per_packet(v), 10.0).into());
        }
        share.insert(name.into(), round(c.share(v), 1000.0).into());
    }
    ns.insert("total".into(), c.total_ns.into());
    per.insert("busy".into(), round(c.per_packet(c.busy_ns()), 10.0).into());
    let per_round = if c.rounds == 0 {
        0.0
    } else {
        c.packets as f64 / c.rounds as f64
    };
    json!({
        "packets": c.packets,
        "rounds": c.rounds,
        "packets_per_round": round(per_round, 10.0),
        "ns": ns,
        "ns_per_packet": per,
        "share": share,
    })
}

/// The `cost` document in two lines.
fn cost_text(v: &Value) -> String {
    let per = &v["ns_per_packet"];
    let mut o = format!(
        "cost: {} packets in {} busy rounds ({} a round); ns per packet:",
        v["packets"], v["rounds"], v["packets_per_round"]
    );
    for k in ["recv", "switch", "firewall", "send", "other", "busy"] {
        let _ = write!(o, " {k} {}", per[k]);
    }
    let secs = v["ns"]["total"].as_u64().unwrap_or(0) as f64 / 1e9;
    let _ = write!(o, "\n  wall {secs:.3} s:");
    for k in ["recv", "switch", "firewall", "send", "other", "idle"] {
        let pct = v["share"][k].as_f64().unwrap_or(0.0) * 100.0;
        let _ = write!(o, " {k} {pct:.1}%");
    }
    o.push('\n');
    o
}

fn kv_line(out: &mut String, title: &str, v: &Value) {
    let _ = write!(out, "{title}:");
    if let Value::Object(m) = v {
        for (k, x) in m {
            if x.is_number() {
                let _ = write!(out, " {k}={x}");
            }
        }
    }
    out.push('\n');
}

/// `stats [--format json]`.
pub(crate) fn stats(ctx: &Ctx, rest: &[String]) -> Result<String, String> {
    let p = args::parse(rest, &[FORMAT])?;
    p.no_words()?;
    let v = stats_json(ctx);
    if p.format()? == Format::Json {
        return json_text(&v);
    }
    let mut o = String::new();
    let c = &v["connections"];
    let _ = writeln!(
        o,
        "connections: {} (max {}), expectations: {}",
        c["total"], c["max"], c["expectations"]
    );
    if let Some(zones) = c["zones"].as_array() {
        for z in zones {
            let _ = writeln!(
                o,
                "  zone {}: {} connections, limit {}",
                z["zone"], z["count"], z["limit"]
            );
        }
    }
    kv_line(&mut o, "verdicts", &v["verdicts"]);
    kv_line(&mut o, "stages", &v["stages"]);
    kv_line(&mut o, "drops (firewall)", &v["drops"]);
    kv_line(&mut o, "drops (switch)", &v["switch"]["drops"]);
    kv_line(&mut o, "switch", &v["switch"]);
    kv_line(&mut o, "rejects", &v["rejects"]);
    kv_line(&mut o, "acl log", &v["acl_log"]);
    kv_line(&mut o, "tracker", &v["tracker"]);
    kv_line(&mut o, "fragments", &v["fragments"]);
    kv_line(&mut o, "events", &v["events"]);
    o.push_str(&cost_text(&v["cost"]));
    let _ = writeln!(o, "policy generation {}:", v["policy"]["generation"]);
    o.push_str(&counters_text(&v["policy"]));
    o.push_str("ports:\n");
    o.push_str(&ports_text(&v["ports"]));
    Ok(o)
}

fn ports_json(ctx: &Ctx, s: &WorkerStats) -> Value {
    let ports: Vec<Value> = ctx
        .shared
        .ports
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let c = s.ports.get(i).copied().unwrap_or_default();
            json!({
                "port": i,
                "name": p.name,
                "interface": p.ifname,
                "link": ctx.shared.link(i).name(),
                "mac": mac(&p.mac),
                "mtu": p.mtu,
                "rx_packets": c.rx_packets,
                "rx_bytes": c.rx_bytes,
                "rx_dropped": c.rx_dropped,
                "tx_packets": c.tx_packets,
                "tx_bytes": c.tx_bytes,
                "tx_errors": c.tx_errors,
                "rx_csum_completed": c.rx_csum_completed,
                "rx_gso_frames": c.rx_gso_frames,
                "rx_gso_segments": c.rx_gso_segments,
                "tx_gso_frames": c.tx_gso_frames,
            })
        })
        .collect();
    Value::Array(ports)
}

fn ports_text(v: &Value) -> String {
    let mut o = String::new();
    for p in v.as_array().into_iter().flatten() {
        let s = |k: &str| p[k].as_str().unwrap_or("").to_owned();
        let _ = writeln!(
            o,
            "  {} ({}): link {}, mac {} mtu {}; rx {} packets {} bytes {} dropped {} checksums completed, {} of segmentation offload ({} segments cut); tx {} packets {} bytes {} errors, {} whole with segmentation offload",
            s("name"),
            s("interface"),
            s("link"),
            s("mac"),
            p["mtu"],
            p["rx_packets"],
            p["rx_bytes"],
            p["rx_dropped"],
            p["rx_csum_completed"],
            p["rx_gso_frames"],
            p["rx_gso_segments"],
            p["tx_packets"],
            p["tx_bytes"],
            p["tx_errors"],
            p["tx_gso_frames"]
        );
    }
    o
}

/// `ports [--format json]`.
pub(crate) fn ports(ctx: &Ctx, rest: &[String]) -> Result<String, String> {
    let p = args::parse(rest, &[FORMAT])?;
    p.no_words()?;
    let v = ports_json(ctx, &ctx.shared.stats());
    if p.format()? == Format::Json {
        return json_text(&v);
    }
    Ok(ports_text(&v))
}

/// `fdb-show`: where the switch sends each address it knows, as
/// `ovs-appctl fdb/show` lists a bridge's learned MACs: the policy ports'
/// addresses (bound to the datapath port of the same name; no age) then
/// the learned ones with the seconds since the table last saw them.
pub(crate) fn fdb_show(ctx: &Ctx, rest: &[String]) -> Result<String, String> {
    let p = args::parse(rest, &[FORMAT])?;
    p.no_words()?;
    let v = fdb_json(ctx);
    if p.format()? == Format::Json {
        return json_text(&v);
    }
    let mut o = format!("{:<16} {:<17} {:>6}\n", "port", "MAC", "age");
    for a in v["addresses"].as_array().into_iter().flatten() {
        let age = match a["age_seconds"].as_u64() {
            Some(n) => n.to_string(),
            None => "policy".to_owned(),
        };
        let _ = writeln!(
            o,
            "{:<16} {:<17} {:>6}",
            a["port"].as_str().unwrap_or(""),
            a["mac"].as_str().unwrap_or(""),
            age
        );
    }
    let _ = write!(o, "{} learned (at most {})", v["learned"], v["max_learned"]);
    Ok(o)
}

fn fdb_json(ctx: &Ctx) -> Value {
    let shared = &ctx.shared;
    let name = |i: u16| {
        shared
            .ports
            .get(usize::from(i))
            .map_or("", |p| p.name.as_str())
    };
    let mut rows = Vec::new();
    let policy = shared.fw.policy();
    for p in &policy.policy.ports {
        let Some(i) = shared.ports.iter().position(|d| d.name == p.name) else {
            continue;
        };
        for m in &p.macs {
            rows.push(json!({"port": p.name, "mac": mac(m), "age_seconds": null, "learned": false, "port_number": i}));
        }
    }
    let now = shared.now();
    let learned = shared.macs.list();
    for l in &learned {
        rows.push(json!({
            "port": name(l.port),
            "mac": mac(&l.mac),
            "age_seconds": now.millis_since(l.seen) / 1000,
            "learned": true,
            "port_number": l.port,
        }));
    }
    json!({
        "addresses": rows,
        "learned": learned.len(),
        "max_learned": crate::live::switch::MAX_LEARNED,
    })
}

/// `fdb-flush`: forgets the learned addresses (not the policy's).
pub(crate) fn fdb_flush(ctx: &Ctx, rest: &[String]) -> Result<String, String> {
    let p = args::parse(rest, &[])?;
    p.no_words()?;
    let n = ctx.shared.macs.flush();
    Ok(format!("{n} learned addresses forgotten"))
}

/// The ACLs in evaluation order: by direction, tier, then rank (highest
/// first).
fn ordered(c: &Compiled) -> Vec<&Acl> {
    let mut acls: Vec<&Acl> = c.policy.acls.iter().collect();
    acls.sort_by_key(|a| {
        (
            a.direction as u8,
            a.tier,
            std::cmp::Reverse(ctrack_policy::firewall::rank(a.priority, a.index)),
        )
    });
    acls
}

fn policy_counters_json(ctx: &Ctx, fw: &FwStats) -> Value {
    let c = ctx.shared.fw.policy();
    let acls: Vec<Value> = ordered(&c)
        .into_iter()
        .map(|a| {
            let k = acl_counters(&c, fw, a);
            json!({
                "acl": a.name,
                "index": a.index,
                "direction": a.direction.name(),
                "tier": a.tier,
                "priority": a.priority,
                "action": a.action.name(),
                "packets": k.packets,
                "bytes": k.bytes,
                "conns": k.conns,
            })
        })
        .collect();
    let defaults: Value = [Direction::FromLport, Direction::ToLport]
        .into_iter()
        .map(|d| {
            (
                d.name().to_owned(),
                counters_json(&default_counters(&c, fw, d)),
            )
        })
        .collect::<serde_json::Map<_, _>>()
        .into();
    json!({"generation": c.generation, "acls": acls, "defaults": defaults})
}

fn counters_text(v: &Value) -> String {
    let mut o = String::new();
    for a in v["acls"].as_array().into_iter().flatten() {
        let _ = writeln!(
            o,
            "  {:<10} tier={} priority={:<5} {:<20} {:<16} packets={} bytes={} conns={}",
            a["direction"].as_str().unwrap_or(""),
            a["tier"],
            a["priority"],
            a["acl"].as_str().unwrap_or(""),
            a["action"].as_str().unwrap_or(""),
            a["packets"],
            a["bytes"],
            a["conns"]
        );
    }
    if let Value::Object(m) = &v["defaults"] {
        for (dir, k) in m {
            let _ = writeln!(
                o,
                "  {dir:<10} default packets={} bytes={} conns={}",
                k["packets"], k["bytes"], k["conns"]
            );
        }
    }
    o
}

/// `policy counters [--format json]`: per-ACL packets, bytes and
/// connections.
pub(crate) fn policy_counters(ctx: &Ctx, rest: &[String]) -> Result<String, String> {
    let p = args::parse(rest, &[FORMAT])?;
    p.no_words()?;
    let v = policy_counters_json(ctx, &ctx.shared.stats().fw);
    if p.format()? == Format::Json {
        return json_text(&v);
    }
    Ok(format!(
        "policy generation {}:\n{}",
        v["generation"],
        counters_text(&v)
    ))
}

/// `policy show`: the compiled view (ports, then ACLs by stage, tier and
/// priority as evaluated, with their classifiers' sizes), each ACL with
/// its counters.
pub(crate) fn policy_show(ctx: &Ctx, rest: &[String]) -> Result<String, String> {
    args::parse(rest, &[])?.no_words()?;
    let c = ctx.shared.fw.policy();
    let fw = ctx.shared.stats().fw;
    let p = &c.policy;
    let path = lock(&ctx.shared.policy_path).display().to_string();
    let mut o = format!(
        "policy {path}: generation {}, default {}, {}\n",
        c.generation,
        match p.default {
            DefaultAction::Allow => "allow",
            DefaultAction::Drop => "drop",
        },
        if c.tracking { "stateful" } else { "stateless" },
    );
    for (i, port) in p.ports.iter().enumerate() {
        let macs: Vec<String> = port.macs.iter().map(mac).collect();
        let ips: Vec<String> = port.ips.iter().map(|ip| ip.to_string()).collect();
        let _ = writeln!(
            o,
            "port {} ({}): zone {}, {} {}{}",
            port.name,
            i + 1,
            port.zone,
            macs.join(" "),
            ips.join(" "),
            port.security_text()
        );
    }
    for l in p.meter_lines() {
        let _ = writeln!(o, "{l}");
    }
    for (dir, tier, cls) in c.classifiers() {
        let acls: Vec<&Acl> = ordered(&c)
            .into_iter()
            .filter(|a| a.direction == dir && usize::from(a.tier) == tier)
            .collect();
        if acls.is_empty() {
            continue;
        }
        let _ = writeln!(
            o,
            "\n{} tier {}: {} ACLs, compiled to {}, {} bytes",
            dir.name(),
            tier,
            acls.len(),
            cls.stats(),
            cls.memory()
        );
        for a in acls {
            let k = acl_counters(&c, &fw, a);
            let _ = writeln!(
                o,
                "  priority={:<5} {:<20} {:<16} match=({}){} packets={} bytes={} conns={}",
                a.priority,
                a.name,
                a.action.name(),
                a.match_text,
                a.options_text(),
                k.packets,
                k.bytes,
                k.conns
            );
        }
    }
    for d in [Direction::FromLport, Direction::ToLport] {
        let k = default_counters(&c, &fw, d);
        let _ = writeln!(
            o,
            "\n{} default: packets={} bytes={} conns={}",
            d.name(),
            k.packets,
            k.bytes,
            k.conns
        );
    }
    Ok(o)
}
