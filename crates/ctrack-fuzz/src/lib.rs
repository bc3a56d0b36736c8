//! Fuzz bodies for ctrack.
//!
//! Each function takes arbitrary bytes and panics if an invariant breaks;
//! it counts what it pushed through the code under test (packets, or
//! inputs for the targets that take no packets) on a [`Probe`], and records
//! features of the outcomes there when asked. They are driven by libFuzzer
//! through the cargo-fuzz targets in `fuzz/`, by the in-repo campaign
//! driver (`src/bin/ctrack-fuzz.rs`, engine in [`campaign`], targets in
//! [`targets`]), by `tests/smoke.rs` with a bounded number of seeded random
//! and mutated inputs, and by `tests/corpus.rs`, which replays the corpus
//! in `fuzz/corpus/` on every `cargo test`. See docs/fuzzing.md.
//!
//! - [`parse`]: every view and the frame walk on raw bytes, under every link
//!   type; offsets must stay in bounds, nothing may panic.
//! - [`tracker`]: a structure-aware sequence of operations (packets built
//!   from a small pool of addresses, ports and sequence numbers so that they
//!   hit the same connections; raw packets; time steps; sweeps; flushes) run
//!   through a tracker with a small table. Checks the verdicts' coherence,
//!   the table bound, and that everything is freed once time moves past all
//!   timeouts (no leak).
//! - [`capture`]: the pcap/pcapng reader on arbitrary files: it must end with
//!   a packet stream or an error, never a panic or unbounded memory.
//! - [`table`]: a differential run of the concurrent connection table against
//!   a plain map (inserts with and without secondary keys, removals,
//!   lookups, refreshes, evictions, sweeps, zone-instance reclaims, index
//!   growth), with a poor hash so that buckets overflow and tags collide.
//!   The fast path is checked against the general one inside [`parse`].
//! - [`ftp`]: the FTP gateway's text reader on arbitrary segments.
//! - [`reassembly`]: the fragment reassembler on cut, repeated and
//!   overlapping fragments; bounds hold and everything expires.
//! - [`tracker_frames`]: frame lists (real traffic, mutated) through a
//!   tracker.
//! - [`pipeline_frames`]: real traffic, mutated, through reassembly,
//!   translation and the FTP gateway.
//! - [`firewall_frames`]: real traffic, mutated, through the firewall
//!   (policy, tracker, NAT, gateways) in bursts and one frame at a time:
//!   the same decisions, answers and bytes.
//! - [`policy_file`]: arbitrary bytes as a policy file (TOML or JSON): loaded
//!   or refused with a position, and what loads is coherent.
//! - [`match_expr`]: arbitrary bytes as an OVN match against a small fixed
//!   policy; what resolves is bounded and evaluates on a few keys.
//! - [`classifier_diff`]: the policy classifier against a linear scan, over
//!   decoded rule sets, inserts, removals and keys.
//! - [`ctl_request`]: arbitrary bytes as the control server's request lines
//!   (raw, and as `argv` requests) against a small datapath: every reply is
//!   one JSON line.
#![forbid(unsafe_code)]

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use arbitrary::{Arbitrary, Unstructured};
use ctrack_core::packet::extract::{ExtractOptions, extract};
use ctrack_core::{Config, CtAction, CtState, LinkType, Masked, Stats, Time, Tracker};
use ctrack_wire::build::{self, Ext, Frame, L4};
use ctrack_wire::ethernet::ethertype;
use ctrack_wire::icmp::IcmpPacket;
use ctrack_wire::ipv4::Ipv4Packet;
use ctrack_wire::ipv6::{self, Ipv6Packet};
use ctrack_wire::sctp::SctpPacket;
use ctrack_wire::tcp::{SynOptions, TcpOptions, TcpPacket, ovs_wscale};
use ctrack_wire::udp::UdpPacket;
use ctrack_wire::{IpVersion, NotIp, checksum, parse_frame};

const LINKS: [LinkType; 4] = [
    LinkType::Ethernet,
    LinkType::RawIp,
    LinkType::LinuxSll,
    LinkType::LinuxSll2,
];

pub mod campaign;
mod classifier;
mod control;
mod firewall;
mod gateway;
pub mod mutate;
mod offload;
mod policy;
mod probe;
pub mod seeds;
mod table;
pub mod targets;
pub use classifier::classifier_diff;
pub use control::ctl_request;
pub use firewall::{FIREWALL_POLICIES, firewall_frames, firewall_frames_bytes};
pub use gateway::{PIPELINE_ACTIONS, ftp, pipeline_frames, pipeline_frames_bytes, reassembly};
pub use mutate::Rng;
pub use policy::{match_expr, match_policy, policy_file};
pub use probe::Probe;
pub use table::table;

/// Parses `data` as a frame of every link type and reads every header the
/// walk found through its view; and checks that the tracker's fast path
/// agrees with the general one on it. One frame.
pub fn parse(data: &[u8], probe: &mut Probe) {
    probe.count(1);
    for checksums in [true, false] {
        assert!(
            ctrack_core::packet::fast::agrees_with_general(data, checksums),
            "fast path disagrees on {data:02x?}"
        );
    }
    for (n, link) in LINKS.into_iter().enumerate() {
        let f = parse_frame(data, link);
        frame_features(probe, n as u32, &f);
        // What replay's lines and the ACL log say of the frame: short,
        // whatever the bytes.
        let said = ctrack_wire::describe::describe(data, &f);
        assert!(said.len() < 256, "{said}");
        if let Some(l3) = f.l3 {
            assert!(l3 <= data.len());
        }
        if let Ok(ip) = f.ip {
            assert!(
                ip.l3 <= ip.l4 && ip.l4 <= ip.end && ip.end <= data.len(),
                "{ip:?}"
            );
            let datagram = &data[ip.l3..ip.end];
            let l4 = &data[ip.l4..ip.end];
            match ip.version {
                IpVersion::V4 => {
                    let h = Ipv4Packet::new_checked(datagram).expect("walk checked it");
                    let _ = (
                        h.verify_checksum(),
                        h.options(),
                        h.payload(),
                        h.frag_offset(),
                    );
                }
                IpVersion::V6 => {
                    let h = Ipv6Packet::new_checked(datagram).expect("walk checked it");
                    let _ = (h.flow_label(), h.payload());
                    if let Some(fh) = ip.frag_header {
                        assert!(ipv6::FragHeader::parse(&data[fh..]).is_ok());
                    }
                }
            }
            if let Ok(t) = TcpPacket::new_checked(l4) {
                probe.feature(10, TcpOptions::new(t.options()).count().min(8));
                let _ = (SynOptions::parse(t.options()), t.wscale(), t.payload());
            }
            if let Ok(u) = UdpPacket::new_checked(l4) {
                let _ = (u.len_field(), u.payload());
            }
            if let Ok(s) = SctpPacket::new_checked(l4) {
                let _ = (
                    s.chunks_well_formed(),
                    s.verify_checksum(),
                    s.first_chunk_type(),
                );
            }
            if let Ok(m) = IcmpPacket::new_checked(l4) {
                let _ = (m.ident(), m.quoted());
            }
            let _ = checksum::checksum(l4);
        }
        for checksums in [true, false] {
            let x = extract(data, &f, 3, ExtractOptions { checksums });
            probe.feature(11 + u32::from(checksums), x.is_ok());
        }
    }
    let _ = ovs_wscale(data);
    let _ = TcpOptions::new(data).count();
    let _ = ipv6::walk_extensions(data, data.first().copied().unwrap_or(0));
    offload::complete(data, probe);
    offload::segments(data, probe);
    offload::hand_over(data, probe);
}

/// Features of a frame walk: which layers were found, and why not.
fn frame_features(probe: &mut Probe, link: u32, f: &ctrack_wire::Frame) {
    if !probe.records() {
        return;
    }
    let vlans = f.vlans.as_slice().len();
    // EtherTypes by class, so that random ones do not each make a feature.
    let class = |t: Option<u16>| {
        t.map(|t| match t {
            0x0800 | 0x86dd | 0x0806 | 0x8100 | 0x88a8 | 0x9100 => t,
            0..=0x05ff => 1,
            _ => 2,
        })
    };
    match &f.ip {
        Ok(ip) => probe.feature(
            link,
            (
                vlans,
                class(f.ethertype),
                ip.version == IpVersion::V6,
                ip.proto,
                std::mem::discriminant(&ip.frag),
                ip.frag_header.is_some(),
                (ip.l4 - ip.l3).min(64),
            ),
        ),
        Err(e) => {
            let why = match *e {
                NotIp::LinkTruncated => (0, None, None),
                NotIp::OtherProtocol(p) => (1, class(p), None),
                NotIp::BadIpv4(e) => (2, None, Some(e)),
                NotIp::BadIpv6(e) => (3, None, Some(e)),
            };
            probe.feature(link + 4, (vlans, class(f.ethertype), f.l3.is_some(), why));
        }
    }
}

/// A small pool of values, so that generated packets meet each other.
#[derive(Debug, Clone, Copy, Arbitrary)]
struct Pick(u8);

impl Pick {
    fn of<T: Copy>(self, pool: &[T]) -> T {
        pool[usize::from(self.0) % pool.len()]
    }
}

/// A sequence number near one of a few bases, so that segments often fall
/// inside or just outside windows.
#[derive(Debug, Clone, Copy, Arbitrary)]
struct Seq {
    base: Pick,
    delta: i16,
    wild: Option<u32>,
}

impl Seq {
    fn value(self) -> u32 {
        if let Some(w) = self.wild {
            return w;
        }
        let base = self.base.of(&[0u32, 1000, 100_000, u32::MAX - 500]);
        base.wrapping_add(i32::from(self.delta) as u32)
    }
}

#[derive(Debug, Clone, Arbitrary)]
enum L4Spec {
    Tcp {
        sport: Pick,
        dport: Pick,
        flags: Pick,
        raw_flags: Option<u16>,
        seq: Seq,
        ack: Seq,
        window: u16,
        len: u8,
        wscale: Option<u8>,
    },
    Udp {
        sport: Pick,
        dport: Pick,
        len: u8,
    },
    UdpLite {
        sport: Pick,
        coverage: u16,
    },
    Sctp {
        sport: Pick,
        chunk_len: u16,
    },
    IcmpQuery {
        ty: Pick,
        code: u8,
        id: Pick,
    },
    IcmpError {
        ty: Pick,
        code: u8,
        inner: Box<PacketSpec>,
        quote: u8,
    },
    Other {
        proto: u8,
        len: u8,
    },
}

#[derive(Debug, Clone, Arbitrary)]
struct PacketSpec {
    v6: bool,
    src: Pick,
    dst: Pick,
    l4: L4Spec,
    vlans: u8,
    ext: Option<u8>,
    more_frags: bool,
    frag_offset: u8,
    ip_options: u8,
    padding: u8,
    /// Flip one byte at this offset (modulo the frame's length).
    flip: Option<(u16, u8)>,
    /// Cut the frame to this length (modulo the frame's length + 1).
    cut: Option<u16>,
}

const TCP_FLAGS: [u16; 12] = [
    0x002, 0x012, 0x010, 0x018, 0x011, 0x004, 0x014, 0x001, 0x003, 0x000, 0x006, 0x019,
];

impl PacketSpec {
    fn addr(&self, p: Pick) -> IpAddr {
        if self.v6 {
            IpAddr::V6(p.of(&[
                Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 1),
                Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 2),
                Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 3),
            ]))
        } else {
            IpAddr::V4(p.of(&[
                Ipv4Addr::new(10, 0, 0, 1),
                Ipv4Addr::new(10, 0, 0, 2),
                Ipv4Addr::new(10, 0, 0, 3),
            ]))
        }
    }

    /// The frame this spec describes; `depth` counts the ICMP errors it is
    /// quoted inside.
    fn frame(&self, depth: u8) -> Frame {
        let mut f = Frame::new(self.addr(self.src), self.addr(self.dst), self.l4(depth));
        for i in 0..self.vlans % 4 {
            f = f.vlan(
                if i == 0 {
                    ethertype::QINQ
                } else {
                    ethertype::VLAN
                },
                u16::from(i),
            );
        }
        self.shape_ip(&mut f);
        f.padding = usize::from(self.padding % 24);
        f
    }

    /// The transport layer, with ports, types and sequence numbers drawn
    /// from the pools.
    fn l4(&self, depth: u8) -> L4 {
        let ports = [80u16, 443, 40000, 40001, 0];
        match &self.l4 {
            L4Spec::Tcp {
                sport,
                dport,
                flags,
                raw_flags,
                seq,
                ack,
                window,
                len,
                wscale,
            } => L4::Tcp {
                sport: sport.of(&ports),
                dport: dport.of(&ports),
                seq: seq.value(),
                ack: ack.value(),
                flags: raw_flags.unwrap_or_else(|| flags.of(&TCP_FLAGS)),
                window: *window,
                options: wscale.map_or_else(Vec::new, |w| vec![1, 3, 3, w]),
                payload: vec![0x61; usize::from(*len)],
            },
            L4Spec::Udp { sport, dport, len } => L4::udp(
                sport.of(&ports),
                dport.of(&ports),
                &vec![0; usize::from(*len)],
            ),
            L4Spec::UdpLite { sport, coverage } => L4::UdpLite {
                sport: sport.of(&ports),
                dport: 53,
                coverage: *coverage % 24,
                payload: vec![1; 8],
            },
            L4Spec::Sctp { sport, chunk_len } => L4::Sctp {
                sport: sport.of(&ports),
                dport: 5000,
                vtag: 0,
                chunks: {
                    let mut c = vec![1, 0, 0, 0, 0, 0, 0, 0];
                    c[2..4].copy_from_slice(&(chunk_len % 16).to_be_bytes());
                    c
                },
            },
            L4Spec::IcmpQuery { ty, code, id } => {
                let ty = if self.v6 {
                    ty.of(&[128u8, 129, 135, 1])
                } else {
                    ty.of(&[8u8, 0, 13, 14, 15, 16, 9, 3])
                };
                let mut l4 = L4::icmp_query(ty, id.of(&[1u16, 2]), 1);
                if let L4::Icmp { code: c, .. } = &mut l4 {
                    *c = code % 2;
                }
                l4
            }
            L4Spec::IcmpError {
                ty,
                code,
                inner,
                quote,
            } => {
                let ty = if self.v6 {
                    ty.of(&[1u8, 2, 3, 4])
                } else {
                    ty.of(&[3u8, 4, 5, 11, 12])
                };
                let mut inner = (**inner).clone();
                inner.v6 = self.v6;
                inner.flip = None;
                inner.cut = None;
                let quoted = if depth < 2 {
                    build::quote(
                        &inner.frame(depth + 1).ip_packet(),
                        usize::from(*quote % 40),
                    )
                } else {
                    Vec::new()
                };
                L4::icmp_error(ty, *code, &quoted)
            }
            L4Spec::Other { proto, len } => L4::Raw {
                proto: *proto,
                payload: vec![0; usize::from(*len)],
            },
        }
    }

    /// IPv6 extension headers, or IPv4 fragment fields and options.
    fn shape_ip(&self, f: &mut Frame) {
        if self.v6 {
            if let Some(e) = self.ext {
                f.ext = match e % 5 {
                    0 => vec![Ext::HopByHop(0)],
                    1 => vec![Ext::Routing, Ext::DestOpts(1)],
                    2 => vec![Ext::Fragment {
                        offset: u16::from(self.frag_offset) * 8,
                        more: self.more_frags,
                        ident: 1,
                    }],
                    3 => vec![Ext::DestOpts(0), Ext::HopByHop(1)],
                    _ => vec![],
                };
            }
        } else {
            f.more_frags = self.more_frags && self.frag_offset.is_multiple_of(4);
            f.frag_offset = if self.frag_offset.is_multiple_of(8) {
                u16::from(self.frag_offset)
            } else {
                0
            };
            f.ip_options = vec![1; usize::from(self.ip_options % 12)];
        }
    }

    fn bytes(&self) -> Vec<u8> {
        let mut b = self.frame(0).build();
        if let Some((at, x)) = self.flip
            && !b.is_empty()
        {
            let at = usize::from(at) % b.len();
            b[at] ^= x;
        }
        if let Some(c) = self.cut {
            b.truncate(usize::from(c) % (b.len() + 1));
        }
        b
    }
}

#[derive(Debug, Arbitrary)]
enum Op {
    Packet {
        spec: PacketSpec,
        zone: u8,
        commit: bool,
        force: bool,
        mark: Option<u8>,
    },
    Raw {
        bytes: Vec<u8>,
        link: Pick,
    },
    Advance {
        ms: u32,
    },
    Sweep {
        budget: u8,
    },
    FlushZone {
        zone: u8,
    },
    FlushAll,
}

/// Longest time any connection can live with the default timeouts.
const MAX_LIFETIME_MS: u64 = 24 * 60 * 60 * 1000 + 1000;
/// Connection limit of the fuzzed tracker: small, so that refusals happen.
const MAX_CONNS: usize = 48;

/// Runs a sequence of operations decoded from `data` through a tracker.
/// Counts the packets processed.
pub fn tracker(data: &[u8], probe: &mut Probe) {
    let mut u = Unstructured::new(data);
    let loose = bool::arbitrary(&mut u).unwrap_or(true);
    let seq_check = bool::arbitrary(&mut u).unwrap_or(true);
    let checksums = bool::arbitrary(&mut u).unwrap_or(true);
    let t = Tracker::new(Config {
        tcp_loose: loose,
        tcp_seq_check: seq_check,
        checksums,
        max_conns: MAX_CONNS,
        ..Config::default()
    });
    let mut now = Time::from_secs(1_000_000);
    let mut packets = 0u64;
    let mut last = 0u64;
    let mut stats = Stats::default();
    // `arbitrary` keeps producing defaults from exhausted input: stop when
    // the input is used up (and after a bounded number of operations).
    for _ in 0..4096 {
        if u.is_empty() {
            break;
        }
        let Ok(op) = Op::arbitrary(&mut u) else {
            break;
        };
        match op {
            Op::Packet {
                spec,
                zone,
                commit,
                force,
                mark,
            } => {
                let action = CtAction {
                    zone: u16::from(zone % 3),
                    commit,
                    force,
                    mark: mark.map(|m| Masked::new(u32::from(m), 0xff)),
                    ..CtAction::default()
                };
                let bytes = spec.bytes();
                let v = t.process(&bytes, LinkType::Ethernet, &action, now, &mut stats);
                packets += 1;
                check_verdict(&t, &v, &action, now);
                verdict_feature(probe, 20, &v, &mut last);
            }
            Op::Raw { bytes, link } => {
                let link = link.of(&LINKS);
                let v = t.process(&bytes, link, &CtAction::commit(0), now, &mut stats);
                packets += 1;
                check_verdict(&t, &v, &CtAction::commit(0), now);
                verdict_feature(probe, 22, &v, &mut last);
            }
            Op::Advance { ms } => now = now + ctrack_core::Millis(u64::from(ms) * 16),
            Op::Sweep { budget } => {
                let s = t.sweep(now, usize::from(budget), &mut stats);
                assert!(s.examined <= usize::from(budget));
                if let Some(next) = s.next {
                    assert!(next >= now || s.examined == usize::from(budget));
                }
            }
            Op::FlushZone { zone } => {
                let z = u16::from(zone % 3);
                t.flush_zone(z);
                assert_eq!(t.zone_len(z), 0);
            }
            Op::FlushAll => {
                t.flush_all(&mut stats);
                assert_eq!(t.table_len(), 0);
            }
        }
        assert!(t.table_len() <= MAX_CONNS, "table over its limit");
    }
    probe.count(packets);
    let s = stats;
    assert_eq!(s.packets, packets);
    let reasons: u64 = ctrack_core::InvalidReason::ALL
        .iter()
        .map(|r| s.invalid_count(*r))
        .sum();
    assert_eq!(reasons, s.invalid);
    // Past every timeout, a sweep frees everything: nothing leaks.
    let end = now + ctrack_core::Millis(MAX_LIFETIME_MS);
    let s = t.sweep(end, usize::MAX, &mut stats);
    assert_eq!(
        t.table_len(),
        0,
        "connections left after all timeouts: {s:?}"
    );
    assert_eq!(s.next, None);
}

/// Runs raw frames (captured Ethernet frames, mutated) through a tracker,
/// one millisecond apart, with the same checks as [`tracker`]. Counts the
/// frames.
pub fn tracker_frames(frames: &[Vec<u8>], probe: &mut Probe) {
    let t = Tracker::new(Config {
        max_conns: MAX_CONNS,
        ..Config::default()
    });
    let mut now = Time::from_secs(1_000_000);
    let mut stats = Stats::default();
    let mut last = 0;
    for (i, f) in frames.iter().enumerate() {
        let action = CtAction::commit((i % 2) as u16);
        let v = t.process(f, LinkType::Ethernet, &action, now, &mut stats);
        probe.count(1);
        check_verdict(&t, &v, &action, now);
        verdict_feature(probe, 24, &v, &mut last);
        assert!(t.table_len() <= MAX_CONNS);
        now = now + ctrack_core::Millis(1);
        if i % 16 == 0 {
            t.sweep(now, 8, &mut stats);
        }
    }
    assert_eq!(stats.packets, frames.len() as u64);
    t.sweep(
        now + ctrack_core::Millis(MAX_LIFETIME_MS),
        usize::MAX,
        &mut stats,
    );
    assert_eq!(t.table_len(), 0);
}

/// [`tracker_frames`] on a frame list written by
/// [`mutate::encode_frames`].
pub fn tracker_frames_bytes(data: &[u8], probe: &mut Probe) {
    tracker_frames(&mutate::decode_frames(data), probe);
}

/// Records a verdict's outcome, alone (at `tag`) and after the previous
/// one (at `tag + 1`).
fn verdict_feature(probe: &mut Probe, tag: u32, v: &ctrack_core::Verdict, last: &mut u64) {
    if !probe.records() {
        return;
    }
    let now = u64::from(v.state.bits())
        | u64::from(v.invalid.map_or(0xff, |r| r as u8)) << 8
        | u64::from(v.refused.is_some()) << 16
        | u64::from(v.committed) << 17
        | u64::from(v.conn.is_some()) << 18
        | u64::from(v.dir == ctrack_core::Dir::Reply) << 19;
    probe.feature(tag, now);
    probe.feature(tag + 1, (*last, now));
    *last = now;
}

fn check_verdict(t: &Tracker, v: &ctrack_core::Verdict, action: &CtAction, now: Time) {
    assert!(v.state.contains(CtState::TRK));
    assert_eq!(v.zone, action.zone);
    if v.state.contains(CtState::INV) {
        assert!(v.invalid.is_some());
        assert!(
            !v.state
                .intersects(CtState::NEW | CtState::EST | CtState::REL)
        );
    } else {
        assert!(v.invalid.is_none());
        let kinds = [CtState::NEW, CtState::EST, CtState::REL]
            .iter()
            .filter(|k| v.state.contains(**k))
            .count();
        assert_eq!(kinds, 1, "exactly one of new, est, rel: {}", v.state);
    }
    if let Some(id) = v.conn {
        let c = t.conn(id, now).expect("a verdict names a live connection");
        assert!(c.expires > now);
        assert_eq!(c.entry.zone, action.zone);
        assert_eq!(v.mark, c.entry.mark);
    } else {
        assert_eq!((v.mark, v.label), (0, 0));
    }
    if v.refused.is_some() {
        assert!(v.state.contains(CtState::NEW) && v.conn.is_none());
    }
}

/// Reads `data` as a capture file to the end or the first error. Counts
/// the packets read.
pub fn capture(data: &[u8], probe: &mut Probe) {
    let mut r = match ctrack_datapath::capture::CaptureReader::new(data) {
        Ok(r) => r,
        Err(e) => {
            probe.feature(30, std::mem::discriminant(&e));
            return;
        }
    };
    let mut n = 0usize;
    loop {
        match r.next_packet() {
            Ok(Some(p)) => {
                assert!(p.data.len() <= ctrack_datapath::capture::MAX_RECORD);
                let f = parse_frame(p.data, p.link);
                frame_features(probe, 31, &f);
                n += 1;
                assert!(n <= data.len(), "more packets than bytes");
            }
            Ok(None) => break,
            Err(e) => {
                probe.feature(32, std::mem::discriminant(&e));
                break;
            }
        }
    }
    probe.count(n as u64);
}
