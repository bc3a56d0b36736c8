//! Address translation: choosing a connection's translated tuple (Linux's
//! address pick, a bounded port search), rewriting packets in place with
//! incremental checksums, sequence adjustment after a payload changed
//! length, and the stage that translates a tracked packet.

mod choose;
pub(crate) mod rewrite;
pub(crate) mod seqadj;
pub(crate) mod stage;

pub use choose::MAX_ATTEMPTS;
pub(crate) use choose::{NatError, Request, addr_of, choose, is_icmp};
