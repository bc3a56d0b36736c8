//! OVN's match language (ovn-sb(5), `Logical_Flow` `match`), resolved
//! against a policy into an [`Expr`].
//!
//! What is accepted, and each deliberate difference from OVN, is in
//! `docs/policy.md` ("The match language"). In short: the fields and
//! predicates of ctrack's [`Key`](crate::key::Key) with OVN's widths,
//! levels of measurement and prerequisites (its multicast and broadcast
//! predicates included); subfields `field[lo..hi]`; `== != < <= > >=`, constant
//! sets `{...}`, `$address_set`, `@port_group`, `&&`, `||`, `!`,
//! parentheses, `0` and `1`; constants in decimal, `0x` hex, MAC, IPv4,
//! IPv6, each optionally masked (`/mask` or a prefix length); quoted port
//! names.
//!
//! As in OVN, `!` is pushed down to the comparisons (De Morgan, inverting
//! the relations) before prerequisites are added, so a prerequisite is
//! never negated: `!(tcp.dst == 80)` is `tcp.dst != 80 && tcp`.
//!
//! ```
//! use ctrack_policy::lang;
//! use ctrack_policy::model::Policy;
//!
//! let e = lang::parse("tcp.dst == {80, 443}", &Policy::default()).unwrap();
//! assert!(e.size() > 1);
//! let err = lang::parse("tcp.dst == 80 && bogus", &Policy::default()).unwrap_err();
//! assert_eq!(err.offset, 17);
//! ```

use std::borrow::Cow;
use std::cell::RefCell;
use std::collections::{BTreeSet, HashMap};
use std::fmt;
use std::net::IpAddr;

use crate::expr::Expr;
use crate::model::{Policy, Prefix};

mod lex;
mod lower;
mod parse;
mod symbols;

pub(crate) use lex::parse_mac;

/// The longest match text accepted, in bytes.
pub const MAX_MATCH_LEN: usize = 64 * 1024;

/// The deepest nesting of parentheses accepted (OVN's `MAX_PAREN_DEPTH`).
pub const MAX_DEPTH: usize = 100;

/// The most nodes ([`Expr::size`]) one match may resolve to, once sets,
/// address sets and port groups are expanded.
pub const MAX_NODES: usize = 100_000;

/// Why a match was refused: where in its text, and what was expected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LangError {
    /// Byte offset in the match text of the offending token (its length
    /// when the text ended too soon).
    pub offset: usize,
    /// What is wrong, and what was expected.
    pub message: String,
}

impl fmt::Display for LangError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "at byte {}: {}", self.offset, self.message)
    }
}

impl std::error::Error for LangError {}

/// What names in a match refer to: a policy's ports, address sets and port
/// groups. Build it once and parse many matches with it.
#[derive(Debug)]
pub struct Context<'p> {
    policy: &'p Policy,
    ports: HashMap<&'p str, usize>,
    /// The address sets and port groups the matches parsed so far named
    /// (a group also when one of its derived sets was named).
    used: RefCell<Used<'p>>,
}

/// What [`Context::used`] returns: names of address sets and of port
/// groups.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Used<'p> {
    /// Address sets named with `$`.
    pub address_sets: BTreeSet<&'p str>,
    /// Port groups named with `@`, or through `$G_ip4` / `$G_ip6`.
    pub port_groups: BTreeSet<&'p str>,
}

impl<'p> Context<'p> {
    /// The context of `policy` (its ACLs are not looked at).
    pub fn new(policy: &'p Policy) -> Context<'p> {
        let ports = policy
            .ports
            .iter()
            .enumerate()
            .map(|(i, p)| (p.name.as_str(), i))
            .collect();
        Context {
            policy,
            ports,
            used: RefCell::default(),
        }
    }

    /// The address sets and port groups that the matches this context
    /// parsed named (what `ctrack policy check` reports unused).
    pub fn used(&self) -> Used<'p> {
        self.used.borrow().clone()
    }

    /// Parses and resolves `text`, bounded by [`MAX_NODES`].
    pub fn parse(&self, text: &str) -> Result<Expr, LangError> {
        self.parse_bounded(text, MAX_NODES)
    }

    /// Parses and resolves `text`, refusing it if it would resolve to more
    /// than `max_nodes` nodes.
    pub fn parse_bounded(&self, text: &str, max_nodes: usize) -> Result<Expr, LangError> {
        if text.len() > MAX_MATCH_LEN {
            return Err(LangError {
                offset: MAX_MATCH_LEN,
                message: format!("match longer than {MAX_MATCH_LEN} bytes"),
            });
        }
        let node = parse::parse(self, text, max_nodes)?;
        let expr = lower::lower(node);
        let size = expr.size();
        if size > max_nodes {
            return Err(LangError {
                offset: 0,
                message: format!(
                    "match resolves to {size} nodes once sets are expanded \
                     (at most {max_nodes})"
                ),
            });
        }
        Ok(expr)
    }

    /// The index of the port called `name`.
    fn port(&self, name: &str) -> Option<usize> {
        self.ports.get(name).copied()
    }

    /// The ports of group `name`.
    fn group(&self, name: &str) -> Option<&'p [usize]> {
        let (key, ports) = self.policy.port_groups.get_key_value(name)?;
        self.used.borrow_mut().port_groups.insert(key.as_str());
        Some(ports.as_slice())
    }

    /// The prefixes of address set `name`; failing that, for `name` of the
    /// form `G_ip4` or `G_ip6` where `G` is a port group, the addresses of
    /// that family of the group's ports (as OVN derives them).
    fn address_set(&self, name: &str) -> Option<Cow<'p, [Prefix]>> {
        if let Some((key, s)) = self.policy.address_sets.get_key_value(name) {
            self.used.borrow_mut().address_sets.insert(key.as_str());
            return Some(Cow::Borrowed(s.as_slice()));
        }
        let (group, v6) = match (name.strip_suffix("_ip4"), name.strip_suffix("_ip6")) {
            (Some(g), _) => (g, false),
            (_, Some(g)) => (g, true),
            _ => return None,
        };
        let ports = self.group(group)?;
        let mut out = Vec::new();
        for &i in ports {
            let Some(p) = self.policy.ports.get(i) else {
                continue;
            };
            for ip in &p.ips {
                if ip.is_ipv6() == v6 {
                    let len = if v6 { 128 } else { 32 };
                    out.push(Prefix { addr: *ip, len });
                }
            }
        }
        Some(Cow::Owned(out))
    }
}

/// Parses and resolves `text` against `policy` (a [`Context`] built for
/// one match).
pub fn parse(text: &str, policy: &Policy) -> Result<Expr, LangError> {
    Context::new(policy).parse(text)
}

/// An address as the 128-bit number the key holds (IPv4 in the low 32).
pub(crate) fn ip_u128(ip: IpAddr) -> u128 {
    match ip {
        IpAddr::V4(a) => u128::from(u32::from(a)),
        IpAddr::V6(a) => u128::from(a),
    }
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_eval;
#[cfg(test)]
mod tests_sub;
