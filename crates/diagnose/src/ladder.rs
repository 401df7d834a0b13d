//! Track B's reading: which stages the outcomes of the controlled-input ladder point
//! at, from which rungs fail and the shape of their error. A reproducer sees the
//! output only, so the ladder alone names candidate stages (a DRAFT); it isolates
//! nothing but the absence of a defect (every rung right: refuted).

use serde::Serialize;

use crate::pattern::{Classified, Pattern};
use crate::place::WrongTiles;
use crate::stage::{Finding, Stage, Status};

/// One rung as `kwb run` reported it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RungOutcome {
    /// zeros, ones, seq-identity, onehot-k:…, small-int:…, random:…, dump.
    pub rung: String,
    pub state: RungState,
    /// sum |output| / sum |answer| (NaN when not compared).
    pub ratio: f64,
    pub mismatches: usize,
    pub non_finite: usize,
    /// The shape of the error, where the outputs were compared.
    pub pattern: Option<Classified>,
    /// What went wrong where the kernel produced no output (`step: message`, the
    /// step being the runner's: `launch`, `encode`, `tasks`, `kernel`, ...).
    pub error: Option<String>,
}

/// How a rung ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum RungState {
    Pass,
    Fail,
    /// The kernel did not finish within the timeout.
    Hang,
    /// The launch was refused (bad configuration, resources, a missing symbol).
    Error,
    /// The kernel ran and faulted (an illegal or misaligned address, an illegal
    /// instruction): there is no output to compare.
    Fault,
}

impl RungOutcome {
    /// The rung's family, without its parameter (`onehot-k:0` → `onehot-k`).
    fn family(&self) -> &str {
        self.rung.split(':').next().unwrap_or(&self.rung)
    }
    fn failed(&self) -> bool {
        self.state == RungState::Fail
    }
}

/// The stages the ladder's outcomes point at.
/// Which of the epilogue's own inputs the problem adds (`beta·C`, a bias): the rungs
/// hold them zero or constant (zeros, ones, seq-identity, one-hot K) or varying
/// (small-int, random, wide-int, dumped data).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EpilogueInputs {
    /// `beta` is not 0 and the kernel reads C.
    pub c: bool,
    /// The kernel adds a bias.
    pub bias: bool,
}

impl EpilogueInputs {
    /// Neither: the output is `alpha·A·Bᵀ` alone.
    pub const NONE: EpilogueInputs = EpilogueInputs {
        c: false,
        bias: false,
    };
}

/// Whether a rung's family holds C and the bias zero or constant.
fn constant_terms(family: &str) -> bool {
    matches!(family, "zeros" | "ones" | "seq-identity" | "onehot-k")
}

/// The stages `rungs` point at, given which epilogue inputs the problem adds.
/// The k of each failing `onehot-k:k` rung whose output is all zero where its answer
/// is not (ratio 0): that rung's only products are those along k, and none reached the
/// output.
fn lost_k(rungs: &[RungOutcome]) -> Vec<u64> {
    rungs
        .iter()
        .filter(|r| r.state == RungState::Fail && r.mismatches > 0 && r.ratio.abs() < 1e-6)
        .filter_map(|r| r.rung.strip_prefix("onehot-k:")?.parse().ok())
        .collect()
}

pub fn judge_ladder(rungs: &[RungOutcome], epilogue: EpilogueInputs) -> Finding {
    let evidence: Vec<String> = rungs.iter().map(describe).collect();
    let mut base = Finding::open(evidence);
    base.wrong_tiles = wrong_tiles(rungs);
    base.passing = rungs
        .iter()
        .filter(|r| r.state == RungState::Pass)
        .map(|r| r.rung.clone())
        .collect();
    base.lost_k = lost_k(rungs);
    let draft =
        |stage: Stage, alternatives: Vec<Stage>, summary: String, factor: Option<f64>| Finding {
            stage: Some(stage),
            alternatives,
            factor,
            summary,
            ..base.clone()
        };
    if rungs.is_empty() {
        return Finding {
            summary: "no rung ran".to_owned(),
            ..base
        };
    }
    // A TMA map the kernel's own code encodes, refused by the driver: the map's
    // parameters (box, swizzle, dims, strides) are ones no TMA unit accepts.
    if let Some((r, why)) = rungs.iter().find_map(|r| {
        let why = r.error.as_deref()?;
        (r.state == RungState::Error && refused_encoding(why)).then_some((r, why))
    }) {
        return Finding {
            stage: Some(Stage::Descriptor),
            summary: format!(
                "descriptor: the kernel's TMA map could not be encoded on {} ({why}): the driver refuses its parameters (box, swizzle, dimensions or strides)",
                r.rung
            ),
            ..base
        };
    }
    if let Some(r) = rungs
        .iter()
        .find(|r| matches!(r.state, RungState::Hang | RungState::Error))
    {
        let what = if r.state == RungState::Hang {
            "hung"
        } else {
            "failed to launch"
        };
        return Finding {
            summary: format!(
                "the kernel {what} on {}: not a wrong-numbers stage (see the rung's report)",
                r.rung
            ),
            ..base
        };
    }
    // A fault leaves no output: the rungs that computed say nothing about the ones
    // that did not, and the stage is the faulting access's (judge_fault).
    if let Some(r) = rungs.iter().find(|r| r.state == RungState::Fault) {
        return Finding {
            summary: format!(
                "the kernel faulted on {}: no output to compare; the faulting access names the stage",
                r.rung
            ),
            ..base
        };
    }
    if rungs.iter().all(|r| r.state == RungState::Pass) {
        return Finding {
            status: Status::Verdict,
            clean: true,
            summary: format!(
                "every rung right ({}): no defect in this instantiation on these inputs",
                rungs
                    .iter()
                    .map(|r| r.rung.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            ..base
        };
    }
    let find = |family: &str| rungs.iter().find(|r| r.family() == family);
    let zeros = find("zeros");
    let ones = find("ones");
    if let Some(z) = zeros.filter(|z| z.failed()) {
        // A = B = 0: only what the MMA starts from, what the epilogue adds, or (NaN) an
        // operand read from outside the operand (the runner's padding holds NaN) can be
        // wrong.
        let mut alternatives = vec![Stage::Mma];
        if z.non_finite > 0 {
            alternatives.extend([Stage::OperandLoad, Stage::Descriptor]);
        }
        return draft(
            Stage::Epilogue,
            alternatives,
            format!(
                "epilogue or mma{}: zeros fails ({} wrong{}): with A = B = 0 only the epilogue's own terms, an accumulator that does not start at zero, or an operand read from the padding around it (NaN) can be wrong",
                if z.non_finite > 0 {
                    " (or operand-load/descriptor)"
                } else {
                    ""
                },
                z.mismatches,
                if z.non_finite > 0 {
                    format!(", {} NaN/Inf", z.non_finite)
                } else {
                    String::new()
                }
            ),
            None,
        );
    }
    if let Some(o) = ones.filter(|o| o.failed()) {
        let pattern = o.pattern.as_ref().map(|c| &c.pattern);
        return match pattern {
            // More products than K: only the accumulation adds them. Fewer: the K loop
            // dropped some, or operand values it consumed were zeros (a map's or a
            // bound's extent cut short fills part of K with zeros), which ones cannot
            // tell apart.
            Some(Pattern::KResidue { factor, extra_k }) if *extra_k < 0 => draft(
                Stage::Mma,
                vec![Stage::OperandLoad, Stage::Descriptor],
                format!(
                    "mma or operand-load/descriptor: ones reads {factor:.4}x, {extra_k:+} products along K: the K loop drops a tile, or part of K is read as zeros (an extent cut short)"
                ),
                Some(*factor),
            ),
            Some(Pattern::KResidue { factor, extra_k }) => draft(
                Stage::Mma,
                Vec::new(),
                format!(
                    "mma: ones reads {factor:.4}x, {extra_k:+} products along K: the K loop counts a tile twice"
                ),
                Some(*factor),
            ),
            Some(Pattern::Uniform { factor }) if *factor < 1.0 => draft(
                Stage::Epilogue,
                vec![Stage::Mma, Stage::OperandLoad, Stage::Descriptor],
                format!(
                    "epilogue, mma or operand-load/descriptor: ones reads {factor:.4}x everywhere: a scale lost in the epilogue or the accumulation, or part of K read as zeros (out-of-bounds fill)"
                ),
                Some(*factor),
            ),
            Some(Pattern::Uniform { factor }) => draft(
                Stage::Epilogue,
                vec![Stage::Mma],
                format!(
                    "epilogue or mma: ones reads {factor:.4}x everywhere: a scale applied twice (alpha, a fold) in the epilogue or the accumulation"
                ),
                Some(*factor),
            ),
            Some(
                p @ (Pattern::RowBand { .. }
                | Pattern::ColumnBand { .. }
                | Pattern::Periodic { .. }),
            ) => draft(
                Stage::OperandLoad,
                vec![Stage::Descriptor, Stage::Epilogue],
                format!(
                    "operand-load/descriptor or epilogue: ones is wrong in a {}: out-of-bounds fill or a clamped box zeroes whole operand rows, a wrong store leaves them unwritten",
                    p.label()
                ),
                None,
            ),
            Some(p) => draft(
                Stage::Epilogue,
                vec![Stage::Mma, Stage::OperandLoad, Stage::Descriptor],
                format!(
                    "any stage: ones is wrong ({}; ratio {:.4})",
                    p.label(),
                    o.ratio
                ),
                None,
            ),
            None => draft(
                Stage::Epilogue,
                vec![Stage::Mma, Stage::OperandLoad, Stage::Descriptor],
                format!("any stage: ones is wrong (ratio {:.4})", o.ratio),
                None,
            ),
        };
    }
    // Ones right: the right number of products of the right size, so what is wrong
    // is which values meet (or where results land).
    let failing: Vec<&str> = rungs
        .iter()
        .filter(|r| r.failed())
        .map(|r| r.rung.as_str())
        .collect();
    // Every rung whose C and bias are zero or constant right, seq-identity (which shows
    // a wrong, shifted or transposed operand tile where it lands) among them, and every
    // failing rung one where they vary: the operands meet right wherever those terms
    // cannot move the output, and C or the bias is added at the wrong place.
    let terms_only = (epilogue.c || epilogue.bias)
        && rungs
            .iter()
            .any(|r| r.family() == "seq-identity" && r.state == RungState::Pass)
        && rungs.iter().all(|r| {
            if constant_terms(r.family()) {
                r.state == RungState::Pass
            } else {
                matches!(r.state, RungState::Pass | RungState::Fail)
            }
        });
    if terms_only {
        let terms = match (epilogue.c, epilogue.bias) {
            (true, true) => "C or the bias",
            (true, false) => "C",
            _ => "the bias",
        };
        return draft(
            Stage::Epilogue,
            vec![Stage::OperandLoad, Stage::Descriptor],
            format!(
                "epilogue (or operand-load/descriptor): every rung whose C and bias are zero or constant is right (seq-identity among them), and {} fail, where they vary: {terms} added at the wrong place (a transposed C, a bias along the wrong axis)",
                failing.join(", ")
            ),
            None,
        );
    }
    draft(
        Stage::OperandLoad,
        vec![Stage::Descriptor, Stage::Epilogue, Stage::Mma],
        format!(
            "operand-load/descriptor (or a permuting epilogue, or an MMA handed another fragment's registers): ones is right but {} fail: the count of products is right, the values that meet are not",
            failing.join(", ")
        ),
        None,
    )
}

/// Whether a runner's error is a TMA map encoding the driver refused (the
/// launcher's own encoder, or a task list's descriptors).
fn refused_encoding(error: &str) -> bool {
    let step = error.split(':').next().unwrap_or("").trim();
    matches!(step, "encode" | "tasks") && error.contains("refused")
}

/// The CTA tiles wrong on any failing rung of exact values (zeros, ones, integers:
/// not random or dumped data, whose failures a trace on integers may not share).
/// None: no such rung failed, one was not classified, or they ran on different grids.
fn wrong_tiles(rungs: &[RungOutcome]) -> Option<WrongTiles> {
    let mut union: Option<WrongTiles> = None;
    for r in rungs
        .iter()
        .filter(|r| r.failed() && !matches!(r.family(), "random" | "dump"))
    {
        let tiles = &r.pattern.as_ref()?.tiles;
        union = Some(match union {
            None => tiles.clone(),
            Some(u) => u.union(tiles)?,
        });
    }
    union
}

fn describe(r: &RungOutcome) -> String {
    let state = match r.state {
        RungState::Pass => "pass",
        RungState::Fail => "fail",
        RungState::Hang => "HANG",
        RungState::Error => "error",
        RungState::Fault => "FAULT (no output)",
    };
    let mut line = format!("{}: {state}", r.rung);
    if r.failed() {
        line.push_str(&format!(", {} wrong, ratio {:.4}", r.mismatches, r.ratio));
        if r.non_finite > 0 {
            line.push_str(&format!(", {} NaN/Inf", r.non_finite));
        }
        if let Some(c) = &r.pattern {
            line.push_str(&format!(", {}", c.pattern.label()));
        }
    }
    line
}
