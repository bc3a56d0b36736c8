//! The differential fuzz body of the connection table: a random sequence
//! of operations applied to a [`Table`] and to a plain map, which must
//! agree after every step.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::Ordering;

use arbitrary::{Arbitrary, Unstructured};
use ctrack_table::testing::{Ctx, Rec};
use ctrack_table::{Context, Removal, Table, TableConfig, pin};

use crate::Probe;

/// A deliberately poor hash: few distinct values, so that buckets overflow,
/// tags collide and shards fill unevenly.
fn poor_hash(bits: u32, k: u64) -> u64 {
    let h = k.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    // Keep `bits` bits of entropy, spread over shard, bucket and tag.
    let e = h >> (64 - bits);
    e.wrapping_mul(0xd6e8_feb8_6659_fd93).rotate_left(17)
}

#[derive(Debug, Arbitrary)]
enum Op {
    Insert {
        key: u8,
        alt: Option<u8>,
        inst: u8,
        life: u8,
    },
    Remove {
        key: u8,
    },
    Find {
        key: u8,
    },
    Refresh {
        key: u8,
        life: u8,
    },
    Evict {
        key: u8,
        inst: u8,
        scan: u8,
    },
    Sweep {
        advance: u8,
        budget: u8,
    },
    Reclaim {
        inst: u8,
        budget: u8,
    },
    Reserve {
        capacity: u16,
    },
    EvictNear {
        key: u8,
        buckets: u8,
        shards: u8,
        skip: u8,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct M {
    alt: u64,
    inst: u64,
    exp: u64,
}

/// A table and its model: the records it must hold, keyed by primary key.
struct Run<H> {
    t: Table<Rec>,
    ctx: Ctx<H>,
    shards: usize,
    /// Keys 1..=255 (primary) and 1000+ (secondary): never confused.
    model: HashMap<u64, M>,
    now: u64,
}

/// Applies operations decoded from `data` to a table and a model. Counts
/// the operations (not packets).
pub fn table(data: &[u8], probe: &mut Probe) {
    let mut u = Unstructured::new(data);
    // 1 to 8 shards, where few keys share each; or the most (256), where
    // the shard bits reach the hash's top byte and most shards stay empty.
    let shards = match u.int_in_range(0..=4u32).unwrap_or(0) {
        4 => ctrack_table::MAX_SHARDS,
        b => 1usize << b,
    };
    let bits = u.int_in_range(3..=20u32).unwrap_or(8);
    let capacity = usize::from(u.arbitrary::<u8>().unwrap_or(0));
    // Now and then shards whose share pays for two or four timer-wheel
    // lanes (4,096 or 8,192 records a shard; with few shards only, since
    // the index is sized from it).
    let capacity = if shards <= 8 && capacity >= 0xf0 {
        shards << (12 + (capacity & 1))
    } else {
        capacity
    };
    let mut run = Run {
        t: Table::new(TableConfig { shards, capacity }),
        ctx: Ctx::new(move |k| poor_hash(bits, k)),
        shards,
        model: HashMap::new(),
        now: 0,
    };
    for _ in 0..2048 {
        if u.is_empty() {
            break;
        }
        let Ok(op) = Op::arbitrary(&mut u) else { break };
        let before = run.model.len();
        run.apply(&op);
        probe.count(1);
        // The table holds exactly the model.
        assert_eq!(run.t.len(), run.model.len(), "after {op:?}");
        let after = run.model.len();
        probe.feature(
            90,
            (
                std::mem::discriminant(&op),
                after.cmp(&before),
                usize::BITS - after.leading_zeros(),
            ),
        );
    }
    run.finish();
}

impl<H: Fn(u64) -> u64> Run<H> {
    fn apply(&mut self, op: &Op) {
        match *op {
            Op::Insert {
                key,
                alt,
                inst,
                life,
            } => self.insert(key, alt, inst, life),
            Op::Remove { key } => self.remove(key),
            Op::Find { key } => self.find(key),
            Op::Refresh { key, life } => self.refresh(key, life),
            Op::Evict { key, inst, scan } => self.evict(key, inst, scan),
            Op::EvictNear {
                key,
                buckets,
                shards,
                skip,
            } => self.evict_near(key, buckets, shards, skip),
            Op::Sweep { advance, budget } => self.sweep(advance, budget),
            Op::Reclaim { inst, budget } => self.reclaim(inst, budget),
            Op::Reserve { capacity } => {
                self.t.reserve(&self.ctx, &pin(), usize::from(capacity));
            }
        }
    }

    fn insert(&mut self, key: u8, alt: Option<u8>, inst: u8, life: u8) {
        let (t, ctx, now) = (&self.t, &self.ctx, self.now);
        let g = pin();
        let key = u64::from(key).max(1);
        let alt = alt.map_or(0, |a| 1000 + u64::from(a));
        let inst = u64::from(inst % 4);
        let exp = now + 1 + u64::from(life) * 100;
        let h = ctx.hashes_of(key, alt);
        let mut w = t.write(&g, &h);
        let live = |m: &M| m.exp > now;
        let held = |k: u64| {
            w.find(ctx.hash(k), |r| {
                (r.key == k || r.alt == k) && r.exp.load(Ordering::Relaxed) > now
            })
            .is_some()
        };
        let dup = held(key) || (alt != 0 && held(alt));
        let model = &mut self.model;
        let model_dup = model.get(&key).is_some_and(live)
            || (alt != 0 && model.values().any(|m| m.alt == alt && live(m)));
        assert_eq!(dup, model_dup, "duplicate check for {key}/{alt}");
        if dup {
            return;
        }
        // A third of the inserts are announced first, as a commit that
        // looked far from the limit announces its own: counted from then
        // on, taken back and announced again without a trace, and kept by
        // the insert.
        let before = t.len();
        let announced = life.is_multiple_of(3);
        if announced {
            w.reserve(h.primary);
            assert_eq!(t.len(), before + 1, "an announced insert is counted");
            w.unreserve(h.primary);
            assert_eq!(t.len(), before, "and taken back");
            w.reserve(h.primary);
            w.reserve(h.primary);
            assert_eq!(t.len(), before + 1, "announced once, however often");
        }
        let mut removed = 0;
        // An expired record of the same key goes first.
        if let Some(e) = w.find(ctx.hash(key), |r| r.key == key) {
            assert!(w.remove(ctx, e, Removal::Replaced));
            model.remove(&key);
            removed += 1;
        }
        if alt != 0
            && let Some(e) = w.find(ctx.hash(alt), |r| r.alt == alt)
        {
            let k = e.record().key;
            assert!(w.remove(ctx, e, Removal::Replaced));
            model.remove(&k);
            removed += 1;
        }
        if announced {
            assert_eq!(
                t.len(),
                before + 1 - removed,
                "removals beside an announcement"
            );
        }
        let ok = w.insert(ctx, &h, now, |r| r.fill(key, alt, inst, exp, key));
        assert!(ok.is_ok(), "{ok:?}");
        assert_eq!(
            t.len(),
            before + 1 - removed,
            "the insert keeps the count announced"
        );
        drop(w);
        assert_eq!(t.len(), before + 1 - removed);
        model.insert(key, M { alt, inst, exp });
    }

    fn remove(&mut self, key: u8) {
        let g = pin();
        let key = u64::from(key).max(1);
        let found = self.t.find(&g, self.ctx.hash(key), |r| r.key == key);
        assert_eq!(found.is_some(), self.model.contains_key(&key));
        if let Some(e) = found {
            let h = self.ctx.hashes(e.record(), &g);
            assert!(self.t.write(&g, &h).remove(&self.ctx, e, Removal::Deleted));
            self.model.remove(&key);
        }
    }

    fn find(&self, key: u8) {
        let (t, ctx) = (&self.t, &self.ctx);
        let g = pin();
        let key = u64::from(key).max(1);
        let found = t.find(&g, ctx.hash(key), |r| r.key == key);
        assert_eq!(
            found.map(|e| e.record().key),
            self.model.get(&key).map(|_| key)
        );
        if let Some(m) = self.model.get(&key)
            && m.alt != 0
        {
            let by_alt = t.find(&g, ctx.hash(m.alt), |r| r.alt == m.alt);
            assert_eq!(by_alt.map(|e| e.record().key), Some(key));
        }
    }

    fn refresh(&mut self, key: u8, life: u8) {
        let g = pin();
        let key = u64::from(key).max(1);
        if let Some(e) = self.t.find(&g, self.ctx.hash(key), |r| r.key == key) {
            let l = e.lock().expect("single-threaded: live");
            let exp = self.now + 1 + u64::from(life) * 100;
            l.exp.store(exp, Ordering::Relaxed);
            self.model.get_mut(&key).expect("modelled").exp = exp;
        }
    }

    fn evict(&mut self, key: u8, inst: u8, scan: u8) {
        let (t, ctx) = (&self.t, &self.ctx);
        let g = pin();
        let key = u64::from(key).max(1);
        let inst = u64::from(inst % 4);
        let h = ctx.hashes_of(key, 0);
        let mut w = t.write(&g, &h);
        let before = t.len();
        let mut victim = None;
        let evicted = w.evict(ctx, h.primary, inst, usize::from(scan % 8), |r| {
            victim = Some(r.key);
            true
        });
        drop(w);
        if evicted {
            let k = victim.expect("a victim was picked");
            let m = self.model.remove(&k).expect("the victim was modelled");
            assert_eq!(m.inst, inst);
            assert_eq!(t.len(), before - 1);
        } else {
            assert_eq!(t.len(), before);
        }
    }

    /// Early drop from the hash neighbourhood of `key` (its shard, then
    /// the next ones), passing over keys that are multiples of `skip`.
    fn evict_near(&mut self, key: u8, buckets: u8, shards: u8, skip: u8) {
        let (t, ctx) = (&self.t, &self.ctx);
        let g = pin();
        let key = u64::from(key).max(1);
        let skip = u64::from(skip % 4).max(1) + 1;
        let h = ctx.hashes_of(key, 0);
        let mut w = t.write(&g, &h);
        let before = t.len();
        // Half the time with the home shard's count hidden, as a commit
        // that evicts for its own insert does: a victim of the home shard
        // leaves the published count alone until the writer's end, one of
        // another shard is announced first.
        let hide = skip % 2 == 0;
        if hide {
            w.hide_count(h.primary);
        }
        let home = t.shard_of(h.primary);
        let mut victim = None;
        let mut foreign = false;
        let evicted = w.evict_near(
            ctx,
            h.primary,
            usize::from(buckets % 8),
            usize::from(shards % 9),
            |r| {
                let ok = r.key % skip != 0;
                if ok {
                    victim = Some(r.key);
                }
                ok
            },
            || foreign = true,
        );
        if let Some(k) = victim.filter(|_| evicted) {
            let victim_home = t.shard_of(ctx.hash(k));
            assert_eq!(foreign, victim_home != home, "foreign hook for key {k}");
            if hide && !foreign {
                assert_eq!(t.len(), before, "a hidden eviction was published");
            }
        }
        drop(w);
        if evicted {
            let k = victim.expect("a victim was picked");
            assert_ne!(k % skip, 0, "a record the pick passed over was evicted");
            self.model.remove(&k).expect("the victim was modelled");
            assert_eq!(t.len(), before - 1);
        } else {
            assert_eq!(t.len(), before);
        }
    }

    fn sweep(&mut self, advance: u8, budget: u8) {
        let (t, ctx) = (&self.t, &self.ctx);
        let g = pin();
        self.now += u64::from(advance) * 50;
        let now = self.now;
        let s = t.sweep(ctx, &g, now, usize::from(budget));
        assert!(s.examined <= usize::from(budget).max(1) * self.shards.max(1));
        // Whatever was removed had expired.
        self.model.retain(|k, m| {
            let held = t.find(&g, ctx.hash(*k), |r| r.key == *k).is_some();
            if !held {
                assert!(m.exp <= now, "{k} removed before its time");
            }
            held
        });
    }

    fn reclaim(&mut self, inst: u8, budget: u8) {
        let (t, ctx) = (&self.t, &self.ctx);
        let g = pin();
        let inst = u64::from(inst % 4);
        let mut removed = 0;
        for s in 0..t.shard_count() {
            removed += t.reclaim_instance(ctx, &g, s, inst, usize::from(budget)).0;
        }
        let before = self.model.len();
        self.model
            .retain(|k, m| m.inst != inst || t.find(&g, ctx.hash(*k), |r| r.key == *k).is_some());
        assert_eq!(before - self.model.len(), removed);
    }

    /// Per-instance lists agree with the model, and reclaiming them all
    /// empties the table.
    fn finish(self) {
        let (t, ctx) = (&self.t, &self.ctx);
        let g = pin();
        let mut per_inst: BTreeMap<u64, usize> = BTreeMap::new();
        for m in self.model.values() {
            *per_inst.entry(m.inst).or_default() += 1;
        }
        for inst in 0..4 {
            let listed: usize = (0..t.shard_count()).map(|s| t.instance_len(s, inst)).sum();
            assert_eq!(listed, per_inst.get(&inst).copied().unwrap_or(0));
            for s in 0..t.shard_count() {
                t.reclaim_instance(ctx, &g, s, inst, usize::MAX);
            }
        }
        assert!(t.is_empty());
    }
}
