//! The traces kwb records of a reproducer itself, so a diagnosis needs no harness and
//! no trace from the user:
//!
//! - **ones**: every default probe, CTA (0, 0, 0), on all-ones at the ladder's shape;
//!   the closed forms of uniform inputs judge it (kwb-diagnose's `judge_ones`);
//! - **full**: every value each probe looks at with its coordinates (`--full-tile`), on
//!   `wide-int` (integers in [-8, 8], whose runs of 8 along a row are all but unique),
//!   with the operands that run uploaded regenerated here from the rung's seed; the
//!   host model judges where each consumed value came from (`judge_structured`). It
//!   sees what all-ones cannot: a K slice fed twice, another CTA's rows, a stage read
//!   early. It records CTA (1, 0, 0) where the grid has a second CTA along x (off the
//!   diagonal, so a swapped row and column index shows), else CTA (0, 0, 0).
//!
//! Each is a traced copy of the plain reproducer (kwb-gpu's `traced`), built and run
//! beside it; the two run at once (two nvcc builds, then two short GPU runs).
//!
//! Invariant: the plain reproducer is only read; a trace that holds no record, or a
//! traced run that failed, is never returned as evidence.

use std::path::{Path, PathBuf};

use kwb_extract::Extraction;
use kwb_gpu::traced::{TraceRequest, prepare, run_prepared};
use kwb_gpu::{GpuError, Report, RunOptions};
use kwb_ladder::Rung;
use kwb_reconcile::Matrix;
use kwb_runtime::Trace;

/// The seed of the full trace's `wide-int` inputs.
pub const FULL_SEED: u64 = 1;

/// Which trace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pass {
    Ones,
    Full,
}

impl Pass {
    fn rung(self) -> Rung {
        match self {
            Pass::Ones => Rung::Ones,
            Pass::Full => Rung::WideInt { seed: FULL_SEED },
        }
    }

    /// The traced copy's folder and the trace's file in `work`.
    pub fn paths(self, work: &Path) -> (PathBuf, PathBuf) {
        match self {
            Pass::Ones => (work.join("repro-traced"), work.join("trace-ones.bin")),
            Pass::Full => (work.join("repro-full"), work.join("trace-full.bin")),
        }
    }

    fn what(self) -> &'static str {
        match self {
            Pass::Ones => "all-ones",
            Pass::Full => "wide-int (integers in [-8, 8])",
        }
    }
}

/// A trace kwb recorded.
#[derive(Debug)]
pub struct Recorded {
    pub trace: Trace,
    pub path: PathBuf,
    /// The CTA it holds.
    pub cta: [u32; 3],
    /// The traced run's report (its one rung).
    pub report: Report,
    /// The kernels traced in place of the one asked for, which has no mainloop kwb
    /// can probe (kwb-gpu's `Placed::instead`); empty when it was traced itself.
    pub instead: Vec<String>,
}

/// A full trace with the operands its run uploaded: A (M x K) and B (N x K).
#[derive(Debug)]
pub struct Operands {
    pub a: Matrix,
    pub b: Matrix,
}

/// Why a trace is not there: said in the diagnosis's "not run".
#[derive(Debug, Clone, PartialEq)]
pub struct NotRecorded {
    pub why: String,
    /// The traced build was made and only the GPU was missing to run it.
    pub built: bool,
}

impl NotRecorded {
    fn new(why: String) -> NotRecorded {
        NotRecorded { why, built: false }
    }
}

/// The function kwb instruments: the kernel, or for a megakernel task the task's
/// device function (the reproducer's task list holds tasks of that instantiation
/// only, so no other instantiation of it runs and no gate is needed).
pub fn probed(x: &Extraction) -> String {
    match &x.host.tasks {
        Some(t) => {
            let name = t.function.split('<').next().unwrap_or(&t.function).trim();
            name.rsplit("::").next().unwrap_or(name).to_owned()
        }
        None => x.kernel.name.clone(),
    }
}

/// The full-tile buffer for `shape`: room for every operand value read four times
/// (warps sharing a tile's rows, a task list's CTA running every tile) and every
/// output twice, at least the runtime's default and at most 2^26 values (1.5 GiB).
pub fn tile_capacity((m, n, k): crate::Shape) -> u64 {
    let values = 4 * (m * k + n * k) + 2 * m * n;
    (values as u64).clamp(1 << 22, 1 << 26)
}

/// The CTA a pass records, given the ladder's launch (its grid) when it ran.
pub fn cta(pass: Pass, ladder: Option<&Report>) -> [u32; 3] {
    let grid_x = ladder
        .and_then(|r| r.rungs.iter().find_map(|r| r.launch))
        .map_or(1, |l| l.grid[0]);
    match pass {
        Pass::Full if grid_x > 1 => [1, 0, 0],
        _ => [0, 0, 0],
    }
}

/// The CTA a pass records and the run options it runs with. A megakernel task's
/// reproducer runs its whole task list in the CTAs the extraction chose (one by
/// default, each task after the other); the full pass launches one CTA a task
/// instead, since the full trace's host model reads one output tile a CTA, and
/// records the second task's CTA where there is one.
pub fn launch(
    pass: Pass,
    x: &Extraction,
    ladder: Option<&Report>,
    options: &RunOptions,
) -> ([u32; 3], RunOptions) {
    let mut options = options.clone();
    let Some(tasks) = x.host.tasks.as_ref().filter(|_| pass == Pass::Full) else {
        return (cta(pass, ladder), options);
    };
    let (m, n, _) = options.request.shape;
    let [rows, cols] = tasks.tile.map(|t| t.max(1) as usize);
    let count = (m.div_ceil(rows) * n.div_ceil(cols)).max(1);
    let count = u32::try_from(count).unwrap_or(u32::MAX);
    options.grid = Some([count, 1, 1]);
    let cta = if count > 1 { [1, 0, 0] } else { [0, 0, 0] };
    (cta, options)
}

/// Records `pass` of the reproducer in `plain` into `work`: the traced copy built and
/// run on the pass's rung with `options`, its trace read back.
pub fn trace(
    x: &Extraction,
    plain: &Path,
    work: &Path,
    pass: Pass,
    cta: [u32; 3],
    options: &RunOptions,
) -> Result<Recorded, NotRecorded> {
    let (dir, out) = pass.paths(work);
    let kernel = probed(x);
    let shape = options.request.shape;
    let request = TraceRequest {
        kernel: kernel.clone(),
        cta,
        full_tile: pass == Pass::Full,
        rung: pass.rung(),
        tile_capacity: (pass == Pass::Full).then(|| tile_capacity(shape)),
        dir: dir.clone(),
        out,
    };
    let at = format!("CTA ({}, {}, {})", cta[0], cta[1], cta[2]);
    let placed = prepare(plain, &request)
        .map_err(|e| NotRecorded::new(format!("kwb could not record it: {e}")))?;
    let instrumented = if placed.instead.is_empty() {
        format!("`{}`", x.kernel.name)
    } else {
        format!(
            "{} (the launcher runs it with `{}`, which has no mainloop)",
            placed
                .instead
                .iter()
                .map(|k| format!("`{k}`"))
                .collect::<Vec<_>>()
                .join(", "),
            x.kernel.name
        )
    };
    let recorded = match run_prepared(&request, placed, options) {
        Ok(r) => r,
        // No GPU: everything before the launch ran, the traced build included.
        Err(GpuError::NoDriver { .. } | GpuError::Worker(_)) => {
            return Err(NotRecorded {
                built: true,
                why: format!(
                    "kwb built the traced reproducer ({}: {instrumented} instrumented for {at}); on a GPU it records that CTA on {} and judges the trace with the ladder, which is what isolates a stage",
                    dir.display(),
                    pass.what()
                ),
            });
        }
        Err(e) => return Err(NotRecorded::new(format!("kwb could not record it: {e}"))),
    };
    let bytes = std::fs::read(&recorded.trace).map_err(|e| {
        NotRecorded::new(format!(
            "kwb recorded it but cannot read {}: {e}",
            recorded.trace.display()
        ))
    })?;
    let trace = kwb_runtime::decode(&bytes).map_err(|e| {
        NotRecorded::new(format!(
            "{} is not a readable kwb trace: {e}",
            recorded.trace.display()
        ))
    })?;
    // An empty trace clears nothing: it is no evidence of a right stage.
    if trace.records.is_empty() {
        return Err(NotRecorded::new(format!(
            "kwb recorded one on {} ({}) but it holds no record: no probe ran in {at} of the traced reproducer (`kwb trace show` lists its sites); trace the kernel in your own build and give it with --trace",
            pass.what(),
            recorded.trace.display()
        )));
    }
    Ok(Recorded {
        trace,
        path: recorded.trace,
        cta,
        report: recorded.report,
        instead: recorded.placed.instead,
    })
}

/// The operands the full pass's run uploaded, regenerated from its rung: the problem
/// its run planned (its shape, input type) fed to the same seeded generator.
pub fn full_operands(recorded: &Recorded) -> Result<Operands, NotRecorded> {
    let problem = recorded
        .report
        .plan
        .problem()
        .map_err(|e| NotRecorded::new(format!("the full trace's problem: {e}")))?;
    operands_of(&problem)
}

/// The full pass's operands for `problem`, as the host model reads them: A (M x K)
/// and B (N x K).
pub fn operands_of(problem: &kwb_ladder::Problem) -> Result<Operands, NotRecorded> {
    let ops = Pass::Full
        .rung()
        .operands(problem)
        .map_err(|e| NotRecorded::new(format!("the full trace's operands: {e}")))?;
    let (m, n, k) = (problem.m, problem.n, problem.k);
    // The rung's B is K x N row-major; the host model reads B as N x K.
    let mut bt = vec![0.0f32; n * k];
    for p in 0..k {
        for j in 0..n {
            bt[j * k + p] = ops.b[p * n + j];
        }
    }
    let wrong =
        || NotRecorded::new("the full trace's operands do not have the problem's shape".to_owned());
    Ok(Operands {
        a: Matrix::new(m, k, ops.a).ok_or_else(wrong)?,
        b: Matrix::new(n, k, bt).ok_or_else(wrong)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The full pass's B is the rung's B transposed: B(n, k) of the host model is
    /// the rung's B(k, n).
    #[test]
    fn the_full_pass_reads_the_operands_its_rung_uploads() {
        let problem =
            kwb_ladder::Problem::new(3, 5, 4, kwb_ladder::Dtype::Bf16, kwb_ladder::Dtype::F32)
                .unwrap();
        let ops = Pass::Full.rung().operands(&problem).unwrap();
        assert!(
            ops.a.iter().any(|v| v.abs() > 2.0),
            "wide-int, not small-int"
        );
        let read = operands_of(&problem).unwrap();
        assert_eq!(
            (read.a.rows, read.a.cols, read.b.rows, read.b.cols),
            (3, 4, 5, 4)
        );
        assert_eq!(read.a.data, ops.a);
        for k in 0..4 {
            for n in 0..5 {
                assert_eq!(read.b.data[n * 4 + k], ops.b[k * 5 + n], "B({n}, {k})");
            }
        }
        let (dir, out) = Pass::Full.paths(Path::new("w"));
        assert_eq!(
            (dir, out),
            (
                PathBuf::from("w/repro-full"),
                PathBuf::from("w/trace-full.bin")
            )
        );
        assert_eq!(cta(Pass::Ones, None), [0, 0, 0]);
        assert_eq!(tile_capacity((256, 384, 1024)), 1 << 22);
        assert_eq!(
            tile_capacity((16, 1024, 6144)),
            4 * (16 + 1024) * 6144 + 2 * 16 * 1024
        );
        assert_eq!(tile_capacity((8192, 8192, 8192)), 1 << 26);
        assert_eq!(cta(Pass::Full, None), [0, 0, 0]);
    }
}
