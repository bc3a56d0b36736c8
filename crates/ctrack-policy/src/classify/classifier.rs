//! The classifier: rules, their entries, and the tuples they live in.

use std::fmt;
use std::hash::BuildHasher;

use foldhash::fast::RandomState;
use hashbrown::HashMap;

use super::dnf::{MAX_TOTAL_CONJ, normalise};
use super::entry::{Entry, entries};
use super::group::{Group, Tuple, coarse};
use super::rule::{CompileError, Rank, RuleId, score, unscore};
use super::site::{Bits, NONE, PRUNED_SLOTS, Sites, WordFilter, and};
use super::table::Seed;
use crate::expr::Expr;
use crate::key::Key;

type Map<K, V> = HashMap<K, V, RandomState>;

/// A bucket holds the entries of this many rules at most: a new rule's
/// entry goes to a more specific tuple (a tuple of its exact mask takes
/// any number). One rule a bucket, so that a probe checks one candidate
/// for nearly every key: with 8, more rules shared buckets in fewer
/// tuples, and a probe scanned about three candidates, a cache miss and
/// an unpredictable branch each. `bench policy classify`, alternating
/// runs: 10k rules 5.5–5.6 M/s with 8, 6.8–7.1 with 1; 100k 2.4–2.5 and
/// 2.9–3.2 (BENCHMARKS.md, "one rule a bucket").
const BUCKET_LIMIT: usize = 1;
/// A new group's addresses are hashed on prefixes of a multiple of this
/// many bits, so that later, longer prefixes join it. (20 rather than 16,
/// measured with one rule a bucket and finer tuples of 4-bit steps,
/// `bench policy classify --packets 4000000`, three alternating rounds:
/// 10k rules 8.0–8.4 → 8.8–8.9 M/s, 100k 3.1–3.7 → 4.5–5.0, 1,000 the
/// same; 24 was about as good, 12 no better at 10k, 32 worse.)
const RELAXED_STEP: u32 = 20;
/// When that group is full, a group with finer prefixes. (4 rather than 8,
/// measured with one rule a bucket, `bench policy classify`, three
/// alternating rounds: 10k rules 7.2–7.7 → 8.0–8.4 M/s, 100k 2.6–3.1 →
/// 2.9–3.5; 2 was no better at 10k.)
const COARSE_STEP: u32 = 4;
/// An entry looks for a group to join among this many groups at most (the
/// first, best-scored after a build), then among its own relaxed and
/// coarse groups wherever they are. Scanning every group made placing an
/// entry linear in the groups and a policy's compile quadratic: a fuzz
/// input of 32 rules whose negations expanded to 29,737 entries in as many
/// groups took 7 s to compile. Realistic rule sets have far fewer groups
/// (118 at 100k generated rules), so for them nothing changes.
pub(crate) const PLACE_WINDOW: usize = 512;
/// A key's addresses prune the tuples only when its first word leaves
/// more than this many.
const PRUNE_FROM: u32 = 3;
/// A classifier of at most this many groups is searched without the
/// bitmaps (`bench policy passes`, two groups: with them its two-pass
/// model ran about 100 more instructions a lookup, 5-10% slower).
const FEW: usize = 8;

/// Figures about a classifier's structure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ClassifierStats {
    /// Rules.
    pub rules: usize,
    /// Conjunctions of the rules' DNFs, over all rules.
    pub conjunctions: usize,
    /// Entries (candidates in buckets): the conjunctions, with those that
    /// differ only by port prefixes merged into port ranges.
    pub entries: usize,
    /// Tuples (hash tables) a lookup may probe.
    pub tuples: usize,
    /// Buckets over all tuples.
    pub buckets: usize,
    /// Candidates in the longest bucket.
    pub longest_bucket: usize,
    /// Heap bytes, as [`Classifier::memory`].
    pub memory: usize,
}

impl std::fmt::Display for ClassifierStats {
    /// `3 rules (8 conjunctions): 8 entries in 2 tuples, 8 buckets
    /// (longest 1)`: what `ctrack policy show` prints.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = |n: usize| if n == 1 { "" } else { "s" };
        write!(
            f,
            "{} rule{} ({} conjunction{}): {} entr{} in {} tuple{}, {} bucket{} (longest {})",
            self.rules,
            s(self.rules),
            self.conjunctions,
            s(self.conjunctions),
            self.entries,
            if self.entries == 1 { "y" } else { "ies" },
            self.tuples,
            s(self.tuples),
            self.buckets,
            s(self.buckets),
            self.longest_bucket
        )
    }
}

#[derive(Debug, Clone)]
struct Rule {
    score: u128,
    /// The number of conjunctions of its DNF.
    conjs: usize,
    /// Each conjunction and the slot of the group it went to.
    entries: Vec<(Entry, u32)>,
}

/// What a lookup tests before touching a group: its bound and its filter
/// on the key's first word.
#[derive(Debug, Clone, Copy, Default)]
struct Probe {
    /// The group's best score; 0 for a free or empty slot, which no
    /// lookup then probes.
    bound: u128,
    /// The group's mask and value on word 0.
    w0_mask: u64,
    w0: u64,
}

/// A compiled packet classifier: see the [module documentation](super).
#[derive(Clone)]
pub struct Classifier {
    rules: Map<RuleId, Rule>,
    /// Groups by slot; `None` is a free slot.
    slots: Vec<Option<Group>>,
    free: Vec<u32>,
    /// Each slot's bound and filter, by slot.
    probes: Vec<Probe>,
    /// Which slots may match a key, by its addresses.
    sites: Sites,
    /// Which slots' filters on word 0 a key passes.
    word0: WordFilter,
    /// Whether the live slots' bounds never rise from one to the next (so
    /// that a lookup stops at the first bound its best match reaches), as
    /// after a build; an update may leave them out of order.
    sorted: bool,
    /// The live slots among the pruned ones.
    live: Bits,
    /// With at most [`FEW`] live groups: their bounds, filters on word 0
    /// and slots, best bound first, which a lookup walks instead.
    few: Option<Vec<(u128, u64, u64, u32)>>,
    /// [`FEW`], but for tests, which set it to 0 to search with the
    /// bitmaps whatever the size.
    few_limit: usize,
    /// [`BUCKET_LIMIT`], but for tests, which raise it so that rules
    /// share buckets of every tuple.
    bucket_limit: usize,
    /// Every live group's slot by its tuple.
    by_tuple: Map<Tuple, u32>,
    entries: usize,
    conjs: usize,
    /// Most conjunctions in all, its own and `conj_elsewhere` together
    /// ([`MAX_TOTAL_CONJ`] but in tests).
    conj_bound: usize,
    /// Conjunctions held by the other classifiers of its policy.
    conj_elsewhere: usize,
    seed: Seed,
    /// Groups an entry's placing looked at, over all placings (for the
    /// test that a compile stays linear in the entries).
    #[cfg(test)]
    pub(crate) place_scans: usize,
}

impl fmt::Debug for Classifier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Classifier")
            .field("stats", &self.stats())
            .finish_non_exhaustive()
    }
}

impl Default for Classifier {
    fn default() -> Classifier {
        Classifier::new()
    }
}

impl Classifier {
    /// An empty classifier.
    pub fn new() -> Classifier {
        let s = RandomState::default();
        let mut seed = [0u64; 16];
        for (i, w) in seed.iter_mut().enumerate() {
            *w = s.hash_one(i) | 1;
        }
        Classifier {
            rules: Map::default(),
            slots: Vec::new(),
            free: Vec::new(),
            probes: Vec::new(),
            sites: Sites::default(),
            word0: WordFilter::default(),
            sorted: true,
            live: NONE,
            few: None,
            few_limit: FEW,
            bucket_limit: BUCKET_LIMIT,
            by_tuple: Map::default(),
            entries: 0,
            conjs: 0,
            conj_bound: MAX_TOTAL_CONJ,
            conj_elsewhere: 0,
            seed,
            #[cfg(test)]
            place_scans: 0,
        }
    }

    /// A classifier of `rules`; fails on the first rule that does not
    /// compile or whose id is already taken.
    pub fn build<'a>(
        rules: impl IntoIterator<Item = (RuleId, Rank, &'a Expr)>,
    ) -> Result<Classifier, CompileError> {
        Classifier::new().build_into(rules)
    }

    /// [`Classifier::build`] of one of a policy's classifiers, whose others
    /// hold `elsewhere` conjunctions: all of them together hold at most
    /// [`MAX_TOTAL_CONJ`].
    pub fn build_within<'a>(
        elsewhere: usize,
        rules: impl IntoIterator<Item = (RuleId, Rank, &'a Expr)>,
    ) -> Result<Classifier, CompileError> {
        Classifier::build_bounded(MAX_TOTAL_CONJ, elsewhere, rules)
    }

    /// [`Classifier::build_within`] under the bound `bound` (tests set a
    /// small one).
    pub(crate) fn build_bounded<'a>(
        bound: usize,
        elsewhere: usize,
        rules: impl IntoIterator<Item = (RuleId, Rank, &'a Expr)>,
    ) -> Result<Classifier, CompileError> {
        Classifier {
            conj_bound: bound,
            conj_elsewhere: elsewhere,
            ..Classifier::new()
        }
        .build_into(rules)
    }

    /// Builds `rules` into this empty classifier.
    fn build_into<'a>(
        mut self,
        rules: impl IntoIterator<Item = (RuleId, Rank, &'a Expr)>,
    ) -> Result<Classifier, CompileError> {
        for (id, rank, expr) in rules {
            self.add(id, rank, expr, false).map_err(|e| e.of(id))?;
        }
        self.renumber();
        self.reorder();
        Ok(self)
    }

    /// Adds a rule; `id` must be new. Touches only the rule's own entries.
    pub fn insert(&mut self, id: RuleId, rank: Rank, expr: &Expr) -> Result<(), CompileError> {
        self.add(id, rank, expr, true).map_err(|e| e.of(id))?;
        self.reorder();
        Ok(())
    }

    /// Removes a rule; whether it was there. Touches only its entries.
    pub fn remove(&mut self, id: RuleId) -> bool {
        let Some(rule) = self.rules.remove(&id) else {
            return false;
        };
        self.conjs -= rule.conjs;
        for (e, slot) in &rule.entries {
            self.sites.update(e, *slot, false);
        }
        // The rule's entries group by group, each group's in one pass.
        let mut by_slot: Vec<(u32, &Entry)> = rule.entries.iter().map(|(c, s)| (*s, c)).collect();
        by_slot.sort_unstable_by_key(|&(s, _)| s);
        for run in by_slot.chunk_by(|a, b| a.0 == b.0) {
            let slot = run[0].0;
            let Some(Some(g)) = self.slots.get_mut(slot as usize) else {
                continue;
            };
            let cs: Vec<&Entry> = run.iter().map(|&(_, c)| c).collect();
            self.entries -= g.remove_rule(&cs, rule.score, &self.seed);
            if g.entries() == 0 {
                let t = g.tuple;
                self.slots[slot as usize] = None;
                self.free.push(slot);
                self.by_tuple.remove(&t);
            }
        }
        self.reorder();
        true
    }

    /// The matching rule with the highest rank (of equal ranks, the lowest
    /// id), or `None`. Allocates nothing.
    pub fn classify(&self, key: &Key) -> Option<(RuleId, Rank)> {
        let mut best = 0u128;
        // A few tuples: probed in bound order, as they are; the bitmaps
        // below cost more than a few probes they could save.
        if let Some(order) = &self.few {
            for &(bound, w0_mask, w0, slot) in order {
                if bound <= best {
                    break;
                }
                if key.w[0] & w0_mask == w0
                    && let Some(Some(g)) = self.slots.get(slot as usize)
                {
                    best = g.lookup(key, best, &self.seed);
                }
            }
            return (best != 0).then(|| unscore(best));
        }
        // The slots the key's addresses leave, lowest first: after a build
        // that is best bound first, so that a good match found early
        // turns the later probes away on their bound.
        let word0 = self.word0.pass(key.w[0]);
        let mut cands = and(word0, self.live);
        // The address lookups cost about as much as a few probes: worth
        // it only when there are more tuples to probe than that.
        if cands.iter().map(|w| w.count_ones()).sum::<u32>() > PRUNE_FROM {
            let sites = self.sites.candidates(&key.w);
            cands = and(cands, sites);
        }
        for (w, mut bits) in cands.into_iter().enumerate() {
            while bits != 0 {
                let slot = w * 64 + bits.trailing_zeros() as usize;
                bits &= bits - 1;
                // The word filter is exact for these slots: only the
                // bound is left to test.
                let (Some(p), Some(Some(g))) = (self.probes.get(slot), self.slots.get(slot)) else {
                    continue;
                };
                if p.bound > best {
                    best = g.lookup(key, best, &self.seed);
                } else if self.sorted {
                    return (best != 0).then(|| unscore(best));
                }
            }
        }
        for slot in PRUNED_SLOTS..self.probes.len() {
            self.probe(slot, key, &mut best);
        }
        (best != 0).then(|| unscore(best))
    }

    /// Probes the group in `slot` unless its bound or its filter on word 0
    /// rules it out.
    #[inline(always)]
    fn probe(&self, slot: usize, key: &Key, best: &mut u128) {
        let Some(p) = self.probes.get(slot) else {
            return;
        };
        if p.bound <= *best || key.w[0] & p.w0_mask != p.w0 {
            return;
        }
        if let Some(Some(g)) = self.slots.get(slot) {
            *best = g.lookup(key, *best, &self.seed);
        }
    }

    /// The same classifier searching with its bitmaps whatever its size
    /// (for tests of that search on small rule sets).
    #[cfg(test)]
    pub(crate) fn with_bitmaps(mut self) -> Classifier {
        self.few_limit = 0;
        self.reorder();
        self
    }

    /// An empty classifier whose buckets hold up to `limit` rules (for
    /// tests of buckets that rules share).
    #[cfg(test)]
    pub(crate) fn with_bucket_limit(limit: usize) -> Classifier {
        Classifier {
            bucket_limit: limit,
            ..Classifier::new()
        }
    }

    /// [`Classifier::build`] with buckets of up to `limit` rules.
    #[cfg(test)]
    pub(crate) fn build_limited<'a>(
        limit: usize,
        rules: impl IntoIterator<Item = (RuleId, Rank, &'a Expr)>,
    ) -> Result<Classifier, CompileError> {
        Classifier::with_bucket_limit(limit).build_into(rules)
    }

    /// Candidates the groups' tables copied (for the tests that inserts
    /// stay linear).
    #[cfg(test)]
    pub(crate) fn copied(&self) -> usize {
        self.slots.iter().flatten().map(Group::copied).sum()
    }

    /// The number of rules.
    pub fn len(&self) -> usize {
        self.rules.len()
    }

    /// The number of conjunctions its rules expand to, together.
    pub fn conjunctions(&self) -> usize {
        self.conjs
    }

    /// Whether there is no rule.
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// Whether a rule with this id is in.
    pub fn contains(&self, id: RuleId) -> bool {
        self.rules.contains_key(&id)
    }

    /// Heap bytes used: the capacities of every vector and the
    /// allocations of every hash table, exact but for the groups' ordered
    /// maps of scores, which are estimated (`tests/memory.rs` holds the
    /// sum to what the allocator gave).
    pub fn memory(&self) -> usize {
        let rules: usize = self
            .rules
            .values()
            .map(|r| r.entries.capacity() * size_of::<(Entry, u32)>())
            .sum();
        let groups: usize = self.slots.iter().flatten().map(Group::memory).sum();
        rules
            + groups
            + self.rules.allocation_size()
            + self.by_tuple.allocation_size()
            + self
                .few
                .as_ref()
                .map_or(0, |f| f.capacity() * size_of::<(u128, u64, u64, u32)>())
            + self.slots.capacity() * size_of::<Option<Group>>()
            + self.free.capacity() * 4
            + self.probes.capacity() * size_of::<Probe>()
            + self.sites.memory()
            + self.word0.memory()
    }

    /// Figures about the structure.
    pub fn stats(&self) -> ClassifierStats {
        let groups = self.slots.iter().flatten();
        ClassifierStats {
            rules: self.rules.len(),
            conjunctions: self.conjs,
            entries: self.entries,
            tuples: self.by_tuple.len(),
            buckets: groups.clone().map(Group::buckets).sum(),
            longest_bucket: groups.map(Group::longest).max().unwrap_or(0),
            memory: self.memory(),
        }
    }

    /// Adds a rule without refreshing the groups' bounds; indexes its
    /// entries' addresses if `sites` (a build indexes them all at the end).
    fn add(
        &mut self,
        id: RuleId,
        rank: Rank,
        expr: &Expr,
        sites: bool,
    ) -> Result<(), CompileError> {
        if self.rules.contains_key(&id) {
            return Err(CompileError::new(format!("rule id {id} is already in")));
        }
        let conjs = normalise(expr)?;
        let held = self.conj_elsewhere.saturating_add(self.conjs);
        if held.saturating_add(conjs.len()) > self.conj_bound {
            return Err(CompileError::new(format!(
                "the ACLs expand to more than {} conjunctions in all \
                 ({held} before this one, which adds {})",
                self.conj_bound,
                conjs.len()
            )));
        }
        let s = score(id, rank);
        let mut placed = Vec::new();
        for e in entries(&conjs) {
            let slot = self.place(&e, s);
            if sites {
                self.sites.update(&e, slot, true);
            }
            placed.push((e, slot));
        }
        // Into their groups once all are placed, each group's at once.
        // (Placing the next entry does not need the ones before in their
        // buckets: a bucket has room for this rule if it holds its entries
        // already or fewer than the limit of rules, and that is the same
        // before and after they go in.)
        if let [(e, slot)] = placed.as_slice() {
            // Most rules are one entry: no lists to make.
            if let Some(Some(g)) = self.slots.get_mut(*slot as usize) {
                g.insert_rule(&[e], s, &self.seed);
            }
        } else {
            let mut by_slot: Vec<(u32, usize)> = placed
                .iter()
                .enumerate()
                .map(|(i, &(_, slot))| (slot, i))
                .collect();
            by_slot.sort_unstable();
            for run in by_slot.chunk_by(|a, b| a.0 == b.0) {
                let cs: Vec<&Entry> = run.iter().map(|&(_, i)| &placed[i].0).collect();
                if let Some(Some(g)) = self.slots.get_mut(run[0].0 as usize) {
                    g.insert_rule(&cs, s, &self.seed);
                }
            }
        }
        self.entries += placed.len();
        self.conjs += conjs.len();
        self.rules.insert(
            id,
            Rule {
                score: s,
                conjs: conjs.len(),
                entries: placed,
            },
        );
        Ok(())
    }

    /// Chooses one entry's group, TupleMerge's way: the most specific
    /// existing group that admits it and whose bucket has room; else a new
    /// group of its mask relaxed, coarsened, or exact, the first that does
    /// not exist yet (the exact one in the end). Returns the group's slot;
    /// the caller puts the entry in.
    fn place(&mut self, c: &Entry, s: u128) -> u32 {
        let mut best: Option<(u32, usize)> = None;
        let live = self
            .slots
            .iter()
            .enumerate()
            .filter_map(|(i, g)| Some((i, g.as_ref()?)));
        #[cfg(test)]
        let mut scans = 0;
        for (i, g) in live.take(PLACE_WINDOW) {
            #[cfg(test)]
            {
                scans += 1;
            }
            if !g.tuple.admits(c) {
                continue;
            }
            let bits = g.tuple.bits();
            if best.is_none_or(|(b, _)| bits > b) && g.has_room(c, s, self.bucket_limit, &self.seed)
            {
                best = Some((bits, i));
            }
        }
        #[cfg(test)]
        {
            self.place_scans += scans;
        }
        match best {
            Some((_, i)) => i as u32,
            None => {
                let tuples = [
                    Tuple::of(&coarse(&c.mask_key(), RELAXED_STEP), c),
                    Tuple::of(&coarse(&c.mask_key(), COARSE_STEP), c),
                ];
                // The first of them that does not exist yet, or that
                // exists (beyond the window) with room; else the exact one.
                let open = |t: &Tuple| match self.by_tuple.get(t) {
                    None => true,
                    Some(&slot) => self.slots.get(slot as usize).is_some_and(|g| {
                        g.as_ref()
                            .is_some_and(|g| g.has_room(c, s, self.bucket_limit, &self.seed))
                    }),
                };
                let t = tuples
                    .into_iter()
                    .find(open)
                    .unwrap_or_else(|| Tuple::of(&c.mask_key(), c));
                self.group_of(t)
            }
        }
    }

    /// The slot of the group of `t`, made if need be.
    fn group_of(&mut self, t: Tuple) -> u32 {
        if let Some(&slot) = self.by_tuple.get(&t) {
            return slot;
        }
        let g = Some(Group::new(t));
        let slot = match self.free.pop() {
            Some(slot) => {
                self.slots[slot as usize] = g;
                slot
            }
            None => {
                self.slots.push(g);
                (self.slots.len() - 1) as u32
            }
        };
        self.by_tuple.insert(t, slot);
        slot
    }

    /// Refreshes every slot's bound and filter.
    fn reorder(&mut self) {
        self.probes.clear();
        self.probes.extend(self.slots.iter().map(|g| match g {
            Some(g) if g.entries() > 0 => Probe {
                bound: g.max_score(),
                w0_mask: g.tuple.mask.w[0],
                w0: g.tuple.w0,
            },
            _ => Probe::default(),
        }));
        self.word0
            .refresh(self.probes.iter().map(|p| (p.w0_mask, p.w0)));
        // Free slots (bound 0) are skipped by every lookup, in order or not.
        let live: Vec<u128> = self
            .probes
            .iter()
            .map(|p| p.bound)
            .filter(|&b| b != 0)
            .collect();
        self.sorted = live.windows(2).all(|w| w[0] >= w[1]);
        self.live = NONE;
        for (slot, p) in self.probes.iter().enumerate().take(PRUNED_SLOTS) {
            if p.bound != 0 {
                self.live[slot / 64] |= 1 << (slot % 64);
            }
        }
        self.few = (live.len() <= self.few_limit).then(|| {
            let mut order: Vec<(u128, u64, u64, u32)> = self
                .probes
                .iter()
                .enumerate()
                .filter(|(_, p)| p.bound != 0)
                .map(|(slot, p)| (p.bound, p.w0_mask, p.w0, slot as u32))
                .collect();
            order.sort_unstable_by_key(|x| std::cmp::Reverse((x.0, x.3)));
            order
        });
    }

    /// Numbers the groups again, best bound first (so that the address
    /// index covers the best ones and a lookup meets them first), and
    /// indexes every entry's addresses. For a build: an update keeps the
    /// numbers it finds.
    fn renumber(&mut self) {
        let mut live: Vec<(u128, usize)> = self
            .slots
            .iter()
            .enumerate()
            .filter_map(|(i, g)| g.as_ref().map(|g| (g.max_score(), i)))
            .collect();
        live.sort_unstable_by_key(|&x| std::cmp::Reverse(x));
        let mut new = vec![u32::MAX; self.slots.len()];
        let mut slots = Vec::with_capacity(live.len());
        for (n, &(_, old)) in live.iter().enumerate() {
            new[old] = n as u32;
            slots.push(self.slots[old].take());
        }
        self.slots = slots;
        for g in self.slots.iter_mut().flatten() {
            g.compact();
        }
        self.free.clear();
        for s in self.by_tuple.values_mut() {
            *s = new[*s as usize];
        }
        self.sites.clear();
        for r in self.rules.values_mut() {
            for (e, s) in &mut r.entries {
                *s = new[*s as usize];
                self.sites.update(e, *s, true);
            }
        }
    }
}
