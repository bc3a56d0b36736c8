//! The XDP program that hands an interface's frames to our AF_XDP
//! sockets, loaded with bpf(2) alone (no clang, no libbpf): an XSKMAP
//! keyed by receive queue, and six hand-assembled eBPF instructions:
//!
//! ```text
//! r2 = *(u32 *)(r1 + 16)      ; ctx->rx_queue_index
//! r1 = map                    ; ld_imm64, BPF_PSEUDO_MAP_FD
//! r3 = XDP_PASS               ; what to do when no socket holds the queue
//! call bpf_redirect_map
//! exit
//! ```
//!
//! It is attached with a BPF link (driver mode, else generic/SKB mode),
//! which the kernel detaches when the last descriptor to it closes, at
//! the latest when the process exits. One attachment per interface, shared
//! by the process's ports on it through a registry keyed by ifindex.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::Mutex;

use super::os::err;

const BPF_MAP_CREATE: libc::c_long = 0;
const BPF_MAP_UPDATE_ELEM: libc::c_long = 2;
const BPF_PROG_LOAD: libc::c_long = 5;
const BPF_LINK_CREATE: libc::c_long = 28;
const BPF_MAP_TYPE_XSKMAP: u32 = 17;
const BPF_PROG_TYPE_XDP: u32 = 6;
/// `BPF_XDP` of `enum bpf_attach_type`.
const BPF_XDP: u32 = 37;
const BPF_PSEUDO_MAP_FD: u8 = 1;
const BPF_FUNC_REDIRECT_MAP: i32 = 51;
const XDP_PASS: i32 = 2;
const XDP_FLAGS_SKB_MODE: u32 = 1 << 1;
const XDP_FLAGS_DRV_MODE: u32 = 1 << 2;
/// Offset of `rx_queue_index` in `struct xdp_md`.
const XDP_MD_RX_QUEUE: i16 = 16;

/// A `union bpf_attr`, as bytes (we fill the few fields each command
/// needs; the rest stays zero, as the kernel requires).
#[repr(C, align(8))]
struct Attr([u8; 128]);

impl Attr {
    fn new() -> Attr {
        Attr([0; 128])
    }
    fn u32(&mut self, off: usize, v: u32) -> &mut Attr {
        self.0[off..off + 4].copy_from_slice(&v.to_ne_bytes());
        self
    }
    fn u64(&mut self, off: usize, v: u64) -> &mut Attr {
        self.0[off..off + 8].copy_from_slice(&v.to_ne_bytes());
        self
    }
    fn name(&mut self, off: usize, name: &[u8; 16]) -> &mut Attr {
        self.0[off..off + 16].copy_from_slice(name);
        self
    }
}

/// bpf(2): the non-negative result, or the errno as an error.
fn bpf(cmd: libc::c_long, attr: &mut Attr) -> io::Result<libc::c_long> {
    // SAFETY: `attr` is a live, writable 128-byte `union bpf_attr` prefix,
    // the size passed; pointers inside it (program, license, log, keys)
    // point to buffers the caller keeps alive across the call.
    let r = unsafe { libc::syscall(libc::SYS_bpf, cmd, attr.0.as_mut_ptr(), attr.0.len()) };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

/// bpf(2) that makes a descriptor.
fn bpf_fd(cmd: libc::c_long, attr: &mut Attr) -> io::Result<OwnedFd> {
    let fd = bpf(cmd, attr)?;
    let fd = i32::try_from(fd)
        .map_err(|_| err(io::ErrorKind::Other, "bpf(2) returned no descriptor".into()))?;
    // SAFETY: bpf(2) just made `fd` for us; nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// One eBPF instruction.
fn insn(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> [u8; 8] {
    let regs = if cfg!(target_endian = "little") {
        dst | src << 4
    } else {
        dst << 4 | src
    };
    let mut b = [0u8; 8];
    b[0] = code;
    b[1] = regs;
    b[2..4].copy_from_slice(&off.to_ne_bytes());
    b[4..8].copy_from_slice(&imm.to_ne_bytes());
    b
}

/// The program, redirecting to the XSKMAP `map_fd`.
fn program(map_fd: i32) -> [[u8; 8]; 6] {
    [
        insn(0x61, 2, 1, XDP_MD_RX_QUEUE, 0), // ldxw r2, [r1 + 16]
        insn(0x18, 1, BPF_PSEUDO_MAP_FD, 0, map_fd), // lddw r1, map
        insn(0, 0, 0, 0, 0),                  // (its upper half)
        insn(0xb7, 3, 0, 0, XDP_PASS),        // mov r3, XDP_PASS
        insn(0x85, 0, 0, 0, BPF_FUNC_REDIRECT_MAP), // call bpf_redirect_map
        insn(0x95, 0, 0, 0, 0),               // exit
    ]
}

fn map_create(entries: u32) -> io::Result<OwnedFd> {
    let mut a = Attr::new();
    a.u32(0, BPF_MAP_TYPE_XSKMAP)
        .u32(4, 4)
        .u32(8, 4)
        .u32(12, entries);
    a.name(28, b"ctrack_xsks\0\0\0\0\0");
    bpf_fd(BPF_MAP_CREATE, &mut a)
}

fn prog_load(map: &OwnedFd) -> io::Result<OwnedFd> {
    let prog = program(map.as_raw_fd());
    let license = b"GPL\0";
    let mut log = vec![0u8; 0];
    for level in [0u32, 1] {
        if level == 1 {
            log = vec![0u8; 16384];
        }
        let mut a = Attr::new();
        a.u32(0, BPF_PROG_TYPE_XDP).u32(4, prog.len() as u32);
        a.u64(8, prog.as_ptr() as u64)
            .u64(16, license.as_ptr() as u64);
        a.u32(24, level)
            .u32(28, log.len() as u32)
            .u64(32, log.as_mut_ptr() as u64);
        a.name(48, b"ctrack_xsk\0\0\0\0\0\0").u32(68, BPF_XDP);
        match bpf_fd(BPF_PROG_LOAD, &mut a) {
            Ok(fd) => return Ok(fd),
            Err(e) if level == 1 => {
                let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
                let text = String::from_utf8_lossy(&log[..end]);
                let text = text.trim().replace('\n', "; ");
                return Err(err(e.kind(), format!("{e} (verifier: {text})")));
            }
            Err(_) => {}
        }
    }
    Err(err(io::ErrorKind::Other, "program not loaded".into()))
}

fn link_create(prog: &OwnedFd, ifindex: u32, flags: u32) -> io::Result<OwnedFd> {
    let mut a = Attr::new();
    a.u32(0, prog.as_raw_fd() as u32)
        .u32(4, ifindex)
        .u32(8, BPF_XDP)
        .u32(12, flags);
    bpf_fd(BPF_LINK_CREATE, &mut a)
}

/// One interface's program, map and link.
#[derive(Debug)]
struct Attached {
    ifindex: u32,
    users: usize,
    driver: bool,
    /// Closed first: detaches the program.
    _link: OwnedFd,
    _prog: OwnedFd,
    map: OwnedFd,
}

/// The process's attachments. Entries are added and removed, and their
/// links closed, under this lock, so that a port opening on an interface
/// never races the detaching of the last one's program.
static REGISTRY: Mutex<Vec<Attached>> = Mutex::new(Vec::new());

fn registry() -> std::sync::MutexGuard<'static, Vec<Attached>> {
    REGISTRY.lock().unwrap_or_else(|e| e.into_inner())
}

/// A port's share of its interface's XDP program; the program is detached
/// when the last share drops.
#[derive(Debug)]
pub(super) struct Attachment {
    ifindex: u32,
    driver: bool,
}

impl Attachment {
    /// Attaches the program to `ifindex` (`queues` receive queues), or
    /// shares the attachment already there.
    pub(super) fn get(ifname: &str, ifindex: u32, queues: u32) -> io::Result<Attachment> {
        let mut reg = registry();
        if let Some(a) = reg.iter_mut().find(|a| a.ifindex == ifindex) {
            a.users += 1;
            return Ok(Attachment {
                ifindex,
                driver: a.driver,
            });
        }
        let c = |what: &'static str| {
            move |e: io::Error| err(e.kind(), format!("{ifname}: {what}: {e}"))
        };
        let map = map_create(queues).map_err(c("creating the XSKMAP"))?;
        let prog = prog_load(&map).map_err(c("loading the XDP program"))?;
        let (link, driver) = match link_create(&prog, ifindex, XDP_FLAGS_DRV_MODE) {
            Ok(l) => (l, true),
            Err(e)
                if e.raw_os_error() == Some(libc::EBUSY)
                    || e.raw_os_error() == Some(libc::EEXIST) =>
            {
                let msg = format!(
                    "{ifname}: attaching the XDP program: {e} (another XDP program is attached)"
                );
                return Err(err(e.kind(), msg));
            }
            Err(_) => {
                let l = link_create(&prog, ifindex, XDP_FLAGS_SKB_MODE)
                    .map_err(c("attaching the XDP program"))?;
                (l, false)
            }
        };
        reg.push(Attached {
            ifindex,
            users: 1,
            driver,
            _link: link,
            _prog: prog,
            map,
        });
        Ok(Attachment { ifindex, driver })
    }

    /// Whether the program runs in the driver (else in generic mode).
    pub(super) fn driver_mode(&self) -> bool {
        self.driver
    }

    /// Sends queue `queue`'s frames to the socket `xsk`.
    pub(super) fn set_queue(&self, queue: u32, xsk: &OwnedFd) -> io::Result<()> {
        let reg = registry();
        let Some(a) = reg.iter().find(|a| a.ifindex == self.ifindex) else {
            return Err(err(io::ErrorKind::NotFound, "XDP attachment gone".into()));
        };
        let key = queue;
        let value = xsk.as_raw_fd() as u32;
        let mut attr = Attr::new();
        attr.u32(0, a.map.as_raw_fd() as u32);
        attr.u64(8, &key as *const u32 as u64)
            .u64(16, &value as *const u32 as u64);
        bpf(BPF_MAP_UPDATE_ELEM, &mut attr).map(|_| ())
    }
}

impl Drop for Attachment {
    fn drop(&mut self) {
        let mut reg = registry();
        if let Some(i) = reg.iter().position(|a| a.ifindex == self.ifindex) {
            reg[i].users -= 1;
            if reg[i].users == 0 {
                // Closes the link (detaching the program), program and map.
                reg.swap_remove(i);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg(target_endian = "little")]
    fn program_encoded() {
        let p = program(7);
        assert_eq!(p[0], [0x61, 0x12, 16, 0, 0, 0, 0, 0]);
        assert_eq!(p[1], [0x18, 0x11, 0, 0, 7, 0, 0, 0]);
        assert_eq!(p[3], [0xb7, 0x03, 0, 0, 2, 0, 0, 0]);
        assert_eq!(p[4], [0x85, 0, 0, 0, 51, 0, 0, 0]);
        assert_eq!(p[5], [0x95, 0, 0, 0, 0, 0, 0, 0]);
    }
}
