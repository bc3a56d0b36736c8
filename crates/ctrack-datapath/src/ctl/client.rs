//! The client side of the control protocol (what `ctrack ctl` and the
//! tests use).

use std::fmt;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::proto::{Reply, Request};

/// The longest reply line read (a listing of connections comes in lines
/// of about 64 KiB; `policy show` of a policy of a million ACLs is one
/// line of tens of megabytes).
const MAX_REPLY: u64 = 1 << 30;
/// How long a command's reply may take.
const REPLY_TIMEOUT: Duration = Duration::from_secs(120);

/// Why a request failed.
#[derive(Debug)]
pub enum ClientError {
    /// The socket could not be reached.
    Connect {
        /// The socket.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// Reading or writing the connection failed.
    Io(io::Error),
    /// The server's answer was not a reply of this protocol.
    Protocol(String),
    /// The server answered with an error.
    Failed(String),
}

impl fmt::Display for ClientError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ClientError::Connect { path, source } => {
                let why = match source.kind() {
                    io::ErrorKind::NotFound => "no such file (is `ctrack run` running?)".into(),
                    io::ErrorKind::ConnectionRefused => {
                        "connection refused (is `ctrack run` running?)".into()
                    }
                    io::ErrorKind::PermissionDenied => {
                        "permission denied (run as root, or as a member of --ctl-group)".into()
                    }
                    _ => source.to_string(),
                };
                write!(f, "cannot reach ctrack at {}: {why}", path.display())
            }
            ClientError::Io(e) => write!(f, "control connection: {e}"),
            ClientError::Protocol(m) => write!(f, "control connection: {m}"),
            ClientError::Failed(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for ClientError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ClientError::Connect { source, .. } | ClientError::Io(source) => Some(source),
            _ => None,
        }
    }
}

impl From<io::Error> for ClientError {
    fn from(e: io::Error) -> Self {
        ClientError::Io(e)
    }
}

/// One item of an event stream.
#[derive(Debug, Clone, PartialEq)]
pub enum StreamItem {
    /// An event: a `conntrack -E` line (a JSON string), or an object
    /// `{"type":..., "entry":...}` for `--format json`.
    Event(serde_json::Value),
    /// This many events were lost since the last report.
    Dropped(u64),
}

/// A connection to the control server (several requests may follow one
/// another on it).
#[derive(Debug)]
pub struct Client {
    reader: BufReader<UnixStream>,
    writer: UnixStream,
    stream_timeout: Option<Duration>,
}

impl Client {
    /// Connects to the server at `path`.
    pub fn connect(path: &Path) -> Result<Client, ClientError> {
        let s = UnixStream::connect(path).map_err(|source| ClientError::Connect {
            path: path.to_path_buf(),
            source,
        })?;
        s.set_read_timeout(Some(REPLY_TIMEOUT))?;
        let writer = s.try_clone()?;
        Ok(Client {
            reader: BufReader::new(s),
            writer,
            stream_timeout: None,
        })
    }

    /// Makes [`Client::stream`] fail after `t` without a line (it waits
    /// forever by default).
    pub fn set_stream_timeout(&mut self, t: Option<Duration>) {
        self.stream_timeout = t;
    }

    fn send<S: AsRef<str>>(&mut self, argv: &[S]) -> Result<(), ClientError> {
        let req = Request {
            argv: argv.iter().map(|a| a.as_ref().to_owned()).collect(),
        };
        let mut line = serde_json::to_string(&req)
            .map_err(|e| ClientError::Protocol(format!("cannot encode the request: {e}")))?;
        line.push('\n');
        self.writer.write_all(line.as_bytes())?;
        Ok(())
    }

    /// The next reply line; None at the end of the connection.
    fn next(&mut self) -> Result<Option<Reply>, ClientError> {
        let mut line = Vec::new();
        let n = (&mut self.reader)
            .take(MAX_REPLY)
            .read_until(b'\n', &mut line)?;
        if n == 0 {
            return Ok(None);
        }
        if line.last() != Some(&b'\n') && n as u64 >= MAX_REPLY {
            return Err(ClientError::Protocol("reply line too long".into()));
        }
        serde_json::from_slice(&line)
            .map(Some)
            .map_err(|e| ClientError::Protocol(format!("bad reply: {e}")))
    }

    /// Sends `argv` and returns the reply's text (an error reply is
    /// [`ClientError::Failed`]); a reply in several lines (`"more":true`)
    /// is put together.
    pub fn request<S: AsRef<str>>(&mut self, argv: &[S]) -> Result<String, ClientError> {
        let mut text = String::new();
        self.request_each(argv, |part| {
            text.push_str(part);
            Ok(())
        })?;
        Ok(text)
    }

    /// Sends `argv` and hands the reply's text to `each` part by part, as
    /// its lines come (a long listing of connections comes in several), so
    /// that a caller printing it never holds it whole. An error reply is
    /// [`ClientError::Failed`]; an error of `each` ends the reading.
    pub fn request_each<S: AsRef<str>>(
        &mut self,
        argv: &[S],
        mut each: impl FnMut(&str) -> io::Result<()>,
    ) -> Result<(), ClientError> {
        self.send(argv)?;
        loop {
            let Some(r) = self.next()? else {
                return Err(ClientError::Protocol(
                    "the server closed the connection before its reply's end".into(),
                ));
            };
            let more = r.more == Some(true);
            each(&answer(r)?)?;
            if !more {
                return Ok(());
            }
        }
    }

    /// Sends `argv` (an `events` command) and calls `each` for every item
    /// of the stream until the server ends it (Ok) or `each` returns
    /// false.
    pub fn stream<S: AsRef<str>>(
        mut self,
        argv: &[S],
        mut each: impl FnMut(StreamItem) -> bool,
    ) -> Result<(), ClientError> {
        self.send(argv)?;
        // The first line acknowledges the subscription (or refuses it).
        match self.next()? {
            None => return Ok(()),
            Some(r) => {
                answer(r)?;
            }
        }
        self.reader
            .get_ref()
            .set_read_timeout(self.stream_timeout)?;
        while let Some(r) = self.next()? {
            let item = match (r.event, r.dropped, r.error) {
                (Some(ev), _, _) => StreamItem::Event(ev),
                (None, Some(n), _) => StreamItem::Dropped(n),
                (None, None, Some(e)) => return Err(ClientError::Failed(e)),
                (None, None, None) => continue,
            };
            if !each(item) {
                break;
            }
        }
        Ok(())
    }
}

fn answer(r: Reply) -> Result<String, ClientError> {
    match (r.ok, r.text, r.error) {
        (Some(true), text, _) => Ok(text.unwrap_or_default()),
        (_, _, Some(e)) => Err(ClientError::Failed(e)),
        _ => Err(ClientError::Protocol("reply without ok or error".into())),
    }
}

/// Connects to `path`, sends `argv`, returns the reply's text.
pub fn request<S: AsRef<str>>(path: &Path, argv: &[S]) -> Result<String, ClientError> {
    Client::connect(path)?.request(argv)
}
