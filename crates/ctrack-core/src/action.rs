//! The `ct` action a caller gives with every packet, and its textual form,
//! the one Open vSwitch users write inside `ct(...)`:
//!
//! ```text
//! commit,zone=5,mark=0x1/0xff,label=0x2,nat(src=10.0.0.1-10.0.0.9:20000-20100,random),alg=ftp
//! nat
//! ct(commit,nat(dst=[fd00::8]:8080),alg=tftp)
//! ```
//!
//! Parsing errors name the offending token.

use core::fmt;
use core::num::{IntErrorKind, ParseIntError};
use core::str::FromStr;
use std::net::IpAddr;

use crate::key::Zone;

/// A value and the mask of the bits to set (`mark=0x1/0xff`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Masked<T> {
    /// Bits to write.
    pub value: T,
    /// Which bits to write.
    pub mask: T,
}

impl<T> Masked<T> {
    /// `value` under `mask`.
    pub fn new(value: T, mask: T) -> Self {
        Masked { value, mask }
    }
}

/// Which side a translation rewrites.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NatKind {
    /// The source of the original direction (and the destination of
    /// replies).
    Src,
    /// The destination of the original direction (and the source of
    /// replies).
    Dst,
}

/// How a translation picks among the addresses and ports of its range.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum NatMode {
    /// Start from a hash of the connection's addresses and ports (the
    /// default: the same connection maps the same way).
    #[default]
    Hash,
    /// Start from a random point.
    Random,
    /// The same original address always maps to the same address (the port
    /// still varies).
    Persistent,
}

/// An address and port range: addresses inclusive, ports inclusive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct NatRange {
    /// Which side.
    pub kind: NatKind,
    /// Lowest and highest address; `None` keeps the address (port-only
    /// translation).
    pub addrs: Option<(IpAddr, IpAddr)>,
    /// Lowest and highest port; `None` keeps the port when it is free, as
    /// Open vSwitch and Linux do, and picks another otherwise.
    pub ports: Option<(u16, u16)>,
}

/// `nat` in a `ct` action.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Nat {
    /// The translation of new connections; `None` for bare `nat`: apply an
    /// existing connection's translation, set up none.
    pub range: Option<NatRange>,
    /// How ports (and addresses) are picked.
    pub mode: NatMode,
}

/// An application-layer gateway for the control connection of a protocol
/// that opens further connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Alg {
    /// FTP: PORT, EPRT, and the 227 and 229 replies.
    Ftp,
    /// TFTP: a request to port 69 expects the server's answer from another
    /// port.
    Tftp,
}

impl Alg {
    /// Its name in actions and dumps.
    pub fn name(self) -> &'static str {
        match self {
            Alg::Ftp => "ftp",
            Alg::Tftp => "tftp",
        }
    }

    /// The transport protocol of the gateway's control connection.
    pub fn proto(self) -> u8 {
        match self {
            Alg::Ftp => ctrack_wire::ip_proto::TCP,
            Alg::Tftp => ctrack_wire::ip_proto::UDP,
        }
    }
}

/// What the caller asks of the tracker for one packet: the `ct` action.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CtAction {
    /// Zone to track in.
    pub zone: Zone,
    /// Store a new connection (else only look up).
    pub commit: bool,
    /// With `commit`: a packet that finds its connection in the reply
    /// direction ends that connection and starts one in its own direction.
    pub force: bool,
    /// Set bits of the connection's mark.
    pub mark: Option<Masked<u32>>,
    /// Set bits of the connection's label.
    pub label: Option<Masked<u128>>,
    /// Address translation: set up for new connections (with a range) and
    /// applied to the packets of translated connections.
    pub nat: Option<Nat>,
    /// The gateway of a new connection's protocol.
    pub alg: Option<Alg>,
    /// With `commit`: the word to keep with a connection this packet
    /// creates (stored as it is created; see [`crate::Verdict::word`]).
    /// `None` stores 0, or, for a connection an expectation lets in, its
    /// control connection's word. Not part of the text form: `Display`
    /// leaves it out and `FromStr` gives `None`.
    pub word: Option<u64>,
    /// With `nat` and without `commit`: a `+new` packet of an existing
    /// connection (a retransmitted SYN, a later packet of a flow nobody
    /// answers) is left as it arrived instead of translated. A firewall
    /// looks packets up this way so that the ACLs meet a packet it must
    /// classify as the packet came, before the NAT, as OVN's ACL stages do;
    /// the commit that follows translates it. Not part of the text form.
    pub untranslated_new: bool,
    /// A packet of an existing connection that is not `+new` gets no
    /// label in its verdict ([`crate::Verdict::label`] 0): a connection
    /// with a label keeps it in its extension, one more dependent load a
    /// packet, which a caller that does not read the labels of those
    /// packets (the firewall's lookups) leaves out. A `+new` packet's
    /// verdict, a commit's and an ICMP error's have it still. Not part of
    /// the text form.
    pub skip_label: bool,
}

impl CtAction {
    /// Whether a tracked packet with verdict state `state` is translated
    /// (given a connection that translates).
    #[inline]
    pub(crate) fn translates(&self, state: crate::verdict::CtState) -> bool {
        self.nat.is_some()
            && !(self.untranslated_new
                && !self.commit
                && state.contains(crate::verdict::CtState::NEW))
    }
}

impl CtAction {
    /// `ct(commit,zone=zone)`.
    pub fn commit(zone: Zone) -> CtAction {
        CtAction {
            zone,
            commit: true,
            ..CtAction::default()
        }
    }

    /// `ct(zone=zone)`: look up only.
    pub fn lookup(zone: Zone) -> CtAction {
        CtAction {
            zone,
            ..CtAction::default()
        }
    }
}

/// Why a `ct` action did not parse: the token and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActionError {
    /// The offending token.
    pub token: String,
    /// What is wrong.
    pub reason: String,
}

impl fmt::Display for ActionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "bad ct action at `{}`: {}", self.token, self.reason)
    }
}

impl std::error::Error for ActionError {}

fn err(token: &str, reason: impl Into<String>) -> ActionError {
    ActionError {
        token: token.to_string(),
        reason: reason.into(),
    }
}

/// Splits at commas outside parentheses and brackets.
fn split_top(s: &str) -> Result<Vec<&str>, ActionError> {
    let mut out = Vec::new();
    let (mut depth, mut start) = (0i32, 0);
    for (i, c) in s.char_indices() {
        match c {
            '(' | '[' => depth += 1,
            ')' | ']' => {
                depth -= 1;
                if depth < 0 {
                    return Err(err(&s[start..=i], "unbalanced `)` or `]`"));
                }
            }
            ',' if depth == 0 => {
                out.push(s[start..i].trim());
                start = i + 1;
            }
            _ => {}
        }
    }
    if depth != 0 {
        return Err(err(&s[start..], "unbalanced `(` or `[`"));
    }
    out.push(s[start..].trim());
    Ok(out)
}

/// A number, decimal or `0x` hexadecimal.
fn number(v: &str) -> Result<u128, ParseIntError> {
    if let Some(h) = v.strip_prefix("0x").or_else(|| v.strip_prefix("0X")) {
        u128::from_str_radix(h, 16)
    } else {
        v.parse()
    }
}

fn parse_u128(tok: &str, v: &str) -> Result<u128, ActionError> {
    number(v).map_err(|_| err(tok, format!("`{v}` is not a number")))
}

fn parse_masked(tok: &str, v: &str, bits: u32) -> Result<Masked<u128>, ActionError> {
    let all = if bits == 128 {
        u128::MAX
    } else {
        (1u128 << bits) - 1
    };
    // A number wider than the field, even wider than 128 bits, says so.
    let part = |p: &str| match number(p) {
        Ok(n) if n <= all => Ok(n),
        Err(e) if *e.kind() != IntErrorKind::PosOverflow => {
            Err(err(tok, format!("`{p}` is not a number")))
        }
        _ => Err(err(tok, format!("`{p}` is too wide ({bits} bits at most)"))),
    };
    let (value, mask) = match v.split_once('/') {
        Some((a, b)) => (part(a)?, part(b)?),
        None => (part(v)?, all),
    };
    Ok(Masked::new(value & mask, mask))
}

/// An address, IPv6 in brackets or not.
fn parse_addr(tok: &str, v: &str) -> Result<IpAddr, ActionError> {
    let v = v
        .strip_prefix('[')
        .and_then(|x| x.strip_suffix(']'))
        .unwrap_or(v);
    v.parse()
        .map_err(|_| err(tok, format!("`{v}` is not an IP address")))
}

fn parse_port(tok: &str, v: &str) -> Result<u16, ActionError> {
    v.parse()
        .map_err(|_| err(tok, format!("`{v}` is not a port")))
}

/// Splits `ADDR[-ADDR][:PORT[-PORT]]`, IPv6 addresses in brackets.
type Range<'a> = (Option<(String, Option<String>)>, Option<&'a str>);

fn split_range<'a>(tok: &str, v: &'a str) -> Result<Range<'a>, ActionError> {
    // Port-only: `:1000-2000` (but `::1`, `::` and `::ffff:10.0.0.1`
    // are IPv6 addresses, as Open vSwitch reads them).
    if let Some(p) = v.strip_prefix(':')
        && !p.starts_with(':')
    {
        return Ok((None, Some(p)));
    }
    let (addrs, ports) = if v.starts_with('[') {
        // [a]-[b]:p or [a]:p
        let mut rest = v;
        let mut parts = Vec::new();
        loop {
            let end = rest.find(']').ok_or_else(|| err(tok, "`[` without `]`"))?;
            parts.push(rest[..=end].to_string());
            rest = &rest[end + 1..];
            match rest.strip_prefix('-') {
                Some(r) if r.starts_with('[') => rest = r,
                _ => break,
            }
        }
        let ports = match rest {
            "" => None,
            r => Some(
                r.strip_prefix(':')
                    .ok_or_else(|| err(tok, "expected `:` before the ports"))?,
            ),
        };
        let lo = parts[0].clone();
        let hi = parts.get(1).cloned();
        if parts.len() > 2 {
            return Err(err(tok, "more than two addresses"));
        }
        (Some((lo, hi)), ports)
    } else {
        // Several colons: IPv6 addresses without brackets, and no ports
        // (as Open vSwitch reads `nat(src=fd00::1-fd00::9)`).
        let (a, p) = match v.split_once(':') {
            Some(_) if v.matches(':').count() > 1 => (v, None),
            Some((a, p)) => (a, Some(p)),
            None => (v, None),
        };
        let (lo, hi) = match a.split_once('-') {
            Some((lo, hi)) => (lo.to_string(), Some(hi.to_string())),
            None => (a.to_string(), None),
        };
        (Some((lo, hi)), p)
    };
    Ok((addrs, ports))
}

fn parse_nat(tok: &str, inner: Option<&str>) -> Result<Nat, ActionError> {
    let Some(inner) = inner else {
        return Ok(Nat {
            range: None,
            mode: NatMode::Hash,
        });
    };
    let mut range = None;
    let mut mode = None;
    for part in split_top(inner)? {
        match part {
            "random" | "hash" | "persistent" => {
                if mode.is_some() {
                    return Err(err(part, "more than one of random, hash, persistent"));
                }
                mode = Some(match part {
                    "random" => NatMode::Random,
                    "hash" => NatMode::Hash,
                    _ => NatMode::Persistent,
                });
            }
            p if p.starts_with("src=") || p.starts_with("dst=") => {
                if range.is_some() {
                    return Err(err(p, "one of src= or dst= only"));
                }
                let kind = if p.starts_with("src=") {
                    NatKind::Src
                } else {
                    NatKind::Dst
                };
                let (addrs, ports) = split_range(p, &p[4..])?;
                let addrs = match addrs {
                    Some((lo, hi)) => {
                        let lo = parse_addr(p, &lo)?;
                        let hi = match hi {
                            Some(h) => parse_addr(p, &h)?,
                            None => lo,
                        };
                        let ok = match (lo, hi) {
                            (IpAddr::V4(a), IpAddr::V4(b)) => a <= b,
                            (IpAddr::V6(a), IpAddr::V6(b)) => a <= b,
                            _ => return Err(err(p, "addresses of different families")),
                        };
                        if !ok {
                            return Err(err(p, "address range runs backwards"));
                        }
                        Some((lo, hi))
                    }
                    None => None,
                };
                let ports = match ports {
                    Some(pr) => {
                        let (lo, hi) = match pr.split_once('-') {
                            Some((a, b)) => (parse_port(p, a)?, parse_port(p, b)?),
                            None => {
                                let x = parse_port(p, pr)?;
                                (x, x)
                            }
                        };
                        if lo == 0 || lo > hi {
                            return Err(err(p, "port range must be 1-65535 and not run backwards"));
                        }
                        Some((lo, hi))
                    }
                    None => None,
                };
                if addrs.is_none() && ports.is_none() {
                    return Err(err(p, "no address or port"));
                }
                range = Some(NatRange { kind, addrs, ports });
            }
            "" => return Err(err(tok, "empty argument")),
            other => {
                return Err(err(
                    other,
                    "expected src=, dst=, random, hash or persistent",
                ));
            }
        }
    }
    if range.is_none() && mode.is_some() {
        return Err(err(tok, "a mode without src= or dst="));
    }
    Ok(Nat {
        range,
        mode: mode.unwrap_or_default(),
    })
}

impl FromStr for CtAction {
    type Err = ActionError;

    fn from_str(s: &str) -> Result<CtAction, ActionError> {
        let s = s.trim();
        let body = match s.strip_prefix("ct(") {
            Some(b) => b
                .strip_suffix(')')
                .ok_or_else(|| err(s, "`ct(` without `)`"))?,
            None => s,
        };
        let mut a = CtAction::default();
        if body.is_empty() {
            return Ok(a);
        }
        let mut seen = std::collections::HashSet::new();
        for tok in split_top(body)? {
            let (name, value) = match tok.split_once('=') {
                Some((n, v)) if !n.contains('(') => (n, Some(v)),
                _ => (tok, None),
            };
            let key = name.split('(').next().unwrap_or(name);
            if !seen.insert(key.to_string()) {
                return Err(err(tok, "given twice"));
            }
            match (name, value) {
                ("commit", None) => a.commit = true,
                ("force", None) => a.force = true,
                ("zone", Some(v)) => {
                    a.zone = parse_u128(tok, v)?
                        .try_into()
                        .map_err(|_| err(tok, "zones are 0 to 65535"))?;
                }
                ("mark", Some(v)) => {
                    let m = parse_masked(tok, v, 32)?;
                    a.mark = Some(Masked::new(m.value as u32, m.mask as u32));
                }
                ("label", Some(v)) => a.label = Some(parse_masked(tok, v, 128)?),
                ("alg", Some(v)) => {
                    a.alg = Some(match v {
                        "ftp" => Alg::Ftp,
                        "tftp" => Alg::Tftp,
                        _ => return Err(err(tok, "alg is ftp or tftp")),
                    })
                }
                ("nat", None) => a.nat = Some(parse_nat(tok, None)?),
                (n, None) if n.starts_with("nat(") => {
                    let inner = n[4..]
                        .strip_suffix(')')
                        .ok_or_else(|| err(tok, "`nat(` without `)`"))?;
                    a.nat = Some(parse_nat(tok, Some(inner))?);
                }
                ("commit" | "force" | "nat", Some(_)) => {
                    return Err(err(tok, "takes no value"));
                }
                ("zone" | "mark" | "label" | "alg", None) => {
                    return Err(err(tok, "needs a value"));
                }
                _ => {
                    return Err(err(
                        tok,
                        "expected commit, force, zone=, mark=, label=, nat or nat(...), alg=",
                    ));
                }
            }
        }
        if a.force && !a.commit {
            return Err(err("force", "needs commit"));
        }
        if a.alg.is_some() && !a.commit {
            return Err(err("alg", "needs commit"));
        }
        if a.nat.is_some_and(|n| n.range.is_some()) && !a.commit {
            return Err(err("nat", "a translation range needs commit"));
        }
        // As Open vSwitch refuses a `ct` action that sets `ct_mark` or
        // `ct_label` without committing (and Linux sets them only on a
        // commit).
        if a.mark.is_some() && !a.commit {
            return Err(err("mark", "needs commit"));
        }
        if a.label.is_some() && !a.commit {
            return Err(err("label", "needs commit"));
        }
        Ok(a)
    }
}

impl fmt::Display for NatRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self.kind {
            NatKind::Src => "src=",
            NatKind::Dst => "dst=",
        })?;
        let addr = |f: &mut fmt::Formatter<'_>, a: IpAddr| match a {
            IpAddr::V4(v) => write!(f, "{v}"),
            IpAddr::V6(v) => write!(f, "[{v}]"),
        };
        if let Some((lo, hi)) = self.addrs {
            addr(f, lo)?;
            if hi != lo {
                f.write_str("-")?;
                addr(f, hi)?;
            }
        }
        if let Some((lo, hi)) = self.ports {
            write!(f, ":{lo}")?;
            if hi != lo {
                write!(f, "-{hi}")?;
            }
        }
        Ok(())
    }
}

impl fmt::Display for Nat {
    /// What goes inside `nat(...)` (and in a policy ACL's `nat` key): the
    /// range, then the mode unless it is the default (`hash`); empty for a
    /// bare `nat`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Some(r) = self.range else {
            return Ok(());
        };
        write!(f, "{r}")?;
        f.write_str(match self.mode {
            NatMode::Hash => "",
            NatMode::Random => ",random",
            NatMode::Persistent => ",persistent",
        })
    }
}

impl fmt::Display for CtAction {
    /// The textual form, which parses back to the same action but for
    /// [`CtAction::word`] and [`CtAction::untranslated_new`], which have
    /// none (as in Open vSwitch's `ct`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts: Vec<String> = Vec::new();
        if self.commit {
            parts.push("commit".into());
        }
        if self.force {
            parts.push("force".into());
        }
        if self.zone != 0 {
            parts.push(format!("zone={}", self.zone));
        }
        if let Some(m) = self.mark {
            parts.push(format!("mark={:#x}/{:#x}", m.value, m.mask));
        }
        if let Some(l) = self.label {
            parts.push(format!("label={:#x}/{:#x}", l.value, l.mask));
        }
        if let Some(n) = self.nat {
            match n.range {
                None => parts.push("nat".into()),
                Some(_) => parts.push(format!("nat({n})")),
            }
        }
        if let Some(a) = self.alg {
            parts.push(
                match a {
                    Alg::Ftp => "alg=ftp",
                    Alg::Tftp => "alg=tftp",
                }
                .into(),
            );
        }
        f.write_str(&parts.join(","))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> CtAction {
        s.parse().unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    #[test]
    fn the_full_example() {
        let a = p(
            "commit,zone=5,mark=0x1/0xff,label=0x2,nat(src=10.0.0.1-10.0.0.9:20000-20100,random),alg=ftp",
        );
        assert!(a.commit && !a.force);
        assert_eq!(a.zone, 5);
        assert_eq!(a.mark, Some(Masked::new(1, 0xff)));
        assert_eq!(a.label, Some(Masked::new(2, u128::MAX)));
        assert_eq!(a.alg, Some(Alg::Ftp));
        let n = a.nat.unwrap();
        assert_eq!(n.mode, NatMode::Random);
        let r = n.range.unwrap();
        assert_eq!(r.kind, NatKind::Src);
        assert_eq!(
            r.addrs,
            Some(("10.0.0.1".parse().unwrap(), "10.0.0.9".parse().unwrap()))
        );
        assert_eq!(r.ports, Some((20000, 20100)));
        // Display round-trips.
        assert_eq!(p(&a.to_string()), a);
        // The translation alone prints as it is written inside `nat(...)`.
        assert_eq!(n.to_string(), "src=10.0.0.1-10.0.0.9:20000-20100,random");
        assert_eq!(
            p("commit,nat(dst=[fd00::1]:80)").nat.unwrap().to_string(),
            "dst=[fd00::1]:80"
        );
        assert_eq!(p("nat").nat.unwrap().to_string(), "");
    }

    #[test]
    fn the_word_has_no_text_form() {
        let a = CtAction {
            word: Some(0x1234),
            ..CtAction::commit(3)
        };
        assert_eq!(a.to_string(), "commit,zone=3");
        let back = p(&a.to_string());
        assert_eq!(back.word, None);
        assert_eq!(back, CtAction { word: None, ..a });
        let u = CtAction {
            untranslated_new: true,
            ..p("nat")
        };
        assert_eq!(u.to_string().parse::<CtAction>().unwrap(), p("nat"));
        assert_eq!(p("commit").word, None);
    }

    #[test]
    fn other_forms() {
        assert_eq!(
            p("nat").nat,
            Some(Nat {
                range: None,
                mode: NatMode::Hash
            })
        );
        assert_eq!(p("ct(commit)"), CtAction::commit(0));
        assert_eq!(p("commit,zone=7"), CtAction::commit(7));
        assert_eq!(p("zone=7"), CtAction::lookup(7));
        assert_eq!(p(""), CtAction::default());
        let a = p("ct(commit,nat(dst=[fd00::8]:8080),alg=tftp)");
        let r = a.nat.unwrap().range.unwrap();
        assert_eq!(r.kind, NatKind::Dst);
        assert_eq!(r.addrs.unwrap().0, "fd00::8".parse::<IpAddr>().unwrap());
        assert_eq!(r.ports, Some((8080, 8080)));
        let a = p("commit,nat(src=[fd00::1]-[fd00::9],persistent)");
        assert_eq!(
            a.nat.unwrap().range.unwrap().addrs.unwrap().1,
            "fd00::9".parse::<IpAddr>().unwrap()
        );
        assert_eq!(a.nat.unwrap().mode, NatMode::Persistent);
        let a = p("commit,nat(src=:1024-2047)");
        assert_eq!(a.nat.unwrap().range.unwrap().addrs, None);
        // Addresses that start with `::`, brackets or not, are not ports.
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        for (s, lo, hi) in [
            ("commit,nat(src=::1-::2)", "::1", "::2"),
            ("commit,nat(src=::)", "::", "::"),
            (
                "commit,nat(dst=::ffff:10.0.0.1)",
                "::ffff:10.0.0.1",
                "::ffff:10.0.0.1",
            ),
            ("commit,nat(src=[::1]-[::9]:80)", "::1", "::9"),
        ] {
            let r = p(s).nat.unwrap().range.unwrap();
            assert_eq!(r.addrs, Some((ip(lo), ip(hi))), "{s}");
        }
        for s in [
            "commit,nat(src=10.0.0.1-10.0.0.9:20000-20100,random)",
            "commit,force,zone=65535,mark=0xffffffff/0xf,label=0x1/0x3",
            "commit,nat(dst=[fd00::1]-[fd00::2]:1-2,persistent)",
            "nat",
        ] {
            let a = p(s);
            assert_eq!(p(&a.to_string()), a, "{s}");
        }
    }

    #[test]
    fn numbers_too_wide_say_so() {
        let wide = format!("commit,label=0x1{}", "0".repeat(32));
        let e = wide.parse::<CtAction>().unwrap_err();
        assert!(
            e.to_string().contains("is too wide (128 bits at most)"),
            "{e}"
        );
        let e = "commit,label=0x1/0x1ffffffffffffffffffffffffffffffff"
            .parse::<CtAction>()
            .unwrap_err();
        assert!(e.to_string().contains("too wide (128 bits at most)"), "{e}");
        let e = "commit,mark=0x100000000".parse::<CtAction>().unwrap_err();
        assert!(e.to_string().contains("too wide (32 bits at most)"), "{e}");
        let e = "commit,label=0xzz".parse::<CtAction>().unwrap_err();
        assert!(e.to_string().contains("is not a number"), "{e}");
        // 128 bits exactly fit.
        let max = format!("commit,label=0x{}", "f".repeat(32));
        assert_eq!(
            max.parse::<CtAction>().unwrap().label.unwrap().value,
            u128::MAX
        );
    }

    #[test]
    fn errors_name_the_token() {
        let cases = [
            ("commit,zone=70000", "zone=70000"),
            ("commit,bogus", "bogus"),
            ("commit,mark=0x1/zz", "mark=0x1/zz"),
            ("commit,nat(src=10.0.0.9-10.0.0.1)", "src=10.0.0.9-10.0.0.1"),
            ("commit,nat(src=10.0.0.1-fd00::1)", "src=10.0.0.1-fd00::1"),
            ("commit,nat(src=10.0.0.1:0)", "src=10.0.0.1:0"),
            ("commit,nat(src=10.0.0.1,sideways)", "sideways"),
            ("commit,alg=http", "alg=http"),
            ("commit,commit", "commit"),
            ("force", "force"),
            ("mark=7", "mark"),
            ("zone=3,label=0x1/0x1", "label"),
            ("nat(src=10.0.0.1)", "nat"),
            ("commit,nat(src=10.0.0.1", "nat(src=10.0.0.1"),
            (
                "commit,label=0x1/0x1ffffffffffffffffffffffffffffffff",
                "label=0x1/0x1ffffffffffffffffffffffffffffffff",
            ),
        ];
        for (s, tok) in cases {
            let e = s.parse::<CtAction>().unwrap_err();
            assert_eq!(e.token, tok, "{s}: {e}");
            assert!(e.to_string().contains(tok));
        }
    }

    /// Each kind of mistake gets its own reason (mutation round 43: the
    /// reasons of several were not tested, and a token shorter than
    /// `nat(` taken for one would have panicked).
    #[test]
    fn errors_say_what_is_wrong() {
        let cases = [
            ("commit=1", "commit=1", "takes no value"),
            ("commit,nat=1", "nat=1", "takes no value"),
            ("commit,zone", "zone", "needs a value"),
            ("commit,alg", "alg", "needs a value"),
            ("xy", "xy", "expected commit, force, zone="),
            ("commit,nat(ab)", "ab", "expected src=, dst=, random"),
            ("commit,nat()", "nat()", "empty argument"),
            (
                "commit,nat(src=[fd00::1]-fd00::9)",
                "src=[fd00::1]-fd00::9",
                "expected `:` before the ports",
            ),
            (
                "commit,nat(src=10.0.0.1,random,hash)",
                "hash",
                "more than one of random, hash, persistent",
            ),
            (
                "commit,nat(hash)",
                "nat(hash)",
                "a mode without src= or dst=",
            ),
        ];
        for (s, tok, why) in cases {
            let e = s.parse::<CtAction>().unwrap_err();
            assert_eq!(e.token, tok, "{s}: {e}");
            assert!(e.reason.starts_with(why), "{s}: {e}");
        }
        // Each mode by its name.
        for (m, mode) in [
            ("hash", NatMode::Hash),
            ("random", NatMode::Random),
            ("persistent", NatMode::Persistent),
        ] {
            let a = p(&format!("commit,nat(src=10.0.0.1,{m})"));
            assert_eq!(a.nat.unwrap().mode, mode, "{m}");
        }
    }
}
