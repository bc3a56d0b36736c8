//! The policy file's ports: port security, `enabled`, and the MACs a
//! port may have.

use super::tests::{EXAMPLE, EXAMPLE_JSON, at, error, load, with_line};
use crate::model::Policy;

/// A group MAC (multicast or broadcast) names no one port: refused in a
/// port's addresses (and in `port_security`, below), where it stands.
#[test]
fn a_group_mac_is_no_ports_address() {
    for (line, says) in [
        (
            "addresses = [\"ff:ff:ff:ff:ff:ff 10.0.0.1\"]",
            "MAC address ff:ff:ff:ff:ff:ff is a group (multicast or broadcast) address",
        ),
        (
            "addresses = [\"01:00:5e:00:00:01\"]",
            "a port's address must be unicast",
        ),
    ] {
        let e = error(&with_line(6, line));
        assert!(e.message.contains(says), "{line}: {e}");
        assert_eq!(at(&e), (6, 15), "{line}: {e}");
    }
}

/// `port_security` on a port (OVN's `Logical_Switch_Port.port_security`):
/// a MAC, then addresses with optional prefixes or (IPv4) masks, spaces or
/// commas between; host bits kept; an IPv4-mapped IPv6 address is IPv4.
#[test]
fn port_security_is_read() {
    use crate::model::PortSecurity;
    let p = load(&with_line(
        7,
        "zone = 1\nport_security = [\"02:00:00:00:00:01 10.0.0.1 fd00::1/64\", \
         \"02:00:00:00:00:11, 10.0.1.4/255.255.255.0,::ffff:10.0.2.0/120\", \"02:00:00:00:00:01\"]",
    ));
    let ip = |s: &str| s.parse::<std::net::IpAddr>().unwrap();
    let vm1 = &p.ports[0];
    assert_eq!(
        vm1.security,
        [
            PortSecurity {
                mac: [2, 0, 0, 0, 0, 1],
                ips: vec![(ip("10.0.0.1"), 32), (ip("fd00::1"), 64)],
            },
            PortSecurity {
                mac: [2, 0, 0, 0, 0, 0x11],
                ips: vec![(ip("10.0.1.4"), 24), (ip("10.0.2.0"), 24)],
            },
            PortSecurity {
                mac: [2, 0, 0, 0, 0, 1],
                ips: vec![],
            },
        ]
    );
    // A MAC of `port_security` alone names the port as well.
    assert_eq!(vm1.macs, [[2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 0x11]]);
    assert_eq!(p.port_of_mac([2, 0, 0, 0, 0, 0x11]), 1);
    assert!(p.ports[1].security.is_empty());
    // JSON, the same shape.
    let json = EXAMPLE_JSON.replacen(
        "\"zone\": 1",
        "\"zone\": 1, \"port_security\": [\"02:00:00:00:00:01 10.0.0.1\"]",
        1,
    );
    let p = Policy::from_str(&json, "p.json").unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(p.ports[0].security[0].ips, [(ip("10.0.0.1"), 32)]);
}

#[test]
fn port_security_errors_say_where() {
    let cases = [
        (
            "\"02:00:00:00:00:01 10.0.0.1/33\"",
            "10.0.0.1/33",
            "bad IP address `10.0.0.1/33`",
        ),
        (
            "\"02:00:00:00:00:01 10.0.0.0/255.0.255.0\"",
            "10.0.0.0/",
            "bad IP address",
        ),
        (
            "\"02:00:00:00:00:01 fd00::1/129\"",
            "fd00::1/129",
            "bad IP address",
        ),
        (
            "\"02:00:00:00:00:01 fd00::1/1.2.3.4\"",
            "fd00::1/",
            "bad IP address",
        ),
        (
            "\"02:00:00:00:00:01 ::ffff:10.0.0.0/95\"",
            "::ffff",
            "bad IP address",
        ),
        (
            "\"02:00:00:00:00:01 10.0.0.1/\"",
            "10.0.0.1/",
            "bad IP address",
        ),
        (
            "\"02:00:00:00:00:0x 10.0.0.1\"",
            "02:00:00:00:00:0x",
            "bad MAC address",
        ),
        (
            "\"VRRPv3 02:00:00:00:00:01 10.0.0.1\"",
            "VRRPv3",
            "VRRPv3 port security entries are not supported",
        ),
        (
            "\"02:00:00:00:00:02 10.0.0.1\"",
            "02:00:00:00:00:02",
            "MAC address 02:00:00:00:00:02 is already port \"vm2\"'s",
        ),
        (
            "\"33:33:00:00:00:01 fd00::1\"",
            "33:33:00:00:00:01",
            "MAC address 33:33:00:00:00:01 is a group",
        ),
        (
            "\" \"",
            "\" \"",
            "expected a MAC address, then IP addresses",
        ),
    ];
    for (entry, token, want) in cases {
        let text = with_line(7, &format!("zone = 1\nport_security = [{entry}]"));
        let e = error(&text);
        assert!(e.message.contains(want), "{entry}: {e}");
        let line = text.lines().nth(7).unwrap();
        let col = line.find(token).unwrap() as u32 + 1;
        assert_eq!(at(&e), (8, col), "{entry}: {e}");
    }
}

/// `enabled = false`: OVN's `Logical_Switch_Port.enabled`.
#[test]
fn a_port_may_be_disabled() {
    assert!(!load(EXAMPLE).ports[0].disabled);
    let p = load(&with_line(7, "zone = 1\nenabled = false"));
    assert!(p.ports[0].disabled && !p.ports[1].disabled);
    assert_eq!(p.ports[0].security_text(), "; disabled (enabled = false)");
    assert!(!load(&with_line(7, "zone = 1\nenabled = true")).ports[0].disabled);
    let e = error(&with_line(7, "zone = 1\nenabled = \"no\""));
    assert!(e.message.contains("expected a boolean"), "{e}");
    assert_eq!(at(&e).0, 8);
}
