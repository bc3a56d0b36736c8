//! The objects `ctrack replay --format json` prints, one a line (README:
//! "JSON output"): one per packet (and per fragment dropped), one per
//! connection of the table, then the counters.

use ctrack_core::conn::dump::EntryTuple as Tuple;
use ctrack_core::{Dir, Entry, FragError, FragStats, InvalidReason, Refusal, Stats};
use serde::Serialize;
use serde::ser::SerializeMap;

#[derive(Serialize)]
pub(super) struct PacketJson<'a> {
    pub(super) packet: u64,
    pub(super) time: f64,
    pub(super) state: String,
    pub(super) flags: Vec<&'static str>,
    pub(super) zone: u16,
    pub(super) mark: u32,
    pub(super) label: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) conn: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) dir: Option<Dir>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) invalid: Option<InvalidReason>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) refused: Option<Refusal>,
    pub(super) summary: &'a str,
    /// The packet as it leaves, if it changed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) out: Option<String>,
    /// A fragment held for reassembly (its verdict comes with the
    /// datagram's last fragment).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub(super) held: bool,
    /// A fragment dropped, and why.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) dropped: Option<FragError>,
    /// The packets of the datagram this one completed.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(super) fragments: Vec<u64>,
}

#[derive(Serialize)]
pub(super) struct DroppedJson {
    pub(super) dropped: u64,
    pub(super) reason: FragError,
}

/// A connection of the table (README: "JSON output").
#[derive(Serialize)]
pub(super) struct ConnJson<'a> {
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
    pub(super) fn new(conn: u64, e: &'a Entry) -> Self {
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
pub(super) struct CountersJson<'a> {
    pub(super) stats: StatsJson<'a>,
    pub(super) fragments: &'a FragStats,
    pub(super) connections: usize,
}

/// The tracker's counters, with invalid packets counted by reason name.
#[derive(Serialize)]
pub(super) struct StatsJson<'a> {
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
    refused_clash: u64,
    translated: u64,
    expectations_created: u64,
    expectations_matched: u64,
    expectations_refused: u64,
    expectations_expired: u64,
    alg_rewritten: u64,
}

impl<'a> StatsJson<'a> {
    pub(super) fn new(s: &'a Stats) -> Self {
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
            refused_clash: s.refused_clash,
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
