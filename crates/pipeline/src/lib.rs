//! The whole method of `kwb diagnose` as a library, below the CLI: given an extracted
//! reproducer, run the controlled-input ladder; record the reproducer's own traces
//! where none is given (all-ones of one CTA, and a full trace on integer inputs with
//! the operands known); check the TMA maps from the source and as the kernel received
//! them; judge each piece of evidence and reconcile them into a VERDICT or a DRAFT.
//!
//! The CLI reads the user's files and renders; xtask and a test harness can call
//! [`diagnose`] the same way.
//!
//! Invariants: the user's source and the plain reproducer are only read; what kwb
//! writes goes under the job's `work` folder; a step that could not run (no GPU, a
//! kernel kwb cannot trace) is said in the diagnosis's `not_run`, never taken as
//! evidence.

pub mod checks;
pub mod evidence;
pub mod fault;
pub mod insitu;
pub mod record;

use std::path::Path;

use kwb_diagnose::{
    Diagnosis, EpilogueInputs, Evidence, Finding, RungState, StructuredRun, judge_fault,
    judge_ladder, judge_ones, judge_structured, reconcile, with_descriptors, with_fault,
    with_unchecked_maps,
};
use kwb_extract::Extraction;
use kwb_gpu::{GpuError, Report, RunOptions};
use kwb_reconcile::Matrix;
use kwb_runtime::Trace;

use crate::record::{NotRecorded, Pass, Recorded};

/// A GEMM shape: (M, N, K).
pub type Shape = (usize, usize, usize);

/// A full trace the user brought, with the operands its run uploaded.
#[derive(Debug)]
pub struct FullTrace {
    pub trace: Trace,
    /// A (M x K).
    pub a: Matrix,
    /// B (N x K).
    pub b: Matrix,
}

/// Traces recorded elsewhere (a production build), already read and checked.
#[derive(Debug, Default)]
pub struct Given {
    /// Recorded on all-ones.
    pub ones: Option<Trace>,
    /// The shape `ones` was recorded at, when it is not the ladder's.
    pub ones_shape: Option<Shape>,
    pub full: Option<FullTrace>,
}

/// One diagnosis to make.
pub struct Job<'a> {
    /// The user's file, as named (read for the MMA's swizzle; named in the report).
    pub source: &'a Path,
    pub extraction: &'a Extraction,
    /// The plain reproducer's folder (kwb-extract's output).
    pub repro: &'a Path,
    /// Where the traced copies and the traces kwb records go.
    pub work: &'a Path,
    /// Whether `repro` and `work` outlive the call: the reproduce lines name them.
    pub kept: bool,
    /// The ladder's options (its rungs, the shape in its request).
    pub options: &'a RunOptions,
    pub shape: Shape,
    pub given: Given,
    /// Record the reproducer's traces where none is given (`--no-trace` clears it).
    pub record: bool,
}

/// The diagnosis, and the ladder's report (for the heat maps of a report folder).
#[derive(Debug)]
pub struct Outcome {
    pub diagnosis: Diagnosis,
    pub report: Option<Report>,
    /// The traces kwb recorded, in the order ones, full.
    pub recorded: Vec<(Pass, std::path::PathBuf)>,
}

/// Which epilogue inputs the ladder's problem adds: C where beta is not 0 and the
/// plan has a C operand, a bias where it has one. None known without a ladder run.
fn epilogue_inputs(report: Option<&kwb_gpu::Report>) -> EpilogueInputs {
    let Some(plan) = report.map(|r| &r.plan) else {
        return EpilogueInputs::NONE;
    };
    let has = |role| plan.operands.iter().any(|o| o.role == role);
    EpilogueInputs {
        c: plan.beta != 0.0 && has(kwb_gpu::plan::Role::C),
        bias: has(kwb_gpu::plan::Role::Bias),
    }
}

/// The ladder, the traces, the descriptor checks and the reconciled verdict. An error
/// is a step that cannot go on for any reason but a missing GPU (bad manifest, an
/// unwritable folder, a build that fails): the caller reports it.
pub fn diagnose(mut job: Job<'_>) -> Result<Outcome, GpuError> {
    let mut not_run = Vec::new();
    let report = match kwb_gpu::run(job.repro, job.options) {
        Ok(r) => Some(r),
        Err(e @ (GpuError::NoDriver { .. } | GpuError::Worker(_))) => {
            not_run.push(format!(
                "the ladder: {e}. Everything before the launch ran (extraction, the nvcc build, every rung's inputs and answers); on a GPU the ladder adds each rung's outcome and error pattern, which is what a verdict without a trace rests on"
            ));
            None
        }
        Err(e) => return Err(e),
    };
    if let Some(why) = report.as_ref().and_then(|r| r.failed.as_ref()) {
        not_run.push(format!("the ladder: {why}"));
    }
    let gpu = report.is_some();
    let rungs = report.as_ref().map(evidence::outcomes).unwrap_or_default();
    let ladder =
        (!rungs.is_empty()).then(|| judge_ladder(&rungs, epilogue_inputs(report.as_ref())));
    // A rung that faulted computed nothing: the faulting access, located by memcheck,
    // is its evidence.
    let fault = match (&report, rungs.iter().find(|r| r.state == RungState::Fault)) {
        (Some(r), Some(faulted)) => Some(judge_fault(&fault::locate(
            job.repro,
            job.source,
            job.options,
            r,
            faulted,
            &job.work.join("memcheck"),
        ))),
        _ => None,
    };

    let Given {
        ones: given_ones,
        ones_shape,
        full: given_full,
    } = std::mem::take(&mut job.given);
    let record = job.record && given_ones.is_none() && given_full.is_none();
    let mut recorded = Vec::new();
    // The kernels traced in place of the one asked for (it has no mainloop).
    let mut instead: Vec<String> = Vec::new();
    let (mut ones_trace, mut full) = (given_ones, given_full.map(|f| (f, None)));
    if record {
        // Without a GPU only the ones pass is built: it shows the traced build
        // compiles, and the full pass's build would add nothing more.
        let passes: &[Pass] = if gpu {
            &[Pass::Ones, Pass::Full]
        } else {
            &[Pass::Ones]
        };
        let mut ones_built = false;
        for (pass, got) in record_passes(&job, passes, report.as_ref()) {
            match got {
                Ok(r) => {
                    recorded.push((pass, r.path.clone()));
                    for k in &r.instead {
                        if !instead.contains(k) {
                            instead.push(k.clone());
                        }
                    }
                    match pass {
                        Pass::Ones => ones_trace = Some(r.trace),
                        Pass::Full => match record::full_operands(&r) {
                            Ok(ops) => {
                                let output =
                                    r.report.rungs.first().and_then(evidence::traced_output);
                                full = Some((
                                    FullTrace {
                                        trace: r.trace,
                                        a: ops.a,
                                        b: ops.b,
                                    },
                                    Some((r.cta, output)),
                                ));
                            }
                            Err(NotRecorded { why, .. }) => {
                                not_run.push(format!("the full trace: {why}"))
                            }
                        },
                    }
                }
                Err(NotRecorded { why, built }) => {
                    ones_built |= built && pass == Pass::Ones;
                    not_run.push(match pass {
                        Pass::Ones => format!("the trace: {why}"),
                        Pass::Full => format!("the full trace: {why}"),
                    });
                }
            }
        }
        if ones_built {
            not_run.push("the full trace: on a GPU kwb also records one CTA's every operand and accumulator value on integer inputs (wide-int), which shows a K slice fed twice or another CTA's rows where all-ones cannot".to_owned());
        }
    } else if ones_trace.is_none() && full.is_none() {
        not_run.push(
            "the trace: no --trace given (kwb-instrument the kernel, build with -DKWB_TRACE, run it on all-ones with KWB_TRACE_OUT=trace.bin; on a GPU without --no-trace kwb records it itself); a trace is what isolates a stage".to_owned(),
        );
    }

    let trace_shape = ones_shape.unwrap_or(job.shape);
    let traced = ones_trace.as_ref().map(|t| {
        // The ladder's ones rung checks the traced run's output only at its shape.
        let ones = rungs
            .iter()
            .find(|r| r.rung == "ones")
            .filter(|_| trace_shape == job.shape);
        // A trace kwb recorded of the reproducer is one launch: nothing to mix.
        let one_launch = recorded.iter().any(|(p, _)| *p == Pass::Ones);
        judge_ones(t, &evidence::ones_run(trace_shape, ones, one_launch))
    });
    // The accumulator's type, as the extraction read it off the MMA instructions.
    let accumulator_bits = job
        .extraction
        .accumulator
        .as_deref()
        .and_then(kwb_gpu::plan::dtype_named)
        .map_or(24, |d| d.precision());
    let full_finding = full.as_ref().map(|(f, run)| {
        let run = match run {
            // kwb's own run: its output checked by its rung.
            Some((cta, output)) => StructuredRun {
                input: format!(
                    "wide-int:{} (CTA ({}, {}, {}))",
                    record::FULL_SEED,
                    cta[0],
                    cta[1],
                    cta[2]
                ),
                output: output.clone(),
                accumulator_bits,
            },
            // The user's: checked by their harness, not here.
            None => StructuredRun {
                input: "the full trace's inputs".to_owned(),
                output: None,
                accumulator_bits,
            },
        };
        judge_structured(&f.trace, &f.a, &f.b, &run)
    });

    let beside = |f: Option<Finding>| {
        f.map(|mut f| {
            if !instead.is_empty() {
                f.evidence
                    .push(traced_beside(&job.extraction.kernel.name, &instead));
            }
            f
        })
    };
    let (traced, full_finding) = (beside(traced), beside(full_finding));
    let mut descriptors = checks::descriptor_issues(job.extraction);
    if let Some(r) = &report {
        let received = checks::received_issues(&r.maps, &descriptors);
        descriptors.extend(received);
        // The source was read by the extraction; unreadable now means no expectation.
        let source = std::fs::read_to_string(job.source).unwrap_or_default();
        descriptors.extend(checks::swizzle_issues(
            &r.maps,
            kwb_diagnose::mma_swizzle(&source).as_ref(),
        ));
    }
    let combined = kwb_diagnose::combine_traces(traced.clone(), full_finding.clone());
    let verdict = with_fault(
        with_unchecked_maps(
            with_descriptors(reconcile(combined.as_ref(), ladder.as_ref()), &descriptors),
            checks::maps_unchecked(job.extraction, job.repro, report.as_ref()),
        ),
        fault.as_ref(),
    );
    let full_trace = full.as_ref().map(|(f, _)| &f.trace);
    // The stage's probe sites in either trace, once each.
    let sites = evidence::stage_sites(verdict.stage, ones_trace.as_ref(), full_trace);
    let evidence = [
        ("trace", traced),
        ("full trace", full_finding),
        ("ladder", ladder),
        ("fault", fault),
    ]
    .into_iter()
    .filter_map(|(track, f): (&'static str, Option<Finding>)| {
        f.map(|finding| Evidence { track, finding })
    })
    .collect();
    let reproduce = reproduce_lines(&job, &recorded);
    let diagnosis = Diagnosis {
        instantiation: job.extraction.instantiation.clone(),
        source: job.source.display().to_string(),
        verdict,
        evidence,
        rungs,
        sites,
        nan_origin: evidence::first_nan(ones_trace.as_ref(), full_trace),
        descriptors,
        maps: report
            .as_ref()
            .map(|r| r.maps.iter().map(kwb_gpu::MapReading::line).collect())
            .unwrap_or_default(),
        not_run,
        reproduce,
    };
    Ok(Outcome {
        diagnosis,
        report,
        recorded,
    })
}

/// The evidence line of a trace recorded in `instead` (the functions probed: the
/// mainloop of a kernel the reproducer's launcher runs beside `kernel`, which has no
/// mainloop to probe).
fn traced_beside(kernel: &str, instead: &[String]) -> String {
    let names = instead
        .iter()
        .map(|k| format!("`{k}`"))
        .collect::<Vec<_>>()
        .join(", ");
    format!(
        "traced in {names}: `{kernel}` has no mainloop to probe, so kwb probed the mainloop of the kernel the reproducer's launcher runs with it"
    )
}

/// Records `passes` at once (each builds its own traced copy with nvcc, then runs
/// briefly on the GPU), in the order given.
fn record_passes(
    job: &Job<'_>,
    passes: &[Pass],
    ladder: Option<&Report>,
) -> Vec<(Pass, Result<Recorded, NotRecorded>)> {
    std::thread::scope(|scope| {
        let handles: Vec<_> = passes
            .iter()
            .map(|&pass| {
                let (cta, options) = record::launch(pass, job.extraction, ladder, job.options);
                scope.spawn(move || {
                    (
                        pass,
                        record::trace(job.extraction, job.repro, job.work, pass, cta, &options),
                    )
                })
            })
            .collect();
        handles
            .into_iter()
            .zip(passes)
            .map(|(h, &pass)| {
                h.join().unwrap_or_else(|_| {
                    (
                        pass,
                        Err(NotRecorded {
                            why: "the recording thread panicked".to_owned(),
                            built: false,
                        }),
                    )
                })
            })
            .collect()
    })
}

/// How to run the ladder again, and where the recorded traces are.
fn reproduce_lines(job: &Job<'_>, recorded: &[(Pass, std::path::PathBuf)]) -> String {
    // Without a kept folder the reproducer lives in a temporary folder that is gone
    // when the caller exits.
    let kept = if job.kept {
        job.repro.display().to_string()
    } else {
        "DIR/repro (rerun with --report DIR to keep the reproducer)".to_owned()
    };
    let (m, n, k) = job.shape;
    let rungs: Vec<String> = job.options.rungs.iter().map(|r| r.name()).collect();
    let mut out = format!(
        "kwb run {kept} --shape {m},{n},{k} --ladder {}",
        rungs.join(",")
    );
    if job.kept {
        for (pass, path) in recorded {
            let what = match pass {
                Pass::Ones => "the ones trace kwb recorded",
                Pass::Full => "the full trace kwb recorded on wide-int",
            };
            out.push_str(&format!("\nkwb trace show {}   # {what}", path.display()));
        }
    }
    out
}
