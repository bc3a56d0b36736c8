//! An AF_PACKET socket's receive ring, in either of the kernel's two
//! layouts (`--rx-ring`):
//!
//! - **TPACKET_V3**: `block_nr` blocks of `block_size` bytes; the kernel
//!   fills one block at a time with frames of any length and hands it to
//!   us (block status `TP_STATUS_USER`) when it is full or after
//!   `RETIRE_MS`; we walk its frames and give it back (`TP_STATUS_KERNEL`),
//!   in ring order. Few status words, and a frame of segmentation offload
//!   fits whole; but a frame that does not fill a block waits for the
//!   timer: about a millisecond a crossing for sparse traffic (a ping's
//!   round trip through a forwarder on veth: 0.9–1.5 ms against 0.18
//!   through the kernel's bridge, BENCHMARKS.md, "AF_PACKET's receive
//!   ring: V2 against V3").
//! - **TPACKET_V2**: `frame_nr` slots of one size, each with its own status
//!   word, handed over one by one as the kernel writes them (and the reader
//!   woken at once). A frame longer than a slot (segmentation offload) is
//!   written cut, marked `TP_STATUS_COPY`, and queued whole on the socket
//!   (`PACKET_COPY_THRESH`), where the port reads it with `recv(2)`.
//!   libpcap takes V2 rather than V3 in its immediate mode for the same
//!   reason.

use std::io;
use std::mem::offset_of;
use std::sync::atomic::Ordering;

use super::os::{Mmap, err};
use super::port::RxRing;

/// How long the kernel keeps a partly filled V3 block before handing it to
/// us (ms, the least it takes): the most a lone frame waits in the ring.
/// The kernel wakes a reader only when a block is handed over, so a
/// sparse flow (the ACKs of a TCP stream, a handshake) waits this long at
/// each port. At 4 ms, one iperf3 stream with its senders' offloads on
/// made 6.1 Gbit/s, at 1 ms 9.3, and short connections 8,500–16,000 a
/// second against 22,600–23,600; 64-byte UDP flat out lost about 6%
/// (BENCHMARKS.md, "Frames of segmentation offload sent whole"). The
/// price: at low rates each block carries a millisecond's frames, so a
/// ring of N blocks holds N milliseconds of them for a worker held up
/// (`ctrack run`'s default ring of 4,096 frames of 1,518 bytes: 51).
const RETIRE_MS: u32 = 1;
/// `TPACKET_V2` and `TPACKET_V3` of `enum tpacket_versions`.
pub(super) const TPACKET_V2: libc::c_int = 1;
pub(super) const TPACKET_V3: libc::c_int = 2;
/// The largest ring we map for one socket.
const MAX_RING_BYTES: usize = 1 << 30;
/// The largest frame a ring slot holds (bytes, without FCS).
pub(crate) const MAX_FRAME: usize = 65536;
/// Frame sizes we accept (bytes, without FCS).
const FRAME_SIZES: std::ops::RangeInclusive<usize> = 64..=MAX_FRAME;

// `struct tpacket_block_desc`: two u32 then `struct tpacket_hdr_v1`
// (8-aligned, so at 8): block_status, num_pkts, offset_to_first_pkt.
const B_STATUS: usize = 8;
const B_NUM_PKTS: usize = 12;
const B_FIRST_PKT: usize = 16;
// `struct tpacket3_hdr` fields.
const H_NEXT: usize = offset_of!(libc::tpacket3_hdr, tp_next_offset);
const H_SNAPLEN: usize = offset_of!(libc::tpacket3_hdr, tp_snaplen);
const H_LEN: usize = offset_of!(libc::tpacket3_hdr, tp_len);
const H_STATUS: usize = offset_of!(libc::tpacket3_hdr, tp_status);
const H_MAC: usize = offset_of!(libc::tpacket3_hdr, tp_mac);
const H_VLAN_TCI: usize =
    offset_of!(libc::tpacket3_hdr, hv1) + offset_of!(libc::tpacket_hdr_variant1, tp_vlan_tci);
const H_VLAN_TPID: usize =
    offset_of!(libc::tpacket3_hdr, hv1) + offset_of!(libc::tpacket_hdr_variant1, tp_vlan_tpid);
/// The `sockaddr_ll` after the header (at TPACKET_ALIGN(sizeof hdr)).
const H_SLL: usize = (std::mem::size_of::<libc::tpacket3_hdr>() + 15) & !15;
const H_PKTTYPE: usize = H_SLL + offset_of!(libc::sockaddr_ll, sll_pkttype);
/// Bytes of header (with the `sockaddr_ll`) before a V3 frame.
pub(super) const H_LEN_ALL: usize = libc::TPACKET3_HDRLEN;
// `struct tpacket2_hdr` fields.
const H2_STATUS: usize = offset_of!(libc::tpacket2_hdr, tp_status);
const H2_LEN: usize = offset_of!(libc::tpacket2_hdr, tp_len);
const H2_SNAPLEN: usize = offset_of!(libc::tpacket2_hdr, tp_snaplen);
const H2_MAC: usize = offset_of!(libc::tpacket2_hdr, tp_mac);
const H2_VLAN_TCI: usize = offset_of!(libc::tpacket2_hdr, tp_vlan_tci);
const H2_VLAN_TPID: usize = offset_of!(libc::tpacket2_hdr, tp_vlan_tpid);
const H2_SLL: usize = (std::mem::size_of::<libc::tpacket2_hdr>() + 15) & !15;
const H2_PKTTYPE: usize = H2_SLL + offset_of!(libc::sockaddr_ll, sll_pkttype);
/// Bytes of header (with the `sockaddr_ll`) before a V2 frame.
const H2_LEN_ALL: usize = libc::TPACKET2_HDRLEN;

/// The receive ring's shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Geometry {
    pub(super) version: RxRing,
    pub(super) block_size: usize,
    pub(super) block_nr: usize,
    /// The room one largest frame takes (V3: in a block; V2: a slot).
    pub(super) slot: usize,
}

/// The ring for about `ring_frames` frames of up to `frame_size` bytes.
pub(super) fn geometry(
    version: RxRing,
    ring_frames: usize,
    frame_size: usize,
    page: usize,
) -> io::Result<Geometry> {
    if !FRAME_SIZES.contains(&frame_size) {
        let msg = format!("frame size {frame_size} out of range ({FRAME_SIZES:?})");
        return Err(err(io::ErrorKind::InvalidInput, msg));
    }
    if ring_frames == 0 || ring_frames > MAX_RING_BYTES {
        let msg = format!("ring of {ring_frames} frames out of range");
        return Err(err(io::ErrorKind::InvalidInput, msg));
    }
    let (slot, block_size) = match version {
        RxRing::V3 => {
            // Header, the padding before the network header, the frame;
            // aligned.
            let slot = (H_LEN_ALL + 32 + frame_size + 15) & !15;
            // A block holds at least one frame of segmentation offload
            // whole.
            let block = (slot * 32)
                .next_power_of_two()
                .clamp(page.max(1 << 17), 1 << 22);
            (slot, block)
        }
        RxRing::V2 => {
            // Header, the padding before the network header (at least 16
            // bytes of link header room, then the virtio-net header), the
            // frame; aligned. A slot never holds a frame of segmentation
            // offload: those come cut, and whole through the socket.
            let slot = (H2_LEN_ALL + 48 + frame_size + 15) & !15;
            let block = (slot * 16)
                .next_power_of_two()
                .clamp(page.max(1 << 16), 1 << 22);
            (slot, block)
        }
    };
    let per_block = block_size / slot;
    let block_nr = ring_frames.div_ceil(per_block).max(4);
    if block_nr.saturating_mul(block_size) > MAX_RING_BYTES {
        let msg = format!("ring of {ring_frames} frames of {frame_size} bytes is over 1 GiB");
        return Err(err(io::ErrorKind::InvalidInput, msg));
    }
    Ok(Geometry {
        version,
        block_size,
        block_nr,
        slot,
    })
}

impl Geometry {
    /// The `tpacket_req3` for `PACKET_RX_RING` (V2 reads its first four
    /// fields, `struct tpacket_req`).
    pub(super) fn request(&self) -> libc::tpacket_req3 {
        let per_block = self.block_size / self.slot;
        libc::tpacket_req3 {
            tp_block_size: self.block_size as u32,
            tp_block_nr: self.block_nr as u32,
            tp_frame_size: self.slot as u32,
            tp_frame_nr: (per_block * self.block_nr) as u32,
            tp_retire_blk_tov: RETIRE_MS,
            tp_sizeof_priv: 0,
            tp_feature_req_word: 0,
        }
    }

    /// Bytes to map.
    pub(super) fn bytes(&self) -> usize {
        self.block_size * self.block_nr
    }

    fn frames(&self) -> usize {
        self.block_size / self.slot * self.block_nr
    }

    /// Where V2 slot `i` starts.
    fn slot_at(&self, i: usize) -> usize {
        let per_block = self.block_size / self.slot;
        (i / per_block) * self.block_size + (i % per_block) * self.slot
    }
}

/// A frame the kernel handed over, as its header describes it (offsets
/// into the ring).
#[derive(Debug, Clone, Copy)]
pub(super) struct Raw {
    /// Where the header (with its `sockaddr_ll`) ends: nothing of the
    /// frame's own lies before.
    pub(super) hdr_end: usize,
    /// Where its first byte is.
    pub(super) data: usize,
    /// Bytes in the ring.
    pub(super) snap: usize,
    /// Bytes on the wire.
    pub(super) len: usize,
    /// `tp_status`.
    pub(super) status: u32,
    pub(super) pkttype: u8,
    pub(super) vlan_tci: u16,
    pub(super) vlan_tpid: u16,
}

/// Where the walk is.
#[derive(Debug, Clone, Copy, Default)]
struct Cursor {
    /// V3: the block being read (or to be read next); V2: the next slot.
    at: usize,
    /// V3: whether we hold that block (the kernel handed it over).
    held: bool,
    /// V3: frames of the held block not read yet.
    left: u32,
    /// V3: offset in the held block of the next frame.
    off: usize,
}

/// The receive ring and where we are in it.
#[derive(Debug)]
pub(super) struct Rx {
    /// The ring (unmapped before the socket closes).
    pub(super) ring: Mmap,
    pub(super) geo: Geometry,
    cur: Cursor,
}

fn u32_at(m: &Mmap, off: usize) -> Option<u32> {
    m.read::<4>(off).map(u32::from_ne_bytes)
}

fn u16_at(m: &Mmap, off: usize) -> Option<u16> {
    m.read::<2>(off).map(u16::from_ne_bytes)
}

/// What [`Rx::next`] found.
pub(super) enum Next {
    /// Nothing handed over.
    Empty,
    /// A frame: deliver it, then [`Rx::release`].
    Frame(Raw),
    /// A header that does not add up: count it (and take its whole copy
    /// off the socket if `copied`, `TP_STATUS_COPY`), then
    /// [`Rx::release`].
    Malformed { copied: bool },
}

impl Rx {
    pub(super) fn new(ring: Mmap, geo: Geometry) -> Rx {
        Rx {
            ring,
            geo,
            cur: Cursor::default(),
        }
    }

    /// The next frame the kernel handed over.
    pub(super) fn next(&mut self) -> Next {
        match self.geo.version {
            RxRing::V3 => self.next_v3(),
            RxRing::V2 => self.next_v2(),
        }
    }

    /// Done with the frame [`Rx::next`] returned: a V2 slot goes back to
    /// the kernel at once (a V3 block when all its frames are read).
    pub(super) fn release(&mut self) {
        if self.geo.version == RxRing::V2 {
            let h = self.geo.slot_at(self.cur.at);
            if let Some(st) = self.ring.atomic_u32(h + H2_STATUS) {
                // Release: we are done reading before the kernel may refill.
                st.store(libc::TP_STATUS_KERNEL, Ordering::Release);
            }
            self.cur.at = (self.cur.at + 1) % self.geo.frames();
        }
    }

    /// The end of a receive call: a V3 block read to its end goes back.
    pub(super) fn finish(&mut self) {
        if self.geo.version == RxRing::V3 && self.cur.held && self.cur.left == 0 {
            self.release_block();
        }
    }

    fn next_v2(&mut self) -> Next {
        let h = self.geo.slot_at(self.cur.at);
        let r = &self.ring;
        let Some(st) = r.atomic_u32(h + H2_STATUS) else {
            return Next::Empty;
        };
        // Acquire: the frame, written before its status, is ours.
        let status = st.load(Ordering::Acquire);
        if status & libc::TP_STATUS_USER == 0 {
            return Next::Empty;
        }
        let end = h + self.geo.slot;
        let raw = (|| {
            let snap = u32_at(r, h + H2_SNAPLEN)? as usize;
            let data = h + u16_at(r, h + H2_MAC)? as usize;
            (data >= h + H2_LEN_ALL && data + snap <= end).then_some(Raw {
                hdr_end: h + H2_LEN_ALL,
                data,
                snap,
                len: u32_at(r, h + H2_LEN)? as usize,
                status,
                pkttype: r.read::<1>(h + H2_PKTTYPE)?[0],
                vlan_tci: u16_at(r, h + H2_VLAN_TCI)?,
                vlan_tpid: u16_at(r, h + H2_VLAN_TPID)?,
            })
        })();
        raw.map_or(
            Next::Malformed {
                copied: status & libc::TP_STATUS_COPY != 0,
            },
            Next::Frame,
        )
    }

    fn block_base(&self) -> usize {
        self.cur.at * self.geo.block_size
    }

    /// Takes the current block if the kernel has handed it over.
    fn take_block(&mut self) -> bool {
        let base = self.block_base();
        let Some(st) = self.ring.atomic_u32(base + B_STATUS) else {
            return false;
        };
        // Acquire: the block's frames, written before the status, are ours.
        if st.load(Ordering::Acquire) & libc::TP_STATUS_USER == 0 {
            return false;
        }
        let left = u32_at(&self.ring, base + B_NUM_PKTS).unwrap_or(0);
        let off = u32_at(&self.ring, base + B_FIRST_PKT).unwrap_or(0) as usize;
        self.cur = Cursor {
            at: self.cur.at,
            held: true,
            left,
            off,
        };
        true
    }

    /// Gives the held block back to the kernel and moves to the next.
    fn release_block(&mut self) {
        let base = self.block_base();
        if let Some(st) = self.ring.atomic_u32(base + B_STATUS) {
            // Release: we are done reading before the kernel may refill.
            st.store(libc::TP_STATUS_KERNEL, Ordering::Release);
        }
        self.cur = Cursor {
            at: (self.cur.at + 1) % self.geo.block_nr,
            ..Cursor::default()
        };
    }

    fn next_v3(&mut self) -> Next {
        loop {
            if !self.cur.held && !self.take_block() {
                return Next::Empty;
            }
            if self.cur.left == 0 {
                self.release_block();
                continue;
            }
            break;
        }
        self.cur.left -= 1;
        let base = self.block_base();
        let end = base + self.geo.block_size;
        let h = base + self.cur.off;
        let r = &self.ring;
        let fields = (|| {
            let next = u32_at(r, h + H_NEXT)? as usize;
            let snap = u32_at(r, h + H_SNAPLEN)? as usize;
            let data = h + u16_at(r, h + H_MAC)? as usize;
            let raw = Raw {
                hdr_end: h + H_LEN_ALL,
                data,
                snap,
                len: u32_at(r, h + H_LEN)? as usize,
                status: u32_at(r, h + H_STATUS)?,
                pkttype: r.read::<1>(h + H_PKTTYPE)?[0],
                vlan_tci: u32_at(r, h + H_VLAN_TCI)? as u16,
                vlan_tpid: u16_at(r, h + H_VLAN_TPID)?,
            };
            (h + H_LEN_ALL <= end && data + snap <= end).then_some((next, raw))
        })();
        let Some((next, raw)) = fields else {
            // Malformed: abandon the rest of the block.
            self.cur.left = 0;
            return Next::Malformed { copied: false };
        };
        if next == 0 {
            self.cur.left = 0;
        }
        self.cur.off += next;
        Next::Frame(raw)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ctrack_wire::offload::VnetHdr;

    /// The largest frame segmentation offload hands over (as in `packet`).
    const GSO_FRAME_MAX: usize = 65_535 + 14 + 8;

    /// A ring of `version` in anonymous memory, as the kernel maps one,
    /// all its slots or blocks the kernel's (zeroed).
    fn ring(version: RxRing) -> Rx {
        let g = geometry(version, 8, 1518, 4096).unwrap();
        Rx::new(Mmap::new(None, g.bytes(), 0).unwrap(), g)
    }

    fn put32(rx: &Rx, off: usize, v: u32) {
        assert!(rx.ring.copy_in(off, &v.to_ne_bytes()));
    }

    fn put16(rx: &Rx, off: usize, v: u16) {
        assert!(rx.ring.copy_in(off, &v.to_ne_bytes()));
    }

    fn status(rx: &Rx, off: usize) -> u32 {
        rx.ring.atomic_u32(off).unwrap().load(Ordering::Acquire)
    }

    fn hand_over(rx: &Rx, off: usize, status: u32) {
        rx.ring
            .atomic_u32(off)
            .unwrap()
            .store(status, Ordering::Release);
    }

    /// A frame's header as the kernel writes it: `snap` of its `len`
    /// bytes at `mac` from the header.
    #[derive(Clone, Copy)]
    struct Hdr {
        mac: u16,
        snap: u32,
        len: u32,
        /// V3: the next frame's offset from this header (0: the last).
        next: u32,
    }

    const TCI: u16 = 0x2064;
    const TPID: u16 = 0x88a8;

    /// V2 slot `i` written and handed over with `st`.
    fn v2_slot(rx: &Rx, i: usize, h: Hdr, st: u32) -> usize {
        let at = rx.geo.slot_at(i);
        put32(rx, at + H2_LEN, h.len);
        put32(rx, at + H2_SNAPLEN, h.snap);
        put16(rx, at + H2_MAC, h.mac);
        put16(rx, at + H2_VLAN_TCI, TCI);
        put16(rx, at + H2_VLAN_TPID, TPID);
        assert!(rx.ring.copy_in(at + H2_PKTTYPE, &[libc::PACKET_OTHERHOST]));
        hand_over(rx, at + H2_STATUS, st);
        at
    }

    /// V3 block `b` holding `frames` from `first` on, chained by their
    /// `next` (one of 0 followed 256 bytes on), handed over; the headers'
    /// offsets in the ring.
    fn v3_block(rx: &Rx, b: usize, first: usize, frames: &[Hdr]) -> Vec<usize> {
        let base = b * rx.geo.block_size;
        put32(rx, base + B_NUM_PKTS, frames.len() as u32);
        put32(rx, base + B_FIRST_PKT, first as u32);
        let mut at = base + first;
        let mut out = Vec::new();
        for h in frames {
            put32(rx, at + H_NEXT, h.next);
            put32(rx, at + H_SNAPLEN, h.snap);
            put32(rx, at + H_LEN, h.len);
            put32(rx, at + H_STATUS, libc::TP_STATUS_VLAN_VALID);
            put16(rx, at + H_MAC, h.mac);
            put32(rx, at + H_VLAN_TCI, u32::from(TCI) | 0xdead_0000);
            put16(rx, at + H_VLAN_TPID, TPID);
            assert!(rx.ring.copy_in(at + H_PKTTYPE, &[libc::PACKET_OUTGOING]));
            out.push(at);
            // A last frame's successor (one a miscount promises) past it.
            at += if h.next == 0 { 256 } else { h.next as usize };
        }
        hand_over(rx, base + B_STATUS, libc::TP_STATUS_USER);
        out
    }

    fn frame(n: Next) -> Raw {
        match n {
            Next::Frame(r) => r,
            Next::Empty => panic!("no frame"),
            Next::Malformed { copied } => panic!("malformed (copied {copied})"),
        }
    }

    fn malformed(n: Next) -> bool {
        match n {
            Next::Malformed { copied } => copied,
            Next::Empty => panic!("nothing"),
            Next::Frame(r) => panic!("a frame: {r:?}"),
        }
    }

    /// V2: each slot read as its header says once the kernel hands it
    /// over, given back on release, in ring order round to the first
    /// again; nothing read before its status says so.
    #[test]
    fn v2_slots_are_read_in_turn_and_handed_back() {
        let mut rx = ring(RxRing::V2);
        assert!(matches!(rx.next(), Next::Empty));
        let user = libc::TP_STATUS_USER | libc::TP_STATUS_VLAN_VALID;
        let h = Hdr {
            mac: 80,
            snap: 60,
            len: 1514,
            next: 0,
        };
        let at = v2_slot(&rx, 0, h, user);
        let r = frame(rx.next());
        assert_eq!(
            (r.hdr_end, r.data, r.snap, r.len, r.status),
            (at + H2_LEN_ALL, at + 80, 60, 1514, user)
        );
        assert_eq!(
            (r.pkttype, r.vlan_tci, r.vlan_tpid),
            (libc::PACKET_OTHERHOST, TCI, TPID)
        );
        // Read again until released: the same frame.
        assert_eq!(frame(rx.next()).data, at + 80);
        rx.release();
        assert_eq!(status(&rx, at + H2_STATUS), libc::TP_STATUS_KERNEL);
        assert!(matches!(rx.next(), Next::Empty));
        // Every slot in turn, the last's successor the first.
        let n = rx.geo.frames();
        for i in 1..=n {
            let at = v2_slot(&rx, i % n, h, libc::TP_STATUS_USER);
            assert_eq!(frame(rx.next()).data, at + 80, "slot {i}");
            rx.release();
            assert_eq!(status(&rx, at + H2_STATUS), libc::TP_STATUS_KERNEL);
        }
        assert!(matches!(rx.next(), Next::Empty));
    }

    /// V2: a header whose frame would start inside it or run past its
    /// slot is malformed (its whole copy on the socket if the kernel says
    /// `TP_STATUS_COPY`), and its slot goes back all the same; a frame
    /// that ends where its slot does is read.
    #[test]
    fn v2_headers_that_do_not_add_up_are_malformed() {
        let mut rx = ring(RxRing::V2);
        let slot = rx.geo.slot;
        let fits = Hdr {
            mac: 80,
            snap: (slot - 80) as u32,
            len: 9000,
            next: 0,
        };
        let cases = [
            (fits, libc::TP_STATUS_USER, None),
            (
                Hdr {
                    snap: fits.snap + 1,
                    ..fits
                },
                libc::TP_STATUS_USER,
                Some(false),
            ),
            (
                Hdr {
                    snap: fits.snap + 1,
                    ..fits
                },
                libc::TP_STATUS_USER | libc::TP_STATUS_COPY,
                Some(true),
            ),
            (
                Hdr {
                    mac: H2_LEN_ALL as u16 - 1,
                    snap: 60,
                    ..fits
                },
                libc::TP_STATUS_USER,
                Some(false),
            ),
            (
                Hdr {
                    mac: H2_LEN_ALL as u16,
                    snap: 60,
                    ..fits
                },
                libc::TP_STATUS_USER,
                None,
            ),
            (
                Hdr {
                    mac: u16::MAX,
                    snap: 0,
                    ..fits
                },
                libc::TP_STATUS_USER,
                Some(false),
            ),
            (
                Hdr {
                    snap: u32::MAX,
                    ..fits
                },
                libc::TP_STATUS_USER,
                Some(false),
            ),
        ];
        for (i, (h, st, want)) in cases.into_iter().enumerate() {
            let at = v2_slot(&rx, i, h, st);
            match want {
                None => assert_eq!(frame(rx.next()).snap, h.snap as usize, "case {i}"),
                Some(copied) => assert_eq!(malformed(rx.next()), copied, "case {i}"),
            }
            rx.release();
            assert_eq!(
                status(&rx, at + H2_STATUS),
                libc::TP_STATUS_KERNEL,
                "case {i}"
            );
        }
    }

    /// V3: a block handed over is read frame by frame along its `next`
    /// offsets, held until its last frame is read and the receive call
    /// ends, then given back; the blocks follow in ring order, round to
    /// the first.
    #[test]
    fn v3_blocks_are_read_along_their_frames_and_handed_back() {
        let mut rx = ring(RxRing::V3);
        assert!(matches!(rx.next(), Next::Empty));
        let h = |next| Hdr {
            mac: 100,
            snap: 64,
            len: 64,
            next,
        };
        let at = v3_block(&rx, 0, 48, &[h(256), h(512), h(0)]);
        for (i, &a) in at.iter().enumerate() {
            let r = frame(rx.next());
            assert_eq!(
                (r.hdr_end, r.data, r.snap, r.len),
                (a + H_LEN_ALL, a + 100, 64, 64),
                "{i}"
            );
            assert_eq!(
                (r.status, r.pkttype, r.vlan_tci, r.vlan_tpid),
                (libc::TP_STATUS_VLAN_VALID, libc::PACKET_OUTGOING, TCI, TPID)
            );
            if i == 0 {
                // A call that ends with frames of the block left keeps it.
                rx.finish();
                assert_eq!(status(&rx, B_STATUS), libc::TP_STATUS_USER);
            }
        }
        assert_eq!(status(&rx, B_STATUS), libc::TP_STATUS_USER);
        rx.finish();
        assert_eq!(status(&rx, B_STATUS), libc::TP_STATUS_KERNEL);
        assert!(matches!(rx.next(), Next::Empty));
        // Every block in turn, the last's successor the first; one left
        // unfinished goes back when the next call finds it read.
        let n = rx.geo.block_nr;
        for b in 1..=n {
            let base = (b % n) * rx.geo.block_size;
            let at = v3_block(&rx, b % n, 64, &[h(0)]);
            assert_eq!(frame(rx.next()).data, at[0] + 100, "block {b}");
            if b % 2 == 1 {
                rx.finish();
                assert_eq!(status(&rx, base + B_STATUS), libc::TP_STATUS_KERNEL);
            }
        }
        assert!(matches!(rx.next(), Next::Empty));
        assert!(
            (0..n).all(|b| status(&rx, b * rx.geo.block_size + B_STATUS) == libc::TP_STATUS_KERNEL)
        );
    }

    /// V3: a block of no frames goes back at once; a frame whose `next`
    /// is 0 is its block's last whatever the count says, and the count's
    /// last is, whatever its `next` says; a header that
    /// runs past its block, or a frame that would, is malformed and the
    /// rest of its block is abandoned (the block goes back); a frame
    /// that ends where its block does is read.
    #[test]
    fn v3_blocks_that_do_not_add_up_are_cut_short() {
        let mut rx = ring(RxRing::V3);
        let bs = rx.geo.block_size;
        let h = |next, snap| Hdr {
            mac: 100,
            snap,
            len: 64,
            next,
        };
        // No frames: given back, the next block looked at.
        v3_block(&rx, 0, 48, &[]);
        let at = v3_block(&rx, 1, 48, &[h(0, 64), h(256, 64)]);
        assert_eq!(frame(rx.next()).data, at[0] + 100);
        assert_eq!(status(&rx, B_STATUS), libc::TP_STATUS_KERNEL);
        // `next` 0 ended the block though it counts two.
        assert!(matches!(rx.next(), Next::Empty));
        assert_eq!(status(&rx, bs + B_STATUS), libc::TP_STATUS_KERNEL);
        // A frame running one byte past the block: malformed, the frame
        // after it never read.
        let first = bs - 100 - 64;
        v3_block(&rx, 2, first, &[h(64, 65), h(0, 0)]);
        assert!(!malformed(rx.next()));
        assert!(matches!(rx.next(), Next::Empty));
        assert_eq!(status(&rx, 2 * bs + B_STATUS), libc::TP_STATUS_KERNEL);
        // One ending with the block: read.
        let at = v3_block(&rx, 3, first, &[h(0, 64)]);
        let r = frame(rx.next());
        assert_eq!(r.data + r.snap, 4 * bs);
        assert_eq!(r.data, at[0] + 100);
        rx.finish();
        // A header that does not fit in its block (its frame of none).
        v3_block(
            &rx,
            0,
            bs - H_LEN_ALL + 1,
            &[Hdr {
                mac: 0,
                snap: 0,
                len: 0,
                next: 0,
            }],
        );
        assert!(!malformed(rx.next()));
        assert!(matches!(rx.next(), Next::Empty));
        assert_eq!(status(&rx, B_STATUS), libc::TP_STATUS_KERNEL);
        // The frames a block counts are all it holds, whatever the last
        // one's `next` says (the zeroes after it would read as a frame).
        let at = v3_block(&rx, 1, 48, &[h(256, 64), h(256, 64)]);
        assert_eq!(frame(rx.next()).data, at[0] + 100);
        assert_eq!(frame(rx.next()).data, at[1] + 100);
        assert!(matches!(rx.next(), Next::Empty));
        assert_eq!(status(&rx, bs + B_STATUS), libc::TP_STATUS_KERNEL);
    }

    #[test]
    fn layout_as_the_kernel_has_it() {
        assert_eq!(
            (H_NEXT, H_SNAPLEN, H_LEN, H_STATUS, H_MAC),
            (0, 12, 16, 20, 24)
        );
        assert_eq!(
            (H_VLAN_TCI, H_VLAN_TPID, H_SLL, H_PKTTYPE),
            (32, 36, 48, 58)
        );
        assert_eq!(H_LEN_ALL, 68);
        assert_eq!(
            (
                H2_STATUS,
                H2_LEN,
                H2_SNAPLEN,
                H2_MAC,
                H2_VLAN_TCI,
                H2_VLAN_TPID
            ),
            (0, 4, 8, 12, 24, 26)
        );
        assert_eq!((H2_SLL, H2_PKTTYPE, H2_LEN_ALL), (32, 42, 52));
    }

    #[test]
    fn geometry_sized() {
        let g = geometry(RxRing::V3, 4096, 1518, 4096).unwrap();
        // Room for a frame of segmentation offload (and its headers) whole.
        assert_eq!(g.block_size, 1 << 17);
        assert!(g.block_size >= GSO_FRAME_MAX + H_LEN_ALL + 32 + VnetHdr::LEN);
        assert!(g.frames() >= 4096);
        assert!(g.slot >= 1518 + H_LEN_ALL + 14 && g.slot.is_multiple_of(16));
        let g = geometry(RxRing::V3, 1, 65536, 4096).unwrap();
        assert!(g.block_size >= g.slot + 64 && g.block_nr == 4);
        for v in [RxRing::V2, RxRing::V3] {
            assert!(geometry(v, 0, 1518, 4096).is_err());
            assert!(geometry(v, 4096, 10, 4096).is_err());
            assert!(geometry(v, 4096, 1 << 20, 4096).is_err());
            assert!(geometry(v, 1 << 28, 9000, 4096).is_err());
        }
    }

    #[test]
    fn v2_slots_tile_the_blocks() {
        let g = geometry(RxRing::V2, 4096, 1518, 4096).unwrap();
        // The kernel's own rule: the link header room, then the
        // virtio-net header, then the frame, inside the slot.
        let netoff = ((H2_LEN_ALL + 16 + 15) & !15) + VnetHdr::LEN;
        assert!(netoff - 14 + 1518 <= g.slot, "{g:?}");
        assert!(g.slot.is_multiple_of(16) && g.block_size.is_multiple_of(4096));
        assert!(g.frames() >= 4096 && g.frames() < 4096 + g.block_size / g.slot * 4);
        let req = g.request();
        assert_eq!(
            req.tp_frame_nr as usize,
            req.tp_block_nr as usize * (req.tp_block_size / req.tp_frame_size) as usize
        );
        // Slots never straddle a block, and follow one another.
        let per = g.block_size / g.slot;
        assert_eq!(
            g.slot_at(per - 1) + g.slot,
            g.slot_at(per) - g.block_size % g.slot
        );
        assert_eq!(g.slot_at(per), g.block_size);
        assert_eq!(
            g.slot_at(g.frames() - 1) + g.slot,
            g.bytes() - g.block_size % g.slot
        );
        // The largest frame size: a slot still fits in a block.
        let g = geometry(RxRing::V2, 64, 65536, 4096).unwrap();
        assert!(g.block_size >= g.slot && g.block_size <= 1 << 22, "{g:?}");
        assert!(g.frames() >= 64 && g.block_nr >= 4);
    }
}
