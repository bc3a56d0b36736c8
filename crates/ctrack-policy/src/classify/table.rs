//! One tuple's hash table, written for the lookup: a power-of-two array of
//! 8-byte slots probed linearly, each the hash's high half (a tag) and the
//! index of a bucket, kept at most a quarter full. A lookup reads one or two
//! slots of that array (small: it stays in the core's caches) and touches
//! a bucket's candidates only when a tag matches.
//!
//! A lookup never compares bucket keys: it scans the candidates of every
//! bucket whose tag matches along the probe run, and each candidate is
//! checked exactly against the key, so a tag collision costs a wasted scan
//! and never a wrong answer. Inserts and removals compare the full bucket
//! key, kept apart from the slots.
//!
//! Written by hand rather than with `hashbrown` because the lookup wants
//! the slots alone, without bucket keys beside them, and the bucket's
//! candidates one index away.

use super::entry::Entry;
use crate::key::Key;

/// One conjunction of one rule, as stored in a bucket. The score comes
/// first so that the scan's bound test and the first words of the mask
/// share a cache line.
#[derive(Debug, Clone)]
#[repr(C)]
pub(crate) struct Cand {
    /// The rule's score (see `rule::score`).
    pub(crate) score: u128,
    pub(crate) e: Entry,
}

/// The per-classifier secret of the hash: two words per key word.
pub(crate) type Seed = [u64; 16];

#[inline]
fn fold(a: u64, b: u64) -> u64 {
    let r = u128::from(a) * u128::from(b);
    (r as u64) ^ ((r >> 64) as u64)
}

/// How a tuple hashes a key: the key under the tuple's mask, on the words
/// where the mask is not zero, word 0 left out (every entry of a tuple
/// has the same value there, and a lookup tests it before hashing). Each
/// word is mixed on its own with a folded multiply (foldhash's mixing
/// step), so that they run side by side, and the mixes are added.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Hasher {
    mask: [u64; 8],
    /// The words hashed, `n` of them.
    words: [u8; 7],
    n: u8,
}

impl Hasher {
    pub(crate) fn new(mask: &[u64; 8]) -> Hasher {
        let mut words = [0u8; 7];
        let mut n = 0;
        for (i, &m) in mask.iter().enumerate().skip(1) {
            if m != 0 {
                words[n] = i as u8;
                n += 1;
            }
        }
        Hasher {
            mask: *mask,
            words,
            n: n as u8,
        }
    }

    /// The hash of `w` under the mask.
    #[inline]
    pub(crate) fn hash(&self, w: &[u64; 8], s: &Seed) -> u64 {
        let mut h = 0u64;
        for &i in self.words.iter().take(usize::from(self.n)) {
            let i = usize::from(i) & 7;
            h = h.wrapping_add(fold((w[i] & self.mask[i]) ^ s[i], s[i + 8]));
        }
        h
    }
}

/// An empty slot. A full one holds `tag << 32 | (bucket + 1)`.
const EMPTY: u64 = 0;

#[inline]
fn tag(h: u64) -> u64 {
    h >> 32
}

/// The table: slots, and the buckets they point to.
#[derive(Debug, Clone, Default)]
pub(crate) struct Table {
    /// Power-of-two length (or empty), at most a quarter full.
    slots: Vec<u64>,
    /// Each bucket's key (its entries' value under the hash mask), by
    /// bucket index; a free bucket's is stale.
    keys: Vec<[u64; 8]>,
    /// Each bucket's candidates, best score first; empty when free.
    cands: Vec<Vec<Cand>>,
    /// Free bucket indices.
    free: Vec<u32>,
    /// Live buckets.
    len: usize,
}

impl Table {
    /// Live buckets.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// The index of the bucket of key `k` (hash `h`), if any.
    pub(crate) fn find(&self, k: &[u64; 8], h: u64) -> Option<usize> {
        let m = self.slots.len().checked_sub(1)?;
        let mut i = h as usize & m;
        loop {
            let s = self.slots[i];
            if s == EMPTY {
                return None;
            }
            let b = (s as u32 - 1) as usize;
            if tag(s) == tag(h) && self.keys[b] == *k {
                return Some(b);
            }
            i = (i + 1) & m;
        }
    }

    /// The candidates of bucket `b`.
    pub(crate) fn bucket(&self, b: usize) -> &[Cand] {
        &self.cands[b]
    }

    /// The candidates of bucket `b`, to change.
    pub(crate) fn bucket_mut(&mut self, b: usize) -> &mut Vec<Cand> {
        &mut self.cands[b]
    }

    /// The index of the bucket of key `k` (hash `h`), made empty if need
    /// be. `rehash` hashes a bucket key (for growing).
    pub(crate) fn find_or_insert(
        &mut self,
        k: &[u64; 8],
        h: u64,
        rehash: impl Fn(&[u64; 8]) -> u64,
    ) -> usize {
        if let Some(b) = self.find(k, h) {
            return b;
        }
        if (self.len + 1) * 4 > self.slots.len() {
            self.grow(&rehash);
        }
        let b = match self.free.pop() {
            Some(b) => {
                self.keys[b as usize] = *k;
                b as usize
            }
            None => {
                self.keys.push(*k);
                self.cands.push(Vec::new());
                self.keys.len() - 1
            }
        };
        self.place(h, b);
        self.len += 1;
        b
    }

    fn place(&mut self, h: u64, b: usize) {
        let m = self.slots.len() - 1;
        let mut i = h as usize & m;
        while self.slots[i] != EMPTY {
            i = (i + 1) & m;
        }
        self.slots[i] = (tag(h) << 32) | (b as u64 + 1);
    }

    fn grow(&mut self, rehash: &impl Fn(&[u64; 8]) -> u64) {
        let n = (self.slots.len() * 2).max(8);
        let old = std::mem::replace(&mut self.slots, vec![EMPTY; n]);
        for s in old.into_iter().filter(|&s| s != EMPTY) {
            let b = (s as u32 - 1) as usize;
            self.place(rehash(&self.keys[b]), b);
        }
    }

    /// Removes bucket `b` (of hash `h`), whose candidates must be gone:
    /// the slots after it that would no longer be reached move back
    /// (deletion by backward shift, so no tombstones).
    pub(crate) fn remove(&mut self, b: usize, h: u64, rehash: impl Fn(&[u64; 8]) -> u64) {
        let Some(m) = self.slots.len().checked_sub(1) else {
            return;
        };
        let want = (tag(h) << 32) | (b as u64 + 1);
        let mut i = h as usize & m;
        while self.slots[i] != want {
            if self.slots[i] == EMPTY {
                return;
            }
            i = (i + 1) & m;
        }
        self.slots[i] = EMPTY;
        let mut j = i;
        loop {
            j = (j + 1) & m;
            let s = self.slots[j];
            if s == EMPTY {
                break;
            }
            let home = rehash(&self.keys[(s as u32 - 1) as usize]) as usize & m;
            // `s` may fill the hole at `i` when its home is not within
            // (i, j] cyclically.
            if (j.wrapping_sub(home) & m) >= (j.wrapping_sub(i) & m) {
                self.slots[i] = s;
                self.slots[j] = EMPTY;
                i = j;
            }
        }
        self.cands[b] = Vec::new();
        self.free.push(b as u32);
        self.len -= 1;
    }

    /// The best candidate matching `key` with a score above `best`, of the
    /// buckets whose tag matches `h`; or `best`.
    #[inline]
    pub(crate) fn lookup(&self, key: &Key, h: u64, mut best: u128) -> u128 {
        let Some(m) = self.slots.len().checked_sub(1) else {
            return best;
        };
        let mut i = h as usize & m;
        loop {
            let s = self.slots[i];
            if s == EMPTY {
                return best;
            }
            if tag(s) == tag(h)
                && let Some(cs) = self.cands.get((s as u32 - 1) as usize)
            {
                for c in cs {
                    if c.score <= best {
                        break;
                    }
                    if c.e.matches(key) {
                        best = c.score;
                        break;
                    }
                }
            }
            i = (i + 1) & m;
        }
    }

    /// Every live bucket's candidates.
    pub(crate) fn buckets(&self) -> impl Iterator<Item = &Vec<Cand>> {
        self.slots
            .iter()
            .filter(|&&s| s != EMPTY)
            .map(|&s| &self.cands[(s as u32 - 1) as usize])
    }

    /// Heap bytes, without the candidates' own vectors.
    pub(crate) fn memory(&self) -> usize {
        self.slots.capacity() * 8
            + self.keys.capacity() * size_of::<[u64; 8]>()
            + self.cands.capacity() * size_of::<Vec<Cand>>()
            + self.free.capacity() * 4
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A poor hash on purpose: many keys share a home slot and a tag, so
    /// that probe runs are long and removals shift slots back.
    fn bad(k: &[u64; 8]) -> u64 {
        (k[1] % 5) << 32 | (k[1] % 3)
    }

    #[test]
    fn buckets_survive_collisions_growth_and_removal() {
        let mut t = Table::default();
        let key = |i: u64| [0, i, 0, 0, 0, 0, 0, 0];
        let mut live = Vec::new();
        for i in 0..200u64 {
            let b = t.find_or_insert(&key(i), bad(&key(i)), bad);
            assert_eq!(t.find_or_insert(&key(i), bad(&key(i)), bad), b);
            live.push((i, b));
        }
        assert_eq!(t.len(), 200);
        // Remove every third, in an order unlike the insertion's.
        let mut gone = Vec::new();
        for j in (0..200).rev().step_by(3) {
            let (i, b) = live[j];
            t.remove(b, bad(&key(i)), bad);
            gone.push(i);
        }
        for (i, b) in &live {
            let found = t.find(&key(*i), bad(&key(*i)));
            if gone.contains(i) {
                assert_eq!(found, None, "{i}");
            } else {
                assert_eq!(found, Some(*b), "{i}");
            }
        }
        assert_eq!(t.len(), 200 - gone.len());
        assert_eq!(t.buckets().count(), t.len());
        // Freed buckets are reused.
        let b = t.find_or_insert(&key(1000), bad(&key(1000)), bad);
        assert!(live.iter().any(|&(_, x)| x == b));
    }
}
