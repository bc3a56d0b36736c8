//! Connections as text: Open vSwitch's `dpctl/dump-conntrack` lines and
//! conntrack-tools' `conntrack -L` / `conntrack -E` lines, and the
//! filters of `conntrack -L`.
//!
//! The `conntrack -L` layout (learnt from conntrack-tools' manual and
//! output, written here from scratch):
//!
//! ```text
//! tcp      6 431999 ESTABLISHED src=10.0.0.1 dst=10.0.0.2 sport=43210 dport=80 src=10.0.0.2 dst=10.0.0.1 sport=80 dport=43210 [ASSURED] mark=0 use=1
//! udp      17 28 src=10.0.0.1 dst=10.0.0.2 sport=5000 dport=53 [UNREPLIED] src=10.0.0.2 dst=10.0.0.1 sport=53 dport=5000 mark=0 zone=3 use=1
//! icmp     1 29 src=10.0.0.1 dst=10.0.0.2 type=8 code=0 id=77 src=10.0.0.2 dst=10.0.0.1 type=0 code=0 id=77 mark=0 use=1
//! ```
//!
//! The protocol's name padded to 8 and its number; the seconds left; the
//! TCP state (TCP only, with Linux's names); the original tuple,
//! `[UNREPLIED]` while no reply was seen, the reply tuple; `[ASSURED]`
//! for a connection seen both ways and established; the mark; the zone
//! when not 0; `use=1`. An event line (`conntrack -E`) starts with the
//! event's name in brackets, right-aligned in 9 columns; a DESTROY event
//! has no timeout or state, as the kernel's.

use std::net::IpAddr;

use ctrack_core::{Entry, EventKind};
use ctrack_wire::ip_proto;

use super::args::{Parsed, number};

/// The protocol's name as conntrack prints it (`unknown` without one).
fn proto_name(p: u8) -> &'static str {
    ip_proto::name(p).unwrap_or("unknown")
}

/// The protocol number from a name or a number.
pub(crate) fn parse_proto(v: &str) -> Result<u8, String> {
    if let Ok(n) = v.parse::<u8>() {
        return Ok(n);
    }
    let lower = v.to_ascii_lowercase();
    let lower = match lower.as_str() {
        "icmp6" | "ipv6-icmp" => "icmpv6",
        other => other,
    };
    (0..=255u8)
        .find(|&p| ip_proto::name(p) == Some(lower))
        .ok_or_else(|| format!("unknown protocol {v:?}"))
}

/// Linux's name for a TCP state of ours (`CLOSED` is `CLOSE`; one side
/// closing is `FIN_WAIT`).
fn linux_tcp_state(s: &str) -> &str {
    match s {
        "CLOSED" => "CLOSE",
        "CLOSING" | "FIN_WAIT_1" => "FIN_WAIT",
        "FIN_WAIT_2" => "TIME_WAIT",
        "LISTEN" => "NONE",
        other => other,
    }
}

/// The state a filter and the list show: TCP's, in Linux's names; the
/// tracker's own for other protocols (`BIDIR`...).
pub(crate) fn shown_state(e: &Entry) -> &str {
    if e.proto == ip_proto::TCP {
        linux_tcp_state(e.state)
    } else {
        e.state
    }
}

fn seen_reply(e: &Entry) -> bool {
    e.reply.packets != 0
}

/// Assured as Linux means it: TCP established (or closing after), a
/// datagram flow seen both ways. ICMP never is.
fn assured(e: &Entry) -> bool {
    if !seen_reply(e) {
        return false;
    }
    match e.proto {
        ip_proto::TCP => matches!(
            shown_state(e),
            "ESTABLISHED" | "FIN_WAIT" | "CLOSE_WAIT" | "LAST_ACK" | "TIME_WAIT"
        ),
        ip_proto::ICMP | ip_proto::ICMPV6 => false,
        _ => e.state == "BIDIR",
    }
}

fn push_tuple(out: &mut Vec<String>, t: &ctrack_core::conn::dump::EntryTuple) {
    out.push(format!("src={}", t.src));
    out.push(format!("dst={}", t.dst));
    if let Some((id, ty, code)) = t.icmp {
        out.push(format!("type={ty}"));
        out.push(format!("code={code}"));
        out.push(format!("id={id}"));
    } else if let (Some(s), Some(d)) = (t.sport, t.dport) {
        out.push(format!("sport={s}"));
        out.push(format!("dport={d}"));
    }
}

/// One `conntrack -L` line for `e`; with `event`, the `conntrack -E`
/// line of that event.
pub(crate) fn conntrack_line(e: &Entry, event: Option<EventKind>) -> String {
    let mut w: Vec<String> = Vec::with_capacity(20);
    if let Some(k) = event {
        w.push(format!("{:>9}", format!("[{}]", k.name())));
    }
    w.push(format!("{:<8} {}", proto_name(e.proto), e.proto));
    if event != Some(EventKind::Destroy) {
        w.push(e.timeout.to_string());
        if e.proto == ip_proto::TCP {
            w.push(shown_state(e).to_owned());
        }
    }
    push_tuple(&mut w, &e.orig);
    if !seen_reply(e) {
        w.push("[UNREPLIED]".into());
    }
    push_tuple(&mut w, &e.reply);
    if assured(e) {
        w.push("[ASSURED]".into());
    }
    w.push(format!("mark={}", e.mark));
    if e.zone != 0 {
        w.push(format!("zone={}", e.zone));
    }
    if let Some(h) = e.helper {
        w.push(format!("helper={h}"));
    }
    w.push("use=1".into());
    w.join(" ")
}

/// One `ovs-appctl dpctl/dump-conntrack` line: with `stats` (`-s`) the
/// packet and byte counters, without them none.
pub(crate) fn dump_line(e: &Entry, stats: bool) -> String {
    if stats {
        return e.to_string();
    }
    // The entry's Display prints counters only when non-zero.
    let mut bare = e.clone();
    for t in [&mut bare.orig, &mut bare.reply] {
        t.packets = 0;
        t.bytes = 0;
    }
    bare.to_string()
}

/// An address, or a prefix (`10.0.0.0/24`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Prefix {
    addr: IpAddr,
    len: u8,
}

impl Prefix {
    fn parse(v: &str) -> Result<Prefix, String> {
        let (a, len) = match v.split_once('/') {
            Some((a, l)) => (a, Some(l)),
            None => (v, None),
        };
        let addr: IpAddr = a
            .parse()
            .map_err(|_| format!("{v:?} is not an address or prefix"))?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let len = match len {
            None => max,
            Some(l) => match l.parse::<u8>() {
                Ok(n) if n <= max => n,
                _ => return Err(format!("{v:?}: bad prefix length")),
            },
        };
        Ok(Prefix { addr, len })
    }

    fn contains(&self, ip: IpAddr) -> bool {
        let bits = |a: IpAddr| -> (u128, u8) {
            match a {
                IpAddr::V4(v) => (u128::from(u32::from(v)) << 96, 32),
                IpAddr::V6(v) => (u128::from(v), 128),
            }
        };
        let ((a, fa), (b, fb)) = (bits(self.addr), bits(ip));
        if fa != fb {
            return false;
        }
        let mask = if self.len == 0 {
            0
        } else {
            u128::MAX << (128 - u32::from(self.len))
        };
        a & mask == b & mask
    }
}

/// The `conntrack -L` filters (on the original direction, as conntrack's
/// `--src`, `--dst`, `--sport`, `--dport`).
#[derive(Debug, Clone, Default)]
pub(crate) struct Filter {
    proto: Option<u8>,
    src: Option<Prefix>,
    dst: Option<Prefix>,
    sport: Option<u16>,
    dport: Option<u16>,
    mark: Option<(u32, u32)>,
    /// Zone (the caller also uses it to walk one zone only).
    pub(crate) zone: Option<u16>,
    state: Option<String>,
}

/// The options `list` takes, for [`super::args::parse`].
pub(crate) const LIST_OPTS: &[super::args::Opt] = &[
    opt(&["-p", "--proto", "--orig-proto"], "proto"),
    opt(&["-s", "--src", "--orig-src"], "src"),
    opt(&["-d", "--dst", "--orig-dst"], "dst"),
    opt(&["--sport", "--orig-port-src"], "sport"),
    opt(&["--dport", "--orig-port-dst"], "dport"),
    opt(&["-m", "--mark"], "mark"),
    opt(&["-w", "--zone"], "zone"),
    opt(&["--state"], "state"),
    super::args::FORMAT,
];

const fn opt(names: &'static [&'static str], key: &'static str) -> super::args::Opt {
    super::args::Opt {
        names,
        key,
        value: true,
    }
}

impl Filter {
    /// The filter the options of `p` ask for.
    pub(crate) fn from_args(p: &Parsed) -> Result<Filter, String> {
        let mut f = Filter::default();
        for (k, v) in &p.opts {
            match *k {
                "proto" => f.proto = Some(parse_proto(v)?),
                "src" => f.src = Some(Prefix::parse(v)?),
                "dst" => f.dst = Some(Prefix::parse(v)?),
                "sport" => f.sport = Some(number("--sport", v)?),
                "dport" => f.dport = Some(number("--dport", v)?),
                "zone" => f.zone = Some(number("--zone", v)?),
                "state" => f.state = Some(v.to_ascii_uppercase()),
                "mark" => {
                    f.mark = Some(match v.split_once('/') {
                        Some((m, mask)) => (number("--mark", m)?, number("--mark mask", mask)?),
                        None => (number("--mark", v)?, u32::MAX),
                    })
                }
                _ => {}
            }
        }
        Ok(f)
    }

    /// True if `e` passes every filter given.
    pub(crate) fn matches(&self, e: &Entry) -> bool {
        self.proto.is_none_or(|p| p == e.proto)
            && self.src.is_none_or(|p| p.contains(e.orig.src))
            && self.dst.is_none_or(|p| p.contains(e.orig.dst))
            && self.sport.is_none_or(|p| e.orig.sport == Some(p))
            && self.dport.is_none_or(|p| e.orig.dport == Some(p))
            && self.mark.is_none_or(|(m, mask)| e.mark & mask == m & mask)
            && self.zone.is_none_or(|z| z == e.zone)
            && self
                .state
                .as_deref()
                .is_none_or(|s| shown_state(e).eq_ignore_ascii_case(s))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_match_by_family_and_bits() {
        let p = Prefix::parse("10.0.0.0/24").unwrap();
        assert!(p.contains("10.0.0.9".parse().unwrap()));
        assert!(!p.contains("10.0.1.9".parse().unwrap()));
        assert!(!p.contains("::a00:9".parse().unwrap()));
        let all = Prefix::parse("::/0").unwrap();
        assert!(all.contains("fd00::1".parse().unwrap()));
        assert!(Prefix::parse("10.0.0.0/33").is_err());
        assert!(Prefix::parse("nope").is_err());
    }

    #[test]
    fn protocols_by_name_or_number() {
        assert_eq!(parse_proto("TCP"), Ok(6));
        assert_eq!(parse_proto("17"), Ok(17));
        assert_eq!(parse_proto("icmp6"), Ok(58));
        assert!(parse_proto("tcpx").is_err());
    }

    use ctrack_core::{CtAction, LinkType, Stats, Time, Tracker};
    use ctrack_wire::build::{Frame, L4};
    use ctrack_wire::icmp::v4;
    use ctrack_wire::tcp::flags::{ACK, FIN, SYN};

    const C: [u8; 4] = [10, 0, 0, 1];
    const S: [u8; 4] = [10, 0, 0, 2];

    /// The one connection `frames` make under `action`, as `conntrack
    /// -L` prints it, and its entry.
    fn listed(frames: &[Frame], action: &str) -> (String, Entry) {
        let t = Tracker::default();
        let action: CtAction = action.parse().expect("an action");
        let now = Time::from_secs(100);
        for f in frames {
            t.process(
                &f.build(),
                LinkType::Ethernet,
                &action,
                now,
                &mut Stats::default(),
            );
        }
        let mut entries = Vec::new();
        t.for_each(None, now, |_, c| entries.push(c.entry.clone()));
        assert_eq!(entries.len(), 1, "{entries:?}");
        let e = entries.remove(0);
        (conntrack_line(&e, None), e)
    }

    fn tcp(to_server: bool, flags: u16, seq: u32, ack: u32) -> Frame {
        let (a, b, sp, dp) = match to_server {
            true => (C, S, 40000, 80),
            false => (S, C, 80, 40000),
        };
        Frame::v4(a, b, L4::tcp_seg(sp, dp, flags, seq, ack, 65535, b""))
    }

    /// TCP's state goes by Linux's name, in the line and in `--state`;
    /// a connection closing after it was established stays assured; zone 0
    /// is not printed.
    #[test]
    fn a_closing_tcp_connection_by_linux_s_names() {
        let frames = [
            tcp(true, SYN, 100, 0),
            tcp(false, SYN | ACK, 500, 101),
            tcp(true, ACK, 101, 501),
            tcp(true, FIN | ACK, 101, 501),
        ];
        let (line, e) = listed(&frames, "commit");
        assert_eq!(e.state, "CLOSING", "Open vSwitch's name");
        assert!(
            line.contains(" FIN_WAIT src=10.0.0.1 ") && line.contains("[ASSURED] mark=0 use=1"),
            "{line}"
        );
        assert!(!line.contains("zone="), "{line}");
        let by_state = |s: &str| Filter {
            state: Some(s.to_ascii_uppercase()),
            ..Filter::default()
        };
        assert!(by_state("fin_wait").matches(&e));
        assert!(
            !by_state("fin_wait_1").matches(&e),
            "Linux has no FIN_WAIT_1"
        );
    }

    /// A TCP connection picked up in the middle (Open vSwitch's loose
    /// pickup) and never answered is unreplied and not assured, whatever
    /// its state.
    #[test]
    fn an_unanswered_tcp_connection_is_not_assured() {
        for frames in [
            &[tcp(true, ACK, 101, 501)][..],
            &[tcp(true, ACK, 101, 501), tcp(true, FIN | ACK, 101, 501)],
        ] {
            let (line, _) = listed(frames, "commit");
            assert!(line.contains("[UNREPLIED]"), "{line}");
            assert!(!line.contains("[ASSURED]"), "{line}");
        }
    }

    /// ICMP prints type, code and id, in that order, and is never assured
    /// (Linux); UDP prints no state; a helper and a zone are printed.
    #[test]
    fn icmp_udp_and_helper_lines() {
        let ping = |a, b, ty| Frame::v4(a, b, L4::icmp_query(ty, 77, 1));
        let (line, _) = listed(
            &[ping(C, S, v4::ECHO_REQUEST), ping(S, C, v4::ECHO_REPLY)],
            "commit",
        );
        assert!(line.starts_with("icmp     1 "), "{line}");
        assert!(
            line.contains(
                "src=10.0.0.1 dst=10.0.0.2 type=8 code=0 id=77 src=10.0.0.2 dst=10.0.0.1 type=0 code=0 id=77 mark=0 use=1"
            ),
            "{line}"
        );
        let udp = |a, b, sp, dp| Frame::v4(a, b, L4::udp(sp, dp, b"q"));
        let (line, e) = listed(&[udp(C, S, 5000, 53), udp(S, C, 53, 5000)], "commit,zone=3");
        assert_eq!(e.state, "BIDIR");
        assert!(!line.contains("BIDIR"), "{line}");
        assert!(line.contains("[ASSURED] mark=0 zone=3 use=1"), "{line}");
        let ftp = Frame::v4(C, S, L4::tcp_seg(40000, 21, SYN, 100, 0, 65535, b""));
        let (line, _) = listed(&[ftp], "commit,alg=ftp");
        assert!(line.ends_with(" helper=ftp use=1"), "{line}");
    }

    #[test]
    fn an_ipv4_prefix_holds_no_ipv6_address() {
        let p = Prefix::parse("10.0.0.0/24").unwrap();
        assert!(!p.contains("a00::9".parse().unwrap()));
        let p = Prefix::parse("a00::/16").unwrap();
        assert!(!p.contains("10.0.0.9".parse().unwrap()));
    }

    #[test]
    fn linux_state_names() {
        assert_eq!(linux_tcp_state("CLOSED"), "CLOSE");
        assert_eq!(linux_tcp_state("CLOSING"), "FIN_WAIT");
        assert_eq!(linux_tcp_state("ESTABLISHED"), "ESTABLISHED");
    }
}
