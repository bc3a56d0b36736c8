//! AF_XDP ports (being written).

use std::io;

use super::port::{Port, PortOptions};

pub(super) fn open(opts: &PortOptions) -> io::Result<Box<dyn Port>> {
    super::ifinfo::link(&opts.ifname)?;
    Err(io::Error::new(
        io::ErrorKind::Unsupported,
        format!("{}: af-xdp not built yet", opts.ifname),
    ))
}
