//! `kwb mutate FILE [--kernel K] [--stage S,…] [--list] [--json] [-o DIR] [--compile]`:
//! stage-labelled defects planted in a kernel (kwb-mutate), each written as a copy of
//! FILE with one edit, `DIR/NNN-STAGE-OPERATOR/NAME` (FILE's own name, so a build can
//! point at the folder), and `DIR/mutants.json`: `{"source", "mutants": [{"id",
//! "stage", "operator", "function", "line", "file", "diff"}], "dropped": [{"id",
//! "stage", "operator", "line", "why"}]}`. With `--compile` each mutant's device code
//! is compiled (`nvcc -cubin`, FILE's folder and `-I` on the include path) and one
//! that does not compile is reported and dropped.
//!
//! FILE is only read; nothing is written outside DIR, and DIR is refused when it holds
//! files of something else (a folder kwb mutate wrote, with its mutants.json, is
//! replaced). Exit 0, 2 for bad input (a stage with no site, an unusable DIR), 3 when
//! FILE has no such kernel.

use std::io::Write;
use std::path::{Path, PathBuf};

use kwb_mutate::{Config, Mutant, MutateError, Stage};
use miette::Report;
use rayon::prelude::*;
use serde::Serialize;

use crate::error::CliError;
use crate::input::{DEFAULT_MAX_BYTES, read_source};
use crate::{exit, render};

#[derive(clap::Args)]
#[command(group(clap::ArgGroup::new("out").required(true).args(["output", "list", "json"])))]
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

#[derive(Serialize)]
struct Manifest<'m> {
    source: String,
    mutants: Vec<Entry<'m>>,
    dropped: Vec<Dropped<'m>>,
}

pub fn run(args: Args) -> i32 {
    let source = match read_source(&args.file, DEFAULT_MAX_BYTES) {
        Ok(s) => s,
        Err(e) => {
            render::error(Report::new(e));
            return exit::INPUT;
        }
    };
    let config = Config {
        kernel: args.kernel.clone(),
        stages: args.stage.clone(),
    };
    let all = match kwb_mutate::mutants(&source, &config) {
        Ok(m) => m,
        Err(e) => {
            let code = match e {
                MutateError::UnknownKernel { .. } => exit::NO_KERNEL,
                MutateError::NoSite { .. } => exit::INPUT,
            };
            render::error(Report::new(e));
            return code;
        }
    };
    let name = args.file.file_name().map_or_else(
        || "kernel.cu".to_owned(),
        |n| n.to_string_lossy().into_owned(),
    );
    let folder = |m: &Mutant| format!("{:03}-{}-{}", m.id, m.stage.name(), m.operator);
    let mut dropped = Vec::new();
    let mut kept: Vec<&Mutant> = all.iter().collect();
    if let Some(dir) = &args.output {
        if let Err(code) = clear(dir) {
            return code;
        }
        let files: Vec<(PathBuf, String)> = all
            .iter()
            .map(|m| (dir.join(folder(m)).join(&name), m.text.clone()))
            .collect();
        let written = files.iter().try_for_each(|(path, text)| {
            std::fs::create_dir_all(path.parent().unwrap_or(dir))
                .and_then(|()| std::fs::write(path, text))
                .map_err(|source| (path.clone(), source))
        });
        if let Err((path, source)) = written {
            render::error(Report::new(CliError::Unwritable { path, source }));
            return exit::INPUT;
        }
        if args.compile {
            let failed = match compile_each(&args, &files) {
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
                    let _ = std::fs::remove_dir_all(dir.join(folder(m)));
                }
            }
            kept.retain(|m| !dropped.iter().any(|d| d.id == m.id));
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
                    .map(|_| format!("{}/{name}", folder(m))),
            })
            .collect(),
        dropped,
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
        let mut text = String::new();
        for e in &manifest.mutants {
            let m = e.mutant;
            text.push_str(&format!(
                "{:>3} {:<12} {:<15} {}:{} ({})\n",
                m.id,
                m.stage.name(),
                m.operator,
                args.file.display(),
                m.line,
                m.function
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
        text.push_str(&summary(&manifest, args.output.as_deref()));
        out.write_all(text.as_bytes())
    };
    if printed.is_err() {
        return exit::INTERNAL;
    }
    exit::OK
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
    format!(
        "{} mutants ({}){}{}\n",
        m.mutants.len(),
        per.join(", "),
        if m.dropped.is_empty() {
            String::new()
        } else {
            format!(", {} dropped", m.dropped.len())
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

/// Each mutant's device code compiled; for each, why it does not compile, if so.
fn compile_each(args: &Args, files: &[(PathBuf, String)]) -> Result<Vec<Option<String>>, i32> {
    let toolchain = kwb_toolchain::toolchain(&kwb_toolchain::Env::from_process()).map_err(|e| {
        render::error(Report::new(e));
        exit::INPUT
    })?;
    let beside = args
        .file
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
    Ok(files
        .par_iter()
        .map(|(path, _)| {
            let cubin = path.with_extension("cubin");
            let result = kwb_toolchain::nvcc::compile_cubin(&toolchain, path, &flags, &cubin);
            let _ = std::fs::remove_file(&cubin);
            result.err().map(|e| {
                e.to_string()
                    .lines()
                    .find(|l| l.contains("error"))
                    .unwrap_or("nvcc failed")
                    .trim()
                    .to_owned()
            })
        })
        .collect())
}
