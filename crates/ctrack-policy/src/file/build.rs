//! From the file as written ([`RawPolicy`]) to a checked [`Policy`].

use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::IpAddr;

use ctrack_core::action::{CtAction, Nat};

use super::pos::{line_col, string_offset};
use super::raw::{Format, RawAcl, RawMeter, RawPolicy, RawPort, Sp};
use super::{MAX_ACL_NAME, MAX_ACLS, MAX_POLICY_NODES, MAX_PORTS};
use crate::lang::{self, Context, MAX_NODES};
use crate::model::{
    Acl, AclAction, Copp, DefaultAction, Direction, Meter, MeterUnit, Policy, PolicyError, Port,
    PortSecurity, Prefix, Severity,
};

/// The text being read, for positions.
struct Src<'t> {
    text: &'t str,
    file: &'t str,
}

impl Src<'_> {
    fn err(&self, offset: usize, message: impl Into<String>) -> PolicyError {
        PolicyError {
            file: self.file.to_string(),
            span: line_col(self.text, offset),
            message: message.into(),
        }
    }

    /// An error about the value `v`.
    fn at<T, F: Format>(&self, v: &Sp<T, F>, message: impl Into<String>) -> PolicyError {
        self.err(v.range(self.text).0, message)
    }

    /// An error at byte `offset` of the string value `v`.
    fn inside<F: Format>(
        &self,
        v: &Sp<String, F>,
        offset: usize,
        message: impl Into<String>,
    ) -> PolicyError {
        let (s, e) = v.range(self.text);
        let raw = self.text.get(s..e).unwrap_or("");
        self.err(s + string_offset(raw, &v.value, offset), message)
    }
}

/// Checks `raw` and builds the policy.
pub(crate) fn build<F: Format>(
    raw: RawPolicy<F>,
    text: &str,
    file: &str,
) -> Result<Policy, PolicyError> {
    let src = Src { text, file };
    let mut p = Policy::default();
    if let Some(a) = raw.default.and_then(|d| d.action) {
        p.default = match a.value.as_str() {
            "allow" => DefaultAction::Allow,
            "drop" => DefaultAction::Drop,
            _ => return Err(src.at(&a, "expected \"allow\" or \"drop\"")),
        };
    }
    p.ports = ports(&src, &raw.port)?;
    for (name, set) in &raw.address_sets.0 {
        check_name(&src, set, "address set", name)?;
        let v = set
            .value
            .iter()
            .map(|e| prefix(&src, e))
            .collect::<Result<_, _>>()?;
        p.address_sets.insert(name.clone(), v);
    }
    p.port_groups = groups(&src, &raw.port_groups.0, &p)?;
    for (name, m) in &raw.meters.0 {
        p.meters.insert(name.clone(), meter(&src, name, m)?);
    }
    p.copp = copp(&src, &raw.copp.0, &p.meters)?;
    if raw.acl.len() > MAX_ACLS {
        return Err(src.at(&raw.acl[MAX_ACLS], format!("more than {MAX_ACLS} ACLs")));
    }
    let cx = Context::new(&p);
    let mut budget = MAX_POLICY_NODES;
    let mut acls = Vec::with_capacity(raw.acl.len());
    for (i, a) in raw.acl.iter().enumerate() {
        let acl = acl(&src, (&cx, &p.meters), i, a, &mut budget)?;
        acls.push(acl);
    }
    p.acls = acls;
    Ok(p)
}

/// Names usable after `$` or `@`: a letter, `_` or `.`, then those or
/// digits.
fn check_name<T, F: Format>(
    src: &Src<'_>,
    v: &Sp<T, F>,
    what: &str,
    name: &str,
) -> Result<(), PolicyError> {
    let mut bytes = name.bytes();
    let id1 = |c: u8| c.is_ascii_alphabetic() || c == b'_' || c == b'.';
    let ok = bytes.next().is_some_and(id1) && bytes.all(|c| id1(c) || c.is_ascii_digit());
    if ok {
        Ok(())
    } else {
        Err(src.at(
            v,
            format!("{what} name {name:?} cannot be named in a match: expected letters, digits, `_` and `.`, not starting with a digit"),
        ))
    }
}

fn ports<F: Format>(src: &Src<'_>, raw: &[RawPort<F>]) -> Result<Vec<Port>, PolicyError> {
    if raw.len() > MAX_PORTS {
        return Err(src.at(&raw[MAX_PORTS].name, format!("more than {MAX_PORTS} ports")));
    }
    let mut names = HashSet::new();
    let mut macs = HashMap::new();
    let mut out = Vec::with_capacity(raw.len());
    let mut explicit = HashSet::new();
    for rp in raw {
        let name = &rp.name.value;
        if name.is_empty() {
            return Err(src.at(&rp.name, "expected a port name, found an empty string"));
        }
        if !names.insert(name.as_str()) {
            return Err(src.at(&rp.name, format!("duplicate port name {name:?}")));
        }
        let mut port = Port {
            name: name.clone(),
            ..Port::default()
        };
        for entry in &rp.addresses {
            addresses(src, entry, &mut port, &mut macs)?;
        }
        port.disabled = rp.enabled == Some(false);
        if let Some(z) = &rp.zone {
            port.zone = u16::try_from(z.value).map_err(|_| {
                src.at(
                    z,
                    format!("zone {} out of range: expected 0..=65535", z.value),
                )
            })?;
            explicit.insert(port.zone);
        }
        out.push(port);
    }
    // Port security, once every port has its addresses: a MAC it names
    // that no port has becomes its port's.
    for (port, rp) in out.iter_mut().zip(raw) {
        for entry in &rp.port_security {
            port_security(src, entry, port, &mut macs)?;
        }
    }
    // Ports without a zone: the smallest unused zone >= 1, in file order.
    let mut next = 1u32;
    for (port, rp) in out.iter_mut().zip(raw) {
        if rp.zone.is_some() {
            continue;
        }
        while next <= 65535 && explicit.contains(&(next as u16)) {
            next += 1;
        }
        if next > 65535 {
            return Err(src.at(&rp.name, "no zone left for this port: give it a `zone`"));
        }
        port.zone = next as u16;
        next += 1;
    }
    Ok(out)
}

/// One `addresses` entry: a MAC, then IP addresses, separated by spaces.
fn addresses<F: Format>(
    src: &Src<'_>,
    entry: &Sp<String, F>,
    port: &mut Port,
    macs: &mut HashMap<[u8; 6], String>,
) -> Result<(), PolicyError> {
    let s = entry.value.as_str();
    let mut tokens = s
        .split_ascii_whitespace()
        .map(|t| (t, t.as_ptr() as usize - s.as_ptr() as usize));
    let Some((mac, at)) = tokens.next() else {
        return Err(src.at(entry, "expected a MAC address, then IP addresses"));
    };
    if matches!(mac, "unknown" | "dynamic" | "router") {
        return Err(src.inside(
            entry,
            at,
            format!(
                "`{mac}` addresses are not supported: expected a MAC address, then IP addresses"
            ),
        ));
    }
    let mac_bytes = mac_token(src, entry, mac, at)?;
    if let Some(other) = macs.insert(mac_bytes, port.name.clone()) {
        return Err(src.inside(
            entry,
            at,
            format!("MAC address {mac} is already port {other:?}'s"),
        ));
    }
    port.macs.push(mac_bytes);
    for (t, at) in tokens {
        let ip: IpAddr = t.parse().map_err(|_| {
            src.inside(
                entry,
                at,
                format!("bad IP address `{t}`: expected an IPv4 or IPv6 address"),
            )
        })?;
        port.ips.push(ip);
    }
    Ok(())
}

/// The MAC `mac` at byte `at` of `entry`'s string, as bytes.
fn mac_token<F: Format>(
    src: &Src<'_>,
    entry: &Sp<String, F>,
    mac: &str,
    at: usize,
) -> Result<[u8; 6], PolicyError> {
    let Some(m) = lang::parse_mac(mac) else {
        return Err(src.inside(
            entry,
            at,
            format!("bad MAC address `{mac}`: expected xx:xx:xx:xx:xx:xx"),
        ));
    };
    let bytes: [u8; 6] = std::array::from_fn(|i| (m >> (40 - 8 * i)) as u8);
    if bytes[0] & 1 != 0 {
        // A group address names no one port: frames to it go to every
        // port (OVN's `eth.mcast` flood outranks every port's own MAC),
        // and none comes from it (OVN drops a group source).
        return Err(src.inside(
            entry,
            at,
            format!(
                "MAC address {mac} is a group (multicast or broadcast) address: a port's address must be unicast"
            ),
        ));
    }
    Ok(bytes)
}

/// One `port_security` entry: a MAC, then IP addresses, each with an
/// optional prefix length or (IPv4) dotted mask, separated by spaces or
/// commas (ovn-nb(5)). A MAC that `addresses` did not give the port
/// becomes one of its MACs, for ctrack tells ports apart by MAC.
fn port_security<F: Format>(
    src: &Src<'_>,
    entry: &Sp<String, F>,
    port: &mut Port,
    macs: &mut HashMap<[u8; 6], String>,
) -> Result<(), PolicyError> {
    let s = entry.value.as_str();
    let mut tokens = s
        .split(|c: char| c.is_ascii_whitespace() || c == ',')
        .filter(|t| !t.is_empty())
        .map(|t| (t, t.as_ptr() as usize - s.as_ptr() as usize));
    let Some((mac, at)) = tokens.next() else {
        return Err(src.at(entry, "expected a MAC address, then IP addresses"));
    };
    if mac.starts_with("VRRPv3") {
        return Err(src.inside(
            entry,
            at,
            "VRRPv3 port security entries are not supported: expected a MAC address, then IP addresses",
        ));
    }
    let mac_bytes = mac_token(src, entry, mac, at)?;
    match macs.get(&mac_bytes) {
        Some(owner) if *owner != port.name => {
            return Err(src.inside(
                entry,
                at,
                format!("MAC address {mac} is already port {owner:?}'s"),
            ));
        }
        Some(_) => {}
        None => {
            macs.insert(mac_bytes, port.name.clone());
            port.macs.push(mac_bytes);
        }
    }
    let mut ips = Vec::new();
    for (t, at) in tokens {
        let ip = secured_ip(t).ok_or_else(|| {
            src.inside(
                entry,
                at,
                format!(
                    "bad IP address `{t}`: expected an IPv4 or IPv6 address, with an optional /LEN (or IPv4 /MASK)"
                ),
            )
        })?;
        ips.push(ip);
    }
    port.security.push(PortSecurity {
        mac: mac_bytes,
        ips,
    });
    Ok(())
}

/// An address of a `port_security` entry, with its prefix length (host
/// bits kept): `a.b.c.d`, `a.b.c.d/N`, `a.b.c.d/m.m.m.m` (a prefix mask),
/// `x::y`, `x::y/N`; an IPv4-mapped IPv6 address is IPv4, as in OVN.
fn secured_ip(t: &str) -> Option<(IpAddr, u8)> {
    let (a, len) = match t.split_once('/') {
        Some((a, l)) => (a, Some(l)),
        None => (t, None),
    };
    let mut addr: IpAddr = a.parse().ok()?;
    let mut mapped = false;
    if let IpAddr::V6(v6) = addr
        && let Some(v4) = v6.to_ipv4_mapped()
    {
        addr = IpAddr::V4(v4);
        mapped = true;
    }
    let bits: u8 = if addr.is_ipv4() { 32 } else { 128 };
    let decimal = |l: &str| match l.parse::<u8>() {
        Ok(n) if !l.is_empty() && l.bytes().all(|b| b.is_ascii_digit()) => Some(n),
        _ => None,
    };
    let len = match len {
        None => bits,
        // A mapped address's length counts its 96 leading bits.
        Some(l) if mapped => decimal(l)?.checked_sub(96).filter(|n| *n <= 32)?,
        Some(l) => match decimal(l) {
            Some(n) if n <= bits => n,
            Some(_) => return None,
            None if addr.is_ipv4() => {
                let m = u32::from(l.parse::<std::net::Ipv4Addr>().ok()?);
                // A prefix mask: ones, then zeros.
                if m.leading_ones() + m.trailing_zeros() != 32 {
                    return None;
                }
                m.leading_ones() as u8
            }
            None => return None,
        },
    };
    Some((addr, len))
}

/// One address set member: an address, or an address and prefix length./// One address set member: an address, or an address and prefix length.
fn prefix<F: Format>(src: &Src<'_>, e: &Sp<String, F>) -> Result<Prefix, PolicyError> {
    let s = e.value.trim();
    let (a, len) = match s.split_once('/') {
        Some((a, l)) => (a, Some(l)),
        None => (s, None),
    };
    let bad = || {
        src.at(e, format!("bad address set member {s:?}: expected an IP address or prefix, as 10.0.0.0/24 or fd00::/64"))
    };
    let addr: IpAddr = a.parse().map_err(|_| bad())?;
    let bits: u8 = if addr.is_ipv4() { 32 } else { 128 };
    let len = match len {
        None => bits,
        Some(l) => match l.parse::<u8>() {
            Ok(n) if n <= bits && (n == 0 || !l.starts_with('0')) => n,
            _ => return Err(bad()),
        },
    };
    // Host bits are cleared, as OVN's lexer does.
    let addr = match addr {
        IpAddr::V4(v) => {
            let m = u32::MAX.checked_shl(u32::from(32 - len)).unwrap_or(0);
            IpAddr::V4((u32::from(v) & m).into())
        }
        IpAddr::V6(v) => {
            let m = u128::MAX.checked_shl(u32::from(128 - len)).unwrap_or(0);
            IpAddr::V6((u128::from(v) & m).into())
        }
    };
    Ok(Prefix { addr, len })
}

type RawGroups<F> = BTreeMap<String, Sp<Vec<Sp<String, F>>, F>>;

fn groups<F: Format>(
    src: &Src<'_>,
    raw: &RawGroups<F>,
    p: &Policy,
) -> Result<BTreeMap<String, Vec<usize>>, PolicyError> {
    let index: HashMap<&str, usize> = p
        .ports
        .iter()
        .enumerate()
        .map(|(i, p)| (p.name.as_str(), i))
        .collect();
    let mut out = BTreeMap::new();
    for (name, members) in raw {
        check_name(src, members, "port group", name)?;
        for suffix in ["_ip4", "_ip6"] {
            if p.address_sets.contains_key(&format!("{name}{suffix}")) {
                return Err(src.at(
                    members,
                    format!("port group {name:?} would be hidden: address set {name}{suffix} takes the name `${name}{suffix}` it derives"),
                ));
            }
        }
        let mut ports = Vec::with_capacity(members.value.len());
        for m in &members.value {
            let Some(&i) = index.get(m.value.as_str()) else {
                return Err(src.at(
                    m,
                    format!("unknown port {:?} in port group {name:?}", m.value),
                ));
            };
            if ports.contains(&i) {
                return Err(src.at(
                    m,
                    format!("port {:?} is twice in port group {name:?}", m.value),
                ));
            }
            ports.push(i);
        }
        out.insert(name.clone(), ports);
    }
    Ok(out)
}

fn int_in<F: Format>(
    src: &Src<'_>,
    v: &Sp<i64, F>,
    what: &str,
    max: i64,
) -> Result<i64, PolicyError> {
    if (0..=max).contains(&v.value) {
        Ok(v.value)
    } else {
        Err(src.at(
            v,
            format!("{what} {} out of range: expected 0..={max}", v.value),
        ))
    }
}

fn acl<F: Format>(
    src: &Src<'_>,
    (cx, meters): (&Context<'_>, &BTreeMap<String, Meter>),
    index: usize,
    sp: &Sp<RawAcl<F>, F>,
    budget: &mut usize,
) -> Result<Acl, PolicyError> {
    let a = &sp.value;
    let name = match &a.name {
        Some(n) => {
            let s = &n.value;
            if s.len() > MAX_ACL_NAME {
                return Err(src.at(
                    n,
                    format!("ACL name longer than {MAX_ACL_NAME} bytes (OVN's limit)"),
                ));
            }
            if s.strip_prefix("acl#")
                .is_some_and(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
            {
                return Err(src.at(
                    n,
                    format!("ACL name {s:?} is reserved: `acl#N` names the unnamed ACL N"),
                ));
            }
            s.clone()
        }
        None => format!("acl#{index}"),
    };
    let direction = match a.direction.value.as_str() {
        "from-lport" => Direction::FromLport,
        "to-lport" => Direction::ToLport,
        _ => return Err(src.at(&a.direction, "expected \"from-lport\" or \"to-lport\"")),
    };
    let action = match a.action.value.as_str() {
        "allow" => AclAction::Allow,
        "allow-related" => AclAction::AllowRelated,
        "allow-stateless" => AclAction::AllowStateless,
        "drop" => AclAction::Drop,
        "reject" => AclAction::Reject,
        "pass" => AclAction::Pass,
        _ => return Err(src.at(&a.action, "expected \"allow\", \"allow-related\", \"allow-stateless\", \"drop\", \"reject\" or \"pass\"")),
    };
    let priority = int_in(src, &a.priority, "priority", 32767)? as u16;
    let tier = match &a.tier {
        Some(t) => int_in(src, t, "tier", 3)? as u8,
        None => 0,
    };
    let label = match &a.label {
        Some(l) => Some(int_in(src, l, "label", i64::from(u32::MAX))? as u32),
        None => None,
    };
    let severity = match &a.severity {
        None => Severity::Info,
        Some(s) => *Severity::ALL
            .iter()
            .find(|l| l.name() == s.value)
            .ok_or_else(|| {
                src.at(
                    s,
                    "expected \"alert\", \"warning\", \"notice\", \"info\" or \"debug\"",
                )
            })?,
    };
    let meter = match &a.meter {
        None => None,
        Some(m) if meters.contains_key(&m.value) => Some(m.value.clone()),
        Some(m) => return Err(src.at(m, unknown_meter(&m.value, meters))),
    };
    let (nat, alg) = ct_options(src, a, action)?;
    let expr = match_expr(src, cx, &a.match_, budget)?;
    Ok(Acl {
        index,
        name,
        direction,
        priority,
        tier,
        action,
        label,
        log: a.log.unwrap_or(false),
        severity,
        meter,
        log_related: a.log_related.unwrap_or(false),
        persist_established: a.persist_established.unwrap_or(false),
        nat,
        alg,
        match_text: a.match_.value.clone(),
        expr,
        span: line_col(src.text, sp.range(src.text).0),
    })
}

/// One `[meters.NAME]`: OVN's `Meter` and its one band, checked as
/// OVN's schema checks them (a rate of at least 1, 32-bit rate and burst).
fn meter<F: Format>(
    src: &Src<'_>,
    name: &str,
    sp: &Sp<RawMeter<F>, F>,
) -> Result<Meter, PolicyError> {
    let m = &sp.value;
    if name.is_empty() {
        return Err(src.at(sp, "expected a meter name, found an empty string"));
    }
    let unit = match &m.unit {
        None => MeterUnit::Pktps,
        Some(u) => match u.value.as_str() {
            "pktps" => MeterUnit::Pktps,
            "kbps" => MeterUnit::Kbps,
            _ => return Err(src.at(u, "expected \"pktps\" or \"kbps\"")),
        },
    };
    let max = i64::from(u32::MAX);
    if !(1..=max).contains(&m.rate.value) {
        return Err(src.at(
            &m.rate,
            format!("rate {} out of range: expected 1..={max}", m.rate.value),
        ));
    }
    let rate = m.rate.value as u32;
    let burst = match &m.burst {
        Some(b) => int_in(src, b, "burst", max)? as u32,
        None => 0,
    };
    Ok(Meter {
        name: name.to_string(),
        unit,
        rate,
        burst: if burst == 0 { rate } else { burst },
        fair: m.fair.unwrap_or(false),
    })
}

/// `[copp]`: OVN's `Copp` meters by key. A logical switch's ACLs use
/// one of its keys, `reject`; OVN's others limit what its router and
/// controller answer (ARP, DHCP, DNS, BFD...), which ctrack has not.
fn copp<F: Format>(
    src: &Src<'_>,
    raw: &BTreeMap<String, Sp<String, F>>,
    meters: &BTreeMap<String, Meter>,
) -> Result<Copp, PolicyError> {
    let mut c = Copp::default();
    for (key, m) in raw {
        if key != "reject" {
            return Err(src.at(
                m,
                format!(
                    "copp key {key:?}: expected \"reject\" (the one key of OVN's Copp that a switch's ACLs use)"
                ),
            ));
        }
        if !meters.contains_key(&m.value) {
            return Err(src.at(m, unknown_meter(&m.value, meters)));
        }
        c.reject = Some(m.value.clone());
    }
    Ok(c)
}

fn unknown_meter(name: &str, meters: &BTreeMap<String, Meter>) -> String {
    if meters.is_empty() {
        format!("unknown meter {name:?}: the policy has no [meters] table")
    } else {
        let known: Vec<&str> = meters.keys().map(String::as_str).collect();
        format!(
            "unknown meter {name:?}: expected one of {}",
            known.join(", ")
        )
    }
}

type CtOptions = (Option<Nat>, Option<ctrack_core::action::Alg>);

/// `nat` and `alg`, through ctrack-core's action parser.
fn ct_options<F: Format>(
    src: &Src<'_>,
    a: &RawAcl<F>,
    action: AclAction,
) -> Result<CtOptions, PolicyError> {
    let mut out = (None, None);
    for (v, key) in [(&a.nat, "nat"), (&a.alg, "alg")] {
        let Some(v) = v else { continue };
        if action != AclAction::AllowRelated {
            return Err(src.at(v, format!("`{key}` is only for allow-related ACLs")));
        }
        let s = v.value.trim();
        if s.is_empty() || s.contains(['(', ')']) || (key == "alg" && s.contains(',')) {
            return Err(src.at(v, bad_ct(key, "")));
        }
        let text = if key == "nat" {
            format!("commit,nat({s})")
        } else {
            format!("commit,alg={s}")
        };
        let ct: CtAction = text
            .parse()
            .map_err(|e| src.at(v, bad_ct(key, &format!(": {e}"))))?;
        let only = CtAction {
            nat: ct.nat,
            alg: ct.alg,
            ..CtAction::commit(0)
        };
        if ct != only {
            return Err(src.at(v, bad_ct(key, "")));
        }
        if key == "nat" {
            out.0 = ct.nat;
        } else {
            out.1 = ct.alg;
        }
    }
    Ok(out)
}

fn bad_ct(key: &str, why: &str) -> String {
    if key == "nat" {
        format!(
            "bad nat{why}: expected e.g. \"src=198.51.100.1:1024-65535\", \"dst=10.0.0.8:8080\", \"src=10.0.0.1-10.0.0.9,random\""
        )
    } else {
        format!("bad alg{why}: expected \"ftp\" or \"tftp\"")
    }
}

fn match_expr<F: Format>(
    src: &Src<'_>,
    cx: &Context<'_>,
    m: &Sp<String, F>,
    budget: &mut usize,
) -> Result<crate::expr::Expr, PolicyError> {
    let limit = MAX_NODES.min(*budget);
    let e = cx.parse_bounded(&m.value, limit).map_err(|e| {
        let mut msg = e.message;
        if limit < MAX_NODES && msg.contains("nodes") {
            msg.push_str(&format!(" (all the matches of a policy together resolve to at most {MAX_POLICY_NODES} nodes)"));
        }
        src.inside(m, e.offset, msg)
    })?;
    *budget = budget.saturating_sub(e.size());
    Ok(e)
}
