//! The classifier: rules, their entries, and the tuples they live in.

use std::fmt;
use std::hash::BuildHasher;

use foldhash::fast::RandomState;
use hashbrown::HashMap;

use super::dnf::normalise;
use super::entry::{Entry, entries};
use super::group::{Group, Tuple, coarse};
use super::rule::{CompileError, Rank, RuleId, score, unscore};
use super::table::Seed;
use crate::expr::Expr;
use crate::key::Key;

type Map<K, V> = HashMap<K, V, RandomState>;

/// A bucket holding this many candidates takes no more: a new entry goes
/// to a more specific tuple.
const BUCKET_LIMIT: usize = 8;
/// A new group's addresses are hashed on prefixes of a multiple of this
/// many bits, so that later, longer prefixes join it.
const RELAXED_STEP: u32 = 16;
/// When that group is full, a group with finer prefixes.
const COARSE_STEP: u32 = 8;

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

#[derive(Debug, Clone)]
struct Rule {
    score: u128,
    /// The number of conjunctions of its DNF.
    conjs: usize,
    /// Each conjunction and the slot of the group it went to.
    entries: Vec<(Entry, u32)>,
}

/// One group in the search order, with what a lookup tests before
/// touching the group: its bound and its filter on the key's first word.
#[derive(Debug, Clone, Copy)]
struct Probe {
    /// The group's best score.
    bound: u128,
    /// The group's mask and value on word 0.
    w0_mask: u64,
    w0: u64,
    slot: u32,
}

/// A compiled packet classifier: see the [module documentation](super).
#[derive(Clone)]
pub struct Classifier {
    rules: Map<RuleId, Rule>,
    /// Groups by slot; `None` is a free slot.
    slots: Vec<Option<Group>>,
    free: Vec<u32>,
    /// Live groups, best score first: the search order.
    order: Vec<Probe>,
    /// Every live group's slot by its tuple.
    by_tuple: Map<Tuple, u32>,
    entries: usize,
    conjs: usize,
    seed: Seed,
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
            order: Vec::new(),
            by_tuple: Map::default(),
            entries: 0,
            conjs: 0,
            seed,
        }
    }

    /// A classifier of `rules`; fails on the first rule that does not
    /// compile or whose id is already taken.
    pub fn build<'a>(
        rules: impl IntoIterator<Item = (RuleId, Rank, &'a Expr)>,
    ) -> Result<Classifier, CompileError> {
        let mut c = Classifier::new();
        for (id, rank, expr) in rules {
            c.add(id, rank, expr)?;
        }
        c.reorder();
        Ok(c)
    }

    /// Adds a rule; `id` must be new. Touches only the rule's own entries.
    pub fn insert(&mut self, id: RuleId, rank: Rank, expr: &Expr) -> Result<(), CompileError> {
        self.add(id, rank, expr)?;
        self.reorder();
        Ok(())
    }

    /// Removes a rule; whether it was there. Touches only its entries.
    pub fn remove(&mut self, id: RuleId) -> bool {
        let Some(rule) = self.rules.remove(&id) else {
            return false;
        };
        self.conjs -= rule.conjs;
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
        for p in &self.order {
            if p.bound <= best {
                break;
            }
            if key.w[0] & p.w0_mask != p.w0 {
                continue;
            }
            if let Some(Some(g)) = self.slots.get(p.slot as usize) {
                best = g.lookup(key, best, &self.seed);
            }
        }
        (best != 0).then(|| unscore(best))
    }

    /// The number of rules.
    pub fn len(&self) -> usize {
        self.rules.len()
    }

    /// Whether there is no rule.
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// Whether a rule with this id is in.
    pub fn contains(&self, id: RuleId) -> bool {
        self.rules.contains_key(&id)
    }

    /// Heap bytes used, estimated from the capacities of every table and
    /// vector.
    pub fn memory(&self) -> usize {
        let map = |n: usize, each: usize| n * (each + 1);
        let rules: usize = self
            .rules
            .values()
            .map(|r| r.entries.capacity() * size_of::<(Entry, u32)>())
            .sum();
        let groups: usize = self.slots.iter().flatten().map(Group::memory).sum();
        rules
            + groups
            + map(self.rules.capacity(), size_of::<(RuleId, Rule)>())
            + map(self.by_tuple.capacity(), size_of::<(Tuple, u32)>())
            + self.slots.capacity() * size_of::<Option<Group>>()
            + self.free.capacity() * 4
            + self.order.capacity() * size_of::<Probe>()
    }

    /// Figures about the structure.
    pub fn stats(&self) -> ClassifierStats {
        let groups = self.slots.iter().flatten();
        ClassifierStats {
            rules: self.rules.len(),
            conjunctions: self.conjs,
            entries: self.entries,
            tuples: self.order.len(),
            buckets: groups.clone().map(Group::buckets).sum(),
            longest_bucket: groups.map(Group::longest).max().unwrap_or(0),
            memory: self.memory(),
        }
    }

    /// Adds a rule without refreshing the search order.
    fn add(&mut self, id: RuleId, rank: Rank, expr: &Expr) -> Result<(), CompileError> {
        if self.rules.contains_key(&id) {
            return Err(CompileError::new(format!("rule id {id} is already in")));
        }
        let conjs = normalise(expr)?;
        let s = score(id, rank);
        let mut placed = Vec::new();
        for e in entries(&conjs) {
            let slot = self.place(&e, s);
            placed.push((e, slot));
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

    /// Puts one entry into a group, TupleMerge's way: the most specific
    /// existing group that admits it and whose bucket has room; else a new
    /// group of its mask relaxed, coarsened, or exact, the first that does
    /// not exist yet (the exact one in the end). Returns the group's slot.
    fn place(&mut self, c: &Entry, s: u128) -> u32 {
        let mut best: Option<(u32, usize)> = None;
        for (i, g) in self.slots.iter().enumerate() {
            let Some(g) = g else { continue };
            if !g.tuple.admits(c) {
                continue;
            }
            let bits = g.tuple.bits();
            if best.is_none_or(|(b, _)| bits > b) && g.has_room(c, s, BUCKET_LIMIT, &self.seed) {
                best = Some((bits, i));
            }
        }
        let slot = match best {
            Some((_, i)) => i as u32,
            None => {
                let tuples = [
                    Tuple::of(&coarse(&c.mask_key(), RELAXED_STEP), c),
                    Tuple::of(&coarse(&c.mask_key(), COARSE_STEP), c),
                ];
                let t = tuples
                    .into_iter()
                    .find(|t| !self.by_tuple.contains_key(t))
                    .unwrap_or_else(|| Tuple::of(&c.mask_key(), c));
                self.group_of(t)
            }
        };
        if let Some(Some(g)) = self.slots.get_mut(slot as usize) {
            g.insert(c, s, &self.seed);
        }
        slot
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

    /// Refreshes the search order: groups by their best score, best first.
    fn reorder(&mut self) {
        self.order.clear();
        for (i, g) in self.slots.iter().enumerate() {
            if let Some(g) = g
                && g.entries() > 0
            {
                self.order.push(Probe {
                    bound: g.max_score(),
                    w0_mask: g.tuple.mask.w[0],
                    w0: g.tuple.w0,
                    slot: i as u32,
                });
            }
        }
        self.order
            .sort_unstable_by_key(|p| std::cmp::Reverse((p.bound, p.slot)));
    }
}
