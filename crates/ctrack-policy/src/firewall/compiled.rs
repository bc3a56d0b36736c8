//! One policy generation, compiled: a classifier per stage and tier, the
//! ports by MAC, each ACL's commit action. Immutable once built; a policy
//! change builds a new one and swaps it in whole.

use ctrack_core::{CtAction, LinkType, Masked, Nat, Time, Zone};
use ctrack_wire::{parse_frame, plain_ipv4, plain_ipv6};
use foldhash::HashMap;

use super::decision::{AclRef, Action, Decision, Stage};
use super::persist::{IDS_MASK, Persisting, label_of};
use super::security::{Secured, Side};
use super::word::{Pair, Word, WordStage};
use crate::classify::{Classifier, CompileError, MAX_TOTAL_CONJ, Rank, RuleId};
use crate::expr::Expr;
use crate::key::{Field, Key, NO_PORT, PortNo, flag, mac_u64};
use crate::meter::Meters;
use crate::model::{AclAction, DefaultAction, Direction, Policy, Severity};

/// Tiers an ACL may name (0..=3).
pub const TIERS: usize = 4;

/// What one stage (from-lport or to-lport) decided for a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StageDecision {
    /// The deciding ACL, `None` for the default.
    pub acl: Option<u32>,
    /// What it does (`Pass` never: a pass goes on to the next tier).
    pub kind: Kind,
}

/// A stage's decision, as the firewall combines them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Allow and track (allow-related; allow or the default allow in a
    /// stateful policy).
    Stateful,
    /// Allow without tracking (allow-stateless; allow or the default allow
    /// in a policy without stateful ACLs).
    Stateless,
    /// Drop.
    Drop,
    /// Reject.
    Reject,
}

/// Both stages' decisions on a connection's first packet, combined.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FirstDecision {
    /// The from-lport stage's.
    pub from: StageDecision,
    /// The to-lport stage's.
    pub to: StageDecision,
}

impl FirstDecision {
    /// The stage whose decision applies, its direction, and the decision:
    /// the first that denies, else the last whose ACL allowed (to-lport
    /// before from-lport), else the default.
    pub fn deciding(&self) -> (Stage, Direction, StageDecision) {
        let both = [
            (Stage::FromLport, Direction::FromLport, self.from),
            (Stage::ToLport, Direction::ToLport, self.to),
        ];
        for (stage, dir, d) in both {
            if matches!(d.kind, Kind::Drop | Kind::Reject) {
                let stage = if d.acl.is_some() {
                    stage
                } else {
                    Stage::Default
                };
                return (stage, dir, d);
            }
        }
        if self.to.acl.is_some() {
            (Stage::ToLport, Direction::ToLport, self.to)
        } else if self.from.acl.is_some() {
            (Stage::FromLport, Direction::FromLport, self.from)
        } else {
            (Stage::Default, Direction::ToLport, self.to)
        }
    }

    /// True when the packet passes.
    pub fn allows(&self) -> bool {
        [self.from.kind, self.to.kind]
            .iter()
            .all(|k| matches!(k, Kind::Stateful | Kind::Stateless))
    }

    /// True when an allowed packet's connection is committed: some stage
    /// allowed it statefully.
    pub fn commits(&self) -> bool {
        self.allows() && (self.from.kind == Kind::Stateful || self.to.kind == Kind::Stateful)
    }
}

/// One compiled policy generation.
#[derive(Debug)]
pub struct Compiled {
    /// The policy it was built from.
    pub policy: Policy,
    /// Its generation (never 0).
    pub generation: u32,
    /// A classifier per direction (from-lport, to-lport) and tier.
    stages: [[Classifier; TIERS]; 2],
    /// The highest tier with an ACL, per direction.
    top_tier: [usize; 2],
    macs: HashMap<u64, PortNo>,
    /// Each port's port security (by port number - 1), `None` where it
    /// has none.
    security: Vec<Option<Secured>>,
    /// Some port has port security.
    pub has_security: bool,
    /// The policy has a stateful ACL: packets are tracked.
    pub tracking: bool,
    /// Some ACL translates addresses.
    pub has_nat: bool,
    /// Some ACL names a gateway.
    pub has_alg: bool,
    /// A later `+new` packet of a connection an ACL of this generation
    /// committed, between the same two ports, gets that ACL's verdict from
    /// the connection's word without meeting the ACLs again, exactly as
    /// they would decide it (see [`Compiled::takes_words`]).
    new_by_word: bool,
    /// This compilation's own number, unique in the process: what a
    /// worker's memo of the last MAC pair's zone is valid for.
    id: u64,
    /// The meters that limit the ACLs' log lines (`meter`), a policy
    /// change starting them afresh.
    pub meters: Meters,
    /// Some ACL logs its connections' replies and related packets
    /// (`log = true` and `log-related = true`).
    pub(crate) logs_related: bool,
    /// Each port by its zone, where every port has a zone of its own
    /// (none where two share one): what tells the ports a connection was
    /// opened between from the zones its word keeps.
    zone_ports: Option<HashMap<Zone, PortNo>>,
    /// The ACLs that persist what they commit (`persist-established`),
    /// and their identities across policy changes.
    pub(super) persisting: Persisting,
}

/// The port security of frames carrying one MAC pair one way
/// ([`Compiled::guard`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Guard<'a> {
    from: Side<'a>,
    to: Side<'a>,
    ports: (PortNo, PortNo),
}

/// A plain IPv4 frame (`h`, its Ethernet and IPv4 headers, `l4` its
/// payload) through `from` and `to`.
#[inline]
fn check4(from: Side<'_>, to: Side<'_>, h: &[u8; 34], l4: &[u8]) -> bool {
    let word = |at: usize| u32::from_be_bytes([h[at], h[at + 1], h[at + 2], h[at + 3]]);
    let (src, dst) = (word(26), word(30));
    let dhcp =
        || h[23] == 17 && l4.get(..4) == Some(&[0, 68, 0, 67]) && (src, dst) == (0, u32::MAX);
    from.sends4(src, dhcp) && to.takes4(dst)
}

/// A plain IPv6 frame (`h`, its Ethernet and IPv6 headers: see
/// [`plain_ipv6`]) through `from` and `to`.
#[inline]
fn check6(from: Side<'_>, to: Side<'_>, h: &[u8; 54]) -> bool {
    let addr = |at: usize| u128::from_be_bytes(h[at..at + 16].try_into().unwrap_or_default());
    from.sends6(addr(22)) && to.takes6(addr(38))
}

/// Why the zones of a policy's port pairs do not name the ports (two ports
/// share a zone, or a port has zone 0, the zone of frames of no known
/// port); `None` when they do.
fn shared_zone(policy: &Policy) -> Option<String> {
    let mut seen: HashMap<u16, &str> = HashMap::default();
    for p in &policy.ports {
        if p.zone == 0 {
            return Some(format!(
                "port {} has zone 0, the zone of frames of no known port",
                p.name
            ));
        }
        if let Some(q) = seen.insert(p.zone, &p.name) {
            return Some(format!("ports {q} and {} share zone {}", p.name, p.zone));
        }
    }
    None
}

/// Whether `e` reads only what every packet of a connection carries alike
/// in its original direction between the same two ports: the fields the
/// connection's key holds (addresses, protocol, transport ports, ICMP type
/// and code), the ports, the EtherType, and the protocol flags (`arp`
/// among them: never set on a tracked packet).
fn flow_constant(e: &Expr) -> bool {
    const SAME: u16 = flag::ARP
        | flag::IP
        | flag::IP4
        | flag::IP6
        | flag::TCP
        | flag::UDP
        | flag::SCTP
        | flag::ICMP
        | flag::ICMP4
        | flag::ICMP6;
    let field_ok = |f: Field| {
        matches!(
            f,
            Field::EthType
                | Field::IpProto
                | Field::Inport
                | Field::Outport
                | Field::IcmpType
                | Field::IcmpCode
                | Field::L4Src
                | Field::L4Dst
                | Field::IpSrc
                | Field::IpDst
        )
    };
    match e {
        Expr::True | Expr::False => true,
        Expr::Test {
            field: Field::Flags,
            mask,
            ..
        } => *mask & !u128::from(SAME) == 0,
        Expr::Test { field, .. } | Expr::Range { field, .. } => field_ok(*field),
        Expr::And(xs) | Expr::Or(xs) => xs.iter().all(flow_constant),
        Expr::Not(x) => flow_constant(x),
    }
}

/// The next [`Compiled::id`].
static NEXT_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

impl Compiled {
    /// Compiles `policy` as generation `generation`.
    pub fn new(policy: Policy, generation: u32) -> Result<Compiled, CompileError> {
        Compiled::within(policy, generation, MAX_TOTAL_CONJ)
    }

    /// [`Compiled::new`], its classifiers holding at most `bound`
    /// conjunctions together ([`MAX_TOTAL_CONJ`] but in tests).
    fn within(policy: Policy, generation: u32, bound: usize) -> Result<Compiled, CompileError> {
        let mut stages: [[Classifier; TIERS]; 2] = Default::default();
        let mut top_tier = [0usize; 2];
        // The stages' classifiers share one bound on their conjunctions.
        let mut held = 0;
        for (d, dir) in [Direction::FromLport, Direction::ToLport]
            .iter()
            .enumerate()
        {
            for (t, slot) in stages[d].iter_mut().enumerate() {
                let acls = (policy.acls.iter())
                    .filter(|a| a.direction == *dir && usize::from(a.tier) == t);
                let rules = acls.map(|a| (a.index as RuleId, rank(a.priority, a.index), &a.expr));
                *slot = Classifier::build_bounded(bound, held, rules).map_err(|e| {
                    let bad = e
                        .rule
                        .and_then(|id| policy.acls.iter().find(|a| a.index as RuleId == id));
                    match bad {
                        Some(a) => CompileError {
                            message: format!(
                                "line {}, column {}: ACL `{}` ({}, priority {}): {e}",
                                a.span.line,
                                a.span.col,
                                a.name,
                                a.direction.name(),
                                a.priority
                            ),
                            rule: e.rule,
                        },
                        None => e,
                    }
                })?;
                held += slot.conjunctions();
                if !slot.is_empty() {
                    top_tier[d] = t;
                }
            }
        }
        let mut macs = HashMap::default();
        for (i, p) in policy.ports.iter().enumerate() {
            for m in &p.macs {
                macs.insert(mac_u64(m), (i + 1) as PortNo);
            }
        }
        let security: Vec<Option<Secured>> = (policy.ports.iter())
            .map(|p| match p.disabled {
                true => Some(Secured::disabled()),
                false => Secured::new(&p.security),
            })
            .collect();
        let has_nat = policy.acls.iter().any(|a| a.nat.is_some());
        let has_alg = policy.acls.iter().any(|a| a.alg.is_some());
        let new_by_word = !has_nat
            && !has_alg
            && shared_zone(&policy).is_none()
            && policy.acls.iter().all(|a| flow_constant(&a.expr));
        let tracking = policy.has_stateful();
        Ok(Compiled {
            tracking,
            persisting: Persisting::new(&policy, tracking),
            has_nat,
            has_alg,
            new_by_word,
            meters: Meters::new(&policy),
            logs_related: policy.acls.iter().any(|a| a.log && a.log_related),
            zone_ports: shared_zone(&policy).is_none().then(|| {
                (policy.ports.iter().enumerate())
                    .map(|(i, p)| (p.zone, i as PortNo + 1))
                    .collect()
            }),
            policy,
            generation,
            stages,
            top_tier,
            macs,
            has_security: security.iter().any(Option::is_some),
            security,
            id: NEXT_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
        })
    }

    /// This compilation's number, unique in the process (never 0).
    pub(crate) fn id(&self) -> u64 {
        self.id
    }

    /// Whether port security lets `frame` through: from the port of its
    /// source MAC and to the port of its destination MAC, where they have
    /// `port_security` (see `security.rs`).
    #[inline]
    pub fn secure(&self, frame: &[u8]) -> bool {
        !self.has_security
            || self.secure_between(frame, self.port_at(frame, 6), self.port_at(frame, 0))
    }

    fn secured(&self, p: PortNo) -> Option<&Secured> {
        match p {
            NO_PORT => None,
            p => self.security.get(usize::from(p) - 1)?.as_ref(),
        }
    }

    /// The IPv4 checks of frames carrying the MAC pair of `frame` (its
    /// first twelve bytes) from `inport` to `outport`, found once for a
    /// burst's frames that carry it ([`Compiled::secure_with`]).
    pub(crate) fn guard(&self, frame: &[u8], inport: PortNo, outport: PortNo) -> Guard<'_> {
        let (src, dst) = (
            frame.get(6..12).unwrap_or(&[]),
            frame.get(..6).unwrap_or(&[]),
        );
        Guard {
            from: self
                .secured(inport)
                .map_or(Side::Open, |s| s.sender_side(src)),
            to: self
                .secured(outport)
                .map_or(Side::Open, |s| s.receiver_side(dst)),
            ports: (inport, outport),
        }
    }

    /// [`Compiled::secure_between`] for a frame of the MAC pair `g` was
    /// found for: a plain IPv4 or IPv6 frame by its addresses alone.
    #[inline]
    pub(crate) fn secure_with(&self, g: &Guard<'_>, frame: &[u8]) -> bool {
        if let Some((h, l4)) = plain_ipv4(frame) {
            return check4(g.from, g.to, h, l4);
        }
        match plain_ipv6(frame) {
            Some(h) => check6(g.from, g.to, h),
            None => self.general(frame, g.ports.0, g.ports.1),
        }
    }

    /// [`Compiled::secure`] for a frame from `inport` to `outport`.
    pub(crate) fn secure_between(&self, frame: &[u8], inport: PortNo, outport: PortNo) -> bool {
        let (from, to) = (self.secured(inport), self.secured(outport));
        if from.is_none() && to.is_none() {
            return true;
        }
        if plain_ipv4(frame).is_some() || plain_ipv6(frame).is_some() {
            let g = self.guard(frame, inport, outport);
            return self.secure_with(&g, frame);
        }
        self.general(frame, inport, outport)
    }

    /// [`Compiled::secure_between`] by the frame's parsed layers.
    fn general(&self, frame: &[u8], inport: PortNo, outport: PortNo) -> bool {
        let (from, to) = (self.secured(inport), self.secured(outport));
        let layers = parse_frame(frame, LinkType::Ethernet);
        from.is_none_or(|s| s.ingress(frame, &layers))
            && to.is_none_or(|s| s.egress(frame, &layers))
    }

    /// The port owning the MAC in `frame[at..at + 6]`.
    #[inline]
    pub fn port_at(&self, frame: &[u8], at: usize) -> PortNo {
        frame
            .get(at..at + 6)
            .and_then(|m| self.macs.get(&mac_u64(m)).copied())
            .unwrap_or(NO_PORT)
    }

    /// The zone a packet between `inport` and `outport` is tracked in:
    /// the known port's, or the lower of the two when both are known (the
    /// same for both directions), 0 when neither is.
    #[inline]
    pub fn zone_for(&self, inport: PortNo, outport: PortNo) -> Zone {
        let z = |p: PortNo| self.policy.ports[usize::from(p) - 1].zone;
        match (inport, outport) {
            (NO_PORT, NO_PORT) => 0,
            (a, NO_PORT) => z(a),
            (NO_PORT, b) => z(b),
            (a, b) => z(a).min(z(b)),
        }
    }

    /// One stage's decision for `key`: tier 0 first; a tier where no ACL
    /// matches, or where the best match is `pass`, hands over to the next;
    /// after the last, the default.
    pub fn stage(&self, dir: Direction, key: &Key) -> StageDecision {
        let d = dir as usize;
        for cls in &self.stages[d][..=self.top_tier[d]] {
            if let Some((id, _)) = cls.classify(key) {
                let acl = &self.policy.acls[id as usize];
                let kind = match acl.action {
                    AclAction::Pass => continue,
                    AclAction::AllowRelated => Kind::Stateful,
                    AclAction::Allow if self.tracking => Kind::Stateful,
                    AclAction::Allow | AclAction::AllowStateless => Kind::Stateless,
                    AclAction::Drop => Kind::Drop,
                    AclAction::Reject => Kind::Reject,
                };
                return StageDecision {
                    acl: Some(id),
                    kind,
                };
            }
        }
        StageDecision {
            acl: None,
            kind: match self.policy.default {
                DefaultAction::Allow if self.tracking => Kind::Stateful,
                DefaultAction::Allow => Kind::Stateless,
                DefaultAction::Drop => Kind::Drop,
            },
        }
    }

    /// Both stages' decisions for `key`.
    pub fn decide(&self, key: &Key) -> FirstDecision {
        FirstDecision {
            from: self.stage(Direction::FromLport, key),
            to: self.stage(Direction::ToLport, key),
        }
    }

    /// The decisions of the stages flagged for `key`, the others passing
    /// (as the default would be reported): a packet some of whose stages'
    /// zones hold its connection (docs/firewall.md, "Packets of a
    /// connection between other ports").
    pub fn decide_stages(&self, from: bool, to: bool, key: &Key) -> FirstDecision {
        let pass = StageDecision {
            acl: None,
            kind: Kind::Stateful,
        };
        FirstDecision {
            from: if from {
                self.stage(Direction::FromLport, key)
            } else {
                pass
            },
            to: if to {
                self.stage(Direction::ToLport, key)
            } else {
                pass
            },
        }
    }

    /// The action a packet is tracked with before anything is decided: a
    /// lookup in `zone`, applying existing translations.
    pub fn lookup_action(&self, zone: Zone) -> CtAction {
        CtAction {
            nat: self.has_nat.then_some(Nat {
                range: None,
                mode: Default::default(),
            }),
            // A `+new` packet meets the ACLs as it arrived; the commit
            // translates it.
            untranslated_new: true,
            // Nothing reads a session packet's label (an ACL's `label`, a
            // persisting ACL's identity): not fetched.
            skip_label: true,
            ..CtAction::lookup(zone)
        }
    }

    /// The commit of a connection `d` allows: the deciding ACLs' NAT,
    /// gateway and label, and the verdict word (keeping no zones: see
    /// [`Compiled::commit_action_at`]).
    pub fn commit_action(&self, zone: Zone, d: &FirstDecision) -> CtAction {
        self.commit_action_at(zone, d, Pair::NONE)
    }

    /// [`Compiled::commit_action`] for a connection opened between the
    /// zones of `pair` ([`Compiled::pair_at`]).
    pub fn commit_action_at(&self, zone: Zone, d: &FirstDecision, pair: Pair) -> CtAction {
        let acl = |s: StageDecision| s.acl.map(|i| &self.policy.acls[i as usize]);
        let (from, to) = (acl(d.from), acl(d.to));
        let pick =
            |f: &dyn Fn(&crate::model::Acl) -> bool| from.filter(|a| f(a)).or(to.filter(|a| f(a)));
        let nat = pick(&|a| a.nat.is_some()).and_then(|a| a.nat);
        let alg = pick(&|a| a.alg.is_some()).and_then(|a| a.alg);
        let (label, word) = self.commit_marks(d, pair);
        CtAction {
            // An ACL's own range, else the bare `nat` every lookup applies.
            nat: nat.or(self.lookup_action(zone).nat),
            alg,
            label,
            word: Some(word.encode()),
            ..CtAction::commit(zone)
        }
    }

    /// What a commit of a connection `d` allows, opened between the zones
    /// of `pair`, writes besides its translation and gateway: the label
    /// bits (`None`: none) and the verdict word.
    pub(super) fn commit_marks(
        &self,
        d: &FirstDecision,
        pair: Pair,
    ) -> (Option<Masked<u128>>, Word) {
        let mut label = self
            .acl_label(d)
            .map(|l| Masked::new(u128::from(l) << 96, u128::from(u32::MAX) << 96));
        let ids = self.persist_ids(d);
        if ids != [0; 2] {
            // The identities of the ACLs whose `persist-established` it
            // keeps, as OVN's `ct_label.acl_id` (see `persist.rs`).
            let l = label.unwrap_or(Masked::new(0, 0));
            label = Some(Masked::new(l.value | label_of(ids), l.mask | IDS_MASK));
        }
        (label, self.word_with(d, pair, ids != [0; 2]))
    }

    /// The identities of the ACLs whose `persist-established` a
    /// connection `d` allows keeps, (from-lport, to-lport): each stage's
    /// ACL's where it allows statefully and persists (`persist.rs`).
    pub fn persist_ids(&self, d: &FirstDecision) -> [u64; 2] {
        [d.from, d.to].map(|s| match (s.kind, s.acl) {
            (Kind::Stateful, Some(i)) => self.persisting.id_of(i),
            _ => 0,
        })
    }

    /// The `label` a connection `d` allows is committed with: the
    /// to-lport ACL's, else the from-lport one's.
    pub fn acl_label(&self, d: &FirstDecision) -> Option<u32> {
        let acl = |s: StageDecision| s.acl.map(|i| &self.policy.acls[i as usize]);
        acl(d.to)
            .and_then(|a| a.label)
            .or(acl(d.from).and_then(|a| a.label))
    }

    /// The verdict word of a connection `d` allows (keeping no zones: see
    /// [`Compiled::word_at`]).
    pub fn word(&self, d: &FirstDecision) -> Word {
        self.word_at(d, Pair::NONE)
    }

    /// The verdict word of a connection `d` allows, opened between the
    /// zones of `pair` ([`Compiled::pair_at`]).
    pub fn word_at(&self, d: &FirstDecision, pair: Pair) -> Word {
        self.word_with(d, pair, self.persist_ids(d) != [0; 2])
    }

    /// [`Compiled::word_at`], whether an ACL of `d` persists given.
    pub(super) fn word_with(&self, d: &FirstDecision, pair: Pair, persist: bool) -> Word {
        let (stage, _, s) = d.deciding();
        Word {
            generation: self.generation,
            acl: s.acl,
            stage: match stage {
                Stage::FromLport => WordStage::From,
                Stage::ToLport => WordStage::To,
                _ => WordStage::Default,
            },
            persist,
            pair,
        }
    }

    /// Why a later `+new` packet of a connection meets the ACLs again
    /// rather than taking the connection's word ([`Compiled::takes_words`]);
    /// `None` where it takes the word.
    pub fn new_by_word_off(&self) -> Option<String> {
        if self.new_by_word {
            return None;
        }
        let why = if !self.tracking {
            "nothing is tracked".to_string()
        } else if self.has_nat {
            "an ACL translates addresses".to_string()
        } else if self.has_alg {
            "an ACL names a gateway".to_string()
        } else if let Some(a) = self.policy.acls.iter().find(|a| !flow_constant(&a.expr)) {
            format!(
                "ACL {} reads a field that may change from packet to packet",
                a.name
            )
        } else if let Some(why) = shared_zone(&self.policy) {
            why
        } else {
            "?".to_string()
        };
        Some(why)
    }

    /// Whether a later `+new` packet of a connection (committed, no reply
    /// yet: a one-way UDP flow, a SYN sent again) between the zones that
    /// opened it takes its word's verdict rather than meeting the ACLs.
    ///
    /// OVN matches such a packet against the ACLs again. Where every ACL
    /// reads only what is the same for every packet of a connection in its
    /// original direction between the same two ports (addresses,
    /// protocol, transport ports or ICMP type and code, which the
    /// connection's key holds, and the ports themselves), the ACLs decide
    /// it exactly as they decided the packet that committed it under the
    /// same generation: the verdict the word holds. The word keeps the two
    /// ports' zones ([`Pair`]), so each port must have a zone of its own
    /// (and not 0, the zone of no known port) for the zones to name the
    /// ports. Not so where an ACL reads a field that may change from
    /// packet to packet (`ip.ttl`, `tcp.flags`, the MAC addresses, the
    /// VLAN, fragments), or where the policy translates or has gateways (a
    /// `+new` packet is translated by its commit).
    #[inline(always)]
    pub fn takes_words(&self) -> bool {
        self.new_by_word
    }

    /// Whether a connection judged again after a change to this same
    /// policy is decided as its opening packet was, whichever of its
    /// packets it is judged at. It is where every ACL reads only what all
    /// of a connection's original-direction packets share (as for
    /// [`Compiled::takes_words`], translations and gateways allowed) and
    /// every port has a zone of its own, so that the zones a connection's
    /// word keeps name the ports it was opened between
    /// ([`Compiled::opened_between`]). Not so where an ACL reads
    /// `tcp.flags` (a connection opened mid-stream is judged again by a
    /// SYN) or another field that changes within a connection, or where
    /// ports share a zone: a connection is then judged again with the
    /// ports of the packet at hand, which may come from or go to another
    /// port of the zone (docs/firewall.md, "Policy changes").
    pub fn judges_again_alike(&self) -> bool {
        self.policy.acls.iter().all(|a| flow_constant(&a.expr))
            && shared_zone(&self.policy).is_none()
    }

    /// The ports a connection tracked in `zone` was opened between
    /// (inport, outport), as its word's `pair` keeps their zones: where
    /// every port has a zone of its own, so that a zone names one port (0
    /// none); `None` otherwise, or where the word keeps no zones.
    pub fn opened_between(&self, pair: Pair, zone: Zone) -> Option<(PortNo, PortNo)> {
        let ports = self.zone_ports.as_ref()?;
        let (zin, zout) = pair.zones(zone)?;
        let port = |z: Zone| match z {
            0 => Some(NO_PORT),
            z => ports.get(&z).copied(),
        };
        Some((port(zin)?, port(zout)?))
    }

    /// The zone a port's packets are tracked in, as a [`Pair`] names it:
    /// 0 for no known port.
    #[inline(always)]
    pub fn port_zone(&self, p: PortNo) -> Zone {
        match p {
            NO_PORT => 0,
            p => self.policy.ports[usize::from(p) - 1].zone,
        }
    }

    /// The zones of a packet from `inport` to `outport` tracked in `zone`
    /// (which [`Compiled::zone_for`] gives), as a connection's word keeps
    /// them.
    #[inline]
    pub fn pair_at(&self, inport: PortNo, outport: PortNo, zone: Zone) -> Pair {
        Pair::new(self.port_zone(inport), self.port_zone(outport), zone)
    }

    /// The severity of the log lines of the ACL `acl` names (`info` for
    /// what is not an ACL of the policy).
    pub fn acl_severity(&self, acl: AclRef) -> Severity {
        match acl {
            AclRef::Acl(i) => self
                .policy
                .acls
                .get(i as usize)
                .map_or(Severity::Info, |a| a.severity),
            _ => Severity::Info,
        }
    }

    /// OVN's `log-related`: marks `d`, a session's decision on a packet of
    /// verdict `v`, to be logged if it admits a reply or a related packet
    /// of a connection whose ACL logs with `log-related`.
    #[inline]
    pub(crate) fn log_related(&self, d: &mut Decision, v: &ctrack_core::Verdict) {
        if self.logs_related
            && d.action == Action::Allow
            && d.stage == Stage::Session
            && let AclRef::Acl(i) = d.acl
            && (v.dir == ctrack_core::Dir::Reply || v.state.contains(ctrack_core::CtState::REL))
            && self
                .policy
                .acls
                .get(i as usize)
                .is_some_and(|a| a.log && a.log_related)
        {
            d.log = true;
        }
    }

    /// Whether a log line for a decision of `acl` on a packet of `bytes`
    /// bytes at `now` is within the ACL's meter; `None` when `acl` is no
    /// ACL of the policy or has no meter.
    pub fn log_metered(&self, acl: AclRef, now: Time, bytes: usize) -> Option<bool> {
        match acl {
            AclRef::Acl(i) => self.meters.admit(i, now, bytes),
            _ => None,
        }
    }

    /// The name an ACL reference is reported under.
    pub fn acl_name(&self, acl: AclRef) -> &str {
        match acl {
            AclRef::Acl(i) => self
                .policy
                .acls
                .get(i as usize)
                .map_or("?", |a| a.name.as_str()),
            AclRef::Default => "default",
            AclRef::Nd => "nd",
            AclRef::Invalid => "ct.inv",
            AclRef::Persisted => "persisted",
            AclRef::Runt => "runt",
            AclRef::PortSecurity => "port-security",
        }
    }

    /// How many rules each classifier holds, and their memory: for
    /// `policy show` and benchmarks.
    pub fn classifiers(&self) -> impl Iterator<Item = (Direction, usize, &Classifier)> {
        [Direction::FromLport, Direction::ToLport]
            .into_iter()
            .flat_map(move |dir| {
                self.stages[dir as usize]
                    .iter()
                    .enumerate()
                    .map(move |(t, c)| (dir, t, c))
            })
    }
}

/// The classifier rank of an ACL: priority first; between equal
/// priorities, the ACL earlier in the file wins (OVN leaves this case
/// undefined).
pub fn rank(priority: u16, index: usize) -> Rank {
    (u64::from(priority) << 32) | u64::from(u32::MAX - (index as u32))
}

#[cfg(test)]
mod tests {
    use super::Compiled;
    use crate::model::Policy;

    #[test]
    fn the_stages_share_one_bound_on_conjunctions() {
        let text = r#"
[[acl]]
direction = "from-lport"
priority = 10
match = "tcp.dst == {1, 2, 3, 4}"
action = "allow"

[[acl]]
name = "over"
direction = "to-lport"
priority = 20
tier = 2
match = "udp.dst == {1, 2, 3, 4, 5, 6}"
action = "drop"
"#;
        let p = || Policy::from_str(text, "p.toml").unwrap();
        let c = Compiled::within(p(), 1, 10).unwrap();
        assert_eq!(c.policy.acls.len(), 2);
        let e = Compiled::within(p(), 1, 9).unwrap_err().to_string();
        assert!(
            e == "line 8, column 1: ACL `over` (to-lport, priority 20): the ACLs expand to \
                 more than 9 conjunctions in all (4 before this one, which adds 6)",
            "{e}"
        );
    }
}
