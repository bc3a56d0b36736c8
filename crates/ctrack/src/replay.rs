//! `ctrack replay`: runs a capture through the tracker and prints what it
//! decides for every packet, then the connection table.

use std::collections::HashMap;
use std::fs::File;
use std::io::{self, BufReader, Write};
use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::{Args, ValueEnum};
use ctrack_core::{Config, ConnId, CtAction, Entry, InvalidReason, Stats, Time, Tracker, Verdict};
use ctrack_wire::parse_frame;
use serde::Serialize;

use crate::capture::CaptureReader;
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
    /// Track every packet in this zone.
    #[arg(long, default_value_t = 0)]
    pub zone: u16,
    /// Look connections up without committing new ones.
    #[arg(long)]
    pub no_commit: bool,
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
    /// Most connections to hold; commits beyond are refused.
    #[arg(long, default_value_t = ctrack_core::tracker::DEFAULT_MAX_CONNS)]
    pub max_conns: usize,
}

/// How many connections a sweep may look at between two packets.
const SWEEP_BUDGET: usize = 4096;

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
}

#[derive(Serialize)]
struct ConnJson<'a> {
    conn: u64,
    #[serde(flatten)]
    entry: &'a Entry,
    proto_name: &'a str,
}

#[derive(Serialize)]
struct StatsJson<'a> {
    stats: &'a Stats,
    connections: usize,
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
    let tracker = Tracker::new(config);
    let action = CtAction {
        zone: args.zone,
        commit: !args.no_commit,
        ..CtAction::default()
    };
    let mut numbering = Numbering::default();
    let mut n: u64 = 0;
    let mut first_ns: Option<u64> = None;
    let mut next_sweep = Time::ZERO;
    let mut now = Time::ZERO;
    let mut last_ns = 0;

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
            let s = tracker.sweep(now, SWEEP_BUDGET);
            next_sweep = s.next.unwrap_or(Time::MAX);
        }
        let layers = parse_frame(pkt.data, pkt.link);
        let v = tracker.process_layers(pkt.data, &layers, &action, now);
        numbering.see(&v);
        let rel = pkt.ts_nanos.saturating_sub(first) as f64 / 1e9;
        match args.format {
            Format::Ovs => writeln!(out, "{n}: {}", v.state)?,
            Format::Human => {
                let summary = describe(pkt.data, &layers);
                write_human(out, n, rel, &summary, &v, &mut numbering)?;
            }
            Format::Json => {
                let summary = describe(pkt.data, &layers);
                let j = PacketJson {
                    packet: n,
                    time: rel,
                    state: v.state.to_string(),
                    flags: v.state.names().collect(),
                    zone: v.zone,
                    mark: v.mark,
                    label: format!("{:#x}", v.label),
                    conn: v.conn.map(|id| numbering.number(id)),
                    dir: v.conn.map(|_| v.dir),
                    invalid: v.invalid,
                    refused: v.refused,
                    summary: &summary,
                };
                serde_json::to_writer(&mut *out, &j)?;
                writeln!(out)?;
            }
        }
    };

    match args.format {
        Format::Ovs => {}
        Format::Human => write_table(out, &tracker, now, &mut numbering, n, last_ns, first_ns)?,
        Format::Json => {
            let mut conns = Vec::new();
            tracker.for_each(None, now, |id, c| conns.push((id, c.entry.clone())));
            for (id, e) in &conns {
                let j = ConnJson {
                    conn: numbering.number(*id),
                    entry: e,
                    proto_name: ctrack_wire::ip_proto::name(e.proto).unwrap_or(""),
                };
                serde_json::to_writer(&mut *out, &j)?;
                writeln!(out)?;
            }
            serde_json::to_writer(
                &mut *out,
                &StatsJson {
                    stats: &tracker.stats(),
                    connections: tracker.table_len(),
                },
            )?;
            writeln!(out)?;
        }
    }
    out.flush()?;
    result.with_context(|| format!("{}", args.file.display()))
}

fn write_human(
    out: &mut dyn Write,
    n: u64,
    rel: f64,
    summary: &str,
    v: &Verdict,
    numbering: &mut Numbering,
) -> io::Result<()> {
    let mut state = v.state.to_string();
    if let Some(r) = v.invalid {
        state = format!("{state} ({r})");
    }
    if v.refused.is_some() {
        state.push_str(" (table full)");
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
    )
}

fn write_table(
    out: &mut dyn Write,
    tracker: &Tracker,
    now: Time,
    numbering: &mut Numbering,
    packets: u64,
    last_ns: u64,
    first_ns: Option<u64>,
) -> io::Result<()> {
    let mut conns = Vec::new();
    tracker.for_each(None, now, |id, c| conns.push((id, c.entry.clone())));
    let mut numbered: Vec<(u64, Entry)> = conns
        .into_iter()
        .map(|(id, e)| (numbering.number(id), e))
        .collect();
    numbered.sort_by_key(|(n, _)| *n);
    let span = last_ns.saturating_sub(first_ns.unwrap_or(last_ns)) as f64 / 1e9;
    writeln!(out)?;
    writeln!(out, "connections at {span:.6} s ({}):", numbered.len())?;
    for (n, e) in &numbered {
        writeln!(out, "  #{n} {e}")?;
    }
    let s = tracker.stats();
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
    if s.replaced > 0 {
        write!(out, ", {} replaced", s.replaced)?;
    }
    if s.expired > 0 {
        write!(out, ", {} expired", s.expired)?;
    }
    writeln!(out)
}
