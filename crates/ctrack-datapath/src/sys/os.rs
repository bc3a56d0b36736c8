//! Small safe wrappers over libc used by the socket code: errors with
//! context, sockets, socket options and memory mappings.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::ptr::NonNull;
use std::sync::atomic::AtomicU32;

/// `r` as a result: negative means `errno`.
pub(super) fn cvt(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

/// `e` with `what` (and the interface) in front of its message, same kind.
pub(super) fn ctx(e: io::Error, ifname: &str, what: &str) -> io::Error {
    io::Error::new(e.kind(), format!("{ifname}: {what}: {e}"))
}

/// An error of kind `kind` with message `msg`.
pub(super) fn err(kind: io::ErrorKind, msg: String) -> io::Error {
    io::Error::new(kind, msg)
}

/// A new socket (close-on-exec).
pub(super) fn socket(
    domain: libc::c_int,
    ty: libc::c_int,
    proto: libc::c_int,
) -> io::Result<OwnedFd> {
    // SAFETY: socket(2) takes plain integers and touches no memory of ours.
    let fd = cvt(unsafe { libc::socket(domain, ty | libc::SOCK_CLOEXEC, proto) })?;
    // SAFETY: `fd` is a descriptor socket(2) just made; nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Plain data: C structs of integers (and pointers) that every bit
/// pattern, all zeros included, is a valid value of.
///
/// # Safety
/// Only for types with no invalid bit patterns and no padding-sensitive
/// invariants.
pub(super) unsafe trait Pod: Copy {}

// SAFETY: integers.
unsafe impl Pod for libc::c_int {}
// SAFETY: integers.
unsafe impl Pod for u64 {}
// SAFETY: a C struct of u32 counters.
unsafe impl Pod for libc::tpacket_stats_v3 {}
// SAFETY: a C struct of u32 fields.
unsafe impl Pod for libc::tpacket_req3 {}
// SAFETY: a C struct of integers.
unsafe impl Pod for libc::packet_mreq {}
// SAFETY: a C struct of integers.
unsafe impl Pod for libc::sockaddr_ll {}
// SAFETY: a C struct of integers (and an integer array).
unsafe impl Pod for libc::ifreq {}
// SAFETY: a C struct of u64 counters.
unsafe impl Pod for libc::xdp_statistics {}
// SAFETY: a C struct of u64 offsets.
unsafe impl Pod for libc::xdp_mmap_offsets {}
// SAFETY: a C struct of integers.
unsafe impl Pod for libc::xdp_umem_reg {}
// SAFETY: a C struct of one u32.
unsafe impl Pod for libc::xdp_options {}
// SAFETY: a C struct of integers.
unsafe impl Pod for libc::sockaddr_xdp {}
// SAFETY: a C struct of integers and (null when zero) pointers.
unsafe impl Pod for libc::mmsghdr {}
// SAFETY: a C struct of integers and (null when zero) pointers.
unsafe impl Pod for libc::pollfd {}

/// A value of `T` with every byte zero.
pub(super) fn zeroed<T: Pod>() -> T {
    // SAFETY: `T: Pod` makes all-zero bytes a valid `T`.
    unsafe { std::mem::zeroed() }
}

/// `size_of::<T>()` as a `socklen_t`.
fn socklen<T>() -> libc::socklen_t {
    // Every type passed here is a small C struct.
    std::mem::size_of::<T>() as libc::socklen_t
}

/// setsockopt(2) with `val` as the option's value.
pub(super) fn setsockopt<T: Pod>(
    fd: &OwnedFd,
    level: libc::c_int,
    name: libc::c_int,
    val: &T,
) -> io::Result<()> {
    // SAFETY: `val` points to a live `T` of the length passed, which the
    // kernel only reads.
    let r = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            level,
            name,
            (val as *const T).cast(),
            socklen::<T>(),
        )
    };
    cvt(r).map(|_| ())
}

/// getsockopt(2) into a `T`; returns the value and the length the kernel
/// wrote.
pub(super) fn getsockopt<T: Pod>(
    fd: &impl AsRawFd,
    level: libc::c_int,
    name: libc::c_int,
) -> io::Result<(T, usize)> {
    let mut val: T = zeroed();
    let mut len = socklen::<T>();
    // SAFETY: `val` is a live, writable `T` and `len` says its size; the
    // kernel writes at most `len` bytes and any bytes make a valid `T`.
    let r = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            level,
            name,
            (&mut val as *mut T).cast(),
            &mut len,
        )
    };
    cvt(r)?;
    Ok((val, len as usize))
}

/// recv(2) on `fd` into `buf` (its whole length) with `flags`: the bytes
/// the datagram had (with `MSG_TRUNC`, more than `buf` holds if it was
/// cut).
pub(super) fn recv(fd: &OwnedFd, buf: &mut [u8], flags: libc::c_int) -> io::Result<usize> {
    // SAFETY: `buf` is live and writable for its length, which is what the
    // kernel is told it may write.
    let r = unsafe { libc::recv(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), flags) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(r as usize)
}

/// bind(2) to the address `addr` (a `sockaddr_*` struct).
pub(super) fn bind<T: Pod>(fd: &OwnedFd, addr: &T) -> io::Result<()> {
    // SAFETY: `addr` points to a live `T` of the length passed, which the
    // kernel only reads.
    let r = unsafe { libc::bind(fd.as_raw_fd(), (addr as *const T).cast(), socklen::<T>()) };
    cvt(r).map(|_| ())
}

/// One memory mapping, unmapped on drop. All access goes through raw
/// pointers (never references to the bytes), as the kernel writes into
/// some of these mappings while we hold them.
#[derive(Debug)]
pub(super) struct Mmap {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping belongs to this value alone (no other handle to it
// exists in the process), so moving it to another thread is sound; `Mmap`
// stays `!Sync`, so its `&self` writers run on one thread at a time.
unsafe impl Send for Mmap {}

impl Mmap {
    /// Maps `len` bytes of `fd` at `offset` (shared, read-write), or
    /// anonymous private memory when `fd` is `None`.
    pub(super) fn new(fd: Option<&OwnedFd>, len: usize, offset: u64) -> io::Result<Mmap> {
        if len == 0 {
            return Err(err(io::ErrorKind::InvalidInput, "empty mapping".into()));
        }
        let (raw, flags) = match fd {
            Some(f) => (f.as_raw_fd(), libc::MAP_SHARED | libc::MAP_POPULATE),
            None => (
                -1,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE,
            ),
        };
        let off = libc::off_t::try_from(offset).map_err(|_| {
            err(
                io::ErrorKind::InvalidInput,
                "mapping offset out of range".into(),
            )
        })?;
        let prot = libc::PROT_READ | libc::PROT_WRITE;
        // SAFETY: a fresh mapping at an address the kernel picks; it aliases
        // no Rust object.
        let p = unsafe { libc::mmap(std::ptr::null_mut(), len, prot, flags, raw, off) };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let ptr = NonNull::new(p.cast::<u8>())
            .ok_or_else(|| err(io::ErrorKind::Other, "mmap returned null".into()))?;
        Ok(Mmap { ptr, len })
    }

    /// The mapping's length in bytes.
    pub(super) fn len(&self) -> usize {
        self.len
    }

    /// The mapping's first byte (for registering it with the kernel).
    pub(super) fn addr(&self) -> u64 {
        self.ptr.as_ptr() as u64
    }

    /// Whether `[off, off + n)` lies inside the mapping.
    #[inline]
    pub(super) fn fits(&self, off: usize, n: usize) -> bool {
        off.checked_add(n).is_some_and(|end| end <= self.len)
    }

    /// The atomic 32-bit word at `off` (shared with the kernel), or `None`
    /// if it is out of bounds or misaligned.
    #[inline]
    pub(super) fn atomic_u32(&self, off: usize) -> Option<&AtomicU32> {
        if !self.fits(off, 4) || !(self.ptr.as_ptr() as usize + off).is_multiple_of(4) {
            return None;
        }
        // SAFETY: in bounds and 4-aligned (checked above); the mapping
        // lives as long as `&self`; `AtomicU32` has `u32`'s layout and
        // allows concurrent access by the kernel.
        Some(unsafe { &*self.ptr.as_ptr().add(off).cast::<AtomicU32>() })
    }

    /// The `N` bytes at `off` (copied out), or `None` if out of bounds.
    #[inline]
    pub(super) fn read<const N: usize>(&self, off: usize) -> Option<[u8; N]> {
        if !self.fits(off, N) {
            return None;
        }
        // SAFETY: in bounds (checked above); an unaligned read of plain
        // bytes, of memory the kernel no longer writes (the caller owns it
        // through the ring protocol).
        Some(unsafe {
            self.ptr
                .as_ptr()
                .add(off)
                .cast::<[u8; N]>()
                .read_unaligned()
        })
    }

    /// Appends the `n` bytes at `off` to `dst`; false (nothing appended) if
    /// out of bounds.
    #[inline]
    pub(super) fn copy_out(&self, off: usize, n: usize, dst: &mut Vec<u8>) -> bool {
        if !self.fits(off, n) {
            return false;
        }
        dst.reserve(n);
        // SAFETY: source in bounds (checked above), destination has `n`
        // spare bytes (reserved); the two never overlap (`dst` is a Vec of
        // ours, not this mapping), and the bytes are initialised once
        // copied, so `set_len` is sound.
        unsafe {
            let end = dst.as_mut_ptr().add(dst.len());
            std::ptr::copy_nonoverlapping(self.ptr.as_ptr().add(off), end, n);
            dst.set_len(dst.len() + n);
        }
        true
    }

    /// Copies `src` to `off`; false (nothing written) if out of bounds.
    #[inline]
    pub(super) fn copy_in(&self, off: usize, src: &[u8]) -> bool {
        if !self.fits(off, src.len()) {
            return false;
        }
        // SAFETY: destination in bounds (checked above) and owned by us
        // through the ring protocol (the kernel reads it only once we
        // publish its descriptor); no Rust reference to these bytes exists.
        unsafe {
            std::ptr::copy_nonoverlapping(src.as_ptr(), self.ptr.as_ptr().add(off), src.len());
        }
        true
    }
}

impl Drop for Mmap {
    fn drop(&mut self) {
        // SAFETY: `ptr`/`len` is a mapping made by `Mmap::new` and unmapped
        // only here, once; no reference into it outlives `self`.
        unsafe {
            libc::munmap(self.ptr.as_ptr().cast(), self.len);
        }
    }
}
