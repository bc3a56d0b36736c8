//! What the firewall decides for a packet, and what it counts.

use ctrack_core::{Stats, Verdict};

/// The final verdict on a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Action {
    /// Forward it.
    Allow,
    /// Drop it silently.
    Drop,
    /// Drop it and answer (TCP RST, SCTP ABORT, ICMP unreachable).
    Reject,
}

impl Action {
    /// `allow`, `drop`, `reject`.
    pub fn name(self) -> &'static str {
        match self {
            Action::Allow => "allow",
            Action::Drop => "drop",
            Action::Reject => "reject",
        }
    }
}

/// Which step decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Stage {
    /// The sender's `from-lport` ACLs.
    FromLport,
    /// The receiver's `to-lport` ACLs.
    ToLport,
    /// The connection's session: its cached verdict (replies, related
    /// packets, later packets of an allowed connection), or the tracker
    /// finding the packet invalid.
    Session,
    /// No ACL decided: the policy's default.
    Default,
    /// IPv6 neighbour discovery or MLD, which always pass.
    Nd,
    /// Port security (`port_security`): the sender's addresses, or the
    /// receiver's, are not those its port may use; checked before every
    /// other stage.
    PortSecurity,
}

impl Stage {
    /// Every stage, in counter order.
    pub const ALL: [Stage; 6] = [
        Stage::FromLport,
        Stage::ToLport,
        Stage::Session,
        Stage::Default,
        Stage::Nd,
        Stage::PortSecurity,
    ];

    /// `from-lport`, `to-lport`, `session`, `default`, `nd`,
    /// `port-security`.
    pub fn name(self) -> &'static str {
        match self {
            Stage::FromLport => "from-lport",
            Stage::ToLport => "to-lport",
            Stage::Session => "session",
            Stage::Default => "default",
            Stage::Nd => "nd",
            Stage::PortSecurity => "port-security",
        }
    }
}

/// The ACL a decision is reported under.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AclRef {
    /// An ACL, by its index in the policy.
    Acl(u32),
    /// The default.
    Default,
    /// ND/MLD pass.
    Nd,
    /// The tracker found the packet invalid (OVN's `ct.inv` drop).
    Invalid,
    /// A connection allowed by a `persist-established` ACL of an earlier
    /// policy.
    Persisted,
    /// The frame is too short to be switched.
    Runt,
    /// Port security dropped it.
    PortSecurity,
}

/// Why a packet was dropped (each has a counter).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum DropReason {
    /// A `drop` or `reject` ACL.
    Acl,
    /// The default drop.
    Default,
    /// The tracker found it invalid.
    Invalid,
    /// Its connection was allowed by an earlier policy and the current one
    /// no longer allows it.
    Blocked,
    /// The connection could not be committed: the table was full.
    TableFull,
    /// The connection could not be committed: its zone was at its limit.
    ZoneLimit,
    /// No free translated tuple.
    NatExhausted,
    /// The connection's reply tuple was another connection's
    /// (`ctrack_core::Refusal::Clash`).
    Clash,
    /// Shorter than an Ethernet header.
    Runt,
    /// A fragment the reassembler dropped.
    Fragment,
    /// Port security: an address the sending or receiving port may not
    /// use.
    PortSecurity,
}

impl DropReason {
    /// Every reason, in counter order.
    pub const ALL: [DropReason; 11] = [
        DropReason::Acl,
        DropReason::Default,
        DropReason::Invalid,
        DropReason::Blocked,
        DropReason::TableFull,
        DropReason::ZoneLimit,
        DropReason::NatExhausted,
        DropReason::Clash,
        DropReason::Runt,
        DropReason::Fragment,
        DropReason::PortSecurity,
    ];

    /// The reason's name in reports.
    pub fn name(self) -> &'static str {
        match self {
            DropReason::Acl => "acl",
            DropReason::Default => "default",
            DropReason::Invalid => "invalid",
            DropReason::Blocked => "blocked",
            DropReason::TableFull => "table_full",
            DropReason::ZoneLimit => "zone_limit",
            DropReason::NatExhausted => "nat_exhausted",
            DropReason::Clash => "clash",
            DropReason::Runt => "runt",
            DropReason::Fragment => "fragment",
            DropReason::PortSecurity => "port_security",
        }
    }
}

/// The firewall's decision on one packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decision {
    /// allow, drop or reject.
    pub action: Action,
    /// Which step decided.
    pub stage: Stage,
    /// Under which ACL.
    pub acl: AclRef,
    /// Why it was dropped, when it was.
    pub reason: Option<DropReason>,
    /// The tracker's verdict, when the packet was tracked. Its `label` is
    /// the connection's for a `+new` packet, an ICMP error and a commit
    /// only: the firewall's lookups leave it out of the others'
    /// (`CtAction::skip_label`); `Tracker::conn` has it.
    pub ct: Option<Verdict>,
    /// The deciding ACL asked for its decisions to be logged.
    pub log: bool,
}

impl Default for Decision {
    /// A drop by the default, before anything is known.
    fn default() -> Decision {
        Decision {
            action: Action::Drop,
            stage: Stage::Default,
            acl: AclRef::Default,
            reason: None,
            ct: None,
            log: false,
        }
    }
}

impl Decision {
    pub(crate) fn allow(stage: Stage, acl: AclRef) -> Decision {
        Decision {
            action: Action::Allow,
            stage,
            acl,
            reason: None,
            ct: None,
            log: false,
        }
    }

    pub(crate) fn drop(stage: Stage, acl: AclRef, reason: DropReason) -> Decision {
        Decision {
            action: Action::Drop,
            stage,
            acl,
            reason: Some(reason),
            ct: None,
            log: false,
        }
    }
}

/// One ACL's counters, as `ovs-ofctl dump-flows` shows a flow's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub struct AclCounters {
    /// Packets it decided (first packets, and for an allowing ACL every
    /// later packet of the sessions it opened).
    pub packets: u64,
    /// Their bytes.
    pub bytes: u64,
    /// Connections it allowed (committed).
    pub conns: u64,
}

/// The firewall's counters for one worker (sans-IO, as the tracker's:
/// each call adds to a value its caller owns; [`FwStats::merge`] sums).
#[derive(Debug, Clone, Default)]
pub struct FwStats {
    /// Packets by final verdict: allow, drop, reject.
    pub verdicts: [u64; 3],
    /// Packets by deciding stage, in [`Stage`] order.
    pub stages: [u64; Stage::ALL.len()],
    /// Drops by reason, in [`DropReason::ALL`] order.
    pub drops: [u64; DropReason::ALL.len()],
    /// Answers sent for `reject`.
    pub rejects_sent: u64,
    /// Answers not sent: the rate limit, or a packet that may not be
    /// answered (a RST, an ICMP error, a broadcast).
    pub rejects_suppressed: u64,
    /// Connections judged again after a policy change.
    pub rejudged: u64,
    /// `+new` packets of committed connections decided by the
    /// connection's verdict word, without the classifier (see
    /// `Compiled::takes_words`); counted in `verdicts`, `stages` and the
    /// ACLs' counters as well, as the ACLs would have decided them.
    pub new_by_word: u64,
    /// Packets of a known connection that went between other zones than
    /// the packets that opened it (the connection's addresses sent from
    /// or to a third port sharing its zone): not its session's packets,
    /// they met the ACLs of the stages whose ports' zones would not hold
    /// the connection in OVN (docs/firewall.md, "Packets of a connection
    /// between other ports"); counted in `verdicts` and `stages` as well.
    pub cross_pair: u64,
    /// Per-ACL counters, by ACL index, of the policy generation
    /// [`FwStats::generation`].
    pub acls: Vec<AclCounters>,
    /// The default's counters: from-lport, to-lport.
    pub defaults: [AclCounters; 2],
    /// The policy generation the per-ACL counters belong to.
    pub generation: u32,
    /// The tracker's counters.
    pub tracker: Stats,
    /// Not a counter: the worker's memo of the zone of the last pair of
    /// MAC addresses its bursts carried (see [`ZoneCache`]), kept
    /// here because this is what a worker hands every call.
    pub(crate) zones: ZoneCache,
    /// Not a counter: the buffer the tracker writes a burst's verdicts
    /// to, kept from call to call (see [`Verdicts`]).
    pub(crate) verdicts_buf: Verdicts,
}

impl FwStats {
    /// Adds another worker's counts.
    pub fn merge(&mut self, o: &FwStats) {
        let add = |a: &mut [u64], b: &[u64]| a.iter_mut().zip(b).for_each(|(x, y)| *x += y);
        add(&mut self.verdicts, &o.verdicts);
        add(&mut self.stages, &o.stages);
        add(&mut self.drops, &o.drops);
        self.rejects_sent += o.rejects_sent;
        self.rejects_suppressed += o.rejects_suppressed;
        self.rejudged += o.rejudged;
        self.new_by_word += o.new_by_word;
        self.cross_pair += o.cross_pair;
        if self.generation == o.generation {
            if self.acls.len() < o.acls.len() {
                self.acls.resize(o.acls.len(), AclCounters::default());
            }
            for (a, b) in self.acls.iter_mut().zip(&o.acls) {
                add_counters(a, b);
            }
            for (a, b) in self.defaults.iter_mut().zip(&o.defaults) {
                add_counters(a, b);
            }
        }
        self.tracker.merge(&o.tracker);
    }

    /// Counts a decision on a packet of `bytes` bytes.
    pub(crate) fn count(&mut self, d: &Decision) {
        self.count_many(d, 1);
    }

    /// Counts `n` packets with decisions like `d` (its action, stage and
    /// drop reason).
    #[inline]
    pub(crate) fn count_many(&mut self, d: &Decision, n: u64) {
        self.verdicts[d.action as usize] += n;
        self.stages[d.stage as usize] += n;
        if let Some(r) = d.reason {
            self.drops[r as usize] += n;
        }
    }

    /// Makes the per-ACL counters those of policy `generation` with `n`
    /// ACLs (they start again at zero when the generation changes).
    pub(crate) fn sync(&mut self, generation: u32, n: usize) {
        if self.generation != generation {
            self.generation = generation;
            self.acls.clear();
            self.defaults = Default::default();
        }
        if self.acls.len() < n {
            self.acls.resize(n, AclCounters::default());
        }
    }
}

fn add_counters(a: &mut AclCounters, b: &AclCounters) {
    a.packets += b.packets;
    a.bytes += b.bytes;
    a.conns += b.conns;
}

/// The zone of a burst's frames, remembering the last pair of MAC
/// addresses: a burst's frames mostly travel between the same two ports,
/// in either direction, and a frame's zone depends on the pair alone, not
/// on its direction (`Compiled::zone_for`). The frame's first twelve
/// bytes (destination, source) are compared as they are with the last
/// pair's, both ways round: two loads and compares a frame instead of two
/// map lookups (a profile of `bench policy stage` put those at about 150
/// instructions a frame, and decoding the addresses first at about 35).
///
/// The pair is held as two words each way round (the first eight bytes
/// and the next four), and the check is inlined: as a call comparing byte
/// arrays it was about 28 instructions a frame (callgrind on `bench policy
/// stage`), a third of the firewall's own cost over the tracker's.
///
/// A worker keeps it from one call to the next (in its [`FwStats`]; its methods are in burst.rs), for
/// the policy it was made under (`policy`, a `Compiled::id`): made
/// afresh at every call, it missed once a call, two map lookups (7
/// instructions a packet on `bench policy stage`'s calls of 32 frames).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct ZoneCache {
    /// The compiled policy the pair's zone is of (0: none).
    pub(crate) policy: u64,
    /// The last pair as it came (destination, source) and the same
    /// swapped, each as its first eight bytes and next four; and its zone.
    pub(crate) last: Option<(u64, u32, u64, u32, u16)>,
    /// The last pair's zones, as a connection's word keeps them
    /// (`Compiled::pair_at`), the other way round (`[0]`) and as it came
    /// (`[1]`).
    pub(crate) pairs: [super::word::Pair; 2],
    /// The last pair's ports as it came: (inport, outport).
    pub(crate) ports: (crate::key::PortNo, crate::key::PortNo),
    /// Either MAC of the last pair is a group address: its frames one way
    /// or the other are multicast, which the tracker never sees (docs/firewall.md,
    /// "Tracking"), so its chunks go frame by frame, where that is told.
    pub(crate) group: bool,
}

/// Packets per tracker burst of the burst path (burst.rs), here beside
/// the buffer of their verdicts.
pub(crate) const BURST: usize = 32;
// A chunk's packets are bits of a `u64` (`Judging::fast_mask`).
const _: () = assert!(BURST <= 64);

/// A worker's buffer for the tracker's verdicts of one burst of the
/// burst path. Made afresh for every burst, its 32 verdicts were written
/// (to their default) before the tracker wrote them again: 208
/// instructions a burst, 6.5 a packet on `bench policy stage`.
#[derive(Default)]
pub(crate) struct Verdicts(pub(crate) Option<Box<[ctrack_core::Verdict; BURST]>>);

/// A copy of the counters (a datapath publishes them) needs no buffer:
/// the copy makes its own when it is first used.
impl Clone for Verdicts {
    fn clone(&self) -> Verdicts {
        Verdicts(None)
    }
}

impl std::fmt::Debug for Verdicts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Verdicts")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The names are what `ctrack replay` and the counters report (the
    /// issue's `verdict`, `stage` fields): a contract, each one distinct,
    /// and the `ALL` arrays in the order the counters index them by.
    #[test]
    fn names_are_the_reported_ones() {
        let actions = [Action::Allow, Action::Drop, Action::Reject];
        let names: Vec<_> = actions.iter().map(|a| a.name()).collect();
        assert_eq!(names, ["allow", "drop", "reject"]);
        for (i, a) in actions.iter().enumerate() {
            assert_eq!(*a as usize, i);
        }
        let names: Vec<_> = Stage::ALL.iter().map(|s| s.name()).collect();
        assert_eq!(
            names,
            [
                "from-lport",
                "to-lport",
                "session",
                "default",
                "nd",
                "port-security"
            ]
        );
        for (i, s) in Stage::ALL.iter().enumerate() {
            assert_eq!(*s as usize, i);
        }
        let names: Vec<_> = DropReason::ALL.iter().map(|r| r.name()).collect();
        assert_eq!(
            names,
            [
                "acl",
                "default",
                "invalid",
                "blocked",
                "table_full",
                "zone_limit",
                "nat_exhausted",
                "clash",
                "runt",
                "fragment",
                "port_security"
            ]
        );
        for (i, r) in DropReason::ALL.iter().enumerate() {
            assert_eq!(*r as usize, i);
        }
    }

    #[test]
    fn decisions_as_made() {
        let d = Decision::default();
        assert_eq!(
            (d.action, d.stage, d.acl),
            (Action::Drop, Stage::Default, AclRef::Default)
        );
        assert_eq!((d.reason, d.ct, d.log), (None, None, false));
        let a = Decision::allow(Stage::ToLport, AclRef::Acl(3));
        assert_eq!(
            (a.action, a.stage, a.acl),
            (Action::Allow, Stage::ToLport, AclRef::Acl(3))
        );
        assert_eq!((a.reason, a.ct, a.log), (None, None, false));
        let x = Decision::drop(Stage::Session, AclRef::Invalid, DropReason::Invalid);
        assert_eq!(
            (x.action, x.stage, x.acl),
            (Action::Drop, Stage::Session, AclRef::Invalid)
        );
        assert_eq!(
            (x.reason, x.ct, x.log),
            (Some(DropReason::Invalid), None, false)
        );
    }

    /// A worker's counts: each decision lands in its verdict's, its
    /// stage's and its drop reason's counter, and nowhere else.
    #[test]
    fn counts_by_verdict_stage_and_reason() {
        let mut s = FwStats::default();
        s.count(&Decision::allow(Stage::FromLport, AclRef::Acl(0)));
        s.count_many(
            &Decision::drop(Stage::Default, AclRef::Default, DropReason::Default),
            5,
        );
        let mut reject = Decision::drop(Stage::ToLport, AclRef::Acl(1), DropReason::Acl);
        reject.action = Action::Reject;
        s.count_many(&reject, 2);
        assert_eq!(s.verdicts, [1, 5, 2]);
        assert_eq!(s.stages, [1, 2, 0, 5, 0, 0]);
        let mut drops = [0; DropReason::ALL.len()];
        drops[DropReason::Default as usize] = 5;
        drops[DropReason::Acl as usize] = 2;
        assert_eq!(s.drops, drops);
    }

    /// The per-ACL counters belong to one policy generation: a new one
    /// starts them (and the defaults') at zero, the same one keeps them,
    /// and they grow to the policy's ACLs, never shrink.
    #[test]
    fn acl_counters_follow_the_generation() {
        let mut s = FwStats::default();
        s.sync(4, 3);
        assert_eq!((s.generation, s.acls.len()), (4, 3));
        s.acls[2].packets = 9;
        s.defaults[1].bytes = 60;
        s.sync(4, 2);
        assert_eq!(
            (s.acls.len(), s.acls[2].packets, s.defaults[1].bytes),
            (3, 9, 60)
        );
        s.sync(4, 5);
        assert_eq!((s.acls.len(), s.acls[2].packets), (5, 9));
        s.sync(5, 2);
        assert_eq!(s.generation, 5);
        assert_eq!(s.acls, vec![AclCounters::default(); 2]);
        assert_eq!(s.defaults, [AclCounters::default(); 2]);
    }

    fn numbered(seed: u64, generation: u32, acls: usize) -> FwStats {
        let mut n = seed;
        let mut next = || {
            n += 1;
            n
        };
        let mut s = FwStats {
            generation,
            ..FwStats::default()
        };
        s.verdicts.iter_mut().for_each(|v| *v = next());
        s.stages.iter_mut().for_each(|v| *v = next());
        s.drops.iter_mut().for_each(|v| *v = next());
        s.rejects_sent = next();
        s.rejects_suppressed = next();
        s.rejudged = next();
        s.new_by_word = next();
        s.cross_pair = next();
        s.acls = (0..acls)
            .map(|_| AclCounters {
                packets: next(),
                bytes: next(),
                conns: next(),
            })
            .collect();
        s.defaults = [0; 2].map(|_| AclCounters {
            packets: next(),
            bytes: next(),
            conns: next(),
        });
        s.tracker.packets = next();
        s
    }

    /// Merging sums every counter; the per-ACL ones (and the defaults')
    /// only between workers of the same generation, where a worker with
    /// fewer ACLs' counters takes the other's in.
    #[test]
    fn merge_sums_every_counter() {
        let a = numbered(0, 3, 2);
        let b = numbered(100, 3, 4);
        let mut m = a.clone();
        m.merge(&b);
        let sum =
            |x: &[u64], y: &[u64]| -> Vec<u64> { x.iter().zip(y).map(|(p, q)| p + q).collect() };
        assert_eq!(m.verdicts.to_vec(), sum(&a.verdicts, &b.verdicts));
        assert_eq!(m.stages.to_vec(), sum(&a.stages, &b.stages));
        assert_eq!(m.drops.to_vec(), sum(&a.drops, &b.drops));
        assert_eq!(m.rejects_sent, a.rejects_sent + b.rejects_sent);
        assert_eq!(
            m.rejects_suppressed,
            a.rejects_suppressed + b.rejects_suppressed
        );
        assert_eq!(m.rejudged, a.rejudged + b.rejudged);
        assert_eq!(m.new_by_word, a.new_by_word + b.new_by_word);
        assert_eq!(m.cross_pair, a.cross_pair + b.cross_pair);
        assert_eq!(m.tracker.packets, a.tracker.packets + b.tracker.packets);
        let plus = |x: &AclCounters, y: &AclCounters| AclCounters {
            packets: x.packets + y.packets,
            bytes: x.bytes + y.bytes,
            conns: x.conns + y.conns,
        };
        let zero = AclCounters::default();
        let acls: Vec<_> = (0..4)
            .map(|i| plus(a.acls.get(i).unwrap_or(&zero), &b.acls[i]))
            .collect();
        assert_eq!(m.acls, acls);
        assert_eq!(
            m.defaults,
            [0, 1].map(|i| plus(&a.defaults[i], &b.defaults[i]))
        );
        // Another generation's per-ACL counts are not these ACLs'.
        let mut m = a.clone();
        m.merge(&numbered(100, 4, 4));
        assert_eq!((m.acls.clone(), m.defaults), (a.acls.clone(), a.defaults));
        assert_eq!(m.rejudged, a.rejudged + b.rejudged);
    }

    /// A copy of the counters carries no verdict buffer; the buffer
    /// prints as its name, not its 32 verdicts.
    #[test]
    fn the_verdict_buffer_is_not_copied() {
        let v = Verdicts(Some(Box::new([ctrack_core::Verdict::default(); BURST])));
        assert!(v.clone().0.is_none());
        assert_eq!(format!("{v:?}"), "Verdicts");
    }
}
