//! The control commands: parsing a request's `argv` and answering it.
//! Nothing here prints, exits or panics on what a client sends: every
//! mistake is an error reply.

use std::fmt::Write as _;
use std::net::IpAddr;

use ctrack_core::{ConnId, ConnKey, Endpoint, Entry, Family, Stats, TimeoutPolicy, Zone};
use ctrack_wire::ip_proto;

use super::args::{self, FORMAT, Format, Opt, Parsed, number};
use super::ctx::{Ctx, lock};
use super::list::{self, Filter, LIST_OPTS};
use super::listing::{Listing, Style};
use super::proto::Reply;
use super::report;

/// What a request asks of the connection.
#[derive(Debug)]
pub(crate) enum Outcome {
    /// One reply.
    Reply(Reply),
    /// The event stream, in this format.
    Events(Format),
    /// Connections, written in parts ([`Listing::write`]).
    Listing(Listing),
}

/// The commands, for `help`.
const HELP: &str = "\
commands (ctrack ctl [--ctl PATH] COMMAND ...):
  dump-conntrack [zone=N] [-s] [--format json]   connections, as ovs-appctl dpctl/dump-conntrack
  list [-p PROTO] [--src A[/LEN]] [--dst A[/LEN]] [--sport N] [--dport N]
       [--mark N[/MASK]] [--zone N] [--state S] [--format json]
                                                 connections, as conntrack -L
  flush [zone=N] [ct_nw_src=A,ct_nw_dst=A,ct_nw_proto=P,ct_tp_src=N,ct_tp_dst=N]
                                                 remove connections (all, a zone's, one)
  count [zone=N]                                 connections
  stats [--format json]                          counters: zones, verdicts, stages, drops, ACLs, ports
  set-maxconns N | get-maxconns                  the connection table's limit
  ct-set-limits [default=N] [zone=N,limit=M]...  zone limits (0: none)
  ct-get-limits [zone=N[,M]...]
  ct-del-limits zone=N[,M]...
  ct-set-timeout zone=N NAME=SECS...             a zone's timeout policy (names: ct-get-timeout)
  ct-get-timeout zone=N [--format json]
  ct-del-timeout zone=N
  policy reload [FILE] | policy show | policy counters [--format json]
  events [--format json]                         connection events, as conntrack -E
  ports [--format json]                          interfaces and their counters
  fdb-show [--format json]                       where each MAC goes, as ovs-appctl fdb/show
  fdb-flush                                      forget the learned MACs
  version | help";

/// Answers `argv`.
pub(crate) fn run(ctx: &Ctx, argv: &[String]) -> Outcome {
    let Some((cmd, rest)) = argv.split_first() else {
        return Outcome::Reply(Reply::error("empty request: no command (try help)"));
    };
    let cmd = cmd.strip_prefix("dpctl/").unwrap_or(cmd);
    if cmd == "events" {
        return match args::parse(rest, &[FORMAT]).and_then(|p| {
            p.no_words()?;
            p.format()
        }) {
            Ok(f) => Outcome::Events(f),
            Err(e) => Outcome::Reply(Reply::error(format!("events: {e}"))),
        };
    }
    let listing = match cmd {
        "dump-conntrack" => Some(dump(ctx, rest)),
        "list" | "-L" => Some(list_cmd(ctx, rest)),
        _ => None,
    };
    if let Some(l) = listing {
        return match l {
            Ok(l) => Outcome::Listing(l),
            Err(e) => Outcome::Reply(Reply::error(format!("{cmd}: {e}"))),
        };
    }
    let result = match cmd {
        "version" => Ok(format!("ctrack {}", env!("CARGO_PKG_VERSION"))),
        "help" => Ok(HELP.to_owned()),
        "flush" | "flush-conntrack" => flush(ctx, rest),
        "count" | "ct-get-nconns" => count(ctx, rest),
        "stats" | "ct-stats-show" => report::stats(ctx, rest),
        "ports" => report::ports(ctx, rest),
        "fdb-show" | "fdb/show" => report::fdb_show(ctx, rest),
        "fdb-flush" | "fdb/flush" => report::fdb_flush(ctx, rest),
        "set-maxconns" | "ct-set-maxconns" => set_maxconns(ctx, rest),
        "get-maxconns" | "ct-get-maxconns" => args::parse(rest, &[])
            .and_then(|p| p.no_words())
            .map(|()| ctx.shared.fw.tracker().max_conns().to_string()),
        "ct-set-limits" => set_limits(ctx, rest),
        "ct-get-limits" => get_limits(ctx, rest),
        "ct-del-limits" => del_limits(ctx, rest),
        "ct-set-timeout" => set_timeout(ctx, rest),
        "ct-get-timeout" => get_timeout(ctx, rest),
        "ct-del-timeout" => del_timeout(ctx, rest),
        "policy" => policy(ctx, rest),
        _ => Err(format!("unknown command {cmd:?} (try help)")),
    };
    Outcome::Reply(match result {
        Ok(text) => Reply::text(text),
        Err(e) => Reply::error(format!("{cmd}: {e}")),
    })
}

fn json<T: serde::Serialize>(v: &T) -> Result<String, String> {
    serde_json::to_string_pretty(v).map_err(|e| format!("cannot encode: {e}"))
}

fn dump(ctx: &Ctx, rest: &[String]) -> Result<Listing, String> {
    const STATS: Opt = Opt {
        names: &["-s", "--statistics", "-m", "--more"],
        key: "stats",
        value: false,
    };
    let p = args::parse(rest, &[STATS, FORMAT])?;
    let zone = args::one_zone(&p.words)?;
    let style = match p.format()? {
        Format::Json => Style::Json,
        Format::Text => Style::Dump {
            stats: p.has("stats"),
        },
    };
    Listing::new(ctx, zone, |_| true, style)
}

fn list_cmd(ctx: &Ctx, rest: &[String]) -> Result<Listing, String> {
    let p = args::parse(rest, LIST_OPTS)?;
    p.no_words()?;
    let f = Filter::from_args(&p)?;
    let style = match p.format()? {
        Format::Json => Style::Json,
        Format::Text => Style::List,
    };
    let zone = f.zone;
    Listing::new(ctx, zone, move |e| f.matches(e), style)
}

fn count(ctx: &Ctx, rest: &[String]) -> Result<String, String> {
    let p = args::parse(rest, &[])?;
    let zone = args::one_zone(&p.words)?;
    let mut n = 0u64;
    let now = ctx.shared.now();
    ctx.shared.fw.tracker().for_each(zone, now, |_, _| n += 1);
    Ok(n.to_string())
}

/// A tuple of `flush-conntrack`, each field optional.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct TupleSpec {
    src: Option<IpAddr>,
    dst: Option<IpAddr>,
    proto: Option<u8>,
    sport: Option<u16>,
    dport: Option<u16>,
    icmp_id: Option<u16>,
    icmp_type: Option<u8>,
    icmp_code: Option<u8>,
}

impl TupleSpec {
    /// `ct_nw_src=10.0.0.1,ct_nw_dst=10.0.0.2,ct_nw_proto=6,ct_tp_src=1,
    /// ct_tp_dst=2` (`ct_ipv6_src`/`ct_ipv6_dst` for IPv6; `icmp_id`,
    /// `icmp_type`, `icmp_code` for ICMP).
    fn parse(w: &str) -> Result<TupleSpec, String> {
        let mut t = TupleSpec::default();
        for field in w.split(',').filter(|f| !f.is_empty()) {
            let (k, v) = field
                .split_once('=')
                .ok_or_else(|| format!("tuple field {field:?}: expected NAME=VALUE"))?;
            let ip = |v: &str| {
                v.parse::<IpAddr>()
                    .map_err(|_| format!("{k}: {v:?} is not an address"))
            };
            match k {
                "ct_nw_src" | "ct_ipv6_src" => t.src = Some(ip(v)?),
                "ct_nw_dst" | "ct_ipv6_dst" => t.dst = Some(ip(v)?),
                "ct_nw_proto" => t.proto = Some(list::parse_proto(v)?),
                "ct_tp_src" => t.sport = Some(number(k, v)?),
                "ct_tp_dst" => t.dport = Some(number(k, v)?),
                "icmp_id" => t.icmp_id = Some(number(k, v)?),
                "icmp_type" => t.icmp_type = Some(number(k, v)?),
                "icmp_code" => t.icmp_code = Some(number(k, v)?),
                _ => return Err(format!("unknown tuple field {k:?}")),
            }
        }
        if t == TupleSpec::default() {
            return Err("empty tuple".into());
        }
        Ok(t)
    }

    /// The key of a whole TCP/UDP-like tuple (which a lookup finds).
    fn key(&self, zone: Zone) -> Option<ConnKey> {
        let (src, dst, proto) = (self.src?, self.dst?, self.proto?);
        let ported = matches!(
            proto,
            ip_proto::TCP | ip_proto::UDP | ip_proto::SCTP | ip_proto::UDPLITE | ip_proto::DCCP
        );
        let (sport, dport) = (self.sport?, self.dport?);
        if !ported {
            return None;
        }
        let (src, dst, family) = match (src, dst) {
            (IpAddr::V4(s), IpAddr::V4(d)) => {
                (Endpoint::v4(s, sport), Endpoint::v4(d, dport), Family::V4)
            }
            (IpAddr::V6(s), IpAddr::V6(d)) => {
                (Endpoint::v6(s, sport), Endpoint::v6(d, dport), Family::V6)
            }
            _ => return None,
        };
        Some(ConnKey {
            src,
            dst,
            zone,
            proto,
            family,
        })
    }

    /// True if the original tuple of `e` has every field given.
    fn matches(&self, e: &Entry) -> bool {
        let o = &e.orig;
        let icmp = o.icmp;
        self.src.is_none_or(|a| a == o.src)
            && self.dst.is_none_or(|a| a == o.dst)
            && self.proto.is_none_or(|p| p == e.proto)
            && self.sport.is_none_or(|p| o.sport == Some(p))
            && self.dport.is_none_or(|p| o.dport == Some(p))
            && self.icmp_id.is_none_or(|v| icmp.is_some_and(|i| i.0 == v))
            && self
                .icmp_type
                .is_none_or(|v| icmp.is_some_and(|i| i.1 == v))
            && self
                .icmp_code
                .is_none_or(|v| icmp.is_some_and(|i| i.2 == v))
    }
}

fn flush(ctx: &Ctx, rest: &[String]) -> Result<String, String> {
    let p = args::parse(rest, &[])?;
    let (mut zone, mut tuple) = (None, None);
    for w in &p.words {
        if let Some(z) = w.strip_prefix("zone=") {
            if zone.replace(number::<Zone>("zone", z)?).is_some() {
                return Err("give one zone=N at most".into());
            }
        } else if tuple.replace(TupleSpec::parse(w)?).is_some() {
            return Err("give one tuple at most (the original direction's)".into());
        }
    }
    let t = ctx.shared.fw.tracker();
    let mut stats = Stats::default();
    let now = ctx.shared.now();
    let result = match (zone, tuple) {
        (None, None) => {
            t.flush_all(&mut stats);
            Ok(String::new())
        }
        (Some(z), None) => {
            t.flush_zone_now(z, &mut stats);
            Ok(String::new())
        }
        (z, Some(spec)) => {
            let zone = z.unwrap_or(0);
            let n = match spec.key(zone) {
                Some(key) => usize::from(t.flush_key(&key, now, &mut stats)),
                None => {
                    let mut ids: Vec<ConnId> = Vec::new();
                    t.for_each(Some(zone), now, |id, info| {
                        if spec.matches(&info.entry) {
                            ids.push(id);
                        }
                    });
                    ids.into_iter()
                        .filter(|&id| t.remove(id, now, &mut stats))
                        .count()
                }
            };
            if n == 0 {
                Err(format!("no connection in zone {zone} matches the tuple"))
            } else {
                Ok(String::new())
            }
        }
    };
    lock(&ctx.shared.ctl_tracker).merge(&stats);
    result
}

fn set_maxconns(ctx: &Ctx, rest: &[String]) -> Result<String, String> {
    let p = args::parse(rest, &[])?;
    let [n] = p.words.as_slice() else {
        return Err("expected one number: set-maxconns N".into());
    };
    let n: usize = number("maxconns", n)?;
    // The same bound as `ctrack run --max-conns` (the connection table's
    // ceiling, 2^29 in its 64 shards at least): raising the limit sizes
    // the index at once, about 1.6 bytes a connection of the limit.
    let tracker = ctx.shared.fw.tracker();
    let most = tracker.max_conns_ceiling();
    if n == 0 || n > most {
        return Err(format!("maxconns must be 1..={most}"));
    }
    tracker.set_max_conns(n);
    Ok("setting maxconns successful".into())
}

fn set_limits(ctx: &Ctx, rest: &[String]) -> Result<String, String> {
    let p = args::parse(rest, &[])?;
    if p.words.is_empty() {
        return Err("expected default=N and/or zone=N,limit=M".into());
    }
    // Check everything before changing anything.
    let mut default = None;
    let mut zones: Vec<(Zone, u32)> = Vec::new();
    for w in &p.words {
        if let Some(v) = w.strip_prefix("default=") {
            default = Some(number::<u32>("default", v)?);
            continue;
        }
        let mut zone = None;
        let mut limit = None;
        for f in w.split(',') {
            match f.split_once('=') {
                Some(("zone", v)) => zone = Some(number::<Zone>("zone", v)?),
                Some(("limit", v)) => limit = Some(number::<u32>("limit", v)?),
                _ => return Err(format!("{w:?}: expected zone=N,limit=M or default=N")),
            }
        }
        match (zone, limit) {
            (Some(z), Some(l)) => zones.push((z, l)),
            _ => return Err(format!("{w:?}: expected zone=N,limit=M")),
        }
    }
    let t = ctx.shared.fw.tracker();
    if let Some(d) = default {
        t.set_default_zone_limit(d);
    }
    for (z, l) in zones {
        t.set_zone_limit(z, l);
        lock(&ctx.limit_zones).insert(z);
    }
    Ok(String::new())
}

fn get_limits(ctx: &Ctx, rest: &[String]) -> Result<String, String> {
    let p = args::parse(rest, &[FORMAT])?;
    let asked = args::zones(&p.words)?;
    let zones: Vec<Zone> = if asked.is_empty() {
        lock(&ctx.limit_zones).iter().copied().collect()
    } else {
        asked
    };
    let t = ctx.shared.fw.tracker();
    let default = default_limit(ctx);
    let rows: Vec<(Zone, u32, u32)> = zones
        .iter()
        .map(|&z| {
            // The count is the zone's connections (the tracker's limit
            // count starts with the first limit set).
            let (limit, _) = t.zone_limit(z);
            (z, limit, t.zone_len(z) as u32)
        })
        .collect();
    if p.format()? == Format::Json {
        let zones: Vec<_> = rows
            .iter()
            .map(|&(zone, limit, count)| serde_json::json!({"zone": zone, "limit": limit, "count": count}))
            .collect();
        return json(&serde_json::json!({"default": default, "zones": zones}));
    }
    let mut s = format!("default limit={default}\n");
    for (z, l, c) in rows {
        let _ = writeln!(s, "zone={z},limit={l},count={c}");
    }
    Ok(s)
}

/// The default zone limit: the tracker has no getter for it, but
/// answers it as the limit of any zone without its own.
pub(crate) fn default_limit(ctx: &Ctx) -> u32 {
    let t = ctx.shared.fw.tracker();
    let own = lock(&ctx.limit_zones);
    // The highest zone number not given a limit here.
    (0..=Zone::MAX)
        .rev()
        .find(|z| !own.contains(z))
        .map_or(0, |z| {
            let (limit, _) = t.zone_limit(z);
            limit
        })
}

fn del_limits(ctx: &Ctx, rest: &[String]) -> Result<String, String> {
    let p = args::parse(rest, &[])?;
    let zones = args::zones(&p.words)?;
    if zones.is_empty() {
        return Err("expected zone=N[,M]...".into());
    }
    for z in zones {
        ctx.shared.fw.tracker().clear_zone_limit(z);
        lock(&ctx.limit_zones).remove(&z);
    }
    Ok(String::new())
}

/// The timeout policy's attributes, named as Open vSwitch's
/// `ct_timeout_policy` (the core's [`TimeoutPolicy`] fields).
pub(crate) const TIMEOUT_NAMES: [&str; 11] = [
    "tcp_syn_sent",
    "tcp_syn_recv",
    "tcp_established",
    "tcp_fin_wait",
    "tcp_time_wait",
    "tcp_close",
    "udp_first",
    "udp_single",
    "udp_multiple",
    "icmp_first",
    "icmp_reply",
];

fn timeout_field<'p>(p: &'p mut TimeoutPolicy, name: &str) -> Option<&'p mut u32> {
    Some(match name {
        "tcp_syn_sent" => &mut p.tcp_syn_sent,
        "tcp_syn_recv" => &mut p.tcp_syn_recv,
        "tcp_established" => &mut p.tcp_established,
        "tcp_fin_wait" => &mut p.tcp_fin_wait,
        "tcp_time_wait" => &mut p.tcp_time_wait,
        "tcp_close" => &mut p.tcp_close,
        "udp_first" => &mut p.udp_first,
        "udp_single" => &mut p.udp_single,
        "udp_multiple" => &mut p.udp_multiple,
        "icmp_first" => &mut p.icmp_first,
        "icmp_reply" => &mut p.icmp_reply,
        _ => return None,
    })
}

/// The values of `p`, in [`TIMEOUT_NAMES`] order.
pub(crate) fn timeout_values(p: &TimeoutPolicy) -> Vec<(&'static str, u32)> {
    let mut p = *p;
    TIMEOUT_NAMES
        .iter()
        .map(|&n| (n, timeout_field(&mut p, n).map_or(0, |v| *v)))
        .collect()
}

/// The longest timeout accepted (a year): expiry is kept in milliseconds.
const MAX_TIMEOUT: u32 = 365 * 24 * 3600;

fn set_timeout(ctx: &Ctx, rest: &[String]) -> Result<String, String> {
    let p = args::parse(rest, &[])?;
    let mut zone = None;
    let mut sets = Vec::new();
    for w in &p.words {
        let (k, v) = w
            .split_once('=')
            .ok_or_else(|| format!("{w:?}: expected zone=N or NAME=SECS"))?;
        if k == "zone" {
            zone = Some(number::<Zone>("zone", v)?);
            continue;
        }
        let secs: u32 = number(k, v)?;
        if secs == 0 || secs > MAX_TIMEOUT {
            return Err(format!("{k}: {secs} out of range 1..={MAX_TIMEOUT}"));
        }
        if !TIMEOUT_NAMES.contains(&k) {
            return Err(format!(
                "unknown timeout {k:?} (known: {})",
                TIMEOUT_NAMES.join(", ")
            ));
        }
        sets.push((k, secs));
    }
    let zone = zone.ok_or("expected zone=N")?;
    if sets.is_empty() {
        return Err("expected NAME=SECS (names: see ct-get-timeout)".into());
    }
    let t = ctx.shared.fw.tracker();
    let mut policy = t.zone_timeouts(zone);
    for (k, secs) in sets {
        if let Some(f) = timeout_field(&mut policy, k) {
            *f = secs;
        }
    }
    t.set_zone_timeouts(zone, policy);
    lock(&ctx.timeout_zones).insert(zone);
    Ok(String::new())
}

fn get_timeout(ctx: &Ctx, rest: &[String]) -> Result<String, String> {
    let p = args::parse(rest, &[FORMAT])?;
    let zone = args::one_zone(&p.words)?.ok_or("expected zone=N")?;
    let policy = ctx.shared.fw.tracker().zone_timeouts(zone);
    let own = lock(&ctx.timeout_zones).contains(&zone);
    let values = timeout_values(&policy);
    if p.format()? == Format::Json {
        let map: serde_json::Map<String, serde_json::Value> = values
            .iter()
            .map(|&(k, v)| (k.to_owned(), v.into()))
            .collect();
        return json(&serde_json::json!({"zone": zone, "own": own, "timeouts": map}));
    }
    // `ovs-vsctl list-zone-tp`'s layout.
    let mut s = format!("Zone:{zone}, Timeout Policies:");
    for (k, v) in values {
        let _ = write!(s, " {k}={v}");
    }
    if !own {
        s.push_str(" (default)");
    }
    s.push('\n');
    Ok(s)
}

fn del_timeout(ctx: &Ctx, rest: &[String]) -> Result<String, String> {
    let p = args::parse(rest, &[])?;
    let zones = args::zones(&p.words)?;
    if zones.is_empty() {
        return Err("expected zone=N".into());
    }
    for z in zones {
        ctx.shared.fw.tracker().clear_zone_timeouts(z);
        lock(&ctx.timeout_zones).remove(&z);
    }
    Ok(String::new())
}

fn policy(ctx: &Ctx, rest: &[String]) -> Result<String, String> {
    let Some((sub, rest)) = rest.split_first() else {
        return Err("expected reload [FILE], show or counters".into());
    };
    match sub.as_str() {
        "reload" => {
            let p: Parsed = args::parse(rest, &[])?;
            let file = match p.words.as_slice() {
                [] => None,
                [f] => Some(std::path::PathBuf::from(f)),
                _ => return Err("reload takes one FILE at most".into()),
            };
            let generation = ctx.shared.reload(file.as_deref())?;
            let path = lock(&ctx.shared.policy_path).display().to_string();
            Ok(format!("policy generation {generation} loaded from {path}"))
        }
        "show" => report::policy_show(ctx, rest),
        "counters" => report::policy_counters(ctx, rest),
        other => Err(format!(
            "unknown policy command {other:?} (reload, show, counters)"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tuples_parse_whole_and_partial() {
        let t = TupleSpec::parse(
            "ct_nw_src=10.0.0.1,ct_nw_dst=10.0.0.2,ct_nw_proto=6,ct_tp_src=1000,ct_tp_dst=80",
        )
        .unwrap();
        let k = t.key(3).unwrap();
        assert_eq!(
            (k.zone, k.proto, k.src.port, k.dst.port, k.family),
            (3, 6, 1000, 80, Family::V4)
        );
        let partial = TupleSpec::parse("ct_nw_proto=17").unwrap();
        assert_eq!(partial.key(0), None);
        assert!(TupleSpec::parse("ct_nw_src=nope").is_err());
        assert!(TupleSpec::parse("bogus=1").is_err());
        assert!(TupleSpec::parse(",").is_err());
    }

    #[test]
    fn timeout_names_cover_the_policy() {
        let mut p = TimeoutPolicy::default();
        for n in TIMEOUT_NAMES {
            *timeout_field(&mut p, n).unwrap() = 7;
        }
        assert_eq!(p.max_seconds(), 7);
        assert!(timeout_values(&p).iter().all(|&(_, v)| v == 7));
    }
}
