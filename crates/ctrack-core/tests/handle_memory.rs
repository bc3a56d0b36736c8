//! A long-lived per-thread handle does not hold memory back. In a test
//! binary of its own: memory comes back when the epoch advances, which
//! every pinned thread of the process holds up, so another test's pinned
//! thread (descheduled on a loaded machine) would make this one flaky.

use ctrack_core::{Config, CtAction, CtState, LinkType, Stats, Time, Tracker};
use ctrack_wire::build::{Frame, L4};

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
