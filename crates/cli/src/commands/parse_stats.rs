//! `kwb parse-stats DIR`: how much of a source tree kwb parses cleanly.

use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;

use miette::Report;
use rayon::prelude::*;
use serde::Serialize;

use crate::input::{DEFAULT_MAX_BYTES, read_source, walk};
use crate::{exit, render};

#[derive(clap::Args)]
pub struct Args {
    /// Directory to walk (.cu .cuh .h .hpp .inl .cpp …)
    dir: PathBuf,
    /// Print JSON
    #[arg(long)]
    json: bool,
    /// List each file that has ERROR/MISSING nodes, with its first error line
    #[arg(long)]
    list: bool,
}

#[derive(Serialize)]
struct Stats {
    files: usize,
    bytes: usize,
    files_with_errors: usize,
    error_regions: usize,
    unreadable: usize,
    seconds: f64,
    with_errors: Vec<FileErrors>,
}

#[derive(Serialize)]
struct FileErrors {
    file: String,
    regions: usize,
    first_line: usize,
}

pub fn run(args: Args) -> i32 {
    let files = match walk(&args.dir) {
        Ok(files) => files,
        Err(e) => {
            render::error(Report::new(e));
            return exit::INPUT;
        }
    };
    let start = Instant::now();
    let results: Vec<Option<(usize, Option<FileErrors>)>> = files
        .par_iter()
        .map(|path| {
            let source = read_source(path, DEFAULT_MAX_BYTES).ok()?;
            let parsed = kwb_syntax::parse(&source);
            let errors = parsed.diagnostics.first().map(|d| FileErrors {
                file: path
                    .strip_prefix(&args.dir)
                    .unwrap_or(path)
                    .display()
                    .to_string(),
                regions: parsed.diagnostics.len(),
                first_line: d.line,
            });
            Some((source.len(), errors))
        })
        .collect();
    let seconds = start.elapsed().as_secs_f64();
    let with_errors: Vec<FileErrors> = results
        .iter()
        .flatten()
        .filter_map(|(_, e)| e.as_ref())
        .map(|e| FileErrors {
            file: e.file.clone(),
            regions: e.regions,
            first_line: e.first_line,
        })
        .collect();
    let stats = Stats {
        files: files.len(),
        bytes: results.iter().flatten().map(|(b, _)| b).sum(),
        files_with_errors: with_errors.len(),
        error_regions: with_errors.iter().map(|e| e.regions).sum(),
        unreadable: results.iter().filter(|r| r.is_none()).count(),
        seconds,
        with_errors,
    };
    let mut out = std::io::stdout().lock();
    let written = if args.json {
        writeln!(
            out,
            "{}",
            serde_json::to_string_pretty(&stats).unwrap_or_default()
        )
    } else {
        let mut text = format!(
            "parsed {} files ({} bytes) in {:.2} s: {} clean, {} with ERROR/MISSING nodes ({} regions), {} unreadable\n",
            stats.files,
            stats.bytes,
            stats.seconds,
            stats.files - stats.files_with_errors - stats.unreadable,
            stats.files_with_errors,
            stats.error_regions,
            stats.unreadable
        );
        if args.list {
            for e in &stats.with_errors {
                text.push_str(&format!(
                    "  {}:{} ({} regions)\n",
                    e.file, e.first_line, e.regions
                ));
            }
        }
        out.write_all(text.as_bytes())
    };
    if written.is_err() {
        exit::INTERNAL
    } else {
        exit::OK
    }
}
