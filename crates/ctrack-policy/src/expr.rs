//! A match expression once resolved: names turned into fields of the
//! [`Key`], prerequisites made explicit, sets, address sets and port groups
//! expanded. The parser ([`crate::lang`]) produces it; the classifier
//! compiles it; [`Expr::eval`] evaluates it directly on a key, which is the
//! reference every compiled form is tested against.

use crate::key::{Field, Key};

/// A resolved match expression.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Expr {
    /// `1`: every packet.
    True,
    /// `0`: no packet.
    False,
    /// `field & mask == value` (`value` has no bit outside `mask`; `mask`
    /// none outside the field's width).
    Test {
        /// The field.
        field: Field,
        /// The value, already under the mask.
        value: u128,
        /// The bits compared.
        mask: u128,
    },
    /// `lo <= field <= hi`, for the ordered comparisons `< <= > >=` on
    /// integer fields.
    Range {
        /// The field.
        field: Field,
        /// Lowest value, inclusive.
        lo: u128,
        /// Highest value, inclusive.
        hi: u128,
    },
    /// Every one of them (`&&`); empty is `1`.
    And(Vec<Expr>),
    /// Any one of them (`||`); empty is `0`.
    Or(Vec<Expr>),
    /// `!`.
    Not(Box<Expr>),
}

impl Expr {
    /// `field == value` on every bit of the field.
    pub fn eq(field: Field, value: u128) -> Expr {
        Expr::Test {
            field,
            value: value & field.all_ones(),
            mask: field.all_ones(),
        }
    }

    /// `field & mask == value & mask`.
    pub fn masked(field: Field, value: u128, mask: u128) -> Expr {
        let mask = mask & field.all_ones();
        Expr::Test {
            field,
            value: value & mask,
            mask,
        }
    }

    /// The prerequisite flag `bits` all set.
    pub fn flags(bits: u16) -> Expr {
        Expr::masked(Field::Flags, u128::from(bits), u128::from(bits))
    }

    /// Evaluates the expression on `key` directly, without compiling it:
    /// the reference the classifier is checked against.
    pub fn eval(&self, key: &Key) -> bool {
        match self {
            Expr::True => true,
            Expr::False => false,
            Expr::Test { field, value, mask } => key.get(*field) & mask == *value,
            Expr::Range { field, lo, hi } => {
                let v = key.get(*field);
                *lo <= v && v <= *hi
            }
            Expr::And(xs) => xs.iter().all(|x| x.eval(key)),
            Expr::Or(xs) => xs.iter().any(|x| x.eval(key)),
            Expr::Not(x) => !x.eval(key),
        }
    }

    /// The number of nodes, for bounding what a policy may ask.
    pub fn size(&self) -> usize {
        match self {
            Expr::True | Expr::False | Expr::Test { .. } | Expr::Range { .. } => 1,
            Expr::And(xs) | Expr::Or(xs) => 1 + xs.iter().map(Expr::size).sum::<usize>(),
            Expr::Not(x) => 1 + x.size(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Expr;
    use crate::key::Field;

    #[test]
    fn size_counts_every_node() {
        let t = || Expr::masked(Field::IpProto, 6, 0xff);
        assert_eq!(Expr::True.size(), 1);
        assert_eq!(t().size(), 1);
        assert_eq!(Expr::Not(Box::new(t())).size(), 2);
        let and = Expr::And(vec![t(), Expr::Not(Box::new(t())), Expr::False]);
        assert_eq!(and.size(), 5);
        assert_eq!(Expr::Or(vec![and, t()]).size(), 7);
        assert_eq!(Expr::Not(Box::new(Expr::Or(vec![]))).size(), 2);
    }
}
