//! A tracker with fragment reassembly in front: what a datapath (or
//! `ctrack replay`) runs per packet.

use ctrack_wire::LinkType;

use super::tracker::Tracker;
use crate::action::CtAction;
use crate::frag::{FragConfig, FragError, Offer, Reassembler};
use crate::time::Time;
use crate::verdict::{Stats, Verdict};

/// A packet leaving the pipeline.
#[derive(Debug)]
pub struct Out<T> {
    /// The frame as it leaves (translated where NAT applies).
    pub frame: Vec<u8>,
    /// The caller's tag of the packet (given with it on the way in).
    pub tag: T,
    /// The tracker's verdict (for a fragment: its datagram's).
    pub verdict: Verdict,
}

/// What the pipeline hands back to one worker: the packets that leave, the
/// fragments dropped (with why), and the worker's counters.
#[derive(Debug)]
pub struct Outputs<T> {
    /// Packets leaving, in order.
    pub out: Vec<Out<T>>,
    /// Tags of fragments dropped (their datagram expired, overlapped, grew
    /// too big), with the reason.
    pub dropped: Vec<(T, FragError)>,
    /// The tracker's counters for this worker.
    pub stats: Stats,
}

impl<T> Default for Outputs<T> {
    fn default() -> Self {
        Outputs {
            out: Vec::new(),
            dropped: Vec::new(),
            stats: Stats::default(),
        }
    }
}

/// Reassembly, tracking, translation, gateways. `T` tags packets (a port,
/// a buffer handle, a capture index) so that fragments held across calls
/// can be told apart when they leave.
#[derive(Debug)]
pub struct Pipeline<T> {
    pub(super) tracker: Tracker,
    pub(super) frags: Reassembler<T>,
}

impl<T> Pipeline<T> {
    /// A pipeline around `tracker`, reassembling with `frag`.
    pub fn new(tracker: Tracker, frag: FragConfig) -> Pipeline<T> {
        Pipeline {
            tracker,
            frags: Reassembler::new(frag),
        }
    }

    /// The tracker.
    pub fn tracker(&self) -> &Tracker {
        &self.tracker
    }

    /// The reassembler.
    pub fn reassembler(&self) -> &Reassembler<T> {
        &self.frags
    }

    /// Processes one frame with `action` at `now`. What leaves goes to
    /// `outs.out`: nothing while a fragment is held, every fragment of a
    /// datagram when its last one arrives (each with the datagram's
    /// verdict), else the packet itself. Fragments dropped go to
    /// `outs.dropped` with the reason.
    pub fn process(
        &self,
        frame: Vec<u8>,
        tag: T,
        link: LinkType,
        action: &CtAction,
        now: Time,
        outs: &mut Outputs<T>,
    ) {
        self.expire(now, &mut outs.dropped);
        let (out, stats) = (&mut outs.out, &mut outs.stats);
        let checksums = self.tracker.checksums();
        match self
            .frags
            .offer(frame, tag, link, action.zone, now, checksums)
        {
            Offer::Pass(mut frame, tag) | Offer::Refused(mut frame, tag, _) => {
                // A refused fragment is judged as it is (invalid).
                let verdict = self
                    .tracker
                    .process_mut(&mut frame, link, action, now, stats);
                out.push(Out {
                    frame,
                    tag,
                    verdict,
                });
            }
            Offer::Held => {}
            Offer::Complete(mut d) => {
                let mut datagram = d.take_frame();
                let verdict = self
                    .tracker
                    .process_mut(&mut datagram, d.link, action, now, stats);
                for (frame, tag) in d.fragments(&datagram) {
                    out.push(Out {
                        frame,
                        tag,
                        verdict,
                    });
                }
            }
            Offer::Dropped(tags) => outs.dropped.extend(tags),
        }
    }

    /// Drops datagrams whose time ran out (also done by every
    /// [`Pipeline::process`]); their fragments' tags go to `dropped`.
    pub fn expire(&self, now: Time, dropped: &mut Vec<(T, FragError)>) {
        self.frags.expire_why(now, dropped);
    }
}
