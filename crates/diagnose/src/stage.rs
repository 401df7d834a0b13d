//! The words of a diagnosis: the stages a GEMM-like kernel can be wrong in, how sure a
//! localization is, the confounds that keep it a draft, and what one track found.

use serde::Serialize;

use crate::place::{Region, WrongTiles};

/// A stage of the kernel's data path.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Stage {
    /// The operands as the MMA consumes them differ from the inputs' tiles.
    OperandLoad,
    /// The TMA descriptor that drives an operand load is wrong (an operand-load
    /// symptom whose cause is the descriptor).
    Descriptor,
    /// Operands right, the accumulator wrong.
    Mma,
    /// Accumulator right, the output wrong.
    Epilogue,
}

impl Stage {
    /// The name the manifest, `--json` and the reports use.
    pub fn as_str(self) -> &'static str {
        match self {
            Stage::OperandLoad => "operand-load",
            Stage::Descriptor => "descriptor",
            Stage::Mma => "mma",
            Stage::Epilogue => "epilogue",
        }
    }

    /// The stage named `name` (`none` and anything else: no stage).
    pub fn parse(name: &str) -> Option<Stage> {
        [
            Stage::OperandLoad,
            Stage::Descriptor,
            Stage::Mma,
            Stage::Epilogue,
        ]
        .into_iter()
        .find(|s| s.as_str() == name)
    }
}

/// How far a localization can be trusted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Status {
    /// A controlled-input rung or an unconfounded trace isolates it.
    Verdict,
    /// Something could explain the reading without the named stage being wrong, or
    /// the evidence cannot tell two stages apart: the draft says which.
    Draft,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Verdict => "VERDICT",
            Status::Draft => "DRAFT",
        }
    }
}

/// What could explain a reading without a defect in the stage it points at.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Confound {
    /// The problem leaves padding rows in the MMA tiles (BATCH < MMA_N or a shape that
    /// is no multiple of the tile) and the trace counted every row: padding rows hold
    /// whatever the kernel fills them with.
    PaddingRows { m: u64, n: u64 },
    /// The only odd values are zeros among equal ones: padding rows and
    /// out-of-bounds fill look exactly like that.
    ZerosAmongEqual,
    /// The accumulator is wrong but the operands were not traced, so a wrong
    /// operand and a wrong MMA read the same.
    OperandsNotProbed,
    /// An operand read with coordinates holds no run of the input: the kernel reads
    /// it in another layout, or the probe's coordinates are wrong.
    ProbeCoordinates,
    /// No gate pinned the trace to one instantiation and its records, each uniform,
    /// hold `values` different values: several invocations (layers, chained tasks)
    /// mixed in one statistic, each possibly right on its own input.
    LayerMixing { values: usize },
    /// The output is wrong and the trace holds no accumulator record (the probe did
    /// not land, or the kernel's accumulator is not one kwb-instrument reads): an
    /// unseen accumulator is no exact one, so the MMA and the operands stay open.
    AccumulatorNotRecorded,
    /// The trace shows its CTA right up to the accumulator, and the output is wrong
    /// somewhere, but not (or not known to be) in the traced CTA's tile: another
    /// tile's operands or accumulation could be what is wrong.
    ElsewhereThanTraced,
    /// The traced accumulator holds exactly 1/`slices` of K, as a split-K partial
    /// does, and the output is not what that accumulator alone would make: the
    /// partials are summed after it (a reduction, the epilogue).
    SplitKPartial { slices: u32 },
    /// The MMA's A operand holds B's rows and its B operand A's, and read so (a
    /// swap-AB kernel that computes `Dᵀ = B·Aᵀ`) its operands and accumulator are
    /// right: a swap-AB kernel whose store is wrong and an MMA handed A and B the wrong
    /// way round read the same.
    SwappedRoles,
}

impl Confound {
    /// One sentence for the report.
    pub fn describe(&self) -> String {
        match self {
            Confound::PaddingRows { m, n } => format!(
                "M = {m} x N = {n} leaves padding rows in the MMA tiles and the trace has no row bound: padding could explain it"
            ),
            Confound::ZerosAmongEqual => {
                "zeros among equal values: padding rows or out-of-bounds fill would look the same"
                    .to_owned()
            }
            Confound::OperandsNotProbed => {
                "the operands were not probed, so the two cannot be told apart".to_owned()
            }
            Confound::ProbeCoordinates => {
                "the probe's coordinates could be wrong instead of the kernel's layout".to_owned()
            }
            Confound::LayerMixing { values } => format!(
                "no gate pins the trace to one instantiation, and its records are each uniform but hold {values} different values: invocations of several layers mixed (late layers legitimately carry larger activations)"
            ),
            Confound::ElsewhereThanTraced => {
                "the traced CTA is right up to the accumulator, but the wrong outputs may lie in tiles it did not compute".to_owned()
            }
            Confound::SplitKPartial { slices } => format!(
                "the traced accumulator holds exactly 1/{slices} of K, as a split-K partial does, and the output is not that accumulator's: the step that sums the partials (a reduction, the epilogue) makes the output"
            ),
            Confound::AccumulatorNotRecorded => {
                "the trace holds no accumulator record, so a wrong accumulation and a wrong epilogue read the same".to_owned()
            }
            Confound::SwappedRoles => {
                "the MMA's operands hold each other's input: a swap-AB kernel (Dᵀ = B·Aᵀ) whose store is wrong and an MMA handed A and B the wrong way round read the same".to_owned()
            }
        }
    }
}

/// A run's output as it was checked against its answer.
#[derive(Clone, Debug, PartialEq)]
pub struct OutputCheck {
    /// Outputs that differ from the answer (NaN and Inf included).
    pub mismatches: u64,
    pub nan: u64,
    pub inf: u64,
    /// sum |output| / sum |answer|.
    pub ratio: f64,
    /// The CTA tiles with wrong outputs, where the check knows them. A trace's reading
    /// of "output wrong" holds for the traced tile only where these meet it.
    pub wrong_tiles: Option<WrongTiles>,
}

impl OutputCheck {
    pub fn wrong(&self) -> bool {
        self.mismatches > 0 || self.nan > 0 || self.inf > 0
    }

    /// The evidence line: the check on `input`, or that there was none.
    pub(crate) fn line(check: Option<&OutputCheck>, input: &str) -> String {
        match check {
            Some(c) => format!(
                "output on {input}: {} mismatches, {} NaN, {} Inf, ratio {}",
                c.mismatches, c.nan, c.inf, c.ratio
            ),
            None => format!("output on {input}: not checked"),
        }
    }
}

/// The summary of a trace that shows operands and accumulator right when the output
/// was not checked: the epilogue is not cleared.
pub(crate) const OUTPUT_UNCHECKED: &str =
    "the output was not checked, so the epilogue is not cleared";

/// Stages a trace shows right (operands exactly the inputs' tiles, accumulator
/// exactly their product) over the output region its CTA computed.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Cleared {
    pub stages: Vec<Stage>,
    /// The traced CTA's region of the output (None: not known, a local frame).
    pub region: Option<Region>,
    /// The problem's M and N the trace ran at (a region means nothing at another).
    pub m: u64,
    pub n: u64,
    /// The stretch of K the traced CTA's operands and accumulator cover, where it is
    /// one share of K (a split-K partial); None: all of K.
    pub k: Option<(u64, u64)>,
}

/// What one track says about the stage.
///
/// Invariant: `status` is [`Status::Verdict`] only when `stage` is `Some` and
/// `confound` is `None`, or when `stage` is `None` and `clean` is true (the evidence
/// shows every stage right).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Finding {
    /// The stage the evidence points at; `None`: none.
    pub stage: Option<Stage>,
    /// Other stages the same evidence fits (a descriptor for an operand-load symptom).
    pub alternatives: Vec<Stage>,
    pub status: Status,
    /// Every stage this evidence looked at read right.
    pub clean: bool,
    /// What keeps it a draft.
    pub confound: Option<Confound>,
    /// The K tile where the accumulator first departs from its model.
    pub k_tile: Option<i32>,
    /// got / expected where one factor relates them (2.000 for a doubled value).
    pub factor: Option<f64>,
    /// Stages this evidence shows right, and where (a trace speaks for its CTA's
    /// tile only).
    pub cleared: Option<Cleared>,
    /// The CTA tiles the evidence saw wrong (a ladder: over its failing rungs).
    pub wrong_tiles: Option<WrongTiles>,
    /// The rungs that passed (a ladder's; empty for a trace).
    pub passing: Vec<String>,
    /// The k of each `onehot-k:k` rung whose output holds none of its answer (a
    /// ladder's): the products along that k never reached the output.
    pub lost_k: Vec<u64>,
    /// One line: the stage and why.
    pub summary: String,
    /// The numbers behind it.
    pub evidence: Vec<String>,
}

impl Finding {
    /// This trace reading held to the traced run's own output, where it was checked
    /// (`output`, on `input`). An accumulator read wrong (an MMA reading) in a run
    /// whose output is right everywhere is the model not fitting this kernel (a
    /// split-K partial that sums one K slice, another accumulator set), not a defect:
    /// the output is made from that accumulator. Such a reading is set aside and the
    /// run counts as clean. An operand reading is kept (a wrong value can fail to
    /// reach the output on uniform inputs), and so is a reading that names its
    /// confound; any other reading is returned as it is.
    pub fn against_output(self, output: Option<&OutputCheck>, input: &str) -> Finding {
        match output {
            Some(o) if self.stage == Some(Stage::Mma) && self.confound.is_none() && !o.wrong() => {
                let mut evidence = self.evidence;
                evidence.push(format!("set aside: {}", self.summary));
                Finding {
                    clean: true,
                    summary: format!(
                        "nothing wrong in the traced run's output on {input}; the trace's own reading ({}) does not fit a run whose output, made from that accumulator, is right, so it is no evidence of a defect (a split-K partial, another accumulator set)",
                        self.summary
                    ),
                    evidence,
                    ..Finding::open(Vec::new())
                }
            }
            Some(o) if self.stage == Some(Stage::Mma) && self.confound.is_none() && o.wrong() => {
                match self.factor.and_then(|f| split_k_slices(f, o.ratio)) {
                    Some(slices) => {
                        let confound = Confound::SplitKPartial { slices };
                        let mut evidence = self.evidence;
                        evidence.push(format!("read as a split-K partial: {}", self.summary));
                        Finding {
                            stage: Some(Stage::Epilogue),
                            alternatives: vec![Stage::Mma],
                            status: Status::Draft,
                            summary: format!(
                                "epilogue or mma: the output on {input} reads {:.4}x, but {}",
                                o.ratio,
                                confound.describe()
                            ),
                            confound: Some(confound),
                            evidence,
                            ..Finding::open(Vec::new())
                        }
                    }
                    None => self,
                }
            }
            _ => self,
        }
    }

    /// A finding of no stage yet (a draft, not clean) over `evidence`, for a reading
    /// to fill in.
    pub fn open(evidence: Vec<String>) -> Finding {
        Finding {
            stage: None,
            alternatives: Vec::new(),
            status: Status::Draft,
            clean: false,
            confound: None,
            k_tile: None,
            factor: None,
            cleared: None,
            wrong_tiles: None,
            passing: Vec::new(),
            lost_k: Vec::new(),
            summary: String::new(),
            evidence,
        }
    }

    /// Whether `stage` (`None`: no defect) is what this finding says, or one of the
    /// stages it cannot tell apart from it.
    pub fn fits(&self, stage: Option<Stage>) -> bool {
        match (self.stage, stage) {
            (None, None) => true,
            (Some(s), Some(want)) => s == want || self.alternatives.contains(&want),
            _ => false,
        }
    }
}

/// The number of K slices `s` (at least 2) when an accumulator read `factor` times its
/// whole-K value is exactly 1/s of it while the output reads `output` times its answer,
/// which is not what that accumulator alone would give: a split-K partial whose sum
/// is made after it. A K loop that drops tiles reads the same factor in the output.
fn split_k_slices(factor: f64, output: f64) -> Option<u32> {
    if !(factor.is_finite() && output.is_finite()) || factor <= 0.0 || factor > 0.5 {
        return None;
    }
    let slices = (1.0 / factor).round();
    let exact = (factor * slices - 1.0).abs() < 1e-6;
    let explained = (output - factor).abs() <= 0.02 * factor.max(output.abs());
    (exact && !explained && slices <= 64.0).then_some(slices as u32)
}
