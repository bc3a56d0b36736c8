//! What `ctrack policy check` reports beyond refusing a bad file: ACLs that
//! no frame can match, ACLs that never decide because ACLs ranked above
//! them in the same stage and tier match everything they match, ACLs that
//! share a name, and address sets and port groups no ACL names.
//!
//! Both ACL checks work on the compiled form (a DNF of mask and value
//! conjunctions), leaving out the conjunctions no frame's key can have
//! (two protocols at once, a protocol with a field value it never has).
//! ACL A is shadowed when each of its conjunctions is contained in a
//! conjunction of a higher-ranked ACL (which looks at a subset of A's
//! bits, with the same values), after splitting a conjunction that leaves
//! the IP family or the ICMP version open into one for each; the message
//! names one ACL when one covers everything, else each that covers a
//! part. That is sufficient, not necessary: coverage that needs finer
//! splits (port ranges that together make another) is not seen, so a
//! shadow may go unreported but is never reported wrongly. The work is
//! bounded, so a huge policy is checked in part and says so.

use std::collections::BTreeSet;
use std::fmt;

use crate::classify::{CompileError, Conj, normalise};
use crate::expr::Expr;
use crate::firewall::rank;
use crate::key::{Field, flag};
use crate::lang::Context;
use crate::model::{AclAction, Policy};

/// Conjunction pairs compared at most.
const MAX_PAIRS: u64 = 50_000_000;

/// One finding.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Finding {
    /// The ACL's match is contradictory (`tcp && udp`).
    NeverMatches {
        /// Its name.
        acl: String,
    },
    /// Higher-ranked ACLs of the same stage and tier (one, or a few
    /// together: one for IPv4 and one for IPv6, say) match every packet it
    /// matches.
    Shadowed {
        /// Its name.
        acl: String,
        /// The shadowing ACLs' names, best ranked first.
        by: Vec<String>,
    },
    /// The ACL's match is too large to analyse.
    TooLarge {
        /// Its name.
        acl: String,
        /// Why.
        why: String,
    },
    /// The work bound was reached: later ACLs were not compared.
    Incomplete,
    /// An address set or port group that no ACL's match names (a port
    /// group counts as named when one of its derived sets, `$G_ip4` or
    /// `$G_ip6`, is), or a meter no ACL (nor `[copp]`) names.
    Unused {
        /// `address set`, `port group` or `meter`.
        kind: &'static str,
        /// Its name.
        name: String,
    },
    /// Several ACLs have the same name (OVN allows it): what is reported
    /// per ACL, per packet and in counters, names them alike.
    SharedName {
        /// The name.
        name: String,
        /// The ACLs' indexes in the file.
        acls: Vec<usize>,
    },
    /// The ACL names a meter but does not log: the meter limits nothing
    /// (OVN's `ACL.meter` limits only log lines).
    MeterWithoutLog {
        /// Its name.
        acl: String,
        /// The meter's.
        meter: String,
    },
    /// The ACL has `log-related` but logs no related traffic: it does not
    /// log, or commits no connection.
    LogRelatedInert {
        /// Its name.
        acl: String,
        /// Why: `does not log`, or `commits no connection`.
        why: &'static str,
    },
    /// The ACL has `persist-established` but commits no connection (it
    /// drops, rejects, passes, or allows stateless): there is nothing to
    /// persist (OVN honours the option on `allow-related` and `allow`
    /// alone).
    PersistInert {
        /// Its name.
        acl: String,
    },
    /// `[copp] reject` names a meter, but no ACL rejects: it limits
    /// nothing.
    CoppWithoutReject {
        /// The meter's name.
        meter: String,
    },
    /// A port's `port_security` does not allow one of its own
    /// `addresses` (a MAC, or an IP address as a source): its packets
    /// from it are dropped.
    PortSecurityExcludes {
        /// The port's name.
        port: String,
        /// The address, as written.
        address: String,
    },
}

impl Finding {
    /// A warning (the policy likely does not do what was meant), not a
    /// note (the analysis was cut short, or something is merely unused).
    pub fn is_warning(&self) -> bool {
        matches!(
            self,
            Finding::NeverMatches { .. } | Finding::Shadowed { .. } | Finding::SharedName { .. }
        )
    }
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Finding::NeverMatches { acl } => write!(f, "warning: ACL {acl} can never match"),
            Finding::Shadowed { acl, by } if by.len() == 1 => write!(
                f,
                "warning: ACL {acl} is shadowed by {}, which ranks above it and matches every packet it matches",
                by[0]
            ),
            Finding::Shadowed { acl, by } => write!(
                f,
                "warning: ACL {acl} is shadowed by {}, which rank above it and together match every packet it matches",
                by.join(" and ")
            ),
            Finding::TooLarge { acl, why } => write!(f, "note: ACL {acl} not analysed: {why}"),
            Finding::Incomplete => write!(f, "note: shadowing analysis stopped at its work bound"),
            Finding::Unused { kind, name } => {
                write!(f, "note: {kind} {name} is not used by any ACL")
            }
            Finding::MeterWithoutLog { acl, meter } => write!(
                f,
                "note: ACL {acl} names meter {meter} but does not log: a meter limits only log lines"
            ),
            Finding::LogRelatedInert { acl, why } => write!(
                f,
                "note: ACL {acl} has log-related but {why}: it logs no reply or related packet"
            ),
            Finding::PersistInert { acl } => write!(
                f,
                "note: ACL {acl} has persist-established but commits no connection: there is nothing to persist"
            ),
            Finding::CoppWithoutReject { meter } => write!(
                f,
                "note: [copp] reject names meter {meter} but no ACL rejects: it limits nothing"
            ),
            Finding::PortSecurityExcludes { port, address } => write!(
                f,
                "note: port {port}'s address {address} is not one its port_security allows: its packets from it are dropped"
            ),
            Finding::SharedName { name, acls } => {
                let list: Vec<String> = acls.iter().map(|i| format!("#{i}")).collect();
                write!(
                    f,
                    "warning: {} ACLs are named {name} (the file's ACLs {}): reports and counters cannot tell them apart",
                    acls.len(),
                    list.join(", ")
                )
            }
        }
    }
}

/// True when every key `inner` matches, `outer` matches too.
fn covers(outer: &Conj, inner: &Conj) -> bool {
    (0..8).all(|i| {
        outer.mask.w[i] & !inner.mask.w[i] == 0
            && inner.value.w[i] & outer.mask.w[i] == outer.value.w[i]
    })
}

/// Protocol flags of which a packet's key has at most one set: a frame is
/// ARP or IP; IPv4 or IPv6; its protocol TCP, UDP, SCTP or ICMP (an IPv4
/// later fragment has its datagram's, as in OVN, where `tcp` is
/// `ip.proto == 6`; an IPv6 one has none, its protocol being the fragment
/// header's 44, which this does not know and so never calls impossible);
/// ICMP is ICMPv4 or ICMPv6, the first only over IPv4, the second only
/// over IPv6.
const EXCLUSIVE: [u16; 6] = [
    flag::ARP | flag::IP,
    flag::IP4 | flag::IP6,
    flag::TCP | flag::UDP | flag::SCTP | flag::ICMP,
    flag::ICMP4 | flag::ICMP6,
    flag::ICMP4 | flag::IP6,
    flag::ICMP6 | flag::IP4,
];

/// What a protocol flag implies of another field of the key: a frame of
/// that flag always has that value there (the ethertype of an IPv4 frame,
/// the IP protocol of a TCP segment...).
const IMPLIES: [(u16, Field, u128); 8] = [
    (flag::ARP, Field::EthType, 0x0806),
    (flag::IP4, Field::EthType, 0x0800),
    (flag::IP6, Field::EthType, 0x86dd),
    (flag::TCP, Field::IpProto, 6),
    (flag::UDP, Field::IpProto, 17),
    (flag::SCTP, Field::IpProto, 132),
    (flag::ICMP4, Field::IpProto, 1),
    (flag::ICMP6, Field::IpProto, 58),
];

/// False when no frame can match `c`, although as bits it is satisfiable:
/// it requires two protocols at once (`tcp && udp` sets two flags that a
/// frame's key never has together), or a protocol and a field value that
/// protocol never has (`tcp && ip.proto == 17`, `ip4 && eth.type ==
/// 0x86dd`). The classifier needs no such check (such an entry is never
/// met); `ctrack policy check` does, to report what can never match.
fn possible(c: &Conj) -> bool {
    let required = (c.mask.get(Field::Flags) & c.value.get(Field::Flags)) as u16;
    if EXCLUSIVE.iter().any(|&g| (required & g).count_ones() > 1) {
        return false;
    }
    IMPLIES.iter().all(|&(f, field, v)| {
        let m = c.mask.get(field);
        required & f == 0 || v & m == c.value.get(field)
    })
}

/// The DNF of `expr` without the conjunctions no frame can match (see
/// [`possible`]): empty when the expression never matches a frame.
fn frame_dnf(expr: &Expr) -> Result<Vec<Conj>, CompileError> {
    let mut d = normalise(expr)?;
    d.retain(possible);
    Ok(d)
}

/// True when no frame can match `expr` (what `ctrack policy check` reports
/// as "can never match"); an error when it is too large to tell.
pub fn never_matches(expr: &Expr) -> Result<bool, CompileError> {
    Ok(frame_dnf(expr)?.is_empty())
}

/// Analyses `p`.
pub fn analyze(p: &Policy) -> Vec<Finding> {
    let mut out = shared_names(p);
    // A shared name alone would make a finding ambiguous: such an ACL is
    // named with its index as well.
    let shared: std::collections::HashSet<&str> = out
        .iter()
        .filter_map(|f| match f {
            Finding::SharedName { name, .. } => Some(name.as_str()),
            _ => None,
        })
        .collect();
    let names: Vec<String> = p
        .acls
        .iter()
        .enumerate()
        .map(|(i, a)| match shared.contains(a.name.as_str()) {
            true => format!("{} (#{i})", a.name),
            false => a.name.clone(),
        })
        .collect();
    out.extend(unused(p));
    out.extend(p.acls.iter().zip(&names).filter_map(|(a, name)| {
        let meter = a.meter.as_ref().filter(|_| !a.log)?;
        Some(Finding::MeterWithoutLog {
            acl: name.clone(),
            meter: meter.clone(),
        })
    }));
    let stateful = p.has_stateful();
    out.extend(p.acls.iter().zip(&names).filter_map(|(a, name)| {
        let commits =
            a.action == AclAction::AllowRelated || (stateful && a.action == AclAction::Allow);
        let why = match (a.log_related, a.log, commits) {
            (false, _, _) | (true, true, true) => return None,
            (true, false, _) => "does not log",
            (true, true, false) => "commits no connection",
        };
        Some(Finding::LogRelatedInert {
            acl: name.clone(),
            why,
        })
    }));
    out.extend(p.acls.iter().zip(&names).filter_map(|(a, name)| {
        let commits =
            a.action == AclAction::AllowRelated || (stateful && a.action == AclAction::Allow);
        (a.persist_established && !commits).then(|| Finding::PersistInert { acl: name.clone() })
    }));
    out.extend(p.ports.iter().flat_map(excluded));
    if let Some(meter) = &p.copp.reject
        && !p.acls.iter().any(|a| a.action == AclAction::Reject)
    {
        out.push(Finding::CoppWithoutReject {
            meter: meter.clone(),
        });
    }
    out.extend(matches(p, &names));
    out
}

/// Address sets and port groups no ACL names: each ACL's match is parsed
/// again with a context that records what it looks up.
fn unused(p: &Policy) -> Vec<Finding> {
    let cx = Context::new(p);
    for a in &p.acls {
        // A loaded policy's matches parse; one that does not (a policy
        // built in code) simply names nothing.
        let _ = cx.parse(&a.match_text);
    }
    let used = cx.used();
    let of = |kind: &'static str, names: Vec<&String>, used: &BTreeSet<&str>| {
        names
            .into_iter()
            .filter(|n| !used.contains(n.as_str()))
            .map(|n| Finding::Unused {
                kind,
                name: n.clone(),
            })
            .collect::<Vec<_>>()
    };
    let mut out = of(
        "address set",
        p.address_sets.keys().collect(),
        &used.address_sets,
    );
    out.extend(of(
        "port group",
        p.port_groups.keys().collect(),
        &used.port_groups,
    ));
    let metered: BTreeSet<&str> = (p.acls.iter().filter_map(|a| a.meter.as_deref()))
        .chain(p.copp.reject.as_deref())
        .collect();
    out.extend(of("meter", p.meters.keys().collect(), &metered));
    out
}

/// The addresses of `port` that its `port_security` does not allow as
/// sources: a MAC of no entry; an IP address that no entry allows (an
/// entry without addresses allows any; one with addresses of the other
/// family only, none of this one). The port's addresses are not kept by
/// MAC, so an address another MAC's entry allows is not noted: a note is
/// always a real exclusion, and a port of one MAC is checked exactly.
fn excluded(port: &crate::model::Port) -> Vec<Finding> {
    if port.security.is_empty() {
        return Vec::new();
    }
    let note = |address: String| Finding::PortSecurityExcludes {
        port: port.name.clone(),
        address,
    };
    let mut out = Vec::new();
    for m in &port.macs {
        if !port.security.iter().any(|e| e.mac == *m) {
            out.push(note(m.map(|b| format!("{b:02x}")).join(":")));
        }
    }
    let covers = |net: &std::net::IpAddr, len: u8, a: &std::net::IpAddr| match (net, a) {
        (std::net::IpAddr::V4(n), std::net::IpAddr::V4(a)) => {
            let (n, a) = (u32::from(*n), u32::from(*a));
            let m = if len == 0 {
                0
            } else {
                u32::MAX << (32 - u32::from(len.min(32)))
            };
            if n & !m == 0 { a & m == n } else { a == n }
        }
        (std::net::IpAddr::V6(n), std::net::IpAddr::V6(a)) => {
            let (n, a) = (u128::from(*n), u128::from(*a));
            let m = if len == 0 {
                0
            } else {
                u128::MAX << (128 - u32::from(len.min(128)))
            };
            if n & !m == 0 { a & m == n } else { a == n }
        }
        _ => false,
    };
    // The link-local address of a MAC (EUI-64), which an entry with IPv6
    // addresses allows.
    let link_local = |m: [u8; 6]| {
        let iid = u64::from_be_bytes([m[0] ^ 2, m[1], m[2], 0xff, 0xfe, m[3], m[4], m[5]]);
        std::net::IpAddr::V6(((0xfe80u128 << 112) | u128::from(iid)).into())
    };
    for a in &port.ips {
        let allowed = port.security.iter().any(|e| {
            e.ips.is_empty()
                || e.ips.iter().any(|(net, len)| covers(net, *len, a))
                || (*a == link_local(e.mac) && e.ips.iter().any(|(n, _)| n.is_ipv6()))
        });
        if !allowed {
            out.push(note(a.to_string()));
        }
    }
    out
}

/// ACL names that more than one ACL has.
fn shared_names(p: &Policy) -> Vec<Finding> {
    let mut by: std::collections::BTreeMap<&str, Vec<usize>> = Default::default();
    for (i, a) in p.acls.iter().enumerate() {
        by.entry(a.name.as_str()).or_default().push(i);
    }
    by.into_iter()
        .filter(|(_, v)| v.len() > 1)
        .map(|(name, acls)| Finding::SharedName {
            name: name.to_owned(),
            acls,
        })
        .collect()
}

/// Never-matching and shadowed ACLs, each called by `names[i]`.
fn matches(p: &Policy, names: &[String]) -> Vec<Finding> {
    let mut out = Vec::new();
    let mut dnfs: Vec<Option<Vec<Conj>>> = Vec::with_capacity(p.acls.len());
    for (i, a) in p.acls.iter().enumerate() {
        match frame_dnf(&a.expr) {
            Ok(d) if d.is_empty() => {
                out.push(Finding::NeverMatches {
                    acl: names[i].clone(),
                });
                dnfs.push(None);
            }
            Ok(d) => dnfs.push(Some(d)),
            Err(e) => {
                out.push(Finding::TooLarge {
                    acl: names[i].clone(),
                    why: e.to_string(),
                });
                dnfs.push(None);
            }
        }
    }
    let mut order: Vec<usize> = (0..p.acls.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(rank(p.acls[i].priority, i)));
    let mut work = 0u64;
    for (pos, &i) in order.iter().enumerate() {
        let (a, Some(da)) = (&p.acls[i], &dnfs[i]) else {
            continue;
        };
        // The ACLs ranked above it in its stage and tier, best first.
        let above: Vec<(usize, &Vec<Conj>)> = order[..pos]
            .iter()
            .filter_map(|&j| {
                let b = &p.acls[j];
                let db = dnfs[j].as_ref()?;
                (b.direction == a.direction && b.tier == a.tier).then_some((j, db))
            })
            .collect();
        let parts: Vec<Conj> = da.iter().flat_map(frame_kinds).collect();
        work += (parts.len() * above.iter().map(|(_, d)| d.len()).sum::<usize>()) as u64;
        if work > MAX_PAIRS {
            out.push(Finding::Incomplete);
            return out;
        }
        if let Some(by) = shadowers(&parts, &above) {
            out.push(Finding::Shadowed {
                acl: names[i].clone(),
                by: by.iter().map(|&j| names[j].clone()).collect(),
            });
        }
    }
    out
}

/// `c` split by the kinds of frame it leaves open: a conjunction that
/// requires IP but neither IPv4 nor IPv6 becomes one for each (and
/// likewise ICMP into ICMPv4 and ICMPv6), so that `ip4 || ip6`, or an
/// `ip4` ACL with an `ip6` one, is seen to cover `tcp`. The parts match
/// the frames `c` matches, no more, no fewer.
fn frame_kinds(c: &Conj) -> Vec<Conj> {
    let mut out = vec![*c];
    for (whole, halves) in [
        (flag::IP, [flag::IP4, flag::IP6]),
        (flag::ICMP, [flag::ICMP4, flag::ICMP6]),
    ] {
        out = out
            .into_iter()
            .flat_map(|c| {
                let required = c.mask.get(Field::Flags) & c.value.get(Field::Flags);
                let looked = c.mask.get(Field::Flags);
                let open = required & u128::from(whole) != 0
                    && looked & u128::from(halves[0] | halves[1]) == 0;
                let split: Vec<Conj> = match open {
                    false => vec![c],
                    true => halves
                        .iter()
                        .filter_map(|&h| c.and(&Conj::field(Field::Flags, h.into(), h.into())))
                        .filter(possible)
                        .collect(),
                };
                split
            })
            .collect();
    }
    out
}

/// The ACLs among `above` (best first) that together match every frame
/// of `parts`: one of them alone if one does, else for each part the best
/// that covers it; `None` if some part is covered by none.
fn shadowers(parts: &[Conj], above: &[(usize, &Vec<Conj>)]) -> Option<Vec<usize>> {
    let covered_by = |db: &Vec<Conj>, part: &Conj| db.iter().any(|cb| covers(cb, part));
    if let Some(&(j, _)) = above
        .iter()
        .find(|(_, db)| parts.iter().all(|part| covered_by(db, part)))
    {
        return Some(vec![j]);
    }
    let mut by: Vec<usize> = Vec::new();
    for part in parts {
        let &(j, _) = above.iter().find(|(_, db)| covered_by(db, part))?;
        if !by.contains(&j) {
            by.push(j);
        }
    }
    // An empty `parts` (a match no frame can match) was reported already.
    (!by.is_empty()).then_some(by)
}

#[cfg(test)]
mod tests {
    use super::{Finding, analyze};
    use crate::model::Policy;

    /// The findings for ACLs `(priority, match)`, all to-lport, named
    /// `a0`, `a1`...
    fn findings(acls: &[(u16, &str)]) -> Vec<Finding> {
        let mut text = String::new();
        for (i, (prio, m)) in acls.iter().enumerate() {
            text.push_str(&format!(
                "[[acl]]\nname = \"a{i}\"\ndirection = \"to-lport\"\npriority = {prio}\nmatch = '{m}'\naction = \"drop\"\n"
            ));
        }
        analyze(&Policy::from_str(&text, "t.toml").expect("policy"))
    }

    fn never(m: &str) -> bool {
        findings(&[(100, m)]) == [Finding::NeverMatches { acl: "a0".into() }]
    }

    #[test]
    fn two_protocols_at_once_never_match() {
        for m in [
            "tcp && udp",
            "ip4 && ip6",
            "arp && ip",
            "icmp4 && icmp6",
            "sctp && icmp",
            "tcp.dst == 80 && udp.src == 53",
            "tcp && ip.proto == 17",
            "udp && ip.proto == {1, 6}",
            "ip4 && eth.type == 0x86dd",
            "arp && eth.type == 0x800",
            "icmp6 && ip.proto == 1",
            "icmp4 && ip6",
            "icmp6 && ip4.src == 10.0.0.1",
            "tcp.dst == 80 && tcp.dst == 81",
            "0",
        ] {
            assert!(never(m), "{m}");
        }
    }

    #[test]
    fn what_a_frame_can_be_is_not_reported() {
        for m in [
            "tcp",
            "tcp && ip.proto == 6",
            "ip4 && tcp && eth.type == 0x800",
            "icmp && icmp4",
            "ip && ip6",
            "ip4 && udp.dst != 53",
            "tcp || udp",
            "(tcp && udp) || ip4",
            "ip.later_frag && ip.proto == 6",
            // OVN's `tcp` is `ip.proto == 6`: an IPv4 later fragment's.
            "ip.later_frag && tcp",
            "ip4 && ip.later_frag && udp.dst != 53",
            "ip4 && eth.type == 0x800/0xff00",
            "1",
        ] {
            assert_eq!(findings(&[(100, m)]), [], "{m}");
        }
        // Each protocol with the ethertype or IP protocol its frames have,
        // and with another.
        for (proto, field, value, other) in [
            ("arp", "eth.type", "0x806", "0x800"),
            ("ip4", "eth.type", "0x800", "0x806"),
            ("ip6", "eth.type", "0x86dd", "0x800"),
            ("tcp", "ip.proto", "6", "17"),
            ("udp", "ip.proto", "17", "6"),
            ("sctp", "ip.proto", "132", "6"),
            ("icmp4", "ip.proto", "1", "58"),
            ("icmp6", "ip.proto", "58", "1"),
        ] {
            let m = format!("{proto} && {field} == {value}");
            assert_eq!(findings(&[(100, &m)]), [], "{m}");
            assert!(never(&format!("{proto} && {field} == {other}")), "{proto}");
        }
    }

    #[test]
    fn the_same_fields_with_other_values_do_not_shadow() {
        assert_eq!(
            findings(&[(1000, "tcp.dst == 80"), (900, "tcp.dst == 443")]),
            []
        );
        assert_eq!(
            findings(&[
                (1000, "ip4.src == 10.0.0.0/8"),
                (900, "ip4.src == 192.0.2.0/24")
            ]),
            []
        );
        // A field the one above tests and this one leaves open, even where
        // the value tested is 0: TCP from 0.0.0.0/8 is not all of TCP, a
        // null scan not all of TCP, untagged frames not all frames.
        for above in ["ip4.src == 0.0.0.0/8", "tcp.flags == 0", "vlan.tci == 0"] {
            assert_eq!(findings(&[(1000, above), (900, "tcp")]), [], "{above}");
        }
    }

    #[test]
    fn an_allow_commits_where_the_policy_tracks() {
        // OVN: `allow` commits once any ACL is stateful, so its
        // log-related logs its connections' replies there, and only there.
        let text = |with_stateful: bool| {
            let stateful = "[[acl]]\nname = \"s\"\ndirection = \"to-lport\"\npriority = 2\nmatch = 'tcp'\naction = \"allow-related\"\n";
            format!(
                "{}[[acl]]\nname = \"a\"\ndirection = \"from-lport\"\npriority = 1\nmatch = 'udp'\naction = \"allow\"\nlog = true\nlog-related = true\n",
                if with_stateful { stateful } else { "" }
            )
        };
        let f = |t: bool| analyze(&Policy::from_str(&text(t), "t.toml").expect("policy"));
        assert_eq!(f(true), []);
        assert_eq!(
            f(false),
            [Finding::LogRelatedInert {
                acl: "a".into(),
                why: "commits no connection"
            }]
        );
    }

    #[test]
    fn a_test_of_ip_above_covers_no_frame_that_is_not_ip() {
        // `eth.src == X` matches X's ARP as well, which `ip && eth.src ==
        // X` leaves to it.
        let mac = "eth.src == 02:00:00:00:00:01";
        assert_eq!(findings(&[(1000, &format!("ip && {mac}")), (900, mac)]), []);
        assert_eq!(
            findings(&[(1000, &format!("(ip || arp) && {mac}")), (900, mac)]),
            [],
            "a frame neither IP nor ARP"
        );
        assert_eq!(
            findings(&[
                (1000, &format!("ip4 && {mac}")),
                (950, &format!("ip6 && {mac}")),
                (900, mac)
            ]),
            [],
            "the two families together are not every frame"
        );
        assert_eq!(
            findings(&[(1000, mac), (900, &format!("ip && {mac}"))]),
            [Finding::Shadowed {
                acl: "a1".into(),
                by: vec!["a0".into()]
            }]
        );
    }

    #[test]
    fn a_pass_in_a_tier_above_shadows_nothing_below_it() {
        // A pass in tier 0 hands what it matches to tier 1, where the ACL
        // still decides.
        let text = "[[acl]]\nname = \"p\"\ndirection = \"to-lport\"\npriority = 1000\nmatch = 'ip'\naction = \"pass\"\ntier = 0\n\
                    [[acl]]\nname = \"t\"\ndirection = \"to-lport\"\npriority = 900\nmatch = 'tcp'\naction = \"drop\"\ntier = 1\n";
        let p = Policy::from_str(text, "t.toml").expect("policy");
        assert_eq!(analyze(&p), []);
    }

    #[test]
    fn an_acl_covered_by_one_above_it_is_shadowed() {
        let f = findings(&[
            (1000, "ip"),
            (900, "(tcp && udp.dst == 53) || tcp.dst == 80"),
        ]);
        assert_eq!(
            f,
            [Finding::Shadowed {
                acl: "a1".into(),
                by: vec!["a0".into()]
            }]
        );
        // tcp over IPv6 is not ip4's.
        assert_eq!(findings(&[(1000, "ip4"), (900, "tcp")]), []);
        // Below it, not above.
        assert_eq!(findings(&[(900, "ip"), (1000, "tcp")]), []);
    }

    #[test]
    fn unused_names_and_inert_log_options_are_noted() {
        let text = r#"
[[port]]
name = "p1"
addresses = ["02:00:00:00:00:01 10.0.0.1"]
[[port]]
name = "p2"
addresses = ["02:00:00:00:00:02 10.0.0.2"]
[address_sets]
used = ["10.0.0.0/8"]
spare = ["192.0.2.0/24"]
[port_groups]
named = ["p1"]
derived = ["p2"]
idle = ["p1", "p2"]
[[acl]]
direction = "to-lport"
priority = 1
match = "outport == @named && ip4.src == $used"
action = "allow"
[[acl]]
direction = "from-lport"
priority = 1
match = "ip4.dst == $derived_ip4"
action = "allow"
meter = "named"
log-related = true
[[acl]]
name = "quiet"
direction = "from-lport"
priority = 2
match = "tcp.dst == 9"
action = "drop"
log = true
log-related = true
[meters.named]
rate = 10
[meters.spare]
rate = 10
"#;
        let f = analyze(&Policy::from_str(text, "t.toml").expect("policy"));
        assert_eq!(
            f,
            [
                Finding::Unused {
                    kind: "address set",
                    name: "spare".into()
                },
                Finding::Unused {
                    kind: "port group",
                    name: "idle".into()
                },
                Finding::Unused {
                    kind: "meter",
                    name: "spare".into()
                },
                Finding::MeterWithoutLog {
                    acl: "acl#1".into(),
                    meter: "named".into()
                },
                Finding::LogRelatedInert {
                    acl: "acl#1".into(),
                    why: "does not log"
                },
                Finding::LogRelatedInert {
                    acl: "quiet".into(),
                    why: "commits no connection"
                },
            ]
        );
        assert_eq!(
            f[5].to_string(),
            "note: ACL quiet has log-related but commits no connection: it logs no reply or related packet"
        );
        assert!(!f[3].is_warning());
        assert_eq!(
            f[3].to_string(),
            "note: ACL acl#1 names meter named but does not log: a meter limits only log lines"
        );
        assert_eq!(
            f[0].to_string(),
            "note: address set spare is not used by any ACL"
        );
    }

    /// `persist-established` on an ACL that commits nothing is noted;
    /// on `allow-related`, or `allow` in a policy that tracks, it is not.
    #[test]
    fn persist_established_without_a_commit_is_noted() {
        let acl = |name: &str, action: &str, persist: bool| {
            format!(
                "[[acl]]\nname = \"{name}\"\ndirection = \"to-lport\"\npriority = 1\nmatch = \"tcp.dst == 80\"\naction = \"{action}\"\npersist-established = {persist}\n"
            )
        };
        let text = [
            acl("related", "allow-related", true),
            acl("allow", "allow", true),
            acl("stateless", "allow-stateless", true),
            acl("drop", "drop", true),
            acl("drop-plain", "drop", false),
        ]
        .concat();
        let f = analyze(&Policy::from_str(&text, "t.toml").expect("policy"));
        let inert: Vec<_> = f
            .iter()
            .filter(|f| matches!(f, Finding::PersistInert { .. }))
            .collect();
        assert_eq!(
            inert,
            [
                &Finding::PersistInert {
                    acl: "stateless".into()
                },
                &Finding::PersistInert { acl: "drop".into() },
            ]
        );
        assert!(!inert[0].is_warning());
        assert_eq!(
            inert[1].to_string(),
            "note: ACL drop has persist-established but commits no connection: there is nothing to persist"
        );
        // Without a stateful ACL, `allow` commits nothing either.
        let text = acl("allow", "allow", true);
        let f = analyze(&Policy::from_str(&text, "t.toml").expect("policy"));
        assert_eq!(
            f,
            [Finding::PersistInert {
                acl: "allow".into()
            }]
        );
    }

    /// A meter named by `[copp]` alone is used; a `[copp] reject` meter
    /// where no ACL rejects limits nothing.
    #[test]
    fn copp_reject_meters() {
        let text = |action: &str| {
            format!(
                "[[acl]]\ndirection = \"to-lport\"\npriority = 1\nmatch = \"tcp\"\naction = \"{action}\"\n\
                 [meters.answers]\nrate = 10\n[copp]\nreject = \"answers\"\n"
            )
        };
        let f = analyze(&Policy::from_str(&text("reject"), "t.toml").expect("policy"));
        assert_eq!(f, []);
        let f = analyze(&Policy::from_str(&text("drop"), "t.toml").expect("policy"));
        assert_eq!(
            f,
            [Finding::CoppWithoutReject {
                meter: "answers".into()
            }]
        );
        assert!(!f[0].is_warning());
        assert_eq!(
            f[0].to_string(),
            "note: [copp] reject names meter answers but no ACL rejects: it limits nothing"
        );
    }

    /// A port whose `port_security` leaves out one of its own addresses.
    #[test]
    fn port_security_that_excludes_the_port_s_addresses() {
        let text = |ps: &str| {
            format!(
                "[[port]]\nname = \"vm1\"\n\
                 addresses = [\"02:00:00:00:00:01 10.0.0.1 fd00::1 fe80::ff:fe00:1\", \"02:00:00:00:00:11\"]\n\
                 port_security = [{ps}]\n"
            )
        };
        let found = |ps: &str| -> Vec<String> {
            analyze(&Policy::from_str(&text(ps), "t.toml").expect("policy"))
                .into_iter()
                .map(|f| match f {
                    Finding::PortSecurityExcludes { port, address } => format!("{port} {address}"),
                    other => panic!("{other:?}"),
                })
                .collect()
        };
        // Everything allowed: its MACs, its addresses (a network, the
        // link-local address of the MAC).
        let all = "\"02:00:00:00:00:01 10.0.0.0/24 fd00::1\", \"02:00:00:00:00:11 10.0.0.1\"";
        assert_eq!(found(all), Vec::<String>::new());
        // MACs alone: any address from them (OVN's port_security).
        assert_eq!(
            found("\"02:00:00:00:00:01\", \"02:00:00:00:00:11\""),
            Vec::<String>::new()
        );
        assert_eq!(
            found("\"02:00:00:00:00:01 10.0.0.2 fd00::/64\""),
            ["vm1 02:00:00:00:00:11", "vm1 10.0.0.1"]
        );
        // IPv4 only: no IPv6 address of the port, the link-local one
        // neither.
        assert_eq!(
            found("\"02:00:00:00:00:01 10.0.0.1\", \"02:00:00:00:00:11 10.0.0.1\""),
            ["vm1 fd00::1", "vm1 fe80::ff:fe00:1"]
        );
        // A host with a prefix is that host alone.
        assert_eq!(
            found("\"02:00:00:00:00:01 10.0.0.5/24 fd00::1\", \"02:00:00:00:00:11 10.0.0.5/24\""),
            ["vm1 10.0.0.1"]
        );
        let f = Finding::PortSecurityExcludes {
            port: "vm1".into(),
            address: "10.0.0.1".into(),
        };
        assert!(!f.is_warning());
        assert_eq!(
            f.to_string(),
            "note: port vm1's address 10.0.0.1 is not one its port_security allows: its packets from it are dropped"
        );
    }

    fn shadowed_by(acls: &[(u16, &str)]) -> Vec<Vec<String>> {
        findings(acls)
            .into_iter()
            .map(|f| match f {
                Finding::Shadowed { by, .. } => by,
                other => panic!("{other:?}"),
            })
            .collect()
    }

    #[test]
    fn both_families_together_shadow_what_either_leaves_open() {
        let by = |v: &[&str]| vec![v.iter().map(|s| s.to_string()).collect::<Vec<_>>()];
        // One ACL of both families.
        assert_eq!(
            shadowed_by(&[(1000, "ip4 || ip6"), (900, "tcp")]),
            by(&["a0"])
        );
        // One ACL each, as security groups write them.
        assert_eq!(
            shadowed_by(&[(1000, "ip4"), (1000, "ip6"), (900, "tcp.dst == 22")]),
            by(&["a0", "a1"])
        );
        assert_eq!(
            shadowed_by(&[(1000, "icmp4"), (1000, "icmp6"), (900, "icmp")]),
            by(&["a0", "a1"])
        );
        // A family left open stays open: IPv6 TCP reaches a2.
        assert_eq!(
            shadowed_by(&[(1000, "ip4"), (1000, "udp"), (900, "tcp")]),
            Vec::<Vec<String>>::new()
        );
        // One ACL alone is named when it covers everything, even below
        // others that cover a part.
        assert_eq!(
            shadowed_by(&[(1000, "ip4 && tcp"), (999, "ip"), (900, "tcp")]),
            by(&["a1"])
        );
        let f = findings(&[(1000, "ip4"), (1000, "ip6"), (900, "tcp")]);
        assert_eq!(
            f[0].to_string(),
            "warning: ACL a2 is shadowed by a0 and a1, which rank above it and together match every packet it matches"
        );
    }

    #[test]
    fn acls_that_share_a_name_are_reported_and_told_apart() {
        let text = "[[acl]]\nname = \"x\"\ndirection = \"to-lport\"\npriority = 2\nmatch = 'ip'\naction = \"drop\"\n\
                    [[acl]]\nname = \"y\"\ndirection = \"to-lport\"\npriority = 1\nmatch = 'tcp && udp'\naction = \"drop\"\n\
                    [[acl]]\nname = \"x\"\ndirection = \"to-lport\"\npriority = 1\nmatch = 'tcp'\naction = \"allow\"\n";
        let f = analyze(&Policy::from_str(text, "t.toml").expect("policy"));
        assert_eq!(
            f,
            [
                Finding::SharedName {
                    name: "x".into(),
                    acls: vec![0, 2]
                },
                Finding::NeverMatches { acl: "y".into() },
                Finding::Shadowed {
                    acl: "x (#2)".into(),
                    by: vec!["x (#0)".into()]
                },
            ]
        );
        assert_eq!(
            f[0].to_string(),
            "warning: 2 ACLs are named x (the file's ACLs #0, #2): reports and counters cannot tell them apart"
        );
        // Unnamed ACLs are called acl#N, which no named one may be.
        let unnamed = "[[acl]]\ndirection = \"to-lport\"\npriority = 1\nmatch = 'ip'\naction = \"drop\"\n\
                       [[acl]]\ndirection = \"from-lport\"\npriority = 1\nmatch = 'ip'\naction = \"drop\"\n";
        assert_eq!(
            analyze(&Policy::from_str(unnamed, "t.toml").expect("policy")),
            []
        );
    }
}
