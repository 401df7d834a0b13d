//! Fuzz target `npy_dump`: its property is `kwb_tests::fuzz_props::npy_dump`.

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| kwb_tests::fuzz_props::npy_dump(data));
