//! `bench policy stage --threads N`: the firewall and the plain lookup
//! on threads of their own, started together.

use anyhow::{Result, bail};
use ctrack_core::{Stats, Tracker};
use ctrack_policy::firewall::{Firewall, FwStats};

use super::super::threads::on_threads;
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
