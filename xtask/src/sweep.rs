//! `cargo xtask sweep`: Track A over the whole of flashinfer-python (the corpus
//! `cargo xtask setup` installs), in process, no nvcc: every `.cu`/`.cuh` under its
//! package folder that names an MMA (`mma.sync`, `wgmma`, `tcgen05.mma`, `wmma`,
//! `cute::gemm`, an `fma`) is instrumented with the default probes, and the outcome of
//! each is counted: probed (and stripped back byte for byte), nothing to probe, refused
//! (by reason), or a panic, which fails the task. The figures, with the probes by kind,
//! go to stdout and `--out` as Markdown, for docs/results/track-a-unseen.md; the
//! compile check of a sample is the slow test tests/tests/unseen.rs.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;
use std::time::Instant;

use kwb_instrument::{Config, InstrumentError};

use crate::{Failure, Result};

/// What names an MMA in a source: the files the sweep instruments.
const MARKERS: [&str; 6] = [
    "mma.sync",
    "wgmma",
    "tcgen05.mma",
    "wmma",
    "cute::gemm",
    "fma",
];

/// One file's outcome.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Outcome {
    Probed,
    NothingToProbe,
    Refused(String),
    NotUtf8,
    StripDiffers,
    Panicked(String),
}

pub fn run(out: &Path) -> Result {
    let env = kwb_toolchain::Env::from_process();
    let corpus = kwb_toolchain::cache::corpus(&env).ok_or_else(|| {
        Failure("the corpus is not installed: run `cargo xtask setup` first".to_owned())
    })?;
    let mut files = Vec::new();
    crate::bench::files_with(&corpus.flashinfer, &["cu", "cuh"], &mut files);
    files.sort();
    let start = Instant::now();
    let mut outcomes: BTreeMap<Outcome, usize> = BTreeMap::new();
    let mut kinds: BTreeMap<String, usize> = BTreeMap::new();
    let (mut swept, mut probes) = (0usize, 0usize);
    let mut panics = Vec::new();
    for path in &files {
        let Ok(bytes) = std::fs::read(path) else {
            continue;
        };
        let Ok(text) = String::from_utf8(bytes) else {
            *outcomes.entry(Outcome::NotUtf8).or_default() += 1;
            continue;
        };
        if !MARKERS.iter().any(|m| text.contains(m)) {
            continue;
        }
        swept += 1;
        let config = Config {
            file_name: path.display().to_string(),
            ..Config::default()
        };
        let result = std::panic::catch_unwind(|| kwb_instrument::instrument(&text, &config));
        let outcome = match result {
            Ok(Ok((copy, plan))) => {
                probes += plan.probes.len();
                for p in &plan.probes {
                    *kinds.entry(kind_of(&p.what)).or_default() += 1;
                }
                match kwb_instrument::strip(&copy) {
                    Ok(back) if back == text => Outcome::Probed,
                    _ => Outcome::StripDiffers,
                }
            }
            Ok(Err(InstrumentError::NothingToProbe { .. })) => Outcome::NothingToProbe,
            Ok(Err(e)) => Outcome::Refused(first_words(&e.to_string())),
            Err(_) => {
                panics.push(path.display().to_string());
                Outcome::Panicked(path.display().to_string())
            }
        };
        *outcomes.entry(outcome).or_default() += 1;
    }
    let seconds = start.elapsed().as_secs_f64();
    let mut report = String::new();
    let _ = writeln!(
        report,
        "Track A over flashinfer-python ({}): {} files, {swept} of them name an MMA, swept in {seconds:.1} s\n",
        corpus.flashinfer.display(),
        files.len()
    );
    let _ = writeln!(report, "| outcome | files |\n|---|---:|");
    for (outcome, n) in &outcomes {
        let label = match outcome {
            Outcome::Probed => "probed (stripped back byte for byte)".to_owned(),
            Outcome::NothingToProbe => "nothing to probe (no kernel the map finds)".to_owned(),
            Outcome::Refused(why) => format!("refused: {why}"),
            Outcome::NotUtf8 => "not UTF-8".to_owned(),
            Outcome::StripDiffers => "FAILED: strip does not give the file back".to_owned(),
            Outcome::Panicked(file) => format!("FAILED: panic on {file}"),
        };
        let _ = writeln!(report, "| {label} | {n} |");
    }
    let _ = writeln!(
        report,
        "\n{probes} probes, by what they read:\n\n| probe | count |\n|---|---:|"
    );
    for (kind, n) in &kinds {
        let _ = writeln!(report, "| {kind} | {n} |");
    }
    print!("{report}");
    std::fs::write(out, &report).map_err(|e| Failure(format!("{}: {e}", out.display())))?;
    let broken = outcomes
        .keys()
        .filter(|o| matches!(o, Outcome::StripDiffers | Outcome::Panicked(_)))
        .count();
    if broken == 0 {
        Ok(())
    } else {
        Err(Failure(format!("{broken} kinds of failure: {panics:?}")))
    }
}

/// A probe's kind, from the start of its description (`operand A …`, `accumulator …`).
fn kind_of(what: &str) -> String {
    let words: Vec<&str> = what.split_whitespace().take(2).collect();
    match words.as_slice() {
        ["operand", letter, ..] => format!("operand {}", letter.trim_end_matches(':')),
        ["accumulator", ..] => {
            if what.contains("after each K tile") {
                "accumulator after each K tile".to_owned()
            } else {
                "accumulator where complete".to_owned()
            }
        }
        ["epilogue", ..] | ["the", ..] => "epilogue".to_owned(),
        [first, ..] => (*first).to_owned(),
        [] => "?".to_owned(),
    }
}

/// The first line of an error, without its code.
fn first_words(text: &str) -> String {
    text.lines().next().unwrap_or("").chars().take(80).collect()
}
