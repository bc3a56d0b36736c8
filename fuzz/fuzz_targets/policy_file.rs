//! cargo-fuzz target: see `ctrack_fuzz::policy_file`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| ctrack_fuzz::policy_file(
    data,
    &mut ctrack_fuzz::Probe::counting()
));
