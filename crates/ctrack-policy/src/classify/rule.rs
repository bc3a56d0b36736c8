//! What a rule is to the classifier: its id, its rank, the order between
//! rules, the compile error, and the reference classification.

use std::fmt;

use crate::expr::Expr;
use crate::key::Key;

/// A rule's identifier, chosen by the caller; unique in a classifier.
pub type RuleId = u32;

/// Higher rank wins; the caller encodes priority and tie-break in it.
pub type Rank = u64;

/// Why a rule could not be compiled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompileError {
    /// What went wrong, for a person.
    pub message: String,
    /// The rule that could not go in, where a classifier's build or
    /// insert says which.
    pub rule: Option<RuleId>,
}

impl CompileError {
    pub(crate) fn new(message: impl Into<String>) -> CompileError {
        CompileError {
            message: message.into(),
            rule: None,
        }
    }

    /// The same error, of rule `id`.
    pub(crate) fn of(self, id: RuleId) -> CompileError {
        CompileError {
            rule: Some(id),
            ..self
        }
    }
}

impl fmt::Display for CompileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for CompileError {}

/// The total order between rules: higher rank first, then lower id. Every
/// rule has its own score, never 0 (0 stands for "no match yet").
pub(crate) fn score(id: RuleId, rank: Rank) -> u128 {
    ((u128::from(rank) << 32) | u128::from(!id)) + 1
}

/// The rule a score was made from.
pub(crate) fn unscore(s: u128) -> (RuleId, Rank) {
    let s = s - 1;
    (!(s as u32), (s >> 32) as u64)
}

/// The reference classification: every rule evaluated directly with
/// [`Expr::eval`]; of those that match, the one with the highest rank, and
/// among equal ranks the lowest id (the same tie-break as
/// [`super::Classifier::classify`]).
pub fn naive(rules: &[(RuleId, Rank, Expr)], key: &Key) -> Option<(RuleId, Rank)> {
    rules
        .iter()
        .filter(|(_, _, e)| e.eval(key))
        .map(|(id, rank, _)| score(*id, *rank))
        .max()
        .map(unscore)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scores_order_rank_then_lower_id() {
        assert!(score(5, 2) > score(1, 1));
        assert!(score(1, 1) > score(2, 1));
        assert!(score(u32::MAX, 0) > 0);
        for (id, rank) in [(0, 0), (u32::MAX, u64::MAX), (7, 9)] {
            assert_eq!(unscore(score(id, rank)), (id, rank));
        }
    }
}
