//! Fuzz bodies for the FTP text reader, the fragment reassembler and the
//! translating pipeline.

use arbitrary::{Arbitrary, Unstructured};
use ctrack_core::alg::ftp::{Side, Stream, format, parse_line};
use ctrack_core::frag::{FragConfig, Offer, Reassembler};
use ctrack_core::{CtAction, LinkType, Outputs, Pipeline, Time, Tracker};
use ctrack_wire::build::{Ext, Frame, L4};

/// The FTP reader on arbitrary text cut into arbitrary segments, with
/// arbitrary sequence numbers: spans found lie inside the segment, and the
/// text written back for them parses to the same announcement.
pub fn ftp(data: &[u8]) {
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
        for f in &scan.found {
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
pub fn reassembly(data: &[u8]) {
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
        match r.offer(frame, n, LinkType::Ethernet, 0, now, true) {
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

/// Frames (real traffic, mutated) through a pipeline that translates and
/// runs the FTP gateway: nothing panics, frames leave no larger than the
/// gateway may make them, and held fragments are bounded.
pub fn pipeline_frames(frames: &[Vec<u8>], action: &str) {
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
        for o in &outs.out {
            assert!(o.frame.len() <= 65_535 + 14 + 200);
        }
        assert!(p.reassembler().held() <= 16);
        if i % 64 == 0 {
            p.tracker().sweep(now, 1000, &mut outs.stats);
        }
    }
}
