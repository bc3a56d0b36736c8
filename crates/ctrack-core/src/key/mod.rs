//! Naming connections: zones, families, endpoints and keys, the addresses
//! and tuples a connection stores, directions, connection ids, and the
//! keyed hash that finds a connection from either direction.

mod addr;
mod conn_key;
mod dir;
mod hash;
mod id;
mod tuple;

pub use addr::{Addr, V6, ip_of};
pub use conn_key::{ConnKey, Endpoint, Family, Zone};
pub use dir::Dir;
pub use hash::KeyHasher;
pub use id::ConnId;
pub(crate) use id::instance;
pub use tuple::{LookupKey, Tuple};
