//! Application-layer gateways: the FTP command reader, the gateway state a
//! control connection carries, the expectations table of announced data
//! connections, and the stage that runs a gateway on a tracked packet.

pub mod expect;
pub mod ftp;
pub(crate) mod helper;
pub(crate) mod stage;

pub use expect::ExpectationInfo;
