//! Track A on the all-ones rung: the stage a trace shows, from the closed forms of
//! uniform inputs alone (no dumped operands needed).
//!
//! 1. Every operand value the MMA consumes is the same (1 for a first layer; the
//!    uniform output of the layer before for a chained one); otherwise the stage is
//!    operand-load (or the TMA descriptor that drives it).
//! 2. The accumulator after K tile t holds one value everywhere, (t + 1) times its
//!    value after tile 0, and K·a·b after the mainloop (a, b: the operand values);
//!    otherwise the MMA/accumulate stage over- or under-counts.
//! 3. With both right, an output the run found wrong is the epilogue's doing.
//! 4. With everything right the defect, if any, is invisible on all-ones (a
//!    permutation or a shifted tile of equal values): the trace refutes nothing.
//!
//! A non-uniform operand is only a draft when zeros are its only odd values (padding
//! rows and out-of-bounds fill look the same) and the accumulator does not say they
//! were real values lost (see [`zeros_cost_products`]), when the problem leaves padding rows
//! in the MMA tiles and the trace counted every row, or when no gate pinned the trace
//! to one instantiation and each record is uniform on its own (layer mixing: several
//! invocations, each right on its own uniform input).

use kwb_runtime::{Kind, Trace, TraceRecord};

use crate::place::{joinable, traced_origin};
use crate::stage::{Confound, Finding, OUTPUT_UNCHECKED, OutputCheck, Stage, Status};

/// The all-ones run the trace was recorded on, as it was checked against its answer.
#[derive(Clone, Debug, PartialEq)]
pub struct OnesRun {
    pub m: u64,
    pub n: u64,
    pub k: u64,
    /// The output against the closed form; `None` when nothing checked it (then an
    /// exact trace cannot clear the epilogue).
    pub output: Option<OutputCheck>,
    /// The trace holds one launch of one instantiation (kwb recorded it of the
    /// reproducer): invocations cannot mix in it, whatever its gate.
    pub one_launch: bool,
}

/// The tile edge below which a problem leaves padding rows: every MMA tile of the
/// kernels kwb knows covers a multiple of it.
const PADDING_QUANTUM: u64 = 64;

/// Statistics of a set of records.
#[derive(Default)]
struct Stats {
    records: usize,
    count: u64,
    min: Option<f32>,
    max: Option<f32>,
    nan: u64,
    inf: u64,
}

impl Stats {
    fn of<'r>(records: impl Iterator<Item = &'r TraceRecord>) -> Stats {
        let mut s = Stats::default();
        for r in records {
            s.records += 1;
            s.count += u64::from(r.count);
            s.nan += u64::from(r.nan_count);
            s.inf += u64::from(r.inf_count);
            if r.vmin.is_finite() {
                s.min = Some(s.min.map_or(r.vmin, |m| m.min(r.vmin)));
            }
            if r.vmax.is_finite() {
                s.max = Some(s.max.map_or(r.vmax, |m| m.max(r.vmax)));
            }
        }
        s
    }

    fn exactly(&self, v: f32) -> bool {
        self.nan == 0 && self.inf == 0 && self.min == Some(v) && self.max == Some(v)
    }

    /// The one value every counted value has, if they all agree.
    fn uniform(&self) -> Option<f32> {
        (self.nan == 0 && self.inf == 0 && self.min == self.max)
            .then_some(self.min)
            .flatten()
    }

    fn range(&self) -> String {
        let show = |v: Option<f32>| v.map_or("-".to_owned(), |v| format!("{v}"));
        let mut text = format!(
            "{}..{} over {} values",
            show(self.min),
            show(self.max),
            self.count
        );
        if self.nan + self.inf > 0 {
            text.push_str(&format!(", {} NaN, {} Inf", self.nan, self.inf));
        }
        text
    }
}

/// The layer-mixing signature: records of a trace no gate pinned to one
/// instantiation (every record carries the tag of [`kwb_runtime::UNGATED`]), each record uniform on
/// its own but the records not all one value, as several invocations of the kernel
/// (layers, chained tasks) each on its own uniform input give. Some(the number of
/// distinct values) when it fits, else None.
fn mixed_invocations<'r>(records: impl Iterator<Item = &'r TraceRecord>) -> Option<usize> {
    let ungated = kwb_runtime::tag(kwb_runtime::UNGATED);
    let mut values: Vec<f32> = Vec::new();
    for r in records {
        let uniform = r.nan_count == 0 && r.inf_count == 0 && r.vmin == r.vmax;
        if r.tag != ungated || !uniform {
            return None;
        }
        if !values.contains(&r.vmin) {
            values.push(r.vmin);
        }
    }
    (values.len() > 1).then_some(values.len())
}

/// Where the accumulator first departs from its model.
struct AccumulatorDeparture {
    why: String,
    k_tile: Option<i32>,
    factor: Option<f64>,
}

/// The stage `trace` shows for a run on all-ones inputs.
pub fn judge_ones(trace: &Trace, run: &OnesRun) -> Finding {
    reading(trace, run).against_output(run.output.as_ref(), "ones")
}

/// The ones trace's reading before it is held to the run's output.
fn reading(trace: &Trace, run: &OnesRun) -> Finding {
    let of_kind = |kind: Kind| trace.records.iter().filter(move |r| r.kind() == Some(kind));
    let mut evidence = Vec::new();

    // 1. Operands: one value each on a uniform input.
    let mut operand_bad = None;
    // The operands that hold NaN or Inf on this finite input.
    let mut non_finite: Vec<char> = Vec::new();
    let mut scale = Some(1.0_f32);
    // The product of each operand's one nonzero value, zeros set aside: what one
    // product is worth when the only odd operand values are zeros.
    let mut scale_beside_zeros = Some(1.0_f32);
    for (kind, letter) in [(Kind::OperandA, 'A'), (Kind::OperandB, 'B')] {
        let s = Stats::of(of_kind(kind).filter(|r| r.count > 0));
        if s.records == 0 {
            evidence.push(format!(
                "operand {letter}: not probed (taken as the input's 1)"
            ));
            continue;
        }
        evidence.push(format!("operand {letter}: {}", s.range()));
        if s.nan + s.inf > 0 {
            non_finite.push(letter);
        }
        let beside_zeros = s
            .max
            .filter(|_| s.nan == 0 && s.inf == 0 && (s.min == s.max || s.min == Some(0.0)));
        scale_beside_zeros = scale_beside_zeros.zip(beside_zeros).map(|(x, v)| x * v);
        match s.uniform() {
            Some(v) => scale = scale.map(|x| x * v),
            None => {
                scale = None;
                if operand_bad.is_none() {
                    let zeros_only = s.nan == 0 && s.inf == 0 && s.min == Some(0.0);
                    let mixed = mixed_invocations(of_kind(kind).filter(|r| r.count > 0))
                        .filter(|_| !run.one_launch);
                    operand_bad = Some((letter, zeros_only, mixed));
                }
            }
        }
    }

    // 2. Accumulator: per K tile, then after the mainloop. K times the operand
    // values is what every accumulator value ends at.
    let full = scale.map(|x| x * run.k as f32);
    let mut ks: Vec<i32> = of_kind(Kind::Accumulator)
        .filter(|r| r.k_tile >= 0)
        .map(|r| r.k_tile)
        .collect();
    ks.sort_unstable();
    ks.dedup();
    let tiles: Vec<(i32, Stats)> = ks
        .into_iter()
        .map(|t| {
            (
                t,
                Stats::of(of_kind(Kind::Accumulator).filter(|r| r.k_tile == t)),
            )
        })
        .collect();
    let mut acc_bad: Option<AccumulatorDeparture> = None;
    if let Some((t0, first)) = tiles.first() {
        // The first probed tile may be 1 (a peeled first K tile): one K tile's worth
        // is its value over t0 + 1.
        let step = first.max.unwrap_or(f32::NAN) / (*t0 as f32 + 1.0);
        for (t, s) in &tiles {
            let want = step * (*t as f32 + 1.0);
            if !s.exactly(want) && acc_bad.is_none() {
                acc_bad = Some(AccumulatorDeparture {
                    why: format!(
                        "after K tile {t}: {} (expected {want} everywhere: K tile {t0} gave {step} per tile)",
                        s.range()
                    ),
                    k_tile: Some(*t),
                    factor: s
                        .max
                        .filter(|_| s.uniform().is_some() && want != 0.0)
                        .map(|v| f64::from(v) / f64::from(want)),
                });
            }
        }
        evidence.push(format!(
            "accumulator: {} K tiles probed, {} after tile {t0}, {} after tile {}",
            tiles.len(),
            first.range(),
            tiles.last().map_or(String::new(), |(_, s)| s.range()),
            tiles.last().map_or(0, |(t, _)| *t)
        ));
    }
    let done = Stats::of(of_kind(Kind::Accumulator).filter(|r| r.k_tile < 0));
    let acc_seen = !tiles.is_empty() || done.records > 0;
    if done.records > 0 {
        evidence.push(format!("accumulator after the mainloop: {}", done.range()));
        let wrong_end = full.is_some_and(|f| done.max != Some(f));
        if (wrong_end || done.nan + done.inf > 0) && acc_bad.is_none() {
            acc_bad = Some(AccumulatorDeparture {
                why: format!(
                    "after the mainloop: {} (expected largest value K·a·b = {})",
                    done.range(),
                    full.map_or("?".to_owned(), |f| f.to_string())
                ),
                k_tile: None,
                factor: full
                    .zip(done.max)
                    .filter(|(f, _)| *f != 0.0 && done.uniform().is_some())
                    .map(|(f, v)| f64::from(v) / f64::from(f)),
            });
        }
    } else {
        evidence.push("accumulator after the mainloop: not recorded".to_owned());
    }

    // 3. Output.
    let epilogue = Stats::of(of_kind(Kind::Epilogue).filter(|r| r.count > 0));
    if epilogue.records > 0 {
        evidence.push(format!("epilogue values: {}", epilogue.range()));
    }
    let output_wrong = run.output.as_ref().is_some_and(OutputCheck::wrong);
    evidence.push(OutputCheck::line(run.output.as_ref(), "ones"));

    let operands = || of_kind(Kind::OperandA).chain(of_kind(Kind::OperandB));
    let bounded = operands().all(|r| r.row_bound().is_some());
    // Padding rows reach only their own rows of the accumulator, and a CTA that
    // computes a tile has a cell of the problem in it: an accumulator that is NaN or Inf
    // in every value the trace holds, from the first K tile probed, under one operand
    // that alone holds NaN or Inf, got them in rows of the problem, not of the padding.
    let first_acc = tiles.first().map(|(_, s)| s).unwrap_or(&done);
    let poisoned_everywhere = matches!(non_finite.as_slice(), [_])
        && first_acc.count > 0
        && first_acc.nan + first_acc.inf == first_acc.count;
    let padded =
        (run.m % PADDING_QUANTUM != 0 || run.n % PADDING_QUANTUM != 0) && !poisoned_everywhere;
    let operands_probed = operands().next().is_some();
    let base = Finding::open(evidence);
    if let Some((letter, zeros_only, mixed)) = operand_bad {
        let mut finding = Finding {
            stage: Some(Stage::OperandLoad),
            alternatives: vec![Stage::Descriptor],
            ..base
        };
        if padded && !bounded {
            let confound = Confound::PaddingRows { m: run.m, n: run.n };
            finding.summary = format!(
                "operand-load/descriptor? (operand {letter} is not uniform, but {})",
                confound.describe()
            );
            finding.confound = Some(confound);
        } else if let Some(values) = mixed {
            let confound = Confound::LayerMixing { values };
            finding.summary = format!(
                "operand-load/descriptor? (operand {letter} is not uniform, but {})",
                confound.describe()
            );
            finding.confound = Some(confound);
        } else if let Some(why) = zeros_only
            .then(|| {
                zeros_cost_products(trace, &tiles, acc_bad.as_ref(), scale_beside_zeros, run.k)
            })
            .flatten()
        {
            finding.summary = format!(
                "operand-load/descriptor (operand {letter} holds zeros among equal values, and {why})"
            );
            finding.k_tile = acc_bad.as_ref().and_then(|a| a.k_tile);
            finding.status = Status::Verdict;
        } else if zeros_only {
            finding.summary = format!(
                "operand-load/descriptor (operand {letter} holds {})",
                Confound::ZerosAmongEqual.describe()
            );
            finding.confound = Some(Confound::ZerosAmongEqual);
        } else if poisoned_everywhere && non_finite == [letter] {
            finding.summary = format!(
                "operand-load/descriptor (operand {letter} holds NaN/Inf on a finite input, the other operand none, and every accumulator value of the traced CTA is NaN/Inf from the first K tile probed: they are in rows of the problem, which padding rows cannot reach: a load from outside the operand)"
            );
            finding.status = Status::Verdict;
        } else {
            finding.summary = format!(
                "operand-load/descriptor (operand {letter} is not uniform on a uniform input)"
            );
            finding.status = Status::Verdict;
        }
        finding
    } else if let Some(acc) = acc_bad {
        if operands_probed {
            Finding {
                stage: Some(Stage::Mma),
                status: Status::Verdict,
                k_tile: acc.k_tile,
                factor: acc.factor,
                summary: format!("mma (operands uniform; accumulator {})", acc.why),
                ..base
            }
        } else {
            Finding {
                stage: Some(Stage::Mma),
                alternatives: vec![Stage::OperandLoad, Stage::Descriptor],
                confound: Some(Confound::OperandsNotProbed),
                k_tile: acc.k_tile,
                factor: acc.factor,
                summary: format!(
                    "mma or operand-load/descriptor (accumulator {}; {})",
                    acc.why,
                    Confound::OperandsNotProbed.describe()
                ),
                ..base
            }
        }
    } else if let Some(output) = run.output.as_ref().filter(|_| output_wrong && !acc_seen) {
        // Nothing of the accumulator to clear: the epilogue is one candidate of several.
        Finding {
            stage: Some(Stage::Epilogue),
            alternatives: vec![Stage::Mma, Stage::OperandLoad, Stage::Descriptor],
            confound: Some(Confound::AccumulatorNotRecorded),
            factor: Some(output.ratio).filter(|r| r.is_finite()),
            summary: format!(
                "epilogue? (output wrong, but {})",
                Confound::AccumulatorNotRecorded.describe()
            ),
            ..base
        }
    } else if let Some(output) = run.output.as_ref().filter(|_| output_wrong) {
        let region = traced_origin(trace);
        let factor = Some(output.ratio).filter(|r| r.is_finite());
        match joinable(output, region.as_ref()) {
            Ok(()) => Finding {
                stage: Some(Stage::Epilogue),
                status: Status::Verdict,
                factor,
                summary: "epilogue (operands and accumulator exact; output wrong)".to_owned(),
                ..base
            },
            Err(why) => Finding {
                stage: Some(Stage::Epilogue),
                alternatives: vec![Stage::Mma, Stage::OperandLoad, Stage::Descriptor],
                confound: Some(Confound::ElsewhereThanTraced),
                factor,
                summary: format!(
                    "epilogue? (operands and accumulator exact in the traced CTA; output wrong, but {why})"
                ),
                ..base
            },
        }
    } else if run.output.is_none() {
        Finding {
            summary: format!("operands and accumulator exact on ones; {OUTPUT_UNCHECKED}"),
            ..base
        }
    } else {
        Finding {
            clean: true,
            summary: "nothing on ones (operands, accumulator and output exact)".to_owned(),
            ..base
        }
    }
}

/// Whether zeros among the operands' equal values cost real products, which no
/// padding or out-of-bounds fill can: Some(why) when
///
/// - the accumulator first departs from its model in a K tile `t` whose operand
///   records hold zeros, and no earlier tile's do, with one value everywhere (every accumulator value of the
///   CTA short by the same amount: padding rows would leave the real rows' values
///   whole and their own at nothing),
/// - short by less than one K tile's worth (a tile dropped or counted twice by the
///   MMA moves it by whole tiles), and
/// - the probed K tiles, each worth the first one's step, make exactly K products
///   (the K loop covers K in whole tiles, so no tile reads past K and no k is filled
///   with zeros because it lies out of bounds).
///
/// `scale` is the product of the operands' one nonzero value each; `k` the problem's K.
fn zeros_cost_products(
    trace: &Trace,
    tiles: &[(i32, Stats)],
    departure: Option<&AccumulatorDeparture>,
    scale: Option<f32>,
    k: u64,
) -> Option<String> {
    let t = departure?.k_tile?;
    let scale = scale.filter(|s| *s != 0.0)?;
    let (t0, first) = tiles.first()?;
    let step = first.uniform()? / (*t0 as f32 + 1.0);
    let (last, _) = tiles.last()?;
    let whole = step * (*last as f32 + 1.0);
    let full = scale * k as f32;
    if step <= 0.0 || whole != full {
        return None;
    }
    let (_, at) = tiles.iter().find(|(tile, _)| *tile == t)?;
    let got = at.uniform()?;
    let want = step * (t as f32 + 1.0);
    let short = want - got;
    if !(short > 0.0 && short < step) {
        return None;
    }
    let zeros_in = |tile: &dyn Fn(i32) -> bool| {
        trace.records.iter().any(|r| {
            matches!(r.kind(), Some(Kind::OperandA | Kind::OperandB))
                && tile(r.k_tile)
                && r.count > 0
                && r.vmin == 0.0
        })
    };
    // Zeros that begin where the shortfall begins; zeros in every tile are a slot the
    // probe reads and the MMA does not (a padding register), not a lost value.
    if !zeros_in(&|k| k == t) || zeros_in(&|k| (0..t).contains(&k)) {
        return None;
    }
    let products = short / scale;
    Some(format!(
        "in K tile {t}, where they are, every accumulator value falls short by {products} product(s): {got} where {want}; the {} probed K tiles of {} make K = {k} whole, so no k lies out of bounds, and padding rows would leave the real rows' values whole",
        last + 1,
        step / scale
    ))
}
