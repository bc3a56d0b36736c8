//! Helpers the firewall's test files share: frames through
//! `Firewall::process` one by one, or through `Firewall::process_burst`,
//! and decisions as two trackers can compare them.

#![allow(dead_code)] // each test file uses some of these

use ctrack_core::Time;
use ctrack_policy::firewall::{BurstOut, Decision, Firewall, FwOutputs};
use ctrack_policy::model::Port;
use ctrack_wire::build::{Frame, L4};

/// A port of one MAC address, no IP addresses and no port security, in
/// `zone`.
pub(crate) fn port(name: &str, mac: [u8; 6], zone: u16) -> Port {
    Port {
        name: name.into(),
        macs: vec![mac],
        ips: Vec::new(),
        zone,
        security: Vec::new(),
        disabled: false,
    }
}

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

/// A TCP segment from `src` to `dst` (address, port), with its flags,
/// sequence and acknowledgement numbers, payload, and the MACs given.
pub(crate) fn seg(
    ((src, sp), (dst, dp)): (([u8; 4], u16), ([u8; 4], u16)),
    (flags, seq, ack): (u16, u32, u32),
    data: &[u8],
    (from, to): ([u8; 6], [u8; 6]),
) -> Vec<u8> {
    let mut f = Frame::v4(src, dst, L4::tcp_seg(sp, dp, flags, seq, ack, 65535, data));
    f.eth_src = from;
    f.eth_dst = to;
    f.build()
}
