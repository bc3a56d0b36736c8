//! The caller's word kept with each connection: stored by the commit that
//! creates it, read into every verdict (one at a time and in bursts, ICMP
//! errors included), changed by compare-exchange, inherited by a data
//! connection from its control connection; its label changed after the
//! commit; and removing a connection by its id.

mod common;
use common::{Net, act};

use std::net::Ipv6Addr;

use ctrack_core::{
    ConnId, ConnKey, CtAction, CtState, Dir, Endpoint, Family, LinkType, Masked, Stats, Time,
    Verdict,
};
use ctrack_wire::build::{self, Frame, L4};
use ctrack_wire::icmp::v4;
use ctrack_wire::ip_proto;
use ctrack_wire::tcp::flags::*;

const C: [u8; 4] = [10, 0, 0, 1];
const S: [u8; 4] = [192, 0, 2, 2];

/// `action` (in its text form) with `word` to store on a commit.
fn with_word(action: &str, word: u64) -> CtAction {
    CtAction {
        word: Some(word),
        ..act(action)
    }
}

fn udp(out: bool) -> Frame {
    if out {
        Frame::v4(C, S, L4::udp(5000, 53, b"q"))
    } else {
        Frame::v4(S, C, L4::udp(53, 5000, b"a"))
    }
}

fn udp_key(zone: u16) -> ConnKey {
    ConnKey {
        src: Endpoint::v4(C.into(), 5000),
        dst: Endpoint::v4(S.into(), 53),
        zone,
        proto: ip_proto::UDP,
        family: Family::V4,
    }
}

impl Net {
    /// Sends `f` with a built action (one packet, `process`).
    fn send_action(&self, f: &Frame, action: &CtAction) -> Verdict {
        let mut stats = self.stats.get();
        let v = self
            .t
            .process(&f.build(), LinkType::Ethernet, action, self.now, &mut stats);
        self.stats.set(stats);
        v
    }

    /// Sends `frames` as one burst with `action`.
    fn burst(&self, frames: &[Frame], action: &CtAction) -> Vec<Verdict> {
        let bytes: Vec<Vec<u8>> = frames.iter().map(Frame::build).collect();
        let refs: Vec<&[u8]> = bytes.iter().map(Vec::as_slice).collect();
        let mut stats = self.stats.get();
        let mut out = Vec::new();
        self.t.process_batch(
            &refs,
            LinkType::Ethernet,
            action,
            self.now,
            &mut out,
            &mut stats,
        );
        self.stats.set(stats);
        out
    }

    fn remove(&self, id: ConnId) -> bool {
        let mut stats = self.stats.get();
        let r = self.t.remove(id, self.now, &mut stats);
        self.stats.set(stats);
        r
    }
}

#[test]
fn a_commit_stores_the_word_and_both_directions_read_it() {
    let n = Net::new();
    let v = n.send_action(&udp(true), &with_word("commit,zone=3", 0xfeed));
    assert!(v.committed);
    assert_eq!(v.word, 0xfeed);
    let id = v.conn.unwrap();
    // Later packets read it with the record, whatever their action says
    // (a word is only stored on creation).
    for (out, dir) in [(false, Dir::Reply), (true, Dir::Orig)] {
        for action in [
            act("commit,zone=3"),
            with_word("commit,zone=3", 7),
            act("zone=3"),
        ] {
            let v = n.send_action(&udp(out), &action);
            assert_eq!((v.conn, v.dir, v.word), (Some(id), dir, 0xfeed));
            assert!(!v.committed);
        }
    }
    assert_eq!(n.t.conn(id, n.now).unwrap().word, 0xfeed);
    let (found, info, _) = n.t.lookup(&udp_key(3), n.now).unwrap();
    assert_eq!((found, info.word), (id, 0xfeed));
}

#[test]
fn without_a_word_a_connection_has_zero_and_lookups_have_none() {
    let n = Net::new();
    let v = n.send_action(&udp(true), &act("commit"));
    assert_eq!(v.word, 0);
    assert_eq!(n.send_action(&udp(false), &act("commit")).word, 0);
    // Without commit nothing is stored, the word neither.
    let f = Frame::v4(C, S, L4::udp(6000, 53, b"q"));
    let v = n.send_action(&f, &with_word("", 9));
    assert_eq!((v.conn, v.word), (None, 0));
}

#[test]
fn a_burst_reads_the_word_for_every_packet_of_both_directions() {
    let n = Net::new();
    let other = |out: bool| {
        if out {
            Frame::v4(C, S, L4::udp(5001, 53, b"q"))
        } else {
            Frame::v4(S, C, L4::udp(53, 5001, b"a"))
        }
    };
    // The burst that creates both connections: each commit stores the
    // action's word, and the runs after it read it back.
    let frames = [
        udp(true),
        udp(true),
        other(true),
        udp(false),
        other(false),
        other(false),
    ];
    let vs = n.burst(&frames, &with_word("commit", 0xab));
    assert_eq!(vs.len(), frames.len());
    for v in &vs {
        assert_eq!(v.word, 0xab, "{v:?}");
    }
    assert!(vs[0].committed && vs[2].committed);
    let (a, b) = (vs[0].conn.unwrap(), vs[2].conn.unwrap());
    assert_ne!(a, b);
    // One connection's word changes; a later burst sees each its own.
    assert!(n.t.set_word(b, 0xab, 0xcd, n.now));
    let frames = [
        udp(false),
        udp(false),
        other(true),
        other(true),
        udp(true),
        other(false),
    ];
    let vs = n.burst(&frames, &act("commit"));
    let got: Vec<(ConnId, Dir, u64)> = vs
        .iter()
        .map(|v| (v.conn.unwrap(), v.dir, v.word))
        .collect();
    assert_eq!(
        got,
        vec![
            (a, Dir::Reply, 0xab),
            (a, Dir::Reply, 0xab),
            (b, Dir::Orig, 0xcd),
            (b, Dir::Orig, 0xcd),
            (a, Dir::Orig, 0xab),
            (b, Dir::Reply, 0xcd),
        ]
    );
}

#[test]
fn an_icmp_error_carries_its_connection_s_word() {
    let n = Net::new();
    let id = n
        .send_action(&udp(true), &with_word("commit", 0x5151))
        .conn
        .unwrap();
    let q = build::quote(&udp(true).ip_packet(), 8);
    let err = Frame::v4(S, C, L4::icmp_error(v4::DST_UNREACH, 3, &q));
    let v = n.send_action(&err, &act("commit"));
    assert_eq!(v.state.to_string(), "rel|rpl|trk");
    assert_eq!((v.conn, v.word), (Some(id), 0x5151));
    // In a burst too.
    let vs = n.burst(&[err.clone(), udp(false)], &act("commit"));
    assert_eq!((vs[0].conn, vs[0].word), (Some(id), 0x5151));
    assert_eq!((vs[1].conn, vs[1].word), (Some(id), 0x5151));
}

#[test]
fn set_word_is_a_compare_exchange_on_a_live_connection() {
    let n = Net::new();
    let id = n
        .send_action(&udp(true), &with_word("commit", 1))
        .conn
        .unwrap();
    // Not the word it holds: nothing changes.
    assert!(!n.t.set_word(id, 2, 3, n.now));
    assert_eq!(n.send_action(&udp(false), &act("commit")).word, 1);
    assert!(n.t.set_word(id, 1, 2, n.now));
    assert_eq!(n.send_action(&udp(false), &act("commit")).word, 2);
    assert_eq!(n.t.conn(id, n.now).unwrap().word, 2);
    // The old word no longer matches.
    assert!(!n.t.set_word(id, 1, 4, n.now));
    assert!(n.t.set_word(id, 2, 0, n.now));
    assert_eq!(n.send_action(&udp(true), &act("commit")).word, 0);
    // Expired (not yet swept): not live.
    let later = Time::from_secs(100 + 3600);
    assert!(!n.t.set_word(id, 0, 5, later));
    // Removed: not live.
    assert!(n.remove(id));
    assert!(!n.t.set_word(id, 0, 5, n.now));
    // Its zone flushed: not live either.
    let id = n
        .send_action(&udp(true), &with_word("commit,zone=4", 1))
        .conn
        .unwrap();
    assert!(n.t.flush_zone(4));
    assert!(!n.t.set_word(id, 1, 5, n.now));
}

/// `set_label` changes the bits its mask selects, on a live connection
/// only, with or without a label set before.
#[test]
fn set_label_changes_the_masked_bits_of_a_live_connection() {
    let n = Net::new();
    let id = n.send_action(&udp(true), &act("commit")).conn.unwrap();
    assert_eq!(n.t.conn(id, n.now).unwrap().entry.label, 0);
    assert!(n.t.set_label(id, 0xab << 96 | 0x1234, 0xff << 96 | 0xffff, n.now));
    assert_eq!(
        n.send_action(&udp(false), &act("commit")).label,
        0xab << 96 | 0x1234
    );
    // Only the masked bits change.
    assert!(n.t.set_label(id, 0xcd << 96 | 0x9999, 0xff << 96, n.now));
    assert_eq!(
        n.t.conn(id, n.now).unwrap().entry.label,
        0xcd << 96 | 0x1234
    );
    // Expired, or removed: not live.
    assert!(!n.t.set_label(id, 0, u128::MAX, Time::from_secs(100 + 3600)));
    assert!(n.remove(id));
    assert!(!n.t.set_label(id, 0, u128::MAX, n.now));
}

/// `skip_label` leaves the label out of the verdicts of established and
/// reply packets, not of `+new` packets' or a commit's.
#[test]
fn skip_label_leaves_the_label_out_of_established_verdicts() {
    let n = Net::new();
    let labelled = CtAction {
        label: Some(Masked::new(0x42, u128::MAX)),
        ..act("commit")
    };
    let v = n.send_action(&udp(true), &labelled);
    assert_eq!((v.label, v.committed), (0x42, true));
    let skip = CtAction {
        skip_label: true,
        ..act("")
    };
    // Unanswered, the flow's next packet is `+new`: it has the label.
    let v = n.send_action(&udp(true), &skip);
    assert!(v.state.contains(CtState::NEW));
    assert_eq!(v.label, 0x42);
    // The reply, and the established packets after it: none.
    let v = n.send_action(&udp(false), &skip);
    assert!(v.state.contains(CtState::RPL) && v.conn.is_some());
    assert_eq!(v.label, 0);
    assert_eq!(n.send_action(&udp(true), &skip).label, 0);
    // Without it, they have it.
    assert_eq!(n.send_action(&udp(true), &act("")).label, 0x42);
    assert_eq!(n.send_action(&udp(false), &act("")).label, 0x42);
}

#[test]
fn remove_ends_a_connection_by_its_id() {
    let n = Net::new();
    n.t.set_zone_limit(3, 10);
    let v = n.send_action(&udp(true), &act("commit,zone=3"));
    let id = v.conn.unwrap();
    n.send_action(&udp(false), &act("commit,zone=3"));
    let keep = Frame::v4(C, S, L4::udp(5001, 53, b"q"));
    let kept = n.send_action(&keep, &act("commit,zone=3")).conn.unwrap();
    assert_eq!((n.t.zone_len(3), n.t.zone_limit(3)), (2, (10, 2)));

    assert!(n.remove(id));
    assert_eq!(n.stats.get().flushed, 1);
    assert_eq!(n.t.table_len(), 1);
    assert_eq!((n.t.zone_len(3), n.t.zone_limit(3)), (1, (10, 1)));
    assert_eq!(n.t.conn(id, n.now), None);
    assert_eq!(n.t.lookup(&udp_key(3), n.now), None);
    assert_eq!(n.t.lookup(&udp_key(3).reverse(), n.now), None);
    // Gone: neither direction finds it (lookup only), a second remove
    // neither, and the count stays.
    for out in [true, false] {
        let v = n.send_action(&udp(out), &act("zone=3"));
        assert_eq!((v.conn, v.state.to_string().as_str()), (None, "new|trk"));
    }
    assert!(!n.remove(id));
    assert_eq!(n.stats.get().flushed, 1);
    // The other connection is untouched.
    let v = n.send_action(&keep, &act("zone=3"));
    assert_eq!(v.conn, Some(kept));
}

#[test]
fn remove_leaves_an_expired_connection_to_the_sweep() {
    let n = Net::new();
    let id = n.send_action(&udp(true), &act("commit")).conn.unwrap();
    let mut stats = Stats::default();
    assert!(!n.t.remove(id, Time::from_secs(100 + 3600), &mut stats));
    assert_eq!(stats.flushed, 0);
    assert!(n.remove(id));
}

#[test]
fn remove_and_the_word_work_for_ipv6() {
    let n = Net::new();
    let c: Ipv6Addr = "fd00::1".parse().unwrap();
    let s: Ipv6Addr = "fd00::2".parse().unwrap();
    let out = Frame::v6(c, s, L4::udp(1, 2, b"x"));
    let back = Frame::v6(s, c, L4::udp(2, 1, b"y"));
    let v = n.send_action(&out, &with_word("commit", u64::MAX));
    let id = v.conn.unwrap();
    assert_eq!((id.family(), v.word), (Family::V6, u64::MAX));
    assert_eq!(n.send_action(&back, &act("commit")).word, u64::MAX);
    assert!(n.t.set_word(id, u64::MAX, 1, n.now));
    assert_eq!(n.send_action(&back, &act("commit")).word, 1);
    assert!(n.remove(id));
    assert_eq!(n.send_action(&back, &act("")).conn, None);
    assert_eq!(n.t.table_len(), 0);
}

/// An FTP control connection C:40000 -> S:21 committed with `word`, and
/// its PORT command announcing C:40001 (the server's data connection
/// comes from S:20).
fn ftp_port(n: &Net, word: u64) -> ConnId {
    let seg = |src, sp, dst, dp, flags, seq, ack, data: &[u8]| {
        Frame::v4(src, dst, L4::tcp_seg(sp, dp, flags, seq, ack, 65535, data))
    };
    let ctl = with_word("commit,alg=ftp", word);
    let id = n
        .send_action(&seg(C, 40000, S, 21, SYN, 100, 0, b""), &ctl)
        .conn
        .unwrap();
    n.send_action(&seg(S, 21, C, 40000, SYN | ACK, 500, 101, b""), &ctl);
    n.send_action(&seg(C, 40000, S, 21, ACK, 101, 501, b""), &ctl);
    let port = b"PORT 10,0,0,1,156,65\r\n";
    let v = n.send_action(&seg(C, 40000, S, 21, PSH | ACK, 101, 501, port), &ctl);
    assert_eq!((v.conn, v.word), (Some(id), word));
    assert_eq!(n.t.expectation_count(), 1);
    id
}

fn data_syn() -> Frame {
    Frame::v4(S, C, L4::tcp_seg(20, 40001, SYN, 9000, 0, 65535, b""))
}

#[test]
fn an_expected_data_connection_inherits_its_control_connection_s_word() {
    let n = Net::new();
    let control = ftp_port(&n, 0x77);
    // Without commit: related, and the control connection's word says
    // what was allowed.
    let v = n.send_action(&data_syn(), &act(""));
    assert_eq!(v.state.to_string(), "new|rel|trk");
    assert_eq!((v.conn, v.word), (None, 0x77));
    // The word is read from the control connection as it is now.
    assert!(n.t.set_word(control, 0x77, 0x78, n.now));
    let v = n.send_action(&data_syn(), &act(""));
    assert_eq!(v.word, 0x78);
    // Committed with no word of its own: inherited, kept for its packets.
    let v = n.send_action(&data_syn(), &act("commit"));
    assert_eq!(v.state.to_string(), "new|rel|trk");
    assert!(v.committed);
    assert_eq!(v.word, 0x78);
    let data = v.conn.unwrap();
    let syn_ack = Frame::v4(
        C,
        S,
        L4::tcp_seg(40001, 20, SYN | ACK, 7000, 9001, 65535, b""),
    );
    let v = n.send_action(&syn_ack, &act("commit"));
    assert_eq!((v.conn, v.word), (Some(data), 0x78));
    assert_eq!(v.state.to_string(), "est|rel|rpl|trk");
    // Its own from then on: the control connection's changes do not
    // follow it.
    assert!(n.t.set_word(control, 0x78, 0x79, n.now));
    assert_eq!(n.t.conn(data, n.now).unwrap().word, 0x78);
}

#[test]
fn the_action_s_word_overrides_the_inherited_one() {
    let n = Net::new();
    ftp_port(&n, 0x77);
    let v = n.send_action(&data_syn(), &with_word("commit", 0x99));
    assert_eq!(
        (v.state.to_string().as_str(), v.word),
        ("new|rel|trk", 0x99)
    );
    assert_eq!(n.t.conn(v.conn.unwrap(), n.now).unwrap().word, 0x99);
}

#[test]
fn a_tftp_transfer_inherits_its_request_s_word() {
    let n = Net::new();
    let u = |a, sp, b, dp, p: &[u8]| Frame::v4(a, b, L4::udp(sp, dp, p));
    let mut rrq = vec![0, 1];
    rrq.extend_from_slice(b"boot.img\0octet\0");
    let v = n.send_action(
        &u(C, 3000, S, 69, &rrq),
        &with_word("commit,alg=tftp", 0x42),
    );
    assert_eq!(v.word, 0x42);
    let v = n.send_action(&u(S, 4567, C, 3000, b"\0\x03\0\x01data"), &act("commit"));
    assert_eq!(
        (v.state.to_string().as_str(), v.word),
        ("new|rel|trk", 0x42)
    );
    let v = n.send_action(&u(C, 3000, S, 4567, b"\0\x04\0\x01"), &act("commit"));
    assert_eq!(
        (v.state.to_string().as_str(), v.word),
        ("est|rel|rpl|trk", 0x42)
    );
}
