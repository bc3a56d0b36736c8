//! `ctrack bench policy WHAT`: the firewall stage (policy + tracker, no
//! I/O) and its classifier.
//!
//! | WHAT | measures |
//! | --- | --- |
//! | `stage` | established packets through the firewall's burst path, against a plain tracker lookup of the same packets |
//! | `passes` | the single pass against the recirculation model on the same engine (parse and classify, track, parse and classify again with the ct state, as a recirculated packet re-enters the datapath) |
//! | `stateless` | `allow-stateless` against `allow-related` on the same traffic |
//! | `classify` | first-packet classification of realistic ACL sets: rate, compile time, one-rule update, memory |
//! | `reload` | a policy change with every connection live: time until all are judged again, batch latency during it |
//!
//! Single-threaded, so that the figures are per core; `stage --threads N`
//! runs N threads through the one firewall (and then through the one
//! plain tracker), each its own ring of frames and counters, as
//! `ctrack run`'s workers share a firewall.

use std::io::Write;
use std::time::Instant;

use anyhow::{Result, bail};
use clap::{Args, ValueEnum};
use ctrack_core::{Config, CtAction, FragConfig, LinkType, Stats, Time, Tracker, Verdict};
use ctrack_policy::firewall::{Action, BurstOut, Decision, Firewall, FwStats};
use ctrack_policy::key::Key;
use ctrack_policy::model::{AclAction, Policy};
use ctrack_wire::tcp::flags::{ACK, PSH, SYN};
use serde::Serialize;

use super::cps::{Latency, Proto, histogram};
use super::{Machine, median, packets};
use crate::args::{MAX_RUNS, MAX_THREADS, bounded};

mod oneway;
mod policies;
mod threaded;
use policies::{acl, persisting, policy, related_firewall};
use threaded::threaded_runs;

/// What `ctrack bench policy` measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum What {
    /// The firewall stage on established traffic, against a plain lookup.
    Stage,
    /// Single pass against two passes (recirculation).
    Passes,
    /// allow-stateless against allow-related.
    Stateless,
    /// The classifier on first packets.
    Classify,
    /// A policy change with every connection live.
    Reload,
    /// One-way UDP (`+new` packets), by connections' words against ACLs.
    Oneway,
}

/// Arguments of `ctrack bench policy`.
#[derive(Debug, Args)]
pub struct PolicyBenchArgs {
    /// What to measure.
    #[arg(value_enum)]
    pub what: What,
    /// Connections (1 to 10000000).
    #[arg(long, default_value_t = 10_000, value_parser = bounded(1u64, 10_000_000))]
    pub conns: u64,
    /// ACLs in the policy (1 to 100000); for `classify`, a comma-separated
    /// list of rule counts.
    #[arg(long, default_value = "1", value_delimiter = ',')]
    pub acls: Vec<usize>,
    /// Packets per run (1 to 100000000).
    #[arg(long, default_value_t = 4_000_000, value_parser = bounded(1u64, 100_000_000))]
    pub packets: u64,
    /// Runs; medians are reported (1 to 1000).
    #[arg(long, default_value_t = 5, value_parser = bounded(1, MAX_RUNS))]
    pub runs: usize,
    /// The connections' protocol (`stage`, `passes`, `stateless`,
    /// `reload`): UDP, or TCP opened by a three-way handshake, each
    /// packet after it carrying data.
    #[arg(long, value_enum, default_value_t = Proto::Udp)]
    pub proto: Proto,
    /// The ACLs in front of the one that admits the traffic (`stage`,
    /// `passes`, `stateless`, `reload`): `simple`, drops of /32 sources
    /// to single ports that the traffic never matches (one tuple, the
    /// classifier's cheapest case); or `realistic`, the rule shapes of
    /// `classify` (prefix-length and port-range mixes, both families),
    /// each allowing what it matches, as a security group's rules do.
    #[arg(long, value_enum, default_value_t = RuleSet::Simple)]
    pub rules: RuleSet,
    /// Distinct frames a run cycles over (`stage`, `passes`, `stateless`;
    /// 1 to 1048576): by default as many as `--packets`, at most 1048576
    /// (64 MiB of frames, far from cache). A datapath receives into a ring
    /// of a few thousand buffers that stay warm: `--ring 16384` is such a
    /// ring (1 MiB of frames) and, at 10k connections, still every
    /// connection in each pass.
    #[arg(long, value_parser = bounded(1u64, 1 << 20))]
    pub ring: Option<u64>,
    /// Threads (`stage`; 1 to 1024): each sends `--packets` packets a
    /// run from its own ring (the same connections, from another place
    /// in the ring) through the one firewall, then through the one plain
    /// tracker; rates are the threads' total.
    #[arg(long, default_value_t = 1, value_parser = bounded(1, MAX_THREADS))]
    pub threads: usize,
    /// With `--threads`: each thread sends only its own connections
    /// (those numbered its own modulo the threads), both directions, as
    /// workers fed by a symmetric flow hash would; no connection's
    /// record is then written by two threads. Needs at least as many
    /// connections as threads.
    #[arg(long)]
    pub affine: bool,
    /// Each port with port security (`port_security`) on the traffic's
    /// addresses, the client's MAC with 10.0.0.0/8 and the server's with
    /// 172.16.0.0/12 (with `--ipv6`, their twins fd00::a00:0/104 and
    /// fd00::ac10:0/108), checked on every packet (`stage`, `passes`,
    /// `reload`, and `stateless`'s allow-related firewall).
    #[arg(long)]
    pub port_security: bool,
    /// The connections over IPv6 (`stage`, `passes`, `stateless`,
    /// `reload`, `oneway`): the same connections between fd00::/16
    /// addresses that embed their IPv4 ones, the ACLs in front of IPv6
    /// (with `--rules simple`), and port security on the twin networks.
    #[arg(long)]
    pub ipv6: bool,
    /// The ACLs that allow the connections with `persist-established`
    /// (`stage`, `reload`): each connection keeps its ACL's identity in
    /// its label, which a policy change reads when it judges the
    /// connection again.
    #[arg(long)]
    pub persist: bool,
}

/// The traffic of a run: its protocol, and whether over IPv6.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Traffic {
    proto: Proto,
    v6: bool,
}

impl Traffic {
    fn of(a: &PolicyBenchArgs) -> Traffic {
        Traffic {
            proto: a.proto,
            v6: a.ipv6,
        }
    }
}

/// The ACLs of `ctrack bench policy` in front of the admitting one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum RuleSet {
    /// Drops of /32 sources to single ports, never matched.
    Simple,
    /// The classifier benchmark's realistic shapes, as allows.
    Realistic,
}

const CLIENT_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x01];
const SERVER_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x02];
const BURST: usize = 32;

/// Runs `ctrack bench policy`.
pub(crate) fn run(a: &PolicyBenchArgs, json: bool, out: &mut dyn Write) -> Result<()> {
    if a.acls.is_empty() || a.acls.iter().any(|&n| n == 0 || n > 100_000) {
        bail!("--acls must be from 1 to 100000");
    }
    if a.threads > 1 && a.what != What::Stage {
        bail!("--threads applies to `stage` only");
    }
    if a.affine && (a.what != What::Stage || a.threads == 1) {
        bail!("--affine applies to `stage --threads N` only");
    }
    if a.affine && a.conns < a.threads as u64 {
        bail!("--affine needs at least as many connections as threads");
    }
    let report = match a.what {
        What::Stage => stage(a)?,
        What::Passes => passes(a)?,
        What::Stateless => stateless(a)?,
        What::Classify => classify(a)?,
        What::Reload => reload(a)?,
        What::Oneway => oneway::oneway(a)?,
    };
    if json {
        serde_json::to_writer_pretty(&mut *out, &report)?;
        writeln!(out)?;
    } else {
        writeln!(out, "{}", report.text)?;
    }
    Ok(())
}

#[derive(Debug, Serialize)]
struct Report {
    bench: String,
    figures: serde_json::Value,
    #[serde(skip)]
    text: String,
    machine: Machine,
}

/// An established packet of connection `i` with the ports' MACs: for
/// TCP, a segment of six bytes acknowledging the other side's handshake
/// (each side's first data; sent again, a retransmission, which the
/// window takes).
fn frame(t: Traffic, i: u64, reply: bool) -> Vec<u8> {
    let f = match (t.proto, reply) {
        (Proto::Udp, _) => packets::udp_of(i, reply, t.v6),
        (Proto::Tcp, false) => packets::tcp_of(i, false, (PSH | ACK, 1001, 5001), t.v6),
        (Proto::Tcp, true) => packets::tcp_of(i, true, (PSH | ACK, 5001, 1001), t.v6),
    };
    with_macs(f, reply)
}

/// The packets that open connection `i`, in order, each with whether it
/// is the answer: UDP's first packet and its answer, TCP's handshake.
fn opening(t: Traffic, i: u64) -> Vec<(Vec<u8>, bool)> {
    let tcp = |reply, fsa| with_macs(packets::tcp_of(i, reply, fsa, t.v6), reply);
    match t.proto {
        Proto::Udp => vec![(frame(t, i, false), false), (frame(t, i, true), true)],
        Proto::Tcp => vec![
            (tcp(false, (SYN, 1000, 0)), false),
            (tcp(true, (SYN | ACK, 5000, 1001)), true),
            (tcp(false, (ACK, 1001, 5001)), false),
        ],
    }
}

/// `f` with the client's and the server's MACs, as `reply` says.
fn with_macs(mut f: Vec<u8>, reply: bool) -> Vec<u8> {
    let (src, dst) = if reply {
        (SERVER_MAC, CLIENT_MAC)
    } else {
        (CLIENT_MAC, SERVER_MAC)
    };
    f[0..6].copy_from_slice(&dst);
    f[6..12].copy_from_slice(&src);
    f
}

/// The packets a run cycles over: connection `k × 7919 mod conns` for the
/// `k`-th, in both directions, so that consecutive packets are of
/// different connections; `--ring` of them, or as many as a run sends
/// (at most 2^20).
fn ring(a: &PolicyBenchArgs) -> Vec<Vec<u8>> {
    let (t, conns) = (Traffic::of(a), a.conns);
    let len = ring_len(a) as usize;
    (0..len as u64)
        .map(|k| frame(t, (k * 7919) % conns, k % 2 == 1))
        .collect()
}

/// Thread `t`'s ring with `--affine`: as [`ring`], over the connections
/// numbered `t` modulo the threads only.
fn own_ring(a: &PolicyBenchArgs, t: usize) -> Vec<Vec<u8>> {
    let n = a.threads as u64;
    let t = t as u64;
    let mine = (a.conns - t).div_ceil(n);
    (0..ring_len(a))
        .map(|k| frame(Traffic::of(a), (k * 7919) % mine * n + t, k % 2 == 1))
        .collect()
}

/// Frames in [`ring`].
fn ring_len(a: &PolicyBenchArgs) -> u64 {
    a.ring.unwrap_or(a.packets).min(1 << 20)
}

fn tracker() -> Tracker {
    Tracker::new(Config::default())
}

/// A firewall with `conns` connections of `proto` opened (every
/// connection's first packet, then every answer, ...).
fn firewall(p: Policy, conns: u64, t: Traffic) -> Result<Firewall<()>> {
    let fw = Firewall::new(tracker(), FragConfig::default(), p)?;
    let mut st = FwStats::default();
    for step in 0..opening(t, 0).len() {
        let mut frames: Vec<Vec<u8>> = (0..conns)
            .map(|i| opening(t, i).swap_remove(step).0)
            .collect();
        let passed = judge_all(&fw, &mut frames, &mut st);
        if passed != conns {
            bail!("{} of {conns} opening packets did not pass", conns - passed);
        }
    }
    if fw.tracker().table_len() as u64 != conns {
        bail!(
            "the firewall holds {} connections, not {conns}",
            fw.tracker().table_len()
        );
    }
    Ok(fw)
}

/// Runs `frames` through `fw` in bursts; returns how many passed.
fn judge_all(fw: &Firewall<()>, frames: &mut [Vec<u8>], st: &mut FwStats) -> u64 {
    let now = Time::from_secs(1);
    let mut decisions = vec![Decision::default(); BURST];
    let mut replies = Vec::new();
    // What passed, from the firewall's own counters: a pass over the
    // decisions here would be the bench's cost, not the firewall's, and
    // the plain lookup it is compared with reads none of its verdicts.
    let before = st.verdicts[Action::Allow as usize];
    for chunk in frames.chunks_mut(BURST) {
        let d = &mut decisions[..chunk.len()];
        fw.process_burst(
            chunk,
            now,
            BurstOut {
                decisions: d,
                replies: &mut replies,
                stats: st,
            },
        );
        replies.clear();
    }
    st.verdicts[Action::Allow as usize] - before
}

/// Packets per second of `f` over `runs` runs of `packets` packets, each
/// run over `ring` again and again.
fn rate(runs: usize, packets: u64, mut f: impl FnMut() -> u64) -> Result<(f64, Vec<f64>)> {
    let mut rates = Vec::with_capacity(runs);
    for _ in 0..runs {
        let start = Instant::now();
        let mut done = 0;
        while done < packets {
            done += f();
        }
        rates.push(done as f64 / start.elapsed().as_secs_f64() / 1e6);
    }
    Ok((median(&rates), rates))
}

/// A tracker holding `conns` opened connections of `proto` in zone 1,
/// and the lookup that finds them.
fn plain(conns: u64, traffic: Traffic) -> Tracker {
    let t = tracker();
    let mut s = Stats::default();
    for step in 0..opening(traffic, 0).len() {
        for i in 0..conns {
            t.process(
                &opening(traffic, i).swap_remove(step).0,
                LinkType::Ethernet,
                &CtAction::commit(1),
                Time::from_secs(1),
                &mut s,
            );
        }
    }
    t
}

/// One run of `packets` packets of `ring` through a plain lookup of
/// `t`, in bursts; packets per second (millions).
fn plain_run(t: &Tracker, refs: &[&[u8]], packets: u64, s: &mut Stats) -> Result<f64> {
    let (mpps, _) = rate(1, packets, || plain_pass(t, refs, s))?;
    Ok(mpps)
}

/// One pass of the plain lookup of `t` over `refs`, in bursts; the
/// frames sent.
fn plain_pass(t: &Tracker, refs: &[&[u8]], s: &mut Stats) -> u64 {
    let mut vs = [Verdict::default(); BURST];
    let action = CtAction::lookup(1);
    for chunk in refs.chunks(BURST) {
        t.process_burst(
            chunk,
            LinkType::Ethernet,
            &action,
            Time::from_secs(1),
            &mut vs[..chunk.len()],
            s,
        );
    }
    refs.len() as u64
}

fn fw_rate(
    fw: &Firewall<()>,
    ring: &mut [Vec<u8>],
    a: &PolicyBenchArgs,
) -> Result<(f64, Vec<f64>)> {
    let mut st = FwStats::default();
    let mut runs = Vec::with_capacity(a.runs);
    for _ in 0..a.runs {
        runs.push(fw_run(fw, ring, a.packets, &mut st)?);
    }
    Ok((median(&runs), runs))
}

/// One run of `packets` packets of `ring` through the firewall; packets
/// per second (millions). Every packet must pass.
fn fw_run(fw: &Firewall<()>, ring: &mut [Vec<u8>], packets: u64, st: &mut FwStats) -> Result<f64> {
    let n = ring.len() as u64;
    let mut bad = 0;
    let (mpps, _) = rate(1, packets, || {
        bad += n - judge_all(fw, ring, st);
        n
    })?;
    if bad > 0 {
        bail!("{bad} established packets did not pass the firewall");
    }
    Ok(mpps)
}

fn stage(a: &PolicyBenchArgs) -> Result<Report> {
    let t = plain(a.conns, Traffic::of(a));
    let mut rows = Vec::new();
    let mut text = format!(
        "firewall stage, established {}, {} connections, {} ACLs in front{}, a ring of {} frames, {}:\n",
        name(Traffic::of(a)),
        a.conns,
        rules_name(a.rules),
        if a.port_security {
            ", port security on both ports"
        } else {
            ""
        },
        ring_len(a),
        match a.threads {
            1 => "one core".to_string(),
            n => format!(
                "{n} threads{} (ns/packet: a thread's)",
                if a.affine {
                    ", each on connections of its own"
                } else {
                    ""
                }
            ),
        }
    );
    for &n in &a.acls {
        let fw = related_firewall(a, n)?;
        let mut r = if a.affine { own_ring(a, 0) } else { ring(a) };
        // The firewall and the plain lookup take turns, run by run, and the
        // cost is the median of each pair's ratio: a machine that slows
        // down or speeds up during the benchmark moves both of a pair.
        let (mut fw_runs, mut pl_runs, mut costs) = (Vec::new(), Vec::new(), Vec::new());
        let mut st = FwStats::default();
        let mut s = Stats::default();
        // With threads, each its own ring: the same frames from a place
        // of its own, or (`--affine`) the frames of its own connections.
        let mut rings: Vec<Vec<Vec<u8>>> = (1..a.threads)
            .map(|k| {
                if a.affine {
                    return own_ring(a, k);
                }
                let mut r = r.clone();
                let by = k * r.len() / a.threads;
                r.rotate_left(by);
                r
            })
            .collect();
        for _ in 0..a.runs {
            let (f, p) = if a.threads == 1 {
                let f = fw_run(&fw, &mut r, a.packets, &mut st)?;
                let refs: Vec<&[u8]> = r.iter().map(Vec::as_slice).collect();
                (f, plain_run(&t, &refs, a.packets, &mut s)?)
            } else {
                rings.push(std::mem::take(&mut r));
                let both = threaded_runs(&fw, &t, &mut rings, a.packets);
                r = rings.pop().unwrap_or_default();
                both?
            };
            fw_runs.push(f);
            pl_runs.push(p);
            costs.push(p / f);
        }
        let (fw_mpps, pl_mpps, cost) = (median(&fw_runs), median(&pl_runs), median(&costs));
        let per = a.threads as f64;
        let each = if a.threads == 1 {
            String::new()
        } else {
            format!(
                " ({:.2} / {:.2} Mpps a thread)",
                fw_mpps / per,
                pl_mpps / per
            )
        };
        text += &format!(
            "  {n:>6} ACLs: firewall {fw_mpps:.2} Mpps ({:.1} ns/packet), plain tracker lookup {pl_mpps:.2} Mpps{each}; firewall costs {cost:.2}x a lookup\n",
            1e3 * per / fw_mpps
        );
        rows.push(serde_json::json!({
            "acls": n, "firewall_mpps": fw_mpps, "firewall_runs": fw_runs,
            "lookup_mpps": pl_mpps, "lookup_runs": pl_runs, "cost_vs_lookup": cost,
            "cost_runs": costs, "firewall_mpps_per_thread": fw_mpps / per,
            "lookup_mpps_per_thread": pl_mpps / per,
        }));
    }
    Ok(report(
        "policy stage",
        serde_json::json!({"conns": a.conns, "proto": a.proto, "ipv6": a.ipv6, "rules": a.rules, "ring": ring_len(a), "threads": a.threads, "affine": a.affine, "rows": rows}),
        text,
    ))
}

fn name(t: Traffic) -> &'static str {
    match (t.proto, t.v6) {
        (Proto::Udp, false) => "UDP",
        (Proto::Tcp, false) => "TCP",
        (Proto::Udp, true) => "UDP over IPv6",
        (Proto::Tcp, true) => "TCP over IPv6",
    }
}

fn rules_name(r: RuleSet) -> &'static str {
    match r {
        RuleSet::Simple => "simple",
        RuleSet::Realistic => "realistic",
    }
}

fn report(bench: &str, figures: serde_json::Value, text: String) -> Report {
    Report {
        bench: bench.into(),
        figures,
        text,
        machine: Machine::this(),
    }
}

/// The recirculation model on the same engine: per packet, parse and
/// classify (`ct_state=-trk` → ct), track, then parse and classify again
/// on the ct state, as a recirculated packet re-enters the datapath
/// (seed 002's pipeline: parse, key build, match, action, then parse, key
/// build, match, action again); commit what is new. Returns packets
/// passed.
fn two_pass(fw: &Firewall<()>, ring: &[Vec<u8>], st: &mut Stats) -> u64 {
    let pol = fw.policy();
    let refs: Vec<&[u8]> = ring.iter().map(Vec::as_slice).collect();
    let mut vs = [Verdict::default(); BURST];
    let mut passed = 0;
    let action = CtAction::lookup(1);
    let key = |f: &[u8]| Key::from_frame(f, pol.port_at(f, 6), pol.port_at(f, 0));
    for chunk in refs.chunks(BURST) {
        for f in chunk {
            std::hint::black_box(pol.decide(&key(f)));
        }
        let vs = &mut vs[..chunk.len()];
        fw.tracker().process_burst(
            chunk,
            LinkType::Ethernet,
            &action,
            Time::from_secs(1),
            vs,
            st,
        );
        for (f, v) in chunk.iter().zip(vs.iter()) {
            // The second pass: the recirculated packet's key is built
            // again from its bytes and matched against the ACLs again,
            // now with ct_state.
            let d = pol.decide(&key(f));
            if v.state.contains(ctrack_core::CtState::EST) || d.allows() {
                passed += 1;
            }
        }
    }
    passed
}

fn passes(a: &PolicyBenchArgs) -> Result<Report> {
    let mut rows = Vec::new();
    let mut text = format!(
        "single pass against two passes, established {}, {} connections, {} ACLs in front, a ring of {} frames, one core:\n",
        name(Traffic::of(a)),
        a.conns,
        rules_name(a.rules),
        ring_len(a)
    );
    for &n in &a.acls {
        let fw = related_firewall(a, n)?;
        let mut r = ring(a);
        let (one, one_runs) = fw_rate(&fw, &mut r, a)?;
        let mut s = Stats::default();
        let len = r.len() as u64;
        let (two, two_runs) = rate(a.runs, a.packets, || {
            std::hint::black_box(two_pass(&fw, &r, &mut s));
            len
        })?;
        text += &format!(
            "  {n:>6} ACLs: single pass {one:.2} Mpps, two passes {two:.2} Mpps: single pass is {:.2}x\n",
            one / two
        );
        rows.push(serde_json::json!({
            "acls": n, "single_mpps": one, "single_runs": one_runs,
            "two_pass_mpps": two, "two_pass_runs": two_runs, "speedup": one / two,
        }));
    }
    Ok(report(
        "policy passes",
        serde_json::json!({"conns": a.conns, "proto": a.proto, "ipv6": a.ipv6, "rules": a.rules, "ring": ring_len(a), "rows": rows}),
        text,
    ))
}

fn stateless(a: &PolicyBenchArgs) -> Result<Report> {
    let mut rows = Vec::new();
    let mut text = format!(
        "allow-stateless against allow-related, {}, {} connections, {} ACLs in front, a ring of {} frames, one core:\n",
        name(Traffic::of(a)),
        a.conns,
        rules_name(a.rules),
        ring_len(a)
    );
    for &n in &a.acls {
        let related = related_firewall(a, n)?;
        let stateless = Firewall::new(
            tracker(),
            FragConfig::default(),
            policy(n, AclAction::AllowStateless, Traffic::of(a), a.rules),
        )?;
        let mut r = ring(a);
        let (rel, rel_runs) = fw_rate(&related, &mut r, a)?;
        let (sl, sl_runs) = fw_rate(&stateless, &mut r, a)?;
        text += &format!(
            "  {n:>6} ACLs: allow-related {rel:.2} Mpps, allow-stateless {sl:.2} Mpps: stateless is {:+.0}%\n",
            (sl / rel - 1.0) * 100.0
        );
        rows.push(serde_json::json!({
            "acls": n, "related_mpps": rel, "related_runs": rel_runs,
            "stateless_mpps": sl, "stateless_runs": sl_runs, "stateless_gain": sl / rel - 1.0,
        }));
    }
    Ok(report(
        "policy stateless",
        serde_json::json!({"conns": a.conns, "proto": a.proto, "ipv6": a.ipv6, "rules": a.rules, "ring": ring_len(a), "rows": rows}),
        text,
    ))
}

fn reload(a: &PolicyBenchArgs) -> Result<Report> {
    let n = a.acls[0];
    let fw = related_firewall(a, n)?;
    let mut st = FwStats::default();
    // Every connection once, original direction, in order.
    let mut all: Vec<Vec<u8>> = (0..a.conns)
        .map(|i| frame(Traffic::of(a), i, false))
        .collect();
    let mut before = histogram();
    let mut during = histogram();
    let now = Time::from_secs(1);
    let mut decisions = vec![Decision::default(); BURST];
    let mut replies = Vec::new();
    // Every packet must pass, before the change and after it.
    let mut blocked = 0;
    let mut burst = |fw: &Firewall<()>, chunk: &mut [Vec<u8>], st: &mut FwStats| -> u64 {
        let t = Instant::now();
        let d = &mut decisions[..chunk.len()];
        fw.process_burst(
            chunk,
            now,
            BurstOut {
                decisions: d,
                replies: &mut replies,
                stats: st,
            },
        );
        let ns = t.elapsed().as_nanos() as u64;
        blocked += d.iter().filter(|x| x.action != Action::Allow).count();
        ns
    };
    for chunk in all.chunks_mut(BURST) {
        before.record(burst(&fw, chunk, &mut st).max(1))?;
    }
    // The change: one more ACL, which leaves every connection allowed.
    let start = Instant::now();
    let generation = fw.set_policy(persisting(
        a,
        policy(n + 1, AclAction::AllowRelated, Traffic::of(a), a.rules),
    ))?;
    let swap = start.elapsed();
    for chunk in all.chunks_mut(BURST) {
        during.record(burst(&fw, chunk, &mut st).max(1))?;
    }
    let all_judged = start.elapsed();
    if blocked > 0 {
        bail!("{blocked} packets of allowed connections did not pass");
    }
    if st.rejudged < a.conns {
        bail!(
            "only {} of {} connections were judged again",
            st.rejudged,
            a.conns
        );
    }
    let (b, d) = (Latency::of(&before), Latency::of(&during));
    let text = format!(
        "policy change with {} live connections ({n} ACLs -> {}), one core:\n  swap {:.3} ms (generation {generation}); every connection judged again after {:.1} ms ({:.1} M connections/s)\n  batch of {BURST} latency p50/p99/p99.9: before {}/{}/{} ns, during {}/{}/{} ns",
        a.conns,
        n + 1,
        swap.as_secs_f64() * 1e3,
        all_judged.as_secs_f64() * 1e3,
        a.conns as f64 / all_judged.as_secs_f64() / 1e6,
        b.p50,
        b.p99,
        b.p999,
        d.p50,
        d.p99,
        d.p999
    );
    Ok(report(
        "policy reload",
        serde_json::json!({
            "conns": a.conns, "proto": a.proto, "ipv6": a.ipv6, "rules": a.rules, "acls": n, "persist": a.persist, "swap_ms": swap.as_secs_f64() * 1e3,
            "all_rejudged_ms": all_judged.as_secs_f64() * 1e3, "rejudged": st.rejudged,
            "batch_latency_before_ns": b, "batch_latency_during_ns": d,
        }),
        text,
    ))
}

fn classify(a: &PolicyBenchArgs) -> Result<Report> {
    use ctrack_policy::classify::{Classifier, r#gen};
    let mut rows = Vec::new();
    let mut text = String::from(
        "classifier on first packets, realistic ACL shapes (half the keys hit a rule), one core:\n",
    );
    for &n in &a.acls {
        let rules = r#gen::rules(n, 7);
        let keys = r#gen::keys(&rules, 1 << 16, 11);
        let mut compile = Vec::new();
        let mut cls = Classifier::new();
        for _ in 0..a.runs {
            let t = Instant::now();
            cls = Classifier::build(rules.iter().map(|(id, r, e)| (*id, *r, e)))?;
            compile.push(t.elapsed().as_secs_f64() * 1e3);
        }
        let compile_ms = median(&compile);
        let (mlps, runs) = rate(a.runs, a.packets, || {
            for k in &keys {
                std::hint::black_box(cls.classify(std::hint::black_box(k)));
            }
            keys.len() as u64
        })?;
        // One rule in and out again, many times: the median of each.
        let extra = r#gen::rules(200, 99);
        let (mut ins, mut del) = (Vec::new(), Vec::new());
        for (k, (_, rank, e)) in extra.iter().enumerate() {
            let id = n as u32 + 1 + k as u32;
            let t = Instant::now();
            cls.insert(id, *rank, e)?;
            ins.push(t.elapsed().as_secs_f64() * 1e6);
            let t = Instant::now();
            cls.remove(id);
            del.push(t.elapsed().as_secs_f64() * 1e6);
        }
        let s = cls.stats();
        text += &format!(
            "  {n:>6} rules: {mlps:.2} M classifications/s ({:.0} ns each); compile {compile_ms:.2} ms; insert one {:.1} us, remove one {:.1} us (medians); {} entries in {} tuples, {:.1} MiB\n",
            1e3 / mlps,
            median(&ins),
            median(&del),
            s.entries,
            s.tuples,
            s.memory as f64 / (1 << 20) as f64
        );
        rows.push(serde_json::json!({
            "rules": n, "mclassifications_per_s": mlps, "runs": runs,
            "compile_ms": compile_ms, "insert_us": median(&ins), "remove_us": median(&del),
            "entries": s.entries, "tuples": s.tuples, "longest_bucket": s.longest_bucket,
            "memory_bytes": s.memory,
        }));
    }
    Ok(report(
        "policy classify",
        serde_json::json!({"rows": rows}),
        text,
    ))
}
