//! The `ctrack` command's building blocks: capture reading, packet
//! summaries, and the subcommands. `main.rs` only parses arguments and
//! reports errors.

pub mod bench;
pub mod capture;
pub mod describe;
pub mod replay;
