//! The control server: `ctrack ctl` talks to a running `ctrack run` over a
//! Unix socket (one JSON request per line, one JSON reply; `events` is a
//! stream), and the Prometheus metrics endpoint.
//!
//! (Being written: the server, the commands and the client.)

pub mod events;

use std::io;
use std::path::Path;
use std::sync::Arc;
use std::thread::JoinHandle;

use crate::live::Shared;

/// The default socket path.
pub const DEFAULT_SOCKET: &str = "/run/ctrack/ctrack.sock";

/// Starts the control server on `path` (created 0600, or 0660 owned by
/// `group`), answering until `shared.stop` is set.
pub fn serve(shared: Arc<Shared>, path: &Path, group: Option<&str>) -> io::Result<JoinHandle<()>> {
    let _ = (shared, path, group);
    Err(io::Error::new(
        io::ErrorKind::Unsupported,
        "the control server is not built yet",
    ))
}
