//! Naming records: ids, lookup hints, and references to live records with
//! their entry locks.

use core::fmt;
use core::ops::Deref;

use crate::Record;

use super::MAX_SHARDS;

const SLOT_BITS: u32 = 23;
const SLOT_MASK: u32 = (1 << SLOT_BITS) - 1;

/// Names a record while it lives: its shard and slot. After the record is
/// removed the id may name a later record; compare keys to be sure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RecordId(u32);

impl RecordId {
    pub(crate) fn new(shard: usize, slot: u32) -> RecordId {
        debug_assert!(shard < MAX_SHARDS && slot <= SLOT_MASK);
        RecordId(((shard as u32) << SLOT_BITS) | slot)
    }

    /// The shard.
    pub fn shard(self) -> usize {
        (self.0 >> SLOT_BITS) as usize
    }

    pub(crate) fn slot(self) -> u32 {
        self.0 & SLOT_MASK
    }

    /// The id as a number (31 bits: eight of shard, 23 of slot).
    pub fn as_u32(self) -> u32 {
        self.0
    }

    /// The id from [`RecordId::as_u32`].
    pub fn from_u32(v: u32) -> RecordId {
        RecordId(v)
    }
}

/// Where a lookup expects to find its record, from
/// [`Table::probe`](crate::Table::probe): the record itself, found from
/// its index entry then, valid while the guard it was probed under is
/// pinned. A hint is only a guess: the record is checked like any other.
///
/// It holds the record's reference rather than the index entry's number,
/// so that the lookup it serves ([`Table::find_hinted`](crate::Table::find_hinted))
/// does not resolve the number again: that took about 35 instructions a
/// packet (callgrind, `bench policy stage`), the probe had done it for
/// its prefetch already.
pub struct Hint<'g, R>(pub(crate) Option<EntryRef<'g, R>>);

impl<'g, R> Hint<'g, R> {
    /// Whether the probe guessed a record (else the lookup is likely to
    /// find none: see [`Table::seen`](crate::Table::seen)).
    #[inline]
    pub fn is_guess(self) -> bool {
        self.0.is_some()
    }

    /// The record guessed (live or not, and not necessarily the one the
    /// probe's hash is for), to prefetch what it points to; `None` for
    /// an empty guess.
    #[inline]
    pub fn record(self) -> Option<&'g R> {
        self.0.map(|e| e.rec)
    }
}

impl<R> Default for Hint<'_, R> {
    fn default() -> Self {
        Hint(None)
    }
}

impl<R> Clone for Hint<'_, R> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<R> Copy for Hint<'_, R> {}

impl<R> fmt::Debug for Hint<'_, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Hint").field(&self.0).finish()
    }
}

/// The home bucket of a hash in its shard's index, from
/// [`Table::prefetch_home`](crate::Table::prefetch_home), for
/// [`Table::probe`](crate::Table::probe); valid while the guard it was
/// found under is pinned.
#[derive(Clone, Copy, Default)]
pub struct Home<'g> {
    pub(crate) shard: u32,
    pub(crate) bucket: Option<&'g crate::index::Bucket>,
}

impl fmt::Debug for Home<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Home")
            .field("shard", &self.shard)
            .field("bucket", &self.bucket.map(|b| b as *const _))
            .finish()
    }
}

/// The count of entries a shard's index had taken when a search began,
/// from [`Table::seen`](crate::Table::seen), for
/// [`Writer::unchanged_since`](crate::Writer::unchanged_since); or
/// [`Seen::NOTHING`], which tells nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Seen(pub(crate) u32);

impl Seen {
    /// A count no search took: a writer always searches again.
    pub const NOTHING: Seen = Seen(u32::MAX);
}

/// A live record found in the table, valid while the guard it was found
/// under is pinned.
pub struct EntryRef<'g, R> {
    pub(crate) id: RecordId,
    pub(crate) rec: &'g R,
}

impl<R> Clone for EntryRef<'_, R> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<R> Copy for EntryRef<'_, R> {}

impl<R> fmt::Debug for EntryRef<'_, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EntryRef").field("id", &self.id).finish()
    }
}

impl<'g, R: Record> EntryRef<'g, R> {
    /// The record's id.
    pub fn id(&self) -> RecordId {
        self.id
    }

    /// The record. Fields the table's writers change (through
    /// [`EntryLock`]) may change while it is read.
    pub fn record(&self) -> &'g R {
        self.rec
    }

    /// True while the record is in the table.
    pub fn is_live(&self) -> bool {
        self.rec.header().is_live()
    }

    /// Takes the record's lock; `None` if the record was removed since it
    /// was found. Never take a shard lock (a [`Writer`](crate::Writer))
    /// while holding it.
    #[inline]
    pub fn lock(&self) -> Option<EntryLock<'g, R>> {
        self.rec.header().lock()?;
        Some(EntryLock { rec: self.rec })
    }
}

/// A record's lock, held: the record stays in the table until it is
/// released.
pub struct EntryLock<'g, R: Record> {
    rec: &'g R,
}

impl<R: Record> fmt::Debug for EntryLock<'_, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EntryLock").finish_non_exhaustive()
    }
}

impl<R: Record> Deref for EntryLock<'_, R> {
    type Target = R;
    fn deref(&self) -> &R {
        self.rec
    }
}

impl<R: Record> Drop for EntryLock<'_, R> {
    fn drop(&mut self) {
        self.rec.header().unlock();
    }
}

#[cfg(test)]
mod tests {
    use super::{Hint, MAX_SHARDS, RecordId, SLOT_MASK};
    use crate::testing::{MIXED, Rec, mix};
    use crate::{Table, TableConfig, pin};

    /// What a probe, a found record and its lock show when printed (in a
    /// test's failure, or a user's log): the record's id, never its
    /// contents; a copied hint guesses what the original did.
    #[test]
    fn names_print_the_record_they_name() {
        let t = Table::<Rec>::new(TableConfig {
            shards: 1,
            capacity: 16,
        });
        assert!(MIXED.insert_new(&t, 5, 0, 0, u64::MAX, 50).unwrap());
        let g = pin();
        let home = t.prefetch_home(&g, mix(5));
        assert!(format!("{home:?}").starts_with("Home { shard: 0, bucket: Some(0x"));
        let hint = t.probe(home, mix(5));
        #[allow(clippy::clone_on_copy)]
        let copy = hint.clone();
        assert!(copy.is_guess());
        let e = t.find(&g, mix(5), |r| r.key == 5).unwrap();
        let id = e.id().as_u32();
        assert_eq!(
            format!("{e:?}"),
            format!("EntryRef {{ id: RecordId({id}) }}")
        );
        assert_eq!(
            format!("{copy:?}"),
            format!("Hint(Some(EntryRef {{ id: RecordId({id}) }}))")
        );
        assert_eq!(format!("{:?}", Hint::<Rec>::default()), "Hint(None)");
        assert_eq!(format!("{:?}", e.lock().unwrap()), "EntryLock { .. }");
    }

    /// Every shard and slot round-trips, and an id leaves bit 31 free (a
    /// connection id keeps its address family there).
    #[test]
    fn ids_name_every_shard_in_31_bits() {
        for shard in [0, 1, 63, 64, 200, MAX_SHARDS - 1] {
            for slot in [0, 1, SLOT_MASK] {
                let id = RecordId::new(shard, slot);
                assert_eq!((id.shard(), id.slot()), (shard, slot));
                assert_eq!(RecordId::from_u32(id.as_u32()), id);
                assert_eq!(id.as_u32() >> 31, 0);
            }
        }
    }
}
