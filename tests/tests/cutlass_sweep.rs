//! The whole-CUTLASS sweep: every header and example source of the `nvidia-cutlass`
//! package (`include/`, `tools/`, `examples/`), instrumented with every probe kind.
//! For every file: no panic; where probes were placed, stripping them gives the file
//! back byte for byte and the instrumented text parses with no more ERROR/MISSING
//! nodes than the original. The summary (outcomes per folder, and every file that
//! got probes with their count) is a snapshot, so a change in what kwb finds in
//! CUTLASS shows up in review.
//!
//! Runs where the CUTLASS source is set up (`KWB_CUTLASS_DIR`) and with
//! `KWB_RUN_SLOW_TESTS=1`, as `cargo xtask test` does.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use kwb_instrument::{Config, InstrumentError, Probes};

const EXTENSIONS: &[&str] = &["h", "hpp", "cuh", "cu", "inl", "cpp", "cc"];

/// What happened to one file.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Outcome {
    /// Probes placed, stripped back byte for byte, no new syntax errors.
    Probed(usize),
    /// No kernel-like function or site to probe.
    NothingToProbe,
    /// Another refusal, by kind (a clear error, not a failure of the sweep).
    Refused(String),
    NotUtf8,
    // Failures of the sweep:
    Panicked(String),
    StripDiffers,
    NewSyntaxErrors(usize, usize),
}

fn files(root: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack: Vec<PathBuf> = ["include", "tools", "examples"]
        .iter()
        .map(|d| root.join(d))
        .filter(|d| d.is_dir())
        .collect();
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in entries.flatten() {
            let path = e.path();
            if path.is_dir() {
                stack.push(path);
            } else if path
                .extension()
                .and_then(|x| x.to_str())
                .is_some_and(|x| EXTENSIONS.contains(&x))
            {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

fn sweep_one(path: &Path, config: &Config) -> Outcome {
    let Ok(bytes) = std::fs::read(path) else {
        return Outcome::Refused("unreadable".to_owned());
    };
    let Ok(source) = String::from_utf8(bytes) else {
        return Outcome::NotUtf8;
    };
    let result = std::panic::catch_unwind(|| kwb_instrument::instrument(&source, config));
    match result {
        Err(panic) => Outcome::Panicked(
            panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                .unwrap_or_default(),
        ),
        Ok(Err(InstrumentError::NothingToProbe { .. })) => Outcome::NothingToProbe,
        Ok(Err(e)) => Outcome::Refused(
            format!("{e:?}")
                .split([' ', '{', '('])
                .next()
                .unwrap_or("")
                .to_owned(),
        ),
        Ok(Ok((text, plan))) => {
            if kwb_instrument::strip(&text).ok().as_deref() != Some(source.as_str()) {
                return Outcome::StripDiffers;
            }
            let before = kwb_syntax::parse(&source).diagnostics.len();
            let after = kwb_syntax::parse(&text).diagnostics.len();
            if after > before {
                return Outcome::NewSyntaxErrors(before, after);
            }
            Outcome::Probed(plan.probes.len())
        }
    }
}

#[test]
fn every_cutlass_file_is_instrumented_and_stripped_back() {
    if std::env::var("KWB_RUN_SLOW_TESTS").as_deref() != Ok("1") {
        return;
    }
    let Some(root) = kwb_tests::cutlass_source() else {
        return;
    };
    let all = files(&root);
    assert!(
        all.len() > 1000,
        "{} files under {}",
        all.len(),
        root.display()
    );
    let config = Config {
        probes: Probes {
            loads: true,
            ..Probes::default()
        },
        ..Config::default()
    };
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
    let chunk = all.len().div_ceil(threads);
    let outcomes: Vec<(PathBuf, Outcome)> = std::thread::scope(|s| {
        let handles: Vec<_> = all
            .chunks(chunk)
            .map(|part| {
                let config = &config;
                s.spawn(move || {
                    part.iter()
                        .map(|p| (p.clone(), sweep_one(p, config)))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().expect("a sweep thread"))
            .collect()
    });
    // The summary: outcomes per top folder, then every probed file.
    let relative = |p: &Path| p.strip_prefix(&root).unwrap_or(p).display().to_string();
    let mut per_folder: BTreeMap<(String, String), usize> = BTreeMap::new();
    let mut probed = Vec::new();
    let mut failures = Vec::new();
    for (path, outcome) in &outcomes {
        let rel = relative(path);
        let folder = rel.split('/').next().unwrap_or("").to_owned();
        let kind = match outcome {
            Outcome::Probed(n) => {
                probed.push(format!("{rel}: {n}"));
                "probed".to_owned()
            }
            Outcome::NothingToProbe => "nothing to probe".to_owned(),
            Outcome::Refused(why) => format!("refused: {why}"),
            Outcome::NotUtf8 => "not UTF-8".to_owned(),
            failure => {
                failures.push(format!("{rel}: {failure:?}"));
                "FAILED".to_owned()
            }
        };
        *per_folder.entry((folder, kind)).or_default() += 1;
    }
    assert!(failures.is_empty(), "{failures:#?}");
    let mut summary = format!(
        "{} files (.{}) under include/, tools/ and examples/, every probe kind:\n",
        outcomes.len(),
        EXTENSIONS.join(", .")
    );
    for ((folder, kind), n) in &per_folder {
        let _ = writeln!(summary, "  {folder}: {kind}: {n}");
    }
    let _ = writeln!(
        summary,
        "no panic, strip(instrument(x)) == x and no new ERROR/MISSING node in every probed file\n\nprobed files (probes):"
    );
    for line in &probed {
        let _ = writeln!(summary, "  {line}");
    }
    insta::assert_snapshot!("cutlass_sweep", summary);
}
