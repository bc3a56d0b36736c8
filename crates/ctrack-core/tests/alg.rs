//! FTP and TFTP gateways: expectations, `rel` data connections, and under
//! NAT the rewritten text and the sequence numbers that follow it.

mod common;
use common::Net;

use std::net::{Ipv4Addr, Ipv6Addr};

use ctrack_core::{ConnKey, Endpoint, Family, InvalidReason, Stats, Time};
use ctrack_wire::build::{Frame, L4};
use ctrack_wire::tcp::flags::*;

const C: [u8; 4] = [10, 0, 0, 1];
const S: [u8; 4] = [192, 0, 2, 2];
const N: [u8; 4] = [198, 51, 100, 1];

/// A TCP segment from `(address, port)` to `(address, port)`.
fn seg(
    (src, sp): ([u8; 4], u16),
    (dst, dp): ([u8; 4], u16),
    flags: u16,
    seq: u32,
    ack: u32,
    data: &[u8],
) -> Frame {
    Frame::v4(src, dst, L4::tcp_seg(sp, dp, flags, seq, ack, 65535, data))
}

/// The control connection's handshake: client 40000 to server port 21,
/// client ISN 100, server ISN 500.
fn control(n: &Net, client: [u8; 4], server: [u8; 4], out: [u8; 4], fwd: &str, back: &str) {
    control_from(n, (client, 40000), server, out, fwd, back);
}

/// [`control`] from client port `cport`.
fn control_from(
    n: &Net,
    (client, cport): ([u8; 4], u16),
    server: [u8; 4],
    out: [u8; 4],
    fwd: &str,
    back: &str,
) {
    assert_eq!(
        n.state(&seg((client, cport), (server, 21), SYN, 100, 0, b""), fwd),
        "new|trk"
    );
    assert_eq!(
        n.state(
            &seg(
                (out, 21),
                (client_seen(client, out), cport),
                SYN | ACK,
                500,
                101,
                b"",
            ),
            back,
        ),
        "est|rpl|trk"
    );
    assert_eq!(
        n.state(&seg((client, cport), (server, 21), ACK, 101, 501, b""), fwd),
        "est|trk"
    );
}

/// The control connection's handshake from C through a source NAT to N
/// (`fwd` out, `nat` back), each packet checked as it leaves.
fn snat_control(n: &Net, fwd: &str) {
    snat_control_from(n, 40000, fwd);
}

/// [`snat_control`] from client port `cport` (kept through the NAT).
fn snat_control_from(n: &Net, cport: u16, fwd: &str) {
    n.expect(
        &seg((C, cport), (S, 21), SYN, 100, 0, b""),
        fwd,
        &seg((N, cport), (S, 21), SYN, 100, 0, b""),
        "new|trk|snat",
    );
    n.expect(
        &seg((S, 21), (N, cport), SYN | ACK, 500, 101, b""),
        "nat",
        &seg((S, 21), (C, cport), SYN | ACK, 500, 101, b""),
        "est|rpl|trk|dnat",
    );
    n.expect(
        &seg((C, cport), (S, 21), ACK, 101, 501, b""),
        fwd,
        &seg((N, cport), (S, 21), ACK, 101, 501, b""),
        "est|trk|snat",
    );
}

fn client_seen(client: [u8; 4], _out: [u8; 4]) -> [u8; 4] {
    client
}

#[test]
fn active_ftp_without_nat() {
    let n = Net::new();
    control(&n, C, S, S, "commit,alg=ftp", "commit");
    let port = b"PORT 10,0,0,1,156,65\r\n"; // 40001
    assert_eq!(
        n.state(
            &seg((C, 40000), (S, 21), PSH | ACK, 101, 501, port),
            "commit"
        ),
        "est|trk"
    );
    assert_eq!(n.t.expectation_count(), 1);
    let e = &n.t.expectations(n.now)[0];
    assert_eq!(
        e.key.to_string(),
        "src=192.0.2.2,dst=10.0.0.1,sport=0,dport=40001"
    );
    // The server's data connection is related; every packet of it.
    assert_eq!(
        n.state(&seg((S, 20), (C, 40001), SYN, 9000, 0, b""), "commit"),
        "new|rel|trk"
    );
    assert_eq!(
        n.state(
            &seg((C, 40001), (S, 20), SYN | ACK, 7000, 9001, b""),
            "commit"
        ),
        "est|rel|rpl|trk"
    );
    assert_eq!(
        n.state(&seg((S, 20), (C, 40001), ACK, 9001, 7001, b""), "commit"),
        "est|rel|trk"
    );
    // Consumed: another connection to the same port is not expected.
    assert_eq!(n.t.expectation_count(), 0);
    assert_eq!(
        n.state(&seg((S, 2020), (C, 40001), SYN, 1, 0, b""), "commit"),
        "new|trk"
    );
    let st = n.stats.get();
    assert_eq!((st.expectations_created, st.expectations_matched), (1, 1));
    // The data connection names its control connection.
    let mut masters = 0;
    n.t.for_each(None, n.now, |_, c| {
        if c.entry.master.is_some() {
            masters += 1;
        }
    });
    assert_eq!(masters, 1);
}

#[test]
fn passive_ftp_without_nat_and_marks_inherited() {
    let n = Net::new();
    control(&n, C, S, S, "commit,alg=ftp,mark=0x42", "commit");
    let reply = b"227 Entering Passive Mode (192,0,2,2,195,80).\r\n"; // 50000
    assert_eq!(
        n.state(
            &seg((S, 21), (C, 40000), PSH | ACK, 501, 101, reply),
            "commit"
        ),
        "est|rpl|trk"
    );
    let (v, _) = n.send(&seg((C, 40002), (S, 50000), SYN, 1, 0, b""), "commit");
    assert_eq!(v.state.to_string(), "new|rel|trk");
    assert_eq!(v.mark, 0x42);
    // 229 (no address).
    let epsv = b"229 Entering Extended Passive Mode (|||50001|)\r\n";
    assert_eq!(
        n.state(
            &seg(
                (S, 21),
                (C, 40000),
                PSH | ACK,
                501 + reply.len() as u32,
                101,
                epsv,
            ),
            "commit",
        ),
        "est|rpl|trk"
    );
    assert_eq!(
        n.state(&seg((C, 40003), (S, 50001), SYN, 1, 0, b""), "commit"),
        "new|rel|trk"
    );
}

/// A control connection through source NAT to 198.51.100.1 that
/// announces port 40001 (the address rewritten in its text); the command
/// as sent and as it leaves.
fn announce_through_snat(n: &Net) -> (&'static [u8], &'static [u8]) {
    let fwd = "commit,nat(src=198.51.100.1),alg=ftp";
    snat_control(n, fwd);
    let port = b"PORT 10,0,0,1,156,65\r\n";
    let shown = b"PORT 198,51,100,1,156,65\r\n";
    n.expect(
        &seg((C, 40000), (S, 21), PSH | ACK, 101, 501, port),
        fwd,
        &seg((N, 40000), (S, 21), PSH | ACK, 101, 501, shown),
        "est|trk|snat",
    );
    (port, shown)
}

/// The expectation of a translated control connection translates its
/// data connection only under an action that translates (`nat`), as
/// Open vSwitch applies an expectation's translation only with the ct
/// action's NAT; committed plainly, it is related and left as it came.
#[test]
fn an_expected_connection_is_translated_only_under_nat() {
    let announced = || {
        let n = Net::new();
        announce_through_snat(&n);
        n
    };
    let n = announced();
    let syn = seg((S, 20), (N, 40001), SYN, 9000, 0, b"");
    n.expect(&syn, "commit", &syn, "new|rel|trk");
    // Nor does the connection wait for the client's answer as its reply:
    // its reply is the untranslated address's.
    let answer = seg((C, 40001), (S, 20), SYN | ACK, 7000, 9001, b"");
    assert_eq!(n.state(&answer, "commit"), "inv|trk");
    // Under an action with a range of its own, the expectation's
    // translation still wins (Open vSwitch's `conn_not_found`): the
    // data connection goes to the client, its source left alone.
    let n = announced();
    n.expect(
        &syn,
        "commit,nat(src=203.0.113.5)",
        &seg((S, 20), (C, 40001), SYN, 9000, 0, b""),
        "new|rel|trk|dnat",
    );
}

#[test]
fn a_bounce_to_another_host_is_not_expected() {
    let n = Net::new();
    control(&n, C, S, S, "commit,alg=ftp", "commit");
    let port = b"PORT 10,9,9,9,156,65\r\n";
    assert_eq!(
        n.state(
            &seg((C, 40000), (S, 21), PSH | ACK, 101, 501, port),
            "commit"
        ),
        "est|trk"
    );
    assert_eq!(n.t.expectation_count(), 0);
}

#[test]
fn active_ftp_through_snat_rewrites_text_and_sequence_numbers() {
    let n = Net::new();
    let fwd = "commit,nat(src=198.51.100.1),alg=ftp";
    snat_control(&n, fwd);
    let port = b"PORT 10,0,0,1,156,65\r\n";
    let shown = b"PORT 198,51,100,1,156,65\r\n";
    let grow = (shown.len() - port.len()) as u32;
    n.expect(
        &seg((C, 40000), (S, 21), PSH | ACK, 101, 501, port),
        fwd,
        &seg((N, 40000), (S, 21), PSH | ACK, 101, 501, shown),
        "est|trk|snat",
    );
    // The server acknowledges the longer text; the client sees its own
    // numbering.
    let after = 101 + port.len() as u32;
    n.expect(
        &seg((S, 21), (N, 40000), ACK, 501, after + grow, b""),
        "nat",
        &seg((S, 21), (C, 40000), ACK, 501, after, b""),
        "est|rpl|trk|dnat",
    );
    // Many packets later, both ways, the offset holds and the tracker
    // keeps finding them in window.
    let mut cs = after;
    let mut ss = 501;
    for i in 0..100u32 {
        let data = format!("NOOP {i}\r\n");
        n.expect(
            &seg((C, 40000), (S, 21), PSH | ACK, cs, ss, data.as_bytes()),
            fwd,
            &seg(
                (N, 40000),
                (S, 21),
                PSH | ACK,
                cs + grow,
                ss,
                data.as_bytes(),
            ),
            "est|trk|snat",
        );
        cs += data.len() as u32;
        let answer = b"200 NOOP ok\r\n";
        n.expect(
            &seg((S, 21), (N, 40000), PSH | ACK, ss, cs + grow, answer),
            "nat",
            &seg((S, 21), (C, 40000), PSH | ACK, ss, cs, answer),
            "est|rpl|trk|dnat",
        );
        ss += answer.len() as u32;
    }
    // The data connection, to the translated address, goes to the client.
    n.expect(
        &seg((S, 20), (N, 40001), SYN, 9000, 0, b""),
        "commit,nat",
        &seg((S, 20), (C, 40001), SYN, 9000, 0, b""),
        "new|rel|trk|dnat",
    );
    n.expect(
        &seg((C, 40001), (S, 20), SYN | ACK, 7000, 9001, b""),
        "commit,nat",
        &seg((N, 40001), (S, 20), SYN | ACK, 7000, 9001, b""),
        "est|rel|rpl|trk|snat",
    );
    // A second PORT moves the offset again.
    let port2 = b"PORT 10,0,0,1,156,66\r\n";
    let shown2 = b"PORT 198,51,100,1,156,66\r\n";
    n.expect(
        &seg((C, 40000), (S, 21), PSH | ACK, cs, ss, port2),
        fwd,
        &seg((N, 40000), (S, 21), PSH | ACK, cs + grow, ss, shown2),
        "est|trk|snat",
    );
    cs += port2.len() as u32;
    n.expect(
        &seg((C, 40000), (S, 21), ACK, cs, ss, b""),
        fwd,
        &seg((N, 40000), (S, 21), ACK, cs + 2 * grow, ss, b""),
        "est|trk|snat",
    );
    assert_eq!(n.stats.get().alg_rewritten, 2);
}

#[test]
fn passive_ftp_behind_dnat() {
    let n = Net::new();
    let outside: [u8; 4] = [192, 0, 2, 7];
    let server: [u8; 4] = [10, 0, 0, 9];
    let fwd = "commit,nat(dst=10.0.0.9),alg=ftp";
    n.expect(
        &seg((outside, 5000), (N, 21), SYN, 1, 0, b""),
        fwd,
        &seg((outside, 5000), (server, 21), SYN, 1, 0, b""),
        "new|trk|dnat",
    );
    n.expect(
        &seg((server, 21), (outside, 5000), SYN | ACK, 700, 2, b""),
        "nat",
        &seg((N, 21), (outside, 5000), SYN | ACK, 700, 2, b""),
        "est|rpl|trk|snat",
    );
    n.expect(
        &seg((outside, 5000), (N, 21), ACK, 2, 701, b""),
        fwd,
        &seg((outside, 5000), (server, 21), ACK, 2, 701, b""),
        "est|trk|dnat",
    );
    let reply = b"227 Entering Passive Mode (10,0,0,9,195,80).\r\n";
    let shown = b"227 Entering Passive Mode (198,51,100,1,195,80).\r\n";
    n.expect(
        &seg((server, 21), (outside, 5000), PSH | ACK, 701, 2, reply),
        "nat",
        &seg((N, 21), (outside, 5000), PSH | ACK, 701, 2, shown),
        "est|rpl|trk|snat",
    );
    // The client connects to the public address; the data connection goes
    // to the server.
    n.expect(
        &seg((outside, 5001), (N, 50000), SYN, 1, 0, b""),
        "commit,nat",
        &seg((outside, 5001), (server, 50000), SYN, 1, 0, b""),
        "new|rel|trk|dnat",
    );
}

#[test]
fn split_commands() {
    // Without NAT the halves are joined.
    let n = Net::new();
    control(&n, C, S, S, "commit,alg=ftp", "commit");
    assert_eq!(
        n.state(
            &seg((C, 40000), (S, 21), PSH | ACK, 101, 501, b"PORT 10,0,0,1,"),
            "commit",
        ),
        "est|trk"
    );
    assert_eq!(n.t.expectation_count(), 0);
    assert_eq!(
        n.state(
            &seg((C, 40000), (S, 21), PSH | ACK, 115, 501, b"156,65\r\n"),
            "commit",
        ),
        "est|trk"
    );
    assert_eq!(n.t.expectation_count(), 1);

    // Under NAT the first half is refused until it comes again whole.
    let n = Net::new();
    let fwd = "commit,nat(src=198.51.100.1),alg=ftp";
    snat_control(&n, fwd);
    let (v, _) = n.send(
        &seg((C, 40000), (S, 21), PSH | ACK, 101, 501, b"PORT 10,0,0,1,"),
        fwd,
    );
    assert_eq!(v.state.to_string(), "inv|trk");
    assert_eq!(v.invalid, Some(InvalidReason::AlgPartialCommand));
    assert_eq!(n.t.expectation_count(), 0);
    n.expect(
        &seg(
            (C, 40000),
            (S, 21),
            PSH | ACK,
            101,
            501,
            b"PORT 10,0,0,1,156,65\r\n",
        ),
        fwd,
        &seg(
            (N, 40000),
            (S, 21),
            PSH | ACK,
            101,
            501,
            b"PORT 198,51,100,1,156,65\r\n",
        ),
        "est|trk|snat",
    );
    assert_eq!(n.t.expectation_count(), 1);
    // A retransmission is rewritten the same way and moves nothing.
    n.expect(
        &seg(
            (C, 40000),
            (S, 21),
            PSH | ACK,
            101,
            501,
            b"PORT 10,0,0,1,156,65\r\n",
        ),
        fwd,
        &seg(
            (N, 40000),
            (S, 21),
            PSH | ACK,
            101,
            501,
            b"PORT 198,51,100,1,156,65\r\n",
        ),
        "est|trk|snat",
    );
    n.expect(
        &seg((C, 40000), (S, 21), ACK, 123, 501, b""),
        fwd,
        &seg((N, 40000), (S, 21), ACK, 127, 501, b""),
        "est|trk|snat",
    );
}

#[test]
fn a_refused_partial_command_is_counted_invalid_not_established() {
    let n = Net::new();
    let fwd = "commit,nat(src=198.51.100.1),alg=ftp";
    snat_control(&n, fwd);
    let before = n.stats.get();
    let (v, _) = n.send(
        &seg((C, 40000), (S, 21), PSH | ACK, 101, 501, b"PORT 10,0,0,1,"),
        fwd,
    );
    assert_eq!(v.state.to_string(), "inv|trk");
    let after = n.stats.get();
    assert_eq!(after.packets - before.packets, 1);
    assert_eq!(after.invalid_count(InvalidReason::AlgPartialCommand), 1);
    // One packet, reported inv: counted inv, and not est as well.
    assert_eq!(
        (
            after.established - before.established,
            after.invalid - before.invalid
        ),
        (0, 1)
    );
}

#[test]
fn hostile_payloads_are_harmless() {
    let n = Net::new();
    let fwd = "commit,nat(src=198.51.100.1),alg=ftp";
    snat_control(&n, fwd);
    let mut seq = 101u32;
    // Each payload, and how much longer the rewrite makes it.
    let payloads: Vec<(Vec<u8>, usize)> = vec![
        ([b"PORT ".as_slice(), &[b'9'; 1400]].concat(), 0),
        (b"PORT 999999999999,1,1,1,1,1\r\n".to_vec(), 0),
        (b"EPRT |1|1.2.3.4444|80|\r\n".to_vec(), 0),
        (b"EPRT |9|x|\r\n".to_vec(), 0),
        (vec![0u8; 1000], 0),
        (b"\r\n\r\n\n\n".to_vec(), 0),
        // 256 bytes after the command (the size that overflowed in Open
        // vSwitch): the command is rewritten, the rest left alone.
        (
            [b"PORT 10,0,0,1,156,65\r\n".as_slice(), &[b'A'; 256]].concat(),
            "198,51,100,1".len() - "10,0,0,1".len(),
        ),
    ];
    for (p, grow) in &payloads {
        let (v, out) = n.send(&seg((C, 40000), (S, 21), PSH | ACK, seq, 501, p), fwd);
        assert_eq!(v.state.to_string(), "est|trk|snat");
        // Ethernet, IPv4 and TCP headers, then the payload.
        assert_eq!(out.len(), 14 + 20 + 20 + p.len() + grow);
        seq = seq.wrapping_add(p.len() as u32);
    }
}

#[test]
fn ipv6_eprt_is_written_in_full() {
    let n = Net::new();
    let c: Ipv6Addr = "fd00::1".parse().unwrap();
    let s: Ipv6Addr = "2001:db8::2".parse().unwrap();
    let x: Ipv6Addr = "2001:db8:ffff::1".parse().unwrap();
    let t6 = |a, sp, b, dp, fl, seq, ack, data: &[u8]| {
        Frame::v6(a, b, L4::tcp_seg(sp, dp, fl, seq, ack, 65535, data))
    };
    let fwd = "commit,nat(src=2001:db8:ffff::1),alg=ftp";
    n.expect(
        &t6(c, 40000, s, 21, SYN, 100, 0, b""),
        fwd,
        &t6(x, 40000, s, 21, SYN, 100, 0, b""),
        "new|trk|snat",
    );
    n.expect(
        &t6(s, 21, x, 40000, SYN | ACK, 500, 101, b""),
        "nat",
        &t6(s, 21, c, 40000, SYN | ACK, 500, 101, b""),
        "est|rpl|trk|dnat",
    );
    n.expect(
        &t6(c, 40000, s, 21, ACK, 101, 501, b""),
        fwd,
        &t6(x, 40000, s, 21, ACK, 101, 501, b""),
        "est|trk|snat",
    );
    let eprt = b"EPRT |2|fd00::1|40001|\r\n";
    let shown = b"EPRT |2|2001:0db8:ffff:0000:0000:0000:0000:0001|40001|\r\n";
    n.expect(
        &t6(c, 40000, s, 21, PSH | ACK, 101, 501, eprt),
        fwd,
        &t6(x, 40000, s, 21, PSH | ACK, 101, 501, shown),
        "est|trk|snat",
    );
    n.expect(
        &t6(s, 20, x, 40001, SYN, 1, 0, b""),
        "commit,nat",
        &t6(s, 20, c, 40001, SYN, 1, 0, b""),
        "new|rel|trk|dnat",
    );
}

fn tftp_rrq() -> Vec<u8> {
    let mut p = vec![0, 1];
    p.extend_from_slice(b"boot.img\0octet\0");
    p
}

#[test]
fn tftp_with_and_without_nat() {
    let n = Net::new();
    let u = |a, sp, b, dp, p: &[u8]| Frame::v4(a, b, L4::udp(sp, dp, p));
    assert_eq!(
        n.state(&u(C, 3000, S, 69, &tftp_rrq()), "commit,alg=tftp"),
        "new|trk"
    );
    assert_eq!(
        n.state(&u(S, 4567, C, 3000, b"\0\x03\0\x01data"), "commit"),
        "new|rel|trk"
    );
    assert_eq!(
        n.state(&u(C, 3000, S, 4567, b"\0\x04\0\x01"), "commit"),
        "est|rel|rpl|trk"
    );

    let n = Net::new();
    n.expect(
        &u(C, 3001, S, 69, &tftp_rrq()),
        "commit,nat(src=198.51.100.1),alg=tftp",
        &u(N, 3001, S, 69, &tftp_rrq()),
        "new|trk|snat",
    );
    n.expect(
        &u(S, 4567, N, 3001, b"\0\x03\0\x01data"),
        "commit,nat",
        &u(S, 4567, C, 3001, b"\0\x03\0\x01data"),
        "new|rel|trk|dnat",
    );
}

/// A write request is expected as a read request is (Linux's
/// `tftp_help`: opcodes 1 and 2); through a source NAT that moves the
/// client's port, the transfer is expected to the port the server sees
/// (the reply direction's), and comes back to the client's own.
#[test]
fn tftp_write_requests_and_a_translated_port() {
    let u = |a, sp, b, dp, p: &[u8]| Frame::v4(a, b, L4::udp(sp, dp, p));
    let mut wrq = vec![0, 2];
    wrq.extend_from_slice(b"log.txt\0octet\0");
    let n = Net::new();
    assert_eq!(
        n.state(&u(C, 3000, S, 69, &wrq), "commit,alg=tftp"),
        "new|trk"
    );
    assert_eq!(
        n.state(&u(S, 4567, C, 3000, b"\0\x04\0\x00"), "commit"),
        "new|rel|trk"
    );

    let n = Net::new();
    n.expect(
        &u(C, 3001, S, 69, &tftp_rrq()),
        "commit,nat(src=198.51.100.1:5000),alg=tftp",
        &u(N, 5000, S, 69, &tftp_rrq()),
        "new|trk|snat",
    );
    n.expect(
        &u(S, 4567, N, 5000, b"\0\x03\0\x01data"),
        "commit,nat",
        &u(S, 4567, C, 3001, b"\0\x03\0\x01data"),
        "new|rel|trk|dnat",
    );
}

#[test]
fn expectations_are_bounded_and_expire() {
    let mut n = Net::new();
    n.t.set_max_expectations(1);
    control(&n, C, S, S, "commit,alg=ftp", "commit");
    let port = |p: u8| format!("PORT 10,0,0,1,156,{p}\r\n");
    assert_eq!(
        n.state(
            &seg(
                (C, 40000),
                (S, 21),
                PSH | ACK,
                101,
                501,
                port(65).as_bytes()
            ),
            "commit",
        ),
        "est|trk"
    );
    // A second control connection: refused, the table holds its one.
    let c2 = [10, 0, 0, 3];
    control(&n, c2, S, S, "commit,alg=ftp", "commit");
    assert_eq!(
        n.state(
            &seg(
                (c2, 40000),
                (S, 21),
                PSH | ACK,
                101,
                501,
                b"PORT 10,0,0,3,156,65\r\n",
            ),
            "commit",
        ),
        "est|trk"
    );
    assert_eq!(n.t.expectation_count(), 1);
    assert_eq!(n.stats.get().expectations_refused, 1);
    // A new PORT on the first replaces its own.
    assert_eq!(
        n.state(
            &seg(
                (C, 40000),
                (S, 21),
                PSH | ACK,
                123,
                501,
                port(66).as_bytes()
            ),
            "commit",
        ),
        "est|trk"
    );
    assert_eq!(n.t.expectation_count(), 1);
    assert_eq!(n.t.expectations(n.now)[0].key.dst.port, 40002);
    // Five minutes later it is gone.
    n.now = Time::from_secs(100 + 301);
    assert_eq!(
        n.state(&seg((S, 20), (C, 40002), SYN, 1, 0, b""), "commit"),
        "new|trk"
    );
    n.t.sweep(n.now, 1000, &mut Stats::default());
    assert_eq!(n.t.expectation_count(), 0);
}

#[test]
fn expectations_end_with_their_control_connection() {
    let n = Net::new();
    control(&n, C, S, S, "commit,alg=ftp", "commit");
    assert_eq!(
        n.state(
            &seg(
                (C, 40000),
                (S, 21),
                PSH | ACK,
                101,
                501,
                b"PORT 10,0,0,1,156,65\r\n",
            ),
            "commit",
        ),
        "est|trk"
    );
    assert_eq!(n.t.flush_all(&mut Stats::default()), 1);
    assert_eq!(
        n.state(&seg((S, 20), (C, 40001), SYN, 1, 0, b""), "commit"),
        "new|trk"
    );
}

#[test]
fn sack_edges_follow_the_offset() {
    let n = Net::new();
    let (port, shown) = announce_through_snat(&n);
    let after = 101 + port.len() as u32;
    let grow = (shown.len() - port.len()) as u32;
    // The server acknowledges up to the rewritten command and selectively
    // a later block, in the longer numbering; both come back shortened.
    let sack = |ack: u32, l: u32, r: u32, to: [u8; 4]| {
        let mut opts = vec![1, 1, 5, 10];
        opts.extend_from_slice(&l.to_be_bytes());
        opts.extend_from_slice(&r.to_be_bytes());
        Frame::v4(
            S,
            to,
            L4::Tcp {
                sport: 21,
                dport: 40000,
                seq: 501,
                ack,
                flags: ACK,
                window: 65535,
                options: opts,
                payload: Vec::new(),
            },
        )
    };
    n.expect(
        &sack(after + grow, after + grow + 10, after + grow + 20, N),
        "nat",
        &sack(after, after + 10, after + 20, C),
        "est|rpl|trk|dnat",
    );
}

/// A removed control connection's expectation holds its port no longer:
/// the client's next control connection through the same translation
/// announces the same port, and it is kept (as Linux and Open vSwitch,
/// which remove a connection's expectations with it). Before, the dead
/// one's expectation, still waiting for the sweep, moved the announced
/// port on by one.
#[test]
fn a_removed_control_connection_s_expectation_leaves_its_port() {
    let n = Net::new();
    let fwd = "commit,nat(src=198.51.100.1),alg=ftp";
    let port = b"PORT 10,0,0,1,156,65\r\n";
    let shown = b"PORT 198,51,100,1,156,65\r\n";
    for round in 0..2 {
        snat_control(&n, fwd);
        n.expect(
            &seg((C, 40000), (S, 21), PSH | ACK, 101, 501, port),
            fwd,
            &seg((N, 40000), (S, 21), PSH | ACK, 101, 501, shown),
            "est|trk|snat",
        );
        // The dead one's waits for the sweep; the new one took its place.
        assert_eq!(n.t.expectation_count(), 1, "round {round}");
        let control = ConnKey {
            src: Endpoint::v4(Ipv4Addr::from(C), 40000),
            dst: Endpoint::v4(Ipv4Addr::from(S), 21),
            zone: 0,
            proto: 6,
            family: Family::V4,
        };
        assert!(n.t.flush_key(&control, n.now, &mut Stats::default()));
    }
}

/// An expectation that waited its five minutes out gives its place to
/// another control connection's, although its own control connection
/// lives on (Linux and Open vSwitch time an expectation out by itself);
/// and the first control connection's next announcement, which replaces
/// its own old one, leaves the place's new holder alone.
#[test]
fn an_expired_expectation_gives_its_place_to_another_control_connection() {
    let mut n = Net::new();
    let port = |p: u8| format!("PORT 10,0,0,1,156,{p}\r\n");
    let announce = |n: &Net, cport: u16, seq: u32, p: u8| {
        let v = n.state(
            &seg((C, cport), (S, 21), PSH | ACK, seq, 501, port(p).as_bytes()),
            "commit",
        );
        assert_eq!(v, "est|trk");
    };
    control_from(&n, (C, 40000), S, S, "commit,alg=ftp", "commit");
    announce(&n, 40000, 101, 65);
    n.now = Time::from_secs(100 + 301);
    // A second control connection announces the same port: the first's
    // expectation has timed out, so the place is free.
    control_from(&n, (C, 40010), S, S, "commit,alg=ftp", "commit");
    announce(&n, 40010, 101, 65);
    let s = n.stats.get();
    assert_eq!((s.expectations_created, s.expectations_refused), (2, 0));
    // The first announces again: its old key is the second's now.
    announce(&n, 40000, 123, 66);
    let mut held: Vec<(u16, u16)> =
        n.t.expectations(n.now)
            .iter()
            .map(|e| (e.key.dst.port, e.master.src.port))
            .collect();
    held.sort_unstable();
    assert_eq!(held, [(40001, 40010), (40002, 40000)]);
    assert_eq!(
        n.state(&seg((S, 20), (C, 40001), SYN, 1, 0, b""), "commit"),
        "new|rel|trk"
    );
}

/// Through a source NAT, an expectation that timed out does not move the
/// port a later control connection announces (its own control
/// connection alive or not).
#[test]
fn an_expired_expectation_leaves_its_translated_port() {
    let mut n = Net::new();
    let fwd = "commit,nat(src=198.51.100.1),alg=ftp";
    let port = b"PORT 10,0,0,1,156,65\r\n";
    let shown = b"PORT 198,51,100,1,156,65\r\n";
    for (round, cport) in [40000, 40010].into_iter().enumerate() {
        snat_control_from(&n, cport, fwd);
        n.expect(
            &seg((C, cport), (S, 21), PSH | ACK, 101, 501, port),
            fwd,
            &seg((N, cport), (S, 21), PSH | ACK, 101, 501, shown),
            "est|trk|snat",
        );
        assert_eq!(n.t.expectation_count(), 1, "round {round}");
        n.now = Time::from_secs(100 + 301);
    }
}

/// An FTP session tracked in bursts (`process_batch`, read-only, and
/// `process_burst_mut`, rewriting) judges every packet as one packet at a
/// time does: the control connection's packets, each inspected on its own
/// in the middle of a burst, announce the data connection, which the same
/// burst then finds related. (Mutation round 41: the burst's step past an
/// inspected packet was not run by any of the crate's tests.)
#[test]
fn ftp_in_bursts_judges_as_frame_by_frame() {
    use ctrack_core::{CtState, LinkType, Tracker, Verdict};
    let first = vec![seg((C, 40000), (S, 21), SYN, 100, 0, b"").build()];
    let rest: Vec<Vec<u8>> = [
        seg((S, 21), (C, 40000), SYN | ACK, 500, 101, b""),
        seg((C, 40000), (S, 21), ACK, 101, 501, b""),
        seg((S, 21), (C, 40000), PSH | ACK, 501, 101, b"220 ready\r\n"),
        seg(
            (C, 40000),
            (S, 21),
            PSH | ACK,
            101,
            512,
            b"PORT 10,0,0,1,156,65\r\n",
        ),
        seg((S, 21), (C, 40000), PSH | ACK, 512, 123, b"200 PORT ok\r\n"),
        seg((S, 20), (C, 40001), SYN, 9000, 0, b""),
        seg((C, 40001), (S, 20), SYN | ACK, 7000, 9001, b""),
        seg((S, 20), (C, 40001), ACK, 9001, 7001, b""),
        seg((C, 40000), (S, 21), ACK, 123, 525, b""),
    ]
    .iter()
    .map(Frame::build)
    .collect();
    let (alg, commit) = ("commit,alg=ftp".parse().unwrap(), "commit".parse().unwrap());
    let now = Time::from_secs(100);
    let l = LinkType::Ethernet;
    let one = Tracker::default();
    let mut s1 = Stats::default();
    let mut want: Vec<Verdict> = Vec::new();
    for (frames, a) in [(&first, &alg), (&rest, &commit)] {
        want.extend(frames.iter().map(|f| one.process(f, l, a, now, &mut s1)));
    }
    let plain = |v: &Verdict| {
        let mut v = *v;
        (v.conn.take().is_some(), v)
    };
    assert_eq!(s1.expectations_created, 1, "{s1:?}");
    assert!(want[6].state.contains(CtState::REL), "{:?}", want[6]);
    for rewrite in [false, true] {
        let burst = Tracker::default();
        let mut s2 = Stats::default();
        let mut got: Vec<Verdict> = Vec::new();
        for (frames, a) in [(&first, &alg), (&rest, &commit)] {
            if rewrite {
                let mut fs = frames.clone();
                let mut out = vec![Verdict::default(); fs.len()];
                burst.process_burst_mut(&mut fs, l, a, now, &mut out, &mut s2);
                assert_eq!(&fs, frames, "nothing to rewrite");
                got.extend(out);
            } else {
                let refs: Vec<&[u8]> = frames.iter().map(Vec::as_slice).collect();
                burst.process_batch(&refs, l, a, now, &mut got, &mut s2);
            }
        }
        for (j, (w, g)) in want.iter().zip(&got).enumerate() {
            assert_eq!(plain(g), plain(w), "rewrite {rewrite}, packet {}", j + 1);
        }
        assert_eq!(s1, s2, "rewrite {rewrite}");
    }
}

/// An FTP control session through a source NAT, one action for both
/// directions: the handshake, then `command` (which the gateway rewrites
/// `grow` bytes longer), the server's acknowledgment of the longer text,
/// and `rounds` exchanges after it, the server acknowledging the
/// client's bytes as it saw them (`grow` further on). `t(from_client, flags, seq,
/// ack, data)` builds a segment of the session (`from_client` false: from
/// the server to the translated address).
fn ftp_after_a_rewrite(
    t: impl Fn(bool, u16, u32, u32, &[u8]) -> Frame,
    command: &[u8],
    grow: u32,
    rounds: u32,
) -> Vec<Vec<u8>> {
    let mut out = vec![
        t(true, SYN, 100, 0, b""),
        t(false, SYN | ACK, 500, 101, b""),
        t(true, ACK, 101, 501, b""),
        t(true, PSH | ACK, 101, 501, command),
    ];
    let (mut cs, mut ss) = (101 + command.len() as u32, 501);
    out.push(t(false, ACK, ss, cs + grow, b""));
    for i in 0..rounds {
        let data = format!("NOOP {i}\r\n");
        out.push(t(true, PSH | ACK, cs, ss, data.as_bytes()));
        cs += data.len() as u32;
        let answer = b"200 NOOP ok\r\n";
        out.push(t(false, PSH | ACK, ss, cs + grow, answer));
        ss += answer.len() as u32;
    }
    out.push(t(true, ACK, cs, ss, b""));
    out.iter().map(Frame::build).collect()
}

/// `frames` through `fwd` frame by frame ([`Tracker::process_mut`]) and in
/// one rewriting burst: the same verdicts, bytes and counts. Returns the
/// frame-by-frame verdicts and frames.
fn rewrite_in_one_burst(
    frames: &[Vec<u8>],
    fwd: &str,
) -> (Vec<ctrack_core::Verdict>, Vec<Vec<u8>>) {
    use ctrack_core::{LinkType, Tracker, Verdict};
    let (a, now, l) = (common::act(fwd), Time::from_secs(100), LinkType::Ethernet);
    let (one, burst) = (Tracker::default(), Tracker::default());
    let (mut s1, mut s2) = (Stats::default(), Stats::default());
    let mut want_bytes = frames.to_vec();
    let want: Vec<Verdict> = want_bytes
        .iter_mut()
        .map(|f| one.process_mut(f, l, &a, now, &mut s1))
        .collect();
    let mut got_bytes = frames.to_vec();
    let mut got = vec![Verdict::default(); frames.len()];
    burst.process_burst_mut(&mut got_bytes, l, &a, now, &mut got, &mut s2);
    let plain = |v: &Verdict| {
        let mut v = *v;
        (v.conn.take().is_some(), v)
    };
    for (j, (w, g)) in want.iter().zip(&got).enumerate() {
        assert_eq!(plain(g), plain(w), "packet {}", j + 1);
        assert_eq!(got_bytes[j], want_bytes[j], "packet {}: bytes", j + 1);
    }
    assert_eq!(s1, s2);
    (want, want_bytes)
}

/// After a gateway has made a payload longer, the acknowledgments that
/// come back are put back into the client's numbering before they are
/// tracked: the burst path hands those packets to the per-packet path,
/// which does, IPv4 and IPv6.
#[test]
fn acknowledgments_after_a_rewrite_in_bursts_judge_as_frame_by_frame() {
    let port: &[u8] = b"PORT 10,0,0,1,156,65\r\n";
    let grow = (b"PORT 198,51,100,1,156,65\r\n".len() - port.len()) as u32;
    let t4 = |up: bool, fl, seq, ack, data: &[u8]| {
        let (from, to) = if up {
            ((C, 40000), (S, 21))
        } else {
            ((S, 21), (N, 40000))
        };
        seg(from, to, fl, seq, ack, data)
    };
    let c: Ipv6Addr = "fd00::1".parse().unwrap();
    let s: Ipv6Addr = "2001:db8::2".parse().unwrap();
    let x: Ipv6Addr = "2001:db8:ffff::1".parse().unwrap();
    let eprt: &[u8] = b"EPRT |2|fd00::1|40001|\r\n";
    let shown6 = b"EPRT |2|2001:0db8:ffff:0000:0000:0000:0000:0001|40001|\r\n";
    let t6 = |up: bool, fl, seq, ack, data: &[u8]| {
        let (a, sp, b, dp) = if up {
            (c, 40000, s, 21)
        } else {
            (s, 21, x, 40000)
        };
        Frame::v6(a, b, L4::tcp_seg(sp, dp, fl, seq, ack, 65535, data))
    };
    let grow6 = (shown6.len() - eprt.len()) as u32;
    // The server's acknowledgment of the longer command, as the client
    // gets it: to its own address, in its own numbering.
    let back4 = seg((S, 21), (C, 40000), ACK, 501, 101 + port.len() as u32, b"");
    let back6 = Frame::v6(
        s,
        c,
        L4::tcp_seg(21, 40000, ACK, 501, 101 + eprt.len() as u32, 65535, b""),
    );
    let cases = [
        (
            ftp_after_a_rewrite(t4, port, grow, 3),
            "commit,nat(src=198.51.100.1),alg=ftp",
            grow,
            back4.build(),
        ),
        (
            ftp_after_a_rewrite(t6, eprt, grow6, 3),
            "commit,nat(src=2001:db8:ffff::1),alg=ftp",
            grow6,
            back6.build(),
        ),
    ];
    for (frames, fwd, grow, back) in &cases {
        let (verdicts, out) = rewrite_in_one_burst(frames, fwd);
        // Frame by frame is right: every packet in window, the command
        // rewritten longer, and the server's acknowledgment of it given
        // back in the client's numbering.
        for (j, v) in verdicts.iter().enumerate() {
            let inv = v.state.contains(ctrack_core::CtState::INV);
            assert!(!inv, "{fwd}: packet {}: {v:?}", j + 1);
        }
        assert_eq!(out[3].len(), frames[3].len() + *grow as usize, "{fwd}");
        assert_eq!(&out[4], back, "{fwd}");
    }
}
