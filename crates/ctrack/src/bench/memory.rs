//! `ctrack bench memory --conns M`: bytes per connection, all indexes
//! included, from two accountings: the table's own (index buckets, record
//! slots, zone state) and the process's resident set (`/proc/self/statm`)
//! before and after filling.
//!
//! `--label` commits every connection with a label (as an ACL's `label`
//! or `persist-established` does) and `--nat` through source NAT: each
//! then takes its extension, allocated apart from the table, which only
//! the resident set counts. `--ipv6` fills the IPv6 table instead
//! (fd00::/16 addresses; translated to fd01::/112).

use std::io::Write;

use anyhow::{Context, Result, bail};
use clap::Args;
use ctrack_core::{Config, Masked, Time, Tracker};
use serde::Serialize;

use super::Machine;
use crate::args::{MAX_CONNS, bounded};

/// Arguments of `ctrack bench memory`.
#[derive(Debug, Args)]
pub struct MemoryArgs {
    /// Connections (1 to 400000000).
    #[arg(long, default_value_t = 1_000_000, value_parser = bounded(1, super::MAX_BENCH_CONNS))]
    pub conns: u64,
    /// The tracker's connection limit, which sizes its index (default:
    /// `--conns`; at least `--conns`, at most 536870912).
    #[arg(long, value_name = "N", value_parser = bounded(1, MAX_CONNS))]
    pub max_conns: Option<usize>,
    /// Table shards per family (a power of two up to 256; default 64, as
    /// `ctrack run` takes for up to two workers; it takes more for more
    /// workers, `Config::shards_for`).
    #[arg(long, value_parser = crate::args::power_of_two(ctrack_core::MAX_SHARDS))]
    pub shards: Option<usize>,
    /// Commit every connection with a nonzero label, as the firewall does
    /// for an ACL with `label` or `persist-established`.
    #[arg(long)]
    pub label: bool,
    /// Commit every connection through source NAT (to an address of
    /// 198.51.0.0/16), as an ACL's `nat` does.
    #[arg(long)]
    pub nat: bool,
    /// IPv6 connections (fd00::/16; with `--nat`, to fd01::/112) instead
    /// of IPv4.
    #[arg(long)]
    pub ipv6: bool,
}

impl MemoryArgs {
    /// Checks the arguments together.
    pub fn validate(&self) -> Result<(), String> {
        if !(1..=super::MAX_BENCH_CONNS).contains(&self.conns) {
            return Err(format!(
                "--conns must be from 1 to {}",
                super::MAX_BENCH_CONNS
            ));
        }
        match self.max_conns {
            Some(m) if m > MAX_CONNS => Err(format!("--max-conns must be at most {MAX_CONNS}")),
            Some(m) if (m as u64) < self.conns => Err(format!(
                "--max-conns ({m}) is below --conns ({}): the table could not hold them",
                self.conns
            )),
            _ => Ok(()),
        }
    }
}

#[derive(Debug, Serialize)]
struct MemoryJson {
    bench: &'static str,
    conns: u64,
    max_conns: usize,
    shards: usize,
    label: bool,
    nat: bool,
    ipv6: bool,
    table_bytes: usize,
    table_bytes_per_conn: f64,
    index_bytes: usize,
    record_bytes: usize,
    other_bytes: usize,
    rss_delta_bytes: i64,
    rss_bytes_per_conn: f64,
    machine: Machine,
}

fn rss_bytes() -> Result<i64> {
    let statm = std::fs::read_to_string("/proc/self/statm").context("reading /proc/self/statm")?;
    let pages: i64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|v| v.parse().ok())
        .context("parsing /proc/self/statm")?;
    Ok(pages * 4096)
}

pub(crate) fn run(a: &MemoryArgs, json: bool, out: &mut dyn Write) -> Result<()> {
    if let Err(e) = a.validate() {
        bail!(e);
    }
    let max = a.max_conns.unwrap_or(a.conns as usize);
    let shards = a.shards.unwrap_or(ctrack_core::DEFAULT_SHARDS);
    let tracker = Tracker::new(Config {
        max_conns: max,
        shards,
        ..Config::default()
    });
    let before = rss_bytes()?;
    let mut action = super::lookup::commit_action(a.nat, a.ipv6);
    if a.label {
        action.label = Some(Masked::new(super::LABEL, u128::MAX));
    }
    // On this thread: another would add its stack and its allocator's
    // arena to the resident set.
    let now = Time::from_secs(1);
    super::lookup::fill_these(&tracker, 0..a.conns, &action, a.nat, a.ipv6, now);
    let after = rss_bytes()?;
    if tracker.table_len() as u64 != a.conns {
        bail!(
            "the table holds {} connections, not {}",
            tracker.table_len(),
            a.conns
        );
    }
    let m = tracker.memory();
    let j = MemoryJson {
        bench: "memory",
        conns: a.conns,
        max_conns: max,
        shards,
        label: a.label,
        nat: a.nat,
        ipv6: a.ipv6,
        table_bytes: m.total(),
        table_bytes_per_conn: m.total() as f64 / a.conns as f64,
        index_bytes: m.index_bytes,
        record_bytes: m.record_bytes,
        other_bytes: m.other_bytes + m.alias_bytes,
        rss_delta_bytes: after - before,
        rss_bytes_per_conn: (after - before) as f64 / a.conns as f64,
        machine: Machine::this(),
    };
    if json {
        serde_json::to_writer_pretty(&mut *out, &j)?;
        writeln!(out)?;
        return Ok(());
    }
    writeln!(
        out,
        "memory: {} {} connections{}{} (limit {}, {} shards): {:.1} bytes/connection by the table's \
         accounting (index {:.1}, records {:.1}, other {:.1}); {:.1} bytes/connection by resident \
         set growth",
        a.conns,
        if a.ipv6 { "IPv6" } else { "IPv4" },
        if a.label { ", labelled" } else { "" },
        if a.nat { ", source NAT" } else { "" },
        max,
        shards,
        j.table_bytes_per_conn,
        m.index_bytes as f64 / a.conns as f64,
        m.record_bytes as f64 / a.conns as f64,
        j.other_bytes as f64 / a.conns as f64,
        j.rss_bytes_per_conn
    )?;
    Ok(())
}
