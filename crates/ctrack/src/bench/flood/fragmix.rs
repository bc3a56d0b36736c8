//! The fragment flood's traffic and its driver, without a command line.
//!
//! Shared by `ctrack bench flood frag` and ctrack-core's `frag_flood` test
//! (which includes this file by path): it uses only std, ctrack-core and
//! ctrack-wire, and its own small seeded generator (SplitMix64, written
//! here so that the test needs no random-number crate).
//!
//! The traffic: hostile fragments of both families (new datagrams that
//! never complete, more pieces of them, exact repeats, overlaps, tiny
//! fragments, fragments passing 65535 bytes, lengths that are not a
//! multiple of 8), from random sources with random identifications, and
//! every `legit_every` hostile fragments one legitimate UDP datagram of
//! another flow (2 to 7 fragments, in random order, one fragment every
//! `gap` hostile ones). Virtual time advances by `1/pps` per fragment.

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

use ctrack_core::frag::{FragConfig, FragStats, Offer, Reassembler};
use ctrack_core::{LinkType, Time};
use ctrack_wire::build::{Frame, L4};
use ctrack_wire::ipv4;

/// What to send.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Mix {
    /// Hostile fragments.
    pub(crate) fragments: u64,
    /// One legitimate datagram per this many hostile fragments.
    pub(crate) legit_every: u64,
    /// Hostile fragments between two fragments of a legitimate datagram.
    pub(crate) gap: u64,
    /// Virtual arrival rate (fragments per second of virtual time).
    pub(crate) pps: u64,
    /// Seed of the generator.
    pub(crate) seed: u64,
    /// Fragments offered between two samples of the reassembler's memory
    /// (and two calls to its expiry).
    pub(crate) batch: usize,
    /// The reassembler's settings.
    pub(crate) config: FragConfig,
}

/// The hostile kinds, in the order of [`Report::kinds`].
pub(crate) const KINDS: [&str; 7] = [
    "never_completing",
    "more_of_one",
    "duplicate",
    "overlapping",
    "tiny",
    "oversized",
    "odd_length",
];

/// Weights of [`KINDS`] (out of 100).
const WEIGHTS: [u64; 7] = [35, 15, 10, 10, 15, 10, 5];

/// What happened.
#[derive(Debug, Clone, Default)]
pub(crate) struct Report {
    /// Hostile fragments offered.
    pub(crate) hostile: u64,
    /// Hostile fragments of each kind (see [`KINDS`]).
    pub(crate) kinds: [u64; 7],
    /// Fragments of legitimate datagrams offered.
    pub(crate) legit_fragments: u64,
    /// Legitimate datagrams sent whole.
    pub(crate) legit_sent: u64,
    /// Legitimate datagrams that came out of the reassembler whole.
    pub(crate) legit_completed: u64,
    /// Legitimate datagrams that came out different from what was sent.
    pub(crate) legit_corrupt: u64,
    /// Hostile datagrams that completed (none should).
    pub(crate) hostile_completed: u64,
    /// Time spent in the reassembler (offers and expiry), wall clock.
    pub(crate) busy: Duration,
    /// Virtual time the flood lasted (ms).
    pub(crate) virtual_ms: u64,
    /// Peak fragments held (sampled after every batch).
    pub(crate) peak_held: usize,
    /// Peak bytes of frames held.
    pub(crate) peak_bytes: usize,
    /// Peak datagrams held.
    pub(crate) peak_datagrams: usize,
    /// Peak of the reassembler's whole memory estimate.
    pub(crate) peak_memory: usize,
    /// Fragment tags handed back by expiry during the flood.
    pub(crate) expired_during: u64,
    /// Counters at the end of the flood.
    pub(crate) at_end: FragStats,
    /// Held fragments, bytes, datagrams and memory estimate once virtual
    /// time has moved past the reassembly timeout.
    pub(crate) after_timeout: (usize, usize, usize, usize),
    /// Fragment tags handed back by that last expiry.
    pub(crate) expired_after: u64,
    /// Counters after that.
    pub(crate) final_stats: FragStats,
}

impl Report {
    /// Legitimate datagrams completed, as a share of those sent.
    pub(crate) fn legit_ratio(&self) -> f64 {
        if self.legit_sent == 0 {
            1.0
        } else {
            self.legit_completed as f64 / self.legit_sent as f64
        }
    }

    /// Fragments offered per second of time in the reassembler.
    pub(crate) fn rate(&self) -> f64 {
        (self.hostile + self.legit_fragments) as f64 / self.busy.as_secs_f64().max(1e-9)
    }

    /// What is wrong: the bounds passed, memory left after the timeout,
    /// too few legitimate datagrams completed (below `min_ratio`), any
    /// datagram corrupted. Empty when all is well.
    pub(crate) fn failures(&self, c: &FragConfig, min_ratio: f64) -> Vec<String> {
        let mut f = Vec::new();
        if self.peak_held > c.max_frags {
            f.push(format!(
                "{} fragments held at peak, above the bound of {}",
                self.peak_held, c.max_frags
            ));
        }
        if self.peak_bytes > c.max_bytes {
            f.push(format!(
                "{} bytes held at peak, above the bound of {}",
                self.peak_bytes, c.max_bytes
            ));
        }
        if self.peak_datagrams > c.max_datagrams() {
            f.push(format!(
                "{} datagrams held at peak, above the bound of {}",
                self.peak_datagrams,
                c.max_datagrams()
            ));
        }
        let (h, b, d, _) = self.after_timeout;
        if h != 0 || b != 0 || d != 0 {
            f.push(format!(
                "after the timeout {h} fragments, {b} bytes, {d} datagrams are still held"
            ));
        }
        if self.legit_ratio() < min_ratio {
            f.push(format!(
                "only {} of {} legitimate datagrams completed ({:.3}%)",
                self.legit_completed,
                self.legit_sent,
                self.legit_ratio() * 100.0
            ));
        }
        if self.legit_corrupt > 0 || self.hostile_completed > 0 {
            f.push(format!(
                "{} legitimate datagrams came out corrupted, {} hostile ones completed",
                self.legit_corrupt, self.hostile_completed
            ));
        }
        f
    }
}

/// SplitMix64: small, fast, seeded; good enough for traffic.
#[derive(Debug, Clone)]
pub(crate) struct Rng(u64);

impl Rng {
    /// A generator from `seed`.
    pub(crate) fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    /// The next 64 random bits.
    pub(crate) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number below `n` (`n` > 0).
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next()) * u128::from(n)) >> 64) as u64
    }
}

/// A hostile datagram, for more pieces, repeats and overlaps.
#[derive(Debug, Clone, Copy)]
struct HKey {
    v6: bool,
    src: u128,
    dst: u128,
    id: u32,
    next_off: usize,
}

/// Payload bytes of a full-size fragment (a 1252-byte IPv4 or 1280-byte
/// IPv6 packet: at the default minimums).
const PIECE: usize = 1232;

/// A fragment frame: Ethernet, IPv4 or IPv6 with a fragment header, and
/// `len` payload bytes of `fill`.
fn frag_frame(k: &HKey, off: usize, more: bool, len: usize, fill: u8) -> Vec<u8> {
    let l3 = if k.v6 { 48 } else { 20 };
    let mut f = vec![fill; 14 + l3 + len];
    f[..12].copy_from_slice(&[2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1]);
    if k.v6 {
        f[12..14].copy_from_slice(&[0x86, 0xdd]);
        let ip = &mut f[14..];
        ip[..4].copy_from_slice(&[0x60, 0, 0, 0]);
        ip[4..6].copy_from_slice(&((8 + len) as u16).to_be_bytes());
        ip[6] = 44;
        ip[7] = 64;
        ip[8..24].copy_from_slice(&k.src.to_be_bytes());
        ip[24..40].copy_from_slice(&k.dst.to_be_bytes());
        ip[40] = 17;
        ip[41] = 0;
        ip[42..44].copy_from_slice(&((off as u16 & !7) | u16::from(more)).to_be_bytes());
        ip[44..48].copy_from_slice(&k.id.to_be_bytes());
    } else {
        f[12..14].copy_from_slice(&[0x08, 0x00]);
        let ip = &mut f[14..];
        ip[..2].copy_from_slice(&[0x45, 0]);
        ip[2..4].copy_from_slice(&((20 + len) as u16).to_be_bytes());
        ip[4..6].copy_from_slice(&(k.id as u16).to_be_bytes());
        let fo = (off / 8) as u16 | if more { 0x2000 } else { 0 };
        ip[6..8].copy_from_slice(&fo.to_be_bytes());
        ip[8] = 64;
        ip[9] = 17;
        ip[10..12].copy_from_slice(&[0, 0]);
        ip[12..16].copy_from_slice(&(k.src as u32).to_be_bytes());
        ip[16..20].copy_from_slice(&(k.dst as u32).to_be_bytes());
        ipv4::Ipv4Packet::new_unchecked(&mut f[14..]).fill_checksum();
    }
    f
}

/// The hostile side: recent datagrams and frames to come back to.
struct Hostile {
    recent: Vec<HKey>,
    frames: Vec<Vec<u8>>,
    next: usize,
}

impl Hostile {
    fn new() -> Hostile {
        Hostile {
            recent: Vec::new(),
            frames: Vec::new(),
            next: 0,
        }
    }

    /// A fresh datagram: random addresses (IPv4 never in 10.200.0.0/15,
    /// IPv6 never in fd00::/8, where the legitimate flows live) and id.
    fn fresh(rng: &mut Rng) -> HKey {
        let v6 = rng.next() & 1 == 1;
        let r = rng.next();
        let (src, dst) = if v6 {
            let s = (0x2001_0db8u128 << 96) | u128::from(r) << 16 | u128::from(rng.next() as u16);
            (s, (0x2001_0db8u128 << 96) | 0xbeef)
        } else {
            // First octet 11..=223: never 10.
            let first = 11 + (r >> 56) % 213;
            (
                u128::from((first << 24) as u32 | (r as u32 & 0x00ff_ffff)),
                u128::from(0xc0a8_0001u32),
            )
        };
        HKey {
            v6,
            src,
            dst,
            id: rng.next() as u32,
            next_off: 0,
        }
    }

    fn remember(&mut self, k: HKey, frame: &[u8]) {
        const RECENT: usize = 256;
        const FRAMES: usize = 64;
        if self.recent.len() < RECENT {
            self.recent.push(k);
        } else {
            self.recent[self.next % RECENT] = k;
        }
        if self.frames.len() < FRAMES {
            self.frames.push(frame.to_vec());
        } else {
            self.frames[self.next % FRAMES] = frame.to_vec();
        }
        self.next += 1;
    }

    fn pick_recent(&mut self, rng: &mut Rng) -> HKey {
        if self.recent.is_empty() {
            return Hostile::fresh(rng);
        }
        self.recent[rng.below(self.recent.len() as u64) as usize]
    }

    /// One hostile fragment of `kind` (an index in [`KINDS`]).
    fn fragment(&mut self, kind: usize, rng: &mut Rng) -> Vec<u8> {
        let fill = rng.next() as u8;
        match kind {
            0 => {
                let mut k = Hostile::fresh(rng);
                // Not always the first piece: any offset but the end.
                let off = (rng.below(40) as usize) * PIECE;
                let f = frag_frame(&k, off, true, PIECE, fill);
                k.next_off = off + PIECE;
                self.remember(k, &f);
                f
            }
            1 => {
                let i = rng.below(self.recent.len().max(1) as u64) as usize;
                let mut k = self.pick_recent(rng);
                // A gap before it now and then, never the last piece.
                let off = (k.next_off + PIECE * rng.below(2) as usize).min(60 * 1024);
                let f = frag_frame(&k, off, true, PIECE, fill);
                k.next_off = off + PIECE;
                if let Some(r) = self.recent.get_mut(i) {
                    *r = k;
                }
                f
            }
            2 => match self.frames.len() {
                0 => self.fragment(0, rng),
                n => self.frames[rng.below(n as u64) as usize].clone(),
            },
            3 => {
                let k = self.pick_recent(rng);
                // 8 to PIECE-8 bytes into a piece held (or a new datagram).
                let base = k.next_off.saturating_sub(PIECE);
                let off = base + 8 * (1 + rng.below(PIECE as u64 / 8 - 1) as usize);
                frag_frame(&k, off.min(64_000), true, PIECE, fill)
            }
            4 => frag_frame(&Hostile::fresh(rng), 0, true, 8, fill),
            5 => {
                let k = if rng.next() & 1 == 0 {
                    self.pick_recent(rng)
                } else {
                    Hostile::fresh(rng)
                };
                // Ends past 65535 bytes of datagram.
                let off = 65_528 - 8 * rng.below(100) as usize;
                frag_frame(&k, off, rng.next() & 1 == 0, PIECE, fill)
            }
            _ => {
                let k = Hostile::fresh(rng);
                frag_frame(&k, 0, true, PIECE - 1 - rng.below(7) as usize, fill)
            }
        }
    }
}

fn pick_kind(rng: &mut Rng) -> usize {
    let mut r = rng.below(WEIGHTS.iter().sum());
    for (i, w) in WEIGHTS.iter().enumerate() {
        if r < *w {
            return i;
        }
        r -= w;
    }
    0
}

/// The legitimate side: datagrams in flight and fragments waiting.
struct Legit {
    sent: HashMap<u64, Vec<u8>>,
    queue: VecDeque<(Vec<u8>, u64)>,
    count: u64,
}

/// Tags of legitimate fragments have this bit; the rest is the datagram.
const LEGIT: u64 = 1 << 63;

impl Legit {
    /// A legitimate UDP datagram of 1233 to 8000 bytes of payload, cut in
    /// pieces queued in random order.
    fn datagram(&mut self, rng: &mut Rng) {
        let n = self.count;
        self.count += 1;
        let v6 = n & 1 == 1;
        let payload: Vec<u8> = (0..1233 + rng.below(8000 - 1233) as usize)
            .map(|i| (i as u64 ^ n) as u8)
            .collect();
        let sport = 1024 + (n % 50_000) as u16;
        let mut frame = if v6 {
            let s = std::net::Ipv6Addr::from(0xfd00_0200u128 << 96 | u128::from(n));
            let d = std::net::Ipv6Addr::from(0xfd00_0201u128 << 96 | 1);
            Frame::v6(s, d, L4::udp(sport, 53, &payload))
        } else {
            let s = (0x0ac8_0000u32 | (n as u32 & 0xffff)).to_be_bytes();
            Frame::v4(s, [10, 201, 0, 1], L4::udp(sport, 53, &payload))
        };
        frame.ident = (n >> 16) as u16;
        let full = frame.build();
        let mut pieces = cut(&full, v6, (n >> 16) as u32);
        // Shuffle (Fisher-Yates).
        for i in (1..pieces.len()).rev() {
            pieces.swap(i, rng.below(i as u64 + 1) as usize);
        }
        self.queue
            .extend(pieces.into_iter().map(|p| (p, LEGIT | n)));
        self.sent.insert(n, full);
    }
}

/// Cuts a whole Ethernet + IP datagram in pieces of [`PIECE`] bytes.
fn cut(full: &[u8], v6: bool, id: u32) -> Vec<Vec<u8>> {
    let hl = if v6 { 40 } else { 20 };
    let data = &full[14 + hl..];
    let mut out = Vec::new();
    let mut off = 0;
    while off < data.len() {
        let n = PIECE.min(data.len() - off);
        let more = off + n < data.len();
        let mut f = Vec::with_capacity(14 + hl + 8 + n);
        f.extend_from_slice(&full[..14 + hl]);
        if v6 {
            f[14 + 4..14 + 6].copy_from_slice(&((8 + n) as u16).to_be_bytes());
            let next = f[14 + 6];
            f[14 + 6] = 44;
            f.extend_from_slice(&[next, 0]);
            f.extend_from_slice(&(off as u16 | u16::from(more)).to_be_bytes());
            f.extend_from_slice(&id.to_be_bytes());
        } else {
            f[14 + 2..14 + 4].copy_from_slice(&((20 + n) as u16).to_be_bytes());
            let fo = (off / 8) as u16 | if more { 0x2000 } else { 0 };
            f[14 + 6..14 + 8].copy_from_slice(&fo.to_be_bytes());
            ipv4::Ipv4Packet::new_unchecked(&mut f[14..]).fill_checksum();
        }
        f.extend_from_slice(&data[off..off + n]);
        out.push(f);
        off += n;
    }
    out
}

/// Runs the flood against a fresh reassembler with `mix.config`.
pub(crate) fn run(mix: &Mix) -> Report {
    let r: Reassembler<u64> = Reassembler::new(mix.config);
    let mut rng = Rng::new(mix.seed);
    let mut hostile = Hostile::new();
    let mut legit = Legit {
        sent: HashMap::new(),
        queue: VecDeque::new(),
        count: 0,
    };
    let mut rep = Report::default();
    let ns_per = 1_000_000_000 / mix.pps.max(1);
    let start_ns: u64 = 1_000_000_000;
    let mut sent: u64 = 0;
    let mut since_legit = 0u64;
    let mut batch: Vec<(Vec<u8>, u64)> = Vec::with_capacity(mix.batch);
    let mut offers = Vec::with_capacity(mix.batch);
    let mut expired = Vec::new();
    while rep.hostile < mix.fragments || !legit.queue.is_empty() {
        batch.clear();
        while batch.len() < mix.batch && (rep.hostile < mix.fragments || !legit.queue.is_empty()) {
            let flood_over = rep.hostile >= mix.fragments;
            if (since_legit >= mix.gap || flood_over)
                && let Some((f, tag)) = legit.queue.pop_front()
            {
                batch.push((f, tag));
                rep.legit_fragments += 1;
                since_legit = 0;
                continue;
            }
            let kind = pick_kind(&mut rng);
            rep.kinds[kind] += 1;
            let tag = rep.hostile;
            batch.push((hostile.fragment(kind, &mut rng), tag));
            rep.hostile += 1;
            since_legit += 1;
            if rep.hostile % mix.legit_every == 0 && rep.hostile < mix.fragments {
                legit.datagram(&mut rng);
            }
        }
        let t0 = Instant::now();
        for (frame, tag) in batch.drain(..) {
            let now = Time::from_nanos(start_ns + sent * ns_per);
            sent += 1;
            offers.push(r.offer(frame, tag, LinkType::Ethernet, 0, now, true));
        }
        let now = Time::from_nanos(start_ns + sent * ns_per);
        r.expire(now, &mut expired);
        rep.busy += t0.elapsed();
        rep.expired_during += expired.len() as u64;
        expired.clear();
        for o in offers.drain(..) {
            judge(o, &mut legit.sent, &mut rep);
        }
        rep.peak_held = rep.peak_held.max(r.held());
        rep.peak_bytes = rep.peak_bytes.max(r.bytes());
        rep.peak_datagrams = rep.peak_datagrams.max(r.datagrams());
        rep.peak_memory = rep.peak_memory.max(r.memory());
    }
    rep.legit_sent = legit.count;
    rep.virtual_ms = sent * ns_per / 1_000_000;
    rep.at_end = r.stats();
    let later = start_ns / 1_000_000 + rep.virtual_ms + mix.config.timeout_ms + 1;
    r.expire(Time::from_millis(later), &mut expired);
    rep.expired_after = expired.len() as u64;
    rep.after_timeout = (r.held(), r.bytes(), r.datagrams(), r.memory());
    rep.final_stats = r.stats();
    rep
}

/// Counts what one offer did.
fn judge(o: Offer<u64>, sent: &mut HashMap<u64, Vec<u8>>, rep: &mut Report) {
    let Offer::Complete(d) = o else {
        return;
    };
    let mut tags = d.tags();
    let first = tags.next().copied().unwrap_or(0);
    if first & LEGIT == 0 {
        rep.hostile_completed += 1;
        return;
    }
    match sent.remove(&(first & !LEGIT)) {
        Some(full) if full == d.frame && tags.all(|t| *t == first) => rep.legit_completed += 1,
        _ => rep.legit_corrupt += 1,
    }
}
