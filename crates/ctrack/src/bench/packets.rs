//! Packets the benchmarks send.

use std::net::Ipv4Addr;

use ctrack_wire::build::{Frame, L4};

/// The frame `ovstest test-conntrack` benchmarks with (Ethernet, IPv4
/// 10.1.1.1 > 10.1.1.2, TTL 0, UDP without checksum), with its UDP ports
/// set as `ovstest` sets them.
pub(crate) fn ovs_udp(sport: u16, dport: u16) -> Vec<u8> {
    const HEX: &str = "50540000000a50540000000908004500001c0000000000\
                       11a4cd0a0101010a0101020001000200080000";
    let mut f: Vec<u8> = (0..HEX.len() / 2)
        .map(|i| u8::from_str_radix(&HEX[2 * i..2 * i + 2], 16).expect("valid hex"))
        .collect();
    f[34..36].copy_from_slice(&sport.to_be_bytes());
    f[36..38].copy_from_slice(&dport.to_be_bytes());
    f
}

/// The addresses of connection `i` of a benchmark: clients in 10.0.0.0/8
/// talking to servers in 172.16.0.0/12 on port 80 or 53, each pair of
/// addresses with its own source port.
pub(crate) fn endpoints(i: u64) -> ([u8; 4], [u8; 4], u16) {
    let client = Ipv4Addr::from(0x0a00_0000 | (i as u32 & 0x00ff_ffff)).octets();
    let server = Ipv4Addr::from(0xac10_0000 | ((i >> 24) as u32 & 0x000f_ffff)).octets();
    let sport = 1024 + (i % 60_000) as u16;
    (client, server, sport)
}

/// A UDP packet of connection `i`, from the client or back, padded to a
/// 64-byte frame (with FCS).
pub(crate) fn udp(i: u64, reply: bool) -> Vec<u8> {
    let (c, s, sport) = endpoints(i);
    let payload = [0u8; 18];
    if reply {
        Frame::v4(s, c, L4::udp(53, sport, &payload)).build()
    } else {
        Frame::v4(c, s, L4::udp(sport, 53, &payload)).build()
    }
}

/// Address `a` of a benchmark's IPv4 connection as its IPv6 twin has it:
/// in fd00::/16, the IPv4 address in the low 32 bits.
pub(crate) fn v6_of(a: [u8; 4]) -> std::net::Ipv6Addr {
    std::net::Ipv6Addr::from(
        0xfd00_0000_0000_0000_0000_0000_0000_0000u128 | u128::from(u32::from_be_bytes(a)),
    )
}

/// [`udp`] over IPv6: the same connection between fd00::/16 addresses that
/// embed its IPv4 ones ([`v6_of`]; an 80-byte frame).
pub(crate) fn udp6(i: u64, reply: bool) -> Vec<u8> {
    let (c, s, sport) = endpoints(i);
    let (c, s) = (v6_of(c), v6_of(s));
    let payload = [0u8; 18];
    if reply {
        Frame::v6(s, c, L4::udp(53, sport, &payload)).build()
    } else {
        Frame::v6(c, s, L4::udp(sport, 53, &payload)).build()
    }
}

/// [`udp`], or [`udp6`] with `v6`.
pub(crate) fn udp_of(i: u64, reply: bool, v6: bool) -> Vec<u8> {
    if v6 { udp6(i, reply) } else { udp(i, reply) }
}

/// Turns an untagged IPv4 TCP or UDP frame without options into its
/// answer: MAC addresses, IP addresses and ports swapped (the checksums
/// stay right: the same words are summed).
pub(crate) fn swap_v4(f: &mut [u8]) {
    for (a, b) in [(0, 6), (26, 30), (34, 36)] {
        let n = b - a;
        let (x, y) = f.split_at_mut(b);
        x[a..a + n.min(6)].swap_with_slice(&mut y[..n.min(6)]);
    }
}

/// [`swap_v4`] for an untagged IPv6 TCP or UDP frame without extension
/// headers.
pub(crate) fn swap_v6(f: &mut [u8]) {
    for (a, b, n) in [(0, 6, 6), (22, 38, 16), (54, 56, 2)] {
        let (x, y) = f.split_at_mut(b);
        x[a..a + n].swap_with_slice(&mut y[..n]);
    }
}

/// [`swap_v4`] or [`swap_v6`].
pub(crate) fn swap_of(f: &mut [u8], v6: bool) {
    if v6 { swap_v6(f) } else { swap_v4(f) }
}

/// A TCP segment of connection `i`; with PSH it carries six bytes (a
/// 64-byte frame), else none.
pub(crate) fn tcp(i: u64, reply: bool, flags: u16, seq: u32, ack: u32) -> Vec<u8> {
    tcp_of(i, reply, (flags, seq, ack), false)
}

/// [`tcp`], over IPv6 with `v6` (as [`udp6`]: an 80-byte frame with PSH).
pub(crate) fn tcp_of(i: u64, reply: bool, (flags, seq, ack): (u16, u32, u32), v6: bool) -> Vec<u8> {
    let (c, s, sport) = endpoints(i);
    let payload: &[u8] = if flags & ctrack_wire::tcp::flags::PSH != 0 {
        &[0u8; 6]
    } else {
        &[]
    };
    let (from, to, l4) = match reply {
        true => (
            s,
            c,
            L4::tcp_seg(80, sport, flags, seq, ack, 65535, payload),
        ),
        false => (
            c,
            s,
            L4::tcp_seg(sport, 80, flags, seq, ack, 65535, payload),
        ),
    };
    match v6 {
        true => Frame::v6(v6_of(from), v6_of(to), l4).build(),
        false => Frame::v4(from, to, l4).build(),
    }
}

/// An ICMP echo request of connection `i` (its id the connection's source
/// port), or the server's reply.
pub(crate) fn icmp(i: u64, reply: bool) -> Vec<u8> {
    use ctrack_wire::icmp::v4::{ECHO_REPLY, ECHO_REQUEST};
    let (c, s, id) = endpoints(i);
    if reply {
        Frame::v4(s, c, L4::icmp_query(ECHO_REPLY, id, 1)).build()
    } else {
        Frame::v4(c, s, L4::icmp_query(ECHO_REQUEST, id, 1)).build()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ctrack_core::{CtAction, LinkType, Stats, Time, Tracker};

    #[test]
    fn ovs_packet_is_a_valid_udp_packet() {
        let t = Tracker::default();
        let v = t.process(
            &ovs_udp(1, 2),
            LinkType::Ethernet,
            &CtAction::commit(0),
            Time::ZERO,
            &mut Stats::default(),
        );
        assert_eq!(v.state.to_string(), "new|trk");
        let v = t.process(
            &ovs_udp(1, 2),
            LinkType::Ethernet,
            &CtAction::commit(0),
            Time::ZERO,
            &mut Stats::default(),
        );
        assert_eq!(v.state.to_string(), "new|trk", "still one way");
    }

    #[test]
    fn benchmark_packets_are_tracked() {
        let t = Tracker::default();
        let a = CtAction::commit(0);
        for i in [0u64, 1, 70_000, 1 << 30] {
            assert_eq!(udp(i, false).len(), 60);
            assert_eq!(
                t.process(
                    &udp(i, false),
                    LinkType::Ethernet,
                    &a,
                    Time::ZERO,
                    &mut Stats::default()
                )
                .state
                .to_string(),
                "new|trk"
            );
            assert_eq!(
                t.process(
                    &udp(i, true),
                    LinkType::Ethernet,
                    &a,
                    Time::ZERO,
                    &mut Stats::default()
                )
                .state
                .to_string(),
                "est|rpl|trk"
            );
        }
        use ctrack_wire::tcp::flags::*;
        let s = |v: ctrack_core::Verdict| v.state.to_string();
        assert_eq!(
            s(t.process(
                &tcp(5, false, SYN, 100, 0),
                LinkType::Ethernet,
                &a,
                Time::ZERO,
                &mut Stats::default(),
            )),
            "new|trk"
        );
        assert_eq!(
            s(t.process(
                &tcp(5, true, SYN | ACK, 500, 101),
                LinkType::Ethernet,
                &a,
                Time::ZERO,
                &mut Stats::default(),
            )),
            "est|rpl|trk"
        );
        assert_eq!(
            s(t.process(
                &tcp(5, false, ACK, 101, 501),
                LinkType::Ethernet,
                &a,
                Time::ZERO,
                &mut Stats::default(),
            )),
            "est|trk"
        );
    }
}
