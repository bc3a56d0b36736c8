//! Repeats, overlaps, a datagram's end and empty fragments: Linux's rules
//! (`ip_frag_queue` for IPv4, `nf_ct_frag6_queue` for IPv6, and
//! `inet_frag_queue_insert` for both), fragment by fragment.

use std::net::Ipv6Addr;

use ctrack_wire::LinkType;
use ctrack_wire::build::{Ext, Frame, L4};

use super::{Offer, Reassembler};
use crate::time::Time;

/// A fragment's payload bytes that are large enough for a fragment that is
/// not the last (IPv4: 1,200 bytes of IP packet at least; IPv6: 1,280), a
/// multiple of 8, and whose half is one too.
fn unit(v6: bool) -> usize {
    if v6 { 1280 } else { 1232 }
}

/// One fragment of datagram 7, UDP between fixed addresses: `len` bytes
/// of `fill` at `off`.
fn fragment(v6: bool, off: usize, len: usize, more: bool, fill: u8) -> Vec<u8> {
    let payload = L4::Raw {
        proto: 17,
        payload: vec![fill; len],
    };
    if v6 {
        let a: Ipv6Addr = "fd00::1".parse().unwrap();
        let b: Ipv6Addr = "fd00::2".parse().unwrap();
        let mut f = Frame::v6(a, b, payload);
        f.ext = vec![Ext::Fragment {
            offset: off as u16,
            more,
            ident: 7,
        }];
        f.build()
    } else {
        let mut f = Frame::v4([10, 0, 0, 1], [10, 0, 0, 2], payload);
        f.ident = 7;
        f.more_frags = more;
        f.frag_offset = off as u16;
        f.build()
    }
}

/// What became of a fragment: `held`, `complete`, the reason it was
/// refused on its own, or `dropped:` and the reason its datagram went.
pub(super) fn outcome<T>(o: &Offer<T>) -> String {
    match o {
        Offer::Pass(..) => "pass".into(),
        Offer::Held => "held".into(),
        Offer::Complete(_) => "complete".into(),
        Offer::Refused(_, _, e) => e.name().into(),
        Offer::Dropped(tags) => format!("dropped:{}", tags.last().map_or("", |t| t.1.name())),
    }
}

/// Offers `frags` (offset, length, more, fill) in order; what became of
/// each, and the payload of the datagram completed, if one was.
fn run(v6: bool, frags: &[(usize, usize, bool, u8)]) -> (Vec<String>, Option<Vec<u8>>) {
    let r: Reassembler<usize> = Reassembler::default();
    let mut payload = None;
    let outcomes = frags
        .iter()
        .enumerate()
        .map(|(i, &(off, len, more, fill))| {
            let frame = fragment(v6, off, len, more, fill);
            let o = r.offer(frame, i, LinkType::Ethernet, 0, Time::from_secs(1), true);
            if let Offer::Complete(d) = &o {
                let data = d.frame.len() - d.frags.iter().map(|f| f.len).sum::<usize>();
                payload = Some(d.frame[data..].to_vec());
            }
            outcome(&o)
        })
        .collect();
    (outcomes, payload)
}

fn both(test: impl Fn(bool)) {
    test(false);
    test(true);
}

#[test]
fn a_fragment_within_one_run_is_a_repeat_whatever_it_holds() {
    both(|v6| {
        let (u, h) = (unit(v6), unit(v6) / 2);
        // Two in order make one run; a third within it, of other bytes,
        // is dropped alone, and the datagram has the first bytes.
        let (o, data) = run(
            v6,
            &[
                (0, u, true, 1),
                (u, u, true, 2),
                (h, u, true, 9),
                (0, u, true, 8),
                (2 * u, 100, false, 3),
            ],
        );
        assert_eq!(
            o,
            ["held", "held", "duplicate", "duplicate", "complete"],
            "v6 {v6}"
        );
        let mut want = vec![1; u];
        want.extend(vec![2; u]);
        want.extend(vec![3; 100]);
        assert_eq!(data.unwrap(), want, "v6 {v6}");
    });
}

#[test]
fn a_fragment_across_two_runs_overlaps() {
    both(|v6| {
        let (u, h) = (unit(v6), unit(v6) / 2);
        // The second came before the first: two runs. A fragment within
        // both together reaches past each of them.
        let (o, _) = run(
            v6,
            &[
                (u, u, true, 2),
                (0, u, true, 1),
                (h, u, true, 1),
                (0, u, true, 1),
            ],
        );
        assert_eq!(
            o,
            ["held", "held", "dropped:overlap", "datagram_dropped"],
            "v6 {v6}"
        );
    });
}

#[test]
fn a_fragment_past_the_last_held_that_reaches_into_it_overlaps() {
    both(|v6| {
        let (u, h) = (unit(v6), unit(v6) / 2);
        let (o, _) = run(v6, &[(0, u, true, 1), (h, u, true, 1)]);
        assert_eq!(o, ["held", "dropped:overlap"], "v6 {v6}");
    });
}

#[test]
fn a_fragment_between_a_run_and_a_gap_overlaps() {
    both(|v6| {
        let (u, h) = (unit(v6), unit(v6) / 2);
        // Within what the fragments held span, but not within one run:
        // from a run into the gap after it, and from a gap into the run
        // after it.
        let (o, _) = run(
            v6,
            &[(0, u, true, 1), (2 * u, 100, false, 3), (h, u, true, 1)],
        );
        assert_eq!(o, ["held", "held", "dropped:overlap"], "v6 {v6}");
        let (o, _) = run(
            v6,
            &[(u, u, true, 2), (2 * u, 100, false, 3), (h, u, true, 2)],
        );
        assert_eq!(o, ["held", "held", "dropped:overlap"], "v6 {v6}");
    });
}

#[test]
fn an_ipv4_fragment_cut_to_a_multiple_of_8_leaves_as_it_came() {
    let u = unit(false);
    let frames = [
        fragment(false, 0, u, true, 1),
        fragment(false, u, u + 4, true, 2),
        fragment(false, 2 * u, 8, false, 3),
    ];
    let r: Reassembler<usize> = Reassembler::default();
    let mut done = None;
    for (i, f) in frames.iter().enumerate() {
        if let Offer::Complete(d) = r.offer(
            f.clone(),
            i,
            LinkType::Ethernet,
            0,
            Time::from_secs(1),
            true,
        ) {
            done = Some(d);
        }
    }
    let mut d = done.expect("complete");
    let whole = d.take_frame();
    // Its four bytes past the cut go on after it, as padding of its frame.
    let out: Vec<Vec<u8>> = d.fragments(&whole).into_iter().map(|(f, _)| f).collect();
    assert_eq!(out, frames);
}

#[test]
fn a_fragment_that_contradicts_the_datagram_s_end() {
    both(|v6| {
        let u = unit(v6);
        // IPv4 drops the datagram; IPv6 the fragment alone, and the
        // datagram completes.
        let (alone, dropped) = if v6 {
            ("malformed", "complete")
        } else {
            ("dropped:overlap", "datagram_dropped")
        };
        // Past the end the last fragment set.
        let (o, _) = run(
            v6,
            &[(u, 100, false, 2), (0, 2 * u, true, 1), (0, u, true, 1)],
        );
        assert_eq!(o, ["held", alone, dropped], "v6 {v6}");
        // A last fragment short of what is held.
        let (o, _) = run(
            v6,
            &[
                (0, u, true, 1),
                (u, u, true, 1),
                (u, 100, false, 2),
                (2 * u, 8, false, 3),
            ],
        );
        assert_eq!(o, ["held", "held", alone, dropped], "v6 {v6}");
        // A second last fragment with another end.
        let (o, _) = run(
            v6,
            &[(u, 100, false, 2), (u, 108, false, 2), (0, u, true, 1)],
        );
        assert_eq!(o, ["held", alone, dropped], "v6 {v6}");
    });
}

#[test]
fn an_empty_fragment() {
    both(|v6| {
        let u = unit(v6);
        // IPv4 drops the datagram; IPv6 the fragment alone, but takes its
        // end for the datagram's (Linux's `nf_ct_frag6_queue`): a last
        // fragment with another end contradicts it, and the datagram
        // completes without it.
        let (o, _) = run(
            v6,
            &[
                (0, u, true, 1),
                (2 * u, 0, false, 2),
                (2 * u, 8, false, 2),
                (u, u, true, 1),
            ],
        );
        let want = if v6 {
            ["held", "malformed", "malformed", "complete"]
        } else {
            [
                "held",
                "dropped:malformed",
                "datagram_dropped",
                "datagram_dropped",
            ]
        };
        assert_eq!(o, want, "v6 {v6}");
    });
}

#[test]
fn a_length_not_a_multiple_of_8() {
    both(|v6| {
        let u = unit(v6);
        // IPv6 drops the datagram; IPv4 cuts the fragment to a multiple
        // of 8 (its last four bytes are not the datagram's).
        let (o, data) = run(
            v6,
            &[
                (0, u, true, 1),
                (u, u + 4, true, 2),
                (u, u, true, 5),
                (2 * u, 8, false, 3),
            ],
        );
        let want = if v6 {
            [
                "held",
                "dropped:malformed",
                "datagram_dropped",
                "datagram_dropped",
            ]
        } else {
            ["held", "held", "duplicate", "complete"]
        };
        assert_eq!(o, want, "v6 {v6}");
        if !v6 {
            let mut whole = vec![1; u];
            whole.extend(vec![2; u]);
            whole.extend(vec![3; 8]);
            assert_eq!(data.unwrap(), whole);
        }
    });
}

#[test]
fn a_fragment_past_65535_bytes() {
    both(|v6| {
        let u = unit(v6);
        // IPv6 drops a fragment whose own data pass 65535 bytes alone;
        // IPv4 drops the datagram (Linux when it is whole, which it then
        // never is: its end contradicts the true last fragment's).
        let (o, _) = run(
            v6,
            &[
                (0, u, true, 1),
                (65528, 16, false, 2),
                (u, u, true, 1),
                (2 * u, 8, false, 3),
            ],
        );
        let want = if v6 {
            ["held", "too_big", "held", "complete"]
        } else {
            [
                "held",
                "dropped:too_big",
                "datagram_dropped",
                "datagram_dropped",
            ]
        };
        assert_eq!(o, want, "v6 {v6}");
    });
}
