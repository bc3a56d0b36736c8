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
//! When a limit is met, the oldest datagram held is dropped to make room
//! (see `evict.rs`): a flood of fragments that never complete cannot keep
//! other datagrams out, it only shortens how long a datagram may take to
//! arrive whole while it lasts.
//!
//! Repeats, overlaps and lengths follow Linux (`ip_frag_queue` for IPv4,
//! `nf_ct_frag6_queue` for IPv6, `inet_frag_queue_insert` for both;
//! `tests/agree_frag.rs` checks them against a kernel): a fragment within
//! data held, in one run (fragments that came one after the other, each
//! right after the one before), is a repeat, dropped on its own whatever
//! its bytes; any other overlap (teardrop and its relatives) drops the
//! whole datagram (RFC 5722), and later fragments of it are dropped until
//! its time would have run out. A fragment that contradicts the
//! datagram's end (past the end a last fragment set, or a last fragment
//! short of what is held or with another end) drops the datagram in IPv4
//! and is dropped on its own in IPv6. A non-last fragment whose length is
//! not a multiple of 8 is cut to one in IPv4 and drops the datagram in
//! IPv6; an empty fragment drops the datagram in IPv4 and is dropped on
//! its own in IPv6 (its end, if it is the last, taken for the datagram's).
//! A datagram that would pass 65535 bytes is dropped with the fragment
//! that shows it (Linux drops it when it is whole, which it never is
//! then), but an IPv6 fragment whose own data reach past 65535 bytes is
//! dropped alone, as Linux's. Where ctrack differs: the bounds above. An IPv6 fragment header with
//! offset 0 and no more fragments (an atomic fragment, RFC 6946) is a
//! datagram of one fragment.

use std::collections::{HashMap, VecDeque};
use std::hash::BuildHasher;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};

use ctrack_wire::{IpVersion, LinkType, NotIp, parse_frame};

use super::config::{FragConfig, FragError, FragStats, MAX_DATAGRAM, SHARDS, clamp};
use super::datagram::{Datagram, Held, build};
use super::identify::{Info, Key, info};
use crate::key::Zone;
use crate::time::Time;

#[derive(Debug)]
pub(super) struct List<T> {
    pub(super) frags: Vec<Held<T>>,
    /// The datagram's payload length, once the last fragment came.
    pub(super) total: Option<usize>,
    pub(super) bytes: usize,
    /// Its number (in order of creation), naming its entry in the expiry
    /// queue.
    pub(super) serial: u64,
    /// Dropped: later fragments are dropped until the deadline.
    pub(super) failed: bool,
    pub(super) link: LinkType,
}

#[derive(Debug)]
pub(super) struct Shard<T> {
    pub(super) lists: HashMap<Key, List<T>>,
    /// Lists by creation, for expiry and eviction: (deadline, key,
    /// serial). An entry whose list is gone (completed, evicted) stays
    /// until it is reached or the queue is compacted.
    pub(super) order: VecDeque<(u64, Key, u64)>,
    /// Its place among the shards.
    pub(super) index: usize,
}

impl<T> Shard<T> {
    fn new(index: usize) -> Self {
        Shard {
            lists: HashMap::new(),
            order: VecDeque::new(),
            index,
        }
    }
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

/// mutex-guarded shards by their key.
#[derive(Debug)]
pub struct Reassembler<T> {
    pub(super) config: Mutex<FragConfig>,
    pub(super) shards: Box<[Mutex<Shard<T>>]>,
    pub(super) held: AtomicUsize,
    pub(super) bytes: AtomicUsize,
    /// Lists that exist (failed ones included), to bound tombstones.
    pub(super) lists: AtomicUsize,
    /// Earliest deadline of any list (ms), or `u64::MAX`.
    pub(super) next_deadline: AtomicU64,
    pub(super) hasher: foldhash::fast::RandomState,
    pub(super) stats: [AtomicU64; 12],
    /// Tags of fragments evicted, handed back by the next
    /// [`Reassembler::expire`].
    pub(super) evicted: Mutex<Vec<T>>,
    /// Tags waiting in `evicted`.
    pub(super) pending: AtomicUsize,
    /// Where the search for another shard to evict from starts.
    pub(super) rover: AtomicUsize,
    /// The next list's serial.
    pub(super) serial: AtomicU64,
    /// Per shard, the serial of its oldest list (the front of its queue),
    /// or `u64::MAX`: where the oldest datagram of all is.
    pub(super) fronts: Box<[AtomicU64]>,
}

#[derive(Clone, Copy)]
pub(super) enum S {
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
    Evicted,
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
            shards: (0..SHARDS).map(|i| Mutex::new(Shard::new(i))).collect(),
            held: AtomicUsize::new(0),
            bytes: AtomicUsize::new(0),
            lists: AtomicUsize::new(0),
            next_deadline: AtomicU64::new(u64::MAX),
            hasher: foldhash::fast::RandomState::default(),
            stats: Default::default(),
            evicted: Mutex::new(Vec::new()),
            pending: AtomicUsize::new(0),
            rover: AtomicUsize::new(0),
            serial: AtomicU64::new(0),
            fronts: (0..SHARDS).map(|_| AtomicU64::new(u64::MAX)).collect(),
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

    pub(super) fn bump(&self, s: S, n: usize) {
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
            evicted: g(S::Evicted),
        }
    }

    /// Fragments held now.
    pub fn held(&self) -> usize {
        self.held.load(Relaxed)
    }

    /// Bytes of the frames held (their buffers' capacity, bounded by
    /// [`FragConfig::max_bytes`]).
    pub fn bytes(&self) -> usize {
        self.bytes.load(Relaxed)
    }

    /// Datagrams held: those being reassembled and those dropped whose
    /// later fragments are still being refused (bounded by
    /// [`FragConfig::max_datagrams`]).
    pub fn datagrams(&self) -> usize {
        self.lists.load(Relaxed)
    }

    /// An estimate of all the memory the reassembler holds: the frames,
    /// and its bookkeeping (maps, fragment lists and expiry queues, by
    /// capacity). Locks each shard in turn.
    pub fn memory(&self) -> usize {
        let mut total = self.bytes();
        for s in self.shards.iter() {
            let sh = s.lock().unwrap_or_else(|e| e.into_inner());
            total += sh.lists.capacity() * (size_of::<Key>() + size_of::<List<T>>() + 1);
            total += sh.order.capacity() * size_of::<(u64, Key, u64)>();
            total += sh
                .lists
                .values()
                .map(|l| l.frags.capacity() * size_of::<Held<T>>())
                .sum::<usize>();
        }
        total
    }

    pub(super) fn shard(&self, k: &Key) -> std::sync::MutexGuard<'_, Shard<T>> {
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
        let mut info = match info(&frame, &ip, zone, checksums) {
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
        // A fragment not the last whose length is not a multiple of 8: as
        // Linux, an IPv4 one is cut to a multiple of 8 (the bytes past it
        // stay in its frame and leave with it, as padding, so it goes on
        // as it came); an IPv6 one drops its datagram (in `fit`).
        if info.more && !info.len.is_multiple_of(8) && !info.key.v6 {
            info.len -= info.len % 8;
            info.end = info.data + info.len;
        }
        self.insert(frame, tag, link, info, now.as_millis(), &cfg)
    }

    pub(super) fn insert(
        &self,
        frame: Vec<u8>,
        tag: T,
        link: LinkType,
        info: Info,
        now: u64,
        cfg: &FragConfig,
    ) -> Offer<T> {
        let mut guard = self.shard(&info.key);
        // Memory is what the buffer holds, not only what it carries.
        let size = frame.capacity();
        let sh = &mut *guard;
        if !sh.lists.contains_key(&info.key) {
            // A new datagram; a whole one in one piece needs no list.
            if info.off == 0 && !info.more {
                drop(guard);
                return self.finish_one(frame, tag, link, info);
            }
            // Room for one more datagram: the oldest goes if need be.
            while self.lists.load(Relaxed) >= cfg.max_datagrams() {
                if !self.evict_oldest(sh, &info.key) {
                    self.bump(S::Limit, 1);
                    return Offer::Refused(frame, tag, FragError::Limit);
                }
            }
            self.new_list(sh, info.key, link, now.saturating_add(cfg.timeout_ms));
        }
        let Some(list) = sh.lists.get_mut(&info.key) else {
            return Offer::Refused(frame, tag, FragError::Limit);
        };
        if list.failed {
            self.bump(S::Dropped, 1);
            return Offer::Refused(frame, tag, FragError::DatagramDropped);
        }
        let end = info.off + info.len;
        // An IPv6 fragment whose own data reach past 65535 bytes is
        // dropped alone (Linux's `nf_ct_frag6_queue`).
        if info.key.v6 && end > MAX_DATAGRAM {
            self.bump(S::TooBig, 1);
            return Offer::Refused(frame, tag, FragError::TooBig);
        }
        // The whole datagram must fit in 65535 bytes (as Linux, which
        // finds out when it is whole and drops it then).
        if info.head + end > MAX_DATAGRAM {
            self.bump(S::TooBig, 1);
            return self.fail(list, tag, FragError::TooBig);
        }
        let (frame, tag) = match self.settle(list, &info, frame, tag) {
            Ok(kept) => kept,
            Err(offer) => return offer,
        };
        let max_per_list =
            MAX_DATAGRAM / (if info.key.v6 { cfg.min_v6 } else { cfg.min_v4 } - 60).max(1) + 2;
        if list.frags.len() >= max_per_list || size > cfg.max_bytes {
            self.bump(S::Limit, 1);
            return Offer::Refused(frame, tag, FragError::Limit);
        }
        // Room for the fragment: other datagrams go, oldest first.
        while self.held.load(Relaxed) >= cfg.max_frags
            || self.bytes.load(Relaxed) + size > cfg.max_bytes
        {
            if !self.evict_oldest(sh, &info.key) {
                self.bump(S::Limit, 1);
                return Offer::Refused(frame, tag, FragError::Limit);
            }
        }
        let Some(list) = sh.lists.get_mut(&info.key) else {
            return Offer::Refused(frame, tag, FragError::Limit);
        };
        if !info.more {
            list.total = Some(end);
        }
        let at = list.frags.partition_point(|f| f.off < info.off);
        // Past every fragment held and right after the last: the same run.
        let joins =
            at == list.frags.len() && list.frags.last().is_some_and(|f| f.off + f.len == info.off);
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
                joins,
            },
        );
        list.bytes += size;
        self.held.fetch_add(1, Relaxed);
        self.bytes.fetch_add(size, Relaxed);
        self.bump(S::Accepted, 1);
        if !list.is_whole() {
            return Offer::Held;
        }
        let Some(list) = sh.lists.remove(&info.key) else {
            return Offer::Held;
        };
        self.lists.fetch_sub(1, Relaxed);
        self.clean_front(sh);
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

    /// What [`fit`] says of a fragment of `list`: the fragment back if it
    /// is to be held, else what became of it (and perhaps its datagram).
    fn settle(
        &self,
        list: &mut List<T>,
        info: &Info,
        frame: Vec<u8>,
        tag: T,
    ) -> Result<(Vec<u8>, T), Offer<T>> {
        let (stat, why, whole) = match fit(list, info) {
            Fit::Fits => return Ok((frame, tag)),
            Fit::Duplicate => (S::Duplicate, FragError::Duplicate, false),
            Fit::Overlap => (S::Overlap, FragError::Overlap, true),
            Fit::Bad => (S::Malformed, FragError::Malformed, false),
            Fit::BadDatagram => (S::Malformed, FragError::Malformed, true),
            Fit::Empty => {
                // Linux takes an empty last IPv6 fragment's end for the
                // datagram's before it drops the fragment.
                if info.key.v6 && !info.more {
                    list.total = Some(info.off);
                }
                (S::Malformed, FragError::Malformed, !info.key.v6)
            }
        };
        self.bump(stat, 1);
        Err(if whole {
            self.fail(list, tag, why)
        } else {
            Offer::Refused(frame, tag, why)
        })
    }

    /// An atomic fragment: a datagram of one.
    pub(super) fn finish_one(
        &self,
        frame: Vec<u8>,
        tag: T,
        link: LinkType,
        info: Info,
    ) -> Offer<T> {
        let held = Held {
            off: 0,
            len: info.len,
            data: info.data,
            end: info.end,
            l3: info.l3,
            joins: false,
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
    pub(super) fn fail(&self, list: &mut List<T>, tag: T, why: FragError) -> Offer<T> {
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
    /// `out`, with those of fragments evicted since the last call. Cheap
    /// when none is due.
    pub fn expire(&self, now: Time, out: &mut Vec<T>) {
        self.take_evicted(out);
        self.expire_due(now, out);
    }

    /// [`Reassembler::expire`], each tag with why its fragment was
    /// dropped: [`FragError::Evicted`] or [`FragError::Expired`].
    pub fn expire_why(&self, now: Time, out: &mut Vec<(T, FragError)>) {
        let mut tags = Vec::new();
        self.take_evicted(&mut tags);
        out.extend(tags.drain(..).map(|t| (t, FragError::Evicted)));
        self.expire_due(now, &mut tags);
        out.extend(tags.into_iter().map(|t| (t, FragError::Expired)));
    }

    fn expire_due(&self, now: Time, out: &mut Vec<T>) {
        let now = now.as_millis();
        if now < self.next_deadline.load(Relaxed) {
            return;
        }
        let mut next = u64::MAX;
        for s in self.shards.iter() {
            let mut sh = s.lock().unwrap_or_else(|e| e.into_inner());
            while let Some(&(deadline, key, serial)) = sh.order.front() {
                if deadline > now {
                    next = next.min(deadline);
                    break;
                }
                sh.order.pop_front();
                // The list may be gone (completed, evicted) or begun again.
                if sh.lists.get(&key).is_none_or(|l| l.serial != serial) {
                    continue;
                }
                let Some(list) = sh.lists.remove(&key) else {
                    continue;
                };
                self.lists.fetch_sub(1, Relaxed);
                self.held.fetch_sub(list.frags.len(), Relaxed);
                self.bytes.fetch_sub(list.bytes, Relaxed);
                self.bump(S::Expired, list.frags.len());
                out.extend(list.frags.into_iter().map(|f| f.tag));
            }
            self.clean_front(&mut sh);
        }
        self.next_deadline.store(next, Relaxed);
    }
}

/// How a fragment fits with those held of its datagram.
enum Fit {
    /// It fills a gap.
    Fits,
    /// It lies within data held: dropped on its own.
    Duplicate,
    /// It overlaps data held otherwise, or (IPv4) contradicts the
    /// datagram's end: the datagram is dropped (RFC 5722).
    Overlap,
    /// (IPv6) It contradicts the datagram's end: dropped on its own.
    Bad,
    /// (IPv6) A fragment not the last whose length is not a multiple of
    /// 8: the datagram is dropped.
    BadDatagram,
    /// It carries nothing: (IPv4) the datagram is dropped; (IPv6) it is
    /// dropped on its own.
    Empty,
}

/// Linux's rules, in its order (`ip_frag_queue` for IPv4,
/// `nf_ct_frag6_queue` for IPv6, then `inet_frag_queue_insert`): first
/// the datagram's end, then an IPv6 length that is not a multiple of 8,
/// an empty fragment, and last the data held. Linux keeps the fragments
/// held in runs, each a fragment and those that came after it, each
/// right after the one before and past all held: a fragment within one
/// run repeats what is held, one that reaches past it (or into another
/// run) overlaps.
fn fit<T>(list: &List<T>, info: &Info) -> Fit {
    let end = info.off + info.len;
    let v6 = info.key.v6;
    let held_end = list.frags.last().map_or(0, |f| f.off + f.len);
    let contradicts = match (list.total, info.more) {
        (Some(t), false) => t != end,
        (Some(t), true) => end > t,
        (None, false) => held_end > end,
        (None, true) => false,
    };
    if contradicts {
        return if v6 { Fit::Bad } else { Fit::Overlap };
    }
    if v6 && info.more && !info.len.is_multiple_of(8) {
        return Fit::BadDatagram;
    }
    if info.len == 0 {
        return Fit::Empty;
    }
    if end > held_end {
        // Past everything held: it overlaps the last fragment or fits.
        return if info.off < held_end {
            Fit::Overlap
        } else {
            Fit::Fits
        };
    }
    let mut run = 0..0;
    for f in &list.frags {
        if !f.joins {
            if run.start < end && info.off < run.end {
                break;
            }
            run = f.off..f.off;
        }
        run.end = f.off + f.len;
    }
    if !(run.start < end && info.off < run.end) {
        return Fit::Fits;
    }
    if run.start <= info.off && end <= run.end {
        Fit::Duplicate
    } else {
        Fit::Overlap
    }
}

impl<T> List<T> {
    /// True once the last fragment came and no gap is left.
    fn is_whole(&self) -> bool {
        let Some(total) = self.total else {
            return false;
        };
        let mut next = 0;
        for f in &self.frags {
            if f.off != next {
                return false;
            }
            next = f.off + f.len;
        }
        next == total
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ctrack_wire::build::{Ext, Frame, L4};
    use ctrack_wire::ipv4;

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
        // Too many held: the oldest datagram makes room.
        let r: Reassembler<usize> = Reassembler::new(FragConfig {
            max_frags: 2,
            ..FragConfig::default()
        });
        for id in 0..2 {
            let (_, f) = frags_v4(3000, 1232, 100 + id);
            assert!(matches!(offer_all(&r, &f, &[0])[0], Offer::Held));
        }
        let (_, f) = frags_v4(3000, 1232, 200);
        assert!(matches!(offer_all(&r, &f, &[0])[0], Offer::Held));
        assert_eq!((r.held(), r.stats().evicted), (2, 1));
        // With nothing else to drop, a fragment is refused at the limit.
        let r: Reassembler<usize> = Reassembler::new(FragConfig {
            max_frags: 1,
            ..FragConfig::default()
        });
        assert!(matches!(offer_all(&r, &f, &[0])[0], Offer::Held));
        assert!(matches!(
            offer_all(&r, &f, &[1])[0],
            Offer::Refused(_, _, FragError::Limit)
        ));
        assert_eq!(r.held(), 1);
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
