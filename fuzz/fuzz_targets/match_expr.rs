//! cargo-fuzz target: see `ctrack_fuzz::match_expr`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| ctrack_fuzz::match_expr(
    data,
    &mut ctrack_fuzz::Probe::counting()
));
