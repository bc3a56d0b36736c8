//! IP fragment reassembly in front of the tracker (see [`Reassembler`]):
//! what a fragment is, holding fragments until their datagram is whole,
//! and rebuilding the fragments from the (translated) datagram.

mod config;
mod datagram;
mod evict;
mod identify;
mod reassemble;

pub use config::{
    DEFAULT_MAX_BYTES, DEFAULT_MAX_FRAGS, DEFAULT_MIN_V4, DEFAULT_MIN_V6, DEFAULT_TIMEOUT_MS,
    FragConfig, FragError, FragStats, MAX_FRAGS_LIMIT, MIN_FRAG_LIMIT,
};
pub use datagram::Datagram;
pub use reassemble::{Offer, Reassembler};
#[cfg(test)]
mod tests_keys;
#[cfg(test)]
mod tests_overlap;
