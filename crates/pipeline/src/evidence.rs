//! kwb-gpu's reports read as kwb-diagnose's inputs: each rung's outcome, and a run's
//! output as it was checked against its answer.

use kwb_diagnose::{OnesRun, OutputCheck, RungOutcome, RungState};
use kwb_gpu::{Report, RungReport};

use crate::Shape;

/// The ladder's rungs as kwb-diagnose reads them (a rung that did not run is left out).
pub fn outcomes(report: &Report) -> Vec<RungOutcome> {
    report
        .rungs
        .iter()
        .filter(|r| r.status != "not-run")
        .map(|r| RungOutcome {
            rung: r.rung.clone(),
            state: match r.status {
                "pass" => RungState::Pass,
                // A kernel that ran and faulted has no comparison.
                "fail" if r.comparison.is_none() => RungState::Fault,
                "fail" => RungState::Fail,
                "hang" => RungState::Hang,
                _ => RungState::Error,
            },
            ratio: r.comparison.as_ref().map_or(f64::NAN, |c| c.ratio),
            mismatches: r.comparison.as_ref().map_or(0, |c| c.mismatches),
            non_finite: r.comparison.as_ref().map_or(0, |c| c.nan + c.inf),
            pattern: r.pattern.clone(),
            error: r.error.clone(),
        })
        .collect()
}

/// A rung's output as checked, where it was compared.
pub fn output_check(r: &RungOutcome) -> OutputCheck {
    OutputCheck {
        mismatches: r.mismatches as u64,
        nan: r.non_finite as u64,
        inf: 0,
        ratio: r.ratio,
        wrong_tiles: r.pattern.as_ref().map(|p| p.tiles.clone()),
    }
}

/// The traced run's one rung as checked, where it ran to a comparison.
pub fn traced_output(rung: &RungReport) -> Option<OutputCheck> {
    let c = rung.comparison.as_ref()?;
    Some(OutputCheck {
        mismatches: c.mismatches as u64,
        nan: c.nan as u64,
        inf: c.inf as u64,
        ratio: c.ratio,
        wrong_tiles: rung.pattern.as_ref().map(|p| p.tiles.clone()),
    })
}

/// The all-ones traced run at `shape`, its output checked by the ladder's ones rung
/// (the same instantiation on the same inputs at the same shape) when there is one.
pub fn ones_run(shape: Shape, ones: Option<&RungOutcome>, one_launch: bool) -> OnesRun {
    OnesRun {
        m: shape.0 as u64,
        n: shape.1 as u64,
        k: shape.2 as u64,
        output: ones.map(output_check),
        one_launch,
    }
}

/// The probe sites of `stage` in either trace (the ones trace's first), each once.
pub(crate) fn stage_sites(
    stage: Option<kwb_diagnose::Stage>,
    ones: Option<&kwb_runtime::Trace>,
    full: Option<&kwb_runtime::Trace>,
) -> Vec<kwb_diagnose::SiteRef> {
    let mut sites = Vec::new();
    if let Some(stage) = stage {
        for t in ones.into_iter().chain(full) {
            for site in kwb_diagnose::sites_of(t, stage) {
                if !sites.contains(&site) {
                    sites.push(site);
                }
            }
        }
    }
    sites
}

/// Where the first NaN or Inf came from: the ones trace's reading, else the full one's.
pub(crate) fn first_nan(
    ones: Option<&kwb_runtime::Trace>,
    full: Option<&kwb_runtime::Trace>,
) -> Option<kwb_diagnose::NanOrigin> {
    ones.and_then(kwb_diagnose::nan_origin)
        .or_else(|| full.and_then(kwb_diagnose::nan_origin))
}
