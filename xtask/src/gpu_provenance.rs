//! The structured-input half of `cargo xtask gpu-trace`: the defects all-ones cannot
//! show (a K slice fed twice, another CTA's rows, a swizzle the MMA does not expect,
//! an epilogue reading C or the bias at the wrong place) are localized from a full
//! trace on inputs whose every run of 8 values is all but unique.
//!
//! Each family is instrumented with every probe kind and `--full-tile` for CTA
//! (1, 0, 0) (off the diagonal, and the megakernel's first down-projection task past
//! column 0), each variant runs `--input wide_int` (integers in [-8, 8]) with
//! `KWB_DUMP_DIR` so the harness writes the operands it uploaded, and kwb-diagnose's
//! `judge_structured` (what `kwb diagnose --full-trace` runs) reads the stage from the
//! trace against kwb-reconcile's host model of those operands: operands by
//! provenance, the accumulator placed in `A·Bᵀ`, then the output (its module doc gives
//! the rules).

use std::path::{Path, PathBuf};

use kwb_reconcile::Matrix;
use kwb_runtime::Trace;

use crate::gpu_suite::{Ran, run_one};
use crate::gpu_trace::{Judged, Options};
use crate::suite::Variant;

/// The CTA the full trace records.
pub const CTA: [u32; 3] = [1, 0, 0];
/// The input rung of this pass.
pub const INPUT: &str = "wide_int";

/// Where a variant's full run writes its trace and the operands it uploaded.
pub struct FullRun {
    pub trace: PathBuf,
    pub dump: PathBuf,
}

impl FullRun {
    /// The dumped operand `name` (A or B).
    pub fn operand(&self, name: &str) -> PathBuf {
        self.dump.join(format!("{INPUT}.{name}.npy"))
    }
}

/// Runs a full-trace build on `wide_int` with its operands dumped, into fresh files
/// under `out` (`FAMILY.DEFECT.wide_int.trace` and `.inputs/`).
pub fn run_full(
    b: &crate::kernels::Built<'_>,
    out: &Path,
    timeout: std::time::Duration,
) -> (FullRun, Ran) {
    let stem = format!("{}.{}.{INPUT}", b.variant.family, b.variant.defect);
    let run = FullRun {
        trace: out.join(format!("{stem}.trace")),
        dump: out.join(format!("{stem}.inputs")),
    };
    let _ = std::fs::remove_file(&run.trace);
    let _ = std::fs::remove_dir_all(&run.dump);
    let ran = match (&b.result, std::fs::create_dir_all(&run.dump)) {
        (Ok(_), Ok(())) => run_one(
            &b.binary,
            &["--input", INPUT],
            &[
                (kwb_runtime::OUT_ENV, &run.trace),
                ("KWB_DUMP_DIR", &run.dump),
            ],
            timeout,
        ),
        (Err(e), _) => failed(format!(
            "build failed: {}",
            e.lines().next().unwrap_or_default()
        )),
        (_, Err(e)) => failed(format!("{}: {e}", run.dump.display())),
    };
    (run, ran)
}

/// Runs a full-trace build (`run_full`), judges it, and removes the (large) trace.
pub fn trace_and_judge(b: &crate::kernels::Built<'_>, options: &Options) -> Judged {
    let (run, ran) = run_full(b, &options.out, options.timeout);
    let trace = std::fs::read(&run.trace)
        .map_err(|e| e.to_string())
        .and_then(|bytes| kwb_runtime::decode(&bytes).map_err(|e| e.to_string()));
    let judged = judge(b.variant, &ran, trace.as_ref(), &run);
    let _ = std::fs::remove_file(&run.trace);
    judged
}

fn failed(why: String) -> Ran {
    Ran {
        rungs: Vec::new(),
        hang: false,
        error: Some(why),
        seconds: 0.0,
    }
}

fn read_matrix(path: &Path) -> Result<Matrix, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let (shape, data) =
        kwb_cli::npy::read_f32(&bytes).map_err(|e| format!("{}: {e}", path.display()))?;
    match shape[..] {
        [rows, cols] => Matrix::new(rows, cols, data)
            .ok_or_else(|| format!("{}: shape and data disagree", path.display())),
        _ => Err(format!("{}: not a matrix: shape {shape:?}", path.display())),
    }
}

/// The full trace judged by kwb-diagnose (the product's own reading) against the
/// operands the harness dumped, and whether that agrees with the manifest.
fn judge(
    variant: &Variant,
    ran: &Ran,
    trace: std::result::Result<&Trace, &String>,
    run: &FullRun,
) -> Judged {
    let (trace, rung) = match crate::gpu_trace::judgeable(variant, ran, trace, INPUT) {
        Ok(x) => x,
        Err(judged) => return judged,
    };
    let input = |name: &str| read_matrix(&run.operand(name));
    let (a, b) = match (input("A"), input("B")) {
        (Ok(a), Ok(b)) => (a, b),
        (Err(e), _) | (_, Err(e)) => return Judged::failed(format!("no dumped operands: {e}")),
    };
    let finding = kwb_diagnose::judge_structured(
        trace,
        &a,
        &b,
        &kwb_diagnose::StructuredRun {
            input: INPUT.to_owned(),
            output: Some(rung.output_check()),
            // Every kernel of the suites accumulates in f32.
            accumulator_bits: 24,
        },
    );
    let confound = variant.stage == "none" && variant.symptom.starts_with("confound");
    let agrees = match finding.stage {
        None => finding.clean && variant.stage == "none",
        Some(_) => {
            finding.fits(kwb_diagnose::Stage::parse(&variant.stage))
                || (confound && finding.confound == Some(kwb_diagnose::Confound::ZerosAmongEqual))
        }
    };
    let mut evidence = vec![format!("CTA {CTA:?}")];
    evidence.extend(finding.evidence);
    Judged {
        grade: if finding.stage.is_none() {
            "n/a"
        } else {
            finding.status.as_str()
        },
        stage: finding.summary,
        agrees,
        evidence,
    }
}

/// The folder of the full-trace copies, next to the ones-rung copies.
pub fn traced_dir(root: &Path) -> PathBuf {
    root.join("target/traced-full")
}
