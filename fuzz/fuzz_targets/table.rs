//! cargo-fuzz target: see `ctrack_fuzz::table`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| ctrack_fuzz::table(
    data,
    &mut ctrack_fuzz::Probe::counting()
));
