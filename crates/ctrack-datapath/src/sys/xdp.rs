//! AF_XDP ports: one socket per (interface, receive queue), fed by our
//! XDP program (`bpf`), with its own UMEM and rings (`xsk`).
//!
//! - Worker `w` binds queue `w`; the interface must have exactly as many
//!   receive queues as there are workers: with more, the frames of the
//!   queues no worker holds would go to the kernel, unseen; with fewer,
//!   two workers would need one queue, and sharing a queue's fill and
//!   completion rings between threads (XDP_SHARED_UMEM) is what ports
//!   avoid. Both cases fail to open with a message saying what to change
//!   (`--workers`, or `ethtool -L IF combined N`).
//! - The program is attached in driver mode where the driver has XDP
//!   (veth does), else in generic mode; sockets then bind zero-copy where
//!   the driver can, else in copy mode (the kernel's own fallback;
//!   generic mode always copies).
//! - XDP_USE_NEED_WAKEUP: sends are kicked with `sendto(MSG_DONTWAIT)`
//!   when the kernel asks; the fill ring is kicked likewise on receive.
//! - Frames are copied in and out of the UMEM (into `Pool` buffers).
//! - The interface is made promiscuous while the port is open (an
//!   AF_PACKET socket's membership, which receives nothing): a NIC's
//!   filter would otherwise drop, before XDP, the frames addressed to the
//!   stations beyond it, which a bump in the wire takes in. Until
//!   2026-12-01 only AF_PACKET ports did this; a veth, which filters
//!   nothing, did not show it.
//! - NICs that strip VLAN tags on receive (rxvlan offload) hide them from
//!   XDP: turn that off (`ethtool -K IF rxvlan off`) with tagged traffic.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};

use super::bpf::Attachment;
use super::ifinfo;
use super::os::{self, err};
use super::packet::{promiscuous, sendable};
use super::port::{Pool, Port, PortOptions, PortStats};
use super::xsk::Xsk;

/// Bytes the kernel keeps in front of each received frame in a chunk.
const XDP_PACKET_HEADROOM: usize = 256;
/// Ring sizes we accept (entries; rounded up to a power of two).
const RING_MAX: usize = 1 << 16;
/// Frames the kernel sends per `sendto` in copy mode (TX_BATCH_SIZE);
/// used to bound the kicks of one `send`.
const COPY_BATCH: u32 = 32;
/// Binds tried again while the queue is busy (20 ms apart).
const BIND_TRIES: u32 = 50;

/// One worker's AF_XDP handle on one interface.
#[derive(Debug)]
pub(super) struct XdpPort {
    name: String,
    /// The socket and its memory (dropped before the program detaches).
    x: Xsk,
    /// This port's share of the interface's XDP program.
    attach: Attachment,
    /// Holds the interface promiscuous (see the module's doc).
    _promiscuous: OwnedFd,
    zero_copy: bool,
    mtu: usize,
    max_frame: usize,
    /// Receive frames not in the fill ring.
    rx_free: Vec<u64>,
    /// Send frames not in flight.
    tx_free: Vec<u64>,
    /// The length of the frame in flight in each send frame.
    tx_len: Vec<u32>,
    stats: PortStats,
    own_rx_drops: u64,
}

/// The UMEM chunk size for frames up to `frame_size` bytes.
fn chunk_size(frame_size: usize) -> io::Result<usize> {
    // A VLAN tag stays in the frame under XDP: leave room for it.
    let need = frame_size + 4 + XDP_PACKET_HEADROOM;
    match need {
        _ if frame_size < 64 => Err(err(
            io::ErrorKind::InvalidInput,
            format!("frame size {frame_size} too small"),
        )),
        0..=2048 => Ok(2048),
        2049..=4096 => Ok(4096),
        _ => Err(err(
            io::ErrorKind::InvalidInput,
            format!(
                "frame size {frame_size} too large for AF_XDP (at most {}; use --io af-packet)",
                4092 - XDP_PACKET_HEADROOM
            ),
        )),
    }
}

/// Checks the worker count against the queues (see the module's doc).
fn check_queues(ifname: &str, workers: usize, queues: usize) -> io::Result<()> {
    if workers > queues {
        let msg = format!(
            "{ifname} has {queues} receive queue(s): AF_XDP needs one per worker; use --workers {queues} (or fewer queues per worker: ethtool -L {ifname} combined {workers})"
        );
        return Err(err(io::ErrorKind::InvalidInput, msg));
    }
    if workers < queues {
        let msg = format!(
            "{ifname} has {queues} receive queues but {workers} worker(s): frames of the other queues would be missed; use --workers {queues} or ethtool -L {ifname} combined {workers}"
        );
        return Err(err(io::ErrorKind::InvalidInput, msg));
    }
    Ok(())
}

/// The length of `f` without its VLAN tag, if any.
fn untagged_len(f: &[u8]) -> usize {
    let tagged = f.len() >= 18 && matches!(u16::from_be_bytes([f[12], f[13]]), 0x8100 | 0x88a8);
    f.len() - if tagged { 4 } else { 0 }
}

/// A socket bound to `queue` of `ifindex`, and whether it is zero-copy.
/// A queue stays busy a little while after its last socket closed (the
/// kernel lets it go in deferred work): EBUSY is retried for a second.
fn bound_socket(
    name: &str,
    ifindex: u32,
    queue: u32,
    size: u32,
    chunk: usize,
    flags: u16,
) -> io::Result<(Xsk, bool)> {
    let mut tries = 0;
    loop {
        let x = Xsk::new(size, size, chunk).map_err(|e| err(e.kind(), format!("{name}: {e}")))?;
        match x.bind(ifindex, queue, flags) {
            Ok(zc) => return Ok((x, zc)),
            Err(e) if e.raw_os_error() == Some(libc::EBUSY) && tries < BIND_TRIES => {
                tries += 1;
                drop(x);
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            Err(e) => {
                let hint = if e.raw_os_error() == Some(libc::EBUSY) {
                    " (queue held by another AF_XDP socket?)"
                } else {
                    ""
                };
                return Err(err(
                    e.kind(),
                    format!("{name}: binding an AF_XDP socket to queue {queue}: {e}{hint}"),
                ));
            }
        }
    }
}

/// Opens `opts.worker`'s AF_XDP handle on `opts.ifname`.
pub(super) fn open(opts: &PortOptions) -> io::Result<Box<dyn Port>> {
    let name = opts.ifname.as_str();
    let link = ifinfo::link(name)?;
    let queues = ifinfo::rx_queues(name);
    check_queues(name, opts.workers, queues)?;
    let queue = (opts.worker % queues) as u32;
    let chunk = chunk_size(opts.frame_size)?;
    if opts.ring_frames == 0 || opts.ring_frames > RING_MAX {
        let msg = format!(
            "{name}: ring of {} frames out of range (1..={RING_MAX})",
            opts.ring_frames
        );
        return Err(err(io::ErrorKind::InvalidInput, msg));
    }
    let size = opts.ring_frames.next_power_of_two().max(64) as u32;
    let promiscuous =
        promiscuous(link.ifindex).map_err(|e| os::ctx(e, name, "setting promiscuous mode"))?;
    let attach = Attachment::get(name, link.ifindex, queues as u32)?;
    let mode = if attach.driver_mode() {
        0
    } else {
        libc::XDP_COPY
    };
    let (x, zero_copy) = bound_socket(
        name,
        link.ifindex,
        queue,
        size,
        chunk,
        mode | libc::XDP_USE_NEED_WAKEUP,
    )?;
    attach
        .set_queue(queue, &x.fd)
        .map_err(|e| os::ctx(e, name, "adding the socket to the XSKMAP"))?;
    let chunk64 = chunk as u64;
    let rx_free = (0..u64::from(x.rx_frames)).map(|i| i * chunk64).collect();
    let tx_free = (0..u64::from(x.tx_frames))
        .map(|i| (u64::from(x.rx_frames) + i) * chunk64)
        .collect();
    let tx_len = vec![0; x.tx_frames as usize];
    let mut port = XdpPort {
        name: opts.ifname.clone(),
        x,
        attach,
        _promiscuous: promiscuous,
        zero_copy,
        mtu: link.mtu,
        max_frame: opts.frame_size,
        rx_free,
        tx_free,
        tx_len,
        stats: PortStats::default(),
        own_rx_drops: 0,
    };
    port.refill();
    Ok(Box::new(port))
}

impl XdpPort {
    /// Puts free receive frames in the fill ring.
    fn refill(&mut self) {
        let n = self.x.fill.free(self.rx_free.len() as u32);
        for k in 0..n {
            if let Some(a) = self.rx_free.pop() {
                self.x.fill.put_addr(k, a);
            }
        }
        self.x.fill.submit(n);
    }

    /// The send frame index of UMEM address `addr`, if it is one.
    fn tx_index(&self, addr: u64) -> Option<usize> {
        let i = (addr / self.x.chunk as u64).checked_sub(u64::from(self.x.rx_frames))?;
        (i < u64::from(self.x.tx_frames)).then_some(i as usize)
    }

    /// Takes back the frames the kernel has sent, counting them.
    fn reclaim(&mut self) {
        let n = self.x.comp.available(self.x.tx_frames);
        for k in 0..n {
            let addr = self.x.comp.get_addr(k);
            let base = addr - addr % self.x.chunk as u64;
            if let Some(i) = self.tx_index(base) {
                self.stats.tx_packets += 1;
                self.stats.tx_bytes += u64::from(self.tx_len[i]);
                self.tx_free.push(base);
            }
        }
        self.x.comp.release(n);
    }

    /// Has the kernel send the TX ring's frames, kicking it as often as
    /// copy mode needs (bounded: never spins).
    fn kick(&mut self, queued: u32) {
        // Copy mode sends only when kicked; zero-copy when asked to.
        if self.zero_copy && !self.x.tx.needs_wakeup() {
            return;
        }
        let tries = queued / COPY_BATCH + 2;
        for _ in 0..tries {
            match self.x.kick_tx() {
                // EAGAIN: more to send (copy mode sends a batch a call).
                Err(e) if e == libc::EAGAIN || e == libc::EINTR => self.reclaim(),
                // Done, or the device is busy/down: the rest waits in the
                // ring for the next kick.
                _ => break,
            }
        }
    }
}

impl Port for XdpPort {
    fn name(&self) -> &str {
        &self.name
    }

    fn recv(&mut self, pool: &mut Pool, out: &mut Vec<Vec<u8>>, max: usize) -> io::Result<usize> {
        let want = max.min(self.x.rx_frames as usize) as u32;
        let n = self.x.rx.available(want);
        let chunk = self.x.chunk as u64;
        let rx_end = u64::from(self.x.rx_frames) * chunk;
        let mut got = 0;
        for k in 0..n {
            let (addr, len) = self.x.rx.get_desc(k);
            let base = addr - addr % chunk;
            if base >= rx_end || addr + u64::from(len) > base + chunk {
                self.own_rx_drops += 1;
                continue;
            }
            self.rx_free.push(base);
            let mut buf = pool.get();
            self.x.umem.copy_out(addr as usize, len as usize, &mut buf);
            if untagged_len(&buf) > self.max_frame {
                self.own_rx_drops += 1;
                pool.put(buf);
                continue;
            }
            self.stats.rx_packets += 1;
            self.stats.rx_bytes += buf.len() as u64;
            out.push(buf);
            got += 1;
        }
        self.x.rx.release(n);
        self.refill();
        if n == 0 && self.x.fill.needs_wakeup() {
            self.x.kick_rx();
        }
        Ok(got)
    }

    fn send(&mut self, frames: &[&[u8]]) -> io::Result<usize> {
        self.reclaim();
        let room = self.x.tx.free(frames.len().min(u32::MAX as usize) as u32);
        let mut queued = 0u32;
        for f in frames {
            if !sendable(f, self.mtu) || f.len() > self.x.chunk || queued == room {
                self.stats.tx_errors += 1;
                continue;
            }
            let Some(addr) = self.tx_free.pop() else {
                self.stats.tx_errors += 1;
                continue;
            };
            self.x.umem.copy_in(addr as usize, f);
            if let Some(i) = self.tx_index(addr) {
                self.tx_len[i] = f.len() as u32;
            }
            self.x.tx.put_desc(queued, addr, f.len() as u32);
            queued += 1;
        }
        self.x.tx.submit(queued);
        self.kick(queued);
        Ok(queued as usize)
    }

    fn fd(&self) -> RawFd {
        self.x.fd.as_raw_fd()
    }

    fn stats(&mut self) -> PortStats {
        self.reclaim();
        let mut s = self.stats;
        s.rx_dropped = self.own_rx_drops;
        let st =
            os::getsockopt::<libc::xdp_statistics>(&self.x.fd, libc::SOL_XDP, libc::XDP_STATISTICS);
        if let Ok((st, _)) = st {
            // The kernel's counters are totals since the socket opened.
            s.rx_dropped += st.rx_dropped + st.rx_ring_full;
            s.tx_errors += st.tx_invalid_descs;
        }
        s
    }

    fn mode(&self) -> &'static str {
        match (self.attach.driver_mode(), self.zero_copy) {
            (true, true) => "af-xdp, driver mode, zero-copy",
            (true, false) => "af-xdp, driver mode, copy",
            (false, _) => "af-xdp, generic mode, copy",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_and_queues() {
        assert_eq!(chunk_size(1518).unwrap(), 2048);
        assert_eq!(chunk_size(1788).unwrap(), 2048);
        assert_eq!(chunk_size(1789).unwrap(), 4096);
        assert_eq!(chunk_size(3836).unwrap(), 4096);
        assert!(chunk_size(3837).is_err());
        assert!(chunk_size(10).is_err());
        assert!(check_queues("x", 2, 2).is_ok());
        assert!(
            check_queues("x", 3, 2)
                .unwrap_err()
                .to_string()
                .contains("--workers 2")
        );
        assert!(
            check_queues("x", 1, 4)
                .unwrap_err()
                .to_string()
                .contains("--workers 4")
        );
    }

    #[test]
    fn tags_not_counted() {
        let mut f = vec![0u8; 1518];
        f[12..14].copy_from_slice(&[0x81, 0]);
        assert_eq!(untagged_len(&f), 1514);
        assert_eq!(untagged_len(&[0u8; 60]), 60);
    }
}
