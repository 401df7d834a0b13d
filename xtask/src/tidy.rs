//! `cargo xtask tidy`: conventions that rustfmt and clippy do not check.
//!
//! Every non-test `.rs` file under `crates/`, `xtask/` and `tests/` starts with a
//! `//!` module doc. Files below a `tests/` folder inside those roots, and files
//! named `tests.rs`, are test code and exempt. The same check runs as a `#[test]`,
//! so `cargo test --workspace` enforces it.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use crate::{Failure, Result};

/// The folders of the workspace that hold Rust code.
const ROOTS: &[&str] = &["crates", "xtask", "tests"];

/// Prints every offender and fails when there is one.
pub fn run(root: &Path) -> Result {
    let offenders = missing_module_docs(root)
        .map_err(|e| Failure(format!("cannot read the source tree: {e}")))?;
    for path in &offenders {
        println!("{}: does not start with a `//!` module doc", path.display());
    }
    match offenders.len() {
        0 => Ok(()),
        n => Err(Failure(format!(
            "tidy: {n} file(s) without a `//!` module doc"
        ))),
    }
}

/// The non-test `.rs` files under `root` whose first line is not a `//!` comment,
/// relative to `root`, sorted.
pub fn missing_module_docs(root: &Path) -> io::Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for dir in ROOTS {
        let dir = root.join(dir);
        if dir.is_dir() {
            collect_sources(&dir, &mut files)?;
        }
    }
    let mut offenders = Vec::new();
    for file in files {
        let text = fs::read_to_string(&file)?;
        if !text.starts_with("//!") {
            offenders.push(file.strip_prefix(root).unwrap_or(&file).to_owned());
        }
    }
    offenders.sort();
    Ok(offenders)
}

/// Adds the non-test `.rs` files below `dir` to `files`, skipping `tests/` and
/// `target/` folders and hidden folders.
fn collect_sources(dir: &Path, files: &mut Vec<PathBuf>) -> io::Result<()> {
    let mut entries = fs::read_dir(dir)?.collect::<io::Result<Vec<_>>>()?;
    entries.sort_by_key(|entry| entry.file_name());
    for entry in entries {
        let path = entry.path();
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if entry.file_type()?.is_dir() {
            if !(name == "tests" || name == "target" || name.starts_with('.')) {
                collect_sources(&path, files)?;
            }
        } else if name.ends_with(".rs") && name != "tests.rs" {
            files.push(path);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_source_file_starts_with_a_module_doc() {
        let offenders = missing_module_docs(&crate::project_root()).unwrap();
        assert!(
            offenders.is_empty(),
            "these files do not start with a `//!` module doc: {offenders:?}"
        );
    }

    #[test]
    fn finds_offenders_and_skips_test_code() {
        let temp = tempfile::tempdir().unwrap();
        let root = temp.path();
        let files = [
            ("crates/a/src/lib.rs", "//! Documented.\n"),
            ("crates/a/src/bad.rs", "use std::fs;\n"),
            ("crates/a/src/late.rs", "\n//! Not on the first line.\n"),
            ("crates/a/src/inner/tests.rs", "use super::*;\n"),
            ("crates/a/tests/it.rs", "#[test]\nfn t() {}\n"),
            ("crates/a/target/debug/build.rs", "fn main() {}\n"),
            ("tests/src/lib.rs", "fn helper() {}\n"),
            ("tests/tests/e2e.rs", "#[test]\nfn t() {}\n"),
            ("xtask/src/main.rs", "//! Tasks.\n"),
            ("other/src/lib.rs", "fn outside() {}\n"),
        ];
        for (path, text) in files {
            let path = root.join(path);
            fs::create_dir_all(path.parent().unwrap()).unwrap();
            fs::write(path, text).unwrap();
        }
        let expected: Vec<PathBuf> = [
            "crates/a/src/bad.rs",
            "crates/a/src/late.rs",
            "tests/src/lib.rs",
        ]
        .into_iter()
        .map(PathBuf::from)
        .collect();
        assert_eq!(missing_module_docs(root).unwrap(), expected);
    }
}
