//! Normalising an [`Expr`] into a disjunction of conjunctions over the key
//! (its DNF): each conjunction is one (mask, value) pair of [`Key`]s, so a
//! packet matches it when `key & mask == value`.
//!
//! - a `Range` becomes its minimal prefix cover (a 16-bit range needs at
//!   most 30 prefixes);
//! - `Not` is pushed down to the leaves (De Morgan); a negated test
//!   `!(field & mask == value)` becomes, as in OVN, one conjunction per bit
//!   of the mask, that bit differing from the value's; a negated range the
//!   ranges on either side of it; several negated tests of one field in
//!   one conjunction (`f != {a, b, c}`) are expanded at once, as the
//!   complement of what they test ([`super::complement`]), not
//!   multiplied;
//! - `And` is the cross product of its operands' DNFs, in which
//!   conjunctions that require the same bit both set and clear are dropped;
//! - duplicates are removed, and a conjunction that matches everything
//!   absorbs the rest.
//!
//! The input is hostile: the number of conjunctions ([`MAX_CONJ`]; a
//! classifier's in all, [`MAX_TOTAL_CONJ`]), the work spent on products
//! ([`MAX_WORK`]) and the nesting ([`MAX_DEPTH`]) are bounded, and going
//! over any bound is a [`CompileError`].

use super::complement::{TooBig, complement, excluded_sets};
use super::rule::CompileError;
use crate::expr::Expr;
use crate::key::{Field, Key};

/// Most conjunctions one rule may expand to (its DNF or any part of it).
pub const MAX_CONJ: usize = 65_536;
/// Most conjunctions a classifier may hold in all, its rules' together
/// (and a compiled policy in all, its stages' classifiers together): about
/// 17 times the 121,152 entries of `bench policy classify`'s 100,000
/// rules, and 0.8 to 2 GiB of classifier by the shapes measured
/// (docs/firewall.md, "The compiled classifier"). Without it, a policy
/// file of a few kilobytes (ACLs each near [`MAX_CONJ`]) could ask for
/// tens of gigabytes.
pub const MAX_TOTAL_CONJ: usize = 1 << 21;
/// Most pairs of conjunctions one rule's products may combine.
pub const MAX_WORK: u64 = 1 << 20;
/// Deepest nesting of an expression.
pub const MAX_DEPTH: usize = 200;

/// One conjunction: the packets with `key & mask == value`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Conj {
    /// The bits looked at.
    pub mask: Key,
    /// Their required values (no bit outside `mask`).
    pub value: Key,
}

impl Conj {
    /// The conjunction that matches every key.
    pub const ANY: Conj = Conj {
        mask: Key { w: [0; 8] },
        value: Key { w: [0; 8] },
    };

    /// `field & mask == value` alone (`value` within `mask`).
    pub fn field(field: Field, mask: u128, value: u128) -> Conj {
        let mut c = Conj::ANY;
        c.mask.set(field, mask);
        c.value.set(field, value & mask);
        c
    }

    /// Both at once, or `None` when they contradict each other.
    pub fn and(&self, other: &Conj) -> Option<Conj> {
        let mut out = Conj::ANY;
        let mut clash = 0u64;
        for i in 0..8 {
            clash |= (self.value.w[i] ^ other.value.w[i]) & self.mask.w[i] & other.mask.w[i];
            out.mask.w[i] = self.mask.w[i] | other.mask.w[i];
            out.value.w[i] = self.value.w[i] | other.value.w[i];
        }
        (clash == 0).then_some(out)
    }

    /// Whether `key` satisfies it.
    #[inline]
    pub fn matches(&self, key: &Key) -> bool {
        key.matches(&self.mask, &self.value)
    }

    /// Whether every key `other` matches, `self` matches too.
    pub fn covers(&self, other: &Conj) -> bool {
        (0..8).all(|i| {
            self.mask.w[i] & !other.mask.w[i] == 0
                && other.value.w[i] & self.mask.w[i] == self.value.w[i]
        })
    }

    /// Whether it matches every key.
    pub fn is_any(&self) -> bool {
        self.mask.w == [0; 8]
    }
}

/// The DNF of `expr`: the packets it matches are those that match at least
/// one of the conjunctions (none: it matches nothing).
pub fn normalise(expr: &Expr) -> Result<Vec<Conj>, CompileError> {
    let mut n = Normaliser { work: 0 };
    let mut out = n.dnf(expr, false, 0)?;
    n.tidy(&mut out);
    Ok(out)
}

struct Normaliser {
    work: u64,
}

impl Normaliser {
    fn dnf(&mut self, e: &Expr, neg: bool, depth: usize) -> Result<Vec<Conj>, CompileError> {
        if depth > MAX_DEPTH {
            return Err(CompileError::new(format!(
                "expression nested deeper than {MAX_DEPTH}"
            )));
        }
        Ok(match (e, neg) {
            (Expr::True, false) | (Expr::False, true) => vec![Conj::ANY],
            (Expr::True, true) | (Expr::False, false) => Vec::new(),
            (Expr::Test { field, value, mask }, _) => test(*field, *value, *mask, neg),
            (Expr::Range { field, lo, hi }, _) => range(*field, *lo, *hi, neg),
            (Expr::Not(x), _) => self.dnf(x, !neg, depth + 1)?,
            (Expr::And(xs), false) | (Expr::Or(xs), true) => self.product(xs, neg, depth)?,
            (Expr::Or(xs), false) | (Expr::And(xs), true) => {
                let mut out = Vec::new();
                for x in xs {
                    out.extend(self.dnf(x, neg, depth + 1)?);
                    check_len(out.len())?;
                }
                out
            }
        })
    }

    /// The conjunction of `xs` (each negated if `neg`) as a DNF.
    fn product(&mut self, xs: &[Expr], neg: bool, depth: usize) -> Result<Vec<Conj>, CompileError> {
        // Operands that are conjunctions themselves join this one, so that
        // `!(a == x || (a == y || a == z))` finds its set.
        let mut flat = Vec::with_capacity(xs.len());
        flatten(xs, neg, depth, &mut flat)?;
        let (sets, rest) = excluded_sets(&flat, neg);
        let mut acc = vec![Conj::ANY];
        for (field, mut tests) in sets {
            let budget = MAX_WORK.saturating_sub(self.work);
            let d = match complement(&mut tests, field.all_ones(), MAX_CONJ, budget) {
                Ok(pairs) => pairs
                    .into_iter()
                    .map(|(v, m)| Conj::field(field, m, v))
                    .collect(),
                Err(TooBig::Pairs) => return Err(too_many()),
                Err(TooBig::Work) => return Err(too_costly()),
            };
            acc = self.times(acc, d)?;
            if acc.is_empty() {
                return Ok(acc);
            }
        }
        for x in rest {
            let d = self.dnf(x, neg, depth + 1)?;
            acc = self.times(acc, d)?;

            if acc.is_empty() {
                break;
            }
        }
        Ok(acc)
    }

    /// `acc && d`, both DNFs.
    fn times(&mut self, acc: Vec<Conj>, mut d: Vec<Conj>) -> Result<Vec<Conj>, CompileError> {
        self.tidy(&mut d);
        self.work += (acc.len() as u64).saturating_mul(d.len() as u64);
        if self.work > MAX_WORK {
            return Err(too_costly());
        }
        let mut next = Vec::with_capacity(acc.len().max(d.len()));
        for a in &acc {
            for b in &d {
                if let Some(c) = a.and(b) {
                    next.push(c);
                }
            }
            check_len(next.len())?;
        }
        self.tidy(&mut next);
        Ok(next)
    }
}

/// `xs` (each negated if `neg`), with the operands of nested conjunctions
/// in place of them, into `out`.
fn flatten<'e>(
    xs: &'e [Expr],
    neg: bool,
    depth: usize,
    out: &mut Vec<&'e Expr>,
) -> Result<(), CompileError> {
    if depth > MAX_DEPTH {
        return Err(CompileError::new(format!(
            "expression nested deeper than {MAX_DEPTH}"
        )));
    }
    for x in xs {
        match (x, neg) {
            (Expr::And(ys), false) | (Expr::Or(ys), true) => flatten(ys, neg, depth + 1, out)?,
            _ => out.push(x),
        }
    }
    Ok(())
}

impl Normaliser {
    /// Removes duplicates, and conjunctions that a more general one of the
    /// list covers (when that check fits in the work budget: it only saves
    /// entries, it changes no result).
    fn tidy(&mut self, v: &mut Vec<Conj>) {
        if v.iter().any(Conj::is_any) {
            v.clear();
            v.push(Conj::ANY);
            return;
        }
        v.sort_unstable_by_key(|c| (c.mask.w, c.value.w));
        v.dedup();
        let cost = (v.len() as u64).pow(2) / 8;
        if v.len() < 2 || self.work + cost > MAX_WORK {
            return;
        }
        self.work += cost;
        v.sort_by_key(|c| c.mask.w.iter().map(|w| w.count_ones()).sum::<u32>());
        let mut kept: Vec<Conj> = Vec::with_capacity(v.len());
        for c in v.drain(..) {
            if !kept.iter().any(|k| k.covers(&c)) {
                kept.push(c);
            }
        }
        *v = kept;
    }
}

fn check_len(n: usize) -> Result<(), CompileError> {
    if n > MAX_CONJ {
        return Err(too_many());
    }
    Ok(())
}

fn too_many() -> CompileError {
    CompileError::new(format!(
        "expression expands to more than {MAX_CONJ} conjunctions"
    ))
}

fn too_costly() -> CompileError {
    CompileError::new(format!(
        "expression too costly to expand (over {MAX_WORK} combinations)"
    ))
}

/// `field & mask == value`, or its negation: one conjunction per bit of the
/// mask, that bit differing.
fn test(field: Field, value: u128, mask: u128, neg: bool) -> Vec<Conj> {
    let m = mask & field.all_ones();
    // Bits of the value outside the mask (or the field) never compare
    // equal: the test is false.
    let never = value & !m != 0;
    match (never, neg) {
        (true, false) => Vec::new(),
        (true, true) => vec![Conj::ANY],
        (false, false) => vec![Conj::field(field, m, value)],
        (false, true) => (0..128)
            .map(|b| 1u128 << b)
            .filter(|bit| m & bit != 0)
            .map(|bit| Conj::field(field, bit, !value & bit))
            .collect(),
    }
}

/// `lo <= field <= hi`, or its negation, as prefixes.
fn range(field: Field, lo: u128, hi: u128, neg: bool) -> Vec<Conj> {
    let max = field.all_ones();
    let hi = hi.min(max);
    let mut out = Vec::new();
    let mut push = |lo, hi| {
        for (v, m) in prefix_cover(lo, hi, field.width()) {
            out.push(Conj::field(field, m, v));
        }
    };
    if !neg {
        if lo <= hi {
            push(lo, hi);
        }
    } else if lo > hi {
        push(0, max);
    } else {
        if lo > 0 {
            push(0, lo - 1);
        }
        if hi < max {
            push(hi + 1, max);
        }
    }
    out
}

/// The low `k` bits set.
fn low_ones(k: u32) -> u128 {
    if k >= 128 {
        u128::MAX
    } else {
        (1u128 << k) - 1
    }
}

/// The fewest (value, mask) prefixes of a `width`-bit field that cover
/// exactly `lo..=hi` (`lo <= hi < 2^width`): at most `2 * width - 2`.
pub fn prefix_cover(mut lo: u128, hi: u128, width: u32) -> Vec<(u128, u128)> {
    let all = low_ones(width);
    let mut out = Vec::new();
    loop {
        let span = hi - lo;
        let mut k = if lo == 0 {
            width
        } else {
            lo.trailing_zeros().min(width)
        };
        while low_ones(k) > span {
            k -= 1;
        }
        out.push((lo, all & !low_ones(k)));
        if span == low_ones(k) {
            return out;
        }
        lo += low_ones(k) + 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key_with(field: Field, v: u128) -> Key {
        let mut k = Key::default();
        k.set(field, v);
        k
    }

    fn covers(conjs: &[Conj], key: &Key) -> bool {
        conjs.iter().any(|c| c.matches(key))
    }

    #[test]
    fn port_ranges_are_minimal_prefix_covers() {
        assert_eq!(prefix_cover(0, 65535, 16), vec![(0, 0)]);
        assert_eq!(prefix_cover(80, 80, 16), vec![(80, 0xffff)]);
        assert_eq!(prefix_cover(1024, 65535, 16).len(), 6);
        assert_eq!(prefix_cover(1, 65534, 16).len(), 30);
        assert_eq!(prefix_cover(0, u128::MAX, 128), vec![(0, 0)]);
        assert_eq!(prefix_cover(1, u128::MAX - 1, 128).len(), 254);
        for (lo, hi) in [(0, 0), (3, 17), (1000, 1999), (1, 65534), (65535, 65535)] {
            let d = normalise(&Expr::Range {
                field: Field::L4Dst,
                lo,
                hi,
            })
            .unwrap();
            for p in (0..=65535u128)
                .step_by(7)
                .chain([lo, hi, lo.saturating_sub(1), hi + 1])
            {
                let k = key_with(Field::L4Dst, p);
                assert_eq!(covers(&d, &k), lo <= p && p <= hi, "{lo}..={hi} at {p}");
            }
        }
    }

    #[test]
    fn negated_range_is_the_ranges_around_it() {
        let e = Expr::Not(Box::new(Expr::Range {
            field: Field::L4Dst,
            lo: 1024,
            hi: 2047,
        }));
        let d = normalise(&e).unwrap();
        assert_eq!(d.len(), 1 + 5);
        for p in [0, 1023, 1024, 2047, 2048, 65535] {
            assert_eq!(
                covers(&d, &key_with(Field::L4Dst, p)),
                !(1024..=2047).contains(&p)
            );
        }
        let empty = Expr::Range {
            field: Field::L4Dst,
            lo: 9,
            hi: 3,
        };
        assert!(normalise(&empty).unwrap().is_empty());
        assert_eq!(
            normalise(&Expr::Not(Box::new(empty))).unwrap(),
            vec![Conj::ANY]
        );
    }

    #[test]
    fn negated_test_is_one_conjunction_per_mask_bit() {
        let e = Expr::Not(Box::new(Expr::masked(
            Field::IpSrc,
            0x0a00_0000,
            0xff00_0000,
        )));
        let d = normalise(&e).unwrap();
        assert_eq!(d.len(), 8);
        assert!(d.iter().all(|c| c.mask.get(Field::IpSrc).count_ones() == 1));
        assert!(!covers(&d, &key_with(Field::IpSrc, 0x0a01_0203)));
        assert!(covers(&d, &key_with(Field::IpSrc, 0x0b01_0203)));
        // A value outside its mask never matches; its negation always does.
        let never = Expr::Test {
            field: Field::L4Src,
            value: 3,
            mask: 1,
        };
        assert!(normalise(&never).unwrap().is_empty());
        assert_eq!(
            normalise(&Expr::Not(Box::new(never))).unwrap(),
            vec![Conj::ANY]
        );
    }

    #[test]
    fn and_or_not_follow_de_morgan_and_drop_contradictions() {
        let tcp = Expr::flags(crate::key::flag::TCP);
        let p80 = Expr::eq(Field::L4Dst, 80);
        let p443 = Expr::eq(Field::L4Dst, 443);
        let e = Expr::And(vec![tcp.clone(), Expr::Or(vec![p80.clone(), p443.clone()])]);
        assert_eq!(normalise(&e).unwrap().len(), 2);
        let clash = Expr::And(vec![p80.clone(), p443.clone()]);
        assert!(normalise(&clash).unwrap().is_empty());
        // !(a || b) == !a && !b: 16 + 16 single bits, pairs that clash gone.
        let nor = Expr::Not(Box::new(Expr::Or(vec![p80.clone(), p443])));
        let d = normalise(&nor).unwrap();
        assert!(d.len() <= 16 * 16 && !d.is_empty());
        for p in [0u128, 80, 443, 444, 65535] {
            let k = key_with(Field::L4Dst, p);
            assert_eq!(covers(&d, &k), nor.eval(&k), "{p}");
        }
        assert_eq!(normalise(&Expr::And(vec![])).unwrap(), vec![Conj::ANY]);
        assert!(normalise(&Expr::Or(vec![])).unwrap().is_empty());
        assert_eq!(
            normalise(&Expr::Or(vec![p80, Expr::True])).unwrap(),
            vec![Conj::ANY]
        );
    }

    #[test]
    fn expansion_is_bounded() {
        // (a1 || b1) && (a2 || b2) && ...: 2^40 conjunctions.
        let parts = (0..40)
            .map(|i| {
                let f = Field::ALL[i % 14 + 2];
                Expr::Or(vec![
                    Expr::masked(f, 0, 1 << (i / 14)),
                    Expr::masked(f, 2, 2),
                ])
            })
            .collect();
        assert!(normalise(&Expr::And(parts)).is_err());
        let mut deep = Expr::True;
        for _ in 0..10_000 {
            deep = Expr::Not(Box::new(deep));
        }
        assert!(normalise(&deep).is_err());
        // Drop it without a deep recursion either.
        let mut cur = deep;
        while let Expr::Not(inner) = cur {
            cur = *inner;
        }
    }

    /// `covers` is exact: a conjunction covers another when its mask is
    /// within the other's and their values agree under it; and tidying
    /// keeps the general one of two where one covers the other. (Mutation
    /// round 46: `covers` never true, or with either test turned, passed:
    /// it only saves entries, and no test counted them.)
    #[test]
    fn a_conjunction_covers_exactly_those_it_is_more_general_than() {
        let p80 = Conj::field(Field::L4Dst, 0xffff, 80);
        let p81 = Conj::field(Field::L4Dst, 0xffff, 81);
        let net = Conj::field(Field::IpSrc, 0xff00_0000, 0x0a00_0000);
        let other_net = Conj::field(Field::IpSrc, 0xff00_0000, 0x0b00_0000);
        let host = Conj::field(Field::IpSrc, 0xffff_ffff, 0x0a01_0203);
        let p80_host = p80.and(&host).unwrap();
        for (a, b, want) in [
            (Conj::ANY, p80, true),
            (p80, Conj::ANY, false),
            (p80, p80, true),
            (p80, p80_host, true),
            (p80_host, p80, false),
            (p80, p81, false),
            (net, host, true),
            (host, net, false),
            (other_net, host, false),
            (net, p80_host, true),
            (net, p80, false),
        ] {
            assert_eq!(a.covers(&b), want, "{a:?} covers {b:?}");
        }
        let port = Expr::eq(Field::L4Dst, 80);
        let e = Expr::Or(vec![
            Expr::And(vec![port.clone(), Expr::eq(Field::IpSrc, 0x0a01_0203)]),
            port,
        ]);
        assert_eq!(normalise(&e).unwrap(), vec![p80]);
        let e = Expr::Or(vec![
            Expr::eq(Field::IpSrc, 0x0a01_0203),
            Expr::masked(Field::IpSrc, 0x0a00_0000, 0xff00_0000),
        ]);
        assert_eq!(normalise(&e).unwrap(), vec![net]);
        // Three, one covering another; and four hundred hosts of a
        // network beside it (400²/8 comparisons, well in the budget).
        let p443 = Expr::eq(Field::L4Dst, 443);
        let e = Expr::Or(vec![
            Expr::eq(Field::L4Dst, 80),
            Expr::And(vec![
                Expr::eq(Field::L4Dst, 80),
                Expr::eq(Field::IpSrc, 0x0a01_0203),
            ]),
            p443,
        ]);
        let p443 = Conj::field(Field::L4Dst, 0xffff, 443);
        assert_eq!(normalise(&e).unwrap(), vec![p80, p443]);
        let mut hosts: Vec<Expr> = (1..=400)
            .map(|i| Expr::eq(Field::IpSrc, 0x0a00_0000 + i))
            .collect();
        hosts.push(Expr::masked(Field::IpSrc, 0x0a00_0000, 0xff00_0000));
        assert_eq!(normalise(&Expr::Or(hosts)).unwrap(), vec![net]);
    }

    /// A match that takes everything is one conjunction, `ANY`, even
    /// where its other operands are too many for tidying's pairwise
    /// comparisons. (Mutation round 46: with `is_any` never true the
    /// comparisons still found `ANY` covering the rest in every test.)
    #[test]
    fn anything_absorbs_the_rest_however_many() {
        let set = |f, n: u128| Expr::Or((1..=n).map(|v| Expr::eq(f, v)).collect());
        let product = Expr::And(vec![set(Field::IpSrc, 64), set(Field::L4Dst, 64)]);
        assert_eq!(normalise(&product).unwrap().len(), 4096);
        let e = Expr::Or(vec![product, Expr::True]);
        assert_eq!(normalise(&e).unwrap(), vec![Conj::ANY]);
    }

    /// Nesting is bounded at [`MAX_DEPTH`] whichever operator nests: an
    /// expression exactly that deep is expanded, one a level deeper is
    /// refused. (Mutation round 46: the bound taken in by one, or depth
    /// not counted under `||` or under a conjunction's operands, passed
    /// the test of 10,000 negations alone.)
    #[test]
    fn nesting_is_bounded_at_its_depth_by_every_operator() {
        type Wrap = fn(Expr, usize) -> Expr;
        let shapes: [(&str, Wrap); 3] = [
            ("!", |e, _| Expr::Not(Box::new(e))),
            ("||", |e, _| Expr::Or(vec![e, Expr::eq(Field::L4Src, 1)])),
            ("&& and ||", |e, i| match i % 2 {
                0 => Expr::And(vec![e, Expr::eq(Field::L4Src, 1)]),
                _ => Expr::Or(vec![e, Expr::eq(Field::IpSrc, 1)]),
            }),
        ];
        for (name, wrap) in shapes {
            let nest = |levels: usize| (0..levels).fold(Expr::eq(Field::L4Dst, 80), wrap);
            assert!(normalise(&nest(MAX_DEPTH)).is_ok(), "{name}");
            let e = normalise(&nest(MAX_DEPTH + 1)).unwrap_err();
            assert!(e.message.contains("nested deeper"), "{name}: {e}");
        }
        // A conjunction's operands that are conjunctions join it: its own
        // nesting counts its operators, the outermost at depth 0, so one
        // level more goes in.
        let ands = |levels: usize| {
            (0..levels).fold(Expr::eq(Field::L4Dst, 80), |e, _| {
                Expr::And(vec![e, Expr::eq(Field::L4Src, 1)])
            })
        };
        assert!(normalise(&ands(MAX_DEPTH + 1)).is_ok());
        let e = normalise(&ands(MAX_DEPTH + 2)).unwrap_err();
        assert!(e.message.contains("nested deeper"), "{e}");
    }

    /// The work bound counts every pair a product combines and every pair
    /// tidying compares: a product that brings it to [`MAX_WORK`] exactly
    /// is made, one a combination further is refused as too costly, before
    /// any of it is made (not for its size). 344 values of one field
    /// against 1,793 of it: tidying the first, 344²/8 comparisons; its
    /// product with `ANY`, 344 pairs; tidying that, 344²/8; tidying the
    /// second, 1,793²/8 (floored); the product, 344 × 1,793: 2^20.
    /// (Mutation round 46: the check with `==` let a costlier product be
    /// made until its size was refused; with `>=`, the bound taken in.)
    #[test]
    fn the_work_bound_is_exact_and_comes_before_the_size() {
        let set = |n: u128| Expr::Or((1..=n).map(|v| Expr::eq(Field::IpSrc, v)).collect());
        let at = Expr::And(vec![set(344), set(1793)]);
        assert_eq!(normalise(&at).unwrap().len(), 344);
        let over = Expr::And(vec![set(344), set(1794)]);
        let e = normalise(&over).unwrap_err();
        assert!(e.message.contains("too costly"), "{e}");
        let far = Expr::And(vec![
            set(1100),
            Expr::Or((1..=1000).map(|v| Expr::eq(Field::L4Dst, v)).collect()),
        ]);
        let e = normalise(&far).unwrap_err();
        assert!(e.message.contains("too costly"), "{e}");
        // Tidying that would go over the budget is skipped and spends
        // none of it: 4,096 conjunctions (4,096²/8 comparisons, twice
        // the budget) are combined with a third operand all the same.
        let set = |f, n: u128| Expr::Or((1..=n).map(|v| Expr::eq(f, v)).collect());
        let e = Expr::And(vec![
            set(Field::IpSrc, 64),
            set(Field::L4Dst, 64),
            Expr::eq(Field::L4Src, 53),
        ]);
        assert_eq!(normalise(&e).unwrap().len(), 4096);
        // The same of an operand's own tidying, where nothing was spent
        // before it: 3,000 values (3,000²/8 comparisons, over the budget
        // alone) combined with one more test.
        let e = Expr::And(vec![set(Field::IpSrc, 3000), Expr::eq(Field::L4Dst, 1)]);
        assert_eq!(normalise(&e).unwrap().len(), 3000);
    }

    /// An expansion may hold [`MAX_CONJ`] conjunctions and not one more,
    /// however they come: a disjunction one at a time, or a product a
    /// row of them at a time past the bound. (Mutation round 46: no test
    /// met the bound before the work bound.)
    #[test]
    fn the_conjunction_bound_is_exact_however_they_come() {
        let set = |f, n: u128| Expr::Or((1..=n).map(|v| Expr::eq(f, v)).collect());
        let at = set(Field::IpSrc, MAX_CONJ as u128);
        assert_eq!(normalise(&at).unwrap().len(), MAX_CONJ);
        let over = set(Field::IpSrc, MAX_CONJ as u128 + 1);
        let e = normalise(&over).unwrap_err();
        assert!(e.message.contains("more than 65536 conjunctions"), "{e}");
        // 300 × 300 = 90,000, in rows of 300 that pass 65,536 at 65,700.
        let rows = Expr::And(vec![set(Field::IpSrc, 300), set(Field::L4Dst, 300)]);
        let e = normalise(&rows).unwrap_err();
        assert!(e.message.contains("conjunctions"), "{e}");
    }

    #[test]
    fn a_set_of_values_kept_out_expands_to_its_complement() {
        // ip6.dst != {ff01::2, ff02::2, ff05::2}, written both ways.
        let addrs: Vec<u128> = [0xff01u128, 0xff02, 0xff05]
            .iter()
            .map(|h| (h << 112) | 2)
            .collect();
        let eqs: Vec<Expr> = addrs.iter().map(|a| Expr::eq(Field::IpDst, *a)).collect();
        let nots = Expr::And(eqs.iter().map(|e| Expr::Not(Box::new(e.clone()))).collect());
        let not_any = Expr::Not(Box::new(Expr::Or(eqs.clone())));
        // Nested, as the module's `!(a == x || (a == y || a == z))`: the
        // operands of the inner disjunction join the outer one's set.
        let nested_or = Expr::Not(Box::new(Expr::Or(vec![
            eqs[0].clone(),
            Expr::Or(eqs[1..].to_vec()),
        ])));
        let not = |e: &Expr| Expr::Not(Box::new(e.clone()));
        let nested_and = Expr::And(vec![
            not(&eqs[0]),
            Expr::And(vec![not(&eqs[1]), not(&eqs[2])]),
        ]);
        let mut probes: Vec<u128> = addrs.clone();
        for a in &addrs {
            probes.extend((0..128).map(|b| a ^ (1u128 << b)));
        }
        probes.extend([0, u128::MAX, 0xff03 << 112 | 2, 0xff07 << 112 | 2]);
        let flat = normalise(&nots).unwrap();
        for e in [&nested_or, &nested_and] {
            assert_eq!(normalise(e).unwrap(), flat, "{e:?}");
        }
        for e in [nots, not_any, nested_or, nested_and] {
            let d = normalise(&e).unwrap();
            // One conjunction a bit the three share, and the two values
            // of the three bits where they differ that none takes.
            assert!(d.len() <= 131, "{}", d.len());
            for p in &probes {
                let k = key_with(Field::IpDst, *p);
                assert_eq!(covers(&d, &k), !addrs.contains(p), "{p:#x}");
            }
        }
        // Values with bits outside the mask never match: they keep
        // nothing out; a mask of 0 keeps every key out.
        let never = Expr::And(vec![
            Expr::Not(Box::new(Expr::masked(Field::L4Dst, 0, 0xff))),
            Expr::Not(Box::new(Expr::Test {
                field: Field::L4Dst,
                value: 0x100,
                mask: 0xff,
            })),
        ]);
        let d = normalise(&never).unwrap();
        assert!(!covers(&d, &key_with(Field::L4Dst, 0x200)));
        assert!(covers(&d, &key_with(Field::L4Dst, 0x201)));
        let none = Expr::And(vec![
            Expr::Not(Box::new(Expr::masked(Field::L4Dst, 0, 0))),
            Expr::Not(Box::new(Expr::masked(Field::L4Dst, 0, 0))),
        ]);
        assert!(normalise(&none).unwrap().is_empty());
        // Many values that share bits are cheap: 4,096 that differ in 12
        // bits keep out one conjunction for each of the other 116 bits.
        let dense = Expr::Not(Box::new(Expr::Or(
            (0..4096u128)
                .map(|v| Expr::eq(Field::IpDst, v << 64))
                .collect(),
        )));
        assert_eq!(normalise(&dense).unwrap().len(), 116);
        // Hostile: as many scattered over the bits are bounded like any
        // other expansion.
        let scattered = Expr::Not(Box::new(Expr::Or(
            (1..4096u128)
                .map(|v| {
                    Expr::eq(
                        Field::IpDst,
                        v.wrapping_mul(0x9e37_79b9_7f4a_7c15_f39c_c060_5ced_c835),
                    )
                })
                .collect(),
        )));
        let e = normalise(&scattered).unwrap_err();
        assert!(e.message.contains("conjunctions"), "{e}");
        // As many masks as operands (50,000 negated tests, each of its own
        // mask): grouped through a map, not compared pairwise, and their
        // complement is small. A key is out when its bit 0 is set (every
        // test looks at it for 0), or when its bits 64..79 hold every
        // power of two below 50,000 (each test then finds a bit it wants
        // clear set).
        let masks = Expr::And(
            (1..50_000u128)
                .map(|m| Expr::Not(Box::new(Expr::masked(Field::IpDst, 0, m << 64 | 1))))
                .collect(),
        );
        let d = normalise(&masks).unwrap();
        assert!(d.len() <= 4, "{}", d.len());
        for (x, out) in [
            (1, true),
            (0xffff << 64, true),
            (0x7fff << 64, false),
            (0xbfff << 64, false),
            (0, false),
        ] {
            assert_eq!(covers(&d, &key_with(Field::IpDst, x)), out, "{x:#x}");
        }
    }
}
