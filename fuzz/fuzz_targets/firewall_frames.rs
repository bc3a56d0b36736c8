//! cargo-fuzz target: see `ctrack_fuzz::firewall_frames_bytes`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| ctrack_fuzz::firewall_frames_bytes(
    data,
    &mut ctrack_fuzz::Probe::counting()
));
