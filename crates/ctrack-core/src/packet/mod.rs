//! From a parsed frame to what the tracker looks up: the general
//! extraction of a connection key (every check Open vSwitch makes, ICMP
//! errors and what they quote) and the fast path for plain IPv4 TCP/UDP.

pub mod extract;
pub mod fast;

pub use extract::{ExtractOptions, Extracted, L4Info, extract};
