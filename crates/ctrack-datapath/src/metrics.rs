//! Prometheus text metrics over HTTP (being written).

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::thread::JoinHandle;

use crate::live::Shared;

/// Serves `GET /metrics` on `addr` until `shared.stop` is set.
pub fn serve(shared: Arc<Shared>, addr: SocketAddr) -> io::Result<JoinHandle<()>> {
    let _ = (shared, addr);
    Err(io::Error::new(
        io::ErrorKind::Unsupported,
        "metrics are not built yet",
    ))
}
