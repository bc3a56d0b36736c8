//! TCP tracking with sequence and window checks, after Guido van Rooij's
//! "Real Stateful TCP Packet Filtering" as OpenBSD pf and Open vSwitch's
//! userspace conntrack apply it.
//!
//! Each side of a connection is a [`Peer`]: the highest sequence number it
//! sent (`seqlo`), the highest the other side allowed it to send (`seqhi`),
//! its largest window and its window scale. A segment is checked against
//! them in four steps, each a function here: flags that make no sense
//! ([`invalid_flags`]), a SYN that opens or reopens ([`syn_action`]), the
//! first segment a side sends (`init_peer`), then the window check
//! (`in_window`) with its loose fallback (`in_loose_window`). The
//! decision, the state changes and the timeout to apply are the same as
//! Open vSwitch's for every input; the table-driven tests below pin them.
//!
//! Most segments of a connection's life are ACKs between two ESTABLISHED
//! sides, in the window: for them only the window check and its advance
//! can say anything, and [`update`] (and the record's in-place version,
//! `Conn::tcp_established`) takes a shortcut that runs just those
//! (`established`, `established_peers`); a proptest checks that it
//! agrees with the four steps on every input.

use ctrack_wire::SeqNum as S;
use ctrack_wire::tcp::{MAX_WSCALE, flags};

use crate::proto::Update;
use crate::zone::Timeout;

/// TCP states per side, in the order Open vSwitch and Linux number them
/// (`CT_DPIF_TCPS_*`); comparisons between states rely on this order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
#[repr(u8)]
pub enum TcpState {
    /// Nothing sent (yet), or closed.
    #[default]
    Closed = 0,
    /// Unused by the tracker; kept for numbering.
    Listen = 1,
    /// Sent a SYN (or its first segment).
    SynSent = 2,
    /// Unused by the tracker; kept for numbering.
    SynRecv = 3,
    /// The other side acknowledged this side's SYN.
    Established = 4,
    /// Unused by the tracker; kept for numbering.
    CloseWait = 5,
    /// Unused by the tracker; kept for numbering.
    FinWait1 = 6,
    /// Sent a FIN.
    Closing = 7,
    /// Unused by the tracker; kept for numbering.
    LastAck = 8,
    /// The other side acknowledged this side's FIN.
    FinWait2 = 9,
    /// Reset, or closed both ways.
    TimeWait = 10,
}

impl TcpState {
    /// The state numbered `i` (`TimeWait` for anything past it).
    ///
    /// A `match`, not an array of the states indexed: the array was built
    /// on the stack at each call, about 8 instructions a TCP packet (the
    /// record's state is read through this for both sides; callgrind,
    /// `bench policy stage --proto tcp`).
    #[inline]
    pub fn from_index(i: u8) -> TcpState {
        use TcpState::*;
        match i {
            0 => Closed,
            1 => Listen,
            2 => SynSent,
            3 => SynRecv,
            4 => Established,
            5 => CloseWait,
            6 => FinWait1,
            7 => Closing,
            8 => LastAck,
            9 => FinWait2,
            _ => TimeWait,
        }
    }

    /// The name `conntrack` tools print.
    pub fn name(self) -> &'static str {
        match self {
            TcpState::Closed => "CLOSED",
            TcpState::Listen => "LISTEN",
            TcpState::SynSent => "SYN_SENT",
            TcpState::SynRecv => "SYN_RECV",
            TcpState::Established => "ESTABLISHED",
            TcpState::CloseWait => "CLOSE_WAIT",
            TcpState::FinWait1 => "FIN_WAIT_1",
            TcpState::Closing => "CLOSING",
            TcpState::LastAck => "LAST_ACK",
            TcpState::FinWait2 => "FIN_WAIT_2",
            TcpState::TimeWait => "TIME_WAIT",
        }
    }
}

/// Window-scale bookkeeping in [`Peer::wscale`]: the low bits hold the shift,
/// this bit says the side announced window scaling in its SYN.
pub const WSCALE_FLAG: u8 = 0x80;
/// The connection was picked up mid-stream, so the scale is unknown and the
/// largest is assumed.
pub const WSCALE_UNKNOWN: u8 = 0x40;
/// Mask of the shift.
pub const WSCALE_MASK: u8 = 0x0f;

/// How far an ACK may lag or lead: one unscaled window plus a fudge factor.
const MAX_ACK_WINDOW: i64 = 0xffff + 1500;

/// One side of a TCP connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Peer {
    /// Highest sequence number sent (end of the last segment).
    pub seqlo: u32,
    /// Highest sequence number the other side's ACK and window allow.
    pub seqhi: u32,
    /// Largest window seen from this side, before scaling.
    pub max_win: u16,
    /// Window scale: shift in the low bits, plus [`WSCALE_FLAG`] or
    /// [`WSCALE_UNKNOWN`].
    pub wscale: u8,
    /// State of this side.
    pub state: TcpState,
}

/// Both sides of a connection: `[original, reply]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TcpConn {
    /// `peers[0]` opened the connection; `peers[1]` answers.
    pub peers: [Peer; 2],
}

/// The fields of a segment the tracker reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Segment {
    /// Flag bits ([`flags`]).
    pub flags: u16,
    /// Sequence number.
    pub seq: u32,
    /// Acknowledgment number.
    pub ack: u32,
    /// Window, unscaled.
    pub win: u16,
    /// Payload bytes.
    pub payload_len: u32,
    /// Window-scale option, read as [`ctrack_wire::tcp::ovs_wscale`] does,
    /// from a SYN only ([`syn_wscale`]).
    pub wscale: Option<u8>,
}

/// The window scale segment `t` announces: read from a SYN only, the one
/// segment whose option counts (RFC 7323 §2.2), and the only one whose
/// option the tracker reads, as Open vSwitch's (`tcp_new_conn`,
/// `tcp_conn_update`). Not walking the options of every other segment
/// saved about 14 instructions a segment (`bench policy stage --proto
/// tcp` under callgrind).
#[inline]
pub fn syn_wscale<T: AsRef<[u8]>>(t: &ctrack_wire::tcp::TcpPacket<T>) -> Option<u8> {
    if t.flags() & flags::SYN == 0 {
        return None;
    }
    ctrack_wire::tcp::ovs_wscale(t.options())
}

impl Segment {
    fn has(&self, f: u16) -> bool {
        self.flags & f != 0
    }

    /// The sequence space the segment occupies: payload, plus one each for
    /// SYN and FIN.
    fn end(&self) -> u32 {
        let mut end = S(self.seq) + self.payload_len;
        if self.has(flags::SYN) {
            end += 1u32;
        }
        if self.has(flags::FIN) {
            end += 1u32;
        }
        end.0
    }

    /// The window-scale announcement as a [`Peer::wscale`] value.
    fn wscale_byte(&self) -> u8 {
        match self.wscale {
            Some(s) => WSCALE_FLAG | s.min(MAX_WSCALE),
            None => 0,
        }
    }
}

/// Flag combinations no TCP sends: SYN with RST or FIN; neither SYN, ACK nor
/// RST; FIN, PSH or URG without ACK. (pf checks this when scrubbing; Open
/// vSwitch always.)
pub fn invalid_flags(f: u16) -> bool {
    if f & flags::SYN != 0 {
        if f & (flags::RST | flags::FIN) != 0 {
            return true;
        }
    } else if f & (flags::ACK | flags::RST) == 0 {
        return true;
    }
    f & flags::ACK == 0 && f & (flags::FIN | flags::PSH | flags::URG) != 0
}

/// May a segment with these flags create a connection?
///
/// Never with invalid flags, never a SYN-ACK (a half-open connection is not
/// picked up). With `loose` (Open vSwitch's only behaviour, and Linux's
/// default `nf_conntrack_tcp_loose=1`) any other segment may, so that a
/// connection already established when tracking began is picked up
/// mid-stream; without it (Linux's `nf_conntrack_tcp_loose=0`) only a SYN.
pub fn valid_new(f: u16, loose: bool) -> bool {
    if invalid_flags(f) {
        return false;
    }
    if f & flags::SYN != 0 && f & flags::ACK != 0 {
        return false;
    }
    loose || f & flags::SYN != 0
}

/// The state of a connection created by `seg`, its first segment.
pub fn new_conn(seg: &Segment) -> TcpConn {
    let mut src = Peer {
        seqlo: seg.seq,
        seqhi: seg.seq.wrapping_add(seg.payload_len).wrapping_add(1),
        ..Peer::default()
    };
    let mut dst = Peer::default();
    if seg.has(flags::SYN) {
        src.seqhi = src.seqhi.wrapping_add(1);
        src.wscale = seg.wscale_byte();
    } else {
        src.wscale = WSCALE_UNKNOWN;
        dst.wscale = WSCALE_UNKNOWN;
    }
    src.max_win = seg.win.max(1);
    let sws = src.wscale & WSCALE_MASK;
    if sws != 0 {
        src.max_win = div_round_up(src.max_win, sws);
    }
    if seg.has(flags::FIN) {
        src.seqhi = src.seqhi.wrapping_add(1);
    }
    dst.seqhi = 1;
    dst.max_win = 1;
    src.state = TcpState::SynSent;
    dst.state = TcpState::Closed;
    TcpConn { peers: [src, dst] }
}

fn div_round_up(win: u16, shift: u8) -> u16 {
    let d = 1u32 << shift;
    u32::from(win).div_ceil(d) as u16
}

/// What a bare SYN (no ACK) does before any window check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SynAction {
    /// Both sides are past FIN_WAIT_2: the old connection is over and this
    /// SYN starts a new one in its place (TIME_WAIT reuse).
    Reopen,
    /// The sender has sent nothing but SYNs: a retransmission (or a
    /// simultaneous open). Still `new`.
    Retransmit,
    /// Go on to the window check.
    Check,
}

/// Classifies a segment's SYN against the state of both sides.
pub fn syn_action(f: u16, src: &Peer, dst: &Peer) -> SynAction {
    if f & (flags::SYN | flags::ACK) != flags::SYN {
        return SynAction::Check;
    }
    if dst.state >= TcpState::FinWait2 && src.state >= TcpState::FinWait2 {
        SynAction::Reopen
    } else if src.state <= TcpState::SynSent {
        SynAction::Retransmit
    } else {
        SynAction::Check
    }
}

/// The window-scale shifts to apply to this segment's window and the other
/// side's: both known and announced, both unknown (mid-stream pickup: assume
/// the largest), or none. SYNs are never scaled.
fn shifts(f: u16, src: &Peer, dst: &Peer) -> (u8, u8) {
    if f & flags::SYN != 0 {
        (0, 0)
    } else if src.wscale & WSCALE_FLAG != 0 && dst.wscale & WSCALE_FLAG != 0 {
        (src.wscale & WSCALE_MASK, dst.wscale & WSCALE_MASK)
    } else if src.wscale & WSCALE_UNKNOWN != 0 && dst.wscale & WSCALE_UNKNOWN != 0 {
        (MAX_WSCALE, MAX_WSCALE)
    } else {
        (0, 0)
    }
}

/// The first segment from a side that has sent nothing yet (the answer to a
/// SYN, or the first segment of the other side of a connection picked up
/// mid-stream): records where its sequence space starts, its window and
/// scale. Returns the window to use for this segment (unscaled from the SYN
/// if both sides scale), the possibly updated shifts, and whether the ACK
/// skew check applies.
fn init_peer(
    seg: &Segment,
    src: &mut Peer,
    dst: &mut Peer,
    sws: &mut u8,
    dws: &mut u8,
) -> (u16, bool) {
    let mut win = seg.win;
    let end = seg.end();
    if seg.has(flags::SYN) && dst.wscale & WSCALE_FLAG != 0 {
        src.wscale = seg.wscale_byte();
        if src.wscale & WSCALE_FLAG != 0 {
            // Remove the scale factor from the initial window.
            *sws = src.wscale & WSCALE_MASK;
            win = div_round_up(win, *sws);
            *dws = dst.wscale & WSCALE_MASK;
        } else {
            // The other side scales but this one does not: undo the other
            // side's scale (as a 16-bit shift, as pf does) and stop scaling.
            dst.max_win = ((u32::from(dst.max_win)) << (dst.wscale & WSCALE_MASK)) as u16;
            dst.wscale = 0;
        }
    }
    src.seqlo = seg.seq;
    src.state = TcpState::SynSent;
    // Slide the window if needed (seqhi may come from a mid-stream pickup).
    let mut check_ackskew = true;
    let allowed = (u32::from(dst.max_win) << *dws).max(1);
    if src.seqhi == 1 || S(end.wrapping_add(allowed)).at_or_after(S(src.seqhi)) {
        src.seqhi = end.wrapping_add(allowed);
        // A new connection, or one already in place: be lenient on ACKs.
        check_ackskew = false;
    }
    if win > src.max_win {
        src.max_win = win;
    }
    (win, check_ackskew)
}

/// What the window check reads of a segment: its flags, its sequence
/// number as sent and as tracked, the end of its data, how far its ACK is
/// behind the other side's data, and both sides' window shifts.
#[derive(Debug, Clone, Copy)]
struct Range {
    flags: u16,
    orig_seq: u32,
    seq: u32,
    end: u32,
    ackskew: i32,
    sws: u8,
    dws: u8,
}

/// The window check: the segment's last byte fits the other side's window,
/// it retransmits at most one window back, and its ACK is neither more than
/// a window behind nor ahead. A RST must carry the exact sequence number
/// (or one off).
fn in_window(g: &Range, src: &Peer, dst: &Peer) -> bool {
    let Range {
        flags: f,
        orig_seq,
        seq,
        end,
        ackskew,
        sws,
        dws,
    } = *g;
    let back = (u32::from(dst.max_win)) << dws;
    S(src.seqhi).at_or_after(S(end))
        && S(seq).at_or_after(S(src.seqlo) - back)
        && i64::from(ackskew) >= -MAX_ACK_WINDOW
        && i64::from(ackskew) <= (MAX_ACK_WINDOW << sws)
        && (f & flags::RST == 0
            || orig_seq == src.seqlo
            || orig_seq == src.seqlo.wrapping_add(1)
            || orig_seq.wrapping_add(1) == src.seqlo)
}

/// The loose fallback for segments outside the window: a side that has not
/// started, or a connection past FIN_WAIT_2, accepts anything within one
/// maximal window of the expected range. This covers stacks that shotgun
/// SYNs, connections picked up after a flush, and stray segments after a
/// close; the timeout is not refreshed, so a flood cannot keep an entry
/// alive.
fn in_loose_window(seq: u32, end: u32, src: &Peer, dst: &Peer) -> bool {
    (dst.state < TcpState::SynSent
        || dst.state >= TcpState::FinWait2
        || src.state >= TcpState::FinWait2)
        && S(src.seqhi.wrapping_add(MAX_ACK_WINDOW as u32)).at_or_after(S(end))
        && S(seq).at_or_after(S(src.seqlo.wrapping_sub(MAX_ACK_WINDOW as u32)))
}

/// Moves the windows after an accepted segment.
fn advance(src: &mut Peer, dst: &mut Peer, win: u16, end: u32, ack: u32, sws: u8) {
    if src.max_win < win {
        src.max_win = win;
    }
    src.seqlo = S(src.seqlo).max(S(end)).0;
    let scaled = u32::from(win) << sws;
    if S(ack.wrapping_add(scaled)).at_or_after(S(dst.seqhi)) {
        dst.seqhi = ack.wrapping_add(scaled.max(1));
    }
}

/// The timeout class for the states of the two sides.
pub fn timeout_for(src: TcpState, dst: TcpState) -> Timeout {
    use TcpState::*;
    if src >= FinWait2 && dst >= FinWait2 {
        Timeout::TcpClosed
    } else if src >= Closing && dst >= Closing {
        Timeout::TcpFinWait
    } else if src < Established || dst < Established {
        Timeout::TcpOpening
    } else if src >= Closing || dst >= Closing {
        Timeout::TcpClosing
    } else {
        Timeout::TcpEstablished
    }
}

/// Updates `conn` for a segment travelling in direction `reply`.
///
/// Returns the verdict and, when the connection's timeout is to be
/// refreshed, the class to refresh it with. With `seq_check` false, every
/// segment that passes the flag checks is taken as in window (for traffic
/// whose sequence numbers are rewritten elsewhere, or asymmetric paths).
#[inline]
pub fn update(
    conn: &mut TcpConn,
    seg: &Segment,
    reply: bool,
    seq_check: bool,
) -> (Update, Option<Timeout>) {
    if seq_check && let Some(r) = established(conn, seg, reply) {
        return r;
    }
    update_general(conn, seg, reply, seq_check)
}

/// [`update`] for the segment most of a connection's life is made of: an
/// ACK without SYN, FIN or RST, both sides ESTABLISHED, in the window.
/// What the general path checks besides cannot apply to it (the flags are
/// valid, no SYN to reopen or retransmit, neither side's first segment,
/// no state to move, the timeout class ESTABLISHED), so only the window
/// check and the window's advance are left; the same function as the
/// general path's, on the same values. `None`, with `conn` untouched,
/// for any other segment, or one outside the window: the general path
/// then decides (its loose fallback included). A test checks that the two
/// agree on every input.
///
/// Out of line: inlined into the firewall's burst loop (a large function
/// already) it took 94 instructions a segment there against 58 as a call
/// (callgrind, `bench policy stage --proto tcp`).
#[inline(never)]
fn established(
    conn: &mut TcpConn,
    seg: &Segment,
    reply: bool,
) -> Option<(Update, Option<Timeout>)> {
    if !established_flags(seg.flags) {
        return None;
    }
    let [p0, p1] = &mut conn.peers;
    let (src, dst) = if reply { (p1, p0) } else { (p0, p1) };
    if src.state != TcpState::Established || dst.state != TcpState::Established {
        return None;
    }
    let (s, d) = (*src, *dst);
    let (s2, d2) = established_peers(s, d, seg)?;
    (*src, *dst) = (s2, d2);
    Some((Update::Valid, Some(Timeout::TcpEstablished)))
}

/// Whether a segment's flags are those of the established fast path: ACK,
/// without SYN, FIN or RST (PSH, URG, ECE and CWR as they come).
#[inline(always)]
pub(crate) fn established_flags(f: u16) -> bool {
    f & (flags::SYN | flags::FIN | flags::RST | flags::ACK) == flags::ACK
}

/// The window check and advance of the established fast path, for a
/// segment whose flags pass [`established_flags`], from `src` to `dst`,
/// both ESTABLISHED: the two sides after the segment, or `None` if it is
/// outside the window (the general path then decides). Shared by
/// [`update`] and the connection record's in-place version
/// (`Conn::tcp_established`), which reads and writes only the words it
/// needs.
#[inline(always)]
pub(crate) fn established_peers(
    mut src: Peer,
    mut dst: Peer,
    seg: &Segment,
) -> Option<(Peer, Peer)> {
    let f = seg.flags;
    let (sws, dws) = shifts(f, &src, &dst);
    let (mut seq, mut end) = (seg.seq, seg.seq.wrapping_add(seg.payload_len));
    if seq == end {
        seq = src.seqlo;
        end = seq;
    }
    let range = Range {
        flags: f,
        orig_seq: seg.seq,
        seq,
        end,
        ackskew: S(dst.seqlo) - S(seg.ack),
        sws,
        dws,
    };
    if !in_window(&range, &src, &dst) {
        return None;
    }
    advance(&mut src, &mut dst, seg.win, end, seg.ack, sws);
    Some((src, dst))
}

/// [`update`] for every segment: the four steps of the module's
/// description (for a caller that tried the shortcut already).
pub(crate) fn update_general(
    conn: &mut TcpConn,
    seg: &Segment,
    reply: bool,
    seq_check: bool,
) -> (Update, Option<Timeout>) {
    let f = seg.flags;
    if invalid_flags(f) {
        return (Update::Invalid, None);
    }
    let [p0, p1] = &mut conn.peers;
    let (src, dst) = if reply { (p1, p0) } else { (p0, p1) };

    match syn_action(f, src, dst) {
        SynAction::Reopen => {
            src.state = TcpState::Closed;
            dst.state = TcpState::Closed;
            return (Update::New, None);
        }
        SynAction::Retransmit => {
            src.state = TcpState::SynSent;
            return (Update::ValidNew, Some(Timeout::TcpFirstPacket));
        }
        SynAction::Check => {}
    }

    let (mut sws, mut dws) = shifts(f, src, dst);
    let orig_seq = seg.seq;
    let mut seq = seg.seq;
    let mut end = seg.end();
    let mut win = seg.win;
    let mut check_ackskew = true;
    if src.state < TcpState::SynSent {
        let (w, c) = init_peer(seg, src, dst, &mut sws, &mut dws);
        win = w;
        check_ackskew = c;
    }

    let mut ack = seg.ack;
    if f & flags::ACK == 0 {
        // Let it through the ACK skew check.
        ack = dst.seqlo;
    } else if ack == 0 && f & (flags::ACK | flags::RST) == (flags::ACK | flags::RST) {
        // Broken stacks send RST|ACK with a zero ACK.
        ack = dst.seqlo;
    }

    if seq == end {
        // Ease sequencing restrictions on segments without data.
        seq = src.seqlo;
        end = seq;
    }

    let ackskew = if check_ackskew {
        S(dst.seqlo) - S(ack)
    } else {
        0
    };

    let range = Range {
        flags: f,
        orig_seq,
        seq,
        end,
        ackskew,
        sws,
        dws,
    };
    if !seq_check || in_window(&range, src, dst) {
        advance(src, dst, win, end, ack, sws);
        if f & flags::SYN != 0 && src.state < TcpState::SynSent {
            src.state = TcpState::SynSent;
        }
        if f & flags::FIN != 0 && src.state < TcpState::Closing {
            src.state = TcpState::Closing;
        }
        if f & flags::ACK != 0 {
            if dst.state == TcpState::SynSent {
                dst.state = TcpState::Established;
            } else if dst.state == TcpState::Closing {
                dst.state = TcpState::FinWait2;
            }
        }
        if f & flags::RST != 0 {
            src.state = TcpState::TimeWait;
            dst.state = TcpState::TimeWait;
        }
        (Update::Valid, Some(timeout_for(src.state, dst.state)))
    } else if in_loose_window(seq, end, src, dst) {
        advance(src, dst, win, end, ack, sws);
        if f & flags::FIN != 0 && src.state < TcpState::Closing {
            src.state = TcpState::Closing;
        }
        if f & flags::RST != 0 {
            src.state = TcpState::TimeWait;
            dst.state = TcpState::TimeWait;
        }
        (Update::Valid, None)
    } else {
        (Update::Invalid, None)
    }
}

impl TcpConn {
    /// The state `conntrack -L` and `dpctl/dump-conntrack` print: the later
    /// of the two sides' states, with FIN_WAIT_2 shown as TIME_WAIT and
    /// SYN_RECV as ESTABLISHED (as Open vSwitch does to match the kernel).
    pub fn display_state(&self) -> TcpState {
        let s = self.peers[0].state.max(self.peers[1].state);
        match s {
            TcpState::FinWait2 => TcpState::TimeWait,
            TcpState::SynRecv => TcpState::Established,
            other => other,
        }
    }

    /// True once both sides reached ESTABLISHED (and neither is closing).
    pub fn is_established(&self) -> bool {
        self.peers
            .iter()
            .all(|p| p.state >= TcpState::Established && p.state < TcpState::Closing)
    }
}

/// What the proptests of the fast paths (here and the record's) share.
#[cfg(test)]
pub(crate) mod testing {
    use super::{Peer, TcpState, WSCALE_FLAG, WSCALE_UNKNOWN};
    use proptest::prelude::*;

    /// One side of a connection whose numbers lie near 1,000,000 (so that
    /// two of them make windows that segments fall in or near), ESTABLISHED
    /// three times in four, every window scale kind.
    pub(crate) fn any_peer() -> impl Strategy<Value = Peer> {
        (
            0u8..11,
            0u32..4096,
            0u32..70_000,
            any::<u16>(),
            prop_oneof![
                Just(0u8),
                Just(WSCALE_UNKNOWN),
                (0u8..15).prop_map(|s| WSCALE_FLAG | s)
            ],
            prop_oneof![3 => Just(true), 1 => Just(false)],
        )
            .prop_map(|(st, lo, span, win, wscale, est)| Peer {
                seqlo: 1_000_000u32.wrapping_add(lo),
                seqhi: 1_000_000u32.wrapping_add(lo).wrapping_add(span),
                max_win: win,
                wscale,
                state: if est {
                    TcpState::Established
                } else {
                    TcpState::from_index(st)
                },
            })
    }
}

#[cfg(test)]
mod tests {
    use super::testing::any_peer;
    use super::*;
    use flags::*;
    use proptest::prelude::*;

    fn seg(flags: u16, seq: u32, ack: u32, win: u16, len: u32) -> Segment {
        Segment {
            flags,
            seq,
            ack,
            win,
            payload_len: len,
            wscale: None,
        }
    }

    #[test]
    fn invalid_flag_table() {
        let cases: &[(u16, bool)] = &[
            (SYN, false),
            (SYN | ACK, false),
            (ACK, false),
            (RST, false),
            (RST | ACK, false),
            (FIN | ACK, false),
            (PSH | ACK, false),
            (SYN | RST, true),
            (SYN | FIN, true),
            (SYN | FIN | ACK, true),
            (0, true),
            (FIN, true),
            (PSH, true),
            (URG, true),
            (RST | FIN, true),
            (RST | PSH, true),
            (SYN | PSH, true),
            (SYN | URG, true),
            (ECE | CWR | ACK, false),
        ];
        for &(f, inv) in cases {
            assert_eq!(invalid_flags(f), inv, "flags {f:#x}");
        }
    }

    #[test]
    fn valid_new_table() {
        let cases: &[(u16, bool, bool)] = &[
            // flags, loose, valid
            (SYN, true, true),
            (SYN, false, true),
            (SYN | ACK, true, false),
            (SYN | ACK, false, false),
            (ACK, true, true),
            (ACK, false, false),
            (RST, true, true),
            (RST, false, false),
            (FIN | ACK, true, true),
            (FIN | ACK, false, false),
            (SYN | RST, true, false),
            (0, true, false),
        ];
        for &(f, loose, ok) in cases {
            assert_eq!(valid_new(f, loose), ok, "flags {f:#x} loose {loose}");
        }
    }

    #[test]
    fn new_conn_from_syn_and_midstream() {
        let mut s = seg(SYN, 1000, 0, 29200, 0);
        s.wscale = Some(7);
        let c = new_conn(&s);
        assert_eq!(c.peers[0].seqlo, 1000);
        assert_eq!(c.peers[0].seqhi, 1002);
        assert_eq!(c.peers[0].wscale, WSCALE_FLAG | 7);
        assert_eq!(c.peers[0].max_win, 229); // ceil(29200 / 128)
        assert_eq!(c.peers[0].state, TcpState::SynSent);
        assert_eq!((c.peers[1].seqhi, c.peers[1].max_win), (1, 1));
        assert_eq!(c.peers[1].state, TcpState::Closed);

        let c = new_conn(&seg(ACK, 5000, 9000, 0, 100));
        assert_eq!(c.peers[0].seqhi, 5101);
        assert_eq!(c.peers[0].max_win, 1, "a zero window counts as one");
        assert_eq!(c.peers[0].wscale, WSCALE_UNKNOWN);
        assert_eq!(c.peers[1].wscale, WSCALE_UNKNOWN);
        // Picked up on a FIN: it takes a sequence number too (Open
        // vSwitch's `tcp_new_conn`).
        let c = new_conn(&seg(FIN | ACK, 7000, 9000, 100, 10));
        assert_eq!(c.peers[0].seqhi, 7012);
    }

    /// Runs a sequence of (segment, reply) through a connection created by
    /// the first one, returning each verdict and timeout.
    fn run(steps: &[(Segment, bool)]) -> (TcpConn, Vec<(Update, Option<Timeout>)>) {
        let mut c = new_conn(&steps[0].0);
        let out = steps[1..]
            .iter()
            .map(|(s, r)| update(&mut c, s, *r, true))
            .collect();
        (c, out)
    }

    #[test]
    fn handshake_data_and_fin_close() {
        let (c, out) = run(&[
            (seg(SYN, 100, 0, 65535, 0), false),
            (seg(SYN | ACK, 500, 101, 65535, 0), true),
            (seg(ACK, 101, 501, 65535, 0), false),
            (seg(PSH | ACK, 101, 501, 65535, 10), false),
            (seg(ACK, 501, 111, 65535, 0), true),
            (seg(FIN | ACK, 111, 501, 65535, 0), false),
            (seg(FIN | ACK, 501, 112, 65535, 0), true),
            (seg(ACK, 112, 502, 65535, 0), false),
        ]);
        use Timeout::*;
        let expect = [
            (Update::Valid, Some(TcpOpening)),
            (Update::Valid, Some(TcpEstablished)),
            (Update::Valid, Some(TcpEstablished)),
            (Update::Valid, Some(TcpEstablished)),
            (Update::Valid, Some(TcpClosing)),
            (Update::Valid, Some(TcpFinWait)),
            (Update::Valid, Some(TcpClosed)),
        ];
        assert_eq!(out, expect);
        assert_eq!(c.peers[0].state, TcpState::FinWait2);
        assert_eq!(c.peers[1].state, TcpState::FinWait2);
        assert_eq!(c.display_state(), TcpState::TimeWait);
    }

    #[test]
    fn syn_retransmit_and_reuse() {
        let (_, out) = run(&[
            (seg(SYN, 100, 0, 65535, 0), false),
            (seg(SYN, 100, 0, 65535, 0), false),
        ]);
        assert_eq!(out, [(Update::ValidNew, Some(Timeout::TcpFirstPacket))]);

        // A closed connection reopened by a new SYN.
        let (c, out) = run(&[
            (seg(SYN, 100, 0, 65535, 0), false),
            (seg(SYN | ACK, 500, 101, 65535, 0), true),
            (seg(ACK, 101, 501, 65535, 0), false),
            (seg(FIN | ACK, 101, 501, 65535, 0), false),
            (seg(FIN | ACK, 501, 102, 65535, 0), true),
            (seg(ACK, 102, 502, 65535, 0), false),
            (seg(SYN, 90000, 0, 65535, 0), false),
        ]);
        assert_eq!(out.last(), Some(&(Update::New, None)));
        assert_eq!(c.peers[0].state, TcpState::Closed);
    }

    #[test]
    fn rst_in_and_out_of_window() {
        let base = [
            (seg(SYN, 100, 0, 1000, 0), false),
            (seg(SYN | ACK, 500, 101, 1000, 0), true),
            (seg(ACK, 101, 501, 1000, 0), false),
        ];
        // Exact sequence: accepted, both sides to TIME_WAIT.
        let mut steps = base.to_vec();
        steps.push((seg(RST, 501, 0, 0, 0), true));
        let (c, out) = run(&steps);
        assert_eq!(out[2], (Update::Valid, Some(Timeout::TcpClosed)));
        assert_eq!(c.peers[0].state, TcpState::TimeWait);
        // Inside the window but not exact: refused.
        let mut steps = base.to_vec();
        steps.push((seg(RST, 600, 0, 0, 0), true));
        let (c, out) = run(&steps);
        assert_eq!(out[2], (Update::Invalid, None));
        assert_eq!(c.peers[0].state, TcpState::Established);
        // Far outside the window: refused.
        let mut steps = base.to_vec();
        steps.push((seg(RST | ACK, 3_000_000, 101, 0, 0), true));
        assert_eq!(run(&steps).1[2], (Update::Invalid, None));
        // One either side of the exact number: accepted (Open vSwitch's
        // "exact/+1" match, which takes one below as well); two below: not.
        for (seq, ok) in [(502, true), (500, true), (499, false)] {
            let mut steps = base.to_vec();
            steps.push((seg(RST, seq, 0, 0, 0), true));
            let want = match ok {
                true => (Update::Valid, Some(Timeout::TcpClosed)),
                false => (Update::Invalid, None),
            };
            assert_eq!(run(&steps).1[2], want, "RST at {seq}");
        }
    }

    /// A segment without ACK (a bare RST) is spared the ACK skew check,
    /// whatever its acknowledgement field holds.
    #[test]
    fn a_segment_without_ack_is_spared_the_ack_skew() {
        let (c, out) = run(&[
            (seg(SYN, 3_000_000, 0, 65535, 0), false),
            (seg(SYN | ACK, 500, 3_000_001, 65535, 0), true),
            (seg(ACK, 3_000_001, 501, 65535, 0), false),
            (seg(RST, 501, 0, 0, 0), true),
        ]);
        assert_eq!(out[2], (Update::Valid, Some(Timeout::TcpClosed)));
        assert_eq!(c.peers[0].state, TcpState::TimeWait);
    }

    /// A FIN sent again after it was acknowledged leaves its side where
    /// it is (FIN_WAIT_2): only a side not yet closing moves to CLOSING.
    #[test]
    fn a_fin_sent_again_after_its_ack_moves_nothing_back() {
        let (c, out) = run(&[
            (seg(SYN, 100, 0, 65535, 0), false),
            (seg(SYN | ACK, 500, 101, 65535, 0), true),
            (seg(ACK, 101, 501, 65535, 0), false),
            (seg(FIN | ACK, 101, 501, 65535, 0), false),
            (seg(ACK, 501, 102, 65535, 0), true),
            (seg(FIN | ACK, 101, 501, 65535, 0), false),
        ]);
        assert_eq!(c.peers[0].state, TcpState::FinWait2);
        assert_eq!(out[4], (Update::Valid, Some(Timeout::TcpClosing)));
    }

    /// A RST the loose check lets through (inexact, on a connection
    /// picked up mid-stream whose other side has sent nothing) closes
    /// both sides, without refreshing the timeout.
    #[test]
    fn a_reset_the_loose_check_lets_through_closes_both_sides() {
        let (c, out) = run(&[
            (seg(ACK, 1000, 9000, 500, 100), false),
            (seg(RST, 1050, 0, 0, 0), false),
        ]);
        assert_eq!(out[0], (Update::Valid, None));
        assert_eq!(
            (c.peers[0].state, c.peers[1].state),
            (TcpState::TimeWait, TcpState::TimeWait)
        );
    }

    /// Old data sent again does not move its side's highest sequence
    /// number back: a RST at the true next number is still exact.
    #[test]
    fn a_retransmission_leaves_the_highest_sequence_number() {
        let (_, out) = run(&[
            (seg(SYN, 100, 0, 65535, 0), false),
            (seg(SYN | ACK, 500, 101, 65535, 0), true),
            (seg(ACK, 101, 501, 65535, 0), false),
            (seg(PSH | ACK, 101, 501, 65535, 100), false),
            (seg(PSH | ACK, 101, 501, 65535, 50), false),
            (seg(RST, 201, 0, 0, 0), false),
        ]);
        assert_eq!(out[4], (Update::Valid, Some(Timeout::TcpClosed)));
    }

    /// A zero window still lets one byte through (a window probe), as
    /// Open vSwitch keeps at least one in the window (`MAX(win, 1)`).
    #[test]
    fn a_zero_window_admits_a_probe() {
        let (_, out) = run(&[
            (seg(SYN, 100, 0, 65535, 0), false),
            (seg(SYN | ACK, 500, 101, 1000, 0), true),
            (seg(ACK, 101, 501, 65535, 0), false),
            // The server's window filled.
            (seg(PSH | ACK, 101, 501, 65535, 1000), false),
            (seg(ACK, 501, 1101, 0, 0), true),
            // A one-byte probe.
            (seg(ACK, 1101, 501, 65535, 1), false),
        ]);
        assert_eq!(
            out[4],
            (Update::Valid, Some(Timeout::TcpEstablished)),
            "{out:?}"
        );
    }

    /// A connection picked up mid-stream has unknown window scales, so
    /// both windows are taken at the largest scale: data beyond the
    /// other side's window unscaled is in it.
    #[test]
    fn a_midstream_pickup_takes_windows_at_the_largest_scale() {
        let (_, out) = run(&[
            (seg(ACK, 1_000_000, 2_000_000, 500, 100), false),
            (seg(ACK, 2_000_000, 1_000_100, 500, 0), true),
            // 1,400 bytes against a window of 500 (unscaled).
            (seg(ACK, 1_000_100, 2_000_000, 500, 1400), false),
            (seg(ACK, 2_000_000, 1_001_500, 500, 0), true),
        ]);
        assert_eq!(out[1], (Update::Valid, Some(Timeout::TcpEstablished)));
        assert_eq!(out[2], (Update::Valid, Some(Timeout::TcpEstablished)));
    }

    /// The other side's first segment of a connection picked up
    /// mid-stream is not held to the ACK skew check when its window
    /// slides the sequence space (Open vSwitch: "we are more permissive
    /// in terms of ackskew checking in these cases"), even where the
    /// first side's segments have set where that side may go.
    #[test]
    fn the_second_side_s_first_segment_is_not_held_to_the_ack_skew() {
        let (_, out) = run(&[
            (seg(ACK, 1000, 5000, 100, 10), false),
            (seg(ACK, 1010, 5000, 100, 10), false),
            // Acknowledges far past anything the client sent.
            (seg(ACK, 5000, 900_000, 100, 0), true),
        ]);
        assert_eq!(out[1].0, Update::Valid, "{out:?}");
    }

    #[test]
    fn data_beyond_the_window_is_invalid() {
        let (_, out) = run(&[
            (seg(SYN, 100, 0, 1000, 0), false),
            (seg(SYN | ACK, 500, 101, 1000, 0), true),
            (seg(ACK, 101, 501, 1000, 0), false),
            // 1000-byte window from the server: 2000 bytes cannot fit.
            (seg(ACK, 101, 501, 1000, 2000), false),
            // Within the window.
            (seg(ACK, 101, 501, 1000, 500), false),
            // An ACK for data never sent (far ahead).
            (seg(ACK, 501, 200_000, 1000, 0), true),
        ]);
        assert_eq!(out[2], (Update::Invalid, None));
        assert_eq!(out[3], (Update::Valid, Some(Timeout::TcpEstablished)));
        assert_eq!(out[4], (Update::Invalid, None));
    }

    /// The handshake of a client at 100 and a server at 500, windows
    /// `win` each way, no scaling.
    fn opened(win: u16) -> Vec<(Segment, bool)> {
        vec![
            (seg(SYN, 100, 0, win, 0), false),
            (seg(SYN | ACK, 500, 101, win, 0), true),
            (seg(ACK, 101, 501, win, 0), false),
        ]
    }

    /// A retransmission may reach back one window of the other side's (its
    /// largest), not further (pf's "Retrans: not more than one window
    /// back"; Open vSwitch's `tcp_conn_update`).
    #[test]
    fn a_retransmission_reaches_back_one_window_at_most() {
        let mut steps = opened(1000);
        // Three windows of data, each acknowledged.
        for k in 0..3 {
            let at = 101 + 1000 * k;
            steps.push((seg(ACK, at, 501, 1000, 1000), false));
            steps.push((seg(ACK, 501, at + 1000, 1000, 0), true));
        }
        // The client's sequence is at 3101: one window back is 2101.
        steps.push((seg(ACK, 2500, 501, 1000, 10), false));
        steps.push((seg(ACK, 101, 501, 1000, 10), false));
        let (_, out) = run(&steps);
        let n = out.len();
        assert_eq!(out[n - 2], (Update::Valid, Some(Timeout::TcpEstablished)));
        assert_eq!(out[n - 1], (Update::Invalid, None));
    }

    /// The largest window a side announced stays its largest when it
    /// announces a smaller one: how far back a retransmission may reach
    /// does not shrink with it.
    #[test]
    fn a_sides_largest_window_is_kept_when_it_shrinks() {
        let (c, out) = run(&[
            (seg(SYN, 100, 0, 1000, 0), false),
            (seg(SYN | ACK, 500, 101, 60000, 0), true),
            (seg(ACK, 101, 501, 1000, 0), false),
            (seg(ACK, 101, 501, 1000, 10000), false),
            // The server acknowledges it all with a window of 100.
            (seg(ACK, 501, 10101, 100, 0), true),
            // 5000 bytes back: within the server's largest window.
            (seg(ACK, 5101, 501, 1000, 10), false),
        ]);
        assert_eq!(c.peers[1].max_win, 60000);
        assert_eq!(out[4], (Update::Valid, Some(Timeout::TcpEstablished)));
    }

    /// An acknowledgement may lag what the other side sent by at most
    /// `MAX_ACK_WINDOW` (a window and a fudge factor): one further behind
    /// is invalid, as one ahead of it is (`data_beyond_the_window_is_invalid`).
    #[test]
    fn an_acknowledgement_far_behind_is_invalid() {
        let mut steps = opened(65535);
        // The server sends 120,000 bytes, the first 60,000 acknowledged.
        steps.push((seg(ACK, 501, 101, 65535, 60000), true));
        steps.push((seg(ACK, 101, 60501, 65535, 0), false));
        steps.push((seg(ACK, 60501, 101, 65535, 60000), true));
        // 60,000 behind: within; 120,000 behind: not.
        steps.push((seg(ACK, 101, 60501, 65535, 0), false));
        steps.push((seg(ACK, 101, 501, 65535, 0), false));
        let (_, out) = run(&steps);
        let n = out.len();
        assert_eq!(out[n - 2], (Update::Valid, Some(Timeout::TcpEstablished)));
        assert_eq!(out[n - 1], (Update::Invalid, None));
    }

    /// After a side's FIN is acknowledged (FIN_WAIT_2), its segments
    /// beyond the window but within one maximal window of it are let
    /// through without refreshing the timeout (the loose check), though
    /// the other side is still established; the same segment before the
    /// close is invalid.
    #[test]
    fn a_closed_sides_stray_segment_passes_the_loose_check() {
        let stray = seg(ACK, 1200, 501, 1000, 10);
        let mut steps = opened(1000);
        steps.push((stray, false));
        let (_, out) = run(&steps);
        assert_eq!(out.last(), Some(&(Update::Invalid, None)));
        let mut steps = opened(1000);
        steps.push((seg(FIN | ACK, 101, 501, 1000, 0), false));
        steps.push((seg(ACK, 501, 102, 1000, 0), true));
        steps.push((stray, false));
        let (c, out) = run(&steps);
        assert_eq!(
            (c.peers[0].state, c.peers[1].state),
            (TcpState::FinWait2, TcpState::Established)
        );
        assert_eq!(out.last(), Some(&(Update::Valid, None)));
    }

    /// A FIN the loose check lets through closes its side all the same:
    /// here a client whose server never answered.
    #[test]
    fn a_fin_the_loose_check_lets_through_closes_its_side() {
        let (c, out) = run(&[
            (seg(SYN, 1000, 0, 1000, 0), false),
            // Beyond the client's window (its SYN's), within the loose one.
            (seg(FIN | ACK, 1001, 0, 1000, 100), false),
        ]);
        assert_eq!(out, [(Update::Valid, None)]);
        assert_eq!(c.peers[0].state, TcpState::Closing);
    }

    /// A SYN reopens a connection only once both sides have closed
    /// (FIN_WAIT_2 or later, as `syn_retransmit_and_reuse` shows); with one
    /// side still open it is a segment of the connection, judged by its
    /// window.
    #[test]
    fn a_syn_reopens_only_a_connection_closed_both_ways() {
        let mut steps = opened(65535);
        steps.push((seg(FIN | ACK, 101, 501, 65535, 0), false));
        steps.push((seg(ACK, 501, 102, 65535, 0), true));
        // Far outside every window: invalid, not a new connection.
        steps.push((seg(SYN, 5_000_000, 0, 65535, 0), false));
        let (c, out) = run(&steps);
        assert_eq!(out.last(), Some(&(Update::Invalid, None)));
        assert_eq!(
            (c.peers[0].state, c.peers[1].state),
            (TcpState::FinWait2, TcpState::Established)
        );
    }

    /// A RST|ACK with a zero acknowledgement (broken stacks send one) is
    /// taken as acknowledging what the other side sent: at the exact
    /// sequence number, it resets the connection.
    #[test]
    fn a_reset_with_a_zero_acknowledgement_resets() {
        let (c, out) = run(&[
            (seg(SYN, 100, 0, 1000, 0), false),
            (seg(SYN | ACK, 3_000_000, 101, 1000, 0), true),
            (seg(ACK, 101, 3_000_001, 1000, 0), false),
            (seg(RST | ACK, 101, 0, 0, 0), false),
        ]);
        assert_eq!(out[2], (Update::Valid, Some(Timeout::TcpClosed)));
        assert_eq!(c.peers[0].state, TcpState::TimeWait);
    }

    #[test]
    fn seq_check_off_accepts_everything_with_sane_flags() {
        let mut c = new_conn(&seg(SYN, 100, 0, 1000, 0));
        let far = seg(ACK, 123_456_789, 987_654_321, 10, 50);
        assert_eq!(update(&mut c, &far, false, false).0, Update::Valid);
        assert_eq!(
            update(&mut c, &seg(SYN | FIN, 1, 0, 0, 0), false, false).0,
            Update::Invalid
        );
    }

    #[test]
    fn window_scaling() {
        let mut syn = seg(SYN, 100, 0, 64240, 0);
        syn.wscale = Some(7);
        let mut synack = seg(SYN | ACK, 500, 101, 65160, 0);
        synack.wscale = Some(7);
        let (c, out) = run(&[
            (syn, false),
            (synack, true),
            (seg(ACK, 101, 501, 502, 0), false),
            // 502 << 7 = 64256 bytes of window from the client: the server
            // may send 60000 bytes.
            (seg(ACK, 501, 101, 509, 60000), true),
        ]);
        assert!(out.iter().all(|(u, _)| *u == Update::Valid), "{out:?}");
        assert_eq!(c.peers[1].wscale, WSCALE_FLAG | 7);
    }

    #[test]
    fn midstream_pickup_both_sides() {
        // Picked up on an ACK from the client; the server's first segment is
        // data far from anything seen, yet inside a maximal window.
        let (c, out) = run(&[
            (seg(ACK, 1_000_000, 2_000_000, 500, 100), false),
            (seg(ACK, 2_000_000, 1_000_100, 500, 1400), true),
            (seg(ACK, 1_000_100, 2_001_400, 500, 0), false),
        ]);
        // The server's first segment establishes the client side only.
        assert_eq!(out[0], (Update::Valid, Some(Timeout::TcpOpening)));
        assert_eq!(out[1], (Update::Valid, Some(Timeout::TcpEstablished)));
        assert!(c.is_established());
    }

    #[test]
    fn simultaneous_open_reply_syn_is_new() {
        let (_, out) = run(&[
            (seg(SYN, 100, 0, 1000, 0), false),
            (seg(SYN, 500, 0, 1000, 0), true),
        ]);
        assert_eq!(out[0], (Update::ValidNew, Some(Timeout::TcpFirstPacket)));
    }

    #[test]
    fn timeout_table() {
        use TcpState::*;
        let cases = [
            (SynSent, Closed, Timeout::TcpOpening),
            (Established, SynSent, Timeout::TcpOpening),
            (Established, Established, Timeout::TcpEstablished),
            (Closing, Established, Timeout::TcpClosing),
            (Established, FinWait2, Timeout::TcpClosing),
            (Closing, Closing, Timeout::TcpFinWait),
            (FinWait2, Closing, Timeout::TcpFinWait),
            (FinWait2, FinWait2, Timeout::TcpClosed),
            (TimeWait, TimeWait, Timeout::TcpClosed),
        ];
        for (a, b, t) in cases {
            assert_eq!(timeout_for(a, b), t, "{a:?} {b:?}");
        }
    }

    #[test]
    fn wscale_mismatch_unscales_the_other_side() {
        let mut syn = seg(SYN, 100, 0, 1000, 0);
        syn.wscale = Some(2);
        let mut c = new_conn(&syn);
        assert_eq!(c.peers[0].max_win, 250);
        // SYN-ACK without window scaling: the client's window is scaled back
        // and scaling is off for the connection.
        let (u, _) = update(&mut c, &seg(SYN | ACK, 500, 101, 1000, 0), true, true);
        assert_eq!(u, Update::Valid);
        assert_eq!(c.peers[0].max_win, 1000);
        assert_eq!(c.peers[0].wscale, 0);
    }

    /// The established fast path and the general path agree, and the fast
    /// path answers the segment it is for.
    #[test]
    fn established_fast_path_takes_the_common_segment() {
        let (mut c, _) = run(&[
            (seg(SYN, 1000, 0, 1000, 0), false),
            (seg(SYN | ACK, 5000, 1001, 1000, 0), true),
            (seg(ACK, 1001, 5001, 1000, 0), false),
        ]);
        assert!(c.peers.iter().all(|p| p.state == TcpState::Established));
        for (s, reply) in [
            (seg(ACK | PSH, 1001, 5001, 1000, 100), false),
            (seg(ACK, 5001, 1101, 1000, 50), true),
            (seg(ACK, 1101, 5051, 1000, 0), false),
            (seg(ACK | URG | ECE, 5051, 1101, 900, 10), true),
        ] {
            let mut general = c;
            let want = update_general(&mut general, &s, reply, true);
            let got = established(&mut c, &s, reply);
            assert_eq!(got, Some(want), "{s:?}");
            assert_eq!(c, general);
        }
        // Outside the window: the general path decides, nothing changed.
        let before = c;
        assert_eq!(
            established(&mut c, &seg(ACK, 900_000, 5051, 1000, 10), false),
            None
        );
        assert_eq!(c, before);
        // A FIN, a RST, a SYN: not for the fast path.
        for f in [ACK | FIN, ACK | RST, RST, SYN | ACK] {
            assert_eq!(
                established(&mut c, &seg(f, 1101, 5061, 1000, 0), false),
                None
            );
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(20_000))]

        /// `update` (the fast path first) gives the same answer and leaves
        /// the same state as the general path alone, on connections whose
        /// two sides' numbers lie near each other (so that most segments
        /// fall in or near the window) and segments of every flag
        /// combination, most of them plain ACKs.
        #[test]
        fn update_agrees_with_the_general_path(
            p0 in any_peer(),
            p1 in any_peer(),
            f in prop_oneof![4 => Just(ACK), 2 => Just(ACK | PSH), 1 => any::<u16>().prop_map(|f| f & 0xfff)],
            seq_off in -70_000i64..140_000,
            // Some segments end at the edge of the window, give or take
            // two: where an off-by-one in either path would show.
            seq_at_edge in prop_oneof![3 => Just(None), 1 => (-2i64..3).prop_map(Some)],
            ack_off in prop_oneof![
                4 => -70_000i64..140_000,
                1 => (MAX_ACK_WINDOW - 2)..(MAX_ACK_WINDOW + 3),
                1 => (0u8..15, -2i64..3).prop_map(|(s, d)| -(MAX_ACK_WINDOW << s) + d),
            ],
            win in any::<u16>(),
            len in prop_oneof![Just(0u32), 0u32..2000, any::<u32>()],
            reply in any::<bool>(),
            seq_check in prop_oneof![4 => Just(true), 1 => Just(false)],
        ) {
            let conn = TcpConn { peers: [p0, p1] };
            let (src, dst) = if reply { (p1, p0) } else { (p0, p1) };
            let s = Segment {
                flags: f,
                seq: match seq_at_edge {
                    Some(d) => src.seqhi.wrapping_sub(len).wrapping_add(d as u32),
                    None => src.seqlo.wrapping_add(seq_off as u32),
                },
                ack: dst.seqlo.wrapping_add(ack_off as u32),
                win,
                payload_len: len,
                wscale: None,
            };
            let (mut a, mut b) = (conn, conn);
            let got = update(&mut a, &s, reply, seq_check);
            let want = update_general(&mut b, &s, reply, seq_check);
            prop_assert_eq!(got, want);
            prop_assert_eq!(a, b);
        }
    }
}
