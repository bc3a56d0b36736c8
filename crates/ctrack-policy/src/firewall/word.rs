//! The verdict word a connection carries in the tracker's record: the
//! session's cached verdict, read by the same lookup that finds the
//! connection.
//!
//! ```text
//! bits  0..23  policy generation that judged the connection (never 0)
//! bits 23..43  the ACL that opened it: its index + 1, or 0 for the default
//! bits 43..45  the stage that decided: 0 default, 1 from-lport, 2 to-lport;
//!              3: stamped by a judging again after a change that left
//!              the connection otherwise than a commit would (its label),
//!              the stage not kept ([`WordStage::Again`])
//! bit  45      an ACL with `persist-established` committed it: the
//!              connection's label keeps which (`persist.rs`; a change
//!              judges by the label, which a later `+new` packet's commit
//!              may have written under a word it left as it was)
//! bits 46..64  the zones the packets that opened it went between, as a
//!              [`Pair`] (0: not kept)
//! ```
//!
//! A committed connection is always an allowed one (a denied packet commits
//! nothing), so the word needs no verdict bit: a word of the current
//! generation means "allowed, by this ACL". A word of an older generation
//! means the connection must be judged again before its packet passes.
//! A connection a policy change left alone (its ACL had
//! `persist-established`) is stamped with the new generation, no ACL and
//! the `persist` bit ([`Word::is_persisted`]), and reported as
//! `persisted`.
//! Generations wrap after 2^23 - 1 policy changes; a connection that sees
//! no packet across exactly that many changes would be taken as current.

/// Generation bits.
pub const GEN_BITS: u32 = 23;
const GEN_MASK: u64 = (1 << GEN_BITS) - 1;
const ACL_SHIFT: u32 = GEN_BITS;
/// Bits of an ACL's index plus one: room for every ACL a policy may have.
const ACL_BITS: u32 = 20;
const ACL_MASK: u64 = (1 << ACL_BITS) - 1;
const _: () = assert!(crate::file::MAX_ACLS < ACL_MASK as usize);
const STAGE_SHIFT: u32 = ACL_SHIFT + ACL_BITS;
const PERSIST: u64 = 1 << (STAGE_SHIFT + 2);
const PAIR_SHIFT: u32 = STAGE_SHIFT + 3;
const _: () = assert!(PAIR_SHIFT + Pair::BITS == 64);

/// The two zones a connection's opening packets went between (their
/// inport's and their outport's; 0 for a side of no known port), kept in
/// its word relative to the zone the connection is tracked in, which is
/// one of them: whether the inport's is that zone, and the other one.
///
/// A later packet of the connection found in that zone but going between
/// other zones (the connection's addresses sent from or to a third port
/// that shares the zone) is not one of its session's packets: OVN, which
/// tracks a packet in each port's zone, would not find the connection in
/// the third port's (docs/firewall.md, "Packets of a connection between
/// other ports").
///
/// ```text
/// bit  0      kept (0: the word keeps no zones, and every packet fits)
/// bit  1      the inport's zone is the zone the connection is tracked in
/// bits 2..18  the other zone
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct Pair(pub u32);

impl Pair {
    /// Bits a word gives it.
    pub const BITS: u32 = 18;

    /// Not kept: every packet fits.
    pub const NONE: Pair = Pair(0);

    /// The pair of a packet going from zone `zin` to zone `zout`, tracked
    /// in zone `zone` (one of the two).
    #[inline(always)]
    pub fn new(zin: u16, zout: u16, zone: u16) -> Pair {
        let side = zin == zone;
        let other = if side { zout } else { zin };
        Pair(1 | u32::from(side) << 1 | u32::from(other) << 2)
    }

    /// Whether the word keeps zones at all.
    #[inline(always)]
    pub fn kept(self) -> bool {
        self.0 & 1 != 0
    }

    /// The (inport's, outport's) zones, for a connection tracked in
    /// `zone`; `None` when not kept.
    pub fn zones(self, zone: u16) -> Option<(u16, u16)> {
        if !self.kept() {
            return None;
        }
        let other = (self.0 >> 2) as u16;
        Some(if self.0 & 2 != 0 {
            (zone, other)
        } else {
            (other, zone)
        })
    }

    /// The pair's bits where a word keeps them.
    #[inline(always)]
    pub fn in_word(self) -> u64 {
        u64::from(self.0) << PAIR_SHIFT
    }
}

/// The next generation after `g` (skipping 0, which means "no word").
pub fn next_gen(g: u32) -> u32 {
    let n = (g.wrapping_add(1)) & GEN_MASK as u32;
    if n == 0 { 1 } else { n }
}

/// Which stage decided a session, as the word keeps it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WordStage {
    /// No ACL: the default.
    Default,
    /// A from-lport ACL.
    From,
    /// A to-lport ACL.
    To,
    /// Stamped when the connection was judged again after a policy
    /// change, and left otherwise than committing it under that policy
    /// would leave it (its label: an ACL's `label`, the identities of
    /// persisting ACLs). A later `+new` packet of it meets the ACLs and
    /// is committed, as OVN commits every `ct.new` packet; the stage that
    /// allows it is not kept (nothing else reads it).
    Again,
}

/// A decoded verdict word.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Word {
    /// The generation that judged it.
    pub generation: u32,
    /// The ACL's index in that generation's policy, `None` for the default.
    pub acl: Option<u32>,
    /// The stage.
    pub stage: WordStage,
    /// An ACL with `persist-established` committed it, and the label keeps
    /// which (`persist.rs`).
    pub persist: bool,
    /// The zones the packets that opened the connection went between.
    /// What tells a session's packets from the same addresses sent
    /// between other ports, and what lets a later `+new` packet of the
    /// connection take the word's verdict without meeting the ACLs
    /// (docs/firewall.md, "The session").
    pub pair: Pair,
}

impl Word {
    /// Packs the word.
    pub fn encode(self) -> u64 {
        let acl = self.acl.map_or(0, |a| u64::from(a) + 1) & ACL_MASK;
        let stage = match self.stage {
            WordStage::Default => 0u64,
            WordStage::From => 1,
            WordStage::To => 2,
            WordStage::Again => 3,
        };
        (u64::from(self.generation) & GEN_MASK)
            | (acl << ACL_SHIFT)
            | (stage << STAGE_SHIFT)
            | if self.persist { PERSIST } else { 0 }
            | self.pair.in_word()
    }

    /// Unpacks a word; `None` for 0 (a connection no policy judged).
    pub fn decode(w: u64) -> Option<Word> {
        let generation = (w & GEN_MASK) as u32;
        if generation == 0 {
            return None;
        }
        let acl = ((w >> ACL_SHIFT) & ACL_MASK) as u32;
        Some(Word {
            generation,
            acl: acl.checked_sub(1),
            stage: match (w >> STAGE_SHIFT) & 3 {
                1 => WordStage::From,
                2 => WordStage::To,
                3 => WordStage::Again,
                _ => WordStage::Default,
            },
            persist: w & PERSIST != 0,
            pair: Word::pair_of(w),
        })
    }

    /// The pair of a raw word.
    #[inline(always)]
    pub fn pair_of(w: u64) -> Pair {
        Pair((w >> PAIR_SHIFT) as u32)
    }

    /// Whether a packet going between the zones of `pair` (as the
    /// connection's opening packets went: swapped for a reply) fits the
    /// raw word `w`: the word keeps that pair, or none.
    #[inline(always)]
    pub fn fits(w: u64, pair: Pair) -> bool {
        let p = w >> PAIR_SHIFT;
        p == u64::from(pair.0) || p & 1 == 0
    }

    /// What of the raw word `w` a session's packet is checked against in
    /// one comparison: its generation and its pair.
    #[inline(always)]
    pub fn session_bits(w: u64) -> u64 {
        w & (GEN_MASK | !((1 << PAIR_SHIFT) - 1))
    }

    /// The raw word `w` with its pair replaced by `pair`.
    pub fn with_pair(w: u64, pair: Pair) -> u64 {
        (w & ((1 << PAIR_SHIFT) - 1)) | pair.in_word()
    }

    /// The word's ACL plus one, 0 for none (as [`Word::decode`]'s `acl`,
    /// without the rest).
    #[inline(always)]
    pub fn acl_plus_one(w: u64) -> u32 {
        ((w >> ACL_SHIFT) & ACL_MASK) as u32
    }

    /// What the burst path tells the runs of its session packets apart
    /// by: the word's ACL plus one (as [`Word::acl_plus_one`]) and its
    /// `persist` bit, so that a connection a change left alone
    /// ([`Word::is_persisted`]) is not taken for one the default allowed.
    /// The same cost as [`Word::acl_plus_one`] (a shift and a mask).
    #[inline(always)]
    pub fn run_key(w: u64) -> u32 {
        ((w >> ACL_SHIFT) & (ACL_MASK | PERSIST >> ACL_SHIFT)) as u32
    }

    /// A [`Word::run_key`]'s ACL plus one (0 for none).
    pub fn run_acl_plus_one(key: u32) -> u32 {
        key & ACL_MASK as u32
    }

    /// Whether a [`Word::run_key`] is that of a connection a policy change
    /// left alone.
    pub fn run_persisted(key: u32) -> bool {
        u64::from(key) == PERSIST >> ACL_SHIFT
    }

    /// Whether the word is the stamp a connection gets when a policy
    /// change leaves it alone (its ACL had `persist-established`): no ACL
    /// of the generation that stamped it allowed it, so it names none,
    /// and it is reported as `persisted`, never as the default's.
    pub fn is_persisted(self) -> bool {
        self.acl.is_none() && self.persist
    }

    /// The generation of a raw word (0 for none), without decoding the
    /// rest: the fast path's one comparison.
    #[inline]
    pub fn generation_of(w: u64) -> u32 {
        (w & GEN_MASK) as u32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let pairs = [Pair::NONE, Pair::new(1, 2, 1), Pair::new(0, 65535, 65535)];
        for acl in [None, Some(0), Some(7), Some((1 << ACL_BITS) - 2)] {
            for stage in [
                WordStage::Default,
                WordStage::From,
                WordStage::To,
                WordStage::Again,
            ] {
                for (persist, pair) in [(false, pairs[0]), (true, pairs[1]), (false, pairs[2])] {
                    let w = Word {
                        generation: 0x002b_cdef,
                        acl,
                        stage,
                        persist,
                        pair,
                    };
                    assert_eq!(Word::decode(w.encode()), Some(w));
                    assert_eq!(Word::generation_of(w.encode()), 0x002b_cdef);
                    assert_eq!(Word::acl_plus_one(w.encode()).checked_sub(1), acl, "{w:?}");
                    assert_eq!(Word::pair_of(w.encode()), pair, "{w:?}");
                }
            }
        }
        assert_eq!(Word::decode(0), None);
    }

    /// A run's key keeps the ACL and the persisted stamp apart from the
    /// default, and nothing else of the word.
    #[test]
    fn run_keys() {
        let w = |acl, persist, stage| Word {
            generation: 5,
            acl,
            stage,
            persist,
            pair: Pair::new(1, 2, 1),
        };
        let key = |w: Word| Word::run_key(w.encode());
        let stamp = w(None, true, WordStage::Default);
        let default = w(None, false, WordStage::Default);
        assert!(stamp.is_persisted() && !default.is_persisted());
        assert!(Word::run_persisted(key(stamp)));
        assert!(!Word::run_persisted(key(default)));
        assert_ne!(key(stamp), key(default));
        assert_eq!(Word::run_acl_plus_one(key(stamp)), 0);
        let opened = w(Some(6), true, WordStage::To);
        assert!(!opened.is_persisted() && !Word::run_persisted(key(opened)));
        assert_eq!(Word::run_acl_plus_one(key(opened)), 7);
        // The stage and the pair are not the run's.
        assert_eq!(
            key(opened),
            key(Word {
                stage: WordStage::From,
                pair: Pair::NONE,
                ..opened
            })
        );
    }

    #[test]
    fn generations_skip_zero() {
        assert_eq!(next_gen(1), 2);
        assert_eq!(next_gen((1 << 23) - 1), 1);
    }

    #[test]
    fn pairs_name_both_zones() {
        // Tracked in the lower of two known ports' zones.
        assert_eq!(Pair::new(3, 7, 3).zones(3), Some((3, 7)));
        assert_eq!(Pair::new(7, 3, 3).zones(3), Some((7, 3)));
        // One side of no known port (zone 0).
        assert_eq!(Pair::new(0, 9, 9).zones(9), Some((0, 9)));
        assert_eq!(Pair::new(9, 0, 9).zones(9), Some((9, 0)));
        assert_eq!(Pair::new(5, 5, 5).zones(5), Some((5, 5)));
        assert_eq!(Pair::NONE.zones(5), None);
        // A packet the other way round does not fit; a word without a
        // pair fits every packet.
        let w = Word {
            generation: 1,
            acl: None,
            stage: WordStage::Default,
            persist: false,
            pair: Pair::new(3, 7, 3),
        }
        .encode();
        assert!(Word::fits(w, Pair::new(3, 7, 3)));
        assert!(!Word::fits(w, Pair::new(7, 3, 3)));
        assert!(!Word::fits(w, Pair::new(3, 8, 3)));
        assert!(Word::fits(
            Word::with_pair(w, Pair::NONE),
            Pair::new(7, 3, 3)
        ));
        assert_eq!(
            Word::pair_of(Word::with_pair(w, Pair::new(3, 8, 3))),
            Pair::new(3, 8, 3)
        );
    }
}
