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
use kwb_instrument::overlay;

#[derive(clap::Parser)]
#[command(
    name = "kwb-instrument",
    version,
    about = "Insert compile-time-gated probes of the operands, accumulator and epilogue into a CUDA kernel (or strip them)"
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
    /// Record only this CTA: X,Y,Z or `all` (a -DKWB_TRACE_CTA_* at build time overrides)
    #[arg(long, value_name = "X,Y,Z|all", value_parser = parse_cta)]
    cta: Option<Cta>,
    /// Record only K tiles A..B (B excluded)
    #[arg(long, value_name = "A..B", value_parser = parse_k_tiles)]
    k_tiles: Option<KTiles>,
    /// Probe kinds, comma-separated: operands, accumulator (after each K tile and where
    /// complete), final (only where complete), epilogue, loads (the registers an
    /// ldmatrix filled) (default: operands, accumulator, epilogue)
    #[arg(long, value_name = "KINDS", value_parser = Probes::parse)]
    probe: Option<Probes>,
    /// Keep padding rows out of the statistics: '< EXPR' (or EXPR), a row bound in
    /// the kernel's scope, e.g. '< kBatchRows'; applies to mma.sync m16n8k16 fragments
    #[arg(long, value_name = "'< EXPR'", value_parser = parse_rows)]
    rows: Option<String>,
    /// Values kept per record, 0 to 8
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(0..=8))]
    values: Option<u32>,
    /// Record absmax, NaN and Inf counts but not min and max (a third of the work per
    /// value): the cheap screen of every CTA
    #[arg(long)]
    absmax_only: bool,
    /// Fold every probe call into one table per site and K tile instead of a record per
    /// warp: values counted, absmax, NaN/Inf counts and the CTAs that saw the peak and
    /// the first NaN/Inf. Probes claim nothing and wait for nothing, and nothing is
    /// dropped: the cheap screen of every CTA (no samples, min or max)
    #[arg(long, conflicts_with = "full_tile")]
    summary: bool,
    /// A summary (implies --summary) of one row per site that folds every K tile, with
    /// a cell for each warp of the grid, so no two warps reduce into one address: the
    /// cheapest screen of every CTA, per site (the CTA of the peak and of the first
    /// NaN/Inf)
    #[arg(long, conflicts_with = "full_tile")]
    screen: bool,
    /// Keep the kernel's occupancy in a trace build: N is the original kernel's
    /// registers a thread (`ptxas -v`); each probed kernel's launch bounds then ask for
    /// the CTAs an SM those give (defines KWB_TRACE_MAX_REGS)
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=255))]
    max_regs: Option<u32>,
    /// Also keep every value each probe looks at, with its coordinates (needs --cta X,Y,Z:
    /// one CTA's tiles); `kwb trace show --npy DIR` writes them as .npy files
    #[arg(long)]
    full_tile: bool,
    /// Remove every kwb insertion instead, restoring the original byte for byte
    #[arg(long, conflicts_with_all = ["kernel", "gate", "probe", "cta", "k_tiles", "rows", "values", "absmax_only", "summary", "screen", "full_tile", "overlay", "max_regs", "insitu"])]
    strip: bool,
    /// Rewrite each `KERNEL<<<…>>>(…);` launch statement instead (no probes), so that a
    /// run under `kwb diagnose --kernel KERNEL -- CMD` runs that launch on kwb's inputs
    /// inside the program and puts its data back; without that run the launch is made
    /// as written
    #[arg(long, value_name = "KERNEL", conflicts_with_all = ["kernel", "gate", "probe", "cta", "k_tiles", "rows", "values", "absmax_only", "summary", "screen", "full_tile", "overlay", "max_regs"])]
    insitu: Option<String>,
    /// Print the rewrite as a unified diff
    #[arg(long)]
    diff: bool,
    /// Print the probes and notes of every file written as JSON on stdout
    #[arg(long, conflicts_with = "diff")]
    json: bool,
    /// Also write instrumented copies of the included headers that hold a mainloop
    /// (a CUTLASS collective) under DIR; build with -I DIR first
    #[arg(long, value_name = "DIR")]
    overlay: Option<PathBuf>,
    /// An include root the overlay follows includes through (repeatable), e.g. the
    /// CUTLASS include folder
    #[arg(
        short = 'I',
        long = "include",
        value_name = "DIR",
        requires = "overlay"
    )]
    include: Vec<PathBuf>,
}

/// A CTA filter: one CTA, or `None` for all.
#[derive(Clone, Copy, Debug)]
pub struct Cta(Option<[u32; 3]>);

fn parse_cta(text: &str) -> Result<Cta, String> {
    kwb_instrument::options::cta(text).map(Cta)
}

/// A row bound: `< EXPR` or `EXPR`, one C++ expression.
fn parse_rows(text: &str) -> Result<String, String> {
    kwb_instrument::options::rows(text)
}

/// A K-tile range `[begin, end)`.
#[derive(Clone, Copy, Debug)]
pub struct KTiles(u32, u32);

fn parse_k_tiles(text: &str) -> Result<KTiles, String> {
    kwb_instrument::options::k_tiles(text).map(|(a, b)| KTiles(a, b))
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
    #[error("--full-tile keeps every value of every probe: it needs one CTA")]
    #[diagnostic(
        code(kwb::instrument::full_tile_needs_cta),
        help(
            "add --cta X,Y,Z (find the CTA first: --probe final,epilogue --summary on every CTA)"
        )
    )]
    FullTileNeedsCta,
    #[error("{0}")]
    #[diagnostic(
        code(kwb::instrument::summary_conflict),
        help(
            "--summary screens every CTA cheaply; trace one CTA without it for samples and tiles"
        )
    )]
    SummaryConflict(String),
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

impl Args {
    /// Whether the probes fold into the summary table: `--summary`, or `--screen`.
    fn summarizes(&self) -> bool {
        self.summary || self.screen
    }
}

pub fn run(args: Args) -> i32 {
    if args.full_tile && args.cta.as_ref().and_then(|c| c.0).is_none() {
        render::error(Report::new(OutputError::FullTileNeedsCta));
        return exit::INPUT;
    }
    if let Some(conflict) =
        kwb_instrument::options::summary_conflict(args.summarizes(), args.values, args.full_tile)
    {
        render::error(Report::new(OutputError::SummaryConflict(conflict)));
        return exit::INPUT;
    }
    if crate::output::same_file(&args.file, &args.output) {
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
    if let Some(kernel) = &args.insitu {
        return insitu(&args, &source, kernel);
    }
    let result = if args.strip {
        kwb_instrument::strip(&source).map(|text| (text, None))
    } else {
        let config = Config {
            kernel: args.kernel.clone(),
            gate: args.gate.clone(),
            probes: args.probe.unwrap_or_default(),
            file_name: args.file.display().to_string(),
            cta: args.cta.and_then(|c| c.0),
            k_tiles: args.k_tiles.map(|k| (k.0, k.1)),
            values: args.values,
            absmax_only: args.absmax_only,
            full_tile: args.full_tile,
            summary: args.summary,
            screen: args.screen,
            max_regs: args.max_regs,
            rows: args.rows.clone(),
            // With an overlay the gate targets one of many files' kernels.
            lenient_gate: args.overlay.is_some(),
            ..Config::default()
        };
        let result = kwb_instrument::instrument(&source, &config);
        match (&args.overlay, result) {
            (Some(dir), result) => {
                return with_overlay(&args, &source, &config, dir, result);
            }
            (None, result) => result.map(|(text, plan)| (text, Some(plan))),
        }
    };
    let (text, plan) = match result {
        Ok(r) => r,
        Err(e) => {
            let code = match e {
                kwb_instrument::InstrumentError::UnknownKernel { .. }
                | kwb_instrument::InstrumentError::NothingToProbe { .. } => exit::NO_KERNEL,
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
    if args.json {
        let files: Vec<(String, &kwb_instrument::Plan)> = plan
            .iter()
            .map(|p| (args.output.display().to_string(), p))
            .collect();
        if json(&mut stdout, &files).is_err() {
            return exit::INTERNAL;
        }
    }
    let mut stderr = std::io::stderr().lock();
    match plan {
        Some(plan) => {
            list(&mut stderr, &plan, None);
            let _ = writeln!(
                stderr,
                "wrote {}: build with -DKWB_TRACE to record a trace (KWB_TRACE_OUT=trace.bin writes it at exit); without it the probes compile to nothing",
                args.output.display()
            );
            if args.summarizes() {
                let _ = writeln!(stderr, "{}", summary_note(plan.probes.len(), args.screen));
            }
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

/// `--insitu KERNEL`: the launch statements of the kernel rewritten.
fn insitu(args: &Args, source: &str, kernel: &str) -> i32 {
    let out = match kwb_instrument::insitu::insitu(source, kernel, &args.file.display().to_string())
    {
        Ok(out) => out,
        Err(e) => {
            render::error(Report::new(e));
            return exit::NO_KERNEL;
        }
    };
    if let Err(e) = write_atomically(&args.output, &out.text) {
        render::error(Report::new(e));
        return exit::INPUT;
    }
    if args.diff {
        let diff = similar::TextDiff::from_lines(source, &out.text);
        let _ = write!(
            std::io::stdout().lock(),
            "{}",
            diff.unified_diff().context_radius(2).header(
                &args.file.display().to_string(),
                &args.output.display().to_string()
            )
        );
    }
    let mut stderr = std::io::stderr().lock();
    for note in &out.notes {
        let _ = writeln!(stderr, "note: {note}");
    }
    let lines: Vec<String> = out.lines.iter().map(usize::to_string).collect();
    let _ = writeln!(
        stderr,
        "wrote {}: the launches of `{kernel}` at line{} {} go through kwb_insitu::launch; run the program under `kwb diagnose --kernel {kernel} -- CMD` to run one on kwb's inputs",
        args.output.display(),
        if lines.len() == 1 { "" } else { "s" },
        lines.join(", ")
    );
    exit::OK
}

/// `--overlay DIR`: the input's own probes (or the input unchanged, when only its
/// headers have something to probe) to OUT, and instrumented copies of the headers
/// under DIR.
fn with_overlay(
    args: &Args,
    source: &str,
    config: &Config,
    dir: &Path,
    own: Result<(String, kwb_instrument::Plan), kwb_instrument::InstrumentError>,
) -> i32 {
    let (mut text, mut own_plan) = match own {
        Ok((text, plan)) => (text, Some(plan)),
        Err(kwb_instrument::InstrumentError::NothingToProbe { .. }) => (source.to_owned(), None),
        Err(e) => {
            render::error(Report::new(e));
            return exit::INPUT;
        }
    };
    let first_id = own_plan.as_ref().map_or(0, |p| p.probes.len() as u32);
    let copies = overlay::plan(&args.file, source, &args.include, dir, config, first_id);
    if let Some(total) = overlay::summary_total(config, first_id, &copies)
        && own_plan.is_some()
    {
        // The input names the unit's site count too, so the table has a row for each.
        let config = Config {
            summary_sites: Some(total),
            ..config.clone()
        };
        if let Ok((again, plan)) = kwb_instrument::instrument(source, &config) {
            (text, own_plan) = (again, Some(plan));
        }
    }
    if own_plan.is_none() && copies.is_empty() {
        render::error(Report::new(kwb_instrument::InstrumentError::no_mainloop()));
        return exit::NO_KERNEL;
    }
    for (written, _) in &copies {
        if written.source == args.output || crate::output::same_file(&written.source, &written.copy)
        {
            render::error(Report::new(OutputError::SameAsInput(written.copy.clone())));
            return exit::INPUT;
        }
    }
    // The output and every overlay copy, or none of them.
    let mut files: Vec<(&Path, &str)> = vec![(&args.output, &text)];
    files.extend(copies.iter().map(|(w, t)| (w.copy.as_path(), t.as_str())));
    let runtime = overlay::runtime_header(dir);
    if !copies.is_empty() {
        files.push((&runtime.0, runtime.1));
    }
    let written = copies
        .iter()
        .filter_map(|(w, _)| w.copy.parent().map(|p| (&w.copy, p)))
        .try_for_each(|(copy, parent)| {
            std::fs::create_dir_all(parent).map_err(|e| (copy.clone(), e))
        })
        .and_then(|()| crate::output::write_all_atomically(&files));
    if let Err((path, source)) = written {
        render::error(Report::new(OutputError::Unwritable { path, source }));
        return exit::INPUT;
    }
    let mut stderr = std::io::stderr().lock();
    let plans: Vec<(String, &kwb_instrument::Plan)> = own_plan
        .iter()
        .map(|p| (args.output.display().to_string(), p))
        .chain(
            copies
                .iter()
                .map(|(w, _)| (w.copy.display().to_string(), &w.plan)),
        )
        .collect();
    if args.json && json(&mut std::io::stdout().lock(), &plans).is_err() {
        return exit::INTERNAL;
    }
    for (path, plan) in &plans {
        list(&mut stderr, plan, Some(path));
    }
    if own_plan.is_none() {
        let _ = writeln!(
            stderr,
            "note: {} itself has nothing to probe; it was copied unchanged to {}",
            args.file.display(),
            args.output.display()
        );
    }
    let _ = writeln!(
        stderr,
        "wrote {} and {} overlay header(s) under {}: build with -I {} first on the include path and -DKWB_TRACE to record a trace",
        args.output.display(),
        copies.len(),
        dir.display(),
        dir.display()
    );
    if args.summarizes() {
        let sites = plans.iter().map(|(_, p)| p.probes.len()).sum();
        let _ = writeln!(stderr, "{}", summary_note(sites, args.screen));
    }
    exit::OK
}

/// What a `--summary` (or `--screen`) build keeps, and the table it sizes for `sites`
/// site ids.
fn summary_note(sites: usize, screen: bool) -> String {
    // Cells of sites x K-tile rows x stripes (the header's defaults).
    let (rows, stripes) = if screen {
        (1, kwb_runtime::DEFAULT_SCREEN_STRIPES)
    } else {
        (
            kwb_runtime::DEFAULT_SUMMARY_K_TILES,
            kwb_runtime::DEFAULT_SUMMARY_STRIPES,
        )
    };
    let cells = sites.max(1) as u64 * u64::from(rows) * u64::from(stripes);
    let mib = (cells * u64::from(kwb_runtime::SUMMARY_CELL_SIZE)) as f64 / (1024.0 * 1024.0);
    let what = if screen {
        "screen: every CTA's probe calls fold into one row per site, every K tile in it, each warp into a cell of its own"
    } else {
        "summary: every CTA's probe calls fold into one table per site and K tile"
    };
    format!(
        "{what} (absmax, NaN/Inf counts, the CTA of the peak and of the first NaN/Inf), {} site rows ({mib:.0} MiB of device memory); `kwb trace show` prints it",
        sites.max(1)
    )
}

/// `{"files": [{"path", "probes": [{"id", "kernel", "what", "line", "text"}],
/// "notes"}]}`: every file written with its probes.
fn json(out: &mut impl Write, files: &[(String, &kwb_instrument::Plan)]) -> std::io::Result<()> {
    let files: Vec<serde_json::Value> = files
        .iter()
        .map(|(path, plan)| {
            serde_json::json!({
                "path": path,
                "probes": plan.probes.iter().map(|p| serde_json::json!({
                    "id": p.id,
                    "kernel": p.kernel,
                    "what": p.what,
                    "line": p.line,
                    "text": p.text,
                })).collect::<Vec<_>>(),
                "notes": plan.notes,
            })
        })
        .collect();
    serde_json::to_writer_pretty(&mut *out, &serde_json::json!({ "files": files }))
        .map_err(std::io::Error::other)?;
    writeln!(out)
}

/// One line per probe of `plan` (naming the file it went into, when given), then its
/// notes.
fn list(out: &mut impl Write, plan: &kwb_instrument::Plan, file: Option<&str>) {
    let place = file.map_or(String::new(), |f| format!(" [{f}]"));
    for probe in &plan.probes {
        let _ = writeln!(
            out,
            "probe {}: {} in `{}` (line {}){place}",
            probe.id, probe.what, probe.kernel, probe.line
        );
    }
    for note in &plan.notes {
        let _ = writeln!(out, "note: {note}");
    }
}

/// Whether two paths name the same file (by canonical path when the output exists).
/// Writes `text` to a temporary file beside `path`, then renames it into place, so a
/// failure never leaves a half-written output.
fn write_atomically(path: &Path, text: &str) -> Result<(), OutputError> {
    crate::output::write_atomically(path, text.as_bytes()).map_err(|source| {
        OutputError::Unwritable {
            path: path.to_owned(),
            source,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::summary_note;

    #[test]
    fn a_summary_note_says_how_big_its_table_is() {
        assert!(
            summary_note(5, false).contains("5 site rows (5 MiB"),
            "{}",
            summary_note(5, false)
        );
        assert!(
            summary_note(91, false).contains("91 site rows (91 MiB"),
            "{}",
            summary_note(91, false)
        );
        // A screen: one row per site, 8192 cells of 64 bytes each: 0.5 MiB a site.
        let screen = summary_note(8, true);
        assert!(
            screen.starts_with("screen: ") && screen.contains("8 site rows (4 MiB"),
            "{screen}"
        );
    }
}
