//! `ctrack replay`: runs a capture through the tracker and prints what it
//! decides for every packet, then the connection table.

mod files;
mod json;
pub(crate) mod reload;

use std::collections::HashMap;
use std::io::{self, Write};
use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::{Args, ValueEnum};
use ctrack_core::frag::{FragConfig, MAX_FRAGS_LIMIT, MIN_FRAG_LIMIT};
use ctrack_core::{
    Config, ConnId, CtAction, Entry, FragError, FragStats, InvalidReason, LinkType, Out, Outputs,
    Pipeline, Stats, Time, Tracker, Verdict,
};
use ctrack_datapath::capture::Packet;
use ctrack_wire::parse_frame;

use crate::args::{MAX_CONNS, bounded};
use ctrack_wire::describe::describe;
pub(crate) use files::{CutShort, PcapOut, open_capture};
use json::{ConnJson, CountersJson, DroppedJson, PacketJson, StatsJson};

/// Output formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// One line per packet with its summary and state, then the connection
    /// table and counters.
    Human,
    /// Exactly what `ovstest test-conntrack pcap FILE` prints: `N: state`.
    Ovs,
    /// One JSON object per packet, then one per connection, then one with
    /// the counters (JSON Lines).
    Json,
}

/// Where the tracker's clock comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Clock {
    /// Each packet's own capture timestamp.
    Capture,
    /// Every packet at the first packet's time: nothing expires. This is
    /// what `ovstest test-conntrack pcap` effectively does, reading the wall
    /// clock while it replays a capture in milliseconds.
    Fixed,
}

/// Arguments of `ctrack replay`.
#[derive(Debug, Args)]
pub struct ReplayArgs {
    /// The capture (pcap or pcapng; Ethernet, raw IP or Linux cooked);
    /// `-` for standard input (`tcpdump -U -w - | ctrack replay -`).
    pub file: PathBuf,
    /// The `ct` action applied to every packet, in the form Open vSwitch
    /// users write inside `ct(...)`: e.g. `commit,zone=5,mark=0x1/0xff,
    /// nat(src=10.0.0.1-10.0.0.9:20000-20100,random),alg=ftp`. Without it:
    /// `commit` in `--zone`.
    #[arg(long, value_name = "ACTION", value_parser = parse_action, conflicts_with_all = ["zone", "no_commit"])]
    pub ct: Option<CtAction>,
    /// Enforce this policy (OVN-style ACLs in TOML or JSON; see
    /// docs/policy.md): each packet's line then gives its verdict (allow,
    /// drop, reject), the ACL and stage that decided and its ct state, and
    /// the end each ACL's counters. `--write` then writes what passes and
    /// the answers `reject` sends.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["ct", "zone", "no_commit"])]
    pub policy: Option<PathBuf>,
    /// Track every packet in this zone.
    #[arg(long, default_value_t = 0)]
    pub zone: u16,
    /// Look connections up without committing new ones.
    #[arg(long)]
    pub no_commit: bool,
    /// Write the packets as they leave (translated, fragments as they came)
    /// to this pcap file, with the link type of the capture (not a file
    /// the replay reads: the capture or a policy).
    #[arg(long, value_name = "OUT.pcap")]
    pub write: Option<PathBuf>,
    /// Do not reassemble IP fragments (they are then invalid).
    #[arg(long)]
    pub no_reassembly: bool,
    /// Most fragments held for reassembly (at most 5000).
    #[arg(long, value_name = "N", default_value_t = ctrack_core::frag::DEFAULT_MAX_FRAGS,
          value_parser = bounded(0, MAX_FRAGS_LIMIT))]
    pub max_frags: usize,
    /// Smallest IPv4 fragment but the last, in bytes of IP packet (400 to
    /// 65535).
    #[arg(long, value_name = "BYTES", default_value_t = ctrack_core::frag::DEFAULT_MIN_V4,
          value_parser = bounded(MIN_FRAG_LIMIT, MAX_MIN_FRAG))]
    pub min_frag_v4: usize,
    /// Smallest IPv6 fragment but the last (400 to 65535).
    #[arg(long, value_name = "BYTES", default_value_t = ctrack_core::frag::DEFAULT_MIN_V6,
          value_parser = bounded(MIN_FRAG_LIMIT, MAX_MIN_FRAG))]
    pub min_frag_v6: usize,
    /// Do not check TCP sequence numbers and windows.
    #[arg(long)]
    pub no_tcp_seq_check: bool,
    /// Only a SYN opens a TCP connection (Linux nf_conntrack_tcp_loose=0);
    /// by default any segment but a SYN-ACK may, as in Open vSwitch.
    #[arg(long)]
    pub no_tcp_loose: bool,
    /// Do not verify IP and transport checksums.
    #[arg(long)]
    pub no_checksum: bool,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Human)]
    pub format: Format,
    /// Clock to track with.
    #[arg(long, value_enum, default_value_t = Clock::Capture)]
    pub clock: Clock,
    /// Most connections to hold (1 to 536870912); at the limit a commit
    /// evicts an unestablished connection, else is refused.
    #[arg(long, value_name = "N", default_value_t = ctrack_core::track::DEFAULT_MAX_CONNS,
          value_parser = bounded(1, MAX_CONNS))]
    pub max_conns: usize,
    /// With `--policy`: `reject` answers a second on the replay's clock,
    /// as `ctrack run --reject-rate` (more rejected packets get none); a
    /// policy's `[copp] reject` meter in its place, as there.
    #[arg(long, value_name = "N", default_value_t = ctrack_policy::reject::DEFAULT_RATE,
          requires = "policy")]
    pub reject_rate: u32,
    /// With `--policy`: `reject` answers at once, as `ctrack run
    /// --reject-burst`.
    #[arg(long, value_name = "N", default_value_t = ctrack_policy::reject::DEFAULT_BURST,
          requires = "policy")]
    pub reject_burst: u32,
    /// With `--policy`: before packet N (numbered as the lines are, from
    /// 1), replace the policy with FILE, as `ctrack run` does on SIGHUP:
    /// connections are judged again at their next packet, and one the new
    /// policy no longer allows is blocked (dropped, `blocked`) unless an
    /// ACL with `persist-established` committed it and the new policy
    /// still has that ACL (by name). The outgoing policy's
    /// counters are printed there. May be given again, N increasing.
    #[arg(long, value_name = "N:FILE", value_parser = reload::parse_reload,
          requires = "policy")]
    pub reload: Vec<reload::Reload>,
}

/// The largest minimum fragment size: an IP packet is at most 65535 bytes
/// (IPv6: of payload), so a larger minimum would refuse every fragment.
const MAX_MIN_FRAG: usize = 65535;

/// How many connections a sweep may look at between two packets.
const SWEEP_BUDGET: usize = 4096;

/// Sweeps `tracker`'s expired connections at `now` and says when the
/// next sweep is due: when the sweep says (the end of the next second
/// that holds expiries, or at once if its budget ran out), but at most a
/// second of capture time later, so that a connection committed after
/// this sweep (the sweep of an empty table knows of none) is freed within
/// a second of its expiry, and a long capture's table holds no more than
/// its live connections and a second's worth of expired ones.
pub(crate) fn sweep(tracker: &Tracker, now: Time, stats: &mut Stats) -> Time {
    let s = tracker.sweep(now, SWEEP_BUDGET, stats);
    s.next
        .unwrap_or(Time::MAX)
        .min(now + ctrack_core::Millis(1000))
}

fn parse_action(s: &str) -> Result<CtAction, String> {
    s.parse::<CtAction>().map_err(|e| e.to_string())
}

/// The tracker's configuration `args` ask for.
pub(crate) fn tracker_config(args: &ReplayArgs) -> Config {
    Config {
        tcp_seq_check: !args.no_tcp_seq_check,
        tcp_loose: !args.no_tcp_loose,
        checksums: !args.no_checksum,
        max_conns: args.max_conns,
        ..Config::default()
    }
}

/// The reassembler's configuration `args` ask for.
pub(crate) fn frag_config(args: &ReplayArgs) -> Result<FragConfig> {
    let frag = FragConfig {
        v4: !args.no_reassembly,
        v6: !args.no_reassembly,
        max_frags: args.max_frags,
        min_v4: args.min_frag_v4,
        min_v6: args.min_frag_v6,
        ..FragConfig::default()
    };
    frag.validate().map_err(anyhow::Error::msg)?;
    Ok(frag)
}

/// What the pipeline carries with each packet.
#[derive(Debug, Clone, Copy)]
struct Tag {
    /// Packet number in the capture (from 1).
    n: u64,
    /// Bytes the capture left out of it (original length minus captured).
    cut: u32,
}

/// What became of one packet of the capture.
enum Fate<'a> {
    /// Tracked (alone, or as the last fragment of a datagram whose
    /// fragments' packet numbers follow).
    Out(&'a Out<Tag>, Vec<u64>),
    /// A fragment held.
    Held,
    /// A fragment dropped.
    Dropped(FragError),
}

impl<'a> Fate<'a> {
    /// The fate of packet `n`, given the packets that left and the
    /// fragments dropped while tracking it.
    fn of(n: u64, outs: &'a [Out<Tag>], dropped: &[(Tag, FragError)]) -> Self {
        match outs.iter().find(|o| o.tag.n == n) {
            Some(o) => {
                let others: Vec<u64> = if outs.len() > 1 {
                    outs.iter().map(|o| o.tag.n).collect()
                } else {
                    Vec::new()
                };
                Fate::Out(o, others)
            }
            None => match dropped.iter().find(|(t, _)| t.n == n) {
                Some((_, why)) => Fate::Dropped(*why),
                None => Fate::Held,
            },
        }
    }
}

/// Numbers connections in the order they are first seen. A connection id
/// is reused once its connection is gone, so a commit always takes a new
/// number.
#[derive(Default)]
struct Numbering {
    ids: HashMap<ConnId, u64>,
    next: u64,
}

impl Numbering {
    fn number(&mut self, id: ConnId) -> u64 {
        match self.ids.get(&id) {
            Some(n) => *n,
            None => self.renumber(id),
        }
    }

    fn renumber(&mut self, id: ConnId) -> u64 {
        self.next += 1;
        self.ids.insert(id, self.next);
        self.next
    }

    fn see(&mut self, v: &Verdict) {
        if let (Some(id), true) = (v.conn, v.committed) {
            self.renumber(id);
        }
    }
}

/// Runs the replay, writing to `out`. A capture error is returned after
/// everything before it was printed.
pub fn run(args: &ReplayArgs, out: &mut dyn Write) -> Result<()> {
    let (mut reader, live) = open_capture(args)?;
    let mut replay = Replay::new(args)?;
    if args.format == Format::Human {
        writeln!(
            out,
            "{:>6} {:>12}  {:<58} {:<18} conn",
            "#", "time", "packet", "ct_state"
        )?;
    }
    let result = loop {
        live.flush_if_waiting(out)?;
        match reader.next_packet() {
            Ok(Some(pkt)) => replay.packet(&pkt, out)?,
            Ok(None) => break Ok(()),
            Err(e) => break Err(e),
        }
    };
    let note = replay.cut_short.note(&args.file);
    replay.finish(out)?;
    if let Some(note) = note {
        ctrack_datapath::say(&note);
    }
    result.with_context(|| format!("{}", args.file.display()))
}

/// A replay under way: the pipeline and everything carried from one packet
/// of the capture to the next.
struct Replay<'a> {
    args: &'a ReplayArgs,
    pipeline: Pipeline<Tag>,
    /// The `ct` action applied to every packet.
    action: CtAction,
    /// The `--write` file, created at the first packet (it takes that
    /// packet's link type).
    pcap_out: Option<PcapOut>,
    numbering: Numbering,
    /// Packets read so far; the number of the last one.
    n: u64,
    /// Capture time of the first packet and of the last one.
    first_ns: Option<u64>,
    last_ns: u64,
    /// The tracker's clock, and when it next sweeps.
    now: Time,
    next_sweep: Time,
    /// The frames leaving, the fragments dropped, and the counters of this
    /// one worker.
    po: Outputs<Tag>,
    /// Packets a snapshot length cut short and made invalid.
    cut_short: CutShort,
}

impl<'a> Replay<'a> {
    fn new(args: &'a ReplayArgs) -> Result<Self> {
        let config = tracker_config(args);
        let frag = frag_config(args)?;
        let action = args.ct.unwrap_or(CtAction {
            zone: args.zone,
            commit: !args.no_commit,
            ..CtAction::default()
        });
        Ok(Replay {
            args,
            pipeline: Pipeline::new(Tracker::new(config), frag),
            action,
            pcap_out: None,
            numbering: Numbering::default(),
            n: 0,
            first_ns: None,
            last_ns: 0,
            now: Time::ZERO,
            next_sweep: Time::ZERO,
            po: Outputs::default(),
            cut_short: CutShort::default(),
        })
    }

    /// Tracks the next packet of the capture and prints what became of it.
    fn packet(&mut self, pkt: &Packet<'_>, out: &mut dyn Write) -> Result<()> {
        self.n += 1;
        let n = self.n;
        let first = *self.first_ns.get_or_insert(pkt.ts_nanos);
        self.last_ns = pkt.ts_nanos;
        self.tick(pkt.ts_nanos, first);
        if self.pcap_out.is_none()
            && let Some(path) = &self.args.write
        {
            self.pcap_out = Some(PcapOut::create(path, pkt.link)?);
        }
        if let Some(w) = &self.pcap_out {
            w.takes(n, pkt.link)?;
        }
        self.track(pkt)?;
        let (outs, dropped) = (&self.po.out, &self.po.dropped);
        let line = Line {
            n,
            rel: pkt.ts_nanos.saturating_sub(first) as f64 / 1e9,
            data: pkt.data,
            link: pkt.link,
            fate: Fate::of(n, outs, dropped),
            dropped,
        };
        match self.args.format {
            Format::Ovs => write_ovs(out, &line)?,
            Format::Human => write_human(out, &line, &mut self.numbering)?,
            Format::Json => write_json(out, &line, self.action.zone, &mut self.numbering)?,
        }
        Ok(())
    }

    /// Moves the clock to a packet captured at `ts_nanos` (the first one
    /// at `first`), sweeping when a sweep is due.
    fn tick(&mut self, ts_nanos: u64, first: u64) {
        self.now = match self.args.clock {
            Clock::Capture => Time::from_nanos(ts_nanos),
            Clock::Fixed => Time::from_nanos(first),
        };
        if self.now >= self.next_sweep {
            self.next_sweep = sweep(self.pipeline.tracker(), self.now, &mut self.po.stats);
        }
    }

    /// Runs packet number `self.n` through the pipeline; numbers the
    /// connections committed and writes the packets leaving to `--write`.
    fn track(&mut self, pkt: &Packet<'_>) -> Result<()> {
        self.po.out.clear();
        self.po.dropped.clear();
        let tag = Tag {
            n: self.n,
            cut: pkt.orig_len.saturating_sub(pkt.data.len() as u32),
        };
        self.pipeline.process(
            pkt.data.to_vec(),
            tag,
            pkt.link,
            &self.action,
            self.now,
            &mut self.po,
        );
        for o in &self.po.out {
            self.numbering.see(&o.verdict);
            let cs = &mut self.cut_short;
            cs.see(o.tag.n, &o.frame, pkt.link, o.tag.cut);
            if let Some(w) = self.pcap_out.as_mut() {
                w.write(pkt.ts_nanos, &o.frame, o.tag.cut)?;
            }
        }
        Ok(())
    }

    /// Completes the `--write` file, prints the connection table and the
    /// counters (the ovs format has neither) and flushes `out`.
    fn finish(mut self, out: &mut dyn Write) -> Result<()> {
        if let Some(w) = self.pcap_out.take() {
            w.finish()?;
        }
        let tracker = self.pipeline.tracker();
        match self.args.format {
            Format::Ovs => {}
            Format::Human => {
                let first_ns = self.first_ns.unwrap_or(self.last_ns);
                let span = self.last_ns.saturating_sub(first_ns) as f64 / 1e9;
                let stats = &self.po.stats;
                write_table(
                    out,
                    tracker,
                    self.now,
                    &mut self.numbering,
                    self.n,
                    span,
                    stats,
                )?;
                write_frag_summary(out, &self.pipeline.reassembler().stats())?;
            }
            Format::Json => {
                for (n, e) in &connections(tracker, self.now, &mut self.numbering) {
                    serde_json::to_writer(&mut *out, &ConnJson::new(*n, e))?;
                    writeln!(out)?;
                }
                let stats = self.po.stats;
                serde_json::to_writer(
                    &mut *out,
                    &CountersJson {
                        stats: StatsJson::new(&stats),
                        fragments: &self.pipeline.reassembler().stats(),
                        connections: tracker.table_len(),
                    },
                )?;
                writeln!(out)?;
            }
        }
        out.flush()?;
        Ok(())
    }
}

/// One packet of the capture as the formats print it.
struct Line<'a> {
    /// Its number in the capture (from 1).
    n: u64,
    /// Seconds since the first packet.
    rel: f64,
    /// The packet as it came, and its link type.
    data: &'a [u8],
    link: LinkType,
    fate: Fate<'a>,
    /// The fragments dropped while tracking it (possibly its own, possibly
    /// of earlier packets).
    dropped: &'a [(Tag, FragError)],
}

impl Line<'_> {
    /// The packet as it came, in one line.
    fn summary(&self) -> String {
        describe(self.data, &parse_frame(self.data, self.link))
    }

    /// The packet `o` leaving, in one line, if it differs from the packet
    /// as it came.
    fn changed(&self, o: &Out<Tag>) -> Option<String> {
        (o.frame != self.data).then(|| describe(&o.frame, &parse_frame(&o.frame, self.link)))
    }

    /// The fragments of earlier packets dropped while tracking this one.
    fn others_dropped(&self) -> impl Iterator<Item = &(Tag, FragError)> {
        self.dropped.iter().filter(|(t, _)| t.n != self.n)
    }
}

/// `N: state`. Open vSwitch's test tool prints a held fragment's empty
/// state as "0", and a fragment it refuses as invalid.
fn write_ovs(out: &mut dyn Write, line: &Line<'_>) -> io::Result<()> {
    let n = line.n;
    match &line.fate {
        Fate::Out(o, _) => writeln!(out, "{n}: {}", o.verdict.state),
        Fate::Held => writeln!(out, "{n}: 0"),
        Fate::Dropped(_) => writeln!(out, "{n}: inv|trk"),
    }
}

/// The packet's line (and those of the datagram it completed and of what
/// it became), then one line per fragment of an earlier packet dropped.
fn write_human(out: &mut dyn Write, line: &Line<'_>, numbering: &mut Numbering) -> io::Result<()> {
    write_human_packet(out, line, numbering)?;
    for (t, why) in line.others_dropped() {
        writeln!(
            out,
            "{:>6} {:>12}  packet {} dropped ({})",
            "",
            "",
            t.n,
            why.name()
        )?;
    }
    Ok(())
}

fn write_human_packet(
    out: &mut dyn Write,
    line: &Line<'_>,
    numbering: &mut Numbering,
) -> io::Result<()> {
    let (n, rel, summary) = (line.n, line.rel, line.summary());
    let (o, others) = match &line.fate {
        Fate::Out(o, others) => (o, others),
        Fate::Held => {
            return writeln!(out, "{n:>6} {rel:>12.6}  {summary:<58} (fragment held)");
        }
        Fate::Dropped(why) => {
            return writeln!(
                out,
                "{n:>6} {rel:>12.6}  {summary:<58} (fragment dropped: {})",
                why.name()
            );
        }
    };
    let v = &o.verdict;
    let mut state = v.state.to_string();
    if let Some(r) = v.invalid {
        state = format!("{state} ({r})");
    }
    match v.refused {
        Some(ctrack_core::Refusal::NatExhausted) => state.push_str(" (nat exhausted)"),
        Some(ctrack_core::Refusal::Clash) => state.push_str(" (clash)"),
        Some(ctrack_core::Refusal::ZoneLimit) => state.push_str(" (zone limit)"),
        Some(ctrack_core::Refusal::TableFull) => state.push_str(" (table full)"),
        None => {}
    }
    let conn = match v.conn {
        Some(id) => {
            let dir = if v.dir.is_reply() { " reply" } else { "" };
            format!("#{}{dir}", numbering.number(id))
        }
        None => String::new(),
    };
    let zone = if v.zone != 0 {
        format!(" zone={}", v.zone)
    } else {
        String::new()
    };
    writeln!(
        out,
        "{n:>6} {rel:>12.6}  {summary:<58} {state:<18} {conn}{zone}"
    )?;
    if !others.is_empty() {
        let list: Vec<String> = others.iter().map(|k| k.to_string()).collect();
        writeln!(
            out,
            "{:>6} {:>12}  datagram of packets {}",
            "",
            "",
            list.join(", ")
        )?;
    }
    if let Some(after) = line.changed(o) {
        writeln!(out, "{:>6} {:>12}  -> {after}", "", "")?;
    }
    Ok(())
}

/// The packet's object, then one object per fragment of an earlier packet
/// dropped.
fn write_json(
    out: &mut dyn Write,
    line: &Line<'_>,
    zone: u16,
    numbering: &mut Numbering,
) -> Result<()> {
    let summary = line.summary();
    let (v, changed, frags) = match &line.fate {
        Fate::Out(o, others) => (Some(o.verdict), line.changed(o), others.clone()),
        _ => (None, None, Vec::new()),
    };
    let v0 = v.unwrap_or_default();
    let j = PacketJson {
        packet: line.n,
        time: line.rel,
        state: if v.is_some() {
            v0.state.to_string()
        } else {
            String::new()
        },
        flags: v0.state.names().collect(),
        zone,
        mark: v0.mark,
        label: format!("{:#x}", v0.label),
        conn: v0.conn.map(|id| numbering.number(id)),
        dir: v0.conn.map(|_| v0.dir),
        invalid: v0.invalid,
        refused: v0.refused,
        summary: &summary,
        out: changed,
        held: matches!(line.fate, Fate::Held),
        dropped: match line.fate {
            Fate::Dropped(w) => Some(w),
            _ => None,
        },
        fragments: frags,
    };
    serde_json::to_writer(&mut *out, &j)?;
    writeln!(out)?;
    for (t, why) in line.others_dropped() {
        serde_json::to_writer(
            &mut *out,
            &DroppedJson {
                dropped: t.n,
                reason: *why,
            },
        )?;
        writeln!(out)?;
    }
    Ok(())
}

/// The connections of the table with their numbers, in number order (the
/// order they were first seen), whatever the table's own order.
fn connections(tracker: &Tracker, now: Time, numbering: &mut Numbering) -> Vec<(u64, Entry)> {
    let mut conns = Vec::new();
    tracker.for_each(None, now, |id, c| conns.push((id, c.entry.clone())));
    let mut numbered: Vec<(u64, Entry)> = conns
        .into_iter()
        .map(|(id, e)| (numbering.number(id), e))
        .collect();
    numbered.sort_by_key(|(n, _)| *n);
    numbered
}

fn write_frag_summary(out: &mut dyn Write, f: &FragStats) -> io::Result<()> {
    if f.accepted == 0 && f.too_small == 0 && f.malformed == 0 && f.duplicate == 0 {
        return Ok(());
    }
    write!(
        out,
        "{} fragments reassembled into {} datagrams",
        f.released, f.completed
    )?;
    for (name, v) in [
        ("still held", f.held),
        ("expired", f.expired),
        ("too small", f.too_small),
        ("malformed", f.malformed),
        ("duplicate", f.duplicate),
        ("overlapping datagrams", f.overlap),
        ("too big", f.too_big),
        ("dropped with their datagram", f.dropped),
        ("refused at a limit", f.limit),
        ("evicted to make room", f.evicted),
    ] {
        if v > 0 {
            write!(out, ", {v} {name}")?;
        }
    }
    writeln!(out)
}

fn write_table(
    out: &mut dyn Write,
    tracker: &Tracker,
    now: Time,
    numbering: &mut Numbering,
    packets: u64,
    span: f64,
    s: &Stats,
) -> io::Result<()> {
    let numbered = connections(tracker, now, numbering);
    writeln!(out)?;
    writeln!(out, "connections at {span:.6} s ({}):", numbered.len())?;
    for (n, e) in &numbered {
        writeln!(out, "  #{n} {e}")?;
    }
    writeln!(out)?;
    write!(
        out,
        "{packets} packets: {} new, {} est, {} rel, {} inv",
        s.new, s.established, s.related, s.invalid
    )?;
    let reasons: Vec<String> = InvalidReason::ALL
        .iter()
        .filter(|r| s.invalid_count(**r) > 0)
        .map(|r| format!("{r} {}", s.invalid_count(*r)))
        .collect();
    if !reasons.is_empty() {
        write!(out, " ({})", reasons.join(", "))?;
    }
    writeln!(out)?;
    write!(out, "{} connections committed", s.committed)?;
    if s.refused_table_full > 0 {
        write!(out, ", {} refused (table full)", s.refused_table_full)?;
    }
    if s.refused_zone_limit > 0 {
        write!(out, ", {} refused (zone limit)", s.refused_zone_limit)?;
    }
    if s.refused_nat_exhausted > 0 {
        write!(out, ", {} refused (nat exhausted)", s.refused_nat_exhausted)?;
    }
    if s.refused_clash > 0 {
        write!(out, ", {} refused (clash)", s.refused_clash)?;
    }
    if s.translated > 0 {
        write!(out, ", {} packets translated", s.translated)?;
    }
    if s.expectations_created > 0 {
        write!(
            out,
            ", {} expectations ({} used)",
            s.expectations_created, s.expectations_matched
        )?;
    }
    if s.replaced > 0 {
        write!(out, ", {} replaced", s.replaced)?;
    }
    if s.expired > 0 {
        write!(out, ", {} expired", s.expired)?;
    }
    writeln!(out)
}
