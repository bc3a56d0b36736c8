//! Packets of known connections: the cached verdict, and judging a
//! connection again after a policy change.
//!
//! A connection's word names the policy generation that allowed it. When
//! the generation is the current one the packet passes on it. When it is
//! older, the connection is judged again, once: its opening packet (rebuilt
//! from the connection's original tuple, as a TCP SYN) meets the new
//! policy. Still allowed: the word is stamped with the new generation and
//! the packet passes, with no hiccup. No longer allowed: the connection is
//! removed and the packet dropped (`blocked`), in whichever direction it
//! came; later packets find no connection and meet the ACLs as new ones.
//! An ACL with `persist-established` exempts the connections it
//! committed for as long as a policy still has it (`persist.rs`).
//! A connection a gateway expected (an FTP or TFTP data connection), let
//! in as related to its control connection, is judged by that one's
//! opening packet: it stays while the policy allows its control
//! connection.
//! This is the outcome OVN reaches by matching every established packet
//! against the ACLs again, reached once per connection and generation.

use ctrack_core::{ConnId, CtState, Dir, Entry, EntryTuple, Masked, Verdict};
use ctrack_wire::ethernet::ethertype;
use ctrack_wire::ip_proto;

use super::compiled::{Compiled, FirstDecision};
use super::decision::{AclRef, Decision, DropReason, FwStats, Stage};
use super::engine::Firewall;
use super::judge::{Cx, held, opening_pair, session_acl};
use super::persist;
use super::word::{Word, WordStage};
use crate::key::{Field, Key, flag, mac_u64};

/// What one stage does with a packet of a known connection that went
/// between other zones than the connection's opening packets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    /// The stage's port's zone holds the connection in OVN, and the packet
    /// is a reply or related: it passes, as OVN's established and related
    /// packets pass the ACL stage.
    Pass,
    /// The stage's ACLs meet it: its port's zone would not hold the
    /// connection in OVN (the packet is new there), or it holds it and
    /// the packet goes the original way (OVN matches those again).
    Acls,
    /// A related packet (an ICMP error) in a zone that would not hold the
    /// connection: invalid there.
    Invalid,
}

impl<T> Firewall<T> {
    /// A packet the tracker found a connection for.
    pub(super) fn session(
        &self,
        cx: &Cx<'_>,
        frame: &[u8],
        v: Verdict,
        id: ConnId,
        st: &mut FwStats,
    ) -> Decision {
        if v.invalid.is_some() {
            return invalid(v);
        }
        if !Word::fits(v.word, opening_pair(cx, v.dir)) {
            return self.cross(cx, frame, v, id, st);
        }
        self.on_session(cx, frame, v, id, st)
    }

    /// A packet of its connection's session: the cached verdict, or the
    /// connection judged again after a policy change.
    fn on_session(
        &self,
        cx: &Cx<'_>,
        frame: &[u8],
        v: Verdict,
        id: ConnId,
        st: &mut FwStats,
    ) -> Decision {
        let pol = cx.pol;
        let d = if Word::generation_of(v.word) == pol.generation {
            Decision::allow(Stage::Session, session_acl(pol, v.word))
        } else {
            self.rejudge(cx, frame, &v, id, st)
        };
        if let AclRef::Acl(i) = d.acl {
            st.sync(pol.generation, pol.policy.acls.len());
            let c = &mut st.acls[i as usize];
            c.packets += 1;
            c.bytes += frame.len() as u64;
        }
        let mut d = Decision { ct: Some(v), ..d };
        pol.log_related(&mut d, &v);
        d
    }

    /// A packet of connection `id` that goes between other zones than the
    /// packets that opened it: the connection's addresses sent from or to
    /// a third port whose zone is the one the connection is tracked in.
    ///
    /// OVN tracks a packet in its inport's zone (the from-lport stage) and
    /// in its outport's (the to-lport stage), and the connection lives in
    /// the zones of the two ports that opened it. Each stage does what
    /// OVN's would: where its port's zone is one of those, a reply or a
    /// related packet passes and an original-direction packet meets the
    /// ACLs again; where it is not, the packet is new there and meets the
    /// ACLs, or, related, is invalid. Nothing is committed: the tuple is
    /// the connection's. A stage that passes is reported as the default
    /// does; when both pass, the packet is the session's after all.
    fn cross(
        &self,
        cx: &Cx<'_>,
        frame: &[u8],
        v: Verdict,
        id: ConnId,
        st: &mut FwStats,
    ) -> Decision {
        let pol = cx.pol;
        // An ICMP error about the connection (OVN's `!ct.est && ct.rel`);
        // the packets of a gateway's data connection (`+est+rel`) go as
        // any established packet.
        let related = v.state.contains(CtState::REL) && !v.state.contains(CtState::EST);
        let step = |held: bool| match (held, related) {
            (true, true) => Step::Pass,
            (true, false) if v.dir == Dir::Reply => Step::Pass,
            (true, false) | (false, false) => Step::Acls,
            (false, true) => Step::Invalid,
        };
        let steps = held(cx, v.word).map(step);
        if steps == [Step::Pass; 2] {
            return self.on_session(cx, frame, v, id, st);
        }
        st.cross_pair += 1;
        if steps.contains(&Step::Invalid) {
            return invalid(v);
        }
        let key = Key::from_frame(frame, cx.inport, cx.outport);
        let fd = pol.decide_stages(steps[0] == Step::Acls, steps[1] == Step::Acls, &key);
        self.first(pol, &fd, frame.len(), false, Some(v), st)
    }

    /// Judges connection `id` again under the current policy.
    pub(super) fn rejudge(
        &self,
        cx: &Cx<'_>,
        frame: &[u8],
        v: &Verdict,
        id: ConnId,
        st: &mut FwStats,
    ) -> Decision {
        let (pol, now) = (cx.pol, cx.now);
        st.rejudged += 1;
        // The zones it was opened between stay the word's.
        let kept = Word::pair_of(v.word);
        let Some(info) = self.tracker.conn(id, now) else {
            // Gone since the lookup: another worker judged it again and
            // blocked it, or it was flushed. The next packet starts
            // afresh.
            return Decision::drop(Stage::Session, AclRef::Default, DropReason::Blocked);
        };
        // The ports its opening packet went between: those its word's
        // zones name, where each port has a zone of its own; else those
        // of the packet at hand (swapped for a reply), which may be other
        // ports of a shared zone. (A packet comes here only where its own
        // ports' zones are among the word's two, `fits` or `held`: so the
        // ports named are the packet's, oriented as the opening went, even
        // after a change renumbered the zones; for a frame between two
        // MACs of one port, that port and the other the opening went to.)
        let (inport, outport) = match pol.opened_between(kept, cx.zone) {
            Some(ports) => ports,
            None => match v.dir {
                Dir::Orig => (cx.inport, cx.outport),
                Dir::Reply => (cx.outport, cx.inport),
            },
        };
        let key = judged_key(&info.entry, frame, v.dir, inport, outport);
        let fd = pol.decide(&key);
        let (stage, _, s) = fd.deciding();
        let acl = s.acl.map_or(AclRef::Default, AclRef::Acl);
        // The stages whose `persist-established` ACL the policy still has
        // pass it whatever their ACLs now say (OVN's
        // `ct_mark.allow_established`; see `persist.rs`).
        //
        // Which persisting ACLs committed it, the label says: every commit
        // writes it, that of a later `+new` packet too (a SYN sent again,
        // as OVN commits every `ct.new` packet with its
        // `allow_established`), which leaves the word, and its `persist`
        // bit, as they were.
        let old_ids = persist::ids_of(info.entry.label);
        let holds = pol.persisting.held(old_ids);
        let left_alone = || {
            let alone = pol.decide_stages(!holds[0], !holds[1], &key);
            (holds.contains(&true) && alone.allows()).then_some(alone)
        };
        let (allowed, judged) = match fd.commits() {
            true => (true, fd),
            false => match left_alone() {
                Some(alone) => (false, alone),
                None => {
                    // No longer allowed statefully: blocked (or, if the
                    // new policy passes it stateless, no longer tracked).
                    self.tracker.remove(id, now, &mut st.tracker);
                    return match fd.allows() {
                        true => Decision::allow(stage, acl),
                        false => Decision::drop(stage, acl, DropReason::Blocked),
                    };
                }
            },
        };
        let (ids, label) = relabel(pol, &judged, allowed, old_ids, holds, info.entry.label);
        // The label is written by whoever stamps the word: a worker still
        // judging under an older policy, its stamp lost, leaves it alone.
        let stamp = |word: Word| {
            if self.tracker.set_word(id, v.word, word.encode(), now) && label.mask != 0 {
                self.tracker.set_label(id, label.value, label.mask, now);
            }
        };
        if allowed {
            // (`inport`, `outport`) as the connection's opening packet
            // went.
            let pair = match kept.kept() {
                true => kept,
                false => pol.pair_at(inport, outport, cx.zone),
            };
            // Still allowed: by the ACL that allows it now (reported and
            // counted as that one's).
            let word = pol.word_with(&fd, pair, ids != [0; 2]);
            // A later `+new` packet of it (a SYN sent again, after the
            // client's ACK was judged here) takes the word's verdict only
            // where committing it would change nothing: where the ACLs
            // would then leave it as it is (`commit_changes_nothing`).
            // Else it meets them and is committed, as OVN commits every
            // `ct.new` packet: a connection no persisting ACL committed
            // gains the identity of the one that allows it now.
            let (bits, committed) = pol.commit_marks(&fd, pair);
            let after = (info.entry.label & !label.mask) | (label.value & label.mask);
            let alike =
                committed == word && bits.is_none_or(|l| after & l.mask == l.value & l.mask);
            stamp(match alike {
                true => word,
                false => Word {
                    stage: WordStage::Again,
                    ..word
                },
            });
            return Decision::allow(Stage::Session, acl);
        }
        // No longer allowed, but left alone.
        stamp(Word {
            generation: pol.generation,
            acl: None,
            stage: WordStage::Default,
            persist: true,
            pair: kept,
        });
        Decision::allow(Stage::Session, AclRef::Persisted)
    }
}

/// What a connection judged again (`judged`, which `allowed` it or left
/// it alone) keeps in its label: the identities of its stages'
/// persisting ACLs, the label's were `old` of which the policy `holds`
/// those flagged, and the `label` of the ACL that allows it now. Returns
/// the identities, and the label bits that change (mask 0: none).
///
/// A stage's identity stays while held. One whose ACL is gone becomes
/// that of the persisting ACL that allows the connection now, if any: OVN
/// flushes such a connection and commits its next packet afresh. A
/// connection no persisting ACL committed gains none: OVN commits no
/// `allow_established` to an established connection.
fn relabel(
    pol: &Compiled,
    judged: &FirstDecision,
    allowed: bool,
    old: [u64; 2],
    holds: [bool; 2],
    label: u128,
) -> ([u64; 2], Masked<u128>) {
    let mut bits = Masked::new(0, 0);
    let mut ids = old;
    if old != [0; 2] {
        let now = pol.persist_ids(judged);
        ids = std::array::from_fn(|i| match old[i] != 0 && !holds[i] {
            true => now[i],
            false => old[i],
        });
        bits.value = persist::label_of(ids);
        if ids != old {
            bits.mask |= persist::IDS_MASK;
        }
    }
    if let Some(l) = (allowed && pol.persisting.labels)
        .then(|| pol.acl_label(judged))
        .flatten()
    {
        // The ACL that allows it now gives its label, as OVN commits an
        // established connection again to change it.
        let l = u128::from(l) << 96;
        if (label ^ l) >> 96 != 0 {
            bits = Masked::new(bits.value | l, bits.mask | u128::from(u32::MAX) << 96);
        }
    }
    (ids, bits)
}

/// The drop of a packet the tracker found invalid (OVN's `ct.inv`).
fn invalid(v: Verdict) -> Decision {
    let mut d = Decision::drop(Stage::Session, AclRef::Invalid, DropReason::Invalid);
    d.ct = Some(v);
    d
}

/// The key a connection is judged again by, whose packet at hand went in
/// direction `dir` between `inport` and `outport` as the connection's
/// opening packet went: that packet's ([`opening_key`]); or, for a
/// connection a gateway expected (an FTP or TFTP data connection), its
/// control connection's. The data connection was let in as related to
/// that one without meeting the ACLs, so it stays while the policy allows
/// that one (a change that leaves FTP allowed leaves its transfers
/// alone). The control connection's opening packet went between the same
/// two hosts; which way round its source address tells, one of the data
/// connection's ends as its two tuples give them (translated or not). A
/// control connection between other hosts (FXP) leaves the data
/// connection judged by its own opening packet.
fn judged_key(e: &Entry, frame: &[u8], dir: Dir, inport: u16, outport: u16) -> Key {
    if let Some(m) = &e.master_tuple {
        if m.src == e.orig.src {
            return opening_key(m, e.proto, frame, dir, (inport, outport));
        }
        if m.src == e.orig.dst || m.src == e.reply.src {
            let flipped = match dir {
                Dir::Orig => Dir::Reply,
                Dir::Reply => Dir::Orig,
            };
            return opening_key(m, e.proto, frame, flipped, (outport, inport));
        }
    }
    opening_key(&e.orig, e.proto, frame, dir, (inport, outport))
}

/// The key of the opening packet of a connection of original tuple `t`
/// and protocol `proto`, rebuilt: a TCP connection opens with a SYN; the
/// link-layer fields come from the packet at hand (swapped when it goes
/// the other way, `dir` a reply), as do the TTL and the TOS (`ip.ttl`,
/// `ip.dscp`, `ip.ecn`), which the connection does not keep: OVN, which
/// matches each packet of a connection against the ACLs again, reads them
/// from the packet at hand too.
fn opening_key(t: &EntryTuple, proto: u8, frame: &[u8], dir: Dir, ports: (u16, u16)) -> Key {
    let (inport, outport) = ports;
    let mut k = Key::from_frame(frame, inport, outport);
    if dir == Dir::Reply && frame.len() >= 12 {
        k.set(Field::EthSrc, u128::from(mac_u64(&frame[0..6])));
        k.set(Field::EthDst, u128::from(mac_u64(&frame[6..12])));
    }
    let v4 = t.src.is_ipv4();
    let addr = |a: std::net::IpAddr| match a {
        std::net::IpAddr::V4(x) => u128::from(u32::from(x)),
        std::net::IpAddr::V6(x) => u128::from(x),
    };
    k.set(Field::IpSrc, addr(t.src));
    k.set(Field::IpDst, addr(t.dst));
    k.set(Field::IpProto, u128::from(proto));
    k.set(
        Field::EthType,
        u128::from(if v4 { ethertype::IPV4 } else { ethertype::IPV6 }),
    );
    let mut flags = (k.flags() & (flag::VLAN)) | flag::IP | if v4 { flag::IP4 } else { flag::IP6 };
    k.set(Field::TcpFlags, 0);
    k.set(Field::L4Src, 0);
    k.set(Field::L4Dst, 0);
    k.set(Field::IcmpType, 0);
    k.set(Field::IcmpCode, 0);
    match proto {
        ip_proto::TCP => {
            flags |= flag::TCP;
            k.set(Field::TcpFlags, u128::from(ctrack_wire::tcp::flags::SYN));
        }
        ip_proto::UDP => flags |= flag::UDP,
        ip_proto::SCTP => flags |= flag::SCTP,
        ip_proto::ICMP if v4 => flags |= flag::ICMP | flag::ICMP4,
        ip_proto::ICMPV6 if !v4 => flags |= flag::ICMP | flag::ICMP6,
        _ => {}
    }
    if let (Some(s), Some(d)) = (t.sport, t.dport) {
        k.set(Field::L4Src, u128::from(s));
        k.set(Field::L4Dst, u128::from(d));
    }
    if let Some((_, ty, code)) = t.icmp {
        k.set(Field::IcmpType, u128::from(ty));
        k.set(Field::IcmpCode, u128::from(code));
    }
    k.set(Field::Flags, u128::from(flags));
    k
}
