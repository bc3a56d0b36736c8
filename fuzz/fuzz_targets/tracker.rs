//! cargo-fuzz target: see `ctrack_fuzz::tracker`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| ctrack_fuzz::tracker(
    data,
    &mut ctrack_fuzz::Probe::counting()
));
