//! Starting benchmark threads: a start line they wait at that can be
//! called off, so that a thread the system refuses to start ends the
//! benchmark with an error instead of leaving the others waiting.

use std::sync::{Condvar, Mutex, PoisonError};
use std::thread::{Builder, Scope, ScopedJoinHandle};

use anyhow::{Context, Result};

/// A barrier of a fixed number of parties that [`StartLine::call_off`]
/// releases for good.
#[derive(Debug)]
pub(crate) struct StartLine {
    parties: usize,
    state: Mutex<State>,
    cv: Condvar,
}

#[derive(Debug)]
struct State {
    waiting: usize,
    round: u64,
    off: bool,
}

impl StartLine {
    pub(crate) fn new(parties: usize) -> StartLine {
        StartLine {
            parties,
            state: Mutex::new(State {
                waiting: 0,
                round: 0,
                off: false,
            }),
            cv: Condvar::new(),
        }
    }

    /// Waits for every party, as [`std::sync::Barrier::wait`]. False: the
    /// run was called off, and the caller should return at once.
    pub(crate) fn wait(&self) -> bool {
        let mut s = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if s.off {
            return false;
        }
        s.waiting += 1;
        if s.waiting == self.parties {
            s.waiting = 0;
            s.round += 1;
            self.cv.notify_all();
            return true;
        }
        let round = s.round;
        while s.round == round && !s.off {
            s = self.cv.wait(s).unwrap_or_else(PoisonError::into_inner);
        }
        s.round != round
    }

    /// Releases every waiter, now and later, with false.
    pub(crate) fn call_off(&self) {
        self.state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .off = true;
        self.cv.notify_all();
    }
}

/// Starts benchmark thread `i` of `n` in `scope`; the error says the system
/// refused it.
pub(crate) fn spawn<'scope, T: Send + 'scope>(
    scope: &'scope Scope<'scope, '_>,
    i: usize,
    n: usize,
    f: impl FnOnce() -> T + Send + 'scope,
) -> Result<ScopedJoinHandle<'scope, T>> {
    Builder::new()
        .name(format!("bench-{i}"))
        .spawn_scoped(scope, f)
        .with_context(|| format!("cannot start benchmark thread {} of {n}", i + 1))
}

/// Starts `n` threads running `f(i)` that wait at `line` (of `n + 1`
/// parties, the caller the last); if one cannot be started, calls the run
/// off so that those started return, and says why.
pub(crate) fn spawn_all<'scope, T: Send + 'scope, F>(
    scope: &'scope Scope<'scope, '_>,
    n: usize,
    line: &'scope StartLine,
    f: F,
) -> Result<Vec<ScopedJoinHandle<'scope, T>>>
where
    F: Fn(usize) -> T + Send + Sync + Copy + 'scope,
{
    let mut handles = Vec::with_capacity(n);
    for i in 0..n {
        match spawn(scope, i, n, move || f(i)) {
            Ok(h) => handles.push(h),
            Err(e) => {
                line.call_off();
                return Err(e);
            }
        }
    }
    Ok(handles)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn start_line_meets_twice_and_can_be_called_off() {
        let line = StartLine::new(3);
        let met = std::thread::scope(|s| {
            let hs: Vec<_> = (0..2)
                .map(|_| s.spawn(|| line.wait() && line.wait()))
                .collect();
            assert!(line.wait() && line.wait());
            hs.into_iter()
                .map(|h| h.join().unwrap())
                .collect::<Vec<_>>()
        });
        assert_eq!(met, [true, true]);

        let line = StartLine::new(3);
        let met = std::thread::scope(|s| {
            let h = s.spawn(|| line.wait());
            line.call_off();
            h.join().unwrap()
        });
        assert!(!met);
        assert!(!line.wait());
    }
}
