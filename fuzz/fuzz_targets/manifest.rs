//! Fuzz target `manifest`: its property is `kwb_tests::fuzz_props::manifest`.

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| kwb_tests::fuzz_props::manifest(data));
