//! The policy as loaded: ports, address sets, port groups and ACLs, every
//! match already resolved to an [`Expr`]. What the policy file says and how
//! it is read is in [`crate::file`]; this is what the classifier and the
//! firewall use.

use std::collections::BTreeMap;
use std::fmt;
use std::net::IpAddr;

use ctrack_core::action::{Alg, Nat};

use crate::expr::Expr;
use crate::key::PortNo;

/// What a packet that no ACL decides gets (`[default] action`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DefaultAction {
    /// Pass (OVN's default).
    #[default]
    Allow,
    /// Drop.
    Drop,
}

/// Which ACL stage: the sender's or the receiver's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Direction {
    /// `from-lport`: ACLs of the port a packet comes from (`inport`).
    FromLport,
    /// `to-lport`: ACLs of the port a packet goes to (`outport`).
    ToLport,
}

impl Direction {
    /// The name in the policy file and in reports.
    pub fn name(self) -> &'static str {
        match self {
            Direction::FromLport => "from-lport",
            Direction::ToLport => "to-lport",
        }
    }
}

/// An ACL's action, as ovn-nb(5) names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AclAction {
    /// `allow`: stateful when the policy has any stateful ACL, as in OVN.
    Allow,
    /// `allow-related`: commit the connection; replies and related traffic
    /// pass.
    AllowRelated,
    /// `allow-stateless`: pass without tracking.
    AllowStateless,
    /// `drop`.
    Drop,
    /// `reject`: drop and answer (TCP RST, SCTP ABORT, ICMP unreachable).
    Reject,
    /// `pass`: hand the decision to the next tier.
    Pass,
}

/// How an ACL's log lines rate (OVN's `ACL.severity`: syslog's levels,
/// most severe first).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Severity {
    /// `alert`.
    Alert,
    /// `warning`.
    Warning,
    /// `notice`.
    Notice,
    /// `info`: OVN's default.
    #[default]
    Info,
    /// `debug`.
    Debug,
}

impl Severity {
    /// Every level, most severe first.
    pub const ALL: [Severity; 5] = [
        Severity::Alert,
        Severity::Warning,
        Severity::Notice,
        Severity::Info,
        Severity::Debug,
    ];

    /// The name in the policy file and in log lines.
    pub fn name(self) -> &'static str {
        match self {
            Severity::Alert => "alert",
            Severity::Warning => "warning",
            Severity::Notice => "notice",
            Severity::Info => "info",
            Severity::Debug => "debug",
        }
    }
}

/// The unit of a meter's rate and burst (OVN's `Meter.unit`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum MeterUnit {
    /// `pktps`: packets (for an ACL's log, lines) a second; the burst in
    /// packets.
    #[default]
    Pktps,
    /// `kbps`: kilobits a second of the packets logged; the burst in
    /// kilobits.
    Kbps,
}

impl MeterUnit {
    /// The name in the policy file and in reports.
    pub fn name(self) -> &'static str {
        match self {
            MeterUnit::Pktps => "pktps",
            MeterUnit::Kbps => "kbps",
        }
    }
}

/// A meter (`[meters.NAME]`): OVN's `Meter` with its one `drop` band.
/// ACLs that name it in `meter` have their log lines limited to its rate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Meter {
    /// Its name.
    pub name: String,
    /// What `rate` and `burst` count.
    pub unit: MeterUnit,
    /// Packets or kilobits a second, at least 1 (OVN's `Meter_Band.rate`).
    pub rate: u32,
    /// The most let through at once, in packets or kilobits
    /// (`Meter_Band.burst_size`); a file's 0 or no `burst` gives `rate`,
    /// as Open vSwitch's userspace datapath chooses for a burst size of 0.
    pub burst: u32,
    /// `fair`: each ACL naming the meter is limited on its own; otherwise
    /// they share its rate (OVN's `Meter.fair`).
    pub fair: bool,
}

impl Meter {
    /// How `policy show` describes it: `20 pktps, burst 40, shared by its
    /// ACLs` (or `fair (each ACL on its own)`).
    pub fn text(&self) -> String {
        format!(
            "{} {}, burst {}, {}",
            self.rate,
            self.unit.name(),
            self.burst,
            if self.fair {
                "fair (each ACL on its own)"
            } else {
                "shared by its ACLs"
            }
        )
    }
}

/// The policy's control plane protection (`[copp]`): OVN's `Copp` of a
/// logical switch, of which ctrack has the one key a switch's ACLs use.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Copp {
    /// `reject`: the meter (in [`Policy::meters`]) that limits the
    /// answers to packets of `reject` ACLs, for all workers together, in
    /// place of the firewall's own limit (`Firewall::set_reject_limit`,
    /// `--reject-rate`). In `kbps`, the rejected packets' bits count, as
    /// OVN's meter counts the packets it sends to its controller.
    pub reject: Option<String>,
}

impl AclAction {
    /// The name in the policy file and in reports.
    pub fn name(self) -> &'static str {
        match self {
            AclAction::Allow => "allow",
            AclAction::AllowRelated => "allow-related",
            AclAction::AllowStateless => "allow-stateless",
            AclAction::Drop => "drop",
            AclAction::Reject => "reject",
            AclAction::Pass => "pass",
        }
    }

    /// True for the action that makes a policy stateful (OVN's
    /// `has_stateful_acl`): `allow-related` (in OVN load balancers do too;
    /// ctrack has none).
    pub fn is_stateful(self) -> bool {
        matches!(self, AclAction::AllowRelated)
    }
}

/// A port, as OVN's Logical_Switch_Port: its name, addresses, zone and
/// port security.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Port {
    /// Its name.
    pub name: String,
    /// Its MAC addresses (the first token of each `addresses` entry, then
    /// those of `port_security` entries that `addresses` lacks: ctrack
    /// tells ports apart by MAC).
    pub macs: Vec<[u8; 6]>,
    /// Its IP addresses (the other tokens).
    pub ips: Vec<IpAddr>,
    /// The conntrack zone of its connections.
    pub zone: u16,
    /// `port_security`: the addresses it may send from and receive at
    /// (OVN's `Logical_Switch_Port.port_security`); empty: any.
    pub security: Vec<PortSecurity>,
    /// `enabled = false` (OVN's `Logical_Switch_Port.enabled`): every
    /// frame from or to the port is dropped.
    pub disabled: bool,
}

impl Port {
    /// Its `port_security` as `policy show` prints it, after the port's
    /// line: `; port security "02:00:00:00:00:01 10.0.0.1/32", ...`, or
    /// nothing.
    pub fn security_text(&self) -> String {
        if self.disabled {
            return "; disabled (enabled = false)".into();
        }
        if self.security.is_empty() {
            return String::new();
        }
        let entries: Vec<String> = self
            .security
            .iter()
            .map(|e| {
                let mut t = e.mac.map(|b| format!("{b:02x}")).join(":");
                for (a, len) in &e.ips {
                    t.push_str(&format!(" {a}/{len}"));
                }
                format!("{t:?}")
            })
            .collect();
        format!("; port security {}", entries.join(", "))
    }
}

/// One `port_security` entry: a MAC, and the IP addresses the port may
/// use with it (none: any). An address with a prefix length whose host
/// bits are zero is a network (any address in it); with host bits set,
/// that address alone (and, for IPv4, the network's broadcast address as
/// a destination), as in OVN.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortSecurity {
    /// The MAC address.
    pub mac: [u8; 6],
    /// The addresses, each with its prefix length (32 or 128 when none
    /// was given), host bits as written.
    pub ips: Vec<(IpAddr, u8)>,
}

/// An IP prefix of an address set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Prefix {
    /// The address (host bits clear).
    pub addr: IpAddr,
    /// The prefix length.
    pub len: u8,
}

/// Where something is in the policy file, for messages: 1-based line and
/// column.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Span {
    /// Line, from 1.
    pub line: u32,
    /// Column, from 1.
    pub col: u32,
}

/// One ACL.
#[derive(Debug, Clone, PartialEq)]
pub struct Acl {
    /// Its index in the file, from 0 (`acl#N`).
    pub index: usize,
    /// Its name, or `acl#N`.
    pub name: String,
    /// Its stage.
    pub direction: Direction,
    /// 0..=32767; higher wins.
    pub priority: u16,
    /// 0..=3.
    pub tier: u8,
    /// What it does.
    pub action: AclAction,
    /// `label`: stored in the connection's label (bits 96..127, as OVN's
    /// `ct_label.label`).
    pub label: Option<u32>,
    /// `log`.
    pub log: bool,
    /// `severity`: how its log lines rate (`info` when not given).
    pub severity: Severity,
    /// `meter`: the name of the meter (in [`Policy::meters`]) that limits
    /// its log lines (OVN's `ACL.meter`).
    pub meter: Option<String>,
    /// `log-related` (OVN's `options:log-related`): with `log`, the
    /// replies and related packets of the connections it committed are
    /// logged too.
    pub log_related: bool,
    /// `persist-established`.
    pub persist_established: bool,
    /// `nat` (allow-related only).
    pub nat: Option<Nat>,
    /// `alg` (allow-related only).
    pub alg: Option<Alg>,
    /// The match as written.
    pub match_text: String,
    /// The match, resolved.
    pub expr: Expr,
    /// Where the ACL's table starts in the file.
    pub span: Span,
}

impl Acl {
    /// An ACL named `acl#index`, tier 0, with none of the optional
    /// settings: for policies built in code (tests, benchmarks).
    pub fn new(
        index: usize,
        direction: Direction,
        priority: u16,
        action: AclAction,
        expr: Expr,
    ) -> Acl {
        Acl {
            index,
            name: format!("acl#{index}"),
            direction,
            priority,
            tier: 0,
            action,
            label: None,
            log: false,
            severity: Severity::Info,
            meter: None,
            log_related: false,
            persist_established: false,
            nat: None,
            alg: None,
            match_text: String::new(),
            expr,
            span: Span::default(),
        }
    }
}

impl Acl {
    /// Its settings besides priority, name, action and match, as `policy
    /// show` prints them after the match: ` nat=(...) alg=ftp label=7
    /// log(severity=warning,meter="m") persist-established`, each only
    /// where set.
    pub fn options_text(&self) -> String {
        let mut o = String::new();
        if let Some(n) = &self.nat {
            o.push_str(&format!(" nat=({n})"));
        }
        if let Some(g) = self.alg {
            o.push_str(&format!(" alg={}", g.name()));
        }
        if let Some(l) = self.label {
            o.push_str(&format!(" label={l}"));
        }
        if self.log {
            o.push_str(&format!(" log(severity={}", self.severity.name()));
            if let Some(m) = &self.meter {
                o.push_str(&format!(",meter={m:?}"));
            }
            if self.log_related {
                o.push_str(",related");
            }
            o.push(')');
        } else if let Some(m) = &self.meter {
            o.push_str(&format!(" meter={m:?}"));
        }
        if self.persist_established {
            o.push_str(" persist-established");
        }
        o
    }
}

/// A loaded policy.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Policy {
    /// `[default] action`.
    pub default: DefaultAction,
    /// The ports, in file order; port `i` is [`PortNo`] `i + 1`.
    pub ports: Vec<Port>,
    /// Address sets by name.
    pub address_sets: BTreeMap<String, Vec<Prefix>>,
    /// Port groups by name: the ports' indices.
    pub port_groups: BTreeMap<String, Vec<usize>>,
    /// The ACLs, in file order.
    pub acls: Vec<Acl>,
    /// Meters by name (`[meters]`).
    pub meters: BTreeMap<String, Meter>,
    /// `[copp]`: the meter that limits `reject` answers.
    pub copp: Copp,
}

impl Policy {
    /// True when some ACL is stateful: then `allow` commits too and a
    /// connection no ACL decides is committed under a default allow, as in
    /// OVN.
    pub fn has_stateful(&self) -> bool {
        self.acls.iter().any(|a| a.action.is_stateful())
    }

    /// A line a meter, as `policy show` prints them: `meter NAME: 20
    /// pktps, burst 20, shared by its ACLs, 2 ACL(s)`, and `, the reject
    /// answers ([copp])` for the meter that limits them.
    pub fn meter_lines(&self) -> Vec<String> {
        self.meters
            .values()
            .map(|m| {
                let users = self
                    .acls
                    .iter()
                    .filter(|a| a.meter.as_ref() == Some(&m.name))
                    .count();
                let copp = if self.copp.reject.as_ref() == Some(&m.name) {
                    ", the reject answers ([copp])"
                } else {
                    ""
                };
                format!("meter {}: {}, {users} ACL(s){copp}", m.name, m.text())
            })
            .collect()
    }

    /// The port that owns `mac`, if any.
    pub fn port_of_mac(&self, mac: [u8; 6]) -> PortNo {
        self.ports
            .iter()
            .position(|p| p.macs.contains(&mac))
            .map_or(crate::key::NO_PORT, |i| (i + 1) as PortNo)
    }
}

/// Why a policy was refused: where, and what was expected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyError {
    /// The file's name as given.
    pub file: String,
    /// Where; line 0 for the file as a whole (it cannot be read, or is
    /// too large), which the message then gives without a position.
    pub span: Span,
    /// What is wrong, and what was expected.
    pub message: String,
}

impl fmt::Display for PolicyError {
    /// `FILE:LINE:COL: MESSAGE`, or `FILE: MESSAGE` for the file as a
    /// whole.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.span.line {
            0 => write!(f, "{}: {}", self.file, self.message),
            line => write!(
                f,
                "{}:{line}:{}: {}",
                self.file, self.span.col, self.message
            ),
        }
    }
}

impl std::error::Error for PolicyError {}

#[cfg(test)]
mod tests {
    use super::*;

    /// The names the policy file takes and the reports print.
    #[test]
    fn names_are_the_files_and_the_reports() {
        use AclAction::*;
        let actions = [Allow, AllowRelated, AllowStateless, Drop, Reject, Pass];
        let names: Vec<_> = actions.iter().map(|a| a.name()).collect();
        assert_eq!(
            names,
            [
                "allow",
                "allow-related",
                "allow-stateless",
                "drop",
                "reject",
                "pass"
            ]
        );
        let stateful: Vec<_> = actions.iter().map(|a| a.is_stateful()).collect();
        assert_eq!(stateful, [false, true, false, false, false, false]);
        assert_eq!(
            [Direction::FromLport.name(), Direction::ToLport.name()],
            ["from-lport", "to-lport"]
        );
        assert_eq!(
            [MeterUnit::Pktps.name(), MeterUnit::Kbps.name()],
            ["pktps", "kbps"]
        );
        let levels: Vec<_> = Severity::ALL.iter().map(|s| s.name()).collect();
        assert_eq!(levels, ["alert", "warning", "notice", "info", "debug"]);
    }

    /// `policy show`'s lines for the meters: each meter's rate, unit,
    /// burst and sharing, how many ACLs name it, and which limits the
    /// reject answers.
    #[test]
    fn meters_are_described_with_their_users() {
        let p = Policy::from_str(
            r#"
[[acl]]
direction = "from-lport"
priority = 10
match = "ip4"
action = "reject"
log = true
meter = "m1"

[[acl]]
direction = "to-lport"
priority = 10
match = "ip4"
action = "allow"
log = true
meter = "m1"

[meters.m1]
rate = 20
burst = 40

[meters.m2]
unit = "kbps"
rate = 100
fair = true

[copp]
reject = "m2"
"#,
            "t.toml",
        )
        .expect("a policy");
        assert_eq!(
            p.meter_lines(),
            [
                "meter m1: 20 pktps, burst 40, shared by its ACLs, 2 ACL(s)",
                "meter m2: 100 kbps, burst 100, fair (each ACL on its own), 0 ACL(s), \
                 the reject answers ([copp])",
            ]
        );
    }
}
