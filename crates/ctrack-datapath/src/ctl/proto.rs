//! The control protocol's messages and limits (see the module
//! documentation of [`crate::ctl`]).

use serde::{Deserialize, Serialize};

/// The longest request line, in bytes (newline excluded).
pub const MAX_REQUEST: usize = 64 * 1024;
/// The most words in one request's `argv`.
pub const MAX_ARGV: usize = 256;
/// The longest a connection may stay silent between requests.
pub const IDLE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);
/// The most client connections served at once (more are refused).
pub const MAX_CLIENTS: usize = 64;

/// One request: the command and its arguments, as typed after
/// `ctrack ctl`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Request {
    /// `["dump-conntrack", "zone=5", "-s"]`.
    pub argv: Vec<String>,
}

/// One reply line. A command's answer is `{"ok":true,"text":...}` (text,
/// or JSON text for `--format json`) or `{"ok":false,"error":...}`; a long
/// listing of connections comes as `{"ok":true,"text":...,"more":true}`
/// lines, its text cut in parts, until one without `more`; the
/// `events` stream is a sequence of `{"event":...}` lines (a string for
/// text, an object for JSON) and `{"dropped":N}` lines when events were
/// lost, until either side closes.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Reply {
    /// Whether the command succeeded (absent on stream lines).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ok: Option<bool>,
    /// The answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// More of the answer follows, in the next reply line: a long listing
    /// of connections comes as several lines, each with a part of its
    /// text, this set on all but the last.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub more: Option<bool>,
    /// Why the command failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// One event of a stream.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event: Option<serde_json::Value>,
    /// Events the stream lost (its queue was full) since the last report.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dropped: Option<u64>,
}

impl Reply {
    /// A success with `text`.
    pub fn text(text: impl Into<String>) -> Reply {
        Reply {
            ok: Some(true),
            text: Some(text.into()),
            ..Reply::default()
        }
    }

    /// A failure saying `error`.
    pub fn error(error: impl Into<String>) -> Reply {
        Reply {
            ok: Some(false),
            error: Some(error.into()),
            ..Reply::default()
        }
    }

    /// The reply as one line, newline included.
    pub fn to_line(&self) -> String {
        // Serialising strings, numbers and JSON values cannot fail.
        let mut s = serde_json::to_string(self)
            .unwrap_or_else(|_| r#"{"ok":false,"error":"internal: reply not encodable"}"#.into());
        s.push('\n');
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_compact_json() {
        assert_eq!(
            Reply::text("hi").to_line(),
            "{\"ok\":true,\"text\":\"hi\"}\n"
        );
        assert_eq!(
            Reply::error("no").to_line(),
            "{\"ok\":false,\"error\":\"no\"}\n"
        );
        let r: Request = serde_json::from_str(r#"{"argv":["count","zone=1"]}"#).unwrap();
        assert_eq!(r.argv, vec!["count", "zone=1"]);
        assert!(serde_json::from_str::<Request>(r#"{"argv":[1]}"#).is_err());
    }
}
