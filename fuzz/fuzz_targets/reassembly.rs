//! cargo-fuzz target: see `ctrack_fuzz::reassembly`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| ctrack_fuzz::reassembly(
    data,
    &mut ctrack_fuzz::Probe::counting()
));
