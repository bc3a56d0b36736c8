//! Helpers the firewall's test files share: frames through
//! `Firewall::process` one by one, or through `Firewall::process_burst`,
//! and decisions as two trackers can compare them.

use ctrack_core::Time;
use ctrack_policy::firewall::{BurstOut, Decision, Firewall, FwOutputs};

/// Each frame through `Firewall::process`, one by one.
pub(crate) fn each(
    fw: &Firewall<u64>,
    frames: &[Vec<u8>],
    st: &mut FwOutputs<u64>,
) -> Vec<Decision> {
    frames
        .iter()
        .map(|f| {
            st.out.clear();
            fw.process(f.clone(), 0, Time::from_secs(1), st);
            assert_eq!(st.out.len(), 1);
            st.out.pop().unwrap().decision
        })
        .collect()
}

/// The frames through `Firewall::process_burst`, in one call.
pub(crate) fn in_a_burst(
    fw: &Firewall<u64>,
    frames: &[Vec<u8>],
    st: &mut FwOutputs<u64>,
) -> Vec<Decision> {
    let mut frames = frames.to_vec();
    let mut ds = vec![Decision::default(); frames.len()];
    fw.process_burst(
        &mut frames,
        Time::from_secs(1),
        BurstOut {
            decisions: &mut ds,
            replies: &mut Vec::new(),
            stats: &mut st.stats,
        },
    );
    ds
}

/// A decision without the connection's identity (which differs between two
/// trackers).
pub(crate) fn plain(d: &Decision) -> Decision {
    let mut d = *d;
    if let Some(v) = d.ct.as_mut() {
        v.conn = None;
    }
    d
}
