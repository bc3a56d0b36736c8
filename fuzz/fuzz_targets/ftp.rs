//! cargo-fuzz target: see `ctrack_fuzz::ftp`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| ctrack_fuzz::ftp(
    data,
    &mut ctrack_fuzz::Probe::counting()
));
