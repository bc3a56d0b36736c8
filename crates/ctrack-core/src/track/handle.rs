//! A thread's handle for one packet at a time: the epoch stays pinned
//! across calls instead of being pinned and unpinned for each.

use ctrack_table::{Guard, pin};
use ctrack_wire::LinkType;

use super::packet::Call;
use super::tracker::Tracker;
use crate::action::CtAction;
use crate::time::Time;
use crate::verdict::{Stats, Verdict};

/// Calls between two moves of a handle's pin to the current epoch: memory
/// the table retired meanwhile waits at most this many calls (and the
/// handle's lifetime) for this thread.
pub const REPIN_EVERY: u32 = 256;

/// A per-thread handle on a [`Tracker`] for callers that hand it one
/// packet per call (as Open vSwitch's `conntrack_execute` is called):
/// [`Handle::process`] gives the verdict [`Tracker::process`] would (and
/// [`Handle::process_mut`] what [`Tracker::process_mut`] would), but
/// keeps the thread's epoch pinned from one call to the next, so that a
/// call pays for the packet and nothing else. Every
/// [`REPIN_EVERY`] calls the pin moves on to the current epoch, so that
/// memory retired by other threads can be freed.
///
/// While a handle lives, its thread holds back the reclamation of memory
/// retired since its last repin: a thread that goes idle should call
/// [`Handle::quiesce`] or drop its handle. A handle stays on the thread
/// that made it (it is neither `Send` nor `Sync`). Callers with bursts of
/// packets should use [`Tracker::process_burst`] instead, which also
/// prefetches.
///
/// ```
/// use ctrack_core::{CtAction, CtState, LinkType, Stats, Time, Tracker};
/// use ctrack_wire::build::{Frame, L4};
///
/// let tracker = Tracker::default();
/// let mut handle = tracker.handle();
/// let mut stats = Stats::default();
/// let commit = CtAction::commit(0);
/// let ask = Frame::v4([10, 0, 0, 1], [10, 0, 0, 2], L4::udp(5000, 53, b"q")).build();
/// let answer = Frame::v4([10, 0, 0, 2], [10, 0, 0, 1], L4::udp(53, 5000, b"a")).build();
/// let v = handle.process(&ask, LinkType::Ethernet, &commit, Time::ZERO, &mut stats);
/// assert!(v.state.contains(CtState::NEW));
/// let v = handle.process(&answer, LinkType::Ethernet, &commit, Time::ZERO, &mut stats);
/// assert!(v.state.contains(CtState::EST | CtState::RPL));
/// ```
#[derive(Debug)]
pub struct Handle<'t> {
    tracker: &'t Tracker,
    guard: Guard,
    calls: u32,
}

impl Tracker {
    /// A handle for single-packet calls on this thread (see [`Handle`]).
    pub fn handle(&self) -> Handle<'_> {
        Handle {
            tracker: self,
            guard: pin(),
            calls: 0,
        }
    }
}

impl Handle<'_> {
    /// Tracks one frame captured with link type `link`: the same as
    /// [`Tracker::process`], under the handle's pin.
    #[inline]
    pub fn process(
        &mut self,
        frame: &[u8],
        link: LinkType,
        action: &CtAction,
        now: Time,
        stats: &mut Stats,
    ) -> Verdict {
        let tracker = self.tracker;
        tracker.single_in(&mut self.call(action, now, stats), frame, link, None)
    }

    /// Tracks one frame and carries out the action on it (translation,
    /// gateways): the same as [`Tracker::process_mut`], under the handle's
    /// pin.
    #[inline]
    pub fn process_mut(
        &mut self,
        frame: &mut Vec<u8>,
        link: LinkType,
        action: &CtAction,
        now: Time,
        stats: &mut Stats,
    ) -> Verdict {
        let tracker = self.tracker;
        tracker.single_mut_in(&mut self.call(action, now, stats), frame, link)
    }

    /// A call under the handle's pin, moved on first every
    /// [`REPIN_EVERY`] calls.
    #[inline]
    fn call<'a>(&'a mut self, action: &'a CtAction, now: Time, stats: &'a mut Stats) -> Call<'a> {
        self.calls += 1;
        if self.calls >= REPIN_EVERY {
            self.quiesce();
        }
        Call {
            guard: &self.guard,
            action,
            now,
            stats,
        }
    }

    /// Moves the handle's pin to the current epoch, so that this thread no
    /// longer holds back memory retired until now. Cheap; for a thread
    /// about to go idle, or between batches of calls.
    pub fn quiesce(&mut self) {
        self.guard.repin();
        // A pin taken while another is held (the handle's) never visits
        // the collector: let it advance the epoch and free what is due.
        self.guard.flush();
        self.calls = 0;
    }
}
