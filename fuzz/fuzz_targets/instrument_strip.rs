//! Fuzz target `instrument_strip`: its property is `kwb_tests::fuzz_props::instrument_strip`.

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| kwb_tests::fuzz_props::instrument_strip(data));
