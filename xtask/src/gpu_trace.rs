//! `cargo xtask gpu-trace`: Track A on the kernel suite. On a machine with a GPU,
//! instrument each family's source with kwb-instrument (every probe kind, CTA
//! (0, 0, 0)), build every variant with `-DKWB_TRACE`, run it on the all-ones
//! input with `KWB_TRACE_OUT`, and localize the defect from the trace alone by the
//! closed forms of all-ones inputs:
//!
//! 1. every operand value the MMA consumes is the same (1 for a first layer; the
//!    uniform output of the layer before for a chained one) — otherwise the stage
//!    is operand-load (or the TMA descriptor that drives it);
//! 2. the accumulator after K tile t holds the same value everywhere, (t + 1) times
//!    its value after tile 0, and K·a·b after the mainloop (a, b: the operand
//!    values) — otherwise the MMA/accumulate stage over- or under-counts;
//! 3. with both right, an output the harness finds wrong is the epilogue's doing;
//! 4. with everything right, the defect is invisible on all-ones (a permutation or a
//!    shifted tile of equal values): the trace refutes nothing and says so.
//!
//! Deviations that are only zeros among equal values are reported as a DRAFT: zero
//! rows are what padding (BATCH < MMA_N) and out-of-bounds fill look like. A family
//! may name the instantiation to trace (`trace_gate`) and the live-row bound
//! (`trace_rows`) in kernels/suite.toml. The traces and the report go to `--out`
//! (a folder); `report.md` there is the evidence.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use kwb_runtime::Trace;

use crate::gpu_suite::{Ran, run_one};
use crate::kernels::{Build, compile_all, tools};
use crate::suite::{Suite, Variant};
use crate::{Failure, Result};

/// Options of the task.
pub struct Options {
    pub jobs: usize,
    pub timeout: Duration,
    pub out: PathBuf,
    pub commit: Option<String>,
}

pub fn run(root: &Path, options: &Options) -> Result {
    let suite = Suite::load(root)?;
    std::fs::create_dir_all(&options.out)
        .map_err(|e| Failure(format!("{}: {e}", options.out.display())))?;
    let traced = root.join("target/traced");
    let all_rows = root.join("target/traced-all-rows");
    let _ = std::fs::remove_dir_all(&all_rows);
    let full = crate::gpu_provenance::traced_dir(root);
    let _ = std::fs::remove_dir_all(&full);
    let mut skipped = Vec::new();
    for (name, family) in &suite.families {
        match instrument(root, family, &traced, family.trace_rows.clone(), false) {
            Ok(probes) => println!("instrumented {name}: {probes} probes"),
            Err(why) => {
                println!("skipped {name}: {why}");
                skipped.push(format!("{name}: {why}"));
            }
        }
        // The padding confound, shown: the same trace without the row bound.
        if family.trace_rows.is_some() {
            instrument(root, family, &all_rows, None, false)
                .map_err(|e| Failure(format!("{name} without --rows: {e}")))?;
        }
        // The full trace of one CTA, for the structured-input pass.
        instrument(root, family, &full, family.trace_rows.clone(), true)
            .map_err(|e| Failure(format!("{name} with --full-tile: {e}")))?;
    }
    let (toolchain, cutlass) = tools()?;
    let build = |dir| Build {
        jobs: options.jobs,
        family: None,
        selection: crate::kernels::Selection::First,
        traced: Some(dir),
    };
    let built = compile_all(root, &suite, &toolchain, cutlass.as_ref(), &build(&traced))?;
    let mut rows = Vec::new();
    let mut agree = 0;
    for b in &built {
        let judged = trace_and_judge(b, options, "ones");
        if judged.agrees {
            agree += 1;
        }
        judged.log(b.variant, "ones");
        rows.push((b.variant, judged));
    }
    // Confound variants again, traced over every row of the tile.
    let mut confounds = Vec::new();
    let unfiltered = compile_all(
        root,
        &suite,
        &toolchain,
        cutlass.as_ref(),
        &build(&all_rows),
    )?;
    for b in unfiltered
        .iter()
        .filter(|b| b.variant.symptom.starts_with("confound") && b.variant.trace_skip.is_none())
    {
        let without = trace_and_judge(b, options, "all-rows.ones");
        let with = rows
            .iter()
            .find(|(v, _)| v.family == b.variant.family && v.defect == b.variant.defect)
            .map(|(_, j)| j);
        println!(
            "confound {}/{}: without --rows: {} [{}]",
            b.variant.family, b.variant.defect, without.stage, without.grade
        );
        if let Some(with) = with {
            confounds.push((b.variant, without, with));
        }
    }
    // Every variant again, traced in full on wide_int and checked against the host model.
    let mut structured = Vec::new();
    for b in compile_all(root, &suite, &toolchain, cutlass.as_ref(), &build(&full))? {
        let judged = crate::gpu_provenance::trace_and_judge(&b, options);
        judged.log(b.variant, crate::gpu_provenance::INPUT);
        structured.push((b.variant, judged));
    }
    let report = markdown(
        root,
        &toolchain,
        options,
        &Results {
            rows: &rows,
            agree,
            skipped: &skipped,
            confounds: &confounds,
            structured: &structured,
        },
    );
    let path = options.out.join("report.md");
    std::fs::write(&path, report).map_err(|e| Failure(format!("{}: {e}", path.display())))?;
    println!(
        "{agree} of {} variants: the trace's stage agrees with the manifest; wrote {}",
        rows.len(),
        path.display()
    );
    Ok(())
}

/// Runs a traced build on all-ones (the trace goes to `--out` as
/// `FAMILY.DEFECT.SUFFIX.trace`) and judges it.
fn trace_and_judge(b: &crate::kernels::Built<'_>, options: &Options, suffix: &str) -> Judged {
    let trace_path = options.out.join(format!(
        "{}.{}.{suffix}.trace",
        b.variant.family, b.variant.defect
    ));
    let _ = std::fs::remove_file(&trace_path);
    let ran = match &b.result {
        Ok(_) => run_one(
            &b.binary,
            &["--input", "ones"],
            &[(kwb_runtime::OUT_ENV, &trace_path)],
            options.timeout,
        ),
        Err(e) => Ran {
            rungs: Vec::new(),
            hang: false,
            error: Some(format!(
                "build failed: {}",
                e.lines().next().unwrap_or_default()
            )),
            seconds: 0.0,
        },
    };
    let trace = std::fs::read(&trace_path)
        .map_err(|e| e.to_string())
        .and_then(|bytes| kwb_runtime::decode(&bytes).map_err(|e| e.to_string()));
    judge(b.variant, &ran, trace.as_ref())
}

/// Instruments a family's source into `dir` (laid out like `kernels/`) with the
/// family's gate and the row bound `rows`; the number of probes.
pub(crate) fn instrument(
    root: &Path,
    family: &crate::suite::Family,
    dir: &Path,
    rows: Option<String>,
    full: bool,
) -> std::result::Result<usize, String> {
    let source = root.join("kernels").join(&family.source);
    let text = std::fs::read_to_string(&source).map_err(|e| e.to_string())?;
    let config = kwb_instrument::Config {
        file_name: format!("kernels/{}", family.source),
        cta: Some(if full {
            crate::gpu_provenance::CTA
        } else {
            [0, 0, 0]
        }),
        gate: family.trace_gate.clone(),
        rows,
        full_tile: full,
        ..kwb_instrument::Config::default()
    };
    let out = dir.join(&family.source);
    if let Some(parent) = out.parent() {
        std::fs::create_dir_all(parent).map_err(|e| e.to_string())?;
    }
    match kwb_instrument::instrument(&text, &config) {
        Ok((traced, plan)) => {
            std::fs::write(&out, traced).map_err(|e| e.to_string())?;
            return Ok(plan.probes.len());
        }
        Err(kwb_instrument::InstrumentError::NothingToProbe { .. }) if family.cutlass => {}
        Err(e) => return Err(e.to_string()),
    }
    // A CUTLASS kernel's mainloop lives in the library's collective: instrument the
    // headers it includes into an overlay folder beside the copy, which the build puts
    // first on the include path.
    let (toolchain_cutlass, common) = (
        kwb_toolchain::cutlass(&kwb_toolchain::Env::from_process()).map_err(|e| e.to_string())?,
        root.join("kernels/common"),
    );
    let overlay = overlay_dir(dir, family);
    let _ = std::fs::remove_dir_all(&overlay);
    let copies = kwb_instrument::overlay::plan(
        &source,
        &text,
        &[toolchain_cutlass.include.clone(), common],
        &overlay,
        &kwb_instrument::Config {
            lenient_gate: true,
            ..config
        },
        0,
    );
    if copies.is_empty() {
        return Err("no included header has a staged mainloop to instrument".to_owned());
    }
    let mut probes = 0;
    for (written, traced) in &copies {
        if let Some(parent) = written.copy.parent() {
            std::fs::create_dir_all(parent).map_err(|e| e.to_string())?;
        }
        std::fs::write(&written.copy, traced).map_err(|e| e.to_string())?;
        probes += written.plan.probes.len();
    }
    // The copies include the trace runtime from the overlay's root.
    let (runtime, text_of_runtime) = kwb_instrument::overlay::runtime_header(&overlay);
    std::fs::write(&runtime, text_of_runtime).map_err(|e| e.to_string())?;
    std::fs::write(&out, &text).map_err(|e| e.to_string())?;
    Ok(probes)
}

/// The overlay folder of a family's instrumented copy (see `kernels.rs`).
pub fn overlay_dir(dir: &Path, family: &crate::suite::Family) -> PathBuf {
    dir.join(&family.source).with_extension("overlay")
}

/// What the trace of one variant says.
pub(crate) struct Judged {
    /// The localized stage, or why there is none.
    pub stage: String,
    /// VERDICT or DRAFT (or n/a).
    pub grade: &'static str,
    /// Whether it agrees with the manifest's stage (or with "invisible on ones"
    /// where the manifest expects the ones rung to pass).
    pub agrees: bool,
    /// The numbers behind it.
    pub evidence: Vec<String>,
}

impl Judged {
    /// No stage: why (a failed run, a missing trace), not agreeing.
    pub(crate) fn failed(stage: String) -> Judged {
        Judged {
            stage,
            grade: "n/a",
            agrees: false,
            evidence: Vec::new(),
        }
    }

    /// One line for the log: agree or DISAGREE, the variant, what the trace says.
    pub(crate) fn log(&self, variant: &Variant, rung: &str) {
        println!(
            "{} {}/{} on {rung}: {} [{}]",
            if self.agrees { "agree   " } else { "DISAGREE" },
            variant.family,
            variant.defect,
            self.stage,
            self.grade
        );
    }
}

/// The trace and the rung's result of a run that can be judged, or the judgment
/// that it cannot: a variant the manifest skips, a hang, a failed run, no trace, no
/// result line for `input`.
pub(crate) fn judgeable<'t>(
    variant: &Variant,
    ran: &'t Ran,
    trace: std::result::Result<&'t Trace, &String>,
    input: &str,
) -> std::result::Result<(&'t Trace, &'t crate::gpu_suite::Rung), Judged> {
    if let Some(why) = &variant.trace_skip {
        return Err(Judged {
            stage: format!("not judged: {why}"),
            grade: "n/a",
            agrees: true,
            evidence: Vec::new(),
        });
    }
    if ran.hang {
        return Err(Judged::failed("no trace: the run hung".to_owned()));
    }
    if let Some(e) = &ran.error {
        return Err(Judged::failed(format!("no trace: {e}")));
    }
    let trace = trace.map_err(|e| Judged::failed(format!("no trace: {e}")))?;
    let rung = ran
        .rungs
        .iter()
        .find(|r| r.input == input)
        .ok_or_else(|| Judged::failed(format!("no KWB_RESULT line for {input}")))?;
    Ok((trace, rung))
}

/// The ones-rung trace judged by kwb-diagnose (the product's own reading), and whether
/// that agrees with the manifest.
fn judge(variant: &Variant, ran: &Ran, trace: std::result::Result<&Trace, &String>) -> Judged {
    let (trace, rung) = match judgeable(variant, ran, trace, "ones") {
        Ok(x) => x,
        Err(judged) => return judged,
    };
    let finding = kwb_diagnose::judge_ones(
        trace,
        &kwb_diagnose::OnesRun {
            m: rung.m,
            n: rung.n,
            k: rung.k,
            output: Some(rung.output_check()),
            // The suite's harness may run several invocations (the megakernel's
            // layers): the layer-mixing confound stays open.
            one_launch: false,
        },
    );
    let padding = matches!(
        finding.confound,
        Some(kwb_diagnose::Confound::PaddingRows { .. })
    );
    let agrees = if padding {
        // A padding confound is right exactly where the manifest plants one.
        variant.stage == "none" && variant.symptom.starts_with("confound")
    } else if finding.stage.is_none() {
        variant.stage == "none" || variant.expect.ones == crate::suite::Outcome::Pass
    } else {
        finding.fits(kwb_diagnose::Stage::parse(&variant.stage))
    };
    Judged {
        grade: if finding.stage.is_none() {
            "n/a"
        } else {
            finding.status.as_str()
        },
        stage: finding.summary,
        agrees,
        evidence: finding.evidence,
    }
}

/// Everything the report shows.
struct Results<'a, 's> {
    /// The ones-rung judgments, and how many agree.
    rows: &'a [(&'s Variant, Judged)],
    agree: usize,
    /// Families not instrumented, with why.
    skipped: &'a [String],
    /// Confound variants without and with the row bound.
    confounds: &'a [(&'s Variant, Judged, &'a Judged)],
    /// The wide_int full-trace judgments.
    structured: &'a [(&'s Variant, Judged)],
}

fn markdown(
    root: &Path,
    toolchain: &kwb_toolchain::Toolchain,
    options: &Options,
    results: &Results<'_, '_>,
) -> String {
    let Results {
        rows,
        agree,
        skipped,
        confounds,
        structured,
    } = *results;
    let mut out = String::new();
    let _ = writeln!(out, "# Track A on the kernel suite: stage from the trace\n");
    let _ = writeln!(
        out,
        "- commit: {}",
        options.commit.as_deref().unwrap_or("(not given)")
    );
    let (gpu, nvcc, date) = crate::gpu_suite::machine(toolchain);
    let _ = writeln!(out, "- date: {date}");
    let _ = writeln!(out, "- GPU: {gpu}");
    let _ = writeln!(out, "- nvcc: {nvcc}");
    let _ = writeln!(
        out,
        "- command: `cargo xtask gpu-trace -j {} --timeout {} --out {}{}` (raw log beside this file)",
        options.jobs,
        options.timeout.as_secs(),
        options
            .out
            .strip_prefix(root)
            .unwrap_or(&options.out)
            .display(),
        options
            .commit
            .as_deref()
            .map_or(String::new(), |c| format!(" --commit {c}"))
    );
    let _ = writeln!(
        out,
        "- what: each family instrumented by kwb-instrument (all probe kinds, CTA (0,0,0)), every variant built with -DKWB_TRACE for its family's first architecture and run with `--input ones`; the stage is read from the trace by the closed forms of all-ones inputs (see xtask/src/gpu_trace.rs). Then every variant again, instrumented with `--full-tile --cta 1,0,0`, run with `--input wide_int` (integers in [-8, 8]) and its dumped operands, and checked stage by stage against the host model of kwb-reconcile (operand provenance, accumulator placement in A·Bᵀ; see xtask/src/gpu_provenance.rs)"
    );
    let find = |v: &Variant| {
        structured
            .iter()
            .find(|(s, _)| s.family == v.family && s.defect == v.defect)
            .map(|(_, j)| j)
    };
    let defects: Vec<&(&Variant, Judged)> =
        rows.iter().filter(|(v, _)| v.stage != "none").collect();
    let shown = defects
        .iter()
        .filter(|(v, j)| {
            let localized = |j: &Judged| j.agrees && matches!(j.grade, "VERDICT" | "DRAFT");
            localized(j) || find(v).is_some_and(localized)
        })
        .count();
    let not_judged_clean = rows
        .iter()
        .filter(|(v, _)| v.stage == "none" && v.trace_skip.is_some())
        .count();
    let clean = rows
        .iter()
        .filter(|(v, _)| v.stage == "none" && v.trace_skip.is_none())
        .filter(|(v, j)| j.agrees && find(v).is_none_or(|s| s.agrees))
        .count();
    let structured_agree = structured.iter().filter(|(_, j)| j.agrees).count();
    let _ = writeln!(
        out,
        "- combined: {shown} of {} defect variants localized to their stage (VERDICT, or a DRAFT that names it) by the ones rung or the wide_int full trace; {clean} of {} correct or confound variants found clean by both ({not_judged_clean} more listed, not judged)",
        defects.len(),
        rows.len() - defects.len() - not_judged_clean
    );
    let _ = writeln!(
        out,
        "- wide_int full trace alone: agrees with kernels/suite.toml for {structured_agree} of {} variants",
        structured.len()
    );
    let localized = rows
        .iter()
        .filter(|(_, j)| j.agrees && j.grade != "n/a")
        .count();
    let not_judged = rows
        .iter()
        .filter(|(_, j)| j.stage.starts_with("not judged"))
        .count();
    let _ = writeln!(
        out,
        "- result: the trace's reading agrees with kernels/suite.toml for {agree} of {} variants: {localized} localized to their stage, {} correctly found clean on ones (a correct build, or a defect all-ones cannot show), {not_judged} listed but not judged\n",
        rows.len(),
        agree - localized - not_judged
    );
    for s in skipped {
        let _ = writeln!(out, "- not instrumented: {s}");
    }
    let _ = writeln!(
        out,
        "\n| variant | manifest stage | trace says | grade | agrees |\n|---|---|---|---|---|"
    );
    for (v, j) in rows {
        let _ = writeln!(
            out,
            "| {}/{} | {} | {} | {} | {} |",
            v.family,
            v.defect,
            v.stage,
            j.stage,
            j.grade,
            if j.agrees { "yes" } else { "**no**" }
        );
    }
    if !confounds.is_empty() {
        let _ = writeln!(
            out,
            "\n## The padding confound: the same trace without and with the row bound\n\nEach confound variant's output is correct. Traced over every row of the tile (no `--rows`), its operand statistics include the padding rows; with the family's `trace_rows` bound they count the live rows only.\n\n| variant | without --rows | grade | with --rows | grade |\n|---|---|---|---|---|"
        );
        for (v, without, with) in confounds {
            let _ = writeln!(
                out,
                "| {}/{} | {} | {} | {} | {} |",
                v.family, v.defect, without.stage, without.grade, with.stage, with.grade
            );
        }
        for (v, without, _) in confounds {
            let _ = writeln!(out, "\n{}/{} without --rows:\n", v.family, v.defect);
            for e in &without.evidence {
                let _ = writeln!(out, "- {e}");
            }
        }
    }
    let _ = writeln!(
        out,
        "\n## Structured inputs: the full trace of CTA (1,0,0) on wide_int against the host model\n\n| variant | manifest stage | ones rung says | wide_int full trace says | grade | agrees |\n|---|---|---|---|---|---|"
    );
    for (v, j) in rows {
        let (stage, grade, agrees) = find(v).map_or(("not run".to_owned(), "n/a", false), |s| {
            (s.stage.clone(), s.grade, s.agrees)
        });
        let _ = writeln!(
            out,
            "| {}/{} | {} | {} ({}) | {} | {} | {} |",
            v.family,
            v.defect,
            v.stage,
            j.stage,
            j.grade,
            stage,
            grade,
            if agrees { "yes" } else { "**no**" }
        );
    }
    let _ = writeln!(out, "\n## Evidence per variant\n");
    for (v, j) in rows {
        let _ = writeln!(out, "### {}/{}\n", v.family, v.defect);
        for e in &j.evidence {
            let _ = writeln!(out, "- {e}");
        }
        if let Some(s) = find(v) {
            let _ = writeln!(out, "\nwide_int full trace:\n");
            for e in &s.evidence {
                let _ = writeln!(out, "- {e}");
            }
        }
        let _ = writeln!(out);
    }
    out
}
