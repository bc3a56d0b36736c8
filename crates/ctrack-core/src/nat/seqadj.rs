//! Sequence adjustment after a payload rewrite changed a segment's length
//! (Linux's `nf_ct_seqadj`): each direction remembers where its numbering
//! moved, so later segments, acknowledgments and SACK edges are shifted.

use ctrack_wire::SeqNum;

/// How a direction's sequence numbers moved after its payload was
/// lengthened or shortened: bytes up to and including the segment at `pos`
/// are off by `before`, later ones by `after` (Linux's `nf_ct_seqadj`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct SeqAdj {
    pos: u32,
    before: i32,
    after: i32,
}

impl SeqAdj {
    /// True once a rewrite changed a length.
    pub(crate) fn active(&self) -> bool {
        self.before != 0 || self.after != 0
    }

    /// Records that the segment starting at `seq` grew by `delta` bytes. A
    /// retransmission of the last rewritten segment (same `seq`) changes
    /// nothing.
    pub(crate) fn record(&mut self, seq: u32, delta: i32) {
        if delta == 0 {
            return;
        }
        if self.before == self.after || SeqNum(seq).after(SeqNum(self.pos)) {
            self.pos = seq;
            self.before = self.after;
            self.after = self.after.wrapping_add(delta);
        }
    }

    /// A sequence number of this direction as the receiver sees it.
    pub(crate) fn seq(&self, seq: u32) -> u32 {
        let (seq, pos) = (SeqNum(seq), SeqNum(self.pos));
        let off = if seq.after(pos) {
            self.after
        } else {
            self.before
        };
        (seq + off).0
    }

    /// An acknowledgment (or SACK edge) of this direction's bytes, sent by
    /// the receiver, put back in the sender's numbering.
    pub(crate) fn ack(&self, ack: u32) -> u32 {
        let (ack, pos) = (SeqNum(ack), SeqNum(self.pos));
        let off = if (ack - self.before).after(pos) {
            self.after
        } else {
            self.before
        };
        (ack - off).0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seqadj_follows_linux() {
        let mut a = SeqAdj::default();
        assert!(!a.active());
        assert_eq!(a.seq(5), 5);
        a.record(1000, 3);
        // The rewritten segment itself keeps its number; later ones move.
        assert_eq!(a.seq(1000), 1000);
        assert_eq!(a.seq(1020), 1023);
        // Acks of later bytes come back shifted.
        assert_eq!(a.ack(1023), 1020);
        // An ack of bytes up to the rewritten segment's start is unshifted.
        assert_eq!(a.ack(1000), 1000);
        // A retransmission of the rewritten segment adds nothing.
        a.record(1000, 3);
        assert_eq!(a.seq(1020), 1023);
        // A second rewrite later on.
        a.record(2000, -1);
        assert_eq!(a.seq(2000), 2003);
        assert_eq!(a.seq(2100), 2102);
        assert_eq!(a.ack(2102), 2100);
        // Across the 32-bit wrap.
        let mut w = SeqAdj::default();
        w.record(u32::MAX - 10, 5);
        assert_eq!(w.seq(3), 8);
        assert_eq!(w.ack(8), 3);
    }
}
