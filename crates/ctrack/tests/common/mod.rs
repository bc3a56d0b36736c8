//! What the command's end-to-end tests share: the repository root and
//! running the built `ctrack` binary from it.

#![allow(dead_code, unreachable_pub)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The repository's root (the bundled captures' paths are relative to it).
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Runs the built `ctrack` with `args`, from the repository's root.
pub fn ctrack(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ctrack"))
        .args(args)
        .current_dir(root())
        .output()
        .expect("run ctrack")
}

/// Whether this process's effective user is root (the tests with network
/// namespaces need it).
pub fn root_user() -> bool {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|l| l.split_whitespace().nth(1))
        == Some("0")
}

/// The first of `tools` that is not on the `PATH`, if one is missing.
pub fn missing_tool<'a>(tools: &[&'a str]) -> Option<&'a str> {
    tools.iter().copied().find(|tool| {
        !Command::new("sh")
            .args(["-c", &format!("command -v {tool}")])
            .stdout(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    })
}
