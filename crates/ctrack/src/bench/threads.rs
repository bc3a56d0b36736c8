//! Starting benchmark threads: a start line they wait at that can be
//! called off, so that a thread the system refuses to start ends the
//! benchmark with an error instead of leaving the others waiting.

use std::sync::{Condvar, Mutex, PoisonError};
use std::thread::{Builder, Scope, ScopedJoinHandle};
use std::time::{Duration, Instant};

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
    /// When the last round was released: taken by the last party to arrive,
    /// under the lock, before anyone goes on.
    released: Option<Instant>,
}

impl StartLine {
    pub(crate) fn new(parties: usize) -> StartLine {
        StartLine {
            parties,
            state: Mutex::new(State {
                waiting: 0,
                round: 0,
                off: false,
                released: None,
            }),
            cv: Condvar::new(),
        }
    }

    /// Waits for every party, as [`std::sync::Barrier::wait`]. False: the
    /// run was called off, and the caller should return at once.
    pub(crate) fn wait(&self) -> bool {
        self.wait_at().is_some()
    }

    /// [`StartLine::wait`], returning when the line released everyone: the
    /// time the last party arrived, the same for every party, however late
    /// each one wakes. None: called off.
    pub(crate) fn wait_at(&self) -> Option<Instant> {
        let mut s = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if s.off {
            return None;
        }
        s.waiting += 1;
        if s.waiting == self.parties {
            s.waiting = 0;
            s.round += 1;
            s.released = Some(Instant::now());
            self.cv.notify_all();
            return s.released;
        }
        let round = s.round;
        while s.round == round && !s.off {
            s = self.cv.wait(s).unwrap_or_else(PoisonError::into_inner);
        }
        // A later round cannot be released before this party arrives at
        // it, so `released` is still this round's.
        if s.round != round { s.released } else { None }
    }

    /// Times a measured span: the main thread calls this where the workers
    /// meet the line before and after their timed work. The span runs from
    /// the first release to the second, so a main thread that wakes late
    /// from either does not shorten or lengthen it.
    pub(crate) fn time_between(&self) -> Duration {
        let start = self.wait_at();
        let end = self.wait_at();
        match (start, end) {
            (Some(s), Some(e)) => e.saturating_duration_since(s),
            _ => Duration::ZERO,
        }
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

/// Runs `work` on each ring in a thread of its own, all started together
/// behind a start line; the seconds from the start to the last thread's
/// end, and the sums of what the threads returned.
pub(crate) fn on_threads<F>(rings: &mut [Vec<Vec<u8>>], work: F) -> Result<(f64, u64, u64)>
where
    F: Fn(&mut Vec<Vec<u8>>) -> (u64, u64) + Sync,
{
    let n = rings.len();
    let line = StartLine::new(n + 1);
    std::thread::scope(|s| {
        let (line, work) = (&line, &work);
        let mut handles = Vec::with_capacity(n);
        for (i, ring) in rings.iter_mut().enumerate() {
            let h = spawn(s, i, n, move || {
                if !line.wait() {
                    return (0, 0);
                }
                let r = work(ring);
                line.wait();
                r
            });
            match h {
                Ok(h) => handles.push(h),
                Err(e) => {
                    line.call_off();
                    return Err(e);
                }
            }
        }
        let secs = line.time_between().as_secs_f64();
        let mut sum = (0, 0);
        for h in handles {
            let (a, b) = h
                .join()
                .map_err(|_| anyhow::anyhow!("a benchmark thread panicked"))?;
            sum = (sum.0 + a, sum.1 + b);
        }
        Ok((secs, sum.0, sum.1))
    })
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

    #[test]
    fn every_party_gets_the_same_release_time_and_the_span_covers_the_work() {
        let line = StartLine::new(3);
        let work = Duration::from_millis(30);
        let (span, seen) = std::thread::scope(|s| {
            let hs: Vec<_> = (0..2)
                .map(|i| {
                    let line = &line;
                    s.spawn(move || {
                        // Arrive at different times: the release is when
                        // the last one came.
                        std::thread::sleep(Duration::from_millis(5 * i));
                        let start = line.wait_at().unwrap();
                        std::thread::sleep(work);
                        let end = line.wait_at().unwrap();
                        (start, end)
                    })
                })
                .collect();
            let span = line.time_between();
            let seen: Vec<_> = hs.into_iter().map(|h| h.join().unwrap()).collect();
            (span, seen)
        });
        assert_eq!(seen[0], seen[1]);
        assert_eq!(seen[0].1 - seen[0].0, span);
        assert!(span >= work, "{span:?}");
    }
}
