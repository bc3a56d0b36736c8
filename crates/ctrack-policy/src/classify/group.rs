//! One tuple of the tuple space: a hash mask, and a hash table of the
//! entries (conjunctions of rules) whose own mask contains it, bucketed by
//! their value under the hash mask. A bucket holds its candidates sorted
//! by score, best first, each checked against its exact mask and value.

use std::collections::BTreeMap;

use super::entry::Entry;
use super::table::{Cand, Hasher, Seed, Table, scan};
use crate::key::{Field, Key};

/// A tuple's identity: its hash mask and the value every entry has on the
/// mask's first word (flags, ethertype, protocol), which a lookup checks
/// before hashing anything.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Tuple {
    pub(crate) mask: Key,
    pub(crate) w0: u64,
}

impl Tuple {
    /// The tuple of `mask` itself, for `c`.
    pub(crate) fn of(mask: &Key, c: &Entry) -> Tuple {
        Tuple {
            mask: *mask,
            w0: c.value[0] & mask.w[0],
        }
    }

    /// Whether `c` may go into this tuple: its mask holds the tuple's, and
    /// it agrees on the first word.
    pub(crate) fn admits(&self, c: &Entry) -> bool {
        (0..8).all(|i| self.mask.w[i] & !c.mask[i] == 0) && c.value[0] & self.mask.w[0] == self.w0
    }

    /// Bits in the mask.
    pub(crate) fn bits(&self) -> u32 {
        self.mask.w.iter().map(|w| w.count_ones()).sum()
    }
}

/// The coarsened mask of an entry's mask (TupleMerge's relaxed tuple):
/// a subset of it, with few distinct shapes.
///
/// - flags kept as they are (protocols separate tuples cheaply);
/// - addresses: the leading run of ones, cut to a multiple of
///   `step` bits (8: a /28 hashes as its /24);
/// - TCP flags never hashed, and the ICMP type and code, which share their
///   bits, only where the entry tests the ICMP flag;
/// - every other field hashed only when wholly masked (an exact port is
///   hashed, a port prefix from a range is not).
pub(crate) fn coarse(mask: &Key, step: u32) -> Key {
    let mut out = Key::default();
    let icmp = mask.get(Field::Flags) & u128::from(crate::key::flag::ICMP) != 0;
    for f in Field::ALL {
        let m = mask.get(f);
        if m == 0 {
            continue;
        }
        let keep = match f {
            Field::Flags => m,
            Field::IpSrc | Field::IpDst => leading_run(m, step),
            Field::TcpFlags => 0,
            Field::IcmpType | Field::IcmpCode if !icmp => 0,
            _ if m == f.all_ones() => m,
            _ => 0,
        };
        out.set(f, keep);
    }
    out
}

/// The run of ones from `m`'s highest bit down, cut to a multiple of
/// `step` bits.
fn leading_run(m: u128, step: u32) -> u128 {
    let lz = m.leading_zeros();
    let run = (!(m << lz)).leading_zeros();
    let keep = run / step * step;
    if keep == 0 {
        return 0;
    }
    let ones = if keep >= 128 {
        u128::MAX
    } else {
        (1u128 << keep) - 1
    };
    ones << (128 - lz - keep)
}

/// One tuple's hash table.
#[derive(Debug, Clone)]
pub(crate) struct Group {
    pub(crate) tuple: Tuple,
    hasher: Hasher,
    table: Table,
    /// The scores of the entries, counted: the greatest is the group's
    /// bound in the search.
    scores: BTreeMap<u128, u32>,
    entries: usize,
}

impl Group {
    pub(crate) fn new(tuple: Tuple) -> Group {
        Group {
            tuple,
            hasher: Hasher::new(&tuple.mask.w),
            table: Table::default(),
            scores: BTreeMap::new(),
            entries: 0,
        }
    }

    fn bucket_key(&self, c: &Entry) -> [u64; 8] {
        Key { w: c.value }.and(&self.tuple.mask).w
    }

    /// Whether the bucket `c` would go to holds fewer than `limit` rules,
    /// or already one of the rule with `score` (whose entries count once).
    ///
    /// A bucket is sorted by score, best first, so the rule's own run is
    /// found by bisection and the rules are counted run by run, at most
    /// `limit` bisections: a scan of every candidate made placing each
    /// entry of a bucket of thousands linear in them (a fuzz input of 516
    /// bytes took 1.9 s, 78% of it here).
    pub(crate) fn has_room(&self, c: &Entry, score: u128, limit: usize, seed: &Seed) -> bool {
        let k = self.bucket_key(c);
        let Some(b) = self.table.find(&k, self.hasher.hash(&k, seed)) else {
            return true;
        };
        let run = self.table.bucket(b);
        let at = run.partition_point(|x| x.score > score);
        if run.get(at).is_some_and(|x| x.score == score) {
            return true;
        }
        let mut rest = run;
        for _ in 0..limit {
            let Some(first) = rest.first() else {
                return true;
            };
            let s = first.score;
            rest = &rest[rest.partition_point(|x| x.score >= s)..];
        }
        false
    }

    /// Inserts the entries `cs` of the rule with `score`, bucket by bucket:
    /// each bucket's share of them goes in at once, after the entries of
    /// equal score, in their order (see `Table::insert_run`).
    pub(crate) fn insert_rule(&mut self, cs: &[&Entry], score: u128, seed: &Seed) {
        let hs = self.hasher;
        *self.scores.entry(score).or_insert(0) += u32::try_from(cs.len()).unwrap_or(u32::MAX);
        self.entries += cs.len();
        // Most rules are one entry: no lists to make.
        if let [c] = cs {
            let k = self.bucket_key(c);
            let h = hs.hash(&k, seed);
            let b = self.table.find_or_insert(&k, h, |x| hs.hash(x, seed));
            self.table.insert_run(b, h, &[Cand { e: **c, score }]);
            return;
        }
        let mut keyed: Vec<([u64; 8], usize)> = cs
            .iter()
            .enumerate()
            .map(|(i, c)| (self.bucket_key(c), i))
            .collect();
        keyed.sort_unstable();
        for run in keyed.chunk_by(|a, b| a.0 == b.0) {
            let k = run[0].0;
            let h = hs.hash(&k, seed);
            let b = self.table.find_or_insert(&k, h, |x| hs.hash(x, seed));
            let cands: Vec<Cand> = run
                .iter()
                .map(|&(_, i)| Cand { e: *cs[i], score })
                .collect();
            self.table.insert_run(b, h, &cands);
        }
    }

    /// Candidates the group's table copied (see `Table::copied`).
    #[cfg(test)]
    pub(crate) fn copied(&self) -> usize {
        self.table.copied
    }

    /// One entry of the rule with `score` (the tests' way in).
    #[cfg(test)]
    pub(crate) fn insert(&mut self, c: &Entry, score: u128, seed: &Seed) {
        self.insert_rule(&[c], score, seed);
    }

    /// Removes every entry of the rule with `score` from the buckets that
    /// `cs` (its entries in this group) go to: one pass over each such
    /// bucket, whatever the number of its entries there (removing them one
    /// by one is quadratic in a rule of thousands of conjunctions that share
    /// a bucket). Returns the number removed.
    pub(crate) fn remove_rule(&mut self, cs: &[&Entry], score: u128, seed: &Seed) -> usize {
        let mut keys: Vec<[u64; 8]> = cs.iter().map(|c| self.bucket_key(c)).collect();
        keys.sort_unstable();
        keys.dedup();
        let mut removed = 0;
        for k in keys {
            let h = self.hasher.hash(&k, seed);
            let Some(b) = self.table.find(&k, h) else {
                continue;
            };
            let before = self.table.bucket(b).len();
            let left = self.table.retain(b, h, |x| x.score != score);
            removed += before - left;
            if left == 0 {
                self.table.remove(b, h);
            }
        }
        if removed > 0
            && let Some(n) = self.scores.get_mut(&score)
        {
            *n = n.saturating_sub(u32::try_from(removed).unwrap_or(u32::MAX));
            if *n == 0 {
                self.scores.remove(&score);
            }
        }
        self.entries -= removed;
        removed
    }

    /// The best score in the group (0 when empty).
    pub(crate) fn max_score(&self) -> u128 {
        self.scores.last_key_value().map_or(0, |(s, _)| *s)
    }

    pub(crate) fn entries(&self) -> usize {
        self.entries
    }

    pub(crate) fn buckets(&self) -> usize {
        self.table.len()
    }

    /// The best candidate matching `key` with a score above `best`, or
    /// `best`; `key` must agree with the tuple on word 0 (the caller
    /// tests it).
    #[inline]
    pub(crate) fn lookup(&self, key: &Key, best: u128, seed: &Seed) -> u128 {
        match self.table.lone() {
            Some(run) => scan(run, key, best),
            None => self.table.lookup(key, self.hasher.hash(&key.w, seed), best),
        }
    }

    /// Packs the candidates tight (after a build).
    pub(crate) fn compact(&mut self) {
        self.table.compact(true);
    }

    /// The longest bucket.
    pub(crate) fn longest(&self) -> usize {
        self.table.buckets().map(<[Cand]>::len).max().unwrap_or(0)
    }

    /// Heap bytes: the table's, and an estimate of the ordered map of
    /// scores, whose nodes std does not show. A node holds up to eleven
    /// scores and their counts behind a header (about 240 bytes on 64-bit
    /// targets); scores that come in order, as a build adds them, fill
    /// about six a node. (`tests/memory.rs` finds the classifier's sum
    /// within 0.25% of the allocator's count.)
    pub(crate) fn memory(&self) -> usize {
        const NODE: usize = 16 + 11 * (size_of::<u128>() + size_of::<u32>());
        self.table.memory() + self.scores.len().div_ceil(6) * NODE
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn coarse_masks_are_subsets_with_few_shapes() {
        assert_eq!(leading_run(0xffff_ff00, 8), 0xffff_ff00);
        assert_eq!(leading_run(0xffff_fff0, 8), 0xffff_ff00);
        assert_eq!(leading_run(0xfff0_0000, 8), 0xff00_0000);
        assert_eq!(leading_run(0x00f0_0000, 8), 0);
        assert_eq!(leading_run(u128::MAX, 8), u128::MAX);
        assert_eq!(leading_run(u128::MAX << 1, 8), u128::MAX << 8);
        let c = crate::classify::Conj::field(Field::L4Dst, 0xfc00, 1024);
        assert_eq!(coarse(&c.mask, 8), Key::default());
        let c = crate::classify::Conj::field(Field::L4Dst, 0xffff, 80);
        assert_eq!(coarse(&c.mask, 8), c.mask);
    }

    /// Each field's rule in `coarse` (mutation round 68: any one of them
    /// dropped went unseen, the classifier being right with any subset of
    /// a mask): the protocol flags kept even where partly masked, an
    /// address cut to a multiple of the step, TCP flags never hashed, the
    /// ICMP type only where the ICMP flag is tested. (The TCP flags' own
    /// rule changes nothing that a test could see: the ICMP type and code
    /// lie on its bits, and their rules, after it, decide them.)
    #[test]
    fn coarse_keeps_each_field_as_its_rule_says() {
        let mask = |fields: &[(Field, u128)]| {
            let mut k = Key::default();
            for &(f, m) in fields {
                k.set(f, m);
            }
            k
        };
        let tcp = u128::from(crate::key::flag::TCP);
        let icmp = u128::from(crate::key::flag::ICMP);
        let m = mask(&[
            (Field::Flags, tcp),
            (Field::IpSrc, u128::MAX << 100),
            (Field::TcpFlags, Field::TcpFlags.all_ones()),
            (Field::IcmpType, Field::IcmpType.all_ones()),
        ]);
        assert_eq!(
            coarse(&m, 8),
            mask(&[(Field::Flags, tcp), (Field::IpSrc, u128::MAX << 104)])
        );
        let m = mask(&[
            (Field::Flags, icmp),
            (Field::IcmpType, Field::IcmpType.all_ones()),
        ]);
        assert_eq!(coarse(&m, 8), m);
    }

    /// What a group says of itself: its buckets, its best score as its
    /// rules come and go (the bound a search skips it by), and its heap
    /// bytes, which count every candidate and every rule's score and
    /// which `compact` brings down to what the candidates need.
    /// (Mutation round 68: none of it was checked.)
    #[test]
    fn a_group_reports_its_buckets_scores_and_memory() {
        let seed = [1u64; 16];
        let to = |port: u128| crate::classify::Conj::field(Field::L4Dst, 0xffff, port);
        let mut g = Group::new(Tuple {
            mask: to(0).mask,
            w0: 0,
        });
        let entry = |port: u128| Entry {
            mask: to(port).mask.w,
            value: to(port).value.w,
            ports: [0, u16::MAX, 0, u16::MAX],
        };
        // 100 rules of one entry each, two a port: 50 buckets.
        for r in 0..100u128 {
            g.insert(&entry(1000 + r / 2), (r + 1) * 10, &seed);
        }
        assert_eq!((g.buckets(), g.entries(), g.max_score()), (50, 100, 1000));
        let candidates = 100 * size_of::<Cand>();
        let scores = 100 * size_of::<(u128, u32)>();
        let before = g.memory();
        g.compact();
        let after = g.memory();
        assert!(after < before, "{after} {before}");
        assert!(
            after >= candidates + scores && after <= 4 * (candidates + scores) + 16 * 1024,
            "{after}"
        );
        let own = after - g.table.memory();
        assert!(own >= scores && own <= 2 * scores, "{own}");
        // The best rule goes: the next is the bound; then all.
        assert_eq!(g.remove_rule(&[&entry(1049)], 1000, &seed), 1);
        assert_eq!((g.buckets(), g.entries(), g.max_score()), (50, 99, 990));
        assert_eq!(g.remove_rule(&[&entry(1049)], 1000, &seed), 0);
        assert_eq!(g.max_score(), 990);
        for r in 0..99u128 {
            assert_eq!(
                g.remove_rule(&[&entry(1000 + r / 2)], (r + 1) * 10, &seed),
                1
            );
        }
        assert_eq!((g.buckets(), g.entries(), g.max_score()), (0, 0, 0));
    }

    /// `has_room` counts a bucket's rules, not its entries, and finds a
    /// rule's own run, whatever the runs' lengths and order; the bucket
    /// it counts is the entry's own, which a full bucket beside it does
    /// not fill. (Mutation round 68: the bucket's key made a constant went
    /// unseen while the tuple hashed nothing.)
    #[test]
    fn room_is_counted_in_rules() {
        let seed = [1u64; 16];
        let to = |port: u128| crate::classify::Conj::field(Field::L4Dst, 0xffff, port);
        let g0 = Group::new(Tuple {
            mask: to(80).mask,
            w0: 0,
        });
        // Entries of one bucket (the tuple hashes the destination port,
        // 80 for all) that differ in the source port, so that they are
        // distinct.
        let entry = |port: u16| Entry {
            mask: to(80).mask.w,
            value: to(80).value.w,
            ports: [port, 0, 0, u16::MAX],
        };
        let other = Entry {
            value: to(81).value.w,
            ..entry(9)
        };
        for limit in [1usize, 3, 8] {
            for big in [false, true] {
                let mut g = g0.clone();
                // `limit - 1` rules, scores 10, 20, ...; with `big`, the
                // best of them holds 3,000 entries.
                for r in 1..limit as u128 {
                    let n = if big && r == limit as u128 - 1 {
                        3000
                    } else {
                        2
                    };
                    for p in 0..n {
                        g.insert(&entry(p), r * 10, &seed);
                    }
                }
                let room = |g: &Group, score: u128| g.has_room(&entry(9), score, limit, &seed);
                // Fewer than `limit` rules: room for a new one, between or
                // around the others.
                assert!(
                    room(&g, 5) && room(&g, 15) && room(&g, 1000),
                    "{limit} {big}"
                );
                g.insert(&entry(7), 15, &seed);
                // `limit` rules: no room for a new one, at any score; room
                // for the entries of a rule already in.
                assert!(
                    !room(&g, 5) && !room(&g, 16) && !room(&g, 1000),
                    "{limit} {big}"
                );
                assert!(room(&g, 15), "{limit} {big}");
                assert!(g.has_room(&other, 5, limit, &seed), "{limit} {big}");
                for r in 1..limit as u128 {
                    assert!(room(&g, r * 10), "{limit} {big} {r}");
                }
            }
        }
    }
}
