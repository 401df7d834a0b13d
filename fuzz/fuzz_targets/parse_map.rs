//! Fuzz target `parse_map`: its property is `kwb_tests::fuzz_props::parse_map`.

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| kwb_tests::fuzz_props::parse_map(data));
