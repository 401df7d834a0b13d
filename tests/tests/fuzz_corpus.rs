//! The fuzz targets' properties (`kwb_tests::fuzz_props`) over every committed input
//! of `fuzz/corpus/<target>/` and over the seeds, under plain `cargo test`: CI replays
//! what the fuzzer found without cargo-fuzz or a nightly toolchain.

use std::panic::{AssertUnwindSafe, catch_unwind};

use kwb_tests::fuzz_props::{Property, TARGETS, seeds};
use kwb_tests::repo_root;

/// Runs `property` on `bytes`; a panic becomes `Err` naming the input.
fn check(target: &str, name: &str, property: Property, bytes: &[u8]) -> Result<(), String> {
    catch_unwind(AssertUnwindSafe(|| property(bytes))).map_err(|panic| {
        let why = panic
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
            .unwrap_or_default();
        format!("{target}/{name}: {why}")
    })
}

#[test]
fn every_committed_corpus_input_keeps_its_property() {
    let mut failures = Vec::new();
    for (target, property) in TARGETS {
        let dir = repo_root().join("fuzz/corpus").join(target);
        let mut inputs: Vec<_> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|entry| entry.unwrap().path())
            .collect();
        inputs.sort();
        assert!(!inputs.is_empty(), "fuzz/corpus/{target} is empty");
        for path in inputs {
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            let bytes = std::fs::read(&path).unwrap();
            failures.extend(check(target, &name, *property, &bytes).err());
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn every_seed_keeps_its_property() {
    let seeds = seeds();
    let mut failures = Vec::new();
    for (target, property) in TARGETS {
        let mine: Vec<_> = seeds.iter().filter(|(t, _, _)| t == target).collect();
        assert!(!mine.is_empty(), "no seed for {target}");
        for (_, name, bytes) in mine {
            failures.extend(check(target, name, *property, bytes).err());
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
