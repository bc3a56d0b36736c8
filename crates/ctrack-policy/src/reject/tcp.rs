//! The TCP RST sent for a rejected segment.
//!
//! Sequence numbers follow RFC 793's "Reset Generation" (§3.4, group 1,
//! "the connection does not exist"), as Linux's own stack and netfilter's
//! `REJECT --reject-with tcp-reset` (`nf_reject_ip_tcphdr_put`) do:
//!
//! - the segment carries ACK: the RST takes its sequence number from the
//!   segment's acknowledgment number, and has no ACK flag;
//! - otherwise: the RST has sequence number 0, the ACK flag, and
//!   acknowledges the whole segment: its sequence number plus its payload
//!   length, plus one for SYN and one for FIN.
//!
//! pinctrl (`pinctrl_handle_tcp_reset`) always sends RST|ACK with sequence
//! number 0 and acknowledgment number `seq + 1`. For a bare SYN, the usual
//! rejected packet, both give the same RST. For a segment that carries ACK
//! (a connection already open when the policy changed) pinctrl's sequence
//! number 0 lies outside the receiver's window and the RST is ignored (RFC
//! 5961 §3.2 even asks for a challenge ACK); the RFC 793 answer is accepted
//! and ends the connection, which is what rejecting it means.
//!
//! The RST has a 20-byte header, no options, no payload, window 0, and the
//! ports of the segment swapped. For a first IPv4 fragment only the payload
//! bytes present count towards the acknowledgment.

use ctrack_wire::ip_proto;
use ctrack_wire::tcp::{TcpPacket, flags};

use super::{Answer, RESET_TTL};

/// What the RST answering a segment carries: its ports (already
/// swapped), sequence and acknowledgment numbers and flags.
#[derive(Debug, Clone, Copy)]
pub(super) struct Reset {
    sport: u16,
    dport: u16,
    seq: u32,
    ack: u32,
    flags: u16,
}

/// The RST answering the TCP segment `l4`, or `None` for a RST or a
/// segment whose header is cut short. Nothing is built yet
/// ([`Reset::answer`]).
pub(super) fn reset(l4: &[u8]) -> Option<Reset> {
    let seg = TcpPacket::new_checked(l4).ok()?;
    let f = seg.flags();
    if f & flags::RST != 0 {
        return None;
    }
    let (seq, ack, out_flags) = if f & flags::ACK != 0 {
        (seg.ack(), 0, flags::RST)
    } else {
        let payload = u32::try_from(seg.payload().len()).unwrap_or(u32::MAX);
        let len = payload
            .wrapping_add(u32::from(f & flags::SYN != 0))
            .wrapping_add(u32::from(f & flags::FIN != 0));
        (0, seg.seq().wrapping_add(len), flags::RST | flags::ACK)
    };
    Some(Reset {
        sport: seg.dst_port(),
        dport: seg.src_port(),
        seq,
        ack,
        flags: out_flags,
    })
}

impl Reset {
    /// The RST's header. The checksum is left zero for the caller, which
    /// knows the pseudo-header.
    pub(super) fn answer(self) -> Answer {
        let mut h = Vec::with_capacity(20);
        h.extend_from_slice(&self.sport.to_be_bytes());
        h.extend_from_slice(&self.dport.to_be_bytes());
        h.extend_from_slice(&self.seq.to_be_bytes());
        h.extend_from_slice(&self.ack.to_be_bytes());
        h.extend_from_slice(&((5 << 12) | self.flags).to_be_bytes());
        // Window, checksum (filled later), urgent pointer.
        h.extend_from_slice(&[0; 6]);
        Answer {
            proto: ip_proto::TCP,
            ttl: RESET_TTL,
            l4: h,
        }
    }
}
