//! What the core answers and counts: `ct_state`, why a packet is invalid,
//! the verdict of one packet, why a commit stored nothing, and the
//! counters.

mod answer;
mod reason;
mod state;
mod stats;

pub use answer::{Refusal, Verdict};
pub use reason::InvalidReason;
pub use state::CtState;
pub(crate) use stats::C;
pub use stats::Stats;
