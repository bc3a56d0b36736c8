//! The verdict word a connection carries in the tracker's record: the
//! session's cached verdict, read by the same lookup that finds the
//! connection.
//!
//! ```text
//! bits  0..24  policy generation that judged the connection (never 0)
//! bits 24..48  the ACL that opened it: its index + 1, or 0 for the default
//! bits 48..50  the stage that decided: 0 default, 1 from-lport, 2 to-lport
//! bit  50      the ACL had `persist-established`
//! bits 51..64  the port pair of the packets that opened it, as
//!              `Compiled::pair_code` numbers it (0: not kept)
//! ```
//!
//! A committed connection is always an allowed one (a denied packet commits
//! nothing), so the word needs no verdict bit: a word of the current
//! generation means "allowed, by this ACL". A word of an older generation
//! means the connection must be judged again before its packet passes.
//! Generations wrap after 2^24 - 1 policy changes; a connection that sees
//! no packet across exactly that many changes would be taken as current.

/// Generation bits.
pub const GEN_BITS: u32 = 24;
const GEN_MASK: u64 = (1 << GEN_BITS) - 1;
const ACL_SHIFT: u32 = 24;
const ACL_MASK: u64 = (1 << 24) - 1;
const STAGE_SHIFT: u32 = 48;
const PERSIST: u64 = 1 << 50;
const PAIR_SHIFT: u32 = 51;
/// Bits of the port pair's number.
pub const PAIR_BITS: u32 = 13;

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
    /// The ACL had `persist-established`.
    pub persist: bool,
    /// The port pair (inport, outport) of the packets that opened the
    /// connection, numbered by `Compiled::pair_code`; 0 when not kept.
    /// What lets a later `+new` packet of the connection take the word's
    /// verdict without meeting the ACLs (docs/firewall.md, "The session").
    pub pair: u16,
}

impl Word {
    /// Packs the word.
    pub fn encode(self) -> u64 {
        let acl = self.acl.map_or(0, |a| u64::from(a) + 1) & ACL_MASK;
        let stage = match self.stage {
            WordStage::Default => 0u64,
            WordStage::From => 1,
            WordStage::To => 2,
        };
        (u64::from(self.generation) & GEN_MASK)
            | (acl << ACL_SHIFT)
            | (stage << STAGE_SHIFT)
            | if self.persist { PERSIST } else { 0 }
            | (u64::from(self.pair) & ((1 << PAIR_BITS) - 1)) << PAIR_SHIFT
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
                _ => WordStage::Default,
            },
            persist: w & PERSIST != 0,
            pair: Word::pair_of(w),
        })
    }

    /// The port pair's number of a raw word (0 for none).
    #[inline(always)]
    pub fn pair_of(w: u64) -> u16 {
        (w >> PAIR_SHIFT) as u16
    }

    /// The word's ACL plus one, 0 for none (as [`Word::decode`]'s `acl`,
    /// without the rest).
    #[inline(always)]
    pub fn acl_plus_one(w: u64) -> u32 {
        ((w >> ACL_SHIFT) & ACL_MASK) as u32
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
        for acl in [None, Some(0), Some(7), Some((1 << 24) - 2)] {
            for stage in [WordStage::Default, WordStage::From, WordStage::To] {
                for (persist, pair) in [(false, 0), (true, 1), (false, (1 << PAIR_BITS) - 1)] {
                    let w = Word {
                        generation: 0x00ab_cdef,
                        acl,
                        stage,
                        persist,
                        pair,
                    };
                    assert_eq!(Word::decode(w.encode()), Some(w));
                    assert_eq!(Word::generation_of(w.encode()), 0x00ab_cdef);
                    assert_eq!(Word::acl_plus_one(w.encode()).checked_sub(1), acl, "{w:?}");
                    assert_eq!(Word::pair_of(w.encode()), pair, "{w:?}");
                }
            }
        }
        assert_eq!(Word::decode(0), None);
    }

    #[test]
    fn generations_skip_zero() {
        assert_eq!(next_gen(1), 2);
        assert_eq!(next_gen((1 << 24) - 1), 1);
    }
}
