//! Per-protocol trackers. Each has the same three parts: may this packet
//! create a connection, the state of a new connection, and how a packet
//! moves an existing one (with the timeout class to apply).

pub mod icmp;
pub mod other;
mod proto_state;
pub mod tcp;
mod update;

pub use icmp::IcmpState;
pub use other::OtherState;
pub use proto_state::ProtoState;
pub use tcp::{TcpConn, TcpState};
pub use update::Update;
