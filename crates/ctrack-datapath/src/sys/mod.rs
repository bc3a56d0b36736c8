//! System calls: AF_PACKET and AF_XDP sockets, their rings, polling and
//! capabilities. The only module of this crate with unsafe code; every
//! block says why it is sound.
//!
//! - `port`: the ports' types (re-exported by `crate::io`);
//! - `os`: small wrappers (sockets, socket options, mappings);
//! - `ifinfo`: interface index, MAC, MTU, queues;
//! - `caps`: the capability check;
//! - `lock`: one datapath an interface (a claim on each port's);
//! - `packet`, `rxring`: AF_PACKET ports (a TPACKET_V3 or V2 receive
//!   ring, sendmmsg);
//! - `xdp`, `xsk`, `bpf`: AF_XDP ports, their UMEM and rings, and the XDP
//!   program that feeds them.

mod bpf;
mod caps;
mod ifinfo;
pub(crate) mod lock;
mod os;
mod packet;
pub(crate) mod port;
mod rxring;
mod xdp;
mod xsk;

use std::io;
use std::os::fd::RawFd;
use std::time::Duration;

pub(crate) use caps::check_capabilities;
pub(crate) use ifinfo::{index as interface_index, interface, link_state};
use port::{IoKind, Port, PortOptions};
pub(crate) use rxring::MAX_FRAME;

/// See `crate::io::open`.
pub(crate) fn open(opts: &PortOptions) -> io::Result<Box<dyn Port>> {
    if opts.workers == 0 || opts.worker >= opts.workers {
        let msg = format!(
            "{}: worker {} of {} workers",
            opts.ifname, opts.worker, opts.workers
        );
        return Err(io::Error::new(io::ErrorKind::InvalidInput, msg));
    }
    match opts.kind {
        IoKind::AfPacket => packet::open(opts),
        IoKind::AfXdp => xdp::open(opts),
    }
}

/// See `crate::io::wait`.
pub(crate) fn wait(fds: &[RawFd], timeout: Duration) -> io::Result<bool> {
    let ms = match timeout.as_millis() {
        0 if !timeout.is_zero() => 1,
        ms => ms.min(i32::MAX as u128) as libc::c_int,
    };
    let mut polls: Vec<libc::pollfd> = Vec::new();
    let mut small = [libc::pollfd {
        fd: -1,
        events: 0,
        revents: 0,
    }; 16];
    let set: &mut [libc::pollfd] = if fds.len() <= small.len() {
        &mut small[..fds.len()]
    } else {
        polls.resize(
            fds.len(),
            libc::pollfd {
                fd: -1,
                events: 0,
                revents: 0,
            },
        );
        &mut polls
    };
    for (p, &fd) in set.iter_mut().zip(fds) {
        *p = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
    }
    // SAFETY: `set` is a live, writable array of `set.len()` pollfd; the
    // kernel writes only their `revents`.
    let r = unsafe { libc::poll(set.as_mut_ptr(), set.len() as libc::nfds_t, ms) };
    if r < 0 {
        let e = io::Error::last_os_error();
        return if e.raw_os_error() == Some(libc::EINTR) {
            Ok(true)
        } else {
            Err(e)
        };
    }
    take_errors(set)?;
    Ok(r > 0)
}

/// Reads (and so clears) the pending error of every socket of `set` that
/// `poll` found in error. An AF_PACKET socket whose link goes down or
/// whose interface is removed holds `ENETDOWN` until it is read, and
/// polls as ready until then: a worker that did not read it woke at once
/// from every wait and spun on every core, even after the link came back
/// (until 2026-12-01). Its ring never reads it, so it is read here; the
/// link's state is the housekeeping thread's to report. A descriptor that
/// is not open (`POLLNVAL`, never a port's) is an error.
fn take_errors(set: &[libc::pollfd]) -> io::Result<()> {
    for p in set {
        if p.revents & libc::POLLNVAL != 0 {
            return Err(io::Error::from_raw_os_error(libc::EBADF));
        }
        if p.revents & libc::POLLERR != 0 {
            let _ = os::getsockopt::<libc::c_int>(&p.fd, libc::SOL_SOCKET, libc::SO_ERROR);
        }
    }
    Ok(())
}
