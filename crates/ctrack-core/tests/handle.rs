//! The per-thread handle for single-packet callers: the same verdicts as
//! `Tracker::process`, and memory still reclaimed while it lives.

use ctrack_core::{Config, CtAction, CtState, LinkType, Stats, Time, Tracker};
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

#[test]
fn a_long_lived_handle_does_not_hold_memory_back() {
    let t = Tracker::new(Config {
        max_conns: 100_000,
        ..Config::default()
    });
    let mut h = t.handle();
    let mut stats = Stats::default();
    let commit = CtAction::commit(1);
    let mut grown = Vec::new();
    for round in 0..12u32 {
        for i in 0..4_000u32 {
            let port = (i % 60_000) as u16 + 1;
            let src = [10, (round % 250) as u8 + 1, (i >> 8) as u8, i as u8];
            let f = Frame::v4(src, [10, 0, 0, 2], L4::udp(port, 53, b"q")).build();
            let v = h.process(
                &f,
                LinkType::Ethernet,
                &commit,
                Time::from_secs(1),
                &mut stats,
            );
            assert!(v.state.contains(CtState::NEW), "round {round} packet {i}");
        }
        // Flushed and freed by this thread while its handle lives: the
        // slots come back once the handle has moved its pin on.
        t.flush_zone_now(1, &mut stats);
        grown.push(t.memory().record_bytes);
    }
    // Every round reuses the slots of the rounds before: the records'
    // memory stops growing after the first few rounds (without the handle
    // repinning, it grows by the same amount every round).
    let (first, second, last) = (
        grown[1] - grown[0],
        grown[6] - grown[5],
        grown[11] - grown[10],
    );
    assert!(
        second * 4 <= first && last * 4 <= first,
        "record memory kept growing with the handle alive: {grown:?}"
    );
}
