//! cargo-fuzz target: see `ctrack_fuzz::classifier_diff`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| ctrack_fuzz::classifier_diff(
    data,
    &mut ctrack_fuzz::Probe::counting()
));
