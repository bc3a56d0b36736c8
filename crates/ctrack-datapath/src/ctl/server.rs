//! The control server: the Unix socket, its connections (a thread each,
//! at most [`MAX_CLIENTS`]), the request framing and its limits, and the
//! event stream.

use std::fs;
use std::io::{self, Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use ctrack_core::EventSink;
use nix::sys::socket::{AddressFamily, Backlog, SockFlag, SockType, UnixAddr};

use super::commands::{self, Outcome};
use super::ctx::Ctx;
use super::list;
use super::proto::{IDLE_TIMEOUT, MAX_ARGV, MAX_CLIENTS, MAX_REQUEST, Reply, Request};
use crate::events::{Next, Subscription};
use crate::live::Shared;

/// The longest socket path Linux takes (`sun_path` holds 108 bytes, the
/// last a NUL).
const MAX_PATH: usize = 107;

/// How often blocked loops look at `shared.stop`.
const POLL: Duration = Duration::from_millis(50);
/// How long a write to a client may block before it is given up.
const WRITE_TIMEOUT: Duration = Duration::from_secs(5);
/// The most bytes of event lines gathered into one write.
const EVENT_BATCH: usize = 64 * 1024;

fn err(kind: io::ErrorKind, msg: String) -> io::Error {
    io::Error::new(kind, msg)
}

/// Makes way for a socket at `path`: its directory created, a stale
/// socket file removed. A live socket, or a file that is not a socket, is
/// an error.
fn prepare(path: &Path) -> io::Result<()> {
    // Before any directory is made for it.
    let len = path.as_os_str().len();
    if len > MAX_PATH {
        return Err(err(
            io::ErrorKind::InvalidInput,
            format!(
                "the path is {len} bytes, and a Unix socket's holds at most {MAX_PATH}: choose a shorter one"
            ),
        ));
    }
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        fs::create_dir_all(dir)
            .map_err(|e| err(e.kind(), format!("{}: cannot create: {e}", dir.display())))?;
    }
    let meta = match fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(err(e.kind(), format!("{}: {e}", path.display()))),
    };
    if !meta.file_type().is_socket() {
        return Err(err(
            io::ErrorKind::AlreadyExists,
            format!("{} exists and is not a socket", path.display()),
        ));
    }
    if UnixStream::connect(path).is_ok() {
        return Err(err(
            io::ErrorKind::AddrInUse,
            format!("another ctrack is running on {}", path.display()),
        ));
    }
    fs::remove_file(path).map_err(|e| {
        err(
            e.kind(),
            format!("{}: cannot remove the stale socket: {e}", path.display()),
        )
    })
}

/// Binds the socket, sets its mode (and group) before it listens, so
/// nobody else can connect in between.
fn bind(path: &Path, group: Option<&str>) -> io::Result<UnixListener> {
    let gid = match group {
        None => None,
        Some(g) => match nix::unistd::Group::from_name(g) {
            Ok(Some(gr)) => Some(gr.gid.as_raw()),
            Ok(None) => {
                return Err(err(
                    io::ErrorKind::NotFound,
                    format!("--ctl-group: no group named {g:?}"),
                ));
            }
            Err(e) => return Err(err(io::ErrorKind::Other, format!("--ctl-group {g}: {e}"))),
        },
    };
    let ctx = |what: &str, e: nix::Error| {
        err(
            io::Error::from(e).kind(),
            format!("{}: {what}: {e}", path.display()),
        )
    };
    let fd = nix::sys::socket::socket(
        AddressFamily::Unix,
        SockType::Stream,
        SockFlag::SOCK_CLOEXEC,
        None,
    )
    .map_err(|e| ctx("socket", e))?;
    let addr = UnixAddr::new(path).map_err(|e| ctx("address", e))?;
    nix::sys::socket::bind(fd.as_raw_fd(), &addr).map_err(|e| ctx("bind", e))?;
    let mode = if gid.is_some() { 0o660 } else { 0o600 };
    fs::set_permissions(path, fs::Permissions::from_mode(mode))?;
    if let Some(gid) = gid {
        std::os::unix::fs::chown(path, None, Some(gid))?;
    }
    let backlog = Backlog::new(64).map_err(|e| ctx("listen", e))?;
    nix::sys::socket::listen(&fd, backlog).map_err(|e| ctx("listen", e))?;
    let l = UnixListener::from(fd);
    l.set_nonblocking(true)?;
    Ok(l)
}

/// Removes the socket file when the server ends, if it is still ours.
#[derive(Debug)]
struct SocketFile {
    path: PathBuf,
    id: (u64, u64),
}

impl Drop for SocketFile {
    fn drop(&mut self) {
        if let Ok(m) = fs::symlink_metadata(&self.path)
            && (m.dev(), m.ino()) == self.id
        {
            let _ = fs::remove_file(&self.path);
        }
    }
}

/// Starts the server (see [`super::serve`]).
pub(crate) fn serve(
    shared: Arc<Shared>,
    path: &Path,
    group: Option<&str>,
) -> io::Result<JoinHandle<()>> {
    prepare(path)?;
    let listener = bind(path, group)?;
    let m = fs::symlink_metadata(path)?;
    let file = SocketFile {
        path: path.to_path_buf(),
        id: (m.dev(), m.ino()),
    };
    let sink: Arc<dyn EventSink> = shared.events.clone();
    shared.fw.tracker().set_event_sink(Some(sink));
    let ctx = Arc::new(Ctx::new(shared));
    std::thread::Builder::new()
        .name("ctrack-ctl".into())
        .spawn(move || accept_loop(&ctx, &listener, file))
}

fn accept_loop(ctx: &Arc<Ctx>, listener: &UnixListener, file: SocketFile) {
    let mut conns: Vec<JoinHandle<()>> = Vec::new();
    while !ctx.shared.stopping() {
        conns.retain(|h| !h.is_finished());
        let stream = match listener.accept() {
            Ok((s, _)) => s,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            // Nothing waiting, or out of descriptors: wait a little.
            Err(_) => {
                std::thread::sleep(POLL);
                continue;
            }
        };
        if stream.set_nonblocking(false).is_err() {
            continue;
        }
        let _ = stream.set_write_timeout(Some(WRITE_TIMEOUT));
        if ctx.clients.fetch_add(1, Relaxed) >= MAX_CLIENTS {
            ctx.clients.fetch_sub(1, Relaxed);
            let msg = format!("too many control connections (at most {MAX_CLIENTS})");
            let _ = (&stream).write_all(Reply::error(msg).to_line().as_bytes());
            continue;
        }
        let c = ctx.clone();
        let spawned = std::thread::Builder::new()
            .name("ctrack-ctl-conn".into())
            .spawn(move || {
                connection(&c, stream);
                c.clients.fetch_sub(1, Relaxed);
            });
        match spawned {
            Ok(h) => conns.push(h),
            Err(_) => {
                ctx.clients.fetch_sub(1, Relaxed);
            }
        }
    }
    for h in conns {
        let _ = h.join();
    }
    drop(file);
}

/// Reads one request line into a string: Ok(None) at the end (the client
/// closed, or the server stops), Err(reply) when a limit is passed.
fn read_line(
    ctx: &Ctx,
    stream: &mut UnixStream,
    buf: &mut Vec<u8>,
) -> Result<Option<Vec<u8>>, Reply> {
    let idle_since = Instant::now();
    let mut chunk = [0u8; 8192];
    loop {
        if let Some(pos) = buf.iter().position(|&b| b == b'\n') {
            let mut line: Vec<u8> = buf.drain(..=pos).collect();
            line.pop();
            if line.len() > MAX_REQUEST {
                return Err(Reply::error(format!(
                    "request line over {MAX_REQUEST} bytes"
                )));
            }
            return Ok(Some(line));
        }
        if buf.len() > MAX_REQUEST {
            return Err(Reply::error(format!(
                "request line over {MAX_REQUEST} bytes"
            )));
        }
        if ctx.shared.stopping() {
            return Ok(None);
        }
        if idle_since.elapsed() > IDLE_TIMEOUT {
            return Err(Reply::error(format!(
                "idle for over {} s: closing",
                IDLE_TIMEOUT.as_secs()
            )));
        }
        match stream.read(&mut chunk) {
            // The client closed: a last line without its newline counts.
            Ok(0) if buf.is_empty() => return Ok(None),
            Ok(0) => return Ok(Some(std::mem::take(buf))),
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock
                        | io::ErrorKind::TimedOut
                        | io::ErrorKind::Interrupted
                ) => {}
            Err(_) => return Ok(None),
        }
    }
}

/// One request line: parsed, bounded and run. Err: a protocol error (the
/// reply said, the connection then closes).
pub(crate) fn request(ctx: &Ctx, line: &[u8]) -> Result<Outcome, Reply> {
    let req: Request = serde_json::from_slice(line).map_err(|e| {
        Reply::error(format!(
            "invalid request (expected {{\"argv\":[...]}}): {e}"
        ))
    })?;
    if req.argv.len() > MAX_ARGV {
        return Err(Reply::error(format!("argv over {MAX_ARGV} words")));
    }
    Ok(commands::run(ctx, &req.argv))
}

/// Serves one client: requests in turn until it closes, a protocol error,
/// or an event stream (which keeps the connection to its end).
fn connection(ctx: &Ctx, mut stream: UnixStream) {
    if stream.set_read_timeout(Some(POLL)).is_err() {
        return;
    }
    let mut buf = Vec::new();
    loop {
        let line = match read_line(ctx, &mut stream, &mut buf) {
            Ok(Some(l)) => l,
            Ok(None) => return,
            Err(reply) => {
                let _ = stream.write_all(reply.to_line().as_bytes());
                return;
            }
        };
        let outcome = match request(ctx, &line) {
            Ok(o) => o,
            Err(r) => {
                let _ = stream.write_all(r.to_line().as_bytes());
                return;
            }
        };
        match outcome {
            Outcome::Reply(r) => {
                if stream.write_all(r.to_line().as_bytes()).is_err() {
                    return;
                }
            }
            Outcome::Listing(l) => {
                if l.write(ctx, &mut stream).is_err() {
                    return;
                }
            }
            Outcome::Events(format) => {
                let sub = ctx.shared.events.subscribe();
                if stream
                    .write_all(Reply::text("").to_line().as_bytes())
                    .is_ok()
                {
                    events(ctx, &mut stream, sub, format);
                }
                return;
            }
        }
    }
}

/// The line for one stream item.
fn event_line(next: &Next, format: super::args::Format) -> Option<String> {
    let r = match next {
        Next::Idle => return None,
        Next::Dropped(n) => Reply {
            dropped: Some(*n),
            ..Reply::default()
        },
        Next::Event(ev) => {
            let v = match format {
                super::args::Format::Text => {
                    serde_json::Value::String(list::conntrack_line(&ev.entry, Some(ev.kind)))
                }
                super::args::Format::Json => serde_json::json!({
                    "type": ev.kind.name(),
                    "entry": ev.entry,
                }),
            };
            Reply {
                event: Some(v),
                ..Reply::default()
            }
        }
    };
    Some(r.to_line())
}

/// True while the client's end is open (a read that would block).
fn still_open(stream: &mut UnixStream) -> bool {
    let _ = stream.set_nonblocking(true);
    let mut b = [0u8; 512];
    let open = match stream.read(&mut b) {
        Ok(0) => false,
        // Anything it sends meanwhile is ignored.
        Ok(_) => true,
        Err(e) => e.kind() == io::ErrorKind::WouldBlock || e.kind() == io::ErrorKind::Interrupted,
    };
    let _ = stream.set_nonblocking(false);
    open
}

/// Streams events until the client goes, a write fails, or the server
/// stops. Whatever is queued is gathered into one write (up to
/// [`EVENT_BATCH`] bytes).
fn events(ctx: &Ctx, stream: &mut UnixStream, mut sub: Subscription, format: super::args::Format) {
    let mut out = String::new();
    let mut checked = Instant::now();
    while !ctx.shared.stopping() {
        let mut next = sub.next(POLL);
        let idle = next == Next::Idle;
        while let Some(line) = event_line(&next, format) {
            out.push_str(&line);
            if out.len() >= EVENT_BATCH {
                break;
            }
            next = sub.next(Duration::ZERO);
        }
        if !out.is_empty() {
            if stream.write_all(out.as_bytes()).is_err() {
                return;
            }
            out.clear();
        }
        if idle || checked.elapsed() >= POLL {
            if !still_open(stream) {
                return;
            }
            checked = Instant::now();
        }
    }
}
