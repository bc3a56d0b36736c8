//! Making room: the expiry queue's upkeep and eviction of the oldest
//! datagram when a limit is met.
//!
//! Refusing new fragments at a limit would let a flood of fragments that
//! never complete hold every slot until they time out, and starve every
//! other datagram for that long. Instead the oldest datagram held goes
//! (with its fragments, their tags handed back by the next
//! [`Reassembler::expire`]): a datagram whose fragments arrive close
//! together still completes under a flood, as long as fewer new datagrams
//! than the limits allow arrive meanwhile. Memory stays within the same
//! bounds.
//!
//! "Oldest" is by creation: each list has a serial from one counter, and
//! each shard publishes the serial at the front of its queue, so that the
//! shard holding the oldest datagram of all is found without locking. If
//! its lock is taken (a shard never waits for another while holding its
//! own), or it holds only the new fragment's datagram, the new fragment's
//! shard gives its oldest, else any shard whose lock is free.

use std::sync::atomic::Ordering::Relaxed;
use std::sync::{MutexGuard, TryLockError};

use ctrack_wire::LinkType;

use super::config::SHARDS;
use super::identify::Key;
use super::reassemble::{List, Reassembler, S, Shard};

/// Most evicted tags waiting for [`Reassembler::expire`]; past that they
/// are dropped without being handed back (still counted).
const MAX_PENDING: usize = 1 << 16;

impl<T> Reassembler<T> {
    /// Starts the list of a new datagram in `sh`, due at `deadline`.
    pub(super) fn new_list(&self, sh: &mut Shard<T>, key: Key, link: LinkType, deadline: u64) {
        let Shard { lists, order, .. } = &mut *sh;
        // Entries of lists gone stay until reached: compact the queue when
        // they are most of it, so that it stays within twice the lists
        // held whatever the rate of completions (amortised constant time).
        if order.len() >= 2 * lists.len() + 64 {
            order.retain(|(_, k, s)| lists.get(k).is_some_and(|l| l.serial == *s));
        }
        let serial = self.serial.fetch_add(1, Relaxed);
        order.push_back((deadline, key, serial));
        self.lists.fetch_add(1, Relaxed);
        self.next_deadline.fetch_min(deadline, Relaxed);
        lists.insert(
            key,
            List {
                frags: Vec::new(),
                total: None,
                bytes: 0,
                serial,
                failed: false,
                link,
            },
        );
        self.clean_front(sh);
    }

    /// Drops the queue's entries of lists gone from its front, and
    /// publishes what is left there.
    pub(super) fn clean_front(&self, sh: &mut Shard<T>) {
        while let Some(&(_, key, serial)) = sh.order.front() {
            if sh.lists.get(&key).is_some_and(|l| l.serial == serial) {
                break;
            }
            sh.order.pop_front();
        }
        let front = sh.order.front().map_or(u64::MAX, |e| e.2);
        self.fronts[sh.index].store(front, Relaxed);
    }

    /// Drops the oldest datagram other than `except`'s (see the module's
    /// documentation); `sh` is the shard whose lock the caller holds. False
    /// if none could be found.
    pub(super) fn evict_oldest(&self, sh: &mut Shard<T>, except: &Key) -> bool {
        let oldest = (0..SHARDS)
            .min_by_key(|&i| self.fronts[i].load(Relaxed))
            .unwrap_or(sh.index);
        if oldest != sh.index
            && let Some(mut g) = self.try_shard(oldest)
            && self.evict_in(&mut g, except)
        {
            return true;
        }
        if self.evict_in(sh, except) {
            return true;
        }
        let start = self.rover.fetch_add(1, Relaxed);
        (0..SHARDS).any(|j| {
            let i = (start + j) % SHARDS;
            i != sh.index
                && self
                    .try_shard(i)
                    .is_some_and(|mut g| self.evict_in(&mut g, except))
        })
    }

    /// Shard `i`, if its lock is free.
    fn try_shard(&self, i: usize) -> Option<MutexGuard<'_, Shard<T>>> {
        match self.shards[i].try_lock() {
            Ok(g) => Some(g),
            Err(TryLockError::Poisoned(e)) => Some(e.into_inner()),
            Err(TryLockError::WouldBlock) => None,
        }
    }

    /// Drops the oldest datagram of `sh` other than `except`'s.
    fn evict_in(&self, sh: &mut Shard<T>, except: &Key) -> bool {
        let mut i = 0;
        while let Some(&(_, key, serial)) = sh.order.get(i) {
            if sh.lists.get(&key).is_none_or(|l| l.serial != serial) {
                // Its list is gone: the entry goes too.
                sh.order.remove(i);
                continue;
            }
            if key == *except {
                i += 1;
                continue;
            }
            sh.order.remove(i);
            let Some(list) = sh.lists.remove(&key) else {
                continue;
            };
            self.clean_front(sh);
            self.lists.fetch_sub(1, Relaxed);
            self.held.fetch_sub(list.frags.len(), Relaxed);
            self.bytes.fetch_sub(list.bytes, Relaxed);
            self.bump(S::Evicted, list.frags.len());
            if !list.frags.is_empty() {
                let mut pending = self.evicted.lock().unwrap_or_else(|e| e.into_inner());
                let room = MAX_PENDING.saturating_sub(pending.len());
                pending.extend(list.frags.into_iter().take(room).map(|f| f.tag));
                self.pending.store(pending.len(), Relaxed);
            }
            return true;
        }
        self.clean_front(sh);
        false
    }

    /// Hands back the tags of fragments evicted.
    pub(super) fn take_evicted(&self, out: &mut Vec<T>) {
        if self.pending.load(Relaxed) == 0 {
            return;
        }
        let mut pending = self.evicted.lock().unwrap_or_else(|e| e.into_inner());
        out.append(&mut pending);
        self.pending.store(0, Relaxed);
    }

    /// Entries in the shards' expiry queues (for tests).
    #[cfg(test)]
    pub(super) fn queued(&self) -> usize {
        self.shards
            .iter()
            .map(|s| s.lock().unwrap_or_else(|e| e.into_inner()).order.len())
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use ctrack_wire::build::{Frame, L4};
    use ctrack_wire::ipv4;

    use super::super::{FragConfig, FragError, Offer};
    use super::*;
    use crate::time::Time;

    /// Fragment `i` (of 2: 1232 bytes then 8) of datagram `id` from
    /// 10.0.`src`.
    fn piece(src: u16, id: u16, i: usize) -> Vec<u8> {
        let [a, b] = src.to_be_bytes();
        let (off, len, more) = if i == 0 {
            (0, 1232, true)
        } else {
            (1232, 8, false)
        };
        let mut f = Frame::v4(
            [10, 0, a, b],
            [10, 9, 9, 9],
            L4::Raw {
                proto: 17,
                payload: vec![i as u8; len],
            },
        );
        f.ident = id;
        f.more_frags = more;
        f.frag_offset = off;
        let mut out = f.build();
        ipv4::Ipv4Packet::new_unchecked(&mut out[14..]).fill_checksum();
        out
    }

    fn offer(r: &Reassembler<u32>, frame: Vec<u8>, tag: u32, ms: u64) -> Offer<u32> {
        r.offer(
            frame,
            tag,
            LinkType::Ethernet,
            0,
            Time::from_millis(ms),
            true,
        )
    }

    #[test]
    fn a_flood_of_first_fragments_does_not_starve_others() {
        let r: Reassembler<u32> = Reassembler::new(FragConfig {
            max_frags: 10,
            ..FragConfig::default()
        });
        // Fill every slot with datagrams that never complete.
        for i in 0..10u16 {
            assert!(matches!(
                offer(&r, piece(i, 1, 0), u32::from(i), 1),
                Offer::Held
            ));
        }
        assert_eq!(r.held(), 10);
        // A new datagram still gets in and completes: the oldest went.
        assert!(matches!(offer(&r, piece(100, 7, 0), 100, 2), Offer::Held));
        assert!(matches!(
            offer(&r, piece(100, 7, 1), 101, 2),
            Offer::Complete(_)
        ));
        assert!(r.held() <= 10 && r.bytes() <= FragConfig::default().max_bytes);
        assert_eq!(r.stats().evicted, 2, "two datagrams made room");
        assert_eq!(r.stats().limit, 0);
        // The evicted fragments' tags come back, said to be evicted.
        let mut gone = Vec::new();
        r.expire_why(Time::from_millis(3), &mut gone);
        gone.sort_unstable_by_key(|g| g.0);
        assert_eq!(
            gone,
            vec![(0, FragError::Evicted), (1, FragError::Evicted)],
            "the oldest of all went"
        );
        // And the flood's datagrams time out to nothing.
        gone.clear();
        r.expire_why(Time::from_millis(16_000), &mut gone);
        assert_eq!(gone.len(), 8);
        assert!(gone.iter().all(|g| g.1 == FragError::Expired));
        assert_eq!((r.held(), r.bytes(), r.datagrams()), (0, 0, 0));
    }

    #[test]
    fn datagrams_bound_holds_with_dropped_ones_too() {
        let r: Reassembler<u32> = Reassembler::new(FragConfig {
            max_frags: 4,
            ..FragConfig::default()
        });
        for i in 0..100u16 {
            // A first piece, then one overlapping it: a dropped datagram
            // that stays (refusing its later fragments) until evicted.
            let _ = offer(&r, piece(i, 3, 0), 0, 1);
            let mut bad = piece(i, 3, 0);
            bad[14 + 7] = 1; // offset 8 bytes
            ipv4::Ipv4Packet::new_unchecked(&mut bad[14..]).fill_checksum();
            assert!(matches!(offer(&r, bad, 1, 1), Offer::Dropped(_)));
            assert!(r.datagrams() <= 8, "{}", r.datagrams());
        }
        // A fresh datagram completes among the dropped ones.
        let _ = offer(&r, piece(500, 9, 0), 2, 1);
        assert!(matches!(
            offer(&r, piece(500, 9, 1), 3, 1),
            Offer::Complete(_)
        ));
    }

    /// Completes `n` datagrams of two fragments each, from sources
    /// 10.0.0.0 up, within one timeout.
    fn complete_many(r: &Reassembler<u32>, n: u32) {
        for n in 0..n {
            let (src, id) = ((n >> 16) as u16, n as u16);
            assert!(matches!(offer(r, piece(src, id, 0), 0, 5), Offer::Held));
            assert!(matches!(
                offer(r, piece(src, id, 1), 1, 5),
                Offer::Complete(_)
            ));
        }
    }

    #[test]
    fn completed_datagrams_leave_a_bounded_queue() {
        let r: Reassembler<u32> = Reassembler::default();
        // 100000 datagrams completed within one timeout: the expiry queue
        // must not keep an entry for each.
        complete_many(&r, 100_000);
        assert_eq!(r.held(), 0);
        assert!(r.queued() <= SHARDS * 64, "{} entries queued", r.queued());
    }

    /// The same behind datagrams that never complete: each shard's
    /// queue keeps one at its front, so entries of the completed ones
    /// are not dropped from the front; the queue is compacted instead.
    #[test]
    fn completed_datagrams_behind_a_stuck_one_leave_a_bounded_queue() {
        let r: Reassembler<u32> = Reassembler::default();
        let stuck = 4 * SHARDS as u16;
        for id in 0..stuck {
            assert!(matches!(offer(&r, piece(999, id, 0), 0, 1), Offer::Held));
        }
        complete_many(&r, 100_000);
        assert_eq!(r.held(), usize::from(stuck));
        // Within twice the lists held, and 64 more, a shard.
        let bound = 2 * usize::from(stuck) + 2 + SHARDS * 64;
        assert!(r.queued() <= bound, "{} entries queued", r.queued());
    }
}
