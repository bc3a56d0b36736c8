//! A compiled packet classifier for ACLs: of many rules, each a resolved
//! [`Expr`](crate::expr::Expr) with a rank, find the highest-ranked rule a
//! packet's [`Key`](crate::key::Key) matches, in a few hash probes.
//!
//! # Design
//!
//! **Normalisation** ([`normalise`]): each rule's expression becomes a
//! disjunction of conjunctions ([`Conj`]), each a (mask, value) pair over
//! the 64-byte key. Ranges become prefix covers, `!` is pushed down to the
//! leaves (OVN's expansion of a negated test, one entry per mask bit),
//! contradictions are dropped. Expansion is bounded: a rule over the bound
//! is a [`CompileError`], never an unbounded allocation.
//!
//! **Tuple space search, TupleMerge-style.** Every conjunction is an
//! *entry*. Entries are grouped into *tuples*: a tuple has a hash mask that
//! is a subset of each of its entries' masks, and one hash table keyed by
//! the entries' values under that mask; a bucket holds its candidates
//! sorted by score (rank, then lowest id) and each is checked against its
//! exact mask and value. A lookup hashes the key under a tuple's mask
//! (only the words the mask touches) and probes the tuple's table, an
//! index of bucket numbers whose control bytes stay in cache (hashbrown's
//! `HashTable`, `table.rs`);
//! a tuple whose best rule cannot beat the match found so far is passed
//! over, and a lookup stops at the first such tuple while tuples are
//! numbered best score first (as after a build; an update may leave them
//! out of order, and then the lookup only passes over them).
//!
//! Plain tuple space search gives every distinct mask its own table, and
//! realistic ACLs have hundreds of distinct masks (every pair of prefix
//! lengths, every port-range prefix): hundreds of probes per packet.
//! TupleMerge (Daly, Liu, Torng, 2019; the idea behind VPP's ACL plugin)
//! lets entries share a table whose mask is *coarser* than theirs, checking
//! the rest exactly in the bucket. Here the hash mask of an entry is its
//! mask coarsened so that masks take few shapes:
//!
//! - an address keeps only its leading run of ones cut to a multiple of 20
//!   bits (a /28 or a /24 hashes as a /20, a /16 not at all, an IPv6 /64
//!   as a /60), or, when that table's bucket for the entry is taken, of 4
//!   bits (a /28 as itself, a /26 as a /24);
//! - a field masked only in part (a port prefix from a range, a partial
//!   protocol mask) is not hashed at all, and TCP flags never are;
//! - fully masked fields and the prerequisite flags are hashed as they are.
//!
//! A new coarsened tuple also joins an existing tuple whose mask is a
//! subset of it and at most a few bits shorter (the merge), decided once
//! per coarsened tuple. An entry looks for a group to join among the first
//! 512 groups at most, and then among its own relaxed and coarse groups:
//! rules of many distinct masks can make thousands of groups, and
//! scanning them all for each entry made a compile quadratic. A bucket
//! holds the entries of one rule (of eight before: a probe then scanned
//! about three candidates, each a miss and a branch the processor could
//! not predict): when an entry's bucket is taken it goes to the
//! tuple of its own coarsened mask, and if that is full too, to the tuple
//! of its exact mask (where every candidate of a bucket matches, so the
//! first one decides). Such rules still make a lookup probe every group
//! past the first 128 (those the bitmaps do not cover): with the 16,384
//! rules of the test `thousands_of_groups_compile_in_linear_time` (12,695
//! groups), a key that matches none took 0.34 ms in a release build. A
//! policy's author, not its traffic, can bring that about.
//!
//! **Pruning before probing** (`site.rs`). Before any tuple is
//! hashed, two bitmaps over the tuples cut the search to those that can
//! match: one by the key's first word (each tuple's entries share their
//! value on it: flags, ethertype, protocol; a table per byte tested), one
//! by the key's addresses (the tuples with an entry in the key's source
//! and destination /16 and /24, IPv6 /32 and /48, or with one that names
//! no such prefix). At 10k generated rules a lookup probed 13 tuples
//! before and about 6 after; the first 128 tuples, the best-scored, are
//! pruned, any beyond them always probed. A classifier of at most eight
//! tuples skips the bitmaps and walks its tuples in bound order: a few
//! probes cost less than the bitmaps would save.
//!
//! **A filter in front of each index** (`table.rs`). Of the tuples left,
//! about half hold no bucket of the key's value. Each tuple keeps a bit
//! array, about 16 bits per bucket, with the bit of every bucket's hash
//! set: a probe whose bit is clear ends there, without touching the
//! index. At 10k generated rules it turns away 2.8 of a lookup's 5.9
//! probes, and lets 4.5% of the probes for absent values through. Removed
//! buckets' bits stay set until the array is rebuilt, once as many were
//! removed as are left; it is rebuilt twice as large when it falls under
//! 16 bits a bucket. A tuple that holds one bucket (most of them, in a
//! policy of a few rules) skips all of it: its candidates are scanned
//! without hashing the key, as every candidate is checked exactly anyway.
//!
//! **Incremental updates.** A rule keeps the list of its entries and the
//! tuple each went to: adding or removing a rule touches only those, plus
//! re-sorting the (short) list of tuples by best score.
//!
//! [`naive`] is the reference: a linear scan with `Expr::eval`. [`gen`]
//! generates realistic rule sets and keys for tests and benchmarks.

mod classifier;
mod complement;
mod dnf;
mod entry;
pub mod r#gen;
mod group;
mod rule;
mod site;
mod table;
#[cfg(test)]
mod tests;

pub use classifier::{Classifier, ClassifierStats};
pub use dnf::{Conj, MAX_CONJ, MAX_DEPTH, MAX_TOTAL_CONJ, MAX_WORK, normalise, prefix_cover};
pub use rule::{CompileError, Rank, RuleId, naive};
