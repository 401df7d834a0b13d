//! `cargo xtask gpu-diagnose`: `kwb diagnose` on every variant of the kernel suite, as
//! a user would run it, on a machine with a GPU. Each family is instrumented with
//! every probe kind (CTA (0, 0, 0), the family's gate and row bound) and each variant
//! built traced and run on all-ones, which writes the trace a user would bring; a
//! confound variant brings the trace of the build without the row bound, the reading
//! that manufactured its production symptom. Each is also built with `--full-tile`
//! (CTA (1, 0, 0)) and run on integer inputs with the operands dumped, the full trace
//! kwb diagnose reads with `--full-trace` and `--operands`. Then `kwb diagnose` extracts the variant
//! (through a compile database with the production nvcc command), runs the ladder,
//! judges the trace and reconciles. Each verdict is held to kernels/suite.toml: the
//! manifest's stage for a defect, no stage for a correct build or a confound. A
//! VERDICT that names a stage the manifest does not is a wrong verdict, the worst
//! result there is; `report.md` in `--out` counts them.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::gpu_repro::{binary, extract_target, json_of, ladder_shape};
use crate::gpu_suite::run_one;
use crate::kernels::{Build, compile_all, tools};
use crate::suite::{Suite, Variant};
use crate::{Failure, Result};

/// Options of the task.
pub struct Options {
    pub jobs: usize,
    pub timeout: Duration,
    pub out: PathBuf,
    pub commit: Option<String>,
    /// Only these variants (`family/defect`) or families; empty: every variant.
    pub only: Vec<String>,
}

/// A full trace on integer inputs and the operands its run uploaded.
struct FullTrace {
    trace: PathBuf,
    a: PathBuf,
    b: PathBuf,
}

/// One variant's diagnosis against the manifest.
struct Row {
    family: String,
    defect: String,
    /// The manifest's stage (`none` for a correct build or a confound).
    expected: String,
    confound: bool,
    status: String,
    stage: String,
    alternatives: Vec<String>,
    summary: String,
    /// The verdict fits the manifest (its stage or one it cannot tell apart from it).
    agrees: bool,
    /// A VERDICT naming a stage the manifest does not.
    wrong_verdict: bool,
    seconds: f64,
}

pub fn run(root: &Path, options: &Options) -> Result {
    let mut suite = Suite::load(root)?;
    if !options.only.is_empty() {
        let wanted = |family: &str, defect: &str| {
            options
                .only
                .iter()
                .any(|o| o == family || *o == format!("{family}/{defect}"))
        };
        suite.variant.retain(|v| wanted(&v.family, &v.defect));
        if suite.variant.is_empty() {
            return Err(Failure(format!(
                "--only {}: no variant of kernels/suite.toml",
                options.only.join(",")
            )));
        }
        let families: Vec<String> = suite.variant.iter().map(|v| v.family.clone()).collect();
        suite.families.retain(|name, _| families.contains(name));
    }
    let kwb = binary("kwb")?;
    std::fs::create_dir_all(&options.out)
        .map_err(|e| Failure(format!("{}: {e}", options.out.display())))?;
    // Track A: the traces a user would bring.
    let bounded = root.join("target/traced-diagnose");
    let unbounded = root.join("target/traced-diagnose-all-rows");
    let full = root.join("target/traced-diagnose-full");
    for dir in [&bounded, &unbounded, &full] {
        let _ = std::fs::remove_dir_all(dir);
    }
    for (name, family) in &suite.families {
        if let Err(why) =
            crate::gpu_trace::instrument(root, family, &bounded, family.trace_rows.clone(), false)
        {
            println!("not traced {name}: {why}");
        }
        if family.trace_rows.is_some() {
            crate::gpu_trace::instrument(root, family, &unbounded, None, false)
                .map_err(|e| Failure(format!("{name} without --rows: {e}")))?;
        }
        if let Err(why) =
            crate::gpu_trace::instrument(root, family, &full, family.trace_rows.clone(), true)
        {
            println!("no full trace of {name}: {why}");
        }
    }
    let (toolchain, cutlass) = tools()?;
    let build = |dir| Build {
        jobs: options.jobs,
        family: None,
        selection: crate::kernels::Selection::First,
        traced: Some(dir),
    };
    let mut traces: Vec<(String, Option<(PathBuf, String)>)> = Vec::new();
    for (dir, all_rows) in [(&bounded, false), (&unbounded, true)] {
        for b in compile_all(root, &suite, &toolchain, cutlass.as_ref(), &build(dir))? {
            let v = b.variant;
            let confound = v.symptom.starts_with("confound");
            // A confound brings the reading without the row bound where there is one.
            let wanted = if suite.families[&v.family].trace_rows.is_some() {
                confound == all_rows
            } else {
                !all_rows
            };
            if !wanted || v.trace_skip.is_some() || b.result.is_err() {
                continue;
            }
            let path = options
                .out
                .join(format!("{}.{}.ones.trace", v.family, v.defect));
            let _ = std::fs::remove_file(&path);
            let ran = run_one(
                &b.binary,
                &["--input", "ones"],
                &[(kwb_runtime::OUT_ENV, &path)],
                options.timeout,
            );
            let shape = ran
                .rungs
                .first()
                .map(|r| format!("{},{},{}", r.m, r.n, r.k));
            traces.push((
                format!("{}/{}", v.family, v.defect),
                shape.filter(|_| path.is_file()).map(|s| (path, s)),
            ));
        }
    }
    // The full traces on integer inputs, with the operands each run uploaded.
    let mut full_traces: Vec<(String, FullTrace)> = Vec::new();
    for b in compile_all(root, &suite, &toolchain, cutlass.as_ref(), &build(&full))? {
        let v = b.variant;
        if v.trace_skip.is_some() || b.result.is_err() {
            continue;
        }
        let (run, _) = crate::gpu_provenance::run_full(&b, &options.out, options.timeout);
        let (trace, a, bm) = (run.trace.clone(), run.operand("A"), run.operand("B"));
        if trace.is_file() && a.is_file() && bm.is_file() {
            full_traces.push((
                format!("{}/{}", v.family, v.defect),
                FullTrace { trace, a, b: bm },
            ));
        }
    }
    // Track B and the verdict: kwb diagnose, several variants at once.
    let work: Vec<&Variant> = suite.variant.iter().collect();
    let rows: Vec<Row> = crate::gpu_suite::each_in_parallel(
        options.jobs,
        &work,
        |v| {
            let key = format!("{}/{}", v.family, v.defect);
            let trace = traces
                .iter()
                .find(|(k, _)| *k == key)
                .and_then(|(_, t)| t.clone());
            let full = full_traces.iter().find(|(k, _)| *k == key).map(|(_, f)| f);
            one(
                root,
                options,
                &kwb,
                &suite,
                v,
                (trace, full),
                cutlass.as_ref(),
            )
        },
        |row| {
            println!(
                "{} {}/{}: {} {} ({})",
                if row.wrong_verdict {
                    "WRONG"
                } else if row.agrees {
                    "ok   "
                } else {
                    "DIFF "
                },
                row.family,
                row.defect,
                row.status,
                row.stage,
                row.summary
            );
        },
    );
    let text = report(&rows, options, &toolchain);
    let path = options.out.join("report.md");
    std::fs::write(&path, &text).map_err(|e| Failure(format!("{}: {e}", path.display())))?;
    println!("{}", text.lines().take(10).collect::<Vec<_>>().join("\n"));
    println!("wrote {}", path.display());
    if rows.iter().any(|r| r.wrong_verdict) {
        return Err(Failure("a wrong VERDICT (see report.md)".to_owned()));
    }
    Ok(())
}

fn one(
    root: &Path,
    options: &Options,
    kwb: &Path,
    suite: &Suite,
    v: &Variant,
    (trace, full): (Option<(PathBuf, String)>, Option<&FullTrace>),
    cutlass: Option<&kwb_toolchain::CutlassDir>,
) -> Row {
    let started = Instant::now();
    let family = &suite.families[&v.family];
    let mut row = Row {
        family: v.family.clone(),
        defect: v.defect.clone(),
        expected: v.stage.clone(),
        confound: v.symptom.starts_with("confound"),
        status: "-".to_owned(),
        stage: "-".to_owned(),
        alternatives: Vec::new(),
        summary: String::new(),
        agrees: false,
        wrong_verdict: false,
        seconds: 0.0,
    };
    let target = match extract_target(root, &options.out, family, v, cutlass) {
        Ok(t) => t,
        Err(why) => {
            row.summary = why;
            return row;
        }
    };
    let report = options.out.join(&v.family).join(&v.defect);
    let _ = std::fs::remove_dir_all(&report);
    let mut command = Command::new(kwb);
    command
        .current_dir(root)
        .arg("diagnose")
        .args(&target)
        .args(["--json", "--timeout"])
        .arg(options.timeout.as_secs().to_string())
        .args(&family.run_flags)
        .arg("--report")
        .arg(&report);
    // The ladder runs at the traced run's shape, so its ones rung checks the traced
    // output; a family whose reproducer has a shape of its own (a megakernel task)
    // keeps it, and the trace's shape is given apart.
    match &trace {
        Some((path, shape)) if !family.run_shape => {
            command.args(["--shape", shape]).arg("--trace").arg(path);
        }
        Some((path, shape)) => {
            command
                .args(ladder_shape(family, v))
                .arg("--trace")
                .arg(path)
                .args(["--trace-shape", shape]);
        }
        None => {
            command.args(ladder_shape(family, v));
        }
    }
    if let Some(f) = full {
        command
            .arg("--full-trace")
            .arg(&f.trace)
            .arg("--operands")
            .arg(format!("{},{}", f.a.display(), f.b.display()));
    }
    let out = command.output();
    row.seconds = started.elapsed().as_secs_f64();
    let d = match json_of("kwb diagnose", out) {
        Ok(d) => d,
        Err(why) => {
            row.summary = why;
            return row;
        }
    };
    let read = crate::gpu_repro::Read::of(&d);
    let fits = read.fits(&v.stage);
    row.stage = read.stage.clone().unwrap_or_else(|| "none".to_owned());
    row.status = read.status;
    row.alternatives = read.alternatives;
    row.summary = read.summary;
    row.agrees = fits;
    row.wrong_verdict = row.status == "VERDICT" && !fits;
    if trace.is_none() {
        row.summary.push_str(" [no trace]");
    }
    if full.is_some() {
        row.summary.push_str(" [with a full trace]");
    }
    row
}

fn report(rows: &[Row], options: &Options, toolchain: &kwb_toolchain::Toolchain) -> String {
    let (gpu, nvcc, date) = crate::gpu_suite::machine(toolchain);
    let defects: Vec<&Row> = rows.iter().filter(|r| r.expected != "none").collect();
    let clean: Vec<&Row> = rows.iter().filter(|r| r.expected == "none").collect();
    let verdict_right = |rs: &[&Row]| {
        rs.iter()
            .filter(|r| r.agrees && r.status == "VERDICT")
            .count()
    };
    let draft_right = |rs: &[&Row]| {
        rs.iter()
            .filter(|r| r.agrees && r.status == "DRAFT")
            .count()
    };
    let wrong = rows.iter().filter(|r| r.wrong_verdict).count();
    let mut out = String::new();
    let _ = writeln!(out, "# kwb diagnose on the kernel suite\n");
    let _ = writeln!(
        out,
        "- commit: {}\n- date: {date}\n- GPU: {gpu}\n- nvcc: {nvcc}\n- command: `xtask gpu-diagnose -j {} --timeout {}{}`",
        options.commit.as_deref().unwrap_or("unknown"),
        options.jobs,
        options.timeout.as_secs(),
        if options.only.is_empty() {
            String::new()
        } else {
            format!(" --only {}", options.only.join(","))
        }
    );
    let _ = writeln!(
        out,
        "- defects: {} of {} with the manifest's stage as a VERDICT, {} more as a DRAFT that names it among the stages it cannot tell apart, {} otherwise",
        verdict_right(&defects),
        defects.len(),
        draft_right(&defects),
        defects.len() - verdict_right(&defects) - draft_right(&defects)
    );
    let _ = writeln!(
        out,
        "- correct builds and confounds: {} of {} refuted (no stage, VERDICT), {} more with no stage as a DRAFT, {} otherwise",
        verdict_right(&clean),
        clean.len(),
        draft_right(&clean),
        clean.len() - verdict_right(&clean) - draft_right(&clean)
    );
    let _ = writeln!(out, "- **wrong VERDICTs: {wrong}**\n");
    let _ = writeln!(
        out,
        "| family | defect | manifest | status | stage (or) | agrees | s | summary |\n|---|---|---|---|---|---|---|---|"
    );
    for r in rows {
        let expected = if r.confound {
            "none (confound)".to_owned()
        } else {
            r.expected.clone()
        };
        let stage = if r.alternatives.is_empty() {
            r.stage.clone()
        } else {
            format!("{} ({})", r.stage, r.alternatives.join(", "))
        };
        let _ = writeln!(
            out,
            "| {} | {} | {expected} | {} | {stage} | {} | {:.0} | {} |",
            r.family,
            r.defect,
            r.status,
            if r.wrong_verdict {
                "**WRONG VERDICT**"
            } else if r.agrees {
                "yes"
            } else {
                "no"
            },
            r.seconds,
            r.summary.replace('|', "\\|")
        );
    }
    out
}
