//! Reading the policy file: TOML, or JSON of the same shape, into a
//! [`Policy`] with every match resolved.
//!
//! The file's shape, what is checked, and each deliberate difference from
//! OVN are in `docs/policy.md` ("The policy file"). Any error refuses the
//! whole file (nothing is half loaded) and says where: file, 1-based line
//! and column, and what was expected; an error inside a match points at
//! the offending token inside the file.
//!
//! ```
//! use ctrack_policy::model::Policy;
//!
//! let p = Policy::from_str(
//!     r#"
//! [[port]]
//! name = "vm1"
//! addresses = ["02:00:00:00:00:01 10.0.0.1"]
//!
//! [[acl]]
//! direction = "to-lport"
//! priority = 1000
//! match = 'outport == "vm1" && tcp.dst == 22'
//! action = "allow-related"
//! "#,
//!     "example.toml",
//! )
//! .unwrap();
//! assert_eq!(p.acls[0].name, "acl#0");
//!
//! let e = Policy::from_str("[[acl]]\nbogus = 1\n", "bad.toml").unwrap_err();
//! assert_eq!((e.span.line, e.span.col), (2, 1));
//! ```

use std::path::Path;

use crate::model::{Policy, PolicyError, Span};

mod build;
mod pos;
mod raw;

/// The most ACLs a policy may have.
pub const MAX_ACLS: usize = 1_000_000;

/// The most ports a policy may have (port `i` is
/// [`PortNo`](crate::key::PortNo) `i + 1`, and 0 means none).
pub const MAX_PORTS: usize = 65_534;

/// The most expression nodes all the ACLs' matches together may resolve
/// to; each match is also bounded by [`crate::lang::MAX_NODES`].
pub const MAX_POLICY_NODES: usize = 10_000_000;

/// The largest policy file [`Policy::load`] reads, in bytes.
pub const MAX_FILE_LEN: u64 = 1 << 30;

/// The longest ACL name accepted (OVN's schema limit).
pub const MAX_ACL_NAME: usize = 63;

impl Policy {
    /// Reads a policy from `text`: JSON if its first character that is
    /// not white space is `{`, TOML otherwise. `file_name` is used in
    /// errors only.
    pub fn from_str(text: &str, file_name: &str) -> Result<Policy, PolicyError> {
        let json = text.trim_start().starts_with('{');
        if json {
            serde_json::from_str::<raw::RawPolicy<raw::Json>>(text)
                .map_err(|e| json_error(&e, text, file_name))
                .and_then(|raw| build::build(raw, text, file_name))
        } else {
            toml::from_str::<raw::RawPolicy<raw::Toml>>(text)
                .map_err(|e| toml_error(&e, text, file_name))
                .and_then(|raw| build::build(raw, text, file_name))
        }
    }

    /// Reads the policy file at `path`. A file that cannot be read is an
    /// error naming it, at line and column 0.
    pub fn load(path: &Path) -> Result<Policy, PolicyError> {
        let name = path.display().to_string();
        let io = |message: String| PolicyError {
            file: name.clone(),
            span: Span::default(),
            message,
        };
        use std::io::Read;
        let meta =
            std::fs::metadata(path).map_err(|e| io(format!("cannot read the policy file: {e}")))?;
        // Not a regular file (a device, a FIFO, a directory): its length
        // says nothing, and reading it may never end (`/dev/zero`) or
        // never begin (a FIFO nobody writes).
        if !meta.is_file() {
            return Err(io("the policy file is not a regular file".into()));
        }
        let len = meta.len();
        if len > MAX_FILE_LEN {
            return Err(io(format!(
                "the policy file is {len} bytes (at most {MAX_FILE_LEN})"
            )));
        }
        // Bounded even if the file grows between the check and the read.
        let mut text = String::new();
        std::fs::File::open(path)
            .and_then(|f| f.take(MAX_FILE_LEN + 1).read_to_string(&mut text))
            .map_err(|e| io(format!("cannot read the policy file: {e}")))?;
        if text.len() as u64 > MAX_FILE_LEN {
            return Err(io(format!("the policy file is over {MAX_FILE_LEN} bytes")));
        }
        Policy::from_str(&text, &name)
    }
}

fn toml_error(e: &toml::de::Error, text: &str, file: &str) -> PolicyError {
    let span = e
        .span()
        .map_or(Span { line: 1, col: 1 }, |s| pos::line_col(text, s.start));
    PolicyError {
        file: file.to_string(),
        span,
        message: e.message().trim_end().to_string(),
    }
}

fn json_error(e: &serde_json::Error, text: &str, file: &str) -> PolicyError {
    let m = e.to_string();
    let m = raw::strip_position(&m);
    let (span, message) = match raw::json_place(m, text) {
        Some((at, inner)) => (pos::line_col(text, at), inner),
        None => (
            Span {
                line: u32::try_from(e.line().max(1)).unwrap_or(u32::MAX),
                col: u32::try_from(e.column().max(1)).unwrap_or(u32::MAX),
            },
            m,
        ),
    };
    PolicyError {
        file: file.to_string(),
        span,
        message: message.to_string(),
    }
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_ports;
