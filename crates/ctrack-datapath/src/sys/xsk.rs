//! An AF_XDP socket's memory: the UMEM (frame area shared with the
//! kernel) and the four single-producer single-consumer rings (fill,
//! completion, RX, TX).
//!
//! Written by hand rather than taken from a crate: the one pure-Rust crate
//! without libbpf (`xdpilone`) is EUPL-1.2 licensed (copyleft, while
//! ctrack is Apache-2.0), only passively maintained, and would still leave
//! us the unsafe UMEM handling; the rings are a few dozen lines.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, Ordering};

use super::os::{self, Mmap, err};

/// One ring shared with the kernel: `size` entries of `elem` bytes,
/// producer and consumer indices that only grow (mod 2^32).
#[derive(Debug)]
pub(super) struct Ring {
    prod: NonNull<AtomicU32>,
    cons: NonNull<AtomicU32>,
    flags: NonNull<AtomicU32>,
    desc: NonNull<u8>,
    mask: u32,
    elem: usize,
    /// Our copy of the producer index (ours on a producer ring).
    cached_prod: u32,
    /// Our copy of the consumer index (ours on a consumer ring).
    cached_cons: u32,
    /// The mapping (unmapped last: the pointers above point into it).
    _map: Mmap,
}

// SAFETY: the pointers point into `_map`, which this ring owns alone and
// which moves with it; the kernel side is shared through atomics.
unsafe impl Send for Ring {}

impl Ring {
    /// Maps the ring of `size` entries of `elem` bytes at `pgoff` of `fd`,
    /// laid out as `off` says.
    fn map(
        fd: &OwnedFd,
        off: &libc::xdp_ring_offset,
        size: u32,
        elem: usize,
        pgoff: u64,
    ) -> io::Result<Ring> {
        let fields = [off.producer, off.consumer, off.flags, off.desc];
        let fields: Vec<usize> = fields
            .iter()
            .map(|&f| usize::try_from(f).unwrap_or(usize::MAX))
            .collect();
        let bad = || err(io::ErrorKind::InvalidData, "unexpected ring layout".into());
        let len = fields[3]
            .checked_add(size as usize * elem)
            .ok_or_else(bad)?;
        let map = Mmap::new(Some(fd), len, pgoff)?;
        let word = |o: usize| map.atomic_u32(o).map(NonNull::from).ok_or_else(bad);
        let (prod, cons, flags) = (word(fields[0])?, word(fields[1])?, word(fields[2])?);
        if !map.fits(fields[3], size as usize * elem)
            || !(map.addr() as usize + fields[3]).is_multiple_of(8)
        {
            return Err(bad());
        }
        // SAFETY: `fields[3]` is inside the mapping (checked above), so the
        // pointer is in bounds and not null.
        let desc = unsafe { NonNull::new_unchecked((map.addr() as usize + fields[3]) as *mut u8) };
        let mut r = Ring {
            prod,
            cons,
            flags,
            desc,
            mask: size - 1,
            elem,
            cached_prod: 0,
            cached_cons: 0,
            _map: map,
        };
        r.cached_prod = r.prod().load(Ordering::Acquire);
        r.cached_cons = r.cons().load(Ordering::Acquire);
        Ok(r)
    }

    fn prod(&self) -> &AtomicU32 {
        // SAFETY: checked in bounds and aligned in `map`; the mapping lives
        // as long as `self`.
        unsafe { self.prod.as_ref() }
    }

    fn cons(&self) -> &AtomicU32 {
        // SAFETY: as for `prod`.
        unsafe { self.cons.as_ref() }
    }

    /// The number of entries.
    fn size(&self) -> u32 {
        self.mask + 1
    }

    /// Whether the kernel asks for a wake-up (XDP_USE_NEED_WAKEUP).
    pub(super) fn needs_wakeup(&self) -> bool {
        // SAFETY: as for `prod`.
        let flags = unsafe { self.flags.as_ref() };
        flags.load(Ordering::Relaxed) & libc::XDP_RING_NEED_WAKEUP != 0
    }

    /// Producer side: how many of `want` entries may be written now.
    pub(super) fn free(&mut self, want: u32) -> u32 {
        let mut free = self
            .size()
            .wrapping_sub(self.cached_prod.wrapping_sub(self.cached_cons));
        if free < want {
            self.cached_cons = self.cons().load(Ordering::Acquire);
            free = self
                .size()
                .wrapping_sub(self.cached_prod.wrapping_sub(self.cached_cons));
        }
        free.min(want).min(self.size())
    }

    /// Consumer side: how many entries (up to `max`) may be read now.
    pub(super) fn available(&mut self, max: u32) -> u32 {
        let mut n = self.cached_prod.wrapping_sub(self.cached_cons);
        if n < max {
            self.cached_prod = self.prod().load(Ordering::Acquire);
            n = self.cached_prod.wrapping_sub(self.cached_cons);
        }
        n.min(max).min(self.size())
    }

    /// The entry `k` places past our index (`cached_prod` on a producer
    /// ring, `cached_cons` on a consumer ring).
    fn slot(&self, base: u32, k: u32) -> *mut u8 {
        let i = (base.wrapping_add(k) & self.mask) as usize;
        // SAFETY: `i < size` and the mapping holds `size * elem` bytes
        // from `desc` (checked in `map`).
        unsafe { self.desc.as_ptr().add(i * self.elem) }
    }

    /// Writes the address `addr` as entry `k` (fill ring).
    pub(super) fn put_addr(&mut self, k: u32, addr: u64) {
        debug_assert_eq!(self.elem, 8);
        // SAFETY: an 8-aligned slot of this ring (desc is 8-aligned, elem
        // is 8), not yet published, so the kernel does not read it.
        unsafe {
            self.slot(self.cached_prod, k)
                .cast::<u64>()
                .write_volatile(addr)
        }
    }

    /// Writes the descriptor (`addr`, `len`) as entry `k` (TX ring).
    pub(super) fn put_desc(&mut self, k: u32, addr: u64, len: u32) {
        debug_assert_eq!(self.elem, 16);
        let d = libc::xdp_desc {
            addr,
            len,
            options: 0,
        };
        // SAFETY: an 8-aligned 16-byte slot of this ring, not yet
        // published, so the kernel does not read it.
        unsafe {
            self.slot(self.cached_prod, k)
                .cast::<libc::xdp_desc>()
                .write_volatile(d)
        }
    }

    /// Publishes `n` written entries.
    pub(super) fn submit(&mut self, n: u32) {
        self.cached_prod = self.cached_prod.wrapping_add(n);
        // Release: the entries are written before the kernel sees them.
        self.prod().store(self.cached_prod, Ordering::Release);
    }

    /// Reads entry `k` as an address (completion ring).
    pub(super) fn get_addr(&self, k: u32) -> u64 {
        debug_assert_eq!(self.elem, 8);
        // SAFETY: an 8-aligned slot the kernel published (Acquire in
        // `available`) and does not write until we release it.
        unsafe { self.slot(self.cached_cons, k).cast::<u64>().read_volatile() }
    }

    /// Reads entry `k` as a descriptor: (address, length) (RX ring).
    pub(super) fn get_desc(&self, k: u32) -> (u64, u32) {
        debug_assert_eq!(self.elem, 16);
        // SAFETY: as for `get_addr`, a 16-byte slot.
        let d = unsafe {
            self.slot(self.cached_cons, k)
                .cast::<libc::xdp_desc>()
                .read_volatile()
        };
        (d.addr, d.len)
    }

    /// Gives `n` read entries back to the kernel.
    pub(super) fn release(&mut self, n: u32) {
        self.cached_cons = self.cached_cons.wrapping_add(n);
        // Release: we are done reading before the kernel reuses them.
        self.cons().store(self.cached_cons, Ordering::Release);
    }
}

/// An AF_XDP socket with its UMEM and rings, not bound yet. Frames
/// `[0, rx_frames)` of the UMEM are for receiving, the rest for sending.
#[derive(Debug)]
pub(super) struct Xsk {
    pub(super) rx: Ring,
    pub(super) tx: Ring,
    pub(super) fill: Ring,
    pub(super) comp: Ring,
    /// The socket (closed after the rings are unmapped).
    pub(super) fd: OwnedFd,
    /// The frame area (unmapped last).
    pub(super) umem: Mmap,
    /// Bytes per frame.
    pub(super) chunk: usize,
    /// Frames for receiving (the first ones).
    pub(super) rx_frames: u32,
    /// Frames for sending (after those).
    pub(super) tx_frames: u32,
}

impl Xsk {
    /// A socket with `rx` receive and `tx` send frames of `chunk` bytes
    /// (powers of two), its rings as large as that.
    pub(super) fn new(rx: u32, tx: u32, chunk: usize) -> io::Result<Xsk> {
        let c = |what: &'static str| move |e: io::Error| err(e.kind(), format!("{what}: {e}"));
        let fd =
            os::socket(libc::AF_XDP, libc::SOCK_RAW, 0).map_err(c("opening an AF_XDP socket"))?;
        let umem =
            Mmap::new(None, (rx + tx) as usize * chunk, 0).map_err(c("allocating the UMEM"))?;
        let reg = libc::xdp_umem_reg {
            addr: umem.addr(),
            len: umem.len() as u64,
            chunk_size: chunk as u32,
            headroom: 0,
            flags: 0,
            tx_metadata_len: 0,
        };
        os::setsockopt(&fd, libc::SOL_XDP, libc::XDP_UMEM_REG, &reg).map_err(|e| {
            let hint = if e.raw_os_error() == Some(libc::ENOBUFS)
                || e.raw_os_error() == Some(libc::EPERM)
            {
                " (locked memory limit too low? raise `ulimit -l` or grant CAP_IPC_LOCK)"
            } else {
                ""
            };
            err(e.kind(), format!("registering the UMEM: {e}{hint}"))
        })?;
        let sizes = [
            (libc::XDP_UMEM_FILL_RING, rx),
            (libc::XDP_UMEM_COMPLETION_RING, tx),
            (libc::XDP_RX_RING, rx),
            (libc::XDP_TX_RING, tx),
        ];
        for (opt, n) in sizes {
            os::setsockopt(&fd, libc::SOL_XDP, opt, &(n as libc::c_int))
                .map_err(c("sizing the AF_XDP rings"))?;
        }
        let (off, len) =
            os::getsockopt::<libc::xdp_mmap_offsets>(&fd, libc::SOL_XDP, libc::XDP_MMAP_OFFSETS)
                .map_err(c("reading the AF_XDP ring offsets"))?;
        if len != std::mem::size_of::<libc::xdp_mmap_offsets>() {
            return Err(err(
                io::ErrorKind::Unsupported,
                "AF_XDP ring offsets of a kernel before 5.4".into(),
            ));
        }
        let d16 = std::mem::size_of::<libc::xdp_desc>();
        let m = c("mapping the AF_XDP rings");
        let fill = Ring::map(&fd, &off.fr, rx, 8, libc::XDP_UMEM_PGOFF_FILL_RING).map_err(m)?;
        let comp =
            Ring::map(&fd, &off.cr, tx, 8, libc::XDP_UMEM_PGOFF_COMPLETION_RING).map_err(m)?;
        let rx_ring =
            Ring::map(&fd, &off.rx, rx, d16, libc::XDP_PGOFF_RX_RING as u64).map_err(m)?;
        let tx_ring =
            Ring::map(&fd, &off.tx, tx, d16, libc::XDP_PGOFF_TX_RING as u64).map_err(m)?;
        Ok(Xsk {
            rx: rx_ring,
            tx: tx_ring,
            fill,
            comp,
            fd,
            umem,
            chunk,
            rx_frames: rx,
            tx_frames: tx,
        })
    }

    /// Binds to queue `queue` of `ifindex` with `flags` (XDP_COPY...);
    /// returns whether the socket runs zero-copy.
    pub(super) fn bind(&self, ifindex: u32, queue: u32, flags: u16) -> io::Result<bool> {
        let mut sa: libc::sockaddr_xdp = os::zeroed();
        sa.sxdp_family = libc::AF_XDP as u16;
        sa.sxdp_flags = flags;
        sa.sxdp_ifindex = ifindex;
        sa.sxdp_queue_id = queue;
        os::bind(&self.fd, &sa)?;
        let opts = os::getsockopt::<libc::xdp_options>(&self.fd, libc::SOL_XDP, libc::XDP_OPTIONS);
        Ok(opts.is_ok_and(|(o, _)| o.flags & libc::XDP_OPTIONS_ZEROCOPY != 0))
    }

    /// Asks the kernel to send what the TX ring holds (and, in copy mode,
    /// to do the sending now); `Err` carries the errno.
    pub(super) fn kick_tx(&self) -> Result<(), i32> {
        // SAFETY: sendto(2) with no buffer and no address touches no
        // memory of ours.
        let r = unsafe {
            libc::sendto(
                self.fd.as_raw_fd(),
                std::ptr::null(),
                0,
                libc::MSG_DONTWAIT,
                std::ptr::null(),
                0,
            )
        };
        if r < 0 {
            Err(io::Error::last_os_error().raw_os_error().unwrap_or(0))
        } else {
            Ok(())
        }
    }

    /// Asks the kernel to look at the fill ring again (need-wakeup mode).
    pub(super) fn kick_rx(&self) {
        // SAFETY: recvfrom(2) with no buffer and no address touches no
        // memory of ours.
        unsafe {
            libc::recvfrom(
                self.fd.as_raw_fd(),
                std::ptr::null_mut(),
                0,
                libc::MSG_DONTWAIT,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
            );
        }
    }
}
