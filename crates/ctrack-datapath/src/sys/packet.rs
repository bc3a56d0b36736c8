//! AF_PACKET ports: a receive ring mapped into our memory (TPACKET_V3 or
//! V2, `rxring`: frames are read without a system call each) and batched
//! sends, one `sendmmsg(2)` per batch (no TX ring: sendmmsg needs no
//! second mapping and copies each frame once, as a TX ring would).
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
use std::os::fd::{AsRawFd, OwnedFd, RawFd};

use ctrack_wire::offload::{self, Gso, VnetHdr};

use super::ifinfo;
use super::os::{self, Mmap, Pod};
use super::port::{Pool, Port, PortOptions, PortStats, RxRing};
use super::rxring::{Next, Raw, Rx, TPACKET_V2, TPACKET_V3, geometry};

/// sendmmsg(2) sends at most this many messages a call (UIO_MAXIOV).
const MMSG_MAX: usize = 1024;
/// The largest frame segmentation offload hands over: a 64 KiB IP
/// packet, its Ethernet header and two VLAN tags.
const GSO_FRAME_MAX: usize = 65_535 + 14 + 8;
/// `PACKET_COPY_THRESH` of linux/if_packet.h (not in libc).
const PACKET_COPY_THRESH: libc::c_int = 7;

// SAFETY: a C struct of integers and (null when zero) pointers.
unsafe impl Pod for libc::sock_fprog {}

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
    rx: Rx,
    fd: OwnedFd,
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
    /// Where a V2 ring's frame too long for its slot (`TP_STATUS_COPY`)
    /// is read whole from the socket: its virtio-net header, then the
    /// frame. Empty until the first.
    copy_buf: Vec<u8>,
    /// The fanout group the socket is in (with more than one worker).
    group: Option<u16>,
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
    let geo = geometry(opts.rx_ring, opts.ring_frames, opts.frame_size, page_size())
        .map_err(c("AF_PACKET ring"))?;
    let fd = os::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_NONBLOCK, 0)
        .map_err(c("opening an AF_PACKET socket"))?;
    let (version, what) = match opts.rx_ring {
        RxRing::V2 => (TPACKET_V2, "setting TPACKET_V2"),
        RxRing::V3 => (TPACKET_V3, "setting TPACKET_V3"),
    };
    os::setsockopt(&fd, libc::SOL_PACKET, libc::PACKET_VERSION, &version).map_err(c(what))?;
    if opts.rx_ring == RxRing::V2 {
        // A frame longer than a slot is queued whole on the socket as
        // well (`TP_STATUS_COPY`), while the socket's receive buffer has
        // room: 4 MiB, a few dozen frames of segmentation offload
        // (`SO_RCVBUFFORCE` needs CAP_NET_ADMIN, which `ctrack run` has;
        // without it `SO_RCVBUF`, capped by net.core.rmem_max). A frame
        // cut without a copy is counted and dropped.
        os::setsockopt(&fd, libc::SOL_PACKET, PACKET_COPY_THRESH, &1)
            .map_err(c("setting PACKET_COPY_THRESH"))?;
        let room: libc::c_int = 4 << 20;
        if os::setsockopt(&fd, libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, &room).is_err() {
            let _ = os::setsockopt(&fd, libc::SOL_SOCKET, libc::SO_RCVBUF, &room);
        }
    }
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
    // (A V2 socket reads the first four fields, `struct tpacket_req`.)
    os::setsockopt(&fd, libc::SOL_PACKET, libc::PACKET_RX_RING, &geo.request())
        .map_err(c("setting up the receive ring"))?;
    let ring = Mmap::new(Some(&fd), geo.bytes(), 0).map_err(c("mapping the receive ring"))?;
    let fanout = opts.workers > 1;
    let mut group = None;
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
    promiscuous_on(&fd, link.ifindex).map_err(c("setting promiscuous mode"))?;
    if fanout {
        group = Some(join_fanout(&fd, name, opts.fanout_group)?);
        drop_all(&fd, false).map_err(c("detaching the drop-all filter"))?;
    }
    Ok(Box::new(PacketPort {
        name: opts.ifname.clone(),
        rx: Rx::new(ring, geo),
        fd,
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
        copy_buf: Vec::new(),
        group,
    }))
}

/// Puts `fd` in fanout group `group`, or, for `None`, in a group the
/// kernel makes for it alone (`PACKET_FANOUT_FLAG_UNIQUEID`, Linux 4.20):
/// the group's number. A number of our own choosing could be one another
/// process uses on another interface, which the join refuses, or on this
/// one, whose frames we would then share with it. A kernel without the
/// flag gets a number made of the process id and the interface index.
fn join_fanout(fd: &OwnedFd, name: &str, group: Option<u16>) -> io::Result<u16> {
    // No defragmentation flag: the kernel would hand us reassembled
    // datagrams over the MTU. The flow hash of a fragment covers its
    // addresses only, so a datagram's fragments meet on one worker
    // anyway, and the firewall's reassembler is shared by all.
    let mode = libc::PACKET_FANOUT_HASH;
    let join = |id: u16, flags: u32| {
        let arg = (u32::from(id) | ((mode | flags) << 16)) as libc::c_int;
        os::setsockopt(fd, libc::SOL_PACKET, libc::PACKET_FANOUT, &arg).map_err(|e| {
            let what = format!("joining fanout group {id} (in use by another process?)");
            os::ctx(e, name, &what)
        })
    };
    if let Some(id) = group {
        join(id, 0)?;
        return Ok(id);
    }
    if join(0, libc::PACKET_FANOUT_FLAG_UNIQUEID).is_err() {
        let index = ifinfo::link(name)?.ifindex;
        let id = (std::process::id() as u16).wrapping_mul(64) ^ index as u16;
        join(id, 0)?;
        return Ok(id);
    }
    let (v, _) = os::getsockopt::<libc::c_int>(fd, libc::SOL_PACKET, libc::PACKET_FANOUT)
        .map_err(|e| os::ctx(e, name, "reading the fanout group"))?;
    Ok(v as u16)
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

/// Makes interface `ifindex` promiscuous for as long as `fd`, an
/// AF_PACKET socket, is open: a membership the kernel counts
/// (`promiscuity` in `ip -d link`) and takes back when the socket closes,
/// however the process ends, unlike `IFF_PROMISC`, which would stay set.
fn promiscuous_on(fd: &OwnedFd, ifindex: u32) -> io::Result<()> {
    let mut mr: libc::packet_mreq = os::zeroed();
    mr.mr_ifindex = ifindex as libc::c_int;
    mr.mr_type = libc::PACKET_MR_PROMISC as u16;
    os::setsockopt(fd, libc::SOL_PACKET, libc::PACKET_ADD_MEMBERSHIP, &mr)
}

/// An AF_PACKET socket that receives nothing (protocol 0: no frame is
/// handed to it) and holds interface `ifindex` promiscuous while it is
/// open: for ports whose frames come another way (AF_XDP), whose
/// interface would otherwise drop, in its hardware filter, the frames
/// addressed to other stations, which a bump in the wire forwards.
pub(super) fn promiscuous(ifindex: u32) -> io::Result<OwnedFd> {
    let fd = os::socket(libc::AF_PACKET, libc::SOCK_RAW, 0)?;
    promiscuous_on(&fd, ifindex)?;
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

/// What the receive side keeps of a port, lent to [`RxSide::frame`]
/// while the ring (or the copy buffer) is borrowed for reading.
struct RxSide<'a> {
    max_frame: usize,
    stats: &'a mut PortStats,
    own_drops: &'a mut u64,
    gso_rx: &'a mut Vec<(usize, VnetHdr)>,
}

impl RxSide<'_> {
    /// Frame `f`, `snap` of its bytes at hand (`take(buf, from, n)`
    /// appends `n` of them from `from`), behind `vnet` if the socket has
    /// the header: checked, copied into a buffer with its VLAN tag put
    /// back and its checksum finished, and pushed on `out`. Returns 1, or
    /// 0 when it is skipped.
    fn frame(
        &mut self,
        f: &Raw,
        snap: usize,
        vnet: Option<VnetHdr>,
        take: impl Fn(&mut Vec<u8>, usize, usize),
        pool: &mut Pool,
        out: &mut Vec<Vec<u8>>,
    ) -> usize {
        let gso = vnet.map_or(Gso::None, |v| v.gso());
        let limit = match gso {
            Gso::None => self.max_frame,
            _ => GSO_FRAME_MAX,
        };
        if snap < f.len || f.len > limit {
            *self.own_drops += 1;
            return 0;
        }
        let mut buf = match gso {
            Gso::None => pool.get(),
            // (The pool keeps no buffer this large.)
            Gso::Tcp(_) | Gso::Udp(_) => Vec::with_capacity(snap + 4),
            Gso::Other => {
                *self.own_drops += 1;
                return 0;
            }
        };
        if f.status & libc::TP_STATUS_VLAN_VALID != 0 && snap >= 12 {
            // Put back the 802.1Q tag the kernel took out of the frame.
            let tpid = if f.status & libc::TP_STATUS_VLAN_TPID_VALID != 0 {
                f.vlan_tpid
            } else {
                0x8100
            };
            take(&mut buf, 0, 12);
            buf.extend_from_slice(&tpid.to_be_bytes());
            buf.extend_from_slice(&f.vlan_tci.to_be_bytes());
            take(&mut buf, 12, snap - 12);
        } else {
            take(&mut buf, 0, snap);
        }
        self.stats.rx_packets += 1;
        self.stats.rx_bytes += buf.len() as u64;
        let unfinished =
            f.status & libc::TP_STATUS_CSUMNOTREADY != 0 || vnet.is_some_and(|v| v.needs_csum());
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
}

impl PacketPort {
    /// Hands over a frame of the ring (pushed on `out`, in a buffer from
    /// `pool`; a frame of segmentation offload in one of its own, noted in
    /// `gso_rx`); returns how many (none when it is skipped: outgoing,
    /// truncated, too large, malformed, a kind of segmentation offload
    /// ctrack does not handle).
    fn deliver(&mut self, f: Raw, pool: &mut Pool, out: &mut Vec<Vec<u8>>) -> usize {
        if f.status & libc::TP_STATUS_COPY != 0 {
            // Cut to the V2 slot; the whole frame waits on the socket, to
            // be taken off it in any case (the queue keeps ring order).
            return self.deliver_copy(f, pool, out);
        }
        if f.pkttype == libc::PACKET_OUTGOING {
            return 0;
        }
        let r = &self.rx.ring;
        // The virtio-net header lies just before the frame.
        let vnet = match self.vnet {
            true => f
                .data
                .checked_sub(VnetHdr::LEN)
                .filter(|&v| v >= f.hdr_end)
                .and_then(|v| r.read::<{ VnetHdr::LEN }>(v))
                .map(VnetHdr::parse),
            false => None,
        };
        let data = f.data;
        let take = |buf: &mut Vec<u8>, from: usize, n: usize| {
            r.copy_out(data + from, n, buf);
        };
        let mut side = RxSide {
            max_frame: self.max_frame,
            stats: &mut self.stats,
            own_drops: &mut self.own_drops,
            gso_rx: &mut self.gso_rx,
        };
        side.frame(&f, f.snap, vnet, take, pool, out)
    }

    /// Takes a frame's whole copy off the socket and drops it.
    fn drain_copy(&mut self) {
        let mut b = [0u8; 1];
        let _ = os::recv(&self.fd, &mut b, libc::MSG_DONTWAIT | libc::MSG_TRUNC);
    }

    /// A V2 frame marked `TP_STATUS_COPY`: read whole from the socket's
    /// queue, where the kernel put it in ring order.
    fn deliver_copy(&mut self, f: Raw, pool: &mut Pool, out: &mut Vec<Vec<u8>>) -> usize {
        let hdr = if self.vnet { VnetHdr::LEN } else { 0 };
        if self.copy_buf.is_empty() {
            self.copy_buf = vec![0; hdr + GSO_FRAME_MAX];
        }
        let got = match os::recv(
            &self.fd,
            &mut self.copy_buf,
            libc::MSG_DONTWAIT | libc::MSG_TRUNC,
        ) {
            // Not there (the kernel's copy failed) or longer than any
            // frame we take.
            Ok(n) if n >= hdr && n <= self.copy_buf.len() => n,
            _ => {
                self.own_drops += 1;
                return 0;
            }
        };
        if f.pkttype == libc::PACKET_OUTGOING {
            return 0;
        }
        let b = &self.copy_buf;
        let vnet = (hdr > 0)
            .then(|| b.first_chunk::<{ VnetHdr::LEN }>())
            .flatten()
            .map(|h| VnetHdr::parse(*h));
        let take = |buf: &mut Vec<u8>, from: usize, n: usize| {
            buf.extend_from_slice(&b[hdr + from..hdr + from + n]);
        };
        let mut side = RxSide {
            max_frame: self.max_frame,
            stats: &mut self.stats,
            own_drops: &mut self.own_drops,
            gso_rx: &mut self.gso_rx,
        };
        // The whole frame, as long as the wire had it.
        let f = Raw {
            len: got - hdr,
            ..f
        };
        side.frame(&f, got - hdr, vnet, take, pool, out)
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
            match self.rx.next() {
                Next::Empty => break,
                Next::Frame(f) => n += self.deliver(f, pool, out),
                Next::Malformed { copied } => {
                    self.own_drops += 1;
                    if copied {
                        // Keep the socket's queue in step with the ring.
                        self.drain_copy();
                    }
                }
            }
            self.rx.release();
        }
        self.rx.finish();
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
        match self.rx.geo.version {
            RxRing::V2 => "af-packet, TPACKET_V2",
            RxRing::V3 => "af-packet, TPACKET_V3",
        }
    }

    fn fanout_group(&self) -> Option<u16> {
        self.group
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
