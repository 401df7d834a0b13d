//! `kwb sites`: the kernel map of each file, as annotated snippets or JSON.

use std::io::Write;
use std::path::{Path, PathBuf};

use kwb_sites::{Kernel, Pattern};
use kwb_syntax::SyntaxDiagnosticKind;
use miette::Report;
use rayon::prelude::*;
use serde::Serialize;

use crate::error::CliError;
use crate::input::{DEFAULT_MAX_BYTES, read_source};
use crate::{exit, render};

#[derive(clap::Args)]
pub struct Args {
    /// Source files (.cu, .cuh, .h, .hpp, …)
    #[arg(required = true)]
    files: Vec<PathBuf>,
    /// Print JSON (schema: docs/sites.md); several files give an array
    #[arg(long)]
    json: bool,
    /// Report only the kernel with this name (or last name component)
    #[arg(long, value_name = "NAME")]
    kernel: Option<String>,
    /// Add the site patterns of a tree-sitter query file (repeatable)
    #[arg(long, value_name = "FILE.scm")]
    patterns: Vec<PathBuf>,
    /// Largest file to read, in bytes
    #[arg(long, default_value_t = DEFAULT_MAX_BYTES)]
    max_bytes: u64,
}

/// One file's result, exactly the JSON object of the schema.
#[derive(Serialize)]
pub struct FileMap {
    file: String,
    kernels: Vec<Kernel>,
    diagnostics: Vec<JsonDiagnostic>,
}

#[derive(Serialize)]
struct JsonDiagnostic {
    line: usize,
    kind: &'static str,
    message: String,
}

pub fn run(args: Args) -> i32 {
    let mut user = Vec::new();
    for path in &args.patterns {
        let text = match read_source(path, args.max_bytes) {
            Ok(text) => text,
            Err(e) => {
                render::error(Report::new(e));
                return exit::INPUT;
            }
        };
        match Pattern::compile(&path.display().to_string(), &text) {
            Ok(p) => user.push(p),
            Err(e) => {
                render::error(Report::new(e));
                return exit::INPUT;
            }
        }
    }
    // Largest files first: one file is one unit of work, and a sweep's few huge
    // headers (CUTLASS's 3 MB `mma_sm90_gmma_*_ext.hpp`, about 1 s each) left for the
    // end would run on one core while the other idles. Results keep argument order.
    let mut order: Vec<usize> = (0..args.files.len()).collect();
    if order.len() > 1 {
        let sizes: Vec<u64> = args
            .files
            .iter()
            .map(|p| std::fs::metadata(p).map_or(0, |m| m.len()))
            .collect();
        order.sort_by_key(|&i| std::cmp::Reverse(sizes[i]));
    }
    let mut mapped: Vec<(usize, Result<Mapped, CliError>)> = order
        .par_iter()
        .with_max_len(1)
        .map(|&i| (i, map_file(&args.files[i], &args, &user)))
        .collect();
    mapped.sort_by_key(|(i, _)| *i);
    let results = mapped.into_iter().map(|(_, r)| r);
    let mut code = exit::OK;
    let mut maps = Vec::new();
    for result in results {
        match result {
            Ok(mapped) => maps.push(mapped),
            Err(e) => {
                code = code.max(exit::INPUT);
                render::error(Report::new(e));
            }
        }
    }
    // A file without kernels is an error when it is the only file, or when no file
    // has any; in a sweep over many files it is an ordinary header.
    let any_kernels = maps.iter().any(|m| !m.map.kernels.is_empty());
    for mapped in &mut maps {
        if mapped.map.kernels.iter().any(|k| k.syntax_errors > 0) {
            code = code.max(exit::PARTIAL);
        }
        if let Some(why) = mapped.empty.take()
            && (args.files.len() == 1 || !any_kernels)
        {
            code = code.max(exit::NO_KERNEL);
            render::error(Report::new(why));
        }
    }
    let maps: Vec<(FileMap, String)> = maps
        .into_iter()
        .filter(|m| args.files.len() > 1 || !m.map.kernels.is_empty())
        .map(|m| (m.map, m.source))
        .collect();
    let stdout = std::io::stdout().lock();
    let mut stdout = std::io::BufWriter::new(stdout);
    let written = if args.json {
        let result = match (args.files.len(), maps.first()) {
            (1, Some((map, _))) => serde_json::to_writer_pretty(&mut stdout, map),
            (1, None) => Ok(()),
            _ => serde_json::to_writer_pretty(
                &mut stdout,
                &maps.iter().map(|(m, _)| m).collect::<Vec<_>>(),
            ),
        };
        result.map_err(std::io::Error::other).and_then(|()| {
            match (args.files.len(), maps.is_empty()) {
                (1, true) => Ok(()),
                _ => writeln!(stdout),
            }
        })
    } else {
        maps.iter()
            .filter(|(map, _)| !map.kernels.is_empty())
            .try_for_each(|(map, source)| human(&mut stdout, map, source))
    };
    let written = written.and_then(|()| stdout.flush());
    if written.is_err() {
        return exit::INTERNAL;
    }
    code
}

/// A readable file's map, and why it has no kernel when it has none.
struct Mapped {
    map: FileMap,
    source: String,
    empty: Option<CliError>,
}

fn map_file(path: &Path, args: &Args, user: &[Pattern]) -> Result<Mapped, CliError> {
    let source = read_source(path, args.max_bytes)?;
    let parsed = kwb_syntax::parse(&source);
    let mut map = kwb_sites::kernel_map(&parsed, user);
    let mut empty = None;
    if map.kernels.is_empty() {
        empty = Some(match parsed.diagnostics.is_empty() {
            true => CliError::NoKernel {
                path: path.to_owned(),
            },
            false => CliError::NoKernelInErrors {
                path: path.to_owned(),
                regions: parsed.diagnostics.len(),
                lines: parsed
                    .diagnostics
                    .iter()
                    .take(8)
                    .map(|d| d.line.to_string())
                    .collect::<Vec<_>>()
                    .join(", "),
            },
        });
    } else if let Some(name) = &args.kernel {
        let available: Vec<String> = map.kernels.iter().map(|k| k.name.clone()).collect();
        map.kernels
            .retain(|k| &k.name == name || k.name.rsplit("::").next() == Some(name.as_str()));
        if map.kernels.is_empty() {
            empty = Some(CliError::UnknownKernel {
                name: name.clone(),
                path: path.to_owned(),
                available: available.join(", "),
            });
        }
    }
    let diagnostics = parsed
        .diagnostics
        .iter()
        .map(|d| JsonDiagnostic {
            line: d.line,
            kind: match d.kind {
                SyntaxDiagnosticKind::Error => "error",
                SyntaxDiagnosticKind::Missing(_) => "missing",
            },
            message: match &d.kind {
                SyntaxDiagnosticKind::Error => "syntax the parser skipped".to_owned(),
                SyntaxDiagnosticKind::Missing(what) => format!("missing `{what}`"),
            },
        })
        .collect();
    let map = FileMap {
        file: path.display().to_string(),
        kernels: map.kernels,
        diagnostics,
    };
    Ok(Mapped { map, source, empty })
}

fn human(out: &mut impl Write, map: &FileMap, source: &str) -> std::io::Result<()> {
    for kernel in &map.kernels {
        write!(out, "{}", render::kernel(&map.file, source, kernel))?;
    }
    if !map.diagnostics.is_empty() {
        writeln!(
            out,
            "{}: {} error regions in the file; sites inside them may be missing (lines {})",
            map.file,
            map.diagnostics.len(),
            map.diagnostics
                .iter()
                .take(8)
                .map(|d| d.line.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        )?;
    }
    Ok(())
}
