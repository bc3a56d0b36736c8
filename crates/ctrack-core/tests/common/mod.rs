//! What the NAT and gateway scenario tests share: a tracker, a clock, and
//! sending a frame with an action to see its verdict and how it leaves.

#![allow(dead_code, unreachable_pub)]

pub mod wire;

use std::cell::Cell;

use ctrack_core::{CtAction, LinkType, Stats, Time, Tracker, Verdict};
use ctrack_wire::build::Frame;

pub fn act(s: &str) -> CtAction {
    s.parse().unwrap()
}

pub struct Net {
    pub t: Tracker,
    pub now: Time,
    /// The counters of this test's one worker.
    pub stats: Cell<Stats>,
}

impl Net {
    pub fn new() -> Net {
        Net {
            t: Tracker::default(),
            now: Time::from_secs(100),
            stats: Cell::new(Stats::default()),
        }
    }

    /// Sends `f` with `action`; returns the verdict and the frame as it
    /// leaves.
    pub fn send(&self, f: &Frame, action: &str) -> (Verdict, Vec<u8>) {
        let mut b = f.build();
        let mut stats = self.stats.get();
        let v = self.t.process_mut(
            &mut b,
            LinkType::Ethernet,
            &act(action),
            self.now,
            &mut stats,
        );
        self.stats.set(stats);
        (v, b)
    }

    /// The state `f` gets with `action`.
    pub fn state(&self, f: &Frame, action: &str) -> String {
        self.send(f, action).0.state.to_string()
    }

    /// Sends `f` and checks that it leaves as `want`, with state `state`.
    pub fn expect(&self, f: &Frame, action: &str, want: &Frame, state: &str) -> Verdict {
        let (v, out) = self.send(f, action);
        assert_eq!(v.state.to_string(), state, "state of {f:?}");
        assert_eq!(out, want.build(), "bytes of {f:?}");
        v
    }
}

impl Net {
    /// A network whose tracker has `config` (a small table for tests that
    /// make many trackers).
    pub fn with(config: ctrack_core::Config) -> Net {
        Net {
            t: Tracker::new(config),
            now: Time::from_secs(100),
            stats: Cell::new(Stats::default()),
        }
    }
}
