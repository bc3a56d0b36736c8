//! The `parse` target's checks of what senders leave to offload
//! (`ctrack_wire::offload`): checksums finished, frames cut, frames made
//! ready to leave whole.

use ctrack_core::LinkType;
use ctrack_core::packet::extract::{ExtractOptions, extract};
use ctrack_wire::{checksum, parse_frame};

use crate::probe::Probe;

/// The frame made ready to leave whole with its segmentation left to the
/// kernel (`ctrack_wire::offload::hand_over`), as header bytes taken from
/// its end say it came in: only the checksum field changes; the kernel,
/// finishing it from `csum_start`, gets back a checksum the tracker takes
/// where the frame had one; and its segments are the frame's own.
pub(crate) fn hand_over(data: &[u8], probe: &mut Probe) {
    use ctrack_wire::offload::{Gso, VnetHdr, segment};
    let tail = |i: usize| data.len().checked_sub(i).map_or(0, |j| data[j]);
    let gso_type = [1, 4, 5, 3, 0][usize::from(tail(2)) % 5];
    let rx = VnetHdr {
        flags: 1,
        gso_type,
        hdr_len: 0,
        gso_size: 64 + u16::from(tail(1)) * 8,
        csum_start: 0,
        csum_offset: 0,
    };
    let mut f = data.to_vec();
    let h = ctrack_wire::offload::hand_over(&mut f, rx);
    probe.feature(15, (gso_type, h.is_some()));
    let changed: Vec<usize> = (0..f.len()).filter(|&i| f[i] != data[i]).collect();
    let Some(h) = h else {
        assert!(changed.is_empty(), "changed, not handed over: {data:02x?}");
        return;
    };
    let (start, at) = (
        usize::from(h.hdr.csum_start),
        usize::from(h.hdr.csum_offset),
    );
    assert!(
        changed
            .iter()
            .all(|&i| i == start + at || i == start + at + 1),
        "changed {changed:?}: {data:02x?}"
    );
    let layers = parse_frame(&f, LinkType::Ethernet);
    let ip = layers.ip.expect("handed over, so IP");
    assert_eq!(start, ip.l4);
    // The kernel's finish: the sum from csum_start, with the field as is.
    let mut done = f.clone();
    let c = checksum::finish(checksum::sum(0, &done[start..ip.end]));
    done[start + at..start + at + 2].copy_from_slice(&c.to_be_bytes());
    let mut whole = data.to_vec();
    if ctrack_wire::offload::complete(&mut whole).is_some() {
        let udp_zero = at == 6 && whole[start + 6..start + 8] == [0xff, 0xff] && c == 0;
        if !udp_zero {
            assert_eq!(done, whole, "finished differently: {data:02x?}");
        }
    }
    let gso = rx.gso();
    assert!(matches!(gso, Gso::Tcp(_) | Gso::Udp(_)));
    let cut = |frame: &[u8]| {
        let mut pieces = Vec::new();
        segment(frame, gso, &mut Vec::new(), |p| pieces.push(p.to_vec())).map(|_| pieces)
    };
    assert_eq!(cut(&f), cut(data), "cut differently: {data:02x?}");
}

/// The frame with its transport checksum finished as if its sender had
/// left it to offload (`ctrack_wire::offload`): nothing but the checksum
/// field changes, and a finished checksum is one the tracker takes.
pub(crate) fn complete(data: &[u8], probe: &mut Probe) {
    let mut f = data.to_vec();
    let done = ctrack_wire::offload::complete(&mut f);
    probe.feature(13, done);
    let changed: Vec<usize> = (0..f.len()).filter(|&i| f[i] != data[i]).collect();
    let Some(what) = done else {
        assert!(
            changed.is_empty(),
            "changed without completing: {data:02x?}"
        );
        return;
    };
    let layers = parse_frame(&f, LinkType::Ethernet);
    let ip = layers.ip.expect("completed, so IP");
    let field = match what {
        ctrack_wire::offload::Completed::Tcp => ip.l4 + 16..ip.l4 + 18,
        ctrack_wire::offload::Completed::Udp => ip.l4 + 6..ip.l4 + 8,
        ctrack_wire::offload::Completed::Sctp => ip.l4 + 8..ip.l4 + 12,
    };
    assert!(
        changed.iter().all(|i| field.contains(i)),
        "{what:?} changed {changed:?}: {data:02x?}"
    );
    let x = extract(&f, &layers, 3, ExtractOptions { checksums: true });
    assert!(
        !matches!(x, Err(ctrack_core::InvalidReason::BadL4Checksum)),
        "{what:?} completed, still a bad checksum: {data:02x?}"
    );
}

/// The frame cut as segmentation offload would (`ctrack_wire::offload::
/// segment`), at a size taken from its last byte: every piece is a frame
/// whose checksums the tracker takes, no longer than the size, and the
/// pieces' payloads together are the frame's.
pub(crate) fn segments(data: &[u8], probe: &mut Probe) {
    use ctrack_wire::offload::{Gso, segment};
    let size = 64 + u16::from(data.last().copied().unwrap_or(0)) * 8;
    for gso in [Gso::Tcp(size), Gso::Udp(size)] {
        let mut scratch = Vec::new();
        let mut pieces = Vec::new();
        let n = segment(data, gso, &mut scratch, |p| pieces.push(p.to_vec()));
        probe.feature(14, (gso, n.map(|n| n.min(4))));
        let Some(n) = n else {
            assert!(pieces.is_empty());
            continue;
        };
        assert_eq!(n, pieces.len());
        let ip = parse_frame(data, LinkType::Ethernet)
            .ip
            .expect("cut, so IP");
        let hl = |f: &[u8], l4: usize| match gso {
            Gso::Tcp(_) => usize::from(f[l4 + 12] >> 4) * 4,
            _ => 8,
        };
        let mut joined = Vec::new();
        for p in &pieces {
            let layers = parse_frame(p, LinkType::Ethernet);
            let pip = layers.ip.expect("a piece is IP");
            let body = &p[pip.l4 + hl(p, pip.l4)..pip.end];
            assert!(body.len() <= usize::from(size), "{data:02x?}");
            joined.extend_from_slice(body);
            let x = extract(p, &layers, 3, ExtractOptions { checksums: true });
            assert!(
                !matches!(
                    x,
                    Err(ctrack_core::InvalidReason::BadL4Checksum
                        | ctrack_core::InvalidReason::BadIpChecksum)
                ),
                "{gso:?}: a piece with a bad checksum ({x:?}): {data:02x?}"
            );
        }
        assert_eq!(
            joined,
            &data[ip.l4 + hl(data, ip.l4)..ip.end],
            "{data:02x?}"
        );
    }
}
