//! cargo-fuzz target: see `ctrack_fuzz::ctl_request`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| ctrack_fuzz::ctl_request(
    data,
    &mut ctrack_fuzz::Probe::counting()
));
