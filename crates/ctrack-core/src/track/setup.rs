//! What a new connection starts with: its expectation, translation and gateway.

use super::packet::Pkt;
use super::shared::expiry;
use super::tracker::{Fam, Tracker};
use crate::action::{CtAction, Nat, NatKind};
use crate::alg::expect::{ExpKey, Expectation};
use crate::alg::helper::Helper;
use crate::conn::{DNAT, SNAT, Setup};
use crate::key::{Family, LookupKey, Tuple, V6};
use crate::nat::{self, NatError};
use crate::verdict::C;
use crate::verdict::Stats;
use core::sync::atomic::Ordering::Relaxed;
use ctrack_table::Guard;

impl Tracker {
    /// The expectation a new connection with `key` matches, if any, with
    /// its key. One whose control connection has ended is removed.
    pub(super) fn expected<A: Fam>(
        &self,
        guard: &Guard,
        key: &LookupKey<A>,
        now: u64,
        stats: &mut Stats,
    ) -> Option<(ExpKey, Expectation)> {
        let k = ExpKey {
            zone: key.zone,
            generation: key.generation,
            family: A::FAMILY,
            proto: key.proto,
            src: key.tuple.src.to_u128(),
            dst: key.tuple.dst.to_u128(),
            dport: (key.tuple.dst_l4 >> 16) as u16,
        };
        let x = self.expect.find(&k, now)?;
        if !self.master_alive(guard, &x) {
            if self.expect.take(&k, x.master) {
                stats.add(C::ExpectExpired, 1);
            }
            return None;
        }
        Some((k, x))
    }

    /// True if an expectation's control connection still lives.
    pub(super) fn master_alive(&self, guard: &Guard, x: &Expectation) -> bool {
        match x.master.family() {
            Family::V4 => self.master_alive_in::<u32>(guard, x),
            Family::V6 => self.master_alive_in::<V6>(guard, x),
        }
    }

    pub(super) fn master_alive_in<A: Fam>(&self, guard: &Guard, x: &Expectation) -> bool {
        A::table(self)
            .get(guard, x.master.record())
            .is_some_and(|e| {
                let c = e.record();
                *c.orig() == Tuple::of(&x.master_key)
                    && c.zone() == x.master_key.zone
                    && c.proto() == x.master_key.proto
            })
    }

    /// What a new connection starts with: its translation (chosen here),
    /// gateway, and the control connection that expected it.
    pub(super) fn setup<A: Fam>(
        &self,
        guard: &Guard,
        p: &Pkt<A>,
        action: &CtAction,
        key: &LookupKey<A>,
        expected: Option<&(ExpKey, Expectation)>,
        now: u64,
    ) -> Result<Setup<A>, NatError> {
        let mut setup = Setup::default();
        let table = A::table(self);
        let taken = |cand: &Tuple<A>| {
            let k = LookupKey {
                tuple: *cand,
                ..*key
            };
            let policy = self.shared.policy(key.zone, guard);
            table
                .find(guard, self.hash_of(&k), |c| {
                    c.direction_of(&k, guard).is_some() && expiry(c, policy) > now
                })
                .is_some()
        };
        if let Some((_, x)) = expected {
            setup.master = Some(Tuple::of(&x.master_key));
            if action.nat.is_some()
                && let Some(t) = x.target
            {
                // Where the control connection's gateway said its packets
                // go: no search (the port was announced).
                let o = key.tuple;
                let to = Tuple {
                    src: A::from_u128(t.src),
                    dst: A::from_u128(t.dst),
                    src_l4: o.src_l4,
                    dst_l4: (o.dst_l4 & 0xffff) | (u32::from(t.dport) << 16),
                };
                if to != o {
                    let reply = to.reverse();
                    if taken(&reply) {
                        return Err(NatError::Exhausted);
                    }
                    setup.reply = Some(reply);
                    setup.nat = if to.src != o.src { SNAT } else { 0 }
                        | if to.dst != o.dst || to.dst_l4 != o.dst_l4 {
                            DNAT
                        } else {
                            0
                        };
                }
            }
        } else if let Some(alg) = action.alg
            && alg.proto() == p.proto
        {
            setup.helper = Some(Helper::new(alg));
        }
        // A connection expected by an untranslated control connection is
        // translated by the action's range, as any other (Linux).
        if setup.reply.is_none()
            && let Some(Nat {
                range: Some(range),
                mode,
            }) = action.nat
        {
            let mut random = || self.shared.hasher.mix(self.rng.fetch_add(1, Relaxed)) as u32;
            let req = nat::Request {
                proto: key.proto,
                zone: key.zone,
                range: &range,
                mode,
                hasher: &self.shared.hasher,
            };
            match nat::choose(&key.tuple, &req, &mut random, taken) {
                Ok(reply) => {
                    setup.reply = Some(reply);
                    setup.nat = match range.kind {
                        NatKind::Src => SNAT,
                        NatKind::Dst => DNAT,
                    };
                }
                // A range of the other family does not apply.
                Err(NatError::Family) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(setup)
    }
}
