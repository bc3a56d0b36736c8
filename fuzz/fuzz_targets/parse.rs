//! cargo-fuzz target: see `ctrack_fuzz::parse`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| ctrack_fuzz::parse(
    data,
    &mut ctrack_fuzz::Probe::counting()
));
