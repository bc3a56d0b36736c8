//! The live datapath: ports bound to policy ports, worker threads that
//! run bursts through the firewall and switch frames between ports, and
//! the state the control server reads and changes while they run.

pub mod cost;
pub mod shared;
pub mod switch;
pub mod worker;

pub use cost::{CostStats, Part};
pub use shared::{PortInfo, Shared, SwitchDrop, SwitchStats, WorkerStats};
