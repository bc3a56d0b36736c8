//! The policies of `bench policy`: two ports, the traffic's admitting
//! ACL behind the others, and (`--port-security`) port security.

use anyhow::Result;
use ctrack_policy::expr::Expr;
use ctrack_policy::firewall::Firewall;
use ctrack_policy::key::{Field, flag};
use ctrack_policy::model::{Acl, AclAction, DefaultAction, Direction, Policy, Port, PortSecurity};

use super::{CLIENT_MAC, PolicyBenchArgs, Proto, RuleSet, SERVER_MAC, Traffic, firewall};
use crate::bench::packets::v6_of;

/// A policy of two ports (client, server) whose traffic `allow` admits,
/// behind `n - 1` to-lport ACLs of higher priority: with
/// [`RuleSet::Simple`], drops that the traffic never matches (/32 sources
/// in 198.18.0.0/15 to single ports, of `proto`), as a security group's
/// rules for other peers would be; with [`RuleSet::Realistic`], the
/// classifier benchmark's generated shapes, each an `allow` (of the same
/// kind), so that whichever the traffic matches lets it through. Over
/// IPv6, the drops' sources are the twins of those addresses
/// ([`v6_of`]) and the ACLs are of IPv6.
pub(super) fn policy(n: usize, allow: AclAction, t: Traffic, rules: RuleSet) -> Policy {
    let l4 = match t.proto {
        Proto::Udp => flag::UDP,
        Proto::Tcp => flag::TCP,
    };
    let family = if t.v6 { flag::IP6 } else { flag::IP4 };
    // A zone each, as by default; tracked in the lower (1), as lookups are.
    let port = |name: &str, mac: [u8; 6], zone| Port {
        name: name.into(),
        macs: vec![mac],
        ips: Vec::new(),
        zone,
        security: Vec::new(),
        disabled: false,
    };
    let mut acls = Vec::with_capacity(n);
    if rules == RuleSet::Realistic {
        // The first generated rule is ranked highest; priorities above
        // the admitting ACL's 1000 (tied at the top past 31,766 rules).
        let generated = ctrack_policy::classify::r#gen::rules(n - 1, 7);
        for (i, (_, _, expr)) in generated.into_iter().enumerate() {
            let priority = (1001 + (n - 1 - i)).min(32767) as u16;
            acls.push(acl(i, priority, allow, expr));
        }
    }
    for i in (0..n - 1).filter(|_| rules == RuleSet::Simple) {
        let src = (0xc612_0000u32 + i as u32).to_be_bytes();
        let src = match t.v6 {
            true => u128::from(v6_of(src)),
            false => u128::from(u32::from_be_bytes(src)),
        };
        let expr = Expr::And(vec![
            Expr::flags(flag::IP | family | l4),
            Expr::eq(Field::Outport, 2),
            Expr::eq(Field::IpSrc, src),
            Expr::eq(Field::L4Dst, (i % 60_000) as u128 + 1),
        ]);
        acls.push(acl(i, 2000, AclAction::Drop, expr));
    }
    let expr = Expr::And(vec![
        Expr::flags(flag::IP | family | l4),
        Expr::eq(Field::Outport, 2),
    ]);
    acls.push(acl(n - 1, 1000, allow, expr));
    // Each stage reaches its own default: from-lport's (no ACL) allows.
    Policy {
        default: DefaultAction::Allow,
        ports: vec![port("client", CLIENT_MAC, 1), port("server", SERVER_MAC, 2)],
        acls,
        ..Policy::default()
    }
}

pub(super) fn acl(index: usize, priority: u16, action: AclAction, expr: Expr) -> Acl {
    Acl::new(index, Direction::ToLport, priority, action, expr)
}

/// `p` with `persist-established` on its allow-related ACLs where `a`
/// asks for it (`--persist`).
pub(super) fn persisting(a: &PolicyBenchArgs, mut p: Policy) -> Policy {
    for acl in &mut p.acls {
        acl.persist_established |= a.persist && acl.action == AclAction::AllowRelated;
    }
    p
}

/// [`firewall`] with `a`'s connections behind `n` ACLs allowing them
/// related ([`policy`]).
pub(super) fn related_firewall(a: &PolicyBenchArgs, n: usize) -> Result<Firewall<()>> {
    let t = Traffic::of(a);
    let mut p = persisting(a, policy(n, AclAction::AllowRelated, t, a.rules));
    if a.port_security {
        // The traffic's networks, or over IPv6 their twins.
        let entry = |mac, net: [u8; 4], len: u8| PortSecurity {
            mac,
            ips: vec![match t.v6 {
                true => (std::net::IpAddr::from(v6_of(net)), len + 96),
                false => (std::net::IpAddr::from(net), len),
            }],
        };
        p.ports[0].security = vec![entry(CLIENT_MAC, [10, 0, 0, 0], 8)];
        p.ports[1].security = vec![entry(SERVER_MAC, [172, 16, 0, 0], 12)];
    }
    firewall(p, a.conns, t)
}
