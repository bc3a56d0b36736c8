//! One tuple's hash table, written for the lookup: an index of bucket
//! numbers (hashbrown's `HashTable`: a byte of the hash per slot, sixteen
//! compared at once) beside the buckets' keys and candidates, each in its
//! own array. A lookup reads the index's control bytes (small: they stay
//! in the core's caches) and touches a bucket's candidates only when a
//! tag matches; the answer to "is there a match here" is nearly always
//! "no" and the processor predicts it, where the linear probe this
//! replaced branched on every slot it read (a profile of `bench policy
//! classify` put most of its time there).
//!
//! A lookup never compares bucket keys: it scans the candidates of every
//! bucket whose tag matches along the probe sequence, and each candidate
//! is checked exactly against the key, so a tag collision costs a wasted
//! scan and never a wrong answer. Inserts and removals compare the full
//! bucket key, kept apart from the index.

use hashbrown::HashTable;

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

/// The table: an index of bucket numbers, and the buckets.
#[derive(Debug, Clone, Default)]
pub(crate) struct Table {
    /// Live bucket numbers, by the hash of their key.
    index: HashTable<u32>,
    /// Each bucket's key (its entries' value under the hash mask), by
    /// bucket number; a free bucket's is stale.
    keys: Vec<[u64; 8]>,
    /// Each bucket's candidates, best score first; empty when free.
    cands: Vec<Vec<Cand>>,
    /// Free bucket numbers.
    free: Vec<u32>,
}

impl Table {
    /// Live buckets.
    pub(crate) fn len(&self) -> usize {
        self.index.len()
    }

    /// The number of the bucket of key `k` (hash `h`), if any.
    pub(crate) fn find(&self, k: &[u64; 8], h: u64) -> Option<usize> {
        let keys = &self.keys;
        self.index
            .find(h, |&b| keys.get(b as usize) == Some(k))
            .map(|&b| b as usize)
    }

    /// The candidates of bucket `b`.
    pub(crate) fn bucket(&self, b: usize) -> &[Cand] {
        &self.cands[b]
    }

    /// The candidates of bucket `b`, to change.
    pub(crate) fn bucket_mut(&mut self, b: usize) -> &mut Vec<Cand> {
        &mut self.cands[b]
    }

    /// The number of the bucket of key `k` (hash `h`), made empty if need
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
        let b = match self.free.pop() {
            Some(b) => {
                self.keys[b as usize] = *k;
                b
            }
            None => {
                self.keys.push(*k);
                self.cands.push(Vec::new());
                (self.keys.len() - 1) as u32
            }
        };
        let keys = &self.keys;
        self.index
            .insert_unique(h, b, |&x| rehash(&keys[x as usize]));
        b as usize
    }

    /// Removes bucket `b` (of hash `h`), whose candidates must be gone.
    pub(crate) fn remove(&mut self, b: usize, h: u64) {
        if let Ok(e) = self.index.find_entry(h, |&x| x as usize == b) {
            e.remove();
            self.cands[b] = Vec::new();
            self.free.push(b as u32);
        }
    }

    /// The best candidate matching `key` with a score above `best`, of the
    /// buckets whose tag matches `h`; or `best`.
    #[inline]
    pub(crate) fn lookup(&self, key: &Key, h: u64, mut best: u128) -> u128 {
        let cands = &self.cands;
        // Never "found": the closure scans each bucket whose tag matches,
        // and the search goes on to the end of the probe sequence, so the
        // bucket of the key's own value is scanned whatever collides.
        let _ = self.index.find(h, |&b| {
            if let Some(cs) = cands.get(b as usize) {
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
            false
        });
        best
    }

    /// Every live bucket's candidates.
    pub(crate) fn buckets(&self) -> impl Iterator<Item = &Vec<Cand>> {
        self.index.iter().map(|&b| &self.cands[b as usize])
    }

    /// Heap bytes, without the candidates' own vectors.
    pub(crate) fn memory(&self) -> usize {
        // hashbrown: a u32 and a control byte per slot, plus a group.
        (self.index.capacity() + 16) * 5
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
            t.remove(b, bad(&key(i)));
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
