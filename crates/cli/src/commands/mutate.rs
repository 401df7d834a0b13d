//! `kwb mutate FILE [--kernel K] [--stage S,…] [--operator O,…] [--list] [--json] [-o DIR] [--compile]`:
//! stage-labelled defects planted in a kernel (kwb-mutate), each written as a copy of
//! FILE with one edit, `DIR/NNN-STAGE-OPERATOR/NAME` (FILE's own name, so a build can
//! point at the folder), and `DIR/mutants.json`: `{"source", "mutants": [{"id",
//! "stage", "operator", "function", "line", "file", "diff"}], "dropped": [{"id",
//! "stage", "operator", "line", "why"}]}`. With `--compile` each mutant's device code
//! is compiled (`nvcc -cubin`, FILE's folder and `-I` on the include path) and one
//! that does not compile is reported and dropped.
//!
//! A header's mutants are compiled through the unit that includes it: with
//! `--include-root ROOT` each mutant is written at its path relative to ROOT inside
//! its folder (`DIR/NNN-…/cutlass/gemm/…/x.hpp`), so that folder put first on the
//! include path (the manifest's `overlay`) replaces the header, and `--unit FILE.cu`
//! is what `--compile` compiles. A mutant whose SASS is the original's is dropped as
//! equivalent (see `mutant_build`).
//!
//! `--test CMD` runs the user's own test once on the original and once per kept
//! mutant, in a copy of `--tree` (default: FILE's folder, or ROOT) with the mutant in
//! place (see `mutant_test`), and lists the survivors per stage; the manifest gains
//! each mutant's `test` outcome.
//!
//! FILE is only read; nothing is written outside DIR (and the test's temporary copy),
//! and DIR is refused when it holds files of something else (a folder kwb mutate
//! wrote, with its mutants.json, is replaced). Exit 0, 2 for bad input (a stage with
//! no site, an unusable DIR, a test that fails on the original), 3 when FILE has no
//! such kernel, 5 when `--test` leaves survivors.

use std::io::Write;
use std::path::{Path, PathBuf};

use std::time::Duration;

use kwb_mutate::{Config, Mutant, MutateError, Stage};
use miette::Report;
use serde::Serialize;

use crate::mutant_build::{Build, Candidate, OriginalFails};
use crate::mutant_test::{Outcome, Sandbox, log_tail};

use crate::error::CliError;
use crate::input::{DEFAULT_MAX_BYTES, read_source};
use crate::{exit, render};

#[derive(clap::Args)]
#[command(group(clap::ArgGroup::new("out").required(true).multiple(true).args(["output", "list", "json"])))]
pub struct Args {
    /// The source that defines the kernel
    file: PathBuf,
    /// Only this kernel (and the device functions it calls); TMA map mutants come from
    /// the file's encoders
    #[arg(long, value_name = "NAME")]
    kernel: Option<String>,
    /// Only these stages: operand-load, mma, epilogue, descriptor
    #[arg(long, value_delimiter = ',', value_parser = parse_stage)]
    stage: Vec<Stage>,
    /// Only these operators (`ab-swapped,bias-axis`); the mutants keep the ids they
    /// have in the whole listing
    #[arg(long = "operator", value_delimiter = ',', value_name = "NAME")]
    operators: Vec<String>,
    /// Print the mutants (id, stage, operator, line, diff) and write nothing
    #[arg(long, conflicts_with = "output")]
    list: bool,
    /// Print the manifest as JSON
    #[arg(long)]
    json: bool,
    /// The folder for the mutants and mutants.json (created if missing)
    #[arg(short, long, value_name = "DIR")]
    output: Option<PathBuf>,
    /// Compile each mutant's device code with nvcc (-cubin) and drop those that do not
    /// compile
    #[arg(long, requires = "output")]
    compile: bool,
    /// An include folder for --compile (FILE's own folder is always added)
    #[arg(short = 'I', value_name = "DIR")]
    includes: Vec<PathBuf>,
    /// A macro for --compile: NAME or NAME=VALUE
    #[arg(short = 'D', value_name = "NAME[=VALUE]")]
    defines: Vec<String>,
    /// The C++ standard for --compile
    #[arg(long, default_value = "c++17")]
    std: String,
    /// The GPU architecture for --compile
    #[arg(long, default_value = "sm_90a")]
    arch: String,
    /// A further nvcc flag for --compile, passed as given
    #[arg(long = "nvcc-flag", value_name = "FLAG", allow_hyphen_values = true)]
    nvcc_flags: Vec<String>,
    /// The include folder FILE (a header) is found under: each mutant is written at
    /// FILE's path relative to it, so its folder overlays the original on the include
    /// path
    #[arg(long, value_name = "ROOT", requires = "output")]
    include_root: Option<PathBuf>,
    /// The translation unit --compile builds for a mutated header (the mutant's folder
    /// first on its include path); needs --include-root
    #[arg(long, value_name = "FILE.cu", requires = "include_root")]
    unit: Option<PathBuf>,
    /// Run this shell command once on the original and once per mutant, in a copy of
    /// --tree with the mutant in place; a mutant it passes survives. It sees
    /// KWB_MUTANT, KWB_MUTANT_STAGE, KWB_MUTANT_FILE and KWB_TREE
    #[arg(long, value_name = "CMD", requires = "output")]
    test: Option<String>,
    /// The folder --test copies (default: FILE's folder, or --include-root)
    #[arg(long, value_name = "DIR", requires = "test")]
    tree: Option<PathBuf>,
    /// Seconds a --test run may take before it is stopped and counted as killed
    /// (default: 3 times the original's run, plus 30)
    #[arg(long, value_name = "SECS", requires = "test")]
    timeout: Option<u64>,
}

fn parse_stage(text: &str) -> Result<Stage, String> {
    Stage::parse(text).ok_or_else(|| {
        format!("`{text}` is not a stage; choose operand-load, mma, epilogue or descriptor")
    })
}

/// One mutant in the manifest.
#[derive(Serialize)]
struct Entry<'m> {
    #[serde(flatten)]
    mutant: &'m Mutant,
    /// Its file, relative to the output folder (`None` with --list or --json alone).
    file: Option<String>,
    /// With --include-root: the folder (relative to the output folder) to put first
    /// on the include path so the mutant replaces the original header.
    #[serde(skip_serializing_if = "Option::is_none")]
    overlay: Option<String>,
    /// With --test: how the user's test ended on it.
    #[serde(skip_serializing_if = "Option::is_none")]
    test: Option<Outcome>,
}

/// A mutant that was dropped, and why.
#[derive(Serialize)]
struct Dropped<'m> {
    id: usize,
    stage: Stage,
    operator: &'m str,
    line: usize,
    why: String,
}

/// The run of the user's test on the original.
#[derive(Serialize)]
struct Baseline {
    command: String,
    seconds: f64,
    timeout_s: u64,
}

#[derive(Serialize)]
struct Manifest<'m> {
    source: String,
    mutants: Vec<Entry<'m>>,
    dropped: Vec<Dropped<'m>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    test: Option<Baseline>,
}

/// Where a mutant lives inside the output folder.
struct Layout {
    /// FILE's path below its include root, or its name.
    relative: PathBuf,
    overlays: bool,
}

impl Layout {
    fn folder(m: &Mutant) -> String {
        format!("{:03}-{}-{}", m.id, m.stage.name(), m.operator)
    }

    fn file(&self, m: &Mutant) -> PathBuf {
        Path::new(&Self::folder(m)).join(&self.relative)
    }
}

pub fn run(args: Args) -> i32 {
    let source = match read_source(&args.file, DEFAULT_MAX_BYTES) {
        Ok(s) => s,
        Err(e) => {
            render::error(Report::new(e));
            return exit::INPUT;
        }
    };
    let layout = match layout(&args) {
        Ok(l) => l,
        Err(code) => return code,
    };
    let config = Config {
        kernel: args.kernel.clone(),
        stages: args.stage.clone(),
        operators: args.operators.clone(),
    };
    let all = match kwb_mutate::mutants(&source, &config) {
        Ok(m) => m,
        Err(e) => {
            let code = match e {
                MutateError::UnknownKernel { .. } => exit::NO_KERNEL,
                MutateError::NoSite { .. }
                | MutateError::NoOperatorSite { .. }
                | MutateError::UnknownOperator { .. } => exit::INPUT,
            };
            render::error(Report::new(e));
            return code;
        }
    };
    let mut dropped = Vec::new();
    let mut kept: Vec<&Mutant> = all.iter().collect();
    let mut outcomes: Vec<(usize, Outcome)> = Vec::new();
    let mut baseline = None;
    if let Some(dir) = &args.output {
        if let Err(code) = clear(dir) {
            return code;
        }
        // The folder is marked as kwb mutate's at once, so a run that stops early
        // (a refused test, an interrupt) leaves a folder a rerun may replace.
        let unfinished = serde_json::json!({
            "source": args.file.display().to_string(),
            "unfinished": true,
        });
        if let Err(source) = std::fs::write(dir.join("mutants.json"), format!("{unfinished}\n")) {
            let path = dir.join("mutants.json");
            render::error(Report::new(CliError::Unwritable { path, source }));
            return exit::INPUT;
        }
        let files: Vec<PathBuf> = all.iter().map(|m| dir.join(layout.file(m))).collect();
        let written = all.iter().zip(&files).try_for_each(|(m, path)| {
            std::fs::create_dir_all(path.parent().unwrap_or(dir))
                .and_then(|()| std::fs::write(path, &m.text))
                .map_err(|source| (path.clone(), source))
        });
        if let Err((path, source)) = written {
            render::error(Report::new(CliError::Unwritable { path, source }));
            return exit::INPUT;
        }
        if args.compile {
            let candidates: Vec<Candidate> = all
                .iter()
                .zip(&files)
                .map(|(m, file)| Candidate {
                    file: file.clone(),
                    overlay: dir.join(Layout::folder(m)),
                    // A TMA map is encoded on the host: the device code is the same.
                    host: m.stage == Stage::Descriptor,
                })
                .collect();
            let failed = match compile_each(&args, &candidates, dir) {
                Ok(f) => f,
                Err(code) => return code,
            };
            for (m, why) in all.iter().zip(failed) {
                if let Some(why) = why {
                    dropped.push(Dropped {
                        id: m.id,
                        stage: m.stage,
                        operator: m.operator,
                        line: m.line,
                        why,
                    });
                    let _ = std::fs::remove_dir_all(dir.join(Layout::folder(m)));
                }
            }
            kept.retain(|m| !dropped.iter().any(|d| d.id == m.id));
        }
        if let Some(command) = &args.test {
            match test_each(&args, command, &source, &kept, dir) {
                Ok((base, results)) => {
                    baseline = Some(base);
                    outcomes = results;
                }
                Err(code) => return code,
            }
        }
    }
    let manifest = Manifest {
        source: args.file.display().to_string(),
        mutants: kept
            .iter()
            .map(|m| Entry {
                mutant: m,
                file: args
                    .output
                    .as_ref()
                    .map(|_| layout.file(m).to_string_lossy().into_owned()),
                overlay: (args.output.is_some() && layout.overlays).then(|| Layout::folder(m)),
                test: outcomes
                    .iter()
                    .find(|(id, _)| *id == m.id)
                    .map(|(_, o)| o.clone()),
            })
            .collect(),
        dropped,
        test: baseline,
    };
    let json = serde_json::to_string_pretty(&manifest).unwrap_or_default();
    if let Some(dir) = &args.output {
        let path = dir.join("mutants.json");
        if let Err(source) = std::fs::write(&path, format!("{json}\n")) {
            render::error(Report::new(CliError::Unwritable { path, source }));
            return exit::INPUT;
        }
    }
    let mut out = std::io::stdout().lock();
    let printed = if args.json {
        writeln!(out, "{json}")
    } else {
        out.write_all(listing(&manifest, &args.file, args.output.as_deref()).as_bytes())
    };
    if printed.is_err() {
        return exit::INTERNAL;
    }
    let survivors = manifest
        .mutants
        .iter()
        .any(|e| e.test.as_ref().is_some_and(Outcome::survived));
    if survivors { exit::MISMATCH } else { exit::OK }
}

/// Where mutants are written: below FILE's include root, or by FILE's name. Refuses a
/// root that does not hold FILE, and a header to compile without its unit.
fn layout(args: &Args) -> Result<Layout, i32> {
    let refuse = |why: String| {
        render::error(Report::msg(why));
        exit::INPUT
    };
    if args.compile && args.unit.is_none() && crate::mutant_build::is_header(&args.file) {
        return Err(refuse(format!(
            "{} is a header: nvcc compiles it through the file that includes it; give \
             --include-root (the folder its #include paths start from) and --unit FILE.cu",
            args.file.display()
        )));
    }
    let Some(root) = &args.include_root else {
        let name = args
            .file
            .file_name()
            .map_or_else(|| "kernel.cu".into(), PathBuf::from);
        return Ok(Layout {
            relative: name,
            overlays: false,
        });
    };
    let absolute = |p: &Path| std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf());
    match absolute(&args.file).strip_prefix(absolute(root)) {
        Ok(relative) => Ok(Layout {
            relative: relative.to_path_buf(),
            overlays: true,
        }),
        Err(_) => Err(refuse(format!(
            "{} is not under --include-root {}",
            args.file.display(),
            root.display()
        ))),
    }
}

/// What a person reads: each mutant with its diff (and test outcome), the dropped
/// ones, the survivors per stage, and a summary line.
fn listing(manifest: &Manifest<'_>, file: &Path, dir: Option<&Path>) -> String {
    let mut text = String::new();
    for e in &manifest.mutants {
        let m = e.mutant;
        text.push_str(&format!(
            "{:>3} {:<12} {:<15} {}:{} ({}){}\n",
            m.id,
            m.stage.name(),
            m.operator,
            file.display(),
            m.line,
            m.function,
            e.test
                .as_ref()
                .map_or(String::new(), |o| format!(": {}", o.word()))
        ));
        for line in m.diff.lines() {
            text.push_str(&format!("      {line}\n"));
        }
    }
    for d in &manifest.dropped {
        text.push_str(&format!(
            "dropped {} ({} {} at line {}): {}\n",
            d.id,
            d.stage.name(),
            d.operator,
            d.line,
            d.why
        ));
    }
    if let Some(base) = &manifest.test {
        text.push_str(&format!(
            "test `{}`: passes on the original in {:.1} s; each mutant given {} s\n",
            base.command, base.seconds, base.timeout_s
        ));
        for stage in Stage::ALL {
            let tested: Vec<&Entry<'_>> = manifest
                .mutants
                .iter()
                .filter(|e| e.mutant.stage == stage && e.test.is_some())
                .collect();
            if tested.is_empty() {
                continue;
            }
            let survivors: Vec<String> = tested
                .iter()
                .filter(|e| e.test.as_ref().is_some_and(Outcome::survived))
                .map(|e| {
                    format!(
                        "{} ({} at line {})",
                        e.mutant.id, e.mutant.operator, e.mutant.line
                    )
                })
                .collect();
            text.push_str(&format!(
                "  {:<12} {} of {} killed{}\n",
                stage.name(),
                tested.len() - survivors.len(),
                tested.len(),
                if survivors.is_empty() {
                    String::new()
                } else {
                    format!("; survivors: {}", survivors.join(", "))
                }
            ));
        }
    }
    text.push_str(&summary(manifest, dir));
    text
}

/// The last line: how many mutants of each stage, and where they are.
fn summary(m: &Manifest<'_>, dir: Option<&Path>) -> String {
    let per: Vec<String> = Stage::ALL
        .iter()
        .filter_map(|s| {
            let n = m.mutants.iter().filter(|e| e.mutant.stage == *s).count();
            (n > 0).then(|| format!("{n} {}", s.name()))
        })
        .collect();
    let survived = m
        .mutants
        .iter()
        .filter(|e| e.test.as_ref().is_some_and(Outcome::survived))
        .count();
    format!(
        "{} mutants ({}){}{}{}\n",
        m.mutants.len(),
        per.join(", "),
        if m.dropped.is_empty() {
            String::new()
        } else {
            format!(", {} dropped", m.dropped.len())
        },
        if m.test.is_some() {
            format!(", {survived} survived the test")
        } else {
            String::new()
        },
        dir.map_or(String::new(), |d| format!(", written to {}", d.display()))
    )
}

/// Makes `dir` ready for the mutants: created when missing, emptied when it holds a
/// previous run's (a mutants.json), refused when it holds anything else.
fn clear(dir: &Path) -> Result<(), i32> {
    let refuse = |why: &str| {
        render::error(Report::msg(format!(
            "{}: {why}; give kwb mutate an empty folder or one it wrote",
            dir.display()
        )));
        exit::INPUT
    };
    match std::fs::read_dir(dir) {
        Err(_) if !dir.exists() => {}
        Err(e) => return Err(refuse(&e.to_string())),
        Ok(mut entries) => {
            if entries.next().is_some() {
                if !dir.join("mutants.json").is_file() {
                    return Err(refuse("it holds files kwb mutate did not write"));
                }
                std::fs::remove_dir_all(dir).map_err(|e| refuse(&e.to_string()))?;
            }
        }
    }
    std::fs::create_dir_all(dir).map_err(|source| {
        render::error(Report::new(CliError::Unwritable {
            path: dir.to_path_buf(),
            source,
        }));
        exit::INPUT
    })
}

/// Each mutant's device code compiled; for each, why it is dropped, if so.
fn compile_each(
    args: &Args,
    candidates: &[Candidate],
    dir: &Path,
) -> Result<Vec<Option<String>>, i32> {
    let toolchain = kwb_toolchain::toolchain(&kwb_toolchain::Env::from_process()).map_err(|e| {
        render::error(Report::new(e));
        exit::INPUT
    })?;
    let compiled = args.unit.as_deref().unwrap_or(&args.file);
    let beside = compiled
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf);
    let flags = kwb_toolchain::CompileFlags {
        arch: args.arch.clone(),
        std: args.std.clone(),
        includes: std::iter::once(beside)
            .chain(args.includes.iter().cloned())
            .collect(),
        defines: args.defines.clone(),
        extra: args.nvcc_flags.clone(),
        ptx: false,
    };
    let build = Build {
        toolchain,
        flags,
        unit: args.unit.clone(),
        original: args.file.clone(),
    };
    build.check(candidates, dir).map_err(|OriginalFails(why)| {
        render::error(Report::msg(format!(
            "{} does not compile as it is, so its mutants cannot be checked: {why}",
            compiled.display()
        )));
        exit::INPUT
    })
}

/// The user's test on the original, then on each kept mutant.
fn test_each(
    args: &Args,
    command: &str,
    source: &str,
    kept: &[&Mutant],
    dir: &Path,
) -> Result<(Baseline, Vec<(usize, Outcome)>), i32> {
    let fail = |why: String| {
        render::error(Report::msg(why));
        exit::INPUT
    };
    let beside = args
        .file
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf);
    let tree = args
        .tree
        .clone()
        .or_else(|| args.include_root.clone())
        .unwrap_or(beside);
    let sandbox = Sandbox::new(&tree, &args.file, dir, source).map_err(|e| fail(e.to_string()))?;
    let log = dir.join("test-original.log");
    let unlimited = Duration::from_secs(args.timeout.unwrap_or(24 * 3600));
    let original = sandbox
        .run(command, None, &log, unlimited)
        .map_err(|e| fail(e.to_string()))?;
    if !original.survived() {
        return Err(fail(format!(
            "the test fails on the original ({}), so it cannot tell a mutant from it; its \
             output ends:\n{}",
            original.word(),
            log_tail(&log, 12)
        )));
    }
    let timeout_s = args
        .timeout
        .unwrap_or((original.seconds() * 3.0).ceil() as u64 + 30);
    let mut results = Vec::new();
    for m in kept {
        let log = dir.join(Layout::folder(m)).join("test.log");
        let outcome = sandbox
            .run(
                command,
                Some((m.id, m.stage.name(), &m.text)),
                &log,
                Duration::from_secs(timeout_s),
            )
            .map_err(|e| fail(e.to_string()))?;
        // One line per mutant as it ends: a GPU test suite takes minutes a mutant.
        let _ = writeln!(
            std::io::stderr(),
            "mutant {} ({} {}): {}",
            m.id,
            m.stage.name(),
            m.operator,
            outcome.word()
        );
        results.push((m.id, outcome));
    }
    Ok((
        Baseline {
            command: command.to_owned(),
            seconds: original.seconds(),
            timeout_s,
        },
        results,
    ))
}
