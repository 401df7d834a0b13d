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
//! Exit 0 when a VERDICT or a DRAFT was reached, 7 when no GPU was there for the
//! ladder, no trace was given and the source shows no wrong map (nothing to conclude
//! from; every step that needs no GPU ran), 2 for bad input, 3 when FILE has no such
//! kernel.

use std::io::Write;
use std::path::{Path, PathBuf};

use kwb_diagnose::{
    DescriptorIssue, Diagnosis, EncodedMap, Evidence, MmaSwizzle, OnesRun, OutputCheck,
    RungOutcome, RungState, Swizzle, check_descriptors, judge_ladder, judge_ones, nan_origin,
    reconcile, sites_of, with_descriptors,
};
use kwb_gpu::{GpuError, MapReading, Report};
use miette::Report as Problem;

use crate::commands::{extract, run};
use crate::error::CliError;
use crate::{exit, render};

#[derive(clap::Args)]
#[command(group(clap::ArgGroup::new("what").required(true).args(["kernel", "template"])))]
pub struct Args {
    #[command(flatten)]
    target: extract::Target,
    #[command(flatten)]
    ladder: run::LadderArgs,
    /// A trace of the kernel recorded on all-ones inputs at --shape (a build made
    /// with kwb-instrument or kwb-nvcc, run with KWB_TRACE_OUT)
    #[arg(long, value_name = "TRACE")]
    trace: Option<PathBuf>,
    /// The shape the trace was recorded at, when it is not --shape (a production run
    /// at its own shape, the reproducer at another); its ones output is then taken as
    /// unchecked unless the shapes agree
    #[arg(long, value_name = "M,N,K", value_parser = crate::commands::ladder::parse_shape, requires = "trace")]
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
}

/// The shape the ladder runs at when --shape is not given.
const DEFAULT_SHAPE: (usize, usize, usize) = (256, 384, 1024);

pub fn run(args: Args) -> i32 {
    // The trace first: a bad one is bad input, found before any build.
    let mut trace = match &args.trace {
        None => None,
        Some(path) => match read_trace(path) {
            Ok(t) => Some(t),
            Err(code) => return code,
        },
    };
    let full = match &args.full_trace {
        None => None,
        Some(path) => match (read_trace(path), read_operands(&args.operands)) {
            (Ok(t), Ok(ab)) => Some((t, ab)),
            (Err(code), _) | (_, Err(code)) => return code,
        },
    };
    if let Some(gate) = &args.gate {
        let traces = [
            args.trace.as_deref().zip(trace.as_ref()),
            args.full_trace
                .as_deref()
                .zip(full.as_ref().map(|(t, _)| t)),
        ];
        for (path, t) in traces.into_iter().flatten() {
            if let Err(why) = pinned(t, gate) {
                render::error(Problem::msg(format!("{}: {why}", path.display())));
                return exit::INPUT;
            }
        }
    }
    let temp;
    let repro_dir = match &args.report {
        Some(dir) => dir.join("repro"),
        None => match tempfile::tempdir() {
            Ok(t) => {
                temp = t;
                temp.path().to_path_buf()
            }
            Err(source) => {
                render::error(Problem::new(CliError::Unwritable {
                    path: std::env::temp_dir(),
                    source,
                }));
                return exit::INPUT;
            }
        },
    };
    let extraction = match extract::extract_to(&args.target, &repro_dir) {
        Ok(x) => x,
        Err(code) => return code,
    };
    let shape = args.ladder.shape.unwrap_or(DEFAULT_SHAPE);
    let spinner = crate::progress::Spinner::new();
    let options = match run::run_options(&args.ladder, shape, spinner.progress()) {
        Ok(o) => o,
        Err(code) => return code,
    };
    let result = kwb_gpu::run(&repro_dir, &options);
    spinner.finish();
    let mut not_run = Vec::new();
    let report = match result {
        Ok(r) => Some(r),
        Err(e @ (GpuError::NoDriver { .. } | GpuError::Worker(_))) => {
            not_run.push(format!(
                "the ladder: {e}. Everything before the launch ran (extraction, the nvcc build, every rung's inputs and answers); on a GPU the ladder adds each rung's outcome and error pattern, which is what a verdict without a trace rests on"
            ));
            None
        }
        Err(e) => {
            let code = match e {
                GpuError::Io { .. } => exit::INTERNAL,
                _ => exit::INPUT,
            };
            render::error(Problem::new(e));
            return code;
        }
    };
    if let Some(why) = report.as_ref().and_then(|r| r.failed.as_ref()) {
        not_run.push(format!("the ladder: {why}"));
    }
    let rungs: Vec<RungOutcome> = report.as_ref().map(outcomes).unwrap_or_default();
    let ladder = (!rungs.is_empty()).then(|| judge_ladder(&rungs));
    // No trace given: kwb records the ones trace of the reproducer itself (without a
    // GPU it builds the traced reproducer and says what the GPU run would add).
    let mut recorded = None;
    let no_driver = !not_run.is_empty() && report.is_none();
    if trace.is_none() && full.is_none() && !args.no_trace && (report.is_some() || no_driver) {
        match record_ones(&args, &repro_dir, &extraction, &options) {
            Ok(path) => match read_trace(&path) {
                // An empty trace clears nothing: it is no evidence of a right stage.
                Ok(t) if t.records.is_empty() => not_run.push(format!(
                    "the trace: kwb recorded one ({}) but it holds no record: no probe ran in CTA (0, 0, 0) of the traced reproducer (`kwb trace show` lists its sites); trace the kernel in your own build and give it with --trace",
                    path.display()
                )),
                Ok(t) => {
                    trace = Some(t);
                    recorded = Some(path);
                }
                Err(code) => return code,
            },
            Err(why) => not_run.push(format!("the trace: {why}")),
        }
    }
    let built_traced = no_driver && !args.no_trace && trace.is_none() && full.is_none();
    let trace_shape = args.trace_shape.unwrap_or(shape);
    let traced = trace.as_ref().map(|t| {
        // The ladder's ones rung checks the traced run's output only at its shape.
        let ones = rungs
            .iter()
            .find(|r| r.rung == "ones")
            .filter(|_| trace_shape == shape);
        judge_ones(t, &ones_run(trace_shape, ones))
    });
    // The full trace's output is checked by the user's harness, not here: kwb has no
    // rung with those inputs.
    let full_finding = full.as_ref().map(|(t, (a, b))| {
        kwb_diagnose::judge_structured(
            t,
            a,
            b,
            &kwb_diagnose::StructuredRun {
                input: "the full trace's inputs".to_owned(),
                output: None,
            },
        )
    });
    if trace.is_none() && full.is_none() && (args.no_trace || (report.is_none() && !built_traced)) {
        not_run.push(
            "the trace: no --trace given (kwb-instrument the kernel, build with -DKWB_TRACE, run it on all-ones with KWB_TRACE_OUT=trace.bin; on a GPU without --no-trace kwb records it itself); a trace is what isolates a stage".to_owned(),
        );
    }
    let mut descriptors = descriptor_issues(&extraction);
    if let Some(r) = &report {
        let received = received_issues(&r.maps, &descriptors);
        descriptors.extend(received);
        // The source was read by the extraction; unreadable now means no expectation.
        let source = std::fs::read_to_string(&args.target.file).unwrap_or_default();
        descriptors.extend(swizzle_issues(
            &r.maps,
            kwb_diagnose::mma_swizzle(&source).as_ref(),
        ));
    }
    let combined = kwb_diagnose::combine_traces(traced.clone(), full_finding.clone());
    let verdict = with_descriptors(reconcile(combined.as_ref(), ladder.as_ref()), &descriptors);
    // The stage's probe sites in either trace, once each.
    let mut sites = Vec::new();
    if let Some(stage) = verdict.stage {
        for t in trace.iter().chain(full.as_ref().map(|(t, _)| t)) {
            for site in sites_of(t, stage) {
                if !sites.contains(&site) {
                    sites.push(site);
                }
            }
        }
    }
    let mut evidence = Vec::new();
    if let Some(f) = traced {
        evidence.push(Evidence {
            track: "trace",
            finding: f,
        });
    }
    if let Some(f) = full_finding {
        evidence.push(Evidence {
            track: "full trace",
            finding: f,
        });
    }
    if let Some(f) = ladder {
        evidence.push(Evidence {
            track: "ladder",
            finding: f,
        });
    }
    // Without --report the reproducer lives in a temporary folder that is gone when
    // kwb exits.
    let kept = match &args.report {
        Some(_) => repro_dir.display().to_string(),
        None => "DIR/repro (rerun with --report DIR to keep the reproducer)".to_owned(),
    };
    let mut reproduce = format!(
        "kwb run {kept} --shape {},{},{} --ladder {}",
        shape.0,
        shape.1,
        shape.2,
        args.ladder
            .ladder
            .iter()
            .map(|r| r.name())
            .collect::<Vec<_>>()
            .join(",")
    );
    if let Some(path) = &recorded
        && args.report.is_some()
    {
        reproduce.push_str(&format!(
            "\nkwb trace show {}   # the ones trace kwb recorded (CTA 0,0,0)",
            path.display()
        ));
    }
    let d = Diagnosis {
        instantiation: extraction.instantiation.clone(),
        source: args.target.file.display().to_string(),
        verdict,
        evidence,
        rungs,
        sites,
        nan_origin: trace
            .as_ref()
            .and_then(nan_origin)
            .or_else(|| full.as_ref().and_then(|(t, _)| nan_origin(t))),
        descriptors,
        maps: report
            .as_ref()
            .map(|r| r.maps.iter().map(super::run::map_line).collect())
            .unwrap_or_default(),
        not_run,
        reproduce,
    };
    if let Some(dir) = &args.report
        && let Err(code) = write_report(dir, &d, report.as_ref())
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
            .and_then(|()| out.write_all(snippets(&d, &args.target.file).as_bytes()))
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

/// Records the trace a user would bring: the reproducer's kernel instrumented (every
/// default probe, CTA (0, 0, 0)), built with `-DKWB_TRACE` beside the plain one and run
/// on all-ones at the ladder's shape. The trace's path, or why there is none.
fn record_ones(
    args: &Args,
    repro_dir: &Path,
    extraction: &kwb_extract::Extraction,
    options: &kwb_gpu::RunOptions,
) -> Result<PathBuf, String> {
    if extraction.host.tasks.is_some() {
        return Err("not recorded: a megakernel task's reproducer runs the whole megakernel; give a trace of it with --trace (kwb-instrument --gate on the task's instantiation)".to_owned());
    }
    if extraction.kernel.line == 0 {
        return Err(format!(
            "not recorded: `{}` is a library kernel whose mainloop lives in its headers (kwb-instrument --overlay DIR -I <library> traces it; give the trace with --trace)",
            extraction.kernel.name
        ));
    }
    let (dir, out) = match &args.report {
        Some(report) => (report.join("repro-traced"), report.join("trace-ones.bin")),
        None => (repro_dir.join("traced"), repro_dir.join("trace-ones.bin")),
    };
    let request = kwb_gpu::traced::TraceRequest {
        kernel: extraction.kernel.name.clone(),
        cta: [0, 0, 0],
        full_tile: false,
        rung: kwb_ladder::Rung::Ones,
        dir,
        out,
    };
    let spinner = crate::progress::Spinner::new();
    let mut traced_options = options.clone();
    traced_options.progress = spinner.progress();
    let dir = request.dir.clone();
    let recorded = kwb_gpu::traced::record(repro_dir, &request, &traced_options);
    spinner.finish();
    match recorded {
        Ok(r) => Ok(r.trace),
        // No GPU: everything before the launch ran, the traced build included.
        Err(GpuError::NoDriver { .. } | GpuError::Worker(_)) => Err(format!(
            "kwb built the traced reproducer ({}: `{}` instrumented for CTA (0, 0, 0)); on a GPU it records that CTA on all-ones and judges the trace with the ladder, which is what isolates a stage",
            dir.display(),
            extraction.kernel.name
        )),
        Err(e) => Err(format!("kwb could not record it: {e}")),
    }
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

/// The static descriptor check of every map the launcher encodes: its encoder's call
/// matched to the descriptor construction in the function it calls.
fn descriptor_issues(x: &kwb_extract::Extraction) -> Vec<DescriptorIssue> {
    let maps: Vec<EncodedMap<'_>> = x
        .host
        .encoders
        .iter()
        .filter_map(|e| {
            let callee = e.call.split('(').next()?.trim();
            let callee = callee.rsplit("::").next().unwrap_or(callee);
            let d = x.descriptors.iter().find(|d| {
                let name = d.function.split('<').next().unwrap_or(&d.function);
                name.rsplit("::").next().unwrap_or(name) == callee
            })?;
            Some(EncodedMap {
                param: &e.param,
                call: &e.call,
                line: d.line,
                function_params: &d.function_params,
                dims: &d.global_dims.values,
                strides: &d.global_strides.values,
            })
        })
        .collect();
    let launcher: Vec<(&str, &str)> = x
        .host
        .launcher
        .iter()
        .map(|p| (p.name.as_str(), p.role.as_str()))
        .collect();
    check_descriptors(&maps, &launcher)
}

/// The dynamic descriptor check: each difference of a map the kernel received that
/// covers A or B (or points at none of the run's buffers) from its operand's canonical
/// map, unless the static check already names that map's field.
fn received_issues(maps: &[MapReading], statics: &[DescriptorIssue]) -> Vec<DescriptorIssue> {
    let mut out = Vec::new();
    for map in maps {
        let operand = match map.covers.as_deref() {
            Some(role @ ("A" | "B")) => role,
            Some(_) => continue,
            None => "none",
        };
        for diff in &map.diffs {
            // `strides[0]` is the static check's `strides`.
            let field = diff.field.split('[').next().unwrap_or(diff.field);
            if statics
                .iter()
                .any(|s| s.param == map.param && s.field == field)
            {
                continue;
            }
            out.push(DescriptorIssue::received(&map.param, operand, diff));
        }
    }
    out
}

/// A received map of A or B whose swizzle is not the one the source's MMA reads
/// shared memory with: the tile is written one way and read another.
fn swizzle_issues(maps: &[MapReading], mma: Option<&MmaSwizzle>) -> Vec<DescriptorIssue> {
    let Some(mma) = mma else {
        return Vec::new();
    };
    // Swizzles that permute within the same span read a tile the same way here.
    let name = |s: Swizzle| match s.span() {
        None => "none".to_owned(),
        Some(bytes) => format!("{bytes}B"),
    };
    maps.iter()
        .filter_map(|map| {
            let operand = map.covers.as_deref().filter(|r| matches!(*r, "A" | "B"))?;
            let got = map.decoded.as_ref()?.swizzle;
            (name(got) != name(mma.swizzle)).then(|| DescriptorIssue {
                param: map.param.clone(),
                operand: operand.to_owned(),
                line: None,
                field: "swizzle",
                found: name(got),
                expected: format!(
                    "the MMA reads shared memory {}-swizzled (line {}: `{}`): a tile written one way and read another permutes the 16-byte chunks of each row",
                    name(mma.swizzle),
                    mma.line,
                    mma.text
                ),
            })
        })
        .collect()
}

/// Whether every record of values in `trace` was recorded under `gate` (carries its
/// tag). Tile contexts hold no values and are never gated: they do not count.
fn pinned(trace: &kwb_runtime::Trace, gate: &str) -> Result<(), String> {
    let want = kwb_runtime::tag(gate);
    let values = || {
        trace
            .records
            .iter()
            .filter(|r| r.kind() != Some(kwb_runtime::Kind::TileContext))
    };
    let total = values().count();
    if total == 0 {
        return Err("the trace holds no record".to_owned());
    }
    let foreign: Vec<u32> = values().map(|r| r.tag).filter(|t| *t != want).collect();
    let Some(first) = foreign.first() else {
        return Ok(());
    };
    let what = if *first == kwb_runtime::tag(kwb_runtime::UNGATED) {
        "recorded without a gate, in every instantiation".to_owned()
    } else {
        format!("recorded under another gate (tag {first:#010x})")
    };
    Err(format!(
        "{} of {total} records were not recorded with --gate '{gate}' ({what}): instrument the kernel with kwb-instrument --gate '{gate}' so the trace holds that instantiation alone",
        foreign.len()
    ))
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

/// The ladder's rungs as kwb-diagnose reads them.
fn outcomes(report: &Report) -> Vec<RungOutcome> {
    report
        .rungs
        .iter()
        .filter(|r| r.status != "not-run")
        .map(|r| RungOutcome {
            rung: r.rung.clone(),
            state: match r.status {
                "pass" => RungState::Pass,
                "fail" => RungState::Fail,
                "hang" => RungState::Hang,
                _ => RungState::Error,
            },
            ratio: r.comparison.as_ref().map_or(f64::NAN, |c| c.ratio),
            mismatches: r.comparison.as_ref().map_or(0, |c| c.mismatches),
            non_finite: r.comparison.as_ref().map_or(0, |c| c.nan + c.inf),
            pattern: r.pattern.clone(),
        })
        .collect()
}

/// The traced run at `shape`, its output checked by the ladder's ones rung (the same
/// instantiation on the same inputs at the same shape) when there is one.
fn ones_run(shape: (usize, usize, usize), ones: Option<&RungOutcome>) -> OnesRun {
    OnesRun {
        m: shape.0 as u64,
        n: shape.1 as u64,
        k: shape.2 as u64,
        output: ones.map(|r| OutputCheck {
            mismatches: r.mismatches as u64,
            nan: r.non_finite as u64,
            inf: 0,
            ratio: r.ratio,
            wrong_tiles: r.pattern.as_ref().map(|p| p.tiles.clone()),
        }),
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

#[cfg(test)]
mod tests {
    use kwb_diagnose::MapDiff;

    use super::*;

    fn reading(param: &str, covers: Option<&str>, diffs: Vec<MapDiff>) -> MapReading {
        MapReading {
            param: param.to_owned(),
            bytes_hex: String::new(),
            decoded: None,
            decode_error: None,
            covers: covers.map(str::to_owned),
            diffs,
        }
    }

    #[test]
    fn a_trace_is_pinned_when_every_record_carries_the_gates_tag() {
        let gate = "REDUCTION_SIZE == 6144";
        let mut record = kwb_runtime::TraceRecord::from_le_bytes(&[0; kwb_runtime::RECORD_SIZE]);
        record.tag = kwb_runtime::tag(gate);
        let mut t = kwb_runtime::Trace {
            records: vec![record, record],
            ..kwb_runtime::Trace::default()
        };
        assert_eq!(pinned(&t, gate), Ok(()));
        // A tile context is never gated, and holds no values.
        let mut context = record;
        context.kind = kwb_runtime::Kind::TileContext as u32;
        context.tag = kwb_runtime::tag(kwb_runtime::UNGATED);
        t.records.push(context);
        assert_eq!(pinned(&t, gate), Ok(()));
        t.records.pop();
        t.records[1].tag = kwb_runtime::tag("REDUCTION_SIZE == 1024");
        let why = pinned(&t, gate).unwrap_err();
        assert!(why.starts_with("1 of 2 records"), "{why}");
        assert!(why.contains("another gate"), "{why}");
        t.records.clear();
        assert!(pinned(&t, gate).is_err());
    }

    fn with_swizzle(param: &str, covers: &str, swizzle: Swizzle) -> MapReading {
        MapReading {
            decoded: Some(kwb_diagnose::TensorMapFields {
                address: 0x7f00_0000_0000,
                rank: 2,
                dtype: kwb_diagnose::MapDtype::Bf16,
                dims: vec![1024, 256],
                strides: vec![2048],
                box_dim: vec![64, 128],
                element_strides: vec![1, 1],
                interleave: 0,
                swizzle,
                l2_promotion: 0,
                oob_nan: false,
                im2col: false,
                box_bytes: 16384,
                large: false,
            }),
            ..reading(param, Some(covers), Vec::new())
        }
    }

    #[test]
    fn a_received_map_swizzled_otherwise_than_the_mma_reads_is_a_descriptor_issue() {
        let mma = kwb_diagnose::mma_swizzle("  desc |= uint64_t(1) << 62;").unwrap();
        let maps = [
            with_swizzle("tmap_a", "A", Swizzle::None),
            with_swizzle("tmap_b", "B", Swizzle::B128),
            with_swizzle("tmap_d", "D", Swizzle::None),
        ];
        let issues = swizzle_issues(&maps, Some(&mma));
        assert_eq!(issues.len(), 1, "{issues:?}");
        assert_eq!(
            issues[0].describe(),
            "`tmap_a` (operand A): the map the kernel received has swizzle {none} where the MMA reads shared memory 128B-swizzled (line 1: `desc |= uint64_t(1) << 62;`): a tile written one way and read another permutes the 16-byte chunks of each row"
        );
        // No expectation from the source: nothing said.
        assert!(swizzle_issues(&maps, None).is_empty());
    }

    fn pitch() -> MapDiff {
        MapDiff {
            field: "strides[0]",
            got: "2048".to_owned(),
            expected: "2176".to_owned(),
            why: "the pitch is 1024 elements where 1088 are expected".to_owned(),
        }
    }

    #[test]
    fn a_received_map_s_diff_on_an_operand_is_a_descriptor_issue_once() {
        let maps = [
            reading("tmap_a", Some("A"), vec![pitch()]),
            reading("tmap_d", Some("D"), vec![pitch()]),
        ];
        let issues = received_issues(&maps, &[]);
        assert_eq!(issues.len(), 1, "{issues:?}");
        assert_eq!(
            (issues[0].param.as_str(), issues[0].operand.as_str()),
            ("tmap_a", "A")
        );
        assert!(
            issues[0]
                .describe()
                .contains("strides[0] {2048} where A's rows are 2176 bytes apart"),
            "{}",
            issues[0].describe()
        );
        // The static check already names tmap_a's strides: not said twice.
        let from_source = DescriptorIssue {
            param: "tmap_a".to_owned(),
            operand: "A".to_owned(),
            line: Some(297),
            field: "strides",
            found: "K * 2".to_owned(),
            expected: "lda * sizeof(element)".to_owned(),
        };
        assert!(received_issues(&maps, &[from_source]).is_empty());
        // A map in none of the buffers is an issue of no operand.
        let stray = MapDiff {
            field: "address",
            got: "0x8".to_owned(),
            expected: "an address in one of the run's buffers".to_owned(),
            why: "the map points at none of the run's buffers".to_owned(),
        };
        let issues = received_issues(&[reading("tmap_b", None, vec![stray])], &[]);
        assert_eq!(issues[0].operand, "none");
    }
}
