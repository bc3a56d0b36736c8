//! What a new connection starts with: its expectation, translation and gateway.

use core::sync::atomic::Ordering::Relaxed;

use ctrack_table::Guard;

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

/// The expectation a new connection matched: its key, itself, and the
/// word of its control connection, read by the check that the control
/// connection still lives (the same record access, no second lookup).
#[derive(Debug, Clone, Copy)]
pub(super) struct Matched {
    pub(super) key: ExpKey,
    pub(super) x: Expectation,
    pub(super) master_word: u64,
}

impl Tracker {
    /// The expectation a new connection with `key` matches, if any. One
    /// whose control connection has ended is removed.
    pub(super) fn expected<A: Fam>(
        &self,
        guard: &Guard,
        key: &LookupKey<A>,
        now: u64,
        stats: &mut Stats,
    ) -> Option<Matched> {
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
        let Some(master_word) = self.master_word(guard, &x) else {
            if self.expect.take(&k, x.master) {
                stats.add(C::ExpectExpired, 1);
            }
            return None;
        };
        Some(Matched {
            key: k,
            x,
            master_word,
        })
    }

    /// True if an expectation's control connection still lives.
    pub(super) fn master_alive(&self, guard: &Guard, x: &Expectation) -> bool {
        self.master_word(guard, x).is_some()
    }

    /// The word of an expectation's control connection, if it still lives.
    fn master_word(&self, guard: &Guard, x: &Expectation) -> Option<u64> {
        match x.master.family() {
            Family::V4 => self.master_word_in::<u32>(guard, x),
            Family::V6 => self.master_word_in::<V6>(guard, x),
        }
    }

    fn master_word_in<A: Fam>(&self, guard: &Guard, x: &Expectation) -> Option<u64> {
        let e = A::table(self).get(guard, x.master.record())?;
        let c = e.record();
        let alive = *c.orig() == Tuple::of(&x.master_key)
            && c.zone() == x.master_key.zone
            && c.proto() == x.master_key.proto;
        alive.then(|| c.word())
    }

    /// What a new connection starts with, written into `setup` (in place:
    /// returning it cost a copy a commit): its translation (chosen here),
    /// gateway, the control connection that expected it, and its word (the
    /// action's, else the control connection's).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn setup<A: Fam>(
        &self,
        guard: &Guard,
        p: &Pkt<A>,
        action: &CtAction,
        key: &LookupKey<A>,
        expected: Option<&Matched>,
        now: u64,
        setup: &mut Setup<A>,
    ) -> Result<(), NatError> {
        *setup = Setup {
            word: action.word.or(expected.map(|m| m.master_word)).unwrap_or(0),
            ..Setup::default()
        };
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
        if let Some(Matched { x, .. }) = expected {
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
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{
        C, FTP_SEQ_AFTER_PORT, S, Sim, committed, ftp_data_syn, ftp_key, ftp_port, ftp_port_from,
        ftp_seg, hit, id_of, inspected, verdict,
    };
    use crate::alg::expect::DEFAULT_MAX;
    use crate::key::Dir;
    use crate::verdict::Verdict;
    use ctrack_wire::build::{Frame, L4};
    use ctrack_wire::tcp::flags::{ACK, PSH, RST, SYN};

    #[test]
    fn an_expectation_lets_its_data_connection_in_as_related_with_mark_and_label() {
        let sim = Sim::new();
        ftp_port(&sim, "commit,alg=ftp,mark=0x42,label=0x7");
        assert_eq!(sim.t.expectation_count(), 1);
        let v = sim.send(&ftp_data_syn(C, 20), "commit");
        assert_eq!(
            v,
            inspected(Verdict {
                mark: 0x42,
                label: 0x7,
                ..committed("new|rel|trk", id_of(&v))
            })
        );
        let e = sim.t.conn(id_of(&v), sim.now).unwrap().entry;
        assert_eq!((e.mark, e.label), (0x42, 0x7));
        assert_eq!(
            e.master.as_deref(),
            Some("src=10.0.0.1,dst=10.0.0.2,sport=40000,dport=21")
        );
        let s = sim.stats.get();
        assert_eq!((s.expectations_created, s.expectations_matched), (1, 1));
    }

    #[test]
    fn the_action_s_mark_overrides_the_inherited_one() {
        let sim = Sim::new();
        ftp_port(&sim, "commit,alg=ftp,mark=0x42");
        let v = sim.send(&ftp_data_syn(C, 20), "commit,mark=0x1/0xf");
        assert_eq!(
            v,
            inspected(Verdict {
                mark: 0x41,
                ..committed("new|rel|trk", id_of(&v))
            })
        );
    }

    /// The action's label is written over the inherited one under its
    /// mask, as Linux's datapath sets a new related connection's label
    /// (the master's first, then the action's, `ovs_ct_init_labels`): bits
    /// outside the mask stay the master's, and bits the action sets to
    /// zero are cleared.
    #[test]
    fn the_action_s_label_overrides_the_inherited_one_under_its_mask() {
        for (action, want) in [
            ("commit,label=0x100/0xf00", 0x1ff),
            ("commit,label=0/0xf", 0xf0),
            ("commit,label=0x5/0xf", 0xf5),
        ] {
            let sim = Sim::new();
            ftp_port(&sim, "commit,alg=ftp,label=0xff");
            let v = sim.send(&ftp_data_syn(C, 20), action);
            assert_eq!(v.label, want, "{action}");
            let e = sim.t.conn(id_of(&v), sim.now).unwrap().entry;
            assert_eq!(e.label, want, "{action}");
        }
    }

    #[test]
    fn every_packet_of_an_expected_connection_is_related() {
        let sim = Sim::new();
        ftp_port(&sim, "commit,alg=ftp");
        let id = sim.open(&ftp_data_syn(C, 20), "commit");
        let syn_ack = Frame::v4(
            C,
            S,
            L4::tcp_seg(40001, 20, SYN | ACK, 7000, 9001, 65535, b""),
        );
        let v = sim.send(&syn_ack, "commit");
        assert_eq!(v, inspected(hit("est|rel|rpl|trk", id, Dir::Reply)));
        let ack = Frame::v4(S, C, L4::tcp_seg(20, 40001, ACK, 9001, 7001, 65535, b""));
        let v = sim.send(&ack, "commit");
        assert_eq!(v, inspected(hit("est|rel|trk", id, Dir::Orig)));
    }

    #[test]
    fn an_expectation_is_consumed_by_the_connection_it_lets_in() {
        let sim = Sim::new();
        ftp_port(&sim, "commit,alg=ftp,mark=0x42");
        sim.open(&ftp_data_syn(C, 20), "commit");
        assert_eq!(sim.t.expectation_count(), 0);
        // Another connection to the same port is not expected.
        let v = sim.send(&ftp_data_syn(C, 2020), "commit");
        assert_eq!(v, committed("new|trk", id_of(&v)));
        assert_eq!(sim.stats.get().expectations_matched, 1);
    }

    #[test]
    fn without_commit_an_expected_connection_is_related_and_the_expectation_stays() {
        let sim = Sim::new();
        ftp_port(&sim, "commit,alg=ftp,mark=0x42");
        let v = sim.send(&ftp_data_syn(C, 20), "");
        assert_eq!(
            v,
            Verdict {
                mark: 0x42,
                ..verdict("new|rel|trk")
            }
        );
        assert_eq!(sim.t.expectation_count(), 1);
        assert_eq!(sim.t.table_len(), 1);
    }

    /// A connection that has expired, though not yet swept, holds its
    /// translated tuple no longer (Linux's `nf_conntrack_tuple_taken`
    /// passes over expired entries): a later client keeps the port.
    #[test]
    fn an_expired_connection_does_not_hold_its_translated_tuple() {
        let mut sim = Sim::new();
        let action = "commit,nat(src=198.51.100.1:1000-1001)";
        let from = |client: [u8; 4]| Frame::v4(client, S, L4::udp(1000, 53, b"q"));
        let first = sim.send(&from(C), action);
        let e = sim.t.conn(id_of(&first), sim.now).unwrap().entry;
        assert_eq!(e.reply.dport, Some(1000), "a port in its range is kept");
        let busy = sim.send(&from([10, 0, 0, 3]), action);
        let e = sim.t.conn(id_of(&busy), sim.now).unwrap().entry;
        assert_eq!(e.reply.dport, Some(1001), "taken while the first lives");
        sim.at(3_600_000);
        let later = sim.send(&from([10, 0, 0, 4]), action);
        let e = sim.t.conn(id_of(&later), sim.now).unwrap().entry;
        assert_eq!(e.reply.dport, Some(1000), "free once the first expired");
        // The first gave way under the shard lock: removed as expired,
        // not left under the tuple the later one took (the second, as
        // expired, waits for the sweep). (Mutation round 45: the check
        // under the lock looking for the packet's own tuple, or taking
        // an expired one for gone without removing it, passed.)
        assert_eq!(sim.t.table_len(), 2);
        assert_eq!(sim.stats.get().expired, 1);
    }

    /// A translation of the other family than the packet's is left out:
    /// the connection is committed untranslated.
    #[test]
    fn a_range_of_the_other_family_translates_nothing() {
        let sim = Sim::new();
        let (c, s) = ("fd00::1".parse().unwrap(), "fd00::2".parse().unwrap());
        let f = Frame::v6(c, s, L4::udp(1000, 53, b"q"));
        let v = sim.send(&f, "commit,nat(src=198.51.100.1)");
        assert!(v.committed, "{v:?}");
        assert_eq!(v.state.to_string(), "new|trk");
    }

    /// A gateway serves its own protocol only: `alg=ftp` on UDP, or
    /// `alg=tftp` on TCP, gives the connection no helper.
    #[test]
    fn a_gateway_of_another_protocol_is_not_attached() {
        let sim = Sim::new();
        let id = sim.open(&super::super::testing::udp(1000, true), "commit,alg=ftp");
        assert_eq!(sim.t.conn(id, sim.now).unwrap().entry.helper, None);
        let syn = Frame::v4(C, S, L4::tcp_seg(40000, 69, SYN, 1, 0, 65535, b""));
        let id = sim.open(&syn, "commit,alg=tftp");
        assert_eq!(sim.t.conn(id, sim.now).unwrap().entry.helper, None);
        assert_eq!(sim.t.expectation_count(), 0);
    }

    #[test]
    fn an_expectation_is_refused_after_its_control_connection_is_removed() {
        let sim = Sim::new();
        ftp_port(&sim, "commit,alg=ftp,mark=0x42");
        assert!(sim.flush_key(&ftp_key()));
        let v = sim.send(&ftp_data_syn(C, 20), "commit");
        assert_eq!(v, committed("new|trk", id_of(&v)));
        assert_eq!(sim.t.expectation_count(), 0);
        let s = sim.stats.get();
        assert_eq!((s.expectations_matched, s.expectations_expired), (0, 1));
    }

    /// A removed control connection's expectation waits for the next
    /// sweep, but holds its place no longer: its client's new control
    /// connection (in another slot) announces the same port, and is
    /// expected there (before, it clashed with the dead one's, and under
    /// translation moved to the next port; found by `firewall_frames`).
    #[test]
    fn a_removed_control_connection_s_expectation_holds_its_place_no_longer() {
        let sim = Sim::new();
        let first = ftp_port(&sim, "commit,alg=ftp");
        assert!(sim.flush_key(&ftp_key()));
        assert_eq!(sim.t.expectation_count(), 1);
        let second = ftp_port(&sim, "commit,alg=ftp");
        assert_ne!(first, second);
        let s = sim.stats.get();
        assert_eq!((s.expectations_created, s.expectations_refused), (2, 0));
        let v = sim.send(&ftp_data_syn(C, 20), "commit");
        assert_eq!(v, inspected(committed("new|rel|trk", id_of(&v))));
        let e = sim.t.conn(id_of(&v), sim.now).unwrap().entry;
        assert_eq!(
            e.master.as_deref(),
            Some("src=10.0.0.1,dst=10.0.0.2,sport=40000,dport=21")
        );
    }

    #[test]
    fn an_expectation_is_refused_after_its_control_connection_expired() {
        let mut sim = Sim::new();
        let control = ftp_port(&sim, "commit,alg=ftp");
        // A reset closes the control connection (30 s); a sweep frees it.
        let rst = ftp_seg(C, true, RST, FTP_SEQ_AFTER_PORT, 0, b"");
        let v = sim.send(&rst, "commit");
        assert_eq!(v, inspected(hit("est|trk", control, Dir::Orig)));
        sim.at(31_000);
        assert_eq!(sim.sweep(sim.now, usize::MAX).expired, 1);
        // The sweep ends the expectation with its control connection.
        assert_eq!(sim.t.expectation_count(), 0);
        assert_eq!(sim.stats.get().expectations_expired, 1);
        let v = sim.send(&ftp_data_syn(C, 20), "commit");
        assert_eq!(v, committed("new|trk", id_of(&v)));
    }

    #[test]
    fn set_max_expectations_bounds_them() {
        let sim = Sim::new();
        assert_eq!(sim.t.max_expectations(), DEFAULT_MAX);
        sim.t.set_max_expectations(1);
        assert_eq!(sim.t.max_expectations(), 1);
        ftp_port(&sim, "commit,alg=ftp");
        // A second client's PORT is refused: the table holds its one.
        let c2 = [10, 0, 0, 3];
        let second = ftp_port_from(&sim, c2, "commit,alg=ftp");
        assert_eq!(sim.t.expectation_count(), 1);
        assert_eq!(sim.stats.get().expectations_refused, 1);
        let v = sim.send(&ftp_data_syn(c2, 20), "commit");
        assert_eq!(v, committed("new|trk", id_of(&v)));
        // Once the first is consumed, there is room again.
        sim.open(&ftp_data_syn(C, 20), "commit");
        assert_eq!(sim.t.expectation_count(), 0);
        let again = b"PORT 10,0,0,3,156,66\r\n";
        let v = sim.send(
            &ftp_seg(c2, true, PSH | ACK, FTP_SEQ_AFTER_PORT, 501, again),
            "commit",
        );
        assert_eq!(v, inspected(hit("est|trk", second, Dir::Orig)));
        assert_eq!(sim.t.expectation_count(), 1);
        assert_eq!(sim.stats.get().expectations_created, 2);
    }
}
