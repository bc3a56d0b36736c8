//! Judging one whole packet: ND first, then the tracker's lookup, then —
//! only for what the session does not decide — the classifier.

use ctrack_core::{CtAction, CtState, Dir, LinkType, Refusal, Stats, Time, Verdict, Zone};
use ctrack_wire::parse_frame;

use super::compiled::{Compiled, FirstDecision, Kind};
use super::decision::{AclRef, Action, Decision, DropReason, FwStats, Stage};
use super::engine::Firewall;
use super::nd::{is_nd_or_mld, untracked, untracked_parsed};
use super::word::{Pair, Word, WordStage};
use crate::key::{Key, PortNo, plain_ipv4};
use crate::model::Direction;

/// One packet's context: the policy it meets, the ports it goes between,
/// its zone, the time.
#[derive(Debug, Clone)]
pub(super) struct Cx<'a> {
    pub(super) pol: &'a Compiled,
    pub(super) inport: PortNo,
    pub(super) outport: PortNo,
    pub(super) zone: Zone,
    pub(super) now: Time,
}

impl<T> Firewall<T> {
    /// Decides one whole packet, counts it, and answers it if rejected.
    pub(super) fn judge(
        &self,
        pol: &Compiled,
        frame: &mut Vec<u8>,
        now: Time,
        st: &mut FwStats,
    ) -> (Decision, Option<Vec<u8>>) {
        let d = self.decide(pol, frame, now, st);
        st.count(&d);
        let reply = if d.action == Action::Reject {
            self.reject(pol, frame, now, st)
        } else {
            None
        };
        (d, reply)
    }

    fn decide(&self, pol: &Compiled, frame: &mut Vec<u8>, now: Time, st: &mut FwStats) -> Decision {
        let (inport, outport) = (pol.port_at(frame, 6), pol.port_at(frame, 0));
        // Port security was checked before: `Firewall::process` does before
        // reassembly, the burst path for each chunk or frame alone.
        // A frame of the common case (plain IPv4) is never neighbour
        // discovery and its IP layer is whole: no need to parse its
        // layers to know (106 of the 952 instructions of a stateless
        // packet went there, callgrind on `bench policy stateless`).
        let (ip_ok, untracked) = if let Some((h, l4)) = plain_ipv4(frame) {
            (true, untracked(frame, h[23], Some(l4)))
        } else {
            let layers = parse_frame(frame, LinkType::Ethernet);
            if is_nd_or_mld(frame, &layers) {
                return Decision::allow(Stage::Nd, AclRef::Nd);
            }
            // An IP EtherType with a header that is not usable is for the
            // tracker too, which finds it invalid (`ct.inv`), as Open
            // vSwitch's conntrack does the frames OVN sends it on `ip`.
            let ip = layers.ip.is_ok() || layers.ip.is_err_and(|e| e.is_ip_ethertype());
            (ip, untracked_parsed(frame, &layers))
        };
        let cx = Cx {
            pol,
            inport,
            outport,
            zone: pol.zone_for(inport, outport),
            now,
        };
        if !pol.tracking || !ip_ok || untracked {
            // Nothing is tracked (no stateful ACL, or not IP, or what OVN
            // keeps from conntrack: multicast, a DHCPv6 client's message):
            // the ACLs alone decide, and an allowing one commits nothing.
            let key = Key::from_frame(frame, inport, outport);
            let fd = pol.decide(&key);
            return self.first(pol, &fd, frame.len(), false, None, st);
        }
        let action = pol.lookup_action(cx.zone);
        let v = self
            .tracker
            .process_mut(frame, LinkType::Ethernet, &action, now, &mut st.tracker);
        self.after_lookup(&cx, frame, v, st)
    }

    /// What follows the tracker's lookup of a packet: the session's
    /// verdict for a known connection, else the classifier.
    pub(super) fn after_lookup(
        &self,
        cx: &Cx<'_>,
        frame: &mut Vec<u8>,
        v: Verdict,
        st: &mut FwStats,
    ) -> Decision {
        let (pol, now) = (cx.pol, cx.now);
        if let Some(id) = v.conn.filter(|_| !v.state.contains(CtState::NEW)) {
            return self.session(cx, frame, v, id, st);
        }
        if v.state.contains(CtState::NEW | CtState::REL) {
            return self.expected(cx, frame, v, st);
        }
        let pair = pol.pair_at(cx.inport, cx.outport, cx.zone);
        if let Some(d) = by_word(pol, &v, pair, frame.len(), st) {
            return d;
        }
        let key = Key::from_frame(frame, cx.inport, cx.outport);
        let fd = pol.decide(&key);
        // A `+new` packet of a connection opened between other zones (its
        // addresses sent from or to a third port sharing the zone): in
        // OVN, the first packet in the third port's zone, and an
        // unanswered connection's packet in the shared one, where the
        // ACLs meet it too. Its decision stands; it commits nothing, for
        // the connection is the other pair's (docs/firewall.md, "Packets
        // of a connection between other ports").
        let cross = v.conn.is_some() && !Word::fits(v.word, opening_pair(cx, v.dir));
        st.cross_pair += u64::from(cross);
        if fd.allows() && !fd.commits() {
            // Decided stateless: the tracker never judged it.
            uncount(&mut st.tracker, &v);
            return self.first(pol, &fd, frame.len(), false, None, st);
        }
        if v.invalid.is_some() {
            let mut d = Decision::drop(Stage::Session, AclRef::Invalid, DropReason::Invalid);
            d.ct = Some(v);
            return d;
        }
        if !fd.allows() || cross {
            return self.first(pol, &fd, frame.len(), false, Some(v), st);
        }
        let action = pol.commit_action_at(cx.zone, &fd, pair);
        if commit_changes_nothing(&v, &action) {
            // A later packet of a connection an allow already committed
            // (`+new` until the other side answers, as in a one-way UDP
            // flow): committing it again would leave it as it is, so the
            // lookup's verdict stands and the tracker is not asked twice.
            return self.first(pol, &fd, frame.len(), false, Some(v), st);
        }
        uncount(&mut st.tracker, &v);
        let v2 = self
            .tracker
            .process_mut(frame, LinkType::Ethernet, &action, now, &mut st.tracker);
        if let Some(r) = v2.refused {
            let mut d = self.first(pol, &fd, frame.len(), false, Some(v2), st);
            d.action = Action::Drop;
            d.reason = Some(refusal_reason(r));
            return d;
        }
        // A commit leaves an existing connection's word as it is. One a
        // change judged again and left for its next `+new` packet to
        // commit (`WordStage::Again`) is committed now: it takes the
        // commit's word, and its later `+new` packets take that.
        if let (Some(id), Some(w), Some(word)) = (v.conn, Word::decode(v.word), action.word)
            && w.generation == pol.generation
            && w.stage == WordStage::Again
        {
            self.tracker.set_word(id, v.word, word, now);
        }
        self.first(pol, &fd, frame.len(), v2.committed, Some(v2), st)
    }

    /// The first packet of a connection a gateway expected (`+new+rel`):
    /// related to an allowed connection, it passes without meeting the
    /// ACLs and is committed with its control connection's verdict word.
    ///
    /// Unless it comes from or goes to a third port sharing the zone: in
    /// OVN the expectation is in the zones of the control connection's two
    /// ports, so a stage whose port's zone is another finds none and its
    /// ACLs meet the packet as a new connection's first. If they allow it,
    /// it is committed as a related one, as OVN would commit it in both
    /// zones; if not, it is dropped and the expectation stays.
    fn expected(&self, cx: &Cx<'_>, frame: &mut Vec<u8>, v: Verdict, st: &mut FwStats) -> Decision {
        let (pol, now) = (cx.pol, cx.now);
        let mut third = None;
        let [hi, ho] = held(cx, v.word);
        if !(hi && ho) {
            st.cross_pair += 1;
            let key = Key::from_frame(frame, cx.inport, cx.outport);
            let fd = pol.decide_stages(!hi, !ho, &key);
            if !fd.allows() {
                return self.first(pol, &fd, frame.len(), false, Some(v), st);
            }
            third = Some(fd);
        }
        uncount(&mut st.tracker, &v);
        // The control connection's word, with the zones this connection
        // opens between (an active FTP data connection opens the other
        // way round).
        let word = Word::with_pair(v.word, pol.pair_at(cx.inport, cx.outport, cx.zone));
        let action = CtAction {
            nat: pol.lookup_action(cx.zone).nat,
            word: (v.word != 0).then_some(word),
            ..CtAction::commit(cx.zone)
        };
        let v2 = self
            .tracker
            .process_mut(frame, LinkType::Ethernet, &action, now, &mut st.tracker);
        if let Some(fd) = third {
            let mut d = self.first(pol, &fd, frame.len(), v2.committed, Some(v2), st);
            if let Some(r) = v2.refused {
                d.action = Action::Drop;
                d.reason = Some(refusal_reason(r));
            }
            return d;
        }
        if v.word != 0
            && Word::generation_of(v.word) != pol.generation
            && let (Some(id), None) = (v2.conn, v2.refused)
        {
            // The control connection's word is an older policy's: no
            // packet of it has come since the change. The new connection
            // (or one committed before the change whose SYN comes again,
            // `+new+rel` still: the commit stored nothing) is judged now,
            // as a change judges it: by its control connection, under the
            // policy in force.
            let d = self.rejudge(cx, frame, &v2, id, st);
            let mut d = Decision { ct: Some(v2), ..d };
            pol.log_related(&mut d, &v2);
            return d;
        }
        // (Refused for want of room with such a word, it names no ACL:
        // which one allows the control connection now is known once that
        // connection is judged again.)
        let acl = session_acl(pol, v.word);
        let mut d = match v2.refused {
            Some(r) => Decision::drop(Stage::Session, acl, refusal_reason(r)),
            None => Decision::allow(Stage::Session, acl),
        };
        d.ct = Some(v2);
        pol.log_related(&mut d, &v2);
        d
    }

    /// Reports and counts a first-packet decision: the deciding ACL's
    /// packets, bytes and (when it committed) connections.
    pub(super) fn first(
        &self,
        pol: &Compiled,
        fd: &FirstDecision,
        len: usize,
        committed: bool,
        ct: Option<Verdict>,
        st: &mut FwStats,
    ) -> Decision {
        let (stage, dir, s) = fd.deciding();
        let acl = s.acl.map_or(AclRef::Default, AclRef::Acl);
        st.sync(pol.generation, pol.policy.acls.len());
        let counters = match s.acl {
            Some(i) => &mut st.acls[i as usize],
            None => &mut st.defaults[dir as usize],
        };
        counters.packets += 1;
        counters.bytes += len as u64;
        counters.conns += u64::from(committed);
        let (action, reason) = match s.kind {
            Kind::Stateful | Kind::Stateless => (Action::Allow, None),
            Kind::Drop => (Action::Drop, Some(drop_reason(s.acl.is_some()))),
            Kind::Reject => (Action::Reject, Some(drop_reason(s.acl.is_some()))),
        };
        Decision {
            action,
            stage,
            acl,
            reason,
            ct,
            log: s.acl.is_some_and(|i| pol.policy.acls[i as usize].log),
        }
    }
}

/// The zones a packet of `cx` went between as its connection's opening
/// packets would have: swapped for a reply.
#[inline(always)]
pub(super) fn opening_pair(cx: &Cx<'_>, dir: Dir) -> Pair {
    match dir {
        Dir::Orig => cx.pol.pair_at(cx.inport, cx.outport, cx.zone),
        Dir::Reply => cx.pol.pair_at(cx.outport, cx.inport, cx.zone),
    }
}

/// Whether the zones of `cx`'s inport and of its outport are among the two
/// a connection of word `w`, tracked in `cx.zone`, was opened between
/// (both, where the word keeps none): in OVN's terms, whether each stage's
/// zone holds the connection.
pub(super) fn held(cx: &Cx<'_>, w: u64) -> [bool; 2] {
    let Some((zp, zq)) = Word::pair_of(w).zones(cx.zone) else {
        return [true; 2];
    };
    [cx.inport, cx.outport].map(|p| {
        let z = cx.pol.port_zone(p);
        z == zp || z == zq
    })
}

/// A later `+new` packet of a connection committed under this generation
/// between the same two zones (`pair`, the packet's): the decision the
/// ACLs would make, which is the one that committed it
/// ([`Compiled::takes_words`] says why), read from the connection's word
/// and counted as [`Firewall::first`] counts it, without a key or the
/// classifier. `None` for any other packet, and where the policy's words
/// do not decide `+new` packets.
#[inline]
pub(super) fn by_word(
    pol: &Compiled,
    v: &Verdict,
    pair: Pair,
    len: usize,
    st: &mut FwStats,
) -> Option<Decision> {
    if !pol.takes_words()
        || v.conn.is_none()
        || v.state.contains(CtState::REL)
        || v.dir != Dir::Orig
        || v.invalid.is_some()
        || v.refused.is_some()
        || Word::pair_of(v.word) != pair
    {
        return None;
    }
    // A connection a change left alone (`persist-established`) is not
    // one this policy's ACLs allowed: its `+new` packets meet them.
    let w = Word::decode(v.word).filter(|w| w.generation == pol.generation && !w.is_persisted())?;
    // As `FirstDecision::deciding` names an allowing decision: the to-lport
    // ACL, else the from-lport one, else the default (counted as
    // to-lport's).
    let (stage, dir) = match w.stage {
        WordStage::From => (Stage::FromLport, Direction::FromLport),
        WordStage::To => (Stage::ToLport, Direction::ToLport),
        WordStage::Default => (Stage::Default, Direction::ToLport),
        // Judged again, and left otherwise than a commit would leave it:
        // the ACLs meet it, and commit it.
        WordStage::Again => return None,
    };
    st.sync(pol.generation, pol.policy.acls.len());
    let counters = match w.acl {
        Some(i) => st.acls.get_mut(i as usize)?,
        None => &mut st.defaults[dir as usize],
    };
    counters.packets += 1;
    counters.bytes += len as u64;
    st.new_by_word += 1;
    Some(Decision {
        action: Action::Allow,
        stage,
        acl: w.acl.map_or(AclRef::Default, AclRef::Acl),
        reason: None,
        ct: Some(*v),
        log: w.acl.is_some_and(|i| pol.policy.acls[i as usize].log),
    })
}

/// The ACL a session's word names, as reported.
pub(super) fn session_acl(pol: &Compiled, word: u64) -> AclRef {
    match Word::decode(word) {
        Some(w) if w.generation == pol.generation && w.is_persisted() => AclRef::Persisted,
        Some(w) if w.generation == pol.generation => w.acl.map_or(AclRef::Default, AclRef::Acl),
        Some(w) if w.persist => AclRef::Persisted,
        _ => AclRef::Default,
    }
}

fn drop_reason(by_acl: bool) -> DropReason {
    if by_acl {
        DropReason::Acl
    } else {
        DropReason::Default
    }
}

pub(super) fn refusal_reason(r: Refusal) -> DropReason {
    match r {
        Refusal::TableFull => DropReason::TableFull,
        Refusal::ZoneLimit => DropReason::ZoneLimit,
        Refusal::NatExhausted => DropReason::NatExhausted,
        Refusal::Clash => DropReason::Clash,
    }
}

/// Whether committing the connection `v` found with `action` would change
/// nothing: it exists already, with the verdict word and label the commit
/// would give it, and the commit brings no translation, gateway or mark.
/// (The lookup's verdict has the label of a `+new` packet's connection,
/// though not of others: `skip_label`.)
fn commit_changes_nothing(v: &Verdict, action: &CtAction) -> bool {
    v.conn.is_some()
        && v.refused.is_none()
        && action.nat.is_none()
        && action.alg.is_none()
        && action.mark.is_none()
        && action.word == Some(v.word)
        && action
            .label
            .is_none_or(|l| v.label & l.mask == l.value & l.mask)
}

/// Takes back what the tracker counted for a lookup whose packet is then
/// tracked again (with a commit) or not at all (decided stateless): the
/// same counts the tracker adds per packet.
pub(super) fn uncount(s: &mut Stats, v: &Verdict) {
    let dec = |x: &mut u64| *x = x.saturating_sub(1);
    dec(&mut s.packets);
    if v.state.contains(CtState::NEW) {
        dec(&mut s.new);
    }
    if v.state.contains(CtState::EST) {
        dec(&mut s.established);
    }
    if v.state.contains(CtState::REL) {
        dec(&mut s.related);
    }
    if let Some(r) = v.invalid {
        dec(&mut s.invalid);
        dec(&mut s.invalid_by_reason[r as usize]);
    }
}
