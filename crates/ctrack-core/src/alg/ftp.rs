//! The FTP control protocol as a gateway reads it: the commands and replies
//! that announce a data connection, found in a byte stream that TCP may cut
//! anywhere.
//!
//! Announcements, by direction of the control connection:
//!
//! * client to server (original direction): `PORT h1,h2,h3,h4,p1,p2`
//!   (RFC 959) and `EPRT |1|a.b.c.d|port|` / `EPRT |2|v6addr|port|`
//!   (RFC 2428, any delimiter);
//! * server to client (reply direction): `227 ...h1,h2,h3,h4,p1,p2...` (the
//!   numbers wherever they are on the line, as RFC 1123 asks) and
//!   `229 ... (|||port|)`.
//!
//! Keywords are matched without regard to case, at the start of a line.
//! IPv4 control connections take PORT, EPRT `|1|`, 227 and 229; IPv6 ones
//! EPRT `|2|` and 229 (as Linux).
//!
//! [`Stream`] keeps what it needs between segments of one direction: the
//! next sequence number it expects, and an unfinished line if that line
//! can still be an announcement (at most [`MAX_LINE`] bytes; a longer line
//! is skipped to its end). Text is never copied past that bound, numbers
//! are range-checked as they are read, and every index is checked, so no
//! payload can make the parser read or write out of bounds (Open vSwitch
//! had a heap overflow in this place: CVE-less fix 7c31be6d6).

use core::ops::Range;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use ctrack_wire::SeqNum;

/// Longest line kept across segments. An announcement is under 100 bytes;
/// a 227 reply's free text may make it longer, but not this long.
pub const MAX_LINE: usize = 512;

/// Which announcement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `PORT h1,h2,h3,h4,p1,p2` (client, active mode).
    Port,
    /// `EPRT |af|addr|port|` (client, active mode).
    Eprt,
    /// `227` reply to PASV (server, passive mode).
    Pasv,
    /// `229` reply to EPSV (server, passive mode; no address).
    Epsv,
}

/// A data connection announced on a line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Command {
    /// Which announcement.
    pub kind: Kind,
    /// The address announced (`None` for 229: the sender's own).
    pub addr: Option<IpAddr>,
    /// The port announced.
    pub port: u16,
    /// The bytes of the line a translation replaces: the numbers of PORT
    /// and 227, `|af|addr|port|` of EPRT, `|||port|` of 229.
    pub span: Range<usize>,
}

/// Who sends the line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// The client (original direction).
    Client,
    /// The server (reply direction).
    Server,
}

fn starts_with_ci(line: &[u8], word: &[u8]) -> bool {
    line.len() >= word.len() && line[..word.len()].eq_ignore_ascii_case(word)
}

/// True if `line` (perhaps unfinished) may still turn out to be an
/// announcement from `side`.
fn may_announce(line: &[u8], side: Side) -> bool {
    let words: &[&[u8]] = match side {
        Side::Client => &[b"PORT", b"EPRT"],
        Side::Server => &[b"227", b"229"],
    };
    words.iter().any(|w| {
        let n = line.len().min(w.len());
        line[..n].eq_ignore_ascii_case(&w[..n])
    })
}

/// A decimal number of at most `max_digits` digits at `line[*at..]`, no
/// larger than `max`; advances `at` past it.
fn number(line: &[u8], at: &mut usize, max_digits: usize, max: u32) -> Option<u32> {
    let start = *at;
    let mut v: u32 = 0;
    while let Some(&c) = line.get(*at) {
        if !c.is_ascii_digit() {
            break;
        }
        if *at - start >= max_digits {
            return None;
        }
        v = v * 10 + u32::from(c - b'0');
        *at += 1;
    }
    (*at > start && v <= max).then_some(v)
}

/// `h1,h2,h3,h4,p1,p2` at `line[at..]`: the address, port and the span of
/// the numbers.
fn rfc959(line: &[u8], at: usize) -> Option<(IpAddr, u16, Range<usize>)> {
    let mut i = at;
    let mut n = [0u32; 6];
    for (k, slot) in n.iter_mut().enumerate() {
        if k > 0 {
            if line.get(i) != Some(&b',') {
                return None;
            }
            i += 1;
        }
        *slot = number(line, &mut i, 3, 255)?;
    }
    let addr = Ipv4Addr::new(n[0] as u8, n[1] as u8, n[2] as u8, n[3] as u8);
    let port = (n[4] << 8 | n[5]) as u16;
    Some((IpAddr::V4(addr), port, at..i))
}

/// Parses one complete line (without its line end) from `side` of a
/// control connection of address family `v6`.
pub fn parse_line(line: &[u8], side: Side, v6: bool) -> Option<Command> {
    match side {
        Side::Client => {
            if starts_with_ci(line, b"PORT ") && !v6 {
                let mut at = 5;
                while line.get(at) == Some(&b' ') {
                    at += 1;
                }
                let (addr, port, span) = rfc959(line, at)?;
                return Some(Command {
                    kind: Kind::Port,
                    addr: Some(addr),
                    port,
                    span,
                });
            }
            if starts_with_ci(line, b"EPRT ") {
                let mut at = 5;
                while line.get(at) == Some(&b' ') {
                    at += 1;
                }
                return eprt(line, at, v6);
            }
            None
        }
        Side::Server => {
            if starts_with_ci(line, b"227 ") && !v6 {
                // The numbers start at the first digit after the code.
                let first = 4 + line[4..].iter().position(u8::is_ascii_digit)?;
                let (addr, port, span) = rfc959(line, first)?;
                return Some(Command {
                    kind: Kind::Pasv,
                    addr: Some(addr),
                    port,
                    span,
                });
            }
            if starts_with_ci(line, b"229 ") {
                let open = 4 + line[4..].iter().position(|&c| c == b'(')?;
                return epsv(line, open + 1);
            }
            None
        }
    }
}

/// `<d><af><d><addr><d><port><d>` at `line[at..]` (RFC 2428).
fn eprt(line: &[u8], at: usize, v6: bool) -> Option<Command> {
    let d = *line.get(at)?;
    if !(33..=126).contains(&d) || d.is_ascii_digit() {
        return None;
    }
    let af = *line.get(at + 1)?;
    if line.get(at + 2) != Some(&d) {
        return None;
    }
    let want = if v6 { b'2' } else { b'1' };
    if af != want {
        return None;
    }
    let a_start = at + 3;
    let a_len = line.get(a_start..)?.iter().take(64).position(|&c| c == d)?;
    let text = core::str::from_utf8(&line[a_start..a_start + a_len]).ok()?;
    let addr: IpAddr = if v6 {
        IpAddr::V6(text.parse::<Ipv6Addr>().ok()?)
    } else {
        IpAddr::V4(text.parse::<Ipv4Addr>().ok()?)
    };
    let mut i = a_start + a_len + 1;
    let port = number(line, &mut i, 5, 65535)? as u16;
    if line.get(i) != Some(&d) {
        return None;
    }
    Some(Command {
        kind: Kind::Eprt,
        addr: Some(addr),
        port,
        span: at..i + 1,
    })
}

/// `<d><d><d><port><d>` at `line[at..]`.
fn epsv(line: &[u8], at: usize) -> Option<Command> {
    let d = *line.get(at)?;
    if !(33..=126).contains(&d) || d.is_ascii_digit() {
        return None;
    }
    if line.get(at + 1) != Some(&d) || line.get(at + 2) != Some(&d) {
        return None;
    }
    let mut i = at + 3;
    let port = number(line, &mut i, 5, 65535)? as u16;
    if line.get(i) != Some(&d) {
        return None;
    }
    Some(Command {
        kind: Kind::Epsv,
        addr: None,
        port,
        span: at..i + 1,
    })
}

/// The text a translation writes in place of [`Command::span`].
pub fn format(kind: Kind, addr: IpAddr, port: u16) -> String {
    match (kind, addr) {
        (Kind::Port | Kind::Pasv, IpAddr::V4(a)) => {
            let o = a.octets();
            format!(
                "{},{},{},{},{},{}",
                o[0],
                o[1],
                o[2],
                o[3],
                port >> 8,
                port & 0xff
            )
        }
        (Kind::Eprt, IpAddr::V4(a)) => format!("|1|{a}|{port}|"),
        // Linux writes IPv6 in full (`%pI6`): eight groups of four digits.
        (Kind::Eprt, IpAddr::V6(a)) => {
            let g = a.segments();
            format!(
                "|2|{:04x}:{:04x}:{:04x}:{:04x}:{:04x}:{:04x}:{:04x}:{:04x}|{port}|",
                g[0], g[1], g[2], g[3], g[4], g[5], g[6], g[7]
            )
        }
        (Kind::Epsv, _) => format!("|||{port}|"),
        // PORT and 227 carry IPv4 only.
        (Kind::Port | Kind::Pasv, IpAddr::V6(_)) => String::new(),
    }
}

/// An announcement found in a segment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    /// What was announced.
    pub command: Command,
    /// Where its span lies in this segment's payload, if the whole line
    /// began in this segment (a translation can rewrite it); `None` for a
    /// line that began in an earlier segment.
    pub at: Option<Range<usize>>,
}

/// What a segment came to.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Scan {
    /// Announcements completed in this segment.
    pub found: Vec<Found>,
    /// The segment ends inside a line that may still be an announcement.
    pub partial: bool,
    /// The segment was not read: it repeats bytes already seen.
    pub repeat: bool,
}

/// One direction of a control connection.
#[derive(Debug, Clone, Default)]
pub struct Stream {
    /// Sequence number of the next byte expected.
    next: Option<u32>,
    /// An unfinished line that may be an announcement.
    line: Vec<u8>,
    /// Inside a line that is not one (or too long): skip to its end.
    skip: bool,
    /// The sequence number of the last segment that held an announcement,
    /// and its length: a retransmission of it is read again.
    last_cmd: Option<(u32, u32)>,
}

impl Stream {
    /// Reads a segment of `side` starting at sequence number `seq`. With
    /// `hold_partial`, a segment that ends in an unfinished announcement is
    /// not consumed (the stream stays as it was, so that its retransmission
    /// is read from the start); otherwise the unfinished line is kept for
    /// the next segment.
    pub fn feed(
        &mut self,
        seq: u32,
        payload: &[u8],
        side: Side,
        v6: bool,
        hold_partial: bool,
    ) -> Scan {
        let mut scan = Scan::default();
        if payload.is_empty() {
            return scan;
        }
        let end = (SeqNum(seq) + payload.len()).0;
        match self.next {
            Some(n) if n == seq => {}
            None => {}
            Some(n) if SeqNum(n).after(SeqNum(seq)) => {
                // Old data. A retransmitted announcement is read (and
                // rewritten) again, as a line of its own.
                if self.last_cmd == Some((seq, payload.len() as u32)) {
                    let mut fresh = Stream::default();
                    let s = fresh.feed(seq, payload, side, v6, false);
                    scan.found = s.found;
                }
                scan.repeat = true;
                return scan;
            }
            Some(_) => {
                // A gap: bytes were lost before they reached us. Resume at
                // the next line.
                self.line.clear();
                self.skip = true;
            }
        }
        let saved = hold_partial.then(|| (self.line.clone(), self.skip));
        let mut pos = 0;
        // Where the current line began in this payload (None: earlier).
        let mut line_start = if self.line.is_empty() && !self.skip {
            Some(0)
        } else {
            None
        };
        while pos < payload.len() {
            let rest = &payload[pos..];
            let nl = rest.iter().position(|&c| c == b'\n');
            let chunk = &rest[..nl.unwrap_or(rest.len())];
            if !self.skip {
                if self.line.len() + chunk.len() > MAX_LINE {
                    self.skip = true;
                    self.line.clear();
                } else {
                    self.line.extend_from_slice(chunk);
                    if !may_announce(&self.line, side) {
                        self.skip = true;
                        self.line.clear();
                    }
                }
            }
            match nl {
                Some(i) => {
                    if !self.skip {
                        let mut text: &[u8] = &self.line;
                        if text.last() == Some(&b'\r') {
                            text = &text[..text.len() - 1];
                        }
                        if let Some(command) = parse_line(text, side, v6) {
                            let at =
                                line_start.map(|s| s + command.span.start..s + command.span.end);
                            scan.found.push(Found { command, at });
                        }
                    }
                    self.line.clear();
                    self.skip = false;
                    pos += i + 1;
                    line_start = Some(pos);
                }
                None => {
                    pos = payload.len();
                }
            }
        }
        scan.partial = !self.skip && !self.line.is_empty();
        if scan.partial
            && let Some((line, skip)) = saved
        {
            // Leave the stream as it was before this segment.
            self.line = line;
            self.skip = skip;
            scan.found.clear();
            return scan;
        }
        if !scan.found.is_empty() {
            self.last_cmd = Some((seq, payload.len() as u32));
        }
        self.next = Some(end);
        scan
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cmd(line: &str, side: Side, v6: bool) -> Option<(Kind, Option<IpAddr>, u16, String)> {
        parse_line(line.as_bytes(), side, v6)
            .map(|c| (c.kind, c.addr, c.port, line[c.span.clone()].to_string()))
    }

    #[test]
    fn rfc959_and_1123_forms() {
        let a4 = |a, b, c, d| Some(IpAddr::V4(Ipv4Addr::new(a, b, c, d)));
        assert_eq!(
            cmd("PORT 10,0,0,1,156,64", Side::Client, false),
            Some((Kind::Port, a4(10, 0, 0, 1), 40000, "10,0,0,1,156,64".into()))
        );
        assert_eq!(
            cmd("port 10,0,0,1,0,21", Side::Client, false).map(|c| c.2),
            Some(21)
        );
        assert_eq!(
            cmd(
                "227 Entering Passive Mode (192,168,1,2,195,80).",
                Side::Server,
                false
            ),
            Some((
                Kind::Pasv,
                a4(192, 168, 1, 2),
                50000,
                "192,168,1,2,195,80".into()
            ))
        );
        assert_eq!(
            cmd("227 =192,168,1,2,195,80", Side::Server, false).map(|c| c.2),
            Some(50000)
        );
        // Wrong side, wrong family, bad numbers.
        assert_eq!(cmd("PORT 10,0,0,1,156,64", Side::Server, false), None);
        assert_eq!(cmd("227 (10,0,0,1,1,1)", Side::Client, false), None);
        assert_eq!(cmd("PORT 10,0,0,1,156,64", Side::Client, true), None);
        // Nor a 227 reply on an IPv6 control connection.
        assert_eq!(
            cmd(
                "227 Entering Passive Mode (10,0,0,1,156,64)",
                Side::Server,
                true
            ),
            None
        );
        assert_eq!(cmd("PORT 10,0,0,256,1,1", Side::Client, false), None);
        assert_eq!(cmd("PORT 10,0,0,1,1", Side::Client, false), None);
        assert_eq!(cmd("PORT 10,0,0,0001,1,1", Side::Client, false), None);
        assert_eq!(cmd("PORTX 10,0,0,1,1,1", Side::Client, false), None);
    }

    #[test]
    fn rfc2428_forms() {
        assert_eq!(
            cmd("EPRT |1|132.235.1.2|6275|", Side::Client, false),
            Some((
                Kind::Eprt,
                Some("132.235.1.2".parse().unwrap()),
                6275,
                "|1|132.235.1.2|6275|".into()
            ))
        );
        assert_eq!(
            cmd("EPRT !2!fd00::1:2!5282!", Side::Client, true).map(|c| (c.1, c.2)),
            Some((Some("fd00::1:2".parse().unwrap()), 5282))
        );
        assert_eq!(cmd("EPRT |2|fd00::1|5282|", Side::Client, false), None);
        assert_eq!(cmd("EPRT |1|1.2.3.4|65536|", Side::Client, false), None);
        assert_eq!(cmd("EPRT |1|1.2.3.4|80", Side::Client, false), None);
        assert_eq!(
            cmd(
                "229 Entering Extended Passive Mode (|||6446|)",
                Side::Server,
                true
            ),
            Some((Kind::Epsv, None, 6446, "|||6446|".into()))
        );
        assert_eq!(cmd("229 (||6446|)", Side::Server, false), None);
    }

    #[test]
    fn formats_round_trip() {
        for (kind, line) in [
            (Kind::Port, "PORT 10,1,2,3,4,5"),
            (Kind::Eprt, "EPRT |1|10.1.2.3|1029|"),
            (Kind::Epsv, "229 x (|||1029|)"),
        ] {
            let c = parse_line(line.as_bytes(), kind_side(kind), false).unwrap();
            let text = format(kind, "10.1.2.3".parse().unwrap(), 1029);
            assert_eq!(&line[c.span], text);
        }
    }

    fn kind_side(k: Kind) -> Side {
        match k {
            Kind::Port | Kind::Eprt => Side::Client,
            _ => Side::Server,
        }
    }

    #[test]
    fn split_lines_and_several_per_segment() {
        let mut s = Stream::default();
        let a = s.feed(100, b"USER x\r\nPORT 10,0,", Side::Client, false, false);
        assert!(a.found.is_empty() && a.partial);
        let b = s.feed(
            118,
            b"0,1,4,1\r\nPORT 10,0,0,1,4,2\r\n",
            Side::Client,
            false,
            false,
        );
        assert_eq!(b.found.len(), 2);
        assert_eq!(b.found[0].command.port, 1025);
        assert_eq!(b.found[0].at, None, "began in the earlier segment");
        assert_eq!(b.found[1].command.port, 1026);
        let at = b.found[1].at.clone().unwrap();
        assert_eq!(&b"0,1,4,1\r\nPORT 10,0,0,1,4,2\r\n"[at], b"10,0,0,1,4,2");
    }

    #[test]
    fn holding_a_partial_line_leaves_the_stream_unchanged() {
        let mut s = Stream::default();
        let a = s.feed(1, b"PORT 10,0,0,1", Side::Client, false, true);
        assert!(a.partial && a.found.is_empty());
        // The retransmission, now whole, is read from its start.
        let b = s.feed(1, b"PORT 10,0,0,1,4,1\r\n", Side::Client, false, true);
        assert_eq!(b.found.len(), 1);
        assert!(b.found[0].at.is_some());
    }

    #[test]
    fn long_and_hostile_lines_are_skipped() {
        let mut s = Stream::default();
        let mut long = b"PORT ".to_vec();
        long.extend(std::iter::repeat_n(b'1', 10_000));
        let a = s.feed(0, &long, Side::Client, false, false);
        assert!(a.found.is_empty() && !a.partial);
        let n = long.len() as u32;
        let b = s.feed(n, b"\r\nPORT 1,2,3,4,5,6\r\n", Side::Client, false, false);
        assert_eq!(b.found.len(), 1);
        // Other lines are never buffered.
        let mut s = Stream::default();
        let c = s.feed(0, b"RETR some-file-name", Side::Client, false, false);
        assert!(!c.partial);
        assert!(s.line.is_empty());
    }

    #[test]
    fn retransmissions_and_gaps() {
        let mut s = Stream::default();
        let p = b"PORT 10,0,0,1,4,1\r\n";
        assert_eq!(s.feed(50, p, Side::Client, false, false).found.len(), 1);
        // The same segment again: read again (to rewrite it the same way).
        let r = s.feed(50, p, Side::Client, false, false);
        assert!(r.repeat);
        assert_eq!(r.found.len(), 1);
        // Other old data: not read.
        let r = s.feed(55, b"10,0,0,1,4,1\r\n", Side::Client, false, false);
        assert!(r.repeat && r.found.is_empty());
        // A gap: the rest of the line it lands in is skipped.
        let g = s.feed(
            1000,
            b"0,0,1,4,1\r\nPORT 10,0,0,1,4,3\r\n",
            Side::Client,
            false,
            false,
        );
        assert_eq!(g.found.len(), 1);
        assert_eq!(g.found[0].command.port, 1027);
        // A gap again, at what reads as a whole announcement: where its
        // line began is not known (Linux reads a segment only where a line
        // is known to begin), so it is not read; the next line is.
        let g = s.feed(
            5000,
            b"PORT 10,0,0,1,4,5\r\nPORT 10,0,0,1,4,6\r\n",
            Side::Client,
            false,
            false,
        );
        assert_eq!(g.found.len(), 1);
        assert_eq!(g.found[0].command.port, 1030);
    }
}
