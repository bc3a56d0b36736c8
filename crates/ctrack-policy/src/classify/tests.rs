//! Differential tests of the classifier against [`naive`], on generated
//! rule sets and keys, for builds and for sequences of inserts and
//! removals.

use proptest::prelude::*;

use super::r#gen::{self, Rng};
use super::{Classifier, MAX_TOTAL_CONJ, Rank, RuleId, naive, normalise};
use crate::expr::Expr;
use crate::key::{Field, Key, flag};

const ADDRS: [u128; 6] = [
    0x0a00_0000,
    0x0a00_0001,
    0x0a00_0100,
    0x0a01_0000,
    0xc0a8_0101,
    0,
];
/// IPv6 addresses: two share a /48, one a /32 with them, one elsewhere.
const ADDRS6: [u128; 4] = [
    0x2001_0db8_0001_0000_0000_0000_0000_0001,
    0x2001_0db8_0001_8000_0000_0000_0000_0002,
    0x2001_0db8_ff00_0000_0000_0000_0000_0001,
    0xfd00_0000_0000_0000_0000_0000_0000_0001,
];
const PORTS: [u128; 8] = [0, 22, 80, 443, 1023, 1024, 8080, 65535];
const FLAGS: [u16; 7] = [
    flag::IP,
    flag::IP | flag::IP4,
    flag::IP | flag::IP4 | flag::TCP,
    flag::IP | flag::IP4 | flag::UDP,
    flag::IP | flag::IP6 | flag::TCP,
    flag::IP | flag::IP4 | flag::ICMP | flag::ICMP4,
    flag::IP | flag::IP4 | flag::TCP | flag::FRAG,
];

fn addr_field() -> impl Strategy<Value = Field> {
    prop_oneof![Just(Field::IpSrc), Just(Field::IpDst)]
}

fn port_field() -> impl Strategy<Value = Field> {
    prop_oneof![Just(Field::L4Src), Just(Field::L4Dst)]
}

fn leaf() -> impl Strategy<Value = Expr> {
    prop_oneof![
        3 => (0..FLAGS.len()).prop_map(|i| Expr::flags(FLAGS[i])),
        3 => (addr_field(), 0..ADDRS.len(), 0..=32u32).prop_map(|(f, a, len)| {
            let mask = (0xffff_ffffu128 << (32 - len)) & 0xffff_ffff;
            Expr::masked(f, ADDRS[a], mask)
        }),
        3 => (port_field(), 0..PORTS.len()).prop_map(|(f, p)| Expr::eq(f, PORTS[p])),
        2 => (port_field(), 0..PORTS.len(), 0..PORTS.len())
            .prop_map(|(f, a, b)| Expr::Range { field: f, lo: PORTS[a], hi: PORTS[b] }),
        1 => (addr_field(), 0..ADDRS.len(), 0..ADDRS.len())
            .prop_map(|(f, a, b)| Expr::Range { field: f, lo: ADDRS[a], hi: ADDRS[b] }),
        2 => (prop_oneof![Just(Field::Inport), Just(Field::Outport)], 0..4u128)
            .prop_map(|(f, v)| Expr::eq(f, v)),
        // Raw tests, some with values outside their mask.
        2 => (prop_oneof![Just(Field::IpProto), Just(Field::IcmpType), Just(Field::TcpFlags)], any::<u8>(), any::<u8>())
            .prop_map(|(f, v, m)| Expr::Test { field: f, value: u128::from(v & 0x13), mask: u128::from(m & 0x1f) }),
        // Addresses with their version's flag, as the compiler writes
        // them: the tests the classifier indexes by address.
        3 => (addr_field(), 0..ADDRS.len(), 8..=32u32).prop_map(|(f, a, len)| {
            let mask = (0xffff_ffffu128 << (32 - len)) & 0xffff_ffff;
            Expr::And(vec![Expr::flags(flag::IP | flag::IP4), Expr::masked(f, ADDRS[a], mask)])
        }),
        2 => (addr_field(), 0..ADDRS6.len(), 16..=128u32).prop_map(|(f, a, len)| {
            let mask = u128::MAX << (128 - len);
            Expr::And(vec![Expr::flags(flag::IP | flag::IP6), Expr::masked(f, ADDRS6[a], mask)])
        }),
        1 => Just(Expr::True),
        1 => Just(Expr::False),
    ]
}

fn expr() -> impl Strategy<Value = Expr> {
    leaf().prop_recursive(3, 20, 3, |inner| {
        prop_oneof![
            3 => prop::collection::vec(inner.clone(), 0..4).prop_map(Expr::And),
            2 => prop::collection::vec(inner.clone(), 0..3).prop_map(Expr::Or),
            1 => inner.prop_map(|x| Expr::Not(Box::new(x))),
        ]
    })
}

fn rule_set() -> impl Strategy<Value = Vec<(RuleId, Rank, Expr)>> {
    prop::collection::vec((0..6u64, expr()), 1..24).prop_map(|v| {
        v.into_iter()
            .enumerate()
            .map(|(i, (rank, e))| ((i as u32).wrapping_mul(2_654_435_761), rank, e))
            .collect()
    })
}

/// A key from the same pools as the rules, with some noise.
fn key() -> impl Strategy<Value = Key> {
    (
        (0..FLAGS.len(), any::<u16>(), any::<bool>()),
        (0..ADDRS.len(), 0..ADDRS.len(), any::<u8>()),
        (0..PORTS.len(), 0..PORTS.len(), any::<u16>()),
        (0..4u128, 0..4u128, any::<[u8; 3]>()),
    )
        .prop_map(|((fl, noise, odd), (s, d, n), (sp, dp, pn), (i, o, raw))| {
            let mut k = Key::default();
            k.set(
                Field::Flags,
                u128::from(if odd { noise } else { FLAGS[fl] }),
            );
            if n & 16 == 0 {
                k.set(Field::IpSrc, ADDRS[s] ^ u128::from(n & 3));
                k.set(Field::IpDst, ADDRS[d]);
            } else {
                k.set(Field::IpSrc, ADDRS6[s % ADDRS6.len()] ^ u128::from(n & 3));
                k.set(Field::IpDst, ADDRS6[d % ADDRS6.len()]);
                if !odd {
                    k.set(Field::Flags, u128::from(flag::IP | flag::IP6 | flag::TCP));
                }
            }
            k.set(Field::L4Src, PORTS[sp]);
            k.set(
                Field::L4Dst,
                if n & 8 == 0 {
                    PORTS[dp]
                } else {
                    u128::from(pn)
                },
            );
            k.set(Field::Inport, i);
            k.set(Field::Outport, o);
            k.set(Field::IpProto, u128::from(raw[0]));
            k.set(Field::IcmpType, u128::from(raw[1]));
            k.set(Field::TcpFlags, u128::from(raw[2]));
            k
        })
}

/// `base` made to satisfy one conjunction of one of the rules.
fn hit(rules: &[(RuleId, Rank, Expr)], pick: usize, base: &Key) -> Key {
    let mut k = *base;
    let Some((_, _, e)) = rules.get(pick % rules.len().max(1)) else {
        return k;
    };
    let conjs = normalise(e).unwrap_or_default();
    if let Some(c) = conjs.get(pick / 7 % conjs.len().max(1)) {
        for i in 0..8 {
            k.w[i] = (k.w[i] & !c.mask.w[i]) | c.value.w[i];
        }
    }
    k
}

fn check(
    c: &Classifier,
    rules: &[(RuleId, Rank, Expr)],
    keys: &[Key],
) -> Result<(), TestCaseError> {
    for k in keys {
        prop_assert_eq!(c.classify(k), naive(rules, k), "key {:x?}", k.w);
    }
    Ok(())
}

#[derive(Debug, Clone)]
enum Op {
    Insert(Rank, Expr),
    Remove(usize),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        2 => (0..6u64, expr()).prop_map(|(r, e)| Op::Insert(r, e)),
        1 => any::<usize>().prop_map(Op::Remove),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    #[test]
    fn built_classifier_agrees_with_naive(
        rules in rule_set(),
        keys in prop::collection::vec((key(), any::<usize>(), any::<bool>()), 1..40),
    ) {
        let c = Classifier::build(rules.iter().map(|(i, r, e)| (*i, *r, e)));
        let c = match c {
            Ok(c) => c,
            Err(_) => return Ok(()),
        };
        prop_assert_eq!(c.len(), rules.len());
        let keys: Vec<Key> = keys
            .iter()
            .map(|(k, pick, h)| if *h { hit(&rules, *pick, k) } else { *k })
            .collect();
        check(&c, &rules, &keys)?;
        check(&c.with_bitmaps(), &rules, &keys)?;
        // Buckets that rules share.
        let shared = Classifier::build_limited(8, rules.iter().map(|(i, r, e)| (*i, *r, e)));
        prop_assert!(shared.is_ok());
        if let Ok(shared) = shared {
            check(&shared, &rules, &keys)?;
        }
    }

    #[test]
    fn inserts_and_removals_agree_with_naive(
        ops in prop::collection::vec(op(), 1..40),
        keys in prop::collection::vec((key(), any::<usize>()), 1..16),
    ) {
        let mut c = Classifier::new();
        // The same updates on one that always searches with its bitmaps,
        // and on one whose buckets rules share.
        let mut b = Classifier::new().with_bitmaps();
        let mut shared = Classifier::with_bucket_limit(8);
        let mut rules: Vec<(RuleId, Rank, Expr)> = Vec::new();
        for (n, op) in ops.into_iter().enumerate() {
            match op {
                Op::Insert(rank, e) => {
                    let id = n as RuleId * 3;
                    if c.insert(id, rank, &e).is_ok() {
                        prop_assert!(b.insert(id, rank, &e).is_ok());
                        prop_assert!(shared.insert(id, rank, &e).is_ok());
                        rules.push((id, rank, e));
                    }
                }
                Op::Remove(i) if !rules.is_empty() => {
                    let (id, _, _) = rules.swap_remove(i % rules.len());
                    prop_assert!(c.remove(id) && b.remove(id) && shared.remove(id));
                    prop_assert!(!c.remove(id));
                }
                Op::Remove(_) => prop_assert!(!c.remove(7)),
            }
            prop_assert_eq!(c.len(), rules.len());
            let ks: Vec<Key> = keys.iter().flat_map(|(k, p)| [*k, hit(&rules, *p, k)]).collect();
            check(&c, &rules, &ks)?;
            check(&b, &rules, &ks)?;
            check(&shared, &rules, &ks)?;
        }
        let all: Vec<RuleId> = rules.iter().map(|r| r.0).collect();
        for id in all {
            prop_assert!(c.remove(id));
        }
        prop_assert!(c.is_empty());
        prop_assert_eq!(c.stats().entries, 0);
        prop_assert_eq!(c.stats().tuples, 0);
    }
}

#[test]
fn generated_rule_sets_agree_with_naive() {
    for (n, seed) in [(10, 1), (300, 2), (1500, 3)] {
        let rules = r#gen::rules(n, seed);
        let c = Classifier::build(rules.iter().map(|(i, r, e)| (*i, *r, e))).unwrap();
        let shared =
            Classifier::build_limited(8, rules.iter().map(|(i, r, e)| (*i, *r, e))).unwrap();
        let keys = r#gen::keys(&rules, 1200, seed);
        let hits = keys.iter().filter(|k| naive(&rules, k).is_some()).count();
        assert!(hits >= keys.len() / 2, "{hits} of {} keys hit", keys.len());
        for k in &keys {
            let want = naive(&rules, k);
            assert_eq!(c.classify(k), want, "{n} rules, key {:x?}", k.w);
            assert_eq!(
                shared.classify(k),
                want,
                "{n} rules, shared, key {:x?}",
                k.w
            );
        }
    }
}

#[test]
fn generated_rules_inserted_and_removed_one_by_one() {
    let rules = r#gen::rules(800, 9);
    let mut c = Classifier::build(rules.iter().map(|(i, r, e)| (*i, *r, e))).unwrap();
    let keys = r#gen::keys(&rules, 300, 9);
    let mut rng = Rng::new(4);
    let mut live = rules.clone();
    for round in 0..300 {
        if round % 3 == 2 || live.is_empty() {
            let (id, rank, e) = rules[rng.below(rules.len() as u64) as usize].clone();
            if !c.contains(id) {
                c.insert(id, rank, &e).unwrap();
                live.push((id, rank, e));
            }
        } else {
            let (id, _, _) = live.swap_remove(rng.below(live.len() as u64) as usize);
            assert!(c.remove(id));
        }
        if round % 25 == 0 {
            for k in &keys {
                assert_eq!(c.classify(k), naive(&live, k));
            }
        }
    }
}

/// A control plane that adds and removes rules for ever (one ACL edited
/// again and again) holds the classifier's memory steady: a group emptied
/// by a removal frees its slot, and the next group takes it; a rule's
/// addresses leave the address index with it.
#[test]
fn churn_reuses_the_slots_of_emptied_groups() {
    let base = r#gen::rules(50, 3);
    let mut c = Classifier::build(base.iter().map(|(i, r, e)| (*i, *r, e))).unwrap();
    // Each round's rule in a group of its own (an address of a length no
    // base rule tests, and a port), its address far from the last
    // round's, so that the address index meets new prefixes.
    let addr = |round: u32| u128::from(round.wrapping_mul(0x9e37_79b9) & 0xffff_fff8);
    let rule = |round: u32| {
        Expr::And(vec![
            Expr::flags(flag::IP | flag::IP4),
            Expr::masked(Field::IpSrc, addr(round), 0xffff_fff8),
            Expr::eq(Field::L4Dst, u128::from(round % 7) + 3000),
        ])
    };
    // The memory once the tables have grown to their churn. (Their
    // capacities as hashbrown counts them move with the tombstones a
    // removal leaves, and a map may still double once after that: a
    // few KiB. A slot or an address-index entry kept for every round
    // would be hundreds.)
    let mut settled = 0;
    for round in 0..2000u32 {
        let id = 1_000_000 + round;
        c.insert(id, 9, &rule(round)).unwrap();
        let mut k = Key::default();
        k.set(Field::Flags, u128::from(flag::IP | flag::IP4));
        k.set(Field::IpSrc, addr(round));
        k.set(Field::L4Dst, u128::from(round % 7) + 3000);
        assert_eq!(c.classify(&k).map(|x| x.0), Some(id));
        assert!(c.remove(id));
        if round == 500 {
            settled = c.memory();
        }
    }
    assert!(
        c.memory() <= settled + (16 << 10),
        "{} against {settled}",
        c.memory()
    );
    for k in &r#gen::keys(&base, 100, 3) {
        assert_eq!(c.classify(k), naive(&base, k));
    }
}

#[test]
fn errors_and_edge_cases() {
    let mut c = Classifier::new();
    assert_eq!(c.classify(&Key::default()), None);
    c.insert(1, 5, &Expr::True).unwrap();
    assert!(c.insert(1, 6, &Expr::True).is_err());
    c.insert(2, 5, &Expr::True).unwrap();
    c.insert(3, 0, &Expr::False).unwrap();
    assert_eq!(c.len(), 3);
    // Equal ranks: the lowest id wins.
    assert_eq!(c.classify(&Key::default()), Some((1, 5)));
    assert!(c.remove(1));
    assert_eq!(c.classify(&Key::default()), Some((2, 5)));
    let dup = [(4, 1, Expr::True), (4, 2, Expr::False)];
    assert!(Classifier::build(dup.iter().map(|(i, r, e)| (*i, *r, e))).is_err());
    // Extreme ids and ranks.
    c.insert(u32::MAX, u64::MAX, &Expr::True).unwrap();
    c.insert(0, u64::MAX, &Expr::True).unwrap();
    assert_eq!(c.classify(&Key::default()), Some((0, u64::MAX)));
    let s = c.stats();
    assert_eq!((s.rules, s.entries), (4, 3));
    assert!(c.memory() > 0 && format!("{c:?}").contains("Classifier"));
}

/// A rule of `n` conjunctions: `tcp.dst` one of `n` ports.
fn ports(n: u16) -> Expr {
    Expr::Or(
        (0..n)
            .map(|p| Expr::eq(Field::L4Dst, u128::from(p)))
            .collect(),
    )
}

#[test]
fn the_conjunctions_in_all_are_bounded() {
    let rules = [(1, 9, ports(4)), (2, 8, ports(6)), (3, 7, ports(1))];
    let each = || rules.iter().map(|(i, r, e)| (*i, *r, e));
    // Up to the bound, each rule in.
    let c = Classifier::build_bounded(11, 0, each()).unwrap();
    assert_eq!((c.len(), c.conjunctions()), (3, 11));
    // One over, counting those held elsewhere: refused at the rule that
    // crosses it, which is named.
    let e = Classifier::build_bounded(11, 1, each()).unwrap_err();
    assert_eq!(e.rule, Some(3), "{e}");
    assert_eq!(
        e.message,
        "the ACLs expand to more than 11 conjunctions in all (11 before this one, which adds 1)"
    );
    // The crate's bound.
    let e = Classifier::build_within(MAX_TOTAL_CONJ - 10, each()).unwrap_err();
    assert_eq!(e.rule, Some(3), "{e}");
    assert_eq!(
        Classifier::build_within(MAX_TOTAL_CONJ - 11, each())
            .unwrap()
            .len(),
        3
    );
    // An insert over the bound leaves the classifier as it was.
    let mut c = Classifier::build_bounded(10, 0, each().take(1)).unwrap();
    c.insert(2, 8, &ports(6)).unwrap();
    let mut k = Key::default();
    k.set(Field::L4Dst, 0);
    assert_eq!(c.classify(&k), Some((1, 9)));
    let e = c.insert(3, 10, &ports(1)).unwrap_err();
    assert_eq!(e.rule, Some(3));
    assert_eq!((c.len(), c.conjunctions()), (2, 10));
    assert_eq!(c.classify(&k), Some((1, 9)));
    // Room made by a removal is room again.
    assert!(c.remove(2));
    c.insert(3, 10, &ports(1)).unwrap();
    assert_eq!(c.classify(&k), Some((3, 10)));
    // An error of one rule alone names it too.
    let bad = [(7, 1, Expr::True), (7, 2, Expr::True)];
    let e = Classifier::build(bad.iter().map(|(i, r, e)| (*i, *r, e))).unwrap_err();
    assert_eq!(e.rule, Some(7));
}

#[test]
fn duplicate_entries_overflow_buckets_safely() {
    let e = Expr::And(vec![Expr::flags(flag::TCP), Expr::eq(Field::L4Dst, 80)]);
    let rules: Vec<_> = (0..200u32)
        .map(|i| (i, u64::from(i % 7), e.clone()))
        .collect();
    let c = Classifier::build(rules.iter().map(|(i, r, e)| (*i, *r, e))).unwrap();
    let mut k = Key::default();
    k.set(Field::Flags, u128::from(flag::TCP));
    k.set(Field::L4Dst, 80);
    assert_eq!(c.classify(&k), naive(&rules, &k));
    assert_eq!(c.classify(&k), Some((6, 6)));
}

/// Address pruning, exhaustively on small pools: rules of every prefix
/// length on each direction and version (each with its version's flag, as
/// the compiler writes them; the longest prefix ranks highest, so that a
/// rule pruned by mistake shows), against keys of every pair of addresses
/// nearby, with both versions' flags, either, or neither.
#[test]
fn address_pruning_keeps_every_match() {
    // All lengths; then only those that fix a sub site, so that a tuple
    // holds no coarser entry that would keep it in by its top site.
    for (min4, min6) in [(8, 16), (24, 48)] {
        pruning_case(min4, min6);
    }
}

fn pruning_case(min4: u32, min6: u32) {
    let mut rules = Vec::new();
    let mut id = 0u32;
    for f in [Field::IpDst, Field::IpSrc] {
        for &a in &ADDRS {
            for len in (min4..=32).step_by(4) {
                let mask = (0xffff_ffffu128 << (32 - len)) & 0xffff_ffff;
                let e = Expr::And(vec![
                    Expr::flags(flag::IP | flag::IP4),
                    Expr::masked(f, a, mask),
                ]);
                rules.push((id, u64::from(len), e));
                id += 1;
            }
        }
        for &a in &ADDRS6 {
            for len in (min6..=128).step_by(8) {
                let e = Expr::And(vec![
                    Expr::flags(flag::IP | flag::IP6),
                    Expr::masked(f, a, u128::MAX << (128 - len)),
                ]);
                rules.push((id, u64::from(len), e));
                id += 1;
            }
        }
    }
    let c = Classifier::build(rules.iter().map(|(i, r, e)| (*i, *r, e)))
        .unwrap()
        .with_bitmaps();
    let v4: Vec<u128> = ADDRS
        .iter()
        .flat_map(|a| [*a, a ^ 0x80, a ^ 0x8000, a ^ 0x80_0000])
        .collect();
    let v6: Vec<u128> = ADDRS6
        .iter()
        .flat_map(|a| [*a, a ^ (1 << 72), a ^ (1 << 80), a ^ (1 << 90)])
        .collect();
    let mut checked = 0;
    for flags in [
        flag::IP | flag::IP4,
        flag::IP | flag::IP6,
        flag::IP | flag::IP4 | flag::IP6,
        flag::ARP,
    ] {
        for pool in [&v4, &v6] {
            for &s in pool {
                for &d in pool {
                    let mut k = Key::default();
                    k.set(Field::Flags, u128::from(flags));
                    k.set(Field::IpSrc, s);
                    k.set(Field::IpDst, d);
                    assert_eq!(c.classify(&k), naive(&rules, &k), "key {:x?}", k.w);
                    checked += usize::from(naive(&rules, &k).is_some());
                }
            }
        }
    }
    assert!(checked > 500, "{checked} keys matched");
}

/// A rule whose thousands of entries share one bucket (TCP flags are never
/// hashed), beside rules in the same bucket, in and out again: the
/// bucket's run grows in the arena, moves, and is compacted.
#[test]
fn a_rule_of_thousands_of_entries_in_one_bucket() {
    let many = Expr::Or(
        (0..4096u128)
            .step_by(2)
            .map(|f| Expr::And(vec![Expr::flags(flag::TCP), Expr::eq(Field::TcpFlags, f)]))
            .collect(),
    );
    let few = Expr::And(vec![Expr::flags(flag::TCP), Expr::eq(Field::TcpFlags, 3)]);
    // Buckets of several rules, so that the three share one.
    let mut c = Classifier::with_bucket_limit(8);
    c.insert(1, 1, &few).unwrap();
    c.insert(2, 5, &many).unwrap();
    c.insert(3, 0, &Expr::flags(flag::TCP)).unwrap();
    let key = |f: u128| {
        let mut k = Key::default();
        k.set(Field::Flags, u128::from(flag::TCP));
        k.set(Field::TcpFlags, f);
        k
    };
    assert!(c.stats().longest_bucket >= 2048);
    for _ in 0..3 {
        assert_eq!(c.classify(&key(4094)), Some((2, 5)));
        assert_eq!(c.classify(&key(3)), Some((1, 1)));
        assert_eq!(c.classify(&key(5)), Some((3, 0)));
        assert!(c.remove(2));
        assert_eq!(c.classify(&key(4094)), Some((3, 0)));
        c.insert(2, 5, &many).unwrap();
    }
    assert!(c.remove(2) && c.remove(1) && c.remove(3));
    assert_eq!(c.stats().entries, 0);
}

/// Thousands of rules of one value and as many distinct masks: their
/// relaxed and coarse buckets fill, and each goes to a group of its exact
/// mask, thousands of groups (a fuzz input made 29,737 groups of 32 rules
/// this way). Placing an entry looks at no more than a window of groups,
/// so the compile stays linear in the entries (it scanned every group, a
/// compile quadratic in the entries: seven seconds for that input); and
/// classification still agrees with the naive scan, including for entries
/// placed after the window was full.
#[test]
fn thousands_of_groups_compile_in_linear_time() {
    let prefix = |len: u32| {
        let ones = u128::from(u32::MAX);
        ones & !(ones >> len)
    };
    let mut rules = Vec::new();
    for a in 1..=32u32 {
        for b in 1..=32u32 {
            for e in 1..=16u32 {
                let id = rules.len() as u32;
                let eth = ((1u128 << e) - 1) << (48 - e);
                let expr = Expr::And(vec![
                    Expr::flags(flag::IP | flag::IP4),
                    Expr::masked(Field::IpSrc, 0x0a00_0000, prefix(a)),
                    Expr::masked(Field::IpDst, 0x0a00_0000, prefix(b)),
                    Expr::masked(Field::EthSrc, 0, eth),
                ]);
                rules.push((id, u64::from(id % 7), expr));
            }
        }
    }
    let c = Classifier::build(rules.iter().map(|(i, r, e)| (*i, *r, e))).expect("compiles");
    let entries = c.stats().entries;
    assert!(
        c.stats().tuples > 2 * super::classifier::PLACE_WINDOW,
        "{:?}",
        c.stats()
    );
    assert!(
        c.place_scans <= entries * super::classifier::PLACE_WINDOW,
        "{} groups looked at for {entries} entries",
        c.place_scans
    );
    let mut rng = Rng::new(5);
    for _ in 0..300 {
        let mut k = Key::default();
        k.set(Field::Flags, u128::from(flag::IP | flag::IP4));
        k.set(
            Field::IpSrc,
            0x0a00_0000 ^ u128::from(1u32 << rng.below(32)),
        );
        k.set(
            Field::IpDst,
            0x0a00_0000 ^ u128::from(1u32 << rng.below(32)),
        );
        k.set(Field::EthSrc, u128::from(rng.below(1 << 17)) << 31);
        assert_eq!(c.classify(&k), naive(&rules, &k), "key {:x?}", k.w);
    }
}

/// A rule of many entries that go before another rule's many in one
/// bucket moves those once, not once for each of its own entries (a fuzz
/// input of 516 bytes took 5.7 s, most of it moving them).
#[test]
fn a_rule_before_another_in_a_shared_bucket_moves_it_once() {
    // Negated addresses: one entry per pair of mask bits, single bits
    // that no tuple hashes, so that every entry of both rules shares one
    // bucket.
    let not_both = |a: u128, b: u128| {
        Expr::And(vec![
            Expr::flags(flag::IP | flag::IP4),
            Expr::Not(Box::new(Expr::eq(Field::IpSrc, a))),
            Expr::Not(Box::new(Expr::eq(Field::IpDst, b))),
        ])
    };
    let (low, high) = (not_both(ADDRS[0], ADDRS[1]), not_both(ADDRS[2], ADDRS[3]));
    let mut c = Classifier::with_bucket_limit(8);
    c.insert(1, 0, &low).unwrap();
    let behind = c.stats().entries;
    let before = c.copied();
    c.insert(2, 5, &high).unwrap();
    let ahead = c.stats().entries - behind;
    let moved = c.copied() - before;
    assert!(
        behind >= 1000 && ahead >= 1000,
        "{behind} and {ahead} entries"
    );
    assert_eq!(c.stats().buckets, 1, "{:?}", c.stats());
    // Once each for the entries behind, and the growth of the bucket's
    // room (which copies what is there).
    assert!(
        moved <= 2 * behind + ahead,
        "{moved} candidates moved for {ahead} put before {behind}"
    );
    // And the answers are the linear scan's.
    let rules = [(1, 0, low), (2, 5, high)];
    let mut k = Key::default();
    k.set(Field::Flags, u128::from(flag::IP | flag::IP4));
    for (src, dst) in [
        (ADDRS[0], ADDRS[1]),
        (ADDRS[2], ADDRS[3]),
        (ADDRS[0], ADDRS[3]),
        (ADDRS[4], 7),
        (1, ADDRS[1]),
    ] {
        k.set(Field::IpSrc, src);
        k.set(Field::IpDst, dst);
        assert_eq!(c.classify(&k), naive(&rules, &k), "{src:x} -> {dst:x}");
    }
}

/// A key of IPv4 `flags` from `src` to port `dport`.
fn v4_key(flags: u16, src: u128, dport: u128) -> Key {
    let mut k = Key::default();
    k.set(Field::Flags, u128::from(flags | flag::IP | flag::IP4));
    k.set(Field::IpSrc, src);
    k.set(Field::L4Dst, dport);
    k
}

/// Two rules of one shape that differ on the tuple's first word (a
/// protocol flag tested set in one, clear in the other) are never put
/// in one tuple: a lookup checks that word before it hashes, and would
/// pass the other rule by. (Mutation round 68: a tuple admitting exactly
/// the entries whose first word differs went unseen by every
/// differential test.)
#[test]
fn rules_that_differ_on_the_first_word_keep_tuples_apart() {
    let src = Expr::eq(Field::IpSrc, 0x0a00_0001);
    let mut c = Classifier::new();
    let tcp = Expr::And(vec![
        Expr::flags(flag::IP | flag::IP4 | flag::TCP),
        src.clone(),
    ]);
    let not_tcp = Expr::And(vec![
        Expr::flags(flag::IP | flag::IP4),
        Expr::Not(Box::new(Expr::flags(flag::TCP))),
        src,
    ]);
    c.insert(1, 10, &tcp).unwrap();
    c.insert(2, 20, &not_tcp).unwrap();
    assert_eq!(c.stats().tuples, 2);
    assert_eq!(
        c.classify(&v4_key(flag::UDP, 0x0a00_0001, 53)),
        Some((2, 20))
    );
    assert_eq!(
        c.classify(&v4_key(flag::TCP, 0x0a00_0001, 53)),
        Some((1, 10))
    );
    assert_eq!(c.classify(&v4_key(flag::TCP, 0x0a00_0002, 53)), None);
}

/// An entry goes to a tuple that exists and admits it before one of its
/// own is made, and of those that admit it with room (a bucket holds one
/// rule), to the one that hashes most bits (TupleMerge: fewer tuples, and
/// buckets that tell rules apart). (Mutation round 68: a tuple admitting
/// nothing, and the bits of every tuple counted the same, went unseen:
/// either way the classifier is right, only slower.)
#[test]
fn an_entry_goes_to_the_most_specific_tuple_that_admits_it() {
    let v4 = |more: u16| Expr::flags(flag::IP | flag::IP4 | more);
    let net = |a: u128| Expr::masked(Field::IpSrc, a, 0xffff_ff00);
    let port = |p: u128| Expr::eq(Field::L4Dst, p);
    // A tuple of the source's /20 (the /24 relaxed) and the flags, and a
    // rule that adds a port to another /20: admitted, no second tuple.
    let mut c = Classifier::new();
    c.insert(1, 1, &Expr::And(vec![v4(0), net(0x0a00_0000)]))
        .unwrap();
    c.insert(
        2,
        2,
        &Expr::And(vec![v4(flag::TCP), net(0x0a00_1000), port(80)]),
    )
    .unwrap();
    assert_eq!((c.stats().tuples, c.stats().buckets), (1, 2));
    // First a tuple of the port (18 bits, with its two flags), then one of
    // the /20 (22): a rule both admit with room goes to the second, which
    // it keeps when the second's first rule goes.
    let mut c = Classifier::new();
    c.insert(
        1,
        1,
        &Expr::And(vec![Expr::flags(flag::IP | flag::TCP), port(80)]),
    )
    .unwrap();
    c.insert(2, 2, &Expr::And(vec![v4(0), net(0x0a00_0000)]))
        .unwrap();
    c.insert(
        3,
        3,
        &Expr::And(vec![v4(flag::TCP), net(0x0a00_1000), port(443)]),
    )
    .unwrap();
    assert_eq!((c.stats().tuples, c.stats().buckets), (2, 3));
    assert_eq!(
        c.classify(&v4_key(flag::TCP, 0x0a00_1001, 443)),
        Some((3, 3))
    );
    assert!(c.remove(2));
    assert_eq!((c.stats().tuples, c.stats().buckets), (2, 2));
    assert_eq!(
        c.classify(&v4_key(flag::TCP, 0x0a00_1001, 443)),
        Some((3, 3))
    );
    assert_eq!(
        c.classify(&v4_key(flag::TCP, 0x0a00_1001, 80)),
        Some((1, 1))
    );
}
