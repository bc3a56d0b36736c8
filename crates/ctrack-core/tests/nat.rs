//! Address translation: packets in, packets out, byte for byte.
//!
//! Every expected output is a frame built from scratch with the translated
//! fields (so its checksums are computed afresh), and the translated packet
//! must equal it exactly: the incremental checksum updates agree with a
//! full computation.

mod common;
use common::{Net, act};

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use ctrack_core::{ConnKey, Endpoint, Family, LinkType, Refusal, Stats, Time};
use ctrack_wire::build::{Frame, L4, quote};
use ctrack_wire::icmp::{v4, v6};
use ctrack_wire::ip_proto;
use ctrack_wire::tcp::flags::*;

/// Inside client, outside server, the translated address, a router.
const C: [u8; 4] = [10, 0, 0, 1];
const C2: [u8; 4] = [10, 0, 0, 3];
const S: [u8; 4] = [192, 0, 2, 2];
const N: [u8; 4] = [198, 51, 100, 1];
const RT: [u8; 4] = [192, 0, 2, 254];

fn tcp(src: [u8; 4], sp: u16, dst: [u8; 4], dp: u16, flags: u16, seq: u32, ack: u32) -> Frame {
    Frame::v4(src, dst, L4::tcp_seg(sp, dp, flags, seq, ack, 65535, b""))
}

fn udp(src: [u8; 4], sp: u16, dst: [u8; 4], dp: u16, payload: &[u8]) -> Frame {
    Frame::v4(src, dst, L4::udp(sp, dp, payload))
}

#[test]
fn snat_tcp_both_directions() {
    let n = Net::new();
    let snat = "commit,nat(src=198.51.100.1)";
    n.expect(
        &tcp(C, 40000, S, 80, SYN, 100, 0),
        snat,
        &tcp(N, 40000, S, 80, SYN, 100, 0),
        "new|trk|snat",
    );
    // The reply, addressed to the translated source, finds the connection
    // and goes back to the client.
    n.expect(
        &tcp(S, 80, N, 40000, SYN | ACK, 500, 101),
        "nat",
        &tcp(S, 80, C, 40000, SYN | ACK, 500, 101),
        "est|rpl|trk|dnat",
    );
    n.expect(
        &tcp(C, 40000, S, 80, ACK, 101, 501),
        snat,
        &tcp(N, 40000, S, 80, ACK, 101, 501),
        "est|trk|snat",
    );
    // Without `nat` the packet is tracked but left alone.
    n.expect(
        &tcp(C, 40000, S, 80, ACK, 101, 501),
        "commit",
        &tcp(C, 40000, S, 80, ACK, 101, 501),
        "est|trk",
    );
    // Both tuples find it.
    let key = |s: [u8; 4], sp, d: [u8; 4], dp| ConnKey {
        src: Endpoint::v4(Ipv4Addr::from(s), sp),
        dst: Endpoint::v4(Ipv4Addr::from(d), dp),
        zone: 0,
        proto: ip_proto::TCP,
        family: Family::V4,
    };
    let (a, info, _) = n.t.lookup(&key(C, 40000, S, 80), n.now).unwrap();
    let (b, _, dir) = n.t.lookup(&key(S, 80, N, 40000), n.now).unwrap();
    assert_eq!(a, b);
    assert!(dir.is_reply());
    assert_eq!(
        info.entry.to_string(),
        "tcp,orig=(src=10.0.0.1,dst=192.0.2.2,sport=40000,dport=80,packets=3,bytes=120),\
         reply=(src=192.0.2.2,dst=198.51.100.1,sport=80,dport=40000,packets=1,bytes=40),\
         timeout=86400,protoinfo=(state=ESTABLISHED)"
    );
    // The untranslated reverse tuple is not the connection's.
    assert!(n.t.lookup(&key(S, 80, C, 40000), n.now).is_none());
}

#[test]
fn dnat_udp_with_port_and_zero_checksum() {
    let n = Net::new();
    let dnat = "commit,nat(dst=10.0.0.9:8080)";
    n.expect(
        &udp(C, 5353, S, 53, b"query"),
        dnat,
        &udp(C, 5353, [10, 0, 0, 9], 8080, b"query"),
        "new|trk|dnat",
    );
    n.expect(
        &udp([10, 0, 0, 9], 8080, C, 5353, b"answer"),
        "nat",
        &udp(S, 53, C, 5353, b"answer"),
        "est|rpl|trk|snat",
    );
    // A zero UDP checksum stays zero.
    let mut b = udp(C, 5353, S, 53, b"again").build();
    let l4 = 14 + 20;
    b[l4 + 6] = 0;
    b[l4 + 7] = 0;
    let v = n.t.process_mut(
        &mut b,
        LinkType::Ethernet,
        &act(dnat),
        n.now,
        &mut Stats::default(),
    );
    assert_eq!(v.state.to_string(), "est|trk|dnat");
    assert_eq!(&b[l4 + 6..l4 + 8], &[0, 0]);
    assert_eq!(&b[14 + 16..14 + 20], &[10, 0, 0, 9]);
}

#[test]
fn icmp_echo_ids_are_translated_apart() {
    let n = Net::new();
    let snat = "commit,nat(src=198.51.100.1)";
    let ping = |src| Frame::v4(src, S, L4::icmp_query(v4::ECHO_REQUEST, 7, 1));
    let pong = |dst, id| Frame::v4(S, dst, L4::icmp_query(v4::ECHO_REPLY, id, 1));
    n.expect(
        &ping(C),
        snat,
        &Frame::v4(N, S, L4::icmp_query(v4::ECHO_REQUEST, 7, 1)),
        "new|trk|snat",
    );
    // A second host with the same identifier gets another one.
    let (v, out) = n.send(&ping(C2), snat);
    assert_eq!(v.state.to_string(), "new|trk|snat");
    let id2 = u16::from_be_bytes([out[14 + 20 + 4], out[14 + 20 + 5]]);
    assert_ne!(id2, 7);
    assert_eq!(
        out,
        Frame::v4(N, S, L4::icmp_query(v4::ECHO_REQUEST, id2, 1)).build()
    );
    // Each reply goes back to its host with its own identifier.
    n.expect(&pong(N, 7), "nat", &pong(C, 7), "est|rpl|trk|dnat");
    n.expect(&pong(N, id2), "nat", &pong(C2, 7), "est|rpl|trk|dnat");
}

#[test]
fn ipv6_snat_tcp_and_icmpv6() {
    let n = Net::new();
    let c: Ipv6Addr = "fd00::1".parse().unwrap();
    let s: Ipv6Addr = "2001:db8::2".parse().unwrap();
    let x: Ipv6Addr = "2001:db8:ffff::1".parse().unwrap();
    let snat = "commit,nat(src=[2001:db8:ffff::1]:30000-30000)";
    let t6 = |a, sp, b, dp, fl, seq, ack| {
        Frame::v6(a, b, L4::tcp_seg(sp, dp, fl, seq, ack, 65535, b"xyz"))
    };
    n.expect(
        &t6(c, 40000, s, 443, SYN, 1, 0),
        snat,
        &t6(x, 30000, s, 443, SYN, 1, 0),
        "new|trk|snat",
    );
    n.expect(
        &t6(s, 443, x, 30000, SYN | ACK, 9, 2),
        "nat",
        &t6(s, 443, c, 40000, SYN | ACK, 9, 2),
        "est|rpl|trk|dnat",
    );
    let ping = |a, b, ty, id| Frame::v6(a, b, L4::icmp_query(ty, id, 3));
    n.expect(
        &ping(c, s, v6::ECHO_REQUEST, 77),
        "commit,nat(src=2001:db8:ffff::1)",
        &ping(x, s, v6::ECHO_REQUEST, 77),
        "new|trk|snat",
    );
    n.expect(
        &ping(s, x, v6::ECHO_REPLY, 77),
        "nat",
        &ping(s, c, v6::ECHO_REPLY, 77),
        "est|rpl|trk|dnat",
    );
}

#[test]
fn port_range_exhaustion_is_counted_and_clear() {
    let n = Net::new();
    let snat = "commit,nat(src=198.51.100.1:1000-1001)";
    for (i, client) in [[10, 0, 0, 1], [10, 0, 0, 2], [10, 0, 0, 3]]
        .iter()
        .enumerate()
    {
        let (v, out) = n.send(&tcp(*client, 40000, S, 80, SYN, 1, 0), snat);
        if i < 2 {
            assert_eq!(v.state.to_string(), "new|trk|snat");
            assert!(v.committed);
            let sport = u16::from_be_bytes([out[34], out[35]]);
            assert!((1000..=1001).contains(&sport));
        } else {
            assert_eq!(v.refused, Some(Refusal::NatExhausted));
            assert!(!v.committed);
            assert_eq!(v.state.to_string(), "new|trk");
            assert_eq!(
                out,
                tcp(*client, 40000, S, 80, SYN, 1, 0).build(),
                "untouched"
            );
        }
    }
    assert_eq!(n.stats.get().refused_nat_exhausted, 1);
    assert_eq!(n.t.table_len(), 2);
}

#[test]
fn icmp_error_quote_is_translated_back() {
    let n = Net::new();
    let snat = "commit,nat(src=198.51.100.1:2000-2000)";
    n.send(&tcp(C, 40000, S, 80, SYN, 100, 0), snat);
    // A router past the NAT reports the translated SYN.
    let sent = tcp(N, 2000, S, 80, SYN, 100, 0).ip_packet();
    let orig = tcp(C, 40000, S, 80, SYN, 100, 0).ip_packet();
    for quoted_len in [8, 20] {
        let err = Frame::v4(
            RT,
            N,
            L4::icmp_error(v4::TIME_EXCEEDED, 0, &quote(&sent, quoted_len)),
        );
        let want = Frame::v4(
            RT,
            C,
            L4::icmp_error(v4::TIME_EXCEEDED, 0, &quote(&orig, quoted_len)),
        );
        n.expect(&err, "nat", &want, "rel|rpl|trk|dnat");
    }
    // IPv6: the quote and the ICMPv6 pseudo-header.
    let c: Ipv6Addr = "fd00::1".parse().unwrap();
    let s: Ipv6Addr = "2001:db8::2".parse().unwrap();
    let x: Ipv6Addr = "2001:db8:ffff::1".parse().unwrap();
    let r: Ipv6Addr = "2001:db8::fe".parse().unwrap();
    let u6 = |a, sp, b, dp| Frame::v6(a, b, L4::udp(sp, dp, b"data"));
    n.send(&u6(c, 5000, s, 53), "commit,nat(src=2001:db8:ffff::1)");
    let sent = u6(x, 5000, s, 53).ip_packet();
    let orig = u6(c, 5000, s, 53).ip_packet();
    let err = Frame::v6(r, x, L4::icmp_error(v6::DST_UNREACH, 4, &quote(&sent, 12)));
    let want = Frame::v6(r, c, L4::icmp_error(v6::DST_UNREACH, 4, &quote(&orig, 12)));
    n.expect(&err, "nat", &want, "rel|rpl|trk|dnat");
}

#[test]
fn dnat_error_towards_the_client_carries_the_public_address() {
    // As in Linux and Open vSwitch: an error from behind a destination
    // translation leaves with the address the client talked to.
    let n = Net::new();
    let dnat = "commit,nat(dst=10.0.0.9)";
    n.send(&tcp(S, 40000, N, 80, SYN, 100, 0), dnat);
    let fwd = tcp(S, 40000, [10, 0, 0, 9], 80, SYN, 100, 0).ip_packet();
    let orig = tcp(S, 40000, N, 80, SYN, 100, 0).ip_packet();
    // The server side reports the forwarded packet as unreachable.
    let err = Frame::v4(
        [10, 0, 0, 9],
        S,
        L4::icmp_error(v4::DST_UNREACH, 3, &quote(&fwd, 8)),
    );
    let want = Frame::v4(N, S, L4::icmp_error(v4::DST_UNREACH, 3, &quote(&orig, 8)));
    n.expect(&err, "nat", &want, "rel|rpl|trk|snat");
}

#[test]
fn bare_nat_sets_nothing_up_and_ranges_pick_addresses() {
    let n = Net::new();
    // `nat` without a range on a new connection: committed untranslated.
    n.expect(
        &udp(C, 1, S, 2, b"x"),
        "commit,nat",
        &udp(C, 1, S, 2, b"x"),
        "new|trk",
    );
    // Addresses from a range; persistent keeps one per source.
    let mut seen = std::collections::HashSet::new();
    for d in 1..=40u8 {
        let (v, out) = n.send(
            &udp(C, 1000, [192, 0, 2, d], 53, b"q"),
            "commit,nat(src=198.51.100.10-198.51.100.13,persistent)",
        );
        assert_eq!(v.state.to_string(), "new|trk|snat");
        seen.insert([out[26], out[27], out[28], out[29]]);
    }
    assert_eq!(seen.len(), 1);
    let mut seen = std::collections::HashSet::new();
    for d in 1..=40u8 {
        let (_, out) = n.send(
            &udp(C, 1001, [192, 0, 2, d], 53, b"q"),
            "commit,nat(src=198.51.100.10-198.51.100.13)",
        );
        let a = [out[26], out[27], out[28], out[29]];
        assert!((10..=13).contains(&a[3]) && a[..3] == [198, 51, 100]);
        seen.insert(a);
    }
    assert!(seen.len() > 1, "hash mode spreads destinations");
    let _ = IpAddr::V4(Ipv4Addr::LOCALHOST);
}

#[test]
fn sctp_and_udplite_checksums_follow() {
    let n = Net::new();
    let chunk = vec![
        1, 0, 0, 20, 0, 0, 0x12, 0x34, 0, 1, 0, 0, 0, 1, 0, 1, 0, 0, 0, 9,
    ];
    let sctp = |a, sp, b| {
        Frame::v4(
            a,
            b,
            L4::Sctp {
                sport: sp,
                dport: 5000,
                vtag: 0,
                chunks: chunk.clone(),
            },
        )
    };
    n.expect(
        &sctp(C, 7000, S),
        "commit,nat(src=198.51.100.1:9000-9000)",
        &sctp(N, 9000, S),
        "new|trk|snat",
    );
    let lite = |a, sp, b| {
        Frame::v4(
            a,
            b,
            L4::UdpLite {
                sport: sp,
                dport: 5000,
                coverage: 8,
                payload: b"lite".to_vec(),
            },
        )
    };
    n.expect(
        &lite(C, 7000, S),
        "commit,nat(src=198.51.100.1:9001-9001)",
        &lite(N, 9001, S),
        "new|trk|snat",
    );
}

#[test]
fn translations_are_unique_per_zone() {
    let n = Net::new();
    // Two clients, one public port: the second moves within the zone, but
    // another zone may reuse the tuple.
    let (v1, o1) = n.send(
        &udp(C, 5000, S, 53, b"a"),
        "commit,zone=1,nat(src=198.51.100.1)",
    );
    let (v2, o2) = n.send(
        &udp(C2, 5000, S, 53, b"a"),
        "commit,zone=1,nat(src=198.51.100.1)",
    );
    let (v3, o3) = n.send(
        &udp(C2, 5000, S, 53, b"a"),
        "commit,zone=2,nat(src=198.51.100.1)",
    );
    for v in [v1, v2, v3] {
        assert_eq!(v.state.to_string(), "new|trk|snat");
    }
    let sport = |o: &[u8]| u16::from_be_bytes([o[34], o[35]]);
    assert_eq!(sport(&o1), 5000);
    assert_ne!(sport(&o2), 5000);
    assert_eq!(sport(&o3), 5000);
}

/// A translated connection C:40000 → S:80 (replies to N:40000). A packet
/// S:80 → C:40000, untranslated, finds no connection (the translated one's
/// replies come to N); committed, its reply tuple would be the translated
/// connection's original one, one tuple for two connections, and which a
/// lookup of it found would be left to the table's order (a firewall's
/// burst path and its per-packet path found different ones: the fuzz
/// target `firewall_frames`). Refused, as Linux refuses a clash when it
/// confirms; the translated connection keeps its packets.
#[test]
fn an_untranslated_commit_may_not_take_a_translated_connections_tuple() {
    let n = Net::new();
    let snat = "commit,nat(src=198.51.100.1)";
    n.expect(
        &tcp(C, 40000, S, 80, SYN, 100, 0),
        snat,
        &tcp(N, 40000, S, 80, SYN, 100, 0),
        "new|trk|snat",
    );
    let (v, _) = n.send(&tcp(S, 80, C, 40000, SYN, 500, 0), "commit");
    assert_eq!(v.refused, Some(Refusal::Clash));
    assert!(v.conn.is_none());
    assert_eq!(n.stats.get().refused_clash, 1);
    // The client's packets are the translated connection's still.
    n.expect(
        &tcp(C, 40000, S, 80, SYN, 100, 0),
        snat,
        &tcp(N, 40000, S, 80, SYN, 100, 0),
        "new|trk|snat",
    );
    // Where no connection is translated, nothing is looked up twice: the
    // same commit in a tracker without one stores its connection.
    let m = Net::new();
    let (v, _) = m.send(&tcp(S, 80, C, 40000, SYN, 500, 0), "commit");
    assert_eq!((v.refused, v.committed), (None, true));
}

/// The same clash once the translated connection has expired (not yet
/// swept): it holds its tuple no longer, so the untranslated commit
/// removes it as expired and stores its own connection, the one the
/// tuple's packets find from then on. (Mutation round 45: an expired
/// clash refused as a live one, or taken for gone without being removed,
/// passed.)
#[test]
fn an_expired_translated_connection_gives_its_tuple_to_an_untranslated_commit() {
    let mut n = Net::new();
    n.expect(
        &tcp(C, 40000, S, 80, SYN, 100, 0),
        "commit,nat(src=198.51.100.1)",
        &tcp(N, 40000, S, 80, SYN, 100, 0),
        "new|trk|snat",
    );
    // A SYN alone: well past its timeout.
    n.now = Time::from_secs(100 + 3600);
    let (v, _) = n.send(&tcp(S, 80, C, 40000, SYN, 500, 0), "commit");
    assert_eq!((v.refused, v.committed), (None, true), "{v:?}");
    let s = n.stats.get();
    assert_eq!((s.refused_clash, s.expired), (0, 1));
    assert_eq!(n.t.table_len(), 1);
    // The client's packets are the new connection's replies.
    let (v2, _) = n.send(&tcp(C, 40000, S, 80, SYN | ACK, 100, 501), "commit");
    assert_eq!(v2.conn, v.conn);
    assert_eq!(v2.state.to_string(), "est|rpl|trk");
}

/// A translated connection's packets are translated only by an action
/// with `nat`, in bursts as one at a time; and an action that looks
/// packets up as they came (`untranslated_new`, the firewall's lookup
/// before its ACLs) leaves a `+new` packet untranslated unless it
/// commits, while the commit that follows translates it. (Mutation round
/// 43: both tests of `CtAction::translates` turned passed the crate's
/// tests, every translating burst test carrying `nat`.)
#[test]
fn only_nat_translates_and_a_lookup_as_packets_came_leaves_new_ones() {
    let n = Net::new();
    let out = udp(C, 5000, S, 53, b"q");
    let snat = "commit,nat(src=198.51.100.1)";
    let shown = udp(N, 5000, S, 53, b"q");
    n.expect(&out, snat, &shown, "new|trk|snat");
    // The burst: its frames through `process_burst_mut`, one action.
    let burst = |action: &ctrack_core::CtAction, k: usize| {
        let mut frames = vec![out.build(); k];
        let mut vs = vec![ctrack_core::Verdict::default(); k];
        let mut stats = n.stats.get();
        let l = LinkType::Ethernet;
        n.t.process_burst_mut(&mut frames, l, action, n.now, &mut vs, &mut stats);
        n.stats.set(stats);
        let states: Vec<String> = vs.iter().map(|v| v.state.to_string()).collect();
        (states, frames)
    };
    for k in [1, 2, 5] {
        // Without `nat`: tracked (the connection waits for its answer, so
        // `+new`), left alone.
        for a in ["", "commit"] {
            let (states, frames) = burst(&act(a), k);
            assert_eq!(states, vec!["new|trk"; k], "`{a}`, {k} frames");
            assert_eq!(frames, vec![out.build(); k], "`{a}`, {k} frames");
        }
        let (states, frames) = burst(&act(snat), k);
        assert_eq!(states, vec!["new|trk|snat"; k], "{k} frames");
        assert_eq!(frames, vec![shown.build(); k], "{k} frames");
        // Looked up as the packets came: left alone; committed so:
        // translated.
        for (a, want, state) in [("nat", &out, "new|trk"), (snat, &shown, "new|trk|snat")] {
            let mut action = act(a);
            action.untranslated_new = true;
            let (states, frames) = burst(&action, k);
            assert_eq!(states, vec![state; k], "`{a}` as they came, {k} frames");
            assert_eq!(
                frames,
                vec![want.build(); k],
                "`{a}` as they came, {k} frames"
            );
        }
    }
}

/// A translated connection is in the index twice (its original tuple and
/// its own reply tuple); a labelled one, with an extension but no
/// translation, once. Removed (by expiry, or by flushing its zone), each
/// takes every entry it had with it: an entry left behind would hold its
/// bucket until the index is rebuilt.
#[test]
fn removed_connections_leave_no_index_entry_behind() {
    let n = Net::new();
    let zones: [(u16, &str); 3] = [
        (1, "commit,zone=1,nat(src=198.51.100.1-198.51.100.9)"),
        (2, "commit,zone=2,label=0x7"),
        (3, "commit,zone=3,label=0x7,nat(dst=192.0.2.80)"),
    ];
    let per_zone = 200u16;
    for (_, action) in zones {
        for i in 0..per_zone {
            let (v, _) = n.send(&udp(C, 10000 + i, S, 53, b"q"), action);
            assert!(v.committed, "{action}");
        }
    }
    let p = u64::from(per_zone);
    assert_eq!(n.t.table_len() as u64, 3 * p);
    // Zones 1 and 3 translate: two entries each.
    assert_eq!(n.t.index_entries() as u64, 5 * p);

    // Zone 1 flushed: its connections go, with both entries each.
    assert!(n.t.flush_zone(1));
    n.t.sweep(n.now, usize::MAX, &mut Stats::default());
    assert_eq!(n.t.table_len() as u64, 2 * p);
    assert_eq!(n.t.index_entries() as u64, 3 * p);

    // The rest expire.
    let later = Time::from_secs(100 + 3600);
    n.t.sweep(later, usize::MAX, &mut Stats::default());
    assert_eq!(n.t.table_len(), 0);
    assert_eq!(n.t.index_entries(), 0);
}

/// A protocol without ports (GRE here) has one tuple a pair of addresses:
/// a second inside host's flow to the same server, translated to the same
/// address, clashes with the first and is refused after one lookup (no
/// port to search, as in Linux and Open vSwitch), while the first's
/// replies still come back to it.
#[test]
fn a_portless_protocols_translation_clash_is_refused() {
    let n = Net::new();
    let snat = "commit,nat(src=198.51.100.1)";
    let gre = |src, dst| {
        Frame::v4(
            src,
            dst,
            L4::Raw {
                proto: 47,
                payload: vec![0, 0, 0x08, 0],
            },
        )
    };
    n.expect(&gre(C, S), snat, &gre(N, S), "new|trk|snat");
    let (v, out) = n.send(&gre(C2, S), snat);
    assert_eq!(v.refused, Some(Refusal::NatExhausted), "{v:?}");
    assert_eq!(out, gre(C2, S).build(), "untouched");
    n.expect(&gre(S, N), "nat", &gre(S, C), "est|rpl|trk|dnat");
    assert_eq!(n.t.table_len(), 1);
}

/// A source already inside the SNAT range keeps its address (and its port,
/// its tuple being free), as Linux keeps it; Open vSwitch would pick one.
/// The state still says `snat`, as Open vSwitch's does for a connection
/// with a source translation, whatever it changed.
#[test]
fn a_source_inside_the_range_is_kept() {
    let n = Net::new();
    let snat = "commit,nat(src=198.51.100.1-198.51.100.10)";
    for host in 2..=9u8 {
        let inside = [198, 51, 100, host];
        let f = udp(inside, 5000, S, 53, b"q");
        n.expect(&f, snat, &f, "new|trk|snat");
    }
}

/// `random` picks the port from a random point of the original port's
/// class, not the original port though it is free; in that class.
#[test]
fn random_does_not_keep_the_original_port() {
    let n = Net::new();
    let snat = "commit,nat(src=198.51.100.1,random)";
    let mut kept = 0;
    for (i, sport) in [40000u16, 40001, 40002, 40003].into_iter().enumerate() {
        let client = [10, 0, 0, 10 + i as u8];
        let (v, out) = n.send(&udp(client, sport, S, 53, b"q"), snat);
        assert_eq!(v.state.to_string(), "new|trk|snat");
        let port = u16::from_be_bytes([out[34], out[35]]);
        assert!(port >= 1024, "{port}: the class of {sport}");
        kept += usize::from(port == sport);
    }
    // One port in 64,512 is the original by chance: four never all are.
    assert!(kept < 4, "every original port kept");
}
