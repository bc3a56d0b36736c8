//! From a [`Node`] tree to the resolved [`Expr`]: each comparison gets its
//! symbol's prerequisites ANDed at its own level, outside any negation (the
//! negation was already pushed into the relation).

use super::parse::{Node, Relop, Value};
use super::symbols::{Kind, Symbol};
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
        Node::Cmp { sym, relop, values } => cmp(sym, relop, &values),
    }
}

fn cmp(sym: &Symbol, relop: Relop, values: &[Value]) -> Expr {
    match sym.kind {
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
            let core = field_cmp(sym, field, relop, values);
            if prereq == 0 || core == Expr::False {
                core
            } else {
                Expr::And(vec![Expr::flags(prereq), core])
            }
        }
    }
}

fn field_cmp(sym: &Symbol, field: Field, relop: Relop, values: &[Value]) -> Expr {
    let max = sym.max();
    let ints = values.iter().filter_map(|v| match v {
        Value::Int(c) => Some(*c),
        Value::Port(_) => None,
    });
    let test =
        |c: super::lex::Const| Expr::masked(field, c.value, c.mask.unwrap_or(u128::MAX) & max);
    match relop {
        Relop::Eq => join(ints.map(test).collect(), true),
        Relop::Ne => join(ints.map(|c| Expr::Not(Box::new(test(c)))).collect(), false),
        ordered => {
            let v = ints.map(|c| c.value).next().unwrap_or(0);
            let range = |lo, hi| Expr::Range { field, lo, hi };
            match ordered {
                Relop::Lt if v == 0 => Expr::False,
                Relop::Lt => range(0, v - 1),
                Relop::Le => range(0, v),
                Relop::Gt if v >= max => Expr::False,
                Relop::Gt => range(v + 1, max),
                _ => range(v, max),
            }
        }
    }
}
