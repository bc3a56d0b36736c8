//! `bench policy stage --threads N`: the firewall and the plain lookup
//! on threads of their own, started together.

use anyhow::{Result, bail};
use ctrack_core::{Stats, Tracker};
use ctrack_policy::firewall::{Firewall, FwStats};

use super::super::threads::{StartLine, spawn};
use super::{judge_all, plain_pass};

/// One run of the firewall and then one of the plain lookup `t`, each
/// with a thread per ring sending `packets` packets of it (whole passes
/// over the ring, as `rate` takes them); the total rate of each (millions of
/// packets a second), timed from the moment every thread is ready to the
/// moment the last is done. Every packet must pass the firewall.
pub(super) fn threaded_runs(
    fw: &Firewall<()>,
    t: &Tracker,
    rings: &mut [Vec<Vec<u8>>],
    packets: u64,
) -> Result<(f64, f64)> {
    let (secs, sent, passed) = on_threads(rings, |ring| {
        let mut st = FwStats::default();
        let (mut sent, mut passed) = (0, 0);
        while sent < packets {
            passed += judge_all(fw, ring, &mut st);
            sent += ring.len() as u64;
        }
        (sent, passed)
    })?;
    if passed != sent {
        bail!(
            "{} established packets did not pass the firewall",
            sent - passed
        );
    }
    let fw_mpps = sent as f64 / secs / 1e6;
    let (secs, sent, _) = on_threads(rings, |ring| {
        let refs: Vec<&[u8]> = ring.iter().map(Vec::as_slice).collect();
        let mut s = Stats::default();
        let mut sent = 0;
        while sent < packets {
            sent += plain_pass(t, &refs, &mut s);
        }
        (sent, 0)
    })?;
    Ok((fw_mpps, sent as f64 / secs / 1e6))
}

/// Runs `work` on each ring in a thread of its own, all started together
/// behind a start line; the seconds from the start to the last thread's
/// end, and the sums of what the threads returned.
fn on_threads<F>(rings: &mut [Vec<Vec<u8>>], work: F) -> Result<(f64, u64, u64)>
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
