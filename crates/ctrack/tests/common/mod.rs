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
