//! `kwb diagnose FILE (--kernel NAME | --template SPEC)`: the stage verdict.
//!
//! Track B: the instantiation is extracted (kwb-extract's arguments) and run on the
//! controlled-input ladder (kwb run's), and each failing rung's error is classified.
//! Track A: a trace the user recorded on all-ones at `--shape` (`--trace`) is judged by
//! the closed forms of uniform inputs, its output checked by the ladder's ones rung.
//! kwb-diagnose reconciles the two into a VERDICT or a DRAFT. `--report DIR` writes
//! report.md, report.json, the reproducer (DIR/repro) and a heat map (PNG and SVG) of
//! each failing rung; FILE is only read.
//!
//! The TMA maps the launcher encodes are checked against their operands' canonical
//! maps from the source alone (kwb-diagnose's static descriptor check), and, where the
//! ladder ran, the maps the kernel received as well (kwb run's decoded maps).
//!
//! `kwb diagnose --kernel K -- CMD ARGS…` runs the ladder inside the user's own program
//! instead (kwb-pipeline's `insitu`): CMD builds the kernel through kwb-nvcc, which
//! rewrites its launches, and at the launch chosen (`--launch N`) the program runs the
//! rungs on kwb's inputs, puts its buffers back and goes on.
//!
//! Exit 0 when a VERDICT or a DRAFT was reached, 7 when no GPU was there for the
//! ladder, no trace was given and the source shows no wrong map (nothing to conclude
//! from; every step that needs no GPU ran), 2 for bad input, 3 when FILE has no such
//! kernel.

use std::io::Write;
use std::path::{Path, PathBuf};

use kwb_diagnose::Diagnosis;
use kwb_gpu::{GpuError, Report};
use kwb_pipeline::{FullTrace, Given, Job};
use miette::Report as Problem;

use crate::error::CliError;
use crate::ladder_args::{LadderArgs, parse_shape, run_options};
use crate::reproducer::{Target, extract_to};
use crate::{exit, render};

#[derive(clap::Args)]
#[command(group(clap::ArgGroup::new("what").required(true).args(["kernel", "template"])))]
pub struct Args {
    #[command(flatten)]
    target: Target,
    #[command(flatten)]
    ladder: LadderArgs,
    /// A trace of the kernel recorded on all-ones inputs at --shape (a build made
    /// with kwb-instrument or kwb-nvcc, run with KWB_TRACE_OUT)
    #[arg(long, value_name = "TRACE")]
    trace: Option<PathBuf>,
    /// The shape the trace was recorded at, when it is not --shape (a production run
    /// at its own shape, the reproducer at another); its ones output is then taken as
    /// unchecked unless the shapes agree
    #[arg(long, value_name = "M,N,K", value_parser = parse_shape, requires = "trace")]
    trace_shape: Option<(usize, usize, usize)>,
    /// A full trace (kwb-instrument --full-tile --cta X,Y,Z) recorded on integer
    /// inputs (the harness's wide_int, or any whose runs of 8 values are unique), read
    /// against the operands that run uploaded (--operands)
    #[arg(long, value_name = "TRACE", requires = "operands")]
    full_trace: Option<PathBuf>,
    /// The operands of the --full-trace run as .npy files: A (M x K) and B (N x K)
    #[arg(
        long,
        value_name = "A.npy,B.npy",
        value_delimiter = ',',
        requires = "full_trace"
    )]
    operands: Vec<PathBuf>,
    /// The ladder alone: where no trace is given, kwb records none (by default, on a
    /// GPU, it instruments the reproducer's kernel, builds it traced and records CTA
    /// (0, 0, 0) on all-ones itself)
    #[arg(long, conflicts_with_all = ["trace", "full_trace"])]
    no_trace: bool,
    /// The gate the traces were recorded with (kwb-instrument --gate, e.g.
    /// 'REDUCTION_SIZE == 6144'): every record must carry its tag, so the trace holds
    /// that instantiation alone and cannot mix layers
    #[arg(long, value_name = "EXPR")]
    gate: Option<String>,
    /// A folder for report.md, report.json, the reproducer and the heat maps
    #[arg(long, value_name = "DIR")]
    report: Option<PathBuf>,
    /// Print the diagnosis as JSON (the schema of report.json)
    #[arg(long)]
    json: bool,
    /// Run the ladder inside this program instead (everything after `--`): a kernel
    /// that cannot be taken out, e.g. `-- python -m pytest tests/test_linear.py`. Its
    /// CUDA builds go through kwb-nvcc (PYTORCH_NVCC, nvcc on PATH,
    /// CMAKE_CUDA_COMPILER_LAUNCHER), and at the kernel's launch the program runs the
    /// rungs on kwb's inputs, puts its buffers back and goes on. No FILE is needed
    #[arg(last = true, value_name = "CMD")]
    command: Vec<String>,
    /// With `-- CMD`: which launch of the kernel the program makes is run on the
    /// ladder, counting from 1
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..))]
    launch: u64,
    /// With `-- CMD`: seconds the program may take in all, its builds included
    #[arg(long, value_name = "SECONDS", default_value_t = 1800.0)]
    program_timeout: f64,
}

/// The shape the ladder runs at when --shape is not given.
const DEFAULT_SHAPE: (usize, usize, usize) = (256, 384, 1024);

pub fn run(args: Args) -> i32 {
    if !args.command.is_empty() {
        return in_situ(&args);
    }
    // The traces first: a bad one is bad input, found before any build.
    let ones = match &args.trace {
        None => None,
        Some(path) => match read_trace(path) {
            Ok(t) => Some(t),
            Err(code) => return code,
        },
    };
    let full = match &args.full_trace {
        None => None,
        Some(path) => match (read_trace(path), read_operands(&args.operands)) {
            (Ok(trace), Ok((a, b))) => Some(FullTrace { trace, a, b }),
            (Err(code), _) | (_, Err(code)) => return code,
        },
    };
    if let Some(gate) = &args.gate {
        let traces = [
            args.trace.as_deref().zip(ones.as_ref()),
            args.full_trace
                .as_deref()
                .zip(full.as_ref().map(|f| &f.trace)),
        ];
        for (path, t) in traces.into_iter().flatten() {
            if let Err(why) = kwb_pipeline::checks::pinned(t, gate) {
                render::error(Problem::msg(format!("{}: {why}", path.display())));
                return exit::INPUT;
            }
        }
    }
    let mut temp = None;
    let repro_dir = match folder(args.report.as_deref(), "repro", &mut temp) {
        Ok(d) => d,
        Err(code) => return code,
    };
    let extraction = match extract_to(&args.target, &repro_dir) {
        Ok(x) => x,
        Err(code) => return code,
    };
    let shape = args.ladder.shape.unwrap_or(DEFAULT_SHAPE);
    let spinner = crate::progress::Spinner::new();
    let options = match run_options(&args.ladder, shape, spinner.progress()) {
        Ok(o) => o,
        Err(code) => return code,
    };
    // The traced copies and the traces kwb records: beside the reproducer in a
    // report folder, else in the temporary one.
    let work = args.report.clone().unwrap_or_else(|| repro_dir.clone());
    let Some(file) = args.target.file.as_deref() else {
        return exit::INPUT; // extract_to has said so
    };
    let job = Job {
        source: file,
        extraction: &extraction,
        repro: &repro_dir,
        work: &work,
        kept: args.report.is_some(),
        options: &options,
        shape,
        given: Given {
            ones,
            ones_shape: args.trace_shape,
            full,
        },
        record: !args.no_trace,
    };
    let result = kwb_pipeline::diagnose(job);
    spinner.finish();
    let outcome = match result {
        Ok(o) => o,
        Err(e) => {
            let code = match e {
                GpuError::Io { .. } => exit::INTERNAL,
                _ => exit::INPUT,
            };
            render::error(Problem::new(e));
            return code;
        }
    };
    let d = outcome.diagnosis;
    if let Some(dir) = &args.report
        && let Err(code) = write_report(dir, &d, outcome.report.as_ref())
    {
        return code;
    }
    let mut out = std::io::stdout().lock();
    let written = if args.json {
        serde_json::to_writer_pretty(&mut out, &d)
            .map_err(std::io::Error::other)
            .and_then(|()| writeln!(out))
    } else {
        out.write_all(kwb_diagnose::terminal(&d).as_bytes())
            .and_then(|()| out.write_all(snippets(&d, file).as_bytes()))
    };
    if written.is_err() {
        return exit::INTERNAL;
    }
    if d.evidence.is_empty() && d.descriptors.is_empty() {
        exit::NO_GPU
    } else {
        exit::OK
    }
}

/// `REPORT/NAME`, or a temporary folder kept alive in `temp`; a failure is rendered.
fn folder(
    report: Option<&Path>,
    name: &str,
    temp: &mut Option<tempfile::TempDir>,
) -> Result<PathBuf, i32> {
    if let Some(dir) = report {
        return Ok(dir.join(name));
    }
    match tempfile::Builder::new()
        .prefix(&format!("kwb-{name}-"))
        .tempdir()
    {
        Ok(t) => Ok(temp.insert(t).path().to_path_buf()),
        Err(source) => {
            render::error(Problem::new(CliError::Unwritable {
                path: std::env::temp_dir(),
                source,
            }));
            Err(exit::INPUT)
        }
    }
}

/// `-- CMD`: the ladder inside the user's program.
fn in_situ(args: &Args) -> i32 {
    let bad = |why: String| {
        render::error(Problem::msg(why));
        exit::INPUT
    };
    let Some(kernel) = args.target.kernel_name() else {
        return bad("name the kernel with --kernel".to_owned());
    };
    if args.trace.is_some() || args.full_trace.is_some() {
        return bad("--trace and --full-trace are for a kernel taken out; with `-- CMD` kwb runs the ladder in the program".to_owned());
    }
    let mut layout = Vec::new();
    for part in args
        .target
        .layout()
        .unwrap_or_default()
        .split(',')
        .filter(|p| !p.trim().is_empty())
    {
        let role = match part.split_once('=').map(|(r, v)| (r.trim(), v.trim())) {
            Some(("A", v @ ("mk" | "km"))) => (kwb_gpu::plan::Role::A, v),
            Some(("B", v @ ("nk" | "kn"))) => (kwb_gpu::plan::Role::B, v),
            Some(("C", v @ ("mn" | "nm"))) => (kwb_gpu::plan::Role::C, v),
            Some(("D", v @ ("mn" | "nm"))) => (kwb_gpu::plan::Role::D, v),
            _ => {
                return bad(format!(
                    "--layout: `{part}` is none of A=mk|km, B=nk|kn, C=mn|nm, D=mn|nm"
                ));
            }
        };
        layout.push((role.0, role.1.to_owned()));
    }
    let mut roles = Vec::new();
    for (b, given) in args.target.bindings().into_iter().enumerate() {
        match given {
            Some(pair) => roles.push(pair),
            None => {
                return bad(format!(
                    "--bind {}: write it as PARAMETER=ROLE (A, B, C, D, bias, M, N, K, lda, ldb, ldc, ldd, alpha, beta)",
                    args.target.bindings_raw()[b]
                ));
            }
        }
    }
    let me = std::env::current_exe().ok();
    let Some(kwb_nvcc) = me
        .as_ref()
        .map(|m| m.with_file_name("kwb-nvcc"))
        .filter(|p| p.is_file())
    else {
        return bad(
            "kwb-nvcc is not beside kwb; install both (cargo install --path crates/cli)".to_owned(),
        );
    };
    let nvcc = match kwb_toolchain::toolchain(&kwb_toolchain::Env::from_process()) {
        Ok(t) => t.nvcc,
        Err(e) => {
            render::error(Problem::new(e).wrap_err(
                "the program's CUDA builds go through kwb-nvcc, which needs the real nvcc",
            ));
            return exit::INPUT;
        }
    };
    let mut temp = None;
    let work = match folder(args.report.as_deref(), "insitu", &mut temp) {
        Ok(d) => d,
        Err(code) => return code,
    };
    let spinner = crate::progress::Spinner::new();
    let job = kwb_pipeline::insitu::InSitu {
        kernel: &kernel,
        command: &args.command,
        work: &work,
        rungs: &args.ladder.ladder,
        request: kwb_gpu::insitu::Request {
            shape: args.ladder.shape,
            layout,
            dtype: args.ladder.dtype,
            roles,
        },
        launch: args.launch as usize,
        rung_timeout: std::time::Duration::from_secs_f64(args.ladder.timeout.max(1.0)),
        timeout: std::time::Duration::from_secs_f64(args.program_timeout.max(1.0)),
        kwb_nvcc,
        nvcc,
        trace: !args.no_trace,
        progress: spinner.progress(),
    };
    let result = kwb_pipeline::insitu::in_situ(job);
    spinner.finish();
    let outcome = match result {
        Ok(o) => o,
        Err(e) => {
            render::error(Problem::new(e));
            return exit::INPUT;
        }
    };
    let d = &outcome.diagnosis;
    if let Some(dir) = &args.report
        && let Err(code) = write_report(dir, d, Some(&outcome.report))
    {
        return code;
    }
    let mut out = std::io::stdout().lock();
    let restored = &outcome.ended.restored;
    let buffers = if outcome.ended.restored_all() {
        format!(
            "the program's buffers: {} put back and read again, each as it was before the rungs",
            restored.len()
        )
    } else {
        format!(
            "the program's buffers: NOT all put back as they were ({} of {} read again as before{})",
            restored.iter().filter(|r| r.2).count(),
            restored.len(),
            outcome
                .ended
                .lost
                .as_deref()
                .map_or(String::new(), |l| format!("; {l}"))
        )
    };
    // Without a report folder the work folder is temporary: the log is kept beside it.
    let log = match &args.report {
        Some(_) => outcome.log.clone(),
        None => {
            let kept = std::env::temp_dir().join(format!("kwb-insitu-{}.log", std::process::id()));
            match std::fs::copy(&outcome.log, &kept) {
                Ok(_) => kept,
                Err(_) => outcome.log.clone(),
            }
        }
    };
    let program = format!(
        "the program: `{}` exited {} (its output: {})",
        args.command.join(" "),
        outcome
            .status
            .map_or("by a signal".to_owned(), |c| c.to_string()),
        log.display()
    );
    let written = if args.json {
        serde_json::to_writer_pretty(&mut out, d)
            .map_err(std::io::Error::other)
            .and_then(|()| writeln!(out))
    } else {
        out.write_all(kwb_diagnose::terminal(d).as_bytes())
            .and_then(|()| writeln!(out, "{buffers}\n{program}"))
    };
    if written.is_err() {
        return exit::INTERNAL;
    }
    exit::OK
}

/// The implicated sites in their source, miette style: one snippet per file that can
/// be read (as the trace names it, else beside FILE); none where it cannot.
fn snippets(d: &Diagnosis, file: &Path) -> String {
    let Some(stage) = d.verdict.stage else {
        return String::new();
    };
    let mut files: Vec<&str> = d.sites.iter().map(|s| s.file.as_str()).collect();
    files.dedup();
    let mut out = String::new();
    for name in files {
        let beside = file
            .parent()
            .map(|dir| dir.join(Path::new(name).file_name().unwrap_or_default()));
        let Some(source) = std::iter::once(PathBuf::from(name))
            .chain(beside)
            .find_map(|p| std::fs::read_to_string(p).ok())
        else {
            continue;
        };
        let marks: Vec<(u32, String)> = d
            .sites
            .iter()
            .filter(|s| s.file == name)
            .map(|s| {
                let anchor: String = s
                    .text
                    .lines()
                    .next()
                    .unwrap_or("")
                    .chars()
                    .take(60)
                    .collect();
                (
                    s.line,
                    format!("{} probe here (its site: `{anchor}`)", s.kind),
                )
            })
            .collect();
        let header = format!("{} {} here", d.verdict.status.as_str(), stage.as_str());
        out.push_str(&render::lines(name, &source, &header, &marks));
    }
    out
}

fn read_trace(path: &Path) -> Result<kwb_runtime::Trace, i32> {
    let bytes = std::fs::read(path).map_err(|source| {
        render::error(Problem::new(CliError::Unreadable {
            path: path.to_path_buf(),
            source,
        }));
        exit::INPUT
    })?;
    kwb_runtime::decode(&bytes).map_err(|e| {
        render::error(Problem::new(e).wrap_err(format!("{} is not a kwb trace", path.display())));
        exit::INPUT
    })
}

/// The operands of a full trace's run, A and B, from .npy files.
fn read_operands(paths: &[PathBuf]) -> Result<(kwb_reconcile::Matrix, kwb_reconcile::Matrix), i32> {
    let read = |path: &PathBuf| -> Result<kwb_reconcile::Matrix, i32> {
        let bytes = std::fs::read(path).map_err(|source| {
            render::error(Problem::new(CliError::Unreadable {
                path: path.clone(),
                source,
            }));
            exit::INPUT
        })?;
        let bad = |why: String| {
            render::error(Problem::msg(format!("{}: {why}", path.display())));
            exit::INPUT
        };
        let (shape, data) = crate::npy::read_f32(&bytes).map_err(|e| bad(e.to_string()))?;
        match shape[..] {
            [rows, cols] => kwb_reconcile::Matrix::new(rows, cols, data)
                .ok_or_else(|| bad("its shape and data disagree".to_owned())),
            _ => Err(bad(format!(
                "an operand is a matrix; this is shape {shape:?}"
            ))),
        }
    };
    match paths {
        [a, b] => Ok((read(a)?, read(b)?)),
        _ => {
            render::error(Problem::msg("--operands takes two files: A.npy,B.npy"));
            Err(exit::INPUT)
        }
    }
}

fn write_report(dir: &Path, d: &Diagnosis, report: Option<&Report>) -> Result<(), i32> {
    let mut files: Vec<(PathBuf, Vec<u8>)> = Vec::new();
    let mut pictures = Vec::new();
    for r in report.map(|r| r.rungs.as_slice()).unwrap_or_default() {
        let Some(heat) = &r.heat else { continue };
        let stem = format!("heat-{}", r.rung.replace(':', "-"));
        let label = r
            .pattern
            .as_ref()
            .map_or(String::new(), |p| format!(": {}", p.pattern.label()));
        let title = format!("{} on {}{label}", d.instantiation, r.rung);
        files.push((
            dir.join(format!("{stem}.png")),
            kwb_diagnose::heat_png(heat, &title),
        ));
        files.push((
            dir.join(format!("{stem}.svg")),
            kwb_diagnose::heat_svg(heat, &title).into_bytes(),
        ));
        pictures.push((r.rung.clone(), format!("{stem}.svg")));
    }
    files.push((
        dir.join("report.md"),
        kwb_diagnose::markdown(d, &pictures).into_bytes(),
    ));
    let json = serde_json::to_vec_pretty(d).unwrap_or_default();
    files.push((dir.join("report.json"), json));
    let refs: Vec<(PathBuf, &Vec<u8>)> = files.iter().map(|(p, b)| (p.clone(), b)).collect();
    std::fs::create_dir_all(dir)
        .and_then(|()| crate::output::write_all_atomically(&refs).map_err(|(_, e)| e))
        .map_err(|source| {
            render::error(Problem::new(CliError::Unwritable {
                path: dir.to_path_buf(),
                source,
            }));
            exit::INPUT
        })
}
