//! `ctrack replay --policy FILE`: runs a capture through the firewall (the
//! policy on the tracker) and prints, per packet, the verdict, the ACL and
//! stage that decided and the ct state; then each ACL's counters, as
//! `ovs-ofctl dump-flows` shows `n_packets` and `n_bytes`.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use ctrack_core::{LinkType, Time, Tracker};
use ctrack_datapath::capture::Packet;
use ctrack_policy::firewall::{
    AclRef, Action, Compiled, Decision, DropReason, Firewall, FwOutputs, FwStats, Stage,
};
use ctrack_policy::model::Policy;
use ctrack_wire::parse_frame;
use serde::Serialize;

use crate::replay::reload::Reload;
use crate::replay::{
    Clock, CutShort, Format, PcapOut, ReplayArgs, frag_config, sweep, tracker_config,
};
use ctrack_wire::describe::describe;

/// The policies of `--reload`, loaded and compiled once up front so that
/// a bad file is refused before the replay starts, in packet order.
fn load_reloads(reloads: &[Reload]) -> Result<Vec<(u64, PathBuf, Policy)>> {
    let mut out = Vec::with_capacity(reloads.len());
    let mut last = 0;
    for r in reloads {
        if r.at <= last {
            bail!(
                "--reload {}:{}: packet numbers must increase ({} after {last})",
                r.at,
                r.path.display(),
                r.at
            );
        }
        last = r.at;
        let policy = Policy::load(&r.path).map_err(anyhow::Error::msg)?;
        Compiled::new(policy.clone(), 1)
            .map_err(|e| anyhow::anyhow!("{}: {e}", r.path.display()))?;
        out.push((r.at, r.path.clone(), policy));
    }
    Ok(out)
}

/// What the firewall carries with each packet.
#[derive(Debug, Clone, Copy)]
struct Tag {
    n: u64,
    ts: u64,
    cut: u32,
}

/// One packet's line in `--format json`: the contract's fields first.
#[derive(Serialize)]
struct PacketJson<'a> {
    packet: u64,
    verdict: &'static str,
    acl: &'a str,
    stage: &'static str,
    ct_state: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<&'static str>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    replied: bool,
    time: f64,
    summary: String,
}

/// A fragment held for reassembly, as it came, in `--format json`.
#[derive(Serialize)]
struct HeldJson {
    held: u64,
    time: f64,
    summary: String,
}

/// One ACL's counters in `--format json`.
#[derive(Serialize)]
struct AclJson<'a> {
    acl: &'a str,
    direction: &'static str,
    tier: u8,
    priority: Option<u16>,
    action: &'static str,
    n_packets: u64,
    n_bytes: u64,
    n_conns: u64,
    /// At a `--reload`: the packet the next policy takes over at (these
    /// are the outgoing policy's counters).
    #[serde(skip_serializing_if = "Option::is_none")]
    until_packet: Option<u64>,
}

/// Runs `ctrack replay`: under `--policy` through the firewall, else
/// through the tracker alone ([`crate::replay::run`]).
pub fn run(args: &ReplayArgs, out: &mut dyn Write) -> Result<()> {
    match &args.policy {
        Some(path) => run_policy(args, path, out),
        None => crate::replay::run(args, out),
    }
}

/// Runs the replay of `args.file` under the policy in `path`.
fn run_policy(args: &ReplayArgs, path: &Path, out: &mut dyn Write) -> Result<()> {
    let policy = Policy::load(path).map_err(anyhow::Error::msg)?;
    let frag = frag_config(args)?;
    let fw = Firewall::new(Tracker::new(tracker_config(args)), frag, policy)
        .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    fw.set_reject_limit(args.reject_rate, args.reject_burst);
    let mut reloads = load_reloads(&args.reload)?;
    reloads.reverse();
    let (mut reader, live) = crate::replay::open_capture(args)?;
    let mut r = Run {
        args,
        fw,
        outs: FwOutputs::default(),
        pcap: None,
        n: 0,
        first: None,
        now: Time::ZERO,
        next_sweep: Time::ZERO,
        log: LogCounts::default(),
        reloads,
        since: None,
        cut_short: CutShort::default(),
    };
    if args.format == Format::Human {
        writeln!(
            out,
            "{:>6} {:>12}  {:<58} {:<7} {:<20} {:<10} ct_state",
            "#", "time", "packet", "verdict", "acl", "stage"
        )?;
    }
    let result = loop {
        live.flush_if_waiting(out)?;
        match reader.next_packet() {
            Ok(Some(pkt)) => r.packet(&pkt, out)?,
            Ok(None) => break Ok(()),
            Err(e) => break Err(e),
        }
    };
    let (n, unused) = (r.n, r.reloads.last().map(|(at, p, _)| (*at, p.clone())));
    let note = r.cut_short.note(&args.file);
    r.finish(out)?;
    if let Some(note) = note {
        ctrack_datapath::say(&note);
    }
    result.with_context(|| format!("{}", args.file.display()))?;
    if let Some((at, path)) = unused {
        bail!(
            "--reload {at}:{}: the capture has {n} packets, so that policy never took over",
            path.display()
        );
    }
    Ok(())
}

struct Run<'a> {
    args: &'a ReplayArgs,
    fw: Firewall<Tag>,
    outs: FwOutputs<Tag>,
    pcap: Option<PcapOut>,
    n: u64,
    first: Option<u64>,
    now: Time,
    next_sweep: Time,
    log: LogCounts,
    /// The `--reload`s still to come, the next last.
    reloads: Vec<(u64, PathBuf, Policy)>,
    /// The packet the policy in force took over at, if a reload put it
    /// there.
    since: Option<u64>,
    /// Packets a snapshot length cut short and made invalid.
    cut_short: CutShort,
}

/// The ACL log's lines: written, and kept back by the ACLs' meters.
#[derive(Debug, Default, Clone, Copy)]
struct LogCounts {
    lines: u64,
    suppressed: u64,
}

impl Run<'_> {
    /// Whether decision `d` on a frame of `bytes` bytes gets an ACL log
    /// line: its ACL logs, and its meter, if it has one, allows the line
    /// at the replay's clock (an ACL without a meter logs every decision,
    /// as in OVN).
    fn logs(&mut self, pol: &Compiled, d: &Decision, bytes: usize) -> bool {
        if !d.log {
            return false;
        }
        let ok = pol.log_metered(d.acl, self.now, bytes).unwrap_or(true);
        self.log.lines += u64::from(ok);
        self.log.suppressed += u64::from(!ok);
        ok
    }

    fn packet(&mut self, pkt: &Packet<'_>, out: &mut dyn Write) -> Result<()> {
        self.n += 1;
        if self.reloads.last().is_some_and(|r| r.0 == self.n) {
            self.reload(out)?;
        }
        if pkt.link != LinkType::Ethernet {
            bail!(
                "{}: packet {}: a policy needs Ethernet frames (ports are told apart by MAC); this capture's link type is {}",
                self.args.file.display(),
                self.n,
                pkt.link
            );
        }
        let first = *self.first.get_or_insert(pkt.ts_nanos);
        self.now = match self.args.clock {
            Clock::Capture => Time::from_nanos(pkt.ts_nanos),
            Clock::Fixed => Time::from_nanos(first),
        };
        if self.now >= self.next_sweep {
            self.next_sweep = sweep(self.fw.tracker(), self.now, &mut self.outs.stats.tracker);
        }
        if self.pcap.is_none()
            && let Some(p) = &self.args.write
        {
            self.pcap = Some(PcapOut::create(p, LinkType::Ethernet)?);
        }
        let tag = Tag {
            n: self.n,
            ts: pkt.ts_nanos,
            cut: pkt.orig_len.saturating_sub(pkt.data.len() as u32),
        };
        self.outs.out.clear();
        self.outs.dropped.clear();
        self.fw
            .process(pkt.data.to_vec(), tag, self.now, &mut self.outs);
        let pol = self.fw.policy();
        let outs = std::mem::take(&mut self.outs.out);
        for o in &outs {
            let what = describe(&o.frame, &parse_frame(&o.frame, LinkType::Ethernet));
            let line = Line {
                n: o.tag.n,
                rel: o.tag.ts.saturating_sub(first) as f64 / 1e9,
                what: &what,
                d: &o.decision,
                replied: o.reply.is_some(),
                log: self.logs(&pol, &o.decision, o.frame.len()),
            };
            write_line(out, self.args.format, &pol, &line)?;
            let cs = &mut self.cut_short;
            cs.see(o.tag.n, &o.frame, LinkType::Ethernet, o.tag.cut);
            if let Some(w) = self.pcap.as_mut() {
                if o.decision.action == Action::Allow {
                    w.write(o.tag.ts, &o.frame, o.tag.cut)?;
                }
                if let Some(reply) = &o.reply {
                    w.write(o.tag.ts, reply, 0)?;
                }
            }
        }
        self.outs.out = outs;
        for (t, why) in &self.outs.dropped {
            let d = Decision {
                action: Action::Drop,
                stage: Stage::Session,
                acl: AclRef::Invalid,
                reason: Some(DropReason::Fragment),
                ct: None,
                log: false,
            };
            let what = format!("fragment dropped: {}", why.name());
            let line = Line {
                n: t.n,
                rel: t.ts.saturating_sub(first) as f64 / 1e9,
                what: &what,
                d: &d,
                replied: false,
                log: false,
            };
            write_line(out, self.args.format, &pol, &line)?;
        }
        let decided = self.outs.out.iter().any(|o| o.tag.n == self.n)
            || self.outs.dropped.iter().any(|(t, _)| t.n == self.n);
        if !decided {
            self.held(out, pkt, first)?;
        }
        Ok(())
    }

    /// The line of packet `self.n`, a fragment the reassembler holds: its
    /// verdict comes with its datagram's (a line of its own then), or,
    /// if the datagram never completes, as a fragment's drop when its
    /// time runs out. Left out of the `ovs` format, which gives verdicts.
    fn held(&self, out: &mut dyn Write, pkt: &Packet<'_>, first: u64) -> Result<()> {
        let summary = describe(pkt.data, &parse_frame(pkt.data, LinkType::Ethernet));
        let time = pkt.ts_nanos.saturating_sub(first) as f64 / 1e9;
        match self.args.format {
            Format::Json => {
                let held = HeldJson {
                    held: self.n,
                    time,
                    summary,
                };
                serde_json::to_writer(&mut *out, &held)?;
                writeln!(out)?;
            }
            Format::Ovs => {}
            Format::Human => writeln!(
                out,
                "{:>6} {time:>12.6}  {summary:<58} (fragment held)",
                self.n
            )?,
        }
        Ok(())
    }

    /// The next `--reload`: the outgoing policy's counters, then the new
    /// policy in force from this packet on.
    fn reload(&mut self, out: &mut dyn Write) -> Result<()> {
        let Some((at, path, policy)) = self.reloads.pop() else {
            return Ok(());
        };
        self.counters(out, Some(at))?;
        let generation = self
            .fw
            .set_policy(policy)
            .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
        self.since = Some(at);
        let file = path.display().to_string();
        match self.args.format {
            Format::Json => {
                let change = ReloadJson {
                    reload: at,
                    policy: &file,
                    generation,
                };
                serde_json::to_writer(&mut *out, &change)?;
                writeln!(out)?;
            }
            Format::Ovs => {}
            Format::Human => writeln!(
                out,
                "\npolicy {file} in force from packet {at} (generation {generation}): connections are judged again at their next packet\n"
            )?,
        }
        Ok(())
    }

    /// The ACL counters of the policy in force: at a reload (`until`, the
    /// packet the next takes over at) or at the end.
    fn counters(&self, out: &mut dyn Write, until: Option<u64>) -> Result<()> {
        let pol = self.fw.policy();
        let st = &self.outs.stats;
        // Counters a worker has not yet synced to a new generation are
        // none of this policy's.
        let fresh = st.generation == pol.generation;
        let mut rows: Vec<AclJson<'_>> = Vec::new();
        for (i, a) in pol.policy.acls.iter().enumerate() {
            let c = st
                .acls
                .get(i)
                .copied()
                .filter(|_| fresh)
                .unwrap_or_default();
            rows.push(AclJson {
                acl: &a.name,
                direction: a.direction.name(),
                tier: a.tier,
                priority: Some(a.priority),
                action: a.action.name(),
                n_packets: c.packets,
                n_bytes: c.bytes,
                n_conns: c.conns,
                until_packet: until,
            });
        }
        let default = match pol.policy.default {
            ctrack_policy::model::DefaultAction::Allow => "allow",
            ctrack_policy::model::DefaultAction::Drop => "drop",
        };
        for (d, dir) in ["from-lport", "to-lport"].iter().enumerate() {
            let c = if fresh {
                st.defaults[d]
            } else {
                Default::default()
            };
            rows.push(AclJson {
                acl: "default",
                direction: dir,
                tier: 0,
                priority: None,
                action: default,
                n_packets: c.packets,
                n_bytes: c.bytes,
                n_conns: c.conns,
                until_packet: until,
            });
        }
        match self.args.format {
            Format::Json => {
                for r in &rows {
                    serde_json::to_writer(&mut *out, r)?;
                    writeln!(out)?;
                }
            }
            Format::Ovs => {}
            Format::Human => {
                match (self.since, until) {
                    (None, None) => writeln!(out, "\nACL counters:")?,
                    (Some(a), None) => writeln!(out, "\nACL counters, from packet {a}:")?,
                    (None, Some(b)) => writeln!(out, "\nACL counters, until packet {b}:")?,
                    (Some(a), Some(b)) => {
                        writeln!(out, "\nACL counters, from packet {a} until packet {b}:")?
                    }
                }
                for r in &rows {
                    writeln!(
                        out,
                        " {:<10} tier={} priority={:<5} {:<20} n_packets={}, n_bytes={}, n_conns={}, actions={}",
                        r.direction,
                        r.tier,
                        r.priority.map_or("-".into(), |p| p.to_string()),
                        r.acl,
                        r.n_packets,
                        r.n_bytes,
                        r.n_conns,
                        r.action
                    )?;
                }
            }
        }
        Ok(())
    }

    fn finish(mut self, out: &mut dyn Write) -> Result<()> {
        if let Some(w) = self.pcap.take() {
            w.finish()?;
        }
        let pol = self.fw.policy();
        let st = &self.outs.stats;
        match self.args.format {
            Format::Json => {
                self.counters(out, None)?;
                serde_json::to_writer(&mut *out, &summary(&self.fw, st, self.log))?;
                writeln!(out)?;
            }
            _ => {
                self.counters(out, None)?;
                let s = summary(&self.fw, st, self.log);
                writeln!(out, "\nverdicts: {}", serde_json::to_string(&s.verdicts)?)?;
                writeln!(out, "stages: {}", serde_json::to_string(&s.stages)?)?;
                writeln!(out, "drops: {}", serde_json::to_string(&s.drops)?)?;
                writeln!(
                    out,
                    "rejects: sent {}, suppressed {}; connections re-judged: {}; connections now: {}",
                    s.rejects_sent, s.rejects_suppressed, s.rejudged, s.connections
                )?;
                if s.fragments_held > 0 {
                    writeln!(
                        out,
                        "fragments still held at the end, never decided: {}",
                        s.fragments_held
                    )?;
                }
                if pol.policy.acls.iter().any(|a| a.log) {
                    writeln!(
                        out,
                        "acl log: {} lines, {} kept back by meters",
                        s.log_lines, s.log_suppressed
                    )?;
                }
            }
        }
        out.flush()?;
        Ok(())
    }
}

/// `--reload`'s line in `--format json`: the policy that takes over.
#[derive(Serialize)]
struct ReloadJson<'a> {
    /// The packet it takes over at.
    reload: u64,
    /// Its file.
    policy: &'a str,
    /// Its generation (the first policy's is 1).
    generation: u32,
}

#[derive(Serialize)]
struct Summary {
    verdicts: std::collections::BTreeMap<&'static str, u64>,
    stages: std::collections::BTreeMap<&'static str, u64>,
    drops: std::collections::BTreeMap<&'static str, u64>,
    rejects_sent: u64,
    rejects_suppressed: u64,
    rejudged: u64,
    connections: usize,
    /// Fragments the reassembler holds at the end: never decided.
    fragments_held: u64,
    /// ACL log lines written (on standard error).
    log_lines: u64,
    /// ACL log lines the ACLs' meters kept back.
    log_suppressed: u64,
}

fn summary(fw: &Firewall<Tag>, st: &FwStats, log: LogCounts) -> Summary {
    let verdicts = [Action::Allow, Action::Drop, Action::Reject]
        .iter()
        .map(|a| (a.name(), st.verdicts[*a as usize]))
        .collect();
    let stages = Stage::ALL
        .iter()
        .map(|s| (s.name(), st.stages[*s as usize]))
        .collect();
    let drops = DropReason::ALL
        .iter()
        .map(|r| (r.name(), st.drops[*r as usize]))
        .filter(|(_, n)| *n > 0)
        .collect();
    Summary {
        verdicts,
        stages,
        drops,
        rejects_sent: st.rejects_sent,
        rejects_suppressed: st.rejects_suppressed,
        rejudged: st.rejudged,
        connections: fw.tracker().table_len(),
        fragments_held: fw.reassembler().stats().held,
        log_lines: log.lines,
        log_suppressed: log.suppressed,
    }
}

/// One packet's line.
struct Line<'a> {
    n: u64,
    rel: f64,
    what: &'a str,
    d: &'a Decision,
    replied: bool,
    /// An ACL log line goes with it.
    log: bool,
}

fn write_line(out: &mut dyn Write, format: Format, pol: &Compiled, line: &Line<'_>) -> Result<()> {
    let d = line.d;
    let acl = pol.acl_name(d.acl);
    let ct = d.ct.map(|v| v.state.to_string());
    if line.log {
        // OVN's ACL log line (ovn-controller's acl_log), on stderr.
        let head = ctrack_datapath::acllog::head((acl, pol.acl_severity(d.acl)), d);
        ctrack_datapath::say(&format!("{head}: packet {}: {}", line.n, line.what));
    }
    match format {
        Format::Json => {
            serde_json::to_writer(
                &mut *out,
                &PacketJson {
                    packet: line.n,
                    verdict: d.action.name(),
                    acl,
                    stage: d.stage.name(),
                    ct_state: ct,
                    reason: d.reason.map(DropReason::name),
                    replied: line.replied,
                    time: line.rel,
                    summary: line.what.to_string(),
                },
            )?;
            writeln!(out)?;
        }
        Format::Ovs => writeln!(out, "{}: {}", line.n, d.action.name())?,
        Format::Human => writeln!(
            out,
            "{:>6} {:>12.6}  {:<58} {:<7} {:<20} {:<10} {}{}",
            line.n,
            line.rel,
            line.what,
            d.action.name(),
            acl,
            d.stage.name(),
            ct.as_deref().unwrap_or("-"),
            match (d.reason, line.replied) {
                (Some(r), true) => format!(" ({}, answered)", r.name()),
                (Some(r), false) => format!(" ({})", r.name()),
                _ => String::new(),
            }
        )?,
    }
    Ok(())
}
