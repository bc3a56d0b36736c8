//! The policies of `bench policy`: two ports, the traffic's admitting
//! ACL behind the others, and (`--port-security`) port security.

use anyhow::Result;
use ctrack_policy::expr::Expr;
use ctrack_policy::firewall::Firewall;
use ctrack_policy::key::{Field, flag};
use ctrack_policy::model::{Acl, AclAction, DefaultAction, Direction, Policy, Port, PortSecurity};

use super::{CLIENT_MAC, PolicyBenchArgs, Proto, RuleSet, SERVER_MAC, firewall};

/// A policy of two ports (client, server) whose traffic `allow` admits,
/// behind `n - 1` to-lport ACLs of higher priority: with
/// [`RuleSet::Simple`], drops that the traffic never matches (/32 sources
/// in 198.18.0.0/15 to single ports, of `proto`), as a security group's
/// rules for other peers would be; with [`RuleSet::Realistic`], the
/// classifier benchmark's generated shapes, each an `allow` (of the same
/// kind), so that whichever the traffic matches lets it through.
pub(super) fn policy(n: usize, allow: AclAction, proto: Proto, rules: RuleSet) -> Policy {
    let l4 = match proto {
        Proto::Udp => flag::UDP,
        Proto::Tcp => flag::TCP,
    };
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
        let expr = Expr::And(vec![
            Expr::flags(flag::IP | flag::IP4 | l4),
            Expr::eq(Field::Outport, 2),
            Expr::eq(Field::IpSrc, u128::from(0xc612_0000u32 + i as u32)),
            Expr::eq(Field::L4Dst, (i % 60_000) as u128 + 1),
        ]);
        acls.push(acl(i, 2000, AclAction::Drop, expr));
    }
    let expr = Expr::And(vec![
        Expr::flags(flag::IP | flag::IP4 | l4),
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

/// [`firewall`] with `a`'s connections behind `n` ACLs allowing them
/// related ([`policy`]).
pub(super) fn related_firewall(a: &PolicyBenchArgs, n: usize) -> Result<Firewall<()>> {
    let mut p = policy(n, AclAction::AllowRelated, a.proto, a.rules);
    if a.port_security {
        let entry = |mac, net: [u8; 4], len| PortSecurity {
            mac,
            ips: vec![(std::net::IpAddr::from(net), len)],
        };
        p.ports[0].security = vec![entry(CLIENT_MAC, [10, 0, 0, 0], 8)];
        p.ports[1].security = vec![entry(SERVER_MAC, [172, 16, 0, 0], 12)];
    }
    firewall(p, a.conns, a.proto)
}
