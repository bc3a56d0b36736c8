//! What a fuzz body reports about one input: how many packets it pushed
//! through the code under test, and (when asked) a few *features* of what
//! happened — verdicts, error kinds, protocol paths — that the campaign
//! driver uses as a cheap stand-in for coverage.

use std::hash::{BuildHasher, Hash};

use foldhash::fast::FixedState;

/// Counts and features of one run of a body; reused across inputs.
#[derive(Debug, Default)]
pub struct Probe {
    units: u64,
    features: Vec<u64>,
    record: bool,
}

impl Probe {
    /// A probe that only counts.
    pub fn counting() -> Self {
        Self::default()
    }

    /// A probe that counts and records features.
    pub fn recording() -> Self {
        Self {
            record: true,
            ..Self::default()
        }
    }

    /// Units (packets, segments, fragments... see each target's unit) the
    /// body pushed through since the last [`Probe::clear`].
    pub fn units(&self) -> u64 {
        self.units
    }

    /// Adds `n` units.
    pub fn count(&mut self, n: u64) {
        self.units += n;
    }

    /// Records that the outcome `what` happened at the place `tag` (a
    /// small constant per call site), if this probe records features.
    #[inline]
    pub fn feature<T: Hash>(&mut self, tag: u32, what: T) {
        if self.record {
            let h = FixedState::with_seed(u64::from(tag)).hash_one(what);
            self.features.push(h);
        }
    }

    /// True if this probe records features (bodies may skip computing
    /// costly ones when it does not).
    pub fn records(&self) -> bool {
        self.record
    }

    /// The features recorded since the last [`Probe::clear`], in order,
    /// with repeats.
    pub fn features(&self) -> &[u64] {
        &self.features
    }

    /// Forgets counts and features, ready for the next input.
    pub fn clear(&mut self) {
        self.units = 0;
        self.features.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_and_records_only_when_asked() {
        let mut p = Probe::counting();
        p.count(3);
        p.feature(1, 7u8);
        assert_eq!((p.units(), p.features().len()), (3, 0));
        let mut p = Probe::recording();
        p.feature(1, 7u8);
        p.feature(2, 7u8);
        p.feature(1, 7u8);
        let f = p.features();
        assert_eq!(f.len(), 3);
        assert_ne!(f[0], f[1], "the tag is part of the feature");
        assert_eq!(f[0], f[2]);
        p.clear();
        assert_eq!((p.units(), p.features().len()), (0, 0));
    }
}
