//! `ctrack replay`: runs a capture through the tracker and prints what it
//! decides for every packet, then the connection table.

use std::collections::HashMap;
use std::fs::File;
use std::io::{self, BufReader, Write};
use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::{Args, ValueEnum};
use ctrack_core::conn::dump::EntryTuple as Tuple;
use ctrack_core::frag::{FragConfig, MAX_FRAGS_LIMIT, MIN_FRAG_LIMIT};
use ctrack_core::{
    Config, ConnId, CtAction, Entry, FragError, FragStats, InvalidReason, LinkType, Out, Outputs,
    Pipeline, Stats, Time, Tracker, Verdict,
};
use ctrack_datapath::capture::{CaptureReader, CaptureWriter};
use ctrack_wire::parse_frame;
use serde::Serialize;
use serde::ser::SerializeMap;

use crate::args::{MAX_CONNS, bounded};
use crate::describe::describe;

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
    /// The capture (pcap or pcapng; Ethernet, raw IP or Linux cooked).
    pub file: PathBuf,
    /// The `ct` action applied to every packet, in the form Open vSwitch
    /// users write inside `ct(...)`: e.g. `commit,zone=5,mark=0x1/0xff,
    /// nat(src=10.0.0.1-10.0.0.9:20000-20100,random),alg=ftp`. Without it:
    /// `commit` in `--zone`.
    #[arg(long, value_name = "ACTION", value_parser = parse_action, conflicts_with_all = ["zone", "no_commit"])]
    pub ct: Option<CtAction>,
    /// Track every packet in this zone.
    #[arg(long, default_value_t = 0)]
    pub zone: u16,
    /// Look connections up without committing new ones.
    #[arg(long)]
    pub no_commit: bool,
    /// Write the packets as they leave (translated, fragments as they came)
    /// to this pcap file, with the link type of the capture.
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
}

/// The largest minimum fragment size: an IP packet is at most 65535 bytes
/// (IPv6: of payload), so a larger minimum would refuse every fragment.
const MAX_MIN_FRAG: usize = 65535;

/// How many connections a sweep may look at between two packets.
const SWEEP_BUDGET: usize = 4096;

fn parse_action(s: &str) -> Result<CtAction, String> {
    s.parse::<CtAction>().map_err(|e| e.to_string())
}

/// What the pipeline carries with each packet.
#[derive(Debug, Clone, Copy)]
struct Tag {
    /// Packet number in the capture (from 1).
    n: u64,
    /// Bytes the capture left out of it (original length minus captured).
    cut: u32,
}

/// The pcap file `--write` fills.
struct PcapOut {
    w: CaptureWriter<io::BufWriter<File>>,
    path: PathBuf,
}

impl PcapOut {
    fn create(path: &std::path::Path, link: LinkType) -> Result<PcapOut> {
        let f = File::create(path).with_context(|| format!("{}", path.display()))?;
        let w = CaptureWriter::new(io::BufWriter::new(f), link)
            .with_context(|| format!("{}", path.display()))?;
        Ok(PcapOut {
            w,
            path: path.to_owned(),
        })
    }

    fn write(&mut self, ts_nanos: u64, frame: &[u8], cut: u32) -> Result<()> {
        let orig_len = (frame.len() as u32).saturating_add(cut);
        self.w
            .write(ts_nanos, frame, orig_len)
            .with_context(|| format!("{}", self.path.display()))
    }

    fn finish(self) -> Result<()> {
        self.w
            .finish()
            .with_context(|| format!("{}", self.path.display()))?;
        Ok(())
    }
}

#[derive(Serialize)]
struct PacketJson<'a> {
    packet: u64,
    time: f64,
    state: String,
    flags: Vec<&'static str>,
    zone: u16,
    mark: u32,
    label: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    conn: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    dir: Option<ctrack_core::Dir>,
    #[serde(skip_serializing_if = "Option::is_none")]
    invalid: Option<InvalidReason>,
    #[serde(skip_serializing_if = "Option::is_none")]
    refused: Option<ctrack_core::Refusal>,
    summary: &'a str,
    /// The packet as it leaves, if it changed.
    #[serde(skip_serializing_if = "Option::is_none")]
    out: Option<String>,
    /// A fragment held for reassembly (its verdict comes with the
    /// datagram's last fragment).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    held: bool,
    /// A fragment dropped, and why.
    #[serde(skip_serializing_if = "Option::is_none")]
    dropped: Option<FragError>,
    /// The packets of the datagram this one completed.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    fragments: Vec<u64>,
}

#[derive(Serialize)]
struct DroppedJson {
    dropped: u64,
    reason: FragError,
}

/// A connection of the table (README: "JSON output").
#[derive(Serialize)]
struct ConnJson<'a> {
    conn: u64,
    proto: u8,
    proto_name: &'a str,
    orig: TupleJson,
    reply: TupleJson,
    zone: u16,
    mark: u32,
    label: String,
    state: &'a str,
    timeout: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    helper: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    master: Option<&'a str>,
}

impl<'a> ConnJson<'a> {
    fn new(conn: u64, e: &'a Entry) -> Self {
        ConnJson {
            conn,
            proto: e.proto,
            proto_name: ctrack_wire::ip_proto::name(e.proto).unwrap_or(""),
            orig: TupleJson::new(&e.orig),
            reply: TupleJson::new(&e.reply),
            zone: e.zone,
            mark: e.mark,
            label: format!("{:#x}", e.label),
            state: e.state,
            timeout: e.timeout,
            helper: e.helper,
            master: e.master.as_deref(),
        }
    }
}

/// One direction of a connection.
#[derive(Serialize)]
struct TupleJson {
    src: std::net::IpAddr,
    dst: std::net::IpAddr,
    #[serde(skip_serializing_if = "Option::is_none")]
    sport: Option<u16>,
    #[serde(skip_serializing_if = "Option::is_none")]
    dport: Option<u16>,
    #[serde(skip_serializing_if = "Option::is_none")]
    icmp: Option<IcmpJson>,
    packets: u64,
    bytes: u64,
}

impl TupleJson {
    fn new(t: &Tuple) -> Self {
        TupleJson {
            src: t.src,
            dst: t.dst,
            sport: t.sport,
            dport: t.dport,
            icmp: t.icmp.map(|(id, ty, code)| IcmpJson { id, ty, code }),
            packets: t.packets,
            bytes: t.bytes,
        }
    }
}

/// The ICMP or ICMPv6 query of a connection.
#[derive(Serialize)]
struct IcmpJson {
    id: u16,
    #[serde(rename = "type")]
    ty: u8,
    code: u8,
}

/// The last line: the tracker's and the reassembler's counters.
#[derive(Serialize)]
struct CountersJson<'a> {
    stats: StatsJson<'a>,
    fragments: &'a FragStats,
    connections: usize,
}

/// The tracker's counters, with invalid packets counted by reason name.
#[derive(Serialize)]
struct StatsJson<'a> {
    packets: u64,
    new: u64,
    established: u64,
    related: u64,
    invalid: u64,
    invalid_by_reason: ByReason<'a>,
    committed: u64,
    refused_table_full: u64,
    refused_zone_limit: u64,
    evicted: u64,
    replaced: u64,
    expired: u64,
    flushed: u64,
    refused_nat_exhausted: u64,
    translated: u64,
    expectations_created: u64,
    expectations_matched: u64,
    expectations_refused: u64,
    expectations_expired: u64,
    alg_rewritten: u64,
}

impl<'a> StatsJson<'a> {
    fn new(s: &'a Stats) -> Self {
        StatsJson {
            packets: s.packets,
            new: s.new,
            established: s.established,
            related: s.related,
            invalid: s.invalid,
            invalid_by_reason: ByReason(s),
            committed: s.committed,
            refused_table_full: s.refused_table_full,
            refused_zone_limit: s.refused_zone_limit,
            evicted: s.evicted,
            replaced: s.replaced,
            expired: s.expired,
            flushed: s.flushed,
            refused_nat_exhausted: s.refused_nat_exhausted,
            translated: s.translated,
            expectations_created: s.expectations_created,
            expectations_matched: s.expectations_matched,
            expectations_refused: s.expectations_refused,
            expectations_expired: s.expectations_expired,
            alg_rewritten: s.alg_rewritten,
        }
    }
}

/// `{"link_truncated": 0, "not_ip": 2, ...}`: every reason, in counter
/// order.
struct ByReason<'a>(&'a Stats);

impl Serialize for ByReason<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(InvalidReason::ALL.len()))?;
        for r in InvalidReason::ALL {
            m.serialize_entry(&r, &self.0.invalid_count(r))?;
        }
        m.end()
    }
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
    let file = File::open(&args.file).with_context(|| format!("{}", args.file.display()))?;
    let mut reader = CaptureReader::new(BufReader::new(file))
        .with_context(|| format!("{}", args.file.display()))?;
    let config = Config {
        tcp_seq_check: !args.no_tcp_seq_check,
        tcp_loose: !args.no_tcp_loose,
        checksums: !args.no_checksum,
        max_conns: args.max_conns,
        ..Config::default()
    };
    let frag = FragConfig {
        v4: !args.no_reassembly,
        v6: !args.no_reassembly,
        max_frags: args.max_frags,
        min_v4: args.min_frag_v4,
        min_v6: args.min_frag_v6,
        ..FragConfig::default()
    };
    frag.validate().map_err(anyhow::Error::msg)?;
    let pipeline: Pipeline<Tag> = Pipeline::new(Tracker::new(config), frag);
    let tracker = pipeline.tracker();
    let action = args.ct.unwrap_or(CtAction {
        zone: args.zone,
        commit: !args.no_commit,
        ..CtAction::default()
    });
    let mut pcap_out: Option<PcapOut> = None;
    let mut numbering = Numbering::default();
    let mut n: u64 = 0;
    let mut first_ns: Option<u64> = None;
    let mut next_sweep = Time::ZERO;
    let mut now = Time::ZERO;
    let mut last_ns = 0;
    // The frames leaving, the fragments dropped, and the counters of this
    // one worker.
    let mut po: Outputs<Tag> = Outputs::default();

    if args.format == Format::Human {
        writeln!(
            out,
            "{:>6} {:>12}  {:<58} {:<18} conn",
            "#", "time", "packet", "ct_state"
        )?;
    }
    let result = loop {
        let pkt = match reader.next_packet() {
            Ok(Some(p)) => p,
            Ok(None) => break Ok(()),
            Err(e) => break Err(e),
        };
        n += 1;
        let first = *first_ns.get_or_insert(pkt.ts_nanos);
        last_ns = pkt.ts_nanos;
        now = match args.clock {
            Clock::Capture => Time::from_nanos(pkt.ts_nanos),
            Clock::Fixed => Time::from_nanos(first),
        };
        if now >= next_sweep {
            let s = tracker.sweep(now, SWEEP_BUDGET, &mut po.stats);
            next_sweep = s.next.unwrap_or(Time::MAX);
        }
        if pcap_out.is_none()
            && let Some(path) = &args.write
        {
            pcap_out = Some(PcapOut::create(path, pkt.link)?);
        }
        po.out.clear();
        po.dropped.clear();
        let tag = Tag {
            n,
            cut: pkt.orig_len.saturating_sub(pkt.data.len() as u32),
        };
        pipeline.process(pkt.data.to_vec(), tag, pkt.link, &action, now, &mut po);
        let (outs, dropped) = (&po.out, &po.dropped);
        for o in outs {
            numbering.see(&o.verdict);
            if let Some(w) = pcap_out.as_mut() {
                w.write(pkt.ts_nanos, &o.frame, o.tag.cut)?;
            }
        }
        let fate = match outs.iter().find(|o| o.tag.n == n) {
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
        };
        let rel = pkt.ts_nanos.saturating_sub(first) as f64 / 1e9;
        match args.format {
            // Open vSwitch's test tool prints a held fragment's empty state
            // as "0", and a fragment it refuses as invalid.
            Format::Ovs => match &fate {
                Fate::Out(o, _) => writeln!(out, "{n}: {}", o.verdict.state)?,
                Fate::Held => writeln!(out, "{n}: 0")?,
                Fate::Dropped(_) => writeln!(out, "{n}: inv|trk")?,
            },
            Format::Human => {
                let layers = parse_frame(pkt.data, pkt.link);
                let summary = describe(pkt.data, &layers);
                write_human(
                    out,
                    n,
                    rel,
                    &summary,
                    &fate,
                    &mut numbering,
                    pkt.data,
                    pkt.link,
                )?;
                for (t, why) in dropped.iter().filter(|(t, _)| t.n != n) {
                    writeln!(
                        out,
                        "{:>6} {:>12}  packet {} dropped ({})",
                        "",
                        "",
                        t.n,
                        why.name()
                    )?;
                }
            }
            Format::Json => {
                let layers = parse_frame(pkt.data, pkt.link);
                let summary = describe(pkt.data, &layers);
                let (v, changed, frags) = match &fate {
                    Fate::Out(o, others) => (
                        Some(o.verdict),
                        (o.frame != pkt.data)
                            .then(|| describe(&o.frame, &parse_frame(&o.frame, pkt.link))),
                        others.clone(),
                    ),
                    _ => (None, None, Vec::new()),
                };
                let v0 = v.unwrap_or_default();
                let j = PacketJson {
                    packet: n,
                    time: rel,
                    state: if v.is_some() {
                        v0.state.to_string()
                    } else {
                        String::new()
                    },
                    flags: v0.state.names().collect(),
                    zone: action.zone,
                    mark: v0.mark,
                    label: format!("{:#x}", v0.label),
                    conn: v0.conn.map(|id| numbering.number(id)),
                    dir: v0.conn.map(|_| v0.dir),
                    invalid: v0.invalid,
                    refused: v0.refused,
                    summary: &summary,
                    out: changed,
                    held: matches!(fate, Fate::Held),
                    dropped: match fate {
                        Fate::Dropped(w) => Some(w),
                        _ => None,
                    },
                    fragments: frags,
                };
                serde_json::to_writer(&mut *out, &j)?;
                writeln!(out)?;
                for (t, why) in dropped.iter().filter(|(t, _)| t.n != n) {
                    serde_json::to_writer(
                        &mut *out,
                        &DroppedJson {
                            dropped: t.n,
                            reason: *why,
                        },
                    )?;
                    writeln!(out)?;
                }
            }
        }
    };
    if let Some(w) = pcap_out {
        w.finish()?;
    }

    match args.format {
        Format::Ovs => {}
        Format::Human => {
            let span = last_ns.saturating_sub(first_ns.unwrap_or(last_ns)) as f64 / 1e9;
            write_table(out, tracker, now, &mut numbering, n, span, &po.stats)?;
            write_frag_summary(out, &pipeline.reassembler().stats())?;
        }
        Format::Json => {
            for (n, e) in &connections(tracker, now, &mut numbering) {
                serde_json::to_writer(&mut *out, &ConnJson::new(*n, e))?;
                writeln!(out)?;
            }
            let stats = po.stats;
            serde_json::to_writer(
                &mut *out,
                &CountersJson {
                    stats: StatsJson::new(&stats),
                    fragments: &pipeline.reassembler().stats(),
                    connections: tracker.table_len(),
                },
            )?;
            writeln!(out)?;
        }
    }
    out.flush()?;
    result.with_context(|| format!("{}", args.file.display()))
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

#[allow(clippy::too_many_arguments)]
fn write_human(
    out: &mut dyn Write,
    n: u64,
    rel: f64,
    summary: &str,
    fate: &Fate<'_>,
    numbering: &mut Numbering,
    data: &[u8],
    link: LinkType,
) -> io::Result<()> {
    let (o, others) = match fate {
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
    if o.frame != data {
        let after = describe(&o.frame, &parse_frame(&o.frame, link));
        writeln!(out, "{:>6} {:>12}  -> {after}", "", "")?;
    }
    Ok(())
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
