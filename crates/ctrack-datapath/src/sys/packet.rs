//! AF_PACKET ports: a TPACKET_V3 receive ring mapped into our memory
//! (frames are read without a system call each) and batched sends, one
//! `sendmmsg(2)` per batch (no TX ring: sendmmsg needs no second mapping
//! and copies each frame once, as a TX ring would).
//!
//! Receive ring layout (TPACKET_V3): `block_nr` blocks of `block_size`
//! bytes; the kernel fills one block at a time with variable-length
//! frames and hands it to us (block status `TP_STATUS_USER`) when it is
//! full or after `RETIRE_MS`; we walk its frames and give it back
//! (`TP_STATUS_KERNEL`), in ring order.
//!
//! Offloads: the socket asks for a virtio-net header before each frame
//! (`PACKET_VNET_HDR`, where the kernel has it). A checksum its sender
//! left to offload is finished ([`ctrack_wire::offload`]), so that every
//! frame the firewall sees is whole. A frame its sender left to
//! segmentation offload (a TCP segment of up to 64 KiB from a veth peer
//! with TSO, the default) is handed over whole, its checksum finished, and
//! its header kept ([`Port::take_gso`]): the firewall judges it once, and
//! it leaves whole ([`Port::send_gso`], on this socket, behind a header
//! that leaves the cutting to the kernel) or, where the port it goes to
//! cannot send it so, cut by the worker into the segments a wire would
//! have carried. Other sends go out on a second socket without the
//! header, which receives nothing (the header cost a send about 15% of the
//! forwarding rate of 64-byte frames, `scripts/live-bench.py`,
//! BENCHMARKS.md).

use std::io;
use std::mem::offset_of;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::atomic::Ordering;

use ctrack_wire::offload::{self, Gso, VnetHdr};

use super::ifinfo;
use super::os::{self, Mmap, Pod, err};
use super::port::{Pool, Port, PortOptions, PortStats};

/// How long the kernel keeps a partly filled block before handing it to
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
/// `TPACKET_V3` of `enum tpacket_versions`.
const TPACKET_V3: libc::c_int = 2;
/// The largest ring we map for one socket.
const MAX_RING_BYTES: usize = 1 << 30;
/// Frame sizes we accept (bytes, without FCS).
const FRAME_SIZES: std::ops::RangeInclusive<usize> = 64..=65536;
/// sendmmsg(2) sends at most this many messages a call (UIO_MAXIOV).
const MMSG_MAX: usize = 1024;
/// The largest frame segmentation offload hands over: a 64 KiB IP
/// packet, its Ethernet header and two VLAN tags.
const GSO_FRAME_MAX: usize = 65_535 + 14 + 8;

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
/// Bytes of header (with the `sockaddr_ll`) before a frame.
const H_LEN_ALL: usize = libc::TPACKET3_HDRLEN;

// SAFETY: a C struct of integers and (null when zero) pointers.
unsafe impl Pod for libc::sock_fprog {}

/// The receive ring's shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Geometry {
    block_size: usize,
    block_nr: usize,
    /// The room one largest frame takes in a block.
    slot: usize,
}

/// The ring for about `ring_frames` frames of up to `frame_size` bytes.
fn geometry(ring_frames: usize, frame_size: usize, page: usize) -> io::Result<Geometry> {
    if !FRAME_SIZES.contains(&frame_size) {
        let msg = format!("frame size {frame_size} out of range ({FRAME_SIZES:?})");
        return Err(err(io::ErrorKind::InvalidInput, msg));
    }
    if ring_frames == 0 || ring_frames > MAX_RING_BYTES {
        let msg = format!("ring of {ring_frames} frames out of range");
        return Err(err(io::ErrorKind::InvalidInput, msg));
    }
    // Header, the padding before the network header, the frame; aligned.
    let slot = (H_LEN_ALL + 32 + frame_size + 15) & !15;
    // A block holds at least one frame of segmentation offload whole.
    let block_size = (slot * 32)
        .next_power_of_two()
        .clamp(page.max(1 << 17), 1 << 22);
    let per_block = block_size / slot;
    let block_nr = ring_frames.div_ceil(per_block).max(4);
    if block_nr.saturating_mul(block_size) > MAX_RING_BYTES {
        let msg = format!("ring of {ring_frames} frames of {frame_size} bytes is over 1 GiB");
        return Err(err(io::ErrorKind::InvalidInput, msg));
    }
    Ok(Geometry {
        block_size,
        block_nr,
        slot,
    })
}

/// Where the receive walk is.
#[derive(Debug, Clone, Copy, Default)]
struct Cursor {
    /// The block being read (or to be read next).
    block: usize,
    /// Whether we hold that block (the kernel handed it over).
    held: bool,
    /// Frames of the held block not read yet.
    left: u32,
    /// Offset in the held block of the next frame.
    off: usize,
}

/// Reusable sendmmsg(2) arguments.
#[derive(Default)]
struct SendScratch {
    iov: Vec<libc::iovec>,
    msg: Vec<libc::mmsghdr>,
    /// Each message's frame length.
    lens: Vec<usize>,
}

// SAFETY: the pointers inside point into the frames (and headers) of one
// `send` or `send_gso` call; they are rebuilt at each call and never read
// after it, so moving the (then stale) vectors to another thread shares
// nothing.
unsafe impl Send for SendScratch {}

impl std::fmt::Debug for SendScratch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SendScratch")
    }
}

/// One worker's AF_PACKET handle on one interface.
#[derive(Debug)]
pub(super) struct PacketPort {
    name: String,
    /// The receive ring (unmapped before the socket closes).
    ring: Mmap,
    fd: OwnedFd,
    geo: Geometry,
    cur: Cursor,
    mtu: usize,
    max_frame: usize,
    stats: PortStats,
    kernel_drops: u64,
    own_drops: u64,
    scratch: SendScratch,
    /// Whether frames come behind a virtio-net header
    /// (`PACKET_VNET_HDR`).
    vnet: bool,
    /// The frames of segmentation offload the last `recv` handed over:
    /// their index in its `out`, and their header.
    gso_rx: Vec<(usize, VnetHdr)>,
    /// The headers of a `send_gso` call, one per message.
    gso_hdrs: Vec<[u8; VnetHdr::LEN]>,
    /// The socket sends go out on, when `fd` takes a header with every
    /// frame sent (with `vnet`): bound to the interface, receiving nothing.
    tx_fd: Option<OwnedFd>,
}

fn u32_at(m: &Mmap, off: usize) -> Option<u32> {
    m.read::<4>(off).map(u32::from_ne_bytes)
}

fn u16_at(m: &Mmap, off: usize) -> Option<u16> {
    m.read::<2>(off).map(u16::from_ne_bytes)
}

/// The system page size.
fn page_size() -> usize {
    // SAFETY: sysconf(3) takes an integer and touches no memory.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(p)
        .ok()
        .filter(|p| p.is_power_of_two())
        .unwrap_or(4096)
}

/// Whether `f` is an Ethernet frame the interface can send: a header, and
/// no more than MTU bytes after it (after the 802.1Q/802.1ad tag if any).
pub(super) fn sendable(f: &[u8], mtu: usize) -> bool {
    let tagged = f.len() >= 18 && matches!(u16::from_be_bytes([f[12], f[13]]), 0x8100 | 0x88a8);
    f.len() >= 14 && f.len() <= mtu + 14 + if tagged { 4 } else { 0 }
}

/// Opens `opts.worker`'s AF_PACKET handle on `opts.ifname`.
pub(super) fn open(opts: &PortOptions) -> io::Result<Box<dyn Port>> {
    let name = opts.ifname.as_str();
    let c = |what: &'static str| move |e: io::Error| os::ctx(e, name, what);
    let link = ifinfo::link(name)?;
    let geo =
        geometry(opts.ring_frames, opts.frame_size, page_size()).map_err(c("AF_PACKET ring"))?;
    let fd = os::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_NONBLOCK, 0)
        .map_err(c("opening an AF_PACKET socket"))?;
    os::setsockopt(&fd, libc::SOL_PACKET, libc::PACKET_VERSION, &TPACKET_V3)
        .map_err(c("setting TPACKET_V3"))?;
    match os::setsockopt(&fd, libc::SOL_PACKET, libc::PACKET_IGNORE_OUTGOING, &1) {
        // Before Linux 4.20: PACKET_OUTGOING frames are skipped in recv.
        Err(e) if e.raw_os_error() == Some(libc::ENOPROTOOPT) => {}
        r => r.map_err(c("setting PACKET_IGNORE_OUTGOING"))?,
    }
    // Before the ring. A kernel without it (or refusing it with a ring)
    // hands over frames of segmentation offload unannounced: they are
    // dropped as too large, and checksums left to offload are still
    // finished (`TP_STATUS_CSUMNOTREADY`).
    let vnet = os::setsockopt(&fd, libc::SOL_PACKET, libc::PACKET_VNET_HDR, &1).is_ok();
    let tx_fd = match vnet {
        true => Some(send_socket(link.ifindex).map_err(c("opening the sending socket"))?),
        false => None,
    };
    let frames_per_block = geo.block_size / geo.slot;
    let req = libc::tpacket_req3 {
        tp_block_size: geo.block_size as u32,
        tp_block_nr: geo.block_nr as u32,
        tp_frame_size: geo.slot as u32,
        tp_frame_nr: (frames_per_block * geo.block_nr) as u32,
        tp_retire_blk_tov: RETIRE_MS,
        tp_sizeof_priv: 0,
        tp_feature_req_word: 0,
    };
    os::setsockopt(&fd, libc::SOL_PACKET, libc::PACKET_RX_RING, &req)
        .map_err(c("setting up the receive ring"))?;
    let ring = Mmap::new(Some(&fd), geo.block_size * geo.block_nr, 0)
        .map_err(c("mapping the receive ring"))?;
    let fanout = opts.workers > 1;
    if fanout {
        // Receive nothing until the socket is in the fanout group, so that
        // no frame is seen both by it alone and by the group.
        drop_all(&fd, true).map_err(c("attaching a drop-all filter"))?;
    }
    let mut sll: libc::sockaddr_ll = os::zeroed();
    sll.sll_family = libc::AF_PACKET as u16;
    sll.sll_protocol = (libc::ETH_P_ALL as u16).to_be();
    sll.sll_ifindex = link.ifindex as libc::c_int;
    os::bind(&fd, &sll).map_err(c("binding the AF_PACKET socket"))?;
    let mut mr: libc::packet_mreq = os::zeroed();
    mr.mr_ifindex = link.ifindex as libc::c_int;
    mr.mr_type = libc::PACKET_MR_PROMISC as u16;
    os::setsockopt(&fd, libc::SOL_PACKET, libc::PACKET_ADD_MEMBERSHIP, &mr)
        .map_err(c("setting promiscuous mode"))?;
    if fanout {
        // No defragmentation flag: the kernel would hand us reassembled
        // datagrams over the MTU. The flow hash of a fragment covers its
        // addresses only, so a datagram's fragments meet on one worker
        // anyway, and the firewall's reassembler is shared by all.
        let mode = libc::PACKET_FANOUT_HASH;
        let arg = (opts.fanout_group as u32 | (mode << 16)) as libc::c_int;
        os::setsockopt(&fd, libc::SOL_PACKET, libc::PACKET_FANOUT, &arg).map_err(|e| {
            let what = format!(
                "joining fanout group {} (in use by another process?)",
                opts.fanout_group
            );
            os::ctx(e, name, &what)
        })?;
        drop_all(&fd, false).map_err(c("detaching the drop-all filter"))?;
    }
    Ok(Box::new(PacketPort {
        name: opts.ifname.clone(),
        ring,
        fd,
        geo,
        cur: Cursor::default(),
        mtu: link.mtu,
        max_frame: opts.frame_size,
        stats: PortStats::default(),
        kernel_drops: 0,
        own_drops: 0,
        scratch: SendScratch::default(),
        vnet,
        gso_rx: Vec::new(),
        gso_hdrs: Vec::new(),
        tx_fd,
    }))
}

/// An AF_PACKET socket for sending on interface `ifindex`: bound with
/// protocol 0, so that no frame is delivered to it.
fn send_socket(ifindex: u32) -> io::Result<OwnedFd> {
    let fd = os::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_NONBLOCK, 0)?;
    let mut sll: libc::sockaddr_ll = os::zeroed();
    sll.sll_family = libc::AF_PACKET as u16;
    sll.sll_ifindex = ifindex as libc::c_int;
    os::bind(&fd, &sll)?;
    Ok(fd)
}

/// Attaches (`on`) or detaches a classic BPF filter that drops every frame.
fn drop_all(fd: &OwnedFd, on: bool) -> io::Result<()> {
    if !on {
        return os::setsockopt(fd, libc::SOL_SOCKET, libc::SO_DETACH_FILTER, &0);
    }
    // `ret #0`: keep no byte of any frame.
    let mut insn = [libc::sock_filter {
        code: 0x06,
        jt: 0,
        jf: 0,
        k: 0,
    }];
    let prog = libc::sock_fprog {
        len: 1,
        filter: insn.as_mut_ptr(),
    };
    // The kernel copies the program during the call; `insn` outlives it.
    os::setsockopt(fd, libc::SOL_SOCKET, libc::SO_ATTACH_FILTER, &prog)
}

impl PacketPort {
    fn block_base(&self) -> usize {
        self.cur.block * self.geo.block_size
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
            block: self.cur.block,
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
            block: (self.cur.block + 1) % self.geo.block_nr,
            ..Cursor::default()
        };
    }

    /// Reads the next frame of the held block into a buffer pushed on
    /// `out` (from `pool`; a frame of segmentation offload in one of its
    /// own, noted in `gso_rx`); returns how many (none when it is skipped:
    /// outgoing, truncated, too large, malformed, a kind of segmentation
    /// offload ctrack does not handle).
    fn next_frame(&mut self, pool: &mut Pool, out: &mut Vec<Vec<u8>>) -> usize {
        self.cur.left -= 1;
        let base = self.block_base();
        let end = base + self.geo.block_size;
        let h = base + self.cur.off;
        let r = &self.ring;
        let fields = (|| {
            let next = u32_at(r, h + H_NEXT)? as usize;
            let snap = u32_at(r, h + H_SNAPLEN)? as usize;
            let len = u32_at(r, h + H_LEN)? as usize;
            let status = u32_at(r, h + H_STATUS)?;
            let data = h + u16_at(r, h + H_MAC)? as usize;
            let pkttype = r.read::<1>(h + H_PKTTYPE)?[0];
            (h + H_LEN_ALL <= end && data + snap <= end)
                .then_some((next, snap, len, status, data, pkttype))
        })();
        let Some((next, snap, len, status, data, pkttype)) = fields else {
            // Malformed: abandon the rest of the block.
            self.own_drops += 1;
            self.cur.left = 0;
            return 0;
        };
        if next == 0 {
            self.cur.left = 0;
        }
        self.cur.off += next;
        if pkttype == libc::PACKET_OUTGOING {
            return 0;
        }
        // The virtio-net header lies just before the frame.
        let vnet = match self.vnet {
            true => data
                .checked_sub(VnetHdr::LEN)
                .filter(|&v| v >= h + H_LEN_ALL)
                .and_then(|v| r.read::<{ VnetHdr::LEN }>(v))
                .map(VnetHdr::parse),
            false => None,
        };
        let gso = vnet.map_or(Gso::None, |v| v.gso());
        let limit = match gso {
            Gso::None => self.max_frame,
            _ => GSO_FRAME_MAX,
        };
        if snap < len || len > limit {
            self.own_drops += 1;
            return 0;
        }
        let mut buf = match gso {
            Gso::None => pool.get(),
            // (The pool keeps no buffer this large.)
            Gso::Tcp(_) | Gso::Udp(_) => Vec::with_capacity(snap + 4),
            Gso::Other => {
                self.own_drops += 1;
                return 0;
            }
        };
        if status & libc::TP_STATUS_VLAN_VALID != 0 && snap >= 12 {
            // Put back the 802.1Q tag the kernel took out of the frame.
            let tpid = if status & libc::TP_STATUS_VLAN_TPID_VALID != 0 {
                u16_at(r, h + H_VLAN_TPID).unwrap_or(0x8100)
            } else {
                0x8100
            };
            let tci = u32_at(r, h + H_VLAN_TCI).unwrap_or(0) as u16;
            r.copy_out(data, 12, &mut buf);
            buf.extend_from_slice(&tpid.to_be_bytes());
            buf.extend_from_slice(&tci.to_be_bytes());
            r.copy_out(data + 12, snap - 12, &mut buf);
        } else {
            r.copy_out(data, snap, &mut buf);
        }
        self.stats.rx_packets += 1;
        self.stats.rx_bytes += buf.len() as u64;
        let unfinished =
            status & libc::TP_STATUS_CSUMNOTREADY != 0 || vnet.is_some_and(|v| v.needs_csum());
        if unfinished && offload::complete(&mut buf).is_some() {
            // The sender left the transport checksum to offload (a veth
            // peer's stack does by default): finish it, as the kernel does
            // before a device without the offload, so that the tracker and
            // the receiver see a whole packet.
            self.stats.rx_csum_completed += 1;
        }
        if let (Some(v), Gso::Tcp(_) | Gso::Udp(_)) = (vnet, gso) {
            self.stats.rx_gso_frames += 1;
            self.gso_rx.push((out.len(), v));
        }
        out.push(buf);
        1
    }

    /// One sendmmsg(2) per `MMSG_MAX` messages of the scratch, on the
    /// socket that takes a virtio-net header with each frame (`with_hdr`)
    /// or the one that takes none; returns the frames and bytes sent.
    /// Unsent frames are counted in `tx_errors`.
    fn flush(&mut self, with_hdr: bool) -> (usize, u64) {
        let n = self.scratch.msg.len();
        let (mut i, mut sent, mut bytes, mut eintr) = (0, 0, 0u64, 0);
        while i < n {
            let chunk = (n - i).min(MMSG_MAX) as libc::c_uint;
            let msgs = self.scratch.msg[i..].as_mut_ptr();
            let fd = match with_hdr {
                true => &self.fd,
                false => self.tx_fd.as_ref().unwrap_or(&self.fd),
            }
            .as_raw_fd();
            // SAFETY: `fd` is one of this port's sockets, open while `self`
            // is; `msgs` points to `chunk` initialised mmsghdr whose iovecs
            // point into frames borrowed for this `send` or `send_gso` call
            // (and into `gso_hdrs`, not changed until that call ends); the
            // kernel reads those and writes only the `msg_len` fields.
            let r = unsafe { libc::sendmmsg(fd, msgs, chunk, libc::MSG_DONTWAIT) };
            if r > 0 {
                let r = r as usize;
                bytes += self.scratch.lens[i..i + r]
                    .iter()
                    .map(|&l| l as u64)
                    .sum::<u64>();
                sent += r;
                i += r;
                continue;
            }
            let e = io::Error::last_os_error().raw_os_error().unwrap_or(0);
            match e {
                libc::EINTR if eintr < 3 => eintr += 1,
                // A full queue or a gone link: the rest cannot go now.
                0
                | libc::EAGAIN
                | libc::ENOBUFS
                | libc::ENETDOWN
                | libc::ENXIO
                | libc::ENODEV
                | libc::EINTR => {
                    self.stats.tx_errors += (n - i) as u64;
                    break;
                }
                // This frame was refused (EMSGSIZE, EINVAL...): skip it.
                _ => {
                    self.stats.tx_errors += 1;
                    i += 1;
                }
            }
        }
        (sent, bytes)
    }
}

impl Port for PacketPort {
    fn name(&self) -> &str {
        &self.name
    }

    fn recv(&mut self, pool: &mut Pool, out: &mut Vec<Vec<u8>>, max: usize) -> io::Result<usize> {
        // What an earlier call handed over belongs to that call alone.
        self.gso_rx.clear();
        let mut n = 0;
        while n < max {
            if !self.cur.held && !self.take_block() {
                break;
            }
            if self.cur.left == 0 {
                self.release_block();
                continue;
            }
            n += self.next_frame(pool, out);
        }
        if self.cur.held && self.cur.left == 0 {
            self.release_block();
        }
        Ok(n)
    }

    fn send(&mut self, frames: &[&[u8]]) -> io::Result<usize> {
        let s = &mut self.scratch;
        s.iov.clear();
        s.msg.clear();
        s.lens.clear();
        for f in frames {
            if sendable(f, self.mtu) {
                s.iov.push(libc::iovec {
                    iov_base: f.as_ptr() as *mut libc::c_void,
                    iov_len: f.len(),
                });
                s.lens.push(f.len());
            } else {
                self.stats.tx_errors += 1;
            }
        }
        for iov in s.iov.iter_mut() {
            let mut m: libc::mmsghdr = os::zeroed();
            m.msg_hdr.msg_iov = iov;
            m.msg_hdr.msg_iovlen = 1;
            s.msg.push(m);
        }
        let (sent, bytes) = self.flush(false);
        self.scratch.iov.clear();
        self.scratch.msg.clear();
        self.stats.tx_packets += sent as u64;
        self.stats.tx_bytes += bytes;
        Ok(sent)
    }

    fn take_gso(&mut self, into: &mut Vec<(usize, VnetHdr)>) {
        into.append(&mut self.gso_rx);
    }

    fn sends_gso(&self) -> bool {
        self.vnet
    }

    fn send_gso(&mut self, frames: &[(&[u8], VnetHdr)]) -> io::Result<usize> {
        if !self.vnet {
            self.stats.tx_errors += frames.len() as u64;
            return Ok(0);
        }
        let s = &mut self.scratch;
        s.iov.clear();
        s.msg.clear();
        s.lens.clear();
        self.gso_hdrs.clear();
        for (f, h) in frames {
            if f.len() < 14 || f.len() > GSO_FRAME_MAX {
                self.stats.tx_errors += 1;
                continue;
            }
            self.gso_hdrs.push(h.to_bytes());
            s.lens.push(f.len());
        }
        // Each message: its header, then its frame (the headers' vector is
        // complete, so the pointers into it stay put).
        let mut hdrs = self.gso_hdrs.iter();
        for (f, _) in frames {
            if f.len() < 14 || f.len() > GSO_FRAME_MAX {
                continue;
            }
            let Some(h) = hdrs.next() else { break };
            s.iov.push(libc::iovec {
                iov_base: h.as_ptr() as *mut libc::c_void,
                iov_len: h.len(),
            });
            s.iov.push(libc::iovec {
                iov_base: f.as_ptr() as *mut libc::c_void,
                iov_len: f.len(),
            });
        }
        for pair in s.iov.chunks_exact_mut(2) {
            let mut m: libc::mmsghdr = os::zeroed();
            m.msg_hdr.msg_iov = pair.as_mut_ptr();
            m.msg_hdr.msg_iovlen = 2;
            s.msg.push(m);
        }
        let (sent, bytes) = self.flush(true);
        self.scratch.iov.clear();
        self.scratch.msg.clear();
        self.stats.tx_packets += sent as u64;
        self.stats.tx_gso_frames += sent as u64;
        self.stats.tx_bytes += bytes;
        Ok(sent)
    }

    fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    fn stats(&mut self) -> PortStats {
        // Reading the kernel's counters resets them: add them up.
        let st = os::getsockopt::<libc::tpacket_stats_v3>(
            &self.fd,
            libc::SOL_PACKET,
            libc::PACKET_STATISTICS,
        );
        if let Ok((st, _)) = st {
            self.kernel_drops += u64::from(st.tp_drops);
        }
        PortStats {
            rx_dropped: self.kernel_drops + self.own_drops,
            ..self.stats
        }
    }

    fn mode(&self) -> &'static str {
        "af-packet, TPACKET_V3"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
    }

    #[test]
    fn geometry_sized() {
        let g = geometry(4096, 1518, 4096).unwrap();
        // Room for a frame of segmentation offload (and its headers) whole.
        assert_eq!(g.block_size, 1 << 17);
        assert!(g.block_size >= GSO_FRAME_MAX + H_LEN_ALL + 32 + VnetHdr::LEN);
        assert!(g.block_size / g.slot * g.block_nr >= 4096);
        assert!(g.slot >= 1518 + H_LEN_ALL + 14 && g.slot.is_multiple_of(16));
        let g = geometry(1, 65536, 4096).unwrap();
        assert!(g.block_size >= g.slot + 64 && g.block_nr == 4);
        assert!(geometry(0, 1518, 4096).is_err());
        assert!(geometry(4096, 10, 4096).is_err());
        assert!(geometry(4096, 1 << 20, 4096).is_err());
        assert!(geometry(1 << 28, 9000, 4096).is_err());
    }

    #[test]
    fn sendable_by_mtu() {
        let mut f = vec![0u8; 1514];
        assert!(sendable(&f, 1500));
        f.push(0);
        assert!(!sendable(&f, 1500));
        f[12..14].copy_from_slice(&[0x81, 0x00]);
        assert!(sendable(&f, 1500));
        f.extend_from_slice(&[0; 3]);
        assert!(sendable(&f, 1500));
        f.push(0);
        assert!(!sendable(&f, 1500));
        assert!(!sendable(&[0; 13], 1500));
    }
}
