//! The firewall: the tracker, the reassembler in front of it, the current
//! compiled policy, and the entry points a datapath calls.

use std::sync::{Arc, Mutex};

use arc_swap::ArcSwap;
use ctrack_core::frag::Offer;
use ctrack_core::{FragConfig, FragError, LinkType, Reassembler, Time, Tracker};

use super::compiled::Compiled;
use super::decision::{AclRef, Decision, DropReason, FwStats, Stage};
use super::word::next_gen;
use crate::classify::CompileError;
use crate::meter::Limit;
use crate::model::Policy;
use crate::reject::{DEFAULT_BURST, DEFAULT_RATE};

/// A packet leaving the firewall, with what was decided. Every packet the
/// firewall is given comes back once (a fragment when its datagram is
/// whole or dropped), whatever its verdict: the caller forwards those
/// allowed.
#[derive(Debug)]
pub struct FwOut<T> {
    /// The frame (translated where NAT applies).
    pub frame: Vec<u8>,
    /// The caller's tag.
    pub tag: T,
    /// The decision (for a fragment: its datagram's).
    pub decision: Decision,
    /// For `reject`: the answer to send back out of the port the packet
    /// came from (on the first fragment of a datagram only).
    pub reply: Option<Vec<u8>>,
}

/// What one call hands back: the packets, the fragments the reassembler
/// dropped, and the worker's counters.
#[derive(Debug)]
pub struct FwOutputs<T> {
    /// Packets, in order.
    pub out: Vec<FwOut<T>>,
    /// Fragments dropped by the reassembler, with why.
    pub dropped: Vec<(T, FragError)>,
    /// The counters.
    pub stats: FwStats,
}

impl<T> Default for FwOutputs<T> {
    fn default() -> Self {
        FwOutputs {
            out: Vec::new(),
            dropped: Vec::new(),
            stats: FwStats::default(),
        }
    }
}

/// The single-pass firewall. `&self` throughout: one serves every worker.
#[derive(Debug)]
pub struct Firewall<T> {
    pub(super) tracker: Tracker,
    frags: Reassembler<T>,
    policy: ArcSwap<Compiled>,
    /// The limit on `reject` answers, one for all workers.
    reject_limit: ArcSwap<Limit>,
    change: Mutex<()>,
}

impl<T> Firewall<T> {
    /// A firewall enforcing `policy` over `tracker`, reassembling with
    /// `frag`.
    pub fn new(tracker: Tracker, frag: FragConfig, policy: Policy) -> Result<Self, CompileError> {
        Ok(Firewall {
            tracker,
            frags: Reassembler::new(frag),
            policy: ArcSwap::from_pointee(Compiled::new(policy, 1)?),
            reject_limit: ArcSwap::from_pointee(Limit::new(DEFAULT_RATE, DEFAULT_BURST)),
            change: Mutex::new(()),
        })
    }

    /// The tracker.
    pub fn tracker(&self) -> &Tracker {
        &self.tracker
    }

    /// The reassembler.
    pub fn reassembler(&self) -> &Reassembler<T> {
        &self.frags
    }

    /// The policy now in force.
    pub fn policy(&self) -> Arc<Compiled> {
        self.policy.load_full()
    }

    /// Calls `f` with the policy in force, without taking a reference
    /// count on it (for a caller on the packet path, where many threads
    /// would contend for that count).
    pub fn with_policy<R>(&self, f: impl FnOnce(&Compiled) -> R) -> R {
        f(&self.policy.load())
    }

    pub(super) fn policy_guard(&self) -> arc_swap::Guard<Arc<Compiled>> {
        self.policy.load()
    }

    /// Sets the limit on `reject` answers, for all the workers together:
    /// `per_second` answers a second, `burst` at once (by default
    /// [`DEFAULT_RATE`] and [`DEFAULT_BURST`], as Linux limits its ICMP
    /// errors). A rate of 0 allows the burst and then nothing; a burst of
    /// 0, no answer. A policy whose `[copp]` names a `reject` meter is
    /// limited by that meter instead, while it is in force.
    pub fn set_reject_limit(&self, per_second: u32, burst: u32) {
        self.reject_limit
            .store(Arc::new(Limit::new(per_second, burst)));
    }

    /// Replaces the policy, atomically: a packet sees the old policy or
    /// the new, never a mix. Existing connections are judged again lazily,
    /// at their next packet (their verdict word names the old generation):
    /// nothing is walked here, so the packet path never stalls. Returns
    /// the new generation; on error the running policy stays.
    pub fn set_policy(&self, policy: Policy) -> Result<u32, CompileError> {
        let _one_at_a_time = self.change.lock().unwrap_or_else(|e| e.into_inner());
        let generation = next_gen(self.policy.load().generation);
        let compiled = Compiled::new(policy, generation)?;
        self.policy.store(Arc::new(compiled));
        Ok(generation)
    }

    /// Processes one Ethernet frame at `now`: reassembly, the policy, the
    /// tracker, translation and gateways. What comes back goes to `outs`.
    pub fn process(&self, frame: Vec<u8>, tag: T, now: Time, outs: &mut FwOutputs<T>) {
        self.expire(now, &mut outs.dropped, &mut outs.stats);
        let pol = self.policy.load();
        // A frame dropped before reassembly, as it is.
        let refuse = |outs: &mut FwOutputs<T>, frame, tag, d: Decision| {
            outs.stats.count(&d);
            outs.out.push(FwOut {
                frame,
                tag,
                decision: d,
                reply: None,
            });
        };
        if frame.len() < 14 {
            let d = Decision::drop(Stage::Default, AclRef::Runt, DropReason::Runt);
            return refuse(outs, frame, tag, d);
        }
        let (inport, outport) = (pol.port_at(&frame, 6), pol.port_at(&frame, 0));
        if pol.has_security && !pol.secure_between(&frame, inport, outport) {
            // Before reassembly too: a fragment the port may not send is
            // not held.
            let d = Decision::drop(
                Stage::PortSecurity,
                AclRef::PortSecurity,
                DropReason::PortSecurity,
            );
            return refuse(outs, frame, tag, d);
        }
        let zone = pol.zone_for(inport, outport);
        let checksums = self.tracker.checksums();
        match self
            .frags
            .offer(frame, tag, LinkType::Ethernet, zone, now, checksums)
        {
            Offer::Pass(mut frame, tag) | Offer::Refused(mut frame, tag, _) => {
                let (decision, reply) = self.judge(&pol, &mut frame, now, &mut outs.stats);
                outs.out.push(FwOut {
                    frame,
                    tag,
                    decision,
                    reply,
                });
            }
            Offer::Held => {}
            Offer::Complete(mut d) => {
                let mut datagram = d.take_frame();
                let (decision, mut reply) = self.judge(&pol, &mut datagram, now, &mut outs.stats);
                for (frame, tag) in d.fragments(&datagram) {
                    outs.out.push(FwOut {
                        frame,
                        tag,
                        decision,
                        reply: reply.take(),
                    });
                }
            }
            Offer::Dropped(tags) => {
                outs.stats.count_many(&fragment_drop(), tags.len() as u64);
                outs.dropped.extend(tags);
            }
        }
    }

    /// Drops datagrams whose time ran out; their fragments' tags go to
    /// `dropped`, and each is counted in `stats` as a fragment's drop,
    /// as the reassembler's refusals are in [`Firewall::process`]: every
    /// packet offered is counted once, by its final verdict.
    pub fn expire(&self, now: Time, dropped: &mut Vec<(T, FragError)>, stats: &mut FwStats) {
        let before = dropped.len();
        self.frags.expire_why(now, dropped);
        let n = dropped.len().saturating_sub(before);
        stats.count_many(&fragment_drop(), n as u64);
    }

    /// Answers a rejected packet, within the limit: the policy's `[copp]
    /// reject` meter if it names one, else the firewall's own. Where the
    /// limit is spent, nothing more is done; otherwise it is asked once
    /// the packet is known to be answerable and before the answer is
    /// built. So a flood over the limit costs a load of the limit's word
    /// a packet (docs/attacks.md, "Reject flood").
    pub(super) fn reject(
        &self,
        pol: &Compiled,
        frame: &[u8],
        now: Time,
        st: &mut FwStats,
    ) -> Option<Vec<u8>> {
        let n = frame.len();
        let m = &pol.meters;
        let answer = if m.limits_rejects() {
            if m.reject_would_admit(now, n) == Some(true) {
                crate::reject::reply_within(frame, || m.reject_admit(now, n) == Some(true))
            } else {
                None
            }
        } else {
            let limit = self.reject_limit.load();
            if limit.open(now) {
                crate::reject::reply_within(frame, || limit.allow(now))
            } else {
                None
            }
        };
        if answer.is_some() {
            st.rejects_sent += 1;
        } else {
            st.rejects_suppressed += 1;
        }
        answer
    }
}

/// The decision on a fragment the reassembler dropped (refused, or its
/// datagram's time ran out): invalid, at the session stage.
fn fragment_drop() -> Decision {
    Decision::drop(Stage::Session, AclRef::Invalid, DropReason::Fragment)
}
