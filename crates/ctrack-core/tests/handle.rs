//! The per-thread handle for single-packet callers: the same verdicts as
//! `Tracker::process` (memory reclaimed while it lives: `handle_memory.rs`).

use ctrack_core::{CtAction, LinkType, Stats, Time, Tracker};
use ctrack_wire::build::{Frame, L4};
use ctrack_wire::tcp::flags::{ACK, FIN, SYN};

/// A TCP connection's life and a few UDP exchanges, in order.
fn traffic(n: u16) -> Vec<Vec<u8>> {
    let (c, s) = ([10, 0, 0, 1], [10, 0, 0, 2]);
    let mut out = Vec::new();
    for i in 0..n {
        let port = 20_000 + i;
        out.push(Frame::v4(c, s, L4::tcp(port, 80, SYN)).build());
        out.push(Frame::v4(s, c, L4::tcp(80, port, SYN | ACK)).build());
        out.push(Frame::v4(c, s, L4::tcp(port, 80, ACK)).build());
        out.push(Frame::v4(c, s, L4::tcp(port, 80, FIN | ACK)).build());
        out.push(Frame::v4(s, c, L4::udp(53, port, b"x")).build());
        out.push(Frame::v4(c, s, L4::udp(port, 53, b"q")).build());
        out.push(Frame::v4(s, c, L4::udp(53, port, b"a")).build());
        // An invalid packet: a lone SYN-ACK nobody asked for.
        out.push(Frame::v4(s, c, L4::tcp(81, port, SYN | ACK)).build());
    }
    out
}

#[test]
fn a_handle_gives_the_verdicts_of_process() {
    // More packets than REPIN_EVERY, so the handle repins on the way.
    let frames = traffic(100);
    assert!(frames.len() > 2 * ctrack_core::track::REPIN_EVERY as usize);
    let actions = [CtAction::commit(0), CtAction::default()];
    let (a, b) = (Tracker::default(), Tracker::default());
    let (mut sa, mut sb) = (Stats::default(), Stats::default());
    let mut h = b.handle();
    for (i, f) in frames.iter().enumerate() {
        let action = &actions[usize::from(i % 5 == 4)];
        let now = Time::from_secs(1 + i as u64 / 50);
        let va = a.process(f, LinkType::Ethernet, action, now, &mut sa);
        let vb = h.process(f, LinkType::Ethernet, action, now, &mut sb);
        assert_eq!(va.state, vb.state, "packet {i}");
        assert_eq!(va.committed, vb.committed, "packet {i}");
        assert_eq!(va.invalid, vb.invalid, "packet {i}");
        assert_eq!((va.dir, va.refused), (vb.dir, vb.refused), "packet {i}");
    }
    assert!(sb.invalid > 0 && sb.committed > 0, "{sb:?}");
    assert_eq!(format!("{sa:?}"), format!("{sb:?}"));
    drop(h);
    assert_eq!(a.table_len(), b.table_len());
}

/// `Handle::process_mut` rewrites as `Tracker::process_mut` does: the same
/// verdicts and the same bytes, through source NAT, across repins.
#[test]
fn a_handle_rewrites_as_process_mut() {
    let frames = traffic(100);
    let snat: CtAction = "commit,nat(src=198.51.100.1)".parse().unwrap();
    let lookup: CtAction = "nat".parse().unwrap();
    let actions = [snat, lookup];
    let (a, b) = (Tracker::default(), Tracker::default());
    let (mut sa, mut sb) = (Stats::default(), Stats::default());
    let mut h = b.handle();
    let mut rewritten = 0;
    for (i, f) in frames.iter().enumerate() {
        let action = &actions[usize::from(i % 5 == 4)];
        let now = Time::from_secs(1 + i as u64 / 50);
        let (mut fa, mut fb) = (f.clone(), f.clone());
        let va = a.process_mut(&mut fa, LinkType::Ethernet, action, now, &mut sa);
        let vb = h.process_mut(&mut fb, LinkType::Ethernet, action, now, &mut sb);
        assert_eq!(va.state, vb.state, "packet {i}");
        assert_eq!(
            (va.committed, va.invalid),
            (vb.committed, vb.invalid),
            "packet {i}"
        );
        assert_eq!(fa, fb, "packet {i}: bytes");
        rewritten += usize::from(fa != *f);
    }
    assert!(
        rewritten > frames.len() / 2,
        "{rewritten} of {} rewritten",
        frames.len()
    );
    assert_eq!(format!("{sa:?}"), format!("{sb:?}"));
}
