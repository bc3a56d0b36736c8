//! Bursts whose caller acts on each packet as soon as the tracker is done
//! with it, before the burst's next packet is looked up: a firewall
//! judging each packet on its verdict (and, for some, tracking it again
//! with a commit) sees the table exactly as it would frame by frame, yet
//! keeps the burst's prefetching.

use ctrack_wire::LinkType;

use super::tracker::{BURST, Tracker};
use crate::action::CtAction;
use crate::time::Time;
use crate::verdict::{Stats, Verdict};

/// What the caller of [`Tracker::process_burst_then`] (or
/// [`Tracker::process_burst_mut_then`]) does with each packet, in order,
/// as soon as its verdict is final (counted, and for the rewriting path
/// translated) and before the burst's next packet is looked up.
pub trait AfterEach {
    /// Whether, with verdict `v`, [`AfterEach::after`] will not touch the
    /// tracker's table (nor read more of it than `v`). The tracker may
    /// then judge the next packets of the same connection (a flow's run,
    /// under one hold of its lock) before calling `after` for this one.
    /// Called with an entry lock held: it must only look at `v`.
    fn settled(&self, v: &Verdict) -> bool;

    /// Packet `i` of the call (counting from its first frame), judged:
    /// `frame` as the tracker left it, `v` its verdict, `stats` the
    /// counters the tracker is counting the call into. The caller may
    /// track the frame again, commit, change or remove connections; it
    /// returns true if it may have changed the table, and the tracker then
    /// forgets the connection it holds from this packet.
    fn after(&mut self, i: usize, frame: &mut Vec<u8>, v: &mut Verdict, stats: &mut Stats) -> bool;
}

/// Nothing follows: the plain entry points.
impl AfterEach for () {
    #[inline(always)]
    fn settled(&self, _: &Verdict) -> bool {
        true
    }

    #[inline(always)]
    fn after(&mut self, _: usize, _: &mut Vec<u8>, _: &mut Verdict, _: &mut Stats) -> bool {
        false
    }
}

/// A read-only burst's frames and what follows each of its packets.
pub(super) trait Side {
    /// The frames, as slices (in `buf` where they must be gathered).
    fn refs<'s>(&'s self, buf: &'s mut [&'s [u8]; BURST]) -> &'s [&'s [u8]];
    /// Frame `i`.
    fn frame(&self, i: usize) -> &[u8];
    /// See [`AfterEach::settled`].
    fn settled(&self, v: &Verdict) -> bool;
    /// See [`AfterEach::after`].
    fn after(&mut self, i: usize, v: &mut Verdict, stats: &mut Stats) -> bool;
}

/// The frames of [`Tracker::process_burst`]: nothing follows.
pub(super) struct Plain<'a>(pub(super) &'a [&'a [u8]]);

impl Side for Plain<'_> {
    #[inline(always)]
    fn refs<'s>(&'s self, _: &'s mut [&'s [u8]; BURST]) -> &'s [&'s [u8]] {
        self.0
    }

    #[inline(always)]
    fn frame(&self, i: usize) -> &[u8] {
        self.0[i]
    }

    #[inline(always)]
    fn settled(&self, _: &Verdict) -> bool {
        true
    }

    #[inline(always)]
    fn after(&mut self, _: usize, _: &mut Verdict, _: &mut Stats) -> bool {
        false
    }
}

/// The frames of [`Tracker::process_burst_then`] (up to [`BURST`] of
/// them, the first being the call's frame `base`) and the caller's
/// [`AfterEach`].
pub(super) struct Then<'a, J> {
    pub(super) frames: &'a mut [Vec<u8>],
    pub(super) then: &'a mut J,
    pub(super) base: usize,
}

impl<J: AfterEach> Side for Then<'_, J> {
    #[inline]
    fn refs<'s>(&'s self, buf: &'s mut [&'s [u8]; BURST]) -> &'s [&'s [u8]] {
        for (r, f) in buf.iter_mut().zip(self.frames.iter()) {
            *r = f.as_slice();
        }
        &buf[..self.frames.len()]
    }

    #[inline(always)]
    fn frame(&self, i: usize) -> &[u8] {
        &self.frames[i]
    }

    #[inline(always)]
    fn settled(&self, v: &Verdict) -> bool {
        self.then.settled(v)
    }

    #[inline(always)]
    fn after(&mut self, i: usize, v: &mut Verdict, stats: &mut Stats) -> bool {
        self.then
            .after(self.base + i, &mut self.frames[i], v, stats)
    }
}

impl Tracker {
    /// [`Tracker::process_burst`], calling `then.after` for each packet as
    /// soon as its verdict is final and before the next packet is looked
    /// up: what `after` does to the table (a commit, a connection
    /// removed) the burst's later packets see, exactly as they would
    /// frame by frame. The verdicts and counts are those of
    /// [`Tracker::process`] frame by frame, each followed by `after`.
    #[allow(clippy::too_many_arguments)]
    pub fn process_burst_then<J: AfterEach>(
        &self,
        frames: &mut [Vec<u8>],
        link: LinkType,
        action: &CtAction,
        now: Time,
        out: &mut [Verdict],
        stats: &mut Stats,
        then: &mut J,
    ) {
        assert_eq!(frames.len(), out.len(), "one verdict per frame");
        self.in_bursts(action, now, stats, |t, cx, cache| {
            let mut base = 0;
            for (burst, outs) in frames.chunks_mut(BURST).zip(out.chunks_mut(BURST)) {
                let n = burst.len();
                let mut side = Then {
                    frames: burst,
                    then: &mut *then,
                    base,
                };
                t.burst(cx, &mut side, link, cache, outs);
                base += n;
            }
        });
    }

    /// [`Tracker::process_burst_mut`], calling `then.after` for each
    /// packet (translated) as [`Tracker::process_burst_then`] does.
    #[allow(clippy::too_many_arguments)]
    pub fn process_burst_mut_then<J: AfterEach>(
        &self,
        frames: &mut [Vec<u8>],
        link: LinkType,
        action: &CtAction,
        now: Time,
        out: &mut [Verdict],
        stats: &mut Stats,
        then: &mut J,
    ) {
        assert_eq!(frames.len(), out.len(), "one verdict per frame");
        self.in_bursts(action, now, stats, |t, cx, cache| {
            let mut base = 0;
            for (burst, outs) in frames.chunks_mut(BURST).zip(out.chunks_mut(BURST)) {
                let n = burst.len();
                t.burst_mut(cx, burst, link, cache, outs, then, base);
                base += n;
            }
        });
    }
}
