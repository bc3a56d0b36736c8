//! Loom models of a meter's cell (`ctrack_policy::meter::Cell`): threads
//! that ask one meter at once are let through exactly as often as its
//! burst allows, in every interleaving loom explores.
//!
//! Run with `RUSTFLAGS="--cfg loom" cargo test --release -p ctrack-policy
//! --test loom` (`.ci/run` does).

#![cfg(loom)]

use ctrack_policy::meter::Cell;
use ctrack_policy::model::MeterUnit;
use loom::sync::Arc;
use loom::thread;

/// `threads` threads ask `each` times at once; the number let through.
fn admitted(burst: u32, threads: usize, each: usize) -> usize {
    let cell = Arc::new(Cell::new(MeterUnit::Pktps, 1, burst));
    let hs: Vec<_> = (0..threads)
        .map(|_| {
            let c = Arc::clone(&cell);
            thread::spawn(move || (0..each).filter(|_| c.admit(0, 60)).count())
        })
        .collect();
    hs.into_iter().map(|h| h.join().unwrap()).sum()
}

#[test]
fn two_threads_share_a_burst_of_one() {
    loom::model(|| assert_eq!(admitted(1, 2, 1), 1));
}

#[test]
fn two_threads_asking_twice_share_a_burst_of_three() {
    loom::model(|| assert_eq!(admitted(3, 2, 2), 3));
}

#[test]
fn time_passing_between_threads_lets_exactly_the_rate_through() {
    loom::model(|| {
        // A burst of one at 1,000 a second: one now, one a millisecond
        // later, whoever asks.
        let cell = Arc::new(Cell::new(MeterUnit::Pktps, 1000, 1));
        let c = Arc::clone(&cell);
        let h = thread::spawn(move || usize::from(c.admit(0, 60)) + usize::from(c.admit(1, 60)));
        let mine = usize::from(cell.admit(0, 60)) + usize::from(cell.admit(1, 60));
        assert_eq!(mine + h.join().unwrap(), 2);
    });
}
