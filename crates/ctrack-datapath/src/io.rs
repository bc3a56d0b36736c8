//! Ports: where the live datapath's frames come from and go to.
//!
//! A [`Port`] is one worker's handle on one Linux interface: it receives a
//! share of the interface's frames (AF_PACKET fanout, or one AF_XDP queue)
//! and sends on it. Each worker opens its own handle on every interface,
//! so no two threads ever share a ring. The system calls behind it live in
//! `sys` (the only module of this crate with unsafe code).

use std::io;
use std::os::fd::RawFd;
use std::time::Duration;

pub use crate::sys::lock::PortClaim;
pub use crate::sys::port::{IoKind, LinkState, Pool, Port, PortOptions, PortStats, RxRing};

/// The largest frame an AF_PACKET port takes in (bytes): a port's MTU
/// plus a VLAN-tagged Ethernet header (18 bytes) must fit.
pub const MAX_FRAME: usize = crate::sys::MAX_FRAME;

/// Opens `opts.worker`'s handle on `opts.ifname`.
pub fn open(opts: &PortOptions) -> io::Result<Box<dyn Port>> {
    crate::sys::open(opts)
}

/// Claims interface `ifname`, whose index is `index`, for this process
/// until the claim is dropped: a second datapath on it, which would
/// forward every frame again, is refused, in words that name the process
/// holding it. The claim is an abstract Unix socket (of the network
/// namespace, as the index is), let go however the process ends.
pub fn claim(ifname: &str, index: u32) -> io::Result<PortClaim> {
    crate::sys::lock::claim(ifname, index)
}

/// Waits until one of `fds` is readable or `timeout` passes; returns true
/// if one is (EINTR counts as a wake-up).
pub fn wait(fds: &[RawFd], timeout: Duration) -> io::Result<bool> {
    crate::sys::wait(fds, timeout)
}

/// Checks that this process may open ports: root, or CAP_NET_RAW and
/// CAP_NET_ADMIN (`kind` AF_XDP also needs CAP_BPF or CAP_SYS_ADMIN).
/// The error says which capability is missing, in one line.
pub fn check_capabilities(kind: IoKind) -> Result<(), String> {
    crate::sys::check_capabilities(kind)
}

/// An interface's MAC address and MTU.
pub fn interface(ifname: &str) -> io::Result<([u8; 6], usize)> {
    crate::sys::interface(ifname)
}

/// The index of interface `ifname` (what a port's sockets are bound to).
pub fn interface_index(ifname: &str) -> io::Result<u32> {
    crate::sys::interface_index(ifname)
}

/// The state of interface `ifname` now, whose index was `index` when the
/// ports were opened: [`LinkState::Gone`] if there is none of that name
/// or it has another index (made again: the sockets stay bound to the
/// old one).
pub fn link_state(ifname: &str, index: u32) -> LinkState {
    crate::sys::link_state(ifname, index)
}
