//! IP fragment reassembly in front of the tracker.
//!
//! Fragments of one datagram (same addresses, identification, protocol for
//! IPv4, and zone) are held until the datagram is whole; the tracker then
//! sees the datagram once, and its verdict (and translation) applies to
//! every fragment. What leaves is the original fragments, each rebuilt from
//! the (possibly translated) datagram: its own link and IP headers with the
//! datagram's addresses, and its own slice of the datagram's payload, so a
//! translated port or checksum lands in the first fragment and the rest
//! keep their sizes and order ("re-fragmented as they came"), sorted by
//! offset as Open vSwitch and Linux send them.
//!
//! Bounds (Open vSwitch's defaults): at most 1000 fragments held (settable
//! up to 5000) and a byte budget; a non-last fragment of fewer than 1200
//! (IPv4) / 1280 (IPv6) bytes of IP packet is refused as too small (these
//! bounds settable down to 400); a datagram not whole 15 s after its first
//! fragment arrived is dropped with its fragments. A datagram may not pass
//! 65535 bytes.
//!
//! Overlaps (RFC 5722, as Linux): a fragment that repeats one held exactly
//! is dropped on its own; one that overlaps differently (teardrop and its
//! relatives) or contradicts the datagram's end drops the whole datagram,
//! and later fragments of it are dropped until its time would have run
//! out. A non-last fragment whose length is not a multiple of 8 is
//! malformed. An IPv6 fragment header with offset 0 and no more fragments
//! (an atomic fragment, RFC 6946) is a datagram of one fragment.

use std::collections::{HashMap, VecDeque};
use std::hash::BuildHasher;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};

use ctrack_wire::{IpLayer, IpVersion, LinkType, NotIp, ipv4, ipv6, parse_frame};

use crate::key::Zone;
use crate::time::Time;

/// Open vSwitch's default for fragments held.
pub const DEFAULT_MAX_FRAGS: usize = 1000;
/// The most fragments that may be held (Open vSwitch's bound).
pub const MAX_FRAGS_LIMIT: usize = 5000;
/// Default minimum size of a non-last IPv4 fragment (its IP packet).
pub const DEFAULT_MIN_V4: usize = 1200;
/// Default minimum size of a non-last IPv6 fragment.
pub const DEFAULT_MIN_V6: usize = 1280;
/// The smallest minimum that may be set.
pub const MIN_FRAG_LIMIT: usize = 400;
/// How long a datagram may take to arrive whole (ms).
pub const DEFAULT_TIMEOUT_MS: u64 = 15_000;
/// Default byte budget of held fragments.
pub const DEFAULT_MAX_BYTES: usize = 64 << 20;

const SHARDS: usize = 16;
const MAX_DATAGRAM: usize = 65535;

/// Settings of a [`Reassembler`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FragConfig {
    /// Reassemble IPv4 (off: IPv4 fragments are refused as such).
    pub v4: bool,
    /// Reassemble IPv6.
    pub v6: bool,
    /// Most fragments held at once (at most [`MAX_FRAGS_LIMIT`]).
    pub max_frags: usize,
    /// Most bytes of held frames.
    pub max_bytes: usize,
    /// Smallest IPv4 non-last fragment (IP header included).
    pub min_v4: usize,
    /// Smallest IPv6 non-last fragment (IPv6 and extension headers
    /// included).
    pub min_v6: usize,
    /// Time a datagram has to arrive whole (ms).
    pub timeout_ms: u64,
}

impl Default for FragConfig {
    fn default() -> Self {
        FragConfig {
            v4: true,
            v6: true,
            max_frags: DEFAULT_MAX_FRAGS,
            max_bytes: DEFAULT_MAX_BYTES,
            min_v4: DEFAULT_MIN_V4,
            min_v6: DEFAULT_MIN_V6,
            timeout_ms: DEFAULT_TIMEOUT_MS,
        }
    }
}

impl FragConfig {
    /// Checks the bounds; the error says which setting is out of range.
    pub fn validate(&self) -> Result<(), String> {
        if self.max_frags > MAX_FRAGS_LIMIT {
            return Err(format!(
                "at most {MAX_FRAGS_LIMIT} fragments may be held (asked {})",
                self.max_frags
            ));
        }
        if self.min_v4 < MIN_FRAG_LIMIT || self.min_v6 < MIN_FRAG_LIMIT {
            return Err(format!(
                "the minimum fragment size is at least {MIN_FRAG_LIMIT} bytes"
            ));
        }
        Ok(())
    }
}

/// Why a fragment was not held.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
pub enum FragError {
    /// Reassembly of its family is off.
    Disabled,
    /// A non-last fragment smaller than the minimum.
    TooSmall,
    /// Lengths that cannot be: a non-last fragment not a multiple of 8
    /// bytes, an IPv4 header with a bad checksum or length.
    Malformed,
    /// It repeats a fragment held (dropped, the datagram goes on).
    Duplicate,
    /// It overlaps a fragment held differently, or contradicts the
    /// datagram's end: the datagram is dropped.
    Overlap,
    /// The datagram would pass 65535 bytes: it is dropped.
    TooBig,
    /// Its datagram was dropped earlier (overlap, too big).
    DatagramDropped,
    /// As many fragments or bytes as allowed are held.
    Limit,
    /// Its datagram did not arrive whole in time.
    Expired,
}

impl FragError {
    /// A short stable name.
    pub fn name(self) -> &'static str {
        match self {
            FragError::Disabled => "disabled",
            FragError::TooSmall => "too_small",
            FragError::Malformed => "malformed",
            FragError::Duplicate => "duplicate",
            FragError::Overlap => "overlap",
            FragError::TooBig => "too_big",
            FragError::DatagramDropped => "datagram_dropped",
            FragError::Limit => "limit",
            FragError::Expired => "expired",
        }
    }
}

/// Counters of a [`Reassembler`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct FragStats {
    /// Fragments held now.
    pub held: u64,
    /// Fragments taken in.
    pub accepted: u64,
    /// Datagrams completed.
    pub completed: u64,
    /// Fragments sent on with their completed datagram.
    pub released: u64,
    /// Fragments dropped because their datagram timed out.
    pub expired: u64,
    /// Non-last fragments refused as too small.
    pub too_small: u64,
    /// Fragments refused as malformed.
    pub malformed: u64,
    /// Exact repeats dropped.
    pub duplicate: u64,
    /// Datagrams dropped for an overlap (and their fragments).
    pub overlap: u64,
    /// Datagrams dropped for passing 65535 bytes.
    pub too_big: u64,
    /// Fragments dropped because their datagram had been dropped.
    pub dropped: u64,
    /// Fragments refused at a limit.
    pub limit: u64,
}

/// A fragment held, and what its caller tagged it with.
#[derive(Debug)]
struct Held<T> {
    frame: Vec<u8>,
    tag: T,
    /// Offset of the payload in the datagram.
    off: usize,
    /// Payload bytes.
    len: usize,
    /// Where its payload starts in `frame`.
    data: usize,
    /// Where its IP datagram ends in `frame` (link padding follows).
    end: usize,
    /// Its IP header's offset.
    l3: usize,
}

/// Identifies a datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct Key {
    v6: bool,
    src: u128,
    dst: u128,
    id: u32,
    proto: u8,
    zone: Zone,
}

#[derive(Debug)]
struct List<T> {
    frags: Vec<Held<T>>,
    /// The datagram's payload length, once the last fragment came.
    total: Option<usize>,
    bytes: usize,
    deadline: u64,
    /// Dropped: later fragments are dropped until the deadline.
    failed: bool,
    link: LinkType,
}

#[derive(Debug)]
struct Shard<T> {
    lists: HashMap<Key, List<T>>,
    /// Lists by creation, for expiry.
    order: VecDeque<(u64, Key)>,
}

impl<T> Default for Shard<T> {
    fn default() -> Self {
        Shard {
            lists: HashMap::new(),
            order: VecDeque::new(),
        }
    }
}

/// A datagram made whole, with the fragments it came in.
#[derive(Debug)]
pub struct Datagram<T> {
    /// The datagram in a frame: the first fragment's link header, then the
    /// datagram without fragmentation. Track (and translate) this.
    pub frame: Vec<u8>,
    /// Link type of `frame`.
    pub link: LinkType,
    frags: Vec<Held<T>>,
    v6: bool,
    /// Offset of the datagram's payload in `frame` (past its IP header,
    /// and for IPv6 its unfragmentable extension headers).
    data: usize,
}

/// What became of a packet offered to the reassembler.
#[derive(Debug)]
pub enum Offer<T> {
    /// Not a fragment: track it as it is.
    Pass(Vec<u8>, T),
    /// Held until its datagram is whole.
    Held,
    /// It completed its datagram.
    Complete(Datagram<T>),
    /// Not held (see the reason); the packet is returned.
    Refused(Vec<u8>, T, FragError),
    /// Dropped, with the fragments of its datagram held so far (an overlap
    /// or a datagram too big).
    Dropped(Vec<(T, FragError)>),
}

/// What a fragment is.
struct Info {
    key: Key,
    off: usize,
    len: usize,
    more: bool,
    data: usize,
    end: usize,
    l3: usize,
    /// Bytes of the IP packet (for the size minimum).
    l3_len: usize,
    /// Bytes of IP header (and IPv6 unfragmentable part) before the
    /// payload, for the 65535 bound.
    head: usize,
}

/// The reassembler. Shared by threads (`&self`); datagrams are spread over
/// mutex-guarded shards by their key.
#[derive(Debug)]
pub struct Reassembler<T> {
    config: Mutex<FragConfig>,
    shards: Box<[Mutex<Shard<T>>]>,
    held: AtomicUsize,
    bytes: AtomicUsize,
    /// Lists that exist (failed ones included), to bound tombstones.
    lists: AtomicUsize,
    /// Earliest deadline of any list (ms), or `u64::MAX`.
    next_deadline: AtomicU64,
    hasher: foldhash::fast::RandomState,
    stats: [AtomicU64; 12],
}

#[derive(Clone, Copy)]
enum S {
    Accepted,
    Completed,
    Released,
    Expired,
    TooSmall,
    Malformed,
    Duplicate,
    Overlap,
    TooBig,
    Dropped,
    Limit,
}

impl<T> Default for Reassembler<T> {
    fn default() -> Self {
        Self::new(FragConfig::default())
    }
}

impl<T> Reassembler<T> {
    /// A reassembler with `config` (out-of-range values are clamped into
    /// range; use [`FragConfig::validate`] to report them).
    pub fn new(config: FragConfig) -> Reassembler<T> {
        Reassembler {
            config: Mutex::new(clamp(config)),
            shards: (0..SHARDS).map(|_| Mutex::new(Shard::default())).collect(),
            held: AtomicUsize::new(0),
            bytes: AtomicUsize::new(0),
            lists: AtomicUsize::new(0),
            next_deadline: AtomicU64::new(u64::MAX),
            hasher: foldhash::fast::RandomState::default(),
            stats: Default::default(),
        }
    }

    /// The settings.
    pub fn config(&self) -> FragConfig {
        *self.config.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Changes the settings (clamped as in [`Reassembler::new`]); fragments
    /// held stay.
    pub fn set_config(&self, config: FragConfig) {
        *self.config.lock().unwrap_or_else(|e| e.into_inner()) = clamp(config);
    }

    fn bump(&self, s: S, n: usize) {
        self.stats[s as usize].fetch_add(n as u64, Relaxed);
    }

    /// The counters.
    pub fn stats(&self) -> FragStats {
        let g = |s: S| self.stats[s as usize].load(Relaxed);
        FragStats {
            held: self.held.load(Relaxed) as u64,
            accepted: g(S::Accepted),
            completed: g(S::Completed),
            released: g(S::Released),
            expired: g(S::Expired),
            too_small: g(S::TooSmall),
            malformed: g(S::Malformed),
            duplicate: g(S::Duplicate),
            overlap: g(S::Overlap),
            too_big: g(S::TooBig),
            dropped: g(S::Dropped),
            limit: g(S::Limit),
        }
    }

    /// Fragments held now.
    pub fn held(&self) -> usize {
        self.held.load(Relaxed)
    }

    fn shard(&self, k: &Key) -> std::sync::MutexGuard<'_, Shard<T>> {
        let i = (self.hasher.hash_one(k) as usize) % SHARDS;
        self.shards[i].lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Takes a packet of link type `link`, tracked in `zone`, at `now`.
    pub fn offer(
        &self,
        frame: Vec<u8>,
        tag: T,
        link: LinkType,
        zone: Zone,
        now: Time,
        checksums: bool,
    ) -> Offer<T> {
        let layers = parse_frame(&frame, link);
        let ip = match layers.ip {
            Ok(ip) if ip.frag.is_fragment() => ip,
            // Not IP, not a fragment, or not parseable: the tracker judges.
            Ok(_) | Err(NotIp::LinkTruncated | NotIp::OtherProtocol(_)) => {
                return Offer::Pass(frame, tag);
            }
            Err(NotIp::BadIpv4(_) | NotIp::BadIpv6(_)) => return Offer::Pass(frame, tag),
        };
        let cfg = self.config();
        let enabled = match ip.version {
            IpVersion::V4 => cfg.v4,
            IpVersion::V6 => cfg.v6,
        };
        if !enabled {
            return Offer::Refused(frame, tag, FragError::Disabled);
        }
        let info = match info(&frame, &ip, zone, checksums) {
            Ok(i) => i,
            Err(e) => {
                self.bump(S::Malformed, 1);
                return Offer::Refused(frame, tag, e);
            }
        };
        let min = if info.key.v6 { cfg.min_v6 } else { cfg.min_v4 };
        if info.more && info.l3_len < min {
            self.bump(S::TooSmall, 1);
            return Offer::Refused(frame, tag, FragError::TooSmall);
        }
        if info.more && info.len % 8 != 0 {
            self.bump(S::Malformed, 1);
            return Offer::Refused(frame, tag, FragError::Malformed);
        }
        self.insert(frame, tag, link, info, now.as_millis(), &cfg)
    }

    fn insert(
        &self,
        frame: Vec<u8>,
        tag: T,
        link: LinkType,
        info: Info,
        now: u64,
        cfg: &FragConfig,
    ) -> Offer<T> {
        let mut guard = self.shard(&info.key);
        let size = frame.len();
        let Shard { lists, order } = &mut *guard;
        let list = match lists.entry(info.key) {
            std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
            std::collections::hash_map::Entry::Vacant(e) => {
                // A new datagram; a whole one in one piece needs no list.
                if info.off == 0 && !info.more {
                    drop(guard);
                    return self.finish_one(frame, tag, link, info);
                }
                if self.lists.load(Relaxed) >= cfg.max_frags.max(1) * 2 {
                    self.bump(S::Limit, 1);
                    return Offer::Refused(frame, tag, FragError::Limit);
                }
                let deadline = now.saturating_add(cfg.timeout_ms);
                order.push_back((deadline, info.key));
                self.lists.fetch_add(1, Relaxed);
                self.next_deadline.fetch_min(deadline, Relaxed);
                e.insert(List {
                    frags: Vec::new(),
                    total: None,
                    bytes: 0,
                    deadline,
                    failed: false,
                    link,
                })
            }
        };
        if list.failed {
            self.bump(S::Dropped, 1);
            return Offer::Refused(frame, tag, FragError::DatagramDropped);
        }
        let end = info.off + info.len;
        // The whole datagram must fit in 65535 bytes.
        if info.head + end > MAX_DATAGRAM {
            self.bump(S::TooBig, 1);
            return self.fail(list, tag, FragError::TooBig);
        }
        // A contradiction of the datagram's end drops it.
        let contradicts = match (list.total, info.more) {
            (Some(t), false) => t != end,
            (Some(t), true) => end > t,
            (None, false) => list.frags.iter().any(|f| f.off + f.len > end),
            (None, true) => false,
        };
        // Overlaps: an exact repeat is dropped alone; anything else drops
        // the datagram.
        let mut duplicate = false;
        let mut overlap = contradicts;
        for f in &list.frags {
            let fend = f.off + f.len;
            if info.off < fend && f.off < end || (info.len == 0 && f.off == info.off) {
                if f.off == info.off
                    && f.len == info.len
                    && frame.get(info.data..info.data + info.len)
                        == f.frame.get(f.data..f.data + f.len)
                {
                    duplicate = true;
                } else {
                    overlap = true;
                }
                break;
            }
        }
        if overlap {
            self.bump(S::Overlap, 1);
            return self.fail(list, tag, FragError::Overlap);
        }
        if duplicate {
            self.bump(S::Duplicate, 1);
            return Offer::Refused(frame, tag, FragError::Duplicate);
        }
        let max_per_list =
            MAX_DATAGRAM / (if info.key.v6 { cfg.min_v6 } else { cfg.min_v4 } - 60).max(1) + 2;
        if self.held.load(Relaxed) >= cfg.max_frags
            || self.bytes.load(Relaxed) + size > cfg.max_bytes
            || list.frags.len() >= max_per_list
        {
            self.bump(S::Limit, 1);
            return Offer::Refused(frame, tag, FragError::Limit);
        }
        if !info.more {
            list.total = Some(end);
        }
        let at = list.frags.partition_point(|f| f.off < info.off);
        list.frags.insert(
            at,
            Held {
                frame,
                tag,
                off: info.off,
                len: info.len,
                data: info.data,
                end: info.end,
                l3: info.l3,
            },
        );
        list.bytes += size;
        self.held.fetch_add(1, Relaxed);
        self.bytes.fetch_add(size, Relaxed);
        self.bump(S::Accepted, 1);
        // Whole?
        let Some(total) = list.total else {
            return Offer::Held;
        };
        let mut next = 0;
        for f in &list.frags {
            if f.off != next {
                return Offer::Held;
            }
            next = f.off + f.len;
        }
        if next != total {
            return Offer::Held;
        }
        let list = lists.remove(&info.key).expect("present");
        self.lists.fetch_sub(1, Relaxed);
        drop(guard);
        self.held.fetch_sub(list.frags.len(), Relaxed);
        self.bytes.fetch_sub(list.bytes, Relaxed);
        match build(list.frags, list.link, info.key.v6) {
            Some(d) => {
                self.bump(S::Completed, 1);
                self.bump(S::Released, d.frags.len());
                Offer::Complete(d)
            }
            None => Offer::Dropped(Vec::new()),
        }
    }

    /// An atomic fragment: a datagram of one.
    fn finish_one(&self, frame: Vec<u8>, tag: T, link: LinkType, info: Info) -> Offer<T> {
        let held = Held {
            off: 0,
            len: info.len,
            data: info.data,
            end: info.end,
            l3: info.l3,
            frame,
            tag,
        };
        match build(vec![held], link, info.key.v6) {
            Some(d) => {
                self.bump(S::Accepted, 1);
                self.bump(S::Completed, 1);
                self.bump(S::Released, 1);
                Offer::Complete(d)
            }
            None => Offer::Dropped(Vec::new()),
        }
    }

    /// Drops a datagram: its fragments go, later ones are dropped too.
    fn fail(&self, list: &mut List<T>, tag: T, why: FragError) -> Offer<T> {
        list.failed = true;
        let frags = std::mem::take(&mut list.frags);
        self.held.fetch_sub(frags.len(), Relaxed);
        self.bytes.fetch_sub(list.bytes, Relaxed);
        list.bytes = 0;
        self.bump(S::Dropped, frags.len());
        let mut out: Vec<(T, FragError)> = frags.into_iter().map(|f| (f.tag, why)).collect();
        out.push((tag, why));
        Offer::Dropped(out)
    }

    /// Drops datagrams whose time ran out; their fragments' tags go to
    /// `out`. Cheap when none is due.
    pub fn expire(&self, now: Time, out: &mut Vec<T>) {
        let now = now.as_millis();
        if now < self.next_deadline.load(Relaxed) {
            return;
        }
        let mut next = u64::MAX;
        for s in self.shards.iter() {
            let mut sh = s.lock().unwrap_or_else(|e| e.into_inner());
            while let Some(&(deadline, key)) = sh.order.front() {
                if deadline > now {
                    next = next.min(deadline);
                    break;
                }
                sh.order.pop_front();
                // A list completed and begun again has a later deadline.
                let due = sh.lists.get(&key).is_some_and(|l| l.deadline <= now);
                if !due {
                    continue;
                }
                let list = sh.lists.remove(&key).expect("present");
                self.lists.fetch_sub(1, Relaxed);
                self.held.fetch_sub(list.frags.len(), Relaxed);
                self.bytes.fetch_sub(list.bytes, Relaxed);
                self.bump(S::Expired, list.frags.len());
                out.extend(list.frags.into_iter().map(|f| f.tag));
            }
        }
        self.next_deadline.store(next, Relaxed);
    }
}

fn clamp(mut c: FragConfig) -> FragConfig {
    c.max_frags = c.max_frags.min(MAX_FRAGS_LIMIT);
    c.min_v4 = c.min_v4.max(MIN_FRAG_LIMIT);
    c.min_v6 = c.min_v6.max(MIN_FRAG_LIMIT);
    c
}

fn be16(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes([*b.get(at)?, *b.get(at + 1)?]))
}

/// Reads what a fragment is.
fn info(frame: &[u8], ip: &IpLayer, zone: Zone, checksums: bool) -> Result<Info, FragError> {
    let l3 = ip.l3;
    let pkt = frame.get(l3..ip.end).ok_or(FragError::Malformed)?;
    match ip.version {
        IpVersion::V4 => {
            let h = ipv4::Ipv4Packet::new_checked(pkt).map_err(|_| FragError::Malformed)?;
            if checksums && !h.verify_checksum() {
                return Err(FragError::Malformed);
            }
            let hl = h.header_len();
            Ok(Info {
                key: Key {
                    v6: false,
                    src: u128::from(u32::from_be_bytes(h.src())),
                    dst: u128::from(u32::from_be_bytes(h.dst())),
                    id: u32::from(h.ident()),
                    proto: h.protocol(),
                    zone,
                },
                off: usize::from(h.frag_offset()),
                len: pkt.len() - hl,
                more: h.more_frags(),
                data: l3 + hl,
                end: ip.end,
                l3,
                l3_len: pkt.len(),
                head: hl,
            })
        }
        IpVersion::V6 => {
            let fh_at = ip.frag_header.ok_or(FragError::Malformed)?;
            let fh = ipv6::FragHeader::parse(frame.get(fh_at..).ok_or(FragError::Malformed)?)
                .map_err(|_| FragError::Malformed)?;
            let h = ipv6::Ipv6Packet::new_checked(pkt).map_err(|_| FragError::Malformed)?;
            let data = fh_at + ipv6::FRAG_HEADER_LEN;
            if data > ip.end {
                return Err(FragError::Malformed);
            }
            Ok(Info {
                key: Key {
                    v6: true,
                    src: u128::from_be_bytes(h.src()),
                    dst: u128::from_be_bytes(h.dst()),
                    id: fh.ident,
                    proto: 0,
                    zone,
                },
                off: usize::from(fh.offset),
                len: ip.end - data,
                more: fh.more,
                data,
                end: ip.end,
                l3,
                l3_len: pkt.len(),
                // The datagram's payload length counts the unfragmentable
                // extension headers.
                head: fh_at - l3 - ipv6::HEADER_LEN,
            })
        }
    }
}

/// Where the "next header" byte naming the fragment header is, in an IPv6
/// packet at `l3` whose fragment header is at `fh`.
fn v6_next_header_field(frame: &[u8], l3: usize, fh: usize) -> Option<usize> {
    let mut field = l3 + 6;
    let mut pos = l3 + ipv6::HEADER_LEN;
    while pos < fh {
        let ty = *frame.get(field)?;
        let len = match ty {
            ctrack_wire::ip_proto::HOPOPTS
            | ctrack_wire::ip_proto::DSTOPTS
            | ctrack_wire::ip_proto::ROUTING => (usize::from(*frame.get(pos + 1)?) + 1) * 8,
            ctrack_wire::ip_proto::AH => (usize::from(*frame.get(pos + 1)?) + 2) * 4,
            _ => return None,
        };
        field = pos;
        pos += len;
    }
    (pos == fh).then_some(field)
}

/// Builds the datagram of a complete, sorted fragment list.
fn build<T>(frags: Vec<Held<T>>, link: LinkType, v6: bool) -> Option<Datagram<T>> {
    let first = frags.first()?;
    let payload_len: usize = frags.iter().map(|f| f.len).sum();
    let f = &first.frame;
    let mut frame = Vec::with_capacity(first.data + payload_len);
    frame.extend_from_slice(f.get(..first.data)?);
    if v6 {
        // Drop the fragment header: the header before it names what
        // follows it.
        let fh = first.data - ipv6::FRAG_HEADER_LEN;
        let next = *f.get(fh)?;
        let field = v6_next_header_field(f, first.l3, fh)?;
        frame.truncate(fh);
        frame[field] = next;
    }
    let data = frame.len();
    for h in &frags {
        frame.extend_from_slice(h.frame.get(h.data..h.data + h.len)?);
    }
    let l3 = first.l3;
    let ip_len = frame.len() - l3;
    if v6 {
        let plen = u16::try_from(ip_len - ipv6::HEADER_LEN).ok()?;
        frame[l3 + 4..l3 + 6].copy_from_slice(&plen.to_be_bytes());
    } else {
        let total = u16::try_from(ip_len).ok()?;
        frame[l3 + 2..l3 + 4].copy_from_slice(&total.to_be_bytes());
        // No more fragments, offset 0; DF and the reserved bit stay.
        let ff = be16(&frame, l3 + 6)? & 0xc000;
        frame[l3 + 6..l3 + 8].copy_from_slice(&ff.to_be_bytes());
        let mut h = ipv4::Ipv4Packet::new_unchecked(&mut frame[l3..]);
        h.fill_checksum();
    }
    Some(Datagram {
        frame,
        link,
        frags,
        v6,
        data,
    })
}

impl<T> Datagram<T> {
    /// Takes the datagram's frame out (to track and translate it; give it
    /// back to [`Datagram::fragments`]).
    pub fn take_frame(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.frame)
    }

    /// The number of fragments it came in.
    pub fn fragment_count(&self) -> usize {
        self.frags.len()
    }

    /// The tags of its fragments, in offset order.
    pub fn tags(&self) -> impl Iterator<Item = &T> {
        self.frags.iter().map(|f| &f.tag)
    }

    /// The fragments to send, rebuilt from `datagram` (this datagram's
    /// frame after tracking, perhaps translated, perhaps with a payload of
    /// another length): each keeps its own link and IP headers (with the
    /// datagram's addresses) and its own share of the payload, in offset
    /// order; the last takes whatever the payload grew or shrank by.
    pub fn fragments(self, datagram: &[u8]) -> Vec<(Vec<u8>, T)> {
        let l3 = self.frags.first().map_or(0, |f| f.l3);
        let payload = datagram.get(self.data..).unwrap_or_default();
        // The datagram's IP end (a translated frame has no padding of its
        // own, but be exact).
        let layers = parse_frame(datagram, self.link);
        let dg_end = layers.ip.map_or(datagram.len(), |ip| ip.end);
        let payload = &payload[..dg_end.saturating_sub(self.data).min(payload.len())];
        let (src, dst) = if self.v6 {
            (
                datagram.get(l3 + 8..l3 + 24),
                datagram.get(l3 + 24..l3 + 40),
            )
        } else {
            (
                datagram.get(l3 + 12..l3 + 16),
                datagram.get(l3 + 16..l3 + 20),
            )
        };
        let n = self.frags.len();
        let mut out = Vec::with_capacity(n);
        for (i, h) in self.frags.into_iter().enumerate() {
            let last = i + 1 == n;
            let start = h.off.min(payload.len());
            let stop = if last {
                payload.len()
            } else {
                (h.off + h.len).min(payload.len())
            };
            let share = &payload[start..stop.max(start)];
            let mut f = Vec::with_capacity(h.data + share.len() + (h.frame.len() - h.end));
            f.extend_from_slice(&h.frame[..h.data]);
            f.extend_from_slice(share);
            f.extend_from_slice(&h.frame[h.end..]);
            let hl3 = h.l3;
            if let (Some(s), Some(d)) = (src, dst) {
                if self.v6 {
                    f[hl3 + 8..hl3 + 24].copy_from_slice(s);
                    f[hl3 + 24..hl3 + 40].copy_from_slice(d);
                    if share.len() != h.len {
                        let plen = (h.data - hl3 - ipv6::HEADER_LEN + share.len()) as u16;
                        f[hl3 + 4..hl3 + 6].copy_from_slice(&plen.to_be_bytes());
                    }
                } else {
                    let changed =
                        f[hl3 + 12..hl3 + 20] != [s, d].concat()[..] || share.len() != h.len;
                    f[hl3 + 12..hl3 + 16].copy_from_slice(s);
                    f[hl3 + 16..hl3 + 20].copy_from_slice(d);
                    if share.len() != h.len {
                        let total = (h.data - hl3 + share.len()) as u16;
                        f[hl3 + 2..hl3 + 4].copy_from_slice(&total.to_be_bytes());
                    }
                    if changed {
                        // Incrementally would keep a wrong header checksum
                        // wrong; the reassembler verified it (when checking
                        // checksums), so a fresh one is the same thing.
                        let mut ih = ipv4::Ipv4Packet::new_unchecked(&mut f[hl3..]);
                        ih.fill_checksum();
                    }
                }
            }
            out.push((f, h.tag));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ctrack_wire::build::{Ext, Frame, L4};

    /// Splits a UDP datagram of `payload` bytes into fragments of `size`
    /// payload bytes (IPv4).
    fn frags_v4(payload: usize, size: usize, id: u16) -> (Vec<u8>, Vec<Vec<u8>>) {
        let body: Vec<u8> = (0..payload).map(|i| i as u8).collect();
        let mut whole = Frame::v4([10, 0, 0, 1], [10, 0, 0, 2], L4::udp(1000, 2000, &body));
        whole.ident = id;
        let full = whole.build();
        let ip = full[14..].to_vec();
        let data = &ip[20..];
        let mut out = Vec::new();
        let mut off = 0;
        while off < data.len() {
            let n = size.min(data.len() - off);
            let more = off + n < data.len();
            let mut f = Frame::v4(
                [10, 0, 0, 1],
                [10, 0, 0, 2],
                L4::Raw {
                    proto: 17,
                    payload: data[off..off + n].to_vec(),
                },
            );
            f.ident = id;
            f.more_frags = more;
            f.frag_offset = off as u16;
            out.push(f.build());
            off += n;
        }
        (full, out)
    }

    fn offer_all(r: &Reassembler<usize>, frames: &[Vec<u8>], order: &[usize]) -> Vec<Offer<usize>> {
        order
            .iter()
            .map(|&i| {
                r.offer(
                    frames[i].clone(),
                    i,
                    LinkType::Ethernet,
                    0,
                    Time::from_secs(1),
                    true,
                )
            })
            .collect()
    }

    #[test]
    fn in_and_out_of_order() {
        for order in [[0, 1, 2], [2, 0, 1], [1, 2, 0]] {
            let r = Reassembler::default();
            let (full, frames) = frags_v4(3000, 1232, 7);
            assert_eq!(frames.len(), 3);
            let offers = offer_all(&r, &frames, &order);
            let Offer::Complete(d) = offers.into_iter().last().unwrap() else {
                panic!("not complete")
            };
            assert_eq!(d.frame, full, "the datagram is the unfragmented packet");
            assert_eq!(d.tags().copied().collect::<Vec<_>>(), vec![0, 1, 2]);
            let out = d.fragments(&full);
            let frames_out: Vec<_> = out.into_iter().map(|(f, _)| f).collect();
            assert_eq!(frames_out, frames, "sent as they came");
            assert_eq!(r.held(), 0);
        }
    }

    #[test]
    fn duplicates_overlaps_and_limits() {
        let r = Reassembler::default();
        let (_, frames) = frags_v4(3000, 1232, 8);
        assert!(matches!(offer_all(&r, &frames, &[0])[0], Offer::Held));
        // An exact repeat is dropped alone.
        assert!(matches!(
            offer_all(&r, &frames, &[0])[0],
            Offer::Refused(_, _, FragError::Duplicate)
        ));
        // An overlapping fragment drops the datagram.
        let mut bad = frames[1].clone();
        // Offset 1232 -> 1224: overlaps the first by 8 bytes.
        let off = (1224 / 8) as u16 | 0x2000;
        bad[14 + 6..14 + 8].copy_from_slice(&off.to_be_bytes());
        let mut h = ipv4::Ipv4Packet::new_unchecked(&mut bad[14..]);
        h.fill_checksum();
        let o = r.offer(bad, 9, LinkType::Ethernet, 0, Time::from_secs(1), true);
        let Offer::Dropped(tags) = o else { panic!() };
        assert_eq!(tags, vec![(0, FragError::Overlap), (9, FragError::Overlap)]);
        // The rest of that datagram is dropped too.
        assert!(matches!(
            offer_all(&r, &frames, &[2])[0],
            Offer::Refused(_, _, FragError::DatagramDropped)
        ));
        assert_eq!(r.stats().overlap, 1);
        assert_eq!(r.held(), 0);

        // Too small.
        let r: Reassembler<usize> = Reassembler::default();
        let (_, small) = frags_v4(3000, 512, 9);
        assert!(matches!(
            offer_all(&r, &small, &[0])[0],
            Offer::Refused(_, _, FragError::TooSmall)
        ));
        // Too many held.
        let r: Reassembler<usize> = Reassembler::new(FragConfig {
            max_frags: 2,
            ..FragConfig::default()
        });
        for id in 0..2 {
            let (_, f) = frags_v4(3000, 1232, 100 + id);
            assert!(matches!(offer_all(&r, &f, &[0])[0], Offer::Held));
        }
        let (_, f) = frags_v4(3000, 1232, 200);
        assert!(matches!(
            offer_all(&r, &f, &[0])[0],
            Offer::Refused(_, _, FragError::Limit)
        ));
    }

    #[test]
    fn incomplete_datagrams_expire() {
        let r = Reassembler::default();
        let (_, frames) = frags_v4(3000, 1232, 10);
        offer_all(&r, &frames, &[0, 2]);
        let mut gone = Vec::new();
        r.expire(Time::from_secs(10), &mut gone);
        assert!(gone.is_empty());
        r.expire(Time::from_millis(16_001), &mut gone);
        assert_eq!(gone, vec![0, 2]);
        assert_eq!(r.held(), 0);
        assert_eq!(r.stats().expired, 2);
    }

    #[test]
    fn ipv6_with_extension_headers_and_atomic_fragments() {
        let a: std::net::Ipv6Addr = "fd00::1".parse().unwrap();
        let b: std::net::Ipv6Addr = "fd00::2".parse().unwrap();
        let body: Vec<u8> = (0..3000).map(|i| (i * 7) as u8).collect();
        let mut whole = Frame::v6(a, b, L4::udp(1, 2, &body));
        whole.ext = vec![Ext::HopByHop(0)];
        let full = whole.build();
        // Fragments: HBH stays in front of the fragment header.
        let udp = &full[14 + 40 + 8..];
        let mut frames = Vec::new();
        for (off, chunk) in [
            (0usize, &udp[..1400]),
            (1400, &udp[1400..2800]),
            (2800, &udp[2800..]),
        ] {
            let mut f = Frame::v6(
                a,
                b,
                L4::Raw {
                    proto: 17,
                    payload: chunk.to_vec(),
                },
            );
            f.ext = vec![
                Ext::HopByHop(0),
                Ext::Fragment {
                    offset: off as u16,
                    more: off + chunk.len() < udp.len(),
                    ident: 99,
                },
            ];
            frames.push(f.build());
        }
        let r = Reassembler::default();
        let offers = offer_all(&r, &frames, &[1, 2, 0]);
        let Offer::Complete(d) = offers.into_iter().last().unwrap() else {
            panic!("not complete")
        };
        assert_eq!(d.frame, full);
        let out: Vec<_> = d.fragments(&full).into_iter().map(|(f, _)| f).collect();
        assert_eq!(out, frames);

        // Atomic: offset 0, no more fragments.
        let mut atomic = Frame::v6(a, b, L4::udp(1, 2, b"x"));
        atomic.ext = vec![Ext::Fragment {
            offset: 0,
            more: false,
            ident: 5,
        }];
        let at = atomic.build();
        // A zero offset-and-flags word is no fragment at all: tracked as
        // it is.
        let o = r.offer(
            at.clone(),
            7,
            LinkType::Ethernet,
            0,
            Time::from_secs(1),
            true,
        );
        assert!(matches!(o, Offer::Pass(..)), "{o:?}");
        // With only reserved bits set it is a datagram of one fragment.
        let mut odd = at.clone();
        let fh = 14 + 40;
        odd[fh + 3] = 0x06;
        let o = r.offer(
            odd.clone(),
            8,
            LinkType::Ethernet,
            0,
            Time::from_secs(1),
            true,
        );
        let Offer::Complete(d) = o else {
            panic!("atomic fragment not passed: {o:?}")
        };
        let plain = Frame::v6(a, b, L4::udp(1, 2, b"x")).build();
        assert_eq!(d.frame, plain);
        assert_eq!(d.fragments(&plain)[0].0, odd);
    }
}
