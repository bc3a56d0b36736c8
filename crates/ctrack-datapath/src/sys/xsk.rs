//! XDP socket rings (being written).
