//! From a [`Node`] tree to the resolved [`Expr`]: each comparison gets its
//! symbol's prerequisites ANDed at its own level, outside any negation (the
//! negation was already pushed into the relation).

use super::lex::Const;
use super::parse::{Node, Relop, Target, Value};
use super::symbols::Kind;
use crate::classify::prefix_cover;
use crate::expr::Expr;
use crate::key::Field;

/// `xs` joined with `&&` (`||` when `or`), without a one-member list.
fn join(mut xs: Vec<Expr>, or: bool) -> Expr {
    if xs.len() == 1 {
        return xs.pop().unwrap_or(Expr::True);
    }
    if or { Expr::Or(xs) } else { Expr::And(xs) }
}

/// The resolved expression of `node`.
pub(crate) fn lower(node: Node) -> Expr {
    match node {
        Node::Bool(true) => Expr::True,
        Node::Bool(false) => Expr::False,
        Node::And(xs) => Expr::And(xs.into_iter().map(lower).collect()),
        Node::Or(xs) => Expr::Or(xs.into_iter().map(lower).collect()),
        Node::Cmp {
            target,
            relop,
            values,
        } => cmp(target, relop, &values),
    }
}

fn cmp(target: Target, relop: Relop, values: &[Value]) -> Expr {
    match target.sym.kind {
        Kind::Pred(p) => {
            let lits = values
                .iter()
                .map(|v| {
                    let one = matches!(v, Value::Int(c) if c.value & 1 != 0);
                    if one ^ (relop == Relop::Ne) {
                        p.expr()
                    } else {
                        Expr::Not(Box::new(p.expr()))
                    }
                })
                .collect();
            join(lits, relop == Relop::Eq)
        }
        Kind::Port(field) => {
            let tests = values.iter().map(|v| match v {
                Value::Port(i) => Expr::eq(field, *i as u128 + 1),
                Value::Int(c) => Expr::eq(field, c.value),
            });
            if relop == Relop::Eq {
                join(tests.collect(), true)
            } else {
                join(tests.map(|t| Expr::Not(Box::new(t))).collect(), false)
            }
        }
        Kind::Field { field, prereq } => {
            let core = field_cmp(target, field, relop, values);
            if prereq == 0 || core == Expr::False {
                core
            } else {
                Expr::And(vec![Expr::flags(prereq), core])
            }
        }
    }
}

fn field_cmp(target: Target, field: Field, relop: Relop, values: &[Value]) -> Expr {
    let max = target.max();
    // The target's lowest bit in the key field.
    let lo = target.sym.shift + target.lo;
    let ints = values.iter().filter_map(|v| match v {
        Value::Int(c) => Some(*c),
        Value::Port(_) => None,
    });
    // A subfield's value and mask are the field's, shifted to its bits.
    let test = |c: Const| {
        Expr::masked(
            field,
            c.value << lo,
            (c.mask.unwrap_or(u128::MAX) & max) << lo,
        )
    };
    match relop {
        // A bit that is not `v` is the other value: a test, not a negation
        // (`eth.dst[40]` alone is `eth.dst[40] != 0`). Not for a mask of
        // 0, which compares nothing.
        Relop::Ne
            if target.width == 1
                && matches!(values, [Value::Int(c)] if c.mask.is_none_or(|m| m & 1 == 1)) =>
        {
            let flip = |c: Const| {
                test(Const {
                    value: (c.value & 1) ^ 1,
                    mask: None,
                    ..c
                })
            };
            join(ints.map(flip).collect(), true)
        }
        Relop::Eq => join(ints.map(test).collect(), true),
        Relop::Ne => join(ints.map(|c| Expr::Not(Box::new(test(c)))).collect(), false),
        ordered => {
            let v = ints.map(|c| c.value).next().unwrap_or(0);
            let (from, to) = match ordered {
                Relop::Lt if v == 0 => return Expr::False,
                Relop::Lt => (0, v - 1),
                Relop::Le => (0, v),
                Relop::Gt if v >= max => return Expr::False,
                Relop::Gt => (v + 1, max),
                _ => (v, max),
            };
            if !target.is_sub() && target.sym.alone {
                return Expr::Range {
                    field,
                    lo: from,
                    hi: to,
                };
            }
            // A range over a subfield, or a field that shares its key
            // field, is not a range of the key field: the prefixes that
            // cover it, each a masked test of its bits (as OVN expands a
            // relation over a subfield).
            let tests = prefix_cover(from, to, target.width)
                .into_iter()
                .map(|(value, mask)| Expr::masked(field, value << lo, mask << lo))
                .collect();
            join(tests, true)
        }
    }
}
