//! Counters of everything the tracker decides.
//!
//! Sans-IO, as `quinn-proto` keeps its statistics: the tracker owns no
//! counters. Each call adds to a [`Stats`] value its caller owns (one per
//! worker thread, written without any atomic or shared cache line), and
//! whoever wants the totals sums the workers' values with
//! [`Stats::merge`].

use crate::verdict::InvalidReason;

/// The counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct Stats {
    /// Packets processed.
    pub packets: u64,
    /// Packets reported `new`.
    pub new: u64,
    /// Packets reported `est`.
    pub established: u64,
    /// Packets reported `rel`.
    pub related: u64,
    /// Packets reported `inv`.
    pub invalid: u64,
    /// `inv` packets by reason, in [`InvalidReason::ALL`] order.
    pub invalid_by_reason: [u64; InvalidReason::ALL.len()],
    /// Connections committed.
    pub committed: u64,
    /// Commits refused because the table held its maximum.
    pub refused_table_full: u64,
    /// Commits refused because the zone held its limit.
    pub refused_zone_limit: u64,
    /// Connections removed to make room for a new one (early drop).
    pub evicted: u64,
    /// Connections ended by a packet that starts a new one in their place
    /// (TCP reuse after close, `force`).
    pub replaced: u64,
    /// Connections freed after expiring.
    pub expired: u64,
    /// Connections removed by flushes.
    pub flushed: u64,
    /// Commits refused because no free translated tuple was found.
    pub refused_nat_exhausted: u64,
    /// Commits refused because the reply tuple was another connection's
    /// ([`crate::Refusal::Clash`]).
    pub refused_clash: u64,
    /// Packets whose addresses or ports were translated.
    pub translated: u64,
    /// Expectations created by application-layer gateways.
    pub expectations_created: u64,
    /// New connections that matched an expectation (`rel`).
    pub expectations_matched: u64,
    /// Expectations not created because a limit was reached.
    pub expectations_refused: u64,
    /// Expectations that expired (or whose control connection ended)
    /// unused.
    pub expectations_expired: u64,
    /// Packets whose payload a gateway rewrote (FTP under NAT).
    pub alg_rewritten: u64,
}

impl Stats {
    /// The count of `inv` packets for `reason`.
    pub fn invalid_count(&self, reason: InvalidReason) -> u64 {
        self.invalid_by_reason[reason as usize]
    }

    /// Adds another worker's counts to these.
    pub fn merge(&mut self, o: &Stats) {
        for c in C::ALL {
            self.add(c, o.get(c));
        }
        for (a, b) in self.invalid_by_reason.iter_mut().zip(o.invalid_by_reason) {
            *a += b;
        }
    }

    /// Adds `n` to counter `c`.
    #[inline]
    pub(crate) fn add(&mut self, c: C, n: u64) {
        *self.slot(c) += n;
    }

    /// Counts `n` `inv` packets of reason `r` (their `invalid` count is
    /// separate).
    #[inline]
    pub(crate) fn invalid_many(&mut self, r: InvalidReason, n: u64) {
        self.invalid_by_reason[r as usize] += n;
    }

    fn get(&self, c: C) -> u64 {
        let mut copy = *self;
        *copy.slot(c)
    }

    #[inline]
    fn slot(&mut self, c: C) -> &mut u64 {
        match c {
            C::Packets => &mut self.packets,
            C::New => &mut self.new,
            C::Established => &mut self.established,
            C::Related => &mut self.related,
            C::Invalid => &mut self.invalid,
            C::Committed => &mut self.committed,
            C::RefusedTableFull => &mut self.refused_table_full,
            C::RefusedZoneLimit => &mut self.refused_zone_limit,
            C::Evicted => &mut self.evicted,
            C::Replaced => &mut self.replaced,
            C::Expired => &mut self.expired,
            C::Flushed => &mut self.flushed,
            C::RefusedNatExhausted => &mut self.refused_nat_exhausted,
            C::RefusedClash => &mut self.refused_clash,
            C::Translated => &mut self.translated,
            C::ExpectCreated => &mut self.expectations_created,
            C::ExpectMatched => &mut self.expectations_matched,
            C::ExpectRefused => &mut self.expectations_refused,
            C::ExpectExpired => &mut self.expectations_expired,
            C::AlgRewritten => &mut self.alg_rewritten,
        }
    }
}

impl core::ops::AddAssign<&Stats> for Stats {
    fn add_assign(&mut self, o: &Stats) {
        self.merge(o);
    }
}

impl C {
    const ALL: [C; 20] = [
        C::Packets,
        C::New,
        C::Established,
        C::Related,
        C::Invalid,
        C::Committed,
        C::RefusedTableFull,
        C::RefusedZoneLimit,
        C::Evicted,
        C::Replaced,
        C::Expired,
        C::Flushed,
        C::RefusedNatExhausted,
        C::RefusedClash,
        C::Translated,
        C::ExpectCreated,
        C::ExpectMatched,
        C::ExpectRefused,
        C::ExpectExpired,
        C::AlgRewritten,
    ];
}

/// The counters the tracker adds to, by name.
#[derive(Debug, Clone, Copy)]
#[repr(usize)]
pub(crate) enum C {
    Packets,
    New,
    Established,
    Related,
    Invalid,
    Committed,
    RefusedTableFull,
    RefusedZoneLimit,
    Evicted,
    Replaced,
    Expired,
    Flushed,
    RefusedNatExhausted,
    RefusedClash,
    Translated,
    ExpectCreated,
    ExpectMatched,
    ExpectRefused,
    ExpectExpired,
    AlgRewritten,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workers_merge() {
        let mut a = Stats::default();
        let mut b = Stats::default();
        a.add(C::Packets, 3);
        a.invalid_many(InvalidReason::ZeroPort, 1);
        b.add(C::Packets, 4);
        b.add(C::AlgRewritten, 1);
        b.invalid_many(InvalidReason::ZeroPort, 1);
        b.invalid_many(InvalidReason::NotIp, 1);
        a += &b;
        assert_eq!(a.packets, 7);
        assert_eq!(a.alg_rewritten, 1);
        assert_eq!(a.invalid_count(InvalidReason::ZeroPort), 2);
        assert_eq!(a.invalid_count(InvalidReason::NotIp), 1);
        // Every counter has its field.
        let mut all = Stats::default();
        for (i, c) in C::ALL.into_iter().enumerate() {
            all.add(c, i as u64 + 1);
        }
        let mut twice = all;
        twice.merge(&all);
        for (i, c) in C::ALL.into_iter().enumerate() {
            assert_eq!(twice.get(c), 2 * (i as u64 + 1));
        }
    }
}
