//! `cargo xtask tidy`: conventions that rustfmt and clippy do not check.
//!
//! Every non-test `.rs` file under `crates/`, `xtask/` and `tests/` starts with a
//! `//!` module doc. Files below a `tests/` folder inside those roots, and files
//! named `tests.rs`, are test code and exempt. The same check runs as a `#[test]`,
//! so `cargo test --workspace` enforces it.
//!
//! The CLI's command modules (`crates/cli/src/commands/*.rs`) import no other
//! command module: what two commands share (arguments, the reproducer folder,
//! rendering) lives beside them in `crates/cli/src`, and the pipeline below the CLI
//! in kwb-pipeline.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use crate::{Failure, Result};

/// The folders of the workspace that hold Rust code.
const ROOTS: &[&str] = &["crates", "xtask", "tests"];

/// Prints every offender and fails when there is one.
pub fn run(root: &Path) -> Result {
    let unreadable = |e: io::Error| Failure(format!("cannot read the source tree: {e}"));
    let offenders = missing_module_docs(root).map_err(unreadable)?;
    for path in &offenders {
        println!("{}: does not start with a `//!` module doc", path.display());
    }
    let crossings = command_crossings(&root.join(COMMANDS)).map_err(unreadable)?;
    for (path, line, text) in &crossings {
        println!(
            "{}:{line}: a command module imports another: `{text}`",
            path.display()
        );
    }
    match (offenders.len(), crossings.len()) {
        (0, 0) => Ok(()),
        (docs, crossings) => Err(Failure(format!(
            "tidy: {docs} file(s) without a `//!` module doc, {crossings} import(s) of one command module by another"
        ))),
    }
}

/// The CLI's command modules, one per subcommand.
const COMMANDS: &str = "crates/cli/src/commands";

/// Every line of a command module under `dir` (not `mod.rs`) that names another
/// command module: `crate::commands::…` or `super::NAME::…` / `use super::NAME` where
/// NAME is a sibling file. (file, line from 1, the line trimmed).
pub fn command_crossings(dir: &Path) -> io::Result<Vec<(PathBuf, usize, String)>> {
    if !dir.is_dir() {
        return Ok(Vec::new());
    }
    let mut files = Vec::new();
    collect_sources(dir, &mut files)?;
    let siblings: Vec<String> = files
        .iter()
        .filter_map(|f| Some(f.file_stem()?.to_string_lossy().into_owned()))
        .filter(|s| s != "mod")
        .collect();
    let mut out = Vec::new();
    for file in &files {
        if file.file_name().is_some_and(|n| n == "mod.rs") {
            continue;
        }
        let text = fs::read_to_string(file)?;
        for (i, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            let crosses = code.contains("crate::commands::")
                || siblings.iter().any(|s| {
                    code.contains(&format!("super::{s}::"))
                        || code.contains(&format!("super::{s};"))
                        || code.contains(&format!("super::{{{s}"))
                });
            if crosses {
                out.push((file.clone(), i + 1, line.trim().to_owned()));
            }
        }
    }
    Ok(out)
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
    fn no_command_module_imports_another() {
        let crossings = command_crossings(&crate::project_root().join(COMMANDS)).unwrap();
        assert!(crossings.is_empty(), "{crossings:?}");
    }

    #[test]
    fn a_command_importing_a_sibling_is_found() {
        let temp = tempfile::tempdir().unwrap();
        let dir = temp.path();
        for (name, text) in [
            ("mod.rs", "pub mod a;\npub mod b;\n"),
            ("a.rs", "use crate::commands::b::Args;\nuse super::b;\n"),
            (
                "b.rs",
                "use crate::render; // crate::commands::a in a comment\n#[cfg(test)]\nmod tests {\n    use super::*;\n    use super::helper;\n}\nfn f() { super::a::g(); }\n",
            ),
        ] {
            fs::write(dir.join(name), text).unwrap();
        }
        let lines: Vec<(String, usize)> = command_crossings(dir)
            .unwrap()
            .into_iter()
            .map(|(f, l, _)| (f.file_name().unwrap().to_string_lossy().into_owned(), l))
            .collect();
        assert_eq!(
            lines,
            [
                ("a.rs".to_owned(), 1),
                ("a.rs".to_owned(), 2),
                ("b.rs".to_owned(), 7)
            ]
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
