//! `kwb-instrument`: insert `if constexpr`-gated probes, or strip them.
//!
//! The input is never modified: the output is written to a temporary file beside it
//! and renamed into place, and an output path equal to the input is refused.

use std::io::Write;
use std::path::{Path, PathBuf};

use kwb_instrument::{Config, Probes};
use miette::{Diagnostic, Report};
use thiserror::Error;

use crate::input::{DEFAULT_MAX_BYTES, read_source};
use crate::{exit, render};

#[derive(clap::Parser)]
#[command(
    name = "kwb-instrument",
    version,
    about = "Insert compile-time-gated probes of the accumulator into a CUDA kernel (or strip them)"
)]
pub struct Args {
    /// The kernel source to instrument
    file: PathBuf,
    /// Where to write the result (never the input itself)
    #[arg(short, long)]
    output: PathBuf,
    /// Instrument only this kernel (name or last name component)
    #[arg(long, value_name = "NAME")]
    kernel: Option<String>,
    /// Compile-time condition in the kernel's template scope, e.g. 'REDUCTION_SIZE == 6144'
    #[arg(long, value_name = "EXPR")]
    gate: Option<String>,
    /// Remove every kwb insertion instead, restoring the original byte for byte
    #[arg(long, conflicts_with_all = ["kernel", "gate"])]
    strip: bool,
    /// Print the rewrite as a unified diff
    #[arg(long)]
    diff: bool,
}

#[derive(Debug, Error, Diagnostic)]
enum OutputError {
    #[error("the output {0} is the input file")]
    #[diagnostic(
        code(kwb::instrument::output_is_input),
        help(
            "write the instrumented copy elsewhere, e.g. -o traced.cu; the input is never modified"
        )
    )]
    SameAsInput(PathBuf),
    #[error("cannot write {path}: {source}")]
    #[diagnostic(
        code(kwb::instrument::unwritable),
        help("check that the folder exists and is writable")
    )]
    Unwritable {
        path: PathBuf,
        source: std::io::Error,
    },
}

pub fn run(args: Args) -> i32 {
    if same_file(&args.file, &args.output) {
        render::error(Report::new(OutputError::SameAsInput(args.output.clone())));
        return exit::INPUT;
    }
    let source = match read_source(&args.file, DEFAULT_MAX_BYTES) {
        Ok(s) => s,
        Err(e) => {
            render::error(Report::new(e));
            return exit::INPUT;
        }
    };
    let result = if args.strip {
        kwb_instrument::strip(&source).map(|text| (text, None))
    } else {
        let config = Config {
            kernel: args.kernel.clone(),
            gate: args.gate.clone(),
            probes: Probes::default(),
            file_name: args.file.display().to_string(),
        };
        kwb_instrument::instrument(&source, &config).map(|(text, plan)| (text, Some(plan)))
    };
    let (text, plan) = match result {
        Ok(r) => r,
        Err(e) => {
            let code = match e {
                kwb_instrument::InstrumentError::UnknownKernel { .. }
                | kwb_instrument::InstrumentError::NothingToProbe => exit::NO_KERNEL,
                _ => exit::INPUT,
            };
            render::error(Report::new(e));
            return code;
        }
    };
    if let Err(e) = write_atomically(&args.output, &text) {
        render::error(Report::new(e));
        return exit::INPUT;
    }
    let mut stdout = std::io::stdout().lock();
    if args.diff {
        let diff = similar::TextDiff::from_lines(&source, &text);
        let _ = write!(
            stdout,
            "{}",
            diff.unified_diff().context_radius(2).header(
                &args.file.display().to_string(),
                &args.output.display().to_string()
            )
        );
    }
    let mut stderr = std::io::stderr().lock();
    match plan {
        Some(plan) => {
            for probe in &plan.probes {
                let _ = writeln!(
                    stderr,
                    "probe {}: {} in `{}` (line {})",
                    probe.id, probe.what, probe.kernel, probe.line
                );
            }
            for note in &plan.notes {
                let _ = writeln!(stderr, "note: {note}");
            }
            let _ = writeln!(
                stderr,
                "wrote {}: build with -DKWB_TRACE to record a trace (KWB_TRACE_OUT=trace.bin writes it at exit); without it the probes compile to nothing",
                args.output.display()
            );
        }
        None => {
            let _ = writeln!(
                stderr,
                "wrote {} (kwb insertions removed)",
                args.output.display()
            );
        }
    }
    exit::OK
}

/// Whether two paths name the same file (by canonical path when the output exists).
fn same_file(input: &Path, output: &Path) -> bool {
    match (input.canonicalize(), output.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => input == output,
    }
}

/// Writes `text` to a temporary file beside `path`, then renames it into place, so a
/// failure never leaves a half-written output.
fn write_atomically(path: &Path, text: &str) -> Result<(), OutputError> {
    let unwritable = |source| OutputError::Unwritable {
        path: path.to_owned(),
        source,
    };
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let mut temp = tempfile::NamedTempFile::new_in(dir).map_err(unwritable)?;
    temp.write_all(text.as_bytes()).map_err(unwritable)?;
    temp.persist(path).map_err(|e| unwritable(e.error))?;
    Ok(())
}
