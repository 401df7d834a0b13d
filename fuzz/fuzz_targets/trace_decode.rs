//! Fuzz target `trace_decode`: its property is `kwb_tests::fuzz_props::trace_decode`.

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| kwb_tests::fuzz_props::trace_decode(data));
