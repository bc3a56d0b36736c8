//! Long listings of connections over the control socket: sent in parts
//! (reply lines of about 64 KiB with `"more":true` but the last), read
//! back whole, in order, byte for byte what one piece would have been; and
//! at most four under way at once.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::{Duration, Instant};

use common::{CLIENT, Env, SERVER};
use ctrack_core::Entry;
use ctrack_wire::build::L4;

/// Connections the tests make: a dump line is about 140 bytes, so their
/// listings pass 64 KiB several times over.
const CONNS: u16 = 3000;

/// `CONNS` one-way UDP connections from the client to the server's port
/// 53, from source ports 10000 up.
fn many() -> Env {
    many_of(CONNS)
}

/// `n` such connections.
fn many_of(n: u16) -> Env {
    let mut env = Env::new();
    if usize::from(n) > 5000 {
        env.ok(&["set-maxconns", "100000"]);
    }
    for sport in 0..n {
        env.send(CLIENT, SERVER, L4::udp(10000 + sport, 53, b"q"));
    }
    env
}

/// Sends `argv` on a fresh connection; the connection, to read from.
fn ask(sock: &Path, argv: &[&str]) -> BufReader<UnixStream> {
    let mut s = UnixStream::connect(sock).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let req = serde_json::json!({ "argv": argv }).to_string() + "\n";
    s.write_all(req.as_bytes()).unwrap();
    BufReader::new(s)
}

/// The reply lines to one request, read until one without `more`.
fn reply_lines(r: &mut BufReader<UnixStream>) -> Vec<serde_json::Value> {
    let mut out = Vec::new();
    loop {
        let mut line = String::new();
        r.read_line(&mut line).unwrap();
        assert!(line.ends_with('\n'), "a reply line: {line:?}");
        let v: serde_json::Value = serde_json::from_str(&line).unwrap();
        let more = v["more"] == true;
        out.push(v);
        if !more {
            return out;
        }
    }
}

/// The reply's text, put together, after checking its lines: `ok`, a
/// part of 64 KiB (a line more at most; the last may be shorter), `more`
/// on all but the last.
fn text_of(lines: &[serde_json::Value]) -> String {
    let mut text = String::new();
    for (i, v) in lines.iter().enumerate() {
        assert_eq!(v["ok"], true, "{v}");
        let last = i + 1 == lines.len();
        assert_eq!(v.get("more").is_none(), last, "line {i}");
        let part = v["text"].as_str().expect("a text");
        assert!(
            part.len() < 64 * 1024 + 1024,
            "line {i}: {} bytes",
            part.len()
        );
        // A part is cut once it has 64 KiB: fewer lines, not more.
        assert!(
            last || part.len() >= 64 * 1024,
            "line {i}: {} bytes",
            part.len()
        );
        text.push_str(part);
    }
    text
}

/// `listing` without the seconds each connection has left, which two
/// listings read at other times may give apart: byte for byte otherwise.
/// (JSON's `"timeout"` lines, dump lines' `timeout=N`, `conntrack -L`
/// lines' third word.)
fn timeless(listing: &str) -> String {
    let line = |l: &str| -> String {
        if l.contains("\"timeout\":") {
            return String::new();
        }
        if let Some(at) = l.find("timeout=") {
            let rest = &l[at + "timeout=".len()..];
            let digits = rest.len() - rest.trim_start_matches(|c: char| c.is_ascii_digit()).len();
            return format!("{}timeout={}", &l[..at], &rest[digits..]);
        }
        if l.starts_with("udp") || l.starts_with("tcp") {
            let mut w: Vec<&str> = l.split(' ').filter(|w| !w.is_empty()).collect();
            w[2] = "_";
            return w.join(" ");
        }
        l.to_string()
    };
    listing.lines().map(line).collect::<Vec<_>>().join("\n")
}

/// A listing comes in parts and reads back as what one piece would be:
/// every connection once, in order; JSON as `serde_json` writes the
/// array pretty in one go. Until 2026-12-01 a listing was one reply line,
/// made whole in the daemon (for a million connections, 780 MB more at
/// its peak), and a client refused a line over 1 GiB.
#[test]
fn a_long_listing_comes_in_parts_and_reads_back_whole() {
    let env = many();
    for argv in [
        &["dump-conntrack"][..],
        &["dump-conntrack", "-s"],
        &["list", "-p", "udp"],
        &["dump-conntrack", "--format", "json"],
        &["list", "--format", "json"],
    ] {
        let lines = reply_lines(&mut ask(&env.sock, argv));
        assert!(lines.len() >= 3, "{argv:?}: {} lines", lines.len());
        let text = text_of(&lines);
        // The client puts the parts together as well.
        assert_eq!(timeless(&text), timeless(&env.ok(argv)), "{argv:?}");
        if argv.contains(&"json") {
            let mut all: Vec<Entry> = Vec::new();
            env.shared
                .fw
                .tracker()
                .for_each(None, env.shared.now(), |_, i| all.push(i.entry.clone()));
            all.sort_by_key(|e| (e.zone, e.proto, e.orig.src, e.orig.dst, e.orig.sport));
            assert_eq!(all.len(), usize::from(CONNS));
            let whole = serde_json::to_string_pretty(&all).unwrap();
            assert_eq!(timeless(&text), timeless(&whole), "{argv:?}");
        } else {
            let sports: Vec<u16> = text
                .lines()
                .map(|l| {
                    let at = l.find("sport=").expect("a source port") + "sport=".len();
                    let digits = l[at..].split(|c: char| !c.is_ascii_digit()).next();
                    digits.and_then(|d| d.parse().ok()).expect("a number")
                })
                .collect();
            let want: Vec<u16> = (0..CONNS).map(|i| 10000 + i).collect();
            assert_eq!(sports, want, "{argv:?}");
        }
    }
    // A short listing is one line, as ever.
    let one = reply_lines(&mut ask(&env.sock, &["list", "--sport", "10007"]));
    assert_eq!(one.len(), 1);
    assert!(one[0].get("more").is_none());
}

/// Four listings may be under way at once (each holds its order while its
/// client reads); a fifth is refused in words, and once they are read,
/// another is served.
#[test]
fn a_fifth_listing_at_once_is_refused() {
    // Four clients ask and do not read: each listing, megabytes long,
    // far more than the socket's buffers take, stays under way.
    const BIG: u16 = 30_000;
    let env = many_of(BIG);
    let mut slow: Vec<_> = (0..4)
        .map(|_| ask(&env.sock, &["dump-conntrack", "-s"]))
        .collect();
    // Each has begun: its first part came (the rest, megabytes, waits).
    let firsts: Vec<serde_json::Value> = (slow.iter_mut())
        .map(|r| {
            let mut line = String::new();
            r.read_line(&mut line).unwrap();
            let v: serde_json::Value = serde_json::from_str(&line).unwrap();
            assert_eq!(v["more"], true, "{line}");
            v
        })
        .collect();
    let lines = reply_lines(&mut ask(&env.sock, &["list"]));
    let refused = lines[0]["error"].as_str().unwrap_or_default();
    assert!(
        refused.contains("4 listings of connections are being written already"),
        "{}",
        lines[0]
    );
    // The other commands go on meanwhile.
    assert_eq!(env.ok(&["count"]), BIG.to_string());
    for (r, first) in slow.iter_mut().zip(firsts) {
        let mut lines = vec![first];
        lines.extend(reply_lines(r));
        assert_eq!(text_of(&lines).lines().count(), usize::from(BIG));
    }
    let deadline = Instant::now() + Duration::from_secs(3);
    loop {
        let lines = reply_lines(&mut ask(&env.sock, &["list"]));
        if lines[0]["ok"] == true {
            assert_eq!(text_of(&lines).lines().count(), usize::from(BIG));
            break;
        }
        assert!(Instant::now() < deadline, "no place again: {}", lines[0]);
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `list`'s filters are asked again of each connection as it is written:
/// one that changed meanwhile so as to fail them (a one-way flow answered
/// while the client reads) is left out, not shown in a state the listing
/// was asked not to show.
#[test]
fn a_connection_changed_while_listed_meets_the_filter_again() {
    const BIG: u16 = 30_000;
    let mut env = many_of(BIG);
    let mut r = ask(&env.sock, &["list", "--state", "FIRST"]);
    let mut first = String::new();
    r.read_line(&mut first).unwrap();
    let first: serde_json::Value = serde_json::from_str(&first).unwrap();
    assert_eq!(first["more"], true, "{first}");
    // The later half answered: both ways now, no longer `FIRST`.
    let answered = 10000 + BIG / 2;
    for sport in answered..10000 + BIG {
        env.send(SERVER, CLIENT, L4::udp(53, sport, b"a"));
    }
    let mut lines = vec![first];
    lines.extend(reply_lines(&mut r));
    let text = text_of(&lines);
    let shown = text.lines().count();
    // The first part was written before the answers; no line after it is
    // of an answered flow.
    assert!(shown < usize::from(BIG), "{shown} lines");
    for l in text.lines() {
        assert!(l.contains("[UNREPLIED]"), "{l}");
    }
}
