//! `persist-established` across policy changes: which ACL a connection's
//! persistence belongs to, and whether a later policy still has it.
//!
//! OVN gives each ACL with `persist-established` an id, commits it in the
//! connection's `ct_label.acl_id` beside `ct_mark.allow_established`, and
//! flushes the connections of an id whose ACL is destroyed, loses the
//! option or stops being `allow-related` (ovn-nb(5)). A policy file has no
//! row UUIDs, so an ACL's identity here is what a user keeps while
//! editing it: its name, for a named ACL; for an unnamed one, its
//! direction, priority and match (what `ovn-nbctl acl-del` finds an ACL
//! by). A connection committed by such an ACL keeps that identity in its
//! label, one per stage (OVN commits each stage's ACL in that stage's
//! zone); a change judges the connection again, and a stage whose
//! identity the new policy still has as a persisting ACL passes it
//! whatever its ACLs now say.
//!
//! ```text
//! label bits  0..48   the from-lport ACL's identity (0: none)
//! label bits 48..96   the to-lport ACL's identity (0: none)
//! label bits 96..128  the ACL's `label`, as OVN's ct_label.label
//! ```
//!
//! An identity is 48 bits of a hash of the name or of the direction,
//! priority and match: two ACLs of one policy file that differ in them
//! collide with odds of about one in 2^48 per pair.

use std::hash::{Hash, Hasher};

use foldhash::HashSet;

use crate::model::{Acl, AclAction, Policy};

/// Bits of one identity.
const ID_BITS: u32 = 48;
const ID_MASK: u64 = (1 << ID_BITS) - 1;
/// The label's bits that hold the two stages' identities.
pub const IDS_MASK: u128 = (1 << (2 * ID_BITS)) - 1;

/// The identity of `acl` across policy files (never 0).
pub fn identity(acl: &Acl) -> u64 {
    // std's `DefaultHasher::new` is SipHash with fixed keys: the same
    // identity for the same ACL in every policy this process loads,
    // which is as long as a label lives.
    let mut h = std::collections::hash_map::DefaultHasher::new();
    if acl.name == format!("acl#{}", acl.index) {
        // Unnamed (`acl#N` is reserved for these): the file's order is no
        // part of it.
        0u8.hash(&mut h);
        acl.direction.name().hash(&mut h);
        acl.priority.hash(&mut h);
        match acl.match_text.trim() {
            // A policy built in code has no text.
            "" => format!("{:?}", acl.expr).hash(&mut h),
            text => text.hash(&mut h),
        }
    } else {
        1u8.hash(&mut h);
        acl.name.hash(&mut h);
    }
    match h.finish() & ID_MASK {
        0 => 1,
        id => id,
    }
}

/// The two stages' identities a label keeps, (from-lport, to-lport).
pub fn ids_of(label: u128) -> [u64; 2] {
    [label as u64 & ID_MASK, (label >> ID_BITS) as u64 & ID_MASK]
}

/// The label bits of two stages' identities (under [`IDS_MASK`]).
pub fn label_of(ids: [u64; 2]) -> u128 {
    u128::from(ids[0] & ID_MASK) | u128::from(ids[1] & ID_MASK) << ID_BITS
}

/// One policy's persisting ACLs.
#[derive(Debug, Default)]
pub(super) struct Persisting {
    /// Each ACL's identity where it persists what it commits, else 0
    /// (empty where none has the option).
    ids: Vec<u64>,
    /// The identities of the policy's persisting ACLs.
    live: HashSet<u64>,
    /// Some ACL has a `label` (which a change gives the connections it
    /// allows).
    pub(super) labels: bool,
}

impl Persisting {
    /// The ACLs of `policy` that persist what they commit: those with
    /// `persist-established` that commit, `allow-related` or, where the
    /// policy tracks, `allow` (as northd, which honours the option on
    /// both).
    pub(super) fn new(policy: &Policy, tracking: bool) -> Persisting {
        let labels = policy.acls.iter().any(|a| a.label.is_some());
        if !policy.acls.iter().any(|a| a.persist_established) {
            // No table for a policy without the option (of up to a
            // million ACLs).
            return Persisting {
                labels,
                ..Persisting::default()
            };
        }
        let ids: Vec<u64> = (policy.acls.iter())
            .map(|a| {
                let commits = match a.action {
                    AclAction::AllowRelated => true,
                    AclAction::Allow => tracking,
                    _ => false,
                };
                if a.persist_established && commits {
                    identity(a)
                } else {
                    0
                }
            })
            .collect();
        let live = ids.iter().copied().filter(|&i| i != 0).collect();
        Persisting { ids, live, labels }
    }

    /// The identity of ACL `acl` where it persists what it commits, else
    /// 0.
    #[inline]
    pub(super) fn id_of(&self, acl: u32) -> u64 {
        self.ids.get(acl as usize).copied().unwrap_or(0)
    }

    /// Of the identities `ids` (a label's), those this policy still has
    /// as a persisting ACL: the stages that pass the connection whatever
    /// their ACLs say.
    pub(super) fn held(&self, ids: [u64; 2]) -> [bool; 2] {
        ids.map(|i| i != 0 && self.live.contains(&i))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::expr::Expr;
    use crate::key::Field;
    use crate::model::Direction;

    fn acl(index: usize, priority: u16, port: u128) -> Acl {
        let mut a = Acl::new(
            index,
            Direction::ToLport,
            priority,
            AclAction::AllowRelated,
            Expr::eq(Field::L4Dst, port),
        );
        a.match_text = format!("tcp.dst == {port}");
        a
    }

    /// A named ACL is its name; an unnamed one its direction, priority
    /// and match, wherever it stands in the file.
    #[test]
    fn identities() {
        let a = acl(0, 100, 80);
        assert_eq!(identity(&a), identity(&acl(5, 100, 80)));
        assert_ne!(identity(&a), identity(&acl(0, 101, 80)));
        assert_ne!(identity(&a), identity(&acl(0, 100, 81)));
        let mut from = acl(0, 100, 80);
        from.direction = Direction::FromLport;
        assert_ne!(identity(&a), identity(&from));
        let named = |index, port| Acl {
            name: "web".into(),
            ..acl(index, 100, port)
        };
        assert_eq!(identity(&named(0, 80)), identity(&named(3, 8080)));
        assert_ne!(identity(&named(0, 80)), identity(&a));
        for a in [a, named(1, 1)] {
            let id = identity(&a);
            assert!(id != 0 && id <= ID_MASK);
            assert_eq!(ids_of(label_of([id, 0])), [id, 0]);
            assert_eq!(ids_of(label_of([0, id]) | 0xffff << 96), [0, id]);
            assert_eq!(label_of([id, id]) & !IDS_MASK, 0);
        }
    }

    /// Only an ACL that commits persists what it commits.
    #[test]
    fn persisting_acls() {
        let mut p = Policy::default();
        for (i, action) in [
            AclAction::AllowRelated,
            AclAction::Allow,
            AclAction::AllowStateless,
            AclAction::Drop,
        ]
        .into_iter()
        .enumerate()
        {
            let mut a = acl(i, 100, i as u128);
            a.action = action;
            a.persist_established = true;
            p.acls.push(a);
        }
        p.acls.push(acl(4, 100, 4));
        let ids = |tracking| {
            let s = Persisting::new(&p, tracking);
            s.ids.iter().map(|&i| i != 0).collect::<Vec<_>>()
        };
        assert_eq!(ids(true), [true, true, false, false, false]);
        assert_eq!(ids(false), [true, false, false, false, false]);
        let s = Persisting::new(&p, true);
        let id = identity(&p.acls[0]);
        assert_eq!(s.held([id, 0]), [true, false]);
        assert_eq!(s.held([0, identity(&p.acls[2])]), [false, false]);
    }
}
