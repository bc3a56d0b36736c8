//! The differential fuzz body of the policy classifier: rules decoded from
//! the input (small expressions over realistic fields and values, with
//! negations, sets, ranges and ties in rank), inserted and removed in
//! turn, and keys (from the same pools, or made to hit a rule) whose
//! classification must equal the linear scan's.

use arbitrary::{Arbitrary, Result, Unstructured};
use ctrack_policy::analyze::{Finding, analyze};
use ctrack_policy::classify::{Classifier, Rank, RuleId, naive, normalise};
use ctrack_policy::expr::Expr;
use ctrack_policy::key::{Field, Key, flag};
use ctrack_policy::model::{Acl, AclAction, Direction, Policy};

use crate::Probe;

const ADDRS: [u128; 5] = [0x0a00_0000, 0x0a00_0001, 0x0a01_0000, 0xc0a8_0101, 1 << 100];
const PORTS: [u128; 7] = [0, 22, 80, 443, 1024, 8080, 65535];
const FLAGS: [u16; 5] = [
    flag::IP,
    flag::IP | flag::IP4 | flag::TCP,
    flag::IP | flag::IP4 | flag::UDP,
    flag::IP | flag::IP6 | flag::TCP,
    flag::IP | flag::ICMP,
];

fn pick<T: Copy>(u: &mut Unstructured<'_>, xs: &[T]) -> Result<T> {
    Ok(*u.choose(xs)?)
}

fn value(u: &mut Unstructured<'_>, field: Field) -> Result<u128> {
    Ok(match field {
        Field::IpSrc | Field::IpDst => pick(u, &ADDRS)?,
        Field::L4Src | Field::L4Dst => pick(u, &PORTS)?,
        Field::Flags => u128::from(pick(u, &FLAGS)?),
        _ => u128::from(u.int_in_range(0..=3u8)?),
    })
}

const FIELDS: [Field; 7] = [
    Field::Flags,
    Field::IpSrc,
    Field::IpDst,
    Field::L4Src,
    Field::L4Dst,
    Field::Inport,
    Field::IpProto,
];

/// A small expression; `depth` bounds the nesting.
fn expr(u: &mut Unstructured<'_>, depth: u32) -> Result<Expr> {
    let kind = if depth == 0 {
        u.int_in_range(0..=3u8)?
    } else {
        u.int_in_range(0..=6u8)?
    };
    let field = pick(u, &FIELDS)?;
    Ok(match kind {
        0 => Expr::eq(field, value(u, field)?),
        1 => {
            // Prefixes of at most 32 bits (IPv4-like on addresses): a negated
            // test expands to one conjunction per mask bit.
            let width = field.width().min(32);
            let len = u.int_in_range(0..=width)?;
            let ones = u128::MAX >> (128 - width);
            let mask = ones & !(ones >> len);
            Expr::masked(field, value(u, field)?, mask)
        }
        2 => Expr::Range {
            field,
            lo: value(u, field)?,
            hi: value(u, field)?,
        },
        3 => match u.int_in_range(0..=2u8)? {
            0 => Expr::True,
            1 => Expr::False,
            _ => Expr::Test {
                field,
                value: u128::from(u8::arbitrary(u)?),
                mask: u128::from(u8::arbitrary(u)?),
            },
        },
        4 => Expr::Not(Box::new(expr(u, depth - 1)?)),
        5 => Expr::Or(
            (0..u.int_in_range(0..=3u8)?)
                .map(|_| expr(u, depth - 1))
                .collect::<Result<_>>()?,
        ),
        _ => Expr::And(
            (0..u.int_in_range(0..=4u8)?)
                .map(|_| expr(u, depth - 1))
                .collect::<Result<_>>()?,
        ),
    })
}

fn key(u: &mut Unstructured<'_>, rules: &[(RuleId, Rank, Expr)]) -> Result<Key> {
    let mut k = Key::default();
    for f in FIELDS {
        k.set(f, value(u, f)?);
    }
    if bool::arbitrary(u)? && !rules.is_empty() {
        let (_, _, e) = &rules[u.choose_index(rules.len())?];
        let conjs = normalise(e).unwrap_or_default();
        if !conjs.is_empty() {
            let c = &conjs[u.choose_index(conjs.len())?];
            for i in 0..8 {
                k.w[i] = (k.w[i] & !c.mask.w[i]) | c.value.w[i];
            }
        }
    }
    Ok(k)
}

/// Runs inserts, removals and lookups decoded from `data` through a
/// classifier, checking every lookup against [`naive`]. Counts inputs (not
/// packets).
pub fn classifier_diff(data: &[u8], probe: &mut Probe) {
    probe.count(1);
    let mut u = Unstructured::new(data);
    let mut c = Classifier::new();
    let mut rules: Vec<(RuleId, Rank, Expr)> = Vec::new();
    for n in 0..256u32 {
        if u.is_empty() {
            break;
        }
        let Ok(op) = u.int_in_range(0..=9u8) else {
            break;
        };
        match op {
            0..=3 => {
                let (Ok(rank), Ok(e)) = (u.int_in_range(0..=4u64), expr(&mut u, 3)) else {
                    break;
                };
                match c.insert(n, rank, &e) {
                    Ok(()) => {
                        probe.feature(80, (e.size().min(16), rules.len().min(16)));
                        rules.push((n, rank, e));
                    }
                    Err(err) => {
                        probe.feature(81, err.message.len());
                        assert!(!err.message.is_empty());
                    }
                }
            }
            4 if !rules.is_empty() => {
                let Ok(i) = u.choose_index(rules.len()) else {
                    break;
                };
                let (id, _, _) = rules.swap_remove(i);
                assert!(c.remove(id), "rule {id} was in");
                assert!(!c.remove(id), "rule {id} removed twice");
            }
            _ => {
                let Ok(k) = key(&mut u, &rules) else { break };
                let got = c.classify(&k);
                probe.feature(82, (got.is_some(), rules.len().min(16)));
                assert_eq!(got, naive(&rules, &k), "key {:x?}", k.w);
            }
        }
        assert_eq!(c.len(), rules.len());
    }
    let built = Classifier::build(rules.iter().map(|(i, r, e)| (*i, *r, e)));
    let built = built.expect("rules that were inserted compile");
    let mut u = Unstructured::new(data);
    let mut keys = Vec::new();
    for _ in 0..16 {
        let Ok(k) = key(&mut u, &rules) else { break };
        assert_eq!(built.classify(&k), naive(&rules, &k));
        assert_eq!(c.classify(&k), naive(&rules, &k));
        keys.push(k);
    }
    if rules.len() <= 32 {
        analysis_holds(&rules, &keys, probe);
    }
}

/// `k` made a key a frame could have, if its flags allow: the ethertype
/// and IP protocol its flags imply; `None` when its flags are not a
/// frame's (IP without a family, ICMP without a version, two transports).
fn frame_key(k: &Key) -> Option<Key> {
    let f = k.get(Field::Flags) as u16;
    let has = |b: u16| f & b != 0;
    let ip = has(flag::IP);
    let family_ok = match ip {
        true => has(flag::IP4) != has(flag::IP6) && !has(flag::ARP),
        false => f & !(flag::ARP | flag::VLAN) == 0,
    };
    let l4 = f & (flag::TCP | flag::UDP | flag::SCTP | flag::ICMP);
    let icmp_ok = match has(flag::ICMP) {
        true => has(flag::ICMP4) == has(flag::IP4) && has(flag::ICMP6) == has(flag::IP6),
        false => !has(flag::ICMP4) && !has(flag::ICMP6),
    };
    // An IPv4 later fragment keeps its datagram's protocol (as OVN's `tcp`
    // is `ip.proto == 6`); an IPv6 one's is the fragment header's.
    let later6 = has(flag::LATER_FRAG) && has(flag::IP6);
    if !family_ok || l4.count_ones() > 1 || !icmp_ok || (later6 && l4 != 0) {
        return None;
    }
    let mut k = *k;
    let ethertype = match (has(flag::ARP), has(flag::IP4), has(flag::IP6)) {
        (true, _, _) => 0x0806,
        (_, true, _) => 0x0800,
        (_, _, true) => 0x86dd,
        _ => k.get(Field::EthType),
    };
    k.set(Field::EthType, ethertype);
    let proto = [
        (flag::TCP, 6),
        (flag::UDP, 17),
        (flag::SCTP, 132),
        (flag::ICMP4, 1),
        (flag::ICMP6, 58),
    ]
    .iter()
    .find(|(b, _)| has(*b))
    .map_or(k.get(Field::IpProto), |&(_, p)| p);
    k.set(Field::IpProto, proto);
    Some(k)
}

/// `policy check`'s findings on the rules as to-lport ACLs hold on every
/// key a frame could have: a match said never to match matches none, and
/// a shadowed ACL matches a key only where one of its shadowers does.
fn analysis_holds(rules: &[(RuleId, Rank, Expr)], keys: &[Key], probe: &mut Probe) {
    let acls = rules
        .iter()
        .enumerate()
        .map(|(i, (_, rank, e))| {
            Acl::new(
                i,
                Direction::ToLport,
                *rank as u16,
                AclAction::Drop,
                e.clone(),
            )
        })
        .collect();
    let p = Policy {
        acls,
        ..Policy::default()
    };
    let index = |name: &str| -> usize {
        name.strip_prefix("acl#")
            .and_then(|n| n.parse().ok())
            .expect("an unnamed ACL")
    };
    let findings = analyze(&p);
    let keys: Vec<Key> = keys.iter().filter_map(frame_key).collect();
    probe.feature(83, (findings.len().min(8), keys.len().min(16)));
    for f in &findings {
        for k in &keys {
            match f {
                Finding::NeverMatches { acl } => {
                    assert!(
                        !p.acls[index(acl)].expr.eval(k),
                        "{acl} never matches, yet {:x?}",
                        k.w
                    );
                }
                Finding::Shadowed { acl, by } if p.acls[index(acl)].expr.eval(k) => {
                    assert!(
                        by.iter().any(|b| p.acls[index(b)].expr.eval(k)),
                        "{acl} shadowed by {by:?}, yet key {:x?} meets it alone",
                        k.w
                    );
                }
                _ => {}
            }
        }
    }
}
