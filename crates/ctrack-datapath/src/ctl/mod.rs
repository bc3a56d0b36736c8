//! The control server: `ctrack ctl` talks to a running `ctrack run` over a
//! Unix socket.
//!
//! # Protocol
//!
//! A client connects to the socket (`--ctl PATH`, [`DEFAULT_SOCKET`] by
//! default) and sends requests, one JSON object per line:
//!
//! ```text
//! {"argv": ["dump-conntrack", "zone=5", "-s"]}
//! ```
//!
//! Each request gets one reply line, `{"ok":true,"text":"..."}` or
//! `{"ok":false,"error":"..."}`; several requests may follow each other
//! on one connection. A listing of connections (`dump-conntrack`, `list`)
//! whose text passes 64 KiB comes as several lines,
//! `{"ok":true,"text":"...","more":true}`, then a last without `more`:
//! its text is theirs put together. So neither side ever holds a whole
//! listing's text: the server holds each connection's place in the order
//! (about 64 bytes) while the client reads, and at most four listings are
//! under way at once (a fifth is refused with an error reply). `events` turns the connection into a stream: an
//! `{"ok":true,"text":""}` line once subscribed, then `{"event":...}`
//! lines (a `conntrack -E` line as a string, or with `--format json` an
//! object `{"type":"NEW","entry":{...}}`) and `{"dropped":N}` lines when
//! the subscriber's queue overflowed, until the client closes or the
//! daemon stops.
//!
//! Limits ([`proto`]): a request line over 64 KiB, an `argv` over 256
//! words, invalid JSON, or 30 s without a request get an error reply and
//! the connection is closed; at most 64 clients are served at once (more
//! are refused with an error reply). A command's mistakes (unknown
//! command, bad arguments) get an error reply and the connection stays.
//!
//! The commands follow `ovs-appctl dpctl/*-conntrack*` and conntrack-tools
//! (`help` lists them): `dump-conntrack`, `list`, `flush`, `count`,
//! `stats`, `set-maxconns`/`get-maxconns`, `ct-set-limits`/
//! `ct-get-limits`/`ct-del-limits`, `ct-set-timeout`/`ct-get-timeout`/
//! `ct-del-timeout`, `policy reload|show|counters`, `events`, `ports`,
//! `version`, `help`.
//!
//! # Socket
//!
//! Created with mode 0600 (0660 and owned by the group when one is given)
//! before it listens, its directory created if missing. A stale socket
//! (nobody answers) is replaced; a live one is an error. The file is
//! removed when the server stops.

mod args;
pub mod client;
mod commands;
mod ctx;
mod list;
mod listing;
pub mod proto;
mod report;
mod server;

use std::io;
use std::path::Path;
use std::sync::Arc;
use std::thread::JoinHandle;

pub use crate::events::{Event, EventHub, Next, Subscription};
use crate::live::Shared;

/// The default socket path.
pub const DEFAULT_SOCKET: &str = "/run/ctrack/ctrack.sock";

/// The control server's request handling without its socket: what a
/// client's request lines get, in the order they come (for embedding, and
/// for fuzzing the requests).
#[derive(Debug)]
pub struct Session {
    ctx: ctx::Ctx,
}

impl Session {
    /// A session on `shared`, as one server's (its own record of the zones
    /// `ct-set-limits` and `ct-set-timeout` named).
    pub fn new(shared: Arc<Shared>) -> Session {
        Session {
            ctx: ctx::Ctx::new(shared),
        }
    }

    /// The reply lines (each with its newline) to one request line
    /// (without its newline; over 64 KiB is refused as the server refuses
    /// it): one, or a long listing's several. An `events` request gets the
    /// line that opens a stream, and no stream.
    pub fn answer(&self, line: &[u8]) -> String {
        if line.len() > proto::MAX_REQUEST {
            let r = proto::Reply::error(format!("request line over {} bytes", proto::MAX_REQUEST));
            return r.to_line();
        }
        match server::request(&self.ctx, line) {
            Ok(commands::Outcome::Reply(r)) | Err(r) => r.to_line(),
            Ok(commands::Outcome::Events(_)) => proto::Reply::text("").to_line(),
            Ok(commands::Outcome::Listing(l)) => {
                let mut out = Vec::new();
                // Writing to a vector cannot fail.
                let _ = l.write(&self.ctx, &mut out);
                String::from_utf8_lossy(&out).into_owned()
            }
        }
    }
}

/// Starts the control server on `path` (created 0600, or 0660 owned by
/// `group`), answering until `shared.stop` is set (noticed within about
/// 50 ms; the handle's thread then ends its clients' connections and
/// removes the socket file). It also makes `shared.events` the tracker's
/// event sink.
///
/// Fails if another server answers on `path`, if `path` is something
/// other than a socket, or if `group` does not exist.
pub fn serve(shared: Arc<Shared>, path: &Path, group: Option<&str>) -> io::Result<JoinHandle<()>> {
    server::serve(shared, path, group)
}
