//! What `ctrack policy check` reports beyond refusing a bad file: ACLs that
//! can never match, and ACLs that never decide because a single ACL ranked
//! above them in the same stage and tier matches everything they match.
//!
//! Shadowing is checked conjunction by conjunction on the compiled form:
//! ACL A is shadowed by B when every conjunction of A's match is contained
//! in one conjunction of B's (B looks at a subset of A's bits, with the
//! same values). That is sufficient, not necessary: an ACL covered only by
//! several others together is not reported. The work is bounded, so a
//! huge policy is checked in part and says so.

use std::fmt;

use crate::classify::{Conj, normalise};
use crate::firewall::rank;
use crate::model::Policy;

/// Conjunction pairs compared at most.
const MAX_PAIRS: u64 = 50_000_000;

/// One finding.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Finding {
    /// The ACL's match is contradictory (`tcp && udp`).
    NeverMatches {
        /// Its name.
        acl: String,
    },
    /// A higher-ranked ACL of the same stage and tier matches every packet
    /// it matches.
    Shadowed {
        /// Its name.
        acl: String,
        /// The shadowing ACL's name.
        by: String,
    },
    /// The ACL's match is too large to analyse.
    TooLarge {
        /// Its name.
        acl: String,
        /// Why.
        why: String,
    },
    /// The work bound was reached: later ACLs were not compared.
    Incomplete,
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Finding::NeverMatches { acl } => write!(f, "warning: ACL {acl} can never match"),
            Finding::Shadowed { acl, by } => write!(
                f,
                "warning: ACL {acl} is shadowed by {by}, which ranks above it and matches every packet it matches"
            ),
            Finding::TooLarge { acl, why } => write!(f, "note: ACL {acl} not analysed: {why}"),
            Finding::Incomplete => write!(f, "note: shadowing analysis stopped at its work bound"),
        }
    }
}

/// True when every key `inner` matches, `outer` matches too.
fn covers(outer: &Conj, inner: &Conj) -> bool {
    (0..8).all(|i| {
        outer.mask.w[i] & !inner.mask.w[i] == 0
            && inner.value.w[i] & outer.mask.w[i] == outer.value.w[i]
    })
}

/// Analyses `p`.
pub fn analyze(p: &Policy) -> Vec<Finding> {
    let mut out = Vec::new();
    let mut dnfs: Vec<Option<Vec<Conj>>> = Vec::with_capacity(p.acls.len());
    for a in &p.acls {
        match normalise(&a.expr) {
            Ok(d) if d.is_empty() => {
                out.push(Finding::NeverMatches {
                    acl: a.name.clone(),
                });
                dnfs.push(None);
            }
            Ok(d) => dnfs.push(Some(d)),
            Err(e) => {
                out.push(Finding::TooLarge {
                    acl: a.name.clone(),
                    why: e.to_string(),
                });
                dnfs.push(None);
            }
        }
    }
    let mut order: Vec<usize> = (0..p.acls.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(rank(p.acls[i].priority, i)));
    let mut work = 0u64;
    for (pos, &i) in order.iter().enumerate() {
        let (a, Some(da)) = (&p.acls[i], &dnfs[i]) else {
            continue;
        };
        for &j in &order[..pos] {
            let (b, Some(db)) = (&p.acls[j], &dnfs[j]) else {
                continue;
            };
            if b.direction != a.direction || b.tier != a.tier {
                continue;
            }
            work += (da.len() * db.len()) as u64;
            if work > MAX_PAIRS {
                out.push(Finding::Incomplete);
                return out;
            }
            if da.iter().all(|ca| db.iter().any(|cb| covers(cb, ca))) {
                out.push(Finding::Shadowed {
                    acl: a.name.clone(),
                    by: b.name.clone(),
                });
                break;
            }
        }
    }
    out
}
