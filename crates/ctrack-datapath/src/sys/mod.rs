//! System calls: AF_PACKET and AF_XDP sockets, their rings, polling and
//! capabilities. The only module of this crate with unsafe code; every
//! block says why it is sound.
//!
//! (Being written: until then every port fails to open.)

use std::io;
use std::os::fd::RawFd;
use std::time::Duration;

use crate::io::{IoKind, Port, PortOptions};

pub(crate) fn open(opts: &PortOptions) -> io::Result<Box<dyn Port>> {
    Err(io::Error::new(
        io::ErrorKind::Unsupported,
        format!("{}: {} ports are not built yet", opts.ifname, opts.kind.name()),
    ))
}

pub(crate) fn wait(_fds: &[RawFd], timeout: Duration) -> io::Result<bool> {
    std::thread::sleep(timeout);
    Ok(false)
}

pub(crate) fn check_capabilities(_kind: IoKind) -> Result<(), String> {
    Ok(())
}

pub(crate) fn interface(ifname: &str) -> io::Result<([u8; 6], usize)> {
    Err(io::Error::new(
        io::ErrorKind::Unsupported,
        format!("{ifname}: interface lookup not built yet"),
    ))
}
