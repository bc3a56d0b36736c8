//! bpf(2) (being written).
