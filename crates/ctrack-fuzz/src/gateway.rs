//! Fuzz bodies for the FTP text reader, the fragment reassembler and the
//! translating pipeline.

use arbitrary::{Arbitrary, Unstructured};
use ctrack_core::alg::ftp::{Side, Stream, format, parse_line};
use ctrack_core::frag::{FragConfig, Offer, Reassembler};
use ctrack_core::{CtAction, LinkType, Outputs, Pipeline, Time, Tracker};
use ctrack_wire::build::{Ext, Frame, L4};

use crate::Probe;

/// The FTP reader on arbitrary text cut into arbitrary segments, with
/// arbitrary sequence numbers: spans found lie inside the segment, and the
/// text written back for them parses to the same announcement. Counts the
/// segments read (whole lines read again at the end are not counted).
pub fn ftp(data: &[u8], probe: &mut Probe) {
    let mut u = Unstructured::new(data);
    let v6 = bool::arbitrary(&mut u).unwrap_or(false);
    let hold = bool::arbitrary(&mut u).unwrap_or(false);
    let mut streams = [Stream::default(), Stream::default()];
    let mut seq = [u32::arbitrary(&mut u).unwrap_or(1); 2];
    for _ in 0..256 {
        if u.is_empty() {
            break;
        }
        let side = if bool::arbitrary(&mut u).unwrap_or(false) {
            Side::Server
        } else {
            Side::Client
        };
        let i = side as usize;
        let len = u.int_in_range(0..=600usize).unwrap_or(0);
        let payload = u.bytes(len.min(u.len())).unwrap_or_default().to_vec();
        // Mostly in order; sometimes a retransmission or a gap.
        match u.int_in_range(0..=9u8).unwrap_or(0) {
            0 => seq[i] = seq[i].wrapping_sub(payload.len() as u32),
            1 => seq[i] = seq[i].wrapping_add(u32::arbitrary(&mut u).unwrap_or(7)),
            _ => {}
        }
        let scan = streams[i].feed(seq[i], &payload, side, v6, hold);
        probe.count(1);
        probe.feature(40, (i, scan.partial, scan.repeat, scan.found.len().min(4)));
        for f in &scan.found {
            probe.feature(
                41,
                (f.at.is_some(), std::mem::discriminant(&f.command.kind)),
            );
            if let Some(at) = &f.at {
                assert!(at.start <= at.end && at.end <= payload.len());
            }
            let addr = f.command.addr.unwrap_or(if v6 {
                "fd00::1".parse().unwrap()
            } else {
                "10.0.0.1".parse().unwrap()
            });
            let text = format(f.command.kind, addr, f.command.port);
            assert!(text.len() < 80);
        }
        if !(scan.partial && hold) {
            seq[i] = seq[i].wrapping_add(payload.len() as u32);
        }
    }
    // Whole lines as they are.
    for line in data.split(|&c| c == b'\n') {
        for side in [Side::Client, Side::Server] {
            for v6 in [false, true] {
                if let Some(c) = parse_line(line, side, v6) {
                    probe.feature(42, (side as u8, v6, std::mem::discriminant(&c.kind)));
                    assert!(c.span.end <= line.len());
                }
            }
        }
    }
}

/// Fragments of two datagrams (IPv4 or IPv6) cut arbitrarily, repeated,
/// overlapped and mixed with raw bytes, through a reassembler with small
/// bounds: it never holds more than its bound, a completed datagram goes
/// out as the fragments it came in, and all is freed once time runs out.
/// Counts the frames offered (fragments, and a few raw frames).
pub fn reassembly(data: &[u8], probe: &mut Probe) {
    let mut u = Unstructured::new(data);
    let max_frags = u.int_in_range(1..=40usize).unwrap_or(8);
    let r: Reassembler<u32> = Reassembler::new(FragConfig {
        max_frags,
        max_bytes: 200_000,
        min_v4: 400,
        min_v6: 400,
        ..FragConfig::default()
    });
    let v6 = bool::arbitrary(&mut u).unwrap_or(false);
    let mut now = Time::from_secs(100);
    let mut n = 0u32;
    for _ in 0..200 {
        if u.is_empty() {
            break;
        }
        n += 1;
        let frame = if u.int_in_range(0..=15u8).unwrap_or(0) == 0 {
            let len = u.int_in_range(0..=200usize).unwrap_or(0);
            u.bytes(len.min(u.len())).unwrap_or_default().to_vec()
        } else {
            let off = u.int_in_range(0..=80u16).unwrap_or(0) * 8 * 8;
            let len = u.int_in_range(0..=1400usize).unwrap_or(0);
            let more = bool::arbitrary(&mut u).unwrap_or(true);
            let id = u.int_in_range(0..=1u16).unwrap_or(0);
            let fill = u8::arbitrary(&mut u).unwrap_or(0);
            let payload = vec![fill; len];
            if v6 {
                let mut f = Frame::v6(
                    "fd00::1".parse().unwrap(),
                    "fd00::2".parse().unwrap(),
                    L4::Raw { proto: 17, payload },
                );
                f.ext = vec![Ext::Fragment {
                    offset: off,
                    more,
                    ident: u32::from(id),
                }];
                f.build()
            } else {
                let mut f = Frame::v4([10, 0, 0, 1], [10, 0, 0, 2], L4::Raw { proto: 17, payload });
                f.ident = id;
                f.more_frags = more;
                f.frag_offset = off;
                f.build()
            }
        };
        if u.int_in_range(0..=20u8).unwrap_or(0) == 0 {
            now = Time::from_millis(now.as_millis() + 16_000);
        }
        let mut expired = Vec::new();
        r.expire(now, &mut expired);
        let offer = r.offer(frame, n, LinkType::Ethernet, 0, now, true);
        probe.count(1);
        probe.feature(50, (offer_code(&offer), r.held().min(max_frags).min(8)));
        match offer {
            Offer::Complete(mut d) => {
                let count = d.fragment_count();
                let f = d.take_frame();
                assert_eq!(d.fragments(&f).len(), count);
            }
            Offer::Pass(..) | Offer::Held | Offer::Refused(..) | Offer::Dropped(_) => {}
        }
        assert!(r.held() <= max_frags);
    }
    let mut gone = Vec::new();
    r.expire(Time::from_millis(now.as_millis() + 60_000), &mut gone);
    assert_eq!(r.held(), 0, "everything expires");
}

/// A small code for what became of an offered frame.
fn offer_code(o: &Offer<u32>) -> (u8, Option<ctrack_core::FragError>) {
    match o {
        Offer::Pass(..) => (0, None),
        Offer::Held => (1, None),
        Offer::Complete(d) => (2 + d.fragment_count().min(8) as u8, None),
        Offer::Refused(_, _, e) => (11, Some(*e)),
        Offer::Dropped(v) => (12, v.first().map(|x| x.1)),
    }
}

/// The actions the translating pipeline is fuzzed under: those of the
/// NAT scenarios in `examples/nat/scenarios.tsv`, and plain tracking.
pub const PIPELINE_ACTIONS: [&str; 10] = [
    "commit,nat(src=198.51.100.1)",
    "commit,nat(src=2001:db8:ffff::1)",
    "commit,nat(src=198.51.100.10-198.51.100.20)",
    "commit,nat(dst=10.10.2.2:8080)",
    "commit,nat(src=198.51.100.1),alg=ftp",
    "commit,nat(src=2001:db8:ffff::1),alg=ftp",
    "commit,nat(src=198.51.100.1),alg=tftp",
    "commit,nat(dst=10.10.2.2)",
    "commit,nat(src=2001:db8:ffff::1-2001:db8:ffff::3)",
    "commit",
];

/// [`pipeline_frames`] on bytes: the first picks one of
/// [`PIPELINE_ACTIONS`], the rest is a frame list written by
/// [`crate::mutate::encode_frames`].
pub fn pipeline_frames_bytes(data: &[u8], probe: &mut Probe) {
    let Some((&pick, rest)) = data.split_first() else {
        return;
    };
    let action = PIPELINE_ACTIONS[usize::from(pick) % PIPELINE_ACTIONS.len()];
    pipeline_frames(&crate::mutate::decode_frames(rest), action, probe);
}

/// Frames (real traffic, mutated) through a pipeline that translates and
/// runs the FTP gateway: nothing panics, frames leave no larger than the
/// gateway may make them, and held fragments are bounded; and the
/// tracker's rewriting burst path agrees with its per-packet path on
/// them. Counts the frames in.
pub fn pipeline_frames(frames: &[Vec<u8>], action: &str, probe: &mut Probe) {
    let action: CtAction = action.parse().expect("a valid action");
    let p: Pipeline<usize> = Pipeline::new(
        Tracker::new(ctrack_core::Config {
            max_conns: 64,
            ..ctrack_core::Config::default()
        }),
        FragConfig {
            max_frags: 16,
            ..FragConfig::default()
        },
    );
    let mut now = Time::from_secs(10);
    let mut outs = Outputs::default();
    for (i, f) in frames.iter().enumerate() {
        now = Time::from_millis(now.as_millis() + 7);
        outs.out.clear();
        p.process(f.clone(), i, LinkType::Ethernet, &action, now, &mut outs);
        probe.count(1);
        probe.feature(60, (outs.out.len().min(8), outs.dropped.len().min(4)));
        for o in &outs.out {
            assert!(o.frame.len() <= 65_535 + 14 + 200);
            let v = &o.verdict;
            let delta = o.frame.len() as i64 - f.len() as i64;
            probe.feature(61, (v.state.bits(), v.invalid, delta.clamp(-8, 8)));
        }
        assert!(p.reassembler().held() <= 16);
        if i % 64 == 0 {
            p.tracker().sweep(now, 1000, &mut outs.stats);
        }
    }
    burst_agrees(frames, &action);
}

/// The rewriting burst path against the per-packet one on the same frames
/// (bursts of uneven sizes, one time each): the same verdicts and bytes.
/// Also with `untranslated_new`, as the firewall looks packets up.
fn burst_agrees(frames: &[Vec<u8>], action: &CtAction) {
    use ctrack_core::{Stats, Verdict};
    let lookup = CtAction {
        commit: false,
        alg: None,
        untranslated_new: true,
        ..*action
    };
    for action in [*action, lookup] {
        let (one, burst) = (
            Tracker::new(ctrack_core::Config::default()),
            Tracker::new(ctrack_core::Config::default()),
        );
        let (mut s1, mut s2) = (Stats::default(), Stats::default());
        let mut now = Time::from_secs(10);
        for (k, chunk) in frames.chunks(13).enumerate() {
            now = Time::from_millis(now.as_millis() + 7);
            for part in chunk.chunks(1 + k % 7) {
                let mut want = part.to_vec();
                let want_v: Vec<Verdict> = want
                    .iter_mut()
                    .map(|f| one.process_mut(f, LinkType::Ethernet, &action, now, &mut s1))
                    .collect();
                let mut got = part.to_vec();
                let mut got_v = vec![Verdict::default(); part.len()];
                burst.process_burst_mut(
                    &mut got,
                    LinkType::Ethernet,
                    &action,
                    now,
                    &mut got_v,
                    &mut s2,
                );
                for ((g, w), (gv, wv)) in got.iter().zip(&want).zip(got_v.iter().zip(&want_v)) {
                    assert_eq!(g, w, "bytes");
                    // Connection numbers differ between two tables.
                    let (mut gv, mut wv) = (*gv, *wv);
                    assert_eq!(gv.conn.take().is_some(), wv.conn.take().is_some());
                    assert_eq!(gv, wv);
                }
            }
        }
        assert_eq!(s1, s2, "counters");
    }
}
