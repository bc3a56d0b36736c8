//! What a bucket stores: a conjunction with its partial port masks turned
//! back into port ranges, so that the prefixes a range expanded into (and
//! the products of two ranges) are checked as one candidate.
//!
//! A rule's conjunctions become entries: a port field masked by a prefix
//! leaves the mask for a range; then entries equal but for one port range,
//! whose ranges touch, merge into one. A range of a single port then goes
//! back into the mask, where the hash can use it.

use super::dnf::Conj;
use crate::key::{Field, Key};

/// One candidate's test: `key & mask == value`, and the source and
/// destination ports within their ranges.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct Entry {
    pub(crate) mask: [u64; 8],
    pub(crate) value: [u64; 8],
    /// `[src lo, src span, dst lo, dst span]`: a port `p` is in when
    /// `p - lo <= span` (wrapping).
    pub(crate) ports: [u16; 4],
}

const PORT_FIELDS: [Field; 2] = [Field::L4Src, Field::L4Dst];

impl Entry {
    fn of(c: &Conj) -> Entry {
        let mut mask = c.mask;
        let mut value = c.value;
        let mut ports = [0, u16::MAX, 0, u16::MAX];
        for (i, f) in PORT_FIELDS.into_iter().enumerate() {
            let m = mask.get(f) as u16;
            if m != 0 && m.leading_ones() + m.trailing_zeros() == 16 {
                ports[2 * i] = value.get(f) as u16;
                ports[2 * i + 1] = !m;
                mask.set(f, 0);
                value.set(f, 0);
            }
        }
        Entry {
            mask: mask.w,
            value: value.w,
            ports,
        }
    }

    /// A range of one port goes back into the mask, where the hash sees it.
    fn exact_ports_in_mask(&mut self) {
        let mut mask = self.mask_key();
        let mut value = Key { w: self.value };
        for (i, f) in PORT_FIELDS.into_iter().enumerate() {
            if self.ports[2 * i + 1] == 0 {
                mask.set(f, 0xffff);
                value.set(f, u128::from(self.ports[2 * i]));
                self.ports[2 * i] = 0;
                self.ports[2 * i + 1] = u16::MAX;
            }
        }
        self.mask = mask.w;
        self.value = value.w;
    }

    /// The mask as a key.
    pub(crate) fn mask_key(&self) -> Key {
        Key { w: self.mask }
    }

    /// Whether `key` satisfies it.
    #[inline]
    pub(crate) fn matches(&self, key: &Key) -> bool {
        let mut diff = 0u64;
        for i in 0..8 {
            diff |= (key.w[i] & self.mask[i]) ^ self.value[i];
        }
        let sp = key.w[2] as u16;
        let dp = key.w[3] as u16;
        let p = &self.ports;
        (diff == 0) & (sp.wrapping_sub(p[0]) <= p[1]) & (dp.wrapping_sub(p[2]) <= p[3])
    }
}

/// A rule's entries: its conjunctions, port prefixes merged into ranges.
pub(crate) fn entries(conjs: &[Conj]) -> Vec<Entry> {
    let mut v: Vec<Entry> = conjs.iter().map(Entry::of).collect();
    for dim in [1usize, 0] {
        let other = 2 - 2 * dim;
        v.sort_unstable_by_key(|e| {
            (
                e.mask,
                e.value,
                e.ports[other],
                e.ports[other + 1],
                e.ports[2 * dim],
            )
        });
        let mut out: Vec<Entry> = Vec::with_capacity(v.len());
        for e in v {
            if let Some(last) = out.last_mut()
                && (last.mask, last.value) == (e.mask, e.value)
                && last.ports[other..other + 2] == e.ports[other..other + 2]
            {
                let hi = u32::from(last.ports[2 * dim]) + u32::from(last.ports[2 * dim + 1]);
                if u32::from(e.ports[2 * dim]) <= hi + 1 {
                    let e_hi = u32::from(e.ports[2 * dim]) + u32::from(e.ports[2 * dim + 1]);
                    last.ports[2 * dim + 1] =
                        (hi.max(e_hi) - u32::from(last.ports[2 * dim])) as u16;
                    continue;
                }
            }
            out.push(e);
        }
        v = out;
    }
    for e in &mut v {
        e.exact_ports_in_mask();
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::classify::normalise;
    use crate::expr::Expr;

    fn key(sp: u128, dp: u128) -> Key {
        let mut k = Key::default();
        k.set(Field::L4Src, sp);
        k.set(Field::L4Dst, dp);
        k
    }

    #[test]
    fn range_products_merge_into_one_entry() {
        let e = Expr::And(vec![
            Expr::Range {
                field: Field::L4Src,
                lo: 1024,
                hi: 65535,
            },
            Expr::Range {
                field: Field::L4Dst,
                lo: 6000,
                hi: 6200,
            },
        ]);
        let conjs = normalise(&e).unwrap();
        assert!(conjs.len() > 20);
        let es = entries(&conjs);
        assert_eq!(es.len(), 1);
        assert_eq!(es[0].ports, [1024, 64511, 6000, 200]);
        for (sp, dp) in [
            (1023, 6000),
            (1024, 6000),
            (65535, 6200),
            (2000, 6201),
            (2000, 5999),
        ] {
            assert_eq!(
                es[0].matches(&key(sp, dp)),
                e.eval(&key(sp, dp)),
                "{sp} {dp}"
            );
        }
        // Exact ports stay in the mask; a negated range stays two ranges.
        assert_eq!(
            entries(&normalise(&Expr::eq(Field::L4Dst, 80)).unwrap())[0].ports,
            [0, u16::MAX, 0, u16::MAX]
        );
        let not = Expr::Not(Box::new(Expr::Range {
            field: Field::L4Dst,
            lo: 100,
            hi: 200,
        }));
        let es = entries(&normalise(&not).unwrap());
        assert_eq!(es.len(), 2);
        for p in [0, 99, 100, 200, 201, 65535] {
            assert_eq!(
                es.iter().any(|x| x.matches(&key(0, p))),
                not.eval(&key(0, p)),
                "{p}"
            );
        }
    }

    /// Ranges of one rule that overlap or nest, on either port: the
    /// merged entries match every port the rule matches and no other
    /// (a nested range merged into one it lies within leaves that one
    /// as long as it was).
    #[test]
    fn nested_and_overlapping_ranges_merge_to_their_union() {
        let range = |field, lo, hi| Expr::Range { field, lo, hi };
        for field in [Field::L4Src, Field::L4Dst] {
            for (a, b) in [
                ((1000, 3000), (1024, 1279)),
                ((1024, 2047), (1024, 1279)),
                ((1024, 1279), (1024, 2047)),
                ((0, 40000), (300, 301)),
                ((100, 200), (150, 400)),
                ((5, 9), (10, 12)),
            ] {
                let e = Expr::Or(vec![range(field, a.0, a.1), range(field, b.0, b.1)]);
                let es = entries(&normalise(&e).unwrap());
                for p in 0..=65535u128 {
                    let k = match field {
                        Field::L4Src => key(p, 0),
                        _ => key(0, p),
                    };
                    assert_eq!(
                        es.iter().any(|x| x.matches(&k)),
                        e.eval(&k),
                        "{field:?} {a:?} {b:?}: port {p}"
                    );
                }
            }
        }
    }

    /// Nested port prefixes of one rule reach the merge where the
    /// normaliser's budget left them uncovered (a rule of many
    /// conjunctions): in either order, the wider one's range is kept.
    #[test]
    fn a_nested_prefix_keeps_the_wider_range() {
        use crate::classify::Conj;
        let wide = Conj::field(Field::L4Dst, 0xfc00, 1024);
        let narrow = Conj::field(Field::L4Dst, 0xff00, 1024);
        let inner = Conj::field(Field::L4Dst, 0xfff0, 1280);
        for conjs in [
            vec![wide, narrow],
            vec![narrow, wide],
            vec![wide, inner],
            vec![narrow, inner, wide],
        ] {
            let es = entries(&conjs);
            for p in 0..=65535u128 {
                let k = key(0, p);
                assert_eq!(
                    es.iter().any(|x| x.matches(&k)),
                    (1024..=2047).contains(&p),
                    "{conjs:?}: port {p}"
                );
            }
        }
    }
}
