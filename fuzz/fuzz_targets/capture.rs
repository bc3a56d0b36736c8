//! cargo-fuzz target: see `ctrack_fuzz::capture`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| ctrack_fuzz::capture(
    data,
    &mut ctrack_fuzz::Probe::counting()
));
