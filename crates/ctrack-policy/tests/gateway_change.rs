//! A connection a gateway expected (an FTP or TFTP data connection) across policy
//! changes. It was let in as related to its control connection, without
//! meeting the ACLs, so a change judges it by its control connection: a
//! change that keeps FTP allowed leaves the transfer alone, one that no
//! longer allows FTP blocks it (docs/firewall.md, "Policy changes").

mod common;
use common::{each, in_a_burst, plain, seg};

use ctrack_core::action::Alg;
use ctrack_core::{Config, FragConfig, Tracker};
use ctrack_policy::expr::Expr;
use ctrack_policy::firewall::{AclRef, Action, Decision, DropReason, Firewall, FwOutputs, Stage};
use ctrack_policy::key::{Field, flag};
use ctrack_policy::model::{Acl, AclAction, DefaultAction, Direction, Policy};
use ctrack_wire::tcp::flags::{ACK, PSH, SYN};

const C_MAC: [u8; 6] = [2, 0, 0, 0, 0, 1];
const S_MAC: [u8; 6] = [2, 0, 0, 0, 0, 2];
const C_IP: [u8; 4] = [10, 0, 0, 1];
const S_IP: [u8; 4] = [192, 0, 2, 2];
/// The server's port number in the key (ports from 1, in file order).
const SERVER: u128 = 2;
const OUT: ([u8; 6], [u8; 6]) = (C_MAC, S_MAC);
const BACK: ([u8; 6], [u8; 6]) = (S_MAC, C_MAC);

/// Default drop. ACL 0, `ftp`: the server takes FTP, with the gateway
/// (left out with `ftp` false, an SSH ACL in its place). ACL 1: the client
/// may send anything out. ACL 2, with `unrelated`: the server takes UDP 9.
fn policy(ftp: bool, unrelated: bool) -> Policy {
    let mut first = Acl::new(
        0,
        Direction::ToLport,
        1000,
        AclAction::AllowRelated,
        to_server(if ftp { 21 } else { 22 }, flag::TCP),
    );
    first.alg = ftp.then_some(Alg::Ftp);
    let mut acls = vec![
        first,
        Acl::new(
            1,
            Direction::FromLport,
            1,
            AclAction::AllowRelated,
            Expr::eq(Field::Inport, 1),
        ),
    ];
    if unrelated {
        acls.push(Acl::new(
            2,
            Direction::ToLport,
            900,
            AclAction::AllowRelated,
            to_server(9, flag::UDP),
        ));
    }
    let port = common::port;
    Policy {
        default: DefaultAction::Drop,
        ports: vec![port("client", C_MAC, 1), port("server", S_MAC, 2)],
        acls,
        ..Policy::default()
    }
}

/// To the server's port `port` of protocol `proto` (a `flag`).
fn to_server(port: u128, proto: u16) -> Expr {
    Expr::And(vec![
        Expr::eq(Field::Outport, SERVER),
        Expr::flags(flag::IP | proto),
        Expr::eq(Field::L4Dst, port),
    ])
}

fn fw() -> Firewall<u64> {
    Firewall::new(
        Tracker::new(Config::default()),
        FragConfig::default(),
        policy(true, false),
    )
    .unwrap()
}

/// A transfer's frames: the control connection's handshake and the
/// command that opens the data connection (PORT for an active transfer,
/// the server's PASV answer for a passive one), the data connection's
/// handshake; then `after`: a data segment each way and one of the
/// control connection.
fn transfer(active: bool) -> (Vec<Vec<u8>>, Vec<Vec<u8>>) {
    let (c, s) = ((C_IP, 40000), (S_IP, 21));
    // Active: the server opens it, from port 20 to the client's 40001.
    // Passive: the client opens it, from 40002 to the server's 30001.
    let (data, data_out, data_back) = match active {
        true => (((S_IP, 20), (C_IP, 40001)), BACK, OUT),
        false => (((C_IP, 40002), (S_IP, 30001)), OUT, BACK),
    };
    let back = (data.1, data.0);
    let command = match active {
        true => seg(
            (c, s),
            (PSH | ACK, 101, 501),
            b"PORT 10,0,0,1,156,65\r\n",
            OUT,
        ),
        false => seg(
            (s, c),
            (PSH | ACK, 501, 101),
            b"227 Entering Passive Mode (192,0,2,2,117,49)\r\n",
            BACK,
        ),
    };
    let before = vec![
        seg((c, s), (SYN, 100, 0), b"", OUT),
        seg((s, c), (SYN | ACK, 500, 101), b"", BACK),
        seg((c, s), (ACK, 101, 501), b"", OUT),
        command,
        seg(data, (SYN, 9000, 0), b"", data_out),
        seg(back, (SYN | ACK, 7000, 9001), b"", data_back),
        seg(data, (ACK, 9001, 7001), b"", data_out),
    ];
    let after = vec![
        seg(data, (PSH | ACK, 9001, 7001), b"data", data_out),
        seg(back, (ACK, 7001, 9005), b"", data_back),
        seg((c, s), (ACK, 150, 560), b"", OUT),
    ];
    (before, after)
}

/// The decisions on `after`, the policy changed to `next` once `before`
/// went through: frame by frame, checked against the same in bursts on a
/// second firewall.
fn across(active: bool, next: &Policy) -> Vec<Decision> {
    let (before, after) = transfer(active);
    let (one, burst) = (fw(), fw());
    let (mut so, mut sb) = (FwOutputs::default(), FwOutputs::default());
    for d in each(&one, &before, &mut so) {
        assert_eq!(d.action, Action::Allow, "{d:?}");
    }
    each(&burst, &before, &mut sb);
    one.set_policy(next.clone()).unwrap();
    burst.set_policy(next.clone()).unwrap();
    let want = each(&one, &after, &mut so);
    let got = in_a_burst(&burst, &after, &mut sb);
    let plain_all = |ds: &[Decision]| ds.iter().map(plain).collect::<Vec<_>>();
    assert_eq!(plain_all(&got), plain_all(&want));
    assert_eq!(so.stats.rejudged, sb.stats.rejudged);
    want
}

#[test]
fn a_change_that_keeps_ftp_leaves_its_transfers_alone() {
    for active in [true, false] {
        let ds = across(active, &policy(true, true));
        for d in &ds {
            assert_eq!(
                (d.action, d.stage, d.acl),
                (Action::Allow, Stage::Session, AclRef::Acl(0)),
                "active {active}: {ds:?}"
            );
        }
    }
}

#[test]
fn a_change_that_drops_ftp_blocks_its_transfers() {
    for active in [true, false] {
        let ds = across(active, &policy(false, true));
        for d in &ds[..1] {
            assert_eq!(
                (d.action, d.reason),
                (Action::Drop, Some(DropReason::Blocked)),
                "active {active}: {ds:?}"
            );
        }
        // The control connection: blocked too.
        assert_eq!(ds[2].reason, Some(DropReason::Blocked), "{ds:?}");
    }
}

/// A data connection that opens after a change, before any packet of its
/// control connection has come since (the control connection's word is
/// still the older policy's): judged at once by its control connection
/// under the policy in force, let in where that one still allows FTP,
/// dropped where it does not.
#[test]
fn a_data_connection_opened_after_a_change_is_judged_by_its_control_connection() {
    for active in [true, false] {
        for (keep, next) in [(true, policy(true, true)), (false, policy(false, true))] {
            let (before, _) = transfer(active);
            // Up to the command that opens the data connection.
            let (head, data) = before.split_at(4);
            let (one, burst) = (fw(), fw());
            let (mut so, mut sb) = (FwOutputs::default(), FwOutputs::default());
            each(&one, head, &mut so);
            each(&burst, head, &mut sb);
            one.set_policy(next.clone()).unwrap();
            burst.set_policy(next.clone()).unwrap();
            let want = each(&one, &data[..1], &mut so);
            let got = in_a_burst(&burst, &data[..1], &mut sb);
            assert_eq!(plain(&got[0]), plain(&want[0]));
            let d = want[0];
            match keep {
                true => assert_eq!(
                    (d.action, d.stage, d.acl),
                    (Action::Allow, Stage::Session, AclRef::Acl(0)),
                    "active {active}"
                ),
                false => assert_eq!(
                    (d.action, d.reason),
                    (Action::Drop, Some(DropReason::Blocked)),
                    "active {active}"
                ),
            }
            // Let in, it is a connection of the policy in force: its
            // answer passes on the session without judging it again.
            if keep {
                let rejudged = so.stats.rejudged;
                let d = each(&one, &data[1..2], &mut so)[0];
                assert_eq!((d.action, d.stage), (Action::Allow, Stage::Session));
                assert_eq!(so.stats.rejudged, rejudged);
            }
        }
    }
}

/// TFTP: the client asks the server's port 69 for a file; the server
/// answers from a port of its own, the gateway's expected connection. A
/// change that keeps TFTP allowed leaves it alone; one that does not
/// blocks it.
#[test]
fn a_tftp_transfer_is_judged_by_its_request() {
    use ctrack_wire::build::{Frame, L4};
    let tftp = |keep: bool| {
        let mut p = policy(false, false);
        if keep {
            let mut a = Acl::new(
                2,
                Direction::ToLport,
                1000,
                AclAction::AllowRelated,
                to_server(69, flag::UDP),
            );
            a.alg = Some(Alg::Tftp);
            p.acls.push(a);
        }
        p
    };
    let dgram = |(src, sp): ([u8; 4], u16),
                 (dst, dp): ([u8; 4], u16),
                 data: &[u8],
                 macs: ([u8; 6], [u8; 6])| {
        let mut f = Frame::v4(src, dst, L4::udp(sp, dp, data));
        (f.eth_src, f.eth_dst) = macs;
        f.build()
    };
    let (c, s, d) = ((C_IP, 40000), (S_IP, 69), (S_IP, 50000));
    let request = dgram(c, s, b"\x00\x01file.txt\x00octet\x00", OUT);
    let first = dgram(d, c, b"\x00\x03\x00\x01data", BACK);
    let ack = dgram(c, d, b"\x00\x04\x00\x01", OUT);
    let next = dgram(d, c, b"\x00\x03\x00\x02more", BACK);
    for keep in [true, false] {
        let fw = Firewall::new(
            Tracker::new(Config::default()),
            FragConfig::default(),
            tftp(true),
        )
        .unwrap();
        let mut o = FwOutputs::default();
        for (i, d) in each(&fw, &[request.clone(), first.clone(), ack.clone()], &mut o)
            .iter()
            .enumerate()
        {
            assert_eq!(d.action, Action::Allow, "frame {i}: {d:?}");
        }
        fw.set_policy(tftp(keep)).unwrap();
        let d = each(&fw, std::slice::from_ref(&next), &mut o)[0];
        match keep {
            true => assert_eq!(
                (d.action, d.stage, d.acl),
                (Action::Allow, Stage::Session, AclRef::Acl(2))
            ),
            false => assert_eq!(
                (d.action, d.reason),
                (Action::Drop, Some(DropReason::Blocked))
            ),
        }
    }
}

/// A data connection's SYN sent again after a change (`+new+rel`: the
/// connection exists, the commit stores nothing new), before any packet
/// of it or of its control connection has come since: its word is the
/// older policy's, so it is judged by its control connection under the
/// policy in force, as its first SYN would have been. Given the same
/// policy again, it is decided as if nothing had changed; given one
/// without FTP, it is blocked. (The fuzz target `firewall_frames` found
/// it reported as the default's, seed 5160.)
#[test]
fn a_data_connections_syn_sent_again_after_a_change_is_judged_by_its_control_connection() {
    for active in [true, false] {
        let (before, _) = transfer(active);
        // Up to the data connection's SYN, let in.
        let head = &before[..5];
        let syn = &before[4..5];
        let fresh = || {
            let fw = fw();
            let mut st = FwOutputs::default();
            let d = each(&fw, head, &mut st);
            assert!(d.iter().all(|d| d.action == Action::Allow), "{d:?}");
            (fw, st)
        };
        // No change: the SYN sent again is the control connection's ACL's.
        let (fw0, mut s0) = fresh();
        let want = each(&fw0, syn, &mut s0)[0];
        assert_eq!(
            (want.action, want.stage, want.acl),
            (Action::Allow, Stage::Session, AclRef::Acl(0)),
            "active {active}"
        );
        assert!(want.ct.is_some_and(|v| !v.committed), "{want:?}");
        for (keep, next) in [(true, policy(true, false)), (false, policy(false, false))] {
            let (one, mut so) = fresh();
            let (burst, mut sb) = fresh();
            one.set_policy(next.clone()).unwrap();
            burst.set_policy(next).unwrap();
            let d = each(&one, syn, &mut so)[0];
            let b = in_a_burst(&burst, syn, &mut sb)[0];
            assert_eq!(plain(&b), plain(&d), "active {active}, keep {keep}");
            match keep {
                true => assert_eq!(plain(&d), plain(&want), "active {active}"),
                false => assert_eq!(
                    (d.action, d.reason),
                    (Action::Drop, Some(DropReason::Blocked)),
                    "active {active}"
                ),
            }
        }
    }
}
