//! Fuzz bodies for ctrack-policy: the policy file reader and OVN's match
//! language.

use std::collections::BTreeMap;

use ctrack_policy::key::Key;
use ctrack_policy::lang::{self, Context};
use ctrack_policy::model::{Policy, Port, Prefix};
use ctrack_wire::build::{Frame, L4};

use crate::Probe;

/// The fixed part of an error message: up to the first quote or digit, so
/// that the names and numbers of an input do not make new features.
fn template(message: &str) -> &str {
    let end = message
        .find(|c: char| c.is_ascii_digit() || "`'\"".contains(c))
        .unwrap_or(message.len());
    &message[..end]
}

/// Arbitrary bytes as a policy file (TOML, or JSON when they start with
/// `{`): it loads or is refused with a position, never panics; what loads
/// is coherent. Counts inputs (not packets).
pub fn policy_file(data: &[u8], probe: &mut Probe) {
    probe.count(1);
    let text = String::from_utf8_lossy(data);
    match Policy::from_str(&text, "fuzz.toml") {
        Err(e) => {
            let _ = e.to_string();
            if probe.records() {
                probe.feature(70, template(&e.message));
            }
            assert!(e.span.line >= 1, "an error without a line: {e}");
        }
        Ok(p) => {
            probe.feature(71, (p.ports.len().min(4), p.acls.len().min(4)));
            assert!(p.ports.len() <= ctrack_policy::file::MAX_PORTS);
            for g in p.port_groups.values() {
                assert!(g.iter().all(|&i| i < p.ports.len()));
            }
            meters(&p, probe);
            // Every MAC of port security is its port's, and no other's.
            for (i, port) in p.ports.iter().enumerate() {
                for e in &port.security {
                    assert!(port.macs.contains(&e.mac), "{port:?}");
                    assert_eq!(p.port_of_mac(e.mac), (i + 1) as u16, "{port:?}");
                    for (a, len) in &e.ips {
                        assert!(*len <= if a.is_ipv4() { 32 } else { 128 });
                    }
                }
                probe.feature(77, port.security.len().min(4));
            }
            let cx = Context::new(&p);
            for a in &p.acls {
                assert!(a.expr.size() <= lang::MAX_NODES);
                assert!(a.priority <= 32767 && a.tier <= 3);
                let again = cx
                    .parse(&a.match_text)
                    .expect("a loaded match parses again");
                assert_eq!(again, a.expr, "{}", a.match_text);
            }
            // What `ctrack policy check` does with it: findings name ACLs,
            // sets and groups of the policy, and print.
            if p.acls.len() <= 64 {
                for f in ctrack_policy::analyze::analyze(&p) {
                    probe.feature(74, std::mem::discriminant(&f));
                    assert!(!f.to_string().is_empty());
                    if let ctrack_policy::analyze::Finding::Unused { name, .. } = &f {
                        assert!(
                            p.address_sets.contains_key(name)
                                || p.port_groups.contains_key(name)
                                || p.meters.contains_key(name),
                            "{name}"
                        );
                    }
                }
            }
        }
    }
}

/// A loaded policy's meters: each ACL's names one of the file, each has a
/// rate and a burst, and asking them (as the ACL log does, at times out
/// of order) neither panics nor lets through more than the burst at once.
fn meters(p: &Policy, probe: &mut Probe) {
    for m in p.meters.values() {
        assert!(m.rate >= 1 && m.burst >= 1, "{m:?}");
    }
    let cells = ctrack_policy::meter::Meters::new(p);
    for (i, a) in p.acls.iter().enumerate().take(16) {
        let Some(name) = &a.meter else { continue };
        let m = &p.meters[name];
        let mut through = 0u64;
        for t in [5u64, 5, 3, 5, 5] {
            let now = ctrack_core::Time::from_millis(t);
            through += u64::from(cells.admit(i as u32, now, 60) == Some(true));
        }
        probe.feature(75, (m.unit, m.fair, through.min(5)));
        if m.unit == ctrack_policy::model::MeterUnit::Pktps && !m.fair {
            // Shared with other ACLs asked before: at most the burst.
            assert!(through <= u64::from(m.burst), "{m:?}: {through}");
        }
    }
    // `[copp] reject` names a meter of the file, which the answers then
    // ask (after the ACLs, with whom it may share its cell): at most its
    // burst in packets.
    assert_eq!(cells.limits_rejects(), p.copp.reject.is_some());
    if let Some(name) = &p.copp.reject {
        let m = &p.meters[name];
        let mut through = 0u64;
        for t in [5u64, 4, 5, 5, 5] {
            let now = ctrack_core::Time::from_millis(t);
            let open = cells.reject_would_admit(now, 60) == Some(true);
            let sent = open && cells.reject_admit(now, 60) == Some(true);
            through += u64::from(sent);
        }
        probe.feature(76, (m.unit, m.fair, through.min(5)));
        if m.unit == ctrack_policy::model::MeterUnit::Pktps {
            assert!(through <= u64::from(m.burst), "{m:?}: {through}");
        }
    }
}

/// The small policy [`match_expr`] resolves names against: ports vm1, vm2,
/// vm3; address set `clients`; port group `web`.
pub fn match_policy() -> Policy {
    let port = |name: &str, n: u8, ip: &str| Port {
        name: name.into(),
        macs: vec![[2, 0, 0, 0, 0, n]],
        ips: vec![ip.parse().expect("fixed address")],
        zone: u16::from(n),
        security: Vec::new(),
        disabled: false,
    };
    Policy {
        ports: vec![
            port("vm1", 1, "10.0.0.1"),
            port("vm2", 2, "10.0.0.2"),
            port("vm3", 3, "fd00::3"),
        ],
        address_sets: BTreeMap::from([(
            "clients".to_string(),
            vec![
                Prefix {
                    addr: "10.0.0.0".parse().expect("fixed address"),
                    len: 24,
                },
                Prefix {
                    addr: "fd00::".parse().expect("fixed address"),
                    len: 64,
                },
            ],
        )]),
        port_groups: BTreeMap::from([("web".to_string(), vec![0, 1])]),
        ..Policy::default()
    }
}

fn keys() -> Vec<Key> {
    let v6 = |n| std::net::Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, n);
    let frames = [
        Frame::v4([10, 0, 0, 1], [10, 0, 0, 2], L4::tcp(40000, 443, 0x002)),
        Frame::v4([192, 0, 2, 7], [10, 0, 0, 1], L4::udp(53, 53, b"x")),
        Frame::v4([10, 0, 0, 2], [10, 0, 0, 1], L4::icmp_query(8, 1, 1)),
        Frame::v6(v6(3), v6(1), L4::tcp(22, 1022, 0x012)),
        Frame::v6(v6(1), v6(2), L4::icmp_query(135, 0, 0)).vlan(0x8100, 7),
    ];
    let mut out: Vec<Key> = frames
        .iter()
        .enumerate()
        .map(|(i, f)| Key::from_frame(&f.build(), (i % 4) as u16, ((i + 1) % 4) as u16))
        .collect();
    out.push(Key::default());
    out
}

/// Arbitrary bytes as a match against [`match_policy`]: it resolves or is
/// refused at an offset inside the text, never panics; what resolves is
/// bounded, evaluates on a few keys, and reads the same in parentheses.
/// Counts inputs (not packets).
pub fn match_expr(data: &[u8], probe: &mut Probe) {
    probe.count(1);
    let text = String::from_utf8_lossy(data);
    let p = match_policy();
    let cx = Context::new(&p);
    match cx.parse(&text) {
        Err(e) => {
            if probe.records() {
                probe.feature(72, template(&e.message));
            }
            assert!(e.offset <= text.len().max(lang::MAX_MATCH_LEN), "{e}");
        }
        Ok(e) => {
            assert!(e.size() <= lang::MAX_NODES);
            let mut hits = 0u32;
            for (i, k) in keys().iter().enumerate() {
                hits |= u32::from(e.eval(k)) << i;
            }
            // `policy check`'s "can never match" is never said of a match
            // that a real frame's key satisfies.
            if let Ok(true) = ctrack_policy::analyze::never_matches(&e) {
                assert_eq!(hits & 0x1f, 0, "{text}: said never to match");
            }
            probe.feature(73, (hits, e.size().min(32)));
            match cx.parse(&format!("({text}\n)")) {
                Ok(again) => assert_eq!(again, e, "{text}"),
                Err(err) => assert!(
                    err.message.contains("nested") || err.message.contains("longer"),
                    "{text}: {err}"
                ),
            }
        }
    }
}
