//! The test fixture shared by the table's unit tests, its stress tests and
//! loom models, and the table fuzz body in `ctrack-fuzz`: a record with a
//! key, an optional secondary key, a zone instance, an expiry and a value,
//! and a context that hashes keys with a function of the test's choosing.
//!
//! Built for the crate's own tests and with the `testing` feature (which
//! the crate's dev-dependency on itself and `ctrack-fuzz` turn on); not
//! part of the table's API. Under `--cfg loom` its atomics are loom's.

use core::fmt;

use crate::sync::{AtomicU64, Ordering};
use crate::{Context, Guard, Hashes, Header, InsertError, Record, Removal, Table, pin};

/// A record of the tests.
#[derive(Debug, Default)]
pub struct Rec {
    h: Header,
    /// Primary key (never 0 in the tests).
    pub key: u64,
    /// Secondary key (0: none).
    pub alt: u64,
    /// Zone instance.
    pub inst: u64,
    /// Expiry (ms), changed by refreshes under the entry lock.
    pub exp: AtomicU64,
    /// A value the tests check, changed under the entry lock.
    pub val: AtomicU64,
}

impl Record for Rec {
    fn header(&self) -> &Header {
        &self.h
    }
}

impl Rec {
    /// Sets every field of a fresh slot, as [`Writer::insert`]'s `init`
    /// must.
    ///
    /// [`Writer::insert`]: crate::Writer::insert
    pub fn fill(&mut self, key: u64, alt: u64, inst: u64, exp: u64, val: u64) {
        self.key = key;
        self.alt = alt;
        self.inst = inst;
        self.exp.store(exp, Ordering::Relaxed);
        self.val.store(val, Ordering::Relaxed);
    }

    /// True if `k` is the record's primary or secondary key.
    pub fn has_key(&self, k: u64) -> bool {
        self.key == k || self.alt == k
    }
}

/// A well-spread hash (splitmix64's finaliser).
pub fn mix(k: u64) -> u64 {
    let mut z = k.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The context of [`Rec`]: keys hashed by `H`.
pub struct Ctx<H = fn(u64) -> u64> {
    hash: H,
}

/// The context hashing with [`mix`].
pub const MIXED: Ctx = Ctx::<fn(u64) -> u64>::new(mix);

impl<H> fmt::Debug for Ctx<H> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Ctx").finish_non_exhaustive()
    }
}

impl<H> Ctx<H> {
    /// A context hashing keys with `hash`.
    pub const fn new(hash: H) -> Self {
        Ctx { hash }
    }
}

impl<H: Fn(u64) -> u64> Ctx<H> {
    /// The hash of key `k`.
    pub fn hash(&self, k: u64) -> u64 {
        (self.hash)(k)
    }

    /// The hashes of a record with keys `key` and `alt` (0: none).
    pub fn hashes_of(&self, key: u64, alt: u64) -> Hashes {
        Hashes {
            primary: self.hash(key),
            secondary: (alt != 0).then(|| self.hash(alt)),
        }
    }

    /// Inserts a record unless one of `key` or `alt` (as either key) is
    /// live; returns whether it did. Its value is `val`.
    #[allow(clippy::too_many_arguments)]
    pub fn insert_new(
        &self,
        t: &Table<Rec>,
        key: u64,
        alt: u64,
        inst: u64,
        exp: u64,
        val: u64,
    ) -> Result<bool, InsertError> {
        let g = pin();
        let h = self.hashes_of(key, alt);
        let mut w = t.write(&g, &h);
        let held = |k: u64| w.find(self.hash(k), |r| r.has_key(k)).is_some();
        if held(key) || (alt != 0 && held(alt)) {
            return Ok(false);
        }
        w.insert(self, &h, 0, |r| r.fill(key, alt, inst, exp, val))?;
        Ok(true)
    }

    /// Removes the live record whose primary key is `key`; whether there
    /// was one to remove.
    pub fn remove(&self, t: &Table<Rec>, key: u64) -> bool {
        let g = pin();
        let Some(e) = t.find(&g, self.hash(key), |r| r.key == key) else {
            return false;
        };
        let h = self.hashes(e.record(), &g);
        t.write(&g, &h).remove(self, e, Removal::Deleted)
    }
}

impl<H: Fn(u64) -> u64> Context<Rec> for Ctx<H> {
    fn hashes(&self, r: &Rec, _: &Guard) -> Hashes {
        self.hashes_of(r.key, r.alt)
    }
    fn instance(&self, r: &Rec) -> u64 {
        r.inst
    }
    fn expiry(&self, r: &Rec, _: &Guard) -> u64 {
        r.exp.load(Ordering::Relaxed)
    }
}
